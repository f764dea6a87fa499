/*
 * test_denials.c - each sandbox's recent denials (denials.c): a ring of
 * the newest PX_DENIALS_PER_SANDBOX, newest first; and, with batching
 * (as a worker does), a denial that finds the lock held waits in the
 * thread's queue and reaches its ring in order, none lost, while other
 * threads hold the lock as often as they can.
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
    for (unsigned i = 1; i <= NOTES; i++) {
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
    ok(json_object_size(e) == 10, "all 10 fields (%zu)", json_object_size(e));
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

int main(void)
{
    test_hostile_names();
    test_every_word();
    test_ring();
    test_never_waits();
    return tap_done();
}
