/* mcp_prompts.c - MCP server/prompts: ready-made instructions an assistant
 * (or its user, as a slash command) can pick:
 *   sandbox_task    (task, policy, size)  do a task in a fresh sandbox, then
 *                                   destroy it
 *   review_changes  (name)          look over what a sandbox has changed
 *                                   before anyone trusts it
 * prompts/get fills them in; an unknown prompt, a missing required
 * argument, a policy that is not a permitted preset or a size that is not
 * configured is -32602.  The
 * embedding program's providers (mcp_providers.c) add prompts of their
 * own after these.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_internal.h"

struct prompt_arg {
    const char *name, *description;
    int required;
    const char *kind; /* what completes it: "policy", "size", "name" or "" */
};

struct prompt {
    const char *name, *title, *description;
    struct prompt_arg args[4]; /* ends at a NULL name */
};

static const struct prompt prompts[] = {
    {"sandbox_task",
     "Do a task in a fresh sandbox",
     "Creates a disposable sandbox, does the task inside it and destroys it afterwards.",
     {{"task", "What to do inside the sandbox", 1, ""},
      {"policy", "The egress policy preset (default: the first one permitted)", 0, "policy"},
      {"size", "The sandbox's size (default: the first one configured)", 0, "size"},
      {NULL, NULL, 0, NULL}}},
    {"review_changes",
     "Review what a sandbox changed",
     "Looks over a sandbox's files, processes and refused connections before its work is "
     "trusted or copied out.",
     {{"name", "The sandbox to review", 1, "name"}, {NULL, NULL, 0, NULL}}},
};

#define NPROMPTS (sizeof prompts / sizeof prompts[0])

static const struct prompt *find(const char *name)
{
    for (size_t i = 0; name && i < NPROMPTS; i++)
        if (strcmp(prompts[i].name, name) == 0)
            return &prompts[i];
    return NULL;
}

int sbx_mcp_prompt_arg(const char *name, const char *arg, const char **kind)
{
    const struct prompt *p = find(name);

    for (const struct prompt_arg *a = p ? p->args : NULL; a && a->name; a++) {
        if (arg && strcmp(a->name, arg) == 0) {
            *kind = a->kind;
            return 1;
        }
    }
    return 0;
}

static json_t *on_list(const struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    json_t *list = json_array();

    if (json_object_get(params, "cursor")) {
        json_decref(list);
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: unknown cursor (prompts/list has one page)");
    }
    for (size_t i = 0; i < NPROMPTS; i++) {
        json_t *args = json_array();

        for (const struct prompt_arg *a = prompts[i].args; a->name; a++)
            json_array_append_new(args, json_pack("{s:s, s:s, s:b}", "name", a->name, "description",
                                                  a->description, "required", a->required));
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:o}", "name", prompts[i].name,
                                              "title", prompts[i].title, "description",
                                              prompts[i].description, "arguments", args));
    }
    sbx_mcp_providers_append(srv, "prompts", list);
    return sbx_mcp_rpc_result(id, json_pack("{s:o}", "prompts", list));
}

/* The text of sandbox_task. */
static void text_task(char *buf, size_t len, const char *task, const char *policy, const char *size)
{
    snprintf(buf, len,
             "Do this task in a fresh, disposable sandbox VM, not on this machine:\n\n%s\n\n"
             "1. Call create_server with a short name that says what it is for, policy \"%s\", "
             "size \"%s\" and a lifetime that fits the task (e.g. \"1h\"); remember the name "
             "it answers with.\n"
             "2. Work inside it with run_command (give the command as an array of arguments), "
             "read_file and write_file. The sandbox reaches only what its policy allows: a "
             "connection refused with 403 and an X-Egress-Deny header is the policy, not a "
             "fault, so do not retry it; read sandbox://NAME/denials to see what was refused, "
             "and if the task needs that host, ask for it with request_access.\n"
             "3. Take a snapshot_server before a risky step, and rollback_server if it goes "
             "wrong.\n"
             "4. Report what you did and what you found, with the commands' relevant output.\n"
             "5. Call destroy_server when you are done, also when the task failed.",
             task, policy, size);
}

/* The text of review_changes. */
static void text_review(char *buf, size_t len, const char *name)
{
    snprintf(buf, len,
             "Review the sandbox \"%s\" before its work is trusted or copied out.\n\n"
             "1. Read sandbox://%s/info for its policy, owner and expiry.\n"
             "2. With run_command, list what changed: files modified recently (e.g. find / "
             "-xdev -newer /etc/hostname -type f, leaving out /proc, /sys and caches), new "
             "services, cron entries and processes still running.\n"
             "3. In each repository it worked in, run git status and git diff and read the "
             "diff; note any change to CI configuration, hooks, build scripts, lockfiles or "
             "agent instructions.\n"
             "4. Read sandbox://%s/denials, if the server offers it, for what it tried to "
             "reach and was refused.\n"
             "5. Summarize: what changed, anything surprising or risky, and whether it is "
             "safe to use. Change nothing yourself.",
             name, name, name);
}

/* What sandbox_task names from list (the permitted presets, the
 * configured sizes): the given one, which must be listed, or the first.
 * NULL when there is none to use. */
static const char *task_choice(const char *const *list, const char *given)
{
    if (given)
        return sbx_mcp_listed(list, given) ? given : NULL;
    return list ? list[0] : NULL;
}

static json_t *on_get(struct sbx_mcp_server *srv, const json_t *id, const json_t *params)
{
    const struct prompt *p = find(json_string_value(json_object_get(params, "name")));
    const json_t *args = json_object_get(params, "arguments");
    char text[4096];
    const char *policy, *size;
    json_t *r;

    if (!p && (r = sbx_mcp_providers_get(srv, id,
                                         json_string_value(json_object_get(params, "name")), args)))
        return r;
    if (!p)
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: unknown prompt (prompts/list names them)");
    if (args && !json_is_object(args))
        return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                 "invalid params: \"arguments\" must be an object");
    for (const struct prompt_arg *a = p->args; a->name; a++) {
        const json_t *v = json_object_get(args, a->name);

        if ((a->required && !v) || (v && !json_is_string(v)))
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: prompt %s needs argument \"%s\" (a string)",
                                     p->name, a->name);
    }
    if (strcmp(p->name, "sandbox_task") == 0) {
        policy = task_choice(srv->cfg.presets, json_string_value(json_object_get(args, "policy")));
        if (!policy)
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: \"policy\" must be a preset permitted over "
                                     "MCP (completion/complete lists them)");
        size = task_choice(srv->cfg.sizes, json_string_value(json_object_get(args, "size")));
        if (!size && json_object_get(args, "size"))
            return sbx_mcp_rpc_error(id, RPC_INVALID_PARAMS,
                                     "invalid params: \"size\" must be a configured size "
                                     "(completion/complete lists them)");
        text_task(text, sizeof text, json_string_value(json_object_get(args, "task")), policy,
                  size ? size : "small");
    } else {
        text_review(text, sizeof text, json_string_value(json_object_get(args, "name")));
    }
    sbx_printable_lines(text);
    return sbx_mcp_rpc_result(id, json_pack("{s:s, s:[{s:s, s:{s:s, s:s}}]}", "description",
                                            p->description, "messages", "role", "user", "content",
                                            "type", "text", "text", text));
}

json_t *sbx_mcp_on_prompts(struct sbx_mcp_server *srv, const char *method, const json_t *id,
                           const json_t *params)
{
    if (strcmp(method, "prompts/list") == 0)
        return on_list(srv, id, params);
    if (strcmp(method, "prompts/get") == 0)
        return on_get(srv, id, params);
    return sbx_mcp_rpc_error(id, RPC_METHOD_NOT_FOUND, "method not found: %s", method);
}
