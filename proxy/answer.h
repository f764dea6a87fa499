/*
 * answer.h - the deny and fail contract (answer.c): 403 + X-Egress-Deny, a
 * TLS alert, the 4xx/5xx refusals; every one ends the connection.
 */
#ifndef PX_ANSWER_H
#define PX_ANSWER_H

#include "conn.h"

/* Deny the current request with `r` (and the verdict's rule): 403 + the
 * X-Egress-Deny header for HTTP and CONNECT-before-200, a TLS alert after
 * it and for transparent TLS; then close.  Closes. */
void px_conn_deny(struct px_conn *c, enum px_reason r);
/* The same, for a denial no rule made (a ClientHello check, the
 * transparent destination check). */
void px_conn_deny_unruled(struct px_conn *c, enum px_reason r);
/* End a connection whose stream has started (a tunnel relaying, an answer
 * under way): nothing more can be answered, so the line says deny `r`
 * (with `rule`, or none) and the stream just ends.  Closes. */
void px_conn_end_denied(struct px_conn *c, enum px_reason r, const struct policy_rule_ref *rule,
                        const char *why);
/* Answer an error status (400, 407, 414, 429, 431, 502, 503, 504, ...) and
 * close.  A refusal by egressd (bad_request, limit, not_allowed, a 408)
 * gets the deny contract; a failure on the way to the origin gets an RFC
 * 9209 Proxy-Status error.  Closes. */
void px_conn_fail(struct px_conn *c, unsigned status, enum px_reason r, const char *detail);

/* Deny the current request with `r` (and the verdict's rule) in an
 * answer of the client's own protocol: `status` with X-Egress-Deny and
 * body[0..len) of content type `type` (git's refusal of a push:
 * pushcheck.c); then close.  Closes. */
void px_conn_deny_reply(struct px_conn *c, enum px_reason r, unsigned status, const char *type,
                        const char *body, size_t len);

/* Answer a request egressd serves itself (a sandbox's refresh of a login:
 * tokenep.c) with `status` and body[0..len) of content type `type`, then
 * close.  Closes. */
void px_conn_reply(struct px_conn *c, unsigned status, const char *type, const char *body,
                   size_t len);

#endif
