/*
 * judge.h - the one judge of a request or tunnel (judge.c): identify,
 * expiry, the one decision (policy_decide), quota, lookup.
 */
#ifndef PX_JUDGE_H
#define PX_JUDGE_H

#include "conn.h"

/* The one judge of a request (c->rq.host, c->rq.port; c->rq.host.len 0
 * when it did not normalize), for the first request of a connection and
 * every later one, always in the current world: identify (auth as
 * px_conn_identify takes it), the binding's expiry, the name phase, the
 * byte quota, then the address phase on every address of the name, or on
 * the address of the upstream still open for this origin (c->up, kept
 * alive: exchange.c keeps it only for the same host and port).  A denial
 * or a refusal answers and closes; an allowed request goes on to
 * then(c), the asking phase's next step, once an upstream is connected
 * (at once when one is kept).  May close. */
void px_conn_judge(struct px_conn *c, const char *auth, size_t auth_len, px_conn_hook *then);

/* The request c's decisions are on, for policy_decide_request: the one
 * being read (HTTP, plain or intercepted); for a tunnel that is not
 * intercepted, a request with no method and no path (no rule with
 * `methods` or `paths` admits it); NULL for an intercepted tunnel (its
 * requests are judged one by one). */
const struct policy_request *px_conn_asked(const struct px_conn *c);

#endif
