/* mcp_resources.c - MCP server/resources over the owner's sandboxes:
 *   sandbox://NAME/info     the sandbox's list_servers entry (JSON)
 *   sandbox://NAME/denials  egressd's recent denials of it (JSON), when
 *                           the server has a denials operation
 * resources/list gives each sandbox's info; resources/templates/list both
 * templates; resources/read reads one; resources/subscribe and
 * unsubscribe keep a session's subscriptions to info URIs, which hear
 * notifications/resources/updated when a tool changes that sandbox.
 *
 * A URI that is well formed but names no sandbox of the owner is error
 * -32002 (resource not found) with the uri in data, as the specification
 * says; one that is not a sandbox:// URI at all is -32602 for subscribe
 * (nothing could ever be sent for it) and -32002 for read.  Subscribing to
 * the info of a sandbox that does not exist yet is allowed: create_server
 * of that name sends the update.
 *
 * The embedding program's providers (mcp_providers.c) add resources and
 * templates after these, and read and subscribe the URIs they serve.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_internal.h"

#define NAME_MAX_LEN 63 /* longer than any sandbox name sandboxctl makes */

enum kind { KIND_NONE, KIND_INFO, KIND_DENIALS };

/* Whether the sandbox resources are offered (there is a list operation). */
static int sandboxes_offered(const struct sbx_mcp_server *srv)
{
    return srv->cfg.ops && srv->cfg.ops->list;
}

int sbx_mcp_resources_offered(const struct sbx_mcp_server *srv)
{
    return sandboxes_offered(srv) || sbx_mcp_providers_have_resources(srv);
}

static int denials_offered(const struct sbx_mcp_server *srv)
{
    return srv->cfg.ops && srv->cfg.ops->denials;
}

/* Parses sandbox://NAME/info or sandbox://NAME/denials into name (at
 * least NAME_MAX_LEN + 1 bytes); NAME is letters, digits, '.', '_', '-'.
 * Returns the kind, or KIND_NONE for any other string. */
static enum kind parse_uri(const char *uri, char *name)
{
    static const char scheme[] = "sandbox://";
    const char *p, *slash;
    size_t n;

    if (!uri || strncmp(uri, scheme, sizeof scheme - 1) != 0)
        return KIND_NONE;
    p = uri + sizeof scheme - 1;
    n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
    slash = p + n;
    if (n == 0 || n > NAME_MAX_LEN || *slash != '/')
        return KIND_NONE;
    memcpy(name, p, n);
    name[n] = '\0';
    if (strcmp(slash, "/info") == 0)
        return KIND_INFO;
    if (strcmp(slash, "/denials") == 0)
        return KIND_DENIALS;
    return KIND_NONE;
}

/* The owner's sandboxes (the list operation's "sandboxes"), a new
 * reference, or NULL with err filled. */
static json_t *sandboxes(struct sbx_mcp_server *srv, char *err, size_t errlen)
{
    json_t *args = json_object(), *out = NULL, *list;
    int rc = sbx_mcp_op_call(srv, srv->cfg.ops->list, args, &out, err, errlen);

    json_decref(args);
    if (rc != 0) {
        json_decref(out);
        return NULL;
    }
    list = json_incref(json_object_get(out, "sandboxes"));
    json_decref(out);
    if (!json_is_array(list)) {
        json_decref(list);
        snprintf(err, errlen, "the list operation gave no \"sandboxes\" array");
        return NULL;
    }
    return list;
}

/* The entry of sandbox name in list (borrowed), or NULL. */
static json_t *entry_of(json_t *list, const char *name)
{
    size_t i;
    json_t *b;

    json_array_foreach(list, i, b)
    {
        const char *n = json_string_value(json_object_get(b, "name"));

        if (n && strcmp(n, name) == 0)
            return b;
    }
    return NULL;
}

json_t *sbx_mcp_sandbox_names(struct sbx_mcp_server *srv, const char *prefix, size_t max)
{
    char err[256];
    json_t *list = sandboxes_offered(srv) ? sandboxes(srv, err, sizeof err) : NULL;
    json_t *names = json_array(), *b;
    size_t i;

    json_array_foreach(list, i, b)
    {
        const char *n = json_string_value(json_object_get(b, "name"));

        if (n && strncmp(n, prefix, strlen(prefix)) == 0 && json_array_size(names) < max)
            json_array_append_new(names, json_string(n));
    }
    json_decref(list);
    return names;
}

static json_t *on_list(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    char err[1024], uri[128];
    json_t *list, *res, *b;
    size_t i;

    if (json_object_get(params, "cursor"))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: unknown cursor (resources/list has one page)");
    list = sandboxes_offered(srv) ? sandboxes(srv, err, sizeof err) : json_array();
    if (!list)
        return sbx_mcp_rpc_error(id, RPC_INTERNAL_ERROR, "listing the sandboxes failed: %s", err);
    res = json_array();
    json_array_foreach(list, i, b)
    {
        const char *name = json_string_value(json_object_get(b, "name"));

        if (!name || strlen(name) > NAME_MAX_LEN)
            continue;
        snprintf(uri, sizeof uri, "sandbox://%s/info", name);
        json_array_append_new(res, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uri", uri, "name", name,
                                             "title", name, "description",
                                             "The sandbox as list_servers shows it", "mimeType",
                                             "application/json"));
    }
    json_decref(list);
    sbx_mcp_providers_append(srv, "resources", res);
    return sbx_mcp_rpc_result(id, json_pack("{s:o}", "resources", res));
}

static json_t *on_templates(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    json_t *t;

    if (json_object_get(params, "cursor"))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: unknown cursor (one page of templates)");
    t = json_array();
    if (sandboxes_offered(srv))
        json_array_append_new(
            t, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uriTemplate", "sandbox://{name}/info",
                         "name", "sandbox-info", "title", "A sandbox's details", "description",
                         "The sandbox's list_servers entry: owner, policy, address, status, expiry",
                         "mimeType", "application/json"));
    if (sandboxes_offered(srv) && denials_offered(srv))
        json_array_append_new(
            t, json_pack("{s:s, s:s, s:s, s:s, s:s}", "uriTemplate", "sandbox://{name}/denials",
                         "name", "sandbox-denials", "title", "A sandbox's refused connections",
                         "description",
                         "The egress proxy's recent denials of the sandbox: what it tried to "
                         "reach that its policy does not allow",
                         "mimeType", "application/json"));
    sbx_mcp_providers_append(srv, "resourceTemplates", t);
    return sbx_mcp_rpc_result(id, json_pack("{s:o}", "resourceTemplates", t));
}

static json_t *not_found(const json_t *id, const char *uri, const char *why)
{
    json_t *r = sbx_mcp_rpc_error(id, RPC_RESOURCE_NOT_FOUND, "resource not found: %s", why);

    json_object_set_new(json_object_get(r, "error"), "data", json_pack("{s:s}", "uri", uri));
    return r;
}

/* One resources/read content of uri: the JSON text of v (stolen). */
static json_t *contents(const json_t *id, const char *uri, json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT);
    json_t *r;

    json_decref(v);
    if (!text)
        return sbx_mcp_rpc_error(id, RPC_INTERNAL_ERROR, "the resource could not be serialized");
    r = sbx_mcp_rpc_result(id, json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri,
                                         "mimeType", "application/json", "text", text));
    free(text);
    return r;
}

static json_t *read_denials(struct sbx_mcp_server *srv, const json_t *id, const char *uri,
                            const char *name)
{
    char err[1024] = "";
    json_t *args = json_pack("{s:s}", "name", name), *out = NULL;
    int rc = sbx_mcp_op_call(srv, srv->cfg.ops->denials, args, &out, err, sizeof err);

    json_decref(args);
    if (rc != 0 || !json_is_object(out)) {
        json_decref(out);
        sbx_printable(err);
        return sbx_mcp_rpc_error(id, RPC_INTERNAL_ERROR, "reading the denials of %s failed: %s",
                                 name, err[0] ? err : "no result");
    }
    return contents(id, uri, out);
}

static json_t *on_read(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    char name[NAME_MAX_LEN + 1], err[1024];
    enum kind k;
    json_t *list, *b;

    if (!uri)
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: resources/read needs \"uri\" (a string)");
    k = sandboxes_offered(srv) ? parse_uri(uri, name) : KIND_NONE;
    if (k == KIND_NONE) {
        json_t *r = sbx_mcp_providers_read(srv, id, uri);

        return r ? r
                 : not_found(id, uri, "not a sandbox://NAME/info or sandbox://NAME/denials URI");
    }
    if (k == KIND_DENIALS && !denials_offered(srv))
        return not_found(id, uri, "this server offers no denials");
    list = sandboxes(srv, err, sizeof err);
    if (!list)
        return sbx_mcp_rpc_error(id, RPC_INTERNAL_ERROR, "listing the sandboxes failed: %s", err);
    b = json_incref(entry_of(list, name));
    json_decref(list);
    if (!b)
        return not_found(id, uri, "no such sandbox of this server's owner");
    if (k == KIND_DENIALS) {
        json_decref(b);
        return read_denials(srv, id, uri, name);
    }
    return contents(id, uri, b);
}

static json_t *on_subscribe(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                            const json_t *id, const json_t *params, int on)
{
    const char *uri = json_string_value(json_object_get(params, "uri"));
    char name[NAME_MAX_LEN + 1];

    if (!uri)
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: \"uri\" (a string) is "
                                 "required");
    if (!(sandboxes_offered(srv) && parse_uri(uri, name) == KIND_INFO) &&
        !sbx_mcp_providers_subscribable(srv, uri))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: only sandbox://NAME/info URIs can be "
                                 "subscribed to (a tool that changes NAME updates them)");
    if (sbx_mcp_session_subscribe(srv, sess, uri, on) == -1)
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: this session has %d subscriptions already; "
                                 "unsubscribe from some first",
                                 SBX_MCP_MAX_SUBSCRIPTIONS);
    return sbx_mcp_rpc_result(id, json_object());
}

json_t *sbx_mcp_on_resources(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const char *method, const json_t *id, const json_t *params)
{
    if (strcmp(method, "resources/list") == 0)
        return on_list(srv, id, params);
    if (strcmp(method, "resources/templates/list") == 0)
        return on_templates(srv, id, params);
    if (strcmp(method, "resources/read") == 0)
        return on_read(srv, id, params);
    if (strcmp(method, "resources/subscribe") == 0)
        return on_subscribe(srv, sess, id, params, 1);
    if (strcmp(method, "resources/unsubscribe") == 0)
        return on_subscribe(srv, sess, id, params, 0);
    return sbx_mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "method not found: %s", method);
}

void sbx_mcp_resource_updated(struct sbx_mcp_server *srv, const char *uri)
{
    sbx_mcp_sessions_updated(srv, uri);
}

void sbx_mcp_resources_changed(struct sbx_mcp_server *srv, const struct sbx_mcp_tool *tool,
                               const json_t *args)
{
    const char *name = json_string_value(json_object_get(args, "name"));
    char uri[128];

    if (!sandboxes_offered(srv))
        return;
    if ((tool->flags & SBX_MCP_TOOL_CHANGES) && name && strlen(name) <= NAME_MAX_LEN) {
        snprintf(uri, sizeof uri, "sandbox://%s/info", name);
        sbx_mcp_sessions_updated(srv, uri);
    }
    if (tool->flags & SBX_MCP_TOOL_CHANGES_SET)
        sbx_mcp_sessions_list_changed(srv);
}
