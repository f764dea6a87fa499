/*
 * fuzz_credential.c - credential injection (http_cred_apply) against a
 * reference written apart from http/credential.c and http/base64.c: a
 * naive reading of the contract in http.h that rebuilds every field's
 * expected value from scratch, with its own base64.
 *
 * The input drives a generator: a table of credentials (kinds, fields,
 * placeholders from a pool where some overlap others, bound or not, now
 * and then an unusable one), then a request head whose method, target and
 * fields put those placeholders in right and wrong shapes (Bearer with and
 * without its SP, Basic with users of any bytes, long ones, broken base64,
 * prefixes, lists, foreign fields), then the room scratch has; what is
 * left is read as base64 text and bytes.  The head is parsed with
 * http_parse_request (a head it refuses is skipped) and the reference works
 * on what was parsed.
 *
 * Properties:
 *   1. the result, *which and *used are the reference's;
 *   2. DONE: each substituted field's value is exactly the reference's
 *      (secret; "Bearer " secret; "Basic " base64(user ":" secret)), lies in
 *      scratch[0..cap), and a Basic one decodes back to user ":" secret;
 *      every other field, and everything else in req, is as it was; no byte
 *      of scratch past cap is written;
 *   3. any other result: req and scratch are exactly as they were;
 *   4. the head http_format_request writes holds no secret (of 8 bytes or
 *      more) whose credential was not used unless the client sent it
 *      itself, and after DONE it parses again;
 *   5. unbound credentials' secrets are never read: they are a NULL
 *      pointer with a length;
 *   6. base64: http_base64_encode of the left-over bytes is the
 *      reference's, and http_base64_decode of them as text agrees with the
 *      reference's strict decoder.
 * FUZZ_CRED_SHOW=1 prints each generated head and the verdict (for seeds).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "http.h"

#define HEAD_CAP    70000
#define SCRATCH_CAP 65536

static const struct http_limits lim = {8192, 65536, 64};
static const struct http_limits lim_again = {65536, 131072, HTTP_MAX_HEADERS_CAP};

static struct http_request req, before, again;
static char head[HEAD_CAP], scratch[SCRATCH_CAP], out[2 * HEAD_CAP + SCRATCH_CAP];
static char pattern[SCRATCH_CAP]; /* what scratch holds before each run */
static bool show;

/* ---- the pools the generator draws from ---- */

static char long_ph[129], long_secret[161];
static const char *placeholders[] = {
    "egressd-ph-anthropic-3f9c0a1b2c3d4e5f",
    "egressd-ph-openai-00112233445566778899",
    "egressd-ph-basic-0123456789abcdef",
    "egressd-ph-basic-0123456789abcde", /* a prefix of the one before */
    "aaaaaaaaaaaaaaaaaaaa",             /* overlaps itself */
    "aaaaaaaaaaaaaaaa",                 /* inside the one before */
    "QUJDREVGR0hJSktMTU5P",             /* of the base64 alphabet */
    long_ph,                            /* HTTP_CRED_PLACEHOLDER_MAX bytes */
};
#define N_PH (sizeof(placeholders) / sizeof(placeholders[0]))
static const char *const bad_placeholders[] = {"egressd-ph-1234", "egressd-ph-a.b-0123456789", ""};

static const char *const fields[] = {"x-api-key", "authorization", "x-goog-api-key",
                                     "x-custom-auth"};
static const char *const bad_fields[] = {"host", "X-Api-Key", "proxy-authorization", ""};

static const char *secrets[] = {
    "SECRET-ALPHA-0001", "sk-secret-bravo-22", "secret with inner space", "Q", "QR", "QRS",
    ":co:lon:",          long_secret,
};
#define N_SEC (sizeof(secrets) / sizeof(secrets[0]))
static const char *const bad_secrets[] = {"a\r\nX-Injected: 1", "", " lead", "tab\there"};
static const char binary_secret[] = "\x00\x01\xff\xfe\r\n:x"; /* Basic only */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    memcpy(long_ph, "egressd-ph-long-", 16);
    for (size_t i = 16; i < 128; i++)
        long_ph[i] = "0123456789abcdef"[i * 7 % 16];
    memcpy(long_secret, "sk-long-", 8);
    for (size_t i = 8; i < 160; i++)
        long_secret[i] = (char)('A' + i % 26);
    memset(pattern, 0xa5, sizeof(pattern));
    show = getenv("FUZZ_CRED_SHOW") != NULL;
    return 0;
}

/* ---- the reference, written apart from http/ ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 of in[0..n) into out, a bit accumulator at a time; its length. */
static size_t ref_encode(const uint8_t *in, size_t n, char *o)
{
    size_t len = 0;
    uint32_t acc = 0;
    int bits = 0;

    for (size_t i = 0; i < n; i++) {
        acc = acc << 8 | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            o[len++] = b64chars[acc >> bits & 63];
        }
    }
    if (bits > 0)
        o[len++] = b64chars[acc << (6 - bits) & 63];
    while (len % 4)
        o[len++] = '=';
    return len;
}

/* Strict base64 (padded, standard alphabet, leftover bits zero) into out;
 * the length or -1. */
static long ref_decode(const char *in, size_t n, uint8_t *o, size_t cap)
{
    size_t pad = 0, len = 0;
    uint32_t acc = 0;
    int bits = 0;

    if (n % 4)
        return -1;
    while (pad < 2 && pad < n && in[n - 1 - pad] == '=')
        pad++;
    for (size_t i = 0; i < n - pad; i++) {
        const char *c = in[i] ? strchr(b64chars, in[i]) : NULL;
        if (!c)
            return -1;
        acc = acc << 6 | (uint32_t)(c - b64chars);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (len == cap)
                return -1;
            o[len++] = (uint8_t)(acc >> bits);
        }
    }
    if (acc & ((1u << bits) - 1))
        return -1;
    return (long)len;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* Does p[0..n) spell word (lower-case), in any case? */
static bool ref_word(const char *p, size_t n, const char *word)
{
    if (n != strlen(word))
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(p[i]) != word[i])
            return false;
    return true;
}

/* Does ph occur in t[0..n)?  Every start, compared byte by byte. */
static bool ref_occurs(const char *t, size_t n, const char *ph, size_t pn)
{
    for (size_t i = 0; i + pn <= n; i++) {
        size_t k = 0;
        while (k < pn && t[i + k] == ph[k])
            k++;
        if (k == pn)
            return true;
    }
    return false;
}

static bool ref_cred_ok(const struct http_cred *c)
{
    static const char *const meaningful[] = {"host",       "content-length", "transfer-encoding",
                                             "connection", "keep-alive",     "te",
                                             "trailer",    "upgrade",        "expect"};
    const char *f = c->field;
    struct http_view s = c->secret, p = c->placeholder;

    if ((unsigned)c->kind > HTTP_CRED_HEADER || !f || !*f || !strncmp(f, "proxy-", 6))
        return false;
    for (size_t i = 0; i < sizeof(meaningful) / sizeof(meaningful[0]); i++)
        if (!strcmp(f, meaningful[i]))
            return false;
    for (; *f; f++)
        if (!((*f >= 'a' && *f <= 'z') || (*f >= '0' && *f <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *f)))
            return false;
    if (p.len < 16 || p.len > 128)
        return false;
    for (size_t i = 0; i < p.len; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", p.p[i]) ||
            !p.p[i])
            return false;
    if (!c->bound)
        return true;
    if (s.len == 0)
        return false;
    if (c->kind == HTTP_CRED_BASIC)
        return true;
    if (s.p[0] == ' ' || s.p[s.len - 1] == ' ')
        return false;
    for (size_t i = 0; i < s.len; i++)
        if ((unsigned char)s.p[i] < 32 || (unsigned char)s.p[i] == 127)
            return false;
    return true;
}

/* What the reference makes of one field. */
struct ref_field {
    bool basic;          /* "basic" 1*SP strict base64 */
    char *dec;           /* its decoded bytes */
    size_t dlen, colon;  /* colon: the first ':' (dlen if none) */
    int owner;           /* the credential substituted, or -1 */
    size_t span, span_n; /* the placeholder replaced: in the value, or in dec for Basic */
    char *want;          /* the new value */
    size_t want_n;
};

static struct ref_field rf[HTTP_MAX_HEADERS_CAP];
static char arena[3 * HEAD_CAP + SCRATCH_CAP], masked[HEAD_CAP];
static size_t arena_used;

static char *arena_take(size_t n)
{
    CHECK(arena_used + n <= sizeof(arena), "reference arena");
    arena_used += n;
    return arena + arena_used - n;
}

/* If v is `scheme` (any case), at least one SP and more: where the rest starts. */
static bool ref_scheme(struct http_view v, const char *scheme, size_t *rest)
{
    size_t n = strlen(scheme), i;

    if (v.len < n + 1 || !ref_word(v.p, n, scheme) || v.p[n] != ' ')
        return false;
    for (i = n; i < v.len && v.p[i] == ' '; i++)
        ;
    *rest = i;
    return true;
}

static void ref_read(const struct http_header *h, struct ref_field *f)
{
    size_t rest;
    long d;

    memset(f, 0, sizeof(*f));
    f->owner = -1;
    if (!ref_scheme(h->value, "basic", &rest))
        return;
    f->dec = arena_take(h->value.len);
    d = ref_decode(h->value.p + rest, h->value.len - rest, (uint8_t *)f->dec, h->value.len);
    if (d < 0)
        return;
    f->basic = true;
    f->dlen = (size_t)d;
    for (f->colon = 0; f->colon < f->dlen && f->dec[f->colon] != ':'; f->colon++)
        ;
}

/* Is field h creds[k]'s site?  Then fill the span and the new value. */
static bool ref_site(const struct http_header *h, struct ref_field *f, const struct http_cred *c)
{
    struct http_view v = h->value, ph = c->placeholder, s = c->secret;
    size_t rest;

    if (!c->bound || !ref_word(h->name.p, h->name.len, c->field))
        return false;
    if (c->kind == HTTP_CRED_BEARER) {
        if (!ref_scheme(v, "bearer", &rest) || v.len - rest != ph.len ||
            memcmp(v.p + rest, ph.p, ph.len))
            return false;
        f->span = rest, f->span_n = ph.len;
        f->want = arena_take(7 + s.len);
        memcpy(f->want, "Bearer ", 7);
        memcpy(f->want + 7, s.p, s.len);
        f->want_n = 7 + s.len;
        return true;
    }
    if (c->kind == HTTP_CRED_BASIC) {
        if (!f->basic || f->colon == f->dlen || f->dlen - f->colon - 1 != ph.len ||
            memcmp(f->dec + f->colon + 1, ph.p, ph.len))
            return false;
        char *plain = arena_take(f->colon + 1 + s.len);
        memcpy(plain, f->dec, f->colon + 1);
        memcpy(plain + f->colon + 1, s.p, s.len);
        f->span = f->colon + 1, f->span_n = ph.len;
        f->want = arena_take(6 + (f->colon + 1 + s.len + 2) / 3 * 4);
        memcpy(f->want, "Basic ", 6);
        f->want_n = 6 + ref_encode((uint8_t *)plain, f->colon + 1 + s.len, f->want + 6);
        return true;
    }
    if (v.len != ph.len || memcmp(v.p, ph.p, ph.len))
        return false;
    f->span = 0, f->span_n = ph.len;
    f->want = arena_take(s.len);
    memcpy(f->want, s.p, s.len);
    f->want_n = s.len;
    return true;
}

/* Every credential whose placeholder occurs in t[0..n) goes into *foreign or
 * *misplaced; for `owner`, and for a bound credential with owner's
 * placeholder and secret (an alternative shape of it), the bytes of its
 * span (if any) are masked first. */
static void ref_search(const char *t, size_t n, const struct http_cred *c, size_t nc, int owner,
                       size_t span, size_t span_n, uint32_t *foreign, uint32_t *misplaced)
{
    for (size_t j = 0; j < nc; j++) {
        const char *text = t;
        bool alternative =
            owner >= 0 && c[j].bound && c[j].placeholder.len == c[owner].placeholder.len &&
            memcmp(c[j].placeholder.p, c[owner].placeholder.p, c[j].placeholder.len) == 0 &&
            c[j].secret.len == c[owner].secret.len &&
            memcmp(c[j].secret.p, c[owner].secret.p, c[j].secret.len) == 0;
        if (((int)j == owner || alternative) && span_n > 0) {
            memcpy(masked, t, n);
            memset(masked + span, '#', span_n);
            text = masked;
        }
        if (ref_occurs(text, n, c[j].placeholder.p, c[j].placeholder.len))
            *(c[j].bound ? misplaced : foreign) |= 1u << j;
    }
}

struct verdict {
    enum http_cred_result r;
    size_t which;
    uint32_t used;
    size_t need;
};

static size_t lowest(uint32_t m)
{
    size_t i = 0;
    while (!(m >> i & 1))
        i++;
    return i;
}

static struct verdict reference(const struct http_request *q, const struct http_cred *c, size_t nc)
{
    struct verdict v = {HTTP_CRED_NONE, nc, 0, 0};
    uint32_t foreign = 0, misplaced = 0, sites = 0;

    arena_used = 0;
    for (size_t i = 0; i < nc; i++)
        if (!ref_cred_ok(&c[i]))
            return (struct verdict){HTTP_CRED_BAD_CRED, i, 0, 0};
    ref_search(q->method.p, q->method.len, c, nc, -1, 0, 0, &foreign, &misplaced);
    ref_search(q->target.p, q->target.len, c, nc, -1, 0, 0, &foreign, &misplaced);
    for (size_t i = 0; i < q->n_headers; i++) {
        const struct http_header *h = &q->headers[i];
        struct ref_field *f = &rf[i];
        bool in_dec;

        ref_read(h, f);
        for (size_t k = 0; k < nc && f->owner < 0; k++)
            if (ref_site(h, f, &c[k]))
                f->owner = (int)k;
        in_dec = f->owner >= 0 && c[f->owner].kind == HTTP_CRED_BASIC;
        ref_search(h->name.p, h->name.len, c, nc, -1, 0, 0, &foreign, &misplaced);
        ref_search(h->value.p, h->value.len, c, nc, in_dec ? -1 : f->owner, f->span, f->span_n,
                   &foreign, &misplaced);
        if (f->basic)
            ref_search(f->dec, f->dlen, c, nc, in_dec ? f->owner : -1, f->span, f->span_n, &foreign,
                       &misplaced);
        if (f->owner >= 0) {
            sites |= 1u << f->owner;
            v.need += f->want_n;
        }
    }
    if (foreign)
        return (struct verdict){HTTP_CRED_FOREIGN, lowest(foreign), 0, v.need};
    if (misplaced)
        return (struct verdict){HTTP_CRED_MISPLACED, lowest(misplaced), 0, v.need};
    if (sites)
        v.r = HTTP_CRED_DONE, v.used = sites;
    return v;
}

/* ---- the generator ---- */

struct gen {
    const uint8_t *p;
    size_t n;
    size_t len;
    bool full;
};

static uint8_t take(struct gen *g)
{
    if (g->n == 0)
        return 0;
    g->n--;
    return *g->p++;
}

static void put(struct gen *g, const void *s, size_t n)
{
    if (n > HEAD_CAP - g->len) {
        g->full = true;
        return;
    }
    memcpy(head + g->len, s, n);
    g->len += n;
}

static void puts_(struct gen *g, const char *s)
{
    put(g, s, strlen(s));
}

/* A word, each letter's case chosen by a bit of `bits`. */
static void put_cased(struct gen *g, const char *w, uint8_t bits)
{
    for (size_t i = 0; w[i]; i++) {
        char c = w[i];
        if (bits >> (i % 8) & 1 && c >= 'a' && c <= 'z')
            c = (char)(c - 32);
        put(g, &c, 1);
    }
}

/* n bytes a field value may hold (visible ASCII, SP, obs-text). */
static void put_text(struct gen *g, size_t n, const char *extra)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t b = take(g);
        char c = b >= 0xe0 ? (char)b : (char)(0x20 + b % 95);
        if (extra && b % 17 == 0)
            c = extra[b % strlen(extra)];
        put(g, &c, 1);
    }
}

static const char *pick_ph(struct gen *g)
{
    return placeholders[take(g) % N_PH];
}

/* A user part for a Basic value, into buf; its length. */
static size_t gen_user(struct gen *g, char *buf)
{
    uint8_t how = take(g) % 6;
    size_t n = 0;

    switch (how) {
    case 0: return 0;
    case 1: memcpy(buf, "alice", 5); return 5;
    case 2: memcpy(buf, "a:b", 3); return 3;
    case 3:
        n = take(g) % 40;
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)take(g);
        return n;
    case 4: {
        const char *ph = pick_ph(g);
        memcpy(buf, ph, strlen(ph));
        return strlen(ph);
    }
    default: {
        const char *ph = pick_ph(g);
        size_t at;
        n = 700 + (size_t)take(g) * 8;
        memset(buf, 'u', n);
        at = (size_t)take(g) * 9 % (n - strlen(ph));
        if (take(g) & 1)
            memcpy(buf + at, ph, strlen(ph));
        return n;
    }
    }
}

static void put_basic(struct gen *g, const char *plain, size_t n, uint8_t damage)
{
    static char b64[4 * 1024];
    size_t len = ref_encode((const uint8_t *)plain, n, b64);

    put_cased(g, "basic", take(g));
    puts_(g, take(g) & 1 ? "  " : " ");
    switch (damage % 5) {
    case 1:
        if (len > 0)
            len--; /* padding or a character short */
        break;
    case 2:
        if (len > 2)
            b64[len / 2] = '!';
        break;
    case 3:
        if (len > 4)
            b64[2] = ' ';
        break;
    case 4:
        if (len > 0 && b64[len - 1] == '=')
            b64[len - 2] = b64[len - 2] == 'B' ? 'C' : 'B'; /* leftover bits set */
        break;
    }
    put(g, b64, len);
}

static void gen_value(struct gen *g)
{
    static char plain[4096];
    uint8_t shape = take(g) % 10;
    const char *ph;
    size_t n;

    switch (shape) {
    case 0: puts_(g, pick_ph(g)); break;
    case 1:
        put_cased(g, "bearer", take(g));
        puts_(g, (const char *const[]){" ", "  ", "   "}[take(g) % 3]);
        puts_(g, pick_ph(g));
        break;
    case 2:
    case 5:
        n = gen_user(g, plain);
        plain[n++] = ':';
        ph = pick_ph(g);
        memcpy(plain + n, ph, strlen(ph));
        put_basic(g, plain, n + strlen(ph), shape == 2 ? 0 : take(g) % 4 + 1);
        break;
    case 3: put_text(g, take(g) % 48, NULL); break;
    case 4:
        put_cased(g, "bearer", take(g));
        puts_(g, take(g) & 1 ? "\t" : "");
        puts_(g, pick_ph(g));
        break;
    case 6:
        put_text(g, take(g) % 4, ",;= ");
        puts_(g, pick_ph(g));
        put_text(g, take(g) % 4, ",;= ");
        break;
    case 7: puts_(g, take(g) & 1 ? "Bearer sk-own-token-xyz" : "sk-own-key-0123"); break;
    case 8:
        n = gen_user(g, plain);
        put_basic(g, plain, n, 0);
        break;
    default:
        puts_(g, pick_ph(g));
        puts_(g, take(g) & 1 ? ", " : " ");
        puts_(g, pick_ph(g));
        break;
    }
}

static void gen_name(struct gen *g)
{
    uint8_t nb = take(g);

    switch (nb % 8) {
    case 0:
    case 1:
    case 2:
    case 3: put_cased(g, fields[nb % 4], take(g)); break;
    case 4: puts_(g, "X-Other"); break;
    case 5: puts_(g, "Proxy-Authorization"); break;
    case 6: puts_(g, pick_ph(g)); break;
    default:
        puts_(g, "X-");
        for (size_t i = 0, n = take(g) % 8 + 1; i < n; i++)
            put(g, &"abcdefghijklmnopqrstuvwxyz0123456789-_"[take(g) % 38], 1);
    }
}

static void gen_target(struct gen *g)
{
    uint8_t t = take(g);

    puts_(g, t & 1 ? "http://h.test/" : "/");
    for (size_t i = 0, n = t >> 1 & 3; i < n; i++) {
        if (take(g) & 1)
            puts_(g, pick_ph(g));
        else
            for (size_t k = 0, m = take(g) % 8; k < m; k++)
                put(g, &"abcXYZ019-._~/?=&"[take(g) % 17], 1);
    }
}

static struct http_cred creds[8];

/* The credential table: 1..6 credentials; 0xff in a byte makes that part
 * unusable. */
static size_t gen_creds(struct gen *g)
{
    size_t n = 1 + take(g) % 6;

    for (size_t i = 0; i < n; i++) {
        uint8_t b0 = take(g), b1 = take(g), b2 = take(g);
        struct http_cred *c = &creds[i];
        const char *ph = b1 == 0xff ? bad_placeholders[i % 3] : placeholders[b1 % N_PH];

        c->kind = (enum http_cred_kind)(b0 & 3);
        c->bound = b0 >> 2 & 1;
        c->field = b0 == 0xff ? bad_fields[b1 % 4] : fields[(b0 >> 3) % 4];
        c->placeholder = (struct http_view){ph, strlen(ph)};
        if (!c->bound)
            c->secret = (struct http_view){NULL, 9};
        else if (b2 == 0xff)
            c->secret = (struct http_view){bad_secrets[i % 4], strlen(bad_secrets[i % 4])};
        else if (b2 == 0xfe)
            c->secret = (struct http_view){binary_secret, sizeof(binary_secret) - 1};
        else
            c->secret = (struct http_view){secrets[b2 % N_SEC], strlen(secrets[b2 % N_SEC])};
    }
    return n;
}

static size_t gen_head(struct gen *g)
{
    uint8_t m = take(g);

    if (m % 8 == 0)
        puts_(g, placeholders[(m >> 3) % N_PH]);
    else
        puts_(g, m & 1 ? "GET" : "POST");
    puts_(g, " ");
    gen_target(g);
    puts_(g, " HTTP/1.1\r\n");
    for (size_t i = 0, n = take(g) % 10; i < n; i++) {
        gen_name(g);
        puts_(g, ": ");
        gen_value(g);
        puts_(g, "\r\n");
    }
    puts_(g, "\r\n");
    return g->full ? 0 : g->len;
}

/* ---- the properties ---- */

static bool in_scratch(struct http_view v, size_t cap)
{
    uintptr_t p = (uintptr_t)v.p, s = (uintptr_t)scratch;
    return p >= s && v.len <= cap && p - s <= cap - v.len;
}

/* Is scratch[from..) as it was before the run? */
static bool scratch_unwritten(size_t from)
{
    return memcmp(scratch + from, pattern + from, sizeof(scratch) - from) == 0;
}

static void check_done(const struct http_cred *c, size_t cap)
{
    static uint8_t dec[HEAD_CAP];

    for (size_t i = 0; i < req.n_headers; i++) {
        struct http_view v = req.headers[i].value;
        const struct ref_field *f = &rf[i];

        if (f->owner < 0) {
            CHECK(v.p == before.headers[i].value.p && v.len == before.headers[i].value.len,
                  "field %zu changed with nothing to substitute", i);
            continue;
        }
        CHECK(v.len == f->want_n && memcmp(v.p, f->want, v.len) == 0,
              "field %zu: got '%.*s', want '%.*s'", i, (int)v.len, v.p, (int)f->want_n, f->want);
        CHECK(in_scratch(v, cap), "field %zu's value is not in scratch[0..%zu)", i, cap);
        if (c[f->owner].kind == HTTP_CRED_BASIC) {
            long d = ref_decode(v.p + 6, v.len - 6, dec, sizeof(dec));
            struct http_view s = c[f->owner].secret;
            CHECK(d == (long)(f->colon + 1 + s.len) && memcmp(dec, f->dec, f->colon + 1) == 0 &&
                      memcmp(dec + f->colon + 1, s.p, s.len) == 0,
                  "field %zu: Basic does not decode back to user:secret", i);
        }
        before.headers[i].value = v;
    }
    CHECK(memcmp(&before, &req, sizeof(req)) == 0, "DONE changed more of req than the values");
    CHECK(scratch_unwritten(cap), "scratch written past cap %zu", cap);
}

/* Is s inside the secret of a credential in `used` (the pools share)? */
static bool in_used_secret(const struct http_cred *c, size_t nc, uint32_t used, struct http_view s)
{
    for (size_t k = 0; k < nc; k++)
        if (used >> k & 1 && ref_occurs(c[k].secret.p, c[k].secret.len, s.p, s.len))
            return true;
    return false;
}

/* No secret of an unused credential in what is sent on, unless the client
 * sent those bytes itself (or a used credential has the same secret). */
static void check_formatted(const struct http_cred *c, size_t nc, uint32_t used, size_t head_len,
                            bool done)
{
    size_t n = http_format_request(&req, "h.test", HTTP_CONN_KEEP_ALIVE, out, sizeof(out));

    CHECK(n > 0, "http_format_request gave 0");
    for (size_t j = 0; j < nc; j++) {
        struct http_view s = c[j].secret;
        if (!c[j].bound || s.len < 8 || (used >> j & 1))
            continue;
        CHECK(!ref_occurs(out, n, s.p, s.len) || ref_occurs(head, head_len, s.p, s.len) ||
                  in_used_secret(c, nc, used, s),
              "the secret of unused credential %zu is in the head sent on", j);
    }
    if (done)
        CHECK(http_parse_request(out, n, &lim_again, &again) == HTTP_R_OK,
              "the head written after DONE does not parse: %s", again.error);
}

static void check_base64(const uint8_t *p, size_t n)
{
    static char enc[4 * 1024], ref[4 * 1024];
    static uint8_t d1[4 * 1024], d2[4 * 1024];
    size_t e, r;
    long rd;

    if (n == 0 || n > 2048)
        return;
    e = http_base64_encode(p, n, enc, sizeof(enc));
    r = ref_encode(p, n, ref);
    CHECK(e == r && memcmp(enc, ref, r) == 0, "base64 of %zu bytes differs", n);
    CHECK(http_base64_encode(p, n, enc, r - 1) == 0, "encode with one byte short");
    CHECK(http_base64_decode(enc, e, d1, sizeof(d1)) == n && memcmp(d1, p, n) == 0,
          "encode then decode is not the bytes");
    e = http_base64_decode((const char *)p, n, d1, sizeof(d1));
    rd = ref_decode((const char *)p, n, d2, sizeof(d2));
    CHECK((rd < 0 && e == HTTP_BASE64_BAD) || (e == (size_t)rd && memcmp(d1, d2, e) == 0),
          "decode of %zu characters: %zu, the reference %ld", n, e, rd);
    CHECK(http_base64_decoded_len((const char *)p, n) == e, "decoded_len differs from decode");
}

static const char *result_name(enum http_cred_result r)
{
    static const char *const names[] = {"NONE",      "DONE",    "FOREIGN",
                                        "MISPLACED", "NO_ROOM", "BAD_CRED"};
    return (unsigned)r < 6 ? names[r] : "?";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gen g = {data, size, 0, false};
    size_t nc = gen_creds(&g), len = gen_head(&g), cap, which;
    uint8_t cap_byte = take(&g);
    uint32_t used;
    struct verdict want;
    enum http_cred_result r;

    check_base64(g.p, g.n);
    if (len == 0 || http_parse_request(head, len, &lim, &req) != HTTP_R_OK || req.head_len != len)
        return 0;
    want = reference(&req, creds, nc);
    /* room to spare, or just around what the new values need */
    cap = want.need + cap_byte % 5;
    cap = cap < 2 ? 0 : cap - 2;
    if (cap_byte < 0x80 || cap > sizeof(scratch))
        cap = sizeof(scratch);
    if (want.r == HTTP_CRED_DONE && want.need > cap)
        want = (struct verdict){HTTP_CRED_NO_ROOM, nc, 0, want.need};
    memcpy(&before, &req, sizeof(req));
    memcpy(scratch, pattern, sizeof(scratch));
    r = http_cred_apply(&req, creds, nc, scratch, cap, &which, &used);
    if (show)
        fprintf(stderr, "--- %zu creds, cap %zu: %s which %zu used %#x (reference %s)\n%.*s", nc,
                cap, result_name(r), which, (unsigned)used, result_name(want.r), (int)len, head);
    CHECK(r == want.r && which == want.which && used == want.used,
          "got %s which %zu used %#x, the reference %s which %zu used %#x", result_name(r), which,
          (unsigned)used, result_name(want.r), want.which, (unsigned)want.used);
    if (r == HTTP_CRED_DONE) {
        check_done(creds, cap);
    } else {
        CHECK(memcmp(&before, &req, sizeof(req)) == 0, "%s changed req", result_name(r));
        CHECK(scratch_unwritten(0), "%s wrote to scratch", result_name(r));
    }
    if (r != HTTP_CRED_BAD_CRED)
        check_formatted(creds, nc, used, len, r == HTTP_CRED_DONE);
    return 0;
}
