/*
 * revoke.h - judging open connections again after a world swap (revoke.c).
 */
#ifndef PX_REVOKE_H
#define PX_REVOKE_H

#include "conn.h"

/* Revocation: judge every open connection of w again in the current world.
 * A connection whose sandbox is gone, expired, bound elsewhere or whose
 * credentials changed is closed; so is one whose request or tunnel the
 * current policy no longer allows (policy_decide on its host and the
 * address it is connected to).  Each such line says `revoked`.  The
 * others go on untouched, judged from now on by the current world. */
void px_conn_recheck_all(struct px_worker *w);

#endif
