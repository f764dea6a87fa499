/*
 * sandboxca.c - a sandbox's CA (sandboxca.h).
 */
#include "sandboxca.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ca.h"
#include "log.h"
#include "world.h"

struct shared_ca {
    struct px_sandbox_ca pub;
    char *key; /* "ID HOST HOST..." */
    unsigned refs;
    struct shared_ca *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_ca *cas; /* every CA some world holds */
static uint64_t next_serial = 1;

/* Add host to names[0..*n) unless it is there (or names is full). */
static void add_name(const char **names, size_t *n, const char *host)
{
    size_t k = 0;

    while (k < *n && strcmp(names[k], host) != 0)
        k++;
    if (k == *n && *n < CA_NAMES_MAX)
        names[(*n)++] = host;
}

/* The hosts egressd intercepts for sb under pb, each once, into names (at
 * most CA_NAMES_MAX), in rule order: those of pb's inject rules for sb's
 * secrets, then those of its rules with `methods` or `paths`; how many. */
static size_t bound_hosts(const struct px_sandbox *sb, const struct policy_binding *pb,
                          const char **names)
{
    const struct policy_inject *r;
    const char *host;
    size_t n = 0;

    for (size_t i = 0; (r = policy_binding_inject(pb, i)) != NULL; i++)
        if (px_sandbox_has_secret(sb, r->secret))
            add_name(names, &n, r->host);
    for (size_t i = 0; (host = policy_binding_request_host(pb, i)) != NULL; i++)
        add_name(names, &n, host);
    return n;
}

/* "ID HOST HOST..." (malloc'd): what a CA is shared under. */
static char *share_key(const char *id, const char **names, size_t n)
{
    size_t len = strlen(id) + 1;

    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *k = malloc(len), *p = k;
    if (k == NULL)
        abort();
    p += sprintf(p, "%s", id);
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, " %s", names[i]);
    return k;
}

/* Whether some world holds a CA of sandbox id already (lock held). */
static bool held_for(const char *id)
{
    size_t n = strlen(id);

    for (const struct shared_ca *c = cas; c != NULL; c = c->next)
        if (strncmp(c->key, id, n) == 0 && c->key[n] == ' ')
            return true;
    return false;
}

/* A new CA for names (lock held); NULL with a warning. */
static struct shared_ca *make(EVP_PKEY *key, const char *id, const char **names, size_t n,
                              char *share)
{
    char err[256];
    struct ca_authority *a = ca_authority_new(key, id, names, n, (int64_t)time(NULL),
                                              PX_SANDBOX_CA_VALIDITY_S, err, sizeof(err));
    if (a == NULL) {
        px_log_warnx("sandbox %s: no CA for interception (%s): its hosts stay tunnels", id, err);
        free(share);
        return NULL;
    }
    if (held_for(id))
        px_log_info("sandbox %s: a new CA for interception, for its hosts now:%s; until "
                    "its guest holds it (sandboxctl sync), TLS to a host it adds fails there",
                    id, share + strlen(id));
    struct shared_ca *c = calloc(1, sizeof(*c));
    if (c == NULL)
        abort();
    c->pub = (struct px_sandbox_ca){.ca = a, .serial = next_serial++};
    c->key = share;
    c->next = cas;
    cas = c;
    return c;
}

struct px_sandbox_ca *px_sandbox_ca_get(EVP_PKEY *key, const struct px_sandbox *sb,
                                        const struct policy_binding *pb)
{
    const char *names[CA_NAMES_MAX];

    if (key == NULL || pb == NULL)
        return NULL;
    size_t n = bound_hosts(sb, pb, names);
    if (n == 0)
        return NULL;
    char *share = share_key(sb->id, names, n);
    pthread_mutex_lock(&lock);
    struct shared_ca *c = cas;
    while (c != NULL && strcmp(c->key, share) != 0)
        c = c->next;
    if (c != NULL)
        free(share);
    else
        c = make(key, sb->id, names, n, share);
    if (c != NULL)
        c->refs++;
    pthread_mutex_unlock(&lock);
    return c != NULL ? &c->pub : NULL;
}

void px_sandbox_ca_put(struct px_sandbox_ca *pub)
{
    struct shared_ca *c = (struct shared_ca *)pub, **p;

    if (c == NULL)
        return;
    pthread_mutex_lock(&lock);
    bool last = --c->refs == 0;
    for (p = &cas; last && *p != c; p = &(*p)->next)
        ;
    if (last)
        *p = c->next;
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    ca_authority_free(c->pub.ca);
    free(c->key);
    free(c);
}
