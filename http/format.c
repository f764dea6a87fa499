/*
 * format.c - writing HTTP/1.1 heads on (RFC 9112, RFC 9110 section 7.6.1):
 * a request in origin form for the origin, a response for the client,
 * each without the hop-by-hop fields of the side it came from.
 */
#include "http_int.h"

struct out {
    char *p;
    size_t cap, len;
    bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->full || n > o->cap - o->len) {
        o->full = true;
        return;
    }
    if (n > 0)
        memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void put_view(struct out *o, struct http_view v)
{
    put(o, v.p, v.len);
}

/* Is `name` listed in any Connection field of h[0..n)? */
static bool named_by_connection(const struct http_header *h, size_t n, struct http_view name)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = h[i].value.p, *end = p + h[i].value.len;
        struct http_view opt;

        if (!view_is(h[i].name, "connection"))
            continue;
        while (list_next(&p, end, &opt))
            if (views_equal_nocase(opt, name))
                return true;
    }
    return false;
}

/* Hop-by-hop fields (RFC 9110 section 7.6.1) and the proxy's own ones: not
 * forwarded.  Framing fields always are (the parsers refuse a Connection
 * naming them, so a message is framed alike on both hops). */
static bool is_hop_by_hop(const struct http_header *h, size_t n, struct http_view name)
{
    static const char *const fixed[] = {"connection", "keep-alive", "te", "trailer", "upgrade"};

    if (view_is(name, "content-length") || view_is(name, "transfer-encoding"))
        return false;
    if (name.len >= 6 && view_is((struct http_view){name.p, 6}, "proxy-"))
        return true;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (view_is(name, fixed[i]))
            return true;
    return named_by_connection(h, n, name);
}

/* The end-to-end fields, then our Connection field (conn) and the empty
 * line. */
static void put_fields(struct out *o, const struct http_header *h, size_t n, bool skip_host,
                       enum http_connection conn)
{
    bool upgrade = conn == HTTP_CONN_UPGRADE_WEBSOCKET;

    for (size_t i = 0; i < n; i++) {
        if ((skip_host && view_is(h[i].name, "host")) || is_hop_by_hop(h, n, h[i].name) ||
            (upgrade && view_is(h[i].name, "sec-websocket-extensions")))
            continue;
        put_view(o, h[i].name);
        put(o, ": ", 2);
        put_view(o, h[i].value);
        put(o, "\r\n", 2);
    }
    switch (conn) {
    case HTTP_CONN_CLOSE: put_str(o, "Connection: close\r\n\r\n"); return;
    case HTTP_CONN_KEEP_ALIVE: put_str(o, "Connection: keep-alive\r\n\r\n"); return;
    case HTTP_CONN_UPGRADE_WEBSOCKET:
        put_str(o, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        return;
    }
}

/* A Host value we are handed must not break the head it goes into. */
static bool authority_safe(const char *a)
{
    if (!a || !*a)
        return false;
    for (; *a; a++)
        if ((unsigned char)*a <= 0x20 || (unsigned char)*a >= 0x7f)
            return false;
    return true;
}

/* Contract in http.h.  The request line is always HTTP/1.1 (RFC 9110
 * section 2.5: a proxy sends its own version); a CONNECT keeps its
 * authority-form target.  Also 0 when `authority` is empty or holds a byte
 * that cannot stand in a Host field. */
size_t http_format_request(const struct http_request *req, const char *authority,
                           enum http_connection conn, char *out, size_t cap)
{
    struct out o = {out, cap, 0, false};

    if (!authority_safe(authority))
        return 0;
    put_view(&o, req->method);
    put(&o, " ", 1);
    put_view(&o, req->form == HTTP_FORM_AUTHORITY ? req->target : req->path);
    put_str(&o, " HTTP/1.1\r\nHost: ");
    put_str(&o, authority);
    put(&o, "\r\n", 2);
    put_fields(&o, req->headers, req->n_headers, true, conn);
    return o.full ? 0 : o.len;
}

/* The reason phrase of the status line at the start of buf (may be empty). */
static struct http_view reason_phrase(const struct http_response *resp, const char *buf)
{
    const char *cr;

    if (!buf || resp->head_len < 14 || buf[12] != ' ')
        return (struct http_view){"", 0};
    cr = memchr(buf + 13, '\r', resp->head_len - 13);
    return (struct http_view){buf + 13, cr ? (size_t)(cr - buf - 13) : 0};
}

/* Contract in http.h.  `buf` is the buffer `resp` was parsed from (for the
 * reason phrase); the version is written as HTTP/1.1. */
size_t http_format_response(const struct http_response *resp, const char *buf,
                            enum http_connection conn, char *out, size_t cap)
{
    struct out o = {out, cap, 0, false};
    char code[5] = {' ', (char)('0' + resp->status / 100 % 10),
                    (char)('0' + resp->status / 10 % 10), (char)('0' + resp->status % 10), ' '};

    put_str(&o, "HTTP/1.1");
    put(&o, code, sizeof(code));
    put_view(&o, reason_phrase(resp, buf));
    put(&o, "\r\n", 2);
    put_fields(&o, resp->headers, resp->n_headers, false, conn);
    return o.full ? 0 : o.len;
}
