/*
 * test_request.c - request rules (`methods`, `paths`, a preset's
 * `read-only`) in the one decision: what a request to a host is decided
 * (allow, method_not_allowed, path_not_allowed, report mode's
 * would_deny) and which rule is named; that allows add up across the
 * preset, its includes and a binding's lines; that a deny still wins;
 * the name phase's `requests` flag for a tunnel; `git-push` rules
 * (policy_decide_push, the name phase's `push` flag, an unread tunnel
 * denied); and every refusal of the syntax with its place.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define NOW 1796083200 /* 2026-12-01T00:00Z */

/* Build a policy from NAME, TEXT pairs (NULL-terminated), files NAME.allow;
 * errors into *d. */
static struct policy *load(struct policy_diag *d, const char *const *presets)
{
    struct policy_builder *b = policy_builder_new();
    char file[64];

    for (size_t i = 0; presets[i] != NULL; i += 2) {
        snprintf(file, sizeof(file), "%s.allow", presets[i]);
        policy_builder_add_preset(b, presets[i], file, presets[i + 1], strlen(presets[i + 1]));
    }
    return policy_builder_finish(b, d);
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

/* "allow allowed p.allow:2", "deny path_not_allowed p.allow:1", ... for
 * METHOD PATH (path NULL: none) to HOST:PORT; rq NULL when method is. */
static const char *decide(const struct policy_binding *b, const char *host, uint16_t port,
                          const char *method, const char *path)
{
    static char out[160];
    struct policy_host h;
    struct policy_verdict v;
    struct policy_request rq = {method, method ? strlen(method) : 0, path, path ? strlen(path) : 0};

    if (policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK)
        abort();
    policy_decide_request(b, &h, port, method != NULL || path != NULL ? &rq : NULL, NULL, 0, NOW,
                          &v);
    snprintf(out, sizeof(out), "%s %s %s:%u%s", policy_decision_str(v.decision),
             policy_reason_str(v.reason), v.rule.file ? v.rule.file : "-", v.rule.line,
             v.requests ? " requests" : "");
    return out;
}

/* One check: decide(...) gives want. */
static void is(const struct policy_binding *b, const char *host, uint16_t port, const char *method,
               const char *path, const char *want)
{
    const char *got = decide(b, host, port, method, path);
    ok(strcmp(got, want) == 0, "%s %s %s:%u -> %s (got %s)", method ? method : "-",
       path ? path : "-", host, port, want, got);
}

static void semantics(void)
{
    struct policy_diag d = {0};
    const char *p[] = {"p",
                       "api.example.com methods GET,HEAD paths /repos/acme/**,/user\n" /* 1 */
                       "api.example.com methods POST paths /repos/acme/*/issues\n"     /* 2 */
                       "open.example.com\n"                                            /* 3 */
                       "open.example.com methods GET\n"                                /* 4 */
                       ".npm.test methods GET,HEAD\n"                                  /* 5 */
                       "deny bad.npm.test\n"                                           /* 6 */
                       "~[a-z]+\\.rx\\.test paths /ok/**\n"                            /* 7 */
                       "include ro\n",
                       "ro",
                       "read-only\nro.test\nro.test:8080 methods POST\n",
                       "rep",
                       "mode report\nrep.test methods GET\n",
                       NULL};
    struct policy *pol = load(&d, p);
    ok(pol != NULL && d.n == 0, "a preset with request rules loads (%zu errors)", d.n);
    if (pol == NULL) {
        for (size_t i = 0; i < d.n; i++)
            diag("%s", d.lines[i]);
        policy_diag_free(&d);
        return;
    }
    const char *extra[] = {"api.example.com paths /gists/**", "ro.test:9000"};
    struct policy_binding *b = bind(pol, "p", extra, 1);
    struct policy_binding *r = bind(pol, "ro", extra + 1, 1);
    struct policy_binding *rep = bind(pol, "rep", NULL, 0);

    is(b, "api.example.com", 443, "GET", "/repos/acme/x/y", "allow allowed p.allow:1");
    is(b, "api.example.com", 443, "HEAD", "/user", "allow allowed p.allow:1");
    is(b, "api.example.com", 443, "POST", "/repos/acme/x/issues", "allow allowed p.allow:2");
    is(b, "api.example.com", 443, "POST", "/repos/acme/x", "deny method_not_allowed p.allow:1");
    is(b, "api.example.com", 443, "DELETE", "/user", "deny method_not_allowed p.allow:1");
    is(b, "api.example.com", 443, "GET", "/repos/other", "deny path_not_allowed p.allow:1");
    is(b, "api.example.com", 443, "GET", "/users", "deny path_not_allowed p.allow:1");
    is(b, "api.example.com", 443, "get", "/user", "deny method_not_allowed p.allow:1");
    is(b, "api.example.com", 443, "GET", NULL, "deny path_not_allowed p.allow:1");
    is(b, "api.example.com", 443, NULL, NULL, "allow allowed p.allow:1 requests");
    is(b, "api.example.com", 443, "DELETE", "/gists/1", "allow allowed sandbox 101:1");
    is(b, "api.example.com", 8443, "GET", "/user", "deny not_allowed -:0");
    is(b, "open.example.com", 443, "DELETE", "/anything", "allow allowed p.allow:3");
    is(b, "open.example.com", 443, NULL, NULL, "allow allowed p.allow:3");
    is(b, "x.npm.test", 443, "PUT", "/pkg", "deny method_not_allowed p.allow:5");
    is(b, "bad.npm.test", 443, "GET", "/pkg", "deny deny_rule p.allow:6");
    is(b, "a.rx.test", 443, "POST", "/ok/1", "allow allowed p.allow:7");
    is(b, "a.rx.test", 443, "POST", "/no", "deny path_not_allowed p.allow:7");
    is(b, "ro.test", 443, "POST", "/", "allow allowed ro.allow:2");
    is(r, "ro.test", 443, "POST", "/", "deny method_not_allowed ro.allow:2");
    is(r, "ro.test", 443, "OPTIONS", "/", "allow allowed ro.allow:2");
    is(r, "ro.test", 8080, "POST", "/", "allow allowed ro.allow:3");
    is(r, "ro.test", 9000, "DELETE", "/", "deny method_not_allowed sandbox 101:1");
    is(r, "ro.test", 9000, "GET", "/", "allow allowed sandbox 101:1");
    is(rep, "rep.test", 443, "POST", "/", "would_deny method_not_allowed rep.allow:2");
    policy_binding_free(b);
    policy_binding_free(r);
    policy_binding_free(rep);
    policy_unref(pol);
}

/* The first error loading TEXT as p.allow (or "" when it loads). */
static const char *refusal(const char *text)
{
    static char out[400];
    struct policy_diag d = {0};
    const char *p[] = {"p", text, NULL};
    struct policy *pol = load(&d, p);

    snprintf(out, sizeof(out), "%s", d.n > 0 ? d.lines[0] : "");
    policy_diag_free(&d);
    policy_unref(pol);
    return out;
}

static void refusals(void)
{
    static const struct {
        const char *text, *want;
    } r[] = {
        {"a.test methods get", "p.allow:1:16: unknown method 'get'; did you mean 'GET'?"},
        {"a.test methods GET,FOO", "p.allow:1:20: expected a method: GET, HEAD, POST"},
        {"a.test methods", "p.allow:1:15: expected a method list after 'methods'"},
        {"a.test methods GET,", "p.allow:1:20: expected a method list after 'methods'"},
        {"a.test paths repos", "p.allow:1:14: path glob 'repos': a path glob starts with '/'"},
        {"a.test paths /a//b", "p.allow:1:17: path glob '/a//b': '//' can never match"},
        {"a.test paths /a/../b", "p.allow:1:17: path glob '/a/../b': a '.' or '..' segment"},
        {"a.test paths /a?b", "p.allow:1:16: path glob '/a?b': a '?' can never match"},
        {"a.test paths /a**", "p.allow:1:16: path glob '/a**': '**' must be a whole segment"},
        {"a.test paths /%7E", "p.allow:1:15: path glob '/%7E': an escaped letter"},
        {"a.test paths /x,/y,/a b", "p.allow:1:23: expected 'raw', 'private-ok', 'inject'"},
        {"a.test:22 paths /x", "p.allow:1:11: 'paths' does not go on a rule for port 22"},
        {"a.test:22 methods GET", "p.allow:1:11: 'methods' does not go on a rule for port 22"},
        {"ip 10.0.0.0/8 methods GET", "p.allow:1:15: 'methods' needs a host rule, not an 'ip'"},
        {"1.2.3.4 paths /x", "p.allow:1:9: 'paths' needs a host name, not an IP address"},
        {"a.test:443 raw methods GET", "p.allow:1:16: 'methods' cannot be combined with 'raw'"},
        {"deny a.test methods GET", "p.allow:1:13: expected 'until' or end of line"},
        {"a.test paths /a paths /b", "p.allow:1:17: 'paths' given twice in one rule"},
        {"read-only now", "p.allow:1:11: expected end of line after 'read-only'"},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        const char *got = refusal(r[i].text);
        ok(strncmp(got, r[i].want, strlen(r[i].want)) == 0, "refused: '%s' -> %s (got: %s)",
           r[i].text, r[i].want, got);
    }
    ok(refusal(
           "a.test methods GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS,TRACE paths /,/**,/a/*.git/**,"
           "/x;y=1/z,/%20,/@:!$&'()+=\n")[0] == '\0',
       "every method and the glob forms load");
    struct policy_diag d = {0};
    const char *p[] = {"p", "a.test\n", NULL};
    struct policy *pol = load(&d, p);
    const char *bad[] = {"read-only"};
    struct policy_binding *b = pol ? policy_binding_new(pol, "p", bad, 1, "sandbox 7", &d) : NULL;
    ok(b == NULL && d.n == 1 && strstr(d.lines[0], "sandbox 7:1:1: 'read-only' is not allowed"),
       "a sandbox's lines cannot say read-only (%s)", d.n ? d.lines[0] : "-");
    policy_diag_free(&d);
    policy_unref(pol);
}

/* "allow allowed p.allow:1", "deny push_not_allowed p.allow:2", ... for
 * a push of ref (deleting it or not) to host:443 under b. */
static const char *push(const struct policy_binding *b, const char *host, const char *ref,
                        bool deletes)
{
    static char out[160];
    struct policy_host h;
    struct policy_verdict v;

    if (policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK)
        abort();
    policy_decide_push(b, &h, 443, ref, strlen(ref), deletes, NOW, &v);
    snprintf(out, sizeof(out), "%s %s %s:%u", policy_decision_str(v.decision),
             policy_reason_str(v.reason), v.rule.file ? v.rule.file : "-", v.rule.line);
    return out;
}

/* One check: push(...) gives want. */
static void push_is(const struct policy_binding *b, const char *host, const char *ref, bool del,
                    const char *want)
{
    const char *got = push(b, host, ref, del);
    ok(strcmp(got, want) == 0, "push %s%s to %s -> %s (got %s)", del ? "delete " : "", ref, host,
       want, got);
}

static void git_push(void)
{
    struct policy_diag d = {0};
    const char *p[] = {
        "p",
        "github.com inject basic secret github\n"                               /* 1 */
        "github.com git-push refs/heads/agent/**,refs/tags/agent-* no-delete\n" /* 2 */
        "gitlab.com git-push refs/heads/*\n"                                    /* 3 */
        "other.com\n",                                                          /* 4 */
        "rep", "mode report\ngit.test git-push refs/heads/agent/**\n", NULL};
    struct policy *pol = load(&d, p);
    ok(pol != NULL && d.n == 0, "a preset with git-push rules loads (%zu errors)", d.n);
    if (pol == NULL) {
        policy_diag_free(&d);
        return;
    }
    const char *extra[] = {"github.com git-push refs/heads/grant/x"};
    struct policy_binding *b = bind(pol, "p", extra, 1), *rep = bind(pol, "rep", NULL, 0);

    push_is(b, "github.com", "refs/heads/agent/x", false, "allow allowed p.allow:2");
    push_is(b, "github.com", "refs/heads/agent/a/b/c", false, "allow allowed p.allow:2");
    push_is(b, "github.com", "refs/tags/agent-1", false, "allow allowed p.allow:2");
    push_is(b, "github.com", "refs/heads/main", false, "deny push_not_allowed p.allow:2");
    push_is(b, "github.com", "refs/heads/agentx", false, "deny push_not_allowed p.allow:2");
    push_is(b, "github.com", "refs/heads/agent/x", true, "deny push_not_allowed p.allow:2");
    push_is(b, "github.com", "refs/heads/grant/x", false, "allow allowed sandbox 101:1");
    push_is(b, "github.com", "refs/heads/grant/x", true, "allow allowed sandbox 101:1");
    push_is(b, "gitlab.com", "refs/heads/main", true, "allow allowed p.allow:3");
    push_is(b, "gitlab.com", "refs/heads/a/b", false, "deny push_not_allowed p.allow:3");
    push_is(b, "other.com", "refs/heads/main", false, "allow allowed -:0");
    push_is(rep, "git.test", "refs/heads/main", false, "would_deny push_not_allowed rep.allow:2");
    /* the name phase: pushes to the host must be read */
    is(b, "github.com", 443, NULL, NULL, "allow allowed p.allow:1");
    struct policy_host h;
    struct policy_verdict v;
    policy_host_normalize("github.com", 10, &h);
    policy_decide_request(b, &h, 443, NULL, NULL, 0, NOW, &v);
    ok(v.push && v.inject, "github.com: the name phase says push (and inject)");
    policy_host_normalize("other.com", 9, &h);
    policy_decide_request(b, &h, 443, NULL, NULL, 0, NOW, &v);
    ok(!v.push, "other.com: no git-push rule, no push flag");
    is(b, "github.com", 443, "GET", "/acme/x.git/info/refs", "allow allowed p.allow:1");
    struct policy_request unread = {0};
    policy_host_normalize("github.com", 10, &h);
    policy_decide_request(b, &h, 443, &unread, NULL, 0, NOW, &v);
    ok(v.decision == POLICY_DENY && v.reason == POLICY_R_PUSH_NOT_ALLOWED && v.rule.line == 2,
       "a tunnel that is not read (no method) could carry a push: denied push_not_allowed, rule 2");
    policy_binding_free(b);
    policy_binding_free(rep);
    policy_unref(pol);

    static const struct {
        const char *text, *want;
    } r[] = {
        {"a.test git-push main", "p.allow:1:17: ref glob 'main': a ref glob starts with 'refs/'"},
        {"a.test git-push refs/heads/a..b", "p.allow:1:29: ref glob 'refs/heads/a..b': '..'"},
        {"a.test git-push refs/heads//x", "p.allow:1:28: ref glob 'refs/heads//x': an empty"},
        {"a.test git-push refs/heads/a**", "p.allow:1:28: ref glob 'refs/heads/a**': '**' must"},
        {"a.test git-push refs/heads/a b", "p.allow:1:30: expected 'raw', 'private-ok'"},
        {"a.test no-delete", "p.allow:1:8: 'no-delete' goes with 'git-push REFGLOB'"},
        {"a.test no-force", "p.allow:1:8: 'no-force' goes with 'git-push REFGLOB'"},
        {"a.test git-push refs/heads/x no-force no-force", "p.allow:1:39: 'no-force' given twice"},
        {"~a\\.test git-push refs/heads/x", "p.allow:1:10: 'git-push' needs a host name"},
        {"a.test:22 git-push refs/heads/x",
         "p.allow:1:11: 'git-push' does not go on a rule for port 22"},
        {"a.test git-push refs/heads/x git-push refs/heads/y",
         "p.allow:1:30: 'git-push' given twice"},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        const char *got = refusal(r[i].text);
        ok(strncmp(got, r[i].want, strlen(r[i].want)) == 0, "refused: '%s' -> %s (got: %s)",
           r[i].text, r[i].want, got);
    }
}

/* `no-force`: an update admitted only by rules that say it must be a
 * fast-forward (v.fast_forward_only); a rule without it that also admits
 * the ref lifts that (allows add up). */
static void no_force(void)
{
    struct policy_diag d = {0};
    const char *p[] = {"p",
                       "git.test git-push refs/heads/agent/** no-force\n"     /* 1 */
                       "git.test git-push refs/heads/agent/free/*\n"          /* 2 */
                       "gh.test git-push refs/heads/** no-force no-delete\n", /* 3 */
                       NULL};
    struct policy *pol = load(&d, p);
    ok(pol != NULL && d.n == 0, "a preset with no-force rules loads (%zu errors)", d.n);
    if (pol == NULL) {
        policy_diag_free(&d);
        return;
    }
    struct policy_binding *b = bind(pol, "p", NULL, 0);
    static const struct {
        const char *host, *ref;
        bool del;
        const char *want;
        bool ff;
    } c[] = {
        {"git.test", "refs/heads/agent/x", false, "allow allowed p.allow:1", true},
        {"git.test", "refs/heads/agent/free/x", false, "allow allowed p.allow:2", false},
        {"git.test", "refs/heads/main", false, "deny push_not_allowed p.allow:1", false},
        {"git.test", "refs/heads/agent/x", true, "allow allowed p.allow:1", true},
        {"gh.test", "refs/heads/main", false, "allow allowed p.allow:3", true},
        {"gh.test", "refs/heads/main", true, "deny push_not_allowed p.allow:3", false},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        struct policy_host h;
        struct policy_verdict v;
        policy_host_normalize(c[i].host, strlen(c[i].host), &h);
        policy_decide_push(b, &h, 443, c[i].ref, strlen(c[i].ref), c[i].del, NOW, &v);
        const char *got = push(b, c[i].host, c[i].ref, c[i].del);
        ok(strcmp(got, c[i].want) == 0 && v.fast_forward_only == c[i].ff,
           "push %s%s to %s -> %s, fast-forward only %s (got %s, %s)", c[i].del ? "delete " : "",
           c[i].ref, c[i].host, c[i].want, c[i].ff ? "yes" : "no", got,
           v.fast_forward_only ? "yes" : "no");
    }
    policy_binding_free(b);
    policy_unref(pol);
}

int main(void)
{
    semantics();
    refusals();
    git_push();
    no_force();
    return tap_done();
}
