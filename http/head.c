/*
 * head.c - strict HTTP/1.1 request and response heads (RFC 9112, RFC 9110).
 *
 * A head is read line by line from the start of the buffer.  A line is
 * judged only once its CRLF is there, and the caps are judged on the bytes
 * buffered so far, so a prefix of any input gives NEED_MORE or exactly the
 * verdict (and error text) of the whole input.  The caller re-parses from
 * the start after every read; heads are capped, so that stays cheap.
 *
 * Everything ambiguous is refused (RFC 9112 section 11.2, request
 * smuggling): a proxy that frames a message differently from the origin
 * behind it lets one request hide inside another.
 */
#include <arpa/inet.h>
#include <string.h>

#include "http_int.h"

#define CL_DIGITS_MAX 18 /* decimal digits: below 10^18, no overflow */

/* ---- authority: host [":" port] (RFC 9110 section 4.2.1, RFC 3986 3.2) ---- */

/* port: 1 to 5 digits, 1..65535 (port 0 names no service). */
static const char *parse_port(const char *p, size_t n, uint16_t *port)
{
    unsigned v = 0;

    if (n == 0 || n > 5)
        return "bad port";
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return "bad port";
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (v == 0 || v > 65535)
        return "bad port";
    *port = (uint16_t)v;
    return NULL;
}

/* An IPv6 literal between the brackets; IPvFuture and zone ids are refused. */
static bool ipv6_ok(const char *p, size_t n)
{
    char text[INET6_ADDRSTRLEN];
    unsigned char addr[16];

    if (n < 2 || n >= sizeof(text))
        return false;
    for (size_t i = 0; i < n; i++)
        if (hex_value((unsigned char)p[i]) < 0 && p[i] != ':' && p[i] != '.')
            return false;
    memcpy(text, p, n);
    text[n] = '\0';
    return inet_pton(AF_INET6, text, addr) == 1;
}

/* A reg-name byte: only the unreserved set.  Sub-delims and percent-
 * encoding are legal in a URI's reg-name but name no DNS host; refusing them
 * keeps the host the policy sees the host the origin sees. */
static bool is_host_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* Length of the host at p: "[v6]" or a reg-name up to ':' or the end; 0 if
 * bad, with *error set. */
static size_t host_length(const char *p, size_t n, const char **error)
{
    size_t h = 0;

    if (n > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (!close || !ipv6_ok(p + 1, (size_t)(close - p) - 1)) {
            *error = "bad IPv6 address";
            return 0;
        }
        return (size_t)(close - p) + 1;
    }
    while (h < n && p[h] != ':') {
        if (!is_host_char((unsigned char)p[h])) {
            *error = "bad character in the host";
            return 0;
        }
        h++;
    }
    if (h == 0)
        *error = "empty host";
    return h;
}

/* authority = host [":" port], without userinfo (RFC 9112 section 3.2.1 and
 * 3.2.3: a "user@" part is refused, it only serves to deceive).  Fills host
 * (brackets kept) and port (0 when absent).  NULL or what was wrong. */
static const char *parse_authority(const char *p, size_t n, bool need_port, struct http_view *host,
                                   uint16_t *port)
{
    const char *error = NULL;
    size_t h;

    if (memchr(p, '@', n))
        return "userinfo in the authority";
    h = host_length(p, n, &error);
    if (h == 0)
        return error;
    *host = (struct http_view){p, h};
    *port = 0;
    if (h == n)
        return need_port ? "no port in the authority" : NULL;
    if (p[h] != ':')
        return "bad character in the host";
    return parse_port(p + h + 1, n - h - 1, port);
}

/* ---- the request line (RFC 9112 section 3) ---- */

/* Every byte of a request-target is a visible ASCII character, '%' starts
 * a percent-encoded octet, and there is no fragment (RFC 9112 section 3.2:
 * a fragment is never sent). */
static const char *check_target_bytes(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '#')
            return "fragment in the request target";
        if (c <= 0x20 || c >= 0x7f)
            return "bad byte in the request target";
        if (c == '%' && (i + 2 >= n || hex_value((unsigned char)p[i + 1]) < 0 ||
                         hex_value((unsigned char)p[i + 2]) < 0))
            return "bad percent-encoding in the request target";
    }
    return NULL;
}

/* absolute-form (RFC 9112 section 3.2.2): "http://" authority [path] [?query].
 * Only http: an https URI goes through CONNECT. */
static const char *parse_absolute(struct http_request *req)
{
    const char *t = req->target.p, *end = t + req->target.len, *colon, *auth, *a_end;
    const char *error;

    colon = memchr(t, ':', req->target.len);
    if (!colon || colon == t || end - colon < 3 || colon[1] != '/' || colon[2] != '/')
        return "request target is not origin- or absolute-form";
    req->scheme = (struct http_view){t, (size_t)(colon - t)};
    if (!view_is(req->scheme, "http"))
        return "scheme other than http";
    auth = colon + 3;
    for (a_end = auth; a_end < end && *a_end != '/' && *a_end != '?'; a_end++)
        ;
    error = parse_authority(auth, (size_t)(a_end - auth), false, &req->host, &req->port);
    if (error)
        return error;
    if (a_end == end)
        req->path = (struct http_view){"/", 1}; /* RFC 9112 section 3.2.1 */
    else if (*a_end == '?')
        return "query without a path";
    else
        req->path = (struct http_view){a_end, (size_t)(end - a_end)};
    req->form = HTTP_FORM_ABSOLUTE;
    return NULL;
}

/* The four forms of RFC 9112 section 3.2, each only where it belongs. */
static const char *parse_target(struct http_request *req)
{
    struct http_view t = req->target;
    const char *error = check_target_bytes(t.p, t.len);

    if (error)
        return error;
    if (req->method.len == 7 && memcmp(req->method.p, "CONNECT", 7) == 0) {
        req->form = HTTP_FORM_AUTHORITY; /* section 3.2.3: host:port, nothing else */
        return parse_authority(t.p, t.len, true, &req->host, &req->port);
    }
    if (t.len == 1 && t.p[0] == '*') {
        if (req->method.len != 7 || memcmp(req->method.p, "OPTIONS", 7) != 0)
            return "'*' target without OPTIONS"; /* section 3.2.4 */
        req->form = HTTP_FORM_ASTERISK;
        req->path = t;
        return NULL;
    }
    if (t.p[0] == '/') {
        req->form = HTTP_FORM_ORIGIN; /* section 3.2.1 */
        req->path = t;
        return NULL;
    }
    return parse_absolute(req);
}

/* HTTP-version (RFC 9112 section 2.3), case-sensitive, only 1.0 and 1.1. */
static bool parse_version(const char *p, size_t n, unsigned *minor)
{
    if (n != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
        return false;
    *minor = (unsigned)(p[7] - '0');
    return true;
}

/* request-line = method SP request-target SP HTTP-version, one SP each. */
static const char *parse_request_line(const char *p, size_t n, struct http_request *req)
{
    const char *end = p + n, *sp1 = p, *sp2;

    while (sp1 < end && is_tchar((unsigned char)*sp1))
        sp1++;
    if (sp1 == p || sp1 == end || *sp1 != ' ')
        return "bad method";
    req->method = (struct http_view){p, (size_t)(sp1 - p)};
    sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
    if (!sp2 || sp2 == sp1 + 1)
        return "bad request line";
    req->target = (struct http_view){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
    if (!parse_version(sp2 + 1, (size_t)(end - sp2 - 1), &req->minor))
        return "bad HTTP version";
    return parse_target(req);
}

/* ---- the status line (RFC 9112 section 4) ---- */

/* status-line = HTTP-version SP status-code SP [reason-phrase]; the SP
 * before an empty reason is often left out, which is not ambiguous. */
static const char *parse_status_line(const char *p, size_t n, struct http_response *resp)
{
    if (n < 12 || !parse_version(p, 8, &resp->minor))
        return "bad HTTP version";
    if (p[8] != ' ' || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' ||
        p[11] > '9')
        return "bad status code";
    resp->status = (unsigned)((p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0'));
    if (n > 12 && p[12] != ' ')
        return "bad status code";
    for (size_t i = 13; i < n; i++)
        if (is_bad_ctl((unsigned char)p[i]))
            return "control byte in the reason phrase";
    return NULL;
}

/* ---- field lines (RFC 9112 section 5, RFC 9110 section 5) ---- */

/* What the fields say, gathered as they are read. */
struct fields {
    bool request;
    unsigned minor;
    bool seen_host, seen_cl, seen_te, seen_proxy_auth;
    bool te_chunked_last; /* the last transfer coding so far is chunked */
    bool close, keep_alive, expect_continue, upgrade;
    uint64_t content_length;
    struct http_view host, proxy_authorization;
};

/* field-line = field-name ":" OWS field-value OWS.  No white space before
 * the colon (section 5.1), no obs-fold (section 5.2), no CTL but HT in the
 * value (RFC 9110 section 5.5). */
static const char *parse_field_line(const char *p, size_t n, struct http_header *h)
{
    size_t i = 0;

    if (is_ows(p[0]))
        return "obs-fold (a line starting with white space)";
    while (i < n && is_tchar((unsigned char)p[i]))
        i++;
    if (i == n)
        return "field line without a colon";
    if (p[i] != ':')
        return is_ows(p[i]) ? "white space before a colon" : "bad field name";
    if (i == 0)
        return "empty field name";
    for (size_t j = i + 1; j < n; j++)
        if (is_bad_ctl((unsigned char)p[j]))
            return "control byte in a field value";
    h->name = (struct http_view){p, i};
    h->value = trim(p + i + 1, p + n);
    return NULL;
}

/* Content-Length = 1*DIGIT (RFC 9110 section 8.6), one field only: a list
 * or a second field, even an equal one, is refused (RFC 9112 6.3 item 5). */
static const char *on_content_length(struct fields *f, struct http_view v)
{
    uint64_t n = 0;

    if (f->seen_cl)
        return "two Content-Length fields";
    if (f->seen_te)
        return "Content-Length with Transfer-Encoding";
    if (v.len == 0 || v.len > CL_DIGITS_MAX)
        return "bad Content-Length";
    for (size_t i = 0; i < v.len; i++) {
        if (v.p[i] < '0' || v.p[i] > '9')
            return "bad Content-Length";
        n = n * 10 + (uint64_t)(v.p[i] - '0');
    }
    f->seen_cl = true;
    f->content_length = n;
    return NULL;
}

/* A request's Transfer-Encoding must be exactly "chunked" (RFC 9112 section
 * 6.3 item 4 lets a server refuse anything else with 400). */
static const char *on_request_te(struct fields *f, struct http_view v)
{
    if (f->seen_te)
        return "two Transfer-Encoding fields";
    if (!view_is(v, "chunked"))
        return "Transfer-Encoding other than chunked";
    f->seen_te = true;
    f->te_chunked_last = true;
    return NULL;
}

/* A response's transfer codings: a list over one or more fields, chunked at
 * most once and only last (RFC 9112 section 6.1). */
static const char *on_response_te(struct fields *f, struct http_view v)
{
    const char *p = v.p, *end = v.p + v.len;
    struct http_view coding;
    bool any = false;

    while (list_next(&p, end, &coding)) {
        const char *semi = memchr(coding.p, ';', coding.len);
        struct http_view name = semi ? trim(coding.p, semi) : coding;

        if (f->te_chunked_last)
            return "chunked is not the last transfer coding";
        if (!view_is_token(name) || (semi && view_is(name, "chunked")))
            return "bad Transfer-Encoding";
        f->te_chunked_last = view_is(name, "chunked");
        any = true;
    }
    if (!any)
        return "bad Transfer-Encoding";
    f->seen_te = true;
    return NULL;
}

static const char *on_transfer_encoding(struct fields *f, struct http_view v)
{
    /* RFC 9112 section 6.1: Transfer-Encoding in a 1.0 message means the
     * framing is faulty. */
    if (f->minor == 0)
        return "Transfer-Encoding in an HTTP/1.0 message";
    if (f->seen_cl)
        return "Content-Length with Transfer-Encoding";
    return f->request ? on_request_te(f, v) : on_response_te(f, v);
}

/* Connection = #connection-option (RFC 9110 section 7.6.1).  Naming a
 * framing field there would make a proxy drop it and the next hop frame the
 * message differently: refused. */
static const char *on_connection(struct fields *f, struct http_view v)
{
    const char *p = v.p, *end = v.p + v.len;
    struct http_view opt;

    while (list_next(&p, end, &opt)) {
        if (!view_is_token(opt))
            return "bad Connection field";
        if (view_is(opt, "content-length") || view_is(opt, "transfer-encoding"))
            return "Connection names a framing field";
        if (view_is(opt, "close"))
            f->close = true;
        else if (view_is(opt, "keep-alive"))
            f->keep_alive = true;
    }
    return NULL;
}

/* Host = uri-host [":" port], once (RFC 9112 section 3.2). */
static const char *on_host(struct fields *f, struct http_view v)
{
    struct http_view host;
    uint16_t port;

    if (f->seen_host)
        return "two Host fields";
    if (v.len == 0 || parse_authority(v.p, v.len, false, &host, &port) != NULL)
        return "bad Host field";
    f->seen_host = true;
    f->host = v;
    return NULL;
}

static const char *on_request_field(struct fields *f, const struct http_header *h)
{
    if (view_is(h->name, "host"))
        return on_host(f, h->value);
    if (view_is(h->name, "expect")) { /* RFC 9110 section 10.1.1: not in 1.0 */
        f->expect_continue |= f->minor == 1 && view_is(h->value, "100-continue");
        return NULL;
    }
    if (view_is(h->name, "upgrade")) {
        f->upgrade = true;
        return NULL;
    }
    if (view_is(h->name, "proxy-authorization")) {
        if (f->seen_proxy_auth)
            return "two Proxy-Authorization fields";
        f->seen_proxy_auth = true;
        f->proxy_authorization = h->value;
    }
    return NULL;
}

/* What a field means for the message; NULL or what was wrong. */
static const char *on_field(struct fields *f, const struct http_header *h)
{
    if (view_is(h->name, "content-length"))
        return on_content_length(f, h->value);
    if (view_is(h->name, "transfer-encoding"))
        return on_transfer_encoding(f, h->value);
    if (view_is(h->name, "connection"))
        return on_connection(f, h->value);
    return f->request ? on_request_field(f, h) : NULL;
}

/* Persistence (RFC 9112 section 9.3): 1.1 unless "close", 1.0 only with
 * "keep-alive". */
static bool persistent(const struct fields *f)
{
    if (f->close)
        return false;
    return f->minor == 1 || f->keep_alive;
}

/* ---- the head, line by line ---- */

struct scan {
    const char *buf;
    size_t len;
    size_t pos; /* where the next line starts */
    size_t max_head;
    const char *error;
};

static enum http_result fail(struct scan *s, enum http_result r, const char *error)
{
    s->error = error;
    return r;
}

/* The line at s->pos: OK with its CR at *end once its CRLF is buffered.
 * Lines end only in CRLF (RFC 9112 section 2.2: a bare CR or LF is refused).
 * A line not yet ended is at least as long as the bytes so far, and the head
 * needs a CRLF more: the caps are judged on that, so NEED_MORE never comes
 * back once the buffered bytes already break one. */
static enum http_result next_line(struct scan *s, size_t max_line, const char *too_big, size_t *end)
{
    size_t e = s->pos;

    while (e < s->len && s->buf[e] != '\r' && s->buf[e] != '\n')
        e++;
    if (e - s->pos > max_line || e + 2 > s->max_head)
        return fail(s, HTTP_R_TOO_BIG, too_big);
    if (e == s->len)
        return HTTP_R_NEED_MORE;
    if (s->buf[e] == '\n')
        return fail(s, HTTP_R_BAD, "bare LF in the head");
    if (e + 1 == s->len)
        return HTTP_R_NEED_MORE;
    if (s->buf[e + 1] != '\n')
        return fail(s, HTTP_R_BAD, "bare CR in the head");
    *end = e;
    return HTTP_R_OK;
}

/* The start line at s->pos (a request skips empty lines before it, RFC 9112
 * section 2.2); on OK *start and *end bound it and s->pos is past it. */
static enum http_result start_line(struct scan *s, const struct http_limits *lim, bool skip_empty,
                                   size_t *start, size_t *end)
{
    const char *too_big = skip_empty ? "request line too long" : "status line too long";

    for (;;) {
        enum http_result r = next_line(s, lim->max_line, too_big, end);
        if (r != HTTP_R_OK)
            return r;
        *start = s->pos;
        s->pos = *end + 2;
        if (*end > *start || !skip_empty)
            return HTTP_R_OK;
    }
}

/* Field lines up to the empty line that ends the head; s->pos is then the
 * head's length. */
static enum http_result field_lines(struct scan *s, const struct http_limits *lim,
                                    struct http_header *h, size_t *n, struct fields *f)
{
    size_t cap = lim->max_headers < HTTP_MAX_HEADERS_CAP ? lim->max_headers : HTTP_MAX_HEADERS_CAP;

    for (;;) {
        size_t start = s->pos, end;
        const char *error;
        enum http_result r = next_line(s, SIZE_MAX, "header section too large", &end);

        if (r != HTTP_R_OK)
            return r;
        s->pos = end + 2;
        if (end == start)
            return HTTP_R_OK;
        if (*n >= cap)
            return fail(s, HTTP_R_TOO_BIG, "too many header fields");
        error = parse_field_line(s->buf + start, end - start, &h[*n]);
        if (!error)
            error = on_field(f, &h[*n]);
        if (error)
            return fail(s, HTTP_R_BAD, error);
        (*n)++;
    }
}

/* ---- requests ---- */

static void request_init(struct http_request *req)
{
    static const struct http_view none = {"", 0};

    req->method = req->target = req->scheme = req->host = req->path = none;
    req->host_header = req->proxy_authorization = none;
    req->minor = 0;
    req->form = HTTP_FORM_ORIGIN;
    req->port = 0;
    req->has_host_header = false;
    req->body = HTTP_BODY_NONE;
    req->content_length = 0;
    req->keep_alive = req->expect_continue = req->upgrade = false;
    req->n_headers = 0;
    req->head_len = 0;
    req->error = NULL;
}

/* Framing of a request (RFC 9112 section 6.3 items 4 to 7): chunked, a
 * length, or none.  A CONNECT has no content (RFC 9110 section 9.3.6). */
static enum http_result request_done(struct http_request *req, const struct fields *f)
{
    req->has_host_header = f->seen_host;
    req->host_header = f->host;
    req->proxy_authorization = f->proxy_authorization;
    req->expect_continue = f->expect_continue;
    req->upgrade = f->upgrade;
    req->keep_alive = persistent(f);
    req->content_length = f->content_length;
    if (f->seen_te)
        req->body = HTTP_BODY_CHUNKED;
    else if (f->content_length > 0)
        req->body = HTTP_BODY_LENGTH;
    if (req->form == HTTP_FORM_AUTHORITY && req->body != HTTP_BODY_NONE) {
        req->error = "CONNECT with a body";
        return HTTP_R_BAD;
    }
    return HTTP_R_OK;
}

/* Contract in http.h.  lim must not be NULL.  On BAD and TOO_BIG, req->error
 * says why; a TOO_BIG before the request line ended leaves method.len at 0
 * (414), after it is the header section's (431). */
enum http_result http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
                                    struct http_request *req)
{
    struct scan s = {buf, len, 0, lim->max_head, NULL};
    struct fields f = {.request = true};
    size_t start, end;
    enum http_result r;

    request_init(req);
    r = start_line(&s, lim, true, &start, &end);
    if (r == HTTP_R_OK) {
        s.error = parse_request_line(buf + start, end - start, req);
        r = s.error ? HTTP_R_BAD : HTTP_R_OK;
    }
    if (r == HTTP_R_OK) {
        f.minor = req->minor;
        r = field_lines(&s, lim, req->headers, &req->n_headers, &f);
    }
    if (r != HTTP_R_OK) {
        req->error = s.error;
        return r;
    }
    req->head_len = s.pos;
    return request_done(req, &f);
}

/* ---- responses ---- */

/* Framing of a response (RFC 9112 section 6.3 items 1 to 8). */
static enum http_body response_body(const struct http_response *resp, const char *request_method,
                                    const struct fields *f)
{
    bool head = request_method && strcmp(request_method, "HEAD") == 0;
    bool connect = request_method && strcmp(request_method, "CONNECT") == 0;

    /* Item 1: HEAD, 1xx, 204, 304 end at the head.  Item 2: a 2xx to
     * CONNECT turns into a tunnel (egressd never forwards one). */
    if (head || resp->status < 200 || resp->status == 204 || resp->status == 304)
        return HTTP_BODY_NONE;
    if (connect && resp->status < 300)
        return HTTP_BODY_NONE;
    if (f->seen_te) /* items 3 and 4: chunked last, else to the close */
        return f->te_chunked_last ? HTTP_BODY_CHUNKED : HTTP_BODY_TO_CLOSE;
    if (f->seen_cl) /* item 6 */
        return f->content_length > 0 ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
    return HTTP_BODY_TO_CLOSE; /* item 8 */
}

static void response_init(struct http_response *resp)
{
    resp->status = 0;
    resp->minor = 0;
    resp->body = HTTP_BODY_NONE;
    resp->content_length = 0;
    resp->keep_alive = false;
    resp->n_headers = 0;
    resp->head_len = 0;
    resp->error = NULL;
}

/* Contract in http.h.  lim must not be NULL; request_method may be. */
enum http_result http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                                     const char *request_method, struct http_response *resp)
{
    struct scan s = {buf, len, 0, lim->max_head, NULL};
    struct fields f = {.request = false};
    size_t start, end;
    enum http_result r;

    response_init(resp);
    r = start_line(&s, lim, false, &start, &end);
    if (r == HTTP_R_OK) {
        s.error = parse_status_line(buf + start, end - start, resp);
        r = s.error ? HTTP_R_BAD : HTTP_R_OK;
    }
    if (r == HTTP_R_OK) {
        f.minor = resp->minor;
        r = field_lines(&s, lim, resp->headers, &resp->n_headers, &f);
    }
    if (r != HTTP_R_OK) {
        resp->error = s.error;
        return r;
    }
    resp->head_len = s.pos;
    resp->content_length = f.content_length;
    resp->body = response_body(resp, request_method, &f);
    resp->keep_alive = persistent(&f) && resp->body != HTTP_BODY_TO_CLOSE;
    return HTTP_R_OK;
}

/* Contract in http.h. */
const struct http_header *http_find(const struct http_header *h, size_t n, const char *name)
{
    struct http_view want = {name, strlen(name)};

    for (size_t i = 0; i < n; i++)
        if (views_equal_nocase(h[i].name, want))
            return &h[i];
    return NULL;
}
