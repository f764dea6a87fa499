/*
 * addrwatch.h - this host's own addresses, watched.  egressd denies every
 * address of its host's interfaces (px_policy_load), and lists them when
 * a world is built; this watch makes an address added to the host (or
 * removed from it) count without waiting for a reload.
 *
 *   kernel ──RTM_NEWADDR / RTM_DELADDR──▶ NETLINK_ROUTE socket (main loop)
 *          (IPv4 and IPv6 groups)              │ any address message, or a
 *                                              │ lost one (ENOBUFS, MSG_TRUNC,
 *                                              ▼ a malformed message)
 *                                       timer, PX_ADDRWATCH_SETTLE_MS after
 *                                       the first of a burst
 *                                              │
 *                                              ▼
 *                        getifaddrs(3), each address as px_ifaddr_to16()
 *                        takes it, compared with the list of the last
 *                        refresh: when it differs, on_change("ADDR added
 *                        on IF, ADDR removed from IF")
 *
 * The messages only say that something changed: what changed is read
 * from the same list the policy load reads, so a lost message, a burst,
 * or an address added and removed again within the settle time costs
 * nothing but a listing, and a change that is not one (an IPv6 address's
 * lifetimes renewed) does not rebuild the world.
 */
#ifndef PX_ADDRWATCH_H
#define PX_ADDRWATCH_H

#include <stddef.h>

#include <event2/event.h>

/* How long after the first message of a burst the addresses are listed:
 * a change counts at most this long after it was made. */
#define PX_ADDRWATCH_SETTLE_MS 200
/* After a listing that failed (getifaddrs), the next try. */
#define PX_ADDRWATCH_RETRY_MS 1000

/* Called (on base's thread) when the addresses differ from the last list;
 * `what` names each added and removed one.  Returns 0 when the change is
 * applied (the list it was told about becomes the one to compare with),
 * -1 when it was not: the same change is offered again with the next
 * address message. */
typedef int (*px_addrwatch_fn)(const char *what, void *arg);

struct px_addrwatch;

/* Subscribe to address changes on `base` and list the addresses as they
 * are now (the first list to compare with: make the watch before the first
 * world is built, so that no change falls between the two).  Returns the
 * watch, or NULL with the reason in err (socket, bind or getifaddrs). */
struct px_addrwatch *px_addrwatch_new(struct event_base *base, px_addrwatch_fn on_change, void *arg,
                                      char *err, size_t errlen);
/* Stop watching; px_addrwatch_free(NULL) is a no-op. */
void px_addrwatch_free(struct px_addrwatch *w);

#endif
