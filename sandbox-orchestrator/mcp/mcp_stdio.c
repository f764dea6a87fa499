/* mcp_stdio.c - the stdio transport: one JSON-RPC message per line on the
 * input, one per line on the output (MCP "stdio" transport).  Messages carry
 * no embedded newlines; JSON_COMPACT output never has one.  Logs go to
 * stderr only.  Every notification goes to the output: a request's
 * (progress, log messages) before its answer, and the ones tied to no
 * request (resources/updated, list_changed) when they happen - which,
 * with one thread reading and handling, is while a tool call of this
 * session runs, before its answer.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_server.h"

/* The longest message we take: a write_file of a few MiB, base64'd. */
#define STDIO_MAX_LINE (16u << 20)

/* Writes all of buf; returns 0, or -1 when the client has gone. */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Sends one message (stolen) and its newline. */
static int send_message(int fd, json_t *msg)
{
    char *text = json_dumps(msg, JSON_COMPACT);
    int rc;

    json_decref(msg);
    if (!text)
        return -1;
    rc = write_all(fd, text, strlen(text)) == -1 || write_all(fd, "\n", 1) == -1 ? -1 : 0;
    free(text);
    return rc;
}

/* A session's notify on stdio: arg is the output fd; a client that has
 * gone is noticed at the answer. */
static void notify(void *arg, json_t *msg)
{
    (void)send_message(*(int *)arg, msg);
}

static int blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", s[i]))
            return 0;
    return 1;
}

/* Handles one input line; returns -1 when the output is gone. */
static int on_line(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, int out_fd,
                   const char *line, size_t len)
{
    json_t *msg, *reply;

    if (blank(line, len))
        return 0;
    if (sbx_mcp_parse(line, len, &msg, &reply) == -1)
        return send_message(out_fd, reply);
    reply = sbx_mcp_handle(srv, sess, msg);
    json_decref(msg);
    return reply ? send_message(out_fd, reply) : 0;
}

static int send_too_long(int out_fd)
{
    return send_message(out_fd, json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                                          "error", "code", -32700, "message",
                                          "parse error: message longer than 16 MiB"));
}

int sbx_mcp_stdio_run(struct sbx_mcp_server *srv, int in_fd, int out_fd)
{
    struct sbx_mcp_session sess = {
        .notify = notify, .notify_arg = &out_fd, .deliver = notify, .deliver_arg = &out_fd};
    size_t cap = 64 * 1024, len = 0, scan = 0, start;
    char *buf = malloc(cap), *nl;
    int skipping = 0, rc = 0;

    if (!buf)
        abort();
    for (;;) {
        if (len == cap) {
            if (cap >= STDIO_MAX_LINE) { /* drop the line up to its newline */
                if (!skipping && send_too_long(out_fd) == -1)
                    break;
                skipping = 1;
                len = scan = 0;
            } else if (!(buf = realloc(buf, cap *= 2))) {
                abort();
            }
        }
        ssize_t n = read(in_fd, buf + len, cap - len);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1) {
            fprintf(stderr, "sandboxctl mcp: reading stdin: %s\n", strerror(errno));
            rc = 1;
            break;
        }
        if (n == 0) /* end of input: the client is done (a partial line is dropped) */
            break;
        len += (size_t)n;
        start = 0;
        /* Search only the new bytes: a long line arrives in many reads. */
        while ((nl = memchr(buf + scan, '\n', len - scan)) != NULL) {
            size_t end = (size_t)(nl - buf);

            if (!skipping && on_line(srv, &sess, out_fd, buf + start, end - start) == -1)
                goto out;
            skipping = 0;
            start = scan = end + 1;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        scan = len;
    }
out:
    sbx_mcp_session_end(srv, &sess);
    free(buf);
    return rc;
}
