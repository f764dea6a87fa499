/*
 * test_handout.c - what the policy DNS server handed out (handout.h): an
 * address is known for its name only, a later answer replaces the
 * earlier, a name that takes another's slot evicts it, and threads
 * noting and reading at once leave whole entries.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "handout.h"
#include "tap.h"

static void v4(uint8_t a[16], unsigned last)
{
    static const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 0};
    memcpy(a, mapped, 16);
    a[15] = (uint8_t)last;
}

/* The slot a name falls in, as handout.c computes it (FNV-1a). */
static size_t slot_of(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        h = (h ^ *s) * 0x100000001b3ull;
    return h % PX_HANDOUT_SLOTS;
}

static void test_basics(void)
{
    uint8_t a[2][16], other[16];

    v4(a[0], 1);
    v4(a[1], 2);
    v4(other, 3);
    ok(!px_handout_has("api.example", a[0]), "nothing is known before anything was handed out");
    px_handout_note("api.example", (const uint8_t(*)[16])a, 2, 30);
    ok(px_handout_has("api.example", a[0]) && px_handout_has("api.example", a[1]),
       "both addresses handed out for the name are known");
    ok(!px_handout_has("api.example", other), "an address not handed out is not");
    ok(!px_handout_has("other.example", a[0]), "nor is the address for another name");
    px_handout_note("api.example", (const uint8_t(*)[16]) & other, 1, 30);
    ok(px_handout_has("api.example", other) && !px_handout_has("api.example", a[0]),
       "a later answer replaces the earlier one");
    px_handout_note("api.example", NULL, 0, 30);
    ok(px_handout_has("api.example", other), "an empty answer changes nothing");
    px_handout_clear();
    ok(!px_handout_has("api.example", other), "cleared");
}

static void test_eviction(void)
{
    char name[64];
    uint8_t a[16], b[16];
    size_t want = slot_of("first.example");
    int i = 0;

    do
        snprintf(name, sizeof(name), "n%d.example", i++);
    while (slot_of(name) != want && i < 1000000);
    v4(a, 10);
    v4(b, 11);
    px_handout_note("first.example", (const uint8_t(*)[16]) & a, 1, 30);
    px_handout_note(name, (const uint8_t(*)[16]) & b, 1, 30);
    ok(slot_of(name) == want && px_handout_has(name, b) && !px_handout_has("first.example", a),
       "%s takes first.example's slot and evicts it", name);
    ok(!px_handout_has(name, a), "the evicted address is not the newcomer's");
    px_handout_clear();
}

#define THREADS 4
#define ROUNDS  20000

/* Each thread notes its own name, answer after answer (x and x+100), and
 * reads its neighbour's, all at once (the sanitizer builds watch the
 * memory); each name must end with its last answer whole. */
static void *churn(void *arg)
{
    int self = (int)(intptr_t)arg, seen = 0;
    char mine[32], theirs[32];
    uint8_t pair[2][16];

    snprintf(mine, sizeof(mine), "t%d.example", self);
    snprintf(theirs, sizeof(theirs), "t%d.example", (self + 1) % THREADS);
    for (int r = 0; r < ROUNDS; r++) {
        v4(pair[0], (unsigned)(r % 100));
        v4(pair[1], (unsigned)(r % 100) + 100);
        px_handout_note(mine, (const uint8_t(*)[16])pair, 2, 30);
        seen += px_handout_has(theirs, pair[0]);
    }
    return (void *)(intptr_t)seen;
}

static void test_threads(void)
{
    pthread_t t[THREADS];
    uint8_t last[2][16];

    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    v4(last[0], (ROUNDS - 1) % 100);
    v4(last[1], (ROUNDS - 1) % 100 + 100);
    int whole = 0;
    for (int i = 0; i < THREADS; i++) {
        char name[32];
        snprintf(name, sizeof(name), "t%d.example", i);
        whole += px_handout_has(name, last[0]) && px_handout_has(name, last[1]);
    }
    ok(whole == THREADS,
       "after %d threads noted and read at once, each name holds its last "
       "answer whole (%d of %d)",
       THREADS, whole, THREADS);
}

int main(void)
{
    test_basics();
    test_eviction();
    test_threads();
    return tap_done();
}
