/*
 * request.c - an HTTP request head on a connection (explicit proxy and
 * transparent HTTP): parse it (http/), take its target apart by listener
 * and form, check its Host field, prepare the head to send upstream in
 * origin form, and hand it to the judge.  Each request is judged on its
 * own, the first of a connection and every later one (docs/design.md):
 * it goes to a new upstream unless it is for the same host and port as
 * the one kept open.  exchange.c carries the rest of the exchange.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "answer.h"
#include "conn.h"
#include "exchange.h"
#include "hello.h"
#include "intercept.h"
#include "judge.h"
#include "pushcheck.h"
#include "request.h"

#define FORMAT_SLACK 1024 /* what http_format_request adds: Host, Connection */
#define AUTH_MAX     768  /* "Basic " and base64 of "id:token" (world.c takes 512) */

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
        *port = c->redirected ? px_sockaddr_port(&c->orig_dst.sa) : 80;
    return NULL;
}

bool px_request_host_field(struct http_view v, struct policy_host *h, uint16_t port)
{
    uint16_t p;

    return split_host_field(v, h, &p) && (p == 0 || p == port);
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

void px_request_on_head_timeout(struct px_conn *c)
{
    if (evbuffer_get_length(bufferevent_get_input(c->cli)) == 0) {
        px_conn_ended(c, PX_END_TIMEOUT);
        px_conn_close(c, "keep-alive idle");
        return;
    }
    px_conn_fail(c, 408, PX_R_TIMEOUT, "the request head took too long");
}

void px_request_reset(struct px_conn *c)
{
    c->rq.method[0] = '\0';
    free(c->raw_host);
    c->raw_host = NULL;
    c->rq.host.len = 0;
    c->rq.host.text[0] = '\0';
    c->rq.port = 0;
    px_request_clear_sni(&c->rq);
    memset(&c->rq.v, 0, sizeof(c->rq.v));
    c->rq.decision = POLICY_ALLOW;
    c->rq.reason = PX_R_ALLOWED;
    c->rq.decided = c->rq.logged = false;
    c->rq.status = 0;
    px_request_set_inject(&c->rq, NULL);
    c->ex->path[0] = '\0';
    c->bytes_up = c->bytes_down = 0;
    c->ex->resp_head_done = false;
    c->ex->upgrade = false;
    c->ex->receive_pack = false;
}

void px_request_send(struct px_conn *c)
{
    if (c->ex->receive_pack && c->rq.v.push)
        px_pushcheck_start(c);
    else
        px_exchange_start(c);
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

bool px_request_forward(struct px_conn *c, const struct http_request *req)
{
    char authority[POLICY_HOST_MAX + 8];
    static _Thread_local char buf[PX_HEADER_BYTES_MAX + FORMAT_SLACK];

    host_port(authority, sizeof(authority), c->rq.host.text, c->rq.port, true);
    size_t n = http_format_request(
        req, authority, c->ex->upgrade ? HTTP_CONN_UPGRADE_WEBSOCKET : HTTP_CONN_KEEP_ALIVE, buf,
        sizeof(buf));
    if (n == 0) {
        px_conn_fail(c, 431, PX_R_BAD_REQUEST, "the request head is too large to forward");
        return false;
    }
    if (c->ex->pending == NULL)
        c->ex->pending = evbuffer_new();
    evbuffer_add(c->ex->pending, buf, n);
    if (c->mode == PX_MODE_INTERCEPT)
        explicit_bzero(buf, n); /* it held the credentials intercept.c added */
    c->bytes_up += n;
    evbuffer_drain(bufferevent_get_input(c->cli), req->head_len);
    c->ex->req_body = req->body;
    c->ex->req_left = req->content_length;
    http_chunked_init(&c->ex->req_chunks);
    c->ex->req_done =
        req->body == HTTP_BODY_NONE || (req->body == HTTP_BODY_LENGTH && req->content_length == 0);
    c->ex->client_keep_alive = req->keep_alive && !atomic_load(&px_d.draining);
    return true;
}

/* An upstream kept from an earlier request is of use only to a request
 * for the same host and port (HTTP, not CONNECT); any other is closed. */
static void keep_upstream_if_same(struct px_conn *c)
{
    char key[sizeof(c->ex->up_key)];

    host_port(key, sizeof(key), c->rq.host.text, c->rq.port, false);
    if (c->up != NULL && c->mode != PX_MODE_CONNECT && c->ex->upstream_keep_alive &&
        strcmp(key, c->ex->up_key) == 0)
        return;
    if (c->up != NULL) {
        bufferevent_free(c->up);
        c->up = NULL;
        c->up_len = 0;
    }
    memcpy(c->ex->up_key, key, sizeof(key));
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
    if (c->mode == PX_MODE_INTERCEPT)
        return px_intercept_target(c, req);
    err = target_of(c, req, &host, &port);
    if (err != NULL) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, err);
        return false;
    }
    c->rq.port = port;
    if (policy_host_normalize(host.p, host.len, &c->rq.host) != POLICY_HOST_OK) {
        c->rq.host.len = 0;
        px_conn_keep_raw_host(c, host.p, host.len);
    }
    if (c->rq.host.len != 0 && !host_agrees(c, req)) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "the Host field disagrees with the request target");
        return false;
    }
    return true;
}

/* Keep the request's path without its query (cut to fit) for the log. */
static void keep_path(struct px_conn *c, const struct http_request *req)
{
    const char *q = memchr(req->path.p, '?', req->path.len);
    size_t n = q != NULL ? (size_t)(q - req->path.p) : req->path.len;

    if (req->form != HTTP_FORM_ORIGIN && req->form != HTTP_FORM_ABSOLUTE)
        n = 0;
    copy_text(c->ex->path, sizeof(c->ex->path), req->path.p, n);
}

/* A whole head is in: take it apart, then the judge decides (a request
 * on a kept-alive connection as much as the first one).  May close. */
static void on_request(struct px_conn *c, const struct http_request *req)
{
    char buf[AUTH_MAX];
    size_t auth_len;
    const char *auth = copy_auth(c, req, buf, &auth_len);

    c->t_start_ms = px_now_ms();
    keep_path(c, req);
    if (!take_target(c, req))
        return;
    if (c->mode != PX_MODE_CONNECT) {
        px_asked_make(&c->ex->asked, c->rq.method, strlen(c->rq.method),
                      req->form == HTTP_FORM_ASTERISK ? NULL : req->path.p, req->path.len);
        c->ex->receive_pack = px_pushcheck_wanted(req);
    }
    if (c->mode == PX_MODE_INTERCEPT) {
        /* The head stays in the input: the credentials are added once
         * the request is judged (intercept.c). */
        px_conn_judge(c, NULL, 0, px_intercept_request);
        return;
    }
    if (c->mode == PX_MODE_CONNECT)
        evbuffer_drain(bufferevent_get_input(c->cli), req->head_len);
    else if (c->rq.host.len != 0 && !px_request_forward(c, req))
        return;
    keep_upstream_if_same(c);
    px_conn_judge(c, auth, auth_len,
                  c->mode == PX_MODE_CONNECT ? px_hello_connect_ready : px_request_send);
}

void px_request_on_head(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t len = evbuffer_get_length(in), cap = px_d.http_limits.max_head + 1;
    static _Thread_local struct http_request req;

    if (len == 0)
        return;
    if (!c->ex->head_started) {
        c->ex->head_started = true;
        px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    }
    if (c->mode == PX_MODE_INTERCEPT && px_intercept_refuses_h2(c))
        return;
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
    c->ex->head_started = false;
    on_request(c, &req);
}
