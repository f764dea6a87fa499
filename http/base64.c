/*
 * base64.c - base64 with the standard alphabet and padding (RFC 4648
 * section 4), decoded strictly: each byte string has exactly one encoding
 * that is accepted (section 3.5: the pad bits are zero), so what is decoded
 * and encoded again comes out as it came in.
 */
#include <stdlib.h>

#include "http_int.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The 6-bit value of a base64 character, or -1. */
static int sextet(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Contract in http.h. */
size_t http_base64_encode(const uint8_t *in, size_t n, char *out, size_t cap)
{
    size_t groups = n / 3 + (n % 3 != 0), o = 0;

    if (n == 0 || groups > cap / 4)
        return 0;
    for (size_t i = 0; i < n; i += 3) {
        size_t k = n - i < 3 ? n - i : 3;
        uint32_t v = (uint32_t)in[i] << 16 | (k > 1 ? (uint32_t)in[i + 1] << 8 : 0) |
                     (k > 2 ? in[i + 2] : 0);

        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[v >> 12 & 63];
        out[o++] = k > 1 ? alphabet[v >> 6 & 63] : '=';
        out[o++] = k > 2 ? alphabet[v & 63] : '=';
    }
    return o;
}

/* How many '=' end in[0..n) (n a positive multiple of 4): 0, 1 or 2, or -1
 * when padding stands anywhere else or leaves bits that are not zero. */
static int padding(const char *in, size_t n)
{
    int pad = in[n - 1] != '=' ? 0 : in[n - 2] != '=' ? 1 : 2;
    int last = sextet((unsigned char)in[n - 1 - pad]);

    if (last < 0)
        return -1;
    if ((pad == 1 && (last & 3)) || (pad == 2 && (last & 15)))
        return -1;
    return pad;
}

/* Contract in http.h. */
size_t http_base64_decoded_len(const char *in, size_t n)
{
    int pad;

    if (n % 4 != 0)
        return HTTP_BASE64_BAD;
    if (n == 0)
        return 0;
    if ((pad = padding(in, n)) < 0)
        return HTTP_BASE64_BAD;
    for (size_t i = 0; i < n - (size_t)pad; i++)
        if (sextet((unsigned char)in[i]) < 0)
            return HTTP_BASE64_BAD;
    return n / 4 * 3 - (size_t)pad;
}

/* Contract in http.h. */
size_t http_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
    size_t len = http_base64_decoded_len(in, n), o = 0;

    if (len == HTTP_BASE64_BAD || len > cap)
        return HTTP_BASE64_BAD;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;

        for (size_t k = 0; k < 4; k++)
            v = v << 6 | (in[i + k] == '=' ? 0 : (uint32_t)sextet((unsigned char)in[i + k]));
        for (size_t k = 0; k < 3 && o < len; k++)
            out[o++] = (uint8_t)(v >> (16 - 8 * k));
    }
    return len;
}

/* Contract in http.h. */
char *http_base64_encode_new(const uint8_t *in, size_t n)
{
    size_t cap = (n + 2) / 3 * 4;
    char *out = malloc(cap + 1);

    if (out == NULL)
        abort();
    out[http_base64_encode(in, n, out, cap)] = '\0';
    return out;
}

/* Contract in http.h. */
uint8_t *http_base64_decode_new(const char *in, size_t n, size_t *out_len)
{
    size_t len = http_base64_decoded_len(in, n);
    uint8_t *out;

    if (len == HTTP_BASE64_BAD)
        return NULL;
    out = malloc(len + 1);
    if (out == NULL)
        abort();
    http_base64_decode(in, n, out, len);
    out[len] = '\0';
    *out_len = len;
    return out;
}
