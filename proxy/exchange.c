/*
 * exchange.c - an HTTP exchange once its request is judged (request.c):
 * send the head upstream, stream the bodies both ways with the framing
 * each side declared, pass the response head on, and go back for the next
 * request when both sides keep the connection alive.
 *
 * Framing is followed, never guessed: a body is forwarded byte for byte
 * and exactly as long as Content-Length or the chunked coding says
 * (http/ rejects every ambiguous head before a byte goes upstream).
 */
#include <event2/buffer.h>

#include "answer.h"
#include "bev.h"
#include "client.h"
#include "conn.h"
#include "exchange.h"
#include "gate.h"
#include "intercept.h"
#include "log.h"
#include "metrics.h"
#include "request.h"
#include "upgrade.h"

#define EX_HIGH       (256 * 1024) /* back-pressure mark, as relay.c */
#define RESP_HEAD_MAX (64 * 1024)  /* an origin's response head */
#define RESP_LINE_MAX 8192
#define FORMAT_SLACK  1024 /* what http_format_response adds: Connection */

static const struct http_limits resp_limits = {
    .max_line = RESP_LINE_MAX, .max_head = RESP_HEAD_MAX, .max_headers = HTTP_MAX_HEADERS_CAP};

/* ------------------------------------------------------------ bodies */

enum body_state {
    BODY_MORE,   /* more of the body is to come */
    BODY_DONE,   /* the body ended */
    BODY_BROKEN, /* the chunked coding is broken */
    BODY_QUOTA,  /* `most` bytes were moved and more of the body is there */
};

/* Move n bytes from in to out: in full TLS records when `records` (out
 * is a TLS leg's), else as in's chains are. */
static void take_bytes(struct evbuffer *in, struct evbuffer *out, size_t n, bool records)
{
    if (records)
        px_bev_move_records(in, out, n);
    else
        evbuffer_remove_buffer(in, out, n);
}

/* Move the body bytes of one message from `in` to `out` as its framing
 * says, at most `most` of them (what is left of the byte quota), adding
 * what was moved to *moved; in full TLS records when `records`. */
static enum body_state move_body(struct evbuffer *in, struct evbuffer *out, enum http_body kind,
                                 uint64_t *left, struct http_chunked *ch, uint64_t most,
                                 size_t *moved, bool records)
{
    while (evbuffer_get_length(in) > 0) {
        size_t len = evbuffer_get_length(in), used;
        struct evbuffer_iovec v;
        if (kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && *left == 0))
            return BODY_DONE;
        if (*moved >= most)
            return BODY_QUOTA;
        if (len > most - *moved)
            len = (size_t)(most - *moved);
        switch (kind) {
        case HTTP_BODY_NONE: return BODY_DONE; /* (seen above) */
        case HTTP_BODY_TO_CLOSE:
            *moved += len;
            take_bytes(in, out, len, records);
            break;
        case HTTP_BODY_LENGTH:
            used = len < *left ? len : (size_t)*left;
            take_bytes(in, out, used, records);
            *moved += used;
            *left -= used;
            if (*left == 0)
                return BODY_DONE;
            break;
        case HTTP_BODY_CHUNKED:
            evbuffer_peek(in, -1, NULL, &v, 1);
            if (v.iov_len > len)
                v.iov_len = len;
            enum http_chunked_result r = http_chunked_feed(ch, v.iov_base, v.iov_len, &used);
            if (r == HTTP_CHUNKED_BAD)
                return BODY_BROKEN;
            if (r == HTTP_CHUNKED_MORE)
                used = v.iov_len;
            take_bytes(in, out, used, records);
            *moved += used;
            if (r == HTTP_CHUNKED_DONE)
                return BODY_DONE;
            break;
        }
    }
    return kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && *left == 0) ? BODY_DONE
                                                                              : BODY_MORE;
}

/* What connection c may still move before its sandbox's byte quota is
 * used up. */
static uint64_t quota_left(const struct px_conn *c)
{
    return px_limit_quota_left(c->lim, px_d.cfg->quota_bytes_per_sandbox);
}

/* The quota ran out in the middle of a body: what was under it is on its
 * way (written), the rest is cut.  Closes. */
static void quota_cut(struct px_conn *c)
{
    c->rq.reason = PX_R_LIMIT;
    px_conn_ended(c, PX_END_LIMIT);
    px_conn_close(c, "byte quota used up");
}

static void pause_if_full(struct bufferevent *from, struct bufferevent *to)
{
    if (evbuffer_get_length(bufferevent_get_output(to)) >= EX_HIGH) {
        bufferevent_disable(from, EV_READ);
        bufferevent_setwatermark(to, EV_WRITE, EX_HIGH / 2, 0);
    }
}

/* The request is in: what the client sends next (a pipelined request)
 * waits in its input until the response is out.  Reading stays on, so no
 * epoll change is made per request; the read watermark bounds what is
 * taken meanwhile (px_conn_watch_client lifts it again). */
static void hold_pipelined(struct px_conn *c)
{
    bufferevent_setwatermark(c->cli, EV_READ, 0, px_d.http_limits.max_head + 1);
}

static void forward_request_body(struct px_conn *c)
{
    size_t moved = 0;

    if (c->ex->req_done)
        return;
    enum body_state r = move_body(bufferevent_get_input(c->cli), bufferevent_get_output(c->up),
                                  c->ex->req_body, &c->ex->req_left, &c->ex->req_chunks,
                                  quota_left(c), &moved, c->mode == PX_MODE_INTERCEPT);
    if (r == BODY_BROKEN) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "broken chunked request body");
        return;
    }
    if (!px_conn_count(c, 0, moved))
        return;
    c->t_active_ms = px_now_ms();
    px_bev_write_now(c->up);
    if (r == BODY_QUOTA) {
        quota_cut(c);
        return;
    }
    if (r == BODY_DONE) {
        c->ex->req_done = true;
        hold_pipelined(c);
        if (c->state == PX_S_REQUEST)
            px_conn_set_state(c, PX_S_RESPONSE, px_conn_on_idle);
        return;
    }
    pause_if_full(c->cli, c->up);
}

/* ------------------------------------------------------------ response */

/* The gate of an intercepted connection that sent a secret, or NULL. */
static struct px_gate *gate_of(const struct px_conn *c)
{
    return c->ic != NULL ? c->ic->gate : NULL;
}

/* The origin sent back the value of the sandbox's secret `who` (its index
 * in c->sb->secrets): nothing more of the response goes on.  Closes. */
static void reflected(struct px_conn *c, int who)
{
    const char *name =
        c->sb != NULL && who >= 0 && (size_t)who < c->sb->n_secrets ? c->sb->secrets[who] : "?";

    px_log_warnx("conn %llu: %s sent back the value of secret '%s' (sandbox %s, %s %s): the "
                 "response is cut",
                 (unsigned long long)c->id, c->rq.host.text, name, c->sb ? c->sb->id : "-",
                 c->rq.method, c->ex->path);
    px_metrics_injection(name, PX_INJ_REFLECTED);
    c->rq.reason = PX_R_CREDENTIAL_REFLECTED;
    px_conn_ended(c, PX_END_PROXY);
    px_conn_close(c, "an origin sent back a secret");
}

/* Whether head p[0..n) may go on to the client (else: closed). */
static bool head_clean(struct px_conn *c, const char *p, size_t n)
{
    struct px_gate *g = gate_of(c);
    int who = g != NULL ? px_gate_head(g, p, n) : PX_GATE_NONE;

    if (who != PX_GATE_NONE)
        reflected(c, who);
    return who == PX_GATE_NONE;
}

/* How long the connection may still wait for its next request: the idle
 * timeout, or what is left of max-conn-life (0: its life is over). */
static uint64_t next_request_ms(const struct px_conn *c)
{
    int64_t left = c->t_accept_ms + (int64_t)px_d.cfg->max_conn_life_ms - px_now_ms();
    uint64_t idle = px_d.cfg->timeout_idle_ms;

    if (left <= 0)
        return 0;
    return (uint64_t)left < idle ? (uint64_t)left : idle;
}

/* Who ends a connection whose response is done: egressd (draining, its
 * life is over, the request body was cut short), the client that asked
 * for Connection: close, or nobody (PX_END_NONE: the next request may
 * come).  A response framed by the origin's close was noted as the
 * origin's end when it came. */
static enum px_end who_closes(const struct px_conn *c)
{
    if (!c->ex->req_done || atomic_load(&px_d.draining) || next_request_ms(c) == 0)
        return PX_END_PROXY;
    return c->ex->client_keep_alive ? PX_END_NONE : PX_END_CLIENT;
}

static void response_done(struct px_conn *c)
{
    enum px_end by = who_closes(c);

    px_conn_ended(c, by);
    px_conn_log(c);
    if (by != PX_END_NONE)
        px_conn_flush_close(c);
    else
        px_exchange_reset(c);
}

enum head_state {
    HEAD_SENT,     /* the final head was sent on to the client */
    HEAD_MORE,     /* more bytes are needed (an interim head may have gone on) */
    HEAD_UPGRADED, /* a 101 to WebSocket went on: the tunnel's frames follow */
    HEAD_CLOSED,   /* malformed, too large or over the quota: closed */
};

/* Parse the head at the front of in (the first chain first: the head is
 * mostly all there, and making the whole input contiguous would copy the
 * body that came with it).  *p: where the parsed bytes are. */
static enum http_result parse_front(struct px_conn *c, struct evbuffer *in,
                                    struct http_response *resp, const char **p)
{
    size_t len = evbuffer_get_length(in), n = len < RESP_HEAD_MAX + 1 ? len : RESP_HEAD_MAX + 1;
    size_t first = evbuffer_get_contiguous_space(in), k = first < n ? first : n;

    *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)k);
    enum http_result r = http_parse_response(*p, k, &resp_limits, c->rq.method, resp);
    if (r == HTTP_R_NEED_MORE && k < n) {
        *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
        r = http_parse_response(*p, n, &resp_limits, c->rq.method, resp);
    }
    return r;
}

/* Send head resp (its bytes at p) on to the client with Connection field
 * conn in place of the origin's; false when it was not (a secret in it,
 * too large, over the quota: closed). */
static bool pass_head(struct px_conn *c, const struct http_response *resp, const char *p,
                      enum http_connection conn)
{
    static _Thread_local char buf[RESP_HEAD_MAX + FORMAT_SLACK];

    if (!head_clean(c, p, resp->head_len))
        return false;
    size_t m = http_format_response(resp, p, conn, buf, sizeof(buf));
    if (m == 0) {
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the origin's response head is too large");
        return false;
    }
    evbuffer_drain(bufferevent_get_input(c->up), resp->head_len);
    evbuffer_add(bufferevent_get_output(c->cli), buf, m);
    c->ex->resp_head_done = true;
    return px_conn_count(c, 1, m);
}

/* The final response head resp (its bytes at p) is in: take its framing
 * and keep-alive, and send it on in the client's terms. */
static enum head_state send_final_head(struct px_conn *c, const struct http_response *resp,
                                       const char *p)
{
    c->rq.status = resp->status;
    if (c->mode == PX_MODE_INTERCEPT)
        px_intercept_on_status(c, resp->status); /* a 401 may ask for a login's refresh */
    c->ex->resp_body = resp->body;
    c->ex->resp_left = resp->content_length;
    http_chunked_init(&c->ex->resp_chunks);
    c->ex->upstream_keep_alive = resp->keep_alive && resp->body != HTTP_BODY_TO_CLOSE;
    if (resp->body == HTTP_BODY_TO_CLOSE || next_request_ms(c) == 0 ||
        (c->mode == PX_MODE_INTERCEPT && !c->ex->upstream_keep_alive))
        c->ex->client_keep_alive = false; /* the answer says so: Connection: close */
    if (!pass_head(c, resp, p, c->ex->client_keep_alive ? HTTP_CONN_KEEP_ALIVE : HTTP_CONN_CLOSE))
        return HEAD_CLOSED;
    if (gate_of(c) != NULL)
        px_gate_body_start(gate_of(c), resp->body, resp->content_length);
    return HEAD_SENT;
}

/* The origin's 101 (resp, its bytes at p) to a request that asked for
 * WebSocket: send it on with our Connection and Upgrade fields. */
static enum head_state send_switch(struct px_conn *c, const struct http_response *resp,
                                   const char *p)
{
    c->rq.status = resp->status;
    return pass_head(c, resp, p, HTTP_CONN_UPGRADE_WEBSOCKET) ? HEAD_UPGRADED : HEAD_CLOSED;
}

/* Parse the response head in up's input and send it on; interim (1xx)
 * heads go on as they are, and a 101 to WebSocket where one was asked
 * for. */
static enum head_state response_head(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->up);
    static _Thread_local struct http_response resp;
    const char *p;

    while (evbuffer_get_length(in) > 0) {
        enum http_result r = parse_front(c, in, &resp, &p);
        if (r == HTTP_R_NEED_MORE)
            return HEAD_MORE;
        if (r == HTTP_R_OK && resp.status == 101 && c->ex->upgrade &&
            http_response_upgrades_websocket(&resp))
            return send_switch(c, &resp, p);
        if (r != HTTP_R_OK || resp.status == 101) {
            px_conn_fail(c, 502, PX_R_CONNECT_FAIL,
                         r == HTTP_R_OK ? "the origin switched protocols unasked"
                                        : "the origin sent a malformed response");
            return HEAD_CLOSED;
        }
        if (resp.status >= 200)
            return send_final_head(c, &resp, p);
        /* 100 Continue, 103: pass on, read on */
        if (!head_clean(c, p, resp.head_len))
            return HEAD_CLOSED;
        evbuffer_remove_buffer(in, bufferevent_get_output(c->cli), resp.head_len);
    }
    return HEAD_MORE;
}

/* How many bytes of the body at the front of up's input may go on now
 * (*allow; UINT64_MAX: all): what the gate, if c has one, lets through
 * (eof: the origin ended).  False when the origin sent a secret back
 * (closed). */
static bool body_allowed(struct px_conn *c, bool eof, uint64_t *allow)
{
    struct px_gate *g = gate_of(c);
    int who = PX_GATE_NONE;

    *allow = UINT64_MAX;
    if (g != NULL)
        who = px_gate_body(g, bufferevent_get_input(c->up), eof, allow);
    if (who != PX_GATE_NONE)
        reflected(c, who);
    return who == PX_GATE_NONE;
}

/* The response's next bytes in up's input (eof: the origin ended after
 * them): its head, then its body, sent on to the client.  False when the
 * connection was closed, or the response is done (then the next request's
 * phase has begun). */
static bool take_response(struct px_conn *c, bool eof)
{
    /* A read takes at most PX_BEV_READ_MAX (bev.h): when that much came,
     * take what else is there now rather than in another round. */
    if (evbuffer_get_length(bufferevent_get_input(c->up)) >= PX_BEV_READ_MAX &&
        evbuffer_get_length(bufferevent_get_output(c->cli)) < EX_HIGH)
        px_bev_read_now(c->up);
    if (!c->ex->resp_head_done) {
        enum head_state h = response_head(c);
        if (h == HEAD_CLOSED)
            return false;
        if (h == HEAD_UPGRADED) {
            px_bev_write_now(c->cli);
            px_upgrade_start(c);
            return false;
        }
        if (h == HEAD_MORE) {
            px_bev_write_now(c->cli); /* an interim (1xx) head */
            return true;
        }
        if (c->ex->resp_body == HTTP_BODY_NONE ||
            (c->ex->resp_body == HTTP_BODY_LENGTH && c->ex->resp_left == 0)) {
            px_bev_write_now(c->cli); /* the head is the whole response */
            response_done(c);
            return false;
        }
    }
    size_t moved = 0;
    uint64_t most = quota_left(c), allow;
    if (!body_allowed(c, eof, &allow))
        return false;
    enum body_state r =
        move_body(bufferevent_get_input(c->up), bufferevent_get_output(c->cli), c->ex->resp_body,
                  &c->ex->resp_left, &c->ex->resp_chunks, allow < most ? allow : most, &moved,
                  c->mode == PX_MODE_INTERCEPT);
    if (gate_of(c) != NULL)
        px_gate_moved(gate_of(c), moved);
    if (r == BODY_QUOTA && allow < most)
        r = BODY_MORE; /* the gate holds the rest back until more comes */
    if (r == BODY_BROKEN) {
        c->rq.reason = PX_R_CONNECT_FAIL;
        px_conn_ended(c, PX_END_UPSTREAM);
        px_conn_close(c, "broken chunked response");
        return false;
    }
    if (!px_conn_count(c, 1, moved))
        return false;
    px_bev_write_now(c->cli);
    if (r == BODY_QUOTA) {
        quota_cut(c);
        return false;
    }
    if (r == BODY_DONE) {
        response_done(c);
        return false;
    }
    pause_if_full(c->up, c->cli);
    return true;
}

static void on_up_read(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    c->t_active_ms = px_now_ms();
    (void)take_response(c, false);
}

static void on_up_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    if ((what & BEV_EVENT_EOF) && c->ex->resp_head_done) {
        if (!take_response(c, true)) /* what came with the end */
            return;
        if (c->ex->resp_body == HTTP_BODY_TO_CLOSE) {
            px_conn_ended(c, PX_END_UPSTREAM); /* its close ends the body */
            response_done(c);
            return;
        }
    }
    if (!c->ex->resp_head_done) {
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the origin closed without a response");
        return;
    }
    c->rq.reason = PX_R_CONNECT_FAIL;
    px_conn_ended(c, PX_END_UPSTREAM);
    px_conn_close(c, "origin closed in the middle of a response");
}

/* A side's output drained below the mark: read its peer again. */
static void on_up_written(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;

    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    if (!c->ex->req_done)
        bufferevent_enable(c->cli, EV_READ);
}

static void on_cli_written(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;

    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    if (c->up != NULL && c->state != PX_S_HEAD)
        bufferevent_enable(c->up, EV_READ);
}

static void on_cli_body(struct bufferevent *bev, void *arg)
{
    (void)bev;
    forward_request_body(arg);
}

void px_exchange_start(struct px_conn *c)
{
    if (c->state != PX_S_REQUEST)
        px_conn_set_state(c, PX_S_REQUEST, px_conn_on_idle);
    c->t_active_ms = px_now_ms();
    bufferevent_setcb(c->up, on_up_read, on_up_written, on_up_event, c);
    bufferevent_setcb(c->cli, on_cli_body, on_cli_written, px_conn_on_client_event, c);
    /* Writing is enabled on both from their start (a bufferevent's
     * default) and is left so: enabling it again would poll for
     * writability with nothing to write, and cost two epoll changes. */
    bufferevent_enable(c->up, EV_READ);
    bufferevent_enable(c->cli, EV_READ);
    evbuffer_add_buffer(bufferevent_get_output(c->up), c->ex->pending);
    px_conn_timeout(c, px_d.cfg->timeout_idle_ms);
    if (c->ex->req_done) {
        px_bev_write_now(c->up);
        hold_pipelined(c);
        px_conn_set_state(c, PX_S_RESPONSE, px_conn_on_idle);
    } else {
        forward_request_body(c);
    }
}

/* ------------------------------------------------------------ between requests */

static void on_up_idle(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;
    if (c->mode == PX_MODE_INTERCEPT) {
        /* the one TLS leg to the origin of an intercepted connection */
        px_conn_ended(c, PX_END_UPSTREAM);
        px_conn_close(c, "the origin ended the intercepted connection");
        return;
    }
    /* An idle upstream that speaks or closes is of no more use. */
    bufferevent_free(c->up);
    c->up = NULL;
    c->ex->upstream_keep_alive = false;
}

static void on_up_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)what;
    on_up_idle(bev, arg);
}

void px_exchange_reset(struct px_conn *c)
{
    if (c->up != NULL && !c->ex->upstream_keep_alive) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    if (c->up != NULL)
        bufferevent_setcb(c->up, on_up_idle, NULL, on_up_idle_event, c);
    px_request_reset(c);
    px_conn_set_state(c, PX_S_HEAD, px_request_on_head_timeout);
    px_conn_watch_client(c);
    px_conn_timeout(c, next_request_ms(c)); /* > 0: response_done saw to it */
    c->ex->head_started = false;
    c->ex->between = true;
    if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0)
        px_request_on_head(c);
}

void px_exchange_new(struct px_conn *c)
{
    c->ex = calloc(1, sizeof(*c->ex));
    if (c->ex == NULL)
        abort();
    px_conn_on_release(c, px_exchange_free);
}

void px_exchange_free(struct px_conn *c)
{
    if (c->ex == NULL)
        return;
    if (c->ex->pending != NULL)
        evbuffer_free(c->ex->pending);
    free(c->ex);
    c->ex = NULL;
}
