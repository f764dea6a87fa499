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
#include "fileio.h"
#include "log.h"
#include "metrics.h"
#include "sandboxca.h"
#include "sblimits.h"

#define STATE_FILE      "sandboxes.json"
#define STATE_MAX_BYTES (64u << 20) /* far above any real set; a bound on what is read */
#define MAX_SANDBOXES   65536
#define MAX_ALLOW_LINES 256
#define MAX_STR         127 /* name, owner, token */
#define MAX_BASIC_B64   512 /* "id:token" is at most 63 + 1 + 127 bytes */

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

/* Append one printf-style line to err (lines joined by '\n'); a full
 * buffer ends in "..." rather than a cut line. */
__attribute__((format(printf, 3, 4))) static void err_add(char *err, size_t errlen, const char *fmt,
                                                          ...)
{
    size_t used = strnlen(err, errlen);
    va_list ap;

    if (errlen == 0 || used + 1 >= errlen)
        return;
    if (used > 0)
        err[used++] = '\n';
    va_start(ap, fmt);
    int n = vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n >= errlen - used && errlen > 4)
        memcpy(err + errlen - 4, "...", 4);
}

static void err_diag(char *err, size_t errlen, const struct policy_diag *d)
{
    for (size_t i = 0; i < d->n; i++)
        err_add(err, errlen, "%s", d->lines[i]);
}

/* A JSON value as error messages show it: a string quoted (cut, control
 * bytes as '?'), anything else by its type. */
static const char *show(const json_t *v, char *buf, size_t size)
{
    static const char *const types[] = {"an object", "an array", "a string", "an integer",
                                        "a number",  "true",     "false",    "null"};
    if (!json_is_string(v))
        return types[json_typeof(v)];
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), i, o = 0;
    buf[o++] = '\'';
    for (i = 0; i < n && o + 5 < size && i < 64; i++)
        buf[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (i < n)
        o += (size_t)snprintf(buf + o, size - o, "...");
    snprintf(buf + o, size - o, "'");
    return buf;
}

static const char *addr_str(const uint8_t a[16], char *buf, size_t size)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(a, v4mapped, 12) == 0)
        inet_ntop(AF_INET, a + 12, buf, (socklen_t)size);
    else
        inet_ntop(AF_INET6, a, buf, (socklen_t)size);
    return buf;
}

/* ------------------------------------------------- parsing a binding */

static const char *const fields[] = {"id",    "name",    "owner", "addresses", "policy",
                                     "allow", "secrets", "token", "expires",   NULL};

static bool id_ok(const char *s, size_t n)
{
    return n >= 1 && n <= 63 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* No control characters (jansson has already checked the UTF-8). */
static bool printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static bool token_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return n >= 1 && n <= MAX_STR;
}

/* An optional printable string field into dst (cap MAX_STR). */
static int parse_text(const json_t *v, const char *field, const char *who, char *dst, size_t size,
                      char *err, size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= size ||
        !printable(json_string_value(v), json_string_length(v))) {
        err_add(err, errlen,
                "sandbox %s: %s: expected a string of at most %zu characters, no control "
                "characters, found %s",
                who, field, size - 1, show(v, b, sizeof(b)));
        return -1;
    }
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_addresses(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                           size_t errlen)
{
    char b[96], t[INET6_ADDRSTRLEN];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > PX_SANDBOX_MAX_ADDRS) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        err_add(err, errlen,
                "sandbox %s: addresses: expected an array of at most %d IP addresses, found %s",
                who, PX_SANDBOX_MAX_ADDRS, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *a = json_array_get(v, i);
        if (!json_is_string(a) ||
            !policy_addr_parse(json_string_value(a), json_string_length(a), sb->addrs[i])) {
            err_add(err, errlen, "sandbox %s: addresses[%zu]: expected an IP address, found %s",
                    who, i, show(a, b, sizeof(b)));
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (memcmp(sb->addrs[k], sb->addrs[i], 16) == 0) {
                err_add(err, errlen, "sandbox %s: addresses[%zu]: %s is listed twice", who, i,
                        addr_str(sb->addrs[i], t, sizeof(t)));
                return -1;
            }
        }
        sb->n_addrs = i + 1;
    }
    return 0;
}

static int parse_allow(const json_t *v, const char *who, char *err, size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > MAX_ALLOW_LINES) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        err_add(err, errlen,
                "sandbox %s: allow: expected an array of at most %d strings (policy lines), "
                "found %s",
                who, MAX_ALLOW_LINES, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *l = json_array_get(v, i);
        if (!json_is_string(l)) {
            err_add(err, errlen,
                    "sandbox %s: allow[%zu] is not a string (expected a policy line), found %s",
                    who, i, show(l, b, sizeof(b)));
            return -1;
        }
        if (!printable(json_string_value(l), json_string_length(l))) {
            err_add(err, errlen,
                    "sandbox %s: allow[%zu]: expected one policy line, found control characters",
                    who, i);
            return -1;
        }
    }
    return 0;
}

/* "secrets": unique secret names.  Whether the store has them is the
 * world's to check (secrets_check), not the shape's. */
static int parse_secrets(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                         size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > PX_SANDBOX_MAX_SECRETS) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        err_add(err, errlen,
                "sandbox %s: secrets: expected an array of at most %d secret names, found %s", who,
                PX_SANDBOX_MAX_SECRETS, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *n = json_array_get(v, i);
        if (!json_is_string(n) || !px_secret_name_ok(json_string_value(n), json_string_length(n))) {
            err_add(
                err, errlen,
                "sandbox %s: secrets[%zu]: expected a secret's name ([a-z0-9][a-z0-9_-]{0,62}), "
                "found %s",
                who, i, show(n, b, sizeof(b)));
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(sb->secrets[k], json_string_value(n)) == 0) {
                err_add(err, errlen, "sandbox %s: secrets[%zu]: '%s' is listed twice", who, i,
                        sb->secrets[k]);
                return -1;
            }
        }
        memcpy(sb->secrets[i], json_string_value(n), json_string_length(n) + 1);
        sb->n_secrets = i + 1;
    }
    return 0;
}

static int parse_policy(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                        size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v)) {
        err_add(err, errlen, "sandbox %s: policy: required (the name of a preset)", who);
        return -1;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= sizeof(sb->policy) ||
        !printable(json_string_value(v), json_string_length(v))) {
        err_add(err, errlen, "sandbox %s: policy: expected the name of a preset, found %s", who,
                show(v, b, sizeof(b)));
        return -1;
    }
    memcpy(sb->policy, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_token_expires(const json_t *tok, const json_t *exp, const char *who,
                               struct px_sandbox *sb, char *err, size_t errlen)
{
    char b[96];
    if (tok != NULL && !json_is_null(tok)) {
        if (!json_is_string(tok) || !token_ok(json_string_value(tok), json_string_length(tok))) {
            err_add(err, errlen,
                    "sandbox %s: token: expected 1..%d printable ASCII characters, no spaces, "
                    "found %s",
                    who, MAX_STR, json_is_string(tok) ? "another string" : show(tok, b, sizeof(b)));
            return -1;
        }
        memcpy(sb->token, json_string_value(tok), json_string_length(tok) + 1);
    }
    if (exp != NULL && !json_is_null(exp)) {
        if (!json_is_string(exp) ||
            !policy_time_parse(json_string_value(exp), json_string_length(exp), &sb->expires)) {
            err_add(err, errlen,
                    "sandbox %s: expires: expected an RFC 3339 time such as "
                    "2026-11-30T09:00:00Z, found %s",
                    who, show(exp, b, sizeof(b)));
            return -1;
        }
    }
    return 0;
}

/* The id: the path's (which "id" must equal) or the body's. */
static int parse_id(const json_t *v, const char *path_id, struct px_sandbox *sb, char *err,
                    size_t errlen)
{
    char b[96];
    const char *who = path_id ? path_id : "?";

    if (path_id != NULL && !id_ok(path_id, strlen(path_id))) {
        err_add(err, errlen, "sandbox id: expected 1..63 of A-Z a-z 0-9 '.' '_' '-', found '%.64s'",
                path_id);
        return -1;
    }
    if (v == NULL && path_id == NULL) {
        err_add(err, errlen, "sandbox ?: id: required");
        return -1;
    }
    if (v != NULL && (!json_is_string(v) || !id_ok(json_string_value(v), json_string_length(v)))) {
        err_add(err, errlen, "sandbox %s: id: expected 1..63 of A-Z a-z 0-9 '.' '_' '-', found %s",
                who, show(v, b, sizeof(b)));
        return -1;
    }
    if (v != NULL && path_id != NULL && strcmp(json_string_value(v), path_id) != 0) {
        err_add(err, errlen, "sandbox %s: id: '%s' differs from the id in the path", who,
                json_string_value(v));
        return -1;
    }
    snprintf(sb->id, sizeof(sb->id), "%s", path_id ? path_id : json_string_value(v));
    if (strcmp(sb->id, "default") == 0) {
        err_add(err, errlen,
                "sandbox default: id: 'default' is reserved (it names sources without a binding)");
        return -1;
    }
    return 0;
}

static int check_fields(const json_t *obj, const char *who, char *err, size_t errlen)
{
    const char *key;
    const json_t *v;
    int rc = 0;

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i;
        for (i = 0; fields[i] != NULL && strcmp(fields[i], key) != 0; i++)
            ;
        if (fields[i] != NULL)
            continue;
        const char *near = policy_nearest_word(key, strlen(key), fields);
        err_add(err, errlen, "sandbox %s: unknown field '%.64s'%s%s%s", who, key,
                near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        rc = -1;
    }
    return rc;
}

int px_sandbox_parse(const json_t *obj, const char *id, struct px_sandbox *sb, char *err,
                     size_t errlen)
{
    char b[96];

    memset(sb, 0, sizeof(*sb));
    err[0] = '\0';
    if (!json_is_object(obj)) {
        err_add(err, errlen, "sandbox %s: expected a JSON object (a binding), found %s",
                id ? id : "?", obj ? show(obj, b, sizeof(b)) : "nothing");
        return -1;
    }
    if (parse_id(json_object_get(obj, "id"), id, sb, err, errlen) == -1 ||
        check_fields(obj, sb->id, err, errlen) == -1 ||
        parse_text(json_object_get(obj, "name"), "name", sb->id, sb->name, sizeof(sb->name), err,
                   errlen) == -1 ||
        parse_text(json_object_get(obj, "owner"), "owner", sb->id, sb->owner, sizeof(sb->owner),
                   err, errlen) == -1 ||
        parse_addresses(json_object_get(obj, "addresses"), sb->id, sb, err, errlen) == -1 ||
        parse_policy(json_object_get(obj, "policy"), sb->id, sb, err, errlen) == -1 ||
        parse_allow(json_object_get(obj, "allow"), sb->id, err, errlen) == -1 ||
        parse_secrets(json_object_get(obj, "secrets"), sb->id, sb, err, errlen) == -1 ||
        parse_token_expires(json_object_get(obj, "token"), json_object_get(obj, "expires"), sb->id,
                            sb, err, errlen) == -1) {
        explicit_bzero(sb->token, sizeof(sb->token));
        return -1;
    }
    sb->json = json_deep_copy(obj);
    if (sb->json == NULL)
        abort();
    json_object_del(sb->json, "token");
    json_object_set_new(sb->json, "id", json_string(sb->id));
    return 0;
}

bool px_sandbox_has_secret(const struct px_sandbox *sb, const char *name)
{
    for (size_t i = 0; sb != NULL && i < sb->n_secrets; i++)
        if (strcmp(sb->secrets[i], name) == 0)
            return true;
    return false;
}

struct policy_binding *px_sandbox_bind(struct policy *p, const struct px_sandbox *sb,
                                       struct policy_diag *diag)
{
    const json_t *allow = json_object_get(sb->json, "allow");
    const char *lines[MAX_ALLOW_LINES];
    size_t n = json_is_array(allow) ? json_array_size(allow) : 0;
    char origin[80];

    if (policy_preset_rules(p, sb->policy) < 0) {
        char names[512] = "";
        size_t used = 0;
        for (size_t i = 0; policy_preset_name(p, i) != NULL && used < sizeof(names); i++)
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
                                     policy_preset_name(p, i));
        policy_diag_add(diag,
                        "sandbox %s: policy: expected the name of a preset, found '%s': no such "
                        "preset (presets: %s)",
                        sb->id, sb->policy, names);
        return NULL;
    }
    for (size_t i = 0; i < n && i < MAX_ALLOW_LINES; i++)
        lines[i] = json_string_value(json_array_get(allow, i));
    snprintf(origin, sizeof(origin), "sandbox %s", sb->id);
    return policy_binding_new(p, sb->policy, lines, n, origin, diag);
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
            err_add(err, errlen, "sandbox %s: id: given twice", w->sbx[i].id);
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
        err_add(err, errlen, "sandbox %s: addresses: %s is already bound to sandbox %s", a->id,
                addr_str(w->index[i].addr, t, sizeof(t)), b->id);
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
            err_add(err, errlen, "sandbox %s: secrets: no secret '%s': egressd has no secret-dir",
                    sb->id, sb->secrets[i]);
        else
            err_add(err, errlen, "sandbox %s: secrets: no secret '%s' in secret-dir%s%s%s", sb->id,
                    sb->secrets[i], near ? "; did you mean '" : "", near ? near : "",
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
        err_add(err, errlen, "%s", one);
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

static void state_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", g_cfg->state_dir, name);
}

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

/* Write w's bindings to state-dir/sandboxes.json so that a crash at any
 * point leaves either the old file or the new one: a temp file in the same
 * directory (mode 0600: it holds tokens), fsync, rename, fsync of the
 * directory.  Returns 0 or -1 with "PATH: reason". */
static int world_persist(const struct world *w, char *err, size_t errlen)
{
    char tmp[1100], path[1100];
    json_t *arr;
    char *text;
    int fd, e;

    if (g_cfg->state_dir[0] == '\0')
        return 0;
    state_path(tmp, sizeof(tmp), "." STATE_FILE ".XXXXXX");
    state_path(path, sizeof(path), STATE_FILE);
    fd = mkstemp(tmp);
    if (fd == -1) {
        err_add(err, errlen, "%s: cannot create a temporary file: %s", tmp, strerror(errno));
        return -1;
    }
    arr = world_state_json(w);
    text = json_dumps(arr, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(arr);
    if (text == NULL)
        abort();
    size_t len = strlen(text);
    if (fchmod(fd, 0600) == -1 || px_write_all(fd, text, len) == -1 ||
        px_write_all(fd, "\n", 1) == -1 || fsync(fd) == -1) {
        e = errno;
        explicit_bzero(text, len);
        free(text);
        close(fd);
        unlink(tmp);
        err_add(err, errlen, "%s: cannot write: %s", tmp, strerror(e));
        return -1;
    }
    explicit_bzero(text, len);
    free(text);
    if (close(fd) == -1 || rename(tmp, path) == -1) {
        e = errno;
        unlink(tmp);
        err_add(err, errlen, "%s: cannot replace: %s", path, strerror(e));
        return -1;
    }
    /* The rename is durable only once the directory itself is synced. */
    if (px_sync_dir(g_cfg->state_dir) == -1) {
        err_add(err, errlen, "%s: cannot sync the directory: %s", g_cfg->state_dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Create state-dir (0700) and the directories above it if missing. */
static int state_dir_make(char *err, size_t errlen)
{
    char p[sizeof(g_cfg->state_dir)];
    struct stat st;

    snprintf(p, sizeof(p), "%s", g_cfg->state_dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0700) == -1 && errno != EEXIST) {
            err_add(err, errlen, "%s: state-dir: cannot create %s: %s", g_cfg->state_dir, p,
                    strerror(errno));
            return -1;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    if (stat(p, &st) == -1 || !S_ISDIR(st.st_mode)) {
        err_add(err, errlen, "%s: state-dir: not a directory", g_cfg->state_dir);
        return -1;
    }
    return 0;
}

/* The saved bindings as JSON (a new reference; an empty array when there
 * is no file yet), or NULL with "PATH:LINE:COL: ..." in err. */
static json_t *state_load(char *err, size_t errlen)
{
    char path[1100];
    json_error_t je;
    struct stat st;
    FILE *f;

    if (g_cfg->state_dir[0] == '\0') {
        px_log_warnx("no state-dir: sandbox bindings will not survive a restart");
        return json_array();
    }
    if (state_dir_make(err, errlen) == -1)
        return NULL;
    state_path(path, sizeof(path), STATE_FILE);
    f = fopen(path, "rb");
    if (f == NULL && errno == ENOENT)
        return json_array();
    if (f == NULL || fstat(fileno(f), &st) == -1 || st.st_size > STATE_MAX_BYTES) {
        err_add(err, errlen, "%s: cannot read: %s", path,
                f == NULL || st.st_size <= STATE_MAX_BYTES ? strerror(errno) : "too large");
        if (f != NULL)
            fclose(f);
        return NULL;
    }
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (j == NULL) {
        err_add(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_array(j) || json_array_size(j) > MAX_SANDBOXES) {
        err_add(err, errlen, "%s: expected an array of at most %d bindings", path, MAX_SANDBOXES);
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ------------------------------------------------------------ swaps */

/* The current world, for the main thread (the only one that swaps it, so
 * no reference is needed); NULL, with the reason, before px_world_init(). */
static struct world *current(char *err, size_t errlen)
{
    struct world *w = atomic_load(&cur);

    if (w == NULL) {
        err_add(err, errlen, "no world yet (px_world_init has not succeeded)");
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

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Base64 (RFC 4648 section 4; the padding may be left out) of in[0..n)
 * into out; returns the decoded length, or -1 if it is not base64. */
static ssize_t b64_decode(const char *in, size_t n, uint8_t *out)
{
    uint32_t acc = 0;
    size_t bits = 0, o = 0;

    while (n > 0 && in[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return bits >= 6 ? -1 : (ssize_t)o; /* one stray symbol is not a byte */
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
    ssize_t n = b64_decode(value + i, len - i, dec);
    uint8_t *colon = n > 0 ? memchr(dec, ':', (size_t)n) : NULL;
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

int px_world_init(const struct px_config *cfg, struct px_geo *geo, char *err, size_t errlen)
{
    char path[1100];

    err[0] = '\0';
    g_cfg = cfg;
    g_geo = geo;
    struct base *b = base_load(err, errlen);
    if (b == NULL)
        return -1;
    json_t *saved = state_load(err, errlen);
    if (saved == NULL) {
        base_unref(b);
        return -1;
    }
    state_path(path, sizeof(path), STATE_FILE);
    struct world *w = world_new(b, json_array_size(saved));
    base_unref(b);
    int rc = 0;
    for (size_t i = 0; i < json_array_size(saved); i++) {
        struct px_sandbox sb;
        struct policy_diag d = {0};
        char one[2048];
        if (px_sandbox_parse(json_array_get(saved, i), NULL, &sb, one, sizeof(one)) == -1) {
            err_add(err, errlen, "%s: [%zu]: %s", path, i, one);
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
        return -1;
    }
    world_swap(w);
    secrets_warn_missing(w);
    px_metrics_set_policy(w->pub.policy);
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
    if (!json_is_array(arr) || json_array_size(arr) > MAX_SANDBOXES) {
        err_add(err, errlen, "expected a JSON array of at most %d bindings", MAX_SANDBOXES);
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
