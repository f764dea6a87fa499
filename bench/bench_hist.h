/*
 * bench_hist.h - a latency histogram in microseconds: exact below
 * HIST_EXACT_US, then HIST_SUB buckets per power of two (a bucket is at
 * most 1/HIST_SUB of its value wide, 1.6 %), up to 2^32 µs.  Fixed size,
 * no allocation, so a generator that answers millions of queries keeps
 * one per thread and adds them up at the end.  Header-only, like
 * bench_cli.h.
 */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stdint.h>

#define HIST_EXACT_BITS 10 /* values below 2^10 µs have a bucket each */
#define HIST_EXACT_US   (1u << HIST_EXACT_BITS)
#define HIST_SUB_BITS   6 /* 64 buckets per power of two above */
#define HIST_SUB        (1u << HIST_SUB_BITS)
#define HIST_TOP_BITS   32
#define HIST_BUCKETS    (HIST_EXACT_US + (HIST_TOP_BITS - HIST_EXACT_BITS) * HIST_SUB)

struct hist {
    uint64_t n;
    uint64_t max_us;
    uint64_t count[HIST_BUCKETS];
};

/* The bucket of a value: itself below HIST_EXACT_US, else its power of two
 * and the next HIST_SUB_BITS bits below the leading one. */
static inline unsigned hist_bucket(uint64_t us)
{
    if (us < HIST_EXACT_US)
        return (unsigned)us;
    if (us >> HIST_TOP_BITS)
        return HIST_BUCKETS - 1;
    unsigned e = 63u - (unsigned)__builtin_clzll(us); /* HIST_EXACT_BITS..31 */
    unsigned sub = (unsigned)(us >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1);
    return HIST_EXACT_US + (e - HIST_EXACT_BITS) * HIST_SUB + sub;
}

/* The smallest value of bucket b (what a percentile reports: a bound the
 * true value is at most 1.6 % above). */
static inline uint64_t hist_floor(unsigned b)
{
    if (b < HIST_EXACT_US)
        return b;
    unsigned e = (b - HIST_EXACT_US) / HIST_SUB + HIST_EXACT_BITS;
    uint64_t sub = (b - HIST_EXACT_US) % HIST_SUB;
    return ((uint64_t)1 << e) | sub << (e - HIST_SUB_BITS);
}

static inline void hist_add(struct hist *h, uint64_t us)
{
    h->count[hist_bucket(us)]++;
    h->n++;
    if (us > h->max_us)
        h->max_us = us;
}

/* Add the samples of `from` to `to`. */
static inline void hist_merge(struct hist *to, const struct hist *from)
{
    for (unsigned b = 0; b < HIST_BUCKETS; b++)
        to->count[b] += from->count[b];
    to->n += from->n;
    if (from->max_us > to->max_us)
        to->max_us = from->max_us;
}

/* The nearest-rank q-quantile (0 < q <= 1) as its bucket's floor; 0 with
 * no samples. */
static inline uint64_t hist_pct(const struct hist *h, double q)
{
    if (h->n == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->n + 0.999999), seen = 0;
    if (rank == 0)
        rank = 1;
    for (unsigned b = 0; b < HIST_BUCKETS; b++) {
        seen += h->count[b];
        if (seen >= rank)
            return hist_floor(b);
    }
    return h->max_us;
}

#endif
