/*
 * binding.h - one sandbox binding (docs/design.md, "Sandbox bindings"):
 * the JSON object the admin API and the state file hold, checked field by
 * field, and its policy binding on a snapshot.  The world (world.h) holds
 * the bindings; egressctl's offline explain parses one on its own.
 */
#ifndef PX_BINDING_H
#define PX_BINDING_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "secrets.h"

#define PX_SANDBOX_MAX_ADDRS   16
#define PX_SANDBOX_MAX_SECRETS 16

/* One binding, as the admin API took it. */
struct px_sandbox {
    char id[64]; /* [A-Za-z0-9._-]{1,63} */
    char name[128];
    char owner[128];
    char policy[64]; /* the preset */
    uint8_t addrs[PX_SANDBOX_MAX_ADDRS][16];
    size_t n_addrs;
    char token[128];           /* Proxy-Authorization: Basic base64(id:token); "" none */
    int64_t expires;           /* unix seconds; 0: none */
    struct policy_binding *pb; /* preset + the binding's extra allow lines */
    json_t *json;              /* the binding as stored and returned by GET (token elided) */
    /* The sandbox's metrics series and limits, held by the world (NULL
     * outside one): a connection takes its own reference without a lock
     * (px_metrics_sandbox_ref, px_limit_ref). */
    struct px_msb *msb;
    struct px_limit *lim;
    /* Its CA for credential injection (sandboxca.h), held by the world;
     * NULL when its binding binds none of its secrets.  ca_serial tells one
     * CA from the next (leaf caches). */
    struct ca_authority *ca;
    uint64_t ca_serial;
    /* The secrets its requests may have injected ("secrets": names, unique).
     * A name the world's store lacks (gone at a reload) stays: whatever
     * needs it fails closed. */
    char secrets[PX_SANDBOX_MAX_SECRETS][PX_SECRET_NAME_MAX + 1];
    size_t n_secrets;
};

/* Check binding object `obj` as px_world_put_sandbox() does, without a
 * world: every field's type and form, no unknown field.  `id` is the id it
 * must have ("id" may then be absent); NULL: "id" is required.  Fills *sb
 * with pb NULL and json a new reference (token elided) that the caller
 * drops with json_decref().  Returns 0, or -1 with "sandbox ID: FIELD: what
 * was expected, found what" in err. */
int px_sandbox_parse(const json_t *obj, const char *id, struct px_sandbox *sb, char *err,
                     size_t errlen);

/* Whether sb's binding has expired at `now` (seconds since the epoch). */
bool px_sandbox_expired(const struct px_sandbox *sb, int64_t now);

/* Whether sb's binding lists secret `name` (its "secrets"). */
bool px_sandbox_has_secret(const struct px_sandbox *sb, const char *name);

/* The policy binding of a parsed sandbox on snapshot p: its preset plus
 * its "allow" lines, named "sandbox ID" in rule refs.  NULL with every
 * error in diag. */
struct policy_binding *px_sandbox_bind(struct policy *p, const struct px_sandbox *sb,
                                       struct policy_diag *diag);

#endif
