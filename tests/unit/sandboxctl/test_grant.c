/* test_grant.c - what an approved access request lets a sandbox do
 * (grant.h): a grant's methods and paths in canonical form or refused,
 * its policy line, whether egressd would load it, the narrowest grant
 * that covers a denial, and which denials a grant would let pass (the
 * expectations here are written out by hand, not computed with the
 * functions under test). */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "grant.h"
#include "meta.h"
#include "tap.h"

/* A grant of allow entry allow, methods and paths (NULL for ""). */
static struct sbx_grant grant(const char *allow, const char *methods, const char *paths)
{
    struct sbx_grant g;

    memset(&g, 0, sizeof g);
    snprintf(g.allow, sizeof g.allow, "%s", allow);
    snprintf(g.methods, sizeof g.methods, "%s", methods ? methods : "");
    snprintf(g.paths, sizeof g.paths, "%s", paths ? paths : "");
    return g;
}

struct methods_case {
    const char *in, *out; /* out NULL: refused */
    const char *word;     /* refused: what err quotes */
};

static void test_methods(void)
{
    static const struct methods_case cases[] = {
        {"get,HEAD,get", "GET,HEAD", NULL},
        {"delete,GET", "GET,DELETE", NULL},
        {"", "", NULL},
        {"TRACE,options,Patch,put,post,head,get,DELETE",
         "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS,TRACE", NULL},
        {"FETCH", NULL, "'FETCH'"},
        {"GET,,HEAD", NULL, "''"},
        {"GET ", NULL, "'GET '"},
        {"GET,", NULL, "''"},
        {"GET,CONNECT", NULL, "'CONNECT'"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char methods[SBX_GRANT_METHODS_MAX], paths[SBX_GRANT_PATHS_MAX] = "", err[256] = "";
        snprintf(methods, sizeof methods, "%s", cases[i].in);
        int r = sbx_grant_scope_normalize(methods, paths, err, sizeof err);
        if (cases[i].out != NULL)
            ok(r == 0 && strcmp(methods, cases[i].out) == 0,
               "methods \"%s\" normalize to \"%s\" (got \"%s\", %s)", cases[i].in, cases[i].out,
               methods, r == 0 ? "ok" : err);
        else
            ok(r == -1 && strstr(err, cases[i].word) != NULL &&
                   strstr(err, "is not one of GET, HEAD") != NULL,
               "methods \"%s\" refused, err names %s: %s", cases[i].in, cases[i].word, err);
    }
}

struct paths_case {
    const char *in;
    int accepted;
    const char *why; /* refused: a substring of err */
};

static void test_paths(void)
{
    static const struct paths_case cases[] = {
        {"/repos/acme/**", 1, NULL},
        {"/repos/acme/**,/user,/v1/*/messages,/@acme/**", 1, NULL},
        {"", 1, NULL},
        {"/a,/b,/c,/d,/e,/f,/g,/h", 1, NULL},
        {"/a/../b", 0, "paths: '/a/../b'"},
        {"a/b", 0, "paths: 'a/b'"},
        {"/a?x", 0, "paths: '/a?x'"},
        {"//a", 0, "paths: '//a'"},
        {"/ok,/a/../b", 0, "paths: '/a/../b'"},
        {"/a,/b,/c,/d,/e,/f,/g,/h,/i", 0, "at most 8 globs"},
        {"/a,", 0, "paths: ''"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char methods[SBX_GRANT_METHODS_MAX] = "", paths[SBX_GRANT_PATHS_MAX], err[256] = "";
        snprintf(paths, sizeof paths, "%s", cases[i].in);
        int r = sbx_grant_scope_normalize(methods, paths, err, sizeof err);
        if (cases[i].accepted)
            ok(r == 0 && strcmp(paths, cases[i].in) == 0, "paths \"%s\" accepted unchanged (%s)",
               cases[i].in, r == 0 ? "ok" : err);
        else
            ok(r == -1 && strstr(err, cases[i].why) != NULL &&
                   (strstr(err, " at ") != NULL || strstr(err, "at most") != NULL) &&
                   strlen(err) > strlen(cases[i].why) + 5,
               "paths \"%s\" refused with a reason naming %s: %s", cases[i].in, cases[i].why, err);
    }

    /* both at once: methods rewritten, paths checked */
    char methods[SBX_GRANT_METHODS_MAX] = "head,get", paths[SBX_GRANT_PATHS_MAX] = "/x/**",
         err[256] = "";
    ok(sbx_grant_scope_normalize(methods, paths, err, sizeof err) == 0 &&
           strcmp(methods, "GET,HEAD") == 0 && strcmp(paths, "/x/**") == 0,
       "methods and paths together: \"GET,HEAD\" and \"/x/**\" (%s)", err);
    snprintf(methods, sizeof methods, "GET");
    snprintf(paths, sizeof paths, "a/b");
    ok(sbx_grant_scope_normalize(methods, paths, err, sizeof err) == -1 &&
           strstr(err, "paths:") == err,
       "good methods do not save bad paths: %s", err);
}

static void test_line(void)
{
    struct sbx_grant g = grant("api.github.com:443", "GET,HEAD", "/repos/acme/**,/user");
    char buf[1200], small[20];
    time_t t;

    ok(sbx_time_parse("2026-11-30T08:00:00Z", &t) == 0, "2026-11-30T08:00:00Z parses");
    g.until = t;
    ok(sbx_grant_line(&g, false, buf, sizeof buf) ==
               (int)strlen("api.github.com:443 methods GET,HEAD paths /repos/acme/**,/user") &&
           strcmp(buf, "api.github.com:443 methods GET,HEAD paths /repos/acme/**,/user") == 0,
       "line without until: \"%s\"", buf);
    ok(sbx_grant_line(&g, true, buf, sizeof buf) > 0 &&
           strcmp(buf, "api.github.com:443 methods GET,HEAD paths /repos/acme/**,/user until "
                       "2026-11-30T08:00:00Z") == 0,
       "line with until: \"%s\"", buf);

    struct sbx_grant h = grant("crates.io:443", NULL, NULL);
    h.until = t;
    ok(sbx_grant_line(&h, false, buf, sizeof buf) == 13 && strcmp(buf, "crates.io:443") == 0,
       "an unscoped grant's line is its entry: \"%s\"", buf);
    ok(sbx_grant_line(&h, true, buf, sizeof buf) > 0 &&
           strcmp(buf, "crates.io:443 until 2026-11-30T08:00:00Z") == 0,
       "an unscoped grant with until: \"%s\"", buf);
    struct sbx_grant p = grant(".npmjs.org", NULL, "/@acme/**");
    ok(sbx_grant_line(&p, false, buf, sizeof buf) > 0 &&
           strcmp(buf, ".npmjs.org paths /@acme/**") == 0,
       "paths without methods: \"%s\"", buf);
    struct sbx_grant m = grant("example.org:80", "POST", NULL);
    ok(sbx_grant_line(&m, false, buf, sizeof buf) > 0 &&
           strcmp(buf, "example.org:80 methods POST") == 0,
       "methods without paths: \"%s\"", buf);
    ok(sbx_grant_line(&g, false, small, sizeof small) == -1, "a line that does not fit: -1");
    ok(sbx_grant_line(&h, false, small, 13) == -1 && sbx_grant_line(&h, false, small, 14) == 13,
       "the line needs room for its NUL: 13 bytes refused, 14 taken");
}

struct check_case {
    const char *allow, *methods, *paths;
    const char *err; /* NULL: accepted; else err starts with it */
};

static void test_check(void)
{
    static const struct check_case cases[] = {
        {"crates.io", NULL, NULL, NULL},
        {"api.github.com:443", "GET,HEAD", "/repos/acme/**,/user", NULL},
        {"*.example.org:443", "GET", NULL, NULL},
        {".npmjs.org:443,8443", NULL, "/@acme/**", NULL},
        {"git.example.org:22", NULL, "/a", "grant:1:"},
        {"git.example.org:22", "GET", NULL, "grant:1:"},
        /* words smuggled in through the entry meet the scope's own */
        {"a.org raw", "GET", NULL, "grant:1:"},
        {"a.org raw", NULL, "/x", "grant:1:"},
        {"a.org methods POST", "GET", NULL, "grant:1:"},
        {"a.org paths /x", NULL, "/y", "grant:1:"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sbx_grant g = grant(cases[i].allow, cases[i].methods, cases[i].paths);
        char err[512] = "";
        int r = sbx_grant_check(&g, err, sizeof err);
        if (cases[i].err == NULL)
            ok(r == 0, "egressd would load \"%s\" methods \"%s\" paths \"%s\" (%s)", g.allow,
               g.methods, g.paths, r == 0 ? "ok" : err);
        else
            ok(r == -1 && err[0] != '\0' && strncmp(err, cases[i].err, strlen(cases[i].err)) == 0,
               "\"%s\" methods \"%s\" paths \"%s\" refused, err starting \"%s\": %s", g.allow,
               g.methods, g.paths, cases[i].err, err);
    }
}

/* An egressd denial object. */
static json_t *denial(const char *host, int port, const char *method, const char *path,
                      const char *reason)
{
    return json_pack("{s:s, s:s, s:s?, s:i, s:s?, s:s?, s:s}", "ts", "2026-11-30T08:00:00Z", "mode",
                     "intercept", "method", method, "port", port, "host", host, "path", path,
                     "reason", reason);
}

struct narrow_case {
    const char *what;
    const char *host;
    int port;
    const char *method, *path, *reason;
    const char *allow, *methods, *paths; /* allow NULL: no grant */
};

static void test_narrowest(void)
{
    static const struct narrow_case cases[] = {
        {"a GET of an API path", "api.github.com", 443, "GET", "/repos/acme/widget/pulls",
         "not_allowed", "api.github.com:443", "GET", "/repos/acme/**"},
        {"a short path is its own glob", "api.anthropic.com", 443, "POST", "/v1/messages",
         "path_not_allowed", "api.anthropic.com:443", "POST", "/v1/messages"},
        {"a method refused on its path", "api.github.com", 443, "DELETE", "/repos/acme/w",
         "method_not_allowed", "api.github.com:443", "DELETE", "/repos/acme/**"},
        {"a tunnel (CONNECT, no path)", "github.com", 443, "CONNECT", NULL, "not_allowed",
         "github.com:443", "", ""},
        {"no method, no path", "github.com", 22, NULL, NULL, "not_allowed", "github.com:22", "",
         ""},
        {"a lower-case method is another method", "api.github.com", 443, "get", "/repos/acme/x",
         "not_allowed", "api.github.com:443", "", ""},
        {"an unknown method", "api.github.com", 443, "FETCH", "/repos/acme/x", "not_allowed",
         "api.github.com:443", "", ""},
        {"a path that does not normalize", "api.github.com", 443, "GET", "/a/%2F/b", "not_allowed",
         "api.github.com:443", "", ""},
        {"a method without a path", "api.github.com", 80, "GET", NULL, "not_allowed",
         "api.github.com:80", "", ""},
        {"upper case in the host", "API.GitHub.com", 443, "GET", "/user", "not_allowed",
         "api.github.com:443", "GET", "/user"},
        {"dot segments in the path", "example.org", 8443, "PUT", "/a/./b/../c/d/e", "not_allowed",
         "example.org:8443", "PUT", "/a/c/**"},
        {"a deny rule stands", "api.github.com", 443, "GET", "/user", "deny_rule", NULL, NULL,
         NULL},
        {"a private range stands", "intranet.example", 443, "GET", "/", "private_range", NULL, NULL,
         NULL},
        {"a push rule's refusal stands", "github.com", 443, "POST", "/acme/w/git-receive-pack",
         "push_not_allowed", NULL, NULL, NULL},
        {"geo stands", "example.ru", 443, "GET", "/", "geo", NULL, NULL, NULL},
        {"an IPv4 address is no host to grant", "10.0.0.1", 443, "GET", "/", "not_allowed", NULL,
         NULL, NULL},
        {"an IPv6 address is no host to grant", "[2001:db8::1]", 443, "GET", "/", "not_allowed",
         NULL, NULL, NULL},
        {"port 0", "example.org", 0, "GET", "/", "not_allowed", NULL, NULL, NULL},
        {"port 70000", "example.org", 70000, "GET", "/", "not_allowed", NULL, NULL, NULL},
        {"port -1", "example.org", -1, "GET", "/", "not_allowed", NULL, NULL, NULL},
        {"a host with a blank", "example.org raw", 443, "GET", "/", "not_allowed", NULL, NULL,
         NULL},
        {"a host with a port in it", "example.org:22", 443, "GET", "/", "not_allowed", NULL, NULL,
         NULL},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct narrow_case *c = &cases[i];
        json_t *d = denial(c->host, c->port, c->method, c->path, c->reason);
        struct sbx_grant g;
        memset(&g, 'x', sizeof g);
        bool r = sbx_grant_narrowest(d, &g);
        if (c->allow == NULL)
            ok(!r, "%s: no grant (%s %s:%d %s)", c->what, c->reason, c->host, c->port,
               c->path ? c->path : "-");
        else
            ok(r && strcmp(g.allow, c->allow) == 0 && strcmp(g.methods, c->methods) == 0 &&
                   strcmp(g.paths, c->paths) == 0 && g.until == 0,
               "%s: allow \"%s\" methods \"%s\" paths \"%s\" (got %d \"%.300s\" \"%.64s\" "
               "\"%.100s\")",
               c->what, c->allow, c->methods, c->paths, r, r ? g.allow : "", r ? g.methods : "",
               r ? g.paths : "");
        json_decref(d);
    }

    /* malformed denials */
    struct sbx_grant g;
    json_t *d = json_pack("{s:s, s:i, s:s}", "host", "example.org", "port", 443, "method", "GET");
    ok(!sbx_grant_narrowest(d, &g), "a denial without a reason: no grant");
    json_decref(d);
    d = json_pack("{s:i, s:s}", "port", 443, "reason", "not_allowed");
    ok(!sbx_grant_narrowest(d, &g), "a denial without a host: no grant");
    json_decref(d);
    d = json_pack("{s:s, s:s, s:s}", "host", "example.org", "port", "443", "reason", "not_allowed");
    ok(!sbx_grant_narrowest(d, &g), "a denial whose port is a string: no grant");
    json_decref(d);
    d = json_string("example.org");
    ok(!sbx_grant_narrowest(d, &g), "a denial that is not an object: no grant");
    json_decref(d);

    /* what narrowest proposes, egressd loads */
    d = denial("api.github.com", 443, "GET", "/repos/acme/widget/pulls", "not_allowed");
    char err[256] = "";
    ok(sbx_grant_narrowest(d, &g) && sbx_grant_check(&g, err, sizeof err) == 0,
       "the narrowest grant of a denial loads (%s)", err[0] ? err : "ok");
    json_decref(d);
}

/* The denials would_pass is judged on; each one's "ts" seconds are its
 * index (see ids()). */
static json_t *denials(void)
{
    static const struct {
        const char *host;
        int port;
        const char *method, *path, *reason;
    } ds[] = {
        /* 0 */ {"api.github.com", 443, "GET", "/a/b", "not_allowed"},
        /* 1 */ {"api.github.com", 443, "POST", "/a/x", "method_not_allowed"},
        /* 2 */ {"api.github.com", 443, "GET", "/b/c", "path_not_allowed"},
        /* 3 */ {"api.github.com", 443, "GET", "/a/b", "deny_rule"},
        /* 4 */ {"api.github.com", 8443, "GET", "/a/b", "not_allowed"},
        /* 5 */ {"api.github.com", 443, "CONNECT", NULL, "not_allowed"},
        /* 6 */ {"x.example.org", 443, "GET", "/a", "not_allowed"},
        /* 7 */ {"example.org", 443, "GET", "/a", "not_allowed"},
        /* 8 */ {"x.example.org", 80, "GET", "/a", "not_allowed"},
        /* 9 */ {"api.github.com", 443, "get", "/a/b", "not_allowed"},
        /* 10 */ {"api.github.com", 443, "GET", "/a/b", "private_range"},
        /* 11 */ {"API.GitHub.com", 443, "GET", "/a/./q/../b", "not_allowed"},
        /* 12 */ {"api.github.com", 443, "GET", "/a/b", "push_not_allowed"},
        /* 13 */ {"10.0.0.1", 443, "GET", "/a/b", "not_allowed"},
        /* 14 */ {"api.github.com", 443, "GET", "/a/%2F/b", "not_allowed"},
    };
    json_t *a = json_array();

    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        json_t *d = denial(ds[i].host, ds[i].port, ds[i].method, ds[i].path, ds[i].reason);
        char ts[32];
        snprintf(ts, sizeof ts, "2026-11-30T08:00:%02zuZ", i);
        json_object_set_new(d, "ts", json_string(ts));
        json_array_append_new(a, d);
    }
    /* malformed: 20 no host, 21 a port that is a string, then not an object */
    json_array_append_new(a, json_pack("{s:s, s:i, s:s, s:s, s:s}", "ts", "2026-11-30T08:00:20Z",
                                       "port", 443, "method", "GET", "path", "/a/b", "reason",
                                       "not_allowed"));
    json_array_append_new(a,
                          json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "ts", "2026-11-30T08:00:21Z",
                                    "host", "api.github.com", "port", "443", "method", "GET",
                                    "path", "/a/b", "reason", "not_allowed"));
    json_array_append_new(a, json_string("api.github.com"));
    json_array_append_new(a, json_null());
    return a;
}

/* The indices (the ts seconds) of the objects in pass, "j" after one with
 * "requests_judged": true, space-separated, into buf; "?" for anything
 * else in it. */
static const char *ids(json_t *pass, char *buf, size_t len)
{
    size_t used = 0, i;
    json_t *d;

    buf[0] = '\0';
    json_array_foreach(pass, i, d)
    {
        const char *ts = json_string_value(json_object_get(d, "ts"));
        json_t *j = json_object_get(d, "requests_judged");
        unsigned s;
        if (ts == NULL || sscanf(ts, "2026-11-30T08:00:%uZ", &s) != 1 ||
            (j != NULL && !json_is_true(j)))
            s = 99;
        int n = snprintf(buf + used, len - used, "%s%u%s", used ? " " : "", s, j ? "j" : "");
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
    }
    return buf;
}

struct pass_case {
    const char *what;
    const char *allow, *methods, *paths;
    const char *want; /* ids() of what passes */
};

static void test_would_pass(void)
{
    /* A path that does not normalize (14) passes no grant that names
     * paths, and any other that admits its host and method. */
    static const struct pass_case cases[] = {
        {"the whole host on 443", "api.github.com:443", NULL, NULL, "0 1 2 5 9 11 14"},
        {"the host on 443 and 80 (no port written)", "api.github.com", NULL, NULL,
         "0 1 2 5 9 11 14"},
        {"GET on the host", "api.github.com:443", "GET", NULL, "0 2 5j 11 14"},
        {"GET and POST on the host", "api.github.com:443", "GET,POST", NULL, "0 1 2 5j 11 14"},
        {"paths /a/** on the host", "api.github.com:443", NULL, "/a/**", "0 1 5j 9 11"},
        {"GET on /a/** of the host", "api.github.com:443", "GET", "/a/**", "0 5j 11"},
        {"the host on 8443 only", "api.github.com:8443", NULL, NULL, "4"},
        {"the host on every port", "api.github.com:*", NULL, NULL, "0 1 2 4 5 9 11 14"},
        {"subdomains of example.org on 443", "*.example.org:443", NULL, NULL, "6"},
        {"example.org and its subdomains", ".example.org", NULL, NULL, "6 7 8"},
        {"another host", "crates.io", NULL, NULL, ""},
    };
    json_t *ds = denials(), *before = json_deep_copy(ds);
    char buf[256], err[256];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sbx_grant g = grant(cases[i].allow, cases[i].methods, cases[i].paths);
        err[0] = '\0';
        json_t *pass = sbx_grant_would_pass(&g, ds, err, sizeof err);
        ok(pass != NULL && strcmp(ids(pass, buf, sizeof buf), cases[i].want) == 0,
           "%s (%s methods \"%s\" paths \"%s\") lets pass [%s] (got [%s]%s)", cases[i].what,
           g.allow, g.methods, g.paths, cases[i].want, pass ? buf : "NULL", err);
        json_decref(pass);
    }
    ok(json_equal(ds, before), "the denials given are left as they were");

    /* a passing denial is copied whole */
    struct sbx_grant g = grant("api.github.com:443", "GET", NULL);
    json_t *pass = sbx_grant_would_pass(&g, ds, err, sizeof err);
    json_t *first = pass ? json_array_get(pass, 0) : NULL;
    ok(first != NULL && json_equal(first, json_array_get(ds, 0)),
       "a passing request's denial is returned whole, nothing added");
    json_t *tunnel = pass ? json_array_get(pass, 2) : NULL;
    json_t *want = json_deep_copy(json_array_get(ds, 5));
    json_object_set_new(want, "requests_judged", json_true());
    ok(tunnel != NULL && json_equal(tunnel, want),
       "a tunnel's denial comes back whole with \"requests_judged\": true");
    json_decref(want);
    json_decref(pass);

    g = grant("api.github.com:443", NULL, NULL);
    pass = sbx_grant_would_pass(&g, ds, err, sizeof err);
    tunnel = pass ? json_array_get(pass, 3) : NULL;
    ok(tunnel != NULL && json_equal(tunnel, json_array_get(ds, 5)) &&
           json_object_get(tunnel, "requests_judged") == NULL,
       "under a grant of the whole host a tunnel passes without \"requests_judged\"");
    json_decref(pass);

    /* nothing to judge */
    json_t *empty = json_array();
    pass = sbx_grant_would_pass(&g, empty, err, sizeof err);
    ok(pass != NULL && json_array_size(pass) == 0, "no denials: an empty array");
    json_decref(pass);
    json_decref(empty);

    /* a grant egressd would not load */
    g = grant("git.example.org:22", NULL, "/a");
    err[0] = '\0';
    pass = sbx_grant_would_pass(&g, ds, err, sizeof err);
    ok(pass == NULL && strncmp(err, "grant:1:", 8) == 0,
       "a grant that does not load (paths on port 22): NULL, err \"%s\"", err);
    json_decref(pass);

    json_decref(before);
    json_decref(ds);
}

static void test_lifts(void)
{
    ok(sbx_grant_lifts_reason("not_allowed") && sbx_grant_lifts_reason("method_not_allowed") &&
           sbx_grant_lifts_reason("path_not_allowed"),
       "not_allowed, method_not_allowed, path_not_allowed can be lifted");
    ok(!sbx_grant_lifts_reason("deny_rule") && !sbx_grant_lifts_reason("private_range") &&
           !sbx_grant_lifts_reason("geo") && !sbx_grant_lifts_reason("push_not_allowed") &&
           !sbx_grant_lifts_reason("bad_host") && !sbx_grant_lifts_reason("allowed") &&
           !sbx_grant_lifts_reason("Not_Allowed") && !sbx_grant_lifts_reason("") &&
           !sbx_grant_lifts_reason(NULL),
       "deny_rule, private_range, geo, push_not_allowed, bad_host, other spellings, none: not");
}

int main(void)
{
    test_methods();
    test_paths();
    test_line();
    test_check();
    test_lifts();
    test_narrowest();
    test_would_pass();
    return tap_done();
}
