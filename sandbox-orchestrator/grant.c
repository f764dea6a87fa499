/* grant.c - see grant.h. */
#include "grant.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "http.h"
#include "policy.h"

/* The preset a grant is compiled into, alone, to be checked and judged. */
#define PRESET "grant"
/* A normalized path, as long as egressd judges one. */
#define PATH_MAX_LEN 2048

static const char *const methods_known[] = POLICY_METHODS;

/* The index in methods_known of word w[0..n) in any case, or -1. */
static int method_index(const char *w, size_t n)
{
    for (int i = 0; methods_known[i] != NULL; i++)
        if (strlen(methods_known[i]) == n && strncasecmp(methods_known[i], w, n) == 0)
            return i;
    return -1;
}

/* methods rewritten in canonical form, or -1 with err. */
static int methods_normalize(char methods[SBX_GRANT_METHODS_MAX], char *err, size_t errlen)
{
    unsigned seen = 0;
    size_t used = 0;
    char out[SBX_GRANT_METHODS_MAX];

    for (const char *w = methods; *methods != '\0';) {
        size_t n = strcspn(w, ",");
        int i = method_index(w, n);
        if (i < 0) {
            snprintf(err, errlen,
                     "methods: '%.*s' is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, "
                     "TRACE",
                     (int)(n < 40 ? n : 40), w);
            return -1;
        }
        seen |= 1u << i;
        if (w[n] == '\0')
            break;
        w += n + 1;
    }
    out[0] = '\0';
    for (int i = 0; methods_known[i] != NULL; i++)
        if (seen & (1u << i))
            used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", used ? "," : "",
                                     methods_known[i]);
    memcpy(methods, out, used + 1);
    return 0;
}

/* paths checked glob by glob, or -1 with err. */
static int paths_check(const char *paths, char *err, size_t errlen)
{
    int count = 0;

    for (const char *w = paths; *paths != '\0';) {
        size_t n = strcspn(w, ","), at;
        const char *why = policy_glob_check(w, n, &at);
        if (why != NULL) {
            snprintf(err, errlen, "paths: '%.*s' at %zu: %s", (int)(n < 80 ? n : 80), w, at + 1,
                     why);
            return -1;
        }
        if (++count > SBX_GRANT_PATHS) {
            snprintf(err, errlen, "paths: at most %d globs", SBX_GRANT_PATHS);
            return -1;
        }
        if (w[n] == '\0')
            break;
        w += n + 1;
    }
    return 0;
}

int sbx_grant_scope_normalize(char methods[SBX_GRANT_METHODS_MAX], char paths[SBX_GRANT_PATHS_MAX],
                              char *err, size_t errlen)
{
    return methods_normalize(methods, err, errlen) || paths_check(paths, err, errlen) ? -1 : 0;
}

int sbx_grant_line(const struct sbx_grant *g, bool with_until, char *buf, size_t len)
{
    char until[32] = "";

    if (with_until)
        sbx_time_format(g->until, until, sizeof until);
    int n =
        snprintf(buf, len, "%s%s%s%s%s%s%s", g->allow, g->methods[0] ? " methods " : "", g->methods,
                 g->paths[0] ? " paths " : "", g->paths, with_until ? " until " : "", until);
    return n < 0 || (size_t)n >= len ? -1 : n;
}

/* g's line compiled alone as the one line of a binding of the empty
 * preset PRESET, or NULL with the policy library's first error in err.
 * *p holds the snapshot. */
static struct policy_binding *compile(const struct sbx_grant *g, struct policy **p, char *err,
                                      size_t errlen)
{
    char line[SBX_ALLOW_MAX + SBX_GRANT_METHODS_MAX + SBX_GRANT_PATHS_MAX + 32];
    struct policy_diag diag = {0};
    struct policy_builder *b = policy_builder_new();
    struct policy_binding *pb = NULL;
    int n = sbx_grant_line(g, false, line, sizeof line);

    if (n < 0) {
        policy_builder_finish(b, &diag);
        policy_diag_free(&diag);
        snprintf(err, errlen, "the grant's policy line is longer than %zu bytes", sizeof line);
        return NULL;
    }
    /* an empty preset, and the line as a sandbox's own line (a binding's
     * extras): how egressd loads a binding's allow list */
    const char *extra[] = {line};
    policy_builder_add_preset(b, PRESET, "grant", "", 0);
    *p = policy_builder_finish(b, &diag);
    if (*p != NULL)
        pb = policy_binding_new(*p, PRESET, extra, 1, "grant", &diag);
    if (pb == NULL) {
        snprintf(err, errlen, "%s", diag.n ? diag.lines[0] : "the grant does not load");
        policy_unref(*p);
        *p = NULL;
    }
    policy_diag_free(&diag);
    return pb;
}

int sbx_grant_check(const struct sbx_grant *g, char *err, size_t errlen)
{
    struct policy *p = NULL;
    struct policy_binding *pb = compile(g, &p, err, errlen);

    policy_binding_free(pb);
    policy_unref(p);
    return pb != NULL ? 0 : -1;
}

bool sbx_grant_lifts_reason(const char *reason)
{
    return reason != NULL &&
           (strcmp(reason, "not_allowed") == 0 || strcmp(reason, "method_not_allowed") == 0 ||
            strcmp(reason, "path_not_allowed") == 0);
}

/* The normalized path of denial d into buf (size bytes), its length; -1
 * when d has none or it does not normalize. */
static long denial_path(json_t *d, char *buf, size_t size)
{
    const char *path = json_string_value(json_object_get(d, "path"));
    size_t n;

    if (path == NULL || http_path_normalize(path, strlen(path), buf, size, &n) != HTTP_PATH_OK)
        return -1;
    return (long)n;
}

bool sbx_grant_narrowest(json_t *d, struct sbx_grant *g)
{
    const char *host = json_string_value(json_object_get(d, "host"));
    const char *method = json_string_value(json_object_get(d, "method"));
    json_int_t port = json_integer_value(json_object_get(d, "port"));
    char path[PATH_MAX_LEN];
    long pl = denial_path(d, path, sizeof path);
    size_t gl;
    int m = method ? method_index(method, strlen(method)) : -1;

    memset(g, 0, sizeof *g);
    if (!sbx_grant_lifts_reason(json_string_value(json_object_get(d, "reason"))) || host == NULL ||
        port <= 0 || port > 65535 || strlen(host) > 253)
        return false;
    snprintf(g->allow, sizeof g->allow, "%s:%d", host, (int)port);
    if (!sbx_access_normalize(g->allow))
        return false;
    /* egressd read the request: its method (as sent: a lower-case one is
     * another method) and the narrowest glob of its path */
    if (m < 0 || strcmp(method, methods_known[m]) != 0 || pl < 0 ||
        !policy_glob_narrowest(path, (size_t)pl, g->paths, sizeof g->paths, &gl))
        g->paths[0] = '\0';
    else
        snprintf(g->methods, sizeof g->methods, "%s", methods_known[m]);
    return true;
}

/* How policy_decide_request judges denial d under pb now: true when it
 * would pass (*judged: its requests are read and judged one by one). */
static bool passes(const struct policy_binding *pb, json_t *d, bool *judged)
{
    const char *host = json_string_value(json_object_get(d, "host"));
    const char *method = json_string_value(json_object_get(d, "method"));
    json_int_t port = json_integer_value(json_object_get(d, "port"));
    char path[PATH_MAX_LEN];
    long pl = denial_path(d, path, sizeof path);
    struct policy_host h;
    struct policy_verdict v;
    /* a request egressd read: its method and path; else (a tunnel) none */
    struct policy_request req = {method, method ? strlen(method) : 0, pl >= 0 ? path : NULL,
                                 pl >= 0 ? (size_t)pl : 0};
    bool read = method != NULL && json_is_string(json_object_get(d, "path"));

    *judged = false;
    if (!sbx_grant_lifts_reason(json_string_value(json_object_get(d, "reason"))) || host == NULL ||
        port <= 0 || port > 65535 ||
        policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK)
        return false;
    if (policy_decide_request(pb, &h, (uint16_t)port, read ? &req : NULL, NULL, 0,
                              (int64_t)time(NULL), &v) != POLICY_ALLOW)
        return false;
    *judged = !read && v.requests;
    return true;
}

json_t *sbx_grant_would_pass(const struct sbx_grant *g, json_t *denials, char *err, size_t errlen)
{
    struct policy *p = NULL;
    struct policy_binding *pb = compile(g, &p, err, errlen);
    json_t *out, *d;
    size_t i;

    if (pb == NULL)
        return NULL;
    out = json_array();
    json_array_foreach(denials, i, d)
    {
        bool judged;
        if (!json_is_object(d) || !passes(pb, d, &judged))
            continue;
        json_t *c = json_copy(d);
        if (judged)
            json_object_set_new(c, "requests_judged", json_true());
        json_array_append_new(out, c);
    }
    policy_binding_free(pb);
    policy_unref(p);
    return out;
}
