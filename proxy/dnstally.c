/*
 * dnstally.c - the policy DNS server's refusals that get no log line of
 * their own: a query from a source without a binding, and one past its
 * sandbox's rate.  Either comes as fast as someone can send, so each is
 * counted, per worker thread, under its key (sandbox, source address,
 * reason), and every dns-log-interval one line per key says how many came
 * (docs/design.md, "Access log").  The lines an interval writes are
 * bounded whatever the sources: past TALLY_MAX keys, the rest count on one
 * line per reason that names no sandbox and no source.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accesslog.h"
#include "dnsd.h"
#include "egressd.h"
#include "sockaddr.h"

/* Keys a worker tells apart in one interval, and the overflow lines after
 * them (one per reason: a source without a binding, the rate). */
#define TALLY_MAX  64
#define TALLY_OVER 2

struct tally {
    char sandbox[64], owner[128]; /* "" for the overflow lines */
    uint8_t src16[16];
    bool any_source; /* an overflow line: many sandboxes and sources */
    enum px_reason reason;
    int64_t first_ms, last_ms;
    uint64_t count;
};

static _Thread_local struct tally *tallies; /* TALLY_MAX + TALLY_OVER, allocated at first use */
static _Thread_local size_t n_tallies;
static _Thread_local size_t last_hit; /* a flood repeats its key: looked at first */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool same_key(const struct tally *t, const char *sandbox, const uint8_t src16[16],
                     enum px_reason reason)
{
    return !t->any_source && t->reason == reason && memcmp(t->src16, src16, 16) == 0 &&
           strcmp(t->sandbox, sandbox) == 0;
}

/* The entry of the key, made when there is room; past TALLY_MAX keys, the
 * overflow line of its reason (made in one of the TALLY_OVER slots left;
 * were they all taken, the last one). */
static struct tally *find(const char *sandbox, const char *owner, const uint8_t src16[16],
                          enum px_reason reason)
{
    size_t i = last_hit;

    if (i < n_tallies && same_key(&tallies[i], sandbox, src16, reason))
        return &tallies[i];
    for (i = 0; i < n_tallies && i < TALLY_MAX; i++)
        if (same_key(&tallies[i], sandbox, src16, reason))
            break;
    for (; i < n_tallies && i >= TALLY_MAX; i++)
        if (tallies[i].reason == reason)
            break;
    if (i == TALLY_MAX + TALLY_OVER)
        i--;
    if (i == n_tallies) {
        struct tally *t = &tallies[n_tallies++];
        *t = (struct tally){.reason = reason, .any_source = i >= TALLY_MAX};
        if (!t->any_source) {
            snprintf(t->sandbox, sizeof(t->sandbox), "%s", sandbox);
            snprintf(t->owner, sizeof(t->owner), "%s", owner != NULL ? owner : "");
            memcpy(t->src16, src16, 16);
        }
    }
    last_hit = i;
    return &tallies[i];
}

void px_dnstally_note(const char *sandbox, const char *owner, const uint8_t src16[16],
                      enum px_reason reason)
{
    if (tallies == NULL && (tallies = calloc(TALLY_MAX + TALLY_OVER, sizeof(*tallies))) == NULL)
        abort();
    struct tally *t = find(sandbox, owner, src16, reason);
    int64_t now = wall_ms();

    if (t->count++ == 0)
        t->first_ms = now;
    t->last_ms = now;
}

static void tally_write(const struct tally *t)
{
    char src[PX_SOCKADDR_TEXT_MAX];
    union px_sockaddr sa;
    socklen_t sa_len;

    px_sockaddr_from16(t->src16, 0, &sa, &sa_len);
    px_sockaddr_host_text(&sa.sa, src);
    struct px_log_entry e = {
        .ts_ms = t->first_ms,
        .id = atomic_fetch_add_explicit(&px_d.next_id, 1, memory_order_relaxed),
        .sandbox = t->any_source ? NULL : t->sandbox,
        .owner = t->owner[0] ? t->owner : NULL,
        .src = t->any_source ? NULL : src,
        .mode = "dns",
        .decision = "deny",
        .reason = px_reason_str(t->reason),
        .duration_ms = (uint64_t)(t->last_ms - t->first_ms),
        .answer = "REFUSED",
        .count = t->count,
    };
    px_accesslog_write(&e);
}

void px_dnstally_flush(void)
{
    for (size_t i = 0; i < n_tallies; i++)
        tally_write(&tallies[i]);
    n_tallies = 0;
    last_hit = 0;
}

void px_dnstally_end(void)
{
    px_dnstally_flush();
    free(tallies);
    tallies = NULL;
}
