/* streams.c - GET /api/denials/stream: the denials a person may see, live,
 * as server-sent events, one `denials` event per batch:
 *   id: CSEQ
 *   event: denials
 *   data: [{...}, ...]
 * and `event: lost` with {"lost": N} when the stream fell behind the
 * ring.  A stream with nothing to send waits suspended (it holds no
 * thread); a pump thread resumes the waiting ones at most every BATCH_MS
 * when denials came, and every KEEPALIVE_MS for a comment (which also
 * tells a closed browser from a quiet one).  At most STREAMS_MAX streams,
 * each holding at most one batch (BATCH_MAX denials) while it is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "pve.h" /* sbx_now_ms */

#define STREAMS_MAX  64
#define BATCH_MAX    64
#define BATCH_MS     200
#define KEEPALIVE_MS 15000
#define BLOCK_SIZE   (32 * 1024)

struct stream {
    struct stream *next, **pprev;
    struct sbx_streams *st;
    struct MHD_Connection *conn;
    char owner[129];
    bool admin;
    uint64_t after;
    bool waiting; /* suspended */
    long sent_ms;
    char *out; /* an event being written */
    size_t out_len, out_off;
};

struct sbx_streams {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct sbx_denials *d;
    struct stream *all;
    int n;
    bool came; /* denials came since the pump last looked */
    bool ending;
    pthread_t pump;
};

void sbx_streams_wake(void *arg)
{
    struct sbx_streams *st = arg;

    pthread_mutex_lock(&st->lock);
    st->came = true;
    pthread_cond_signal(&st->cond);
    pthread_mutex_unlock(&st->lock);
}

/* Resume every waiting stream (all: also those with nothing new, for
 * their keepalive).  Called with the lock held. */
static void resume_waiting(struct sbx_streams *st, bool all)
{
    long now = sbx_now_ms();

    for (struct stream *s = st->all; s; s = s->next) {
        if (s->waiting && (all || st->ending || now - s->sent_ms >= KEEPALIVE_MS)) {
            s->waiting = false;
            MHD_resume_connection(s->conn);
        }
    }
}

static void *pump(void *arg)
{
    struct sbx_streams *st = arg;

    pthread_mutex_lock(&st->lock);
    while (!st->ending) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (!st->came)
            pthread_cond_timedwait(&st->cond, &st->lock, &until);
        if (st->ending)
            break;
        bool came = st->came;
        st->came = false;
        resume_waiting(st, came);
        /* Batch: whatever comes in the next BATCH_MS goes out together. */
        pthread_mutex_unlock(&st->lock);
        struct timespec nap = {0, BATCH_MS * 1000000L};
        nanosleep(&nap, NULL);
        pthread_mutex_lock(&st->lock);
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

struct sbx_streams *sbx_streams_new(struct sbx_denials *d)
{
    struct sbx_streams *st = calloc(1, sizeof *st);

    if (!st)
        abort();
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->cond, NULL);
    st->d = d;
    if (pthread_create(&st->pump, NULL, pump, st))
        abort();
    return st;
}

void sbx_streams_attach(struct sbx_streams *st, struct sbx_denials *d)
{
    pthread_mutex_lock(&st->lock);
    st->d = d;
    pthread_mutex_unlock(&st->lock);
}

void sbx_streams_end_all(struct sbx_streams *st)
{
    pthread_mutex_lock(&st->lock);
    bool first = !st->ending;
    st->ending = true;
    pthread_cond_signal(&st->cond);
    resume_waiting(st, true);
    pthread_mutex_unlock(&st->lock);
    if (first)
        pthread_join(st->pump, NULL);
    /* Each resumed stream ends at its next write; wait for them (bounded). */
    for (int i = 0; i < 50; i++) {
        pthread_mutex_lock(&st->lock);
        int n = st->n;
        pthread_mutex_unlock(&st->lock);
        if (n == 0)
            break;
        sbx_msleep(20);
    }
}

void sbx_streams_free(struct sbx_streams *st)
{
    if (!st)
        return;
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* A batch's data line being written: "[" TEXT "," TEXT ... */
struct batch {
    FILE *f;
    size_t n;
};

/* Add one denial's text to the batch: the ring keeps each as compact JSON
 * text, so a batch is made by copying, never by parsing again. */
static void add_text(void *arg, const char *text)
{
    struct batch *b = arg;

    fputs(b->n++ ? "," : "[", b->f);
    fputs(text, b->f);
}

/* The next events for s into s->out (a lost event, then a batch; a
 * keepalive comment when there is neither and one is due), or nothing.
 * Lock held. */
static void next_event(struct stream *s)
{
    struct sbx_denials_view view = {s->admin ? NULL : s->owner};
    struct batch b = {0};
    char *data = NULL, *text = NULL;
    size_t data_len = 0, text_len = 0;
    uint64_t lost = 0;

    b.f = open_memstream(&data, &data_len);
    if (!b.f)
        abort();
    sbx_denials_each(s->st->d, &view, &s->after, BATCH_MAX, add_text, &b, &lost);
    if (b.n > 0)
        fputc(']', b.f);
    fclose(b.f);
    FILE *o = open_memstream(&text, &text_len);
    if (!o)
        abort();
    if (lost > 0)
        fprintf(o, "event: lost\ndata: {\"lost\":%llu}\n\n", (unsigned long long)lost);
    if (b.n > 0)
        fprintf(o, "id: %llu\nevent: denials\ndata: %s\n\n", (unsigned long long)s->after, data);
    if (lost == 0 && b.n == 0 && sbx_now_ms() - s->sent_ms >= KEEPALIVE_MS)
        fputs(": keepalive\n\n", o);
    fclose(o);
    free(data);
    if (text_len == 0) {
        free(text);
        text = NULL;
    }
    s->out = text;
    s->out_len = text_len;
    s->out_off = 0;
}

static ssize_t on_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *s = cls;
    struct sbx_streams *st = s->st;

    (void)pos;
    pthread_mutex_lock(&st->lock);
    if (!s->out && !st->ending)
        next_event(s);
    if (!s->out) {
        bool end = st->ending;
        if (!end) {
            s->waiting = true;
            MHD_suspend_connection(s->conn);
        }
        pthread_mutex_unlock(&st->lock);
        return end ? MHD_CONTENT_READER_END_OF_STREAM : 0;
    }
    size_t n = s->out_len - s->out_off < max ? s->out_len - s->out_off : max;
    memcpy(buf, s->out + s->out_off, n);
    s->out_off += n;
    if (s->out_off == s->out_len) {
        free(s->out);
        s->out = NULL;
        s->sent_ms = sbx_now_ms();
    }
    pthread_mutex_unlock(&st->lock);
    return (ssize_t)n;
}

static void on_free(void *cls)
{
    struct stream *s = cls;
    struct sbx_streams *st = s->st;

    pthread_mutex_lock(&st->lock);
    *s->pprev = s->next;
    if (s->next)
        s->next->pprev = s->pprev;
    st->n--;
    pthread_mutex_unlock(&st->lock);
    free(s->out);
    free(s);
}

enum MHD_Result sbx_streams_open(struct sbx_request *r, uint64_t after)
{
    struct sbx_streams *st = r->con->streams;
    struct stream *s = calloc(1, sizeof *s);

    if (!s)
        abort();
    s->st = st;
    s->conn = r->conn;
    s->admin = r->session.admin;
    snprintf(s->owner, sizeof s->owner, "%s", r->session.owner);
    s->after = after ? after : sbx_denials_seq(st->d);
    s->sent_ms = sbx_now_ms();
    pthread_mutex_lock(&st->lock);
    if (st->n >= STREAMS_MAX || st->ending) {
        pthread_mutex_unlock(&st->lock);
        free(s);
        return sbx_web_error(r, 503, "too many live streams are open: close a console tab");
    }
    s->next = st->all;
    if (st->all)
        st->all->pprev = &s->next;
    s->pprev = &st->all;
    st->all = s;
    st->n++;
    pthread_mutex_unlock(&st->lock);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BLOCK_SIZE, on_read, s, on_free);
    MHD_add_response_header(resp, "Content-Type", "text/event-stream; charset=utf-8");
    return sbx_web_queue(r, 200, resp);
}
