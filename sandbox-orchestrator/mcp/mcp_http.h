/* mcp_http.h - the pure parts of the Streamable HTTP transport (mcp_http.c):
 * bytes from a client in, a parsed request head or the status that refuses
 * it out (no I/O, no allocation, no state), and the framing of server-sent
 * events (mcp_sse.c); private to mcp/ and its tests (the unit tests and the
 * fuzz harness call it without a socket).
 * The head is read by http/'s parser (RFC 9112 sections 2, 3, 5 and 6.3);
 * this adds what the MCP endpoint asks of a request. */
#ifndef SBX_MCP_HTTP_H
#define SBX_MCP_HTTP_H

#include <stddef.h>

#include <jansson.h>

#define SBX_MCP_HTTP_HEAD_MAX    16384 /* request line + headers + blank line */
#define SBX_MCP_HTTP_MAX_HEADERS 64
#define SBX_MCP_HTTP_BODY_MAX    (8u << 20) /* one JSON-RPC message */

/* What the bytes read so far come to. */
enum sbx_mcp_http_head {
    SBX_MCP_HEAD_MORE,    /* no verdict yet: read more (fewer than HEAD_MAX bytes so far) */
    SBX_MCP_HEAD_OK,      /* a request head, in the request */
    SBX_MCP_HEAD_REFUSED, /* status says how to answer, error why */
};

/* One request as parsed.  Its strings are NUL-terminated and point into
 * head, its own copy of the head; the body is the connection's. */
struct sbx_mcp_http_request {
    const char *method, *target;
    int keep_alive; /* RFC 9112 section 9.3 */
    const char *host, *origin, *auth, *content_type, *accept, *session_id, *protocol_version;
    long long content_length; /* -1: none */
    size_t head_len;          /* bytes of the head in the input, through its blank line */
    int status;               /* 0; on REFUSED 400, 408, 413, 414, 431 or 501 */
    const char *error;        /* on REFUSED: what was wrong (static text) */
    char *body;
    size_t body_len;
    char head[SBX_MCP_HTTP_HEAD_MAX + 1];
};

/* Reads the request head at the start of the len bytes at buf (more may
 * follow it: the body, a next request) into q, which it resets.  Returns
 * MORE while the bytes hold neither a whole head nor an error, and
 * len < SBX_MCP_HTTP_HEAD_MAX; OK with q filled; or REFUSED with q->status:
 *   400  malformed or ambiguous (http/'s rules: a bare CR or LF, a NUL or
 *        other control byte, obs-fold, a blank before a colon, a bad field
 *        name, target or version, two Content-Length or Host fields,
 *        Content-Length with Transfer-Encoding, a Transfer-Encoding other
 *        than chunked, ...), and a second Origin, Authorization,
 *        Content-Type, Accept, Mcp-Session-Id or MCP-Protocol-Version;
 *   414  a request line that does not end within SBX_MCP_HTTP_HEAD_MAX;
 *   431  a head over SBX_MCP_HTTP_HEAD_MAX bytes or with more than
 *        SBX_MCP_HTTP_MAX_HEADERS fields;
 *   413  a Content-Length over SBX_MCP_HTTP_BODY_MAX;
 *   501  a chunked body (not supported).
 * Never reads past buf[len). */
enum sbx_mcp_http_head sbx_mcp_http_parse_head(const char *buf, size_t len,
                                               struct sbx_mcp_http_request *q);

/* Server-sent events in chunks (mcp_sse.c). */

/* The last chunk of a chunked body (no trailers). */
#define SBX_MCP_CHUNK_END "0\r\n\r\n"

/* msg (borrowed) as one SSE event ("data: JSON" and a blank line) in one
 * chunk: a new buffer of *len bytes, or NULL when msg cannot be written. */
char *sbx_mcp_sse_event(const json_t *msg, size_t *len);

/* An SSE comment (": text" and a blank line; clients ignore it, proxies
 * see traffic) in one chunk: a new buffer of *len bytes. */
char *sbx_mcp_sse_comment(const char *text, size_t *len);

#endif
