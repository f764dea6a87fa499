/*
 * tokenep.h - a login's token endpoint, answered by egressd (tokenep.c;
 * docs/credentials.md, "Subscription logins").
 *
 * Inside an intercepted tunnel to a host whose `token-endpoint` rule binds
 * one of the sandbox's logins, a POST to that login's token path is the
 * CLI's own refresh.  egressd reads its body (JSON or form) and answers it
 * itself: the sandbox's refresh-token placeholder gets a response in the
 * provider's shape that carries only the sandbox's placeholders; anything
 * else (a real refresh token the agent found, another grant) is denied
 * `oauth_foreign_token`.  Nothing of it reaches the provider.
 */
#ifndef PX_TOKENEP_H
#define PX_TOKENEP_H

#include "conn.h"

/* Whether the judged request req (its head at the start of the client's
 * input) is a refresh egressd answers; then it has taken it: the answer
 * comes once its body is in, and the connection closes after it. */
bool px_tokenep_take(struct px_conn *c, const struct http_request *req);
/* Let go of what a token-endpoint request holds (px_intercept_free). */
void px_tokenep_free(struct px_conn *c);

#endif
