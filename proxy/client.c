/*
 * client.c - reading the client.  An HTTP client (and a CONNECT client
 * until its 200) is a bufferevent whose heads exchange.c parses; a
 * transparent TLS client, and a CONNECT client from its 200 on, is a raw
 * socket (struct px_raw) whose bytes are kept in c->early for the
 * ClientHello phase (hello.c) and then relayed as they are.
 */
#include <assert.h>
#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "client.h"
#include "conn.h"
#include "exchange.h"
#include "hello.h"
#include "intercept.h"
#include "relay.h"
#include "request.h"

/* What a client may send ahead while its request is decided. */
#define EARLY_MAX (64 * 1024)

static void on_cli_read(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    switch (c->state) {
    case PX_S_HEAD: px_request_on_head(c); return;
    default:
        /* Deciding, resolving, connecting: bytes wait in the input for
         * their turn.  Reading stays on (an end of the client is seen at
         * once, and no epoll change is spent), up to a bound. */
        if (evbuffer_get_length(bufferevent_get_input(c->cli)) >= EARLY_MAX)
            bufferevent_disable(c->cli, EV_READ);
        return;
    }
}

/* Keep the n bytes at buf in c->early; stop reading at EARLY_MAX (the
 * rest waits in the socket for the relay). */
static void keep_early(struct px_conn *c, const uint8_t *buf, size_t n)
{
    uint8_t *p = realloc(c->early, c->early_len + n);
    if (p == NULL)
        abort();
    memcpy(p + c->early_len, buf, n);
    c->early = p;
    c->early_len += n;
    if (c->early_len >= EARLY_MAX)
        event_del(c->rc.ev);
}

/* A raw client before its relay: what it sends is kept in c->early (at
 * most EARLY_MAX) and fed to the ClientHello parser while that runs.
 * After a final answer (FLUSH), what it sends is dropped until it ends, or
 * until it has nothing unread: then the answer and our FIN are out with
 * nothing behind them, and a close now sends no reset (a later byte of the
 * client's would draw one, but what it received stays readable), so the
 * connection does not wait for the client's FIN. */
static void on_raw_client(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    uint8_t buf[16384];
    size_t room = sizeof(buf);
    bool flushing = c->state == PX_S_FLUSH;
    (void)what;

    if (!flushing && c->early_len >= EARLY_MAX) {
        event_del(c->rc.ev);
        return;
    }
    if (!flushing && room > EARLY_MAX - c->early_len)
        room = EARLY_MAX - c->early_len;
    ssize_t n = recv(fd, buf, room, 0);
    if (n < 0 && errno == EAGAIN && flushing) {
        px_conn_close(c, "answered, nothing unread");
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0 || flushing) {
        if (n > 0)
            return; /* dropped: the answer is out */
        px_conn_ended(c, PX_END_CLIENT);
        px_conn_close(c, flushing ? "client gone after the answer"
                         : n == 0 ? "client closed"
                                  : "client error");
        return;
    }
    keep_early(c, buf, (size_t)n);
    if (c->state == PX_S_HELLO)
        px_hello_feed(c);
}

void px_client_watch_raw(struct px_conn *c, int fd)
{
    c->rc.fd = fd;
    c->rc.ev = event_new(c->w->base, fd, EV_READ | EV_PERSIST, on_raw_client, c);
    if (c->rc.ev == NULL)
        abort();
    /* Added before a bufferevent's read event on fd goes: the socket's
     * epoll entry stays as it is (see px_relay_start). */
    if (c->early_len < EARLY_MAX)
        event_add(c->rc.ev, NULL);
}

bool px_client_to_raw(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t n = evbuffer_get_length(in);

    assert(c->rc.ev == NULL && c->early == NULL);
    if (evbuffer_get_length(bufferevent_get_output(c->cli)) > 0) {
        px_conn_close(c, "client output left before the 200"); /* a bug, not a client */
        return false;
    }
    if (n > 0) {
        c->early = malloc(n);
        if (c->early == NULL)
            abort();
        evbuffer_remove(in, c->early, n);
        c->early_len = n;
    }
    px_client_watch_raw(c, bufferevent_getfd(c->cli));
    bufferevent_setfd(c->cli, -1);
    bufferevent_free(c->cli);
    c->cli = NULL;
    px_exchange_free(c); /* a tunnel from now on */
    return true;
}

void px_conn_on_client_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    if (what & BEV_EVENT_CONNECTED)
        return; /* an intercepted client's TLS handshake is done */
    /* An HTTP client that half-closed after a whole request (being
     * decided, sent or answered) is answered: libevent stopped reading at
     * the end, and the next head phase reads again, handles what was
     * pipelined and sees the end once more.  (In a head, req_done is the
     * last request's; a CONNECT client that ends before its tunnel is up
     * is gone.) */
    if (what == (BEV_EVENT_READING | BEV_EVENT_EOF) &&
        (c->mode == PX_MODE_HTTP || c->mode == PX_MODE_PLAIN || c->mode == PX_MODE_INTERCEPT) &&
        c->state != PX_S_HEAD && c->ex->req_done)
        return;
    if ((what & BEV_EVENT_ERROR) && c->mode == PX_MODE_INTERCEPT)
        px_intercept_client_error(c);
    px_conn_ended(c, PX_END_CLIENT);
    px_conn_close(c, what & BEV_EVENT_ERROR ? "client error" : "client closed");
}

void px_conn_watch_client(struct px_conn *c)
{
    bufferevent_setcb(c->cli, on_cli_read, NULL, px_conn_on_client_event, c);
    bufferevent_setwatermark(c->cli, EV_WRITE | EV_READ, 0, 0);
    /* Writing stays enabled (a new bufferevent's default): the write
     * event is added when output is queued, and not polled for before. */
    bufferevent_enable(c->cli, EV_READ);
}
