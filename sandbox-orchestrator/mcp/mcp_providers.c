/* mcp_providers.c - the resources, resource templates and prompts that the
 * embedding program supplies besides the built-in sandbox ones (struct
 * sbx_mcp_provider in cfg->providers): their declarations, parsed once and
 * listed after the built-in entries, and the dispatch of resources/read,
 * subscribe, prompts/get and completion to the provider that serves a URI
 * or a prompt.  `sandboxctl mcp` has none; the conformance fixtures of the
 * tests are one.
 */
#include <stdio.h>
#include <string.h>

#include "mcp_internal.h"

/* The keys of a provider's parsed declarations, in srv->provided[i], and
 * the struct field each comes from. */
static const char *const keys[] = {"resources", "resourceTemplates", "prompts"};

/* A string's value, "" for anything else. */
static const char *sv(const json_t *j)
{
    const char *s = json_string_value(j);

    return s ? s : "";
}

static const char *decl_text(const struct sbx_mcp_provider *p, size_t k)
{
    return k == 0 ? p->resources : k == 1 ? p->templates : p->prompts;
}

/* Parses one declaration text into an array of objects, each with the
 * string member `required` (uri, uriTemplate or name). */
static json_t *decl_parse(size_t i, size_t k, const char *text, char *err, size_t errlen)
{
    static const char *const required[] = {"uri", "uriTemplate", "name"};
    json_error_t e;
    json_t *a = json_loads(text ? text : "[]", JSON_REJECT_DUPLICATES, &e), *v;
    size_t n;

    if (!a) {
        snprintf(err, errlen, "provider %zu: %s: line %d column %d: %s", i, keys[k], e.line,
                 e.column, e.text);
        return NULL;
    }
    if (!json_is_array(a)) {
        snprintf(err, errlen, "provider %zu: %s: expected a JSON array", i, keys[k]);
        json_decref(a);
        return NULL;
    }
    json_array_foreach(a, n, v)
    {
        if (!json_is_string(json_object_get(v, required[k])) ||
            !json_is_string(json_object_get(v, "name"))) {
            snprintf(err, errlen, "provider %zu: %s[%zu]: needs \"%s\"%s (strings)", i, keys[k], n,
                     required[k], k == 2 ? "" : " and \"name\"");
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int sbx_mcp_providers_load(struct sbx_mcp_server *srv, char *err, size_t errlen)
{
    srv->provided = json_array();
    for (size_t i = 0; i < srv->cfg.nproviders; i++) {
        json_t *o = json_object();

        json_array_append_new(srv->provided, o);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            json_t *a = decl_parse(i, k, decl_text(&srv->cfg.providers[i], k), err, errlen);

            if (!a)
                return -1;
            json_object_set_new(o, keys[k], a);
        }
    }
    return 0;
}

void sbx_mcp_providers_free(struct sbx_mcp_server *srv)
{
    json_decref(srv->provided);
    srv->provided = NULL;
}

/* Provider i's declarations of kind key (borrowed; an empty array when none). */
static json_t *decls(const struct sbx_mcp_server *srv, size_t i, const char *key)
{
    return json_object_get(json_array_get(srv->provided, i), key);
}

int sbx_mcp_providers_have_resources(const struct sbx_mcp_server *srv)
{
    for (size_t i = 0; i < srv->cfg.nproviders; i++)
        if (json_array_size(decls(srv, i, "resources")) ||
            json_array_size(decls(srv, i, "resourceTemplates")))
            return 1;
    return 0;
}

void sbx_mcp_providers_append(const struct sbx_mcp_server *srv, const char *key, json_t *list)
{
    json_t *v;
    size_t n;

    for (size_t i = 0; i < srv->cfg.nproviders; i++) {
        json_array_foreach(decls(srv, i, key), n, v)
        {
            json_array_append_new(list, json_deep_copy(v));
        }
    }
}

json_t *sbx_mcp_providers_read(struct sbx_mcp_server *srv, const json_t *id, const char *uri)
{
    char err[1024] = "";

    for (size_t i = 0; i < srv->cfg.nproviders; i++) {
        const struct sbx_mcp_provider *p = &srv->cfg.providers[i];
        json_t *contents = NULL;
        int rc = p->read ? p->read(uri, &contents, err, sizeof err) : SBX_MCP_NOT_PROVIDED;

        if (rc == SBX_MCP_NOT_PROVIDED)
            continue;
        if (rc == SBX_MCP_PROVIDED && json_is_array(contents))
            return sbx_mcp_rpc_result(id, json_pack("{s:o}", "contents", contents));
        json_decref(contents);
        sbx_printable(err);
        return sbx_mcp_rpc_error(id, RPC_INTERNAL_ERROR, "reading %.200s failed: %s", uri,
                                 err[0] ? err : "no contents");
    }
    return NULL;
}

int sbx_mcp_providers_subscribable(const struct sbx_mcp_server *srv, const char *uri)
{
    for (size_t i = 0; i < srv->cfg.nproviders; i++)
        if (srv->cfg.providers[i].subscribable && srv->cfg.providers[i].subscribable(uri))
            return 1;
    return 0;
}

/* The provider that declares prompt name (its index in *i, the
 * declaration borrowed), or NULL. */
static const json_t *prompt_decl(const struct sbx_mcp_server *srv, const char *name, size_t *i)
{
    json_t *v;
    size_t n;

    for (*i = 0; name && *i < srv->cfg.nproviders; (*i)++) {
        json_array_foreach(decls(srv, *i, "prompts"), n, v)
        {
            if (strcmp(sv(json_object_get(v, "name")), name) == 0)
                return v;
        }
    }
    return NULL;
}

/* The declared argument arg of prompt decl (borrowed), or NULL. */
static const json_t *arg_decl(const json_t *decl, const char *arg)
{
    json_t *a;
    size_t n;

    json_array_foreach(json_object_get(decl, "arguments"), n, a)
    {
        if (arg && strcmp(sv(json_object_get(a, "name")), arg) == 0)
            return a;
    }
    return NULL;
}

/* The arguments of a get, checked against the declaration: every
 * required one is there, every given one is a string.  NULL, or the
 * -32602 answer. */
static json_t *args_refused(const json_t *id, const json_t *decl, const json_t *args)
{
    const char *name = sv(json_object_get(decl, "name")), *k;
    json_t *a, *v;
    size_t n;

    json_array_foreach(json_object_get(decl, "arguments"), n, a)
    {
        const char *arg = sv(json_object_get(a, "name"));

        if (json_is_true(json_object_get(a, "required")) && !json_object_get(args, arg))
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: prompt %s needs argument \"%s\"", name, arg);
    }
    json_object_foreach((json_t *)args, k, v)
    {
        if (!json_is_string(v))
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: argument \"%.64s\" of prompt %s must be a "
                                     "string",
                                     k, name);
    }
    return NULL;
}

json_t *sbx_mcp_providers_get(struct sbx_mcp_server *srv, const json_t *id, const char *name,
                              const json_t *args)
{
    char err[1024] = "";
    size_t i;
    const json_t *decl = prompt_decl(srv, name, &i);
    json_t *empty = NULL, *result = NULL, *r;
    int rc;

    if (!decl)
        return NULL;
    if (!args)
        args = empty = json_object();
    r = args_refused(id, decl, args);
    if (!r) {
        rc = srv->cfg.providers[i].get
                 ? srv->cfg.providers[i].get(name, args, &result, err, sizeof err)
                 : SBX_MCP_PROVIDE_FAILED;
        sbx_printable(err);
        if (rc == SBX_MCP_PROVIDED && json_is_object(result))
            r = sbx_mcp_rpc_result(id, json_incref(result));
        else
            r = sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS, "invalid params: prompt %s: %s", name,
                                  err[0] ? err : "no result");
    }
    json_decref(result);
    json_decref(empty);
    return r;
}

json_t *sbx_mcp_providers_complete(struct sbx_mcp_server *srv, const char *prompt, const char *arg)
{
    size_t i;
    const json_t *decl = prompt_decl(srv, prompt, &i);
    json_t *values = NULL;

    if (!decl || !arg_decl(decl, arg))
        return NULL;
    if (!srv->cfg.providers[i].complete ||
        srv->cfg.providers[i].complete(prompt, arg, &values) != SBX_MCP_PROVIDED ||
        !json_is_array(values)) {
        json_decref(values);
        return json_array();
    }
    return values;
}
