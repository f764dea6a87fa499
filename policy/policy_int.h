/*
 * policy_int.h - the compiled form of a policy, shared by the files of
 * policy/ and by nothing outside it.
 */
#ifndef POLICY_POLICY_INT_H
#define POLICY_POLICY_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "policy.h"

#define NO_EXPIRY INT64_MAX

enum rule_kind {
    RK_EXACT,    /* example.com: the host itself */
    RK_SUB,      /* *.example.com: strict subdomains */
    RK_APEX_SUB, /* .example.com: the apex and its subdomains */
    RK_REGEX,    /* ~REGEX: PCRE2 over the whole normalized name */
    RK_IP,       /* ip CIDR, or a host rule naming an IP literal */
    RK_ANY,      /* *: any host name (not IP literals) */
};

enum ports_kind {
    PORTS_DEFAULT, /* none written: 443 and 80 */
    PORTS_ANY,     /* :* */
    PORTS_LIST,    /* :P1,P2,... */
};

/* A rule's request options (request.c), in the pool; a rule without
 * them has none (NULL). */
struct reqrule {
    uint16_t methods; /* bit i: POLICY_METHODS[i]; 0: any method */
    uint16_t n_paths; /* 0: any path */
    uint16_t n_refs;  /* git-push: the ref globs; 0: the rule says nothing of pushes */
    bool no_delete;   /* git-push ... no-delete */
    bool no_force;    /* git-push ... no-force: updates must be fast-forwards */
    const struct glob_text *refs;
    /* The rule's host as written ("x", "*.x", ".x") for a host-keyed
     * rule: what a sandbox CA may sign for it; NULL for a regex or '*'. */
    const char *host;
    const struct glob_text {
        const char *s; /* checked (policy_glob_check), in the pool */
        size_t len;
    } * paths;
};

struct rule {
    uint8_t kind; /* enum rule_kind */
    bool deny, raw, private_ok;
    uint8_t ports_kind; /* enum ports_kind */
    uint8_t plen;       /* RK_IP: prefix length over the 16-byte form */
    uint16_t n_ports;
    uint16_t *ports;           /* PORTS_LIST: n_ports entries, in the pool */
    int64_t until;             /* active while now < until; NO_EXPIRY */
    const struct reqrule *req; /* `methods`/`paths` (or `read-only`); NULL: any request */
    const char *file;          /* in the pool */
    unsigned line;
    union {
        uint8_t addr[16]; /* RK_IP: network, host bits zero */
        struct {
            pcre2_code *re;  /* owned by the pool */
            const char *key; /* the name every match ends in, or NULL */
        } rx;                /* RK_REGEX */
        struct {             /* host-keyed kinds (RK_EXACT, RK_SUB, RK_APEX_SUB) */
            const char *key; /* in the pool */
            /* an `inject` rule's clause, in the pool; NULL: none.  The
             * copies an include makes share it (that is how a rule
             * included twice is listed once). */
            const struct policy_inject *inject;
        };
    } u;
};

/* Memory that lives exactly as long as the rules pointing into it: carved
 * from large chunks (rules are never freed one by one), plus the compiled
 * regexes.  Rules are plain values and may be copied (include). */
struct pool {
    char **chunks;
    size_t n_chunks, cap_chunks;
    size_t used, room; /* in the newest chunk */
    pcre2_code **codes;
    size_t n_codes, cap_codes;
    size_t bytes; /* everything allocated, for the bench's bytes per rule */
};

void *pool_alloc(struct pool *p, size_t n);
char *pool_strndup(struct pool *p, const char *s, size_t n);
void pool_own_code(struct pool *p, pcre2_code *re);
void pool_free(struct pool *p);

/* A host rule as the hash table holds it: 16 bytes with everything a
 * decision reads, so a hit costs no access to the full rule except for the
 * rare `until` or a list of more than two ports. */
struct crule {
    uint8_t kind : 7; /* enum rule_kind */
    uint8_t req : 1;  /* the rule has request options (rules[rule].req) */
    uint8_t flags;    /* CR_* */
    uint16_t port[2];
    uint16_t file; /* index into ruleset.files */
    uint32_t line;
    uint32_t rule; /* index into ruleset.rules */
};

enum {
    CR_DENY = 1,
    CR_RAW = 2,
    CR_PRIVATE_OK = 4,
    CR_UNTIL = 8,       /* read rules[rule].until */
    CR_PORTS_ANY = 16,  /* neither ANY nor LIST: 443 and 80 */
    CR_PORTS_LIST = 32, /* port[0..1], or rules[rule].ports with CR_PORTS_MORE */
    CR_PORTS_MORE = 64,
    CR_INJECT = 128, /* an `inject` rule (rules[rule].u.inject) */
};

/* Keys up to this many bytes live in their slot. */
#define HKEY_INLINE 32

/* One slot of a name table: 64 bytes, one cache line, holding the tag, the
 * key and, for a key with one rule (the common case), that rule.  A lookup
 * that hits such a slot reads one line; all the lines a host needs are
 * prefetched together (match.c). */
struct hent {
    uint32_t tag; /* from the hash's high bits; 0: empty */
    uint8_t klen;
    uint8_t inline_rule; /* 1: r is the key's only rule */
    uint16_t spare;
    uint32_t ovf; /* 1 + word offset of the overflow block; 0: none */
    uint32_t spare2;
    struct crule r;
    char key[HKEY_INLINE]; /* when klen <= HKEY_INLINE */
};

/* Overflow: the whole key and all its rules, for keys that do not fit. */
struct hovf {
    uint32_t count;
    uint32_t klen;
    char key[]; /* NUL-terminated; count crules follow, 8-aligned */
};

struct htab {
    struct hent *slots;
    size_t mask;
    uint64_t *ovf;
    size_t n_words;
};

/* One name to put in a table, and the rule it stands for. */
struct hitem {
    const char *key;
    uint32_t klen, rule;
};

struct cidr {
    uint8_t addr[16];
    uint8_t plen;
};

/* A compiled rule set: one preset (includes expanded) or a binding's extras. */
struct ruleset {
    const char *name;
    const char *file;
    bool report;        /* mode report */
    bool read_only;     /* read-only: rules without `methods` get GET, HEAD, OPTIONS */
    const char **files; /* where the rules were written (includes add some) */
    size_t n_files;
    struct rule *rules;
    size_t n_rules, cap_rules;
    /* host-keyed rules: copies of the rules in blocks, by key */
    struct htab hosts;
    /* regex rules by the literal suffix they require ("svc.example.com"
     * for ~[a-z]+\.svc\.example\.com): blocks of rule indices */
    struct htab regex_keys;
    /* the rest, in file order, by role (RK_ANY goes with the regexes);
     * regex_free: the regexes without a literal suffix (and `*`) */
    uint32_t *regex_deny, *regex_allow, *regex_free, *ip_deny, *ip_allow;
    size_t n_regex_deny, n_regex_allow, n_regex_free, n_ip_deny, n_ip_allow;
    /* geo: deny country / deny asn, each with where it was written */
    struct geo_rule {
        char cc[2];   /* deny country */
        uint32_t asn; /* deny asn (cc empty) */
        const char *file;
        unsigned line;
    } * geo;
    size_t n_geo;
    bool needs_country, needs_asn;
    /* Every port a rule names in a list (not 443/80 unless a list names
     * them), sorted, each once: the ports on which a decision can differ
     * from that of a port no rule names (policy_decide_name_any). */
    uint16_t *named_ports;
    size_t n_named_ports;
    /* The `inject` rules, in rule order, a rule included twice once. */
    uint32_t *injects;
    size_t n_injects;
    /* The host-keyed allow rules with request options, in rule order. */
    uint32_t *req_hosts;
    size_t n_req_hosts;
    /* The allow rules with `git-push`, in rule order. */
    uint32_t *push_rules;
    size_t n_push_rules;
};

struct policy {
    atomic_uint refs;
    struct ruleset *presets; /* sorted by name */
    size_t n_presets;
    struct cidr *deny_ranges, *allow_ranges;
    size_t n_deny_ranges, n_allow_ranges;
    struct MMDB_s *geo_country, *geo_asn;
    pcre2_match_context *mctx; /* match limits for every regex */
    struct pool pool;          /* rules' keys, ports, file names, regexes */
};

struct policy_binding {
    struct policy *policy;
    const struct ruleset *preset;
    struct ruleset extras;
    size_t n_injects; /* preset's and extras' together: 0 skips all inject work */
    size_t n_push;    /* git-push rules, likewise */
    struct pool pool;
};

/* Allocation that aborts on failure (STYLE.md rule 7). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrndup(const char *s, size_t n);

/* A decimal number of at most 10 digits, no leading zero, at most max. */
bool parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out);

/* addr.c */
bool cidr_parse(const char *s, size_t len, struct cidr *out, char *why, size_t whylen);
bool cidr_contains(const struct cidr *c, const uint8_t addr[16]);
size_t cidr_default_deny(const struct cidr **out);
bool country_code_known(const char *cc);

/* ruleset.c */
struct parse_ctx {
    struct pool *pool;        /* where the rules' memory goes */
    struct policy_diag *diag; /* errors */
    const char *file;         /* in the pool */
    bool extras;              /* a binding's lines: allow rules only */
    /* include lines seen: name + where */
    struct include_ref {
        char *name;
        unsigned line, col;
    } * includes;
    size_t n_includes;
};
void ruleset_parse_line(struct parse_ctx *ctx, struct ruleset *rs, const char *line, size_t len,
                        unsigned lineno);
void ruleset_add_rule(struct ruleset *rs, const struct rule *r);
/* The host of a host-keyed rule as written, normalized: "x", "*.x", ".x"
 * (in the pool). */
const char *rule_host_text(struct pool *pool, const struct rule *r);
/* Whether r is keyed by a host name (exact, *.x, .x). */
static inline bool rule_host_keyed(const struct rule *r)
{
    return r->kind == RK_EXACT || r->kind == RK_SUB || r->kind == RK_APEX_SUB;
}
void ruleset_free(struct ruleset *rs);

/* index.c */
void ruleset_index(struct ruleset *rs);
void htab_free(struct htab *t);
const struct hent *htab_find(const struct htab *t, const char *key, size_t len, uint64_t hash);
/* The rules of a found key: *out and how many. */
uint32_t hent_rules(const struct htab *t, const struct hent *e, const struct crule **out);

/* geo.c */
void geo_lookup(const struct policy *p, const uint8_t addr[16], char cc[3], uint32_t *asn);

/* match.c */
/* A rule that matched, as much of it as a verdict needs. */
struct hit {
    const char *file; /* NULL: nothing matched */
    unsigned line;
    bool raw, private_ok;
};

struct match {
    /* The request the allows are judged on; NULL: none (a connection's
     * name phase), when only a rule without request options passes. */
    const struct policy_request *rq;
    struct hit deny;  /* the first deny rule that matches host and port */
    struct hit allow; /* the first allow rule that does */
    struct hit pass;  /* the first allow rule that also admits the request */
    struct hit near;  /* the first that admits its path but not its method */
    bool inject;      /* an active inject rule among the host rules looked at */
};
void ruleset_match_name(const struct ruleset *rs, const struct policy *p,
                        const struct policy_host *h, uint16_t port, int64_t now, struct match *m);
/* Does rule r (host-keyed kinds; any other kind never does) name host h,
 * whatever the port and time? */
bool rule_names_host(const struct rule *r, const struct policy_host *h);
/* Does it match h on port at now (active, port listed, host named)? */
bool rule_matches_host(const struct rule *r, const struct policy_host *h, uint16_t port,
                       int64_t now);
const struct rule *ruleset_match_ip(const struct ruleset *rs, const uint32_t *idx, size_t n,
                                    const uint8_t addr[16], uint16_t port, int64_t now);

/* request.c */
/* The index of method s[0..len) in POLICY_METHODS, or -1. */
int reqrule_method(const char *s, size_t len);
/* The method s[0..len) was probably meant to be ("get" -> "GET"), or NULL. */
const char *reqrule_method_near(const char *s, size_t len);
/* What rule options q (NULL: none) say of request rq. */
enum reqrule_answer {
    REQ_ADMITTED,
    REQ_METHOD_REFUSED, /* its path is admitted, its method is not */
    REQ_PATH_REFUSED,   /* its path is not */
};
enum reqrule_answer reqrule_judge(const struct reqrule *q, const struct policy_request *rq);
/* The first active `git-push` rule of b matching host and port, or NULL. */
const struct rule *push_rule_for(const struct policy_binding *b, const struct policy_host *host,
                                 uint16_t port, int64_t now);
/* The request options of rule r as a `read-only` preset makes them:
 * r->req itself when it names methods, else a copy (in the pool) with
 * GET, HEAD and OPTIONS. */
const struct reqrule *reqrule_read_only(struct pool *pool, const struct rule *r);
/* Make the allow rules of rs that can take request options (not raw, not
 * `ip`) read-only, as a `read-only` preset does; before ruleset_index. */
void ruleset_read_only(struct ruleset *rs, struct pool *pool);

/* policy.c: the name phase, with the request its allows are judged on
 * (NULL: none; policy_decide_name is this with NULL). */
enum policy_decision decide_name(const struct policy_binding *b, const struct policy_host *host,
                                 uint16_t port, const struct policy_request *req, int64_t now,
                                 struct policy_verdict *v);

/* inject.c */
/* Does any active inject rule of rs match h on port? (rule order) */
bool ruleset_inject_match(const struct ruleset *rs, const struct policy_host *h, uint16_t port,
                          int64_t now);
/* Header field names `inject header FIELD` may not name, lower case. */
bool inject_field_reserved(const char *field, size_t len);

/* FNV-1a, fed from the end of a name: the hash of every suffix of a host
 * falls out of one pass.  Keys are compared in full after a tag match, so
 * a crafted collision costs a probe, never a wrong verdict. */
#define SUFFIX_HASH_SEED 14695981039346656037ULL
static inline uint64_t suffix_hash_step(uint64_t h, unsigned char c)
{
    return (h ^ c) * 1099511628211ULL;
}

#endif
