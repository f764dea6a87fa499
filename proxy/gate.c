/*
 * gate.c - see gate.h.
 *
 * The body is searched as two streams: `data`, the bytes a client decodes
 * (the whole body, or a chunked body's chunk-data joined up, so a secret
 * split across chunks is one string again), and `aside`, the chunked
 * framing (an extension or a trailer could carry a secret too).
 *
 * What may move: `limit`, a count of body bytes from the body's start.
 * After a search that found nothing, each stream holds back its last
 * px_reflect_held() bytes.  Where those lie in the body is known when they
 * are all in the stream's last span (its last run of contiguous body
 * bytes); when they reach further back the limit stays where it was, which
 * is safe: the held bytes never start before the previous held ones
 * (reflect.h), and it only waits for more bytes.  Once the search has seen
 * the body's end, the rest may all move.
 */
#include "gate.h"

#include <stdlib.h>
#include <string.h>

#include "reflect.h"

#define PEEK_VECS 16 /* input chains looked at per evbuffer_peek */

/* A stream of the body and its last span. */
struct scan {
    struct px_reflect_stream s;
    uint64_t span_end; /* body offset just past its last span */
    uint64_t span_len;
};

struct px_gate {
    struct px_reflect rx;
    struct scan data, aside;
    enum http_body kind;
    uint64_t left;          /* HTTP_BODY_LENGTH: bytes the search has still to see */
    struct http_chunked ch; /* the search's own walk of a chunked body */
    uint64_t searched;      /* body bytes searched */
    uint64_t moved;         /* body bytes taken from the input */
    uint64_t limit;         /* body bytes that may move (UINT64_MAX: all) */
    uint64_t released;      /* ... at least (px_gate_release) */
    bool ended;             /* the search saw the body's end */
};

struct px_gate *px_gate_new(void)
{
    struct px_gate *g = calloc(1, sizeof(*g));

    if (g == NULL)
        abort();
    return g;
}

void px_gate_free(struct px_gate *g)
{
    if (g == NULL)
        return;
    px_reflect_clear(&g->rx);
    explicit_bzero(g, sizeof(*g));
    free(g);
}

void px_gate_add(struct px_gate *g, const char *v, size_t n, int who)
{
    (void)px_reflect_add(&g->rx, v, n, who); /* (full: the forms that fit are searched) */
}

int px_gate_head(struct px_gate *g, const char *p, size_t n)
{
    return px_reflect_feed(&g->rx, &g->data.s, p, n);
}

void px_gate_body_start(struct px_gate *g, enum http_body kind, uint64_t length)
{
    /* (a head ends in CRLF, which no form holds: nothing of it is held) */
    px_reflect_stream_reset(&g->data.s);
    px_reflect_stream_reset(&g->aside.s);
    g->data.span_end = g->data.span_len = g->aside.span_end = g->aside.span_len = 0;
    g->kind = kind;
    g->left = length;
    http_chunked_init(&g->ch);
    g->searched = g->moved = g->limit = g->released = 0;
    g->ended = kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && length == 0);
}

/* Search p[0..n), the next body bytes, as part of stream sc. */
static int feed(struct px_gate *g, struct scan *sc, const char *p, size_t n)
{
    if (sc->span_end == g->searched)
        sc->span_len += n;
    else
        sc->span_len = n;
    g->searched += n;
    sc->span_end = g->searched;
    return px_reflect_feed(&g->rx, &sc->s, p, n);
}

/* Search the next n body bytes at p, as far as the body goes. */
static int search(struct px_gate *g, const char *p, size_t n)
{
    int who = PX_GATE_NONE;

    while (n > 0 && !g->ended && who == PX_GATE_NONE) {
        size_t used = n;
        bool data = true;
        if (g->kind == HTTP_BODY_LENGTH) {
            used = n < g->left ? n : (size_t)g->left;
            g->left -= used;
            g->ended = g->left == 0;
        } else if (g->kind == HTTP_BODY_CHUNKED) {
            enum http_chunked_result r = http_chunked_span(&g->ch, p, n, &used, &data);
            /* broken: the exchange closes when it gets there */
            g->ended = r != HTTP_CHUNKED_MORE;
        }
        who = feed(g, data ? &g->data : &g->aside, p, used);
        p += used;
        n -= used;
    }
    return who;
}

/* Where the bytes held back by stream sc start (a body offset), or
 * UINT64_MAX when it holds none. */
static uint64_t held_from(const struct px_gate *g, const struct scan *sc)
{
    size_t held = px_reflect_held(&g->rx, &sc->s);

    if (held == 0)
        return UINT64_MAX;
    return held <= sc->span_len ? sc->span_end - held : g->limit;
}

/* The new limit after a search that found nothing. */
static void set_limit(struct px_gate *g, bool eof)
{
    if (g->ended || (eof && g->kind == HTTP_BODY_TO_CLOSE)) {
        g->limit = UINT64_MAX;
        return;
    }
    uint64_t a = held_from(g, &g->data), b = held_from(g, &g->aside);
    uint64_t lim = a < b ? a : b;
    g->limit = lim < g->searched ? lim : g->searched;
}

int px_gate_body(struct px_gate *g, struct evbuffer *in, bool eof, uint64_t *allow)
{
    size_t len = evbuffer_get_length(in), off = (size_t)(g->searched - g->moved);
    struct evbuffer_iovec v[PEEK_VECS];
    struct evbuffer_ptr at;
    int who = PX_GATE_NONE;

    while (off < len && !g->ended && who == PX_GATE_NONE) {
        if (evbuffer_ptr_set(in, &at, off, EVBUFFER_PTR_SET) == -1)
            break;
        int k = evbuffer_peek(in, (ev_ssize_t)(len - off), &at, v, PEEK_VECS);
        for (int i = 0; i < k && i < PEEK_VECS && who == PX_GATE_NONE && !g->ended; i++)
            who = search(g, v[i].iov_base, v[i].iov_len);
        off = (size_t)(g->searched - g->moved);
    }
    if (who != PX_GATE_NONE)
        return who;
    set_limit(g, eof);
    uint64_t lim = g->limit > g->released ? g->limit : g->released;
    *allow = lim == UINT64_MAX ? UINT64_MAX : lim - g->moved;
    return PX_GATE_NONE;
}

void px_gate_moved(struct px_gate *g, size_t n)
{
    g->moved += n;
}

void px_gate_release(struct px_gate *g, uint64_t upto)
{
    if (upto > g->released)
        g->released = upto; /* (searched by the px_gate_body that lets them go) */
}
