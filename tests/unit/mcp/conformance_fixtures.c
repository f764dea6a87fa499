/* conformance_fixtures.c - the MCP conformance suite's fixtures (see
 * conformance_fixtures.h), as its scenarios describe them
 * (the server scenarios of the suite, 0.1.16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance_fixtures.h"

#define STEP_MS           50    /* the scenarios' "~50ms" between messages */
#define ELICIT_TIMEOUT_MS 60000 /* the suite's client answers at once */

const char conformance_png[] =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/* 8 samples of silence, 8 kHz mono 8-bit PCM. */
static const char wav[] =
    "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

static const char no_args[] = "{\"type\": \"object\", \"properties\": {}}";

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* A CallToolResult of the one content block b (stolen). */
static int content1(json_t **out, json_t *b)
{
    *out = json_pack("{s:[o]}", "content", b);
    return 0;
}

static json_t *text_block(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

static int simple_text(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    return content1(out, text_block("This is a simple text response for testing."));
}

static int image(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    return content1(out, json_pack("{s:s, s:s, s:s}", "type", "image", "data", conformance_png,
                                   "mimeType", "image/png"));
}

static int audio(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    return content1(
        out, json_pack("{s:s, s:s, s:s}", "type", "audio", "data", wav, "mimeType", "audio/wav"));
}

static json_t *resource_block(const char *uri, const char *mime, const char *text)
{
    return json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "resource", "resource", "uri", uri,
                     "mimeType", mime, "text", text);
}

static int embedded(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    return content1(out, resource_block("test://embedded-resource", "text/plain",
                                        "This is an embedded resource content."));
}

static int mixed(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)err, (void)errlen;
    *out = json_pack("{s:[o, {s:s, s:s, s:s}, o]}", "content",
                     text_block("Multiple content types test:"), "type", "image", "data",
                     conformance_png, "mimeType", "image/png",
                     resource_block("test://mixed-content-resource", "application/json",
                                    "{\"test\":\"data\",\"value\":123}"));
    return 0;
}

static int with_logging(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    struct sbx_mcp_session *sess = sbx_mcp_current_session();

    (void)s, (void)args, (void)err, (void)errlen;
    sbx_mcp_session_log(sess, SBX_MCP_LOG_INFO, "conformance", "Tool execution started");
    pause_ms(STEP_MS);
    sbx_mcp_session_log(sess, SBX_MCP_LOG_INFO, "conformance", "Tool processing data");
    pause_ms(STEP_MS);
    sbx_mcp_session_log(sess, SBX_MCP_LOG_INFO, "conformance", "Tool execution completed");
    return content1(out, text_block("Tool with logging executed successfully"));
}

static int error_handling(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args, (void)out;
    snprintf(err, errlen, "This tool intentionally returns an error for testing");
    return -1;
}

static int with_progress(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    struct sbx_mcp_session *sess = sbx_mcp_current_session();

    (void)s, (void)args, (void)err, (void)errlen;
    for (int p = 0; p <= 100; p += 50) {
        if (p > 0)
            pause_ms(STEP_MS);
        sbx_mcp_session_progress(sess, p, 100, NULL);
    }
    return content1(out, text_block("Tool with progress executed successfully"));
}

/* Asks the client to fill in schema (JSON text) and answers what it said
 * as text, `prefix` first. */
static int elicit(const char *message, const char *schema_text, const char *prefix, json_t **out,
                  char *err, size_t errlen)
{
    static const char *const actions[] = {"accept", "decline", "cancel"};
    json_t *schema = json_loads(schema_text, 0, NULL), *content = NULL;
    char *dump, text[2048];
    int a = sbx_mcp_elicit(sbx_mcp_current_session(), message, schema, ELICIT_TIMEOUT_MS, &content,
                           err, errlen);

    json_decref(schema);
    if (a == SBX_MCP_ELICIT_ERROR)
        return -1;
    dump = json_dumps(content ? content : json_object(), JSON_COMPACT);
    snprintf(text, sizeof text, "%saction=%s, content=%s", prefix, actions[a], dump ? dump : "{}");
    free(dump);
    json_decref(content);
    return content1(out, text_block(text));
}

static int elicitation(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s;
    return elicit(json_string_value(json_object_get(args, "message")),
                  "{\"type\": \"object\", \"properties\": {"
                  "\"username\": {\"type\": \"string\", \"description\": \"User's response\"},"
                  "\"email\": {\"type\": \"string\", \"description\": \"User's email address\"}},"
                  "\"required\": [\"username\", \"email\"]}",
                  "User response: ", out, err, errlen);
}

static int sep1034(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args;
    return elicit(
        "Please review and update the form fields with defaults",
        "{\"type\": \"object\", \"properties\": {"
        "\"name\": {\"type\": \"string\", \"description\": \"User name\", \"default\": \"John "
        "Doe\"},"
        "\"age\": {\"type\": \"integer\", \"description\": \"User age\", \"default\": 30},"
        "\"score\": {\"type\": \"number\", \"description\": \"User score\", \"default\": 95.5},"
        "\"status\": {\"type\": \"string\", \"description\": \"User status\", "
        "\"enum\": [\"active\", \"inactive\", \"pending\"], \"default\": \"active\"},"
        "\"verified\": {\"type\": \"boolean\", \"description\": \"Verification status\", "
        "\"default\": true}}, \"required\": []}",
        "Elicitation completed: ", out, err, errlen);
}

static int sep1330(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    (void)s, (void)args;
    return elicit(
        "Please select options from the enum fields",
        "{\"type\": \"object\", \"properties\": {"
        "\"untitledSingle\": {\"type\": \"string\", \"description\": \"Select one option\", "
        "\"enum\": [\"option1\", \"option2\", \"option3\"]},"
        "\"titledSingle\": {\"type\": \"string\", \"description\": \"Select one option with "
        "titles\", \"oneOf\": [{\"const\": \"value1\", \"title\": \"First Option\"}, "
        "{\"const\": \"value2\", \"title\": \"Second Option\"}, "
        "{\"const\": \"value3\", \"title\": \"Third Option\"}]},"
        "\"legacyEnum\": {\"type\": \"string\", \"description\": \"Select one option (legacy)\", "
        "\"enum\": [\"opt1\", \"opt2\", \"opt3\"], "
        "\"enumNames\": [\"Option One\", \"Option Two\", \"Option Three\"]},"
        "\"untitledMulti\": {\"type\": \"array\", \"description\": \"Select multiple options\", "
        "\"minItems\": 1, \"maxItems\": 3, \"items\": {\"type\": \"string\", "
        "\"enum\": [\"option1\", \"option2\", \"option3\"]}},"
        "\"titledMulti\": {\"type\": \"array\", \"description\": \"Select multiple options with "
        "titles\", \"minItems\": 1, \"maxItems\": 3, \"items\": {\"anyOf\": ["
        "{\"const\": \"value1\", \"title\": \"First Choice\"}, "
        "{\"const\": \"value2\", \"title\": \"Second Choice\"}, "
        "{\"const\": \"value3\", \"title\": \"Third Choice\"}]}}}, \"required\": []}",
        "Elicitation completed: ", out, err, errlen);
}

static int schema_2020_12(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    char *dump = json_dumps(args, JSON_COMPACT), text[1024];

    (void)s, (void)err, (void)errlen;
    snprintf(text, sizeof text, "JSON Schema 2020-12 tool called with: %s", dump ? dump : "{}");
    free(dump);
    return content1(out, text_block(text));
}

#define NO_ARGS_TOOL(name, title, fn, flags)                                                       \
    {                                                                                              \
        name, title, title, no_args, NULL, NULL, fn, SBX_MCP_TOOL_CONTENT | (flags), NULL, NULL    \
    }

const struct sbx_mcp_tool conformance_tools[] = {
    NO_ARGS_TOOL("test_simple_text", "Answers a simple text", simple_text, 0),
    NO_ARGS_TOOL("test_image_content", "Answers an image", image, 0),
    NO_ARGS_TOOL("test_audio_content", "Answers audio", audio, 0),
    NO_ARGS_TOOL("test_embedded_resource", "Answers an embedded resource", embedded, 0),
    NO_ARGS_TOOL("test_multiple_content_types", "Answers text, an image and a resource", mixed, 0),
    NO_ARGS_TOOL("test_tool_with_logging", "Sends three log messages", with_logging, 0),
    NO_ARGS_TOOL("test_error_handling", "Always fails", error_handling, 0),
    NO_ARGS_TOOL("test_tool_with_progress", "Sends progress 0, 50 and 100 of 100", with_progress,
                 0),
    {"test_elicitation", "Asks the user for a name and an address",
     "Asks the user for a name and an address",
     "{\"type\": \"object\", \"properties\": "
     "{\"message\": {\"type\": \"string\"}}, \"required\": [\"message\"]}",
     NULL, NULL, elicitation, SBX_MCP_TOOL_CONTENT | SBX_MCP_TOOL_UNLOCKED, NULL, NULL},
    NO_ARGS_TOOL("test_elicitation_sep1034_defaults", "Asks with default values (SEP-1034)",
                 sep1034, SBX_MCP_TOOL_UNLOCKED),
    NO_ARGS_TOOL("test_elicitation_sep1330_enums", "Asks with every enum form (SEP-1330)", sep1330,
                 SBX_MCP_TOOL_UNLOCKED),
    {"json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features",
     "Tool with JSON Schema 2020-12 features",
     "{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\", \"type\": \"object\", "
     "\"$defs\": {\"address\": {\"type\": \"object\", \"properties\": {\"street\": {\"type\": "
     "\"string\"}, \"city\": {\"type\": \"string\"}}}}, \"properties\": {\"name\": {\"type\": "
     "\"string\"}, \"address\": {\"$ref\": \"#/$defs/address\"}}, \"additionalProperties\": false}",
     NULL, NULL, schema_2020_12, SBX_MCP_TOOL_CONTENT, NULL, NULL},
};

const size_t conformance_ntools = sizeof conformance_tools / sizeof conformance_tools[0];

/* Resources. */

static const char template_prefix[] = "test://template/", template_suffix[] = "/data";

/* The {id} of test://template/{id}/data into id (idlen bytes), or -1. */
static int template_id(const char *uri, char *id, size_t idlen)
{
    size_t n = strlen(uri), pre = sizeof template_prefix - 1, suf = sizeof template_suffix - 1;

    if (n <= pre + suf || strncmp(uri, template_prefix, pre) != 0 ||
        strcmp(uri + n - suf, template_suffix) != 0 || n - pre - suf >= idlen)
        return -1;
    memcpy(id, uri + pre, n - pre - suf);
    id[n - pre - suf] = '\0';
    return strchr(id, '/') ? -1 : 0;
}

static int read_resource(const char *uri, json_t **contents, char *err, size_t errlen)
{
    char id[64], text[256];

    (void)err, (void)errlen;
    if (strcmp(uri, "test://static-text") == 0)
        *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "text/plain", "text",
                              "This is the content of the static text resource.");
    else if (strcmp(uri, "test://static-binary") == 0)
        *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "image/png", "blob",
                              conformance_png);
    else if (strcmp(uri, "test://watched-resource") == 0)
        *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "text/plain", "text",
                              "Watched resource content");
    else if (template_id(uri, id, sizeof id) == 0) {
        json_t *v;
        char *dump;

        snprintf(text, sizeof text, "Data for ID: %s", id);
        v = json_pack("{s:s, s:b, s:s}", "id", id, "templateTest", 1, "data", text);
        dump = json_dumps(v, JSON_COMPACT);
        json_decref(v);
        *contents = json_pack("[{s:s, s:s, s:s}]", "uri", uri, "mimeType", "application/json",
                              "text", dump ? dump : "{}");
        free(dump);
    } else
        return SBX_MCP_NOT_PROVIDED;
    return SBX_MCP_PROVIDED;
}

static int subscribable(const char *uri)
{
    return strcmp(uri, "test://watched-resource") == 0;
}

/* Prompts. */

/* A GetPromptResult of the given messages (an array, stolen). */
static json_t *prompt_result(const char *description, json_t *messages)
{
    return json_pack("{s:s, s:o}", "description", description, "messages", messages);
}

static json_t *user(json_t *content)
{
    return json_pack("{s:s, s:o}", "role", "user", "content", content);
}

static int get_prompt(const char *name, const json_t *args, json_t **result, char *err,
                      size_t errlen)
{
    char text[1024];

    if (strcmp(name, "test_simple_prompt") == 0) {
        *result = prompt_result("A simple prompt",
                                json_pack("[o]", user(text_block("This is a simple prompt for "
                                                                 "testing."))));
    } else if (strcmp(name, "test_prompt_with_arguments") == 0) {
        snprintf(text, sizeof text, "Prompt with arguments: arg1='%s', arg2='%s'",
                 json_string_value(json_object_get(args, "arg1")),
                 json_string_value(json_object_get(args, "arg2")));
        *result =
            prompt_result("A prompt with arguments", json_pack("[o]", user(text_block(text))));
    } else if (strcmp(name, "test_prompt_with_embedded_resource") == 0) {
        *result = prompt_result(
            "A prompt with an embedded resource",
            json_pack("[o, o]",
                      user(resource_block(json_string_value(json_object_get(args, "resourceUri")),
                                          "text/plain", "Embedded resource content for testing.")),
                      user(text_block("Please process the embedded resource above."))));
    } else if (strcmp(name, "test_prompt_with_image") == 0) {
        *result = prompt_result("A prompt with an image",
                                json_pack("[o, o]",
                                          user(json_pack("{s:s, s:s, s:s}", "type", "image", "data",
                                                         conformance_png, "mimeType", "image/png")),
                                          user(text_block("Please analyze the image above."))));
    } else {
        snprintf(err, errlen, "no such prompt");
        return SBX_MCP_PROVIDE_FAILED;
    }
    return SBX_MCP_PROVIDED;
}

static int complete(const char *prompt, const char *arg, json_t **values)
{
    if (strcmp(prompt, "test_prompt_with_arguments") != 0)
        return SBX_MCP_NOT_PROVIDED;
    (void)arg;
    *values = json_pack("[s, s, s, s, s]", "paris", "park", "party", "test", "testing");
    return SBX_MCP_PROVIDED;
}

const struct sbx_mcp_provider conformance_provider = {
    .resources =
        "[{\"uri\": \"test://static-text\", \"name\": \"static-text\", \"title\": \"Static Text "
        "Resource\", \"description\": \"A static text resource\", \"mimeType\": \"text/plain\"},"
        "{\"uri\": \"test://static-binary\", \"name\": \"static-binary\", \"title\": \"Static "
        "Binary Resource\", \"description\": \"A 1x1 PNG image\", \"mimeType\": \"image/png\"},"
        "{\"uri\": \"test://watched-resource\", \"name\": \"watched-resource\", \"title\": "
        "\"Watched Resource\", \"description\": \"A resource that may be subscribed to\", "
        "\"mimeType\": \"text/plain\"}]",
    .templates = "[{\"uriTemplate\": \"test://template/{id}/data\", \"name\": \"template\", "
                 "\"title\": \"Template Resource\", \"description\": \"Data for an id\", "
                 "\"mimeType\": \"application/json\"}]",
    .prompts =
        "[{\"name\": \"test_simple_prompt\", \"description\": \"A simple prompt without "
        "arguments\"},"
        "{\"name\": \"test_prompt_with_arguments\", \"description\": \"A prompt with two "
        "arguments\", \"arguments\": [{\"name\": \"arg1\", \"description\": \"First test "
        "argument\", \"required\": true}, {\"name\": \"arg2\", \"description\": \"Second test "
        "argument\", \"required\": true}]},"
        "{\"name\": \"test_prompt_with_embedded_resource\", \"description\": \"A prompt that "
        "embeds a resource\", \"arguments\": [{\"name\": \"resourceUri\", \"description\": "
        "\"URI of the resource to embed\", \"required\": true}]},"
        "{\"name\": \"test_prompt_with_image\", \"description\": \"A prompt with an image\"}]",
    .read = read_resource,
    .subscribable = subscribable,
    .get = get_prompt,
    .complete = complete,
};
