/* mcp_http.h - the pure part of the Streamable HTTP transport (mcp_http.c):
 * bytes from a client in, a parsed request head or the status that refuses
 * it out.  No I/O, no allocation, no state; private to mcp/ and its tests
 * (the unit tests and the fuzz harness call it without a socket).
 * RFC 9112 sections 2 (message format), 3 (request line), 5 (fields) and
 * 6.3 (message body length), restricted to what an MCP client sends. */
#ifndef SBX_MCP_HTTP_H
#define SBX_MCP_HTTP_H

#include <stddef.h>
#include <sys/types.h>

#define SBX_MCP_HTTP_HEAD_MAX    16384 /* request line + headers + blank line */
#define SBX_MCP_HTTP_MAX_HEADERS 64
#define SBX_MCP_HTTP_BODY_MAX    (8u << 20) /* one JSON-RPC message */

/* One request as parsed; the strings point into the head given to
 * sbx_mcp_http_parse_head(), the body into the connection's memory. */
struct sbx_mcp_http_request {
    char *method, *target;
    int http10, keep_alive;
    const char *host, *origin, *auth, *content_type, *accept, *session_id, *protocol_version;
    long long content_length; /* -1: none */
    int chunked;
    char *body;
    size_t body_len;
};

/* Looks for the end of a request head (the first CRLF CRLF) in the len bytes
 * at buf.  Returns the head's length through that blank line; 0 when more
 * bytes are needed; -1 with *status 400 when a NUL byte comes before the end,
 * or 431 when the first SBX_MCP_HTTP_HEAD_MAX bytes hold no end. */
ssize_t sbx_mcp_http_head_end(const char *buf, size_t len, int *status);

/* Parses a complete head (NUL-terminated, as sbx_mcp_http_head_end() found
 * it) in place into q.  Returns 0, or the status that refuses the request:
 * 400 malformed (also a second Content-Length, Host, Origin, Authorization,
 * Content-Type, Accept, Mcp-Session-Id or MCP-Protocol-Version), 431 more
 * than SBX_MCP_HTTP_MAX_HEADERS header lines, 413 a Content-Length over
 * SBX_MCP_HTTP_BODY_MAX (or of more than 12 digits), 501 any
 * Transfer-Encoding (chunked bodies are not supported). */
int sbx_mcp_http_parse_head(char *head, struct sbx_mcp_http_request *q);

#endif
