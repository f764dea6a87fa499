/*
 * test_decide.c - the one decision (policy_decide, policy_decide_addrs):
 * report mode with a would_deny and a deny address in both orders, and a
 * property run over random presets, bindings, hosts and address lists
 * against an oracle built from the two phases alone: any deny wins, then
 * any would_deny, whatever the order of the addresses.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

#define NOW   1796083200 /* 2026-12-01T00:00Z */
#define CASES 20000
#define MAX_N 4

static struct policy *load(const char *text)
{
    struct policy_builder *b = policy_builder_new();
    struct policy_diag d = {0};

    policy_builder_add_preset(b, "p", "p.allow", text, strlen(text));
    struct policy *p = policy_builder_finish(b, &d);
    for (size_t i = 0; i < d.n; i++)
        diag("unexpected: %s", d.lines[i]);
    policy_diag_free(&d);
    return p;
}

static void parse_all(const char *const *s, size_t n, uint8_t addr[][16])
{
    for (size_t i = 0; i < n; i++)
        if (!policy_addr_parse(s[i], strlen(s[i]), addr[i]))
            abort();
}

/* The case: `mode report`, example.com allowed, `deny ip
 * 1.2.3.0/24`; 1.2.3.4 is a would_deny, 10.0.0.1 a private range (the
 * wall, enforced in report mode too).  Denied in both orders, by the
 * private range, and the same through policy_decide_addrs. */
static void report_both_orders(void)
{
    struct policy *p = load("mode report\nexample.com\ndeny ip 1.2.3.0/24\n");
    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, "p", NULL, 0, "t", &d);
    const char *orders[2][2] = {{"1.2.3.4", "10.0.0.1"}, {"10.0.0.1", "1.2.3.4"}};
    struct policy_host h;
    struct policy_verdict v, name, each[2];
    uint8_t addr[2][16];

    policy_host_normalize("example.com", 11, &h);
    for (int o = 0; o < 2; o++) {
        parse_all(orders[o], 2, addr);
        policy_decide(b, &h, 443, (const uint8_t(*)[16])addr, 2, NOW, &v);
        ok(v.decision == POLICY_DENY && v.reason == POLICY_R_PRIVATE_RANGE,
           "report mode, %s then %s: deny private_range (got %s %s)", orders[o][0], orders[o][1],
           policy_decision_str(v.decision), policy_reason_str(v.reason));
        policy_decide(b, &h, 443, NULL, 0, NOW, &name);
        policy_decide_addrs(b, &name, 443, (const uint8_t(*)[16])addr, 2, NOW, &v, each);
        int wd = o == 0 ? 0 : 1;
        ok(v.decision == POLICY_DENY && each[wd].decision == POLICY_WOULD_DENY &&
               each[1 - wd].decision == POLICY_DENY,
           "report mode, %s then %s: each address's own verdict is kept", orders[o][0],
           orders[o][1]);
    }
    parse_all(orders[0], 1, addr);
    ok(policy_decide(b, &h, 443, (const uint8_t(*)[16])addr, 1, NOW, &v) == POLICY_WOULD_DENY &&
           v.reason == POLICY_R_DENY_RULE && v.rule.line == 3,
       "report mode, 1.2.3.4 alone: would_deny by the ip rule, p.allow:3");
    policy_binding_free(b);
    policy_unref(p);
}

/* ------------------------------------------------------ the property */

static const char *const rule_pool[] = {
    "a.test",
    "*.b.test",
    ".c.test:443",
    "d.test:80,8080",
    "deny x.a.test",
    "deny .c.test:80",
    "ip 198.51.100.0/24",
    "deny ip 198.51.100.128/25",
    "deny ip 203.0.113.7",
    "ip 203.0.113.0/24:443",
    "e.test private-ok",
    "*",
    "deny ip 2001:db8::/33",
    "ip 2001:db8::/32",
    "f.test until 2026-11-01T00:00Z",
    "deny g.test until 2026-11-01T00:00Z",
    "g.test",
    "*:*",
    ".test:*",
    "ip 93.184.216.0/24:*",
};
static const char *const host_pool[] = {
    "a.test",       "x.a.test",       "y.b.test",    "b.test",        "c.test",
    "z.c.test",     "d.test",         "e.test",      "f.test",        "g.test",
    "198.51.100.5", "198.51.100.200", "203.0.113.7", "[2001:db8::1]", "other.test",
};
static const char *const addr_pool[] = {
    "198.51.100.5",    "198.51.100.200", "203.0.113.7",       "203.0.113.9",   "10.0.0.1",
    "127.0.0.2",       "192.168.1.1",    "169.254.169.254",   "2001:db8::1",   "2001:db8:8000::1",
    "::ffff:10.1.2.3", "64:ff9b::a00:1", "2002:c000:0201::1", "93.184.216.34", "93.184.216.35",
    "198.51.100.6",    "2001:db8::2",    "203.0.113.10",
};
static const uint16_t port_pool[] = {443, 80, 8080, 22};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static unsigned pick(unsigned n)
{
    return (unsigned)rand() % n;
}

/* A random preset: report or enforce, 1..6 rules of the pool. */
static void random_preset(char *text, size_t size)
{
    size_t len = 0;
    unsigned n = 1 + pick(6);

    text[0] = '\0';
    if (pick(3) == 0)
        len += (size_t)snprintf(text + len, size - len, "mode report\n");
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, size - len, "%s\n", rule_pool[pick(COUNT(rule_pool))]);
}

static int openness(enum policy_decision d)
{
    return d == POLICY_DENY ? 0 : d == POLICY_WOULD_DENY ? 1 : 2;
}

/* The oracle: the two phases, combined as written in the contract. */
static enum policy_decision oracle(const struct policy_binding *b, const struct policy_host *h,
                                   uint16_t port, uint8_t addr[][16], size_t n,
                                   enum policy_reason *reason)
{
    struct policy_verdict name, av;
    enum policy_decision worst;

    policy_decide_name(b, h, port, NOW, &name);
    worst = name.decision;
    *reason = name.reason;
    if (name.decision == POLICY_DENY)
        return worst;
    for (size_t i = 0; i < n; i++) {
        policy_decide_addr(b, addr[i], port, &name, NOW, &av);
        if (openness(av.decision) < openness(worst)) {
            worst = av.decision;
            *reason = av.reason;
        }
    }
    return worst;
}

/* One random case: policy_decide equals the oracle, and its decision does
 * not depend on the order of the addresses; *got is its decision.  False
 * on a mismatch (with the case told). */
static bool one_case(unsigned i, struct policy *p, enum policy_decision *got)
{
    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, "p", NULL, 0, "t", &d);
    const char *host = host_pool[pick(COUNT(host_pool))];
    uint16_t port = port_pool[pick(COUNT(port_pool))];
    size_t n = pick(MAX_N + 1);
    const char *s[MAX_N];
    uint8_t addr[MAX_N][16], rev[MAX_N][16];
    struct policy_host h;
    struct policy_verdict v, vr;
    enum policy_reason want_reason;
    bool good;

    policy_diag_free(&d);
    for (size_t k = 0; k < n; k++)
        s[k] = addr_pool[pick(COUNT(addr_pool))];
    parse_all(s, n, addr);
    for (size_t k = 0; k < n; k++)
        memcpy(rev[k], addr[n - 1 - k], 16);
    policy_host_normalize(host, strlen(host), &h);
    enum policy_decision want = oracle(b, &h, port, addr, n, &want_reason);
    policy_decide(b, &h, port, (const uint8_t(*)[16])addr, n, NOW, &v);
    policy_decide(b, &h, port, (const uint8_t(*)[16])rev, n, NOW, &vr);
    good = v.decision == want && v.reason == want_reason && vr.decision == want;
    *got = v.decision;
    if (!good)
        diag("case %u: %s:%u with %zu addresses (first %s): want %s %s, got %s %s, reversed %s", i,
             host, port, n, n ? s[0] : "-", policy_decision_str(want),
             policy_reason_str(want_reason), policy_decision_str(v.decision),
             policy_reason_str(v.reason), policy_decision_str(vr.decision));
    policy_binding_free(b);
    return good;
}

static void property(void)
{
    unsigned bad = 0, seen[3] = {0};
    char text[512];

    srand(28);
    for (unsigned i = 0; i < CASES && bad < 5; i++) {
        random_preset(text, sizeof(text));
        struct policy *p = load(text);
        if (p == NULL) {
            bad++;
            continue;
        }
        enum policy_decision got = POLICY_DENY;
        if (!one_case(i, p, &got))
            bad++;
        seen[got]++;
        policy_unref(p);
    }
    ok(bad == 0, "policy_decide equals the oracle on %d random presets, hosts and addresses",
       CASES);
    ok(seen[POLICY_ALLOW] > CASES / 20 && seen[POLICY_DENY] > CASES / 20 &&
           seen[POLICY_WOULD_DENY] > CASES / 20,
       "the cases reach every decision: %u allow, %u deny, %u would_deny", seen[POLICY_ALLOW],
       seen[POLICY_DENY], seen[POLICY_WOULD_DENY]);
}

int main(void)
{
    report_both_orders();
    property();
    return tap_done();
}
