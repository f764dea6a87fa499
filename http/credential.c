/*
 * credential.c - credential injection in a request head: the placeholder a
 * sandbox sends, in the shape of its kind and in the field its credential
 * names, is replaced by the secret; a placeholder anywhere else refuses the
 * request (the contract is in http.h).
 *
 * Two passes over the head.  The first finds where each field would be
 * substituted (its site), searches every place of the head for every
 * placeholder and adds up the room the new values need; the second runs
 * only when the first found no fault and the room is there, and writes.  So
 * a refused head, or one too big for scratch, is left exactly as it was.
 * The second pass finds the same sites again rather than keeping them: a
 * head has up to HTTP_MAX_HEADERS_CAP fields, and finding is cheap.
 */
#include "http_int.h"

#define NO_CRED SIZE_MAX

/* Decoded bytes of a Basic value searched at a time: a multiple of 3, so a
 * window starts on a base64 group, and only a long value takes several. */
#define WINDOW 768

/* What one field holds, as far as credentials go. */
struct site {
    bool basic;           /* the value is "Basic" 1*SP strict base64 ... */
    struct http_view b64; /* ... this base64 */
    size_t dlen, colon;   /* its decoded length; its first ':' (dlen if none) */
    size_t k;             /* the credential substituted here, or NO_CRED */
    size_t at;            /* where its placeholder starts: in the value, or
                             for Basic, in the decoded bytes */
};

/* The faults the search found, one bit per credential. */
struct scan {
    const struct http_cred *creds;
    size_t n;
    uint32_t foreign, misplaced;
};

/* ---- the credentials handed in ---- */

static bool placeholder_ok(struct http_view ph)
{
    if (ph.len < HTTP_CRED_PLACEHOLDER_MIN || ph.len > HTTP_CRED_PLACEHOLDER_MAX)
        return false;
    for (size_t i = 0; i < ph.len; i++) {
        unsigned char c = (unsigned char)ph.p[i];
        if (!((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '-' ||
              c == '_'))
            return false;
    }
    return true;
}

/* A lower-case token, and not a field that frames the message, that the
 * parser keeps a view of (Host) or that http_format_request drops: a secret
 * there would change what the head means, or go nowhere. */
static bool field_ok(const char *f)
{
    static const char *const refused[] = {
        "host", "content-length", "transfer-encoding", "connection", "keep-alive",
        "te",   "trailer",        "upgrade",           "expect",
    };

    if (!f || !*f || strncmp(f, "proxy-", 6) == 0)
        return false;
    for (const char *p = f; *p; p++)
        if (!is_tchar((unsigned char)*p) || (*p >= 'A' && *p <= 'Z'))
            return false;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (strcmp(f, refused[i]) == 0)
            return false;
    return true;
}

/* A secret that can stand as a field value as it is: no control byte (nor
 * HT), no SP at either end (the origin would trim it).  A Basic one is
 * base64-encoded, so any bytes do. */
static bool secret_ok(const struct http_cred *c)
{
    struct http_view s = c->secret;

    if (s.len == 0)
        return false;
    if (c->kind == HTTP_CRED_BASIC)
        return true;
    if (s.p[0] == ' ' || s.p[s.len - 1] == ' ')
        return false;
    for (size_t i = 0; i < s.len; i++)
        if ((unsigned char)s.p[i] < 0x20 || (unsigned char)s.p[i] == 0x7f)
            return false;
    return true;
}

/* Are creds[0..n) usable?  If not, *which names the first that is not. */
static bool creds_ok(const struct http_cred *creds, size_t n, size_t *which)
{
    if (n > HTTP_CRED_MAX) {
        *which = HTTP_CRED_MAX;
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const struct http_cred *c = &creds[i];

        if (c->kind > HTTP_CRED_HEADER || !field_ok(c->field) || !placeholder_ok(c->placeholder) ||
            (c->bound && !secret_ok(c))) {
            *which = i;
            return false;
        }
    }
    return true;
}

/* ---- what a field value holds ---- */

static bool views_same(struct http_view a, struct http_view b)
{
    return a.len == b.len && memcmp(a.p, b.p, a.len) == 0;
}

/* Is v `scheme` (lower-case; v's in any case), 1*SP and the credentials
 * (RFC 9110 section 11.4)?  Then *rest is the credentials. */
static bool after_scheme(struct http_view v, const char *scheme, struct http_view *rest)
{
    size_t n = strlen(scheme), i = n;

    if (v.len <= n || v.p[n] != ' ' || !view_is((struct http_view){v.p, n}, scheme))
        return false;
    while (i < v.len && v.p[i] == ' ')
        i++;
    *rest = (struct http_view){v.p + i, v.len - i};
    return true;
}

/* Decode the bytes [off, off + want) of b64's decoded text, as far as it
 * goes, into out (room for want + 2: whole groups are decoded).  off is a
 * multiple of 3, so the slice read is whole groups of strict base64 and
 * decodes.  Returns the bytes written, from off. */
static size_t decode_at(struct http_view b64, size_t off, size_t want, uint8_t *out)
{
    size_t from = off / 3 * 4, to = (off + want + 2) / 3 * 4, got;

    if (to > b64.len)
        to = b64.len;
    if (from >= to)
        return 0;
    got = http_base64_decode(b64.p + from, to - from, out, want + 2);
    return got == HTTP_BASE64_BAD ? 0 : got;
}

/* The offset of the first ':' in the dlen decoded bytes of b64, or dlen. */
static size_t first_colon(struct http_view b64, size_t dlen)
{
    uint8_t win[WINDOW + 2];

    for (size_t a = 0; a < dlen; a += WINDOW) {
        size_t got = decode_at(b64, a, WINDOW, win);
        const uint8_t *c = memchr(win, ':', got);

        if (c)
            return a + (size_t)(c - win);
    }
    return dlen;
}

/* Is the password of a Basic value (the decoded bytes after its first ':',
 * at colon < dlen) exactly ph? */
static bool password_is(const struct site *s, struct http_view ph)
{
    uint8_t buf[HTTP_CRED_PLACEHOLDER_MAX + 4];
    size_t from = s->colon + 1, a = from / 3 * 3, shift = from - a;

    if (s->dlen - from != ph.len)
        return false;
    return decode_at(s->b64, a, shift + ph.len, buf) >= shift + ph.len &&
           memcmp(buf + shift, ph.p, ph.len) == 0;
}

/* Is the field value v (of a field named as c says) c's placeholder in the
 * shape of c's kind?  Then s->at is where the placeholder starts. */
static bool is_site_of(const struct http_cred *c, struct http_view v, struct site *s)
{
    struct http_view rest;

    switch (c->kind) {
    case HTTP_CRED_BEARER:
        if (!after_scheme(v, "bearer", &rest) || !views_same(rest, c->placeholder))
            return false;
        s->at = (size_t)(rest.p - v.p);
        return true;
    case HTTP_CRED_BASIC:
        if (!s->basic || s->colon == s->dlen || !password_is(s, c->placeholder))
            return false;
        s->at = s->colon + 1;
        return true;
    case HTTP_CRED_X_API_KEY:
    case HTTP_CRED_HEADER: break;
    }
    s->at = 0;
    return views_same(v, c->placeholder);
}

/* What field h holds: a Basic value's base64, and the first bound
 * credential (in index order) substituted there, if any. */
static void find_site(const struct http_header *h, const struct http_cred *creds, size_t n,
                      struct site *s)
{
    struct http_view rest;

    *s = (struct site){.k = NO_CRED};
    if (after_scheme(h->value, "basic", &rest) &&
        (s->dlen = http_base64_decoded_len(rest.p, rest.len)) != HTTP_BASE64_BAD) {
        s->basic = true;
        s->b64 = rest;
        s->colon = first_colon(rest, s->dlen);
    }
    for (size_t k = 0; k < n && s->k == NO_CRED; k++)
        if (creds[k].bound && view_is(h->name, creds[k].field) &&
            is_site_of(&creds[k], h->value, s))
            s->k = k;
}

/* ---- the search ---- */

static bool faulted(const struct scan *sc, size_t j)
{
    return ((sc->foreign | sc->misplaced) >> j & 1) != 0;
}

/* Does ph occur in t[0..len), starting before t + stop, other than at
 * t + allowed (NO_CRED: nowhere is allowed)? */
static bool stray_match(const char *t, size_t len, size_t stop, struct http_view ph, size_t allowed)
{
    const char *p = t, *last, *end = t + len;

    if (len < ph.len)
        return false;
    last = t + (stop < len ? stop : len);
    while (p < last && (p = memmem(p, (size_t)(end - p), ph.p, ph.len)) != NULL && p < last) {
        if ((size_t)(p - t) != allowed)
            return true;
        p++;
    }
    return false;
}

/* Whether creds[j]'s placeholder may stand at the site of creds[k] (k
 * NO_CRED: no site): it is creds[k], or a bound alternative of it (the
 * same placeholder and the same secret in another shape: one secret a host
 * takes as x-api-key or as a Bearer token). */
static bool allowed_at(const struct scan *sc, size_t j, size_t k)
{
    if (k == NO_CRED)
        return false;
    const struct http_cred *a = &sc->creds[j], *b = &sc->creds[k];
    return j == k || (a->bound && views_same(a->placeholder, b->placeholder) &&
                      views_same(a->secret, b->secret));
}

/* Search t[0..len) for every placeholder starting before t + stop; base is
 * t's offset in the text searched, and creds[k]'s placeholder at k_at of
 * that text is the one match allowed (k is NO_CRED when none is).  Any
 * other match is a fault of its credential. */
static void search(struct scan *sc, const char *t, size_t len, size_t stop, size_t base, size_t k,
                   size_t k_at)
{
    for (size_t j = 0; j < sc->n; j++) {
        size_t allowed = k_at >= base && allowed_at(sc, j, k) ? k_at - base : NO_CRED;

        if (!faulted(sc, j) && stray_match(t, len, stop, sc->creds[j].placeholder, allowed))
            *(sc->creds[j].bound ? &sc->misplaced : &sc->foreign) |= (uint32_t)1 << j;
    }
}

static void search_view(struct scan *sc, struct http_view v, size_t k, size_t k_at)
{
    search(sc, v.p, v.len, v.len, 0, k, k_at);
}

/* A Basic value's decoded bytes, a window at a time; the windows overlap
 * by a placeholder's length so a match across their edge is seen, and
 * each match is judged in the window it starts in. */
static void search_decoded(struct scan *sc, const struct site *s, size_t k)
{
    uint8_t win[WINDOW + HTTP_CRED_PLACEHOLDER_MAX + 2];

    for (size_t a = 0; a < s->dlen; a += WINDOW) {
        size_t got = decode_at(s->b64, a, WINDOW + HTTP_CRED_PLACEHOLDER_MAX - 1, win);
        search(sc, (const char *)win, got, WINDOW, a, k, s->at);
    }
}

/* Field h, whose site is s: its name, its value, and a Basic one decoded. */
static void search_field(struct scan *sc, const struct http_header *h, const struct site *s)
{
    bool in_basic = s->k != NO_CRED && sc->creds[s->k].kind == HTTP_CRED_BASIC;

    search_view(sc, h->name, NO_CRED, 0);
    search_view(sc, h->value, in_basic ? NO_CRED : s->k, s->at);
    if (s->basic)
        search_decoded(sc, s, in_basic ? s->k : NO_CRED);
}

/* ---- the new values ---- */

static size_t base64_len(size_t n)
{
    return (n / 3 + (n % 3 != 0)) * 4;
}

/* The length of c's value at site s. */
static size_t value_len(const struct http_cred *c, const struct site *s)
{
    switch (c->kind) {
    case HTTP_CRED_BEARER: return 7 + c->secret.len;
    case HTTP_CRED_BASIC: return 6 + base64_len(s->colon + 1 + c->secret.len);
    case HTTP_CRED_X_API_KEY:
    case HTTP_CRED_HEADER: break;
    }
    return c->secret.len;
}

/* "Basic " base64(user ":" secret) into out, value_len() bytes.  The whole
 * groups of the user are copied as they came (strict base64: they encode
 * exactly those bytes); the group holding the ':' is assembled in the room
 * "Basic " then takes, so no secret byte lands outside out. */
static void write_basic(const struct http_cred *c, const struct site *s, char *out)
{
    struct http_view sec = c->secret;
    size_t g = s->colon / 3, r = s->colon % 3, fill = 2 - r < sec.len ? 2 - r : sec.len;
    char *group = out + 6 + 4 * g;
    uint8_t tail[5];

    memcpy(out + 6, s->b64.p, 4 * g);
    decode_at(s->b64, 3 * g, 3, tail);
    memcpy(out, tail, r);
    out[r] = ':';
    memcpy(out + r + 1, sec.p, fill);
    http_base64_encode((const uint8_t *)out, r + 1 + fill, group, 4);
    memcpy(out, "Basic ", 6);
    if (fill < sec.len)
        http_base64_encode((const uint8_t *)sec.p + fill, sec.len - fill, group + 4,
                           base64_len(sec.len - fill));
}

/* c's value at site s into out; returns its length (value_len()). */
static size_t write_value(const struct http_cred *c, const struct site *s, char *out)
{
    switch (c->kind) {
    case HTTP_CRED_BEARER:
        memcpy(out, "Bearer ", 7);
        memcpy(out + 7, c->secret.p, c->secret.len);
        break;
    case HTTP_CRED_BASIC: write_basic(c, s, out); break;
    case HTTP_CRED_X_API_KEY:
    case HTTP_CRED_HEADER: memcpy(out, c->secret.p, c->secret.len); break;
    }
    return value_len(c, s);
}

/* The second pass: every site's new value into scratch, its field pointed
 * there.  Returns which credentials were used. */
static uint32_t substitute(struct http_request *req, const struct http_cred *creds, size_t n,
                           char *scratch)
{
    uint32_t used = 0;
    size_t off = 0;

    for (size_t i = 0; i < req->n_headers; i++) {
        struct site s;
        size_t len;

        find_site(&req->headers[i], creds, n, &s);
        if (s.k == NO_CRED)
            continue;
        len = write_value(&creds[s.k], &s, scratch + off);
        req->headers[i].value = (struct http_view){scratch + off, len};
        off += len;
        used |= (uint32_t)1 << s.k;
    }
    return used;
}

static size_t lowest(uint32_t bits)
{
    size_t i = 0;

    while (!(bits >> i & 1))
        i++;
    return i;
}

/* Contract in http.h. */
enum http_cred_result http_cred_apply(struct http_request *req, const struct http_cred *creds,
                                      size_t n, char *scratch, size_t cap, size_t *which,
                                      uint32_t *used)
{
    struct scan sc = {creds, n, 0, 0};
    size_t need = 0, sites = 0;

    *which = n;
    *used = 0;
    if (!creds_ok(creds, n, which))
        return HTTP_CRED_BAD_CRED;
    search_view(&sc, req->method, NO_CRED, 0);
    search_view(&sc, req->target, NO_CRED, 0);
    for (size_t i = 0; i < req->n_headers; i++) {
        struct site s;

        find_site(&req->headers[i], creds, n, &s);
        search_field(&sc, &req->headers[i], &s);
        if (s.k != NO_CRED) {
            size_t len = value_len(&creds[s.k], &s);
            need = len > SIZE_MAX - need ? SIZE_MAX : need + len;
            sites++;
        }
    }
    if (sc.foreign || sc.misplaced) {
        *which = lowest(sc.foreign ? sc.foreign : sc.misplaced);
        return sc.foreign ? HTTP_CRED_FOREIGN : HTTP_CRED_MISPLACED;
    }
    if (sites == 0)
        return HTTP_CRED_NONE;
    if (need > cap)
        return HTTP_CRED_NO_ROOM;
    *used = substitute(req, creds, n, scratch);
    return HTTP_CRED_DONE;
}
