/*
 * test_limits.c - per-sandbox limits (sblimits.c): the connection cap, the
 * byte quota kept between connections, and counters dropped with their
 * binding: at once when no connection holds them, at the last put
 * otherwise, while the id bound again starts afresh.  Also through the
 * world: deleting a binding drops its counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sblimits.h"
#include "tap.h"

static void test_conns_and_quota(void)
{
    struct px_limit *a = px_limit_get("a");
    bool rate;

    ok(px_limit_conn_open(a, 2, 0, &rate) && px_limit_conn_open(a, 2, 0, &rate),
       "two connections open under a cap of 2");
    ok(!px_limit_conn_open(a, 2, 0, &rate) && !rate, "a third is refused (not by the rate)");
    px_limit_conn_close(a);
    ok(px_limit_conn_open(a, 2, 0, &rate), "one closed: another opens");
    px_limit_conn_close(a);
    px_limit_conn_close(a);
    ok(px_limit_bytes(a, 100, 150), "100 bytes under a 150-byte quota");
    px_limit_put(a);
    struct px_limit *again = px_limit_get("a");
    ok(again == a, "the same id gets the same counters back");
    ok(!px_limit_bytes(again, 100, 150) && px_limit_over_quota(again, 150),
       "the quota counts across connections: 200 bytes are over 150");
    px_limit_put(again);
}

/* rate-new-conns-per-sandbox: a bucket of `per_sec` that refills at
 * `per_sec` a second, full at first use; lock-free (GCRA). */
static void test_rate(void)
{
    struct px_limit *r = px_limit_get("rate");
    const struct timespec fifth = {0, 220 * 1000 * 1000};
    bool rate = false;
    int opened = 0;

    while (opened < 20 && px_limit_conn_open(r, 0, 5, &rate))
        opened++;
    ok(opened == 5 && rate, "a full bucket of 5 lets 5 through, then refuses by the rate (%d)",
       opened);
    nanosleep(&fifth, NULL);
    ok(px_limit_conn_open(r, 0, 5, &rate), "a fifth of a second later one more opens");
    for (int i = 0; i < opened + 1; i++)
        px_limit_conn_close(r);
    px_limit_put(r);
}

/* dns-rate-per-sandbox: a bucket of its own, beside the connections'. */
static void test_dns_rate(void)
{
    struct px_limit *r = px_limit_get("dnsrate");
    const struct timespec tenth = {0, 120 * 1000 * 1000};
    bool rate = false;
    int asked = 0;

    while (asked < 100 && px_limit_dns_query(r, 10))
        asked++;
    ok(asked == 10, "a full bucket of 10 queries lets 10 through (%d)", asked);
    ok(px_limit_conn_open(r, 0, 5, &rate), "the connections' bucket is not the queries'");
    nanosleep(&tenth, NULL);
    ok(px_limit_dns_query(r, 10) && !px_limit_dns_query(r, 10),
       "a tenth of a second later one more query, and only one");
    ok(px_limit_dns_query(r, 0), "0: no limit");
    px_limit_conn_close(r);
    px_limit_put(r);
}

static void test_forget(void)
{
    static const char *const keep[] = {"k1", "k2"}; /* sorted */
    struct px_limit *held = px_limit_get("held");
    struct px_limit *k1 = px_limit_get("k1");
    struct px_limit *d = px_limit_get("default");

    (void)px_limit_bytes(held, 500, 0);
    (void)px_limit_bytes(k1, 500, 0);
    (void)px_limit_bytes(d, 500, 0);
    px_limit_put(k1);
    px_limit_put(d);
    size_t before = px_limit_count();
    ok(before == 4, "4 ids have counters: a, held, k1, default (%zu)", before);
    px_limit_forget_except(keep, 2);
    ok(px_limit_count() == 2, "only k1 and default are left (%zu)", px_limit_count());
    struct px_limit *k1b = px_limit_get("k1");
    ok(k1b == k1 && px_limit_over_quota(k1b, 500), "k1, still bound, keeps its counters");
    px_limit_put(k1b);
    struct px_limit *db = px_limit_get("default");
    ok(db == d && px_limit_over_quota(db, 500), "default is never dropped");
    px_limit_put(db);
    struct px_limit *a = px_limit_get("a");
    ok(!px_limit_over_quota(a, 150), "a, unbound and not held, starts afresh");
    px_limit_put(a);
    /* `held` is still held by a connection: it counts on, apart. */
    ok(px_limit_over_quota(held, 500), "a connection still holding dropped counters counts on");
    struct px_limit *fresh = px_limit_get("held");
    ok(fresh != held && !px_limit_over_quota(fresh, 500),
       "the id bound again gets fresh counters while the old are held");
    px_limit_put(fresh);
    px_limit_put(held); /* the last put frees it (ASan: no leak, no use after free) */
    px_limit_forget_except(NULL, 0);
    ok(px_limit_count() == 1, "nothing bound: only default is left (%zu)", px_limit_count());
}

int main(void)
{
    test_conns_and_quota();
    test_forget();
    test_rate();
    test_dns_rate();
    return tap_done();
}
