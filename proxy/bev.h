/*
 * bev.h - the places egressd reaches past libevent's bufferevent
 * interface (bev.c), kept apart so that a libevent upgrade has one file to
 * check.  Each saves a system call, a round of the event loop or a copy on
 * the HTTP path.
 */
#ifndef PX_BEV_H
#define PX_BEV_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdbool.h>

/* What one read of a bufferevent taken over by px_bev_read_direct() asks
 * for (libevent's own reads take at most 4 KiB, after an ioctl(FIONREAD)). */
#define PX_BEV_READ_MAX (16 * 1024)

/* Read socket bufferevent bev with egressd's own read callback from now
 * on: one recvmsg(2) of up to PX_BEV_READ_MAX (less when a read high
 * watermark is nearer) into its input per readable event, where libevent
 * makes an ioctl(FIONREAD) and a readv of at most 4 KiB.  Everything else
 * is as libevent does it: the read callback (watermarks honoured) after
 * bytes came, the event callback with BEV_EVENT_READING|EOF or |ERROR
 * (reading disabled) at an end or an error.  Call once its socket is set,
 * after bufferevent_socket_new(fd) or bufferevent_socket_connect() (both
 * set libevent's own callback), and never set a read timeout on it. */
void px_bev_read_direct(struct bufferevent *bev);

/* Write bev's output now instead of in the event loop's next round (saves
 * a round and two epoll changes per answer).  What the socket does not
 * take is written later as usual.  Call before any back-pressure check on
 * bev's output: its write callback does not run for what this writes. */
void px_bev_write_now(struct bufferevent *bev);
/* The final answer: send bev's output now (at most PX_BEV_LAST_MAX bytes,
 * else as px_bev_write_now) with MSG_MORE, so that a shutdown(SHUT_WR)
 * made right after sends the bytes and the FIN in one segment.  True when
 * the output is all out: the caller must then shut the socket at once
 * (MSG_MORE holds the bytes for it).  False: libevent writes the rest. */
#define PX_BEV_LAST_MAX (16 * 1024)
bool px_bev_write_last(struct bufferevent *bev);
/* End our side of bev's connection, its output being out: a TLS
 * bufferevent first sends its close_notify (so that a response its close
 * delimits is whole to the client, not a truncation), then
 * shutdown(SHUT_WR). */
void px_bev_shut(struct bufferevent *bev);
/* Read what bev's socket holds now (up to 64 KiB) into its input. */
void px_bev_read_now(struct bufferevent *bev);

/* The most one TLS record carries (RFC 8446 section 5.1). */
#define PX_TLS_RECORD_MAX (16 * 1024)
/* Move n bytes from the front of evbuffer in to the end of out in pieces
 * of PX_TLS_RECORD_MAX (a copy): a TLS bufferevent writes one record, and
 * one write(2), per chain of its output, and a TLS bufferevent's input
 * comes in chains of its reads' size (4 KiB), which evbuffer_remove_buffer
 * would carry over as they are. */
void px_bev_move_records(struct evbuffer *in, struct evbuffer *out, size_t n);

#endif
