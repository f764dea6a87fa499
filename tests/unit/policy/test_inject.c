/*
 * test_inject.c - the `inject` rule: every form it takes, every refusal
 * with its message, that it allows as an allow rule does, the verdict's
 * inject flag, and the order policy_injects_for() and
 * policy_binding_inject() give across presets, includes and a binding's
 * extra lines.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define NOW   1796083200 /* 2026-12-01T00:00Z */
#define EARLY 1767225600 /* 2026-01-01T00:00Z */

/* Build a policy from NAME, TEXT pairs (NULL-terminated); files are
 * NAME.allow.  Errors go to *d (cleared first). */
static struct policy *load(struct policy_diag *d, const char *const *presets)
{
    struct policy_builder *b = policy_builder_new();
    char file[64];

    policy_diag_free(d);
    for (size_t i = 0; presets[i] != NULL; i += 2) {
        snprintf(file, sizeof(file), "%s.allow", presets[i]);
        policy_builder_add_preset(b, presets[i], file, presets[i + 1], strlen(presets[i + 1]));
    }
    return policy_builder_finish(b, d);
}

static struct policy *load1(const char *text)
{
    struct policy_diag d = {0};
    const char *p[] = {"p", text, NULL};
    struct policy *pol = load(&d, p);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return pol;
}

static struct policy_binding *bind(struct policy *p, const char *preset, const char *const *extra,
                                   size_t n)
{
    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, preset, extra, n, "sandbox 101", &d);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return b;
}

static struct policy_host host_of(const char *name)
{
    struct policy_host h;
    if (policy_host_normalize(name, strlen(name), &h) != POLICY_HOST_OK)
        abort();
    return h;
}

/* The name phase for host:port at now: the decision's word, and *v. */
static const char *decide(const struct policy_binding *b, const char *host, uint16_t port,
                          int64_t now, struct policy_verdict *v)
{
    struct policy_host h = host_of(host);
    return policy_decision_str(policy_decide_name(b, &h, port, now, v));
}

static size_t injects(const struct policy_binding *b, const char *host, uint16_t port, int64_t now,
                      const struct policy_inject **out, size_t max)
{
    struct policy_host h = host_of(host);
    return policy_injects_for(b, &h, port, now, out, max);
}

/* Does inject i say kind, field, secret, host and where it was written? */
static bool inject_is(const struct policy_inject *i, enum policy_inject_kind kind,
                      const char *field, const char *secret, const char *host, const char *file,
                      unsigned line)
{
    return i != NULL && i->kind == kind && strcmp(i->field, field) == 0 &&
           strcmp(i->secret, secret) == 0 && strcmp(i->host, host) == 0 &&
           strcmp(i->rule.file, file) == 0 && i->rule.line == line;
}

static void test_forms(void)
{
    struct policy *p =
        load1("api.anthropic.com inject x-api-key secret anthropic\n"              /* 1 */
              "api.openai.com:443 inject bearer secret openai\n"                   /* 2 */
              "github.com inject basic secret github\n"                            /* 3 */
              ".googleapis.com inject header X-Goog-Api-Key secret gemini\n"       /* 4 */
              "*.Example.NET.:443,8443 inject bearer secret ex-1_2\n"              /* 5 */
              "api.x.example until 2030-01-01T00:00Z inject header authorization " /* 6 */
              "secret x\n"                                                         /*   */
              "localhost inject bearer secret 0\n"                                 /* 7 */
              "tok.example inject header !#$%&'*+-.^_`|~09az secret t\n"           /* 8 */
              "long.example inject bearer secret "                                 /* 9 */
              "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0\n"  /*   */
              "inject.example inject bearer secret i until 2027-01-01T00:00Z\n"    /* 10 */
              "platform.claude.com inject token-endpoint secret claude\n");        /* 11 */
    if (!ok(p != NULL, "a preset with every inject form loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    ok(policy_preset_rules(p, "p") == 11, "eleven rules (got %ld)", policy_preset_rules(p, "p"));
    ok(inject_is(policy_binding_inject(b, 0), POLICY_INJECT_X_API_KEY, "x-api-key", "anthropic",
                 "api.anthropic.com", "p.allow", 1),
       "x-api-key: field x-api-key");
    ok(inject_is(policy_binding_inject(b, 1), POLICY_INJECT_BEARER, "authorization", "openai",
                 "api.openai.com", "p.allow", 2),
       "bearer: field authorization, ports as usual");
    ok(inject_is(policy_binding_inject(b, 2), POLICY_INJECT_BASIC, "authorization", "github",
                 "github.com", "p.allow", 3),
       "basic: field authorization");
    ok(inject_is(policy_binding_inject(b, 3), POLICY_INJECT_HEADER, "x-goog-api-key", "gemini",
                 ".googleapis.com", "p.allow", 4),
       "header FIELD: the field lower-cased, '.x' kept as written");
    ok(inject_is(policy_binding_inject(b, 4), POLICY_INJECT_BEARER, "authorization", "ex-1_2",
                 "*.example.net", "p.allow", 5),
       "'*.x': the host normalized (lower case, no root dot), '*.' kept");
    ok(inject_is(policy_binding_inject(b, 5), POLICY_INJECT_HEADER, "authorization", "x",
                 "api.x.example", "p.allow", 6),
       "until before inject; header authorization is allowed");
    ok(inject_is(policy_binding_inject(b, 6), POLICY_INJECT_BEARER, "authorization", "0",
                 "localhost", "p.allow", 7),
       "a one-label host before 'inject' is a host, not a misspelt directive");
    ok(inject_is(policy_binding_inject(b, 7), POLICY_INJECT_HEADER, "!#$%&'*+-.^_`|~09az", "t",
                 "tok.example", "p.allow", 8),
       "header: every RFC 9110 tchar");
    ok(policy_binding_inject(b, 8) != NULL && strlen(policy_binding_inject(b, 8)->secret) == 63,
       "a secret name of 63 bytes");
    ok(inject_is(policy_binding_inject(b, 9), POLICY_INJECT_BEARER, "authorization", "i",
                 "inject.example", "p.allow", 10),
       "inject before until");
    ok(inject_is(policy_binding_inject(b, 10), POLICY_INJECT_TOKEN_ENDPOINT, "", "claude",
                 "platform.claude.com", "p.allow", 11),
       "token-endpoint: a login's token endpoint, no header field");
    ok(policy_binding_inject(b, 11) == NULL && policy_binding_inject(b, 1000) == NULL,
       "binding_inject: NULL past the end");
    ok(strcmp(policy_inject_kind_str(POLICY_INJECT_X_API_KEY), "x-api-key") == 0 &&
           strcmp(policy_inject_kind_str(POLICY_INJECT_BEARER), "bearer") == 0 &&
           strcmp(policy_inject_kind_str(POLICY_INJECT_BASIC), "basic") == 0 &&
           strcmp(policy_inject_kind_str(POLICY_INJECT_HEADER), "header") == 0 &&
           strcmp(policy_inject_kind_str(POLICY_INJECT_TOKEN_ENDPOINT), "token-endpoint") == 0,
       "inject_kind_str names every kind");
    policy_binding_free(b);
    policy_unref(p);
}

/* A line that must be refused, and the whole message it must give. */
struct refusal {
    const char *line, *message;
};

static void check_refusals(const struct refusal *r, size_t n)
{
    struct policy_diag d = {0};
    for (size_t i = 0; i < n; i++) {
        const char *pr[] = {"p", r[i].line, NULL};
        struct policy *p = load(&d, pr);
        ok(p == NULL && d.n == 1 && strcmp(d.lines[0], r[i].message) == 0,
           "refused: '%s' -> %s (got %zu: %s)", r[i].line, r[i].message, d.n,
           d.n ? d.lines[0] : "");
        policy_unref(p);
    }
    policy_diag_free(&d);
}

static void test_refusals(void)
{
    static const struct refusal r[] = {
        {"~api\\.x\\.com inject bearer secret s",
         "p.allow:1:14: 'inject' needs a host name, '*.NAME' or '.NAME', not a regular "
         "expression"},
        {"* inject bearer secret s",
         "p.allow:1:3: 'inject' needs a host name, '*.NAME' or '.NAME', not '*'"},
        {"*:443 inject bearer secret s",
         "p.allow:1:7: 'inject' needs a host name, '*.NAME' or '.NAME', not '*'"},
        {"ip 192.0.2.0/24 inject bearer secret s",
         "p.allow:1:17: 'inject' needs a host name, '*.NAME' or '.NAME', not an 'ip' rule"},
        {"ip 192.0.2.1 inject bearer secret s",
         "p.allow:1:14: 'inject' needs a host name, '*.NAME' or '.NAME', not an 'ip' rule"},
        {"192.0.2.1 inject bearer secret s",
         "p.allow:1:11: 'inject' needs a host name, '*.NAME' or '.NAME', not an IP address"},
        {"[2001:db8::1]:443 inject bearer secret s",
         "p.allow:1:19: 'inject' needs a host name, '*.NAME' or '.NAME', not an IP address"},
        {"deny x.com inject bearer secret s",
         "p.allow:1:12: 'inject' is not allowed on a deny rule (a denied host gets no secret)"},
        {"x.com raw inject bearer secret s",
         "p.allow:1:11: 'inject' cannot be combined with 'raw' (injecting needs the TLS egressd "
         "terminates; a raw tunnel's bytes pass unread)"},
        {"x.com inject bearer secret s raw",
         "p.allow:1:7: 'inject' cannot be combined with 'raw' (injecting needs the TLS egressd "
         "terminates; a raw tunnel's bytes pass unread)"},
        {"x.com inject bearer secret s private-ok",
         "p.allow:1:7: 'inject' cannot be combined with 'private-ok' (a secret never goes to a "
         "denied range)"},
        {"x.com private-ok inject basic secret s",
         "p.allow:1:18: 'inject' cannot be combined with 'private-ok' (a secret never goes to a "
         "denied range)"},
        {"x.com inject bearer secret a inject basic secret b",
         "p.allow:1:30: 'inject' given twice in one rule"},
        {"x.com inject", "p.allow:1:13: expected 'x-api-key', 'bearer', 'basic', 'header FIELD' or "
                         "'token-endpoint' after "
                         "'inject', found end of line"},
        {"x.com inject token secret s",
         "p.allow:1:14: expected 'x-api-key', 'bearer', 'basic', 'header FIELD' or "
         "'token-endpoint' after "
         "'inject', found 'token'"},
        {"x.com inject Bearer secret s",
         "p.allow:1:14: expected 'x-api-key', 'bearer', 'basic', 'header FIELD' or "
         "'token-endpoint' after "
         "'inject', found 'Bearer'"},
        {"x.com inject header",
         "p.allow:1:20: expected a header field name after 'header', found end of line"},
        {"x.com inject header x:y secret s",
         "p.allow:1:21: expected a header field name (an RFC 9110 token of at most 64 bytes), "
         "found 'x:y'"},
        {"x.com inject header "
         "a123456789b123456789c123456789d123456789e123456789f123456789g1234 secret s",
         "p.allow:1:21: expected a header field name (an RFC 9110 token of at most 64 bytes), "
         "found 'a123456789b123456789c123456789d123456789e123456789f123456789...'"},
        {"x.com inject bearer",
         "p.allow:1:20: expected 'secret NAME' after the kind of injection, found end of line"},
        {"x.com inject bearer key s",
         "p.allow:1:21: expected 'secret NAME' after the kind of injection, found 'key'"},
        {"x.com inject bearer secret",
         "p.allow:1:27: expected a secret name ([a-z0-9][a-z0-9_-]{0,62}), found end of line"},
        {"x.com inject bearer secret Anthropic",
         "p.allow:1:28: expected a secret name ([a-z0-9][a-z0-9_-]{0,62}), found 'Anthropic'"},
        {"x.com inject bearer secret _a",
         "p.allow:1:28: expected a secret name ([a-z0-9][a-z0-9_-]{0,62}), found '_a'"},
        {"x.com inject bearer secret a.b",
         "p.allow:1:28: expected a secret name ([a-z0-9][a-z0-9_-]{0,62}), found 'a.b'"},
        {"x.com inject bearer secret "
         "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01",
         "p.allow:1:28: expected a secret name ([a-z0-9][a-z0-9_-]{0,62}), found "
         "'abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwx...'"},
        {"x.com inject bearer secret s extra",
         "p.allow:1:30: expected 'raw', 'private-ok', 'inject', 'methods', 'paths', 'git-push', "
         "'until' or end of line, found 'extra'"},
    };
    check_refusals(r, sizeof(r) / sizeof(r[0]));

    /* Every field egressd frames or routes by, in any case. */
    static const char *const reserved[] = {
        "Host",    "connection", "Content-Length", "transfer-encoding",   "TE",
        "trailer", "upgrade",    "Keep-Alive",     "proxy-authorization", "PROXY-CONNECTION"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        char line[128], msg[256], low[64];
        size_t n = strlen(reserved[i]);
        for (size_t k = 0; k <= n; k++)
            low[k] = (char)(reserved[i][k] >= 'A' && reserved[i][k] <= 'Z' ? reserved[i][k] | 0x20
                                                                           : reserved[i][k]);
        snprintf(line, sizeof(line), "x.com inject header %s secret s", reserved[i]);
        snprintf(msg, sizeof(msg),
                 "p.allow:1:21: 'header %s' cannot be injected: it is a hop-by-hop, framing or "
                 "routing field, which egressd itself sets",
                 low);
        struct refusal one = {line, msg};
        check_refusals(&one, 1);
    }

    /* A sandbox's lines take inject, but still refuse private-ok. */
    struct policy *p = load1("base.example\n");
    struct policy_diag d = {0};
    const char *bad[] = {"x.com inject bearer secret s private-ok", "* inject bearer secret s"};
    struct policy_binding *b = policy_binding_new(p, "p", bad, 2, "sandbox 7", &d);
    ok(b == NULL && d.n == 2 &&
           strcmp(d.lines[0], "sandbox 7:1:30: expected 'raw', 'inject', 'methods', 'paths', "
                              "'git-push', 'until' or end of line (in a sandbox's lines), found "
                              "'private-ok'") == 0 &&
           strcmp(d.lines[1], "sandbox 7:2:3: 'inject' needs a host name, '*.NAME' or '.NAME', "
                              "not '*'") == 0,
       "binding: refusals name the sandbox's line and column (got %zu: %s)", d.n,
       d.n ? d.lines[0] : "");
    policy_binding_free(b);
    policy_diag_free(&d);
    policy_unref(p);
}

/* One expectation of the name phase: host, port, time, the decision, the
 * reason, the rule line (0: none), and the inject flag. */
struct want {
    const char *host;
    uint16_t port;
    int64_t now;
    const char *decision, *reason;
    unsigned line;
    bool inject;
};

static void check_all(const struct policy_binding *b, const struct want *w, size_t n,
                      const char *what)
{
    struct policy_verdict v;
    for (size_t i = 0; i < n; i++) {
        const char *d = decide(b, w[i].host, w[i].port, w[i].now, &v);
        ok(strcmp(d, w[i].decision) == 0 && strcmp(policy_reason_str(v.reason), w[i].reason) == 0 &&
               (w[i].line == 0 ? v.rule.file == NULL : v.rule.line == w[i].line) &&
               v.inject == w[i].inject,
           "%s: %s:%u -> %s %s line %u inject %d (got %s %s line %u inject %d)", what, w[i].host,
           w[i].port, w[i].decision, w[i].reason, w[i].line, w[i].inject, d,
           policy_reason_str(v.reason), v.rule.line, v.inject);
    }
}

static void test_allows(void)
{
    struct policy *p =
        load1("api.anthropic.com inject x-api-key secret anthropic\n"              /* 1 */
              "deny bad.example.com\n"                                             /* 2 */
              ".example.com inject bearer secret ex\n"                             /* 3 */
              "old.example.org inject bearer secret old until 2026-06-01T00:00Z\n" /* 4 */
              "github.com\n"                                                       /* 5 */
              "*.sub.example.org:8443 inject basic secret s\n"                     /* 6 */
              "deny *.no.example.com\n");                                          /* 7 */
    if (!ok(p != NULL, "inject semantics preset loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    static const struct want w[] = {
        {"api.anthropic.com", 443, NOW, "allow", "allowed", 1, true},
        {"API.Anthropic.com.", 80, NOW, "allow", "allowed", 1, true},
        {"api.anthropic.com", 22, NOW, "deny", "not_allowed", 0, false},
        {"www.api.anthropic.com", 443, NOW, "deny", "not_allowed", 0, false},
        {"anthropic.com", 443, NOW, "deny", "not_allowed", 0, false},
        {"example.com", 443, NOW, "allow", "allowed", 3, true},
        {"a.b.example.com", 443, NOW, "allow", "allowed", 3, true},
        {"bad.example.com", 443, NOW, "deny", "deny_rule", 2, false},
        {"x.no.example.com", 443, NOW, "deny", "deny_rule", 7, false},
        {"notexample.com", 443, NOW, "deny", "not_allowed", 0, false},
        {"old.example.org", 443, EARLY, "allow", "allowed", 4, true},
        {"old.example.org", 443, NOW, "deny", "not_allowed", 0, false},
        {"github.com", 443, NOW, "allow", "allowed", 5, false},
        {"a.sub.example.org", 8443, NOW, "allow", "allowed", 6, true},
        {"a.sub.example.org", 443, NOW, "deny", "not_allowed", 0, false},
        {"sub.example.org", 8443, NOW, "deny", "not_allowed", 0, false},
    };
    check_all(b, w, sizeof(w) / sizeof(w[0]), "inject allows");

    /* injects_for: deny not consulted, time and port are. */
    const struct policy_inject *out[4];
    ok(injects(b, "bad.example.com", 443, NOW, out, 4) == 1 && strcmp(out[0]->secret, "ex") == 0,
       "injects_for lists a denied host's inject rule (the caller checks the decision)");
    ok(injects(b, "old.example.org", 443, NOW, out, 4) == 0 &&
           injects(b, "old.example.org", 443, EARLY, out, 4) == 1,
       "injects_for: an expired rule drops out");
    ok(injects(b, "api.anthropic.com", 22, NOW, out, 4) == 0, "injects_for: ports count");
    ok(injects(b, "github.com", 443, NOW, out, 4) == 0 &&
           injects(b, "api.anthropic.com.evil.com", 443, NOW, out, 4) == 0 &&
           injects(b, "xexample.com", 443, NOW, out, 4) == 0 &&
           injects(b, "sub.example.org", 8443, NOW, out, 4) == 0,
       "injects_for: hosts the rules do not name");
    struct policy_host lit = host_of("192.0.2.1");
    ok(policy_injects_for(b, &lit, 443, NOW, out, 4) == 0, "injects_for: an IP literal, none");

    /* The address phase keeps the flag, and clears it when it denies. */
    struct policy_verdict name, v;
    uint8_t a[16];
    decide(b, "api.anthropic.com", 443, NOW, &name);
    policy_addr_parse("10.0.0.1", 8, a);
    ok(policy_decide_addr(b, a, 443, &name, NOW, &v) == POLICY_DENY && !v.inject,
       "address phase: private_range clears inject");
    policy_addr_parse("8.8.8.8", 7, a);
    ok(policy_decide_addr(b, a, 443, &name, NOW, &v) == POLICY_ALLOW && v.inject,
       "address phase: an allowed address keeps inject");
    policy_binding_free(b);
    policy_unref(p);

    /* Report mode: would_deny still carries inject (the traffic goes on). */
    p = load1("mode report\n"                          /* 1 */
              "deny bad.example.com\n"                 /* 2 */
              ".example.com inject bearer secret ex\n" /* 3 */
              "deny ip 8.8.8.0/24\n");                 /* 4 */
    if (!ok(p != NULL, "report-mode inject preset loads"))
        return;
    b = bind(p, "p", NULL, 0);
    static const struct want r[] = {
        {"x.example.com", 443, NOW, "allow", "allowed", 3, true},
        {"bad.example.com", 443, NOW, "would_deny", "deny_rule", 2, true},
        {"other.org", 443, NOW, "would_deny", "not_allowed", 0, false},
    };
    check_all(b, r, sizeof(r) / sizeof(r[0]), "report");
    decide(b, "x.example.com", 443, NOW, &name);
    policy_addr_parse("8.8.8.8", 7, a);
    ok(policy_decide_addr(b, a, 443, &name, NOW, &v) == POLICY_WOULD_DENY && v.inject,
       "address phase, report mode: a would_deny keeps inject");
    policy_binding_free(b);
    policy_unref(p);
}

/* The secrets of out[0..n), joined by ' '. */
static const char *secrets(const struct policy_inject *const *out, size_t n)
{
    static char buf[256];
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o < sizeof(buf); i++)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? " " : "", out[i]->secret);
    return buf;
}

static void test_order(void)
{
    struct policy_diag d = {0};
    const char *pr[] = {"base",
                        ".shared.example inject bearer secret base-a\n"
                        "svc.shared.example:443 inject header x-k secret base-b\n",
                        "mid",
                        "include base\n"
                        "svc.shared.example inject basic secret mid\n",
                        "top",
                        "svc.shared.example inject x-api-key secret top\n"
                        "include mid\n"
                        "include base\n"
                        "*.shared.example inject bearer secret top-2\n"
                        "deny deny.shared.example\n",
                        NULL};
    struct policy *p = load(&d, pr);
    if (!ok(p != NULL, "presets with inject rules and includes load"))
        return;
    const char *extra[] = {"svc.shared.example inject bearer secret sbx", "plain.example",
                           "other.example inject bearer secret o until 2026-06-01T00:00Z",
                           "github.com inject basic secret gh"};
    struct policy_binding *b = bind(p, "top", extra, 4);
    const struct policy_inject *out[16];

    size_t n = injects(b, "svc.shared.example", 443, NOW, out, 16);
    ok(n == 6 && strcmp(secrets(out, n), "top top-2 mid base-a base-b sbx") == 0,
       "injects_for: own lines, then includes in order, then extras; a twice-included rule once "
       "(got %zu: %s)",
       n, secrets(out, n < 16 ? n : 16));
    ok(inject_is(out[2], POLICY_INJECT_BASIC, "authorization", "mid", "svc.shared.example",
                 "mid.allow", 2) &&
           inject_is(out[4], POLICY_INJECT_HEADER, "x-k", "base-b", "svc.shared.example",
                     "base.allow", 2) &&
           inject_is(out[5], POLICY_INJECT_BEARER, "authorization", "sbx", "svc.shared.example",
                     "sandbox 101", 1),
       "injects_for: each names the file and line it was written on");
    memset(out, 0, sizeof(out));
    n = injects(b, "svc.shared.example", 443, NOW, out, 3);
    ok(n == 6 && strcmp(secrets(out, 3), "top top-2 mid") == 0 && out[3] == NULL,
       "injects_for: max 3 of 6 fills three, counts six");
    ok(injects(b, "svc.shared.example", 443, NOW, NULL, 0) == 6, "injects_for: max 0, out NULL");
    n = injects(b, "svc.shared.example", 80, NOW, out, 16);
    ok(n == 5 && strcmp(secrets(out, n), "top top-2 mid base-a sbx") == 0,
       "injects_for: port 80 leaves out the :443 rule (got %s)", secrets(out, n));
    n = injects(b, "shared.example", 443, NOW, out, 16);
    ok(n == 1 && strcmp(out[0]->secret, "base-a") == 0, "injects_for: the apex only by '.x'");

    static const char *const all[] = {"top", "top-2", "mid", "base-a", "base-b", "sbx", "o", "gh"};
    bool same = true;
    for (size_t i = 0; i < 8; i++)
        same = same && policy_binding_inject(b, i) != NULL &&
               strcmp(policy_binding_inject(b, i)->secret, all[i]) == 0;
    ok(same && policy_binding_inject(b, 8) == NULL,
       "binding_inject: every rule, expired ones too, in the same order, then NULL");

    /* The flag for rules the extras hold. */
    static const struct want w[] = {
        {"github.com", 443, NOW, "allow", "allowed", 4, true},
        {"other.example", 443, EARLY, "allow", "allowed", 3, true},
        {"other.example", 443, NOW, "deny", "not_allowed", 0, false},
        {"plain.example", 443, NOW, "allow", "allowed", 2, false},
        {"svc.shared.example", 443, NOW, "allow", "allowed", 4, true}, /* the shortest key first */
        {"deny.shared.example", 443, NOW, "deny", "deny_rule", 5, false},
    };
    check_all(b, w, sizeof(w) / sizeof(w[0]), "extras");
    policy_binding_free(b);

    /* The preset allows by a plain rule; only the extras inject. */
    const char *extra2[] = {"plain.example inject bearer secret p",
                            "deny.shared.example inject bearer secret nope"};
    struct policy_diag d2 = {0};
    const char *pr2[] = {"q", "plain.example\ndeny deny.shared.example\n", NULL};
    struct policy *q = load(&d2, pr2);
    b = bind(q, "q", extra2, 2);
    static const struct want w2[] = {
        {"plain.example", 443, NOW, "allow", "allowed", 1, true},
        {"deny.shared.example", 443, NOW, "deny", "deny_rule", 2, false},
    };
    check_all(b, w2, sizeof(w2) / sizeof(w2[0]), "extras inject over a preset's allow");
    policy_binding_free(b);
    policy_unref(q);
    policy_diag_free(&d2);

    /* A binding without inject rules: nothing, and the flag stays false. */
    const char *pr3[] = {"plain", "github.com\n", NULL};
    q = load(&d2, pr3);
    b = bind(q, "plain", NULL, 0);
    struct policy_verdict v;
    ok(policy_binding_inject(b, 0) == NULL && injects(b, "github.com", 443, NOW, out, 16) == 0 &&
           strcmp(decide(b, "github.com", 443, NOW, &v), "allow") == 0 && !v.inject,
       "no inject rules: no injects, no flag");
    policy_binding_free(b);
    policy_unref(q);
    policy_diag_free(&d2);
    policy_unref(p);
    policy_diag_free(&d);
}

static void test_any_port(void)
{
    struct policy *p = load1("api.x.example:8443 inject bearer secret s\n" /* 1 */
                             "api.x.example\n"                             /* 2 */
                             "y.example inject bearer secret y\n"          /* 3 */
                             "deny y.example:443\n"                        /* 4 */
                             "z.example:* inject bearer secret z\n"        /* 5 */
                             "deny z.example:443,80,8443\n"                /* 6 */
                             "w.example:8443 inject bearer secret w\n"     /* 7 */
                             "deny w.example:8443\n"                       /* 8 */
                             "w.example\n"                                 /* 9 */
                             "plain.example\n"                             /* 10 */
                             "gone.example:8443 inject bearer secret g until 2026-06-01T00:00Z\n"
                             "gone.example\n"); /* 12 */
    if (!ok(p != NULL, "any-port preset loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    static const struct {
        const char *host;
        const char *decision;
        uint16_t port;
        bool inject;
        const char *what;
    } w[] = {
        {"api.x.example", "allow", 443, true, "inject on 8443 though 443 decided"},
        {"y.example", "allow", 80, true, "443 denied, inject on 80"},
        {"z.example", "allow", 1, true, "`:*` inject on a port no rule names"},
        {"w.example", "allow", 443, false, "the inject port is denied"},
        {"plain.example", "allow", 443, false, "no inject rule"},
        {"gone.example", "allow", 443, false, "the inject rule expired"},
        {"nothing.example", "deny", 443, false, "denied everywhere"},
    };
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        struct policy_host h = host_of(w[i].host);
        struct policy_verdict v;
        uint16_t port;
        const char *d = policy_decision_str(policy_decide_name_any(b, &h, NOW, &v, &port));
        ok(strcmp(d, w[i].decision) == 0 && port == w[i].port && v.inject == w[i].inject,
           "decide_name_any: %s: %s -> %s port %u inject %d (got %s port %u inject %d)", w[i].what,
           w[i].host, w[i].decision, w[i].port, w[i].inject, d, port, v.inject);
    }
    policy_binding_free(b);
    policy_unref(p);

    /* Report mode: 443 and 80 would_deny with inject, 8443 allows
     * without; the allow on 8443 decides, the flag comes from 443. */
    p = load1("mode report\n"
              "r.example inject bearer secret r\n"
              "deny r.example:443,80\n"
              "r.example:8443\n");
    b = bind(p, "p", NULL, 0);
    struct policy_host h = host_of("r.example");
    struct policy_verdict v;
    uint16_t port;
    ok(policy_decide_name_any(b, &h, NOW, &v, &port) == POLICY_ALLOW && port == 8443 && v.inject,
       "decide_name_any, report mode: inject where it would_deny (got port %u inject %d)", port,
       v.inject);
    policy_binding_free(b);
    policy_unref(p);
}

/* An inject rule with `methods`/`paths` binds its secret only in the
 * requests it admits (policy_injects_for_request); without a request,
 * every rule is listed, as policy_injects_for lists them. */
static void test_request_scope(void)
{
    struct policy *p = load1("gh.example inject bearer secret gh methods GET paths /repos/acme/**\n"
                             "gh.example methods POST\n"
                             "api.example inject bearer secret api\n");
    if (!ok(p != NULL, "a preset with a request-scoped inject rule loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    struct policy_host gh = host_of("gh.example"), api = host_of("api.example");
    const struct policy_inject *out[4];
    static const struct {
        const char *method, *path;
        size_t want;
        const char *what;
    } cases[] = {
        {"GET", "/repos/acme/x", 1, "a GET under /repos/acme: its rule binds the secret"},
        {"POST", "/repos/acme/x", 0, "a POST (another rule allows it): no rule binds the secret"},
        {"GET", "/user", 0, "a GET on another path: none"},
        {"get", "/repos/acme/x", 0, "a method in lower case is another method: none"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct policy_request rq = {cases[i].method, strlen(cases[i].method), cases[i].path,
                                    strlen(cases[i].path)};
        size_t n = policy_injects_for_request(b, &gh, 443, &rq, NOW, out, 4);
        ok(n == cases[i].want && (n == 0 || strcmp(out[0]->secret, "gh") == 0),
           "injects_for_request %s %s: %zu (%s)", cases[i].method, cases[i].path, n, cases[i].what);
    }
    struct policy_request none = {0};
    ok(policy_injects_for_request(b, &gh, 443, &none, NOW, out, 4) == 0,
       "injects_for_request with neither method nor path (an unread tunnel): none");
    ok(policy_injects_for_request(b, &gh, 443, NULL, NOW, out, 4) == 1 &&
           policy_injects_for(b, &gh, 443, NOW, out, 4) == 1,
       "no request (NULL): the rule is listed, as policy_injects_for lists it");
    struct policy_request post = {"POST", 4, "/anything", 9};
    ok(policy_injects_for_request(b, &api, 443, &post, NOW, out, 4) == 1,
       "a rule without methods or paths binds its secret in every request");
    policy_binding_free(b);
    policy_unref(p);
}

int main(void)
{
    test_forms();
    test_refusals();
    test_allows();
    test_order();
    test_any_port();
    test_request_scope();
    return tap_done();
}
