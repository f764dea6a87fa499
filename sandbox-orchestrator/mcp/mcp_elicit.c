/* mcp_elicit.c - requests from the server to the client (MCP
 * client/elicitation): sbx_mcp_elicit sends elicitation/create from a
 * tool's thread and waits; the client's response comes back through
 * sbx_mcp_handle (over HTTP in a POST of its own, over stdio on stdin,
 * read by the transport's reader thread) and sbx_mcp_pending_answer hands
 * it to the waiting thread.  Request ids are strings of our own
 * ("sbx-1", ...), unique for the server's life.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_internal.h"

struct sbx_mcp_pending {
    char id[32];
    struct sbx_mcp_session *sess;
    json_t *response; /* the client's, once it came */
    struct sbx_mcp_pending *next;
};

static __thread struct sbx_mcp_session *current;

void sbx_mcp_current_set(struct sbx_mcp_session *sess)
{
    current = sess;
}

struct sbx_mcp_session *sbx_mcp_current_session(void)
{
    return current;
}

void sbx_mcp_pending_answer(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                            const json_t *msg)
{
    const char *id = json_string_value(json_object_get(msg, "id"));

    pthread_mutex_lock(&srv->pending_lock);
    for (struct sbx_mcp_pending *p = srv->pending; id && p; p = p->next) {
        if (p->sess == sess && !p->response && strcmp(p->id, id) == 0) {
            p->response = json_deep_copy(msg);
            pthread_cond_broadcast(&srv->pending_cond);
            break;
        }
    }
    pthread_mutex_unlock(&srv->pending_lock);
}

void sbx_mcp_session_close(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess)
{
    pthread_mutex_lock(&srv->pending_lock);
    sess->closed = 1;
    pthread_cond_broadcast(&srv->pending_cond);
    pthread_mutex_unlock(&srv->pending_lock);
}

/* Whether the client declared it can take form elicitations. */
static int client_elicits(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess)
{
    int yes;

    pthread_mutex_lock(&srv->sessions_lock);
    yes = json_is_object(json_object_get(sess->client_caps, "elicitation"));
    pthread_mutex_unlock(&srv->sessions_lock);
    return yes;
}

/* Waits until p is answered, the client is gone or deadline passes;
 * returns the response (taken from p) or NULL with err. */
static json_t *wait_answer(struct sbx_mcp_server *srv, struct sbx_mcp_pending *p,
                           const struct timespec *deadline, char *err, size_t errlen)
{
    json_t *r;

    pthread_mutex_lock(&srv->pending_lock);
    while (!p->response && !p->sess->closed &&
           pthread_cond_timedwait(&srv->pending_cond, &srv->pending_lock, deadline) == 0)
        ;
    r = p->response;
    p->response = NULL;
    if (!r)
        snprintf(err, errlen, "elicitation: %s",
                 p->sess->closed ? "the client went away" : "no answer in time");
    pthread_mutex_unlock(&srv->pending_lock);
    return r;
}

/* Sends the request of p and waits for its answer; NULL with err. */
static json_t *ask(struct sbx_mcp_server *srv, struct sbx_mcp_pending *p, json_t *req,
                   int timeout_ms, char *err, size_t errlen)
{
    struct timespec deadline;

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (deadline.tv_nsec >= 1000000000) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000;
    }
    if (p->sess->send_request(p->sess->send_request_arg, req) == -1) {
        snprintf(err, errlen,
                 "elicitation: the request could not be sent (over HTTP the tool call must "
                 "accept text/event-stream)");
        return NULL;
    }
    return wait_answer(srv, p, &deadline, err, errlen);
}

/* The action of a response, with *content on accept; ERROR with err. */
static int action_of(const json_t *r, json_t **content, char *err, size_t errlen)
{
    const json_t *result = json_object_get(r, "result");
    const char *action = json_string_value(json_object_get(result, "action"));

    if (json_object_get(r, "error")) {
        snprintf(
            err, errlen, "elicitation: the client answered error %lld: %.200s",
            (long long)json_integer_value(json_object_get(json_object_get(r, "error"), "code")),
            json_string_value(json_object_get(json_object_get(r, "error"), "message")));
        return SBX_MCP_ELICIT_ERROR;
    }
    if (action && strcmp(action, "accept") == 0) {
        *content = json_incref(json_object_get(result, "content"));
        if (!*content)
            *content = json_object();
        return SBX_MCP_ELICIT_ACCEPT;
    }
    if (action && strcmp(action, "decline") == 0)
        return SBX_MCP_ELICIT_DECLINE;
    if (action && strcmp(action, "cancel") == 0)
        return SBX_MCP_ELICIT_CANCEL;
    snprintf(err, errlen, "elicitation: the answer has no action accept, decline or cancel");
    return SBX_MCP_ELICIT_ERROR;
}

int sbx_mcp_elicit(struct sbx_mcp_session *sess, const char *message, json_t *requested_schema,
                   int timeout_ms, json_t **content, char *err, size_t errlen)
{
    struct sbx_mcp_server *srv = sess ? sess->srv : NULL;
    struct sbx_mcp_pending p = {.sess = sess}, **link;
    json_t *req, *r;
    int action;

    *content = NULL;
    if (!srv || !sess->send_request || !client_elicits(srv, sess)) {
        snprintf(err, errlen, "elicitation: the client does not support it");
        return SBX_MCP_ELICIT_ERROR;
    }
    pthread_mutex_lock(&srv->pending_lock);
    snprintf(p.id, sizeof p.id, "sbx-%llu", ++srv->next_request);
    p.next = srv->pending;
    srv->pending = &p;
    pthread_mutex_unlock(&srv->pending_lock);
    req = json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:O}}", "jsonrpc", "2.0", "id", p.id, "method",
                    "elicitation/create", "params", "mode", "form", "message", message,
                    "requestedSchema", requested_schema);
    r = ask(srv, &p, req, timeout_ms, err, errlen);
    pthread_mutex_lock(&srv->pending_lock);
    for (link = &srv->pending; *link != &p; link = &(*link)->next)
        ;
    *link = p.next;
    json_decref(p.response);
    pthread_mutex_unlock(&srv->pending_lock);
    if (!r)
        return SBX_MCP_ELICIT_ERROR;
    action = action_of(r, content, err, errlen);
    json_decref(r);
    return action;
}
