/* mcp_http_stream.c - the event streams of the Streamable HTTP transport
 * (contract in mcp_http_stream.h).  Both are chunked (mcp_sse.c frames the
 * events), so an answer of unknown length ends without closing the
 * connection.  A POST's stream starts at the first notification of its
 * request, in the thread handling it (the session's notify finds it
 * through a thread-local pointer: several requests of one session may run
 * at once, each on its own connection).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "mcp_http.h"
#include "mcp_http_stream.h"

#define STREAM_POLL_MS 1000 /* a GET stream looks at the session, client and server this often */

static __thread struct sbx_mcp_post_stream *current;

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sbx_mcp_http_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            return -1; /* includes SO_SNDTIMEO's EAGAIN: the client stopped reading */
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* The head of a text/event-stream answer, in chunks. */
static int stream_head(int fd, int close)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     "Cache-Control: no-store\r\nTransfer-Encoding: chunked\r\n"
                     "Connection: %s\r\n\r\n",
                     close ? "close" : "keep-alive");

    return sbx_mcp_http_write_all(fd, head, (size_t)n);
}

static int chunk_end(int fd)
{
    return sbx_mcp_http_write_all(fd, SBX_MCP_CHUNK_END, sizeof SBX_MCP_CHUNK_END - 1);
}

/* Writes msg (borrowed) as one event of ps, starting the answer first. */
static void stream_send(struct sbx_mcp_post_stream *ps, const json_t *msg)
{
    size_t n;
    char *ev;

    if (ps->failed)
        return;
    if (!ps->started && stream_head(ps->fd, ps->close) == -1) {
        ps->failed = 1;
        return;
    }
    ps->started = 1;
    ev = sbx_mcp_sse_event(msg, &n);
    if (!ev || sbx_mcp_http_write_all(ps->fd, ev, n) == -1)
        ps->failed = 1;
    free(ev);
}

void sbx_mcp_post_stream_use(struct sbx_mcp_post_stream *ps)
{
    current = ps;
}

void sbx_mcp_post_notify(void *arg, json_t *msg)
{
    if (current && current->se == arg)
        stream_send(current, msg);
    json_decref(msg);
}

int sbx_mcp_post_request(void *arg, json_t *msg)
{
    int rc = -1;

    if (current && current->se == arg) {
        stream_send(current, msg);
        rc = current->failed ? -1 : 0;
    }
    json_decref(msg);
    return rc;
}

int sbx_mcp_post_stream_end(struct sbx_mcp_post_stream *ps, const json_t *answer)
{
    stream_send(ps, answer);
    if (!ps->failed && chunk_end(ps->fd) == -1)
        ps->failed = 1;
    return ps->failed ? -1 : 0;
}

/* The client went away (or the server shut the connection down). */
static int peer_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Writes each of msgs (an array, stolen) as an event; -1 when the client
 * stopped taking them. */
static int stream_all(int fd, json_t *msgs)
{
    size_t i, n;
    json_t *m;
    int rc = 0;

    json_array_foreach(msgs, i, m)
    {
        char *ev = sbx_mcp_sse_event(m, &n);

        if (ev && rc == 0)
            rc = sbx_mcp_http_write_all(fd, ev, n);
        free(ev);
    }
    json_decref(msgs);
    return rc;
}

int sbx_mcp_get_stream(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se, int fd,
                       int close, int keepalive_ms, volatile sig_atomic_t *stopping)
{
    int64_t quiet_since = now_ms();
    int ended = 0, failed = stream_head(fd, close) == -1;

    while (!failed && !ended && !*stopping && !peer_gone(fd)) {
        json_t *msgs = sbx_mcp_http_session_stream_wait(t, se, STREAM_POLL_MS, &ended);
        size_t n, got = json_array_size(msgs);

        failed = stream_all(fd, msgs) == -1;
        if (got)
            quiet_since = now_ms();
        if (!failed && now_ms() - quiet_since >= keepalive_ms) {
            char *c = sbx_mcp_sse_comment("keep-alive", &n);

            failed = sbx_mcp_http_write_all(fd, c, n) == -1;
            free(c);
            quiet_since = now_ms();
        }
    }
    if (!failed && chunk_end(fd) == -1)
        failed = 1;
    return failed || !ended ? -1 : 0;
}
