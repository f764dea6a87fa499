/* mcp_progress.c - a running operation's steps as MCP notifications/progress.
 *
 * A request that carries params._meta.progressToken asks for them (MCP
 * 2025-11-25, basic/utilities/progress): each event of the operation's
 * struct sbx_progress becomes one notification with that token, a
 * progress value that grows with every notification, the total when the
 * operation knows its number of steps (a start and an end per step), and
 * a message naming the step and the seconds so far.  All are sent before
 * the request's answer, from the thread that runs the operation.  The same
 * text goes out as a debug notifications/message when the session's log
 * level lets it through (mcp_logging.c), token or not.
 *
 * A tool's function may also send its own (sbx_mcp_session_progress),
 * with values it chooses, under the token of the call it runs, which
 * tools/call keeps per thread for it.
 */
#include <stdio.h>

#include "mcp_internal.h"

/* The message of ev: "clone: done in 3.2 s (5.1 s so far)". */
static void describe(const struct sbx_progress_event *ev, char *buf, size_t len)
{
    switch (ev->phase) {
    case SBX_PROGRESS_START:
        snprintf(buf, len, "%s: started (%.1f s so far)", ev->step, ev->total_seconds);
        break;
    case SBX_PROGRESS_BYTES:
        snprintf(buf, len, "%s: %lld of %lld bytes (%.1f s so far)", ev->step, ev->done, ev->total,
                 ev->total_seconds);
        break;
    case SBX_PROGRESS_END:
        snprintf(buf, len, "%s: done in %.1f s (%.1f s so far)", ev->step, ev->seconds,
                 ev->total_seconds);
        break;
    case SBX_PROGRESS_FAIL:
        snprintf(buf, len, "%s: failed after %.1f s (%.1f s so far)", ev->step, ev->seconds,
                 ev->total_seconds);
        break;
    case SBX_PROGRESS_TICK:
        snprintf(buf, len, "%s: running for %.1f s (%.1f s so far)", ev->step, ev->seconds,
                 ev->total_seconds);
        break;
    }
}

/* The progress value of ev: 2i+1 at the start of step i and 2i+2 at its
 * end when the steps are counted, else one more than the last. */
static double value(const struct sbx_mcp_progress *p, const struct sbx_progress_event *ev)
{
    double v = p->last + 1;

    if (ev->steps > 0 && ev->phase != SBX_PROGRESS_BYTES && ev->phase != SBX_PROGRESS_TICK)
        v = 2.0 * ev->index + (ev->phase == SBX_PROGRESS_START ? 1 : 2);
    return v > p->last ? v : p->last + 1;
}

void sbx_mcp_progress_event(void *arg, const struct sbx_progress_event *ev)
{
    struct sbx_mcp_progress *p = arg;
    char msg[256];
    json_t *params;

    describe(ev, msg, sizeof msg);
    sbx_mcp_log(p->srv, p->sess, SBX_MCP_LOG_DEBUG, "%s: %s", p->tool ? p->tool : "operation", msg);
    if (!p->token)
        return;
    p->last = value(p, ev);
    params = json_pack("{s:O, s:f, s:s}", "progressToken", (json_t *)p->token, "progress", p->last,
                       "message", msg);
    if (ev->steps > 0 && p->last <= 2.0 * ev->steps)
        json_object_set_new(params, "total", json_real(2.0 * ev->steps));
    p->sess->notify(p->sess->notify_arg, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
                                                   "notifications/progress", "params", params));
}

static __thread const json_t *current_token;

void sbx_mcp_progress_token_set(const json_t *token)
{
    current_token = token;
}

const json_t *sbx_mcp_current_progress_token(void)
{
    return current_token;
}

int sbx_mcp_session_progress(struct sbx_mcp_session *sess, double progress, double total,
                             const char *message)
{
    json_t *params;

    if (!current_token || !sess || !sess->notify)
        return -1;
    params =
        json_pack("{s:O, s:f}", "progressToken", (json_t *)current_token, "progress", progress);
    if (total >= 0)
        json_object_set_new(params, "total", json_real(total));
    if (message)
        json_object_set_new(params, "message", json_string(message));
    sess->notify(sess->notify_arg, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
                                             "notifications/progress", "params", params));
    return 0;
}
