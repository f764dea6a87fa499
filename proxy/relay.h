/*
 * relay.h - the tunnel (relay.c): bytes both ways until both sides end.
 */
#ifndef PX_RELAY_H
#define PX_RELAY_H

#include "conn.h"

/* Start it with the connection's two raw sockets (rc, ru); what the
 * client sent before (c->early) is sent first.  May close. */
void px_relay_start(struct px_conn *c);
void px_relay_free(struct px_conn *c); /* closes both sockets */
/* Append n bytes to what direction d has to write (relay.c sends them). */
void px_relay_hold(struct px_relay_dir *d, const uint8_t *p, size_t n);

#endif
