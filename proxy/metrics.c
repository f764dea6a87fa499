/*
 * metrics.c - see metrics.h.  The counters live in process memory; the
 * page is written on demand in the Prometheus text format 0.0.4.
 *
 * Per (sandbox, owner) pair there is one struct px_msb, held in a list
 * sorted by (sandbox, owner) so that the page comes out in a stable order.
 * The list's mutex is taken only to get a handle by name, to render and to
 * sweep; a reference to a handle already held, putting one back, and all
 * counting are atomic adds, so the hot path (every accept, decision and
 * relayed buffer) never waits on it.
 *
 * Counts are sharded by thread: each worker counts into shards of its own
 * (px_metrics_thread), one per handle it has counted through, made on its
 * first count there, and into its own row of the global counters; the
 * page sums the shards.  So no two workers write the same cache line for
 * a count.  Every other thread shares shard 0.  A count is still an atomic
 * add (relaxed), so shard 0's writers and the page's reader need no lock.
 * A handle is freed only by px_metrics_sweep(), under the mutex, when its
 * count of references is 0.  Without the mutex a count only grows from a
 * reference someone holds (px_metrics_sandbox_ref), never from 0, so a
 * handle the sweep sees unreferenced stays so until it is freed.
 */
#include "metrics.h"
#include "handover.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "utf8.h"

#define DECISIONS 3 /* POLICY_ALLOW, POLICY_DENY, POLICY_WOULD_DENY */

/* Only a scraper talks to this listener; its requests are one line and a
 * few headers, never a body. */
#define MAX_HEADERS_SIZE 8192
#define MAX_BODY_SIZE    1024
#define HTTP_TIMEOUT_S   10

#define CACHE_LINE 64

/* One thread's counts for one (sandbox, owner) pair. */
struct msb_shard {
    atomic_uint_fast64_t active; /* a signed count in two's complement: summed as the others */
    atomic_uint_fast64_t conns[PX_MODE_COUNT][DECISIONS][PX_R_COUNT];
    atomic_uint_fast64_t bytes_up, bytes_down;
};

struct px_msb {
    char *sandbox, *owner; /* label values, made valid UTF-8 at creation */
    atomic_ulong refs;     /* handles out (get without put) */
    struct px_msb *next;
    /* made on first count; read on every count, so not on the line that
     * every accept writes (refs) */
    alignas(CACHE_LINE) _Atomic(struct msb_shard *) shard[PX_METRICS_SHARDS];
};

/* The row of the counting thread (0: not a worker). */
static _Thread_local unsigned my_shard;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_msb *sandboxes_list; /* under lock, sorted */

/* upstream_connect_seconds: per-bucket (not cumulative) counts; the page
 * sums them, so a bucket and _count can never disagree on one page. */
static const char *const bucket_le[] = {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                        "0.25",  "0.5",    "1",     "2.5",  "5",     "10"};
static const double bucket_bound[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                      0.25,  0.5,    1,     2.5,  5,     10};
#define BUCKETS (sizeof(bucket_bound) / sizeof(bucket_bound[0]))

static const char *const dns_results[] = {"hosts", "cache", "ok", "nxdomain", "fail"};
#define DNS_RESULTS (sizeof(dns_results) / sizeof(dns_results[0]))
static const char *const served_words[PX_DNSS_COUNT] = {"answer",  "nodata",       "nxdomain",
                                                        "refused", "rate_limited", "servfail",
                                                        "formerr", "notimp",       "dropped"};

/* The counters every connection or query may touch, a row per thread. */
struct global_row {
    alignas(CACHE_LINE) atomic_uint_fast64_t connect_buckets[BUCKETS + 1]; /* last: +Inf */
    atomic_uint_fast64_t connect_sum_ns;
    atomic_uint_fast64_t dns_counts[DNS_RESULTS];
    atomic_uint_fast64_t served_counts[PX_DNSS_COUNT];
    atomic_uint_fast64_t leaf_hits, leaf_mints;
};
static struct global_row rows[PX_METRICS_SHARDS];

/* injections_total: a slot per secret name, taken once (under inj_lock)
 * and then only counted in (no lock). */
static const char *const injection_words[PX_INJ_COUNT] = {"added", "mismatch", "unavailable",
                                                          "method", "reflected"};
struct injection_slot {
    char secret[64];
    atomic_uint_fast64_t n[PX_INJ_COUNT];
};
static struct injection_slot injections[PX_METRICS_SECRETS];
static atomic_size_t n_injections;
static pthread_mutex_t inj_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_uint_fast64_t reloads_ok, reloads_error;
static atomic_size_t n_sandboxes;

struct preset_rules {
    char *name;
    long rules;
};
static struct preset_rules *presets; /* under lock */
static size_t n_presets;             /* under lock */

static char build_version[128] = "unknown";

static struct evhttp *http_server;

/* ------------------------------------------------------------ label text */

/* A copy of s that is valid UTF-8 (the text format requires it of label
 * values): each byte that does not start a valid sequence becomes '?'.
 * Sandbox ids and owners come through the admin API's JSON and are UTF-8
 * already; preset names are file names and may be anything. */
static char *utf8_copy(const char *s)
{
    size_t n = strlen(s), i = 0;
    char *out = malloc(n + 1);

    if (out == NULL)
        abort();
    while (i < n) {
        size_t k = px_utf8_seq((const unsigned char *)s + i, n - i);
        if (k == 0) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, s + i, k);
        i += k;
    }
    out[n] = '\0';
    return out;
}

/* A label value as the text format escapes it: backslash, double quote
 * and line feed; everything else as is. */
static void put_label_value(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '\\': fputs("\\\\", f); break;
        case '"': fputs("\\\"", f); break;
        case '\n': fputs("\\n", f); break;
        default: fputc(*s, f);
        }
    }
}

/* ------------------------------------------------------------------ setup */

void px_metrics_init(const char *version)
{
    char *clean = utf8_copy(version != NULL ? version : "unknown");

    pthread_mutex_lock(&lock);
    snprintf(build_version, sizeof(build_version), "%s", clean);
    pthread_mutex_unlock(&lock);
    free(clean);
}

/* ------------------------------------------------- per-sandbox handles */

static int msb_cmp(const struct px_msb *m, const char *sandbox, const char *owner)
{
    int c = strcmp(m->sandbox, sandbox);
    return c != 0 ? c : strcmp(m->owner, owner);
}

struct px_msb *px_metrics_sandbox_get(const char *sandbox, const char *owner)
{
    char *sb = utf8_copy(sandbox != NULL ? sandbox : "");
    char *ow = utf8_copy(owner != NULL ? owner : "");
    struct px_msb **pp, *m;
    int c = 1;

    /* keyed on the cleaned text: two ids that differ only in bytes that
     * are not UTF-8 share one series instead of writing a duplicate */
    pthread_mutex_lock(&lock);
    for (pp = &sandboxes_list; *pp != NULL; pp = &(*pp)->next) {
        c = msb_cmp(*pp, sb, ow);
        if (c >= 0)
            break;
    }
    if (*pp != NULL && c == 0) {
        m = *pp;
        free(sb);
        free(ow);
    } else {
        m = aligned_alloc(CACHE_LINE, sizeof(*m)); /* a multiple of CACHE_LINE: its alignment */
        if (m == NULL)
            abort();
        memset(m, 0, sizeof(*m));
        m->sandbox = sb;
        m->owner = ow;
        m->next = *pp;
        *pp = m;
    }
    atomic_fetch_add(&m->refs, 1);
    pthread_mutex_unlock(&lock);
    return m;
}

struct px_msb *px_metrics_sandbox_ref(struct px_msb *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void px_metrics_sandbox_put(struct px_msb *m)
{
    if (m != NULL)
        atomic_fetch_sub_explicit(&m->refs, 1, memory_order_release);
}

void px_metrics_thread(unsigned index)
{
    my_shard = index < PX_METRICS_SHARDS ? index : 0;
}

/* The calling thread's shard of m, made now if it has none. */
static struct msb_shard *shard_of(struct px_msb *m)
{
    _Atomic(struct msb_shard *) *slot = &m->shard[my_shard];
    struct msb_shard *sh = atomic_load_explicit(slot, memory_order_acquire);

    if (sh != NULL)
        return sh;
    struct msb_shard *fresh =
        aligned_alloc(CACHE_LINE, (sizeof(*fresh) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE);
    if (fresh == NULL)
        abort();
    memset(fresh, 0, sizeof(*fresh));
    /* Shard 0 has several writers: the first to publish wins. */
    if (atomic_compare_exchange_strong_explicit(slot, &sh, fresh, memory_order_acq_rel,
                                                memory_order_acquire))
        return fresh;
    free(fresh);
    return sh;
}

void px_metrics_decision(struct px_msb *m, enum px_mode mode, enum policy_decision d,
                         enum px_reason r)
{
    if ((unsigned)mode >= PX_MODE_COUNT || (unsigned)d >= DECISIONS || (unsigned)r >= PX_R_COUNT)
        return; /* a word the page could not name */
    atomic_fetch_add_explicit(&shard_of(m)->conns[mode][d][r], 1, memory_order_relaxed);
}

void px_metrics_active(struct px_msb *m, int delta)
{
    atomic_fetch_add_explicit(&shard_of(m)->active, (uint_fast64_t)(int64_t)delta,
                              memory_order_relaxed);
}

void px_metrics_bytes(struct px_msb *m, uint64_t up, uint64_t down)
{
    struct msb_shard *sh = shard_of(m);

    if (up != 0)
        atomic_fetch_add_explicit(&sh->bytes_up, up, memory_order_relaxed);
    if (down != 0)
        atomic_fetch_add_explicit(&sh->bytes_down, down, memory_order_relaxed);
}

/* The sum over m's shards of the counter at byte offset `off` in a shard. */
static uint64_t sum_of(const struct px_msb *m, size_t off)
{
    uint64_t v = 0;

    for (size_t i = 0; i < PX_METRICS_SHARDS; i++) {
        struct msb_shard *sh = atomic_load_explicit(&m->shard[i], memory_order_acquire);
        if (sh != NULL)
            v += atomic_load_explicit((atomic_uint_fast64_t *)((char *)sh + off),
                                      memory_order_relaxed);
    }
    return v;
}

/* active_connections: a sum that wraps as the signed count it is. */
static long active_of(const struct px_msb *m)
{
    return (long)(int64_t)sum_of(m, offsetof(struct msb_shard, active));
}

/* Free every handle nothing holds (lock held). */
static void sweep_locked(void)
{
    for (struct px_msb **pp = &sandboxes_list; *pp != NULL;) {
        struct px_msb *m = *pp;
        if (atomic_load_explicit(&m->refs, memory_order_acquire) != 0 || active_of(m) != 0) {
            pp = &m->next;
            continue;
        }
        *pp = m->next;
        for (size_t i = 0; i < PX_METRICS_SHARDS; i++)
            free(atomic_load(&m->shard[i]));
        free(m->sandbox);
        free(m->owner);
        free(m);
    }
}

void px_metrics_sweep(void)
{
    pthread_mutex_lock(&lock);
    sweep_locked();
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------- global counters */

void px_metrics_upstream_connect(double seconds)
{
    size_t i = 0;

    if (!(seconds >= 0)) /* NaN or negative: a clock step, count it as 0 */
        seconds = 0;
    while (i < BUCKETS && seconds > bucket_bound[i])
        i++;
    atomic_fetch_add_explicit(&rows[my_shard].connect_buckets[i], 1, memory_order_relaxed);
    /* nanoseconds in an integer: atomics on a double need a CAS loop */
    if (seconds > 1e9)
        seconds = 1e9;
    atomic_fetch_add_explicit(&rows[my_shard].connect_sum_ns, (uint64_t)(seconds * 1e9 + 0.5),
                              memory_order_relaxed);
}

void px_metrics_dns(const char *result)
{
    for (size_t i = 0; result != NULL && i < DNS_RESULTS; i++) {
        if (strcmp(result, dns_results[i]) == 0) {
            atomic_fetch_add_explicit(&rows[my_shard].dns_counts[i], 1, memory_order_relaxed);
            return;
        }
    }
}

void px_metrics_dns_query(enum px_dns_served r)
{
    if ((unsigned)r < PX_DNSS_COUNT)
        atomic_fetch_add_explicit(&rows[my_shard].served_counts[r], 1, memory_order_relaxed);
}

/* The slot of secret among the first n taken, or NULL. */
static struct injection_slot *find_injection(const char *secret, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(injections[i].secret, secret) == 0)
            return &injections[i];
    return NULL;
}

/* The slot of secret, taken now if it has none (NULL when all are). */
static struct injection_slot *injection_slot(const char *secret)
{
    struct injection_slot *s = find_injection(secret, atomic_load(&n_injections));

    if (s != NULL || strlen(secret) >= sizeof(s->secret))
        return s;
    pthread_mutex_lock(&inj_lock);
    size_t n = atomic_load(&n_injections);
    s = find_injection(secret, n);
    if (s == NULL && n < PX_METRICS_SECRETS) {
        s = &injections[n];
        strcpy(s->secret, secret);
        atomic_store(&n_injections, n + 1); /* published once it is written */
    }
    pthread_mutex_unlock(&inj_lock);
    return s;
}

void px_metrics_injection(const char *secret, enum px_injection r)
{
    struct injection_slot *s = (unsigned)r < PX_INJ_COUNT ? injection_slot(secret) : NULL;

    if (s != NULL)
        atomic_fetch_add_explicit(&s->n[r], 1, memory_order_relaxed);
}

void px_metrics_leaf(bool hit)
{
    struct global_row *g = &rows[my_shard];

    atomic_fetch_add_explicit(hit ? &g->leaf_hits : &g->leaf_mints, 1, memory_order_relaxed);
}

void px_metrics_reload(bool ok)
{
    atomic_fetch_add_explicit(ok ? &reloads_ok : &reloads_error, 1, memory_order_relaxed);
}

static void free_presets(struct preset_rules *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(p[i].name);
    free(p);
}

void px_metrics_set_policy(const struct policy *p)
{
    struct preset_rules *fresh = NULL, *old;
    size_t n = 0, old_n;

    while (p != NULL && policy_preset_name(p, n) != NULL)
        n++;
    if (n > 0 && (fresh = calloc(n, sizeof(*fresh))) == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *name = policy_preset_name(p, i);
        fresh[i].name = utf8_copy(name);
        fresh[i].rules = policy_preset_rules(p, name);
    }
    pthread_mutex_lock(&lock);
    old = presets;
    old_n = n_presets;
    presets = fresh;
    n_presets = n;
    pthread_mutex_unlock(&lock);
    free_presets(old, old_n);
}

void px_metrics_set_sandboxes(size_t n)
{
    atomic_store(&n_sandboxes, n);
}

/* ------------------------------------------------------------- the page */

void px_metrics_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP egressd_%s %s\n# TYPE egressd_%s %s\n", name, help, name, type);
}

/* `NAME{sandbox="..",owner=".."` left open for more labels. */
static void series_start(FILE *f, const char *name, const struct px_msb *m)
{
    fprintf(f, "egressd_%s{sandbox=\"", name);
    put_label_value(f, m->sandbox);
    fputs("\",owner=\"", f);
    put_label_value(f, m->owner);
    fputc('"', f);
}

static void render_connections(FILE *f)
{
    px_metrics_family(
        f, "connections_total", "counter",
        "Connections and requests decided, by sandbox, owner, mode, decision and reason.");
    for (const struct px_msb *m = sandboxes_list; m != NULL; m = m->next) {
        for (int mode = 0; mode < PX_MODE_COUNT; mode++) {
            for (int d = 0; d < DECISIONS; d++) {
                for (int r = 0; r < PX_R_COUNT; r++) {
                    uint64_t v = sum_of(m, offsetof(struct msb_shard, conns[mode][d][r]));
                    if (v == 0)
                        continue;
                    series_start(f, "connections_total", m);
                    fprintf(f, ",mode=\"%s\",decision=\"%s\",reason=\"%s\"} %llu\n",
                            px_mode_str(mode), policy_decision_str(d), px_reason_str(r),
                            (unsigned long long)v);
                }
            }
        }
    }
}

static void render_sandbox_gauges(FILE *f)
{
    const struct px_msb *m;

    px_metrics_family(f, "active_connections", "gauge",
                      "Connections open now, by sandbox and owner.");
    for (m = sandboxes_list; m != NULL; m = m->next) {
        series_start(f, "active_connections", m);
        fprintf(f, "} %ld\n", active_of(m));
    }
    px_metrics_family(f, "bytes_total", "counter",
                      "Bytes relayed, by sandbox, owner and direction (up: client to origin).");
    for (m = sandboxes_list; m != NULL; m = m->next) {
        series_start(f, "bytes_total", m);
        fprintf(f, ",direction=\"up\"} %llu\n",
                (unsigned long long)sum_of(m, offsetof(struct msb_shard, bytes_up)));
        series_start(f, "bytes_total", m);
        fprintf(f, ",direction=\"down\"} %llu\n",
                (unsigned long long)sum_of(m, offsetof(struct msb_shard, bytes_down)));
    }
}

/* The connections of m with decision d, over every mode and reason. */
static uint64_t decided(const struct px_msb *m, int d)
{
    uint64_t v = 0;

    for (int mode = 0; mode < PX_MODE_COUNT; mode++)
        for (int r = 0; r < PX_R_COUNT; r++)
            v += sum_of(m, offsetof(struct msb_shard, conns[mode][d][r]));
    return v;
}

json_t *px_metrics_traffic_json(void)
{
    json_t *a = json_array();

    pthread_mutex_lock(&lock);
    for (const struct px_msb *m = sandboxes_list; m != NULL; m = m->next)
        json_array_append_new(
            a, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "sandbox", m->sandbox, "owner",
                         m->owner, "active", (json_int_t)active_of(m), "allowed",
                         (json_int_t)decided(m, POLICY_ALLOW), "denied",
                         (json_int_t)decided(m, POLICY_DENY), "bytes_up",
                         (json_int_t)sum_of(m, offsetof(struct msb_shard, bytes_up)), "bytes_down",
                         (json_int_t)sum_of(m, offsetof(struct msb_shard, bytes_down))));
    pthread_mutex_unlock(&lock);
    return a;
}

/* The sum over the threads' rows of the counter at byte offset off. */
static uint64_t row_sum(size_t off)
{
    uint64_t v = 0;

    for (size_t i = 0; i < PX_METRICS_SHARDS; i++)
        v += atomic_load_explicit((atomic_uint_fast64_t *)((char *)&rows[i] + off),
                                  memory_order_relaxed);
    return v;
}

static void render_histogram(FILE *f)
{
    uint64_t cumulative = 0;

    px_metrics_family(f, "upstream_connect_seconds", "histogram",
                      "Seconds taken to establish a connection upstream.");
    for (size_t i = 0; i <= BUCKETS; i++) {
        cumulative += row_sum(offsetof(struct global_row, connect_buckets[i]));
        fprintf(f, "egressd_upstream_connect_seconds_bucket{le=\"%s\"} %llu\n",
                i < BUCKETS ? bucket_le[i] : "+Inf", (unsigned long long)cumulative);
    }
    fprintf(f, "egressd_upstream_connect_seconds_sum %.9f\n",
            (double)row_sum(offsetof(struct global_row, connect_sum_ns)) / 1e9);
    fprintf(f, "egressd_upstream_connect_seconds_count %llu\n", (unsigned long long)cumulative);
}

static void render_globals(FILE *f)
{
    px_metrics_family(f, "dns_lookups_total", "counter",
                      "Name lookups, by where the answer came from or how they failed.");
    for (size_t i = 0; i < DNS_RESULTS; i++)
        fprintf(f, "egressd_dns_lookups_total{result=\"%s\"} %llu\n", dns_results[i],
                (unsigned long long)row_sum(offsetof(struct global_row, dns_counts[i])));
    px_metrics_family(f, "dns_queries_total", "counter",
                      "Queries to the policy DNS server, by what it answered.");
    for (size_t i = 0; i < PX_DNSS_COUNT; i++)
        fprintf(f, "egressd_dns_queries_total{result=\"%s\"} %llu\n", served_words[i],
                (unsigned long long)row_sum(offsetof(struct global_row, served_counts[i])));
    px_metrics_family(
        f, "injections_total", "counter",
        "Credential injection: what was done with each secret's placeholder in requests.");
    for (size_t i = 0; i < atomic_load(&n_injections); i++)
        for (size_t r = 0; r < PX_INJ_COUNT; r++) {
            fputs("egressd_injections_total{secret=\"", f);
            put_label_value(f, injections[i].secret);
            fprintf(f, "\",result=\"%s\"} %llu\n", injection_words[r],
                    (unsigned long long)atomic_load(&injections[i].n[r]));
        }
    px_metrics_family(
        f, "leaf_certificates_total", "counter",
        "Credential injection: an intercepted host's leaf from a worker's cache, or minted.");
    fprintf(f, "egressd_leaf_certificates_total{result=\"hit\"} %llu\n",
            (unsigned long long)row_sum(offsetof(struct global_row, leaf_hits)));
    fprintf(f, "egressd_leaf_certificates_total{result=\"mint\"} %llu\n",
            (unsigned long long)row_sum(offsetof(struct global_row, leaf_mints)));
    px_metrics_family(f, "policy_reloads_total", "counter", "Policy reloads, by result.");
    fprintf(f, "egressd_policy_reloads_total{result=\"ok\"} %llu\n",
            (unsigned long long)atomic_load(&reloads_ok));
    fprintf(f, "egressd_policy_reloads_total{result=\"error\"} %llu\n",
            (unsigned long long)atomic_load(&reloads_error));
    px_metrics_family(f, "policy_rules", "gauge", "Rules in each preset of the policy in force.");
    for (size_t i = 0; i < n_presets; i++) {
        fputs("egressd_policy_rules{preset=\"", f);
        put_label_value(f, presets[i].name);
        fprintf(f, "\"} %ld\n", presets[i].rules);
    }
    px_metrics_family(f, "sandboxes", "gauge", "Sandbox bindings known.");
    fprintf(f, "egressd_sandboxes %zu\n", atomic_load(&n_sandboxes));
    px_metrics_family(f, "build_info", "gauge", "Always 1; the version of egressd in its label.");
    fputs("egressd_build_info{version=\"", f);
    put_label_value(f, build_version);
    fputs("\"} 1\n", f);
}

static void (*section)(FILE *f); /* px_metrics_section's */

void px_metrics_section(void (*render)(FILE *f))
{
    section = render;
}

char *px_metrics_render(size_t *len)
{
    char *page = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&page, &size);

    if (f == NULL)
        abort();
    pthread_mutex_lock(&lock);
    sweep_locked();
    render_connections(f);
    render_sandbox_gauges(f);
    render_histogram(f);
    render_globals(f);
    if (section != NULL)
        section(f);
    pthread_mutex_unlock(&lock);
    if (fclose(f) != 0)
        abort(); /* memory streams fail only when out of memory */
    if (len != NULL)
        *len = size;
    return page;
}

/* ---------------------------------------------------------- the listener */

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *type,
                       const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *buf = evbuffer_new();
    char clen[32];

    if (buf == NULL)
        abort();
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        /* evhttp would send the body after a HEAD too: give only its size */
        snprintf(clen, sizeof(clen), "%zu", len);
        evhttp_add_header(h, "Content-Length", clen);
    } else {
        evbuffer_add(buf, body, len);
    }
    evhttp_send_reply(req, code, reason, buf);
    evbuffer_free(buf);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    static const char plain[] = "text/plain; charset=utf-8";
    enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;

    (void)arg;
    if (path == NULL)
        path = "";
    if (strcmp(path, "/metrics") != 0 && strcmp(path, "/healthz") != 0) {
        reply_text(req, HTTP_NOTFOUND, "Not Found", plain, "not found\n", 10);
        return;
    }
    if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
        reply_text(req, 405, "Method Not Allowed", plain, "method not allowed\n", 19);
        return;
    }
    if (strcmp(path, "/healthz") == 0) {
        reply_text(req, HTTP_OK, "OK", plain, "ok\n", 3);
        return;
    }
    size_t len;
    char *page = px_metrics_render(&len);
    reply_text(req, HTTP_OK, "OK", "text/plain; version=0.0.4; charset=utf-8", page, len);
    free(page);
}

/* The metrics page's listening socket, in http_server. */
static struct evhttp_bound_socket *bound;

int px_metrics_listen(struct event_base *base, const struct px_addr *addr, char *err, size_t errlen)
{
    struct evconnlistener *l;

    if (http_server != NULL) {
        snprintf(err, errlen, "%s: the metrics listener is already running", addr->text);
        return -1;
    }
    http_server = evhttp_new(base);
    if (http_server == NULL) {
        snprintf(err, errlen, "%s: cannot create the HTTP server", addr->text);
        return -1;
    }
    int fd = px_handover_claim(PX_SOCK_METRICS, (const struct sockaddr *)&addr->ss, addr->len);
    if (fd != -1) /* a predecessor's (handover.h) */
        l = evconnlistener_new(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
                               fd);
    else
        l = evconnlistener_new_bind(
            base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, -1,
            (const struct sockaddr *)&addr->ss, (int)addr->len);
    if (l == NULL || (bound = evhttp_bind_listener(http_server, l)) == NULL) {
        snprintf(err, errlen, "%s: %s", addr->text, strerror(errno));
        if (l != NULL)
            evconnlistener_free(l);
        else if (fd != -1)
            close(fd);
        evhttp_free(http_server);
        http_server = NULL;
        return -1;
    }
    px_handover_note(PX_SOCK_METRICS, evconnlistener_get_fd(l));
    /* evhttp answers methods outside this set with 501 itself; let all
     * through so that they get the 405 the contract promises */
    evhttp_set_allowed_methods(http_server, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                                EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
                                                EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
                                                EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(http_server, MAX_HEADERS_SIZE);
    evhttp_set_max_body_size(http_server, MAX_BODY_SIZE);
    evhttp_set_timeout(http_server, HTTP_TIMEOUT_S);
    evhttp_set_gencb(http_server, on_request, NULL);
    return 0;
}

void px_metrics_unlisten(void)
{
    if (http_server != NULL && bound != NULL)
        evhttp_del_accept_socket(http_server, bound);
    bound = NULL;
}

void px_metrics_stop(void)
{
    if (http_server == NULL)
        return;
    evhttp_free(http_server); /* frees its bound listeners and connections */
    http_server = NULL;
}
