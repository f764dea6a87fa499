/*
 * policy.h - allowlist files compiled into an immutable policy snapshot, and
 * the two pure decision phases egressd runs on every connection.
 *
 * The files (docs/design.md, "Policy files") are plain text an admin edits:
 * `NAME.allow` defines the preset NAME, one rule per line.  This module does
 * no I/O: the caller reads the files and the GeoIP databases and hands them
 * in; the module parses, reports every error with FILE:LINE:COL, and builds a
 * snapshot that is never changed again and may be shared by any number of
 * threads (reference-counted).
 *
 * Decisions come in two phases, both pure functions of their arguments:
 *   name phase     binding (preset + its sandbox's extra lines), normalized
 *                  host, port, time -> allow / deny + reason + rule
 *   address phase  each resolved address -> allowed, or denied as
 *                  private_range, geo or by an `ip` deny rule
 *
 * Ownership: policy_builder_finish() returns a snapshot holding one
 * reference.  A binding holds a reference to the snapshot it was made from,
 * so a snapshot lives as long as any binding (and so any connection) uses it.
 */
#ifndef POLICY_POLICY_H
#define POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MMDB_s;

/* Longest normalized host: a DNS name of 253 bytes, or "[" IPv6 "]". */
#define POLICY_HOST_MAX 253

/* ---------------------------------------------------------------- hosts */

enum policy_host_kind {
    POLICY_HOST_NAME, /* LDH labels, lower case, punycode for IDN */
    POLICY_HOST_IPV4, /* dotted quad, four decimal parts 0..255 */
    POLICY_HOST_IPV6, /* "[...]", written back in RFC 5952 form */
};

enum policy_host_error {
    POLICY_HOST_OK,
    POLICY_HOST_EMPTY,       /* nothing, or only "." */
    POLICY_HOST_TOO_LONG,    /* over 253 bytes, or a label over 63 */
    POLICY_HOST_BAD_BYTE,    /* outside [A-Za-z0-9.-] (IDN must be punycode) */
    POLICY_HOST_EMPTY_LABEL, /* ".." or a leading dot */
    POLICY_HOST_HYPHEN,      /* a label starts or ends with '-' */
    POLICY_HOST_NUMERIC,     /* looks like a number: 2130706433, 0x7f.1, 0177.0.0.1 */
    POLICY_HOST_BAD_IPV6,    /* "[...]" that is not one IPv6 address (no zone) */
};

/* The host as one canonical string: what every rule and every decision
 * compares.  `text` is NUL-terminated, `len` bytes. */
struct policy_host {
    enum policy_host_kind kind;
    uint8_t addr[16]; /* IP literals: the address (IPv4 as ::ffff:a.b.c.d) */
    size_t len;
    char text[POLICY_HOST_MAX + 3];
};

/* Normalize `len` bytes of `in` (a CONNECT authority's host part, an SNI, a
 * Host header): lower case, one trailing dot dropped, LDH labels of at most
 * 63 bytes and 253 in all, IPv4 only as a decimal dotted quad, IPv6 only in
 * brackets.  Anything else is an error, never guessed at.  Idempotent: the
 * text of a normalized host normalizes to itself.  Pure. */
enum policy_host_error policy_host_normalize(const char *in, size_t len, struct policy_host *out);

const char *policy_host_error_str(enum policy_host_error e);

/* -------------------------------------------------------------- verdicts */

enum policy_decision {
    POLICY_ALLOW,
    POLICY_DENY,
    POLICY_WOULD_DENY, /* denied, but the preset is in `mode report` */
};

/* Reason codes; policy_reason_str() gives the access log's word. */
enum policy_reason {
    POLICY_R_ALLOWED,       /* "allowed" */
    POLICY_R_NOT_ALLOWED,   /* "not_allowed": no rule matched, default deny */
    POLICY_R_DENY_RULE,     /* "deny_rule": a deny rule matched */
    POLICY_R_PRIVATE_RANGE, /* "private_range": address in a deny-range */
    POLICY_R_GEO,           /* "geo": deny country / deny asn */
    POLICY_R_BAD_HOST,      /* "bad_host": the host does not normalize */
    /* A request to a host that only rules with `methods`/`paths` allow,
     * and none of them admits it: */
    POLICY_R_METHOD_NOT_ALLOWED, /* "method_not_allowed": a rule admits its path, not its method */
    POLICY_R_PATH_NOT_ALLOWED,   /* "path_not_allowed": no rule admits its path */
    /* A git push (or a tunnel that could carry one unread) to a host a
     * `git-push` rule holds, to a ref none of them admits: */
    POLICY_R_PUSH_NOT_ALLOWED, /* "push_not_allowed" */
};

/* Where a rule was written: "FILE:LINE" (file is the preset's file name, or
 * the binding's origin such as "sandbox 101"). */
struct policy_rule_ref {
    const char *file; /* NULL: no rule decided (default deny / allowed range) */
    unsigned line;
};

struct policy_verdict {
    enum policy_decision decision;
    enum policy_reason reason;
    struct policy_rule_ref rule;
    bool raw;        /* the allowing rule says `raw`: no ClientHello required */
    bool private_ok; /* the allowing rule says `private-ok` */
    bool inject;     /* an active `inject` rule matches (never with POLICY_DENY):
                      * policy_injects_for() says which */
    /* Decided without a request (policy_decide's req NULL): only rules
     * with `methods` or `paths` allow the host, so each request to it
     * must be decided on its own (with req); a tunnel whose requests
     * cannot be read is decided with an empty request (denied). */
    bool requests;
    /* An active `git-push` rule matches host and port (never with
     * POLICY_DENY): a push to it must be read (policy_decide_push). */
    bool push;
    /* policy_decide_push allowed an update only under rules that say
     * `no-force`: the caller lets it through only when it shows that the
     * new commit descends from the old one (a fast-forward). */
    bool fast_forward_only;
    /* Address phase only, when the GeoIP databases are given: */
    char country[3]; /* ISO 3166-1 alpha-2, "" when unknown */
    uint32_t asn;    /* 0 when unknown */
};

const char *policy_decision_str(enum policy_decision d);
const char *policy_reason_str(enum policy_reason r);

/* ---------------------------------------------------------- diagnostics */

/* Every error a load found, one line each: "FILE:LINE:COL: what was
 * expected, what was found". */
struct policy_diag {
    char **lines;
    size_t n, cap;
};

/* Add one line (printf-style); for callers that report their own errors
 * (files that cannot be read) in the same list. */
void policy_diag_add(struct policy_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void policy_diag_free(struct policy_diag *d);

/* For "did you mean" in messages about the files egressd reads: the word of
 * `candidates` (NULL-terminated) nearest to word[0..len), within two edits
 * (Levenshtein); the word itself when it is one of them; NULL if none is
 * near.  Words of 32 bytes or more match nothing. */
const char *policy_nearest_word(const char *word, size_t len, const char *const *candidates);

/* ---------------------------------------------------- building a policy */

struct policy_builder;
struct policy;

/* A new, empty builder.  Aborts on allocation failure. */
struct policy_builder *policy_builder_new(void);

/* Add the text of preset `name` (the file NAME.allow), `file` naming it in
 * messages.  The text is copied; it need not be NUL-terminated.  Errors go
 * to the diag of policy_builder_finish(). */
void policy_builder_add_preset(struct policy_builder *b, const char *name, const char *file,
                               const char *text, size_t len);

/* Address ranges of the configuration (egressd.conf `deny-range` and
 * `allow-range`).  `spec` is a CIDR or, for deny, "default" (the built-in
 * list of docs/design.md); `where` ("egressd.conf:12") names it in messages.
 * Without any deny-range call the default list applies. */
void policy_builder_deny_range(struct policy_builder *b, const char *spec, const char *where);
void policy_builder_allow_range(struct policy_builder *b, const char *spec, const char *where);

/* One address of the appliance itself (`addr` 16 bytes, IPv4 as
 * ::ffff:a.b.c.d), denied like a deny-range of that one address (its NAT64
 * and 6to4 forms too).  It adds to the deny-range list and never replaces
 * it: the default list still applies when no deny-range call was made.
 * allow-range lifts it as it lifts any deny range.  The caller finds the
 * addresses (this module does no I/O). */
void policy_builder_deny_addr(struct policy_builder *b, const uint8_t addr[16]);

/* The GeoIP2/GeoLite2 databases, opened by the caller, who keeps them open
 * for as long as any snapshot built with them lives.  Either may be NULL; a
 * preset with `deny country` (`deny asn`) then fails to load. */
void policy_builder_geo(struct policy_builder *b, struct MMDB_s *country, struct MMDB_s *asn);

/* Compile everything added.  Returns a snapshot holding one reference, or
 * NULL when there was any error at all (all of them in `diag`: nothing is
 * half-applied).  Frees the builder either way. */
struct policy *policy_builder_finish(struct policy_builder *b, struct policy_diag *diag);

/* Reference counting (atomic: any thread may take or drop one). */
struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p); /* NULL is a no-op */

/* Presets, in name order; NULL past the end. */
const char *policy_preset_name(const struct policy *p, size_t i);
/* Number of rules the preset holds, includes expanded; -1 if no such preset. */
long policy_preset_rules(const struct policy *p, const char *name);

/* --------------------------------------------------------- a binding */

/* What one sandbox is held to: a preset plus the sandbox's own extra lines
 * (same syntax, but only allow rules: they can add allows, never lift a
 * preset's deny).  `origin` names the lines in messages and rule refs
 * ("sandbox 101"); line N of the extras is extra[N-1].  Returns NULL and
 * fills diag on any error (unknown preset, a bad line). */
struct policy_binding *policy_binding_new(struct policy *p, const char *preset,
                                          const char *const *extra, size_t n_extra,
                                          const char *origin, struct policy_diag *diag);
void policy_binding_free(struct policy_binding *b); /* NULL is a no-op */

/* The preset the binding names, and whether it is in `mode report`. */
const char *policy_binding_preset(const struct policy_binding *b);
bool policy_binding_report(const struct policy_binding *b);

/* ----------------------------------------------------------- injection */

/* `HOST[:PORTS] inject KIND secret NAME`: an allow rule that also tells the
 * caller which secret to put into which request header for that host.
 * HOST is a name, `*.NAME` or `.NAME` (never a regex, `*`, `ip` rule or IP
 * literal); the rule allows its host exactly as a plain allow rule does. */
enum policy_inject_kind {
    POLICY_INJECT_X_API_KEY, /* x-api-key: SECRET */
    POLICY_INJECT_BEARER,    /* authorization: Bearer SECRET */
    POLICY_INJECT_BASIC,     /* authorization: Basic SECRET (the secret is user:password) */
    POLICY_INJECT_HEADER,    /* FIELD: SECRET */
    /* The host is the token endpoint of the OAuth login SECRET: egressd
     * answers the sandbox's own refresh there (docs/credentials.md,
     * "Subscription logins"); no header gets a value. */
    POLICY_INJECT_TOKEN_ENDPOINT,
};

struct policy_inject {
    enum policy_inject_kind kind;
    const char *field;  /* the header field, lower case: "x-api-key", "authorization"
                         * (bearer, basic) or FIELD; "" for token-endpoint */
    const char *secret; /* the secret's name, [a-z0-9][a-z0-9_-]{0,62} */
    struct policy_rule_ref rule;
    const char *host; /* as written, normalized: "api.anthropic.com", "*.x", ".x" */
};

/* "x-api-key", "bearer", "basic", "header", "token-endpoint". */
const char *policy_inject_kind_str(enum policy_inject_kind k);

/* Every active (not expired at `now`) inject rule of binding b that
 * matches `host` on `port`, in rule order: the preset's own lines, then the
 * rules of the presets it includes (in the order of its include lines),
 * then the binding's extra lines; a rule included twice counts once.  At
 * most `max` go to out[] (out may be NULL when max is 0); returns how many
 * matched in all (which may exceed max).  Deny rules are not consulted:
 * the caller checks the name phase's decision (v->inject) first.  The
 * pointers stay valid as long as the binding.  Pure. */
size_t policy_injects_for(const struct policy_binding *b, const struct policy_host *host,
                          uint16_t port, int64_t now, const struct policy_inject **out, size_t max);

/* policy_injects_for for one request (its method and normalized path,
 * struct policy_request below): an inject rule with `methods` or `paths`
 * is listed only when it admits req, so its secret goes into no other
 * request to the host (a placeholder there is bound to no rule, and out
 * of place).  req NULL lists every rule, as policy_injects_for.  Pure. */
struct policy_request;
size_t policy_injects_for_request(const struct policy_binding *b, const struct policy_host *host,
                                  uint16_t port, const struct policy_request *req, int64_t now,
                                  const struct policy_inject **out, size_t max);

/* The i-th inject rule of binding b (active or not, any host), in the
 * order of policy_injects_for(); NULL past the end.  For the caller to
 * build what depends on every rule (the names a sandbox CA may sign, the
 * secrets to load). */
const struct policy_inject *policy_binding_inject(const struct policy_binding *b, size_t i);

/* -------------------------------------------------------- request rules */

/* What a rule's `methods` and `paths` options are matched on: the
 * request's method as sent (case-sensitive, RFC 9110 section 9.1) and its
 * path as http_path_normalize() gives it (no query).  NULL (a tunnel whose
 * requests are not read, a path that did not normalize) is admitted by no
 * rule that names methods (paths). */
struct policy_request {
    const char *method;
    size_t method_len;
    const char *path;
    size_t path_len;
};

/* The methods a `methods` option may name, in this order, NULL-terminated;
 * `read-only` is GET, HEAD and OPTIONS. */
#define POLICY_METHODS                                                                             \
    {                                                                                              \
        "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", NULL                  \
    }

/* The host (as written: "x", "*.x", ".x") of the i-th host-keyed allow
 * rule of binding b with `methods` or `paths` (the preset's, its
 * includes', then the binding's lines; a host may come more than once);
 * NULL past the end.  For what a sandbox CA must permit to intercept
 * them.  Regex and '*' rules have none: a tunnel they alone allow cannot
 * be intercepted.  Pure. */
const char *policy_binding_request_host(const struct policy_binding *b, size_t i);

/* One command of a git push (its ref, and whether it deletes it) to
 * host:port, decided by the binding's `git-push` rules for that host: none
 * matching, it is allowed (v->rule NULL); else allowed when one of them
 * admits the ref (a REFGLOB matches it; a deletion not under `no-delete`),
 * with v->rule that one (one without `no-force` when there is such:
 * allows add up; when every admitting rule says `no-force`,
 * v->fast_forward_only is set, and the caller must see a fast-forward);
 * else denied as push_not_allowed naming the first of them (would_deny in
 * report mode).  Pure. */
enum policy_decision policy_decide_push(const struct policy_binding *b,
                                        const struct policy_host *host, uint16_t port,
                                        const char *ref, size_t ref_len, bool deletes, int64_t now,
                                        struct policy_verdict *v);

/* Why ref glob g[0..len) is refused (*at the offset of the cause), or
 * NULL: "refs/" then segments of printable ASCII a ref may hold, "*"
 * within one, "**" as a whole one; matched as path globs are.  Pure. */
const char *policy_ref_glob_check(const char *g, size_t len, size_t *at);
/* Does ref r[0..rl) match checked ref glob g[0..gl)?  Pure. */
bool policy_ref_glob_match(const char *g, size_t gl, const char *r, size_t rl);

/* The longest `paths` glob. */
#define POLICY_GLOB_MAX 512

/* Why path glob g[0..len) is refused (no normalized path could match it,
 * or it is not a glob), with *at the offset of the cause; NULL when it is
 * a glob.  "*" is any run of bytes within one segment, "**" as a whole
 * segment any number of segments (zero too).  Pure. */
const char *policy_glob_check(const char *g, size_t len, size_t *at);
/* Does the normalized path p[0..pl) match checked glob g[0..gl)?  Pure. */
bool policy_glob_match(const char *g, size_t gl, const char *p, size_t pl);

/* Segments a narrowest glob (policy_glob_narrowest) keeps before "**". */
#define POLICY_GLOB_NARROW_SEGMENTS 2

/* The narrowest glob that names normalized path p[0..pl) the way `learn`
 * and an access request's proposed grant write it: its first
 * POLICY_GLOB_NARROW_SEGMENTS segments and a "**" segment when it has
 * more, else the path itself: "/repos/acme/x/pulls" gives "/repos/acme"
 * and a "**" segment, "/v1/messages" itself.  Into g (size bytes),
 * its length in *gl.  False when it does not fit or would not load
 * (policy_glob_check).  Pure. */
bool policy_glob_narrowest(const char *p, size_t pl, char *g, size_t size, size_t *gl);

/* ------------------------------------------------------------ deciding */

/* The one decision on a destination, for every caller that judges one
 * (egressd's judge, revocation, the ClientHello check, the policy DNS
 * server, both explains): the name phase on `host` and `port`, then, unless
 * the name is denied, the address phase on each of addr[0..n), in order.
 * Any deny wins, then any would_deny, then allow: the verdict that decides
 * is the first of the least open ones, the name's before an address's.
 * n == 0 (addr may be NULL) is the name phase alone, for a caller whose
 * addresses are not known yet.  Fills *v with the deciding verdict (when
 * the name decides and there are addresses, with the first address's
 * country and asn); returns v->decision.  Pure. */
enum policy_decision policy_decide(const struct policy_binding *b, const struct policy_host *host,
                                   uint16_t port, const uint8_t (*addr)[16], size_t n, int64_t now,
                                   struct policy_verdict *v);

/* policy_decide for one request to the host: its method and path (req;
 * NULL is policy_decide) are judged by the rules that allow the host.
 * Allows add up: the request passes if any active allow rule matching
 * host and port admits it (a rule without `methods`/`paths` admits every
 * request).  When allow rules match and none admits it, it is denied as
 * method_not_allowed (a rule admits its path: v->rule names the first
 * such) or path_not_allowed (v->rule names the first allow rule); report
 * mode makes either a would_deny.  With req NULL, a host that only
 * restricted rules allow is allowed with v->requests set.  Pure. */
enum policy_decision policy_decide_request(const struct policy_binding *b,
                                           const struct policy_host *host, uint16_t port,
                                           const struct policy_request *req,
                                           const uint8_t (*addr)[16], size_t n, int64_t now,
                                           struct policy_verdict *v);

/* policy_decide after its name phase, for a caller that needed the name's
 * verdict before it had the addresses (to deny before a lookup, to choose
 * a port as the DNS server does): `name` is that verdict, and the rest is
 * policy_decide's, by the same rule.  each, when not NULL, receives every
 * address's own verdict (n entries; untouched when the name is denied),
 * for a caller that shows them.  Returns v->decision.  Pure. */
enum policy_decision policy_decide_addrs(const struct policy_binding *b,
                                         const struct policy_verdict *name, uint16_t port,
                                         const uint8_t (*addr)[16], size_t n, int64_t now,
                                         struct policy_verdict *v, struct policy_verdict *each);

/* The two phases policy_decide runs, for tests and oracles.  egressd's
 * callers decide with policy_decide or policy_decide_addrs, never with
 * these alone (tests/run.sh checks it): a second place that combines them
 * is a second place that can disagree. */

/* Name phase: may this binding reach `host` on `port` at time `now` (Unix
 * seconds)?  Deny rules win over allow rules in any order; `until` rules
 * past their time are ignored.  IP-literal hosts are judged by `ip` rules
 * (and exact rules naming the literal).  v->inject: an active inject rule
 * matches host and port, and the decision is not POLICY_DENY.  Fills *v;
 * returns v->decision. */
enum policy_decision policy_decide_name(const struct policy_binding *b,
                                        const struct policy_host *host, uint16_t port, int64_t now,
                                        struct policy_verdict *v);

/* Name phase on every port at once: may this binding reach `host` on
 * some port at time `now`?  (The policy DNS server answers a name that
 * way: a lookup says no port.)  Fills *v with the best verdict of any port
 * (an allow before a would_deny before a deny; among equals the lowest
 * port, 443 and 80 first) and *port with that port; returns v->decision.
 * v->inject: on some port (not necessarily *port) the name phase would
 * say inject, i.e. an active inject rule matches there and it is not
 * denied there. */
enum policy_decision policy_decide_name_any(const struct policy_binding *b,
                                            const struct policy_host *host, int64_t now,
                                            struct policy_verdict *v, uint16_t *port);

/* Address phase for one resolved address (`addr` 16 bytes, IPv4 as
 * ::ffff:a.b.c.d) of a name the name phase allowed (`name` is its verdict:
 * private-ok and report mode carry over).  Checks deny-range minus
 * allow-range (IPv4-mapped, NAT64 and 6to4 forms included), `deny ip`
 * rules and geo rules.  Fills *v (country/asn when the databases are
 * there; v->inject cleared when the address is denied); returns
 * v->decision. */
enum policy_decision policy_decide_addr(const struct policy_binding *b, const uint8_t addr[16],
                                        uint16_t port, const struct policy_verdict *name,
                                        int64_t now, struct policy_verdict *v);

/* Parse an IP address ("192.0.2.1", "2001:db8::1", "[2001:db8::1]") into
 * the 16-byte form the address phase takes.  Returns false if it is not
 * one. */
bool policy_addr_parse(const char *s, size_t len, uint8_t out[16]);

/* The text of a 16-byte address: an IPv4-mapped one as a dotted quad,
 * any other in RFC 5952 form, without brackets.  Into buf (size at least
 * 46, INET6_ADDRSTRLEN); returns buf. */
const char *policy_addr_text(const uint8_t addr[16], char *buf, size_t size);

/* Parse an RFC 3339 time ("2026-12-01T00:00Z", seconds and fraction
 * optional, "Z" or "+HH:MM") into Unix seconds.  Returns false if it is
 * not one. */
bool policy_time_parse(const char *s, size_t len, int64_t *out);

#endif
