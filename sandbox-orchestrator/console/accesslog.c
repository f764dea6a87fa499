/* accesslog.c - see accesslog.h. */
#include "accesslog.h"
#include "tally.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether field key of line j is want (NULL or "": any); part: want may be
 * a part of it. */
static bool field_ok(json_t *j, const char *key, const char *want, bool part)
{
    const char *v;

    if (!want || !*want)
        return true;
    v = json_string_value(json_object_get(j, key));
    return v && (part ? strstr(v, want) != NULL : strcmp(v, want) == 0);
}

static bool passes(json_t *j, const struct sbx_accesslog_filter *f)
{
    return field_ok(j, "sandbox", f->sandbox, false) && field_ok(j, "owner", f->owner, false) &&
           field_ok(j, "host", f->host, true) && field_ok(j, "decision", f->decision, false) &&
           field_ok(j, "reason", f->reason, false);
}

/* The file's last `tail` bytes (fewer when it is shorter) into a new
 * buffer, NUL-terminated; its length in *len.  NULL with err. */
static char *read_tail(const char *path, long tail, size_t *len, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    char *buf = NULL;

    if (fd == -1 || fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "console-access-log %s: %s", path,
                 fd == -1 ? strerror(errno) : "not a regular file");
        if (fd != -1)
            close(fd);
        return NULL;
    }
    off_t from = st.st_size > tail ? st.st_size - tail : 0;
    size_t want = (size_t)(st.st_size - from);
    buf = malloc(want + 1);
    if (!buf)
        abort();
    ssize_t n = pread(fd, buf, want, from);
    close(fd);
    if (n < 0) {
        snprintf(err, errlen, "console-access-log %s: %s", path, strerror(errno));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = (size_t)n;
    /* A tail that starts inside a line: that line is not whole. */
    if (from > 0) {
        char *nl = memchr(buf, '\n', *len);
        size_t cut = nl ? (size_t)(nl - buf) + 1 : *len;
        memmove(buf, buf + cut, *len - cut + 1);
        *len -= cut;
    }
    return buf;
}

/* Call fn(arg, line) for each JSON line of path's tail, newest first,
 * until it returns false; the lines looked at in *scanned.  0 or -1 with
 * err. */
static int each_line(const char *path, bool (*fn)(void *, json_t *), void *arg, size_t *scanned,
                     char *err, size_t errlen)
{
    size_t len;
    char *buf = read_tail(path, SBX_ACCESSLOG_TAIL, &len, err, errlen);

    *scanned = 0;
    if (!buf)
        return -1;
    /* From the end: each line is what lies after the newline before it. */
    size_t end = len;
    bool go_on = true;
    while (end > 0 && go_on) {
        if (buf[end - 1] == '\n')
            end--; /* the line's own newline */
        size_t start = end;
        while (start > 0 && buf[start - 1] != '\n')
            start--;
        if (end > start) {
            json_t *j = json_loadb(buf + start, end - start, 0, NULL);
            (*scanned)++;
            if (json_is_object(j))
                go_on = fn(arg, j);
            json_decref(j);
        }
        end = start;
    }
    free(buf);
    return 0;
}

/* A query's state: the filter, the lines kept, how many at most. */
struct query {
    const struct sbx_accesslog_filter *f;
    json_t *lines;
    size_t max;
};

static bool keep_line(void *arg, json_t *j)
{
    struct query *q = arg;

    if (passes(j, q->f))
        json_array_append(q->lines, j);
    return json_array_size(q->lines) < q->max;
}

int sbx_accesslog_query(const char *path, const struct sbx_accesslog_filter *f, size_t max,
                        json_t **out, size_t *scanned, char *err, size_t errlen)
{
    struct query q = {f, json_array(), max};

    *out = NULL;
    *scanned = 0;
    if (max > 0 && each_line(path, keep_line, &q, scanned, err, errlen)) {
        json_decref(q.lines);
        return -1;
    }
    *out = q.lines;
    return 0;
}

/* A count's state: whose lines, which decision, the counts. */
struct count {
    const char *owner, *decision;
    json_t *counts;
};

static bool count_line(void *arg, json_t *j)
{
    struct count *c = arg;
    const char *sb = json_string_value(json_object_get(j, "sandbox"));
    char hp[300];

    if (sb && field_ok(j, "owner", c->owner, false) &&
        field_ok(j, "decision", c->decision, false) && sbx_tally_host_port(j, hp, sizeof hp))
        sbx_tally_add(c->counts, sb, hp);
    return true;
}

int sbx_accesslog_top(const char *path, const char *owner, const char *decision, size_t k,
                      json_t **out, char *err, size_t errlen)
{
    struct count c = {owner, decision, json_object()};
    size_t scanned;

    *out = NULL;
    if (each_line(path, count_line, &c, &scanned, err, errlen)) {
        json_decref(c.counts);
        return -1;
    }
    *out = sbx_tally_top(c.counts, k);
    json_decref(c.counts);
    return 0;
}
