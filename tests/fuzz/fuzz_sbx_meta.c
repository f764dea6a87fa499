/*
 * fuzz_sbx_meta.c - the sandbox metadata block of a VM's description
 * (sandbox-orchestrator/meta.c), which anyone with VM.Config.Options on the
 * VM can edit.
 *
 * The first byte picks the mode; the rest is the input.
 *
 * Mode "decode" (any first byte but 'E'): the rest is a description.
 *   - decode never crashes, and says ABSENT exactly when no line (without
 *     its \r\n) is the marker "sandboxctl-sandbox v1" and there is no NUL;
 *   - MALFORMED comes with a one-line reason that starts "description";
 *   - OK gives values that each pass their validator, and each appears
 *     whole on its own "key: value" line of the input (nothing truncated
 *     into something else); so do the secrets' names, none twice;
 *   - each grant's methods and paths (grant.h) are already in canonical
 *     form (sbx_grant_scope_normalize leaves them as they are), and
 *     sbx_grant_check accepts the grant: what the description grants is a
 *     line egressd loads (a bare word of the policy language such as "ip"
 *     or "deny" is refused, for allows too); and the grant, written back as
 *     HOST[:PORTS][|methods=M][|paths=G]@TIME, is a whole word of a
 *     "grants:" line of the input;
 *   - an OK decode re-encodes, and that text decodes to the same values;
 *     the only refusal allowed is the length of the description.
 *
 * Mode "encode" ('E'): the rest is cut at 0x01 bytes into owner, policy,
 * address, created, expires (8 bytes each, little-endian), then allows,
 * and grants: a field that starts with 'G' is a grant's entry then its
 * time, one that starts with 'S' a scoped grant's entry, methods, paths
 * (fields), then its time.
 *   - encode either refuses with a reason, or writes a text of at most
 *     SBX_DESC_MAX bytes, without NUL, that decodes back to exactly the
 *     values given;
 *   - it refuses whenever a value fails its validator, a time is outside
 *     what the decoder reads (1970..9999), expires < created, or a grant's
 *     methods or paths are not in canonical form or egressd would not
 *     load the grant.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fuzz_check.h"
#include "grant.h"
#include "meta.h"

#define MARKER   "sandboxctl-sandbox v1"
#define TIME_MAX ((time_t)253402300799) /* 9999-12-31T23:59:59Z */

static int same(const struct sbx_meta *a, const struct sbx_meta *b)
{
    if (strcmp(a->owner, b->owner) || strcmp(a->policy, b->policy) ||
        strcmp(a->address, b->address) || a->created != b->created || a->expires != b->expires ||
        a->nallow != b->nallow || a->nsecrets != b->nsecrets || a->ngrants != b->ngrants)
        return 0;
    for (int i = 0; i < a->ngrants; i++)
        if (strcmp(a->grants[i].allow, b->grants[i].allow) != 0 ||
            strcmp(a->grants[i].methods, b->grants[i].methods) != 0 ||
            strcmp(a->grants[i].paths, b->grants[i].paths) != 0 ||
            a->grants[i].until != b->grants[i].until)
            return 0;
    for (int i = 0; i < a->nallow; i++)
        if (strcmp(a->allow[i], b->allow[i]) != 0)
            return 0;
    for (int i = 0; i < a->nsecrets; i++)
        if (strcmp(a->secrets[i], b->secrets[i]) != 0)
            return 0;
    return 1;
}

/* The input holds a line "key: value" (ending in \n, \r\n or the end). */
static int has_line(const char *text, size_t len, const char *key, const char *value)
{
    char want[400];
    int n = snprintf(want, sizeof want, "%s: %s", key, value);

    if (n < 0 || (size_t)n >= sizeof want)
        return 0;
    if (!*value)
        n--; /* "allow:" may stand without its blank */
    for (size_t i = 0; i + (size_t)n <= len; i++) {
        if ((i > 0 && text[i - 1] != '\n') || memcmp(text + i, want, (size_t)n) != 0)
            continue;
        size_t e = i + (size_t)n;
        if (e == len || text[e] == '\n' ||
            (text[e] == '\r' && (e + 1 == len || text[e + 1] == '\n')))
            return 1;
        if (!*value && text[e] == ' ')
            return 1;
    }
    return 0;
}

/* The input holds a line "key: ..." in which word stands whole, between
 * blanks or a blank and the end of the line (before its \r\n). */
static int has_word(const char *text, size_t len, const char *key, const char *word)
{
    size_t kl = strlen(key), wl = strlen(word), start = 0;

    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != '\n')
            continue;
        size_t n = i - start;
        const char *l = text + start;
        if (n > 0 && l[n - 1] == '\r')
            n--;
        start = i + 1;
        if (n < kl + 1 || memcmp(l, key, kl) != 0 || l[kl] != ':')
            continue;
        for (size_t k = kl + 1; k + wl <= n; k++)
            if (l[k - 1] == ' ' && memcmp(l + k, word, wl) == 0 &&
                (k + wl == n || l[k + wl] == ' '))
                return 1;
    }
    return 0;
}

/* Some line of text, without its \n and one \r, is the marker. */
static int has_marker(const char *text, size_t len)
{
    size_t start = 0;

    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != '\n')
            continue;
        size_t n = i - start;
        if (n > 0 && text[start + n - 1] == '\r')
            n--;
        if (n == sizeof MARKER - 1 && memcmp(text + start, MARKER, n) == 0)
            return 1;
        start = i + 1;
    }
    return 0;
}

/* g's methods and paths are in the form sandboxctl writes them, and
 * egressd would load g; else 0 with why. */
static int valid_scope(const struct sbx_grant *g, char *why, size_t whylen)
{
    char methods[SBX_GRANT_METHODS_MAX], paths[SBX_GRANT_PATHS_MAX], err[512] = "";

    snprintf(methods, sizeof methods, "%s", g->methods);
    snprintf(paths, sizeof paths, "%s", g->paths);
    if (sbx_grant_scope_normalize(methods, paths, err, sizeof err) != 0) {
        snprintf(why, whylen, "scope refused: %s", err);
        return 0;
    }
    if (strcmp(methods, g->methods) != 0 || strcmp(paths, g->paths) != 0) {
        snprintf(why, whylen,
                 "scope not canonical: methods '%s' is '%s', paths '%.100s' is '%.100s'",
                 g->methods, methods, g->paths, paths);
        return 0;
    }
    if (sbx_grant_check(g, err, sizeof err) != 0) {
        snprintf(why, whylen, "egressd would not load it: %s", err);
        return 0;
    }
    return 1;
}

static int valid_values(const struct sbx_meta *m)
{
    if (!sbx_meta_valid_owner(m->owner) || !sbx_meta_valid_policy(m->policy) ||
        !sbx_meta_valid_address(m->address) || m->nallow < 0 || m->nallow > SBX_META_MAX_ALLOW)
        return 0;
    for (int i = 0; i < m->nallow; i++) {
        struct sbx_grant g = {0};
        char why[700];
        snprintf(g.allow, sizeof g.allow, "%s", m->allow[i]);
        if (!sbx_meta_valid_allow(m->allow[i]) || !valid_scope(&g, why, sizeof why))
            return 0; /* an allow is a line egressd loads, as a grant is */
    }
    if (m->nsecrets < 0 || m->nsecrets > SBX_META_MAX_SECRETS)
        return 0;
    for (int i = 0; i < m->nsecrets; i++) {
        if (!sbx_meta_valid_secret(m->secrets[i]))
            return 0;
        for (int k = 0; k < i; k++)
            if (strcmp(m->secrets[k], m->secrets[i]) == 0)
                return 0;
    }
    if (m->ngrants < 0 || m->ngrants > SBX_META_MAX_GRANTS)
        return 0;
    for (int i = 0; i < m->ngrants; i++) {
        char why[700];
        if (!sbx_meta_valid_allow(m->grants[i].allow) || m->grants[i].until < 0 ||
            m->grants[i].until > TIME_MAX || !valid_scope(&m->grants[i], why, sizeof why))
            return 0;
    }
    return m->created >= 0 && m->expires <= TIME_MAX && m->created <= m->expires;
}

static void check_text(const char *buf, int n)
{
    CHECK(n > 0 && n <= SBX_DESC_MAX, "encoded length %d", n);
    CHECK(memchr(buf, '\0', (size_t)n) == NULL && buf[n] == '\0', "NUL inside the text");
    CHECK(buf[n - 1] == '\n', "the text does not end in a newline");
}

static void check_error(const char *err)
{
    CHECK(err[0] != '\0', "a refusal without a reason");
    for (const char *c = err; *c; c++)
        CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in '%s'",
              (unsigned char)*c, err);
}

static void fuzz_decode(const char *text, size_t len)
{
    struct sbx_meta m, back;
    char err[512] = "", buf[SBX_DESC_MAX + 1];
    enum sbx_meta_result r = sbx_meta_decode(text, len, &m, err, sizeof err);
    int has_nul = memchr(text, '\0', len) != NULL;

    CHECK(r == SBX_META_OK || r == SBX_META_ABSENT || r == SBX_META_MALFORMED, "result %d", r);
    CHECK((r == SBX_META_ABSENT) == (!has_nul && !has_marker(text, len)),
          "ABSENT is %d, marker %d, NUL %d", r == SBX_META_ABSENT, has_marker(text, len), has_nul);
    if (r == SBX_META_MALFORMED) {
        check_error(err);
        CHECK(strncmp(err, "description", 11) == 0, "reason without its place: %s", err);
    }
    if (r != SBX_META_OK)
        return;
    CHECK(valid_values(&m), "decoded values that fail their validators");
    CHECK(has_line(text, len, "owner", m.owner), "owner '%s' not a whole line", m.owner);
    CHECK(has_line(text, len, "policy", m.policy), "policy '%s' not a whole line", m.policy);
    CHECK(has_line(text, len, "address", m.address), "address '%s' not a whole line", m.address);
    for (int i = 0; i < m.nallow; i++)
        CHECK(memmem(text, len, m.allow[i], strlen(m.allow[i])) != NULL, "allow '%s' not given",
              m.allow[i]);
    for (int i = 0; i < m.nsecrets; i++)
        CHECK(memmem(text, len, m.secrets[i], strlen(m.secrets[i])) != NULL,
              "secret '%s' not given", m.secrets[i]);
    for (int i = 0; i < m.ngrants; i++) {
        const struct sbx_grant *gr = &m.grants[i];
        char g[SBX_ALLOW_MAX + SBX_GRANT_METHODS_MAX + SBX_GRANT_PATHS_MAX + 64], until[32],
            why[700];
        CHECK(valid_scope(gr, why, sizeof why), "grant '%s' methods '%s' paths '%s': %s", gr->allow,
              gr->methods, gr->paths, why);
        sbx_time_format(gr->until, until, sizeof until);
        snprintf(g, sizeof g, "%s%s%s%s%s@%s", gr->allow, gr->methods[0] ? "|methods=" : "",
                 gr->methods, gr->paths[0] ? "|paths=" : "", gr->paths, until);
        CHECK(has_word(text, len, "grants", g), "grant '%s' not a whole word of a grants line", g);
    }

    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    if (n < 0) {
        check_error(err);
        CHECK(strstr(err, "longer than") != NULL, "decoded values refused by encode: %s", err);
        return;
    }
    check_text(buf, n);
    CHECK(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK,
          "re-encoded text does not decode: %s", err);
    CHECK(same(&m, &back), "the round trip changed a value");
}

/* Copies the next field (up to 0x01 or the end) into dst (cap bytes) and
 * advances *p; longer fields are cut, which the encoder sees as given. */
static void field(const char **p, const char *end, char *dst, size_t cap)
{
    const char *f = memchr(*p, 1, (size_t)(end - *p));
    size_t n = f ? (size_t)(f - *p) : (size_t)(end - *p);

    if (n >= cap)
        n = cap - 1;
    memcpy(dst, *p, n);
    dst[n] = '\0';
    *p = f ? f + 1 : end;
}

static time_t time_field(const char **p, const char *end)
{
    uint64_t v = 0;

    for (int i = 0; i < 8 && *p < end; i++, (*p)++)
        v |= (uint64_t)(unsigned char)**p << (8 * i);
    /* Most inputs should land near now; the top bit asks for any value. */
    if (!(v >> 63))
        v = 1700000000u + v % 400000000u;
    return (time_t)v;
}

static void fuzz_encode(const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    struct sbx_meta m, back;
    char buf[SBX_DESC_MAX + 1], err[512] = "";

    memset(&m, 0, sizeof m);
    field(&p, end, m.owner, sizeof m.owner);
    field(&p, end, m.policy, sizeof m.policy);
    field(&p, end, m.address, sizeof m.address);
    m.created = time_field(&p, end);
    m.expires = time_field(&p, end);
    /* Fields that start with 'G' are grants (then their time), with 'S'
     * scoped grants (entry, methods, paths, then their time), the others
     * allows. */
    while (p < end) {
        if ((*p == 'G' || *p == 'S') && m.ngrants < SBX_META_MAX_GRANTS) {
            struct sbx_grant *g = &m.grants[m.ngrants++];
            int scoped = *p++ == 'S';
            field(&p, end, g->allow, sizeof g->allow);
            if (scoped) {
                field(&p, end, g->methods, sizeof g->methods);
                field(&p, end, g->paths, sizeof g->paths);
            }
            g->until = time_field(&p, end);
        } else if (m.nallow < SBX_META_MAX_ALLOW) {
            field(&p, end, m.allow[m.nallow++], SBX_ALLOW_MAX);
        } else {
            break;
        }
    }

    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    if (n < 0) {
        check_error(err);
        return;
    }
    CHECK(valid_values(&m), "encode wrote values that fail their validators (owner '%s')", m.owner);
    check_text(buf, n);
    enum sbx_meta_result r = sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err);
    CHECK(r == SBX_META_OK, "encoded text does not decode (%d): %s", r, err);
    CHECK(same(&m, &back), "encode then decode changed a value");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 3 * SBX_DESC_MAX)
        return 0;
    if (data[0] == 'E')
        fuzz_encode((const char *)data + 1, size - 1);
    else
        fuzz_decode((const char *)data + 1, size - 1);
    return 0;
}
