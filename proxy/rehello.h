/*
 * rehello.h - a TLS tunnel's later ClientHellos (rehello.c), watched while
 * the relay runs.
 */
#ifndef PX_REHELLO_H
#define PX_REHELLO_H

#include "conn.h"

/* Start the watch (the tunnel's first ClientHello was checked). */
void px_rehello_start(struct px_conn *c);
/* The client's next n bytes: what may go on is appended to the client
 * direction's held bytes, the rest is kept back.  False when a later
 * ClientHello named another host or broke the rules: closed. */
bool px_rehello_client(struct px_conn *c, const uint8_t *p, size_t n);
/* The server's next n bytes (relayed as usual); may end the watch, which
 * lets bytes kept back go on. */
void px_rehello_server(struct px_conn *c, const uint8_t *p, size_t n);
void px_rehello_free(struct px_rehello *rh);

#endif
