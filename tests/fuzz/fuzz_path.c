/*
 * fuzz_path.c - a request's path normalized for rules (http/path.c), against
 * a reference of this file's own that goes another way: the whole path is
 * first split into its segments, each decoded and judged on its own, the
 * empty ones dropped, and the rest joined again and given to RFC 3986
 * section 5.2.4's remove_dot_segments, written as the RFC's pseudo-code
 * (an input buffer and an output buffer, rules A to E).
 *
 * An input that starts with a byte below 8 is built: a '/' unless that
 * byte is odd, then for each further byte a piece (".", "..", "%2e", "%2F",
 * ";x", "?", "\\", a letter, ...) from a table, so that the shapes of the
 * threat model come often.  Any other input is raw: the target itself (so
 * a seed is a plain path).
 *
 * Properties (the cap 3 * len + 1 is always enough):
 *   1. the same result as the reference (with more than one fault, the
 *      first from the left decides, a segment's parameters at its end);
 *   2. on OK, the same bytes, NUL-terminated, *out_len their length, no
 *      longer than the path when it held only bytes a segment may hold as
 *      themselves (pchar), '%' and '/', never over three times it;
 *   3. the output is in normal form: it starts with '/' and has no "//",
 *      no segment that is "." or "..", nor one that is "." or ".." before
 *      a ';', no byte but pchar, '/' and '%', and every '%' is followed by
 *      two upper-case hex digits escaping neither an unreserved character
 *      nor NUL, '/' or '\';
 *   4. idempotent: the output normalizes to itself, with a cap of its
 *      length and NUL;
 *   5. the query does not matter: the target with "?" and more appended
 *      gives the same result and the same bytes;
 *   6. the cap counts the NUL and what the work in out needs on the way (a
 *      segment is written before "." or ".." removes it): one byte short
 *      of the most that work holds and a NUL is TOO_LONG, exactly enough is
 *      OK with the same bytes; the reference finds that most as the longest
 *      of each prefix's normal form (its trailing '/' aside) with the next
 *      segment after it.  Input and output are heap buffers of exactly
 *      their size, so ASan sees any access past them.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "http.h"

#define IN_MAX  1024             /* bytes of a target */
#define OUT_MAX (3 * IN_MAX + 1) /* bytes of a result, or of the work on one */

/* ------------------------------------------------------------ the reference */

/* An unreserved character (RFC 3986 section 2.3). */
static bool ref_unreserved(int c)
{
    return c != 0 && (isalnum(c) || strchr("-._~", c) != NULL);
}

/* A byte a segment holds as itself (RFC 3986 section 3.3's pchar, but the
 * pct-encoded ones). */
static bool ref_pchar(int c)
{
    return ref_unreserved(c) || (c != 0 && strchr("!$&'()*+,;=:@", c) != NULL);
}

/* The value of two hex digits, or -1. */
static int ref_hex2(const uint8_t *s)
{
    static const char digits[] = "0123456789abcdef";
    const char *hi, *lo;

    if (!isxdigit(s[0]) || !isxdigit(s[1]))
        return -1;
    hi = strchr(digits, tolower(s[0]));
    lo = strchr(digits, tolower(s[1]));
    return (int)((hi - digits) * 16 + (lo - digits));
}

/* One segment s[0..n) (no '/' in it) written to d in normal form, its
 * length in *dn; OK, or what makes the segment BAD or AMBIGUOUS: its first
 * bad byte or escape from the left, else parameters on a dot segment. */
static enum http_path_result ref_segment(const uint8_t *s, size_t n, char *d, size_t *dn)
{
    size_t k = 0;
    const char *semi;

    for (size_t i = 0; i < n; i++) {
        int v;
        if (s[i] == '\\')
            return HTTP_PATH_AMBIGUOUS;
        if (!isgraph(s[i]) || s[i] == '#')
            return HTTP_PATH_BAD;
        if (ref_pchar(s[i])) {
            d[k++] = (char)s[i];
            continue;
        }
        if (s[i] != '%') { /* printable, but no pchar: escaped */
            d[k++] = '%';
            d[k++] = "0123456789ABCDEF"[s[i] >> 4];
            d[k++] = "0123456789ABCDEF"[s[i] & 15];
            continue;
        }
        if (n - i < 3 || (v = ref_hex2(s + i + 1)) < 0)
            return HTTP_PATH_BAD;
        if (v == 0 || v == '/' || v == '\\')
            return HTTP_PATH_AMBIGUOUS;
        if (ref_unreserved(v)) {
            d[k++] = (char)v;
        } else {
            d[k++] = '%';
            d[k++] = (char)toupper(s[i + 1]);
            d[k++] = (char)toupper(s[i + 2]);
        }
        i += 2;
    }
    /* A ';' here is a raw one (an escaped one stays "%3B"). */
    semi = memchr(d, ';', k);
    if (semi != NULL) {
        size_t base = (size_t)(semi - d);
        if ((base == 1 && d[0] == '.') || (base == 2 && d[0] == '.' && d[1] == '.'))
            return HTTP_PATH_AMBIGUOUS;
    }
    *dn = k;
    return HTTP_PATH_OK;
}

/* Whether the NUL-terminated s starts with prefix. */
static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* RFC 3986 section 5.2.4 on the NUL-terminated buf (changed in place: it is
 * the input buffer), the result in out, its length returned. */
static size_t remove_dot_segments(char *buf, char *out)
{
    char *in = buf;
    size_t n = 0;

    while (*in != '\0') {
        if (starts(in, "../")) { /* A */
            in += 3;
        } else if (starts(in, "./")) {
            in += 2;
        } else if (starts(in, "/./")) { /* B */
            in += 2;
        } else if (strcmp(in, "/.") == 0) {
            in[1] = '/';
            in += 1;
        } else if (starts(in, "/../") || strcmp(in, "/..") == 0) { /* C */
            if (in[3] == '/') {
                in += 3;
            } else {
                in[2] = '/';
                in += 2;
            }
            while (n > 0 && out[n - 1] != '/')
                n--;
            if (n > 0)
                n--; /* the last segment and the '/' before it */
        } else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) { /* D */
            in += strlen(in);
        } else { /* E */
            do
                out[n++] = *in++;
            while (*in != '\0' && *in != '/');
        }
    }
    out[n] = '\0';
    return n;
}

/* The reference: the result for the target t[0..len), and for OK the path
 * in out (NUL-terminated), its length in *out_len. */
static enum http_path_result reference(const uint8_t *t, size_t len, char *out, size_t *out_len)
{
    static char joined[OUT_MAX + 1], dotless[OUT_MAX + 1], seg[OUT_MAX];
    size_t path = 0, j = 0, n = 0;
    bool last_empty = false;

    while (path < len && t[path] != '?')
        path++;
    if (path == 0 || t[0] != '/')
        return HTTP_PATH_BAD;
    /* The segments: between one '/' and the next '/' or the end. */
    for (size_t from = 1; from <= path;) {
        const uint8_t *slash = memchr(t + from, '/', path - from);
        size_t to = slash != NULL ? (size_t)(slash - t) : path, k = 0;
        enum http_path_result r = ref_segment(t + from, to - from, seg, &k);
        if (r != HTTP_PATH_OK)
            return r;
        last_empty = k == 0;
        if (k > 0) {
            joined[j++] = '/';
            memcpy(joined + j, seg, k);
            j += k;
        }
        from = to + 1;
    }
    if (last_empty)
        joined[j++] = '/';
    joined[j] = '\0';
    j = remove_dot_segments(joined, dotless);
    /* No empty segment should be left; drop any all the same. */
    for (size_t i = 0; i < j; i++)
        if (!(dotless[i] == '/' && n > 0 && out[n - 1] == '/'))
            out[n++] = dotless[i];
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    *out_len = n;
    return HTTP_PATH_OK;
}

/* The most the work in out holds for the target t[0..len) whose result is
 * result_len bytes: that result, or a segment written after the normal
 * form of the path before it (the reference on that prefix, its trailing
 * '/' aside), whichever is longest. */
static size_t ref_work(const uint8_t *t, size_t len, size_t result_len)
{
    static char prefix[OUT_MAX + 1], seg[OUT_MAX];
    size_t path = 0, most = result_len;

    while (path < len && t[path] != '?')
        path++;
    for (size_t from = 1; from <= path;) {
        const uint8_t *slash = memchr(t + from, '/', path - from);
        size_t to = slash != NULL ? (size_t)(slash - t) : path, before = 0, k = 0;
        if (from > 1) {
            CHECK(reference(t, from - 1, prefix, &before) == HTTP_PATH_OK,
                  "a prefix of an OK path is not OK");
            before -= prefix[before - 1] == '/';
        }
        CHECK(ref_segment(t + from, to - from, seg, &k) == HTTP_PATH_OK,
              "a segment of an OK path is not OK");
        if (before + 1 + k > most)
            most = before + 1 + k;
        from = to + 1;
    }
    return most;
}

/* ------------------------------------------------------------ the target */

static const char *const pieces[] = {
    "/",    "/",     "/",   "/",   ".",   "..",    "...",    "%2e",     "%2E", "%2e%2e",
    ".%2E", "%2E.",  "a",   "b",   "B",   "~",     "-",      "_",       "0",   ";",
    ";x",   ";x=1",  ".;",  "..;", "%41", "%61",   "%7e",    "%7E",     "%2d", "%5f",
    "%30",  "%3b",   "%3B", "%20", "%25", "%2541", "%c3%a9", "%3f",     "%3F", "%23",
    "%2f",  "%2F",   "%5c", "%5C", "\\",  "%00",   "?",      "?q=/../", "#",   " ",
    "\x7f", "\x80",  "\t",  "%",   "%4",  "%zz",   "%g0",    "*",       "//",  "/./",
    "/../", "/%2e/", "%01", "%7f", "%ff", "%FF",   "%2",     "%%",      "%.",  "a.b",
};

/* The target the input describes, in t (of IN_MAX bytes); its length. */
static size_t build_target(struct input *in, uint8_t *t)
{
    size_t n = 0;

    if (in->n == 0 || in->p[0] >= 8) { /* raw */
        n = in->n < IN_MAX ? in->n : IN_MAX;
        memcpy(t, in->p, n);
        return n;
    }
    if (!(take(in) & 1))
        t[n++] = '/';
    while (in->n > 0) {
        const char *p = pieces[take(in) % (sizeof(pieces) / sizeof(pieces[0]))];
        size_t k = strlen(p);
        if (n + k > IN_MAX)
            break;
        memcpy(t + n, p, k);
        n += k;
    }
    return n;
}

/* ------------------------------------------------------------ the checks */

/* http_path_normalize on t[0..len) with out a heap buffer of exactly cap
 * bytes; for OK, the output copied to res (of OUT_MAX + 1 bytes) and its
 * length in *res_len, after checking it is a string of that length. */
static enum http_path_result run(const uint8_t *t, size_t len, size_t cap, char *res,
                                 size_t *res_len)
{
    char *in = malloc(len ? len : 1), *out = malloc(cap);
    size_t n = (size_t)-1;
    enum http_path_result r;

    memcpy(in, t, len);
    r = http_path_normalize(in, len, out, cap, &n);
    CHECK(r == HTTP_PATH_OK || r == HTTP_PATH_BAD || r == HTTP_PATH_AMBIGUOUS ||
              r == HTTP_PATH_TOO_LONG,
          "result %d", r);
    if (r == HTTP_PATH_OK) {
        CHECK(n < cap && n <= OUT_MAX, "out_len %zu with cap %zu", n, cap);
        CHECK(out[n] == '\0' && memchr(out, '\0', n) == NULL,
              "the output is not a string of out_len %zu", n);
        memcpy(res, out, n + 1);
        *res_len = n;
    }
    free(in);
    free(out);
    return r;
}

/* Whether t[0..n) holds only bytes a path holds as themselves. */
static bool plain(const uint8_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ref_pchar(t[i]) && t[i] != '/' && t[i] != '%')
            return false;
    return true;
}

/* 3: the output s[0..n) is in normal form. */
static void check_normal_form(const char *s, size_t n)
{
    CHECK(n > 0 && s[0] == '/', "\"%s\" does not start with '/'", s);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        CHECK(ref_pchar(c) || c == '/' || c == '%', "byte 0x%02x in \"%s\"", c, s);
        if (c == '%') {
            int v = i + 2 < n ? ref_hex2((const uint8_t *)s + i + 1) : -1;
            CHECK(v >= 0 && !islower((unsigned char)s[i + 1]) && !islower((unsigned char)s[i + 2]),
                  "\"%s\": a '%%' at %zu without two upper-case hex digits", s, i);
            CHECK(!ref_unreserved(v) && v != 0 && v != '/' && v != '\\',
                  "\"%s\": %%%c%c escapes what it should not", s, s[i + 1], s[i + 2]);
        }
    }
    for (size_t from = 1; from <= n;) {
        const char *slash = memchr(s + from, '/', n - from);
        size_t to = slash != NULL ? (size_t)(slash - s) : n, base = to - from;
        const char *semi = memchr(s + from, ';', to - from);
        CHECK(to > from || to == n, "\"%s\": an empty segment at %zu", s, from);
        if (semi != NULL)
            base = (size_t)(semi - (s + from));
        CHECK(!(base == 1 && s[from] == '.') &&
                  !(base == 2 && s[from] == '.' && s[from + 1] == '.'),
              "\"%s\": a dot segment at %zu", s, from);
        from = to + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t t[IN_MAX + 16];
    static char want[OUT_MAX + 1], got[OUT_MAX + 1], again[OUT_MAX + 1];
    static const char query[] = "?q=/../%2F#\x80";
    struct input in = {data, size};
    size_t n, path = 0, want_n = 0, got_n = 0, again_n = 0, need;
    enum http_path_result r, ref;

    if (size > IN_MAX + 1)
        return 0;
    n = build_target(&in, t);
    ref = reference(t, n, want, &want_n);
    r = run(t, n, 3 * n + 1, got, &got_n);

    /* 1 */
    CHECK(r == ref, "\"%.*s\": %s, the reference %s", (int)n, (const char *)t,
          http_path_result_str(r), http_path_result_str(ref));
    /* 5 */
    memcpy(t + n, query, sizeof(query) - 1);
    CHECK(run(t, n + sizeof(query) - 1, 3 * n + 1, again, &again_n) == r &&
              (r != HTTP_PATH_OK || (again_n == got_n && memcmp(again, got, got_n) == 0)),
          "\"%.*s\": a query changed the result", (int)n, (const char *)t);
    if (r != HTTP_PATH_OK)
        return 0;
    /* 2 */
    CHECK(got_n == want_n && memcmp(got, want, got_n) == 0,
          "\"%.*s\": \"%s\", the reference \"%s\"", (int)n, (const char *)t, got, want);
    while (path < n && t[path] != '?')
        path++;
    CHECK(got_n <= (plain(t, path) ? path : 3 * path), "\"%.*s\": %zu bytes out of %zu", (int)n,
          (const char *)t, got_n, path);
    /* 3 */
    check_normal_form(got, got_n);
    /* 4 */
    CHECK(run((const uint8_t *)got, got_n, got_n + 1, again, &again_n) == HTTP_PATH_OK &&
              again_n == got_n && memcmp(again, got, got_n) == 0,
          "\"%s\" normalizes to \"%.*s\"", got, (int)again_n, again);
    /* 6 */
    need = ref_work(t, n, got_n) + 1;
    CHECK(need <= 3 * path + 1, "\"%.*s\": the work needs %zu bytes", (int)n, (const char *)t,
          need);
    CHECK(run(t, n, need - 1, again, &again_n) == HTTP_PATH_TOO_LONG,
          "\"%.*s\": \"%s\" fit in cap %zu, the work needing %zu", (int)n, (const char *)t, got,
          need - 1, need);
    r = run(t, n, need, again, &again_n);
    CHECK(r == HTTP_PATH_OK && again_n == got_n && memcmp(again, got, got_n) == 0,
          "\"%.*s\": with cap %zu (what the work needs): %s", (int)n, (const char *)t, need,
          http_path_result_str(r));
    return 0;
}
