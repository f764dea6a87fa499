/* sse.c - see sse.h. */
#include "sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbx_sse_init(struct sbx_sse *r, sbx_sse_fn fn, void *arg)
{
    memset(r, 0, sizeof *r);
    r->fn = fn;
    r->arg = arg;
    r->data = malloc(SBX_SSE_LINE_MAX + 1);
    if (!r->data)
        abort();
}

void sbx_sse_free(struct sbx_sse *r)
{
    free(r->data);
    r->data = NULL;
}

/* A blank line: hand over the event being read, if it has data (the
 * standard drops an event without), and start the next. */
static void dispatch(struct sbx_sse *r)
{
    if (r->spoiled)
        r->dropped++;
    else if (r->has_data) {
        r->data[r->data_len] = '\0';
        r->fn(r->arg, r->event[0] ? r->event : "message", r->data, r->data_len, r->id);
    }
    r->event[0] = '\0';
    r->data_len = 0;
    r->has_data = false;
    r->spoiled = false;
}

/* Add a data line to the event (LF between lines). */
static void add_data(struct sbx_sse *r, const char *v, size_t n)
{
    size_t need = n + (r->has_data ? 1 : 0);

    if (r->data_len + need > SBX_SSE_LINE_MAX) {
        r->spoiled = true;
        return;
    }
    if (r->has_data)
        r->data[r->data_len++] = '\n';
    memcpy(r->data + r->data_len, v, n);
    r->data_len += n;
    r->has_data = true;
}

/* One whole line (without its end). */
static void line(struct sbx_sse *r, const char *l, size_t n)
{
    const char *colon = memchr(l, ':', n);
    size_t name_len = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vlen = colon ? n - name_len - 1 : 0;

    if (n == 0) {
        dispatch(r);
        return;
    }
    if (name_len == 0) /* a comment */
        return;
    if (vlen > 0 && v[0] == ' ') {
        v++;
        vlen--;
    }
    if (name_len == 4 && memcmp(l, "data", 4) == 0)
        add_data(r, v, vlen);
    else if (name_len == 5 && memcmp(l, "event", 5) == 0) {
        if (vlen > SBX_SSE_NAME_MAX || memchr(v, '\0', vlen))
            r->spoiled = true;
        else
            snprintf(r->event, sizeof r->event, "%.*s", (int)vlen, v);
    } else if (name_len == 2 && memcmp(l, "id", 2) == 0 && !memchr(v, '\0', vlen)) {
        if (vlen > SBX_SSE_ID_MAX)
            r->spoiled = true;
        else
            snprintf(r->id, sizeof r->id, "%.*s", (int)vlen, v);
    }
}

/* A line has ended at the current byte. */
static void end_line(struct sbx_sse *r)
{
    if (r->line_over)
        r->spoiled = true;
    else
        line(r, r->line, r->line_len);
    r->line_len = 0;
    r->line_over = false;
}

void sbx_sse_feed(struct sbx_sse *r, const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = buf[i];
        if (c == '\n' && r->after_cr) {
            r->after_cr = false;
            continue;
        }
        r->after_cr = c == '\r';
        if (c == '\n' || c == '\r') {
            end_line(r);
            continue;
        }
        if (r->line_len == sizeof r->line)
            r->line_over = true;
        else
            r->line[r->line_len++] = c;
    }
}
