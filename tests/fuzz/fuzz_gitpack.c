/*
 * fuzz_gitpack.c - the commits at the start of a git pack (git/gitpack.c),
 * against packs this file writes itself from a history it makes up, and
 * against any pack, checked by a commit reader and a descent walk of this
 * file's own; fed whole, in pieces and a byte at a time.
 *
 * An input that starts with "PACK" is raw: it is the pack itself (so a
 * pack of tests/data/git-pack/ is a seed as it is), read up to the first
 * tree and read all (git_pack_walk_read_all); the cut points and a small
 * max_bytes are read from its bytes backwards.  Any other input is built:
 * its bytes describe a history (SHA-1 or SHA-256; up to 12 commits, each
 * with up to 3 parents among the commits before it or 3 ids from outside;
 * messages that are one text with a few bytes changed, so that deltas
 * find copies) and a pack of it: the commits in any order, each whole, an
 * OFS_DELTA on any object before it (a tag too) or a REF_DELTA on a
 * commit before it, from a delta encoder of this file's own (copies and
 * inserts as the input chooses; now and then a fault: opcode 0, a copy
 * past its base, a result or a base of the wrong size, each BAD); tags
 * between them; zlib at any level; then an end: the object count, a tree,
 * a blob, a REF_DELTA on an id from outside (a thin pack), or a count
 * that promises more objects than there are; commits after that end; now
 * and then one byte of it flipped (a flaw); a max_bytes, large, small or
 * within two bytes of what one of the commits needs to be kept; whether
 * to read it all; then the cut points.
 *
 * Properties:
 *   1. fed whole, in the input's pieces and a byte at a time, the walker
 *      gives the same result, takes the same bytes and reads to the same
 *      offsets (but for BAD in zlib data, where zlib's read-ahead may
 *      differ), finds the same commits (ids in the same order) and gives
 *      the same why; MORE takes every byte; fed again after DONE, BAD or
 *      TOO_BIG it takes none and says the same;
 *   2. every commit it finds has for id the hash of "commit LEN\0" and its
 *      content (hashed here), and for parents those this file's reader
 *      takes from that content, which it must read; what it keeps is at
 *      most max_bytes; a why is "object at offset N: ..." (N at most the
 *      bytes read) or "the pack header: ...";
 *   3. git_pack_descends(new, old) is this file's walk over the commits
 *      found (new == old, or old is a parent of a commit reached from new
 *      through the commits found) after DONE or while MORE (along the
 *      commits found so far), and false after BAD or TOO_BIG, for
 *      every pair of the ids found, their parents and the outside ids;
 *   4. a built pack without a flaw is read exactly: the result its end
 *      calls for (DONE at the tree, blob or thin delta, or at the count;
 *      read all, DONE at the count, past them; MORE when the count
 *      promises more; TOO_BIG at the first commit past max_bytes, a delta
 *      held while it is applied counted too; BAD at the first delta with a
 *      fault), the commits written before that end, in pack order, each
 *      with the content written and the id computed here when the history
 *      was made, none written after it;
 *   5. a raw pack read all finds first the commits it finds up to the
 *      first tree (and, both DONE, no fewer); read with a small max_bytes
 *      it is TOO_BIG or read exactly as with a large one.
 */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "gitpack.h"

#define PACK_MAX    65536   /* bytes of a pack */
#define BIG         1000000 /* a max_bytes every pack here fits */
#define COMMITS_MAX 12      /* commits of a made-up history */
#define PARENTS_MAX 3
#define OUTSIDE_N   3                     /* ids of commits outside the pack */
#define MSG_MAX     400                   /* bytes of the shared message text */
#define TEXT_MAX    2048                  /* bytes of a commit's or a tag's content */
#define OBJS_MAX    (3 * COMMITS_MAX + 1) /* a tag, a delta on it, the commit; the end */
#define PIECES_MAX  32
#define ASK_MAX     12 /* ids asked about, as new and as old */
#define TRAILER     20 /* the checksum bytes after the objects (not read) */
#define INSERT_MAX  127
#define HEX_MAX     (2 * GIT_PACK_HASH_MAX + 1)
#define NOWHERE     SIZE_MAX

enum { T_COMMIT = 1, T_TREE = 2, T_BLOB = 3, T_TAG = 4, T_OFS = 6, T_REF = 7 };

/* A delta's fault: none, opcode 0 at its end, a copy from just past its
 * base's end, its result declared a byte longer or shorter, its base's
 * size a byte more. */
enum fault { F_NONE, F_ZERO, F_OUTSIDE, F_LONG, F_SHORT, F_SRC, F_KINDS };

/* How a built pack ends. */
enum ending { END_COUNT, END_TREE, END_BLOB, END_THIN, END_SHORT, END_KINDS };

/* ------------------------------------------------------------ ids */

static size_t hash_len(enum git_hash_kind k)
{
    return k == GIT_HASH_SHA256 ? 32 : 20;
}

/* The id git gives a commit of content c[0..len) into id. */
static void commit_id(enum git_hash_kind k, const uint8_t *c, size_t len, uint8_t *id)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    char head[32];
    int hl = snprintf(head, sizeof(head), "commit %zu", len);

    CHECK(ctx != NULL, "EVP_MD_CTX_new");
    EVP_DigestInit_ex(ctx, k == GIT_HASH_SHA256 ? EVP_sha256() : EVP_sha1(), NULL);
    EVP_DigestUpdate(ctx, head, (size_t)hl + 1);
    EVP_DigestUpdate(ctx, c, len);
    EVP_DigestFinal_ex(ctx, id, NULL);
    EVP_MD_CTX_free(ctx);
}

static void to_hex(const uint8_t *raw, size_t len, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[2 * len] = '\0';
}

/* ------------------------------------------------------------ the reader */

/* The value of lower-case hex digit c, or -1. */
static int hexval(uint8_t c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Whether c[at..len) is word, 2 * hl lower-case hex digits and LF, with
 * content after it; the id into id. */
static bool ref_line(const uint8_t *c, size_t len, size_t at, const char *word, size_t hl,
                     uint8_t *id)
{
    size_t wl = strlen(word);

    if (at + wl + 2 * hl + 1 >= len || memcmp(c + at, word, wl) != 0 || c[at + wl + 2 * hl] != '\n')
        return false;
    for (size_t i = 0; i < hl; i++) {
        int a = hexval(c[at + wl + 2 * i]), b = hexval(c[at + wl + 2 * i + 1]);
        if (a < 0 || b < 0)
            return false;
        id[i] = (uint8_t)(a * 16 + b);
    }
    return true;
}

/* Whether content c[0..len) reads as a commit (git's parse_commit_buffer,
 * as strict as gitpack.h says: a tree line and parent lines of lower-case
 * ids, each with content after it, no malformed "parent " line) whose
 * parents are exactly want[0..n) (hl bytes each). */
static bool ref_commit(const uint8_t *c, size_t len, size_t hl, const uint8_t *want, size_t n)
{
    uint8_t id[GIT_PACK_HASH_MAX];
    size_t at = 5 + 2 * hl + 1, k = 0;

    if (!ref_line(c, len, 0, "tree ", hl, id))
        return false;
    while (len - at >= 7 && memcmp(c + at, "parent ", 7) == 0) {
        if (!ref_line(c, len, at, "parent ", hl, id) || k >= n ||
            memcmp(id, want + k * hl, hl) != 0)
            return false;
        k++;
        at += 7 + 2 * hl + 1;
    }
    return k == n;
}

/* ------------------------------------------------------------ a run */

struct run {
    struct git_pack_walk *w;
    enum git_pack_result res;
    size_t used;
    const char *why;
};

/* A new walker in o (reading all of the pack when all) fed p[0..n) cut at
 * cuts[0..k) (each piece a heap copy of its own), or a byte at a time,
 * until it is not MORE. */
static void feed(const uint8_t *p, size_t n, const size_t *cuts, size_t k, bool bytes,
                 enum git_hash_kind kind, size_t max, bool all, struct run *o)
{
    size_t off = 0, c = 0;

    o->w = git_pack_walk_new(kind, max);
    CHECK(o->w != NULL, "git_pack_walk_new");
    if (all)
        git_pack_walk_read_all(o->w);
    o->res = GIT_PACK_MORE;
    o->why = NULL;
    while (off < n && o->res == GIT_PACK_MORE) {
        size_t end = bytes ? off + 1 : c < k ? cuts[c++] : n, len = end - off, used;
        uint8_t *piece = malloc(len);
        memcpy(piece, p + off, len);
        o->res = git_pack_walk_feed(o->w, piece, len, &used, &o->why);
        free(piece);
        CHECK(used <= len, "took %zu of %zu", used, len);
        CHECK(o->res != GIT_PACK_MORE || used == len, "MORE after %zu of %zu bytes", used, len);
        off += used;
    }
    o->used = off;
}

/* 1: runs a and b are the same. */
static void same_runs(const struct run *a, const struct run *b, size_t hl, const char *how)
{
    /* (BAD in zlib data: zlib may have read a few bytes more or less) */
    CHECK(a->res == b->res && (a->used == b->used || a->res == GIT_PACK_BAD),
          "%s: %d after %zu bytes, whole %d after %zu", how, b->res, b->used, a->res, a->used);
    CHECK((git_pack_walk_offset(a->w) == git_pack_walk_offset(b->w) || a->res == GIT_PACK_BAD) &&
              git_pack_walk_end(a->w) == git_pack_walk_end(b->w),
          "%s: other offsets", how);
    CHECK((a->why == NULL) == (b->why == NULL) && (a->why == NULL || strcmp(a->why, b->why) == 0),
          "%s: why %s, whole %s", how, b->why ? b->why : "-", a->why ? a->why : "-");
    CHECK(git_pack_commits(a->w) == git_pack_commits(b->w), "%s: %zu commits, whole %zu", how,
          git_pack_commits(b->w), git_pack_commits(a->w));
    for (size_t i = 0; i < git_pack_commits(a->w); i++)
        CHECK(memcmp(git_pack_commit_id(a->w, i), git_pack_commit_id(b->w, i), hl) == 0,
              "%s: commit %zu differs", how, i);
}

/* 1 and 2: what one run must be on its own. */
static void check_run(const struct run *o, const uint8_t *p, size_t n, enum git_hash_kind k,
                      size_t max)
{
    size_t hl = hash_len(k), kept = 0, used;
    const char *why;
    uint8_t id[GIT_PACK_HASH_MAX];

    if (o->res == GIT_PACK_MORE)
        CHECK(o->used == n && o->why == NULL, "MORE after %zu of %zu bytes", o->used, n);
    if (o->res == GIT_PACK_BAD || o->res == GIT_PACK_TOO_BIG) {
        unsigned long long at;
        CHECK(o->why != NULL, "BAD or TOO_BIG without a why");
        CHECK(strncmp(o->why, "the pack header: ", 17) == 0 ||
                  (sscanf(o->why, "object at offset %llu: ", &at) == 1 &&
                   at <= git_pack_walk_offset(o->w)),
              "why \"%s\" names no offset read", o->why);
    }
    if (o->res != GIT_PACK_MORE) {
        enum git_pack_result again = git_pack_walk_feed(o->w, p, n, &used, &why);
        CHECK(again == o->res && used == 0 && why == o->why, "fed again: %d, %zu bytes", again,
              used);
    }
    for (size_t i = 0; i < git_pack_commits(o->w); i++) {
        size_t len, np;
        const uint8_t *c = git_pack_commit_content(o->w, i, &len);
        const uint8_t *par = git_pack_commit_parents(o->w, i, &np);
        commit_id(k, c, len, id);
        CHECK(memcmp(id, git_pack_commit_id(o->w, i), hl) == 0,
              "commit %zu's id is not the hash of its content", i);
        CHECK(ref_commit(c, len, hl, par, np), "commit %zu: its %zu parents are not its content's",
              i, np);
        kept += len;
    }
    CHECK(kept <= max, "%zu bytes of commits kept, max_bytes %zu", kept, max);
}

/* ------------------------------------------------------------ descends */

static size_t sort_hl;                     /* the id length qsort compares */
static const struct git_pack_walk *sort_w; /* ... of this walker's commits */

static int by_id(const void *a, const void *b)
{
    return memcmp(git_pack_commit_id(sort_w, *(const size_t *)a),
                  git_pack_commit_id(sort_w, *(const size_t *)b), sort_hl);
}

/* The index of the commit found with id id (ord: their indices sorted by
 * id, n of them), or NOWHERE. */
static size_t find(const struct run *o, const size_t *ord, size_t n, size_t hl, const uint8_t *id)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(git_pack_commit_id(o->w, ord[mid]), id, hl);
        if (c == 0)
            return ord[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NOWHERE;
}

/* Which of asks[0..n) are a parent of a commit reached from commit start
 * through the commits found (a walk of this file's own), into hit. */
static void reached(const struct run *o, const size_t *ord, size_t found, size_t hl, size_t start,
                    const uint8_t (*asks)[32], size_t n, bool *hit)
{
    bool *seen = calloc(found, 1);
    size_t *queue = malloc(found * sizeof(*queue)), qn = 1;

    CHECK(seen != NULL && queue != NULL, "out of memory");
    queue[0] = start;
    seen[start] = true;
    for (size_t q = 0; q < qn; q++) {
        size_t np;
        const uint8_t *par = git_pack_commit_parents(o->w, queue[q], &np);
        for (size_t j = 0; j < np; j++) {
            for (size_t b = 0; b < n; b++)
                hit[b] = hit[b] || memcmp(par + j * hl, asks[b], hl) == 0;
            size_t i = find(o, ord, found, hl, par + j * hl);
            if (i != NOWHERE && !seen[i]) {
                seen[i] = true;
                queue[qn++] = i;
            }
        }
    }
    free(seen);
    free(queue);
}

/* 3: git_pack_descends against this file's walk, for every pair of the
 * ids asks[0..n). */
static void check_descends(const struct run *o, enum git_hash_kind k, const uint8_t (*asks)[32],
                           size_t n)
{
    size_t hl = hash_len(k), found = git_pack_commits(o->w);
    size_t *ord = malloc((found + 1) * sizeof(*ord));
    char nh[HEX_MAX], oh[HEX_MAX];

    CHECK(ord != NULL, "out of memory");
    for (size_t i = 0; i < found; i++)
        ord[i] = i;
    sort_hl = hl;
    sort_w = o->w;
    qsort(ord, found, sizeof(*ord), by_id);
    /* DONE, or still under way (along the commits found so far) */
    bool answers = o->res == GIT_PACK_DONE || o->res == GIT_PACK_MORE;
    for (size_t a = 0; a < n; a++) {
        bool hit[ASK_MAX] = {false};
        size_t start = find(o, ord, found, hl, asks[a]);
        if (answers && start != NOWHERE)
            reached(o, ord, found, hl, start, asks, n, hit);
        for (size_t b = 0; b < n; b++) {
            bool want = answers && (memcmp(asks[a], asks[b], hl) == 0 || hit[b]);
            to_hex(asks[a], hl, nh);
            to_hex(asks[b], hl, oh);
            CHECK(git_pack_descends(o->w, nh, oh) == want, "descends(%s, %s) is not %d", nh, oh,
                  want);
        }
    }
    free(ord);
}

/* The ids to ask about: those found, their parents, then extra[0..ne),
 * ASK_MAX at most, into asks; how many. */
static size_t ask_ids(const struct run *o, size_t hl, const uint8_t (*extra)[32], size_t ne,
                      uint8_t (*asks)[32])
{
    size_t n = 0;

    for (size_t i = 0; i < git_pack_commits(o->w) && n < ASK_MAX; i++) {
        size_t np;
        const uint8_t *par = git_pack_commit_parents(o->w, i, &np);
        memcpy(asks[n++], git_pack_commit_id(o->w, i), hl);
        for (size_t j = 0; j < np && n < ASK_MAX; j++)
            memcpy(asks[n++], par + j * hl, hl);
    }
    for (size_t i = 0; i < ne && n < ASK_MAX; i++)
        memcpy(asks[n++], extra[i], hl);
    return n;
}

/* ------------------------------------------------------------ the writer */

struct commit {
    uint8_t id[GIT_PACK_HASH_MAX];
    uint8_t text[TEXT_MAX];
    size_t len;
};

/* An object written: where, and what it means to the walker. */
struct obj {
    size_t at;
    int type;         /* T_COMMIT, T_TAG, or the ending's */
    size_t commit;    /* the commit it is (whole or a delta), or NOWHERE */
    size_t delta_len; /* a delta's bytes */
    enum fault fault; /* a delta's */
};

struct built {
    enum git_hash_kind k;
    size_t hl;
    struct commit c[COMMITS_MAX];
    size_t n;
    uint8_t outside[OUTSIDE_N][32];
    uint8_t pack[PACK_MAX];
    size_t len;
    struct obj objs[OBJS_MAX];
    size_t nobjs;
    enum ending ending;
    size_t end_obj; /* the object that ends it, or NOWHERE (the count) */
    bool flawed, full;
};

/* An object header of type and size at the end of b; false when full. */
static bool put_head(struct built *b, int type, size_t size)
{
    uint8_t c = (uint8_t)(type << 4 | (size & 15));

    if (b->len + 16 > PACK_MAX)
        return false;
    for (size >>= 4; size != 0; size >>= 7) {
        b->pack[b->len++] = c | 0x80;
        c = size & 0x7f;
    }
    b->pack[b->len++] = c;
    return true;
}

/* data[0..len) deflated at level at the end of b; false when full. */
static bool put_zlib(struct built *b, const uint8_t *data, size_t len, int level)
{
    uLongf zl = PACK_MAX - b->len;

    if (compressBound(len) + TRAILER > zl)
        return false;
    CHECK(compress2(b->pack + b->len, &zl, data, len, level) == Z_OK, "compress2");
    b->len += zl;
    return true;
}

/* An OFS_DELTA's header of size and its offset ofs back (git's offset
 * encoding) at the end of b; false when full. */
static bool put_ofs(struct built *b, int type, size_t size, size_t ofs)
{
    uint8_t v[16];
    size_t k = sizeof(v) - 1;

    v[k] = ofs & 0x7f;
    while (ofs >>= 7)
        v[--k] = (uint8_t)(0x80 | (--ofs & 0x7f));
    if (!put_head(b, type, size) || b->len + sizeof(v) > PACK_MAX)
        return false;
    memcpy(b->pack + b->len, v + k, sizeof(v) - k);
    b->len += sizeof(v) - k;
    return true;
}

/* Note object i of b: at, type, commit, delta_len, fault. */
static void note(struct built *b, size_t at, int type, size_t commit, size_t delta_len,
                 enum fault fault)
{
    CHECK(b->nobjs < OBJS_MAX, "more objects than the writer holds");
    b->objs[b->nobjs++] = (struct obj){at, type, commit, delta_len, fault};
}

/* v in a delta header's size encoding at d[*k]. */
static void put_varint(uint8_t *d, size_t *k, size_t v)
{
    for (; v >= 0x80; v >>= 7)
        d[(*k)++] = (uint8_t)(0x80 | (v & 0x7f));
    d[(*k)++] = (uint8_t)v;
}

/* A delta from s[0..sl) to t[0..tl) into d, as the input says: copies of
 * the longest match found from where it looks, inserts of up to 127 bytes;
 * with fault f; its length. */
static size_t encode_delta(struct input *in, const uint8_t *s, size_t sl, const uint8_t *t,
                           size_t tl, enum fault f, uint8_t *d)
{
    size_t k = 0, pos = 0;

    put_varint(d, &k, sl + (f == F_SRC));
    put_varint(d, &k, tl + (f == F_LONG || f == F_OUTSIDE) - (f == F_SHORT));
    while (pos < tl) {
        uint8_t c = take(in);
        size_t best = 0, off = 0;
        if (c & 1)
            for (size_t o = (c >> 1) % (sl + 1); o < sl && best < tl - pos; o++) {
                size_t m = 0;
                while (o + m < sl && pos + m < tl && s[o + m] == t[pos + m])
                    m++;
                if (m > best) {
                    best = m;
                    off = o;
                }
            }
        if (best >= 1) {
            uint8_t *op = d + k++;
            *op = 0x80;
            for (unsigned i = 0; i < 4; i++)
                if (off >> (8 * i) & 0xff) {
                    *op |= (uint8_t)(1u << i);
                    d[k++] = (uint8_t)(off >> (8 * i));
                }
            for (unsigned i = 0; i < 3; i++)
                if (best >> (8 * i) & 0xff) {
                    *op |= (uint8_t)(0x10u << i);
                    d[k++] = (uint8_t)(best >> (8 * i));
                }
            pos += best;
        } else {
            size_t len = 1 + (size_t)(c >> 1) % INSERT_MAX;
            if (len > tl - pos)
                len = tl - pos;
            d[k++] = (uint8_t)len;
            memcpy(d + k, t + pos, len);
            k += len;
            pos += len;
        }
    }
    if (f == F_ZERO)
        d[k++] = 0;
    if (f == F_OUTSIDE) { /* one byte from sl: offset bytes 1 and 2, size byte 1 */
        d[k++] = 0x80 | 0x01 | 0x02 | 0x10;
        d[k++] = (uint8_t)sl;
        d[k++] = (uint8_t)(sl >> 8);
        d[k++] = 1;
    }
    return k;
}

/* The history: commit i's parents among commits before it and the
 * outside ids, its message the shared text with a few bytes changed. */
static void make_history(struct input *in, struct built *b)
{
    uint8_t text[MSG_MAX];
    size_t tl = take(in) % MSG_MAX;
    char tree[HEX_MAX], hex[HEX_MAX];

    for (size_t i = 0; i < tl; i++)
        text[i] = take(in);
    for (size_t j = 0; j < OUTSIDE_N; j++)
        for (size_t i = 0; i < b->hl; i++)
            b->outside[j][i] = (uint8_t)(0xa0 + 16 * j + i);
    memset(tree, '4', 2 * b->hl);
    tree[2 * b->hl] = '\0';
    b->n = 1 + take(in) % COMMITS_MAX;
    for (size_t i = 0; i < b->n; i++) {
        struct commit *c = &b->c[i];
        size_t np = take(in) % (PARENTS_MAX + 1);
        int k = snprintf((char *)c->text, TEXT_MAX, "tree %s\n", tree);
        for (size_t j = 0; j < np; j++) {
            uint8_t p = take(in);
            const uint8_t *id = i > 0 && p % 4 != 0 ? b->c[p % i].id : b->outside[p % OUTSIDE_N];
            to_hex(id, b->hl, hex);
            k += snprintf((char *)c->text + k, TEXT_MAX - (size_t)k, "parent %s\n", hex);
        }
        k += snprintf((char *)c->text + k, TEXT_MAX - (size_t)k,
                      "author F <f@example.com> 1700000000 +0000\n"
                      "committer F <f@example.com> 1700000000 +0000\n\ncommit %zu\n",
                      i);
        memcpy(c->text + k, text, tl);
        for (size_t m = take(in) % 4; m > 0 && tl > 0; m--)
            c->text[(size_t)k + take(in) % tl] = take(in);
        c->len = (size_t)k + tl;
        commit_id(b->k, c->text, c->len, c->id);
    }
}

/* Commit ci written as the input says (whole, an OFS_DELTA on an object
 * before it, a REF_DELTA on a commit before it), maybe a tag first. */
static bool write_commit(struct input *in, struct built *b, size_t ci)
{
    static uint8_t d[3 * TEXT_MAX];
    const struct commit *c = &b->c[ci];
    uint8_t how = take(in);
    int level = take(in) % 10;
    enum fault fault = how >> 2 & 1 ? (enum fault)(take(in) % (F_KINDS * 4)) : F_NONE;
    size_t at;

    if (fault >= F_KINDS)
        fault = F_NONE;
    if (how >> 5 == 0 && b->nobjs + 3 < OBJS_MAX) {
        char tag[TEXT_MAX], hex[HEX_MAX];
        to_hex(c->id, b->hl, hex);
        int tl = snprintf(tag, sizeof(tag), "object %s\ntype commit\ntag t%zu\n\nt\n", hex, ci);
        at = b->len;
        if (!put_head(b, T_TAG, (size_t)tl) || !put_zlib(b, (uint8_t *)tag, (size_t)tl, level))
            return false;
        note(b, at, T_TAG, NOWHERE, 0, F_NONE);
    }
    /* bases: any object before it (OFS), a commit before it (REF) */
    size_t base = b->nobjs > 0 ? take(in) % b->nobjs : NOWHERE;
    const uint8_t *src = NULL;
    size_t sl = 0;
    if (base != NOWHERE && b->objs[base].commit != NOWHERE) {
        src = b->c[b->objs[base].commit].text;
        sl = b->c[b->objs[base].commit].len;
    }
    at = b->len;
    if ((how & 3) == 3 && base != NOWHERE && src == NULL && b->nobjs + 2 < OBJS_MAX) {
        /* an OFS_DELTA on a tag: a tag, passed over (its delta not applied) */
        static const uint8_t delta[] = {0x01, 0x02, 0x02, 't', '\n'};
        if (!put_ofs(b, T_OFS, sizeof(delta), at - b->objs[base].at) ||
            !put_zlib(b, delta, sizeof(delta), level))
            return false;
        note(b, at, T_TAG, NOWHERE, 0, F_NONE);
        at = b->len;
    }
    if ((how & 3) == 1 && base != NOWHERE && src != NULL) { /* OFS_DELTA on a commit */
        size_t dl = encode_delta(in, src, sl, c->text, c->len, fault, d);
        if (!put_ofs(b, T_OFS, dl, at - b->objs[base].at) || !put_zlib(b, d, dl, level))
            return false;
        note(b, at, T_COMMIT, ci, dl, fault);
        return true;
    }
    if ((how & 3) == 2 && src != NULL) { /* REF_DELTA on a commit */
        size_t dl = encode_delta(in, src, sl, c->text, c->len, fault, d);
        if (!put_head(b, T_REF, dl) || b->len + b->hl > PACK_MAX)
            return false;
        memcpy(b->pack + b->len, b->c[b->objs[base].commit].id, b->hl);
        b->len += b->hl;
        if (!put_zlib(b, d, dl, level))
            return false;
        note(b, at, T_COMMIT, ci, dl, fault);
        return true;
    }
    if (!put_head(b, T_COMMIT, c->len) || !put_zlib(b, c->text, c->len, level))
        return false;
    note(b, at, T_COMMIT, ci, 0, F_NONE);
    return true;
}

/* The object that ends the walk (a tree, a blob, a REF_DELTA on an id
 * from outside); false when full. */
static bool write_end(struct built *b)
{
    static const uint8_t tree[] = "100644 a\0aaaaaaaaaaaaaaaaaaaa";
    size_t at = b->len;
    bool ok;

    if (b->ending == END_TREE || b->ending == END_BLOB) {
        int type = b->ending == END_TREE ? T_TREE : T_BLOB;
        ok = put_head(b, type, sizeof(tree) - 1) && put_zlib(b, tree, sizeof(tree) - 1, 6);
    } else {
        static const uint8_t delta[] = {0x05, 0x01, 0x01, 'x'};
        ok = put_head(b, T_REF, sizeof(delta)) && b->len + b->hl <= PACK_MAX;
        if (ok) {
            memcpy(b->pack + b->len, b->outside[0], b->hl);
            b->len += b->hl;
            ok = put_zlib(b, delta, sizeof(delta), 6);
        }
    }
    if (ok) {
        b->end_obj = b->nobjs;
        note(b, at,
             b->ending == END_TREE   ? T_TREE
             : b->ending == END_BLOB ? T_BLOB
                                     : T_REF,
             NOWHERE, 0, F_NONE);
    }
    return ok;
}

/* The whole pack as the input says. */
static void build(struct input *in, struct built *b)
{
    size_t order[COMMITS_MAX];

    b->k = take(in) & 1 ? GIT_HASH_SHA256 : GIT_HASH_SHA1;
    b->hl = hash_len(b->k);
    b->len = 12;
    b->nobjs = 0;
    b->full = false;
    b->end_obj = NOWHERE;
    memcpy(b->pack, "PACK\0\0\0\2", 8);
    if (take(in) & 1)
        b->pack[7] = 3;
    make_history(in, b);
    b->ending = (enum ending)(take(in) % END_KINDS);
    size_t before = b->ending == END_COUNT || b->ending == END_SHORT ? b->n : take(in) % (b->n + 1);
    for (size_t i = 0; i < b->n; i++)
        order[i] = i;
    for (size_t i = b->n; i > 1; i--) {
        size_t j = take(in) % i, t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < b->n && !b->full; i++) {
        if (i == before && !write_end(b))
            b->full = true;
        if (!b->full && !write_commit(in, b, order[i]))
            b->full = true;
    }
    if (!b->full && before == b->n && b->ending != END_COUNT && b->ending != END_SHORT &&
        !write_end(b))
        b->full = true;
    uint32_t count = (uint32_t)b->nobjs + (b->ending == END_SHORT ? 1 + take(in) % 3 : 0);
    b->pack[8] = (uint8_t)(count >> 24);
    b->pack[9] = (uint8_t)(count >> 16);
    b->pack[10] = (uint8_t)(count >> 8);
    b->pack[11] = (uint8_t)count;
    if (b->ending != END_SHORT) { /* a pack cut short has no trailer yet */
        memset(b->pack + b->len, 0, TRAILER);
        b->len += TRAILER;
    }
    b->flawed = take(in) % 8 == 0;
    if (b->flawed) {
        size_t at = ((size_t)take(in) << 8 | take(in)) % b->len;
        b->pack[at] ^= (uint8_t)(take(in) | 1);
    }
}

/* 4: a built pack without a flaw (and not cut short by a full buffer) is
 * read exactly (all: to its end, past the object that ends it else). */
static void check_built(const struct built *b, const struct run *o, size_t max, bool all)
{
    enum git_pack_result want = GIT_PACK_DONE;
    size_t kept = 0, stop = b->nobjs, found = 0;

    for (size_t i = 0; i < b->nobjs; i++) {
        const struct obj *ob = &b->objs[i];
        if (i == b->end_obj && !all) {
            stop = i;
            break;
        }
        if (ob->commit == NOWHERE)
            continue;
        size_t len = b->c[ob->commit].len;
        size_t made =
            len + (ob->fault == F_LONG || ob->fault == F_OUTSIDE) - (ob->fault == F_SHORT);
        if (ob->delta_len > max - kept ||
            (ob->fault != F_SRC && made > max - kept - ob->delta_len)) {
            want = GIT_PACK_TOO_BIG;
            stop = i;
            break;
        }
        if (ob->fault != F_NONE) {
            want = GIT_PACK_BAD;
            stop = i;
            break;
        }
        kept += len;
    }
    if (want == GIT_PACK_DONE && b->ending == END_SHORT)
        want = GIT_PACK_MORE;
    CHECK(o->res == want, "result %d (%s), the pack written calls for %d", o->res,
          o->why ? o->why : "-", want);
    for (size_t i = 0; i < stop; i++) {
        const struct obj *ob = &b->objs[i];
        if (ob->commit == NOWHERE)
            continue;
        const struct commit *c = &b->c[ob->commit];
        size_t len;
        const uint8_t *got = git_pack_commit_content(o->w, found, &len);
        CHECK(got != NULL && len == c->len && memcmp(got, c->text, len) == 0 &&
                  memcmp(git_pack_commit_id(o->w, found), c->id, b->hl) == 0,
              "commit %zu written at %zu is not found as written", ob->commit, ob->at);
        found++;
    }
    CHECK(git_pack_commits(o->w) == found, "%zu commits found, %zu written before the end",
          git_pack_commits(o->w), found);
    if (want == GIT_PACK_DONE)
        CHECK(git_pack_walk_end(o->w) ==
                  (b->end_obj != NOWHERE && !all ? b->objs[b->end_obj].at : b->len - TRAILER),
              "DONE at %llu", (unsigned long long)git_pack_walk_end(o->w));
    if (want == GIT_PACK_TOO_BIG || want == GIT_PACK_BAD) {
        char head[64];
        snprintf(head, sizeof(head), "object at offset %zu: ", b->objs[stop].at);
        CHECK(strncmp(o->why, head, strlen(head)) == 0, "%d: %s, not at %zu", want, o->why,
              b->objs[stop].at);
    }
}

/* A max_bytes as the input says: large; small; or within two bytes of
 * what one of the commits needs to be kept (those before it, and its
 * delta while it is applied). */
static size_t pick_max(struct input *in, const struct built *b)
{
    uint8_t how = take(in);
    size_t kept = 0, need[OBJS_MAX], n = 0;

    if (how % 4 == 0)
        return (size_t)take(in) << 4 | take(in);
    if (how % 4 != 1)
        return BIG;
    for (size_t i = 0; i < b->nobjs; i++)
        if (b->objs[i].commit != NOWHERE) {
            size_t len = b->c[b->objs[i].commit].len;
            need[n++] = kept + b->objs[i].delta_len + len;
            kept += len;
        }
    if (n == 0)
        return BIG;
    size_t at = need[take(in) % n], adj = take(in) % 5;
    return at + adj >= 2 ? at + adj - 2 : 0;
}

/* ------------------------------------------------------------ the cuts */

/* Up to PIECES_MAX cut points in (0, n), increasing, into cuts; how many. */
static size_t cut_points(struct input *in, size_t n, size_t *cuts)
{
    size_t k = 0, at = 0;

    while (in->n > 0 && k < PIECES_MAX && n > 0) {
        at += (size_t)take(in) % 256 + 1;
        if (at >= n)
            break;
        cuts[k++] = at;
    }
    return k;
}

/* ------------------------------------------------------------ the properties */

/* 1 to 3 (4 for the built pack b, NULL for a raw one) for p[0..n) read
 * (all of it when all) whole, cut at cuts[0..k) and a byte at a time; the
 * whole run in *whole, its walker the caller's to free. */
static void check_mode(const uint8_t *p, size_t n, enum git_hash_kind kind, size_t max, bool all,
                       const size_t *cuts, size_t k, const struct built *b, struct run *whole)
{
    static uint8_t asks[ASK_MAX][32];
    size_t hl = hash_len(kind);
    struct run pieces, bytes;

    feed(p, n, NULL, 0, false, kind, max, all, whole);
    feed(p, n, cuts, k, false, kind, max, all, &pieces);
    feed(p, n, NULL, 0, true, kind, max, all, &bytes);
    /* 1, 2 */
    check_run(whole, p, n, kind, max);
    same_runs(whole, &pieces, hl, "in pieces");
    same_runs(whole, &bytes, hl, "a byte at a time");
    git_pack_walk_free(pieces.w);
    git_pack_walk_free(bytes.w);
    /* 3 */
    size_t na = ask_ids(whole, hl, b != NULL ? (const uint8_t(*)[32])b->outside : NULL,
                        b != NULL ? OUTSIDE_N : 0, asks);
    for (size_t i = 0; b != NULL && i < b->n && na < ASK_MAX; i++)
        memcpy(asks[na++], b->c[i].id, hl);
    check_descends(whole, kind, (const uint8_t(*)[32])asks, na);
    /* 4 */
    if (b != NULL && !b->flawed && !b->full)
        check_built(b, whole, max, all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct built b;
    static uint8_t back[PACK_MAX];
    struct input in = {data, size}, choices;
    size_t cuts[PIECES_MAX], k, max = BIG, n;
    const uint8_t *p;
    enum git_hash_kind kind;
    struct run whole;
    bool all = false, raw = size >= 4 && memcmp(data, "PACK", 4) == 0;

    if (raw) {
        p = data;
        n = size < PACK_MAX ? size : PACK_MAX;
        size_t bn = size < sizeof(back) ? size : sizeof(back);
        for (size_t i = 0; i < bn; i++)
            back[i] = data[size - 1 - i];
        choices = (struct input){back, bn};
        kind = take(&choices) & 1 ? GIT_HASH_SHA256 : GIT_HASH_SHA1;
    } else {
        build(&in, &b);
        max = pick_max(&in, &b);
        p = b.pack;
        n = b.len;
        kind = b.k;
        all = take(&in) & 1;
        choices = in;
    }
    k = cut_points(&choices, n, cuts);
    size_t hl = hash_len(kind);

    check_mode(p, n, kind, max, all, cuts, k, raw ? NULL : &b, &whole);
    if (raw) {
        struct run rest, small;
        /* read all: the commits found up to the first tree first */
        check_mode(p, n, kind, max, true, cuts, k, NULL, &rest);
        size_t a = git_pack_commits(whole.w), z = git_pack_commits(rest.w);
        for (size_t i = 0; i < a && i < z; i++)
            CHECK(memcmp(git_pack_commit_id(whole.w, i), git_pack_commit_id(rest.w, i), hl) == 0,
                  "read all: commit %zu is another", i);
        CHECK(whole.res != GIT_PACK_DONE || rest.res != GIT_PACK_DONE || z >= a,
              "read all: %zu commits, %zu to the first tree", z, a);
        git_pack_walk_free(rest.w);
        /* 5 */
        size_t sm = (size_t)take(&choices) << 8 | take(&choices);
        feed(p, n, NULL, 0, false, kind, sm, false, &small);
        check_run(&small, p, n, kind, sm);
        if (small.res != GIT_PACK_TOO_BIG)
            same_runs(&whole, &small, hl, "with a small max_bytes");
        git_pack_walk_free(small.w);
    }
    git_pack_walk_free(whole.w);
    return 0;
}
