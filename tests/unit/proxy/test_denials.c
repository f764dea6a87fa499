/*
 * test_denials.c - each sandbox's recent denials (denials.c): a ring of
 * the newest PX_DENIALS_PER_SANDBOX, newest first; and, with batching
 * (as a worker does), a denial that finds the lock held waits in the
 * thread's queue and reaches its ring in order, none lost, while other
 * threads hold the lock as often as they can.  The global ring: every
 * denial numbered one more than the one before, across sandboxes and
 * threads; the newest PX_DENIALS_RECENT kept; read out after a number,
 * oldest first, or newest first; the nudge every PX_DENIALS_NUDGE_EVERY.
 * An HTTP request's path, without its query, cut to fit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "denials.h"
#include "tap.h"
#include "verdict.h"

/* The ts_ms values in sandbox id's ring, newest first; how many. */
static size_t ring_ts(const char *id, int64_t *ts, size_t max)
{
    json_t *arr = px_denials_json(id);
    size_t n = json_array_size(arr);

    for (size_t i = 0; i < n && i < max; i++) {
        /* the port carries the sequence number: ts is in whole ms */
        ts[i] = json_integer_value(json_object_get(json_array_get(arr, i), "port"));
    }
    json_decref(arr);
    return n;
}

static struct px_denial denial(unsigned seq)
{
    return (struct px_denial){.ts_ms = 1764600000000,
                              .mode = "connect",
                              .host = "denied.test",
                              .port = seq,
                              .reason = "not_allowed"};
}

static void test_ring(void)
{
    int64_t ts[32];

    for (unsigned i = 1; i <= 20; i++) {
        struct px_denial d = denial(i);
        px_denials_note("a", &d);
    }
    size_t n = ring_ts("a", ts, 32);
    ok(n == PX_DENIALS_PER_SANDBOX && ts[0] == 20 && ts[15] == 5,
       "20 denials: the newest 16, newest first (%zu: %lld .. %lld)", n, (long long)ts[0],
       (long long)ts[n ? n - 1 : 0]);
    ok(ring_ts("b", ts, 32) == 0, "a sandbox never denied has none");
}

enum { NOTES = 200000, WRITERS = 2 };

struct writer {
    char id[16];
    unsigned notes;    /* how many it makes (0: NOTES) */
    atomic_int wakes;  /* first denial queued: the lock was held */
    atomic_bool woken; /* a flush is due (what a worker's event would be) */
};

static void on_wake(void *arg)
{
    struct writer *w = arg;
    atomic_fetch_add(&w->wakes, 1);
    atomic_store(&w->woken, true);
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;

    px_denials_batch_start(on_wake, w);
    for (unsigned i = 1; i <= (w->notes ? w->notes : NOTES); i++) {
        struct px_denial d = denial(i);
        px_denials_note(w->id, &d);
        if (i % 8 == 0 && atomic_exchange(&w->woken, false))
            px_denials_flush(); /* the end of a loop round */
    }
    px_denials_batch_stop();
    return NULL;
}

static atomic_bool stop;

/* Takes the lock as often as it can, as the admin API's reads do. */
static void *reader_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        json_decref(px_denials_json("w0"));
        (void)px_denials_count();
    }
    return NULL;
}

static void test_never_waits(void)
{
    struct writer w[WRITERS];
    pthread_t t[WRITERS], r;
    int64_t ts[32];
    int wakes = 0;

    atomic_store(&stop, false);
    pthread_create(&r, NULL, reader_main, NULL);
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        snprintf(w[i].id, sizeof(w[i].id), "w%d", i);
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, true);
    pthread_join(r, NULL);
    for (int i = 0; i < WRITERS; i++) {
        wakes += atomic_load(&w[i].wakes);
        size_t n = ring_ts(w[i].id, ts, 32);
        bool in_order = n == PX_DENIALS_PER_SANDBOX;
        for (size_t k = 0; in_order && k < n; k++)
            in_order = ts[k] == (int64_t)(NOTES - k);
        ok(in_order, "%s: its ring ends with its newest 16 denials, in order", w[i].id);
    }
    ok(wakes > 0, "denials did find the lock held and waited in a queue (%d times)", wakes);
}

/* Every mode and reason word comes back whole (the ring's fields are
 * fixed-size). */
static void test_every_word(void)
{
    int cut = 0;

    for (int m = 0; m < PX_MODE_COUNT; m++)
        for (int r = 0; r < PX_R_COUNT; r++) {
            struct px_denial d = denial(0);
            d.mode = px_mode_str((enum px_mode)m);
            d.reason = px_reason_str((enum px_reason)r);
            px_denials_note("words", &d);
            json_t *arr = px_denials_json("words");
            json_t *e = json_array_get(arr, 0);
            const char *mode = json_string_value(json_object_get(e, "mode"));
            const char *reason = json_string_value(json_object_get(e, "reason"));
            if (mode == NULL || reason == NULL || strcmp(mode, d.mode) != 0 ||
                strcmp(reason, d.reason) != 0) {
                diag("cut: %s/%s came back as %s/%s", d.mode, d.reason, mode ? mode : "(null)",
                     reason ? reason : "(null)");
                cut++;
            }
            json_decref(arr);
        }
    ok(cut == 0, "every mode and reason word is kept whole");
}

/* The newest denial of sandbox id, as the admin API gives it. */
static json_t *newest(const char *id)
{
    json_t *arr = px_denials_json(id);
    json_t *e = json_incref(json_array_get(arr, 0));

    json_decref(arr);
    return e;
}

/* Names a sandbox chose come back in presentation format, whatever bytes
 * they hold, and no field is ever left out. */
static void test_hostile_names(void)
{
    struct px_denial d = denial(1);
    json_t *e;

    d.host = "a\x1b[31mRED\x1b[0m.test";
    d.sni = "s\x07.test";
    px_denials_note("hostile", &d);
    e = newest("hostile");
    const char *host = json_string_value(json_object_get(e, "host"));
    if (!ok(host != NULL && strcmp(host, "a\\027[31mRED\\027[0m.test") == 0,
            "a host with ESC bytes is kept as a\\027[31mRED\\027[0m.test"))
        diag("host: %s", host ? host : "(missing)");
    const char *sni = json_string_value(json_object_get(e, "sni"));
    ok(sni != NULL && strcmp(sni, "s\\007.test") == 0, "so is an SNI (%s)", sni ? sni : "-");
    json_decref(e);

    d.host = "\xff\xfe.test";
    d.sni = NULL;
    px_denials_note("hostile", &d);
    e = newest("hostile");
    host = json_string_value(json_object_get(e, "host"));
    if (!ok(host != NULL && strcmp(host, "\\255\\254.test") == 0,
            "a host that is not UTF-8 is there, as \\255\\254.test"))
        diag("host: %s", host ? host : "(missing)");
    ok(json_object_size(e) == 11, "all 11 fields (%zu)", json_object_size(e));
    json_decref(e);

    static const uint8_t wire[] = {5, 'a', '.', 'b', 0x1b, '\\', 4, 't', 'e', 's', 't', 0};
    d.host = "a.b\x1b\\.test"; /* the text form, ambiguous */
    d.qname = wire;
    d.qname_len = sizeof(wire);
    px_denials_note("hostile", &d);
    e = newest("hostile");
    host = json_string_value(json_object_get(e, "host"));
    ok(host != NULL && strcmp(host, "a\\.b\\027\\092.test") == 0,
       "a DNS name as it came keeps its labels: a '.' inside one is \\. (%s)", host ? host : "-");
    json_decref(e);

    d = denial(2);
    d.rule = "/etc/egressd/\xe9t\xe9.allow:3"; /* Latin-1, not UTF-8 */
    px_denials_note("hostile", &d);
    e = newest("hostile");
    const char *rule = json_string_value(json_object_get(e, "rule"));
    ok(rule != NULL && strcmp(rule, "/etc/egressd/\\233t\\233.allow:3") == 0,
       "a rule that is not UTF-8 is written escaped, not left out (%s)", rule ? rule : "-");
    json_decref(e);

    char longer[300];
    memset(longer, 'a', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    for (size_t i = 0; i < sizeof(longer) - 1; i += 2)
        longer[i] = '\x01';
    d = denial(3);
    d.host = longer;
    px_denials_note("hostile", &d);
    e = newest("hostile");
    host = json_string_value(json_object_get(e, "host"));
    ok(host != NULL && strlen(host) == 150 * 4 + 149,
       "a 299-byte host of which 150 control "
       "bytes: escaped whole, %zu bytes",
       host ? strlen(host) : 0);
    json_decref(e);
}

/* The path of an HTTP request: never its query; cut to fit; null for
 * none. */
static void test_path(void)
{
    struct px_denial d = denial(1);
    char longer[PX_DENIALS_PATH_MAX + 50];
    json_t *e;

    d.path = "/v1/items/7?api_key=SECRET";
    px_denials_note("paths", &d);
    e = newest("paths");
    const char *path = json_string_value(json_object_get(e, "path"));
    ok(path != NULL && strcmp(path, "/v1/items/7") == 0, "a path is kept without its query (%s)",
       path ? path : "-");
    json_decref(e);

    memset(longer, 'p', sizeof(longer) - 1);
    longer[0] = '/';
    longer[sizeof(longer) - 1] = '\0';
    d.path = longer;
    px_denials_note("paths", &d);
    e = newest("paths");
    path = json_string_value(json_object_get(e, "path"));
    ok(path != NULL && strlen(path) == PX_DENIALS_PATH_MAX,
       "a longer path is cut to %d bytes (%zu)", PX_DENIALS_PATH_MAX, path ? strlen(path) : 0);
    json_decref(e);

    d.path = NULL;
    px_denials_note("paths", &d);
    e = newest("paths");
    ok(json_is_null(json_object_get(e, "path")), "no path: null");
    json_decref(e);
}

/* The number of a global entry. */
static uint64_t seq_of(const json_t *o)
{
    return (uint64_t)json_integer_value(json_object_get(o, "seq"));
}

/* Numbers across sandboxes; the global ring read after a number, oldest
 * first, and newest first; what a reader is given equals what the
 * per-sandbox ring keeps, with "seq" and "sandbox". */
static void test_numbers(void)
{
    uint64_t top0 = px_denials_seq(), last;
    json_t *out[8];

    for (unsigned i = 0; i < 6; i++) {
        struct px_denial d = denial(100 + i);
        px_denials_note(i % 2 ? "odd" : "even", &d);
    }
    ok(px_denials_seq() == top0 + 6, "6 denials of two sandboxes: 6 numbers more (%llu)",
       (unsigned long long)(px_denials_seq() - top0));
    size_t n = px_denials_after(top0 + 2, top0 + 5, out, 8);
    bool in_order = n == 3;
    for (size_t i = 0; in_order && i < n; i++)
        in_order = seq_of(out[i]) == top0 + 3 + i &&
                   json_integer_value(json_object_get(out[i], "port")) == (json_int_t)(102 + i) &&
                   strcmp(json_string_value(json_object_get(out[i], "sandbox")),
                          i % 2 ? "odd" : "even") == 0;
    ok(in_order, "after N up to M: N+1 .. M, oldest first, each with its sandbox (%zu)", n);
    for (size_t i = 0; i < n; i++)
        json_decref(out[i]);

    n = px_denials_after(top0 + 5, top0 + 6, out, 8);
    json_t *mine = newest("odd");
    json_t *copy = n == 1 ? json_deep_copy(out[0]) : json_object();
    json_object_del(copy, "seq");
    json_object_del(copy, "sandbox");
    ok(n == 1 && seq_of(out[0]) == top0 + 6 && json_equal(copy, mine) &&
           json_object_size(out[0]) == json_object_size(mine) + 2,
       "a global entry is the sandbox's entry with seq and sandbox");
    json_decref(copy);
    json_decref(mine);
    for (size_t i = 0; i < n; i++)
        json_decref(out[i]);

    json_t *arr = px_denials_recent_json(top0 + 3, &last);
    ok(last == top0 + 6 && json_array_size(arr) == 3 &&
           seq_of(json_array_get(arr, 0)) == top0 + 6 && seq_of(json_array_get(arr, 2)) == top0 + 4,
       "recent after N: newest first, the newest number with it");
    json_decref(arr);
}

static atomic_int nudges;

static void on_nudge(void)
{
    atomic_fetch_add(&nudges, 1);
}

/* Only the newest PX_DENIALS_RECENT are kept; a reader asking for older
 * ones is given the oldest kept first. */
static void test_wrap(void)
{
    uint64_t top0 = px_denials_seq(), last;
    json_t *out[4];

    atomic_store(&nudges, 0);
    px_denials_set_nudge(on_nudge);
    for (unsigned i = 0; i < PX_DENIALS_RECENT + 100; i++) {
        struct px_denial d = denial(i);
        px_denials_note("wrap", &d);
    }
    px_denials_set_nudge(NULL);
    uint64_t top = px_denials_seq();
    uint64_t want = top / PX_DENIALS_NUDGE_EVERY - top0 / PX_DENIALS_NUDGE_EVERY;
    ok((uint64_t)atomic_load(&nudges) == want, "the nudge: once per %d numbers (%d, %llu)",
       PX_DENIALS_NUDGE_EVERY, atomic_load(&nudges), (unsigned long long)want);
    size_t n = px_denials_after(top0, top, out, 4);
    ok(top == top0 + PX_DENIALS_RECENT + 100 && n == 4 &&
           seq_of(out[0]) == top - PX_DENIALS_RECENT + 1 && seq_of(out[3]) == seq_of(out[0]) + 3,
       "%d more: the oldest kept is number %llu, newest - %d + 1", PX_DENIALS_RECENT + 100,
       n ? (unsigned long long)seq_of(out[0]) : 0ULL, PX_DENIALS_RECENT);
    for (size_t i = 0; i < n; i++)
        json_decref(out[i]);
    json_t *arr = px_denials_recent_json(0, &last);
    ok(json_array_size(arr) == PX_DENIALS_RECENT && seq_of(json_array_get(arr, 0)) == top &&
           last == top,
       "recent: all %d kept, newest first", PX_DENIALS_RECENT);
    json_decref(arr);
}

/* Numbers from several threads that batch: none twice, none skipped, and
 * the nudge once per PX_DENIALS_NUDGE_EVERY. */
static void test_threads_numbered(void)
{
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    uint64_t top0 = px_denials_seq();
    enum { EACH = 4 * PX_DENIALS_RECENT };

    atomic_store(&nudges, 0);
    px_denials_set_nudge(on_nudge);
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        snprintf(w[i].id, sizeof(w[i].id), "n%d", i);
        w[i].notes = EACH;
        pthread_create(&t[i], NULL, writer_main, &w[i]);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(t[i], NULL);
    px_denials_set_nudge(NULL);
    uint64_t top = px_denials_seq();
    ok(top == top0 + WRITERS * EACH, "%d threads' denials: as many numbers (%llu)", WRITERS,
       (unsigned long long)(top - top0));
    /* once for each multiple reached, or once for a gap over several */
    uint64_t most = top / PX_DENIALS_NUDGE_EVERY - top0 / PX_DENIALS_NUDGE_EVERY;
    ok(atomic_load(&nudges) > 0 && (uint64_t)atomic_load(&nudges) <= most,
       "the nudge came from the threads, %d times (at most %llu)", atomic_load(&nudges),
       (unsigned long long)most);
    /* A denial that gave way (its thread's queue full) leaves a gap; the
     * rest are numbered in each thread's own order. */
    json_t *out[PX_DENIALS_RECENT];
    size_t n = px_denials_after(top - PX_DENIALS_RECENT, top, out, PX_DENIALS_RECENT);
    bool each = n > 0;
    unsigned next[WRITERS] = {0};
    uint64_t prev = top - PX_DENIALS_RECENT;
    for (size_t i = 0; i < n; i++) {
        const char *sb = json_string_value(json_object_get(out[i], "sandbox"));
        unsigned port = (unsigned)json_integer_value(json_object_get(out[i], "port"));
        int k = sb[1] - '0';
        each = each && seq_of(out[i]) > prev && port > next[k];
        prev = seq_of(out[i]);
        next[k] = port;
        json_decref(out[i]);
    }
    ok(each && prev == top,
       "the newest %d numbers: %zu denials, in order, each thread's in its order",
       PX_DENIALS_RECENT, n);
    if (n < PX_DENIALS_RECENT)
        diag("%zu gave way (queues full while the lock was held)", PX_DENIALS_RECENT - n);
}

int main(void)
{
    test_hostile_names();
    test_every_word();
    test_ring();
    test_never_waits();
    test_path();
    test_numbers();
    test_wrap();
    test_threads_numbered();
    return tap_done();
}
