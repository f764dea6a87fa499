/*
 * test_path.c - a request's path in the form rules are matched on
 * (http_path_normalize): the query cut, escapes decoded or upper-cased,
 * empty and dot segments removed, the trailing '/' kept; every trick of
 * the threat model refused as AMBIGUOUS, what is not a path as BAD; the
 * cap exactly at its boundary; every result idempotent, and no longer than
 * its input unless that held bytes a segment must escape.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "tap.h"
#include "testdata.h"

/* A byte string literal that may hold NUL: its bytes and its length. */
#define S(lit) lit, sizeof(lit) - 1

struct path_case {
    const char *what;
    const char *in;
    size_t len;
    enum http_path_result want;
    const char *out; /* for OK: the whole result */
};

#define PATH_OK(what, lit, out)                                                                    \
    {                                                                                              \
        what, S(lit), HTTP_PATH_OK, out                                                            \
    }
#define PATH_AMBIGUOUS(what, lit)                                                                  \
    {                                                                                              \
        what, S(lit), HTTP_PATH_AMBIGUOUS, NULL                                                    \
    }
#define PATH_BAD(what, lit)                                                                        \
    {                                                                                              \
        what, S(lit), HTTP_PATH_BAD, NULL                                                          \
    }

static const struct path_case cases[] = {
    /* plain paths, the query */
    PATH_OK("root", "/", "/"),
    PATH_OK("plain path", "/a/b", "/a/b"),
    PATH_OK("case kept", "/A/b/C", "/A/b/C"),
    PATH_OK("query cut", "/a/b?x=1&y=/../%2F", "/a/b"),
    PATH_OK("an escaped '?' is not a query", "/a%3fb", "/a%3Fb"),
    /* escapes (RFC 3986 sections 2.3, 6.2.2.1, 6.2.2.2) */
    PATH_OK("%7E decoded", "/%7Euser", "/~user"),
    PATH_OK("%41 decoded, case kept", "/%41%61", "/Aa"),
    PATH_OK("%2d %5f %30 decoded", "/%2d%5f%30", "/-_0"),
    PATH_OK("%3b upper-cased, not a parameter", "/a%3bb", "/a%3Bb"),
    PATH_OK("%20 kept", "/a%20b", "/a%20b"),
    PATH_OK("non-ASCII escapes upper-cased", "/%c3%a9", "/%C3%A9"),
    PATH_OK("%25 kept, not decoded twice", "/%2541", "/%2541"),
    PATH_OK("bytes a segment cannot hold escaped", "/a[b]{c}|^`\"<>",
            "/a%5Bb%5D%7Bc%7D%7C%5E%60%22%3C%3E"),
    /* dot segments (RFC 3986 section 5.2.4) */
    PATH_OK("a/b/../c", "/a/b/../c", "/a/c"),
    PATH_OK("a/./b", "/a/./b", "/a/b"),
    PATH_OK(".. at the root stays there", "/../a", "/a"),
    PATH_OK("a/.. is the root", "/a/..", "/"),
    PATH_OK("a/b/.. keeps a '/'", "/a/b/..", "/a/"),
    PATH_OK("a/. keeps a '/'", "/a/.", "/a/"),
    PATH_OK("%2e%2e is ..", "/a/%2e%2e/b", "/b"),
    PATH_OK("%2E. is ..", "/a/%2E./b", "/b"),
    PATH_OK("%2e is .", "/a/%2e/b", "/a/b"),
    PATH_OK("... is a name", "/a/.../b", "/a/.../b"),
    /* empty segments */
    PATH_OK("a//b", "/a//b", "/a/b"),
    PATH_OK("//", "//", "/"),
    PATH_OK("///a///", "///a///", "/a/"),
    PATH_OK("empty segments go before dot segments", "/a//../b", "/b"),
    PATH_OK("trailing '/' kept", "/a/b/", "/a/b/"),
    /* path parameters that are not dot segments */
    PATH_OK("a;b=c/d", "/a;b=c/d", "/a;b=c/d"),
    PATH_OK("...;x is a name", "/...;x/b", "/...;x/b"),
    PATH_OK(".%3Bx: an escaped ';' is no parameter", "/.%3Bx", "/.%3Bx"),
    /* what servers read differently: AMBIGUOUS */
    PATH_AMBIGUOUS("%2F", "/a%2Fb"),
    PATH_AMBIGUOUS("%2f", "/a%2fb"),
    PATH_AMBIGUOUS("%5C", "/a%5Cb"),
    PATH_AMBIGUOUS("%5c", "/a%5cb"),
    PATH_AMBIGUOUS("'\\'", "/a\\b"),
    PATH_AMBIGUOUS("%00", "/a%00b"),
    PATH_AMBIGUOUS("..;/", "/a/..;/b"),
    PATH_AMBIGUOUS(".;x", "/a/.;x/b"),
    PATH_AMBIGUOUS("%2e%2e;x", "/a/%2e%2e;x/b"),
    PATH_AMBIGUOUS("..; at the end", "/a/..;"),
    /* not a path: BAD */
    PATH_BAD("empty", ""),
    PATH_BAD("no leading '/'", "a/b"),
    PATH_BAD("*", "*"),
    PATH_BAD("a space", "/a b"),
    PATH_BAD("NUL", "/a\0b"),
    PATH_BAD("DEL (0x7f)", "/a\x7f"),
    PATH_BAD("0x80", "/a\x80"),
    PATH_BAD("'#'", "/a#b"),
    PATH_BAD("% at the end", "/a%"),
    PATH_BAD("%4 at the end", "/a%4"),
    PATH_BAD("%zz", "/a%zzb"),
};

/* What norm() returns for an OK whose output is not a string of *out_len. */
#define NOT_A_STRING ((enum http_path_result)(-1))

/* Normalize in[0..len) into a heap buffer of exactly cap bytes; the
 * result, and for OK the output copied to res (of at least cap bytes). */
static enum http_path_result norm(const char *in, size_t len, size_t cap, char *res,
                                  size_t *res_len)
{
    char *p = td_copy(in, len), *out = malloc(cap ? cap : 1);
    size_t n = (size_t)-1;
    enum http_path_result r = http_path_normalize(p, len, out, cap, &n);

    if (r == HTTP_PATH_OK) {
        if (n >= cap || out[n] != '\0' || strlen(out) != n)
            r = NOT_A_STRING;
        else
            memcpy(res, out, n + 1);
        *res_len = n;
    }
    free(p);
    free(out);
    return r;
}

/* One case: the result, and for OK the exact output, with a cap that is
 * always enough (3 * len + 1). */
static void check_case(const struct path_case *c)
{
    char res[256];
    size_t n = 0;
    enum http_path_result r = norm(c->in, c->len, 3 * c->len + 1, res, &n);

    if (c->want != HTTP_PATH_OK) {
        if (!ok(r == c->want, "%s: %s", c->what, http_path_result_str(c->want)))
            diag("got %d (%s)", r, http_path_result_str(r));
        return;
    }
    if (!ok(r == HTTP_PATH_OK && strcmp(res, c->out) == 0, "%s: \"%s\"", c->what, c->out))
        diag("got %d, \"%s\"", r, r == HTTP_PATH_OK ? res : "");
}

/* Every OK case normalizes to a result that normalizes to itself. */
static void check_idempotent(void)
{
    bool all = true;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char again[256];
        size_t n = 0, len;
        if (cases[i].want != HTTP_PATH_OK)
            continue;
        len = strlen(cases[i].out);
        if (norm(cases[i].out, len, 3 * len + 1, again, &n) != HTTP_PATH_OK ||
            strcmp(again, cases[i].out) != 0) {
            diag("\"%s\" normalizes to another path", cases[i].out);
            all = false;
        }
    }
    ok(all, "every OK result normalizes to itself");
}

/* Whether s[0..n) holds only bytes a path may hold as themselves: a
 * segment's (RFC 3986 pchar), '%' and '/', up to a query. */
static bool plain(const char *s, size_t n)
{
    for (size_t i = 0; i < n && s[i] != '?'; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (c == '\0' || strchr("%/-._~!$&'()*+,;=:@", c) == NULL))
            return false;
    }
    return true;
}

/* Every OK case's result is no longer than its input when that held only
 * bytes a path may hold as themselves, and never over three times it. */
static void check_not_longer(void)
{
    bool all = true;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char res[256];
        size_t n = 0, len = cases[i].len;
        if (cases[i].want != HTTP_PATH_OK)
            continue;
        if (norm(cases[i].in, len, 3 * len + 1, res, &n) == HTTP_PATH_OK &&
            n > (plain(cases[i].in, len) ? len : 3 * len)) {
            diag("\"%s\": %zu bytes from %zu", cases[i].in, n, len);
            all = false;
        }
    }
    ok(all, "no result is longer than its input, but for bytes escaped");
}

/* The cap counts the NUL: a result of n bytes needs exactly n + 1, or
 * what the work in out needed on the way if that was more. */
static void check_caps(void)
{
    char res[64];
    size_t n = 0;

    ok(norm(S("/a/b"), 4, res, &n) == HTTP_PATH_TOO_LONG, "\"/a/b\" with cap 4: too long");
    ok(norm(S("/a/b"), 5, res, &n) == HTTP_PATH_OK && strcmp(res, "/a/b") == 0,
       "\"/a/b\" with cap 5: fits");
    ok(norm(S("/%7E?q"), 2, res, &n) == HTTP_PATH_TOO_LONG, "\"/%%7E?q\" with cap 2: too long");
    ok(norm(S("/%7E?q"), 3, res, &n) == HTTP_PATH_OK && strcmp(res, "/~") == 0,
       "\"/%%7E?q\" with cap 3: \"/~\" fits");
    ok(norm(S("/["), 4, res, &n) == HTTP_PATH_TOO_LONG, "\"/[\" with cap 4: too long");
    ok(norm(S("/["), 5, res, &n) == HTTP_PATH_OK && strcmp(res, "/%5B") == 0,
       "\"/[\" with cap 5: \"/%%5B\" fits");
    ok(norm(S("/"), 0, res, &n) == HTTP_PATH_TOO_LONG, "cap 0: too long");
    /* The work is done in out: a ".." is written before it is removed. */
    ok(norm(S("/a/.."), 5, res, &n) == HTTP_PATH_TOO_LONG,
       "\"/a/..\" with cap 5: too long, \"/a/..\" is written first");
    ok(norm(S("/a/.."), 6, res, &n) == HTTP_PATH_OK && strcmp(res, "/") == 0,
       "\"/a/..\" with cap 6: \"/\"");
}

int main(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check_case(&cases[i]);
    check_idempotent();
    check_not_longer();
    check_caps();
    return tap_done();
}
