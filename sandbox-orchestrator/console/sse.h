/* sse.h - a reader of server-sent events (text/event-stream, as the HTML
 * standard defines it): bytes in, whole events out.  No I/O: the console
 * feeds it what egressd's denial stream sends.
 *
 * Lines end in LF, CR LF or CR; a blank line ends an event; "event",
 * "data" (several join with LF) and "id" are kept, comments and other
 * fields are skipped, one space after the colon is dropped.  Bounded: a
 * line longer than SBX_SSE_LINE_MAX spoils its event, which is dropped
 * whole at its end and counted, never cut and passed on.
 */
#ifndef SBX_CONSOLE_SSE_H
#define SBX_CONSOLE_SSE_H

#include <stdbool.h>
#include <stddef.h>

#define SBX_SSE_LINE_MAX (64 * 1024)
#define SBX_SSE_NAME_MAX 64
#define SBX_SSE_ID_MAX   64

/* One event: event is "message" when the stream named none. */
typedef void (*sbx_sse_fn)(void *arg, const char *event, const char *data, size_t data_len,
                           const char *id);

struct sbx_sse {
    sbx_sse_fn fn;
    void *arg;
    char line[SBX_SSE_LINE_MAX];
    size_t line_len;
    bool line_over; /* this line is longer than the buffer */
    bool after_cr;  /* the last byte was CR: an LF next is part of it */
    char event[SBX_SSE_NAME_MAX + 1];
    char id[SBX_SSE_ID_MAX + 1];
    char *data; /* SBX_SSE_LINE_MAX + 1 bytes */
    size_t data_len;
    bool has_data;
    bool spoiled;          /* a line of this event was too long */
    unsigned long dropped; /* events dropped for that */
};

/* Start reading; fn(arg, ...) hears each event. */
void sbx_sse_init(struct sbx_sse *r, sbx_sse_fn fn, void *arg);
void sbx_sse_free(struct sbx_sse *r);

/* Read n more bytes of the stream. */
void sbx_sse_feed(struct sbx_sse *r, const char *buf, size_t n);

#endif
