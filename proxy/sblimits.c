/*
 * sblimits.c - see sblimits.h.  A small hash table of sandbox ids; an entry
 * lives while a connection holds it (the counters of a sandbox that has
 * no connection open are kept too, for the quota: at most one entry per
 * sandbox id ever seen, which bindings bound).
 */
#include "sblimits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUCKETS 1024

struct px_limit {
    struct px_limit *next;
    char id[64];
    atomic_long open;
    atomic_uint_fast64_t bytes;
    pthread_mutex_t lock; /* the rate bucket */
    double tokens;
    struct timespec refilled;
};

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct px_limit *table[BUCKETS];

static unsigned hash(const char *s)
{
    unsigned h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % BUCKETS;
}

struct px_limit *px_limit_get(const char *id)
{
    unsigned b = hash(id);
    struct px_limit *l;

    pthread_mutex_lock(&table_lock);
    for (l = table[b]; l != NULL && strncmp(l->id, id, sizeof(l->id) - 1) != 0; l = l->next)
        ;
    if (l == NULL) {
        l = calloc(1, sizeof(*l));
        if (l == NULL)
            abort();
        strncpy(l->id, id, sizeof(l->id) - 1);
        pthread_mutex_init(&l->lock, NULL);
        l->tokens = -1; /* full at first use */
        l->next = table[b];
        table[b] = l;
    }
    pthread_mutex_unlock(&table_lock);
    return l;
}

void px_limit_put(struct px_limit *l)
{
    (void)l; /* entries stay: they carry the quota */
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

bool px_limit_over_quota(const struct px_limit *l, uint64_t quota)
{
    return l != NULL && quota != 0 && atomic_load(&l->bytes) >= quota;
}
