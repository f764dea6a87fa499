/* mcp_access.c - the request_access tool: an assistant whose agent was
 * denied a host asks for it instead of working around the wall.
 *
 * The request goes to the access_request operation (../ops_access.c):
 * a host of access-auto is granted at once; any other waits for an
 * administrator.  A host of access-owner-approves may be approved by the
 * sandbox's owner, the human behind this MCP client: when the client
 * supports elicitation, the server asks them (elicitation/create) and
 * applies the answer - approve, or deny - with as_owner set, so that
 * the operation itself checks the host against access-owner-approves.
 * The assistant cannot approve anything: there is no approve tool, and
 * the answer comes from the client's user, not from the model.
 *
 * The tool runs without the operation lock (SBX_MCP_TOOL_UNLOCKED) and
 * takes it for each operation: other tool calls go on while a human
 * thinks.
 */
#include <stdio.h>
#include <string.h>

#include "mcp_internal.h"

/* The most denials the owner's question lists. */
#define QUESTION_DENIALS 5
/* How long the owner has to answer before the request stays pending. */
#define OWNER_ANSWER_MS (5 * 60 * 1000)

/* What the owner is asked: approve or not. */
static const char owner_schema[] =
    "{\"type\": \"object\", \"properties\": {\"approve\": {\"type\": \"boolean\", \"title\": "
    "\"Allow this host\", \"description\": \"Let the sandbox reach the host for the time "
    "asked; it lapses by itself.\", \"default\": false}}, \"required\": [\"approve\"]}";

/* seconds as "2h", "90m" or "45s". */
static void duration_text(long long seconds, char *buf, size_t len)
{
    if (seconds % 3600 == 0)
        snprintf(buf, len, "%lldh", seconds / 3600);
    else if (seconds % 60 == 0)
        snprintf(buf, len, "%lldm", seconds / 60);
    else
        snprintf(buf, len, "%llds", seconds);
}

/* The question for the owner, from the request r: what it asks, and
 * what granting it changes, computed (ops_access.c): the rule it adds and
 * the sandbox's recent denials it would let pass (the first few). */
static void question(const json_t *r, char *buf, size_t len)
{
    json_t *pass = json_object_get(r, "would_pass"), *d;
    char dur[32];
    size_t used, i;

    duration_text((long long)json_integer_value(json_object_get(r, "seconds")), dur, sizeof dur);
    used = (size_t)snprintf(
        buf, len,
        "The sandbox %s asks to reach %s%s%s%s%s for %s. The reason its assistant gave: \"%s\". "
        "It adds the rule \"%s\".",
        json_string_value(json_object_get(r, "name")),
        json_string_value(json_object_get(r, "host")),
        json_object_get(r, "methods") ? " with methods " : "",
        json_object_get(r, "methods") ? json_string_value(json_object_get(r, "methods")) : "",
        json_object_get(r, "paths") ? " on paths " : "",
        json_object_get(r, "paths") ? json_string_value(json_object_get(r, "paths")) : "", dur,
        json_string_value(json_object_get(r, "why")),
        json_object_get(r, "rule") ? json_string_value(json_object_get(r, "rule")) : "?");
    if (json_is_array(pass) && used < len)
        used += (size_t)snprintf(buf + used, len - used,
                                 " Of its %d recent denials, it would let %zu pass%s",
                                 (int)json_integer_value(json_object_get(r, "recent")),
                                 json_array_size(pass), json_array_size(pass) ? ":" : ".");
    json_array_foreach(pass, i, d)
    {
        if (used >= len || i == QUESTION_DENIALS)
            break;
        const char *path = json_string_value(json_object_get(d, "path"));
        used +=
            (size_t)snprintf(buf + used, len - used, "%s %s %s:%d%s", i ? ";" : "",
                             json_is_string(json_object_get(d, "method"))
                                 ? json_string_value(json_object_get(d, "method"))
                                 : "-",
                             json_string_value(json_object_get(d, "host")),
                             (int)json_integer_value(json_object_get(d, "port")), path ? path : "");
    }
    if (json_array_size(pass) > QUESTION_DENIALS && used < len)
        used += (size_t)snprintf(buf + used, len - used, "; and %zu more",
                                 json_array_size(pass) - QUESTION_DENIALS);
    if (used < len)
        snprintf(buf + used, len - used, "%s Allow it?", json_array_size(pass) ? "." : "");
}

/* Asks the owner about the pending request *r and applies the answer: on
 * approve or deny *r is replaced by the decided request.  Leaves it
 * pending (and says why in *note) when there is no answer. */
static void ask_owner(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, json_t **r,
                      const char **note)
{
    const struct sbx_mcp_ops *ops = srv->cfg.ops;
    char msg[2048], err[1024];
    json_t *schema = json_loads(owner_schema, 0, NULL), *content = NULL, *args, *out = NULL;
    int action, approve;

    question(*r, msg, sizeof msg);
    action = sbx_mcp_elicit(sess, msg, schema, OWNER_ANSWER_MS, &content, err, sizeof err);
    json_decref(schema);
    if (action == SBX_MCP_ELICIT_ERROR || action == SBX_MCP_ELICIT_CANCEL) {
        *note = action == SBX_MCP_ELICIT_CANCEL ? "the owner did not decide; it waits"
                                                : "the owner could not be asked; it waits";
        json_decref(content);
        return;
    }
    approve = action == SBX_MCP_ELICIT_ACCEPT && json_is_true(json_object_get(content, "approve"));
    json_decref(content);
    args = json_pack("{s:O, s:b}", "id", json_object_get(*r, "id"), "as_owner", 1);
    if (sbx_mcp_op_call(srv, approve ? ops->access_approve : ops->access_deny, args, &out, err,
                        sizeof err) == 0) {
        json_decref(*r);
        *r = out;
        *note = approve ? "approved by the owner" : "denied by the owner";
    } else {
        *note = "the owner's answer could not be applied; it waits";
        fprintf(srv->log, "sandboxctl mcp: request_access: %s\n", err);
    }
    json_decref(args);
}

/* What the assistant should do next, for the request r. */
static const char *next_step(const json_t *r)
{
    const char *status = json_string_value(json_object_get(r, "status"));

    if (status && strcmp(status, "approved") == 0)
        return "the host is allowed now, until the time in \"until\"; retry what was denied";
    if (status && strcmp(status, "denied") == 0)
        return "the request was denied: do not work around it; find another way or stop";
    return "an administrator decides it (sandboxctl access approve ID): tell the user, and do "
           "not retry the host until then";
}

int sbx_mcp_request_access(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    struct sbx_mcp_session *sess = sbx_mcp_current_session();
    struct sbx_mcp_server *srv = sess ? sess->srv : NULL;
    const char *note = NULL, *status;
    json_t *r = NULL;

    (void)s; /* the operations get it from srv, under its lock */
    *out = NULL;
    if (!srv || !srv->cfg.ops || !srv->cfg.ops->access_request) {
        snprintf(err, errlen, "request_access: access requests are not offered here");
        return -1;
    }
    if (sbx_mcp_op_call(srv, srv->cfg.ops->access_request, args, &r, err, errlen))
        return -1;
    status = json_string_value(json_object_get(r, "status"));
    if (status && strcmp(status, "pending") == 0 &&
        json_is_true(json_object_get(r, "owner_may_approve")) && srv->cfg.ops->access_approve &&
        srv->cfg.ops->access_deny)
        ask_owner(srv, sess, &r, &note);
    if (note)
        json_object_set_new(r, "note", json_string(note));
    json_object_set_new(r, "next", json_string(next_step(r)));
    *out = r;
    return 0;
}
