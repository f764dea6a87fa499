/* api.c - the console's routes: the page and its assets, and the JSON API
 * the page uses.
 *
 *   GET  /, /console.js, /console.css     the page (no session needed)
 *   POST /api/login, /api/logout           signin.c
 *   GET  /api/session                      who is signed in, the CSRF token
 *   GET  /api/sandboxes                    list (an owner: their own), and
 *                                          what each egressd holds for each
 *   POST /api/sandboxes/extend  {name, duration}
 *   POST /api/sandboxes/destroy {name, confirm: name}
 *   GET  /api/access                       pending access requests
 *   POST /api/access/approve {id, duration}, /api/access/deny {id}
 *   POST /api/grant {name, host, duration, why}   a request, approved at once
 *   GET  /api/grant/preview?name=S&host=H[:P]&duration=D   what that grant
 *                                          would change, computed: the allow
 *                                          line, and which of the sandbox's
 *                                          recent denials it would let pass
 *   GET  /api/denials?after=N              the last denials (oldest first)
 *   GET  /api/denials/stream?after=N       the same, live (streams.c)
 *   GET  /api/sources                      each egressd's stream
 *   GET  /api/log?name=S&host=&decision=&reason=   the sandbox's recent
 *                                          access-log lines (accesslog.h)
 *   GET  /api/traffic                      each sandbox's last hour
 *                                          (traffic.h) and the hosts
 *                                          denied to it most
 *   GET  /api/explain?name=S&host=H&port=P  would S reach H:P? every
 *                                          egressd's own answer (its one
 *                                          decision function, /v1/explain)
 *
 * Every /api/ route but login needs a session; every POST also needs the
 * session's CSRF token in X-CSRF-Token and a same-origin request.  An
 * owner acting on a sandbox that is not theirs gets 404, as for one that
 * does not exist.  Every POST is written to the audit log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "accesslog.h"
#include "bindings.h"
#include "egress.h"
#include "grant.h"
#include "internal.h"
#include "pve.h"
#include "sbx.h"
#include "tally.h"
#include "vm.h"

#define RECENT_MAX 200 /* denials GET /api/denials gives */
#define HOST_MAX   253 /* a DNS name's presentation length */
#define TOP_HOSTS  5   /* the hosts denied most, per sandbox */

/* Take sandboxctl's state for r: one operation at a time, scoped to r's
 * owner (an admin: every sandbox).  Until scope_leave. */
static struct sbx *scope_enter(struct sbx_request *r)
{
    pthread_mutex_lock(&r->con->op_lock);
    sbx_scope_owner(r->con->s, r->session.admin ? NULL : r->session.owner);
    return r->con->s;
}

static void scope_leave(struct sbx_request *r)
{
    sbx_scope_owner(r->con->s, NULL);
    pthread_mutex_unlock(&r->con->op_lock);
}

int sbx_api_op(struct sbx_request *r, sbx_op_fn op, json_t *args, json_t **out, char *err,
               size_t errlen)
{
    int rc = op(scope_enter(r), args, out, err, errlen);

    scope_leave(r);
    return rc;
}

/* The status for an operation's error: 404 for what does not exist (or
 * is another owner's), 400 for the rest. */
static unsigned op_status(const char *err)
{
    return strncmp(err, "no sandbox called", 17) == 0 || strncmp(err, "no access request", 17) == 0
               ? 404
               : 400;
}

/* Run op on args (taken) and answer with its result; POSTs are audited
 * as action on target. */
static enum MHD_Result answer_op(struct sbx_request *r, sbx_op_fn op, json_t *args,
                                 const char *action, const char *target)
{
    char err[1024];
    json_t *out = NULL;
    int rc = sbx_api_op(r, op, args, &out, err, sizeof err);

    json_decref(args);
    if (action)
        sbx_audit(r->con->audit, r->session.user, r->from, action, target, rc == 0,
                  rc == 0 ? NULL : err);
    return rc == 0 ? sbx_web_json(r, 200, out) : sbx_web_error(r, op_status(err), err);
}

/* The JSON object of r's body, or NULL. */
static json_t *body_object(struct sbx_request *r)
{
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);

    if (json_is_object(j))
        return j;
    json_decref(j);
    return NULL;
}

/* A string member of j, or NULL. */
static const char *str(json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

static enum MHD_Result extend(struct sbx_request *r, json_t *b)
{
    const char *name = str(b, "name"), *duration = str(b, "duration");

    if (!name || !duration)
        return sbx_web_error(r, 400, "expected {\"name\", \"duration\"}");
    return answer_op(r, sbx_op_extend, json_pack("{s:s, s:s}", "name", name, "duration", duration),
                     "sandbox.extend", name);
}

static enum MHD_Result destroy(struct sbx_request *r, json_t *b)
{
    const char *name = str(b, "name"), *confirm = str(b, "confirm");

    if (!name || !confirm || strcmp(name, confirm) != 0)
        return sbx_web_error(r, 400,
                             "expected {\"name\", \"confirm\"} with the sandbox's name "
                             "typed again");
    return answer_op(r, sbx_op_destroy, json_pack("{s:s}", "name", name), "sandbox.destroy", name);
}

/* GET /api/sandboxes: the list op's answer, each sandbox with what every
 * egressd holds for it (bindings.h): an admin sees at once a node that
 * missed a change. */
static enum MHD_Result sandboxes(struct sbx_request *r)
{
    const struct sbx_config *c = &r->con->s->cfg;
    char err[1024];
    json_t *out = NULL, *args = json_object();
    int rc = sbx_api_op(r, sbx_op_list, args, &out, err, sizeof err);

    json_decref(args);
    if (rc)
        return sbx_web_error(r, op_status(err), err);
    for (int i = 0; i < c->negress; i++) {
        json_t *bindings = NULL;
        err[0] = '\0';
        sbx_egress_get(c, c->egress[i], "/v1/sandboxes", &bindings, err, sizeof err);
        sbx_bindings_note(json_object_get(out, "sandboxes"), c->egress[i], bindings, err);
        json_decref(bindings);
    }
    return sbx_web_json(r, 200, out);
}

/* An owner approves as the owner (only what access-owner-approves
 * covers); an admin as admin. */
static enum MHD_Result approve(struct sbx_request *r, json_t *b)
{
    const char *id = str(b, "id"), *duration = str(b, "duration");
    json_t *args;

    if (!id)
        return sbx_web_error(r, 400, "expected {\"id\", \"duration\"}");
    args = json_pack("{s:s, s:b}", "id", id, "as_owner", !r->session.admin);
    if (duration)
        json_object_set_new(args, "duration", json_string(duration));
    return answer_op(r, sbx_op_access_approve, args, "access.approve", id);
}

static enum MHD_Result deny(struct sbx_request *r, json_t *b)
{
    const char *id = str(b, "id");

    if (!id)
        return sbx_web_error(r, 400, "expected {\"id\"}");
    return answer_op(r, sbx_op_access_deny,
                     json_pack("{s:s, s:b}", "id", id, "as_owner", !r->session.admin),
                     "access.deny", id);
}

/* A denial made a grant: the access request, then its approval. */
static enum MHD_Result grant(struct sbx_request *r, json_t *b)
{
    const char *name = str(b, "name"), *host = str(b, "host"), *duration = str(b, "duration");
    const char *why = str(b, "why");
    char err[1024], target[300];
    json_t *req = NULL, *args;

    if (!name || !host || !duration)
        return sbx_web_error(r, 400, "expected {\"name\", \"host\", \"duration\"}");
    snprintf(target, sizeof target, "%.64s %.200s", name, host);
    args = json_pack("{s:s, s:s, s:s, s:s}", "name", name, "host", host, "duration", duration,
                     "why", why && *why ? why : "granted from the console after a denial");
    int rc = sbx_api_op(r, sbx_op_access_request, args, &req, err, sizeof err);
    json_decref(args);
    if (rc) {
        sbx_audit(r->con->audit, r->session.user, r->from, "access.grant", target, false, err);
        return sbx_web_error(r, op_status(err), err);
    }
    if (strcmp(str(req, "status") ? str(req, "status") : "", "approved") == 0) {
        sbx_audit(r->con->audit, r->session.user, r->from, "access.grant", target, true,
                  "granted at once (access-auto)");
        return sbx_web_json(r, 200, req);
    }
    args = json_pack("{s:s, s:s, s:b}", "id", str(req, "id"), "duration", duration, "as_owner",
                     !r->session.admin);
    json_decref(req);
    return answer_op(r, sbx_op_access_approve, args, "access.grant", target);
}

/* A number from the query (after=N), 0 when absent. */
static uint64_t after_arg(struct sbx_request *r)
{
    const char *v = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "after");
    const char *last = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Last-Event-ID");
    const char *s = last ? last : v;

    return s ? strtoull(s, NULL, 10) : 0;
}

static enum MHD_Result recent_denials(struct sbx_request *r)
{
    struct sbx_denials_view view = {r->session.admin ? NULL : r->session.owner};
    uint64_t seq = sbx_denials_seq(r->con->denials);
    uint64_t after = after_arg(r);
    json_t *out = json_array();

    if (after == 0 && seq > SBX_DENIALS_RING)
        after = seq - SBX_DENIALS_RING;
    sbx_denials_read(r->con->denials, &view, &after, SBX_DENIALS_RING, out, NULL);
    while (json_array_size(out) > RECENT_MAX)
        json_array_remove(out, 0);
    return sbx_web_json(r, 200, json_pack("{s:o, s:I}", "denials", out, "seq", (json_int_t)after));
}

/* A query argument of r, or NULL. */
static const char *query(struct sbx_request *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

/* The VMID of the sandbox called name that r may see, or -1 with err
 * (as for an operation on it: another owner's does not exist).  One
 * look at the pool, not the whole list. */
static int vmid_of(struct sbx_request *r, const char *name, char *err, size_t errlen)
{
    struct sbx_vm vm;
    int rc = sbx_vm_find(scope_enter(r), name, &vm, err, errlen);

    scope_leave(r);
    return rc == 0 ? vm.vmid : -1;
}

/* GET /api/explain: each egressd's own answer to whether the sandbox
 * would reach host:port, as its /v1/explain gives it (the decision
 * function egressd judges with; nothing is decided here). */
static enum MHD_Result explain(struct sbx_request *r)
{
    const char *name = query(r, "name"), *host = query(r, "host"), *port = query(r, "port");
    char err[1024], *end = NULL;
    long p = port ? strtol(port, &end, 10) : 443;

    if (!name || !host || !*host || strlen(host) > HOST_MAX ||
        (port && (*end || p < 1 || p > 65535)))
        return sbx_web_error(r, 400, "expected ?name=SANDBOX&host=HOST&port=1..65535");
    for (const char *c = host; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f)
            return sbx_web_error(r, 400, "host: no spaces or control characters");
    int vmid = vmid_of(r, name, err, sizeof err);
    if (vmid < 0)
        return sbx_web_error(r, op_status(err), err);
    const struct sbx_config *c = &r->con->s->cfg;
    char *eh = sbx_pve_escape(host), path[512];
    snprintf(path, sizeof path, "/v1/explain?sandbox=%d&host=%s&port=%ld", vmid, eh, p);
    free(eh);
    json_t *answers = json_array();
    for (int i = 0; i < c->negress; i++) {
        json_t *one = NULL;
        if (sbx_egress_get(c, c->egress[i], path, &one, err, sizeof err) == 0)
            json_object_set_new(one, "egressd", json_string(c->egress[i]));
        else
            one = json_pack("{s:s, s:s}", "egressd", c->egress[i], "error", err);
        json_array_append_new(answers, one);
    }
    return sbx_web_json(r, 200,
                        json_pack("{s:s, s:s, s:i, s:o}", "name", name, "host", host, "port",
                                  (int)p, "egressd", answers));
}

/* GET /api/grant/preview: what POST /api/grant with the same name, host
 * and duration would change, before anyone applies it. */
static enum MHD_Result grant_preview(struct sbx_request *r)
{
    const char *name = query(r, "name"), *host = query(r, "host"), *duration = query(r, "duration");
    const struct sbx_config *c = &r->con->s->cfg;
    char err[1024], entry[300], until[32];
    long seconds;
    json_t *denials = NULL, *pass;
    struct sbx_grant g = {0};

    if (!name || !host || !duration)
        return sbx_web_error(r, 400, "expected ?name=SANDBOX&host=HOST[:PORTS]&duration=D");
    snprintf(entry, sizeof entry, "%s", host);
    if (strlen(host) >= sizeof entry || !sbx_access_normalize(entry))
        return sbx_web_error(r, 400, "host: not HOST, *.DOMAIN or .DOMAIN with optional :PORTS");
    if (sbx_access_seconds(r->con->s, duration, &seconds, err, sizeof err))
        return sbx_web_error(r, 400, err);
    int vmid = vmid_of(r, name, err, sizeof err);
    if (vmid < 0)
        return sbx_web_error(r, op_status(err), err);
    if (sbx_egress_denials(c, vmid, &denials, err, sizeof err))
        return sbx_web_error(r, 502, err);
    /* what egressd's decision says of each, with the grant (grant.h) */
    snprintf(g.allow, sizeof g.allow, "%s", entry);
    pass = sbx_grant_would_pass(&g, denials, err, sizeof err);
    if (pass == NULL) {
        json_decref(denials);
        return sbx_web_error(r, 400, err);
    }
    sbx_time_format(time(NULL) + seconds, until, sizeof until);
    char line[400];
    snprintf(line, sizeof line, "%s until %s", entry, until);
    bool may = r->session.admin || sbx_access_owner_may(r->con->s, entry);
    json_t *out = json_pack("{s:s, s:s, s:s, s:I, s:o, s:b}", "name", name, "rule", line, "until",
                            until, "recent", (json_int_t)json_array_size(denials), "would_pass",
                            pass, "you_may_approve", may);
    json_decref(denials);
    return sbx_web_json(r, 200, out);
}

/* GET /api/log: the recent access-log lines of a sandbox r may see, newest
 * first, filtered. */
static enum MHD_Result access_log(struct sbx_request *r)
{
    const char *path = r->con->s->cfg.console_access_log, *name = query(r, "name");
    char err[1024], id[16];
    json_t *lines;
    size_t scanned;

    if (!path)
        return sbx_web_error(r, 404,
                             "console-access-log is not set: the console has no access "
                             "log to read");
    if (!name)
        return sbx_web_error(r, 400, "expected ?name=SANDBOX");
    int vmid = vmid_of(r, name, err, sizeof err);
    if (vmid < 0)
        return sbx_web_error(r, op_status(err), err);
    snprintf(id, sizeof id, "%d", vmid);
    struct sbx_accesslog_filter f = {id, r->session.admin ? NULL : r->session.owner,
                                     query(r, "host"), query(r, "decision"), query(r, "reason")};
    if (sbx_accesslog_query(path, &f, SBX_ACCESSLOG_MAX, &lines, &scanned, err, sizeof err))
        return sbx_web_error(r, 502, err);
    return sbx_web_json(
        r, 200,
        json_pack("{s:s, s:o, s:I}", "name", name, "lines", lines, "scanned", (json_int_t)scanned));
}

/* GET /api/traffic: what each sandbox r may see did in the last hour,
 * and the hosts it was denied most among the denials kept. */
static enum MHD_Result traffic(struct sbx_request *r)
{
    const char *owner = r->session.admin ? NULL : r->session.owner;
    struct sbx_denials_view view = {owner};
    json_t *t = sbx_traffic_json(r->con->traffic, owner);

    json_object_set_new(t, "top_denied", sbx_denials_top(r->con->denials, &view, TOP_HOSTS));
    /* The hosts allowed most: egressd keeps no count of them, its access
     * log on this host does (console-access-log). */
    json_t *allowed = NULL;
    char err[512];
    if (r->con->s->cfg.console_access_log &&
        sbx_accesslog_top(r->con->s->cfg.console_access_log, owner, "allow", TOP_HOSTS, &allowed,
                          err, sizeof err) == 0)
        json_object_set_new(t, "top_allowed", allowed);
    else
        json_object_set_new(t, "top_allowed", json_null());
    return sbx_web_json(r, 200, t);
}

/* The POST routes, once the session and its CSRF token are checked. */
static enum MHD_Result post(struct sbx_request *r)
{
    static const struct {
        const char *path;
        enum MHD_Result (*fn)(struct sbx_request *, json_t *);
    } routes[] = {
        {"/api/sandboxes/extend", extend},
        {"/api/sandboxes/destroy", destroy},
        {"/api/access/approve", approve},
        {"/api/access/deny", deny},
        {"/api/grant", grant},
    };
    const char *token = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-CSRF-Token");

    if (!token || !sbx_session_token_eq(token, r->session.csrf) || !sbx_web_same_origin(r)) {
        sbx_audit(r->con->audit, r->session.user, r->from, "refused", r->url, false,
                  "no CSRF token, or not from the console's page");
        return sbx_web_error(r, 403, "this action must come from the console's own page");
    }
    if (strcmp(r->url, "/api/logout") == 0)
        return sbx_signin_logout(r);
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strcmp(r->url, routes[i].path) != 0)
            continue;
        json_t *b = body_object(r);
        if (!b)
            return sbx_web_error(r, 400, "expected a JSON object");
        enum MHD_Result rc = routes[i].fn(r, b);
        json_decref(b);
        return rc;
    }
    return sbx_web_error(r, 404, "no such action");
}

static enum MHD_Result get(struct sbx_request *r)
{
    if (strcmp(r->url, "/api/session") == 0)
        return sbx_signin_session(r);
    if (strcmp(r->url, "/api/sandboxes") == 0)
        return sandboxes(r);
    if (strcmp(r->url, "/api/access") == 0)
        return answer_op(r, sbx_op_access_list, json_object(), NULL, NULL);
    if (strcmp(r->url, "/api/denials") == 0)
        return recent_denials(r);
    if (strcmp(r->url, "/api/denials/stream") == 0)
        return sbx_streams_open(r, after_arg(r));
    if (strcmp(r->url, "/api/explain") == 0)
        return explain(r);
    if (strcmp(r->url, "/api/traffic") == 0)
        return traffic(r);
    if (strcmp(r->url, "/api/log") == 0)
        return access_log(r);
    if (strcmp(r->url, "/api/grant/preview") == 0)
        return grant_preview(r);
    if (strcmp(r->url, "/api/sources") == 0)
        return sbx_web_json(r, 200,
                            json_pack("{s:o}", "egressd", sbx_denials_sources(r->con->denials)));
    return sbx_web_error(r, 404, "no such endpoint");
}

enum MHD_Result sbx_api_route(struct sbx_request *r)
{
    bool is_get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    bool is_post = strcmp(r->method, "POST") == 0;

    if (strncmp(r->url, "/api/", 5) != 0)
        return is_get ? sbx_web_asset(r, r->url) : sbx_web_error(r, 405, "expected GET");
    if (is_post && strcmp(r->url, "/api/login") == 0)
        return sbx_signin_login(r);
    if (!r->have_session)
        return sbx_web_error(r, 401, "sign in first");
    if (is_get)
        return get(r);
    if (is_post)
        return post(r);
    return sbx_web_error(r, 405, "expected GET or POST");
}
