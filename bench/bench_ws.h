/*
 * bench_ws.h - the WebSocket framing (RFC 6455) egress-load and
 * egress-sink share: the opening handshake's accept value, a frame header
 * read and written, and the payload mask.  Header-only, like bench_cli.h:
 * the bench programs link nothing of each other.
 */
#ifndef BENCH_WS_H
#define BENCH_WS_H

#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#define WS_GUID       "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 section 1.3 */
#define WS_KEY_BYTES  16 /* the nonce a client sends, before base64 */
#define WS_KEY_LEN    24 /* ... and after */
#define WS_ACCEPT_LEN 28 /* base64 of a SHA-1 */
#define WS_KEY_MAX    64 /* the longest Sec-WebSocket-Key looked at */
#define WS_HEAD_MAX   14 /* 2 + 8 bytes of length + 4 of mask */
#define WS_CTRL_MAX   125
#define WS_LEN16      126 /* 7-bit length value: a 16-bit length follows */
#define WS_LEN64      127 /* ... a 64-bit one */
#define WS_FIN        0x80
#define WS_RSV        0x70
#define WS_OPCODE     0x0f
#define WS_MASKED     0x80
#define WS_LEN7       0x7f
#define WS_MASK_BYTES 4
#define WS_CLOSE_1000 "\x03\xe8" /* the close code for a normal end */

enum ws_opcode {
    WS_CONT = 0x0,
    WS_TEXT = 0x1,
    WS_BINARY = 0x2,
    WS_CLOSE = 0x8,
    WS_PING = 0x9,
    WS_PONG = 0xa,
};

/* A frame header as read off the wire. */
struct ws_head {
    bool fin, masked;
    uint8_t opcode;
    uint8_t mask[WS_MASK_BYTES];
    uint64_t len; /* payload bytes */
    size_t size;  /* the header's own bytes */
};

/* Whether a field value (vl bytes) lists token, comma-separated,
 * case-insensitive (RFC 9110 section 5.6.1). */
static inline bool ws_value_lists(const char *v, size_t vl, const char *token)
{
    size_t tl = strlen(token);
    for (const char *end = v + vl; v < end;) {
        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        const char *e = memchr(v, ',', (size_t)(end - v));
        const char *t = e != NULL ? e : end;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - v) == tl && strncasecmp(v, token, tl) == 0)
            return true;
        v = e != NULL ? e + 1 : end;
    }
    return false;
}
/* The Sec-WebSocket-Accept for a Sec-WebSocket-Key (klen bytes, at most
 * WS_KEY_MAX): base64 of SHA-1(key GUID), written NUL-terminated to out. */
static inline void ws_accept(const char *key, size_t klen, char out[WS_ACCEPT_LEN + 1])
{
    char buf[WS_KEY_MAX + sizeof WS_GUID];
    unsigned char md[SHA_DIGEST_LENGTH];

    if (klen > WS_KEY_MAX)
        klen = WS_KEY_MAX;
    memcpy(buf, key, klen);
    memcpy(buf + klen, WS_GUID, sizeof WS_GUID - 1);
    SHA1((const unsigned char *)buf, klen + sizeof WS_GUID - 1, md);
    EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH);
}

/* Whether an opcode is one RFC 6455 defines. */
static inline bool ws_known_opcode(unsigned op)
{
    return op <= WS_BINARY || (op >= WS_CLOSE && op <= WS_PONG);
}

/* Read the frame header at p[0..n): 1 with *h filled, 0 when more bytes
 * are needed, -1 when it breaks the base framing (a reserved bit or
 * opcode, a long or fragmented control frame, a 64-bit length with its
 * top bit set). */
static inline int ws_head_read(const uint8_t *p, size_t n, struct ws_head *h)
{
    if (n < 2)
        return 0;
    unsigned op = p[0] & WS_OPCODE, len7 = p[1] & WS_LEN7;
    size_t lenb = len7 == WS_LEN16 ? 2 : len7 == WS_LEN64 ? 8 : 0;
    h->fin = (p[0] & WS_FIN) != 0;
    h->opcode = (uint8_t)op;
    h->masked = (p[1] & WS_MASKED) != 0;
    h->size = 2 + lenb + (h->masked ? WS_MASK_BYTES : 0);
    if ((p[0] & WS_RSV) != 0 || !ws_known_opcode(op) ||
        (op >= WS_CLOSE && (!h->fin || len7 > WS_CTRL_MAX)))
        return -1;
    if (n < h->size)
        return 0;
    h->len = lenb ? 0 : len7;
    for (size_t i = 0; i < lenb; i++)
        h->len = h->len << 8 | p[2 + i];
    if (lenb == 8 && (p[2] & 0x80))
        return -1;
    if (h->masked)
        memcpy(h->mask, p + 2 + lenb, WS_MASK_BYTES);
    return 1;
}

/* Write a frame header (masked when mask is given) to out (WS_HEAD_MAX
 * bytes of room); returns its size.  The length in its shortest form. */
static inline size_t ws_head_write(uint8_t *out, bool fin, unsigned opcode, const uint8_t *mask,
                                   uint64_t len)
{
    size_t at = 2, lenb = len <= WS_CTRL_MAX ? 0 : len <= UINT16_MAX ? 2 : 8;
    out[0] = (uint8_t)((fin ? WS_FIN : 0) | (opcode & WS_OPCODE));
    out[1] = (uint8_t)((mask ? WS_MASKED : 0) | (lenb == 0   ? len
                                                 : lenb == 2 ? WS_LEN16
                                                             : WS_LEN64));
    for (size_t i = lenb; i > 0; i--)
        out[at++] = (uint8_t)(len >> (8 * (i - 1)));
    if (mask) {
        memcpy(out + at, mask, WS_MASK_BYTES);
        at += WS_MASK_BYTES;
    }
    return at;
}

/* The header size ws_head_write gives a frame of len bytes. */
static inline size_t ws_head_size(bool masked, uint64_t len)
{
    size_t lenb = len <= WS_CTRL_MAX ? 0 : len <= UINT16_MAX ? 2 : 8;
    return 2 + lenb + (masked ? WS_MASK_BYTES : 0);
}

/* XOR p[0..n) with the mask, as from the payload's first byte (masking
 * and unmasking are the same); eight bytes at a time. */
static inline void ws_mask(uint8_t *p, size_t n, const uint8_t mask[WS_MASK_BYTES])
{
    uint8_t m8[8];
    uint64_t m;
    size_t i = 0;

    for (size_t k = 0; k < sizeof m8; k++)
        m8[k] = mask[k % WS_MASK_BYTES];
    memcpy(&m, m8, sizeof m);
    for (; i + sizeof m <= n; i += sizeof m) {
        uint64_t v;
        memcpy(&v, p + i, sizeof v);
        v ^= m;
        memcpy(p + i, &v, sizeof v);
    }
    for (; i < n; i++)
        p[i] ^= mask[i % WS_MASK_BYTES];
}

#endif
