/* mcp_sse.c - server-sent events (WHATWG HTML, section 9.2) in HTTP/1.1
 * chunks (RFC 9112 section 7.1), as the Streamable HTTP transport sends
 * them: one JSON-RPC message per event, in a "data:" field of one line
 * (compact JSON holds no newline), each event one chunk.  Chunked coding
 * lets an answer of unknown length end without closing the connection,
 * so keep-alive survives a stream.  Pure: no I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_http.h"

/* payload (n bytes) as one chunk: its length in hex, CRLF, the bytes, CRLF.
 * A new buffer of *len bytes (and a NUL). */
static char *chunk(const char *payload, size_t n, size_t *len)
{
    char head[24];
    int h = snprintf(head, sizeof head, "%zx\r\n", n);
    char *out = malloc((size_t)h + n + 3);

    if (!out)
        abort();
    memcpy(out, head, (size_t)h);
    memcpy(out + h, payload, n);
    memcpy(out + h + n, "\r\n", 3);
    *len = (size_t)h + n + 2;
    return out;
}

char *sbx_mcp_sse_event(const json_t *msg, size_t *len)
{
    char *text = json_dumps(msg, JSON_COMPACT), *event, *out;
    size_t n;

    if (!text)
        return NULL;
    n = strlen(text) + sizeof "data: \n\n" - 1;
    event = malloc(n + 1);
    if (!event)
        abort();
    snprintf(event, n + 1, "data: %s\n\n", text);
    free(text);
    out = chunk(event, n, len);
    free(event);
    return out;
}

char *sbx_mcp_sse_comment(const char *text, size_t *len)
{
    char event[128];
    int n = snprintf(event, sizeof event, ": %.100s\n\n", text);

    return chunk(event, (size_t)n, len);
}
