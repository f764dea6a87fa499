/* mcp_logging.c - MCP server/utilities/logging: logging/setLevel and the
 * notifications/message the server sends about what it does for the
 * assistant (a tool started, finished or failed: info or error; each step
 * of an operation: debug), logger "sandboxctl".
 *
 * A session hears nothing until it sets a level (the specification leaves
 * the default to the server): a client that never asked is not sent
 * messages it may show its user.  Each session keeps its own level.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mcp_internal.h"

/* RFC 5424 section 6.2.1's severities, in enum sbx_mcp_log_level's order. */
static const char *const level_names[] = {"debug", "info",     "notice", "warning",
                                          "error", "critical", "alert",  "emergency"};

#define NLEVELS (sizeof level_names / sizeof level_names[0])

json_t *sbx_mcp_on_set_level(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const json_t *id, const json_t *params)
{
    const char *level = json_string_value(json_object_get(params, "level"));

    for (size_t i = 0; level && i < NLEVELS; i++) {
        if (strcmp(level, level_names[i]) != 0)
            continue;
        pthread_mutex_lock(&srv->sessions_lock);
        sess->log_level = (int)i + 1;
        pthread_mutex_unlock(&srv->sessions_lock);
        return sbx_mcp_rpc_result(id, json_object());
    }
    return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                             "invalid params: \"level\" must be one of debug, info, notice, "
                             "warning, error, critical, alert, emergency");
}

int sbx_mcp_log_wanted(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                       enum sbx_mcp_log_level level)
{
    int set;

    pthread_mutex_lock(&srv->sessions_lock);
    set = sess->log_level;
    pthread_mutex_unlock(&srv->sessions_lock);
    return sess->notify && set > 0 && (int)level + 1 >= set;
}

/* Formats and sends one notifications/message, when sess wants level. */
static void log_send(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                     enum sbx_mcp_log_level level, const char *logger, const char *fmt, va_list ap)
{
    char msg[1200];

    if (!sbx_mcp_log_wanted(srv, sess, level))
        return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    sbx_printable(msg);
    sess->notify(sess->notify_arg, json_pack("{s:s, s:s, s:{s:s, s:s, s:s}}", "jsonrpc", "2.0",
                                             "method", "notifications/message", "params", "level",
                                             level_names[level], "logger", logger, "data", msg));
}

void sbx_mcp_log(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                 enum sbx_mcp_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_send(srv, sess, level, "sandboxctl", fmt, ap);
    va_end(ap);
}

/* Contract in mcp_server.h: the same, for a tool's function, which knows
 * its session (sbx_mcp_current_session) but not the server. */
void sbx_mcp_session_log(struct sbx_mcp_session *sess, enum sbx_mcp_log_level level,
                         const char *logger, const char *fmt, ...)
{
    va_list ap;

    if (!sess || !sess->srv || (unsigned)level >= NLEVELS)
        return;
    va_start(ap, fmt);
    log_send(sess->srv, sess, level, logger ? logger : "sandboxctl", fmt, ap);
    va_end(ap);
}
