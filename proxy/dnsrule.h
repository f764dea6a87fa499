/*
 * dnsrule.h - what the policy DNS server answers a question with, as a
 * pure function of the question, the sandbox's policy binding and the
 * time (docs/design.md, "Policy DNS server", steps 3, 4 and the address
 * phase of 5).  No I/O: dnsq.c does the asking and the answering around
 * it, and tests/fuzz/fuzz_dns_rule.c holds it to its promises (a name the
 * policy denies is never looked up nor answered).
 */
#ifndef PX_DNSRULE_H
#define PX_DNSRULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns.h"
#include "policy.h"
#include "verdict.h"

enum px_dns_step {
    PX_DNS_STEP_REFUSED,  /* a class or type not served */
    PX_DNS_STEP_NXDOMAIN, /* not a name, no policy, or the name phase denies it */
    PX_DNS_STEP_NODATA,   /* allowed, but nothing to say (HTTPS, SVCB; AAAA with dns-aaaa off) */
    PX_DNS_STEP_LOOKUP,   /* allowed A or AAAA: ask the resolver for the normalized name */
};

/* The decision so far: the step, why (the log's reason), the normalized
 * name (len 0 when it is not one), the name phase's verdict and the port
 * it allowed the name on. */
struct px_dns_rule {
    enum px_dns_step step;
    enum px_reason reason;
    struct policy_host host;
    struct policy_verdict v;
    uint16_t port;
};

/* Decide parsed query q (DNS_Q_OK) for a sandbox held to binding pb (NULL:
 * its preset did not load), `expired` past its `expires`, at `now`;
 * `aaaa` is dns-aaaa.  Fills *r. */
void px_dns_rule_question(const struct dns_query *q, const struct policy_binding *pb, bool expired,
                          bool aaaa, int64_t now, struct px_dns_rule *r);

/* The address phase on every one of addr[0..n) for a LOOKUP: true when all
 * pass; false when one is denied, and then *r says NXDOMAIN and why (the
 * address's verdict). */
bool px_dns_rule_addresses(const struct policy_binding *pb, const uint8_t (*addr)[16], size_t n,
                           int64_t now, struct px_dns_rule *r);

#endif
