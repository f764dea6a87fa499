/*
 * secrets.h - the secrets egressd injects for sandboxes (`secret-dir`;
 * docs/design.md, "Sandbox bindings"), as one immutable, reference-counted
 * store.
 *
 * Each regular file in the directory is one secret: its name is the
 * secret's name, its content the value, or a CLI's OAuth login file
 * (logins.h).  The values are kept only in pages
 * of their own (mmap, excluded from core dumps, wiped in a forked child,
 * locked in RAM when the limit allows, read-only once loaded) and wiped
 * before they are unmapped; never in a malloc'd buffer.  The world holds
 * the store (world.h): a reload makes a new one, and a connection keeps the
 * one of the world it started with.
 */
#ifndef PX_SECRETS_H
#define PX_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define PX_SECRET_NAME_MAX  63   /* [a-z0-9][a-z0-9_-]{0,62} */
#define PX_SECRET_VALUE_MAX 8192 /* bytes, after the trailing newline is stripped */
#define PX_SECRETS_MAX      256  /* files in one secret-dir */

struct px_secrets;

/* Which file, in which version: what a login compares to tell its own
 * write-back from an admin's new file (logins.c). */
struct px_file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t mtime_ns;
};
struct px_file_id px_file_id_of(const struct stat *st);
bool px_file_id_eq(const struct px_file_id *a, const struct px_file_id *b);

/* Whether a secret file's text is a CLI's login file (JSON: its first
 * byte that is not white space is '{') rather than a value for a header.
 * A login file may hold line breaks and tabs; logins.c reads its JSON. */
bool px_secret_is_login_text(const char *p, size_t n);

/* A private mapping of at least `len` bytes for secret values (excluded
 * from core dumps, wiped in a forked child, locked in RAM where allowed),
 * or NULL with errno; *mapped is its length.  px_vault_unmap wipes it
 * (whatever its protection) and unmaps it; NULL is a no-op. */
char *px_vault_map(size_t len, size_t *mapped);
void px_vault_unmap(char *p, size_t mapped);

/* Whether s[0..n) is a secret's name: [a-z0-9][a-z0-9_-]{0,62}. */
bool px_secret_name_ok(const char *s, size_t n);

/* Load every secret of directory `dir` into a new store (*out, one
 * reference).  dir NULL or "": an empty store.  Files whose names are not
 * secret names (dotfiles, editor leftovers such as `x~`, `.x.swp`) and
 * entries that are not regular files are skipped with a warning to the
 * diagnostics log.  Returns 0, or -1 with every error, one per line
 * ("DIR/NAME: what is wrong; the fix"), in err and *out NULL: a file
 * looser than 0600, not owned by egressd's effective uid, a symbolic link,
 * empty, longer than PX_SECRET_VALUE_MAX, holding a control byte; a
 * directory group or others may write in.  No message shows a value. */
int px_secrets_load(const char *dir, struct px_secrets **out, char *err, size_t errlen);

/* One more reference to s (held already by the caller); returns s. */
struct px_secrets *px_secrets_ref(struct px_secrets *s);
/* Drop a reference; the last one wipes the values and unmaps them.  Any
 * thread; NULL is a no-op. */
void px_secrets_unref(struct px_secrets *s);

/* The value of secret `name`: true with *p pointing into the store
 * (NUL-terminated; valid while the caller holds a reference) and *len its
 * length; false when s has no such secret (s NULL: none). */
bool px_secrets_get(const struct px_secrets *s, const char *name, const char **p, size_t *len);

/* Whether secret `name` of s is a login file (px_secret_is_login_text);
 * then *id (when not NULL) is the file it was read from. */
bool px_secrets_login(const struct px_secrets *s, const char *name, struct px_file_id *id);

/* The provider of login `name` of s ("anthropic", "openai", "google"),
 * or NULL when it is not a login. */
const char *px_secrets_login_provider(const struct px_secrets *s, const char *name);

/* How many secrets s holds (s NULL: 0), and the name of the i-th (sorted;
 * NULL past the end). */
size_t px_secrets_count(const struct px_secrets *s);
const char *px_secrets_name(const struct px_secrets *s, size_t i);

#endif
