/* test_mcp_proto.c - the MCP protocol layer with test-only operations:
 * JSON-RPC framing and every error code, initialize and version
 * negotiation, the tools/list schemas, tools/call results and tool errors,
 * the preset and secrets refusals, argument rewrites, the stdio framing and
 * the token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_ops.h"
#include "mcp_http.h"
#include "tap.h"

static const char *const presets[] = {"balanced", "locked", NULL};
static const char *const no_presets[] = {NULL};

static struct sbx_mcp_tool tools[16];
static struct sbx_mcp_server *srv;
static struct sbx_mcp_session sess;

static struct sbx_mcp_server *server_with_secrets(const char *const *p, const char *const *secrets)
{
    char err[256];
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&fake_ops, tools, 16),
        .presets = p,
        .secrets = secrets,
        .owner = "owner-from-config",
        .version = "9.9.9",
    };
    struct sbx_mcp_server *s = sbx_mcp_server_new(&cfg, err, sizeof err);

    if (!s)
        diag("server_new: %s", err);
    return s;
}

static struct sbx_mcp_server *server_with(const char *const *p)
{
    return server_with_secrets(p, NULL);
}

/* Sends one message text through parse + handle; returns the reply or NULL. */
static json_t *rpc_on(struct sbx_mcp_server *s, struct sbx_mcp_session *ss, const char *text)
{
    json_t *msg, *reply;

    if (sbx_mcp_parse(text, strlen(text), &msg, &reply) == -1)
        return reply;
    reply = sbx_mcp_handle(s, ss, msg);
    json_decref(msg);
    return reply;
}

static json_t *rpc(const char *text)
{
    return rpc_on(srv, &sess, text);
}

static json_int_t error_code(const json_t *reply)
{
    return json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

static const json_t *result_of(const json_t *reply)
{
    return json_object_get(reply, "result");
}

/* Calls a tool with arguments (JSON text); returns the reply. */
static json_t *call(const char *tool, const char *args)
{
    char buf[4096];

    snprintf(buf, sizeof buf,
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
             "\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
             tool, args);
    return rpc(buf);
}

static int is_error_result(const json_t *reply)
{
    return json_is_true(json_object_get(result_of(reply), "isError"));
}

static const char *result_text(const json_t *reply)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(result_of(reply), "content"), 0), "text"));
}

static void test_framing(void)
{
    struct sbx_mcp_session s0 = {0};
    json_t *r;

    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":1,");
    ok(error_code(r) == -32700 && json_is_null(json_object_get(r, "id")),
       "truncated JSON: -32700 parse error with id null");
    json_decref(r);
    r = rpc_on(srv, &s0, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    ok(error_code(r) == -32600 && json_is_null(json_object_get(r, "id")),
       "a batch (array): -32600 invalid request, id null");
    json_decref(r);
    r = rpc_on(srv, &s0, "42");
    ok(error_code(r) == -32600, "a bare number: -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"ping\"}");
    ok(error_code(r) == -32600 && json_is_string(json_object_get(r, "id")) &&
           strcmp(json_string_value(json_object_get(r, "id")), "a") == 0,
       "jsonrpc 1.0: -32600 answered with the request's id");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"id\":3,\"method\":\"ping\"}");
    ok(error_code(r) == -32600, "no jsonrpc member: -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
    ok(error_code(r) == -32600, "id null (MCP forbids it): -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
    ok(error_code(r) == -32600, "fractional id: -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":17}");
    ok(error_code(r) == -32600, "method not a string: -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":4}");
    ok(error_code(r) == -32600, "neither method nor result: -32600");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":5,\"id\":6,\"method\":\"ping\"}");
    ok(error_code(r) == -32700, "duplicate keys are refused as a parse error");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}");
    ok(r == NULL, "a response from the client gets no answer");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}");
    ok(r == NULL, "an unknown notification gets no answer");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
    ok(r && json_is_object(result_of(r)) && json_object_size(result_of(r)) == 0,
       "ping before initialize: empty result");
    json_decref(r);
    r = rpc_on(srv, &s0, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}");
    ok(error_code(r) == -32600, "tools/list before initialize: -32600");
    json_decref(r);
}

/* initialize asking for version asked; returns the version answered. */
static char *negotiated(const char *asked)
{
    struct sbx_mcp_session s = {0};
    char buf[512];
    json_t *r;
    char *v = NULL;

    snprintf(buf, sizeof buf,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
             "{\"protocolVersion\":\"%s\",\"capabilities\":{},"
             "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
             asked);
    r = rpc_on(srv, &s, buf);
    if (json_is_string(json_object_get(result_of(r), "protocolVersion")))
        v = strdup(json_string_value(json_object_get(result_of(r), "protocolVersion")));
    if (v && strcmp(v, s.version) != 0)
        diag("session holds %s, answer says %s", s.version, v);
    sbx_mcp_session_end(srv, &s);
    json_decref(r);
    return v;
}

static void test_initialize(void)
{
    static const char *const cases[][2] = {
        {"2025-11-25", "2025-11-25"}, {"2025-06-18", "2025-06-18"}, {"2025-03-26", "2025-03-26"},
        {"2024-11-05", "2024-11-05"}, {"2099-01-01", "2025-11-25"}, {"", "2025-11-25"},
    };
    json_t *r;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *v = negotiated(cases[i][0]);

        ok(v && strcmp(v, cases[i][1]) == 0, "initialize asking '%s' answers %s (got %s)",
           cases[i][0], cases[i][1], v ? v : "nothing");
        free(v);
    }
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
    ok(error_code(r) == -32602, "initialize without protocolVersion: -32602");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
            "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":[]}}");
    ok(error_code(r) == -32602, "initialize with capabilities not an object: -32602");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
            "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
            "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
    ok(r && json_is_false(json_object_get(
                json_object_get(json_object_get(result_of(r), "capabilities"), "tools"),
                "listChanged")),
       "capabilities.tools.listChanged is false");
    ok(json_object_size(json_object_get(result_of(r), "capabilities")) == 4 &&
           !json_object_get(json_object_get(result_of(r), "capabilities"), "resources"),
       "tools, logging, prompts and completions declared; no resources without operations");
    ok(strcmp(
           json_string_value(json_object_get(json_object_get(result_of(r), "serverInfo"), "name")),
           "sandboxctl") == 0 &&
           strcmp(json_string_value(
                      json_object_get(json_object_get(result_of(r), "serverInfo"), "version")),
                  "9.9.9") == 0,
       "serverInfo names sandboxctl and its version");
    ok(json_is_string(json_object_get(result_of(r), "instructions")),
       "initialize gives instructions");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":"
            "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
    ok(error_code(r) == -32600, "a second initialize on a session: -32600");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    ok(r == NULL && sess.initialized, "notifications/initialized: no answer, session marked");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}");
    ok(error_code(r) == -32601, "resources/list (not offered): -32601 method not found");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":[1]}");
    ok(error_code(r) == -32602, "params as an array: -32602");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\"params\":"
            "{\"cursor\":\"x\"}}");
    ok(error_code(r) == -32602, "tools/list with a cursor we never gave: -32602");
    json_decref(r);
}

/* A JSON Schema node of the forms our tools use is well made. */
static int schema_valid(const json_t *s, char *why, size_t len)
{
    static const char *const types[] = {"object", "array",   "string", "integer",
                                        "number", "boolean", "null"};
    const json_t *type = json_object_get(s, "type"), *v;
    const char *k;
    size_t i;

    if (!json_is_object(s))
        return snprintf(why, len, "a schema is not an object"), 0;
    if (type) {
        json_t *list = json_is_array(type) ? json_incref((json_t *)type) : json_pack("[O]", type);
        int good = json_array_size(list) > 0;

        json_array_foreach(list, i, v)
        {
            int known = 0;

            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
                known |= json_is_string(v) && strcmp(json_string_value(v), types[t]) == 0;
            good &= known;
        }
        json_decref(list);
        if (!good)
            return snprintf(why, len, "bad type"), 0;
    }
    if ((v = json_object_get(s, "enum")) && (!json_is_array(v) || !json_array_size(v)))
        return snprintf(why, len, "enum is not a non-empty array"), 0;
    if ((v = json_object_get(s, "description")) && !json_is_string(v))
        return snprintf(why, len, "description is not a string"), 0;
    if ((v = json_object_get(s, "items")) && !schema_valid(v, why, len))
        return 0;
    if ((v = json_object_get(s, "properties"))) {
        if (!json_is_object(v))
            return snprintf(why, len, "properties is not an object"), 0;
        json_object_foreach((json_t *)v, k, type) if (!schema_valid(type, why, len)) return 0;
    }
    if ((v = json_object_get(s, "required"))) {
        if (!json_is_array(v))
            return snprintf(why, len, "required is not an array"), 0;
        json_array_foreach(
            v, i,
            type) if (!json_is_string(type) ||
                      !json_object_get(
                          json_object_get(s, "properties"),
                          json_string_value(type))) return snprintf(why, len,
                                                                    "required names a property "
                                                                    "that is not there"),
            0;
    }
    return 1;
}

static void test_tools_list(void)
{
    static const char *const names[] = {
        "create_server", "list_servers",   "run_command",     "read_file",       "write_file",
        "extend_server", "destroy_server", "snapshot_server", "rollback_server", "list_snapshots",
    };
    json_t *r = rpc("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/list\"}");
    const json_t *list = json_object_get(result_of(r), "tools"), *t;
    size_t i;

    ok(json_array_size(list) == sizeof names / sizeof names[0], "tools/list lists %zu tools",
       sizeof names / sizeof names[0]);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        const json_t *in, *out, *ann;
        char why[128] = "";
        int good;

        t = json_array_get(list, i);
        ok(t && strcmp(json_string_value(json_object_get(t, "name")), names[i]) == 0,
           "tool %zu is %s", i, names[i]);
        in = json_object_get(t, "inputSchema");
        out = json_object_get(t, "outputSchema");
        ann = json_object_get(t, "annotations");
        ok(json_is_string(json_object_get(t, "title")) &&
               json_string_length(json_object_get(t, "description")) > 20,
           "%s has a title and a description", names[i]);
        good = schema_valid(in, why, sizeof why) &&
               strcmp(json_string_value(json_object_get(in, "type")), "object") == 0 &&
               json_is_false(json_object_get(in, "additionalProperties"));
        ok(good, "%s: inputSchema is an object schema without additional properties %s", names[i],
           why);
        ok(!out || (schema_valid(out, why, sizeof why) &&
                    strcmp(json_string_value(json_object_get(out, "type")), "object") == 0),
           "%s: outputSchema, when given, is an object schema %s", names[i], why);
        ok(json_is_boolean(json_object_get(ann, "readOnlyHint")) &&
               json_is_boolean(json_object_get(ann, "destructiveHint")) &&
               json_is_boolean(json_object_get(ann, "idempotentHint")),
           "%s: annotations carry the hints", names[i]);
    }
    t = json_array_get(list, 0);
    json_t *want = json_pack("[ss]", "balanced", "locked");
    ok(json_equal(json_object_get(json_object_get(json_object_get(json_object_get(t, "inputSchema"),
                                                                  "properties"),
                                                  "policy"),
                                  "enum"),
                  want),
       "create_server's policy enum is the configured presets");
    json_decref(want);
    ok(!json_object_get(json_object_get(json_object_get(t, "inputSchema"), "properties"),
                        "owner") &&
           !json_object_get(json_object_get(json_object_get(t, "inputSchema"), "properties"),
                            "allow"),
       "create_server offers neither owner nor allow");
    ok(json_is_true(json_object_get(json_object_get(json_array_get(list, 6), "annotations"),
                                    "destructiveHint")) &&
           json_is_true(json_object_get(json_object_get(json_array_get(list, 1), "annotations"),
                                        "readOnlyHint")),
       "destroy_server is marked destructive, list_servers read-only");
    json_decref(r);
}

static void test_tools_call(void)
{
    json_t *r, *parsed;
    int before;

    fake_reset();
    r = call("nonexistent", "{}");
    ok(error_code(r) == -32602, "unknown tool: -32602");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}");
    ok(error_code(r) == -32602, "tools/call without a name: -32602");
    json_decref(r);
    r = call("list_servers", "[]");
    ok(error_code(r) == -32602, "tools/call with arguments not an object: -32602");
    json_decref(r);
    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
            "{\"name\":\"list_servers\"}}");
    ok(r && !is_error_result(r), "tools/call without arguments means {}");
    json_decref(r);

    before = fake_calls;
    r = call("create_server", "{\"name\":\"a\",\"size\":\"small\",\"policy\":\"open\"}");
    ok(is_error_result(r) && strstr(result_text(r), "\"open\" is not a preset permitted") &&
           strstr(result_text(r), "balanced, locked"),
       "create_server with a preset outside mcp-presets: tool error naming the permitted ones");
    ok(fake_calls == before, "... and the operation was not called");
    json_decref(r);
    r = call("create_server", "{\"name\":\"a\",\"size\":\"small\",\"policy\":\"balanced\","
                              "\"owner\":\"mallory\"}");
    ok(is_error_result(r) && strstr(result_text(r), "unknown argument \"owner\""),
       "create_server refuses an owner from the client");
    json_decref(r);
    r = call("create_server", "{\"name\":\"a\",\"size\":\"small\",\"policy\":\"balanced\","
                              "\"allow\":[\"evil.example\"]}");
    ok(is_error_result(r) && strstr(result_text(r), "unknown argument \"allow\""),
       "create_server refuses extra allow hosts");
    json_decref(r);
    ok(fake_calls == before, "... none of the refusals reached the operation");

    r = call("create_server", "{\"name\":\"box1\",\"size\":\"small\",\"policy\":\"locked\"}");
    ok(r && !is_error_result(r), "create_server with a permitted preset succeeds");
    ok(strcmp(json_string_value(json_object_get(fake_last_args, "owner")), "owner-from-config") ==
           0,
       "the server set owner from its configuration");
    parsed = json_loads(result_text(r) ? result_text(r) : "", 0, NULL);
    ok(parsed && json_equal(parsed, json_object_get(result_of(r), "structuredContent")),
       "content[0].text is the structuredContent serialized");
    ok(json_integer_value(
           json_object_get(json_object_get(result_of(r), "structuredContent"), "vmid")) == 100,
       "structuredContent is the operation's answer");
    json_decref(parsed);
    json_decref(r);

    r = call("create_server", "{\"name\":\"too-big\",\"size\":\"small\",\"policy\":\"locked\"}");
    ok(is_error_result(r) && strstr(result_text(r), "memory guard") &&
           !json_object_get(result_of(r), "structuredContent"),
       "an operation failure is a tool result with isError and the operation's message");
    ok(!json_object_get(r, "error"), "... not a JSON-RPC error");
    json_decref(r);

    r = call("run_command", "{\"name\":\"box1\"}");
    ok(is_error_result(r) && strstr(result_text(r), "\"command\" is required"),
       "missing required argument: tool error naming it");
    json_decref(r);
    r = call("run_command", "{\"name\":\"box1\",\"command\":[\"echo\",3]}");
    ok(is_error_result(r) && strstr(result_text(r), "arguments.command[1]: expected a string"),
       "a number among the command words: tool error naming the item");
    json_decref(r);
    r = call("run_command", "{\"name\":\"box1\",\"command\":[]}");
    ok(is_error_result(r) && strstr(result_text(r), "at least 1 items"),
       "an empty command: tool error");
    json_decref(r);
    r = call("run_command", "{\"name\":\"box1\",\"command\":[\"echo\"],\"timeout\":0}");
    ok(is_error_result(r) && strstr(result_text(r), "at least 1"), "timeout 0: tool error");
    json_decref(r);
    r = call("run_command", "{\"name\":\"box1\",\"command\":[\"echo\",\"hi\",\"there\"]}");
    ok(!is_error_result(r) &&
           strcmp(json_string_value(json_object_get(
                      json_object_get(result_of(r), "structuredContent"), "stdout")),
                  "hi there\n") == 0,
       "run_command passes the command through");
    json_decref(r);

    r = call("write_file", "{\"name\":\"box1\",\"path\":\"/t\",\"content\":\"hi\\n\"}");
    ok(!is_error_result(r) &&
           strcmp(json_string_value(json_object_get(fake_last_args, "content_base64")), "aGkK") ==
               0 &&
           !json_object_get(fake_last_args, "content"),
       "write_file content becomes content_base64 for the operation");
    json_decref(r);
    r = call("write_file", "{\"name\":\"box1\",\"path\":\"/t\"}");
    ok(is_error_result(r) && strstr(result_text(r), "exactly one"),
       "write_file without contents: tool error");
    json_decref(r);
    r = call("write_file",
             "{\"name\":\"box1\",\"path\":\"/t\",\"content\":\"a\",\"content_base64\":\"YQ==\"}");
    ok(is_error_result(r) && strstr(result_text(r), "exactly one"),
       "write_file with both kinds of contents: tool error");
    json_decref(r);
    r = call("read_file", "{\"name\":\"box1\",\"path\":\"/t\"}");
    ok(!is_error_result(r) &&
           strcmp(json_string_value(json_object_get(
                      json_object_get(result_of(r), "structuredContent"), "content")),
                  "hi\n") == 0,
       "read_file of text adds it decoded as content");
    json_decref(r);
    json_decref(call("write_file", "{\"name\":\"box1\",\"path\":\"/b\",\"content_base64\":"
                                   "\"AP/+\"}"));
    r = call("read_file", "{\"name\":\"box1\",\"path\":\"/b\"}");
    ok(!is_error_result(r) &&
           !json_object_get(json_object_get(result_of(r), "structuredContent"), "content") &&
           json_object_get(json_object_get(result_of(r), "structuredContent"), "content_base64"),
       "read_file of binary bytes gives base64 only");
    json_decref(r);
    r = call("read_file", "{\"name\":\"box1\",\"path\":\"/n\\u001b[2J\\u0007\\u009bo\"}");
    {
        const char *t = result_text(r);
        int clean = t != NULL;
        for (const char *c = t; c && *c; c++)
            clean &= (unsigned char)*c >= 0x20 && *c != 0x7f && (unsigned char)*c != 0xc2;
        ok(is_error_result(r) && clean && strstr(t, "/n?[2J???o"),
           "a tool error quoting what came back shows '?' for its control bytes: %s", t ? t : "-");
    }
    json_decref(r);
    r = call("destroy_server", "{\"name\":\"box1\"}");
    ok(!is_error_result(r) && json_is_true(json_object_get(
                                  json_object_get(result_of(r), "structuredContent"), "destroyed")),
       "destroy_server");
    json_decref(r);
    r = call("destroy_server", "{\"name\":\"box1\"}");
    ok(is_error_result(r) && strstr(result_text(r), "no sandbox named"),
       "destroy_server of a sandbox that is gone: tool error");
    json_decref(r);
}

static void test_no_presets(void)
{
    struct sbx_mcp_server *s = server_with(no_presets);
    struct sbx_mcp_session ss = {0};
    json_t *r;

    ok(s != NULL, "a server without mcp-presets starts");
    if (!s)
        return;
    json_decref(rpc_on(s, &ss,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                       "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}"));
    r = rpc_on(s, &ss,
               "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"create_server\",\"arguments\":{\"name\":\"a\",\"size\":\"small\","
               "\"policy\":\"balanced\"}}}");
    ok(is_error_result(r) && strstr(result_text(r), "none (mcp-presets is empty)"),
       "without mcp-presets every create_server is refused, saying why");
    json_decref(r);
    sbx_mcp_session_end(s, &ss);
    sbx_mcp_server_free(s);
}

/* create_server's "secrets" when the administrator permits some (mcp-secrets)
 * and when none (the server of the other tests). */
static void test_secrets(void)
{
    static const char *const permitted[] = {"anthropic", "github", NULL};
    struct sbx_mcp_server *s = server_with_secrets(presets, permitted);
    struct sbx_mcp_session ss = {0};
    json_t *r, *props, *want;
    int before;

    ok(s != NULL, "a server with mcp-secrets starts");
    if (!s)
        return;
    json_decref(rpc_on(s, &ss,
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                       "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}"));
    r = rpc_on(s, &ss, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
    props = json_object_get(
        json_object_get(json_array_get(json_object_get(result_of(r), "tools"), 0), "inputSchema"),
        "properties");
    want = json_pack("[ss]", "anthropic", "github");
    ok(json_equal(
           json_object_get(json_object_get(json_object_get(props, "secrets"), "items"), "enum"),
           want) &&
           strcmp(json_string_value(json_object_get(json_object_get(props, "secrets"), "type")),
                  "array") == 0,
       "create_server's secrets: an array whose items' enum is mcp-secrets");
    json_decref(want);
    json_decref(r);
    fake_reset();
    before = fake_calls;
    r = rpc_on(s, &ss,
               "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"create_server\",\"arguments\":{\"name\":\"a\",\"size\":\"small\","
               "\"policy\":\"locked\",\"secrets\":[\"github\",\"openai\"]}}}");
    ok(is_error_result(r) &&
           strstr(result_text(r), "arguments.secrets[1]: \"openai\" is not a secret permitted "
                                  "over MCP; the administrator permits: anthropic, github") &&
           fake_calls == before,
       "a secret outside mcp-secrets: a tool error naming the permitted ones, no operation");
    json_decref(r);
    r = rpc_on(s, &ss,
               "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"create_server\",\"arguments\":{\"name\":\"a\",\"size\":\"small\","
               "\"policy\":\"locked\",\"secrets\":\"github\"}}}");
    ok(is_error_result(r) && strstr(result_text(r), "arguments.secrets: expected an array") &&
           fake_calls == before,
       "secrets that are not an array: the schema's tool error");
    json_decref(r);
    r = rpc_on(s, &ss,
               "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"create_server\",\"arguments\":{\"name\":\"a\",\"size\":\"small\","
               "\"policy\":\"locked\",\"secrets\":[\"github\"]}}}");
    want = json_pack("[s]", "github");
    ok(r && !is_error_result(r) && json_equal(json_object_get(fake_last_args, "secrets"), want),
       "a permitted secret reaches the operation as given");
    json_decref(want);
    json_decref(r);
    sbx_mcp_session_end(s, &ss);
    sbx_mcp_server_free(s);

    r = rpc("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/list\"}");
    props = json_object_get(
        json_object_get(json_array_get(json_object_get(result_of(r), "tools"), 0), "inputSchema"),
        "properties");
    ok(props && !json_object_get(props, "secrets"),
       "without mcp-secrets create_server offers no secrets");
    json_decref(r);
    before = fake_calls;
    r = call("create_server", "{\"name\":\"a\",\"size\":\"small\",\"policy\":\"locked\","
                              "\"secrets\":[\"anthropic\"]}");
    ok(is_error_result(r) &&
           strstr(result_text(r), "arguments.secrets: no secret is permitted over MCP") &&
           fake_calls == before,
       "... and refuses them, saying none is permitted");
    json_decref(r);
    fake_reset();
}

static void test_bad_table(void)
{
    struct sbx_mcp_tool bad[1];
    struct sbx_mcp_config cfg = {.tools = bad, .ntools = 1};
    char err[256] = "";

    sbx_mcp_tools_sandbox(&fake_ops, bad, 1);
    bad[0].input_schema = "{\"type\": \"object\", ";
    ok(!sbx_mcp_server_new(&cfg, err, sizeof err) && strstr(err, "create_server") &&
           strstr(err, "inputSchema"),
       "a tool with broken schema JSON is refused, naming the tool: %s", err);
    bad[0].input_schema = "{\"type\": \"array\"}";
    ok(!sbx_mcp_server_new(&cfg, err, sizeof err) && strstr(err, "type"),
       "an inputSchema that is not an object schema is refused: %s", err);
}

static void test_args_check(void)
{
    json_t *schema = json_loads("{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\","
                                "\"enum\":[\"x\",\"y\"]},\"n\":{\"type\":\"integer\","
                                "\"maximum\":5},\"u\":{\"type\":\"string\",\"maxLength\":2}},"
                                "\"required\":[\"s\"],\"additionalProperties\":false}",
                                0, NULL);
    static const struct {
        const char *args, *expect;
    } cases[] = {
        {"{\"s\":\"x\"}", NULL},
        {"{\"s\":\"x\",\"n\":5,\"u\":\"\\u00e9\\u00e9\"}", NULL},
        {"{}", "\"s\" is required"},
        {"{\"s\":\"z\"}", "expected one of \"x\", \"y\""},
        {"{\"s\":\"x\",\"n\":6}", "at most 5"},
        {"{\"s\":\"x\",\"n\":\"5\"}", "expected an integer, got a string"},
        {"{\"s\":\"x\",\"n\":1.5}", "expected an integer, got a number"},
        {"{\"s\":\"x\",\"u\":\"abc\"}", "at most 2 characters"},
        {"{\"s\":\"x\",\"extra\":1}", "unknown argument \"extra\" (expected: s, n, u)"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *args = json_loads(cases[i].args, 0, NULL);
        char err[256] = "";
        int rc = sbx_mcp_args_check(schema, args, err, sizeof err);

        if (!cases[i].expect)
            ok(rc == 0, "args_check accepts %s", cases[i].args);
        else
            ok(rc == -1 && strstr(err, cases[i].expect), "args_check refuses %s: %s", cases[i].args,
               err);
        json_decref(args);
    }
    json_decref(schema);
}

/* The stdio transport over a pipe in and a file out. */
static void test_stdio(void)
{
    static const char input[] =
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
        "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}\n"
        "\n"
        "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        "not json\r\n"
        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
        "\"run_command\",\"arguments\":{\"name\":\"nobox\",\"command\":[\"echo\",\"a\\nb\"]}}}\n"
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}";
    char out[8192], *line, *save = NULL;
    FILE *f = tmpfile();
    int p[2], lines = 0, all_json = 1;
    json_t *j;
    long ids[3] = {0};

    if (!f || pipe(p) == -1 || write(p[1], input, sizeof input - 1) != (ssize_t)sizeof input - 1)
        abort();
    close(p[1]);
    ok(sbx_mcp_stdio_run(srv, p[0], fileno(f)) == 0, "stdio: ends cleanly at end of input");
    close(p[0]);
    rewind(f);
    out[fread(out, 1, sizeof out - 1, f)] = '\0';
    fclose(f);
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        j = json_loads(line, 0, NULL);
        all_json &= j != NULL;
        if (lines < 3)
            ids[lines] = json_is_integer(json_object_get(j, "id"))
                             ? (long)json_integer_value(json_object_get(j, "id"))
                             : -1;
        lines++;
        json_decref(j);
    }
    ok(lines == 3 && all_json, "stdio: one JSON line per request and per bad line (%d lines)",
       lines);
    ok(ids[0] == 1 && ids[1] == -1 && ids[2] == 2,
       "stdio: answers in order; the bad line's error has id null; an unterminated last line "
       "(ping 3) is not taken");
}

static void test_token(void)
{
    char path[] = "/tmp/mcp-token-XXXXXX", err[256] = "", *t;
    int fd = mkstemp(path);
    FILE *f;

    ok(sbx_mcp_token_equal("abc", 3, "abc", 3), "token_equal: equal");
    ok(!sbx_mcp_token_equal("abd", 3, "abc", 3), "token_equal: last byte differs");
    ok(!sbx_mcp_token_equal("ab", 2, "abc", 3), "token_equal: a prefix is not equal");
    ok(!sbx_mcp_token_equal("abcabc", 6, "abc", 3), "token_equal: a repetition is not equal");
    ok(!sbx_mcp_token_equal("", 0, "abc", 3), "token_equal: empty is not equal");
    if (fd == -1 || !(f = fdopen(fd, "w")))
        abort();
    fputs("  0123456789abcdef0123\n", f);
    fclose(f);
    t = sbx_mcp_token_read(path, err, sizeof err);
    ok(t && strcmp(t, "0123456789abcdef0123") == 0, "token_read trims blanks and the newline");
    free(t);
    f = fopen(path, "w");
    fputs("short\n", f);
    fclose(f);
    t = sbx_mcp_token_read(path, err, sizeof err);
    ok(!t && strstr(err, path) && strstr(err, "at least 16"),
       "token_read refuses a short token, naming the file: %s", err);
    free(t);
    unlink(path);
    t = sbx_mcp_token_read(path, err, sizeof err);
    ok(!t && strstr(err, "No such file"), "token_read of a missing file: %s", err);
    t = sbx_mcp_token_read(NULL, err, sizeof err);
    ok(!t && strstr(err, "mcp-token-file"), "no token file configured: %s", err);
}

/* Names longer than an error message's buffer, in two-byte characters: the
 * message is cut inside one, and must still become a JSON string. */
static void test_long_names(void)
{
    static char text[4096], name[2201];
    json_t *reply;

    for (size_t i = 0; i < 1100; i++)
        memcpy(name + 2 * i, "\xc3\xa9", 2); /* U+00E9 */
    name[2200] = '\0';
    snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"%s\"}", name);
    reply = rpc(text);
    ok(reply && error_code(reply) == -32601 &&
           json_integer_value(json_object_get(reply, "id")) == 41,
       "an unknown method of 1100 non-ASCII characters is answered -32601");
    json_decref(reply);
    snprintf(
        text, sizeof text,
        "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"}}",
        name);
    reply = rpc(text);
    ok(reply && error_code(reply) == -32602 &&
           json_integer_value(json_object_get(reply, "id")) == 42,
       "an unknown tool of 1100 non-ASCII characters is answered -32602");
    json_decref(reply);
}

/* The status sbx_mcp_http_parse_head() gives head (0 when it is read, -1
 * when it needs more); the Host value read goes to host. */
static int head_status(const char *head, char *host, size_t hostlen)
{
    static struct sbx_mcp_http_request q;
    enum sbx_mcp_http_head r = sbx_mcp_http_parse_head(head, strlen(head), &q);

    snprintf(host, hostlen, "%s", r == SBX_MCP_HEAD_OK && q.host ? q.host : "");
    return r == SBX_MCP_HEAD_MORE ? -1 : q.status;
}

/* The request head: where lines end, and the blanks around a value. */
static void test_http_head(void)
{
    char host[64];
    int status;

    ok(head_status("POST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n", host, sizeof host) == 0 &&
           strcmp(host, "localhost") == 0,
       "a plain head is read");
    ok(head_status("POST /mcp HTTP/1.1\r,\r\nHost: localhost\r\n\r\n", host, sizeof host) == 400,
       "a bare CR in the request line is refused, not cut there");
    ok(head_status("POST /mcp HTTP/1.1\nHost: localhost\r\n\r\n", host, sizeof host) == 400,
       "a request line ending in a bare LF is refused");
    ok(head_status("POST /mcp HTTP/1.1\r\nHost: localhost\r\n\nContent-Length: 9\r\n\r\n", host,
                   sizeof host) == 400,
       "a bare LF (an empty line to a lenient reader) inside the head is refused");
    status = head_status("POST /mcp HTTP/1.1\r\nHost:  localhost  \r\n\r\n", host, sizeof host);
    ok(status == 0 && strcmp(host, "localhost") == 0,
       "every blank around a value goes, not only the last one ('%s')", host);
    ok(head_status("\r\nPOST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n", host, sizeof host) == 0,
       "an empty line before the request line is ignored (RFC 9112 section 2.2)");
    ok(head_status("\r\n\r\nPOST /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n", host, sizeof host) == 0,
       "two empty lines before the request line are ignored too, not read as an empty head");
    ok(head_status("POST /mcp HTTP/1.1\r\nHost: localhost\r\n", host, sizeof host) == -1,
       "a head without its blank line needs more");
    ok(head_status("POST /mcp HTTP/1.1\nHost: localhost", host, sizeof host) == 400,
       "a bare LF is refused at once, before the head ends");
}

/* What the endpoint adds to http/'s rules, and the caps. */
static void test_http_head_rules(void)
{
    static struct sbx_mcp_http_request q;
    static char big[SBX_MCP_HTTP_HEAD_MAX + 64];
    const char *h;
    size_t n;

    h = "POST /mcp?x=1 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 12\r\n"
        "Origin: http://localhost\r\nConnection: close\r\n\r\n{\"jsonrpc\":1}";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_OK &&
           strcmp(q.method, "POST") == 0 && strcmp(q.target, "/mcp?x=1") == 0 &&
           q.content_length == 12 && strcmp(q.origin, "http://localhost") == 0 && !q.keep_alive &&
           q.head_len == strlen(h) - 13 && !q.auth,
       "method, target, Content-Length, Origin, Connection: close and the head's length");
    h = "GET /mcp HTTP/1.0\r\nHost: localhost\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_OK && !q.keep_alive &&
           q.content_length == -1,
       "HTTP/1.0 without keep-alive is not kept; no Content-Length is -1");
    h = "POST /mcp HTTP/1.1\r\nOrigin: http://localhost\r\norigin: http://evil.example\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_REFUSED && q.status == 400 &&
           strcmp(q.error, "two Origin fields") == 0,
       "two Origin fields (names ignore case): 400, saying so");
    h = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_REFUSED && q.status == 501,
       "Transfer-Encoding: chunked: 501");
    h = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_REFUSED && q.status == 400,
       "a Transfer-Encoding whose last coding is not chunked: 400 (RFC 9112 section 6.3)");
    h = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_REFUSED && q.status == 400,
       "Content-Length with Transfer-Encoding: 400");
    h = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8388608\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_OK,
       "a Content-Length of exactly the 8 MiB cap is read");
    h = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8388609\r\n\r\n";
    ok(sbx_mcp_http_parse_head(h, strlen(h), &q) == SBX_MCP_HEAD_REFUSED && q.status == 413,
       "one byte over the body cap: 413");
    static const char nul[] = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nX-A: a\0b\r\n\r\n";
    ok(sbx_mcp_http_parse_head(nul, sizeof nul - 1, &q) == SBX_MCP_HEAD_REFUSED && q.status == 400,
       "a NUL in a value: 400");

    memset(big, 'a', sizeof big);
    memcpy(big, "GET /", 5);
    /* A line needs its CRLF within the cap: HEAD_MAX - 2 bytes of it may
     * still end, one more may not. */
    ok(sbx_mcp_http_parse_head(big, SBX_MCP_HTTP_HEAD_MAX - 2, &q) == SBX_MCP_HEAD_MORE,
       "HEAD_MAX - 2 bytes of a request line not ended: more");
    ok(sbx_mcp_http_parse_head(big, SBX_MCP_HTTP_HEAD_MAX - 1, &q) == SBX_MCP_HEAD_REFUSED &&
           q.status == 414,
       "HEAD_MAX - 1 bytes of a request line not ended: 414");
    n = (size_t)snprintf(big, sizeof big, "GET /mcp HTTP/1.1\r\nX-Pad: ");
    memset(big + n, 'a', sizeof big - n);
    ok(sbx_mcp_http_parse_head(big, SBX_MCP_HTTP_HEAD_MAX, &q) == SBX_MCP_HEAD_REFUSED &&
           q.status == 431,
       "a header section not ended within HEAD_MAX: 431");
    n = (size_t)snprintf(big, sizeof big, "GET /mcp HTTP/1.1\r\n");
    for (int i = 0; i < SBX_MCP_HTTP_MAX_HEADERS + 1; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "X-%d: %d\r\n", i, i);
    n += (size_t)snprintf(big + n, sizeof big - n, "\r\n");
    ok(sbx_mcp_http_parse_head(big, n, &q) == SBX_MCP_HEAD_REFUSED && q.status == 431,
       "65 header fields: 431");
}

int main(void)
{
    json_object_seed(1);
    srv = server_with(presets);
    if (!ok(srv != NULL, "the sandbox tool table builds a server"))
        return tap_done();
    ok(strcmp(sbx_mcp_version_negotiate("2025-06-18"), "2025-06-18") == 0 &&
           strcmp(sbx_mcp_version_negotiate("bogus"), SBX_MCP_PROTOCOL_LATEST) == 0 &&
           strcmp(sbx_mcp_version_negotiate(NULL), SBX_MCP_PROTOCOL_LATEST) == 0,
       "version_negotiate: known versions echoed, others get the latest");
    test_framing();
    test_initialize();
    test_tools_list();
    test_tools_call();
    test_no_presets();
    test_secrets();
    test_bad_table();
    test_args_check();
    test_stdio();
    test_token();
    test_long_names();
    test_http_head();
    test_http_head_rules();
    sbx_mcp_session_end(srv, &sess);
    sbx_mcp_server_free(srv);
    fake_reset();
    return tap_done();
}
