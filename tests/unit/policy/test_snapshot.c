/*
 * test_snapshot.c - a snapshot is immutable and reference-counted: threads
 * keep deciding on the old one, unchanged, while a new one is built and the
 * loader lets go of the old; the last binding frees it (ASan would see a
 * use after free or a leak).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define THREADS 4
#define ROUNDS  20000
#define NOW     1796083200

static atomic_int wrong;

static struct policy *build(const char *text)
{
    struct policy_diag d = {0};
    struct policy_builder *b = policy_builder_new();
    policy_builder_add_preset(b, "p", "p.allow", text, strlen(text));
    struct policy *p = policy_builder_finish(b, &d);
    policy_diag_free(&d);
    return p;
}

/* Each thread owns a binding of the old snapshot and checks that its
 * verdicts never change. */
static void *worker(void *arg)
{
    struct policy_binding *b = arg;
    struct policy_host allowed, denied;
    struct policy_verdict v;

    policy_host_normalize("old.example", 11, &allowed);
    policy_host_normalize("new.example", 11, &denied);
    for (int i = 0; i < ROUNDS; i++) {
        if (policy_decide_name(b, &allowed, 443, NOW, &v) != POLICY_ALLOW || v.rule.line != 1)
            atomic_fetch_add(&wrong, 1);
        if (policy_decide_name(b, &denied, 443, NOW, &v) != POLICY_DENY)
            atomic_fetch_add(&wrong, 1);
    }
    policy_binding_free(b);
    return NULL;
}

int main(void)
{
    struct policy *old = build("old.example\n");
    struct policy_diag d = {0};
    pthread_t t[THREADS];

    if (!ok(old != NULL, "the old snapshot builds"))
        return tap_done();
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, policy_binding_new(old, "p", NULL, 0, "t", &d));
    /* a reload: build the new snapshot beside the old, then let go of the old */
    struct policy *fresh = NULL;
    for (int i = 0; i < 50; i++) {
        policy_unref(fresh);
        fresh = build("new.example\ndeny old.example\n");
    }
    policy_unref(old);
    struct policy_binding *nb = policy_binding_new(fresh, "p", NULL, 0, "t", &d);
    struct policy_host h;
    struct policy_verdict v;
    policy_host_normalize("old.example", 11, &h);
    ok(policy_decide_name(nb, &h, 443, NOW, &v) == POLICY_DENY && v.rule.line == 2,
       "the new snapshot denies what the old allowed");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    ok(atomic_load(&wrong) == 0,
       "%d threads x %d rounds on the old snapshot saw no changed verdict (wrong: %d)", THREADS,
       ROUNDS, atomic_load(&wrong));
    policy_binding_free(nb);
    policy_unref(fresh);
    policy_diag_free(&d);
    return tap_done();
}
