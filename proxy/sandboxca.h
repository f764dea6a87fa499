/*
 * sandboxca.h - the CA of one sandbox for credential injection
 * (docs/credentials.md): made with the appliance key when its binding is
 * made, permitting exactly the hosts its binding's inject rules bind to
 * the secrets the binding lists (ca/).
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

/* The CA of sandbox sb under binding pb, signed with key; NULL when the
 * binding binds none of sb's secrets to a host (or key is NULL), or when
 * it cannot be made (then a warning names the sandbox and the cause, and
 * the sandbox's hosts stay opaque tunnels).  *serial: a number no other
 * CA of this process has. */
struct ca_authority *px_sandbox_ca_new(EVP_PKEY *key, const struct px_sandbox *sb,
                                       const struct policy_binding *pb, uint64_t *serial);

#endif
