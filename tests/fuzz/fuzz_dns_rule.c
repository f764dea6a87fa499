/*
 * fuzz_dns_rule.c - the policy DNS server's decision (proxy/dnsrule.h)
 * held to its promises, for any question a sandbox can send:
 *   - a question is REFUSED exactly when its class is not IN or its type
 *     is not one the server answers (A, AAAA, HTTPS, SVCB);
 *   - it is looked up (LOOKUP) or answered NODATA only if its name is a
 *     plain LDH name, normalized as the policy normalizes it, that the
 *     name phase allows on some port, and the port it reports allows it;
 *     LOOKUP only for A and AAAA, NODATA only for HTTPS and SVCB;
 *   - a name the policy denies on every port, and every name of a sandbox
 *     without a policy, is NXDOMAIN (never looked up), with the reason the
 *     name phase gave;
 *   - after a lookup, the addresses are answered only if every one passes
 *     the address phase; otherwise NXDOMAIN, with a denied address's reason.
 * Input: a selector byte (type, class, raw), a name as text up to a NUL,
 * then addresses (16 bytes each) as the resolver might have found them.
 * With the selector's low bit set the rest is taken as a whole DNS message
 * instead.  The policy allows a few names, one only on port 22, a wildcard
 * with a denied subdomain, a regex, and a binding's extra line on 8443.
 */
#include <stdlib.h>
#include <string.h>

#include "dns.h"
#include "dnsrule.h"
#include "fuzz_check.h"
#include "policy.h"

#define NOW      1796083200 /* 2026-12-01T00:00Z */
#define MAX_ADDR 8

static const char preset[] = "allowed.test\n"
                             "port22.test:22 raw\n"
                             ".wild.test\n"
                             "deny bad.wild.test\n"
                             "deny web.test\n"
                             "web.test:8443\n"
                             "~^re[0-9]+\\.test$\n"
                             "deny ip 198.51.100.0/24\n"
                             "all.test:*\n"
                             "deny all.test:*\n";

static struct policy_binding *binding(void)
{
    static struct policy_binding *b;
    if (b != NULL)
        return b;
    struct policy_builder *pb = policy_builder_new();
    struct policy_diag d = {0};
    const char *extra[] = {"extra.test:8443"};

    policy_builder_add_preset(pb, "p", "p.allow", preset, strlen(preset));
    policy_builder_deny_range(pb, "default", "fuzz");
    struct policy *p = policy_builder_finish(pb, &d);
    if (p == NULL || (b = policy_binding_new(p, "p", extra, 1, "sandbox 1", &d)) == NULL)
        abort();
    policy_unref(p);
    return b;
}

/* A query for `name` (text, labels split at '.') of qtype and qclass into
 * out; its length, or 0 when a label is empty or too long. */
static size_t make_query(const char *name, size_t len, uint16_t qtype, uint16_t qclass,
                         uint8_t *out, size_t cap)
{
    size_t n = 0, start = 0;
    static const uint8_t head[DNS_HEADER_LEN] = {0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};

    memcpy(out, head, sizeof(head));
    n = sizeof(head);
    for (size_t i = 0; i <= len; i++) {
        if (i < len && name[i] != '.')
            continue;
        size_t l = i - start;
        if (l == 0 && !(i == len && len == 0))
            return 0;
        if (l > DNS_LABEL_MAX || n + 1 + l + 5 > cap)
            return 0;
        if (l > 0) {
            out[n++] = (uint8_t)l;
            memcpy(out + n, name + start, l);
            n += l;
        }
        start = i + 1;
    }
    out[n++] = 0;
    out[n++] = (uint8_t)(qtype >> 8);
    out[n++] = (uint8_t)qtype;
    out[n++] = (uint8_t)(qclass >> 8);
    out[n++] = (uint8_t)qclass;
    return n;
}

static bool served(uint16_t t)
{
    return t == DNS_T_A || t == DNS_T_AAAA || t == DNS_T_HTTPS || t == DNS_T_SVCB;
}

static void check_question(const struct dns_query *q, const struct policy_binding *b,
                           const struct px_dns_rule *r)
{
    struct policy_host h;
    struct policy_verdict v;
    uint16_t port;
    bool refused = q->qclass != DNS_CLASS_IN || !served(q->qtype);

    CHECK((r->step == PX_DNS_STEP_REFUSED) == refused, "step %d for class %u type %u", r->step,
          q->qclass, q->qtype);
    if (refused)
        return;
    bool name_ok = q->plain && policy_host_normalize(q->name, q->name_len, &h) == POLICY_HOST_OK &&
                   h.kind == POLICY_HOST_NAME;
    bool denied = !name_ok || policy_decide_name_any(b, &h, NOW, &v, &port) == POLICY_DENY;
    if (r->step == PX_DNS_STEP_LOOKUP || r->step == PX_DNS_STEP_NODATA) {
        CHECK(!denied, "'%s' is answered, but the policy denies it on every port", q->name);
        CHECK(r->host.len == h.len && strcmp(r->host.text, h.text) == 0, "'%s' became '%s'", h.text,
              r->host.text);
        CHECK(policy_decide_name(b, &r->host, r->port, NOW, &v) != POLICY_DENY,
              "'%s' is allowed on port %u, says the rule, but not by the policy", h.text, r->port);
        CHECK((r->step == PX_DNS_STEP_LOOKUP) == (q->qtype == DNS_T_A || q->qtype == DNS_T_AAAA),
              "step %d for type %u", r->step, q->qtype);
        return;
    }
    CHECK(r->step == PX_DNS_STEP_NXDOMAIN && denied, "'%s': step %d, denied %d", q->name, r->step,
          denied);
    if (name_ok)
        CHECK((int)r->reason == (int)v.reason, "'%s': reason %d, the name phase said %d", h.text,
              r->reason, v.reason);
    else
        CHECK(r->reason == PX_R_BAD_HOST, "'%s' is not a name: reason %d", q->name, r->reason);
}

static void check_addresses(const struct policy_binding *b, struct px_dns_rule *r,
                            const uint8_t *data, size_t size)
{
    uint8_t addr[MAX_ADDR][16];
    size_t n = size / 16 < MAX_ADDR ? size / 16 : MAX_ADDR;
    struct px_dns_rule before = *r;
    bool any_denied = false;

    memcpy(addr, data, n * 16);
    for (size_t i = 0; i < n; i++) {
        struct policy_verdict av;
        any_denied |= policy_decide_addr(b, addr[i], r->port, &before.v, NOW, &av) == POLICY_DENY;
    }
    bool pass = px_dns_rule_addresses(b, (const uint8_t(*)[16])addr, n, NOW, r);
    CHECK(pass == !any_denied, "addresses pass %d, one denied %d", pass, any_denied);
    CHECK(pass ? r->step == PX_DNS_STEP_LOOKUP : r->step == PX_DNS_STEP_NXDOMAIN,
          "step %d after the address phase", r->step);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint16_t types[] = {DNS_T_A,   DNS_T_AAAA, DNS_T_HTTPS, DNS_T_SVCB,
                                     DNS_T_TXT, DNS_T_ANY,  DNS_T_MX,    DNS_T_NULL};
    uint8_t msg[DNS_MSG_MAX];
    struct dns_query q;
    struct px_dns_rule r;
    const struct policy_binding *b = binding();

    if (size < 1)
        return 0;
    size_t len = 0, tail = size;
    if (data[0] & 1) {
        len = size - 1 < sizeof(msg) ? size - 1 : sizeof(msg);
        memcpy(msg, data + 1, len);
        tail = size;
    } else {
        const char *name = (const char *)data + 1;
        size_t nlen = strnlen(name, size - 1);
        uint16_t cls = (data[0] & 2) ? 3 /* CH */ : DNS_CLASS_IN;
        len = make_query(name, nlen, types[(data[0] >> 2) & 7], cls, msg, sizeof(msg));
        tail = 1 + nlen + (1 + nlen < size);
    }
    if (len == 0 || dns_query_parse(msg, len, &q) != DNS_Q_OK)
        return 0;

    px_dns_rule_question(&q, NULL, false, true, NOW, &r);
    CHECK(r.step == PX_DNS_STEP_REFUSED || r.step == PX_DNS_STEP_NXDOMAIN,
          "a sandbox without a policy got step %d for '%s'", r.step, q.name);
    px_dns_rule_question(&q, b, true, true, NOW, &r);
    CHECK(r.step == PX_DNS_STEP_REFUSED || r.step == PX_DNS_STEP_NXDOMAIN,
          "an expired sandbox got step %d for '%s'", r.step, q.name);
    px_dns_rule_question(&q, b, false, true, NOW, &r);
    check_question(&q, b, &r);
    if (r.step == PX_DNS_STEP_LOOKUP && tail <= size)
        check_addresses(b, &r, data + tail, size - tail);
    return 0;
}
