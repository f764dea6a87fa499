/*
 * accesslog.c - see accesslog.h.  One JSON object per line, fields in the
 * order of docs/design.md ("Access log"), every field on every line (null when
 * there is nothing to say), so that `jq` and `egressctl learn` never have
 * to guess whether a field is missing or empty.
 *
 * Concurrency.  The log's descriptor number is set by px_accesslog_open()
 * (at start, before the workers) and stays until px_accesslog_close()
 * (after them).  A reopen puts the new file behind that same number with
 * dup2(2), which is atomic: a write already under way ends in the old
 * file, the next one goes to the new; no writer ever holds a closed or
 * half-swapped descriptor, and none takes a lock for it.
 * Each write(2) is one line or one worker's batch of whole lines.  To a
 * regular file opened O_APPEND, Linux appends each write(2) whole (under
 * the inode's lock), so the workers write without a lock of ours, as
 * nginx's do.  To anything else (a pipe to the journal takes only
 * PIPE_BUF bytes atomically, and a partial write has to be finished before
 * another thread's line may start) a mutex is held across the write.
 * The one case a line can still be cut in a file is a disk that fills up
 * in the middle of a write; the warning below says so then.
 */
#include "accesslog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nametext.h"
#include "utf8.h"

/* A string field longer than this is cut (hosts are at most 253 bytes once
 * normalized; a raw bad_host or a method is whatever a client sent). */
#define FIELD_MAX 1024

/* Set by open and close (main thread, no worker running); read by writers. */
static int log_fd = -1;     /* -1: not open, lines are dropped */
static char log_path[1024]; /* "" for standard output (main thread only) */
/* Whether writes go through `pipe_lock`: the log is not a regular file.
 * Only ever turns on while workers run (a reopen onto something else). */
static atomic_bool log_locked;
static pthread_mutex_t pipe_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool warned_write_error; /* one warning per run of failures */

/* ------------------------------------------------------------- formatting */

/* The longest line: sixteen string fields (and a spare) of FIELD_MAX bytes, each byte at
 * worst six bytes escaped ("\u0001"; a host's or SNI's five: "\\001"), plus names and
 * numbers. */
#define LINE_MAX_BYTES (17 * (FIELD_MAX * 6 + 32) + 1024)

struct line {
    char *p;
    size_t len;
};

static void put(struct line *l, const char *s, size_t n)
{
    memcpy(l->p + l->len, s, n);
    l->len += n;
}

#define PUT_LIT(l, lit) put((l), (lit), sizeof(lit) - 1)

/* A JSON string of s[0..n).  When the text is not valid UTF-8, every byte
 * >= 0x80 becomes U+FFFD, so the line stays valid JSON and still shows
 * where the odd bytes were.  Quotes, backslashes and control characters
 * are escaped as jansson escapes them. */
static void put_text(struct line *l, const unsigned char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* utf8.h checks what jansson checks: a line stays what it was when
     * jansson wrote it. */
    bool valid = px_utf8_valid(s, n);

    l->p[l->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        switch (c) {
        case '"': PUT_LIT(l, "\\\""); continue;
        case '\\': PUT_LIT(l, "\\\\"); continue;
        case '\b': PUT_LIT(l, "\\b"); continue;
        case '\f': PUT_LIT(l, "\\f"); continue;
        case '\n': PUT_LIT(l, "\\n"); continue;
        case '\r': PUT_LIT(l, "\\r"); continue;
        case '\t': PUT_LIT(l, "\\t"); continue;
        default: break;
        }
        if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(l, u, sizeof(u));
        } else if (c >= 0x80 && !valid) {
            PUT_LIT(l, "\xef\xbf\xbd"); /* U+FFFD in UTF-8 */
        } else {
            l->p[l->len++] = (char)c;
        }
    }
    l->p[l->len++] = '"';
}

/* How much of s the line takes: at most FIELD_MAX bytes, not cutting a
 * multi-byte character in two. */
static size_t field_len(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strnlen(str, FIELD_MAX + 1);

    if (n > FIELD_MAX) {
        n = FIELD_MAX;
        while (n > 0 && (s[n] & 0xc0) == 0x80)
            n--;
    }
    return n;
}

/* A JSON string for s (cut to FIELD_MAX bytes), or null. */
static void put_str(struct line *l, const char *s)
{
    if (s == NULL)
        PUT_LIT(l, "null");
    else
        put_text(l, (const unsigned char *)s, field_len(s));
}

/* A host or SNI, names a client chose and may fill with any bytes: in
 * DNS presentation format (nametext.h), as the denials keep them, so the
 * line says exactly which bytes came and holds no control character even
 * once a reader such as `jq -r` has decoded it; from the wire form when
 * there is one (qname); or null. */
static void put_name(struct line *l, const char *s, const uint8_t *qname, size_t qname_len)
{
    char text[4 * FIELD_MAX + 1]; /* every byte as \DDD */
    size_t n;

    if (qname != NULL)
        n = px_nametext_from_wire(qname, qname_len, text, sizeof(text));
    else if (s != NULL)
        n = px_nametext_from_text(s, field_len(s), text, sizeof(text));
    else {
        PUT_LIT(l, "null");
        return;
    }
    put_text(l, (const unsigned char *)text, n);
}

/* Counters never get near 2^63, but a wrapped value must not come out
 * negative (as jansson's signed integers would). */
static void put_uint(struct line *l, uint64_t v)
{
    char buf[24];
    size_t i = sizeof(buf);

    if (v > INT64_MAX)
        v = INT64_MAX;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    put(l, buf + i, sizeof(buf) - i);
}

static void put_uint_or_null(struct line *l, uint64_t v)
{
    if (v == 0)
        PUT_LIT(l, "null");
    else
        put_uint(l, v);
}

/* RFC 3339 in UTC with milliseconds: "2026-11-30T09:00:00.123Z".  The
 * part up to the seconds changes once a second, so each thread keeps the
 * last one it made. */
static void format_ts(int64_t ts_ms, char *out, size_t outlen)
{
    static _Thread_local int64_t last_secs = INT64_MIN;
    static _Thread_local char last[80]; /* room for any int the fields hold */
    int64_t secs = ts_ms / 1000, ms = ts_ms % 1000;
    struct tm tm;
    time_t t;

    if (ms < 0) { /* before 1970: floor, not truncate toward zero */
        ms += 1000;
        secs--;
    }
    if (secs != last_secs) {
        t = (time_t)secs;
        if (gmtime_r(&t, &tm) == NULL) {
            snprintf(out, outlen, "1970-01-01T00:00:00.000Z");
            return;
        }
        snprintf(last, sizeof(last), "%04d-%02d-%02dT%02d:%02d:%02d.", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
        last_secs = secs;
    }
    size_t n = strlen(last);
    if (n + 5 > outlen) {
        out[0] = '\0';
        return;
    }
    memcpy(out, last, n);
    out[n] = (char)('0' + ms / 100);
    out[n + 1] = (char)('0' + ms / 10 % 10);
    out[n + 2] = (char)('0' + ms % 10);
    out[n + 3] = 'Z';
    out[n + 4] = '\0';
}

/* The line into buf (LINE_MAX_BYTES), without a newline; its length.  The
 * fields in the order of docs/design.md. */
static size_t format_line(const struct px_log_entry *e, char *buf)
{
    struct line l = {buf, 0};
    char ts[48];

    format_ts(e->ts_ms, ts, sizeof(ts));
    PUT_LIT(&l, "{\"ts\":");
    put_str(&l, ts);
    PUT_LIT(&l, ",\"id\":");
    put_uint(&l, e->id);
    PUT_LIT(&l, ",\"sandbox\":");
    put_str(&l, e->sandbox);
    PUT_LIT(&l, ",\"owner\":");
    put_str(&l, e->owner);
    PUT_LIT(&l, ",\"src\":");
    put_str(&l, e->src);
    PUT_LIT(&l, ",\"mode\":");
    put_str(&l, e->mode);
    PUT_LIT(&l, ",\"method\":");
    put_str(&l, e->method);
    PUT_LIT(&l, ",\"host\":");
    put_name(&l, e->host, e->qname, e->qname_len);
    PUT_LIT(&l, ",\"port\":");
    put_uint_or_null(&l, e->port);
    PUT_LIT(&l, ",\"sni\":");
    put_name(&l, e->sni, NULL, 0);
    PUT_LIT(&l, ",\"decision\":");
    put_str(&l, e->decision);
    PUT_LIT(&l, ",\"reason\":");
    put_str(&l, e->reason);
    PUT_LIT(&l, ",\"rule\":");
    put_str(&l, e->rule);
    PUT_LIT(&l, ",\"upstream\":");
    put_str(&l, e->upstream);
    PUT_LIT(&l, ",\"country\":");
    put_str(&l, e->country != NULL && e->country[0] ? e->country : NULL);
    PUT_LIT(&l, ",\"asn\":");
    put_uint_or_null(&l, e->asn);
    PUT_LIT(&l, ",\"bytes_up\":");
    put_uint(&l, e->bytes_up);
    PUT_LIT(&l, ",\"bytes_down\":");
    put_uint(&l, e->bytes_down);
    PUT_LIT(&l, ",\"duration_ms\":");
    put_uint(&l, e->duration_ms);
    PUT_LIT(&l, ",\"status\":");
    put_uint_or_null(&l, e->status);
    PUT_LIT(&l, ",\"termination\":");
    put_str(&l, e->termination);
    PUT_LIT(&l, ",\"answer\":");
    put_str(&l, e->answer);
    PUT_LIT(&l, ",\"count\":");
    put_uint_or_null(&l, e->count);
    PUT_LIT(&l, ",\"inject\":");
    put_str(&l, e->inject);
    PUT_LIT(&l, ",\"path\":");
    put_str(&l, e->path);
    PUT_LIT(&l, "}");
    return l.len;
}

/* Each thread formats its lines here (no allocation per line). */
static _Thread_local char line_buf[LINE_MAX_BYTES + 1];

char *px_accesslog_format(const struct px_log_entry *e)
{
    size_t n = format_line(e, line_buf);
    char *line = malloc(n + 1);

    if (line == NULL)
        abort();
    memcpy(line, line_buf, n);
    line[n] = '\0';
    return line;
}

/* ---------------------------------------------------------------- the file */

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

/* Whether lines to fd need pipe_lock: it is not a regular file. */
static bool needs_lock(int fd)
{
    struct stat st;
    return fstat(fd, &st) == -1 || !S_ISREG(st.st_mode);
}

int px_accesslog_open(const char *path, char *err, size_t errlen)
{
    bool is_stdout = strcmp(path, "stdout") == 0;
    int fd;

    if (!is_stdout && strlen(path) >= sizeof(log_path)) {
        snprintf(err, errlen, "%s: path too long (at most %zu bytes)", path, sizeof(log_path) - 1);
        return -1;
    }
    fd = is_stdout ? STDOUT_FILENO : open_path(path);
    if (fd == -1) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    px_accesslog_close();
    atomic_store(&log_locked, needs_lock(fd));
    atomic_store(&warned_write_error, false);
    snprintf(log_path, sizeof(log_path), "%s", is_stdout ? "" : path);
    log_fd = fd;
    return 0;
}

int px_accesslog_reopen(void)
{
    if (log_fd == -1 || log_path[0] == '\0')
        return 0; /* nothing open, or standard output: nothing to reopen */
    int fd = open_path(log_path);
    if (fd != -1 && needs_lock(fd))
        atomic_store(&log_locked, true); /* before any line can reach it */
    int rc = fd != -1 && dup2(fd, log_fd) != -1 ? 0 : -1;
    if (fd != -1)
        close(fd);
    if (rc == -1) {
        px_log_warn("access log %s: cannot reopen, still writing to the old file", log_path);
        return -1;
    }
    atomic_store(&warned_write_error, false);
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

/* Write buf whole (under pipe_lock when the log is not a regular file);
 * one warning per run of failures. */
static void write_lines(const char *buf, size_t len)
{
    bool locked = atomic_load_explicit(&log_locked, memory_order_acquire);
    int rc, saved;

    if (log_fd == -1)
        return;
    if (locked)
        pthread_mutex_lock(&pipe_lock);
    rc = write_all(log_fd, buf, len);
    saved = errno;
    if (locked)
        pthread_mutex_unlock(&pipe_lock);
    /* a full disk would otherwise warn once per connection */
    if (rc == -1 && !atomic_exchange(&warned_write_error, true)) {
        errno = saved;
        px_log_warn("access log: write failed, lines are lost (or cut) until a write succeeds");
    } else if (rc == 0 && atomic_load_explicit(&warned_write_error, memory_order_relaxed)) {
        atomic_store(&warned_write_error, false);
    }
}

/* A worker thread's lines wait here until its event loop has run the
 * callbacks of one round, then go out in one write (whole lines only). */
#define BATCH_BYTES (64 * 1024)
struct batch {
    char buf[BATCH_BYTES];
    size_t len;
    void (*wake)(void *);
    void *arg;
};
static _Thread_local struct batch *batch; /* NULL: each line at once */

void px_accesslog_batch_start(void (*wake)(void *), void *arg)
{
    batch = calloc(1, sizeof(*batch));
    if (batch == NULL)
        abort();
    batch->wake = wake;
    batch->arg = arg;
}

void px_accesslog_flush(void)
{
    if (batch == NULL || batch->len == 0)
        return;
    write_lines(batch->buf, batch->len);
    batch->len = 0;
}

void px_accesslog_batch_stop(void)
{
    px_accesslog_flush();
    free(batch);
    batch = NULL;
}

void px_accesslog_write(const struct px_log_entry *e)
{
    size_t len = format_line(e, line_buf);

    line_buf[len++] = '\n';
    if (batch == NULL || len > BATCH_BYTES) {
        px_accesslog_flush(); /* keep the order of this thread's lines */
        write_lines(line_buf, len);
        return;
    }
    if (len > BATCH_BYTES - batch->len)
        px_accesslog_flush();
    memcpy(batch->buf + batch->len, line_buf, len);
    batch->len += len;
    if (batch->len == len)
        batch->wake(batch->arg);
}

void px_accesslog_close(void)
{
    int old = log_fd;

    log_fd = -1;
    log_path[0] = '\0';
    if (old != -1 && old != STDOUT_FILENO)
        close(old);
}
