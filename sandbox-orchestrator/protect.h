/* protect.h - the paths a change from a sandbox must not touch unnoticed
 * (`protected-paths`), and symlinks that point out of the tree.
 *
 * A pattern (fnmatch(3) syntax, matched against single path components):
 *   NAME     a file or directory called NAME at any depth (CODEOWNERS,
 *            requirements*.txt)
 *   NAME/    a directory called NAME at any depth: every path below it
 *   /NAME    NAME at the top only
 *   /NAME/   a top-level directory called NAME (/.*\/: any top-level
 *            dot-directory)
 */
#ifndef SBX_PROTECT_H
#define SBX_PROTECT_H

/* The first pattern of patterns (NULL-terminated) that path (relative to
 * the top, '/'-separated) matches, or NULL. */
const char *sbx_protected_match(const char *const *patterns, const char *path);

/* 1 when a symlink at path with this target leads out of the tree (an
 * absolute target, or more ".." than path has directories above it). */
int sbx_link_escapes(const char *path, const char *target);

#endif
