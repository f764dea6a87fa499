/*
 * state.c - see state.h.
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "fileio.h"

#define STATE_FILE      "sandboxes.json"
#define STATE_MAX_BYTES (64u << 20) /* far above any real set; a bound on what is read */
#define PATH_MAX_TEXT   1100

void px_state_path(const char *dir, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", dir, STATE_FILE);
}

/* Write text[0..len) to the temporary file dir/.sandboxes.json.new (mode
 * 0600; one name, so that a process killed while writing leaves at most
 * one, which the next save replaces) and sync it; its path into tmp.  The
 * open descriptor, or -1 with err filled. */
static int write_temp(const char *dir, const char *text, size_t len, char *tmp, size_t tmp_size,
                      char *err, size_t errlen)
{
    snprintf(tmp, tmp_size, "%s/.%s.new", dir, STATE_FILE);
    (void)unlink(tmp); /* a leftover of a kill */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd == -1) {
        px_err_add(err, errlen, "%s: cannot create a temporary file: %s", tmp, strerror(errno));
        return -1;
    }
    if (fchmod(fd, 0600) == -1 || px_write_all(fd, text, len) == -1 ||
        px_write_all(fd, "\n", 1) == -1 || fsync(fd) == -1) {
        int e = errno;
        close(fd);
        unlink(tmp);
        px_err_add(err, errlen, "%s: cannot write: %s", tmp, strerror(e));
        return -1;
    }
    return fd;
}

int px_state_save(const char *dir, const json_t *bindings, char *err, size_t errlen)
{
    char tmp[PATH_MAX_TEXT], path[PATH_MAX_TEXT];
    char *text = json_dumps(bindings, JSON_INDENT(1) | JSON_PRESERVE_ORDER);

    if (text == NULL)
        abort();
    size_t len = strlen(text);
    int fd = write_temp(dir, text, len, tmp, sizeof(tmp), err, errlen);
    explicit_bzero(text, len);
    free(text);
    if (fd == -1)
        return -1;
    px_state_path(dir, path, sizeof(path));
    if (close(fd) == -1 || rename(tmp, path) == -1) {
        int e = errno;
        unlink(tmp);
        px_err_add(err, errlen, "%s: cannot replace: %s", path, strerror(e));
        return -1;
    }
    /* The rename is durable only once the directory itself is synced. */
    if (px_sync_dir(dir) == -1) {
        px_err_add(err, errlen, "%s: cannot sync the directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Create dir (0700) and the directories above it if missing. */
static int dir_make(const char *dir, char *err, size_t errlen)
{
    char p[PATH_MAX_TEXT];
    struct stat st;

    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, 0700) == -1 && errno != EEXIST) {
            px_err_add(err, errlen, "%s: state-dir: cannot create %s: %s", dir, p, strerror(errno));
            return -1;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    if (stat(p, &st) == -1 || !S_ISDIR(st.st_mode)) {
        px_err_add(err, errlen, "%s: state-dir: not a directory", dir);
        return -1;
    }
    return 0;
}

json_t *px_state_load(const char *dir, char *err, size_t errlen)
{
    char path[PATH_MAX_TEXT];
    json_error_t je;
    struct stat st;
    FILE *f;

    if (dir_make(dir, err, errlen) == -1)
        return NULL;
    px_state_path(dir, path, sizeof(path));
    f = fopen(path, "rb");
    if (f == NULL && errno == ENOENT)
        return json_array();
    if (f == NULL || fstat(fileno(f), &st) == -1 || st.st_size > STATE_MAX_BYTES) {
        px_err_add(err, errlen, "%s: cannot read: %s", path,
                   f == NULL || st.st_size <= STATE_MAX_BYTES ? strerror(errno) : "too large");
        if (f != NULL)
            fclose(f);
        return NULL;
    }
    json_t *j = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (j == NULL) {
        px_err_add(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_array(j) || json_array_size(j) > PX_STATE_MAX_BINDINGS) {
        px_err_add(err, errlen, "%s: expected an array of at most %d bindings", path,
                   PX_STATE_MAX_BINDINGS);
        json_decref(j);
        return NULL;
    }
    return j;
}
