/* test_meta.c - the description metadata block: round trip, and hostile
 * descriptions (anyone with VM.Config.Options can write one). */
#include <stdio.h>
#include <string.h>

#include "meta.h"
#include "tap.h"

static struct sbx_meta sample(void)
{
    struct sbx_meta m;

    memset(&m, 0, sizeof m);
    strcpy(m.owner, "alice@example.org");
    strcpy(m.policy, "balanced");
    strcpy(m.address, "10.99.0.11");
    m.created = 1796022000; /* 2026-11-30T07:00:00Z */
    m.expires = m.created + 4 * 3600;
    m.nallow = 3;
    strcpy(m.allow[0], "pypi.org");
    strcpy(m.allow[1], "*.pythonhosted.org:443");
    strcpy(m.allow[2], ".npmjs.org:443,8443");
    return m;
}

static void test_round_trip(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], err[256];
    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);

    ok(n > 0, "encode (%s)", n > 0 ? "ok" : err);
    ok(strstr(buf, "\nowner: alice@example.org\n") &&
           strstr(buf, "\nexpires: 2026-11-30T11:00:00Z\n"),
       "the block is readable: owner and expires on their own lines");
    ok(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK, "decode (%s)", err);
    ok(strcmp(back.owner, m.owner) == 0 && strcmp(back.policy, m.policy) == 0 &&
           strcmp(back.address, m.address) == 0,
       "owner, policy, address survive");
    ok(back.created == m.created && back.expires == m.expires, "times survive");
    ok(back.nallow == 3 && strcmp(back.allow[1], "*.pythonhosted.org:443") == 0 &&
           strcmp(back.allow[2], ".npmjs.org:443,8443") == 0,
       "allows survive");
}

static void test_no_allow(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], err[256];
    int n;

    m.nallow = 0;
    n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    /* Proxmox strips trailing blanks: "allow: " comes back as "allow:". */
    ok(n > 0 && strstr(buf, "\nallow:\n"), "no allows: an empty allow line");
    ok(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK && back.nallow == 0,
       "an empty allow line decodes to no allows (%s)", err);
    snprintf(buf, sizeof buf,
             "sandboxctl-sandbox v1\nowner:\ncreated: 2026-11-30T07:00:00Z\n"
             "expires: 2026-11-30T08:00:00Z\npolicy: p\naddress: 10.0.0.1\n");
    ok(sbx_meta_decode(buf, strlen(buf), &back, err, sizeof err) == SBX_META_MALFORMED &&
           strstr(err, "owner '' is not"),
       "an empty owner is refused: %s", err);
}

static void test_surroundings(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], text[SBX_DESC_MAX + 200], err[256];

    sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    snprintf(text, sizeof text, "Notes by the admin\r\nowner: mallory\n\n%s\nmore notes", buf);
    ok(sbx_meta_decode(text, strlen(text), &back, err, sizeof err) == SBX_META_OK &&
           strcmp(back.owner, "alice@example.org") == 0,
       "text around the block is ignored, also an owner line outside it");
    for (char *p = buf; (p = strchr(p, '\n')); p++) {
        memmove(p + 1, p, strlen(p) + 1);
        *p++ = '\r';
    }
    ok(sbx_meta_decode(buf, strlen(buf), &back, err, sizeof err) == SBX_META_OK,
       "CRLF line ends are read (%s)", err);
    ok(sbx_meta_decode("a VM of someone else", 20, &back, err, sizeof err) == SBX_META_ABSENT,
       "no block: absent");
    ok(sbx_meta_decode("", 0, &back, err, sizeof err) == SBX_META_ABSENT, "empty: absent");
}

/* Credential injection: the secrets line is written only when there are
 * secrets, and read back in order. */
static void test_secrets(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], err[256];
    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);

    ok(n > 0 && !strstr(buf, "secrets"), "no secrets: no secrets line (the old block exactly)");
    ok(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK && back.nsecrets == 0,
       "a block without a secrets line has none (%s)", err);
    m.nsecrets = 3;
    strcpy(m.secrets[0], "anthropic");
    strcpy(m.secrets[1], "build-cache_2");
    strcpy(m.secrets[2], "0day");
    n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    ok(n > 0 && strstr(buf, "\nallow: pypi.org *.pythonhosted.org:443 .npmjs.org:443,8443\n"
                            "secrets: anthropic build-cache_2 0day\n"),
       "the secrets line follows the allow line (%s)", n > 0 ? "ok" : err);
    ok(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK &&
           back.nsecrets == 3 && strcmp(back.secrets[0], "anthropic") == 0 &&
           strcmp(back.secrets[1], "build-cache_2") == 0 && strcmp(back.secrets[2], "0day") == 0 &&
           back.nallow == 3,
       "secrets survive, in order, with the allows (%s)", err);
    m.nsecrets = SBX_META_MAX_SECRETS;
    for (int i = 0; i < m.nsecrets; i++)
        snprintf(m.secrets[i], sizeof m.secrets[i], "%063d", i);
    n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    ok(n > 0 && sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK &&
           back.nsecrets == SBX_META_MAX_SECRETS && strcmp(back.secrets[15], m.secrets[15]) == 0,
       "16 names of 63 bytes round-trip (%s)", err);
    m.nsecrets = 2;
    strcpy(m.secrets[0], "anthropic");
    strcpy(m.secrets[1], "anthropic");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "twice"),
       "a secret twice is never written: %s", err);
    strcpy(m.secrets[1], "Open AI");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 &&
           strstr(err, "secret 'Open AI' is not a secret's name"),
       "a malformed name is never written: %s", err);
    m.nsecrets = SBX_META_MAX_SECRETS + 1;
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "more than 16"),
       "more than 16 secrets are never written: %s", err);
}

/* Access grants: a grants line only when there are some, each entry and
 * its time read back. */
static void test_grants(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], err[256];
    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);

    ok(n > 0 && !strstr(buf, "grants"), "no grants: no grants line");
    m.ngrants = 2;
    strcpy(m.grants[0].allow, "crates.io:443");
    m.grants[0].until = m.created + 3600;
    strcpy(m.grants[1].allow, ".npmjs.org");
    m.grants[1].until = m.created + 7200;
    n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    ok(n > 0 &&
           strstr(buf,
                  "\ngrants: crates.io:443@2026-11-30T08:00:00Z .npmjs.org@2026-11-30T09:00:00Z\n"),
       "the grants line: HOST@TIME each (%s)", n > 0 ? "ok" : err);
    ok(sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK &&
           back.ngrants == 2 && strcmp(back.grants[0].allow, "crates.io:443") == 0 &&
           back.grants[0].until == m.created + 3600 &&
           strcmp(back.grants[1].allow, ".npmjs.org") == 0 &&
           back.grants[1].until == m.created + 7200 && back.nallow == 3,
       "grants survive, with their times and the allows (%s)", err);
    strcpy(m.grants[1].allow, "~evil");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 &&
           strstr(err, "grant '~evil' is not HOST"),
       "a grant that is no allow entry is never written: %s", err);
    m.ngrants = SBX_META_MAX_GRANTS + 1;
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 &&
           strstr(err, "more than 16 grants"),
       "more than 16 grants are never written: %s", err);
}

/* Grants that say which requests they admit (grant.h): written as
 * |methods= and |paths= parts, read back whole; a path glob with an '@'
 * in it does not confuse the time. */
static void test_scoped_grants(void)
{
    struct sbx_meta m = sample(), back;
    char buf[SBX_DESC_MAX + 1], err[256];

    m.ngrants = 3;
    strcpy(m.grants[0].allow, "api.github.com:443");
    strcpy(m.grants[0].methods, "GET,HEAD");
    strcpy(m.grants[0].paths, "/repos/acme/**,/user");
    m.grants[0].until = m.created + 3600;
    strcpy(m.grants[1].allow, "registry.npmjs.org:443");
    strcpy(m.grants[1].paths, "/@acme/**");
    m.grants[1].until = m.created + 60;
    strcpy(m.grants[2].allow, "example.org:80");
    strcpy(m.grants[2].methods, "POST");
    m.grants[2].until = m.created + 120;
    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    ok(n > 0 &&
           strstr(buf, "\ngrants: api.github.com:443|methods=GET,HEAD|paths=/repos/acme/**,"
                       "/user@2026-11-30T08:00:00Z registry.npmjs.org:443|paths=/@acme/**@"
                       "2026-11-30T07:01:00Z example.org:80|methods=POST@2026-11-30T07:02:00Z\n"),
       "scoped grants: HOST|methods=M|paths=G@TIME (%s)", n > 0 ? "ok" : err);
    ok(n > 0 && sbx_meta_decode(buf, (size_t)n, &back, err, sizeof err) == SBX_META_OK &&
           back.ngrants == 3 && strcmp(back.grants[0].methods, "GET,HEAD") == 0 &&
           strcmp(back.grants[0].paths, "/repos/acme/**,/user") == 0 &&
           strcmp(back.grants[1].allow, "registry.npmjs.org:443") == 0 &&
           back.grants[1].methods[0] == '\0' && strcmp(back.grants[1].paths, "/@acme/**") == 0 &&
           back.grants[1].until == m.created + 60 && strcmp(back.grants[2].methods, "POST") == 0 &&
           back.grants[2].paths[0] == '\0',
       "they read back whole, an '@' in a glob included (%s)", err);
    strcpy(m.grants[2].methods, "post");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "upper case"),
       "methods not in sandboxctl's form are never written: %s", err);
    strcpy(m.grants[2].methods, "FETCH");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 &&
           strstr(err, "'FETCH' is not one of"),
       "an unknown method is never written: %s", err);
    strcpy(m.grants[2].methods, "POST");
    strcpy(m.grants[2].paths, "/a/../b");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "'..'"),
       "a glob no path can match is never written: %s", err);
    strcpy(m.grants[2].allow, "example.org:22");
    strcpy(m.grants[2].paths, "/a");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "grant:1:"),
       "a grant egressd would not load (paths on port 22) is never written: %s", err);
}

struct hostile {
    const char *what;
    const char *block; /* after the marker line */
    const char *want;  /* substring of the error */
};

static void test_hostile(void)
{
    static const struct hostile cases[] = {
        {"repeated expires (the later one must not win)",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\n"
         "expires: 2099-01-01T00:00:00Z\npolicy: p\naddress: 10.0.0.1\n",
         "key 'expires' given twice"},
        {"missing expires",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\npolicy: p\naddress: 10.0.0.1\n",
         "key 'expires' missing"},
        {"impossible date",
         "owner: a\ncreated: 2026-02-31T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\n",
         "created '2026-02-31T07:00:00Z' is not"},
        {"time with offset",
         "owner: a\ncreated: 2026-11-30T07:00:00+01:00\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\n",
         "is not YYYY-MM-DDTHH:MM:SSZ"},
        {"owner with a blank",
         "owner: alice bob\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\n",
         "owner 'alice bob' is not"},
        {"policy with a path",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "../open\naddress: 10.0.0.1\n",
         "policy '../open' is not a preset name"},
        {"address in a non-canonical form",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 010.0.0.1\n",
         "address '010.0.0.1' is not an IPv4"},
        {"allow that is a regex",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nallow: ~^.*$\n",
         "allow entry '~^.*$' is not"},
        {"allow with a policy keyword smuggled (egressd would refuse the binding)",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nallow: ip\n",
         "allow 'ip' is not HOST"},
        {"a grant that is a policy keyword",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: read-only@2026-11-30T08:00:00Z\n",
         "grant 'read-only': grant:1:"},
        {"allow port out of range",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nallow: a.org:70000\n",
         "allow entry 'a.org:70000' is not"},
        {"expires before created",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T06:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\n",
         "expires before created"},
        {"a line without key: value", "owner a\n", "expected 'key: value'"},
        {"an owner value too long",
         "owner: "
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "\n",
         "owner value too long"},
        {"a secret's name with a slash",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nsecrets: ../etc/shadow\n",
         "secret '../etc/shadow' is not a secret's name"},
        {"a secret listed twice",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nsecrets: github github\n",
         "secret 'github' is listed twice"},
        {"two secrets lines (the later one must not win)",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nsecrets: github\nsecrets: openai\n",
         "key 'secrets' given twice"},
        {"seventeen secrets",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nsecrets: a b c d e f g h i j k l m n o p q\n",
         "more than 16 secrets"},
        {"a secret's name of 64 bytes",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\nsecrets: "
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
         "a secret's name longer than 63 bytes"},
        {"a grant without its time",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: crates.io\n",
         "grant 'crates.io' is not HOST[:PORTS]"},
        {"a grant with a time that is none",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: crates.io@tomorrow\n",
         "'tomorrow' is not YYYY-MM-DDTHH:MM:SSZ"},
        {"a grant that is a regex",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: ~.*@2026-11-30T08:00:00Z\n",
         "grant '~.*' is not HOST"},
        {"a grant smuggling a rule option",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org:22,raw@2026-11-30T08:00:00Z\n",
         "grant 'a.org:22,raw' is not HOST"},
        {"a grant with an unknown part",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org|raw=1@2026-11-30T08:00:00Z\n",
         "'|raw=1' is not methods=M or paths=G, in that order"},
        {"a grant with its parts the other way round",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org|paths=/a|methods=GET@2026-11-30T08:00:00Z\n",
         "'|methods=GET' is not methods=M or paths=G, in that order"},
        {"a grant with an empty methods part",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org|methods=|paths=/a@2026-11-30T08:00:00Z\n",
         "methods= empty"},
        {"a grant with a lower-case method",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org|methods=get@2026-11-30T08:00:00Z\n",
         "upper case"},
        {"a grant smuggling a rule option in its paths",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org|paths=/a,raw@2026-11-30T08:00:00Z\n",
         "paths: 'raw'"},
        {"two grants lines (the later one must not win)",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a.org@2026-11-30T08:00:00Z\ngrants: "
         "b.org@2026-11-30T08:00:00Z\n",
         "key 'grants' given twice"},
        {"seventeen grants",
         "owner: a\ncreated: 2026-11-30T07:00:00Z\nexpires: 2026-11-30T08:00:00Z\npolicy: "
         "p\naddress: 10.0.0.1\ngrants: a@2026-11-30T08:00:00Z b@2026-11-30T08:00:00Z "
         "c@2026-11-30T08:00:00Z d@2026-11-30T08:00:00Z e@2026-11-30T08:00:00Z "
         "f@2026-11-30T08:00:00Z "
         "g@2026-11-30T08:00:00Z h@2026-11-30T08:00:00Z i@2026-11-30T08:00:00Z "
         "j@2026-11-30T08:00:00Z "
         "k@2026-11-30T08:00:00Z l@2026-11-30T08:00:00Z m@2026-11-30T08:00:00Z "
         "n@2026-11-30T08:00:00Z "
         "o@2026-11-30T08:00:00Z p@2026-11-30T08:00:00Z q@2026-11-30T08:00:00Z\n",
         "more than 16 grants"},
    };
    char text[2048], err[256];
    struct sbx_meta m;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        enum sbx_meta_result r;
        snprintf(text, sizeof text, "header\n\nsandboxctl-sandbox v1\n%s", cases[i].block);
        r = sbx_meta_decode(text, strlen(text), &m, err, sizeof err);
        ok(r == SBX_META_MALFORMED && strstr(err, cases[i].want), "%s: %s", cases[i].what, err);
    }
}

static void test_hostile_bytes(void)
{
    struct sbx_meta m = sample();
    char buf[SBX_DESC_MAX + 1], big[40000], err[256];
    int n = sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err);
    size_t len;

    buf[10] = '\0';
    ok(sbx_meta_decode(buf, (size_t)n, &m, err, sizeof err) == SBX_META_MALFORMED &&
           strstr(err, "NUL byte"),
       "a NUL byte inside the description is refused: %s", err);
    len = (size_t)snprintf(big, sizeof big, "sandboxctl-sandbox v1\nowner: ");
    memset(big + len, 'a', sizeof big - len - 1);
    big[sizeof big - 1] = '\0';
    ok(sbx_meta_decode(big, strlen(big), &m, err, sizeof err) == SBX_META_MALFORMED &&
           strstr(err, "longer than"),
       "a 40 KB line is refused without overflow: %s", err);
    memset(big, 'x', sizeof big);
    ok(sbx_meta_decode(big, sizeof big, &m, err, sizeof err) == SBX_META_ABSENT,
       "40 KB of junk, not NUL-terminated: absent");
}

static void test_encoder_refuses(void)
{
    struct sbx_meta m = sample();
    char buf[SBX_DESC_MAX + 1], err[256];

    strcpy(m.owner, "alice\nexpires: 2099-01-01T00:00:00Z");
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "owner"),
       "an owner with a newline is never written: %s", err);
    m = sample();
    m.nallow = SBX_META_MAX_ALLOW;
    for (int i = 0; i < m.nallow; i++) {
        memset(m.allow[i], 'a', 250);
        m.allow[i][250] = '\0';
        m.allow[i][60] = '.';
        m.allow[i][120] = '.';
        m.allow[i][180] = '.';
        m.allow[i][240] = '.';
    }
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "longer than"),
       "a description over 8 KiB is refused: %s", err);
    m = sample();
    m.expires = (time_t)253402300800; /* 10000-01-01: a five-digit year */
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "1970..9999"),
       "an expiry the decoder could not read back is never written: %s", err);
    m = sample();
    m.created = (time_t)-4611686018427387904; /* gmtime() fails: no text at all */
    ok(sbx_meta_encode(&m, buf, sizeof buf, err, sizeof err) == -1 && strstr(err, "1970..9999"),
       "a creation time before 1970 is never written: %s", err);
}

/* A reason quotes the hostile value: it must not carry a terminal escape
 * sequence or a line break into the terminal or the log that shows it. */
static void test_reason_printable(void)
{
    static const char text[] = "sandboxctl-sandbox v1\nowner: a\ncreated: 2026\r\x1b[2J11-30"
                               "T07:00:00Z\n";
    char err[256];
    struct sbx_meta m;
    int clean = 1;

    ok(sbx_meta_decode(text, sizeof text - 1, &m, err, sizeof err) == SBX_META_MALFORMED &&
           strstr(err, "created '2026??[2J11-30"),
       "a bad created value is quoted with '?' for its control bytes: %s", err);
    for (const char *c = err; *c; c++)
        clean &= (unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f;
    ok(clean, "the reason holds printable ASCII only");
}

static void test_validators(void)
{
    ok(sbx_meta_valid_allow("github.com"), "allow github.com");
    ok(sbx_meta_valid_allow("*.githubusercontent.com"), "allow *.x");
    ok(sbx_meta_valid_allow(".npmjs.org"), "allow .x");
    ok(sbx_meta_valid_allow("github.com:22"), "allow with a port");
    ok(sbx_meta_valid_allow("github.com:*"), "allow any port");
    ok(!sbx_meta_valid_allow("GitHub.com"), "upper case refused");
    ok(!sbx_meta_valid_allow("*"), "a bare * refused");
    ok(!sbx_meta_valid_allow("a..b"), "empty label refused");
    ok(!sbx_meta_valid_allow("-a.b"), "leading hyphen refused");
    ok(!sbx_meta_valid_allow("a.b:"), "empty port list refused");
    /* What egressd refuses too (a binding it would answer 422 for). */
    ok(!sbx_meta_valid_allow("b.test:080"), "a port with a leading zero refused");
    ok(!sbx_meta_valid_allow("123"), "an all-digit name refused");
    ok(!sbx_meta_valid_allow("a.0x1f"), "a hex-looking last label refused");
    ok(!sbx_meta_valid_allow("*.a.b.7"), "a numeric last label under *. refused");
    ok(sbx_meta_valid_allow("10.1.2.3:443"), "a dotted-quad IPv4 address allowed");
    ok(sbx_meta_valid_allow("a7.example"), "digits inside labels allowed");
    ok(!sbx_meta_valid_allow("a.b:0"), "port 0 refused");
    ok(!sbx_meta_valid_allow("a.b raw"), "options refused");
    ok(sbx_meta_valid_address("10.99.0.11") && !sbx_meta_valid_address("10.99.0.256") &&
           !sbx_meta_valid_address("::1"),
       "addresses: IPv4 dotted quads only");
    ok(sbx_meta_valid_owner("bob+ci@corp") && !sbx_meta_valid_owner("") &&
           !sbx_meta_valid_owner("bob;rm"),
       "owners");
    ok(sbx_meta_valid_secret("anthropic") && sbx_meta_valid_secret("0a_b-c") &&
           !sbx_meta_valid_secret("") && !sbx_meta_valid_secret("_a") &&
           !sbx_meta_valid_secret("-a") && !sbx_meta_valid_secret("GitHub") &&
           !sbx_meta_valid_secret("a.b") && !sbx_meta_valid_secret("a b"),
       "secret names: [a-z0-9][a-z0-9_-]*");
}

int main(void)
{
    test_round_trip();
    test_no_allow();
    test_secrets();
    test_grants();
    test_scoped_grants();
    test_surroundings();
    test_hostile();
    test_hostile_bytes();
    test_encoder_refuses();
    test_reason_printable();
    test_validators();
    return tap_done();
}
