/*
 * admin.c - see admin.h.  One evhttp server on the main thread's loop; each
 * request is routed by path, then by method.  Changes go through world.c,
 * which validates, persists and swaps; this file only translates between
 * HTTP and those calls, and answers every failure as {"error": "..."}.
 *
 * explain may have to wait for the resolver: its state is a `struct
 * explain` on a list, answered from the resolver's callback.  If the client
 * has gone meanwhile, evhttp has detached the request from its connection
 * and frees it when we answer, so answering is always safe; at stop, every
 * explain still waiting is answered 503 before evhttp goes away.
 */
#include "admin.h"
#include "asked.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "ca.h"
#include "denials.h"
#include "feed.h"
#include "handover.h"
#include "log.h"
#include "metrics.h"
#include "oauth.h"
#include "placeholder.h"
#include "policy.h"
#include "secrets.h"
#include "verdict.h"
#include "version.h"
#include "world.h"

#define BODY_MAX    (1u << 20) /* 1 MiB: far above any real set of bindings */
#define HEADERS_MAX (16u << 10)
#define TOKEN_MAX   256
#define TIMEOUT_S   30

/* An explain waiting for the resolver. */
struct explain {
    struct explain *next, **pprev;
    struct evhttp_request *req;
    struct px_world *w; /* held until the answer: sb and pb live in it */
    const char *sandbox;
    const struct policy_binding *pb;
    struct policy_host host;
    uint16_t port;
    int64_t now;
    struct policy_verdict name;
    struct px_dns_req *q;
    bool expired; /* the binding is past its `expires` */
    /* The request asked about (?method=&path=), as the judge takes it;
     * NULL: none (the destination alone).  The method is kept here. */
    struct px_asked *asked;
    char method[24];
};

static struct {
    struct event_base *base;
    struct evhttp *http;
    struct px_resolver *r;
    struct px_admin_hooks hooks;
    char unix_path[108];               /* removed at stop */
    struct evhttp_bound_socket *bound; /* the listener, NULL once handed over */
    char token[TOKEN_MAX];
    size_t token_len; /* 0: no token needed (unix socket) */
    struct timespec started;
    /* When the whole set was last replaced (PUT /v1/sandboxes) in this
     * run; replaced_any false: not since the start.  A node of a pair that
     * comes back reports it, so that it takes the address back only once
     * sandboxctl sync has made its set current (deploy/keepalived). */
    struct timespec replaced;
    bool replaced_any;
    struct explain *pending;
} A;

/* ------------------------------------------------------------ replies */

static void reply_json(struct evhttp_request *req, int code, json_t *body)
{
    struct evbuffer *out = evbuffer_new();
    char *text = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);

    if (out == NULL || text == NULL)
        abort();
    evbuffer_add(out, text, strlen(text));
    evbuffer_add(out, "\n", 1);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, NULL, out);
    evbuffer_free(out);
    free(text);
    json_decref(body);
}

static void reply_error(struct evhttp_request *req, int code, const char *msg)
{
    reply_json(req, code, json_pack("{s:s}", "error", msg));
}

static void reply_405(struct evhttp_request *req, const char *allow)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
    reply_error(req, 405, "method not allowed here");
}

/* {"error": all lines, "errors": [line, ...]} for multi-line failures. */
static void reply_errors(struct evhttp_request *req, int code, const char *err)
{
    json_t *lines = json_array();
    const char *p = err;

    while (*p != '\0') {
        size_t n = strcspn(p, "\n");
        json_array_append_new(lines, json_stringn(p, n));
        p += n + (p[n] == '\n');
    }
    reply_json(req, code, json_pack("{s:s,s:o}", "error", err, "errors", lines));
}

/* ------------------------------------------------------------ requests */

/* The body as JSON, or NULL after answering 400/413. */
static json_t *read_body(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    json_error_t je;
    char msg[300];

    if (len > BODY_MAX) {
        reply_error(req, 413, "body over 1 MiB");
        return NULL;
    }
    json_t *j = json_loadb((const char *)evbuffer_pullup(in, -1), len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL) {
        snprintf(msg, sizeof(msg), "body:%d:%d: expected JSON: %s", je.line, je.column, je.text);
        reply_error(req, 400, msg);
    }
    return j;
}

/* Constant time in the length of the configured token. */
static bool bearer_ok(struct evhttp_request *req)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    unsigned diff = 0;

    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strnlen(h, TOKEN_MAX);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    diff |= (unsigned)(n ^ A.token_len);
    for (size_t i = 0; i < A.token_len; i++)
        diff |= (unsigned char)A.token[i] ^ (unsigned char)(i < n ? h[i] : 0);
    return diff == 0;
}

static void on_sandboxes(struct evhttp_request *req)
{
    char err[16384];

    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET: reply_json(req, 200, px_world_sandboxes_json()); return;
    case EVHTTP_REQ_PUT: break;
    default: reply_405(req, "GET, PUT"); return;
    }
    json_t *arr = read_body(req);
    if (arr == NULL)
        return;
    if (px_world_replace_sandboxes(arr, err, sizeof(err)) == -1) {
        px_log_warnx("admin: PUT /v1/sandboxes refused: %s", err);
        reply_errors(req, px_world_error_status(), err);
    } else {
        px_log_info("admin: the set of sandboxes replaced: %zu bindings", json_array_size(arr));
        clock_gettime(CLOCK_MONOTONIC, &A.replaced);
        A.replaced_any = true;
        reply_json(req, 200, px_world_sandboxes_json());
    }
    json_decref(arr);
}

static json_t *one_sandbox(const char *id)
{
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, id);
    json_t *j = sb ? json_deep_copy(sb->json) : NULL;

    px_world_put(w);
    return j;
}

static void on_sandbox(struct evhttp_request *req, const char *id)
{
    char err[16384], msg[160];
    json_t *j;

    snprintf(msg, sizeof(msg), "no sandbox '%.64s'", id);
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        j = one_sandbox(id);
        if (j != NULL)
            reply_json(req, 200, j);
        else
            reply_error(req, 404, msg);
        return;
    case EVHTTP_REQ_DELETE:
        switch (px_world_delete_sandbox(id, err, sizeof(err))) {
        case PX_WORLD_DELETED:
            px_log_info("admin: sandbox %s deleted", id);
            evhttp_send_reply(req, 204, NULL, NULL);
            return;
        case PX_WORLD_NO_SUCH: reply_error(req, 404, msg); return;
        case PX_WORLD_FAILED: reply_errors(req, px_world_error_status(), err); return;
        }
    case EVHTTP_REQ_PUT: break;
    default: reply_405(req, "GET, PUT, DELETE"); return;
    }
    j = read_body(req);
    if (j == NULL)
        return;
    if (px_world_put_sandbox(id, j, err, sizeof(err)) == -1) {
        px_log_warnx("admin: PUT sandbox %.64s refused: %s", id, err);
        reply_errors(req, px_world_error_status(), err);
    } else {
        json_t *now = one_sandbox(id);
        px_log_info("admin: sandbox %s bound", id);
        reply_json(req, 200, now ? now : json_object());
    }
    json_decref(j);
}

/* GET /v1/sandboxes/{id}/denials: the sandbox's most recent denials,
 * newest first (denials.h). */
static void on_denials(struct evhttp_request *req, const char *id)
{
    char msg[160];
    json_t *j;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    j = one_sandbox(id);
    if (j == NULL) {
        snprintf(msg, sizeof(msg), "no sandbox '%.64s'", id);
        reply_error(req, 404, msg);
        return;
    }
    json_decref(j);
    reply_json(req, 200, json_pack("{s:s, s:o}", "sandbox", id, "denials", px_denials_json(id)));
}

/* A denial's number, decimal, into *seq; whether it is one. */
static bool parse_seq(const char *s, uint64_t *seq)
{
    char *end;

    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    *seq = strtoull(s, &end, 10);
    return *end == '\0' && errno == 0;
}

/* The query of GET /v1/denials: follow=1 into *follow; since=SEQ, or the
 * Last-Event-ID header an EventSource sends when it reconnects, into
 * *since (*has_since).  0, or -1 after answering 400. */
static int denials_query(struct evhttp_request *req, bool *follow, bool *has_since, uint64_t *since)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    const char *last = evhttp_find_header(evhttp_request_get_input_headers(req), "Last-Event-ID");
    const char *f, *s;
    struct evkeyvalq kv;
    int rc = 0;

    TAILQ_INIT(&kv);
    if (q != NULL && evhttp_parse_query_str(q, &kv) == -1) {
        reply_error(req, 400, "expected ?follow=1 and/or ?since=SEQ");
        evhttp_clear_headers(&kv);
        return -1;
    }
    f = evhttp_find_header(&kv, "follow");
    s = evhttp_find_header(&kv, "since");
    *follow = f != NULL && strcmp(f, "1") == 0;
    if (s == NULL)
        s = last;
    *has_since = s != NULL;
    if (f != NULL && strcmp(f, "1") != 0 && strcmp(f, "0") != 0) {
        reply_error(req, 400, "follow: expected 1 or 0");
        rc = -1;
    } else if (s != NULL && !parse_seq(s, since)) {
        reply_error(req, 400, "since (or Last-Event-ID): expected a denial's seq, a number");
        rc = -1;
    }
    evhttp_clear_headers(&kv);
    return rc;
}

/* GET /v1/denials: the most recent denials of every sandbox, newest
 * first, with their numbers; ?since=SEQ only those after it; ?follow=1
 * the live stream of them (feed.h). */
static void on_all_denials(struct evhttp_request *req)
{
    bool follow, has_since;
    uint64_t since = 0, last;
    char msg[160];

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    if (denials_query(req, &follow, &has_since, &since) == -1)
        return;
    if (!follow) {
        json_t *arr = px_denials_recent_json(since, &last);
        reply_json(req, 200, json_pack("{s:o, s:I}", "denials", arr, "seq", (json_int_t)last));
    } else if (px_feed_follow(req, has_since, since) == -1) {
        snprintf(msg, sizeof(msg), "at most %d streams of /v1/denials at a time; try again later",
                 PX_FEED_MAX);
        reply_error(req, 503, msg);
    }
}

/* GET /v1/traffic: each sandbox's connections and bytes since egressd
 * started (metrics.h). */
static void on_traffic(struct evhttp_request *req)
{
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    reply_json(req, 200, json_pack("{s:o}", "sandboxes", px_metrics_traffic_json()));
}

static void on_reload(struct evhttp_request *req)
{
    char err[65536];

    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        reply_405(req, "POST");
        return;
    }
    if (px_world_reload(err, sizeof(err)) == -1) {
        px_log_warnx("admin: reload failed, the policy in force stays: %s", err);
        reply_errors(req, 422, err);
        return;
    }
    struct px_world *w = px_world_get();
    px_log_info("admin: reloaded (generation %llu)", (unsigned long long)w->generation);
    reply_json(req, 200, json_pack("{s:I}", "generation", (json_int_t)w->generation));
    px_world_put(w);
}

/* POST /v1/upgrade: start the binary on disk as a successor (the hook,
 * egressd.c); answered by px_admin_upgrade_reply() once it serves or
 * failed. */
static void on_upgrade(struct evhttp_request *req)
{
    char err[1024];

    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        reply_405(req, "POST");
        return;
    }
    if (A.hooks.upgrade == NULL) {
        reply_error(req, 501, "this egressd cannot upgrade in place");
        return;
    }
    if (A.hooks.upgrade(A.hooks.arg, req, err, sizeof(err)) == -1) {
        px_log_warnx("admin: upgrade: %s", err);
        reply_error(req, 409, err);
    }
}

void px_admin_upgrade_reply(struct evhttp_request *req, long pid, const char *version,
                            const char *error)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);

    if (error != NULL)
        reply_json(req, 500, json_pack("{s:s,s:I}", "error", error, "pid", (json_int_t)pid));
    else
        reply_json(req, 200,
                   json_pack("{s:I,s:s,s:I}", "pid", (json_int_t)pid, "version",
                             version ? version : "", "previous_pid", (json_int_t)getpid()));
    /* Written now, as far as the socket takes it: a predecessor with no
     * connection left stops at once, and its loop would not run again to
     * send it. */
    if (evcon != NULL) {
        struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
        evbuffer_write(bufferevent_get_output(bev), bufferevent_getfd(bev));
    }
}

static void on_status(struct evhttp_request *req)
{
    struct px_world *w;
    struct timespec now;
    json_t *presets = json_array(), *st;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    w = px_world_get();
    for (size_t i = 0; policy_preset_name(w->policy, i) != NULL; i++)
        json_array_append_new(presets, json_string(policy_preset_name(w->policy, i)));
    clock_gettime(CLOCK_MONOTONIC, &now);
    st = json_pack("{s:s,s:I,s:I,s:I,s:s,s:o}", "version", EGRESSD_VERSION, "uptime_s",
                   (json_int_t)(now.tv_sec - A.started.tv_sec), "generation",
                   (json_int_t)w->generation, "sandboxes", (json_int_t)w->n_sandboxes,
                   "default_policy", policy_binding_preset(w->default_pb), "presets", presets);
    px_world_put(w);
    json_object_set_new(st, "sandboxes_replaced_s",
                        A.replaced_any ? json_integer((json_int_t)(now.tv_sec - A.replaced.tv_sec))
                                       : json_null());
    if (A.hooks.status != NULL) {
        json_t *more = A.hooks.status(A.hooks.arg);
        if (json_is_object(more))
            json_object_update(st, more);
        json_decref(more);
    }
    reply_json(req, 200, st);
}

/* ------------------------------------------------------------ explain */

static json_t *verdict_json(const struct policy_verdict *v, json_t *o)
{
    char rule[300];

    json_object_set_new(o, "decision", json_string(policy_decision_str(v->decision)));
    json_object_set_new(o, "reason", json_string(px_reason_str((enum px_reason)v->reason)));
    if (v->rule.file != NULL) {
        /* The preset's file name, as the access log and the deny answers say it. */
        const char *slash = strrchr(v->rule.file, '/');
        snprintf(rule, sizeof(rule), "%s:%u", slash ? slash + 1 : v->rule.file, v->rule.line);
        json_object_set_new(o, "rule", json_string(rule));
    } else {
        json_object_set_new(o, "rule", json_null());
    }
    if (v->country[0] != '\0')
        json_object_set_new(o, "country", json_string(v->country));
    if (v->asn != 0)
        json_object_set_new(o, "asn", json_integer(v->asn));
    return o;
}

/* The request an explain asked about: its method, its path as judged
 * (null when no `paths` glob can admit it) and why not. */
static json_t *asked_json(const struct px_asked *a)
{
    json_t *o = json_pack("{s:s%}", "method", a->rq.method, a->rq.method_len);

    json_object_set_new(o, "path",
                        a->rq.path ? json_stringn(a->rq.path, a->rq.path_len) : json_null());
    if (a->path_result != HTTP_PATH_OK)
        json_object_set_new(o, "path_error", json_string(http_path_result_str(a->path_result)));
    else if (a->reshaped)
        json_object_set_new(o, "path_error", json_string("not in normal form"));
    return o;
}

/* The answer: the name phase's verdict, then (a == NULL: none were
 * checked; dns: why not) each address's, and the verdict of the one
 * decision (policy_decide_addrs) on them all, as the judge takes it. */
static void explain_answer(struct explain *x, const struct px_dns_answer *a, enum px_dns_result dns)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:i}", "sandbox", x->sandbox, "preset",
                          policy_binding_preset(x->pb), "host", x->host.text, "port", x->port);
    json_t *addrs = json_array();
    struct policy_verdict v, each[PX_DNS_MAX_ADDRS];
    const uint8_t(*addr)[16] = a != NULL ? (const uint8_t(*)[16])a->addr : NULL;
    size_t n = a != NULL ? a->n : 0;
    char t[64];

    policy_decide_addrs(x->pb, &x->name, x->port, addr, n, x->now, &v, each);
    for (size_t i = 0; i < n && x->name.decision != POLICY_DENY; i++) {
        json_t *e = json_pack("{s:s}", "addr", policy_addr_text(a->addr[i], t, sizeof(t)));
        json_array_append_new(addrs, verdict_json(&each[i], e));
    }
    verdict_json(&v, o);
    if (x->name.decision != POLICY_DENY && a == NULL) {
        json_object_set_new(o, "decision", json_string("deny"));
        json_object_set_new(o, "reason", json_string(px_reason_str(PX_R_DNS_FAIL)));
        json_object_set_new(o, "rule", json_null());
        json_object_set_new(o, "dns", json_string(dns == PX_DNS_NXDOMAIN ? "nxdomain" : "fail"));
    }
    json_object_set_new(o, "name", verdict_json(&x->name, json_object()));
    if (x->asked != NULL)
        json_object_set_new(o, "request", asked_json(x->asked));
    if (x->name.requests)
        json_object_set_new(o, "requests", json_true());
    if (x->name.raw)
        json_object_set_new(o, "raw", json_true());
    if (x->name.private_ok)
        json_object_set_new(o, "private_ok", json_true());
    if (x->name.inject)
        json_object_set_new(o, "inject", json_true());
    json_object_set_new(o, "addresses", addrs);
    reply_json(x->req, 200, o);
}

static void explain_free(struct explain *x)
{
    if (x->pprev != NULL) {
        *x->pprev = x->next;
        if (x->next != NULL)
            x->next->pprev = x->pprev;
    }
    px_world_put(x->w);
    free(x->asked);
    free(x);
}

static void on_explain_dns(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct explain *x = arg;

    x->q = NULL;
    explain_answer(x, res == PX_DNS_OK ? a : NULL, res);
    explain_free(x);
}

/* The bytes of a method (an RFC 9110 token). */
#define METHOD_BYTES "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~"

/* An explain's request (?method=M&path=P, GET and "/" for the one not
 * given) into x->asked; 0 (none asked is fine), or -1 after answering. */
static int explain_request(struct evhttp_request *req, struct evkeyvalq *kv, struct explain *x)
{
    const char *m = evhttp_find_header(kv, "method"), *path = evhttp_find_header(kv, "path");

    if (m == NULL && path == NULL)
        return 0;
    m = m ? m : "GET";
    path = path ? path : "/";
    if (*m == '\0' || strlen(m) >= sizeof(x->method) || strspn(m, METHOD_BYTES) != strlen(m)) {
        reply_error(req, 400, "method: expected an HTTP method token (GET)");
        return -1;
    }
    snprintf(x->method, sizeof(x->method), "%s", m);
    x->asked = malloc(sizeof(*x->asked));
    if (x->asked == NULL)
        abort();
    px_asked_make(x->asked, x->method, strlen(x->method), path, strlen(path));
    return 0;
}

/* The checks of an explain's query; 0, or -1 after answering. */
static int explain_parse(struct evhttp_request *req, struct explain *x, const char **host)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq kv;
    const char *sb, *port, *h = NULL;
    char msg[200];
    int rc = -1;

    TAILQ_INIT(&kv);
    if (q == NULL || evhttp_parse_query_str(q, &kv) == -1 ||
        (h = evhttp_find_header(&kv, "host")) == NULL || *h == '\0') {
        reply_error(req, 400, "expected ?host=H[&port=P][&sandbox=ID]");
        goto out;
    }
    *host = strdup(h);
    if (*host == NULL)
        abort();
    port = evhttp_find_header(&kv, "port");
    x->port = 443;
    if (port != NULL) {
        char *end;
        long p = strtol(port, &end, 10);
        if (*port == '\0' || *end != '\0' || p < 1 || p > 65535) {
            reply_error(req, 400, "port: expected 1..65535");
            goto out;
        }
        x->port = (uint16_t)p;
    }
    if (explain_request(req, &kv, x) == -1)
        goto out;
    sb = evhttp_find_header(&kv, "sandbox");
    x->sandbox = "default";
    x->pb = x->w->default_pb;
    if (sb != NULL && strcmp(sb, "default") != 0) {
        const struct px_sandbox *s = px_world_by_id(x->w, sb);
        if (s == NULL) {
            snprintf(msg, sizeof(msg), "no sandbox '%.64s'", sb);
            reply_error(req, 404, msg);
            goto out;
        }
        x->sandbox = s->id;
        x->pb = s->pb;
        x->expired = s->expires != 0 && x->now >= s->expires;
    }
    rc = 0;
out:
    evhttp_clear_headers(&kv);
    return rc;
}

static void on_explain(struct evhttp_request *req)
{
    struct explain *x;
    const char *host = NULL;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    x = calloc(1, sizeof(*x));
    if (x == NULL)
        abort();
    x->req = req;
    x->w = px_world_get();
    x->now = (int64_t)time(NULL);
    if (explain_parse(req, x, &host) == -1) {
        free((char *)host);
        explain_free(x);
        return;
    }
    if (x->pb == NULL || x->expired) {
        /* A binding kept from the state file whose preset is gone, or one
         * past its `expires`: egressd denies its sandbox everything. */
        json_t *o =
            json_pack("{s:s,s:s,s:i,s:s,s:s,s:n,s:s,s:[]}", "sandbox", x->sandbox, "host", host,
                      "port", x->port, "decision", "deny", "reason", "not_allowed", "rule", "error",
                      x->expired ? "the binding has expired"
                                 : "the binding does not load (see the daemon's log)",
                      "addresses");
        reply_json(req, 200, o);
    } else if (policy_host_normalize(host, strlen(host), &x->host) != POLICY_HOST_OK) {
        json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:s,s:n,s:[]}", "sandbox", x->sandbox, "host", host,
                              "port", x->port, "decision", "deny", "reason",
                              px_reason_str(PX_R_BAD_HOST), "rule", "addresses");
        reply_json(req, 200, o);
    } else if (policy_decide_request(x->pb, &x->host, x->port, x->asked ? &x->asked->rq : NULL,
                                     NULL, 0, x->now, &x->name) == POLICY_DENY) {
        explain_answer(x, NULL, PX_DNS_OK);
    } else if (x->host.kind != POLICY_HOST_NAME) {
        struct px_dns_answer lit = {.n = 1};
        memcpy(lit.addr[0], x->host.addr, 16);
        explain_answer(x, &lit, PX_DNS_OK);
    } else if (A.r == NULL) {
        struct px_dns_answer h = {.source = PX_DNS_SRC_HOSTS};
        h.n = px_hosts_lookup(x->w->hosts, x->host.text, h.addr, PX_DNS_MAX_ADDRS);
        explain_answer(x, h.n ? &h : NULL, PX_DNS_FAIL);
    } else {
        free((char *)host);
        /* On the list before asking: the answer may come at once, and
         * on_explain_dns() unlinks and frees x. */
        x->next = A.pending;
        if (A.pending != NULL)
            A.pending->pprev = &x->next;
        A.pending = x;
        x->pprev = &A.pending;
        struct px_dns_req *q = px_resolve(A.r, x->w->hosts, x->host.text, on_explain_dns, x);
        if (q != NULL)
            x->q = q;
        return;
    }
    free((char *)host);
    explain_free(x);
}

#define GUEST_FILE_MAX      (16 * 1024)                /* a login's guest file */
#define GUEST_LOGIN_LIFE_MS (365LL * 24 * 3600 * 1000) /* its expiry, a year ahead */

/* The guest's copy of login `name` of store: the CLI's credentials file
 * in its own shape with the placeholders ph, rph and an expiry
 * GUEST_LOGIN_LIFE_MS ahead (the real login's scope, account id and
 * id_token claims, never a token); a JSON string, or null when it cannot
 * be made. */
static json_t *guest_login_file(const struct px_secrets *store, const char *name, const char *ph,
                                const char *rph)
{
    static char text[GUEST_FILE_MAX];
    const char *p;
    size_t len, mapped, out_len;
    struct oauth_login *l = (struct oauth_login *)px_vault_map(sizeof(*l), &mapped);
    char why[256];
    int64_t now = (int64_t)time(NULL) * 1000;
    json_t *j = json_null();

    if (l != NULL && px_secrets_get(store, name, &p, &len) &&
        oauth_file_parse(p, len, l, why, sizeof(why)) == 0 &&
        oauth_file_placeholder(l, ph, rph, now + GUEST_LOGIN_LIFE_MS, now, text, sizeof(text),
                               &out_len) == 0)
        j = json_stringn(text, out_len);
    px_vault_unmap((char *)l, mapped);
    return j;
}

/* What the guest holds for secret `name` of sandbox sb: its kind
 * ("value", or "login" with its provider, its placeholders for the access
 * and the refresh token, and its credentials file with them). */
static json_t *secret_json(const struct px_secrets *store, const struct px_sandbox *sb,
                           const char *name)
{
    char ph[PX_PLACEHOLDER_MAX], rph[PX_PLACEHOLDER_MAX];
    const char *provider = px_secrets_login_provider(store, name);

    px_placeholder(A.hooks.placeholder_key, sb->id, name, ph, sizeof(ph));
    if (provider == NULL)
        return json_pack("{s:s, s:s}", "kind", "value", "placeholder", ph);
    px_placeholder_refresh(A.hooks.placeholder_key, sb->id, name, rph, sizeof(rph));
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "kind", "login", "provider", provider,
                     "placeholder", ph, "refresh_placeholder", rph, "file",
                     guest_login_file(store, name, ph, rph));
}

/* The credentials object of sandbox sb (new reference): its CA
 * certificate (null without one), a placeholder per secret of its binding
 * ("placeholders"), and per secret its kind and every placeholder
 * ("secrets").  Never a secret's value. */
static json_t *credentials_json(const struct px_secrets *store, const struct px_sandbox *sb)
{
    static char pem[8192];
    char ph[PX_PLACEHOLDER_MAX];
    json_t *phs = json_object(), *each = json_object();

    for (size_t i = 0; i < sb->n_secrets && A.hooks.placeholder_key != NULL; i++) {
        px_placeholder(A.hooks.placeholder_key, sb->id, sb->secrets[i], ph, sizeof(ph));
        json_object_set_new(phs, sb->secrets[i], json_string(ph));
        json_object_set_new(each, sb->secrets[i], secret_json(store, sb, sb->secrets[i]));
    }
    json_t *ca = sb->ca != NULL && ca_authority_pem(sb->ca, pem, sizeof(pem)) > 0 ? json_string(pem)
                                                                                  : json_null();
    return json_pack("{s:s, s:o, s:o, s:o}", "sandbox", sb->id, "ca", ca, "placeholders", phs,
                     "secrets", each);
}

/* GET /v1/sandboxes/{id}/credentials: what the sandbox's guest is given
 * for credential injection (docs/credentials.md). */
static void on_credentials(struct evhttp_request *req, const char *id)
{
    char msg[160];

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_405(req, "GET");
        return;
    }
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, id);
    if (sb == NULL) {
        px_world_put(w);
        snprintf(msg, sizeof(msg), "no sandbox '%.64s'", id);
        reply_error(req, 404, msg);
        return;
    }
    json_t *j = credentials_json(w->secrets, sb);
    px_world_put(w);
    reply_json(req, 200, j);
}

/* ------------------------------------------------------------ routing */

/* Whether path is PREFIX ID SUFFIX with a non-empty ID without '/'; the
 * ID into id. */
static bool sub_path(const char *path, const char *prefix, const char *suffix, char *id,
                     size_t idlen)
{
    size_t n = strlen(path), p = strlen(prefix), s = strlen(suffix);

    if (n <= p + s || strncmp(path, prefix, p) != 0 || strcmp(path + n - s, suffix) != 0 ||
        n - p - s >= idlen || memchr(path + p, '/', n - p - s) != NULL)
        return false;
    memcpy(id, path + p, n - p - s);
    id[n - p - s] = '\0';
    return true;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
    static const char prefix[] = "/v1/sandboxes/";
    char id[128];

    (void)arg;
    if (A.token_len > 0 && !bearer_ok(req)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
                          "Bearer realm=\"egressd\"");
        reply_error(req, 401, "expected Authorization: Bearer with the admin token");
        return;
    }
    if (path == NULL)
        path = "";
    if (strcmp(path, "/v1/sandboxes") == 0)
        on_sandboxes(req);
    else if (strncmp(path, prefix, sizeof(prefix) - 1) == 0 && path[sizeof(prefix) - 1] != '\0' &&
             strchr(path + sizeof(prefix) - 1, '/') == NULL)
        on_sandbox(req, path + sizeof(prefix) - 1);
    else if (sub_path(path, prefix, "/denials", id, sizeof(id)))
        on_denials(req, id);
    else if (strcmp(path, "/v1/denials") == 0)
        on_all_denials(req);
    else if (strcmp(path, "/v1/traffic") == 0)
        on_traffic(req);
    else if (sub_path(path, prefix, "/credentials", id, sizeof(id)))
        on_credentials(req, id);
    else if (strcmp(path, "/v1/reload") == 0)
        on_reload(req);
    else if (strcmp(path, "/v1/explain") == 0)
        on_explain(req);
    else if (strcmp(path, "/v1/status") == 0)
        on_status(req);
    else if (strcmp(path, "/v1/upgrade") == 0)
        on_upgrade(req);
    else
        reply_error(
            req, 404,
            "no such endpoint (see /v1/sandboxes, /v1/sandboxes/{id}/denials, "
            "/v1/sandboxes/{id}/credentials, /v1/denials, /v1/denials?follow=1, /v1/traffic, "
            "/v1/reload, /v1/explain, /v1/status, /v1/upgrade)");
}

/* ------------------------------------------------------------ start */

/* The bearer token: a regular file that only its owner may read. */
static int token_read(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;

    if (fd == -1 || fstat(fd, &st) == -1) {
        snprintf(err, errlen, "%s: admin-token-file: %s", path, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
        snprintf(err, errlen,
                 "%s: admin-token-file: %s (mode %04o); whoever reads it can change every "
                 "sandbox's egress: chmod 600 %s",
                 path, S_ISREG(st.st_mode) ? "group or others may access it" : "not a regular file",
                 (unsigned)(st.st_mode & 07777), path);
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, A.token, sizeof(A.token) - 1);
    close(fd);
    A.token[n > 0 ? n : 0] = '\0';
    A.token_len = strcspn(A.token, "\r\n");
    A.token[A.token_len] = '\0';
    if (n < 0 || A.token_len == 0 || A.token_len == sizeof(A.token) - 1) {
        snprintf(err, errlen, "%s: admin-token-file: %s", path,
                 n < 0              ? strerror(errno)
                 : A.token_len == 0 ? "empty (expected the token on its first line)"
                                    : "a token of at most 254 bytes expected");
        explicit_bzero(A.token, sizeof(A.token));
        A.token_len = 0;
        return -1;
    }
    return 0;
}

/* Is something still serving the socket at `path`? */
static bool unix_alive(const struct sockaddr_un *sun)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool alive = fd != -1 && connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0;

    if (fd != -1)
        close(fd);
    return alive;
}

/* The unix socket, mode 0660; a stale socket file is replaced, anything
 * else at the path (a file, a live egressd) is an error. */
static int unix_listen(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct stat st;
    int fd;

    if (strlen(path) >= sizeof(sun.sun_path)) {
        snprintf(err, errlen, "%s: admin: socket path too long", path);
        return -1;
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "%s: admin: exists and is not a socket; not replacing it", path);
            return -1;
        }
        if (unix_alive(&sun)) {
            snprintf(err, errlen, "%s: admin: another process serves this socket", path);
            return -1;
        }
        unlink(path);
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    /* chmod before listen(): nobody can connect while the mode is wider. */
    if (fd == -1 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 ||
        chmod(path, 0660) == -1 || listen(fd, 64) == -1) {
        snprintf(err, errlen, "%s: admin: %s", path, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    snprintf(A.unix_path, sizeof(A.unix_path), "%s", path);
    return fd;
}

static int bind_listener(const struct px_config *cfg, char *err, size_t errlen)
{
    struct evconnlistener *l;

    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", cfg->admin_unix);
    int handed = cfg->admin_is_tcp
                     ? px_handover_claim(PX_SOCK_ADMIN, (const struct sockaddr *)&cfg->admin_tcp.ss,
                                         cfg->admin_tcp.len)
                     : px_handover_claim(PX_SOCK_ADMIN, (const struct sockaddr *)&sun, sizeof(sun));
    if (handed != -1) { /* a predecessor's (handover.h): its file stays */
        if (!cfg->admin_is_tcp)
            snprintf(A.unix_path, sizeof(A.unix_path), "%s", cfg->admin_unix);
        if (cfg->admin_is_tcp && token_read(cfg->admin_token_file, err, errlen) == -1)
            return -1;
        l = evconnlistener_new(A.base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
                               handed);
    } else if (!cfg->admin_is_tcp) {
        int fd = unix_listen(cfg->admin_unix, err, errlen);
        if (fd == -1)
            return -1;
        l = evconnlistener_new(A.base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                               -1, fd);
        if (l == NULL)
            close(fd);
    } else {
        if (token_read(cfg->admin_token_file, err, errlen) == -1)
            return -1;
        l = evconnlistener_new_bind(
            A.base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
            64, (const struct sockaddr *)&cfg->admin_tcp.ss, (int)cfg->admin_tcp.len);
    }
    if (l == NULL || (A.bound = evhttp_bind_listener(A.http, l)) == NULL) {
        snprintf(err, errlen, "%s: admin: cannot listen: %s",
                 cfg->admin_is_tcp ? cfg->admin_tcp.text : cfg->admin_unix, strerror(errno));
        if (l != NULL)
            evconnlistener_free(l);
        return -1;
    }
    px_handover_note(PX_SOCK_ADMIN, evconnlistener_get_fd(l));
    return 0;
}

json_t *px_admin_replaced_ago(void)
{
    struct timespec now;

    if (!A.replaced_any)
        return json_null();
    clock_gettime(CLOCK_MONOTONIC, &now);
    return json_integer((json_int_t)(now.tv_sec - A.replaced.tv_sec));
}

void px_admin_set_replaced_ago(const json_t *ago)
{
    if (!json_is_integer(ago) || json_integer_value(ago) < 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &A.replaced);
    A.replaced.tv_sec -= (time_t)json_integer_value(ago);
    A.replaced_any = true;
}

void px_admin_unlisten(void)
{
    if (A.http != NULL && A.bound != NULL)
        evhttp_del_accept_socket(A.http, A.bound);
    A.bound = NULL;
    A.unix_path[0] = '\0'; /* the successor's now: not removed at the stop */
}

int px_admin_start(struct event_base *base, const struct px_config *cfg, struct px_resolver *r,
                   const struct px_admin_hooks *hooks, char *err, size_t errlen)
{
    memset(&A, 0, sizeof(A));
    A.base = base;
    A.r = r;
    if (hooks != NULL)
        A.hooks = *hooks;
    clock_gettime(CLOCK_MONOTONIC, &A.started);
    if (!cfg->have_admin)
        return 0;
    A.http = evhttp_new(base);
    if (A.http == NULL)
        abort();
    evhttp_set_max_body_size(A.http, BODY_MAX);
    evhttp_set_max_headers_size(A.http, HEADERS_MAX);
    evhttp_set_timeout(A.http, TIMEOUT_S);
    /* Every method reaches on_request, which answers 405 with Allow. */
    evhttp_set_allowed_methods(A.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
                                           EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
                                           EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
                                           EVHTTP_REQ_PATCH);
    evhttp_set_gencb(A.http, on_request, NULL);
    px_feed_start(base);
    if (bind_listener(cfg, err, errlen) == -1) {
        px_feed_stop();
        evhttp_free(A.http);
        A.http = NULL;
        return -1;
    }
    px_log_info("admin API on %s%s", cfg->admin_is_tcp ? "" : "unix:",
                cfg->admin_is_tcp ? cfg->admin_tcp.text : cfg->admin_unix);
    return 0;
}

void px_admin_stop(void)
{
    while (A.pending != NULL) {
        struct explain *x = A.pending;
        struct evhttp_connection *evcon = evhttp_request_get_connection(x->req);
        px_resolve_cancel(x->q);
        reply_error(x->req, 503, "egressd is stopping");
        /* The loop will not run again to send it: write it now, as far as
         * the socket takes it without blocking. */
        if (evcon != NULL) {
            struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
            evbuffer_write(bufferevent_get_output(bev), bufferevent_getfd(bev));
        }
        explain_free(x);
    }
    px_feed_stop(); /* its streams end before evhttp goes */
    if (A.http != NULL)
        evhttp_free(A.http);
    A.http = NULL;
    if (A.unix_path[0] != '\0')
        unlink(A.unix_path);
    explicit_bzero(A.token, sizeof(A.token));
    memset(&A, 0, sizeof(A));
}
