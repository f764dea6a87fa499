/*
 * hello.h - the ClientHello phase (hello.c): transparent TLS, and a CONNECT
 * tunnel after its 200.
 */
#ifndef PX_HELLO_H
#define PX_HELLO_H

#include "conn.h"

/* CONNECT: the origin is connected: the 200, then the ClientHello (or, for
 * a `raw` rule, the relay at once).  May close. */
void px_hello_connect_ready(struct px_conn *c);
/* Read the ClientHello from c->early and what is still to come.  May close. */
void px_hello_start(struct px_conn *c);
/* HELLO's timer: no ClientHello in time.  Closes. */
void px_hello_on_timeout(struct px_conn *c);
/* Feed what c->early has that the parser has not seen.  May close. */
void px_hello_feed(struct px_conn *c);
/* Why a complete ClientHello (parser p, result r) is refused whatever
 * host it names: not TLS, malformed, a server_name that is no host name
 * (bad_host), ECH under `ech deny`; PX_R_ALLOWED when it is one to look
 * at.  For the first ClientHello and the later ones (rehello.c) alike. */
enum px_reason px_hello_refused(const struct sni_parser *p, enum sni_result r);
/* Whether host name `name` (len bytes, as a ClientHello sent it) is the
 * host c is for, once normalized. */
bool px_conn_names_host(const struct px_conn *c, const char *name, size_t len);

#endif
