/*
 * upstream.c - the connection to the origin: connect to each checked
 * address in turn (c->ans), then continue by mode once one is up.
 *
 * An HTTP upstream is a bufferevent (its bytes are parsed, exchange.c); a
 * tunnel's upstream is a plain socket with one event until its relay
 * starts (struct px_raw: it is only connected).  An address that refuses
 * or fails is followed by the next; timeout-connect bounds each (the
 * timer calls px_upstream_next).
 */
#include <errno.h>
#include <event2/buffer.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "answer.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "upstream.h"

/* The upstream socket fd is connected. */
static void connected(struct px_conn *c, int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    px_metrics_upstream_connect((double)(px_now_ms() - c->t_connect_ms) / 1000.0);
    px_conn_timeout(c, 0);
    px_upstream_ready(c);
}

static void on_up_connect(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;

    if (what & BEV_EVENT_CONNECTED) {
        connected(c, bufferevent_getfd(bev));
        return;
    }
    char up[PX_SOCKADDR_TEXT_MAX];
    px_log_debug("conn %llu: connect to %s failed", (unsigned long long)c->id,
                 px_conn_upstream_text(c, up));
    bufferevent_free(c->up);
    c->up = NULL;
    c->connect_refused = true;
    px_upstream_next(c);
}

/* A connected raw upstream that speaks or ends before its relay starts:
 * the relay will read it; until then it is not watched. */
static void on_raw_upstream(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)fd, (void)what;

    event_del(c->ru.ev);
}

static void on_raw_connect(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    int err = 0;
    socklen_t len = sizeof(err);
    (void)what;

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
        err = errno;
    if (err == 0) {
        /* Watched for reading from now on, as the relay will: one epoll
         * change now, none when the relay takes the socket over. */
        event_assign(c->ru.ev, c->w->base, fd, EV_READ | EV_PERSIST, on_raw_upstream, c);
        event_add(c->ru.ev, NULL);
        connected(c, fd);
        return;
    }
    char up[PX_SOCKADDR_TEXT_MAX];
    px_log_debug("conn %llu: connect to %s failed: %s", (unsigned long long)c->id,
                 px_conn_upstream_text(c, up), strerror(err));
    px_raw_free(&c->ru);
    c->connect_refused = true;
    px_upstream_next(c);
}

/* HTTP: start connecting a bufferevent to c->up_ss; 0 or an errno. */
static int start_bev(struct px_conn *c)
{
    c->up = bufferevent_socket_new(c->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(c->up, NULL, NULL, on_up_connect, c);
    if (bufferevent_socket_connect(c->up, &c->up_ss.sa, (int)c->up_len) == 0) {
        px_bev_read_direct(c->up); /* the socket is set now */
        return 0;
    }
    int err = errno;
    bufferevent_free(c->up);
    c->up = NULL;
    return err;
}

/* A tunnel: start connecting a raw socket to c->up_ss; 0 or an errno. */
static int start_raw(struct px_conn *c)
{
    int fd = socket(c->up_ss.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return errno;
    if (connect(fd, &c->up_ss.sa, c->up_len) == -1 && errno != EINPROGRESS) {
        int err = errno;
        close(fd);
        return err;
    }
    c->ru.fd = fd;
    c->ru.ev = event_new(c->w->base, fd, EV_WRITE, on_raw_connect, c);
    if (c->ru.ev == NULL)
        abort();
    event_add(c->ru.ev, NULL);
    return 0;
}

/* CONNECT's timer: this address did not answer in time; the next one. */
static void on_connect_timeout(struct px_conn *c)
{
    px_conn_drop_upstream(c);
    px_upstream_next(c);
}

/* Whether connect's errno err is egressd's own shortage, not the origin's. */
static bool out_of_sockets(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

void px_upstream_next(struct px_conn *c)
{
    bool tunnel = c->mode == PX_MODE_CONNECT || c->mode == PX_MODE_TLS;

    while (c->ans_next < c->ans.n) {
        const uint8_t *a = c->ans.addr[c->ans_next++];
        px_sockaddr_from16(a, c->rq.port, &c->up_ss, &c->up_len);
        c->t_connect_ms = px_now_ms();
        int err = tunnel ? start_raw(c) : start_bev(c);
        if (err == 0) {
            px_conn_timeout(c, px_d.cfg->timeout_connect_ms);
            return;
        }
        if (out_of_sockets(err)) {
            px_conn_fail(c, 503, PX_R_LIMIT, "egressd is out of sockets");
            return;
        }
        char up[PX_SOCKADDR_TEXT_MAX];
        px_log_debug("conn %llu: connect to %s failed: %s", (unsigned long long)c->id,
                     px_conn_upstream_text(c, up), strerror(err));
        c->connect_refused = true;
    }
    if (!c->connect_refused) {
        px_conn_fail(c, 504, PX_R_TIMEOUT,
                     "no address of the host answered within timeout-connect");
        return;
    }
    px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "no address of the host accepted the connection");
}

void px_upstream_connect(struct px_conn *c)
{
    c->ans_next = 0;
    c->connect_refused = false;
    px_conn_set_state(c, PX_S_CONNECT, on_connect_timeout);
    px_upstream_next(c);
}

void px_upstream_ready(struct px_conn *c)
{
    c->t_active_ms = px_now_ms();
    c->on_connected(c);
}
