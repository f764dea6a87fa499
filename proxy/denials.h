/*
 * denials.h - each bound sandbox's most recent denials, for the admin API
 * (GET /v1/sandboxes/{id}/denials): what its agent was refused and why, so
 * that access can be asked for instead of fought for.  Bounded: a ring of
 * PX_DENIALS_PER_SANDBOX per sandbox, made at its first denial, and at most
 * PX_DENIALS_SANDBOXES_MAX rings (the one whose last denial is oldest makes
 * room).  A binding removed takes its ring along.
 *
 * Every denial also gets a number, one more than the one before across all
 * sandboxes (1 is the first since egressd started), and goes to one global
 * ring of the newest PX_DENIALS_RECENT, for GET /v1/denials and its live
 * stream (feed.h).  That ring is history: a binding removed leaves its
 * denials there.  Thread-safe; a thread that batches (a worker) never waits
 * for the lock (below).
 */
#ifndef PX_DENIALS_H
#define PX_DENIALS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define PX_DENIALS_PER_SANDBOX   16
#define PX_DENIALS_SANDBOXES_MAX 1024
#define PX_DENIALS_RECENT        1024 /* the global ring */
#define PX_DENIALS_PATH_MAX      255  /* bytes of a path kept, as the access log keeps */
#define PX_DENIALS_NUDGE_EVERY   (PX_DENIALS_RECENT / 4)

/* One denial, as its access-log line says it (strings are copied, cut to
 * fit; NULL for none).  host and sni are names a sandbox chose: the ring
 * keeps them in DNS presentation format (nametext.h), whatever bytes they
 * hold, so GET .../denials shows them escaped and never without them. */
struct px_denial {
    int64_t ts_ms;
    const char *mode;   /* px_mode_str() */
    const char *method; /* or NULL */
    /* An HTTP request's path, or NULL: never its query, which may hold
     * secrets (anything from a '?' on is left out here too). */
    const char *path;
    const char *host; /* or NULL */
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
/* The number of the newest denial (0 while there is none).  Without the
 * lock: a reader polls it to learn whether denials came. */
uint64_t px_denials_seq(void);
/* From now on fn (NULL: nothing) is called each time the newest number
 * reaches a multiple of PX_DENIALS_NUDGE_EVERY, by the thread that stored
 * that denial, without the lock: so a reader that polls px_denials_seq()
 * at leisure can be told to look before the global ring wraps.  fn must
 * not wait (a worker calls it). */
void px_denials_set_nudge(void (*fn)(void));
/* The denials of the global ring numbered after+1 .. upto (those it
 * holds: a number more than PX_DENIALS_RECENT below the newest is gone, and
 * so is one whose denial a worker let go of, its queue full while the lock
 * was held),
 * oldest first, at most max, each as its JSON object (the per-sandbox
 * fields, and "seq" and "sandbox") into out, new references; how many.
 * The lock is taken for a few copies at a time, never while JSON is made. */
size_t px_denials_after(uint64_t after, uint64_t upto, json_t **out, size_t max);
/* The global ring's denials numbered above `after`, newest first, as a
 * JSON array (a new reference); *last: the newest number it looked at. */
json_t *px_denials_recent_json(uint64_t after, uint64_t *last);
/* The bound sandboxes are now `ids`: every other ring goes. */
void px_denials_forget_except(const char *const *ids, size_t n);
/* How many sandboxes have a ring (for tests). */
size_t px_denials_count(void);

#endif
