/* test_access.c - which requests the administrator's host patterns cover
 * (access.h): a grant is never wider than the pattern that let it
 * through, in names or in ports. */
#include <stdio.h>
#include <string.h>

#include "access.h"
#include "tap.h"

struct cover {
    const char *pattern, *request;
    int covered;
};

static void test_covers(void)
{
    static const struct cover cases[] = {
        /* exact names */
        {"pypi.org", "pypi.org", 1},
        {"pypi.org", "files.pypi.org", 0},
        {"pypi.org", "xpypi.org", 0},
        {"pypi.org", "*.pypi.org", 0},
        {"pypi.org", ".pypi.org", 0},
        /* *.D: strict subdomains */
        {"*.pypi.org", "files.pypi.org", 1},
        {"*.pypi.org", "a.b.pypi.org", 1},
        {"*.pypi.org", "pypi.org", 0},
        {"*.pypi.org", "evilpypi.org", 0},
        {"*.pypi.org", "*.pypi.org", 1},
        {"*.pypi.org", "*.files.pypi.org", 1},
        {"*.pypi.org", ".pypi.org", 0},   /* the apex too */
        {"*.pypi.org", ".a.pypi.org", 1}, /* a.pypi.org and below */
        {"*.pypi.org", "org", 0},
        /* .D: the domain and its subdomains */
        {".pypi.org", "pypi.org", 1},
        {".pypi.org", "files.pypi.org", 1},
        {".pypi.org", "*.pypi.org", 1},
        {".pypi.org", ".pypi.org", 1},
        {".pypi.org", "pypi.org.evil.example", 0},
        {".pypi.org", "xpypi.org", 0},
        /* ports: none written is 443 and 80 */
        {"pypi.org", "pypi.org:443", 1},
        {"pypi.org", "pypi.org:80,443", 1},
        {"pypi.org", "pypi.org:8443", 0},
        {"pypi.org", "pypi.org:*", 0},
        {"pypi.org:443", "pypi.org", 0}, /* asks for 80 too */
        {"pypi.org:443", "pypi.org:443", 1},
        {"pypi.org:443,8443", "pypi.org:8443", 1},
        {"pypi.org:443,8443", "pypi.org:443,22", 0},
        {"pypi.org:*", "pypi.org:22", 1},
        {"pypi.org:*", "pypi.org:*", 1},
        {"pypi.org:*", "pypi.org", 1},
        {".pypi.org:*", "a.pypi.org:9418", 1},
        /* what is not an entry covers nothing and is covered by nothing */
        {"~.*", "pypi.org", 0},
        {"pypi.org", "~pypi.org", 0},
        {"*", "pypi.org", 0},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ok(sbx_access_covers(cases[i].pattern, cases[i].request) == cases[i].covered,
           "pattern %s %s request %s", cases[i].pattern,
           cases[i].covered ? "covers" : "does not cover", cases[i].request);
}

struct norm {
    const char *in, *out; /* out NULL: refused */
};

static void test_normalize(void)
{
    static const struct norm cases[] = {
        {"PyPI.Org", "pypi.org"},
        {"pypi.org.", "pypi.org"},
        {"PYPI.ORG.:443", "pypi.org:443"},
        {"*.Crates.IO:443,8443", "*.crates.io:443,8443"},
        {".npmjs.org", ".npmjs.org"},
        {"127.0.0.1", NULL},
        {"127.0.0.1:443", NULL},
        {"10.0.0.1.", NULL},
        {"~.*", NULL},
        {"*", NULL},
        {"pypi.org:0", NULL},
        {"pypi.org:70000", NULL},
        {"pypi.org:443,", NULL},
        {"pypi.org:443 raw", NULL},
        {"a..b", NULL},
        {"", NULL},
        {"123", NULL},
    };
    char buf[SBX_ALLOW_MAX];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int valid;
        snprintf(buf, sizeof buf, "%s", cases[i].in);
        valid = sbx_access_normalize(buf);
        if (cases[i].out)
            ok(valid && strcmp(buf, cases[i].out) == 0, "'%s' normalizes to '%s' (got '%s')",
               cases[i].in, cases[i].out, buf);
        else
            ok(!valid, "'%s' is refused", cases[i].in);
    }
}

static void test_match(void)
{
    const char *const patterns[] = {"pypi.org", ".pythonhosted.org:443", NULL};
    const char *const none[] = {NULL};

    ok(sbx_access_match(patterns, "files.pythonhosted.org:443") == patterns[1],
       "match names the first pattern that covers the request");
    ok(sbx_access_match(patterns, "files.pythonhosted.org") == NULL,
       "no pattern covers port 80 of files.pythonhosted.org");
    ok(sbx_access_match(none, "pypi.org") == NULL && sbx_access_match(NULL, "pypi.org") == NULL,
       "an empty list (or none) covers nothing");
}

int main(void)
{
    test_covers();
    test_normalize();
    test_match();
    return tap_done();
}
