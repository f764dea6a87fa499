/*
 * token.c - egressd's own refresh: the request body it sends each
 * provider's token endpoint, and the endpoint's answer read into the login.
 *
 *   Anthropic  POST https://platform.claude.com/v1/oauth/token, JSON, as
 *              Claude Code sends it (with "scope" when the login has one)
 *   OpenAI     POST https://auth.openai.com/oauth/token, JSON
 *   Google     POST https://oauth2.googleapis.com/token, a form
 */
#include <string.h>

#include "oauth_int.h"

#define CONTENT_JSON     "application/json"
#define CONTENT_FORM     "application/x-www-form-urlencoded"
#define GRANT_REFRESH    "refresh_token"
#define OPENAI_SCOPE     "openid profile email" /* what Codex asks for on refresh */
#define DEFAULT_LIFETIME 3600                   /* s: an access token's, when nothing says */
#define ERROR_CODE_MAX   64                     /* bytes of an endpoint's error code quoted */

enum { PRINTABLE_FIRST = 0x20, PRINTABLE_LAST = 0x7e };

/* The JSON bodies of Anthropic and OpenAI into out; 0 or -1. */
static int json_body(const struct oauth_login *l, const char *client_id, char *out, size_t cap,
                     size_t *out_len)
{
    json_t *o = json_object();
    size_t id_len = strlen(client_id);
    int r = -1;

    if (o == NULL)
        return -1;
    if (l->provider == OAUTH_ANTHROPIC) {
        if (oauth_json_put(o, "grant_type", GRANT_REFRESH, strlen(GRANT_REFRESH)) == 0 &&
            oauth_json_put(o, "refresh_token", l->refresh, l->refresh_len) == 0 &&
            oauth_json_put(o, "client_id", client_id, id_len) == 0 &&
            (l->scope[0] == '\0' || oauth_json_put(o, "scope", l->scope, strlen(l->scope)) == 0))
            r = 0;
    } else if (oauth_json_put(o, "client_id", client_id, id_len) == 0 &&
               oauth_json_put(o, "grant_type", GRANT_REFRESH, strlen(GRANT_REFRESH)) == 0 &&
               oauth_json_put(o, "refresh_token", l->refresh, l->refresh_len) == 0 &&
               oauth_json_put(o, "scope", OPENAI_SCOPE, strlen(OPENAI_SCOPE)) == 0) {
        r = 0;
    }
    if (r == 0)
        r = oauth_json_write(o, false, out, cap, out_len);
    json_decref(o);
    return r;
}

/* Google's form body into out; 0 or -1. */
static int form_body(const struct oauth_login *l, const char *client_id, const char *secret,
                     char *out, size_t cap, size_t *out_len)
{
    size_t at = 0;

    if (secret == NULL || secret[0] == '\0' ||
        oauth_form_put(out, cap, &at, "grant_type", GRANT_REFRESH, strlen(GRANT_REFRESH)) < 0 ||
        oauth_form_put(out, cap, &at, "refresh_token", l->refresh, l->refresh_len) < 0 ||
        oauth_form_put(out, cap, &at, "client_id", client_id, strlen(client_id)) < 0 ||
        oauth_form_put(out, cap, &at, "client_secret", secret, strlen(secret)) < 0)
        return -1;
    *out_len = at;
    return 0;
}

int oauth_refresh_body(const struct oauth_login *l, const char *client_id,
                       const char *client_secret, char *out, size_t cap, size_t *out_len,
                       const char **content_type)
{
    int r = -1;

    if (client_id != NULL && client_id[0] != '\0' && oauth_is_token(l->refresh, l->refresh_len) &&
        oauth_login_texts_ok(l)) {
        switch (l->provider) {
        case OAUTH_ANTHROPIC:
        case OAUTH_OPENAI:
            r = json_body(l, client_id, out, cap, out_len);
            *content_type = CONTENT_JSON;
            break;
        case OAUTH_GOOGLE:
            r = form_body(l, client_id, client_secret, out, cap, out_len);
            *content_type = CONTENT_FORM;
            break;
        }
    }
    if (r < 0 && cap > 0)
        explicit_bzero(out, cap);
    return r;
}

/* The error member e of an answer as "the endpoint said: CODE" into err:
 * a string, or an object's "type" (Anthropic's API errors), else "an
 * error" (error_description alone is never quoted: it is prose); its bytes
 * outside 0x20-0x7e shown as '?', at most ERROR_CODE_MAX of them. */
static void endpoint_error(const json_t *e, char *err, size_t errlen)
{
    char code[ERROR_CODE_MAX + 1] = "an error";
    const json_t *s = json_is_object(e) ? json_object_get(e, "type") : e;

    if (json_is_string(s)) {
        size_t n = json_string_length(s);
        n = n < ERROR_CODE_MAX ? n : ERROR_CODE_MAX;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)json_string_value(s)[i];
            code[i] = c >= PRINTABLE_FIRST && c <= PRINTABLE_LAST ? (char)c : '?';
        }
        code[n] = '\0';
    }
    oauth_err(err, errlen, "the endpoint said: %s", code);
}

/* The expiry of the answer r into *ms; -1 with err. */
static int answer_expiry(const json_t *r, int64_t now_ms, const struct oauth_login *n, int64_t *ms,
                         char *err, size_t errlen)
{
    const json_t *e = json_object_get(r, "expires_in");
    double secs;

    if (e == NULL || json_is_null(e)) {
        int64_t exp = oauth_jwt_exp(n->access, n->access_len);
        *ms = exp > 0 ? exp * MS_PER_S : now_ms + (int64_t)DEFAULT_LIFETIME * MS_PER_S;
        return 0;
    }
    if (!json_is_number(e)) {
        oauth_err(err, errlen, "expires_in is not a number");
        return -1;
    }
    secs = json_number_value(e);
    if (!(secs > 0 && secs <= (double)OAUTH_EXPIRES_IN_MAX)) {
        oauth_err(err, errlen, "expires_in is out of range (1 to %lld s)",
                  (long long)OAUTH_EXPIRES_IN_MAX);
        return -1;
    }
    *ms = now_ms + (int64_t)(secs * MS_PER_S);
    return 0;
}

/* Read the tokens and scope of the answer r into n (a copy of the login);
 * -1 with err. */
static int answer_tokens(const json_t *r, struct oauth_login *n, char *err, size_t errlen)
{
    char scope[OAUTH_SCOPE_MAX];
    size_t len;

    switch (oauth_json_token(r, "access_token", n->access, &n->access_len)) {
    case OAUTH_MEMBER_OK: break;
    case OAUTH_MEMBER_ABSENT: oauth_err(err, errlen, "no access_token"); return -1;
    case OAUTH_MEMBER_BAD: oauth_err(err, errlen, "access_token is not a token"); return -1;
    }
    static const char *const optional[] = {"refresh_token", "id_token"};
    char *bufs[] = {n->refresh, n->id_token};
    size_t *lens[] = {&n->refresh_len, &n->id_token_len};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        char tok[OAUTH_TOKEN_MAX + 1];
        enum oauth_member m = oauth_json_token(r, optional[i], tok, &len);
        if (m == OAUTH_MEMBER_OK) {
            memcpy(bufs[i], tok, len + 1);
            *lens[i] = len;
        }
        explicit_bzero(tok, sizeof tok);
        if (m == OAUTH_MEMBER_BAD) {
            oauth_err(err, errlen, "%s is not a token", optional[i]);
            return -1;
        }
    }
    switch (oauth_json_text(r, "scope", scope, sizeof scope)) {
    case OAUTH_MEMBER_OK: memcpy(n->scope, scope, sizeof scope); break;
    case OAUTH_MEMBER_ABSENT: break;
    case OAUTH_MEMBER_BAD: oauth_err(err, errlen, "scope is not a short text"); return -1;
    }
    return 0;
}

int oauth_token_response(const char *body, size_t len, int64_t now_ms, struct oauth_login *l,
                         char *err, size_t errlen)
{
    struct oauth_login n = *l;
    json_t *r = oauth_json_load(body, len);
    const json_t *e = json_object_get(r, "error");
    const json_t *d = json_object_get(r, "error_description");
    int rc = -1;

    if (r == NULL)
        oauth_err(err, errlen, "not JSON (an object)");
    else if ((e != NULL && !json_is_null(e)) || (d != NULL && !json_is_null(d)))
        endpoint_error(e, err, errlen);
    else if (now_ms < 0 || now_ms > OAUTH_MS_MAX - OAUTH_EXPIRES_IN_MAX * MS_PER_S)
        oauth_err(err, errlen, "now is out of range");
    else if (answer_tokens(r, &n, err, errlen) == 0 &&
             answer_expiry(r, now_ms, &n, &n.expires_ms, err, errlen) == 0) {
        *l = n;
        rc = 0;
    }
    explicit_bzero(&n, sizeof n);
    json_decref(r);
    return rc;
}
