/*
 * handout.c - the addresses handed out per name (handout.h): a
 * direct-mapped table of PX_HANDOUT_SLOTS entries, in PX_HANDOUT_SHARDS
 * shards by slot, each shard under its own mutex.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handout.h"
#include "policy.h"
#include "resolver.h"

#define PX_HANDOUT_SHARDS 64

struct slot {
    uint64_t hash;
    int64_t expires_ms; /* monotonic; 0: empty */
    size_t n;
    uint8_t addr[PX_DNS_MAX_ADDRS][16];
    char name[POLICY_HOST_MAX + 1];
};

static _Atomic(struct slot *) slots; /* PX_HANDOUT_SLOTS, made at first note */
static pthread_once_t made = PTHREAD_ONCE_INIT;
static pthread_mutex_t shard[PX_HANDOUT_SHARDS];

static void make(void)
{
    struct slot *t = calloc(PX_HANDOUT_SLOTS, sizeof(*t));

    if (t == NULL)
        abort();
    for (size_t i = 0; i < PX_HANDOUT_SHARDS; i++)
        pthread_mutex_init(&shard[i], NULL);
    atomic_store_explicit(&slots, t, memory_order_release);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* FNV-1a over the name. */
static uint64_t hash_of(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        h = (h ^ *s) * 0x100000001b3ull;
    return h;
}

static pthread_mutex_t *lock_of(size_t i)
{
    return &shard[i % PX_HANDOUT_SHARDS];
}

/* Whether slot s already says this, for long enough that writing it
 * again would change nothing worth a write. */
static bool same(const struct slot *s, uint64_t h, const char *name, const uint8_t (*addr)[16],
                 size_t n, int64_t expires)
{
    return s->hash == h && s->n == n && s->expires_ms >= expires - PX_HANDOUT_GRACE_S * 500 &&
           strcmp(s->name, name) == 0 && memcmp(s->addr, addr, n * 16) == 0;
}

void px_handout_note(const char *name, const uint8_t (*addr)[16], size_t n, uint32_t ttl_s)
{
    size_t len = strlen(name);

    if (n == 0 || len > POLICY_HOST_MAX)
        return;
    pthread_once(&made, make);
    if (n > PX_DNS_MAX_ADDRS)
        n = PX_DNS_MAX_ADDRS;
    uint64_t h = hash_of(name);
    size_t i = h % PX_HANDOUT_SLOTS;
    int64_t expires = now_ms() + ((int64_t)ttl_s + PX_HANDOUT_GRACE_S) * 1000;
    struct slot *s = &atomic_load_explicit(&slots, memory_order_acquire)[i];

    pthread_mutex_lock(lock_of(i));
    if (!same(s, h, name, addr, n, expires)) {
        s->hash = h;
        s->n = n;
        s->expires_ms = expires;
        memcpy(s->addr, addr, n * 16);
        memcpy(s->name, name, len + 1);
    }
    pthread_mutex_unlock(lock_of(i));
}

bool px_handout_has(const char *name, const uint8_t addr[16])
{
    struct slot *t = atomic_load_explicit(&slots, memory_order_acquire);
    bool found = false;

    if (t == NULL)
        return false; /* nothing was ever handed out */
    uint64_t h = hash_of(name);
    size_t i = h % PX_HANDOUT_SLOTS;
    const struct slot *s = &t[i];

    pthread_mutex_lock(lock_of(i));
    if (s->hash == h && s->expires_ms > now_ms() && strcmp(s->name, name) == 0)
        for (size_t k = 0; k < s->n && !found; k++)
            found = memcmp(s->addr[k], addr, 16) == 0;
    pthread_mutex_unlock(lock_of(i));
    return found;
}

void px_handout_clear(void)
{
    struct slot *t = atomic_load_explicit(&slots, memory_order_acquire);

    for (size_t i = 0; t != NULL && i < PX_HANDOUT_SLOTS; i++) {
        pthread_mutex_lock(lock_of(i));
        t[i].expires_ms = 0;
        t[i].hash = 0;
        pthread_mutex_unlock(lock_of(i));
    }
}
