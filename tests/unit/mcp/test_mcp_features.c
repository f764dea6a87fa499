/* test_mcp_features.c - the MCP methods beyond tools, with test-only
 * operations: initialize's capabilities, logging/setLevel and the level
 * filter of notifications/message, progress of run_command's "run" step,
 * resources (list, templates, read, subscribe and the notifications a
 * tool's change sends to subscribed sessions only), prompts, completion,
 * the session registry, the HTTP session table and the SSE framing, and
 * elicitation (a test-only tool asks; answers come from another thread). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_ops.h"
#include "mcp_http.h"
#include "mcp_http_session.h"
#include "probe.h"
#include "tap.h"

static const char *const presets[] = {"balanced", "locked", NULL};
static const char *const sizes[] = {"small", "medium", "large", NULL};

static struct sbx_mcp_tool tools[16];

static struct sbx_mcp_server *server(const struct sbx_mcp_ops *ops, const char *const *p)
{
    char err[256];
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&fake_ops, tools, 16),
        .presets = p,
        .sizes = sizes,
        .owner = "owner-from-config",
        .version = "9.9.9",
        .progress_set = fake_progress_set,
        .ops = ops,
    };
    struct sbx_mcp_server *s = sbx_mcp_server_new(&cfg, err, sizeof err);

    if (!s)
        diag("server_new: %s", err);
    return s;
}

static void initialize(struct sbx_mcp_server *srv, struct probe *p)
{
    req_quiet(srv, p, "initialize",
              "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"elicitation\":{}}}");
}

/* tools/call of tool with arguments; the reply is dropped. */
static void call(struct sbx_mcp_server *srv, struct probe *p, const char *tool, const char *args)
{
    char buf[1024];

    snprintf(buf, sizeof buf, "{\"name\":\"%s\",\"arguments\":%s}", tool, args);
    req_quiet(srv, p, "tools/call", buf);
}

/* How many of msgs have method (and, when level is set, params.level). */
static size_t count(const json_t *msgs, const char *method, const char *level)
{
    size_t i, n = 0;
    json_t *m;

    json_array_foreach(msgs, i, m)
    {
        const json_t *params = json_object_get(m, "params");
        const char *l = json_string_value(json_object_get(params, "level"));

        if (strcmp(sv(json_object_get(m, "method")), method) == 0 &&
            (!level || (l && strcmp(l, level) == 0)))
            n++;
    }
    return n;
}

/* Whether some notifications/message in msgs has data containing text. */
static int logged(const json_t *msgs, const char *text)
{
    size_t i;
    json_t *m;

    json_array_foreach(msgs, i, m)
    {
        const char *d = json_string_value(json_object_get(json_object_get(m, "params"), "data"));

        if (d && strstr(d, text))
            return 1;
    }
    return 0;
}

static void test_capabilities(struct sbx_mcp_server *srv)
{
    struct probe p;
    json_t *r, *caps;

    probe_init(&p);
    r = req(srv, &p, "initialize",
            "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{\"elicitation\":{}}}");
    caps = json_object_get(result_of(r), "capabilities");
    ok(json_is_object(json_object_get(caps, "logging")) &&
           json_is_object(json_object_get(caps, "prompts")) &&
           json_is_object(json_object_get(caps, "completions")) &&
           json_is_object(json_object_get(caps, "tools")),
       "initialize declares tools, logging, prompts and completions");
    ok(json_is_true(json_object_get(json_object_get(caps, "resources"), "subscribe")) &&
           json_is_true(json_object_get(json_object_get(caps, "resources"), "listChanged")),
       "resources with subscribe and listChanged");
    ok(p.s.attached && json_is_object(json_object_get(p.s.client_caps, "elicitation")),
       "the session joined the registry and keeps the client's capabilities");
    json_decref(r);
    probe_end(srv, &p);
    ok(!p.s.attached && !p.s.client_caps, "sbx_mcp_session_end: out of the registry, caps freed");
}

static void test_set_level(struct sbx_mcp_server *srv)
{
    static const char *const levels[] = {"debug", "info",     "notice", "warning",
                                         "error", "critical", "alert",  "emergency"};
    struct probe p;
    json_t *r;
    int all = 1;

    probe_init(&p);
    initialize(srv, &p);
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        char params[64];

        snprintf(params, sizeof params, "{\"level\":\"%s\"}", levels[i]);
        r = req(srv, &p, "logging/setLevel", params);
        all &= json_is_object(result_of(r)) && json_object_size(result_of(r)) == 0 &&
               p.s.log_level == (int)i + 1;
        json_decref(r);
    }
    ok(all, "logging/setLevel takes each of the eight RFC 5424 levels and answers {}");
    r = req(srv, &p, "logging/setLevel", "{\"level\":\"verbose\"}");
    ok(error_code(r) == -32602 && p.s.log_level == 8, "an unknown level: -32602, level kept");
    json_decref(r);
    r = req(srv, &p, "logging/setLevel", "{}");
    ok(error_code(r) == -32602, "no level: -32602");
    json_decref(r);
    probe_end(srv, &p);
}

static void test_log_messages(struct sbx_mcp_server *srv)
{
    struct probe p;
    json_t *m;

    probe_init(&p);
    initialize(srv, &p);
    call(srv, &p, "create_server",
         "{\"name\":\"logbox\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    call(srv, &p, "run_command", "{\"name\":\"logbox\",\"command\":[\"echo\",\"hi\"]}");
    ok(json_array_size(p.notified) == 0, "before logging/setLevel: no notifications/message");

    req_quiet(srv, &p, "logging/setLevel", "{\"level\":\"info\"}");
    call(srv, &p, "run_command", "{\"name\":\"logbox\",\"command\":[\"echo\",\"hi\"]}");
    m = json_array_get(p.notified, 0);
    ok(count(p.notified, "notifications/message", "info") == 2 &&
           json_array_size(p.notified) == 2 && logged(p.notified, "run_command started") &&
           logged(p.notified, "run_command done after") &&
           strcmp(sv(json_object_get(json_object_get(m, "params"), "logger")), "sandboxctl") == 0,
       "level info: the tool's start and end at info, logger sandboxctl, no debug steps");
    probe_clear(&p);
    call(srv, &p, "run_command", "{\"name\":\"nobox\",\"command\":[\"echo\",\"hi\"]}");
    ok(count(p.notified, "notifications/message", "error") == 1 &&
           logged(p.notified, "run_command failed after") && logged(p.notified, "nobox"),
       "a failing tool: an error message with the reason");

    req_quiet(srv, &p, "logging/setLevel", "{\"level\":\"debug\"}");
    probe_clear(&p);
    call(srv, &p, "run_command", "{\"name\":\"logbox\",\"command\":[\"echo\",\"hi\"]}");
    ok(count(p.notified, "notifications/message", "debug") == 3 &&
           logged(p.notified, "run_command: run: started") &&
           logged(p.notified, "run_command: run: running for 3.0 s") &&
           count(p.notified, "notifications/progress", NULL) == 0,
       "level debug: each step event at debug too; no progress without a token");

    req_quiet(srv, &p, "logging/setLevel", "{\"level\":\"error\"}");
    probe_clear(&p);
    call(srv, &p, "run_command", "{\"name\":\"logbox\",\"command\":[\"echo\",\"hi\"]}");
    call(srv, &p, "run_command", "{\"name\":\"logbox\"}");
    ok(json_array_size(p.notified) == 1 && logged(p.notified, "run_command refused"),
       "level error: only the refused call's message");
    call(srv, &p, "destroy_server", "{\"name\":\"logbox\"}");
    probe_end(srv, &p);
}

static void test_run_progress(struct sbx_mcp_server *srv)
{
    struct probe p;
    json_t *r, *msgs;
    const char *m0, *m1, *m2;

    probe_init(&p);
    initialize(srv, &p);
    call(srv, &p, "create_server",
         "{\"name\":\"runbox\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    probe_clear(&p);
    r = req(srv, &p, "tools/call",
            "{\"name\":\"run_command\",\"_meta\":{\"progressToken\":\"t1\"},"
            "\"arguments\":{\"name\":\"runbox\",\"command\":[\"echo\",\"x\"]}}");
    msgs = p.notified;
#define MSG(i)                                                                                     \
    json_string_value(                                                                             \
        json_object_get(json_object_get(json_array_get(msgs, i), "params"), "message"))
    m0 = MSG(0);
    m1 = MSG(1);
    m2 = MSG(2);
#undef MSG
    ok(json_array_size(msgs) == 3 && count(msgs, "notifications/progress", NULL) == 3 && m0 && m1 &&
           m2 && strncmp(m0, "run: started", 12) == 0 &&
           strncmp(m1, "run: running for 3.0 s", 22) == 0 && strncmp(m2, "run: done in", 12) == 0 &&
           !json_object_get(json_object_get(json_array_get(msgs, 1), "params"), "total"),
       "run_command with a token: start, tick (running for ...), end, no total");
    ok(json_is_false(json_object_get(result_of(r), "isError")), "and its result");
    json_decref(r);
    call(srv, &p, "destroy_server", "{\"name\":\"runbox\"}");
    probe_end(srv, &p);
}

/* The text of a resources/read result's first content, parsed. */
static json_t *read_json(const json_t *reply)
{
    const json_t *c = json_array_get(json_object_get(result_of(reply), "contents"), 0);
    const char *text = json_string_value(json_object_get(c, "text"));

    return text ? json_loads(text, 0, NULL) : NULL;
}

static void test_resources(struct sbx_mcp_server *srv)
{
    struct probe p;
    json_t *r, *list, *j;
    const char *uri0, *uri1;

    probe_init(&p);
    initialize(srv, &p);
    call(srv, &p, "create_server",
         "{\"name\":\"res-a\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    call(srv, &p, "create_server",
         "{\"name\":\"res-b\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    r = req(srv, &p, "resources/list", "{}");
    list = json_object_get(result_of(r), "resources");
    uri0 = json_string_value(json_object_get(json_array_get(list, 0), "uri"));
    uri1 = json_string_value(json_object_get(json_array_get(list, 1), "uri"));
    ok(json_array_size(list) == 2 && uri0 && uri1 &&
           ((strcmp(uri0, "sandbox://res-a/info") == 0 &&
             strcmp(uri1, "sandbox://res-b/info") == 0) ||
            (strcmp(uri1, "sandbox://res-a/info") == 0 &&
             strcmp(uri0, "sandbox://res-b/info") == 0)) &&
           strcmp(sv(json_object_get(json_array_get(list, 0), "mimeType")), "application/json") ==
               0,
       "resources/list: sandbox://NAME/info of each sandbox, application/json");
    json_decref(r);
    r = req(srv, &p, "resources/list", "{\"cursor\":\"x\"}");
    ok(error_code(r) == -32602, "resources/list with a cursor: -32602");
    json_decref(r);

    r = req(srv, &p, "resources/templates/list", "{}");
    list = json_object_get(result_of(r), "resourceTemplates");
    ok(json_array_size(list) == 2 &&
           strcmp(sv(json_object_get(json_array_get(list, 0), "uriTemplate")),
                  "sandbox://{name}/info") == 0 &&
           strcmp(sv(json_object_get(json_array_get(list, 1), "uriTemplate")),
                  "sandbox://{name}/denials") == 0,
       "resources/templates/list: the info and denials templates");
    json_decref(r);

    r = req(srv, &p, "resources/read", "{\"uri\":\"sandbox://res-b/info\"}");
    j = read_json(r);
    ok(j && strcmp(sv(json_object_get(j, "name")), "res-b") == 0 &&
           strcmp(sv(json_object_get(j, "owner")), "owner-from-config") == 0 &&
           strcmp(sv(json_object_get(json_array_get(json_object_get(result_of(r), "contents"), 0),
                                     "uri")),
                  "sandbox://res-b/info") == 0,
       "resources/read info: the sandbox's list entry as JSON text, with its uri");
    json_decref(j);
    json_decref(r);
    r = req(srv, &p, "resources/read", "{\"uri\":\"sandbox://res-a/denials\"}");
    j = read_json(r);
    ok(j && json_array_size(json_object_get(j, "denials")) == 2 &&
           strcmp(sv(json_object_get(j, "name")), "res-a") == 0 &&
           strcmp(sv(json_object_get(fake_last_args, "name")), "res-a") == 0,
       "resources/read denials: the denials operation's answer for that name");
    json_decref(j);
    json_decref(r);
    r = req(srv, &p, "resources/read", "{\"uri\":\"sandbox://nobox/info\"}");
    ok(error_code(r) == -32002 &&
           strcmp(sv(json_object_get(json_object_get(json_object_get(r, "error"), "data"), "uri")),
                  "sandbox://nobox/info") == 0,
       "resources/read of a sandbox that does not exist: -32002 with the uri in data");
    json_decref(r);
    r = req(srv, &p, "resources/read", "{\"uri\":\"file:///etc/passwd\"}");
    ok(error_code(r) == -32002, "resources/read of another scheme: -32002");
    json_decref(r);
    r = req(srv, &p, "resources/read", "{\"uri\":\"sandbox://res-a/secrets\"}");
    ok(error_code(r) == -32002, "resources/read of sandbox://NAME/other: -32002");
    json_decref(r);
    r = req(srv, &p, "resources/read", "{}");
    ok(error_code(r) == -32602, "resources/read without uri: -32602");
    json_decref(r);
    call(srv, &p, "destroy_server", "{\"name\":\"res-a\"}");
    call(srv, &p, "destroy_server", "{\"name\":\"res-b\"}");
    probe_end(srv, &p);
}

static void test_no_denials(void)
{
    struct sbx_mcp_ops ops = fake_ops;
    struct sbx_mcp_server *srv;
    struct probe p;
    json_t *r;

    ops.denials = NULL;
    srv = server(&ops, presets);
    probe_init(&p);
    initialize(srv, &p);
    call(srv, &p, "create_server",
         "{\"name\":\"nd\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    r = req(srv, &p, "resources/templates/list", "{}");
    ok(json_array_size(json_object_get(result_of(r), "resourceTemplates")) == 1,
       "without a denials operation: only the info template");
    json_decref(r);
    r = req(srv, &p, "resources/read", "{\"uri\":\"sandbox://nd/denials\"}");
    ok(error_code(r) == -32002, "and reading a denials URI is -32002");
    json_decref(r);
    call(srv, &p, "destroy_server", "{\"name\":\"nd\"}");
    probe_end(srv, &p);
    sbx_mcp_server_free(srv);

    srv = server(NULL, presets);
    probe_init(&p);
    r = req(srv, &p, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    ok(!json_object_get(json_object_get(result_of(r), "capabilities"), "resources"),
       "without operations: no resources capability");
    json_decref(r);
    r = req(srv, &p, "resources/list", "{}");
    ok(error_code(r) == -32601, "and resources/list is -32601");
    json_decref(r);
    probe_end(srv, &p);
    sbx_mcp_server_free(srv);
}

static void test_subscriptions(struct sbx_mcp_server *srv)
{
    struct probe a, b;
    json_t *r, *m;

    probe_init(&a);
    probe_init(&b);
    initialize(srv, &a);
    initialize(srv, &b);
    r = req(srv, &a, "resources/subscribe", "{\"uri\":\"http://example/x\"}");
    ok(error_code(r) == -32602, "subscribe to another scheme: -32602");
    json_decref(r);
    r = req(srv, &a, "resources/subscribe", "{\"uri\":\"sandbox:///info\"}");
    ok(error_code(r) == -32602, "subscribe to a malformed sandbox URI: -32602");
    json_decref(r);
    r = req(srv, &a, "resources/subscribe", "{}");
    ok(error_code(r) == -32602, "subscribe without uri: -32602");
    json_decref(r);
    r = req(srv, &a, "resources/subscribe", "{\"uri\":\"sandbox://sub-a/info\"}");
    ok(json_is_object(result_of(r)), "subscribe to a sandbox that does not exist yet: {}");
    json_decref(r);

    call(srv, &b, "create_server",
         "{\"name\":\"sub-a\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    m = json_array_get(a.delivered, 0);
    ok(count(a.delivered, "notifications/resources/updated", NULL) == 1 &&
           strcmp(sv(json_object_get(json_object_get(m, "params"), "uri")),
                  "sandbox://sub-a/info") == 0 &&
           count(a.delivered, "notifications/resources/list_changed", NULL) == 1,
       "another session's create_server: the subscriber gets updated for its uri and "
       "list_changed");
    ok(count(b.delivered, "notifications/resources/updated", NULL) == 0 &&
           count(b.delivered, "notifications/resources/list_changed", NULL) == 1,
       "the session not subscribed: list_changed only");
    probe_clear(&a);
    probe_clear(&b);
    call(srv, &b, "extend_server", "{\"name\":\"sub-a\",\"duration\":\"1h\"}");
    ok(json_array_size(a.delivered) == 1 &&
           count(a.delivered, "notifications/resources/updated", NULL) == 1 &&
           json_array_size(b.delivered) == 0,
       "extend_server: updated to the subscriber only, no list_changed");
    probe_clear(&a);
    call(srv, &b, "run_command", "{\"name\":\"sub-a\",\"command\":[\"echo\"]}");
    call(srv, &b, "extend_server", "{\"name\":\"nobox\",\"duration\":\"1h\"}");
    ok(json_array_size(a.delivered) == 0, "a tool that changes nothing, or fails: nothing sent");
    r = req(srv, &a, "resources/unsubscribe", "{\"uri\":\"sandbox://sub-a/info\"}");
    json_decref(r);
    call(srv, &b, "snapshot_server", "{\"name\":\"sub-a\",\"label\":\"s1\"}");
    ok(json_array_size(a.delivered) == 0, "after unsubscribe: no updated");
    req_quiet(srv, &a, "resources/subscribe", "{\"uri\":\"sandbox://sub-a/info\"}");
    {
        char params[64];
        int refused = -1;
        for (int i = 0; i < 300 && refused < 0; i++) {
            snprintf(params, sizeof params, "{\"uri\":\"sandbox://cap-%d/info\"}", i);
            r = req(srv, &a, "resources/subscribe", params);
            if (error_code(r) == -32602)
                refused = i;
            json_decref(r);
        }
        /* sub-a and cap-0 .. cap-254 make 256 */
        ok(refused == 255, "a session's 257th subscription is refused (-32602; at %d)", refused);
        r = req(srv, &a, "resources/subscribe", "{\"uri\":\"sandbox://sub-a/info\"}");
        ok(json_is_object(result_of(r)), "subscribing again to one it has is still fine");
        json_decref(r);
    }
    sbx_mcp_session_end(srv, &a.s);
    call(srv, &b, "destroy_server", "{\"name\":\"sub-a\"}");
    ok(json_array_size(a.delivered) == 0 &&
           count(b.delivered, "notifications/resources/list_changed", NULL) == 1,
       "an ended session hears nothing; destroy_server sends list_changed");
    probe_end(srv, &a);
    probe_end(srv, &b);
}

static void test_prompts(struct sbx_mcp_server *srv)
{
    struct probe p;
    json_t *r, *list;
    const char *text;

    probe_init(&p);
    initialize(srv, &p);
    r = req(srv, &p, "prompts/list", "{}");
    list = json_object_get(result_of(r), "prompts");
    ok(json_array_size(list) == 2 &&
           strcmp(sv(json_object_get(json_array_get(list, 0), "name")), "sandbox_task") == 0 &&
           json_is_true(json_object_get(
               json_array_get(json_object_get(json_array_get(list, 0), "arguments"), 0),
               "required")),
       "prompts/list: sandbox_task (task required) and review_changes");
    json_decref(r);
#define TEXT(r)                                                                                    \
    json_string_value(json_object_get(                                                             \
        json_object_get(json_array_get(json_object_get(result_of(r), "messages"), 0), "content"),  \
        "text"))
    r = req(srv, &p, "prompts/get",
            "{\"name\":\"sandbox_task\",\"arguments\":{\"task\":\"build libfoo\","
            "\"policy\":\"locked\"}}");
    text = TEXT(r);
    ok(text && strstr(text, "build libfoo") && strstr(text, "policy \"locked\"") &&
           strstr(text, "destroy_server"),
       "prompts/get sandbox_task: the task, the chosen policy, and destroy_server at the end");
    json_decref(r);
    r = req(srv, &p, "prompts/get", "{\"name\":\"sandbox_task\",\"arguments\":{\"task\":\"t\"}}");
    text = TEXT(r);
    ok(text && strstr(text, "policy \"balanced\"") && strstr(text, "size \"small\""),
       "without policy or size: the first preset and the first size");
    json_decref(r);
    r = req(srv, &p, "prompts/get",
            "{\"name\":\"sandbox_task\",\"arguments\":{\"task\":\"t\",\"size\":\"medium\"}}");
    text = TEXT(r);
    ok(text && strstr(text, "size \"medium\""), "with size medium: that size");
    json_decref(r);
    r = req(srv, &p, "prompts/get",
            "{\"name\":\"sandbox_task\",\"arguments\":{\"task\":\"t\",\"size\":\"huge\"}}");
    ok(error_code(r) == -32602, "a size that is not configured: -32602");
    json_decref(r);
    r = req(srv, &p, "prompts/get",
            "{\"name\":\"review_changes\",\"arguments\":{\"name\":\"bx\"}}");
    text = TEXT(r);
    ok(text && strstr(text, "sandbox://bx/info") && strstr(text, "git diff"),
       "prompts/get review_changes: names the sandbox's resources and what to look at");
    json_decref(r);
#undef TEXT
    r = req(srv, &p, "prompts/get", "{\"name\":\"nope\"}");
    ok(error_code(r) == -32602, "unknown prompt: -32602");
    json_decref(r);
    r = req(srv, &p, "prompts/get", "{\"name\":\"sandbox_task\",\"arguments\":{}}");
    ok(error_code(r) == -32602, "missing required argument: -32602");
    json_decref(r);
    r = req(srv, &p, "prompts/get",
            "{\"name\":\"sandbox_task\",\"arguments\":{\"task\":\"t\",\"policy\":\"open\"}}");
    ok(error_code(r) == -32602, "a policy that is not a permitted preset: -32602");
    json_decref(r);
    probe_end(srv, &p);
}

/* completion/complete's values as "a,b,c". */
static void values_text(const json_t *reply, char *buf, size_t len)
{
    const json_t *v = json_object_get(json_object_get(result_of(reply), "completion"), "values");
    size_t i, off = 0;
    json_t *x;

    buf[0] = '\0';
    json_array_foreach(v, i, x) off +=
        (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", json_string_value(x));
}

static void test_complete(struct sbx_mcp_server *srv)
{
    static const char *const many[] = {
        "p000", "p001", "p002", "p003", "p004", "p005", "p006", "p007", "p008", "p009", "p010",
        "p011", "p012", "p013", "p014", "p015", "p016", "p017", "p018", "p019", "p020", "p021",
        "p022", "p023", "p024", "p025", "p026", "p027", "p028", "p029", "p030", "p031", "p032",
        "p033", "p034", "p035", "p036", "p037", "p038", "p039", "p040", "p041", "p042", "p043",
        "p044", "p045", "p046", "p047", "p048", "p049", "p050", "p051", "p052", "p053", "p054",
        "p055", "p056", "p057", "p058", "p059", "p060", "p061", "p062", "p063", "p064", "p065",
        "p066", "p067", "p068", "p069", "p070", "p071", "p072", "p073", "p074", "p075", "p076",
        "p077", "p078", "p079", "p080", "p081", "p082", "p083", "p084", "p085", "p086", "p087",
        "p088", "p089", "p090", "p091", "p092", "p093", "p094", "p095", "p096", "p097", "p098",
        "p099", "p100", "p101", "p102", NULL};
    struct sbx_mcp_server *big;
    struct probe p;
    char buf[2048];
    json_t *r;

    probe_init(&p);
    initialize(srv, &p);
    call(srv, &p, "create_server",
         "{\"name\":\"web-1\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    call(srv, &p, "create_server",
         "{\"name\":\"db-1\",\"size\":\"small\",\"lifetime\":\"1h\",\"policy\":\"locked\"}");
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"policy\",\"value\":\"b\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "balanced") == 0 &&
           json_is_false(json_object_get(json_object_get(result_of(r), "completion"), "hasMore")) &&
           json_integer_value(
               json_object_get(json_object_get(result_of(r), "completion"), "total")) == 1,
       "policy 'b': balanced (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"policy\",\"value\":\"\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "balanced,locked") == 0, "policy '': every preset (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"size\",\"value\":\"m\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "medium") == 0, "size 'm': medium (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"size\",\"value\":\"\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "small,medium,large") == 0, "size '': every size (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"review_changes\"},"
            "\"argument\":{\"name\":\"name\",\"value\":\"we\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "web-1") == 0, "review_changes name 'we': web-1 (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"sandbox://{name}/info\"},"
            "\"argument\":{\"name\":\"name\",\"value\":\"\"}}");
    values_text(r, buf, sizeof buf);
    ok(strcmp(buf, "db-1,web-1") == 0 || strcmp(buf, "web-1,db-1") == 0,
       "template variable name '': every sandbox (got %s)", buf);
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"task\",\"value\":\"x\"}}");
    values_text(r, buf, sizeof buf);
    ok(json_is_object(result_of(r)) && buf[0] == '\0', "task: no values");
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"nope\"},"
            "\"argument\":{\"name\":\"x\",\"value\":\"\"}}");
    ok(error_code(r) == -32602, "unknown prompt: -32602");
    json_decref(r);
    r = req(srv, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/resource\",\"uri\":\"file:///{x}\"},"
            "\"argument\":{\"name\":\"name\",\"value\":\"\"}}");
    ok(error_code(r) == -32602, "unknown template: -32602");
    json_decref(r);
    r = req(srv, &p, "completion/complete", "{\"ref\":{\"type\":\"ref/prompt\"}}");
    ok(error_code(r) == -32602, "no argument: -32602");
    json_decref(r);
    call(srv, &p, "destroy_server", "{\"name\":\"web-1\"}");
    call(srv, &p, "destroy_server", "{\"name\":\"db-1\"}");
    probe_end(srv, &p);

    big = server(&fake_ops, many);
    probe_init(&p);
    initialize(big, &p);
    r = req(big, &p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"policy\",\"value\":\"p\"}}");
    ok(json_array_size(json_object_get(json_object_get(result_of(r), "completion"), "values")) ==
               100 &&
           json_is_true(json_object_get(json_object_get(result_of(r), "completion"), "hasMore")) &&
           !json_object_get(json_object_get(result_of(r), "completion"), "total"),
       "103 matching presets: 100 values, hasMore, no total");
    json_decref(r);
    probe_end(big, &p);
    sbx_mcp_server_free(big);
}

static void test_sse_framing(void)
{
    json_t *m = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", "x");
    size_t n;
    char *ev = sbx_mcp_sse_event(m, &n);
    const char want[] = "26\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n\r\n";

    ok(ev && n == sizeof want - 1 && memcmp(ev, want, n) == 0,
       "an SSE event: one data line and a blank line, in one chunk of its hex length");
    free(ev);
    ev = sbx_mcp_sse_comment("keep-alive", &n);
    ok(ev && n == 19 && memcmp(ev, "e\r\n: keep-alive\n\n\r\n", n) == 0, "an SSE comment chunk");
    free(ev);
    json_decref(m);
}

static void test_http_sessions(struct sbx_mcp_server *srv)
{
    struct sbx_mcp_http_sessions *t = sbx_mcp_http_sessions_new(srv, 2, 3600);
    struct sbx_mcp_http_session *a = sbx_mcp_http_session_new(t), *b, *c, *f;
    char ida[SBX_MCP_HTTP_SESSION_ID_LEN + 1], idb[sizeof ida], idc[sizeof ida];
    json_t *q;
    int ended = 0;

    ok(sbx_mcp_http_session_add(t, a, ida) == 0 && strlen(ida) == 32, "a session gets a 32-hex id");
    sbx_mcp_http_session_release(t, a); /* the table keeps it */
    f = sbx_mcp_http_session_find(t, ida);
    ok(f == a, "find gives the same object, not a copy");
    sbx_mcp_http_session_mcp(f)->log_level = 3;
    sbx_mcp_http_session_release(t, f);
    f = sbx_mcp_http_session_find(t, ida);
    ok(f && sbx_mcp_http_session_mcp(f)->log_level == 3, "state kept in it lasts across requests");

    /* f holds a reference: a DELETE takes it out of the table, the object lives. */
    ok(sbx_mcp_http_session_delete(t, ida) == 0 && !sbx_mcp_http_session_find(t, ida) &&
           sbx_mcp_http_session_delete(t, ida) == -1,
       "DELETE: gone from the table; a second DELETE is unknown");
    ok(sbx_mcp_http_session_mcp(f)->log_level == 3, "a request still using it keeps it");
    q = sbx_mcp_http_session_stream_wait(t, f, 10, &ended);
    ok(ended && json_array_size(q) == 0, "its stream sees the end");
    json_decref(q);
    sbx_mcp_http_session_release(t, f);

    b = sbx_mcp_http_session_new(t);
    c = sbx_mcp_http_session_new(t);
    sbx_mcp_http_session_add(t, b, idb);
    sbx_mcp_http_session_release(t, b);
    ok(sbx_mcp_http_session_stream_open(t, b) == 0 && sbx_mcp_http_session_stream_open(t, b) == -1,
       "one GET stream per session");
    sbx_mcp_http_session_mcp(b)->deliver(sbx_mcp_http_session_mcp(b)->deliver_arg,
                                         json_pack("{s:s}", "method", "m1"));
    q = sbx_mcp_http_session_stream_wait(t, b, 10, &ended);
    ok(!ended && json_array_size(q) == 1, "deliver queues for the open stream");
    json_decref(q);
    sbx_mcp_http_session_stream_close(t, b);
    sbx_mcp_http_session_mcp(b)->deliver(sbx_mcp_http_session_mcp(b)->deliver_arg,
                                         json_pack("{s:s}", "method", "m2"));
    sbx_mcp_http_session_stream_open(t, b);
    q = sbx_mcp_http_session_stream_wait(t, b, 10, &ended);
    ok(json_array_size(q) == 0, "without an open stream a notification is dropped");
    json_decref(q);
    sbx_mcp_http_session_stream_close(t, b);
    sbx_mcp_http_session_add(t, c, idc);
    sbx_mcp_http_session_release(t, c);
    f = sbx_mcp_http_session_find(t, idb);
    ok(f == b, "two sessions fit a table of two");
    sbx_mcp_http_session_release(t, f);
    a = sbx_mcp_http_session_new(t);
    sbx_mcp_http_session_add(t, a, ida);
    sbx_mcp_http_session_release(t, a);
    ok(sbx_mcp_http_session_find(t, ida) == a, "a third one fits by ending one");
    sbx_mcp_http_session_release(t, a);
    sbx_mcp_http_sessions_free(t);
}

/* A session whose client elicits: what the server asks lands in asked. */
struct asker {
    struct probe p;
    pthread_mutex_t lock;
    pthread_cond_t got;
    json_t *asked;
    struct sbx_mcp_server *srv;
    const char *call; /* the tools/call params to run in the thread */
    json_t *reply;    /* its answer */
};

static int asker_send(void *arg, json_t *msg)
{
    struct asker *a = arg;

    pthread_mutex_lock(&a->lock);
    json_array_append_new(a->asked, msg);
    pthread_cond_signal(&a->got);
    pthread_mutex_unlock(&a->lock);
    return 0;
}

static void *asker_call(void *arg)
{
    struct asker *a = arg;

    a->reply = req(a->srv, &a->p, "tools/call", a->call);
    return NULL;
}

/* The id of the n-th request asked (waits up to 5 s), or NULL. */
static const char *asked_id(struct asker *a, size_t n, json_t **params)
{
    struct timespec until;
    const char *id = NULL;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&a->lock);
    while (json_array_size(a->asked) <= n && pthread_cond_timedwait(&a->got, &a->lock, &until) == 0)
        ;
    id = json_string_value(json_object_get(json_array_get(a->asked, n), "id"));
    *params = json_object_get(json_array_get(a->asked, n), "params");
    pthread_mutex_unlock(&a->lock);
    return id;
}

/* Runs tools/call params in a thread; answer (a JSON-RPC result or error
 * member text, with %s for the id) is sent as the client's response to the
 * first request asked, unless NULL.  Returns the call's reply. */
static json_t *elicit_round(struct asker *a, const char *params, const char *answer, json_t **asked)
{
    pthread_t t;
    char buf[512];
    const char *id;

    a->call = params;
    a->reply = NULL;
    json_array_clear(a->asked);
    pthread_create(&t, NULL, asker_call, a);
    id = asked_id(a, 0, asked);
    if (id && answer) {
        snprintf(buf, sizeof buf, answer, id);
        json_decref(rpc(a->srv, &a->p, buf));
    }
    pthread_join(t, NULL);
    return a->reply;
}

static const char *reply_text(const json_t *r)
{
    return sv(json_object_get(json_array_get(json_object_get(result_of(r), "content"), 0), "text"));
}

static void test_elicit(void)
{
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&fake_ops, tools, 16),
        .presets = presets,
        .owner = "o",
        .version = "1",
    };
    struct asker a = {.asked = json_array()};
    char err[256];
    json_t *r, *asked = NULL, *sc;

    tools[cfg.ntools++] = fake_confirm_tool;
    a.srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    pthread_mutex_init(&a.lock, NULL);
    pthread_cond_init(&a.got, NULL);
    probe_init(&a.p);
    a.p.s.send_request = asker_send;
    a.p.s.send_request_arg = &a;
    initialize(a.srv, &a.p); /* declares the elicitation capability */

    r = elicit_round(&a, "{\"name\":\"test_confirm\",\"arguments\":{\"question\":\"Delete it?\"}}",
                     "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"action\":\"accept\","
                     "\"content\":{\"confirm\":true}}}",
                     &asked);
    sc = json_object_get(result_of(r), "structuredContent");
    ok(asked && strcmp(sv(json_object_get(asked, "message")), "Delete it?") == 0 &&
           strcmp(sv(json_object_get(asked, "mode")), "form") == 0 &&
           json_is_object(json_object_get(json_object_get(asked, "requestedSchema"), "properties")),
       "the tool's thread sends elicitation/create with the message and the schema");
    ok(strcmp(sv(json_object_get(sc, "action")), "accept") == 0 &&
           json_is_true(json_object_get(json_object_get(sc, "content"), "confirm")),
       "the client's accept, handled by another thread, reaches the tool with its content");
    json_decref(r);
    r = elicit_round(&a, "{\"name\":\"test_confirm\",\"arguments\":{}}",
                     "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"result\":{\"action\":\"decline\"}}",
                     &asked);
    sc = json_object_get(result_of(r), "structuredContent");
    ok(strcmp(sv(json_object_get(sc, "action")), "decline") == 0 &&
           json_is_null(json_object_get(sc, "content")),
       "decline: no content");
    json_decref(r);
    r = elicit_round(&a, "{\"name\":\"test_confirm\",\"arguments\":{}}",
                     "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"error\":{\"code\":-1,"
                     "\"message\":\"user closed it\"}}",
                     &asked);
    ok(strstr(reply_text(r), "answered error -1: user closed it"),
       "an error answer: a tool error saying so (%s)", reply_text(r));
    json_decref(r);
    r = elicit_round(&a, "{\"name\":\"test_confirm\",\"arguments\":{\"timeout_ms\":200}}",
                     "{\"jsonrpc\":\"2.0\",\"id\":\"x%s\",\"result\":{\"action\":\"accept\"}}",
                     &asked);
    ok(strstr(reply_text(r), "no answer in time"),
       "an answer with another id is not taken; the wait times out (%s)", reply_text(r));
    json_decref(r);
    sbx_mcp_session_close(a.srv, &a.p.s);
    r = elicit_round(&a, "{\"name\":\"test_confirm\",\"arguments\":{}}", NULL, &asked);
    ok(strstr(reply_text(r), "the client went away"),
       "a closed session: the wait ends at once (%s)", reply_text(r));
    json_decref(r);
    probe_end(a.srv, &a.p);

    probe_init(&a.p);
    a.p.s.send_request = asker_send;
    a.p.s.send_request_arg = &a;
    json_array_clear(a.asked);
    req_quiet(a.srv, &a.p, "initialize",
              "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    r = req(a.srv, &a.p, "tools/call", "{\"name\":\"test_confirm\",\"arguments\":{}}");
    ok(strstr(reply_text(r), "does not support") && json_array_size(a.asked) == 0,
       "a client without the elicitation capability is not asked");
    json_decref(r);
    ok(sbx_mcp_current_session() == NULL, "outside a tool call there is no current session");
    probe_end(a.srv, &a.p);
    json_decref(a.asked);
    pthread_mutex_destroy(&a.lock);
    pthread_cond_destroy(&a.got);
    sbx_mcp_server_free(a.srv);
}

int main(void)
{
    struct sbx_mcp_server *srv;

    json_object_seed(1);
    srv = server(&fake_ops, presets);
    if (!ok(srv != NULL, "a server with resources builds"))
        return tap_done();
    test_capabilities(srv);
    test_set_level(srv);
    test_log_messages(srv);
    test_run_progress(srv);
    test_resources(srv);
    test_no_denials();
    test_subscriptions(srv);
    test_prompts(srv);
    test_complete(srv);
    test_sse_framing();
    test_http_sessions(srv);
    test_elicit();
    sbx_mcp_server_free(srv);
    fake_reset();
    return tap_done();
}
