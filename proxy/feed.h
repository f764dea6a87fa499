/*
 * feed.h - the live feed of denials (GET /v1/denials?follow=1): a
 * server-sent-events stream per follower, on the main thread's loop, of
 * every denial of every sandbox as the global ring of denials.h numbers
 * it.  Bounded: at most PX_FEED_MAX followers, and a follower that does
 * not read is given nothing more past PX_FEED_OUT_CAP unsent bytes; it is
 * told how many it missed (`event: lost`) once it has taken them.
 */
#ifndef PX_FEED_H
#define PX_FEED_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

#define PX_FEED_MAX     32           /* followers at a time */
#define PX_FEED_OUT_CAP (256u << 10) /* a follower's unsent bytes past which it misses denials */

/* From now on, followers are served on base's loop. */
void px_feed_start(struct event_base *base);
/* Make req (a GET, its headers and token checked) a follower: the
 * stream's head is sent, then the denials still in the global ring
 * numbered above `since` when has_since (all of them when since is above
 * the newest number: it came from before egressd started), then each new
 * one.  -1 (nothing sent) when PX_FEED_MAX follow already. */
int px_feed_follow(struct evhttp_request *req, bool has_since, uint64_t since);
/* End every stream (its last chunk, written as far as the socket takes
 * it: the loop will not run again) before evhttp goes away. */
void px_feed_stop(void);

#endif
