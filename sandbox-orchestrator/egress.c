/* egress.c - egressd admin API client over a unix socket or HTTP(S). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "egress.h"
#include "grant.h"

/* The largest answer is the whole set of bindings (GET /v1/sandboxes,
 * which sync compares): egressd takes a set of at most 1 MiB.  (A
 * credentials answer, a CA certificate and a placeholder per secret, is a
 * few KiB; most answers are far smaller.)  The buffer grows as the answer
 * comes, from ANSWER_FIRST. */
#define ANSWER_MAX   (1024 * 1024 + 4096)
#define ANSWER_FIRST 4096

struct answer {
    char *buf; /* len bytes and a NUL */
    size_t len, cap;
    int cut; /* more came than ANSWER_MAX - 1 bytes */
};

/* An empty answer (answer_free() it). */
static struct answer *answer_new(void)
{
    struct answer *a = calloc(1, sizeof *a);

    if (a == NULL || (a->buf = malloc(ANSWER_FIRST)) == NULL)
        abort();
    a->cap = ANSWER_FIRST;
    a->buf[0] = '\0';
    return a;
}

static void answer_free(struct answer *a)
{
    if (a != NULL)
        free(a->buf);
    free(a);
}

bool sbx_egress_binding_current(const json_t *want, const json_t *held)
{
    return held != NULL && json_equal(want, held);
}

json_t *sbx_egress_binding(int vmid, const char *name, const struct sbx_meta *m)
{
    char id[16], expires[32];
    json_t *allow = json_array(), *b;

    snprintf(id, sizeof id, "%d", vmid);
    sbx_time_format(m->expires, expires, sizeof expires);
    for (int i = 0; i < m->nallow; i++)
        json_array_append_new(allow, json_string(m->allow[i]));
    /* A grant lapses in egressd by itself: "until" is a policy rule's. */
    for (int i = 0; i < m->ngrants; i++) {
        char line[SBX_ALLOW_MAX + SBX_GRANT_METHODS_MAX + SBX_GRANT_PATHS_MAX + 64];

        if (sbx_grant_line(&m->grants[i], true, line, sizeof line) >= 0)
            json_array_append_new(allow, json_string(line));
    }
    b = json_pack("{s:s,s:s,s:s,s:[s],s:s,s:o,s:s}", "id", id, "name", name, "owner", m->owner,
                  "addresses", m->address, "policy", m->policy, "allow", allow, "expires", expires);
    /* Only a sandbox with secrets says so: the bindings of the others stay
     * as they were before credential injection. */
    if (m->nsecrets > 0) {
        json_t *secrets = json_array();
        for (int i = 0; i < m->nsecrets; i++)
            json_array_append_new(secrets, json_string(m->secrets[i]));
        json_object_set_new(b, "secrets", secrets);
    }
    return b;
}

static size_t on_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    struct answer *a = arg;
    size_t n = size * nmemb;

    while (a->cap - 1 - a->len < n && a->cap < ANSWER_MAX) {
        a->cap = a->cap * 2 < ANSWER_MAX ? a->cap * 2 : ANSWER_MAX;
        if ((a->buf = realloc(a->buf, a->cap)) == NULL)
            abort();
    }
    size_t room = a->cap - 1 - a->len;
    memcpy(a->buf + a->len, data, n < room ? n : room);
    a->len += n < room ? n : room;
    a->cut |= n > room;
    a->buf[a->len] = '\0';
    return n;
}

/* What egressd said.  It answers a refusal with {"error": "...", "errors":
 * [...]}, the same text twice when there are several lines: its error text
 * alone, else the raw body; one line (a line break becomes a space) cut to
 * len, so the reason is not lost behind the JSON around it. */
static void answer_reason(const struct answer *a, char *buf, size_t len)
{
    json_t *j = json_loadb(a->buf, a->len, 0, NULL);
    const char *msg = json_string_value(json_object_get(j, "error"));
    const char *src = msg ? msg : a->buf;
    size_t n = strnlen(src, len - 1);

    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)src[i] < 0x20 ? ' ' : src[i];
    buf[n] = '\0';
    json_decref(j);
}

/* Read the admin token (one line) when one is configured.  Whoever holds
 * it can widen any sandbox's egress, so the file must be 0600 as the
 * Proxmox token's is. */
static int auth_header(const struct sbx_config *c, char *hdr, size_t len, char *err, size_t errlen)
{
    const char *path = c->egress_token_file;
    char tok[512];
    struct stat st;
    ssize_t n;
    int fd;

    hdr[0] = '\0';
    if (!path)
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd == -1 || fstat(fd, &st) == -1) {
        snprintf(err, errlen, "egressd-admin-token-file %s: cannot open: %s", path,
                 strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_mode & 077) {
        snprintf(err, errlen,
                 "egressd-admin-token-file %s: %s; it must be a regular file of mode 0600 (fix: "
                 "chmod 600 %s)",
                 path, S_ISREG(st.st_mode) ? "other users may read it" : "not a regular file",
                 path);
        close(fd);
        return -1;
    }
    n = read(fd, tok, sizeof tok - 1);
    close(fd);
    tok[n > 0 ? n : 0] = '\0';
    tok[strcspn(tok, "\r\n")] = '\0';
    if (n < 0 || tok[0] == '\0') {
        snprintf(err, errlen, "egressd-admin-token-file %s: %s", path,
                 n < 0 ? strerror(errno) : "empty (expected the token on its first line)");
        explicit_bzero(tok, sizeof tok);
        return -1;
    }
    snprintf(hdr, len, "Authorization: Bearer %s", tok);
    explicit_bzero(tok, sizeof tok);
    return 0;
}

/* Whether an http:// URL's host is this machine (127/8, localhost, ::1). */
static int loopback_url(const char *url)
{
    const char *h = url + strlen("http://");
    size_t n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");

    return (n == 9 && strncmp(h, "localhost", 9) == 0) || (n == 5 && strncmp(h, "[::1]", 5) == 0) ||
           strncmp(h, "127.", 4) == 0;
}

int sbx_egress_check_token(const struct sbx_config *c, char *err, size_t errlen)
{
    char hdr[600];
    int rc = auth_header(c, hdr, sizeof hdr, err, errlen);

    explicit_bzero(hdr, sizeof hdr);
    for (int i = 0; rc == 0 && c->egress_token_file && i < c->negress; i++) {
        if (strncmp(c->egress[i], "http://", 7) == 0 && !loopback_url(c->egress[i])) {
            snprintf(err, errlen,
                     "egressd-admin %s: the admin token would cross the network in clear; use "
                     "https:// or a unix: socket",
                     c->egress[i]);
            rc = -1;
        }
    }
    return rc;
}

/* A 2xx answer's body as JSON into *reply (new reference); -1 with err
 * when it is cut or not JSON. */
static int answer_json(const struct answer *a, const char *target, const char *method,
                       const char *path, json_t **reply, char *err, size_t errlen)
{
    json_error_t e;

    *reply = a->cut ? NULL : json_loadb(a->buf, a->len, 0, &e);
    if (*reply)
        return 0;
    if (a->cut)
        snprintf(err, errlen, "egressd %s: %s %s: the answer is longer than %d bytes", target,
                 method, path, ANSWER_MAX - 1);
    else
        snprintf(err, errlen, "egressd %s: %s %s: the answer is not JSON (%s)", target, method,
                 path, e.text);
    return -1;
}

/* The URL of path on the egressd at target (a new string), h set to reach
 * it: through its unix socket for unix:PATH. */
static char *target_url(CURL *h, const char *target, const char *path)
{
    char *url;

    if (strncmp(target, "unix:", 5) == 0) {
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, target + 5);
        if (asprintf(&url, "http://localhost%s", path) < 0)
            abort();
    } else if (asprintf(&url, "%s%s", target, path) < 0) {
        abort();
    }
    return url;
}

/* One request to one egressd; returns the HTTP status, or -1 with err.
 * With reply, a 2xx answer's JSON body goes into *reply (new reference;
 * NULL otherwise), and one that is not JSON makes it -1. */
static long request(const struct sbx_config *c, const char *target, const char *method,
                    const char *path, json_t *body, json_t **reply, char *err, size_t errlen)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    struct answer *a = answer_new();
    char *url, *payload = NULL, auth[600];
    long status = -1;
    CURLcode rc;

    if (!h)
        abort();
    if (reply)
        *reply = NULL;
    if (auth_header(c, auth, sizeof auth, err, errlen)) {
        curl_easy_cleanup(h);
        answer_free(a);
        return -1;
    }
    url = target_url(h, target, path);
    if (auth[0])
        hdrs = curl_slist_append(hdrs, auth);
    if (body) {
        payload = json_dumps(body, JSON_COMPACT);
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->http_timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_answer);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        snprintf(err, errlen, "egressd %s: %s %s: %s", target, method, path,
                 curl_easy_strerror(rc));
    else
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300 && status != 404) {
        char reason[400];
        answer_reason(a, reason, sizeof reason);
        snprintf(err, errlen, "egressd %s: %s %s: %ld %s", target, method, path, status, reason);
    }
    if (reply && status >= 200 && status < 300 &&
        answer_json(a, target, method, path, reply, err, errlen))
        status = -1;
    answer_free(a);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    explicit_bzero(auth, sizeof auth);
    free(payload);
    free(url);
    return status;
}

/* Send to every egressd; collect the failures in err.  ok404: a 404
 * answer counts as done (deleting what is not there). */
static int to_all(const struct sbx_config *c, const char *method, const char *path, json_t *body,
                  int ok404, char *err, size_t errlen)
{
    size_t used = 0;
    int failed = 0;

    err[0] = '\0';
    for (int i = 0; i < c->negress; i++) {
        char one[800];
        long status = request(c, c->egress[i], method, path, body, NULL, one, sizeof one);
        if ((status >= 200 && status < 300) || (ok404 && status == 404))
            continue;
        if (status == 404)
            snprintf(one, sizeof one, "egressd %s: %s %s: 404", c->egress[i], method, path);
        failed = 1;
        if (used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%s%s", used ? "; " : "", one);
    }
    return failed ? -1 : 0;
}

int sbx_egress_put(const struct sbx_config *c, json_t *binding, char *err, size_t errlen)
{
    char path[128];

    snprintf(path, sizeof path, "/v1/sandboxes/%s",
             json_string_value(json_object_get(binding, "id")));
    return to_all(c, "PUT", path, binding, 0, err, errlen);
}

int sbx_egress_delete(const struct sbx_config *c, int vmid, char *err, size_t errlen)
{
    char path[64];

    snprintf(path, sizeof path, "/v1/sandboxes/%d", vmid);
    return to_all(c, "DELETE", path, NULL, 1, err, errlen);
}

int sbx_egress_replace_one(const struct sbx_config *c, const char *target, json_t *bindings,
                           char *err, size_t errlen)
{
    long status = request(c, target, "PUT", "/v1/sandboxes", bindings, NULL, err, errlen);

    if (status >= 200 && status < 300)
        return 0;
    if (status == 404)
        snprintf(err, errlen, "egressd %s: PUT /v1/sandboxes: 404", target);
    return -1;
}

/* Whether egressd i's credentials answer b agrees with a, egressd 0's;
 * when not, err says how. */
static int same_credentials(const struct sbx_config *c, int i, json_t *a, json_t *b, int vmid,
                            char *err, size_t errlen)
{
    int ca_a = !json_is_null(json_object_get(a, "ca")),
        ca_b = !json_is_null(json_object_get(b, "ca"));

    if (!json_equal(json_object_get(a, "placeholders"), json_object_get(b, "placeholders"))) {
        snprintf(err, errlen,
                 "egressd %s and egressd %s give sandbox %d different placeholders: every "
                 "egressd that serves the sandboxes must hold the same appliance key (copy "
                 "state-dir/appliance.key of one to the others, then restart them)",
                 c->egress[0], c->egress[i], vmid);
        return 0;
    }
    if (ca_a != ca_b) {
        snprintf(err, errlen,
                 "egressd %s gives sandbox %d %s CA and egressd %s %s: their presets bind its "
                 "secrets to different hosts",
                 c->egress[0], vmid, ca_a ? "a" : "no", c->egress[i], ca_b ? "one" : "none");
        return 0;
    }
    return 1;
}

/* GET path (about sandbox vmid) of egressd i: its JSON answer (new
 * reference), or NULL with err naming the egressd (a 404: it holds no
 * binding of the sandbox). */
static json_t *get_one(const struct sbx_config *c, int i, const char *path, int vmid, char *err,
                       size_t errlen)
{
    json_t *one = NULL;
    long status = request(c, c->egress[i], "GET", path, NULL, &one, err, errlen);

    if (status == 404)
        snprintf(err, errlen, "egressd %s: GET %s: 404 (it holds no binding of sandbox %d)",
                 c->egress[i], path, vmid);
    if (status >= 200 && status < 300)
        return one;
    json_decref(one);
    return NULL;
}

int sbx_egress_credentials(const struct sbx_config *c, int vmid, json_t **creds, char *err,
                           size_t errlen)
{
    char path[64];
    json_t *first = NULL;

    *creds = NULL;
    if (c->negress == 0) {
        snprintf(err, errlen, "no `egressd-admin` in %s: credential injection needs egressd",
                 c->path);
        return -1;
    }
    snprintf(path, sizeof path, "/v1/sandboxes/%d/credentials", vmid);
    for (int i = 0; i < c->negress; i++) {
        json_t *one = get_one(c, i, path, vmid, err, errlen);
        if (!one || (first && !same_credentials(c, i, first, one, vmid, err, errlen))) {
            json_decref(one);
            json_decref(first);
            return -1;
        }
        if (first)
            json_decref(one);
        else
            first = one;
    }
    *creds = first;
    return 0;
}

/* Newest first: "ts" is RFC 3339 in one form, so text order is time order. */
static int newest_first(const void *a, const void *b)
{
    const char *ta = json_string_value(json_object_get(*(json_t *const *)a, "ts"));
    const char *tb = json_string_value(json_object_get(*(json_t *const *)b, "ts"));

    return strcmp(tb ? tb : "", ta ? ta : "");
}

/* The denials of one answer, each marked with its egressd, onto all. */
static void denials_add(json_t *all, json_t *answer, const char *target)
{
    json_t *d;
    size_t i;

    json_array_foreach(json_object_get(answer, "denials"), i, d)
    {
        if (!json_is_object(d))
            continue;
        json_object_set_new(d, "egressd", json_string(target));
        json_array_append(all, d);
    }
}

int sbx_egress_denials(const struct sbx_config *c, int vmid, json_t **denials, char *err,
                       size_t errlen)
{
    char path[64];
    json_t *all = json_array(), **v;
    size_t n;

    *denials = NULL;
    snprintf(path, sizeof path, "/v1/sandboxes/%d/denials", vmid);
    for (int i = 0; i < c->negress; i++) {
        json_t *one = get_one(c, i, path, vmid, err, errlen);
        if (!one) {
            json_decref(all);
            return -1;
        }
        denials_add(all, one, c->egress[i]);
        json_decref(one);
    }
    n = json_array_size(all);
    v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        abort();
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(all, i));
    qsort(v, n, sizeof *v, newest_first);
    json_array_clear(all);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(all, v[i]);
    free(v);
    *denials = all;
    return 0;
}

int sbx_egress_status(const struct sbx_config *c, const char *target, char *err, size_t errlen)
{
    long status = request(c, target, "GET", "/v1/status", NULL, NULL, err, errlen);

    if (status >= 200 && status < 300)
        return 0;
    if (status == 404)
        snprintf(err, errlen, "egressd %s: GET /v1/status: 404", target);
    return -1;
}

int sbx_egress_get(const struct sbx_config *c, const char *target, const char *path, json_t **reply,
                   char *err, size_t errlen)
{
    long status = request(c, target, "GET", path, NULL, reply, err, errlen);

    if (status >= 200 && status < 300)
        return 0;
    if (status == 404)
        snprintf(err, errlen, "egressd %s: GET %s: 404", target, path);
    return -1;
}

/* A stream being read: the caller's callback, and the status seen. */
struct stream {
    sbx_egress_bytes_fn fn;
    void *arg;
    long status;
    CURL *h;
    struct answer *refusal; /* the body of an answer that is not 200 */
};

static size_t on_stream(char *data, size_t size, size_t nmemb, void *arg)
{
    struct stream *st = arg;
    size_t n = size * nmemb;

    if (st->status == 0)
        curl_easy_getinfo(st->h, CURLINFO_RESPONSE_CODE, &st->status);
    if (st->status != 200)
        return on_answer(data, size, nmemb, st->refusal);
    return st->fn(st->arg, data, n) == 0 ? n : 0;
}

/* libcurl asks this about once a second, also while nothing arrives. */
static int on_stream_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                              curl_off_t ulnow)
{
    struct stream *st = arg;

    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return st->fn(st->arg, NULL, 0);
}

int sbx_egress_stream(const struct sbx_config *c, const char *target, const char *path,
                      const char *last_id, sbx_egress_bytes_fn fn, void *arg, char *err,
                      size_t errlen)
{
    struct stream st = {fn, arg, 0, curl_easy_init(), answer_new()};
    struct curl_slist *hdrs = NULL;
    char auth[600], idh[128], *url;
    CURLcode rc;

    if (!st.h)
        abort();
    if (auth_header(c, auth, sizeof auth, err, errlen)) {
        curl_easy_cleanup(st.h);
        answer_free(st.refusal);
        return -1;
    }
    url = target_url(st.h, target, path);
    if (auth[0])
        hdrs = curl_slist_append(hdrs, auth);
    hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
    if (last_id && last_id[0]) {
        snprintf(idh, sizeof idh, "Last-Event-ID: %.64s", last_id);
        hdrs = curl_slist_append(hdrs, idh);
    }
    curl_easy_setopt(st.h, CURLOPT_URL, url);
    curl_easy_setopt(st.h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(st.h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(st.h, CURLOPT_PROXY, "");
    curl_easy_setopt(st.h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    /* No total timeout: a stream lasts; a silent one is seen by its
     * keepalive comments stopping (STREAM_SILENT_S). */
    curl_easy_setopt(st.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(st.h, CURLOPT_LOW_SPEED_TIME, (long)SBX_EGRESS_STREAM_SILENT_S);
    curl_easy_setopt(st.h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(st.h, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(st.h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(st.h, CURLOPT_XFERINFOFUNCTION, on_stream_progress);
    curl_easy_setopt(st.h, CURLOPT_XFERINFODATA, &st);
    rc = curl_easy_perform(st.h);
    if (st.status == 0)
        curl_easy_getinfo(st.h, CURLINFO_RESPONSE_CODE, &st.status);
    if (st.status != 200 && st.status != 0) {
        char reason[400];
        answer_reason(st.refusal, reason, sizeof reason);
        snprintf(err, errlen, "egressd %s: GET %s: %ld %s", target, path, st.status, reason);
    } else if (rc != CURLE_OK && rc != CURLE_ABORTED_BY_CALLBACK && rc != CURLE_WRITE_ERROR) {
        snprintf(err, errlen, "egressd %s: GET %s: %s", target, path, curl_easy_strerror(rc));
    } else {
        snprintf(err, errlen, "egressd %s: GET %s: the stream ended", target, path);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(st.h);
    explicit_bzero(auth, sizeof auth);
    answer_free(st.refusal);
    free(url);
    return st.status == 200 ? 0 : -1;
}
