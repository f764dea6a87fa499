/*
 * index.c - the lookup structures of a compiled rule set.
 *
 * Host rules (exact, *.suffix, .suffix) are put, compacted, into a hash
 * table keyed by their name; regex rules that require a literal suffix are
 * listed in a second table keyed by that suffix.  A host is
 * looked up once per label boundary, in both tables (match.c).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "policy_int.h"

/* Zeroed memory for a table.  Big tables are 2 MiB-aligned and marked for
 * transparent huge pages: a lookup is a few random reads across megabytes,
 * and with 4 KiB pages each read also walks the page table (measured with
 * bench_policy; see bench/README.md).  The advice is only a hint. */
static void *table_alloc(size_t bytes)
{
    const size_t huge = 2u << 20;
    if (bytes < huge)
        return xcalloc(1, bytes);
    bytes = (bytes + huge - 1) & ~(huge - 1);
    void *p = aligned_alloc(huge, bytes);
    if (p == NULL)
        return xcalloc(1, bytes);
    (void)madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

static uint64_t key_hash(const char *key, size_t len)
{
    uint64_t h = SUFFIX_HASH_SEED;
    while (len > 0)
        h = suffix_hash_step(h, (unsigned char)key[--len]);
    return h;
}

static uint32_t tag_of(uint64_t h)
{
    return (uint32_t)(h >> 32) | 1;
}

static int by_key(const void *a, const void *b)
{
    const struct hitem *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : (x->rule > y->rule) - (x->rule < y->rule);
}

/* The file index of a rule's file in rs->files, adding it if new. */
static uint16_t file_index(struct ruleset *rs, const char *file)
{
    for (size_t i = 0; i < rs->n_files; i++)
        if (rs->files[i] == file)
            return (uint16_t)i;
    rs->files = xrealloc(rs->files, (rs->n_files + 1) * sizeof(*rs->files));
    rs->files[rs->n_files] = file;
    return (uint16_t)rs->n_files++;
}

static bool host_keyed(const struct rule *r)
{
    return r->kind == RK_EXACT || r->kind == RK_SUB || r->kind == RK_APEX_SUB;
}

static struct crule compact(struct ruleset *rs, uint32_t idx)
{
    const struct rule *r = &rs->rules[idx];
    struct crule c = {.kind = r->kind, .req = r->req != NULL, .line = r->line, .rule = idx};
    c.file = file_index(rs, r->file);
    c.flags =
        (uint8_t)((r->deny ? CR_DENY : 0) | (r->raw ? CR_RAW : 0) |
                  (r->private_ok ? CR_PRIVATE_OK : 0) | (r->until != NO_EXPIRY ? CR_UNTIL : 0) |
                  (host_keyed(r) && r->u.inject != NULL ? CR_INJECT : 0));
    if (r->ports_kind == PORTS_ANY) {
        c.flags |= CR_PORTS_ANY;
    } else if (r->ports_kind == PORTS_LIST) {
        c.flags |= CR_PORTS_LIST | (r->n_ports > 2 ? CR_PORTS_MORE : 0);
        c.port[0] = r->ports[0];
        c.port[1] = r->n_ports > 1 ? r->ports[1] : r->ports[0];
    }
    return c;
}

static size_t ovf_words(size_t klen, size_t count)
{
    return (sizeof(struct hovf) + klen + 1 + 7) / 8 + (count * sizeof(struct crule) + 7) / 8;
}

static const struct crule *ovf_rules(const struct hovf *o)
{
    return (const struct crule *)((const char *)o +
                                  ((sizeof(struct hovf) + o->klen + 1 + 7) & ~(size_t)7));
}

/* One key with items[0..n) into its slot (and an overflow block if the
 * key is long or has more than one rule). */
static void put_key(struct htab *t, struct ruleset *rs, const struct hitem *items, size_t n)
{
    uint64_t h = key_hash(items[0].key, items[0].klen);
    size_t s = h & t->mask;
    while (t->slots[s].tag != 0)
        s = (s + 1) & t->mask;
    struct hent *e = &t->slots[s];
    e->tag = tag_of(h);
    e->klen = (uint8_t)items[0].klen;
    if (items[0].klen <= HKEY_INLINE)
        memcpy(e->key, items[0].key, items[0].klen);
    if (n == 1 && items[0].klen <= HKEY_INLINE) {
        e->inline_rule = 1;
        e->r = compact(rs, items[0].rule);
        return;
    }
    assert(t->ovf != NULL); /* htab_build() counted this key's words */
    struct hovf *o = (struct hovf *)(t->ovf + t->n_words);
    o->count = (uint32_t)n;
    o->klen = items[0].klen;
    memcpy(o->key, items[0].key, items[0].klen + 1);
    struct crule *cr = (struct crule *)ovf_rules(o);
    for (size_t k = 0; k < n; k++)
        cr[k] = compact(rs, items[k].rule);
    e->ovf = (uint32_t)t->n_words + 1;
    t->n_words += ovf_words(items[0].klen, n);
}

/* Build t from items (sorted here). */
static void htab_build(struct htab *t, struct ruleset *rs, struct hitem *items, size_t n)
{
    size_t cap = 16, words = 0, keys = 0;

    if (n > 1)
        qsort(items, n, sizeof(*items), by_key);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && strcmp(items[j].key, items[i].key) == 0; j++)
            ;
        if (j - i > 1 || items[i].klen > HKEY_INLINE)
            words += ovf_words(items[i].klen, j - i);
        keys++;
    }
    while (cap * 7 < keys * 10) /* load factor at most 0.7 */
        cap *= 2;
    t->slots = table_alloc(cap * sizeof(*t->slots));
    t->mask = cap - 1;
    t->ovf = words ? xcalloc(words, 8) : NULL;
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && strcmp(items[j].key, items[i].key) == 0; j++)
            ;
        put_key(t, rs, items + i, j - i);
    }
}

const struct hent *htab_find(const struct htab *t, const char *key, size_t len, uint64_t hash)
{
    uint32_t tag = tag_of(hash);
    if (t->slots == NULL)
        return NULL;
    for (size_t s = hash & t->mask; t->slots[s].tag != 0; s = (s + 1) & t->mask) {
        const struct hent *e = &t->slots[s];
        if (e->tag != tag || e->klen != len)
            continue;
        const char *k =
            len <= HKEY_INLINE ? e->key : ((const struct hovf *)(t->ovf + e->ovf - 1))->key;
        if (memcmp(k, key, len) == 0)
            return e;
    }
    return NULL;
}

uint32_t hent_rules(const struct htab *t, const struct hent *e, const struct crule **out)
{
    if (e->inline_rule) {
        *out = &e->r;
        return 1;
    }
    const struct hovf *o = (const struct hovf *)(t->ovf + e->ovf - 1);
    *out = ovf_rules(o);
    return o->count;
}

void htab_free(struct htab *t)
{
    free(t->slots);
    free(t->ovf);
    memset(t, 0, sizeof(*t));
}

/* The list a rule that is not host-keyed goes to. */
static uint32_t **role(struct ruleset *rs, const struct rule *r, size_t **n)
{
    if (r->kind == RK_IP) {
        *n = r->deny ? &rs->n_ip_deny : &rs->n_ip_allow;
        return r->deny ? &rs->ip_deny : &rs->ip_allow;
    }
    *n = r->deny ? &rs->n_regex_deny : &rs->n_regex_allow;
    return r->deny ? &rs->regex_deny : &rs->regex_allow;
}

static int cmp_rule(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_port(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* rs->named_ports: the ports of every PORTS_LIST rule, sorted, once each. */
static void index_ports(struct ruleset *rs)
{
    size_t n = 0, k = 0;

    for (size_t i = 0; i < rs->n_rules; i++)
        if (rs->rules[i].ports_kind == PORTS_LIST)
            n += rs->rules[i].n_ports;
    rs->named_ports = n ? xcalloc(n, sizeof(uint16_t)) : NULL;
    for (size_t i = 0; i < rs->n_rules; i++)
        if (rs->rules[i].ports_kind == PORTS_LIST)
            for (uint16_t j = 0; j < rs->rules[i].n_ports; j++)
                rs->named_ports[k++] = rs->rules[i].ports[j];
    if (n > 1)
        qsort(rs->named_ports, n, sizeof(uint16_t), cmp_port);
    k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || rs->named_ports[k - 1] != rs->named_ports[i])
            rs->named_ports[k++] = rs->named_ports[i];
    rs->n_named_ports = k;
}

struct inject_pos {
    const struct policy_inject *inject;
    uint32_t rule;
};

static int by_inject(const void *a, const void *b)
{
    const struct inject_pos *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->inject, q = (uintptr_t)y->inject;
    if (p != q)
        return p < q ? -1 : 1;
    return (x->rule > y->rule) - (x->rule < y->rule);
}

/* rs->injects: the rules with an `inject` clause, in rule order.  Copies
 * of one rule (a preset included by two presets that another includes)
 * share the clause: only the first copy is listed. */
static void index_injects(struct ruleset *rs)
{
    struct inject_pos *pos;
    size_t n = 0, k = 0;

    for (size_t i = 0; i < rs->n_rules; i++)
        n += host_keyed(&rs->rules[i]) && rs->rules[i].u.inject != NULL;
    if (n == 0)
        return;
    pos = xcalloc(n, sizeof(*pos));
    for (size_t i = 0; i < rs->n_rules; i++)
        if (host_keyed(&rs->rules[i]) && rs->rules[i].u.inject != NULL)
            pos[k++] = (struct inject_pos){rs->rules[i].u.inject, (uint32_t)i};
    qsort(pos, n, sizeof(*pos), by_inject);
    rs->injects = xcalloc(n, sizeof(uint32_t));
    for (size_t i = 0; i < n; i++)
        if (i == 0 || pos[i].inject != pos[i - 1].inject)
            rs->injects[rs->n_injects++] = pos[i].rule;
    qsort(rs->injects, rs->n_injects, sizeof(uint32_t), cmp_rule);
    free(pos);
}

/* i onto list (*n entries, grown 16 at a time). */
static void list_add(uint32_t **list, size_t *n, size_t i)
{
    if (*n % 16 == 0)
        *list = xrealloc(*list, (*n + 16) * sizeof(uint32_t));
    (*list)[(*n)++] = (uint32_t)i;
}

/* rs->req_hosts: the host-keyed allow rules with request options;
 * rs->push_rules: the allow rules with `git-push`. */
static void index_req_hosts(struct ruleset *rs)
{
    for (size_t i = 0; i < rs->n_rules; i++) {
        const struct rule *r = &rs->rules[i];
        if (r->deny || r->req == NULL)
            continue;
        if (r->req->host != NULL)
            list_add(&rs->req_hosts, &rs->n_req_hosts, i);
        if (r->req->n_refs > 0)
            list_add(&rs->push_rules, &rs->n_push_rules, i);
    }
}

void ruleset_index(struct ruleset *rs)
{
    index_ports(rs);
    index_injects(rs);
    index_req_hosts(rs);
    struct hitem *hosts = xcalloc(rs->n_rules, sizeof(*hosts));
    struct hitem *rkeys = xcalloc(rs->n_rules, sizeof(*rkeys));
    size_t n_hosts = 0, n_rkeys = 0, *n;
    uint32_t **list;

    uint32_t **lists[] = {&rs->regex_deny, &rs->regex_allow, &rs->regex_free, &rs->ip_deny,
                          &rs->ip_allow};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        *lists[i] = xcalloc(rs->n_rules, sizeof(uint32_t));
    for (size_t i = 0; i < rs->n_rules; i++) {
        const struct rule *r = &rs->rules[i];
        if (host_keyed(r)) {
            hosts[n_hosts++] = (struct hitem){r->u.key, (uint32_t)strlen(r->u.key), (uint32_t)i};
            continue;
        }
        list = role(rs, r, &n);
        (*list)[(*n)++] = (uint32_t)i;
        if (r->kind == RK_REGEX && r->u.rx.key != NULL)
            rkeys[n_rkeys++] =
                (struct hitem){r->u.rx.key, (uint32_t)strlen(r->u.rx.key), (uint32_t)i};
        else if (r->kind != RK_IP)
            rs->regex_free[rs->n_regex_free++] = (uint32_t)i;
    }
    htab_build(&rs->hosts, rs, hosts, n_hosts);
    htab_build(&rs->regex_keys, rs, rkeys, n_rkeys);
    free(hosts);
    free(rkeys);
    rs->regex_deny = xrealloc(rs->regex_deny, rs->n_regex_deny * sizeof(uint32_t));
    rs->regex_allow = xrealloc(rs->regex_allow, rs->n_regex_allow * sizeof(uint32_t));
    rs->regex_free = xrealloc(rs->regex_free, rs->n_regex_free * sizeof(uint32_t));
    rs->ip_deny = xrealloc(rs->ip_deny, rs->n_ip_deny * sizeof(uint32_t));
    rs->ip_allow = xrealloc(rs->ip_allow, rs->n_ip_allow * sizeof(uint32_t));
}
