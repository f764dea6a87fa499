/* meta.c - encode and decode the metadata block of a sandbox's description. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "grant.h"
#include "meta.h"
#include "printable.h"

#define MARKER       "sandboxctl-sandbox v1"
#define HEADER       "Sandbox managed by sandboxctl: change it with sandboxctl, not by hand."
#define LINE_MAX_LEN 10000
#define TIME_MAX     ((time_t)253402300799) /* 9999-12-31T23:59:59Z */
/* The parts of a grant's scope in the grants line (meta.h). */
#define GRANT_METHODS "methods="
#define GRANT_PATHS   "paths="

/* The keys of the block, in the order the encoder writes them. */
enum key {
    K_OWNER,
    K_CREATED,
    K_EXPIRES,
    K_POLICY,
    K_ADDRESS,
    K_ALLOW,
    K_SECRETS,
    K_GRANTS,
    K_COUNT
};
static const char *const key_names[K_COUNT] = {"owner",   "created", "expires", "policy",
                                               "address", "allow",   "secrets", "grants"};
/* Keys from K_OPTIONAL on may be missing (an empty list). */
#define K_OPTIONAL K_ALLOW

int sbx_meta_valid_owner(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._@+-", s[i]))
            return 0;
    return 1;
}

int sbx_meta_valid_policy(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && !strchr("._-", s[i]))
            return 0;
    return 1;
}

int sbx_meta_valid_secret(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= SBX_SECRET_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) &&
            (i == 0 || (s[i] != '_' && s[i] != '-')))
            return 0;
    return 1;
}

int sbx_meta_valid_address(const char *s)
{
    struct in_addr a;
    char back[INET_ADDRSTRLEN];

    if (strlen(s) >= sizeof back || inet_pton(AF_INET, s, &a) != 1)
        return 0;
    inet_ntop(AF_INET, &a, back, sizeof back);
    return strcmp(back, s) == 0;
}

/* One DNS label run: LDH labels separated by dots, no empty label. */
static int valid_hostname(const char *s, size_t n)
{
    size_t label = 0;

    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '.') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
        } else if (islower((unsigned char)ch) || isdigit((unsigned char)ch) ||
                   (ch == '-' && label > 0)) {
            if (++label > 63)
                return 0;
        } else {
            return 0;
        }
    }
    return label > 0 && s[n - 1] != '-';
}

/* egressd (policy/) refuses a name whose last label looks like a number
 * ("123", "a.0x1f"): only a dotted-quad IPv4 address may end in digits. */
static int numeric_last_label(const char *s, size_t n)
{
    size_t start = n;
    char quad[16];

    while (start > 0 && s[start - 1] != '.')
        start--;
    const char *l = s + start;
    size_t len = n - start, i = 0;
    if (len >= 2 && l[0] == '0' && l[1] == 'x')
        for (i = 2; i < len && (isdigit((unsigned char)l[i]) || (l[i] >= 'a' && l[i] <= 'f'));)
            i++;
    else
        while (i < len && isdigit((unsigned char)l[i]))
            i++;
    if (i < len)
        return 0;
    if (n < sizeof(quad)) {
        memcpy(quad, s, n);
        quad[n] = '\0';
        if (sbx_meta_valid_address(quad))
            return 0;
    }
    return 1;
}

/* ":*" or ":PORT[,PORT]..." */
static int valid_ports(const char *p)
{
    if (strcmp(p, "*") == 0)
        return 1;
    for (;;) {
        long v = 0;
        int digits = 0;
        while (isdigit((unsigned char)*p) && digits < 6) {
            v = v * 10 + (*p++ - '0');
            digits++;
        }
        /* egressd reads ports as written: "080" is not 80 to it. */
        if (digits == 0 || v < 1 || v > 65535 || (digits > 1 && p[-digits] == '0'))
            return 0;
        if (*p == '\0')
            return 1;
        if (*p++ != ',')
            return 0;
    }
}

/* An extra allow line as a binding may carry: a host (exact, "*.x" any
 * subdomain, ".x" apex and subdomains), optionally ":PORTS".  Regexes,
 * `ip`, `deny` and options are deliberately not accepted here. */
int sbx_meta_valid_allow(const char *s)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);

    if (strlen(s) >= SBX_ALLOW_MAX)
        return 0;
    if (colon && !valid_ports(colon + 1))
        return 0;
    if (n > 2 && s[0] == '*' && s[1] == '.')
        s += 2, n -= 2;
    else if (n > 1 && s[0] == '.')
        s += 1, n -= 1;
    return valid_hostname(s, n) && !numeric_last_label(s, n);
}

void sbx_time_format(time_t t, char *buf, size_t len)
{
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int sbx_time_parse(const char *s, time_t *t)
{
    struct tm tm;
    char back[32];
    const char *end;

    if (strlen(s) != 20)
        return -1;
    memset(&tm, 0, sizeof tm);
    end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!end || *end)
        return -1;
    *t = timegm(&tm);
    if (*t == (time_t)-1)
        return -1;
    /* Round-trip: "2026-02-31" or "25:00" normalise to another text. */
    sbx_time_format(*t, back, sizeof back);
    return strcmp(back, s) == 0 ? 0 : -1;
}

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whether allow entry e loads as egressd loads a binding's line: a word
 * such as `ip`, `deny` or `read-only` passes sbx_meta_valid_allow, and
 * egressd would refuse the whole binding. */
static bool loads(const char *e)
{
    struct sbx_grant g = {0};
    char why[400];

    snprintf(g.allow, sizeof g.allow, "%s", e);
    return sbx_grant_check(&g, why, sizeof why) == 0;
}

/* Whether g's methods and paths are in the canonical form the encoder
 * writes (grant.h), and its line loads as egressd would load it (the
 * entry alone too: a word such as `ip` or `deny` passes
 * sbx_meta_valid_allow, and egressd would refuse the whole binding). */
static int grant_scope_check(const struct sbx_grant *g, char *err, size_t errlen)
{
    char methods[SBX_GRANT_METHODS_MAX], paths[SBX_GRANT_PATHS_MAX], why[400];

    snprintf(methods, sizeof methods, "%s", g->methods);
    snprintf(paths, sizeof paths, "%s", g->paths);
    if (sbx_grant_scope_normalize(methods, paths, why, sizeof why) ||
        strcmp(methods, g->methods) != 0)
        return fail(err, errlen, "grant '%.300s': %s", g->allow,
                    strcmp(methods, g->methods) != 0
                        ? "methods not written as sandboxctl writes them (upper case, each once, "
                          "in GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS,TRACE order)"
                        : why);
    if (sbx_grant_check(g, why, sizeof why))
        return fail(err, errlen, "grant '%.300s': %s", g->allow, why);
    return 0;
}

static int check_values(const struct sbx_meta *m, char *err, size_t errlen)
{
    if (!sbx_meta_valid_owner(m->owner))
        return fail(err, errlen, "owner '%.64s' is not 1-64 of A-Z a-z 0-9 . _ @ + -", m->owner);
    if (!sbx_meta_valid_policy(m->policy))
        return fail(err, errlen, "policy '%.64s' is not a preset name (a-z 0-9 . _ -)", m->policy);
    if (!sbx_meta_valid_address(m->address))
        return fail(err, errlen, "address '%.16s' is not an IPv4 address", m->address);
    if (m->nallow < 0 || m->nallow > SBX_META_MAX_ALLOW)
        return fail(err, errlen, "more than %d allow entries", SBX_META_MAX_ALLOW);
    for (int i = 0; i < m->nallow; i++)
        if (!sbx_meta_valid_allow(m->allow[i]) || !loads(m->allow[i]))
            return fail(err, errlen, "allow '%.300s' is not HOST, *.HOST or .HOST with :PORTS",
                        m->allow[i]);
    if (m->nsecrets < 0 || m->nsecrets > SBX_META_MAX_SECRETS)
        return fail(err, errlen, "more than %d secrets", SBX_META_MAX_SECRETS);
    for (int i = 0; i < m->nsecrets; i++) {
        if (!sbx_meta_valid_secret(m->secrets[i]))
            return fail(err, errlen, "secret '%.64s' is not a secret's name ([a-z0-9][a-z0-9_-]*)",
                        m->secrets[i]);
        for (int k = 0; k < i; k++)
            if (strcmp(m->secrets[k], m->secrets[i]) == 0)
                return fail(err, errlen, "secret '%s' is listed twice", m->secrets[i]);
    }
    if (m->ngrants < 0 || m->ngrants > SBX_META_MAX_GRANTS)
        return fail(err, errlen, "more than %d grants", SBX_META_MAX_GRANTS);
    for (int i = 0; i < m->ngrants; i++) {
        if (!sbx_meta_valid_allow(m->grants[i].allow))
            return fail(err, errlen, "grant '%.300s' is not HOST, *.HOST or .HOST with :PORTS",
                        m->grants[i].allow);
        if (m->grants[i].until < 0 || m->grants[i].until > TIME_MAX)
            return fail(err, errlen, "grant '%.300s' lapses outside 1970..9999",
                        m->grants[i].allow);
        if (grant_scope_check(&m->grants[i], err, errlen))
            return -1;
    }
    /* What sbx_time_parse() reads back: four-digit years from 1970 on. */
    if (m->created < 0 || m->created > TIME_MAX || m->expires < 0 || m->expires > TIME_MAX)
        return fail(err, errlen, "created or expires outside 1970..9999");
    if (m->expires < m->created)
        return fail(err, errlen, "expires before created");
    return 0;
}

int sbx_meta_encode(const struct sbx_meta *m, char *buf, size_t len, char *err, size_t errlen)
{
    char created[32], expires[32];
    size_t used;
    int n;

    if (check_values(m, err, errlen)) {
        sbx_printable(err);
        return -1;
    }
    sbx_time_format(m->created, created, sizeof created);
    sbx_time_format(m->expires, expires, sizeof expires);
    n = snprintf(buf, len,
                 HEADER "\n\n" MARKER "\nowner: %s\ncreated: %s\nexpires: %s\npolicy: %s\n"
                        "address: %s\nallow:",
                 m->owner, created, expires, m->policy, m->address);
    if (n < 0 || (size_t)n >= len)
        return fail(err, errlen, "description longer than %zu bytes", len);
    used = (size_t)n;
    for (int i = 0; i < m->nallow; i++) {
        n = snprintf(buf + used, len - used, " %s", m->allow[i]);
        if (n < 0 || (size_t)n >= len - used)
            return fail(err, errlen, "description longer than %zu bytes (too many allows)", len);
        used += (size_t)n;
    }
    for (int i = 0; i < m->nsecrets; i++) {
        n = snprintf(buf + used, len - used, "%s %s", i ? "" : "\nsecrets:", m->secrets[i]);
        if (n < 0 || (size_t)n >= len - used)
            return fail(err, errlen, "description longer than %zu bytes (too many secrets)", len);
        used += (size_t)n;
    }
    for (int i = 0; i < m->ngrants; i++) {
        char until[32];

        sbx_time_format(m->grants[i].until, until, sizeof until);
        n = snprintf(buf + used, len - used, "%s %s%s%s%s%s@%s",
                     i ? "" : "\ngrants:", m->grants[i].allow,
                     m->grants[i].methods[0] ? "|" GRANT_METHODS : "", m->grants[i].methods,
                     m->grants[i].paths[0] ? "|" GRANT_PATHS : "", m->grants[i].paths, until);
        if (n < 0 || (size_t)n >= len - used)
            return fail(err, errlen, "description longer than %zu bytes (too many grants)", len);
        used += (size_t)n;
    }
    if (used + 2 > len || used + 1 > SBX_DESC_MAX)
        return fail(err, errlen, "description longer than %d bytes (too many allows)",
                    SBX_DESC_MAX);
    buf[used++] = '\n';
    buf[used] = '\0';
    return (int)used;
}

/* The next space-separated word of *v: its start in *w and its length
 * in *n, *v moved past it; false when none is left. */
static bool next_word(const char **v, const char **w, size_t *n)
{
    while (**v == ' ')
        (*v)++;
    *n = strcspn(*v, " ");
    *w = *v;
    *v += *n;
    return *n > 0;
}

/* Split "allow: a b c" into m->allow. */
static int decode_allow(struct sbx_meta *m, const char *v, char *why, size_t whylen)
{
    const char *w;
    size_t n;

    while (next_word(&v, &w, &n)) {
        if (m->nallow == SBX_META_MAX_ALLOW)
            return fail(why, whylen, "more than %d allow entries", SBX_META_MAX_ALLOW);
        if (n >= SBX_ALLOW_MAX)
            return fail(why, whylen, "an allow entry longer than %d bytes", SBX_ALLOW_MAX - 1);
        memcpy(m->allow[m->nallow], w, n);
        m->allow[m->nallow][n] = '\0';
        if (!sbx_meta_valid_allow(m->allow[m->nallow]))
            return fail(why, whylen, "allow entry '%s' is not HOST, *.HOST or .HOST with :PORTS",
                        m->allow[m->nallow]);
        m->nallow++;
    }
    return 0;
}

/* Split "secrets: a b" into m->secrets (check_values() checks the names). */
static int decode_secrets(struct sbx_meta *m, const char *v, char *why, size_t whylen)
{
    const char *w;
    size_t n;

    while (next_word(&v, &w, &n)) {
        if (m->nsecrets == SBX_META_MAX_SECRETS)
            return fail(why, whylen, "more than %d secrets", SBX_META_MAX_SECRETS);
        if (n >= SBX_SECRET_NAME_MAX)
            return fail(why, whylen, "a secret's name longer than %d bytes",
                        SBX_SECRET_NAME_MAX - 1);
        memcpy(m->secrets[m->nsecrets], w, n);
        m->secrets[m->nsecrets++][n] = '\0';
    }
    return 0;
}

/* Part key of a grant's scope, "|KEYVALUE", into out (size bytes): 1 when
 * *part starts with key (then *part moves past it), 0 when it does not,
 * -1 with why when the value is empty or too long. */
static int scope_part(char **part, const char *key, char *out, size_t size, const char *word,
                      char *why, size_t whylen)
{
    size_t k = strlen(key), n;

    if (*part == NULL || strncmp(*part, key, k) != 0)
        return 0;
    char *end = strchr(*part + k, '|');
    n = end != NULL ? (size_t)(end - *part - k) : strlen(*part + k);
    if (n == 0 || n >= size)
        return fail(why, whylen, "grant '%.300s': %s empty or too long", word, key);
    memcpy(out, *part + k, n);
    out[n] = '\0';
    *part = end != NULL ? end + 1 : NULL;
    return 1;
}

/* Split the scope of a grant, word = "ENTRY[|methods=M][|paths=G]" (its
 * time cut off), into g: each part once, in that order.  0 or -1 with why. */
static int decode_scope(struct sbx_grant *g, char *word, char *why, size_t whylen)
{
    char *part = strchr(word, '|');

    if (part != NULL)
        *part++ = '\0';
    if (scope_part(&part, GRANT_METHODS, g->methods, sizeof g->methods, word, why, whylen) < 0 ||
        scope_part(&part, GRANT_PATHS, g->paths, sizeof g->paths, word, why, whylen) < 0)
        return -1;
    if (part != NULL)
        return fail(why, whylen,
                    "grant '%.300s': '|%.40s' is not methods=M or paths=G, in that order", word,
                    part);
    if (strlen(word) >= sizeof g->allow)
        return fail(why, whylen, "grant '%.300s' is not HOST[:PORTS]", word);
    memcpy(g->allow, word, strlen(word) + 1);
    return 0;
}

/* Split "grants: GRANT@TIME ..." into m->grants (check_values() checks the
 * entries and their scopes). */
static int decode_grants(struct sbx_meta *m, const char *v, char *why, size_t whylen)
{
    char word[SBX_ALLOW_MAX + SBX_GRANT_METHODS_MAX + SBX_GRANT_PATHS_MAX + 64], *at;
    const char *w;
    size_t n;

    while (next_word(&v, &w, &n)) {
        struct sbx_grant *g = &m->grants[m->ngrants];

        if (m->ngrants == SBX_META_MAX_GRANTS)
            return fail(why, whylen, "more than %d grants", SBX_META_MAX_GRANTS);
        if (n >= sizeof word)
            return fail(why, whylen, "a grant longer than %zu bytes", sizeof word - 1);
        memcpy(word, w, n);
        word[n] = '\0';
        at = strrchr(word, '@');
        if (!at)
            return fail(why, whylen,
                        "grant '%.300s' is not HOST[:PORTS][|methods=M][|paths=G]@"
                        "YYYY-MM-DDTHH:MM:SSZ",
                        word);
        *at = '\0';
        memset(g, 0, sizeof *g);
        if (sbx_time_parse(at + 1, &g->until))
            return fail(why, whylen, "grant '%.300s': '%.40s' is not YYYY-MM-DDTHH:MM:SSZ", word,
                        at + 1);
        if (decode_scope(g, word, why, whylen))
            return -1;
        m->ngrants++;
    }
    return 0;
}

/* Store one "key: value" line; unknown keys are ignored. */
static int decode_line(struct sbx_meta *m, const char *line, int *seen, char *why, size_t whylen)
{
    const char *colon = strchr(line, ':');
    const char *v;
    int k;

    /* "allow:" with nothing after it is an empty list. */
    if (!colon || (colon[1] != ' ' && colon[1] != '\0'))
        return fail(why, whylen, "expected 'key: value'");
    for (k = 0; k < K_COUNT; k++)
        if (strlen(key_names[k]) == (size_t)(colon - line) &&
            strncmp(line, key_names[k], (size_t)(colon - line)) == 0)
            break;
    if (k == K_COUNT)
        return 0;
    if (seen[k]++)
        return fail(why, whylen, "key '%s' given twice", key_names[k]);
    v = colon[1] ? colon + 2 : colon + 1;
    switch (k) {
    case K_OWNER:
    case K_POLICY:
    case K_ADDRESS: {
        char *dst = k == K_OWNER ? m->owner : k == K_POLICY ? m->policy : m->address;
        size_t cap = k == K_OWNER    ? sizeof m->owner
                     : k == K_POLICY ? sizeof m->policy
                                     : sizeof m->address;
        if (strlen(v) >= cap)
            return fail(why, whylen, "%s value too long", key_names[k]);
        strcpy(dst, v);
        return 0;
    }
    case K_CREATED:
        return sbx_time_parse(v, &m->created)
                   ? fail(why, whylen, "created '%.40s' is not YYYY-MM-DDTHH:MM:SSZ", v)
                   : 0;
    case K_EXPIRES:
        return sbx_time_parse(v, &m->expires)
                   ? fail(why, whylen, "expires '%.40s' is not YYYY-MM-DDTHH:MM:SSZ", v)
                   : 0;
    case K_ALLOW: return decode_allow(m, v, why, whylen);
    case K_GRANTS: return decode_grants(m, v, why, whylen);
    default: return decode_secrets(m, v, why, whylen);
    }
}

/* The next line of [p, end) into line (without \r\n); returns the rest. */
static const char *next_line(const char *p, const char *end, char *line, size_t cap, int *toolong)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

    *toolong = n >= cap;
    if (!*toolong) {
        memcpy(line, p, n);
        if (n > 0 && line[n - 1] == '\r')
            n--;
        line[n] = '\0';
    }
    return nl ? nl + 1 : end;
}

static enum sbx_meta_result decode(const char *text, size_t len, struct sbx_meta *m, char *err,
                                   size_t errlen)
{
    char line[LINE_MAX_LEN];
    const char *p = text, *end = text + len;
    int seen[K_COUNT] = {0}, lineno = 0, in_block = 0, toolong;
    char why[400];

    memset(m, 0, sizeof *m);
    if (memchr(text, '\0', len)) {
        fail(err, errlen, "description contains a NUL byte");
        return SBX_META_MALFORMED;
    }
    while (p < end) {
        p = next_line(p, end, line, sizeof line, &toolong);
        lineno++;
        if (toolong) {
            if (!in_block)
                continue;
            fail(err, errlen, "description line %d: longer than %d bytes", lineno,
                 LINE_MAX_LEN - 1);
            return SBX_META_MALFORMED;
        }
        if (!in_block) {
            in_block = strcmp(line, MARKER) == 0;
            continue;
        }
        if (line[0] == '\0')
            break;
        if (decode_line(m, line, seen, why, sizeof why)) {
            fail(err, errlen, "description line %d: %s", lineno, why);
            return SBX_META_MALFORMED;
        }
    }
    if (!in_block)
        return SBX_META_ABSENT;
    for (int k = 0; k < K_OPTIONAL; k++)
        if (!seen[k]) {
            fail(err, errlen, "description: key '%s' missing from the sandboxctl block",
                 key_names[k]);
            return SBX_META_MALFORMED;
        }
    if (check_values(m, why, sizeof why)) {
        fail(err, errlen, "description: %s", why);
        return SBX_META_MALFORMED;
    }
    return SBX_META_OK;
}

enum sbx_meta_result sbx_meta_decode(const char *text, size_t len, struct sbx_meta *m, char *err,
                                     size_t errlen)
{
    enum sbx_meta_result r = decode(text, len, m, err, errlen);

    if (r == SBX_META_MALFORMED)
        sbx_printable(err);
    return r;
}
