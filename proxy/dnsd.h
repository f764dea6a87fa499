/*
 * dnsd.h - the policy DNS server (docs/design.md, "Policy DNS server").
 * Private to the daemon.  One noun a file:
 *   dnsd.c    the server of a worker: its own SO_REUSEPORT UDP socket on
 *             each `dns` address, the datagrams; its TCP side; the log timer
 *   dnstcp.c  the TCP side: listeners, the connections with their framing,
 *             their bounds and timers, the table they share
 *   dnsq.c    one query: who asks (the binding of its source address), the
 *             rate, the name phase on any port, egressd's own resolver, the
 *             address phase on every address, the answer, its log line and
 *             its count
 *   dnstally.c  the refusals counted per interval instead of a line each
 * A query that must wait for the resolver is kept on its transport's
 * pending list, so that a transport that goes (a TCP connection closing,
 * the worker stopping) cancels its queries and no callback runs after.
 */
#ifndef PX_DNSD_H
#define PX_DNSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sockaddr.h"
#include "verdict.h"

struct px_worker;
struct px_dnsq;

/* The queries of one transport that wait for the resolver. */
struct px_dnsq_list {
    struct px_dnsq *head;
    size_t n;
};

/* Where a query came from and how its answer goes back. */
struct px_dnsq_from {
    union px_sockaddr peer; /* the client */
    socklen_t peer_len;
    bool tcp;
    /* Send the answer msg[0..len) to `peer` (over TCP: framed by the
     * callee).  Called at most once per query, maybe before
     * px_dnsq_handle() returns. */
    void (*send)(void *arg, const union px_sockaddr *peer, socklen_t peer_len, const uint8_t *msg,
                 size_t len);
    void *arg;
    struct px_dnsq_list *pending; /* where a query that waits is kept */
};

/* Answer the query msg[0..len) (one datagram, or one TCP message without
 * its prefix) that `from` sent to worker w; from is copied. */
void px_dnsq_handle(struct px_worker *w, const struct px_dnsq_from *from, const uint8_t *msg,
                    size_t len);
/* Cancel every query on l: none is answered, none calls back. */
void px_dnsq_cancel_all(struct px_dnsq_list *l);
/* dns-log summary: write the lines gathered on this worker (its timer,
 * and when it stops). */
void px_dnsq_log_flush(struct px_worker *w);
/* The same, and the worker's table goes (on its thread, as it stops). */
void px_dnsq_log_end(struct px_worker *w);

/* dnstcp.c: a worker's TCP side (never NULL); a listener on a, its own in
 * this worker (0, or -1 with "ADDR: reason" in err); the end of every
 * connection, every query that waits on one and every listener
 * (NULL: nothing). */
struct px_dnstcp;
struct px_addr;
struct px_dnstcp *px_dnstcp_new(struct px_worker *w);
int px_dnstcp_listen(struct px_dnstcp *t, const struct px_addr *a, char *err, size_t errlen);
void px_dnstcp_free(struct px_dnstcp *t);
/* Draining: stop listening, and close the connections that owe no
 * answer (the others close when idle, or at the stop). */
void px_dnstcp_quiet(struct px_dnstcp *t);

/* dnstally.c: the refusals that get no line of their own (a source
 * without a binding, a sandbox past its rate), counted on the calling
 * thread under (sandbox, source address, reason); sandbox is "default"
 * for a source without a binding, owner may be NULL.  _flush writes a
 * line per key and empties the tally (a worker's log timer), _end also
 * frees it (the worker stopping). */
void px_dnstally_note(const char *sandbox, const char *owner, const uint8_t src16[16],
                      enum px_reason reason);
void px_dnstally_flush(void);
void px_dnstally_end(void);

/* dnsd.c: open w's sockets on every `dns` address (0, or -1 with
 * "ADDR: reason" in err); close them, with every TCP connection and every
 * query that waits (the worker stopping or draining). */
int px_dnsd_open(struct px_worker *w, char *err, size_t errlen);
void px_dnsd_close(struct px_worker *w);
/* Draining: read no more queries (a successor reads the same sockets, or
 * nobody does), but answer those in flight; px_dnsd_close() at the stop. */
void px_dnsd_quiet(struct px_worker *w);

#endif
