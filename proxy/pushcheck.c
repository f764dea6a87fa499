/*
 * pushcheck.c - a git push to a host a `git-push` rule holds
 * (policy/README.md, "Request rules"), read before anything of it goes
 * upstream:
 *
 *   judged request (a POST to .../git-receive-pack, or of git's content
 *   type) ─▶ its body's command list read as it comes, without taking it
 *   from the client's input (http_rp_feed), each command decided
 *   (policy_decide_push)
 *     ─▶ all allowed: the exchange starts as for any request, the body
 *        going on byte for byte from its start (exchange.c)
 *     ─▶ one refused: the rest of the body is read and dropped, and the
 *        client gets git's own refusal, a report-status with
 *        "ng REF egressd: ..." for every ref (http_rp_report); the origin
 *        has seen nothing
 *     ─▶ not a command list egressd reads (a signed push, a broken one,
 *        one over the caps): 403 push_not_allowed
 *
 * An update of an existing ref that only `no-force` rules admit
 * (v.fast_forward_only) must be a fast-forward.  Then, after the list,
 * the pack is read too, still without taking it from the client's input
 * (git/gitpack.h), until its commits show that the new commit of every
 * such update is the old one or descends from it.  git mostly writes a
 * push's commits before its trees and blobs, so that is mostly a small
 * part of it; but not always (a tag on a pushed commit, a repository
 * with a bitmap), so the walk reads on (git_pack_walk_read_all) to the
 * pack's end if it must.  An update that cannot be shown to be one (a
 * rewrite, commits egressd cannot read, or no proof within PACK_READ_MAX
 * of the pack) is refused as the refs above, with git's report-status
 * saying why.
 *
 * The body is walked by its framing (Content-Length or chunked) with a
 * walker of this phase's own, so the exchange later walks it afresh.
 */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "client.h"
#include "conn.h"
#include "exchange.h"
#include "gitpack.h"
#include "pushcheck.h"

/* The longest command list read before a push is refused as unreadable. */
#define LIST_MAX (1024 * 1024)
/* The most of a refused push's body read and dropped before answering
 * anyway (git then reports the connection's end instead of the refs). */
#define DROP_MAX (256ull * 1024 * 1024)
/* The longest answer: "ng" lines for every ref, side-band framed. */
#define REPORT_MAX (4 * 1024 * 1024)
#define REASON_MAX 300
/* The most of a pack read (and held in the client's input) to find the
 * commits of a no-force push, and the most of their content kept. */
#define PACK_READ_MAX    (32ull * 1024 * 1024)
#define PACK_COMMITS_MAX (16u * 1024 * 1024)

/* What became of one command. */
enum cmd_fate {
    CMD_PASSES,  /* allowed (or would_deny in report mode) */
    CMD_REFUSED, /* no git-push rule admits it */
    CMD_NOT_FF,  /* no-force, and not shown to be a fast-forward */
};

/* One command as kept for the answer: its ref in refs[off..off+len). */
struct cmd {
    uint32_t off, len;
    uint8_t fate;                  /* enum cmd_fate */
    bool ff_only;                  /* an update only no-force rules admit */
    char old_oid[65], new_oid[65]; /* (for ff_only) */
};

/* Where the walk of the body is. */
enum phase {
    PH_LIST, /* reading the command list */
    PH_PACK, /* reading the pack's commits (no-force) */
    PH_DROP, /* refused: the rest is read and dropped */
};

struct px_pushcheck {
    struct http_rp rp;
    struct http_chunked ch; /* this phase's walk of a chunked body */
    uint64_t left;          /* a Content-Length body: bytes not walked yet */
    size_t scanned;         /* bytes of the client's input walked (framing included) */
    uint8_t phase;          /* enum phase */
    bool ended;             /* the walk reached the body's end */
    uint64_t dropped;
    struct cmd *cmds;
    size_t n, cap;
    char *refs;
    size_t refs_len, refs_cap;
    struct policy_verdict refusal; /* the first refused command's verdict */
    size_t refused;                /* commands refused (deny, not would_deny) */
    struct http_rp_command cmd;    /* the one being read */
    /* no-force (PH_PACK): the commands to show fast-forwards, the rule of
     * the first, and the pack's walk so far */
    size_t ff_checks;
    struct policy_rule_ref ff_rule;
    struct git_pack_walk *pack;
    uint64_t pack_read;
    enum git_pack_result pack_result;
    const char *pack_why;
};

bool px_pushcheck_wanted(const struct http_request *req)
{
    static const char tail[] = "/git-receive-pack";
    const struct http_header *ct = http_find(req->headers, req->n_headers, "content-type");
    const char *q = memchr(req->path.p, '?', req->path.len);
    size_t n = q != NULL ? (size_t)(q - req->path.p) : req->path.len;

    if (req->method.len != 4 || memcmp(req->method.p, "POST", 4) != 0)
        return false;
    if (n >= sizeof(tail) - 1 &&
        memcmp(req->path.p + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0)
        return true;
    return ct != NULL && ct->value.len >= 34 &&
           strncasecmp(ct->value.p, "application/x-git-receive-pack-request", 34) == 0;
}

static void free_check(struct px_conn *c)
{
    struct px_pushcheck *p = c->push;

    if (p == NULL)
        return;
    free(p->cmds);
    free(p->refs);
    git_pack_walk_free(p->pack);
    free(p);
    c->push = NULL;
}

/* Keep command cmd (its fate so far, and whether it must be shown to
 * be a fast-forward) for the answer. */
static void keep(struct px_pushcheck *p, const struct http_rp_command *cmd, enum cmd_fate fate,
                 bool ff_only)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->cmds = realloc(p->cmds, p->cap * sizeof(*p->cmds));
        if (p->cmds == NULL)
            abort();
    }
    if (p->refs_len + cmd->ref_len + 1 > p->refs_cap) {
        p->refs_cap = (p->refs_len + cmd->ref_len + 1) * 2;
        p->refs = realloc(p->refs, p->refs_cap);
        if (p->refs == NULL)
            abort();
    }
    memcpy(p->refs + p->refs_len, cmd->ref, cmd->ref_len + 1);
    struct cmd *k = &p->cmds[p->n++];
    *k = (struct cmd){.off = (uint32_t)p->refs_len,
                      .len = (uint32_t)cmd->ref_len,
                      .fate = (uint8_t)fate,
                      .ff_only = ff_only};
    if (ff_only) {
        memcpy(k->old_oid, cmd->old_oid, sizeof(k->old_oid));
        memcpy(k->new_oid, cmd->new_oid, sizeof(k->new_oid));
    }
    p->refs_len += cmd->ref_len + 1;
}

/* Decide one command of the push and keep it. */
static void decide(struct px_conn *c, struct px_pushcheck *p, const struct http_rp_command *cmd)
{
    struct policy_verdict v;

    policy_decide_push(c->pb, &c->rq.host, c->rq.port, cmd->ref, cmd->ref_len, cmd->delete,
                       (int64_t)time(NULL), &v);
    bool refused = v.decision == POLICY_DENY;
    /* a create or a delete moves no ref off its history */
    bool ff_only = !refused && v.fast_forward_only && !cmd->create &&
                   !cmd->delete &&strcmp(cmd->old_oid, cmd->new_oid) != 0;
    if (v.decision != POLICY_ALLOW && p->refusal.rule.file == NULL)
        p->refusal = v;
    if (ff_only && p->ff_checks++ == 0)
        p->ff_rule = v.rule;
    p->refused += refused;
    keep(p, cmd, refused ? CMD_REFUSED : CMD_PASSES, ff_only);
}

/* Rule ref r as "FILE:LINE", the file without its directory, into buf. */
static const char *rule_text(struct policy_rule_ref r, char *buf, size_t size)
{
    const char *f = r.file != NULL ? r.file : "-";
    snprintf(buf, size, "%s:%u", strrchr(f, '/') ? strrchr(f, '/') + 1 : f, r.line);
    return buf;
}

/* The answer to a refused push: git's report-status, every ref "ng". */
static void answer_refused(struct px_conn *c, struct px_pushcheck *p)
{
    const char **why = calloc(p->n ? p->n : 1, sizeof(*why));
    struct http_rp_command *cmds = calloc(p->n ? p->n : 1, sizeof(*cmds));
    char *out = malloc(REPORT_MAX), refused[REASON_MAX], not_ff[REASON_MAX], rule[96],
         other[] = "egressd: not pushed: another ref of this push was refused";
    size_t len;

    if (why == NULL || cmds == NULL || out == NULL)
        abort();
    snprintf(refused, sizeof(refused), "egressd: this sandbox may not push there (rule %s)",
             rule_text(p->refusal.rule, rule, sizeof(rule)));
    if (p->pack_result == GIT_PACK_DONE)
        snprintf(not_ff, sizeof(not_ff),
                 "egressd: not a fast-forward, and this sandbox may not force a push (rule %s)",
                 rule_text(p->ff_rule, rule, sizeof(rule)));
    else
        snprintf(not_ff, sizeof(not_ff),
                 "egressd: no-force (rule %s), and the pushed commits could not be read: %.100s",
                 rule_text(p->ff_rule, rule, sizeof(rule)),
                 p->pack_why != NULL ? p->pack_why : "the push ended before them");
    for (size_t i = 0; i < p->n; i++) {
        memcpy(cmds[i].ref, p->refs + p->cmds[i].off, p->cmds[i].len + 1);
        cmds[i].ref_len = p->cmds[i].len;
        why[i] = p->cmds[i].fate == CMD_REFUSED  ? refused
                 : p->cmds[i].fate == CMD_NOT_FF ? not_ff
                                                 : other;
    }
    len = http_rp_report(&p->rp, cmds, why, p->n, out, REPORT_MAX);
    c->rq.v.rule = p->refusal.rule.file != NULL ? p->refusal.rule : p->ff_rule;
    if (len == 0)
        px_conn_deny(c, PX_R_PUSH_NOT_ALLOWED);
    else
        px_conn_deny_reply(c, PX_R_PUSH_NOT_ALLOWED, 200, "application/x-git-receive-pack-result",
                           out, len);
    free(why);
    free(cmds);
    free(out);
}

/* The commands are decided (and the fast-forwards shown or not): on to
 * the exchange (p freed; false), or to dropping the rest of the body of a
 * refused push (true).  May close. */
static bool decided(struct px_conn *c, struct px_pushcheck *p)
{
    if (p->refused == 0) {
        if (p->refusal.rule.file != NULL) { /* report mode: would_deny, goes on */
            c->rq.decision = POLICY_WOULD_DENY;
            c->rq.reason = PX_R_PUSH_NOT_ALLOWED;
            c->rq.v.rule = p->refusal.rule;
        }
        free_check(c);
        px_exchange_start(c);
        return false;
    }
    p->phase = PH_DROP;
    return true;
}

/* The pack's walk is over (p->pack_result): each no-force update must be
 * a fast-forward along its commits; those that are not shown to be are
 * refused (would_deny in report mode).  Then as decided(). */
static bool packed(struct px_conn *c, struct px_pushcheck *p)
{
    bool report = policy_binding_report(c->pb);

    for (size_t i = 0; i < p->n; i++) {
        struct cmd *k = &p->cmds[i];
        if (!k->ff_only ||
            (p->pack_result == GIT_PACK_DONE && git_pack_descends(p->pack, k->new_oid, k->old_oid)))
            continue;
        if (p->refusal.rule.file == NULL && report) {
            p->refusal.rule = p->ff_rule; /* the would_deny's rule */
        } else if (!report) {
            k->fate = CMD_NOT_FF;
            p->refused++;
        }
    }
    return decided(c, p);
}

/* The command list ended: whether the pack's commits are needed (no
 * command refused, and some to show fast-forwards); then its walk is
 * begun (PH_PACK). */
static bool wants_pack(struct px_pushcheck *p)
{
    if (p->refused != 0 || p->ff_checks == 0)
        return false;
    p->pack =
        git_pack_walk_new(p->rp.oid_len == 64 ? GIT_HASH_SHA256 : GIT_HASH_SHA1, PACK_COMMITS_MAX);
    if (p->pack == NULL)
        abort();
    git_pack_walk_read_all(p->pack);
    p->pack_result = GIT_PACK_MORE;
    p->phase = PH_PACK;
    return true;
}

enum list { LIST_MORE, LIST_END, LIST_BAD };

/* The body's data bytes d[0..n) (framing taken off), to the reader, each
 * command decided as it comes; whether the list ended with them (then
 * *taken says how many of them it took: the pack follows). */
static enum list read_list(struct px_conn *c, struct px_pushcheck *p, const uint8_t *d, size_t n,
                           size_t *taken)
{
    struct http_rp_command *cmd = &p->cmd;
    size_t n0 = n;

    while (n > 0) {
        size_t used;
        enum http_rp_result r = http_rp_feed(&p->rp, d, n, &used, cmd);
        d += used;
        n -= used;
        *taken = n0 - n;
        if (r == HTTP_RP_END)
            return LIST_END;
        if (r == HTTP_RP_BAD || p->rp.consumed > LIST_MAX)
            return LIST_BAD;
        if (r == HTTP_RP_COMMAND)
            decide(c, p, cmd);
    }
    return LIST_MORE;
}

/* Whether every no-force update is shown to be a fast-forward by the
 * commits found so far (a proof only grows with more of them). */
static bool all_shown(const struct px_pushcheck *p)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->cmds[i].ff_only &&
            !git_pack_descends(p->pack, p->cmds[i].new_oid, p->cmds[i].old_oid))
            return false;
    return true;
}

/* The pack's data bytes d[0..n) to its walk (PH_PACK); whether it is
 * over (p->pack_result says how): at the pack's end, as soon as every
 * fast-forward is shown (DONE), or past PACK_READ_MAX (too big). */
static bool read_pack(struct px_pushcheck *p, const uint8_t *d, size_t n)
{
    size_t used, had = git_pack_commits(p->pack);

    p->pack_read += n;
    p->pack_result = git_pack_walk_feed(p->pack, d, n, &used, &p->pack_why);
    if (p->pack_result != GIT_PACK_MORE)
        return true;
    if (git_pack_commits(p->pack) != had && all_shown(p)) {
        p->pack_result = GIT_PACK_DONE; /* what is left cannot undo a proof */
        return true;
    }
    if (p->pack_read > PACK_READ_MAX) {
        p->pack_result = GIT_PACK_TOO_BIG;
        p->pack_why = "no fast-forward shown in the first 32 MiB of the pack";
    }
    return p->pack_result != GIT_PACK_MORE;
}

/* Where the walk of the body stands after a step. */
enum walk {
    WALK_MORE,   /* more bytes are needed */
    WALK_LISTED, /* the command list ended (PH_LIST) */
    WALK_PACKED, /* the pack's commits are read, or cannot be (PH_PACK) */
    WALK_ENDED,  /* the body ended (PH_DROP) */
    WALK_BAD,    /* broken framing, or a list egressd cannot read */
};

/* One step of the body's framing over b[0..len): *used bytes walked,
 * *data whether they were data (else chunked framing), *end whether the
 * body ended with them.  False on broken framing. */
static bool frame(struct px_conn *c, struct px_pushcheck *p, const char *b, size_t len,
                  size_t *used, bool *data, bool *end)
{
    if (c->ex->req_body == HTTP_BODY_CHUNKED) {
        enum http_chunked_result r = http_chunked_span(&p->ch, b, len, used, data);
        *end = r == HTTP_CHUNKED_DONE;
        return r != HTTP_CHUNKED_BAD;
    }
    *used = len < p->left ? len : (size_t)p->left;
    p->left -= *used;
    *data = true;
    *end = p->left == 0;
    return true;
}

/* Walk the client's input from where the last walk stopped: PH_LIST, the
 * data goes to the list's reader until the list ends; PH_PACK, to the
 * pack's walk until it is over; PH_DROP, what is walked is taken from the
 * input.  How it went. */
static enum walk walk(struct px_conn *c, struct px_pushcheck *p)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    enum phase ph = (enum phase)p->phase;

    for (;;) {
        struct evbuffer_ptr at;
        struct evbuffer_iovec v;
        size_t used, taken = 0;
        bool data, end;
        if (ph == PH_DROP && p->scanned > 0) {
            evbuffer_drain(in, p->scanned); /* walked: dropped */
            p->dropped += p->scanned;
            p->scanned = 0;
        }
        if (p->ended) /* a body that ends inside its list is broken; inside its pack, unread */
            return ph == PH_DROP ? WALK_ENDED : ph == PH_PACK ? WALK_PACKED : WALK_BAD;
        if (p->scanned >= evbuffer_get_length(in) ||
            evbuffer_ptr_set(in, &at, p->scanned, EVBUFFER_PTR_SET) != 0 ||
            evbuffer_peek(in, -1, &at, &v, 1) < 1 || v.iov_len == 0)
            return WALK_MORE;
        if (!frame(c, p, v.iov_base, v.iov_len, &used, &data, &end))
            return WALK_BAD;
        const uint8_t *d = v.iov_base;
        enum list l = ph == PH_LIST && data ? read_list(c, p, d, used, &taken) : LIST_MORE;
        if (l == LIST_BAD)
            return WALK_BAD;
        p->scanned += used;
        p->ended = end;
        if (l == LIST_END) { /* the pack starts in the same span */
            if (!wants_pack(p))
                return WALK_LISTED;
            ph = PH_PACK;
            if (read_pack(p, d + taken, used - taken))
                return WALK_PACKED;
            continue;
        }
        if (ph == PH_PACK && data && read_pack(p, d, used))
            return WALK_PACKED;
    }
}

/* A push egressd cannot read (a signed push, a broken or over-long list,
 * a body that ends inside it) is decided as a push of no ref: refused,
 * with the host's git-push rule.  Closes. */
static void unreadable(struct px_conn *c)
{
    struct policy_verdict v;

    policy_decide_push(c->pb, &c->rq.host, c->rq.port, "", 0, false, (int64_t)time(NULL), &v);
    c->rq.v.rule = v.rule;
    px_conn_deny(c, PX_R_PUSH_NOT_ALLOWED);
}

/* Walk on, and act on where the walk stands.  May close. */
static void step(struct px_conn *c)
{
    struct px_pushcheck *p = c->push;

    for (;;) {
        enum walk r = walk(c, p);
        switch (r) {
        case WALK_MORE:
            if (p->phase == PH_DROP && p->dropped > DROP_MAX)
                answer_refused(c, p); /* enough: git will see the connection end */
            return;
        case WALK_LISTED:
        case WALK_PACKED:
            if (!(r == WALK_LISTED ? decided(c, p) : packed(c, p)))
                return; /* the exchange has the request (p is freed) */
            continue;   /* drop the rest of the body */
        case WALK_ENDED: answer_refused(c, p); return;
        case WALK_BAD: unreadable(c); return;
        }
    }
}

static void on_cli_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    step(arg);
}

void px_pushcheck_start(struct px_conn *c)
{
    struct px_pushcheck *p = calloc(1, sizeof(*p));

    if (p == NULL)
        abort();
    if (c->state != PX_S_REQUEST)
        px_conn_set_state(c, PX_S_REQUEST, px_conn_on_idle);
    http_rp_init(&p->rp);
    http_chunked_init(&p->ch);
    p->left = c->ex->req_left;
    c->push = p;
    px_conn_on_release(c, free_check);
    if (c->ex->req_body == HTTP_BODY_NONE ||
        (c->ex->req_body == HTTP_BODY_LENGTH && c->ex->req_left == 0)) {
        unreadable(c);
        return;
    }
    if (c->up != NULL)
        bufferevent_disable(c->up, EV_READ); /* nothing is asked of it yet */
    bufferevent_setcb(c->cli, on_cli_read, NULL, px_conn_on_client_event, c);
    bufferevent_enable(c->cli, EV_READ);
    px_conn_timeout(c, px_d.cfg->timeout_idle_ms);
    step(c);
}
