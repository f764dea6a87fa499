/* denials.c - see denials.h. */
#include "denials.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "pve.h" /* sbx_msleep, sbx_now_ms */
#include "sse.h"
#include "tally.h"

#define STREAM_PATH      "/v1/denials?follow=1"
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS   10000
#define NAMES_MAX        1024 /* sandboxes whose name and owner a source remembers */
#define NAME_RETRY_MS    5000 /* a binding that could not be read is asked again after */

/* One kept denial. */
struct entry {
    uint64_t seq;
    char owner[129];
    char *text; /* the denial as a JSON object's text */
};

/* What a source knows of a sandbox from its binding. */
struct sandbox_name {
    char id[32];
    char name[129];
    char owner[129];
    long asked_ms;
    bool known;
};

/* One egressd's stream. */
struct source {
    struct sbx_denials *hub;
    const char *target;
    pthread_t thread;
    struct sbx_sse sse;
    char last_id[SBX_SSE_ID_MAX + 1];
    struct sandbox_name names[NAMES_MAX];
    size_t nnames;
    /* read by sbx_denials_sources under the hub's lock */
    bool connected;
    char error[256];
    unsigned long received;
    unsigned long lost; /* denials egressd said this reader missed */
};

struct sbx_denials {
    pthread_mutex_t lock;
    const struct sbx_config *cfg;
    void (*wake)(void *);
    void *wake_arg;
    volatile bool stop;
    struct entry ring[SBX_DENIALS_RING];
    uint64_t seq;
    struct source *src;
    int nsrc;
};

void sbx_denials_keep(struct sbx_denials *d, const char *source, json_t *denial, const char *name,
                      const char *owner)
{
    json_object_set_new(denial, "egressd", json_string(source));
    json_object_set_new(denial, "name", name ? json_string(name) : json_null());
    json_object_set_new(denial, "owner", owner ? json_string(owner) : json_null());
    pthread_mutex_lock(&d->lock);
    uint64_t seq = ++d->seq;
    json_object_set_new(denial, "cseq", json_integer((json_int_t)seq));
    char *text = json_dumps(denial, JSON_COMPACT);
    if (text && strlen(text) > SBX_DENIAL_TEXT_MAX) {
        free(text);
        text = NULL; /* kept as a gap: readers skip it */
    }
    struct entry *e = &d->ring[seq % SBX_DENIALS_RING];
    free(e->text);
    e->seq = seq;
    e->text = text;
    snprintf(e->owner, sizeof e->owner, "%s", owner ? owner : "");
    pthread_mutex_unlock(&d->lock);
    if (d->wake)
        d->wake(d->wake_arg);
}

uint64_t sbx_denials_seq(struct sbx_denials *d)
{
    pthread_mutex_lock(&d->lock);
    uint64_t s = d->seq;
    pthread_mutex_unlock(&d->lock);
    return s;
}

/* Whether view may see e. */
static bool visible(const struct entry *e, const struct sbx_denials_view *view)
{
    return !view->owner || (e->owner[0] && strcmp(e->owner, view->owner) == 0);
}

size_t sbx_denials_each(struct sbx_denials *d, const struct sbx_denials_view *view, uint64_t *after,
                        size_t max, sbx_denial_fn fn, void *arg, uint64_t *lost)
{
    size_t n = 0;

    pthread_mutex_lock(&d->lock);
    uint64_t oldest = d->seq >= SBX_DENIALS_RING ? d->seq - SBX_DENIALS_RING + 1 : 1;
    if (lost)
        *lost = *after + 1 < oldest ? oldest - *after - 1 : 0;
    if (*after + 1 < oldest)
        *after = oldest - 1;
    if (*after > d->seq) /* a number from before a restart */
        *after = d->seq;
    while (*after < d->seq && n < max) {
        const struct entry *e = &d->ring[(*after + 1) % SBX_DENIALS_RING];
        ++*after;
        if (!e->text || !visible(e, view))
            continue;
        fn(arg, e->text);
        n++;
    }
    pthread_mutex_unlock(&d->lock);
    return n;
}

/* Append a denial's text to the JSON array arg, parsed. */
static void append_parsed(void *arg, const char *text)
{
    json_t *j = json_loads(text, 0, NULL);

    if (j)
        json_array_append_new(arg, j);
}

size_t sbx_denials_read(struct sbx_denials *d, const struct sbx_denials_view *view, uint64_t *after,
                        size_t max, json_t *out, uint64_t *lost)
{
    return sbx_denials_each(d, view, after, max, append_parsed, out, lost);
}

/* Keep a denial's text (copied: the ring may change once unlocked). */
static void keep_text(void *arg, const char *text)
{
    json_array_append_new(arg, json_string(text));
}

json_t *sbx_denials_top(struct sbx_denials *d, const struct sbx_denials_view *view, size_t k)
{
    json_t *texts = json_array(), *counts = json_object(), *t;
    uint64_t after = 0;
    size_t i;

    /* Copied under the hub's lock, parsed after it: the reader thread and
     * every stream wait on that lock. */
    sbx_denials_each(d, view, &after, SBX_DENIALS_RING, keep_text, texts, NULL);
    json_array_foreach(texts, i, t)
    {
        json_t *j = json_loads(json_string_value(t), 0, NULL);
        const char *sb = json_string_value(json_object_get(j, "sandbox"));
        char hp[300];
        if (sb && sbx_tally_host_port(j, hp, sizeof hp))
            sbx_tally_add(counts, sb, hp);
        json_decref(j);
    }
    json_decref(texts);
    json_t *out = sbx_tally_top(counts, k);
    json_decref(counts);
    return out;
}

json_t *sbx_denials_sources(struct sbx_denials *d)
{
    json_t *a = json_array();

    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->nsrc; i++) {
        const struct source *s = &d->src[i];
        json_array_append_new(a, json_pack("{s:s, s:b, s:s?, s:I, s:I}", "egressd", s->target,
                                           "connected", s->connected, "error",
                                           s->error[0] ? s->error : NULL, "received",
                                           (json_int_t)s->received, "lost", (json_int_t)s->lost));
    }
    pthread_mutex_unlock(&d->lock);
    return a;
}

/* The name and owner of sandbox id, from this egressd's binding (asked
 * once; again after NAME_RETRY_MS when it could not be read).  NULL when
 * unknown. */
static const struct sandbox_name *sandbox_of(struct source *s, const char *id)
{
    struct sandbox_name *n = NULL;
    long now = sbx_now_ms();

    for (size_t i = 0; i < s->nnames && !n; i++)
        if (strcmp(s->names[i].id, id) == 0)
            n = &s->names[i];
    if (n && (n->known || now - n->asked_ms < NAME_RETRY_MS))
        return n->known ? n : NULL;
    if (!n) {
        n = &s->names[s->nnames < NAMES_MAX ? s->nnames++ : (size_t)now % NAMES_MAX];
        memset(n, 0, sizeof *n);
        snprintf(n->id, sizeof n->id, "%s", id);
    }
    n->asked_ms = now;
    char path[96], err[256], *eid = sbx_pve_escape(id);
    json_t *b = NULL;
    snprintf(path, sizeof path, "/v1/sandboxes/%s", eid);
    free(eid);
    if (sbx_egress_get(s->hub->cfg, s->target, path, &b, err, sizeof err) == 0) {
        const char *name = json_string_value(json_object_get(b, "name"));
        const char *owner = json_string_value(json_object_get(b, "owner"));
        snprintf(n->name, sizeof n->name, "%s", name ? name : "");
        snprintf(n->owner, sizeof n->owner, "%s", owner ? owner : "");
        n->known = owner != NULL;
    }
    json_decref(b);
    return n->known ? n : NULL;
}

/* One event of the stream. */
static void on_event(void *arg, const char *event, const char *data, size_t len, const char *id)
{
    struct source *s = arg;
    json_t *j;

    snprintf(s->last_id, sizeof s->last_id, "%s", id);
    if (!(j = json_loadb(data, len, 0, NULL)))
        return;
    if (strcmp(event, "lost") == 0) {
        /* egressd could not give this reader some denials: count them, for
         * the page to say (GET /api/sources). */
        json_int_t n = json_integer_value(json_object_get(j, "lost"));
        pthread_mutex_lock(&s->hub->lock);
        s->lost += n > 0 ? (unsigned long)n : 0;
        pthread_mutex_unlock(&s->hub->lock);
    }
    if (strcmp(event, "denial") != 0) {
        json_decref(j);
        return;
    }
    const char *sb = json_string_value(json_object_get(j, "sandbox"));
    const struct sandbox_name *n = sb && strlen(sb) < 32 ? sandbox_of(s, sb) : NULL;
    if (json_is_object(j)) {
        pthread_mutex_lock(&s->hub->lock);
        s->received++;
        pthread_mutex_unlock(&s->hub->lock);
        sbx_denials_keep(s->hub, s->target, j, n ? n->name : NULL, n ? n->owner : NULL);
    }
    json_decref(j);
}

static int on_bytes(void *arg, const char *buf, size_t n)
{
    struct source *s = arg;

    if (s->hub->stop)
        return 1;
    if (buf && !s->connected) {
        pthread_mutex_lock(&s->hub->lock);
        s->connected = true;
        s->error[0] = '\0';
        pthread_mutex_unlock(&s->hub->lock);
    }
    if (buf)
        sbx_sse_feed(&s->sse, buf, n);
    return 0;
}

/* Sleep ms, or less when the hub stops. */
static void nap(struct sbx_denials *d, long ms)
{
    for (long slept = 0; slept < ms && !d->stop; slept += 100)
        sbx_msleep(100);
}

static void *follow(void *arg)
{
    struct source *s = arg;
    long backoff = BACKOFF_FIRST_MS;
    char err[256];

    while (!s->hub->stop) {
        sbx_sse_init(&s->sse, on_event, s);
        int rc = sbx_egress_stream(s->hub->cfg, s->target, STREAM_PATH, s->last_id, on_bytes, s,
                                   err, sizeof err);
        sbx_sse_free(&s->sse);
        pthread_mutex_lock(&s->hub->lock);
        if (rc == 0 && s->connected)
            backoff = BACKOFF_FIRST_MS;
        s->connected = false;
        snprintf(s->error, sizeof s->error, "%s", err);
        pthread_mutex_unlock(&s->hub->lock);
        nap(s->hub, backoff);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    return NULL;
}

struct sbx_denials *sbx_denials_start(const struct sbx_config *c, void (*wake)(void *), void *arg)
{
    struct sbx_denials *d = calloc(1, sizeof *d);

    if (!d || !(d->src = calloc(c->negress ? c->negress : 1, sizeof *d->src)))
        abort();
    pthread_mutex_init(&d->lock, NULL);
    d->cfg = c;
    d->wake = wake;
    d->wake_arg = arg;
    for (int i = 0; i < c->negress; i++) {
        struct source *s = &d->src[d->nsrc];
        s->hub = d;
        s->target = c->egress[i];
        if (pthread_create(&s->thread, NULL, follow, s) == 0)
            d->nsrc++;
    }
    return d;
}

void sbx_denials_stop(struct sbx_denials *d)
{
    if (!d)
        return;
    d->stop = true;
    for (int i = 0; i < d->nsrc; i++)
        pthread_join(d->src[i].thread, NULL);
    for (size_t i = 0; i < SBX_DENIALS_RING; i++)
        free(d->ring[i].text);
    pthread_mutex_destroy(&d->lock);
    free(d->src);
    free(d);
}
