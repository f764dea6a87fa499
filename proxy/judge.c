/*
 * judge.c - the one decision path (docs/design.md, "Decision path"), for
 * the first request of a connection, every later one and the transparent
 * ClientHello alike, always in the current world:
 *
 *   identify (identity.c) ─▶ expiry, binding without its preset
 *     ─▶ bad host ─▶ name phase ─▶ byte quota
 *     ─▶ addresses: the kept upstream's, the IP literal, or the resolver's
 *     ─▶ address phase on every one ─▶ the transparent destination check
 *
 * Both phases are policy/'s one decision (policy_decide, any deny wins),
 * split only so that a denied name is answered before any lookup.
 *     ─▶ connect (upstream.c), or the kept upstream at once
 *
 * A denial or a refusal answers and closes (answer.c).
 */
#include <string.h>
#include <time.h>

#include "answer.h"
#include "conn.h"
#include "handout.h"
#include "identity.h"
#include "intercept.h"
#include "judge.h"
#include "metrics.h"
#include "upstream.h"

/* How long a lookup may take at most; the resolver's own timeouts end
 * sooner, this bounds a lost answer. */
#define RESOLVE_MAX_MS 30000

/* Take c->rq.v, the verdict the one decision gave, as the request's:
 * deny, or go on allowed (or in report mode, would_deny).  False when it
 * denied (closed). */
static bool settle(struct px_conn *c)
{
    c->rq.decision = c->rq.v.decision;
    c->rq.reason = (enum px_reason)c->rq.v.reason;
    if (c->rq.decision == POLICY_DENY) {
        px_conn_deny(c, c->rq.reason);
        return false;
    }
    if (c->rq.decision == POLICY_ALLOW)
        c->rq.reason = PX_R_ALLOWED;
    c->rq.decided = true;
    return true;
}

/* The rest of the one decision (policy_decide_addrs) on the addresses of
 * c->ans, after the name phase that left its verdict in c->rq.v.  False
 * when it denied (closed). */
static bool addresses_pass(struct px_conn *c)
{
    struct policy_verdict name = c->rq.v;

    policy_decide_addrs(c->pb, &name, c->rq.port, (const uint8_t(*)[16])c->ans.addr, c->ans.n,
                        (int64_t)time(NULL), &c->rq.v, NULL);
    return settle(c);
}

/* A redirected transparent connection goes where the client aimed, and
 * only if that is one of the name's addresses, or one the policy DNS
 * server handed out for the name (handout.h), which must then pass the
 * address phase itself: c->ans becomes that one.  False when it is not
 * (denied, closed). */
static bool keep_aimed_address(struct px_conn *c)
{
    size_t i = 0;
    uint8_t aimed[16];

    if (!c->redirected || c->l->kind == PX_L_PROXY)
        return true;
    while (i < c->ans.n && !px_sockaddr_is(&c->orig_dst.sa, c->ans.addr[i]))
        i++;
    if (i < c->ans.n) {
        memmove(c->ans.addr[0], c->ans.addr[i], 16);
        c->ans.n = 1;
        return true;
    }
    px_sockaddr_to16(&c->orig_dst.sa, aimed);
    if (c->rq.host.kind == POLICY_HOST_NAME && px_handout_has(c->rq.host.text, aimed)) {
        memcpy(c->ans.addr[0], aimed, 16);
        c->ans.n = 1;
        policy_decide(c->pb, &c->rq.host, c->rq.port, (const uint8_t(*)[16])c->ans.addr, 1,
                      (int64_t)time(NULL), &c->rq.v);
        return settle(c);
    }
    px_conn_deny_unruled(c, c->mode == PX_MODE_TLS ? PX_R_SNI_MISMATCH : PX_R_BAD_HOST);
    return false;
}

/* c->ans holds the addresses to judge: judge them, then connect, or go on
 * with the upstream kept alive for this origin.  May close. */
static void judge_addresses(struct px_conn *c)
{
    if (!addresses_pass(c) || !keep_aimed_address(c))
        return;
    if (c->up != NULL) {
        px_upstream_ready(c); /* kept alive: it is connected to that address */
        return;
    }
    px_upstream_connect(c);
}

/* The metrics word of a lookup's result. */
static const char *dns_word(enum px_dns_result res, const struct px_dns_answer *a)
{
    switch (res) {
    case PX_DNS_OK:
        return a->source == PX_DNS_SRC_HOSTS   ? "hosts"
               : a->source == PX_DNS_SRC_CACHE ? "cache"
                                               : "ok";
    case PX_DNS_NXDOMAIN: return "nxdomain";
    default: return "fail";
    }
}

static void on_dns(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct px_conn *c = arg;

    c->dns = NULL;
    if (res == PX_DNS_BUSY) {
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox has too many name lookups in flight");
        return;
    }
    px_metrics_dns(dns_word(res, a));
    if (res != PX_DNS_OK) {
        px_conn_fail(c, 502, PX_R_DNS_FAIL,
                     res == PX_DNS_NXDOMAIN ? "the name does not resolve"
                                            : "the resolver did not answer");
        return;
    }
    c->ans = *a;
    judge_addresses(c);
}

/* RESOLVE's timer: the answer did not come in RESOLVE_MAX_MS. */
static void on_resolve_timeout(struct px_conn *c)
{
    px_conn_ended(c, PX_END_TIMEOUT);
    px_conn_fail(c, 504, PX_R_DNS_FAIL, "name resolution took too long");
}

/* The addresses to judge: the kept upstream's, the IP literal, or the
 * name's, from the resolver (maybe later, in on_dns). */
static void find_addresses(struct px_conn *c)
{
    if (c->up != NULL) {
        c->ans.n = 1;
        px_sockaddr_to16(&c->up_ss.sa, c->ans.addr[0]);
        judge_addresses(c);
        return;
    }
    px_conn_set_state(c, PX_S_RESOLVE, on_resolve_timeout);
    if (c->rq.host.kind != POLICY_HOST_NAME) {
        c->ans.n = 1;
        memcpy(c->ans.addr[0], c->rq.host.addr, 16);
        judge_addresses(c);
        return;
    }
    px_conn_timeout(c, RESOLVE_MAX_MS);
    c->dns = px_resolve_shared(c->w->resolver, c->world->hosts, c->rq.host.text,
                               px_limit_dns_share(c->lim),
                               (unsigned)px_d.cfg->max_lookups_per_sandbox, on_dns, c);
}

/* Whether c's decisions are on requests egressd reads (HTTP, plain or
 * intercepted), not on a tunnel. */
static bool reads_requests(const struct px_conn *c)
{
    return c->mode == PX_MODE_HTTP || c->mode == PX_MODE_PLAIN || c->mode == PX_MODE_INTERCEPT;
}

const struct policy_request *px_conn_asked(const struct px_conn *c)
{
    static const struct policy_request unread = {0};

    if (reads_requests(c) && c->ex != NULL)
        return &c->ex->asked.rq;
    return c->rq.intercept ? NULL : &unread;
}

/* A tunnel to a host that only rules with `methods`/`paths` allow (the
 * name phase said v.requests): unless it is intercepted, its requests
 * cannot be read, so it is decided as a request with neither (denied,
 * with the rule and reason of that).  False when it denied (closed). */
static bool tunnel_requests_pass(struct px_conn *c, int64_t now)
{
    const struct policy_request *rq = px_conn_asked(c);

    if (!(c->rq.v.requests || c->rq.v.push) || reads_requests(c) || rq == NULL)
        return true;
    policy_decide_request(c->pb, &c->rq.host, c->rq.port, rq, NULL, 0, now, &c->rq.v);
    c->rq.decision = c->rq.v.decision;
    c->rq.reason = (enum px_reason)c->rq.v.reason;
    if (c->rq.v.decision != POLICY_DENY)
        return true; /* report mode: would_deny */
    px_conn_deny(c, c->rq.reason);
    return false;
}

/* Expiry, a binding without its preset, the host, the name phase (on the
 * request, when c reads them), the quota; then the addresses.  May
 * close. */
static void decide(struct px_conn *c)
{
    int64_t now = (int64_t)time(NULL);

    if (c->sb != NULL && (c->pb == NULL || px_sandbox_expired(c->sb, now))) {
        memset(&c->rq.v, 0, sizeof(c->rq.v));
        px_conn_deny(c, PX_R_NOT_ALLOWED);
        return;
    }
    if (c->rq.host.len == 0) {
        px_conn_deny(c, PX_R_BAD_HOST);
        return;
    }
    policy_decide_request(c->pb, &c->rq.host, c->rq.port,
                          reads_requests(c) ? px_conn_asked(c) : NULL, NULL, 0, now,
                          &c->rq.v); /* the name phase */
    c->rq.decision = c->rq.v.decision;
    c->rq.reason = (enum px_reason)c->rq.v.reason;
    if (c->rq.v.decision == POLICY_DENY) {
        px_conn_deny(c, c->rq.reason);
        return;
    }
    if ((c->mode == PX_MODE_HTTP || c->mode == PX_MODE_PLAIN) && px_placeholder_seen(c)) {
        px_conn_deny_unruled(c, PX_R_CREDENTIAL_HOST_MISMATCH);
        return;
    }
    c->rq.intercept = px_intercept_wanted(c);
    if (!tunnel_requests_pass(c, now))
        return;
    if (px_limit_over_quota(c->lim, px_d.cfg->quota_bytes_per_sandbox)) {
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox has used up its byte quota");
        return;
    }
    find_addresses(c);
}

void px_conn_judge(struct px_conn *c, const char *auth, size_t auth_len, px_conn_hook *then)
{
    struct px_world *old = c->world;

    /* The world of this decision is the current one; what pointed into the
     * old one (the sandbox, its binding) is found again in the new one
     * before the old one is let go. */
    c->on_connected = then;
    c->world = px_world_get();
    enum px_identity who = px_conn_identify(c, auth, auth_len);
    px_world_put(old);
    switch (who) {
    case PX_ID_OK: decide(c); return;
    case PX_ID_UNKNOWN:
        px_conn_fail(c, 407, PX_R_NOT_ALLOWED, "unknown sandbox credentials");
        return;
    case PX_ID_LIMIT:
        px_conn_fail(c, 429, PX_R_LIMIT, "this sandbox opens too many connections");
        return;
    }
}
