/*
 * conn.c - one client connection: accept, identify the sandbox, judge the
 * host (DESIGN.md, "Decision path"), resolve, check every address, connect
 * upstream, check the ClientHello, and hand over to exchange.c (HTTP) or
 * relay.c (tunnels).  Every end goes through px_conn_close(), which writes
 * the access-log line.
 *
 *   proxy listener:  HEAD ─▶ RESOLVE ─▶ CONNECT ─┬▶ (CONNECT) 200, HELLO ─▶ RELAY
 *                      ▲                         └▶ (HTTP) REQUEST ─▶ RESPONSE ─┐
 *                      └──────────────────── keep-alive ◀─────────────────────────┘
 *   transparent TLS: HELLO ─▶ RESOLVE ─▶ CONNECT ─▶ RELAY
 *   any state ─▶ FLUSH (a final answer is written) ─▶ closed
 *
 * Sockets: an HTTP client and an HTTP upstream are bufferevents (their
 * bytes are parsed).  A tunnel's upstream is a plain socket with one event
 * until its relay starts (it is only connected), and so is the client of a
 * transparent TLS listener, and a CONNECT client from its 200 on: only a
 * ClientHello is read from them, into c->early (struct px_raw).
 */
#include "conn.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent_struct.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "log.h"
#include "metrics.h"

/* The most px_conn_read_now() takes at once. */
#define READ_NOW_MAX (64 * 1024)
/* What a client may send ahead while its request is decided. */
#define EARLY_MAX (64 * 1024)

/* A fatal TLS alert, access_denied (RFC 8446 section 6.2). */
static const uint8_t tls_alert_denied[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};

/* How long a final answer may take to be read before the socket closes. */
#define FLUSH_MS 2000

int64_t px_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ states */

/* Which states may follow which; the rest are bugs. */
__attribute__((unused)) static bool legal(enum px_conn_state from, enum px_conn_state to)
{
    if (to == PX_S_FLUSH)
        return true;
    switch (from) {
    case PX_S_HEAD: return to == PX_S_RESOLVE || to == PX_S_CONNECT || to == PX_S_REQUEST;
    case PX_S_HELLO: return to == PX_S_RESOLVE || to == PX_S_CONNECT || to == PX_S_RELAY;
    case PX_S_RESOLVE: return to == PX_S_CONNECT;
    case PX_S_CONNECT: return to == PX_S_HELLO || to == PX_S_REQUEST || to == PX_S_RELAY;
    case PX_S_REQUEST: return to == PX_S_RESPONSE || to == PX_S_HEAD;
    case PX_S_RESPONSE: return to == PX_S_HEAD;
    case PX_S_RELAY: return false;
    case PX_S_FLUSH: return false;
    }
    return false;
}

void px_conn_set_state(struct px_conn *c, enum px_conn_state s)
{
    assert(legal(c->state, s));
    c->state = s;
}

/* Close a raw socket (and its event), if in use. */
static void raw_free(struct px_raw *r)
{
    if (r->ev == NULL)
        return;
    event_free(r->ev);
    close(r->fd);
    r->ev = NULL;
}

/* ------------------------------------------------------------ timers */

void px_conn_timeout(struct px_conn *c, uint64_t ms)
{
    if (ms == 0) {
        evtimer_del(c->timer);
        return;
    }
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
}

static void try_connect(struct px_conn *c);
static void on_raw_client(evutil_socket_t fd, short what, void *arg);

/* A relay or exchange wakes up at most this late after its idle deadline. */
static void rearm_idle(struct px_conn *c)
{
    const struct px_config *cfg = px_d.cfg;
    int64_t now = px_now_ms();
    int64_t idle_end = c->t_active_ms + (int64_t)cfg->timeout_idle_ms;
    int64_t life_end = c->t_start_ms + (int64_t)cfg->max_tunnel_life_ms;
    int64_t end = idle_end < life_end ? idle_end : life_end;

    if (end <= now) {
        c->reason = PX_R_TIMEOUT;
        px_conn_close(c, now >= life_end ? "tunnel life over" : "idle");
        return;
    }
    px_conn_timeout(c, (uint64_t)(end - now));
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)fd, (void)what;

    switch (c->state) {
    case PX_S_HEAD:
        /* Between requests nothing is owed; in the middle of one, a 408. */
        if (evbuffer_get_length(bufferevent_get_input(c->cli)) == 0) {
            px_conn_close(c, "keep-alive idle");
            return;
        }
        px_conn_fail(c, 408, PX_R_TIMEOUT, "the request head took too long");
        return;
    case PX_S_HELLO:
        c->reason = PX_R_TIMEOUT;
        c->decision = POLICY_DENY;
        c->decided = true;
        px_conn_close(c, "no ClientHello in time");
        return;
    case PX_S_RESOLVE: px_conn_fail(c, 504, PX_R_DNS_FAIL, "name resolution took too long"); return;
    case PX_S_CONNECT:
        if (c->up != NULL) {
            bufferevent_free(c->up);
            c->up = NULL;
        }
        raw_free(&c->ru);
        try_connect(c);
        return;
    case PX_S_REQUEST:
    case PX_S_RESPONSE:
    case PX_S_RELAY: rearm_idle(c); return;
    case PX_S_FLUSH: px_conn_close(c, "flush"); return;
    }
}

/* ----------------------------------------------------------- logging */

char *px_put_dec(char *p, unsigned v)
{
    char tmp[10];
    size_t n = 0;

    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* "FILE:LINE" of the rule that decided, FILE without its directory (the
 * preset's file name, or "sandbox ID"): what the log line, the
 * X-Egress-Deny header and the 403 body all say. */
static const char *rule_text(const struct px_conn *c, char *buf, size_t len)
{
    const char *file = c->v.rule.file, *slash;

    if (file == NULL || (c->reason > PX_R_BAD_HOST && c->reason != PX_R_REVOKED))
        return NULL;
    slash = strrchr(file, '/');
    file = slash ? slash + 1 : file;
    size_t n = strlen(file);
    if (n > len - 12) /* room for ":" and a line number */
        n = len - 12;
    memcpy(buf, file, n);
    buf[n] = ':';
    *px_put_dec(buf + n + 1, c->v.rule.line) = '\0';
    return buf;
}

/* Anything worth a line: a request was read, or a decision was made. */
static bool has_request(const struct px_conn *c)
{
    return c->decided || c->relaying || c->raw_host[0] != '\0' || c->method[0] != '\0' ||
           c->bytes_up > 0;
}

void px_conn_log(struct px_conn *c)
{
    char rule[512];

    if (c->logged || !has_request(c))
        return;
    c->logged = true;
    if (!c->decided) {
        /* Ended before a verdict: by the client, or by a timeout. */
        c->decision = POLICY_DENY;
        if (c->reason == PX_R_ALLOWED)
            c->reason = PX_R_BAD_REQUEST;
    }
    struct px_log_entry e = {
        .ts_ms = wall_ms(),
        .id = c->id,
        .sandbox = c->sb ? c->sb->id : "default",
        .owner = c->sb ? c->sb->owner : NULL,
        .src = c->src,
        .mode = px_mode_str(c->mode),
        .method = c->method[0] ? c->method : NULL,
        .host = c->host.len ? c->host.text : (!c->relaying && c->raw_host[0] ? c->raw_host : NULL),
        .port = c->port,
        .sni = c->have_sni ? c->sni : NULL,
        .decision = policy_decision_str(c->decision),
        .reason = px_reason_str(c->reason),
        .rule = rule_text(c, rule, sizeof(rule)),
        .upstream = c->upstream[0] ? c->upstream : NULL,
        .country = c->v.country[0] ? c->v.country : NULL,
        .asn = c->v.asn,
        .bytes_up = c->bytes_up,
        .bytes_down = c->bytes_down,
        .duration_ms = (uint64_t)(px_now_ms() - c->t_start_ms),
        .status = c->status,
    };
    px_accesslog_write(&e);
    px_limit_bytes(c->lim, c->bytes_up + c->bytes_down - c->quota_counted, 0);
    c->quota_counted = 0;
    px_metrics_decision(c->msb, c->mode, c->decision, c->reason);
    px_metrics_bytes(c->msb, c->bytes_up, c->bytes_down);
}

void px_conn_end_denied(struct px_conn *c, enum px_reason r, const struct policy_rule_ref *rule,
                        const char *why)
{
    if (rule != NULL)
        c->v.rule = *rule;
    else
        memset(&c->v.rule, 0, sizeof(c->v.rule));
    c->reason = r;
    c->decision = POLICY_DENY;
    c->decided = true;
    px_conn_close(c, why);
}

bool px_conn_count(struct px_conn *c, int dir, size_t n)
{
    if (dir == 0)
        c->bytes_up += n;
    else
        c->bytes_down += n;
    c->quota_counted += n;
    if (px_limit_bytes(c->lim, n, px_d.cfg->quota_bytes_per_sandbox))
        return true;
    c->reason = PX_R_LIMIT;
    px_conn_close(c, "byte quota used up");
    return false;
}

/* ------------------------------------------------------------ closing */

static void unlink_conn(struct px_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        c->w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
}

/* The connection no longer counts as open: not toward max-conns, nor its
 * sandbox's max-conns-per-sandbox, nor active_connections.  At its close,
 * or as soon as its final answer is written (FLUSH): a refused connection
 * that lingers to let its answer be read holds nobody else up. */
static void release(struct px_conn *c)
{
    if (c->released)
        return;
    c->released = true;
    if (c->counted_active)
        px_metrics_active(c->msb, -1);
    c->counted_active = false;
    px_limit_conn_close(c->lim);
    atomic_fetch_sub(&px_d.conns, 1);
}

void px_conn_close(struct px_conn *c, const char *why)
{
    px_log_debug("conn %llu %s: closed: %s", (unsigned long long)c->id, c->src, why);
    px_conn_log(c);
    px_resolve_cancel(c->dns);
    free(c->hello);
    if (c->pending != NULL)
        evbuffer_free(c->pending);
    if (c->up != NULL)
        bufferevent_free(c->up);
    if (c->cli != NULL)
        bufferevent_free(c->cli);
    if (c->relaying) {
        px_relay_free(c);
    } else {
        raw_free(&c->rc);
        raw_free(&c->ru);
        free(c->early);
    }
    event_free(c->timer);
    release(c);
    px_metrics_sandbox_put(c->msb);
    px_limit_put(c->lim);
    px_world_put(c->world);
    unlink_conn(c);
    c->w->n_conns--;
    free(c);
}

void px_conn_close_all(struct px_worker *w, bool idle_only)
{
    struct px_conn *c = w->conns, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        if (!idle_only ||
            (c->state == PX_S_HEAD && evbuffer_get_length(bufferevent_get_input(c->cli)) == 0))
            px_conn_close(c, idle_only ? "draining" : "shutting down");
    }
}

/* FLUSH: the answer is out; shut our side and wait (briefly) for the
 * client to close, reading and dropping what it still sends, so the
 * kernel does not reset the connection before the answer is read. */
static void on_flush_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
}

static void on_flush_written(struct bufferevent *bev, void *arg)
{
    (void)arg;
    shutdown(bufferevent_getfd(bev), SHUT_WR);
}

static void on_flush_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)what;
    px_conn_close(arg, "client gone after the answer");
}

void px_conn_flush_close(struct px_conn *c)
{
    assert(!c->relaying);
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    raw_free(&c->ru);
    px_resolve_cancel(c->dns);
    c->dns = NULL;
    px_conn_log(c);
    px_conn_set_state(c, PX_S_FLUSH);
    release(c);
    px_conn_timeout(c, FLUSH_MS);
    if (c->rc.ev != NULL) {
        /* A raw client's answers went out with send(2) at once: shut our
         * side now, and read until the client ends (on_raw_client). */
        shutdown(c->rc.fd, SHUT_WR);
        event_add(c->rc.ev, NULL);
        return;
    }
    bufferevent_setcb(c->cli, on_flush_read, on_flush_written, on_flush_event, c);
    bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
    bufferevent_enable(c->cli, EV_READ | EV_WRITE);
    if (evbuffer_get_length(bufferevent_get_output(c->cli)) == 0)
        shutdown(bufferevent_getfd(c->cli), SHUT_WR);
}

/* ------------------------------------------------------------ answers */

static const char *status_text(unsigned s)
{
    switch (s) {
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    }
    return "Error";
}

/* Whether the client still expects an HTTP answer (not a TLS stream). */
static bool speaks_http(const struct px_conn *c)
{
    if (c->l->kind == PX_L_TLS)
        return false;
    return c->mode != PX_MODE_CONNECT || c->state == PX_S_HEAD || c->state == PX_S_RESOLVE ||
           c->state == PX_S_CONNECT;
}

static void answer(struct px_conn *c, unsigned status, const char *extra_header, const char *body)
{
    struct evbuffer *out = bufferevent_get_output(c->cli);

    c->status = status;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %u %s\r\n%sContent-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                        status, status_text(status), extra_header ? extra_header : "", strlen(body),
                        body);
}

void px_conn_deny(struct px_conn *c, enum px_reason r)
{
    char rule[512], hdr[700], body[1024];
    const char *rt;

    c->reason = r;
    c->decision = POLICY_DENY;
    c->decided = true;
    if (!speaks_http(c)) {
        /* A TLS client is a raw socket; at most the 200 went out before,
         * so the socket takes these 7 bytes. */
        assert(c->rc.ev != NULL);
        (void)send(c->rc.fd, tls_alert_denied, sizeof(tls_alert_denied),
                   MSG_NOSIGNAL | MSG_DONTWAIT);
        px_conn_flush_close(c);
        return;
    }
    rt = rule_text(c, rule, sizeof(rule));
    if (rt != NULL) {
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s; rule=%s\r\n", px_reason_str(r), rt);
        snprintf(body, sizeof(body), "egressd: denied (%s; rule=%s): %s:%u\n", px_reason_str(r), rt,
                 c->host.len ? c->host.text : c->raw_host, c->port);
    } else {
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s\r\n", px_reason_str(r));
        snprintf(body, sizeof(body), "egressd: denied (%s): %s:%u\n", px_reason_str(r),
                 c->host.len ? c->host.text : c->raw_host, c->port);
    }
    answer(c, 403, hdr, body);
    px_conn_flush_close(c);
}

void px_conn_fail(struct px_conn *c, unsigned status, enum px_reason r, const char *detail)
{
    char hdr[256] = "", body[512];
    bool refusal = r == PX_R_BAD_REQUEST || r == PX_R_LIMIT || r == PX_R_NOT_ALLOWED ||
                   (r == PX_R_TIMEOUT && status == 408);

    /* A refusal is a deny; a failure on the way (dns_fail, connect_fail,
     * a timeout) keeps the policy's verdict, which allowed the request. */
    c->reason = r;
    if (refusal)
        c->decision = POLICY_DENY;
    c->decided = true;
    if (!speaks_http(c)) {
        px_conn_flush_close(c);
        return;
    }
    if (refusal) {
        /* Refused by egressd itself, not a network fault: the deny contract,
         * with what was wrong in place of the target. */
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s\r\n%s", px_reason_str(r),
                 status == 407 ? "Proxy-Authenticate: Basic realm=\"egressd\"\r\n" : "");
        snprintf(body, sizeof(body), "egressd: denied (%s): %s\n", px_reason_str(r), detail);
    } else {
        /* RFC 9209 Proxy-Status words: the origin, not the policy. */
        snprintf(hdr, sizeof(hdr), "Proxy-Status: egressd; error=%s\r\n",
                 r == PX_R_DNS_FAIL       ? "dns_error"
                 : r == PX_R_CONNECT_FAIL ? "connection_refused"
                 : r == PX_R_TIMEOUT      ? "connection_timeout"
                                          : "proxy_internal_error");
        snprintf(body, sizeof(body), "egressd: %s (%s)\n", detail, px_reason_str(r));
    }
    answer(c, status, hdr, body);
    px_conn_flush_close(c);
}

/* ------------------------------------------------------------ deciding */

static void addr_to_sockaddr(const uint8_t a[16], uint16_t port, struct sockaddr_storage *ss,
                             socklen_t *len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(ss, 0, sizeof(*ss));
    if (memcmp(a, mapped, 12) == 0) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, a + 12, 4);
        *len = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, a, 16);
        *len = sizeof(*s6);
    }
}

/* The 16-byte form of a socket address (IPv4 as ::ffff:a.b.c.d); zeros
 * for any other family. */
static void sockaddr_to16(const struct sockaddr *sa, uint8_t a16[16])
{
    memset(a16, 0, 16);
    if (sa->sa_family == AF_INET) {
        a16[10] = a16[11] = 0xff;
        memcpy(a16 + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(a16, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

/* "ADDR:PORT" ("[v6]:PORT") and the 16-byte form of a socket address.
 * Written out by hand: it runs twice per connection, and printf was a
 * visible part of a short tunnel's user time. */
static void sockaddr_text(const struct sockaddr *sa, char out[INET6_ADDRSTRLEN + 8],
                          uint8_t a16[16])
{
    char *p = out;

    sockaddr_to16(sa, a16);
    if (sa->sa_family == AF_INET) {
        for (int i = 12; i < 16; i++) {
            p = px_put_dec(p, a16[i]);
            *p++ = i < 15 ? '.' : ':';
        }
        p = px_put_dec(p, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        *p++ = '[';
        inet_ntop(AF_INET6, a16, p, INET6_ADDRSTRLEN);
        p += strlen(p);
        *p++ = ']';
        *p++ = ':';
        p = px_put_dec(p, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    } else {
        *p++ = '?';
    }
    *p = '\0';
}

static uint16_t sockaddr_port(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)ss)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

/* The upstream socket fd is connected. */
static void connected(struct px_conn *c, int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    px_metrics_upstream_connect((double)(px_now_ms() - c->t_connect_ms) / 1000.0);
    px_conn_timeout(c, 0);
    px_conn_upstream_ready(c);
}

static void on_up_connect(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;

    if (what & BEV_EVENT_CONNECTED) {
        connected(c, bufferevent_getfd(bev));
        return;
    }
    px_log_debug("conn %llu: connect to %s failed", (unsigned long long)c->id, c->upstream);
    bufferevent_free(c->up);
    c->up = NULL;
    c->connect_refused = true;
    try_connect(c);
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
    px_log_debug("conn %llu: connect to %s failed: %s", (unsigned long long)c->id, c->upstream,
                 strerror(err));
    raw_free(&c->ru);
    c->connect_refused = true;
    try_connect(c);
}

/* Start connecting to c->up_ss; 0, or the errno of a failure at once. */
static int start_connect(struct px_conn *c)
{
    if (c->mode != PX_MODE_CONNECT && c->mode != PX_MODE_TLS) {
        /* HTTP: the upstream is parsed, so it is a bufferevent. */
        c->up = bufferevent_socket_new(c->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
        bufferevent_setcb(c->up, NULL, NULL, on_up_connect, c);
        if (bufferevent_socket_connect(c->up, (struct sockaddr *)&c->up_ss, (int)c->up_len) == 0)
            return 0;
        int err = errno;
        bufferevent_free(c->up);
        c->up = NULL;
        return err;
    }
    int fd = socket(c->up_ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return errno;
    if (connect(fd, (struct sockaddr *)&c->up_ss, c->up_len) == -1 && errno != EINPROGRESS) {
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

/* Connect to the next checked address.  When none is left: 504
 * connection_timeout if every address timed out (timeout-connect), else
 * 502 connection_refused. */
static void try_connect(struct px_conn *c)
{
    uint8_t dummy[16];

    while (c->ans_next < c->ans.n) {
        const uint8_t *a = c->ans.addr[c->ans_next++];
        addr_to_sockaddr(a, c->port, &c->up_ss, &c->up_len);
        sockaddr_text((struct sockaddr *)&c->up_ss, c->upstream, dummy);
        c->t_connect_ms = px_now_ms();
        int err = start_connect(c);
        if (err == 0) {
            px_conn_timeout(c, px_d.cfg->timeout_connect_ms);
            return;
        }
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
            /* Our limit, not the origin's fault. */
            px_conn_fail(c, 503, PX_R_LIMIT, "egressd is out of sockets");
            return;
        }
        px_log_debug("conn %llu: connect to %s failed: %s", (unsigned long long)c->id, c->upstream,
                     strerror(err));
        c->connect_refused = true;
    }
    if (!c->connect_refused) {
        px_conn_fail(c, 504, PX_R_TIMEOUT,
                     "no address of the host answered within timeout-connect");
        return;
    }
    px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "no address of the host accepted the connection");
}

static bool same_addr(const uint8_t a[16], const struct sockaddr_storage *ss)
{
    uint8_t b[16];
    sockaddr_to16((const struct sockaddr *)ss, b);
    return memcmp(a, b, 16) == 0;
}

/* Address phase on every address; a denied one denies the request (a name
 * that answers with a private address beside public ones is not trusted
 * with either).  Transparent connections go where the client aimed, and
 * only if that is one of the name's addresses.  Then connect, or go on
 * with the upstream kept alive for this origin. */
static void check_addresses(struct px_conn *c)
{
    int64_t now = (int64_t)time(NULL);
    struct policy_verdict name = c->v, av;
    bool would_deny = c->decision == POLICY_WOULD_DENY;

    for (size_t i = 0; i < c->ans.n; i++) {
        policy_decide_addr(c->pb, c->ans.addr[i], c->port, &name, now, &av);
        if (i == 0 || av.decision != POLICY_ALLOW) {
            memcpy(c->v.country, av.country, sizeof(av.country));
            c->v.asn = av.asn;
        }
        if (av.decision == POLICY_DENY) {
            c->v = av;
            px_conn_deny(c, (enum px_reason)av.reason);
            return;
        }
        if (av.decision == POLICY_WOULD_DENY && !would_deny) {
            would_deny = true;
            c->v = av;
            c->reason = (enum px_reason)av.reason;
        }
    }
    c->decision = would_deny ? POLICY_WOULD_DENY : POLICY_ALLOW;
    if (!would_deny)
        c->reason = PX_R_ALLOWED;
    c->decided = true;
    if (c->redirected && c->l->kind != PX_L_PROXY) {
        size_t i = 0;
        while (i < c->ans.n && !same_addr(c->ans.addr[i], &c->orig_dst))
            i++;
        if (i == c->ans.n) {
            c->v.rule.file = NULL;
            px_conn_deny(c, c->mode == PX_MODE_TLS ? PX_R_SNI_MISMATCH : PX_R_BAD_HOST);
            return;
        }
        memmove(c->ans.addr[0], c->ans.addr[i], 16);
        c->ans.n = 1;
    }
    if (c->up != NULL) {
        px_conn_upstream_ready(c); /* kept alive: it is connected to that address */
        return;
    }
    c->ans_next = 0;
    c->connect_refused = false;
    px_conn_set_state(c, PX_S_CONNECT);
    try_connect(c);
}

static void on_dns(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct px_conn *c = arg;
    static const char *const words[] = {"ok", "nxdomain", "fail"};

    c->dns = NULL;
    if (res == PX_DNS_BUSY) {
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox has too many name lookups in flight");
        return;
    }
    if (res == PX_DNS_OK)
        px_metrics_dns(a->source == PX_DNS_SRC_HOSTS   ? "hosts"
                       : a->source == PX_DNS_SRC_CACHE ? "cache"
                                                       : "ok");
    else
        px_metrics_dns(words[res]);
    if (res != PX_DNS_OK) {
        px_conn_fail(c, 502, PX_R_DNS_FAIL,
                     res == PX_DNS_NXDOMAIN ? "the name does not resolve"
                                            : "the resolver did not answer");
        return;
    }
    c->ans = *a;
    check_addresses(c);
}

/* The addresses to judge: the kept upstream's, the IP literal, or the
 * name's, from the resolver (maybe later, in on_dns). */
static void find_addresses(struct px_conn *c)
{
    if (c->up != NULL) {
        c->ans.n = 1;
        sockaddr_to16((struct sockaddr *)&c->up_ss, c->ans.addr[0]);
        check_addresses(c);
        return;
    }
    px_conn_set_state(c, PX_S_RESOLVE);
    if (c->host.kind != POLICY_HOST_NAME) {
        c->ans.n = 1;
        memcpy(c->ans.addr[0], c->host.addr, 16);
        check_addresses(c);
        return;
    }
    px_conn_timeout(c, 30000); /* the resolver's own timeouts end sooner */
    c->dns =
        px_resolve_shared(c->w->resolver, c->world->hosts, c->host.text, px_limit_dns_share(c->lim),
                          (unsigned)px_d.cfg->max_lookups_per_sandbox, on_dns, c);
}

static bool expired(const struct px_sandbox *sb, int64_t now)
{
    return sb->expires != 0 && now >= sb->expires;
}

/* Expiry, a binding without its preset, the host, the name phase, the
 * quota; then the addresses.  May close. */
static void decide(struct px_conn *c)
{
    int64_t now = (int64_t)time(NULL);

    if (c->sb != NULL && (c->pb == NULL || expired(c->sb, now))) {
        memset(&c->v, 0, sizeof(c->v));
        px_conn_deny(c, PX_R_NOT_ALLOWED);
        return;
    }
    if (c->host.len == 0) {
        px_conn_deny(c, PX_R_BAD_HOST);
        return;
    }
    policy_decide_name(c->pb, &c->host, c->port, now, &c->v);
    c->decision = c->v.decision;
    c->reason = (enum px_reason)c->v.reason;
    if (c->v.decision == POLICY_DENY) {
        px_conn_deny(c, c->reason);
        return;
    }
    if (px_limit_over_quota(c->lim, px_d.cfg->quota_bytes_per_sandbox)) {
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox has used up its byte quota");
        return;
    }
    find_addresses(c);
}

void px_conn_judge(struct px_conn *c, const char *auth, size_t auth_len)
{
    struct px_world *old = c->world;

    /* The world of this decision is the current one; what pointed into the
     * old one (the sandbox, its binding) is found again in the new one
     * before the old one is let go. */
    c->world = px_world_get();
    enum px_identity who = px_conn_identify(c, auth, auth_len);
    px_world_put(old);
    switch (who) {
    case PX_ID_OK: decide(c); return;
    case PX_ID_UNKNOWN:
        px_conn_fail(c, 407, PX_R_NOT_ALLOWED, "unknown sandbox credentials");
        return;
    case PX_ID_LIMIT:
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox opens too many connections");
        return;
    }
}

/* ------------------------------------------------------------ identity */

static void take_msb(struct px_conn *c)
{
    const char *id = c->sb ? c->sb->id : "default";
    const char *owner = c->sb ? c->sb->owner : NULL;
    struct px_msb *m = px_metrics_sandbox_get(id, owner);

    if (c->counted_active)
        px_metrics_active(c->msb, -1);
    px_metrics_sandbox_put(c->msb);
    c->msb = m;
    px_metrics_active(m, +1);
    c->counted_active = true;
}

/* Let go of the connection's limits handle (and its count as open). */
static void drop_limit(struct px_conn *c)
{
    px_limit_conn_close(c->lim);
    px_limit_put(c->lim);
    c->lim = NULL;
}

/* Count the connection against its sandbox's limits (a source without a
 * binding has its own); false when they refuse it (nothing counted). */
static bool take_limit(struct px_conn *c)
{
    const struct px_config *cfg = px_d.cfg;
    struct px_limit *l = c->sb ? px_limit_get(c->sb->id) : px_limit_get_source(c->src_addr);
    bool rate;

    drop_limit(c);
    if (!px_limit_conn_open(l, cfg->max_conns_per_sandbox, cfg->rate_new_conns_per_sandbox,
                            &rate)) {
        px_limit_put(l);
        return false;
    }
    c->lim = l;
    return true;
}

/* The same sandbox (or both none), whatever world each was found in. */
static bool same_sandbox(const struct px_sandbox *a, const struct px_sandbox *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a->id, b->id) == 0);
}

enum px_identity px_conn_identify(struct px_conn *c, const char *auth, size_t auth_len)
{
    const struct px_sandbox *sb = NULL;
    enum px_identity who = PX_ID_OK;

    if (auth != NULL)
        sb = px_world_by_basic_auth(c->world, auth, auth_len);
    if (auth != NULL && sb == NULL)
        who = PX_ID_UNKNOWN; /* answered as the source, which is who asked */
    if (sb == NULL)
        sb = px_world_by_addr(c->world, c->src_addr);
    bool changed = c->msb == NULL || !same_sandbox(sb, c->sb);
    c->sb = sb;
    c->pb = sb ? sb->pb : c->world->default_pb;
    c->by_auth = who == PX_ID_OK && auth != NULL;
    if (!changed)
        return who;
    take_msb(c);
    if (!take_limit(c))
        return PX_ID_LIMIT;
    return who;
}

/* ------------------------------------------------------------ revocation */

/* Who c is in world w, found as it was found at its last decision: by id
 * and the same token, or by its source address. */
static const struct px_sandbox *identity_in(const struct px_conn *c, const struct px_world *w)
{
    if (!c->by_auth)
        return px_world_by_addr(w, c->src_addr);
    const struct px_sandbox *sb = px_world_by_id(w, c->sb->id);
    return sb != NULL && strcmp(sb->token, c->sb->token) == 0 ? sb : NULL;
}

/* Whether c holds a decision that is in force now: a request or a tunnel
 * past its name phase.  (Between requests, the next one is judged anew;
 * a transparent TLS client before its hello has not asked for a host.) */
static bool holds_verdict(const struct px_conn *c)
{
    switch (c->state) {
    case PX_S_RESOLVE:
    case PX_S_CONNECT:
    case PX_S_REQUEST:
    case PX_S_RESPONSE:
    case PX_S_RELAY: return true;
    case PX_S_HELLO: return c->mode == PX_MODE_CONNECT;
    case PX_S_HEAD:
    case PX_S_FLUSH: return false;
    }
    return false;
}

/* Whether binding pb (in world w) denies what c holds: the name phase, and
 * the address phase on the address c is connected (or connecting) to.
 * Fills *v with the verdict that decided. */
static bool denied_now(const struct px_conn *c, const struct policy_binding *pb,
                       struct policy_verdict *v)
{
    int64_t now = (int64_t)time(NULL);
    struct policy_verdict name;
    uint8_t a[16];

    if (policy_decide_name(pb, &c->host, c->port, now, v) == POLICY_DENY)
        return true;
    if (c->state == PX_S_RESOLVE)
        return false; /* its addresses are judged in this world when they come */
    name = *v;
    sockaddr_to16((const struct sockaddr *)&c->up_ss, a);
    return policy_decide_addr(pb, a, c->port, &name, now, v) == POLICY_DENY;
}

/* Judge c from now on in world w (sandbox sb, binding pb). */
static void adopt(struct px_conn *c, struct px_world *w, const struct px_sandbox *sb,
                  const struct policy_binding *pb)
{
    struct px_world *old = c->world;

    c->world = px_world_ref(w);
    c->sb = sb;
    c->pb = pb;
    px_world_put(old);
}

/* Close c as revoked; `rule` (in c->world) is what denies it now, if a
 * rule does.  Before a tunnel or an answer has started, the client gets
 * the deny contract (403, or the TLS alert); later the stream just ends. */
static void revoke_conn(struct px_conn *c, const struct policy_rule_ref *rule)
{
    if (rule != NULL)
        c->v.rule = *rule;
    else
        memset(&c->v.rule, 0, sizeof(c->v.rule));
    if (c->state == PX_S_RESOLVE || c->state == PX_S_CONNECT || c->state == PX_S_HELLO) {
        px_conn_deny(c, PX_R_REVOKED);
        return;
    }
    if (c->state == PX_S_HEAD) {
        px_conn_close(c, "revoked"); /* between requests: no request to log */
        return;
    }
    px_conn_end_denied(c, PX_R_REVOKED, rule, "revoked");
}

/* Judge c again in world w (see px_conn_recheck_all).  May close. */
static void recheck(struct px_conn *c, struct px_world *w, int64_t now)
{
    if (c->state == PX_S_FLUSH)
        return;
    const struct px_sandbox *sb = identity_in(c, w);
    if (!same_sandbox(sb, c->sb) || (sb != NULL && (sb->pb == NULL || expired(sb, now)))) {
        revoke_conn(c, NULL);
        return;
    }
    const struct policy_binding *pb = sb ? sb->pb : w->default_pb;
    struct policy_verdict v;
    bool judge_again = pb != c->pb && holds_verdict(c);
    adopt(c, w, sb, pb);
    if (!judge_again)
        return; /* the same compiled binding, or nothing held: nothing to judge */
    if (denied_now(c, pb, &v)) {
        revoke_conn(c, &v.rule);
        return;
    }
    c->v.rule = v.rule; /* what allows it now, in the world it now holds */
}

void px_conn_recheck_all(struct px_worker *w)
{
    struct px_world *world = px_world_get();
    int64_t now = (int64_t)time(NULL);
    struct px_conn *c = w->conns, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        recheck(c, world, now);
    }
    px_world_put(world);
}

/* ------------------------------------------------------------ ClientHello */

bool px_conn_names_host(const struct px_conn *c, const char *name, size_t len)
{
    struct policy_host h;

    return policy_host_normalize(name, len, &h) == POLICY_HOST_OK &&
           strcmp(h.text, c->host.text) == 0;
}

/* CONNECT without SNI: allowed when the policy allows the address it goes
 * to as an IP literal (or `require-sni off`). */
static bool literal_allowed(struct px_conn *c)
{
    struct policy_host h;
    struct policy_verdict v;
    char ip[INET6_ADDRSTRLEN + 2];
    uint8_t a[16];

    if (c->host.kind != POLICY_HOST_NAME || !px_d.cfg->require_sni)
        return true;
    sockaddr_to16((struct sockaddr *)&c->up_ss, a);
    if (c->up_ss.ss_family == AF_INET)
        inet_ntop(AF_INET, a + 12, ip, sizeof(ip));
    else {
        ip[0] = '[';
        inet_ntop(AF_INET6, a, ip + 1, sizeof(ip) - 2);
        strcat(ip, "]");
    }
    if (policy_host_normalize(ip, strlen(ip), &h) != POLICY_HOST_OK)
        return false;
    return policy_decide_name(c->pb, &h, c->port, (int64_t)time(NULL), &v) != POLICY_DENY;
}

/* The hello is complete: check it (CONNECT) or decide on it (transparent). */
static void hello_done(struct px_conn *c, enum sni_result r)
{
    struct sni_hello *h = &c->hello->hello;
    enum sni_error e = c->hello->error;

    if (r == SNI_NOT_TLS || r == SNI_MALFORMED) {
        bool name = r == SNI_MALFORMED && sni_error_is_name(e);
        memset(&c->v.rule, 0, sizeof(c->v.rule));
        px_conn_deny(c, name ? PX_R_BAD_HOST : PX_R_NOT_TLS);
        return;
    }
    if (h->ech && !px_d.cfg->ech_allow) {
        memset(&c->v.rule, 0, sizeof(c->v.rule));
        px_conn_deny(c, PX_R_ECH);
        return;
    }
    if (r == SNI_OK) {
        memcpy(c->sni, h->host.ptr, h->host.len);
        c->sni[h->host.len] = '\0';
        c->have_sni = true;
    }
    c->hello_len = h->record_bytes; /* the relay watches what follows (rehello.c) */
    if (c->mode == PX_MODE_CONNECT) {
        if (r == SNI_OK && !px_conn_names_host(c, c->sni, strlen(c->sni))) {
            memset(&c->v.rule, 0, sizeof(c->v.rule));
            px_conn_deny(c, PX_R_SNI_MISMATCH);
            return;
        }
        if (r == SNI_NO_SNI && !literal_allowed(c)) {
            memset(&c->v.rule, 0, sizeof(c->v.rule));
            px_conn_deny(c, PX_R_NO_SNI);
            return;
        }
        free(c->hello);
        c->hello = NULL;
        px_relay_start(c);
        return;
    }
    /* Transparent TLS: the SNI is the host. */
    free(c->hello);
    c->hello = NULL;
    if (!c->have_sni) {
        c->decision = POLICY_DENY;
        px_conn_deny(c, PX_R_NO_SNI);
        return;
    }
    _Static_assert(sizeof(c->raw_host) > SNI_HOST_MAX, "an SNI fits in raw_host");
    memcpy(c->raw_host, c->sni, strlen(c->sni) + 1);
    c->port = c->redirected ? sockaddr_port(&c->orig_dst) : c->l->upstream_port;
    if (policy_host_normalize(c->sni, strlen(c->sni), &c->host) != POLICY_HOST_OK) {
        c->host.len = 0;
        px_conn_deny(c, PX_R_BAD_HOST);
        return;
    }
    px_conn_judge(c, NULL, 0);
}

/* Feed the bytes not yet seen by the parser; the bytes stay in c->early,
 * to be relayed once the hello passed. */
static void on_hello_bytes(struct px_conn *c)
{
    size_t len, seen = c->hello->consumed;
    enum sni_result r = c->hello->result;
    const uint8_t *p;

    p = c->early;
    len = c->early_len;
    if (len > seen)
        r = sni_parser_feed(c->hello, p + seen, len - seen);
    if (r == SNI_NEED_MORE)
        return;
    hello_done(c, r);
}

static void start_hello(struct px_conn *c)
{
    c->hello = malloc(sizeof(*c->hello));
    if (c->hello == NULL)
        abort();
    sni_parser_init(c->hello);
    if (c->state != PX_S_HELLO)
        px_conn_set_state(c, PX_S_HELLO);
    px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    on_hello_bytes(c); /* what came with the CONNECT head */
}

void px_conn_write_now(struct bufferevent *bev)
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

void px_conn_read_now(struct bufferevent *bev)
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

static const char connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/* Take the client's socket from its bufferevent (after its CONNECT head):
 * what the bufferevent read beyond the head moves to c->early.  0, or -1
 * when the connection was closed. */
static int client_to_raw(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t n = evbuffer_get_length(in);

    assert(c->rc.ev == NULL && c->early == NULL);
    if (evbuffer_get_length(bufferevent_get_output(c->cli)) > 0) {
        px_conn_close(c, "client output left before the 200"); /* a bug, not a client */
        return -1;
    }
    if (n > 0) {
        c->early = malloc(n);
        if (c->early == NULL)
            abort();
        evbuffer_remove(in, c->early, n);
        c->early_len = n;
    }
    c->rc.fd = bufferevent_getfd(c->cli);
    c->rc.ev = event_new(c->w->base, c->rc.fd, EV_READ | EV_PERSIST, on_raw_client, c);
    if (c->rc.ev == NULL)
        abort();
    /* Added before the bufferevent's read event goes: the socket's epoll
     * entry stays as it is (see px_relay_start). */
    if (c->early_len < EARLY_MAX)
        event_add(c->rc.ev, NULL);
    bufferevent_setfd(c->cli, -1);
    bufferevent_free(c->cli);
    c->cli = NULL;
    return 0;
}

void px_conn_upstream_ready(struct px_conn *c)
{
    c->t_active_ms = px_now_ms();
    switch (c->mode) {
    case PX_MODE_CONNECT:
        /* From the 200 on nothing of the client is parsed but its hello. */
        if (client_to_raw(c) < 0)
            return;
        c->status = 200;
        if (send(c->rc.fd, connect_ok, sizeof(connect_ok) - 1, MSG_NOSIGNAL) !=
            (ssize_t)sizeof(connect_ok) - 1) {
            /* Nothing was sent before: only a client that is gone does not
             * take 39 bytes. */
            px_conn_close(c, "client error");
            return;
        }
        if (c->v.raw) {
            px_relay_start(c);
            return;
        }
        start_hello(c);
        return;
    case PX_MODE_TLS: px_relay_start(c); return;
    case PX_MODE_HTTP:
    case PX_MODE_PLAIN: px_exchange_start(c); return;
    case PX_MODE_COUNT: break;
    }
    assert(!"mode");
}

/* ------------------------------------------------------------ client I/O */

static void on_cli_read(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    switch (c->state) {
    case PX_S_HEAD: px_exchange_on_head(c); return;
    default:
        /* Deciding, resolving, connecting: bytes wait in the input for
         * their turn.  Reading stays on (an end of the client is seen at
         * once, and no epoll change is spent), up to a bound. */
        if (evbuffer_get_length(bufferevent_get_input(c->cli)) >= EARLY_MAX)
            bufferevent_disable(c->cli, EV_READ);
        return;
    }
}

/* A raw client (transparent TLS; CONNECT after its 200) before its relay:
 * what it sends is kept in
 * c->early (at most EARLY_MAX; then reading waits for the relay) and fed to
 * the ClientHello parser while that runs.  After a final answer (FLUSH),
 * what it sends is dropped until it ends. */
static void on_raw_client(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    uint8_t buf[16384];
    size_t room = sizeof(buf);
    (void)what;

    if (c->state != PX_S_FLUSH) {
        if (c->early_len >= EARLY_MAX) {
            event_del(c->rc.ev); /* the rest waits in the socket for the relay */
            return;
        }
        if (room > EARLY_MAX - c->early_len)
            room = EARLY_MAX - c->early_len;
    }
    ssize_t n = recv(fd, buf, room, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (c->state == PX_S_FLUSH) {
        if (n <= 0)
            px_conn_close(c, "client gone after the answer");
        return;
    }
    if (n <= 0) {
        px_conn_close(c, n == 0 ? "client closed" : "client error");
        return;
    }
    uint8_t *p = realloc(c->early, c->early_len + (size_t)n);
    if (p == NULL)
        abort();
    memcpy(p + c->early_len, buf, (size_t)n);
    c->early = p;
    c->early_len += (size_t)n;
    if (c->early_len >= EARLY_MAX)
        event_del(c->rc.ev);
    if (c->state == PX_S_HELLO)
        on_hello_bytes(c);
}

void px_conn_on_client_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    /* An HTTP client that half-closed after a whole request (being
     * decided, sent or answered) is answered: libevent stopped reading at
     * the end, and the next head phase reads again, handles what was
     * pipelined and sees the end once more.  (In a head, req_done is the
     * last request's; a CONNECT client that ends before its tunnel is up
     * is gone.) */
    if (what == (BEV_EVENT_READING | BEV_EVENT_EOF) &&
        (c->mode == PX_MODE_HTTP || c->mode == PX_MODE_PLAIN) && c->state != PX_S_HEAD &&
        c->req_done)
        return;
    if (what & BEV_EVENT_ERROR)
        px_conn_close(c, "client error");
    else
        px_conn_close(c, "client closed");
}

void px_conn_watch_client(struct px_conn *c)
{
    bufferevent_setcb(c->cli, on_cli_read, NULL, px_conn_on_client_event, c);
    bufferevent_setwatermark(c->cli, EV_WRITE | EV_READ, 0, 0);
    /* Writing stays enabled (a new bufferevent's default): the write
     * event is added when output is queued, and not polled for before. */
    bufferevent_enable(c->cli, EV_READ);
}

/* The client's real destination, if a firewall redirected it here. */
static void original_dst(struct px_conn *c, evutil_socket_t fd)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof(c->orig_dst), llen = sizeof(local);
    int r;

    if (c->l->addr->ss.ss_family == AF_INET6)
        r = getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &c->orig_dst, &len);
    else
        r = getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &c->orig_dst, &len);
    if (r == -1)
        return;
    /* The listener's own address, unless it listens on all of them. */
    const struct sockaddr_storage *lss = &c->l->addr->ss;
    bool any = lss->ss_family == AF_INET6
                   ? IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)lss)->sin6_addr)
                   : ((const struct sockaddr_in *)lss)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (!any)
        local = *lss;
    else if (getsockname(fd, (struct sockaddr *)&local, &llen) == -1)
        return;
    uint8_t a[16], b[16];
    sockaddr_to16((struct sockaddr *)&c->orig_dst, a);
    sockaddr_to16((struct sockaddr *)&local, b);
    c->redirected = memcmp(a, b, 16) != 0 || sockaddr_port(&c->orig_dst) != sockaddr_port(&local);
}

void px_conn_accept(struct px_worker *w, const struct px_listener_spec *l, evutil_socket_t fd,
                    const struct sockaddr *sa, int salen)
{
    struct px_conn *c = calloc(1, sizeof(*c));
    (void)salen;

    if (c == NULL)
        abort();
    c->w = w;
    c->l = l;
    c->id = atomic_fetch_add(&px_d.next_id, 1);
    c->t_accept_ms = c->t_start_ms = c->t_active_ms = px_now_ms();
    sockaddr_text(sa, c->src, c->src_addr);
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    long open = atomic_fetch_add(&px_d.conns, 1) + 1;
    /* TCP_NODELAY comes from the listener (worker.c). */
    if (l->kind == PX_L_TLS) {
        c->rc.fd = fd;
        c->rc.ev = event_new(w->base, fd, EV_READ | EV_PERSIST, on_raw_client, c);
        if (c->rc.ev == NULL)
            abort();
        event_add(c->rc.ev, NULL);
    } else {
        c->cli = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
        px_conn_watch_client(c);
    }
    c->timer = evtimer_new(w->base, on_timer, c);
    c->world = px_world_get();
    enum px_identity who = px_conn_identify(c, NULL, 0);
    c->mode = l->kind == PX_L_TLS    ? PX_MODE_TLS
              : l->kind == PX_L_HTTP ? PX_MODE_PLAIN
                                     : PX_MODE_HTTP;
    c->state = l->kind == PX_L_TLS ? PX_S_HELLO : PX_S_HEAD;
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
        start_hello(c);
        return;
    }
    bufferevent_enable(c->cli, EV_READ);
    /* The first request head's clock runs from the accept, not from its
     * first byte: a client that waits before it starts has no more time. */
    px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    c->head_started = true;
}
