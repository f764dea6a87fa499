/*
 * upstream.h - connecting to the origin, address by address (upstream.c).
 */
#ifndef PX_UPSTREAM_H
#define PX_UPSTREAM_H

#include "conn.h"

/* Connect to the checked addresses (c->ans) from the first.  May close. */
void px_upstream_connect(struct px_conn *c);
/* Connect to the next one (the last failed or timed out).  When none is
 * left: 504 connection_timeout if every address timed out, else 502
 * connection_refused.  May close. */
void px_upstream_next(struct px_conn *c);
/* The upstream connection is up (or kept): on to the step the judged
 * request named (c->on_connected).  May close. */
void px_upstream_ready(struct px_conn *c);

#endif
