/*
 * bev.h - the two places egressd reaches past libevent's bufferevent
 * interface (bev.c), kept apart so that a libevent upgrade has one file to
 * check.  Both save a round of the event loop or a copy on the HTTP path.
 */
#ifndef PX_BEV_H
#define PX_BEV_H

#include <event2/bufferevent.h>

/* libevent 2.1 reads at most this much into a bufferevent per callback. */
#define PX_BEV_READ_MAX 4096

/* Write bev's output now instead of in the event loop's next round (saves
 * a round and two epoll changes per answer).  What the socket does not
 * take is written later as usual.  Call before any back-pressure check on
 * bev's output: its write callback does not run for what this writes. */
void px_bev_write_now(struct bufferevent *bev);
/* Read what bev's socket holds now (up to 64 KiB) into its input. */
void px_bev_read_now(struct bufferevent *bev);

#endif
