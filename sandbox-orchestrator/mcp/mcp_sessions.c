/* mcp_sessions.c - the server's registry of live sessions, for the
 * notifications that belong to no request: resources/updated to the
 * sessions subscribed to a URI, resources/list_changed to all.
 *
 * A session joins at initialize and leaves when its transport ends it
 * (sbx_mcp_session_end).  One lock guards the registry and what the server
 * keeps in each session (log level, subscriptions, client capabilities);
 * notifications are handed to each session's deliver function under it,
 * so a session that has left is never reached.
 */
#include <string.h>

#include "mcp_internal.h"

void sbx_mcp_session_attach(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess)
{
    pthread_mutex_lock(&srv->sessions_lock);
    if (!sess->attached) {
        sess->next = srv->sessions;
        srv->sessions = sess;
        sess->attached = 1;
    }
    pthread_mutex_unlock(&srv->sessions_lock);
}

void sbx_mcp_session_end(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess)
{
    pthread_mutex_lock(&srv->sessions_lock);
    for (struct sbx_mcp_session **p = &srv->sessions; sess->attached && *p; p = &(*p)->next) {
        if (*p == sess) {
            *p = sess->next;
            break;
        }
    }
    sess->attached = 0;
    sess->next = NULL;
    json_decref(sess->subscriptions);
    json_decref(sess->client_caps);
    sess->subscriptions = sess->client_caps = NULL;
    pthread_mutex_unlock(&srv->sessions_lock);
}

int sbx_mcp_session_subscribe(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                              const char *uri, int on)
{
    int rc = 0;

    pthread_mutex_lock(&srv->sessions_lock);
    if (on) {
        if (!sess->subscriptions)
            sess->subscriptions = json_object();
        if (!json_object_get(sess->subscriptions, uri) &&
            json_object_size(sess->subscriptions) >= SBX_MCP_MAX_SUBSCRIPTIONS)
            rc = -1;
        else
            json_object_set_new(sess->subscriptions, uri, json_true());
    } else if (sess->subscriptions) {
        json_object_del(sess->subscriptions, uri);
    }
    pthread_mutex_unlock(&srv->sessions_lock);
    return rc;
}

/* Hands a copy of msg to every session for which want(sess, uri) holds. */
static void broadcast(struct sbx_mcp_server *srv, json_t *msg, const char *uri)
{
    pthread_mutex_lock(&srv->sessions_lock);
    for (struct sbx_mcp_session *s = srv->sessions; s; s = s->next) {
        if (!s->deliver || (uri && !json_object_get(s->subscriptions, uri)))
            continue;
        s->deliver(s->deliver_arg, json_deep_copy(msg));
    }
    pthread_mutex_unlock(&srv->sessions_lock);
    json_decref(msg);
}

void sbx_mcp_sessions_updated(struct sbx_mcp_server *srv, const char *uri)
{
    broadcast(srv,
              json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
                        "notifications/resources/updated", "params", "uri", uri),
              uri);
}

void sbx_mcp_sessions_list_changed(struct sbx_mcp_server *srv)
{
    broadcast(
        srv,
        json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "notifications/resources/list_changed"),
        NULL);
}
