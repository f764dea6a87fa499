/*
 * sblimits.c - see sblimits.h.  A small hash table of sandbox ids.  An
 * entry stays while its sandbox is bound (its counters carry the quota
 * between connections); once the binding is gone (px_limit_forget_except)
 * it leaves the table, and is freed when no connection holds it any more.
 */
#include "sblimits.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 1024

struct px_limit {
    struct px_limit *next;
    unsigned refs;  /* connections holding it (table_lock) */
    bool forgotten; /* out of the table: freed at the last put */
    bool source;    /* a source address's, not a sandbox's */
    char id[64];
    atomic_long open;
    atomic_uint_fast64_t bytes;
    struct px_dns_share dns;
    pthread_mutex_t lock; /* the rate bucket */
    double tokens;
    struct timespec refilled;
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
    pthread_mutex_init(&l->lock, NULL);
    l->tokens = -1; /* full at first use */
    l->source = source;
    l->next = table[b];
    table[b] = l;
    n_sources += source;
    return l;
}

static void limit_free(struct px_limit *l)
{
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* Unlink and free one source entry no connection holds; false if every
 * one is held.  (table_lock held.) */
static bool evict_source(void)
{
    for (size_t k = 0; k < BUCKETS; k++) {
        size_t b = (evict_from + k) % BUCKETS;
        for (struct px_limit **pp = &table[b]; *pp != NULL; pp = &(*pp)->next) {
            struct px_limit *l = *pp;
            if (!l->source || l->refs > 0)
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
    l->refs++;
    pthread_mutex_unlock(&table_lock);
    return l;
}

struct px_limit *px_limit_get_source(const uint8_t addr[16])
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    char id[64] = PX_LIMIT_DEFAULT "/";
    size_t n = strlen(id);

    if (memcmp(addr, mapped, 12) == 0)
        inet_ntop(AF_INET, addr + 12, id + n, (socklen_t)(sizeof(id) - n));
    else
        inet_ntop(AF_INET6, addr, id + n, (socklen_t)(sizeof(id) - n));
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
    l->refs++;
    pthread_mutex_unlock(&table_lock);
    return l;
}

void px_limit_put(struct px_limit *l)
{
    bool last;

    if (l == NULL)
        return;
    pthread_mutex_lock(&table_lock);
    last = --l->refs == 0 && l->forgotten;
    pthread_mutex_unlock(&table_lock);
    if (last)
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
            l->forgotten = true;
            if (l->refs == 0) {
                l->next = gone;
                gone = l;
            }
        }
    }
    pthread_mutex_unlock(&table_lock);
    while (gone != NULL) {
        struct px_limit *next = gone->next;
        limit_free(gone);
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

static bool take_token(struct px_limit *l, uint64_t per_sec)
{
    struct timespec now;
    bool ok;

    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&l->lock);
    if (l->tokens < 0) {
        l->tokens = (double)per_sec;
    } else {
        double dt = (double)(now.tv_sec - l->refilled.tv_sec) +
                    (double)(now.tv_nsec - l->refilled.tv_nsec) / 1e9;
        l->tokens += dt * (double)per_sec;
        if (l->tokens > (double)per_sec)
            l->tokens = (double)per_sec;
    }
    l->refilled = now;
    ok = l->tokens >= 1.0;
    if (ok)
        l->tokens -= 1.0;
    pthread_mutex_unlock(&l->lock);
    return ok;
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
    if (per_sec != 0 && !take_token(l, per_sec)) {
        atomic_fetch_sub(&l->open, 1);
        *rate = true;
        return false;
    }
    return true;
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

bool px_limit_over_quota(const struct px_limit *l, uint64_t quota)
{
    return l != NULL && quota != 0 && atomic_load(&l->bytes) >= quota;
}
