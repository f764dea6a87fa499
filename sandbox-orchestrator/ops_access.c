/* ops_access.c - access requests, and the denials that prompt them.
 *
 * A sandbox that was denied a host asks for it (access request); an
 * administrator approves or denies (access approve, access deny), or, for
 * the hosts of `access-owner-approves`, the sandbox's owner does through
 * MCP; hosts of `access-auto` are granted at once.  An approved request
 * becomes a grant: an allow entry with the time it lapses, written into
 * the sandbox's description (meta.h, the one truth, which `sync` and
 * `reap` read back) and pushed to every egressd in its binding as
 * "HOST until TIME", so that it lapses by itself.
 *
 * A grant may say which requests it admits (grant.h): methods and path
 * globs.  A request that says neither is narrowed to the sandbox's newest
 * denial its entry covers (sbx_grant_narrowest: that host and port, that
 * method, the path's first segments), unless it asks for the whole host;
 * what it asked for stays in "asked".  Before deciding, `access show`
 * computes what a grant changes: its policy line, and which of the
 * sandbox's recent denials it would let pass, judged by egressd's own
 * decision function (sbx_grant_would_pass).
 *
 * Requests wait in STATE_DIR/access.json, changed only under
 * STATE_DIR/access.lock:
 *   [{"id": "3f9a0c1b", "name": "agent-1", "vmid": 101, "owner": "alice",
 *     "host": "crates.io:443", "methods": "GET" (optional), "paths":
 *     "/api/v1" (optional), "asked": "crates.io" (when narrowed), "denial":
 *     {ts, method, host, port, path, reason} (the one it was narrowed
 *     to), "seconds": 7200, "why": "...",
 *     "requested": TIME, "status": "pending" | "approved" | "denied",
 *     "owner_may_approve": BOOL, and once decided: "decided": TIME,
 *     "by": "admin" | "owner" | "access-auto PATTERN", "until": TIME}]
 * A decided request is kept for a day (access list --all), a pending one
 * for a week.
 *
 * An approval changes two places, the store and the description, and a
 * process may be killed between them: before the description is edited
 * the pending request is saved with "granting": {until, by, decided},
 * the approval it is in the middle of.  Whoever next meets such a request
 * (doctor, or a decision on it) settles it by the description: the grant
 * is there, so the request is approved as "granting" says; or it is not,
 * and the request waits again (sbx_access_settle).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "egress.h"
#include "grant.h"
#include "guard.h"
#include "ops.h"
#include "printable.h"
#include "sbx.h"
#include "vm.h"

#define STORE_FILE       "access.json"
#define STORE_LOCK       "access.lock"
#define MAX_REQUESTS     1024 /* in the store, pending and decided */
#define MAX_PENDING      16   /* per sandbox: an agent cannot flood the admin */
#define WHY_MAX          500
#define DEFAULT_DURATION "1h"
#define MIN_DURATION_MS  60000L
#define KEEP_DECIDED_S   (24 * 3600)
#define KEEP_PENDING_S   (7 * 24 * 3600)
#define STATUS_PENDING   "pending"
#define STATUS_APPROVED  "approved"
#define STATUS_DENIED    "denied"

/* The requests, loaded under the lock. */
struct store {
    int fd; /* the lock; -1 when not held */
    char path[4200];
    json_t *requests; /* array of request objects */
};

static void store_close(struct store *st)
{
    if (st->fd >= 0)
        close(st->fd);
    st->fd = -1;
    json_decref(st->requests);
    st->requests = NULL;
}

/* Takes the lock and reads the requests.  A file that cannot be read is
 * an error, not an empty store: the requests in it would be lost. */
static int store_open(struct sbx *s, struct store *st, char *err, size_t errlen)
{
    json_error_t jerr;

    st->requests = NULL;
    st->fd = sbx_state_lock(s->cfg.state_dir, STORE_LOCK, err, errlen);
    if (st->fd == -1)
        return -1;
    snprintf(st->path, sizeof st->path, "%s/%s", s->cfg.state_dir, STORE_FILE);
    if (access(st->path, F_OK) == -1 && errno == ENOENT) {
        st->requests = json_array();
        return 0;
    }
    st->requests = json_load_file(st->path, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_array(st->requests)) {
        snprintf(err, errlen,
                 "%s: %s at line %d: not the access requests' JSON array; fix it or move it "
                 "away (the requests in it are lost then)",
                 st->path, st->requests ? "not an array" : jerr.text, jerr.line);
        store_close(st);
        return -1;
    }
    return 0;
}

/* Writes the requests whole (sbx_state_write: a temporary file renamed
 * over the old). */
static int store_save(struct store *st, char *err, size_t errlen)
{
    return sbx_state_write(st->path, st->requests, JSON_INDENT(1), err, errlen);
}

static int is_status(const json_t *r, const char *status)
{
    const char *v = json_string_value(json_object_get(r, "status"));

    return v && strcmp(v, status) == 0;
}

/* After an attempt (rc) to change the store: saves it (a failed grant
 * too: the store on disk may say the request is being granted, or the
 * description may hold the grant), keeping the first error in err. */
static int store_keep(struct store *st, int rc, char *err, size_t errlen)
{
    char why[512];

    if (store_save(st, why, sizeof why) == 0)
        return 0;
    if (rc == 0)
        snprintf(err, errlen, "%s", why);
    return -1;
}

/* The time member key of r, or 0. */
static time_t time_of(const json_t *r, const char *key)
{
    const char *v = json_string_value(json_object_get(r, key));
    time_t t;

    return v && sbx_time_parse(v, &t) == 0 ? t : 0;
}

/* Drops decided requests older than a day and pending ones older than a
 * week (their sandbox has most likely gone). */
static void store_prune(struct store *st, time_t now)
{
    size_t i = 0;

    while (i < json_array_size(st->requests)) {
        const json_t *r = json_array_get(st->requests, i);
        int pending = is_status(r, STATUS_PENDING);
        time_t at = time_of(r, pending ? "requested" : "decided");

        if (!json_is_object(r) || now - at > (pending ? KEEP_PENDING_S : KEEP_DECIDED_S))
            json_array_remove(st->requests, i);
        else
            i++;
    }
}

static json_t *store_find(struct store *st, const char *id)
{
    size_t i;
    json_t *r;

    json_array_foreach(st->requests, i, r)
    {
        const char *v = json_string_value(json_object_get(r, "id"));
        if (v && strcmp(v, id) == 0)
            return r;
    }
    return NULL;
}

/* ------------------------------------------------------------ grants */

struct grant {
    struct sbx_grant g;
    time_t now;
};

/* Do a and b allow the same (their times aside)? */
static bool same_scope(const struct sbx_grant *a, const struct sbx_grant *b)
{
    return strcmp(a->allow, b->allow) == 0 && strcmp(a->methods, b->methods) == 0 &&
           strcmp(a->paths, b->paths) == 0;
}

/* The grant request r asks for (its until 0), from the store: checked
 * as the description's are, for the store is a file someone can edit. */
static int grant_of(const json_t *r, struct sbx_grant *g, char *err, size_t errlen)
{
    const char *host = json_string_value(json_object_get(r, "host"));
    const char *methods = json_string_value(json_object_get(r, "methods"));
    const char *paths = json_string_value(json_object_get(r, "paths"));

    memset(g, 0, sizeof *g);
    if (!host || strlen(host) >= sizeof g->allow ||
        (methods && strlen(methods) >= sizeof g->methods) ||
        (paths && strlen(paths) >= sizeof g->paths)) {
        snprintf(err, errlen, "access request %.40s: its host, methods or paths are broken",
                 json_string_value(json_object_get(r, "id")));
        return -1;
    }
    snprintf(g->allow, sizeof g->allow, "%s", host);
    snprintf(g->methods, sizeof g->methods, "%s", methods ? methods : "");
    snprintf(g->paths, sizeof g->paths, "%s", paths ? paths : "");
    return 0;
}

/* An sbx_vm_edit_meta edit: drops lapsed grants, then adds g's (or
 * lengthens the same entry's). */
static int add_grant(struct sbx_meta *m, void *arg, char *err, size_t errlen)
{
    const struct grant *g = arg;
    int n = 0;

    for (int i = 0; i < m->ngrants; i++)
        if (m->grants[i].until > g->now)
            m->grants[n++] = m->grants[i];
    m->ngrants = n;
    for (int i = 0; i < m->ngrants; i++) {
        if (same_scope(&m->grants[i], &g->g)) {
            if (m->grants[i].until < g->g.until)
                m->grants[i].until = g->g.until;
            return 0;
        }
    }
    if (m->ngrants == SBX_META_MAX_GRANTS) {
        snprintf(err, errlen,
                 "the sandbox holds %d grants already: wait for one to lapse, or give the host "
                 "for good with an allow line",
                 SBX_META_MAX_GRANTS);
        return -1;
    }
    m->grants[m->ngrants++] = g->g;
    return 0;
}

/* The sandbox a request was made for: its VMID, and still its name (a
 * VMID a destroyed sandbox left may be given to a new one). */
static int request_vm(struct sbx *s, const json_t *r, struct sbx_vm *vm, char *err, size_t errlen)
{
    char vmid[16];
    const char *name = json_string_value(json_object_get(r, "name"));

    snprintf(vmid, sizeof vmid, "%d", (int)json_integer_value(json_object_get(r, "vmid")));
    if (sbx_vm_find(s, vmid, vm, err, errlen))
        return -1;
    if (!name || strcmp(vm->name, name) != 0) {
        snprintf(err, errlen, "VM %s is no longer the sandbox '%.64s' the request was made for",
                 vmid, name ? name : "?");
        return -1;
    }
    return 0;
}

/* Saves r in the store as in the middle of an approval: "granting",
 * with the time it lapses, who approves and when.  From here a killed
 * process leaves r for sbx_access_settle_all. */
static int mark_granting(struct store *st, json_t *r, time_t now, time_t until, const char *by,
                         char *err, size_t errlen)
{
    char u[32], d[32];

    sbx_time_format(until, u, sizeof u);
    sbx_time_format(now, d, sizeof d);
    json_object_set_new(r, "granting",
                        json_pack("{s:s,s:s,s:s}", "until", u, "by", by, "decided", d));
    return store_save(st, err, errlen);
}

/* r approved as its "granting" says; "granting" goes. */
static void mark_approved(json_t *r)
{
    json_t *gr = json_object_get(r, "granting");

    json_object_set_new(r, "status", json_string(STATUS_APPROVED));
    json_object_set(r, "decided", json_object_get(gr, "decided"));
    json_object_set(r, "by", json_object_get(gr, "by"));
    json_object_set(r, "until", json_object_get(gr, "until"));
    json_object_del(r, "granting");
}

/* Tells every egressd vm's binding (metadata m) after a grant; err says
 * what was not told, with the fix. */
static int push_binding(struct sbx *s, const struct sbx_vm *vm, const struct sbx_meta *m,
                        const char *until, char *err, size_t errlen)
{
    json_t *binding = sbx_egress_binding(vm->vmid, vm->name, m);
    char why[1024];
    int rc = sbx_egress_put(&s->cfg, binding, why, sizeof why);

    json_decref(binding);
    if (rc)
        snprintf(err, errlen,
                 "granted in VM %d's description until %s, but egressd was not told (%s): run "
                 "sandboxctl sync",
                 vm->vmid, until, why);
    return rc;
}

/* Grants request r for seconds: marks it granting in the store, then the
 * description, then every egressd, then (a grant that says methods or
 * paths: egressd reads its requests) the guest's CA, which must now
 * permit the host.  Marks r approved by `by`. */
static int grant(struct sbx *s, struct store *st, json_t *r, long seconds, const char *by,
                 char *err, size_t errlen)
{
    struct grant g = {.now = time(NULL)};
    struct sbx_vm vm;
    struct sbx_meta m;
    char why[1024];
    int rc;

    if (grant_of(r, &g.g, err, errlen) || sbx_grant_check(&g.g, err, errlen))
        return -1;
    g.g.until = g.now + seconds;
    if (request_vm(s, r, &vm, err, errlen))
        return -1;
    if (mark_granting(st, r, g.now, g.g.until, by, err, errlen)) {
        json_object_del(r, "granting");
        return -1;
    }
    if (sbx_vm_edit_meta(s, &vm, add_grant, &g, &m, err, errlen)) {
        json_object_del(r, "granting"); /* the caller saves the store */
        return -1;
    }
    mark_approved(r);
    rc = push_binding(s, &vm, &m, json_string_value(json_object_get(r, "until")), err, errlen);
    if (rc == 0 && (g.g.methods[0] || g.g.paths[0])) {
        const char *ca = sbx_sync_guest_credentials(s, &vm, &m, why, sizeof why);
        json_object_set_new(r, "guest_ca",
                            strcmp(ca, "skipped") == 0 ? json_sprintf("skipped: %s", why)
                                                       : json_string(ca));
    }
    return rc;
}

/* Whether vm's metadata holds a grant of g's scope until at least until. */
static bool holds_grant(struct sbx *s, const struct sbx_vm *vm, const struct sbx_grant *g,
                        time_t until, struct sbx_meta *m, char *err, size_t errlen, int *rc)
{
    json_t *config = NULL;

    *rc = sbx_vm_config(s, vm->node, vm->vmid, &config, err, errlen) ||
                  sbx_vm_meta(config, m, err, errlen)
              ? -1
              : 0;
    json_decref(config);
    for (int i = 0; *rc == 0 && i < m->ngrants; i++)
        if (same_scope(&m->grants[i], g) && m->grants[i].until >= until)
            return true;
    return false;
}

/* Settles r's approval that a killed process left half-way ("granting")
 * by its sandbox's description: the grant is there, so r is approved as
 * "granting" says and every egressd is told (1); or it is not, or the
 * sandbox has gone, and r waits again (0).  -1 (err) when the description
 * cannot be read now: r is left as it is.  what says which, in words. */
static int settle(struct sbx *s, json_t *r, char *what, size_t len, char *err, size_t errlen)
{
    json_t *gr = json_object_get(r, "granting");
    const char *until = json_string_value(json_object_get(gr, "until"));
    struct sbx_grant g;
    struct sbx_vm vm;
    struct sbx_meta m;
    int rc;

    if (gr == NULL)
        return 0;
    if (!json_is_object(gr) || time_of(gr, "until") == 0 ||
        !json_is_string(json_object_get(gr, "by")) ||
        !json_is_string(json_object_get(gr, "decided"))) { /* a hand-edited store */
        snprintf(what, len, "its \"granting\" mark is not one sandboxctl writes: it waits again");
        json_object_del(r, "granting");
        return 0;
    }
    if (grant_of(r, &g, err, errlen) || request_vm(s, r, &vm, err, errlen)) {
        if (!strstr(err, "no sandbox called") && !strstr(err, "no longer the sandbox") &&
            !strstr(err, "broken"))
            return -1;
        snprintf(what, len, "its sandbox has gone (%.300s): it waits again", err);
        json_object_del(r, "granting");
        return 0;
    }
    if (holds_grant(s, &vm, &g, time_of(gr, "until"), &m, err, errlen, &rc)) {
        mark_approved(r);
        if (push_binding(s, &vm, &m, until ? until : "?", err, errlen))
            snprintf(what, len, "the grant is in VM %d's description until %s: approved; %.300s",
                     vm.vmid, until ? until : "?", err);
        else
            snprintf(what, len,
                     "the grant is in VM %d's description until %s: approved, and every egressd "
                     "told",
                     vm.vmid, until ? until : "?");
        return 1;
    }
    if (rc)
        return -1;
    snprintf(what, len, "VM %d's description does not hold the grant: it waits again", vm.vmid);
    json_object_del(r, "granting");
    return 0;
}

int sbx_access_settle_all(struct sbx *s, json_t *settled, char *err, size_t errlen)
{
    struct store st;
    json_t *r;
    size_t i;
    int changed = 0, failed = 0;

    if (store_open(s, &st, err, errlen))
        return -1;
    json_array_foreach(st.requests, i, r)
    {
        char what[1024], why[1024];
        if (!json_object_get(r, "granting"))
            continue;
        int rc = settle(s, r, what, sizeof what, why, sizeof why);
        if (rc < 0) {
            snprintf(what, sizeof what, "its sandbox's description cannot be read now (%.400s)",
                     why);
            failed = 1;
        } else {
            changed = 1;
        }
        json_array_append_new(settled,
                              json_pack("{s:s?,s:s?,s:I,s:s?,s:s,s:b}", "id",
                                        json_string_value(json_object_get(r, "id")), "name",
                                        json_string_value(json_object_get(r, "name")), "vmid",
                                        json_integer_value(json_object_get(r, "vmid")), "host",
                                        json_string_value(json_object_get(r, "host")), "detail",
                                        what, "settled", rc >= 0));
    }
    if (changed && store_save(&st, err, errlen))
        failed = -1;
    store_close(&st);
    return failed < 0 ? -1 : 0;
}

/* ---------------------------------------------------------- arguments */

int sbx_access_seconds(const struct sbx *s, const char *duration, long *seconds, char *err,
                       size_t errlen)
{
    char max[32];
    long ms;

    sbx_duration_format(s->cfg.access_max_ms, max, sizeof max);
    if (sbx_duration_parse(duration, &ms) || ms < MIN_DURATION_MS || ms > s->cfg.access_max_ms) {
        snprintf(err, errlen, "duration: expected 1m .. %s (access-max), got '%.40s'", max,
                 duration);
        return -1;
    }
    *seconds = ms / 1000;
    return 0;
}

bool sbx_access_owner_may(const struct sbx *s, const char *entry)
{
    return sbx_access_match((const char *const *)s->cfg.access_owner, entry) != NULL;
}

/* "duration" of args (default def) in seconds, 1m..access-max. */
static int duration_arg(struct sbx *s, json_t *args, const char *def, long *seconds, char *err,
                        size_t errlen)
{
    const char *d = json_string_value(json_object_get(args, "duration"));

    if (json_object_get(args, "duration") && !d) {
        snprintf(err, errlen, "duration: expected a string such as 30m or 2h");
        return -1;
    }
    return sbx_access_seconds(s, d ? d : def, seconds, err, errlen);
}

/* The boolean member key of args (absent: 0); -1 when it is not one. */
static int bool_arg(json_t *args, const char *key, char *err, size_t errlen)
{
    json_t *v = json_object_get(args, key);

    if (v && !json_is_boolean(v)) {
        snprintf(err, errlen, "%s: expected true or false", key);
        return -1;
    }
    return json_is_true(v);
}

/* A reason: 1..WHY_MAX bytes, no control characters (it reaches a
 * terminal). */
static int why_valid(const char *why, char *err, size_t errlen)
{
    size_t n = strlen(why);

    if (n == 0 || n > WHY_MAX) {
        snprintf(err, errlen, "why: expected 1 to %d bytes saying what the host is needed for",
                 WHY_MAX);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)why[i] < 0x20 || why[i] == 0x7f) {
            snprintf(err, errlen, "why: control characters are not allowed");
            return -1;
        }
    return 0;
}

/* A new request id: 32 random bits in hex. */
static int new_id(char id[9], char *err, size_t errlen)
{
    unsigned char rnd[4];

    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        snprintf(err, errlen, "no random request id could be drawn: %s", strerror(errno));
        return -1;
    }
    snprintf(id, 9, "%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3]);
    return 0;
}

/* The store's pending request of vm for grant g, and how many vm has.  A
 * VM is its VMID and its name: a destroyed sandbox's VMID may be a new
 * one's, whose requests are its own. */
static json_t *pending_for(struct store *st, const struct sbx_vm *vm, const struct sbx_grant *g,
                           int *count)
{
    struct sbx_grant rg;
    char why[256];

    json_t *r, *same = NULL;
    size_t i;

    *count = 0;
    json_array_foreach(st->requests, i, r)
    {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (json_integer_value(json_object_get(r, "vmid")) != vm->vmid || !name ||
            strcmp(name, vm->name) != 0 || !is_status(r, STATUS_PENDING))
            continue;
        (*count)++;
        if (grant_of(r, &rg, why, sizeof why) == 0 && same_scope(&rg, g))
            same = r;
    }
    return same;
}

/* The owner in vm's description into owner (65 bytes). */
static int vm_owner(struct sbx *s, const struct sbx_vm *vm, char *owner, char *err, size_t errlen)
{
    json_t *config = NULL;
    struct sbx_meta m;
    int rc;

    if (sbx_vm_config(s, vm->node, vm->vmid, &config, err, errlen))
        return -1;
    rc = sbx_vm_meta(config, &m, err, errlen);
    json_decref(config);
    if (rc)
        return -1;
    snprintf(owner, 65, "%s", m.owner);
    return 0;
}

/* --------------------------------------------------------- operations */

/* What a request asks for: the grant (until 0), and when it was
 * narrowed, what was asked and the denial it was narrowed to. */
struct asked {
    struct sbx_grant g;
    const char *entry; /* as asked, normalized */
    json_t *denial;    /* borrowed; NULL when not narrowed */
};

/* A new request record for vm (status pending). */
static json_t *request_new(const char *id, const struct sbx_vm *vm, const char *owner,
                           const struct asked *a, long seconds, const char *why, int owner_may)
{
    char now[32];
    json_t *r;

    sbx_time_format(time(NULL), now, sizeof now);
    r = json_pack("{s:s,s:s,s:i,s:s,s:s,s:I,s:s,s:s,s:s,s:b}", "id", id, "name", vm->name, "vmid",
                  vm->vmid, "owner", owner, "host", a->g.allow, "seconds", (json_int_t)seconds,
                  "why", why, "requested", now, "status", STATUS_PENDING, "owner_may_approve",
                  owner_may);
    if (a->g.methods[0])
        json_object_set_new(r, "methods", json_string(a->g.methods));
    if (a->g.paths[0])
        json_object_set_new(r, "paths", json_string(a->g.paths));
    if (a->denial != NULL) {
        static const char *const keep[] = {"ts", "method", "host", "port", "path", "reason", NULL};
        json_t *d = json_object();
        for (size_t i = 0; keep[i] != NULL; i++)
            if (json_object_get(a->denial, keep[i]))
                json_object_set(d, keep[i], json_object_get(a->denial, keep[i]));
        json_object_set_new(r, "asked", json_string(a->entry));
        json_object_set_new(r, "denial", d);
    }
    return r;
}

/* The newest of denials (egressd's, newest first) that entry covers and
 * a grant can lift, narrowed into a->g; false when there is none. */
static bool narrow(json_t *denials, const char *entry, struct asked *a)
{
    json_t *d;
    size_t i;

    json_array_foreach(denials, i, d)
    {
        struct sbx_grant g;
        if (sbx_grant_narrowest(d, &g) && sbx_access_covers(entry, g.allow)) {
            a->g = g;
            a->denial = d;
            return true;
        }
    }
    return false;
}

/* What grant g (until: until, or now + seconds when 0) changes, into r:
 * "rule", its policy line, and "would_pass", the denials it lets pass
 * (or "denials_error"). */
static void describe(json_t *r, const struct sbx_grant *g, time_t until, long seconds,
                     json_t *denials, const char *denials_err)
{
    struct sbx_grant at = *g;
    char line[SBX_ALLOW_MAX + SBX_GRANT_METHODS_MAX + SBX_GRANT_PATHS_MAX + 64], why[512];
    json_t *pass = NULL;

    at.until = until ? until : time(NULL) + seconds;
    if (sbx_grant_line(&at, true, line, sizeof line) >= 0)
        json_object_set_new(r, "rule", json_string(line));
    if (denials != NULL && (pass = sbx_grant_would_pass(g, denials, why, sizeof why)) == NULL)
        denials_err = why;
    if (pass != NULL) {
        json_object_set_new(r, "would_pass", pass);
        json_object_set_new(r, "recent", json_integer((json_int_t)json_array_size(denials)));
    } else {
        json_object_set_new(r, "denials_error", json_string(denials_err ? denials_err : "-"));
    }
}

/* Files the request (or finds the same one pending) and grants it at once
 * when access-auto covers it.  Store held. */
static int request_file(struct sbx *s, struct store *st, const struct sbx_vm *vm, const char *owner,
                        const struct asked *a, long seconds, const char *why, json_t **out,
                        char *err, size_t errlen)
{
    const char *autop = sbx_access_match((const char *const *)s->cfg.access_auto, a->g.allow);
    char id[9], by[SBX_ALLOW_MAX + 16];
    json_t *r;
    int count, rc;

    r = pending_for(st, vm, &a->g, &count);
    if (r && !autop) {
        *out = json_deep_copy(r);
        return 0;
    }
    if (count >= MAX_PENDING && !autop) {
        snprintf(err, errlen,
                 "sandbox %s has %d requests waiting already: an administrator must decide "
                 "them first (sandboxctl access list)",
                 vm->name, count);
        return -1;
    }
    if (json_array_size(st->requests) >= MAX_REQUESTS) {
        snprintf(err, errlen, "%d access requests are kept already: decide some first",
                 MAX_REQUESTS);
        return -1;
    }
    if (new_id(id, err, errlen))
        return -1;
    r = request_new(id, vm, owner, a, seconds, why, sbx_access_owner_may(s, a->g.allow));
    json_array_append_new(st->requests, r);
    snprintf(by, sizeof by, "access-auto %s", autop ? autop : "");
    rc = autop ? grant(s, st, r, seconds, by, err, errlen) : 0;
    if (rc != 0 && !is_status(r, STATUS_APPROVED)) /* not granted: not filed */
        json_array_remove(st->requests, json_array_size(st->requests) - 1);
    if (store_keep(st, rc, err, errlen))
        rc = -1;
    if (rc == 0)
        *out = json_deep_copy(r);
    return rc;
}

/* The optional string member key of args into buf (size bytes; "" when
 * absent): 0, or -1 with err when it is not a string or too long. */
static int scope_arg(json_t *args, const char *key, char *buf, size_t size, char *err,
                     size_t errlen)
{
    json_t *v = json_object_get(args, key);

    buf[0] = '\0';
    if (v == NULL)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= size) {
        snprintf(err, errlen, "%s: expected a non-empty string of less than %zu bytes (%s)", key,
                 size, strcmp(key, "methods") == 0 ? "GET,HEAD" : "/repos/acme/**,/user");
        return -1;
    }
    snprintf(buf, size, "%s", json_string_value(v));
    return 0;
}

/* What args ask for (a->g, with entry as asked): the methods and paths
 * they name; or, naming neither and not whole_host, the narrowest grant
 * of the sandbox's newest denial that entry covers (egressd asked; when
 * it cannot say, or no denial fits, the entry as asked).  0 or -1 with err
 * when a method or path is not one egressd would load. */
static int asked_for(struct sbx *s, const struct sbx_vm *vm, json_t *args, const char *entry,
                     int whole, struct asked *a, json_t **denials, char *err, size_t errlen)
{
    char why[512];

    memset(a, 0, sizeof *a);
    a->entry = entry;
    snprintf(a->g.allow, sizeof a->g.allow, "%s", entry);
    if (scope_arg(args, "methods", a->g.methods, sizeof a->g.methods, err, errlen) ||
        scope_arg(args, "paths", a->g.paths, sizeof a->g.paths, err, errlen) ||
        sbx_grant_scope_normalize(a->g.methods, a->g.paths, err, errlen))
        return -1;
    if (sbx_egress_denials(&s->cfg, vm->vmid, denials, why, sizeof why))
        *denials = NULL;
    if (!whole && !a->g.methods[0] && !a->g.paths[0] && *denials != NULL)
        narrow(*denials, entry, a);
    return sbx_grant_check(&a->g, err, errlen);
}

int sbx_op_access_request(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name",    "host",  "duration",   "why",
                                       "methods", "paths", "whole_host", NULL};
    const char *name, *host, *why;
    char entry[SBX_ALLOW_MAX], owner[65];
    struct sbx_vm vm;
    struct store st;
    struct asked a;
    json_t *denials = NULL;
    long seconds;
    int rc, whole;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(host = sbx_args_string(args, "host", 1, err, errlen)) ||
        !(why = sbx_args_string(args, "why", 1, err, errlen)) || why_valid(why, err, errlen) ||
        duration_arg(s, args, DEFAULT_DURATION, &seconds, err, errlen) ||
        (whole = bool_arg(args, "whole_host", err, errlen)) < 0)
        return -1;
    snprintf(entry, sizeof entry, "%s", host);
    if (strlen(host) >= sizeof entry || !sbx_access_normalize(entry)) {
        snprintf(entry, sizeof entry, "%.200s", host);
        sbx_printable(entry); /* the reason reaches a terminal or a log */
        snprintf(err, errlen,
                 "host: expected HOST, *.DOMAIN or .DOMAIN with optional :PORTS (crates.io:443), "
                 "got '%s'",
                 entry);
        return -1;
    }
    if (sbx_vm_find(s, name, &vm, err, errlen) || vm_owner(s, &vm, owner, err, errlen) ||
        asked_for(s, &vm, args, entry, whole, &a, &denials, err, errlen) ||
        store_open(s, &st, err, errlen)) {
        json_decref(denials);
        return -1;
    }
    store_prune(&st, time(NULL));
    rc = request_file(s, &st, &vm, owner, &a, seconds, why, out, err, errlen);
    store_close(&st);
    if (rc == 0)
        describe(*out, &a.g, time_of(*out, "until"), seconds, denials,
                 "egressd could not say which requests were denied");
    json_decref(denials);
    return rc;
}

/* Whether r may be seen and decided by the caller: every request without
 * an owner scope, else only those of the scope's owner. */
static int in_scope(const struct sbx *s, const json_t *r)
{
    const char *owner = json_string_value(json_object_get(r, "owner"));

    return !s->owner_scope[0] || (owner && strcmp(owner, s->owner_scope) == 0);
}

int sbx_op_access_list(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "all", NULL};
    const char *name;
    struct store st;
    json_t *list, *r;
    size_t i;
    int all;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) || (all = bool_arg(args, "all", err, errlen)) < 0)
        return -1;
    name = sbx_args_string(args, "name", 0, err, errlen);
    if (store_open(s, &st, err, errlen))
        return -1;
    store_prune(&st, time(NULL));
    list = json_array();
    json_array_foreach(st.requests, i, r)
    {
        const char *rn = json_string_value(json_object_get(r, "name"));
        if (in_scope(s, r) && (all || is_status(r, STATUS_PENDING)) &&
            (!name || (rn && strcmp(rn, name) == 0)))
            json_array_append(list, r);
    }
    store_close(&st);
    *out = json_pack("{s:o}", "requests", list);
    return 0;
}

int sbx_op_access_show(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"id", NULL};
    const char *id;
    struct store st;
    struct sbx_grant g;
    json_t *r, *denials = NULL;
    char why[512];

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(id = sbx_args_string(args, "id", 1, err, errlen)) || store_open(s, &st, err, errlen))
        return -1;
    store_prune(&st, time(NULL));
    r = store_find(&st, id);
    r = r && in_scope(s, r) ? json_deep_copy(r) : NULL;
    store_close(&st);
    if (r == NULL) {
        snprintf(err, errlen, "no access request '%.40s' (sandboxctl access list --all)", id);
        return -1;
    }
    if (grant_of(r, &g, err, errlen)) {
        json_decref(r);
        return -1;
    }
    if (sbx_egress_denials(&s->cfg, (int)json_integer_value(json_object_get(r, "vmid")), &denials,
                           why, sizeof why))
        denials = NULL;
    describe(r, &g, time_of(r, "until"), (long)json_integer_value(json_object_get(r, "seconds")),
             denials, why);
    json_decref(denials);
    *out = r;
    return 0;
}

/* The pending request id of the store, in the caller's scope. */
static json_t *pending_request(const struct sbx *s, struct store *st, const char *id, char *err,
                               size_t errlen)
{
    json_t *r = store_find(st, id);

    if (!r || !in_scope(s, r)) {
        snprintf(err, errlen, "no access request '%.40s' (sandboxctl access list --all)", id);
        return NULL;
    }
    if (!is_status(r, STATUS_PENDING)) {
        snprintf(err, errlen, "access request %s is %s already", id,
                 json_string_value(json_object_get(r, "status")));
        return NULL;
    }
    return r;
}

/* Approve as the sandbox's owner: only hosts of access-owner-approves. */
static int owner_may_approve(struct sbx *s, const json_t *r, char *err, size_t errlen)
{
    const char *host = json_string_value(json_object_get(r, "host"));

    if (sbx_access_owner_may(s, host))
        return 0;
    snprintf(err, errlen,
             "%s is not among the hosts a sandbox's owner may approve (access-owner-approves): "
             "an administrator decides it with sandboxctl access approve %s",
             host, json_string_value(json_object_get(r, "id")));
    return -1;
}

/* What deciding does to the pending request r (the store st held, so
 * that two deciders cannot both): 0, or -1 with err. */
typedef int (*decision_fn)(struct sbx *s, struct store *st, json_t *r, json_t *args, int as_owner,
                           char *err, size_t errlen);

/* access_approve and access_deny: finds the request args names, pending
 * and in the caller's scope (an approval a killed process left half-way
 * settled first), lets fn decide it and keeps the result. */
static int decide(struct sbx *s, json_t *args, const char *const *keys, decision_fn fn,
                  json_t **out, char *err, size_t errlen)
{
    const char *id;
    struct store st;
    json_t *r;
    char what[1024];
    int as_owner, rc = -1;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(id = sbx_args_string(args, "id", 1, err, errlen)) ||
        (as_owner = bool_arg(args, "as_owner", err, errlen)) < 0 || store_open(s, &st, err, errlen))
        return -1;
    store_prune(&st, time(NULL));
    r = pending_request(s, &st, id, err, errlen);
    if (r && json_object_get(r, "granting") && settle(s, r, what, sizeof what, err, errlen) != 0) {
        if (is_status(r, STATUS_APPROVED))
            snprintf(err, errlen, "access request %s is approved already (%s)", id, what);
        store_keep(&st, -1, err, errlen);
        r = NULL;
    }
    if (r) {
        rc = fn(s, &st, r, args, as_owner, err, errlen);
        if (store_keep(&st, rc, err, errlen))
            rc = -1;
        if (rc == 0)
            *out = json_deep_copy(r);
    }
    store_close(&st);
    return rc;
}

/* Approves r for the time asked (or args' duration): the grant. */
static int approve(struct sbx *s, struct store *st, json_t *r, json_t *args, int as_owner,
                   char *err, size_t errlen)
{
    char asked[32];
    long seconds;

    sbx_duration_format(json_integer_value(json_object_get(r, "seconds")) * 1000, asked,
                        sizeof asked);
    return (as_owner && owner_may_approve(s, r, err, errlen)) ||
                   duration_arg(s, args, asked, &seconds, err, errlen) ||
                   grant(s, st, r, seconds, as_owner ? "owner" : "admin", err, errlen)
               ? -1
               : 0;
}

/* Denies r: nothing but the request changes. */
static int deny(struct sbx *s, struct store *st, json_t *r, json_t *args, int as_owner, char *err,
                size_t errlen)
{
    char now[32];

    (void)s, (void)st, (void)args, (void)err, (void)errlen;
    sbx_time_format(time(NULL), now, sizeof now);
    json_object_set_new(r, "status", json_string(STATUS_DENIED));
    json_object_set_new(r, "decided", json_string(now));
    json_object_set_new(r, "by", json_string(as_owner ? "owner" : "admin"));
    return 0;
}

int sbx_op_access_approve(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"id", "duration", "as_owner", NULL};

    return decide(s, args, keys, approve, out, err, errlen);
}

int sbx_op_access_deny(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"id", "as_owner", NULL};

    return decide(s, args, keys, deny, out, err, errlen);
}

int sbx_op_denials(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    const char *name;
    struct sbx_vm vm;
    json_t *denials;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        sbx_vm_find(s, name, &vm, err, errlen) ||
        sbx_egress_denials(&s->cfg, vm.vmid, &denials, err, errlen))
        return -1;
    *out = json_pack("{s:s,s:i,s:o}", "name", vm.name, "vmid", vm.vmid, "denials", denials);
    return 0;
}
