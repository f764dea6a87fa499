/*
 * match.c - which rules of a rule set match a host or an address.
 *
 * A host "a.b.example.com" can only be matched by host rules and regex
 * suffix keys that are its suffixes at label boundaries: "a.b.example.com",
 * "b.example.com", "example.com", "com".  The hash runs from the last byte
 * towards the first, so the hash of every suffix falls out of one pass over
 * the host; all their slots are then fetched together (prefetch), so a
 * decision waits for memory about twice, not once per label.
 */
#include <string.h>

#include "policy_int.h"

/* Regex candidates gathered for one host before they are tried in file
 * order; more than this (a pathological preset) and every regex is tried. */
#define MAX_CANDIDATES 256

static bool port_ok(const struct rule *r, uint16_t port)
{
    switch (r->ports_kind) {
    case PORTS_ANY: return true;
    case PORTS_DEFAULT: return port == 443 || port == 80;
    default:
        for (uint16_t i = 0; i < r->n_ports; i++)
            if (r->ports[i] == port)
                return true;
        return false;
    }
}

static bool active(const struct rule *r, int64_t now)
{
    return now < r->until;
}

struct suffix {
    size_t off; /* in the host */
    uint64_t hash;
};

/* The host's suffixes at label boundaries, shortest first. */
static size_t suffixes(const struct policy_host *h, struct suffix *out)
{
    uint64_t hash = SUFFIX_HASH_SEED;
    size_t n = 0;
    for (size_t i = h->len; i > 0; i--) {
        hash = suffix_hash_step(hash, (unsigned char)h->text[i - 1]);
        if (i == 1 || h->text[i - 2] == '.')
            out[n++] = (struct suffix){i - 1, hash};
    }
    return n;
}

static void prefetch_slots(const struct htab *t, const struct suffix *s, size_t n)
{
    if (t->slots == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        __builtin_prefetch(&t->slots[s[i].hash & t->mask]);
}

static void hit_rule(struct hit *h, const struct rule *r)
{
    *h = (struct hit){r->file, r->line, r->raw, r->private_ok};
}

static bool crule_port_ok(const struct ruleset *rs, const struct crule *c, uint16_t port)
{
    if (c->flags & CR_PORTS_ANY)
        return true;
    if (!(c->flags & CR_PORTS_LIST))
        return port == 443 || port == 80;
    if (c->port[0] == port || c->port[1] == port)
        return true;
    return (c->flags & CR_PORTS_MORE) && port_ok(&rs->rules[c->rule], port);
}

/* An allow rule h that matches host and port, with its request options
 * q (NULL: none): the first allow, and the first that passes the request
 * (or passes its path only). */
static void note_allow(struct match *m, const struct hit *h, const struct reqrule *q)
{
    if (m->allow.file == NULL)
        m->allow = *h;
    if (m->pass.file != NULL)
        return;
    if (q == NULL) {
        m->pass = *h;
        return;
    }
    if (m->rq == NULL)
        return; /* it admits some requests, and there is none to judge */
    switch (reqrule_judge(q, m->rq)) {
    case REQ_ADMITTED: m->pass = *h; return;
    case REQ_METHOD_REFUSED:
        if (m->near.file == NULL)
            m->near = *h;
        return;
    case REQ_PATH_REFUSED: return;
    }
}

/* Whether m is settled: a deny, or an allow that passes, was found. */
static bool settled(const struct match *m)
{
    return m->deny.file != NULL || m->pass.file != NULL;
}

/* Note the first deny and the allows (note_allow) among a key's rules
 * that apply at this position (apex: the key is the whole host), and
 * whether an inject rule is among them. */
static void note_rules(const struct ruleset *rs, const struct crule *c, uint32_t n, bool apex,
                       uint16_t port, int64_t now, struct match *m)
{
    for (uint32_t i = 0; i < n; i++, c++) {
        bool kind_ok = c->kind == RK_APEX_SUB || (apex ? c->kind == RK_EXACT : c->kind == RK_SUB);
        if (!kind_ok || !crule_port_ok(rs, c, port) ||
            ((c->flags & CR_UNTIL) && !active(&rs->rules[c->rule], now)))
            continue;
        m->inject |= (c->flags & CR_INJECT) != 0;
        bool deny = (c->flags & CR_DENY) != 0;
        if (deny ? m->deny.file != NULL : m->pass.file != NULL)
            continue; /* one of its kind decides already */
        struct hit h = {rs->files[c->file], c->line, (c->flags & CR_RAW) != 0,
                        (c->flags & CR_PRIVATE_OK) != 0};
        if (deny)
            m->deny = h;
        else
            note_allow(m, &h, c->req ? rs->rules[c->rule].req : NULL);
    }
}

/* Does a regex (or `*`) rule match?  A regex that hits its match limit
 * counts as a match for a deny (fail closed), as no match for an allow. */
static bool regex_hit(const struct rule *r, const struct policy *p, const struct policy_host *h,
                      pcre2_match_data **md)
{
    if (r->kind == RK_ANY)
        return true;
    if (*md == NULL)
        *md = pcre2_match_data_create(1, NULL);
    if (*md == NULL)
        return r->deny;
    int rc = pcre2_match(r->u.rx.re, (PCRE2_SPTR)h->text, h->len, 0, 0, *md, p->mctx);
    return rc >= 0 || (r->deny && rc != PCRE2_ERROR_NOMATCH);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The regex rules worth trying on this host, in file order: those whose
 * literal suffix is one of its suffixes, and those without one.  Returns
 * false when there are too many to gather (then try them all). */
static bool regex_candidates(const struct ruleset *rs, const struct policy_host *h,
                             const struct suffix *s, size_t n, uint32_t *out, size_t *n_out)
{
    size_t k = 0;
    if (rs->n_regex_free > MAX_CANDIDATES)
        return false;
    memcpy(out, rs->regex_free, rs->n_regex_free * sizeof(uint32_t));
    k = rs->n_regex_free;
    for (size_t i = 0; i < n && rs->regex_keys.slots != NULL; i++) {
        const struct hent *e =
            htab_find(&rs->regex_keys, h->text + s[i].off, h->len - s[i].off, s[i].hash);
        const struct crule *c;
        if (e == NULL)
            continue;
        uint32_t count = hent_rules(&rs->regex_keys, e, &c);
        if (k + count > MAX_CANDIDATES)
            return false;
        for (uint32_t j = 0; j < count; j++)
            out[k++] = c[j].rule;
    }
    if (k > 1)
        qsort(out, k, sizeof(uint32_t), cmp_u32);
    *n_out = k;
    return true;
}

/* The regex rules with the given deny flag among idx[0..n) that match,
 * in order: the first deny into m->deny, the allows to note_allow, until
 * m is settled. */
static void note_regexes(const struct ruleset *rs, const uint32_t *idx, size_t n, bool deny,
                         const struct policy *p, const struct policy_host *h, uint16_t port,
                         int64_t now, pcre2_match_data **md, struct match *m)
{
    for (size_t i = 0; i < n && (deny ? m->deny.file == NULL : !settled(m)); i++) {
        const struct rule *r = &rs->rules[idx[i]];
        struct hit hr;
        if (r->deny != deny || !port_ok(r, port) || !active(r, now) || !regex_hit(r, p, h, md))
            continue;
        hit_rule(&hr, r);
        if (deny) {
            m->deny = hr;
            return;
        }
        note_allow(m, &hr, r->req);
    }
}

static void match_regexes(const struct ruleset *rs, const struct policy *p,
                          const struct policy_host *h, const struct suffix *s, size_t n,
                          uint16_t port, int64_t now, struct match *m)
{
    uint32_t cand[MAX_CANDIDATES];
    size_t n_cand = 0;
    pcre2_match_data *md = NULL;

    bool want_deny = m->deny.file == NULL && rs->n_regex_deny > 0;
    bool want_allow = !settled(m) && rs->n_regex_allow > 0;
    if (!want_deny && !want_allow)
        return;
    bool narrowed = regex_candidates(rs, h, s, n, cand, &n_cand);
    if (want_deny)
        note_regexes(rs, narrowed ? cand : rs->regex_deny, narrowed ? n_cand : rs->n_regex_deny,
                     true, p, h, port, now, &md, m);
    if (want_allow)
        note_regexes(rs, narrowed ? cand : rs->regex_allow, narrowed ? n_cand : rs->n_regex_allow,
                     false, p, h, port, now, &md, m);
    pcre2_match_data_free(md);
}

/* Whether name h ends in the label sequence key (klen bytes) at a label
 * boundary, with at least one label before it. */
static bool strict_suffix(const struct policy_host *h, const char *key, size_t klen)
{
    return h->len > klen && h->text[h->len - klen - 1] == '.' &&
           memcmp(h->text + h->len - klen, key, klen) == 0;
}

bool rule_names_host(const struct rule *r, const struct policy_host *h)
{
    if (h->kind != POLICY_HOST_NAME)
        return false;
    size_t klen = strlen(r->u.key);
    bool apex = h->len == klen && memcmp(h->text, r->u.key, klen) == 0;
    switch (r->kind) {
    case RK_EXACT: return apex;
    case RK_SUB: return strict_suffix(h, r->u.key, klen);
    case RK_APEX_SUB: return apex || strict_suffix(h, r->u.key, klen);
    default: return false;
    }
}

bool rule_matches_host(const struct rule *r, const struct policy_host *h, uint16_t port,
                       int64_t now)
{
    return port_ok(r, port) && active(r, now) && rule_names_host(r, h);
}

const struct rule *ruleset_match_ip(const struct ruleset *rs, const uint32_t *idx, size_t n,
                                    const uint8_t addr[16], uint16_t port, int64_t now)
{
    for (size_t i = 0; i < n; i++) {
        const struct rule *r = &rs->rules[idx[i]];
        struct cidr c;
        memcpy(c.addr, r->u.addr, 16);
        c.plen = r->plen;
        if (port_ok(r, port) && active(r, now) && cidr_contains(&c, addr))
            return r;
    }
    return NULL;
}

static void match_name(const struct ruleset *rs, const struct policy *p,
                       const struct policy_host *h, uint16_t port, int64_t now, struct match *m)
{
    struct suffix s[POLICY_HOST_MAX / 2 + 1];
    size_t n = suffixes(h, s);

    prefetch_slots(&rs->hosts, s, n);
    for (size_t i = 0; i < n && rs->hosts.slots != NULL; i++) {
        const struct hent *e =
            htab_find(&rs->hosts, h->text + s[i].off, h->len - s[i].off, s[i].hash);
        const struct crule *c;
        if (e != NULL) {
            uint32_t count = hent_rules(&rs->hosts, e, &c);
            note_rules(rs, c, count, s[i].off == 0, port, now, m);
        }
    }
    match_regexes(rs, p, h, s, n, port, now, m);
}

void ruleset_match_name(const struct ruleset *rs, const struct policy *p,
                        const struct policy_host *h, uint16_t port, int64_t now, struct match *m)
{
    if (h->kind == POLICY_HOST_NAME) {
        match_name(rs, p, h, port, now, m);
        return;
    }
    const struct rule *r;
    if (m->deny.file == NULL &&
        (r = ruleset_match_ip(rs, rs->ip_deny, rs->n_ip_deny, h->addr, port, now)) != NULL)
        hit_rule(&m->deny, r);
    if (!settled(m) &&
        (r = ruleset_match_ip(rs, rs->ip_allow, rs->n_ip_allow, h->addr, port, now)) != NULL) {
        struct hit hr;
        hit_rule(&hr, r);
        note_allow(m, &hr, r->req); /* (an `ip` rule takes no request options) */
    }
}
