/*
 * revoke.c - revocation: after every world swap (reload, an admin change,
 * an expiry), each worker judges its open connections again
 * (px_conn_recheck_all).  A connection whose sandbox is gone, expired or
 * now another, or whose request or tunnel the new policy denies, is
 * closed as `revoked`; the others are judged in the new world from then
 * on.
 */
#include <string.h>
#include <time.h>

#include "answer.h"
#include "conn.h"
#include "identity.h"
#include "judge.h"
#include "revoke.h"

/* Who c is in world w, found as it was found at its last decision: by id
 * and the same token, or by its source address. */
static const struct px_sandbox *identity_in(const struct px_conn *c, const struct px_world *w)
{
    if (!c->by_auth)
        return px_world_by_addr(w, c->src_addr);
    const struct px_sandbox *sb = px_world_by_id(w, c->sb->id);
    return sb != NULL && strcmp(sb->token, c->sb->token) == 0 ? sb : NULL;
}

/* Whether c holds a decision that is in force now: a request or a tunnel
 * past its name phase.  (Between requests, the next one is judged anew;
 * a transparent TLS client before its hello has not asked for a host.) */
static bool holds_verdict(const struct px_conn *c)
{
    switch (c->state) {
    case PX_S_RESOLVE:
    case PX_S_CONNECT:
    case PX_S_REQUEST:
    case PX_S_RESPONSE:
    case PX_S_UPGRADED:
    case PX_S_RELAY: return true;
    case PX_S_HELLO: return c->mode == PX_MODE_CONNECT;
    case PX_S_HEAD:
    case PX_S_FLUSH: return false;
    }
    return false;
}

/* Whether binding pb denies what c holds: the name phase, and the address
 * phase on the address c is connected (or connecting) to.  Fills *v with
 * the verdict that decided. */
static bool denied_now(const struct px_conn *c, const struct policy_binding *pb,
                       struct policy_verdict *v)
{
    uint8_t a[1][16];
    /* While resolving, the name alone: its addresses are judged in this
     * world when they come. */
    size_t n = c->state == PX_S_RESOLVE ? 0 : 1;

    px_sockaddr_to16(&c->up_ss.sa, a[0]);
    return policy_decide_request(pb, &c->rq.host, c->rq.port, px_conn_asked(c),
                                 (const uint8_t(*)[16])a, n, (int64_t)time(NULL), v) == POLICY_DENY;
}

/* Judge c from now on in world w (sandbox sb, binding pb). */
static void adopt(struct px_conn *c, struct px_world *w, const struct px_sandbox *sb,
                  const struct policy_binding *pb)
{
    struct px_world *old = c->world;

    c->world = px_world_ref(w);
    c->sb = sb;
    c->pb = pb;
    px_world_put(old);
}

/* Close c as revoked; `rule` (in c->world) is what denies it now, if a
 * rule does.  Before a tunnel or an answer has started, the client gets
 * the deny contract (403, or the TLS alert); later the stream just ends. */
static void revoke_conn(struct px_conn *c, const struct policy_rule_ref *rule)
{
    switch (c->state) {
    case PX_S_RESOLVE:
    case PX_S_CONNECT:
    case PX_S_HELLO:
        if (rule != NULL)
            c->rq.v.rule = *rule;
        else
            memset(&c->rq.v.rule, 0, sizeof(c->rq.v.rule));
        px_conn_deny(c, PX_R_REVOKED);
        return;
    case PX_S_HEAD:
        px_conn_ended(c, PX_END_REVOKED);
        px_conn_close(c, "revoked"); /* between requests: no request to log */
        return;
    default: px_conn_end_denied(c, PX_R_REVOKED, rule, "revoked"); return;
    }
}

/* Judge c again in world w (see px_conn_recheck_all).  May close. */
static void recheck(struct px_conn *c, struct px_world *w, int64_t now)
{
    if (c->state == PX_S_FLUSH)
        return;
    const struct px_sandbox *sb = identity_in(c, w);
    if (!px_conn_same_sandbox(sb, c->sb) ||
        (sb != NULL && (sb->pb == NULL || px_sandbox_expired(sb, now)))) {
        revoke_conn(c, NULL);
        return;
    }
    const struct policy_binding *pb = sb ? sb->pb : w->default_pb;
    struct policy_verdict v;
    bool judge_again = pb != c->pb && holds_verdict(c);
    adopt(c, w, sb, pb);
    if (!judge_again)
        return; /* the same compiled binding, or nothing held: nothing to judge */
    if (denied_now(c, pb, &v)) {
        revoke_conn(c, &v.rule);
        return;
    }
    c->rq.v.rule = v.rule; /* what allows it now, in the world it now holds */
}

void px_conn_recheck_all(struct px_worker *w)
{
    struct px_world *world = px_world_get();
    int64_t now = (int64_t)time(NULL);
    struct px_conn *c = w->conns, *next;

    for (; c != NULL; c = next) {
        next = c->next;
        recheck(c, world, now);
    }
    px_world_put(world);
}
