/*
 * sblimits.h - per-sandbox limits (DESIGN.md configuration):
 * max-conns-per-sandbox, rate-new-conns-per-sandbox (a token bucket whose
 * burst is one second's worth) and quota-bytes-per-sandbox (bytes both
 * ways since egressd started).  Kept by sandbox id, outside the world
 * snapshot, so a reload or a binding change does not reset them.
 * Thread-safe; one short lock per connection start, atomics per byte count.
 */
#ifndef PX_SBLIMITS_H
#define PX_SBLIMITS_H

#include <stdbool.h>
#include <stdint.h>

struct px_limit;

/* The limits of sandbox `id` ("default" for connections without a
 * binding).  Never NULL.  Each get is paired with a put. */
struct px_limit *px_limit_get(const char *id);
void px_limit_put(struct px_limit *l); /* NULL is a no-op */

/* A new connection: false (and nothing counted) when `max_conns` are open
 * or the rate bucket is empty.  0 means no limit. */
bool px_limit_conn_open(struct px_limit *l, uint64_t max_conns, uint64_t per_sec, bool *rate);
void px_limit_conn_close(struct px_limit *l);

/* (The three below take NULL: a connection refused by its limits holds
 * none.) */
/* Count `n` bytes; false once the sandbox's total passes `quota` (0: none). */
bool px_limit_bytes(struct px_limit *l, uint64_t n, uint64_t quota);
/* Whether the quota is already used up. */
bool px_limit_over_quota(const struct px_limit *l, uint64_t quota);

#endif
