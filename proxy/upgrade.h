/*
 * upgrade.h - the WebSocket phase of an intercepted connection: after the
 * origin's 101, frames both ways over the two TLS legs until either side
 * ends (upgrade.c).
 */
#ifndef PX_UPGRADE_H
#define PX_UPGRADE_H

#include "conn.h"

/* The 101 went on to the client (exchange.c); what follows the origin's
 * head in its input is the first of its frames.  From here on c is an
 * upgraded tunnel; it ends with its close. */
void px_upgrade_start(struct px_conn *c);

#endif
