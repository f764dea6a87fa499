/*
 * egress_load.c - load generator for egressd and peer proxies.
 *
 *   egress-load --mode connect|sni|http|bulk|deny|idle
 *               (--proxy ADDR:PORT | --direct ADDR:PORT) --target HOST:PORT
 *               [--conns C] [--total N | --duration S] [--threads T]
 *               [--hello FILE] [--reply-bytes K] [--bytes S] [--timeout S]
 *               [--ramp R] [--label TEXT] [--transparent]
 *   egress-load --mode intercept|interceptbulk|interceptidle --ca-file PEM
 *               [--api-key VALUE] [--resume] (and the options above)
 *   egress-load --mode ws --ca-file PEM [--api-key VALUE] [--msg-bytes M]
 *               [--window W] (and the options above)
 *   egress-load --selftest [DIR]
 *
 * No TLS stack in the first six modes: the client's side of a TLS
 * connection is a real ClientHello captured from a real client (--hello),
 * its server_name rewritten to HOST, and the server's side is egress-sink,
 * which answers K bytes framed as handshake records.  That is all a proxy
 * that decides on the ClientHello sees of a handshake, and it keeps the
 * generator cheap.  The intercept modes are for a proxy that terminates
 * TLS: there the client is real TLS (OpenSSL, nonblocking in the same
 * event loop) against egress-sink --https.
 *
 * Modes (each of C slots runs one exchange after another):
 *   connect  CONNECT HOST:PORT, read the 200, send the hello, read K bytes,
 *            close.  Latency: connect() start to the K-th byte.
 *   sni      the same without CONNECT: the hello straight to a transparent
 *            TLS port (--proxy names that port).
 *   http     keep-alive GET http://HOST:PORT/ (origin form with --direct),
 *            one request at a time per connection; each request is a sample,
 *            timed from its write to the end of its body.
 *   bulk     CONNECT + hello, then S bytes each way at once (--bytes; the
 *            upload framed as TLS application_data records);
 *            reports throughput.  Latency: the whole tunnel.
 *   deny     CONNECT to a target the policy forbids: a 403 is a success, a
 *            200 a let_through error, any other answer a bad_status error.
 *            With --transparent: the hello naming that target straight to the
 *            TLS port; the connection ending (EOF, reset) or a TLS alert
 *            record is a success, a handshake record (the origin answering)
 *            a let_through error.
 *   idle     open C tunnels (CONNECT + hello + the K-byte answer; at most
 *            --ramp opening at once), print "all up: ..." and hold them until
 *            SIGINT/SIGTERM or --duration.  Latency: each tunnel's opening.
 *   intercept      CONNECT HOST:PORT, read the 200, a TLS handshake (SNI
 *            HOST, the certificate verified against --ca-file and for
 *            HOST, ALPN http/1.1), one `GET /bytes/K` with `x-api-key:
 *            --api-key`, the whole K-byte body read, close_notify, close.
 *            Latency: connect() start to the body's last byte.
 *   interceptbulk  the same with S bytes of body (--bytes); throughput.
 *   interceptidle  open C such connections (one request each, --ramp at a
 *            time), print "all up: ..." and hold them like idle.
 *            --resume keeps the last TLS session each thread was given
 *            (NewSessionTicket) and offers it on its next connection; the
 *            report counts handshakes, resumed ones, and the distinct
 *            serial numbers of the leaf certificates the full handshakes
 *            were shown (a proxy that mints a leaf per connection shows
 *            one per handshake; one that caches them, one per cache).
 *   ws       a WebSocket inside TLS: CONNECT and the handshake as
 *            intercept, then `GET /ws` with `Upgrade: websocket`, a fresh
 *            Sec-WebSocket-Key and `x-api-key: --api-key`; the 101's
 *            Sec-WebSocket-Accept must be that key's.  Then masked binary
 *            messages of M bytes (--msg-bytes, default 1024), at most W
 *            unanswered at a time (--window, default 8), each echo read
 *            whole and compared byte for byte with the message it answers
 *            (its length, opcode and every payload byte: a lost, doubled
 *            or reordered echo differs too) or an `echo` error.  Once no
 *            work is left and every echo is in: a close frame, the
 *            server's close, close_notify, close.  --total and --duration
 *            count messages; each message is a sample, from its handing to
 *            TLS to its echo's last byte.  Throughput: MiB of messages
 *            echoed per second (one way: each byte also came back).
 *   --direct runs the same exchanges straight to the sink (no CONNECT).
 *   --transparent: --proxy is a transparent TLS port (SNI proxies): bulk,
 *            deny and idle send the hello first instead of a CONNECT; sni is
 *            connect with --transparent.
 *
 * --total N counts exchanges (connections, or requests for http) including
 * the failed ones; --duration S starts new ones for S seconds and lets those
 * in flight finish.  Every sample is kept (4 bytes each) and sorted at the
 * end, so the percentiles are exact.  Output: one JSON line, then one line
 * for people.  Errors by kind: connect (connect() failed, e.g. no source
 * port left), refused, timeout (no progress for --timeout), bad_status (an
 * answer other than the expected one, or a malformed one), short_read (EOF
 * before the whole answer), reset, dropped (idle: a held tunnel closed),
 * let_through (deny: the proxy let the forbidden target through), tls (a
 * handshake that failed: the certificate did not verify, an alert), echo
 * (ws: an echo that is not the message sent, or a frame that breaks the
 * framing).  A
 * keep-alive connection the proxy closes after a response, before a byte of
 * the next one, is not an error: the request goes again on a new connection
 * (as curl does) and is counted in reconnects.  The JSON
 * also holds the generator's own CPU time (cpu_s), so a run can show that
 * the generator was not the bottleneck.
 *
 * --selftest checks the server_name rewriting against sni/'s parser on every
 * capture in DIR ($CLIENTHELLO_DIR, else tests/data/clienthello from the top
 * of the tree) and prints TAP; that check is the only reason this program
 * links sni.
 */
#include "sni.h"

#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/util.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"
#include "bench_ws.h"

#define HELLO_MAX     (SNI_RECORD_MAX + 5) /* one record, its header included */
#define HOST_MAX      253
#define HEAD_MAX      4096         /* longest response head read */
#define SCRATCH_BYTES (256 * 1024) /* one recv() at most; also the bulk send buffer */
#define MAX_THREADS   64
#define TICK_MS       20 /* timeouts, back-off, --duration and signals */
#define BACKOFF_MS    20 /* pause of a slot after an error, so refusals do not spin */
#define LEAVES_MAX    64 /* distinct leaf serials kept per thread */
#define SERIAL_MAX    64 /* a serial as hex: RFC 5280 caps it at 20 octets */

#define WS_MSG_MAX    (1u << 20) /* ws: the longest message (egress-sink's limit) */
#define WS_MSG_BYTES  1024       /* ws: --msg-bytes by default */
#define WS_WINDOW     8          /* ws: --window by default */
#define WS_WINDOW_MAX 64

/* ---------------------------------------------------------------------------
 * ClientHello rewriting
 * ------------------------------------------------------------------------- */

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, size_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

/*
 * Give a captured ClientHello a new server_name.  in: exactly one TLS
 * handshake record (RFC 8446 §5.1) carrying one whole ClientHello (§4.1.2),
 * as the captures hold.  host: 1..253 bytes, written as is.  The
 * server_name extension (RFC 6066 §3) is replaced where it stands, or put
 * first when there is none; every other byte is kept, and the three lengths
 * that contain it (extensions block, handshake message, record) are
 * recomputed.  A pre_shared_key binder no longer matches, which no proxy
 * checks.  Returns the new length (at most HELLO_MAX) written to out, or 0
 * with err filled ("offset N: what was expected").
 */
static size_t hello_set_sni(const uint8_t *in, size_t len, const char *host, uint8_t *out,
                            char *err, size_t errlen)
{
    size_t hl = strlen(host);
#define BAD(...) return snprintf(err, errlen, __VA_ARGS__), (size_t)0
    if (hl == 0 || hl > HOST_MAX)
        BAD("host name must be 1..%d bytes, not %zu", HOST_MAX, hl);
    if (len < 5 + 4 + 2 + 32 + 1 || in[0] != 0x16 || in[1] != 3)
        BAD("offset 0: a TLS handshake record header");
    if (5 + (size_t)be16(in + 3) != len)
        BAD("offset 3: record length %u for %zu bytes after the header (one record only)",
            be16(in + 3), len - 5);
    if (in[5] != 1 || ((size_t)in[6] << 16 | (size_t)be16(in + 7)) != len - 9)
        BAD("offset 5: a ClientHello filling the record");
    size_t p = 9 + 2 + 32;  /* legacy_version, random */
    p += 1 + (size_t)in[p]; /* legacy_session_id */
    if (p + 2 > len)
        BAD("offset %zu: cipher_suites", p);
    p += 2 + (size_t)be16(in + p); /* cipher_suites */
    if (p + 1 > len)
        BAD("offset %zu: compression_methods", p);
    p += 1 + (size_t)in[p]; /* legacy_compression_methods */
    if (p > len || (p < len && p + 2 > len))
        BAD("offset %zu: the extensions block", p);
    size_t ext = p + 2; /* first extension, when there is a block */
    if (p < len && ext + be16(in + p) != len)
        BAD("offset %zu: extensions length %u for %zu bytes", p, be16(in + p), len - ext);
    size_t sni_at = ext, sni_len = 0; /* the old extension, whole; none: insert first */
    for (size_t q = ext; q < len;) {
        if (q + 4 > len || q + 4 + be16(in + q + 2) > len)
            BAD("offset %zu: an extension inside the block", q);
        if (be16(in + q) == 0)
            sni_at = q, sni_len = 4 + (size_t)be16(in + q + 2);
        q += 4 + be16(in + q + 2);
    }
    size_t new_len = len - sni_len + 9 + hl + (p == len ? 2 : 0);
    if (new_len > HELLO_MAX)
        BAD("the rewritten record would be %zu bytes, over %d", new_len, HELLO_MAX);
#undef BAD
    /* Everything before the extensions, then the block with the new name. */
    memcpy(out, in, p);
    size_t o = p + 2;
    memcpy(out + o, in + ext, sni_at - ext), o += sni_at - ext;
    put16(out + o, 0), put16(out + o + 2, 5 + hl); /* extension server_name */
    put16(out + o + 4, 3 + hl);                    /* ServerNameList */
    out[o + 6] = 0;                                /* host_name */
    put16(out + o + 7, hl);
    memcpy(out + o + 9, host, hl), o += 9 + hl;
    size_t rest = sni_at + sni_len;
    if (rest < len)
        memcpy(out + o, in + rest, len - rest), o += len - rest;
    put16(out + p, o - p - 2);
    put16(out + 3, o - 5);
    out[6] = (uint8_t)((o - 9) >> 16);
    put16(out + 7, o - 9);
    return o;
}

/* ---------------------------------------------------------------------------
 * Configuration and shared state
 * ------------------------------------------------------------------------- */

enum mode {
    MODE_CONNECT,
    MODE_SNI,
    MODE_HTTP,
    MODE_BULK,
    MODE_DENY,
    MODE_IDLE,
    MODE_INTERCEPT,
    MODE_INTERCEPTBULK,
    MODE_INTERCEPTIDLE,
    MODE_WS,
    MODE_COUNT
};
static const char *const mode_names[] = {"connect",       "sni",  "http",      "bulk",
                                         "deny",          "idle", "intercept", "interceptbulk",
                                         "interceptidle", "ws"};
_Static_assert(sizeof mode_names / sizeof mode_names[0] == MODE_COUNT, "a name per mode");

enum err_kind {
    E_CONNECT,
    E_REFUSED,
    E_TIMEOUT,
    E_BAD_STATUS,
    E_SHORT_READ,
    E_RESET,
    E_DROPPED,
    E_LET_THROUGH,
    E_TLS,
    E_ECHO,
    E_KINDS
};
static const char *const err_names[] = {"connect",    "refused", "timeout", "bad_status",
                                        "short_read", "reset",   "dropped", "let_through",
                                        "tls",        "echo"};
_Static_assert(sizeof err_names / sizeof err_names[0] == E_KINDS, "a name per error kind");

static struct {
    enum mode mode;
    bool direct;           /* --direct: no proxy, no CONNECT */
    bool transparent;      /* --transparent (and sni): the hello first, no CONNECT */
    const char *addr_text; /* --proxy or --direct as given */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    const char *target; /* HOST:PORT */
    char host[HOST_MAX + 1];
    long conns, threads, ramp;
    long long total;      /* 0: --duration decides */
    double duration;      /* seconds; 0: --total decides */
    double timeout;       /* seconds without progress */
    uint64_t reply_bytes; /* K */
    uint64_t bulk_bytes;  /* S */
    const char *hello_path;
    const char *label;
    uint8_t hello[HELLO_MAX];
    size_t hello_len;
    char request[HEAD_MAX]; /* CONNECT or GET, built once */
    size_t request_len;
    const char *ca_file; /* intercept modes */
    const char *api_key;
    bool resume;
    char tls_request[HEAD_MAX]; /* the GET inside TLS (ws: up to its key) */
    size_t tls_request_len;
    SSL_CTX *tls;
    uint64_t msg_bytes; /* ws */
    long window;
} cfg = {.conns = 100,
         .msg_bytes = WS_MSG_BYTES,
         .window = WS_WINDOW,
         .threads = 1,
         .ramp = 256,
         .timeout = 10,
         .reply_bytes = 4096,
         .bulk_bytes = 64 << 20};

static atomic_llong g_remaining; /* exchanges left to start under --total */
static atomic_int g_stop;        /* set by SIGINT/SIGTERM */
static volatile sig_atomic_t g_signal;
static uint64_t g_start_ns, g_end_ns; /* run start; --duration end */
static atomic_long g_idle_up, g_idle_failed;
static atomic_int g_err_shown;
static uint8_t *g_bulk_buf; /* what bulk sends: SCRATCH_BYTES of a pattern */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* True for the modes that open a tunnel with CONNECT before the hello. */
static bool uses_connect(void)
{
    return !cfg.direct && !cfg.transparent && cfg.mode != MODE_HTTP;
}

/* True for the modes that speak real TLS. */
static bool uses_tls(void)
{
    return cfg.mode == MODE_INTERCEPT || cfg.mode == MODE_INTERCEPTBULK ||
           cfg.mode == MODE_INTERCEPTIDLE || cfg.mode == MODE_WS;
}

/* True for the modes that open C connections and hold them. */
static bool holds(void)
{
    return cfg.mode == MODE_IDLE || cfg.mode == MODE_INTERCEPTIDLE;
}

/* True for the modes that report throughput. */
static bool is_bulk(void)
{
    return cfg.mode == MODE_BULK || cfg.mode == MODE_INTERCEPTBULK;
}

/* ---------------------------------------------------------------------------
 * Connections
 * ------------------------------------------------------------------------- */

/* What a slot is waiting for.  Writes are not a phase: a message still being
 * written (c->out_left) goes out beside whatever is being read. */
enum phase {
    PH_FREE,       /* no work: the slot is retired */
    PH_BACKOFF,    /* after an error: start again at restart_at */
    PH_CONNECTING, /* TCP connect in progress */
    PH_HEAD,       /* reading a response head: CONNECT's answer, an HTTP response */
    PH_BODY,       /* reading c->want bytes of response body (or to EOF) */
    PH_REPLY,      /* reading the K-byte answer to the hello */
    PH_BULK,       /* S bytes each way */
    PH_HOLD,       /* idle: tunnel up, held until the end */
    PH_REFUSAL,    /* deny --transparent: hello sent, the proxy must end it */
    PH_TLS_SHAKE,  /* intercept modes: the TLS handshake */
    PH_TLS_ASK,    /* writing the GET inside TLS (c->out) */
    PH_TLS_HEAD,   /* reading its response head inside TLS */
    PH_TLS_BODY,   /* reading c->want bytes of its body; then done, or PH_HOLD */
    PH_WS,         /* ws: messages out, echoes in, then the close (struct ws_conn) */
};

struct worker;

/* A ws connection's part beside its struct conn. */
struct ws_conn {
    uint64_t sent, echoed;           /* messages given to TLS, echoes read whole */
    uint64_t sent_at[WS_WINDOW_MAX]; /* when each message in flight went (ns) */
    bool credit;                     /* the work taken to open the connection: its 1st message */
    bool no_more;                    /* no work left: close once every echo is in */
    bool closing;                    /* our close frame is queued or out */
    bool in_payload;                 /* rx's header is in; rx_pos bytes of its payload */
    struct ws_head rx;               /* the server's frame being read */
    uint64_t rx_pos;
    uint8_t hdr[WS_HEAD_MAX]; /* its header, as it arrives */
    size_t hdr_len;
    char accept[WS_ACCEPT_LEN + 1]; /* the Sec-WebSocket-Accept this key gets */
};

struct conn {
    struct worker *w;
    enum phase ph;
    int fd;
    SSL *ssl;           /* intercept modes, from the CONNECT's 200 on */
    struct ws_conn *ws; /* ws mode */
    struct event rev, wev;
    bool reading;        /* rev is added */
    bool writing;        /* wev is added */
    uint64_t t0;         /* start of the current sample */
    uint64_t deadline;   /* give up when the tick passes this (ns); 0: never */
    uint64_t restart_at; /* PH_BACKOFF */
    const uint8_t *out;  /* message being written */
    size_t out_left;
    uint64_t want;    /* bytes still to read in PH_BODY, PH_REPLY, PH_BULK */
    uint64_t up_left; /* bulk bytes still to send */
    size_t up_off;    /* where in g_bulk_buf the stream goes on */
    bool body_to_eof; /* PH_BODY without Content-Length */
    bool close_after; /* http: the response said Connection: close */
    long served;      /* http: responses read on this connection */
    size_t head_len;
    char head[HEAD_MAX];
};

struct worker {
    int id;
    struct event_base *base;
    struct event tick;
    pthread_t tid;
    struct conn *conns;
    long nconns, active; /* slots, and slots not PH_FREE */
    long next_idle;      /* idle: the next slot to open (--ramp) */
    long opening;        /* idle: slots between start and hold */
    uint64_t tick_now;   /* now_ns() at the last tick: coarse time for deadlines */
    uint64_t timeout_ns;
    bool stopping;
    /* results */
    uint32_t *lat; /* µs per sample */
    size_t nlat, cap;
    long long errors[E_KINDS];
    long long reconnects; /* http: requests resent on a new connection */
    uint64_t bytes_up, bytes_down;
    uint64_t first_ns, last_ns; /* first start and last completed sample */
    /* intercept modes */
    SSL_SESSION *session;                   /* --resume: the latest one the proxy gave */
    long long handshakes, resumed, offered; /* offered: a session, with --resume */
    int nleaves;
    bool leaves_overflow;
    char leaves[LEAVES_MAX][SERIAL_MAX + 1];
    /* ws mode */
    struct ws_conn *ws; /* one per slot */
    long long ws_upgrades;
    uint8_t scratch[SCRATCH_BYTES];
};

static void conn_start(struct conn *c);
static void idle_fill(struct worker *w);
static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void tls_start(struct conn *c);
static void tls_step(struct conn *c);
static void ws_ask(struct conn *c);
static int ws_upgraded(struct conn *c, size_t hl, size_t extra);
static int ws_one(struct conn *c);

static void record(struct worker *w, uint64_t t0, uint64_t t1)
{
    if (w->nlat == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 65536;
        w->lat = realloc(w->lat, w->cap * sizeof *w->lat);
        if (!w->lat)
            abort();
    }
    uint64_t us = (t1 - t0 + 500) / 1000;
    w->lat[w->nlat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    w->last_ns = t1;
}

/* One more exchange may start: under --total while some are left, under
 * --duration until it is over; never once stopping. */
static bool take_work(struct worker *w)
{
    if (w->stopping)
        return false;
    if (cfg.duration > 0)
        return now_ns() < g_end_ns;
    return atomic_fetch_sub(&g_remaining, 1) > 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd == -1)
        return;
    event_del(&c->rev);
    event_del(&c->wev);
    SSL_free(c->ssl); /* its BIO does not own the socket */
    c->ssl = NULL;
    close(c->fd);
    c->fd = -1;
    c->reading = c->writing = false;
}

static void slot_retire(struct conn *c)
{
    c->ph = PH_FREE;
    c->deadline = 0;
    if (--c->w->active == 0)
        event_base_loopbreak(c->w->base);
}

/* The slot's exchange is over (after_error says how): start the next one or
 * retire.  The caller must not touch c's connection afterwards. */
static void slot_next(struct conn *c, bool after_error)
{
    struct worker *w = c->w;
    conn_close(c);
    if (holds()) {
        if (c->ph != PH_HOLD) {
            w->opening--;
            atomic_fetch_add(&g_idle_failed, 1);
        }
        slot_retire(c);
        idle_fill(w);
        return;
    }
    if (!take_work(w))
        return slot_retire(c);
    if (after_error) {
        c->ph = PH_BACKOFF;
        c->deadline = 0;
        c->restart_at = w->tick_now + BACKOFF_MS * 1000000ull;
        return;
    }
    conn_start(c);
}

/* Count an error of this kind and end the exchange.  detail is shown for the
 * first few errors of the run, so a misbehaving proxy is seen, not guessed. */
static void conn_fail(struct conn *c, enum err_kind kind, const char *detail)
{
    c->w->errors[kind]++;
    if (atomic_fetch_add(&g_err_shown, 1) < 5)
        fprintf(stderr, "egress-load: %s: %s\n", err_names[kind], detail);
    slot_next(c, true);
}

static void conn_done(struct conn *c);

/*
 * A keep-alive connection that already carried a response closed before a
 * byte of the next one: the proxy does not keep connections alive (and did
 * not say so).  Like a browser or curl, send the request again on a new
 * connection; counted as a reconnect, not an error.  True when it did.
 */
static bool http_reconnect(struct conn *c)
{
    if (cfg.mode != MODE_HTTP || c->ph != PH_HEAD || c->head_len != 0 || c->served == 0)
        return false;
    c->w->reconnects++;
    conn_close(c);
    conn_start(c);
    return true;
}

static void conn_fail_errno(struct conn *c, int err)
{
    if (c->ph == PH_REFUSAL && (err == ECONNRESET || err == EPIPE))
        return conn_done(c); /* a reset is one way to refuse */
    if ((err == ECONNRESET || err == EPIPE) && http_reconnect(c))
        return;
    enum err_kind k = E_RESET;
    if (err == ECONNREFUSED)
        k = E_REFUSED;
    else if (err == ETIMEDOUT)
        k = E_TIMEOUT;
    else if (c->ph == PH_CONNECTING)
        k = E_CONNECT;
    conn_fail(c, k, strerror(err));
}

static void conn_done(struct conn *c)
{
    record(c->w, c->t0, now_ns());
    slot_next(c, false);
}

static void progress(struct conn *c)
{
    if (c->deadline)
        c->deadline = c->w->tick_now + c->w->timeout_ns;
}

static void want_write(struct conn *c, bool on)
{
    if (on && !c->writing)
        event_add(&c->wev, NULL);
    else if (!on && c->writing)
        event_del(&c->wev);
    c->writing = on;
}

/* What bulk sends after the hello, over and over: TLS application_data
 * records of BULK_RECORD bytes (a pattern inside), as a TLS client would
 * send once its handshake is done.  A proxy that follows the client's
 * records until the server has answered (egressd, for a second
 * ClientHello) sees records, not noise. */
#define BULK_RECORD 16384 /* SCRATCH_BYTES holds a whole number of them */
_Static_assert(SCRATCH_BYTES % BULK_RECORD == 0, "the stream repeats whole records");
static uint8_t *bulk_stream(void)
{
    uint8_t *b = malloc(SCRATCH_BYTES);

    if (!b)
        abort();
    for (size_t i = 0; i < SCRATCH_BYTES; i++)
        b[i] = (uint8_t)(i * 151 + 3);
    for (size_t at = 0; at < SCRATCH_BYTES; at += BULK_RECORD) {
        b[at] = 0x17, b[at + 1] = 0x03, b[at + 2] = 0x03;
        b[at + 3] = (uint8_t)((BULK_RECORD - 5) >> 8), b[at + 4] = (uint8_t)(BULK_RECORD - 5);
    }
    return b;
}

/* Write what the socket takes of the message, then of the bulk stream.
 * Returns -1 when the connection ended (c may already be running again). */
static int flush_out(struct conn *c)
{
    while (c->out_left > 0) {
        ssize_t n = send(c->fd, c->out, c->out_left, MSG_NOSIGNAL);
        if (n == -1) {
            if (errno == EAGAIN || errno == EINTR)
                return want_write(c, true), 0;
            return conn_fail_errno(c, errno), -1;
        }
        c->out += n, c->out_left -= (size_t)n;
        c->w->bytes_up += (uint64_t)n;
    }
    while (c->ph == PH_BULK && c->up_left > 0) {
        size_t len = SCRATCH_BYTES - c->up_off;
        if (len > c->up_left)
            len = (size_t)c->up_left;
        ssize_t n = send(c->fd, g_bulk_buf + c->up_off, len, MSG_NOSIGNAL);
        if (n == -1) {
            if (errno == EAGAIN || errno == EINTR)
                return want_write(c, true), 0;
            return conn_fail_errno(c, errno), -1;
        }
        c->up_left -= (uint64_t)n;
        c->up_off = (c->up_off + (size_t)n) % SCRATCH_BYTES;
        c->w->bytes_up += (uint64_t)n;
        progress(c);
    }
    want_write(c, false);
    if (c->ph == PH_BULK && c->want == 0)
        return conn_done(c), -1;
    return 0;
}

static int send_msg(struct conn *c, const void *msg, size_t len)
{
    c->out = msg;
    c->out_left = len;
    return flush_out(c);
}

/* The hello goes out; then the answer (or the bulk stream) is read. */
static int send_hello(struct conn *c)
{
    if (cfg.mode == MODE_BULK) {
        c->ph = PH_BULK;
        c->want = cfg.bulk_bytes;
        c->up_left = cfg.bulk_bytes;
        c->up_off = 0;
    } else if (cfg.mode == MODE_DENY) {
        c->ph = PH_REFUSAL;
    } else {
        c->ph = PH_REPLY;
        c->want = cfg.reply_bytes;
    }
    return send_msg(c, cfg.hello, cfg.hello_len);
}

static void send_request(struct conn *c)
{
    c->ph = PH_HEAD;
    c->head_len = 0;
    c->t0 = now_ns();
    send_msg(c, cfg.request, cfg.request_len);
}

static void on_connected(struct conn *c)
{
    event_add(&c->rev, NULL);
    c->reading = true;
    progress(c);
    if (uses_connect() || cfg.mode == MODE_HTTP) {
        c->ph = PH_HEAD;
        c->head_len = 0;
        if (cfg.mode == MODE_HTTP)
            c->t0 = now_ns();
        send_msg(c, cfg.request, cfg.request_len);
    } else if (uses_tls()) {
        tls_start(c);
    } else {
        send_hello(c);
    }
}

static void conn_start(struct conn *c)
{
    struct worker *w = c->w;
    c->t0 = now_ns();
    c->deadline = w->tick_now + w->timeout_ns;
    c->out_left = 0;
    c->served = 0;
    c->ph = PH_CONNECTING;
    if (c->ws != NULL)
        *c->ws = (struct ws_conn){.credit = true};
    c->fd = socket(cfg.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd == -1)
        return conn_fail(c, E_CONNECT, strerror(errno));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    event_assign(&c->rev, w->base, c->fd, EV_READ | EV_PERSIST, on_read, c);
    event_assign(&c->wev, w->base, c->fd, EV_WRITE | EV_PERSIST, on_write, c);
    if (connect(c->fd, (struct sockaddr *)&cfg.addr, cfg.addr_len) == 0)
        return on_connected(c);
    if (errno != EINPROGRESS)
        return conn_fail_errno(c, errno);
    want_write(c, true);
}

/* ---------------------------------------------------------------------------
 * Answers
 * ------------------------------------------------------------------------- */

/* The value of header name in a response head, or NULL; *vlen its length. */
static const char *header(const char *head, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    const char *end = head + len;
    for (const char *p = memchr(head, '\n', len); p && p + 1 < end;
         p = memchr(p + 1, '\n', (size_t)(end - p - 1))) {
        const char *l = p + 1;
        if ((size_t)(end - l) > nl && l[nl] == ':' && strncasecmp(l, name, nl) == 0) {
            const char *v = l + nl + 1, *e = memchr(v, '\r', (size_t)(end - v));
            while (v < end && (*v == ' ' || *v == '\t'))
                v++;
            *vlen = e ? (size_t)(e - v) : 0;
            return v;
        }
    }
    return NULL;
}

/* Content-Length as a number, or -1 when absent or not a plain number. */
static long long content_length(const char *head, size_t len)
{
    size_t vl;
    const char *v = header(head, len, "content-length", &vl);
    if (!v || vl == 0 || vl > 18)
        return -1;
    long long n = 0;
    for (size_t i = 0; i < vl; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (v[i] - '0');
    }
    return n;
}

/* Bytes of answer (body, reply, bulk) arrived; n may be 0.  Returns -1 when
 * the exchange ended. */
static int got_bytes(struct conn *c, uint64_t n)
{
    if (c->ph == PH_HOLD)
        return 0;
    if (c->ph == PH_BODY && c->body_to_eof)
        return 0;
    if (n > c->want) {
        if (c->ph == PH_BODY)
            return conn_fail(c, E_BAD_STATUS, "more body bytes than Content-Length"), -1;
        n = c->want; /* a longer answer than K: what matters has come */
    }
    c->want -= n;
    if (c->want > 0)
        return 0;
    switch (c->ph) {
    case PH_REPLY:
        if (cfg.mode != MODE_IDLE)
            return conn_done(c), -1;
        record(c->w, c->t0, now_ns());
        c->ph = PH_HOLD;
        c->deadline = 0;
        c->w->opening--;
        atomic_fetch_add(&g_idle_up, 1);
        idle_fill(c->w);
        return 0;
    case PH_BULK:
        if (c->up_left == 0)
            return conn_done(c), -1;
        return 0;
    case PH_BODY:
        if (cfg.mode != MODE_HTTP)
            return conn_done(c), -1;
        record(c->w, c->t0, now_ns());
        c->served++;
        if (c->close_after) /* the next request, if any, on a new connection */
            return slot_next(c, false), -1;
        if (!take_work(c->w))
            return conn_close(c), slot_retire(c), -1;
        send_request(c);
        return -1;
    default: return 0;
    }
}

/* A whole response head is in c->head (hl bytes, then extra bytes of what
 * follows it). */
static void head_done(struct conn *c, size_t hl, size_t extra)
{
    char line[160];
    int status = 0;
    if (hl < 12 || memcmp(c->head, "HTTP/1.", 7) != 0 || c->head[8] != ' ' ||
        sscanf(c->head + 9, "%3d", &status) != 1)
        status = -1;
    size_t ll = strcspn(c->head, "\r\n");
    snprintf(line, sizeof line, "%.*s", (int)(ll < 100 ? ll : 100), c->head);
    long long cl = content_length(c->head, hl);
    size_t vl;
    const char *conn_hdr = header(c->head, hl, "connection", &vl);
    c->close_after = conn_hdr && vl >= 5 && strncasecmp(conn_hdr, "close", 5) == 0;

    /* HTTP/1.0 answers close unless they say keep-alive. */
    if (status > 0 && c->head[7] == '0')
        c->close_after = !(conn_hdr && vl >= 10 && strncasecmp(conn_hdr, "keep-alive", 10) == 0);

    if (cfg.mode == MODE_DENY && status == 200) {
        char msg[240];
        snprintf(msg, sizeof msg, "a denied target was let through: '%s'", line);
        return conn_fail(c, E_LET_THROUGH, msg);
    }
    if (cfg.mode == MODE_HTTP || cfg.mode == MODE_DENY) {
        int expect = cfg.mode == MODE_HTTP ? 200 : 403;
        if (status != expect) {
            char msg[240];
            snprintf(msg, sizeof msg, "expected %d, got '%s'", expect, line);
            return conn_fail(c, E_BAD_STATUS, msg);
        }
        if (cl < 0 && cfg.mode == MODE_HTTP)
            return conn_fail(c, E_BAD_STATUS, "a 200 without Content-Length");
        c->ph = PH_BODY;
        c->body_to_eof = cl < 0;
        c->want = cl < 0 ? 0 : (uint64_t)cl;
        got_bytes(c, extra);
        return;
    }
    if (status != 200) {
        char msg[240];
        snprintf(msg, sizeof msg, "expected 200 to CONNECT, got '%s'", line);
        return conn_fail(c, E_BAD_STATUS, msg);
    }
    if (uses_tls()) {
        if (extra)
            return conn_fail(c, E_BAD_STATUS, "bytes after the CONNECT's 200, before TLS");
        return tls_start(c);
    }
    /* Nothing may follow a 200 before the hello; count it as answer if it does. */
    if (send_hello(c) == 0 && extra)
        got_bytes(c, extra);
}

static void read_head(struct conn *c)
{
    size_t room = HEAD_MAX - 1 - c->head_len;
    if (room == 0)
        return conn_fail(c, E_BAD_STATUS, "a response head over 4 KiB");
    ssize_t n = recv(c->fd, c->head + c->head_len, room, 0);
    if (n == 0 && http_reconnect(c))
        return;
    if (n == 0)
        return conn_fail(c, E_SHORT_READ, "EOF before a whole response head");
    if (n == -1)
        return errno == EAGAIN || errno == EINTR ? (void)0 : conn_fail_errno(c, errno);
    size_t from = c->head_len > 3 ? c->head_len - 3 : 0;
    c->head_len += (size_t)n;
    c->head[c->head_len] = 0;
    c->w->bytes_down += (uint64_t)n;
    progress(c);
    const char *e = memmem(c->head + from, c->head_len - from, "\r\n\r\n", 4);
    if (e) {
        size_t hl = (size_t)(e + 4 - c->head);
        head_done(c, hl, c->head_len - hl);
    }
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)what;
    if (c->ssl != NULL)
        return tls_step(c);
    if (c->ph == PH_HEAD)
        return read_head(c);
    ssize_t n = recv(fd, c->w->scratch, SCRATCH_BYTES, 0);
    if (n == -1) {
        if (errno != EAGAIN && errno != EINTR)
            conn_fail_errno(c, errno);
        return;
    }
    if (c->ph == PH_REFUSAL) {
        /* EOF or an alert record: refused.  Anything else came from the origin. */
        if (n == 0 || c->w->scratch[0] == 0x15)
            return conn_done(c);
        return conn_fail(c, c->w->scratch[0] == 0x16 ? E_LET_THROUGH : E_BAD_STATUS,
                         c->w->scratch[0] == 0x16
                             ? "a denied name was let through (handshake record)"
                             : "neither a refusal nor a TLS record");
    }
    if (n == 0) {
        if (c->ph == PH_BODY && c->body_to_eof)
            return conn_done(c);
        if (c->ph == PH_HOLD)
            return conn_fail(c, E_DROPPED, "a held tunnel was closed");
        return conn_fail(c, E_SHORT_READ, "EOF before the whole answer");
    }
    c->w->bytes_down += (uint64_t)n;
    progress(c);
    got_bytes(c, (uint64_t)n);
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    (void)what;
    if (c->ph == PH_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
            err = errno;
        if (err)
            return conn_fail_errno(c, err);
        want_write(c, false);
        return on_connected(c);
    }
    if (c->ssl != NULL)
        return tls_step(c);
    flush_out(c);
}

/* ---------------------------------------------------------------------------
 * TLS: the intercept modes
 * ------------------------------------------------------------------------- */

/* Wait for what OpenSSL asked for: readable, or writable. */
static void tls_watch(struct conn *c, bool rd, bool wr)
{
    if (rd && !c->reading)
        event_add(&c->rev, NULL);
    else if (!rd && c->reading)
        event_del(&c->rev);
    c->reading = rd;
    want_write(c, wr);
}

/* Why the TLS connection failed, for conn_fail's detail. */
static void tls_why(struct conn *c, char *buf, size_t len)
{
    long vr = SSL_get_verify_result(c->ssl);
    unsigned long e = ERR_peek_error();
    if (c->ph == PH_TLS_SHAKE && vr != X509_V_OK)
        snprintf(buf, len, "the certificate: %s", X509_verify_cert_error_string(vr));
    else if (e != 0)
        ERR_error_string_n(e, buf, len);
    else
        snprintf(buf, len, "TLS failed (%s)", errno ? strerror(errno) : "no detail");
}

/* After an SSL call on c returned r <= 0: wait for the socket, or end the
 * exchange (EOF, reset, a TLS failure).  Returns -1 when it ended. */
static int tls_wait(struct conn *c, int r)
{
    char why[256];
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return tls_watch(c, true, false), 0;
    if (e == SSL_ERROR_WANT_WRITE)
        return tls_watch(c, false, true), 0;
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && errno != 0) {
        ERR_clear_error();
        return conn_fail_errno(c, errno), -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)) {
        ERR_clear_error();
        if (c->ph == PH_HOLD)
            return conn_fail(c, E_DROPPED, "a held connection was closed"), -1;
        return conn_fail(c, E_SHORT_READ,
                         c->ph == PH_TLS_SHAKE ? "EOF during the TLS handshake"
                         : c->ph == PH_WS      ? "EOF in the WebSocket before its close"
                                               : "EOF before the whole answer"),
               -1;
    }
    tls_why(c, why, sizeof why);
    ERR_clear_error();
    return conn_fail(c, E_TLS, why), -1;
}

/* Note the serial of the leaf a full handshake showed, once per thread. */
static void tls_note_leaf(struct worker *w, X509 *leaf)
{
    char hex[SERIAL_MAX + 1] = "?";
    BIGNUM *bn = leaf ? ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL) : NULL;
    char *h = bn ? BN_bn2hex(bn) : NULL;
    if (h)
        snprintf(hex, sizeof hex, "%s", h);
    OPENSSL_free(h);
    BN_free(bn);
    for (int i = 0; i < w->nleaves; i++)
        if (strcmp(w->leaves[i], hex) == 0)
            return;
    if (w->nleaves == LEAVES_MAX) {
        w->leaves_overflow = true;
        return;
    }
    memcpy(w->leaves[w->nleaves++], hex, sizeof hex);
}

/* --resume: a session ticket came; it is the thread's next offer. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct conn *c = SSL_get_app_data(ssl);
    SSL_SESSION_free(c->w->session);
    c->w->session = sess;
    return 1; /* kept */
}

/* The client context: verify against --ca-file, ALPN http/1.1, a session
 * cache of our own (one session per thread) with --resume. */
static void tls_setup(void)
{
    cfg.tls = SSL_CTX_new(TLS_client_method());
    if (!cfg.tls || !SSL_CTX_load_verify_locations(cfg.tls, cfg.ca_file, NULL)) {
        char buf[256];
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        fprintf(stderr, "egress-load: --ca-file %s: %s\n", cfg.ca_file, buf);
        exit(2);
    }
    SSL_CTX_set_min_proto_version(cfg.tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(cfg.tls, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_protos(cfg.tls, (const unsigned char *)"\x08http/1.1", 9);
    /* An EOF without close_notify is an EOF (SSL_ERROR_ZERO_RETURN). */
    SSL_CTX_set_options(cfg.tls, SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* Read ahead: fewer recv()s for the generator; the proxy sees none of it. */
    SSL_CTX_set_read_ahead(cfg.tls, 1);
    SSL_CTX_set_default_read_buffer_len(cfg.tls, 64 * 1024);
    if (cfg.resume) {
        SSL_CTX_set_session_cache_mode(cfg.tls,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(cfg.tls, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(cfg.tls, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(cfg.tls, SSL_OP_NO_TICKET);
    }
}

/* The tunnel is up (or, --direct, the socket connected): start TLS. */
static void tls_start(struct conn *c)
{
    struct worker *w = c->w;
    c->ssl = SSL_new(cfg.tls);
    if (!c->ssl || !SSL_set_fd(c->ssl, c->fd))
        abort();
    SSL_set_app_data(c->ssl, c);
    SSL_set_connect_state(c->ssl);
    SSL_set_tlsext_host_name(c->ssl, cfg.host);
    SSL_set1_host(c->ssl, cfg.host);
    if (cfg.resume && w->session && SSL_SESSION_is_resumable(w->session) &&
        SSL_set_session(c->ssl, w->session))
        w->offered++;
    c->ph = PH_TLS_SHAKE;
    c->head_len = 0;
    tls_step(c);
}

/* The handshake is done: count it, send the GET. */
static void tls_shaken(struct conn *c)
{
    struct worker *w = c->w;
    w->handshakes++;
    if (SSL_session_reused(c->ssl))
        w->resumed++;
    else
        tls_note_leaf(w, SSL_get0_peer_certificate(c->ssl));
    c->ph = PH_TLS_ASK;
    c->out = (const uint8_t *)cfg.tls_request;
    c->out_left = cfg.tls_request_len;
    if (cfg.mode == MODE_WS)
        ws_ask(c); /* the upgrade request instead, with this connection's key */
    progress(c);
}

/* The whole body is in: hold the connection (interceptidle) or end it with
 * a close_notify.  Returns -1 when the exchange ended. */
static int tls_answered(struct conn *c)
{
    struct worker *w = c->w;
    if (cfg.mode != MODE_INTERCEPTIDLE) {
        SSL_shutdown(c->ssl); /* the close_notify goes out; no wait for the peer's */
        return conn_done(c), -1;
    }
    record(w, c->t0, now_ns());
    c->ph = PH_HOLD;
    c->deadline = 0;
    w->opening--;
    atomic_fetch_add(&g_idle_up, 1);
    idle_fill(w);
    return 0;
}

/* n bytes of body came (n may be 0).  Returns -1 when the exchange ended. */
static int tls_body(struct conn *c, uint64_t n)
{
    if (n > c->want)
        return conn_fail(c, E_BAD_STATUS, "more body bytes than Content-Length"), -1;
    c->want -= n;
    return c->want == 0 ? tls_answered(c) : 0;
}

/* A whole response head is in c->head (hl bytes, then extra of its body).
 * Returns -1 when the exchange ended. */
static int tls_head_done(struct conn *c, size_t hl, size_t extra)
{
    char msg[240];
    int status = 0;
    if (hl < 12 || memcmp(c->head, "HTTP/1.1 ", 9) != 0 || sscanf(c->head + 9, "%3d", &status) != 1)
        status = -1;
    long long cl = content_length(c->head, hl);
    int expect = cfg.mode == MODE_WS ? 101 : 200;
    if (status != expect) {
        /* The status line and the body's first line (the sink says why). */
        int ll = (int)strcspn(c->head, "\r\n"), bl = (int)strcspn(c->head + hl, "\r\n");
        snprintf(msg, sizeof msg, "expected %d to the GET, got '%.*s'%s%.*s%s", expect,
                 ll < 100 ? ll : 100, c->head, bl ? " (" : "", bl < 60 ? bl : 60, c->head + hl,
                 bl ? ")" : "");
        return conn_fail(c, E_BAD_STATUS, msg), -1;
    }
    if (cfg.mode == MODE_WS)
        return ws_upgraded(c, hl, extra);
    if (cl < 0)
        return conn_fail(c, E_BAD_STATUS, "a 200 without Content-Length"), -1;
    c->ph = PH_TLS_BODY;
    c->want = (uint64_t)cl;
    return tls_body(c, extra);
}

/* One step of the current phase; 1: go on, 0: waiting, -1: the exchange
 * ended (c may be running the next one already). */
static int tls_one(struct conn *c)
{
    int r;
    switch (c->ph) {
    case PH_TLS_SHAKE:
        ERR_clear_error();
        if ((r = SSL_do_handshake(c->ssl)) != 1)
            return tls_wait(c, r);
        tls_shaken(c);
        return 1;
    case PH_TLS_ASK:
        if ((r = SSL_write(c->ssl, c->out, (int)c->out_left)) <= 0)
            return tls_wait(c, r);
        c->out += r, c->out_left -= (size_t)r;
        c->w->bytes_up += (uint64_t)r;
        if (c->out_left == 0)
            c->ph = PH_TLS_HEAD;
        return 1;
    case PH_TLS_HEAD: {
        size_t room = HEAD_MAX - 1 - c->head_len;
        if (room == 0)
            return conn_fail(c, E_BAD_STATUS, "a response head over 4 KiB"), -1;
        if ((r = SSL_read(c->ssl, c->head + c->head_len, (int)room)) <= 0)
            return tls_wait(c, r);
        size_t from = c->head_len > 3 ? c->head_len - 3 : 0;
        c->head_len += (size_t)r;
        c->head[c->head_len] = 0;
        c->w->bytes_down += (uint64_t)r;
        progress(c);
        const char *e = memmem(c->head + from, c->head_len - from, "\r\n\r\n", 4);
        if (!e)
            return 1;
        size_t hl = (size_t)(e + 4 - c->head);
        return tls_head_done(c, hl, c->head_len - hl) == -1 ? -1 : 1;
    }
    case PH_TLS_BODY:
    case PH_HOLD:
        if ((r = SSL_read(c->ssl, c->w->scratch, SCRATCH_BYTES)) <= 0)
            return tls_wait(c, r);
        c->w->bytes_down += (uint64_t)r;
        if (c->ph == PH_HOLD)
            return conn_fail(c, E_BAD_STATUS, "bytes on a held connection"), -1;
        progress(c);
        return tls_body(c, (uint64_t)r) == -1 ? -1 : 1;
    case PH_WS: return ws_one(c);
    default: return 0;
    }
}

/* Drive c's TLS exchange as far as the socket lets it. */
static void tls_step(struct conn *c)
{
    while (c->ssl != NULL && tls_one(c) == 1)
        ;
}

/* ---------------------------------------------------------------------------
 * WebSocket: the ws mode
 * ------------------------------------------------------------------------- */

/* What every connection sends, made once: `variants` masked binary frames
 * of --msg-bytes, each with a mask and a random payload of its own (one
 * more than the window, so that an echo lost, doubled or out of order is
 * never the one expected), the payloads their echoes must carry, and a
 * masked close frame. */
static struct {
    size_t variants, frame_len;
    uint8_t **frame, **payload;
    uint8_t close[WS_HEAD_MAX + 2];
    size_t close_len;
} g_ws;

/* Make g_ws. */
static void ws_setup(void)
{
    size_t hs = ws_head_size(true, cfg.msg_bytes), n = (size_t)cfg.msg_bytes;
    uint8_t mask[WS_MASK_BYTES];

    g_ws.variants = (size_t)cfg.window + 1;
    g_ws.frame_len = hs + n;
    g_ws.frame = calloc(g_ws.variants, sizeof *g_ws.frame);
    g_ws.payload = calloc(g_ws.variants, sizeof *g_ws.payload);
    if (!g_ws.frame || !g_ws.payload)
        abort();
    for (size_t v = 0; v < g_ws.variants; v++) {
        g_ws.payload[v] = malloc(n);
        g_ws.frame[v] = malloc(g_ws.frame_len);
        if (!g_ws.payload[v] || !g_ws.frame[v] || RAND_bytes(g_ws.payload[v], (int)n) != 1 ||
            RAND_bytes(mask, sizeof mask) != 1)
            abort();
        ws_head_write(g_ws.frame[v], true, WS_BINARY, mask, n);
        memcpy(g_ws.frame[v] + hs, g_ws.payload[v], n);
        ws_mask(g_ws.frame[v] + hs, n, mask);
    }
    if (RAND_bytes(mask, sizeof mask) != 1)
        abort();
    hs = ws_head_write(g_ws.close, true, WS_CLOSE, mask, 2);
    memcpy(g_ws.close + hs, WS_CLOSE_1000, 2);
    ws_mask(g_ws.close + hs, 2, mask);
    g_ws.close_len = hs + 2;
}

/* The upgrade request of this connection, with a fresh key, into c->head
 * (free until the answer comes) as the message to write; the accept value
 * it must get noted. */
static void ws_ask(struct conn *c)
{
    uint8_t nonce[WS_KEY_BYTES];
    char key[WS_KEY_LEN + 1];
    size_t n = cfg.tls_request_len;

    if (RAND_bytes(nonce, sizeof nonce) != 1)
        abort();
    EVP_EncodeBlock((unsigned char *)key, nonce, sizeof nonce);
    ws_accept(key, WS_KEY_LEN, c->ws->accept);
    memcpy(c->head, cfg.tls_request, n);
    memcpy(c->head + n, key, WS_KEY_LEN);
    memcpy(c->head + n + WS_KEY_LEN, "\r\n\r\n", 4);
    c->out = (const uint8_t *)c->head;
    c->out_left = n + WS_KEY_LEN + 4;
}

static int ws_feed(struct conn *c, const uint8_t *p, size_t n);

/* A 101 is in (hl bytes of c->head, then extra bytes of frames): check
 * that it switches to WebSocket for this key and agrees no extension,
 * then the messages go.  -1 when the exchange ended. */
static int ws_upgraded(struct conn *c, size_t hl, size_t extra)
{
    size_t ul = 0, cl = 0, al = 0, xl = 0;
    const char *up = header(c->head, hl, "upgrade", &ul);
    const char *co = header(c->head, hl, "connection", &cl);
    const char *ac = header(c->head, hl, "sec-websocket-accept", &al);

    if (!up || !ws_value_lists(up, ul, "websocket") || !co || !ws_value_lists(co, cl, "upgrade"))
        return conn_fail(c, E_BAD_STATUS, "a 101 without Upgrade: websocket, Connection: upgrade"),
               -1;
    if (!ac || al != WS_ACCEPT_LEN || memcmp(ac, c->ws->accept, WS_ACCEPT_LEN) != 0)
        return conn_fail(c, E_BAD_STATUS, "a 101 whose Sec-WebSocket-Accept is not this key's"), -1;
    if (header(c->head, hl, "sec-websocket-extensions", &xl))
        return conn_fail(c, E_BAD_STATUS, "a 101 agreeing an extension none offered"), -1;
    c->w->ws_upgrades++;
    c->ph = PH_WS;
    progress(c);
    return ws_feed(c, (const uint8_t *)c->head + hl, extra);
}

/* The server's close came after ours: the exchange is over. */
static void ws_closed(struct conn *c)
{
    SSL_shutdown(c->ssl); /* the close_notify goes out; no wait for the peer's */
    slot_next(c, false);
}

/* Take bytes of a server frame's header from p[0..n): how many were its,
 * or -1 when the exchange ended (the close after ours, or a frame that is
 * not the echo expected). */
static long ws_rx_head(struct conn *c, const uint8_t *p, size_t n)
{
    struct ws_conn *ws = c->ws;
    size_t had = ws->hdr_len, take = n < WS_HEAD_MAX - had ? n : WS_HEAD_MAX - had;

    memcpy(ws->hdr + had, p, take);
    ws->hdr_len += take;
    int r = ws_head_read(ws->hdr, ws->hdr_len, &ws->rx);
    if (r < 0)
        return conn_fail(c, E_ECHO, "a frame header that breaks the framing"), -1;
    if (r == 0)
        return (long)take;
    ws->hdr_len = 0;
    if (ws->rx.opcode == WS_CLOSE && ws->closing)
        return ws_closed(c), -1;
    if (ws->rx.opcode == WS_CLOSE)
        return conn_fail(c, E_ECHO, "the server closed the WebSocket"), -1;
    if (ws->rx.masked || ws->rx.opcode != WS_BINARY || !ws->rx.fin || ws->rx.len != cfg.msg_bytes)
        return conn_fail(c, E_ECHO, "a frame that is not a whole binary message of --msg-bytes"),
               -1;
    if (ws->echoed == ws->sent)
        return conn_fail(c, E_ECHO, "an echo of no message sent"), -1;
    ws->in_payload = true;
    ws->rx_pos = 0;
    return (long)(ws->rx.size - had);
}

/* Take payload bytes of the echo being read from p[0..n), compared with
 * the message it answers; at its end, its round trip is a sample.  How
 * many were its, or -1 when they differ (the exchange ended). */
static long ws_rx_payload(struct conn *c, const uint8_t *p, size_t n)
{
    struct ws_conn *ws = c->ws;
    uint64_t left = ws->rx.len - ws->rx_pos;
    size_t take = n < left ? n : (size_t)left;
    const uint8_t *want = g_ws.payload[ws->echoed % g_ws.variants] + ws->rx_pos;

    if (memcmp(p, want, take) != 0)
        return conn_fail(c, E_ECHO, "an echo that differs from the message sent"), -1;
    ws->rx_pos += take;
    if (ws->rx_pos == ws->rx.len) {
        record(c->w, ws->sent_at[ws->echoed % (uint64_t)cfg.window], now_ns());
        ws->echoed++;
        ws->in_payload = false;
    }
    return (long)take;
}

/* Bytes of the server's frames came (p[0..n)).  -1 when the exchange
 * ended. */
static int ws_feed(struct conn *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        long used = c->ws->in_payload ? ws_rx_payload(c, p, n) : ws_rx_head(c, p, n);
        if (used < 0)
            return -1;
        p += used, n -= (size_t)used;
    }
    return 0;
}

/* When nothing is being written: the next message if the window has room
 * and there is work left; once there is none and every echo is in, the
 * close frame. */
static void ws_queue(struct conn *c)
{
    struct ws_conn *ws = c->ws;

    if (c->out_left > 0 || ws->closing)
        return;
    if (!ws->no_more && ws->sent - ws->echoed < (uint64_t)cfg.window) {
        if (ws->credit || take_work(c->w)) {
            ws->credit = false;
            ws->sent_at[ws->sent % (uint64_t)cfg.window] = now_ns();
            c->out = g_ws.frame[ws->sent % g_ws.variants];
            c->out_left = g_ws.frame_len;
            ws->sent++;
            return;
        }
        ws->no_more = true;
    }
    if (ws->no_more && ws->sent == ws->echoed) {
        ws->closing = true;
        c->out = g_ws.close;
        c->out_left = g_ws.close_len;
    }
}

/* One round of a ws exchange: write what is due, then read what came (a
 * connection always reads while it writes, so neither end waits on the
 * other).  1: progress, 0: waiting for the socket, -1: the exchange
 * ended. */
static int ws_one(struct conn *c)
{
    bool wrote = false, write_blocked = false;
    int r, e;

    ws_queue(c);
    if (c->out_left > 0) {
        ERR_clear_error();
        r = SSL_write(c->ssl, c->out, (int)c->out_left); /* whole, or retried as it was */
        e = r > 0 ? SSL_ERROR_NONE : SSL_get_error(c->ssl, r);
        if (r > 0) {
            c->out += r, c->out_left -= (size_t)r;
            c->w->bytes_up += (uint64_t)r;
            progress(c);
            wrote = true;
        } else if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ) {
            return tls_wait(c, r);
        }
        write_blocked = e == SSL_ERROR_WANT_WRITE;
    }
    ERR_clear_error();
    r = SSL_read(c->ssl, c->w->scratch, SCRATCH_BYTES);
    if (r > 0) {
        c->w->bytes_down += (uint64_t)r;
        progress(c);
        return ws_feed(c, c->w->scratch, (size_t)r) == -1 ? -1 : 1;
    }
    e = SSL_get_error(c->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return tls_wait(c, r);
    if (wrote)
        return 1;
    tls_watch(c, true, write_blocked || e == SSL_ERROR_WANT_WRITE);
    return 0;
}

/* ---------------------------------------------------------------------------
 * Workers
 * ------------------------------------------------------------------------- */

/* idle: open tunnels until --ramp of them are opening at once (per worker,
 * its share); print "all up" once every tunnel of the run is up or failed. */
static void idle_fill(struct worker *w)
{
    long ramp = cfg.ramp / cfg.threads > 0 ? cfg.ramp / cfg.threads : 1;
    while (!w->stopping && w->next_idle < w->nconns && w->opening < ramp) {
        struct conn *c = &w->conns[w->next_idle++];
        w->active++;
        w->opening++;
        conn_start(c);
    }
    long up = atomic_load(&g_idle_up), failed = atomic_load(&g_idle_failed);
    if (w->next_idle == w->nconns && w->opening == 0 && up + failed == cfg.conns) {
        /* Only the worker whose change completed the count gets here with
         * this sum... unless two finish together: print once. */
        static atomic_int printed;
        if (atomic_exchange(&printed, 1) == 0) {
            double s = (double)(now_ns() - g_start_ns) / 1e9;
            if (failed == 0)
                printf("all up: %ld tunnels in %.3f s\n", up, s);
            else
                printf("partly up: %ld of %ld tunnels (%ld failed) in %.3f s\n", up, cfg.conns,
                       failed, s);
            fflush(stdout);
        }
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    (void)fd, (void)what;
    w->tick_now = now_ns();
    if (g_signal)
        atomic_store(&g_stop, 1);
    bool abort_all = atomic_load(&g_stop) != 0;
    if (abort_all || (cfg.duration > 0 && w->tick_now >= g_end_ns))
        w->stopping = true;
    for (long i = 0; i < w->nconns; i++) {
        struct conn *c = &w->conns[i];
        if (c->ph == PH_FREE)
            continue;
        /* SIGINT ends everything now; --duration's end only idle's hold
         * (the other modes let what is in flight finish). */
        if (abort_all || (w->stopping && (c->ph == PH_HOLD || c->ph == PH_BACKOFF))) {
            if (c->ph != PH_HOLD && c->ph != PH_BACKOFF && holds())
                w->opening--;
            conn_close(c);
            slot_retire(c);
            continue;
        }
        if (c->ph == PH_BACKOFF && w->tick_now >= c->restart_at)
            conn_start(c);
        else if (c->deadline && w->tick_now >= c->deadline)
            conn_fail(c, E_TIMEOUT, "no progress within --timeout");
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct timeval tv = {0, TICK_MS * 1000};
    event_assign(&w->tick, w->base, -1, EV_PERSIST, on_tick, w);
    event_add(&w->tick, &tv);
    w->tick_now = now_ns();
    w->first_ns = w->tick_now;
    if (holds()) {
        idle_fill(w);
    } else {
        for (long i = 0; i < w->nconns && take_work(w); i++) {
            w->active++;
            conn_start(&w->conns[i]);
        }
    }
    if (w->active > 0)
        event_base_dispatch(w->base);
    event_del(&w->tick);
    return NULL;
}

static int worker_setup(struct worker *w, int id, long nconns)
{
    w->id = id;
    w->base = event_base_new();
    w->nconns = nconns;
    w->conns = calloc((size_t)nconns, sizeof *w->conns);
    w->timeout_ns = (uint64_t)(cfg.timeout * 1e9);
    if (!w->base || !w->conns)
        return -1;
    if (cfg.mode == MODE_WS && (w->ws = calloc((size_t)nconns, sizeof *w->ws)) == NULL)
        return -1;
    for (long i = 0; i < nconns; i++) {
        w->conns[i].w = w;
        w->conns[i].fd = -1;
        w->conns[i].ws = w->ws ? &w->ws[i] : NULL;
    }
    if (cfg.total > 0) {
        w->cap = (size_t)(cfg.total / cfg.threads + nconns + 16);
        w->lat = malloc(w->cap * sizeof *w->lat);
        if (!w->lat)
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[n]. */
static uint32_t pct(const uint32_t *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    size_t r = (size_t)(q * (double)n + 0.999999);
    return v[r == 0 ? 0 : r - 1];
}

/* The distinct leaf serials of all threads, printed as a JSON array when
 * out is given; returns how many. */
static int tls_leaves(struct worker *ws, int nw, FILE *out)
{
    int n = 0;
    if (out)
        fputc('[', out);
    for (int i = 0; i < nw; i++)
        for (int k = 0; k < ws[i].nleaves; k++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++)
                for (int m = 0; m < ws[j].nleaves && !seen; m++)
                    seen = strcmp(ws[j].leaves[m], ws[i].leaves[k]) == 0;
            if (seen)
                continue;
            if (out)
                fprintf(out, "%s\"%s\"", n ? "," : "", ws[i].leaves[k]);
            n++;
        }
    if (out)
        fputc(']', out);
    return n;
}

/* The intercept modes' part of the JSON line. */
static void report_tls(struct worker *ws, int nw)
{
    long long hs = 0, re = 0, of = 0;
    bool overflow = false;
    for (int i = 0; i < nw; i++) {
        hs += ws[i].handshakes, re += ws[i].resumed, of += ws[i].offered;
        overflow |= ws[i].leaves_overflow;
    }
    printf(",\"resume\":%s,\"handshakes\":%lld,\"offered\":%lld,\"resumed\":%lld,"
           "\"leaves\":",
           cfg.resume ? "true" : "false", hs, of, re);
    tls_leaves(ws, nw, stdout);
    printf(",\"leaves_overflow\":%s", overflow ? "true" : "false");
}

/* The ws mode's part of the JSON line (json) or of the line for people:
 * n echoes in secs seconds; MiB/s of messages echoed, one way. */
static void report_ws(struct worker *ws, int nw, size_t n, double secs, FILE *out, bool json)
{
    long long up = 0;
    uint64_t payload = (uint64_t)n * cfg.msg_bytes;
    double mib_s = secs > 0 ? (double)payload / secs / (1 << 20) : 0;

    for (int i = 0; i < nw; i++)
        up += ws[i].ws_upgrades;
    if (json)
        fprintf(out,
                ",\"msg_bytes\":%" PRIu64 ",\"window\":%ld,\"upgrades\":%lld,"
                "\"payload_bytes\":%" PRIu64 ",\"mib_s\":%.1f",
                cfg.msg_bytes, cfg.window, up, payload, mib_s);
    else
        fprintf(out,
                "; WebSocket: %lld upgrades, %.1f MiB/s of %" PRIu64
                "-byte messages echoed, at most %ld in flight per connection",
                up, mib_s, cfg.msg_bytes, cfg.window);
}

static void report(struct worker *ws, int nw)
{
    size_t n = 0;
    long long err[E_KINDS] = {0}, err_total = 0, reconnects = 0;
    uint64_t up = 0, down = 0, last = 0;
    for (int i = 0; i < nw; i++) {
        n += ws[i].nlat;
        up += ws[i].bytes_up, down += ws[i].bytes_down;
        if (ws[i].last_ns > last)
            last = ws[i].last_ns;
        for (int k = 0; k < E_KINDS; k++)
            err[k] += ws[i].errors[k];
        reconnects += ws[i].reconnects;
    }
    for (int k = 0; k < E_KINDS; k++)
        err_total += err[k];
    uint32_t *all = malloc((n ? n : 1) * sizeof *all);
    if (!all)
        abort();
    for (int i = 0, at = 0; i < nw; i++) {
        if (ws[i].nlat) /* (lat is NULL when a thread recorded nothing) */
            memcpy(all + at, ws[i].lat, ws[i].nlat * sizeof *all);
        at += (int)ws[i].nlat;
    }
    qsort(all, n, sizeof *all, cmp_u32);
    double secs = last > g_start_ns ? (double)(last - g_start_ns) / 1e9 : 0;
    double rate = secs > 0 ? (double)n / secs : 0;
    const char *unit = cfg.mode == MODE_HTTP ? "req/s" : cfg.mode == MODE_WS ? "msg/s" : "conn/s";
    double mib_s = secs > 0 ? (double)down / secs / (1 << 20) : 0;
    double gbit_s = secs > 0 ? (double)down * 8 / secs / 1e9 : 0;
    uint32_t p50 = pct(all, n, .50), p90 = pct(all, n, .90), p99 = pct(all, n, .99);
    uint32_t mx = n ? all[n - 1] : 0;

    printf("{\"mode\":\"%s\",\"via\":\"%s\",\"addr\":\"%s\",\"target\":\"%s\"",
           mode_names[cfg.mode], cfg.direct ? "direct" : "proxy", cfg.addr_text, cfg.target);
    if (cfg.label)
        printf(",\"label\":\"%s\"", cfg.label);
    printf(",\"conns\":%ld,\"threads\":%ld,\"total\":%zu,\"seconds\":%.3f,\"rate\":%.1f,"
           "\"unit\":\"%s\",\"p50_us\":%" PRIu32 ",\"p90_us\":%" PRIu32 ",\"p99_us\":%" PRIu32
           ",\"max_us\":%" PRIu32 ",\"bytes_up\":%" PRIu64 ",\"bytes_down\":%" PRIu64,
           cfg.conns, cfg.threads, n, secs, rate, unit, p50, p90, p99, mx, up, down);
    if (is_bulk())
        printf(",\"gbit_s\":%.3f,\"mib_s\":%.1f", gbit_s, mib_s);
    if (uses_tls())
        report_tls(ws, nw);
    if (cfg.mode == MODE_WS)
        report_ws(ws, nw, n, secs, stdout, true);
    printf(",\"errors\":{");
    for (int k = 0; k < E_KINDS; k++)
        printf("%s\"%s\":%lld", k ? "," : "", err_names[k], err[k]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    printf("},\"error_total\":%lld,\"reconnects\":%lld,\"cpu_s\":%.3f}\n", err_total, reconnects,
           cpu);

    printf("%s %s %s -> %s: %zu in %.3f s = %.0f %s", mode_names[cfg.mode],
           cfg.direct ? "direct" : "via", cfg.addr_text, cfg.target, n, secs, rate, unit);
    if (is_bulk())
        printf(", %.2f Gbit/s (%.0f MiB/s) %s", gbit_s, mib_s,
               cfg.mode == MODE_BULK ? "each way" : "down");
    printf("; latency us p50 %" PRIu32 " p90 %" PRIu32 " p99 %" PRIu32 " max %" PRIu32
           "; errors %lld",
           p50, p90, p99, mx, err_total);
    for (int k = 0; k < E_KINDS; k++)
        if (err[k])
            printf(" %s=%lld", err_names[k], err[k]);
    if (reconnects)
        printf("; %lld requests resent on a new connection", reconnects);
    if (uses_tls()) {
        long long hs = 0, re = 0, of = 0;
        for (int i = 0; i < nw; i++)
            hs += ws[i].handshakes, re += ws[i].resumed, of += ws[i].offered;
        printf("; TLS: %lld handshakes, %lld resumed", hs, re);
        if (cfg.resume)
            printf(" of %lld offered", of);
        printf(", %d distinct leaf certificates", tls_leaves(ws, nw, NULL));
    }
    if (cfg.mode == MODE_WS)
        report_ws(ws, nw, n, secs, stdout, false);
    printf("\n");
    free(all);
}

/* ---------------------------------------------------------------------------
 * Self-test of hello_set_sni against sni/'s parser
 * ------------------------------------------------------------------------- */

static int st_n, st_failed;

static void st_ok(bool cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void st_ok(bool cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++st_n);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    st_failed += !cond;
}

/* Parse buf with sni/, whole and in two pieces cut at cut; both must agree. */
static enum sni_result st_parse(struct sni_parser *p, const uint8_t *buf, size_t len, size_t cut)
{
    static struct sni_parser other;
    sni_parser_init(&other);
    sni_parser_feed(&other, buf, cut);
    enum sni_result r2 = sni_parser_feed(&other, buf + cut, len - cut);
    sni_parser_init(p);
    enum sni_result r = sni_parser_feed(p, buf, len);
    return r == r2 ? r : SNI_MALFORMED;
}

static bool view_eq(struct sni_view a, struct sni_view b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The extensions of a one-record hello other than server_name, in order,
 * as one string of bytes (type, length, body each). */
static size_t st_other_exts(const uint8_t *h, size_t len, uint8_t *out)
{
    size_t p = 9 + 2 + 32;
    p += 1 + h[p];
    p += 2 + be16(h + p);
    p += 1 + h[p];
    size_t o = 0;
    for (size_t q = p + 2; q + 4 <= len; q += 4 + be16(h + q + 2))
        if (be16(h + q) != 0)
            memcpy(out + o, h + q, 4 + (size_t)be16(h + q + 2)), o += 4 + be16(h + q + 2);
    return o;
}

static void st_sample(const char *dir, const char *name)
{
    static uint8_t in[HELLO_MAX + 1], out[HELLO_MAX], back[HELLO_MAX];
    static uint8_t ex_in[HELLO_MAX], ex_out[HELLO_MAX];
    static struct sni_parser orig, p;
    char path[4096], err[200], longest[HOST_MAX + 1];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    size_t len = f ? fread(in, 1, sizeof in, f) : 0;
    if (f)
        fclose(f);
    st_ok(len > 0 && len <= HELLO_MAX, "%s: read (%zu bytes)", name, len);
    enum sni_result r0 = st_parse(&orig, in, len, len / 2);
    st_ok(r0 == SNI_OK || r0 == SNI_NO_SNI, "%s: the capture parses (%s)", name,
          sni_result_str(r0));

    memset(longest, 'a', HOST_MAX);
    for (int i = 63; i < HOST_MAX; i += 64)
        longest[i] = '.';
    longest[HOST_MAX] = 0;
    const char *hosts[] = {"x.y", "sink.test", "a-much-longer-name.for.the.rewrite.test", longest};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        const char *h = hosts[i];
        size_t n = hello_set_sni(in, len, h, out, err, sizeof err);
        enum sni_result r = n ? st_parse(&p, out, n, n / 3) : SNI_MALFORMED;
        st_ok(n > 0 && r == SNI_OK && p.hello.host.len == strlen(h) &&
                  memcmp(p.hello.host.ptr, h, strlen(h)) == 0 && p.hello.record_bytes == n,
              "%s -> %.20s%s: parses with that name (%s%s%s)", name, h, strlen(h) > 20 ? "..." : "",
              n ? sni_result_str(r) : err, r == SNI_MALFORMED && n ? ": " : "",
              r == SNI_MALFORMED && n ? sni_error_str(p.error) : "");
        if (!n || r != SNI_OK)
            continue;
        st_ok(view_eq(p.hello.alpn, orig.hello.alpn) &&
                  view_eq(p.hello.versions, orig.hello.versions) &&
                  p.hello.max_version == orig.hello.max_version && p.hello.ech == orig.hello.ech,
              "%s -> %.20s: ALPN, versions and ECH as before", name, h);
        size_t a = st_other_exts(in, len, ex_in), b = st_other_exts(out, n, ex_out);
        st_ok(a == b && memcmp(ex_in, ex_out, a) == 0 && memcmp(in + 11, out + 11, 32) == 0,
              "%s -> %.20s: the other extensions and the random byte for byte", name, h);
    }
    if (r0 == SNI_OK) {
        /* Back to the captured name: exactly the capture again. */
        char orig_name[HOST_MAX + 1];
        memcpy(orig_name, orig.hello.host.ptr, orig.hello.host.len);
        orig_name[orig.hello.host.len] = 0;
        size_t n = hello_set_sni(in, len, "sink.test", out, err, sizeof err);
        size_t m = n ? hello_set_sni(out, n, orig_name, back, err, sizeof err) : 0;
        st_ok(m == len && memcmp(back, in, len) == 0, "%s: renamed and back is the capture", name);
    }
    st_ok(hello_set_sni(in, len - 1, "sink.test", out, err, sizeof err) == 0,
          "%s: one byte short is refused (%s)", name, err);
    in[len] = 0;
    st_ok(hello_set_sni(in, len + 1, "sink.test", out, err, sizeof err) == 0,
          "%s: one byte more is refused (%s)", name, err);
}

static int selftest(const char *dir)
{
    static uint8_t in[HELLO_MAX], out[HELLO_MAX];
    char err[200];
    char *names[64];
    long got = bench_list_hellos(dir, names, 64);
    if (got < 0)
        return perror(dir), 1;
    size_t n = (size_t)got;
    st_ok(n > 0, "captures in %s (%zu)", dir, n);
    for (size_t i = 0; i < n; i++) {
        st_sample(dir, names[i]);
        free(names[i]);
    }
    /* Hand-made cases: a TLS 1.2 hello with no extensions block at all. */
    static const uint8_t bare[] = {
        0x16,
        0x03,
        0x01,
        0x00,
        0x2d, /* record: handshake, 45 bytes */
        0x01,
        0x00,
        0x00,
        0x29, /* ClientHello, 41 bytes */
        0x03,
        0x03,               /* legacy_version */
        [11 ... 42] = 0x5a, /* random */
        [43] = 0x00,        /* legacy_session_id: empty */
        [44] = 0x00,
        [45] = 0x02,
        [46] = 0x00,
        [47] = 0x2f, /* one suite */
        [48] = 0x01,
        [49] = 0x00, /* compression: null */
    };
    size_t m = hello_set_sni(bare, sizeof bare, "sink.test", out, err, sizeof err);
    struct sni_parser *p = calloc(1, sizeof *p);
    enum sni_result r = m ? st_parse(p, out, m, 7) : SNI_MALFORMED;
    st_ok(sizeof bare == 50 && r == SNI_OK && p->hello.host.len == 9,
          "a hello without extensions gets a server_name (%s)", m ? sni_result_str(r) : err);
    memcpy(in, bare, sizeof bare);
    in[0] = 0x17;
    st_ok(hello_set_sni(in, sizeof bare, "sink.test", out, err, sizeof err) == 0,
          "an application_data record is refused (%s)", err);
    char big[HOST_MAX + 2];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = 0;
    st_ok(hello_set_sni(bare, sizeof bare, big, out, err, sizeof err) == 0,
          "a 254-byte name is refused (%s)", err);
    st_ok(hello_set_sni(bare, sizeof bare, "", out, err, sizeof err) == 0,
          "an empty name is refused (%s)", err);
    free(p);
    printf("1..%d\n", st_n);
    return st_failed != 0;
}

/* ---------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: egress-load --mode connect|sni|http|bulk|deny|idle\n"
            "                   (--proxy ADDR:PORT | --direct ADDR:PORT) --target HOST:PORT\n"
            "                   [--conns C] [--total N | --duration S] [--threads T]\n"
            "                   [--hello FILE] [--reply-bytes K] [--bytes S] [--timeout S]\n"
            "                   [--ramp R] [--label TEXT] [--transparent]\n"
            "       egress-load --mode intercept|interceptbulk|interceptidle --ca-file PEM\n"
            "                   [--api-key VALUE] [--resume] (and the options above)\n"
            "       egress-load --mode ws --ca-file PEM [--api-key VALUE] [--msg-bytes M]\n"
            "                   [--window W] (and the options above)\n"
            "       egress-load --selftest [DIR]\n");
    exit(2);
}

#define DIE(...) (fprintf(stderr, "egress-load: " __VA_ARGS__), fputc('\n', stderr), exit(2))

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    return bench_parse_long("egress-load", s, what, lo, hi);
}

static double parse_secs(const char *s, const char *what)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v > 0) || v > 1e6)
        DIE("%s wants seconds (> 0), not '%s'", what, s);
    return v;
}

static void load_hello(void)
{
    static uint8_t raw[HELLO_MAX + 1];
    char err[200];
    char def[4096];
    const char *path = cfg.hello_path;
    if (!path) {
        const char *dir = getenv("CLIENTHELLO_DIR");
        snprintf(def, sizeof def, "%s/curl.bin", dir ? dir : "tests/data/clienthello");
        path = def;
    }
    FILE *f = fopen(path, "rb");
    if (!f)
        DIE("%s: %s (give a ClientHello capture with --hello)", path, strerror(errno));
    size_t len = fread(raw, 1, sizeof raw, f);
    fclose(f);
    cfg.hello_len = hello_set_sni(raw, len, cfg.host, cfg.hello, err, sizeof err);
    if (cfg.hello_len == 0)
        DIE("%s: %s", path, err);
}

/* The GET inside TLS: K bytes (S for interceptbulk), the placeholder; for
 * ws, the upgrade request up to its key's value (ws_ask ends it). */
static void build_tls_request(void)
{
    int n;
    if (cfg.mode == MODE_WS) {
        n = snprintf(cfg.tls_request, sizeof cfg.tls_request,
                     "GET /ws HTTP/1.1\r\nHost: %s\r\nUser-Agent: egress-load\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                     "%s%s%sSec-WebSocket-Key: ",
                     cfg.target, cfg.api_key ? "x-api-key: " : "", cfg.api_key ? cfg.api_key : "",
                     cfg.api_key ? "\r\n" : "");
        if (n < 0 || (size_t)n + WS_KEY_LEN + 4 >= sizeof cfg.tls_request)
            DIE("the upgrade request for --target %s would be over %d bytes", cfg.target, HEAD_MAX);
        cfg.tls_request_len = (size_t)n;
        return;
    }
    n = snprintf(cfg.tls_request, sizeof cfg.tls_request,
                 "GET /bytes/%" PRIu64 " HTTP/1.1\r\nHost: %s\r\nUser-Agent: egress-load\r\n"
                 "Accept: */*\r\n%s%s%s\r\n",
                 cfg.mode == MODE_INTERCEPTBULK ? cfg.bulk_bytes : cfg.reply_bytes, cfg.target,
                 cfg.api_key ? "x-api-key: " : "", cfg.api_key ? cfg.api_key : "",
                 cfg.api_key ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof cfg.tls_request)
        DIE("the GET for --target %s would be over %d bytes", cfg.target, HEAD_MAX);
    cfg.tls_request_len = (size_t)n;
}

static void build_request(void)
{
    int n;
    if (cfg.mode == MODE_HTTP)
        n = snprintf(cfg.request, sizeof cfg.request,
                     "GET %s%s/ HTTP/1.1\r\nHost: %s\r\nUser-Agent: egress-load\r\n\r\n",
                     cfg.direct ? "" : "http://", cfg.direct ? "" : cfg.target, cfg.target);
    else
        n = snprintf(cfg.request, sizeof cfg.request,
                     "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: egress-load\r\n\r\n",
                     cfg.target, cfg.target);
    cfg.request_len = (size_t)n;
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"mode", required_argument, NULL, 'm'},
        {"proxy", required_argument, NULL, 'p'},
        {"direct", required_argument, NULL, 'd'},
        {"target", required_argument, NULL, 'T'},
        {"conns", required_argument, NULL, 'c'},
        {"total", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'D'},
        {"hello", required_argument, NULL, 'H'},
        {"reply-bytes", required_argument, NULL, 'k'},
        {"bytes", required_argument, NULL, 's'},
        {"threads", required_argument, NULL, 't'},
        {"timeout", required_argument, NULL, 'o'},
        {"ramp", required_argument, NULL, 'r'},
        {"label", required_argument, NULL, 'L'},
        {"transparent", no_argument, NULL, 'x'}, /* a TLS port: no CONNECT */
        {"ca-file", required_argument, NULL, 'A'},
        {"api-key", required_argument, NULL, 'K'},
        {"resume", no_argument, NULL, 'R'},
        {"msg-bytes", required_argument, NULL, 'M'},
        {"window", required_argument, NULL, 'W'},
        {NULL, 0, NULL, 0},
    };
    int o, have_mode = 0, have_addr = 0, have_ws = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'm':
            have_mode = 0;
            for (int i = 0; i < MODE_COUNT; i++)
                if (strcmp(optarg, mode_names[i]) == 0)
                    cfg.mode = (enum mode)i, have_mode = 1;
            if (!have_mode)
                DIE("--mode must be connect, sni, http, bulk, deny, idle, intercept, "
                    "interceptbulk, interceptidle or ws, not '%s'",
                    optarg);
            break;
        case 'p':
        case 'd': {
            int len = sizeof cfg.addr;
            if (have_addr++)
                DIE("give one of --proxy and --direct");
            if (evutil_parse_sockaddr_port(optarg, (struct sockaddr *)&cfg.addr, &len))
                DIE("--%s wants a numeric ADDR:PORT, not '%s'", o == 'p' ? "proxy" : "direct",
                    optarg);
            cfg.addr_len = (socklen_t)len;
            cfg.addr_text = optarg;
            cfg.direct = o == 'd';
            break;
        }
        case 'T': cfg.target = optarg; break;
        case 'c': cfg.conns = parse_long(optarg, "--conns", 1, 1000000); break;
        case 'n': cfg.total = parse_long(optarg, "--total", 1, 1000000000); break;
        case 'D': cfg.duration = parse_secs(optarg, "--duration"); break;
        case 'H': cfg.hello_path = optarg; break;
        case 'k':
            if (bench_parse_size(optarg, &cfg.reply_bytes))
                DIE("--reply-bytes wants a size, not '%s'", optarg);
            break;
        case 's':
            if (bench_parse_size(optarg, &cfg.bulk_bytes) || cfg.bulk_bytes == 0)
                DIE("--bytes wants a size above 0, not '%s'", optarg);
            break;
        case 't': cfg.threads = parse_long(optarg, "--threads", 1, MAX_THREADS); break;
        case 'o': cfg.timeout = parse_secs(optarg, "--timeout"); break;
        case 'r': cfg.ramp = parse_long(optarg, "--ramp", 1, 1000000); break;
        case 'L': cfg.label = optarg; break;
        case 'x': cfg.transparent = true; break;
        case 'A': cfg.ca_file = optarg; break;
        case 'K':
            if (strpbrk(optarg, "\r\n"))
                DIE("--api-key must be one line");
            cfg.api_key = optarg;
            break;
        case 'R': cfg.resume = true; break;
        case 'M':
            if (bench_parse_size(optarg, &cfg.msg_bytes) || cfg.msg_bytes == 0 ||
                cfg.msg_bytes > WS_MSG_MAX)
                DIE("--msg-bytes wants a size of 1..%u, not '%s'", WS_MSG_MAX, optarg);
            have_ws = 1;
            break;
        case 'W':
            cfg.window = parse_long(optarg, "--window", 1, WS_WINDOW_MAX);
            have_ws = 1;
            break;
        default: usage();
        }
    }
    if (optind != argc || !have_mode || !have_addr || !cfg.target)
        usage();
    const char *colon = strrchr(cfg.target, ':');
    size_t hl = colon ? (size_t)(colon - cfg.target) : 0;
    if (!colon || hl == 0 || hl > HOST_MAX || !colon[1] || strchr(cfg.target, '"') ||
        strchr(cfg.target, '\\'))
        DIE("--target wants HOST:PORT, not '%s'", cfg.target);
    memcpy(cfg.host, cfg.target, hl);
    cfg.host[hl] = 0;
    if (cfg.mode == MODE_DENY && cfg.direct)
        DIE("--mode deny needs a --proxy to deny");
    if (cfg.transparent && (cfg.direct || cfg.mode == MODE_HTTP))
        DIE("--transparent wants a --proxy and a TLS mode");
    if (cfg.mode == MODE_SNI)
        cfg.transparent = true;
    if (!holds() && !cfg.total == !(cfg.duration > 0))
        DIE("give one of --total and --duration");
    if (holds() && cfg.total)
        DIE("--mode %s holds --conns tunnels: --total does not apply", mode_names[cfg.mode]);
    if (uses_tls() != (cfg.ca_file != NULL))
        DIE("--ca-file goes with the intercept modes, and they with it");
    if (!uses_tls() && (cfg.api_key || cfg.resume))
        DIE("--api-key and --resume are for the intercept modes");
    if (have_ws && cfg.mode != MODE_WS)
        DIE("--msg-bytes and --window are for --mode ws");
    if (cfg.mode == MODE_WS && cfg.transparent)
        DIE("--mode ws goes through CONNECT, or --direct");
    if (cfg.threads > cfg.conns)
        cfg.threads = cfg.conns;
    if (holds() && cfg.ramp < cfg.threads)
        cfg.ramp = cfg.threads;
    if ((cfg.mode == MODE_CONNECT || cfg.mode == MODE_SNI || cfg.mode == MODE_IDLE) &&
        cfg.reply_bytes == 0)
        DIE("--reply-bytes must be at least 1 for --mode %s", mode_names[cfg.mode]);
}

static void on_signal(int sig)
{
    (void)sig;
    g_signal = 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--selftest") == 0) {
        const char *dir = argc > 2 ? argv[2] : getenv("CLIENTHELLO_DIR");
        return selftest(dir ? dir : "tests/data/clienthello");
    }
    parse_args(argc, argv);
    if (uses_tls()) {
        tls_setup();
        build_tls_request();
        if (cfg.mode == MODE_WS)
            ws_setup();
    } else if (cfg.mode != MODE_HTTP && (cfg.mode != MODE_DENY || cfg.transparent)) {
        load_hello();
    }
    if (uses_connect() || cfg.mode == MODE_HTTP)
        build_request();

    rlim_t nofile = bench_raise_nofile();
    if ((rlim_t)cfg.conns + 64 > nofile)
        DIE("--conns %ld needs more descriptors than the limit (%llu): raise ulimit -n", cfg.conns,
            (unsigned long long)nofile);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    g_bulk_buf = bulk_stream();
    atomic_store(&g_remaining, cfg.total);

    static struct worker ws[MAX_THREADS];
    int nw = (int)cfg.threads;
    for (int i = 0; i < nw; i++)
        if (worker_setup(&ws[i], i, cfg.conns / nw + (i < cfg.conns % nw)) == -1)
            DIE("out of memory setting up worker %d", i);
    g_start_ns = now_ns();
    g_end_ns = g_start_ns + (uint64_t)(cfg.duration * 1e9);
    for (int i = 0; i < nw; i++)
        if (pthread_create(&ws[i].tid, NULL, worker_main, &ws[i]) != 0)
            DIE("pthread_create failed");
    for (int i = 0; i < nw; i++)
        pthread_join(ws[i].tid, NULL);
    if (holds() && cfg.duration == 0 && !g_signal)
        fprintf(stderr, "egress-load: every tunnel failed or closed\n");
    report(ws, nw);
    long long errs = 0;
    for (int i = 0; i < nw; i++)
        for (int k = 0; k < E_KINDS; k++)
            errs += ws[i].errors[k];
    return errs ? 1 : 0;
}
