/*
 * json.c - JSON through jansson, within the caps of oauth.h: one object
 * loaded, members read as tokens, text or instants, members set in place,
 * and the object written back into the caller's buffer.
 */
#include <string.h>

#include "oauth_int.h"

#define INDENT 2 /* spaces per level of a file written back (as the CLIs write them) */

enum {
    VISIBLE_FIRST = 0x21, /* '!' */
    VISIBLE_LAST = 0x7e,  /* '~' */
    SPACE = 0x20,
};

bool oauth_is_token(const char *s, size_t len)
{
    if (len == 0 || len > OAUTH_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < VISIBLE_FIRST || (unsigned char)s[i] > VISIBLE_LAST)
            return false;
    return true;
}

bool oauth_is_text(const char *s, size_t len, size_t cap)
{
    if (len >= cap)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < SPACE || (unsigned char)s[i] > VISIBLE_LAST)
            return false;
    return true;
}

json_t *oauth_json_load(const char *text, size_t len)
{
    json_error_t e;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);

    explicit_bzero(&e, sizeof e);
    if (j != NULL && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

int oauth_json_write(const json_t *j, bool pretty, char *out, size_t cap, size_t *out_len)
{
    size_t flags = pretty ? JSON_INDENT(INDENT) : JSON_COMPACT;
    size_t n = json_dumpb(j, out, cap, flags);
    size_t tail = pretty ? 2 : 1; /* the newline, the NUL */

    if (n == 0 || n > cap || cap - n < tail) {
        if (cap > 0)
            explicit_bzero(out, cap);
        return -1;
    }
    if (pretty)
        out[n++] = '\n';
    out[n] = '\0';
    *out_len = n;
    return 0;
}

/* The string member key of obj: ABSENT (missing, null, ""), BAD (not a
 * string), or OK with *s, *len. */
static enum oauth_member member_string(const json_t *obj, const char *key, const char **s,
                                       size_t *len)
{
    const json_t *v = json_object_get(obj, key);

    if (v == NULL || json_is_null(v))
        return OAUTH_MEMBER_ABSENT;
    if (!json_is_string(v))
        return OAUTH_MEMBER_BAD;
    *s = json_string_value(v);
    *len = json_string_length(v);
    return *len == 0 ? OAUTH_MEMBER_ABSENT : OAUTH_MEMBER_OK;
}

enum oauth_member oauth_json_token(const json_t *obj, const char *key, char *buf, size_t *len)
{
    const char *s;
    size_t n;
    enum oauth_member m = member_string(obj, key, &s, &n);

    buf[0] = '\0';
    *len = 0;
    if (m != OAUTH_MEMBER_OK)
        return m;
    if (!oauth_is_token(s, n))
        return OAUTH_MEMBER_BAD;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *len = n;
    return OAUTH_MEMBER_OK;
}

enum oauth_member oauth_json_text(const json_t *obj, const char *key, char *buf, size_t cap)
{
    const char *s;
    size_t n;
    enum oauth_member m = member_string(obj, key, &s, &n);

    buf[0] = '\0';
    if (m != OAUTH_MEMBER_OK)
        return m;
    if (!oauth_is_text(s, n, cap))
        return OAUTH_MEMBER_BAD;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return OAUTH_MEMBER_OK;
}

enum oauth_member oauth_json_ms(const json_t *obj, const char *key, int64_t *ms)
{
    const json_t *v = json_object_get(obj, key);

    *ms = 0;
    if (v == NULL || json_is_null(v))
        return OAUTH_MEMBER_ABSENT;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || i > OAUTH_MS_MAX)
            return OAUTH_MEMBER_BAD;
        *ms = i;
        return OAUTH_MEMBER_OK;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0 && d <= (double)OAUTH_MS_MAX))
            return OAUTH_MEMBER_BAD;
        *ms = (int64_t)d;
        return OAUTH_MEMBER_OK;
    }
    return OAUTH_MEMBER_BAD;
}

int oauth_json_put(json_t *obj, const char *key, const char *s, size_t len)
{
    json_t *v = json_stringn(s, len);

    return v == NULL ? -1 : json_object_set_new(obj, key, v);
}

int oauth_json_put_int(json_t *obj, const char *key, int64_t v)
{
    json_t *n = json_integer(v);

    return n == NULL ? -1 : json_object_set_new(obj, key, n);
}

int oauth_json_put_null(json_t *obj, const char *key)
{
    return json_object_set_new(obj, key, json_null());
}
