/*
 * dnsrule.c - the policy DNS server's decision on a question (dnsrule.h):
 * the type, the name, the name phase on any port, the address phase.
 */
#include <string.h>

#include "dnsrule.h"

/* Whether the server answers this type at all (for an allowed name). */
static bool served(uint16_t qtype)
{
    return qtype == DNS_T_A || qtype == DNS_T_AAAA || qtype == DNS_T_HTTPS || qtype == DNS_T_SVCB;
}

static void set(struct px_dns_rule *r, enum px_dns_step step, enum px_reason reason)
{
    r->step = step;
    r->reason = reason;
}

void px_dns_rule_question(const struct dns_query *q, const struct policy_binding *pb, bool expired,
                          bool aaaa, int64_t now, struct px_dns_rule *r)
{
    memset(r, 0, sizeof(*r));
    if (q->qclass != DNS_CLASS_IN || !served(q->qtype)) {
        set(r, PX_DNS_STEP_REFUSED, PX_R_BAD_REQUEST);
        return;
    }
    /* Only a name whose text is exactly its wire labels can be judged: a
     * label holding a '.' would otherwise pass for two labels. */
    if (!q->plain || policy_host_normalize(q->name, q->name_len, &r->host) != POLICY_HOST_OK ||
        r->host.kind != POLICY_HOST_NAME) {
        r->host.len = 0;
        set(r, PX_DNS_STEP_NXDOMAIN, PX_R_BAD_HOST);
        return;
    }
    if (pb == NULL || expired) {
        set(r, PX_DNS_STEP_NXDOMAIN, PX_R_NOT_ALLOWED);
        return;
    }
    if (policy_decide_name_any(pb, &r->host, now, &r->v, &r->port) == POLICY_DENY) {
        set(r, PX_DNS_STEP_NXDOMAIN, (enum px_reason)r->v.reason);
        return;
    }
    if (q->qtype == DNS_T_HTTPS || q->qtype == DNS_T_SVCB || (q->qtype == DNS_T_AAAA && !aaaa)) {
        set(r, PX_DNS_STEP_NODATA, PX_R_ALLOWED);
        return;
    }
    set(r, PX_DNS_STEP_LOOKUP, PX_R_ALLOWED);
}

bool px_dns_rule_addresses(const struct policy_binding *pb, const uint8_t (*addr)[16], size_t n,
                           int64_t now, struct px_dns_rule *r)
{
    struct policy_verdict v;

    /* The rest of the one decision, on the port the name phase chose: a
     * name the proxy would deny on any of these addresses gets none. */
    if (policy_decide_addrs(pb, &r->v, r->port, addr, n, now, &v, NULL) == POLICY_DENY) {
        r->v = v;
        set(r, PX_DNS_STEP_NXDOMAIN, (enum px_reason)v.reason);
        return false;
    }
    return true;
}
