/*
 * feed.c - see feed.h.
 *
 * How the main loop learns of a new denial: a timer, every TICK_MS while
 * anyone follows, reads the newest denial's number (px_denials_seq, one
 * atomic load) and sends what came since.  The workers that note denials
 * do nothing for it, so they never wait for it.  Making an event of this
 * loop active from px_denials_note or px_denials_flush for every denial
 * would have each of them take this loop's lock (libevent's, with
 * evthread_use_pthreads), which it may have to wait for, and write to its
 * eventfd, on a path as hot as a flood of denied requests.  The timer
 * costs the main thread 1000 / TICK_MS wakeups a second while someone
 * follows, and nothing otherwise; a denial reaches the followers within
 * TICK_MS of the end of its worker's loop round (where its access-log
 * line is written), well inside a second.
 *
 * A burst can fill the global ring (PX_DENIALS_RECENT) faster than that:
 * so every PX_DENIALS_NUDGE_EVERY denials the thread that stored the last
 * of them writes to an eventfd of ours (nudge(); no lock, a write(2) that
 * never blocks, once per PX_DENIALS_NUDGE_EVERY denials), and this loop
 * looks at once.  The ring then wraps unseen only when the main thread
 * falls behind by three times that many.
 *
 * Each look, a denial new to some follower is made into its event text
 * once and added to the buffer of every follower that has not had it,
 * unless that follower already has PX_FEED_OUT_CAP bytes unsent (its
 * connection's output and that buffer): then it is lost to that follower,
 * counted, and told (`event: lost`) before the next thing it is given, or
 * at a tick once it has room again.  A follower that has missed denials
 * because they left the ring (or never got there, denials.h) before it was
 * given them is told the same way.  The buffer goes out as a chunk each
 * CHUNK_MAX and at the end of the look, and is written to the socket at
 * once (px_bev_write_now): so what stays unsent is what the follower has
 * not taken, and a follower that reads as fast as denials come loses none
 * to a look that had many to give.
 *
 * A follower's connection has no read timeout (it only listens) and
 * STALL_S without taking a byte of what waits for it ends it.  When the
 * client goes, evhttp detaches the request from its connection and calls
 * on_close, which forgets the follower and frees the request.
 */
#include "feed.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/keyvalq_struct.h>

#include "bev.h"
#include "denials.h"

#define TICK_MS      100
#define KEEPALIVE_MS (15 * 1000) /* a comment line to an idle follower */
#define STALL_S      60          /* a follower that takes nothing for this long is closed */
#define IN_MAX       4096        /* what a follower sends after its request is not read */
#define BATCH        64          /* denials asked of the global ring at a time */
#define CHUNK_MAX    (64u << 10) /* a follower's buffer goes out once this full */

struct follower {
    struct follower *next, **pprev;
    struct evhttp_request *req;
    struct evbuffer *buf; /* what this look gives it, until it goes out */
    uint64_t last;        /* the newest denial it was given or missed */
    uint64_t lost;        /* missed and not yet told */
    int64_t sent_ms;      /* when it was last sent anything */
};

static struct {
    struct event *tick, *nudged;
    struct follower *list;
    size_t n;
} F;
/* The eventfd nudge() writes to: open from px_feed_start to px_feed_stop
 * (the workers run in between). */
static int nudge_fd = -1;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The bytes f has not taken yet: its connection's output and its
 * buffer. */
static size_t unsent(const struct follower *f)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(f->req);
    size_t n = evbuffer_get_length(f->buf);

    if (evcon == NULL)
        return PX_FEED_OUT_CAP; /* going: give it nothing */
    return n +
           evbuffer_get_length(bufferevent_get_output(evhttp_connection_get_bufferevent(evcon)));
}

/* Send f's buffer as one chunk, written to its socket at once as far as
 * that takes it: so what stays unsent is what f has not taken. */
static void send_chunk(struct follower *f)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(f->req);

    if (evbuffer_get_length(f->buf) == 0 || evcon == NULL)
        return;
    evhttp_send_reply_chunk(f->req, f->buf);
    evbuffer_drain(f->buf, evbuffer_get_length(f->buf)); /* (nothing left, but for a HEAD) */
    px_bev_write_now(evhttp_connection_get_bufferevent(evcon));
    f->sent_ms = now_ms();
}

/* Tell f how many it missed, when it has room for more. */
static void tell_lost(struct follower *f)
{
    if (f->lost == 0 || unsent(f) >= PX_FEED_OUT_CAP)
        return;
    evbuffer_add_printf(f->buf, "event: lost\ndata: {\"lost\":%" PRIu64 "}\n\n", f->lost);
    f->lost = 0;
}

/* Denial number seq (its event text `ev`, len bytes) to f, which has had
 * every one up to f->last: those between were lost to it. */
static void give(struct follower *f, uint64_t seq, const char *ev, size_t len)
{
    f->lost += seq - f->last - 1;
    f->last = seq;
    if (unsent(f) >= PX_FEED_OUT_CAP) {
        f->lost++;
        return;
    }
    tell_lost(f);
    evbuffer_add(f->buf, ev, len);
    if (evbuffer_get_length(f->buf) >= CHUNK_MAX)
        send_chunk(f);
}

/* Denial o (a JSON object of the global ring) to every follower that has
 * not had it; its number. */
static uint64_t give_all(json_t *o)
{
    uint64_t seq = (uint64_t)json_integer_value(json_object_get(o, "seq"));
    char *data = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *ev = NULL;
    int len = data != NULL
                  ? asprintf(&ev, "id: %" PRIu64 "\nevent: denial\ndata: %s\n\n", seq, data)
                  : -1;

    if (len < 0)
        abort();
    for (struct follower *f = F.list; f != NULL; f = f->next)
        if (f->last < seq)
            give(f, seq, ev, (size_t)len);
    free(ev);
    free(data);
    return seq;
}

/* The end of a look: f's buffer goes out, or a keepalive comment when f
 * has been sent nothing for KEEPALIVE_MS. */
static void send_rest(struct follower *f, int64_t now)
{
    if (evbuffer_get_length(f->buf) == 0 && now - f->sent_ms >= KEEPALIVE_MS &&
        unsent(f) < PX_FEED_OUT_CAP)
        evbuffer_add(f->buf, ": keepalive\n\n", 13);
    send_chunk(f);
}

/* Give every follower the denials up to the newest that it has not had,
 * and send them. */
static void round_once(void)
{
    uint64_t top = px_denials_seq(), lo = top;
    json_t *batch[BATCH];
    size_t n;
    int64_t now = now_ms();

    for (struct follower *f = F.list; f != NULL; f = f->next)
        lo = f->last < lo ? f->last : lo;
    /* after give_all(o), every follower has had (or missed) o and those before */
    while (lo < top && (n = px_denials_after(lo, top, batch, BATCH)) > 0)
        for (size_t i = 0; i < n; i++) {
            lo = give_all(batch[i]);
            json_decref(batch[i]);
        }
    for (struct follower *f = F.list; f != NULL; f = f->next) {
        if (f->last < top) { /* left the ring before it was given them */
            f->lost += top - f->last;
            f->last = top;
        }
        tell_lost(f);
        send_rest(f, now);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct timeval tv = {TICK_MS / 1000, (TICK_MS % 1000) * 1000};
    (void)fd, (void)what, (void)arg;

    round_once();
    if (F.n > 0)
        evtimer_add(F.tick, &tv);
}

/* Called by a worker, every PX_DENIALS_NUDGE_EVERY denials. */
static void nudge(void)
{
    uint64_t one = 1;

    if (write(nudge_fd, &one, sizeof(one)) == -1) {
        /* never blocks (EFD_NONBLOCK); it could fail only with a look due */
    }
}

static void on_nudge(evutil_socket_t fd, short what, void *arg)
{
    uint64_t n;
    (void)what, (void)arg;

    if (read(fd, &n, sizeof(n)) == (ssize_t)sizeof(n))
        round_once();
}

static void link_follower(struct follower *f)
{
    f->next = F.list;
    if (F.list != NULL)
        F.list->pprev = &f->next;
    F.list = f;
    f->pprev = &F.list;
    if (F.n++ == 0)
        px_denials_set_nudge(nudge);
}

static void unlink_follower(struct follower *f)
{
    *f->pprev = f->next;
    if (f->next != NULL)
        f->next->pprev = f->pprev;
    if (--F.n == 0) {
        px_denials_set_nudge(NULL);
        evtimer_del(F.tick);
    }
}

static void free_follower(struct follower *f)
{
    evbuffer_free(f->buf);
    free(f);
}

/* f's client has gone: evhttp detached the request (ours to free now) and
 * frees the connection. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
    struct follower *f = arg;

    (void)evcon;
    unlink_follower(f);
    if (evhttp_request_get_connection(f->req) == NULL)
        evhttp_send_reply_end(f->req); /* frees it */
    free_follower(f);
}

void px_feed_start(struct event_base *base)
{
    memset(&F, 0, sizeof(F));
    nudge_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    F.tick = evtimer_new(base, on_tick, NULL);
    F.nudged = event_new(base, nudge_fd, EV_READ | EV_PERSIST, on_nudge, NULL);
    if (nudge_fd == -1 || F.tick == NULL || F.nudged == NULL || event_add(F.nudged, NULL) == -1)
        abort();
}

/* The stream's head, and f's connection set up for a long reply. */
static void start_stream(struct follower *f)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(f->req);
    struct timeval stall = {STALL_S, 0};

    evhttp_add_header(h, "Content-Type", "text/event-stream");
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_send_reply_start(f->req, 200, "OK");
    struct evhttp_connection *evcon = evhttp_request_get_connection(f->req);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    evhttp_connection_set_closecb(evcon, on_close, f);
    bufferevent_set_timeouts(bev, NULL, &stall);
    bufferevent_setwatermark(bev, EV_READ, 0, IN_MAX);
    evbuffer_add_printf(f->buf, ": following denials after %" PRIu64 "\n\n", f->last);
}

int px_feed_follow(struct evhttp_request *req, bool has_since, uint64_t since)
{
    uint64_t top = px_denials_seq();
    struct follower *f;

    if (F.n >= PX_FEED_MAX || evhttp_request_get_connection(req) == NULL)
        return -1;
    f = calloc(1, sizeof(*f));
    if (f == NULL || (f->buf = evbuffer_new()) == NULL)
        abort();
    f->req = req;
    f->last = !has_since ? top : since > top ? 0 : since;
    f->sent_ms = now_ms();
    start_stream(f);
    link_follower(f);
    event_active(F.tick, EV_TIMEOUT, 0); /* its head and what it asked for, now */
    return 0;
}

void px_feed_stop(void)
{
    if (F.tick == NULL)
        return;
    round_once(); /* the workers have stopped: every denial is in the ring */
    while (F.list != NULL) {
        struct follower *f = F.list;
        struct evhttp_connection *evcon = evhttp_request_get_connection(f->req);
        unlink_follower(f);
        if (evcon != NULL) {
            struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
            evhttp_connection_set_closecb(evcon, NULL, NULL);
            evhttp_send_reply_end(f->req);
            px_bev_write_now(bev); /* the loop will not run again to write it */
        } else {
            evhttp_send_reply_end(f->req);
        }
        free_follower(f);
    }
    event_free(F.tick);
    event_free(F.nudged);
    close(nudge_fd);
    nudge_fd = -1;
    memset(&F, 0, sizeof(F));
}
