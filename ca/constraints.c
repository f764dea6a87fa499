/*
 * constraints.c - the nameConstraints extension (RFC 5280 §4.2.1.10) that
 * permits what a sandbox's rules name and nothing else.
 *
 * A dNSName subtree "d" admits d and every name made by adding labels on
 * its left (RFC 5280).  A leading dot, ".d", is not in RFC 5280 for
 * dNSName, but every verifier our clients use (OpenSSL, GnuTLS; also NSS,
 * Go, Chrome) reads it as "names strictly under d".  So:
 *
 *   rule "h"    permitted "h", excluded ".h": h alone;
 *   rule "*.d"  permitted ".d": the subdomains of d, not d;
 *   rule ".d"   permitted "d": d and its subdomains;
 *   always      excluded iPAddress 0.0.0.0/0 and ::/0: no IP at all.
 *
 * An excluded subtree wins over every permitted one, so the ".h" exclusion
 * is left out when another rule permits a name under h (a nested host, or
 * "*.d"/".d" with h at or under d); h's other subdomains are then permitted
 * too, as X.509 cannot exclude all but a few.  A verifier that read the
 * leading dot some other way would be no worse than plain RFC 5280: taken
 * literally, ".h" excludes nothing (h's subdomains stay permitted, as for a
 * bare "h") and ".d" permits nothing; with the dot stripped, ".h" excludes
 * h itself.  Either is a refusal or the RFC's own subtree, never a name
 * outside the rules' domains.
 */
#include <string.h>

#include "ca_int.h"

/* Append a subtree of base (consumed) to *sk, creating the stack. */
static bool subtree_push(STACK_OF(GENERAL_SUBTREE) * *sk, GENERAL_NAME *base)
{
    GENERAL_SUBTREE *t = base != NULL ? GENERAL_SUBTREE_new() : NULL;

    if (t == NULL) {
        GENERAL_NAME_free(base);
        return false;
    }
    GENERAL_NAME_free(t->base);
    t->base = base;
    if (*sk == NULL)
        *sk = sk_GENERAL_SUBTREE_new_null();
    if (*sk == NULL || !sk_GENERAL_SUBTREE_push(*sk, t)) {
        GENERAL_SUBTREE_free(t);
        return false;
    }
    return true;
}

/* A dNSName subtree: dot (a leading '.') then name[0..len). */
static bool dns_push(STACK_OF(GENERAL_SUBTREE) * *sk, bool dot, const char *name, size_t len)
{
    char buf[CA_HOST_MAX + 2];

    buf[0] = '.';
    memcpy(buf + 1, name, len);
    return subtree_push(sk, ca_general_name(GEN_DNS, dot ? buf : buf + 1, len + dot));
}

/* Whether rule j permits some name strictly under host h. */
static bool permits_under(const struct ca_rule *j, const struct ca_rule *h)
{
    if (ca_name_under(j->name, j->len, h->name, h->len))
        return true;
    return j->kind != CA_RULE_HOST && ca_name_at_or_under(h->name, h->len, j->name, j->len);
}

/* Whether r[i] repeats an earlier rule (it adds nothing then). */
static bool repeated(const struct ca_rule *r, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (r[j].kind == r[i].kind && r[j].len == r[i].len &&
            memcmp(r[j].name, r[i].name, r[i].len) == 0)
            return true;
    return false;
}

/* Whether the exact host r[i] needs its subdomains excluded.  A host over
 * 251 bytes has none (a name under it would pass 253 bytes), and its ".h"
 * would pass the 253 bytes some verifiers (rustls-webpki) allow a
 * constraint before refusing the whole chain. */
static bool exclude_below(const struct ca_rule *r, size_t n, size_t i)
{
    if (r[i].len > CA_HOST_MAX - 2)
        return false;
    for (size_t j = 0; j < n; j++)
        if (j != i && permits_under(&r[j], &r[i]))
            return false;
    return true;
}

static bool rule_push(NAME_CONSTRAINTS *nc, const struct ca_rule *r, size_t n, size_t i)
{
    const struct ca_rule *x = &r[i];

    if (repeated(r, i))
        return true;
    if (!dns_push(&nc->permittedSubtrees, x->kind == CA_RULE_SUBDOMAINS, x->name, x->len))
        return false;
    if (x->kind == CA_RULE_HOST && exclude_below(r, n, i))
        return dns_push(&nc->excludedSubtrees, true, x->name, x->len);
    return true;
}

/* Exclude every IPv4 and IPv6 address: address and mask all zero (RFC 5280
 * §4.2.1.10: 8 octets for IPv4, 32 for IPv6). */
static bool exclude_all_ips(NAME_CONSTRAINTS *nc)
{
    static const unsigned char zero[32];

    return subtree_push(&nc->excludedSubtrees, ca_general_name(GEN_IPADD, zero, 8)) &&
           subtree_push(&nc->excludedSubtrees, ca_general_name(GEN_IPADD, zero, 32));
}

NAME_CONSTRAINTS *ca_constraints_make(const struct ca_rule *r, size_t n)
{
    NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();

    if (nc == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!rule_push(nc, r, n, i)) {
            NAME_CONSTRAINTS_free(nc);
            return NULL;
        }
    }
    if (!exclude_all_ips(nc)) {
        NAME_CONSTRAINTS_free(nc);
        return NULL;
    }
    return nc;
}
