/*
 * test_gitpack.c - the commits at the start of a git pack (git/gitpack.c):
 * packs real git 2.39.5 wrote (tests/data/git-pack/, GIT_PACK_DIR) read
 * whole, a byte at a time and cut short: the commits each holds, DONE at
 * the first tree, descends true for fast-forwards (a chain, a merge's
 * second parent, new == old) and false for a rewrite or a commit not in
 * the pack; the same read all (git_pack_walk_read_all), and the packs git
 * writes with commits after trees (a tag in what is pushed, a bitmap),
 * read up to the first tree and read all; those packs corrupted (a type, the zlib data, a size, an
 * OFS_DELTA offset, a REF_DELTA base) and packs written here (commit
 * lines, deltas and their every fault, tags, duplicates), each BAD with
 * a why naming the object's offset; TOO_BIG under a small max_bytes.
 */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "gitpack.h"
#include "tap.h"
#include "testdata.h"

#define PACK_MAX  65536   /* bytes of a pack read or written here */
#define BIG       1000000 /* max_bytes that every pack here fits */
#define TRAILER   20      /* the checksum a pack ends with (not read) */
#define HEX_MAX   (2 * GIT_PACK_HASH_MAX + 1)
#define TEXT_MAX  4096
#define ASKS_MAX  8
#define IDS_MAX   6
#define SHA1_HEX  40
#define TYPE_BITS 0x70 /* an object header's type bits */

/* The commits of tests/data/git-pack/README.md. */
#define A  "e4a6fb57493ea2c11d2280c694c64f6db9f56a5d"
#define B  "bd81b702ed4a6c6fc2102b2f678c4404a9573a83"
#define C  "efb7cd14602c217e9cef9dea6a24131fd0e3ec55"
#define D  "68840f9fab51ba8cb3e096e38a101e18d0b38f13"
#define R  "0a36c6f74809e493069bf395c152c386de6d8c5d"
#define S1 "104abcaceaecade7edc3fc00f48fc5791c2a6e5c"
#define M  "fdce2f564d0d778a77c234f5712944bb169ded9f"
#define V1 "87fe18d826f1f196533a9c509e033743bb8c7b00" /* the tag object */
#define N1 "bceeda679eb775d6174a576e2b45b822b5467c58"
#define N2 "c23ff89f2e267b5cd7d7f53f3455d4abe9893607"
#define N3 "68ce27b874f4ad6f1ccaf88d9466ebb6ad39228c"
#define N4 "c96d275a04706c289e877b547d15c9c86733c228"
#define N5 "72917946871693182bbfff6b83db208210d7fa1b"
#define N6 "040158448f3a61fbe447d5aeabf1b07a46ca0e9e"
#define XA "c94a719501503958973ad7874f023b8cda613f432a378c13db33733964159635"
#define XB "7e11d0557bf923c3139e4b5d4c3c0a651ddd1687958bd39abd67af2b41e3d454"
#define XC "d788f92d6a8ce2f3b58bc95900c612730d11491ed3a5e529aa58fac18d4c557b"
#define T0 "4b825dc642cb6eb9a060e54bf8d69288fbee4904" /* the empty tree */

/* What feeding a pack gave. */
struct run {
    struct git_pack_walk *w;
    enum git_pack_result res;
    size_t used; /* bytes taken, all feeds */
    const char *why;
};

/* The bytes of file name in GIT_PACK_DIR (heap), or NULL. */
static uint8_t *load(const char *name, size_t *n)
{
    return td_load("GIT_PACK_DIR", name, PACK_MAX, n);
}

/* A new walker in o (reading all of the pack when all) fed pack[0..n) in
 * pieces of step bytes (0: whole), each piece a heap copy of its own,
 * until it is not MORE. */
static void feed_mode(const uint8_t *pack, size_t n, size_t step, enum git_hash_kind k, size_t max,
                      bool all, struct run *o)
{
    size_t off = 0;

    o->w = git_pack_walk_new(k, max);
    if (all)
        git_pack_walk_read_all(o->w);
    o->res = GIT_PACK_MORE;
    o->why = NULL;
    while (off < n && o->res == GIT_PACK_MORE) {
        size_t len = step != 0 && n - off > step ? step : n - off, used;
        uint8_t *piece = td_copy(pack + off, len);
        o->res = git_pack_walk_feed(o->w, piece, len, &used, &o->why);
        free(piece);
        off += used;
    }
    o->used = off;
}

/* feed_mode, up to the first tree or blob. */
static void feed(const uint8_t *pack, size_t n, size_t step, enum git_hash_kind k, size_t max,
                 struct run *o)
{
    feed_mode(pack, n, step, k, max, false, o);
}

static void done_run(struct run *o)
{
    git_pack_walk_free(o->w);
    o->w = NULL;
}

/* raw[0..len) as lower-case hex into hex. */
static void to_hex(const uint8_t *raw, size_t len, char *hex)
{
    for (size_t i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
}

/* Whether the commits of o are ids[0..n) in that order. */
static bool commits_are(const struct run *o, size_t hl, const char *const *ids, size_t n)
{
    char hex[HEX_MAX];

    if (git_pack_commits(o->w) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        to_hex(git_pack_commit_id(o->w, i), hl, hex);
        if (strcmp(hex, ids[i]) != 0)
            return false;
    }
    return true;
}

/* The id git gives a commit of content c[0..len) as hex into hex. */
static void commit_hex(enum git_hash_kind k, const void *c, size_t len, char *hex)
{
    const EVP_MD *md = k == GIT_HASH_SHA256 ? EVP_sha256() : EVP_sha1();
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    char head[32];
    uint8_t id[GIT_PACK_HASH_MAX];
    unsigned idl = 0;
    int hl = snprintf(head, sizeof(head), "commit %zu", len);

    EVP_DigestInit_ex(ctx, md, NULL);
    EVP_DigestUpdate(ctx, head, (size_t)hl + 1);
    EVP_DigestUpdate(ctx, c, len);
    EVP_DigestFinal_ex(ctx, id, &idl);
    EVP_MD_CTX_free(ctx);
    to_hex(id, idl, hex);
}

/* Whether every commit of o has the id of its own content. */
static bool ids_are_hashes(const struct run *o, enum git_hash_kind k, size_t hl)
{
    char want[HEX_MAX], got[HEX_MAX];

    for (size_t i = 0; i < git_pack_commits(o->w); i++) {
        size_t len;
        const uint8_t *c = git_pack_commit_content(o->w, i, &len);
        commit_hex(k, c, len, want);
        to_hex(git_pack_commit_id(o->w, i), hl, got);
        if (strcmp(want, got) != 0)
            return false;
    }
    return true;
}

/* ---- the packs of tests/data/git-pack/ ---- */

struct ask {
    const char *new, *old;
    bool yes;
    const char *what;
};

struct pack_case {
    const char *file;
    enum git_hash_kind kind;
    uint64_t end; /* where the first tree starts */
    size_t n;     /* commits */
    const char *ids[IDS_MAX];
    struct ask asks[ASKS_MAX];
};

static const struct pack_case packs[] = {
    {"linear-thin.pack",
     GIT_HASH_SHA1,
     298,
     2,
     {D, C},
     {{D, B, true, "D onto B: D, C, then B (outside the pack)"},
      {D, C, true, "D onto C"},
      {D, D, true, "new == old"},
      {B, B, true, "new == old, not in the pack"},
      {D, A, false, "D onto A: the walk leaves the pack at B"},
      {C, D, false, "C onto D: backwards"},
      {B, A, false, "B is not in the pack"}}},
    {"linear-full.pack",
     GIT_HASH_SHA1,
     550,
     4,
     {D, C, B, A},
     {{D, A, true, "D onto A along all four"},
      {A, D, false, "A onto D"},
      {C, D, false, "C onto D"}}},
    {"rewrite.pack",
     GIT_HASH_SHA1,
     155,
     1,
     {R},
     {{R, D, false, "R onto D: a rewrite (R's parent is B)"},
      {R, C, false, "R onto C"},
      {R, B, true, "R onto B: its parent"}}},
    {"merge.pack",
     GIT_HASH_SHA1,
     324,
     2,
     {M, S1},
     {{M, D, true, "M onto D: D is M's second parent"},
      {M, C, true, "M onto C: through S1"},
      {M, B, false, "M onto B: both paths leave the pack (C, D)"},
      {S1, D, false, "S1 onto D"}}},
    {"tag.pack",
     GIT_HASH_SHA1,
     275,
     1,
     {D},
     {{D, C, true, "D onto C, the tag object passed over"},
      {V1, C, false, "the tag object is not a commit"}}},
    {"delta-ofs.pack",
     GIT_HASH_SHA1,
     1283,
     6,
     {N2, N3, N4, N5, N6, N1},
     {{N6, N1, true, "6 onto 1: five OFS_DELTA commits, chains of up to 4"},
      {N1, N6, false, "1 onto 6"}}},
    {"delta-ref.pack",
     GIT_HASH_SHA1,
     1373,
     6,
     {N2, N3, N4, N5, N6, N1},
     {{N6, N1, true, "6 onto 1: five REF_DELTA commits, chains of up to 4"},
      {N5, N6, false, "5 onto 6"}}},
    {"sha256-thin.pack",
     GIT_HASH_SHA256,
     356,
     2,
     {XC, XB},
     {{XC, XA, true, "SHA-256: C onto A"},
      {XB, XC, false, "SHA-256: B onto C"},
      {XC, XC, true, "SHA-256: new == old"},
      {D, C, false, "SHA-1 ids in a SHA-256 pack"}}},
};

/* Whether runs a and b found the same: result, bytes, commits, answers. */
static bool same_run(const struct run *a, const struct run *b, const struct pack_case *c)
{
    if (a->res != b->res || a->used != b->used ||
        git_pack_walk_offset(a->w) != git_pack_walk_offset(b->w) ||
        git_pack_walk_end(a->w) != git_pack_walk_end(b->w) ||
        git_pack_commits(a->w) != git_pack_commits(b->w))
        return false;
    for (size_t i = 0; i < ASKS_MAX && c->asks[i].new != NULL; i++)
        if (git_pack_descends(a->w, c->asks[i].new, c->asks[i].old) !=
            git_pack_descends(b->w, c->asks[i].new, c->asks[i].old))
            return false;
    return true;
}

/* Whether every answer of o (a walk under way) that says "descends" is
 * one whole says too: a proof on the commits found so far is final. */
static bool proofs_hold(const struct run *o, const struct run *whole, const struct pack_case *c)
{
    for (size_t i = 0; i < ASKS_MAX && c->asks[i].new != NULL; i++)
        if (git_pack_descends(o->w, c->asks[i].new, c->asks[i].old) &&
            !git_pack_descends(whole->w, c->asks[i].new, c->asks[i].old))
            return false;
    return true;
}

/* Cut short anywhere before the walk's end: MORE, every byte taken, no
 * "descends" the whole pack does not say; then the rest: the same as
 * whole. */
static bool cuts_ok(const uint8_t *pack, size_t n, const struct pack_case *c,
                    const struct run *whole)
{
    size_t stop = whole->used;

    for (size_t cut = 0; cut < stop; cut++) {
        struct run o;
        size_t used;
        const char *why;
        feed(pack, cut, 0, c->kind, BIG, &o);
        bool ok_cut =
            o.res == GIT_PACK_MORE && o.used == cut && o.why == NULL && proofs_hold(&o, whole, c);
        uint8_t *rest = td_copy(pack + cut, n - cut);
        o.res = git_pack_walk_feed(o.w, rest, n - cut, &used, &why);
        o.used += used;
        free(rest);
        bool ok_rest = same_run(&o, whole, c);
        done_run(&o);
        if (!ok_cut || !ok_rest)
            return false;
    }
    return true;
}

static void test_packs(void)
{
    for (size_t i = 0; i < sizeof(packs) / sizeof(packs[0]); i++) {
        const struct pack_case *c = &packs[i];
        size_t n, hl = c->kind == GIT_HASH_SHA256 ? 32 : 20, used;
        const char *why;
        struct run whole, bytes;
        uint8_t *pack = load(c->file, &n);
        if (pack == NULL) {
            ok(0, "%s is in GIT_PACK_DIR", c->file);
            continue;
        }
        feed(pack, n, 0, c->kind, BIG, &whole);
        ok(whole.res == GIT_PACK_DONE && whole.why == NULL && git_pack_walk_end(whole.w) == c->end,
           "%s: DONE at the first tree, offset %llu", c->file, (unsigned long long)c->end);
        ok(commits_are(&whole, hl, c->ids, c->n) && ids_are_hashes(&whole, c->kind, hl),
           "%s: %zu commits, each id the hash of its content", c->file, c->n);
        for (size_t j = 0; j < ASKS_MAX && c->asks[j].new != NULL; j++) {
            const struct ask *a = &c->asks[j];
            ok(git_pack_descends(whole.w, a->new, a->old) == a->yes, "%s: %s: %s", c->file, a->what,
               a->yes ? "descends" : "not shown");
        }
        enum git_pack_result again = git_pack_walk_feed(whole.w, pack, n, &used, &why);
        ok(again == GIT_PACK_DONE && used == 0 && why == NULL, "%s: fed again after DONE: DONE",
           c->file);
        feed(pack, n, 1, c->kind, BIG, &bytes);
        ok(same_run(&whole, &bytes, c) && commits_are(&bytes, hl, c->ids, c->n),
           "%s: a byte at a time gives the same", c->file);
        ok(cuts_ok(pack, n, c, &whole),
           "%s: cut at each of the %zu bytes before the end: MORE, then the rest: the same",
           c->file, whole.used);
        done_run(&bytes);
        /* read to the end: the same commits and answers, DONE at the trailer */
        struct run all, all1;
        feed_mode(pack, n, 0, c->kind, BIG, true, &all);
        feed_mode(pack, n, 1, c->kind, BIG, true, &all1);
        bool same = all.res == GIT_PACK_DONE && git_pack_walk_end(all.w) == n - hl &&
                    all.used == n - hl && commits_are(&all, hl, c->ids, c->n) &&
                    commits_are(&all1, hl, c->ids, c->n) && all1.res == GIT_PACK_DONE &&
                    all1.used == all.used;
        for (size_t j = 0; j < ASKS_MAX && c->asks[j].new != NULL; j++)
            same =
                same && git_pack_descends(all.w, c->asks[j].new, c->asks[j].old) == c->asks[j].yes;
        ok(same, "%s: read all: DONE at the trailer (%zu), the same commits and answers", c->file,
           n - hl);
        done_run(&all1);
        done_run(&all);
        done_run(&whole);
        free(pack);
    }
}

/* ---- commits after trees ---- */

/* The commits of tagged-late.pack: main (L8) back to L2, pushed onto L1,
 * with a tag on L5: L8 L7 L6 L5, the trees, then L4 L3 L2. */
#define L1 "5ec0a3448fe64fbf8a33c6ab5c450db19f5011ee"
#define L2 "c7e986a2895f69eb48c96a33fb92b0cfb55e76c7"
#define L3 "cdcbb29dcc71e546a9f24920f125b643aab65717"
#define L4 "3e28e7fade25a4c7b27aed90bd278b7c76bef806"
#define L5 "3281509dce4e17f05f7884791f2a112e975c85b7"
#define L6 "8c8d6a4f679a780e37d000c172bbce6d14d1b9e0"
#define L7 "00127d68cb895e65e26ce5f7776a3b509c297f97"
#define L8 "d22a5632380ff19d58e89c67ead218d6caff427c"

static void test_late(void)
{
    static const char *const first[] = {L8, L7, L6, L5}, *const every[] = {L8, L7, L6, L5,
                                                                           L4, L3, L2};
    size_t n;
    struct run o, one;
    uint8_t *pack = load("tagged-late.pack", &n);

    if (pack == NULL) {
        ok(0, "tagged-late.pack is in GIT_PACK_DIR");
        return;
    }
    feed(pack, n, 0, GIT_HASH_SHA1, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == 768 && commits_are(&o, 20, first, 4) &&
           git_pack_descends(o.w, L8, L5) && !git_pack_descends(o.w, L8, L1),
       "tagged-late.pack: DONE at the first tree (768) with 4 of its 7 commits: L8 onto L1 not "
       "shown");
    done_run(&o);
    feed_mode(pack, n, 0, GIT_HASH_SHA1, BIG, true, &o);
    feed_mode(pack, n, 1, GIT_HASH_SHA1, BIG, true, &one);
    ok(o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == n - 20 &&
           commits_are(&o, 20, every, 7) && ids_are_hashes(&o, GIT_HASH_SHA1, 20) &&
           git_pack_descends(o.w, L8, L1) && !git_pack_descends(o.w, L1, L8) &&
           one.res == GIT_PACK_DONE && commits_are(&one, 20, every, 7),
       "tagged-late.pack, read all: all 7 commits (3 after the trees), L8 onto L1 descends");
    done_run(&one);
    done_run(&o);
    free(pack);
}

/* The commits of bitmap-loose.pack: B8 back to B5 pushed onto B4, B6 and
 * B5 packed (a bitmap), B8 and B7 loose; and of bitmap-thin.pack: T8 and
 * T7 pushed onto T6, REF_DELTAs on T1. */
#define B4 "a12e1b479c67bc39b034d5fe7467b7084e4eb0d5"
#define B5 "aed5883b21bf8903be86d80b67348ebc9398bdc4"
#define B6 "de3abcf019262e4b1c43653d36cbeecbfe72017a"
#define B7 "5a564d3c762cc031c8e1a810169b47101e090a4b"
#define B8 "49bc02e6fd644f5272483181508de4c390037dc3"
#define T6 "5e09d9ba56e76c269d21a63835ecb640af70f035"
#define T8 "d7124d3c8f873dfa97d2c43caa7ea7b38253be72"

static void test_bitmap(void)
{
    static const char *const packed[] = {B6, B5}, *const every[] = {B6, B5, B8, B7};
    size_t n;
    struct run o;
    uint8_t *pack = load("bitmap-loose.pack", &n);

    if (pack == NULL) {
        ok(0, "bitmap-loose.pack is in GIT_PACK_DIR");
        return;
    }
    feed(pack, n, 0, GIT_HASH_SHA1, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == 297 && commits_are(&o, 20, packed, 2) &&
           !git_pack_descends(o.w, B8, B4),
       "bitmap-loose.pack: DONE at the first blob (297) with the 2 packed commits: B8 onto B4 "
       "not shown");
    done_run(&o);
    feed_mode(pack, n, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == n - 20 &&
           commits_are(&o, 20, every, 4) && git_pack_descends(o.w, B8, B4),
       "bitmap-loose.pack, read all: the 2 loose commits after them too, B8 onto B4 descends");
    done_run(&o);
    free(pack);

    if ((pack = load("bitmap-thin.pack", &n)) == NULL) {
        ok(0, "bitmap-thin.pack is in GIT_PACK_DIR");
        return;
    }
    feed(pack, n, 0, GIT_HASH_SHA1, BIG, &o);
    bool first =
        o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == 12 && git_pack_commits(o.w) == 0;
    done_run(&o);
    feed_mode(pack, n, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(first && o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == n - 20 &&
           git_pack_commits(o.w) == 0 && !git_pack_descends(o.w, T8, T6),
       "bitmap-thin.pack: its commits are REF_DELTAs on a commit outside it: none found, read "
       "all or not; T8 onto T6 not shown");
    done_run(&o);
    free(pack);
}

/* ---- the real packs corrupted ---- */

/* Feed pack[0..n) whole: one check that it is BAD with a why that has
 * want in it, and descends nothing; what says which pack. */
static void ok_bad(const uint8_t *pack, size_t n, const char *want, const char *what)
{
    struct run o;
    feed(pack, n, 0, GIT_HASH_SHA1, BIG, &o);
    ok(o.res == GIT_PACK_BAD && o.why != NULL && strstr(o.why, want) != NULL &&
           !git_pack_descends(o.w, D, D),
       "%s: BAD (%s)", what, o.why != NULL ? o.why : "no why");
    done_run(&o);
}

static void test_corrupt(void)
{
    size_t n, m;
    uint8_t *full = load("linear-full.pack", &n), *ofs = load("delta-ofs.pack", &m);
    static uint8_t b[PACK_MAX];
    struct run o;

    if (full == NULL || ofs == NULL || n > sizeof(b) || m > sizeof(b)) {
        ok(0, "linear-full.pack and delta-ofs.pack are in GIT_PACK_DIR");
        free(full);
        free(ofs);
        return;
    }
    /* linear-full: commits at 12, 155, 298, 441, each a 2-byte header */
    memcpy(b, full, n);
    b[155] = (uint8_t)(b[155] & ~TYPE_BITS);
    ok_bad(b, n, "object at offset 155: type 0", "type 0");
    b[155] = (uint8_t)((b[155] & ~TYPE_BITS) | 5 << 4);
    ok_bad(b, n, "object at offset 155: type 5", "type 5");

    memcpy(b, full, n);
    b[14 + 40] ^= 0x55;
    ok_bad(b, n, "object at offset 12: zlib data", "a zlib byte flipped");
    memcpy(b, full, n);
    b[157] ^= 0x01; /* object 155's zlib CMF byte: compression method 9 */
    ok_bad(b, n, "object at offset 155: zlib data that does not inflate", "a zlib header broken");

    memcpy(b, full, n);
    b[298]++; /* 204 -> 205 bytes declared */
    ok_bad(b, n, "object at offset 298: zlib data that inflates to 204",
           "a commit declared a byte longer than it inflates");
    b[298] -= 2; /* 203 */
    ok_bad(b, n, "object at offset 298: zlib data that inflates to more",
           "a commit declared a byte shorter");

    memcpy(b, full, n);
    b[7] = 4;
    ok_bad(b, n, "the pack header: version 4", "version 4");
    b[7] = 2;
    b[3] = 'X';
    ok_bad(b, n, "the pack header: not \"PACK\"", "not PACK");

    memcpy(b, full, n);
    b[11] = 2;
    feed(b, n, 0, GIT_HASH_SHA1, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 2 && git_pack_walk_end(o.w) == 298 &&
           o.used == 298 && git_pack_descends(o.w, D, B),
       "an object count of 2: DONE after two commits, at 298");
    done_run(&o);
    b[11] = 0;
    feed(b, n, 0, GIT_HASH_SHA1, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 0 && o.used == 12 &&
           git_pack_descends(o.w, D, D) && !git_pack_descends(o.w, D, C),
       "an object count of 0: DONE after the header");
    done_run(&o);

    /* delta-ofs: the OFS_DELTA at 355 (header 2 bytes) is 343 back: 0x81 0x57 */
    ok(ofs[357] == 0x81 && ofs[358] == 0x57, "delta-ofs.pack: the delta at 355 is 343 back");
    memcpy(b, ofs, m);
    b[358] = 0x56;
    ok_bad(b, m, "object at offset 355: an OFS_DELTA 342 bytes back, not at",
           "an OFS_DELTA on no object's start");
    feed_mode(b, m, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 2 && git_pack_walk_end(o.w) == m - 20,
       "read all: an OFS_DELTA on no object's start (maybe a tree's) passed over, and the deltas "
       "on it: DONE with 2 commits");
    done_run(&o);
    b[357] = 0xff;
    b[358] = 0x7f;
    ok_bad(b, m, "object at offset 355: an OFS_DELTA 16511 bytes back",
           "an OFS_DELTA before the pack");
    memcpy(b, ofs, m);
    b[549 + 2 + 1] = 0x00; /* the delta at 549 (194 back: 0x80 0x42) now 128 back, at 421 */
    ok(ofs[551] == 0x80 && ofs[552] == 0x42, "delta-ofs.pack: the delta at 549 is 194 back");
    ok_bad(b, m, "object at offset 549: an OFS_DELTA 128", "an OFS_DELTA inside another object");
    free(full);
    free(ofs);

    /* delta-ref: the REF_DELTA at 355 on an id not in the pack: a thin
     * pack's base; DONE there */
    uint8_t *ref = load("delta-ref.pack", &m);
    if (ref != NULL) {
        ref[357] ^= 0xff;
        feed(ref, m, 0, GIT_HASH_SHA1, BIG, &o);
        ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 1 && git_pack_walk_end(o.w) == 355 &&
               o.used == 355 + 2 + 20,
           "a REF_DELTA on a base outside the pack: DONE at it (355), one commit");
        done_run(&o);
        feed_mode(ref, m, 0, GIT_HASH_SHA1, BIG, true, &o);
        ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 2 && git_pack_walk_end(o.w) == m - 20,
           "read all: that REF_DELTA passed over, and the deltas on it: DONE with 2 commits");
        done_run(&o);
        free(ref);
    }

    /* max_bytes */
    full = load("linear-full.pack", &n);
    feed(full, n, 0, GIT_HASH_SHA1, 100, &o);
    ok(o.res == GIT_PACK_TOO_BIG && o.why != NULL && strstr(o.why, "object at offset 12:") &&
           git_pack_commits(o.w) == 0 && !git_pack_descends(o.w, D, D),
       "max_bytes 100: TOO_BIG at the first commit (%s)", o.why ? o.why : "");
    done_run(&o);
    feed(full, n, 0, GIT_HASH_SHA1, 2 * 204 + 203, &o);
    ok(o.res == GIT_PACK_TOO_BIG && strstr(o.why, "object at offset 298:") &&
           git_pack_commits(o.w) == 2,
       "max_bytes of two commits and a byte short of a third: TOO_BIG at the third");
    done_run(&o);
    feed(full, n, 0, GIT_HASH_SHA1, 3 * 204 + 156, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 4, "max_bytes of all four exactly: DONE");
    done_run(&o);
    free(full);
    ofs = load("delta-ofs.pack", &m);
    feed(ofs, m, 0, GIT_HASH_SHA1, 2772 + 219 + 100, &o);
    ok(o.res == GIT_PACK_TOO_BIG && strstr(o.why, "object at offset 355:") &&
           git_pack_commits(o.w) == 1,
       "max_bytes with room for a delta, not for the commit it makes: TOO_BIG (%s)",
       o.why ? o.why : "");
    done_run(&o);
    free(ofs);
}

/* ---- packs written here ---- */

struct pk {
    uint8_t b[PACK_MAX];
    size_t n;
    uint32_t count;
};

static void pk_start(struct pk *p)
{
    memcpy(p->b, "PACK\0\0\0\2\0\0\0\0", 12);
    p->n = 12;
    p->count = 0;
}

/* An object header of type and size at the end of p; its offset. */
static size_t pk_head(struct pk *p, int type, size_t size)
{
    size_t at = p->n;
    uint8_t c = (uint8_t)(type << 4 | (size & 0x0f));

    size >>= 4;
    while (size != 0) {
        p->b[p->n++] = c | 0x80;
        c = size & 0x7f;
        size >>= 7;
    }
    p->b[p->n++] = c;
    p->count++;
    return at;
}

/* data[0..len) deflated at the end of p. */
static void pk_zlib(struct pk *p, const void *data, size_t len)
{
    uLongf zl = sizeof(p->b) - p->n;
    compress2(p->b + p->n, &zl, data, len, Z_DEFAULT_COMPRESSION);
    p->n += zl;
}

/* An object of type and content data[0..len); its offset. */
static size_t pk_obj(struct pk *p, int type, const void *data, size_t len)
{
    size_t at = pk_head(p, type, len);
    pk_zlib(p, data, len);
    return at;
}

/* An OFS_DELTA on the object at base; its offset. */
static size_t pk_ofs(struct pk *p, size_t base, const void *delta, size_t len)
{
    size_t at = pk_head(p, 6, len), ofs = at - base;
    uint8_t v[16];
    size_t k = sizeof(v) - 1;

    v[k] = ofs & 0x7f;
    while (ofs >>= 7)
        v[--k] = (uint8_t)(0x80 | (--ofs & 0x7f));
    memcpy(p->b + p->n, v + k, sizeof(v) - k);
    p->n += sizeof(v) - k;
    pk_zlib(p, delta, len);
    return at;
}

/* A REF_DELTA on the object of id hex; its offset. */
static size_t pk_ref(struct pk *p, const char *hex, const void *delta, size_t len)
{
    size_t at = pk_head(p, 7, len), hl = strlen(hex) / 2;

    for (size_t i = 0; i < hl; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        p->b[p->n++] = (uint8_t)v;
    }
    pk_zlib(p, delta, len);
    return at;
}

/* The object count into the header, a trailer after the objects. */
static void pk_end(struct pk *p)
{
    p->b[8] = (uint8_t)(p->count >> 24);
    p->b[9] = (uint8_t)(p->count >> 16);
    p->b[10] = (uint8_t)(p->count >> 8);
    p->b[11] = (uint8_t)p->count;
    memset(p->b + p->n, 0, TRAILER);
    p->n += TRAILER;
}

/* A commit's content: the empty tree (SHA-1), parents (NULL-ended),
 * author, committer and msg; its length. */
static size_t commit_text(char *out, const char *const *parents, const char *msg)
{
    int k = snprintf(out, TEXT_MAX, "tree " T0 "\n");
    for (size_t i = 0; parents[i] != NULL; i++)
        k += snprintf(out + k, TEXT_MAX - (size_t)k, "parent %s\n", parents[i]);
    k += snprintf(out + k, TEXT_MAX - (size_t)k,
                  "author T <t@example.com> 1700000000 +0000\n"
                  "committer T <t@example.com> 1700000000 +0000\n\n%s\n",
                  msg);
    return (size_t)k;
}

/* v in a delta header's size encoding into d at *k. */
static void delta_varint(uint8_t *d, size_t *k, size_t v)
{
    for (; v >= 0x80; v >>= 7)
        d[(*k)++] = (uint8_t)(0x80 | (v & 0x7f));
    d[(*k)++] = (uint8_t)v;
}

/* A delta's header (its base's size, its result's) into d; its length. */
static size_t delta_head(uint8_t *d, size_t src, size_t dst)
{
    size_t k = 0;
    delta_varint(d, &k, src);
    delta_varint(d, &k, dst);
    return k;
}

/* A copy opcode (offset and size in full 2-byte fields) into d at *k. */
static void delta_copy(uint8_t *d, size_t *k, size_t off, size_t len)
{
    d[(*k)++] = 0x80 | 0x01 | 0x02 | 0x10 | 0x20;
    d[(*k)++] = (uint8_t)off;
    d[(*k)++] = (uint8_t)(off >> 8);
    d[(*k)++] = (uint8_t)len;
    d[(*k)++] = (uint8_t)(len >> 8);
}

/* An insert opcode of s[0..len) (len <= 127) into d at *k. */
static void delta_insert(uint8_t *d, size_t *k, const void *s, size_t len)
{
    d[(*k)++] = (uint8_t)len;
    memcpy(d + *k, s, len);
    *k += len;
}

/* A delta from base[0..blen) to the same with msg's last byte changed
 * to x (a copy of all but the last two bytes, an insert of x and LF). */
static size_t delta_last(uint8_t *d, size_t blen, char x)
{
    size_t k = delta_head(d, blen, blen);
    char tail[2] = {x, '\n'};
    delta_copy(d, &k, 0, blen - 2);
    delta_insert(d, &k, tail, 2);
    return k;
}

/* Feed p whole (and a byte at a time: the same result and commits). */
static void feed_pk(const struct pk *p, size_t max, struct run *o)
{
    struct run one;
    feed(p->b, p->n, 0, GIT_HASH_SHA1, max, o);
    feed(p->b, p->n, 1, GIT_HASH_SHA1, max, &one);
    if (one.res != o->res || one.used != o->used ||
        git_pack_commits(one.w) != git_pack_commits(o->w))
        o->res = (enum git_pack_result) - 1;
    done_run(&one);
}

static void test_written(void)
{
    static struct pk p;
    static char t1[TEXT_MAX], t2[TEXT_MAX], t3[TEXT_MAX];
    static uint8_t d[TEXT_MAX];
    char h1[HEX_MAX], h2[HEX_MAX], h3[HEX_MAX], tag[TEXT_MAX];
    const char *none[] = {NULL};
    struct run o;

    size_t l1 = commit_text(t1, none, "root a");
    commit_hex(GIT_HASH_SHA1, t1, l1, h1);
    const char *p1[] = {h1, NULL};
    size_t l2 = commit_text(t2, p1, "child a");
    commit_hex(GIT_HASH_SHA1, t2, l2, h2);
    memcpy(t3, t2, l2);
    t3[l2 - 2] = 'b';
    commit_hex(GIT_HASH_SHA1, t3, l2, h3);

    /* two commits, a tag, the first again, then a blob */
    pk_start(&p);
    pk_obj(&p, 1, t2, l2);
    int tl = snprintf(tag, sizeof(tag), "object %s\ntype commit\ntag v1\n\nv1\n", h2);
    pk_obj(&p, 4, tag, (size_t)tl);
    pk_obj(&p, 1, t1, l1);
    pk_obj(&p, 1, t2, l2);
    size_t blob = pk_obj(&p, 3, "x", 1);
    pk_obj(&p, 1, t3, l2);
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 2 && git_pack_walk_end(o.w) == blob &&
           git_pack_descends(o.w, h2, h1) && !git_pack_descends(o.w, h3, h1),
       "a tag passed over, a commit twice kept once, DONE at the blob, nothing after it");
    done_run(&o);
    feed_mode(p.b, p.n, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 3 &&
           git_pack_walk_end(o.w) == p.n - TRAILER && git_pack_descends(o.w, h3, h1),
       "read all: the blob passed over, the commit after it found");
    done_run(&o);

    /* an OFS_DELTA commit (t2 made t3) and a REF_DELTA one (t1 made t4) */
    char t4[TEXT_MAX], h4[HEX_MAX];
    memcpy(t4, t1, l1);
    t4[l1 - 2] = 'b';
    commit_hex(GIT_HASH_SHA1, t4, l1, h4);
    pk_start(&p);
    size_t at1 = pk_obj(&p, 1, t2, l2);
    pk_ofs(&p, at1, d, delta_last(d, l2, 'b'));
    pk_obj(&p, 1, t1, l1);
    pk_ref(&p, h1, d, delta_last(d, l1, 'b'));
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    const char *four[] = {h2, h3, h1, h4};
    ok(o.res == GIT_PACK_DONE && git_pack_walk_end(o.w) == p.n - TRAILER &&
           commits_are(&o, 20, four, 4) && git_pack_descends(o.w, h3, h1) &&
           !git_pack_descends(o.w, h4, h1),
       "an OFS_DELTA and a REF_DELTA commit made right; DONE at the object count");
    done_run(&o);

    pk_start(&p);
    size_t tg = pk_obj(&p, 4, tag, (size_t)tl);
    pk_ofs(&p, tg, d, delta_last(d, (size_t)tl, 'x'));
    pk_obj(&p, 1, t1, l1);
    size_t thin = pk_ref(&p, h2, d, delta_last(d, l2, 'b'));
    pk_obj(&p, 1, t2, l2);
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 1 && git_pack_walk_end(o.w) == thin &&
           git_pack_descends(o.w, h1, h1) && !git_pack_descends(o.w, h2, h1),
       "an OFS_DELTA on a tag passed over; a REF_DELTA on no commit here: DONE at it");
    done_run(&o);

    /* commit lines */
    static const struct {
        const char *text, *what;
        bool good;
    } lines[] = {
        {"tree " T0 "\nauthor x\n", "a tree line and more: no parents", true},
        {"tree " T0 "\nparent " A "\nparent " B "\nx", "two parents", true},
        {"tree " T0 "\n", "nothing after the tree line", false},
        {"tree " T0 "\nparent " A "\n", "nothing after the last parent line", false},
        {"tree " T0 "\nparent " A "x\nauthor x\n", "a parent id one digit long", false},
        {"tree " T0 "\nparent 68840F9FAB51BA8CB3E096E38A101E18D0B38F13\nx", "an upper-case parent",
         false},
        {"tree " T0 "\nparent " A, "a parent line cut short", false},
        {"tree 4b825dc642cb6eb9a060e54bf8d69288fbee490\nx\n", "a short tree id", false},
        {"parent " A "\ntree " T0 "\nx", "parent before tree", false},
        {"", "an empty commit", false},
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        pk_start(&p);
        pk_obj(&p, 1, lines[i].text, strlen(lines[i].text));
        pk_end(&p);
        feed_pk(&p, BIG, &o);
        size_t np = 0;
        if (o.res == GIT_PACK_DONE)
            git_pack_commit_parents(o.w, 0, &np);
        bool good = o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 1 &&
                    np == (strstr(lines[i].text, B) != NULL ? 2u : 0u);
        bool bad = o.res == GIT_PACK_BAD &&
                   strcmp(o.why, "object at offset 12: a commit whose tree and parent lines do "
                                 "not parse") == 0;
        ok(lines[i].good ? good : bad, "a commit with %s: %s", lines[i].what,
           lines[i].good ? "read" : "BAD");
        done_run(&o);
    }
    pk_start(&p);
    pk_obj(&p, 1, t1, l1);
    pk_end(&p);
    feed(p.b, p.n, 0, GIT_HASH_SHA256, BIG, &o);
    ok(o.res == GIT_PACK_BAD, "a SHA-1 commit read as SHA-256: BAD");
    done_run(&o);

    /* deltas that do not apply */
    struct {
        const char *what, *why;
        size_t len;
        uint8_t ops[16];
        long src_adj, dst_adj;
    } deltas[] = {
        {"opcode 0", "a delta's opcode 0 (reserved)", 1, {0x00}, 0, 0},
        {"a copy outside the base",
         "a delta copies from outside its base",
         4,
         {0x80 | 0x01 | 0x02 | 0x10, 0xff, 0xff, 0x02},
         0,
         0},
        {"a copy past the result",
         "a delta makes more than its declared size",
         2,
         {0x80 | 0x10, 20},
         0,
         -(long)l2 + 10},
        {"an insert past the result",
         "a delta makes more than its declared size",
         4,
         {0x03, 'a', 'b', 'c'},
         0,
         -(long)l2 + 2},
        {"an insert past the delta",
         "a delta's insert opcode runs past its end",
         3,
         {0x05, 'a', 'b'},
         0,
         0},
        {"a copy's bytes past the delta",
         "a delta's copy opcode runs past its end",
         2,
         {0x80 | 0x01 | 0x02, 0x00},
         0,
         0},
        {"a result shorter than declared",
         "a delta makes less than its declared size",
         2,
         {0x01, 'a'},
         0,
         0},
        {"a base size not the base's", "a delta for a base of", 2, {0x01, 'a'}, 1, 0},
    };
    for (size_t i = 0; i < sizeof(deltas) / sizeof(deltas[0]); i++) {
        size_t k = delta_head(d, (size_t)((long)l2 + deltas[i].src_adj),
                              (size_t)((long)l2 + deltas[i].dst_adj));
        memcpy(d + k, deltas[i].ops, deltas[i].len);
        pk_start(&p);
        size_t base = pk_obj(&p, 1, t2, l2);
        size_t at = pk_ofs(&p, base, d, k + deltas[i].len);
        pk_end(&p);
        feed_pk(&p, BIG, &o);
        char want[256];
        snprintf(want, sizeof(want), "object at offset %zu: %s", at, deltas[i].why);
        ok(o.res == GIT_PACK_BAD && strncmp(o.why, want, strlen(want)) == 0,
           "a delta with %s: BAD (%s)", deltas[i].what, o.why ? o.why : "");
        done_run(&o);
    }

    /* object headers */
    pk_start(&p);
    memcpy(p.b + p.n, "\x9f\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11);
    p.n += 11;
    p.count = 1;
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_BAD && strstr(o.why, "object at offset 12: an object header longer"),
       "an object header of 11 bytes: BAD (%s)", o.why ? o.why : "");
    done_run(&o);
    pk_start(&p);
    memcpy(p.b + p.n, "\x9f\xff\xff\xff\xff\xff\xff\xff\xff\x1f", 10);
    p.n += 10;
    p.count = 1;
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_BAD && strstr(o.why, "object at offset 12: an object size over 64 bits"),
       "a size over 64 bits in 10 header bytes: BAD (%s)", o.why ? o.why : "");
    done_run(&o);
    pk_start(&p);
    pk_obj(&p, 1, t1, l1);
    size_t self = pk_ofs(&p, p.n, d, delta_last(d, l1, 'b'));
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_BAD && o.why != NULL && strstr(o.why, "an OFS_DELTA 0 bytes back") &&
           git_pack_walk_offset(o.w) > self,
       "an OFS_DELTA on itself (0 back): BAD (%s)", o.why ? o.why : "");
    done_run(&o);
    feed_mode(p.b, p.n, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(o.res == GIT_PACK_BAD && o.why != NULL && strstr(o.why, "an OFS_DELTA 0 bytes back"),
       "read all: an OFS_DELTA on itself: BAD all the same");
    done_run(&o);
    pk_start(&p);
    pk_obj(&p, 1, t1, l1);
    pk_ofs(&p, 0, d, delta_last(d, l1, 'b'));
    pk_end(&p);
    feed_mode(p.b, p.n, 0, GIT_HASH_SHA1, BIG, true, &o);
    ok(o.res == GIT_PACK_BAD && o.why != NULL && strstr(o.why, "bytes back, not at an earlier"),
       "read all: an OFS_DELTA before the pack's start: BAD (%s)", o.why ? o.why : "");
    done_run(&o);

    /* sizes */
    pk_start(&p);
    pk_head(&p, 1, l1 + 1);
    pk_zlib(&p, t1, l1);
    pk_end(&p);
    feed_pk(&p, BIG, &o);
    ok(o.res == GIT_PACK_BAD && strstr(o.why, "inflates to"), "zlib data a byte short: BAD (%s)",
       o.why ? o.why : "");
    done_run(&o);
    pk_start(&p);
    pk_obj(&p, 1, t1, l1);
    pk_obj(&p, 1, t2, l2);
    pk_end(&p);
    feed_pk(&p, l1 + l2 - 1, &o);
    ok(o.res == GIT_PACK_TOO_BIG && git_pack_commits(o.w) == 1, "max_bytes a byte short: TOO_BIG");
    done_run(&o);
    feed_pk(&p, l1 + l2, &o);
    ok(o.res == GIT_PACK_DONE && git_pack_commits(o.w) == 2, "max_bytes exactly: DONE");
    done_run(&o);
}

int main(void)
{
    test_packs();
    test_late();
    test_bitmap();
    test_corrupt();
    test_written();
    return tap_done();
}
