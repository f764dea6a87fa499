/*
 * oauth.h - the OAuth subscription logins of the three agent CLIs (Claude
 * Code, Codex, gemini-cli), read and written.  egressd keeps the real
 * tokens on the appliance, refreshes them itself and gives the sandbox
 * placeholders only; this module is the pure part of that: the CLIs'
 * credential files, the refresh request egressd sends, the provider's token
 * response, the sandbox's own refresh request and egressd's answer to it.
 *
 * Pure: no I/O, no globals, no logging.  It never prints a token: an error
 * text names the shape and the field, never a value.  Buffers of its own
 * that held a token are wiped (explicit_bzero) before it returns; jansson's
 * heap copies are the caller's to wipe (json_set_alloc_funcs), and so is a
 * struct oauth_login (keep it in memory excluded from core dumps).
 *
 * A token here is 1 to OAUTH_TOKEN_MAX bytes of visible ASCII (0x21-0x7e):
 * every real one is, and nothing else may reach an HTTP header.  Every
 * writer NUL-terminates its output (out_len does not count the NUL) and on
 * failure leaves out wiped.
 */
#ifndef OAUTH_OAUTH_H
#define OAUTH_OAUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum oauth_provider { OAUTH_ANTHROPIC, OAUTH_OPENAI, OAUTH_GOOGLE };

/* "anthropic", "openai", "google"; "unknown" for anything else. */
const char *oauth_provider_name(enum oauth_provider p);

#define OAUTH_TOKEN_MAX   4096 /* bytes of one token, NUL not counted */
#define OAUTH_FILE_MAX    8192 /* the longest credentials file */
#define OAUTH_SCOPE_MAX   512  /* bytes of oauth_login.scope, NUL counted */
#define OAUTH_ACCOUNT_MAX 128  /* bytes of oauth_login.account_id, NUL counted */
/* The latest instant any expiry may name: 9999-12-31T23:59:59.999Z, in unix ms. */
#define OAUTH_MS_MAX 253402300799999LL
/* The longest expires_in (seconds) read or written: ten years. */
#define OAUTH_EXPIRES_IN_MAX 315360000LL

struct oauth_login { /* the caller keeps it in memory excluded from core dumps */
    enum oauth_provider provider;
    char access[OAUTH_TOKEN_MAX + 1], refresh[OAUTH_TOKEN_MAX + 1], id_token[OAUTH_TOKEN_MAX + 1];
    size_t access_len, refresh_len, id_token_len; /* id_token_len 0: none */
    int64_t expires_ms;          /* unix ms when the access token lapses; 0 unknown */
    char scope[OAUTH_SCOPE_MAX]; /* as the file or response said it ("" none); Anthropic: scopes
                                    joined by ' ' */
    char account_id[OAUTH_ACCOUNT_MAX]; /* OpenAI tokens.account_id ("" none) */
};

/* ---- file.c: the credentials files ---------------------------------------
 *
 *   Anthropic  ~/.claude/.credentials.json  {"claudeAiOauth":{"accessToken","refreshToken",
 *              "expiresAt" (unix ms),"scopes":[..],...},...}
 *   OpenAI     ~/.codex/auth.json  {"OPENAI_API_KEY":null,"tokens":{"id_token","access_token",
 *              "refresh_token","account_id"},"last_refresh":"...Z",...}; expiry: the access
 *              token's JWT exp
 *   Google     ~/.gemini/oauth_creds.json  {"access_token","refresh_token","scope",
 *              "token_type","id_token"?,"expiry_date" (unix ms)}
 */

/* Whether text looks like a login file at all: first non-space byte '{'. */
bool oauth_file_is_json(const char *text, size_t len);

/* Read a credentials file of any of the three shapes into *out (the shape
 * tells the provider).  Returns 0, or -1 with err naming the shape and the
 * field ("an Anthropic login (claudeAiOauth) without refreshToken"); out is
 * then unchanged.  A missing, null or empty access or refresh token is an
 * error; id_token, expiry, scope and account id are optional, but one of
 * the wrong type or size is an error too.  Duplicate keys are an error. */
int oauth_file_parse(const char *text, size_t len, struct oauth_login *out, char *err,
                     size_t errlen);

/* The file text after a refresh: orig with the tokens/expiry of `now` put in
 * (OpenAI: last_refresh = now_ms as RFC 3339 UTC with microseconds and Z,
 * account_id when now has one; Anthropic: expiresAt when known, scopes when
 * now has a scope; Google: expiry_date when known, scope when now has one;
 * OpenAI and Google: id_token if now has one), every other member kept in
 * its order; written with 2-space indent and a final newline, or compact
 * (no newline) when that does not fit in cap.  Returns 0 with *out_len, or
 * -1 (does not fit even so, orig not parseable or of another provider's
 * shape, now's tokens not tokens). */
int oauth_file_update(const char *orig, size_t orig_len, const struct oauth_login *now,
                      int64_t now_ms, char *out, size_t cap, size_t *out_len);

/* ---- token.c: egressd's refresh request and the provider's answer ------- */

/* The body of the refresh request egressd sends for l, with client_id (and
 * client_secret for Google; may be NULL elsewhere).  Anthropic: JSON
 * {"grant_type","refresh_token","client_id"} and "scope" when l has one
 * (as Claude Code sends it); OpenAI: JSON {"client_id","grant_type",
 * "refresh_token","scope":"openid profile email"}; Google: the form
 * grant_type=refresh_token&refresh_token=R&client_id=C&client_secret=CS.
 * *content_type a static string.  Returns 0 with *out_len, or -1 (does not
 * fit, l's refresh token not a token, no client id, Google without a
 * client secret). */
int oauth_refresh_body(const struct oauth_login *l, const char *client_id,
                       const char *client_secret, char *out, size_t cap, size_t *out_len,
                       const char **content_type);

/* A provider's token response: on success l gets the new access token, the
 * new refresh token if one came (rotation), the new id_token if one came,
 * expires_ms = now_ms + expires_in*1000 (else the new access JWT's exp,
 * else now + 3600 s), scope if one came; returns 0.  On any error l is
 * unchanged, -1 with the reason ("not JSON", "no access_token", "expires_in
 * is not a number", an `error` member as "the endpoint said: invalid_grant",
 * the code capped at 64 printable bytes). */
int oauth_token_response(const char *body, size_t len, int64_t now_ms, struct oauth_login *l,
                         char *err, size_t errlen);

/* ---- grant.c: the sandbox's own refresh request and egressd's answer ---- */

enum oauth_grant { OAUTH_GRANT_REFRESH, OAUTH_GRANT_OTHER, OAUTH_GRANT_MALFORMED };

/* The sandbox's own token request (body as sent, content type as sent or
 * NULL): a JSON object (application/json) or a form
 * (application/x-www-form-urlencoded: percent-decoding, '+' as space); with
 * no content type, a body whose first non-space byte is '{' is JSON, any
 * other a form; another content type is MALFORMED.  OAUTH_GRANT_REFRESH
 * with the refresh token copied (decoded) into tok (cap bytes,
 * NUL-terminated, *tok_len) when grant_type is refresh_token and
 * refresh_token is a nonempty string without NUL; OAUTH_GRANT_OTHER for any
 * other grant_type (authorization_code, ...); OAUTH_GRANT_MALFORMED
 * otherwise (not JSON/form, no grant_type, duplicate keys, a bad %-escape,
 * a token longer than cap-1).  tok is wiped unless REFRESH. */
enum oauth_grant oauth_grant_parse(const char *content_type, const char *body, size_t len,
                                   char *tok, size_t cap, size_t *tok_len);

/* egressd's answer to a sandbox refresh, in l's provider's response shape,
 * carrying only placeholders: access_ph, refresh_ph (not for Google, which
 * never sends one: the guest keeps its refresh placeholder; may be NULL
 * there), expires_in seconds (1..OAUTH_EXPIRES_IN_MAX), l's scope when it
 * has one; OpenAI and Google: an id_token when l has one, made by
 * oauth_jwt_placeholder (never l's real one; -1 when l's is not a JWT).
 * Compact JSON, returns 0 with *out_len or -1. */
int oauth_grant_answer(const struct oauth_login *l, const char *access_ph, const char *refresh_ph,
                       int64_t expires_in, char *out, size_t cap, size_t *out_len);

/* ---- guest.c: the credentials file the sandbox gets --------------------- */

/* The guest's credentials file for l's provider with placeholders only
 * (access_ph, refresh_ph, expires_ms (Anthropic expiresAt, Google
 * expiry_date; OpenAI has none), l's scope and account id; OpenAI: id_token
 * by oauth_jwt_placeholder of l's (-1 when l's is not a JWT; none when l has
 * none), "OPENAI_API_KEY":null, last_refresh now_ms; Google also
 * "token_type":"Bearer").  Same shapes as oauth_file_parse reads, 2-space
 * indent and a final newline.  Returns 0 with *out_len or -1. */
int oauth_file_placeholder(const struct oauth_login *l, const char *access_ph,
                           const char *refresh_ph, int64_t expires_ms, int64_t now_ms, char *out,
                           size_t cap, size_t *out_len);

/* ---- jwt.c: JSON Web Tokens, read without verification ------------------ */

/* The `exp` claim (seconds, 1..OAUTH_MS_MAX/1000) of a JWT's payload
 * (base64url, no verification); 0 when tok is not a JWT (three segments,
 * header and payload base64url of JSON objects, at most OAUTH_TOKEN_MAX
 * bytes) or has no such exp. */
int64_t oauth_jwt_exp(const char *tok, size_t len);

/* A JWT that carries the claims of `real`'s payload (so a CLI that reads
 * e.g. email, chatgpt_account_id, chatgpt_plan_type from the id_token still
 * finds them) but is not the real one: header {"alg":"none","typ":"JWT"},
 * the same payload segment, signature "egressd-placeholder".  Returns 0
 * with *out_len; -1 when real is not a JWT or out does not hold it. */
int oauth_jwt_placeholder(const char *real, size_t len, char *out, size_t cap, size_t *out_len);

#endif
