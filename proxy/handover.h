/*
 * handover.h - the listening sockets of a running egressd, passed whole to
 * the egressd that succeeds it (successor.c), so that an upgrade refuses
 * no connection.
 *
 * Every listening socket egressd opens is noted here with its role and
 * address (px_handover_note).  A successor asks for them over a channel
 * (a SOCK_SEQPACKET socket pair) and receives the same sockets, by
 * SCM_RIGHTS, not new ones beside them: with SO_REUSEPORT a socket closed
 * by the old process would lose the connections in its accept queue, so
 * the old process never closes one the new does not hold.  Each opening
 * site asks px_handover_claim() first and binds only when nothing was
 * handed over for its role and address.
 *
 * The channel's messages are JSON objects of at most PX_HANDOVER_MSG_MAX
 * bytes, each with an "op":
 *   successor -> old:  {"op":"hello","pid":N,"version":"V"}
 *   old -> successor:  {"op":"sockets","sockets":[{"role":R},...]}
 *                      with the sockets, in that order (several messages)
 *                      {"op":"end","state":{"quota":{"SANDBOX":BYTES,...},
 *                                            "sandboxes_replaced_s":N|null}}
 *   successor -> old:  {"op":"ready","version":V} or {"op":"failed","error":"..."}
 * (each socket's address is its own: getsockname, on receipt)
 * "state" is what the process carries on: each sandbox's bytes counted
 * toward its quota, and how long ago sandboxctl last replaced the whole
 * set of bindings (admin.h), so that both go on where they were.
 */
#ifndef PX_HANDOVER_H
#define PX_HANDOVER_H

#include <jansson.h>
#include <stddef.h>
#include <sys/socket.h>

#define PX_HANDOVER_MSG_MAX 65536

enum px_sock_role {
    PX_SOCK_PROXY,            /* `listen` */
    PX_SOCK_TRANSPARENT_TLS,  /* `transparent-tls` */
    PX_SOCK_TRANSPARENT_HTTP, /* `transparent-http` */
    PX_SOCK_DNS_UDP,          /* `dns`, its datagram socket */
    PX_SOCK_DNS_TCP,          /* `dns`, its stream listener */
    PX_SOCK_METRICS,          /* `metrics` */
    PX_SOCK_ADMIN,            /* `admin` (TCP or unix) */
    PX_SOCK_ROLES
};

/* The role's name on the channel and in the log ("proxy", "dns-udp"...). */
const char *px_handover_role_name(enum px_sock_role role);

/* Note listening socket fd, of `role`, as one to hand over.  Main thread,
 * while starting. */
void px_handover_note(enum px_sock_role role, int fd);

/* A socket handed over by the previous process for role and address sa
 * (for PX_SOCK_ADMIN on a unix socket: the path in sa's sun_path), not
 * claimed before: its descriptor, now the caller's; -1 when there is none
 * left.  Main thread, while starting. */
int px_handover_claim(enum px_sock_role role, const struct sockaddr *sa, socklen_t len);

/* Close every handed-over socket nobody claimed (a listener the new
 * config no longer has), one log line each; returns how many. */
size_t px_handover_close_unclaimed(void);

/* The successor's side: greet the old process on channel `chan` (with
 * this `version`), receive its sockets and its state (*state, a new
 * object: "quota", "sandboxes_replaced_s").  0, or -1 with the reason in
 * err. */
int px_handover_receive(int chan, const char *version, json_t **state, char *err, size_t errlen);

/* The most sockets received for one role and address: the predecessor's
 * worker count, which the successor runs at least (every socket then has
 * a worker of its own, as before). */
size_t px_handover_most(void);

/* The old process's side, after the successor's hello: send every noted
 * socket, then `state` (borrowed).  0, or -1 with the reason in err. */
int px_handover_send(int chan, const json_t *state, char *err, size_t errlen);

/* One message of the channel: send obj (with fds[0..n_fds) attached).
 * 0, or -1 with errno. */
int px_handover_send_msg(int chan, const json_t *obj, const int *fds, size_t n_fds);

/* Receive one message: its object (new reference) and up to max_fds
 * descriptors into fds (*n_fds of them); NULL on EOF or error (errno, 0
 * for EOF or a message that is not a JSON object). */
json_t *px_handover_recv_msg(int chan, int *fds, size_t max_fds, size_t *n_fds);

#endif
