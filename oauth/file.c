/*
 * file.c - the credentials files of the three CLIs, read, and written back
 * after a refresh with every member egressd does not own kept in place.
 *
 * The shape names the provider: a top-level "claudeAiOauth" is Claude
 * Code's, "tokens" or "OPENAI_API_KEY" Codex's, "access_token" or
 * "refresh_token" gemini-cli's; a file with members of two shapes is
 * refused rather than guessed at.
 */
#include <string.h>

#include "oauth_int.h"

/* Where a provider's file keeps what egressd reads and writes. */
struct shape {
    const char *label;     /* the start of every error text about it */
    const char *container; /* the member holding the tokens; NULL: the top level */
    const char *access, *refresh;
    const char *id_token; /* NULL: none */
    const char *expiry;   /* unix ms; NULL: the access token's JWT exp */
    const char *scope;    /* NULL: none */
    bool scope_is_list;   /* Claude Code's "scopes": [..] */
    const char *account;  /* NULL: none */
};

static const struct shape shapes[] = {
    [OAUTH_ANTHROPIC] = {"an Anthropic login (claudeAiOauth)", "claudeAiOauth", "accessToken",
                         "refreshToken", NULL, "expiresAt", "scopes", true, NULL},
    [OAUTH_OPENAI] = {"an OpenAI login (tokens)", "tokens", "access_token", "refresh_token",
                      "id_token", NULL, NULL, false, "account_id"},
    [OAUTH_GOOGLE] = {"a Google login (oauth_creds)", NULL, "access_token", "refresh_token",
                      "id_token", "expiry_date", "scope", false, NULL},
};

/* The members whose presence at the top level marks each shape. */
static const char *const marks[][2] = {
    [OAUTH_ANTHROPIC] = {"claudeAiOauth", NULL},
    [OAUTH_OPENAI] = {"tokens", "OPENAI_API_KEY"},
    [OAUTH_GOOGLE] = {"access_token", "refresh_token"},
};

#define N_SHAPES     (sizeof shapes / sizeof shapes[0])
#define N_MARKS      (sizeof marks[0] / sizeof marks[0][0])
#define LAST_REFRESH "last_refresh" /* Codex: when the tokens were last refreshed */

bool oauth_file_is_json(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')
            continue;
        return text[i] == '{';
    }
    return false;
}

/* How many shapes root has; when one, it is *p. */
static int shapes_of(const json_t *root, enum oauth_provider *p)
{
    int found = 0;

    for (size_t s = 0; s < N_SHAPES; s++) {
        bool marked = false;
        for (size_t m = 0; m < N_MARKS; m++)
            marked |= marks[s][m] != NULL && json_object_get(root, marks[s][m]) != NULL;
        if (marked) {
            *p = (enum oauth_provider)s;
            found++;
        }
    }
    return found;
}

/* The object of root holding shape s's tokens, or NULL. */
static json_t *container_of(json_t *root, const struct shape *s)
{
    json_t *c = s->container != NULL ? json_object_get(root, s->container) : root;

    return json_is_object(c) ? c : NULL;
}

/* Read a required token member into buf/len; -1 with err. */
static int read_required(const json_t *c, const struct shape *s, const char *key, char *buf,
                         size_t *len, char *err, size_t errlen)
{
    switch (oauth_json_token(c, key, buf, len)) {
    case OAUTH_MEMBER_OK: return 0;
    case OAUTH_MEMBER_ABSENT: oauth_err(err, errlen, "%s without %s", s->label, key); break;
    case OAUTH_MEMBER_BAD:
        oauth_err(err, errlen, "%s whose %s is not a token (1 to %d bytes of visible ASCII)",
                  s->label, key, OAUTH_TOKEN_MAX);
        break;
    }
    return -1;
}

/* Read the optional members of shape s (id_token, expiry, scope, account)
 * into l; -1 with err naming the one that is wrong. */
static int read_optional(const json_t *c, const struct shape *s, struct oauth_login *l, char *err,
                         size_t errlen)
{
    const char *bad = NULL;

    if (s->id_token != NULL &&
        oauth_json_token(c, s->id_token, l->id_token, &l->id_token_len) == OAUTH_MEMBER_BAD)
        bad = s->id_token;
    else if (s->expiry != NULL && oauth_json_ms(c, s->expiry, &l->expires_ms) == OAUTH_MEMBER_BAD)
        bad = s->expiry;
    else if (s->scope != NULL && s->scope_is_list &&
             oauth_scopes_join(c, s->scope, l->scope) == OAUTH_MEMBER_BAD)
        bad = s->scope;
    else if (s->scope != NULL && !s->scope_is_list &&
             oauth_json_text(c, s->scope, l->scope, sizeof l->scope) == OAUTH_MEMBER_BAD)
        bad = s->scope;
    else if (s->account != NULL && oauth_json_text(c, s->account, l->account_id,
                                                   sizeof l->account_id) == OAUTH_MEMBER_BAD)
        bad = s->account;
    if (bad == NULL)
        return 0;
    oauth_err(err, errlen, "%s whose %s is of the wrong type or size", s->label, bad);
    return -1;
}

/* Read the login of root (of provider p) into l; -1 with err. */
static int read_login(json_t *root, enum oauth_provider p, struct oauth_login *l, char *err,
                      size_t errlen)
{
    const struct shape *s = &shapes[p];
    const json_t *c = container_of(root, s);

    l->provider = p;
    if (c == NULL) {
        oauth_err(err, errlen, "%s whose %s is missing or not an object", s->label, s->container);
        return -1;
    }
    if (read_required(c, s, s->access, l->access, &l->access_len, err, errlen) < 0 ||
        read_required(c, s, s->refresh, l->refresh, &l->refresh_len, err, errlen) < 0 ||
        read_optional(c, s, l, err, errlen) < 0)
        return -1;
    if (s->expiry == NULL)
        l->expires_ms = oauth_jwt_exp(l->access, l->access_len) * MS_PER_S;
    return 0;
}

int oauth_file_parse(const char *text, size_t len, struct oauth_login *out, char *err,
                     size_t errlen)
{
    struct oauth_login l = {0};
    enum oauth_provider p = OAUTH_ANTHROPIC; /* (set by shapes_of when it finds one) */
    int n;
    json_t *root = len <= OAUTH_FILE_MAX ? oauth_json_load(text, len) : NULL;
    int r = -1;

    if (len > OAUTH_FILE_MAX)
        oauth_err(err, errlen, "a file over %d bytes", OAUTH_FILE_MAX);
    else if (root == NULL)
        oauth_err(err, errlen, "not a JSON object with unique keys");
    else if ((n = shapes_of(root, &p)) == 0)
        oauth_err(err, errlen,
                  "JSON of no known login shape (no claudeAiOauth, tokens, "
                  "OPENAI_API_KEY, access_token or refresh_token)");
    else if (n > 1)
        oauth_err(err, errlen, "JSON of more than one login shape");
    else if (read_login(root, p, &l, err, errlen) == 0) {
        *out = l;
        r = 0;
    }
    explicit_bzero(&l, sizeof l);
    json_decref(root);
    return r;
}

/* Put the optional members of now into c (shape s): id_token, expiry,
 * scope, account.  0 or -1. */
static int put_optional(json_t *c, const struct shape *s, const struct oauth_login *now)
{
    int r = 0;

    if (s->id_token != NULL && now->id_token_len > 0)
        r |= oauth_json_put(c, s->id_token, now->id_token, now->id_token_len);
    if (s->expiry != NULL && now->expires_ms > 0)
        r |= oauth_json_put_int(c, s->expiry, now->expires_ms);
    if (s->scope != NULL && now->scope[0] != '\0')
        r |= s->scope_is_list ? json_object_set_new(c, s->scope, oauth_scopes_split(now->scope))
                              : oauth_json_put(c, s->scope, now->scope, strlen(now->scope));
    if (s->account != NULL && now->account_id[0] != '\0')
        r |= oauth_json_put(c, s->account, now->account_id, strlen(now->account_id));
    return r;
}

int oauth_file_update(const char *orig, size_t orig_len, const struct oauth_login *now,
                      int64_t now_ms, char *out, size_t cap, size_t *out_len)
{
    enum oauth_provider p = OAUTH_ANTHROPIC; /* (set by shapes_of when it finds one) */
    char stamp[OAUTH_STAMP_LEN + 1];
    json_t *root = oauth_login_sane(now) ? oauth_json_load(orig, orig_len) : NULL;
    json_t *c = NULL;
    int r = -1;

    if (root != NULL && shapes_of(root, &p) == 1 && p == now->provider)
        c = container_of(root, &shapes[p]);
    if (c != NULL && oauth_json_put(c, shapes[p].access, now->access, now->access_len) == 0 &&
        oauth_json_put(c, shapes[p].refresh, now->refresh, now->refresh_len) == 0 &&
        put_optional(c, &shapes[p], now) == 0 &&
        (p != OAUTH_OPENAI || (oauth_stamp(now_ms, stamp) == 0 &&
                               oauth_json_put(root, LAST_REFRESH, stamp, OAUTH_STAMP_LEN) == 0)))
        /* compact when indented does not fit: a file near the limit that
         * loaded must not lose a rotated token for its whitespace */
        r = oauth_json_write(root, true, out, cap, out_len) == 0
                ? 0
                : oauth_json_write(root, false, out, cap, out_len);
    else if (cap > 0)
        explicit_bzero(out, cap);
    json_decref(root);
    return r;
}
