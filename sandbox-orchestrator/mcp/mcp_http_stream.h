/* mcp_http_stream.h - the event streams of the Streamable HTTP transport
 * (mcp_http_stream.c): a POST's answer as text/event-stream, and a
 * session's standalone GET stream.  Private to mcp_http.c.
 */
#ifndef SBX_MCP_HTTP_STREAM_H
#define SBX_MCP_HTTP_STREAM_H

#include <signal.h>
#include <stddef.h>

#include <jansson.h>

#include "mcp_http_session.h"

/* The text/event-stream answer of one POST: started at its first event. */
struct sbx_mcp_post_stream {
    struct sbx_mcp_http_session *se; /* the session the POST is in */
    int fd, close;                   /* the connection; Connection: close */
    int started, failed;             /* the head went out; a write failed */
};

/* Writes all of buf to the socket fd; returns 0, or -1 when the client
 * stopped taking it (SO_SNDTIMEO) or went away. */
int sbx_mcp_http_write_all(int fd, const char *buf, size_t len);

/* ps (NULL: none) is the stream of the POST this thread handles now. */
void sbx_mcp_post_stream_use(struct sbx_mcp_post_stream *ps);

/* A session's notify (arg: its struct sbx_mcp_http_session): msg
 * (stolen) goes to the stream of the POST this thread handles for that
 * session, else nowhere (the client asked for JSON). */
void sbx_mcp_post_notify(void *arg, json_t *msg);

/* A session's send_request: the same; -1 when it could not be sent. */
int sbx_mcp_post_request(void *arg, json_t *msg);

/* Ends a started stream with the answer (borrowed) and the last chunk;
 * returns 0, or -1 when a write failed (then close the connection). */
int sbx_mcp_post_stream_end(struct sbx_mcp_post_stream *ps, const json_t *answer);

/* Serves se's GET stream on fd (its stream claimed) until the session
 * ends, the client goes or *stopping: what the session is delivered, a
 * comment every keepalive_ms without one.  Returns 0 when it ended with
 * the last chunk because the session ended (the connection may serve
 * another request), else -1. */
int sbx_mcp_get_stream(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se, int fd,
                       int close, int keepalive_ms, volatile sig_atomic_t *stopping);

#endif
