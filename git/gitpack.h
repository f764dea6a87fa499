/*
 * gitpack.h - the commits at the start of a git pack (gitformat-pack(5)),
 * read as the pack streams by in a git push: each commit's id and parent
 * ids, and whether one commit is a proven descendant of another along the
 * commits the pack holds (a fast-forward), so that a forced push can be
 * refused before the origin sees it.
 *
 * git writes a pack's commits (and tags) before its trees and blobs
 * (builtin/pack-objects.c, compute_write_order), so the walk stops at the
 * first tree or blob, or at a delta whose base is not a commit of the pack
 * (a thin pack's base): what it has then is every commit it will find.
 * Not always: git_pack_walk_read_all reads to the pack's end instead, for
 * the packs git writes with commits after trees.  Anything it cannot read exactly is BAD, never
 * guessed at; a commit it does not find is a commit it cannot use to prove a descent.
 *
 * Pure: no I/O, no globals; it allocates (the commits it keeps, at most
 * max_bytes of their content, and tables of their ids).  zlib inflates,
 * OpenSSL's EVP hashes.
 */
#ifndef GIT_GITPACK_H
#define GIT_GITPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GIT_PACK_MAX_COMMITS (1u << 20) /* the most commits a walk keeps */
#define GIT_PACK_MAX_TAGS    (1u << 20) /* the most tag objects it passes over */
#define GIT_PACK_HASH_MAX    32         /* raw bytes of the longest object id */

enum git_hash_kind {
    GIT_HASH_SHA1,  /* 20 raw bytes, 40 hex digits */
    GIT_HASH_SHA256 /* 32 raw bytes, 64 hex digits */
};

struct git_pack_walk;

/* A walker for a pack of hash kind k that keeps at most max_bytes of
 * inflated commit (and delta) content in all; NULL on allocation failure. */
struct git_pack_walk *git_pack_walk_new(enum git_hash_kind k, size_t max_bytes);
/* Free w and all it holds; NULL is fine. */
void git_pack_walk_free(struct git_pack_walk *w);
/* Make w read the whole pack (call it before the first feed; later it does
 * nothing): trees, blobs, and deltas on anything but a commit or a tag of
 * the pack (a tree or a blob, or a base outside a thin pack) are inflated
 * and passed over instead of ending the walk, which is DONE at the pack's
 * object count.  For packs whose commits are not all first (README.md):
 * git 2.39 writes a commit it keeps as a delta on disk after the trees
 * when a tag of the pushing repository points at a commit of the pack
 * (compute_write_order: its "remaining commits" skip reused deltas), and
 * a repository with a bitmap sends its packed objects first, then the
 * loose ones.  The cost: the whole pack inflated, the answer at its end. */
void git_pack_walk_read_all(struct git_pack_walk *w);

enum git_pack_result {
    GIT_PACK_MORE,   /* give it more bytes */
    GIT_PACK_DONE,   /* it has every commit it will find: the pack's end, or
                        the first object that is a tree or a blob (or a
                        delta whose base is not a commit of the pack); with
                        git_pack_walk_read_all, the pack's end only */
    GIT_PACK_BAD,    /* not a pack it can read (why says what, naming the
                        object's offset) */
    GIT_PACK_TOO_BIG /* over max_bytes of commits, over GIT_PACK_MAX_COMMITS
                        commits or GIT_PACK_MAX_TAGS tags, or out of memory */
};

/* Feed the next n bytes of the pack (the first ones start with "PACK").
 * Consumes all n unless it returns DONE/BAD/TOO_BIG (then *used says how
 * many it took: up to the end of the last object it read, or of the
 * header of the one that stopped it; for BAD in zlib data, how far into
 * it zlib read before it saw the fault, which may vary by a few bytes
 * with how the pack is split).  *why: a static or walker-owned string for
 * BAD/TOO_BIG, NULL otherwise.  After DONE/BAD/TOO_BIG further feeds take
 * nothing and return the same. */
enum git_pack_result git_pack_walk_feed(struct git_pack_walk *w, const void *p, size_t n,
                                        size_t *used, const char **why);

/* Whether the commit new (hex, lower case) is old (hex) or descends from
 * it along the parents of commits the pack holds: a walk from new over
 * parents, each commit found in the pack followed, true as soon as old is
 * reached.  False when it cannot show it (new not in the pack and not
 * old; every path leaving the pack without meeting old), for ids that are
 * not 40 or 64 lower-case hex digits of the pack's kind, and after BAD or
 * TOO_BIG.  While the walk is under way (MORE) it answers along the
 * commits found so far: a true is final (a proof only grows with more
 * commits), a false is not yet. */
bool git_pack_descends(const struct git_pack_walk *w, const char *new_hex, const char *old_hex);

/* How many commits it found (for logs and tests). */
size_t git_pack_commits(const struct git_pack_walk *w);

/* For tests: commit i (0 <= i < git_pack_commits(w), in pack order) as its
 * raw id (20 or 32 bytes); its parents' raw ids one after another, their
 * number in *n; its inflated content, its length in *len. */
const uint8_t *git_pack_commit_id(const struct git_pack_walk *w, size_t i);
const uint8_t *git_pack_commit_parents(const struct git_pack_walk *w, size_t i, size_t *n);
const uint8_t *git_pack_commit_content(const struct git_pack_walk *w, size_t i, size_t *len);

/* The bytes of the pack read so far; after DONE, where the object that
 * stopped the walk starts (or where the pack's objects end). */
uint64_t git_pack_walk_offset(const struct git_pack_walk *w);
uint64_t git_pack_walk_end(const struct git_pack_walk *w);

#endif
