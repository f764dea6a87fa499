/*
 * denials.c - see denials.h.  A list of rings, one per sandbox that was
 * denied since it was bound, and one global ring of numbered denials; each
 * ring overwrites its oldest entry.  One mutex guards them all.  A worker
 * never waits for it: a denial that finds it held waits in the worker's
 * own queue (`pending`) and is put in its rings at the end of the worker's
 * loop round, or with the worker's next denial, whichever first finds the
 * mutex free.  Reading the global ring, the main thread holds it for
 * COPY_BATCH copies at a time and makes their JSON without it.
 */
#include "denials.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nametext.h"

struct entry {
    int64_t ts_ms;
    /* mode and reason hold the longest word of px_mode_str() and
     * px_reason_str() ("intercept", "credential_host_mismatch"); host and
     * sni the presentation text of a name of up to 255 bytes */
    char mode[16], method[24], host[PX_NAMETEXT_MAX + 1], sni[PX_NAMETEXT_MAX + 1];
    char reason[32], rule[160], path[PX_DENIALS_PATH_MAX + 1];
    unsigned port, status;
};

/* An entry of the global ring, with its sandbox and its number. */
struct numbered {
    uint64_t seq;
    char id[64];
    struct entry e;
};

struct ring {
    struct ring *next;
    char id[64];
    size_t n, head; /* entries kept; where the next one goes */
    struct entry e[PX_DENIALS_PER_SANDBOX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ring *rings;
static size_t n_rings;
/* The global ring: denial number s is at recent[s % PX_DENIALS_RECENT]
 * while s > newest - PX_DENIALS_RECENT.  newest is written under the lock
 * (after the entry) and read without it (px_denials_seq). */
static struct numbered recent[PX_DENIALS_RECENT];
static _Atomic uint64_t newest;
/* Called each PX_DENIALS_NUDGE_EVERY denials (px_denials_set_nudge). */
static void (*_Atomic nudge)(void);
/* Global entries copied per hold of the lock when reading them out. */
#define COPY_BATCH 8

/* A worker's denials not yet in their rings, oldest first.  When more
 * than PENDING_MAX wait (the mutex held for that long), the oldest give
 * way: a sandbox's ring keeps only the newest PX_DENIALS_PER_SANDBOX
 * anyway, and in the global ring their numbers stay as a gap, so that a
 * reader knows it lost them. */
#define PENDING_MAX (2 * PX_DENIALS_PER_SANDBOX)
struct waiting {
    char id[64];
    struct entry e;
};
struct pending {
    struct waiting q[PENDING_MAX];
    size_t first, n;
    uint64_t dropped; /* gave way since the last store */
    void (*wake)(void *);
    void *arg;
};
static _Thread_local struct pending *pending; /* NULL: wait for the mutex */

/* s into dst (size bytes), cut to fit; "" for NULL. */
static void copy(char *dst, size_t size, const char *s)
{
    snprintf(dst, size, "%s", s != NULL ? s : "");
}

static struct ring *find(const char *id)
{
    struct ring *r = rings;

    while (r != NULL && strcmp(r->id, id) != 0)
        r = r->next;
    return r;
}

/* The ring whose newest denial is the oldest, unlinked, for reuse. */
static struct ring *take_stalest(void)
{
    struct ring **pick = &rings;

    for (struct ring **pp = &rings; *pp != NULL; pp = &(*pp)->next) {
        const struct ring *a = *pp, *b = *pick;
        if (a->e[(a->head + PX_DENIALS_PER_SANDBOX - 1) % PX_DENIALS_PER_SANDBOX].ts_ms <
            b->e[(b->head + PX_DENIALS_PER_SANDBOX - 1) % PX_DENIALS_PER_SANDBOX].ts_ms)
            pick = pp;
    }
    struct ring *r = *pick;
    *pick = r->next;
    n_rings--;
    return r;
}

/* Sandbox id's ring, made (or taken from the stalest) when it has none. */
static struct ring *ring_of(const char *id)
{
    struct ring *r = find(id);

    if (r != NULL)
        return r;
    r = n_rings < PX_DENIALS_SANDBOXES_MAX ? malloc(sizeof(*r)) : take_stalest();
    if (r == NULL)
        abort();
    memset(r, 0, sizeof(*r));
    copy(r->id, sizeof(r->id), id);
    r->next = rings;
    rings = r;
    n_rings++;
    return r;
}

/* A name a sandbox chose into dst (size bytes) as presentation text;
 * "" for NULL. */
static void copy_name(char *dst, size_t size, const char *s)
{
    px_nametext_from_text(s != NULL ? s : "", s != NULL ? strlen(s) : 0, dst, size);
}

/* d as an entry: its strings copied, cut to fit; its names escaped. */
static void entry_of(struct entry *e, const struct px_denial *d)
{
    e->ts_ms = d->ts_ms;
    copy(e->mode, sizeof(e->mode), d->mode);
    copy(e->method, sizeof(e->method), d->method);
    snprintf(e->path, sizeof(e->path), "%.*s", d->path != NULL ? (int)strcspn(d->path, "?") : 0,
             d->path != NULL ? d->path : "");
    if (d->qname != NULL)
        px_nametext_from_wire(d->qname, d->qname_len, e->host, sizeof(e->host));
    else
        copy_name(e->host, sizeof(e->host), d->host);
    copy_name(e->sni, sizeof(e->sni), d->sni);
    copy(e->reason, sizeof(e->reason), d->reason);
    copy(e->rule, sizeof(e->rule), d->rule);
    e->port = d->port;
    e->status = d->status;
}

/* Put e in sandbox id's ring and, numbered, in the global one (lock
 * held); whether the nudge is due. */
static bool store(const char *id, const struct entry *e)
{
    struct ring *r = ring_of(id);
    uint64_t seq = atomic_load_explicit(&newest, memory_order_relaxed) + 1;
    struct numbered *g = &recent[seq % PX_DENIALS_RECENT];

    r->e[r->head] = *e;
    r->head = (r->head + 1) % PX_DENIALS_PER_SANDBOX;
    if (r->n < PX_DENIALS_PER_SANDBOX)
        r->n++;
    g->seq = seq;
    copy(g->id, sizeof(g->id), id);
    g->e = *e;
    atomic_store_explicit(&newest, seq, memory_order_release);
    return seq % PX_DENIALS_NUDGE_EVERY == 0;
}

/* Number n denials that gave way, with nothing in the global ring (lock
 * held); whether the nudge is due. */
static bool skip(uint64_t n)
{
    uint64_t from = atomic_load_explicit(&newest, memory_order_relaxed);

    atomic_store_explicit(&newest, from + n, memory_order_release);
    return (from + n) / PX_DENIALS_NUDGE_EVERY != from / PX_DENIALS_NUDGE_EVERY;
}

/* Store this thread's waiting denials, oldest first, after the gap of
 * those that gave way (lock held); whether the nudge is due. */
static bool store_pending(void)
{
    bool due = pending->dropped > 0 && skip(pending->dropped);

    pending->dropped = 0;
    for (; pending->n > 0; pending->n--) {
        const struct waiting *w = &pending->q[pending->first];
        due |= store(w->id, &w->e);
        pending->first = (pending->first + 1) % PENDING_MAX;
    }
    return due;
}

/* Let go of the lock; then the nudge, when due. */
static void unlock_nudging(bool due)
{
    pthread_mutex_unlock(&lock);
    void (*fn)(void) = due ? atomic_load_explicit(&nudge, memory_order_acquire) : NULL;
    if (fn != NULL)
        fn();
}

/* Queue e for sandbox id behind this thread's waiting denials. */
static void queue(const char *id, const struct entry *e)
{
    if (pending->n == PENDING_MAX) { /* the oldest gives way */
        pending->first = (pending->first + 1) % PENDING_MAX;
        pending->n--;
        pending->dropped++;
    }
    struct waiting *w = &pending->q[(pending->first + pending->n++) % PENDING_MAX];
    copy(w->id, sizeof(w->id), id);
    w->e = *e;
    if (pending->n == 1)
        pending->wake(pending->arg);
}

void px_denials_note(const char *id, const struct px_denial *d)
{
    struct entry e;
    bool due = false;

    entry_of(&e, d);
    if (pending == NULL) {
        pthread_mutex_lock(&lock);
    } else if (pthread_mutex_trylock(&lock) != 0) {
        queue(id, &e);
        return;
    } else {
        due = store_pending();
    }
    due |= store(id, &e);
    unlock_nudging(due);
}

void px_denials_batch_start(void (*wake)(void *), void *arg)
{
    pending = calloc(1, sizeof(*pending));
    if (pending == NULL)
        abort();
    pending->wake = wake;
    pending->arg = arg;
}

void px_denials_flush(void)
{
    if (pending == NULL || pending->n == 0)
        return;
    if (pthread_mutex_trylock(&lock) != 0) {
        pending->wake(pending->arg); /* the next round tries again */
        return;
    }
    unlock_nudging(store_pending());
}

void px_denials_batch_stop(void)
{
    if (pending == NULL)
        return;
    pthread_mutex_lock(&lock);
    unlock_nudging(store_pending());
    free(pending);
    pending = NULL;
}

/* A JSON string of s.  Never NULL, so no field is ever left out: text
 * that is not UTF-8 (jansson refuses it) is written as presentation
 * text, which is ASCII. */
static json_t *text(const char *s)
{
    json_t *j = json_string(s);
    char esc[PX_NAMETEXT_MAX + 1];

    if (j != NULL)
        return j;
    px_nametext_from_text(s, strlen(s), esc, sizeof(esc));
    return json_string(esc);
}

/* A JSON string, or null for "". */
static json_t *str_or_null(const char *s)
{
    return s[0] != '\0' ? text(s) : json_null();
}

/* "2026-12-01T16:33:00.952Z" of ms since the epoch. */
static json_t *timestamp(int64_t ms)
{
    char buf[40];
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
    return json_string(buf);
}

/* What an agent denied for `reason` can change itself, or NULL: the
 * denials are where it looks, since a TLS alert carries no text. */
static const char *hint_of(const char *reason)
{
    if (strcmp(reason, "ech") == 0)
        return "egressd refuses TLS with encrypted_client_hello (it hides the real destination; "
               "Chromium sends it as GREASE): turn it off with the managed policy "
               "{\"EncryptedClientHelloEnabled\": false} in /etc/chromium/policies/managed/ "
               "(or /etc/opt/chrome/policies/managed/), or start the browser with "
               "--disable-features=EncryptedClientHello";
    if (strcmp(reason, "not_allowed") == 0)
        return "the host is not on this sandbox's allowlist: ask for it rather than work around "
               "it (the MCP tool request_access, or the operator's sandboxctl access request "
               "SANDBOX HOST:PORT --why TEXT)";
    if (strcmp(reason, "credential_host_mismatch") == 0)
        return "a credential's placeholder (egressd-ph-NAME-...) works only in the header its "
               "inject rule names, in a request to a host that rule binds it to; this request "
               "sent it elsewhere (another host, plain HTTP, another field, or the URL)";
    return NULL;
}

static json_t *entry_json(const struct entry *e)
{
    const char *hint = hint_of(e->reason);
    json_t *o = json_object();

    json_object_set_new(o, "ts", timestamp(e->ts_ms));
    json_object_set_new(o, "mode", text(e->mode));
    json_object_set_new(o, "method", str_or_null(e->method));
    json_object_set_new(o, "host", str_or_null(e->host));
    json_object_set_new(o, "port", e->port ? json_integer(e->port) : json_null());
    json_object_set_new(o, "path", str_or_null(e->path));
    json_object_set_new(o, "sni", str_or_null(e->sni));
    json_object_set_new(o, "reason", text(e->reason));
    json_object_set_new(o, "rule", str_or_null(e->rule));
    json_object_set_new(o, "status", e->status ? json_integer(e->status) : json_null());
    json_object_set_new(o, "hint", hint != NULL ? json_string(hint) : json_null());
    return o;
}

json_t *px_denials_json(const char *id)
{
    json_t *arr = json_array();

    pthread_mutex_lock(&lock);
    const struct ring *r = find(id);
    for (size_t k = 1; r != NULL && k <= r->n; k++)
        json_array_append_new(
            arr,
            entry_json(&r->e[(r->head + PX_DENIALS_PER_SANDBOX - k) % PX_DENIALS_PER_SANDBOX]));
    pthread_mutex_unlock(&lock);
    return arr;
}

void px_denials_set_nudge(void (*fn)(void))
{
    atomic_store_explicit(&nudge, fn, memory_order_release);
}

uint64_t px_denials_seq(void)
{
    return atomic_load_explicit(&newest, memory_order_acquire);
}

/* Copies of the global entries numbered *after+1 .. upto (at most the
 * newest) that the ring holds, at most COPY_BATCH, oldest first, into out;
 * how many.  A number more than PX_DENIALS_RECENT below the newest, or of
 * a denial that gave way, has none.  *after: the last number looked at. */
static size_t take(uint64_t *after, uint64_t upto, struct numbered *out)
{
    size_t n = 0;
    uint64_t s = *after;

    pthread_mutex_lock(&lock);
    uint64_t last = atomic_load_explicit(&newest, memory_order_relaxed);
    if (last > PX_DENIALS_RECENT && s < last - PX_DENIALS_RECENT)
        s = last - PX_DENIALS_RECENT; /* the older ones are gone */
    while (s < upto && n < COPY_BATCH) {
        const struct numbered *g = &recent[++s % PX_DENIALS_RECENT];
        if (g->seq == s)
            out[n++] = *g;
    }
    pthread_mutex_unlock(&lock);
    *after = s;
    return n;
}

/* A global entry as its JSON object: its number and sandbox first. */
static json_t *numbered_json(const struct numbered *g)
{
    json_t *o = json_pack("{s:I, s:o}", "seq", (json_int_t)g->seq, "sandbox", text(g->id));

    json_object_update_new(o, entry_json(&g->e));
    return o;
}

size_t px_denials_after(uint64_t after, uint64_t upto, json_t **out, size_t max)
{
    struct numbered batch[COPY_BATCH];
    size_t n = 0;

    if (upto > px_denials_seq())
        upto = px_denials_seq();
    while (n < max && after < upto) {
        size_t got = take(&after, upto, batch);
        for (size_t i = 0; i < got && n < max; i++)
            out[n++] = numbered_json(&batch[i]);
    }
    return n;
}

json_t *px_denials_recent_json(uint64_t after, uint64_t *last)
{
    json_t *arr = json_array(), *batch[COPY_BATCH];
    size_t n;

    *last = px_denials_seq();
    while ((n = px_denials_after(after, *last, batch, COPY_BATCH)) > 0) {
        after = (uint64_t)json_integer_value(json_object_get(batch[n - 1], "seq"));
        for (size_t i = 0; i < n; i++)
            json_array_insert_new(arr, 0, batch[i]);
    }
    return arr;
}

static int cmp_id(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

void px_denials_forget_except(const char *const *ids, size_t n)
{
    pthread_mutex_lock(&lock);
    for (struct ring **pp = &rings; *pp != NULL;) {
        struct ring *r = *pp;
        if (bsearch(r->id, ids, n, sizeof(*ids), cmp_id) != NULL) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        n_rings--;
        free(r);
    }
    pthread_mutex_unlock(&lock);
}

size_t px_denials_count(void)
{
    pthread_mutex_lock(&lock);
    size_t n = n_rings;
    pthread_mutex_unlock(&lock);
    return n;
}
