/*
 * secrets.c - see secrets.h.
 *
 * Loading is two passes over the directory, both under one directory
 * descriptor: first every candidate file is opened (O_NOFOLLOW) and
 * checked (regular, ours, 0600 or tighter, not too long) and its size
 * noted; then one mapping big enough for all of them is made and each file
 * is read straight into it.  So a value never passes through the heap or
 * stdio, and a file that grew between the passes is noticed, not cut.
 *
 * The mapping ("vault") is private and anonymous, MADV_DONTDUMP (a core
 * dump leaves it out: required), MADV_WIPEONFORK (a forked child sees
 * zeros) and mlock'ed (kept out of swap) where the kernel and
 * RLIMIT_MEMLOCK allow: those two are best-effort.  Once filled it is made
 * read-only; the last unref makes it writable again only to wipe it.
 */
#include "secrets.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "oauth.h"

/* The longest file that can hold a value: PX_SECRET_VALUE_MAX and "\r\n". */
#define FILE_MAX (PX_SECRET_VALUE_MAX + 2)

struct entry {
    char name[PX_SECRET_NAME_MAX + 1];
    size_t off, len;              /* the value: vault[off..off+len), NUL after it */
    bool login;                   /* a CLI's login file (JSON), not a value for a header */
    enum oauth_provider provider; /* login: whose */
    struct px_file_id id;
};

struct px_secrets {
    atomic_uint refs;
    struct entry *e; /* sorted by name */
    size_t n;
    char *vault; /* the values; NULL when n == 0 */
    size_t vault_len;
};

/* A file of the first pass: open, checked, its size noted. */
struct cand {
    char name[PX_SECRET_NAME_MAX + 1];
    int fd;
    size_t size;
    struct px_file_id id;
    enum oauth_provider provider; /* a login file's, once read */
};

struct loader {
    const char *dir;
    int dfd;
    char *err;
    size_t errlen;
    int errors;
    struct cand *c; /* sorted by name */
    size_t n;
};

/* ------------------------------------------------------------ errors */

/* Append one line to l's error text (lines joined by '\n'; a full buffer
 * ends in "..."), and count it. */
__attribute__((format(printf, 2, 3))) static void fail(struct loader *l, const char *fmt, ...)
{
    size_t used = strnlen(l->err, l->errlen);
    va_list ap;

    l->errors++;
    if (l->errlen == 0 || used + 1 >= l->errlen)
        return;
    if (used > 0)
        l->err[used++] = '\n';
    va_start(ap, fmt);
    int n = vsnprintf(l->err + used, l->errlen - used, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n >= l->errlen - used && l->errlen > 4)
        memcpy(l->err + l->errlen - 4, "...", 4);
}

/* A directory entry's name as a log line may show it: cut at 64 bytes,
 * bytes outside printable ASCII as '?'. */
static const char *shown(const char *name, char buf[72])
{
    size_t i;

    for (i = 0; name[i] != '\0' && i < 64; i++)
        buf[i] = (unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f ? '?' : name[i];
    snprintf(buf + i, 72 - i, "%s", name[i] != '\0' ? "..." : "");
    return buf;
}

/* ------------------------------------------------------------ the vault */

static atomic_flag mlock_warned = ATOMIC_FLAG_INIT;

char *px_vault_map(size_t len, size_t *mapped)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    *mapped = (len + page - 1) / page * page;
    char *p = mmap(NULL, *mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (madvise(p, *mapped, MADV_DONTDUMP) == -1) {
        int e = errno;
        munmap(p, *mapped);
        errno = e;
        return NULL;
    }
    (void)madvise(p, *mapped, MADV_WIPEONFORK); /* Linux 4.14 on */
    /* Once: it fails the same way at every reload. */
    if (mlock(p, *mapped) == -1 && !atomic_flag_test_and_set(&mlock_warned))
        px_log_warn("secret-dir: cannot lock the secrets in RAM, so they may be swapped out "
                    "(raise LimitMEMLOCK=); mlock");
    return p;
}

void px_vault_unmap(char *p, size_t mapped)
{
    if (p == NULL)
        return;
    if (mprotect(p, mapped, PROT_READ | PROT_WRITE) == -1)
        abort(); /* our own mapping: cannot fail, and must not stay unwiped */
    explicit_bzero(p, mapped);
    (void)munlock(p, mapped);
    munmap(p, mapped);
}

/* ------------------------------------------------------------ names */

struct px_file_id px_file_id_of(const struct stat *st)
{
    return (struct px_file_id){.dev = st->st_dev,
                               .ino = st->st_ino,
                               .size = st->st_size,
                               .mtime_ns =
                                   (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec};
}

bool px_file_id_eq(const struct px_file_id *a, const struct px_file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns;
}

bool px_secret_is_login_text(const char *p, size_t n)
{
    size_t i = 0;

    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
        i++;
    return i < n && p[i] == '{';
}

bool px_secret_name_ok(const char *s, size_t n)
{
    if (n < 1 || n > PX_SECRET_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        bool alnum = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9');
        if (!alnum && (i == 0 || (s[i] != '_' && s[i] != '-')))
            return false;
    }
    return true;
}

static int cmp_cand(const void *a, const void *b)
{
    return strcmp(((const struct cand *)a)->name, ((const struct cand *)b)->name);
}

/* ------------------------------------------------------------ pass one */

/* Open and check directory l->dir: 0 or -1 (failed). */
static int dir_open(struct loader *l)
{
    struct stat st;

    l->dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dfd == -1 || fstat(l->dfd, &st) == -1) {
        fail(l, "%s: secret-dir: cannot open: %s", l->dir, strerror(errno));
        return -1;
    }
    /* Whoever may write in it may replace a secret with their own. */
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        fail(l, "%s: secret-dir: mode %04o lets group or others write in it; chmod go-w it", l->dir,
             (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

/* Open entry `name` (a secret's name) of the directory and check it; adds
 * it to l->c, skips it with a warning (not a regular file), or fails. */
static void cand_open(struct loader *l, const char *name)
{
    struct stat st;
    char *path = NULL;

    if (asprintf(&path, "%s/%s", l->dir, name) == -1)
        abort();
    int fd = openat(l->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd == -1 && errno == ELOOP)
        fail(l, "%s: a symbolic link; put the secret in a regular file of its own", path);
    else if (fd == -1)
        fail(l, "%s: cannot open: %s", path, strerror(errno));
    else if (fstat(fd, &st) == -1)
        fail(l, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        px_log_warnx("%s: not a regular file; skipped (a secret is a file)", path);
    else if (st.st_uid != geteuid())
        fail(l, "%s: owned by uid %u, not by egressd's uid %u; chown it", path, (unsigned)st.st_uid,
             (unsigned)geteuid());
    else if ((st.st_mode & 077) != 0)
        fail(l, "%s: mode %04o is looser than 0600; chmod 600 it", path,
             (unsigned)(st.st_mode & 07777));
    else if (st.st_size > FILE_MAX)
        fail(l, "%s: %lld bytes, more than the %d a secret may have (it goes in an HTTP header)",
             path, (long long)st.st_size, PX_SECRET_VALUE_MAX);
    else {
        struct cand *c = &l->c[l->n++];
        snprintf(c->name, sizeof(c->name), "%s", name);
        c->fd = fd;
        c->size = (size_t)st.st_size;
        c->id = px_file_id_of(&st);
        fd = -1;
    }
    if (fd != -1)
        close(fd);
    free(path);
}

/* Every entry of the directory: secrets opened into l->c (sorted), the
 * rest skipped with a warning. */
static void dir_scan(struct loader *l)
{
    int fd = dup(l->dfd);
    DIR *d = fd == -1 ? NULL : fdopendir(fd);
    const struct dirent *de;
    char b[72];

    if (d == NULL) {
        fail(l, "%s: secret-dir: cannot read: %s", l->dir, strerror(errno));
        if (fd != -1)
            close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (!px_secret_name_ok(de->d_name, strlen(de->d_name))) {
            px_log_warnx("%s/%s: skipped: a secret's file name is [a-z0-9][a-z0-9_-]{0,62}", l->dir,
                         shown(de->d_name, b));
            continue;
        }
        if (l->n == PX_SECRETS_MAX) {
            fail(l, "%s: secret-dir: more than %d secrets", l->dir, PX_SECRETS_MAX);
            break;
        }
        cand_open(l, de->d_name);
    }
    closedir(d);
    qsort(l->c, l->n, sizeof(*l->c), cmp_cand);
}

/* ------------------------------------------------------------ pass two */

/* Whether login file text[0..len) of candidate c reads as one of the
 * three CLIs' logins (oauth/); fails it otherwise, naming the field that
 * is wrong, never a value. */
static bool login_ok(struct loader *l, struct cand *c, const char *text, size_t len)
{
    size_t mapped;
    struct oauth_login *tmp = (struct oauth_login *)px_vault_map(sizeof(*tmp), &mapped);
    char why[256];
    bool ok = false;

    if (tmp == NULL)
        snprintf(why, sizeof(why), "no memory kept out of core dumps: %s", strerror(errno));
    else if (len > OAUTH_FILE_MAX)
        snprintf(why, sizeof(why), "%zu bytes, more than a login file may have (%d)", len,
                 OAUTH_FILE_MAX);
    else
        ok = oauth_file_parse(text, len, tmp, why, sizeof(why)) == 0;
    if (ok)
        c->provider = tmp->provider;
    if (!ok)
        fail(l, "%s/%s: a login file (JSON) egressd cannot keep: %s", l->dir, c->name, why);
    px_vault_unmap((char *)tmp, mapped);
    return ok;
}

/* Read candidate c into dst (room: c->size + 1 bytes) and check the value:
 * its length after the one trailing newline is stripped, or -1 (failed;
 * the message shows no byte of it). */
static ssize_t cand_read(struct loader *l, struct cand *c, char *dst)
{
    size_t got = 0;

    while (got < c->size + 1) {
        ssize_t k = read(c->fd, dst + got, c->size + 1 - got);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1) {
            fail(l, "%s/%s: cannot read: %s", l->dir, c->name, strerror(errno));
            return -1;
        }
        if (k == 0)
            break;
        got += (size_t)k;
    }
    if (got != c->size) {
        fail(l, "%s/%s: changed while it was read; reload again", l->dir, c->name);
        return -1;
    }
    if (got >= 2 && dst[got - 2] == '\r' && dst[got - 1] == '\n')
        got -= 2;
    else if (got >= 1 && dst[got - 1] == '\n')
        got -= 1;
    if (got == 0) {
        fail(l, "%s/%s: empty; a secret needs a value", l->dir, c->name);
        return -1;
    }
    if (got > PX_SECRET_VALUE_MAX) {
        fail(l, "%s/%s: %zu bytes, more than the %d a secret may have (it goes in an HTTP header)",
             l->dir, c->name, got, PX_SECRET_VALUE_MAX);
        return -1;
    }
    if (px_secret_is_login_text(dst, got)) {
        dst[got] = '\0';
        return login_ok(l, c, dst, got) ? (ssize_t)got : -1;
    }
    for (size_t i = 0; i < got; i++)
        if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f) {
            fail(l,
                 "%s/%s: a control character at byte %zu (only a trailing newline may be "
                 "there: the value goes in one HTTP header line)",
                 l->dir, c->name, i);
            return -1;
        }
    dst[got] = '\0';
    return (ssize_t)got;
}

/* Read every candidate into a new vault of s; 0 or -1 (failed, s has no
 * vault). */
static int vault_fill(struct loader *l, struct px_secrets *s)
{
    size_t total = 0, off = 0;

    for (size_t i = 0; i < l->n; i++)
        total += l->c[i].size + 1;
    s->vault = px_vault_map(total, &s->vault_len);
    if (s->vault == NULL) {
        fail(l, "%s: cannot map %zu bytes for the secrets, kept out of core dumps: %s", l->dir,
             total, strerror(errno));
        return -1;
    }
    s->e = calloc(l->n, sizeof(*s->e));
    if (s->e == NULL)
        abort();
    for (size_t i = 0; i < l->n; i++) {
        ssize_t len = cand_read(l, &l->c[i], s->vault + off);
        if (len >= 0) {
            struct entry *e = &s->e[s->n++];
            memcpy(e->name, l->c[i].name, sizeof(e->name));
            e->off = off;
            e->len = (size_t)len;
            e->login = px_secret_is_login_text(s->vault + off, e->len);
            e->provider = l->c[i].provider;
            e->id = l->c[i].id;
        }
        off += l->c[i].size + 1;
    }
    if (l->errors > 0 || mprotect(s->vault, s->vault_len, PROT_READ) == -1) {
        if (l->errors == 0)
            fail(l, "%s: cannot make the secrets read-only: %s", l->dir, strerror(errno));
        px_vault_unmap(s->vault, s->vault_len);
        s->vault = NULL;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the store */

static void store_free(struct px_secrets *s)
{
    px_vault_unmap(s->vault, s->vault_len);
    free(s->e);
    free(s);
}

int px_secrets_load(const char *dir, struct px_secrets **out, char *err, size_t errlen)
{
    struct loader l = {.dir = dir, .dfd = -1, .err = err, .errlen = errlen};
    struct px_secrets *s = calloc(1, sizeof(*s));

    if (s == NULL)
        abort();
    atomic_init(&s->refs, 1);
    *out = NULL;
    if (errlen > 0)
        err[0] = '\0';
    if (dir == NULL || dir[0] == '\0') {
        *out = s;
        return 0;
    }
    l.c = calloc(PX_SECRETS_MAX, sizeof(*l.c));
    if (l.c == NULL)
        abort();
    if (dir_open(&l) == 0)
        dir_scan(&l);
    if (l.n > 0)
        vault_fill(&l, s); /* even after errors: they are all reported in one load */
    for (size_t i = 0; i < l.n; i++)
        close(l.c[i].fd);
    free(l.c);
    if (l.dfd != -1)
        close(l.dfd);
    if (l.errors > 0) {
        store_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

struct px_secrets *px_secrets_ref(struct px_secrets *s)
{
    atomic_fetch_add(&s->refs, 1);
    return s;
}

void px_secrets_unref(struct px_secrets *s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1)
        store_free(s);
}

static int cmp_name(const void *key, const void *e)
{
    return strcmp(key, ((const struct entry *)e)->name);
}

bool px_secrets_get(const struct px_secrets *s, const char *name, const char **p, size_t *len)
{
    const struct entry *e = s && s->n ? bsearch(name, s->e, s->n, sizeof(*s->e), cmp_name) : NULL;

    if (e == NULL)
        return false;
    *p = s->vault + e->off;
    *len = e->len;
    return true;
}

size_t px_secrets_count(const struct px_secrets *s)
{
    return s ? s->n : 0;
}

const char *px_secrets_name(const struct px_secrets *s, size_t i)
{
    return s && i < s->n ? s->e[i].name : NULL;
}

const char *px_secrets_login_provider(const struct px_secrets *s, const char *name)
{
    const struct entry *e = s && s->n ? bsearch(name, s->e, s->n, sizeof(*s->e), cmp_name) : NULL;

    return e != NULL && e->login ? oauth_provider_name(e->provider) : NULL;
}

bool px_secrets_login(const struct px_secrets *s, const char *name, struct px_file_id *id)
{
    const struct entry *e = s && s->n ? bsearch(name, s->e, s->n, sizeof(*s->e), cmp_name) : NULL;

    if (e == NULL || !e->login)
        return false;
    if (id != NULL)
        *id = e->id;
    return true;
}
