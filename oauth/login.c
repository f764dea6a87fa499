/*
 * login.c - what a struct oauth_login may hold: the checks every writer
 * makes before it puts a login's members anywhere.
 */
#include <string.h>

#include "oauth_int.h"

/* Whether s (of size bytes) holds a NUL-terminated text. */
static bool text_ok(const char *s, size_t size)
{
    return oauth_is_text(s, strnlen(s, size), size);
}

bool oauth_login_texts_ok(const struct oauth_login *l)
{
    return text_ok(l->scope, sizeof l->scope) && text_ok(l->account_id, sizeof l->account_id);
}

bool oauth_login_sane(const struct oauth_login *l)
{
    return (l->provider == OAUTH_ANTHROPIC || l->provider == OAUTH_OPENAI ||
            l->provider == OAUTH_GOOGLE) &&
           oauth_is_token(l->access, l->access_len) && oauth_is_token(l->refresh, l->refresh_len) &&
           (l->id_token_len == 0 || oauth_is_token(l->id_token, l->id_token_len)) &&
           l->expires_ms >= 0 && l->expires_ms <= OAUTH_MS_MAX && oauth_login_texts_ok(l);
}
