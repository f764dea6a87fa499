/*
 * dnstcp.c - the policy DNS server over TCP (RFC 7766), per worker: its
 * listeners and the table of its connections.  Several queries ride one
 * connection, each framed by its two-byte length, and are answered as
 * they are ready.  Every resource a client can make egressd hold is
 * bounded:
 *
 *   accept ─▶ a source without a binding: closed at once
 *          ─▶ its source holds TCP_CONNS_PER_SOURCE here: its own least
 *             recently active idle connection goes (none idle: refused)
 *          ─▶ the table holds TCP_CONNS_MAX: the least recently active idle
 *             connection goes (none idle: refused)
 *   read   ─▶ only while fewer than TCP_PIPELINE_MAX queries are owed
 *             (waiting for the resolver, or answered but not all written)
 *             and fewer than TCP_OUT_MAX bytes wait to be written: a client
 *             that does not read its answers stops being read
 *   time   ─▶ the first answer within TCP_FIRST_S, the next within
 *             TCP_IDLE_S of the last; TCP_IDLE_S without any write
 *             progress while answers wait; TCP_LIFE_S in all
 *
 * "Idle" is a connection owed nothing: no query waits and every answer is
 * written, whatever bytes of a query it has begun.  What to read is
 * derived from those counts (rewatch()), never kept in a flag.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "dns.h"
#include "dnsd.h"
#include "egressd.h"
#include "world.h"

/* The first answer's deadline from the accept: a client that connects
 * sends its query at once. */
#define TCP_FIRST_S 3
/* Without an answer or without write progress this long, a connection
 * closes (RFC 7766 §6.2.3 suggests seconds, not minutes). */
#define TCP_IDLE_S 10
/* A connection's whole life: a client that keeps one busy opens another. */
#define TCP_LIFE_S 60
/* Queries owed at once on a connection; past that it is not read. */
#define TCP_PIPELINE_MAX 16
/* Answer bytes waiting to be written; past that the connection is not
 * read (an answer is at most 64 KiB, a usual one under 200 bytes). */
#define TCP_OUT_MAX (16 * 1024)
/* Connections a worker keeps, and of one source address. */
#define TCP_CONNS_MAX        256
#define TCP_CONNS_PER_SOURCE 16

/* The lengths of the answers not yet all written, oldest first. */
struct unsent {
    size_t left[TCP_PIPELINE_MAX];
    unsigned head, n;
};

struct tcp_conn {
    struct tcp_conn *next, *prev; /* the table, least recently active first */
    struct px_dnstcp *t;
    struct bufferevent *bev;
    struct evbuffer_cb_entry *out_cb;
    struct event *timer; /* first answer, idle, life */
    union px_sockaddr peer;
    socklen_t peer_len;
    uint8_t src16[16];
    int64_t accepted_ms;
    struct px_dnsq_list pending; /* queries waiting for the resolver */
    struct unsent unsent;
};

struct px_dnstcp {
    struct px_worker *w;
    struct evconnlistener *lis[PX_MAX_LISTENERS];
    size_t n_lis;
    struct tcp_conn *head, *tail;
    size_t n;
};

/* ------------------------------------------------------------ the table */

static void table_unlink(struct tcp_conn *c)
{
    struct px_dnstcp *t = c->t;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        t->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        t->tail = c->prev;
    c->next = c->prev = NULL;
}

/* c at the table's end: the most recently active. */
static void table_append(struct tcp_conn *c)
{
    struct px_dnstcp *t = c->t;

    c->prev = t->tail;
    c->next = NULL;
    if (t->tail != NULL)
        t->tail->next = c;
    else
        t->head = c;
    t->tail = c;
}

/* The one way out: c's queries are cancelled (none calls back), its
 * socket, timer and memory released.  Not from inside c's output callback. */
static void conn_close(struct tcp_conn *c)
{
    px_dnsq_cancel_all(&c->pending);
    table_unlink(c);
    c->t->n--;
    event_free(c->timer);
    evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
    bufferevent_free(c->bev);
    free(c);
}

/* Whether c is owed nothing: no query waits, every answer is written. */
static bool conn_idle(const struct tcp_conn *c)
{
    return c->pending.n == 0 && c->unsent.n == 0;
}

/* Room for a connection from src16: when its source has its share, its
 * least recently active idle connection goes; when the table is full, the
 * least recently active idle one.  False when nothing idle can go. */
static bool make_room(struct px_dnstcp *t, const uint8_t src16[16])
{
    struct tcp_conn *mine_idle = NULL, *any_idle = NULL;
    size_t mine = 0;

    for (struct tcp_conn *c = t->head; c != NULL; c = c->next) {
        bool same = memcmp(c->src16, src16, 16) == 0, idle = conn_idle(c);
        mine += same;
        if (idle && same && mine_idle == NULL)
            mine_idle = c;
        if (idle && any_idle == NULL)
            any_idle = c;
    }
    if (mine >= TCP_CONNS_PER_SOURCE) {
        if (mine_idle == NULL)
            return false;
        conn_close(mine_idle);
        return true;
    }
    if (t->n < TCP_CONNS_MAX)
        return true;
    if (any_idle == NULL)
        return false;
    conn_close(any_idle);
    return true;
}

/* ------------------------------------------------------------ timers */

/* The timer at `after_s` from now, or at the end of c's life if sooner. */
static void timer_arm(struct tcp_conn *c, int64_t after_s)
{
    int64_t now = px_now_ms(), at = now + after_s * 1000, end = c->accepted_ms + TCP_LIFE_S * 1000;

    if (at > end)
        at = end;
    int64_t ms = at > now ? at - now : 0;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    event_add(c->timer, &tv);
}

/* Life over, or owed nothing for TCP_IDLE_S (TCP_FIRST_S before the first
 * answer): close.  Still owed answers: look again later (a client that
 * takes nothing is closed by the write timeout, a lookup ends by the
 * resolver's own). */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct tcp_conn *c = arg;
    (void)fd, (void)what;

    if (px_now_ms() - c->accepted_ms < TCP_LIFE_S * 1000 && !conn_idle(c)) {
        timer_arm(c, TCP_IDLE_S);
        return;
    }
    conn_close(c);
}

/* ------------------------------------------------------------ reading */

/* Whether c may be read: few enough queries owed, few enough bytes unsent. */
static bool may_read(const struct tcp_conn *c)
{
    return c->pending.n + c->unsent.n < TCP_PIPELINE_MAX &&
           evbuffer_get_length(bufferevent_get_output(c->bev)) < TCP_OUT_MAX;
}

/* Read c or not, as may_read() says.  Queries already in the input buffer
 * when reading resumes wake nothing by themselves (no new bytes come for
 * them), so the read callback is run for them, deferred to the loop. */
static void rewatch(struct tcp_conn *c)
{
    bool reading = (bufferevent_get_enabled(c->bev) & EV_READ) != 0;

    if (!may_read(c)) {
        if (reading)
            bufferevent_disable(c->bev, EV_READ);
        return;
    }
    if (reading)
        return;
    bufferevent_enable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) >= 2)
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* Written bytes leave the output buffer: the answers all written stop
 * being owed, and c may be read again. */
static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct tcp_conn *c = arg;
    struct unsent *u = &c->unsent;
    size_t gone = info->n_deleted;
    (void)buf;

    if (gone == 0)
        return;
    while (gone > 0 && u->n > 0) {
        size_t *left = &u->left[u->head], take = gone < *left ? gone : *left;
        *left -= take;
        gone -= take;
        if (*left == 0) {
            u->head = (u->head + 1) % TCP_PIPELINE_MAX;
            u->n--;
        }
    }
    rewatch(c);
}

/* The answer, framed, after those already queued (answers may go out in
 * another order than their queries came: RFC 7766 §7), owed until it is
 * all written; c becomes the most recently active. */
static void tcp_send(void *arg, const union px_sockaddr *peer, socklen_t peer_len,
                     const uint8_t *msg, size_t len)
{
    struct tcp_conn *c = arg;
    struct unsent *u = &c->unsent;
    uint8_t prefix[2] = {(uint8_t)(len >> 8), (uint8_t)len};
    (void)peer, (void)peer_len;

    /* (reading stops at TCP_PIPELINE_MAX owed, so the ring has room; were
     * it full, the answer would count with the last one) */
    if (u->n < TCP_PIPELINE_MAX)
        u->left[(u->head + u->n++) % TCP_PIPELINE_MAX] = 0;
    u->left[(u->head + u->n - 1) % TCP_PIPELINE_MAX] += sizeof(prefix) + len;
    bufferevent_write(c->bev, prefix, sizeof(prefix));
    bufferevent_write(c->bev, msg, len);
    table_unlink(c);
    table_append(c);
    timer_arm(c, TCP_IDLE_S);
    rewatch(c);
}

/* The framed query at the head of `in`, handled and drained; false when
 * it is not all there.  Only its prefix is copied out to learn its length;
 * the message is read in place. */
static bool read_one(struct tcp_conn *c, struct evbuffer *in)
{
    uint8_t prefix[2];
    const uint8_t *msg;
    size_t msg_len;

    if (evbuffer_copyout(in, prefix, sizeof(prefix)) < (ev_ssize_t)sizeof(prefix))
        return false;
    size_t framed = sizeof(prefix) + ((size_t)prefix[0] << 8 | prefix[1]);
    if (evbuffer_get_length(in) < framed)
        return false;
    const uint8_t *frame = evbuffer_pullup(in, (ev_ssize_t)framed);
    if (frame == NULL || dns_tcp_frame(frame, framed, &msg, &msg_len) != framed)
        return false;
    struct px_dnsq_from from = {.peer = c->peer,
                                .peer_len = c->peer_len,
                                .tcp = true,
                                .send = tcp_send,
                                .arg = c,
                                .pending = &c->pending};
    px_dnsq_handle(c->t->w, &from, msg, msg_len);
    evbuffer_drain(in, framed);
    return true;
}

/* Handle the framed queries read while c may be read. */
static void tcp_read(struct tcp_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    while (may_read(c) && read_one(c, in))
        ;
    rewatch(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    tcp_read(arg);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)what;
    conn_close(arg); /* end of stream, an error, or no write progress */
}

/* ------------------------------------------------------------ accepting */

/* Whether the source address a16 is bound to a sandbox now. */
static bool source_bound(const uint8_t a16[16])
{
    struct px_world *world = px_world_get();
    bool bound = px_world_by_addr(world, a16) != NULL;

    px_world_put(world);
    return bound;
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    struct px_dnstcp *t = arg;
    struct timeval idle = {TCP_IDLE_S, 0};
    uint8_t src16[16];
    (void)lis;

    px_sockaddr_to16(sa, src16);
    if ((size_t)len > sizeof(union px_sockaddr) || !source_bound(src16) || !make_room(t, src16)) {
        close(fd);
        return;
    }
    struct tcp_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    c->t = t;
    memcpy(&c->peer, sa, (size_t)len);
    c->peer_len = (socklen_t)len;
    memcpy(c->src16, src16, sizeof(src16));
    c->accepted_ms = px_now_ms();
    c->bev = bufferevent_socket_new(t->w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = event_new(t->w->base, -1, 0, on_timer, c);
    if (c->bev == NULL || c->timer == NULL)
        abort();
    c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), on_output, c);
    if (c->out_cb == NULL)
        abort();
    table_append(c);
    t->n++;
    bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
    bufferevent_set_timeouts(c->bev, NULL, &idle);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    timer_arm(c, TCP_FIRST_S);
}

/* ------------------------------------------------------------ the server */

struct px_dnstcp *px_dnstcp_new(struct px_worker *w)
{
    struct px_dnstcp *t = calloc(1, sizeof(*t));

    if (t == NULL)
        abort();
    t->w = w;
    return t;
}

int px_dnstcp_listen(struct px_dnstcp *t, const struct px_addr *a, char *err, size_t errlen)
{
    unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC;
    int fd = px_handover_claim(PX_SOCK_DNS_TCP, (const struct sockaddr *)&a->ss, a->len);
    struct evconnlistener *l;

    if (fd != -1) /* handed over by a predecessor: it listens already */
        l = evconnlistener_new(t->w->base, on_accept, t, flags, 0, fd);
    else
        l = evconnlistener_new_bind(t->w->base, on_accept, t,
                                    flags | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT, 128,
                                    (const struct sockaddr *)&a->ss, (int)a->len);
    if (l == NULL) {
        snprintf(err, errlen, "%s: cannot listen for DNS over TCP: %s", a->text, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    px_handover_note(PX_SOCK_DNS_TCP, evconnlistener_get_fd(l));
    t->lis[t->n_lis++] = l;
    return 0;
}

void px_dnstcp_quiet(struct px_dnstcp *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n_lis; i++)
        evconnlistener_free(t->lis[i]);
    t->n_lis = 0;
    for (struct tcp_conn *c = t->head, *next; c != NULL; c = next) {
        next = c->next;
        if (conn_idle(c))
            conn_close(c);
    }
}

void px_dnstcp_free(struct px_dnstcp *t)
{
    if (t == NULL)
        return;
    while (t->head != NULL)
        conn_close(t->head);
    for (size_t i = 0; i < t->n_lis; i++)
        evconnlistener_free(t->lis[i]);
    free(t);
}
