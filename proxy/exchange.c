/*
 * exchange.c - HTTP on a connection (explicit proxy and transparent HTTP):
 * read a request head, judge it, send it upstream in origin form, stream
 * the body both ways with the framing each side declared, and go back for
 * the next request when both sides keep the connection alive.
 *
 * Each request is judged on its own (docs/design.md): a second request on a
 * kept-alive connection runs the name phase again, and goes to a new
 * upstream unless it is for the same host and port as the one still open.
 * Framing is followed, never guessed: a body is forwarded byte for byte
 * and exactly as long as Content-Length or the chunked coding says
 * (http.c rejects every ambiguous head before a byte goes upstream).
 */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "conn.h"

#define EX_HIGH       (256 * 1024) /* back-pressure mark, as relay.c */
#define RESP_HEAD_MAX (64 * 1024)  /* an origin's response head */
#define RESP_LINE_MAX 8192
#define FORMAT_SLACK  1024 /* what format adds: Host, Connection */
#define AUTH_MAX      768  /* "Basic " and base64 of "id:token" (world.c takes 512) */

static const struct http_limits resp_limits = {
    .max_line = RESP_LINE_MAX, .max_head = RESP_HEAD_MAX, .max_headers = HTTP_MAX_HEADERS_CAP};

/* ------------------------------------------------------------ request head */

static bool view_eq(struct http_view v, const char *s)
{
    return v.len == strlen(s) && strncasecmp(v.p, s, v.len) == 0;
}

/* Split "host[:port]" (a Host field) into a normalized host and a port. */
static bool split_host_field(struct http_view v, struct policy_host *h, uint16_t *port)
{
    const char *colon = NULL;
    size_t hlen = v.len;

    if (v.len > 0 && v.p[0] == '[') {
        const char *end = memchr(v.p, ']', v.len);
        if (end == NULL)
            return false;
        if ((size_t)(end - v.p) + 1 < v.len) {
            if (end[1] != ':')
                return false;
            colon = end + 1;
        }
    } else {
        colon = memchr(v.p, ':', v.len);
    }
    *port = 0;
    if (colon != NULL) {
        unsigned long p = 0;
        size_t n = v.len - (size_t)(colon - v.p) - 1;
        if (n == 0 || n > 5)
            return false;
        for (size_t i = 1; i <= n; i++) {
            if (colon[i] < '0' || colon[i] > '9')
                return false;
            p = p * 10 + (unsigned long)(colon[i] - '0');
        }
        if (p == 0 || p > 65535)
            return false;
        *port = (uint16_t)p;
        hlen = (size_t)(colon - v.p);
    }
    return policy_host_normalize(v.p, hlen, h) == POLICY_HOST_OK;
}

/* 414 when the request line itself is over its cap, else 431. */
static unsigned too_big_status(const char *p, size_t n)
{
    size_t max_line = px_d.http_limits.max_line;
    return memchr(p, '\n', n < max_line ? n : max_line) == NULL ? 414 : 431;
}

/* Host and port of the request, by listener and target form.  Returns an
 * error text for a 400, or NULL. */
static const char *target_of(struct px_conn *c, const struct http_request *req,
                             struct http_view *host, uint16_t *port)
{
    bool proxy = c->l->kind == PX_L_PROXY;

    if (req->form == HTTP_FORM_AUTHORITY) {
        if (!proxy)
            return "CONNECT is not served on this port";
        if (req->body != HTTP_BODY_NONE)
            return "a CONNECT request with a body";
        c->mode = PX_MODE_CONNECT;
        *host = req->host;
        *port = req->port;
        return NULL;
    }
    c->mode = proxy ? PX_MODE_HTTP : PX_MODE_PLAIN;
    if (req->form == HTTP_FORM_ABSOLUTE) {
        if (!view_eq(req->scheme, "http"))
            return "only http:// targets are forwarded; use CONNECT for https";
        *host = req->host;
        *port = req->port ? req->port : 80;
        return NULL;
    }
    if (proxy)
        return "not a proxy request: the target must be an absolute http:// URI";
    if (req->form != HTTP_FORM_ORIGIN || !req->has_host_header)
        return "a request without a Host field";
    /* Transparent HTTP: the Host field names the origin. */
    const char *colon = req->host_header.p[0] == '['
                            ? memchr(req->host_header.p, ']', req->host_header.len)
                            : req->host_header.p;
    size_t off = colon ? (size_t)(colon - req->host_header.p) : 0;
    const char *pc = memchr(req->host_header.p + off, ':', req->host_header.len - off);
    host->p = req->host_header.p;
    host->len = pc ? (size_t)(pc - req->host_header.p) : req->host_header.len;
    struct policy_host h;
    if (!split_host_field(req->host_header, &h, port))
        *port = 0;
    if (*port == 0)
        *port = c->redirected ? px_sockaddr_port(&c->orig_dst) : 80;
    return NULL;
}

/* The Host field must name the same origin as an absolute target. */
static bool host_agrees(const struct px_conn *c, const struct http_request *req)
{
    struct policy_host h;
    uint16_t port;

    if (req->form != HTTP_FORM_ABSOLUTE || !req->has_host_header)
        return true;
    if (!split_host_field(req->host_header, &h, &port))
        return false;
    return strcmp(h.text, c->rq.host.text) == 0 && (port ? port : 80) == c->rq.port;
}

static void reset_request(struct px_conn *c)
{
    c->rq.method[0] = c->raw_host[0] = '\0';
    c->rq.host.len = 0;
    c->rq.host.text[0] = '\0';
    c->rq.port = 0;
    c->rq.have_sni = false;
    memset(&c->rq.v, 0, sizeof(c->rq.v));
    c->rq.decision = POLICY_ALLOW;
    c->rq.reason = PX_R_ALLOWED;
    c->rq.decided = c->rq.logged = false;
    c->rq.status = 0;
    c->bytes_up = c->bytes_down = 0;
    c->ex.resp_head_done = false;
}

/* The first len bytes at p as a string in dst (cut to fit). */
static void copy_text(char *dst, size_t size, const char *p, size_t len)
{
    if (len >= size)
        len = size - 1;
    memcpy(dst, p, len);
    dst[len] = '\0';
}

/* "HOST:PORT" in dst (size > 6), or "HOST" when bare_80 and the port is
 * 80.  By hand: each request writes two, and printf showed in its time. */
static void host_port(char *dst, size_t size, const char *host, uint16_t port, bool bare_80)
{
    size_t n = strlen(host);

    if (n > size - 7)
        n = size - 7;
    memcpy(dst, host, n);
    char *p = dst + n;
    if (!bare_80 || port != 80) {
        *p++ = ':';
        p = px_put_dec(p, port);
    }
    *p = '\0';
}

/* The head to send upstream, in origin form, into c->ex.pending; the body's
 * framing and keep-alive from the request.  False when it cannot be
 * forwarded (431; closed). */
static bool prepare_forward(struct px_conn *c, const struct http_request *req)
{
    char authority[POLICY_HOST_MAX + 8];
    static _Thread_local char buf[PX_HEADER_BYTES_MAX + FORMAT_SLACK];

    host_port(authority, sizeof(authority), c->rq.host.text, c->rq.port, true);
    size_t n = http_format_request(req, authority, true, buf, sizeof(buf));
    if (n == 0) {
        px_conn_fail(c, 431, PX_R_BAD_REQUEST, "the request head is too large to forward");
        return false;
    }
    if (c->ex.pending == NULL)
        c->ex.pending = evbuffer_new();
    evbuffer_add(c->ex.pending, buf, n);
    c->bytes_up += n;
    evbuffer_drain(bufferevent_get_input(c->cli), req->head_len);
    c->ex.req_body = req->body;
    c->ex.req_left = req->content_length;
    http_chunked_init(&c->ex.req_chunks);
    c->ex.req_done =
        req->body == HTTP_BODY_NONE || (req->body == HTTP_BODY_LENGTH && req->content_length == 0);
    c->ex.client_keep_alive = req->keep_alive && !atomic_load(&px_d.draining);
    return true;
}

/* An upstream kept from an earlier request is of use only to a request
 * for the same host and port (HTTP, not CONNECT); any other is closed. */
static void keep_upstream_if_same(struct px_conn *c)
{
    char key[sizeof(c->up_key)];

    host_port(key, sizeof(key), c->rq.host.text, c->rq.port, false);
    if (c->up != NULL && c->mode != PX_MODE_CONNECT && c->ex.upstream_keep_alive &&
        strcmp(key, c->up_key) == 0)
        return;
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
        c->upstream[0] = '\0';
    }
    memcpy(c->up_key, key, sizeof(key));
}

/* The request's Proxy-Authorization value, copied into buf (AUTH_MAX;
 * the head is drained from the input before the judge reads it), its
 * length in *len; NULL when it has none (or not on the proxy listener).
 * A value longer than any valid one becomes length 0: it names nobody
 * (a 407). */
static const char *copy_auth(const struct px_conn *c, const struct http_request *req, char *buf,
                             size_t *len)
{
    size_t n = req->proxy_authorization.len;

    *len = 0;
    if (c->l->kind != PX_L_PROXY || n == 0)
        return NULL;
    if (n <= AUTH_MAX) {
        memcpy(buf, req->proxy_authorization.p, n);
        *len = n;
    }
    return buf;
}

/* Take the method and the target (host, port) of the request into c->rq.
 * A host that does not normalize is left for the judge to deny
 * (bad_host, as the sandbox asking).  False when it is malformed (400;
 * closed). */
static bool take_target(struct px_conn *c, const struct http_request *req)
{
    struct http_view host;
    uint16_t port = 0;
    const char *err;

    copy_text(c->rq.method, sizeof(c->rq.method), req->method.p, req->method.len);
    if (req->method.len >= sizeof(c->rq.method)) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "method name too long");
        return false;
    }
    err = target_of(c, req, &host, &port);
    if (err != NULL) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, err);
        return false;
    }
    copy_text(c->raw_host, sizeof(c->raw_host), host.p, host.len);
    c->rq.port = port;
    if (policy_host_normalize(host.p, host.len, &c->rq.host) != POLICY_HOST_OK)
        c->rq.host.len = 0;
    if (c->rq.host.len != 0 && !host_agrees(c, req)) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "the Host field disagrees with the request target");
        return false;
    }
    return true;
}

/* A whole head is in: take it apart, then the judge decides (a request
 * on a kept-alive connection as much as the first one).  May close. */
static void on_request(struct px_conn *c, const struct http_request *req)
{
    char buf[AUTH_MAX];
    size_t auth_len;
    const char *auth = copy_auth(c, req, buf, &auth_len);

    c->t_start_ms = px_now_ms();
    if (!take_target(c, req))
        return;
    if (c->mode == PX_MODE_CONNECT)
        evbuffer_drain(bufferevent_get_input(c->cli), req->head_len);
    else if (c->rq.host.len != 0 && !prepare_forward(c, req))
        return;
    keep_upstream_if_same(c);
    px_conn_judge(c, auth, auth_len);
}

void px_exchange_on_head(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t len = evbuffer_get_length(in), cap = px_d.http_limits.max_head + 1;
    static _Thread_local struct http_request req;

    if (len == 0)
        return;
    if (!c->ex.head_started) {
        c->ex.head_started = true;
        px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    }
    size_t n = len < cap ? len : cap;
    const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
    switch (http_parse_request(p, n, &px_d.http_limits, &req)) {
    case HTTP_R_NEED_MORE: return;
    case HTTP_R_TOO_BIG:
        px_conn_fail(c, too_big_status(p, n), PX_R_BAD_REQUEST,
                     req.error ? req.error : "request head too large");
        return;
    case HTTP_R_BAD:
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, req.error ? req.error : "malformed request");
        return;
    case HTTP_R_OK: break;
    }
    c->ex.head_started = false;
    on_request(c, &req);
}

/* ------------------------------------------------------------ bodies */

enum body_state {
    BODY_MORE,   /* more of the body is to come */
    BODY_DONE,   /* the body ended */
    BODY_BROKEN, /* the chunked coding is broken */
};

/* Move the body bytes of one message from `in` to `out` as its framing
 * says, adding what was moved to *moved. */
static enum body_state move_body(struct evbuffer *in, struct evbuffer *out, enum http_body kind,
                                 uint64_t *left, struct http_chunked *ch, size_t *moved)
{
    while (evbuffer_get_length(in) > 0) {
        size_t len = evbuffer_get_length(in), used;
        struct evbuffer_iovec v;
        switch (kind) {
        case HTTP_BODY_NONE: return BODY_DONE;
        case HTTP_BODY_TO_CLOSE:
            *moved += len;
            evbuffer_add_buffer(out, in);
            return BODY_MORE;
        case HTTP_BODY_LENGTH:
            used = len < *left ? len : (size_t)*left;
            evbuffer_remove_buffer(in, out, used);
            *moved += used;
            *left -= used;
            if (*left == 0)
                return BODY_DONE;
            break;
        case HTTP_BODY_CHUNKED:
            evbuffer_peek(in, -1, NULL, &v, 1);
            enum http_chunked_result r = http_chunked_feed(ch, v.iov_base, v.iov_len, &used);
            if (r == HTTP_CHUNKED_BAD)
                return BODY_BROKEN;
            if (r == HTTP_CHUNKED_MORE)
                used = v.iov_len;
            evbuffer_remove_buffer(in, out, used);
            *moved += used;
            if (r == HTTP_CHUNKED_DONE)
                return BODY_DONE;
            break;
        }
    }
    return kind == HTTP_BODY_NONE || (kind == HTTP_BODY_LENGTH && *left == 0) ? BODY_DONE
                                                                              : BODY_MORE;
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

    if (c->ex.req_done)
        return;
    enum body_state r = move_body(bufferevent_get_input(c->cli), bufferevent_get_output(c->up),
                                  c->ex.req_body, &c->ex.req_left, &c->ex.req_chunks, &moved);
    if (r == BODY_BROKEN) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "broken chunked request body");
        return;
    }
    if (!px_conn_count(c, 0, moved))
        return;
    c->t_active_ms = px_now_ms();
    px_bev_write_now(c->up);
    if (r == BODY_DONE) {
        c->ex.req_done = true;
        hold_pipelined(c);
        if (c->state == PX_S_REQUEST)
            px_conn_set_state(c, PX_S_RESPONSE);
        return;
    }
    pause_if_full(c->cli, c->up);
}

/* ------------------------------------------------------------ response */

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

/* Who ends a connection whose response is done, when it does not go on:
 * egressd (draining, its life is over, the request body was cut short), or
 * the client that asked for Connection: close.  (A response framed by the
 * origin's close was noted as the origin's end when it came.) */
static enum px_end who_closes(const struct px_conn *c)
{
    if (!c->ex.req_done || atomic_load(&px_d.draining) || next_request_ms(c) == 0)
        return PX_END_PROXY;
    return PX_END_CLIENT;
}

static void response_done(struct px_conn *c)
{
    if (!c->ex.req_done || !c->ex.client_keep_alive || atomic_load(&px_d.draining) ||
        next_request_ms(c) == 0) {
        px_conn_ended(c, who_closes(c));
        px_conn_log(c);
        px_conn_flush_close(c);
        return;
    }
    px_conn_log(c);
    px_exchange_reset(c);
}

enum head_state {
    HEAD_SENT,   /* the final head was sent on to the client */
    HEAD_MORE,   /* more bytes are needed (an interim head may have gone on) */
    HEAD_CLOSED, /* malformed, too large or over the quota: closed */
};

/* Parse the response head in up's input and send it on. */
static enum head_state response_head(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->up);
    static _Thread_local struct http_response resp;
    static _Thread_local char buf[RESP_HEAD_MAX + FORMAT_SLACK];

    for (;;) {
        size_t len = evbuffer_get_length(in), n = len < RESP_HEAD_MAX + 1 ? len : RESP_HEAD_MAX + 1;
        if (len == 0)
            return HEAD_MORE;
        /* What the first chain holds first: the head is mostly all there,
         * and making the whole input contiguous would copy the body that
         * came with it. */
        size_t first = evbuffer_get_contiguous_space(in), k = first < n ? first : n;
        const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)k);
        enum http_result r = http_parse_response(p, k, &resp_limits, c->rq.method, &resp);
        if (r == HTTP_R_NEED_MORE && k < n) {
            p = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
            r = http_parse_response(p, n, &resp_limits, c->rq.method, &resp);
        }
        if (r == HTTP_R_NEED_MORE)
            return HEAD_MORE;
        if (r != HTTP_R_OK || resp.status == 101) {
            px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the origin sent a malformed response");
            return HEAD_CLOSED;
        }
        if (resp.status < 200) { /* 100 Continue, 103: pass on, read on */
            evbuffer_remove_buffer(in, bufferevent_get_output(c->cli), resp.head_len);
            continue;
        }
        c->rq.status = resp.status;
        c->ex.resp_body = resp.body;
        c->ex.resp_left = resp.content_length;
        http_chunked_init(&c->ex.resp_chunks);
        c->ex.upstream_keep_alive = resp.keep_alive && resp.body != HTTP_BODY_TO_CLOSE;
        if (resp.body == HTTP_BODY_TO_CLOSE || next_request_ms(c) == 0)
            c->ex.client_keep_alive = false; /* the answer says so: Connection: close */
        size_t m = http_format_response(&resp, p, c->ex.client_keep_alive, buf, sizeof(buf));
        if (m == 0) {
            px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the origin's response head is too large");
            return HEAD_CLOSED;
        }
        evbuffer_drain(in, resp.head_len);
        evbuffer_add(bufferevent_get_output(c->cli), buf, m);
        c->ex.resp_head_done = true;
        return px_conn_count(c, 1, m) ? HEAD_SENT : HEAD_CLOSED;
    }
}

/* The response's next bytes in up's input: its head, then its body, sent
 * on to the client.  False when the connection was closed, or the
 * response is done (then the next request's phase has begun). */
static bool take_response(struct px_conn *c)
{
    /* libevent reads at most 4 KiB at a time: when that much came, take
     * what else is there now rather than in another round. */
    if (evbuffer_get_length(bufferevent_get_input(c->up)) >= PX_BEV_READ_MAX &&
        evbuffer_get_length(bufferevent_get_output(c->cli)) < EX_HIGH)
        px_bev_read_now(c->up);
    if (!c->ex.resp_head_done) {
        enum head_state h = response_head(c);
        if (h == HEAD_CLOSED)
            return false;
        if (h == HEAD_MORE) {
            px_bev_write_now(c->cli); /* an interim (1xx) head */
            return true;
        }
        if (c->ex.resp_body == HTTP_BODY_NONE ||
            (c->ex.resp_body == HTTP_BODY_LENGTH && c->ex.resp_left == 0)) {
            px_bev_write_now(c->cli); /* the head is the whole response */
            response_done(c);
            return false;
        }
    }
    size_t moved = 0;
    enum body_state r = move_body(bufferevent_get_input(c->up), bufferevent_get_output(c->cli),
                                  c->ex.resp_body, &c->ex.resp_left, &c->ex.resp_chunks, &moved);
    if (r == BODY_BROKEN) {
        c->rq.reason = PX_R_CONNECT_FAIL;
        px_conn_ended(c, PX_END_UPSTREAM);
        px_conn_close(c, "broken chunked response");
        return false;
    }
    if (!px_conn_count(c, 1, moved))
        return false;
    px_bev_write_now(c->cli);
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
    (void)take_response(c);
}

static void on_up_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    if ((what & BEV_EVENT_EOF) && c->ex.resp_head_done) {
        if (!take_response(c)) /* what came with the end */
            return;
        if (c->ex.resp_body == HTTP_BODY_TO_CLOSE) {
            px_conn_ended(c, PX_END_UPSTREAM); /* its close ends the body */
            response_done(c);
            return;
        }
    }
    if (!c->ex.resp_head_done) {
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
    if (!c->ex.req_done)
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
        px_conn_set_state(c, PX_S_REQUEST);
    c->t_active_ms = px_now_ms();
    bufferevent_setcb(c->up, on_up_read, on_up_written, on_up_event, c);
    bufferevent_setcb(c->cli, on_cli_body, on_cli_written, px_conn_on_client_event, c);
    /* Writing is enabled on both from their start (a bufferevent's
     * default) and is left so: enabling it again would poll for
     * writability with nothing to write, and cost two epoll changes. */
    bufferevent_enable(c->up, EV_READ);
    bufferevent_enable(c->cli, EV_READ);
    evbuffer_add_buffer(bufferevent_get_output(c->up), c->ex.pending);
    px_conn_timeout(c, px_d.cfg->timeout_idle_ms);
    if (c->ex.req_done) {
        px_bev_write_now(c->up);
        hold_pipelined(c);
        px_conn_set_state(c, PX_S_RESPONSE);
    } else {
        forward_request_body(c);
    }
}

/* ------------------------------------------------------------ between requests */

static void on_up_idle(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;
    /* An idle upstream that speaks or closes is of no more use. */
    bufferevent_free(c->up);
    c->up = NULL;
    c->ex.upstream_keep_alive = false;
}

static void on_up_idle_event(struct bufferevent *bev, short what, void *arg)
{
    (void)what;
    on_up_idle(bev, arg);
}

void px_exchange_reset(struct px_conn *c)
{
    if (c->up != NULL && !c->ex.upstream_keep_alive) {
        bufferevent_free(c->up);
        c->up = NULL;
    }
    if (c->up != NULL)
        bufferevent_setcb(c->up, on_up_idle, NULL, on_up_idle_event, c);
    reset_request(c);
    px_conn_set_state(c, PX_S_HEAD);
    px_conn_watch_client(c);
    px_conn_timeout(c, next_request_ms(c)); /* > 0: response_done saw to it */
    c->ex.head_started = false;
    if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0)
        px_exchange_on_head(c);
}
