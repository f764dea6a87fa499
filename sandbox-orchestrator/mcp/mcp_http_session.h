/* mcp_http_session.h - the Streamable HTTP transport's sessions
 * (mcp_http_session.c): each a heap object at one address from initialize
 * to its end, counted by reference, so the state the protocol layer keeps
 * in its struct sbx_mcp_session (log level, subscriptions) lasts across
 * requests and concurrent requests share it.  Also each session's queue
 * for the standalone GET stream.  Private to mcp_http.c and its tests.
 */
#ifndef SBX_MCP_HTTP_SESSION_H
#define SBX_MCP_HTTP_SESSION_H

#include <jansson.h>

#include "mcp_server.h"

#define SBX_MCP_HTTP_SESSION_ID_LEN 32 /* 128 random bits in hex */

struct sbx_mcp_http_sessions;
struct sbx_mcp_http_session;

/* A table of at most max sessions; one unused for idle_s is dropped. */
struct sbx_mcp_http_sessions *sbx_mcp_http_sessions_new(struct sbx_mcp_server *srv, int max,
                                                        int idle_s);

/* Ends every session and frees the table (no request may be running). */
void sbx_mcp_http_sessions_free(struct sbx_mcp_http_sessions *t);

/* A new session outside the table, with one reference (the caller's);
 * its deliver function queues for the GET stream. */
struct sbx_mcp_http_session *sbx_mcp_http_session_new(struct sbx_mcp_http_sessions *t);

/* The protocol layer's part of se. */
struct sbx_mcp_session *sbx_mcp_http_session_mcp(struct sbx_mcp_http_session *se);

/* Puts se in the table under a new random id (written to id): a free
 * slot, else the least recently used session ends.  The table takes its
 * own reference.  Returns 0, or -1 when no random id could be drawn. */
int sbx_mcp_http_session_add(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se,
                             char id[SBX_MCP_HTTP_SESSION_ID_LEN + 1]);

/* The session of id, with a reference for the caller, or NULL. */
struct sbx_mcp_http_session *sbx_mcp_http_session_find(struct sbx_mcp_http_sessions *t,
                                                       const char *id);

/* Drops a reference; the last one ends the session and frees it. */
void sbx_mcp_http_session_release(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se);

/* DELETE: takes the session of id out of the table (it ends when its last
 * request is done).  Returns 0, or -1 for an unknown id. */
int sbx_mcp_http_session_delete(struct sbx_mcp_http_sessions *t, const char *id);

/* The GET stream: claims it (0; -1 when the session has one open). */
int sbx_mcp_http_session_stream_open(struct sbx_mcp_http_sessions *t,
                                     struct sbx_mcp_http_session *se);

/* Waits up to ms for queued notifications.  Returns them (a new array,
 * possibly empty after the wait), and sets *ended when the session has
 * ended (left the table). */
json_t *sbx_mcp_http_session_stream_wait(struct sbx_mcp_http_sessions *t,
                                         struct sbx_mcp_http_session *se, int ms, int *ended);

/* Gives the GET stream up; notifications are dropped until another opens. */
void sbx_mcp_http_session_stream_close(struct sbx_mcp_http_sessions *t,
                                       struct sbx_mcp_http_session *se);

#endif
