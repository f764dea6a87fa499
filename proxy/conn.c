/*
 * conn.c - one client connection: the object, the state ladder, the
 * timer, and the one close path with its access-log line.  It names no
 * phase (conn.h lists them): each says what its state's timer does and
 * how to let go of what it holds.
 *
 *   proxy listener:  HEAD ─▶ RESOLVE ─▶ CONNECT ─┬▶ (CONNECT) 200, HELLO ─▶ RELAY
 *                      ▲                         └▶ (HTTP) REQUEST ─▶ RESPONSE ─┐
 *                      └──────────────────── keep-alive ◀─────────────────────────┘
 *   transparent TLS: HELLO ─▶ RESOLVE ─▶ CONNECT ─▶ RELAY
 *   intercepted:     (inside the tunnel) HEAD ─▶ REQUEST ─▶ RESPONSE ─▶ HEAD ...
 *                    RESPONSE ─▶ UPGRADED (the origin's 101 to WebSocket)
 *   any state but RELAY ─▶ FLUSH (a final answer is written) ─▶ closed
 */
#include "conn.h"

#include <assert.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "denials.h"
#include "log.h"
#include "metrics.h"

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

/* Which states may follow which (the diagram above); the rest are bugs. */
static bool legal(enum px_conn_state from, enum px_conn_state to)
{
    if (to == PX_S_FLUSH)
        return from != PX_S_RELAY && from != PX_S_FLUSH;
    switch (from) {
    case PX_S_HEAD: return to == PX_S_RESOLVE || to == PX_S_REQUEST;
    case PX_S_HELLO: return to == PX_S_RESOLVE || to == PX_S_RELAY || to == PX_S_HEAD;
    case PX_S_RESOLVE: return to == PX_S_CONNECT;
    case PX_S_CONNECT:
        return to == PX_S_HELLO || to == PX_S_REQUEST || to == PX_S_RELAY || to == PX_S_HEAD;
    case PX_S_REQUEST: return to == PX_S_RESPONSE || to == PX_S_HEAD;
    case PX_S_RESPONSE: return to == PX_S_HEAD || to == PX_S_UPGRADED;
    case PX_S_UPGRADED:
    case PX_S_RELAY:
    case PX_S_FLUSH: return false;
    }
    return false;
}

void px_conn_set_state(struct px_conn *c, enum px_conn_state s, px_conn_hook *on_timeout)
{
    /* Checked in every build: it is one comparison, and a connection in a
     * state its code does not expect would misuse the tunnel union. */
    if (!legal(c->state, s)) {
        px_log_warnx("conn %llu: illegal state change %s -> %s", (unsigned long long)c->id,
                     px_state_str(c->state), px_state_str(s));
        abort();
    }
    c->state = s;
    c->on_timeout = on_timeout;
}

void px_conn_on_release(struct px_conn *c, px_conn_hook *fn)
{
    size_t i = 0;

    while (i < PX_CONN_RELEASE_MAX && c->release[i] != NULL && c->release[i] != fn)
        i++;
    assert(i < PX_CONN_RELEASE_MAX); /* a phase that holds more must say so above */
    c->release[i] = fn;
}

const char *px_state_str(enum px_conn_state s)
{
    static const char *const words[] = {"head",     "hello", "resolve",  "connect", "request",
                                        "response", "relay", "upgraded", "flush"};
    return (unsigned)s < sizeof(words) / sizeof(words[0]) ? words[s] : "?";
}

void px_raw_free(struct px_raw *r)
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
        evtimer_del(&c->timer);
        return;
    }
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(&c->timer, &tv);
}

void px_conn_on_idle(struct px_conn *c)
{
    const struct px_config *cfg = px_d.cfg;
    int64_t now = px_now_ms();
    int64_t idle_end = c->t_active_ms + (int64_t)cfg->timeout_idle_ms;
    int64_t life_end = c->t_start_ms + (int64_t)cfg->max_tunnel_life_ms;
    int64_t end = idle_end < life_end ? idle_end : life_end;

    if (end <= now) {
        c->rq.reason = PX_R_TIMEOUT;
        px_conn_ended(c, PX_END_TIMEOUT);
        px_conn_close(c, now >= life_end ? "tunnel life over" : "idle");
        return;
    }
    px_conn_timeout(c, (uint64_t)(end - now));
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)fd, (void)what;

    c->on_timeout(c);
}

/* ----------------------------------------------------------- logging */

const char *px_conn_rule_text(const struct px_conn *c, char *buf, size_t len)
{
    const char *file = c->rq.v.rule.file, *slash;

    if (file == NULL || !px_reason_has_rule(c->rq.reason))
        return NULL;
    slash = strrchr(file, '/');
    file = slash ? slash + 1 : file;
    size_t n = strlen(file);
    if (n > len - 12) /* room for ":" and a line number */
        n = len - 12;
    memcpy(buf, file, n);
    buf[n] = ':';
    *px_put_dec(buf + n + 1, c->rq.v.rule.line) = '\0';
    return buf;
}

/* Anything worth a line: a request was read, or a decision was made. */
static bool has_request(const struct px_conn *c)
{
    return c->rq.decided || c->state == PX_S_RELAY || c->raw_host != NULL ||
           c->rq.method[0] != '\0' || c->bytes_up > 0;
}

void px_conn_ended(struct px_conn *c, enum px_end by)
{
    if (c->end_by != PX_END_NONE || by == PX_END_NONE)
        return;
    c->end_by = by;
    c->end_phase = c->state;
}

/* "WHO/PHASE" of who ended c, into buf; NULL while nobody has (a request
 * of a connection kept alive for the next). */
static const char *termination(const struct px_conn *c, char *buf, size_t len)
{
    if (c->end_by == PX_END_NONE)
        return NULL;
    size_t n = strlen(px_end_str(c->end_by));
    const char *phase = px_state_str(c->end_phase);
    if (n + 1 + strlen(phase) >= len)
        return NULL;
    memcpy(buf, px_end_str(c->end_by), n);
    buf[n] = '/';
    strcpy(buf + n + 1, phase);
    return buf;
}

/* The text a log line's entry points into. */
struct line_text {
    char rule[512], end[32], src[PX_SOCKADDR_TEXT_MAX], upstream[PX_SOCKADDR_TEXT_MAX];
};

/* The entry of the current request's log line, its text in t. */
static void log_entry(const struct px_conn *c, struct px_log_entry *e, struct line_text *t)
{
    const struct px_request *rq = &c->rq;
    bool relaying = c->state == PX_S_RELAY;

    *e = (struct px_log_entry){
        .ts_ms = wall_ms(),
        .id = c->id,
        .sandbox = c->sb ? c->sb->id : "default",
        .owner = c->sb ? c->sb->owner : NULL,
        .src = px_conn_src_text(c, t->src),
        .mode = px_mode_str(c->mode),
        .method = rq->method[0] ? rq->method : NULL,
        .host = rq->host.len ? rq->host.text : (!relaying ? c->raw_host : NULL),
        .port = rq->port,
        .sni = rq->sni,
        .decision = policy_decision_str(rq->decision),
        .reason = px_reason_str(rq->reason),
        .rule = px_conn_rule_text(c, t->rule, sizeof(t->rule)),
        .upstream = px_conn_upstream_text(c, t->upstream),
        .country = rq->v.country[0] ? rq->v.country : NULL,
        .asn = rq->v.asn,
        .bytes_up = c->bytes_up,
        .bytes_down = c->bytes_down,
        .duration_ms = (uint64_t)(px_now_ms() - c->t_start_ms),
        .status = rq->status,
        .termination = termination(c, t->end, sizeof(t->end)),
        .inject = rq->inject,
        .path = c->ex != NULL && c->ex->path[0] ? c->ex->path : NULL,
    };
}

/* Keep a denial of a bound sandbox for the admin API (denials.h). */
static void note_denial(const char *id, const struct px_log_entry *e)
{
    struct px_denial d = {
        .ts_ms = e->ts_ms,
        .mode = e->mode,
        .method = e->method,
        .path = e->path,
        .host = e->host,
        .port = e->port,
        .sni = e->sni,
        .reason = e->reason,
        .rule = e->rule,
        .status = e->status,
    };
    px_denials_note(id, &d);
}

void px_conn_log(struct px_conn *c)
{
    struct line_text t;
    struct px_log_entry e;

    if (c->rq.logged || !has_request(c))
        return;
    c->rq.logged = true;
    if (!c->rq.decided) {
        /* Ended before a verdict: by the client, or by a timeout. */
        c->rq.decision = POLICY_DENY;
        if (c->rq.reason == PX_R_ALLOWED)
            c->rq.reason = PX_R_BAD_REQUEST;
    }
    log_entry(c, &e, &t);
    px_accesslog_write(&e);
    if (c->sb != NULL && c->rq.decision == POLICY_DENY)
        note_denial(c->sb->id, &e);
    px_limit_bytes(c->lim, c->bytes_up + c->bytes_down - c->quota_counted, 0);
    c->quota_counted = 0;
    px_metrics_decision(c->msb, c->mode, c->rq.decision, c->rq.reason);
    px_metrics_bytes(c->msb, c->bytes_up, c->bytes_down);
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
    c->rq.reason = PX_R_LIMIT;
    px_conn_ended(c, PX_END_LIMIT);
    px_conn_close(c, "byte quota used up");
    return false;
}

const char *px_conn_src_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX])
{
    union px_sockaddr sa;
    socklen_t len;
    uint8_t a16[16];

    px_sockaddr_from16(c->src_addr, c->src_port, &sa, &len);
    px_sockaddr_text(&sa.sa, buf, a16);
    return buf;
}

const char *px_conn_upstream_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX])
{
    uint8_t a16[16];

    if (c->up_len == 0)
        return NULL;
    px_sockaddr_text(&c->up_ss.sa, buf, a16);
    return buf;
}

void px_request_clear_sni(struct px_request *rq)
{
    free(rq->sni_own);
    rq->sni_own = NULL;
    rq->sni = NULL;
}

void px_request_set_sni(struct px_request *rq, const char *name, size_t n)
{
    px_request_clear_sni(rq);
    if (n > 0 && n == rq->host.len && memcmp(name, rq->host.text, n) == 0) {
        rq->sni = rq->host.text;
        return;
    }
    rq->sni_own = malloc(n + 1);
    if (rq->sni_own == NULL)
        abort();
    memcpy(rq->sni_own, name, n);
    rq->sni_own[n] = '\0';
    rq->sni = rq->sni_own;
}

void px_request_set_inject(struct px_request *rq, const char *text)
{
    free(rq->inject);
    rq->inject = NULL;
    if (text != NULL && text[0] != '\0' && (rq->inject = strdup(text)) == NULL)
        abort();
}

void px_request_share_sni(struct px_request *rq)
{
    if (rq->sni_own != NULL && strcmp(rq->sni_own, rq->host.text) == 0) {
        free(rq->sni_own);
        rq->sni_own = NULL;
        rq->sni = rq->host.text;
    }
}

void px_conn_keep_raw_host(struct px_conn *c, const char *p, size_t n)
{
    if (n > PX_RAW_HOST_MAX)
        n = PX_RAW_HOST_MAX;
    free(c->raw_host);
    c->raw_host = malloc(n + 1);
    if (c->raw_host == NULL)
        abort();
    memcpy(c->raw_host, p, n);
    c->raw_host[n] = '\0';
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
 * sandbox's max-conns-per-sandbox, nor active_connections.  Once: when it
 * enters FLUSH (its final answer is written: a refused connection that
 * lingers to let it be read holds nobody else up), or at its close. */
static void release(struct px_conn *c)
{
    if (c->msb != NULL)
        px_metrics_active(c->msb, -1);
    px_limit_conn_close(c->lim);
    atomic_fetch_sub(&px_d.conns, 1);
}

void px_conn_close(struct px_conn *c, const char *why)
{
    char src[PX_SOCKADDR_TEXT_MAX];

    if (px_log_debugging())
        px_log_debug("conn %llu %s: closed: %s", (unsigned long long)c->id,
                     px_conn_src_text(c, src), why);
    px_conn_ended(c, px_end_of_reason(c->rq.reason)); /* where no caller said */
    px_conn_log(c);
    for (size_t i = PX_CONN_RELEASE_MAX; i-- > 0;)
        if (c->release[i] != NULL)
            c->release[i](c);
    px_resolve_cancel(c->dns);
    free(c->hello);
    free(c->raw_host);
    px_request_clear_sni(&c->rq);
    px_request_set_inject(&c->rq, NULL);
    if (c->up != NULL)
        bufferevent_free(c->up);
    if (c->cli != NULL)
        bufferevent_free(c->cli);
    if (c->state != PX_S_RELAY) { /* (the relay's arm of the union is its own to free) */
        px_raw_free(&c->rc);
        px_raw_free(&c->ru);
        free(c->early);
    }
    event_del(&c->timer);
    if (c->state != PX_S_FLUSH)
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
        if (!idle_only || (c->state == PX_S_HEAD && c->ex != NULL && c->ex->between &&
                           evbuffer_get_length(bufferevent_get_input(c->cli)) == 0))
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
    px_bev_shut(bev);
}

static void on_flush_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev, (void)what;
    px_conn_close(arg, "client gone after the answer");
}

static void on_flush_timeout(struct px_conn *c)
{
    px_conn_close(c, "flush");
}

void px_conn_drop_upstream(struct px_conn *c)
{
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    px_raw_free(&c->ru);
}

void px_conn_flush_close(struct px_conn *c)
{
    px_conn_drop_upstream(c);
    px_resolve_cancel(c->dns);
    c->dns = NULL;
    px_conn_ended(c, PX_END_PROXY);
    px_conn_log(c);
    px_conn_set_state(c, PX_S_FLUSH, on_flush_timeout); /* (never from RELAY: see close) */
    release(c);
    px_conn_timeout(c, FLUSH_MS);
    if (c->rc.ev != NULL) {
        /* A raw client's answers went out with send(2) at once: shut our
         * side now (the FIN joins them), then look in this loop round
         * whether the client left anything unread (client.c). */
        shutdown(c->rc.fd, SHUT_WR);
        event_add(c->rc.ev, NULL);
        event_active(c->rc.ev, EV_READ, 1);
        return;
    }
    bufferevent_setcb(c->cli, on_flush_read, on_flush_written, on_flush_event, c);
    bufferevent_setwatermark(c->cli, EV_WRITE, 0, 0);
    bufferevent_enable(c->cli, EV_READ | EV_WRITE);
    if (px_bev_write_last(c->cli)) /* the answer and the FIN in one segment */
        px_bev_shut(c->cli);
}

/* ------------------------------------------------------------ a new one */

struct px_conn *px_conn_new(struct px_worker *w, const struct px_listener_spec *l,
                            const struct sockaddr *sa, enum px_mode mode, enum px_conn_state first,
                            px_conn_hook *on_timeout)
{
    struct px_conn *c = calloc(1, sizeof(*c));

    if (c == NULL)
        abort();
    c->w = w;
    c->l = l;
    c->id = atomic_fetch_add(&px_d.next_id, 1);
    c->t_accept_ms = c->t_start_ms = c->t_active_ms = px_now_ms();
    px_sockaddr_to16(sa, c->src_addr);
    c->src_port = px_sockaddr_port(sa);
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;
    c->mode = mode;
    c->state = first;
    c->on_timeout = on_timeout;
    evtimer_assign(&c->timer, w->base, on_timer, c);
    return c;
}
