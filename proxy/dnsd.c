/*
 * dnsd.c - the policy DNS server of one worker: its own SO_REUSEPORT UDP
 * socket on every `dns` address (the kernel spreads queries over the
 * workers, as it does the proxy's connections), read and answered in
 * batches; its TCP side (dnstcp.c); and the timer of its log lines.
 * What a query is answered with is dnsq.c's.
 */
#include <errno.h>
#include <event2/event.h>
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
struct udp_sock {
    struct px_dnsd *d;
    int fd;
    struct event *ev;
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
    struct px_dnstcp *tcp;
    struct px_dnsq_list pending; /* UDP queries waiting for the resolver */
    struct event *log_timer;     /* the summaries and the refusals' tallies */
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

/* A new UDP socket bound to a, its own in this worker (SO_REUSEPORT);
 * -1 with err. */
static int udp_bind(const struct px_addr *a, char *err, size_t errlen)
{
    int one = 1;
    int fd = socket(a->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) {
        snprintf(err, errlen, "%s: cannot listen for DNS over UDP: %s", a->text, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* The worker's UDP socket on a: the one a predecessor handed over
 * (handover.h), or a new one. */
static int udp_open(struct px_dnsd *d, const struct px_addr *a, char *err, size_t errlen)
{
    struct udp_sock *u = &d->udp[d->n_udp];
    int fd = px_handover_claim(PX_SOCK_DNS_UDP, (const struct sockaddr *)&a->ss, a->len);

    if (fd == -1 && (fd = udp_bind(a, err, errlen)) == -1)
        return -1;
    px_handover_note(PX_SOCK_DNS_UDP, fd);
    u->d = d;
    u->fd = fd;
    u->ev = event_new(d->w->base, fd, EV_READ | EV_PERSIST, on_udp, u);
    event_add(u->ev, NULL);
    d->n_udp++;
    return 0;
}

/* ------------------------------------------------------------ the server */

static void on_log_timer(evutil_socket_t fd, short what, void *arg)
{
    struct px_dnsd *d = arg;
    (void)fd, (void)what;
    px_dnsq_log_flush(d->w);
    px_dnstally_flush();
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
    d->tcp = px_dnstcp_new(w);
    for (size_t i = 0; i < cfg->n_dns; i++)
        if (udp_open(d, &cfg->dns[i], err, errlen) != 0 ||
            px_dnstcp_listen(d->tcp, &cfg->dns[i], err, errlen) != 0)
            return -1;
    if (cfg->dns_log != PX_DNS_LOG_OFF) {
        struct timeval tv = {(time_t)(cfg->dns_log_interval_ms / 1000),
                             (suseconds_t)(cfg->dns_log_interval_ms % 1000) * 1000};
        d->log_timer = event_new(w->base, -1, EV_PERSIST, on_log_timer, d);
        event_add(d->log_timer, &tv);
    }
    return 0;
}

void px_dnsd_quiet(struct px_worker *w)
{
    struct px_dnsd *d = w->dnsd;

    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n_udp; i++)
        event_del(d->udp[i].ev);
    px_dnstcp_quiet(d->tcp);
}

void px_dnsd_close(struct px_worker *w)
{
    struct px_dnsd *d = w->dnsd;

    if (d == NULL)
        return;
    px_dnsq_cancel_all(&d->pending);
    px_dnstcp_free(d->tcp);
    for (size_t i = 0; i < d->n_udp; i++) {
        event_free(d->udp[i].ev);
        close(d->udp[i].fd);
    }
    if (d->log_timer != NULL)
        event_free(d->log_timer);
    px_dnsq_log_end(w);
    px_dnstally_end();
    free(d->batch);
    free(d);
    w->dnsd = NULL;
}
