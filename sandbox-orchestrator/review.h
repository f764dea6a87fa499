/* review.h - what a sandbox's branch changes against a base, for a human
 * to look at before anything of it reaches a branch: `git diff --stat`,
 * the commit count, and the flags (protected paths, symlinks out of the
 * tree, submodules).  Read-only: it runs diff, rev-list, merge-base and
 * cat-file, with no external diff or textconv.
 */
#ifndef SBX_REVIEW_H
#define SBX_REVIEW_H

#include <stddef.h>

#include <jansson.h>

#include "config.h"

/* Review base..commit in the repository at repo (both full object names).
 * *out: new {base, commit, commits (n), descendant (bool: base is an
 * ancestor of commit), stat (text), files (n), flags: [{path, why}]}.
 * 0 / -1 with err. */
int sbx_review(const struct sbx_config *c, const char *repo, const char *base, const char *commit,
               json_t **out, char *err, size_t errlen);

/* Print a review for a human: the stat indented, each flag on a line. */
void sbx_review_print(json_t *review, const char *label);

#endif
