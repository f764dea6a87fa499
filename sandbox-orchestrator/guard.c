/* guard.c - size limits and cross-process reservations (see guard.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guard.h"

int sbx_guard_check_size(const struct sbx_config *c, int cores, int memory_mib, char *err,
                         size_t errlen)
{
    if (cores > c->max_cores) {
        snprintf(err, errlen, "cores guard: %d cores asked > max-cores %d", cores, c->max_cores);
        return -1;
    }
    if (memory_mib > c->max_memory_mib) {
        snprintf(err, errlen, "memory guard: %d MiB asked > max-memory-mib %d", memory_mib,
                 c->max_memory_mib);
        return -1;
    }
    return 0;
}

int sbx_guard_check_total(const struct sbx_config *c, long used_mib, int asked_mib, char *err,
                          size_t errlen)
{
    if (used_mib + asked_mib > c->max_total_memory_mib) {
        snprintf(err, errlen,
                 "memory guard: %ld MiB in use (pool and creates in progress) + %d MiB asked > "
                 "max-total-memory-mib %d",
                 used_mib, asked_mib, c->max_total_memory_mib);
        return -1;
    }
    return 0;
}

unsigned long long sbx_guard_pid_start(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces: count from its last ')'. */
    p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++; /* the space before field 3; on to the one before field 22 */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p)
        start = strtoull(p + 1, NULL, 10);
    return start;
}

int sbx_guard_pid_alive(pid_t pid, unsigned long long start)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) == -1 && errno == ESRCH)
        return 0;
    /* The pid may have been reused by another process since. */
    return start == 0 || sbx_guard_pid_start(pid) == start;
}

int sbx_state_lock(const char *state_dir, const char *name, char *err, size_t errlen)
{
    char path[4096];
    int fd;

    if (mkdir(state_dir, 0700) == -1 && errno != EEXIST) {
        snprintf(err, errlen, "state-dir %s: cannot create: %s", state_dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/%s", state_dir, name);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd == -1) {
        snprintf(err, errlen, "state-dir: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    while (flock(fd, LOCK_EX) == -1) {
        if (errno != EINTR) {
            snprintf(err, errlen, "state-dir: cannot lock %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

static int entry_alive(json_t *r)
{
    json_t *pid = json_object_get(r, "pid"), *start = json_object_get(r, "start");

    return json_is_integer(pid) &&
           sbx_guard_pid_alive(
               (pid_t)json_integer_value(pid),
               json_is_integer(start) ? (unsigned long long)json_integer_value(start) : 0);
}

/* Whether r is a create's record (sbx_guard_reservation marks it). */
static int is_create(json_t *r)
{
    return json_is_true(json_object_get(r, "creating"));
}

int sbx_guard_open(struct sbx_guard *g, const char *state_dir, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *all;
    size_t i;
    json_t *r;

    memset(g, 0, sizeof *g);
    g->fd = sbx_state_lock(state_dir, "guard.lock", err, errlen);
    if (g->fd == -1)
        return -1;
    if (asprintf(&g->path, "%s/reservations.json", state_dir) < 0)
        abort();
    all = json_load_file(g->path, 0, &jerr);
    if (!all && access(g->path, F_OK) == 0) {
        /* A broken file cannot hold a live reservation worth more than the
         * guard itself: say so and start afresh. */
        fprintf(stderr, "sandboxctl: %s unreadable (%s); starting with no reservations\n", g->path,
                jerr.text);
    }
    g->reservations = json_array();
    g->interrupted = json_array();
    json_array_foreach(all, i, r)
    {
        if (!json_is_object(r))
            continue;
        if (entry_alive(r))
            json_array_append(g->reservations, r);
        else if (is_create(r))
            json_array_append(g->interrupted, r);
    }
    json_decref(all);
    return 0;
}

/* Flush the directory that holds path (a rename in it) to disk. */
static int sync_dir(const char *path)
{
    char dir[4200];
    char *slash;
    int fd, rc;

    snprintf(dir, sizeof dir, "%s", path);
    slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1)
        return -1;
    rc = fsync(fd);
    close(fd);
    return rc;
}

/* Write j into the new file tmp and flush it.  0 / -1 (errno). */
static int write_flushed(const char *tmp, json_t *j, size_t flags)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc;

    if (fd == -1)
        return -1;
    rc = json_dumpfd(j, fd, flags) == 0 && write(fd, "\n", 1) == 1 && fsync(fd) == 0 ? 0 : -1;
    if (close(fd) == -1)
        rc = -1;
    return rc;
}

int sbx_state_write(const char *path, json_t *j, size_t flags, char *err, size_t errlen)
{
    char tmp[4200];

    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (write_flushed(tmp, j, flags) == -1 || rename(tmp, path) == -1 || sync_dir(path) == -1) {
        snprintf(err, errlen, "state-dir: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int sbx_guard_save(struct sbx_guard *g, char *err, size_t errlen)
{
    json_t *all = json_array();
    int rc;

    json_array_extend(all, g->reservations);
    json_array_extend(all, g->interrupted);
    rc = sbx_state_write(g->path, all, JSON_INDENT(1), err, errlen);
    json_decref(all);
    return rc;
}

void sbx_guard_close(struct sbx_guard *g)
{
    if (g->fd >= 0)
        close(g->fd);
    g->fd = -1;
    json_decref(g->reservations);
    g->reservations = NULL;
    json_decref(g->interrupted);
    g->interrupted = NULL;
    free(g->path);
    g->path = NULL;
}

json_t *sbx_guard_reservation(const char *name, int cores, int memory_mib, int vmid,
                              const char *address)
{
    pid_t pid = getpid();

    return json_pack("{s:i,s:I,s:s,s:i,s:i,s:i,s:s,s:b}", "pid", (int)pid, "start",
                     (json_int_t)sbx_guard_pid_start(pid), "name", name, "cores", cores,
                     "memory_mib", memory_mib, "vmid", vmid, "address", address, "creating", 1);
}

int sbx_guard_release(const char *state_dir, int vmid, char *err, size_t errlen)
{
    struct sbx_guard g;
    size_t i = 0;
    int rc;

    if (sbx_guard_open(&g, state_dir, err, errlen))
        return -1;
    while (i < json_array_size(g.reservations)) {
        json_t *r = json_array_get(g.reservations, i);
        if (json_integer_value(json_object_get(r, "pid")) == getpid() &&
            (vmid == 0 || json_integer_value(json_object_get(r, "vmid")) == vmid))
            json_array_remove(g.reservations, i);
        else
            i++;
    }
    rc = sbx_guard_save(&g, err, errlen);
    sbx_guard_close(&g);
    return rc;
}
