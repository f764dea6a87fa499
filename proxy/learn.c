/*
 * learn.c - `egressctl learn` (learn.h).
 *
 * Per owner, per destination (host, or host:port), what the would_deny
 * lines asked: how many, which methods, which path prefixes, and whether
 * any was a tunnel egressd did not read (then the line allows the host
 * whole: request rules on it would need interception).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "learn.h"
#include "policy.h"

/* Most path globs a learned line lists; more and it lists none. */
#define PATHS_MAX 16

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of object o, sorted (calloc'd; *n their number). */
static const char **sorted_keys(json_t *o, size_t *n)
{
    const char **keys = calloc(json_object_size(o) + 1, sizeof(*keys)), *k;
    json_t *v;

    if (keys == NULL)
        abort();
    *n = 0;
    json_object_foreach(o, k, v) keys[(*n)++] = k;
    qsort(keys, *n, sizeof(*keys), cmp_str);
    return keys;
}

/* The object under key of o, made when missing. */
static json_t *child(json_t *o, const char *key)
{
    json_t *c = json_object_get(o, key);
    if (c == NULL) {
        c = json_object();
        json_object_set_new(o, key, c);
    }
    return c;
}

/* The glob a learned line lists for path p (not normalized yet):
 * policy_glob_narrowest's, into g.  False when the path does not
 * normalize or the glob would not load (then the line lists no paths). */
static bool path_glob(const char *p, char *g, size_t size)
{
    char norm[1024];
    size_t n, gl;

    return http_path_normalize(p, strlen(p), norm, sizeof(norm), &n) == HTTP_PATH_OK &&
           policy_glob_narrowest(norm, n, g, size, &gl);
}

/* One would_deny line l that an allow line can lift, under key (the
 * destination) of owner's object. */
static void note_liftable(json_t *owner, const char *key, json_t *l)
{
    json_t *d = child(owner, key);
    const char *mode = json_string_value(json_object_get(l, "mode"));
    const char *method = json_string_value(json_object_get(l, "method"));
    const char *path = json_string_value(json_object_get(l, "path"));
    bool read = mode != NULL && (strcmp(mode, "http") == 0 || strcmp(mode, "plain") == 0 ||
                                 strcmp(mode, "intercept") == 0);
    char g[1024];

    json_object_set_new(d, "n", json_integer(json_integer_value(json_object_get(d, "n")) + 1));
    if (!read || method == NULL || path == NULL || !path_glob(path, g, sizeof(g))) {
        json_object_set_new(d, "whole", json_true());
        return;
    }
    json_object_set_new(child(d, "methods"), method, json_true());
    json_object_set_new(child(d, "paths"), g, json_true());
}

/* A would_deny line no allow line can lift: counted as a comment. */
static void note_other(json_t *owner, const char *key, const char *reason)
{
    char why[480];
    snprintf(why, sizeof(why), "%s (%s)", key, reason);
    json_t *c = json_object_get(owner, why);
    json_object_set_new(owner, why, json_integer(c ? json_integer_value(c) + 1 : 1));
}

/* "A,B,C" of the sorted keys of o into buf; false when o has more than max. */
static bool joined(json_t *o, size_t max, char *buf, size_t size)
{
    size_t n, used = 0;
    const char **keys = sorted_keys(o, &n);

    buf[0] = '\0';
    for (size_t i = 0; i < n && n <= max; i++)
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s", i ? "," : "",
                                 keys[i]);
    free(keys);
    return n <= max && used < size;
}

/* The allow line of destination key d. */
static void print_line(FILE *out, const char *key, json_t *d)
{
    char methods[200], paths[PATHS_MAX * 300], rule[sizeof(methods) + sizeof(paths) + 300];
    json_int_t n = json_integer_value(json_object_get(d, "n"));

    snprintf(rule, sizeof(rule), "%s", key);
    if (!json_is_true(json_object_get(d, "whole")) &&
        joined(json_object_get(d, "methods"), 16, methods, sizeof(methods))) {
        size_t o = strlen(rule);
        o += (size_t)snprintf(rule + o, sizeof(rule) - o, " methods %s", methods);
        if (joined(json_object_get(d, "paths"), PATHS_MAX, paths, sizeof(paths)))
            snprintf(rule + o, sizeof(rule) - o, " paths %s", paths);
    }
    fprintf(out, "%-40s # %lld time%s\n", rule, (long long)n, n == 1 ? "" : "s");
}

/* The comments of o (key: count). */
static void print_others(FILE *out, json_t *o)
{
    size_t n;
    const char **keys = sorted_keys(o, &n);

    for (size_t i = 0; i < n; i++) {
        json_int_t c = json_integer_value(json_object_get(o, keys[i]));
        fprintf(out, "#   %-40s # %lld time%s\n", keys[i], (long long)c, c == 1 ? "" : "s");
    }
    free(keys);
}

/* Whether reason r is one an allow line lifts. */
static bool liftable(const char *r)
{
    return strcmp(r, "not_allowed") == 0 || strcmp(r, "method_not_allowed") == 0 ||
           strcmp(r, "path_not_allowed") == 0;
}

int px_learn(FILE *f, const char *only_owner, FILE *out, FILE *err)
{
    json_t *lines = json_object(), *other = json_object();
    char buf[65536], key[400];
    size_t n_lines = 0, n_bad = 0;

    while (fgets(buf, sizeof(buf), f) != NULL) {
        json_t *l = json_loads(buf, 0, NULL);
        const char *dec = json_string_value(json_object_get(l, "decision"));
        const char *reason = json_string_value(json_object_get(l, "reason"));
        const char *host = json_string_value(json_object_get(l, "host"));
        const char *owner = json_string_value(json_object_get(l, "owner"));
        json_int_t port = json_integer_value(json_object_get(l, "port"));
        struct policy_host h;

        n_lines++;
        n_bad += l == NULL;
        if (l == NULL || dec == NULL || strcmp(dec, "would_deny") != 0 || host == NULL ||
            reason == NULL || (only_owner && (!owner || strcmp(owner, only_owner) != 0)) ||
            policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK) {
            json_decref(l);
            continue;
        }
        owner = owner ? owner : "(no owner: default-policy)";
        if (port == 443 || port == 80 || port == 0)
            snprintf(key, sizeof(key), "%s", h.text);
        else
            snprintf(key, sizeof(key), "%s:%lld", h.text, (long long)port);
        if (liftable(reason))
            note_liftable(child(lines, owner), key, l);
        else
            note_other(child(other, owner), key, reason);
        json_decref(l);
    }
    if (n_bad > 0)
        fprintf(err, "egressctl learn: %zu of %zu lines are not JSON (skipped)\n", n_bad, n_lines);
    json_t *owners = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(lines, k, v) json_object_set_new(owners, k, json_true());
    json_object_foreach(other, k, v) json_object_set_new(owners, k, json_true());
    size_t n;
    const char **keys = sorted_keys(owners, &n);
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object_get(lines, keys[i]), *x = json_object_get(other, keys[i]);
        fprintf(out, "# owner %s\n", keys[i]);
        size_t nd;
        const char **dests = o ? sorted_keys(o, &nd) : NULL;
        for (size_t j = 0; dests != NULL && j < nd; j++)
            print_line(out, dests[j], json_object_get(o, dests[j]));
        free(dests);
        if (x != NULL) {
            fprintf(out, "# would be denied whatever the allow lines say:\n");
            print_others(out, x);
        }
    }
    if (n == 0)
        fprintf(out, "# no would_deny lines%s\n", only_owner ? " for this owner" : "");
    free(keys);
    json_decref(owners);
    json_decref(lines);
    json_decref(other);
    return 0;
}
