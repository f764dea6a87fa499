/*
 * policy.c - building a snapshot from preset texts, bindings, and the two
 * decision phases.
 */
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

/* Backtracking a regex may do on one host before it counts as failed. */
#define REGEX_MATCH_LIMIT 100000
#define REGEX_DEPTH_LIMIT 1000

struct preset_src {
    char *name, *file, *text;
    size_t len;
};

struct policy_builder {
    struct preset_src *src;
    size_t n_src;
    struct cidr *deny, *allow;
    size_t n_deny, n_allow;
    bool deny_given;
    struct MMDB_s *country, *asn;
    struct policy_diag early; /* range errors, reported at finish */
};

struct policy_builder *policy_builder_new(void)
{
    return xcalloc(1, sizeof(struct policy_builder));
}

void policy_builder_add_preset(struct policy_builder *b, const char *name, const char *file,
                               const char *text, size_t len)
{
    b->src = xrealloc(b->src, (b->n_src + 1) * sizeof(*b->src));
    b->src[b->n_src++] = (struct preset_src){
        xstrndup(name, strlen(name)), xstrndup(file, strlen(file)), xstrndup(text, len), len};
}

static void add_range(struct policy_builder *b, bool deny, const char *spec, const char *where)
{
    struct cidr c, **list = deny ? &b->deny : &b->allow;
    size_t *n = deny ? &b->n_deny : &b->n_allow;
    const struct cidr *defaults;
    char why[96];

    if (deny && strcmp(spec, "default") == 0) {
        size_t nd = cidr_default_deny(&defaults);
        *list = xrealloc(*list, (*n + nd) * sizeof(**list));
        memcpy(*list + *n, defaults, nd * sizeof(**list));
        *n += nd;
        return;
    }
    if (!cidr_parse(spec, strlen(spec), &c, why, sizeof(why))) {
        policy_diag_add(&b->early, "%s: expected %s%s, found '%s'", where, why,
                        deny ? " (or 'default')" : "", spec);
        return;
    }
    *list = xrealloc(*list, (*n + 1) * sizeof(**list));
    (*list)[(*n)++] = c;
}

void policy_builder_deny_range(struct policy_builder *b, const char *spec, const char *where)
{
    b->deny_given = true;
    add_range(b, true, spec, where);
}

void policy_builder_allow_range(struct policy_builder *b, const char *spec, const char *where)
{
    add_range(b, false, spec, where);
}

void policy_builder_deny_addr(struct policy_builder *b, const uint8_t addr[16])
{
    struct cidr c = {.plen = 128};

    /* deny_given stays as it is: an own address is not a deny-range line
     * and must not stand in for the default list. */
    memcpy(c.addr, addr, 16);
    b->deny = xrealloc(b->deny, (b->n_deny + 1) * sizeof(*b->deny));
    b->deny[b->n_deny++] = c;
}

void policy_builder_geo(struct policy_builder *b, struct MMDB_s *country, struct MMDB_s *asn)
{
    b->country = country;
    b->asn = asn;
}

static void builder_free(struct policy_builder *b)
{
    for (size_t i = 0; i < b->n_src; i++) {
        free(b->src[i].name);
        free(b->src[i].file);
        free(b->src[i].text);
    }
    free(b->src);
    free(b->deny);
    free(b->allow);
    policy_diag_free(&b->early);
    free(b);
}

static void policy_free(struct policy *p)
{
    for (size_t i = 0; i < p->n_presets; i++)
        ruleset_free(&p->presets[i]);
    free(p->presets);
    free(p->deny_ranges);
    free(p->allow_ranges);
    pcre2_match_context_free(p->mctx);
    pool_free(&p->pool);
    free(p);
}

/* Feed a text to the parser line by line. */
static void parse_text(struct parse_ctx *ctx, struct ruleset *rs, const char *text, size_t len)
{
    unsigned lineno = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - text) : len;
        ruleset_parse_line(ctx, rs, text + i, end - i, ++lineno);
        i = end + 1;
    }
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct preset_src *)a)->name, ((const struct preset_src *)b)->name);
}

static const struct ruleset *find_preset(const struct policy *p, const char *name)
{
    size_t lo = 0, hi = p->n_presets;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(name, p->presets[mid].name);
        if (c == 0)
            return &p->presets[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* Include expansion state per preset. */
enum visit { UNSEEN, EXPANDING, EXPANDED };

struct expand {
    struct policy *pol;
    struct parse_ctx *ctx; /* per preset: its include lines */
    enum visit *state;
    struct policy_diag *diag;
};

/* Append preset i's included rules (expanded first).  A cycle is reported
 * at the include line that closes it. */
static void expand(struct expand *x, size_t i)
{
    struct ruleset *rs = &x->pol->presets[i];
    x->state[i] = EXPANDING;
    for (size_t k = 0; k < x->ctx[i].n_includes; k++) {
        const struct include_ref *inc = &x->ctx[i].includes[k];
        const struct ruleset *other = find_preset(x->pol, inc->name);
        if (other == NULL) {
            policy_diag_add(x->diag,
                            "%s:%u:%u: expected the name of a preset (a file NAME.allow), found "
                            "'%s': no such preset",
                            rs->file, inc->line, inc->col, inc->name);
            continue;
        }
        size_t j = (size_t)(other - x->pol->presets);
        if (x->state[j] == EXPANDING) {
            policy_diag_add(x->diag,
                            "%s:%u:%u: include cycle: '%s' includes '%s', which includes it "
                            "again",
                            rs->file, inc->line, inc->col, rs->name, inc->name);
            continue;
        }
        if (x->state[j] == UNSEEN)
            expand(x, j);
        for (size_t r = 0; r < other->n_rules; r++)
            ruleset_add_rule(rs, &other->rules[r]);
        if (other->n_geo > 0) {
            rs->geo = xrealloc(rs->geo, (rs->n_geo + other->n_geo) * sizeof(*rs->geo));
            memcpy(rs->geo + rs->n_geo, other->geo, other->n_geo * sizeof(*rs->geo));
            rs->n_geo += other->n_geo;
        }
        rs->needs_country |= other->needs_country;
        rs->needs_asn |= other->needs_asn;
    }
    x->state[i] = EXPANDED;
}

/* A geo rule needs its database: name the first line that asks for one. */
static void check_geo(const struct policy *p, const struct ruleset *rs, struct policy_diag *d)
{
    for (size_t i = 0; i < rs->n_geo; i++) {
        const struct geo_rule *g = &rs->geo[i];
        bool country = g->cc[0] != '\0';
        if (country ? p->geo_country == NULL : p->geo_asn == NULL) {
            policy_diag_add(d, "%s:%u:1: 'deny %s' needs the %s database (%s in egressd.conf)",
                            g->file, g->line, country ? "country" : "asn",
                            country ? "GeoIP2 country" : "ASN",
                            country ? "geoip-country" : "geoip-asn");
            return;
        }
    }
}

static void parse_presets(struct policy *pol, struct policy_builder *b, struct parse_ctx *ctx,
                          struct policy_diag *diag)
{
    if (b->n_src > 1)
        qsort(b->src, b->n_src, sizeof(*b->src), by_name);
    pol->presets = xcalloc(b->n_src, sizeof(*pol->presets));
    for (size_t i = 0; i < b->n_src; i++) {
        struct ruleset *rs = &pol->presets[i];
        if (i > 0 && strcmp(b->src[i].name, b->src[i - 1].name) == 0)
            policy_diag_add(diag, "%s: preset '%s' is defined twice", b->src[i].file,
                            b->src[i].name);
        rs->name = pool_strndup(&pol->pool, b->src[i].name, strlen(b->src[i].name));
        rs->file = pool_strndup(&pol->pool, b->src[i].file, strlen(b->src[i].file));
        ctx[i] = (struct parse_ctx){.pool = &pol->pool, .diag = diag, .file = rs->file};
        parse_text(&ctx[i], rs, b->src[i].text, b->src[i].len);
        pol->n_presets++;
    }
}

struct policy *policy_builder_finish(struct policy_builder *b, struct policy_diag *diag)
{
    struct policy *pol = xcalloc(1, sizeof(*pol));
    struct parse_ctx *ctx = xcalloc(b->n_src, sizeof(*ctx));
    struct expand x = {pol, ctx, xcalloc(b->n_src, sizeof(enum visit)), diag};
    size_t errors = diag->n;

    atomic_init(&pol->refs, 1);
    for (size_t i = 0; i < b->early.n; i++)
        policy_diag_add(diag, "%s", b->early.lines[i]);
    pol->geo_country = b->country;
    pol->geo_asn = b->asn;
    parse_presets(pol, b, ctx, diag);
    for (size_t i = 0; i < pol->n_presets; i++)
        if (x.state[i] == UNSEEN)
            expand(&x, i);
    for (size_t i = 0; i < pol->n_presets; i++) {
        check_geo(pol, &pol->presets[i], diag);
        if (pol->presets[i].read_only)
            ruleset_read_only(&pol->presets[i], &pol->pool);
        ruleset_index(&pol->presets[i]);
    }
    if (!b->deny_given)
        add_range(b, true, "default", "");
    pol->deny_ranges = b->deny;
    pol->n_deny_ranges = b->n_deny;
    pol->allow_ranges = b->allow;
    pol->n_allow_ranges = b->n_allow;
    b->deny = b->allow = NULL;
    pol->mctx = pcre2_match_context_create(NULL);
    pcre2_set_match_limit(pol->mctx, REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(pol->mctx, REGEX_DEPTH_LIMIT);

    for (size_t i = 0; i < b->n_src; i++) {
        for (size_t k = 0; k < ctx[i].n_includes; k++)
            free(ctx[i].includes[k].name);
        free(ctx[i].includes);
    }
    free(ctx);
    free(x.state);
    builder_free(b);
    if (diag->n > errors) {
        policy_free(pol);
        return NULL;
    }
    return pol;
}

struct policy *policy_ref(struct policy *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void policy_unref(struct policy *p)
{
    if (p != NULL && atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        policy_free(p);
}

const char *policy_preset_name(const struct policy *p, size_t i)
{
    return i < p->n_presets ? p->presets[i].name : NULL;
}

long policy_preset_rules(const struct policy *p, const char *name)
{
    const struct ruleset *rs = find_preset(p, name);
    return rs ? (long)(rs->n_rules + rs->n_geo) : -1;
}

struct policy_binding *policy_binding_new(struct policy *p, const char *preset,
                                          const char *const *extra, size_t n_extra,
                                          const char *origin, struct policy_diag *diag)
{
    const struct ruleset *rs = find_preset(p, preset);
    size_t errors = diag->n;

    if (rs == NULL) {
        policy_diag_add(diag, "%s: expected the name of a preset, found '%s': no such preset",
                        origin, preset);
        return NULL;
    }
    struct policy_binding *b = xcalloc(1, sizeof(*b));
    struct parse_ctx ctx = {.pool = &b->pool, .diag = diag, .extras = true};
    ctx.file = pool_strndup(&b->pool, origin, strlen(origin));
    for (size_t i = 0; i < n_extra; i++)
        ruleset_parse_line(&ctx, &b->extras, extra[i], strlen(extra[i]), (unsigned)i + 1);
    if (rs->read_only)
        ruleset_read_only(&b->extras, &b->pool);
    ruleset_index(&b->extras);
    b->policy = policy_ref(p);
    b->preset = rs;
    b->n_injects = rs->n_injects + b->extras.n_injects;
    b->n_push = rs->n_push_rules + b->extras.n_push_rules;
    if (diag->n > errors) {
        policy_binding_free(b);
        return NULL;
    }
    return b;
}

void policy_binding_free(struct policy_binding *b)
{
    if (b == NULL)
        return;
    ruleset_free(&b->extras);
    pool_free(&b->pool);
    policy_unref(b->policy);
    free(b);
}

const char *policy_binding_preset(const struct policy_binding *b)
{
    return b->preset->name;
}

bool policy_binding_report(const struct policy_binding *b)
{
    return b->preset->report;
}

static void verdict(struct policy_verdict *v, const struct policy_binding *b, bool deny,
                    enum policy_reason reason, const struct hit *h)
{
    v->decision = !deny ? POLICY_ALLOW : b->preset->report ? POLICY_WOULD_DENY : POLICY_DENY;
    v->reason = reason;
    v->rule = (struct policy_rule_ref){h ? h->file : NULL, h ? h->line : 0};
}

/* The verdict of a match m whose rules allow the host only for some
 * requests (no rule passed): with no request, an allow that says each
 * request must be judged; with one, a denial of it. */
static void some_requests(struct policy_verdict *v, const struct policy_binding *b,
                          const struct match *m)
{
    if (m->rq == NULL) {
        verdict(v, b, false, POLICY_R_ALLOWED, &m->allow);
        v->private_ok = m->allow.private_ok;
        v->requests = true;
    } else if (m->near.file != NULL) {
        verdict(v, b, true, POLICY_R_METHOD_NOT_ALLOWED, &m->near);
    } else {
        verdict(v, b, true, POLICY_R_PATH_NOT_ALLOWED, &m->allow);
    }
}

/* The name phase's part of `git-push` rules, on a verdict that is not a
 * deny: v->push when one matches host and port; and a request that
 * cannot be read (a tunnel that is not intercepted: no method) is denied
 * as push_not_allowed, for it could carry a push. */
static void push_phase(struct policy_verdict *v, const struct policy_binding *b,
                       const struct policy_host *host, uint16_t port,
                       const struct policy_request *req, int64_t now)
{
    const struct rule *r = push_rule_for(b, host, port, now);

    if (r == NULL)
        return;
    v->push = true;
    if (req != NULL && req->method == NULL) {
        struct hit h = {r->file, r->line, false, false};
        verdict(v, b, true, POLICY_R_PUSH_NOT_ALLOWED, &h);
        v->push = v->decision != POLICY_DENY;
        v->inject = v->inject && v->push;
    }
}

enum policy_decision decide_name(const struct policy_binding *b, const struct policy_host *host,
                                 uint16_t port, const struct policy_request *req, int64_t now,
                                 struct policy_verdict *v)
{
    struct match m = {.rq = req};
    bool extras_seen = false;

    memset(v, 0, sizeof(*v));
    ruleset_match_name(b->preset, b->policy, host, port, now, &m);
    if (m.deny.file == NULL && m.pass.file == NULL) {
        ruleset_match_name(&b->extras, b->policy, host, port, now, &m);
        extras_seen = true;
    }
    if (m.deny.file != NULL) {
        verdict(v, b, true, POLICY_R_DENY_RULE, &m.deny);
    } else if (m.pass.file != NULL) {
        verdict(v, b, false, POLICY_R_ALLOWED, &m.pass);
        v->raw = m.pass.raw;
        v->private_ok = m.pass.private_ok;
    } else if (m.allow.file != NULL) {
        some_requests(v, b, &m);
    } else {
        verdict(v, b, true, POLICY_R_NOT_ALLOWED, NULL);
    }
    /* The preset's host rules (and the extras', when they were looked at)
     * noted any inject rule on the way; the extras' inject rules are
     * scanned only when they exist and were not. */
    if (!m.inject && !extras_seen && b->extras.n_injects > 0 && v->decision != POLICY_DENY)
        m.inject = ruleset_inject_match(&b->extras, host, port, now);
    v->inject = m.inject && v->decision != POLICY_DENY;
    if (b->n_push > 0 && v->decision != POLICY_DENY)
        push_phase(v, b, host, port, req, now);
    return v->decision;
}

enum policy_decision policy_decide_name(const struct policy_binding *b,
                                        const struct policy_host *host, uint16_t port, int64_t now,
                                        struct policy_verdict *v)
{
    return decide_name(b, host, port, NULL, now, v);
}

static int cmp_u16(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static bool port_named(const struct ruleset *rs, uint16_t port)
{
    return rs->n_named_ports > 0 &&
           bsearch(&port, rs->named_ports, rs->n_named_ports, sizeof(uint16_t), cmp_u16) != NULL;
}

/* A port other than 443 and 80 that no rule of b names in a list (0 if
 * the lists name every port): all such ports are decided alike, since
 * only `:*` rules match them. */
static uint16_t unnamed_port(const struct policy_binding *b)
{
    for (uint32_t p = 1; p <= UINT16_MAX; p++)
        if (p != 443 && p != 80 && !port_named(b->preset, (uint16_t)p) &&
            !port_named(&b->extras, (uint16_t)p))
            return (uint16_t)p;
    return 0;
}

/* Whether decision a serves the asker better than b: allow, then
 * would_deny, then deny. */
static bool better(enum policy_decision a, enum policy_decision b)
{
    static const int rank[] = {[POLICY_DENY] = 0, [POLICY_WOULD_DENY] = 1, [POLICY_ALLOW] = 2};
    return rank[a] > rank[b];
}

/* Decide on `port` (0: nothing to try); its verdict becomes *best if it is
 * the first or a better one. */
static void try_port(const struct policy_binding *b, const struct policy_host *host, uint16_t port,
                     int64_t now, struct policy_verdict *best, uint16_t *best_port)
{
    struct policy_verdict v;

    if (port == 0)
        return;
    policy_decide_name(b, host, port, now, &v);
    if (*best_port == 0 || better(v.decision, best->decision)) {
        *best = v;
        *best_port = port;
    }
}

/* Whether the name phase says inject on `port` (0: nothing to try). */
static bool inject_on(const struct policy_binding *b, const struct policy_host *host, uint16_t port,
                      int64_t now)
{
    struct policy_verdict v;
    return port != 0 && policy_decide_name(b, host, port, now, &v) != POLICY_DENY && v.inject;
}

/* Whether inject rule r, which names host and is active, makes the name
 * phase say inject on one of its ports.  A `:*` rule does on the port
 * policy_decide_name_any() chose, which is not denied; the others are
 * tried port by port. */
static bool inject_rule_somewhere(const struct policy_binding *b, const struct rule *r,
                                  const struct policy_host *host, int64_t now)
{
    static const uint16_t web[] = {443, 80};
    const uint16_t *ports = r->ports_kind == PORTS_LIST ? r->ports : web;
    size_t n = r->ports_kind == PORTS_LIST ? r->n_ports : 2;

    if (r->ports_kind == PORTS_ANY)
        return true;
    for (size_t i = 0; i < n; i++)
        if (inject_on(b, host, ports[i], now))
            return true;
    return false;
}

/* v->inject for policy_decide_name_any, whose verdict is not a deny: on
 * some port an active inject rule matches and the name is not denied
 * there.  Only the ports of the inject rules naming the host are tried. */
static bool inject_any_port(const struct policy_binding *b, const struct policy_host *host,
                            int64_t now)
{
    const struct ruleset *sets[2] = {b->preset, &b->extras};

    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < sets[s]->n_injects; i++) {
            const struct rule *r = &sets[s]->rules[sets[s]->injects[i]];
            if (now < r->until && rule_names_host(r, host) &&
                inject_rule_somewhere(b, r, host, now))
                return true;
        }
    }
    return false;
}

enum policy_decision policy_decide_name_any(const struct policy_binding *b,
                                            const struct policy_host *host, int64_t now,
                                            struct policy_verdict *v, uint16_t *port)
{
    const struct ruleset *sets[2] = {b->preset, &b->extras};

    *port = 0;
    try_port(b, host, 443, now, v, port);
    try_port(b, host, 80, now, v, port);
    for (int s = 0; s < 2 && v->decision != POLICY_ALLOW; s++)
        for (size_t i = 0; i < sets[s]->n_named_ports && v->decision != POLICY_ALLOW; i++)
            try_port(b, host, sets[s]->named_ports[i], now, v, port);
    if (v->decision != POLICY_ALLOW)
        try_port(b, host, unnamed_port(b), now, v, port);
    if (!v->inject && b->n_injects > 0 && v->decision != POLICY_DENY)
        v->inject = inject_any_port(b, host, now);
    return v->decision;
}

static bool in_list(const struct cidr *list, size_t n, const uint8_t addr[16])
{
    for (size_t i = 0; i < n; i++)
        if (cidr_contains(&list[i], addr))
            return true;
    return false;
}

static bool range_denied(const struct policy *p, const uint8_t addr[16])
{
    return in_list(p->deny_ranges, p->n_deny_ranges, addr) &&
           !in_list(p->allow_ranges, p->n_allow_ranges, addr);
}

/* The IPv4 address a NAT64 (64:ff9b::/96, RFC 6052) or 6to4 (2002::/16,
 * RFC 3056) address carries, as ::ffff:a.b.c.d; false if it carries none. */
static bool embedded_v4(const uint8_t addr[16], uint8_t out[16])
{
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    if (memcmp(addr, nat64, 12) == 0) {
        memcpy(out + 12, addr + 12, 4);
        return true;
    }
    if (addr[0] == 0x20 && addr[1] == 0x02) {
        memcpy(out + 12, addr + 2, 4);
        return true;
    }
    return false;
}

static bool private_addr(const struct policy *p, const uint8_t addr[16])
{
    uint8_t v4[16];
    return range_denied(p, addr) || (embedded_v4(addr, v4) && range_denied(p, v4));
}

static const struct geo_rule *geo_denied(const struct ruleset *rs, const char cc[3], uint32_t asn)
{
    for (size_t i = 0; i < rs->n_geo; i++) {
        const struct geo_rule *g = &rs->geo[i];
        if (g->cc[0] != '\0' ? (cc[0] == g->cc[0] && cc[1] == g->cc[1]) : (asn == g->asn))
            return g;
    }
    return NULL;
}

enum policy_decision policy_decide_addr(const struct policy_binding *b, const uint8_t addr[16],
                                        uint16_t port, const struct policy_verdict *name,
                                        int64_t now, struct policy_verdict *v)
{
    const struct rule *r;
    const struct geo_rule *g;

    *v = *name;
    geo_lookup(b->policy, addr, v->country, &v->asn);
    /* deny-range is the appliance's wall, not a preset's choice: report
     * mode does not open it, only a `private-ok` rule does. */
    if (!name->private_ok && private_addr(b->policy, addr)) {
        v->decision = POLICY_DENY;
        v->reason = POLICY_R_PRIVATE_RANGE;
        v->rule = (struct policy_rule_ref){NULL, 0};
        v->inject = false;
        return v->decision;
    }
    r = ruleset_match_ip(b->preset, b->preset->ip_deny, b->preset->n_ip_deny, addr, port, now);
    if (r != NULL) {
        struct hit h = {r->file, r->line, false, false};
        verdict(v, b, true, POLICY_R_DENY_RULE, &h);
        v->inject = v->inject && v->decision != POLICY_DENY;
        return v->decision;
    }
    g = geo_denied(b->preset, v->country, v->asn);
    if (g != NULL) {
        v->decision = b->preset->report ? POLICY_WOULD_DENY : POLICY_DENY;
        v->reason = POLICY_R_GEO;
        v->rule = (struct policy_rule_ref){g->file, g->line};
        v->inject = v->inject && v->decision != POLICY_DENY;
    }
    return v->decision;
}

const char *policy_decision_str(enum policy_decision d)
{
    switch (d) {
    case POLICY_ALLOW: return "allow";
    case POLICY_DENY: return "deny";
    case POLICY_WOULD_DENY: return "would_deny";
    }
    return "deny";
}

const char *policy_reason_str(enum policy_reason r)
{
    switch (r) {
    case POLICY_R_ALLOWED: return "allowed";
    case POLICY_R_NOT_ALLOWED: return "not_allowed";
    case POLICY_R_DENY_RULE: return "deny_rule";
    case POLICY_R_PRIVATE_RANGE: return "private_range";
    case POLICY_R_GEO: return "geo";
    case POLICY_R_BAD_HOST: return "bad_host";
    case POLICY_R_METHOD_NOT_ALLOWED: return "method_not_allowed";
    case POLICY_R_PATH_NOT_ALLOWED: return "path_not_allowed";
    case POLICY_R_PUSH_NOT_ALLOWED: return "push_not_allowed";
    }
    return "not_allowed";
}
