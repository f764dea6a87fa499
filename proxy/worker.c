/*
 * worker.c - one thread, one event loop, one resolver, and its own
 * SO_REUSEPORT socket on every listener, so the kernel spreads new
 * connections over the workers and no lock is taken to accept.
 *
 * The main thread talks to a worker only through px_d's atomics and two
 * events of the worker's (libevent is set up for threads, so activating
 * another loop's event is safe): on `wake` the worker reads px_phase and
 * drains (closes its listeners and idle keep-alive connections) or stops
 * (closes everything and leaves its loop); on `recheck` it judges its open
 * connections again in the current world (revocation).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "accept.h"
#include "accesslog.h"
#include "certs.h"
#include "conn.h"
#include "denials.h"
#include "dnsd.h"
#include "handover.h"
#include "log.h"
#include "metrics.h"
#include "revoke.h"

/* 0 running, 1 draining, 2 stopping; written by the main thread. */
atomic_int px_phase;

struct listener_arg {
    struct px_worker *w;
    const struct px_listener_spec *l;
};

static struct listener_arg largs[64][3 * PX_MAX_LISTENERS];

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    struct listener_arg *a = arg;
    (void)lis;
    px_conn_accept(a->w, a->l, fd, sa, len);
}

static void on_backoff_over(evutil_socket_t fd, short what, void *arg)
{
    struct px_worker *w = arg;
    (void)fd, (void)what;
    if (atomic_load(&px_phase) != 0)
        return;
    for (size_t i = 0; i < w->n_lis; i++)
        evconnlistener_enable(w->lis[i]);
}

/* Out of descriptors (or memory): stop accepting for a while instead of
 * spinning on a listener that stays readable. */
static void on_accept_error(struct evconnlistener *lis, void *arg)
{
    struct listener_arg *a = arg;
    struct px_worker *w = a->w;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, 250000};
    (void)lis;

    px_log_warnx("worker %u: accept on %s: %s; pausing accepts for 250 ms", w->index,
                 a->l->addr->text, strerror(err));
    for (size_t i = 0; i < w->n_lis; i++)
        evconnlistener_disable(w->lis[i]);
    evtimer_add(w->backoff, &tv);
}

static void close_listeners(struct px_worker *w)
{
    for (size_t i = 0; i < w->n_lis; i++)
        evconnlistener_free(w->lis[i]);
    w->n_lis = 0;
}

/* Access-log lines of this round's callbacks: the flush event was made
 * active by the first of them, so it runs after the callbacks already
 * queued in this round and writes all their lines at once. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    px_accesslog_flush();
    px_denials_flush();
}

static void wake_flush(void *arg)
{
    struct px_worker *w = arg;

    event_active(w->flush, 0, 0);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct px_worker *w = arg;
    (void)fd, (void)what;

    close_listeners(w);
    if (atomic_load(&px_phase) >= 2) {
        px_dnsd_close(w);
        px_conn_close_all(w, false);
        event_base_loopexit(w->base, NULL);
        return;
    }
    /* A successor reads the DNS sockets now: answer what is in flight.
     * Without one, close them at once: a client then hears that nobody
     * answers here instead of waiting for its timeout. */
    if (atomic_load(&px_d.handed_over))
        px_dnsd_quiet(w);
    else
        px_dnsd_close(w);
    px_conn_close_all(w, true);
}

/* After a swap (or an expiry): this thread holds no half-taken world now,
 * so the swapped-out one may go; then judge the open connections again. */
static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
    struct px_worker *w = arg;
    (void)fd, (void)what;

    px_world_quiescent(w->reader);
    px_conn_recheck_all(w);
}

enum px_sock_role px_listener_role(enum px_listener_kind kind)
{
    switch (kind) {
    case PX_L_TLS: return PX_SOCK_TRANSPARENT_TLS;
    case PX_L_HTTP: return PX_SOCK_TRANSPARENT_HTTP;
    default: return PX_SOCK_PROXY;
    }
}

/* Worker w's socket for listener a->l: the one a predecessor handed over
 * for it (handover.h), or a new SO_REUSEPORT one.  0, or -1 with err. */
static int listen_on(struct px_worker *w, struct listener_arg *a, char *err, size_t errlen)
{
    const struct px_addr *addr = a->l->addr;
    enum px_sock_role role = px_listener_role(a->l->kind);
    unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC;
    int fd = px_handover_claim(role, (const struct sockaddr *)&addr->ss, addr->len);
    struct evconnlistener *l;

    if (fd != -1) /* (backlog 0: it listens already) */
        l = evconnlistener_new(w->base, on_accept, a, flags, 0, fd);
    else
        l = evconnlistener_new_bind(w->base, on_accept, a,
                                    flags | LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT, 1024,
                                    (const struct sockaddr *)&addr->ss, (int)addr->len);
    if (l == NULL) {
        snprintf(err, errlen, "%s: cannot listen: %s", addr->text, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    evconnlistener_set_error_cb(l, on_accept_error);
    /* Accepted sockets inherit TCP_NODELAY from their listener (Linux):
     * one setsockopt here instead of one per connection. */
    int one = 1;
    setsockopt(evconnlistener_get_fd(l), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    px_handover_note(role, evconnlistener_get_fd(l));
    w->lis[w->n_lis++] = l;
    return 0;
}

int px_worker_init(struct px_worker *w, unsigned index, char *err, size_t errlen)
{
    const struct px_config *cfg = px_d.cfg;

    memset(w, 0, sizeof(*w));
    w->index = index;
    /* The changelist folds the several add/del a connection makes in one
     * callback into one epoll_ctl per socket per loop turn. */
    struct event_config *ec = event_config_new();
    event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    w->base = event_base_new_with_config(ec);
    event_config_free(ec);
    if (w->base == NULL) {
        snprintf(err, errlen, "worker %u: cannot make an event loop", index);
        return -1;
    }
    w->resolver = px_resolver_new(w->base, cfg->resolvers, cfg->n_resolvers, err, errlen);
    if (w->resolver == NULL)
        return -1;
    w->leaves = px_leaf_cache_new();
    w->backoff = evtimer_new(w->base, on_backoff_over, w);
    w->wake = event_new(w->base, -1, 0, on_wake, w);
    w->recheck = event_new(w->base, -1, 0, on_recheck, w);
    w->reader = px_world_reader_add();
    w->flush = event_new(w->base, -1, 0, on_flush, w);
    for (size_t i = 0; i < px_d.n_listeners; i++) {
        struct listener_arg *a = &largs[index % 64][i];
        a->w = w;
        a->l = &px_d.listeners[i];
        if (listen_on(w, a, err, errlen) == -1)
            return -1;
    }
    return px_dnsd_open(w, err, errlen);
}

static void *worker_main(void *arg)
{
    struct px_worker *w = arg;
    char name[16]; /* the kernel's limit, with the NUL */

    /* named, so that ps -L, top -H and perf --per-thread tell them apart */
    snprintf(name, sizeof(name), "egressd-w%u", w->index);
    pthread_setname_np(pthread_self(), name);
    px_metrics_thread(w->index + 1);
    px_accesslog_batch_start(wake_flush, w);
    px_denials_batch_start(wake_flush, w);
    event_base_dispatch(w->base);
    px_denials_batch_stop();
    px_accesslog_batch_stop();
    return NULL;
}

int px_worker_run(struct px_worker *w)
{
    return pthread_create(&w->thread, NULL, worker_main, w) == 0 ? 0 : -1;
}

void px_worker_poke(struct px_worker *w)
{
    event_active(w->wake, 0, 0);
}

void px_worker_recheck(struct px_worker *w)
{
    event_active(w->recheck, 0, 0);
}

void px_worker_join(struct px_worker *w)
{
    pthread_join(w->thread, NULL);
    close_listeners(w);
    px_dnsd_close(w);
    event_free(w->backoff);
    event_free(w->wake);
    event_free(w->recheck);
    event_free(w->flush);
    px_resolver_free(w->resolver);
    event_base_loop(w->base, EVLOOP_NONBLOCK); /* evdns' last callbacks */
    event_base_free(w->base);
    px_leaf_cache_free(w->leaves);
}
