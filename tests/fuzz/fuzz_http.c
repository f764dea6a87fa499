/*
 * fuzz_http.c - properties of the HTTP/1.1 parser (http/http.h) on
 * any bytes, read as a request head, a response head and a chunked body.
 *
 * Properties:
 *   1. an accepted head lies within the input and the caps: head_len <=
 *      size and <= max_head, it ends in CRLF CRLF, at most max_headers
 *      fields, and every view points into it (the path may be the "/" an
 *      absolute-form target without a path stands for);
 *   2. what was accepted is what http.h promises: a token method, the
 *      target form its method allows, field names that are tokens, values
 *      without CTLs or blanks around them, one Host at most, framing that
 *      matches the one Content-Length or Transfer-Encoding field, and
 *      keep_alive as the version and the Connection fields say;
 *   3. the verdict does not depend on where the buffer ends: a prefix (in a
 *      buffer of its own size, so ASan sees any read past it) gives
 *      NEED_MORE or exactly the whole's verdict, error and head_len; every
 *      prefix of an accepted head needs more; the head alone gives the same
 *      verdict; NEED_MORE never comes once the bytes reach max_head;
 *   4. derived requests: an accepted head with one more Content-Length line
 *      is refused when it had Content-Length or Transfer-Encoding; with one
 *      more Host line when it had Host; padded with a field to exactly
 *      max_head it is read (unless the fields are at max_headers), one byte
 *      more is TOO_BIG;
 *   5. http_format_request's output parses again as an origin-form (or
 *      '*', or CONNECT's) request with the same method, path and framing,
 *      the Host it was given, one Connection field saying what was asked,
 *      and no Proxy-*, hop-by-hop, or Connection-named field;
 *   6. responses alike: framing by RFC 9112 section 6.3 (HEAD, 1xx, 204,
 *      304 have none), and http_format_response's output parses again
 *      with the same status and framing;
 *   7. chunked framing fed in three pieces (cuts chosen by the input) and
 *      byte by byte ends at the same byte, with the same verdict, as fed
 *      whole; MORE always takes all of a piece.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_check.h"
#include "http.h"

static const struct http_limits lim_small = {96, 512, 8};
static const struct http_limits lim_large = {8192, 16384, 100};
static const struct http_limits lim_reparse = {65536, 131072, HTTP_MAX_HEADERS_CAP};

static struct http_request req, part, again;
static struct http_response resp, rpart, ragain;
static char out[140000];

/* ---- helpers written apart from the parser ---- */

static bool tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token(struct http_view v)
{
    for (size_t i = 0; i < v.len; i++)
        if (!tchar((unsigned char)v.p[i]))
            return false;
    return v.len > 0;
}

static bool within(struct http_view v, const char *buf, size_t n)
{
    return v.len == 0 || (v.p >= buf && v.p + v.len <= buf + n);
}

static bool is(struct http_view v, const char *s)
{
    return v.len == strlen(s) && strncasecmp(v.p, s, v.len) == 0;
}

static bool equals(struct http_view a, struct http_view b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

static size_t count(const struct http_header *h, size_t n, const char *name)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += is(h[i].name, name);
    return c;
}

/* A copy of the first n bytes in a buffer of exactly that size. */
static char *copy(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    if (n)
        memcpy(p, data, n);
    return p;
}

/* Does any Connection field of h name `name`? */
static bool connection_names(const struct http_header *h, size_t n, struct http_view name)
{
    for (size_t i = 0; i < n; i++) {
        if (!is(h[i].name, "connection"))
            continue;
        const char *p = h[i].value.p, *end = p + h[i].value.len;
        while (p < end) {
            const char *e = memchr(p, ',', (size_t)(end - p));
            const char *s = p, *t = e ? e : end;
            p = e ? e + 1 : end;
            while (s < t && (*s == ' ' || *s == '\t'))
                s++;
            while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
                t--;
            if ((size_t)(t - s) == name.len && strncasecmp(s, name.p, name.len) == 0)
                return true;
        }
    }
    return false;
}

/* RFC 9112 section 9.3: 1.1 unless "close", 1.0 only with "keep-alive". */
static bool persistent(const struct http_header *h, size_t n, unsigned minor)
{
    if (connection_names(h, n, (struct http_view){"close", 5}))
        return false;
    return minor == 1 || connection_names(h, n, (struct http_view){"keep-alive", 10});
}

/* ---- property 1 and 2: what an accepted head looks like ---- */

static void check_fields(const struct http_header *h, size_t n, const char *buf, size_t hl)
{
    for (size_t i = 0; i < n; i++) {
        struct http_view v = h[i].value;
        CHECK(within(h[i].name, buf, hl) && within(v, buf, hl), "field %zu outside the head", i);
        CHECK(token(h[i].name), "field name %zu not a token", i);
        for (size_t j = 0; j < v.len; j++)
            CHECK(((unsigned char)v.p[j] >= 0x20 && v.p[j] != 0x7f) || v.p[j] == '\t',
                  "CTL 0x%02x in field %zu", (unsigned char)v.p[j], i);
        CHECK(v.len == 0 || (v.p[0] != ' ' && v.p[0] != '\t' && v.p[v.len - 1] != ' ' &&
                             v.p[v.len - 1] != '\t'),
              "field %zu value not trimmed", i);
    }
    CHECK(count(h, n, "content-length") <= 1, "two Content-Length accepted");
    CHECK(!(count(h, n, "content-length") && count(h, n, "transfer-encoding")),
          "Content-Length with Transfer-Encoding accepted");
}

static void check_head(const char *buf, size_t size, size_t hl, const struct http_limits *l,
                       size_t n)
{
    CHECK(hl <= size && hl <= l->max_head, "head_len %zu, size %zu", hl, size);
    CHECK(hl >= 4 && memcmp(buf + hl - 4, "\r\n\r\n", 4) == 0, "head does not end in CRLF CRLF");
    CHECK(n <= l->max_headers && n <= HTTP_MAX_HEADERS_CAP, "%zu fields", n);
    CHECK(memchr(buf, '\0', hl) == NULL, "NUL in an accepted head");
}

static void check_request(const char *buf, size_t size, const struct http_limits *l)
{
    size_t hl = req.head_len;
    bool connect = is(req.method, "CONNECT") && memcmp(req.method.p, "CONNECT", 7) == 0;

    check_head(buf, size, hl, l, req.n_headers);
    check_fields(req.headers, req.n_headers, buf, hl);
    CHECK(within(req.method, buf, hl) && within(req.target, buf, hl) &&
              within(req.scheme, buf, hl) && within(req.host, buf, hl) &&
              within(req.host_header, buf, hl) && within(req.proxy_authorization, buf, hl),
          "a view outside the head");
    CHECK(within(req.path, buf, hl) || (req.form == HTTP_FORM_ABSOLUTE && is(req.path, "/")),
          "path outside the head");
    CHECK(token(req.method) && req.minor <= 1, "method or version");
    CHECK((req.form == HTTP_FORM_AUTHORITY) == connect, "form %d for this method", req.form);
    CHECK(req.form != HTTP_FORM_ASTERISK || is(req.method, "OPTIONS"), "'*' without OPTIONS");
    CHECK(req.form != HTTP_FORM_ORIGIN || (req.path.len && req.path.p[0] == '/'), "origin path");
    CHECK(req.form != HTTP_FORM_AUTHORITY || req.port != 0, "CONNECT without a port");
    CHECK(req.form != HTTP_FORM_ABSOLUTE || is(req.scheme, "http"), "scheme");
    CHECK(memchr(req.target.p, '#', req.target.len) == NULL, "fragment accepted");
    CHECK(count(req.headers, req.n_headers, "host") == req.has_host_header, "Host count");
    if (req.body == HTTP_BODY_CHUNKED)
        CHECK(count(req.headers, req.n_headers, "transfer-encoding") == 1 && req.minor == 1,
              "chunked without one Transfer-Encoding in 1.1");
    if (req.body == HTTP_BODY_LENGTH) {
        const struct http_header *cl = http_find(req.headers, req.n_headers, "content-length");
        CHECK(cl && req.content_length > 0 && strtoull(cl->value.p, NULL, 10) == req.content_length,
              "length framing");
    }
    if (req.body == HTTP_BODY_NONE)
        CHECK(req.content_length == 0 && !count(req.headers, req.n_headers, "transfer-encoding"),
              "no body but a framing field");
    CHECK(req.body != HTTP_BODY_TO_CLOSE, "a request read to the close");
    CHECK(req.keep_alive == persistent(req.headers, req.n_headers, req.minor), "keep_alive");
}

/* ---- property 3: prefixes ---- */

static void check_request_prefix(const uint8_t *data, size_t cut, const struct http_limits *l,
                                 enum http_result whole)
{
    char *p = copy(data, cut);
    enum http_result r = http_parse_request(p, cut, l, &part);

    free(p);
    if (r == HTTP_R_NEED_MORE) {
        CHECK(cut < l->max_head, "NEED_MORE with %zu bytes, max_head %zu", cut, l->max_head);
        CHECK(whole != HTTP_R_OK || cut < req.head_len, "prefix of %zu needs more, head %zu", cut,
              req.head_len);
        return;
    }
    CHECK(r == whole && part.error == req.error, "prefix of %zu: %d '%s', whole: %d '%s'", cut, r,
          part.error ? part.error : "", whole, req.error ? req.error : "");
    CHECK(r != HTTP_R_OK || part.head_len == req.head_len, "prefix head_len");
}

/* ---- property 4: derived requests ---- */

static void check_derived(const uint8_t *data, const struct http_limits *l, const char *line,
                          bool refused)
{
    size_t hl = req.head_len, n = strlen(line), at = 0;

    while (data[at] == '\r') /* the empty lines before the request line */
        at += 2;
    at = (size_t)((const uint8_t *)memchr(data + at, '\n', hl - at) - data) + 1;
    char *p = malloc(hl + n);

    memcpy(p, data, at);
    memcpy(p + at, line, n);
    memcpy(p + at + n, data + at, hl - at);
    enum http_result r = http_parse_request(p, hl + n, l, &part);
    free(p);
    if (refused)
        CHECK(r == HTTP_R_BAD || r == HTTP_R_TOO_BIG, "with '%.*s' added: %d", (int)n - 2, line, r);
}

/* The accepted head with a field inserted after the request line that
 * makes it exactly `total` bytes long. */
static enum http_result padded(const uint8_t *data, const struct http_limits *l, size_t total)
{
    size_t hl = req.head_len, at = 0, pad = total - hl;
    char *p = malloc(total);

    while (data[at] == '\r')
        at += 2;
    at = (size_t)((const uint8_t *)memchr(data + at, '\n', hl - at) - data) + 1;
    memcpy(p, data, at);
    memcpy(p + at, "X-Pad:", 6);
    memset(p + at + 6, 'v', pad - 8);
    memcpy(p + at + pad - 2, "\r\n", 2);
    memcpy(p + at + pad, data + at, hl - at);
    enum http_result r = http_parse_request(p, total, l, &part);
    free(p);
    return r;
}

/* Padded to exactly max_head the head is read (if a field fits), one byte
 * more is TOO_BIG. */
static void check_cap(const uint8_t *data, const struct http_limits *l)
{
    if (req.head_len + 8 > l->max_head)
        return;
    enum http_result r = padded(data, l, l->max_head);
    CHECK(r == (req.n_headers < l->max_headers ? HTTP_R_OK : HTTP_R_TOO_BIG),
          "padded to max_head: %d %s", r, part.error ? part.error : "");
    r = padded(data, l, l->max_head + 1);
    CHECK(r == HTTP_R_TOO_BIG, "padded to max_head + 1: %d", r);
}

/* ---- property 5: the head sent upstream ---- */

static void check_format_request(bool keep_alive)
{
    char authority[300];
    size_t n;

    if (req.host.len > 0 && req.host.len < 250)
        snprintf(authority, sizeof(authority), "%.*s:%u", (int)req.host.len, req.host.p,
                 req.port ? req.port : 80);
    else
        strcpy(authority, "example.com");
    n = http_format_request(&req, authority, keep_alive ? HTTP_CONN_KEEP_ALIVE : HTTP_CONN_CLOSE,
                            out, sizeof(out));
    CHECK(n > 0, "format_request gave nothing");
    CHECK(http_parse_request(out, n, &lim_reparse, &again) == HTTP_R_OK,
          "format_request output refused: %s\n%.*s", again.error, (int)n, out);
    CHECK(again.head_len == n && again.minor == 1, "reparsed head_len or version");
    CHECK(equals(again.method, req.method), "method changed");
    if (req.form == HTTP_FORM_AUTHORITY)
        CHECK(again.form == HTTP_FORM_AUTHORITY && equals(again.target, req.target), "CONNECT");
    else
        CHECK(again.form ==
                      (req.form == HTTP_FORM_ASTERISK ? HTTP_FORM_ASTERISK : HTTP_FORM_ORIGIN) &&
                  equals(again.path, req.path),
              "path changed: '%.*s'", (int)again.path.len, again.path.p);
    CHECK(again.has_host_header && is(again.host_header, authority) &&
              is(again.headers[0].name, "host"),
          "Host is not the authority, first");
    CHECK(again.body == req.body && again.content_length == req.content_length, "framing changed");
    CHECK(again.keep_alive == keep_alive &&
              count(again.headers, again.n_headers, "connection") == 1,
          "Connection");
    CHECK(again.proxy_authorization.len == 0 && !again.upgrade, "Proxy-Authorization or Upgrade");
    for (size_t i = 0; i < again.n_headers; i++) {
        struct http_view name = again.headers[i].name;
        CHECK(!(name.len >= 6 && strncasecmp(name.p, "proxy-", 6) == 0) && !is(name, "te") &&
                  !is(name, "trailer") && !is(name, "keep-alive") && !is(name, "upgrade"),
              "hop-by-hop field '%.*s' forwarded", (int)name.len, name.p);
        if (!is(name, "connection") && !is(name, "host"))
            CHECK(!connection_names(req.headers, req.n_headers, name),
                  "field '%.*s' named by Connection forwarded", (int)name.len, name.p);
    }
}

static void fuzz_request(const uint8_t *data, size_t size, const struct http_limits *l, size_t cut)
{
    const char *buf = (const char *)data;
    enum http_result r = http_parse_request(buf, size, l, &req);

    CHECK(r != HTTP_R_NEED_MORE || size < l->max_head, "NEED_MORE at %zu bytes", size);
    if (r == HTTP_R_BAD || r == HTTP_R_TOO_BIG)
        CHECK(req.error && strlen(req.error) > 0 && strlen(req.error) < 80, "error text");
    if (r == HTTP_R_NEED_MORE || r == HTTP_R_OK)
        CHECK(req.error == NULL, "error text with %d", r);
    check_request_prefix(data, cut % (size + 1), l, r);
    if (r != HTTP_R_OK)
        return;
    check_request(buf, size, l);
    check_request_prefix(data, req.head_len, l, r); /* the head alone */
    check_request_prefix(data, req.head_len - 1, l, r);
    check_request_prefix(data, req.head_len / 2, l, r);

    struct http_request saved = req;
    check_format_request(cut & 1);
    bool had_framing = req.body != HTTP_BODY_NONE ||
                       http_find(req.headers, req.n_headers, "content-length") != NULL;
    check_derived(data, l, "Content-Length: 0\r\n", had_framing);
    check_derived(data, l, "Host: a\r\n", req.has_host_header);
    check_cap(data, l);
    req = saved;
}

/* ---- property 6: responses ---- */

static const char *const methods[] = {"GET", "HEAD", "POST", "CONNECT", NULL};

static void check_response(const char *buf, size_t size, const struct http_limits *l,
                           const char *method)
{
    bool no_body = (method && !strcmp(method, "HEAD")) || resp.status < 200 || resp.status == 204 ||
                   resp.status == 304;

    check_head(buf, size, resp.head_len, l, resp.n_headers);
    check_fields(resp.headers, resp.n_headers, buf, resp.head_len);
    CHECK(resp.status >= 100 && resp.status <= 599 && resp.minor <= 1, "status line");
    CHECK(!no_body || resp.body == HTTP_BODY_NONE, "a body after %u to %s", resp.status,
          method ? method : "-");
    CHECK(resp.keep_alive == (persistent(resp.headers, resp.n_headers, resp.minor) &&
                              resp.body != HTTP_BODY_TO_CLOSE),
          "keep_alive");
    if (resp.body == HTTP_BODY_CHUNKED)
        CHECK(count(resp.headers, resp.n_headers, "transfer-encoding") >= 1, "chunked");
    if (resp.body == HTTP_BODY_LENGTH)
        CHECK(resp.content_length > 0 && count(resp.headers, resp.n_headers, "content-length") == 1,
              "length");
}

static void check_format_response(const char *buf, const char *method, bool keep_alive)
{
    size_t n = http_format_response(&resp, buf, keep_alive ? HTTP_CONN_KEEP_ALIVE : HTTP_CONN_CLOSE,
                                    out, sizeof(out));

    CHECK(n > 0, "format_response gave nothing");
    CHECK(http_parse_response(out, n, &lim_reparse, method, &ragain) == HTTP_R_OK,
          "format_response output refused: %s\n%.*s", ragain.error, (int)n, out);
    CHECK(ragain.status == resp.status && ragain.body == resp.body &&
              ragain.content_length == resp.content_length && ragain.head_len == n,
          "status or framing changed");
    CHECK(ragain.keep_alive == (keep_alive && ragain.body != HTTP_BODY_TO_CLOSE), "Connection");
    for (size_t i = 0; i < ragain.n_headers; i++) {
        struct http_view name = ragain.headers[i].name;
        CHECK(!(name.len >= 6 && strncasecmp(name.p, "proxy-", 6) == 0) &&
                  !is(name, "keep-alive") && !is(name, "trailer"),
              "hop-by-hop '%.*s' forwarded", (int)name.len, name.p);
    }
}

static void fuzz_response(const uint8_t *data, size_t size, const struct http_limits *l, size_t cut)
{
    const char *method = methods[cut % 5];
    enum http_result r = http_parse_response((const char *)data, size, l, method, &resp);

    CHECK(r != HTTP_R_NEED_MORE || size < l->max_head, "response NEED_MORE at %zu", size);
    CHECK((r == HTTP_R_BAD || r == HTTP_R_TOO_BIG) == (resp.error != NULL), "error text");
    cut %= size + 1;
    char *p = copy(data, cut);
    enum http_result rp = http_parse_response(p, cut, l, method, &rpart);
    free(p);
    CHECK(rp == HTTP_R_NEED_MORE || (rp == r && rpart.error == resp.error),
          "response prefix of %zu: %d, whole %d", cut, rp, r);
    if (r != HTTP_R_OK)
        return;
    CHECK(rp == HTTP_R_NEED_MORE ? cut < resp.head_len : rpart.head_len == resp.head_len,
          "response prefix head_len");
    check_response((const char *)data, size, l, method);
    check_format_response((const char *)data, method, cut & 1);
}

/* ---- property 7: chunked ---- */

struct fed {
    enum http_chunked_result r;
    size_t end;
};

static struct fed feed(const uint8_t *data, size_t size, size_t cut1, size_t cut2, bool bytewise)
{
    struct http_chunked c;
    size_t off = 0, used;

    http_chunked_init(&c);
    while (off < size) {
        size_t n = bytewise ? 1 : off < cut1 ? cut1 - off : off < cut2 ? cut2 - off : size - off;
        char *p = copy(data + off, n);
        enum http_chunked_result r = http_chunked_feed(&c, p, n, &used);
        free(p);
        if (r != HTTP_CHUNKED_MORE) {
            CHECK(used <= n, "used %zu of %zu", used, n);
            return (struct fed){r, off + used};
        }
        CHECK(used == n, "MORE used %zu of %zu", used, n);
        off += n;
    }
    return (struct fed){HTTP_CHUNKED_MORE, size};
}

static void fuzz_chunked(const uint8_t *data, size_t size, size_t cut)
{
    struct fed whole = feed(data, size, size, size, false);
    size_t c1 = cut % (size + 1), c2 = (cut / 7) % (size + 1);
    struct fed split = feed(data, size, c1 < c2 ? c1 : c2, c1 < c2 ? c2 : c1, false);

    CHECK(split.r == whole.r && split.end == whole.end, "cut at %zu,%zu: %d@%zu, whole %d@%zu", c1,
          c2, split.r, split.end, whole.r, whole.end);
    if (size <= 4096) {
        struct fed bytes = feed(data, size, 0, 0, true);
        CHECK(bytes.r == whole.r && bytes.end == whole.end, "bytewise: %d@%zu, whole %d@%zu",
              bytes.r, bytes.end, whole.r, whole.end);
    }
    if (whole.r == HTTP_CHUNKED_DONE) { /* the end is known from the bytes before it */
        struct fed again_ = feed(data, whole.end, whole.end, whole.end, false);
        CHECK(again_.r == HTTP_CHUNKED_DONE && again_.end == whole.end, "DONE not at its end");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cut = size ? data[0] * 257u + data[size - 1] * 31u + size : 0;

    fuzz_request(data, size, &lim_small, cut);
    fuzz_request(data, size, &lim_large, cut);
    if (req.head_len > 0 && req.body == HTTP_BODY_CHUNKED) /* the body after the head */
        fuzz_chunked(data + req.head_len, size - req.head_len, cut);
    fuzz_response(data, size, &lim_large, cut);
    fuzz_response(data, size, &lim_small, cut / 5);
    fuzz_chunked(data, size, cut);
    return 0;
}
