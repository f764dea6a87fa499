/*
 * relay.c - the tunnel: bytes both ways between client and upstream until
 * both have ended, a timeout fires or the tunnel's life is over.
 *
 * A tunnel's two sockets are plain sockets from the start (conn.c, struct
 * px_raw: no bufferevent, nothing parsed but the ClientHello), and the
 * relay moves bytes itself with one event per socket: per chunk no
 * FIONREAD ioctl and no epoll change, and an idle tunnel holds no buffer.
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
#include <assert.h>
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
#include "rehello.h"
#include "relay.h"

#define SCRATCH_SIZE (64 * 1024)
#define SPLICE_AFTER (256 * 1024) /* bytes a direction carries before it splices */
#define PIPE_SIZE    (256 * 1024) /* asked for; the kernel may give less */
/* Bytes per direction per wakeup: the most a bulk tunnel keeps its worker
 * from the others (about 4 ms at 1 GB/s).  1 MiB cost bulk half as much
 * CPU per GiB again and a fifth of its rate (bench/README.md). */
#define ROUND_MAX (4 * 1024 * 1024)

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

enum flush_result {
    FLUSH_ALL,   /* all that d held is out */
    FLUSH_FULL,  /* the socket took what it could; the rest waits */
    FLUSH_ERROR, /* the socket failed */
};

/* Write what direction d holds. */
static enum flush_result flush_dir(struct px_relay_dir *d)
{
    while (d->in_pipe > 0) {
        ssize_t n =
            splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? FLUSH_FULL : FLUSH_ERROR;
        d->in_pipe -= (size_t)n;
    }
    while (d->held_len > d->held_off) {
        ssize_t n = send(d->to, d->held + d->held_off, d->held_len - d->held_off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? FLUSH_FULL : FLUSH_ERROR;
        d->held_off += (size_t)n;
    }
    free(d->held);
    d->held = NULL;
    d->held_off = d->held_len = 0;
    return FLUSH_ALL;
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

void px_relay_hold(struct px_relay_dir *d, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    d->held = realloc(d->held, d->held_len + n);
    if (d->held == NULL)
        abort();
    memcpy(d->held + d->held_len, p, n);
    d->held_len += n;
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
    c->relay.d[i].total += n;
    return px_conn_count(c, i, n);
}

/* Close the tunnel because side s (0: client, 1: upstream) failed. */
static void close_failed(struct px_conn *c, int s)
{
    px_conn_ended(c, s == 0 ? PX_END_CLIENT : PX_END_UPSTREAM);
    px_conn_close(c, s == 0 ? "client error" : "upstream error");
}

/* Pass the n bytes just read into scratch on in direction i: written at
 * once, what the peer does not take held.  While the handshake is watched
 * (rehello.c) the client's bytes go through the watch, which holds back a
 * later ClientHello, and the server's are shown to it.  False when the
 * tunnel was closed. */
static bool pass_on(struct px_conn *c, int i, size_t n)
{
    struct px_relay_dir *d = &c->relay.d[i];

    if (c->relay.rh.on && i == 0)
        return px_rehello_client(c, scratch, n); /* into d->held: flushed next */
    if (c->relay.rh.on)
        px_rehello_server(c, scratch, n);
    ssize_t w = send(d->to, scratch, n, MSG_NOSIGNAL);
    if (w < 0 && errno != EAGAIN && errno != EINTR) {
        close_failed(c, 1 - i);
        return false;
    }
    size_t sent = w < 0 ? 0 : (size_t)w;
    if (sent < n)
        hold(d, scratch + sent, n - sent);
    return true;
}

/* Read from d->from and write on at once, until the socket has no more,
 * the peer is full, or this wakeup's share is moved.  False when the
 * tunnel was closed. */
static bool pump(struct px_conn *c, int i)
{
    struct px_relay_dir *d = &c->relay.d[i];
    size_t moved = 0;

    while (!d->eof && !dir_pending(d) && moved < ROUND_MAX) {
        ssize_t n;
        size_t want;

        if (d->pipe[0] == -1 && !d->no_pipe && d->total >= SPLICE_AFTER && !c->relay.rh.on)
            start_splice(d); /* (bytes a watch must see are not spliced) */
        if (d->pipe[0] != -1) {
            want = d->pipe_size;
            n = splice(d->from, NULL, d->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        } else {
            want = sizeof(scratch);
            n = recv(d->from, scratch, want, 0);
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return true;
            close_failed(c, i);
            return false;
        }
        if (n == 0) {
            d->eof = true;
            px_conn_ended(c, i == 0 ? PX_END_CLIENT : PX_END_UPSTREAM); /* the first end counts */
            break;
        }
        c->t_active_ms = px_now_ms();
        if (!count(c, i, (size_t)n))
            return false;
        moved += (size_t)n;
        if (d->pipe[0] != -1)
            d->in_pipe = (size_t)n;
        else if (!pass_on(c, i, (size_t)n))
            return false;
        if (flush_dir(d) == FLUSH_ERROR) {
            close_failed(c, 1 - i);
            return false;
        }
        /* A short read emptied the socket: wait for the next wakeup
         * rather than ask again for an EAGAIN. */
        if ((size_t)n < want)
            break;
    }
    return true;
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
        if (flush_dir(in) == FLUSH_ERROR) {
            close_failed(c, s);
            return;
        }
        /* Drained: read again at once, what waits is already there. */
        if (!dir_pending(in) && !pump(c, 1 - s))
            return;
    }
    if ((what & EV_READ) && !pump(c, s))
        return;
    settle(c);
}

/* Count and send what the client sent before the relay (`len` bytes at
 * `early`, which the relay now owns); when they start with a ClientHello
 * (`hello_len` bytes of them), the handshake is watched from its end on.
 * False when the tunnel was closed. */
static bool begin(struct px_conn *c, uint8_t *early, size_t len, size_t hello_len)
{
    struct px_relay_dir *d = &c->relay.d[0];

    if (hello_len == 0) {
        d->held = early;
        d->held_len = len;
    } else {
        px_rehello_start(c);
        px_relay_hold(d, early, hello_len);
    }
    if (len > 0 && !count(c, 0, len)) {
        if (hello_len > 0)
            free(early);
        return false;
    }
    if (hello_len > 0) {
        bool ok = px_rehello_client(c, early + hello_len, len - hello_len);
        free(early);
        if (!ok)
            return false;
    }
    if (flush_dir(d) == FLUSH_ERROR) {
        close_failed(c, 1);
        return false;
    }
    return true;
}

void px_relay_start(struct px_conn *c)
{
    struct px_relay *r = &c->relay;

    px_conn_set_state(c, PX_S_RELAY, px_conn_on_idle);
    px_conn_on_release(c, px_relay_free);
    c->t_start_ms = c->t_start_ms ? c->t_start_ms : px_now_ms();
    c->t_active_ms = px_now_ms();
    /* Both sides are raw sockets by now (conn.c).  What the client sent
     * before the tunnel started (the ClientHello, and what followed it)
     * is relayed first, as it is, and counted like the rest. */
    assert(c->cli == NULL && c->up == NULL && c->rc.ev != NULL && c->ru.ev != NULL);
    uint8_t *early = c->early;
    size_t early_len = c->early_len, hello_len = c->hello_len;
    c->early = NULL;
    /* A raw socket's event is freed only once the relay's own event on
     * the socket is added: libevent counts events per socket, so the
     * socket's epoll entry then stays as it is (freeing first and adding
     * after costs an epoll_ctl that changes nothing). */
    struct event *old[2] = {c->rc.ev, c->ru.ev};
    int fd[2] = {c->rc.fd, c->ru.fd};
    /* From here on the request phase's memory is the tunnel's. */
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < 2; i++) {
        r->fd[i] = fd[i];
        r->d[i].from = fd[i];
        r->d[i].to = fd[1 - i];
        r->d[i].pipe[0] = r->d[i].pipe[1] = -1;
    }
    px_conn_timeout(c, 1); /* rearm_idle sets the real deadline */
    if (begin(c, early, early_len, hello_len))
        settle(c);
    for (int i = 0; i < 2; i++)
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
    px_rehello_free(&r->rh);
}
