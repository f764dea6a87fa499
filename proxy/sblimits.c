/*
 * sblimits.c - see sblimits.h.  A small hash table of sandbox ids.  An
 * entry stays while its sandbox is bound (its counters carry the quota
 * between connections); once the binding is gone (px_limit_forget_except)
 * it leaves the table, and is freed when no connection holds it any more.
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
    unsigned refs;  /* connections holding it (table_lock) */
    bool forgotten; /* out of the table: freed at the last put */
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
    l->refs++;
    pthread_mutex_unlock(&table_lock);
    return l;
}

static void limit_free(struct px_limit *l)
{
    pthread_mutex_destroy(&l->lock);
    free(l);
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
            if (strcmp(l->id, PX_LIMIT_DEFAULT) == 0 ||
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

bool px_limit_over_quota(const struct px_limit *l, uint64_t quota)
{
    return l != NULL && quota != 0 && atomic_load(&l->bytes) >= quota;
}
