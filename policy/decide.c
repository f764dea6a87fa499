/*
 * decide.c - the one decision on a destination: the name phase, then the
 * address phase on every address the name has, combined by one rule that
 * every caller shares (egressd's judge, revocation, the ClientHello check,
 * the policy DNS server, and both explains):
 *
 *   any deny wins  >  then any would_deny  >  else allow
 *
 * so a name that answers with a private address beside public ones is
 * trusted with neither, whatever order the addresses come in.  For a
 * request (policy_decide_request) the name phase also weighs its method
 * and path: a host that only rules with `methods`/`paths` allow is allowed
 * for the requests one of them admits.
 */
#include <string.h>

#include "policy_int.h"

/* How much a decision gives away: a deny is the least, an allow the most. */
static int openness(enum policy_decision d)
{
    switch (d) {
    case POLICY_DENY: return 0;
    case POLICY_WOULD_DENY: return 1;
    case POLICY_ALLOW: return 2;
    }
    return 0;
}

enum policy_decision policy_decide_addrs(const struct policy_binding *b,
                                         const struct policy_verdict *name, uint16_t port,
                                         const uint8_t (*addr)[16], size_t n, int64_t now,
                                         struct policy_verdict *v, struct policy_verdict *each)
{
    struct policy_verdict one, first;
    bool decided_by_addr = false;

    *v = *name;
    if (name->decision == POLICY_DENY)
        return POLICY_DENY;
    for (size_t i = 0; i < n; i++) {
        struct policy_verdict *av = each != NULL ? &each[i] : &one;
        policy_decide_addr(b, addr[i], port, name, now, av);
        if (i == 0)
            first = *av;
        if (openness(av->decision) < openness(v->decision)) {
            *v = *av; /* the first of the least open decides */
            decided_by_addr = true;
        }
        if (v->decision == POLICY_DENY && each == NULL)
            break; /* nothing after it can change a deny */
    }
    if (!decided_by_addr && n > 0) {
        /* The name decided; the log still names where it went. */
        memcpy(v->country, first.country, sizeof(v->country));
        v->asn = first.asn;
    }
    return v->decision;
}

enum policy_decision policy_decide_request(const struct policy_binding *b,
                                           const struct policy_host *host, uint16_t port,
                                           const struct policy_request *req,
                                           const uint8_t (*addr)[16], size_t n, int64_t now,
                                           struct policy_verdict *v)
{
    struct policy_verdict name;

    decide_name(b, host, port, req, now, &name);
    return policy_decide_addrs(b, &name, port, addr, n, now, v, NULL);
}

enum policy_decision policy_decide(const struct policy_binding *b, const struct policy_host *host,
                                   uint16_t port, const uint8_t (*addr)[16], size_t n, int64_t now,
                                   struct policy_verdict *v)
{
    return policy_decide_request(b, host, port, NULL, addr, n, now, v);
}
