/*
 * sandboxca.h - the CA of one sandbox for interception (credential
 * injection, docs/credentials.md, and request rules, policy/README.md):
 * made with the appliance key when its binding is made, permitting
 * exactly the hosts its binding's inject rules bind to the secrets the
 * binding lists and the hosts of its rules with `methods`/`paths` (ca/).
 * A CA is shared by every world whose binding of that sandbox names the
 * same hosts, so a reload keeps it (and the workers' leaves under it); a
 * change of those hosts makes a new one.
 */
#ifndef PX_SANDBOXCA_H
#define PX_SANDBOXCA_H

#include <openssl/evp.h>
#include <stdint.h>

#include "policy.h"

struct ca_authority;
struct px_sandbox;

/* A sandbox CA certificate's life; its leaves end with it at the latest. */
#define PX_SANDBOX_CA_VALIDITY_S (365 * 24 * 3600)

struct px_sandbox_ca {
    struct ca_authority *ca;
    uint64_t serial; /* no other CA of this process has it (leaf caches) */
    /* private: the key it is shared under, the references, the list */
};

/* The CA of sandbox sb under binding pb, signed with key: the one already
 * made for sb's id and the same hosts, or a new one; with a reference the
 * caller drops with px_sandbox_ca_put().  NULL when the binding binds
 * none of sb's secrets to a host and has no host-keyed request rule (or
 * key is NULL), or when it cannot be
 * made (then a warning names the sandbox and the cause, and the sandbox's
 * hosts stay opaque tunnels).  Any thread. */
struct px_sandbox_ca *px_sandbox_ca_get(EVP_PKEY *key, const struct px_sandbox *sb,
                                        const struct policy_binding *pb);
void px_sandbox_ca_put(struct px_sandbox_ca *c); /* NULL is a no-op */

#endif
