/*
 * denials.h - each bound sandbox's most recent denials, for the admin API
 * (GET /v1/sandboxes/{id}/denials): what its agent was refused and why, so
 * that access can be asked for instead of fought for.  Bounded: a ring of
 * PX_DENIALS_PER_SANDBOX per sandbox, made at its first denial, and at most
 * PX_DENIALS_SANDBOXES_MAX rings (the one whose last denial is oldest makes
 * room).  A binding removed takes its ring along.  Thread-safe; a
 * thread that batches (a worker) never waits for the lock (below).
 */
#ifndef PX_DENIALS_H
#define PX_DENIALS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define PX_DENIALS_PER_SANDBOX   16
#define PX_DENIALS_SANDBOXES_MAX 1024

/* One denial, as its access-log line says it (strings are copied, cut to
 * fit; NULL for none).  host and sni are names a sandbox chose: the ring
 * keeps them in DNS presentation format (nametext.h), whatever bytes they
 * hold, so GET .../denials shows them escaped and never without them. */
struct px_denial {
    int64_t ts_ms;
    const char *mode;   /* px_mode_str() */
    const char *method; /* or NULL */
    const char *host;   /* or NULL */
    /* A DNS question's name in wire form, when host is that name as it
     * came (not normalized): the ring keeps it from this, with its label
     * structure (a '.' inside a label is "\."); or NULL. */
    const uint8_t *qname;
    size_t qname_len;
    unsigned port;
    const char *sni;    /* or NULL */
    const char *reason; /* px_reason_str() */
    const char *rule;   /* "FILE:LINE", or NULL */
    unsigned status;    /* or 0 */
};

/* Keep d as sandbox `id`'s most recent denial. */
void px_denials_note(const char *id, const struct px_denial *d);

/* Batching, per thread (a worker), as the access log's: from now on a
 * denial that finds the lock held waits in this thread's queue instead of
 * the thread waiting, and wake(arg) is called when the first one does; the
 * thread then calls px_denials_flush() soon (a worker: once its loop has
 * run the round's callbacks), which stores what waits if the lock is free
 * and calls wake again if not.  _stop stores what still waits and ends
 * batching.  Until a flush, GET .../denials may not show a denial yet. */
void px_denials_batch_start(void (*wake)(void *), void *arg);
void px_denials_flush(void);
void px_denials_batch_stop(void);
/* Sandbox id's denials, newest first, as a JSON array (a new reference;
 * empty when it has none). */
json_t *px_denials_json(const char *id);
/* The bound sandboxes are now `ids`: every other ring goes. */
void px_denials_forget_except(const char *const *ids, size_t n);
/* How many sandboxes have a ring (for tests). */
size_t px_denials_count(void);

#endif
