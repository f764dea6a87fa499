/*
 * sblimits.c - see sblimits.h.  A small hash table of sandbox ids.  An
 * entry stays while its sandbox is bound (its counters carry the quota
 * between connections); once the binding is gone (px_limit_forget_except)
 * it leaves the table, and is freed when no connection holds it any more.
 *
 * An entry's count of references includes one for being in the table; the
 * world holds one for each bound sandbox, and each connection one.  The
 * table's lock is taken to find an entry by name (a world making a
 * binding's handle, a connection without a binding), to add, evict or
 * drop one; px_limit_ref and px_limit_put are atomic adds, and the last
 * put frees.  Without the lock a count only grows from a reference someone
 * holds, so an entry the table alone holds (count 1) can be evicted
 * under the lock without a race.
 */
#include "sblimits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "policy.h"

#define BUCKETS  1024
#define NS_PER_S 1000000000ull

struct px_limit {
    struct px_limit *next;
    atomic_uint refs; /* the table's, the world's, the connections' */
    bool source;      /* a source address's, not a sandbox's */
    char id[64];
    atomic_long open;
    atomic_uint_fast64_t bytes;
    struct px_dns_share dns;
    /* the rate of new connections, as a generic cell rate algorithm: the
     * time (CLOCK_MONOTONIC ns) at which the bucket is full again */
    atomic_uint_fast64_t full_at;
    atomic_uint_fast64_t dns_full_at; /* the same for its DNS queries */
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_limit *table[BUCKETS];
static size_t n_sources;  /* entries with .source (table_lock) */
static size_t evict_from; /* the bucket the next eviction scan starts at */

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % BUCKETS;
}

static struct px_limit *find(const char *id, unsigned b)
{
    struct px_limit *l = table[b];

    while (l != NULL && strncmp(l->id, id, sizeof(l->id) - 1) != 0)
        l = l->next;
    return l;
}

static struct px_limit *add(const char *id, unsigned b, bool source)
{
    struct px_limit *l = calloc(1, sizeof(*l));

    if (l == NULL)
        abort();
    memcpy(l->id, id, strnlen(id, sizeof(l->id) - 1)); /* calloc'd: ends in '\0' */
    atomic_init(&l->refs, 1);                          /* the table's */
    l->source = source;
    l->next = table[b];
    table[b] = l;
    n_sources += source;
    return l;
}

static void limit_free(struct px_limit *l)
{
    free(l);
}

/* Take the table's reference of an entry only the table holds; false when
 * someone else holds it too.  (table_lock held.) */
static bool only_table_holds(struct px_limit *l)
{
    unsigned one = 1;
    return atomic_compare_exchange_strong(&l->refs, &one, 0);
}

/* Unlink and free one source entry no connection holds; false if every
 * one is held.  (table_lock held.) */
static bool evict_source(void)
{
    for (size_t k = 0; k < BUCKETS; k++) {
        size_t b = (evict_from + k) % BUCKETS;
        for (struct px_limit **pp = &table[b]; *pp != NULL; pp = &(*pp)->next) {
            struct px_limit *l = *pp;
            if (!l->source || !only_table_holds(l))
                continue;
            *pp = l->next;
            n_sources--;
            evict_from = b + 1;
            limit_free(l);
            return true;
        }
    }
    return false;
}

struct px_limit *px_limit_get(const char *id)
{
    unsigned b = hash(id);

    pthread_mutex_lock(&table_lock);
    struct px_limit *l = find(id, b);
    if (l == NULL)
        l = add(id, b, false);
    atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&table_lock);
    return l;
}

struct px_limit *px_limit_ref(struct px_limit *l)
{
    atomic_fetch_add_explicit(&l->refs, 1, memory_order_relaxed);
    return l;
}

struct px_limit *px_limit_get_source(const uint8_t addr[16])
{
    char id[64] = PX_LIMIT_DEFAULT "/";
    size_t n = strlen(id);

    policy_addr_text(addr, id + n, sizeof(id) - n);
    unsigned b = hash(id);
    pthread_mutex_lock(&table_lock);
    struct px_limit *l = find(id, b);
    if (l == NULL && (n_sources < PX_LIMIT_SOURCES_MAX || evict_source()))
        l = add(id, b, true);
    if (l == NULL) {
        b = hash(PX_LIMIT_DEFAULT);
        l = find(PX_LIMIT_DEFAULT, b);
        if (l == NULL)
            l = add(PX_LIMIT_DEFAULT, b, false);
    }
    atomic_fetch_add(&l->refs, 1);
    pthread_mutex_unlock(&table_lock);
    return l;
}

void px_limit_put(struct px_limit *l)
{
    if (l != NULL && atomic_fetch_sub_explicit(&l->refs, 1, memory_order_acq_rel) == 1)
        limit_free(l);
}

static int cmp_id(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

void px_limit_forget_except(const char *const *ids, size_t n)
{
    struct px_limit *gone = NULL;

    pthread_mutex_lock(&table_lock);
    for (size_t b = 0; b < BUCKETS; b++) {
        struct px_limit **pp = &table[b];
        while (*pp != NULL) {
            struct px_limit *l = *pp;
            if (l->source || strcmp(l->id, PX_LIMIT_DEFAULT) == 0 ||
                (n > 0 && bsearch(l->id, ids, n, sizeof(*ids), cmp_id) != NULL)) {
                pp = &l->next;
                continue;
            }
            *pp = l->next;
            l->next = gone;
            gone = l;
        }
    }
    pthread_mutex_unlock(&table_lock);
    while (gone != NULL) {
        struct px_limit *next = gone->next;
        px_limit_put(gone); /* the table's reference */
        gone = next;
    }
}

size_t px_limit_count(void)
{
    size_t n = 0;

    pthread_mutex_lock(&table_lock);
    for (size_t b = 0; b < BUCKETS; b++)
        for (const struct px_limit *l = table[b]; l != NULL; l = l->next)
            n++;
    pthread_mutex_unlock(&table_lock);
    return n;
}

static uint64_t now_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * NS_PER_S + (uint64_t)now.tv_nsec;
}

/* One token from a bucket that holds `per_sec` and refills `per_sec` a
 * second (full at first use), as GCRA: each connection moves full_at on
 * by 1/per_sec of a second from max(full_at, now), and is refused when
 * that would put full_at more than a second ahead of now.  Lock-free. */
static bool take_token(atomic_uint_fast64_t *full_at, uint64_t per_sec)
{
    uint64_t now = now_ns(), step = NS_PER_S / per_sec;
    uint64_t at = atomic_load_explicit(full_at, memory_order_relaxed), next;

    if (step == 0)
        step = 1;
    do {
        next = (at > now ? at : now) + step;
        if (next - now > NS_PER_S)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(full_at, &at, next, memory_order_relaxed,
                                                    memory_order_relaxed));
    return true;
}

bool px_limit_conn_open(struct px_limit *l, uint64_t max_conns, uint64_t per_sec, bool *rate)
{
    *rate = false;
    if (max_conns != 0 && atomic_fetch_add(&l->open, 1) >= (long)max_conns) {
        atomic_fetch_sub(&l->open, 1);
        return false;
    }
    if (max_conns == 0)
        atomic_fetch_add(&l->open, 1);
    if (per_sec != 0 && !take_token(&l->full_at, per_sec)) {
        atomic_fetch_sub(&l->open, 1);
        *rate = true;
        return false;
    }
    return true;
}

bool px_limit_dns_query(struct px_limit *l, uint64_t per_sec)
{
    return per_sec == 0 || take_token(&l->dns_full_at, per_sec);
}

void px_limit_conn_close(struct px_limit *l)
{
    if (l == NULL)
        return;
    atomic_fetch_sub(&l->open, 1);
}

bool px_limit_bytes(struct px_limit *l, uint64_t n, uint64_t quota)
{
    if (l == NULL)
        return true;
    uint64_t total = atomic_fetch_add(&l->bytes, n) + n;
    return quota == 0 || total <= quota;
}

struct px_dns_share *px_limit_dns_share(struct px_limit *l)
{
    return l != NULL ? &l->dns : NULL;
}

uint64_t px_limit_quota_left(const struct px_limit *l, uint64_t quota)
{
    if (l == NULL || quota == 0)
        return UINT64_MAX;
    uint64_t used = atomic_load(&l->bytes);
    return used < quota ? quota - used : 0;
}

bool px_limit_over_quota(const struct px_limit *l, uint64_t quota)
{
    return l != NULL && quota != 0 && atomic_load(&l->bytes) >= quota;
}

void px_limit_each_count(void (*each)(const char *id, uint64_t bytes, void *arg), void *arg)
{
    pthread_mutex_lock(&table_lock);
    for (size_t b = 0; b < BUCKETS; b++)
        for (struct px_limit *l = table[b]; l != NULL; l = l->next) {
            uint64_t n = atomic_load(&l->bytes);
            if (!l->source && n > 0)
                each(l->id, n, arg);
        }
    pthread_mutex_unlock(&table_lock);
}

void px_limit_carry(const char *id, uint64_t bytes)
{
    struct px_limit *l = px_limit_get(id);

    atomic_fetch_add(&l->bytes, bytes);
    px_limit_put(l);
}
