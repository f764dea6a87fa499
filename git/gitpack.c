/*
 * gitpack.c - the commits at the start of a git pack, read as it streams
 * by (gitformat-pack(5)):
 *
 *   pack    = "PACK" version(4, 2 or 3) count(4) *object trailer
 *   object  = type-size [ofs-offset | base-id] zlib(data)
 *
 * Each commit's content is inflated and kept (up to max_bytes in all),
 * hashed to its id ("commit SIZE\0" and the content), and read for its
 * tree and parent lines.  Tags are inflated and passed over.  A delta
 * (OFS_DELTA, or REF_DELTA on a commit of the pack) is applied to its
 * base's content as git's patch-delta.c does.  The first tree or blob, a
 * REF_DELTA on anything else (a thin pack's base outside it), or the
 * pack's object count ends the walk: DONE (read_all: the object count
 * alone; trees, blobs and deltas on them are inflated and passed over,
 * their offsets not kept).  Every object is checked as
 * git's index-pack would: a type of 0 or 5, a header of more than 10
 * bytes, an OFS_DELTA base that is not an earlier object's start, zlib
 * data that does not inflate to exactly its declared size, a delta that
 * does not apply, a commit whose tree and parent lines do not parse: BAD.
 * The pack's trailing checksum is not read.
 */
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gitpack.h"

#define PACK_HEAD      12 /* "PACK", the version, the object count */
#define PACK_SIG_LEN   4  /* "PACK" */
#define PACK_V2        2  /* the versions git reads */
#define PACK_V3        3
#define HEAD_MAX       10   /* bytes of an object's type and size, at most */
#define OFS_MAX        10   /* bytes of an OFS_DELTA's offset, at most */
#define MORE_BIT       0x80 /* a varint byte that another follows */
#define LOW7           0x7f /* a varint byte's value */
#define VARINT_BITS    7    /* ... its bits */
#define SIZE0_BITS     4    /* size bits in an object header's first byte */
#define SIZE0_MASK     0x0f
#define TYPE_SHIFT     4
#define TYPE_MASK      7
#define SCRATCH        16384                 /* inflate's output window */
#define DELTA_MIN      4                     /* the shortest delta git applies (DELTA_SIZE_MIN) */
#define DELTA_HDR_MAX  10                    /* bytes of a delta's size varint, at most */
#define COPY_OFS_BYTES 4                     /* a copy's offset bytes (flags 0x01 to 0x08) */
#define COPY_LEN_BYTES 3                     /* its size bytes (flags 0x10 to 0x40) */
#define COPY_LEN_ZERO  0x10000               /* what a copy of size 0 copies */
#define TABLE_MIN      64                    /* slots of the smallest id table */
#define GROW_MIN       16                    /* entries of the smallest growable array */
#define WHY_MAX        192                   /* bytes of a why, its NUL included */
#define FIB_HASH       0x9e3779b97f4a7c15ULL /* 2^64 / golden ratio: spreads ids */
#define NO_COMMIT      UINT32_MAX            /* an object that is a tag */
#define SHA1_LEN       20
#define SHA256_LEN     32

enum obj_type {
    OBJ_COMMIT = 1,
    OBJ_TREE = 2,
    OBJ_BLOB = 3,
    OBJ_TAG = 4,
    OBJ_RESERVED = 5,
    OBJ_OFS_DELTA = 6,
    OBJ_REF_DELTA = 7,
};

/* Where the walk is: the pack header, an object's header, an OFS_DELTA's
 * offset, a REF_DELTA's base id, an object's zlib data; or over. */
enum state { ST_HEAD, ST_OBJ, ST_OFS, ST_REF, ST_DATA, ST_OVER };

/* What the zlib data being inflated is: a tag's (passed over, its offset
 * kept for the deltas on it), a tree's, a blob's or a delta's on one
 * (read_all: passed over), a commit's, a delta's on a commit. */
enum data_kind { DATA_SKIP, DATA_PASS, DATA_COMMIT, DATA_DELTA };

struct commit {
    uint8_t id[GIT_PACK_HASH_MAX];
    uint8_t *content;
    size_t len;
    size_t parent0, nparents; /* its parents in w->parents */
};

/* An object read before the walk ended: a commit or a tag (or a delta
 * that made one). */
struct object {
    uint64_t offset;
    uint32_t commit; /* its index in w->commits, or NO_COMMIT */
};

struct git_pack_walk {
    size_t hash_len;
    const EVP_MD *md;
    EVP_MD_CTX *ctx;
    size_t max_bytes, kept; /* content held, a delta being applied included */
    bool read_all;          /* to the object count, past trees and blobs */
    enum state state;
    enum git_pack_result result; /* once ST_OVER */
    const char *why;
    char why_buf[WHY_MAX];
    uint64_t offset; /* bytes read */
    uint64_t end;    /* DONE: where the object that stopped it starts */
    uint32_t count, seen;

    /* The object being read. */
    uint64_t start;
    int type;                       /* in its header */
    uint8_t acc[GIT_PACK_HASH_MAX]; /* the pack header, a base id */
    size_t have;                    /* bytes of a header, offset or id so far */
    unsigned shift;
    uint64_t size, ofs, got;
    enum data_kind data_kind;
    uint8_t *data;
    uint32_t base;
    z_stream z;

    struct commit *commits;
    size_t ncommits, cap_commits;
    uint8_t *parents; /* hash_len bytes each */
    size_t nparents, cap_parents;
    uint32_t *table; /* commit index + 1, 0 for a free slot */
    size_t table_cap;
    struct object *objects;
    size_t nobjects, cap_objects;
    size_t tags;
    uint8_t scratch[SCRATCH];
};

struct git_pack_walk *git_pack_walk_new(enum git_hash_kind k, size_t max_bytes)
{
    struct git_pack_walk *w = calloc(1, sizeof(*w));

    if (w == NULL)
        return NULL;
    w->hash_len = k == GIT_HASH_SHA256 ? SHA256_LEN : SHA1_LEN;
    w->md = k == GIT_HASH_SHA256 ? EVP_sha256() : EVP_sha1();
    w->max_bytes = max_bytes;
    w->state = ST_HEAD;
    w->ctx = EVP_MD_CTX_new();
    if (w->ctx == NULL || inflateInit(&w->z) != Z_OK) {
        EVP_MD_CTX_free(w->ctx);
        free(w);
        return NULL;
    }
    return w;
}

void git_pack_walk_free(struct git_pack_walk *w)
{
    if (w == NULL)
        return;
    for (size_t i = 0; i < w->ncommits; i++)
        free(w->commits[i].content);
    free(w->commits);
    free(w->parents);
    free(w->table);
    free(w->objects);
    free(w->data);
    inflateEnd(&w->z);
    EVP_MD_CTX_free(w->ctx);
    free(w);
}

void git_pack_walk_read_all(struct git_pack_walk *w)
{
    if (w->state == ST_HEAD && w->have == 0)
        w->read_all = true;
}

/* ------------------------------------------------------------ endings */

/* The walk is over with result r and why "object at offset START: ..."
 * (or the pack header's); r. */
__attribute__((format(printf, 3, 4))) static enum git_pack_result
stop(struct git_pack_walk *w, enum git_pack_result r, const char *fmt, ...)
{
    va_list ap;
    int k = w->state == ST_HEAD ? snprintf(w->why_buf, sizeof(w->why_buf), "the pack header: ")
                                : snprintf(w->why_buf, sizeof(w->why_buf),
                                           "object at offset %llu: ", (unsigned long long)w->start);

    va_start(ap, fmt);
    vsnprintf(w->why_buf + k, sizeof(w->why_buf) - (size_t)k, fmt, ap);
    va_end(ap);
    w->why = w->why_buf;
    w->state = ST_OVER;
    w->result = r;
    return r;
}

/* DONE: every commit is read; the object that stopped the walk starts at
 * end (or the objects end there). */
static enum git_pack_result done(struct git_pack_walk *w, uint64_t end)
{
    w->state = ST_OVER;
    w->result = GIT_PACK_DONE;
    w->end = end;
    return GIT_PACK_DONE;
}

static enum git_pack_result out_of_memory(struct git_pack_walk *w)
{
    return stop(w, GIT_PACK_TOO_BIG, "out of memory");
}

/* ------------------------------------------------------------ tables */

/* Make room for one more of an array *a of *cap items of size item,
 * holding n; false when memory runs out. */
static bool grow(void **a, size_t *cap, size_t n, size_t item)
{
    if (n < *cap)
        return true;
    size_t c = *cap < GROW_MIN ? GROW_MIN : *cap * 2;
    void *p = reallocarray(*a, c, item);
    if (p == NULL)
        return false;
    *a = p;
    *cap = c;
    return true;
}

/* The first slot to probe for id in a table of cap slots (a power of 2). */
static size_t slot_of(const uint8_t *id, size_t cap)
{
    uint64_t v;
    memcpy(&v, id, sizeof(v));
    return (size_t)((v * FIB_HASH) >> 32) & (cap - 1);
}

/* The index of the commit whose id is id, or NO_COMMIT. */
static uint32_t find_commit(const struct git_pack_walk *w, const uint8_t *id)
{
    if (w->table_cap == 0)
        return NO_COMMIT;
    for (size_t s = slot_of(id, w->table_cap);; s = (s + 1) & (w->table_cap - 1)) {
        uint32_t e = w->table[s];
        if (e == 0)
            return NO_COMMIT;
        if (memcmp(w->commits[e - 1].id, id, w->hash_len) == 0)
            return e - 1;
    }
}

/* Put commit i in table t of cap slots. */
static void table_put(const struct git_pack_walk *w, uint32_t *t, size_t cap, uint32_t i)
{
    size_t s = slot_of(w->commits[i].id, cap);
    while (t[s] != 0)
        s = (s + 1) & (cap - 1);
    t[s] = i + 1;
}

/* Make room in the id table for one more commit (at most half full);
 * false when memory runs out. */
static bool table_room(struct git_pack_walk *w)
{
    if (2 * (w->ncommits + 1) <= w->table_cap)
        return true;
    size_t cap = w->table_cap < TABLE_MIN ? TABLE_MIN : w->table_cap * 2;
    uint32_t *t = calloc(cap, sizeof(*t));
    if (t == NULL)
        return false;
    for (size_t i = 0; i < w->ncommits; i++)
        table_put(w, t, cap, (uint32_t)i);
    free(w->table);
    w->table = t;
    w->table_cap = cap;
    return true;
}

/* Record the object that starts at w->start as commit c (or NO_COMMIT, a
 * tag); false when memory runs out. */
static bool record(struct git_pack_walk *w, uint32_t c)
{
    if (!grow((void **)&w->objects, &w->cap_objects, w->nobjects, sizeof(*w->objects)))
        return false;
    w->objects[w->nobjects++] = (struct object){w->start, c};
    return true;
}

/* The object read before that starts at offset, or NULL. */
static const struct object *object_at(const struct git_pack_walk *w, uint64_t offset)
{
    size_t lo = 0, hi = w->nobjects;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->objects[mid].offset == offset)
            return &w->objects[mid];
        if (w->objects[mid].offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ------------------------------------------------------------ commits */

static int hex_digit(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The 2 * len lower-case hex digits at s as len raw bytes into out;
 * false when one is not such a digit. */
static bool unhex(const uint8_t *s, size_t len, uint8_t *out)
{
    for (size_t i = 0; i < len; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

/* Whether c[at..len) starts with the line word + an id in hex + LF, and
 * more content follows it (git's parse_commit_buffer wants that too);
 * the id into id. */
static bool id_line(const struct git_pack_walk *w, const uint8_t *c, size_t len, size_t at,
                    const char *word, uint8_t *id)
{
    size_t wl = strlen(word), hex = 2 * w->hash_len;

    return len - at > wl + hex + 1 && memcmp(c + at, word, wl) == 0 &&
           unhex(c + at + wl, w->hash_len, id) && c[at + wl + hex] == '\n';
}

/* A commit's content c[0..len): "tree ID\n", then "parent ID\n" lines,
 * each followed by more content, ids of the pack's kind in lower-case
 * hex (a line that starts "parent " and is not one is BAD: git would
 * take another set of parents or none); the parents appended to
 * w->parents.  False when they do not parse; *oom when memory ran out. */
static bool parse_commit(struct git_pack_walk *w, const uint8_t *c, size_t len, bool *oom)
{
    static const char tree[] = "tree ", parent[] = "parent ";
    size_t line = 2 * w->hash_len + 1, at;
    uint8_t id[GIT_PACK_HASH_MAX];

    *oom = false;
    if (!id_line(w, c, len, 0, tree, id))
        return false;
    at = sizeof(tree) - 1 + line;
    while (len - at >= sizeof(parent) - 1 && memcmp(c + at, parent, sizeof(parent) - 1) == 0) {
        if (!id_line(w, c, len, at, parent, id))
            return false;
        if (!grow((void **)&w->parents, &w->cap_parents, w->nparents, w->hash_len)) {
            *oom = true;
            return false;
        }
        memcpy(w->parents + w->nparents * w->hash_len, id, w->hash_len);
        w->nparents++;
        at += sizeof(parent) - 1 + line;
    }
    return true;
}

/* The id of a commit of content c[0..len): the hash of "commit LEN\0"
 * and c; false when OpenSSL fails. */
static bool commit_id(struct git_pack_walk *w, const uint8_t *c, size_t len, uint8_t *id)
{
    char head[32];
    int k = snprintf(head, sizeof(head), "commit %zu", len);

    return EVP_DigestInit_ex(w->ctx, w->md, NULL) == 1 &&
           EVP_DigestUpdate(w->ctx, head, (size_t)k + 1) == 1 &&
           EVP_DigestUpdate(w->ctx, c, len) == 1 && EVP_DigestFinal_ex(w->ctx, id, NULL) == 1;
}

/* The object at w->start is a commit of content c[0..len) (the walker's
 * now, counted in w->kept): parse it, hash it, keep it (once: a second
 * copy of a commit only records where it is).  MORE, or BAD/TOO_BIG. */
static enum git_pack_result add_commit(struct git_pack_walk *w, uint8_t *c, size_t len)
{
    size_t parent0 = w->nparents;
    uint8_t id[GIT_PACK_HASH_MAX];
    bool oom;

    if (!parse_commit(w, c, len, &oom)) {
        free(c);
        return oom ? out_of_memory(w)
                   : stop(w, GIT_PACK_BAD, "a commit whose tree and parent lines do not parse");
    }
    if (!commit_id(w, c, len, id)) {
        free(c);
        return stop(w, GIT_PACK_TOO_BIG, "OpenSSL cannot hash a commit");
    }
    uint32_t i = find_commit(w, id);
    if (i != NO_COMMIT) {
        w->nparents = parent0;
        w->kept -= len;
        free(c);
        return record(w, i) ? GIT_PACK_MORE : out_of_memory(w);
    }
    if (w->ncommits >= GIT_PACK_MAX_COMMITS) {
        free(c);
        return stop(w, GIT_PACK_TOO_BIG, "more than %u commits", GIT_PACK_MAX_COMMITS);
    }
    if (!table_room(w) ||
        !grow((void **)&w->commits, &w->cap_commits, w->ncommits, sizeof(*w->commits))) {
        free(c);
        return out_of_memory(w);
    }
    struct commit *cm = &w->commits[w->ncommits];
    memcpy(cm->id, id, w->hash_len);
    cm->content = c;
    cm->len = len;
    cm->parent0 = parent0;
    cm->nparents = w->nparents - parent0;
    table_put(w, w->table, w->table_cap, (uint32_t)w->ncommits);
    w->ncommits++;
    return record(w, (uint32_t)(w->ncommits - 1)) ? GIT_PACK_MORE : out_of_memory(w);
}

/* ------------------------------------------------------------ deltas */

/* A size of a delta's header (size encoding, at most DELTA_HDR_MAX bytes)
 * at d[*at..len) into *v; false when it runs past the end or 64 bits. */
static bool delta_size(const uint8_t *d, size_t len, size_t *at, uint64_t *v)
{
    unsigned shift = 0;

    *v = 0;
    for (size_t k = 0; k < DELTA_HDR_MAX && *at < len; k++) {
        uint8_t c = d[(*at)++];
        if ((uint64_t)(c & LOW7) > (UINT64_MAX >> shift))
            return false;
        *v |= (uint64_t)(c & LOW7) << shift;
        if (!(c & MORE_BIT))
            return true;
        shift += VARINT_BITS;
    }
    return false;
}

/* The copy opcode cmd's offset and size from d[*at..len) (the bytes its
 * flags say are there, little-endian); false when they run past the end. */
static bool copy_args(uint8_t cmd, const uint8_t *d, size_t len, size_t *at, uint64_t *off,
                      uint64_t *n)
{
    *off = *n = 0;
    for (unsigned b = 0; b < COPY_OFS_BYTES + COPY_LEN_BYTES; b++) {
        if (!(cmd & 1u << b))
            continue;
        if (*at >= len)
            return false;
        uint64_t byte = d[(*at)++];
        if (b < COPY_OFS_BYTES)
            *off |= byte << (CHAR_BIT * b);
        else
            *n |= byte << (CHAR_BIT * (b - COPY_OFS_BYTES));
    }
    if (*n == 0)
        *n = COPY_LEN_ZERO;
    return true;
}

/* Replay delta d[0..dlen)'s opcodes on src[0..slen) into out[0..tlen)
 * (patch-delta.c); NULL, or what is wrong. */
static const char *replay(const uint8_t *src, size_t slen, const uint8_t *d, size_t dlen, size_t at,
                          uint8_t *out, size_t tlen)
{
    size_t o = 0;

    while (at < dlen) {
        uint8_t cmd = d[at++];
        if (cmd & MORE_BIT) {
            uint64_t off, n;
            if (!copy_args(cmd, d, dlen, &at, &off, &n))
                return "a delta's copy opcode runs past its end";
            if (off > slen || n > slen - off)
                return "a delta copies from outside its base";
            if (n > tlen - o)
                return "a delta makes more than its declared size";
            memcpy(out + o, src + off, n);
            o += n;
        } else if (cmd != 0) {
            if (cmd > tlen - o)
                return "a delta makes more than its declared size";
            if (cmd > dlen - at)
                return "a delta's insert opcode runs past its end";
            memcpy(out + o, d + at, cmd);
            o += cmd;
            at += cmd;
        } else {
            return "a delta's opcode 0 (reserved)";
        }
    }
    return o == tlen ? NULL : "a delta makes less than its declared size";
}

/* The delta in w->data (w->size bytes) applied to commit w->base: the
 * commit it makes, added.  MORE, or BAD/TOO_BIG. */
static enum git_pack_result apply_delta(struct git_pack_walk *w)
{
    const struct commit *b = &w->commits[w->base];
    uint8_t *d = w->data;
    size_t dlen = (size_t)w->size, at = 0;
    uint64_t slen, tlen;

    w->data = NULL;
    if (dlen < DELTA_MIN || !delta_size(d, dlen, &at, &slen) || !delta_size(d, dlen, &at, &tlen)) {
        free(d);
        return stop(w, GIT_PACK_BAD, "a delta whose header does not parse");
    }
    if (slen != b->len) {
        free(d);
        return stop(w, GIT_PACK_BAD, "a delta for a base of %llu bytes on one of %zu",
                    (unsigned long long)slen, b->len);
    }
    if (tlen > w->max_bytes - w->kept) {
        free(d);
        return stop(w, GIT_PACK_TOO_BIG, "a commit of %llu bytes, past max_bytes (%zu) in all",
                    (unsigned long long)tlen, w->max_bytes);
    }
    uint8_t *out = malloc(tlen != 0 ? (size_t)tlen : 1);
    if (out == NULL) {
        free(d);
        return out_of_memory(w);
    }
    const char *wrong = replay(b->content, b->len, d, dlen, at, out, (size_t)tlen);
    free(d);
    w->kept = w->kept - dlen + (size_t)tlen;
    if (wrong != NULL) {
        free(out);
        return stop(w, GIT_PACK_BAD, "%s", wrong);
    }
    return add_commit(w, out, (size_t)tlen);
}

/* ------------------------------------------------------------ objects */

/* The object's data is all inflated: take it.  MORE, DONE (the pack's
 * last object), or BAD/TOO_BIG. */
static enum git_pack_result object_done(struct git_pack_walk *w)
{
    enum git_pack_result r = GIT_PACK_MORE;

    if (w->data_kind == DATA_COMMIT) {
        uint8_t *c = w->data;
        w->data = NULL;
        r = add_commit(w, c, (size_t)w->size);
    } else if (w->data_kind == DATA_DELTA) {
        r = apply_delta(w);
    } else if (w->data_kind == DATA_SKIP && !record(w, NO_COMMIT)) {
        r = out_of_memory(w);
    }
    if (r != GIT_PACK_MORE)
        return r;
    w->seen++;
    w->state = ST_OBJ;
    w->have = 0;
    return w->seen == w->count ? done(w, w->offset) : GIT_PACK_MORE;
}

/* Start inflating the object's data as kind; for a commit or a delta,
 * into a buffer of its size counted in w->kept.  MORE or TOO_BIG. */
static enum git_pack_result start_data(struct git_pack_walk *w, enum data_kind kind)
{
    w->data_kind = kind;
    w->got = 0;
    w->state = ST_DATA;
    if (inflateReset(&w->z) != Z_OK)
        return out_of_memory(w);
    if (kind == DATA_SKIP || kind == DATA_PASS)
        return GIT_PACK_MORE;
    if (w->size > w->max_bytes - w->kept)
        return stop(w, GIT_PACK_TOO_BIG, "a %s of %llu bytes, past max_bytes (%zu) in all",
                    kind == DATA_COMMIT ? "commit" : "delta", (unsigned long long)w->size,
                    w->max_bytes);
    w->data = malloc(w->size != 0 ? (size_t)w->size : 1);
    if (w->data == NULL)
        return out_of_memory(w);
    w->kept += (size_t)w->size;
    return GIT_PACK_MORE;
}

/* A delta's base is the object o of this pack (NULL: not a commit or a
 * tag of it: a tree's or a blob's, or one outside the pack).  MORE (read
 * it, or pass it over when reading all), DONE or TOO_BIG. */
static enum git_pack_result delta_on(struct git_pack_walk *w, const struct object *o)
{
    if (o == NULL)
        return w->read_all ? start_data(w, DATA_PASS) : done(w, w->start);
    if (o->commit == NO_COMMIT) {
        if (w->tags >= GIT_PACK_MAX_TAGS)
            return stop(w, GIT_PACK_TOO_BIG, "more than %u tags", GIT_PACK_MAX_TAGS);
        w->tags++;
        return start_data(w, DATA_SKIP);
    }
    w->base = o->commit;
    return start_data(w, DATA_DELTA);
}

/* The object's type and size are read: what follows.  MORE, or
 * TOO_BIG. */
static enum git_pack_result header_done(struct git_pack_walk *w, int type)
{
    w->have = 0;
    w->ofs = 0;
    switch (type) {
    case OBJ_COMMIT: return start_data(w, DATA_COMMIT);
    case OBJ_TAG:
        if (w->tags >= GIT_PACK_MAX_TAGS)
            return stop(w, GIT_PACK_TOO_BIG, "more than %u tags", GIT_PACK_MAX_TAGS);
        w->tags++;
        return start_data(w, DATA_SKIP);
    case OBJ_TREE:
    case OBJ_BLOB: return start_data(w, DATA_PASS);
    case OBJ_OFS_DELTA: w->state = ST_OFS; return GIT_PACK_MORE;
    default: w->state = ST_REF; return GIT_PACK_MORE;
    }
}

/* Byte c of an object's header.  MORE, DONE (a tree or a blob), BAD. */
static enum git_pack_result obj_byte(struct git_pack_walk *w, uint8_t c)
{
    if (w->have == 0) {
        w->start = w->offset;
        w->offset++;
        w->type = c >> TYPE_SHIFT & TYPE_MASK;
        if (w->type == 0 || w->type == OBJ_RESERVED)
            return stop(w, GIT_PACK_BAD, "type %d is not an object type", w->type);
        if ((w->type == OBJ_TREE || w->type == OBJ_BLOB) && !w->read_all)
            return done(w, w->start);
        w->size = c & SIZE0_MASK;
        w->shift = SIZE0_BITS;
    } else {
        w->offset++;
        if ((uint64_t)(c & LOW7) > (UINT64_MAX >> w->shift))
            return stop(w, GIT_PACK_BAD, "an object size over 64 bits");
        w->size |= (uint64_t)(c & LOW7) << w->shift;
        w->shift += VARINT_BITS;
    }
    w->have++;
    if (!(c & MORE_BIT))
        return header_done(w, w->type);
    if (w->have == HEAD_MAX)
        return stop(w, GIT_PACK_BAD, "an object header longer than %d bytes", HEAD_MAX);
    return GIT_PACK_MORE;
}

/* Byte c of an OFS_DELTA's offset (git's offset encoding: 7 bits a byte,
 * most significant first, plus one for each byte after the first).  MORE,
 * or what the base is: see delta_on; BAD when it is not an earlier
 * object's start. */
static enum git_pack_result ofs_byte(struct git_pack_walk *w, uint8_t c)
{
    w->offset++;
    if (w->have > 0 && w->ofs >= (UINT64_MAX >> VARINT_BITS))
        return stop(w, GIT_PACK_BAD, "an OFS_DELTA offset over 64 bits");
    w->ofs = w->have == 0 ? (uint64_t)(c & LOW7) : (w->ofs + 1) << VARINT_BITS | (c & LOW7);
    w->have++;
    if (c & MORE_BIT) {
        if (w->have == OFS_MAX)
            return stop(w, GIT_PACK_BAD, "an OFS_DELTA offset longer than %d bytes", OFS_MAX);
        return GIT_PACK_MORE;
    }
    /* (the base is after the pack header and before this object) */
    bool inside = w->ofs != 0 && w->ofs <= w->start - PACK_HEAD;
    const struct object *o = inside ? object_at(w, w->start - w->ofs) : NULL;
    /* Reading all, the objects passed over are not kept: a base not
     * found may be one of them. */
    if (o == NULL && (!w->read_all || !inside))
        return stop(w, GIT_PACK_BAD, "an OFS_DELTA %llu bytes back, not at an earlier object",
                    (unsigned long long)w->ofs);
    return delta_on(w, o);
}

/* Bytes p[0..n) of a REF_DELTA's base id; how many were taken in *took.
 * MORE, or what the base is: a commit of the pack, or DONE. */
static enum git_pack_result ref_bytes(struct git_pack_walk *w, const uint8_t *p, size_t n,
                                      size_t *took)
{
    size_t k = w->hash_len - w->have < n ? w->hash_len - w->have : n;

    memcpy(w->acc + w->have, p, k);
    w->have += k;
    w->offset += k;
    *took = k;
    if (w->have < w->hash_len)
        return GIT_PACK_MORE;
    uint32_t c = find_commit(w, w->acc);
    if (c == NO_COMMIT)
        return delta_on(w, NULL);
    struct object o = {0, c};
    return delta_on(w, &o);
}

/* The big-endian 32-bit number at p. */
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bytes p[0..n) of the pack header; how many were taken in *took.  MORE,
 * DONE (no objects), BAD. */
static enum git_pack_result head_bytes(struct git_pack_walk *w, const uint8_t *p, size_t n,
                                       size_t *took)
{
    size_t k = PACK_HEAD - w->have < n ? PACK_HEAD - w->have : n;

    memcpy(w->acc + w->have, p, k);
    w->have += k;
    w->offset += k;
    *took = k;
    if (w->have < PACK_HEAD)
        return GIT_PACK_MORE;
    uint32_t version = be32(w->acc + PACK_SIG_LEN);
    if (memcmp(w->acc, "PACK", PACK_SIG_LEN) != 0)
        return stop(w, GIT_PACK_BAD, "not \"PACK\"");
    if (version != PACK_V2 && version != PACK_V3)
        return stop(w, GIT_PACK_BAD, "version %u, not 2 or 3", version);
    w->count = be32(w->acc + PACK_SIG_LEN + sizeof(version));
    w->state = ST_OBJ;
    w->have = 0;
    return w->count == 0 ? done(w, PACK_HEAD) : GIT_PACK_MORE;
}

/* Inflate the object's data from p[0..n); how many bytes were taken in
 * *took, and in *starved whether it wants more input to go on.  MORE,
 * or what the object's end gives (see object_done); BAD when the data is
 * not zlib or inflates to another size than declared. */
static enum git_pack_result data_bytes(struct git_pack_walk *w, const uint8_t *p, size_t n,
                                       size_t *took, bool *starved)
{
    uint64_t left = w->size - w->got;
    uInt in = n < UINT_MAX ? (uInt)n : UINT_MAX;
    uInt out = left < SCRATCH ? (uInt)left + 1 : SCRATCH;

    w->z.next_in = (Bytef *)p;
    w->z.avail_in = in;
    w->z.next_out = w->scratch;
    w->z.avail_out = out;
    int rc = inflate(&w->z, Z_NO_FLUSH);
    size_t made = out - w->z.avail_out;
    *took = in - w->z.avail_in;
    w->offset += *took;
    *starved = false;
    /* Output past the size first: zlib may have made it before a fault
     * further on, and made it whatever the input's pieces. */
    if (made > left)
        return stop(w, GIT_PACK_BAD, "zlib data that inflates to more than its %llu bytes",
                    (unsigned long long)w->size);
    if (rc == Z_MEM_ERROR)
        return out_of_memory(w);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return stop(w, GIT_PACK_BAD, "zlib data that does not inflate (%s)",
                    w->z.msg != NULL ? w->z.msg : "error");
    if (made > 0 && w->data != NULL)
        memcpy(w->data + w->got, w->scratch, made);
    w->got += made;
    if (rc == Z_STREAM_END) {
        if (w->got != w->size)
            return stop(w, GIT_PACK_BAD, "zlib data that inflates to %llu bytes, not %llu",
                        (unsigned long long)w->got, (unsigned long long)w->size);
        return object_done(w);
    }
    if (w->z.avail_out == 0 || (w->z.avail_in == 0 && *took < n))
        return GIT_PACK_MORE; /* more output, or more of p, to go on with */
    if (w->z.avail_in > 0)
        return stop(w, GIT_PACK_BAD, "zlib data that zlib stops reading");
    *starved = true; /* all of p taken, room left for output: it wants more */
    return GIT_PACK_MORE;
}

enum git_pack_result git_pack_walk_feed(struct git_pack_walk *w, const void *p, size_t n,
                                        size_t *used, const char **why)
{
    static const uint8_t none[1];
    const uint8_t *b = n != 0 ? p : none;
    size_t i = 0;
    enum git_pack_result r = GIT_PACK_MORE;

    while (w->state != ST_OVER && r == GIT_PACK_MORE) {
        size_t took = 1;
        bool starved = false;
        if (w->state == ST_DATA) {
            r = data_bytes(w, b + i, n - i, &took, &starved);
        } else if (i == n) {
            break;
        } else if (w->state == ST_HEAD) {
            r = head_bytes(w, b + i, n - i, &took);
        } else if (w->state == ST_REF) {
            r = ref_bytes(w, b + i, n - i, &took);
        } else {
            r = w->state == ST_OBJ ? obj_byte(w, b[i]) : ofs_byte(w, b[i]);
        }
        i += took;
        if (starved)
            break;
    }
    *used = i;
    if (w->state != ST_OVER) {
        *why = NULL;
        return GIT_PACK_MORE;
    }
    *why = w->result == GIT_PACK_DONE ? NULL : w->why;
    return w->result;
}

/* ------------------------------------------------------------ answers */

/* Whether s is an id of w's kind in lower-case hex; its raw bytes into id. */
static bool id_of(const struct git_pack_walk *w, const char *s, uint8_t *id)
{
    return strlen(s) == 2 * w->hash_len && unhex((const uint8_t *)s, w->hash_len, id);
}

/* Whether old is reached from the commits queued in q[0..n) (seen marks
 * those queued), following parents through the commits of the pack. */
static bool reach(const struct git_pack_walk *w, const uint8_t *old, uint32_t *q, size_t n,
                  uint8_t *seen)
{
    for (size_t head = 0; head < n; head++) {
        const struct commit *c = &w->commits[q[head]];
        for (size_t k = 0; k < c->nparents; k++) {
            const uint8_t *p = w->parents + (c->parent0 + k) * w->hash_len;
            if (memcmp(p, old, w->hash_len) == 0)
                return true;
            uint32_t i = find_commit(w, p);
            if (i != NO_COMMIT && !seen[i]) {
                seen[i] = 1;
                q[n++] = i;
            }
        }
    }
    return false;
}

bool git_pack_descends(const struct git_pack_walk *w, const char *new_hex, const char *old_hex)
{
    uint8_t new_id[GIT_PACK_HASH_MAX], old_id[GIT_PACK_HASH_MAX];

    /* (a walk still under way answers along the commits found so far:
     * a proof only grows with more of them) */
    if ((w->state == ST_OVER && w->result != GIT_PACK_DONE) || !id_of(w, new_hex, new_id) ||
        !id_of(w, old_hex, old_id))
        return false;
    if (memcmp(new_id, old_id, w->hash_len) == 0)
        return true;
    uint32_t start = find_commit(w, new_id);
    if (start == NO_COMMIT)
        return false;
    uint32_t *q = malloc(w->ncommits * sizeof(*q));
    uint8_t *seen = calloc(w->ncommits, 1);
    bool yes = false;
    if (q != NULL && seen != NULL) {
        q[0] = start;
        seen[start] = 1;
        yes = reach(w, old_id, q, 1, seen);
    }
    free(q);
    free(seen);
    return yes;
}

size_t git_pack_commits(const struct git_pack_walk *w)
{
    return w->ncommits;
}

const uint8_t *git_pack_commit_id(const struct git_pack_walk *w, size_t i)
{
    return i < w->ncommits ? w->commits[i].id : NULL;
}

const uint8_t *git_pack_commit_parents(const struct git_pack_walk *w, size_t i, size_t *n)
{
    *n = i < w->ncommits ? w->commits[i].nparents : 0;
    return *n > 0 ? w->parents + w->commits[i].parent0 * w->hash_len : NULL;
}

const uint8_t *git_pack_commit_content(const struct git_pack_walk *w, size_t i, size_t *len)
{
    *len = i < w->ncommits ? w->commits[i].len : 0;
    return i < w->ncommits ? w->commits[i].content : NULL;
}

uint64_t git_pack_walk_offset(const struct git_pack_walk *w)
{
    return w->offset;
}

uint64_t git_pack_walk_end(const struct git_pack_walk *w)
{
    return w->end;
}
