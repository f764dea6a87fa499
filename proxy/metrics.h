/*
 * metrics.h - the egressd_ families of docs/design.md ("Metrics"), kept in
 * process memory and rendered in Prometheus text format 0.0.4.
 *
 * Labels stay bounded: sandbox and owner come from the bindings (admin-set),
 * "default" and "" for connections without one; mode, decision, reason and
 * direction are fixed word lists.  Never a host name.
 *
 * Hot path: a connection takes one handle for its (sandbox, owner) pair at
 * the start and counts through it with atomic adds; no lock per byte or per
 * request.  All functions are thread-safe.
 */
#ifndef PX_METRICS_H
#define PX_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "verdict.h"

struct px_msb; /* the counters of one (sandbox, owner) pair */

/* Call once before anything else; `version` goes into build_info. */
void px_metrics_init(const char *version);

/* The handle for (sandbox, owner); owner may be NULL (written as "").
 * Never NULL (allocation failure aborts).  Each get is paired with a put. */
struct px_msb *px_metrics_sandbox_get(const char *sandbox, const char *owner);
void px_metrics_sandbox_put(struct px_msb *m);

/* One decided connection or request: connections_total{...}. */
void px_metrics_decision(struct px_msb *m, enum px_mode mode, enum policy_decision d,
                         enum px_reason r);
/* active_connections{sandbox,owner} += delta (+1 at accept, -1 at close). */
void px_metrics_active(struct px_msb *m, int delta);
/* bytes_total{sandbox,owner,direction="up"|"down"}. */
void px_metrics_bytes(struct px_msb *m, uint64_t up, uint64_t down);

/* upstream_connect_seconds histogram. */
void px_metrics_upstream_connect(double seconds);
/* dns_lookups_total{result}: result is one of "hosts", "cache", "ok",
 * "nxdomain", "fail". */
void px_metrics_dns(const char *result);
/* policy_reloads_total{result="ok"|"error"}. */
void px_metrics_reload(bool ok);
/* policy_rules{preset}: replaced by the presets of snapshot p. */
void px_metrics_set_policy(const struct policy *p);
/* sandboxes: the number of bindings. */
void px_metrics_set_sandboxes(size_t n);

/* Drop the series of sandboxes that are not in `keep` (n ids) and have no
 * handle out, so that sandboxes that come and go do not grow the page
 * forever. */
void px_metrics_forget_except(const char *const *keep, size_t n);

/* The whole page (text format 0.0.4), NUL-terminated; caller frees. */
char *px_metrics_render(size_t *len);

struct event_base;
struct px_addr;

/* Serve `GET /metrics` (the page above, Content-Type
 * "text/plain; version=0.0.4; charset=utf-8") and `GET /healthz` ("ok") on
 * `addr` from `base` (evhttp).  Anything else: 404; other methods: 405.
 * Returns 0, or -1 with "ADDR: reason" in err. */
int px_metrics_listen(struct event_base *base, const struct px_addr *addr, char *err,
                      size_t errlen);
void px_metrics_stop(void);

#endif
