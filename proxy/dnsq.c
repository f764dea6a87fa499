/*
 * dnsq.c - one query to the policy DNS server (docs/design.md, "Policy DNS
 * server"), from its bytes to its answer, in the world current when it
 * came:
 *
 *   parse ─▶ who asks: the binding of the source address (none: REFUSED)
 *     ─▶ the sandbox's query rate (REFUSED) ─▶ class IN, and the type:
 *        A and AAAA go on, HTTPS and SVCB are NODATA, the rest REFUSED
 *     ─▶ the name, normalized as the policy does, and the name phase on
 *        any port: denied is NXDOMAIN at once, with no lookup, so nothing
 *        a sandbox puts in a name reaches another resolver
 *     ─▶ egressd's own resolver (the cache the proxy's connections use)
 *     ─▶ the address phase on every address: one denied is NXDOMAIN
 *     ─▶ the addresses of the family asked for, TTL at most dns-ttl-max
 *
 * Every query is counted (egressd_dns_queries_total) and logged: a line
 * each (dns-log all), or a line per (sandbox, name, type, answer) per
 * interval with the count (dns-log summary, a table per worker thread).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accesslog.h"
#include "conn.h"
#include "denials.h"
#include "dns.h"
#include "dnsd.h"
#include "handout.h"
#include "metrics.h"

/* How many summary keys a worker gathers before it writes them early. */
#define SUMMARY_MAX 256

struct px_dnsq {
    struct px_dnsq *next, *prev; /* on from.pending while it waits */
    struct px_worker *w;
    struct px_dnsq_from from;
    struct dns_query q;
    enum dns_query_error perr;
    uint8_t src16[16];
    struct px_world *world; /* held while the query lives */
    const struct px_sandbox *sb;
    struct policy_host host; /* the name, normalized (len 0: not a host) */
    uint16_t port;           /* the port the name phase allowed it on */
    struct policy_verdict v; /* the name phase, then the address that denied */
    enum px_reason reason;
    struct px_dns_req *req; /* the lookup while it runs */
    bool calling;           /* inside px_resolve_shared(), whose callback may run at once */
    bool finished;          /* answered while calling: lookup() frees it */
    int64_t t_start_ms;
};

/* ------------------------------------------------------------ the log */

/* What a query's log line says. */
struct outcome {
    int rcode;
    size_t n_addr; /* records sent */
    enum px_dns_served served;
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The answer's word in the log: the rcode's, and NODATA for a NOERROR
 * without records. */
static const char *answer_word(const struct outcome *o)
{
    if (o->served == PX_DNSS_DROPPED)
        return "DROPPED";
    if (o->rcode == DNS_RC_NOERROR && o->n_addr == 0)
        return "NODATA";
    return dns_rcode_str(o->rcode);
}

static bool allowed(const struct outcome *o)
{
    return o->served == PX_DNSS_ANSWER || o->served == PX_DNSS_NODATA;
}

/* One summary key and its count (dns-log summary). */
struct summary {
    char sandbox[64], owner[128], name[DNS_NAME_TEXT_MAX + 1], rule[160];
    char src[PX_SOCKADDR_TEXT_MAX];
    char qtype[12];
    const char *answer, *decision;
    enum px_reason reason;
    int64_t first_ms;
    uint64_t count;
};

static _Thread_local struct summary *summaries; /* SUMMARY_MAX, allocated at first use */
static _Thread_local size_t n_summaries;

static void entry_of(const struct px_dnsq *q, const struct outcome *o, struct px_log_entry *e,
                     char *rule, size_t rule_len, char src[PX_SOCKADDR_TEXT_MAX], char qtype[12])
{
    uint8_t a16[16];

    rule[0] = '\0';
    if (q->v.rule.file != NULL && px_reason_has_rule(q->reason))
        snprintf(rule, rule_len, "%s:%u", q->v.rule.file, q->v.rule.line);
    px_sockaddr_text(&q->from.peer.sa, src, a16);
    *e = (struct px_log_entry){
        .ts_ms = wall_ms(),
        .id = atomic_fetch_add_explicit(&px_d.next_id, 1, memory_order_relaxed),
        .sandbox = q->sb != NULL ? q->sb->id : "default",
        .owner = q->sb != NULL ? q->sb->owner : NULL,
        .src = src,
        .mode = "dns",
        .method = q->perr == DNS_Q_OK ? dns_type_str(q->q.qtype, qtype) : NULL,
        .host = q->perr == DNS_Q_OK ? (q->host.len ? q->host.text : q->q.name) : NULL,
        .port = allowed(o) ? q->port : 0,
        .decision = policy_decision_str(allowed(o) ? q->v.decision : POLICY_DENY),
        .reason = px_reason_str(q->reason),
        .rule = rule[0] ? rule : NULL,
        .duration_ms = (uint64_t)(px_now_ms() - q->t_start_ms),
        .answer = answer_word(o),
        .count = 1,
    };
}

static void summary_write(const struct summary *s)
{
    struct px_log_entry e = {
        .ts_ms = s->first_ms,
        .id = atomic_fetch_add_explicit(&px_d.next_id, 1, memory_order_relaxed),
        .sandbox = s->sandbox,
        .owner = s->owner[0] ? s->owner : NULL,
        .src = s->src,
        .mode = "dns",
        .method = s->qtype[0] ? s->qtype : NULL,
        .host = s->name[0] ? s->name : NULL,
        .decision = s->decision,
        .reason = px_reason_str(s->reason),
        .rule = s->rule[0] ? s->rule : NULL,
        .answer = s->answer,
        .count = s->count,
    };
    px_accesslog_write(&e);
}

void px_dnsq_log_flush(struct px_worker *w)
{
    (void)w;
    for (size_t i = 0; i < n_summaries; i++)
        summary_write(&summaries[i]);
    n_summaries = 0;
}

void px_dnsq_log_end(struct px_worker *w)
{
    px_dnsq_log_flush(w);
    free(summaries);
    summaries = NULL;
}

static bool same_key(const struct summary *s, const struct px_log_entry *e)
{
    return strcmp(s->sandbox, e->sandbox) == 0 && strcmp(s->name, e->host ? e->host : "") == 0 &&
           strcmp(s->qtype, e->method ? e->method : "") == 0 && s->answer == e->answer &&
           strcmp(s->decision, e->decision) == 0 && strcmp(s->rule, e->rule ? e->rule : "") == 0;
}

/* Count e under its key, writing the table first when it is full. */
static void summary_add(struct px_worker *w, const struct px_log_entry *e, enum px_reason reason)
{
    if (summaries == NULL && (summaries = calloc(SUMMARY_MAX, sizeof(*summaries))) == NULL)
        abort();
    for (size_t i = 0; i < n_summaries; i++) {
        if (summaries[i].reason == reason && same_key(&summaries[i], e)) {
            summaries[i].count++;
            return;
        }
    }
    if (n_summaries == SUMMARY_MAX)
        px_dnsq_log_flush(w);
    struct summary *s = &summaries[n_summaries++];
    snprintf(s->sandbox, sizeof(s->sandbox), "%s", e->sandbox);
    snprintf(s->owner, sizeof(s->owner), "%s", e->owner ? e->owner : "");
    snprintf(s->name, sizeof(s->name), "%s", e->host ? e->host : "");
    snprintf(s->rule, sizeof(s->rule), "%s", e->rule ? e->rule : "");
    snprintf(s->src, sizeof(s->src), "%s", e->src);
    snprintf(s->qtype, sizeof(s->qtype), "%s", e->method ? e->method : "");
    s->answer = e->answer;
    s->decision = e->decision;
    s->reason = reason;
    s->first_ms = e->ts_ms;
    s->count = 1;
}

/* A denial by the policy goes to the sandbox's ring (GET .../denials). */
static void note_denial(const struct px_dnsq *q, const struct px_log_entry *e)
{
    if (q->sb == NULL || q->reason > PX_R_BAD_HOST || q->reason == PX_R_ALLOWED)
        return;
    struct px_denial d = {
        .ts_ms = e->ts_ms,
        .mode = e->mode,
        .method = e->method,
        .host = e->host,
        .reason = e->reason,
        .rule = e->rule,
    };
    px_denials_note(q->sb->id, &d);
}

static void log_query(const struct px_dnsq *q, const struct outcome *o)
{
    struct px_log_entry e;
    char rule[160], src[PX_SOCKADDR_TEXT_MAX], qtype[12];

    px_metrics_dns_query(o->served);
    if (o->served == PX_DNSS_DROPPED)
        return;
    entry_of(q, o, &e, rule, sizeof(rule), src, qtype);
    note_denial(q, &e);
    if (px_d.cfg->dns_log == PX_DNS_LOG_OFF)
        return;
    if (px_d.cfg->dns_log == PX_DNS_LOG_SUMMARY)
        summary_add(q->w, &e, q->reason);
    else
        px_accesslog_write(&e);
}

/* ------------------------------------------------------------ answering */

static void unlink_pending(struct px_dnsq *q)
{
    struct px_dnsq_list *l = q->from.pending;

    if (q->prev == NULL && l->head != q)
        return; /* not on the list */
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        l->head = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    q->next = q->prev = NULL;
    l->n--;
}

static void release(struct px_dnsq *q)
{
    unlink_pending(q);
    px_world_put(q->world);
    free(q);
}

/* The largest answer the client takes: 512 without EDNS0, its size with
 * (at most ours), any size over TCP. */
static size_t answer_max(const struct px_dnsq *q)
{
    if (q->from.tcp)
        return DNS_MSG_MAX;
    return q->q.udp_size < DNS_UDP_OURS ? q->q.udp_size : DNS_UDP_OURS;
}

/* How many of addr[0..n) are of the family `qtype` asks for. */
static size_t family_count(uint16_t qtype, const uint8_t (*addr)[16], size_t n)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += (memcmp(addr[i], mapped, sizeof(mapped)) == 0) == (qtype == DNS_T_A);
    return k;
}

/* Answer with rcode (and, for NOERROR, the addresses of the question's
 * family among addr[0..n)), log, count, free q. */
static void finish(struct px_dnsq *q, int rcode, enum px_dns_served served,
                   const uint8_t (*addr)[16], size_t n, uint32_t ttl)
{
    static _Thread_local uint8_t out[DNS_MSG_MAX];
    struct outcome o = {rcode, 0, served};

    if (served == PX_DNSS_ANSWER && (o.n_addr = family_count(q->q.qtype, addr, n)) == 0)
        o.served = PX_DNSS_NODATA; /* the name has none of the family asked for */
    if (served != PX_DNSS_DROPPED) {
        size_t len = dns_answer_encode(&q->q, rcode, addr, n, ttl, answer_max(q), out, sizeof(out));
        if (len > 0)
            q->from.send(q->from.arg, &q->from.peer, q->from.peer_len, out, len);
    }
    log_query(q, &o);
    if (q->calling)
        q->finished = true; /* lookup() frees it once the resolver returns */
    else
        release(q);
}

/* NXDOMAIN for a name the policy denies; q->v and q->reason say why. */
static void deny(struct px_dnsq *q, enum px_reason reason)
{
    q->reason = reason;
    finish(q, DNS_RC_NXDOMAIN, PX_DNSS_NXDOMAIN, NULL, 0, 0);
}

/* The address phase on every address of a: one denied denies the name. */
static bool addresses_pass(struct px_dnsq *q, const struct px_dns_answer *a)
{
    int64_t now = (int64_t)time(NULL);
    struct policy_verdict av;

    for (size_t i = 0; i < a->n; i++) {
        if (policy_decide_addr(q->sb->pb, a->addr[i], q->port, &q->v, now, &av) == POLICY_DENY) {
            q->v = av;
            deny(q, (enum px_reason)av.reason);
            return false;
        }
    }
    return true;
}

static void on_resolved(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct px_dnsq *q = arg;
    uint32_t ttl_max = (uint32_t)(px_d.cfg->dns_ttl_max_ms / 1000);

    q->req = NULL;
    switch (res) {
    case PX_DNS_OK: break;
    case PX_DNS_NXDOMAIN:
        q->reason = PX_R_DNS_FAIL;
        finish(q, DNS_RC_NXDOMAIN, PX_DNSS_NXDOMAIN, NULL, 0, 0);
        return;
    case PX_DNS_BUSY:
        q->reason = PX_R_LIMIT;
        finish(q, DNS_RC_SERVFAIL, PX_DNSS_SERVFAIL, NULL, 0, 0);
        return;
    default:
        q->reason = PX_R_DNS_FAIL;
        finish(q, DNS_RC_SERVFAIL, PX_DNSS_SERVFAIL, NULL, 0, 0);
        return;
    }
    if (!addresses_pass(q, a))
        return;
    q->reason = PX_R_ALLOWED;
    uint32_t ttl = a->ttl < ttl_max ? a->ttl : ttl_max;
    if (a->source != PX_DNS_SRC_HOSTS) /* the hosts-file is the same for every worker */
        px_handout_note(q->host.text, (const uint8_t(*)[16])a->addr, a->n, ttl);
    finish(q, DNS_RC_NOERROR, PX_DNSS_ANSWER, (const uint8_t(*)[16])a->addr, a->n, ttl);
}

/* The name phase on any port; false when it denied (answered). */
static bool name_passes(struct px_dnsq *q)
{
    if (!q->q.plain ||
        policy_host_normalize(q->q.name, q->q.name_len, &q->host) != POLICY_HOST_OK ||
        q->host.kind != POLICY_HOST_NAME) {
        q->host.len = 0;
        deny(q, PX_R_BAD_HOST);
        return false;
    }
    if (q->sb->pb == NULL || px_sandbox_expired(q->sb, (int64_t)time(NULL))) {
        deny(q, PX_R_NOT_ALLOWED);
        return false;
    }
    if (policy_decide_name_any(q->sb->pb, &q->host, (int64_t)time(NULL), &q->v, &q->port) ==
        POLICY_DENY) {
        deny(q, (enum px_reason)q->v.reason);
        return false;
    }
    return true;
}

/* Keep q on its transport's list and ask the resolver (which may answer
 * at once). */
static void lookup(struct px_dnsq *q)
{
    struct px_dnsq_list *l = q->from.pending;
    struct px_limit *lim = q->sb->lim;

    q->next = l->head;
    if (l->head != NULL)
        l->head->prev = q;
    l->head = q;
    l->n++;
    q->calling = true;
    struct px_dns_req *req =
        px_resolve_shared(q->w->resolver, q->world->hosts, q->host.text, px_limit_dns_share(lim),
                          (unsigned)px_d.cfg->max_lookups_per_sandbox, on_resolved, q);
    q->calling = false;
    if (q->finished)
        release(q); /* answered at once (hosts-file, cache, a limit) */
    else
        q->req = req;
}

/* A parsed query from a known sandbox, within its rate. */
static void judge(struct px_dnsq *q)
{
    uint16_t t = q->q.qtype;

    q->reason = PX_R_BAD_REQUEST;
    if (q->q.qclass != DNS_CLASS_IN ||
        (t != DNS_T_A && t != DNS_T_AAAA && t != DNS_T_HTTPS && t != DNS_T_SVCB)) {
        finish(q, DNS_RC_REFUSED, PX_DNSS_REFUSED, NULL, 0, 0);
        return;
    }
    if (!name_passes(q))
        return;
    q->reason = PX_R_ALLOWED;
    if (t == DNS_T_HTTPS || t == DNS_T_SVCB || (t == DNS_T_AAAA && !px_d.cfg->dns_aaaa)) {
        finish(q, DNS_RC_NOERROR, PX_DNSS_NODATA, NULL, 0, 0);
        return;
    }
    lookup(q);
}

/* What a parse error is answered with. */
static void refuse_malformed(struct px_dnsq *q)
{
    int rcode = dns_error_rcode(q->perr);

    q->reason = PX_R_BAD_REQUEST;
    if (rcode < 0)
        finish(q, 0, PX_DNSS_DROPPED, NULL, 0, 0);
    else
        finish(q, rcode, rcode == DNS_RC_NOTIMP ? PX_DNSS_NOTIMP : PX_DNSS_FORMERR, NULL, 0, 0);
}

void px_dnsq_handle(struct px_worker *w, const struct px_dnsq_from *from, const uint8_t *msg,
                    size_t len)
{
    struct px_dnsq *q = calloc(1, sizeof(*q));

    if (q == NULL)
        abort();
    q->w = w;
    q->from = *from;
    q->t_start_ms = px_now_ms();
    q->world = px_world_get();
    px_sockaddr_to16(&from->peer.sa, q->src16);
    q->perr = dns_query_parse(msg, len, &q->q);
    q->sb = px_world_by_addr(q->world, q->src16);
    if (dns_error_rcode(q->perr) < 0 || (q->sb != NULL && q->perr != DNS_Q_OK)) {
        refuse_malformed(q);
        return;
    }
    if (q->sb == NULL) {
        q->reason = PX_R_NOT_ALLOWED; /* a source without a binding gets nothing */
        finish(q, DNS_RC_REFUSED, PX_DNSS_REFUSED, NULL, 0, 0);
        return;
    }
    if (!px_limit_dns_query(q->sb->lim, px_d.cfg->dns_rate_per_sandbox)) {
        q->reason = PX_R_LIMIT;
        finish(q, DNS_RC_REFUSED, PX_DNSS_RATE, NULL, 0, 0);
        return;
    }
    judge(q);
}

void px_dnsq_cancel_all(struct px_dnsq_list *l)
{
    while (l->head != NULL) {
        struct px_dnsq *q = l->head;
        px_resolve_cancel(q->req);
        release(q);
    }
}
