/*
 * egress_sink.c - the upstream end of egress-load's workloads.
 *
 *   egress-sink --listen ADDR:PORT [--tls-like | --http | --bulk]
 *               [--reply-bytes K] [--threads T]
 *
 * One mode per process; run one sink per port.
 *   --tls-like (default)  wait for one whole TLS record (the ClientHello),
 *                         answer K bytes framed as handshake records
 *                         (16 03 03 LEN ...), then discard until EOF.
 *   --http                answer every HTTP/1.1 request head with a 200 and a
 *                         K-byte body; keep-alive, requests may be pipelined.
 *   --bulk                wait for one whole TLS record like --tls-like, then
 *                         send K bytes as fast as the socket takes them (0:
 *                         until the client closes) and discard what comes in.
 *
 * It must never be what a benchmark measures: every reply is built once at
 * start and written straight from that buffer, reads go into one scratch
 * buffer per thread and are only counted, and each thread has its own
 * listening socket (SO_REUSEPORT) so the kernel spreads accepts.  The only
 * bytes looked at are the 5-byte record header and HTTP request heads.
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"

#define SCRATCH_BYTES (256 * 1024) /* one read() at most; also the bulk pattern */
#define REPLY_MAX     (64u << 20)  /* largest --reply-bytes for tls-like and http */
#define MAX_THREADS   64
#define TLS_RECORD    16384 /* TLSPlaintext.length limit (RFC 8446 §5.1) */

enum mode { M_TLS, M_HTTP, M_BULK };

/* Where a connection is; it only ever moves forward (HTTP loops in READING). */
enum phase {
    PH_RECORD, /* reading the client's first TLS record (tls-like, bulk) */
    PH_REPLY,  /* writing the answer; reads are discarded meanwhile */
    PH_DRAIN,  /* answer sent: discard until EOF (tls-like, bulk) */
    PH_HTTP,   /* reading request heads, answering each (http) */
};

struct sink_thread;

struct sink_conn {
    struct sink_thread *t;
    int fd;
    enum phase ph;
    struct event rev, wev;
    bool writing;      /* wev is added */
    uint8_t hdr[5];    /* the first record's header, as it arrives */
    unsigned hdr_len;  /* bytes of hdr[] in */
    size_t rec_left;   /* record payload bytes still to come */
    uint64_t out_left; /* bytes of the current answer still to write */
    uint64_t out_pos;  /* position in the answer (wraps on the pattern) */
    uint64_t pending;  /* HTTP answers owed after the current one */
    unsigned crlf;     /* HTTP: how much of "\r\n\r\n" was just seen */
};

struct sink_thread {
    struct event_base *base;
    struct evconnlistener *lis;
    pthread_t tid;
    uint8_t scratch[SCRATCH_BYTES];
};

static struct {
    enum mode mode;
    uint64_t reply_bytes;
    const uint8_t *reply; /* the whole answer (tls-like, http) or the bulk pattern */
    size_t reply_len;     /* its length; bulk cycles through it */
    struct sockaddr_storage addr;
    int addr_len;
    int threads;
} cfg = {.mode = M_TLS, .reply_bytes = 4096, .threads = 1};

static void conn_free(struct sink_conn *c)
{
    event_del(&c->rev);
    event_del(&c->wev);
    close(c->fd);
    free(c);
}

/* The answer for one connection (tls-like, bulk) or one request (http). */
static void answer_start(struct sink_conn *c)
{
    c->out_pos = 0;
    c->out_left = cfg.mode == M_BULK ? cfg.reply_bytes : cfg.reply_len;
    if (cfg.mode == M_BULK && cfg.reply_bytes == 0)
        c->out_left = UINT64_MAX; /* until the client goes */
}

/* Write what the socket takes; returns -1 when the connection is gone. */
static int flush_out(struct sink_conn *c)
{
    while (c->out_left > 0 || c->pending > 0) {
        if (c->out_left == 0) {
            c->pending--;
            answer_start(c);
        }
        size_t at = c->out_pos % cfg.reply_len;
        size_t n = cfg.reply_len - at;
        if (n > c->out_left)
            n = c->out_left;
        ssize_t w = send(c->fd, cfg.reply + at, n, MSG_NOSIGNAL);
        if (w == -1) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return -1;
        }
        c->out_pos += (size_t)w;
        c->out_left -= (size_t)w;
    }
    bool more = c->out_left > 0 || c->pending > 0;
    if (more && !c->writing)
        event_add(&c->wev, NULL);
    else if (!more && c->writing)
        event_del(&c->wev);
    c->writing = more;
    if (!more && c->ph == PH_REPLY)
        c->ph = PH_DRAIN;
    return 0;
}

/* Take the first record's bytes out of buf; returns how many were its. */
static size_t eat_record(struct sink_conn *c, const uint8_t *buf, size_t n)
{
    size_t used = 0;
    while (c->hdr_len < 5 && used < n)
        c->hdr[c->hdr_len++] = buf[used++];
    if (c->hdr_len < 5)
        return used;
    if (c->hdr_len == 5) {
        c->rec_left = (size_t)c->hdr[3] << 8 | c->hdr[4];
        c->hdr_len = 6; /* header taken */
    }
    size_t take = n - used < c->rec_left ? n - used : c->rec_left;
    c->rec_left -= take;
    used += take;
    if (c->rec_left == 0) {
        c->ph = PH_REPLY;
        answer_start(c);
    }
    return used;
}

/* Count request heads: each ends with an empty line.  Requests carry no body
 * (egress-load sends GETs), so a head ends where "\r\n\r\n" is first seen. */
static void count_heads(struct sink_conn *c, const uint8_t *buf, size_t n)
{
    static const char end[] = "\r\n\r\n";
    for (size_t i = 0; i < n; i++) {
        uint8_t b = buf[i];
        if (b == (uint8_t)end[c->crlf]) {
            if (++c->crlf < 4)
                continue;
            c->crlf = 0;
            if (c->out_left == 0)
                answer_start(c);
            else
                c->pending++;
            continue;
        }
        c->crlf = b == '\r' ? 1 : 0;
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct sink_conn *c = arg;
    uint8_t *buf = c->t->scratch;
    (void)what;

    for (int rounds = 0; rounds < 4; rounds++) {
        ssize_t n = recv(fd, buf, SCRATCH_BYTES, 0);
        if (n == 0)
            return conn_free(c);
        if (n == -1) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            return conn_free(c);
        }
        if (c->ph == PH_RECORD)
            eat_record(c, buf, (size_t)n);
        else if (c->ph == PH_HTTP)
            count_heads(c, buf, (size_t)n);
        if ((size_t)n < SCRATCH_BYTES)
            break;
    }
    if (flush_out(c) == -1)
        conn_free(c);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    struct sink_conn *c = arg;
    (void)fd, (void)what;
    if (flush_out(c) == -1)
        conn_free(c);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct sink_thread *t = arg;
    struct sink_conn *c = calloc(1, sizeof *c);
    int one = 1;
    (void)lis, (void)sa, (void)salen;

    if (!c) {
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->t = t;
    c->fd = fd;
    c->ph = cfg.mode == M_HTTP ? PH_HTTP : PH_RECORD;
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, on_read, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    event_add(&c->rev, NULL);
}

static void on_listen_error(struct evconnlistener *lis, void *arg)
{
    (void)arg;
    int err = EVUTIL_SOCKET_ERROR();
    /* EMFILE and friends: say so once a second at most, keep serving. */
    static time_t last;
    time_t now = time(NULL);
    if (now != last)
        fprintf(stderr, "egress-sink: accept: %s\n", evutil_socket_error_to_string(err));
    last = now;
    (void)lis;
}

/* Build cfg.reply: K bytes of handshake records, or the HTTP answer, or the
 * bulk pattern.  Returns 0, or -1 with a message. */
static int build_reply(void)
{
    uint8_t *r;
    if (cfg.mode == M_BULK) {
        r = malloc(SCRATCH_BYTES);
        if (!r)
            return -1;
        for (size_t i = 0; i < SCRATCH_BYTES; i++)
            r[i] = (uint8_t)(i * 131 + 7);
        cfg.reply = r, cfg.reply_len = SCRATCH_BYTES;
        return 0;
    }
    if (cfg.reply_bytes > REPLY_MAX) {
        fprintf(stderr, "egress-sink: --reply-bytes must be at most %u here\n", REPLY_MAX);
        return -1;
    }
    size_t k = (size_t)cfg.reply_bytes;
    if (cfg.mode == M_HTTP) {
        char head[128];
        int h = snprintf(head, sizeof head,
                         "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         k);
        r = malloc((size_t)h + k);
        if (!r)
            return -1;
        memcpy(r, head, (size_t)h);
        memset(r + h, 'x', k);
        cfg.reply = r, cfg.reply_len = (size_t)h + k;
        return 0;
    }
    if (k == 0) {
        fprintf(stderr, "egress-sink: --tls-like needs --reply-bytes of at least 1\n");
        return -1;
    }
    /* Handshake records of at most 2^14 payload bytes each; a tail shorter
     * than a record header goes out as plain bytes. */
    r = calloc(1, k);
    if (!r)
        return -1;
    for (size_t at = 0; k - at > 5;) {
        size_t len = k - at - 5 > TLS_RECORD ? TLS_RECORD : k - at - 5;
        r[at] = 0x16, r[at + 1] = 0x03, r[at + 2] = 0x03;
        r[at + 3] = (uint8_t)(len >> 8), r[at + 4] = (uint8_t)len;
        if (at == 0 && len >= 4)
            r[5] = 0x02; /* handshake type server_hello, for whoever looks */
        at += 5 + len;
    }
    cfg.reply = r, cfg.reply_len = k;
    return 0;
}

static void *thread_main(void *arg)
{
    struct sink_thread *t = arg;
    event_base_dispatch(t->base);
    return NULL;
}

static int thread_setup(struct sink_thread *t)
{
    t->base = event_base_new();
    if (!t->base)
        return -1;
    t->lis = evconnlistener_new_bind(t->base, on_accept, t,
                                     LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
                                         LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_EXEC,
                                     4096, (struct sockaddr *)&cfg.addr, cfg.addr_len);
    if (!t->lis) {
        perror("egress-sink: listen");
        return -1;
    }
    evconnlistener_set_error_cb(t->lis, on_listen_error);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: egress-sink --listen ADDR:PORT [--tls-like|--http|--bulk]\n"
                    "                   [--reply-bytes K] [--threads T]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"reply-bytes", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 't'},
        {"http", no_argument, NULL, 'h'},
        {"tls-like", no_argument, NULL, 's'},
        {"bulk", no_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    bool have_addr = false;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'l':
            cfg.addr_len = sizeof cfg.addr;
            if (evutil_parse_sockaddr_port(optarg, (struct sockaddr *)&cfg.addr, &cfg.addr_len))
                fprintf(stderr, "egress-sink: --listen wants a numeric ADDR:PORT, not '%s'\n",
                        optarg),
                    exit(2);
            have_addr = true;
            break;
        case 'k':
            if (bench_parse_size(optarg, &cfg.reply_bytes))
                fprintf(stderr, "egress-sink: --reply-bytes wants a size, not '%s'\n", optarg),
                    exit(2);
            break;
        case 't':
            cfg.threads = atoi(optarg);
            if (cfg.threads < 1 || cfg.threads > MAX_THREADS)
                fprintf(stderr, "egress-sink: --threads must be 1..%d\n", MAX_THREADS), exit(2);
            break;
        case 'h': cfg.mode = M_HTTP; break;
        case 's': cfg.mode = M_TLS; break;
        case 'b': cfg.mode = M_BULK; break;
        default: usage();
        }
    }
    if (!have_addr || optind != argc)
        usage();
}

int main(int argc, char **argv)
{
    static struct sink_thread threads[MAX_THREADS];

    parse_args(argc, argv);
    bench_raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    if (build_reply() == -1)
        return 1;
    for (int i = 0; i < cfg.threads; i++)
        if (thread_setup(&threads[i]) == -1)
            return 1;
    for (int i = 1; i < cfg.threads; i++)
        if (pthread_create(&threads[i].tid, NULL, thread_main, &threads[i]) != 0)
            return perror("egress-sink: pthread_create"), 1;
    thread_main(&threads[0]);
    return 0;
}
