/*
 * inject.c - the `inject` rules of a binding: which of them match a host,
 * all of them in order, and the header fields a rule may not set.
 *
 * An inject rule is a host rule (exact, *.NAME, .NAME) whose clause says
 * which secret goes into which request header.  It allows like any allow
 * rule (the hash table holds it with CR_INJECT, so the name phase notices
 * it at no extra cost); the lists here are for the caller that then
 * terminates TLS for the host and needs the clause itself.  A binding has
 * few of them, so they are scanned in rule order rather than indexed.
 */
#include <string.h>

#include "policy_int.h"

const char *policy_inject_kind_str(enum policy_inject_kind k)
{
    switch (k) {
    case POLICY_INJECT_X_API_KEY: return "x-api-key";
    case POLICY_INJECT_BEARER: return "bearer";
    case POLICY_INJECT_BASIC: return "basic";
    case POLICY_INJECT_HEADER: return "header";
    case POLICY_INJECT_TOKEN_ENDPOINT: return "token-endpoint";
    }
    return "header";
}

/* The inject clause of rs's i-th inject rule. */
static const struct policy_inject *nth(const struct ruleset *rs, size_t i)
{
    return rs->rules[rs->injects[i]].u.inject;
}

/* Append rs's inject rules matching h on port at now (and admitting req,
 * unless NULL) to out[*k..max), counting every match in *k. */
static void collect(const struct ruleset *rs, const struct policy_host *h, uint16_t port,
                    const struct policy_request *req, int64_t now, const struct policy_inject **out,
                    size_t max, size_t *k)
{
    for (size_t i = 0; i < rs->n_injects; i++) {
        const struct rule *r = &rs->rules[rs->injects[i]];
        if (!rule_matches_host(r, h, port, now) ||
            (req != NULL && reqrule_judge(r->req, req) != REQ_ADMITTED))
            continue;
        if (*k < max)
            out[*k] = nth(rs, i);
        (*k)++;
    }
}

bool ruleset_inject_match(const struct ruleset *rs, const struct policy_host *h, uint16_t port,
                          int64_t now)
{
    for (size_t i = 0; i < rs->n_injects; i++)
        if (rule_matches_host(&rs->rules[rs->injects[i]], h, port, now))
            return true;
    return false;
}

size_t policy_injects_for_request(const struct policy_binding *b, const struct policy_host *host,
                                  uint16_t port, const struct policy_request *req, int64_t now,
                                  const struct policy_inject **out, size_t max)
{
    size_t k = 0;

    if (b->n_injects == 0 || host->kind != POLICY_HOST_NAME)
        return 0;
    collect(b->preset, host, port, req, now, out, max, &k);
    collect(&b->extras, host, port, req, now, out, max, &k);
    return k;
}

size_t policy_injects_for(const struct policy_binding *b, const struct policy_host *host,
                          uint16_t port, int64_t now, const struct policy_inject **out, size_t max)
{
    return policy_injects_for_request(b, host, port, NULL, now, out, max);
}

const struct policy_inject *policy_binding_inject(const struct policy_binding *b, size_t i)
{
    if (i < b->preset->n_injects)
        return nth(b->preset, i);
    i -= b->preset->n_injects;
    return i < b->extras.n_injects ? nth(&b->extras, i) : NULL;
}

/*
 * Fields egressd itself frames or routes by, which a rule must not set:
 * the hop-by-hop fields (RFC 9110 section 7.6.1: connection, keep-alive,
 * proxy-connection, te, trailer, transfer-encoding, upgrade), the message
 * framing (content-length, section 8.6), the target (host, section 7.2)
 * and the proxy's own credentials (proxy-authorization, section 11.7.2).
 */
bool inject_field_reserved(const char *field, size_t len)
{
    static const char *const reserved[] = {
        "host",    "connection", "content-length",      "transfer-encoding", "te", "trailer",
        "upgrade", "keep-alive", "proxy-authorization", "proxy-connection",  NULL,
    };
    for (const char *const *r = reserved; *r != NULL; r++)
        if (strlen(*r) == len && memcmp(*r, field, len) == 0)
            return true;
    return false;
}
