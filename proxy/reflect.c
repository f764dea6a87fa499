/*
 * reflect.c - see reflect.h.
 *
 * The forms of a value v (each cut to its first PX_REFLECT_FORM_MAX bytes):
 *   - v itself;
 *   - v percent-encoded (RFC 3986 section 2.1: %XX, upper-case), when
 *     that differs from v, in the three ways encoders differ: every byte
 *     but the unreserved ones; '/' kept too (Python's quote()); !'()*
 *     kept too (JavaScript's encodeURIComponent());
 *   - the base64 (RFC 4648 section 4) that v's bytes give wherever they sit
 *     in a longer base64 text: v after 0, 1 or 2 other bytes, less the
 *     characters that hold bits of the bytes around it.  v at offset 3k+a
 *     of any byte string encodes to exactly one of these three cores, so a
 *     header echoed as base64 (a Basic credential, a JSON dump of the
 *     request in base64) shows one of them;
 *   - the same three in the URL-safe alphabet (section 5), when they differ.
 * Encoded forms shorter than ENCODED_MIN are left out: so short a core
 * (of a value of a few bytes) would match ordinary text.
 *
 * The search looks at one 4-byte gram in every `step` bytes of a piece,
 * where step = (the shortest form's length, at most STEP_SPAN) - 3: a form
 * that lies in the piece then covers one of the grams looked at, at an
 * offset below step, so a table of every form's grams at those offsets
 * (a hash of chains, at most a quarter of its slots used, so most probes
 * find an empty one) names each form and offset to compare there.  On
 * text a gram costs a load, a multiply and a probe per 30-odd bytes.  A
 * form that starts in what the stream kept is found the same way in the
 * seam: what was kept joined to the piece's first bytes.  Forms shorter
 * than STEP_MIN (a secret of a few bytes) turn the table off: memmem per
 * form then.
 */
#include "reflect.h"

#include <stdlib.h>
#include <string.h>

#include "http.h"

#define ENCODED_MIN 8  /* characters of an encoded form, at least */
#define GRAM        4  /* bytes of a gram */
#define STEP_MIN    8  /* the shortest form the gram table serves */
#define STEP_SPAN   64 /* of each form's first bytes, those indexed */

/* v's bytes that give a form of PX_REFLECT_FORM_MAX characters, at most */
#define VALUE_USED (PX_REFLECT_FORM_MAX * 3 / 4 + 3)

/* ------------------------------------------------------------ forms */

static bool unreserved(uint8_t b)
{
    return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '-' ||
           b == '.' || b == '_' || b == '~';
}

/* The bytes besides the unreserved ones that percent-encoders leave. */
static const char *const kept_by[] = {"", "/", "!'()*"};

/* v[0..n) percent-encoded into out (PX_REFLECT_FORM_MAX), cut there, the
 * bytes in `keep` and the unreserved ones as they are. */
static size_t percent(const uint8_t *v, size_t n, const char *keep, uint8_t *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n && o < PX_REFLECT_FORM_MAX; i++) {
        uint8_t enc[3] = {'%', (uint8_t)hex[v[i] >> 4], (uint8_t)hex[v[i] & 15]};
        size_t k = unreserved(v[i]) || (v[i] != 0 && strchr(keep, v[i]) != NULL) ? 1 : 3;
        if (k == 1)
            enc[0] = v[i];
        for (size_t j = 0; j < k && o < PX_REFLECT_FORM_MAX; j++)
            out[o++] = enc[j];
    }
    return o;
}

/* The base64 core of v[0..n) after `align` (0..2) other bytes into out
 * (PX_REFLECT_FORM_MAX), cut there: the characters made of v's bits alone,
 * from ceil(8 align / 6) to floor(8 (align + n) / 6). */
static size_t base64_core(const uint8_t *v, size_t n, size_t align, uint8_t *out)
{
    uint8_t in[VALUE_USED + 2] = {0};
    char enc[(VALUE_USED + 2 + 2) / 3 * 4];

    if (n > VALUE_USED)
        n = VALUE_USED;
    memcpy(in + align, v, n);
    size_t m = http_base64_encode(in, align + n, enc, sizeof(enc));
    size_t from = (8 * align + 5) / 6, to = 8 * (align + n) / 6, len = 0;
    if (m != 0 && to > from) {
        len = to - from < PX_REFLECT_FORM_MAX ? to - from : PX_REFLECT_FORM_MAX;
        memcpy(out, enc + from, len);
    }
    explicit_bzero(in, sizeof(in));
    explicit_bzero(enc, sizeof(enc));
    return len;
}

/* The URL-safe alphabet's text of base64 text p[0..n), in place; whether
 * it differs. */
static bool url_safe(uint8_t *p, size_t n)
{
    bool changed = false;

    for (size_t i = 0; i < n; i++)
        if (p[i] == '+' || p[i] == '/') {
            p[i] = p[i] == '+' ? '-' : '_';
            changed = true;
        }
    return changed;
}

static bool has_form(const struct px_reflect *r, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->f[i].len == n && memcmp(r->f[i].p, p, n) == 0)
            return true;
    return false;
}

/* Add form p[0..n) of secret who (a copy); false when r is full. */
static bool add_form(struct px_reflect *r, const uint8_t *p, size_t n, int who)
{
    if (n == 0 || has_form(r, p, n))
        return true;
    if (r->n == PX_REFLECT_PATTERNS_MAX)
        return false;
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->f = realloc(r->f, r->cap * sizeof(*r->f));
        if (r->f == NULL)
            abort();
    }
    uint8_t *copy = malloc(n);
    if (copy == NULL)
        abort();
    memcpy(copy, p, n);
    r->f[r->n++] = (struct px_reflect_form){.p = copy, .len = n, .who = who};
    if (n > r->longest)
        r->longest = n;
    return true;
}

/* ------------------------------------------------------------ the gram table */

static uint32_t load_gram(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return v;
}

static size_t gram_hash(uint32_t v, unsigned bits)
{
    return (size_t)((v * 2654435761u) >> (32 - bits));
}

static void index_free(struct px_reflect *r)
{
    if (r->value != NULL)
        explicit_bzero(r->value, sizeof(*r->value) * r->n_grams);
    free(r->value);
    free(r->next);
    free(r->slot);
    r->value = NULL;
    r->next = NULL;
    r->slot = NULL;
    r->step = 0;
    r->n_grams = 0;
}

/* Index every form's grams at offsets below the step (see the top). */
static void index_build(struct px_reflect *r)
{
    size_t shortest = SIZE_MAX, k = 0;

    index_free(r);
    for (size_t i = 0; i < r->n; i++)
        shortest = r->f[i].len < shortest ? r->f[i].len : shortest;
    if (r->n == 0 || shortest < STEP_MIN)
        return;
    r->step = (shortest < STEP_SPAN ? shortest : STEP_SPAN) - GRAM + 1;
    for (r->bits = 4; ((size_t)1 << r->bits) < 4 * r->n * r->step; r->bits++)
        ;
    r->slot = calloc((size_t)1 << r->bits, sizeof(*r->slot));
    r->n_grams = r->n * r->step;
    r->value = malloc(r->n_grams * sizeof(*r->value));
    r->next = malloc(r->n_grams * sizeof(*r->next));
    if (r->slot == NULL || r->value == NULL || r->next == NULL)
        abort();
    for (size_t i = 0; i < r->n; i++)
        for (size_t off = 0; off < r->step; off++, k++) {
            size_t h = gram_hash(r->value[k] = load_gram(r->f[i].p + off), r->bits);
            r->next[k] = r->slot[h];
            r->slot[h] = (uint16_t)(k + 1);
        }
}

/* Add the forms of v[0..n) (see px_reflect_add). */
static bool add_forms(struct px_reflect *r, const char *v, size_t n, int who)
{
    const uint8_t *b = (const uint8_t *)v;
    uint8_t form[PX_REFLECT_FORM_MAX];
    size_t raw = n < PX_REFLECT_FORM_MAX ? n : PX_REFLECT_FORM_MAX, len;
    bool ok;

    if (n == 0 || has_form(r, b, raw))
        return true;
    ok = add_form(r, b, raw, who);
    for (size_t i = 0; i < sizeof(kept_by) / sizeof(kept_by[0]); i++) {
        len = percent(b, n, kept_by[i], form);
        ok = ok && add_form(r, form, len, who);
    }
    for (size_t a = 0; a < 3; a++) {
        len = base64_core(b, n, a, form);
        if (len < ENCODED_MIN)
            continue;
        ok = ok && add_form(r, form, len, who);
        if (url_safe(form, len))
            ok = ok && add_form(r, form, len, who);
    }
    explicit_bzero(form, sizeof(form));
    return ok;
}

bool px_reflect_add(struct px_reflect *r, const char *v, size_t n, int who)
{
    bool ok = add_forms(r, v, n, who);

    index_build(r);
    return ok;
}

void px_reflect_clear(struct px_reflect *r)
{
    index_free(r);
    for (size_t i = 0; i < r->n; i++) {
        explicit_bzero(r->f[i].p, r->f[i].len);
        free(r->f[i].p);
    }
    free(r->f);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ the search */

/* Keep the last (longest - 1) bytes of what s kept followed by p[0..n). */
static void keep(const struct px_reflect *r, struct px_reflect_stream *s, const char *p, size_t n)
{
    size_t want = r->longest > 0 ? r->longest - 1 : 0;

    if (n >= want) {
        memcpy(s->tail, p + (n - want), want);
        s->n = want;
        return;
    }
    size_t from_tail = s->n + n > want ? want - n : s->n; /* of the old, kept */
    memmove(s->tail, s->tail + (s->n - from_tail), from_tail);
    memcpy(s->tail + from_tail, p, n);
    s->n = from_tail + n;
}

/* A form that lies in p[0..n), through the gram table. */
static int within_indexed(const struct px_reflect *r, const uint8_t *p, size_t n)
{
    for (size_t j = 0; j + GRAM <= n; j += r->step) {
        uint32_t v = load_gram(p + j);
        for (size_t k = r->slot[gram_hash(v, r->bits)]; k != 0; k = r->next[k - 1]) {
            if (r->value[k - 1] != v)
                continue;
            const struct px_reflect_form *f = &r->f[(k - 1) / r->step];
            size_t off = (k - 1) % r->step;
            if (j >= off && j - off + f->len <= n && memcmp(p + j - off, f->p, f->len) == 0)
                return f->who;
        }
    }
    return PX_REFLECT_NONE;
}

/* A form that lies in p[0..n). */
static int within(const struct px_reflect *r, const char *p, size_t n)
{
    if (r->step > 0)
        return within_indexed(r, (const uint8_t *)p, n);
    for (size_t i = 0; i < r->n; i++)
        if (memmem(p, n, r->f[i].p, r->f[i].len) != NULL)
            return r->f[i].who;
    return PX_REFLECT_NONE;
}

/* A form that starts in what s kept and ends in p[0..n). */
static int seam(const struct px_reflect *r, const struct px_reflect_stream *s, const char *p,
                size_t n)
{
    uint8_t join[2 * (PX_REFLECT_FORM_MAX - 1)];
    size_t k = r->longest - 1 < n ? r->longest - 1 : n, len = s->n + k;

    if (s->n == 0 || k == 0)
        return PX_REFLECT_NONE;
    memcpy(join, s->tail, s->n);
    memcpy(join + s->n, p, k);
    int who = within(r, (const char *)join, len);
    explicit_bzero(join, len);
    return who;
}

int px_reflect_feed(const struct px_reflect *r, struct px_reflect_stream *s, const char *p,
                    size_t n)
{
    int who = n > 0 ? seam(r, s, p, n) : PX_REFLECT_NONE;

    if (who == PX_REFLECT_NONE)
        who = within(r, p, n);
    keep(r, s, p, n);
    return who;
}

size_t px_reflect_held(const struct px_reflect *r, const struct px_reflect_stream *s)
{
    size_t best = 0;

    for (size_t i = 0; i < r->n; i++) {
        const struct px_reflect_form *f = &r->f[i];
        size_t k = f->len - 1 < s->n ? f->len - 1 : s->n;
        /* the longest first: the first that matches is this form's answer */
        for (; k > best; k--)
            if (s->tail[s->n - k] == f->p[0] && memcmp(s->tail + s->n - k, f->p, k) == 0)
                break;
        if (k > best)
            best = k;
    }
    return best;
}

void px_reflect_stream_reset(struct px_reflect_stream *s)
{
    explicit_bzero(s->tail, s->n);
    s->n = 0;
}
