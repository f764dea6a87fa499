/*
 * egressd.c - the process: read the config, build the first world, open
 * the listeners, start the workers, then serve signals, policy-dir changes,
 * the host's address changes (addrwatch.c), the admin API and the metrics
 * page on the main thread until SIGTERM.
 *
 *   egressd -c FILE        run (foreground; diagnostics on stderr)
 *   egressd -t -c FILE     check the config, the presets and the hosts file
 *
 * Signals: SIGHUP reload, SIGUSR1 reopen the access log, SIGUSR2 upgrade in
 * place (as egressctl upgrade: the binary on disk takes over), SIGTERM/SIGINT
 * stop accepting, let tunnels finish for up to `timeout-drain`, then close.
 */
#include <errno.h>
#include <event2/thread.h>
#include <getopt.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <malloc.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "addrwatch.h"
#include "admin.h"
#include "appliance.h"
#include "certs.h"
#include "conn.h"
#include "handover.h"
#include "log.h"
#include "logins.h"
#include "metrics.h"
#include "policy_load.h"
#include "prefixbio.h"
#include "sblimits.h"
#include "sdnotify.h"
#include "secrets.h"
#include "successor.h"
#include "version.h"
#include "world.h"

#define MAX_WORKERS 64
_Static_assert(MAX_WORKERS < PX_METRICS_SHARDS, "a metrics row for every worker");

struct px_daemon px_d;
extern atomic_int px_phase;

static struct px_config cfg;
static struct px_geo geo;
static struct px_worker workers[MAX_WORKERS];
static unsigned n_workers;
static struct event_base *main_base;
static struct px_resolver *main_resolver;
static struct event *drain_timer, *reload_timer, *expiry_timer;
static EVP_PKEY *appliance_key; /* state-dir/appliance.key (appliance.h) */
static int64_t drain_end_ms;
static int inotify_fd = -1;
static struct px_addrwatch *addrwatch;
/* The upgrade in place: this binary's path and the config's, as a
 * successor is started with them; the channel from a predecessor (-1:
 * none); the watch on state-dir once this process handed over. */
static char self_path[PATH_MAX], conf_path[PATH_MAX];
static bool debug_flag;
static int takeover_chan = -1;
static json_t *handed_state; /* what the predecessor handed on (handover.h) */
static int state_watch_fd = -1;

/* libevent's own messages (evdns marking a server down, ...) go to the
 * diagnostics log instead of raw stderr. */
static void on_libevent_log(int severity, const char *msg)
{
    if (severity >= EVENT_LOG_WARN)
        px_log_warnx("libevent: %s", msg);
    else
        px_log_debug("libevent: %s", msg);
}

static void usage(void)
{
    fprintf(stderr, "usage: egressd [-d] -c egressd.conf\n"
                    "       egressd -t -c egressd.conf   (check and exit)\n"
                    "       (--takeover FD: started by a running egressd that hands over; "
                    "see egressctl upgrade)\n");
    exit(2);
}

/* ------------------------------------------------------------ reload */

/* Build the world again (px_world_reload); returns 0, or -1 when the
 * current one stays.  Either way one line says why and what came of it. */
static int reload(const char *why)
{
    char err[8192];

    if (px_world_reload(err, sizeof(err)) == 0) {
        px_log_info("policy reloaded (%s)", why);
        return 0;
    }
    px_log_warnx("policy reload (%s) failed; the previous policy stays in force:\n%s", why, err);
    return -1;
}

static void on_reload_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    reload(cfg.secret_dir[0] ? "policy-dir or secret-dir changed" : "policy-dir changed");
}

/* Editors write a file in several steps: wait until the directory has
 * been quiet for a moment, then reload once. */
static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    struct timeval tv = {0, 300000};
    (void)what, (void)arg;

    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    evtimer_add(reload_timer, &tv);
}

/* Watch policy-dir, and secret-dir when there is one: a change to either
 * reloads (a rotated secret is used from the next request on). */
static void watch_policy_dir(void)
{
    const uint32_t changes = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE;

    inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd == -1 || inotify_add_watch(inotify_fd, cfg.policy_dir, changes) == -1) {
        px_log_warn("cannot watch %s for changes; reload with SIGHUP", cfg.policy_dir);
        return;
    }
    if (cfg.secret_dir[0] != '\0' && inotify_add_watch(inotify_fd, cfg.secret_dir, changes) == -1)
        px_log_warn("cannot watch %s for changes; reload with SIGHUP", cfg.secret_dir);
    reload_timer = evtimer_new(main_base, on_reload_timer, NULL);
    event_add(event_new(main_base, inotify_fd, EV_READ | EV_PERSIST, on_inotify, NULL), NULL);
}

/* An address added to the host or removed from it: the world is built
 * again as by a reload, which lists the host's addresses to deny them
 * (px_policy_load), and open connections are judged again with it. */
static int on_own_addrs(const char *what, void *arg)
{
    char why[1200];
    (void)arg;

    snprintf(why, sizeof(why), "own addresses: %s", what);
    return reload(why);
}

/* ------------------------------------------------------------ revocation */

/* What a sandbox holds follows its binding: after every change of the
 * world, and when a binding's `expires` comes, every worker judges its
 * open connections again (px_conn_recheck_all). */
static void recheck_workers(void)
{
    for (unsigned i = 0; i < n_workers; i++)
        px_worker_recheck(&workers[i]);
}

/* The soonest `expires` still to come (Unix seconds), 0 if none. */
static int64_t next_expiry(void)
{
    struct px_world *w = px_world_get();
    int64_t now = (int64_t)time(NULL), next = 0;

    for (size_t i = 0; i < w->n_sandboxes; i++) {
        int64_t e = w->sandboxes[i].expires;
        if (e > now && (next == 0 || e < next))
            next = e;
    }
    px_world_put(w);
    return next;
}

/* Wake at the next expiry (a little after it: the workers compare
 * time(NULL) with it, which must have reached it by then). */
static void arm_expiry(void)
{
    struct timespec ts;
    int64_t at = next_expiry();

    if (at == 0) {
        evtimer_del(expiry_timer);
        return;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ms = at * 1000 + 5 - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    struct timeval tv = {.tv_sec = ms > 0 ? ms / 1000 : 0,
                         .tv_usec = ms > 0 ? (suseconds_t)(ms % 1000) * 1000 : 0};
    evtimer_add(expiry_timer, &tv);
}

static void on_expiry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what, (void)arg;
    recheck_workers();
    arm_expiry();
}

/* Whether this process handed its sockets to a successor: that one keeps
 * the OAuth logins from then on (two refreshing one login would spend
 * each other's refresh tokens). */
static bool stepped_down;

/* The OAuth logins of the world in force (logins.h): main thread. */
static void sync_logins(void)
{
    if (stepped_down)
        return;
    struct px_world *w = px_world_get();
    px_logins_sync(w->secrets);
    px_world_put(w);
}

static void on_world_swap(void)
{
    recheck_workers();
    arm_expiry();
    sync_logins();
}

/* jansson's free: what it held (a login file's tokens among it) is wiped
 * first. */
static void wiping_free(void *p)
{
    if (p != NULL)
        explicit_bzero(p, malloc_usable_size(p));
    free(p);
}

/* ------------------------------------------------------------ stopping */

static void stop_workers(int phase)
{
    atomic_store(&px_phase, phase);
    for (unsigned i = 0; i < n_workers; i++)
        px_worker_poke(&workers[i]);
}

static void on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    struct timeval tv = {0, 100000};
    (void)fd, (void)what, (void)arg;

    if (atomic_load(&px_d.conns) > 0 && px_now_ms() < drain_end_ms) {
        evtimer_add(drain_timer, &tv);
        return;
    }
    if (atomic_load(&px_d.conns) > 0)
        px_log_info("drain deadline: closing %ld connections", atomic_load(&px_d.conns));
    stop_workers(2);
    event_base_loopexit(main_base, NULL);
}

/* Stop accepting; tunnels may finish within timeout-drain, then close. */
static void begin_drain(const char *why)
{
    px_log_info("%s: no new connections; tunnels may finish within %llu ms", why,
                (unsigned long long)cfg.timeout_drain_ms);
    atomic_store(&px_d.draining, true);
    drain_end_ms = px_now_ms() + (int64_t)cfg.timeout_drain_ms;
    stop_workers(1);
    drain_timer = evtimer_new(main_base, on_drain_tick, NULL);
    on_drain_tick(-1, 0, NULL);
}

static int upgrade(void *arg, struct evhttp_request *req, char *err, size_t errlen);

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what, (void)arg;

    switch (sig) {
    case SIGHUP: reload("SIGHUP"); return;
    case SIGUSR1:
        if (px_accesslog_reopen() == 0)
            px_log_info("access log reopened");
        return;
    case SIGUSR2: {
        char err[1024];
        if (upgrade(NULL, NULL, err, sizeof(err)) == -1)
            px_log_warnx("upgrade (SIGUSR2): %s", err);
        return;
    }
    default:
        if (atomic_load(&px_d.draining)) {
            px_log_info("second stop signal: closing now");
            drain_end_ms = 0;
            return;
        }
        if (!stepped_down)
            px_sdnotify("STOPPING=1", false);
        begin_drain("stopping");
    }
}

/* ------------------------------------------------------------ upgrade */

/* state-dir/sandboxes.json changed (the successor wrote it): take its
 * bindings, so that revocation and expiry reach this process's tunnels. */
static void on_state_change(evutil_socket_t fd, short what, void *arg)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    char err[8192];
    bool ours = false;
    ssize_t n;
    (void)what, (void)arg;

    while ((n = read(fd, buf, sizeof(buf))) > 0)
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            ours |= e->len > 0 && strcmp(e->name, "sandboxes.json") == 0;
            p += sizeof(*e) + e->len;
        }
    if (!ours)
        return;
    if (px_world_follow(err, sizeof(err)) == 0)
        px_log_info("draining: bindings follow the successor's");
    else
        px_log_warnx("draining: cannot follow the successor's bindings; these stay:\n%s", err);
}

/* Follow the bindings the successor writes to state-dir (if any). */
static void follow_state(void)
{
    if (cfg.state_dir[0] == '\0')
        return;
    state_watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (state_watch_fd == -1 ||
        inotify_add_watch(state_watch_fd, cfg.state_dir, IN_MOVED_TO | IN_CLOSE_WRITE) == -1) {
        px_log_warn("draining: cannot watch %s; bindings changed now reach this process's "
                    "tunnels only at their end",
                    cfg.state_dir);
        return;
    }
    event_add(event_new(main_base, state_watch_fd, EV_READ | EV_PERSIST, on_state_change, NULL),
              NULL);
}

/* The successor serves: stop accepting everywhere, leave the OAuth
 * logins to it, follow its bindings, and drain. */
static void step_down(void)
{
    stepped_down = true;
    atomic_store(&px_d.handed_over, true);
    px_admin_unlisten();
    px_metrics_unlisten();
    px_logins_shutdown();
    follow_state();
    begin_drain("handed over to the successor");
}

/* The successor serves or failed: answer the POST /v1/upgrade that asked
 * (arg; NULL for SIGUSR2), and step down when it serves. */
static void on_successor(void *arg, long pid, const char *version, const char *error)
{
    if (arg != NULL)
        px_admin_upgrade_reply(arg, pid, version, error);
    if (error != NULL) {
        px_log_warnx("upgrade failed; this egressd (pid %ld) serves on: %s", (long)getpid(), error);
        return;
    }
    px_log_info("upgrade: pid %ld (egressd %s) serves now", pid, version ? version : "?");
    step_down();
}

/* Each sandbox's bytes toward its quota, as a JSON object. */
static void add_count(const char *id, uint64_t bytes, void *arg)
{
    json_object_set_new(arg, id, json_integer((json_int_t)bytes));
}

/* POST /v1/upgrade: start this binary's path anew as the successor. */
static int upgrade(void *arg, struct evhttp_request *req, char *err, size_t errlen)
{
    char chan[16];
    (void)arg;

    if (atomic_load(&px_d.draining)) {
        snprintf(err, errlen, "this egressd is draining; upgrade the one that serves");
        return -1;
    }
    snprintf(chan, sizeof(chan), "%d", PX_SUCCESSOR_FD);
    char *argv[] = {self_path, "-c", conf_path, "--takeover", chan, debug_flag ? "-d" : NULL, NULL};
    json_t *quota = json_object();
    px_limit_each_count(add_count, quota);
    json_t *state =
        json_pack("{s:o,s:o}", "quota", quota, "sandboxes_replaced_s", px_admin_replaced_ago());
    int rc = px_successor_start(main_base, argv, state, on_successor, req, err, errlen);
    json_decref(state);
    return rc;
}

/* ------------------------------------------------------------ start */

static json_t *status_hook(void *arg)
{
    (void)arg;
    return json_pack("{s:I,s:I,s:b,s:I}", "workers", (json_int_t)n_workers, "connections",
                     (json_int_t)atomic_load(&px_d.conns), "draining", atomic_load(&px_d.draining),
                     "pid", (json_int_t)getpid());
}

/* The predecessor's sockets and state (handover.h), when this
 * process takes over from one.  0, or -1 with err. */
static int take_over(char *err, size_t errlen)
{
    if (takeover_chan == -1)
        return 0;
    if (px_handover_receive(takeover_chan, EGRESSD_VERSION, &handed_state, err, errlen) == -1)
        return -1;
    size_t most = px_handover_most();
    if (most > n_workers) {
        px_log_info("taking over: %zu workers, as many as the predecessor's sockets (the config "
                    "says %u)",
                    most, n_workers);
        n_workers = most < MAX_WORKERS ? (unsigned)most : MAX_WORKERS;
    }
    const char *id;
    json_t *v;
    json_object_foreach(json_object_get(handed_state, "quota"), id, v)
    {
        if (json_is_integer(v) && json_integer_value(v) > 0)
            px_limit_carry(id, (uint64_t)json_integer_value(v));
    }
    return 0;
}

/* Serving: tell the predecessor (which then drains) and systemd, which
 * takes this process as the service's main one before the predecessor
 * may exit. */
static void announce_ready(void)
{
    char state[64];

    if (takeover_chan == -1) {
        px_sdnotify("READY=1", false);
        return;
    }
    size_t n = px_handover_close_unclaimed();
    if (n > 0)
        px_log_info("taking over: %zu sockets of listeners the config no longer has closed", n);
    snprintf(state, sizeof(state), "MAINPID=%ld\nREADY=1", (long)getpid());
    px_sdnotify(state, true);
    json_t *ready = json_pack("{s:s,s:s}", "op", "ready", "version", EGRESSD_VERSION);
    if (px_handover_send_msg(takeover_chan, ready, NULL, 0) == -1)
        px_log_warn("taking over: cannot tell the predecessor");
    json_decref(ready);
    close(takeover_chan);
    takeover_chan = -1;
}

/* A start that failed: say why on stderr, and to the predecessor if
 * there is one (it serves on and answers the upgrade with this). */
static int start_failed(const char *prefix, const char *err)
{
    fprintf(stderr, "%s%s\n", prefix, err);
    if (takeover_chan != -1) {
        json_t *msg = json_pack("{s:s,s:s}", "op", "failed", "error", err);
        px_handover_send_msg(takeover_chan, msg, NULL, 0);
        json_decref(msg);
    }
    return 1;
}

static void add_listeners(void)
{
    for (size_t i = 0; i < cfg.n_listen; i++)
        px_d.listeners[px_d.n_listeners++] =
            (struct px_listener_spec){PX_L_PROXY, &cfg.listen[i], 0};
    for (size_t i = 0; i < cfg.n_transparent_tls; i++)
        px_d.listeners[px_d.n_listeners++] =
            (struct px_listener_spec){PX_L_TLS, &cfg.transparent_tls[i], cfg.tls_upstream_port[i]};
    for (size_t i = 0; i < cfg.n_transparent_http; i++)
        px_d.listeners[px_d.n_listeners++] =
            (struct px_listener_spec){PX_L_HTTP, &cfg.transparent_http[i], 0};
}

/* Two descriptors per connection (client, upstream) and some to spare:
 * raise the soft limit as far as the hard one allows, and lower max-conns
 * to what fits, so that running out is a 503 at accept, not a failed
 * upstream connect. */
static void fit_descriptors(void)
{
    struct rlimit rl;
    const rlim_t spare = 256;

    if (getrlimit(RLIMIT_NOFILE, &rl) == -1)
        return;
    rlim_t want = (rlim_t)cfg.max_conns * 2 + spare;
    if (rl.rlim_cur < want && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = want < rl.rlim_max ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want) {
        uint64_t fits = rl.rlim_cur > spare * 2 ? (uint64_t)(rl.rlim_cur - spare) / 2 : 16;
        px_log_warnx("max-conns %llu needs %llu open files, the limit is %llu: max-conns is %llu",
                     (unsigned long long)cfg.max_conns, (unsigned long long)want,
                     (unsigned long long)rl.rlim_cur, (unsigned long long)fits);
        cfg.max_conns = fits;
    }
}

/* `user NAME`: give up root once every socket is open. */
static int drop_privileges(char *err, size_t errlen)
{
    struct passwd *pw;

    if (cfg.user[0] == '\0' || geteuid() != 0)
        return 0;
    pw = getpwnam(cfg.user);
    if (pw == NULL) {
        snprintf(err, errlen, "%s: user %s: no such user", cfg.file, cfg.user);
        return -1;
    }
    if (setgroups(0, NULL) == -1 || setgid(pw->pw_gid) == -1 || setuid(pw->pw_uid) == -1) {
        snprintf(err, errlen, "cannot become user %s: %s", cfg.user, strerror(errno));
        return -1;
    }
    return 0;
}

/* -t: the config, every preset and the hosts file, all errors. */
static int check_only(void)
{
    struct policy_diag d = {0};
    char err[8192];
    int bad = 0;

    struct policy *p = px_policy_load(&cfg, &geo, &d);
    for (size_t i = 0; i < d.n; i++)
        fprintf(stderr, "%s\n", d.lines[i]);
    bad |= p == NULL;
    policy_diag_free(&d);
    policy_unref(p);
    if (cfg.hosts_file[0] != '\0') {
        struct px_hosts *h = px_hosts_load(cfg.hosts_file, err, sizeof(err));
        if (h == NULL) {
            fprintf(stderr, "%s\n", err);
            bad = 1;
        }
        px_hosts_free(h);
    }
    if (cfg.secret_dir[0] != '\0') {
        struct px_secrets *s = NULL;
        if (px_secrets_load(cfg.secret_dir, &s, err, sizeof(err)) == -1) {
            fprintf(stderr, "%s\n", err);
            bad = 1;
        }
        for (size_t i = 0; i < px_secrets_count(s); i++) {
            const char *name = px_secrets_name(s, i);
            const char *provider = px_secrets_login_provider(s, name);
            if (provider != NULL)
                printf("%s/%s: %s login (egressd keeps it: docs/credentials.md)\n", cfg.secret_dir,
                       name, provider);
        }
        px_secrets_unref(s);
    }
    if (!bad)
        printf("%s: ok\n", cfg.file);
    return bad;
}

/* What credential injection needs before the first world: the appliance
 * key (the sandbox CAs' key, and the placeholders' through
 * px_d.placeholder_key), the TLS contexts, and no core dumps while
 * secrets are in memory (docs/credentials.md).  0, or -1 with err. */
static int start_credentials(char *err, size_t errlen)
{
    if (px_prefix_bio_init() == -1) {
        snprintf(err, errlen, "OpenSSL cannot make a BIO method");
        return -1;
    }
    if (px_certs_init(cfg.upstream_ca_file, err, errlen) == -1)
        return -1;
    if (cfg.state_dir[0] == '\0')
        return 0; /* no appliance key: no secrets either (config.c sees to it) */
    appliance_key = px_appliance_key_load(cfg.state_dir, err, errlen);
    if (appliance_key == NULL ||
        px_appliance_placeholder_key(appliance_key, px_d.placeholder_key, err, errlen) == -1)
        return -1;
    px_world_ca_key(appliance_key);
    if (cfg.secret_dir[0] != '\0') {
        struct rlimit none = {0, 0};
        if (setrlimit(RLIMIT_CORE, &none) == -1)
            px_log_warn("setrlimit(RLIMIT_CORE): core dumps may hold secrets");
    }
    return 0;
}

static int start(char *err, size_t errlen)
{
    struct px_admin_hooks hooks = {status_hook, NULL, px_d.placeholder_key, upgrade};

    fit_descriptors();
    if (px_accesslog_open(cfg.access_log, err, errlen) == -1)
        return -1;
    if (start_credentials(err, errlen) == -1)
        return -1;
    /* The watch before the first world: a change after the world listed
     * the addresses is then one the watch hears of. */
    main_base = event_base_new();
    addrwatch = px_addrwatch_new(main_base, on_own_addrs, NULL, err, errlen);
    if (addrwatch == NULL)
        return -1;
    if (px_world_init(&cfg, &geo, err, errlen) == -1)
        return -1;
    add_listeners();
    n_workers = cfg.workers ? cfg.workers : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
    if (n_workers < 1)
        n_workers = 1;
    if (n_workers > MAX_WORKERS)
        n_workers = MAX_WORKERS;
    if (take_over(err, errlen) == -1)
        return -1;
    for (unsigned i = 0; i < n_workers; i++)
        if (px_worker_init(&workers[i], i, err, errlen) == -1)
            return -1;
    expiry_timer = evtimer_new(main_base, on_expiry, NULL);
    px_world_on_swap(on_world_swap);
    arm_expiry();
    main_resolver = px_resolver_new(main_base, cfg.resolvers, cfg.n_resolvers, err, errlen);
    if (main_resolver == NULL)
        return -1;
    px_logins_init(main_base, main_resolver, &cfg);
    px_metrics_section(px_logins_render);
    sync_logins();
    if (cfg.have_admin && px_admin_start(main_base, &cfg, main_resolver, &hooks, err, errlen) == -1)
        return -1;
    px_admin_set_replaced_ago(json_object_get(handed_state, "sandboxes_replaced_s"));
    json_decref(handed_state);
    handed_state = NULL;
    if (cfg.have_metrics && px_metrics_listen(main_base, &cfg.metrics, err, errlen) == -1)
        return -1;
    if (drop_privileges(err, errlen) == -1)
        return -1;
    static const int sigs[] = {SIGHUP, SIGUSR1, SIGUSR2, SIGTERM, SIGINT};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        event_add(evsignal_new(main_base, sigs[i], on_signal, NULL), NULL);
    watch_policy_dir();
    for (unsigned i = 0; i < n_workers; i++)
        if (px_worker_run(&workers[i]) == -1) {
            snprintf(err, errlen, "cannot start worker %u", i);
            return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"takeover", required_argument, NULL, 'T'}, {0}};
    const char *conf = NULL;
    bool test = false;
    char err[8192];
    int ch;

    while ((ch = getopt_long(argc, argv, "c:dt", longs, NULL)) != -1) {
        switch (ch) {
        case 'c': conf = optarg; break;
        case 'd': debug_flag = true; break;
        case 't': test = true; break;
        case 'T': takeover_chan = atoi(optarg) == PX_SUCCESSOR_FD ? PX_SUCCESSOR_FD : -2; break;
        default: usage();
        }
    }
    if (conf == NULL || optind != argc || takeover_chan == -2)
        usage();
    px_log_init("egressd", debug_flag);
    signal(SIGPIPE, SIG_IGN);
    if (px_config_load(&cfg, conf, err, sizeof(err)) == -1)
        return start_failed("", err);
    if (px_geo_open(&geo, &cfg, err, sizeof(err)) == -1)
        return start_failed("", err);
    if (test)
        return check_only();
    /* What an upgrade starts as the successor: this binary's path (the
     * file a package upgrade replaces) and the config, both absolute. */
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
    self_path[n > 0 ? n : 0] = '\0';
    if (realpath(conf, conf_path) == NULL)
        snprintf(conf_path, sizeof(conf_path), "%s", conf);

    evthread_use_pthreads();
    json_set_alloc_funcs(malloc, wiping_free);
    event_set_log_callback(on_libevent_log);
    px_metrics_init(EGRESSD_VERSION);
    px_d.cfg = &cfg;
    px_d.next_id = 1;
    px_d.http_limits = (struct http_limits){
        .max_line = 8192, .max_head = cfg.max_header_bytes, .max_headers = 100};
    if (start(err, sizeof(err)) == -1)
        return start_failed("egressd: ", err);
    if (cfg.n_resolvers == 0)
        px_log_warnx("%s: no resolver: only names in the hosts-file resolve%s", cfg.file,
                     cfg.hosts_file[0] ? "" : " (and there is none)");
    px_log_info("ready: %zu listeners, %u workers, policy from %s%s", px_d.n_listeners, n_workers,
                cfg.policy_dir, takeover_chan != -1 ? " (taken over from the predecessor)" : "");
    announce_ready();
    event_base_dispatch(main_base);

    for (unsigned i = 0; i < n_workers; i++)
        px_worker_join(&workers[i]);
    px_addrwatch_free(addrwatch);
    px_admin_stop();
    px_metrics_stop();
    px_logins_shutdown();
    px_resolver_free(main_resolver);
    event_base_loop(main_base, EVLOOP_NONBLOCK); /* evdns' last callbacks */
    px_world_shutdown();
    px_certs_shutdown();
    EVP_PKEY_free(appliance_key);
    px_accesslog_close();
    px_geo_close(&geo);
    px_log_info("stopped");
    return 0;
}
