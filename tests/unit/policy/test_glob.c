/*
 * test_glob.c - the path globs of a `paths` option (policy/glob.c):
 * policy_glob_match() on exact bytes, '*' within a segment and "**" as
 * whole segments (at the start, middle and end, several of them), trailing
 * slashes, and two pathological globs that must still finish;
 * policy_glob_check() refusing each kind of glob no normalized path can
 * match (with where), and accepting the ones that can;
 * policy_glob_narrowest() on short and long paths, and that the glob it
 * gives matches its path, a sibling under the prefix, and not a path
 * beside the prefix.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define ANYWHERE SIZE_MAX

/* Does normalized path p match glob g (both NUL-terminated)? */
static bool match(const char *g, const char *p)
{
    return policy_glob_match(g, strlen(g), p, strlen(p));
}

/* Is g[0..len) refused, with *at == at (any offset when at is ANYWHERE)?
 * Says where and why when refused elsewhere. */
static bool refused_n(const char *g, size_t len, size_t at)
{
    size_t where = 12345;
    const char *why = policy_glob_check(g, len, &where);

    if (why == NULL)
        return false;
    if (at != ANYWHERE && where != at)
        diag("refused at %zu, not %zu: %s", where, at, why);
    return at == ANYWHERE || where == at;
}

/* refused_n() on a NUL-terminated glob. */
static bool refused(const char *g, size_t at)
{
    return refused_n(g, strlen(g), at);
}

/* Is glob g accepted?  Says why not. */
static bool accepted(const char *g)
{
    size_t at = 0;
    const char *why = policy_glob_check(g, strlen(g), &at);

    if (why != NULL)
        diag("\"%s\" refused at %zu: %s", g, at, why);
    return why == NULL;
}

/* "/" then n copies of seg joined by '/', then tail; malloc'd. */
static char *repeat(const char *seg, size_t n, const char *tail)
{
    size_t sl = strlen(seg), tl = strlen(tail), k = 0;
    char *s = malloc(n * (sl + 1) + tl + 2);

    if (s == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        s[k++] = '/';
        memcpy(s + k, seg, sl);
        k += sl;
    }
    memcpy(s + k, tail, tl + 1);
    return s;
}

static void test_exact(void)
{
    ok(match("/repos/acme", "/repos/acme"), "a glob without stars matches itself");
    ok(!match("/repos/acme", "/repos/Acme"), "byte for byte: case matters");
    ok(!match("/repos/acme", "/repos/acme/x"), "not a longer path");
    ok(match("/x;y=1/%20z", "/x;y=1/%20z"), "';', '=' and escapes are plain bytes");
    ok(!match("/%2A", "/a"), "an escaped '*' is not a star");
    ok(match("/", "/"), "\"/\" matches \"/\"");
    ok(!match("/", "/a"), "\"/\" matches nothing else");
    ok(match("/a/", "/a/"), "\"/a/\" matches \"/a/\"");
    ok(!match("/a/", "/a"), "\"/a/\" does not match \"/a\"");
    ok(!match("/a", "/a/"), "\"/a\" does not match \"/a/\"");
}

static void test_star(void)
{
    ok(match("/a/*.git", "/a/x.git"), "'*' as a prefix");
    ok(match("/a/*.git", "/a/.git"), "'*' matches the empty run");
    ok(match("/a/v*", "/a/v1.2"), "'*' as a suffix");
    ok(match("/a/x*y", "/a/x-b-y"), "'*' in the middle");
    ok(!match("/a/x*y", "/a/xyz"), "'x*y' does not match 'xyz'");
    ok(match("/*a*b", "/aaab"), "several stars, going back");
    ok(!match("/*a*b", "/aba"), "several stars: the last one must end the segment");
    ok(!match("/a/*", "/a/b/c"), "'*' never crosses '/'");
    ok(match("/a/*", "/a/"), "'*' matches the empty last segment of \"/a/\"");
    ok(!match("/a/*", "/a"), "'/a/*' does not match \"/a\"");
}

static void test_globstar(void)
{
    ok(match("/repos/acme/**", "/repos/acme"), "trailing '**' matches no segment");
    ok(match("/repos/acme/**", "/repos/acme/"), "trailing '**' matches the empty last segment");
    ok(match("/repos/acme/**", "/repos/acme/x/y"), "trailing '**' matches several segments");
    ok(!match("/repos/acme/**", "/repos/acmex"), "'**' is whole segments: not \"acmex\"");
    ok(!match("/repos/acme/**", "/repos"), "trailing '**' does not make the rest optional");
    ok(match("/**/info/refs", "/info/refs"), "leading '**' matches no segment");
    ok(match("/**/info/refs", "/a/b.git/info/refs"), "leading '**' matches several");
    ok(!match("/**/info/refs", "/a/info/refs/x"), "leading '**': the rest must end the path");
    ok(match("/a/**/z", "/a/z"), "'**' in the middle matches no segment");
    ok(match("/a/**/z", "/a/b/c/z"), "'**' in the middle matches several");
    ok(!match("/a/**/z", "/az"), "'**' in the middle does not glue segments");
    ok(!match("/a/**/z", "/a/b/z/c"), "'**' in the middle: the rest must end the path");
    ok(match("/**/x/**/y/**", "/1/x/2/3/y/4"), "several '**'");
    ok(match("/**/x/**/y/**", "/x/y"), "several '**', each matching nothing");
    ok(!match("/**/x/**/y/**", "/y/x"), "several '**' keep the order");
    ok(match("/a/**/*.git/**", "/a/b/c.git/info/refs"), "'**' and '*' together");
    ok(match("/**", "/"), "\"/**\" matches \"/\"");
}

/* Many stars against a long path: only that each call returns. */
static void test_pathological(void)
{
    char *g = repeat("**", 20, "/b");
    char *p = repeat("a", 200, "");
    char *q = repeat("a", 200, "/b");
    char s[10002] = "/";

    ok(!policy_glob_match(g, strlen(g), p, strlen(p)), "20 '**' against 200 segments, no match");
    ok(policy_glob_match(g, strlen(g), q, strlen(q)), "20 '**' against 201 segments, a match");
    memset(s + 1, 'a', 9999);
    ok(!match("/*a*a*a*a*a*b", s), "'*a*a*a*a*a*b' against 9999 'a's");
    s[9999] = 'b';
    ok(match("/*a*a*a*a*a*b", s), "'*a*a*a*a*a*b' against 9998 'a's and 'b'");
    free(g);
    free(p);
    free(q);
}

static void test_refused(void)
{
    char big[POLICY_GLOB_MAX + 2];

    ok(refused_n("", 0, 0), "an empty glob");
    ok(refused("a/b", 0), "a glob not starting with '/'");
    memset(big, 'a', sizeof(big));
    big[0] = '/';
    ok(refused_n(big, POLICY_GLOB_MAX + 1, ANYWHERE), "a glob of 513 bytes");
    ok(policy_glob_check(big, POLICY_GLOB_MAX, &(size_t){0}) == NULL, "a glob of 512 bytes");
    ok(refused("//", 1), "\"//\", at the second '/'");
    ok(refused("/a//b", 3), "\"//\" inside, at the second '/'");
    ok(refused("/a/./b", 3), "a '.' segment, at it");
    ok(refused("/a/..", 3), "a '..' segment, at it");
    ok(refused("/.;x", ANYWHERE), "a '.;x' segment");
    ok(refused("/..;x/y", ANYWHERE), "a '..;x' segment");
    ok(refused("/a**", 2), "'**' not a whole segment, at it");
    ok(refused("/***", ANYWHERE), "'***'");
    ok(refused("/a?b", 2), "a '?', at it");
    ok(refused("/x/%2", 3), "'%%' with one hex digit, at the '%%'");
    ok(refused("/%2a", 1), "lower-case hex");
    ok(refused("/%41", 1), "an escaped letter");
    ok(refused("/a/%2F", 3), "an escaped '/'");
    ok(refused("/%5C", 1), "an escaped '\\'");
    ok(refused("/%00", 1), "an escaped NUL");
    ok(refused("/a b", 2), "a space, at it");
    ok(refused("/a\\b", 2), "a '\\', at it");
    ok(refused("/a\x80", 2), "a byte over 0x7f");
    ok(refused_n("/a\0b", 4, 2), "a NUL, at it");
}

static void test_accepted(void)
{
    ok(accepted("/"), "\"/\" is a glob");
    ok(accepted("/**"), "\"/**\" is a glob");
    ok(accepted("/a/*.git/**"), "\"/a/*.git/**\" is a glob");
    ok(accepted("/x;y=1/z"), "';' and '=' are pchars");
    ok(accepted("/%20"), "an upper-case escape of a reserved byte");
    ok(accepted("/a/"), "a trailing '/'");
    ok(accepted("/@:!$&'()+,;="), "all of RFC 3986's sub-delims, ':' and '@'");
    ok(accepted("/.../.a/a./-_~"), "dots that are not dot segments, unreserved bytes");
}

/* policy_glob_narrowest(p) is want (NULL: refused). */
static bool narrowest(const char *p, const char *want)
{
    char g[64];
    size_t gl = 0;
    bool got = policy_glob_narrowest(p, strlen(p), g, sizeof(g), &gl);

    if (!got || want == NULL)
        return got == (want != NULL);
    if (gl != strlen(g) || strcmp(g, want) != 0)
        diag("narrowest %s: got %s", p, g);
    return gl == strlen(g) && strcmp(g, want) == 0;
}

static void test_narrowest(void)
{
    static const char *const paths[] = {
        "/repos/acme/widget/pulls/1", "/v1/messages", "/a", "/", "/a/b/", "/a/b/c",
        "/@acme/pkg/-/pkg-1.0.tgz"};
    char g[64];
    size_t gl;

    ok(narrowest("/repos/acme/widget/pulls/1", "/repos/acme/**"),
       "a long path: its first two segments and '**'");
    ok(narrowest("/v1/messages", "/v1/messages"), "two segments: the path itself");
    ok(narrowest("/a", "/a"), "one segment: the path itself");
    ok(narrowest("/", "/"), "\"/\": itself");
    ok(narrowest("/a/b/", "/a/b/"), "two segments and a trailing '/': itself");
    ok(narrowest("/a/b/c", "/a/b/**"), "three segments: the first two and '**'");
    ok(narrowest("a/b", NULL), "not a path (no leading '/'): refused");
    ok(narrowest("/a/?/b", NULL), "a path whose glob would not load: refused");
    ok(!policy_glob_narrowest("/abcdefghij/abcdefghij", 22, g, 20, &gl), "too long for g: refused");
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        bool got = policy_glob_narrowest(paths[i], strlen(paths[i]), g, sizeof(g), &gl);
        ok(got && policy_glob_match(g, gl, paths[i], strlen(paths[i])),
           "the narrowest glob of %s (%s) matches it", paths[i], got ? g : "-");
    }
    ok(narrowest("/repos/acme/widget", "/repos/acme/**") &&
           match("/repos/acme/**", "/repos/acme/other/x") &&
           !match("/repos/acme/**", "/repos/acmex/widget") &&
           !match("/repos/acme/**", "/repos/other/widget"),
       "it covers a sibling under the prefix, not a path beside it");
}

int main(void)
{
    test_exact();
    test_star();
    test_globstar();
    test_pathological();
    test_refused();
    test_accepted();
    test_narrowest();
    return tap_done();
}
