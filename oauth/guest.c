/*
 * guest.c - the credentials file a sandbox gets: the shape its CLI reads,
 * holding placeholders only.  Nothing of the real login goes in but what
 * is not a credential: the scope, the account id, and the claims of the
 * id_token under a placeholder header and signature.
 */
#include <string.h>

#include "oauth_int.h"

#define ANTHROPIC_CONTAINER "claudeAiOauth"
#define OPENAI_CONTAINER    "tokens"
#define OPENAI_API_KEY      "OPENAI_API_KEY" /* null: a ChatGPT login, not an API key */
#define LAST_REFRESH        "last_refresh"
#define BEARER              "Bearer"

/* Set key of obj to the placeholder or text s; 0 or -1. */
static int put_str(json_t *obj, const char *key, const char *s)
{
    return oauth_json_put(obj, key, s, strlen(s));
}

/* Claude Code's {"claudeAiOauth":{...}} into root; 0 or -1. */
static int anthropic_file(json_t *root, const struct oauth_login *l, const char *access_ph,
                          const char *refresh_ph, int64_t expires_ms)
{
    json_t *c = json_object();

    if (json_object_set_new(root, ANTHROPIC_CONTAINER, c) == 0 &&
        put_str(c, "accessToken", access_ph) == 0 && put_str(c, "refreshToken", refresh_ph) == 0 &&
        oauth_json_put_int(c, "expiresAt", expires_ms) == 0 &&
        (l->scope[0] == '\0' ||
         json_object_set_new(c, "scopes", oauth_scopes_split(l->scope)) == 0))
        return 0;
    return -1;
}

/* Codex's {"OPENAI_API_KEY":null,"tokens":{...},"last_refresh":...} into
 * root; 0 or -1. */
static int openai_file(json_t *root, const struct oauth_login *l, const char *access_ph,
                       const char *refresh_ph, int64_t now_ms)
{
    char id[OAUTH_TOKEN_MAX + 1], stamp[OAUTH_STAMP_LEN + 1];
    size_t id_len;
    json_t *c = json_object();
    int r = -1;

    if (oauth_json_put_null(root, OPENAI_API_KEY) == 0 &&
        json_object_set_new(root, OPENAI_CONTAINER, c) == 0 &&
        oauth_id_placeholder(l, id, &id_len) == 0 && oauth_stamp(now_ms, stamp) == 0 &&
        (id_len == 0 || oauth_json_put(c, "id_token", id, id_len) == 0) &&
        put_str(c, "access_token", access_ph) == 0 &&
        put_str(c, "refresh_token", refresh_ph) == 0 &&
        (l->account_id[0] == '\0' || put_str(c, "account_id", l->account_id) == 0) &&
        oauth_json_put(root, LAST_REFRESH, stamp, OAUTH_STAMP_LEN) == 0)
        r = 0;
    explicit_bzero(id, sizeof id);
    return r;
}

/* gemini-cli's flat {"access_token",...} into root; 0 or -1. */
static int google_file(json_t *root, const struct oauth_login *l, const char *access_ph,
                       const char *refresh_ph, int64_t expires_ms)
{
    char id[OAUTH_TOKEN_MAX + 1];
    size_t id_len;
    int r = -1;

    if (oauth_id_placeholder(l, id, &id_len) == 0 &&
        put_str(root, "access_token", access_ph) == 0 &&
        put_str(root, "refresh_token", refresh_ph) == 0 &&
        (l->scope[0] == '\0' || put_str(root, "scope", l->scope) == 0) &&
        put_str(root, "token_type", BEARER) == 0 &&
        (id_len == 0 || oauth_json_put(root, "id_token", id, id_len) == 0) &&
        oauth_json_put_int(root, "expiry_date", expires_ms) == 0)
        r = 0;
    explicit_bzero(id, sizeof id);
    return r;
}

/* Whether the placeholders and expiry may go into a file. */
static bool args_ok(const struct oauth_login *l, const char *access_ph, const char *refresh_ph,
                    int64_t expires_ms)
{
    return access_ph != NULL && refresh_ph != NULL &&
           oauth_is_token(access_ph, strlen(access_ph)) &&
           oauth_is_token(refresh_ph, strlen(refresh_ph)) && expires_ms >= 0 &&
           expires_ms <= OAUTH_MS_MAX && oauth_login_texts_ok(l);
}

int oauth_file_placeholder(const struct oauth_login *l, const char *access_ph,
                           const char *refresh_ph, int64_t expires_ms, int64_t now_ms, char *out,
                           size_t cap, size_t *out_len)
{
    json_t *root = json_object();
    int r = -1;

    if (root != NULL && args_ok(l, access_ph, refresh_ph, expires_ms)) {
        switch (l->provider) {
        case OAUTH_ANTHROPIC: r = anthropic_file(root, l, access_ph, refresh_ph, expires_ms); break;
        case OAUTH_OPENAI: r = openai_file(root, l, access_ph, refresh_ph, now_ms); break;
        case OAUTH_GOOGLE: r = google_file(root, l, access_ph, refresh_ph, expires_ms); break;
        }
    }
    if (r == 0)
        r = oauth_json_write(root, true, out, cap, out_len);
    else if (cap > 0)
        explicit_bzero(out, cap);
    json_decref(root);
    return r;
}
