/* denials.h - every egressd's denials, live, for the console's pages.
 *
 * One thread per configured egressd reads its denial stream (GET
 * /v1/denials?follow=1, server-sent events; sse.h) and keeps each denial
 * in one shared ring of SBX_DENIALS_RING, told apart by a sequence number
 * of the console's own, with the sandbox's name and owner (from that
 * egressd's binding, asked once per sandbox) and the egressd's name.  A
 * stream that ends or fails is opened again after a back-off, with
 * Last-Event-ID so that nothing still in egressd's ring is missed.
 *
 * Readers (the pages) take what is newer than the last sequence number
 * they saw and may see (an owner: their own sandboxes'); a reader that
 * fell behind the ring learns how many it lost.  Bounded: the ring holds
 * SBX_DENIALS_RING entries of at most SBX_DENIAL_TEXT_MAX bytes.
 * Thread-safe.
 */
#ifndef SBX_CONSOLE_DENIALS_H
#define SBX_CONSOLE_DENIALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "config.h"

#define SBX_DENIALS_RING    4096
#define SBX_DENIAL_TEXT_MAX 4096

struct sbx_denials;

/* Who may see what: NULL owner is an admin (everything). */
struct sbx_denials_view {
    const char *owner;
};

/* Start reading every egressd of c (c must outlive the hub).  wake(arg)
 * is called, on a reader thread, after new denials are kept. */
struct sbx_denials *sbx_denials_start(const struct sbx_config *c, void (*wake)(void *), void *arg);
/* Stop the threads and free everything. */
void sbx_denials_stop(struct sbx_denials *d);

/* The newest sequence number kept (0: none yet). */
uint64_t sbx_denials_seq(struct sbx_denials *d);

/* Up to max denials newer than *after that view may see, oldest first,
 * each handed to fn(arg, TEXT) as its JSON object's compact text (with
 * "cseq"; fn runs with the hub's lock held: copy, do not wait); *after
 * and *lost as below.  The number handed. */
typedef void (*sbx_denial_fn)(void *arg, const char *text);
size_t sbx_denials_each(struct sbx_denials *d, const struct sbx_denials_view *view, uint64_t *after,
                        size_t max, sbx_denial_fn fn, void *arg, uint64_t *lost);

/* Up to max denials newer than *after that view may see, oldest first,
 * appended to out as JSON objects (each with "cseq"); *after moves to the
 * last one looked at, and *lost (when not NULL) gets how many were newer
 * than *after but already gone from the ring. */
size_t sbx_denials_read(struct sbx_denials *d, const struct sbx_denials_view *view, uint64_t *after,
                        size_t max, json_t *out, uint64_t *lost);

/* The k hosts denied most often to each sandbox view may see, among the
 * denials kept: {"SANDBOX_ID": [{"host": "H:P", "count": N}, ...]}, most
 * first (a new object). */
json_t *sbx_denials_top(struct sbx_denials *d, const struct sbx_denials_view *view, size_t k);

/* Each egressd's stream as {"egressd","connected","error","received",
 * "lost" (denials egressd said this reader missed)}
 * (a new array). */
json_t *sbx_denials_sources(struct sbx_denials *d);

/* Keep one denial as it came from egressd `source` (for the reader
 * threads, and for tests); name and owner are the sandbox's. */
void sbx_denials_keep(struct sbx_denials *d, const char *source, json_t *denial, const char *name,
                      const char *owner);

#endif
