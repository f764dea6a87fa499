/*
 * accept.h - where every connection starts (accept.c): the one place that
 * picks its first phase.
 */
#ifndef PX_ACCEPT_H
#define PX_ACCEPT_H

#include "conn.h"

/* Take over socket fd, accepted on listener l from sa (worker w's
 * thread): a connection counted as open, its sandbox found by its source,
 * in its first phase (a request head, or a ClientHello).  May close. */
void px_conn_accept(struct px_worker *w, const struct px_listener_spec *l, evutil_socket_t fd,
                    const struct sockaddr *sa, int salen);

#endif
