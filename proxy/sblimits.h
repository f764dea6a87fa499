/*
 * sblimits.h - per-sandbox limits (docs/design.md configuration):
 * max-conns-per-sandbox, rate-new-conns-per-sandbox (a token bucket whose
 * burst is one second's worth) and quota-bytes-per-sandbox (bytes both
 * ways since the sandbox was bound, or egressd started).  Kept by sandbox
 * id, outside the world snapshot, so a reload or a change of a binding
 * does not reset them; a binding removed takes its counters along (a
 * sandbox bound again under the same id, as a reused VM id would be,
 * starts over).
 * Thread-safe.  A connection of a bound sandbox takes its limits from the
 * world's handle (px_limit_ref) and counts with atomics only; a lock is
 * taken per connection only for a source without a binding.
 */
#ifndef PX_SBLIMITS_H
#define PX_SBLIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resolver.h"

struct px_limit;

/* Connections without a binding count per source address (so one
 * unbound source cannot use up another's limits); when PX_LIMIT_SOURCES_MAX
 * sources already have counters and every one is in use, a new source
 * counts in the shared PX_LIMIT_DEFAULT. */
#define PX_LIMIT_DEFAULT     "default"
#define PX_LIMIT_SOURCES_MAX 4096

/* The limits of sandbox `id`.  Never NULL.  Each get is paired with a put. */
struct px_limit *px_limit_get(const char *id);
/* The limits of a source address without a binding (16 bytes, IPv4
 * mapped), kept across bindings changing (px_limit_forget_except keeps
 * them); when the table of sources is full, the counters of a source no
 * connection holds make room.  Never NULL; paired with a put. */
struct px_limit *px_limit_get_source(const uint8_t addr[16]);
/* One more reference to l, which the caller (or a world it holds) holds:
 * lock-free.  Returns l. */
struct px_limit *px_limit_ref(struct px_limit *l);
void px_limit_put(struct px_limit *l); /* NULL is a no-op; lock-free */

/* The bound sandboxes are now `ids` (sorted by strcmp): every other id's
 * counters are dropped (freed once no connection holds them; a later get
 * of the id starts afresh).  PX_LIMIT_DEFAULT and the sources' are kept. */
void px_limit_forget_except(const char *const *ids, size_t n);
/* Ids with counters (for tests). */
size_t px_limit_count(void);

/* A new connection: false (and nothing counted) when `max_conns` are open
 * or the rate bucket is empty.  0 means no limit. */
bool px_limit_conn_open(struct px_limit *l, uint64_t max_conns, uint64_t per_sec, bool *rate);
void px_limit_conn_close(struct px_limit *l);
/* A query to the policy DNS server: false when the sandbox's bucket of
 * `per_sec` queries a second (burst: one second's worth) is empty.  0
 * means no limit. */
bool px_limit_dns_query(struct px_limit *l, uint64_t per_sec);

/* (The three below take NULL: a connection refused by its limits holds
 * none.) */
/* Count `n` bytes; false once the sandbox's total passes `quota` (0: none). */
bool px_limit_bytes(struct px_limit *l, uint64_t n, uint64_t quota);
/* What is left of the quota now (UINT64_MAX: no quota, or no limits). */
uint64_t px_limit_quota_left(const struct px_limit *l, uint64_t quota);
/* Whether the quota is already used up. */
bool px_limit_over_quota(const struct px_limit *l, uint64_t quota);
/* The sandbox's share of the resolvers (max-lookups-per-sandbox), for
 * px_resolve_shared(); it lives as long as l.  NULL for NULL. */
struct px_dns_share *px_limit_dns_share(struct px_limit *l);

/* Each sandbox's bytes counted toward its quota, for an upgrade's
 * successor (handover.h): calls each(id, bytes, arg) for every sandbox
 * entry that counted any, under the table's lock (each must not call in
 * here). */
void px_limit_each_count(void (*each)(const char *id, uint64_t bytes, void *arg), void *arg);
/* Add `bytes` counted by a predecessor to sandbox id's count. */
void px_limit_carry(const char *id, uint64_t bytes);

#endif
