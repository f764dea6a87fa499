/* mcp_http.c - the Streamable HTTP transport (MCP 2025-11-25, basic/transports).
 *
 * One endpoint, /mcp.  A POST carries one JSON-RPC message: a request is
 * answered 200 with an application/json body, or, when its Accept lists
 * text/event-stream and the server sends notifications while handling it
 * (progress, log messages), with a text/event-stream of those and then the
 * answer, in chunks so that the connection stays open (mcp_http_stream.c); a
 * notification or a response gets 202 and no body.  initialize opens a
 * session (mcp_http_session.c) whose id comes back in Mcp-Session-Id and
 * must accompany every later request (400 without it, 404 for one that
 * ended); DELETE ends it.  GET with the session id opens the session's
 * standalone stream, which carries the notifications tied to no request
 * (resources/updated, list_changed): one per session, a comment every
 * KEEPALIVE_MS, ending with the session or the server.
 *
 * In front of that, for every request: the Host (when we listen on loopback)
 * and the Origin (when sent) must be loopback names, else 403 - a web page
 * must not reach this server through DNS rebinding; then the bearer token,
 * compared in constant time, else 401 with WWW-Authenticate.
 *
 * A thread per connection (at most MAX_CONNS), each with deadlines on every
 * read and write so a slow or silent client cannot hold it; sizes are capped
 * (HEAD_MAX, MAX_HEADERS, BODY_MAX).  HTTP/1.1 keep-alive; no chunked bodies.
 * Request heads are read by http/'s parser, as egressd reads them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "mcp_http.h"
#include "mcp_http_session.h"
#include "mcp_http_stream.h"
#include "mcp_server.h"

#define HEAD_MAX       SBX_MCP_HTTP_HEAD_MAX
#define MAX_HEADERS    SBX_MCP_HTTP_MAX_HEADERS
#define BODY_MAX       SBX_MCP_HTTP_BODY_MAX
#define MAX_CONNS      32
#define MAX_SESSIONS   64
#define IDLE_MS        60000 /* keep-alive: wait this long for the next request */
#define HEAD_MS        10000 /* a started request head must be complete in this */
#define BODY_MS        30000 /* and its body in this */
#define WRITE_S        10    /* a response must be taken in this (SO_SNDTIMEO) */
#define SESSION_IDLE_S (24 * 3600)
#define KEEPALIVE_MS   15000 /* a GET stream sends a comment this often when idle */

struct http {
    struct sbx_mcp_server *srv;
    const char *token;
    int loopback; /* we listen on loopback: Host must name it */
    int idle_ms, head_ms, body_ms;
    void (*thread_end)(void); /* opts->thread_end */
    pthread_mutex_t lock;
    pthread_cond_t drained;
    int conn_fds[MAX_CONNS]; /* -1 for a free slot; shut down on stop */
    int nconns;
    struct sbx_mcp_http_sessions *sessions;
};

struct conn {
    struct http *h;
    int fd, slot;
    size_t len;             /* bytes in buf */
    char buf[HEAD_MAX + 1]; /* the head being read, then what follows it */
};

/* One response; extra holds whole header lines ending in \r\n. */
struct response {
    int status;
    const char *content_type;
    char extra[256];
    char *body; /* malloc'd or NULL */
    size_t body_len;
    int close; /* close the connection after it */
    int fd;    /* the connection, for a streamed answer */
    int sent;  /* the answer went out already (a stream) */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads what is there, waiting until deadline.  Returns the byte count, 0 at
 * the peer's end, -1 on error or timeout. */
static ssize_t read_until(int fd, char *buf, size_t len, int64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - now_ms();
        int n;

        if (left <= 0)
            return -1;
        n = poll(&p, 1, (int)left);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        ssize_t r = read(fd, buf, len);
        if (r == -1 && errno == EINTR)
            continue;
        return r;
    }
}

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 202: return "Accepted";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    }
    return "Error";
}

static int send_response(int fd, struct response *r)
{
    char head[1024];
    int n;

    n = snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\n%s%s%sContent-Length: %zu\r\nCache-Control: no-store\r\n"
                 "Connection: %s\r\n%s\r\n",
                 r->status, status_text(r->status), r->content_type ? "Content-Type: " : "",
                 r->content_type ? r->content_type : "", r->content_type ? "\r\n" : "", r->body_len,
                 r->close ? "close" : "keep-alive", r->extra);
    if (n < 0 || (size_t)n >= sizeof head)
        return -1;
    if (sbx_mcp_http_write_all(fd, head, (size_t)n) == -1)
        return -1;
    return r->body_len ? sbx_mcp_http_write_all(fd, r->body, r->body_len) : 0;
}

/* Sets r to carry msg (stolen) as its JSON body. */
static void set_json(struct response *r, int status, json_t *msg)
{
    r->status = status;
    r->content_type = "application/json";
    r->body = json_dumps(msg, JSON_COMPACT);
    r->body_len = r->body ? strlen(r->body) : 0;
    json_decref(msg);
}

/* An HTTP-level refusal, with a JSON-RPC error body (id null) saying why. */
static void set_error(struct response *r, int status, const char *msg)
{
    set_json(r, status,
             json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code", -32000,
                       "message", msg));
}

/* Host part of "host[:port]" or "[v6][:port]" is a loopback name; port, when
 * present, is digits.  RFC 9110 section 7.2 (Host), RFC 6454 (Origin). */
static int loopback_hostport(const char *s)
{
    static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
    size_t hl;
    const char *port;

    if (*s == '[') {
        const char *end = strchr(s, ']');

        if (!end)
            return 0;
        hl = (size_t)(end - s) + 1;
    } else {
        hl = strcspn(s, ":");
    }
    port = s + hl;
    if (*port == ':') {
        port++;
        if (!*port || strspn(port, "0123456789") != strlen(port) || strlen(port) > 5)
            return 0;
    } else if (*port) {
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == hl && strncasecmp(s, names[i], hl) == 0)
            return 1;
    return 0;
}

static int origin_ok(const char *origin)
{
    return strncasecmp(origin, "http://", 7) == 0 && loopback_hostport(origin + 7);
}

/* http/'s caps for a head sent to this endpoint: the request line may use
 * all of HEAD_MAX, as the head may. */
static const struct http_limits head_limits = {HEAD_MAX, HEAD_MAX, MAX_HEADERS};

/* The fields the endpoint acts on, where they go in a request, and what a
 * second one is called: one of each, a second Origin or token is an attack.
 * (http/ refuses a second Host and a second Content-Length itself.) */
static const struct {
    const char *name;
    size_t off;
    const char *twice;
} acted_on[] = {
    {"Host", offsetof(struct sbx_mcp_http_request, host), "two Host fields"},
    {"Origin", offsetof(struct sbx_mcp_http_request, origin), "two Origin fields"},
    {"Authorization", offsetof(struct sbx_mcp_http_request, auth), "two Authorization fields"},
    {"Content-Type", offsetof(struct sbx_mcp_http_request, content_type),
     "two Content-Type fields"},
    {"Accept", offsetof(struct sbx_mcp_http_request, accept), "two Accept fields"},
    {"Mcp-Session-Id", offsetof(struct sbx_mcp_http_request, session_id),
     "two Mcp-Session-Id fields"},
    {"MCP-Protocol-Version", offsetof(struct sbx_mcp_http_request, protocol_version),
     "two MCP-Protocol-Version fields"},
};

static enum sbx_mcp_http_head refuse(struct sbx_mcp_http_request *q, int status, const char *error)
{
    q->status = status;
    q->error = error;
    return SBX_MCP_HEAD_REFUSED;
}

/* v (a view into buf) as a string in q->head, the copy of buf's head: the
 * byte after it is a blank, a CR or the blank line's, never part of
 * another view, so it becomes the NUL. */
static const char *head_string(struct sbx_mcp_http_request *q, const char *buf, struct http_view v)
{
    char *s = q->head + (v.p - buf);

    s[v.len] = '\0';
    return s;
}

static int name_is(struct http_view name, const char *want)
{
    return name.len == strlen(want) && strncasecmp(name.p, want, name.len) == 0;
}

/* Copies the head and points q's strings into the copy.  Returns OK, or
 * REFUSED for a second field the endpoint acts on. */
static enum sbx_mcp_http_head take_head(struct sbx_mcp_http_request *q, const char *buf,
                                        const struct http_request *req)
{
    memcpy(q->head, buf, req->head_len);
    q->head[req->head_len] = '\0';
    q->head_len = req->head_len;
    q->method = head_string(q, buf, req->method);
    q->target = head_string(q, buf, req->target);
    q->keep_alive = req->keep_alive;
    for (size_t i = 0; i < req->n_headers; i++) {
        for (size_t k = 0; k < sizeof acted_on / sizeof acted_on[0]; k++) {
            const char **slot = (const char **)((char *)q + acted_on[k].off);

            if (!name_is(req->headers[i].name, acted_on[k].name))
                continue;
            if (*slot)
                return refuse(q, 400, acted_on[k].twice);
            *slot = head_string(q, buf, req->headers[i].value);
        }
    }
    return SBX_MCP_HEAD_OK;
}

/* Contract in mcp_http.h.  http/ reads the head (RFC 9112 sections 2.2,
 * 3, 5 and 6.3); what follows is this endpoint's: one of each field it acts
 * on, a length-delimited body within BODY_MAX. */
enum sbx_mcp_http_head sbx_mcp_http_parse_head(const char *buf, size_t len,
                                               struct sbx_mcp_http_request *q)
{
    struct http_request req;
    enum sbx_mcp_http_head r;

    memset(q, 0, sizeof *q);
    q->content_length = -1;
    switch (http_parse_request(buf, len, &head_limits, &req)) {
    case HTTP_R_NEED_MORE:
        /* http/ gives a verdict once the bytes reach max_head; this only
         * makes sure no caller reads into a full buffer. */
        return len < HEAD_MAX ? SBX_MCP_HEAD_MORE : refuse(q, 431, "header section too large");
    case HTTP_R_TOO_BIG: return refuse(q, req.method.len == 0 ? 414 : 431, req.error);
    case HTTP_R_BAD: return refuse(q, 400, req.error);
    case HTTP_R_OK: break;
    }
    r = take_head(q, buf, &req);
    if (r != SBX_MCP_HEAD_OK)
        return r;
    if (http_find(req.headers, req.n_headers, "Content-Length"))
        q->content_length = (long long)req.content_length;
    if (req.body == HTTP_BODY_CHUNKED)
        return refuse(q, 501, "chunked bodies are not supported: send Content-Length");
    if (req.content_length > BODY_MAX)
        return refuse(q, 413, "the body is over the 8 MiB cap");
    return SBX_MCP_HEAD_OK;
}

/* The media type of a header value, without parameters, is type. */
static int media_is(const char *value, const char *type)
{
    size_t n = strlen(type);

    return value && strncasecmp(value, type, n) == 0 && strchr(" \t;", value[n]);
}

/* Accept lists application/json (or a wildcard that covers it). */
static int accepts_json(const char *accept)
{
    char copy[512], *item, *save = NULL;

    if (!accept)
        return 1;
    snprintf(copy, sizeof copy, "%s", accept);
    for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ' || *item == '\t')
            item++;
        if (media_is(item, "application/json") || media_is(item, "application/*") ||
            media_is(item, "*/*"))
            return 1;
    }
    return 0;
}

/* Accept lists text/event-stream itself (a wildcard is not taken as asking
 * for a stream). */
static int accepts_sse(const char *accept)
{
    char copy[512], *item, *save = NULL;

    if (!accept)
        return 0;
    snprintf(copy, sizeof copy, "%s", accept);
    for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ' || *item == '\t')
            item++;
        if (media_is(item, "text/event-stream"))
            return 1;
    }
    return 0;
}

/* Bearer token check (RFC 6750 section 2.1). */
static int auth_ok(const struct http *h, const char *auth)
{
    const char *t;

    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return 0;
    for (t = auth + 7; *t == ' '; t++)
        ;
    return sbx_mcp_token_equal(t, strlen(t), h->token, strlen(h->token));
}

/* A new session object whose notify and send_request write to its POST
 * streams. */
static struct sbx_mcp_http_session *session_new(struct http *h)
{
    struct sbx_mcp_http_session *se = sbx_mcp_http_session_new(h->sessions);
    struct sbx_mcp_session *s = sbx_mcp_http_session_mcp(se);

    s->notify = sbx_mcp_post_notify;
    s->notify_arg = se;
    s->send_request = sbx_mcp_post_request;
    s->send_request_arg = se;
    return se;
}

/* initialize: a fresh session, kept only when the answer is a result. */
static void post_initialize(struct http *h, json_t *msg, struct response *r)
{
    struct sbx_mcp_http_session *se = session_new(h);
    json_t *reply = sbx_mcp_handle(h->srv, sbx_mcp_http_session_mcp(se), msg);
    char id[SBX_MCP_HTTP_SESSION_ID_LEN + 1];
    int ok = reply && json_object_get(reply, "result");

    if (ok && sbx_mcp_http_session_add(h->sessions, se, id) == -1) {
        sbx_mcp_http_session_release(h->sessions, se);
        json_decref(reply);
        set_error(r, 503, "no random session id could be drawn");
        return;
    }
    if (ok)
        snprintf(r->extra, sizeof r->extra, "Mcp-Session-Id: %s\r\n", id);
    sbx_mcp_http_session_release(h->sessions, se);
    set_json(r, 200, reply);
}

/* Any other message: within its session.  With text/event-stream in
 * Accept, the request's notifications are streamed before its answer;
 * when there are none the answer is plain JSON all the same. */
static void post_in_session(struct http *h, const struct sbx_mcp_http_request *q, json_t *msg,
                            struct response *r)
{
    struct sbx_mcp_http_session *se = sbx_mcp_http_session_find(h->sessions, q->session_id);
    struct sbx_mcp_post_stream ps = {.se = se, .fd = r->fd, .close = r->close};
    json_t *reply;

    if (!se) {
        set_error(r, 404, "unknown session: it ended or expired; send initialize again");
        return;
    }
    if (accepts_sse(q->accept))
        sbx_mcp_post_stream_use(&ps);
    reply = sbx_mcp_handle(h->srv, sbx_mcp_http_session_mcp(se), msg);
    sbx_mcp_post_stream_use(NULL);
    sbx_mcp_http_session_release(h->sessions, se);
    if (ps.started && reply) {
        r->close |= sbx_mcp_post_stream_end(&ps, reply) == -1;
        json_decref(reply);
        r->sent = 1;
    } else if (reply) {
        set_json(r, 200, reply);
    } else {
        r->status = 202;
    }
}

static void on_post(struct http *h, const struct sbx_mcp_http_request *q, struct response *r)
{
    json_t *msg, *reply;
    const char *method;

    if (!media_is(q->content_type, "application/json")) {
        set_error(r, 415, "Content-Type must be application/json");
        return;
    }
    if (!accepts_json(q->accept)) {
        set_error(r, 406, "Accept must include application/json");
        return;
    }
    if (q->protocol_version && !sbx_mcp_version_supported(q->protocol_version)) {
        set_error(r, 400, "unsupported MCP-Protocol-Version");
        return;
    }
    if (sbx_mcp_parse(q->body, q->body_len, &msg, &reply) == -1) {
        set_json(r, 400, reply);
        return;
    }
    method = json_string_value(json_object_get(msg, "method"));
    if (method && strcmp(method, "initialize") == 0 && json_object_get(msg, "id")) {
        if (q->session_id)
            set_error(r, 400, "initialize opens a new session: send it without Mcp-Session-Id");
        else
            post_initialize(h, msg, r);
    } else if (!q->session_id) {
        set_error(r, 400, "Mcp-Session-Id is required: send initialize first");
    } else {
        post_in_session(h, q, msg, r);
    }
    json_decref(msg);
}

static void on_delete(struct http *h, const struct sbx_mcp_http_request *q, struct response *r)
{
    if (!q->session_id)
        set_error(r, 400, "Mcp-Session-Id is required");
    else if (sbx_mcp_http_session_delete(h->sessions, q->session_id) == 0)
        r->status = 200;
    else
        set_error(r, 404, "unknown session");
}

/* GET: the session's standalone stream (one at a time per session). */
static void on_get(struct http *h, const struct sbx_mcp_http_request *q, struct response *r)
{
    struct sbx_mcp_http_session *se;

    if (!accepts_sse(q->accept)) {
        set_error(r, 406, "a GET opens an event stream: Accept must include text/event-stream");
        return;
    }
    if (!q->session_id) {
        set_error(r, 400, "Mcp-Session-Id is required: send initialize first");
        return;
    }
    if (q->protocol_version && !sbx_mcp_version_supported(q->protocol_version)) {
        set_error(r, 400, "unsupported MCP-Protocol-Version");
        return;
    }
    se = sbx_mcp_http_session_find(h->sessions, q->session_id);
    if (!se) {
        set_error(r, 404, "unknown session: it ended or expired; send initialize again");
        return;
    }
    if (sbx_mcp_http_session_stream_open(h->sessions, se) == -1) {
        set_error(r, 409, "this session has an event stream open already");
    } else {
        r->close |=
            sbx_mcp_get_stream(h->sessions, se, r->fd, r->close, KEEPALIVE_MS, &stopping) == -1;
        r->sent = 1;
        sbx_mcp_http_session_stream_close(h->sessions, se);
    }
    sbx_mcp_http_session_release(h->sessions, se);
}

/* Everything a request must pass before its method is looked at. */
static void on_request(struct http *h, const struct sbx_mcp_http_request *q, struct response *r)
{
    size_t plen = strcspn(q->target, "?");

    if (plen != 4 || strncmp(q->target, "/mcp", 4) != 0) {
        set_error(r, 404, "not found: the MCP endpoint is /mcp");
    } else if (h->loopback && (!q->host || !loopback_hostport(q->host))) {
        set_error(r, 403, "Host must be a loopback name (localhost, 127.0.0.1, [::1])");
    } else if (q->origin && !origin_ok(q->origin)) {
        set_error(r, 403,
                  "Origin must be a loopback origin (http://localhost, "
                  "http://127.0.0.1, http://[::1])");
    } else if (!auth_ok(h, q->auth)) {
        set_error(r, 401, "a valid bearer token is required (Authorization: Bearer TOKEN)");
        snprintf(r->extra, sizeof r->extra, "WWW-Authenticate: Bearer realm=\"sandboxctl\"%s\r\n",
                 q->auth ? ", error=\"invalid_token\"" : "");
    } else if (strcmp(q->method, "POST") == 0) {
        on_post(h, q, r);
    } else if (strcmp(q->method, "DELETE") == 0) {
        on_delete(h, q, r);
    } else if (strcmp(q->method, "GET") == 0) {
        on_get(h, q, r);
    } else {
        set_error(r, 405,
                  "method not allowed: POST a JSON-RPC message, GET the session's event "
                  "stream, DELETE the session");
        snprintf(r->extra, sizeof r->extra, "Allow: GET, POST, DELETE\r\n");
    }
}

/* Reads the next request head into q, from c->buf and then the socket.
 * Returns 0 when the client closed or idled out between requests (nobody to
 * answer); else 1, with q read or refused (408 when the head did not come
 * within its deadline). */
static int read_head(struct conn *c, struct sbx_mcp_http_request *q)
{
    int64_t deadline = now_ms() + c->h->idle_ms;
    int started = c->len > 0;

    while (sbx_mcp_http_parse_head(c->buf, c->len, q) == SBX_MCP_HEAD_MORE) {
        ssize_t n = read_until(c->fd, c->buf + c->len, HEAD_MAX - c->len, deadline);

        if (n <= 0) {
            refuse(q, 408, "the request head did not come in time");
            return started;
        }
        if (!started)
            deadline = now_ms() + c->h->head_ms;
        started = 1;
        c->len += (size_t)n;
    }
    return 1;
}

/* Reads q's body: what followed the head in c->buf, then the socket. */
static int read_body(struct conn *c, size_t head_len, struct sbx_mcp_http_request *q)
{
    size_t want = q->content_length > 0 ? (size_t)q->content_length : 0;
    size_t have = c->len - head_len;
    int64_t deadline = now_ms() + c->h->body_ms;

    q->body = malloc(want + 1);
    if (!q->body)
        abort();
    if (have > want)
        have = want;
    memcpy(q->body, c->buf + head_len, have);
    memmove(c->buf, c->buf + head_len + have, c->len - head_len - have);
    c->len -= head_len + have;
    while (have < want) {
        ssize_t n = read_until(c->fd, q->body + have, want - have, deadline);

        if (n <= 0)
            return -1;
        have += (size_t)n;
    }
    q->body[want] = '\0';
    q->body_len = want;
    return 0;
}

/* An answer to a refused head, saying what was wrong; the connection then
 * closes: after a head that could not be read, where the next request would
 * start is not known. */
static void set_refusal(struct response *r, const struct sbx_mcp_http_request *q)
{
    char msg[256];

    snprintf(msg, sizeof msg, "the request could not be read: %s", q->error);
    set_error(r, q->status, msg);
    r->close = 1;
}

/* Serves one request; returns 0 to keep the connection, -1 to close it. */
static int serve_one(struct conn *c)
{
    struct sbx_mcp_http_request q;
    struct response r = {.fd = c->fd};
    int rc;

    if (!read_head(c, &q))
        return -1;
    if (q.status) {
        set_refusal(&r, &q);
    } else if (read_body(c, q.head_len, &q) == -1) {
        free(q.body);
        return -1; /* the client stopped sending: nobody to answer */
    } else {
        r.close = !q.keep_alive;
        on_request(c->h, &q, &r);
        free(q.body);
    }
    rc = (!r.sent && send_response(c->fd, &r) == -1) || r.close ? -1 : 0;
    free(r.body);
    return rc;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct http *h = c->h;
    struct timeval tv = {.tv_sec = WRITE_S};

    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    while (!stopping && serve_one(c) == 0)
        ;
    if (h->thread_end)
        h->thread_end();
    pthread_mutex_lock(&h->lock);
    h->conn_fds[c->slot] = -1;
    close(c->fd);
    if (--h->nconns == 0)
        pthread_cond_signal(&h->drained);
    pthread_mutex_unlock(&h->lock);
    free(c);
    return NULL;
}

/* Hands a new connection to a thread of its own, or refuses it with 503. */
static void on_accept(struct http *h, int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                               "Connection: close\r\nRetry-After: 1\r\n\r\n";
    struct conn *c = malloc(sizeof *c);
    pthread_attr_t attr;
    pthread_t t;
    int slot = -1;

    if (!c)
        abort();
    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < MAX_CONNS && slot < 0; i++)
        if (h->conn_fds[i] == -1)
            slot = i;
    if (slot >= 0) {
        h->conn_fds[slot] = fd;
        h->nconns++;
    }
    pthread_mutex_unlock(&h->lock);
    if (slot < 0) {
        (void)!send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        free(c);
        return;
    }
    *c = (struct conn){.h = h, .fd = fd, .slot = slot};
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, conn_main, c) != 0) {
        pthread_mutex_lock(&h->lock);
        h->conn_fds[slot] = -1;
        h->nconns--;
        pthread_mutex_unlock(&h->lock);
        close(fd);
        free(c);
    }
    pthread_attr_destroy(&attr);
}

/* "127.0.0.1:PORT", "localhost:PORT" or "[::1]:PORT" (any numeric address).
 * Returns 0 and fills ss, or -1 with err filled. */
static int parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *sslen, char *err,
                        size_t errlen)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    char *end;
    long port;

    memset(ss, 0, sizeof *ss);
    if (!colon || (size_t)(colon - spec) >= sizeof host || !colon[1]) {
        snprintf(err, errlen, "--http %s: expected ADDRESS:PORT, e.g. 127.0.0.1:8765", spec);
        return -1;
    }
    port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) {
        snprintf(err, errlen, "--http %s: port must be 0..65535", spec);
        return -1;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) == 1) {
            v6->sin6_family = AF_INET6;
            v6->sin6_port = htons((uint16_t)port);
            *sslen = sizeof *v6;
            return 0;
        }
    } else if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *sslen = sizeof *v4;
        return 0;
    }
    snprintf(err, errlen, "--http %s: expected a numeric address (127.0.0.1, [::1]) or localhost",
             spec);
    return -1;
}

static int is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/* Binds and listens; returns the socket, or -1 with err filled. */
static int listen_on(const struct sbx_mcp_http_opts *opts, int *loopback, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, one = 1;

    if (parse_listen(opts->listen, &ss, &sl, err, errlen) == -1)
        return -1;
    *loopback = is_loopback(&ss);
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1 ||
        bind(fd, (struct sockaddr *)&ss, sl) == -1 || listen(fd, 64) == -1 ||
        getsockname(fd, (struct sockaddr *)&ss, &sl) == -1) {
        snprintf(err, errlen, "--http %s: %s", opts->listen, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    unsigned port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                  : ((struct sockaddr_in6 *)&ss)->sin6_port);
    fprintf(stderr, "sandboxctl mcp: Streamable HTTP on %s (port %u), endpoint /mcp%s\n",
            opts->listen, port,
            *loopback ? "" : "; WARNING: not a loopback address, the token is sent in clear");
    if (opts->port_file) {
        FILE *f = fopen(opts->port_file, "w");

        if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
            snprintf(err, errlen, "%s: %s", opts->port_file, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* Ends every connection and waits for their threads.  Reads end at once; a
 * tool call in progress is let finish (sandboxctl's own task timeouts bound
 * it): a sandbox left half made would be worse than a slow stop. */
static void drain(struct http *h)
{
    struct timespec until;

    pthread_mutex_lock(&h->lock);
    for (int i = 0; i < MAX_CONNS; i++)
        if (h->conn_fds[i] != -1)
            shutdown(h->conn_fds[i], SHUT_RD);
    while (h->nconns > 0) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        if (pthread_cond_timedwait(&h->drained, &h->lock, &until) != 0)
            fprintf(stderr, "sandboxctl mcp: stopping: waiting for %d requests in progress\n",
                    h->nconns);
    }
    pthread_mutex_unlock(&h->lock);
}

static void serve(struct http *h, int lfd)
{
    sigset_t block, old;

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    while (!stopping) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};

        if (poll(&p, 1, 500) <= 0)
            continue; /* EINTR from our signal, or the periodic look at stopping */
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
        if (fd == -1)
            continue;
        /* An answer goes out as a head and a body, two writes: without
         * this the body waits for the client's delayed ACK (about 40 ms). */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* The connection threads leave the signals to this one. */
        pthread_sigmask(SIG_BLOCK, &block, &old);
        on_accept(h, fd);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
}

int sbx_mcp_http_run(struct sbx_mcp_server *srv, const struct sbx_mcp_http_opts *opts)
{
    struct http *h = calloc(1, sizeof *h);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    char err[512];
    int lfd;

    if (!h)
        abort();
    *h = (struct http){
        .srv = srv,
        .token = opts->token,
        .idle_ms = opts->idle_ms > 0 ? opts->idle_ms : IDLE_MS,
        .head_ms = opts->head_ms > 0 ? opts->head_ms : HEAD_MS,
        .body_ms = opts->body_ms > 0 ? opts->body_ms : BODY_MS,
        .thread_end = opts->thread_end,
    };
    for (int i = 0; i < MAX_CONNS; i++)
        h->conn_fds[i] = -1;
    lfd = listen_on(opts, &h->loopback, err, sizeof err);
    if (lfd == -1) {
        fprintf(stderr, "sandboxctl mcp: %s\n", err);
        free(h);
        return 1;
    }
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->drained, NULL);
    h->sessions = sbx_mcp_http_sessions_new(srv, MAX_SESSIONS, SESSION_IDLE_S);
    stopping = 0;
    sigemptyset(&sa.sa_mask); /* no SA_RESTART: poll() returns at once */
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    serve(h, lfd);
    close(lfd);
    drain(h);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    fprintf(stderr, "sandboxctl mcp: stopped\n");
    sbx_mcp_http_sessions_free(h->sessions);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->drained);
    free(h);
    return 0;
}
