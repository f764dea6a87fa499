/*
 * wsframe.c - where the frames of a WebSocket stream end (RFC 6455
 * section 5.2), walked as the bytes stream by, without changing them.
 *
 * Only the framing is read: the payload is skipped, masked or not.  A
 * header that breaks the base framing protocol with no extension in use
 * (a reserved bit or opcode, a control frame that is fragmented or longer
 * than 125 bytes, a 64-bit length with its top bit set) is HTTP_WS_BAD,
 * and stays so.  A length not in its shortest form is taken: the RFC
 * makes it an error to send, not to receive.
 */
#include <string.h>

#include "http.h"

#define WS_FIN       0x80
#define WS_RSV       0x70
#define WS_OPCODE    0x0f
#define WS_MASK      0x80
#define WS_LEN7      0x7f
#define WS_LEN16     126 /* len7 value: a 16-bit length follows */
#define WS_LEN64     127 /* len7 value: a 64-bit length follows */
#define WS_CTRL_MAX  125 /* a control frame's payload, at most */
#define WS_HEAD_BASE 2
#define WS_MASK_KEY  4

enum { WS_HEAD, WS_PAYLOAD, WS_BAD };

void http_ws_frames_init(struct http_ws_frames *f)
{
    memset(f, 0, sizeof(*f));
    f->need = WS_HEAD_BASE;
}

/* Whether opcode op is one RFC 6455 defines (section 5.2, 11.8). */
static bool known_opcode(unsigned op)
{
    return op <= 0x2 || (op >= 0x8 && op <= 0xa);
}

/* The header's first two bytes are in: how long the whole header is, or 0
 * when they break the framing. */
static uint8_t header_size(const uint8_t h[2])
{
    unsigned op = h[0] & WS_OPCODE, len7 = h[1] & WS_LEN7;
    uint8_t size = WS_HEAD_BASE;

    if ((h[0] & WS_RSV) != 0 || !known_opcode(op))
        return 0;
    if (op >= 0x8 && (!(h[0] & WS_FIN) || len7 > WS_CTRL_MAX))
        return 0;
    if (len7 == WS_LEN16)
        size += 2;
    else if (len7 == WS_LEN64)
        size += 8;
    if (h[1] & WS_MASK)
        size += WS_MASK_KEY;
    return size;
}

/* The payload length of the whole header h; false when a 64-bit length
 * has its top bit set. */
static bool payload_length(const uint8_t *h, uint64_t *len)
{
    unsigned len7 = h[1] & WS_LEN7;

    if (len7 < WS_LEN16) {
        *len = len7;
        return true;
    }
    size_t k = len7 == WS_LEN16 ? 2 : 8;
    uint64_t v = 0;
    for (size_t i = 0; i < k; i++)
        v = v << 8 | h[2 + i];
    *len = v;
    return v >> 63 == 0;
}

/* Take header byte b; false when the header breaks the framing. */
static bool header_byte(struct http_ws_frames *f, uint8_t b)
{
    f->head[f->have++] = b;
    if (f->have == WS_HEAD_BASE) {
        f->need = header_size(f->head);
        if (f->need == 0)
            return false;
    }
    if (f->have < f->need)
        return true;
    if (!payload_length(f->head, &f->left))
        return false;
    f->state = WS_PAYLOAD;
    return true;
}

enum http_ws_result http_ws_frames_feed(struct http_ws_frames *f, const uint8_t *p, size_t n,
                                        size_t *ends)
{
    size_t i = 0;

    *ends = 0;
    while (i < n && f->state != WS_BAD) {
        if (f->state == WS_HEAD) {
            if (!header_byte(f, p[i++])) {
                f->state = WS_BAD;
                break;
            }
        } else {
            size_t k = f->left < n - i ? (size_t)f->left : n - i;
            f->left -= k;
            i += k;
        }
        if (f->state == WS_PAYLOAD && f->left == 0) {
            *ends = i;
            f->frames++;
            f->state = WS_HEAD;
            f->have = 0;
            f->need = WS_HEAD_BASE;
        }
    }
    return f->state == WS_BAD ? HTTP_WS_BAD : HTTP_WS_OK;
}
