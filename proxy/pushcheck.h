/*
 * pushcheck.h - a git push to a host a `git-push` rule holds, read and
 * decided before anything of it goes upstream (pushcheck.c).
 */
#ifndef PX_PUSHCHECK_H
#define PX_PUSHCHECK_H

#include "conn.h"

/* Whether request req (its head) is a git push over smart HTTP: a POST
 * to a path ending in /git-receive-pack, or of git's content type. */
bool px_pushcheck_wanted(const struct http_request *req);
/* The judged push's head is in c->ex->pending, its body in the client's
 * input from the start: read its command list, decide each command, then
 * the exchange (px_exchange_start), or git's own refusal.  May close. */
void px_pushcheck_start(struct px_conn *c);

#endif
