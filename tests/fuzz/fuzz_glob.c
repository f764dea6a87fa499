/*
 * fuzz_glob.c - the path globs of a `paths` option (policy/glob.c),
 * against a PCRE2 translation of the glob and a statement of the glob
 * syntax of this file's own.
 *
 * The input's first byte picks how the rest is read.  Bit 0: the glob is
 * raw tokens (mostly 'a', 'b', '/', '*', now and then '.', ';', escapes
 * good and bad, '?', ' ') or built as segments ("**" or a few of 'a', 'b',
 * '*', '.', ';', "%20", 'A', never "**" inside one), bit 1 adding a
 * trailing '/'.  Bit 2: the path is raw tokens (as the glob's, without the
 * bad ones, with '*' now and then), or, for a glob that is accepted, the
 * glob with each '*' and "**" filled in from the input; either is then made
 * normalized (a leading '/', empty segments but the last dropped, a "." or
 * ".." segment's first byte made 'a').
 *
 * Properties:
 *   a. policy_glob_check() accepts exactly the globs the statement here
 *      does (starts with '/', at most 512 bytes, no empty segment but the
 *      last, no segment "." or ".." before any ';', "**" only whole,
 *      only pchar bytes, escapes of two upper-case hex digits that are not
 *      of an unreserved byte, '/', '\' or NUL), and a refusal's offset is
 *      within the glob;
 *   b. for an accepted glob and a normalized path, policy_glob_match() is
 *      the anchored match of the glob translated to a regex ("**" segment:
 *      (?:/[^/]*)*, other segment: '/' then the bytes with '*' as [^/]*),
 *      run with pcre2_dfa_match (no backtracking);
 *   c. an accepted glob matches its witnesses: W, the glob with every "**"
 *      segment dropped and every '*' deleted ("/" when no segment is left),
 *      whenever W is normalized (it is not when a segment of only '*'s
 *      before the last becomes empty, or one like ".*" becomes a dot
 *      segment); and W', the glob with every '*' made 'b' and
 *      every "**" segment made "b/b", which is always normalized (checked);
 *   d. policy_glob_match() never reads outside either argument: each is
 *      copied into a buffer of exactly its length (ASan), for refused globs
 *      too, and the bytes are not changed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "policy.h"

#define TEXT_MAX 1024

/* A string being built, silently cut at TEXT_MAX. */
struct text {
    char s[TEXT_MAX];
    size_t n;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (n > TEXT_MAX - t->n)
        n = TEXT_MAX - t->n;
    memcpy(t->s + t->n, s, n);
    t->n += n;
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* ------------------------------------------------------------ the inputs */

/* Raw glob tokens: the small alphabet often, the rest now and then. */
static const char *const glob_tokens[] = {
    "a",   "a", "a", "b", "b", "/",   "/",   "/", "/",
    "*",   "*", "*", ".", ";", "%20", "%2A", "%", /* incomplete */
    "%2a",                                        /* lower-case hex */
    "%41",                                        /* an escaped unreserved byte */
    "%2F", "?", " ", "A", "=",
};

/* Raw path tokens: no byte a normalized path cannot hold. */
static const char *const path_tokens[] = {
    "a", "a", "a", "b", "b", "/", "/", "/", "/", ".", ";", "%20", "%2A", "A", "*", "~",
};

/* Segment bytes for built globs. */
static const char *const seg_tokens[] = {"a", "b", "*", "*", ".", ";", "%20", "A"};

/* Fillings for a '*' when a path is made from a glob. */
static const char *const fill_tokens[] = {"", "a", "b", ".", ";", "ab", "ba", "%20"};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void raw(struct input *in, const char *const *tokens, size_t n_tokens, struct text *t)
{
    size_t count = take(in) % 40;
    for (size_t i = 0; i < count; i++)
        puts_(t, tokens[take(in) % n_tokens]);
}

/* A glob of whole segments: "**" or a few segment bytes (no "**"). */
static void built_glob(struct input *in, bool trailing, struct text *t)
{
    size_t segs = take(in) % 8;

    for (size_t i = 0; i < segs; i++) {
        uint8_t kind = take(in);
        puts_(t, "/");
        if (kind % 4 == 0) {
            puts_(t, "**");
            continue;
        }
        size_t len = kind / 4 % 5 + 1;
        for (size_t k = 0; k < len; k++) {
            const char *tok = seg_tokens[take(in) % N(seg_tokens)];
            if (*tok == '*' && t->n > 0 && t->s[t->n - 1] == '*')
                tok = "a";
            puts_(t, tok);
        }
    }
    if (trailing || segs == 0)
        puts_(t, "/");
}

/* Is g[i..end) the segment "**"? */
static bool globstar(const char *g, size_t i, size_t end)
{
    return end - i == 2 && g[i] == '*' && g[i + 1] == '*';
}

/* The end of the segment starting at s[i]. */
static size_t seg_end(const char *s, size_t n, size_t i)
{
    while (i < n && s[i] != '/')
        i++;
    return i;
}

/* A path like glob g: each "**" some segments, each '*' some bytes. */
static void path_from_glob(struct input *in, const char *g, size_t gl, struct text *t)
{
    for (size_t i = 1; i <= gl;) {
        size_t end = seg_end(g, gl, i);
        if (globstar(g, i, end)) {
            size_t k = take(in) % 4;
            for (size_t j = 0; j < k; j++)
                puts_(t, take(in) & 1 ? "/a" : "/b");
        } else {
            puts_(t, "/");
            for (size_t j = i; j < end; j++) {
                if (g[j] == '*')
                    puts_(t, fill_tokens[take(in) % N(fill_tokens)]);
                else
                    put(t, g + j, 1);
            }
        }
        i = end + 1;
    }
}

/* Is s[0..n) "." or ".." before any ';' (a dot segment)? */
static bool dot_segment(const char *s, size_t n)
{
    const char *semi = memchr(s, ';', n);
    size_t head = semi != NULL ? (size_t)(semi - s) : n;
    return (head == 1 && s[0] == '.') || (head == 2 && s[0] == '.' && s[1] == '.');
}

/* Make t normalized: a leading '/', no empty segment but the last, no dot
 * segment (its first byte made 'a'). */
static void normalize(struct text *t)
{
    struct text out = {.n = 0};
    size_t i = t->n > 0 && t->s[0] == '/' ? 1 : 0;

    for (;;) {
        size_t end = seg_end(t->s, t->n, i);
        bool last = end >= t->n;
        if (end > i || last) {
            size_t at = out.n + 1;
            puts_(&out, "/");
            put(&out, t->s + i, end - i);
            if (dot_segment(out.s + at, out.n - at))
                out.s[at] = 'a';
        }
        if (last)
            break;
        i = end + 1;
    }
    *t = out;
}

/* ----------------------------------------------------- the statements */

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("-._~", c) != NULL);
}

static int hex_digit(unsigned char c)
{
    static const char digits[] = "0123456789ABCDEF";
    const char *d = c != 0 ? strchr(digits, c) : NULL;
    return d != NULL ? (int)(d - digits) : -1;
}

/* Are s[0..n)'s bytes pchars ('*' is one), with escapes as a normalized
 * path has them? */
static bool pchars(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3 || hex_digit((unsigned char)s[i + 1]) < 0 ||
                hex_digit((unsigned char)s[i + 2]) < 0)
                return false;
            unsigned char v = (unsigned char)(hex_digit((unsigned char)s[i + 1]) << 4 |
                                              hex_digit((unsigned char)s[i + 2]));
            if (unreserved(v) || v == '/' || v == '\\' || v == 0)
                return false;
            i += 2;
        } else if (!unreserved(c) && (c == 0 || strchr("!$&'()*+,;=:@", c) == NULL)) {
            return false;
        }
    }
    return true;
}

/* Is g[0..n) a glob some normalized path could match? */
static bool glob_ok(const char *g, size_t n)
{
    if (n == 0 || g[0] != '/' || n > 512)
        return false;
    for (size_t i = 1; i <= n;) {
        size_t end = seg_end(g, n, i);
        const char *seg = g + i;
        size_t len = end - i;
        if (len == 0 && end < n)
            return false;
        if (!globstar(g, i, end)) {
            for (size_t k = 0; k + 1 < len; k++)
                if (seg[k] == '*' && seg[k + 1] == '*')
                    return false;
            if (dot_segment(seg, len) || !pchars(seg, len))
                return false;
        }
        i = end + 1;
    }
    return true;
}

/* Is p[0..n) a path as http_path_normalize() gives it? */
static bool path_ok(const char *p, size_t n)
{
    if (n == 0 || p[0] != '/')
        return false;
    for (size_t i = 1; i <= n;) {
        size_t end = seg_end(p, n, i);
        if ((end == i && end < n) || dot_segment(p + i, end - i) || !pchars(p + i, end - i))
            return false;
        i = end + 1;
    }
    return true;
}

/* --------------------------------------------------------- the reference */

/* Does p[0..pl) match the regex glob g[0..gl) translates to? */
static bool regex_match(const char *g, size_t gl, const char *p, size_t pl)
{
    static int ws[8192];
    struct text re = {.n = 0};
    char hex[8];
    int err;
    PCRE2_SIZE off;

    for (size_t i = 1; i <= gl;) {
        size_t end = seg_end(g, gl, i);
        if (globstar(g, i, end)) {
            puts_(&re, "(?:/[^/]*)*");
        } else {
            puts_(&re, "/");
            for (size_t j = i; j < end; j++) {
                if (g[j] == '*') {
                    puts_(&re, "[^/]*");
                } else {
                    snprintf(hex, sizeof(hex), "\\x%02x", (unsigned char)g[j]);
                    puts_(&re, hex);
                }
            }
        }
        i = end + 1;
    }
    puts_(&re, "\\z");
    CHECK(re.n < TEXT_MAX, "the regex is too long");
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re.s, re.n, PCRE2_ANCHORED, &err, &off, NULL);
    CHECK(code != NULL, "regex %.*s does not compile: %d at %zu", (int)re.n, re.s, err,
          (size_t)off);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = pcre2_dfa_match(code, (PCRE2_SPTR)p, pl, 0, 0, md, NULL, ws, N(ws));
    CHECK(rc >= 0 || rc == PCRE2_ERROR_NOMATCH, "pcre2_dfa_match: %d on %.*s", rc, (int)re.n, re.s);
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return rc >= 0;
}

/* ---------------------------------------------------------- the harness */

/* A copy of s[0..n) in a buffer of exactly n bytes (ASan: no byte past
 * it, nor any when n is 0, may be read). */
static char *exact(const char *s, size_t n)
{
    char *c = malloc(n);

    CHECK(c != NULL || n == 0, "out of memory");
    memcpy(c, s, n);
    return c;
}

/* policy_glob_match() on copies of exactly the arguments' lengths. */
static bool match(const char *g, size_t gl, const char *p, size_t pl)
{
    char *gc = exact(g, gl), *pc = exact(p, pl);
    bool r = policy_glob_match(gc, gl, pc, pl);

    CHECK(memcmp(gc, g, gl) == 0 && memcmp(pc, p, pl) == 0,
          "policy_glob_match() changed its arguments");
    free(gc);
    free(pc);
    return r;
}

/* Witness W (drop_stars) or W' of accepted glob g, as property c says. */
static void witness(const char *g, size_t gl, bool drop_stars, struct text *t)
{
    for (size_t i = 1; i <= gl;) {
        size_t end = seg_end(g, gl, i);
        if (globstar(g, i, end)) {
            if (!drop_stars)
                puts_(t, "/b/b");
        } else {
            puts_(t, "/");
            for (size_t j = i; j < end; j++)
                if (g[j] != '*')
                    put(t, g + j, 1);
                else if (!drop_stars)
                    puts_(t, "b");
        }
        i = end + 1;
    }
    if (t->n == 0)
        puts_(t, "/");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct text g, p, w;
    struct input in = {data, size};
    uint8_t mode = take(&in);
    size_t at = SIZE_MAX;
    char *gc;
    const char *why;
    bool ok;

    g.n = p.n = 0;
    if (mode & 1)
        raw(&in, glob_tokens, N(glob_tokens), &g);
    else
        built_glob(&in, mode & 2, &g);

    /* a, on a copy of exactly the glob's length */
    gc = exact(g.s, g.n);
    why = policy_glob_check(gc, g.n, &at);
    free(gc);
    ok = glob_ok(g.s, g.n);
    CHECK((why == NULL) == ok, "\"%.*s\": policy_glob_check says %s, the statement %s", (int)g.n,
          g.s, why != NULL ? why : "accepted", ok ? "accepts it" : "refuses it");
    CHECK(why == NULL || at < g.n || (g.n == 0 && at == 0), "\"%.*s\" refused at %zu of %zu",
          (int)g.n, g.s, at, g.n);

    if (ok && (mode & 4))
        path_from_glob(&in, g.s, g.n, &p);
    else
        raw(&in, path_tokens, N(path_tokens), &p);
    normalize(&p);
    CHECK(path_ok(p.s, p.n), "the path \"%.*s\" was not made normalized", (int)p.n, p.s);

    /* d, for any glob */
    bool got = match(g.s, g.n, p.s, p.n);
    if (!ok)
        return 0;
    /* b */
    bool want = regex_match(g.s, g.n, p.s, p.n);
    CHECK(got == want, "glob \"%.*s\", path \"%.*s\": matched %d, the regex says %d", (int)g.n, g.s,
          (int)p.n, p.s, got, want);
    /* c */
    w.n = 0;
    witness(g.s, g.n, true, &w);
    if (path_ok(w.s, w.n))
        CHECK(match(g.s, g.n, w.s, w.n), "glob \"%.*s\" does not match its witness \"%.*s\"",
              (int)g.n, g.s, (int)w.n, w.s);
    w.n = 0;
    witness(g.s, g.n, false, &w);
    CHECK(path_ok(w.s, w.n), "witness \"%.*s\" of \"%.*s\" is not normalized", (int)w.n, w.s,
          (int)g.n, g.s);
    CHECK(match(g.s, g.n, w.s, w.n), "glob \"%.*s\" does not match its witness \"%.*s\"", (int)g.n,
          g.s, (int)w.n, w.s);
    return 0;
}
