/*
 * utf8.c - the one UTF-8 decoder of egressd (RFC 3629 section 3).
 */
#include "utf8.h"

/* Contract in utf8.h. */
size_t px_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c, v;
    size_t len;

    if (n == 0)
        return 0;
    c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0; /* a continuation byte, an overlong 2-byte lead, past U+10FFFF */
    len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (len > n)
        return 0;
    v = c & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) || (len == 3 && v < 0x800) ||
        (len == 4 && v < 0x10000))
        return 0;
    return len;
}

/* Contract in utf8.h. */
bool px_utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if ((k = px_utf8_seq(s + i, n - i)) == 0)
            return false;
    return true;
}
