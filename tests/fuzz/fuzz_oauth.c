/*
 * fuzz_oauth.c - the OAuth logins of oauth/: credential files, token
 * responses, the sandbox's refresh requests and JWTs, against properties
 * that hold whatever the bytes.
 *
 * The input's first byte picks a mode; the rest is the case.
 *   0 file: the rest is a credentials file.
 *   1 response: the next byte picks a login (one of three files below),
 *     the rest is a token endpoint's answer.
 *   2 grant: the next byte picks a content type and a cap, the rest is the
 *     sandbox's request body.
 *   3 jwt: the rest is a token.
 *
 * Properties:
 *   1. a parsed file holds tokens (1..OAUTH_TOKEN_MAX visible bytes, NUL
 *      after them), texts within their arrays, an expiry in range; a
 *      failed parse leaves the login's bytes as they were;
 *   2. an error text holds no value: with every visible ASCII byte of every
 *      string value (not key) changed to 'Z', the verdict and the text are
 *      the same (but an endpoint's quoted error code);
 *   3. oauth_file_update(input, the login read) parses back to the same
 *      login; the guest's file and egressd's answer parse back to the
 *      placeholders, and do not change when the real access and refresh
 *      tokens or the id_token's signature do; egressd's refresh body read
 *      as a sandbox request gives back the refresh token;
 *   4. a failed token response leaves the login's bytes as they were; a
 *      good one gives a token, the new refresh token if one came, else the
 *      old one;
 *   5. a REFRESH grant fits its cap with a NUL after it and none in it;
 *      anything else leaves tok wiped; the verdict at a small cap follows
 *      from the one at a big cap; the token encoded again as a form (and as
 *      JSON) parses back to itself;
 *   6. a JWT placeholder keeps the payload segment and the exp, signs with
 *      "egressd-placeholder", and is its own placeholder; a JWT with an exp
 *      always has a placeholder.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "oauth.h"

#define OUT_MAX       (1 << 16)
#define ERR_MAX       256
#define NOW_MS        1796032800123LL
#define PH_ACCESS     "egressd-ph-access"
#define PH_REFRESH    "egressd-ph-refresh"
#define PH_LIFE       3600
#define TOK_BIG       (OAUTH_TOKEN_MAX + 1)
#define SMALL_CAP     64
#define PH_SIG        "egressd-placeholder"
#define ENDPOINT_SAID "the endpoint said:"

enum { MODE_FILE, MODE_RESPONSE, MODE_GRANT, MODE_JWT, MODES };

static char out[OUT_MAX], out2[OUT_MAX], body[OUT_MAX];

/* ------------------------------------------------------------ helpers */

static bool visible(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e;
}

static bool is_token(const char *s, size_t len)
{
    if (len == 0 || len > OAUTH_TOKEN_MAX || s[len] != '\0')
        return false;
    for (size_t i = 0; i < len; i++)
        if (!visible((unsigned char)s[i]))
            return false;
    return true;
}

/* Whether the array s of size bytes holds a NUL-terminated text of 0x20-0x7e. */
static bool is_text(const char *s, size_t size)
{
    size_t n = strnlen(s, size);
    if (n == size)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

static void check_login(const struct oauth_login *l)
{
    CHECK(l->provider == OAUTH_ANTHROPIC || l->provider == OAUTH_OPENAI ||
              l->provider == OAUTH_GOOGLE,
          "provider %d", l->provider);
    CHECK(is_token(l->access, l->access_len), "access not a token (%zu)", l->access_len);
    CHECK(is_token(l->refresh, l->refresh_len), "refresh not a token (%zu)", l->refresh_len);
    CHECK(l->id_token_len == 0 ? l->id_token[0] == '\0' : is_token(l->id_token, l->id_token_len),
          "id_token not a token (%zu)", l->id_token_len);
    CHECK(l->expires_ms >= 0 && l->expires_ms <= OAUTH_MS_MAX, "expires_ms %lld",
          (long long)l->expires_ms);
    CHECK(is_text(l->scope, sizeof l->scope), "scope not a text");
    CHECK(is_text(l->account_id, sizeof l->account_id), "account_id not a text");
}

static bool same_login(const struct oauth_login *a, const struct oauth_login *b)
{
    return a->provider == b->provider && a->access_len == b->access_len &&
           memcmp(a->access, b->access, a->access_len + 1) == 0 &&
           a->refresh_len == b->refresh_len &&
           memcmp(a->refresh, b->refresh, a->refresh_len + 1) == 0 &&
           a->id_token_len == b->id_token_len &&
           memcmp(a->id_token, b->id_token, a->id_token_len + 1) == 0 &&
           a->expires_ms == b->expires_ms && strcmp(a->scope, b->scope) == 0 &&
           strcmp(a->account_id, b->account_id) == 0;
}

/* An error text: NUL-terminated, printable, not empty. */
static void check_err(const char *err)
{
    CHECK(is_text(err, ERR_MAX) && err[0] != '\0', "error text \"%s\"", err);
}

/* A copy of j with every visible ASCII byte of every string value made 'Z'. */
static json_t *blank_values(const json_t *j)
{
    json_t *c = NULL, *v;
    const char *k;
    size_t i;

    if (json_is_object(j)) {
        c = json_object();
        json_object_foreach((json_t *)j, k, v) json_object_set_new(c, k, blank_values(v));
    } else if (json_is_array(j)) {
        c = json_array();
        json_array_foreach(j, i, v) json_array_append_new(c, blank_values(v));
    } else if (json_is_string(j)) {
        size_t n = json_string_length(j);
        char *s = malloc(n + 1);
        memcpy(s, json_string_value(j), n);
        for (size_t b = 0; b < n; b++)
            if (visible((unsigned char)s[b]))
                s[b] = 'Z';
        c = json_stringn(s, n);
        free(s);
    } else {
        c = json_deep_copy(j);
    }
    return c;
}

/* text as JSON, and as JSON with its values blanked, dumped compactly into
 * a and b (OUT_MAX); false when text is not a JSON object with unique keys. */
static bool blanked_pair(const uint8_t *text, size_t len, size_t *alen, size_t *blen)
{
    json_t *j = json_loadb((const char *)text, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *z = j != NULL ? blank_values(j) : NULL;
    bool ok = z != NULL;

    if (ok) {
        *alen = json_dumpb(j, out, OUT_MAX, JSON_COMPACT);
        *blen = json_dumpb(z, out2, OUT_MAX, JSON_COMPACT);
        ok = *alen > 0 && *alen<OUT_MAX && * blen> 0 && *blen < OUT_MAX;
    }
    json_decref(j);
    json_decref(z);
    return ok;
}

/* The payload segment of the JWT t[0..len) (its bytes between the dots)
 * into *p, *n. */
static void payload_of(const char *t, size_t len, const char **p, size_t *n)
{
    const char *d1 = memchr(t, '.', len);
    const char *d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - t));
    *p = d1 + 1;
    *n = (size_t)(d2 - d1 - 1);
}

/* ------------------------------------------------------------ mode 0: files */

/* Property 2 for a file: the verdict and error text do not depend on values. */
static void file_blind(const uint8_t *text, size_t len)
{
    static struct oauth_login a, b;
    char ea[ERR_MAX] = "", eb[ERR_MAX] = "";
    size_t alen, blen;

    if (!blanked_pair(text, len, &alen, &blen) || alen > OAUTH_FILE_MAX || blen > OAUTH_FILE_MAX)
        return;
    int ra = oauth_file_parse(out, alen, &a, ea, sizeof ea);
    int rb = oauth_file_parse(out2, blen, &b, eb, sizeof eb);
    CHECK(ra == rb, "blanking values changed the verdict: %d, %d (%s / %s)", ra, rb, ea, eb);
    CHECK(ra == 0 || strcmp(ea, eb) == 0, "the error text depends on a value: \"%s\" / \"%s\"", ea,
          eb);
}

/* Property 3: the guest's file for l. */
static void guest_file(const struct oauth_login *l)
{
    static struct oauth_login back, other;
    char err[ERR_MAX];
    size_t n, n2;
    char ph[OAUTH_TOKEN_MAX + 1];
    size_t ph_len;
    bool id_ok = l->id_token_len == 0 || l->provider == OAUTH_ANTHROPIC ||
                 oauth_jwt_placeholder(l->id_token, l->id_token_len, ph, sizeof ph, &ph_len) == 0;
    int r = oauth_file_placeholder(l, PH_ACCESS, PH_REFRESH, NOW_MS + 1, NOW_MS, out, OUT_MAX, &n);

    CHECK((r == 0) == id_ok, "guest file %d, id placeholder possible %d", r, id_ok);
    if (r != 0)
        return;
    CHECK(n == strlen(out) && out[n - 1] == '\n', "guest file length or newline");
    CHECK(oauth_file_parse(out, n, &back, err, sizeof err) == 0, "guest file unreadable: %s", err);
    CHECK(back.provider == l->provider && strcmp(back.access, PH_ACCESS) == 0 &&
              strcmp(back.refresh, PH_REFRESH) == 0 && strcmp(back.scope, l->scope) == 0 &&
              (l->provider != OAUTH_OPENAI || strcmp(back.account_id, l->account_id) == 0),
          "guest file does not parse to the placeholders");
    CHECK(l->provider == OAUTH_OPENAI || back.expires_ms == NOW_MS + 1, "guest file expiry");
    if (l->provider != OAUTH_ANTHROPIC)
        CHECK(back.id_token_len == (l->id_token_len > 0 ? ph_len : 0) &&
                  (back.id_token_len == 0 || strcmp(back.id_token, ph) == 0),
              "guest id_token is not the placeholder of the real one");
    /* the real tokens (and the id_token's signature) change nothing */
    other = *l;
    memcpy(other.access, "other-access", sizeof "other-access");
    other.access_len = sizeof "other-access" - 1;
    memcpy(other.refresh, "R", 2);
    other.refresh_len = 1;
    if (other.id_token_len > 0 && other.id_token[other.id_token_len - 1] != '.' &&
        other.id_token_len < OAUTH_TOKEN_MAX) {
        other.id_token[other.id_token_len++] = 'A'; /* the signature, one character longer */
        other.id_token[other.id_token_len] = '\0';
    }
    CHECK(oauth_file_placeholder(&other, PH_ACCESS, PH_REFRESH, NOW_MS + 1, NOW_MS, out2, OUT_MAX,
                                 &n2) == 0 &&
              n2 == n && memcmp(out, out2, n) == 0,
          "the guest file depends on a real token");
}

/* Property 3: egressd's answer to a sandbox refresh for l. */
static void answer(const struct oauth_login *l)
{
    static struct oauth_login got, other;
    char err[ERR_MAX];
    size_t n, n2;
    char ph[OAUTH_TOKEN_MAX + 1];
    size_t ph_len;
    bool id_ok = l->id_token_len == 0 || l->provider == OAUTH_ANTHROPIC ||
                 oauth_jwt_placeholder(l->id_token, l->id_token_len, ph, sizeof ph, &ph_len) == 0;
    int r = oauth_grant_answer(l, PH_ACCESS, PH_REFRESH, PH_LIFE, out, OUT_MAX, &n);

    CHECK((r == 0) == id_ok, "answer %d, id placeholder possible %d", r, id_ok);
    if (r != 0)
        return;
    got = *l;
    CHECK(oauth_token_response(out, n, NOW_MS, &got, err, sizeof err) == 0, "answer unreadable: %s",
          err);
    CHECK(strcmp(got.access, PH_ACCESS) == 0 && got.expires_ms == NOW_MS + PH_LIFE * 1000LL &&
              strcmp(got.scope, l->scope) == 0,
          "answer does not read as the placeholders");
    CHECK(l->provider == OAUTH_GOOGLE ? strcmp(got.refresh, l->refresh) == 0
                                      : strcmp(got.refresh, PH_REFRESH) == 0,
          "answer's refresh token");
    CHECK(l->provider == OAUTH_ANTHROPIC || l->id_token_len == 0 || strcmp(got.id_token, ph) == 0,
          "answer's id_token is not the placeholder");
    other = *l;
    memcpy(other.access, "other-access", sizeof "other-access");
    other.access_len = sizeof "other-access" - 1;
    memcpy(other.refresh, "R", 2);
    other.refresh_len = 1;
    CHECK(oauth_grant_answer(&other, PH_ACCESS, PH_REFRESH, PH_LIFE, out2, OUT_MAX, &n2) == 0 &&
              n2 == n && memcmp(out, out2, n) == 0,
          "the answer depends on a real token");
}

/* Property 3: egressd's refresh body, read as a sandbox's request. */
static void refresh_body(const struct oauth_login *l)
{
    static char tok[TOK_BIG];
    const char *ct = NULL;
    size_t n, tok_len;

    CHECK(oauth_refresh_body(l, "client-id", "client-secret", out, OUT_MAX, &n, &ct) == 0,
          "no refresh body for a parsed login");
    CHECK(n == strlen(out) && ct != NULL, "refresh body length");
    CHECK(oauth_grant_parse(ct, out, n, tok, sizeof tok, &tok_len) == OAUTH_GRANT_REFRESH &&
              tok_len == l->refresh_len && memcmp(tok, l->refresh, tok_len + 1) == 0,
          "the refresh body does not carry the refresh token (%s)", ct);
}

static void mode_file(const uint8_t *data, size_t size)
{
    static struct oauth_login l, before, back;
    char err[ERR_MAX] = "";
    size_t n;

    memset(&l, 0xa5, sizeof l);
    before = l;
    (void)oauth_file_is_json((const char *)data, size);
    if (oauth_file_parse((const char *)data, size, &l, err, sizeof err) != 0) {
        check_err(err);
        CHECK(memcmp(&l, &before, sizeof l) == 0, "a failed parse changed the login");
        file_blind(data, size);
        return;
    }
    check_login(&l);
    CHECK(oauth_file_is_json((const char *)data, size), "a parsed file is not JSON-looking");
    file_blind(data, size);
    if (oauth_file_update((const char *)data, size, &l, NOW_MS, out, OUT_MAX, &n) == 0) {
        CHECK(n == strlen(out) && out[n - 1] == '\n', "update length or newline");
        if (n <= OAUTH_FILE_MAX) {
            CHECK(oauth_file_parse(out, n, &back, err, sizeof err) == 0, "update unreadable: %s",
                  err);
            CHECK(same_login(&l, &back), "update did not parse back to the same login");
        }
    }
    guest_file(&l);
    answer(&l);
    refresh_body(&l);
}

/* ------------------------------------------------------------ mode 1: responses */

static const char *const logins[] = {
    "{\"claudeAiOauth\":{\"accessToken\":\"sk-ant-oat01-a\",\"refreshToken\":\"sk-ant-ort01-r\","
    "\"expiresAt\":1796000000000,\"scopes\":[\"user:inference\"]}}",
    "{\"tokens\":{\"id_token\":\"eyJhbGciOiJub25lIn0.eyJleHAiOjV9.c2ln\",\"access_token\":"
    "\"eyJhbGciOiJub25lIn0.eyJleHAiOjE3OTYwMzY0MDB9.c2ln\",\"refresh_token\":\"rt_r\","
    "\"account_id\":\"acct\"}}",
    "{\"access_token\":\"ya29.a\",\"refresh_token\":\"1//0g-r\",\"scope\":\"openid\","
    "\"expiry_date\":1796000000000}",
};

static void mode_response(struct input *in)
{
    static struct oauth_login l, before, z;
    char err[ERR_MAX] = "", ez[ERR_MAX] = "";
    const char *login = logins[take(in) % (sizeof logins / sizeof logins[0])];
    const char *text = (const char *)in->p;
    size_t alen, blen;

    CHECK(oauth_file_parse(login, strlen(login), &l, err, sizeof err) == 0, "sample login");
    before = l;
    if (oauth_token_response(text, in->n, NOW_MS, &l, err, sizeof err) != 0) {
        check_err(err);
        CHECK(memcmp(&l, &before, sizeof l) == 0, "a failed response changed the login");
    } else {
        check_login(&l);
        json_t *j = json_loadb(text, in->n, 0, NULL);
        const json_t *rt = json_object_get(j, "refresh_token");
        if (json_is_string(rt) && json_string_length(rt) > 0)
            CHECK(strcmp(l.refresh, json_string_value(rt)) == 0, "the new refresh token not taken");
        else
            CHECK(strcmp(l.refresh, before.refresh) == 0, "the old refresh token not kept");
        json_decref(j);
    }
    /* property 2 */
    l = before;
    if (!blanked_pair(in->p, in->n, &alen, &blen))
        return;
    z = before;
    int ra = oauth_token_response(out, alen, NOW_MS, &l, err, sizeof err);
    int rb = oauth_token_response(out2, blen, NOW_MS, &z, ez, sizeof ez);
    CHECK(ra == rb, "blanking values changed the verdict: %s / %s", err, ez);
    CHECK(ra == 0 || strncmp(err, ENDPOINT_SAID, strlen(ENDPOINT_SAID)) == 0 ||
              strcmp(err, ez) == 0,
          "a response's error text depends on a value: \"%s\" / \"%s\"", err, ez);
}

/* ------------------------------------------------------------ mode 2: grants */

static const char *const content_types[] = {
    NULL,
    "application/json",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=UTF-8",
    "text/plain",
};

/* Check the outcome of one grant parse at cap. */
static void check_grant(enum oauth_grant g, const char *tok, size_t cap, size_t tok_len)
{
    if (g == OAUTH_GRANT_REFRESH) {
        CHECK(tok_len > 0 && tok_len < cap && tok[tok_len] == '\0' && strlen(tok) == tok_len,
              "a REFRESH token of %zu at cap %zu", tok_len, cap);
        return;
    }
    CHECK(g == OAUTH_GRANT_OTHER || g == OAUTH_GRANT_MALFORMED, "grant %d", g);
    CHECK(tok_len == 0, "tok_len %zu without REFRESH", tok_len);
    for (size_t i = 0; i < cap; i++)
        CHECK(tok[i] == 0, "tok not wiped at %zu", i);
}

/* tok encoded as a form value (every byte but alphanumerics as %XX) after
 * prefix, into body; its length. */
static size_t form_encode(const char *prefix, const char *tok, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(prefix);

    memcpy(body, prefix, n);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)tok[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
            body[n++] = (char)c;
        } else {
            body[n++] = '%';
            body[n++] = hex[c >> 4];
            body[n++] = hex[c & 15];
        }
    }
    return n;
}

/* Property 5: the token, encoded again, reads back as itself. */
static void grant_round_trip(const char *tok, size_t len)
{
    static char again[TOK_BIG];
    size_t again_len, n = form_encode("client_id=x&refresh_token=", tok, len);

    memcpy(body + n, "&grant_type=refresh_token", sizeof "&grant_type=refresh_token");
    n += sizeof "&grant_type=refresh_token" - 1;
    CHECK(oauth_grant_parse(content_types[2], body, n, again, sizeof again, &again_len) ==
                  OAUTH_GRANT_REFRESH &&
              again_len == len && memcmp(again, tok, len) == 0,
          "a token encoded as a form again reads otherwise");
    json_t *j = json_pack("{s:s, s:s%}", "grant_type", "refresh_token", "refresh_token", tok, len);
    if (j == NULL) /* not UTF-8: no JSON string holds it */
        return;
    n = json_dumpb(j, body, OUT_MAX, JSON_COMPACT);
    json_decref(j);
    CHECK(n > 0 && n < OUT_MAX, "dump");
    CHECK(oauth_grant_parse(content_types[1], body, n, again, sizeof again, &again_len) ==
                  OAUTH_GRANT_REFRESH &&
              again_len == len && memcmp(again, tok, len) == 0,
          "a token written as JSON again reads otherwise");
}

static void mode_grant(struct input *in)
{
    static char big[TOK_BIG], small[SMALL_CAP];
    uint8_t pick = take(in);
    const char *ct = content_types[pick % (sizeof content_types / sizeof content_types[0])];
    size_t cap = (size_t)(pick >> 3) % SMALL_CAP, big_len, small_len;
    const char *text = (const char *)in->p;

    memset(big, 0x77, sizeof big);
    memset(small, 0x77, sizeof small);
    enum oauth_grant gb = oauth_grant_parse(ct, text, in->n, big, sizeof big, &big_len);
    enum oauth_grant gs = oauth_grant_parse(ct, text, in->n, small, cap, &small_len);
    check_grant(gb, big, sizeof big, big_len);
    check_grant(gs, small, cap, small_len);
    if (gb == OAUTH_GRANT_REFRESH && big_len < cap)
        CHECK(gs == OAUTH_GRANT_REFRESH && small_len == big_len && memcmp(small, big, big_len) == 0,
              "a token that fits a small cap is not read there");
    else if (gb == OAUTH_GRANT_REFRESH)
        CHECK(gs == OAUTH_GRANT_MALFORMED, "a token over the small cap: %d", gs);
    else
        CHECK(gs == gb, "small cap %d, big cap %d", gs, gb);
    if (gb == OAUTH_GRANT_REFRESH)
        grant_round_trip(big, big_len);
}

/* ------------------------------------------------------------ mode 3: JWTs */

static void mode_jwt(struct input *in)
{
    static char ph[TOK_BIG], ph2[TOK_BIG];
    const char *tok = (const char *)in->p;
    size_t n, n2;
    int64_t exp = oauth_jwt_exp(tok, in->n);
    int r = oauth_jwt_placeholder(tok, in->n, ph, sizeof ph, &n);

    CHECK(exp >= 0 && exp <= OAUTH_MS_MAX / 1000, "exp %lld", (long long)exp);
    if (r != 0) {
        CHECK(exp == 0 || in->n > OAUTH_TOKEN_MAX - 64, "a JWT with an exp has no placeholder");
        return;
    }
    const char *p1, *p2;
    size_t l1, l2;
    CHECK(n == strlen(ph) && n < sizeof ph, "placeholder length");
    payload_of(ph, n, &p1, &l1);
    payload_of(tok, in->n, &p2, &l2); /* tok is a JWT: it has its two dots */
    CHECK(l1 == l2 && memcmp(p1, p2, l1) == 0, "the payload segment changed");
    CHECK(n > strlen(PH_SIG) && strcmp(ph + n - strlen(PH_SIG), PH_SIG) == 0 &&
              ph[n - strlen(PH_SIG) - 1] == '.',
          "the placeholder's signature");
    CHECK(oauth_jwt_exp(ph, n) == exp, "the placeholder's exp differs");
    CHECK(oauth_jwt_placeholder(ph, n, ph2, sizeof ph2, &n2) == 0 && n2 == n &&
              memcmp(ph, ph2, n) == 0,
          "a placeholder is not its own placeholder");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size};

    switch (take(&in) % MODES) {
    case MODE_FILE: mode_file(in.p, in.n); break;
    case MODE_RESPONSE: mode_response(&in); break;
    case MODE_GRANT: mode_grant(&in); break;
    case MODE_JWT: mode_jwt(&in); break;
    }
    return 0;
}
