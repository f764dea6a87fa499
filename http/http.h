/*
 * http.h - HTTP/1.1 message heads and body framing, strict (RFC 9110,
 * RFC 9112).  Pure: no I/O, no allocation; results are views into the
 * caller's buffer.  Every byte comes from a sandbox or an origin, so
 * anything ambiguous is an error, never guessed at (RFC 9112 section 11,
 * request smuggling):
 *   two Content-Length (even equal), Content-Length with Transfer-Encoding,
 *   a Transfer-Encoding other than exactly "chunked", obs-fold (a line
 *   starting with SP/HT), a bare LF or CR, NUL or other control bytes, white
 *   space between a field name and its colon, a field name that is not a
 *   token, a request line that is not METHOD SP TARGET SP HTTP/1.x.
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEADERS_CAP 256 /* the hard cap of the header array */

enum http_result {
    HTTP_R_OK,        /* a whole head was parsed; see head_len */
    HTTP_R_NEED_MORE, /* no error so far, but the head has not ended */
    HTTP_R_BAD,       /* malformed or ambiguous: answer 400 (see `error`) */
    HTTP_R_TOO_BIG,   /* a cap was hit: 414 for the line, 431 for headers */
};

struct http_limits {
    size_t max_line;    /* request/status line bytes (e.g. 8192) */
    size_t max_head;    /* whole head bytes incl. the final CRLF (max-header-bytes) */
    size_t max_headers; /* header fields (<= HTTP_MAX_HEADERS_CAP) */
};

struct http_view {
    const char *p;
    size_t len;
};

struct http_header {
    struct http_view name, value; /* value without leading/trailing SP/HT */
};

enum http_target_form {
    HTTP_FORM_ORIGIN,    /* "/path?query" */
    HTTP_FORM_ABSOLUTE,  /* "http://host[:port]/path?query" */
    HTTP_FORM_AUTHORITY, /* "host:port" (CONNECT only) */
    HTTP_FORM_ASTERISK,  /* "*" (OPTIONS only) */
};

/* Body framing of a message (RFC 9112 section 6.3). */
enum http_body {
    HTTP_BODY_NONE,     /* no body */
    HTTP_BODY_LENGTH,   /* content_length bytes */
    HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
    HTTP_BODY_TO_CLOSE, /* responses only: until the origin closes */
};

struct http_request {
    struct http_view method, target;
    unsigned minor; /* HTTP/1.<minor>: 0 or 1 */
    enum http_target_form form;
    /* From the target: absolute form gives scheme, host, port, path;
     * authority form gives host and port; origin form gives path. */
    struct http_view scheme;      /* "http" (lower-cased comparison) */
    struct http_view host;        /* without brackets' removal: "[::1]" stays */
    uint16_t port;                /* 0 when the target has none */
    struct http_view path;        /* origin-form path + query ("/" if empty) */
    struct http_view host_header; /* the Host field, if present (host[:port]) */
    bool has_host_header;
    struct http_view proxy_authorization; /* the field value, if any */
    enum http_body body;
    uint64_t content_length;
    bool keep_alive;      /* HTTP/1.1 without "close", or 1.0 with "keep-alive" */
    bool expect_continue; /* Expect: 100-continue */
    bool upgrade;         /* an Upgrade field is present */
    size_t n_headers;
    struct http_header headers[HTTP_MAX_HEADERS_CAP];
    size_t head_len;   /* bytes of the head, incl. the empty line */
    const char *error; /* for BAD / TOO_BIG: what was wrong, for the 400 body */
};

struct http_response {
    unsigned status;
    unsigned minor;
    enum http_body body;
    uint64_t content_length;
    bool keep_alive;
    size_t n_headers;
    struct http_header headers[HTTP_MAX_HEADERS_CAP];
    size_t head_len;
    const char *error;
};

/* Parse the request head at buf[0..len).  Needs the whole head in one
 * buffer; call again with more bytes after NEED_MORE.  A NEED_MORE with
 * len already at max_head (or a line already over max_line) is TOO_BIG. */
enum http_result http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
                                    struct http_request *req);

/* Parse a response head.  `request_method` (e.g. "HEAD") and it decide the
 * body framing: HEAD, 1xx, 204 and 304 have none; no length and no chunked
 * means HTTP_BODY_TO_CLOSE. */
enum http_result http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                                     const char *request_method, struct http_response *resp);

/* Write the head to send upstream for `req` into out[0..cap): the request
 * line in origin form, the fields minus the hop-by-hop ones (Connection, and
 * every field it names, Keep-Alive, TE, Trailer, Transfer-Encoding is kept
 * (framing), Upgrade, Proxy-*), a Host field equal to `authority` (the
 * normalized host, with ":port" when not the scheme's default), and
 * "Connection: keep-alive" or "close" as `keep_alive` says.  Returns the
 * length, or 0 if cap is too small. */
size_t http_format_request(const struct http_request *req, const char *authority, bool keep_alive,
                           char *out, size_t cap);

/* Write a response head to send to the client for `resp`: the status line
 * as received, the fields minus the hop-by-hop ones, and a Connection field
 * as `keep_alive` says.  Returns the length, or 0 if cap is too small. */
size_t http_format_response(const struct http_response *resp, const char *buf, bool keep_alive,
                            char *out, size_t cap);

/* Chunked body framing: walks a chunked body as it streams by, without
 * changing it, to find where the message ends (RFC 9112 section 7.1).
 * Chunk extensions are skipped; trailers are read and dropped from the
 * framing's point of view (they pass through); a chunk size over 2^60, a
 * bad hex digit, a missing CRLF or a bare LF is an error. */
struct http_chunked {
    int state;
    uint64_t left; /* bytes left in the current chunk's data */
    size_t line;   /* bytes in the current size or trailer line */
};

enum http_chunked_result {
    HTTP_CHUNKED_MORE, /* all of buf belongs to the body; more to come */
    HTTP_CHUNKED_DONE, /* the body ended after *used bytes */
    HTTP_CHUNKED_BAD,
};

void http_chunked_init(struct http_chunked *c);
enum http_chunked_result http_chunked_feed(struct http_chunked *c, const char *buf, size_t len,
                                           size_t *used);

/* Find a field by name (case-insensitive); NULL if absent. */
const struct http_header *http_find(const struct http_header *h, size_t n, const char *name);

#endif
