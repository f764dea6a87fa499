/* mcp_stdio.c - the stdio transport: one JSON-RPC message per line on the
 * input, one per line on the output (MCP "stdio" transport).  Messages carry
 * no embedded newlines; JSON_COMPACT output never has one.  Logs go to
 * stderr only.  Every notification goes to the output: a request's
 * (progress, log messages) before its answer, and the ones tied to no
 * request (resources/updated, list_changed) when they happen - which,
 * with requests handled one at a time, is while a tool call of this
 * session runs, before its answer.
 *
 * Two threads: a reader cuts the input into lines and hands each to the
 * handler (the calling thread), which answers them in order - except the
 * client's responses to our own requests (elicitation/create), which the
 * reader hands over at once, since the tool call waiting for one holds the
 * handler.  Only the handler writes to the output.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp_server.h"

/* The longest message we take: a write_file of a few MiB, base64'd. */
#define STDIO_MAX_LINE (16u << 20)
#define READ_POLL_MS   200 /* the reader looks at `stop` this often */

/* One input line for the handler; too_long marks one over the cap. */
struct line {
    char *text;
    size_t len;
    int too_long;
    struct line *next;
};

struct stdio {
    struct sbx_mcp_server *srv;
    struct sbx_mcp_session sess;
    int in_fd, out_fd;
    pthread_mutex_t lock;
    pthread_cond_t more;
    struct line *head, **tail;
    int eof;           /* the reader is done: no more lines */
    int rc;            /* 1 when reading failed */
    volatile int stop; /* the handler is done: the reader ends */
};

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

/* A session's send_request: the same, saying whether it went out. */
static int send_request(void *arg, json_t *msg)
{
    return send_message(*(int *)arg, msg);
}

static int blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", s[i]))
            return 0;
    return 1;
}

/* Queues a line (text copied) for the handler. */
static void push(struct stdio *io, const char *text, size_t len, int too_long)
{
    struct line *l = calloc(1, sizeof *l);

    if (!l || !(l->text = malloc(len + 1)))
        abort();
    memcpy(l->text, text, len);
    l->text[len] = '\0';
    l->len = len;
    l->too_long = too_long;
    pthread_mutex_lock(&io->lock);
    *io->tail = l;
    io->tail = &l->next;
    pthread_cond_signal(&io->more);
    pthread_mutex_unlock(&io->lock);
}

/* One complete input line, in the reader: a response to one of our
 * requests is handed over here; anything else goes to the handler. */
static void on_read_line(struct stdio *io, const char *text, size_t len)
{
    json_t *msg, *reply;

    if (blank(text, len))
        return;
    if (sbx_mcp_parse(text, len, &msg, &reply) == 0 && !json_object_get(msg, "method")) {
        json_decref(sbx_mcp_handle(io->srv, &io->sess, msg));
        json_decref(msg);
        return;
    }
    json_decref(msg);
    json_decref(reply);
    push(io, text, len, 0);
}

/* Reads what is there, waiting in slices so that `stop` is seen.  Returns
 * the byte count, 0 at the end of input or on stop, -1 on error. */
static ssize_t read_some(struct stdio *io, char *buf, size_t len)
{
    for (;;) {
        struct pollfd p = {.fd = io->in_fd, .events = POLLIN};
        int n = poll(&p, 1, READ_POLL_MS);

        if (io->stop)
            return 0;
        if (n == -1 && errno != EINTR)
            return -1;
        if (n <= 0)
            continue;
        ssize_t r = read(io->in_fd, buf, len);
        if (r == -1 && errno == EINTR)
            continue;
        return r;
    }
}

/* The reader thread: the input cut into lines (a partial last line is
 * dropped; a line over STDIO_MAX_LINE is refused once and skipped). */
static void *reader(void *arg)
{
    struct stdio *io = arg;
    size_t cap = 64 * 1024, len = 0, scan = 0, start;
    char *buf = malloc(cap), *nl;
    int skipping = 0;

    if (!buf)
        abort();
    for (;;) {
        if (len == cap) {
            if (cap >= STDIO_MAX_LINE) { /* drop the line up to its newline */
                if (!skipping)
                    push(io, "", 0, 1);
                skipping = 1;
                len = scan = 0;
            } else if (!(buf = realloc(buf, cap *= 2))) {
                abort();
            }
        }
        ssize_t n = read_some(io, buf + len, cap - len);
        if (n == -1) {
            fprintf(stderr, "sandboxctl mcp: reading stdin: %s\n", strerror(errno));
            io->rc = 1;
            break;
        }
        if (n == 0) /* end of input: the client is done */
            break;
        len += (size_t)n;
        start = 0;
        /* Search only the new bytes: a long line arrives in many reads. */
        while ((nl = memchr(buf + scan, '\n', len - scan)) != NULL) {
            size_t end = (size_t)(nl - buf);

            if (!skipping)
                on_read_line(io, buf + start, end - start);
            skipping = 0;
            start = scan = end + 1;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        scan = len;
    }
    free(buf);
    sbx_mcp_session_close(io->srv, &io->sess);
    pthread_mutex_lock(&io->lock);
    io->eof = 1;
    pthread_cond_signal(&io->more);
    pthread_mutex_unlock(&io->lock);
    return NULL;
}

/* The next line for the handler, or NULL once the reader is done. */
static struct line *pop(struct stdio *io)
{
    struct line *l;

    pthread_mutex_lock(&io->lock);
    while (!io->head && !io->eof)
        pthread_cond_wait(&io->more, &io->lock);
    l = io->head;
    if (l) {
        io->head = l->next;
        if (!io->head)
            io->tail = &io->head;
    }
    pthread_mutex_unlock(&io->lock);
    return l;
}

/* Handles one line; returns -1 when the output is gone. */
static int on_line(struct stdio *io, const struct line *l)
{
    json_t *msg, *reply;

    if (l->too_long)
        return send_message(io->out_fd, json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0",
                                                  "id", "error", "code", -32700, "message",
                                                  "parse error: message longer than 16 MiB"));
    if (sbx_mcp_parse(l->text, l->len, &msg, &reply) == -1)
        return send_message(io->out_fd, reply);
    reply = sbx_mcp_handle(io->srv, &io->sess, msg);
    json_decref(msg);
    return reply ? send_message(io->out_fd, reply) : 0;
}

int sbx_mcp_stdio_run(struct sbx_mcp_server *srv, int in_fd, int out_fd)
{
    struct stdio *io = calloc(1, sizeof *io);
    struct line *l;
    pthread_t t;
    int rc, gone = 0;

    if (!io)
        abort();
    io->srv = srv;
    io->in_fd = in_fd;
    io->out_fd = out_fd;
    io->sess = (struct sbx_mcp_session){.notify = notify,
                                        .notify_arg = &io->out_fd,
                                        .deliver = notify,
                                        .deliver_arg = &io->out_fd,
                                        .send_request = send_request,
                                        .send_request_arg = &io->out_fd};
    io->tail = &io->head;
    pthread_mutex_init(&io->lock, NULL);
    pthread_cond_init(&io->more, NULL);
    if (pthread_create(&t, NULL, reader, io) != 0)
        abort();
    while ((l = pop(io)) != NULL) {
        if (!gone && on_line(io, l) == -1) {
            gone = 1; /* the client has gone: read no more, drop the rest */
            io->stop = 1;
        }
        free(l->text);
        free(l);
    }
    pthread_join(t, NULL);
    sbx_mcp_session_end(srv, &io->sess);
    rc = io->rc;
    pthread_mutex_destroy(&io->lock);
    pthread_cond_destroy(&io->more);
    free(io);
    return rc;
}
