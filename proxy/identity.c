/*
 * identity.c - which sandbox a connection belongs to, and the per-sandbox
 * handles that go with it: its metrics (active connections) and its
 * limits (open connections, new-connection rate, lookups, bytes).
 * A connection is found by its Proxy-Authorization credentials when it
 * sends them, else by its source address, else it is default-policy's.
 */
#include <string.h>

#include "conn.h"
#include "identity.h"
#include "metrics.h"

/* Move c's metrics handle (and its count as active) to its sandbox's,
 * which c's world holds: no lock. */
static void take_msb(struct px_conn *c)
{
    struct px_msb *m = px_metrics_sandbox_ref(c->sb ? c->sb->msb : c->world->default_msb);

    if (c->msb != NULL)
        px_metrics_active(c->msb, -1);
    px_metrics_sandbox_put(c->msb);
    c->msb = m;
    px_metrics_active(m, +1);
}

/* Let go of the connection's limits handle (and its count as open). */
static void drop_limit(struct px_conn *c)
{
    px_limit_conn_close(c->lim);
    px_limit_put(c->lim);
    c->lim = NULL;
}

/* Count the connection against its sandbox's limits, which c's world
 * holds (no lock); a source without a binding has its own, found in the
 * limits table under its lock.  False when they refuse it (nothing
 * counted). */
static bool take_limit(struct px_conn *c)
{
    const struct px_config *cfg = px_d.cfg;
    struct px_limit *l = c->sb ? px_limit_ref(c->sb->lim) : px_limit_get_source(c->src_addr);
    bool rate;

    drop_limit(c);
    if (!px_limit_conn_open(l, cfg->max_conns_per_sandbox, cfg->rate_new_conns_per_sandbox,
                            &rate)) {
        px_limit_put(l);
        return false;
    }
    c->lim = l;
    return true;
}

bool px_conn_same_sandbox(const struct px_sandbox *a, const struct px_sandbox *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a->id, b->id) == 0);
}

/* The sandbox a request inside an intercepted CONNECT belongs to, when
 * the CONNECT's credentials named it (c->sb, in the world before c->world):
 * the same id with the same token in c->world, or NULL. */
static const struct px_sandbox *same_by_auth(const struct px_conn *c)
{
    const struct px_sandbox *sb = px_world_by_id(c->world, c->sb->id);

    return sb != NULL && strcmp(sb->token, c->sb->token) == 0 ? sb : NULL;
}

enum px_identity px_conn_identify(struct px_conn *c, const char *auth, size_t auth_len)
{
    const struct px_sandbox *sb = NULL;
    enum px_identity who = PX_ID_OK;
    bool inherited = auth == NULL && c->by_auth && c->mode == PX_MODE_INTERCEPT && c->sb;

    if (auth != NULL)
        sb = px_world_by_basic_auth(c->world, auth, auth_len);
    if (inherited)
        sb = same_by_auth(c);
    if ((auth != NULL || inherited) && sb == NULL)
        who = PX_ID_UNKNOWN; /* answered as the source, which is who asked */
    if (sb == NULL)
        sb = px_world_by_addr(c->world, c->src_addr);
    bool changed = c->msb == NULL || !px_conn_same_sandbox(sb, c->sb);
    c->sb = sb;
    c->pb = sb ? sb->pb : c->world->default_pb;
    c->by_auth = who == PX_ID_OK && (auth != NULL || inherited);
    if (!changed)
        return who;
    take_msb(c);
    if (!take_limit(c))
        return PX_ID_LIMIT;
    return who;
}
