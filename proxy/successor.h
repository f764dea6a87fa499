/*
 * successor.h - start the egressd binary now on disk as this process's
 * successor, and hand it the listening sockets (handover.h).
 *
 *   px_successor_start ─ fork, exec argv with the channel on descriptor
 *                        PX_SUCCESSOR_FD
 *     ◀ hello             ─▶ sockets..., end (the state carried on)
 *     ◀ ready             done(pid, version, NULL): it serves; the caller
 *                         stops accepting and drains (egressd.c)
 *     ◀ failed, EOF, or nothing within PX_SUCCESSOR_START_S
 *                         done(pid, NULL, why): the successor is gone
 *                         (killed if need be, and reaped); this process
 *                         serves on as if nothing happened
 *
 * One successor at a time.  Main thread only.
 */
#ifndef PX_SUCCESSOR_H
#define PX_SUCCESSOR_H

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>

#define PX_SUCCESSOR_FD      3  /* the channel, in the successor */
#define PX_SUCCESSOR_START_S 30 /* from exec to "ready" at most */

typedef void (*px_successor_done)(void *arg, long pid, const char *version, const char *error);

/* Start argv[0] (argv NULL-terminated) as the successor; `state` is sent
 * after the sockets (borrowed until done).  0 (done will be called once),
 * or -1 with the reason in err (done will not be called). */
int px_successor_start(struct event_base *base, char *const argv[], json_t *state,
                       px_successor_done done, void *arg, char *err, size_t errlen);

/* Whether a successor is being started now. */
bool px_successor_busy(void);

#endif
