/*
 * match.c - which rules of a rule set match a host or an address.
 *
 * Host-keyed rules (exact, *.suffix, .suffix) live in one hash table keyed
 * by name.  A host "a.b.example.com" can only be matched by the keys that
 * are its suffixes at label boundaries, so a lookup probes at most one slot
 * run per label.  The hash runs from the last byte towards the first, which
 * makes the hash of every suffix fall out of one pass over the host.
 */
#include <string.h>

#include "policy_int.h"

/* FNV-1a, fed from the end of the name. */
uint64_t suffix_hash_step(uint64_t h, unsigned char c)
{
    return (h ^ c) * 1099511628211ULL;
}

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

static const struct entry *lookup(const struct ruleset *rs, const char *key, size_t len, uint64_t h)
{
    if (rs->slots == NULL)
        return NULL;
    h |= 1;
    for (size_t s = h & rs->slot_mask; rs->slots[s].hash != 0; s = (s + 1) & rs->slot_mask) {
        if (rs->slots[s].hash != h)
            continue;
        const struct entry *e = &rs->entries[rs->slots[s].entry];
        if (e->klen == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    return NULL;
}

/* Note the first deny and the first allow among an entry's rules that
 * apply at this position (apex: the key is the whole host). */
static void note_entry(const struct ruleset *rs, const struct entry *e, bool apex, uint16_t port,
                       int64_t now, struct match *m)
{
    for (uint32_t i = 0; i < e->count; i++) {
        const struct rule *r = &rs->rules[rs->keyed[e->first + i]];
        bool kind_ok = r->kind == RK_APEX_SUB || (apex ? r->kind == RK_EXACT : r->kind == RK_SUB);
        if (!kind_ok || !port_ok(r, port) || !active(r, now))
            continue;
        if (r->deny && m->deny == NULL)
            m->deny = r;
        else if (!r->deny && m->allow == NULL)
            m->allow = r;
    }
}

/* A regex or `*` rule.  A regex that hits its match limit counts as a
 * match for a deny (fail closed) and as no match for an allow. */
static bool regex_hit(const struct rule *r, const struct policy *p, const struct policy_host *h)
{
    if (r->kind == RK_ANY)
        return true;
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = pcre2_match(r->u.re, (PCRE2_SPTR)h->text, h->len, 0, 0, md, p->mctx);
    pcre2_match_data_free(md);
    return rc >= 0 || (r->deny && rc != PCRE2_ERROR_NOMATCH);
}

static const struct rule *first_regex(const struct ruleset *rs, const uint32_t *idx, size_t n,
                                      const struct policy *p, const struct policy_host *h,
                                      uint16_t port, int64_t now)
{
    for (size_t i = 0; i < n; i++) {
        const struct rule *r = &rs->rules[idx[i]];
        if (port_ok(r, port) && active(r, now) && regex_hit(r, p, h))
            return r;
    }
    return NULL;
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
    uint64_t hash = SUFFIX_HASH_SEED;
    const struct entry *e;

    for (size_t i = h->len; i > 0; i--) {
        hash = suffix_hash_step(hash, (unsigned char)h->text[i - 1]);
        if (i - 1 == 0 || h->text[i - 2] == '.') {
            e = lookup(rs, h->text + i - 1, h->len - (i - 1), hash);
            if (e != NULL)
                note_entry(rs, e, i - 1 == 0, port, now, m);
        }
    }
    if (m->deny == NULL)
        m->deny = first_regex(rs, rs->regex_deny, rs->n_regex_deny, p, h, port, now);
    if (m->deny == NULL && m->allow == NULL)
        m->allow = first_regex(rs, rs->regex_allow, rs->n_regex_allow, p, h, port, now);
}

void ruleset_match_name(const struct ruleset *rs, const struct policy *p,
                        const struct policy_host *h, uint16_t port, int64_t now, struct match *m)
{
    if (h->kind == POLICY_HOST_NAME) {
        match_name(rs, p, h, port, now, m);
        return;
    }
    if (m->deny == NULL)
        m->deny = ruleset_match_ip(rs, rs->ip_deny, rs->n_ip_deny, h->addr, port, now);
    if (m->deny == NULL && m->allow == NULL)
        m->allow = ruleset_match_ip(rs, rs->ip_allow, rs->n_ip_allow, h->addr, port, now);
}
