/*
 * binding.c - a sandbox binding as the admin API and the state file give
 * it (docs/design.md, "Sandbox bindings"): the JSON object checked field by
 * field, every error naming the sandbox, the field and what was found; and
 * its policy binding on a snapshot.  No I/O.
 */
#include "binding.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"

#define MAX_ALLOW_LINES 256
#define MAX_STR         127 /* name, owner, token */

/* A JSON value as error messages show it: a string quoted (cut, control
 * bytes as '?'), anything else by its type. */
static const char *show(const json_t *v, char *buf, size_t size)
{
    static const char *const types[] = {"an object", "an array", "a string", "an integer",
                                        "a number",  "true",     "false",    "null"};
    if (!json_is_string(v))
        return types[json_typeof(v)];
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), i, o = 0;
    buf[o++] = '\'';
    for (i = 0; i < n && o + 5 < size && i < 64; i++)
        buf[o++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (i < n)
        o += (size_t)snprintf(buf + o, size - o, "...");
    snprintf(buf + o, size - o, "'");
    return buf;
}

static const char *const fields[] = {"id",    "name",    "owner", "addresses", "policy",
                                     "allow", "secrets", "token", "expires",   NULL};

static bool id_ok(const char *s, size_t n)
{
    return n >= 1 && n <= 63 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* No control characters (jansson has already checked the UTF-8). */
static bool printable(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

static bool token_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    return n >= 1 && n <= MAX_STR;
}

/* An optional printable string field into dst (cap MAX_STR). */
static int parse_text(const json_t *v, const char *field, const char *who, char *dst, size_t size,
                      char *err, size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= size ||
        !printable(json_string_value(v), json_string_length(v))) {
        px_err_add(err, errlen,
                   "sandbox %s: %s: expected a string of at most %zu characters, no control "
                   "characters, found %s",
                   who, field, size - 1, show(v, b, sizeof(b)));
        return -1;
    }
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_addresses(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                           size_t errlen)
{
    char b[96], t[INET6_ADDRSTRLEN];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > PX_SANDBOX_MAX_ADDRS) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        px_err_add(err, errlen,
                   "sandbox %s: addresses: expected an array of at most %d IP addresses, found %s",
                   who, PX_SANDBOX_MAX_ADDRS, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *a = json_array_get(v, i);
        if (!json_is_string(a) ||
            !policy_addr_parse(json_string_value(a), json_string_length(a), sb->addrs[i])) {
            px_err_add(err, errlen, "sandbox %s: addresses[%zu]: expected an IP address, found %s",
                       who, i, show(a, b, sizeof(b)));
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (memcmp(sb->addrs[k], sb->addrs[i], 16) == 0) {
                px_err_add(err, errlen, "sandbox %s: addresses[%zu]: %s is listed twice", who, i,
                           policy_addr_text(sb->addrs[i], t, sizeof(t)));
                return -1;
            }
        }
        sb->n_addrs = i + 1;
    }
    return 0;
}

static int parse_allow(const json_t *v, const char *who, char *err, size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > MAX_ALLOW_LINES) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        px_err_add(err, errlen,
                   "sandbox %s: allow: expected an array of at most %d strings (policy lines), "
                   "found %s",
                   who, MAX_ALLOW_LINES, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *l = json_array_get(v, i);
        if (!json_is_string(l)) {
            px_err_add(err, errlen,
                       "sandbox %s: allow[%zu] is not a string (expected a policy line), found %s",
                       who, i, show(l, b, sizeof(b)));
            return -1;
        }
        if (!printable(json_string_value(l), json_string_length(l))) {
            px_err_add(err, errlen,
                       "sandbox %s: allow[%zu]: expected one policy line, found control characters",
                       who, i);
            return -1;
        }
    }
    return 0;
}

/* "secrets": unique secret names.  Whether the store has them is the
 * world's to check (secrets_check), not the shape's. */
static int parse_secrets(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                         size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > PX_SANDBOX_MAX_SECRETS) {
        if (json_is_array(v))
            snprintf(b, sizeof(b), "%zu", json_array_size(v));
        px_err_add(err, errlen,
                   "sandbox %s: secrets: expected an array of at most %d secret names, found %s",
                   who, PX_SANDBOX_MAX_SECRETS, json_is_array(v) ? b : show(v, b, sizeof(b)));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *n = json_array_get(v, i);
        if (!json_is_string(n) || !px_secret_name_ok(json_string_value(n), json_string_length(n))) {
            px_err_add(
                err, errlen,
                "sandbox %s: secrets[%zu]: expected a secret's name ([a-z0-9][a-z0-9_-]{0,62}), "
                "found %s",
                who, i, show(n, b, sizeof(b)));
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(sb->secrets[k], json_string_value(n)) == 0) {
                px_err_add(err, errlen, "sandbox %s: secrets[%zu]: '%s' is listed twice", who, i,
                           sb->secrets[k]);
                return -1;
            }
        }
        memcpy(sb->secrets[i], json_string_value(n), json_string_length(n) + 1);
        sb->n_secrets = i + 1;
    }
    return 0;
}

static int parse_policy(const json_t *v, const char *who, struct px_sandbox *sb, char *err,
                        size_t errlen)
{
    char b[96];
    if (v == NULL || json_is_null(v)) {
        px_err_add(err, errlen, "sandbox %s: policy: required (the name of a preset)", who);
        return -1;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) >= sizeof(sb->policy) ||
        !printable(json_string_value(v), json_string_length(v))) {
        px_err_add(err, errlen, "sandbox %s: policy: expected the name of a preset, found %s", who,
                   show(v, b, sizeof(b)));
        return -1;
    }
    memcpy(sb->policy, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_token_expires(const json_t *tok, const json_t *exp, const char *who,
                               struct px_sandbox *sb, char *err, size_t errlen)
{
    char b[96];
    if (tok != NULL && !json_is_null(tok)) {
        if (!json_is_string(tok) || !token_ok(json_string_value(tok), json_string_length(tok))) {
            px_err_add(err, errlen,
                       "sandbox %s: token: expected 1..%d printable ASCII characters, no spaces, "
                       "found %s",
                       who, MAX_STR,
                       json_is_string(tok) ? "another string" : show(tok, b, sizeof(b)));
            return -1;
        }
        memcpy(sb->token, json_string_value(tok), json_string_length(tok) + 1);
    }
    if (exp != NULL && !json_is_null(exp)) {
        if (!json_is_string(exp) ||
            !policy_time_parse(json_string_value(exp), json_string_length(exp), &sb->expires)) {
            px_err_add(err, errlen,
                       "sandbox %s: expires: expected an RFC 3339 time such as "
                       "2026-11-30T09:00:00Z, found %s",
                       who, show(exp, b, sizeof(b)));
            return -1;
        }
    }
    return 0;
}

/* The id: the path's (which "id" must equal) or the body's. */
static int parse_id(const json_t *v, const char *path_id, struct px_sandbox *sb, char *err,
                    size_t errlen)
{
    char b[96];
    const char *who = path_id ? path_id : "?";

    if (path_id != NULL && !id_ok(path_id, strlen(path_id))) {
        px_err_add(err, errlen,
                   "sandbox id: expected 1..63 of A-Z a-z 0-9 '.' '_' '-', found '%.64s'", path_id);
        return -1;
    }
    if (v == NULL && path_id == NULL) {
        px_err_add(err, errlen, "sandbox ?: id: required");
        return -1;
    }
    if (v != NULL && (!json_is_string(v) || !id_ok(json_string_value(v), json_string_length(v)))) {
        px_err_add(err, errlen,
                   "sandbox %s: id: expected 1..63 of A-Z a-z 0-9 '.' '_' '-', found %s", who,
                   show(v, b, sizeof(b)));
        return -1;
    }
    if (v != NULL && path_id != NULL && strcmp(json_string_value(v), path_id) != 0) {
        px_err_add(err, errlen, "sandbox %s: id: '%s' differs from the id in the path", who,
                   json_string_value(v));
        return -1;
    }
    snprintf(sb->id, sizeof(sb->id), "%s", path_id ? path_id : json_string_value(v));
    if (strcmp(sb->id, "default") == 0) {
        px_err_add(
            err, errlen,
            "sandbox default: id: 'default' is reserved (it names sources without a binding)");
        return -1;
    }
    return 0;
}

static int check_fields(const json_t *obj, const char *who, char *err, size_t errlen)
{
    const char *key;
    const json_t *v;
    int rc = 0;

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i;
        for (i = 0; fields[i] != NULL && strcmp(fields[i], key) != 0; i++)
            ;
        if (fields[i] != NULL)
            continue;
        const char *near = policy_nearest_word(key, strlen(key), fields);
        px_err_add(err, errlen, "sandbox %s: unknown field '%.64s'%s%s%s", who, key,
                   near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        rc = -1;
    }
    return rc;
}

int px_sandbox_parse(const json_t *obj, const char *id, struct px_sandbox *sb, char *err,
                     size_t errlen)
{
    char b[96];

    memset(sb, 0, sizeof(*sb));
    err[0] = '\0';
    if (!json_is_object(obj)) {
        px_err_add(err, errlen, "sandbox %s: expected a JSON object (a binding), found %s",
                   id ? id : "?", obj ? show(obj, b, sizeof(b)) : "nothing");
        return -1;
    }
    if (parse_id(json_object_get(obj, "id"), id, sb, err, errlen) == -1 ||
        check_fields(obj, sb->id, err, errlen) == -1 ||
        parse_text(json_object_get(obj, "name"), "name", sb->id, sb->name, sizeof(sb->name), err,
                   errlen) == -1 ||
        parse_text(json_object_get(obj, "owner"), "owner", sb->id, sb->owner, sizeof(sb->owner),
                   err, errlen) == -1 ||
        parse_addresses(json_object_get(obj, "addresses"), sb->id, sb, err, errlen) == -1 ||
        parse_policy(json_object_get(obj, "policy"), sb->id, sb, err, errlen) == -1 ||
        parse_allow(json_object_get(obj, "allow"), sb->id, err, errlen) == -1 ||
        parse_secrets(json_object_get(obj, "secrets"), sb->id, sb, err, errlen) == -1 ||
        parse_token_expires(json_object_get(obj, "token"), json_object_get(obj, "expires"), sb->id,
                            sb, err, errlen) == -1) {
        explicit_bzero(sb->token, sizeof(sb->token));
        return -1;
    }
    sb->json = json_deep_copy(obj);
    if (sb->json == NULL)
        abort();
    json_object_del(sb->json, "token");
    json_object_set_new(sb->json, "id", json_string(sb->id));
    return 0;
}

bool px_sandbox_expired(const struct px_sandbox *sb, int64_t now)
{
    return sb->expires != 0 && now >= sb->expires;
}

bool px_sandbox_has_secret(const struct px_sandbox *sb, const char *name)
{
    for (size_t i = 0; sb != NULL && i < sb->n_secrets; i++)
        if (strcmp(sb->secrets[i], name) == 0)
            return true;
    return false;
}

struct policy_binding *px_sandbox_bind(struct policy *p, const struct px_sandbox *sb,
                                       struct policy_diag *diag)
{
    const json_t *allow = json_object_get(sb->json, "allow");
    const char *lines[MAX_ALLOW_LINES];
    size_t n = json_is_array(allow) ? json_array_size(allow) : 0;
    char origin[80];

    if (policy_preset_rules(p, sb->policy) < 0) {
        char names[512] = "";
        size_t used = 0;
        for (size_t i = 0; policy_preset_name(p, i) != NULL && used < sizeof(names); i++)
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
                                     policy_preset_name(p, i));
        policy_diag_add(diag,
                        "sandbox %s: policy: expected the name of a preset, found '%s': no such "
                        "preset (presets: %s)",
                        sb->id, sb->policy, names);
        return NULL;
    }
    for (size_t i = 0; i < n && i < MAX_ALLOW_LINES; i++)
        lines[i] = json_string_value(json_array_get(allow, i));
    snprintf(origin, sizeof(origin), "sandbox %s", sb->id);
    return policy_binding_new(p, sb->policy, lines, n, origin, diag);
}
