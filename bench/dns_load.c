/*
 * dns_load.c - a UDP DNS load generator for egressd's policy DNS server and
 * its peers (bench/dns.sh).
 *
 *   dns-load --server ADDR:PORT --source ADDR (--names FILE | --name NAME)
 *            [--type A|AAAA] [--seconds S] [--window N] [--threads T]
 *            [--sockets K] [--timeout MS] [--expect RCODE] [--label TEXT]
 *            [--json]
 *
 * Each of T threads keeps N queries outstanding (--window, per thread) over
 * K UDP sockets of its own (--sockets, default 8), each bound to --source
 * and connected to --server: the server sees the address a sandbox is bound
 * to, from K source ports, so a server with one SO_REUSEPORT socket per
 * worker spreads them over its workers.  A query has a random 16-bit id
 * that no other query outstanding on its socket has, RD set, no EDNS0.  An
 * answer is matched to its query by that id and checked with dns/'s
 * dns_reply_parse: it must be a well-formed response whose one question is
 * the query's name (case aside), type and class IN, without TC.  For S
 * seconds (--seconds, default 4) every answer is followed at once by a new
 * query; then the queries outstanding get --timeout to be answered.  A
 * query without an answer within --timeout (default 500 ms) is lost, and a
 * new one takes its place; an answer that comes after that is late.
 *
 * Names: --name NAME, or --names FILE with one "NAME [ADDR]" a line ('#'
 * starts a comment); each query asks one drawn at random.  A name
 * "*.SUFFIX" stands for a new name under SUFFIX at every query (its first
 * label made of the run's random tag, the thread and a counter: never the
 * same name twice), so no cache can answer it.  ADDR, an IPv4 or IPv6
 * address, is one a NOERROR answer for the name must hold.  --expect RCODE
 * (NOERROR, NXDOMAIN, ... or a number): an answer with another rcode is
 * wrong.
 *
 * Output: one line for people, or with --json one JSON line: answered
 * queries per second, latency from the send to the answer (p50, p90, p99,
 * max, in µs, from a histogram: bench_hist.h), the count of each rcode,
 * sent, answered, lost, late, the errors by kind (malformed: not a
 * well-formed response; mismatch: another question; truncated: TC set;
 * wrong: not the expected rcode or address; refused: ICMP port unreachable)
 * and the generator's own CPU time (cpu_s).  The first few errors are shown
 * on stderr.  Exit status 1 when a query was lost or an answer was an error,
 * 2 for a usage error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"
#include "bench_hist.h"
#include "dns.h"

#define MAX_THREADS      16
#define MAX_SOCKETS      64    /* per thread */
#define MAX_WINDOW       32768 /* queries outstanding per thread: at most half the ids */
#define MAX_NAMES        1000000
#define BATCH            64 /* datagrams per recvmmsg / sendmmsg */
#define QUERY_MAX        (DNS_HEADER_LEN + DNS_NAME_WIRE_MAX + 4)
#define ANSWER_MAX       2048 /* a longer datagram is cut: malformed */
#define TICK_MS          10   /* timeouts, the end of the run, refills */
#define IDS              65536
#define FLAG_RD          0x0100
#define RANDOM_LABEL_MAX 32 /* "q" + 8 hex tag + 2 hex thread + 16 hex counter, and room */
#define RCODE_SLOTS      32 /* rcodes counted one by one; higher ones in the last */
#define ERRORS_SHOWN     5
#define NS_PER_MS        1000000ull
#define NS_PER_S         1000000000ull
#define LINE_MAX_BYTES   1024

/* ---------------------------------------------------------------------------
 * Configuration
 * ------------------------------------------------------------------------- */

enum err_kind { E_MALFORMED, E_MISMATCH, E_TRUNCATED, E_WRONG, E_REFUSED, E_KINDS };
static const char *const err_names[] = {"malformed", "mismatch", "truncated", "wrong", "refused"};

/* One name to ask: its wire form (for a "*." name, the suffix's), its text,
 * and the address its answers must hold (has_addr). */
struct name {
    uint8_t wire[DNS_NAME_WIRE_MAX];
    size_t wire_len;
    char text[DNS_NAME_TEXT_MAX + 1];
    bool fresh; /* "*.SUFFIX": a new first label each query */
    bool has_addr;
    uint8_t addr[16]; /* IPv4 as ::ffff:a.b.c.d, as dns_reply_parse keeps it */
};

static struct {
    const char *server_text, *source_text, *names_path, *one_name, *label;
    struct sockaddr_storage server, source;
    socklen_t server_len, source_len;
    uint16_t qtype;
    double seconds;
    long window, threads, sockets;
    uint64_t timeout_ns;
    int expect; /* -1: any rcode */
    bool json;
    struct name *names;
    size_t n_names;
    uint32_t tag; /* this run's, in every fresh name */
} cfg = {.qtype = DNS_T_A,
         .seconds = 4,
         .window = 64,
         .threads = 1,
         .sockets = 8,
         .timeout_ns = 500 * NS_PER_MS,
         .expect = -1};

static uint64_t g_start_ns, g_end_ns;
static atomic_int g_err_shown;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------------------
 * Threads, sockets and outstanding queries
 * ------------------------------------------------------------------------- */

/* One query in flight (busy), or a place for the next one. */
struct slot {
    bool busy;
    uint16_t id;
    uint32_t name; /* index into cfg.names */
    uint64_t sent_ns;
    char text[DNS_NAME_TEXT_MAX + 1]; /* the name asked, for the answer's check */
};

struct sock {
    int fd;
    struct slot *slots;
    size_t n_slots;
    uint32_t *by_id; /* IDS entries: the busy slot's index + 1, 0 for none */
};

/* Datagrams queued for one sendmmsg, and the slot each one is for. */
struct batch {
    unsigned n;
    struct mmsghdr msg[BATCH];
    struct iovec iov[BATCH];
    uint32_t slot[BATCH];
    uint8_t buf[BATCH][QUERY_MAX];
};

struct thread {
    int id, ep;
    pthread_t tid;
    uint64_t rng;
    uint64_t fresh_count; /* fresh names made so far */
    struct sock socks[MAX_SOCKETS];
    int n_socks;
    long busy; /* slots with a query in flight */
    bool stopping;
    uint64_t give_up_ns; /* stopping: when the last outstanding ones are lost */
    struct batch out;
    struct mmsghdr in_msg[BATCH];
    struct iovec in_iov[BATCH];
    uint8_t in_buf[BATCH][ANSWER_MAX];
    /* results */
    uint64_t sent, answered, lost, late, unsent, last_answer_ns;
    uint64_t errors[E_KINDS];
    uint64_t rcodes[RCODE_SLOTS];
    struct hist hist;
};

/* xorshift64*: the ids and the names drawn; not for secrets. */
static uint64_t rnd(struct thread *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return t->rng * 0x2545F4914F6CDD1Dull;
}

/* Show the first few errors of the run on stderr, so a wrong server is
 * seen, not guessed. */
static void show_error(enum err_kind k, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void show_error(enum err_kind k, const char *name, const char *fmt, ...)
{
    if (atomic_fetch_add(&g_err_shown, 1) >= ERRORS_SHOWN)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dns-load: %s: %s: ", err_names[k], name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Write the query for name n with this id into out (QUERY_MAX bytes) and
 * the name it asks into text; returns its length.  A fresh name gets its
 * new first label here. */
static size_t query_build(struct thread *t, const struct name *n, uint16_t id, char *text,
                          uint8_t *out)
{
    memset(out, 0, DNS_HEADER_LEN);
    out[0] = (uint8_t)(id >> 8), out[1] = (uint8_t)id;
    out[2] = FLAG_RD >> 8;
    out[5] = 1; /* QDCOUNT */
    size_t at = DNS_HEADER_LEN;
    if (n->fresh) {
        char label[RANDOM_LABEL_MAX];
        int ll = snprintf(label, sizeof label, "q%08" PRIx32 "%02x%" PRIx64, cfg.tag, t->id,
                          t->fresh_count++);
        out[at++] = (uint8_t)ll;
        memcpy(out + at, label, (size_t)ll), at += (size_t)ll;
        snprintf(text, DNS_NAME_TEXT_MAX + 1, "%s.%s", label, n->text);
    } else {
        memcpy(text, n->text, strlen(n->text) + 1);
    }
    memcpy(out + at, n->wire, n->wire_len), at += n->wire_len;
    out[at++] = (uint8_t)(cfg.qtype >> 8), out[at++] = (uint8_t)cfg.qtype;
    out[at++] = 0, out[at++] = DNS_CLASS_IN;
    return at;
}

/* Send what t->out holds on s.  A datagram the socket would not take
 * (EAGAIN, ENOBUFS) frees its slot for the next tick; ECONNREFUSED (the
 * server's port closed) is an error. */
static void flush(struct thread *t, struct sock *s)
{
    struct batch *b = &t->out;
    unsigned done = 0;
    while (done < b->n) {
        int k = sendmmsg(s->fd, b->msg + done, b->n - done, 0);
        if (k > 0) {
            done += (unsigned)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        bool refused = k < 0 && errno == ECONNREFUSED;
        struct slot *sl = &s->slots[b->slot[done]];
        sl->busy = false;
        s->by_id[sl->id] = 0;
        t->busy--, t->sent--;
        if (refused) {
            t->errors[E_REFUSED]++;
            show_error(E_REFUSED, sl->text, "the server's port is closed");
        } else {
            t->unsent++;
        }
        done++;
    }
    b->n = 0;
}

/* Put a new query in slot i of s and queue it (sending the queue first
 * when it is full). */
static void ask(struct thread *t, struct sock *s, uint32_t i, uint64_t now)
{
    struct batch *b = &t->out;
    if (b->n == BATCH)
        flush(t, s);
    struct slot *sl = &s->slots[i];
    do
        sl->id = (uint16_t)(rnd(t) >> 48);
    while (s->by_id[sl->id]);
    sl->name = (uint32_t)(rnd(t) % cfg.n_names);
    size_t len = query_build(t, &cfg.names[sl->name], sl->id, sl->text, b->buf[b->n]);
    b->iov[b->n] = (struct iovec){.iov_base = b->buf[b->n], .iov_len = len};
    b->msg[b->n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &b->iov[b->n], .msg_iovlen = 1}};
    b->slot[b->n++] = i;
    s->by_id[sl->id] = i + 1;
    sl->busy = true;
    sl->sent_ns = now;
    t->busy++, t->sent++;
}

/* Whether the answer holds addr. */
static bool has_addr(const struct dns_reply *r, const uint8_t *addr)
{
    for (size_t i = 0; i < r->n_addr; i++)
        if (memcmp(r->addr[i], addr, sizeof r->addr[i]) == 0)
            return true;
    return false;
}

/* What is wrong with msg[0..len) as the answer to sl's query: E_KINDS for
 * nothing.  Counts its rcode when it is a response to the question. */
static enum err_kind judge(struct thread *t, const struct slot *sl, const uint8_t *msg, size_t len,
                           bool cut)
{
    struct dns_reply r;
    const struct name *n = &cfg.names[sl->name];
    if (cut || !dns_reply_parse(msg, len, &r)) {
        show_error(E_MALFORMED, sl->text, "%zu bytes that are not a well-formed response", len);
        return E_MALFORMED;
    }
    if (r.qdcount != 1 || strcasecmp(r.name, sl->text) != 0 || r.qtype != cfg.qtype ||
        r.qclass != DNS_CLASS_IN) {
        show_error(E_MISMATCH, sl->text, "the answer's question is %s type %u class %u",
                   r.qdcount == 1 ? r.name : "(not one)", r.qtype, r.qclass);
        return E_MISMATCH;
    }
    t->rcodes[r.rcode < RCODE_SLOTS ? r.rcode : RCODE_SLOTS - 1]++;
    if (r.tc) {
        show_error(E_TRUNCATED, sl->text, "TC set");
        return E_TRUNCATED;
    }
    if (cfg.expect >= 0 && r.rcode != cfg.expect) {
        show_error(E_WRONG, sl->text, "%s, expected %s", dns_rcode_str(r.rcode),
                   dns_rcode_str(cfg.expect));
        return E_WRONG;
    }
    if (r.rcode == DNS_RC_NOERROR && n->has_addr && !has_addr(&r, n->addr)) {
        show_error(E_WRONG, sl->text, "NOERROR with %zu addresses, not the one expected", r.n_addr);
        return E_WRONG;
    }
    return E_KINDS;
}

/* One datagram from s: matched by id to its slot, timed, judged; the slot
 * asks again unless the run is over. */
static void on_answer(struct thread *t, struct sock *s, const uint8_t *msg, size_t len, bool cut,
                      uint64_t now)
{
    if (len < DNS_HEADER_LEN) {
        t->errors[E_MALFORMED]++;
        show_error(E_MALFORMED, "?", "a datagram of %zu bytes", len);
        return;
    }
    uint16_t id = (uint16_t)(msg[0] << 8 | msg[1]);
    if (s->by_id[id] == 0) {
        t->late++;
        return;
    }
    uint32_t i = s->by_id[id] - 1;
    struct slot *sl = &s->slots[i];
    s->by_id[id] = 0;
    sl->busy = false;
    t->busy--;
    t->answered++;
    t->last_answer_ns = now;
    hist_add(&t->hist, (now - sl->sent_ns + 500) / 1000);
    enum err_kind k = judge(t, sl, msg, len, cut);
    if (k != E_KINDS)
        t->errors[k]++;
    if (!t->stopping)
        ask(t, s, i, now);
}

/* Read every answer s has now, asking again for each; then send. */
static void drain(struct thread *t, struct sock *s, uint64_t now)
{
    for (;;) {
        int n = recvmmsg(s->fd, t->in_msg, BATCH, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == ECONNREFUSED) {
                t->errors[E_REFUSED]++;
                show_error(E_REFUSED, cfg.server_text, "the server's port is closed");
                continue;
            }
            break; /* EAGAIN: all read */
        }
        for (int j = 0; j < n; j++)
            on_answer(t, s, t->in_buf[j], t->in_msg[j].msg_len,
                      (t->in_msg[j].msg_hdr.msg_flags & MSG_TRUNC) != 0, now);
        if (n < BATCH)
            break;
    }
    flush(t, s);
}

/* Every TICK_MS: the end of the run, lost queries, slots to fill again. */
static void tick(struct thread *t, uint64_t now)
{
    if (!t->stopping && now >= g_end_ns) {
        t->stopping = true;
        t->give_up_ns = now + cfg.timeout_ns;
    }
    bool give_up = t->stopping && now >= t->give_up_ns;
    for (int k = 0; k < t->n_socks; k++) {
        struct sock *s = &t->socks[k];
        for (uint32_t i = 0; i < s->n_slots; i++) {
            struct slot *sl = &s->slots[i];
            if (sl->busy && (give_up || now - sl->sent_ns >= cfg.timeout_ns)) {
                sl->busy = false;
                s->by_id[sl->id] = 0;
                t->busy--, t->lost++;
            }
            if (!sl->busy && !t->stopping)
                ask(t, s, i, now);
        }
        flush(t, s);
    }
}

static void *thread_main(void *arg)
{
    struct thread *t = arg;
    struct epoll_event ev[MAX_SOCKETS];
    uint64_t now = now_ns(), next_tick = now + TICK_MS * NS_PER_MS;
    tick(t, now);
    while (!t->stopping || t->busy > 0) {
        int n = epoll_wait(t->ep, ev, MAX_SOCKETS, TICK_MS);
        now = now_ns();
        for (int i = 0; i < n; i++)
            drain(t, &t->socks[ev[i].data.u32], now);
        if (now >= next_tick) {
            tick(t, now);
            next_tick = now + TICK_MS * NS_PER_MS;
        }
    }
    return NULL;
}

/* One socket bound to --source, connected to --server, in t's epoll set,
 * with `window` slots.  -1 with errno. */
static int sock_open(struct thread *t, struct sock *s, size_t window)
{
    s->fd = socket(cfg.server.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->fd < 0)
        return -1;
    if (bind(s->fd, (struct sockaddr *)&cfg.source, cfg.source_len) != 0 ||
        connect(s->fd, (struct sockaddr *)&cfg.server, cfg.server_len) != 0)
        return -1;
    s->n_slots = window;
    s->slots = calloc(window, sizeof *s->slots);
    s->by_id = calloc(IDS, sizeof *s->by_id);
    if (!s->slots || !s->by_id)
        return errno = ENOMEM, -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(s - t->socks)};
    return epoll_ctl(t->ep, EPOLL_CTL_ADD, s->fd, &ev);
}

/* Thread t's sockets (the window spread over them) and receive buffers.
 * -1 with errno. */
static int thread_setup(struct thread *t, int id)
{
    t->id = id;
    t->ep = epoll_create1(EPOLL_CLOEXEC);
    if (t->ep < 0 || getrandom(&t->rng, sizeof t->rng, 0) != sizeof t->rng)
        return -1;
    t->rng |= 1; /* xorshift must not start at 0 */
    t->n_socks = (int)cfg.sockets;
    for (int k = 0; k < t->n_socks; k++) {
        size_t w = (size_t)(cfg.window / t->n_socks + (k < cfg.window % t->n_socks));
        if (sock_open(t, &t->socks[k], w) != 0)
            return -1;
    }
    for (int j = 0; j < BATCH; j++) {
        t->in_iov[j] = (struct iovec){.iov_base = t->in_buf[j], .iov_len = ANSWER_MAX};
        t->in_msg[j].msg_hdr = (struct msghdr){.msg_iov = &t->in_iov[j], .msg_iovlen = 1};
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------- */

/* The results of every thread, added up. */
struct totals {
    uint64_t sent, answered, lost, late, unsent, last_ns, error_total;
    uint64_t errors[E_KINDS], rcodes[RCODE_SLOTS];
    struct hist hist;
};

static void totals_add(struct totals *a, const struct thread *t)
{
    a->sent += t->sent, a->answered += t->answered, a->lost += t->lost;
    a->late += t->late, a->unsent += t->unsent;
    if (t->last_answer_ns > a->last_ns)
        a->last_ns = t->last_answer_ns;
    for (int k = 0; k < E_KINDS; k++)
        a->errors[k] += t->errors[k], a->error_total += t->errors[k];
    for (int c = 0; c < RCODE_SLOTS; c++)
        a->rcodes[c] += t->rcodes[c];
    hist_merge(&a->hist, &t->hist);
}

/* An rcode's word; "RCODEn" (in buf) for those dns/ has none for. */
static const char *rcode_word(int c, char buf[16])
{
    const char *w = dns_rcode_str(c);
    if (strcmp(w, "UNKNOWN") != 0)
        return w;
    snprintf(buf, 16, "RCODE%d", c);
    return buf;
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void report_json(const struct totals *a, double secs, double rate)
{
    char tb[12], rb[16];
    printf("{\"server\":\"%s\",\"source\":\"%s\"", cfg.server_text, cfg.source_text);
    if (cfg.label)
        printf(",\"label\":\"%s\"", cfg.label);
    printf(",\"type\":\"%s\",\"names\":%zu,\"threads\":%ld,\"sockets\":%ld,\"window\":%ld,"
           "\"seconds\":%.3f,\"sent\":%" PRIu64 ",\"answered\":%" PRIu64 ",\"rate\":%.1f,"
           "\"p50_us\":%" PRIu64 ",\"p90_us\":%" PRIu64 ",\"p99_us\":%" PRIu64
           ",\"max_us\":%" PRIu64 ",\"rcodes\":{",
           dns_type_str(cfg.qtype, tb), cfg.n_names, cfg.threads, cfg.sockets, cfg.window, secs,
           a->sent, a->answered, rate, hist_pct(&a->hist, .50), hist_pct(&a->hist, .90),
           hist_pct(&a->hist, .99), a->hist.max_us);
    const char *sep = "";
    for (int c = 0; c < RCODE_SLOTS; c++)
        if (a->rcodes[c])
            printf("%s\"%s\":%" PRIu64, sep, rcode_word(c, rb), a->rcodes[c]), sep = ",";
    printf("},\"lost\":%" PRIu64 ",\"late\":%" PRIu64 ",\"unsent\":%" PRIu64 ",\"errors\":{",
           a->lost, a->late, a->unsent);
    for (int k = 0; k < E_KINDS; k++)
        printf("%s\"%s\":%" PRIu64, k ? "," : "", err_names[k], a->errors[k]);
    printf("},\"error_total\":%" PRIu64 ",\"cpu_s\":%.3f}\n", a->error_total, cpu_seconds());
}

static void report_text(const struct totals *a, double secs, double rate)
{
    char tb[12], rb[16];
    printf("%s%s%s %s -> %s: %" PRIu64 " answered in %.3f s = %.0f q/s; latency us p50 %" PRIu64
           " p90 %" PRIu64 " p99 %" PRIu64 " max %" PRIu64,
           cfg.label ? cfg.label : "", cfg.label ? ": " : "", dns_type_str(cfg.qtype, tb),
           cfg.source_text, cfg.server_text, a->answered, secs, rate, hist_pct(&a->hist, .50),
           hist_pct(&a->hist, .90), hist_pct(&a->hist, .99), a->hist.max_us);
    const char *sep = ";";
    for (int c = 0; c < RCODE_SLOTS; c++)
        if (a->rcodes[c])
            printf("%s %s %" PRIu64, sep, rcode_word(c, rb), a->rcodes[c]), sep = ",";
    printf("; lost %" PRIu64 ", late %" PRIu64 ", errors %" PRIu64, a->lost, a->late,
           a->error_total);
    for (int k = 0; k < E_KINDS; k++)
        if (a->errors[k])
            printf(" %s=%" PRIu64, err_names[k], a->errors[k]);
    printf("\n");
}

/* Print the run's results; true when nothing was lost and no answer was an
 * error. */
static bool report(const struct thread *ts, int nt)
{
    static struct totals a;
    for (int i = 0; i < nt; i++)
        totals_add(&a, &ts[i]);
    double secs = a.last_ns > g_start_ns ? (double)(a.last_ns - g_start_ns) / 1e9 : 0;
    double rate = secs > 0 ? (double)a.answered / secs : 0;
    if (cfg.json)
        report_json(&a, secs, rate);
    else
        report_text(&a, secs, rate);
    return a.lost == 0 && a.error_total == 0;
}

/* ---------------------------------------------------------------------------
 * Set-up
 * ------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: dns-load --server ADDR:PORT --source ADDR (--names FILE | --name NAME)\n"
            "                [--type A|AAAA] [--seconds S] [--window N] [--threads T]\n"
            "                [--sockets K] [--timeout MS] [--expect RCODE] [--label TEXT]\n"
            "                [--json]\n");
    exit(2);
}

#define DIE(...) (fprintf(stderr, "dns-load: " __VA_ARGS__), fputc('\n', stderr), exit(2))

static long parse_long(const char *s, const char *what, long lo, long hi)
{
    return bench_parse_long("dns-load", s, what, lo, hi);
}

/* A numeric address with a port (port -1: none wanted, 0 then): IPv4
 * "a.b.c.d:P", IPv6 "[x::y]:P".  False if it is not one. */
static bool parse_addr(const char *s, int port, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *p = NULL;
    size_t hl;
    if (port < 0) {
        hl = strlen(s);
    } else if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return false;
        s++, hl = (size_t)(close - s), p = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return false;
        hl = (size_t)(colon - s), p = colon + 1;
    }
    if (hl >= sizeof host)
        return false;
    memcpy(host, s, hl), host[hl] = 0;
    long pn = 0;
    if (p) {
        char *end;
        pn = strtol(p, &end, 10);
        if (end == p || *end || pn < 1 || pn > 65535)
            return false;
    }
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)pn);
        *len = sizeof *a4;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)pn);
        *len = sizeof *a6;
    } else {
        return false;
    }
    return true;
}

/* Fill n from the text of a name ("*.SUFFIX": fresh) and its optional
 * address.  False, with why, when it is not a name dns-load can ask. */
static bool name_set(struct name *n, const char *text, const char *addr, const char **why)
{
    n->fresh = strncmp(text, "*.", 2) == 0;
    if (n->fresh)
        text += 2;
    size_t tl = strlen(text);
    if (tl && text[tl - 1] == '.')
        tl--;
    if (tl == 0 || tl > DNS_NAME_TEXT_MAX - (n->fresh ? RANDOM_LABEL_MAX : 0))
        return *why = "a name of 1..253 bytes (under 220 after \"*.\")", false;
    memcpy(n->text, text, tl), n->text[tl] = 0;
    size_t w = 0;
    for (const char *l = n->text; *l;) {
        size_t ll = strcspn(l, ".");
        if (ll == 0 || ll > DNS_LABEL_MAX)
            return *why = "labels of 1..63 bytes", false;
        n->wire[w++] = (uint8_t)ll;
        memcpy(n->wire + w, l, ll), w += ll;
        l += ll + (l[ll] == '.');
    }
    n->wire[w++] = 0;
    n->wire_len = w;
    n->has_addr = addr != NULL;
    if (addr) {
        memset(n->addr, 0, sizeof n->addr);
        if (inet_pton(AF_INET, addr, n->addr + 12) == 1)
            n->addr[10] = n->addr[11] = 0xff;
        else if (inet_pton(AF_INET6, addr, n->addr) != 1)
            return *why = "an IPv4 or IPv6 address after the name", false;
    }
    return true;
}

/* The names of --names FILE: "NAME [ADDR]" a line, '#' comments. */
static void load_names(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        DIE("%s: %s", path, strerror(errno));
    size_t cap = 1024;
    cfg.names = malloc(cap * sizeof *cfg.names);
    char line[LINE_MAX_BYTES];
    for (unsigned ln = 1; cfg.names && fgets(line, sizeof line, f); ln++) {
        line[strcspn(line, "#\n")] = 0;
        char *save, *name = strtok_r(line, " \t\r", &save), *addr = strtok_r(NULL, " \t\r", &save);
        if (!name)
            continue;
        const char *why = "NAME [ADDR]";
        if (strtok_r(NULL, " \t\r", &save) || cfg.n_names == MAX_NAMES ||
            !name_set(&cfg.names[cfg.n_names], name, addr, &why))
            DIE("%s:%u: expected %s", path, ln, cfg.n_names == MAX_NAMES ? "fewer names" : why);
        if (++cfg.n_names == cap)
            cfg.names = realloc(cfg.names, (cap *= 2) * sizeof *cfg.names);
    }
    fclose(f);
    if (!cfg.names)
        DIE("out of memory reading %s", path);
    if (cfg.n_names == 0)
        DIE("%s holds no names", path);
}

/* --expect: an rcode's word or number. */
static int parse_rcode(const char *s)
{
    for (int c = 0; c < RCODE_SLOTS; c++)
        if (strcasecmp(s, dns_rcode_str(c)) == 0 && strcmp(dns_rcode_str(c), "UNKNOWN") != 0)
            return c;
    return (int)parse_long(s, "--expect", 0, RCODE_SLOTS - 1);
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"server", required_argument, NULL, 's'},  {"source", required_argument, NULL, 'b'},
        {"names", required_argument, NULL, 'f'},   {"name", required_argument, NULL, 'n'},
        {"type", required_argument, NULL, 'q'},    {"seconds", required_argument, NULL, 'S'},
        {"window", required_argument, NULL, 'w'},  {"threads", required_argument, NULL, 't'},
        {"sockets", required_argument, NULL, 'k'}, {"timeout", required_argument, NULL, 'o'},
        {"expect", required_argument, NULL, 'e'},  {"label", required_argument, NULL, 'L'},
        {"json", no_argument, NULL, 'j'},          {NULL, 0, NULL, 0},
    };
    int o;
    char *end;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 's': cfg.server_text = optarg; break;
        case 'b': cfg.source_text = optarg; break;
        case 'f': cfg.names_path = optarg; break;
        case 'n': cfg.one_name = optarg; break;
        case 'q':
            if (strcasecmp(optarg, "A") != 0 && strcasecmp(optarg, "AAAA") != 0)
                DIE("--type must be A or AAAA, not '%s'", optarg);
            cfg.qtype = strcasecmp(optarg, "A") == 0 ? DNS_T_A : DNS_T_AAAA;
            break;
        case 'S':
            cfg.seconds = strtod(optarg, &end);
            if (end == optarg || *end || !(cfg.seconds > 0) || cfg.seconds > 1e6)
                DIE("--seconds wants seconds (> 0), not '%s'", optarg);
            break;
        case 'w': cfg.window = parse_long(optarg, "--window", 1, MAX_WINDOW); break;
        case 't': cfg.threads = parse_long(optarg, "--threads", 1, MAX_THREADS); break;
        case 'k': cfg.sockets = parse_long(optarg, "--sockets", 1, MAX_SOCKETS); break;
        case 'o':
            cfg.timeout_ns = (uint64_t)parse_long(optarg, "--timeout (ms)", 1, 600000) * NS_PER_MS;
            break;
        case 'e': cfg.expect = parse_rcode(optarg); break;
        case 'L': cfg.label = optarg; break;
        case 'j': cfg.json = true; break;
        default: usage();
        }
    }
    if (optind != argc || !cfg.server_text || !cfg.source_text || !cfg.names_path == !cfg.one_name)
        usage();
    if (!parse_addr(cfg.server_text, 0, &cfg.server, &cfg.server_len))
        DIE("--server wants a numeric ADDR:PORT, not '%s'", cfg.server_text);
    if (!parse_addr(cfg.source_text, -1, &cfg.source, &cfg.source_len) ||
        cfg.source.ss_family != cfg.server.ss_family)
        DIE("--source wants a numeric address of the server's family, not '%s'", cfg.source_text);
    if (cfg.sockets > cfg.window)
        cfg.sockets = cfg.window;
    if (cfg.label && strpbrk(cfg.label, "\"\\"))
        DIE("--label may not hold '\"' or '\\'");
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    if (cfg.names_path) {
        load_names(cfg.names_path);
    } else {
        const char *why = "";
        cfg.names = calloc(1, sizeof *cfg.names);
        cfg.n_names = 1;
        if (!cfg.names || !name_set(cfg.names, cfg.one_name, NULL, &why))
            DIE("--name: expected %s, not '%s'", why, cfg.one_name);
    }
    if (getrandom(&cfg.tag, sizeof cfg.tag, 0) != sizeof cfg.tag)
        DIE("getrandom: %s", strerror(errno));

    static struct thread ts[MAX_THREADS];
    int nt = (int)cfg.threads;
    for (int i = 0; i < nt; i++)
        if (thread_setup(&ts[i], i) != 0)
            DIE("setting up thread %d: %s", i, strerror(errno));
    g_start_ns = now_ns();
    g_end_ns = g_start_ns + (uint64_t)(cfg.seconds * 1e9);
    for (int i = 0; i < nt; i++)
        if (pthread_create(&ts[i].tid, NULL, thread_main, &ts[i]) != 0)
            DIE("pthread_create failed");
    for (int i = 0; i < nt; i++)
        pthread_join(ts[i].tid, NULL);
    return report(ts, nt) ? 0 : 1;
}
