/*
 * test_policy.c - every rule kind, deny precedence, includes, expiry,
 * report mode, bindings, address ranges, and the errors a load reports.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define NOW 1796083200 /* 2026-12-01T00:00Z */

/* Build a policy from NAME, TEXT pairs (NULL-terminated); files are
 * NAME.allow.  Errors go to *d (cleared first). */
static struct policy *load(struct policy_diag *d, const char *const *presets)
{
    struct policy_builder *b = policy_builder_new();
    char file[64];

    policy_diag_free(d);
    for (size_t i = 0; presets[i] != NULL; i += 2) {
        snprintf(file, sizeof(file), "%s.allow", presets[i]);
        policy_builder_add_preset(b, presets[i], file, presets[i + 1], strlen(presets[i + 1]));
    }
    return policy_builder_finish(b, d);
}

static struct policy *load1(const char *text)
{
    struct policy_diag d = {0};
    const char *p[] = {"p", text, NULL};
    struct policy *pol = load(&d, p);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return pol;
}

/* Decide HOST:PORT for binding b at `now`; "allow", "deny" or
 * "would_deny", and the reason and rule in *v. */
static const char *decide(const struct policy_binding *b, const char *host, uint16_t port,
                          int64_t now, struct policy_verdict *v)
{
    struct policy_host h;
    if (policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK)
        return "bad_host";
    return policy_decision_str(policy_decide_name(b, &h, port, now, v));
}

static const char *decide_addr(const struct policy_binding *b, const char *host, const char *addr,
                               uint16_t port, struct policy_verdict *v)
{
    struct policy_verdict name;
    uint8_t a[16];
    const char *d = decide(b, host, port, NOW, &name);
    if (strcmp(d, "allow") != 0 && strcmp(d, "would_deny") != 0)
        return d;
    if (!policy_addr_parse(addr, strlen(addr), a))
        return "bad address";
    return policy_decision_str(policy_decide_addr(b, a, port, &name, NOW, v));
}

static bool rule_is(const struct policy_verdict *v, const char *file, unsigned line)
{
    if (file == NULL)
        return v->rule.file == NULL;
    return v->rule.file != NULL && strcmp(v->rule.file, file) == 0 && v->rule.line == line;
}

/* One line of expectations: host, port, decision, reason, rule line (0 = none). */
struct want {
    const char *host;
    uint16_t port;
    const char *decision, *reason;
    unsigned line;
};

static void check_all(const struct policy_binding *b, const struct want *w, size_t n,
                      const char *what)
{
    struct policy_verdict v;
    for (size_t i = 0; i < n; i++) {
        const char *d = decide(b, w[i].host, w[i].port, NOW, &v);
        ok(strcmp(d, w[i].decision) == 0 && strcmp(policy_reason_str(v.reason), w[i].reason) == 0 &&
               (w[i].line == 0 ? v.rule.file == NULL : v.rule.line == w[i].line),
           "%s: %s:%u -> %s %s line %u (got %s %s line %u)", what, w[i].host, w[i].port,
           w[i].decision, w[i].reason, w[i].line, d, policy_reason_str(v.reason), v.rule.line);
    }
}

static struct policy_binding *bind(struct policy *p, const char *preset, const char *const *extra,
                                   size_t n)
{
    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, preset, extra, n, "sandbox 101", &d);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return b;
}

static void test_kinds(void)
{
    struct policy *p = load1("# kinds\n"
                             "github.com\n"                           /* 2 */
                             "api.github.com:443,8443\n"              /* 3 */
                             "*.githubusercontent.com\n"              /* 4 */
                             ".npmjs.org\n"                           /* 5 */
                             "~^[a-z0-9-]+\\.s3\\.amazonaws\\.com$\n" /* 6 */
                             "ip 140.82.112.0/20:22\n"                /* 7 */
                             "anyport.example:*\n"                    /* 8 */
                             "[2001:db8::5]:443\n"                    /* 9 */
                             "192.0.2.7\n"                            /* 10 */
                             "~~bad-looking\\.example\n");            /* 11: '~' literal */
    if (!ok(p != NULL, "a preset with every rule kind loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    static const struct want w[] = {
        {"github.com", 443, "allow", "allowed", 2},
        {"GitHub.com.", 80, "allow", "allowed", 2},
        {"github.com", 22, "deny", "not_allowed", 0},
        {"www.github.com", 443, "deny", "not_allowed", 0},
        {"api.github.com", 8443, "allow", "allowed", 3},
        {"api.github.com", 80, "deny", "not_allowed", 0},
        {"raw.githubusercontent.com", 443, "allow", "allowed", 4},
        {"a.b.githubusercontent.com", 443, "allow", "allowed", 4},
        {"githubusercontent.com", 443, "deny", "not_allowed", 0},
        {"npmjs.org", 443, "allow", "allowed", 5},
        {"registry.npmjs.org", 443, "allow", "allowed", 5},
        {"evilnpmjs.org", 443, "deny", "not_allowed", 0},
        {"my-bucket.s3.amazonaws.com", 443, "allow", "allowed", 6},
        {"a.b.s3.amazonaws.com", 443, "deny", "not_allowed", 0},
        {"my-bucket.s3.amazonaws.com.evil.com", 443, "deny", "not_allowed", 0},
        {"140.82.114.3", 22, "allow", "allowed", 7},
        {"140.82.114.3", 443, "deny", "not_allowed", 0},
        {"140.82.128.1", 22, "deny", "not_allowed", 0},
        {"anyport.example", 1, "allow", "allowed", 8},
        {"anyport.example", 65535, "allow", "allowed", 8},
        {"[2001:db8::5]", 443, "allow", "allowed", 9},
        {"[2001:db8:0::5]", 443, "allow", "allowed", 9},
        {"[2001:db8::6]", 443, "deny", "not_allowed", 0},
        {"192.0.2.7", 80, "allow", "allowed", 10},
        {"192.0.2.8", 80, "deny", "not_allowed", 0},
    };
    check_all(b, w, sizeof(w) / sizeof(w[0]), "kinds");
    ok(policy_preset_rules(p, "p") == 10, "the preset counts 10 rules (got %ld)",
       policy_preset_rules(p, "p"));
    policy_binding_free(b);
    policy_unref(p);
}

static void test_deny_wins(void)
{
    /* The denies come first and last: order never matters. */
    struct policy *p = load1("deny gist.github.com\n"       /* 1 */
                             ".github.com\n"                /* 2 */
                             "*.evil.example\n"             /* 3 */
                             "~.*\\.corp\\.example\n"       /* 4 */
                             "deny ~^tmp-.*\n"              /* 5 */
                             "deny .evil.example:443\n"     /* 6 */
                             "deny ip 140.82.0.0/16\n"      /* 7 */
                             "ip 140.82.1.0/24\n"           /* 8 */
                             "*\n"                          /* 9: any name */
                             "deny *.corp.example:8080\n"); /* 10 */
    if (!ok(p != NULL, "deny-precedence preset loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    static const struct want w[] = {
        {"gist.github.com", 443, "deny", "deny_rule", 1},
        {"api.github.com", 443, "allow", "allowed", 2},
        {"github.com", 443, "allow", "allowed", 2},
        {"x.evil.example", 443, "deny", "deny_rule", 6},
        {"x.evil.example", 80, "allow", "allowed", 3},
        {"evil.example", 443, "deny", "deny_rule", 6},
        {"tmp-thing.example", 443, "deny", "deny_rule", 5},
        {"a.corp.example", 8080, "deny", "deny_rule", 10},
        {"a.corp.example", 443, "allow", "allowed", 4},
        {"anything.example", 443, "allow", "allowed", 9},
        {"140.82.1.1", 443, "deny", "deny_rule", 7},
        {"140.83.1.1", 443, "deny", "not_allowed", 0},
    };
    check_all(b, w, sizeof(w) / sizeof(w[0]), "deny wins");
    policy_binding_free(b);
    policy_unref(p);
}

static void test_until_raw_private(void)
{
    struct policy *p = load1("pypi.org until 2026-12-01T00:00Z\n"        /* 1 */
                             "deny ~.*\\.test until 2026-11-01T00:00Z\n" /* 2 */
                             "x.test\n"                                  /* 3 */
                             "github.com:22 raw\n"                       /* 4 */
                             "mirror.internal private-ok\n"              /* 5 */
                             "ip 10.1.0.0/16:5432 raw private-ok\n");    /* 6 */
    if (!ok(p != NULL, "until/raw/private-ok preset loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    struct policy_verdict v, a;
    ok(strcmp(decide(b, "pypi.org", 443, NOW - 1, &v), "allow") == 0,
       "until: allowed one second before it expires");
    ok(strcmp(decide(b, "pypi.org", 443, NOW, &v), "deny") == 0 && v.reason == POLICY_R_NOT_ALLOWED,
       "until: gone at its time");
    ok(strcmp(decide(b, "x.test", 443, NOW - 40 * 86400, &v), "deny") == 0 && v.rule.line == 2,
       "until: a deny holds before its time");
    ok(strcmp(decide(b, "x.test", 443, NOW, &v), "allow") == 0 && v.rule.line == 3,
       "until: an expired deny no longer wins");
    ok(strcmp(decide(b, "github.com", 22, NOW, &v), "allow") == 0 && v.raw && !v.private_ok,
       "raw: the verdict carries raw");
    ok(strcmp(decide(b, "github.com", 443, NOW, &v), "deny") == 0,
       "raw: only on the ports it names");
    ok(strcmp(decide_addr(b, "mirror.internal", "10.0.0.5", 443, &a), "allow") == 0 &&
           rule_is(&a, "p.allow", 5),
       "private-ok: the name may resolve into 10/8");
    ok(strcmp(decide_addr(b, "10.1.2.3", "10.1.2.3", 5432, &a), "allow") == 0 && a.raw,
       "private-ok: an ip rule may open a private literal");
    ok(strcmp(decide_addr(b, "x.test", "10.0.0.5", 443, &a), "deny") == 0 &&
           a.reason == POLICY_R_PRIVATE_RANGE && a.rule.file == NULL,
       "private_range: a name without private-ok may not");
    policy_binding_free(b);
    policy_unref(p);
}

static void test_ranges(void)
{
    struct policy *p = load1("*\nip 0.0.0.0/0\nip ::/0\n");
    struct policy_binding *b = bind(p, "p", NULL, 0);
    struct policy_verdict v;
    static const char *denied[] = {
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.1.2.3",
        "224.0.0.1",
        "255.255.255.255",
        "240.0.0.1",
        "198.18.0.1",
        "[::1]",
        "[::]",
        "[fc00::1]",
        "[fd12:3456::1]",
        "[fe80::1]",
        "[ff02::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:10.0.0.1]",
        "[::ffff:169.254.169.254]",
        "[64:ff9b::a9fe:a9fe]",                   /* NAT64 of 169.254.169.254 */
        "[64:ff9b::7f00:1]",                      /* NAT64 of 127.0.0.1 */
        "[2002:a00:1::1]",                        /* 6to4 of 10.0.0.1 */
        "[64:ff9b:1::1]",                         /* local-use NAT64 */
        "[::ffff:0:a00:1]",                       /* SIIT (IPv4-translated) form of 10.0.0.1 */
        "[::ffff:0:7f00:1]",                      /* SIIT form of 127.0.0.1 */
        "[::ffff:0:5db8:d822]",                   /* SIIT form of a public address: the whole /96 */
        "[2001:0:4136:e378:8000:63bf:3fff:fdd2]", /* Teredo (RFC 4380 §4) */
        "[2001::1]",                              /* Teredo, the prefix itself */
    };
    static const char *allowed[] = {
        "93.184.216.34",
        "140.82.112.3",
        "172.32.0.1",
        "100.128.0.1",
        "169.255.0.1",
        "[2606:4700::1111]",
        "[64:ff9b::5db8:d822]", /* NAT64 of 93.184.216.34 */
        "[2002:5db8:d822::1]",
        "[2001:4860::8888]", /* beside Teredo's 2001::/32 */
        "[2001:4860:4860::8888]",
    };
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
        const char *a = denied[i];
        ok(strcmp(decide_addr(b, a, a, 443, &v), "deny") == 0 && v.reason == POLICY_R_PRIVATE_RANGE,
           "default deny-range: %s is private_range", a);
    }
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        const char *a = allowed[i];
        ok(strcmp(decide_addr(b, a, a, 443, &v), "allow") == 0, "public: %s is allowed", a);
    }
    ok(strcmp(decide_addr(b, "example.com", "10.0.0.1", 443, &v), "deny") == 0 &&
           v.reason == POLICY_R_PRIVATE_RANGE,
       "a name resolving to 10.0.0.1 is private_range");
    policy_binding_free(b);
    policy_unref(p);

    /* deny-range / allow-range from the configuration */
    struct policy_builder *bl = policy_builder_new();
    struct policy_diag d = {0};
    const char *text = "*\n";
    policy_builder_add_preset(bl, "p", "p.allow", text, strlen(text));
    policy_builder_deny_range(bl, "default", "egressd.conf:3");
    policy_builder_deny_range(bl, "203.0.112.0/24", "egressd.conf:4");
    policy_builder_allow_range(bl, "10.20.0.0/16", "egressd.conf:5");
    p = policy_builder_finish(bl, &d);
    if (!ok(p != NULL, "deny-range/allow-range: loads"))
        return;
    b = bind(p, "p", NULL, 0);
    ok(strcmp(decide_addr(b, "a.example", "10.20.1.1", 443, &v), "allow") == 0,
       "allow-range: an exception inside 10/8");
    ok(strcmp(decide_addr(b, "a.example", "10.21.1.1", 443, &v), "deny") == 0,
       "allow-range: only its own range");
    ok(strcmp(decide_addr(b, "a.example", "203.0.112.9", 443, &v), "deny") == 0 &&
           v.reason == POLICY_R_PRIVATE_RANGE,
       "deny-range: a CIDR of the config");
    policy_binding_free(b);
    policy_unref(p);

    bl = policy_builder_new();
    policy_builder_add_preset(bl, "p", "p.allow", text, strlen(text));
    policy_builder_deny_range(bl, "10.1.2.3/8", "egressd.conf:7");
    policy_builder_allow_range(bl, "nonsense", "egressd.conf:8");
    p = policy_builder_finish(bl, &d);
    ok(p == NULL && d.n == 2 && strstr(d.lines[0], "egressd.conf:7: expected a network address") &&
           strstr(d.lines[1], "egressd.conf:8: expected an IPv4 or IPv6 address"),
       "range errors name the config line (%s | %s)", d.n > 0 ? d.lines[0] : "",
       d.n > 1 ? d.lines[1] : "");
    policy_diag_free(&d);
}

/* A policy of preset "p" (any host, any literal) with egressd's own
 * addresses `own` (NULL-terminated) and, when given, one deny-range and one
 * allow-range line. */
static struct policy *load_own(const char *const *own, const char *deny, const char *allow)
{
    struct policy_builder *bl = policy_builder_new();
    struct policy_diag d = {0};
    const char *text = "*\nip 0.0.0.0/0\nip ::/0\n";
    uint8_t a[16];

    policy_builder_add_preset(bl, "p", "p.allow", text, strlen(text));
    for (size_t i = 0; own[i] != NULL; i++)
        if (policy_addr_parse(own[i], strlen(own[i]), a))
            policy_builder_deny_addr(bl, a);
    if (deny != NULL)
        policy_builder_deny_range(bl, deny, "egressd.conf:3");
    if (allow != NULL)
        policy_builder_allow_range(bl, allow, "egressd.conf:4");
    struct policy *p = policy_builder_finish(bl, &d);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return p;
}

/* The address phase of literal `a` under p: true when it is private_range. */
static bool own_denied(struct policy *p, const char *a)
{
    struct policy_binding *b = bind(p, "p", NULL, 0);
    struct policy_verdict v;
    bool denied = b != NULL && strcmp(decide_addr(b, a, a, 443, &v), "deny") == 0 &&
                  v.reason == POLICY_R_PRIVATE_RANGE && v.rule.file == NULL;
    policy_binding_free(b);
    return denied;
}

/* egressd's own interface addresses (policy_builder_deny_addr): denied on
 * top of whatever deny-range says, lifted by allow-range. */
static void test_own_addrs(void)
{
    static const char *own[] = {"11.22.33.44", "2a01:4f8::44", NULL};
    struct policy *p = load_own(own, NULL, NULL);

    if (!ok(p != NULL, "own addresses: loads"))
        return;
    ok(own_denied(p, "11.22.33.44"), "own address 11.22.33.44 is private_range");
    ok(own_denied(p, "[::ffff:11.22.33.44]"), "and its IPv4-mapped form");
    ok(own_denied(p, "[64:ff9b::b16:212c]"), "and its NAT64 form");
    ok(own_denied(p, "[2002:b16:212c::1]"), "and its 6to4 form");
    ok(own_denied(p, "[2a01:4f8::44]"), "own address 2a01:4f8::44 is private_range");
    ok(!own_denied(p, "11.22.33.45"), "the address beside it is not: one address, a /32");
    ok(!own_denied(p, "[2a01:4f8::45]"), "nor beside the IPv6 one: a /128");
    ok(own_denied(p, "127.0.0.1") && own_denied(p, "10.0.0.1"),
       "without deny-range lines the default list still applies beside them");
    policy_unref(p);

    p = load_own(own, "192.0.2.0/24", NULL);
    ok(p != NULL && own_denied(p, "11.22.33.44") && own_denied(p, "192.0.2.1") &&
           !own_denied(p, "10.0.0.1"),
       "a deny-range list of the config replaces the default list, not the own addresses");
    policy_unref(p);

    p = load_own(own, NULL, "11.22.33.44/32");
    ok(p != NULL && !own_denied(p, "11.22.33.44") && own_denied(p, "[2a01:4f8::44]"),
       "allow-range lifts an own address, and only the one it names");
    policy_unref(p);
}

static void test_report_and_include(void)
{
    struct policy_diag d = {0};
    const char *presets[] = {
        "base", "# shared\nregistry.npmjs.org\ndeny evil.example\n",
        "team", "include base\nmode report\ngithub.com\n",
        "top",  "include team\nexample.org\n",
        NULL,
    };
    struct policy *p = load(&d, presets);
    if (!ok(p != NULL, "include: three presets load (%s)", d.n ? d.lines[0] : ""))
        return;
    struct policy_binding *team = bind(p, "team", NULL, 0), *top = bind(p, "top", NULL, 0);
    struct policy_verdict v;
    ok(strcmp(decide(team, "registry.npmjs.org", 443, NOW, &v), "allow") == 0 &&
           rule_is(&v, "base.allow", 2),
       "include: an included allow names its own file:line");
    ok(strcmp(decide(team, "unknown.example", 443, NOW, &v), "would_deny") == 0 &&
           v.reason == POLICY_R_NOT_ALLOWED,
       "report: not_allowed becomes would_deny");
    ok(strcmp(decide(team, "evil.example", 443, NOW, &v), "would_deny") == 0 &&
           v.reason == POLICY_R_DENY_RULE && rule_is(&v, "base.allow", 3),
       "report: an included deny becomes would_deny, with its rule");
    ok(strcmp(decide(top, "github.com", 443, NOW, &v), "allow") == 0 &&
           rule_is(&v, "team.allow", 3),
       "include: two levels deep");
    ok(strcmp(decide(top, "unknown.example", 443, NOW, &v), "deny") == 0,
       "report: mode is not inherited through include");
    ok(strcmp(decide(top, "evil.example", 443, NOW, &v), "deny") == 0 &&
           v.reason == POLICY_R_DENY_RULE,
       "include: a deny two levels down still wins");
    ok(policy_binding_report(team) && !policy_binding_report(top), "binding: report flag");
    ok(strcmp(policy_preset_name(p, 0), "base") == 0 &&
           strcmp(policy_preset_name(p, 2), "top") == 0 && policy_preset_name(p, 3) == NULL,
       "presets are listed in name order");
    struct policy_verdict a;
    ok(strcmp(decide_addr(team, "x.example", "127.0.0.1", 443, &a), "deny") == 0 &&
           a.reason == POLICY_R_PRIVATE_RANGE,
       "report: private ranges stay denied");
    policy_binding_free(team);
    policy_binding_free(top);
    policy_unref(p);
}

static void test_binding(void)
{
    struct policy *p = load1("deny gist.github.com\n.github.com\ndeny ip 20.0.0.0/8\n");
    const char *extra[] = {"pypi.org", "files.pythonhosted.org:443", "gist.github.com",
                           "ip 198.51.100.0/24:22 raw"};
    struct policy_binding *b = bind(p, "p", extra, 4);
    struct policy_verdict v;
    if (!ok(b != NULL, "binding with four extra lines"))
        return;
    ok(strcmp(decide(b, "pypi.org", 443, NOW, &v), "allow") == 0 && rule_is(&v, "sandbox 101", 1),
       "binding: an extra line allows, named 'sandbox 101:1'");
    ok(strcmp(decide(b, "files.pythonhosted.org", 80, NOW, &v), "deny") == 0,
       "binding: extra ports hold");
    ok(strcmp(decide(b, "gist.github.com", 443, NOW, &v), "deny") == 0 && rule_is(&v, "p.allow", 1),
       "binding: extras never lift a preset deny");
    ok(strcmp(decide(b, "api.github.com", 443, NOW, &v), "allow") == 0 && rule_is(&v, "p.allow", 2),
       "binding: the preset's allows still hold");
    ok(strcmp(decide(b, "198.51.100.9", 22, NOW, &v), "allow") == 0 && v.raw,
       "binding: an extra ip rule with raw");
    struct policy_binding *plain = bind(p, "p", NULL, 0);
    ok(strcmp(decide(plain, "pypi.org", 443, NOW, &v), "deny") == 0,
       "binding: extras belong to their binding only");
    struct policy_verdict a;
    ok(strcmp(decide_addr(b, "api.github.com", "20.1.2.3", 443, &a), "deny") == 0 &&
           a.reason == POLICY_R_DENY_RULE && rule_is(&a, "p.allow", 3),
       "address phase: a preset's deny ip applies to resolved addresses");
    policy_binding_free(plain);

    struct policy_diag d = {0};
    const char *bad[] = {"deny pypi.org",        "mode report", "include p",
                         "x.example private-ok", "bad..host",   "deny country KP"};
    struct policy_binding *nb = policy_binding_new(p, "p", bad, 6, "sandbox 7", &d);
    ok(nb == NULL && d.n == 6, "binding: six bad lines give six errors (got %zu)", d.n);
    ok(d.n == 6 && strstr(d.lines[0], "sandbox 7:1:1: 'deny' is not allowed") &&
           strstr(d.lines[1], "sandbox 7:2:1: 'mode' is not allowed") &&
           strstr(d.lines[2], "sandbox 7:3:1: 'include' is not allowed") &&
           strstr(d.lines[3], "sandbox 7:4:11: expected 'raw', 'inject', 'methods', 'paths', "
                              "'git-push', 'until' or end of line") &&
           strstr(d.lines[4], "sandbox 7:5:1: expected a host name"),
       "binding: each error names its line and column");
    for (size_t i = 0; i < d.n; i++)
        diag("%s", d.lines[i]);
    policy_diag_free(&d);
    ok(policy_binding_new(p, "nope", NULL, 0, "sandbox 8", &d) == NULL && d.n == 1 &&
           strstr(d.lines[0], "sandbox 8: expected the name of a preset, found 'nope'"),
       "binding: an unknown preset is named");
    policy_diag_free(&d);
    /* the binding keeps its snapshot alive */
    policy_unref(p);
    ok(strcmp(decide(b, "pypi.org", 443, NOW, &v), "allow") == 0,
       "a binding keeps its snapshot alive after the loader drops it");
    policy_binding_free(b);
}

/* Regexes are tried only on hosts that end in the literal suffix they
 * require; these are the shapes where reading that suffix could go wrong. */
static void test_regex_index(void)
{
    struct policy *p = load1("~[a-z]+\\.svc\\.example\\.com\n"   /* 1 */
                             "~foo\\.com|bar\\.org\n"            /* 2 */
                             "~(?i)API\\.EXAMPLE\\.COM\n"        /* 3 */
                             "~a\\x2ecom\n"                      /* 4: a.com */
                             "~[a-z]+\\056example\\.org\n"       /* 5 */
                             "~.*\\.example\\.net$\n"            /* 6 */
                             "~x{2}\\.example\\.io\n"            /* 7 */
                             "~[a-z]+\\.e\\.com+\n"              /* 8 */
                             "~^api\\.example\\.dev$\n"          /* 9 */
                             "deny ~bad[0-9]+\\.example\\.com\n" /* 10 */
                             ".example.info\n"                   /* 11 */
                             "~[a-z]+\\.example\\.com:8443\n"    /* 12 */
                             "~(?:alpha|beta)\\.example\\.edu\n" /* 13: a group */
                             "~(?:gamma)\\.example\\.edu:80\n"); /* 14 */
    if (!ok(p != NULL, "regex-index preset loads"))
        return;
    struct policy_binding *b = bind(p, "p", NULL, 0);
    static const struct want w[] = {
        {"x.svc.example.com", 443, "allow", "allowed", 1},
        {"svc.example.com", 443, "deny", "not_allowed", 0},
        {"bar.org", 443, "allow", "allowed", 2},
        {"foo.com", 443, "allow", "allowed", 2},
        {"api.example.com", 443, "allow", "allowed", 3},
        {"a.com", 443, "allow", "allowed", 4},
        {"abc.example.org", 443, "allow", "allowed", 5},
        {"a.b.example.net", 443, "allow", "allowed", 6},
        {"xx.example.io", 443, "allow", "allowed", 7},
        {"x.example.io", 443, "deny", "not_allowed", 0},
        {"a.e.commm", 443, "allow", "allowed", 8},
        {"api.example.dev", 443, "allow", "allowed", 9},
        {"x.api.example.dev", 443, "deny", "not_allowed", 0},
        {"bad12.example.com", 443, "deny", "deny_rule", 10},
        {"good.example.info", 443, "allow", "allowed", 11},
        {"good.example.com", 8443, "allow", "allowed", 12},
        {"good.example.com", 443, "deny", "not_allowed", 0},
        {"bad12.example.com", 8443, "deny", "not_allowed", 0},
        {"beta.example.edu", 443, "allow", "allowed", 13},
        {"gamma.example.edu", 80, "allow", "allowed", 14},
        {"gamma.example.edu", 443, "deny", "not_allowed", 0},
    };
    check_all(b, w, sizeof(w) / sizeof(w[0]), "regex index");
    policy_binding_free(b);
    policy_unref(p);
}

struct err_case {
    const char *text, *want;
};

static void test_errors(void)
{
    static const struct err_case cases[] = {
        {"github.com:0\n", "p.allow:1:12: expected a port 1..65535"},
        {"github.com:65536\n",
         "p.allow:1:12: expected a port 1..65535 (or ':*' for any port), found '65536'"},
        {"github.com:443,\n", "p.allow:1:16: expected a port"},
        {"github.com:https\n", "p.allow:1:12: expected a port"},
        {"ip 10.0.0.0/33\n", "p.allow:1:4: expected a prefix length of 0..32"},
        {"ip 10.0.0.1/8\n", "p.allow:1:4: expected a network address (host bits zero) for /8"},
        {"ip nothing\n", "p.allow:1:4: expected an IPv4 or IPv6 address, found 'nothing'"},
        {"ip\n", "p.allow:1:3: expected an address or CIDR after 'ip'"},
        {"~^(unclosed\n",
         "p.allow:1:12: regular expression error at offset 10: missing closing parenthesis"},
        {"~\n", "expected a regular expression after '~'"},
        {"frobnicate github.com\n", "p.allow:1:1: unknown directive 'frobnicate' (a line is a "
                                    "host, 'ip', 'deny', 'mode', 'include' or 'read-only')"},
        {"dney github.com\n", "p.allow:1:1: unknown directive 'dney'; did you mean 'deny'?"},
        {"inclde base\n", "p.allow:1:1: unknown directive 'inclde'; did you mean 'include'?"},
        {"github.com frobnicate\n", "p.allow:1:12: expected 'raw', 'private-ok', 'inject', "
                                    "'methods', 'paths', 'git-push', 'until' or end of line, "
                                    "found 'frobnicate'"},
        {"github.com until tomorrow\n", "p.allow:1:18: expected an RFC 3339 time"},
        {"github.com until\n", "p.allow:1:17: expected an RFC 3339 time after 'until'"},
        {"deny github.com raw\n",
         "p.allow:1:17: expected 'until' or end of line (after a deny rule)"},
        {"deny country XX\n",
         "p.allow:1:14: expected a country code (ISO 3166-1 alpha-2, such as KP), found 'XX'"},
        {"deny asn AS0\n", "p.allow:1:10: expected an AS number"},
        {"deny asn\n", "p.allow:1:9: expected an AS number, found end of line"},
        {"mode loud\n", "p.allow:1:6: expected 'report' or 'enforce', found 'loud'"},
        {"include\n", "p.allow:1:8: expected a preset name, found end of line"},
        {"include nope\n", "p.allow:1:9: expected the name of a preset (a file NAME.allow), found "
                           "'nope': no such preset"},
        {"a.*.example.com\n", "p.allow:1:1: expected a wildcard only as a leading '*.'"},
        {"*.10.0.0.1\n",
         "p.allow:1:1: expected a domain name after '*.' or '.', not an IP address"},
        {"2130706433\n", "p.allow:1:1: expected a host name or IP address (numeric host"},
        {"bad_host.example\n", "p.allow:1:1: expected a host name or IP address (byte not allowed"},
        {"ok.example\x01\n", "p.allow:1:11: control byte in a policy line"},
        {"deny\n", "p.allow:1:5: expected a rule, 'country' or 'asn' after 'deny'"},
        {"[::1\n", "p.allow:1:1: expected a host name or IP address (not one IPv6 address"},
    };
    struct policy_diag d = {0};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p[] = {"p", cases[i].text, NULL};
        struct policy *pol = load(&d, p);
        ok(pol == NULL && d.n >= 1 && strstr(d.lines[0], cases[i].want) != NULL,
           "error: '%.*s' -> %s (got: %s)", (int)strcspn(cases[i].text, "\n"), cases[i].text,
           cases[i].want, d.n ? d.lines[0] : "(no error)");
        policy_unref(pol);
    }

    /* every error, not just the first; nothing half-applied */
    const char *many[] = {
        "p", "good.example\nbad..example\nip 1.2.3.4/40\ngood2.example:0\n# fine\nmode x\n", NULL};
    struct policy *pol = load(&d, many);
    ok(pol == NULL && d.n == 4, "four bad lines give four errors and no policy (got %zu)", d.n);
    ok(d.n == 4 && strstr(d.lines[0], ":2:") && strstr(d.lines[1], ":3:") &&
           strstr(d.lines[2], ":4:") && strstr(d.lines[3], ":6:"),
       "errors come in line order");

    /* include cycles, across files */
    const char *cyc[] = {"a", "include b\n", "b", "x.example\ninclude c\n",
                         "c", "include a\n", NULL};
    pol = load(&d, cyc);
    ok(pol == NULL && d.n == 1 && strstr(d.lines[0], "include cycle"),
       "include cycle a -> b -> c -> a is reported once (%s)", d.n ? d.lines[0] : "");
    const char *self[] = {"a", "include a\n", NULL};
    pol = load(&d, self);
    ok(pol == NULL && d.n == 1 && strstr(d.lines[0], "a.allow:1:9: include cycle"),
       "a preset including itself is a cycle");
    const char *geo[] = {"g", "\ndeny country KP\n", NULL};
    pol = load(&d, geo);
    ok(pol == NULL && d.n == 1 && strstr(d.lines[0], "g.allow:2:1: 'deny country' needs") &&
           strstr(d.lines[0], "geoip-country"),
       "deny country without a database says which directive is missing");
    policy_diag_free(&d);

    const char *empty[] = {"locked", "# nothing at all\n\n   \n", NULL};
    pol = load(&d, empty);
    struct policy_binding *b = pol ? bind(pol, "locked", NULL, 0) : NULL;
    struct policy_verdict v;
    ok(b != NULL && strcmp(decide(b, "github.com", 443, NOW, &v), "deny") == 0 &&
           v.reason == POLICY_R_NOT_ALLOWED && v.rule.file == NULL,
       "an empty preset denies everything: no rule matched");
    policy_binding_free(b);
    policy_unref(pol);
    const char *single[] = {"s", "intranet private-ok\nlocalhost:8080\nbuildbox\n", NULL};
    pol = load(&d, single);
    ok(pol != NULL, "single-label hosts, alone or with a modifier, are hosts (%s)",
       d.n ? d.lines[0] : "loaded");
    policy_unref(pol);
    const char *crlf[] = {"w", "github.com\r\n  npmjs.org:443   # comment\r\n", NULL};
    pol = load(&d, crlf);
    b = pol ? bind(pol, "w", NULL, 0) : NULL;
    ok(b != NULL && strcmp(decide(b, "npmjs.org", 443, NOW, &v), "allow") == 0 && v.rule.line == 2,
       "CRLF line ends, indentation and trailing comments are fine");
    policy_binding_free(b);
    policy_unref(pol);
}

/* Decide HOST on any port: the decision word, the port, the verdict. */
static const char *decide_any(const struct policy_binding *b, const char *host,
                              struct policy_verdict *v, uint16_t *port)
{
    struct policy_host h;
    if (policy_host_normalize(host, strlen(host), &h) != POLICY_HOST_OK)
        return "bad_host";
    return policy_decision_str(policy_decide_name_any(b, &h, NOW, v, port));
}

/* The name on any port (what the policy DNS server asks): allowed when
 * some port is, whichever rule set names it; denied with the rule that
 * denies it otherwise. */
static void test_any_port(void)
{
    struct policy *p = load1("ssh.example:22\n"             /* 1 */
                             "deny ssh.example:22,443,80\n" /* 2 */
                             "git.example:22\n"             /* 3 */
                             "deny web.example\n"           /* 4: 443 and 80 */
                             "web.example:8443\n"           /* 5 */
                             "any.example:*\n"              /* 6 */
                             "deny any.example:*\n"         /* 7 */
                             "wide.example:*\n"             /* 8 */
                             "deny wide.example:1,22\n"     /* 9 */
                             "plain.example\n");            /* 10 */
    const char *extra[] = {"extra.example:5432"};
    struct policy_binding *b = bind(p, "p", extra, 1);
    struct policy_verdict v;
    uint16_t port = 0;
    if (!ok(b != NULL, "any port: a binding"))
        return;
    ok(strcmp(decide_any(b, "git.example", &v, &port), "allow") == 0 && port == 22 &&
           rule_is(&v, "p.allow", 3),
       "any port: a name allowed only on 22 is allowed, on 22 (port %u)", port);
    ok(strcmp(decide_any(b, "plain.example", &v, &port), "allow") == 0 && port == 443,
       "any port: 443 comes first (port %u)", port);
    ok(strcmp(decide_any(b, "ssh.example", &v, &port), "deny") == 0 &&
           v.reason == POLICY_R_DENY_RULE && rule_is(&v, "p.allow", 2),
       "any port: an allow its deny covers stays denied, with the deny's rule");
    ok(strcmp(decide_any(b, "web.example", &v, &port), "allow") == 0 && port == 8443,
       "any port: denied on 443 and 80 but allowed on 8443 (port %u)", port);
    ok(strcmp(decide_any(b, "any.example", &v, &port), "deny") == 0 && rule_is(&v, "p.allow", 7),
       "any port: :* against deny :*");
    ok(strcmp(decide_any(b, "wide.example", &v, &port), "allow") == 0 && port == 443,
       "any port: :* with a few ports denied (port %u)", port);
    ok(strcmp(decide_any(b, "extra.example", &v, &port), "allow") == 0 && port == 5432 &&
           rule_is(&v, "sandbox 101", 1),
       "any port: a port only the binding's extras name (port %u)", port);
    ok(strcmp(decide_any(b, "other.example", &v, &port), "deny") == 0 &&
           v.reason == POLICY_R_NOT_ALLOWED,
       "any port: a name no rule names");
    policy_binding_free(b);
    policy_unref(p);

    p = load1("mode report\nallowed.example:22\n");
    b = bind(p, "p", NULL, 0);
    ok(b != NULL && strcmp(decide_any(b, "allowed.example", &v, &port), "allow") == 0 && port == 22,
       "any port: report mode still prefers a real allow (port %u)", port);
    ok(b != NULL && strcmp(decide_any(b, "other.example", &v, &port), "would_deny") == 0,
       "any port: report mode lets the rest through as would_deny");
    policy_binding_free(b);
    policy_unref(p);
}

int main(void)
{
    test_kinds();
    test_any_port();
    test_deny_wins();
    test_regex_index();
    test_until_raw_private();
    test_ranges();
    test_own_addrs();
    test_report_and_include();
    test_binding();
    test_errors();
    return tap_done();
}
