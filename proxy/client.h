/*
 * client.h - reading the client (client.c): a bufferevent for request
 * heads, a raw socket for a ClientHello and a tunnel.
 */
#ifndef PX_CLIENT_H
#define PX_CLIENT_H

#include "conn.h"

/* Give the client bufferevent back to client.c's callbacks (between requests). */
void px_conn_watch_client(struct px_conn *c);
void px_conn_on_client_event(struct bufferevent *bev, short what, void *arg);
/* Read client socket fd as a raw socket (c->rc) into c->early. */
void px_client_watch_raw(struct px_conn *c, int fd);
/* Take the client's socket from its bufferevent (after its CONNECT head):
 * what the bufferevent read beyond the head moves to c->early.  False
 * when the connection was closed. */
bool px_client_to_raw(struct px_conn *c);

#endif
