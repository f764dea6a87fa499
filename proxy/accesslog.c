/*
 * accesslog.c - see accesslog.h.  One JSON object per line, fields in the
 * order of DESIGN.md ("Access log"), every field on every line (null when
 * there is nothing to say), so that `jq` and `egressctl learn` never have
 * to guess whether a field is missing or empty.
 *
 * Concurrency: one mutex guards the descriptor and is held across the
 * write(2) of one line.  Holding it for the write is what keeps lines whole
 * even where O_APPEND alone does not (a pipe to the journal takes at most
 * PIPE_BUF bytes atomically, and a partial write has to be finished before
 * another thread's line may start).  A reopen opens the new file first,
 * swaps the descriptor under the same mutex and closes the old one after,
 * so a writer never sees a closed or half-swapped descriptor.
 */
#include "accesslog.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

/* A string field longer than this is cut (hosts are at most 253 bytes once
 * normalized; a raw bad_host or a method is whatever a client sent). */
#define FIELD_MAX 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;         /* under lock; -1: not open, lines are dropped */
static char log_path[1024];     /* under lock; "" for standard output */
static bool warned_write_error; /* under lock: one warning per run of failures */

/* ------------------------------------------------------------- formatting */

/* A JSON string for s, or null.  jansson refuses text that is not UTF-8,
 * and a client may send any bytes as a host or SNI: when the text is not
 * valid UTF-8, every byte >= 0x80 becomes U+FFFD, so the line stays valid
 * JSON and still shows where the odd bytes were.  Control characters,
 * quotes and backslashes are escaped by jansson itself. */
static json_t *str_or_null(const char *s)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD in UTF-8 */
    size_t n;
    json_t *j;

    if (s == NULL)
        return json_null();
    n = strnlen(s, FIELD_MAX + 1);
    if (n > FIELD_MAX) {
        n = FIELD_MAX;
        /* do not cut a multi-byte character in two */
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    j = json_stringn(s, n);
    if (j != NULL)
        return j;

    char *clean = malloc(n * 3 + 1);
    size_t k = 0;
    if (clean == NULL)
        abort();
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] >= 0x80) {
            memcpy(clean + k, replacement, 3);
            k += 3;
        } else {
            clean[k++] = s[i];
        }
    }
    j = json_stringn(clean, k);
    free(clean);
    return j;
}

static json_t *uint_or_null(uint64_t v)
{
    return v == 0 ? json_null() : json_integer((json_int_t)v);
}

/* json_int_t is signed 64 bits; counters never get near 2^63, but a
 * wrapped value must not come out negative. */
static json_t *uint_json(uint64_t v)
{
    return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* RFC 3339 in UTC with milliseconds: "2026-11-30T09:00:00.123Z". */
static void format_ts(int64_t ts_ms, char *out, size_t outlen)
{
    int64_t secs = ts_ms / 1000, ms = ts_ms % 1000;
    struct tm tm;
    time_t t;

    if (ms < 0) { /* before 1970: floor, not truncate toward zero */
        ms += 1000;
        secs--;
    }
    t = (time_t)secs;
    if (gmtime_r(&t, &tm) == NULL) {
        snprintf(out, outlen, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf(out, outlen, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)ms);
}

char *px_accesslog_format(const struct px_log_entry *e)
{
    char ts[48];
    json_t *o = json_object();
    char *line;

    if (o == NULL)
        abort();
    format_ts(e->ts_ms, ts, sizeof(ts));
    /* the order of DESIGN.md; jansson keeps insertion order */
    json_object_set_new(o, "ts", json_string(ts));
    json_object_set_new(o, "id", uint_json(e->id));
    json_object_set_new(o, "sandbox", str_or_null(e->sandbox));
    json_object_set_new(o, "owner", str_or_null(e->owner));
    json_object_set_new(o, "src", str_or_null(e->src));
    json_object_set_new(o, "mode", str_or_null(e->mode));
    json_object_set_new(o, "method", str_or_null(e->method));
    json_object_set_new(o, "host", str_or_null(e->host));
    json_object_set_new(o, "port", uint_or_null(e->port));
    json_object_set_new(o, "sni", str_or_null(e->sni));
    json_object_set_new(o, "decision", str_or_null(e->decision));
    json_object_set_new(o, "reason", str_or_null(e->reason));
    json_object_set_new(o, "rule", str_or_null(e->rule));
    json_object_set_new(o, "upstream", str_or_null(e->upstream));
    json_object_set_new(o, "country",
                        str_or_null(e->country != NULL && e->country[0] ? e->country : NULL));
    json_object_set_new(o, "asn", uint_or_null(e->asn));
    json_object_set_new(o, "bytes_up", uint_json(e->bytes_up));
    json_object_set_new(o, "bytes_down", uint_json(e->bytes_down));
    json_object_set_new(o, "duration_ms", uint_json(e->duration_ms));
    json_object_set_new(o, "status", uint_or_null(e->status));
    line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (line == NULL)
        abort(); /* only allocation fails here: every value above is valid */
    return line;
}

/* ---------------------------------------------------------------- the file */

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

/* Put fd in place of the current descriptor; returns the old one (-1 if
 * none, or if it was standard output, which is never closed). */
static int swap_fd(int fd, const char *path)
{
    int old;

    pthread_mutex_lock(&lock);
    old = log_fd;
    log_fd = fd;
    if (path != NULL)
        snprintf(log_path, sizeof(log_path), "%s", path);
    warned_write_error = false;
    pthread_mutex_unlock(&lock);
    return old == STDOUT_FILENO ? -1 : old;
}

int px_accesslog_open(const char *path, char *err, size_t errlen)
{
    bool is_stdout = strcmp(path, "stdout") == 0;
    int fd, old;

    if (!is_stdout && strlen(path) >= sizeof(log_path)) {
        snprintf(err, errlen, "%s: path too long (at most %zu bytes)", path, sizeof(log_path) - 1);
        return -1;
    }
    fd = is_stdout ? STDOUT_FILENO : open_path(path);
    if (fd == -1) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    old = swap_fd(fd, is_stdout ? "" : path);
    if (old != -1)
        close(old);
    return 0;
}

int px_accesslog_reopen(void)
{
    char path[sizeof(log_path)];
    int fd, old;

    pthread_mutex_lock(&lock);
    snprintf(path, sizeof(path), "%s", log_path);
    fd = log_fd;
    pthread_mutex_unlock(&lock);
    if (fd == -1 || path[0] == '\0')
        return 0; /* nothing open, or standard output: nothing to reopen */
    fd = open_path(path);
    if (fd == -1) {
        px_log_warn("access log %s: cannot reopen, still writing to the old file", path);
        return -1;
    }
    old = swap_fd(fd, NULL);
    if (old != -1)
        close(old);
    return 0;
}

/* The whole of buf, across EINTR and partial writes; 0 or -1 (errno). */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

void px_accesslog_write(const struct px_log_entry *e)
{
    char *line = px_accesslog_format(e);
    size_t len = strlen(line);
    int rc = 0, saved = 0;
    bool warn = false;

    line[len] = '\n'; /* replaces the NUL: the line goes out in one write */
    pthread_mutex_lock(&lock);
    if (log_fd != -1) {
        rc = write_all(log_fd, line, len + 1);
        saved = errno;
        /* a full disk would otherwise warn once per connection */
        warn = rc == -1 && !warned_write_error;
        warned_write_error = rc == -1;
    }
    pthread_mutex_unlock(&lock);
    free(line);
    if (warn) {
        errno = saved;
        px_log_warn("access log: write failed, lines are lost until a write succeeds");
    }
}

void px_accesslog_close(void)
{
    int old = swap_fd(-1, "");

    if (old != -1)
        close(old);
}
