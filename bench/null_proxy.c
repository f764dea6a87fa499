/*
 * null_proxy.c - the least a forward proxy can do, as a measuring
 * instrument: the `null` column of bench/run.sh.
 *
 *   null-proxy --upstream ADDR [--explicit ADDR:PORT] [--http-port P]
 *              [--transparent ADDR:PORT=UPORT]... [--workers N]
 *
 *   --explicit     a proxy port: a CONNECT head names the upstream port (its
 *                  host is ignored: every upstream is --upstream); any other
 *                  head is relayed as it is, with what follows, to
 *                  --upstream:--http-port (a bare relay, not an HTTP proxy)
 *   --transparent  a port relayed from its first byte to --upstream:UPORT
 *   --workers      threads, each with one epoll loop and its own
 *                  SO_REUSEPORT socket on every port (default 2)
 *
 * What it does per connection and nothing more: accept, read the head (on
 * the explicit port), connect, answer 200, then relay both ways with a
 * per-thread buffer, and with splice(2) once a direction has carried 256
 * KiB, passing half-closes.  No policy, no DNS, no log, no metrics, no
 * timeouts.  What it does not do (deny, parse HTTP) it is not asked to.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX     8192
#define SCRATCH      (64 * 1024)
#define SPLICE_AFTER (256 * 1024)
#define PIPE_SIZE    (256 * 1024)
#define PORTS_MAX    8
#define EVENTS_MAX   256

static const char connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

struct port {
    struct sockaddr_in addr;
    bool explicit_proxy; /* CONNECT heads; else relayed to upstream_port */
    uint16_t upstream_port;
};

static struct {
    struct in_addr upstream;
    uint16_t http_port;
    struct port ports[PORTS_MAX];
    int n_ports, workers;
} cfg = {.http_port = 8000, .workers = 2};

/* One direction: bytes read from `from`, written to `to`. */
struct dir {
    int from, to;
    uint8_t *held; /* read, not yet written */
    size_t off, len;
    int pipe[2]; /* splice, once `total` passed SPLICE_AFTER */
    size_t in_pipe, pipe_size;
    uint64_t total;
    bool eof, shut;
};

enum phase { P_HEAD, P_CONNECTING, P_RELAY };

struct conn;
/* What an epoll entry points at: a listener, or one socket of a conn. */
struct handle {
    struct conn *c; /* NULL: a listener */
    int side;       /* 0 client, 1 upstream; for a listener, its port */
};

struct conn {
    enum phase phase;
    int fd[2];
    uint32_t mask[2]; /* what each socket's epoll entry waits for */
    struct handle h[2];
    struct dir d[2]; /* 0: client -> upstream, 1: upstream -> client */
    bool explicit_proxy;
    size_t head_len;
    uint8_t *head;          /* P_HEAD: the head so far */
    bool closed;            /* its sockets are closed; freed after the batch */
    struct conn *next_gone; /* the worker's closed ones */
};

struct worker {
    int ep;
    uint8_t scratch[SCRATCH];
    struct handle lh[PORTS_MAX];
    int lfd[PORTS_MAX];
    /* Closed in this batch of events: a later event of the same batch may
     * still point at one, so they are freed when the batch is done. */
    struct conn *gone;
};

/* Close c's sockets and pipes now; c itself is freed after the batch. */
static void conn_close(struct worker *w, struct conn *c)
{
    if (c->closed)
        return;
    for (int s = 0; s < 2; s++) {
        if (c->fd[s] != -1)
            close(c->fd[s]); /* leaves the epoll set with it */
        if (c->d[s].pipe[0] != -1) {
            close(c->d[s].pipe[0]);
            close(c->d[s].pipe[1]);
        }
        c->fd[s] = c->d[s].pipe[0] = c->d[s].pipe[1] = -1;
        free(c->d[s].held);
        c->d[s].held = NULL;
    }
    free(c->head);
    c->head = NULL;
    c->closed = true;
    c->next_gone = w->gone;
    w->gone = c;
}

/* Free the connections closed in the batch just handled. */
static void free_gone(struct worker *w)
{
    while (w->gone != NULL) {
        struct conn *c = w->gone;
        w->gone = c->next_gone;
        free(c);
    }
}

/* Watch socket s for `want`, with one epoll_ctl only when it changes. */
static void watch(struct worker *w, struct conn *c, int s, uint32_t want)
{
    if (c->mask[s] == want)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = &c->h[s]};
    epoll_ctl(w->ep, EPOLL_CTL_MOD, c->fd[s], &ev);
    c->mask[s] = want;
}

static bool pending(const struct dir *d)
{
    return d->in_pipe > 0 || d->len > d->off;
}

/* Write what d holds: false on an error. */
static bool flush_dir(struct dir *d)
{
    while (d->in_pipe > 0) {
        ssize_t n =
            splice(d->pipe[0], NULL, d->to, NULL, d->in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        d->in_pipe -= (size_t)n;
    }
    while (d->len > d->off) {
        ssize_t n = send(d->to, d->held + d->off, d->len - d->off, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        d->off += (size_t)n;
    }
    free(d->held);
    d->held = NULL;
    d->off = d->len = 0;
    return true;
}

/* Keep n bytes of p for later (d holds none now). */
static void hold(struct dir *d, const uint8_t *p, size_t n)
{
    d->held = malloc(n);
    if (d->held == NULL)
        abort();
    memcpy(d->held, p, n);
    d->off = 0;
    d->len = n;
}

static void start_splice(struct dir *d)
{
    if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) == -1) {
        d->pipe[0] = d->pipe[1] = -1;
        return;
    }
    int size = fcntl(d->pipe[1], F_SETPIPE_SZ, PIPE_SIZE);
    d->pipe_size = size > 0 ? (size_t)size : 65536;
}

/* Move what d->from has to d->to until one would block: false on an
 * error. */
static bool pump(struct worker *w, struct dir *d)
{
    while (!d->eof && !pending(d)) {
        ssize_t n;
        if (d->pipe[0] == -1 && d->total >= SPLICE_AFTER)
            start_splice(d);
        if (d->pipe[0] != -1)
            n = splice(d->from, NULL, d->pipe[1], NULL, d->pipe_size,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        else
            n = recv(d->from, w->scratch, SCRATCH, 0);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR;
        if (n == 0) {
            d->eof = true;
            break;
        }
        d->total += (size_t)n;
        if (d->pipe[0] != -1) {
            d->in_pipe = (size_t)n;
        } else {
            ssize_t k = send(d->to, w->scratch, (size_t)n, MSG_NOSIGNAL);
            if (k < 0 && errno != EAGAIN && errno != EINTR)
                return false;
            size_t sent = k < 0 ? 0 : (size_t)k;
            if (sent < (size_t)n)
                hold(d, w->scratch + sent, (size_t)n - sent);
        }
        if (!flush_dir(d))
            return false;
    }
    return true;
}

/* After progress: pass ends on, close when both ways are done, and watch
 * what each socket is needed for next. */
static void settle(struct worker *w, struct conn *c)
{
    for (int i = 0; i < 2; i++) {
        struct dir *d = &c->d[i];
        if (d->eof && !pending(d) && !d->shut) {
            shutdown(d->to, SHUT_WR);
            d->shut = true;
        }
    }
    if (c->d[0].shut && c->d[1].shut) {
        conn_close(w, c);
        return;
    }
    for (int s = 0; s < 2; s++) {
        const struct dir *in = &c->d[s], *out = &c->d[1 - s];
        uint32_t want = (!in->eof && !pending(in) ? EPOLLIN : 0) | (pending(out) ? EPOLLOUT : 0);
        watch(w, c, s, want);
    }
}

/* Socket s of a relaying conn is ready: write what waits for it (then read
 * its peer again at once), and read what it sent. */
static void relay_event(struct worker *w, struct conn *c, int s, uint32_t ev)
{
    struct dir *in = &c->d[s], *out = &c->d[1 - s];
    bool ok = !(ev & EPOLLERR);

    if (ok && (ev & (EPOLLOUT | EPOLLHUP)))
        ok = flush_dir(out) && (pending(out) || pump(w, out));
    if (ok && (ev & (EPOLLIN | EPOLLHUP)))
        ok = pump(w, in);
    if (!ok) {
        conn_close(w, c);
        return;
    }
    settle(w, c);
}

/* The relay starts: what the client sent ahead (head bytes to pass on)
 * goes first. */
static void relay_start(struct worker *w, struct conn *c, const uint8_t *ahead, size_t n)
{
    c->phase = P_RELAY;
    for (int i = 0; i < 2; i++) {
        c->d[i].from = c->fd[i];
        c->d[i].to = c->fd[1 - i];
    }
    if (n > 0)
        hold(&c->d[0], ahead, n);
    free(c->head);
    c->head = NULL;
    if (!flush_dir(&c->d[0]) || !pump(w, &c->d[0]) || !pump(w, &c->d[1])) {
        conn_close(w, c);
        return;
    }
    settle(w, c);
}

/* Connect c's upstream socket to --upstream:port (added to epoll for
 * EPOLLOUT); false when it fails at once. */
static bool connect_upstream(struct worker *w, struct conn *c, uint16_t port)
{
    struct sockaddr_in sa = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = cfg.upstream};
    int one = 1;

    c->fd[1] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd[1] == -1)
        return false;
    setsockopt(c->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd[1], (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS)
        return false;
    c->phase = P_CONNECTING;
    c->mask[1] = EPOLLOUT;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &c->h[1]};
    epoll_ctl(w->ep, EPOLL_CTL_ADD, c->fd[1], &ev);
    watch(w, c, 0, 0); /* the client waits */
    return true;
}

static void on_connected(struct worker *w, struct conn *c)
{
    int err = 0;
    socklen_t len = sizeof(err);

    getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        conn_close(w, c);
        return;
    }
    if (!c->explicit_proxy || c->head == NULL) {
        relay_start(w, c, NULL, 0); /* transparent: nothing read yet */
        return;
    }
    const uint8_t *end = memmem(c->head, c->head_len, "\r\n\r\n", 4);
    bool tunnel = memcmp(c->head, "CONNECT ", 8) == 0;
    if (!tunnel) {
        relay_start(w, c, c->head, c->head_len); /* a bare relay: all of it */
        return;
    }
    if (send(c->fd[0], connect_ok, sizeof(connect_ok) - 1, MSG_NOSIGNAL) < 0) {
        conn_close(w, c);
        return;
    }
    size_t used = (size_t)(end + 4 - c->head);
    relay_start(w, c, end + 4, c->head_len - used);
}

/* The port of a CONNECT head's "host:port" target, or 0. */
static uint16_t connect_port(const uint8_t *head, size_t n)
{
    const uint8_t *sp = memchr(head + 8, ' ', n - 8);
    const uint8_t *colon = sp ? memrchr(head + 8, ':', (size_t)(sp - head - 8)) : NULL;
    unsigned long port = 0;

    if (colon == NULL)
        return 0;
    for (const uint8_t *p = colon + 1; p < sp && *p >= '0' && *p <= '9'; p++)
        port = port * 10 + (unsigned long)(*p - '0');
    return port > 0 && port < 65536 ? (uint16_t)port : 0;
}

/* The explicit port's client sent bytes: once the head is whole, connect. */
static void on_head(struct worker *w, struct conn *c)
{
    ssize_t n = recv(c->fd[0], c->head + c->head_len, HEAD_MAX - c->head_len, 0);

    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_close(w, c);
        return;
    }
    c->head_len += (size_t)n;
    if (memmem(c->head, c->head_len, "\r\n\r\n", 4) == NULL) {
        if (c->head_len == HEAD_MAX)
            conn_close(w, c);
        return;
    }
    bool tunnel = c->head_len > 8 && memcmp(c->head, "CONNECT ", 8) == 0;
    uint16_t port = tunnel ? connect_port(c->head, c->head_len) : cfg.http_port;
    if (port == 0 || !connect_upstream(w, c, port))
        conn_close(w, c);
}

static void on_accept(struct worker *w, int port)
{
    const struct port *p = &cfg.ports[port];

    for (;;) {
        int fd = accept4(w->lfd[port], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1)
            return; /* EAGAIN, or out of descriptors: the next wakeup tries again */
        struct conn *c = calloc(1, sizeof(*c));
        if (c == NULL)
            abort();
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd[0] = fd;
        c->fd[1] = -1;
        for (int s = 0; s < 2; s++) {
            c->h[s] = (struct handle){c, s};
            c->d[s].pipe[0] = c->d[s].pipe[1] = -1;
        }
        c->explicit_proxy = p->explicit_proxy;
        c->mask[0] = p->explicit_proxy ? EPOLLIN : 0;
        struct epoll_event ev = {.events = c->mask[0], .data.ptr = &c->h[0]};
        epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev);
        if (p->explicit_proxy) {
            c->phase = P_HEAD;
            c->head = malloc(HEAD_MAX);
            if (c->head == NULL)
                abort();
        } else if (!connect_upstream(w, c, p->upstream_port)) {
            conn_close(w, c);
        }
    }
}

static void on_event(struct worker *w, struct handle *h, uint32_t ev)
{
    struct conn *c = h->c;

    if (c == NULL) {
        on_accept(w, h->side);
        return;
    }
    if (c->closed)
        return; /* closed by an earlier event of this batch */
    switch (c->phase) {
    case P_HEAD: on_head(w, c); return;
    case P_CONNECTING:
        if (h->side == 1)
            on_connected(w, c);
        else if (ev & (EPOLLERR | EPOLLHUP))
            conn_close(w, c);
        return;
    case P_RELAY: relay_event(w, c, h->side, ev); return;
    }
}

static int listen_on(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

    if (fd == -1)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1 || listen(fd, 4096) == -1) {
        close(fd);
        return -1;
    }
    return fd;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event evs[EVENTS_MAX];

    for (;;) {
        int n = epoll_wait(w->ep, evs, EVENTS_MAX, -1);
        for (int i = 0; i < n; i++)
            on_event(w, evs[i].data.ptr, evs[i].events);
        free_gone(w);
    }
    return NULL;
}

/* A worker's epoll set with its own socket on every port; NULL on failure. */
static struct worker *worker_new(void)
{
    struct worker *w = calloc(1, sizeof(*w));

    if (w == NULL || (w->ep = epoll_create1(EPOLL_CLOEXEC)) == -1)
        return NULL;
    for (int i = 0; i < cfg.n_ports; i++) {
        w->lfd[i] = listen_on(&cfg.ports[i].addr);
        if (w->lfd[i] == -1) {
            perror("null-proxy: listen");
            return NULL;
        }
        w->lh[i] = (struct handle){NULL, i};
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->lh[i]};
        epoll_ctl(w->ep, EPOLL_CTL_ADD, w->lfd[i], &ev);
    }
    return w;
}

/* "ADDR:PORT" into sa; false when it is not one. */
static bool parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    char *end;

    if (colon == NULL || (size_t)(colon - s) >= sizeof(host))
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    long port = strtol(colon + 1, &end, 10);
    *sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return *end == '\0' && port > 0 && port < 65536 && inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

/* --transparent ADDR:PORT=UPORT, or --explicit ADDR:PORT, as the next port. */
static bool add_port(const char *spec, bool explicit_proxy)
{
    char buf[96];
    struct port *p = &cfg.ports[cfg.n_ports];

    if (cfg.n_ports == PORTS_MAX || strlen(spec) >= sizeof(buf))
        return false;
    strcpy(buf, spec);
    char *eq = strchr(buf, '=');
    if (explicit_proxy != (eq == NULL))
        return false;
    if (eq != NULL) {
        *eq = '\0';
        long up = strtol(eq + 1, NULL, 10);
        if (up <= 0 || up >= 65536)
            return false;
        p->upstream_port = (uint16_t)up;
    }
    p->explicit_proxy = explicit_proxy;
    if (!parse_addr(buf, &p->addr))
        return false;
    cfg.n_ports++;
    return true;
}

static void usage(void)
{
    fprintf(stderr, "usage: null-proxy --upstream ADDR [--explicit ADDR:PORT] [--http-port P]\n"
                    "                  [--transparent ADDR:PORT=UPORT]... [--workers N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"upstream", required_argument, NULL, 'u'},  {"explicit", required_argument, NULL, 'e'},
        {"http-port", required_argument, NULL, 'h'}, {"transparent", required_argument, NULL, 't'},
        {"workers", required_argument, NULL, 'w'},   {NULL, 0, NULL, 0}};
    bool have_upstream = false;
    int o;

    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'u': have_upstream = inet_pton(AF_INET, optarg, &cfg.upstream) == 1; break;
        case 'e':
        case 't':
            if (!add_port(optarg, o == 'e')) {
                fprintf(stderr, "null-proxy: bad port spec '%s'\n", optarg);
                usage();
            }
            break;
        case 'h': cfg.http_port = (uint16_t)atoi(optarg); break;
        case 'w': cfg.workers = atoi(optarg); break;
        default: usage();
        }
    }
    if (!have_upstream || cfg.n_ports == 0 || cfg.workers < 1 || cfg.http_port == 0)
        usage();
    signal(SIGPIPE, SIG_IGN);
    struct worker *w[64];
    if (cfg.workers > 64)
        cfg.workers = 64;
    for (int i = 0; i < cfg.workers; i++)
        if ((w[i] = worker_new()) == NULL)
            return 1;
    for (int i = 1; i < cfg.workers; i++) {
        pthread_t t;
        pthread_create(&t, NULL, worker_main, w[i]);
    }
    worker_main(w[0]); /* the main thread is the first worker */
    return 0;
}
