/*
 * resolver.h - egressd's own name resolution (DESIGN.md, decision step 4):
 * the `hosts-file`, then the configured `resolver` servers through libevent's
 * evdns, with a cache that honours the answers' TTLs.  Never the libc
 * resolver, never /etc/resolv.conf, never /etc/hosts (unless the config
 * names it as hosts-file).  A connection asks once; the addresses it gets
 * are the ones it checks and connects to.
 *
 * One px_resolver per worker event loop (not thread-safe); the hosts table
 * is immutable and shared by all workers (it belongs to the world snapshot,
 * so a reload that rereads hosts-file swaps it with the policy).
 */
#ifndef PX_RESOLVER_H
#define PX_RESOLVER_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct event_base;

#define PX_DNS_MAX_ADDRS 16

enum px_dns_result {
    PX_DNS_OK,       /* at least one address */
    PX_DNS_NXDOMAIN, /* the name does not exist, or has no A/AAAA */
    PX_DNS_FAIL,     /* no server answered, SERVFAIL, refused, or no resolver configured */
};

enum px_dns_source {
    PX_DNS_SRC_HOSTS, /* hosts-file */
    PX_DNS_SRC_CACHE, /* an earlier answer still within its TTL */
    PX_DNS_SRC_NET,   /* a server answered now */
};

struct px_dns_answer {
    enum px_dns_source source;
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
void px_resolver_free(struct px_resolver *r); /* cancels what is in flight */

typedef void (*px_dns_cb)(enum px_dns_result res, const struct px_dns_answer *a, void *arg);

/* Resolve normalized `name` (A and AAAA).  If the answer is known at once
 * (hosts table, cache, or no server configured), cb runs before px_resolve
 * returns and NULL is returned.  Otherwise a request handle is returned and
 * cb runs once, later, from the event loop; `a` is valid only during cb.
 * `hosts` may be NULL. */
struct px_dns_req *px_resolve(struct px_resolver *r, const struct px_hosts *hosts, const char *name,
                              px_dns_cb cb, void *arg);

/* Cancel a request in flight; its cb never runs.  NULL is a no-op. */
void px_resolve_cancel(struct px_dns_req *q);

#endif
