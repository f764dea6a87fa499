/*
 * ruleset.c - one line of a policy file into rules, and the rules of a
 * preset into the index the matcher reads.
 *
 * Grammar (docs/design.md, "Policy files"), one rule per line, `#` to the end of
 * the line is a comment when it starts a token:
 *
 *   line     = rule | "deny" target [until] | "deny" geo | "mode" MODE
 *            | "include" NAME | "read-only"
 *   rule     = target *( "raw" | "private-ok" | "until" TIME | inject
 *                      | "methods" METHOD *( "," METHOD )
 *                      | "paths" GLOB *( "," GLOB )
 *                      | "git-push" REFGLOB *( "," REFGLOB ) | "no-delete" | "no-force" )
 *   target   = host [":" ports] | "ip" cidr [":" ports]
 *   inject   = "inject" ( "x-api-key" | "bearer" | "basic" | "header" FIELD )
 *              "secret" SECRET
 *   host     = NAME | "*." NAME | "." NAME | "*" | "~" REGEX | IPLITERAL
 *   ports    = "*" | PORT *( "," PORT )
 *   geo      = "country" 1*CC | "asn" 1*NUMBER
 *   FIELD    = an RFC 9110 token (section 5.6.2) of at most 64 bytes
 *   SECRET   = [a-z0-9] 0*62( [a-z0-9_-] )
 *
 * `inject` goes only on an allow rule for a host name, "*." NAME or "."
 * NAME, and not with `raw` or `private-ok`.  `methods` and `paths` go only
 * on an allow rule that is not `raw`, not `ip` (nor an IP literal) and not
 * for port 22; METHOD is one of POLICY_METHODS, GLOB what
 * policy_glob_check() takes.
 *
 * Every error is reported as FILE:LINE:COL with what was expected and what
 * was found; a line with an error adds no rule.
 */
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

#define MAX_TOKENS 64
#define MAX_PORTS  64
/* Longest header field name `inject header FIELD` takes. */
#define MAX_FIELD 64
/* Longest secret name. */
#define MAX_SECRET 63
/* Most globs one `paths` option lists. */
#define MAX_PATHS 64
/* The port whose rules cannot take request options (ssh carries no HTTP). */
#define SSH_PORT 22

struct token {
    const char *s;
    size_t len;
    unsigned col;
};

struct line {
    struct parse_ctx *ctx;
    unsigned lineno;
    struct token tok[MAX_TOKENS];
    size_t n;
    bool failed;
    bool ip_rule; /* the target is `ip CIDR` */
};

/* Quote a token for a message: at most 60 bytes, control bytes escaped. */
static const char *shown(const struct token *t, char *buf, size_t size)
{
    size_t o = 0, max = t->len < 60 ? t->len : 60;
    for (size_t i = 0; i < max && o + 5 < size; i++) {
        unsigned char c = (unsigned char)t->s[i];
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (t->len > max && o + 4 < size)
        o += (size_t)snprintf(buf + o, size - o, "...");
    buf[o] = '\0';
    return buf;
}

/* FILE:LINE:COL: expected WHAT, found 'TOKEN' (or "end of line"). */
static void expected(struct line *l, const struct token *t, unsigned col, const char *what)
{
    char buf[256];
    if (t == NULL)
        policy_diag_add(l->ctx->diag, "%s:%u:%u: expected %s, found end of line", l->ctx->file,
                        l->lineno, col, what);
    else
        policy_diag_add(l->ctx->diag, "%s:%u:%u: expected %s, found '%s'", l->ctx->file, l->lineno,
                        col, what, shown(t, buf, sizeof(buf)));
    l->failed = true;
}

static void problem(struct line *l, unsigned col, const char *msg)
{
    policy_diag_add(l->ctx->diag, "%s:%u:%u: %s", l->ctx->file, l->lineno, col, msg);
    l->failed = true;
}

static bool tokenize(struct line *l, const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\t' || c == '\r') {
            i++;
            continue;
        }
        if (c == '#')
            break;
        size_t start = i;
        while (i < len && s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            i++;
        if (l->n == MAX_TOKENS) {
            problem(l, (unsigned)start + 1, "too many words on one line (at most 64)");
            return false;
        }
        l->tok[l->n++] = (struct token){s + start, i - start, (unsigned)start + 1};
    }
    return true;
}

static bool tok_is(const struct token *t, const char *word)
{
    return t->len == strlen(word) && memcmp(t->s, word, t->len) == 0;
}

/* A positive decimal number of at most max. */
static bool parse_number(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    return parse_decimal(s, len, max, out) && *out > 0;
}

/* "*" or "P1,P2,..." (1..65535) into r. */
static bool parse_ports(struct line *l, const struct token *t, size_t off, struct rule *r)
{
    const char *s = t->s + off;
    size_t len = t->len - off;
    uint16_t ports[MAX_PORTS];
    size_t n = 0, i = 0;

    if (len == 1 && s[0] == '*') {
        r->ports_kind = PORTS_ANY;
        return true;
    }
    while (i <= len) {
        size_t start = i;
        uint64_t v;
        while (i < len && s[i] != ',')
            i++;
        if (!parse_number(s + start, i - start, 65535, &v)) {
            struct token bad = {s + start, i - start, t->col + (unsigned)(off + start)};
            expected(l, &bad, bad.col, "a port 1..65535 (or ':*' for any port)");
            return false;
        }
        if (n == MAX_PORTS) {
            problem(l, t->col + (unsigned)(off + start), "more than 64 ports in one rule");
            return false;
        }
        ports[n++] = (uint16_t)v;
        i++;
    }
    r->ports_kind = PORTS_LIST;
    r->n_ports = (uint16_t)n;
    r->ports = pool_alloc(l->ctx->pool, n * sizeof(uint16_t));
    memcpy(r->ports, ports, n * sizeof(uint16_t));
    return true;
}

/* Ports after the last ':' when what follows it is a port list; *cut is
 * the length before the ':' (or the whole token). */
static size_t split_ports(const struct token *t, size_t from)
{
    for (size_t i = t->len; i > from; i--)
        if (t->s[i - 1] == ':')
            return i - 1;
    return t->len;
}

/*
 * The name every host a regex matches must end in, when the regex says so
 * plainly: its trailing run of LDH bytes and escaped dots ("\\."), cut at
 * a label boundary.  "[a-z0-9-]+\\.s3\\.amazonaws\\.com" gives
 * "s3.amazonaws.com"; a whole literal gives itself.  Anything that could
 * make that untrue gives NULL (then the regex is tried on every host):
 * alternation, "(?" (inline options such as (?x) or (?i), lookarounds),
 * \\Q quoting, or a trailing quantifier, class or group.
 */
static const char *literal_suffix(struct pool *pool, const char *re, size_t len)
{
    char out[POLICY_HOST_MAX + 1];
    size_t o = sizeof(out), i = len;

    if (memchr(re, '|', len) || memmem(re, len, "(?", 2) || memmem(re, len, "\\Q", 2))
        return NULL;
    if (i > 0 && re[i - 1] == '$' && (i < 2 || re[i - 2] != '\\'))
        i--;
    while (i > 0 && o > 1) {
        char c = re[i - 1];
        size_t slashes = 0;
        while (slashes < i - 1 && re[i - 2 - slashes] == '\\')
            slashes++;
        if (c == '.' && slashes % 2 == 1) {
            out[--o] = '.';
            i -= 2;
        } else if (slashes % 2 == 0 &&
                   ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
            out[--o] = c;
            i--;
        } else {
            break;
        }
    }
    const char *run = out + o;
    size_t n = sizeof(out) - o;
    bool whole = i == 0 || (i == 1 && re[0] == '^');
    if (!whole) { /* something precedes: keep what follows the run's first dot */
        const char *dot = memchr(run, '.', n);
        if (dot == NULL)
            return NULL;
        n -= (size_t)(dot + 1 - run);
        run = dot + 1;
    }
    struct policy_host h;
    if (n == 0 || policy_host_normalize(run, n, &h) != POLICY_HOST_OK ||
        h.kind != POLICY_HOST_NAME || h.len != n)
        return NULL;
    return pool_strndup(pool, h.text, h.len);
}

/* A regex's optional ":PORTS": only when what follows its last ':' reads
 * as a port list ("(?:a|b)" is a group, not ports; a host never holds ':'). */
static size_t split_regex_ports(const struct token *t)
{
    size_t cut = split_ports(t, 1);
    const char *p = t->s + cut + 1;
    size_t n = t->len - cut - (cut < t->len);
    if (cut == t->len || n == 0)
        return t->len;
    if ((n == 1 && p[0] == '*'))
        return cut;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || p[i] == ','))
            return t->len;
    return cut;
}

static bool parse_regex(struct line *l, const struct token *t, struct rule *r)
{
    size_t cut = split_regex_ports(t);
    int err;
    PCRE2_SIZE off;

    if (cut < t->len && !parse_ports(l, t, cut + 1, r))
        return false;
    if (cut <= 1) {
        expected(l, NULL, t->col + 1, "a regular expression after '~'");
        return false;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(t->s + 1), cut - 1,
                                   PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NEVER_UTF |
                                       PCRE2_NEVER_BACKSLASH_C,
                                   &err, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[160];
        char text[224];
        pcre2_get_error_message(err, msg, sizeof(msg));
        snprintf(text, sizeof(text), "regular expression error at offset %zu: %s", (size_t)off,
                 (const char *)msg);
        problem(l, t->col + 1 + (unsigned)off, text);
        return false;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT it still matches */
    pool_own_code(l->ctx->pool, re);
    r->kind = RK_REGEX;
    r->u.rx.re = re;
    r->u.rx.key = literal_suffix(l->ctx->pool, t->s + 1, cut - 1);
    return true;
}

/* `ip CIDR[:PORTS]`: the ports follow the prefix length, or a bracketed
 * IPv6 address, or an IPv4 address; a bare IPv6 address takes none. */
static bool parse_ip_target(struct line *l, const struct token *t, struct rule *r)
{
    size_t cut = t->len;
    const char *slash = memchr(t->s, '/', t->len);
    const char *bracket = memchr(t->s, ']', t->len);
    const char *from = slash ? slash : bracket;
    struct cidr c;
    char why[96];

    if (from != NULL) {
        const char *colon = memchr(from, ':', t->len - (size_t)(from - t->s));
        if (colon != NULL)
            cut = (size_t)(colon - t->s);
    } else if (memchr(t->s, ':', t->len) == memrchr(t->s, ':', t->len)) {
        cut = split_ports(t, 0); /* IPv4 "a.b.c.d:22" (at most one ':') */
    }
    if (cut < t->len && !parse_ports(l, t, cut + 1, r))
        return false;
    if (!cidr_parse(t->s, cut, &c, why, sizeof(why))) {
        struct token addr = {t->s, cut, t->col};
        expected(l, &addr, t->col, why);
        return false;
    }
    r->kind = RK_IP;
    r->plen = c.plen;
    memcpy(r->u.addr, c.addr, 16);
    return true;
}

/* A host target: NAME, *.NAME, .NAME, *, ~REGEX or an IP literal, then
 * optional ports. */
static bool parse_host_target(struct line *l, const struct token *t, struct rule *r)
{
    struct policy_host h;
    size_t cut, skip = 0;
    enum policy_host_error e;

    if (t->s[0] == '~')
        return parse_regex(l, t, r);
    if (t->s[0] == '[') {
        const char *end = memchr(t->s, ']', t->len);
        cut = end ? (size_t)(end - t->s) + 1 : t->len;
        if (cut < t->len && t->s[cut] != ':') {
            expected(l, t, t->col, "':PORTS' after an IPv6 address in brackets");
            return false;
        }
    } else {
        cut = split_ports(t, 0);
    }
    if (cut < t->len && !parse_ports(l, t, cut + 1, r))
        return false;
    r->kind = RK_EXACT;
    if (cut == 1 && t->s[0] == '*') {
        r->kind = RK_ANY;
        return true;
    }
    if (cut >= 2 && t->s[0] == '*' && t->s[1] == '.') {
        r->kind = RK_SUB;
        skip = 2;
    } else if (cut >= 1 && t->s[0] == '.') {
        r->kind = RK_APEX_SUB;
        skip = 1;
    }
    if (memchr(t->s + skip, '*', cut - skip) != NULL) {
        expected(l, t, t->col, "a wildcard only as a leading '*.' (or '*' alone for any name)");
        return false;
    }
    e = policy_host_normalize(t->s + skip, cut - skip, &h);
    if (e != POLICY_HOST_OK) {
        struct token host = {t->s + skip, cut - skip, t->col + (unsigned)skip};
        char what[160];
        snprintf(what, sizeof(what), "a host name or IP address (%s)", policy_host_error_str(e));
        expected(l, &host, host.col, what);
        return false;
    }
    if (h.kind != POLICY_HOST_NAME) {
        if (skip != 0) {
            expected(l, t, t->col, "a domain name after '*.' or '.', not an IP address");
            return false;
        }
        r->kind = RK_IP;
        r->plen = 128;
        memcpy(r->u.addr, h.addr, 16);
        return true;
    }
    r->u.key = pool_strndup(l->ctx->pool, h.text, h.len);
    return true;
}

/* An RFC 9110 tchar (section 5.6.2). */
static bool tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* `header FIELD`'s field, lower-cased into the pool; NULL after an error. */
static const char *parse_field(struct line *l, const struct token *t)
{
    char low[MAX_FIELD], msg[192];
    bool token = t->len <= MAX_FIELD;

    for (size_t i = 0; i < t->len && token; i++) {
        token = tchar(t->s[i]);
        low[i] = (t->s[i] >= 'A' && t->s[i] <= 'Z') ? (char)(t->s[i] | 0x20) : t->s[i];
    }
    if (!token) {
        expected(l, t, t->col, "a header field name (an RFC 9110 token of at most 64 bytes)");
        return NULL;
    }
    if (inject_field_reserved(low, t->len)) {
        snprintf(msg, sizeof(msg),
                 "'header %.*s' cannot be injected: it is a hop-by-hop, framing or routing "
                 "field, which egressd itself sets",
                 (int)t->len, low);
        problem(l, t->col, msg);
        return NULL;
    }
    return pool_strndup(l->ctx->pool, low, t->len);
}

static bool secret_name_ok(const struct token *t)
{
    if (t->len == 0 || t->len > MAX_SECRET)
        return false;
    for (size_t i = 0; i < t->len; i++) {
        char c = t->s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '_' && c != '-')))
            return false;
    }
    return true;
}

const char *rule_host_text(struct pool *pool, const struct rule *r)
{
    const char *prefix = r->kind == RK_SUB ? "*." : r->kind == RK_APEX_SUB ? "." : "";
    size_t np = strlen(prefix), nk = strlen(r->u.key);
    char *s = pool_alloc(pool, np + nk + 1);

    memcpy(s, prefix, np);
    memcpy(s + np, r->u.key, nk + 1);
    return s;
}

/* Why rule r cannot carry `inject` (NULL: it can). */
static const char *inject_refused(const struct line *l, const struct rule *r)
{
    if (r->deny)
        return "'inject' is not allowed on a deny rule (a denied host gets no secret)";
    switch (r->kind) {
    case RK_REGEX:
        return "'inject' needs a host name, '*.NAME' or '.NAME', not a regular expression";
    case RK_ANY: return "'inject' needs a host name, '*.NAME' or '.NAME', not '*'";
    case RK_IP:
        return l->ip_rule ? "'inject' needs a host name, '*.NAME' or '.NAME', not an 'ip' rule"
                          : "'inject' needs a host name, '*.NAME' or '.NAME', not an IP address";
    default: return r->u.inject != NULL ? "'inject' given twice in one rule" : NULL;
    }
}

/* The token after tok[i], or NULL at the end of the line (then *col is
 * where the missing word would start). */
static const struct token *next_word(const struct line *l, size_t i, unsigned *col)
{
    *col = l->tok[i].col + (unsigned)l->tok[i].len;
    return i + 1 < l->n ? &l->tok[i + 1] : NULL;
}

/* `inject KIND secret NAME`, tok[*i] being "inject": r's clause, in the
 * pool; *i left on NAME.  False after an error. */
static bool parse_inject(struct line *l, size_t *i, struct rule *r)
{
    static const struct {
        const char *word, *field;
        enum policy_inject_kind kind;
    } kinds[] = {
        {"x-api-key", "x-api-key", POLICY_INJECT_X_API_KEY},
        {"bearer", "authorization", POLICY_INJECT_BEARER},
        {"basic", "authorization", POLICY_INJECT_BASIC},
        {"header", NULL, POLICY_INJECT_HEADER},
        {"token-endpoint", "", POLICY_INJECT_TOKEN_ENDPOINT},
    };
    const char *why = inject_refused(l, r);
    struct policy_inject inj = {.rule = {l->ctx->file, l->lineno}};
    const struct token *t;
    unsigned col;
    size_t k = 0;

    if (why != NULL) {
        problem(l, l->tok[*i].col, why);
        return false;
    }
    t = next_word(l, (*i)++, &col);
    while (t != NULL && k < sizeof(kinds) / sizeof(kinds[0]) && !tok_is(t, kinds[k].word))
        k++;
    if (t == NULL || k == sizeof(kinds) / sizeof(kinds[0])) {
        expected(l, t, t ? t->col : col,
                 "'x-api-key', 'bearer', 'basic', 'header FIELD' or 'token-endpoint' after "
                 "'inject'");
        return false;
    }
    inj.kind = kinds[k].kind;
    inj.field = kinds[k].field;
    if (inj.kind == POLICY_INJECT_HEADER) {
        t = next_word(l, (*i)++, &col);
        if (t == NULL) {
            expected(l, NULL, col, "a header field name after 'header'");
            return false;
        }
        if ((inj.field = parse_field(l, t)) == NULL)
            return false;
    }
    t = next_word(l, (*i)++, &col);
    if (t == NULL || !tok_is(t, "secret")) {
        expected(l, t, t ? t->col : col, "'secret NAME' after the kind of injection");
        return false;
    }
    t = next_word(l, (*i)++, &col);
    if (t == NULL || !secret_name_ok(t)) {
        expected(l, t, t ? t->col : col, "a secret name ([a-z0-9][a-z0-9_-]{0,62})");
        return false;
    }
    inj.secret = pool_strndup(l->ctx->pool, t->s, t->len);
    inj.host = rule_host_text(l->ctx->pool, r);
    struct policy_inject *kept = pool_alloc(l->ctx->pool, sizeof(*kept));
    *kept = inj;
    r->u.inject = kept;
    return true;
}

/* `inject` and the modifiers it excludes, once the whole line is read. */
static bool inject_compatible(struct line *l, const struct rule *r, unsigned inject_col)
{
    if (inject_col != 0 && r->raw) {
        problem(l, inject_col,
                "'inject' cannot be combined with 'raw' (injecting needs the TLS egressd "
                "terminates; a raw tunnel's bytes pass unread)");
        return false;
    }
    if (inject_col != 0 && r->private_ok) {
        problem(l, inject_col,
                "'inject' cannot be combined with 'private-ok' (a secret never goes to a "
                "denied range)");
        return false;
    }
    return true;
}

/* A rule's request options as a line gives them, before they go to the
 * pool: where each was written (0: not given). */
struct req_words {
    struct reqrule q;
    struct glob_text globs[MAX_PATHS], refs[MAX_PATHS];
    unsigned methods_col, paths_col, push_col, no_delete_col, no_force_col;
};

/* The comma-separated items of the token after tok[*i] (the option's
 * word), each handed to item(); *i left on the list.  False after an
 * error. */
static bool parse_list(struct line *l, size_t *i, const char *what,
                       bool (*item)(struct line *, const struct token *, struct req_words *),
                       struct req_words *w)
{
    unsigned col;
    const struct token *t = next_word(l, (*i)++, &col);

    if (t == NULL) {
        expected(l, NULL, col, what);
        return false;
    }
    for (size_t a = 0; a <= t->len;) {
        const char *comma = memchr(t->s + a, ',', t->len - a);
        size_t b = comma != NULL ? (size_t)(comma - t->s) : t->len;
        struct token one = {t->s + a, b - a, t->col + (unsigned)a};
        if (one.len == 0) {
            expected(l, b < t->len ? &one : NULL, one.col, what);
            return false;
        }
        if (!item(l, &one, w))
            return false;
        a = b + 1;
    }
    return true;
}

static bool method_item(struct line *l, const struct token *t, struct req_words *w)
{
    char msg[160];
    int m = reqrule_method(t->s, t->len);

    if (m >= 0) {
        w->q.methods |= (uint16_t)(1u << m);
        return true;
    }
    const char *near = reqrule_method_near(t->s, t->len);
    if (near != NULL) {
        snprintf(msg, sizeof(msg),
                 "unknown method '%.*s'; did you mean '%s'? (methods are "
                 "case-sensitive)",
                 (int)(t->len < 40 ? t->len : 40), t->s, near);
        problem(l, t->col, msg);
    } else {
        expected(l, t, t->col, "a method: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS or TRACE");
    }
    return false;
}

/* One glob of a `paths` or `git-push` list (`what` says which: "path" or
 * "ref"), checked by check, onto list[*n] (at most MAX_PATHS). */
static bool one_glob(struct line *l, const struct token *t, const char *what,
                     const char *(*check)(const char *, size_t, size_t *), struct glob_text *list,
                     uint16_t *n)
{
    size_t at;
    char msg[320];
    const char *why = check(t->s, t->len, &at);

    if (why != NULL) {
        snprintf(msg, sizeof(msg), "%s glob '%.*s': %s", what, (int)(t->len < 60 ? t->len : 60),
                 t->s, why);
        problem(l, t->col + (unsigned)at, msg);
        return false;
    }
    if (*n == MAX_PATHS) {
        snprintf(msg, sizeof(msg), "more than 64 %s globs in one rule", what);
        problem(l, t->col, msg);
        return false;
    }
    list[(*n)++] = (struct glob_text){pool_strndup(l->ctx->pool, t->s, t->len), t->len};
    return true;
}

static bool glob_item(struct line *l, const struct token *t, struct req_words *w)
{
    return one_glob(l, t, "path", policy_glob_check, w->globs, &w->q.n_paths);
}

static bool ref_item(struct line *l, const struct token *t, struct req_words *w)
{
    return one_glob(l, t, "ref", policy_ref_glob_check, w->refs, &w->q.n_refs);
}

/* Does rule r name port p in a list? */
static bool lists_port(const struct rule *r, uint16_t p)
{
    for (uint16_t i = 0; r->ports_kind == PORTS_LIST && i < r->n_ports; i++)
        if (r->ports[i] == p)
            return true;
    return false;
}

/* The request options w of rule r, once the whole line is read: checked
 * against the rule, then put in the pool. */
static bool attach_request_words(struct line *l, struct rule *r, struct req_words *w)
{
    unsigned col = w->methods_col ? w->methods_col : w->paths_col ? w->paths_col : w->push_col;
    const char *word = w->methods_col ? "methods" : w->paths_col ? "paths" : "git-push";
    char msg[200];
    const char *why = NULL;

    if ((w->no_delete_col != 0 || w->no_force_col != 0) && w->push_col == 0) {
        problem(l, w->no_delete_col ? w->no_delete_col : w->no_force_col,
                w->no_delete_col ? "'no-delete' goes with 'git-push REFGLOB' on the same rule"
                                 : "'no-force' goes with 'git-push REFGLOB' on the same rule");
        return false;
    }
    if (w->push_col != 0 && !rule_host_keyed(r) && r->kind != RK_IP) {
        problem(l, w->push_col,
                "'git-push' needs a host name, '*.NAME' or '.NAME' (egressd must intercept the "
                "host to read a push), not a regular expression or '*'");
        return false;
    }
    if (col == 0)
        return true;
    if (r->raw)
        why = "cannot be combined with 'raw' (a raw tunnel's bytes pass unread)";
    else if (r->kind == RK_IP)
        why = l->ip_rule ? "needs a host rule, not an 'ip' rule (requests are judged by name)"
                         : "needs a host name, not an IP address (requests are judged by name)";
    else if (lists_port(r, SSH_PORT))
        why = "does not go on a rule for port 22 (ssh carries no HTTP requests)";
    if (why != NULL) {
        snprintf(msg, sizeof(msg), "'%s' %s", word, why);
        problem(l, col, msg);
        return false;
    }
    struct reqrule *q = pool_alloc(l->ctx->pool, sizeof(*q));
    struct glob_text *g = pool_alloc(l->ctx->pool, w->q.n_paths * sizeof(*g) + 1);
    struct glob_text *refs = pool_alloc(l->ctx->pool, w->q.n_refs * sizeof(*refs) + 1);
    memcpy(g, w->globs, w->q.n_paths * sizeof(*g));
    memcpy(refs, w->refs, w->q.n_refs * sizeof(*refs));
    *q = w->q;
    q->paths = g;
    q->refs = refs;
    q->no_delete = w->no_delete_col != 0;
    q->no_force = w->no_force_col != 0;
    q->host = rule_host_keyed(r) ? rule_host_text(l->ctx->pool, r) : NULL;
    r->req = q;
    return true;
}

/* `methods LIST`, `paths LIST`, `git-push LIST`, `no-delete` or `no-force` at
 * tok[*i], each once per rule. */
static bool parse_request_word(struct line *l, size_t *i, struct req_words *w)
{
    const struct token *t = &l->tok[*i];
    char msg[80];
    unsigned *col = tok_is(t, "methods")     ? &w->methods_col
                    : tok_is(t, "paths")     ? &w->paths_col
                    : tok_is(t, "git-push")  ? &w->push_col
                    : tok_is(t, "no-delete") ? &w->no_delete_col
                                             : &w->no_force_col;

    if (*col != 0) {
        snprintf(msg, sizeof(msg), "'%.*s' given twice in one rule", (int)t->len, t->s);
        problem(l, t->col, msg);
        return false;
    }
    *col = t->col;
    if (col == &w->no_delete_col || col == &w->no_force_col)
        return true;
    if (col == &w->methods_col)
        return parse_list(l, i, "a method list after 'methods' (GET,HEAD)", method_item, w);
    if (col == &w->paths_col)
        return parse_list(l, i, "a path glob list after 'paths' (/repos/acme/**)", glob_item, w);
    return parse_list(l, i, "a ref glob list after 'git-push' (refs/heads/agent/**)", ref_item, w);
}

static bool parse_modifiers(struct line *l, size_t i, struct rule *r)
{
    unsigned inject_col = 0;
    struct req_words w = {0};

    for (; i < l->n; i++) {
        const struct token *t = &l->tok[i];
        if (tok_is(t, "raw") && !r->deny) {
            r->raw = true;
        } else if (tok_is(t, "private-ok") && !r->deny && !l->ctx->extras) {
            r->private_ok = true;
        } else if (tok_is(t, "until")) {
            if (i + 1 == l->n) {
                expected(l, NULL, t->col + (unsigned)t->len,
                         "an RFC 3339 time after 'until' (2026-12-01T00:00Z)");
                return false;
            }
            t = &l->tok[++i];
            if (!policy_time_parse(t->s, t->len, &r->until)) {
                expected(l, t, t->col, "an RFC 3339 time (2026-12-01T00:00Z)");
                return false;
            }
        } else if (tok_is(t, "inject")) {
            inject_col = t->col;
            if (!parse_inject(l, &i, r))
                return false;
        } else if ((tok_is(t, "methods") || tok_is(t, "paths") || tok_is(t, "git-push") ||
                    tok_is(t, "no-delete") || tok_is(t, "no-force")) &&
                   !r->deny) {
            if (!parse_request_word(l, &i, &w))
                return false;
        } else {
            const char *what =
                r->deny ? "'until' or end of line (after a deny rule)"
                : l->ctx->extras
                    ? "'raw', 'inject', 'methods', 'paths', 'git-push', 'until' or end of line (in "
                      "a sandbox's lines)"
                    : "'raw', 'private-ok', 'inject', 'methods', 'paths', 'git-push', 'until' or "
                      "end of line";
            expected(l, t, t->col, what);
            return false;
        }
    }
    return inject_compatible(l, r, inject_col) && attach_request_words(l, r, &w);
}

static void parse_geo(struct line *l, struct ruleset *rs)
{
    const struct token *kind = &l->tok[1];
    bool country = tok_is(kind, "country");

    if (l->n == 2) {
        expected(l, NULL, kind->col + (unsigned)kind->len,
                 country ? "a country code (ISO 3166-1 alpha-2)" : "an AS number");
        return;
    }
    for (size_t i = 2; i < l->n; i++) {
        const struct token *t = &l->tok[i];
        struct geo_rule g = {.file = l->ctx->file, .line = l->lineno};
        if (country) {
            if (t->len == 2) {
                g.cc[0] = (char)(t->s[0] & ~0x20);
                g.cc[1] = (char)(t->s[1] & ~0x20);
            }
            if (t->len != 2 || !country_code_known(g.cc)) {
                expected(l, t, t->col, "a country code (ISO 3166-1 alpha-2, such as KP)");
                continue;
            }
            rs->needs_country = true;
        } else {
            size_t skip = (t->len > 2 && (t->s[0] | 0x20) == 'a' && (t->s[1] | 0x20) == 's');
            uint64_t asn;
            if (!parse_number(t->s + 2 * skip, t->len - 2 * skip, UINT32_MAX, &asn)) {
                expected(l, t, t->col, "an AS number 1..4294967295 (such as 64496 or AS64496)");
                continue;
            }
            g.asn = (uint32_t)asn;
            rs->needs_asn = true;
        }
        rs->geo = xrealloc(rs->geo, (rs->n_geo + 1) * sizeof(*rs->geo));
        rs->geo[rs->n_geo++] = g;
    }
}

static void parse_directive(struct line *l, struct ruleset *rs)
{
    const struct token *t0 = &l->tok[0];
    bool is_mode = tok_is(t0, "mode");
    char msg[128];

    if (l->ctx->extras) {
        snprintf(msg, sizeof(msg), "'%s' is not allowed in a sandbox's lines (only allow rules)",
                 is_mode ? "mode" : "include");
        problem(l, t0->col, msg);
        return;
    }
    if (l->n < 2) {
        expected(l, NULL, t0->col + (unsigned)t0->len,
                 is_mode ? "'report' or 'enforce'" : "a preset name");
        return;
    }
    if (l->n > 2) {
        expected(l, &l->tok[2], l->tok[2].col, "end of line");
        return;
    }
    const struct token *t1 = &l->tok[1];
    if (is_mode) {
        if (tok_is(t1, "report") || tok_is(t1, "enforce"))
            rs->report = tok_is(t1, "report");
        else
            expected(l, t1, t1->col, "'report' or 'enforce'");
        return;
    }
    for (size_t i = 0; i < t1->len; i++) {
        char c = t1->s[i];
        if (!(c == '-' || c == '_' || c == '.' || (c >= '0' && c <= '9') ||
              ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))) {
            expected(l, t1, t1->col, "a preset name (letters, digits, '-', '_', '.')");
            return;
        }
    }
    struct parse_ctx *ctx = l->ctx;
    ctx->includes = xrealloc(ctx->includes, (ctx->n_includes + 1) * sizeof(*ctx->includes));
    ctx->includes[ctx->n_includes++] =
        (struct include_ref){xstrndup(t1->s, t1->len), l->lineno, t1->col};
}

/* `read-only`: the preset's allow rules that do not name their methods
 * admit GET, HEAD and OPTIONS only (policy.c applies it). */
static void parse_read_only(struct line *l, struct ruleset *rs)
{
    if (l->ctx->extras) {
        problem(l, l->tok[0].col,
                "'read-only' is not allowed in a sandbox's lines (it is the preset's choice)");
        return;
    }
    if (l->n > 1) {
        expected(l, &l->tok[1], l->tok[1].col, "end of line after 'read-only'");
        return;
    }
    rs->read_only = true;
}

/* "alow github.com", "dney x.com": a first word that is a bare single-label
 * name followed by something that is not a modifier reads as a misspelt
 * keyword, not as a host named "alow".  Reported as such; true if so. */
static bool unknown_directive(struct line *l)
{
    static const char *const keywords[] = {"deny", "ip", "mode", "include", "read-only", NULL};
    const struct token *t0 = &l->tok[0], *t1 = &l->tok[1];
    char msg[200], a[64];

    if (l->n < 2 || tok_is(t1, "raw") || tok_is(t1, "private-ok") || tok_is(t1, "until") ||
        tok_is(t1, "inject") || tok_is(t1, "methods") || tok_is(t1, "paths") ||
        tok_is(t1, "git-push") || t0->len >= sizeof(a))
        return false;
    for (const char *c = ".:*~["; *c != '\0'; c++)
        if (memchr(t0->s, *c, t0->len) != NULL)
            return false; /* a name with a dot, ports, a wildcard, a regex or IPv6 */
    const char *near = policy_nearest_word(t0->s, t0->len, keywords);
    if (near != NULL && strlen(near) == t0->len && memcmp(near, t0->s, t0->len) == 0)
        return false; /* the keyword itself */
    snprintf(a, sizeof(a), "%.*s", (int)t0->len, t0->s);
    if (near != NULL)
        snprintf(msg, sizeof(msg), "unknown directive '%s'; did you mean '%s'?", a, near);
    else
        snprintf(msg, sizeof(msg),
                 "unknown directive '%s' (a line is a host, 'ip', 'deny', 'mode', 'include' "
                 "or 'read-only')",
                 a);
    problem(l, t0->col, msg);
    return true;
}

void ruleset_parse_line(struct parse_ctx *ctx, struct ruleset *rs, const char *s, size_t len,
                        unsigned lineno)
{
    struct line l = {.ctx = ctx, .lineno = lineno};
    struct rule r = {.until = NO_EXPIRY, .file = ctx->file, .line = lineno};
    size_t i = 0;

    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f) {
            problem(&l, (unsigned)k + 1, "control byte in a policy line");
            return;
        }
    }
    if (!tokenize(&l, s, len) || l.n == 0)
        return;
    if (tok_is(&l.tok[0], "mode") || tok_is(&l.tok[0], "include")) {
        parse_directive(&l, rs);
        return;
    }
    if (tok_is(&l.tok[0], "read-only")) {
        parse_read_only(&l, rs);
        return;
    }
    if (tok_is(&l.tok[0], "deny")) {
        if (ctx->extras) {
            problem(&l, l.tok[0].col,
                    "'deny' is not allowed in a sandbox's lines (they only add allows)");
            return;
        }
        if (l.n == 1) {
            expected(&l, NULL, l.tok[0].col + 4, "a rule, 'country' or 'asn' after 'deny'");
            return;
        }
        if (tok_is(&l.tok[1], "country") || tok_is(&l.tok[1], "asn")) {
            parse_geo(&l, rs);
            return;
        }
        r.deny = true;
        i = 1;
    }
    if (i == 0 && unknown_directive(&l))
        return;
    bool ok;
    if (tok_is(&l.tok[i], "ip")) {
        if (i + 1 == l.n) {
            expected(&l, NULL, l.tok[i].col + 2, "an address or CIDR after 'ip'");
            return;
        }
        i++;
        l.ip_rule = true;
        ok = parse_ip_target(&l, &l.tok[i], &r);
    } else {
        ok = parse_host_target(&l, &l.tok[i], &r);
    }
    if (ok && parse_modifiers(&l, i + 1, &r))
        ruleset_add_rule(rs, &r);
}

void ruleset_add_rule(struct ruleset *rs, const struct rule *r)
{
    if (rs->n_rules == rs->cap_rules) {
        rs->cap_rules = rs->cap_rules ? rs->cap_rules * 2 : 16;
        rs->rules = xrealloc(rs->rules, rs->cap_rules * sizeof(*rs->rules));
    }
    rs->rules[rs->n_rules++] = *r;
}

void ruleset_free(struct ruleset *rs)
{
    free(rs->rules);
    free(rs->files);
    htab_free(&rs->hosts);
    htab_free(&rs->regex_keys);
    free(rs->regex_free);
    free(rs->regex_deny);
    free(rs->regex_allow);
    free(rs->ip_deny);
    free(rs->ip_allow);
    free(rs->geo);
    free(rs->named_ports);
    free(rs->injects);
    free(rs->req_hosts);
    free(rs->push_rules);
    memset(rs, 0, sizeof(*rs));
}
