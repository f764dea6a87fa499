/*
 * test_http.c - the strict HTTP/1.1 head parser and body framing: every
 * rule of http.h, every request smuggling shape we know of, the caps, and
 * that cutting the input anywhere never changes a verdict.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "tap.h"
#include "testdata.h"

/* A byte string literal that may hold NUL: its bytes and its length. */
#define S(lit) lit, sizeof(lit) - 1

static const struct http_limits lim = {8192, 16384, 100};

static bool view_eq(struct http_view v, const char *s)
{
    return v.len == strlen(s) && memcmp(v.p, s, v.len) == 0;
}

static const char *str(const char *s)
{
    return s ? s : "(none)";
}

/* ---- requests: verdicts ---- */

struct req_case {
    const char *what;
    const char *in;
    size_t len;
    enum http_result want;
    const char *error; /* exact text for BAD / TOO_BIG */
};

#define HEAD_OK(what, lit)                                                                         \
    {                                                                                              \
        what, S(lit), HTTP_R_OK, NULL                                                              \
    }
#define HEAD_BAD(what, lit, error)                                                                 \
    {                                                                                              \
        what, S(lit), HTTP_R_BAD, error                                                            \
    }

static const struct req_case req_cases[] = {
    HEAD_OK("absolute-form GET",
            "GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"),
    HEAD_OK("origin-form GET (transparent)", "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"),
    HEAD_OK("CONNECT host:port",
            "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"),
    HEAD_OK("CONNECT [v6]:port", "CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n"),
    HEAD_OK("CONNECT port 65535", "CONNECT h:65535 HTTP/1.1\r\n\r\n"),
    HEAD_OK("CONNECT with Content-Length: 0", "CONNECT h:1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
    HEAD_OK("OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
    HEAD_OK("scheme HTTP in capitals", "GET HTTP://Example.com HTTP/1.0\r\n\r\n"),
    HEAD_OK("TE chunked, any case, spaces",
            "POST / HTTP/1.1\r\nTransfer-Encoding:  Chunked \r\n\r\n"),
    HEAD_OK("empty line before the request", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
    HEAD_OK("obs-text in a value", "GET / HTTP/1.1\r\nX: caf\xc3\xa9\r\n\r\n"),
    HEAD_OK("empty field value", "GET / HTTP/1.1\r\nX-Empty:\r\n\r\n"),
    HEAD_OK("HT in a value", "GET / HTTP/1.1\r\nX: a\tb\r\n\r\n"),
    HEAD_OK("18-digit Content-Length",
            "POST / HTTP/1.1\r\nContent-Length: 999999999999999999\r\n\r\n"),
    HEAD_OK("percent-encoding", "GET /a%2Fb%20c HTTP/1.1\r\n\r\n"),
    HEAD_OK("Host with v6 and port", "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"),
    /* RFC 9112 section 6.3 / 11.2: the smuggling shapes */
    HEAD_BAD("two Content-Length",
             "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
             "two Content-Length fields"),
    HEAD_BAD("CL then TE",
             "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
             "Content-Length with Transfer-Encoding"),
    HEAD_BAD("TE then CL",
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
             "Content-Length with Transfer-Encoding"),
    HEAD_BAD("TE chunked, identity",
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
             "Transfer-Encoding other than chunked"),
    HEAD_BAD("TE identity", "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
             "Transfer-Encoding other than chunked"),
    HEAD_BAD("TE gzip, chunked in a request",
             "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
             "Transfer-Encoding other than chunked"),
    HEAD_BAD("TE xchunked", "POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
             "Transfer-Encoding other than chunked"),
    HEAD_BAD("two TE fields",
             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
             "two Transfer-Encoding fields"),
    HEAD_BAD("space before the colon", "POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n",
             "white space before a colon"),
    HEAD_BAD("tab before the colon", "POST / HTTP/1.1\r\nContent-Length\t: 1\r\n\r\n",
             "white space before a colon"),
    HEAD_BAD("obs-fold", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
             "obs-fold (a line starting with white space)"),
    HEAD_BAD("obs-fold by HT", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n",
             "obs-fold (a line starting with white space)"),
    HEAD_BAD("white space before the first field", "GET / HTTP/1.1\r\n Host: a\r\n\r\n",
             "obs-fold (a line starting with white space)"),
    HEAD_BAD("bare LF between fields", "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
             "bare LF in the head"),
    HEAD_BAD("bare LF after the request line", "GET / HTTP/1.1\n\r\n", "bare LF in the head"),
    HEAD_BAD("bare LF ends the head", "GET / HTTP/1.1\r\nHost: a\r\n\n", "bare LF in the head"),
    HEAD_BAD("bare CR in a value", "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", "bare CR in the head"),
    HEAD_BAD("bare CR in the request line", "GET /\r HTTP/1.1\r\n\r\n", "bare CR in the head"),
    HEAD_BAD("NUL in a value", "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n",
             "control byte in a field value"),
    HEAD_BAD("ESC in a value", "GET / HTTP/1.1\r\nX: a\x1b[0m\r\n\r\n",
             "control byte in a field value"),
    HEAD_BAD("DEL in a value", "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
             "control byte in a field value"),
    HEAD_BAD("Content-Length: +5", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("Content-Length: -1", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("Content-Length: 5, 5", "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("Content-Length: 0x10", "POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("Content-Length empty", "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("Content-Length 1 2", "POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("19-digit Content-Length",
             "POST / HTTP/1.1\r\nContent-Length: 1000000000000000000\r\n\r\n",
             "bad Content-Length"),
    HEAD_BAD("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
             "Transfer-Encoding in an HTTP/1.0 message"),
    HEAD_BAD("Connection names Content-Length",
             "POST / HTTP/1.1\r\nConnection: close, Content-Length\r\nContent-Length: 1\r\n\r\n",
             "Connection names a framing field"),
    HEAD_BAD("Connection names Transfer-Encoding",
             "POST / HTTP/1.1\r\nConnection: transfer-encoding\r\n\r\n",
             "Connection names a framing field"),
    HEAD_BAD("Connection option not a token", "GET / HTTP/1.1\r\nConnection: a b\r\n\r\n",
             "bad Connection field"),
    HEAD_BAD("CONNECT with a body", "CONNECT h:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
             "CONNECT with a body"),
    HEAD_BAD("CONNECT with chunked", "CONNECT h:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
             "CONNECT with a body"),
    HEAD_BAD("two Host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "two Host fields"),
    HEAD_BAD("two Host, equal", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", "two Host fields"),
    HEAD_BAD("Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", "bad Host field"),
    HEAD_BAD("Host port too big", "GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", "bad Host field"),
    HEAD_BAD("Host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", "bad Host field"),
    HEAD_BAD("Host with a space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "bad Host field"),
    HEAD_BAD("two Proxy-Authorization",
             "GET / HTTP/1.1\r\nProxy-Authorization: a\r\nProxy-Authorization: b\r\n\r\n",
             "two Proxy-Authorization fields"),
    HEAD_BAD("field name not a token", "GET / HTTP/1.1\r\nX(: a\r\n\r\n", "bad field name"),
    HEAD_BAD("empty field name", "GET / HTTP/1.1\r\n: a\r\n\r\n", "empty field name"),
    HEAD_BAD("field line without colon", "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
             "field line without a colon"),
    /* The request line (RFC 9112 section 3) */
    HEAD_BAD("absolute URI with userinfo", "GET http://user@h/ HTTP/1.1\r\n\r\n",
             "userinfo in the authority"),
    HEAD_BAD("absolute URI with user:pass", "GET http://u:p@h/ HTTP/1.1\r\n\r\n",
             "userinfo in the authority"),
    HEAD_BAD("CONNECT with userinfo", "CONNECT u@h:443 HTTP/1.1\r\n\r\n",
             "userinfo in the authority"),
    HEAD_BAD("fragment", "GET /a#frag HTTP/1.1\r\n\r\n", "fragment in the request target"),
    HEAD_BAD("fragment in absolute-form", "GET http://h/#f HTTP/1.1\r\n\r\n",
             "fragment in the request target"),
    HEAD_BAD("https absolute-form", "GET https://h/ HTTP/1.1\r\n\r\n", "scheme other than http"),
    HEAD_BAD("ftp absolute-form", "GET ftp://h/ HTTP/1.1\r\n\r\n", "scheme other than http"),
    HEAD_BAD("authority-form GET", "GET example.com:80 HTTP/1.1\r\n\r\n",
             "request target is not origin- or absolute-form"),
    HEAD_BAD("query without a path", "GET http://h?x HTTP/1.1\r\n\r\n", "query without a path"),
    HEAD_BAD("absolute-form, empty host", "GET http:///a HTTP/1.1\r\n\r\n", "empty host"),
    HEAD_BAD("percent in a host", "GET http://exa%6dple.com/ HTTP/1.1\r\n\r\n",
             "bad character in the host"),
    HEAD_BAD("CONNECT without port", "CONNECT h HTTP/1.1\r\n\r\n", "no port in the authority"),
    HEAD_BAD("CONNECT port 0", "CONNECT h:0 HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT port 65536", "CONNECT h:65536 HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT port of 6 digits", "CONNECT h:000443 HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT empty port", "CONNECT h: HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT signed port", "CONNECT h:+443 HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT origin-form", "CONNECT /x HTTP/1.1\r\n\r\n", "bad character in the host"),
    HEAD_BAD("CONNECT absolute-form", "CONNECT http://h:443/ HTTP/1.1\r\n\r\n", "bad port"),
    HEAD_BAD("CONNECT [v6 unclosed", "CONNECT [::1:443 HTTP/1.1\r\n\r\n", "bad IPv6 address"),
    HEAD_BAD("CONNECT bad v6", "CONNECT [zz::1]:443 HTTP/1.1\r\n\r\n", "bad IPv6 address"),
    HEAD_BAD("CONNECT v6 zone id", "CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n",
             "bad IPv6 address"),
    HEAD_BAD("CONNECT [v6]port", "CONNECT [::1]443 HTTP/1.1\r\n\r\n", "bad character in the host"),
    HEAD_BAD("* without OPTIONS", "GET * HTTP/1.1\r\n\r\n", "'*' target without OPTIONS"),
    HEAD_BAD("HTTP/2", "GET / HTTP/2\r\n\r\n", "bad HTTP version"),
    HEAD_BAD("HTTP/1.2", "GET / HTTP/1.2\r\n\r\n", "bad HTTP version"),
    HEAD_BAD("HTTP/2.0", "GET / HTTP/2.0\r\n\r\n", "bad HTTP version"),
    HEAD_BAD("http/1.1", "GET / http/1.1\r\n\r\n", "bad HTTP version"),
    HEAD_BAD("HTTP/0.9 line", "GET /\r\n\r\n", "bad request line"),
    HEAD_BAD("SP after the version", "GET / HTTP/1.1 \r\n\r\n", "bad HTTP version"),
    HEAD_BAD("two SP before the target", "GET  / HTTP/1.1\r\n\r\n", "bad request line"),
    HEAD_BAD("two SP before the version", "GET /  HTTP/1.1\r\n\r\n", "bad HTTP version"),
    HEAD_BAD("HT between the parts", "GET\t/ HTTP/1.1\r\n\r\n", "bad method"),
    HEAD_BAD("method not a token", "G(T / HTTP/1.1\r\n\r\n", "bad method"),
    HEAD_BAD("SP before the method", " GET / HTTP/1.1\r\n\r\n", "bad method"),
    HEAD_BAD("raw UTF-8 in the target", "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n",
             "bad byte in the request target"),
    HEAD_BAD("bad percent-encoding", "GET /%zz HTTP/1.1\r\n\r\n",
             "bad percent-encoding in the request target"),
    HEAD_BAD("cut percent-encoding", "GET /%4 HTTP/1.1\r\n\r\n",
             "bad percent-encoding in the request target"),
};

/* Every prefix of `in` gives NEED_MORE or exactly the whole's verdict, and
 * never NEED_MORE once the bytes reach max_head. */
static bool prefixes_agree(const char *in, size_t len, const struct http_limits *l,
                           enum http_result whole, const char *error, size_t head_len)
{
    static struct http_request req;

    for (size_t k = 0; k < len; k++) {
        char *p = td_copy(in, k);
        enum http_result r = http_parse_request(p, k, l, &req);
        bool agree = r == HTTP_R_NEED_MORE ? k < l->max_head
                                           : r == whole && req.error == error &&
                                                 (r != HTTP_R_OK || req.head_len == head_len);
        free(p);
        if (!agree || (whole == HTTP_R_OK && k < head_len && r != HTTP_R_NEED_MORE)) {
            diag("prefix of %zu bytes: result %d error %s", k, r, str(req.error));
            return false;
        }
    }
    return true;
}

static void test_request_cases(void)
{
    static struct http_request req;

    for (size_t i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
        const struct req_case *c = &req_cases[i];
        char *p = td_copy(c->in, c->len);
        enum http_result r = http_parse_request(p, c->len, &lim, &req);
        bool same = r == c->want &&
                    (c->error ? req.error && !strcmp(req.error, c->error) : req.error == NULL);

        if (!ok(same, "request %s: %s", c->want == HTTP_R_OK ? "ok" : "refused", c->what))
            diag("result %d, error %s; expected %d, %s", r, str(req.error), c->want, str(c->error));
        ok(prefixes_agree(p, c->len, &lim, r, req.error, req.head_len),
           "request %s: every prefix needs more or agrees", c->what);
        free(p);
    }
}

/* ---- requests: what is extracted ---- */

static enum http_result parse(const char *s, struct http_request *req)
{
    static char buf[4096];
    size_t n = strlen(s);

    memcpy(buf, s, n);
    return http_parse_request(buf, n, &lim, req);
}

static void test_request_fields(void)
{
    static struct http_request req;
    const char *in = "POST http://Example.com:8080/up?x=1 HTTP/1.1\r\n"
                     "Host: example.com:8080\r\n"
                     "Proxy-Authorization:  Basic dTpw \r\n"
                     "Content-Length: 5\r\n"
                     "Expect: 100-Continue\r\n"
                     "\r\n"
                     "hello";

    ok(parse(in, &req) == HTTP_R_OK, "rich absolute-form request parses");
    ok(view_eq(req.method, "POST") && req.minor == 1 && req.form == HTTP_FORM_ABSOLUTE,
       "method, version and form");
    ok(view_eq(req.scheme, "http") && view_eq(req.host, "Example.com") && req.port == 8080,
       "scheme, host and port from the target");
    ok(view_eq(req.path, "/up?x=1"), "path with its query");
    ok(req.has_host_header && view_eq(req.host_header, "example.com:8080"), "Host field value");
    ok(view_eq(req.proxy_authorization, "Basic dTpw"), "Proxy-Authorization trimmed of OWS");
    ok(req.body == HTTP_BODY_LENGTH && req.content_length == 5, "Content-Length framing");
    ok(req.expect_continue && req.keep_alive && !req.upgrade, "Expect, keep-alive, no Upgrade");
    ok(req.n_headers == 4 && req.head_len == strlen(in) - 5, "4 fields; head ends before the body");

    ok(parse("GET HTTP://h HTTP/1.0\r\n\r\n", &req) == HTTP_R_OK && view_eq(req.path, "/") &&
           req.port == 0 && view_eq(req.scheme, "HTTP"),
       "absolute-form without a path gives '/', no port");
    ok(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &req) == HTTP_R_OK &&
           req.form == HTTP_FORM_AUTHORITY && view_eq(req.host, "[::1]") && req.port == 8443 &&
           !req.has_host_header,
       "CONNECT [::1]:8443: host keeps its brackets");
    ok(parse("GET /p?q HTTP/1.1\r\nHost: a\r\n\r\n", &req) == HTTP_R_OK &&
           req.form == HTTP_FORM_ORIGIN && view_eq(req.path, "/p?q") && req.host.len == 0,
       "origin-form: path is the target");
    ok(parse("OPTIONS * HTTP/1.1\r\n\r\n", &req) == HTTP_R_OK && req.form == HTTP_FORM_ASTERISK,
       "OPTIONS *: asterisk-form");
    ok(parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &req) == HTTP_R_OK &&
           req.body == HTTP_BODY_CHUNKED,
       "TE chunked framing");
    ok(parse("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &req) == HTTP_R_OK &&
           req.body == HTTP_BODY_NONE && req.content_length == 0,
       "Content-Length: 0 is no body");
    ok(parse("GET / HTTP/1.1\r\n\r\n", &req) == HTTP_R_OK && req.body == HTTP_BODY_NONE,
       "no framing field: no body");
    ok(parse("GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", &req) ==
               HTTP_R_OK &&
           req.upgrade && req.keep_alive,
       "Upgrade seen");

    const char *pipelined = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\n";
    ok(parse(pipelined, &req) == HTTP_R_OK && req.head_len == strlen(pipelined) - 17,
       "pipelined bytes after the head are not part of it");
    ok(parse("\r\n\r\nGET / HTTP/1.1\r\n\r\n", &req) == HTTP_R_OK && req.head_len == 22 &&
           view_eq(req.method, "GET"),
       "empty lines before the request line count in head_len");
}

static void test_keep_alive(void)
{
    static struct http_request req;

    ok(parse("GET / HTTP/1.1\r\n\r\n", &req) == HTTP_R_OK && req.keep_alive,
       "1.1: persistent by default");
    ok(parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &req) == HTTP_R_OK && !req.keep_alive,
       "1.1 with close");
    ok(parse("GET / HTTP/1.1\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", &req) == HTTP_R_OK &&
           !req.keep_alive,
       "close wins over keep-alive");
    ok(parse("GET / HTTP/1.1\r\nConnection: x\r\nConnection: close\r\n\r\n", &req) == HTTP_R_OK &&
           !req.keep_alive,
       "close in a second Connection field");
    ok(parse("GET / HTTP/1.0\r\n\r\n", &req) == HTTP_R_OK && !req.keep_alive,
       "1.0: not persistent by default");
    ok(parse("GET / HTTP/1.0\r\nConnection: ,keep-alive,\r\n\r\n", &req) == HTTP_R_OK &&
           req.keep_alive,
       "1.0 with keep-alive (empty list elements ignored)");
    ok(parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", &req) == HTTP_R_OK &&
           !req.expect_continue,
       "Expect ignored in 1.0 (RFC 9110 10.1.1)");
    ok(parse("POST / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", &req) == HTTP_R_OK &&
           req.expect_continue,
       "Expect: 100-continue in 1.1");
}

/* ---- caps ---- */

static void test_caps(void)
{
    static struct http_request req;
    struct http_limits small = {64, 256, 4};
    char buf[1200];
    enum http_result r;

    /* request line: 64 bytes fit, 65 do not, and it shows before the CR */
    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "GET /", 5);
    memcpy(buf + 55, " HTTP/1.1\r\n\r\n", 13);
    ok(http_parse_request(buf, 68, &small, &req) == HTTP_R_OK, "request line of 64 bytes");
    buf[55] = 'a';
    memcpy(buf + 56, " HTTP/1.1\r\n\r\n", 13);
    r = http_parse_request(buf, 69, &small, &req);
    ok(r == HTTP_R_TOO_BIG && !strcmp(str(req.error), "request line too long") &&
           req.method.len == 0,
       "request line of 65 bytes: TOO_BIG, no method");
    ok(http_parse_request(buf, 64, &small, &req) == HTTP_R_NEED_MORE,
       "64 bytes of an unfinished line: NEED_MORE");
    r = http_parse_request(buf, 65, &small, &req);
    ok(r == HTTP_R_TOO_BIG, "65 bytes of an unfinished line: TOO_BIG before its end");

    /* header count */
    const char *four = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n";
    const char *five = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n";
    ok(http_parse_request(four, strlen(four), &small, &req) == HTTP_R_OK && req.n_headers == 4,
       "4 fields with max_headers 4");
    r = http_parse_request(five, strlen(five), &small, &req);
    ok(r == HTTP_R_TOO_BIG && !strcmp(str(req.error), "too many header fields"),
       "5 fields with max_headers 4: TOO_BIG");

    /* head bytes: exactly max_head is fine, one more is not */
    size_t n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nX: ");
    memset(buf + n, 'v', 256 - n - 4);
    memcpy(buf + 252, "\r\n\r\n", 4);
    ok(http_parse_request(buf, 256, &small, &req) == HTTP_R_OK && req.head_len == 256,
       "head of exactly max_head bytes");
    memset(buf + 20, 'v', 300);
    memcpy(buf + 253, "\r\n\r\n", 4);
    r = http_parse_request(buf, 257, &small, &req);
    ok(r == HTTP_R_TOO_BIG && !strcmp(str(req.error), "header section too large"),
       "head of max_head + 1 bytes: TOO_BIG");
    bool never = true;
    for (size_t k = 0; k <= 257; k++) {
        r = http_parse_request(buf, k, &small, &req);
        if (r == HTTP_R_NEED_MORE && k >= small.max_head)
            never = false;
        if (r != HTTP_R_NEED_MORE && r != HTTP_R_TOO_BIG)
            never = false;
    }
    ok(never, "no NEED_MORE once the buffer holds max_head bytes");
    r = http_parse_request(buf, 255, &small, &req);
    ok(r == HTTP_R_TOO_BIG, "255 bytes of a head not yet ended: TOO_BIG (it needs a CRLF more)");

    /* max_headers above the array is held to HTTP_MAX_HEADERS_CAP */
    struct http_limits wide = {8192, 65536, 1000};
    static char many[8192];
    size_t m = (size_t)sprintf(many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i <= HTTP_MAX_HEADERS_CAP; i++)
        m += (size_t)sprintf(many + m, "x%d: 1\r\n", i);
    m += (size_t)sprintf(many + m, "\r\n");
    r = http_parse_request(many, m, &wide, &req);
    ok(r == HTTP_R_TOO_BIG && req.n_headers == HTTP_MAX_HEADERS_CAP,
       "257 fields with max_headers 1000: TOO_BIG at the array's cap");
}

/* ---- responses ---- */

struct resp_case {
    const char *what, *in, *method;
    enum http_result want;
    enum http_body body;
    bool keep_alive;
    const char *error;
};

static const struct resp_case resp_cases[] = {
    {"200 with length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", "GET", HTTP_R_OK,
     HTTP_BODY_LENGTH, true, NULL},
    {"HEAD: no body", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n", "HEAD", HTTP_R_OK,
     HTTP_BODY_NONE, true, NULL},
    {"204: no body", "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", "GET", HTTP_R_OK,
     HTTP_BODY_NONE, true, NULL},
    {"304: no body", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n", "GET",
     HTTP_R_OK, HTTP_BODY_NONE, true, NULL},
    {"100: no body", "HTTP/1.1 100 Continue\r\n\r\n", "POST", HTTP_R_OK, HTTP_BODY_NONE, true,
     NULL},
    {"2xx to CONNECT: tunnel", "HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT", HTTP_R_OK,
     HTTP_BODY_NONE, true, NULL},
    {"no framing: to the close", "HTTP/1.1 200 OK\r\n\r\n", "GET", HTTP_R_OK, HTTP_BODY_TO_CLOSE,
     false, NULL},
    {"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", HTTP_R_OK,
     HTTP_BODY_CHUNKED, true, NULL},
    {"gzip, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "GET",
     HTTP_R_OK, HTTP_BODY_CHUNKED, true, NULL},
    {"gzip then chunked in two fields",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", "GET",
     HTTP_R_OK, HTTP_BODY_CHUNKED, true, NULL},
    {"gzip only: to the close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET",
     HTTP_R_OK, HTTP_BODY_TO_CLOSE, false, NULL},
    {"no reason phrase, no SP", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "GET", HTTP_R_OK,
     HTTP_BODY_NONE, true, NULL},
    {"empty reason phrase", "HTTP/1.1 404 \r\nContent-Length: 1\r\n\r\n", NULL, HTTP_R_OK,
     HTTP_BODY_LENGTH, true, NULL},
    {"1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
     "GET", HTTP_R_OK, HTTP_BODY_LENGTH, true, NULL},
    {"1.0 default close", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", "GET", HTTP_R_OK,
     HTTP_BODY_LENGTH, false, NULL},
    {"chunked, gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "GET",
     HTTP_R_BAD, 0, false, "chunked is not the last transfer coding"},
    {"chunked twice",
     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", "GET",
     HTTP_R_BAD, 0, false, "chunked is not the last transfer coding"},
    {"chunked with a parameter", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;x=1\r\n\r\n", "GET",
     HTTP_R_BAD, 0, false, "bad Transfer-Encoding"},
    {"TE and CL", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
     "GET", HTTP_R_BAD, 0, false, "Content-Length with Transfer-Encoding"},
    {"two CL", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", "GET",
     HTTP_R_BAD, 0, false, "two Content-Length fields"},
    {"TE in 1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", "GET", HTTP_R_BAD, 0,
     false, "Transfer-Encoding in an HTTP/1.0 message"},
    {"status 099", "HTTP/1.1 099 X\r\n\r\n", "GET", HTTP_R_BAD, 0, false, "bad status code"},
    {"status 600", "HTTP/1.1 600 X\r\n\r\n", "GET", HTTP_R_BAD, 0, false, "bad status code"},
    {"status of 2 digits", "HTTP/1.1 20 X\r\n\r\n", "GET", HTTP_R_BAD, 0, false, "bad status code"},
    {"status glued to the reason", "HTTP/1.1 200OK\r\n\r\n", "GET", HTTP_R_BAD, 0, false,
     "bad status code"},
    {"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n", "GET", HTTP_R_BAD, 0, false,
     "bad HTTP version"},
    {"control byte in the reason", "HTTP/1.1 200 O\x01K\r\n\r\n", "GET", HTTP_R_BAD, 0, false,
     "control byte in the reason phrase"},
    {"response obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "GET", HTTP_R_BAD, 0, false,
     "obs-fold (a line starting with white space)"},
    {"response bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", "GET", HTTP_R_BAD, 0, false,
     "bare LF in the head"},
};

static void test_response_cases(void)
{
    static struct http_response resp;

    for (size_t i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
        const struct resp_case *c = &resp_cases[i];
        size_t n = strlen(c->in);
        char *p = td_copy(c->in, n);
        enum http_result r = http_parse_response(p, n, &lim, c->method, &resp);
        bool same = r == c->want &&
                    (c->error ? resp.error && !strcmp(resp.error, c->error) : resp.error == NULL);

        if (same && r == HTTP_R_OK)
            same = resp.body == c->body && resp.keep_alive == c->keep_alive;
        if (!ok(same, "response %s: %s", r == HTTP_R_OK ? "ok" : "refused", c->what))
            diag("result %d error %s body %d keep-alive %d", r, str(resp.error), resp.body,
                 resp.keep_alive);
        free(p);
    }
    const char *in = "HTTP/1.1 201 Created\r\nContent-Length: 12\r\nX: y\r\n\r\nbody";
    ok(http_parse_response(in, strlen(in), &lim, "POST", &resp) == HTTP_R_OK &&
           resp.status == 201 && resp.minor == 1 && resp.content_length == 12 &&
           resp.n_headers == 2 && resp.head_len == strlen(in) - 4,
       "response status, version, length, fields, head_len");
    struct http_limits small = {16, 1024, 8};
    ok(http_parse_response(in, strlen(in), &small, "GET", &resp) == HTTP_R_TOO_BIG &&
           !strcmp(str(resp.error), "status line too long"),
       "status line over max_line: TOO_BIG");
}

/* ---- writing heads ---- */

static void test_format_request(void)
{
    static struct http_request req, again;
    static char in[1024], out[1024];
    const char *head = "GET http://example.com/a?b HTTP/1.0\r\n"
                       "Host: evil.example\r\n"
                       "User-Agent: t\r\n"
                       "Proxy-Authorization: Basic eHg=\r\n"
                       "Connection: keep-alive, X-Secret\r\n"
                       "x-secret: s\r\n"
                       "Keep-Alive: 300\r\n"
                       "Proxy-Connection: keep-alive\r\n"
                       "TE: trailers\r\n"
                       "Trailer: X-Sum\r\n"
                       "Upgrade: h2c\r\n"
                       "Proxy-Foo: 1\r\n"
                       "Accept:   */*  \r\n"
                       "Content-Length: 2\r\n"
                       "\r\nhi";
    const char *want = "GET /a?b HTTP/1.1\r\n"
                       "Host: example.com\r\n"
                       "User-Agent: t\r\n"
                       "Accept: */*\r\n"
                       "Content-Length: 2\r\n"
                       "Connection: close\r\n"
                       "\r\n";
    size_t n = strlen(head), w = strlen(want), got;

    memcpy(in, head, n);
    ok(http_parse_request(in, n, &lim, &req) == HTTP_R_OK, "request to format parses");
    got = http_format_request(&req, "example.com", HTTP_CONN_CLOSE, out, sizeof(out));
    if (!ok(got == w && memcmp(out, want, w) == 0,
            "format_request: origin-form, Host first, hop-by-hop and Proxy-* gone"))
        diag("got %zu bytes: %.*s", got, (int)got, out);
    ok(http_parse_request(out, got, &lim, &again) == HTTP_R_OK && again.form == HTTP_FORM_ORIGIN &&
           view_eq(again.path, "/a?b") && again.proxy_authorization.len == 0 && !again.keep_alive &&
           again.body == HTTP_BODY_LENGTH && again.content_length == 2,
       "its output parses back: origin-form, same path and framing, no credentials");
    ok(!http_find(again.headers, again.n_headers, "x-secret") &&
           !http_find(again.headers, again.n_headers, "proxy-authorization"),
       "a field named by Connection and Proxy-Authorization are not forwarded");
    ok(http_format_request(&req, "example.com", HTTP_CONN_CLOSE, out, w) == w,
       "format_request fits in exactly its length");
    ok(http_format_request(&req, "example.com", HTTP_CONN_CLOSE, out, w - 1) == 0,
       "format_request: one byte short gives 0");
    ok(http_format_request(&req, "example.com\r\nX: y", HTTP_CONN_CLOSE, out, sizeof(out)) == 0,
       "format_request: an authority with CRLF gives 0");

    const char *t = "POST /up HTTP/1.1\r\nHost: h:81\r\nTransfer-Encoding: chunked\r\n\r\n";
    n = strlen(t);
    memcpy(in, t, n);
    ok(http_parse_request(in, n, &lim, &req) == HTTP_R_OK, "transparent request parses");
    got = http_format_request(&req, "h:81", HTTP_CONN_KEEP_ALIVE, out, sizeof(out));
    want = "POST /up HTTP/1.1\r\nHost: h:81\r\nTransfer-Encoding: chunked\r\n"
           "Connection: keep-alive\r\n\r\n";
    ok(got == strlen(want) && memcmp(out, want, got) == 0,
       "format_request keeps Transfer-Encoding, says keep-alive");
}

static void test_format_response(void)
{
    static struct http_response resp;
    static char out[1024];
    const char *in = "HTTP/1.0 404 Not Found\r\n"
                     "Connection: keep-alive, X-Hop\r\n"
                     "X-Hop: 1\r\n"
                     "Keep-Alive: timeout=5\r\n"
                     "Proxy-Authenticate: Basic\r\n"
                     "Content-Length: 3\r\n"
                     "Server: s\r\n"
                     "\r\nabc";
    const char *want = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nServer: s\r\n"
                       "Connection: keep-alive\r\n\r\n";
    size_t got;

    ok(http_parse_response(in, strlen(in), &lim, "GET", &resp) == HTTP_R_OK,
       "response to format parses");
    got = http_format_response(&resp, in, HTTP_CONN_KEEP_ALIVE, out, sizeof(out));
    if (!ok(got == strlen(want) && memcmp(out, want, got) == 0,
            "format_response: HTTP/1.1, reason kept, hop-by-hop gone"))
        diag("got: %.*s", (int)got, out);
    ok(http_format_response(&resp, in, HTTP_CONN_KEEP_ALIVE, out, strlen(want) - 1) == 0,
       "format_response: one byte short gives 0");
    in = "HTTP/1.1 204\r\n\r\n";
    ok(http_parse_response(in, strlen(in), &lim, "GET", &resp) == HTTP_R_OK,
       "204 without reason parses");
    got = http_format_response(&resp, in, HTTP_CONN_CLOSE, out, sizeof(out));
    want = "HTTP/1.1 204 \r\nConnection: close\r\n\r\n";
    ok(got == strlen(want) && memcmp(out, want, got) == 0,
       "format_response: empty reason keeps the SP");
}

/* ---- chunked framing ---- */

struct chunk_case {
    const char *what, *in;
    size_t len;
    enum http_chunked_result want;
    size_t used; /* for DONE */
};

#define CH(what, lit, want, used)                                                                  \
    {                                                                                              \
        what, S(lit), want, used                                                                   \
    }

static const struct chunk_case chunk_cases[] = {
    CH("two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", HTTP_CHUNKED_DONE, 26),
    CH("extensions", "5;name=val;x\r\nhello\r\n0;last=\"y\"\r\n\r\n", HTTP_CHUNKED_DONE, 35),
    CH("BWS before ';'", "5 \t;a=b\r\nhello\r\n0\r\n\r\n", HTTP_CHUNKED_DONE, 21),
    CH("trailers", "1\r\na\r\n0\r\nX-Sum: 1\r\nY:\t2\r\n\r\n", HTTP_CHUNKED_DONE, 27),
    CH("pipelined bytes after the end", "0\r\n\r\nGET / HTTP/1.1\r\n", HTTP_CHUNKED_DONE, 5),
    CH("hex in both cases", "A\r\n0123456789\r\na\r\n0123456789\r\n00\r\n\r\n", HTTP_CHUNKED_DONE,
       36),
    CH("15 hex digits", "fffffffffffffff\r\nabc", HTTP_CHUNKED_MORE, 0),
    CH("not yet ended", "5\r\nhello\r\n0\r\n\r", HTTP_CHUNKED_MORE, 0),
    CH("16 hex digits", "1000000000000000\r\n", HTTP_CHUNKED_BAD, 0),
    CH("bare LF after the size", "5\nhello\r\n0\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("bare CR after the size", "5\rhello\r\n0\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("data longer than the size", "5\r\nhelloX\r\n0\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("bare LF after the data", "5\r\nhello\n0\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("not a hex digit", "g\r\n", HTTP_CHUNKED_BAD, 0),
    CH("empty size", "\r\n", HTTP_CHUNKED_BAD, 0),
    CH("signed size", "-1\r\n", HTTP_CHUNKED_BAD, 0),
    CH("0x prefix", "0x5\r\nhello\r\n", HTTP_CHUNKED_BAD, 0),
    CH("white space without an extension", "5 \r\nhello\r\n0\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("white space before the size", " 5\r\nhello\r\n", HTTP_CHUNKED_BAD, 0),
    CH("NUL in an extension", "5;a\0\r\nhello\r\n", HTTP_CHUNKED_BAD, 0),
    CH("bare LF ends the body", "0\r\n\n", HTTP_CHUNKED_BAD, 0),
    CH("bare CR ends the body", "0\r\n\rX", HTTP_CHUNKED_BAD, 0),
    CH("trailer obs-fold", "0\r\nX: 1\r\n y\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("trailer without a colon", "0\r\nbad\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("trailer with a bare CR", "0\r\nX: a\rb\r\n\r\n", HTTP_CHUNKED_BAD, 0),
    CH("trailer with a space before the colon", "0\r\nX : a\r\n\r\n", HTTP_CHUNKED_BAD, 0),
};

struct feed_result {
    enum http_chunked_result r;
    size_t end; /* offset in the whole input where DONE came */
};

/* Feed `in` in pieces cut at `cut` (and byte by byte when bytewise). */
static struct feed_result feed(const char *in, size_t len, size_t cut, bool bytewise)
{
    struct http_chunked c;
    size_t off = 0, used = 0;
    enum http_chunked_result r = HTTP_CHUNKED_MORE;

    http_chunked_init(&c);
    while (off < len) {
        size_t n = bytewise ? 1 : (off < cut ? cut - off : len - off);
        char *p = td_copy(in + off, n);
        r = http_chunked_feed(&c, p, n, &used);
        free(p);
        if (r != HTTP_CHUNKED_MORE)
            return (struct feed_result){r, off + used};
        if (used != n)
            return (struct feed_result){HTTP_CHUNKED_BAD, (size_t)-1}; /* MORE eats all */
        off += n;
    }
    return (struct feed_result){r, 0};
}

static void test_chunked(void)
{
    for (size_t i = 0; i < sizeof(chunk_cases) / sizeof(chunk_cases[0]); i++) {
        const struct chunk_case *c = &chunk_cases[i];
        struct feed_result whole = feed(c->in, c->len, c->len, false);
        bool same = whole.r == c->want && (c->want != HTTP_CHUNKED_DONE || whole.end == c->used);

        if (!ok(same, "chunked %s", c->what))
            diag("result %d end %zu", whole.r, whole.end);
        bool split = true;
        for (size_t cut = 0; cut <= c->len; cut++) {
            struct feed_result part = feed(c->in, c->len, cut, false);
            split = split && part.r == whole.r && part.end == whole.end;
        }
        struct feed_result bytes = feed(c->in, c->len, 0, true);
        ok(split && bytes.r == whole.r && bytes.end == whole.end,
           "chunked %s: same at every cut and byte by byte", c->what);
    }

    /* a size line of exactly the cap, then one byte over it */
    static char big[5000];
    const char *rest = "\r\nx\r\n0\r\n\r\n";
    memcpy(big, "1;", 2);
    memset(big + 2, 'e', 4096 - 2);
    memcpy(big + 4096, rest, 10);
    ok(feed(big, 4106, 4106, false).r == HTTP_CHUNKED_DONE, "size line of 4096 bytes");
    memset(big + 2, 'e', 4097 - 2);
    memcpy(big + 4097, rest, 10);
    ok(feed(big, 4107, 4107, false).r == HTTP_CHUNKED_BAD, "size line of 4097 bytes");
    memcpy(big, "0\r\nX:", 5);
    memset(big + 5, 'v', 4096 - 2);
    memcpy(big + 4099, "\r\n\r\n", 4);
    ok(feed(big, 4103, 4103, false).r == HTTP_CHUNKED_DONE, "trailer line of 4096 bytes");
    big[4099] = 'v';
    memcpy(big + 4100, "\r\n\r\n", 4);
    ok(feed(big, 4104, 4104, false).r == HTTP_CHUNKED_BAD, "trailer line of 4097 bytes");

    struct http_chunked c;
    size_t used = 99;
    http_chunked_init(&c);
    ok(http_chunked_feed(&c, "0\r\n\r\n", 5, &used) == HTTP_CHUNKED_DONE && used == 5 &&
           http_chunked_feed(&c, "more", 4, &used) == HTTP_CHUNKED_DONE && used == 0,
       "after DONE a feed is DONE with nothing used");
}

/* http_chunked_span over body, cut into pieces of at most `piece` bytes:
 * the data spans joined (into data), and whether the walk matches
 * http_chunked_feed's (the same end, the same offset). */
static bool spans_agree(const char *body, size_t piece, char *data, size_t *data_len)
{
    struct http_chunked a, b;
    size_t len = strlen(body), off = 0, used_b = 0, n = 0;
    enum http_chunked_result ra = HTTP_CHUNKED_MORE, rb = HTTP_CHUNKED_MORE;
    bool is_data;

    http_chunked_init(&a);
    http_chunked_init(&b);
    for (size_t at = 0; at < len && rb == HTTP_CHUNKED_MORE; at += used_b) {
        size_t k = len - at < piece ? len - at : piece;
        rb = http_chunked_feed(&b, body + at, k, &used_b);
    }
    while (off < len && ra == HTTP_CHUNKED_MORE) {
        size_t k = len - off < piece ? len - off : piece, used;
        ra = http_chunked_span(&a, body + off, k, &used, &is_data);
        if (is_data) {
            memcpy(data + n, body + off, used);
            n += used;
        }
        if (used == 0 && ra == HTTP_CHUNKED_MORE)
            return false; /* no progress */
        off += used;
    }
    *data_len = n;
    return ra == rb;
}

static void test_chunked_span(void)
{
    const char *body = "5;ext=sk-x\r\nhello\r\n1\r\n \r\nA\r\nworld, one\r\n0\r\nX-T: v\r\n\r\n";
    char data[128];
    size_t n = 0;
    bool all = true;

    for (size_t piece = 1; piece <= strlen(body) && all; piece++) {
        all = spans_agree(body, piece, data, &n) && n == 16 &&
              memcmp(data, "hello world, one", 16) == 0;
        if (!all)
            diag("pieces of %zu bytes: %zu data bytes", piece, n);
    }
    ok(all,
       "chunked spans: in pieces of every size, the data joined is the payload, the end as feed's");
    ok(!spans_agree("5\r\nhelloX", 64, data, &n) || n == 5,
       "chunked spans: broken framing after data");
}

static void test_find(void)
{
    static struct http_request req;

    ok(parse("GET / HTTP/1.1\r\nX-One: 1\r\nCONTENT-length: 7\r\n\r\n", &req) == HTTP_R_OK,
       "request for find parses");
    const struct http_header *h = http_find(req.headers, req.n_headers, "Content-Length");
    ok(h && view_eq(h->value, "7"), "http_find ignores case");
    ok(!http_find(req.headers, req.n_headers, "X-On"), "http_find: no prefix match");
    ok(!http_find(req.headers, 0, "X-One"), "http_find: empty array");
}

/* Which upgrade a request head asks for. */
static enum http_upgrade upgrade_of(const char *head)
{
    static struct http_request req;
    static char in[2048];
    size_t n = strlen(head);

    memcpy(in, head, n);
    if (http_parse_request(in, n, &lim, &req) != HTTP_R_OK)
        return (enum http_upgrade) - 1;
    return http_request_upgrade(&req);
}

static void test_upgrade(void)
{
    static struct http_request req;
    static struct http_response resp;
    static char in[2048], out[2048];
    const char *ws = "GET /v1/responses HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                     "Authorization: Bearer k\r\n\r\n";

    ok(upgrade_of("GET / HTTP/1.1\r\nHost: a\r\n\r\n") == HTTP_UPGRADE_NONE, "no Upgrade: none");
    ok(upgrade_of(ws) == HTTP_UPGRADE_WEBSOCKET, "a WebSocket opening handshake: websocket");
    ok(upgrade_of("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo, WebSocket\r\n"
                  "Connection: keep-alive, upgrade\r\n\r\n") == HTTP_UPGRADE_WEBSOCKET,
       "websocket in a list, any case; upgrade among Connection's options");
    ok(upgrade_of("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade, "
                  "HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n") ==
           HTTP_UPGRADE_OTHER,
       "h2c: other");
    ok(upgrade_of("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n") == HTTP_UPGRADE_OTHER,
       "websocket without Connection: upgrade: other");
    ok(upgrade_of("POST / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
                  "Content-Length: 2\r\n\r\n") == HTTP_UPGRADE_OTHER,
       "a POST (with a body) asking for websocket: other");
    ok(upgrade_of("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
                  "Content-Length: 0\r\n\r\n") == HTTP_UPGRADE_WEBSOCKET,
       "a GET asking for websocket with Content-Length: 0: websocket");
    ok(upgrade_of(
           "GET / HTTP/1.0\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n") ==
           HTTP_UPGRADE_OTHER,
       "HTTP/1.0 asking for websocket: other");
    ok(upgrade_of(
           "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocketx\r\nConnection: upgrade\r\n\r\n") ==
           HTTP_UPGRADE_OTHER,
       "a token that only starts with websocket: other");

    memcpy(in, ws, strlen(ws));
    http_parse_request(in, strlen(ws), &lim, &req);
    size_t n = http_format_request(&req, "a.test", HTTP_CONN_UPGRADE_WEBSOCKET, out, sizeof(out));
    const char *want =
        "GET /v1/responses HTTP/1.1\r\nHost: a.test\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        "Authorization: Bearer k\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    if (!ok(n == strlen(want) && memcmp(out, want, n) == 0,
            "format_request for an upgrade: Connection: Upgrade, Upgrade: websocket, no "
            "Sec-WebSocket-Extensions"))
        diag("got: %.*s", (int)n, out);
    static struct http_request again;
    ok(http_parse_request(out, n, &lim, &again) == HTTP_R_OK &&
           http_request_upgrade(&again) == HTTP_UPGRADE_WEBSOCKET,
       "... which parses back as a WebSocket upgrade");

    const char *r101 =
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
    ok(http_parse_response(r101, strlen(r101), &lim, "GET", &resp) == HTTP_R_OK &&
           resp.body == HTTP_BODY_NONE && http_response_upgrades_websocket(&resp),
       "a 101 to websocket upgrades, with no body");
    n = http_format_response(&resp, r101, HTTP_CONN_UPGRADE_WEBSOCKET, out, sizeof(out));
    const char *want101 = "HTTP/1.1 101 Switching Protocols\r\n"
                          "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                          "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    if (!ok(n == strlen(want101) && memcmp(out, want101, n) == 0,
            "format_response of the 101: the accept key kept, Connection and Upgrade ours"))
        diag("got: %.*s", (int)n, out);
    const char *r101h2 = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n"
                         "Connection: Upgrade\r\n\r\n";
    ok(http_parse_response(r101h2, strlen(r101h2), &lim, "GET", &resp) == HTTP_R_OK &&
           !http_response_upgrades_websocket(&resp),
       "a 101 to h2c does not");
    const char *r200 = "HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Content-Length: 0\r\n\r\n";
    ok(http_parse_response(r200, strlen(r200), &lim, "GET", &resp) == HTTP_R_OK &&
           !http_response_upgrades_websocket(&resp),
       "a 200 naming websocket does not");
}

int main(void)
{
    test_request_cases();
    test_request_fields();
    test_keep_alive();
    test_caps();
    test_response_cases();
    test_format_request();
    test_format_response();
    test_chunked();
    test_chunked_span();
    test_find();
    test_upgrade();
    return tap_done();
}
