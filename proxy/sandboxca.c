/*
 * sandboxca.c - a sandbox's CA (sandboxca.h).
 */
#include "sandboxca.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "ca.h"
#include "log.h"
#include "world.h"

static atomic_uint_fast64_t next_serial = 1;

/* Whether sb's binding lists secret `name`. */
static bool lists(const struct px_sandbox *sb, const char *name)
{
    for (size_t i = 0; i < sb->n_secrets; i++)
        if (strcmp(sb->secrets[i], name) == 0)
            return true;
    return false;
}

/* The hosts of pb's inject rules for sb's secrets, each once, into names
 * (at most CA_NAMES_MAX); how many. */
static size_t bound_hosts(const struct px_sandbox *sb, const struct policy_binding *pb,
                          const char **names)
{
    const struct policy_inject *r;
    size_t n = 0;

    for (size_t i = 0; (r = policy_binding_inject(pb, i)) != NULL && n < CA_NAMES_MAX; i++) {
        if (!lists(sb, r->secret))
            continue;
        size_t k = 0;
        while (k < n && strcmp(names[k], r->host) != 0)
            k++;
        if (k == n)
            names[n++] = r->host;
    }
    return n;
}

struct ca_authority *px_sandbox_ca_new(EVP_PKEY *key, const struct px_sandbox *sb,
                                       const struct policy_binding *pb, uint64_t *serial)
{
    const char *names[CA_NAMES_MAX];
    char err[256];

    *serial = 0;
    if (key == NULL || pb == NULL || sb->n_secrets == 0)
        return NULL;
    size_t n = bound_hosts(sb, pb, names);
    if (n == 0)
        return NULL;
    struct ca_authority *a = ca_authority_new(key, sb->id, names, n, (int64_t)time(NULL),
                                              PX_SANDBOX_CA_VALIDITY_S, err, sizeof(err));
    if (a == NULL) {
        px_log_warnx("sandbox %s: no CA for credential injection (%s): its hosts stay tunnels",
                     sb->id, err);
        return NULL;
    }
    *serial = atomic_fetch_add(&next_serial, 1);
    return a;
}
