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
#include "pushcheck.h"

/* The longest command list read before a push is refused as unreadable. */
#define LIST_MAX (1024 * 1024)
/* The most of a refused push's body read and dropped before answering
 * anyway (git then reports the connection's end instead of the refs). */
#define DROP_MAX (256ull * 1024 * 1024)
/* The longest answer: "ng" lines for every ref, side-band framed. */
#define REPORT_MAX (4 * 1024 * 1024)
#define REASON_MAX 300

/* One command as kept for the answer: its ref in refs[off..off+len). */
struct cmd {
    uint32_t off, len;
    bool refused;
};

struct px_pushcheck {
    struct http_rp rp;
    struct http_chunked ch; /* this phase's walk of a chunked body */
    uint64_t left;          /* a Content-Length body: bytes not walked yet */
    size_t scanned;         /* bytes of the client's input walked (framing included) */
    bool dropping;          /* refused: the rest of the body is read and dropped */
    bool ended;             /* the walk reached the body's end */
    uint64_t dropped;
    struct cmd *cmds;
    size_t n, cap;
    char *refs;
    size_t refs_len, refs_cap;
    struct policy_verdict refusal; /* the first refused command's verdict */
    size_t refused;                /* commands refused (deny, not would_deny) */
    struct http_rp_command cmd;    /* the one being read */
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
    free(p);
    c->push = NULL;
}

/* Keep command cmd (refused or not) for the answer. */
static void keep(struct px_pushcheck *p, const struct http_rp_command *cmd, bool refused)
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
    p->cmds[p->n++] = (struct cmd){(uint32_t)p->refs_len, (uint32_t)cmd->ref_len, refused};
    p->refs_len += cmd->ref_len + 1;
}

/* Decide one command of the push and keep it. */
static void decide(struct px_conn *c, struct px_pushcheck *p, const struct http_rp_command *cmd)
{
    struct policy_verdict v;

    policy_decide_push(c->pb, &c->rq.host, c->rq.port, cmd->ref, cmd->ref_len, cmd->delete,
                       (int64_t)time(NULL), &v);
    bool refused = v.decision == POLICY_DENY;
    if (v.decision != POLICY_ALLOW && p->refusal.rule.file == NULL)
        p->refusal = v;
    p->refused += refused;
    keep(p, cmd, refused);
}

/* The answer to a refused push: git's report-status, every ref "ng". */
static void answer_refused(struct px_conn *c, struct px_pushcheck *p)
{
    const char **why = calloc(p->n ? p->n : 1, sizeof(*why));
    struct http_rp_command *cmds = calloc(p->n ? p->n : 1, sizeof(*cmds));
    char *out = malloc(REPORT_MAX), refused[REASON_MAX],
         other[] = "egressd: not pushed: another ref of this push was refused";
    size_t len;

    if (why == NULL || cmds == NULL || out == NULL)
        abort();
    snprintf(refused, sizeof(refused), "egressd: this sandbox may not push there (rule %s:%u)",
             strrchr(p->refusal.rule.file, '/') ? strrchr(p->refusal.rule.file, '/') + 1
                                                : p->refusal.rule.file,
             p->refusal.rule.line);
    for (size_t i = 0; i < p->n; i++) {
        memcpy(cmds[i].ref, p->refs + p->cmds[i].off, p->cmds[i].len + 1);
        cmds[i].ref_len = p->cmds[i].len;
        why[i] = p->cmds[i].refused ? refused : other;
    }
    len = http_rp_report(&p->rp, cmds, why, p->n, out, REPORT_MAX);
    c->rq.v.rule = p->refusal.rule;
    if (len == 0)
        px_conn_deny(c, PX_R_PUSH_NOT_ALLOWED);
    else
        px_conn_deny_reply(c, PX_R_PUSH_NOT_ALLOWED, 200, "application/x-git-receive-pack-result",
                           out, len);
    free(why);
    free(cmds);
    free(out);
}

/* The command list ended: on to the exchange (p freed; false), or to
 * dropping the rest of the body of a refused push (true).  May close. */
static bool listed(struct px_conn *c, struct px_pushcheck *p)
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
    p->dropping = true;
    return true;
}

enum list { LIST_MORE, LIST_END, LIST_BAD };

/* The body's data bytes d[0..n) (framing taken off), to the reader, each
 * command decided as it comes; whether the list ended with them. */
static enum list read_list(struct px_conn *c, struct px_pushcheck *p, const uint8_t *d, size_t n)
{
    struct http_rp_command *cmd = &p->cmd;

    while (n > 0) {
        size_t used;
        enum http_rp_result r = http_rp_feed(&p->rp, d, n, &used, cmd);
        d += used;
        n -= used;
        if (r == HTTP_RP_END)
            return LIST_END;
        if (r == HTTP_RP_BAD || p->rp.consumed > LIST_MAX)
            return LIST_BAD;
        if (r == HTTP_RP_COMMAND)
            decide(c, p, cmd);
    }
    return LIST_MORE;
}

/* Where the walk of the body stands after a step. */
enum walk {
    WALK_MORE,   /* more bytes are needed */
    WALK_LISTED, /* the command list ended (listing) */
    WALK_ENDED,  /* the body ended */
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

/* Walk the client's input from where the last walk stopped: listing, the
 * data goes to the reader until the list ends; dropping, what is walked
 * is taken from the input.  How it went. */
static enum walk walk(struct px_conn *c, struct px_pushcheck *p)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    bool listing = !p->dropping;

    for (;;) {
        struct evbuffer_ptr at;
        struct evbuffer_iovec v;
        size_t used;
        bool data, end;
        if (!listing && p->scanned > 0) {
            evbuffer_drain(in, p->scanned); /* walked: dropped */
            p->dropped += p->scanned;
            p->scanned = 0;
        }
        if (p->ended)
            return listing ? WALK_BAD : WALK_ENDED; /* a body that ends inside its list: broken */
        if (p->scanned >= evbuffer_get_length(in) ||
            evbuffer_ptr_set(in, &at, p->scanned, EVBUFFER_PTR_SET) != 0 ||
            evbuffer_peek(in, -1, &at, &v, 1) < 1 || v.iov_len == 0)
            return WALK_MORE;
        if (!frame(c, p, v.iov_base, v.iov_len, &used, &data, &end))
            return WALK_BAD;
        enum list l = listing && data ? read_list(c, p, v.iov_base, used) : LIST_MORE;
        if (l == LIST_BAD)
            return WALK_BAD;
        p->scanned += used;
        p->ended = end;
        if (l == LIST_END)
            return WALK_LISTED;
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
        switch (walk(c, p)) {
        case WALK_MORE:
            if (p->dropping && p->dropped > DROP_MAX)
                answer_refused(c, p); /* enough: git will see the connection end */
            return;
        case WALK_LISTED:
            if (!listed(c, p))
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
