/*
 * bev.c - libevent shims: writing and reading a socket bufferevent's
 * buffers outside its own callbacks (see bev.h).  They rely on libevent
 * 2.1's internals: a socket bufferevent freezes its output's front and its
 * input's end, and its write event is bev->ev_write.
 */
#include "bev.h"

#include <event2/buffer.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/uio.h>

/* The most px_bev_read_now() takes at once. */
#define READ_NOW_MAX (64 * 1024)

void px_bev_write_now(struct bufferevent *bev)
{
    struct evbuffer *out = bufferevent_get_output(bev);

    if (evbuffer_get_length(out) == 0)
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

/* libevent's own readv relies on this too. */
_Static_assert(sizeof(struct evbuffer_iovec) == sizeof(struct iovec) &&
                   offsetof(struct evbuffer_iovec, iov_len) == offsetof(struct iovec, iov_len),
               "an evbuffer_iovec is a struct iovec");

void px_bev_read_now(struct bufferevent *bev)
{
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_iovec v[2];
    struct msghdr m = {.msg_iov = (struct iovec *)v};

    /* The input's end is frozen: only the bufferevent adds there.  Two
     * pieces: the room left after what was just read, and a new chain
     * (asking for one would move what was read into a bigger chain). */
    evbuffer_unfreeze(in, 0);
    int k = evbuffer_reserve_space(in, READ_NOW_MAX, v, 2);
    if (k > 0) {
        m.msg_iovlen = (size_t)k;
        ssize_t n = recvmsg(bufferevent_getfd(bev), &m, MSG_DONTWAIT);
        /* An end or an error stays for the bufferevent's own next read. */
        size_t left = n > 0 ? (size_t)n : 0;
        for (int i = 0; i < k; i++) {
            if (v[i].iov_len > left)
                v[i].iov_len = left;
            left -= v[i].iov_len;
        }
        evbuffer_commit_space(in, v, k);
    }
    evbuffer_freeze(in, 0);
}
