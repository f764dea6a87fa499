/*
 * grant.c - the sandbox's side of a refresh: the token request its CLI
 * sends (which egressd answers itself, never forwarding it), and that
 * answer, in the provider's shape, with placeholders only.
 *
 * Claude Code sends JSON (application/json) {"grant_type":"refresh_token",
 * "refresh_token","client_id","scope"[,"expires_in"]}; Codex JSON too;
 * gemini-cli (google-auth-library) a form.  Anything ambiguous (a key
 * twice, a bad %-escape) is MALFORMED, so that egressd and an origin can
 * never read two different tokens from one body.
 */
#include <string.h>
#include <strings.h>

#include "oauth_int.h"

#define MEDIA_JSON     "application/json"
#define MEDIA_FORM     "application/x-www-form-urlencoded"
#define GRANT_TYPE     "grant_type"
#define REFRESH_TOKEN  "refresh_token"
#define BEARER         "Bearer"
#define FORM_PAIRS_MAX 32 /* pairs of a form body; more is MALFORMED */

enum body_kind { BODY_JSON, BODY_FORM, BODY_OTHER };

/* Whether the media type of content type ct (before any ';', blanks around
 * it ignored) is media, ignoring case. */
static bool media_is(const char *ct, const char *media)
{
    size_t start = strspn(ct, " \t"), end = start + strcspn(ct + start, ";");

    while (end > start && (ct[end - 1] == ' ' || ct[end - 1] == '\t'))
        end--;
    return end - start == strlen(media) && strncasecmp(ct + start, media, end - start) == 0;
}

/* How to read the body: by its content type, or by its first byte when
 * there is none. */
static enum body_kind kind_of(const char *ct, const char *body, size_t len)
{
    if (ct == NULL)
        return oauth_file_is_json(body, len) ? BODY_JSON : BODY_FORM;
    if (media_is(ct, MEDIA_JSON))
        return BODY_JSON;
    if (media_is(ct, MEDIA_FORM))
        return BODY_FORM;
    return BODY_OTHER;
}

/* Whether tok[0..len) is a refresh token that fits cap with its NUL. */
static bool tok_fits(const char *tok, size_t len, size_t cap)
{
    return len > 0 && len < cap && memchr(tok, '\0', len) == NULL;
}

/* The grant of a JSON body. */
static enum oauth_grant json_grant(const char *body, size_t len, char *tok, size_t cap,
                                   size_t *tok_len)
{
    json_t *o = oauth_json_load(body, len);
    const json_t *gt = json_object_get(o, GRANT_TYPE), *rt = json_object_get(o, REFRESH_TOKEN);
    enum oauth_grant g = OAUTH_GRANT_MALFORMED;

    if (!json_is_string(gt) || json_string_length(gt) == 0)
        g = OAUTH_GRANT_MALFORMED;
    else if (strcmp(json_string_value(gt), REFRESH_TOKEN) != 0 ||
             json_string_length(gt) != strlen(REFRESH_TOKEN))
        g = OAUTH_GRANT_OTHER;
    else if (json_is_string(rt) && tok_fits(json_string_value(rt), json_string_length(rt), cap)) {
        *tok_len = json_string_length(rt);
        memcpy(tok, json_string_value(rt), *tok_len);
        tok[*tok_len] = '\0';
        g = OAUTH_GRANT_REFRESH;
    }
    json_decref(o);
    return g;
}

/* The pairs of a form body into pairs (FORM_PAIRS_MAX); their count, or -1
 * when there are too many, one has a bad escape, or a name comes twice. */
static int form_pairs(const char *body, size_t len, struct oauth_form_pair *pairs)
{
    const char *at = body, *end = body + len;
    int n = 0;
    struct oauth_form_pair p;

    while (oauth_form_next(&at, end, &p)) {
        if (n == FORM_PAIRS_MAX || !oauth_form_valid(p.name, p.name_len) ||
            !oauth_form_valid(p.value, p.value_len))
            return -1;
        for (int i = 0; i < n; i++)
            if (oauth_form_equal(pairs[i].name, pairs[i].name_len, p.name, p.name_len))
                return -1;
        pairs[n++] = p;
    }
    return n;
}

/* The pair named name (not encoded: plain characters only) among pairs[0..n),
 * or NULL. */
static const struct oauth_form_pair *form_find(const struct oauth_form_pair *pairs, int n,
                                               const char *name)
{
    for (int i = 0; i < n; i++)
        if (oauth_form_equal(pairs[i].name, pairs[i].name_len, name, strlen(name)))
            return &pairs[i];
    return NULL;
}

/* The grant of a form body. */
static enum oauth_grant form_grant(const char *body, size_t len, char *tok, size_t cap,
                                   size_t *tok_len)
{
    struct oauth_form_pair pairs[FORM_PAIRS_MAX];
    int n = form_pairs(body, len, pairs);
    const struct oauth_form_pair *gt = n > 0 ? form_find(pairs, n, GRANT_TYPE) : NULL;
    const struct oauth_form_pair *rt = n > 0 ? form_find(pairs, n, REFRESH_TOKEN) : NULL;

    if (gt == NULL || gt->value_len == 0)
        return OAUTH_GRANT_MALFORMED;
    if (!oauth_form_equal(gt->value, gt->value_len, REFRESH_TOKEN, strlen(REFRESH_TOKEN)))
        return OAUTH_GRANT_OTHER;
    if (rt == NULL || oauth_form_decode(rt->value, rt->value_len, tok, cap, tok_len) < 0 ||
        !tok_fits(tok, *tok_len, cap))
        return OAUTH_GRANT_MALFORMED;
    return OAUTH_GRANT_REFRESH;
}

enum oauth_grant oauth_grant_parse(const char *content_type, const char *body, size_t len,
                                   char *tok, size_t cap, size_t *tok_len)
{
    enum oauth_grant g = OAUTH_GRANT_MALFORMED;
    size_t n = 0;

    if (body != NULL) {
        switch (kind_of(content_type, body, len)) {
        case BODY_JSON: g = json_grant(body, len, tok, cap, &n); break;
        case BODY_FORM: g = form_grant(body, len, tok, cap, &n); break;
        case BODY_OTHER: break;
        }
    }
    if (g != OAUTH_GRANT_REFRESH) {
        if (cap > 0)
            explicit_bzero(tok, cap);
        n = 0;
    }
    *tok_len = n;
    return g;
}

/* Set key of o to the string s; 0 or -1. */
static int put_str(json_t *o, const char *key, const char *s)
{
    return oauth_json_put(o, key, s, strlen(s));
}

/* The answer's members, in l's provider's order, into o; whether all went
 * in.  id (of id_len, 0 none) is the id_token placeholder. */
static bool answer_members(json_t *o, const struct oauth_login *l, const char *access_ph,
                           const char *refresh_ph, int64_t expires_in, const char *id,
                           size_t id_len)
{
    bool scope = l->scope[0] != '\0';

    switch (l->provider) {
    case OAUTH_ANTHROPIC:
        return put_str(o, "token_type", BEARER) == 0 &&
               put_str(o, "access_token", access_ph) == 0 &&
               oauth_json_put_int(o, "expires_in", expires_in) == 0 &&
               put_str(o, "refresh_token", refresh_ph) == 0 &&
               (!scope || put_str(o, "scope", l->scope) == 0);
    case OAUTH_OPENAI:
        return (id_len == 0 || oauth_json_put(o, "id_token", id, id_len) == 0) &&
               put_str(o, "access_token", access_ph) == 0 &&
               put_str(o, "refresh_token", refresh_ph) == 0 &&
               oauth_json_put_int(o, "expires_in", expires_in) == 0 &&
               (!scope || put_str(o, "scope", l->scope) == 0);
    case OAUTH_GOOGLE:
        return put_str(o, "access_token", access_ph) == 0 &&
               oauth_json_put_int(o, "expires_in", expires_in) == 0 &&
               (!scope || put_str(o, "scope", l->scope) == 0) &&
               put_str(o, "token_type", BEARER) == 0 &&
               (id_len == 0 || oauth_json_put(o, "id_token", id, id_len) == 0);
    }
    return false;
}

/* Whether the placeholders and lifetime may go into an answer for l. */
static bool answer_args_ok(const struct oauth_login *l, const char *access_ph,
                           const char *refresh_ph, int64_t expires_in)
{
    bool needs_refresh = l->provider != OAUTH_GOOGLE;

    return access_ph != NULL && oauth_is_token(access_ph, strlen(access_ph)) &&
           (!needs_refresh ||
            (refresh_ph != NULL && oauth_is_token(refresh_ph, strlen(refresh_ph)))) &&
           expires_in > 0 && expires_in <= OAUTH_EXPIRES_IN_MAX && oauth_login_texts_ok(l);
}

int oauth_grant_answer(const struct oauth_login *l, const char *access_ph, const char *refresh_ph,
                       int64_t expires_in, char *out, size_t cap, size_t *out_len)
{
    char id[OAUTH_TOKEN_MAX + 1];
    size_t id_len = 0;
    json_t *o = json_object();
    int r = -1;

    if (o != NULL && answer_args_ok(l, access_ph, refresh_ph, expires_in) &&
        (l->provider == OAUTH_ANTHROPIC || oauth_id_placeholder(l, id, &id_len) == 0) &&
        answer_members(o, l, access_ph, refresh_ph, expires_in, id, id_len))
        r = oauth_json_write(o, false, out, cap, out_len);
    else if (cap > 0)
        explicit_bzero(out, cap);
    explicit_bzero(id, sizeof id);
    json_decref(o);
    return r;
}
