/*
 * resolver.h - egressd's own name resolution (docs/design.md, decision step 4):
 * the `hosts-file`, then the configured `resolver` servers through libevent's
 * evdns, with a cache that honours the answers' TTLs.  Never the libc
 * resolver, never /etc/resolv.conf, never /etc/hosts (unless the config
 * names it as hosts-file).  A connection asks once; the addresses it gets
 * are the ones it checks and connects to.
 *
 * One px_resolver per worker event loop (not thread-safe); the hosts table
 * is immutable and shared by all workers (it belongs to the world snapshot,
 * so a reload that rereads hosts-file swaps it with the policy).  A
 * px_dns_share is the one thing several workers touch: it caps how many
 * queries one caller (a sandbox) keeps at the servers, over every worker.
 */
#ifndef PX_RESOLVER_H
#define PX_RESOLVER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct event_base;

#define PX_DNS_MAX_ADDRS 16
#define PX_DNS_CACHE_MAX 4096 /* answers a resolver keeps; past that the oldest goes */

/* Callers index arrays by the first three: PX_DNS_BUSY stays last. */
enum px_dns_result {
    PX_DNS_OK,       /* at least one address */
    PX_DNS_NXDOMAIN, /* the name does not exist, or has no A/AAAA */
    PX_DNS_FAIL,     /* no server answered, SERVFAIL, refused, or no resolver configured */
    PX_DNS_BUSY,     /* not asked: the caller's share was used up (px_resolve_shared only) */
};

enum px_dns_source {
    PX_DNS_SRC_HOSTS, /* hosts-file */
    PX_DNS_SRC_CACHE, /* an earlier answer still within its TTL */
    PX_DNS_SRC_NET,   /* a server answered now */
};

/* The TTL of an answer from the hosts file, which has none. */
#define PX_DNS_TTL_NONE UINT32_MAX

struct px_dns_answer {
    enum px_dns_source source;
    uint32_t ttl; /* seconds it holds from now (PX_DNS_TTL_NONE: hosts-file) */
    size_t n;
    uint8_t addr[PX_DNS_MAX_ADDRS][16]; /* IPv4 as ::ffff:a.b.c.d; IPv4 first */
};

/* ---- hosts file: "ADDR NAME [NAME...]" lines, '#' comments. */

struct px_hosts;

/* Read and check `path`.  Names are normalized as policy/ does (so
 * "GitHub.com." matches "github.com").  Returns the table, or NULL with
 * "PATH:LINE: what was expected, found what" (every error, one per line) in
 * err. */
struct px_hosts *px_hosts_load(const char *path, char *err, size_t errlen);
/* The addresses of `name` (normalized), or 0 if the table has none. */
size_t px_hosts_lookup(const struct px_hosts *h, const char *name, uint8_t out[][16], size_t max);
void px_hosts_free(struct px_hosts *h); /* NULL is a no-op */

/* ---- resolver */

struct px_resolver;
struct px_dns_req;

/* A resolver on `base` asking `servers` (n may be 0: then only the hosts
 * table answers and any other name is PX_DNS_FAIL).  Returns NULL with the
 * reason in err. */
struct px_resolver *px_resolver_new(struct event_base *base, const struct px_addr *servers,
                                    size_t n, char *err, size_t errlen);
/* Free `r` (NULL is a no-op): no callback of its requests runs after this,
 * and the shares they charged are given back now.  Its queries still at
 * evdns free themselves when evdns's last callback for them runs from the
 * loop, so run the loop once more (EVLOOP_NONBLOCK) before freeing the
 * event_base. */
void px_resolver_free(struct px_resolver *r);
/* How many answers `r` holds in its cache now (at most PX_DNS_CACHE_MAX;
 * expired ones count until a lookup drops them).  For tests. */
size_t px_resolver_cached(const struct px_resolver *r);

typedef void (*px_dns_cb)(enum px_dns_result res, const struct px_dns_answer *a, void *arg);

/* Resolve normalized `name` (A and AAAA).  If the answer is known at once
 * (hosts table, cache, or no server configured), cb runs before px_resolve
 * returns and NULL is returned.  Otherwise a request handle is returned and
 * cb runs once, later, from the event loop; `a` is valid only during cb.
 * `hosts` may be NULL. */
struct px_dns_req *px_resolve(struct px_resolver *r, const struct px_hosts *hosts, const char *name,
                              px_dns_cb cb, void *arg);

/* One caller's share of the servers, counted over every worker: the
 * queries to the servers that its lookups started and that are still in
 * flight.  The caller owns it (egressd keeps one per sandbox), zeroes it
 * before first use, and keeps it alive as long as any of its requests is.
 *
 * Ownership: a query charges the share of the request that started it, one
 * unit, and gives it back exactly once: when the query ends (answered,
 * failed, timed out), or when that starting request is cancelled (or its
 * resolver freed), whichever comes first.  From then on the query never
 * touches the share again, even while it goes on for other requests that
 * joined it; so the share need only outlive the requests that started
 * queries, and joining requests are never charged. */
struct px_dns_share {
    atomic_uint in_flight;
};

/* As px_resolve(), but a lookup that needs a new query to the servers
 * starts one only while share->in_flight < max (share NULL or max 0: no
 * cap); otherwise cb runs at once with PX_DNS_BUSY and NULL is returned.
 * A lookup that joins a query already in flight for the same name, or is
 * answered from the hosts table or the cache, is never refused and costs
 * the share nothing.  (With max 0 a share still counts its queries.) */
struct px_dns_req *px_resolve_shared(struct px_resolver *r, const struct px_hosts *hosts,
                                     const char *name, struct px_dns_share *share, unsigned max,
                                     px_dns_cb cb, void *arg);

/* Cancel a request in flight; its cb never runs.  If it started its query,
 * the share it charged is given back now.  If nobody else waits for the
 * query, the query is cancelled too: its requests to the servers are
 * withdrawn (not retried), a later lookup of the name starts a new query,
 * and an answer that still comes is not cached.  NULL is a no-op, and so is
 * the request whose cb is running. */
void px_resolve_cancel(struct px_dns_req *q);

#endif
