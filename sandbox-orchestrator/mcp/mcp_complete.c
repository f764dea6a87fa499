/* mcp_complete.c - MCP server/utilities/completion: completion/complete
 * for the prompts' arguments (policy: the permitted presets; size: the
 * configured sizes; name: the owner's sandboxes) and for the variable {name} of the resource
 * templates (the owner's sandboxes).  At most MAX_VALUES values, those
 * that start with what the user typed (hasMore when there are more;
 * total only when there are not); an argument nothing completes
 * (sandbox_task's task) gets none.  An unknown prompt, template or
 * argument is -32602.  The arguments of a provider's prompts get the
 * candidates its complete function gives (mcp_providers.c), filtered and
 * capped the same way.
 */
#include <string.h>

#include "mcp_internal.h"

#define MAX_VALUES 100 /* the specification's cap */

/* The names of list (NULL-terminated) that start with prefix, at most max. */
static json_t *listed_values(const char *const *list, const char *prefix, size_t max)
{
    json_t *v = json_array();

    for (const char *const *p = list; p && *p && json_array_size(v) < max; p++)
        if (strncmp(*p, prefix, strlen(prefix)) == 0)
            json_array_append_new(v, json_string(*p));
    return v;
}

/* The completion/complete answer of values (stolen): those that start with
 * prefix (NULL: all of them already do), at most MAX_VALUES, hasMore when
 * there were more, total when not. */
static json_t *answer(const json_t *id, json_t *values, const char *prefix)
{
    json_t *completion;
    int more;

    for (size_t i = json_array_size(values); prefix && i-- > 0;) {
        const char *v = json_string_value(json_array_get(values, i));

        if (!v || strncmp(v, prefix, strlen(prefix)) != 0)
            json_array_remove(values, i);
    }
    more = json_array_size(values) > MAX_VALUES;
    while (json_array_size(values) > MAX_VALUES)
        json_array_remove(values, MAX_VALUES);
    completion = json_pack("{s:o, s:b}", "values", values, "hasMore", more);
    if (!more)
        json_object_set_new(completion, "total", json_integer((json_int_t)json_array_size(values)));
    return sbx_mcp_rpc_result(id, json_pack("{s:o}", "completion", completion));
}

static int is_template(const char *uri)
{
    return uri && (strcmp(uri, "sandbox://{name}/info") == 0 ||
                   strcmp(uri, "sandbox://{name}/denials") == 0);
}

json_t *sbx_mcp_on_complete(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    const json_t *ref = json_object_get(params, "ref"), *arg = json_object_get(params, "argument");
    const char *type = json_string_value(json_object_get(ref, "type"));
    const char *arg_name = json_string_value(json_object_get(arg, "name"));
    const char *prefix = json_string_value(json_object_get(arg, "value"));
    const char *kind = "";
    json_t *values;

    if (!type || !arg_name || !prefix)
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: completion/complete needs ref.type, "
                                 "argument.name and argument.value (strings)");
    if (strcmp(type, "ref/prompt") == 0) {
        const char *prompt = json_string_value(json_object_get(ref, "name"));

        if (sbx_mcp_prompt_arg(prompt, arg_name, &kind))
            ; /* one of ours: kind says what completes it */
        else if ((values = sbx_mcp_providers_complete(srv, prompt, arg_name)))
            return answer(id, values, prefix);
        else
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: no such prompt or prompt argument");
    } else if (strcmp(type, "ref/resource") == 0) {
        if (!is_template(json_string_value(json_object_get(ref, "uri"))) ||
            strcmp(arg_name, "name") != 0 || !sbx_mcp_resources_offered(srv))
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: no such resource template or variable");
        kind = "name";
    } else {
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: ref.type must be ref/prompt or ref/resource");
    }
    /* One more than the cap tells whether there are more. */
    if (strcmp(kind, "policy") == 0)
        values = listed_values(srv->cfg.presets, prefix, MAX_VALUES + 1);
    else if (strcmp(kind, "size") == 0)
        values = listed_values(srv->cfg.sizes, prefix, MAX_VALUES + 1);
    else if (strcmp(kind, "name") == 0)
        values = sbx_mcp_sandbox_names(srv, prefix, MAX_VALUES + 1);
    else
        values = json_array();
    return answer(id, values, NULL);
}
