/*
 * fuzz_reflect.c - the streaming search for reflected secrets
 * (proxy/reflect.c) against memmem over the whole stream.
 *
 * The input makes one or two secrets, then a response: runs of its own
 * bytes, the secrets' forms as an echo would carry them (the value, its
 * percent-encoding and its base64 after 0..2 other bytes, encoded here
 * with an encoder of this file's own), and cut-off beginnings of them;
 * then the points where the response is cut into pieces, the way reads
 * cut it.
 *
 * Properties:
 *   1. a feed reports a secret iff a form (the scanner's own list) ends in
 *      the bytes of that feed, found by memmem over everything fed so far;
 *      and the first feed that reports one is the first where memmem finds
 *      one;
 *   2. px_reflect_held is the longest end of the stream that begins a form
 *      (computed here naively), so a caller that passed on all but the held
 *      bytes never passed on a byte of the form found next: every form
 *      found in the hitting feed starts at or after what was passed on;
 *   3. the forms cover the echoes: the secret's percent-encoding (this
 *      file's encoder) begins with a form, and base64 of the secret between
 *      any other bytes holds one (for a secret of 8 bytes or more);
 *   4. no form is longer than PX_REFLECT_FORM_MAX.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "reflect.h"

#define STREAM_MAX 8192
#define SECRET_MAX 64
#define PIECES_MAX 64

/* ------------------------------------------------------------ reference encoders */

static size_t ref_base64(const uint8_t *in, size_t n, char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;

    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = i + 1 < n ? a[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? a[v & 63] : '=';
    }
    return o;
}

static size_t ref_percent(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        uint8_t b = in[i];
        if ((b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') ||
            strchr("-._~", b) != NULL)
            out[o++] = (char)b;
        else
            o += (size_t)sprintf(out + o, "%%%02X", b);
    }
    return o;
}

/* The first form of r found in s[0..n), its start in *at; -1 if none. */
static int first_form(const struct px_reflect *r, const uint8_t *s, size_t n, size_t *at)
{
    int who = -1;

    *at = SIZE_MAX;
    for (size_t i = 0; i < r->n; i++) {
        const uint8_t *m = memmem(s, n, r->f[i].p, r->f[i].len);
        if (m != NULL && (size_t)(m - s) < *at) {
            *at = (size_t)(m - s);
            who = r->f[i].who;
        }
    }
    return who;
}

/* The longest end of s[0..n) that is a proper prefix of a form. */
static size_t ref_held(const struct px_reflect *r, const uint8_t *s, size_t n)
{
    size_t best = 0;

    for (size_t i = 0; i < r->n; i++)
        for (size_t k = 1; k < r->f[i].len && k <= n; k++)
            if (memcmp(s + n - k, r->f[i].p, k) == 0 && k > best)
                best = k;
    return best;
}

/* ------------------------------------------------------------ the generator */

struct secret {
    uint8_t v[SECRET_MAX];
    size_t n;
};

static void make_secret(struct input *in, struct secret *s, int k)
{
    s->n = 1 + take(in) % SECRET_MAX;
    for (size_t i = 0; i < s->n; i++) {
        uint8_t b = take(in);
        /* printable mostly (as keys are); now and then any byte but NUL */
        s->v[i] = b < 0xe0 ? (uint8_t)(0x21 + b % 0x5e) : (uint8_t)(b | 1);
    }
    s->v[0] ^= (uint8_t)k; /* two secrets that differ */
}

/* Append the echo of secret s chosen by op to out (room STREAM_MAX). */
static void append_echo(struct input *in, const struct secret *s, uint8_t op, uint8_t *out,
                        size_t *len)
{
    char enc[4 * (SECRET_MAX + 4)];
    uint8_t buf[SECRET_MAX + 4];
    size_t m = 0;

    switch (op % 4) {
    case 0: memcpy(enc, s->v, s->n), m = s->n; break;
    case 1: m = ref_percent(s->v, s->n, enc); break;
    default: {
        size_t before = take(in) % 3, after = take(in) % 3;
        for (size_t i = 0; i < before; i++)
            buf[i] = take(in);
        memcpy(buf + before, s->v, s->n);
        for (size_t i = 0; i < after; i++)
            buf[before + s->n + i] = take(in);
        m = ref_base64(buf, before + s->n + after, enc);
    }
    }
    if (op & 0x80) /* cut off: its beginning only */
        m = m * (take(in) % 100) / 100;
    if (*len + m <= STREAM_MAX) {
        memcpy(out + *len, enc, m);
        *len += m;
    }
}

static void check_covered(const struct px_reflect *r, const struct secret *s)
{
    char enc[4 * (SECRET_MAX + 4)];
    uint8_t buf[SECRET_MAX + 4];
    size_t at, m = ref_percent(s->v, s->n, enc);

    for (size_t i = 0; i < r->n; i++)
        CHECK(r->f[i].len > 0 && r->f[i].len <= PX_REFLECT_FORM_MAX, "form %zu: %zu bytes", i,
              r->f[i].len);
    CHECK(first_form(r, (const uint8_t *)enc, m, &at) >= 0 && at == 0,
          "the percent-encoding of a %zu-byte secret begins with no form", s->n);
    if (s->n < 8)
        return;
    for (size_t before = 0; before < 3; before++)
        for (size_t after = 0; after < 3; after++) {
            memset(buf, 'x', sizeof(buf));
            memcpy(buf + before, s->v, s->n);
            m = ref_base64(buf, before + s->n + after, enc);
            CHECK(first_form(r, (const uint8_t *)enc, m, &at) >= 0,
                  "base64 of the secret after %zu and before %zu bytes holds no form", before,
                  after);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t stream[STREAM_MAX];
    struct input in = {data, size};
    struct secret sec[2];
    struct px_reflect r = {0};
    struct px_reflect_stream st = {0};
    size_t n_sec = 1 + take(&in) % 2, len = 0;

    for (size_t k = 0; k < n_sec; k++) {
        make_secret(&in, &sec[k], (int)k + 1);
        px_reflect_add(&r, (const char *)sec[k].v, sec[k].n, (int)k);
        check_covered(&r, &sec[k]);
    }
    /* the response: ops until the input runs out or the stream is full */
    size_t n_pieces = take(&in) % PIECES_MAX;
    size_t cut[PIECES_MAX];
    for (size_t i = 0; i < n_pieces; i++)
        cut[i] = (size_t)take(&in) << 8 | take(&in);
    while (in.n > 0 && len < STREAM_MAX) {
        uint8_t op = take(&in);
        if ((op & 0x70) == 0x70) {
            append_echo(&in, &sec[op % n_sec], op, stream, &len);
        } else {
            size_t run = 1 + op % 16;
            for (size_t i = 0; i < run && len < STREAM_MAX && in.n > 0; i++)
                stream[len++] = take(&in);
        }
    }
    /* feed it in pieces; the cut points are sorted in passing */
    size_t fed = 0, passed = 0, at;
    bool found = false;
    for (size_t i = 0; i <= n_pieces && !found; i++) {
        size_t end = i < n_pieces ? cut[i] % (len + 1) : len;
        if (end < fed)
            end = fed;
        int who = px_reflect_feed(&r, &st, (const char *)stream + fed, end - fed);
        int want = first_form(&r, stream, end, &at);
        CHECK(who == want || (who >= 0 && want >= 0), "feed to %zu: found %d, memmem %d", end, who,
              want);
        if (who >= 0) {
            /* (2) nothing of it was passed on */
            CHECK(at >= passed, "a form at %zu, but %zu bytes were passed on", at, passed);
            found = true;
        }
        fed = end;
        size_t held = px_reflect_held(&r, &st);
        CHECK(held == ref_held(&r, stream, fed), "held %zu, expected %zu", held,
              ref_held(&r, stream, fed));
        passed = fed - held;
    }
    if (!found)
        CHECK(first_form(&r, stream, len, &at) < 0, "memmem finds a form at %zu, feeds did not",
              at);
    px_reflect_clear(&r);
    return 0;
}
