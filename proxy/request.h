/*
 * request.h - an HTTP request head (request.c): parsed, its target taken,
 * handed to the judge.
 */
#ifndef PX_REQUEST_H
#define PX_REQUEST_H

#include "conn.h"

/* The client's bytes in PX_S_HEAD: once a whole head is in, judge it.
 * May close. */
void px_request_on_head(struct px_conn *c);
/* HEAD's timer: between requests nothing is owed (the connection just
 * closes); in the middle of a head, a 408.  Closes. */
void px_request_on_head_timeout(struct px_conn *c);
/* The judged request's head is ready (c->ex->pending): a git push to a
 * host a git-push rule holds is read first (pushcheck.h), any other goes
 * to the exchange.  May close. */
void px_request_send(struct px_conn *c);
/* Forget the last request (c->rq, the byte counts) for the next one. */
void px_request_reset(struct px_conn *c);

/* Split a Host field's "host[:port]" into a normalized host (the port,
 * when there is one, must be `port`); false when it is not one. */
bool px_request_host_field(struct http_view v, struct policy_host *h, uint16_t port);
/* Prepare the head of req to go upstream (c->ex->pending) and take it
 * from the client's input.  False when it does not fit (431; closed). */
bool px_request_forward(struct px_conn *c, const struct http_request *req);

#endif
