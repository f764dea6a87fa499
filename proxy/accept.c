/*
 * accept.c - where every connection starts, and the one place that picks
 * its first phase: a request head (the proxy and transparent-HTTP
 * listeners: request.c) or a ClientHello (the transparent TLS listener:
 * hello.c).  It counts the connection as open, finds its sandbox by its
 * source address and notes where a firewall meant it to go.
 *
 *   accept ─┬▶ head (request.c) ─▶ judge ─▶ upstream ─▶ exchange | CONNECT: hello ─▶ relay
 *           └▶ hello (hello.c)  ─▶ judge ─▶ upstream ─▶ relay | intercept
 */
#include "accept.h"
#include "answer.h"
#include "client.h"
#include "conn.h"
#include "exchange.h"
#include "hello.h"
#include "identity.h"
#include "request.h"

#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <stdatomic.h>

/* Whether address a (the firewall's original destination) differs from
 * the listener's own: the client aimed elsewhere and was redirected. */
static bool not_the_listener(struct px_conn *c, evutil_socket_t fd)
{
    const struct sockaddr_storage *lss = &c->l->addr->ss;
    struct sockaddr_storage local;
    socklen_t llen = sizeof(local);
    bool any = lss->ss_family == AF_INET6
                   ? IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)lss)->sin6_addr)
                   : ((const struct sockaddr_in *)lss)->sin_addr.s_addr == htonl(INADDR_ANY);
    uint8_t a[16];

    /* The listener's own address, unless it listens on all of them. */
    if (!any)
        local = *lss;
    else if (getsockname(fd, (struct sockaddr *)&local, &llen) == -1)
        return false;
    px_sockaddr_to16(&c->orig_dst.sa, a);
    return !px_sockaddr_is((struct sockaddr *)&local, a) ||
           px_sockaddr_port(&c->orig_dst.sa) != px_sockaddr_port((struct sockaddr *)&local);
}

/* The client's real destination, if a firewall redirected it here. */
static void original_dst(struct px_conn *c, evutil_socket_t fd)
{
    socklen_t len = sizeof(c->orig_dst);
    int r;

    if (c->l->addr->ss.ss_family == AF_INET6)
        r = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &c->orig_dst, &len);
    else
        r = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->orig_dst, &len);
    if (r == -1)
        return;
    c->redirected = not_the_listener(c, fd);
}

void px_conn_accept(struct px_worker *w, const struct px_listener_spec *l, evutil_socket_t fd,
                    const struct sockaddr *sa, int salen)
{
    bool tls = l->kind == PX_L_TLS;
    struct px_conn *c = px_conn_new(w, l, sa,
                                    tls                    ? PX_MODE_TLS
                                    : l->kind == PX_L_HTTP ? PX_MODE_PLAIN
                                                           : PX_MODE_HTTP,
                                    tls ? PX_S_HELLO : PX_S_HEAD,
                                    tls ? px_hello_on_timeout : px_request_on_head_timeout);
    long open = atomic_fetch_add(&px_d.conns, 1) + 1;
    (void)salen;

    if (!tls)
        px_exchange_new(c);
    /* TCP_NODELAY comes from the listener (worker.c). */
    if (l->kind == PX_L_TLS) {
        px_client_watch_raw(c, fd);
    } else {
        c->cli = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
        px_bev_read_direct(c->cli);
        px_conn_watch_client(c);
    }
    c->world = px_world_get();
    enum px_identity who = px_conn_identify(c, NULL, 0);
    if (l->kind != PX_L_PROXY)
        original_dst(c, fd);
    if ((uint64_t)open > px_d.cfg->max_conns) {
        px_conn_fail(c, 503, PX_R_LIMIT, "too many connections");
        return;
    }
    if (who == PX_ID_LIMIT) {
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox opens too many connections");
        return;
    }
    if (l->kind == PX_L_TLS) {
        px_hello_start(c);
        return;
    }
    /* The first request head's clock runs from the accept, not from its
     * first byte: a client that waits before it starts has no more time. */
    px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    c->ex->head_started = true;
}
