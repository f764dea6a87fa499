/*
 * relay.c - the tunnel: bytes both ways between client and upstream until
 * both have ended, a timeout fires or the tunnel's life is over.
 *
 * Once a tunnel is decided nothing is parsed any more, so the relay leaves
 * libevent's bufferevents behind: it takes the two sockets, frees the
 * bufferevents or the raw sockets' events (whatever they still held
 * becomes the first bytes to send) and moves bytes itself with one event
 * per socket.  That saves, per
 * chunk, the FIONREAD ioctl and the epoll changes a bufferevent makes, and
 * an idle tunnel holds no buffer at all (about 2 KiB less per tunnel).
 *
 * Each direction (client to upstream, upstream to client) is a `struct
 * dir`.  Bytes are read into the worker thread's scratch buffer and written
 * on at once; only what the peer's socket does not take is copied aside
 * (`held`), and the direction stops reading until that is out.  So a slow
 * reader never makes the relay buffer more than one read's worth, and the
 * back-pressure is the sockets' own.
 *
 * Bulk: once a direction has carried SPLICE_AFTER bytes it gets a pipe and
 * moves bytes with splice(2), socket to pipe to socket, without copying
 * them through user space.  Short exchanges (a request and its answer)
 * never pay for the pipe.
 *
 * A side's end of stream is passed on as a half-close (shutdown SHUT_WR)
 * once everything it sent is written, so protocols that close one
 * direction first work; the tunnel closes when both directions are done.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event_struct.h>

#include "conn.h"
#include "log.h"

#define SCRATCH_SIZE (64 * 1024)
#define SPLICE_AFTER (256 * 1024)  /* bytes a direction carries before it splices */
#define PIPE_SIZE    (256 * 1024)  /* asked for; the kernel may give less */
#define ROUND_MAX    (1024 * 1024) /* bytes per direction per wakeup (fairness) */

/* struct px_relay and struct px_relay_dir are in conn.h: the tunnel lives
 * inside its connection, in the memory the request phase used. */

static _Thread_local uint8_t scratch[SCRATCH_SIZE];

static void on_socket(evutil_socket_t fd, short what, void *arg);

static bool dir_pending(const struct px_relay_dir *d)
{
    return d->in_pipe > 0 || d->held_len > d->held_off;
}

static bool dir_done(const struct px_relay_dir *d)
{
    return d->eof && !dir_pending(d);
}

/* What socket `s`'s event must wait for: reading when its outgoing
 * direction may read, writing when its incoming direction is blocked. */
static void rewatch(struct px_conn *c, int s)
{
    struct px_relay *r = &c->relay;
    const struct px_relay_dir *out = &r->d[s], *in = &r->d[1 - s];
    short want = 0;

    if (!out->eof && !dir_pending(out))
        want |= EV_READ;
    if (dir_pending(in))
        want |= EV_WRITE;
    if (want == r->watching[s])
        return;
    if (r->watching[s])
        event_del(&r->ev[s]);
    r->watching[s] = want;
    if (want) {
        event_assign(&r->ev[s], c->w->base, r->fd[s], want | EV_PERSIST, on_socket, c);
        event_add(&r->ev[s], NULL);
    }
}

/* Write what direction d holds; 1 when all is out, 0 when the socket is
 * full, -1 on an error. */
static int flush_dir(struct px_relay_dir *d)
{
    while (d->in_pipe > 0) {
        ssize_t n =
            splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0)
            return errno == EAGAIN ? 0 : errno == EINTR ? 0 : -1;
        d->in_pipe -= (size_t)n;
    }
    while (d->held_len > d->held_off) {
        ssize_t n = send(d->to, d->held + d->held_off, d->held_len - d->held_off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        d->held_off += (size_t)n;
    }
    free(d->held);
    d->held = NULL;
    d->held_off = d->held_len = 0;
    return 1;
}

/* Room for n bytes to be written later (the direction holds none). */
static uint8_t *hold_space(struct px_relay_dir *d, size_t n)
{
    d->held = malloc(n);
    if (d->held == NULL)
        abort();
    d->held_off = 0;
    d->held_len = n;
    return d->held;
}

/* Keep bytes the peer did not take. */
static void hold(struct px_relay_dir *d, const uint8_t *p, size_t n)
{
    memcpy(hold_space(d, n), p, n);
}

static void start_splice(struct px_relay_dir *d)
{
    if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == -1) {
        d->pipe[0] = d->pipe[1] = -1;
        d->no_pipe = true;
        return;
    }
    int size = fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
    if (size <= 0)
        size = fcntl(d->pipe[1], F_GETPIPE_SZ);
    d->pipe_size = size > 0 ? (size_t)size : 65536;
}

/* Account n bytes read in direction i; false when the tunnel was closed. */
static bool count(struct px_conn *c, int i, size_t n)
{
    struct px_relay *r = &c->relay;

    if (i == 0)
        c->bytes_up += n;
    else
        c->bytes_down += n;
    r->d[i].total += n;
    c->quota_counted += n;
    if (!px_limit_bytes(c->lim, n, px_d.cfg->quota_bytes_per_sandbox)) {
        c->reason = PX_R_LIMIT;
        px_conn_close(c, "byte quota used up");
        return false;
    }
    return true;
}

/* Read from d->from and write on at once, until the socket has no more,
 * the peer is full, or this wakeup's share is moved.  0, or -1 when the
 * tunnel was closed. */
static int pump(struct px_conn *c, int i)
{
    struct px_relay_dir *d = &c->relay.d[i];
    size_t moved = 0;

    while (!d->eof && !dir_pending(d) && moved < ROUND_MAX) {
        ssize_t n;
        size_t want;

        if (d->pipe[0] == -1 && !d->no_pipe && d->total >= SPLICE_AFTER)
            start_splice(d);
        if (d->pipe[0] != -1) {
            want = d->pipe_size;
            n = splice(d->from, NULL, d->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        } else {
            want = sizeof(scratch);
            n = recv(d->from, scratch, want, 0);
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            px_conn_close(c, i == 0 ? "client error" : "upstream error");
            return -1;
        }
        if (n == 0) {
            d->eof = true;
            break;
        }
        c->t_active_ms = px_now_ms();
        if (!count(c, i, (size_t)n))
            return -1;
        moved += (size_t)n;
        if (d->pipe[0] != -1) {
            d->in_pipe = (size_t)n;
        } else {
            ssize_t w = send(d->to, scratch, (size_t)n, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                px_conn_close(c, i == 0 ? "upstream error" : "client error");
                return -1;
            }
            if (w < n)
                hold(d, scratch + (w < 0 ? 0 : w), (size_t)(n - (w < 0 ? 0 : w)));
        }
        if (flush_dir(d) < 0) {
            px_conn_close(c, i == 0 ? "upstream error" : "client error");
            return -1;
        }
        /* A short read emptied the socket: wait for the next wakeup
         * rather than ask again for an EAGAIN. */
        if ((size_t)n < want)
            break;
    }
    return 0;
}

/* After any progress: pass on ends, close when both ways are done, and
 * watch for what is needed next. */
static void settle(struct px_conn *c)
{
    struct px_relay *r = &c->relay;

    if (dir_done(&r->d[0]) && dir_done(&r->d[1])) {
        px_conn_close(c, "both sides ended"); /* close() sends what shutdown would */
        return;
    }
    for (int i = 0; i < 2; i++) {
        struct px_relay_dir *d = &r->d[i];
        if (dir_done(d) && !d->shut) {
            shutdown(d->to, SHUT_WR);
            d->shut = true;
        }
    }
    rewatch(c, 0);
    rewatch(c, 1);
}

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    struct px_relay *r = &c->relay;
    int s = fd == r->fd[0] ? 0 : 1;

    if (what & EV_WRITE) {
        struct px_relay_dir *in = &r->d[1 - s];
        if (flush_dir(in) < 0) {
            px_conn_close(c, s == 0 ? "client error" : "upstream error");
            return;
        }
        /* Drained: read again at once, what waits is already there. */
        if (!dir_pending(in) && pump(c, 1 - s) < 0)
            return;
    }
    if ((what & EV_READ) && pump(c, s) < 0)
        return;
    settle(c);
}

/* Take a bufferevent's socket and free the bufferevent. */
static int take_socket(struct bufferevent *bev)
{
    int fd = bufferevent_getfd(bev);

    bufferevent_setfd(bev, -1);
    bufferevent_free(bev);
    return fd;
}

/* Bytes the bufferevents still hold for direction d: first what was
 * queued for output on `to`, then what was read from `from` (either may be
 * NULL: a raw socket, which holds nothing).  Returns the number of the
 * latter: read from the tunnel's side, not yet counted. */
static size_t take_bytes(struct px_relay_dir *d, struct bufferevent *from, struct bufferevent *to)
{
    struct evbuffer *out = to ? bufferevent_get_output(to) : NULL;
    struct evbuffer *in = from ? bufferevent_get_input(from) : NULL;
    size_t a = out ? evbuffer_get_length(out) : 0, b = in ? evbuffer_get_length(in) : 0;

    if (a + b == 0)
        return 0;
    uint8_t *p = hold_space(d, a + b);
    /* A socket bufferevent freezes its output's front (only it may take
     * from there): thaw it to take the bytes over. */
    if (a > 0) {
        evbuffer_unfreeze(out, 1);
        evbuffer_remove(out, p, a);
    }
    if (b > 0)
        evbuffer_remove(in, p + a, b);
    return b;
}

/* Count and send what was there before the relay; false when the tunnel
 * was closed. */
static bool begin(struct px_conn *c, const size_t early[2])
{
    for (int i = 0; i < 2; i++)
        if (early[i] > 0 && !count(c, i, early[i]))
            return false;
    for (int i = 0; i < 2; i++) {
        if (flush_dir(&c->relay.d[i]) < 0) {
            px_conn_close(c, i == 0 ? "upstream error" : "client error");
            return false;
        }
    }
    return true;
}

void px_relay_start(struct px_conn *c)
{
    struct px_relay *r = &c->relay;
    struct px_relay_dir d[2] = {0};

    px_conn_set_state(c, PX_S_RELAY);
    c->t_start_ms = c->t_start_ms ? c->t_start_ms : px_now_ms();
    c->t_active_ms = px_now_ms();
    /* What was read before the tunnel started (the ClientHello, an answer
     * already in) is relayed and counted like the rest.  A raw client's
     * bytes (c->early) become the first to send as they are. */
    size_t early[2];
    if (c->rc.ev != NULL) {
        d[0].held = c->early;
        d[0].held_len = early[0] = c->early_len;
        c->early = NULL;
    } else {
        early[0] = take_bytes(&d[0], c->cli, c->up);
    }
    early[1] = take_bytes(&d[1], c->up, c->cli);
    /* A raw socket's event is freed only once the relay's own event on
     * the socket is added: libevent counts events per socket, so the
     * socket's epoll entry then stays as it is (freeing first and adding
     * after costs an epoll_ctl that changes nothing). */
    struct event *old[2] = {c->rc.ev, c->ru.ev};
    int fd[2] = {c->cli ? take_socket(c->cli) : c->rc.fd, c->up ? take_socket(c->up) : c->ru.fd};
    c->cli = c->up = NULL;
    /* From here on the request phase's memory is the tunnel's. */
    memset(r, 0, sizeof(*r));
    c->relaying = true;
    for (int i = 0; i < 2; i++) {
        r->fd[i] = fd[i];
        r->d[i] = d[i];
        r->d[i].from = fd[i];
        r->d[i].to = fd[1 - i];
        r->d[i].pipe[0] = r->d[i].pipe[1] = -1;
    }
    px_conn_timeout(c, 1); /* rearm_idle sets the real deadline */
    if (begin(c, early))
        settle(c);
    for (int i = 0; i < 2; i++)
        if (old[i] != NULL)
            event_free(old[i]);
}

void px_relay_free(struct px_conn *c)
{
    struct px_relay *r = &c->relay;

    for (int s = 0; s < 2; s++) {
        if (r->watching[s])
            event_del(&r->ev[s]);
        struct px_relay_dir *d = &r->d[s];
        if (d->pipe[0] != -1) {
            close(d->pipe[0]);
            close(d->pipe[1]);
        }
        free(d->held);
        close(r->fd[s]);
    }
    c->relaying = false;
}
