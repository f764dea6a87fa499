/*
 * fuzz_guest_reply.c - the guest agent's answers as Proxmox relays them
 * (sandbox-orchestrator/guest.c: sbx_guest_status_decode and
 * sbx_guest_read_decode), read the way sandboxctl reads them: the body
 * through jansson as pve.c loads it, then the decoder.  Every byte of these
 * answers comes from inside a sandbox.
 *
 * The first byte picks the mode; the oracle is this file's own: it builds
 * the answer from values it knows (its own JSON string writer, its own
 * base64 encoder, its own UTF-8 writer) and says what must come out.
 *
 * Mode 'S' (exec-status from bytes): a flag byte, a cap byte, a length
 * byte, then stdout's bytes and stderr's; each byte is written as PVE does,
 * a code point U+0000..U+00FF (as UTF-8 or as \u00XX, the flag says).
 *   - EXITED exactly when exited is true; the streams come back as the
 *     first min(n, max) bytes of what was written, never more than max;
 *     out-truncated/err-truncated are true exactly when the answer said so
 *     or the stream was cut; out-data and err-data are gone;
 *   - one field made the wrong type (the flag says which): BAD, and the
 *     error starts "agent/exec-status: " and names that field in quotes.
 *
 * Mode 'U' (exec-status with real UTF-8): stdout is text of code points up
 * to U+07FF built from pairs of bytes.  When a code point above U+00FF
 * comes before max bytes are out, the bytes are the UTF-8 itself (cut to
 * max); else the Latin-1 bytes of the code points (cut to max).
 *
 * Mode 'R' (file-read): a flag byte, a cap byte, then the file's bytes,
 * written as base64 (decode=0) or as Latin-1 code points, with or without
 * bytes-read (right or wrong) and truncated, optionally with one base64
 * digit replaced by a byte that is none.
 *   - success exactly when nothing is wrong and the file holds at most max
 *     bytes; then the bytes are the file's;
 *   - a failure starts "agent/file-read: " and names a field at fault:
 *     'content' (too long, not base64), 'bytes-read', or says the file is
 *     larger (truncated, which is read first).
 *
 * Any other first byte: the rest is the HTTP body itself.  Both decoders
 * take its "data" (whatever it is): no crash, no stream or file over its
 * cap, every error starting with its call's name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz_check.h"
#include "guest.h"

struct text {
    char *p;
    size_t n, cap;
};

static void put(struct text *t, const void *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        if (!t->p)
            abort();
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = '\0';
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* Bytes as a JSON string of code points U+0000..U+00FF (PVE's Latin-1). */
static void put_latin1(struct text *t, const uint8_t *s, size_t n, int escape_high)
{
    static const char hex[] = "0123456789abcdef";

    puts_(t, "\"");
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '"' || c == '\\' || c < 0x20 || (c >= 0x80 && escape_high)) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(t, e, 6);
        } else if (c < 0x80) {
            put(t, &c, 1);
        } else {
            uint8_t u[2] = {(uint8_t)(0xC0 | (c >> 6)), (uint8_t)(0x80 | (c & 0x3F))};
            put(t, u, 2);
        }
    }
    puts_(t, "\"");
}

/* RFC 4648 base64 with padding, as a JSON string. */
static void put_base64(struct text *t, const uint8_t *s, size_t n, int spoil, size_t where)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t start;

    puts_(t, "\"");
    start = t->n;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        char q[4] = {al[v >> 18 & 63], al[v >> 12 & 63], i + 1 < n ? al[v >> 6 & 63] : '=',
                     i + 2 < n ? al[v & 63] : '='};
        put(t, q, 4);
    }
    if (spoil && t->n > start)
        t->p[start + where % (t->n - start)] = '*'; /* in no alphabet, not JSON-special */
    puts_(t, "\"");
}

/* The "data" of a whole answer, as pve.c takes it. */
static json_t *load_data(const struct text *t, json_t **doc)
{
    *doc = json_loadb(t->p, t->n, JSON_ALLOW_NUL, NULL);
    CHECK(*doc, "the harness wrote JSON jansson cannot read: %.200s", t->p);
    return json_object_get(*doc, "data");
}

static int bytes_equal(json_t *v, const uint8_t *want, size_t n)
{
    return json_is_string(v) && json_string_length(v) == n &&
           memcmp(json_string_value(v), want, n) == 0;
}

static size_t cap_of(uint8_t b)
{
    return b == 255 ? (size_t)1 << 20 : (size_t)(b % 64);
}

/* The fields of exec-status a wrong type can go into, and the JSON put there. */
static const char *const wrong_field[] = {"exited",   "exitcode",      "signal",       "out-data",
                                          "err-data", "out-truncated", "err-truncated"};
static const char *const wrong_value[] = {"\"yes\"", "\"0\"", "1.5", "42", "[]", "\"1\"", "{}"};

static void status_mode(const uint8_t *d, size_t n)
{
    struct text t = {0};
    char err[512], num[32];
    json_t *doc, *st;
    uint8_t flags, wrong;
    size_t max, nout, nerr;
    const uint8_t *out, *errb;
    int exited, otr, etr;
    enum sbx_guest_state state;

    if (n < 4)
        return;
    flags = d[0];
    max = cap_of(d[1]);
    wrong = d[2];
    nout = d[3] <= n - 4 ? d[3] : n - 4;
    out = d + 4;
    errb = out + nout;
    nerr = n - 4 - nout;
    exited = flags & 1;
    otr = (flags >> 3) & 1;
    etr = (flags >> 4) & 1;
    puts_(&t, "{\"data\":{\"exited\":");
    puts_(&t, (flags & 32) ? (exited ? "1" : "0") : (exited ? "true" : "false"));
    if (flags & 2) {
        snprintf(num, sizeof num, ",\"exitcode\":%d", wrong % 256);
        puts_(&t, num);
    }
    if (flags & 4)
        puts_(&t, ",\"signal\":9");
    if (otr)
        puts_(&t, ",\"out-truncated\":1");
    if (etr)
        puts_(&t, ",\"err-truncated\":true");
    puts_(&t, ",\"out-data\":");
    put_latin1(&t, out, nout, flags & 128);
    puts_(&t, ",\"err-data\":");
    put_latin1(&t, errb, nerr, !(flags & 128));
    if (flags & 64) {
        /* jansson keeps the last of a key given twice */
        puts_(&t, ",\"");
        puts_(&t, wrong_field[wrong % 7]);
        puts_(&t, "\":");
        puts_(&t, wrong_value[wrong % 7]);
    }
    puts_(&t, "}}");
    st = load_data(&t, &doc);
    state = sbx_guest_status_decode(st, max, err, sizeof err);
    if (flags & 64) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", wrong_field[wrong % 7]);
        CHECK(state == SBX_GUEST_BAD, "a wrong %s was taken", quoted);
        CHECK(strncmp(err, "agent/exec-status: ", 19) == 0 && strstr(err, quoted),
              "the error does not name %s: %s", quoted, err);
    } else if (!exited) {
        CHECK(state == SBX_GUEST_RUNNING, "exited false read as %d (%s)", state, err);
    } else {
        size_t ko = nout < max ? nout : max, ke = nerr < max ? nerr : max;
        CHECK(state == SBX_GUEST_EXITED, "exited true read as %d (%s)", state, err);
        CHECK(bytes_equal(json_object_get(st, "out-bytes"), out, ko), "stdout differs");
        CHECK(bytes_equal(json_object_get(st, "err-bytes"), errb, ke), "stderr differs");
        CHECK(json_is_true(json_object_get(st, "out-truncated")) == (otr || nout > max),
              "out-truncated wrong");
        CHECK(json_is_true(json_object_get(st, "err-truncated")) == (etr || nerr > max),
              "err-truncated wrong");
        CHECK(!json_object_get(st, "out-data") && !json_object_get(st, "err-data"),
              "the text was kept beside the bytes");
    }
    json_decref(doc);
    free(t.p);
}

/* Code point cp as UTF-8 (cp < 0x800). */
static size_t utf8_put(uint8_t *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    o[0] = (uint8_t)(0xC0 | (cp >> 6));
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
}

static void utf8_mode(const uint8_t *d, size_t n)
{
    size_t max, ncp = 0, nu = 0, nl = 0, before_wide = 0;
    unsigned *cps;
    uint8_t *utf8, *latin;
    struct text t = {0};
    char err[512];
    json_t *doc, *st, *v;
    int wide = 0;

    if (n < 1)
        return;
    max = cap_of(d[0]);
    d++, n--;
    cps = malloc((n / 2 + 1) * sizeof *cps);
    utf8 = malloc(n + 1);
    latin = malloc(n / 2 + 1);
    if (!cps || !utf8 || !latin)
        abort();
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned cp = ((unsigned)d[i] << 8 | d[i + 1]) % 0x800;
        if (cp == '"' || cp == '\\' || cp < 0x20)
            cp = 'x';
        cps[ncp++] = cp;
        nu += utf8_put(utf8 + nu, cp);
        if (cp > 0xFF && !wide) {
            wide = 1;
            before_wide = nl;
        }
        if (cp <= 0xFF)
            latin[nl++] = (uint8_t)cp;
    }
    puts_(&t, "{\"data\":{\"exited\":true,\"out-data\":\"");
    put(&t, utf8, nu);
    puts_(&t, "\"}}");
    st = load_data(&t, &doc);
    CHECK(sbx_guest_status_decode(st, max, err, sizeof err) == SBX_GUEST_EXITED, "%s", err);
    v = json_object_get(st, "out-bytes");
    if (wide && before_wide < max)
        CHECK(bytes_equal(v, utf8, nu < max ? nu : max), "text with a wide code point differs");
    else
        CHECK(bytes_equal(v, latin, nl < max ? nl : max), "Latin-1 text differs");
    CHECK(json_string_length(v) <= max, "over the cap");
    json_decref(doc);
    free(t.p);
    free(cps);
    free(utf8);
    free(latin);
}

static void read_mode(const uint8_t *d, size_t n)
{
    struct text t = {0};
    char err[512], num[64];
    json_t *doc, *ans;
    uint8_t flags, *data = NULL;
    size_t max, len = 0;
    int b64, count, count_wrong, truncated, spoil, rc, fail;

    if (n < 3)
        return;
    flags = d[0];
    max = cap_of(d[1]);
    d += 2, n -= 2;
    b64 = flags & 1;
    count = flags & 2;
    count_wrong = count && (flags & 4);
    truncated = flags & 8;
    spoil = b64 && (flags & 16) && n > 0;
    puts_(&t, "{\"data\":{\"content\":");
    if (b64)
        put_base64(&t, d, n, spoil, flags >> 5);
    else
        put_latin1(&t, d, n, flags & 16);
    if (count) {
        snprintf(num, sizeof num, ",\"bytes-read\":%zu", n + (count_wrong ? 1 + flags % 3 : 0));
        puts_(&t, num);
    }
    if (truncated)
        puts_(&t, (flags & 32) ? ",\"truncated\":1" : ",\"truncated\":true");
    puts_(&t, "}}");
    ans = load_data(&t, &doc);
    rc = sbx_guest_read_decode(ans, b64, max, &data, &len, err, sizeof err);
    fail = truncated || spoil || count_wrong || n > max;
    CHECK((rc != 0) == fail, "rc %d, expected %s (%s)", rc, fail ? "a failure" : "success",
          rc ? err : "");
    if (rc == 0) {
        CHECK(len == n && memcmp(data, d, n) == 0, "the bytes differ");
    } else {
        CHECK(strncmp(err, "agent/file-read: ", 17) == 0, "unnamed error: %s", err);
        /* truncated is read first; of the other faults, any may be named */
        if (truncated)
            CHECK(strstr(err, "larger than"), "truncated not said: %s", err);
        else
            CHECK((n > max && strstr(err, "'content' holds more than")) ||
                      (spoil && strstr(err, "'content' is not base64")) ||
                      (count_wrong && strstr(err, "'bytes-read'")),
                  "the fault is not named: %s", err);
        CHECK(!data, "data left on failure");
    }
    free(data);
    json_decref(doc);
    free(t.p);
}

static void raw_mode(const uint8_t *d, size_t n)
{
    json_t *doc = json_loadb((const char *)d, n, JSON_ALLOW_NUL, NULL);
    json_t *data = doc ? json_object_get(doc, "data") : NULL;
    json_t *copy = data ? json_deep_copy(data) : json_null();
    size_t max = 16, len = 0;
    unsigned char *bytes = NULL;
    char err[512];
    enum sbx_guest_state state = sbx_guest_status_decode(copy, max, err, sizeof err);

    if (state == SBX_GUEST_EXITED) {
        CHECK(json_string_length(json_object_get(copy, "out-bytes")) <= max, "stdout over cap");
        CHECK(json_string_length(json_object_get(copy, "err-bytes")) <= max, "stderr over cap");
    } else if (state == SBX_GUEST_BAD) {
        CHECK(strncmp(err, "agent/exec-status: ", 19) == 0, "unnamed error: %s", err);
    }
    if (sbx_guest_read_decode(data, (n & 1), max, &bytes, &len, err, sizeof err) == 0)
        CHECK(len <= max, "file over cap");
    else
        CHECK(strncmp(err, "agent/file-read: ", 17) == 0 && !bytes, "unnamed error: %s", err);
    free(bytes);
    json_decref(copy);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0]) {
    case 'S': status_mode(data + 1, size - 1); break;
    case 'U': utf8_mode(data + 1, size - 1); break;
    case 'R': read_mode(data + 1, size - 1); break;
    default: raw_mode(data + 1, size - 1); break;
    }
    return 0;
}
