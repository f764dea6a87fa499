/*
 * path.c - a request's path in the one form rules are matched on
 * (http_path_normalize): RFC 3986's syntax-based normalization (section
 * 6.2.2) and dot-segment removal (section 5.2.4), plus what would let a
 * server read the same bytes as another path refused, not guessed at.
 */
#include <string.h>

#include "http.h"

/* An unreserved character (RFC 3986 section 2.3): decoded when escaped. */
static bool unreserved(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* A byte RFC 3986 lets a path segment hold as itself (pchar but '%'). */
static bool pchar(unsigned char c)
{
    return unreserved(c) || (c != '\0' && strchr("!$&'()*+,;=:@", c) != NULL);
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The output being built: p[0..n) of cap bytes (one kept for the NUL). */
struct out {
    char *p;
    size_t n, cap;
    bool overflow;
};

static void put(struct out *o, char c)
{
    if (o->n + 1 >= o->cap) {
        o->overflow = true;
        return;
    }
    o->p[o->n++] = c;
}

/* One segment, decoded, from in[0..len) (no '/' in it) appended to o
 * after a '/'.  HTTP_PATH_OK, or why the segment cannot be judged. */
static enum http_path_result put_segment(struct out *o, const char *in, size_t len)
{
    static const char digits[] = "0123456789ABCDEF";

    put(o, '/');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == '\\')
            return HTTP_PATH_AMBIGUOUS;
        if (c <= 0x20 || c >= 0x7f || c == '#')
            return HTTP_PATH_BAD;
        if (c != '%' && pchar(c)) {
            put(o, (char)c);
            continue;
        }
        if (c != '%') { /* '[', '"', '{', ...: escaped, as a glob names them */
            put(o, '%');
            put(o, digits[c >> 4]);
            put(o, digits[c & 15]);
            continue;
        }
        int hi, lo;
        if (i + 2 >= len || (hi = hex_value((unsigned char)in[i + 1])) < 0 ||
            (lo = hex_value((unsigned char)in[i + 2])) < 0)
            return HTTP_PATH_BAD;
        unsigned char v = (unsigned char)(hi * 16 + lo);
        i += 2;
        if (v == '/' || v == '\\' || v == 0)
            return HTTP_PATH_AMBIGUOUS;
        if (unreserved(v)) {
            put(o, (char)v);
        } else {
            put(o, '%');
            put(o, digits[v >> 4]);
            put(o, digits[v & 15]);
        }
    }
    return HTTP_PATH_OK;
}

/* What the segment just appended at o->p[start..o->n) (after its '/') is:
 * 0 a plain one, 1 ".", 2 "..".  "..;x" and ".;x" are refused: some
 * servers drop the parameters and then read a dot segment. */
static int dots_of(const struct out *o, size_t start, bool *ambiguous)
{
    const char *s = o->p + start + 1;
    size_t len = o->n - start - 1;
    const char *semi = memchr(s, ';', len);
    size_t head = semi != NULL ? (size_t)(semi - s) : len;
    bool dot = head == 1 && s[0] == '.', dotdot = head == 2 && s[0] == '.' && s[1] == '.';

    if ((dot || dotdot) && semi != NULL)
        *ambiguous = true;
    return semi != NULL ? 0 : dot ? 1 : dotdot ? 2 : 0;
}

enum http_path_result http_path_normalize(const char *in, size_t len, char *out, size_t cap,
                                          size_t *out_len)
{
    struct out o = {out, 0, cap, false};
    const char *q = memchr(in, '?', len);
    bool trailing = false, ambiguous = false;

    if (q != NULL)
        len = (size_t)(q - in);
    if (cap == 0)
        return HTTP_PATH_TOO_LONG;
    if (len == 0 || in[0] != '/')
        return HTTP_PATH_BAD;
    for (size_t i = 1; i <= len;) {
        const char *slash = memchr(in + i, '/', len - i);
        size_t end = slash != NULL ? (size_t)(slash - in) : len;
        size_t start = o.n;
        enum http_path_result r = put_segment(&o, in + i, end - i);
        if (r != HTTP_PATH_OK)
            return r;
        if (o.overflow)
            return HTTP_PATH_TOO_LONG;
        int dots = dots_of(&o, start, &ambiguous);
        if (ambiguous)
            return HTTP_PATH_AMBIGUOUS;
        bool empty = o.n == start + 1;
        trailing = empty || dots != 0;
        if (empty || dots != 0)
            o.n = start; /* "", "." : nothing kept */
        if (dots == 2)
            while (o.n > 0 && out[--o.n] != '/')
                ; /* "..": the segment before it goes too */
        i = end + 1;
    }
    if (o.n == 0 || trailing)
        put(&o, '/');
    if (o.overflow)
        return HTTP_PATH_TOO_LONG;
    out[o.n] = '\0';
    *out_len = o.n;
    return HTTP_PATH_OK;
}

const char *http_path_result_str(enum http_path_result r)
{
    switch (r) {
    case HTTP_PATH_OK: return "ok";
    case HTTP_PATH_BAD: return "not a path (a byte outside RFC 3986's, or a bad %-escape)";
    case HTTP_PATH_AMBIGUOUS:
        return "ambiguous (an escaped '/' or '\\', a '\\', %00, or a dot segment with "
               "parameters)";
    case HTTP_PATH_TOO_LONG: return "too long";
    }
    return "not a path";
}
