/*
 * dnsq.c - one query to the policy DNS server (docs/design.md, "Policy DNS
 * server"), from its bytes to its answer, in the world current when it
 * came:
 *
 *   parse (too short, or a response: nothing back)
 *     ─▶ who asks: the binding of the source address (none: REFUSED)
 *     ─▶ the sandbox's query rate (REFUSED)
 *     ─▶ a malformed query: FORMERR, NOTIMP, BADVERS
 *     ─▶ the decision (dnsrule.c): class IN, and the type: A and AAAA go
 *        on, HTTPS and SVCB are NODATA, the rest REFUSED; the name,
 *        normalized as the policy does, and the name phase on any port:
 *        denied is NXDOMAIN at once, with no lookup, so nothing a sandbox
 *        puts in a name reaches another resolver
 *     ─▶ egressd's own resolver (the cache the proxy's connections use)
 *     ─▶ the address phase on every address (dnsrule.c): one denied is
 *        NXDOMAIN
 *     ─▶ the addresses of the family asked for, TTL at most dns-ttl-max
 *
 * Every query is counted (egressd_dns_queries_total) and logged: a line
 * each (dns-log all), or a line per (sandbox, name, type, answer) per
 * interval with the count (dns-log summary, a table per worker thread);
 * but a refusal of a source without a binding or past the rate only
 * counts toward a line per (sandbox, source, reason) and interval
 * (dnstally.c), whatever dns-log says, short of off.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accesslog.h"
#include "conn.h"
#include "denials.h"
#include "dns.h"
#include "dnsd.h"
#include "dnsrule.h"
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
    struct px_dns_rule r;   /* the decision (dnsrule.h): name, verdict, port, reason */
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
    uint8_t qname[DNS_NAME_WIRE_MAX]; /* the name as it came, when not normalized */
    size_t qname_len;                 /* 0: none */
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
    if (q->r.v.rule.file != NULL && px_reason_has_rule(q->r.reason))
        snprintf(rule, rule_len, "%s:%u", q->r.v.rule.file, q->r.v.rule.line);
    px_sockaddr_text(&q->from.peer.sa, src, a16);
    *e = (struct px_log_entry){
        .ts_ms = wall_ms(),
        .id = atomic_fetch_add_explicit(&px_d.next_id, 1, memory_order_relaxed),
        .sandbox = q->sb != NULL ? q->sb->id : "default",
        .owner = q->sb != NULL ? q->sb->owner : NULL,
        .src = src,
        .mode = "dns",
        .method = q->perr == DNS_Q_OK ? dns_type_str(q->q.qtype, qtype) : NULL,
        .host = q->perr == DNS_Q_OK ? (q->r.host.len ? q->r.host.text : q->q.name) : NULL,
        /* a name the policy could not normalize is written as it came,
         * with its label structure */
        .qname = q->perr == DNS_Q_OK && !q->r.host.len ? q->q.qname : NULL,
        .qname_len = q->perr == DNS_Q_OK && !q->r.host.len ? q->q.qname_len : 0,
        .port = allowed(o) ? q->r.port : 0,
        .decision = policy_decision_str(allowed(o) ? q->r.v.decision : POLICY_DENY),
        .reason = px_reason_str(q->r.reason),
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
        .qname = s->qname_len ? s->qname : NULL,
        .qname_len = s->qname_len,
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
           s->qname_len == e->qname_len &&
           (e->qname == NULL || memcmp(s->qname, e->qname, e->qname_len) == 0) &&
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
    s->qname_len = e->qname != NULL ? e->qname_len : 0;
    if (s->qname_len > 0)
        memcpy(s->qname, e->qname, s->qname_len);
    snprintf(s->rule, sizeof(s->rule), "%s", e->rule ? e->rule : "");
    snprintf(s->src, sizeof(s->src), "%s", e->src);
    snprintf(s->qtype, sizeof(s->qtype), "%s", e->method ? e->method : "");
    s->answer = e->answer;
    s->decision = e->decision;
    s->reason = reason;
    s->first_ms = e->ts_ms;
    s->count = 1;
}

/* Whether q is a sandbox's denial by the policy, which goes to its ring. */
static bool noted_as_denial(const struct px_dnsq *q)
{
    return q->sb != NULL && q->r.reason <= PX_R_BAD_HOST && q->r.reason != PX_R_ALLOWED;
}

/* A denial by the policy goes to the sandbox's ring (GET .../denials). */
static void note_denial(const struct px_dnsq *q, const struct px_log_entry *e)
{
    if (!noted_as_denial(q))
        return;
    struct px_denial d = {
        .ts_ms = e->ts_ms,
        .mode = e->mode,
        .method = e->method,
        .host = e->host,
        .qname = e->qname,
        .qname_len = e->qname_len,
        .reason = e->reason,
        .rule = e->rule,
    };
    px_denials_note(q->sb->id, &d);
}

/* Whether q is a refusal that comes as fast as anyone can send, counted
 * per interval (dnstally.c) instead of a line each: a source without a
 * binding, a sandbox past its rate. */
static bool tallied(const struct px_dnsq *q, const struct outcome *o)
{
    return o->served != PX_DNSS_DROPPED && (q->sb == NULL || o->served == PX_DNSS_RATE);
}

static void log_query(const struct px_dnsq *q, const struct outcome *o)
{
    struct px_log_entry e;
    char rule[160], src[PX_SOCKADDR_TEXT_MAX], qtype[12];

    px_metrics_dns_query(o->served);
    if (tallied(q, o) && px_d.cfg->dns_log != PX_DNS_LOG_OFF)
        px_dnstally_note(q->sb != NULL ? q->sb->id : "default", q->sb != NULL ? q->sb->owner : NULL,
                         q->src16, q->r.reason);
    if (o->served == PX_DNSS_DROPPED || tallied(q, o) ||
        (px_d.cfg->dns_log == PX_DNS_LOG_OFF && !noted_as_denial(q)))
        return;
    entry_of(q, o, &e, rule, sizeof(rule), src, qtype);
    note_denial(q, &e);
    if (px_d.cfg->dns_log == PX_DNS_LOG_OFF)
        return;
    if (px_d.cfg->dns_log == PX_DNS_LOG_SUMMARY)
        summary_add(q->w, &e, q->r.reason);
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

/* Answer rcode with nothing more (served says how it counts), for
 * reason. */
static void answer_empty(struct px_dnsq *q, int rcode, enum px_dns_served served,
                         enum px_reason reason)
{
    q->r.reason = reason;
    finish(q, rcode, served, NULL, 0, 0);
}

static void on_resolved(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct px_dnsq *q = arg;
    uint32_t ttl_max = (uint32_t)(px_d.cfg->dns_ttl_max_ms / 1000);

    q->req = NULL;
    switch (res) {
    case PX_DNS_OK: break;
    case PX_DNS_NXDOMAIN: answer_empty(q, DNS_RC_NXDOMAIN, PX_DNSS_NXDOMAIN, PX_R_DNS_FAIL); return;
    case PX_DNS_BUSY: answer_empty(q, DNS_RC_SERVFAIL, PX_DNSS_SERVFAIL, PX_R_LIMIT); return;
    default: answer_empty(q, DNS_RC_SERVFAIL, PX_DNSS_SERVFAIL, PX_R_DNS_FAIL); return;
    }
    if (!px_dns_rule_addresses(q->sb->pb, (const uint8_t(*)[16])a->addr, a->n, (int64_t)time(NULL),
                               &q->r)) {
        finish(q, DNS_RC_NXDOMAIN, PX_DNSS_NXDOMAIN, NULL, 0, 0);
        return;
    }
    uint32_t ttl = a->ttl < ttl_max ? a->ttl : ttl_max;
    /* Only a fresh answer: the hosts-file is the same for every worker, and
     * a cached one was noted when it came, for longer than it holds now. */
    if (a->source == PX_DNS_SRC_NET)
        px_handout_note(q->r.host.text, (const uint8_t(*)[16])a->addr, a->n, ttl);
    finish(q, DNS_RC_NOERROR, PX_DNSS_ANSWER, (const uint8_t(*)[16])a->addr, a->n, ttl);
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
        px_resolve_shared(q->w->resolver, q->world->hosts, q->r.host.text, px_limit_dns_share(lim),
                          (unsigned)px_d.cfg->max_lookups_per_sandbox, on_resolved, q);
    q->calling = false;
    if (q->finished)
        release(q); /* answered at once (hosts-file, cache, a limit) */
    else
        q->req = req;
}

/* A parsed query from a known sandbox, within its rate (dnsrule.c). */
static void judge(struct px_dnsq *q)
{
    int64_t now = (int64_t)time(NULL);

    px_dns_rule_question(&q->q, q->sb->pb, px_sandbox_expired(q->sb, now), px_d.cfg->dns_aaaa, now,
                         &q->r);
    switch (q->r.step) {
    case PX_DNS_STEP_REFUSED: finish(q, DNS_RC_REFUSED, PX_DNSS_REFUSED, NULL, 0, 0); return;
    case PX_DNS_STEP_NXDOMAIN: finish(q, DNS_RC_NXDOMAIN, PX_DNSS_NXDOMAIN, NULL, 0, 0); return;
    case PX_DNS_STEP_NODATA: finish(q, DNS_RC_NOERROR, PX_DNSS_NODATA, NULL, 0, 0); return;
    case PX_DNS_STEP_LOOKUP: lookup(q); return;
    }
}

/* What a parse error is answered with. */
static void refuse_malformed(struct px_dnsq *q)
{
    int rcode = dns_error_rcode(q->perr);

    if (rcode < 0)
        answer_empty(q, 0, PX_DNSS_DROPPED, PX_R_BAD_REQUEST);
    else
        answer_empty(q, rcode, rcode == DNS_RC_NOTIMP ? PX_DNSS_NOTIMP : PX_DNSS_FORMERR,
                     PX_R_BAD_REQUEST);
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
    if (dns_error_rcode(q->perr) < 0) { /* nothing goes back */
        refuse_malformed(q);
        return;
    }
    if (q->sb == NULL) { /* a source without a binding gets nothing */
        answer_empty(q, DNS_RC_REFUSED, PX_DNSS_REFUSED, PX_R_NOT_ALLOWED);
        return;
    }
    /* the rate before anything that writes a line of its own, FORMERR too */
    if (!px_limit_dns_query(q->sb->lim, px_d.cfg->dns_rate_per_sandbox)) {
        answer_empty(q, DNS_RC_REFUSED, PX_DNSS_RATE, PX_R_LIMIT);
        return;
    }
    if (q->perr != DNS_Q_OK) {
        refuse_malformed(q);
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
