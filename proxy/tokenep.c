/*
 * tokenep.c - see tokenep.h.
 *
 *   POST to the token path, judged ─▶ its body in (Content-Length, at
 *   most BODY_MAX) ─▶ oauth_grant_parse
 *     refresh_token = the sandbox's refresh placeholder of a login whose
 *                     token endpoint this is
 *         ─▶ (a refresh of the login in flight: wait for it, at most
 *            WAIT_MAX_MS) ─▶ 200, the provider's shape, placeholders only
 *     anything else ─▶ 403 oauth_foreign_token
 */
#include "tokenep.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "client.h"
#include "conn.h"
#include "log.h"
#include "logins.h"
#include "metrics.h"
#include "oauth.h"
#include "placeholder.h"

#define BODY_MAX     (16 * 1024) /* a refresh request's body */
#define WAIT_MAX_MS  10000       /* for a refresh in flight before answering */
#define WAIT_STEP_MS 50
#define ANSWER_MAX   (OAUTH_TOKEN_MAX * 2 + 1024) /* placeholders and an id_token */

#define CANDIDATES_MAX 8 /* logins of one sandbox with the same token endpoint */

struct px_tokenep {
    int cand[CANDIDATES_MAX]; /* the logins whose token endpoint this is (c->sb->secrets) */
    int n_cand;
    int secret;  /* the one whose refresh placeholder came (index in c->sb->secrets) */
    size_t need; /* head and body, bytes */
    size_t head_len;
    char type[128];     /* Content-Type as sent ("" none) */
    struct event *poll; /* waiting for a refresh in flight */
    int64_t wait_until;
};

/* The sandbox's logins bound to this host by a token-endpoint rule whose
 * token path is `path` (the request's, without its query, as request.c
 * kept it for the log), into cand; how many. */
static int logins_at(const struct px_conn *c, const char *path, int cand[CANDIDATES_MAX])
{
    const struct policy_inject *inj[8];
    size_t n = policy_injects_for(c->pb, &c->ic->host, c->ic->port, px_now_ms() / 1000, inj, 8);
    char want[256];
    int k = 0;

    for (size_t r = 0; r < n && r < 8; r++) {
        if (inj[r]->kind != POLICY_INJECT_TOKEN_ENDPOINT ||
            !px_login_token_path(inj[r]->secret, want, sizeof(want)) || strcmp(want, path) != 0)
            continue;
        for (size_t i = 0; i < c->sb->n_secrets && k < CANDIDATES_MAX; i++)
            if (strcmp(c->sb->secrets[i], inj[r]->secret) == 0)
                cand[k++] = (int)i;
    }
    return k;
}

/* Which of tk's logins tok[0..len) is the refresh placeholder of, or -1. */
static int whose(const struct px_conn *c, const struct px_tokenep *tk, const char *tok, size_t len)
{
    char ph[PX_PLACEHOLDER_MAX];

    for (int k = 0; k < tk->n_cand; k++) {
        size_t n = px_placeholder_refresh(px_d.placeholder_key, c->sb->id,
                                          c->sb->secrets[tk->cand[k]], ph, sizeof(ph));
        if (n != 0 && n == len && memcmp(tok, ph, n) == 0)
            return tk->cand[k];
    }
    return -1;
}

/* Answer the refresh of login tk->secret with the sandbox's placeholders.
 * Closes. */
static void answer_refresh(struct px_conn *c)
{
    const char *name = c->sb->secrets[c->ic->tk->secret];
    char access[PX_PLACEHOLDER_MAX], refresh[PX_PLACEHOLDER_MAX];
    static _Thread_local char body[ANSWER_MAX];
    size_t len;

    px_placeholder(px_d.placeholder_key, c->sb->id, name, access, sizeof(access));
    px_placeholder_refresh(px_d.placeholder_key, c->sb->id, name, refresh, sizeof(refresh));
    if (px_login_answer(name, access, refresh, body, sizeof(body), &len) == -1) {
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the login cannot answer a refresh now");
        return;
    }
    px_log_info("conn %llu: sandbox %s: refresh of login '%s' answered by egressd",
                (unsigned long long)c->id, c->sb->id, name);
    px_conn_reply(c, 200, "application/json", body, len);
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    struct px_conn *c = arg;
    struct px_tokenep *tk = c->ic->tk;
    struct timeval step = {0, WAIT_STEP_MS * 1000};

    (void)fd, (void)what;
    if (px_login_busy(c->sb->secrets[tk->secret]) && px_now_ms() < tk->wait_until) {
        evtimer_add(tk->poll, &step);
        return;
    }
    answer_refresh(c);
}

/* The whole body is in the client's input after the head: judge it.
 * Closes (at once, or after a refresh in flight). */
static void decide(struct px_conn *c)
{
    struct px_tokenep *tk = c->ic->tk;
    struct evbuffer *in = bufferevent_get_input(c->cli);
    const char *all = (const char *)evbuffer_pullup(in, (ev_ssize_t)tk->need);
    char tok[PX_PLACEHOLDER_MAX + 1];
    size_t tok_len = 0;

    bufferevent_disable(c->cli, EV_READ);
    enum oauth_grant g = oauth_grant_parse(tk->type[0] ? tk->type : NULL, all + tk->head_len,
                                           tk->need - tk->head_len, tok, sizeof(tok), &tok_len);
    int who = g == OAUTH_GRANT_REFRESH ? whose(c, tk, tok, tok_len) : -1;
    explicit_bzero(tok, sizeof(tok));
    evbuffer_drain(in, tk->need);
    tk->secret = who >= 0 ? who : tk->cand[0];
    const char *name = c->sb->secrets[tk->secret];
    px_request_set_inject(&c->rq, name);
    if (g == OAUTH_GRANT_MALFORMED) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "not a token request (JSON or form)");
        return;
    }
    if (who < 0) {
        px_log_info("conn %llu: sandbox %s sent a token request for login '%s' without its "
                    "refresh placeholder (%s): denied",
                    (unsigned long long)c->id, c->sb->id, name,
                    g == OAUTH_GRANT_REFRESH ? "another refresh token" : "another grant");
        px_metrics_injection(name, PX_INJ_MISMATCH);
        px_conn_deny_unruled(c, PX_R_OAUTH_FOREIGN_TOKEN);
        return;
    }
    if (px_login_busy(name)) {
        tk->wait_until = px_now_ms() + WAIT_MAX_MS;
        tk->poll = evtimer_new(c->w->base, on_poll, c);
        on_poll(-1, 0, c);
        return;
    }
    answer_refresh(c);
}

static void on_body(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;

    if (evbuffer_get_length(bufferevent_get_input(bev)) >= c->ic->tk->need)
        decide(c);
}

bool px_tokenep_take(struct px_conn *c, const struct http_request *req)
{
    static const struct http_view post = {"POST", 4};
    int cand[CANDIDATES_MAX], n;

    if (req->method.len != post.len || memcmp(req->method.p, post.p, post.len) != 0 ||
        (n = logins_at(c, c->ex->path, cand)) == 0)
        return false;
    if (req->body != HTTP_BODY_LENGTH || req->content_length > BODY_MAX) {
        px_conn_fail(c, req->body == HTTP_BODY_CHUNKED ? 411 : 400, PX_R_BAD_REQUEST,
                     "a token request needs a Content-Length body of at most 16 KiB");
        return true;
    }
    struct px_tokenep *tk = calloc(1, sizeof(*tk));
    if (tk == NULL)
        abort();
    c->ic->tk = tk;
    memcpy(tk->cand, cand, sizeof(cand));
    tk->n_cand = n;
    tk->secret = cand[0];
    tk->head_len = req->head_len;
    tk->need = req->head_len + (size_t)req->content_length;
    const struct http_header *ct = http_find(req->headers, req->n_headers, "content-type");
    if (ct != NULL)
        snprintf(tk->type, sizeof(tk->type), "%.*s", (int)ct->value.len, ct->value.p);
    bufferevent_setcb(c->cli, on_body, NULL, px_conn_on_client_event, c);
    on_body(c->cli, c);
    return true;
}

void px_tokenep_free(struct px_conn *c)
{
    if (c->ic == NULL || c->ic->tk == NULL)
        return;
    if (c->ic->tk->poll != NULL)
        event_free(c->ic->tk->poll);
    free(c->ic->tk);
    c->ic->tk = NULL;
}
