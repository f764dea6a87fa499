/*
 * world.c - see world.h.
 *
 * A world is three layers, each shared as long as it does not change:
 *   base     the policy snapshot, the hosts table, the default binding and
 *            the secrets store:
 *            made by init and by each reload, shared by every world built
 *            until the next reload;
 *   binding  one sandbox's compiled policy_binding and its JSON: shared by
 *            every world that holds the binding unchanged, so a PUT of one
 *            sandbox does not recompile the others;
 *   world    the sorted array of bindings and the address index.
 * Each layer is reference-counted with atomics: the last px_world_put() may
 * run on any worker thread, and it frees whatever no world holds any more.
 *
 * Every change is built beside the current world, persisted, and only then
 * swapped in (one atomic exchange of `cur`); a failure on the way leaves
 * everything as it was.  Only the main thread changes worlds, so changes
 * never race each other.
 *
 * px_world_get() takes no lock: it loads `cur` and counts a reference.  A
 * reader may be between the two when a swap happens, so the swapped-out
 * world keeps the reference `cur` held until every registered reader (the
 * workers) has passed a quiescent point after the swap
 * (px_world_quiescent: outside any px_world_get) - a grace period, as in
 * RCU.  Only then is that reference dropped.  The main thread, the only
 * other caller, is the one that swaps, so it never overlaps one.
 */
#include "world.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "denials.h"
#include "errbuf.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "sandboxca.h"
#include "sblimits.h"
#include "state.h"

#define MAX_BASIC_B64 512 /* "id:token" is at most 63 + 1 + 127 bytes */

/* What bindings are compiled against, made by init and by each reload. */
struct base {
    atomic_uint refs;
    struct policy *policy;
    struct px_hosts *hosts;
    struct policy_binding *default_pb;
    struct px_msb *default_msb;
    struct px_secrets *secrets;
};

/* One binding's compiled part, JSON and handles, shared by the worlds that
 * hold it. */
struct held {
    atomic_uint refs;
    struct policy_binding *pb; /* NULL: its preset or lines did not load at start */
    json_t *json;              /* token elided */
    struct px_msb *msb;        /* its metrics series */
    struct px_limit *lim;      /* its limits */
    struct px_sandbox_ca *ca;  /* its CA for credential injection, or NULL */
};

struct addr_slot {
    uint8_t addr[16];
    const struct px_sandbox *sb;
};

struct world {
    struct px_world pub; /* first: a px_world pointer is a world pointer */
    atomic_uint refs;
    struct base *base;
    struct px_sandbox *sbx; /* pub.sandboxes, sorted by id */
    struct held **held;     /* held[i] owns sbx[i].pb and sbx[i].json */
    size_t n, cap;
    struct addr_slot *index; /* sorted by address */
    size_t n_index;
};

static void (*on_swap)(void);
static const struct px_config *g_cfg;
static struct px_geo *g_geo;
static _Atomic(struct world *) cur;

/* Worlds swapped out whose `cur` reference waits for the readers' grace
 * period (see the top), oldest first.  Touched at a swap and at a reader's
 * quiescent point, never on a connection's path. */
#define READERS_MAX 64 /* = MAX_WORKERS in egressd.c */
static pthread_mutex_t retire_lock = PTHREAD_MUTEX_INITIALIZER;
struct retired {
    struct world *w;
    uint64_t gen; /* swap_gen when it was swapped out */
    struct retired *next;
};
static struct retired *retired_head, **retired_tail = &retired_head;
static atomic_uint_fast64_t swap_gen;
static _Atomic uint64_t
    reader_seen[READERS_MAX]; /* swap_gen at each reader's last quiescent point */
static atomic_int n_readers;
static uint64_t generation;
static int error_status;

/* ------------------------------------------------------------ errors */

static void err_diag(char *err, size_t errlen, const struct policy_diag *d)
{
    for (size_t i = 0; i < d->n; i++)
        px_err_add(err, errlen, "%s", d->lines[i]);
}

/* ---------------------------------------------------------- layers */

static EVP_PKEY *ca_key; /* the sandbox CAs' key (px_world_ca_key), or NULL */

void px_world_ca_key(EVP_PKEY *key)
{
    ca_key = key;
}

static struct base *base_ref(struct base *b)
{
    atomic_fetch_add(&b->refs, 1);
    return b;
}

static void base_unref(struct base *b)
{
    if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    policy_binding_free(b->default_pb);
    px_metrics_sandbox_put(b->default_msb);
    px_hosts_free(b->hosts);
    policy_unref(b->policy);
    px_secrets_unref(b->secrets);
    free(b);
}

/* The shared part of binding sb: pb and json (taken over) and sb's
 * metrics and limits handles (a lock each, here and not per connection). */
static struct held *held_new(const struct px_sandbox *sb, struct policy_binding *pb, json_t *json)
{
    struct held *h = calloc(1, sizeof(*h));
    if (h == NULL)
        abort();
    atomic_init(&h->refs, 1);
    h->pb = pb;
    h->json = json;
    h->msb = px_metrics_sandbox_get(sb->id, sb->owner);
    h->lim = px_limit_get(sb->id);
    h->ca = px_sandbox_ca_get(ca_key, sb, pb);
    return h;
}

static void held_unref(struct held *h)
{
    if (h == NULL || atomic_fetch_sub(&h->refs, 1) != 1)
        return;
    policy_binding_free(h->pb);
    json_decref(h->json);
    px_metrics_sandbox_put(h->msb);
    px_limit_put(h->lim);
    px_sandbox_ca_put(h->ca);
    free(h);
}

static void world_free(struct world *w)
{
    for (size_t i = 0; i < w->n; i++) {
        explicit_bzero(w->sbx[i].token, sizeof(w->sbx[i].token));
        held_unref(w->held[i]);
    }
    free(w->sbx);
    free(w->held);
    free(w->index);
    base_unref(w->base);
    free(w);
}

/* A world under construction on base b (a reference is taken). */
static struct world *world_new(struct base *b, size_t cap)
{
    struct world *w = calloc(1, sizeof(*w));
    if (w == NULL)
        abort();
    atomic_init(&w->refs, 1);
    w->base = base_ref(b);
    w->cap = cap ? cap : 1;
    w->sbx = calloc(w->cap, sizeof(*w->sbx));
    w->held = calloc(w->cap, sizeof(*w->held));
    if (w->sbx == NULL || w->held == NULL)
        abort();
    return w;
}

/* Add sandbox sb, whose pb and json h holds (the caller's reference to h
 * passes to the world). */
static void world_add(struct world *w, const struct px_sandbox *sb, struct held *h)
{
    if (w->n == w->cap) {
        w->cap *= 2;
        w->sbx = reallocarray(w->sbx, w->cap, sizeof(*w->sbx));
        w->held = reallocarray(w->held, w->cap, sizeof(*w->held));
        if (w->sbx == NULL || w->held == NULL)
            abort();
    }
    w->sbx[w->n] = *sb;
    w->sbx[w->n].pb = h->pb;
    w->sbx[w->n].json = h->json;
    w->sbx[w->n].msb = h->msb;
    w->sbx[w->n].lim = h->lim;
    w->sbx[w->n].ca = h->ca ? h->ca->ca : NULL;
    w->sbx[w->n].ca_serial = h->ca ? h->ca->serial : 0;
    w->held[w->n++] = h;
}

/* Share sandbox i of world from (unchanged) with w. */
static void world_add_shared(struct world *w, const struct world *from, size_t i)
{
    atomic_fetch_add(&from->held[i]->refs, 1);
    world_add(w, &from->sbx[i], from->held[i]);
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp(((const struct px_sandbox *)a)->id, ((const struct px_sandbox *)b)->id);
}

static int cmp_slot(const void *a, const void *b)
{
    return memcmp(((const struct addr_slot *)a)->addr, ((const struct addr_slot *)b)->addr, 16);
}

/* What is wrong with bindings given to a world, the worse one last:
 * the HTTP status of each is status_of(). */
enum fault {
    FAULT_NONE,
    FAULT_NO_LOAD, /* a binding that does not load: unknown preset, bad line, address taken (422) */
    FAULT_SHAPE,   /* not a binding: JSON shape, a field, an id given twice (400) */
};

/* The worse of two faults. */
static enum fault worse(enum fault a, enum fault b)
{
    return a > b ? a : b;
}

static int status_of(enum fault f)
{
    return f == FAULT_SHAPE ? 400 : 422;
}

/* Sort by id (held[] follows), then index the addresses.  FAULT_SHAPE
 * when an id is given twice, FAULT_NO_LOAD when an address is in two
 * bindings; every conflict is in err.  `changed`, when not NULL, is the
 * binding the caller changed: messages name the other one. */
static enum fault world_finish(struct world *w, const char *changed, char *err, size_t errlen)
{
    struct {
        struct px_sandbox sb;
        struct held *h;
    } *tmp = calloc(w->n ? w->n : 1, sizeof(*tmp));
    char t[INET6_ADDRSTRLEN];
    enum fault rc = FAULT_NONE;

    if (tmp == NULL)
        abort();
    for (size_t i = 0; i < w->n; i++) {
        tmp[i].sb = w->sbx[i];
        tmp[i].h = w->held[i];
    }
    qsort(tmp, w->n, sizeof(*tmp), cmp_id); /* the px_sandbox is the first member */
    for (size_t i = 0; i < w->n; i++) {
        w->sbx[i] = tmp[i].sb;
        w->held[i] = tmp[i].h;
        if (i > 0 && strcmp(w->sbx[i - 1].id, w->sbx[i].id) == 0) {
            px_err_add(err, errlen, "sandbox %s: id: given twice", w->sbx[i].id);
            rc = FAULT_SHAPE;
        }
    }
    explicit_bzero(tmp, w->n * sizeof(*tmp));
    free(tmp);

    size_t n = 0;
    for (size_t i = 0; i < w->n; i++)
        n += w->sbx[i].n_addrs;
    w->index = calloc(n ? n : 1, sizeof(*w->index));
    if (w->index == NULL)
        abort();
    for (size_t i = 0; i < w->n; i++)
        for (size_t k = 0; k < w->sbx[i].n_addrs; k++) {
            memcpy(w->index[w->n_index].addr, w->sbx[i].addrs[k], 16);
            w->index[w->n_index++].sb = &w->sbx[i];
        }
    qsort(w->index, w->n_index, sizeof(*w->index), cmp_slot);
    for (size_t i = 1; i < w->n_index; i++) {
        if (memcmp(w->index[i - 1].addr, w->index[i].addr, 16) != 0)
            continue;
        const struct px_sandbox *a = w->index[i - 1].sb, *b = w->index[i].sb;
        if (changed != NULL && strcmp(b->id, changed) == 0) {
            const struct px_sandbox *x = a;
            a = b;
            b = x;
        }
        px_err_add(err, errlen, "sandbox %s: addresses: %s is already bound to sandbox %s", a->id,
                   policy_addr_text(w->index[i].addr, t, sizeof(t)), b->id);
        rc = worse(rc, FAULT_NO_LOAD);
    }
    w->pub.policy = w->base->policy;
    w->pub.hosts = w->base->hosts;
    w->pub.default_pb = w->base->default_pb;
    w->pub.default_msb = w->base->default_msb;
    w->pub.secrets = w->base->secrets;
    w->pub.sandboxes = w->sbx;
    w->pub.n_sandboxes = w->n;
    return rc;
}

/* Whether store s has every secret binding sb names; each one it lacks is
 * a line in err ("... did you mean ...?"). */
static bool secrets_check(const struct px_secrets *s, const struct px_sandbox *sb, char *err,
                          size_t errlen)
{
    const char *names[PX_SECRETS_MAX + 1];
    const char *p;
    size_t n = px_secrets_count(s), len;
    bool all = true;

    for (size_t i = 0; i < n; i++)
        names[i] = px_secrets_name(s, i);
    names[n] = NULL;
    for (size_t i = 0; i < sb->n_secrets; i++) {
        if (px_secrets_get(s, sb->secrets[i], &p, &len))
            continue;
        const char *near = policy_nearest_word(sb->secrets[i], strlen(sb->secrets[i]), names);
        if (g_cfg->secret_dir[0] == '\0')
            px_err_add(err, errlen,
                       "sandbox %s: secrets: no secret '%s': egressd has no secret-dir", sb->id,
                       sb->secrets[i]);
        else
            px_err_add(err, errlen, "sandbox %s: secrets: no secret '%s' in secret-dir%s%s%s",
                       sb->id, sb->secrets[i], near ? "; did you mean '" : "", near ? near : "",
                       near ? "'?" : "");
        all = false;
    }
    return all;
}

/* Warn about every secret a binding of w names that w's store lacks: the
 * binding is kept (a reload, a start), and what needs the secret fails
 * closed until it is back. */
static void secrets_warn_missing(const struct world *w)
{
    for (size_t i = 0; i < w->n; i++) {
        char missing[2048] = "";
        if (secrets_check(w->base->secrets, &w->sbx[i], missing, sizeof(missing)))
            continue;
        for (char *line = missing, *next; line != NULL; line = next) {
            next = strchr(line, '\n');
            if (next != NULL)
                *next++ = '\0';
            px_log_warnx("%s (the binding stays; requests that need the secret are denied)", line);
        }
    }
}

/* Parse and compile one binding into w: FAULT_NONE, or the fault with
 * the errors in err. */
static enum fault world_add_json(struct world *w, const json_t *obj, const char *id, char *err,
                                 size_t errlen)
{
    struct px_sandbox sb;
    struct policy_diag d = {0};
    char one[2048];

    if (px_sandbox_parse(obj, id, &sb, one, sizeof(one)) == -1) {
        px_err_add(err, errlen, "%s", one);
        return FAULT_SHAPE;
    }
    struct policy_binding *pb = NULL;
    if (secrets_check(w->base->secrets, &sb, err, errlen))
        pb = px_sandbox_bind(w->base->policy, &sb, &d);
    if (pb == NULL) {
        err_diag(err, errlen, &d);
        policy_diag_free(&d);
        explicit_bzero(sb.token, sizeof(sb.token));
        json_decref(sb.json);
        return FAULT_NO_LOAD;
    }
    policy_diag_free(&d);
    world_add(w, &sb, held_new(&sb, pb, sb.json));
    explicit_bzero(sb.token, sizeof(sb.token));
    return FAULT_NONE;
}

/* ------------------------------------------------------- persistence */

/* The bindings of w as stored: the GET form plus the token. */
static json_t *world_state_json(const struct world *w)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < w->n; i++) {
        json_t *o = json_deep_copy(w->sbx[i].json);
        if (o == NULL)
            abort();
        if (w->sbx[i].token[0] != '\0')
            json_object_set_new(o, "token", json_string(w->sbx[i].token));
        json_array_append_new(arr, o);
    }
    return arr;
}

/* Write w's bindings to state-dir (state.c), if there is one.  0, or -1
 * with "PATH: reason". */
static int world_persist(const struct world *w, char *err, size_t errlen)
{
    if (g_cfg->state_dir[0] == '\0')
        return 0;
    json_t *arr = world_state_json(w);
    int rc = px_state_save(g_cfg->state_dir, arr, err, errlen);
    json_decref(arr);
    return rc;
}

/* The saved bindings (state.c), or an empty array without a state-dir. */
static json_t *state_load(char *err, size_t errlen)
{
    if (g_cfg->state_dir[0] == '\0') {
        px_log_warnx("no state-dir: sandbox bindings will not survive a restart");
        return json_array();
    }
    return px_state_load(g_cfg->state_dir, err, errlen);
}

/* ------------------------------------------------------------ swaps */

/* The current world, for the main thread (the only one that swaps it, so
 * no reference is needed); NULL, with the reason, before px_world_init(). */
static struct world *current(char *err, size_t errlen)
{
    struct world *w = atomic_load(&cur);

    if (w == NULL) {
        px_err_add(err, errlen, "no world yet (px_world_init has not succeeded)");
        error_status = 500;
    }
    return w;
}

/* Drop the `cur` reference of every retired world that no reader can still
 * be loading: swapped out before each reader's last quiescent point. */
static void reclaim(void)
{
    uint64_t safe = UINT64_MAX;
    struct retired *done = NULL, *r;

    for (int i = 0; i < atomic_load(&n_readers); i++) {
        uint64_t seen = atomic_load(&reader_seen[i]);
        safe = seen < safe ? seen : safe;
    }
    pthread_mutex_lock(&retire_lock);
    while ((r = retired_head) != NULL && r->gen <= safe) {
        retired_head = r->next;
        r->next = done;
        done = r;
    }
    if (retired_head == NULL)
        retired_tail = &retired_head;
    pthread_mutex_unlock(&retire_lock);
    for (; done != NULL; done = r) {
        r = done->next;
        px_world_put(&done->w->pub);
        free(done);
    }
}

/* Keep old's `cur` reference until the readers' grace period is over. */
static void retire(struct world *old)
{
    struct retired *r = calloc(1, sizeof(*r));

    if (r == NULL)
        abort();
    r->w = old;
    r->gen = atomic_fetch_add(&swap_gen, 1) + 1;
    pthread_mutex_lock(&retire_lock);
    *retired_tail = r;
    retired_tail = &r->next;
    pthread_mutex_unlock(&retire_lock);
    reclaim(); /* at once, when there are no readers */
}

int px_world_reader_add(void)
{
    int i = atomic_fetch_add(&n_readers, 1);

    if (i >= READERS_MAX)
        abort(); /* egressd has at most 64 workers (MAX_WORKERS in egressd.c) */
    atomic_store(&reader_seen[i], atomic_load(&swap_gen));
    return i;
}

size_t px_world_retired(void)
{
    size_t n = 0;

    pthread_mutex_lock(&retire_lock);
    for (const struct retired *r = retired_head; r != NULL; r = r->next)
        n++;
    pthread_mutex_unlock(&retire_lock);
    return n;
}

void px_world_quiescent(int reader)
{
    atomic_store(&reader_seen[reader], atomic_load(&swap_gen));
    reclaim();
}

/* Drop the per-sandbox state (limits, denials, metrics series) of every
 * id that world w does not bind. */
static void forget_unbound(const struct world *w)
{
    const char **ids = calloc(w->n ? w->n : 1, sizeof(*ids));
    if (ids == NULL)
        abort();
    for (size_t i = 0; i < w->n; i++)
        ids[i] = w->sbx[i].id;
    px_metrics_sweep();
    px_limit_forget_except(ids, w->n);
    px_denials_forget_except(ids, w->n);
    free(ids);
}

/* Make w the current world; the old one goes when its last user is done. */
static void world_swap(struct world *w)
{
    w->pub.generation = ++generation;
    struct world *old = atomic_exchange(&cur, w);
    if (old != NULL)
        retire(old);
    px_metrics_set_sandboxes(w->n);
    forget_unbound(w);
    if (on_swap != NULL)
        on_swap();
}

/* A world that was built and is not to be: freed, and the handles its
 * new bindings took (held_new) do not stay behind. */
static void world_discard(struct world *w)
{
    world_free(w);
    struct world *now = atomic_load(&cur);
    if (now != NULL)
        forget_unbound(now);
}

void px_world_on_swap(void (*hook)(void))
{
    on_swap = hook;
}

/* Persist then swap; on failure w is freed and nothing changed. */
static int world_commit(struct world *w, char *err, size_t errlen)
{
    if (world_persist(w, err, errlen) == -1) {
        error_status = 500;
        world_discard(w);
        return -1;
    }
    world_swap(w);
    return 0;
}

/* b's secrets store from secret-dir (none: an empty one); every error a
 * line of d. */
static void base_secrets_load(struct base *b, struct policy_diag *d)
{
    char serr[8192];

    if (px_secrets_load(g_cfg->secret_dir, &b->secrets, serr, sizeof(serr)) == 0)
        return;
    for (char *line = serr, *next; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        policy_diag_add(d, "%s", line);
    }
}

/* A new base from the files: policy-dir, hosts-file, default-policy,
 * secret-dir. */
static struct base *base_load(char *err, size_t errlen)
{
    struct policy_diag d = {0};
    struct base *b = calloc(1, sizeof(*b));

    if (b == NULL)
        abort();
    atomic_init(&b->refs, 1);
    b->default_msb = px_metrics_sandbox_get("default", NULL);
    base_secrets_load(b, &d);
    b->policy = px_policy_load(g_cfg, g_geo, &d);
    if (b->policy != NULL)
        b->default_pb =
            policy_binding_new(b->policy, g_cfg->default_policy, NULL, 0, "default-policy", &d);
    if (g_cfg->hosts_file[0] != '\0') {
        char herr[8192] = "";
        b->hosts = px_hosts_load(g_cfg->hosts_file, herr, sizeof(herr));
        if (b->hosts == NULL)
            policy_diag_add(&d, "%s", herr[0] ? herr : "hosts-file: cannot load");
    }
    err_diag(err, errlen, &d);
    if (d.n > 0 || b->policy == NULL || b->default_pb == NULL || b->secrets == NULL) {
        policy_diag_free(&d);
        base_unref(b);
        return NULL;
    }
    policy_diag_free(&d);
    return b;
}

/* ------------------------------------------------------ any thread */

struct px_world *px_world_get(void)
{
    /* No lock: a world swapped out meanwhile keeps the reference `cur`
     * held until this thread's next quiescent point (see the top). */
    struct world *w = atomic_load(&cur);
    if (w != NULL)
        atomic_fetch_add(&w->refs, 1);
    return w ? &w->pub : NULL;
}

struct px_world *px_world_ref(struct px_world *pw)
{
    atomic_fetch_add(&((struct world *)pw)->refs, 1);
    return pw;
}

void px_world_put(struct px_world *pw)
{
    struct world *w = (struct world *)pw;
    if (w != NULL && atomic_fetch_sub(&w->refs, 1) == 1)
        world_free(w);
}

const struct px_sandbox *px_world_by_addr(const struct px_world *pw, const uint8_t addr[16])
{
    const struct world *w = (const struct world *)pw;
    size_t lo = 0, hi = w->n_index;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(w->index[mid].addr, addr, 16);
        if (c == 0)
            return w->index[mid].sb;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const struct px_sandbox *px_world_by_id(const struct px_world *pw, const char *id)
{
    const struct world *w = (const struct world *)pw;
    size_t lo = 0, hi = w->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(w->sbx[mid].id, id);
        if (c == 0)
            return &w->sbx[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Equal tokens, in a time that depends only on the fixed buffer size. */
static bool token_equal(const char *want, const uint8_t *got, size_t got_len)
{
    uint8_t a[sizeof(((struct px_sandbox *)0)->token)] = {0}, b[sizeof(a)] = {0};
    size_t want_len = strnlen(want, sizeof(a));
    unsigned diff = (unsigned)(want_len ^ got_len);

    memcpy(a, want, want_len);
    memcpy(b, got, got_len < sizeof(b) ? got_len : sizeof(b));
    for (size_t i = 0; i < sizeof(a); i++)
        diff |= a[i] ^ b[i];
    explicit_bzero(b, sizeof(b));
    return diff == 0 && got_len < sizeof(b);
}

const struct px_sandbox *px_world_by_basic_auth(const struct px_world *w, const char *value,
                                                size_t len)
{
    uint8_t dec[MAX_BASIC_B64];
    const struct px_sandbox *sb = NULL;
    size_t i = 0;

    while (i < len && (value[i] == ' ' || value[i] == '\t'))
        i++;
    if (len - i < 6 || strncasecmp(value + i, "basic", 5) != 0 ||
        (value[i + 5] != ' ' && value[i + 5] != '\t'))
        return NULL;
    for (i += 5; i < len && (value[i] == ' ' || value[i] == '\t'); i++)
        ;
    while (len > i && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len - i == 0 || len - i > MAX_BASIC_B64)
        return NULL;
    size_t n = http_base64_decode(value + i, len - i, dec, sizeof(dec));
    uint8_t *colon = n != HTTP_BASE64_BAD && n > 0 ? memchr(dec, ':', n) : NULL;
    /* An id with a NUL in it would name a shorter one: "101\0x" is not 101. */
    if (colon != NULL && colon - dec < 64 && memchr(dec, '\0', (size_t)(colon - dec)) == NULL) {
        char id[64];
        memcpy(id, dec, (size_t)(colon - dec));
        id[colon - dec] = '\0';
        sb = px_world_by_id(w, id);
        if (sb != NULL && (sb->token[0] == '\0' ||
                           !token_equal(sb->token, colon + 1, (size_t)(dec + n - (colon + 1)))))
            sb = NULL;
    }
    explicit_bzero(dec, sizeof(dec));
    return sb;
}

/* ------------------------------------------------------- main thread */

int px_world_error_status(void)
{
    return error_status;
}

/* A world on base b with the bindings saved in state-dir.  A binding
 * whose preset or lines no longer load is kept, denied everything (a
 * warning says why); one that does not parse is an error.  The world, or
 * NULL with every error in err. */
static struct world *world_from_state(struct base *b, char *err, size_t errlen)
{
    char path[1100];
    json_t *saved = state_load(err, errlen);

    if (saved == NULL)
        return NULL;
    px_state_path(g_cfg->state_dir, path, sizeof(path));
    struct world *w = world_new(b, json_array_size(saved));
    int rc = 0;
    for (size_t i = 0; i < json_array_size(saved); i++) {
        struct px_sandbox sb;
        struct policy_diag d = {0};
        char one[2048];
        if (px_sandbox_parse(json_array_get(saved, i), NULL, &sb, one, sizeof(one)) == -1) {
            px_err_add(err, errlen, "%s: [%zu]: %s", path, i, one);
            rc = -1;
            continue;
        }
        /* A preset that went away must not lose the binding: the sandbox
         * stays known (and denied) until the operator fixes or drops it. */
        struct policy_binding *pb = px_sandbox_bind(w->base->policy, &sb, &d);
        for (size_t k = 0; pb == NULL && k < d.n; k++)
            px_log_warnx("%s: %s (the sandbox is denied everything until this is fixed)", path,
                         d.lines[k]);
        policy_diag_free(&d);
        world_add(w, &sb, held_new(&sb, pb, sb.json));
        explicit_bzero(sb.token, sizeof(sb.token));
    }
    json_decref(saved);
    if (world_finish(w, NULL, err, errlen) != FAULT_NONE || rc == -1) {
        world_free(w);
        return NULL;
    }
    return w;
}

int px_world_init(const struct px_config *cfg, struct px_geo *geo, char *err, size_t errlen)
{
    err[0] = '\0';
    g_cfg = cfg;
    g_geo = geo;
    struct base *b = base_load(err, errlen);
    if (b == NULL)
        return -1;
    struct world *w = world_from_state(b, err, errlen);
    base_unref(b);
    if (w == NULL)
        return -1;
    world_swap(w);
    secrets_warn_missing(w);
    px_metrics_set_policy(w->pub.policy);
    return 0;
}

int px_world_follow(char *err, size_t errlen)
{
    err[0] = '\0';
    struct world *old = current(err, errlen);
    if (old == NULL)
        return -1;
    struct world *w = world_from_state(old->base, err, errlen);
    if (w == NULL)
        return -1;
    world_swap(w);
    return 0;
}

int px_world_reload(char *err, size_t errlen)
{
    err[0] = '\0';
    struct world *old = current(err, errlen);
    if (old == NULL)
        return -1;
    error_status = 422;
    struct base *b = base_load(err, errlen);
    struct world *w = b ? world_new(b, old->n) : NULL;
    base_unref(b);
    for (size_t i = 0; w != NULL && i < old->n; i++) {
        struct policy_diag d = {0};
        struct policy_binding *pb = px_sandbox_bind(w->base->policy, &old->sbx[i], &d);
        err_diag(err, errlen, &d);
        policy_diag_free(&d);
        json_t *json = json_deep_copy(old->sbx[i].json);
        if (json == NULL)
            abort();
        if (pb != NULL)
            world_add(w, &old->sbx[i], held_new(&old->sbx[i], pb, json));
        else
            json_decref(json);
    }
    if (w == NULL || w->n != old->n || world_finish(w, NULL, err, errlen) != FAULT_NONE) {
        if (w != NULL)
            world_discard(w);
        px_metrics_reload(false);
        return -1;
    }
    world_swap(w);
    secrets_warn_missing(w);
    px_metrics_reload(true);
    px_metrics_set_policy(w->pub.policy);
    return 0;
}

int px_world_put_sandbox(const char *id, const json_t *obj, char *err, size_t errlen)
{
    err[0] = '\0';
    struct world *old = current(err, errlen);

    if (old == NULL)
        return -1;
    struct world *w = world_new(old->base, old->n + 1);
    for (size_t i = 0; i < old->n; i++)
        if (strcmp(old->sbx[i].id, id) != 0)
            world_add_shared(w, old, i);
    enum fault f = world_add_json(w, obj, id, err, errlen);
    if (f == FAULT_NONE)
        f = world_finish(w, id, err, errlen);
    if (f != FAULT_NONE) {
        error_status = status_of(f);
        world_discard(w);
        return -1;
    }
    return world_commit(w, err, errlen);
}

enum px_world_delete px_world_delete_sandbox(const char *id, char *err, size_t errlen)
{
    err[0] = '\0';
    struct world *old = current(err, errlen);

    if (old == NULL)
        return PX_WORLD_FAILED;
    if (px_world_by_id(&old->pub, id) == NULL)
        return PX_WORLD_NO_SUCH;
    struct world *w = world_new(old->base, old->n);
    for (size_t i = 0; i < old->n; i++)
        if (strcmp(old->sbx[i].id, id) != 0)
            world_add_shared(w, old, i);
    world_finish(w, NULL, err, errlen); /* fewer bindings cannot conflict */
    return world_commit(w, err, errlen) == 0 ? PX_WORLD_DELETED : PX_WORLD_FAILED;
}

int px_world_replace_sandboxes(const json_t *arr, char *err, size_t errlen)
{
    enum fault worst = FAULT_NONE;

    err[0] = '\0';
    struct world *old = current(err, errlen);
    if (old == NULL)
        return -1;
    if (!json_is_array(arr) || json_array_size(arr) > PX_STATE_MAX_BINDINGS) {
        px_err_add(err, errlen, "expected a JSON array of at most %d bindings",
                   PX_STATE_MAX_BINDINGS);
        error_status = 400;
        return -1;
    }
    struct world *w = world_new(old->base, json_array_size(arr));
    for (size_t i = 0; i < json_array_size(arr); i++)
        worst = worse(worst, world_add_json(w, json_array_get(arr, i), NULL, err, errlen));
    worst = worse(worst, world_finish(w, NULL, err, errlen));
    if (worst != FAULT_NONE) {
        error_status = status_of(worst);
        world_discard(w);
        return -1;
    }
    return world_commit(w, err, errlen);
}

json_t *px_world_sandboxes_json(void)
{
    struct px_world *pw = px_world_get();
    json_t *arr = json_array();

    for (size_t i = 0; pw != NULL && i < pw->n_sandboxes; i++)
        json_array_append_new(arr, json_deep_copy(pw->sandboxes[i].json));
    px_world_put(pw);
    return arr;
}

void px_world_shutdown(void)
{
    struct world *old = atomic_exchange(&cur, NULL);

    if (old != NULL)
        retire(old);
    atomic_store(&n_readers, 0); /* they have stopped: nobody is loading */
    reclaim();
}
