/*
 * form.c - application/x-www-form-urlencoded bodies (WHATWG URL §5): pairs
 * split at '&', name and value at the first '=', '+' for a space and %XX
 * for any byte.  Reading is strict where WHATWG is lenient: a '%' not
 * followed by two hex digits is an error, never a literal percent sign, so
 * no two readers can disagree on what a token was.
 */
#include <string.h>

#include "oauth_int.h"

enum {
    ESCAPE_LEN = 3, /* "%XX" */
    NIBBLE = 4,     /* bits of one hex digit */
    HEX_TEN = 10,   /* the value of 'a' */
};

static const char hex_digits[] = "0123456789ABCDEF";

/* The value of hex digit c, or -1. */
static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + HEX_TEN;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + HEX_TEN;
    return -1;
}

/* The decoded byte at s[*i] (of len), *i advanced past it; -1 on a bad
 * escape. */
static int form_byte(const char *s, size_t len, size_t *i)
{
    char c = s[*i];

    if (c == '+') {
        (*i)++;
        return ' ';
    }
    if (c != '%') {
        (*i)++;
        return (unsigned char)c;
    }
    if (len - *i < ESCAPE_LEN)
        return -1;
    int hi = hex_value(s[*i + 1]), lo = hex_value(s[*i + 2]);
    if (hi < 0 || lo < 0)
        return -1;
    *i += ESCAPE_LEN;
    return hi << NIBBLE | lo;
}

bool oauth_form_next(const char **at, const char *end, struct oauth_form_pair *pair)
{
    while (*at < end) {
        const char *start = *at, *amp = memchr(start, '&', (size_t)(end - start));
        const char *stop = amp != NULL ? amp : end;
        *at = amp != NULL ? amp + 1 : end;
        if (stop == start)
            continue;
        const char *eq = memchr(start, '=', (size_t)(stop - start));
        pair->name = start;
        pair->name_len = (size_t)((eq != NULL ? eq : stop) - start);
        pair->value = eq != NULL ? eq + 1 : stop;
        pair->value_len = (size_t)(stop - pair->value);
        return true;
    }
    return false;
}

bool oauth_form_valid(const char *s, size_t len)
{
    for (size_t i = 0; i < len;)
        if (form_byte(s, len, &i) < 0)
            return false;
    return true;
}

bool oauth_form_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t i = 0, j = 0;

    while (i < alen && j < blen) {
        int c = form_byte(a, alen, &i);
        if (c < 0 || c != form_byte(b, blen, &j))
            return false;
    }
    return i == alen && j == blen;
}

int oauth_form_decode(const char *s, size_t len, char *out, size_t cap, size_t *out_len)
{
    size_t n = 0;

    for (size_t i = 0; i < len;) {
        int c = form_byte(s, len, &i);
        if (c < 0 || n + 1 >= cap) {
            explicit_bzero(out, cap);
            return -1;
        }
        out[n++] = (char)c;
    }
    if (cap == 0)
        return -1;
    out[n] = '\0';
    *out_len = n;
    return 0;
}

/* Whether byte c stands for itself in a form (WHATWG's
 * application/x-www-form-urlencoded percent-encode set's complement). */
static bool form_plain(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '*' ||
           c == '-' || c == '.' || c == '_';
}

/* Append s[0..len) encoded to out at *at; false when it does not fit
 * (with the NUL still to come). */
static bool form_encode(char *out, size_t cap, size_t *at, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t need = form_plain(c) || c == ' ' ? 1 : ESCAPE_LEN;
        if (cap - *at <= need)
            return false;
        if (c == ' ') {
            out[(*at)++] = '+';
        } else if (form_plain(c)) {
            out[(*at)++] = (char)c;
        } else {
            out[(*at)++] = '%';
            out[(*at)++] = hex_digits[c >> NIBBLE];
            out[(*at)++] = hex_digits[c & ((1u << NIBBLE) - 1)];
        }
    }
    return true;
}

/* Append the single byte c to out at *at; false when it does not fit. */
static bool form_char(char *out, size_t cap, size_t *at, char c)
{
    if (cap - *at <= 1)
        return false;
    out[(*at)++] = c;
    return true;
}

int oauth_form_put(char *out, size_t cap, size_t *at, const char *name, const char *value,
                   size_t value_len)
{
    if (*at >= cap)
        return -1;
    bool ok = (*at == 0 || form_char(out, cap, at, '&')) &&
              form_encode(out, cap, at, name, strlen(name)) && form_char(out, cap, at, '=') &&
              form_encode(out, cap, at, value, value_len);
    out[*at] = '\0';
    return ok ? 0 : -1;
}
