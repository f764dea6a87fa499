/*
 * exchange.h - the HTTP exchange once its request is judged (exchange.c):
 * bodies, the response, keep-alive.
 */
#ifndef PX_EXCHANGE_H
#define PX_EXCHANGE_H

#include "conn.h"

/* Give c an exchange (c->ex, empty), freed at its close.  For a
 * connection that starts with a request head, and an intercepted one. */
void px_exchange_new(struct px_conn *c);
/* Free c->ex (a connection that became a tunnel, or closes); none: no-op. */
void px_exchange_free(struct px_conn *c);
void px_exchange_start(struct px_conn *c); /* upstream is ready: send the request */
void px_exchange_reset(struct px_conn *c); /* back to PX_S_HEAD for the next request */

#endif
