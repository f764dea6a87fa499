/*
 * fuzz_mcp_rpc.c - JSON-RPC / MCP message handling of `sandboxctl mcp`
 * (sandbox-orchestrator/mcp/mcp_server.c) over the test-only operations of
 * tests/unit/mcp/fake_ops.c: no Proxmox.
 *
 * The input is one session: messages, one per line.  When the first byte is
 * odd the session starts initialized (initialize and
 * notifications/initialized sent first), so the tools are in reach.
 *
 * Properties, for every line:
 *   - a line that does not parse as a JSON-RPC message gets one error
 *     response, its id null or the id the line carried;
 *   - a request (a "method" and an "id") gets exactly one response with an
 *     equal id; a notification or a response gets none;
 *   - every response is JSON-RPC 2.0: "jsonrpc": "2.0", the id, and either
 *     a "result" object or an "error" with an integer code and a string
 *     message, never both; it serializes and reads back the same;
 *   - a tools/call result has a content array and a boolean isError;
 *   - nothing leaks (LeakSanitizer), whatever the operations answered.
 * And the same input through the stdio transport: one response line per
 * request line (and per malformed line), in order, with the same ids.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_ops.h"
#include "fuzz_check.h"

#define MAX_LINES 64

static const char init_lines[] =
    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"fuzz\",\"version\":\"1\"}}}\n"
    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";

static struct sbx_mcp_server *srv;
static struct sbx_mcp_tool tools[16];
static FILE *devnull;

static struct sbx_mcp_server *server(void)
{
    static const char *const presets[] = {"balanced", "locked", NULL};
    char err[256];

    if (srv)
        return srv;
    devnull = fopen("/dev/null", "w");
    json_object_seed(1);
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&fake_ops, tools, 16),
        .presets = presets,
        .owner = "fuzz-owner",
        .version = "0.0-fuzz",
        .log = devnull,
    };
    srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    CHECK(srv != NULL, "the tool table: %s", err);
    return srv;
}

/* resp is one JSON-RPC 2.0 response; its id equals id (NULL: null). */
static void check_response(const json_t *resp, const json_t *id, const char *method)
{
    const json_t *result = json_object_get(resp, "result"), *error = json_object_get(resp, "error");
    const json_t *rid = json_object_get(resp, "id");

    CHECK(json_is_object(resp), "a response that is not an object");
    CHECK(json_is_string(json_object_get(resp, "jsonrpc")) &&
              strcmp(json_string_value(json_object_get(resp, "jsonrpc")), "2.0") == 0,
          "jsonrpc is not \"2.0\"");
    CHECK(rid && (id ? json_equal(rid, id) : json_is_null(rid)), "the response's id differs");
    CHECK(!result != !error, "result %p and error %p", (const void *)result, (const void *)error);
    CHECK(json_object_size(resp) == 3, "%zu members in a response", json_object_size(resp));
    if (error) {
        CHECK(json_is_integer(json_object_get(error, "code")) &&
                  json_is_string(json_object_get(error, "message")),
              "an error without an integer code and a string message");
    } else {
        CHECK(json_is_object(result), "a result that is not an object");
        if (method && strcmp(method, "tools/call") == 0)
            CHECK(json_is_array(json_object_get(result, "content")) &&
                      json_is_boolean(json_object_get(result, "isError")),
                  "a tools/call result without content and isError");
    }
    char *text = json_dumps(resp, JSON_COMPACT);
    CHECK(text != NULL && strchr(text, '\n') == NULL, "a response that does not serialize");
    json_t *back = json_loads(text, 0, NULL);
    CHECK(back && json_equal(back, resp), "a response that does not read back");
    json_decref(back);
    free(text);
}

/* The id a line carries, if it parses as an object with a valid one (new
 * reference), else NULL. */
static json_t *line_id(const char *line, size_t len)
{
    json_t *j = json_loadb(line, len, JSON_DECODE_ANY, NULL), *id = NULL;

    if (json_is_object(j)) {
        id = json_object_get(j, "id");
        id = json_is_string(id) || json_is_integer(id) ? json_incref(id) : NULL;
    }
    json_decref(j);
    return id;
}

static int blank(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", s[i]))
            return 0;
    return 1;
}

/* One line, handled as the transports do; returns the id the answer must
 * carry in *want (new reference, or NULL for null) and whether one is due. */
static int handle_line(struct sbx_mcp_session *sess, const char *line, size_t len, json_t **want)
{
    json_t *msg, *reply;

    *want = NULL;
    if (sbx_mcp_parse(line, len, &msg, &reply) == -1) {
        const json_t *rid = json_object_get(reply, "id");
        json_t *id = line_id(line, len);
        CHECK(reply != NULL, "a malformed line without an error response");
        CHECK(json_object_get(reply, "error") != NULL, "a malformed line answered with a result");
        check_response(reply, json_is_null(rid) ? NULL : id, NULL);
        *want = json_is_null(rid) ? NULL : json_incref(id);
        json_decref(id);
        json_decref(reply);
        return 1;
    }
    const json_t *id = json_object_get(msg, "id");
    const char *method = json_string_value(json_object_get(msg, "method"));
    reply = sbx_mcp_handle(srv, sess, msg);
    if (method && id) {
        CHECK(reply != NULL, "request %s without a response", method);
        check_response(reply, id, method);
        *want = json_incref((json_t *)id);
    } else {
        CHECK(reply == NULL, "a notification or a response answered");
    }
    json_decref(reply);
    json_decref(msg);
    return method && id;
}

/* The input through the stdio transport: its answers, line by line, must
 * carry the ids handle_line() said, in order. */
static void check_stdio(const char *input, size_t len, json_t **ids, int *due, int n)
{
    int in = memfd_create("in", 0), out = memfd_create("out", 0);
    CHECK(in != -1 && out != -1, "memfd_create");
    CHECK(write(in, input, len) == (ssize_t)len, "write");
    lseek(in, 0, SEEK_SET);
    fake_reset();
    CHECK(sbx_mcp_stdio_run(srv, in, out) == 0, "the stdio transport failed");
    off_t size = lseek(out, 0, SEEK_END);
    char *text = malloc((size_t)size + 1);
    CHECK(pread(out, text, (size_t)size, 0) == size, "read back");
    text[size] = '\0';
    char *p = text;
    for (int i = 0; i < n; i++) {
        if (!due[i])
            continue;
        char *nl = strchr(p, '\n');
        CHECK(nl != NULL, "stdio: answer %d missing", i);
        json_t *resp = json_loadb(p, (size_t)(nl - p), 0, NULL);
        CHECK(resp != NULL, "stdio: answer %d is not JSON", i);
        const json_t *rid = json_object_get(resp, "id");
        CHECK(ids[i] ? json_equal(rid, ids[i]) : json_is_null(rid), "stdio: answer %d's id", i);
        json_decref(resp);
        p = nl + 1;
    }
    CHECK(*p == '\0', "stdio: more answers than requests: %.80s", p);
    free(text);
    close(in);
    close(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbx_mcp_session sess = {0};
    json_t *ids[MAX_LINES];
    int due[MAX_LINES], n = 0;

    if (size == 0 || size > 16384)
        return 0;
    server();
    fake_reset();
    size_t pre = data[0] & 1 ? sizeof init_lines - 1 : 0;
    char *input = malloc(pre + size);
    memcpy(input, init_lines, pre);
    memcpy(input + pre, data + 1, size - 1);
    size_t len = pre + size - 1;

    /* Lines as the stdio transport cuts them; a last one without its
     * newline is dropped there, so here too. */
    for (size_t start = 0; start < len && n < MAX_LINES;) {
        const char *nl = memchr(input + start, '\n', len - start);
        if (!nl)
            break;
        size_t end = (size_t)(nl - input);
        if (!blank(input + start, end - start)) {
            due[n] = handle_line(&sess, input + start, end - start, &ids[n]);
            n++;
        }
        start = end + 1;
    }
    /* The session leaves the server's registry before its memory goes. */
    sbx_mcp_session_end(srv, &sess);
    if (n < MAX_LINES) /* stdio sees every line; compare only when we saw them all */
        check_stdio(input, len, ids, due, n);
    for (int i = 0; i < n; i++)
        json_decref(ids[i]);
    fake_reset();
    free(input);
    return 0;
}
