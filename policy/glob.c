/*
 * glob.c - the path globs of a `paths` rule option, checked and matched
 * against a request's normalized path (http_path_normalize's form).
 *
 *   "*"   within a segment: any run of bytes but '/', maybe empty
 *   "**"  as a whole segment: zero or more whole segments
 *
 * Everything else matches itself, byte for byte (case as written).  A
 * glob is written in the normalized form: one that no normalized path
 * could match ("//", a dot segment, "?", an escaped unreserved
 * character, lower-case hex) is refused when the file is read, with why.
 */
#include <string.h>

#include "policy_int.h"

static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* A byte RFC 3986 allows in a path segment (pchar) other than '%'. */
static bool pchar(unsigned char c)
{
    return unreserved(c) || (c != '\0' && strchr("!$&'()*+,;=:@", c) != NULL);
}

static int upper_hex(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Why segment s[0..len) of a glob can never match, or NULL; *at its
 * offset in s. */
static const char *segment_refused(const char *s, size_t len, size_t *at)
{
    const char *semi = memchr(s, ';', len);
    size_t head = semi != NULL ? (size_t)(semi - s) : len;
    const char *star2 = len >= 2 ? memmem(s, len, "**", 2) : NULL;

    *at = 0;
    if ((head == 1 && s[0] == '.') || (head == 2 && s[0] == '.' && s[1] == '.'))
        return "a '.' or '..' segment can never match (paths are matched with dot segments "
               "removed)";
    if (star2 != NULL && len != 2) {
        *at = (size_t)(star2 - s);
        return "'**' must be a whole segment ('/**/'), matching any number of segments";
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        *at = i;
        if (c == '?')
            return "a '?' can never match (paths are matched without their query)";
        if (c == '%') {
            int hi = i + 2 < len ? upper_hex((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < len ? upper_hex((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return "a '%' escape with two upper-case hex digits (paths are matched with "
                       "upper-case escapes)";
            unsigned char v = (unsigned char)(hi * 16 + lo);
            if (unreserved(v))
                return "an escaped letter, digit, '-', '.', '_' or '~' can never match (paths "
                       "are matched with those decoded): write the character itself";
            if (v == '/' || v == '\\' || v == 0)
                return "an escaped '/', '\\' or NUL can never match (such paths are refused "
                       "as ambiguous)";
            i += 2;
            continue;
        }
        if (!pchar(c))
            return "a byte a path cannot hold (RFC 3986: letters, digits, -._~ !$&'()*+,;=:@ "
                   "and %XX)";
    }
    return NULL;
}

const char *policy_glob_check(const char *g, size_t len, size_t *at)
{
    *at = 0;
    if (len == 0 || g[0] != '/')
        return "a path glob starts with '/'";
    if (len > POLICY_GLOB_MAX)
        return "a path glob of at most 512 bytes";
    for (size_t i = 1; i <= len;) {
        const char *slash = memchr(g + i, '/', len - i);
        size_t end = slash != NULL ? (size_t)(slash - g) : len;
        size_t off;
        if (end == i && slash != NULL) {
            *at = i;
            return "'//' can never match (paths are matched with empty segments dropped)";
        }
        const char *why = segment_refused(g + i, end - i, &off);
        if (why != NULL) {
            *at = i + off;
            return why;
        }
        i = end + 1;
    }
    return NULL;
}

/* Does segment pattern g[0..gl) match segment s[0..sl)?  '*' is any run
 * of bytes (greedy, going back to the last '*' on a mismatch). */
static bool segment_match(const char *g, size_t gl, const char *s, size_t sl)
{
    size_t gi = 0, si = 0, star = SIZE_MAX, mark = 0;

    while (si < sl) {
        if (gi < gl && g[gi] == '*') {
            star = ++gi;
            mark = si;
        } else if (gi < gl && g[gi] == s[si]) {
            gi++;
            si++;
        } else if (star != SIZE_MAX) {
            gi = star;
            si = ++mark;
        } else {
            return false;
        }
    }
    while (gi < gl && g[gi] == '*')
        gi++;
    return gi == gl;
}

/* The end of the segment that starts at s[i] (the next '/' or len). */
static size_t segment_end(const char *s, size_t len, size_t i)
{
    const char *slash = memchr(s + i, '/', len - i);
    return slash != NULL ? (size_t)(slash - s) : len;
}

static bool is_globstar(const char *g, size_t i, size_t end)
{
    return end - i == 2 && g[i] == '*' && g[i + 1] == '*';
}

bool policy_glob_match(const char *g, size_t gl, const char *p, size_t pl)
{
    /* Positions are segment starts (just after a '/'); len + 1 is past
     * the last segment.  The same greedy walk as segment_match, with
     * segments for bytes and "**" for '*'. */
    size_t gi = 1, pi = 1, star = SIZE_MAX, mark = 0;

    if (gl == 0 || pl == 0 || g[0] != '/' || p[0] != '/')
        return false;
    while (pi <= pl) {
        size_t pe = segment_end(p, pl, pi);
        size_t ge = gi <= gl ? segment_end(g, gl, gi) : 0;
        if (gi <= gl && is_globstar(g, gi, ge)) {
            star = gi = ge + 1;
            mark = pi;
        } else if (gi <= gl && segment_match(g + gi, ge - gi, p + pi, pe - pi)) {
            gi = ge + 1;
            pi = pe + 1;
        } else if (star != SIZE_MAX) {
            gi = star;
            mark = segment_end(p, pl, mark) + 1;
            pi = mark;
        } else {
            return false;
        }
    }
    while (gi <= gl && is_globstar(g, gi, segment_end(g, gl, gi)))
        gi = segment_end(g, gl, gi) + 1;
    return gi > gl;
}

/* A byte a ref glob may hold besides '/' and '*' (git's refname rules:
 * printable ASCII but SP ~ ^ : ? [ \). */
static bool ref_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && strchr("~^:?*[\\", c) == NULL;
}

const char *policy_ref_glob_check(const char *g, size_t len, size_t *at)
{
    *at = 0;
    if (len < 6 || memcmp(g, "refs/", 5) != 0)
        return "a ref glob starts with 'refs/' (refs/heads/agent/**)";
    if (len > POLICY_GLOB_MAX)
        return "a ref glob of at most 512 bytes";
    for (size_t i = 5; i <= len;) {
        const char *slash = memchr(g + i, '/', len - i);
        size_t end = slash != NULL ? (size_t)(slash - g) : len;
        *at = i;
        if (end == i)
            return "an empty segment can never match a ref";
        if (g[i] == '.')
            return "a segment starting with '.' can never match a ref";
        if (end - i >= 2 && memmem(g + i, end - i, "**", 2) != NULL && end - i != 2)
            return "'**' must be a whole segment ('/**/'), matching any number of segments";
        for (size_t k = i; k < end; k++) {
            *at = k;
            if (g[k] != '*' && !ref_byte((unsigned char)g[k]))
                return "a byte a ref cannot hold (SP ~ ^ : ? [ \\ or a control byte)";
            if (k + 1 < end &&
                ((g[k] == '.' && g[k + 1] == '.') || (g[k] == '@' && g[k + 1] == '{')))
                return "'..' or '@{' can never be in a ref";
        }
        i = end + 1;
    }
    return NULL;
}

bool policy_ref_glob_match(const char *g, size_t gl, const char *r, size_t rl)
{
    char gb[POLICY_GLOB_MAX + 2], rb[POLICY_GLOB_MAX * 2 + 2];

    if (gl > POLICY_GLOB_MAX || rl >= sizeof(rb) - 1)
        return false;
    gb[0] = rb[0] = '/';
    memcpy(gb + 1, g, gl);
    memcpy(rb + 1, r, rl);
    return policy_glob_match(gb, gl + 1, rb, rl + 1);
}

bool policy_glob_narrowest(const char *p, size_t pl, char *g, size_t size, size_t *gl)
{
    size_t seg = 0, cut = 0, at;

    if (pl == 0 || p[0] != '/' || pl >= size)
        return false;
    for (size_t i = 1; i <= pl && cut == 0; i++)
        if ((i == pl || p[i] == '/') && ++seg == POLICY_GLOB_NARROW_SEGMENTS && i + 1 < pl)
            cut = i;
    *gl = cut != 0 ? cut + 3 : pl;
    if (*gl >= size)
        return false;
    memcpy(g, p, cut != 0 ? cut : pl);
    if (cut != 0)
        memcpy(g + cut, "/**", 3);
    g[*gl] = '\0';
    return policy_glob_check(g, *gl, &at) == NULL;
}
