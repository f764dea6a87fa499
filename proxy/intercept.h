/*
 * intercept.h - credential injection (intercept.c): a CONNECT egressd
 * terminates, and the requests inside it.
 */
#ifndef PX_INTERCEPT_H
#define PX_INTERCEPT_H

#include "conn.h"

/* Whether c (a CONNECT or transparent TLS connection whose name phase
 * allowed it) is to be terminated: its sandbox has a CA, and either only
 * rules with `methods`/`paths` allow the host (c->rq.v.requests) and the
 * CA may sign for it, or an inject rule for its host names a secret its
 * sandbox's binding lists. */
bool px_intercept_wanted(const struct px_conn *c);
/* Whether an HTTP request being judged carries the placeholder of one of
 * its sandbox's secrets in its head (logged): it is then denied
 * credential_host_mismatch, as no plain-HTTP host is bound to a secret. */
bool px_placeholder_seen(const struct px_conn *c);
/* Terminate the CONNECT whose ClientHello passed: TLS both ways, then
 * HTTP requests.  May close. */
void px_intercept_start(struct px_conn *c);
/* An HTTP/2 preface at the start of the client's input: refused (400;
 * closed), true. */
bool px_intercept_refuses_h2(struct px_conn *c);
/* Check a request head inside the tunnel (origin form, Host = the
 * CONNECT host, no Upgrade) and take its target.  False when refused
 * (closed). */
bool px_intercept_target(struct px_conn *c, const struct http_request *req);
/* The request is judged: once the origin's TLS is up, add the
 * credentials to its head and send it on.  May close. */
void px_intercept_request(struct px_conn *c);
void px_intercept_free(struct px_conn *c);
/* The client's TLS leg failed: when the client refused egressd's leaf
 * (an unknown CA, a bad certificate), log that its guest may lack its
 * current sandbox CA. */
void px_intercept_client_error(struct px_conn *c);
/* The origin answered the current request with `status`: a 401 to a
 * request that carried a login's token asks for its refresh (logins.h). */
void px_intercept_on_status(struct px_conn *c, unsigned status);

#endif
