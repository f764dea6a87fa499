/*
 * test_oauth.c - the OAuth logins of oauth/: the three credential files
 * read, written back and made for the guest; egressd's refresh bodies and
 * the token responses; the sandbox's refresh request and egressd's answer;
 * JWT exp and placeholders.  Every error text is checked to name its field
 * and to hold no token value; every failing call to leave its output as it
 * was (a login) or wiped (a buffer).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oauth.h"
#include "tap.h"

#define S(lit) lit, sizeof(lit) - 1

#define NOW_MS      1796032800123LL /* 2026-11-30T10:00:00.123Z */
#define NOW_STAMP   "2026-11-30T10:00:00.123000Z"
#define ACCESS_EXP  1796036400LL /* the exp of the OpenAI access JWT below */
#define BIG         (OAUTH_FILE_MAX * 2)
#define SECRET_MARK "SECRET" /* every token value in these tests holds it */

static char out[BIG];
static size_t out_len;
static char err[256];

/* ---- helpers: base64url and JWTs made here, apart from jwt.c ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* s as base64url without padding, appended to o. */
static void b64url(const char *s, char *o)
{
    size_t n = strlen(s), k = strlen(o);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        o[k++] = b64[v >> 18 & 63];
        o[k++] = b64[v >> 12 & 63];
        if (i + 1 < n)
            o[k++] = b64[v >> 6 & 63];
        if (i + 2 < n)
            o[k++] = b64[v & 63];
    }
    o[k] = '\0';
}

/* A JWT of header and payload JSON and the signature text sig. */
static char *jwt(const char *header, const char *payload, const char *sig)
{
    char *o = calloc(1, 4096);
    b64url(header, o);
    strcat(o, ".");
    b64url(payload, o);
    strcat(o, ".");
    strcat(o, sig);
    return o;
}

/* The segment i (0, 1, 2) of a JWT as a new string. */
static char *segment(const char *t, int i)
{
    const char *p = t;
    for (int k = 0; k < i; k++)
        p = strchr(p, '.') + 1;
    size_t n = strcspn(p, ".");
    char *s = calloc(1, n + 1);
    memcpy(s, p, n);
    return s;
}

static bool all_zero(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* Whether key a comes before key b in s (both there). */
static bool before(const char *s, const char *a, const char *b)
{
    const char *pa = strstr(s, a), *pb = strstr(s, b);
    return pa != NULL && pb != NULL && pa < pb;
}

static char *id_jwt, *access_jwt;

static void make_jwts(void)
{
    id_jwt = jwt("{\"alg\":\"RS256\",\"kid\":\"k1\"}",
                 "{\"email\":\"dev@example.com\",\"https://api.openai.com/auth\":{"
                 "\"chatgpt_account_id\":\"acct-1\",\"chatgpt_plan_type\":\"pro\"},"
                 "\"exp\":1796036400}",
                 "SECRETSIGidtoken");
    access_jwt =
        jwt("{\"alg\":\"RS256\"}", "{\"exp\":1796036400,\"scp\":[\"openid\"]}", "SECRETSIGaccess");
}

/* ---- the three shapes ---- */

static const char anthropic_file[] =
    "{\"before\":1,\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-SECRETA\","
    "\"refreshToken\":\"sk-ant-ort01-SECRETR\",\"expiresAt\":1796000000000,"
    "\"scopes\":[\"user:inference\",\"user:profile\"],\"subscriptionType\":\"max\","
    "\"rateLimitTier\":\"default_claude_max_20x\"},\"mcpOAuth\":{\"x\":[1,2]}}";

static char openai_file[4096], google_file[4096];

static void make_files(void)
{
    snprintf(openai_file, sizeof openai_file,
             "{\"auth_mode\":\"chatgpt\",\"OPENAI_API_KEY\":null,\"tokens\":{\"id_token\":\"%s\","
             "\"access_token\":\"%s\",\"refresh_token\":\"rt_SECRETR\",\"account_id\":"
             "\"acct-1\"},\"last_refresh\":\"2026-11-01T00:00:00.000000Z\",\"extra\":true}",
             id_jwt, access_jwt);
    snprintf(google_file, sizeof google_file,
             "{\"access_token\":\"ya29.SECRETA\",\"refresh_token\":\"1//0gSECRETR\","
             "\"scope\":\"https://www.googleapis.com/auth/cloud-platform openid\","
             "\"token_type\":\"Bearer\",\"id_token\":\"%s\",\"expiry_date\":1796000000000}",
             id_jwt);
}

static void test_names(void)
{
    ok(strcmp(oauth_provider_name(OAUTH_ANTHROPIC), "anthropic") == 0, "name anthropic");
    ok(strcmp(oauth_provider_name(OAUTH_OPENAI), "openai") == 0, "name openai");
    ok(strcmp(oauth_provider_name(OAUTH_GOOGLE), "google") == 0, "name google");
    ok(oauth_file_is_json(S(" \n\t{\"a\":1}")), "is_json: blanks then {");
    ok(!oauth_file_is_json(S("")), "is_json: empty");
    ok(!oauth_file_is_json(S("[{}]")), "is_json: an array");
    ok(!oauth_file_is_json(S("x{")), "is_json: a byte before {");
}

static void test_parse(void)
{
    static struct oauth_login l;

    ok(oauth_file_parse(S(anthropic_file), &l, err, sizeof err) == 0, "anthropic parses: %s", err);
    ok(l.provider == OAUTH_ANTHROPIC, "anthropic: provider");
    ok(strcmp(l.access, "sk-ant-oat01-SECRETA") == 0 && l.access_len == 20, "anthropic: access");
    ok(strcmp(l.refresh, "sk-ant-ort01-SECRETR") == 0 && l.refresh_len == 20, "anthropic: refresh");
    ok(l.id_token_len == 0 && l.id_token[0] == '\0', "anthropic: no id_token");
    ok(l.expires_ms == 1796000000000LL, "anthropic: expiresAt");
    ok(strcmp(l.scope, "user:inference user:profile") == 0, "anthropic: scopes joined");
    ok(l.account_id[0] == '\0', "anthropic: no account id");

    ok(oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err) == 0,
       "openai parses: %s", err);
    ok(l.provider == OAUTH_OPENAI, "openai: provider");
    ok(strcmp(l.access, access_jwt) == 0, "openai: access");
    ok(strcmp(l.refresh, "rt_SECRETR") == 0, "openai: refresh");
    ok(strcmp(l.id_token, id_jwt) == 0 && l.id_token_len == strlen(id_jwt), "openai: id_token");
    ok(l.expires_ms == ACCESS_EXP * 1000, "openai: expiry from the access JWT's exp");
    ok(strcmp(l.account_id, "acct-1") == 0, "openai: account_id");
    ok(l.scope[0] == '\0', "openai: no scope");

    ok(oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err) == 0,
       "google parses: %s", err);
    ok(l.provider == OAUTH_GOOGLE, "google: provider");
    ok(strcmp(l.access, "ya29.SECRETA") == 0, "google: access");
    ok(strcmp(l.refresh, "1//0gSECRETR") == 0, "google: refresh");
    ok(strcmp(l.id_token, id_jwt) == 0, "google: id_token");
    ok(l.expires_ms == 1796000000000LL, "google: expiry_date");
    ok(strcmp(l.scope, "https://www.googleapis.com/auth/cloud-platform openid") == 0,
       "google: scope");

    ok(oauth_file_parse(S("{\"tokens\":{\"access_token\":\"a.SECRET\",\"refresh_token\":"
                          "\"rSECRET\"}}"),
                        &l, err, sizeof err) == 0 &&
           l.expires_ms == 0 && l.id_token_len == 0,
       "openai: access not a JWT: expiry unknown, no id_token");
    ok(oauth_file_parse(S("{\"access_token\":\"aSECRET\",\"refresh_token\":\"rSECRET\","
                          "\"expiry_date\":1.5e12}"),
                        &l, err, sizeof err) == 0 &&
           l.expires_ms == 1500000000000LL,
       "google: a real expiry_date");
}

struct bad_file {
    const char *what, *text, *want;
};

static const struct bad_file bad_files[] = {
    {"anthropic without refreshToken",
     "{\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-SECRETA\",\"expiresAt\":1}}",
     "an Anthropic login (claudeAiOauth) without refreshToken"},
    {"anthropic refreshToken empty (Claude Code's dead login)",
     "{\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-SECRETA\",\"refreshToken\":\"\"}}",
     "an Anthropic login (claudeAiOauth) without refreshToken"},
    {"anthropic without accessToken", "{\"claudeAiOauth\":{\"refreshToken\":\"SECRETR\"}}",
     "an Anthropic login (claudeAiOauth) without accessToken"},
    {"anthropic accessToken a number",
     "{\"claudeAiOauth\":{\"accessToken\":7,\"refreshToken\":\"SECRETR\"}}",
     "an Anthropic login (claudeAiOauth) whose accessToken is not a token"},
    {"anthropic accessToken with a space",
     "{\"claudeAiOauth\":{\"accessToken\":\"sk SECRETA\",\"refreshToken\":\"SECRETR\"}}",
     "whose accessToken is not a token"},
    {"anthropic accessToken with a newline",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\\r\\nX: y\",\"refreshToken\":\"SECRETR\"}}",
     "whose accessToken is not a token"},
    {"anthropic expiresAt a string",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\",\"refreshToken\":\"SECRETR\","
     "\"expiresAt\":\"soon\"}}",
     "an Anthropic login (claudeAiOauth) whose expiresAt is of the wrong type or size"},
    {"anthropic expiresAt negative",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\",\"refreshToken\":\"SECRETR\","
     "\"expiresAt\":-1}}",
     "expiresAt is of the wrong type"},
    {"anthropic scopes a string",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\",\"refreshToken\":\"SECRETR\","
     "\"scopes\":\"user:inference\"}}",
     "whose scopes is of the wrong type"},
    {"anthropic scopes with a number",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\",\"refreshToken\":\"SECRETR\","
     "\"scopes\":[\"a\",1]}}",
     "whose scopes is of the wrong type"},
    {"anthropic claudeAiOauth null", "{\"claudeAiOauth\":null}",
     "an Anthropic login (claudeAiOauth) whose claudeAiOauth is missing or not an object"},
    {"openai API key, no tokens", "{\"OPENAI_API_KEY\":\"sk-proj-SECRETK\",\"tokens\":null}",
     "an OpenAI login (tokens) whose tokens is missing or not an object"},
    {"openai without access_token", "{\"tokens\":{\"refresh_token\":\"rt_SECRETR\"}}",
     "an OpenAI login (tokens) without access_token"},
    {"openai without refresh_token", "{\"tokens\":{\"access_token\":\"SECRETA\"}}",
     "an OpenAI login (tokens) without refresh_token"},
    {"openai id_token a number",
     "{\"tokens\":{\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\",\"id_token\":5}}",
     "an OpenAI login (tokens) whose id_token is of the wrong type or size"},
    {"openai account_id too long",
     "{\"tokens\":{\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\",\"account_id\":\""
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}}",
     "whose account_id is of the wrong type or size"},
    {"google without refresh_token", "{\"access_token\":\"ya29.SECRETA\",\"expiry_date\":1}",
     "a Google login (oauth_creds) without refresh_token"},
    {"google refresh_token null", "{\"access_token\":\"ya29.SECRETA\",\"refresh_token\":null}",
     "a Google login (oauth_creds) without refresh_token"},
    {"google scope a list",
     "{\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\",\"scope\":[\"a\"]}",
     "a Google login (oauth_creds) whose scope is of the wrong type or size"},
    {"google expiry_date a string",
     "{\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\",\"expiry_date\":\"1\"}",
     "whose expiry_date is of the wrong type"},
    {"not JSON", "SECRET=value", "not a JSON object"},
    {"JSON, not an object", "[\"SECRET\"]", "not a JSON object"},
    {"a key twice",
     "{\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\",\"refresh_token\":\"SECRET2\"}",
     "not a JSON object"},
    {"no known shape", "{\"token\":\"SECRET\"}", "JSON of no known login shape"},
    {"two shapes",
     "{\"claudeAiOauth\":{\"accessToken\":\"SECRETA\",\"refreshToken\":\"SECRETR\"},"
     "\"access_token\":\"SECRETA\",\"refresh_token\":\"SECRETR\"}",
     "JSON of more than one login shape"},
};

static void test_parse_bad(void)
{
    static struct oauth_login l, before_l;
    static char long_file[OAUTH_TOKEN_MAX + 128];

    memset(&l, 0x5a, sizeof l);
    before_l = l;
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        const struct bad_file *b = &bad_files[i];
        err[0] = '\0';
        int r = oauth_file_parse(b->text, strlen(b->text), &l, err, sizeof err);
        ok(r == -1 && strstr(err, b->want) != NULL, "%s: \"%s\"", b->what, err);
        ok(strstr(err, SECRET_MARK) == NULL && strstr(err, "aaaaaaaa") == NULL,
           "%s: no value in the error", b->what);
        ok(memcmp(&l, &before_l, sizeof l) == 0, "%s: login untouched", b->what);
    }
    /* a token one byte over the cap */
    int n = snprintf(long_file, sizeof long_file, "{\"access_token\":\"");
    memset(long_file + n, 'S', OAUTH_TOKEN_MAX + 1);
    snprintf(long_file + n + OAUTH_TOKEN_MAX + 1, sizeof long_file - n - OAUTH_TOKEN_MAX - 1,
             "\",\"refresh_token\":\"r\"}");
    ok(oauth_file_parse(long_file, strlen(long_file), &l, err, sizeof err) == -1 &&
           strstr(err, "whose access_token is not a token (1 to 4096 bytes") != NULL,
       "a 4097-byte token: %s", err);
    ok(strstr(err, "SSSS") == NULL, "a 4097-byte token: not in the error");
    /* and one of exactly the cap */
    memmove(long_file + n + OAUTH_TOKEN_MAX, long_file + n + OAUTH_TOKEN_MAX + 1,
            strlen(long_file + n + OAUTH_TOKEN_MAX + 1) + 1);
    ok(oauth_file_parse(long_file, strlen(long_file), &l, err, sizeof err) == 0 &&
           l.access_len == OAUTH_TOKEN_MAX,
       "a 4096-byte token is read");
    ok(oauth_file_parse(anthropic_file, OAUTH_FILE_MAX + 1, &l, err, sizeof err) == -1 &&
           strstr(err, "over 8192 bytes") != NULL,
       "a file over the cap: %s", err);
}

/* ---- update ---- */

static const char anthropic_updated[] = "{\n"
                                        "  \"before\": 1,\n"
                                        "  \"claudeAiOauth\": {\n"
                                        "    \"accessToken\": \"sk-ant-oat01-NEWA\",\n"
                                        "    \"refreshToken\": \"sk-ant-ort01-NEWR\",\n"
                                        "    \"expiresAt\": 1796061600123,\n"
                                        "    \"scopes\": [\n"
                                        "      \"user:inference\",\n"
                                        "      \"user:profile\",\n"
                                        "      \"user:sessions:claude_code\"\n"
                                        "    ],\n"
                                        "    \"subscriptionType\": \"max\",\n"
                                        "    \"rateLimitTier\": \"default_claude_max_20x\"\n"
                                        "  },\n"
                                        "  \"mcpOAuth\": {\n"
                                        "    \"x\": [\n"
                                        "      1,\n"
                                        "      2\n"
                                        "    ]\n"
                                        "  }\n"
                                        "}\n";

static void test_update(void)
{
    static struct oauth_login l, back;

    /* anthropic: exact text */
    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    strcpy(l.access, "sk-ant-oat01-NEWA");
    l.access_len = strlen(l.access);
    strcpy(l.refresh, "sk-ant-ort01-NEWR");
    l.refresh_len = strlen(l.refresh);
    l.expires_ms = NOW_MS + 28800000;
    strcpy(l.scope, "user:inference user:profile user:sessions:claude_code");
    ok(oauth_file_update(S(anthropic_file), &l, NOW_MS, out, sizeof out, &out_len) == 0,
       "anthropic update");
    ok(strcmp(out, anthropic_updated) == 0 && out_len == strlen(anthropic_updated),
       "anthropic update: exact text (members kept in order, 2-space indent, newline)");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           strcmp(back.access, "sk-ant-oat01-NEWA") == 0 &&
           strcmp(back.refresh, "sk-ant-ort01-NEWR") == 0 && back.expires_ms == l.expires_ms &&
           strcmp(back.scope, l.scope) == 0,
       "anthropic update re-parses to the new login");

    /* openai: last_refresh, unknown members, order */
    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    strcpy(l.access, "eyJ.NEWA");
    l.access_len = strlen(l.access);
    strcpy(l.refresh, "rt_NEWR");
    l.refresh_len = strlen(l.refresh);
    strcpy(l.id_token, "eyJ.NEWID.x");
    l.id_token_len = strlen(l.id_token);
    ok(oauth_file_update(openai_file, strlen(openai_file), &l, NOW_MS, out, sizeof out, &out_len) ==
           0,
       "openai update");
    ok(strstr(out, "\"last_refresh\": \"" NOW_STAMP "\"") != NULL, "openai: last_refresh now");
    ok(strstr(out, "\"auth_mode\": \"chatgpt\"") && strstr(out, "\"extra\": true") &&
           strstr(out, "\"OPENAI_API_KEY\": null"),
       "openai: unknown members kept");
    ok(before(out, "auth_mode", "OPENAI_API_KEY") && before(out, "OPENAI_API_KEY", "tokens") &&
           before(out, "tokens", "last_refresh") && before(out, "last_refresh", "extra") &&
           before(out, "id_token", "access_token") &&
           before(out, "access_token", "refresh_token") &&
           before(out, "refresh_token", "account_id"),
       "openai: members in their order");
    ok(strstr(out, "SECRET") == NULL, "openai: no old token left");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           strcmp(back.access, "eyJ.NEWA") == 0 && strcmp(back.refresh, "rt_NEWR") == 0 &&
           strcmp(back.id_token, "eyJ.NEWID.x") == 0 && strcmp(back.account_id, "acct-1") == 0,
       "openai update re-parses to the new login");

    /* google: id_token kept when now has none, expiry_date */
    oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err);
    strcpy(l.access, "ya29.NEWA");
    l.access_len = strlen(l.access);
    l.id_token_len = 0;
    l.id_token[0] = '\0';
    l.expires_ms = NOW_MS + 3599000;
    ok(oauth_file_update(google_file, strlen(google_file), &l, NOW_MS, out, sizeof out, &out_len) ==
           0,
       "google update");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           strcmp(back.access, "ya29.NEWA") == 0 && strcmp(back.refresh, "1//0gSECRETR") == 0 &&
           strcmp(back.id_token, id_jwt) == 0 && back.expires_ms == NOW_MS + 3599000,
       "google update re-parses: new access, old refresh and id_token, new expiry");
    ok(before(out, "access_token", "refresh_token") && before(out, "scope", "token_type") &&
           before(out, "id_token", "expiry_date") && out[out_len - 1] == '\n',
       "google: members in their order, final newline");

    /* a file near the limit: compact when indented would not fit */
    {
        static char big[OAUTH_FILE_MAX + 1], out2[OAUTH_FILE_MAX + 1];
        static struct oauth_login nl, nback;
        size_t n = 0, out2_len = 0;
        /* Claude's file with a long compact member of its own: indented,
         * it grows past OAUTH_FILE_MAX; compact, it stays under it */
        n = (size_t)snprintf(big, sizeof big,
                             "{\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-OLDA\","
                             "\"refreshToken\":\"sk-ant-ort01-OLDR\",\"expiresAt\":1},"
                             "\"pad\":[");
        while (n + 8 < OAUTH_FILE_MAX - 200)
            n += (size_t)snprintf(big + n, sizeof big - n, "%s1", big[n - 1] == '[' ? "" : ",");
        n += (size_t)snprintf(big + n, sizeof big - n, "]}");
        ok(oauth_file_parse(big, n, &nl, err, sizeof err) == 0, "a %zu-byte Claude file loads", n);
        strcpy(nl.access, "sk-ant-oat01-NEWA");
        nl.access_len = strlen(nl.access);
        int r = oauth_file_update(big, n, &nl, NOW_MS, out2, sizeof out2, &out2_len);
        ok(r == 0 && out2_len <= OAUTH_FILE_MAX && strchr(out2, '\n') == NULL,
           "its update, too long indented, is written compact (%zu bytes)", out2_len);
        ok(oauth_file_parse(out2, out2_len, &nback, err, sizeof err) == 0 &&
               strcmp(nback.access, "sk-ant-oat01-NEWA") == 0,
           "and re-parses to the new login");
    }

    /* failures */
    memset(out, 'x', sizeof out);
    ok(oauth_file_update(S(anthropic_file), &l, NOW_MS, out, sizeof out, &out_len) == -1,
       "update: a Google login into Claude's file is refused");
    ok(all_zero(out, sizeof out), "update refused: out wiped");
    memset(out, 'x', sizeof out);
    ok(oauth_file_update(google_file, strlen(google_file), &l, NOW_MS, out, 64, &out_len) == -1 &&
           all_zero(out, 64),
       "update: too small a buffer, wiped");
    ok(oauth_file_update(S("not json"), &l, NOW_MS, out, sizeof out, &out_len) == -1,
       "update: orig not JSON");
    l.access[3] = ' ';
    ok(oauth_file_update(google_file, strlen(google_file), &l, NOW_MS, out, sizeof out, &out_len) ==
           -1,
       "update: now's access not a token");
}

/* ---- refresh bodies ---- */

static void test_refresh_body(void)
{
    static struct oauth_login l;
    const char *ct = NULL;

    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    ok(oauth_refresh_body(&l, "9d1c250a-e61b-44d9-88ed-5944d1962f5e", NULL, out, sizeof out,
                          &out_len, &ct) == 0,
       "anthropic body");
    ok(strcmp(out, "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"sk-ant-ort01-SECRETR\","
                   "\"client_id\":\"9d1c250a-e61b-44d9-88ed-5944d1962f5e\",\"scope\":"
                   "\"user:inference user:profile\"}") == 0 &&
           out_len == strlen(out),
       "anthropic body exact: %s", out);
    ok(ct != NULL && strcmp(ct, "application/json") == 0, "anthropic: JSON");

    strcpy(l.refresh, "a\"b\\c");
    l.refresh_len = 5;
    l.scope[0] = '\0';
    ok(oauth_refresh_body(&l, "cid", NULL, out, sizeof out, &out_len, &ct) == 0 &&
           strcmp(out, "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"a\\\"b\\\\c\","
                       "\"client_id\":\"cid\"}") == 0,
       "anthropic body: quotes escaped, no scope when none: %s", out);

    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    ok(oauth_refresh_body(&l, "app_EMoamEEZ73f0CkXaXp7hrann", NULL, out, sizeof out, &out_len,
                          &ct) == 0 &&
           strcmp(out, "{\"client_id\":\"app_EMoamEEZ73f0CkXaXp7hrann\",\"grant_type\":"
                       "\"refresh_token\",\"refresh_token\":\"rt_SECRETR\",\"scope\":\"openid "
                       "profile email\"}") == 0 &&
           strcmp(ct, "application/json") == 0,
       "openai body exact: %s", out);

    oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err);
    strcpy(l.refresh, "1//0gA+b/c=d~");
    l.refresh_len = strlen(l.refresh);
    ok(oauth_refresh_body(&l, "681255809395-x.apps.googleusercontent.com", "GOCSPX-s3cr3t", out,
                          sizeof out, &out_len, &ct) == 0,
       "google body");
    ok(strcmp(out, "grant_type=refresh_token&refresh_token=1%2F%2F0gA%2Bb%2Fc%3Dd%7E&client_id="
                   "681255809395-x.apps.googleusercontent.com&client_secret=GOCSPX-s3cr3t") == 0,
       "google body exact, percent-encoded: %s", out);
    ok(strcmp(ct, "application/x-www-form-urlencoded") == 0, "google: a form");

    memset(out, 'x', 64);
    ok(oauth_refresh_body(&l, "cid", NULL, out, 64, &out_len, &ct) == -1 && all_zero(out, 64),
       "google without a client secret: -1, wiped");
    ok(oauth_refresh_body(&l, NULL, "s", out, sizeof out, &out_len, &ct) == -1, "no client id: -1");
    ok(oauth_refresh_body(&l, "cid", "s", out, 40, &out_len, &ct) == -1 && all_zero(out, 40),
       "google body that does not fit: -1, wiped");
    l.provider = OAUTH_ANTHROPIC;
    ok(oauth_refresh_body(&l, "cid", NULL, out, 40, &out_len, &ct) == -1 && all_zero(out, 40),
       "JSON body that does not fit: -1, wiped");
    l.refresh_len = 0;
    ok(oauth_refresh_body(&l, "cid", NULL, out, sizeof out, &out_len, &ct) == -1,
       "no refresh token: -1");
}

/* ---- token responses ---- */

struct bad_response {
    const char *what, *body, *want;
};

static const struct bad_response bad_responses[] = {
    {"error member",
     "{\"error\":\"invalid_grant\",\"error_description\":\"Refresh token SECRETR is invalid\"}",
     "the endpoint said: invalid_grant"},
    {"error_description alone", "{\"error_description\":\"token SECRETR revoked\"}",
     "the endpoint said: an error"},
    {"error object (Anthropic API)",
     "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"SECRET\"}}",
     "the endpoint said: invalid_request_error"},
    {"error with control bytes", "{\"error\":\"bad\\u0007code\"}", "the endpoint said: bad?code"},
    {"error with an access_token too",
     "{\"error\":\"invalid_scope\",\"access_token\":\"SECRETA\",\"expires_in\":5}",
     "the endpoint said: invalid_scope"},
    {"not JSON", "<html>SECRET</html>", "not JSON"},
    {"a JSON array", "[\"SECRET\"]", "not JSON"},
    {"a key twice", "{\"access_token\":\"SECRETA\",\"access_token\":\"SECRETB\"}", "not JSON"},
    {"no access_token", "{\"refresh_token\":\"SECRETR\",\"expires_in\":3600}", "no access_token"},
    {"access_token null", "{\"access_token\":null}", "no access_token"},
    {"access_token a number", "{\"access_token\":42}", "access_token is not a token"},
    {"access_token with a space", "{\"access_token\":\"SECRET A\"}", "access_token is not a token"},
    {"refresh_token a list", "{\"access_token\":\"SECRETA\",\"refresh_token\":[\"SECRETR\"]}",
     "refresh_token is not a token"},
    {"id_token a number", "{\"access_token\":\"SECRETA\",\"id_token\":1}",
     "id_token is not a token"},
    {"expires_in a string", "{\"access_token\":\"SECRETA\",\"expires_in\":\"3600\"}",
     "expires_in is not a number"},
    {"expires_in 0", "{\"access_token\":\"SECRETA\",\"expires_in\":0}",
     "expires_in is out of range"},
    {"expires_in negative", "{\"access_token\":\"SECRETA\",\"expires_in\":-5}",
     "expires_in is out of range"},
    {"expires_in huge", "{\"access_token\":\"SECRETA\",\"expires_in\":1e300}",
     "expires_in is out of range"},
    {"scope a number", "{\"access_token\":\"SECRETA\",\"expires_in\":1,\"scope\":5}",
     "scope is not a short text"},
};

static void test_token_response(void)
{
    static struct oauth_login l, before_l;

    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    ok(oauth_token_response(
           S("{\"token_type\":\"Bearer\",\"access_token\":\"sk-ant-oat01-N\","
             "\"expires_in\":28800,\"refresh_token\":\"sk-ant-ort01-N\","
             "\"scope\":\"user:inference user:profile\",\"account\":{\"uuid\":"
             "\"u\",\"email_address\":\"a@b\"},\"organization\":{\"uuid\":\"o\"}}"),
           NOW_MS, &l, err, sizeof err) == 0,
       "anthropic response: %s", err);
    ok(strcmp(l.access, "sk-ant-oat01-N") == 0 && l.access_len == 14, "anthropic: new access");
    ok(strcmp(l.refresh, "sk-ant-ort01-N") == 0 && l.refresh_len == 14,
       "anthropic: rotated refresh");
    ok(l.expires_ms == NOW_MS + 28800 * 1000LL, "anthropic: now + expires_in");
    ok(strcmp(l.scope, "user:inference user:profile") == 0, "anthropic: scope");

    oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err);
    ok(oauth_token_response(S("{\"access_token\":\"ya29.N\",\"expires_in\":3599,\"scope\":"
                              "\"openid\",\"token_type\":\"Bearer\",\"id_token\":\"h.p.s\"}"),
                            NOW_MS, &l, err, sizeof err) == 0,
       "google response: %s", err);
    ok(strcmp(l.refresh, "1//0gSECRETR") == 0 && l.refresh_len == 12,
       "google: no refresh_token, the old one kept");
    ok(strcmp(l.id_token, "h.p.s") == 0 && l.id_token_len == 5, "google: new id_token");
    ok(l.expires_ms == NOW_MS + 3599000 && strcmp(l.scope, "openid") == 0, "google: expiry, scope");

    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    char body[4096];
    snprintf(body, sizeof body,
             "{\"id_token\":\"%s\",\"access_token\":\"%s\",\"refresh_token\":"
             "\"rt_N\"}",
             id_jwt, access_jwt);
    l.expires_ms = 1;
    ok(oauth_token_response(body, strlen(body), NOW_MS, &l, err, sizeof err) == 0 &&
           l.expires_ms == ACCESS_EXP * 1000 && strcmp(l.refresh, "rt_N") == 0,
       "openai: no expires_in: the access JWT's exp");
    ok(oauth_token_response(S("{\"access_token\":\"opaque\",\"expires_in\":null}"), NOW_MS, &l, err,
                            sizeof err) == 0 &&
           l.expires_ms == NOW_MS + 3600000 && strcmp(l.refresh, "rt_N") == 0,
       "no expires_in, no JWT: now + 3600 s");
    ok(oauth_token_response(S("{\"access_token\":\"x\",\"expires_in\":1.5}"), NOW_MS, &l, err,
                            sizeof err) == 0 &&
           l.expires_ms == NOW_MS + 1500,
       "a fractional expires_in");

    memset(&l, 0x5a, sizeof l);
    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    before_l = l;
    for (size_t i = 0; i < sizeof bad_responses / sizeof bad_responses[0]; i++) {
        const struct bad_response *b = &bad_responses[i];
        err[0] = '\0';
        ok(oauth_token_response(b->body, strlen(b->body), NOW_MS, &l, err, sizeof err) == -1 &&
               strstr(err, b->want) == err,
           "response %s: \"%s\"", b->what, err);
        ok(memcmp(&l, &before_l, sizeof l) == 0 && strstr(err, SECRET_MARK) == NULL,
           "response %s: login unchanged, no value in the error", b->what);
    }
    char long_error[256];
    snprintf(long_error, sizeof long_error, "{\"error\":\"%0100d\"}", 7);
    ok(oauth_token_response(long_error, strlen(long_error), NOW_MS, &l, err, sizeof err) == -1 &&
           strlen(err) == strlen("the endpoint said: ") + 64,
       "an error code is capped at 64 bytes");
    ok(memcmp(&l, &before_l, sizeof l) == 0, "long error: login unchanged");
}

/* ---- the sandbox's request ---- */

struct grant_case {
    const char *what, *ct, *body;
    size_t cap;
    enum oauth_grant want;
    const char *tok;
};

static const struct grant_case grant_cases[] = {
    {"claude JSON", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"egressd-ph-r1\",\"client_id\":\"c\","
     "\"scope\":\"user:inference\",\"expires_in\":3600}",
     64, OAUTH_GRANT_REFRESH, "egressd-ph-r1"},
    {"JSON, media type in capitals with parameters", " Application/JSON ; charset=utf-8",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"a b\"}", 64, OAUTH_GRANT_REFRESH,
     "a b"},
    {"JSON sniffed", NULL, "  {\"refresh_token\":\"t\",\"grant_type\":\"refresh_token\"}", 64,
     OAUTH_GRANT_REFRESH, "t"},
    {"JSON escapes decoded", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"a\\/b\\u0041\"}", 64,
     OAUTH_GRANT_REFRESH, "a/bA"},
    {"form", "application/x-www-form-urlencoded",
     "grant_type=refresh_token&refresh_token=1%2F%2F0g%2Bx+y%3D&client_id=c", 64,
     OAUTH_GRANT_REFRESH, "1//0g+x y="},
    {"form sniffed, empty pairs skipped", NULL, "&&refresh_token=abc&&grant_type=refresh_token&",
     64, OAUTH_GRANT_REFRESH, "abc"},
    {"form, encoded names", "application/x-www-form-urlencoded",
     "grant%5Ftype=refresh%5ftoken&refresh_token=%41", 64, OAUTH_GRANT_REFRESH, "A"},
    {"token exactly cap-1", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"abcd\"}", 5, OAUTH_GRANT_REFRESH,
     "abcd"},
    {"authorization_code JSON", "application/json",
     "{\"grant_type\":\"authorization_code\",\"code\":\"x\"}", 64, OAUTH_GRANT_OTHER, NULL},
    {"authorization_code form", NULL, "grant_type=authorization_code&code=x&refresh_token=y", 64,
     OAUTH_GRANT_OTHER, NULL},
    {"refresh_token+ (not the grant)", NULL, "grant_type=refresh_token+&refresh_token=y", 64,
     OAUTH_GRANT_OTHER, NULL},
    {"token one over cap-1", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"abcde\"}", 5, OAUTH_GRANT_MALFORMED,
     NULL},
    {"form token over cap-1", NULL, "grant_type=refresh_token&refresh_token=%41%41%41%41%41", 5,
     OAUTH_GRANT_MALFORMED, NULL},
    {"not JSON under a JSON type", "application/json", "grant_type=refresh_token", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"JSON without grant_type", "application/json", "{\"refresh_token\":\"x\"}", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"JSON grant_type a number", "application/json", "{\"grant_type\":1}", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"JSON grant_type empty", "application/json", "{\"grant_type\":\"\"}", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"JSON a key twice", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"a\",\"refresh_token\":\"b\"}", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"JSON refresh without refresh_token", "application/json", "{\"grant_type\":\"refresh_token\"}",
     64, OAUTH_GRANT_MALFORMED, NULL},
    {"JSON refresh_token a number", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":5}", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"JSON refresh_token empty", "application/json",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"\"}", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"JSON array", "application/json", "[{\"grant_type\":\"refresh_token\"}]", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form a key twice", NULL, "grant_type=refresh_token&refresh_token=a&refresh_token=b", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form a key twice, once encoded", NULL,
     "grant_type=refresh_token&refresh%5Ftoken=a&refresh_token=a", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"form a grant_type twice", NULL,
     "grant_type=authorization_code&grant_type=refresh_token&refresh_token=a", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form a bad escape", NULL, "grant_type=refresh_token&refresh_token=%zz", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form a cut escape", NULL, "grant_type=refresh_token&refresh_token=ab%4", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form a bad escape elsewhere", NULL, "grant_type=refresh_token&refresh_token=a&x=%", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form %00 in the token", NULL, "grant_type=refresh_token&refresh_token=a%00b", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"form empty token", NULL, "grant_type=refresh_token&refresh_token=", 64, OAUTH_GRANT_MALFORMED,
     NULL},
    {"form without grant_type", NULL, "refresh_token=a", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"empty body", NULL, "", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"another content type", "text/plain", "grant_type=refresh_token&refresh_token=a", 64,
     OAUTH_GRANT_MALFORMED, NULL},
    {"a type that only starts like JSON", "application/jsonx",
     "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"a\"}", 64, OAUTH_GRANT_MALFORMED, NULL},
    {"cap 0", NULL, "grant_type=refresh_token&refresh_token=a", 0, OAUTH_GRANT_MALFORMED, NULL},
};

static void test_grant_parse(void)
{
    char tok[64];
    size_t tok_len;

    for (size_t i = 0; i < sizeof grant_cases / sizeof grant_cases[0]; i++) {
        const struct grant_case *c = &grant_cases[i];
        memset(tok, 'x', sizeof tok);
        tok_len = 99;
        enum oauth_grant g =
            oauth_grant_parse(c->ct, c->body, strlen(c->body), tok, c->cap, &tok_len);
        if (c->want == OAUTH_GRANT_REFRESH)
            ok(g == c->want && tok_len == strlen(c->tok) && strcmp(tok, c->tok) == 0,
               "grant %s: got %d \"%.*s\"", c->what, g, (int)(g == c->want ? tok_len : 0), tok);
        else
            ok(g == c->want && tok_len == 0 && all_zero(tok, c->cap), "grant %s: got %d", c->what,
               g);
    }
}

/* ---- egressd's answer ---- */

static void test_grant_answer(void)
{
    static struct oauth_login l, got;
    char *real_payload = segment(id_jwt, 1);

    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    ok(oauth_grant_answer(&l, "egressd-ph-a1", "egressd-ph-r1", 28800, out, sizeof out, &out_len) ==
               0 &&
           strcmp(out,
                  "{\"token_type\":\"Bearer\",\"access_token\":\"egressd-ph-a1\",\"expires_in\":"
                  "28800,\"refresh_token\":\"egressd-ph-r1\",\"scope\":\"user:inference "
                  "user:profile\"}") == 0,
       "anthropic answer exact: %s", out);
    got = l;
    ok(oauth_token_response(out, out_len, NOW_MS, &got, err, sizeof err) == 0 &&
           strcmp(got.access, "egressd-ph-a1") == 0 && strcmp(got.refresh, "egressd-ph-r1") == 0 &&
           got.expires_ms == NOW_MS + 28800000 && strcmp(got.scope, l.scope) == 0,
       "anthropic answer re-parses to the placeholders");

    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    ok(oauth_grant_answer(&l, "egressd-ph-a2", "egressd-ph-r2", 864000, out, sizeof out,
                          &out_len) == 0,
       "openai answer");
    ok(strstr(out, "SECRET") == NULL, "openai answer: nothing real (%s)", out);
    got = l;
    ok(oauth_token_response(out, out_len, NOW_MS, &got, err, sizeof err) == 0 &&
           strcmp(got.access, "egressd-ph-a2") == 0 && strcmp(got.refresh, "egressd-ph-r2") == 0 &&
           got.expires_ms == NOW_MS + 864000000,
       "openai answer re-parses to the placeholders");
    char *ph_payload = segment(got.id_token, 1), *ph_sig = segment(got.id_token, 2);
    ok(strcmp(ph_payload, real_payload) == 0 && strcmp(ph_sig, "egressd-placeholder") == 0 &&
           strcmp(got.id_token, id_jwt) != 0,
       "openai answer: id_token a placeholder with the real claims");
    free(ph_payload);
    free(ph_sig);

    oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err);
    ok(oauth_grant_answer(&l, "egressd-ph-a3", NULL, 3599, out, sizeof out, &out_len) == 0,
       "google answer (no refresh placeholder)");
    ok(strstr(out, "refresh_token") == NULL && strstr(out, "SECRET") == NULL &&
           strstr(out, "\"token_type\":\"Bearer\"") != NULL,
       "google answer: no refresh_token, nothing real (%s)", out);
    got = l;
    strcpy(got.refresh, "egressd-ph-r3");
    got.refresh_len = strlen(got.refresh);
    ok(oauth_token_response(out, out_len, NOW_MS, &got, err, sizeof err) == 0 &&
           strcmp(got.access, "egressd-ph-a3") == 0 && strcmp(got.refresh, "egressd-ph-r3") == 0 &&
           got.expires_ms == NOW_MS + 3599000 && strcmp(got.scope, l.scope) == 0,
       "google answer re-parses: placeholder access, the guest's refresh kept");
    ok(got.id_token_len > 0 && strcmp(got.id_token, id_jwt) != 0 &&
           oauth_jwt_exp(got.id_token, got.id_token_len) == oauth_jwt_exp(id_jwt, strlen(id_jwt)),
       "google answer: a placeholder id_token with the same claims");

    memset(out, 'x', 64);
    ok(oauth_grant_answer(&l, "a", NULL, 0, out, 64, &out_len) == -1 && all_zero(out, 64),
       "answer: expires_in 0 refused, wiped");
    ok(oauth_grant_answer(&l, "a b", NULL, 5, out, sizeof out, &out_len) == -1,
       "answer: a placeholder that is not a token");
    ok(oauth_grant_answer(&l, "a", NULL, 5, out, 32, &out_len) == -1 && all_zero(out, 32),
       "answer: does not fit, wiped");
    strcpy(l.id_token, "not-a-jwt");
    l.id_token_len = strlen(l.id_token);
    ok(oauth_grant_answer(&l, "a", NULL, 5, out, sizeof out, &out_len) == -1,
       "answer: an id_token that is not a JWT is never sent");
    l.provider = OAUTH_OPENAI;
    ok(oauth_grant_answer(&l, "a", NULL, 5, out, sizeof out, &out_len) == -1,
       "answer: OpenAI needs a refresh placeholder");
    free(real_payload);
}

/* ---- JWT ---- */

static void test_jwt(void)
{
    char ph[OAUTH_TOKEN_MAX + 1], hdr[128] = "";
    size_t ph_len;
    char *t;

    ok(oauth_jwt_exp(access_jwt, strlen(access_jwt)) == ACCESS_EXP, "exp of a JWT");
    t = jwt("{\"alg\":\"none\"}", "{\"exp\":1.7e9}", "");
    ok(oauth_jwt_exp(t, strlen(t)) == 1700000000, "exp a real, empty signature");
    free(t);
    t = jwt("{\"alg\":\"none\"}", "{\"exp\":\"1700000000\"}", "s");
    ok(oauth_jwt_exp(t, strlen(t)) == 0, "exp a string: 0");
    free(t);
    t = jwt("{\"alg\":\"none\"}", "{\"exp\":-5}", "s");
    ok(oauth_jwt_exp(t, strlen(t)) == 0, "exp negative: 0");
    free(t);
    t = jwt("{\"alg\":\"none\"}", "{\"sub\":\"x\"}", "s");
    ok(oauth_jwt_exp(t, strlen(t)) == 0, "no exp: 0");
    free(t);
    t = jwt("not json", "{\"exp\":5}", "s");
    ok(oauth_jwt_exp(t, strlen(t)) == 0, "header not JSON: 0");
    free(t);
    t = jwt("{}", "[5]", "s");
    ok(oauth_jwt_exp(t, strlen(t)) == 0, "payload not an object: 0");
    free(t);
    ok(oauth_jwt_exp(S("abc")) == 0 && oauth_jwt_exp(S("e30.e30")) == 0 &&
           oauth_jwt_exp(S("e30.e30.s.t")) == 0 && oauth_jwt_exp(S("e30.e30.s+")) == 0 &&
           oauth_jwt_exp(S("e30.e3=.s")) == 0 && oauth_jwt_exp(S(".e30.s")) == 0,
       "not JWTs: 0");

    ok(oauth_jwt_placeholder(id_jwt, strlen(id_jwt), ph, sizeof ph, &ph_len) == 0 &&
           ph_len == strlen(ph),
       "placeholder of a JWT");
    b64url("{\"alg\":\"none\",\"typ\":\"JWT\"}", hdr);
    char *h = segment(ph, 0), *p = segment(ph, 1), *s = segment(ph, 2), *rp = segment(id_jwt, 1);
    ok(strcmp(h, hdr) == 0, "placeholder: header alg none (%s)", h);
    ok(strcmp(p, rp) == 0, "placeholder: the real payload");
    ok(strcmp(s, "egressd-placeholder") == 0 && strstr(ph, "SECRETSIG") == NULL,
       "placeholder: not the real signature");
    ok(oauth_jwt_exp(ph, ph_len) == oauth_jwt_exp(id_jwt, strlen(id_jwt)),
       "placeholder: the same exp");
    free(h);
    free(p);
    free(s);
    free(rp);
    memset(ph, 'x', sizeof ph);
    ok(oauth_jwt_placeholder(S("opaque-token"), ph, sizeof ph, &ph_len) == -1 &&
           all_zero(ph, sizeof ph),
       "placeholder of a non-JWT: -1, wiped");
    ok(oauth_jwt_placeholder(id_jwt, strlen(id_jwt), ph, 40, &ph_len) == -1 && all_zero(ph, 40),
       "placeholder that does not fit: -1, wiped");
}

/* ---- the guest's file ---- */

static void test_file_placeholder(void)
{
    static struct oauth_login l, back;

    oauth_file_parse(S(anthropic_file), &l, err, sizeof err);
    ok(oauth_file_placeholder(&l, "egressd-ph-a1", "egressd-ph-r1", NOW_MS + 1000, NOW_MS, out,
                              sizeof out, &out_len) == 0,
       "anthropic guest file");
    ok(strcmp(out, "{\n  \"claudeAiOauth\": {\n    \"accessToken\": \"egressd-ph-a1\",\n"
                   "    \"refreshToken\": \"egressd-ph-r1\",\n    \"expiresAt\": 1796032801123,\n"
                   "    \"scopes\": [\n      \"user:inference\",\n      \"user:profile\"\n    ]\n"
                   "  }\n}\n") == 0,
       "anthropic guest file exact");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           back.provider == OAUTH_ANTHROPIC && strcmp(back.access, "egressd-ph-a1") == 0 &&
           strcmp(back.refresh, "egressd-ph-r1") == 0 && back.expires_ms == NOW_MS + 1000 &&
           strcmp(back.scope, l.scope) == 0,
       "anthropic guest file parses to the placeholders");

    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    ok(oauth_file_placeholder(&l, "egressd-ph-a2", "egressd-ph-r2", 0, NOW_MS, out, sizeof out,
                              &out_len) == 0,
       "openai guest file");
    ok(strstr(out, "SECRET") == NULL && strstr(out, "\"OPENAI_API_KEY\": null") != NULL &&
           strstr(out, "\"last_refresh\": \"" NOW_STAMP "\"") != NULL,
       "openai guest file: no real token, API key null, last_refresh now");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           back.provider == OAUTH_OPENAI && strcmp(back.access, "egressd-ph-a2") == 0 &&
           strcmp(back.refresh, "egressd-ph-r2") == 0 && strcmp(back.account_id, "acct-1") == 0 &&
           back.expires_ms == 0,
       "openai guest file parses to the placeholders");
    char *bp = segment(back.id_token, 1), *rp = segment(id_jwt, 1);
    ok(strcmp(bp, rp) == 0 && strcmp(back.id_token, id_jwt) != 0,
       "openai guest file: id_token a placeholder with the real claims");
    free(bp);
    free(rp);

    oauth_file_parse(google_file, strlen(google_file), &l, err, sizeof err);
    ok(oauth_file_placeholder(&l, "egressd-ph-a3", "egressd-ph-r3", NOW_MS + 3599000, NOW_MS, out,
                              sizeof out, &out_len) == 0,
       "google guest file");
    ok(strstr(out, "SECRET") == NULL && strstr(out, "\"token_type\": \"Bearer\"") != NULL,
       "google guest file: nothing real, token_type Bearer");
    ok(oauth_file_parse(out, out_len, &back, err, sizeof err) == 0 &&
           back.provider == OAUTH_GOOGLE && strcmp(back.access, "egressd-ph-a3") == 0 &&
           strcmp(back.refresh, "egressd-ph-r3") == 0 && back.expires_ms == NOW_MS + 3599000 &&
           strcmp(back.scope, l.scope) == 0 && back.id_token_len > 0 &&
           strcmp(back.id_token, id_jwt) != 0,
       "google guest file parses to the placeholders");

    memset(out, 'x', 64);
    ok(oauth_file_placeholder(&l, "a", "r", NOW_MS, NOW_MS, out, 64, &out_len) == -1 &&
           all_zero(out, 64),
       "guest file that does not fit: -1, wiped");
    ok(oauth_file_placeholder(&l, "a", "r r", NOW_MS, NOW_MS, out, sizeof out, &out_len) == -1,
       "guest file: a placeholder that is not a token");
    ok(oauth_file_placeholder(&l, "a", "r", -1, NOW_MS, out, sizeof out, &out_len) == -1,
       "guest file: a negative expiry");
    l.provider = OAUTH_OPENAI;
    ok(oauth_file_placeholder(&l, "a", "r", 0, -1, out, sizeof out, &out_len) == -1,
       "guest file: OpenAI with a negative now");
    strcpy(l.id_token, "opaque");
    l.id_token_len = 6;
    ok(oauth_file_placeholder(&l, "a", "r", 0, NOW_MS, out, sizeof out, &out_len) == -1,
       "guest file: OpenAI whose id_token is not a JWT");
}

/* ---- last_refresh stamps ---- */

static void test_stamps(void)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000000Z"},
        {951868799999LL, "2000-02-29T23:59:59.999000Z"},
        {NOW_MS, NOW_STAMP},
        {OAUTH_MS_MAX, "9999-12-31T23:59:59.999000Z"},
    };
    static struct oauth_login l;
    char want[64];

    oauth_file_parse(openai_file, strlen(openai_file), &l, err, sizeof err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(want, sizeof want, "\"last_refresh\": \"%s\"", cases[i].want);
        ok(oauth_file_update(openai_file, strlen(openai_file), &l, cases[i].ms, out, sizeof out,
                             &out_len) == 0 &&
               strstr(out, want) != NULL,
           "last_refresh %s", cases[i].want);
    }
    ok(oauth_file_update(openai_file, strlen(openai_file), &l, OAUTH_MS_MAX + 1, out, sizeof out,
                         &out_len) == -1,
       "last_refresh past 9999: -1");
}

int main(void)
{
    make_jwts();
    make_files();
    test_names();
    test_parse();
    test_parse_bad();
    test_update();
    test_refresh_body();
    test_token_response();
    test_grant_parse();
    test_grant_answer();
    test_jwt();
    test_file_placeholder();
    test_stamps();
    free(id_jwt);
    free(access_jwt);
    return tap_done();
}
