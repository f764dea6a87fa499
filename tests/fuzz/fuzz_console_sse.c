/*
 * fuzz_console_sse.c - the console's reader of egressd's denial stream
 * (sandbox-orchestrator/console/sse.c), whose bytes come from the network.
 *
 * The first byte picks the size of the pieces the rest is fed in (1..32
 * bytes, or all at once for 0).  Properties:
 *   - the events read are exactly those of a reference reader written
 *     here the other way round: the whole input cut into lines first (CR
 *     LF, LF, CR), then each line taken as the standard says, with the
 *     same caps;
 *   - so the pieces never change what is read (a CR LF split across two
 *     pieces is one line end);
 *   - every event's data is at most SBX_SSE_LINE_MAX bytes, its name and
 *     id within their caps.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "sse.h"

#define EVENTS_MAX 4096

struct event {
    char name[SBX_SSE_NAME_MAX + 1];
    char id[SBX_SSE_ID_MAX + 1];
    char *data;
    size_t len;
};

struct events {
    struct event e[EVENTS_MAX];
    size_t n;
};

static void add(struct events *ev, const char *name, const char *id, const char *data, size_t len)
{
    if (ev->n == EVENTS_MAX)
        return;
    struct event *e = &ev->e[ev->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->id, sizeof e->id, "%s", id);
    e->data = malloc(len + 1);
    memcpy(e->data, data, len);
    e->data[len] = '\0';
    e->len = len;
}

static void on_event(void *arg, const char *event, const char *data, size_t len, const char *id)
{
    CHECK(len <= SBX_SSE_LINE_MAX, "data of %zu bytes", len);
    CHECK(strlen(event) <= SBX_SSE_NAME_MAX && strlen(id) <= SBX_SSE_ID_MAX, "name or id too long");
    add(arg, event, id, data, len);
}

/* The reference: lines first, then fields. */
static void reference(const uint8_t *p, size_t n, struct events *ev)
{
    char name[SBX_SSE_NAME_MAX + 1] = "", id[SBX_SSE_ID_MAX + 1] = "";
    char *data = malloc(SBX_SSE_LINE_MAX + 1);
    size_t dlen = 0;
    bool has = false, spoiled = false;
    size_t start = 0;

    for (size_t i = 0; i < n; i++) {
        if (p[i] != '\r' && p[i] != '\n')
            continue;
        const char *l = (const char *)p + start;
        size_t len = i - start;
        if (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n')
            i++;
        start = i + 1;
        if (len > SBX_SSE_LINE_MAX) {
            spoiled = true;
            continue;
        }
        if (len == 0) {
            if (!spoiled && has)
                add(ev, name[0] ? name : "message", id, data, dlen);
            name[0] = '\0';
            dlen = 0;
            has = spoiled = false;
            continue;
        }
        const char *colon = memchr(l, ':', len);
        size_t fl = colon ? (size_t)(colon - l) : len;
        const char *v = colon ? colon + 1 : l + len;
        size_t vl = colon ? len - fl - 1 : 0;
        if (fl == 0)
            continue;
        if (vl && *v == ' ')
            v++, vl--;
        if (fl == 4 && !memcmp(l, "data", 4)) {
            if (dlen + vl + (has ? 1 : 0) > SBX_SSE_LINE_MAX) {
                spoiled = true;
                continue;
            }
            if (has)
                data[dlen++] = '\n';
            memcpy(data + dlen, v, vl);
            dlen += vl;
            has = true;
        } else if (fl == 5 && !memcmp(l, "event", 5)) {
            if (vl > SBX_SSE_NAME_MAX || memchr(v, 0, vl))
                spoiled = true;
            else
                snprintf(name, sizeof name, "%.*s", (int)vl, v);
        } else if (fl == 2 && !memcmp(l, "id", 2) && !memchr(v, 0, vl)) {
            if (vl > SBX_SSE_ID_MAX)
                spoiled = true;
            else
                snprintf(id, sizeof id, "%.*s", (int)vl, v);
        }
    }
    free(data);
}

static void clear(struct events *ev)
{
    for (size_t i = 0; i < ev->n; i++)
        free(ev->e[i].data);
    ev->n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct events got, want;
    struct sbx_sse r;

    if (size < 1)
        return 0;
    size_t step = data[0] % 33;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    sbx_sse_init(&r, on_event, &got);
    if (step == 0)
        sbx_sse_feed(&r, (const char *)p, n);
    for (size_t i = 0; step && i < n; i += step)
        sbx_sse_feed(&r, (const char *)p + i, n - i < step ? n - i : step);
    sbx_sse_free(&r);
    reference(p, n, &want);
    CHECK(got.n == want.n, "%zu events read, the reference reads %zu", got.n, want.n);
    for (size_t i = 0; i < got.n; i++) {
        CHECK(strcmp(got.e[i].name, want.e[i].name) == 0, "event %zu: name '%s' != '%s'", i,
              got.e[i].name, want.e[i].name);
        CHECK(strcmp(got.e[i].id, want.e[i].id) == 0, "event %zu: id '%s' != '%s'", i, got.e[i].id,
              want.e[i].id);
        CHECK(got.e[i].len == want.e[i].len && !memcmp(got.e[i].data, want.e[i].data, got.e[i].len),
              "event %zu: data differs", i);
    }
    clear(&got);
    clear(&want);
    return 0;
}
