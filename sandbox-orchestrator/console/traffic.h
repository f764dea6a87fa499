/* traffic.h - each sandbox's traffic over the last hour, for the console's
 * traffic page: every SBX_TRAFFIC_STEP_S seconds a thread asks every
 * egressd for its counters (GET /v1/traffic) and keeps, per sandbox, the
 * sum over the egressd of what each step added (connections allowed and
 * denied, bytes up and down) for the last SBX_TRAFFIC_STEPS steps, and
 * the connections open now.  Bounded: at most SBX_TRAFFIC_SANDBOXES
 * sandboxes (one not seen for an hour makes room).  Thread-safe.
 */
#ifndef SBX_CONSOLE_TRAFFIC_H
#define SBX_CONSOLE_TRAFFIC_H

#include <jansson.h>

#include "config.h"

#define SBX_TRAFFIC_STEP_S    10
#define SBX_TRAFFIC_STEPS     360 /* one hour */
#define SBX_TRAFFIC_SANDBOXES 1024

struct sbx_traffic;

/* Start sampling every egressd of c (c must outlive it). */
struct sbx_traffic *sbx_traffic_start(const struct sbx_config *c);
void sbx_traffic_stop(struct sbx_traffic *t);

/* Take one sample of every egressd's counters now (the thread's work; for
 * tests).  egressd answers are summed by sandbox id. */
void sbx_traffic_sample(struct sbx_traffic *t);

/* Add one egressd's answer (GET /v1/traffic's "sandboxes") to the sample
 * being taken; sbx_traffic_sample() calls it, tests may too. */
void sbx_traffic_add(struct sbx_traffic *t, const char *source, json_t *sandboxes);
/* End the sample being taken: each sandbox's step is what its counters
 * added since the last sample (a counter that went down, an egressd that
 * restarted, counts from its new start; the first sample of an egressd
 * only sets where counting starts, so the hour begins with the console). */
void sbx_traffic_commit(struct sbx_traffic *t);

/* {"step": SECONDS, "sandboxes": [{"sandbox", "owner", "active",
 * "allowed": [...], "denied": [...], "bytes_up": [...], "bytes_down":
 * [...]}]} with one number per step, oldest first, for the sandboxes of
 * owner (NULL: all).  A new reference. */
json_t *sbx_traffic_json(struct sbx_traffic *t, const char *owner);

#endif
