/*
 * scope.c - scopes: one string of space-separated scope tokens (RFC 6749
 * §3.3) in oauth_login.scope, a JSON list of them in Claude Code's file.
 */
#include <string.h>

#include "oauth_int.h"

enum oauth_member oauth_scopes_join(const json_t *obj, const char *key, char out[OAUTH_SCOPE_MAX])
{
    const json_t *list = json_object_get(obj, key), *v;
    size_t n = 0, i;

    out[0] = '\0';
    if (list == NULL || json_is_null(list))
        return OAUTH_MEMBER_ABSENT;
    if (!json_is_array(list))
        return OAUTH_MEMBER_BAD;
    json_array_foreach(list, i, v)
    {
        size_t len = json_string_length(v), sep = n > 0;
        if (!json_is_string(v) || !oauth_is_token(json_string_value(v), len) ||
            n + sep + len >= OAUTH_SCOPE_MAX) {
            out[0] = '\0';
            return OAUTH_MEMBER_BAD;
        }
        if (sep)
            out[n++] = ' ';
        memcpy(out + n, json_string_value(v), len);
        n += len;
        out[n] = '\0';
    }
    return n > 0 ? OAUTH_MEMBER_OK : OAUTH_MEMBER_ABSENT;
}

json_t *oauth_scopes_split(const char *scope)
{
    json_t *list = json_array();

    for (const char *p = scope; list != NULL && *p != '\0';) {
        size_t len = strcspn(p, " ");
        if (len > 0 && json_array_append_new(list, json_stringn(p, len)) != 0) {
            json_decref(list);
            return NULL;
        }
        p += len + (p[len] == ' ');
    }
    return list;
}
