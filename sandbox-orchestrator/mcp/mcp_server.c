/* mcp_server.c - JSON-RPC 2.0 framing and the MCP methods over a tool table.
 *
 * Implements lifecycle (initialize, notifications/initialized, version
 * negotiation), ping, tools/list and tools/call (with notifications/progress
 * when the call carries a progressToken: mcp_progress.c; log messages:
 * mcp_logging.c; resource updates after a change: mcp_resources.c), and
 * hands the other methods to their files (mcp_internal.h).  Errors follow JSON-RPC 2.0 section 5.1;
 * a failing operation or arguments that do not fit the tool's inputSchema are
 * a tool result with isError (MCP "tool execution errors", SEP-1303), so the
 * assistant reads the reason and can correct itself.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp_internal.h"

/* Newest first; initialize answers the first when the client's is unknown. */
static const char *const versions[] = {SBX_MCP_PROTOCOL_LATEST, "2025-06-18", "2025-03-26",
                                       "2024-11-05"};

static const char server_instructions[] =
    "Sandboxes are disposable Proxmox VMs whose only way out is an egress allow-list proxy. "
    "Create one with create_server (choose a policy preset from its enum), run commands with "
    "run_command, move files with read_file and write_file, and call destroy_server when you "
    "are done. Every sandbox is destroyed by itself when its lifetime ends; extend_server "
    "pushes that back. A connection refused with 403 and an X-Egress-Deny header inside a "
    "sandbox is the policy at work, not a network fault: do not retry it and do not work "
    "around it; sandbox://NAME/denials says what was refused, and request_access asks for a "
    "host the task needs (where that tool is offered).";

int sbx_mcp_version_supported(const char *v)
{
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (strcmp(v, versions[i]) == 0)
            return 1;
    return 0;
}

const char *sbx_mcp_version_negotiate(const char *asked)
{
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (asked && strcmp(asked, versions[i]) == 0)
            return versions[i];
    return versions[0];
}

/* Contract in mcp_internal.h; id NULL: the request's id could not be read. */
json_t *sbx_mcp_rpc_error(const json_t *id, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sbx_printable(msg);
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", msg);
}

json_t *sbx_mcp_rpc_result(const json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

/* JSON-RPC 2.0 section 4: an id is a string or a number; MCP forbids null, and
 * we take only integers among numbers. */
static int id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

int sbx_mcp_parse(const char *buf, size_t len, json_t **msg, json_t **reply)
{
    json_error_t e;
    json_t *j, *id, *method;

    *msg = NULL;
    *reply = NULL;
    j = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!j) {
        *reply = sbx_mcp_rpc_error(NULL, RPC_PARSE_ERROR, "parse error at line %d column %d: %s",
                                   e.line, e.column, e.text);
        return -1;
    }
    if (json_is_array(j)) {
        *reply =
            sbx_mcp_rpc_error(NULL, RPC_INVALID_REQUEST,
                              "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 "
                              "removed them); send one message at a time");
        json_decref(j);
        return -1;
    }
    if (!json_is_object(j)) {
        *reply = sbx_mcp_rpc_error(NULL, RPC_INVALID_REQUEST,
                                   "invalid request: a JSON-RPC message is a JSON object");
        json_decref(j);
        return -1;
    }
    id = json_object_get(j, "id");
    method = json_object_get(j, "method");
    if (id && !id_valid(id)) {
        *reply = sbx_mcp_rpc_error(NULL, RPC_INVALID_REQUEST,
                                   "invalid request: \"id\" must be a string or an integer");
    } else if (!json_is_string(json_object_get(j, "jsonrpc")) ||
               strcmp(json_string_value(json_object_get(j, "jsonrpc")), "2.0") != 0) {
        *reply = sbx_mcp_rpc_error(id, RPC_INVALID_REQUEST,
                                   "invalid request: \"jsonrpc\" must be \"2.0\"");
    } else if (method && !json_is_string(method)) {
        *reply = sbx_mcp_rpc_error(id, RPC_INVALID_REQUEST,
                                   "invalid request: \"method\" must be a string");
    } else if (!method && !(id && (json_object_get(j, "result") || json_object_get(j, "error")))) {
        *reply =
            sbx_mcp_rpc_error(id, RPC_INVALID_REQUEST,
                              "invalid request: neither a request (\"method\") nor a response");
    }
    if (*reply) {
        json_decref(j);
        return -1;
    }
    *msg = j;
    return 0;
}

/* The capabilities initialize declares: tools, logging, prompts and
 * completions always; resources when there are operations to read or a
 * provider declares resources. */
static json_t *server_capabilities(const struct sbx_mcp_server *srv)
{
    json_t *caps = json_pack("{s:{s:b}, s:{}, s:{s:b}, s:{}}", "tools", "listChanged", 0, "logging",
                             "prompts", "listChanged", 0, "completions");

    if (sbx_mcp_resources_offered(srv))
        json_object_set_new(caps, "resources",
                            json_pack("{s:b, s:b}", "subscribe", 1, "listChanged", 1));
    return caps;
}

/* initialize (lifecycle): negotiate the version, declare the capabilities,
 * keep the client's, and put the session in the registry. */
static json_t *on_initialize(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const json_t *id, const json_t *params)
{
    const json_t *asked = json_object_get(params, "protocolVersion");
    const json_t *caps = json_object_get(params, "capabilities");
    const json_t *info = json_object_get(params, "clientInfo");
    const char *v;

    if (!json_is_string(asked))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: initialize needs \"protocolVersion\" (a string)");
    if ((caps && !json_is_object(caps)) || (info && !json_is_object(info)))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: \"capabilities\" and \"clientInfo\" are objects");
    if (sess->initialize_seen)
        return sbx_mcp_rpc_error(id, RPC_INVALID_REQUEST,
                                 "invalid request: this session is already initialized");
    v = sbx_mcp_version_negotiate(json_string_value(asked));
    snprintf(sess->version, sizeof sess->version, "%s", v);
    sess->initialize_seen = 1;
    sess->srv = srv;
    pthread_mutex_lock(&srv->sessions_lock);
    json_decref(sess->client_caps);
    sess->client_caps = caps ? json_deep_copy(caps) : json_object();
    pthread_mutex_unlock(&srv->sessions_lock);
    sbx_mcp_session_attach(srv, sess);
    return sbx_mcp_rpc_result(id, json_pack("{s:s, s:o, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
                                            v, "capabilities", server_capabilities(srv),
                                            "serverInfo", "name", "sandboxctl", "title",
                                            "sandboxctl: disposable Proxmox sandboxes", "version",
                                            srv->cfg.version ? srv->cfg.version : "0",
                                            "instructions", server_instructions));
}

static json_t *on_tools_list(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    if (json_object_get(params, "cursor"))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: unknown cursor (tools/list has a single page)");
    return sbx_mcp_rpc_result(id, json_deep_copy(srv->tools_list));
}

/* A tools/call result; steals structured (NULL on error). */
static json_t *tool_result(const char *text, json_t *structured, int is_error)
{
    json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text,
                          "isError", is_error);

    if (structured)
        json_object_set_new(r, "structuredContent", structured);
    return r;
}

int sbx_mcp_listed(const char *const *list, const char *name)
{
    for (const char *const *p = list; name && p && *p; p++)
        if (strcmp(*p, name) == 0)
            return 1;
    return 0;
}

static int preset_permitted(const struct sbx_mcp_server *srv, const char *policy)
{
    return sbx_mcp_listed(srv->cfg.presets, policy);
}

/* The names of list as "a, b, c", or none when it is empty. */
static void list_text(const char *const *list, const char *none, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (const char *const *p = list; p && *p && off < len; p++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", *p);
    if (!buf[0])
        snprintf(buf, len, "%s", none);
}

/* The permitted presets as "a, b, c" (or "none"). */
static void presets_text(const struct sbx_mcp_server *srv, char *buf, size_t len)
{
    list_text(srv->cfg.presets, "none (mcp-presets is empty)", buf, len);
}

/* "secrets" of a SBX_MCP_TOOL_MCP_SECRETS tool: only names the
 * administrator permits over MCP (mcp-secrets), and none when none are.
 * Checked before the schema, so that the refusal names the permitted ones
 * (a schema without the property would only call it unknown).  0, or -1
 * with err. */
static int secrets_permitted(const struct sbx_mcp_server *srv, const json_t *given, char *err,
                             size_t errlen)
{
    const json_t *secrets = json_object_get(given, "secrets"), *v;
    char allowed[512];
    size_t i;

    if (!secrets)
        return 0;
    if (!srv->cfg.secrets || !srv->cfg.secrets[0]) {
        snprintf(err, errlen,
                 "arguments.secrets: no secret is permitted over MCP (the administrator lists "
                 "none in mcp-secrets)");
        return -1;
    }
    json_array_foreach(secrets, i, v)
    {
        if (json_is_string(v) && !sbx_mcp_listed(srv->cfg.secrets, json_string_value(v))) {
            list_text(srv->cfg.secrets, "none", allowed, sizeof allowed);
            snprintf(err, errlen,
                     "arguments.secrets[%zu]: \"%.64s\" is not a secret permitted over MCP; the "
                     "administrator permits: %s",
                     i, json_string_value(v), allowed);
            return -1;
        }
    }
    return 0;
}

/* The checks and rewrites before a tool's operation runs: schema, presets,
 * owner, the tool's own prepare.  Returns the operation's arguments (new), or
 * NULL with err filled. */
static json_t *tool_args(struct sbx_mcp_server *srv, size_t t, const json_t *given, char *err,
                         size_t errlen)
{
    const struct sbx_mcp_tool *tool = &srv->cfg.tools[t];
    json_t *args;
    char allowed[512];

    /* The preset first: its refusal says which presets are permitted. */
    if (tool->flags & SBX_MCP_TOOL_PRESET_POLICY) {
        const char *policy = json_string_value(json_object_get(given, "policy"));

        if (policy && !preset_permitted(srv, policy)) {
            presets_text(srv, allowed, sizeof allowed);
            snprintf(err, errlen,
                     "arguments.policy: \"%s\" is not a preset permitted over MCP; the "
                     "administrator permits: %s",
                     policy, allowed);
            return NULL;
        }
    }
    if ((tool->flags & SBX_MCP_TOOL_MCP_SECRETS) && secrets_permitted(srv, given, err, errlen))
        return NULL;
    if (sbx_mcp_args_check(srv->schemas[t], given, err, errlen) == -1)
        return NULL;
    if ((tool->flags & SBX_MCP_TOOL_PRESET_POLICY) &&
        !preset_permitted(srv, json_string_value(json_object_get(given, "policy")))) {
        snprintf(err, errlen, "arguments.policy: no preset is permitted over MCP");
        return NULL; /* only when the schema lacks the required policy */
    }
    args = json_deep_copy(given);
    if ((tool->flags & SBX_MCP_TOOL_SETS_OWNER) && srv->cfg.owner)
        json_object_set_new(args, "owner", json_string(srv->cfg.owner));
    if (tool->prepare && tool->prepare(args, err, errlen) == -1) {
        json_decref(args);
        return NULL;
    }
    return args;
}

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int sbx_mcp_op_call(struct sbx_mcp_server *srv, sbx_op_fn op, json_t *args, json_t **out, char *err,
                    size_t errlen)
{
    int rc;

    pthread_mutex_lock(&srv->op_lock);
    rc = op(srv->cfg.sbx, args, out, err, errlen);
    pthread_mutex_unlock(&srv->op_lock);
    return rc;
}

/* Runs tool t on a struct sbx of its own, without the operation lock
 * (SBX_MCP_TOOL_OWN_SBX); progress, when not NULL, hears its steps. */
static int op_run_own(struct sbx_mcp_server *srv, size_t t, struct sbx_mcp_progress *progress,
                      json_t *args, json_t **out, char *err, size_t errlen)
{
    struct sbx *own = srv->cfg.sbx_sibling(srv->cfg.sbx, err, errlen);
    int rc;

    if (!own)
        return -1;
    if (progress)
        srv->cfg.progress_set(own, sbx_mcp_progress_event, progress);
    rc = srv->cfg.tools[t].fn(own, args, out, err, errlen);
    srv->cfg.sbx_sibling_free(own);
    return rc;
}

/* Runs the operation of tool t under the operation lock; with a progress
 * token, or a session that wants debug log messages (and a transport and
 * an sbx that can tell), its steps go to the client while it runs. */
static int op_run(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, size_t t,
                  const json_t *token, json_t *args, json_t **out, char *err, size_t errlen)
{
    struct sbx_mcp_progress progress = {sess, token, 0, srv->cfg.tools[t].name, srv};
    int wants = (token || sbx_mcp_log_wanted(srv, sess, SBX_MCP_LOG_DEBUG)) && sess->notify &&
                srv->cfg.progress_set;
    int rc;

    if (srv->cfg.tools[t].flags & SBX_MCP_TOOL_UNLOCKED)
        return srv->cfg.tools[t].fn(srv->cfg.sbx, args, out, err, errlen);
    if ((srv->cfg.tools[t].flags & SBX_MCP_TOOL_OWN_SBX) && srv->cfg.sbx_sibling)
        return op_run_own(srv, t, wants ? &progress : NULL, args, out, err, errlen);
    pthread_mutex_lock(&srv->op_lock);
    if (wants)
        srv->cfg.progress_set(srv->cfg.sbx, sbx_mcp_progress_event, &progress);
    rc = srv->cfg.tools[t].fn(srv->cfg.sbx, args, out, err, errlen);
    if (wants)
        srv->cfg.progress_set(srv->cfg.sbx, NULL, NULL);
    pthread_mutex_unlock(&srv->op_lock);
    return rc;
}

/* Runs tool t; every failure is a tool result with isError.  The session
 * hears of its start and its end as info log messages (a failure: error). */
static json_t *tool_run(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, size_t t,
                        const json_t *given, const json_t *token)
{
    const struct sbx_mcp_tool *tool = &srv->cfg.tools[t];
    char err[1024] = "";
    json_t *args, *out = NULL;
    char *text;
    double start;
    int rc;

    args = tool_args(srv, t, given, err, sizeof err);
    if (!args) {
        sbx_printable(err);
        fprintf(srv->log, "sandboxctl mcp: %s refused: %s\n", tool->name, err);
        sbx_mcp_log(srv, sess, SBX_MCP_LOG_ERROR, "%s refused: %s", tool->name, err);
        return tool_result(err, NULL, 1);
    }
    sbx_mcp_log(srv, sess, SBX_MCP_LOG_INFO, "%s started", tool->name);
    start = now_seconds();
    sbx_mcp_current_set(sess);
    sbx_mcp_progress_token_set(token);
    rc = op_run(srv, sess, t, token, args, &out, err, sizeof err);
    sbx_mcp_progress_token_set(NULL);
    sbx_mcp_current_set(NULL);
    if (rc == 0 && (!json_is_object(out) || ((tool->flags & SBX_MCP_TOOL_CONTENT) &&
                                             !json_is_array(json_object_get(out, "content"))))) {
        json_decref(out);
        snprintf(err, sizeof err, "%s: the operation returned no result %s", tool->name,
                 tool->flags & SBX_MCP_TOOL_CONTENT ? "with a content array" : "object");
        rc = -1;
    }
    sbx_printable(err); /* it may quote a sandbox, its guest agent or egressd */
    fprintf(srv->log, "sandboxctl mcp: %s %s after %.1fs%s%s\n", tool->name,
            rc == 0 ? "done" : "failed", now_seconds() - start, rc == 0 ? "" : ": ",
            rc == 0 ? "" : err);
    sbx_mcp_log(srv, sess, rc == 0 ? SBX_MCP_LOG_INFO : SBX_MCP_LOG_ERROR, "%s %s after %.1f s%s%s",
                tool->name, rc == 0 ? "done" : "failed", now_seconds() - start, rc == 0 ? "" : ": ",
                rc == 0 ? "" : err);
    if (rc == 0)
        sbx_mcp_resources_changed(srv, tool, args);
    json_decref(args);
    if (rc != 0)
        return tool_result(err[0] ? err : "the operation failed and gave no reason", NULL, 1);
    if (tool->finish)
        tool->finish(out);
    if (tool->flags & SBX_MCP_TOOL_CONTENT)
        return out; /* a whole CallToolResult already */
    text = json_dumps(out, JSON_COMPACT);
    if (!text) {
        json_decref(out);
        return tool_result("the operation's result could not be serialized", NULL, 1);
    }
    json_t *r = tool_result(text, out, 0);
    free(text);
    return r;
}

/* tools/call; params._meta.progressToken (a string or an integer) asks
 * for notifications/progress while the tool runs. */
static json_t *on_tools_call(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const json_t *id, const json_t *params)
{
    const json_t *token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    const json_t *name = json_object_get(params, "name");
    const json_t *args = json_object_get(params, "arguments");
    json_t *empty = NULL, *r;

    if (!json_is_string(name))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: tools/call needs \"name\" (a string)");
    if (args && !json_is_object(args))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: \"arguments\" must be an object");
    for (size_t t = 0; t < srv->cfg.ntools; t++) {
        if (strcmp(srv->cfg.tools[t].name, json_string_value(name)) != 0)
            continue;
        if (!args)
            args = empty = json_object();
        r = tool_run(srv, sess, t, args, id_valid(token) ? token : NULL);
        json_decref(empty);
        return sbx_mcp_rpc_result(id, r);
    }
    return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS, "invalid params: unknown tool \"%s\"",
                             json_string_value(name));
}

/* Notifications get no answer, whatever they are (JSON-RPC 2.0 section 4.1). */
static void on_notification(struct sbx_mcp_session *sess, const char *method)
{
    if (strcmp(method, "notifications/initialized") == 0)
        sess->initialized = 1;
}

json_t *sbx_mcp_handle(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, json_t *msg)
{
    const json_t *id = json_object_get(msg, "id");
    const json_t *params = json_object_get(msg, "params");
    const char *method = json_string_value(json_object_get(msg, "method"));
    json_t *empty = NULL, *r;

    if (!method) { /* a response: to a request of ours (an elicitation) */
        sbx_mcp_pending_answer(srv, sess, msg);
        return NULL;
    }
    if (!id) {
        on_notification(sess, method);
        return NULL;
    }
    if (params && !json_is_object(params))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: \"params\" must be an object");
    if (!params)
        params = empty = json_object();
    if (strcmp(method, "initialize") == 0)
        r = on_initialize(srv, sess, id, params);
    else if (strcmp(method, "ping") == 0)
        r = sbx_mcp_rpc_result(id, json_object());
    else if (!sess->initialize_seen)
        r = sbx_mcp_rpc_error(
            id, RPC_INVALID_REQUEST,
            "invalid request: not initialized (the first request must be initialize)");
    else if (strcmp(method, "tools/list") == 0)
        r = on_tools_list(srv, id, params);
    else if (strcmp(method, "tools/call") == 0)
        r = on_tools_call(srv, sess, id, params);
    else if (strcmp(method, "logging/setLevel") == 0)
        r = sbx_mcp_on_set_level(srv, sess, id, params);
    else if (strncmp(method, "resources/", 10) == 0 && sbx_mcp_resources_offered(srv))
        r = sbx_mcp_on_resources(srv, sess, method, id, params);
    else if (strncmp(method, "prompts/", 8) == 0)
        r = sbx_mcp_on_prompts(srv, method, id, params);
    else if (strcmp(method, "completion/complete") == 0)
        r = sbx_mcp_on_complete(srv, id, params);
    else
        r = sbx_mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "method not found: %s", method);
    json_decref(empty);
    /* Every request is answered, even when an answer could not be built. */
    return r ? r
             : json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
                         RPC_INTERNAL_ERROR, "message", "internal error: no answer could be built");
}

/* Parses one of a tool's JSON texts; an object schema when schema is set. */
static json_t *tool_json(const struct sbx_mcp_tool *tool, const char *what, const char *text,
                         int schema, char *err, size_t errlen)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &e);

    if (!j) {
        snprintf(err, errlen, "tool %s: %s: line %d column %d: %s", tool->name, what, e.line,
                 e.column, e.text);
        return NULL;
    }
    if (!json_is_object(j) ||
        (schema && (!json_is_string(json_object_get(j, "type")) ||
                    strcmp(json_string_value(json_object_get(j, "type")), "object") != 0))) {
        snprintf(err, errlen, "tool %s: %s: expected a JSON object%s", tool->name, what,
                 schema ? " schema with \"type\": \"object\"" : "");
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The permitted presets become the enum of inputSchema.properties.policy. */
static int schema_add_presets(const struct sbx_mcp_server *srv, const struct sbx_mcp_tool *tool,
                              json_t *schema, char *err, size_t errlen)
{
    json_t *policy = json_object_get(json_object_get(schema, "properties"), "policy");
    json_t *list;

    if (!json_is_object(policy)) {
        snprintf(err, errlen, "tool %s: a preset tool needs properties.policy", tool->name);
        return -1;
    }
    if (!srv->cfg.presets || !srv->cfg.presets[0])
        return 0; /* no enum can be empty: the call is refused by tool_args() */
    list = json_array();
    for (const char *const *p = srv->cfg.presets; *p; p++)
        json_array_append_new(list, json_string(*p));
    json_object_set_new(policy, "enum", list);
    return 0;
}

/* The permitted secrets become the enum of properties.secrets.items; with
 * none the property goes (an assistant is not offered what it may not
 * use, and tool_args() refuses it). */
static int schema_add_secrets(const struct sbx_mcp_server *srv, const struct sbx_mcp_tool *tool,
                              json_t *schema, char *err, size_t errlen)
{
    json_t *props = json_object_get(schema, "properties");
    json_t *items = json_object_get(json_object_get(props, "secrets"), "items");
    json_t *list;

    if (!json_is_object(items)) {
        snprintf(err, errlen, "tool %s: a secrets tool needs properties.secrets.items", tool->name);
        return -1;
    }
    if (!srv->cfg.secrets || !srv->cfg.secrets[0]) {
        json_object_del(props, "secrets");
        return 0;
    }
    list = json_array();
    for (const char *const *p = srv->cfg.secrets; *p; p++)
        json_array_append_new(list, json_string(*p));
    json_object_set_new(items, "enum", list);
    return 0;
}

/* One entry of the tools/list result. */
static json_t *tool_entry(struct sbx_mcp_server *srv, size_t t, char *err, size_t errlen)
{
    const struct sbx_mcp_tool *tool = &srv->cfg.tools[t];
    json_t *in, *out = NULL, *ann, *entry;

    in = tool_json(tool, "inputSchema", tool->input_schema, 1, err, errlen);
    if (!in)
        return NULL;
    if (((tool->flags & SBX_MCP_TOOL_PRESET_POLICY) &&
         schema_add_presets(srv, tool, in, err, errlen) == -1) ||
        ((tool->flags & SBX_MCP_TOOL_MCP_SECRETS) &&
         schema_add_secrets(srv, tool, in, err, errlen) == -1)) {
        json_decref(in);
        return NULL;
    }
    ann = tool_json(tool, "annotations", tool->annotations ? tool->annotations : "{}", 0, err,
                    errlen);
    if (ann && tool->output_schema)
        out = tool_json(tool, "outputSchema", tool->output_schema, 1, err, errlen);
    if (!ann || (tool->output_schema && !out)) {
        json_decref(in);
        json_decref(ann);
        return NULL;
    }
    if ((tool->flags & SBX_MCP_TOOL_CONTENT) && out) {
        snprintf(err, errlen, "tool %s: a content tool has no outputSchema", tool->name);
        json_decref(in);
        json_decref(ann);
        json_decref(out);
        return NULL;
    }
    srv->schemas[t] = in;
    entry = json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", tool->name, "title", tool->title,
                      "description", tool->description, "inputSchema", in, "annotations", ann);
    if (out)
        json_object_set_new(entry, "outputSchema", out);
    return entry;
}

struct sbx_mcp_server *sbx_mcp_server_new(const struct sbx_mcp_config *cfg, char *err,
                                          size_t errlen)
{
    struct sbx_mcp_server *srv = calloc(1, sizeof *srv);
    json_t *list, *entry;

    if (!srv || !(srv->schemas = calloc(cfg->ntools ? cfg->ntools : 1, sizeof *srv->schemas)))
        abort();
    srv->cfg = *cfg;
    srv->log = cfg->log ? cfg->log : stderr;
    pthread_mutex_init(&srv->op_lock, NULL);
    pthread_mutex_init(&srv->sessions_lock, NULL);
    pthread_mutex_init(&srv->pending_lock, NULL);
    pthread_cond_init(&srv->pending_cond, NULL);
    list = json_array();
    srv->tools_list = json_pack("{s:o}", "tools", list);
    if (sbx_mcp_providers_load(srv, err, errlen) == -1) {
        sbx_mcp_server_free(srv);
        return NULL;
    }
    for (size_t t = 0; t < cfg->ntools; t++) {
        if (!cfg->tools[t].fn || !cfg->tools[t].name || !cfg->tools[t].title ||
            !cfg->tools[t].description) {
            snprintf(err, errlen, "tool %zu: name, title, description and fn are required", t);
            sbx_mcp_server_free(srv);
            return NULL;
        }
        entry = tool_entry(srv, t, err, errlen);
        if (!entry) {
            sbx_mcp_server_free(srv);
            return NULL;
        }
        json_array_append_new(list, entry);
    }
    return srv;
}

void sbx_mcp_server_free(struct sbx_mcp_server *srv)
{
    if (!srv)
        return;
    json_decref(srv->tools_list);
    sbx_mcp_providers_free(srv);
    free(srv->schemas);
    pthread_mutex_destroy(&srv->op_lock);
    pthread_mutex_destroy(&srv->sessions_lock);
    pthread_mutex_destroy(&srv->pending_lock);
    pthread_cond_destroy(&srv->pending_cond);
    free(srv);
}
