/*
 * metrics.h - the egressd_ families of docs/design.md ("Metrics"), kept in
 * process memory and rendered in Prometheus text format 0.0.4.
 *
 * Labels stay bounded: sandbox and owner come from the bindings (admin-set),
 * "default" and "" for connections without one; mode, decision, reason and
 * direction are fixed word lists.  Never a host name.
 *
 * Hot path: the world holds one handle per binding (and one for
 * "default"); a connection takes another reference to its sandbox's with
 * px_metrics_sandbox_ref() - one atomic add, no lock - and counts through
 * it with atomic adds into the calling thread's own shard, which the page
 * sums.  All functions are thread-safe.
 */
#ifndef PX_METRICS_H
#define PX_METRICS_H

#include <jansson.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "policy.h"
#include "verdict.h"

struct px_msb; /* the counters of one (sandbox, owner) pair */

/* Counting threads with rows of their own: workers 1..64, and 0 for all
 * the others. */
#define PX_METRICS_SHARDS 65

/* The calling thread counts in row `index` from now on (a worker: its
 * index + 1; every thread starts in row 0, shared).  Only one thread may
 * use a row other than 0. An index out of range is row 0. */
void px_metrics_thread(unsigned index);

/* Call once before anything else; `version` goes into build_info. */
void px_metrics_init(const char *version);

/* The handle for (sandbox, owner); owner may be NULL (written as "").
 * Never NULL (allocation failure aborts).  Takes the list's lock: for the
 * world, when it makes a binding's handle, not per connection.  Each get
 * (and each ref) is paired with a put. */
struct px_msb *px_metrics_sandbox_get(const char *sandbox, const char *owner);
/* One more reference to m, which the caller holds (or a world it holds
 * does): lock-free.  Returns m. */
struct px_msb *px_metrics_sandbox_ref(struct px_msb *m);
void px_metrics_sandbox_put(struct px_msb *m); /* NULL is a no-op; lock-free */

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
/* What the policy DNS server did with a query: dns_queries_total{result}. */
enum px_dns_served {
    PX_DNSS_ANSWER,   /* NOERROR with addresses */
    PX_DNSS_NODATA,   /* NOERROR without (HTTPS/SVCB, a family the name lacks) */
    PX_DNSS_NXDOMAIN, /* denied, or no such name */
    PX_DNSS_REFUSED,  /* unknown source, a type or class not served */
    PX_DNSS_RATE,     /* REFUSED: the sandbox's query rate */
    PX_DNSS_SERVFAIL, /* the resolvers failed, or too many lookups in flight */
    PX_DNSS_FORMERR,  /* malformed (FORMERR, BADVERS) */
    PX_DNSS_NOTIMP,   /* an opcode other than QUERY */
    PX_DNSS_DROPPED,  /* no answer at all: too short, or a response */
    PX_DNSS_COUNT
};
void px_metrics_dns_query(enum px_dns_served r);
/* What credential injection did with a secret in a request:
 * injections_total{secret,result}.  Secret names come from secret-dir (at
 * most PX_METRICS_SECRETS of them are counted; the rest are not). */
enum px_injection {
    PX_INJ_ADDED,       /* the placeholder was replaced by the value */
    PX_INJ_MISMATCH,    /* the placeholder was out of place: denied */
    PX_INJ_UNAVAILABLE, /* bound, but the value cannot be sent: refused */
    PX_INJ_METHOD,      /* the request's method may echo it (TRACE, ...): refused */
    PX_INJ_REFLECTED,   /* the origin sent it back: the response was cut */
    PX_INJ_COUNT
};
#define PX_METRICS_SECRETS 256
/* leaf_certificates_total{result="hit"|"mint"}: an intercepted host's leaf
 * from a worker's cache, or minted. */
void px_metrics_leaf(bool hit);
void px_metrics_injection(const char *secret, enum px_injection r);
/* policy_reloads_total{result="ok"|"error"}. */
void px_metrics_reload(bool ok);
/* policy_rules{preset}: replaced by the presets of snapshot p. */
void px_metrics_set_policy(const struct policy *p);
/* sandboxes: the number of bindings. */
void px_metrics_set_sandboxes(size_t n);

/* Drop the series that no handle holds and no connection counts as
 * active, so that sandboxes that come and go do not grow the page
 * forever.  A bound sandbox's series stays: its world holds a handle.
 * px_metrics_render() sweeps first, so the page never shows a series
 * nothing holds. */
void px_metrics_sweep(void);

/* One more section of the page, rendered after the others by `render`
 * (the OAuth logins' families: logins.c); set once, before the page is
 * served. */
void px_metrics_section(void (*render)(FILE *f));
/* A family's HELP and TYPE lines (egressd_NAME), for a section. */
void px_metrics_family(FILE *f, const char *name, const char *type, const char *help);

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
/* Stop accepting on the listener (a successor serves it now); the
 * connections open go on. */
void px_metrics_unlisten(void);

/* Each sandbox's counters since egressd started, for the admin API's GET
 * /v1/traffic: [{"sandbox","owner","active","allowed","denied","bytes_up",
 * "bytes_down"}] (a new array; the same numbers as the metrics page's
 * connections_total summed over mode and reason, active_connections and
 * bytes_total).  Takes the metrics lock, as a scrape does. */
json_t *px_metrics_traffic_json(void);

#endif
