/*
 * resolver.c - egressd's own name resolution: the hosts-file table, then the
 * configured servers through evdns, with a per-worker cache.
 *
 *   px_resolve_shared(name, share, max)
 *     -> hosts table      immutable, shared by every worker (sorted array)
 *     -> cache            this worker's answers within their TTL
 *     -> in-flight query  one per name: later callers wait on it, free
 *     -> new query        A and AAAA in parallel, DNS_QUERY_NO_SEARCH;
 *                         only if the share takes one more (else BUSY)
 *
 * evdns is created empty and given only the configured servers: never
 * /etc/resolv.conf, never getaddrinfo.  For each evdns request it started,
 * a query keeps evdns's handle until evdns calls back, and libevent calls
 * back exactly once, always later from the loop: the answer, a failure,
 * DNS_ERR_CANCEL after evdns_cancel_request, or DNS_ERR_SHUTDOWN when the
 * evdns base is freed.  The last of a query's callbacks frees it.
 *
 * A query is live (in r->inflight, q->r set) until both callbacks came or
 * it is orphaned (q->r NULL: no waiters, nothing cached, only evdns's
 * callbacks to wait for).  It is orphaned when its last waiter is
 * cancelled (its evdns requests are cancelled too, so nobody pays for a
 * lookup nobody waits for) and when the resolver is freed (evdns_base_free
 * fails them).  A cancelled query leaves the table at once: a later lookup
 * of the name starts a new one.  Its charge on a share is given back when
 * it ends or when the request that started it goes, whichever is first,
 * and q->share is NULL from then on.
 *
 * Callbacks may cancel other requests, start new ones, or free the
 * resolver: query_finish re-reads its state after each call, and a
 * cancel during delivery (pending already 0) never cancels the query.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "policy.h"
#include "resolver.h"

#define HOSTS_MAX_BYTES  (16u << 20) /* a hosts file is a few lines; 16 MiB is a mistake */
#define CACHE_BUCKETS    8192
#define INFLIGHT_BUCKETS 1024
#define TTL_MIN_S        1
#define TTL_MAX_S        3600 /* an answer may be kept a day; we re-ask hourly */
#define NEG_TTL_S        5    /* NXDOMAIN / no data */

/* ------------------------------------------------------------ errors */

struct diag {
    const char *path;
    unsigned line; /* 0: the error is about the whole file */
    char *err;
    size_t errlen, used;
    int errors;
};

static void fail(struct diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct diag *d, const char *fmt, ...)
{
    va_list ap;
    int n;

    d->errors++;
    if (d->errlen == 0 || d->used + 1 >= d->errlen)
        return;
    if (d->line)
        n = snprintf(d->err + d->used, d->errlen - d->used, "%s%s:%u: ", d->used ? "\n" : "",
                     d->path, d->line);
    else
        n = snprintf(d->err + d->used, d->errlen - d->used, "%s%s: ", d->used ? "\n" : "", d->path);
    if (n > 0)
        d->used += (size_t)n < d->errlen - d->used ? (size_t)n : d->errlen - d->used - 1;
    va_start(ap, fmt);
    n = vsnprintf(d->err + d->used, d->errlen - d->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        d->used += (size_t)n < d->errlen - d->used ? (size_t)n : d->errlen - d->used - 1;
}

/* A token as an error message shows it: at most 60 bytes, anything that is
 * not printable ASCII as '?', so a binary file cannot garble the message. */
static const char *shown(const char *s, size_t len, char out[68])
{
    size_t n = len > 60 ? 60 : len;

    for (size_t i = 0; i < n; i++)
        out[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    strcpy(out + n, len > n ? "..." : "");
    return out;
}

/* ------------------------------------------------------------ hosts */

struct hosts_name {
    char *name; /* normalized */
    size_t n;
    uint8_t addr[PX_DNS_MAX_ADDRS][16]; /* IPv4 first, then file order */
};

struct px_hosts {
    struct hosts_name *names; /* sorted by name */
    size_t n;
};

/* One "ADDR NAME" pair as read, before names are grouped. */
struct pair {
    char *name;
    uint8_t addr[16];
    bool v4;
    unsigned line;
    size_t seq; /* file order, to keep it among a name's addresses */
};

struct pairs {
    struct pair *v;
    size_t n, cap;
};

static void pairs_add(struct pairs *p, const struct policy_host *h, const uint8_t addr[16], bool v4,
                      unsigned line)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->v = realloc(p->v, p->cap * sizeof(*p->v));
        if (p->v == NULL)
            abort();
    }
    struct pair *e = &p->v[p->n];
    e->name = strdup(h->text);
    if (e->name == NULL)
        abort();
    memcpy(e->addr, addr, 16);
    e->v4 = v4;
    e->line = line;
    e->seq = p->n++;
}

/* An IPv4 (stored as ::ffff:a.b.c.d) or IPv6 address; no zone, no names. */
static bool parse_addr(const char *s, size_t len, uint8_t out[16], bool *v4)
{
    char buf[INET6_ADDRSTRLEN];

    if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len) != NULL)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    memset(out, 0, 16);
    if (inet_pton(AF_INET, buf, out + 12) == 1) {
        out[10] = out[11] = 0xff;
        *v4 = true;
        return true;
    }
    *v4 = false;
    return inet_pton(AF_INET6, buf, out) == 1;
}

static const char *next_token(const char *s, const char *end, size_t *len)
{
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' || *s == '\f'))
        s++;
    const char *t = s;
    while (s < end && !(*s == ' ' || *s == '\t' || *s == '\r' || *s == '\v' || *s == '\f'))
        s++;
    *len = (size_t)(s - t);
    return t;
}

/* One line: "ADDR NAME [NAME...]", the comment already cut off. */
static void hosts_line(struct diag *d, struct pairs *p, const char *s, const char *end)
{
    size_t len, names = 0;
    uint8_t addr[16];
    bool v4;
    char a[68];
    const char *tok = next_token(s, end, &len);

    if (len == 0)
        return;
    if (!parse_addr(tok, len, addr, &v4)) {
        fail(d, "expected an IPv4 or IPv6 address, found '%s'", shown(tok, len, a));
        return;
    }
    for (;;) {
        struct policy_host h;
        const char *name = next_token(tok + len, end, &len);
        if (len == 0)
            break;
        tok = name;
        names++;
        enum policy_host_error e = policy_host_normalize(name, len, &h);
        if (e != POLICY_HOST_OK)
            fail(d, "expected a host name (%s), found '%s'", policy_host_error_str(e),
                 shown(name, len, a));
        else if (h.kind != POLICY_HOST_NAME)
            fail(d, "expected a host name, found the address '%s'", shown(name, len, a));
        else
            pairs_add(p, &h, addr, v4, d->line);
    }
    if (names == 0)
        fail(d, "expected a host name after the address, found end of line");
}

/* The whole file into memory, capped; NULL with the reason in d. */
static char *read_capped(struct diag *d, size_t *len)
{
    FILE *f = fopen(d->path, "re");
    char *buf;

    if (f == NULL) {
        fail(d, "expected a readable file, found '%s'", strerror(errno));
        return NULL;
    }
    buf = malloc(HOSTS_MAX_BYTES + 1);
    if (buf == NULL)
        abort();
    *len = fread(buf, 1, HOSTS_MAX_BYTES + 1, f);
    if (ferror(f))
        fail(d, "expected a readable file, found '%s'", strerror(errno));
    else if (*len > HOSTS_MAX_BYTES)
        fail(d, "expected at most %u bytes, found more", HOSTS_MAX_BYTES);
    fclose(f);
    if (d->errors) {
        free(buf);
        return NULL;
    }
    return buf;
}

static int pair_cmp(const void *x, const void *y)
{
    const struct pair *a = x, *b = y;
    int c = strcmp(a->name, b->name);

    if (c != 0)
        return c;
    if (a->v4 != b->v4)
        return a->v4 ? -1 : 1; /* IPv4 first */
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Sorted pairs into one entry per name, duplicates dropped, capped. */
static void hosts_group(struct diag *d, struct px_hosts *h, struct pairs *p)
{
    struct hosts_name *cur = NULL;
    bool capped = false;

    h->names = calloc(p->n ? p->n : 1, sizeof(*h->names));
    if (h->names == NULL)
        abort();
    for (size_t i = 0; i < p->n; i++) {
        struct pair *e = &p->v[i];
        if (cur == NULL || strcmp(cur->name, e->name) != 0) {
            cur = &h->names[h->n++];
            cur->name = e->name;
            e->name = NULL;
            capped = false;
        }
        bool dup = false;
        for (size_t k = 0; k < cur->n && !dup; k++)
            dup = memcmp(cur->addr[k], e->addr, 16) == 0;
        if (dup)
            continue;
        if (cur->n == PX_DNS_MAX_ADDRS) {
            d->line = e->line;
            if (!capped)
                fail(d, "expected at most %d addresses for '%s', found more", PX_DNS_MAX_ADDRS,
                     cur->name);
            capped = true;
            continue;
        }
        memcpy(cur->addr[cur->n++], e->addr, 16);
    }
}

struct px_hosts *px_hosts_load(const char *path, char *err, size_t errlen)
{
    struct diag d = {.path = path, .err = err, .errlen = errlen};
    struct pairs p = {0};
    struct px_hosts *h;
    size_t len;
    char *buf;

    if (errlen)
        err[0] = '\0';
    buf = read_capped(&d, &len);
    if (buf == NULL)
        return NULL;
    for (const char *s = buf, *end = buf + len; s < end;) {
        const char *eol = memchr(s, '\n', (size_t)(end - s));
        const char *next = eol ? eol + 1 : end;
        const char *hash = memchr(s, '#', (size_t)((eol ? eol : end) - s));
        d.line++;
        hosts_line(&d, &p, s, hash ? hash : eol ? eol : end);
        s = next;
    }
    free(buf);
    if (p.n > 0)
        qsort(p.v, p.n, sizeof(*p.v), pair_cmp);
    h = calloc(1, sizeof(*h));
    if (h == NULL)
        abort();
    hosts_group(&d, h, &p);
    for (size_t i = 0; i < p.n; i++)
        free(p.v[i].name);
    free(p.v);
    if (d.errors) {
        px_hosts_free(h);
        return NULL;
    }
    return h;
}

static int name_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const struct hosts_name *)elem)->name);
}

size_t px_hosts_lookup(const struct px_hosts *h, const char *name, uint8_t out[][16], size_t max)
{
    const struct hosts_name *e;
    size_t n;

    if (h == NULL || h->n == 0)
        return 0;
    e = bsearch(name, h->names, h->n, sizeof(*h->names), name_cmp);
    if (e == NULL)
        return 0;
    n = e->n < max ? e->n : max;
    memcpy(out, e->addr, n * 16);
    return n;
}

void px_hosts_free(struct px_hosts *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->names[i].name);
    free(h->names);
    free(h);
}

/* ------------------------------------------------------------ resolver */

/* One cached answer (OK or NXDOMAIN; failures are not cached). */
struct entry {
    struct entry *hnext;         /* bucket chain */
    struct entry *older, *newer; /* insertion order: the oldest is evicted first */
    uint64_t hash;
    uint64_t expires_ms; /* monotonic */
    enum px_dns_result res;
    size_t n;
    uint8_t addr[PX_DNS_MAX_ADDRS][16];
    char name[];
};

struct query;

/* One address family of a query; the evdns callback's argument. */
struct family {
    struct query *q;
    struct evdns_request *req; /* evdns's handle until its callback runs (then freed), or NULL */
    int err;                   /* DNS_ERR_* */
    uint32_t ttl;
    size_t n;
    uint8_t addr[PX_DNS_MAX_ADDRS][16];
};

/* A name being asked of the servers; every caller for it waits here. */
struct query {
    struct px_resolver *r; /* NULL once orphaned: only waits for evdns */
    struct query *hnext;   /* in r->inflight while live */
    uint64_t hash;
    int pending;             /* evdns callbacks still to come, 0..2 */
    struct family fam[2];    /* [0] A, [1] AAAA */
    struct px_dns_req *head; /* waiting callers, in order */
    struct px_dns_req *tail;
    struct px_dns_share *share; /* charged one unit by this query; NULL once given back */
    struct px_dns_req *starter; /* the waiter whose lookup took that charge */
    char name[];
};

struct px_dns_req {
    struct query *q; /* NULL while its cb runs: cancel is then a no-op */
    struct px_dns_req *prev, *next;
    px_dns_cb cb;
    void *arg;
};

struct px_resolver {
    struct evdns_base *dns; /* NULL: no servers, hosts table only */
    uint64_t seed;          /* hash key, so names cannot be chosen to collide */
    struct entry *cache[CACHE_BUCKETS];
    struct entry *oldest, *newest;
    size_t cached;
    struct query *inflight[INFLIGHT_BUCKETS];
    struct query *delivering; /* the query whose callers are being called */
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* FNV-1a, keyed by a per-resolver random seed. */
static uint64_t name_hash(const struct px_resolver *r, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull ^ r->seed;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
        h ^= *s;
        h *= 0x100000001b3ull;
    }
    return h ^ (h >> 29);
}

/* ---- cache */

static void cache_remove(struct px_resolver *r, struct entry *e)
{
    struct entry **pp = &r->cache[e->hash % CACHE_BUCKETS];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->older)
        e->older->newer = e->newer;
    else
        r->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        r->newest = e->older;
    r->cached--;
    free(e);
}

/* The entry for `name` still within its TTL, or NULL (an expired one is
 * dropped on the way). */
static struct entry *cache_find(struct px_resolver *r, const char *name, uint64_t hash)
{
    for (struct entry *e = r->cache[hash % CACHE_BUCKETS]; e != NULL; e = e->hnext) {
        if (e->hash != hash || strcmp(e->name, name) != 0)
            continue;
        if (now_ms() < e->expires_ms)
            return e;
        cache_remove(r, e);
        return NULL;
    }
    return NULL;
}

/* How long entry e holds still, in whole seconds (at least 1: it is
 * within its TTL). */
static uint32_t seconds_left(const struct entry *e)
{
    uint64_t now = now_ms();
    uint64_t left = e->expires_ms > now ? (e->expires_ms - now) / 1000 : 0;
    return left == 0 ? 1 : (uint32_t)left;
}

static void cache_put(struct px_resolver *r, const char *name, uint64_t hash,
                      enum px_dns_result res, const struct px_dns_answer *a, uint32_t ttl_s)
{
    struct entry *e = cache_find(r, name, hash);
    size_t len = strlen(name);

    if (e != NULL)
        cache_remove(r, e);
    while (r->cached >= PX_DNS_CACHE_MAX) /* per worker */
        cache_remove(r, r->oldest);
    e = calloc(1, sizeof(*e) + len + 1);
    if (e == NULL)
        abort();
    memcpy(e->name, name, len + 1);
    e->hash = hash;
    e->expires_ms = now_ms() + (uint64_t)ttl_s * 1000;
    e->res = res;
    e->n = a->n;
    memcpy(e->addr, a->addr, a->n * 16);
    e->hnext = r->cache[hash % CACHE_BUCKETS];
    r->cache[hash % CACHE_BUCKETS] = e;
    e->older = r->newest;
    if (r->newest)
        r->newest->newer = e;
    else
        r->oldest = e;
    r->newest = e;
    r->cached++;
}

/* ---- shares */

/* One more query on `s` (NULL: nothing to count), unless that would pass
 * `max` (0: no cap).  Compare-and-swap, so that two workers cannot both
 * take the last one. */
static bool share_take(struct px_dns_share *s, unsigned max)
{
    if (s == NULL)
        return true;
    unsigned n = atomic_load(&s->in_flight);
    do {
        if (max != 0 && n >= max)
            return false;
    } while (!atomic_compare_exchange_weak(&s->in_flight, &n, n + 1));
    return true;
}

static void share_put(struct px_dns_share *s)
{
    if (s != NULL)
        atomic_fetch_sub(&s->in_flight, 1);
}

/* Give q's charge back, once: from here on q never touches the share. */
static void share_release(struct query *q)
{
    share_put(q->share);
    q->share = NULL;
    q->starter = NULL;
}

/* ---- queries in flight */

static struct query *inflight_find(struct px_resolver *r, const char *name, uint64_t hash)
{
    for (struct query *q = r->inflight[hash % INFLIGHT_BUCKETS]; q != NULL; q = q->hnext)
        if (q->hash == hash && strcmp(q->name, name) == 0)
            return q;
    return NULL;
}

static void inflight_remove(struct px_resolver *r, struct query *q)
{
    struct query **pp = &r->inflight[q->hash % INFLIGHT_BUCKETS];
    while (*pp != q)
        pp = &(*pp)->hnext;
    *pp = q->hnext;
}

static void waiter_unlink(struct query *q, struct px_dns_req *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        q->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
    else
        q->tail = w->prev;
    w->prev = w->next = NULL;
}

/* The resolver is going: its callers are forgotten, their charges given back. */
static void waiters_drop(struct query *q)
{
    while (q->head) {
        struct px_dns_req *w = q->head;
        waiter_unlink(q, w);
        free(w);
    }
    share_release(q);
}

/* A new waiter at the end of q's list; its handle. */
static struct px_dns_req *waiter_add(struct query *q, px_dns_cb cb, void *arg)
{
    struct px_dns_req *w = calloc(1, sizeof(*w));

    if (w == NULL)
        abort();
    w->q = q;
    w->cb = cb;
    w->arg = arg;
    w->prev = q->tail;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    return w;
}

static uint32_t clamp_ttl(uint32_t ttl)
{
    return ttl < TTL_MIN_S ? TTL_MIN_S : ttl > TTL_MAX_S ? TTL_MAX_S : ttl;
}

static bool is_no_data(int err)
{
    return err == DNS_ERR_NONE || err == DNS_ERR_NOTEXIST || err == DNS_ERR_NODATA;
}

/* The two families into one answer: IPv4 first; OK if either has
 * addresses; NXDOMAIN only if both said so (or had no data); otherwise
 * FAIL. */
static enum px_dns_result combine(const struct query *q, struct px_dns_answer *a, uint32_t *ttl)
{
    uint32_t min = UINT32_MAX;

    a->source = PX_DNS_SRC_NET;
    a->n = 0;
    for (int i = 0; i < 2; i++) {
        const struct family *f = &q->fam[i];
        if (f->err != DNS_ERR_NONE || f->n == 0)
            continue;
        min = f->ttl < min ? f->ttl : min;
        for (size_t k = 0; k < f->n && a->n < PX_DNS_MAX_ADDRS; k++)
            memcpy(a->addr[a->n++], f->addr[k], 16);
    }
    if (a->n > 0) {
        *ttl = a->ttl = clamp_ttl(min);
        return PX_DNS_OK;
    }
    *ttl = a->ttl = NEG_TTL_S;
    if (is_no_data(q->fam[0].err) && is_no_data(q->fam[1].err))
        return PX_DNS_NXDOMAIN;
    return PX_DNS_FAIL;
}

/* Both families have called back: the charge goes back (before anyone is
 * told), then cache, then call every caller still waiting.  A callback may
 * cancel other callers, start new requests, or free the resolver; the loop
 * re-reads its state after each call. */
static void query_finish(struct query *q)
{
    struct px_resolver *r = q->r;
    struct px_dns_answer a = {.n = 0};
    uint32_t ttl;

    share_release(q);
    if (r == NULL) { /* orphaned: nobody to tell, nothing to cache */
        free(q);
        return;
    }
    inflight_remove(r, q);
    enum px_dns_result res = combine(q, &a, &ttl);
    if (res != PX_DNS_FAIL)
        cache_put(r, q->name, q->hash, res, &a, ttl);
    r->delivering = q;
    while (q->r != NULL && q->head != NULL) {
        struct px_dns_req *w = q->head;
        waiter_unlink(q, w);
        w->q = NULL;
        w->cb(res, &a, w->arg);
        free(w);
    }
    if (q->r != NULL)
        q->r->delivering = NULL;
    free(q);
}

/* evdns's callback, once per family (DNS_ERR_CANCEL when the query was
 * cancelled, DNS_ERR_SHUTDOWN when the resolver was freed first).  evdns
 * frees its handle when this returns. */
static void on_dns_answer(int result, char type, int count, int ttl, void *addrs, void *arg)
{
    struct family *f = arg;
    struct query *q = f->q;
    bool v4 = f == &q->fam[0];

    f->req = NULL;
    f->err = result;
    f->ttl = ttl < 0 ? 0 : (uint32_t)ttl;
    if (result == DNS_ERR_NONE && type == (v4 ? DNS_IPv4_A : DNS_IPv6_AAAA) && count > 0) {
        for (int i = 0; i < count && f->n < PX_DNS_MAX_ADDRS; i++) {
            uint8_t *out = f->addr[f->n++];
            memset(out, 0, 16);
            if (v4) {
                out[10] = out[11] = 0xff;
                memcpy(out + 12, (const uint8_t *)addrs + 4 * i, 4);
            } else {
                memcpy(out, (const uint8_t *)addrs + 16 * i, 16);
            }
        }
    }
    if (--q->pending == 0)
        query_finish(q);
}

/* A new query for `name`, both families asked; NULL if evdns would not
 * take either. */
static struct query *query_start(struct px_resolver *r, const char *name, uint64_t hash)
{
    size_t len = strlen(name);
    struct query *q = calloc(1, sizeof(*q) + len + 1);

    if (q == NULL)
        abort();
    memcpy(q->name, name, len + 1);
    q->r = r;
    q->hash = hash;
    for (int i = 0; i < 2; i++) {
        q->fam[i].q = q;
        q->fam[i].err = DNS_ERR_UNKNOWN;
    }
    /* evdns calls back from the event loop, never from inside resolve_*:
     * pending cannot reach 0 before both are asked. */
    q->fam[0].req =
        evdns_base_resolve_ipv4(r->dns, name, DNS_QUERY_NO_SEARCH, on_dns_answer, &q->fam[0]);
    q->fam[1].req =
        evdns_base_resolve_ipv6(r->dns, name, DNS_QUERY_NO_SEARCH, on_dns_answer, &q->fam[1]);
    q->pending = (q->fam[0].req != NULL) + (q->fam[1].req != NULL);
    if (q->pending == 0) {
        free(q);
        return NULL;
    }
    q->hnext = r->inflight[hash % INFLIGHT_BUCKETS];
    r->inflight[hash % INFLIGHT_BUCKETS] = q;
    return q;
}

/* Nobody waits for live q any more: out of the table, orphaned, and its
 * evdns requests cancelled.  evdns still calls back once for each (with
 * DNS_ERR_CANCEL, or with the answer if that was already on its way: then
 * evdns_cancel_request does nothing), and the last callback frees q. */
static void query_cancel(struct query *q)
{
    struct px_resolver *r = q->r;

    assert(r != NULL && q->head == NULL && q->pending > 0);
    inflight_remove(r, q);
    share_release(q);
    q->r = NULL;
    for (int i = 0; i < 2; i++) {
        if (q->fam[i].req != NULL)
            evdns_cancel_request(r->dns, q->fam[i].req);
        q->fam[i].req = NULL; /* never cancelled twice */
    }
}

static int set_option(struct px_resolver *r, const char *opt, const char *val, char *err,
                      size_t errlen)
{
    if (evdns_base_set_option(r->dns, opt, val) == 0)
        return 0;
    snprintf(err, errlen, "resolver: expected evdns to take option %s %s, found it refused", opt,
             val);
    return -1;
}

/* Timeout 2 s, two tries: a dead server costs a connection 4 s, not 20.
 * randomize-case stays on (the default): each server gets one UDP socket
 * for its lifetime, so the source port adds no entropy and the 0x20 bits
 * are what a spoofer must guess beyond the 16-bit id.
 *
 * max-inflight 1024 (evdns's default is 64): past it evdns queues requests
 * first in, first out, across every sandbox of the worker, so with 64 one
 * sandbox asking for slow names filled the servers' slots and everyone
 * else's lookups waited behind its timeouts.  What bounds a sandbox is its
 * px_dns_share (egressd's max-lookups-per-sandbox, 32 by default, over all
 * workers; a lookup is two requests), so 1024 lets 16 sandboxes at their
 * cap share one worker before anything queues.  The cost: evdns hashes
 * its requests into (1024 + 4) / 5 buckets, and a blind spoofer has more
 * ids to hit (1024 of 65535), which the 0x20 case bits still guard. */
static int configure(struct px_resolver *r, const struct px_addr *servers, size_t n, char *err,
                     size_t errlen)
{
    if (set_option(r, "timeout", "2", err, errlen) || set_option(r, "attempts", "2", err, errlen) ||
        set_option(r, "randomize-case", "1", err, errlen) ||
        set_option(r, "max-inflight", "1024", err, errlen))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const struct px_addr *a = &servers[i];
        int fam = a->ss.ss_family;
        if ((fam != AF_INET && fam != AF_INET6) ||
            evdns_base_nameserver_sockaddr_add(r->dns, (const struct sockaddr *)&a->ss, a->len,
                                               0) != 0) {
            snprintf(err, errlen,
                     "resolver %s: expected a usable DNS server address, found evdns "
                     "refused it",
                     a->text);
            return -1;
        }
    }
    return 0;
}

struct px_resolver *px_resolver_new(struct event_base *base, const struct px_addr *servers,
                                    size_t n, char *err, size_t errlen)
{
    struct px_resolver *r = calloc(1, sizeof(*r));

    if (r == NULL)
        abort();
    evutil_secure_rng_get_bytes(&r->seed, sizeof(r->seed));
    if (n == 0)
        return r;
    /* No EVDNS_BASE_INITIALIZE_NAMESERVERS: nothing is read from the
     * system.  DISABLE_WHEN_INACTIVE lets a worker's loop end when it has
     * nothing else to do. */
    r->dns = evdns_base_new(base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (r->dns == NULL) {
        snprintf(err, errlen, "resolver: expected evdns to start, found it could not");
        free(r);
        return NULL;
    }
    if (configure(r, servers, n, err, errlen) != 0) {
        evdns_base_free(r->dns, 0);
        free(r);
        return NULL;
    }
    return r;
}

/* In-flight queries are orphaned, not freed: evdns_base_free(.., 1) makes
 * each unanswered request call back once more with DNS_ERR_SHUTDOWN from
 * the event loop, and that last callback frees its query (cancelled
 * queries are out of the table already and free themselves the same way).
 * So the loop should run once more (EVLOOP_NONBLOCK is enough) before the
 * event_base is freed, or those few bytes leak. */
void px_resolver_free(struct px_resolver *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < INFLIGHT_BUCKETS; i++) {
        for (struct query *q = r->inflight[i]; q != NULL; q = q->hnext) {
            waiters_drop(q);
            q->r = NULL;
        }
    }
    if (r->delivering) {
        waiters_drop(r->delivering);
        r->delivering->r = NULL;
    }
    if (r->dns)
        evdns_base_free(r->dns, 1);
    while (r->oldest)
        cache_remove(r, r->oldest);
    free(r);
}

size_t px_resolver_cached(const struct px_resolver *r)
{
    return r->cached;
}

/* Answer at once: cb runs now, px_resolve returns NULL. */
static struct px_dns_req *answer_now(px_dns_cb cb, void *arg, enum px_dns_result res,
                                     struct px_dns_answer *a, enum px_dns_source src)
{
    a->source = src;
    cb(res, a, arg);
    return NULL;
}

/* A lookup that needs a new query: charge the share, start the query and
 * make the caller its first waiter, the one whose cancel gives the charge
 * back.  BUSY at once if the share is used up, FAIL if evdns refused. */
static struct px_dns_req *lookup_start(struct px_resolver *r, const char *name, uint64_t hash,
                                       struct px_dns_share *share, unsigned max, px_dns_cb cb,
                                       void *arg)
{
    struct px_dns_answer a = {.n = 0};

    if (!share_take(share, max))
        return answer_now(cb, arg, PX_DNS_BUSY, &a, PX_DNS_SRC_NET);
    struct query *q = query_start(r, name, hash);
    if (q == NULL) {
        share_put(share);
        return answer_now(cb, arg, PX_DNS_FAIL, &a, PX_DNS_SRC_NET);
    }
    struct px_dns_req *w = waiter_add(q, cb, arg);
    q->share = share;
    q->starter = share != NULL ? w : NULL;
    return w;
}

struct px_dns_req *px_resolve_shared(struct px_resolver *r, const struct px_hosts *hosts,
                                     const char *name, struct px_dns_share *share, unsigned max,
                                     px_dns_cb cb, void *arg)
{
    struct px_dns_answer a = {.n = 0};
    struct policy_host h;

    /* Normalized again (it is idempotent) so the cache key is canonical
     * whatever the caller passed. */
    if (policy_host_normalize(name, strnlen(name, POLICY_HOST_MAX + 2), &h) != POLICY_HOST_OK ||
        h.kind != POLICY_HOST_NAME)
        return answer_now(cb, arg, PX_DNS_FAIL, &a, PX_DNS_SRC_NET);
    a.n = px_hosts_lookup(hosts, h.text, a.addr, PX_DNS_MAX_ADDRS);
    a.ttl = PX_DNS_TTL_NONE;
    if (a.n > 0)
        return answer_now(cb, arg, PX_DNS_OK, &a, PX_DNS_SRC_HOSTS);
    a.ttl = 0;
    if (r->dns == NULL)
        return answer_now(cb, arg, PX_DNS_FAIL, &a, PX_DNS_SRC_NET);

    uint64_t hash = name_hash(r, h.text);
    struct entry *e = cache_find(r, h.text, hash);
    if (e != NULL) {
        a.n = e->n;
        a.ttl = seconds_left(e);
        memcpy(a.addr, e->addr, e->n * 16);
        return answer_now(cb, arg, e->res, &a, PX_DNS_SRC_CACHE);
    }
    struct query *q = inflight_find(r, h.text, hash);
    if (q != NULL)
        return waiter_add(q, cb, arg);
    return lookup_start(r, h.text, hash, share, max, cb, arg);
}

struct px_dns_req *px_resolve(struct px_resolver *r, const struct px_hosts *hosts, const char *name,
                              px_dns_cb cb, void *arg)
{
    return px_resolve_shared(r, hosts, name, NULL, 0, cb, arg);
}

/* While q delivers (pending 0) its last waiter's cancel leaves q alone:
 * query_finish is about to free it. */
void px_resolve_cancel(struct px_dns_req *w)
{
    if (w == NULL || w->q == NULL) /* NULL, or its cb is running: freed after it */
        return;
    struct query *q = w->q;
    waiter_unlink(q, w);
    if (q->starter == w)
        share_release(q);
    free(w);
    if (q->head == NULL && q->pending > 0)
        query_cancel(q);
}
