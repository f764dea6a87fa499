/*
 * egressd.h - the daemon's own internals, shared by egressd.c (process,
 * signals, reload), worker.c (threads and listeners) and the connection
 * code (conn.h lists its files: one client connection, its judge, its
 * answers, its HTTP exchanges and its tunnel).
 * Nothing outside proxy/ includes it.
 *
 *   main thread                    worker threads (N, one event loop each)
 *   ───────────                    ──────────────────────────────────────
 *   signals, inotify, admin API,   SO_REUSEPORT listeners -> px_conn
 *   metrics page, reload           resolver (own cache), relay
 *          │ px_world_* swap  ───▶ px_world_get() per connection/request
 */
#ifndef PX_EGRESSD_H
#define PX_EGRESSD_H

#include <event2/event.h>
#include <event2/listener.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "handover.h"
#include "http.h"
#include "resolver.h"

enum px_listener_kind {
    PX_L_PROXY, /* `listen`: CONNECT and absolute-URI HTTP */
    PX_L_TLS,   /* `transparent-tls`: ClientHello first */
    PX_L_HTTP,  /* `transparent-http`: origin-form HTTP with Host */
};

struct px_listener_spec {
    enum px_listener_kind kind;
    const struct px_addr *addr;
    uint16_t upstream_port; /* PX_L_TLS: where a not-redirected hello goes */
};

/* Settings every worker reads; written once before the workers start,
 * except the atomics. */
struct px_daemon {
    const struct px_config *cfg;
    struct px_listener_spec listeners[3 * PX_MAX_LISTENERS];
    size_t n_listeners;
    struct http_limits http_limits;
    atomic_uint_fast64_t next_id; /* connection ids */
    atomic_long conns;            /* client connections open, all workers */
    atomic_bool draining;         /* SIGTERM: no new requests, tunnels finish */
    atomic_bool handed_over;      /* ... and a successor reads the same sockets now */
    uint8_t placeholder_key[32]; /* the placeholders' key, from the appliance key (placeholder.h) */
};

extern struct px_daemon px_d;

struct px_conn;

struct px_worker {
    unsigned index;
    pthread_t thread;
    struct event_base *base;
    struct px_resolver *resolver;
    struct evconnlistener *lis[3 * PX_MAX_LISTENERS];
    size_t n_lis;
    struct event *backoff; /* re-enables the listeners after EMFILE */
    struct event *wake;    /* the main thread pokes it: drain or stop */
    struct event *recheck; /* the main thread pokes it: the world changed, or a binding expired */
    int reader;            /* its index as a reader of the world (px_world_quiescent) */
    struct event *flush;   /* writes the access-log lines of a round */
    struct px_dnsd *dnsd;  /* the policy DNS server's sockets (dnsd.h), or NULL */
    struct px_leaf_cache *leaves; /* interception's leaf certificates (certs.h) */
    struct px_conn *conns;        /* every open connection of this worker */
    long n_conns;
};

/* Start worker w: its event base, resolver and one SO_REUSEPORT socket per
 * listener.  Returns 0, or -1 with "ADDR: reason" in err. */
int px_worker_init(struct px_worker *w, unsigned index, char *err, size_t errlen);
/* The handover role (handover.h) of a listener of `kind`. */
enum px_sock_role px_listener_role(enum px_listener_kind kind);
int px_worker_run(struct px_worker *w); /* starts the thread */
/* From the main thread: stop accepting (drain) or close everything (stop). */
void px_worker_poke(struct px_worker *w);
/* From the main thread: judge w's open connections again in the current
 * world (px_conn_recheck_all, on w's thread, soon). */
void px_worker_recheck(struct px_worker *w);
void px_worker_join(struct px_worker *w);

#endif
