/* git.h - the host's git, run so that nothing a sandbox sent can make it run
 * anything or write outside refs/remotes/sandbox/.
 *
 * Every call runs /usr/bin/git (or the first git on a fixed PATH) in a clean
 * environment (PATH, HOME, LC_ALL=C, GIT_CONFIG_NOSYSTEM=1,
 * GIT_NO_REPLACE_OBJECTS=1, GIT_TERMINAL_PROMPT=0, GIT_ATTR_NOSYSTEM=1;
 * nothing else of the caller's, so no GIT_DIR, GIT_EXEC_PATH or
 * GIT_CONFIG_PARAMETERS gets through) with, before its own arguments:
 *   -c core.hooksPath=/dev/null   no hook runs (reference-transaction, post-merge, ...)
 *   -c core.fsmonitor=false       no fsmonitor command
 *   -c protocol.allow=never       no transport (a fetch from a bundle file
 *                                 adds -c protocol.file.allow=always itself)
 *   -c transfer.fsckObjects=true  objects fetched are checked (a tree with
 *                                 ".git" or "../" entries is refused)
 *   -c gc.auto=0 -c maintenance.auto=false -c core.pager=cat
 * stdin is /dev/null; stdout is captured, stderr too (for the message).
 */
#ifndef SBX_GIT_H
#define SBX_GIT_H

#include <stddef.h>

/* How one git runs: stdin from a file (NULL: /dev/null), and at most
 * mem_max bytes of address space (RLIMIT_AS; 0: no limit), so that an
 * object that inflates to gigabytes cannot take the host's memory. */
struct sbx_git_io {
    const char *stdin_path;
    long mem_max;
};

/* Run git [hardening] -C dir args... (args NULL-terminated; dir NULL: no
 * -C; io may be NULL).  Returns git's exit status (0..255), or -1 when it could not be run
 * or died of a signal or wrote more than out_max bytes.  *out (when out is
 * not NULL) is a new NUL-terminated buffer of *outlen bytes of its stdout.
 * Whenever the result is not 0, err holds "git SUBCOMMAND: " and the end
 * of its stderr. */
int sbx_git_run(const char *dir, const char *const *args, const struct sbx_git_io *io, char **out,
                size_t *outlen, size_t out_max, char *err, size_t errlen);

/* sbx_git_run() that returns 0 only for exit status 0, else -1; *out is
 * freed and NULL on -1. */
int sbx_git(const char *dir, const char *const *args, char **out, size_t out_max, char *err,
            size_t errlen);

#endif
