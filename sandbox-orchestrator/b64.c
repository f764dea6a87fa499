/* b64.c - base64 encoder and strict decoder (RFC 4648 section 4). */
#include <stdlib.h>
#include <string.h>

#include "b64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *sbx_b64_encode(const unsigned char *data, size_t len)
{
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    size_t i;

    if (!out)
        abort();
    for (i = 0; i + 2 < len; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (unsigned)data[i + 1] << 8 | data[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < len) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < len ? (unsigned)data[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int value(char c)
{
    const char *p = c ? strchr(alphabet, c) : NULL;

    return p ? (int)(p - alphabet) : -1;
}

unsigned char *sbx_b64_decode(const char *text, size_t n, size_t *outlen)
{
    unsigned char *out, *o;

    if (n % 4 != 0)
        return NULL;
    out = malloc(n / 4 * 3 + 1);
    if (!out)
        abort();
    o = out;
    for (size_t i = 0; i < n; i += 4) {
        int last = i + 4 == n;
        int pad = last && text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0;
        int a = value(text[i]), b = value(text[i + 1]);
        int c = pad == 2 ? 0 : value(text[i + 2]), d = pad ? 0 : value(text[i + 3]);
        unsigned v;
        if (a < 0 || b < 0 || c < 0 || d < 0) {
            free(out);
            return NULL;
        }
        v = (unsigned)a << 18 | (unsigned)b << 12 | (unsigned)c << 6 | (unsigned)d;
        *o++ = (unsigned char)(v >> 16);
        if (pad < 2)
            *o++ = (unsigned char)(v >> 8);
        if (pad < 1)
            *o++ = (unsigned char)v;
    }
    *outlen = (size_t)(o - out);
    return out;
}
