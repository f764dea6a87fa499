/*
 * chunked.c - the chunked transfer coding (RFC 9112 section 7.1), fed
 * byte by byte as the body passes: where it ends, and whether its framing
 * holds.  The bytes are forwarded as they are, never decoded.
 */
#include "http_int.h"

#define CHUNK_LINE_MAX   4096 /* a chunk-size line or a trailer line, without CRLF */
#define CHUNK_DIGITS_MAX 15   /* hex digits: a size below 2^60 */

enum chunked_state {
    CH_SIZE,         /* chunk-size hex digits; `line` counts them */
    CH_SIZE_BWS,     /* white space after the size: only a ';' may follow */
    CH_EXT,          /* chunk-ext (section 7.1.1): skipped up to the CR */
    CH_SIZE_LF,      /* the LF ending the size line */
    CH_DATA,         /* chunk-data: `left` bytes */
    CH_DATA_CR,      /* the CRLF after the data */
    CH_DATA_LF,      /* ... */
    CH_TRAILER,      /* a trailer line or the final CRLF (section 7.1.2) */
    CH_TRAILER_NAME, /* a trailer field's name, up to its colon */
    CH_TRAILER_VAL,  /* its value, up to the CR */
    CH_TRAILER_LF,   /* the LF ending a trailer line */
    CH_END_LF,       /* the LF of the final CRLF */
    CH_DONE,         /* the body has ended: a passing state */
    CH_BAD,          /* broken framing: a passing state */
};

/* Contract in http.h: the state at the start of a chunked body. */
void http_chunked_init(struct http_chunked *c)
{
    c->state = CH_SIZE;
    c->left = 0;
    c->line = 0;
}

/* Count a byte of a size or trailer line against the line cap. */
static int line_byte(struct http_chunked *c, int next)
{
    return ++c->line > CHUNK_LINE_MAX ? CH_BAD : next;
}

static int size_byte(struct http_chunked *c, unsigned char b)
{
    int d = hex_value(b);

    if (d >= 0) {
        if (c->line >= CHUNK_DIGITS_MAX)
            return CH_BAD;
        c->left = c->left * 16 + (uint64_t)d;
        return line_byte(c, CH_SIZE);
    }
    if (c->line == 0)
        return CH_BAD; /* chunk-size = 1*HEXDIG */
    if (b == ';')
        return line_byte(c, CH_EXT);
    if (is_ows((char)b))
        return line_byte(c, CH_SIZE_BWS);
    return b == '\r' ? CH_SIZE_LF : CH_BAD;
}

static int trailer_byte(struct http_chunked *c, unsigned char b)
{
    if (c->state == CH_TRAILER) {
        c->line = 0;
        if (b == '\r')
            return CH_END_LF;
    }
    /* The name: a token up to ':' (so obs-fold, a line starting with white
     * space, is refused here too). */
    if (c->state != CH_TRAILER_VAL) {
        if (b == ':' && c->line > 0)
            return line_byte(c, CH_TRAILER_VAL);
        return is_tchar(b) ? line_byte(c, CH_TRAILER_NAME) : CH_BAD;
    }
    if (b == '\r')
        return CH_TRAILER_LF;
    return is_bad_ctl(b) ? CH_BAD : line_byte(c, CH_TRAILER_VAL);
}

/* The state after one byte outside chunk-data. */
static int chunked_byte(struct http_chunked *c, unsigned char b)
{
    switch (c->state) {
    case CH_SIZE: return size_byte(c, b);
    case CH_SIZE_BWS:
        if (b == ';')
            return line_byte(c, CH_EXT);
        return is_ows((char)b) ? line_byte(c, CH_SIZE_BWS) : CH_BAD;
    case CH_EXT:
        if (b == '\r')
            return CH_SIZE_LF;
        return is_bad_ctl(b) ? CH_BAD : line_byte(c, CH_EXT);
    case CH_SIZE_LF:
        if (b != '\n')
            return CH_BAD;
        c->line = 0;
        return c->left == 0 ? CH_TRAILER : CH_DATA; /* last-chunk, or data */
    case CH_DATA_CR: return b == '\r' ? CH_DATA_LF : CH_BAD;
    case CH_DATA_LF: c->line = 0; return b == '\n' ? CH_SIZE : CH_BAD;
    case CH_TRAILER:
    case CH_TRAILER_NAME:
    case CH_TRAILER_VAL: return trailer_byte(c, b);
    case CH_TRAILER_LF: return b == '\n' ? CH_TRAILER : CH_BAD;
    case CH_END_LF: return b == '\n' ? CH_DONE : CH_BAD;
    default: return CH_BAD;
    }
}

/* Contract in http.h.  Once DONE, a further feed is DONE with *used 0; once
 * BAD, BAD.  On BAD, *used is the offset just past the offending byte. */
enum http_chunked_result http_chunked_feed(struct http_chunked *c, const char *buf, size_t len,
                                           size_t *used)
{
    size_t i = 0;

    while (i < len && c->state != CH_DONE && c->state != CH_BAD) {
        if (c->state == CH_DATA) {
            size_t take = c->left < len - i ? (size_t)c->left : len - i;
            i += take;
            c->left -= take;
            if (c->left == 0)
                c->state = CH_DATA_CR;
            continue;
        }
        c->state = chunked_byte(c, (unsigned char)buf[i++]);
    }
    *used = i;
    if (c->state == CH_DONE)
        return HTTP_CHUNKED_DONE;
    return c->state == CH_BAD ? HTTP_CHUNKED_BAD : HTTP_CHUNKED_MORE;
}

/* Contract in http.h. */
enum http_chunked_result http_chunked_span(struct http_chunked *c, const char *buf, size_t len,
                                           size_t *used, bool *data)
{
    size_t i = 0;

    *data = c->state == CH_DATA;
    if (*data) /* (CH_DATA holds left > 0) */
        return http_chunked_feed(c, buf, len < c->left ? len : (size_t)c->left, used);
    while (i < len && c->state != CH_DATA && c->state != CH_DONE && c->state != CH_BAD)
        c->state = chunked_byte(c, (unsigned char)buf[i++]);
    *used = i;
    if (c->state == CH_DONE)
        return HTTP_CHUNKED_DONE;
    return c->state == CH_BAD ? HTTP_CHUNKED_BAD : HTTP_CHUNKED_MORE;
}
