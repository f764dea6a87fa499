/*
 * bev.c - libevent shims: writing and reading a socket bufferevent's
 * buffers outside its own callbacks, and reading it with a callback of our
 * own (see bev.h).  They rely on libevent 2.1's internals: a socket
 * bufferevent freezes its output's front and its input's end, its events
 * are bev->ev_read and bev->ev_write (EV_PERSIST|EV_FINALIZE), enabling
 * and disabling reading adds and deletes bev->ev_read whatever its
 * callback, and a read high watermark suspends reading through a callback
 * on the input, which sees every byte added.
 */
#include "bev.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* The most px_bev_read_now() takes at once. */
#define READ_NOW_MAX (64 * 1024)

void px_bev_write_now(struct bufferevent *bev)
{
    struct evbuffer *out = bufferevent_get_output(bev);

    if (evbuffer_get_length(out) == 0 || bufferevent_openssl_get_ssl(bev) != NULL)
        return;
    /* A socket bufferevent freezes its output's front: only it takes from
     * there, in its write callback.  Take over that one write. */
    evbuffer_unfreeze(out, 1);
    (void)evbuffer_write(out, bufferevent_getfd(bev)); /* an error shows in the next write */
    evbuffer_freeze(out, 1);
    /* All out: the write event queued with the bytes is not needed (its
     * epoll change had not been made yet, so none is).  Writing stays
     * enabled: new output queues the event again. */
    if (evbuffer_get_length(out) == 0)
        event_del(&bev->ev_write);
}

bool px_bev_write_last(struct bufferevent *bev)
{
    struct evbuffer *out = bufferevent_get_output(bev);
    size_t n = evbuffer_get_length(out);

    if (n == 0)
        return true;
    if (bufferevent_openssl_get_ssl(bev) != NULL)
        return false; /* TLS: libevent writes it */
    if (n > PX_BEV_LAST_MAX) {
        px_bev_write_now(bev);
        return evbuffer_get_length(out) == 0;
    }
    evbuffer_unfreeze(out, 1); /* see px_bev_write_now */
    ssize_t w = send(bufferevent_getfd(bev), evbuffer_pullup(out, (ev_ssize_t)n), n,
                     MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
    if (w > 0)
        evbuffer_drain(out, (size_t)w);
    evbuffer_freeze(out, 1);
    if (evbuffer_get_length(out) != 0)
        return false; /* an error shows in the next write */
    event_del(&bev->ev_write);
    return true;
}

void px_bev_shut(struct bufferevent *bev)
{
    SSL *ssl = bufferevent_openssl_get_ssl(bev);

    if (ssl != NULL)
        (void)SSL_shutdown(ssl); /* one record straight to the socket; a failure changes nothing */
    shutdown(bufferevent_getfd(bev), SHUT_WR);
}

/* libevent's own readv relies on this too. */
_Static_assert(sizeof(struct evbuffer_iovec) == sizeof(struct iovec) &&
                   offsetof(struct evbuffer_iovec, iov_len) == offsetof(struct iovec, iov_len),
               "an evbuffer_iovec is a struct iovec");

/* Read up to `most` bytes of bev's socket into its input: what recvmsg
 * returned (-1 with errno, 0 at the end). */
static ssize_t read_into(struct bufferevent *bev, size_t most)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_iovec v[2];
    struct msghdr m = {.msg_iov = (struct iovec *)v};
    ssize_t n = -1;

    /* The input's end is frozen: only the bufferevent adds there.  Two
     * pieces: the room left after what was just read, and a new chain
     * (asking for one would move what was read into a bigger chain). */
    evbuffer_unfreeze(in, 0);
    int k = evbuffer_reserve_space(in, (ev_ssize_t)most, v, 2);
    if (k > 0) {
        m.msg_iovlen = (size_t)k;
        n = recvmsg(bufferevent_getfd(bev), &m, MSG_DONTWAIT);
        int saved = errno;
        size_t left = n > 0 ? (size_t)n : 0;
        for (int i = 0; i < k; i++) {
            if (v[i].iov_len > left)
                v[i].iov_len = left;
            left -= v[i].iov_len;
        }
        evbuffer_commit_space(in, v, k); /* may suspend reading: a high watermark */
        errno = saved;
    } else {
        errno = ENOMEM;
    }
    evbuffer_freeze(in, 0);
    return n;
}

void px_bev_read_now(struct bufferevent *bev)
{
    if (bufferevent_openssl_get_ssl(bev) != NULL)
        return; /* TLS (intercept.c): libevent reads it */
    /* An end or an error stays for the bufferevent's next read. */
    (void)read_into(bev, READ_NOW_MAX);
}

/* bev->ev_read's callback after px_bev_read_direct(): libevent's
 * bufferevent_readcb without its ioctl, its 4 KiB and its rate limits. */
static void on_direct_read(evutil_socket_t fd, short what, void *arg)
{
    struct bufferevent *bev = arg;
    size_t most = PX_BEV_READ_MAX, high = 0, have;
    (void)fd, (void)what;

    bufferevent_getwatermark(bev, EV_READ, NULL, &high);
    have = evbuffer_get_length(bufferevent_get_input(bev));
    if (high != 0 && have >= high) {
        /* at the mark: the input's watermark callback adds the event
         * again once the input is drained below it */
        event_del(&bev->ev_read);
        return;
    }
    if (high != 0 && high - have < most)
        most = high - have;
    ssize_t n = read_into(bev, most);
    if (n > 0) {
        bufferevent_trigger(bev, EV_READ, 0); /* may free bev */
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    bufferevent_disable(bev, EV_READ);
    bufferevent_trigger_event(bev, BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR),
                              0); /* may free bev */
}

void px_bev_read_direct(struct bufferevent *bev)
{
    bool on = event_pending(&bev->ev_read, EV_READ, NULL);

    event_del(&bev->ev_read);
    event_assign(&bev->ev_read, bufferevent_get_base(bev), bufferevent_getfd(bev),
                 EV_READ | EV_PERSIST | EV_FINALIZE, on_direct_read, bev);
    if (on)
        event_add(&bev->ev_read, NULL);
}

void px_bev_move_records(struct evbuffer *in, struct evbuffer *out, size_t n)
{
    static _Thread_local uint8_t piece[PX_TLS_RECORD_MAX];

    while (n > 0) {
        size_t k = n < sizeof(piece) ? n : sizeof(piece);
        evbuffer_remove(in, piece, k);
        evbuffer_add(out, piece, k);
        n -= k;
    }
}
