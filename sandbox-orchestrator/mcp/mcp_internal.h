/* mcp_internal.h - what the files of the protocol layer share among
 * themselves (mcp_server.c and the files of its methods: mcp_logging.c,
 * mcp_sessions.c, mcp_resources.c, mcp_prompts.c, mcp_complete.c,
 * mcp_providers.c, mcp_progress.c); the transports and the tests see
 * only mcp_server.h.
 */
#ifndef SBX_MCP_INTERNAL_H
#define SBX_MCP_INTERNAL_H

#include <pthread.h>

#include "mcp_server.h"
#include "printable.h"

/* JSON-RPC 2.0 error codes (section 5.1), and MCP's own. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    RPC_RESOURCE_NOT_FOUND = -32002, /* server/resources: an unknown URI */
};

struct sbx_mcp_pending;

struct sbx_mcp_server {
    struct sbx_mcp_config cfg;
    json_t *tools_list; /* the tools/list result, built once */
    json_t **schemas;   /* per tool: its inputSchema (owned by tools_list) */
    /* The operations share one Proxmox client: one call at a time. */
    pthread_mutex_t op_lock;
    FILE *log;
    /* The live sessions (mcp_sessions.c), and the per-session state the
     * server keeps in them (log level, subscriptions). */
    pthread_mutex_t sessions_lock;
    struct sbx_mcp_session *sessions;
    /* Server-to-client requests waiting for their answers (mcp_elicit.c). */
    pthread_mutex_t pending_lock;
    pthread_cond_t pending_cond;
    struct sbx_mcp_pending *pending;
    unsigned long long next_request; /* for their ids */
    /* Per provider of cfg.providers: {"resources", "resourceTemplates",
     * "prompts"}, its declarations parsed (mcp_providers.c). */
    json_t *provided;
};

/* A JSON-RPC error response; id NULL means "null".  The message is made
 * valid UTF-8. */
json_t *sbx_mcp_rpc_error(const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A JSON-RPC result response; steals result. */
json_t *sbx_mcp_rpc_result(const json_t *id, json_t *result);

/* Whether name is in the NULL-terminated list (NULL: an empty one). */
int sbx_mcp_listed(const char *const *list, const char *name);

/* Runs op under the operation lock; the contract of sbx_op_fn. */
int sbx_mcp_op_call(struct sbx_mcp_server *srv, sbx_op_fn op, json_t *args, json_t **out, char *err,
                    size_t errlen);

/* mcp_sessions.c: the registry of live sessions. */

/* Puts sess in the registry (at initialize); again is a no-op. */
void sbx_mcp_session_attach(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess);

/* The most URIs one session may be subscribed to at once: a client
 * cannot make the server keep an unbounded set. */
#define SBX_MCP_MAX_SUBSCRIPTIONS 256

/* Subscribes (on 1) or unsubscribes sess to uri.  0, or -1 when sess has
 * SBX_MCP_MAX_SUBSCRIPTIONS already (nothing changes). */
int sbx_mcp_session_subscribe(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                              const char *uri, int on);

/* notifications/resources/updated for uri to every session subscribed to
 * it, through their deliver functions. */
void sbx_mcp_sessions_updated(struct sbx_mcp_server *srv, const char *uri);

/* notifications/resources/list_changed to every session. */
void sbx_mcp_sessions_list_changed(struct sbx_mcp_server *srv);

/* mcp_elicit.c */

/* A response (msg, borrowed) from the client of sess: hands it to the
 * server-to-client request waiting for it; one nobody waits for is
 * dropped. */
void sbx_mcp_pending_answer(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                            const json_t *msg);

/* Sets the session of the tool call this thread runs (NULL: none). */
void sbx_mcp_current_set(struct sbx_mcp_session *sess);

/* mcp_logging.c */

/* logging/setLevel. */
json_t *sbx_mcp_on_set_level(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const json_t *id, const json_t *params);

/* Whether a message at level would reach sess now. */
int sbx_mcp_log_wanted(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                       enum sbx_mcp_log_level level);

/* Sends notifications/message (logger "sandboxctl") at level to sess
 * through its notify function, when its level lets it through (the
 * server's own; tools use sbx_mcp_session_log). */
void sbx_mcp_log(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                 enum sbx_mcp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* mcp_resources.c */

/* Whether resources are offered (the server has operations to read). */
int sbx_mcp_resources_offered(const struct sbx_mcp_server *srv);

/* resources/list, resources/templates/list, resources/read,
 * resources/subscribe and resources/unsubscribe (method names the one). */
json_t *sbx_mcp_on_resources(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess,
                             const char *method, const json_t *id, const json_t *params);

/* After tool t succeeded with args: the notifications its flags call for. */
void sbx_mcp_resources_changed(struct sbx_mcp_server *srv, const struct sbx_mcp_tool *tool,
                               const json_t *args);

/* The names of the owner's sandboxes (from the list operation) that start
 * with prefix, at most max; a new array (empty when there is no list). */
json_t *sbx_mcp_sandbox_names(struct sbx_mcp_server *srv, const char *prefix, size_t max);

/* mcp_prompts.c */

/* prompts/list and prompts/get. */
json_t *sbx_mcp_on_prompts(struct sbx_mcp_server *srv, const char *method, const json_t *id,
                           const json_t *params);

/* Whether prompt `name` exists and has an argument `arg`; kind, when so,
 * says what it takes: "policy" (a preset), "name" (a sandbox) or "". */
int sbx_mcp_prompt_arg(const char *name, const char *arg, const char **kind);

/* mcp_providers.c: the embedding program's resources and prompts. */

/* Parses every provider's declarations into srv->provided; 0, or -1
 * with err naming the provider and what is wrong. */
int sbx_mcp_providers_load(struct sbx_mcp_server *srv, char *err, size_t errlen);

void sbx_mcp_providers_free(struct sbx_mcp_server *srv);

/* Whether a provider declares resources or templates. */
int sbx_mcp_providers_have_resources(const struct sbx_mcp_server *srv);

/* Appends a copy of every provider's declarations of kind key
 * ("resources", "resourceTemplates" or "prompts") to list. */
void sbx_mcp_providers_append(const struct sbx_mcp_server *srv, const char *key, json_t *list);

/* resources/read of uri by the provider that serves it: the answer, or
 * NULL when none does. */
json_t *sbx_mcp_providers_read(struct sbx_mcp_server *srv, const json_t *id, const char *uri);

/* Whether a provider lets uri be subscribed to. */
int sbx_mcp_providers_subscribable(const struct sbx_mcp_server *srv, const char *uri);

/* prompts/get of a provider's prompt name: the answer, or NULL when no
 * provider declares it. */
json_t *sbx_mcp_providers_get(struct sbx_mcp_server *srv, const json_t *id, const char *name,
                              const json_t *args);

/* The candidates for argument arg of a provider's prompt (a new array,
 * maybe empty), or NULL when no provider declares that prompt and
 * argument. */
json_t *sbx_mcp_providers_complete(struct sbx_mcp_server *srv, const char *prompt, const char *arg);

/* mcp_progress.c */

/* Sets the progressToken of the tool call this thread runs (NULL: none). */
void sbx_mcp_progress_token_set(const json_t *token);

/* mcp_complete.c */

/* completion/complete. */
json_t *sbx_mcp_on_complete(struct sbx_mcp_server *srv, const json_t *id, const json_t *params);

#endif
