/*
 * dnsd.c - the policy DNS server's transports, per worker: its own
 * SO_REUSEPORT UDP socket and TCP listener on every `dns` address (the
 * kernel spreads queries and connections over the workers, as it does
 * the proxy's), and the TCP connections (RFC 7766: several queries on
 * one connection, answered as they are ready, each framed by its length).
 * What a query is answered with is dnsq.c's.
 */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dns.h"
#include "dnsd.h"
#include "egressd.h"
#include "log.h"

/* Datagrams read per readiness of a UDP socket (one recvmmsg) before the
 * loop moves on, and answers sent in one sendmmsg. */
#define UDP_BATCH 64
/* The room for one query: a query is its header, one name of at most 255
 * bytes and an OPT; a datagram longer than this is cut (MSG_TRUNC) and
 * answered FORMERR. */
#define UDP_QUERY_MAX 2048
/* A TCP connection's idle time before it is closed (RFC 7766 §6.2.3
 * suggests seconds, not minutes). */
#define TCP_IDLE_S 10
/* Queries of one TCP connection waiting at once; past that it is not read. */
#define TCP_PIPELINE_MAX 16
/* TCP connections a worker keeps open; a new one past that is closed. */
#define TCP_CONNS_MAX 256

struct udp_sock {
    struct px_dnsd *d;
    int fd;
    struct event *ev;
};

struct tcp_conn {
    struct tcp_conn *next, *prev;
    struct px_dnsd *d;
    struct bufferevent *bev;
    union px_sockaddr peer;
    socklen_t peer_len;
    struct px_dnsq_list pending;
};

/* One worker's datagrams in flight through a batch: the queries one
 * recvmmsg read, and the answers made while they were handled, which one
 * sendmmsg sends (an answer that comes later, from the resolver, is sent
 * on its own). */
struct udp_batch {
    uint8_t in[UDP_BATCH][UDP_QUERY_MAX];
    union px_sockaddr in_peer[UDP_BATCH];
    struct iovec in_iov[UDP_BATCH];
    struct mmsghdr in_msg[UDP_BATCH];
    uint8_t out[UDP_BATCH][DNS_UDP_OURS];
    union px_sockaddr out_peer[UDP_BATCH];
    struct iovec out_iov[UDP_BATCH];
    struct mmsghdr out_msg[UDP_BATCH];
    unsigned n_out;
    struct udp_sock *open; /* the socket whose answers are gathered now, or NULL */
};

struct px_dnsd {
    struct px_worker *w;
    struct udp_batch *batch;
    struct udp_sock udp[PX_MAX_LISTENERS];
    size_t n_udp;
    struct evconnlistener *tcp[PX_MAX_LISTENERS];
    size_t n_tcp;
    struct px_dnsq_list pending; /* UDP queries waiting for the resolver */
    struct tcp_conn *conns;
    size_t n_conns;
    struct event *log_timer; /* dns-log summary */
};

/* ------------------------------------------------------------ UDP */

/* Send what the batch gathered (a full socket buffer drops the rest, as
 * the network could: the clients ask again). */
static void batch_flush(struct udp_batch *b)
{
    unsigned sent = 0;

    while (sent < b->n_out) {
        int n = sendmmsg(b->open->fd, b->out_msg + sent, b->n_out - sent, MSG_DONTWAIT);
        if (n <= 0)
            break;
        sent += (unsigned)n;
    }
    b->n_out = 0;
}

static void udp_send(void *arg, const union px_sockaddr *peer, socklen_t peer_len,
                     const uint8_t *msg, size_t len)
{
    struct udp_sock *u = arg;
    struct udp_batch *b = u->d->batch;

    if (b->open != u || len > sizeof(b->out[0])) {
        (void)sendto(u->fd, msg, len, MSG_DONTWAIT, &peer->sa, peer_len);
        return;
    }
    if (b->n_out == UDP_BATCH)
        batch_flush(b);
    unsigned i = b->n_out++;
    memcpy(b->out[i], msg, len);
    memcpy(&b->out_peer[i], peer, peer_len);
    b->out_iov[i] = (struct iovec){b->out[i], len};
    b->out_msg[i].msg_hdr = (struct msghdr){.msg_name = &b->out_peer[i],
                                            .msg_namelen = peer_len,
                                            .msg_iov = &b->out_iov[i],
                                            .msg_iovlen = 1};
}

/* The batch's receiving side, ready for recvmmsg. */
static void batch_arm(struct udp_batch *b)
{
    for (unsigned i = 0; i < UDP_BATCH; i++) {
        b->in_iov[i] = (struct iovec){b->in[i], sizeof(b->in[i])};
        b->in_msg[i].msg_hdr = (struct msghdr){.msg_name = &b->in_peer[i],
                                               .msg_namelen = sizeof(b->in_peer[i]),
                                               .msg_iov = &b->in_iov[i],
                                               .msg_iovlen = 1};
    }
}

static void on_udp(evutil_socket_t fd, short what, void *arg)
{
    struct udp_sock *u = arg;
    struct udp_batch *b = u->d->batch;
    (void)what;

    batch_arm(b);
    int n = recvmmsg(fd, b->in_msg, UDP_BATCH, MSG_DONTWAIT, NULL);
    if (n <= 0)
        return; /* EAGAIN, or an ICMP error reported on the socket */
    b->open = u;
    for (int i = 0; i < n; i++) {
        struct px_dnsq_from from = {.send = udp_send, .arg = u, .pending = &u->d->pending};
        /* (a datagram cut to UDP_QUERY_MAX ends inside its records or
         * leaves bytes over: TRUNCATED or TRAILING, answered FORMERR) */
        memcpy(&from.peer, &b->in_peer[i], b->in_msg[i].msg_hdr.msg_namelen);
        from.peer_len = b->in_msg[i].msg_hdr.msg_namelen;
        px_dnsq_handle(u->d->w, &from, b->in[i], b->in_msg[i].msg_len);
    }
    batch_flush(b);
    b->open = NULL;
}

/* A UDP socket bound to a, its own in this worker (SO_REUSEPORT). */
static int udp_open(struct px_dnsd *d, const struct px_addr *a, char *err, size_t errlen)
{
    struct udp_sock *u = &d->udp[d->n_udp];
    int one = 1;
    int fd = socket(a->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) {
        snprintf(err, errlen, "%s: cannot listen for DNS over UDP: %s", a->text, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    u->d = d;
    u->fd = fd;
    u->ev = event_new(d->w->base, fd, EV_READ | EV_PERSIST, on_udp, u);
    event_add(u->ev, NULL);
    d->n_udp++;
    return 0;
}

/* ------------------------------------------------------------ TCP */

static void tcp_close(struct tcp_conn *c)
{
    struct px_dnsd *d = c->d;

    px_dnsq_cancel_all(&c->pending);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    d->n_conns--;
    bufferevent_free(c->bev);
    free(c);
}

/* The answer, framed, after those already written (answers may go out
 * in another order than their queries came: RFC 7766 §7); and reading
 * again once few enough wait. */
static void tcp_send(void *arg, const union px_sockaddr *peer, socklen_t peer_len,
                     const uint8_t *msg, size_t len)
{
    struct tcp_conn *c = arg;
    uint8_t prefix[2] = {(uint8_t)(len >> 8), (uint8_t)len};
    (void)peer, (void)peer_len;

    bufferevent_write(c->bev, prefix, sizeof(prefix));
    bufferevent_write(c->bev, msg, len);
    if (c->pending.n < TCP_PIPELINE_MAX)
        bufferevent_enable(c->bev, EV_READ);
}

/* Read framed queries while fewer than TCP_PIPELINE_MAX wait. */
static void tcp_read(struct tcp_conn *c)
{
    static _Thread_local uint8_t buf[2 + DNS_MSG_MAX];
    struct evbuffer *in = bufferevent_get_input(c->bev);

    while (c->pending.n < TCP_PIPELINE_MAX) {
        size_t have = evbuffer_get_length(in), take = have < sizeof(buf) ? have : sizeof(buf);
        const uint8_t *msg;
        size_t msg_len;
        if (take < 2 || evbuffer_copyout(in, buf, take) < 0)
            break;
        size_t used = dns_tcp_frame(buf, take, &msg, &msg_len);
        if (used == 0)
            break;
        struct px_dnsq_from from = {.peer = c->peer,
                                    .peer_len = c->peer_len,
                                    .tcp = true,
                                    .send = tcp_send,
                                    .arg = c,
                                    .pending = &c->pending};
        px_dnsq_handle(c->d->w, &from, msg, msg_len);
        evbuffer_drain(in, used);
    }
    if (c->pending.n >= TCP_PIPELINE_MAX)
        bufferevent_disable(c->bev, EV_READ);
}

static void on_tcp_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    tcp_read(arg);
}

static void on_tcp_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)what;
    tcp_close(arg); /* end of stream, an error, or idle too long */
}

static void on_tcp_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                          int len, void *arg)
{
    struct px_dnsd *d = arg;
    struct timeval idle = {TCP_IDLE_S, 0};
    (void)lis;

    if (d->n_conns >= TCP_CONNS_MAX || (size_t)len > sizeof(union px_sockaddr)) {
        close(fd);
        return;
    }
    struct tcp_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    c->d = d;
    memcpy(&c->peer, sa, (size_t)len);
    c->peer_len = (socklen_t)len;
    c->bev = bufferevent_socket_new(d->w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->bev == NULL) {
        close(fd);
        free(c);
        return;
    }
    c->next = d->conns;
    if (d->conns != NULL)
        d->conns->prev = c;
    d->conns = c;
    d->n_conns++;
    bufferevent_setcb(c->bev, on_tcp_read, NULL, on_tcp_event, c);
    bufferevent_set_timeouts(c->bev, &idle, &idle);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static int tcp_open(struct px_dnsd *d, const struct px_addr *a, char *err, size_t errlen)
{
    unsigned flags =
        LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_EXEC;
    struct evconnlistener *l = evconnlistener_new_bind(
        d->w->base, on_tcp_accept, d, flags, 128, (const struct sockaddr *)&a->ss, (int)a->len);

    if (l == NULL) {
        snprintf(err, errlen, "%s: cannot listen for DNS over TCP: %s", a->text, strerror(errno));
        return -1;
    }
    d->tcp[d->n_tcp++] = l;
    return 0;
}

/* ------------------------------------------------------------ the server */

static void on_log_timer(evutil_socket_t fd, short what, void *arg)
{
    struct px_dnsd *d = arg;
    (void)fd, (void)what;
    px_dnsq_log_flush(d->w);
}

int px_dnsd_open(struct px_worker *w, char *err, size_t errlen)
{
    const struct px_config *cfg = px_d.cfg;

    if (cfg->n_dns == 0)
        return 0;
    struct px_dnsd *d = calloc(1, sizeof(*d));
    if (d == NULL)
        abort();
    d->w = w;
    w->dnsd = d;
    if ((d->batch = calloc(1, sizeof(*d->batch))) == NULL)
        abort();
    for (size_t i = 0; i < cfg->n_dns; i++)
        if (udp_open(d, &cfg->dns[i], err, errlen) != 0 ||
            tcp_open(d, &cfg->dns[i], err, errlen) != 0)
            return -1;
    if (cfg->dns_log == PX_DNS_LOG_SUMMARY) {
        struct timeval tv = {(time_t)(cfg->dns_log_interval_ms / 1000),
                             (suseconds_t)(cfg->dns_log_interval_ms % 1000) * 1000};
        d->log_timer = event_new(w->base, -1, EV_PERSIST, on_log_timer, d);
        event_add(d->log_timer, &tv);
    }
    return 0;
}

void px_dnsd_close(struct px_worker *w)
{
    struct px_dnsd *d = w->dnsd;

    if (d == NULL)
        return;
    px_dnsq_cancel_all(&d->pending);
    while (d->conns != NULL)
        tcp_close(d->conns);
    for (size_t i = 0; i < d->n_udp; i++) {
        event_free(d->udp[i].ev);
        close(d->udp[i].fd);
    }
    for (size_t i = 0; i < d->n_tcp; i++)
        evconnlistener_free(d->tcp[i]);
    if (d->log_timer != NULL)
        event_free(d->log_timer);
    px_dnsq_log_end(w);
    free(d->batch);
    free(d);
    w->dnsd = NULL;
}
