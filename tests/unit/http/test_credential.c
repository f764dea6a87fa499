/*
 * test_credential.c - credential injection in a request head
 * (http_cred_apply) and the base64 it uses: each kind substituted in its
 * shape and nowhere else, the client's own tokens left alone, placeholders
 * of other hosts and placeholders out of place refused with the right
 * index, a head that does not fit left as it was, and the bytes
 * http_format_request then writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "tap.h"

static const struct http_limits lim = {8192, 65536, 100};

#define PH_KEY    "egressd-ph-anthropic-3f9c0a1b2c3d4e5f"
#define PH_BEARER "egressd-ph-openai-00112233445566778899"
#define PH_BASIC  "egressd-ph-basic-0123456789abcdef"
#define PH_GOOG   "egressd-ph-google-aabbccddeeff0011"
#define PH_OTHER  "egressd-ph-other-fedcba9876543210"

#define SEC_KEY    "sk-ant-real-key"
#define SEC_BEARER "sk-openai-real"
#define SEC_BASIC  "sk-basic-secret"
#define SEC_GOOG   "AIza-real-google"

static struct http_request req;
static char *head; /* the bytes req was parsed from (a heap copy for ASan) */
static char scratch[4096];

static bool parse(const char *text)
{
    size_t n = strlen(text);

    free(head);
    head = malloc(n);
    memcpy(head, text, n);
    return http_parse_request(head, n, &lim, &req) == HTTP_R_OK;
}

static struct http_view V(const char *s) {
    return (struct http_view){s, strlen(s)};
}

static struct http_cred
bound(enum http_cred_kind kind, const char *field, const char *ph, const char *secret)
{
    return (struct http_cred){kind, field, V(ph), V(secret), true};
}

/* Its secret is a NULL pointer with a length: reading it would crash. */
static struct http_cred unbound(enum http_cred_kind kind, const char *field, const char *ph)
{
    return (struct http_cred){kind, field, V(ph), {NULL, 12}, false};
}

static bool view_eq(struct http_view v, const char *s)
{
    return v.len == strlen(s) && memcmp(v.p, s, v.len) == 0;
}

/* The value of the first field called `name`. */
static struct http_view field(const char *name)
{
    const struct http_header *h = http_find(req.headers, req.n_headers, name);
    return h ? h->value : (struct http_view){"(absent)", 8};
}

static bool in_scratch(struct http_view v)
{
    return v.p >= scratch && v.p + v.len <= scratch + sizeof(scratch);
}

struct run {
    enum http_cred_result r;
    size_t which;
    uint32_t used;
};

static struct run apply(const struct http_cred *creds, size_t n)
{
    struct run x;
    x.r = http_cred_apply(&req, creds, n, scratch, sizeof(scratch), &x.which, &x.used);
    return x;
}

static const char *name(enum http_cred_result r)
{
    static const char *const names[] = {"NONE",      "DONE",    "FOREIGN",
                                        "MISPLACED", "NO_ROOM", "BAD_CRED"};
    return (size_t)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

/* Check a run's result, index and mask; say what came instead. */
static void expect(struct run x, enum http_cred_result r, size_t which, uint32_t used,
                   const char *what)
{
    if (!ok(x.r == r && x.which == which && x.used == used, "%s: %s", what, name(r)))
        diag("got %s which %zu used %#x", name(x.r), x.which, (unsigned)x.used);
}

/* ---- base64 ---- */

/* s with control bytes as \xNN, for a one-line description. */
static const char *shown(const char *s)
{
    static char out[256];
    size_t o = 0;

    for (; *s && o + 5 < sizeof(out); s++)
        o += (size_t)((unsigned char)*s < 0x20 ? snprintf(out + o, 5, "\\x%02x", *s)
                                               : snprintf(out + o, 2, "%c", *s));
    out[o] = '\0';
    return out;
}

/* The allocating pair (sandboxctl's whole files): every byte value at
 * every length up to 256 comes back as it went, each encoding is what the
 * buffer form writes, and what the strict decoder refuses they refuse. */
static void test_base64_new(void)
{
    uint8_t all[256], *back;
    char buf[400];
    size_t len = 1;
    bool same = true;

    for (size_t i = 0; i < sizeof(all); i++)
        all[i] = (uint8_t)(255 - i);
    for (size_t n = 0; n <= sizeof(all) && same; n++) {
        char *enc = http_base64_encode_new(all, n);
        size_t e = http_base64_encode(all, n, buf, sizeof(buf));
        back = http_base64_decode_new(enc, strlen(enc), &len);
        same = strlen(enc) == e && memcmp(enc, buf, e) == 0 && back != NULL && len == n &&
               memcmp(back, all, n) == 0 && back[n] == '\0';
        if (!same)
            diag("length %zu", n);
        free(enc);
        free(back);
    }
    ok(same, "base64: the allocating pair, every byte at every length to 256, both ways");
    ok(http_base64_decode_new("Zm9v\n", 5, &len) == NULL &&
           http_base64_decode_new("Zh==", 4, &len) == NULL &&
           http_base64_decode_new("Zm9", 3, &len) == NULL,
       "base64: the allocating decoder refuses what the strict one does");
}

static void test_base64(void)
{
    static const char *const vec[][2] = {
        {"f", "Zg=="},        {"fo", "Zm8="},        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
    };
    static const char *const bad[] = {
        "Zg=",      "Zg",   "Zh==", "Zm9=", "Zg==Zg==", "Zm 9v", "Zm9v\n",
        "Zm9v====", "====", "Z===", "Zm-v", "Zm_v",     "Zm9v=", "Z=g=",
    };
    char out[16];
    uint8_t dec[16];
    bool all = true;

    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        size_t n = strlen(vec[i][0]), e = strlen(vec[i][1]);
        size_t got = http_base64_encode((const uint8_t *)vec[i][0], n, out, sizeof(out));
        size_t d = http_base64_decode(vec[i][1], e, dec, sizeof(dec));
        all &= got == e && memcmp(out, vec[i][1], e) == 0 && d == n &&
               memcmp(dec, vec[i][0], n) == 0 && http_base64_decoded_len(vec[i][1], e) == n;
        if (!all)
            diag("vector %s", vec[i][0]);
    }
    ok(all, "base64: the RFC 4648 section 10 vectors, both ways");
    ok(http_base64_decode("", 0, dec, 0) == 0 && http_base64_decoded_len("", 0) == 0,
       "base64: empty decodes to nothing");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ok(http_base64_decoded_len(bad[i], strlen(bad[i])) == HTTP_BASE64_BAD &&
               http_base64_decode(bad[i], strlen(bad[i]), dec, sizeof(dec)) == HTTP_BASE64_BAD,
           "base64: \"%s\" is refused", shown(bad[i]));
    ok(http_base64_encode((const uint8_t *)"foob", 4, out, 7) == 0 &&
           http_base64_encode((const uint8_t *)"foob", 4, out, 8) == 8,
       "base64: encode needs 4 * ceil(n / 3) bytes of room, and fits in exactly that");
    ok(http_base64_decode("Zm9vYg==", 8, dec, 3) == HTTP_BASE64_BAD &&
           http_base64_decode("Zm9vYg==", 8, dec, 4) == 4,
       "base64: decode needs the decoded length of room");
    test_base64_new();
}

/* ---- each kind ---- */

static void test_x_api_key(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY)};

    parse("POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.com\r\nX-Api-Key: " PH_KEY
          "\r\nContent-Length: 2\r\n\r\n");
    struct http_view host = field("host"), len = field("content-length");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "x-api-key: the placeholder, field in any case");
    ok(view_eq(field("x-api-key"), SEC_KEY) && in_scratch(field("x-api-key")),
       "x-api-key: the value is the secret, in scratch");
    ok(field("host").p == host.p && field("content-length").p == len.p &&
           view_eq(req.path, "/v1/messages"),
       "x-api-key: the other fields are the same views as before");

    parse("GET / HTTP/1.1\r\nx-api-key: sk-ant-the-clients-own\r\n\r\n");
    struct http_view own = field("x-api-key");
    expect(apply(c, 1), HTTP_CRED_NONE, 1, 0, "x-api-key: the client's own key");
    ok(field("x-api-key").p == own.p && view_eq(own, "sk-ant-the-clients-own"),
       "x-api-key: the client's own key passes untouched");

    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "x-api-key: two fields with the placeholder");
    ok(view_eq(req.headers[0].value, SEC_KEY) && view_eq(req.headers[1].value, SEC_KEY),
       "x-api-key: both are substituted");
}

static void test_header(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_HEADER, "x-goog-api-key", PH_GOOG, SEC_GOOG)};

    parse("GET /v1 HTTP/1.1\r\nX-GOOG-API-KEY:   " PH_GOOG "  \r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "header: a custom field, blanks around");
    ok(view_eq(field("x-goog-api-key"), SEC_GOOG), "header: the value is the secret");

    parse("GET /v1 HTTP/1.1\r\nx-goog-api-key: key=" PH_GOOG "\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0, "header: the placeholder as part of a value");
}

static void test_bearer(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_BEARER, "authorization", PH_BEARER, SEC_BEARER)};
    static const char *const shapes[] = {"Bearer " PH_BEARER, "bearer " PH_BEARER,
                                         "BEARER   " PH_BEARER, "bEaReR " PH_BEARER};
    static const char *const wrong[] = {
        "Bearer" PH_BEARER,
        "Bearer\t" PH_BEARER,
        "Token " PH_BEARER,
        "Bearer " PH_BEARER " x",
        "Bearer x" PH_BEARER,
        PH_BEARER,
        "Bearer " PH_BEARER PH_BEARER,
        "Bearers " PH_BEARER,
    };
    char text[512];

    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n", shapes[i]);
        parse(text);
        expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, shapes[i]);
        ok(view_eq(field("authorization"), "Bearer " SEC_BEARER),
           "bearer: \"%s\" becomes \"Bearer \" + the secret", shapes[i]);
    }
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n", wrong[i]);
        parse(text);
        struct http_view before = field("authorization");
        expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0, wrong[i]);
        ok(field("authorization").p == before.p, "bearer: \"%s\" is left alone", wrong[i]);
    }
    parse("GET / HTTP/1.1\r\nAuthorization: Bearer sk-the-clients-own\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_NONE, 1, 0, "bearer: the client's own token");
    ok(view_eq(field("authorization"), "Bearer sk-the-clients-own"),
       "bearer: the client's own token passes untouched");
}

/* "Basic " + the base64 of s. */
static const char *basic_of(const char *s, size_t n)
{
    static char v[8192];
    memcpy(v, "Basic ", 6);
    v[6 + http_base64_encode((const uint8_t *)s, n, v + 6, sizeof(v) - 7)] = '\0';
    return v;
}

/* Is v "Basic " + base64 of exactly want? */
static bool basic_is(struct http_view v, const char *want, size_t n)
{
    static uint8_t d[8192];
    size_t got;

    if (v.len < 6 || memcmp(v.p, "Basic ", 6) != 0)
        return false;
    got = http_base64_decode(v.p + 6, v.len - 6, d, sizeof(d));
    return got == n && memcmp(d, want, n) == 0;
}

static void test_basic(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_BASIC, "authorization", PH_BASIC, SEC_BASIC)};
    char text[2048], plain[512];
    bool all = true;

    parse("GET / HTTP/1.1\r\nAuthorization: Basic "
          "YWxpY2U6ZWdyZXNzZC1waC1iYXNpYy0wMTIzNDU2Nzg5YWJjZGVm\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "basic: alice:<placeholder>");
    ok(view_eq(field("authorization"), "Basic YWxpY2U6c2stYmFzaWMtc2VjcmV0"),
       "basic: becomes exactly Basic base64(alice:secret)");

    parse("GET / HTTP/1.1\r\nAuthorization: bAsIc  "
          "Ym9iOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg=="
          "\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "basic: scheme in any case, two SP");
    ok(view_eq(field("authorization"), "Basic Ym9iOnNrLWJhc2ljLXNlY3JldA=="),
       "basic: becomes exactly Basic base64(bob:secret)");

    /* every length of user and secret modulo 3, and a user of arbitrary bytes */
    for (size_t ul = 0; ul <= 7; ul++) {
        for (size_t sl = 1; sl <= 7; sl++) {
            char user[8] = "\x01\xff"
                           "ab=+/",
                 sec[8] = "S:e c\x7f!";
            struct http_cred k = c[0];
            int np = snprintf(plain, sizeof(plain), "%.*s:%s", (int)ul, user, PH_BASIC);

            k.secret = (struct http_view){sec, sl};
            snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n",
                     basic_of(plain, (size_t)np));
            parse(text);
            struct run x = apply(&k, 1);
            snprintf(plain, sizeof(plain), "%.*s:%.*s", (int)ul, user, (int)sl, sec);
            all &= x.r == HTTP_CRED_DONE && basic_is(field("authorization"), plain, ul + 1 + sl) &&
                   memcmp(field("authorization").p, basic_of(plain, ul + 1 + sl),
                          field("authorization").len) == 0;
            if (!all) {
                diag("user %zu secret %zu: %s", ul, sl, name(x.r));
                break;
            }
        }
    }
    ok(all, "basic: users of 0..7 bytes (any bytes, kept as they are), secrets of 1..7 "
            "(':' and control bytes too): base64(user:secret), canonical");

    parse("GET / HTTP/1.1\r\nAuthorization: Basic OmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg=="
          "\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_DONE, 1, 1, "basic: an empty user");
    ok(view_eq(field("authorization"), "Basic OnNrLWJhc2ljLXNlY3JldA=="),
       "basic: an empty user stays empty");

    /* RFC 7617 section 2: the user ends at the first ':' */
    parse("GET / HTTP/1.1\r\nAuthorization: Basic "
          "YTpiOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg==\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0,
           "basic: a:b:<placeholder> (the password is b:<placeholder>)");
    parse("GET / HTTP/1.1\r\nAuthorization: Basic "
          "ZWdyZXNzZC1waC1iYXNpYy0wMTIzNDU2Nzg5YWJjZGVmOng=\r\n\r\n");
    expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0, "basic: the placeholder as the user name");
    int n = snprintf(plain, sizeof(plain), "%s:%s", PH_BASIC, PH_BASIC);
    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n",
             basic_of(plain, (size_t)n));
    parse(text);
    expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0, "basic: the placeholder as user and password");
    n = snprintf(plain, sizeof(plain), "%s", PH_BASIC);
    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n",
             basic_of(plain, (size_t)n));
    parse(text);
    expect(apply(c, 1), HTTP_CRED_MISPLACED, 0, 0, "basic: the placeholder with no ':'");

    parse("GET / HTTP/1.1\r\nAuthorization: Basic YWxpY2U6cGE6c3M=\r\n\r\n");
    struct http_view own = field("authorization");
    expect(apply(c, 1), HTTP_CRED_NONE, 1, 0, "basic: the client's own alice:pa:ss");
    ok(field("authorization").p == own.p, "basic: the client's own credentials pass untouched");
}

/* Values that are not strict base64 are not decoded, and so not substituted
 * (nor searched but as they are: see http.h). */
static void test_basic_bad_base64(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_BASIC, "authorization", PH_BASIC, SEC_BASIC)};
    static const char *const bad[] = {
        /* bob:<placeholder> without its padding, with a blank inside, with HT
         * after the scheme, with a byte outside the alphabet, with pad bits set */
        "Basic Ym9iOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg",
        "Basic Ym9iOmVncmVzc2Qt cGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg==",
        "Basic\tYm9iOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg==",
        "Basic Ym9iOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZg=!",
        "Basic Ym9iOmVncmVzc2QtcGgtYmFzaWMtMDEyMzQ1Njc4OWFiY2RlZh==",
    };
    char text[512];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n", bad[i]);
        parse(text);
        struct http_view before = field("authorization");
        expect(apply(c, 1), HTTP_CRED_NONE, 1, 0, bad[i]);
        ok(field("authorization").p == before.p, "basic: not strict base64 is left alone");
    }
}

/* ---- placeholders where they do not belong ---- */

static void test_foreign(void)
{
    struct http_cred c[] = {
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        unbound(HTTP_CRED_BEARER, "authorization", PH_BEARER),
        unbound(HTTP_CRED_BASIC, "authorization", PH_BASIC),
        bound(HTTP_CRED_HEADER, "x-goog-api-key", PH_GOOG, SEC_GOOG),
    };
    char text[512], plain[128];

    parse("GET / HTTP/1.1\r\nAuthorization: Bearer " PH_BEARER "\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 1, 0, "foreign: an unbound bearer in its own shape");
    ok(view_eq(field("authorization"), "Bearer " PH_BEARER), "foreign: the head is unchanged");

    parse("GET /v1?key=" PH_BEARER " HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    struct http_view key = field("x-api-key");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 1, 0, "foreign: in the target's query");
    ok(field("x-api-key").p == key.p, "foreign: the bound key next to it is not substituted");

    parse("GET http://api.example.com/" PH_BASIC " HTTP/1.1\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 2, 0, "foreign: in an absolute-form target's path");

    snprintf(plain, sizeof(plain), "svc:%s", PH_BEARER);
    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nX-Upstream: %s\r\n\r\n",
             basic_of(plain, strlen(plain)));
    parse(text);
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 1, 0, "foreign: inside a Basic value, in any field");

    parse("GET / HTTP/1.1\r\nX-Note: see " PH_BASIC " and " PH_BEARER "\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 1, 0, "foreign: two in a value, the lowest index");

    parse("GET / HTTP/1.1\r\n" PH_BASIC ": 1\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 2, 0, "foreign: as a field name");

    parse(PH_BASIC " / HTTP/1.1\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 2, 0, "foreign: as the method");

    parse("GET / HTTP/1.1\r\nX-Other: " PH_KEY "\r\nX-Note: " PH_BASIC "\r\n\r\n");
    expect(apply(c, 4), HTTP_CRED_FOREIGN, 2, 0, "foreign wins over misplaced");

    struct http_cred same[] = {
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        unbound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY),
    };
    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(same, 2), HTTP_CRED_FOREIGN, 1, 0,
           "foreign: a placeholder that is also an unbound credential's");
}

static void test_misplaced(void)
{
    struct http_cred c[] = {
        unbound(HTTP_CRED_HEADER, "x-other", PH_OTHER),
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        bound(HTTP_CRED_BEARER, "authorization", PH_BEARER, SEC_BEARER),
        bound(HTTP_CRED_BASIC, "authorization", PH_BASIC, SEC_BASIC),
    };
    static const struct {
        const char *what, *head;
        size_t which;
    } cases[] = {
        {"the key in another field", "X-Other-Key: " PH_KEY, 1},
        {"the key as a bearer token", "Authorization: Bearer " PH_KEY, 1},
        {"the bearer in x-api-key", "x-api-key: Bearer " PH_BEARER, 2},
        {"the bearer token bare in Authorization", "Authorization: " PH_BEARER, 2},
        {"the bearer in a custom field", "X-Forward-Auth: Bearer " PH_BEARER, 2},
        {"the bearer under another scheme", "Authorization: Token " PH_BEARER, 2},
        {"the basic placeholder as a bearer", "Authorization: Bearer " PH_BASIC, 3},
        {"the key with a prefix", "x-api-key: sk-" PH_KEY, 1},
        {"the key in a list", "x-api-key: " PH_KEY ", " PH_KEY, 1},
        {"the key twice in a row", "x-api-key: " PH_KEY PH_KEY, 1},
        {"the key in the Host field", "Host: " PH_KEY, 1},
        {"the bearer in Proxy-Authorization", "Proxy-Authorization: Bearer " PH_BEARER, 2},
    };
    char text[512];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\n%s\r\n\r\n", cases[i].head);
        parse(text);
        expect(apply(c, 4), HTTP_CRED_MISPLACED, cases[i].which, 0, cases[i].what);
    }
    parse("GET /v1/models?api_key=" PH_KEY " HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    struct http_view key = field("x-api-key");
    expect(apply(c, 4), HTTP_CRED_MISPLACED, 1, 0, "the key in the target's query, bound host");
    ok(field("x-api-key").p == key.p, "misplaced: the head is unchanged");

    struct http_cred twice[] = {
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, "another-secret"),
    };
    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(twice, 2), HTTP_CRED_MISPLACED, 1, 0,
           "two bound credentials with one placeholder: the second is misplaced");
}

/* Decoded Basic bytes are searched a window at a time: a placeholder across
 * a window's edge, anywhere in a long user name, is found. */
static void test_long_basic(void)
{
    struct http_cred c[] = {
        unbound(HTTP_CRED_HEADER, "x-other", PH_OTHER),
        bound(HTTP_CRED_BASIC, "authorization", PH_BASIC, SEC_BASIC),
    };
    static char plain[4096], text[8192];
    size_t ph = strlen(PH_OTHER), missed = 0, n;

    for (size_t at = 0; at + ph + 1 <= 2400; at += 7) {
        memset(plain, 'u', 2400);
        memcpy(plain + at, PH_OTHER, ph);
        n = 2400 + (size_t)snprintf(plain + 2400, 64, ":%s", PH_BASIC);
        snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n",
                 basic_of(plain, n));
        parse(text);
        struct run x = apply(c, 2);
        if (x.r != HTTP_CRED_FOREIGN || x.which != 0) {
            diag("at %zu: %s", at, name(x.r));
            missed++;
        }
    }
    ok(missed == 0, "long basic: a foreign placeholder at every 7th offset of a 2400-byte user");

    memset(plain, 'u', 2400);
    n = 2400 + (size_t)snprintf(plain + 2400, 64, ":%s", PH_BASIC);
    snprintf(text, sizeof(text), "GET / HTTP/1.1\r\nAuthorization: %s\r\n\r\n", basic_of(plain, n));
    parse(text);
    expect(apply(c, 2), HTTP_CRED_DONE, 2, 2, "long basic: a 2400-byte user");
    memcpy(plain + 2401, SEC_BASIC, strlen(SEC_BASIC));
    ok(basic_is(field("authorization"), plain, 2401 + strlen(SEC_BASIC)),
       "long basic: the user is kept, the secret put after it");
}

/* ---- room, several at once, and the head written on ---- */

static void test_no_room(void)
{
    struct http_cred c[] = {
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        bound(HTTP_CRED_BEARER, "authorization", PH_BEARER, SEC_BEARER),
    };
    static struct http_request copy;
    size_t which, need = strlen(SEC_KEY) + strlen("Bearer " SEC_BEARER);
    uint32_t used;
    char small[128];

    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\nAuthorization: Bearer " PH_BEARER "\r\n\r\n");
    memcpy(&copy, &req, sizeof(req));
    memset(small, 0x5a, sizeof(small));
    ok(http_cred_apply(&req, c, 2, small, need - 1, &which, &used) == HTTP_CRED_NO_ROOM &&
           used == 0 && which == 2,
       "no room: one byte short of both values");
    ok(memcmp(&copy, &req, sizeof(req)) == 0, "no room: the request is exactly as it was");
    bool clean = true;
    for (size_t i = 0; i < sizeof(small); i++)
        clean &= small[i] == 0x5a;
    ok(clean, "no room: scratch is not written");
    ok(http_cred_apply(&req, c, 2, small, need, &which, &used) == HTTP_CRED_DONE && used == 3,
       "no room: with exactly the room it fits");
    ok(req.headers[0].value.p == small && req.headers[1].value.p == small + strlen(SEC_KEY) &&
           small[need] == 0x5a,
       "the values lie one after another from scratch's start, and no further");
}

static void test_bad_cred(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY)}, k;
    static struct http_cred many[HTTP_CRED_MAX + 1];
    struct {
        const char *what;
        const char *field, *ph, *secret;
    } cases[] = {
        {"a placeholder of 15 bytes", "x-api-key", "egressd-ph-1234", SEC_KEY},
        {"a placeholder of 129 bytes", "x-api-key", NULL, SEC_KEY},
        {"a placeholder with '.'", "x-api-key", "egressd-ph-a.b-0123456789", SEC_KEY},
        {"an upper-case field", "X-Api-Key", PH_KEY, SEC_KEY},
        {"the Host field", "host", PH_KEY, SEC_KEY},
        {"Content-Length", "content-length", PH_KEY, SEC_KEY},
        {"a Proxy- field", "proxy-authorization", PH_KEY, SEC_KEY},
        {"a field with a blank", "x api", PH_KEY, SEC_KEY},
        {"an empty field", "", PH_KEY, SEC_KEY},
        {"a secret with CRLF", "x-api-key", PH_KEY, "a\r\nX-Injected: 1"},
        {"a secret with HT", "x-api-key", PH_KEY, "a\tb"},
        {"a secret with a blank end", "x-api-key", PH_KEY, "ab "},
        {"an empty secret", "x-api-key", PH_KEY, ""},
    };
    char long_ph[130];

    memset(long_ph, 'a', 129);
    long_ph[129] = '\0';
    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct http_cred two[2] = {c[0]};
        two[1] = bound(HTTP_CRED_X_API_KEY, cases[i].field, cases[i].ph ? cases[i].ph : long_ph,
                       cases[i].secret);
        expect(apply(two, 2), HTTP_CRED_BAD_CRED, 1, 0, cases[i].what);
    }
    k = unbound(HTTP_CRED_X_API_KEY, "x-api-key", PH_OTHER);
    k.secret = (struct http_view){"", 0};
    struct http_cred two[2] = {c[0], k};
    expect(apply(two, 2), HTTP_CRED_DONE, 2, 1, "an unbound credential's secret is not judged");
    k = bound(HTTP_CRED_BASIC, "authorization", PH_BASIC, "a\r\nb\0");
    k.secret.len = 5;
    two[1] = k;
    parse("GET / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(two, 2), HTTP_CRED_DONE, 2, 1, "a Basic secret may hold any bytes");
    for (size_t i = 0; i <= HTTP_CRED_MAX; i++)
        many[i] = unbound(HTTP_CRED_HEADER, "x-a", PH_OTHER);
    expect(apply(many, HTTP_CRED_MAX), HTTP_CRED_NONE, HTTP_CRED_MAX, 0, "32 credentials");
    expect(apply(many, HTTP_CRED_MAX + 1), HTTP_CRED_BAD_CRED, HTTP_CRED_MAX, 0, "33 credentials");
}

static void test_several_and_format(void)
{
    struct http_cred c[] = {
        bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
        bound(HTTP_CRED_BEARER, "authorization", PH_BEARER, SEC_BEARER),
        bound(HTTP_CRED_HEADER, "x-goog-api-key", PH_GOOG, SEC_GOOG),
        bound(HTTP_CRED_BASIC, "x-upstream-authorization", PH_BASIC, SEC_BASIC),
        unbound(HTTP_CRED_HEADER, "x-other", PH_OTHER),
    };
    static char out[2048];
    const char *want = "POST /v1/messages?beta=true HTTP/1.1\r\n"
                       "Host: api.example.com\r\n"
                       "x-api-key: " SEC_KEY "\r\n"
                       "Content-Type: application/json\r\n"
                       "Authorization: Bearer " SEC_BEARER "\r\n"
                       "X-Goog-Api-Key: " SEC_GOOG "\r\n"
                       "X-Upstream-Authorization: Basic YWxpY2U6c2stYmFzaWMtc2VjcmV0\r\n"
                       "X-Client-Token: Bearer sk-the-clients-own\r\n"
                       "Content-Length: 2\r\n"
                       "Connection: keep-alive\r\n\r\n";

    parse("POST http://api.example.com/v1/messages?beta=true HTTP/1.1\r\n"
          "Host: api.example.com\r\n"
          "x-api-key: " PH_KEY "\r\n"
          "Content-Type: application/json\r\n"
          "Authorization: bearer  " PH_BEARER "\r\n"
          "Proxy-Authorization: Basic MTAxOnMzY3JldA==\r\n"
          "X-Goog-Api-Key: " PH_GOOG "\r\n"
          "X-Upstream-Authorization: Basic YWxpY2U6ZWdyZXNzZC1waC1iYXNpYy0wMTIzNDU2Nzg5YWJjZGVm\r\n"
          "X-Client-Token: Bearer sk-the-clients-own\r\n"
          "Content-Length: 2\r\n"
          "\r\n");
    expect(apply(c, 5), HTTP_CRED_DONE, 5, 0xf, "four kinds at once, one foreign absent");
    size_t got = http_format_request(&req, "api.example.com", true, out, sizeof(out));
    if (!ok(got == strlen(want) && memcmp(out, want, got) == 0,
            "the formatted head: secrets in place, everything else as it came"))
        diag("got: %.*s", (int)got, out);
    ok(req.body == HTTP_BODY_LENGTH && req.content_length == 2 &&
           view_eq(req.proxy_authorization, "Basic MTAxOnMzY3JldA==") &&
           view_eq(req.host_header, "api.example.com"),
       "the parsed framing, Host and Proxy-Authorization are as they were");
}

/* One secret in two shapes: bound credentials sharing a placeholder. */
static void test_alternatives(void)
{
    struct http_cred c[] = {bound(HTTP_CRED_X_API_KEY, "x-api-key", PH_KEY, SEC_KEY),
                            bound(HTTP_CRED_BEARER, "authorization", PH_KEY, SEC_KEY)};

    parse("POST /v1/messages HTTP/1.1\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(c, 2), HTTP_CRED_DONE, 2, 1, "alternatives: the x-api-key shape");
    ok(view_eq(field("x-api-key"), SEC_KEY), "alternatives: x-api-key gets the secret");
    parse("POST /v1/messages HTTP/1.1\r\nAuthorization: Bearer " PH_KEY "\r\n\r\n");
    expect(apply(c, 2), HTTP_CRED_DONE, 2, 2, "alternatives: the Bearer shape");
    ok(view_eq(field("authorization"), "Bearer " SEC_KEY), "alternatives: Bearer gets the secret");
    parse("POST / HTTP/1.1\r\nx-api-key: " PH_KEY "\r\nAuthorization: Bearer " PH_KEY "\r\n\r\n");
    expect(apply(c, 2), HTTP_CRED_DONE, 2, 3, "alternatives: both shapes at once");
    parse("POST / HTTP/1.1\r\nx-other: " PH_KEY "\r\nx-api-key: " PH_KEY "\r\n\r\n");
    expect(apply(c, 2), HTTP_CRED_MISPLACED, 0, 0,
           "alternatives: still misplaced in a field neither names");
}

int main(void)
{
    test_base64();
    test_x_api_key();
    test_header();
    test_bearer();
    test_basic();
    test_basic_bad_base64();
    test_foreign();
    test_misplaced();
    test_long_basic();
    test_no_room();
    test_bad_cred();
    test_several_and_format();
    test_alternatives();
    free(head);
    return tap_done();
}
