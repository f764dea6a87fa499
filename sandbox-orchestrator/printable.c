/* printable.c - see printable.h. */
#include "printable.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DEL         0x7f
#define C1_LEAD     0xc2 /* U+0080..U+00BF are 0xC2 followed by 0x80..0xBF */
#define C1_LAST     0x9f /* U+009F, the last C1 control */
#define ASCII_END   0x80
#define SPACE       0x20
#define REPLACEMENT '?'

/* Contract in printable.h (RFC 3629 section 4: no overlong form, no
 * surrogate, nothing above U+10FFFF). */
size_t sbx_utf8_len(const unsigned char *p)
{
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;

    if (p[0] < ASCII_END)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3;
        lo = p[0] == 0xe0 ? 0xa0 : lo; /* no overlong form */
        hi = p[0] == 0xed ? 0x9f : hi; /* no surrogate */
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4;
        lo = p[0] == 0xf0 ? 0x90 : lo;
        hi = p[0] == 0xf4 ? 0x8f : hi; /* nothing above U+10FFFF */
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* Whether the n-byte sequence at p is a C1 control (U+0080..U+009F). */
static bool c1_control(const unsigned char *p, size_t n)
{
    return n == 2 && p[0] == C1_LEAD && p[1] <= C1_LAST;
}

/* s[0..len) in place; a NUL inside is a control byte too.  s[len] is a
 * NUL, so sbx_utf8_len() never reads past the end. */
static void clean(char *s, size_t len, bool keep_line_feed)
{
    unsigned char *p = (unsigned char *)s, *end = p + len;

    while (p < end) {
        size_t n = sbx_utf8_len(p);
        if (n == 1 && (*p >= SPACE || (keep_line_feed && *p == '\n')) && *p != DEL) {
            p++;
        } else if (n > 1 && !c1_control(p, n)) {
            p += n;
        } else { /* a control byte, or one byte of a bad or C1 sequence */
            for (size_t i = 0; i < (n ? n : 1); i++)
                *p++ = REPLACEMENT;
        }
    }
}

void sbx_printable(char *s)
{
    clean(s, strlen(s), false);
}

void sbx_printable_lines(char *s)
{
    clean(s, strlen(s), true);
}

const char *sbx_printable_value(json_t *v)
{
    const char *text = json_string_value(v);
    size_t len = json_string_length(v);
    char *copy;

    if (!text)
        return NULL;
    copy = malloc(len + 1);
    if (!copy)
        abort();
    memcpy(copy, text, len + 1);
    clean(copy, len, false);
    if (memcmp(copy, text, len) != 0)
        json_string_setn(v, copy, len);
    free(copy);
    return json_string_value(v);
}

const char *sbx_printable_get(json_t *o, const char *key)
{
    return sbx_printable_value(json_object_get(o, key));
}
