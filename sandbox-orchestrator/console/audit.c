/* audit.c - see audit.h. */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "printable.h"

struct sbx_audit {
    pthread_mutex_t lock;
    int fd;
    char *path;
    unsigned long failed; /* lines that could not be written */
};

struct sbx_audit *sbx_audit_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct sbx_audit *a;

    if (fd == -1) {
        snprintf(err, errlen, "console-audit-log %s: %s", path, strerror(errno));
        return NULL;
    }
    a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(path)))
        abort();
    a->fd = fd;
    pthread_mutex_init(&a->lock, NULL);
    return a;
}

void sbx_audit_close(struct sbx_audit *a)
{
    if (!a)
        return;
    close(a->fd);
    pthread_mutex_destroy(&a->lock);
    free(a->path);
    free(a);
}

/* A string someone else chose, as a JSON value (null for NULL; bytes that
 * are not UTF-8 made printable first). */
static json_t *text(const char *s)
{
    json_t *j;

    if (!s)
        return json_null();
    j = json_string(s);
    if (!j) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", s);
        sbx_printable(buf);
        j = json_string(buf);
    }
    return j ? j : json_null();
}

void sbx_audit(struct sbx_audit *a, const char *user, const char *from, const char *action,
               const char *target, bool ok, const char *detail)
{
    char ts[32];
    time_t now = time(NULL);
    struct tm tm;

    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *j = json_pack("{s:s, s:o, s:o, s:s, s:o, s:b, s:o}", "ts", ts, "user", text(user),
                          "from", text(from), "action", action, "target", text(target), "ok", ok,
                          "detail", text(detail));
    char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!line)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* json_dumps' NUL becomes the newline; written by length */
    pthread_mutex_lock(&a->lock);
    if (write(a->fd, line, n + 1) != (ssize_t)(n + 1) && a->failed++ == 0)
        fprintf(stderr, "sandboxctl console: %s: an audit line could not be written: %s\n", a->path,
                strerror(errno));
    pthread_mutex_unlock(&a->lock);
    free(line);
}
