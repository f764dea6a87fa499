/* ops_git.c - push, pull, fetch_changes and apply: a repository's history
 * goes into a sandbox as a git bundle, and the sandbox's branches come back
 * as a bundle into refs/remotes/sandbox/NAME/ only, for review (ops.h).
 *
 * Nothing of the host is mounted or shared with the guest: bundles move
 * through the guest agent (xfer.h).  What comes back is judged before git
 * takes it in (bundle.h: size, refs, objects), taken into a scratch
 * repository first (fsck, blob sizes), and only then fetched, with the
 * host's git hardened (git.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle.h"
#include "git.h"
#include "guest.h"
#include "ops.h"
#include "review.h"
#include "sbx.h"
#include "vm.h"
#include "xfer.h"

#define OUT_MAX   (64L * 1024 * 1024)
#define REFS_MAX  32
#define OID_LEN   40
#define MEM_SLACK (1024L * 1024 * 1024)

struct repo {
    char dir[PATH_MAX];
    char gitdir[PATH_MAX]; /* the common git dir (objects, refs) */
};

/* ---- small helpers -------------------------------------------------- */

/* DIR/LEAF into out (cap bytes).  -1, with "WHAT: DIR/LEAF: the path is too
 * long" in err, when it does not fit. */
static int path_join(char *out, size_t cap, const char *dir, const char *leaf, const char *what,
                     char *err, size_t errlen)
{
    int n = snprintf(out, cap, "%s/%s", dir, leaf);

    if (n < 0 || (size_t)n >= cap) {
        snprintf(err, errlen, "%s: %s/%s: the path is too long", what, dir, leaf);
        return -1;
    }
    return 0;
}

static void chomp(char *s)
{
    size_t n = strlen(s);

    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

/* The first line of git's output into buf; -1 when git failed. */
static int git_line(const char *dir, const char *const *args, char *buf, size_t len, char *err,
                    size_t errlen)
{
    char *out;

    if (sbx_git(dir, args, &out, 1 << 20, err, errlen))
        return -1;
    chomp(out);
    snprintf(buf, len, "%s", out);
    free(out);
    return 0;
}

static int valid_label(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= 64 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
            return 0;
    return strstr(s, "..") == NULL && strcmp(s + n - (n > 5 ? 5 : n), ".lock") != 0;
}

static int repo_open(const char *dir, struct repo *r, char *err, size_t errlen)
{
    const char *args[] = {"rev-parse", "--path-format=absolute", "--git-common-dir", NULL};

    if (!realpath(dir, r->dir)) {
        snprintf(err, errlen, "repo %s: %s", dir, strerror(errno));
        return -1;
    }
    if (git_line(r->dir, args, r->gitdir, sizeof r->gitdir, err, errlen)) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (repo %s is not a git repository)", r->dir);
        return -1;
    }
    return 0;
}

static int write_file(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ssize_t w = fd < 0 ? -1 : write(fd, data, len);

    if (fd < 0 || w != (ssize_t)len || close(fd) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (fd >= 0 && w != (ssize_t)len)
            close(fd);
        return -1;
    }
    return 0;
}

static unsigned char *read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    struct stat st;

    if (!f)
        return NULL;
    if (fstat(fileno(f), &st) || (size_t)st.st_size > max ||
        !(buf = malloc((size_t)st.st_size + 1))) {
        fclose(f);
        return NULL;
    }
    *len = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    return buf;
}

static int unlink_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 && errno != ENOENT;
}

/* A fresh private directory under state-dir/git/ for one operation. */
static int work_dir(struct sbx *s, char *buf, size_t len, char *err, size_t errlen)
{
    snprintf(buf, len, "%s", s->cfg.state_dir);
    if (mkdir(buf, 0700) && errno != EEXIST)
        goto fail;
    snprintf(buf, len, "%s/git", s->cfg.state_dir);
    if (mkdir(buf, 0700) && errno != EEXIST)
        goto fail;
    snprintf(buf, len, "%s/git/tmp-XXXXXX", s->cfg.state_dir);
    if (mkdtemp(buf))
        return 0;
fail:
    snprintf(err, errlen, "state-dir: %s: %s", buf, strerror(errno));
    return -1;
}

static void work_dir_remove(const char *dir)
{
    nftw(dir, unlink_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- the record of pushes: state-dir/git/VMID.json ------------------ */

static void record_path(struct sbx *s, const struct sbx_vm *vm, char *buf, size_t len)
{
    snprintf(buf, len, "%s/git/%d.json", s->cfg.state_dir, vm->vmid);
}

/* {name, repos: {DIR: {guest_path, base, branch, pushed}}}; a record of an
 * earlier sandbox with the same VMID is not this one's. */
static json_t *record_load(struct sbx *s, const struct sbx_vm *vm)
{
    char path[PATH_MAX];
    json_t *rec;

    record_path(s, vm, path, sizeof path);
    rec = json_load_file(path, 0, NULL);
    if (!json_is_object(rec) || !json_is_string(json_object_get(rec, "name")) ||
        strcmp(json_string_value(json_object_get(rec, "name")), vm->name) != 0 ||
        !json_is_object(json_object_get(rec, "repos"))) {
        json_decref(rec);
        rec = json_pack("{s:s,s:{}}", "name", vm->name, "repos");
    }
    return rec;
}

static int record_save(struct sbx *s, const struct sbx_vm *vm, json_t *rec, char *err,
                       size_t errlen)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];

    record_path(s, vm, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.new", path);
    if (json_dump_file(rec, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) || rename(tmp, path)) {
        snprintf(err, errlen, "push: recording the base in %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- push ------------------------------------------------------------ */

/* The refs to bundle (full names) and the commit and short name of the
 * first, which the guest checks out and pull diffs against. */
static int push_refs(const struct repo *r, json_t *given, json_t *refs, char *base, char *branch,
                     size_t len, char *err, size_t errlen)
{
    const char *head[] = {"symbolic-ref", "-q", "HEAD", NULL};
    char full[1024], arg[1100];
    json_t *v;
    size_t i;

    if (json_array_size(given) == 0) {
        if (git_line(r->dir, head, full, sizeof full, err, errlen)) {
            snprintf(err, errlen, "push: HEAD of %s is not a branch: give --ref", r->dir);
            return -1;
        }
        json_array_append_new(refs, json_string(full));
    }
    json_array_foreach(given, i, v)
    {
        const char *name = json_string_value(v);
        const char *sym[] = {"rev-parse", "--symbolic-full-name", "--verify", "-q", arg, NULL};
        if (!name || name[0] == '-' || json_array_size(refs) == REFS_MAX) {
            snprintf(err, errlen, "push: ref: expected up to %d branch or tag names", REFS_MAX);
            return -1;
        }
        snprintf(arg, sizeof arg, "%s", name);
        if (git_line(r->dir, sym, full, sizeof full, err, errlen) ||
            (strncmp(full, "refs/heads/", 11) != 0 && strncmp(full, "refs/tags/", 10) != 0)) {
            snprintf(err, errlen, "push: '%s' is no branch or tag of %s", name, r->dir);
            return -1;
        }
        json_array_append_new(refs, json_string(full));
    }
    snprintf(arg, sizeof arg, "%s^{commit}", json_string_value(json_array_get(refs, 0)));
    {
        const char *commit[] = {"rev-parse", "--verify", "-q", arg, NULL};
        if (git_line(r->dir, commit, base, OID_LEN + 1, err, errlen))
            return -1;
    }
    snprintf(branch, len, "%s",
             json_string_value(json_array_get(refs, 0)) +
                 (strncmp(json_string_value(json_array_get(refs, 0)), "refs/heads/", 11) == 0
                      ? 11
                      : 10));
    return 0;
}

static unsigned char *host_bundle(const struct repo *r, json_t *refs, const char *work, size_t *len,
                                  char *err, size_t errlen)
{
    const char *args[REFS_MAX + 8];
    char path[PATH_MAX];
    unsigned char *data;
    json_t *v;
    size_t i, n = 0;

    if (path_join(path, sizeof path, work, "push.bundle", "push", err, errlen))
        return NULL;
    args[n++] = "bundle";
    args[n++] = "create";
    args[n++] = "-q";
    args[n++] = path;
    json_array_foreach(refs, i, v) args[n++] = json_string_value(v);
    args[n] = NULL;
    if (sbx_git(r->dir, args, NULL, 0, err, errlen))
        return NULL;
    data = read_file(path, (size_t)LONG_MAX, len);
    if (!data)
        snprintf(err, errlen, "push: reading %s: %s", path, strerror(errno));
    return data;
}

/* In the guest, as root: the user's home, where the clone goes (which
 * must not exist yet), and a fresh directory for the bundle. */
static const char prepare_script[] =
    "set -e; u=$1; repo=$2; dest=$3\n"
    "home=$(getent passwd \"$u\" | cut -d: -f6)\n"
    "[ -n \"$home\" ] || { echo \"the sandbox has no user '$u' (guest-user)\" >&2; exit 3; }\n"
    "[ -n \"$dest\" ] || dest=$home/repos/$repo\n"
    "[ ! -e \"$dest\" ] || { echo \"$dest exists already in the sandbox\" >&2; exit 4; }\n"
    "d=$(mktemp -d /tmp/sbx-push.XXXXXX); chmod 755 \"$d\"\n"
    "printf '%s\\n%s\\n%s\\n' \"$home\" \"$dest\" \"$d\"";

/* As the user: clone the bundle, check out the branch, drop the remote. */
static const char clone_script[] =
    "set -e; u=$1; home=$2; dest=$3; b=$4; br=$5; cd /\n"
    "as() { runuser -u \"$u\" -- env HOME=\"$home\" \"$@\"; }\n"
    "as mkdir -p -- \"$(dirname -- \"$dest\")\"\n"
    "as git clone -q --branch \"$br\" -- \"$b\" \"$dest\" || { rm -rf -- \"$(dirname -- \"$b\")\"; "
    "exit 5; }\n"
    "rm -rf -- \"$(dirname -- \"$b\")\"\n"
    "as git -C \"$dest\" remote remove origin";

/* Three lines of a guest script's output. */
static int three_lines(char *out, char **a, char **b, char **c)
{
    *a = out;
    if (!(*b = strchr(*a, '\n')))
        return -1;
    *(*b)++ = '\0';
    if (!(*c = strchr(*b, '\n')))
        return -1;
    *(*c)++ = '\0';
    chomp(*c);
    return **a && **b && **c ? 0 : -1;
}

static int push_guest(struct sbx *s, const struct sbx_vm *vm, const struct repo *r,
                      const char *path, const unsigned char *data, size_t len, const char *branch,
                      json_t *result, char *err, size_t errlen)
{
    const char *base = strrchr(r->dir, '/') + 1;
    const char *pargs[] = {s->cfg.guest_user, *base ? base : "repo", path ? path : "", NULL};
    char *out = NULL, *home, *dest, *tmp, bundle[PATH_MAX];
    int rc;

    if (sbx_guest_script(s, vm->node, vm->vmid, "push: preparing the sandbox", prepare_script,
                         pargs, s->cfg.exec_timeout_ms, &out, err, errlen))
        return -1;
    if (three_lines(out, &home, &dest, &tmp)) {
        snprintf(err, errlen, "push: the sandbox's answer is not home, path and directory");
        free(out);
        return -1;
    }
    rc = path_join(bundle, sizeof bundle, tmp, "repo.bundle", "push", err, errlen);
    if (rc == 0)
        rc = sbx_xfer_put(s, vm->node, vm->vmid, bundle, data, len, err, errlen);
    if (rc == 0) {
        const char *cargs[] = {s->cfg.guest_user, home, dest, bundle, branch, NULL};
        rc = sbx_guest_script(s, vm->node, vm->vmid, "push: git clone in the sandbox", clone_script,
                              cargs, s->cfg.exec_timeout_ms, NULL, err, errlen);
    }
    if (rc == 0)
        json_object_set_new(result, "guest_path", json_string(dest));
    free(out);
    return rc;
}

static int push_record(struct sbx *s, const struct sbx_vm *vm, const struct repo *r, json_t *result,
                       char *err, size_t errlen)
{
    json_t *rec = record_load(s, vm), *entry;
    char now[32];
    time_t t = time(NULL);
    int rc;

    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    entry = json_pack("{s:O,s:O,s:O,s:s}", "guest_path", json_object_get(result, "guest_path"),
                      "base", json_object_get(result, "base"), "branch",
                      json_object_get(result, "branch"), "pushed", now);
    json_object_set_new(json_object_get(rec, "repos"), r->dir, entry);
    rc = record_save(s, vm, rec, err, errlen);
    json_decref(rec);
    return rc;
}

int sbx_op_push(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "repo", "ref", "path", NULL};
    const char *name, *dir, *path;
    struct repo r;
    struct sbx_vm vm;
    char base[OID_LEN + 1], branch[1024], work[PATH_MAX];
    json_t *refs = json_array(), *res = NULL;
    unsigned char *data = NULL;
    size_t len = 0;
    int rc = -1;

    *out = NULL;
    sbx_progress_reset(&s->progress, 0);
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(dir = sbx_args_string(args, "repo", 1, err, errlen)))
        goto done;
    path = sbx_args_string(args, "path", 0, err, errlen);
    if (path && path[0] != '/') {
        snprintf(err, errlen, "push: path: expected an absolute path in the sandbox");
        goto done;
    }
    if (repo_open(dir, &r, err, errlen) ||
        push_refs(&r, json_object_get(args, "ref"), refs, base, branch, sizeof branch, err,
                  errlen) ||
        sbx_vm_find(s, name, &vm, err, errlen) || work_dir(s, work, sizeof work, err, errlen))
        goto done;
    data = host_bundle(&r, refs, work, &len, err, errlen);
    work_dir_remove(work);
    if (!data)
        goto done;
    res = json_pack("{s:s,s:s,s:O,s:s,s:s,s:s,s:I}", "name", vm.name, "repo", r.dir, "refs", refs,
                    "base", base, "branch", branch, "user", s->cfg.guest_user, "bundle_bytes",
                    (json_int_t)len);
    if (push_guest(s, &vm, &r, path, data, len, branch, res, err, errlen) ||
        push_record(s, &vm, &r, res, err, errlen))
        goto done;
    *out = res;
    res = NULL;
    rc = 0;
done:
    free(data);
    json_decref(res);
    json_decref(refs);
    return rc;
}

/* ---- pull ------------------------------------------------------------ */

/* In the guest: the user bundles the branches (or the refs given) of the
 * repository; root prints the directory, the size and the SHA-256. */
static const char bundle_script[] =
    "set -e; u=$1; repo=$2; shift 2; cd /\n"
    "home=$(getent passwd \"$u\" | cut -d: -f6)\n"
    "[ -n \"$home\" ] || { echo \"the sandbox has no user '$u' (guest-user)\" >&2; exit 3; }\n"
    "d=$(mktemp -d /tmp/sbx-pull.XXXXXX); chown \"$u\" \"$d\"\n"
    "[ $# -gt 0 ] || set -- --branches\n"
    "runuser -u \"$u\" -- env HOME=\"$home\" git -C \"$repo\" bundle create -q \"$d/repo.bundle\" "
    "\"$@\" >&2 || { rm -rf -- \"$d\"; exit 5; }\n"
    "[ -f \"$d/repo.bundle\" ] && [ ! -L \"$d/repo.bundle\" ] || "
    "{ echo 'the bundle is not a regular file' >&2; rm -rf -- \"$d\"; exit 6; }\n"
    "echo \"$d\"; stat -c %s -- \"$d/repo.bundle\"; sha256sum -- \"$d/repo.bundle\" | cut -c1-64";

static void guest_cleanup(struct sbx *s, const struct sbx_vm *vm, const char *dir)
{
    const char *args[] = {dir, NULL};
    char ignored[256];

    if (strncmp(dir, "/tmp/sbx-pull.", 14) == 0 && !strstr(dir, ".."))
        (void)sbx_guest_script(s, vm->node, vm->vmid, "pull: cleaning up", "rm -rf -- \"$1\"", args,
                               s->cfg.exec_timeout_ms, NULL, ignored, sizeof ignored);
}

/* The bundle out of the guest, within pull-max-bytes. */
static unsigned char *guest_bundle(struct sbx *s, const struct sbx_vm *vm, const char *path,
                                   json_t *refs, size_t *len, char *err, size_t errlen)
{
    const char *args[REFS_MAX + 4];
    char *out = NULL, *dir, *size, *sha;
    unsigned char *data = NULL;
    size_t i, n = 0;
    json_t *v;
    long bytes;
    int parsed;

    args[n++] = s->cfg.guest_user;
    args[n++] = path;
    json_array_foreach(refs, i, v) if (n < REFS_MAX + 2) args[n++] = json_string_value(v);
    args[n] = NULL;
    if (sbx_guest_script(s, vm->node, vm->vmid, "pull: git bundle create in the sandbox",
                         bundle_script, args, s->cfg.exec_timeout_ms, &out, err, errlen))
        return NULL;
    parsed = three_lines(out, &dir, &size, &sha) == 0;
    if (!parsed || strlen(sha) != 64 || (bytes = atol(size)) < 0) {
        snprintf(err, errlen, "pull: the sandbox's answer is not directory, size and SHA-256");
    } else if (bytes > s->cfg.pull_max_bytes) {
        snprintf(err, errlen, "pull: the bundle is %ld bytes, more than pull-max-bytes %ld", bytes,
                 s->cfg.pull_max_bytes);
    } else {
        char file[PATH_MAX];
        if (path_join(file, sizeof file, dir, "repo.bundle", "pull", err, errlen) ||
            sbx_xfer_get(s, vm->node, vm->vmid, file, bytes, sha, &data, len, err, errlen))
            data = NULL;
    }
    if (parsed)
        guest_cleanup(s, vm, dir);
    free(out);
    return data;
}

static long mem_max(const struct sbx *s)
{
    return 2 * s->cfg.pull_max_blob_bytes + s->cfg.pull_max_bytes + MEM_SLACK;
}

/* The largest blob in the scratch repository's packs, against the cap. */
static int blob_sizes(struct sbx *s, const char *scratch, char *err, size_t errlen)
{
    char pattern[PATH_MAX], names[PATH_MAX];
    const char *args[] = {"cat-file", "--batch-check=%(objectsize) %(objecttype) %(objectname)",
                          NULL};
    struct sbx_git_io io = {names, mem_max(s)};
    glob_t g;
    FILE *f;
    char *out = NULL, *line;
    int rc = 0;

    if (path_join(pattern, sizeof pattern, scratch, "objects/pack/*.idx", "pull", err, errlen) ||
        path_join(names, sizeof names, scratch, "names.txt", "pull", err, errlen))
        return -1;
    if (!(f = fopen(names, "w"))) {
        snprintf(err, errlen, "pull: %s: %s", names, strerror(errno));
        return -1;
    }
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            size_t n, m;
            unsigned char *idx = read_file(g.gl_pathv[i], (size_t)LONG_MAX, &n);
            char *list = idx ? sbx_pack_idx_names(idx, n, &m) : NULL;
            if (list)
                fwrite(list, 1, m, f);
            free(list);
            free(idx);
        }
        globfree(&g);
    }
    fclose(f);
    if (sbx_git_run(scratch, args, &io, &out, NULL, OUT_MAX, err, errlen) != 0) {
        free(out);
        return -1;
    }
    for (line = strtok(out, "\n"); line && rc == 0; line = strtok(NULL, "\n")) {
        long size = 0;
        char type[16] = "", oid[48] = "";
        if (sscanf(line, "%ld %15s %47s", &size, type, oid) == 3 && strcmp(type, "blob") == 0 &&
            size > s->cfg.pull_max_blob_bytes) {
            snprintf(err, errlen,
                     "pull: the bundle holds a blob of %ld bytes (%s), more than "
                     "pull-max-blob-bytes %ld",
                     size, oid, s->cfg.pull_max_blob_bytes);
            rc = -1;
        }
    }
    free(out);
    return rc;
}

/* Take the bundle into a scratch repository that borrows the host's
 * objects: git bundle verify, a fetch with fsck, the blob sizes. */
static int scratch_check(struct sbx *s, const struct repo *r, const char *work, const char *bundle,
                         char *err, size_t errlen)
{
    char scratch[PATH_MAX], alt[PATH_MAX + 16], line[PATH_MAX + 16];
    const char *init[] = {"init", "-q", "--bare", scratch, NULL};
    const char *verify[] = {"bundle", "verify", "-q", bundle, NULL};
    const char *fetch[] = {"-c",
                           "protocol.file.allow=always",
                           "-c",
                           "fetch.unpackLimit=1",
                           "fetch",
                           "-q",
                           "--no-tags",
                           "--no-write-fetch-head",
                           "--no-recurse-submodules",
                           bundle,
                           "+refs/heads/*:refs/heads/*",
                           NULL};
    struct sbx_git_io io = {NULL, mem_max(s)};

    if (path_join(scratch, sizeof scratch, work, "scratch.git", "pull", err, errlen) ||
        sbx_git(NULL, init, NULL, 0, err, errlen) ||
        path_join(alt, sizeof alt, scratch, "objects/info/alternates", "pull", err, errlen) ||
        path_join(line, sizeof line, r->gitdir, "objects\n", "pull", err, errlen))
        return -1;
    if (write_file(alt, line, strlen(line), err, errlen))
        return -1;
    if (sbx_git_run(scratch, verify, &io, NULL, NULL, 0, err, errlen) != 0) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (pull: git bundle verify refused the bundle)");
        return -1;
    }
    if (sbx_git_run(scratch, fetch, &io, NULL, NULL, 0, err, errlen) != 0) {
        size_t n = strlen(err);
        snprintf(err + n, errlen - n, " (pull: the bundle's objects were refused)");
        return -1;
    }
    return blob_sizes(s, scratch, err, errlen);
}

static int host_fetch(struct sbx *s, const struct repo *r, const char *name, const char *bundle,
                      char *err, size_t errlen)
{
    char spec[200];
    const char *fetch[] = {"-c",
                           "protocol.file.allow=always",
                           "fetch",
                           "-q",
                           "--no-tags",
                           "--no-write-fetch-head",
                           "--no-recurse-submodules",
                           "--prune",
                           bundle,
                           spec,
                           NULL};
    struct sbx_git_io io = {NULL, mem_max(s)};

    snprintf(spec, sizeof spec, "+refs/heads/*:refs/remotes/sandbox/%s/*", name);
    return sbx_git_run(r->dir, fetch, &io, NULL, NULL, 0, err, errlen) == 0 ? 0 : -1;
}

/* The base to diff a branch against: the pushed one when the repository
 * has it, else where the branch meets HEAD. */
static int pick_base(const struct repo *r, const char *pushed, const char *commit, char *base,
                     char *err, size_t errlen)
{
    char arg[64];
    const char *has[] = {"rev-parse", "--verify", "-q", arg, NULL};
    const char *mb[] = {"merge-base", "HEAD", commit, NULL};

    if (pushed && strlen(pushed) == OID_LEN) {
        snprintf(arg, sizeof arg, "%s^{commit}", pushed);
        if (git_line(r->dir, has, base, OID_LEN + 1, err, errlen) == 0)
            return 0;
    }
    if (git_line(r->dir, mb, base, OID_LEN + 1, err, errlen)) {
        snprintf(err, errlen, "pull: %.12s has no commit in common with HEAD of %s", commit,
                 r->dir);
        return -1;
    }
    return 0;
}

static int review_all(struct sbx *s, const struct repo *r, const char *name, json_t *refs,
                      const char *pushed, json_t *res, char *err, size_t errlen)
{
    json_t *branches = json_array(), *v;
    size_t i, flagged = 0;

    json_object_set_new(res, "branches", branches);
    json_array_foreach(refs, i, v)
    {
        const char *ref = json_string_value(json_object_get(v, "ref"));
        const char *commit = json_string_value(json_object_get(v, "commit"));
        char base[OID_LEN + 1], remote[1200];
        json_t *rv;
        if (pick_base(r, pushed, commit, base, err, errlen) ||
            sbx_review(&s->cfg, r->dir, base, commit, &rv, err, errlen))
            return -1;
        snprintf(remote, sizeof remote, "refs/remotes/sandbox/%s/%s", name, ref + 11);
        json_object_set_new(rv, "branch", json_string(ref + 11));
        json_object_set_new(rv, "ref", json_string(remote));
        flagged += json_array_size(json_object_get(rv, "flags"));
        json_array_append_new(branches, rv);
    }
    json_object_set_new(res, "flagged", json_integer((json_int_t)flagged));
    return 0;
}

/* Pull the branches of guest_path in vm into r (shared by pull and
 * fetch_changes). */
static int pull_into(struct sbx *s, const struct sbx_vm *vm, const struct repo *r,
                     const char *guest_path, json_t *refs, const char *pushed, json_t **out,
                     char *err, size_t errlen)
{
    char work[PATH_MAX], bundle[PATH_MAX];
    unsigned char *data;
    size_t len;
    long objects = 0;
    json_t *heads = NULL, *res;
    int rc = -1;

    *out = NULL;
    if (!(data = guest_bundle(s, vm, guest_path, refs, &len, err, errlen)))
        return -1;
    if (sbx_bundle_check(data, len, s->cfg.pull_max_refs, s->cfg.pull_max_objects, &heads, &objects,
                         err, errlen) ||
        work_dir(s, work, sizeof work, err, errlen)) {
        free(data);
        json_decref(heads);
        return -1;
    }
    res = json_pack("{s:s,s:s,s:s,s:I,s:I}", "name", vm->name, "repo", r->dir, "guest_path",
                    guest_path, "bundle_bytes", (json_int_t)len, "objects", (json_int_t)objects);
    snprintf(bundle, sizeof bundle, "refs/remotes/sandbox/%s/", vm->name);
    json_object_set_new(res, "fetched_into", json_string(bundle));
    if (path_join(bundle, sizeof bundle, work, "pull.bundle", "pull", err, errlen) == 0 &&
        write_file(bundle, data, len, err, errlen) == 0 &&
        scratch_check(s, r, work, bundle, err, errlen) == 0 &&
        host_fetch(s, r, vm->name, bundle, err, errlen) == 0 &&
        review_all(s, r, vm->name, heads, pushed, res, err, errlen) == 0)
        rc = 0;
    work_dir_remove(work);
    free(data);
    json_decref(heads);
    if (rc)
        json_decref(res);
    else
        *out = res;
    return rc;
}

/* What push recorded for r in vm: guest path and base (borrowed from rec). */
static json_t *pushed_entry(json_t *rec, const struct repo *r)
{
    return json_object_get(json_object_get(rec, "repos"), r->dir);
}

/* Ref names for the guest's git bundle create: strings, no options. */
static int names_ok(json_t *refs)
{
    json_t *v;
    size_t i;

    json_array_foreach(refs, i, v)
    {
        if (!json_is_string(v) || json_string_value(v)[0] == '-' || !json_string_value(v)[0])
            return 0;
    }
    return 1;
}

int sbx_op_pull(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "repo", "path", "ref", NULL};
    const char *name, *dir, *path;
    struct repo r;
    struct sbx_vm vm;
    json_t *rec = NULL, *entry, *refs = json_object_get(args, "ref");
    int rc;

    *out = NULL;
    sbx_progress_reset(&s->progress, 0);
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(dir = sbx_args_string(args, "repo", 1, err, errlen)) || repo_open(dir, &r, err, errlen) ||
        sbx_vm_find(s, name, &vm, err, errlen))
        return -1;
    if (refs && (!json_is_array(refs) || json_array_size(refs) > REFS_MAX || !names_ok(refs))) {
        snprintf(err, errlen, "pull: ref: expected up to %d branch names", REFS_MAX);
        return -1;
    }
    rec = record_load(s, &vm);
    entry = pushed_entry(rec, &r);
    path = sbx_args_string(args, "path", 0, err, errlen);
    if (!path)
        path = json_string_value(json_object_get(entry, "guest_path"));
    if (!path || path[0] != '/') {
        snprintf(err, errlen, "pull: %s was never pushed to %s: give --path GUEST_REPO", r.dir,
                 vm.name);
        json_decref(rec);
        return -1;
    }
    rc = pull_into(s, &vm, &r, path, refs, json_string_value(json_object_get(entry, "base")), out,
                   err, errlen);
    json_decref(rec);
    return rc;
}

int sbx_op_fetch_changes(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "repo", NULL};
    const char *name, *label, *dir;
    struct repo r;
    struct sbx_vm vm;
    json_t *rec, *entry;
    int rc;

    *out = NULL;
    sbx_progress_reset(&s->progress, 0);
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(label = sbx_args_string(args, "repo", 1, err, errlen)))
        return -1;
    if (!(dir = sbx_config_mcp_repo(&s->cfg, label))) {
        snprintf(err, errlen, "fetch_changes: no repository '%.64s' (the administrator's mcp-repo)",
                 label);
        return -1;
    }
    if (repo_open(dir, &r, err, errlen) || sbx_vm_find(s, name, &vm, err, errlen))
        return -1;
    rec = record_load(s, &vm);
    entry = pushed_entry(rec, &r);
    if (!entry) {
        snprintf(err, errlen,
                 "fetch_changes: repository '%s' was never pushed to %s (the "
                 "administrator pushes it with sandboxctl push)",
                 label, vm.name);
        json_decref(rec);
        return -1;
    }
    rc = pull_into(s, &vm, &r, json_string_value(json_object_get(entry, "guest_path")), NULL,
                   json_string_value(json_object_get(entry, "base")), out, err, errlen);
    if (rc == 0)
        json_object_set_new(*out, "repo", json_string(label));
    json_decref(rec);
    return rc;
}

/* ---- apply ----------------------------------------------------------- */

struct plan {
    char commit[OID_LEN + 1], old[OID_LEN + 1], base[OID_LEN + 1];
    char src[1200], dst[1200];
    int checked_out;
};

static int rev(const struct repo *r, const char *name, char *oid, char *err, size_t errlen)
{
    char arg[1300];
    const char *args[] = {"rev-parse", "--verify", "-q", arg, NULL};

    snprintf(arg, sizeof arg, "%s^{commit}", name);
    if (git_line(r->dir, args, oid, OID_LEN + 1, err, errlen)) {
        snprintf(err, errlen, "apply: no %s in %s", name, r->dir);
        return -1;
    }
    return 0;
}

static int is_ancestor(const struct repo *r, const char *a, const char *b)
{
    const char *args[] = {"merge-base", "--is-ancestor", a, b, NULL};
    char err[256];

    return sbx_git_run(r->dir, args, NULL, NULL, NULL, 0, err, sizeof err) == 0;
}

static int make_plan(const struct repo *r, const char *name, const char *onto, const char *from,
                     struct plan *p, char *err, size_t errlen)
{
    const char *head[] = {"symbolic-ref", "-q", "HEAD", NULL};
    const char *bare[] = {"rev-parse", "--is-bare-repository", NULL};
    char cur[1200] = "", isbare[16] = "";
    const char *mb[] = {"merge-base", p->old, p->commit, NULL};

    snprintf(p->src, sizeof p->src, "refs/remotes/sandbox/%s/%s", name, from);
    snprintf(p->dst, sizeof p->dst, "refs/heads/%s", onto);
    if (rev(r, p->src, p->commit, err, errlen) || rev(r, p->dst, p->old, err, errlen))
        return -1;
    if (git_line(r->dir, mb, p->base, sizeof p->base, err, errlen)) {
        snprintf(err, errlen, "apply: %s and %s have no commit in common", p->src, p->dst);
        return -1;
    }
    (void)git_line(r->dir, head, cur, sizeof cur, err, errlen);
    (void)git_line(r->dir, bare, isbare, sizeof isbare, err, errlen);
    p->checked_out = strcmp(cur, p->dst) == 0 && strcmp(isbare, "false") == 0;
    return 0;
}

static const char *how(const struct repo *r, const struct plan *p)
{
    if (strcmp(p->commit, p->old) == 0 || is_ancestor(r, p->commit, p->old))
        return "nothing";
    return is_ancestor(r, p->old, p->commit) ? "fast-forward" : "merge";
}

static int do_apply(const struct repo *r, const char *name, const char *from, const struct plan *p,
                    const char *kind, char *err, size_t errlen)
{
    char msg[300];
    const char *ff[] = {"merge", "--ff-only", "-q", p->commit, NULL};
    const char *upd[] = {"update-ref", "-m", msg, p->dst, p->commit, p->old, NULL};
    const char *merge[] = {"merge", "--no-ff", "--no-edit", "-q", "-m", msg, p->commit, NULL};
    const char *abort_[] = {"merge", "--abort", NULL};
    char ignored[256];

    if (strcmp(kind, "nothing") == 0)
        return 0;
    if (strcmp(kind, "fast-forward") == 0) {
        snprintf(msg, sizeof msg, "sandboxctl apply %s/%s", name, from);
        return sbx_git(r->dir, p->checked_out ? ff : upd, NULL, 0, err, errlen);
    }
    if (!p->checked_out) {
        snprintf(err, errlen,
                 "apply: %s is not checked out in %s: only a fast-forward is possible without "
                 "a working tree (check it out to merge)",
                 p->dst + 11, r->dir);
        return -1;
    }
    snprintf(msg, sizeof msg, "Merge sandbox %s branch %s", name, from);
    if (sbx_git(r->dir, merge, NULL, 0, err, errlen) == 0)
        return 0;
    (void)sbx_git(r->dir, abort_, NULL, 0, ignored, sizeof ignored);
    return -1;
}

static int flag_bool(json_t *args, const char *key)
{
    return json_is_true(json_object_get(args, key));
}

int sbx_op_apply(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "name", "repo", "onto", "from", "commit", "apply", "accept_protected", NULL};
    const char *name, *dir, *onto, *from, *want;
    struct repo r;
    struct plan p;
    json_t *rv = NULL;
    const char *kind;
    size_t nflags;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(dir = sbx_args_string(args, "repo", 1, err, errlen)) ||
        !(onto = sbx_args_string(args, "onto", 1, err, errlen)))
        return -1;
    from = sbx_args_string(args, "from", 0, err, errlen);
    from = from ? from : onto;
    if (!valid_label(name) || strstr(onto, "..") || strstr(from, "..") || onto[0] == '-' ||
        from[0] == '-') {
        snprintf(err, errlen, "apply: expected a sandbox name and branch names");
        return -1;
    }
    if (repo_open(dir, &r, err, errlen) || make_plan(&r, name, onto, from, &p, err, errlen) ||
        sbx_review(&s->cfg, r.dir, p.base, p.commit, &rv, err, errlen))
        return -1;
    kind = how(&r, &p);
    nflags = json_array_size(json_object_get(rv, "flags"));
    *out = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:b}", "name", name, "onto", onto, "from", from,
                     "commit", p.commit, "old", p.old, "how", kind, "review", rv, "applied", 0);
    want = sbx_args_string(args, "commit", 0, err, errlen);
    if (!flag_bool(args, "apply"))
        return 0;
    if (want && strcmp(want, p.commit) != 0) {
        snprintf(err, errlen, "apply: %s moved since it was shown (%.12s, now %.12s): look again",
                 p.src, want, p.commit);
    } else if (nflags && !flag_bool(args, "accept_protected")) {
        snprintf(err, errlen,
                 "apply: %zu flagged change(s) (protected paths, symlinks out of the tree, "
                 "submodules): review them and give --accept-protected",
                 nflags);
    } else if (do_apply(&r, name, from, &p, kind, err, errlen) == 0) {
        json_object_set_new(*out, "applied", json_true());
        return 0;
    }
    json_decref(*out);
    *out = NULL;
    return -1;
}
