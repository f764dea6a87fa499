/* mcp_server.h - the MCP protocol layer of `sandboxctl mcp` (private to mcp/).
 *
 * Three layers:
 *   mcp_server.c  JSON-RPC 2.0 framing and the MCP methods (initialize, ping,
 *                 tools/list, tools/call) over a table of tools; no I/O; with
 *                 mcp_logging.c, mcp_resources.c, mcp_prompts.c,
 *                 mcp_complete.c (the other methods), mcp_providers.c (the
 *                 embedding program's own resources and prompts) and
 *                 mcp_sessions.c (the registry of live sessions), sharing
 *                 mcp_internal.h.
 *   mcp_tools.c   the sandbox tools: names, descriptions, JSON Schemas and
 *                 annotations, bound to a set of operation functions.
 *   mcp_progress.c  an operation's steps as notifications/progress.
 *   mcp_stdio.c,  the transports: newline-delimited JSON on stdin/stdout, and
 *   mcp_http.c    Streamable HTTP on one loopback address (its sessions:
 *                 mcp_http_session.c; event streams: mcp_http_stream.c,
 *                 framed by mcp_sse.c).
 * mcp.c binds the tools to the real sbx_op_* functions and the configuration.
 * The unit tests bind the same tools to test-only operations.
 */
#ifndef SBX_MCP_SERVER_H
#define SBX_MCP_SERVER_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "../ops.h"
#include "../progress.h"

/* The protocol version we speak, and every older one we also accept. */
#define SBX_MCP_PROTOCOL_LATEST "2025-11-25"

/* Tool flags. */
enum {
    /* Arguments carry "policy": it must be one of the configured MCP presets
     * (the inputSchema lists them as an enum, and the call is refused
     * otherwise, whatever the schema said). */
    SBX_MCP_TOOL_PRESET_POLICY = 1u << 0,
    /* The server sets "owner" to its own configured owner: an assistant does
     * not choose whom its sandboxes are logged against. */
    SBX_MCP_TOOL_SETS_OWNER = 1u << 1,
    /* Arguments may carry "secrets" (an array of names): each must be one
     * of the configured MCP secrets (the inputSchema lists them as the
     * items' enum; with none configured the property is left out of the
     * schema and the call is refused, whatever the schema said). */
    SBX_MCP_TOOL_MCP_SECRETS = 1u << 2,
    /* Changes the sandbox its "name" argument names (its list entry):
     * after a success, notifications/resources/updated for
     * sandbox://NAME/info goes to every session subscribed to it. */
    SBX_MCP_TOOL_CHANGES = 1u << 3,
    /* Makes or removes a sandbox: after a success,
     * notifications/resources/list_changed goes to every session. */
    SBX_MCP_TOOL_CHANGES_SET = 1u << 4,
    /* Runs without the operation lock and takes it itself for each
     * operation it calls (sbx_mcp_op_call): a tool that waits for a
     * human (elicitation) does not hold up the others.  No progress. */
    SBX_MCP_TOOL_UNLOCKED = 1u << 5,
    /* The function's *out is a whole CallToolResult: {"content": [...]}
     * (text, image, audio, resource or resource_link blocks) and
     * optionally "isError", sent as it is, without structuredContent or
     * the JSON copied into a text block.  Its output_schema must be NULL. */
    SBX_MCP_TOOL_CONTENT = 1u << 6,
    /* Runs on a struct sbx of its own (sbx_sibling: its own Proxmox
     * connection), outside the operation lock: a sandbox whose guest agent
     * answers slowly, or never, holds up this call alone.  For tools that
     * only talk to one sandbox's guest agent and touch no shared state. */
    SBX_MCP_TOOL_OWN_SBX = 1u << 7,
};

/* One tool.  The JSON texts are parsed once by sbx_mcp_server_new(), which
 * refuses a table whose JSON is broken. */
struct sbx_mcp_tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON Schema of the arguments (type object) */
    const char *output_schema; /* JSON Schema of structuredContent, or NULL */
    const char *annotations;   /* JSON object of hints (readOnlyHint, ...) */
    sbx_op_fn fn;
    unsigned flags;
    /* Optional: turns the tool's arguments into the operation's (args is a
     * private copy).  Returns 0, or -1 with err filled (a tool error). */
    int (*prepare)(json_t *args, char *err, size_t errlen);
    /* Optional: adds to the operation's answer before it is sent. */
    void (*finish)(json_t *out);
};

/* The operations the sandbox tools call; mcp.c fills it with sbx_op_*. */
struct sbx_mcp_ops {
    sbx_op_fn create, list, exec, read, write, extend, destroy, snapshot, rollback, snapshots;
    /* Offered only when set: mcp.c sets it when the administrator
     * configured an mcp-repo (push_repo is never offered). */
    sbx_op_fn fetch_changes;
    /* Optional: {"name"} -> {"name", "vmid", "denials": [...]}, egressd's
     * recent denials of that sandbox.  NULL: no sandbox://{name}/denials
     * resource (the template is not listed and reading one is an error). */
    sbx_op_fn denials;
    /* Optional: access requests (../ops.h access_request, access_approve,
     * access_deny); request_access is offered when access_request is set,
     * and asks the owner (elicitation) only when the other two are. */
    sbx_op_fn access_request, access_approve, access_deny;
};

/* What a provider's read, get or complete function answers. */
enum sbx_mcp_provided {
    SBX_MCP_PROVIDED = 0,       /* done: the result is set */
    SBX_MCP_NOT_PROVIDED = 1,   /* not this provider's: the next is asked */
    SBX_MCP_PROVIDE_FAILED = -1 /* this provider's, but it failed: err says why */
};

/* Resources, resource templates and prompts that the embedding program
 * offers besides the built-in sandbox ones (mcp_providers.c).  The JSON
 * texts are parsed once by sbx_mcp_server_new() (a table whose JSON is
 * broken is refused) and listed after the built-in entries; any may be
 * NULL.  Its functions may be called from several threads at once. */
struct sbx_mcp_provider {
    const char *resources; /* JSON array of MCP Resource objects (uri, name, ...) */
    const char *templates; /* JSON array of ResourceTemplate objects (uriTemplate, name) */
    /* JSON array of Prompt objects (name, arguments: [{name, required}]);
     * prompts/get refuses a call without a required argument or with one
     * that is not a string before get is called. */
    const char *prompts;
    /* resources/read of uri: PROVIDED with *contents a new array of
     * ResourceContents ({uri, mimeType, text} or {uri, mimeType, blob}),
     * NOT_PROVIDED for a URI it does not serve, FAILED with err. */
    int (*read)(const char *uri, json_t **contents, char *err, size_t errlen);
    /* Whether uri may be subscribed to (resources/subscribe, unsubscribe);
     * the provider then calls sbx_mcp_resource_updated() when it changes.
     * NULL: none may. */
    int (*subscribable)(const char *uri);
    /* prompts/get of one of its prompts with args (an object of strings,
     * borrowed): PROVIDED with *result a new GetPromptResult
     * ({description, messages: [...]}), or FAILED with err (-32602). */
    int (*get)(const char *prompt, const json_t *args, json_t **result, char *err, size_t errlen);
    /* completion/complete of argument arg of one of its prompts: PROVIDED
     * with *values a new array of candidate strings (the server keeps
     * those that start with what was typed, at most 100), or
     * NOT_PROVIDED: none.  NULL: none for any argument. */
    int (*complete)(const char *prompt, const char *arg, json_t **values);
};

struct sbx_mcp_config {
    const struct sbx_mcp_tool *tools;
    size_t ntools;
    struct sbx *sbx;            /* passed to every operation, borrowed */
    const char *const *presets; /* NULL-terminated; NULL means none */
    const char *const *secrets; /* for SBX_MCP_TOOL_MCP_SECRETS tools; as presets */
    const char *const *sizes;   /* the sandbox sizes, for completion; NULL-terminated */
    const char *owner;          /* for SBX_MCP_TOOL_SETS_OWNER tools */
    const char *version;        /* serverInfo.version */
    FILE *log;                  /* the one line per tool call; NULL: stderr */
    /* Optional: lets fn(arg, event) hear the steps of sbx's operations (fn
     * NULL: no one); mcp.c sets sbx_progress_set.  Without it no tool
     * sends notifications/progress. */
    void (*progress_set)(struct sbx *s, sbx_progress_fn fn, void *arg);
    /* Optional: a struct sbx for one call of an SBX_MCP_TOOL_OWN_SBX tool,
     * made from sbx (NULL with err when it cannot be), and its release.
     * Without them such tools run under the operation lock as others do. */
    struct sbx *(*sbx_sibling)(struct sbx *s, char *err, size_t errlen);
    void (*sbx_sibling_free)(struct sbx *own);
    /* Optional: the operations behind resources and completion (list,
     * denials; borrowed).  NULL: no resources are offered. */
    const struct sbx_mcp_ops *ops;
    /* Optional: more resources and prompts (borrowed; they must outlive
     * the server).  With resources or templates among them the server
     * offers resources even without ops. */
    const struct sbx_mcp_provider *providers;
    size_t nproviders;
};

/* logging/setLevel's levels (RFC 5424 severities, least severe first);
 * a session's log_level is one of them plus one, or 0 (the default) for
 * "send no notifications/message". */
enum sbx_mcp_log_level {
    SBX_MCP_LOG_DEBUG,
    SBX_MCP_LOG_INFO,
    SBX_MCP_LOG_NOTICE,
    SBX_MCP_LOG_WARNING,
    SBX_MCP_LOG_ERROR,
    SBX_MCP_LOG_CRITICAL,
    SBX_MCP_LOG_ALERT,
    SBX_MCP_LOG_EMERGENCY,
};

/* What one client connection has negotiated (one per stdio run, one per
 * HTTP session).  The transport owns it and keeps it at one address from
 * initialize until it calls sbx_mcp_session_end() (it is never copied);
 * starts zeroed but for the transport's functions. */
struct sbx_mcp_server;

struct sbx_mcp_session {
    char version[16];    /* negotiated protocol version; "" before initialize */
    int initialize_seen; /* an initialize request was answered */
    int initialized;     /* notifications/initialized arrived */
    /* Optional, set by the transport: sends msg (stolen), a notification,
     * to the client before the answer to the request being handled, from
     * the thread handling it.  NULL when the transport cannot (then no
     * notifications/progress or notifications/message). */
    void (*notify)(void *arg, json_t *msg);
    void *notify_arg;
    /* Optional, set by the transport: sends msg (stolen), a notification
     * tied to no request (resources/updated, resources/list_changed), from
     * any thread.  Called under the server's session lock: it must not
     * block for long nor call back into the server.  NULL: dropped. */
    void (*deliver)(void *arg, json_t *msg);
    void *deliver_arg;
    /* Kept by the server under its session lock (mcp_sessions.c): */
    int log_level;                /* enum sbx_mcp_log_level + 1; 0: no log messages */
    json_t *subscriptions;        /* object: subscribed URI -> true; NULL: none */
    json_t *client_caps;          /* initialize's params.capabilities, or NULL */
    struct sbx_mcp_session *next; /* the server's registry of live sessions */
    int attached;                 /* in the registry (from initialize) */
    struct sbx_mcp_server *srv;   /* the server it was initialized with */
    /* Optional, set by the transport: sends msg (stolen), a request from
     * the server to the client tied to the request being handled (the
     * thread handling it calls it).  Returns 0, or -1 when the client
     * cannot be reached that way (an HTTP POST that asked for JSON only).
     * NULL: no server-to-client requests. */
    int (*send_request)(void *arg, json_t *msg);
    void *send_request_arg;
    int closed; /* the client can answer no more (stdin ended): waits end */
};

/* What the client answered an elicitation. */
enum sbx_mcp_elicit_action {
    SBX_MCP_ELICIT_ERROR = -1, /* no answer: err says why */
    SBX_MCP_ELICIT_ACCEPT,     /* *content holds what the user gave */
    SBX_MCP_ELICIT_DECLINE,
    SBX_MCP_ELICIT_CANCEL,
};

/* Asks the client of sess, from a tool's thread while it handles the
 * tool's request, to have its user fill in requested_schema (borrowed;
 * a flat object schema) after reading message: sends elicitation/create
 * (over HTTP on that request's event stream; over stdio on stdout) and
 * waits up to timeout_ms for the answer.  Returns its action (accept with
 * a new reference in *content, else *content NULL), or
 * SBX_MCP_ELICIT_ERROR with err filled: the client declared no
 * elicitation capability, the request could not be sent, the client
 * answered an error, the time ran out or the client went away. */
int sbx_mcp_elicit(struct sbx_mcp_session *sess, const char *message, json_t *requested_schema,
                   int timeout_ms, json_t **content, char *err, size_t errlen);

/* The client of sess can answer no more (its input ended): every wait of
 * sbx_mcp_elicit on it ends at once. */
void sbx_mcp_session_close(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess);

/* The session whose tool call this thread is running (inside a tool's
 * operation), else NULL: for operations that elicit. */
struct sbx_mcp_session *sbx_mcp_current_session(void);

/* Sends sess, from a tool's thread while it runs the tool's call, a
 * notifications/message at level with logger (NULL: "sandboxctl") and
 * data the formatted text, when the session's level (logging/setLevel)
 * lets it through; else nothing. */
void sbx_mcp_session_log(struct sbx_mcp_session *sess, enum sbx_mcp_log_level level,
                         const char *logger, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The progressToken of the tools/call this thread is running (borrowed;
 * valid until the tool's function returns), or NULL when the client
 * asked for no progress or no call is running. */
const json_t *sbx_mcp_current_progress_token(void);

/* From a tool's thread while it runs the call: one notifications/progress
 * with the call's token to sess, with progress (which must grow from one
 * notification to the next), total (< 0: unknown, left out) and message
 * (NULL: none).  Returns 0 when sent, -1 when the call has no token or
 * the transport cannot send notifications. */
int sbx_mcp_session_progress(struct sbx_mcp_session *sess, double progress, double total,
                             const char *message);

/* A provider's resource uri changed: notifications/resources/updated goes
 * to every session subscribed to it.  Any thread. */
void sbx_mcp_resource_updated(struct sbx_mcp_server *srv, const char *uri);

/* Ends sess: takes it out of the server's registry (no more notifications
 * reach it) and frees what the server kept in it.  The transport calls it
 * once when the session ends (stdin's end, DELETE, eviction), before the
 * memory goes; a session never initialized is fine. */
void sbx_mcp_session_end(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess);

/* One request's notifications/progress (mcp_progress.c): the session they
 * go to, the request's progressToken (borrowed; NULL: none asked) and the
 * last value sent; each step also goes out as a debug notifications/message
 * when the session's level lets it through. */
struct sbx_mcp_progress {
    struct sbx_mcp_session *sess;
    const json_t *token;
    double last;
    const char *tool; /* the tool running, for the log messages */
    struct sbx_mcp_server *srv;
};

/* An sbx_progress_fn: arg is a struct sbx_mcp_progress whose session has
 * a notify function; sends one notifications/progress for ev (with a
 * token) and one debug notifications/message (at that level). */
void sbx_mcp_progress_event(void *arg, const struct sbx_progress_event *ev);

/* Builds a server over cfg->tools (copied by reference: the table and the
 * strings must outlive the server).  Returns NULL and fills err when a
 * tool's JSON is malformed or its schema is not an object schema. */
struct sbx_mcp_server *sbx_mcp_server_new(const struct sbx_mcp_config *cfg, char *err,
                                          size_t errlen);

/* Frees the server; NULL is a no-op. */
void sbx_mcp_server_free(struct sbx_mcp_server *srv);

/* Parses one JSON-RPC message from buf.  Returns 0 and a new reference in
 * *msg, or -1 and in *reply the error response to send (-32700 parse error,
 * -32600 for a batch or anything that is not a JSON-RPC 2.0 object). */
int sbx_mcp_parse(const char *buf, size_t len, json_t **msg, json_t **reply);

/* Handles one parsed message (borrowed).  Returns the response to a request
 * (a new reference), or NULL for a notification or a response, which get
 * none.  Thread-safe for distinct sessions; the operations themselves are
 * called one at a time, except the tools with SBX_MCP_TOOL_OWN_SBX. */
json_t *sbx_mcp_handle(struct sbx_mcp_server *srv, struct sbx_mcp_session *sess, json_t *msg);

/* The protocol version to answer to a client that asks for `asked`: asked
 * itself when we support it, else our latest. */
const char *sbx_mcp_version_negotiate(const char *asked);

/* 1 when v is a protocol version we support, else 0. */
int sbx_mcp_version_supported(const char *v);

/* Checks args against an object schema of the subset our tools use (type,
 * properties, required, additionalProperties: false, enum, items, minimum,
 * maximum, minLength, minItems).  Returns 0, or -1 with err naming the
 * argument and what was expected. */
int sbx_mcp_args_check(const json_t *schema, const json_t *args, char *err, size_t errlen);

/* The request_access tool's function (mcp_access.c): files an access
 * request and, for a host the owner may approve, asks them through the
 * client.  Runs inside a tool call of the server (SBX_MCP_TOOL_UNLOCKED);
 * the sbx_op_fn contract. */
int sbx_mcp_request_access(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);

/* Fills tools[] with the sandbox tools bound to ops; returns how many (at
 * most cap). */
size_t sbx_mcp_tools_sandbox(const struct sbx_mcp_ops *ops, struct sbx_mcp_tool *tools, size_t cap);

/* Transports.  Both return the process exit status. */

/* Serves newline-delimited JSON-RPC on in_fd/out_fd until in_fd ends. */
int sbx_mcp_stdio_run(struct sbx_mcp_server *srv, int in_fd, int out_fd);

struct sbx_mcp_http_opts {
    const char *listen;    /* "127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT" */
    const char *token;     /* bearer token; never NULL or empty */
    const char *port_file; /* optional: the bound port is written here */
    /* Deadlines in ms (0: the defaults, 60 s / 10 s / 30 s): for the next
     * request on a kept-alive connection, for a started request head, for a
     * body. */
    int idle_ms, head_ms, body_ms;
    /* Optional: called by each connection's thread as it ends, before the
     * server counts it gone: the embedding program frees its libraries'
     * per-thread state there (sandboxctl: OpenSSL's, which the tools'
     * Proxmox calls made), so none is left when a stop lets the process
     * exit. */
    void (*thread_end)(void);
};

/* Serves Streamable HTTP on opts->listen until SIGINT or SIGTERM.  Returns 0
 * after a clean stop, 1 when it could not listen (message on stderr). */
int sbx_mcp_http_run(struct sbx_mcp_server *srv, const struct sbx_mcp_http_opts *opts);

/* Reads the bearer token from path: the first line, without surrounding
 * blanks, at least 16 bytes.  Returns a malloc'd string, or NULL with err
 * filled. */
char *sbx_mcp_token_read(const char *path, char *err, size_t errlen);

/* Compares a and b in time that depends only on their lengths, not on where
 * they differ.  Returns 1 when equal. */
int sbx_mcp_token_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif
