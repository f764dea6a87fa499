/* test_mcp_extensions.c - the protocol layer's extension points, through the
 * conformance fixtures (conformance_fixtures.c) next to the sandbox tools
 * and operations of fake_ops.c: a tool that answers a whole CallToolResult
 * (SBX_MCP_TOOL_CONTENT), log messages and progress a tool sends itself
 * (sbx_mcp_session_log, sbx_mcp_session_progress), and a provider's
 * resources, template, subscriptions, prompts and completion (struct
 * sbx_mcp_provider), each beside the built-in sandbox ones, which stay as
 * they were. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_fixtures.h"
#include "fake_ops.h"
#include "probe.h"
#include "tap.h"

static const char *const presets[] = {"balanced", "locked", NULL};

static struct sbx_mcp_tool tools[64];

/* A content tool whose function forgets the content array. */
static int no_content(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    *out = json_pack("{s:s}", "text", "not a CallToolResult");
    return 0;
}

static const struct sbx_mcp_tool no_content_tool = {
    .name = "no_content",
    .title = "Forgets its content",
    .description = "Forgets its content",
    .input_schema = "{\"type\": \"object\"}",
    .fn = no_content,
    .flags = SBX_MCP_TOOL_CONTENT,
};

/* The integer token token_probe saw inside its call (0: none; -1: not called). */
static int token_seen_integer = -1;

static int token_probe(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    const json_t *t = sbx_mcp_current_progress_token();

    (void)s, (void)args, (void)err, (void)errlen;
    token_seen_integer = t ? (int)json_integer_value(t) : 0;
    *out = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "seen");
    return 0;
}

static const struct sbx_mcp_tool token_tool = {
    .name = "token_probe",
    .title = "Reads its progress token",
    .description = "Reads its progress token",
    .input_schema = "{\"type\": \"object\"}",
    .fn = token_probe,
    .flags = SBX_MCP_TOOL_CONTENT,
};

static struct sbx_mcp_server *server(const struct sbx_mcp_provider *providers, size_t n,
                                     const struct sbx_mcp_ops *ops, char *err, size_t errlen)
{
    size_t nt = sbx_mcp_tools_sandbox(&fake_ops, tools, 32);

    for (size_t i = 0; i < conformance_ntools; i++)
        tools[nt++] = conformance_tools[i];
    tools[nt++] = no_content_tool;
    tools[nt++] = token_tool;
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = nt,
        .presets = presets,
        .owner = "owner-from-config",
        .version = "9.9.9",
        .progress_set = fake_progress_set,
        .ops = ops,
        .providers = providers,
        .nproviders = n,
    };
    return sbx_mcp_server_new(&cfg, err, errlen);
}

/* How many entries of array a have member key equal to value. */
static size_t count_with(const json_t *a, const char *key, const char *value)
{
    size_t n = 0, i;
    json_t *v;

    json_array_foreach(a, i, v)
    {
        n += strcmp(sv(json_object_get(v, key)), value) == 0;
    }
    return n;
}

/* The notifications of method in a, each one's params (a new array). */
static json_t *params_of(const json_t *a, const char *method)
{
    json_t *out = json_array(), *v;
    size_t i;

    json_array_foreach(a, i, v)
    {
        if (strcmp(sv(json_object_get(v, "method")), method) == 0)
            json_array_append(out, json_object_get(v, "params"));
    }
    return out;
}

static void test_content_tools(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *r = req(srv, p, "tools/call", "{\"name\":\"test_multiple_content_types\"}");
    json_t *content = json_object_get(result_of(r), "content");

    ok(json_array_size(content) == 3 &&
           strcmp(sv(json_object_get(json_array_get(content, 1), "type")), "image") == 0 &&
           strcmp(sv(json_object_get(json_array_get(content, 1), "data")), conformance_png) == 0 &&
           strcmp(
               sv(json_object_get(json_object_get(json_array_get(content, 2), "resource"), "uri")),
               "test://mixed-content-resource") == 0,
       "a content tool's blocks (text, image, resource) are the result's content as they are");
    ok(!json_object_get(result_of(r), "structuredContent") &&
           !json_is_true(json_object_get(result_of(r), "isError")),
       "... without structuredContent or isError");
    json_decref(r);
    r = req(srv, p, "tools/call", "{\"name\":\"test_audio_content\",\"arguments\":{}}");
    content = json_object_get(result_of(r), "content");
    ok(strcmp(sv(json_object_get(json_array_get(content, 0), "mimeType")), "audio/wav") == 0,
       "an audio block keeps its mimeType");
    json_decref(r);
    r = req(srv, p, "tools/call", "{\"name\":\"no_content\"}");
    ok(json_is_true(json_object_get(result_of(r), "isError")) &&
           strstr(sv(json_object_get(json_array_get(json_object_get(result_of(r), "content"), 0),
                                     "text")),
                  "content array"),
       "a content tool that answers no content array is a tool error saying so");
    json_decref(r);
    r = req(srv, p, "tools/call", "{\"name\":\"test_error_handling\"}");
    ok(json_is_true(json_object_get(result_of(r), "isError")) &&
           strcmp(sv(json_object_get(json_array_get(json_object_get(result_of(r), "content"), 0),
                                     "text")),
                  "This tool intentionally returns an error for testing") == 0,
       "a content tool that fails is a tool error with its reason");
    json_decref(r);
    r = req(srv, p, "tools/call", "{\"name\":\"list_servers\"}");
    ok(json_is_object(json_object_get(result_of(r), "structuredContent")),
       "a sandbox tool still answers structuredContent");
    json_decref(r);
}

static void test_refused_tables(void)
{
    static const struct sbx_mcp_provider broken = {.resources = "[{\"uri\": \"x://a\"}"};
    static const struct sbx_mcp_provider nameless = {.prompts = "[{\"description\": \"d\"}]"};
    struct sbx_mcp_tool bad = conformance_tools[0];
    struct sbx_mcp_config cfg = {.tools = &bad, .ntools = 1};
    struct sbx_mcp_server *srv;
    char err[256] = "";

    srv = server(&broken, 1, NULL, err, sizeof err);
    ok(!srv && strstr(err, "provider 0: resources"), "a provider's broken JSON is refused (%s)",
       err);
    sbx_mcp_server_free(srv);
    srv = server(&nameless, 1, NULL, err, sizeof err);
    ok(!srv && strstr(err, "prompts[0]"), "a prompt without a name is refused (%s)", err);
    sbx_mcp_server_free(srv);
    bad.output_schema = "{\"type\": \"object\"}";
    srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    ok(!srv && strstr(err, "outputSchema"), "a content tool with an outputSchema is refused (%s)",
       err);
    sbx_mcp_server_free(srv);
}

static void test_tool_log(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *logs;

    json_array_clear(p->notified);
    req_quiet(srv, p, "tools/call", "{\"name\":\"test_tool_with_logging\"}");
    logs = params_of(p->notified, "notifications/message");
    ok(json_array_size(logs) == 0, "before logging/setLevel a tool's log messages are not sent");
    json_decref(logs);
    req_quiet(srv, p, "logging/setLevel", "{\"level\":\"info\"}");
    json_array_clear(p->notified);
    req_quiet(srv, p, "tools/call", "{\"name\":\"test_tool_with_logging\"}");
    logs = params_of(p->notified, "notifications/message");
    ok(count_with(logs, "logger", "conformance") == 3 &&
           strcmp(sv(json_object_get(json_array_get(logs, 1), "data")), "Tool execution started") ==
               0 &&
           strcmp(sv(json_object_get(json_array_get(logs, 3), "data")),
                  "Tool execution completed") == 0 &&
           count_with(logs, "level", "info") == json_array_size(logs),
       "at info a tool's three messages go out with its logger, between the server's own");
    json_decref(logs);
    req_quiet(srv, p, "logging/setLevel", "{\"level\":\"warning\"}");
    json_array_clear(p->notified);
    req_quiet(srv, p, "tools/call", "{\"name\":\"test_tool_with_logging\"}");
    logs = params_of(p->notified, "notifications/message");
    ok(json_array_size(logs) == 0, "at warning a tool's info messages are not sent");
    json_decref(logs);
}

static void test_tool_progress(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *prog;

    json_array_clear(p->notified);
    req_quiet(srv, p, "tools/call",
              "{\"name\":\"test_tool_with_progress\",\"_meta\":{\"progressToken\":\"tok-1\"}}");
    prog = params_of(p->notified, "notifications/progress");
    ok(json_array_size(prog) == 3 && count_with(prog, "progressToken", "tok-1") == 3 &&
           json_number_value(json_object_get(json_array_get(prog, 0), "progress")) == 0 &&
           json_number_value(json_object_get(json_array_get(prog, 1), "progress")) == 50 &&
           json_number_value(json_object_get(json_array_get(prog, 2), "progress")) == 100 &&
           json_number_value(json_object_get(json_array_get(prog, 2), "total")) == 100,
       "a tool's progress 0, 50, 100 of 100 goes out with the call's token");
    json_decref(prog);
    json_array_clear(p->notified);
    req_quiet(srv, p, "tools/call", "{\"name\":\"test_tool_with_progress\"}");
    prog = params_of(p->notified, "notifications/progress");
    ok(json_array_size(prog) == 0, "without a token a tool's progress is not sent");
    json_decref(prog);
    req_quiet(srv, p, "tools/call", "{\"name\":\"token_probe\",\"_meta\":{\"progressToken\":42}}");
    ok(token_seen_integer == 42, "inside a tool the current progress token is the call's (%d)",
       token_seen_integer);
    ok(sbx_mcp_current_progress_token() == NULL &&
           sbx_mcp_session_progress(&p->s, 1, -1, "late") == -1,
       "outside a call there is no token and progress is not sent");
}

static void test_resources(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *r = req(srv, p, "resources/list", "{}"), *c;

    ok(count_with(json_object_get(result_of(r), "resources"), "uri", "test://static-text") == 1 &&
           count_with(json_object_get(result_of(r), "resources"), "uri", "sandbox://box-a/info") ==
               1,
       "resources/list has the provider's resources after the sandboxes'");
    json_decref(r);
    r = req(srv, p, "resources/templates/list", "{}");
    ok(count_with(json_object_get(result_of(r), "resourceTemplates"), "uriTemplate",
                  "test://template/{id}/data") == 1 &&
           count_with(json_object_get(result_of(r), "resourceTemplates"), "uriTemplate",
                      "sandbox://{name}/info") == 1,
       "resources/templates/list has the provider's template and the sandboxes'");
    json_decref(r);
    r = req(srv, p, "resources/read", "{\"uri\":\"test://static-binary\"}");
    c = json_array_get(json_object_get(result_of(r), "contents"), 0);
    ok(strcmp(sv(json_object_get(c, "blob")), conformance_png) == 0 &&
           strcmp(sv(json_object_get(c, "mimeType")), "image/png") == 0,
       "resources/read of a provider's binary resource answers its blob");
    json_decref(r);
    r = req(srv, p, "resources/read", "{\"uri\":\"test://template/123/data\"}");
    c = json_array_get(json_object_get(result_of(r), "contents"), 0);
    ok(strstr(sv(json_object_get(c, "text")), "Data for ID: 123") != NULL,
       "resources/read of a template URI answers the provider's content for that id");
    json_decref(r);
    r = req(srv, p, "resources/read", "{\"uri\":\"test://nothing\"}");
    ok(error_code(r) == -32002, "a URI no provider serves is -32002");
    json_decref(r);
    r = req(srv, p, "resources/read", "{\"uri\":\"sandbox://box-a/info\"}");
    ok(json_array_size(json_object_get(result_of(r), "contents")) == 1,
       "a sandbox URI is still read by the built-in resources");
    json_decref(r);
}

static void test_subscriptions(struct sbx_mcp_server *srv, struct probe *p, struct probe *other)
{
    json_t *r = req(srv, p, "resources/subscribe", "{\"uri\":\"test://watched-resource\"}");

    ok(json_is_object(result_of(r)) && json_object_size(result_of(r)) == 0,
       "resources/subscribe to a URI its provider lets be subscribed answers {}");
    json_decref(r);
    r = req(srv, p, "resources/subscribe", "{\"uri\":\"test://static-text\"}");
    ok(error_code(r) == -32602, "one it does not is -32602");
    json_decref(r);
    json_array_clear(p->delivered);
    json_array_clear(other->delivered);
    sbx_mcp_resource_updated(srv, "test://watched-resource");
    ok(json_array_size(p->delivered) == 1 &&
           strcmp(sv(json_object_get(json_object_get(json_array_get(p->delivered, 0), "params"),
                                     "uri")),
                  "test://watched-resource") == 0 &&
           json_array_size(other->delivered) == 0,
       "sbx_mcp_resource_updated reaches the subscribed session only");
    req_quiet(srv, p, "resources/unsubscribe", "{\"uri\":\"test://watched-resource\"}");
    json_array_clear(p->delivered);
    sbx_mcp_resource_updated(srv, "test://watched-resource");
    ok(json_array_size(p->delivered) == 0, "after resources/unsubscribe no update arrives");
}

static void test_prompts(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *r = req(srv, p, "prompts/list", "{}"), *m;

    ok(count_with(json_object_get(result_of(r), "prompts"), "name", "sandbox_task") == 1 &&
           count_with(json_object_get(result_of(r), "prompts"), "name", "test_prompt_with_image") ==
               1,
       "prompts/list has the provider's prompts after the built-in ones");
    json_decref(r);
    r = req(srv, p, "prompts/get",
            "{\"name\":\"test_prompt_with_arguments\",\"arguments\":{\"arg1\":\"v-one\","
            "\"arg2\":\"v-two\"}}");
    m = json_object_get(json_array_get(json_object_get(result_of(r), "messages"), 0), "content");
    ok(strstr(sv(json_object_get(m, "text")), "arg1='v-one', arg2='v-two'") != NULL,
       "prompts/get of a provider's prompt answers its messages with the arguments");
    json_decref(r);
    r = req(srv, p, "prompts/get",
            "{\"name\":\"test_prompt_with_arguments\",\"arguments\":{\"arg1\":\"v\"}}");
    ok(error_code(r) == -32602 &&
           strstr(sv(json_object_get(json_object_get(r, "error"), "message")), "\"arg2\""),
       "a missing required argument is -32602 naming it, before the provider is asked");
    json_decref(r);
    r = req(srv, p, "prompts/get",
            "{\"name\":\"test_prompt_with_arguments\",\"arguments\":{\"arg1\":\"v\",\"arg2\":2}}");
    ok(error_code(r) == -32602, "an argument that is not a string is -32602");
    json_decref(r);
    r = req(srv, p, "prompts/get",
            "{\"name\":\"test_prompt_with_embedded_resource\",\"arguments\":{\"resourceUri\":"
            "\"test://x\"}}");
    m = json_object_get(json_array_get(json_object_get(result_of(r), "messages"), 0), "content");
    ok(strcmp(sv(json_object_get(m, "type")), "resource") == 0 &&
           strcmp(sv(json_object_get(json_object_get(m, "resource"), "uri")), "test://x") == 0,
       "a provider's prompt may embed a resource");
    json_decref(r);
    r = req(srv, p, "prompts/get", "{\"name\":\"no_such_prompt\"}");
    ok(error_code(r) == -32602, "an unknown prompt is still -32602");
    json_decref(r);
    r = req(srv, p, "prompts/get",
            "{\"name\":\"review_changes\",\"arguments\":{\"name\":\"box-a\"}}");
    ok(json_array_size(json_object_get(result_of(r), "messages")) == 1,
       "the built-in prompts are still served");
    json_decref(r);
}

static void test_complete(struct sbx_mcp_server *srv, struct probe *p)
{
    json_t *r = req(srv, p, "completion/complete",
                    "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_arguments\"},"
                    "\"argument\":{\"name\":\"arg1\",\"value\":\"pa\"}}");
    json_t *c = json_object_get(result_of(r), "completion");

    ok(json_array_size(json_object_get(c, "values")) == 3 &&
           strcmp(sv(json_array_get(json_object_get(c, "values"), 2)), "party") == 0 &&
           json_integer_value(json_object_get(c, "total")) == 3 &&
           json_is_false(json_object_get(c, "hasMore")),
       "completion of a provider's prompt argument keeps the candidates with the prefix");
    json_decref(r);
    r = req(srv, p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_arguments\"},"
            "\"argument\":{\"name\":\"arg9\",\"value\":\"\"}}");
    ok(error_code(r) == -32602, "an argument the provider's prompt does not declare is -32602");
    json_decref(r);
    r = req(srv, p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"test_prompt_with_image\"},"
            "\"argument\":{\"name\":\"x\",\"value\":\"\"}}");
    ok(error_code(r) == -32602, "a provider's prompt without arguments completes nothing: -32602");
    json_decref(r);
    r = req(srv, p, "completion/complete",
            "{\"ref\":{\"type\":\"ref/prompt\",\"name\":\"sandbox_task\"},"
            "\"argument\":{\"name\":\"policy\",\"value\":\"l\"}}");
    c = json_object_get(result_of(r), "completion");
    ok(json_array_size(json_object_get(c, "values")) == 1 &&
           strcmp(sv(json_array_get(json_object_get(c, "values"), 0)), "locked") == 0,
       "the built-in prompts complete as before");
    json_decref(r);
}

static void test_providers_only(void)
{
    char err[256] = "";
    struct sbx_mcp_server *srv = server(&conformance_provider, 1, NULL, err, sizeof err);
    struct probe p;
    json_t *r;

    probe_init(&p);
    req_quiet(srv, &p, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    r = req(srv, &p, "resources/list", "{}");
    ok(json_array_size(json_object_get(result_of(r), "resources")) == 3,
       "without operations the provider's resources alone are listed");
    json_decref(r);
    r = req(srv, &p, "resources/subscribe", "{\"uri\":\"sandbox://box-a/info\"}");
    ok(error_code(r) == -32602, "without operations a sandbox URI cannot be subscribed to");
    json_decref(r);
    probe_end(srv, &p);
    sbx_mcp_server_free(srv);
    srv = server(NULL, 0, NULL, err, sizeof err);
    probe_init(&p);
    r = req(srv, &p, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    ok(!json_object_get(json_object_get(result_of(r), "capabilities"), "resources"),
       "with neither operations nor providers no resources are declared");
    json_decref(r);
    probe_end(srv, &p);
    sbx_mcp_server_free(srv);
}

int main(void)
{
    char err[256] = "";
    struct sbx_mcp_server *srv;
    struct probe p, other;

    json_object_seed(1);
    srv = server(&conformance_provider, 1, &fake_ops, err, sizeof err);
    if (!ok(srv != NULL, "a server with sandbox tools, fixtures and a provider builds (%s)", err))
        return tap_done();
    probe_init(&p);
    probe_init(&other);
    req_quiet(srv, &p, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    req_quiet(srv, &other, "initialize",
              "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}");
    req_quiet(srv, &p, "tools/call",
              "{\"name\":\"create_server\",\"arguments\":{\"name\":\"box-a\",\"size\":\"small\","
              "\"policy\":\"balanced\",\"lifetime\":\"1h\"}}");
    test_content_tools(srv, &p);
    test_refused_tables();
    test_tool_log(srv, &p);
    test_tool_progress(srv, &p);
    test_resources(srv, &p);
    test_subscriptions(srv, &p, &other);
    test_prompts(srv, &p);
    test_complete(srv, &p);
    probe_end(srv, &p);
    probe_end(srv, &other);
    sbx_mcp_server_free(srv);
    test_providers_only();
    fake_reset();
    return tap_done();
}
