/*
 * egress_sink.c - the upstream end of egress-load's workloads.
 *
 *   egress-sink --listen ADDR:PORT [--tls-like | --http | --bulk]
 *               [--reply-bytes K] [--threads T]
 *   egress-sink --listen ADDR:PORT --https --cert PEM --key PEM
 *               --secret VALUE [--threads T]
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
 *   --https               real TLS (OpenSSL; --cert is the chain, leaf first,
 *                         --key its key), then HTTP/1.1 keep-alive: `GET
 *                         /bytes/N` is answered 200 with N bytes, but only
 *                         when its x-api-key field is exactly --secret; a
 *                         request without it or with another value is
 *                         answered 403 and counted (`mismatch`, `missing`).
 *                         That is how the intercept workloads check that the
 *                         proxy put the real secret in.  `GET /ws` with
 *                         `Upgrade: websocket` (and the secret, checked the
 *                         same way) is a WebSocket opening handshake (RFC
 *                         6455 section 4.2): answered 101 with its
 *                         Sec-WebSocket-Accept, then every frame the client
 *                         sends is unmasked and sent back unmasked with the
 *                         same opcode and FIN bit (a ping gets a pong, a pong
 *                         nothing, a close its echo and then the end).  A
 *                         frame over WS_MSG_MAX, unmasked, or breaking the
 *                         framing ends the connection and is counted
 *                         (`ws_bad`); text is not checked for UTF-8.
 *   --secret-file PATH    (with --https, in place of --secret) the secret is
 *                         the first line of PATH, read again when the file
 *                         changes (at most every KEY_CHECK_MS); the one it
 *                         replaced stays good too, as a rotated access token
 *                         does at a real API until it lapses.  For a login
 *                         whose token egressd rotates (bench/oauth.sh).
 *                         SIGUSR1 (and the end, on SIGTERM or SIGINT) prints
 *                         the counts as one JSON line: handshakes, resumed
 *                         ones, requests, mismatches, missing, bytes of
 *                         bodies, WebSocket upgrades, frames and payload
 *                         bytes echoed, broken ones.
 *
 * It must never be what a benchmark measures: every reply is built once at
 * start and written straight from that buffer, reads go into one scratch
 * buffer per thread and are only counted, and each thread has its own
 * listening socket (SO_REUSEPORT) so the kernel spreads accepts.  The only
 * bytes looked at are the 5-byte record header and HTTP request heads.
 * --https cannot avoid its cryptography: there the sink costs what any TLS
 * origin costs (one handshake per connection, or a resumption, and the
 * records' encryption), the same for every proxy measured through it; its
 * WebSocket echo also unmasks every payload byte (eight at a time) and
 * writes each echo from where its frame was read.
 */
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"
#include "bench_ws.h"

#define SCRATCH_BYTES (256 * 1024) /* one read() at most; also the bulk pattern */
#define REPLY_MAX     (64u << 20)  /* largest --reply-bytes for tls-like and http */
#define MAX_THREADS   64
#define TLS_RECORD    16384 /* TLSPlaintext.length limit (RFC 8446 §5.1) */
#define HEAD_MAX      8192  /* --https: longest request head */
#define BODY_MAX      (1ull << 40)
#define WS_MSG_MAX    (1u << 20)                /* --https: the longest WebSocket frame echoed */
#define WS_IN_START   (64 * 1024 + WS_HEAD_MAX) /* a connection's first frame buffer */

enum mode { M_TLS, M_HTTP, M_BULK, M_HTTPS };

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

/* --https: what every thread counts (relaxed atomics: read only for the
 * report). */
static struct {
    atomic_ullong handshakes, resumed, requests, mismatch, missing, not_found, body_bytes;
    atomic_ullong ws_upgrades, ws_frames, ws_bytes, ws_bad;
} stats;

static struct {
    enum mode mode;
    uint64_t reply_bytes;
    const uint8_t *reply; /* the whole answer (tls-like, http) or the bulk pattern */
    size_t reply_len;     /* its length; bulk cycles through it */
    struct sockaddr_storage addr;
    int addr_len;
    int threads;
    const char *cert, *key, *secret; /* --https */
    const char *secret_file;         /* --https, in place of --secret */
    SSL_CTX *tls;
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

/* ---------------------------------------------------------------------------
 * --https: TLS, then GET /bytes/N with the secret checked
 * ------------------------------------------------------------------------- */

struct https_conn {
    struct sink_thread *t;
    int fd;
    SSL *ssl;
    struct event rev, wev;
    bool reading, writing; /* rev, wev added */
    bool handshaken;
    bool close_after;            /* the answer is a refusal: close once it is out */
    bool upgrade_after;          /* the answer is a 101: frames follow once it is out */
    struct ws_echo *ws;          /* after the 101: the frames being echoed */
    size_t head_len;             /* bytes of head[] in: request heads, pipelined ones too */
    uint64_t body_left;          /* body bytes still to write after `first` */
    uint64_t body_pos;           /* where in the pattern the body goes on */
    size_t first_len, first_off; /* the answer's head and first body bytes */
    uint8_t first[TLS_RECORD];   /* one record: head and body together */
    char head[HEAD_MAX];
};

/* After a 101: the client's frames, each unmasked and echoed where it
 * lies (the echo's header, shorter by the mask at least, is written just
 * before its payload). */
struct ws_echo {
    uint8_t *in;            /* the client's bytes */
    size_t cap, start, len; /* in[]'s size; the current frame's first byte; bytes in */
    size_t next;            /* where the frame after the one being echoed begins */
    size_t need;            /* the current frame's whole size, once its header is in */
    const uint8_t *out;     /* the echo being written, inside in[] */
    size_t out_left;
    bool closing; /* the echo is a close: the connection ends after it */
};

static void ws_free(struct ws_echo *e)
{
    if (e != NULL)
        free(e->in);
    free(e);
}

static void https_free(struct https_conn *c)
{
    event_del(&c->rev);
    event_del(&c->wev);
    ws_free(c->ws);
    SSL_free(c->ssl);
    close(c->fd);
    free(c);
}

/* Wait for what OpenSSL asked for: readable, or writable. */
static void https_watch(struct https_conn *c, bool rd, bool wr)
{
    if (rd != c->reading)
        rd ? event_add(&c->rev, NULL) : event_del(&c->rev);
    if (wr != c->writing)
        wr ? event_add(&c->wev, NULL) : event_del(&c->wev);
    c->reading = rd, c->writing = wr;
}

/* After an SSL call returned r <= 0: wait (0) or give up (-1: a closed or
 * broken connection, nothing to report about it). */
static int https_wait(struct https_conn *c, int r)
{
    int e = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ)
        return https_watch(c, true, false), 0;
    if (e == SSL_ERROR_WANT_WRITE)
        return https_watch(c, false, true), 0;
    return -1;
}

/* The value of field `name` in request head h (len bytes, its request line
 * first), or NULL; *vlen its length; *count how many such fields there are. */
static const char *https_field(const char *h, size_t len, const char *name, size_t *vlen,
                               int *count)
{
    size_t nl = strlen(name);
    const char *end = h + len, *got = NULL;
    *count = 0;
    for (const char *l = memchr(h, '\n', len); l != NULL && l + 1 < end;
         l = memchr(l + 1, '\n', (size_t)(end - l - 1))) {
        const char *f = l + 1;
        if ((size_t)(end - f) <= nl || f[nl] != ':' || strncasecmp(f, name, nl) != 0)
            continue;
        const char *v = f + nl + 1, *e = memchr(v, '\r', (size_t)(end - v));
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        if (e == NULL)
            e = end;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        *vlen = (size_t)(e - v);
        got = v;
        ++*count;
    }
    return got;
}

/* Whether the field `name` of a request head (its last one) lists `token`
 * (comma-separated, case-insensitive). */
static bool https_lists(const char *h, size_t len, const char *name, const char *token)
{
    size_t vl = 0;
    int count;
    const char *v = https_field(h, len, name, &vl, &count);

    return v != NULL && ws_value_lists(v, vl, token);
}

#define KEY_CHECK_MS 20  /* --secret-file: how often its file is looked at */
#define KEY_MAX      512 /* --secret-file: the longest secret */

/* --secret-file's secrets: the current one and the one it replaced. */
static struct {
    pthread_mutex_t mu;
    char cur[KEY_MAX], prev[KEY_MAX];
    struct timespec mtime;
    ino_t ino;
    int64_t checked_ms;
} keys = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read --secret-file again if it changed (lock held). */
static void keys_look(void)
{
    struct stat st;
    char line[KEY_MAX];
    FILE *f;

    if (mono_ms() - keys.checked_ms < KEY_CHECK_MS)
        return;
    keys.checked_ms = mono_ms();
    if (stat(cfg.secret_file, &st) == -1 ||
        (st.st_ino == keys.ino && st.st_mtim.tv_sec == keys.mtime.tv_sec &&
         st.st_mtim.tv_nsec == keys.mtime.tv_nsec) ||
        (f = fopen(cfg.secret_file, "r")) == NULL)
        return;
    if (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(line, keys.cur) != 0) {
            memcpy(keys.prev, keys.cur, sizeof keys.prev);
            snprintf(keys.cur, sizeof keys.cur, "%s", line);
        }
        keys.ino = st.st_ino;
        keys.mtime = st.st_mtim;
    }
    fclose(f);
}

/* Whether v[0..vl) is one of --secret-file's secrets (lock held). */
static bool key_is(const char *v, size_t vl)
{
    return (keys.cur[0] != '\0' && vl == strlen(keys.cur) && memcmp(v, keys.cur, vl) == 0) ||
           (keys.prev[0] != '\0' && vl == strlen(keys.prev) && memcmp(v, keys.prev, vl) == 0);
}

/* Whether v[0..vl) is the secret: --secret, or one of --secret-file's. */
static bool key_ok(const char *v, size_t vl)
{
    bool ok;

    if (cfg.secret_file == NULL)
        return vl == strlen(cfg.secret) && memcmp(v, cfg.secret, vl) == 0;
    pthread_mutex_lock(&keys.mu);
    keys_look();
    ok = key_is(v, vl);
    if (!ok) { /* (a token issued since the last look: look now) */
        keys.checked_ms = 0;
        keys_look();
        ok = key_is(v, vl);
    }
    pthread_mutex_unlock(&keys.mu);
    return ok;
}

/* NULL when the request head (hl bytes) carries exactly one x-api-key and
 * it is the secret; else why not, counted. */
static const char *https_key_refusal(const char *head, size_t hl)
{
    size_t vl = 0;
    int count;
    const char *v = https_field(head, hl, "x-api-key", &vl, &count);

    if (v == NULL) {
        atomic_fetch_add_explicit(&stats.missing, 1, memory_order_relaxed);
        return "x-api-key missing\n";
    }
    if (count != 1 || !key_ok(v, vl)) {
        atomic_fetch_add_explicit(&stats.mismatch, 1, memory_order_relaxed);
        return "x-api-key mismatch\n";
    }
    return NULL;
}

/* The answer is a refusal: status code, `why` as its body, then the end. */
static void https_refuse(struct https_conn *c, int code, const char *why)
{
    const char *phrase = code == 403   ? "Forbidden"
                         : code == 404 ? "Not Found"
                         : code == 426 ? "Upgrade Required"
                                       : "Bad Request";

    c->first_len = (size_t)snprintf((char *)c->first, sizeof c->first,
                                    "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n%s"
                                    "Connection: close\r\n\r\n%s",
                                    code, phrase, strlen(why),
                                    code == 426 ? "Sec-WebSocket-Version: 13\r\n" : "", why);
    c->body_left = 0;
    c->close_after = true;
}

/* The answer to a WebSocket opening handshake (GET /ws, hl bytes at
 * c->head, the key already checked): 101 with the accept value, or a
 * refusal (400, 426) when the head is not one. */
static void https_ws_answer(struct https_conn *c, size_t hl)
{
    char accept[WS_ACCEPT_LEN + 1];
    size_t kl = 0;
    int count;
    const char *key = https_field(c->head, hl, "sec-websocket-key", &kl, &count);

    if (!https_lists(c->head, hl, "upgrade", "websocket") ||
        !https_lists(c->head, hl, "connection", "upgrade") || key == NULL || count != 1 ||
        kl != WS_KEY_LEN) {
        atomic_fetch_add_explicit(&stats.ws_bad, 1, memory_order_relaxed);
        return https_refuse(c, 400, "not a WebSocket opening handshake\n");
    }
    if (!https_lists(c->head, hl, "sec-websocket-version", "13")) {
        atomic_fetch_add_explicit(&stats.ws_bad, 1, memory_order_relaxed);
        return https_refuse(c, 426, "WebSocket version 13 only\n");
    }
    ws_accept(key, kl, accept);
    c->first_len = (size_t)snprintf((char *)c->first, sizeof c->first,
                                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                    "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                                    accept);
    c->body_left = 0;
    c->upgrade_after = true;
    atomic_fetch_add_explicit(&stats.ws_upgrades, 1, memory_order_relaxed);
}

/* The 200 to GET /bytes/N: its head and the body's first bytes in
 * c->first, the rest from the pattern. */
static void https_bytes_answer(struct https_conn *c, unsigned long long n)
{
    int h = snprintf((char *)c->first, sizeof c->first,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %llu\r\n\r\n",
                     n);
    size_t room = sizeof c->first - (size_t)h, take = n < room ? (size_t)n : room;
    memcpy(c->first + h, cfg.reply, take); /* the pattern's start */
    c->first_len = (size_t)h + take;
    c->body_left = n - take;
    c->body_pos = take;
    atomic_fetch_add_explicit(&stats.body_bytes, n, memory_order_relaxed);
}

/* Set up the answer to one request head (hl bytes at c->head): 200 with
 * the N bytes it asked for, a 101 to a WebSocket, or a refusal. */
static void https_answer(struct https_conn *c, size_t hl)
{
    static const char ws_line[] = "GET /ws HTTP/1.1\r\n";
    unsigned long long n = 0;
    int off = 0;
    bool ws = strncmp(c->head, ws_line, sizeof ws_line - 1) == 0;
    const char *why;

    atomic_fetch_add_explicit(&stats.requests, 1, memory_order_relaxed);
    if (!ws && (sscanf(c->head, "GET /bytes/%llu HTTP/1.1\r%n", &n, &off) != 1 || off == 0 ||
                n > BODY_MAX)) {
        atomic_fetch_add_explicit(&stats.not_found, 1, memory_order_relaxed);
        https_refuse(c, 404, "only GET /bytes/N and GET /ws here\n");
    } else if ((why = https_key_refusal(c->head, hl)) != NULL) {
        https_refuse(c, 403, why);
    } else if (ws) {
        https_ws_answer(c, hl);
    } else {
        https_bytes_answer(c, n);
    }
    c->first_off = 0;
    memmove(c->head, c->head + hl, c->head_len - hl); /* a pipelined request stays */
    c->head_len -= hl;
}

/* Write what the connection takes of the current answer.  1: all out; 0:
 * waiting; -1: gone. */
static int https_write(struct https_conn *c)
{
    while (c->first_off < c->first_len || c->body_left > 0) {
        const uint8_t *p;
        size_t n;
        if (c->first_off < c->first_len) {
            p = c->first + c->first_off, n = c->first_len - c->first_off;
        } else {
            size_t at = (size_t)(c->body_pos % cfg.reply_len);
            p = cfg.reply + at, n = cfg.reply_len - at;
            if (n > c->body_left)
                n = (size_t)c->body_left;
        }
        int r = SSL_write(c->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
        if (r <= 0)
            return https_wait(c, r) == 0 ? 0 : -1;
        if (c->first_off < c->first_len)
            c->first_off += (size_t)r;
        else
            c->body_left -= (uint64_t)r, c->body_pos += (uint64_t)r;
    }
    return 1;
}

/* After the 101: the echo state, with what came behind the upgrade
 * request (c->head) as its first bytes. */
static void ws_start(struct https_conn *c)
{
    struct ws_echo *e = calloc(1, sizeof *e);
    if (e == NULL || (e->in = malloc(WS_IN_START)) == NULL)
        abort();
    e->cap = WS_IN_START;
    e->need = WS_HEAD_MAX;
    memcpy(e->in, c->head, c->head_len);
    e->len = c->head_len;
    c->head_len = 0;
    c->upgrade_after = false;
    c->ws = e;
}

/* Take the frame at e->start when it is whole: unmask it and set up its
 * echo (a ping's pong; a pong is only passed over).  1: taken, 0: more
 * bytes needed (e->need says how many from e->start), -1: a frame this
 * sink does not take (unmasked, over WS_MSG_MAX, broken framing). */
static int ws_take(struct ws_echo *e)
{
    struct ws_head h;
    uint8_t *f = e->in + e->start;
    size_t avail = e->len - e->start;
    int r = ws_head_read(f, avail, &h);

    if (r <= 0) {
        e->need = WS_HEAD_MAX;
        return r;
    }
    if (!h.masked || h.len > WS_MSG_MAX)
        return -1;
    e->need = h.size + (size_t)h.len;
    if (avail < e->need)
        return 0;
    uint8_t *payload = f + h.size;
    ws_mask(payload, (size_t)h.len, h.mask);
    e->next = e->start + e->need;
    if (h.opcode == WS_PONG)
        return 1;
    size_t hs = ws_head_size(false, h.len); /* at most h.size - WS_MASK_BYTES */
    ws_head_write(payload - hs, h.fin, h.opcode == WS_PING ? WS_PONG : h.opcode, NULL, h.len);
    e->out = payload - hs;
    e->out_left = hs + (size_t)h.len;
    e->closing = h.opcode == WS_CLOSE;
    if (h.opcode < WS_CLOSE) {
        atomic_fetch_add_explicit(&stats.ws_frames, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&stats.ws_bytes, h.len, memory_order_relaxed);
    }
    return 1;
}

/* Room in e->in to read the rest of the current frame into: the frame
 * moved to the front, the buffer grown to e->need (at most a frame of
 * WS_MSG_MAX). */
static void ws_room(struct ws_echo *e)
{
    if (e->cap - e->start >= e->need && e->len < e->cap)
        return;
    memmove(e->in, e->in + e->start, e->len - e->start);
    e->len -= e->start;
    e->start = e->next = 0;
    if (e->cap < e->need) {
        e->in = realloc(e->in, e->need);
        if (e->in == NULL)
            abort();
        e->cap = e->need;
    }
}

/* Echo frames as far as the connection lets: write the echo being
 * written, take the next whole frame, read when there is none.  A frame
 * is read only once the echo before it is out: the client, which reads
 * while it writes, is what keeps both ends moving.  -1: closed. */
static int ws_step(struct https_conn *c)
{
    struct ws_echo *e = c->ws;
    for (;;) {
        if (e->out_left > 0) {
            int r = SSL_write(c->ssl, e->out, (int)e->out_left);
            if (r <= 0)
                return https_wait(c, r);
            e->out += r, e->out_left -= (size_t)r;
            continue;
        }
        if (e->closing) {
            SSL_shutdown(c->ssl); /* our close_notify; the client's is not waited for */
            return -1;
        }
        e->start = e->next;
        if (e->start == e->len)
            e->start = e->next = e->len = 0;
        int t = ws_take(e);
        if (t < 0) {
            atomic_fetch_add_explicit(&stats.ws_bad, 1, memory_order_relaxed);
            return -1;
        }
        if (t > 0)
            continue;
        ws_room(e);
        int r = SSL_read(c->ssl, e->in + e->len, (int)(e->cap - e->len));
        if (r <= 0)
            return https_wait(c, r);
        e->len += (size_t)r;
    }
}

/* Drive the connection as far as it goes: handshake, then answer every
 * whole request head that has come.  -1: closed. */
static int https_step(struct https_conn *c)
{
    if (!c->handshaken) {
        int r = SSL_do_handshake(c->ssl);
        if (r != 1)
            return https_wait(c, r);
        c->handshaken = true;
        atomic_fetch_add_explicit(&stats.handshakes, 1, memory_order_relaxed);
        if (SSL_session_reused(c->ssl))
            atomic_fetch_add_explicit(&stats.resumed, 1, memory_order_relaxed);
    }
    if (c->ws != NULL)
        return ws_step(c);
    for (;;) {
        int w = https_write(c);
        if (w <= 0)
            return w;
        if (c->close_after)
            return -1;
        if (c->upgrade_after) {
            ws_start(c);
            return ws_step(c);
        }
        const char *e = c->head_len >= 4 ? memmem(c->head, c->head_len, "\r\n\r\n", 4) : NULL;
        if (e != NULL) {
            https_answer(c, (size_t)(e + 4 - c->head));
            continue;
        }
        if (c->head_len == sizeof c->head - 1)
            return -1; /* a head over HEAD_MAX: not one of egress-load's */
        int r = SSL_read(c->ssl, c->head + c->head_len, (int)(sizeof c->head - 1 - c->head_len));
        if (r <= 0)
            return https_wait(c, r);
        c->head_len += (size_t)r;
        c->head[c->head_len] = 0;
    }
}

static void on_https(evutil_socket_t fd, short what, void *arg)
{
    struct https_conn *c = arg;
    (void)fd, (void)what;
    if (https_step(c) == -1)
        https_free(c);
}

static void https_accept(struct sink_thread *t, int fd)
{
    struct https_conn *c = calloc(1, sizeof *c);
    if (c == NULL || (c->ssl = SSL_new(cfg.tls)) == NULL || !SSL_set_fd(c->ssl, fd)) {
        if (c != NULL)
            SSL_free(c->ssl);
        free(c);
        close(fd);
        return;
    }
    c->t = t;
    c->fd = fd;
    SSL_set_accept_state(c->ssl);
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, on_https, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, on_https, c);
    https_watch(c, true, false);
}

/* ALPN: http/1.1 when the client offers it, else none. */
static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;
    (void)ssl, (void)arg;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof h11 - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* The server context of --https: --cert (chain) and --key, TLS 1.2 and up,
 * ALPN http/1.1 when offered, resumption by tickets (OpenSSL's default) as
 * an origin on the Internet allows it. */
static int https_setup(void)
{
    cfg.tls = SSL_CTX_new(TLS_server_method());
    if (cfg.tls == NULL || !SSL_CTX_use_certificate_chain_file(cfg.tls, cfg.cert) ||
        !SSL_CTX_use_PrivateKey_file(cfg.tls, cfg.key, SSL_FILETYPE_PEM) ||
        !SSL_CTX_check_private_key(cfg.tls)) {
        char buf[256];
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        fprintf(stderr, "egress-sink: --cert %s --key %s: %s\n", cfg.cert, cfg.key, buf);
        return -1;
    }
    SSL_CTX_set_min_proto_version(cfg.tls, TLS1_2_VERSION);
    SSL_CTX_set_mode(cfg.tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_alpn_select_cb(cfg.tls, on_alpn, NULL);
    return 0;
}

/* SIGUSR1, SIGTERM, SIGINT (--https): the counts as one JSON line; the
 * last two end the sink too. */
static void on_report(evutil_socket_t sig, short what, void *arg)
{
    (void)what, (void)arg;
#define S(f) (unsigned long long)atomic_load_explicit(&stats.f, memory_order_relaxed)
    printf("{\"handshakes\":%llu,\"resumed\":%llu,\"requests\":%llu,\"mismatch\":%llu,"
           "\"missing\":%llu,\"not_found\":%llu,\"body_bytes\":%llu,\"ws_upgrades\":%llu,"
           "\"ws_frames\":%llu,\"ws_bytes\":%llu,\"ws_bad\":%llu}\n",
           S(handshakes), S(resumed), S(requests), S(mismatch), S(missing), S(not_found),
           S(body_bytes), S(ws_upgrades), S(ws_frames), S(ws_bytes), S(ws_bad));
#undef S
    fflush(stdout);
    if (sig != SIGUSR1)
        _exit(0);
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct sink_thread *t = arg;
    int one = 1;
    (void)lis, (void)sa, (void)salen;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (cfg.mode == M_HTTPS)
        return https_accept(t, fd);
    struct sink_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return;
    }
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
    if (cfg.mode == M_BULK || cfg.mode == M_HTTPS) {
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
                    "                   [--reply-bytes K] [--threads T]\n"
                    "       egress-sink --listen ADDR:PORT --https --cert PEM --key PEM\n"
                    "                   (--secret VALUE | --secret-file PATH) [--threads T]\n");
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
        {"https", no_argument, NULL, 'S'},
        {"cert", required_argument, NULL, 'C'},
        {"key", required_argument, NULL, 'K'},
        {"secret", required_argument, NULL, 'x'},
        {"secret-file", required_argument, NULL, 'F'},
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
        case 'S': cfg.mode = M_HTTPS; break;
        case 'C': cfg.cert = optarg; break;
        case 'K': cfg.key = optarg; break;
        case 'x': cfg.secret = optarg; break;
        case 'F': cfg.secret_file = optarg; break;
        default: usage();
        }
    }
    if (!have_addr || optind != argc)
        usage();
    if ((cfg.mode == M_HTTPS) !=
        (cfg.cert != NULL && cfg.key != NULL && (cfg.secret != NULL) != (cfg.secret_file != NULL)))
        fprintf(stderr, "egress-sink: --https goes with --cert, --key and one of --secret and "
                        "--secret-file, and they with it\n"),
            exit(2);
}

int main(int argc, char **argv)
{
    static struct sink_thread threads[MAX_THREADS];

    parse_args(argc, argv);
    bench_raise_nofile();
    signal(SIGPIPE, SIG_IGN);
    if (build_reply() == -1 || (cfg.mode == M_HTTPS && https_setup() == -1))
        return 1;
    for (int i = 0; i < cfg.threads; i++)
        if (thread_setup(&threads[i]) == -1)
            return 1;
    if (cfg.mode == M_HTTPS) {
        static const int sigs[] = {SIGUSR1, SIGTERM, SIGINT};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            event_add(evsignal_new(threads[0].base, sigs[i], on_report, NULL), NULL);
    }
    for (int i = 1; i < cfg.threads; i++)
        if (pthread_create(&threads[i].tid, NULL, thread_main, &threads[i]) != 0)
            return perror("egress-sink: pthread_create"), 1;
    thread_main(&threads[0]);
    return 0;
}
