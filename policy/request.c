/*
 * request.c - a rule's request options (`methods`, `paths`, and a
 * preset's `read-only`): which requests to its host the rule admits.
 *
 * A rule without them admits every request; one with them admits a
 * request whose method is listed (any, when no `methods`) and whose
 * normalized path matches one of its globs (any, when no `paths`).
 */
#include <string.h>

#include "policy_int.h"

/* POLICY_METHODS, NULL-terminated (policy_nearest_word takes it so). */
static const char *const method_names[] = POLICY_METHODS;
#define N_METHODS (sizeof(method_names) / sizeof(method_names[0]) - 1)

/* `read-only`: GET, HEAD, OPTIONS. */
#define READ_ONLY_METHODS ((1u << 0) | (1u << 1) | (1u << 6))

int reqrule_method(const char *s, size_t len)
{
    for (size_t i = 0; i < N_METHODS; i++)
        if (strlen(method_names[i]) == len && memcmp(method_names[i], s, len) == 0)
            return (int)i;
    return -1;
}

const char *reqrule_method_near(const char *s, size_t len)
{
    char up[16];

    if (len >= sizeof(up))
        return NULL;
    for (size_t i = 0; i < len; i++)
        up[i] = (s[i] >= 'a' && s[i] <= 'z') ? (char)(s[i] - 32) : s[i];
    return policy_nearest_word(up, len, method_names);
}

/* Is rq's method one of q's? */
static bool method_admitted(const struct reqrule *q, const struct policy_request *rq)
{
    if (q->methods == 0)
        return true;
    if (rq->method == NULL)
        return false;
    int m = reqrule_method(rq->method, rq->method_len);
    return m >= 0 && (q->methods & (1u << m));
}

/* Does rq's path match one of q's globs? */
static bool path_admitted(const struct reqrule *q, const struct policy_request *rq)
{
    if (q->n_paths == 0)
        return true;
    if (rq->path == NULL)
        return false;
    for (size_t i = 0; i < q->n_paths; i++)
        if (policy_glob_match(q->paths[i].s, q->paths[i].len, rq->path, rq->path_len))
            return true;
    return false;
}

enum reqrule_answer reqrule_judge(const struct reqrule *q, const struct policy_request *rq)
{
    if (q == NULL)
        return REQ_ADMITTED;
    if (!path_admitted(q, rq))
        return REQ_PATH_REFUSED;
    return method_admitted(q, rq) ? REQ_ADMITTED : REQ_METHOD_REFUSED;
}

const struct reqrule *reqrule_read_only(struct pool *pool, const struct rule *r)
{
    const struct reqrule *q = r->req;
    struct reqrule *ro;

    if (q != NULL && q->methods != 0)
        return q; /* the rule says otherwise */
    ro = pool_alloc(pool, sizeof(*ro));
    *ro = q != NULL ? *q : (struct reqrule){0};
    ro->methods = READ_ONLY_METHODS;
    if (ro->host == NULL && rule_host_keyed(r))
        ro->host = rule_host_text(pool, r);
    return ro;
}

void ruleset_read_only(struct ruleset *rs, struct pool *pool)
{
    for (size_t i = 0; i < rs->n_rules; i++) {
        struct rule *r = &rs->rules[i];
        if (!r->deny && !r->raw && r->kind != RK_IP)
            r->req = reqrule_read_only(pool, r);
    }
}

const char *policy_binding_request_host(const struct policy_binding *b, size_t i)
{
    const struct ruleset *rs = b->preset;

    if (i >= rs->n_req_hosts) {
        i -= rs->n_req_hosts;
        rs = &b->extras;
    }
    return i < rs->n_req_hosts ? rs->rules[rs->req_hosts[i]].req->host : NULL;
}

/* The first active git-push rule of rs (host-keyed, as the parser has
 * them) matching host and port that admits a push of ref (when ref is
 * NULL: any), and when forcing, does not say `no-force`. */
static const struct rule *push_in(const struct ruleset *rs, const struct policy_host *host,
                                  uint16_t port, int64_t now, const char *ref, size_t len,
                                  bool deletes, bool forcing);

const struct rule *push_rule_for(const struct policy_binding *b, const struct policy_host *host,
                                 uint16_t port, int64_t now)
{
    const struct rule *r = push_in(b->preset, host, port, now, NULL, 0, false, false);
    return r != NULL ? r : push_in(&b->extras, host, port, now, NULL, 0, false, false);
}

/* Does git-push rule r admit an update of ref (deleting it or not)? */
static bool push_admitted(const struct rule *r, const char *ref, size_t len, bool deletes)
{
    if (deletes && r->req->no_delete)
        return false;
    for (size_t i = 0; i < r->req->n_refs; i++)
        if (policy_ref_glob_match(r->req->refs[i].s, r->req->refs[i].len, ref, len))
            return true;
    return false;
}

static const struct rule *push_in(const struct ruleset *rs, const struct policy_host *host,
                                  uint16_t port, int64_t now, const char *ref, size_t len,
                                  bool deletes, bool forcing)
{
    for (size_t i = 0; i < rs->n_push_rules; i++) {
        const struct rule *r = &rs->rules[rs->push_rules[i]];
        if (rule_matches_host(r, host, port, now) &&
            (ref == NULL || push_admitted(r, ref, len, deletes)) && !(forcing && r->req->no_force))
            return r;
    }
    return NULL;
}

/* The first rule of b admitting the push (forcing: one without
 * `no-force`), the preset's before the binding's. */
static const struct rule *push_admitting(const struct policy_binding *b,
                                         const struct policy_host *host, uint16_t port, int64_t now,
                                         const char *ref, size_t len, bool deletes, bool forcing)
{
    const struct rule *r = push_in(b->preset, host, port, now, ref, len, deletes, forcing);
    return r != NULL ? r : push_in(&b->extras, host, port, now, ref, len, deletes, forcing);
}

enum policy_decision policy_decide_push(const struct policy_binding *b,
                                        const struct policy_host *host, uint16_t port,
                                        const char *ref, size_t ref_len, bool deletes, int64_t now,
                                        struct policy_verdict *v)
{
    const struct rule *first = push_rule_for(b, host, port, now), *ok = NULL;

    memset(v, 0, sizeof(*v));
    v->decision = POLICY_ALLOW;
    v->reason = POLICY_R_ALLOWED;
    if (first == NULL)
        return v->decision; /* no git-push rule holds this host */
    ok = push_admitting(b, host, port, now, ref, ref_len, deletes, true);
    if (ok == NULL && (ok = push_admitting(b, host, port, now, ref, ref_len, deletes, false)))
        v->fast_forward_only = true; /* every rule that admits it says no-force */
    v->push = true;
    if (ok != NULL) {
        v->rule = (struct policy_rule_ref){ok->file, ok->line};
        return v->decision;
    }
    v->decision = b->preset->report ? POLICY_WOULD_DENY : POLICY_DENY;
    v->reason = POLICY_R_PUSH_NOT_ALLOWED;
    v->rule = (struct policy_rule_ref){first->file, first->line};
    return v->decision;
}
