/*
 * test_obs.c - the access log and the metrics page.
 *
 * Access log: every field in docs/design.md's order, nulls, a hostile host and
 * SNI (quotes, a line feed, bytes that are not UTF-8) still give one valid
 * JSON line, the timestamp format, reopen after logrotate's rename, and
 * lines that stay whole while four threads write and the file is rotated.
 * Metrics: the page is parsed back and the exact series are expected for
 * the counts made; label escaping, the histogram, forgetting sandboxes,
 * exact totals from four counting threads, and the HTTP listener on
 * 127.0.0.1.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accesslog.h"
#include "config.h"
#include "metrics.h"
#include "policy.h"
#include "tap.h"

#define THREADS 4

static char dir[] = "/tmp/test_obs.XXXXXX";

/* ------------------------------------------------------------- helpers */

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t size = 0, n = 0;

    if (f == NULL)
        return NULL;
    for (;;) {
        if (n + 4096 > size) {
            size = size * 2 + 4096;
            buf = realloc(buf, size + 1);
        }
        size_t got = fread(buf + n, 1, size - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void path_in_dir(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

/* ------------------------------------------------------------ access log */

static struct px_log_entry full_entry(void)
{
    struct px_log_entry e = {
        .ts_ms = 1796029200123, /* 2026-11-30T09:00:00.123Z */
        .id = 42,
        .sandbox = "101",
        .owner = "alice",
        .src = "10.99.0.11:51234",
        .mode = "connect",
        .method = "CONNECT",
        .host = "github.com",
        .port = 443,
        .sni = "github.com",
        .decision = "allow",
        .reason = "allowed",
        .rule = "balanced.allow:15",
        .upstream = "140.82.112.3:443",
        .country = "US",
        .asn = 36459,
        .bytes_up = 1234,
        .bytes_down = 56789,
        .duration_ms = 2500,
        .status = 200,
        .termination = "client/relay",
        .inject = "anthropic",
        .path = "/v1/messages",
    };
    return e;
}

static void test_format_full(void)
{
    struct px_log_entry e = full_entry();
    char *line = px_accesslog_format(&e);
    const char *want =
        "{\"ts\":\"2026-11-30T09:00:00.123Z\",\"id\":42,\"sandbox\":\"101\",\"owner\":\"alice\","
        "\"src\":\"10.99.0.11:51234\",\"mode\":\"connect\",\"method\":\"CONNECT\","
        "\"host\":\"github.com\",\"port\":443,\"sni\":\"github.com\",\"decision\":\"allow\","
        "\"reason\":\"allowed\",\"rule\":\"balanced.allow:15\",\"upstream\":\"140.82.112.3:443\","
        "\"country\":\"US\",\"asn\":36459,\"bytes_up\":1234,\"bytes_down\":56789,"
        "\"duration_ms\":2500,\"status\":200,\"termination\":\"client/"
        "relay\",\"answer\":null,\"count\":null,\"inject\":\"anthropic\","
        "\"path\":\"/v1/messages\"}";

    if (!ok(strcmp(line, want) == 0, "a full entry: every field, in docs/design.md's order"))
        diag("got  %s\nwant %s", line, want);
    free(line);
}

static void test_format_nulls(void)
{
    struct px_log_entry e = {.ts_ms = 0,
                             .id = 7,
                             .sandbox = "default",
                             .mode = "tls",
                             .decision = "deny",
                             .reason = "no_sni",
                             .country = ""};
    char *line = px_accesslog_format(&e);
    const char *want = "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"id\":7,\"sandbox\":\"default\","
                       "\"owner\":null,\"src\":null,\"mode\":\"tls\",\"method\":null,"
                       "\"host\":null,\"port\":null,\"sni\":null,\"decision\":\"deny\","
                       "\"reason\":\"no_sni\",\"rule\":null,\"upstream\":null,\"country\":null,"
                       "\"asn\":null,\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":0,"
                       "\"status\":null,\"termination\":null,\"answer\":null,\"count\":null,"
                       "\"inject\":null,\"path\":null}";

    if (!ok(strcmp(line, want) == 0,
            "NULL strings, empty country and zero port/asn/status are null; counts stay 0"))
        diag("got  %s\nwant %s", line, want);
    free(line);
}

static void test_format_hostile(void)
{
    struct px_log_entry e = full_entry();
    json_error_t jerr;
    json_t *o;
    char *line;

    e.host = "a\"b\n\xff";
    e.sni = "x\xc3(y"; /* a two-byte lead with a bad continuation */
    e.method = "GE\x01T";
    line = px_accesslog_format(&e);
    ok(strchr(line, '\n') == NULL, "a host with a line feed gives one line");
    if (!ok(strstr(line, "\"host\":\"a\\\"b\\\\010\\\\255\"") != NULL,
            "the host in presentation format: the line feed \\010, the 0xff byte \\255"))
        diag("%s", line);
    o = json_loads(line, 0, &jerr);
    if (!ok(o != NULL, "the line is valid JSON (and valid UTF-8)"))
        diag("%s", jerr.text);
    ok(o && strcmp(json_string_value(json_object_get(o, "host")), "a\"b\\010\\255") == 0,
       "the host reads back as its presentation text, no control byte in it");
    ok(o && strcmp(json_string_value(json_object_get(o, "sni")), "x\\195(y") == 0,
       "an SNI that is not UTF-8 reads back with \\195 for the bad byte");
    ok(o && strcmp(json_string_value(json_object_get(o, "method")), "GE\x01T") == 0,
       "a control byte is escaped, not lost");
    ok(o && json_object_size(o) == 25, "still 25 fields");
    json_decref(o);
    free(line);

    /* a DNS question's name as it came: its labels hold a '.' and a NUL */
    static const uint8_t wire[] = {3, 'a', '.', 'b', 2, 0, 0x1b, 4, 't', 'e', 's', 't', 0};
    e = full_entry();
    e.host = "a.b"; /* the text form stops at the NUL */
    e.qname = wire;
    e.qname_len = sizeof(wire);
    line = px_accesslog_format(&e);
    if (!ok(strstr(line, "\"host\":\"a\\\\.b.\\\\000\\\\027.test\"") != NULL,
            "a DNS name as it came is written from its wire form: a\\.b.\\000\\027.test"))
        diag("%s", line);
    free(line);
}

static void test_format_long_host(void)
{
    struct px_log_entry e = full_entry();
    char *host = malloc(5001);
    char *line;
    json_t *o;

    memset(host, 'a', 5000);
    host[5000] = '\0';
    host[1023] = '\xc3'; /* a valid two-byte character across the cut */
    host[1024] = '\xa9';
    e.host = host;
    line = px_accesslog_format(&e);
    o = json_loads(line, 0, NULL);
    const char *h = o ? json_string_value(json_object_get(o, "host")) : NULL;
    ok(h != NULL && strlen(h) == 1023 && strchr(h, '\xef') == NULL,
       "a 5000-byte host is cut to 1 KiB, not inside a character (length %zu)", h ? strlen(h) : 0);
    json_decref(o);
    free(line);
    free(host);
}

/* ------------------------------------------- the formatter against jansson */

/* How many bytes of s a log field keeps: 1024 at most, never ending in
 * the middle of a UTF-8 sequence. */
static size_t ref_cut(const char *s)
{
    size_t n = strnlen(s, 1025);

    if (n > 1024) {
        n = 1024;
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    return n;
}

/* The line as jansson writes it (how egressd wrote it before it formatted
 * lines itself): the reference the formatter must match byte for byte. */
static json_t *ref_str(const char *s)
{
    size_t n;
    json_t *j;

    if (s == NULL)
        return json_null();
    n = ref_cut(s);
    if ((j = json_stringn(s, n)) != NULL)
        return j;
    char *clean = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] >= 0x80) {
            memcpy(clean + k, "\xef\xbf\xbd", 3);
            k += 3;
        } else {
            clean[k++] = s[i];
        }
    }
    j = json_stringn(clean, k);
    free(clean);
    return j;
}

/* A host or SNI as the log writes it: cut as any field, then RFC 1035
 * presentation text (a byte isgraph() accepts stays, the backslash aside;
 * any other is printf's "\%03u"), written here apart from nametext.c. */
static json_t *ref_name(const char *s)
{
    size_t n;
    char *text;
    size_t k = 0;
    json_t *j;

    if (s == NULL)
        return json_null();
    n = ref_cut(s);
    text = malloc(n * 4 + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isgraph(c) && c != '\\')
            text[k++] = (char)c;
        else
            k += (size_t)sprintf(text + k, "\\%03u", c);
    }
    text[k] = '\0';
    j = json_string(text);
    free(text);
    return j;
}

static json_t *ref_num(uint64_t v, bool zero_is_null)
{
    if (v == 0 && zero_is_null)
        return json_null();
    return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static char *ref_line(const struct px_log_entry *e, const char *ts)
{
    json_t *o = json_object();
    json_object_set_new(o, "ts", json_string(ts));
    json_object_set_new(o, "id", ref_num(e->id, false));
    json_object_set_new(o, "sandbox", ref_str(e->sandbox));
    json_object_set_new(o, "owner", ref_str(e->owner));
    json_object_set_new(o, "src", ref_str(e->src));
    json_object_set_new(o, "mode", ref_str(e->mode));
    json_object_set_new(o, "method", ref_str(e->method));
    json_object_set_new(o, "host", ref_name(e->host));
    json_object_set_new(o, "port", ref_num(e->port, true));
    json_object_set_new(o, "sni", ref_name(e->sni));
    json_object_set_new(o, "decision", ref_str(e->decision));
    json_object_set_new(o, "reason", ref_str(e->reason));
    json_object_set_new(o, "rule", ref_str(e->rule));
    json_object_set_new(o, "upstream", ref_str(e->upstream));
    json_object_set_new(o, "country", ref_str(e->country && e->country[0] ? e->country : NULL));
    json_object_set_new(o, "asn", ref_num(e->asn, true));
    json_object_set_new(o, "bytes_up", ref_num(e->bytes_up, false));
    json_object_set_new(o, "bytes_down", ref_num(e->bytes_down, false));
    json_object_set_new(o, "duration_ms", ref_num(e->duration_ms, false));
    json_object_set_new(o, "status", ref_num(e->status, true));
    json_object_set_new(o, "termination", ref_str(e->termination));
    json_object_set_new(o, "answer", ref_str(e->answer));
    json_object_set_new(o, "count", ref_num(e->count, true));
    json_object_set_new(o, "inject", ref_str(e->inject));
    json_object_set_new(o, "path", ref_str(e->path));
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return line;
}

/* A random string: bytes drawn so that every class shows up (controls,
 * quotes, ASCII, valid and broken UTF-8 sequences, surrogates, overlongs),
 * sometimes past the 1 KiB cut; or NULL. */
static char *rand_str(unsigned *seed)
{
    static const char *pieces[] = {"\"",
                                   "\\",
                                   "\n",
                                   "\x01",
                                   "\x1f",
                                   "\x7f",
                                   "/",
                                   "a",
                                   "Z",
                                   "~",
                                   "\xc3\xa9",
                                   "\xe2\x82\xac",
                                   "\xf0\x9f\x98\x80",
                                   "\xc3",
                                   "\xa9",
                                   "\xff",
                                   "\xc0\x80",
                                   "\xed\xa0\x80",
                                   "\xf4\x90\x80\x80",
                                   "\xe0\x80\xaf",
                                   "\xf5\x80\x80\x80",
                                   "\xe2\x82"};
    size_t npieces = sizeof(pieces) / sizeof(pieces[0]);
    if (rand_r(seed) % 10 == 0)
        return NULL;
    size_t want =
        rand_r(seed) % 4 == 0 ? 1000 + (size_t)rand_r(seed) % 100 : (size_t)rand_r(seed) % 40;
    char *s = malloc(want * 4 + 8);
    size_t k = 0;
    while (k < want) {
        const char *p = pieces[(size_t)rand_r(seed) % npieces];
        size_t m = strlen(p);
        memcpy(s + k, p, m);
        k += m;
    }
    s[k] = '\0';
    return s;
}

static void test_format_against_jansson(void)
{
    unsigned seed = 20261130;
    int same = 0, n = 3000;
    char first_diff[2][200] = {"", ""};

    for (int i = 0; i < n; i++) {
        struct px_log_entry e = full_entry();
        char *str[16];
        const char **field[] = {&e.sandbox,     &e.owner,  &e.src,      &e.mode,
                                &e.method,      &e.host,   &e.sni,      &e.decision,
                                &e.reason,      &e.rule,   &e.upstream, &e.country,
                                &e.termination, &e.answer, &e.inject,   &e.path};
        for (int f = 0; f < 16; f++) {
            str[f] = rand_str(&seed);
            *field[f] = str[f];
        }
        uint64_t nums[] = {0, 1, 9, 10, 65535, UINT32_MAX, (uint64_t)INT64_MAX, UINT64_MAX};
        e.id = nums[(size_t)rand_r(&seed) % 8];
        e.port = (unsigned)(nums[(size_t)rand_r(&seed) % 5]);
        e.asn = (uint32_t)nums[(size_t)rand_r(&seed) % 6];
        e.bytes_up = nums[(size_t)rand_r(&seed) % 8];
        e.bytes_down = nums[(size_t)rand_r(&seed) % 8];
        e.duration_ms = nums[(size_t)rand_r(&seed) % 8];
        e.status = (unsigned)(nums[(size_t)rand_r(&seed) % 5]);
        e.count = nums[(size_t)rand_r(&seed) % 8];
        char *got = px_accesslog_format(&e);
        char ts[40];
        /* the ts field as the formatter wrote it: "{\"ts\":\"" + 24 chars */
        snprintf(ts, sizeof(ts), "%.24s", got + 7);
        char *want = ref_line(&e, ts);
        if (want != NULL && strcmp(got, want) == 0)
            same++;
        else if (first_diff[0][0] == '\0') {
            snprintf(first_diff[0], sizeof(first_diff[0]), "%s", got);
            snprintf(first_diff[1], sizeof(first_diff[1]), "%s", want ? want : "(null)");
        }
        free(got);
        free(want);
        for (int f = 0; f < 16; f++)
            free(str[f]);
    }
    if (!ok(same == n,
            "%d random entries (hostile bytes, cut fields, extreme numbers): each line is "
            "byte for byte what jansson writes (%d are)",
            n, same))
        diag("got  %s\nwant %s", first_diff[0], first_diff[1]);
}

static void test_ts(void)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {951868799007, "2000-02-29T23:59:59.007Z"},
        {1796029200999, "2026-11-30T09:00:00.999Z"},
        /* The second's text is kept between lines: the same second again,
         * the next one, and back. */
        {1796029200040, "2026-11-30T09:00:00.040Z"},
        {1796029201040, "2026-11-30T09:00:01.040Z"},
        {1796029200500, "2026-11-30T09:00:00.500Z"},
        {-1, "1969-12-31T23:59:59.999Z"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct px_log_entry e = full_entry();
        e.ts_ms = cases[i].ms;
        char *line = px_accesslog_format(&e);
        char want[64];
        snprintf(want, sizeof(want), "{\"ts\":\"%s\",", cases[i].want);
        ok(strncmp(line, want, strlen(want)) == 0, "ts %lld is %s", (long long)cases[i].ms,
           cases[i].want);
        free(line);
    }
}

static void test_file_and_reopen(void)
{
    char path[256], rotated[256], err[512];
    struct px_log_entry e = full_entry();
    struct stat st;
    char *a, *b;

    path_in_dir(path, sizeof(path), "access.log");
    path_in_dir(rotated, sizeof(rotated), "access.log.1");
    umask(022);
    ok(px_accesslog_open(path, err, sizeof(err)) == 0, "open %s", path);
    int st_rc = stat(path, &st);
    ok(st_rc == 0 && (st.st_mode & 0777) == 0640, "the file is created mode 0640 (%o)",
       st_rc == 0 ? (unsigned)(st.st_mode & 0777) : 0);
    e.id = 1;
    px_accesslog_write(&e);
    ok(rename(path, rotated) == 0, "logrotate renames the file");
    ok(px_accesslog_reopen() == 0, "reopen");
    e.id = 2;
    px_accesslog_write(&e);
    px_accesslog_close();
    a = slurp(rotated, NULL);
    b = slurp(path, NULL);
    ok(a && count_lines(a) == 1 && strstr(a, "\"id\":1,") && a[strlen(a) - 1] == '\n',
       "the line before the reopen is in the renamed file, newline-terminated");
    ok(b && count_lines(b) == 1 && strstr(b, "\"id\":2,"),
       "the line after the reopen is in the new file");
    free(a);
    free(b);
    px_accesslog_write(&e); /* closed: dropped, no crash */
    b = slurp(path, NULL);
    ok(b && count_lines(b) == 1, "after close, a write goes nowhere");
    free(b);
    unlink(path);
    unlink(rotated);
}

static void test_open_errors(void)
{
    char path[256], err[512] = "";

    path_in_dir(path, sizeof(path), "no/such/dir/access.log");
    ok(px_accesslog_open(path, err, sizeof(err)) == -1, "open in a missing directory fails");
    ok(strncmp(err, path, strlen(path)) == 0 && strstr(err, "No such file"),
       "the error names the path and the reason: %s", err);
}

static void test_stdout(void)
{
    int pipefd[2], saved;
    char err[256], buf[4096];
    struct px_log_entry e = full_entry();
    ssize_t n;

    fflush(stdout);
    if (pipe(pipefd) == -1 || (saved = dup(STDOUT_FILENO)) == -1) {
        ok(0, "pipe for standard output: %s", strerror(errno));
        return;
    }
    dup2(pipefd[1], STDOUT_FILENO);
    int rc = px_accesslog_open("stdout", err, sizeof(err));
    e.id = 99;
    px_accesslog_write(&e);
    px_accesslog_close(); /* must not close fd 1 */
    n = write(STDOUT_FILENO, "!", 1);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(pipefd[1]);
    ssize_t got = read(pipefd[0], buf, sizeof(buf) - 1);
    close(pipefd[0]);
    buf[got > 0 ? got : 0] = '\0';
    ok(rc == 0, "open \"stdout\"");
    ok(got > 0 && buf[0] == '{' && strstr(buf, "\"id\":99,") && strstr(buf, "}\n!"),
       "\"stdout\" writes the line to fd 1");
    ok(n == 1, "closing the log leaves fd 1 open");
}

struct writer {
    int idx;
    int lines;
};

static void *on_writer(void *arg)
{
    struct writer *w = arg;
    struct px_log_entry e = full_entry();
    char host[600];

    /* longer than PIPE_BUF would allow for a pipe: lines must stay whole */
    memset(host, 'a' + w->idx, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    e.host = host;
    for (int i = 0; i < w->lines; i++) {
        e.id = (uint64_t)w->idx * 1000000 + (uint64_t)i;
        px_accesslog_write(&e);
    }
    return NULL;
}

/* Check every line of one file: whole JSON with the expected host. */
static size_t check_lines(const char *path, size_t *bad)
{
    char *text = slurp(path, NULL), *save = NULL;
    size_t n = 0;

    if (text == NULL)
        return 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_t *o = json_loads(l, 0, NULL);
        const char *h = o ? json_string_value(json_object_get(o, "host")) : NULL;
        if (h == NULL || strlen(h) != 599 || strspn(h, (char[]){h[0], 0}) != 599)
            (*bad)++;
        json_decref(o);
        n++;
    }
    free(text);
    return n;
}

static void test_concurrent_reopen(void)
{
    enum { LINES = 3000, ROTATIONS = 20 };
    char path[256], old[300], err[512];
    struct writer w[THREADS];
    pthread_t t[THREADS];
    size_t total = 0, bad = 0;
    int reopen_fail = 0;

    path_in_dir(path, sizeof(path), "race.log");
    px_accesslog_open(path, err, sizeof(err));
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct writer){.idx = i, .lines = LINES};
        pthread_create(&t[i], NULL, on_writer, &w[i]);
    }
    for (int r = 0; r < ROTATIONS; r++) {
        snprintf(old, sizeof(old), "%s.%d", path, r);
        rename(path, old);
        reopen_fail += px_accesslog_reopen() != 0;
        usleep(1000);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    px_accesslog_close();
    total += check_lines(path, &bad);
    unlink(path);
    for (int r = 0; r < ROTATIONS; r++) {
        snprintf(old, sizeof(old), "%s.%d", path, r);
        total += check_lines(old, &bad);
        unlink(old);
    }
    ok(reopen_fail == 0, "%d reopens while %d threads write", ROTATIONS, THREADS);
    ok(total == (size_t)THREADS * LINES, "no line lost across the rotations (%zu of %d)", total,
       THREADS * LINES);
    ok(bad == 0, "every line is whole JSON with one thread's host (%zu bad)", bad);
}

/* --------------------------------------------------------------- metrics */

/* The value of the series whose text before the value is exactly `series`,
 * or -1 when it is not on the page (or twice). */
static double value_of(const char *page, const char *series)
{
    size_t n = strlen(series);
    double v = -1;
    int found = 0;

    for (const char *l = page; *l; l = strchr(l, '\n') + 1) {
        if (strncmp(l, series, n) == 0 && l[n] == ' ') {
            v = strtod(l + n + 1, NULL);
            found++;
        }
        if (strchr(l, '\n') == NULL)
            break;
    }
    return found == 1 ? v : -1;
}

/* Lines of the page that start with `prefix`. */
static int count_prefix(const char *page, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);

    for (const char *l = page; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        n += strncmp(l, prefix, len) == 0;
    return n;
}

/* The text format's shape: each series line is `NAME[{...}] VALUE`, and its
 * family got HELP and TYPE lines before it.  Returns the first bad line. */
static const char *page_shape(const char *page, char *bad, size_t badlen)
{
    char family[128] = "", type[32] = "";
    char *copy = strdup(page), *save = NULL;
    const char *res = NULL;

    for (char *l = strtok_r(copy, "\n", &save); l && !res; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "# HELP ", 7) == 0)
            continue;
        if (sscanf(l, "# TYPE %127s %31s", family, type) == 2)
            continue;
        size_t name_len = strcspn(l, "{ ");
        char *sp = strrchr(l, ' '), *end;
        if (sp == NULL || strtod(sp + 1, &end) < 0 || *end != '\0' ||
            strncmp(l, family, strlen(family)) != 0 ||
            (name_len != strlen(family) && strcmp(type, "histogram") != 0)) {
            snprintf(bad, badlen, "%s", l);
            res = bad;
        }
    }
    free(copy);
    return res;
}

static void test_empty_page(void)
{
    static const char *const families[] = {
        "connections_total counter", "active_connections gauge",
        "bytes_total counter",       "upstream_connect_seconds histogram",
        "dns_lookups_total counter", "dns_queries_total counter",
        "injections_total counter",  "policy_reloads_total counter",
        "policy_rules gauge",        "sandboxes gauge",
        "build_info gauge"};
    char *page = px_metrics_render(NULL);
    char want[128], bad[512];
    int missing = 0;

    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        snprintf(want, sizeof(want), "# TYPE egressd_%s\n", families[i]);
        if (strstr(page, want) == NULL) {
            diag("missing: %s", want);
            missing++;
        }
    }
    ok(missing == 0, "before any count, all twelve families have their TYPE line");
    ok(count_prefix(page, "# HELP egressd_") == 12, "and a HELP line each");
    ok(count_prefix(page, "egressd_injections_total") == 0, "no injections series yet");
    ok(value_of(page, "egressd_dns_queries_total{result=\"rate_limited\"}") == 0,
       "the DNS server's counts are there, at 0");
    ok(count_prefix(page, "egressd_connections_total") == 0, "no connections series yet");
    ok(value_of(page, "egressd_build_info{version=\"1.2.3-test\"}") == 1, "build_info is 1");
    ok(page_shape(page, bad, sizeof(bad)) == NULL, "the empty page is well formed");
    free(page);
}

static void test_counts(void)
{
    struct px_msb *a = px_metrics_sandbox_get("101", "alice");
    struct px_msb *b = px_metrics_sandbox_get("default", NULL);
    char *page, bad[512];

    for (int i = 0; i < 3; i++)
        px_metrics_decision(a, PX_MODE_CONNECT, POLICY_ALLOW, PX_R_ALLOWED);
    px_metrics_decision(a, PX_MODE_TLS, POLICY_DENY, PX_R_SNI_MISMATCH);
    px_metrics_decision(b, PX_MODE_HTTP, POLICY_WOULD_DENY, PX_R_NOT_ALLOWED);
    px_metrics_decision(b, PX_MODE_HTTP, POLICY_DENY, PX_R_COUNT); /* not a word: ignored */
    px_metrics_active(a, 1);
    px_metrics_active(a, 1);
    px_metrics_active(a, -1);
    px_metrics_bytes(a, 100, 2000);
    px_metrics_bytes(a, 1, 0);
    page = px_metrics_render(NULL);
    ok(value_of(page, "egressd_connections_total{sandbox=\"101\",owner=\"alice\",mode=\"connect\","
                      "decision=\"allow\",reason=\"allowed\"}") == 3,
       "connections_total: 3 allowed CONNECTs of 101/alice");
    ok(value_of(page, "egressd_connections_total{sandbox=\"101\",owner=\"alice\",mode=\"tls\","
                      "decision=\"deny\",reason=\"sni_mismatch\"}") == 1,
       "connections_total: 1 denied TLS, sni_mismatch");
    ok(value_of(page, "egressd_connections_total{sandbox=\"default\",owner=\"\",mode=\"http\","
                      "decision=\"would_deny\",reason=\"not_allowed\"}") == 1,
       "a NULL owner is written \"\"; would_deny is its own decision");
    ok(count_prefix(page, "egressd_connections_total{") == 3,
       "only the three series counted are on the page");
    ok(value_of(page, "egressd_active_connections{sandbox=\"101\",owner=\"alice\"}") == 1,
       "active_connections: +1 +1 -1 is 1");
    ok(value_of(page, "egressd_active_connections{sandbox=\"default\",owner=\"\"}") == 0,
       "active_connections of the other pair is 0");
    ok(value_of(page, "egressd_bytes_total{sandbox=\"101\",owner=\"alice\",direction=\"up\"}") ==
           101,
       "bytes_total up is 101");
    ok(value_of(page, "egressd_bytes_total{sandbox=\"101\",owner=\"alice\",direction=\"down\"}") ==
           2000,
       "bytes_total down is 2000");
    if (!ok(page_shape(page, bad, sizeof(bad)) == NULL, "the page is well formed"))
        diag("bad line: %s", bad);
    ok(px_metrics_sandbox_get("101", "alice") == a, "the same pair gives the same handle");
    px_metrics_sandbox_put(a);
    px_metrics_active(a, -1);
    px_metrics_sandbox_put(a);
    px_metrics_sandbox_put(b);
    free(page);
}

static void test_label_escaping(void)
{
    struct px_msb *m = px_metrics_sandbox_get("we\"ird\\id\nx", "o\xffwn");
    char *page;

    px_metrics_decision(m, PX_MODE_PLAIN, POLICY_DENY, PX_R_BAD_HOST);
    page = px_metrics_render(NULL);
    ok(value_of(page, "egressd_connections_total{sandbox=\"we\\\"ird\\\\id\\nx\",owner=\"o?wn\","
                      "mode=\"plain\",decision=\"deny\",reason=\"bad_host\"}") == 1,
       "quote, backslash and line feed are escaped; a byte that is not UTF-8 becomes '?'");
    px_metrics_sandbox_put(m);
    free(page);
}

static void test_histogram(void)
{
    static const double samples[] = {0.0005, -1, 0.003, 0.003, 0.2, 20, NAN};
    static const char *const le[] = {"0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                     "0.25",  "0.5",    "1",     "2.5",  "5",     "10",   "+Inf"};
    static const double want[] = {3, 3, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 7};
    char series[128], *page;
    double prev = 0;
    int wrong = 0, decreasing = 0;

    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
        px_metrics_upstream_connect(samples[i]);
    page = px_metrics_render(NULL);
    for (size_t i = 0; i < sizeof(le) / sizeof(le[0]); i++) {
        snprintf(series, sizeof(series), "egressd_upstream_connect_seconds_bucket{le=\"%s\"}",
                 le[i]);
        double v = value_of(page, series);
        if (v != want[i]) {
            diag("%s is %g, want %g", series, v, want[i]);
            wrong++;
        }
        decreasing += v < prev;
        prev = v;
    }
    ok(wrong == 0, "each bucket counts the samples at or below its bound (negative, NaN: 0)");
    ok(decreasing == 0, "the buckets are cumulative");
    ok(value_of(page, "egressd_upstream_connect_seconds_count") == 7 && prev == 7,
       "_count equals the +Inf bucket");
    double sum = value_of(page, "egressd_upstream_connect_seconds_sum");
    ok(sum > 20.2065 - 1e-6 && sum < 20.2065 + 1e-6, "_sum is the sum of the samples (%g)",
       value_of(page, "egressd_upstream_connect_seconds_sum"));
    free(page);
}

static struct policy *build_policy(void)
{
    static const char a[] = "github.com\ndeny gist.github.com\n", b[] = "pypi.org\n";
    struct policy_diag d = {0};
    struct policy_builder *pb = policy_builder_new();

    policy_builder_add_preset(pb, "alpha", "alpha.allow", a, strlen(a));
    policy_builder_add_preset(pb, "beta\"x", "beta.allow", b, strlen(b));
    struct policy *p = policy_builder_finish(pb, &d);
    policy_diag_free(&d);
    return p;
}

static void test_globals(void)
{
    struct policy *p = build_policy();
    char *page;

    px_metrics_dns("ok");
    px_metrics_dns("ok");
    px_metrics_dns("nxdomain");
    px_metrics_dns("bogus");
    px_metrics_dns(NULL);
    px_metrics_reload(true);
    px_metrics_reload(false);
    px_metrics_reload(false);
    px_metrics_set_sandboxes(7);
    ok(p != NULL, "a policy of two presets builds");
    px_metrics_set_policy(p);
    page = px_metrics_render(NULL);
    ok(value_of(page, "egressd_dns_lookups_total{result=\"ok\"}") == 2 &&
           value_of(page, "egressd_dns_lookups_total{result=\"nxdomain\"}") == 1 &&
           value_of(page, "egressd_dns_lookups_total{result=\"hosts\"}") == 0 &&
           value_of(page, "egressd_dns_lookups_total{result=\"cache\"}") == 0 &&
           value_of(page, "egressd_dns_lookups_total{result=\"fail\"}") == 0,
       "dns_lookups_total by result; unknown words are not counted");
    ok(count_prefix(page, "egressd_dns_lookups_total{") == 5, "five dns results, no more");
    ok(value_of(page, "egressd_policy_reloads_total{result=\"ok\"}") == 1 &&
           value_of(page, "egressd_policy_reloads_total{result=\"error\"}") == 2,
       "policy_reloads_total ok 1, error 2");
    ok(value_of(page, "egressd_policy_rules{preset=\"alpha\"}") == 2 &&
           value_of(page, "egressd_policy_rules{preset=\"beta\\\"x\"}") == 1,
       "policy_rules per preset, the name escaped");
    ok(value_of(page, "egressd_sandboxes") == 7, "sandboxes 7");
    free(page);
    px_metrics_set_policy(NULL);
    page = px_metrics_render(NULL);
    ok(count_prefix(page, "egressd_policy_rules{") == 0 &&
           strstr(page, "# TYPE egressd_policy_rules gauge\n"),
       "a policy of no presets leaves the family with no series");
    free(page);
    policy_unref(p);
}

static bool on_page(const char *sandbox)
{
    char *page = px_metrics_render(NULL), prefix[128];
    snprintf(prefix, sizeof(prefix), "egressd_active_connections{sandbox=\"%s\"", sandbox);
    bool found = count_prefix(page, prefix) > 0;
    free(page);
    return found;
}

static void test_sweep(void)
{
    struct px_msb *held = px_metrics_sandbox_get("h2", "o");
    struct px_msb *busy = px_metrics_sandbox_get("b3", "o");
    struct px_msb *gone = px_metrics_sandbox_get("g4", "o");
    struct px_msb *twice = px_metrics_sandbox_ref(px_metrics_sandbox_get("t5", "o"));

    px_metrics_decision(gone, PX_MODE_CONNECT, POLICY_ALLOW, PX_R_ALLOWED);
    px_metrics_active(busy, 1);
    px_metrics_sandbox_put(busy); /* put back, but its gauge says a connection is open */
    px_metrics_sandbox_put(gone);
    px_metrics_sandbox_put(twice); /* one of its two references */
    px_metrics_sweep();
    ok(on_page("h2"), "a sandbox with a handle out stays");
    ok(on_page("t5"), "so does one with a second reference out after the first is put");
    ok(on_page("b3"), "a sandbox with active connections stays");
    ok(!on_page("g4"), "an unused sandbox is dropped");
    ok(!on_page("default") && !on_page("we\\\"ird"), "so are the earlier unused ones");
    px_metrics_sandbox_put(held);
    px_metrics_sandbox_put(twice);
    px_metrics_active(busy, -1);
    ok(!on_page("h2") && !on_page("b3") && !on_page("t5"),
       "once put back and idle they go too, at the next page");
    gone = px_metrics_sandbox_get("g4", "o");
    char *page = px_metrics_render(NULL);
    ok(count_prefix(page, "egressd_connections_total{sandbox=\"g4\"") == 0,
       "a dropped sandbox comes back with fresh counters");
    free(page);
    px_metrics_sandbox_put(gone);
}

enum { ROUNDS = 100000 };

static void *on_counter(void *arg)
{
    int idx = *(int *)arg;
    char tmp[32];

    snprintf(tmp, sizeof(tmp), "tmp%d", idx);
    /* half the threads count in rows of their own, half share row 0 */
    px_metrics_thread(idx % 2 == 0 ? (unsigned)idx + 1 : 0);
    for (int i = 0; i < ROUNDS; i++) {
        struct px_msb *m = px_metrics_sandbox_get("conc", "o");
        px_metrics_active(m, 1);
        px_metrics_decision(m, PX_MODE_CONNECT, POLICY_ALLOW, PX_R_ALLOWED);
        px_metrics_bytes(m, 1, 2);
        px_metrics_dns("cache");
        if (i % 1000 == 0)
            px_metrics_upstream_connect(0.01);
        px_metrics_active(m, -1);
        px_metrics_sandbox_put(m);
        if (i % 100 == 0) { /* a sandbox that comes and goes, for the churn to drop */
            m = px_metrics_sandbox_get(tmp, "o");
            px_metrics_decision(m, PX_MODE_TLS, POLICY_DENY, PX_R_NO_SNI);
            px_metrics_sandbox_put(m);
        }
    }
    return NULL;
}

/* Renders and forgets while the counters run: the table's lock must not
 * lose counts, and forgetting must not free a handle that is out. */
static void *on_churn(void *arg)
{
    atomic_int *stop = arg;
    int rounds = 0;

    while (!atomic_load(stop) || rounds == 0) {
        free(px_metrics_render(NULL));
        px_metrics_sweep();
        rounds++;
    }
    return NULL;
}

static void test_concurrent(void)
{
    const char *cs = "egressd_connections_total{sandbox=\"conc\",owner=\"o\",mode=\"connect\","
                     "decision=\"allow\",reason=\"allowed\"}";
    pthread_t t[THREADS], churn;
    int idx[THREADS];
    atomic_int stop = 0;
    /* held all along, so that the churn never drops the series counted */
    struct px_msb *hold = px_metrics_sandbox_get("conc", "o");
    char *page = px_metrics_render(NULL);
    double cache0 = value_of(page, "egressd_dns_lookups_total{result=\"cache\"}");
    double hist0 = value_of(page, "egressd_upstream_connect_seconds_count");

    free(page);
    pthread_create(&churn, NULL, on_churn, &stop);
    for (int i = 0; i < THREADS; i++) {
        idx[i] = i;
        pthread_create(&t[i], NULL, on_counter, &idx[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(churn, NULL);
    page = px_metrics_render(NULL);
    ok(value_of(page, cs) == THREADS * ROUNDS, "connections_total from %d threads x %d: %.0f",
       THREADS, ROUNDS, value_of(page, cs));
    ok(value_of(page, "egressd_bytes_total{sandbox=\"conc\",owner=\"o\",direction=\"up\"}") ==
               THREADS * ROUNDS &&
           value_of(page, "egressd_bytes_total{sandbox=\"conc\",owner=\"o\",direction=\"down\"}") ==
               2.0 * THREADS * ROUNDS,
       "bytes_total up and down: exact");
    ok(value_of(page, "egressd_active_connections{sandbox=\"conc\",owner=\"o\"}") == 0,
       "active_connections back to 0");
    ok(value_of(page, "egressd_dns_lookups_total{result=\"cache\"}") - cache0 == THREADS * ROUNDS,
       "dns_lookups_total: exact");
    ok(value_of(page, "egressd_upstream_connect_seconds_count") - hist0 == THREADS * ROUNDS / 1000,
       "histogram count: exact");
    free(page);
    px_metrics_sweep();
    page = px_metrics_render(NULL);
    ok(count_prefix(page, "egressd_active_connections{sandbox=\"tmp") == 0 &&
           value_of(page, cs) == THREADS * ROUNDS,
       "then the sandboxes that came and went are forgotten, the one held is not");
    free(page);
    px_metrics_sandbox_put(hold);
}

/* A worker's row: counts made there add up with row 0's on the page, a
 * gauge raised in one row and lowered in another is back to 0, and the
 * sandbox then goes at a sweep (its shards with it: LeakSanitizer). */
struct row_job {
    unsigned row;
    struct px_msb *m;
};

static void *on_row(void *arg)
{
    struct row_job *j = arg;

    px_metrics_thread(j->row);
    px_metrics_decision(j->m, PX_MODE_TLS, POLICY_ALLOW, PX_R_ALLOWED);
    px_metrics_decision(j->m, PX_MODE_TLS, POLICY_ALLOW, PX_R_ALLOWED);
    px_metrics_active(j->m, 1);
    px_metrics_bytes(j->m, 7, 0);
    px_metrics_dns("hosts");
    px_metrics_leaf(true);
    return NULL;
}

static void test_rows(void)
{
    const char *cs = "egressd_connections_total{sandbox=\"rows\",owner=\"o\",mode=\"tls\","
                     "decision=\"allow\",reason=\"allowed\"}";
    const char *act = "egressd_active_connections{sandbox=\"rows\",owner=\"o\"}";
    struct px_msb *m = px_metrics_sandbox_get("rows", "o");
    struct row_job jobs[] = {{5, m}, {PX_METRICS_SHARDS - 1, m}, {PX_METRICS_SHARDS, m}};
    char *page = px_metrics_render(NULL);
    double hosts0 = value_of(page, "egressd_dns_lookups_total{result=\"hosts\"}");
    double hits0 = value_of(page, "egressd_leaf_certificates_total{result=\"hit\"}");
    pthread_t t;

    free(page);
    for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
        pthread_create(&t, NULL, on_row, &jobs[i]);
        pthread_join(t, NULL); /* a row's counts outlive its thread */
    }
    px_metrics_decision(m, PX_MODE_TLS, POLICY_ALLOW, PX_R_ALLOWED); /* row 0 */
    px_metrics_bytes(m, 0, 9);
    page = px_metrics_render(NULL);
    ok(value_of(page, cs) == 7, "connections_total sums the rows: %.0f", value_of(page, cs));
    ok(value_of(page, "egressd_bytes_total{sandbox=\"rows\",owner=\"o\",direction=\"up\"}") == 21 &&
           value_of(page, "egressd_bytes_total{sandbox=\"rows\",owner=\"o\",direction=\"down\"}") ==
               9,
       "so does bytes_total");
    ok(value_of(page, act) == 3, "and active_connections: %.0f", value_of(page, act));
    ok(value_of(page, "egressd_dns_lookups_total{result=\"hosts\"}") - hosts0 == 3 &&
           value_of(page, "egressd_leaf_certificates_total{result=\"hit\"}") - hits0 == 3,
       "the global counters too (a row out of range is clamped: ASan)");
    free(page);
    px_metrics_active(m, -3); /* closed elsewhere than where they opened */
    px_metrics_sandbox_put(m);
    px_metrics_sweep();
    ok(!on_page("rows"), "a gauge back to 0 over its rows lets the sandbox go");
}

/* ------------------------------------------------------------ listener */

struct exchange {
    int port;
    const char *request;
    char reply[65536];
    size_t len;
};

static void *on_client(void *arg)
{
    struct exchange *x = arg;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)x->port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ssize_t n;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    x->len = 0;
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == -1) {
        close(fd);
        return NULL;
    }
    for (size_t off = 0, len = strlen(x->request); off < len; off += (size_t)n) {
        n = write(fd, x->request + off, len - off);
        if (n <= 0)
            break;
    }
    while (x->len < sizeof(x->reply) - 1 &&
           (n = read(fd, x->reply + x->len, sizeof(x->reply) - 1 - x->len)) > 0)
        x->len += (size_t)n;
    x->reply[x->len] = '\0';
    close(fd);
    return NULL;
}

/* Wakes the loop so that roundtrip() can see the client thread end. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* One request on a fresh connection, answered from base's loop. */
static void roundtrip(struct event_base *base, struct exchange *x)
{
    struct timeval tick = {0, 5000};
    struct event *ev = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    pthread_t t;

    event_add(ev, &tick);
    pthread_create(&t, NULL, on_client, x);
    /* the client thread ends when the server closes: HTTP/1.0, no keep-alive */
    for (;;) {
        event_base_loop(base, EVLOOP_ONCE);
        if (pthread_tryjoin_np(t, NULL) == 0)
            break;
    }
    event_free(ev);
}

static int free_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    close(fd);
    return port;
}

static void test_listener(void)
{
    struct event_base *base = event_base_new();
    struct exchange *x = calloc(1, sizeof(*x));
    struct px_addr addr;
    char text[64], err[256];
    int port = free_port();

    snprintf(text, sizeof(text), "127.0.0.1:%d", port);
    ok(px_parse_addr(text, &addr, 0), "address %s", text);
    if (!ok(px_metrics_listen(base, &addr, err, sizeof(err)) == 0, "listen on %s", text)) {
        diag("%s", err);
        goto out;
    }
    x->port = port;
    x->request = "GET /metrics HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    ok(strncmp(x->reply, "HTTP/1.0 200", 12) == 0 || strncmp(x->reply, "HTTP/1.1 200", 12) == 0,
       "GET /metrics: 200");
    ok(strstr(x->reply, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") != NULL,
       "with the text format's content type");
    ok(strstr(x->reply, "\r\n\r\n# HELP egressd_connections_total ") &&
           strstr(x->reply, "egressd_build_info{version=\"1.2.3-test\"} 1\n"),
       "and the page as its body");

    x->request = "GET /metrics?x=1 HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    ok(strstr(x->reply, " 200 ") && strstr(x->reply, "egressd_build_info"),
       "a query string does not change the path");

    x->request = "HEAD /metrics HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    const char *cl = strstr(x->reply, "Content-Length: ");
    const char *body = strstr(x->reply, "\r\n\r\n");
    ok(strstr(x->reply, " 200 ") && cl && atoi(cl + 16) > 1000 && body && body[4] == '\0',
       "HEAD /metrics: 200, the page's length, no body");

    x->request = "GET /healthz HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    body = strstr(x->reply, "\r\n\r\n");
    ok(strstr(x->reply, " 200 ") && body && strcmp(body + 4, "ok\n") == 0, "GET /healthz: ok");

    x->request = "GET /other HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    ok(strstr(x->reply, " 404 ") != NULL, "GET /other: 404");

    x->request = "POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi";
    roundtrip(base, x);
    ok(strstr(x->reply, " 405 ") && strstr(x->reply, "Allow: GET, HEAD\r\n"),
       "POST /metrics: 405 with Allow");

    x->request = "DELETE /healthz HTTP/1.0\r\n\r\n";
    roundtrip(base, x);
    ok(strstr(x->reply, " 405 ") != NULL, "DELETE /healthz: 405");

    char *big = malloc(20100);
    strcpy(big, "GET /metrics HTTP/1.0\r\nX-Big: ");
    memset(big + strlen(big), 'a', 20000);
    strcpy(big + 20030, "\r\n\r\n");
    x->request = big;
    roundtrip(base, x);
    ok(strstr(x->reply, " 200 ") == NULL, "a 20 kB header is refused (%.12s)",
       x->len ? x->reply : "connection closed");
    free(big);

    ok(px_metrics_listen(base, &addr, err, sizeof(err)) == -1, "a second listen is refused");
    px_metrics_stop();
    int blocker = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    /* the connections above left TIME_WAIT entries on the port */
    setsockopt(blocker, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok(bind(blocker, (struct sockaddr *)&addr.ss, addr.len) == 0 && listen(blocker, 1) == 0,
       "after stop the port is free again");
    ok(px_metrics_listen(base, &addr, err, sizeof(err)) == -1 &&
           strncmp(err, text, strlen(text)) == 0 && strstr(err, "in use"),
       "listening on a port in use fails: %s", err);
    close(blocker);
out:
    px_metrics_stop();
    free(x);
    event_base_free(base);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a refused request may close before it is all sent */
    if (mkdtemp(dir) == NULL) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return tap_done();
    }
    test_format_full();
    test_format_nulls();
    test_format_hostile();
    test_format_long_host();
    test_format_against_jansson();
    test_ts();
    test_file_and_reopen();
    test_open_errors();
    test_stdout();
    test_concurrent_reopen();

    px_metrics_init("1.2.3-test");
    test_empty_page();
    test_counts();
    test_label_escaping();
    test_histogram();
    test_globals();
    test_sweep();
    test_concurrent();
    test_rows();
    test_listener();
    rmdir(dir);
    return tap_done();
}
