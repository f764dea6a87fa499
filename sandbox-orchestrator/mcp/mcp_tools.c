/* mcp_tools.c - the sandbox tools an assistant sees: names, descriptions,
 * argument and result schemas, hints, and the two small rewrites between a
 * tool's arguments and its operation's (text <-> base64 file contents).
 *
 * The argument keys are those of ../ops.h, with two deliberate differences:
 * create_server takes no "owner" (the server sets it) and no "allow" (extra
 * hosts would widen the sandbox's allowlist beyond the presets the
 * administrator permits for MCP); its "secrets" may name only those in
 * mcp-secrets.  write_file also takes plain "content".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_server.h"

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* RFC 4648 section 4 base64 of len bytes; a new NUL-terminated string. */
static char *b64_encode(const unsigned char *in, size_t len)
{
    char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;

    if (!out)
        abort();
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;

        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        *o++ = b64_alphabet[v >> 18 & 63];
        *o++ = b64_alphabet[v >> 12 & 63];
        *o++ = i + 1 < len ? b64_alphabet[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? b64_alphabet[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64_alphabet, c) : NULL;

    return p ? (int)(p - b64_alphabet) : -1;
}

/* Decodes padded RFC 4648 base64.  Returns a new buffer (*outlen bytes, plus
 * a NUL), or NULL when the text is not base64. */
static unsigned char *b64_decode(const char *in, size_t len, size_t *outlen)
{
    unsigned char *out, *o;

    if (len % 4)
        return NULL;
    out = o = malloc(len / 4 * 3 + 1);
    if (!out)
        abort();
    for (size_t i = 0; i < len; i += 4) {
        int a = b64_value(in[i]), b = b64_value(in[i + 1]);
        int c = in[i + 2] == '=' ? 0 : b64_value(in[i + 2]);
        int d = in[i + 3] == '=' ? 0 : b64_value(in[i + 3]);
        int pad = (in[i + 2] == '=') + (in[i + 3] == '=');

        if (a < 0 || b < 0 || c < 0 || d < 0 || (pad && i + 4 != len) ||
            (in[i + 2] == '=' && in[i + 3] != '=')) {
            free(out);
            return NULL;
        }
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        *o++ = (unsigned char)(v >> 16);
        if (pad < 2)
            *o++ = (unsigned char)(v >> 8);
        if (pad < 1)
            *o++ = (unsigned char)v;
    }
    *o = '\0';
    *outlen = (size_t)(o - out);
    return out;
}

/* write_file: exactly one of "content" (text) and "content_base64"; the
 * operation takes base64. */
static int write_prepare(json_t *args, char *err, size_t errlen)
{
    json_t *text = json_object_get(args, "content");
    int has_b64 = json_object_get(args, "content_base64") != NULL;
    char *b64;

    if (!text == !has_b64) {
        snprintf(err, errlen,
                 "arguments: give exactly one of \"content\" (text) and \"content_base64\"");
        return -1;
    }
    if (!text)
        return 0;
    b64 = b64_encode((const unsigned char *)json_string_value(text), json_string_length(text));
    json_object_set_new(args, "content_base64", json_string(b64));
    json_object_del(args, "content");
    free(b64);
    return 0;
}

/* read_file: when the bytes are UTF-8 text (no NUL), add them as "content"
 * so an assistant need not decode base64 itself. */
static void read_finish(json_t *out)
{
    const char *b64 = json_string_value(json_object_get(out, "content_base64"));
    unsigned char *bytes;
    size_t n;
    json_t *text;

    if (!b64)
        return;
    bytes = b64_decode(b64, strlen(b64), &n);
    if (!bytes)
        return;
    if (!memchr(bytes, '\0', n) && (text = json_stringn((const char *)bytes, n)) != NULL)
        json_object_set_new(out, "content", text); /* json_stringn refuses bad UTF-8 */
    free(bytes);
}

#define NAME_ARG                                                                                   \
    "\"name\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The sandbox's name, "   \
    "as create_server or list_servers gave it.\"}"

static const char create_in[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 63, \"description\": "
    "\"Name of the new sandbox VM: lowercase letters, digits and hyphens (a DNS label), e.g. "
    "agent-fix-tests.\"},"
    "\"size\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"small or medium (sizes "
    "the administrator configured); sets cores and memory.\"},"
    "\"lifetime\": {\"type\": \"string\", \"description\": \"How long the sandbox lives before it "
    "is destroyed by itself, 1h to 24h, e.g. \\\"4h\\\" or \\\"90m\\\"; the administrator's "
    "default when omitted.\"},"
    "\"policy\": {\"type\": \"string\", \"description\": \"Egress allow-list preset: which hosts "
    "the sandbox may reach through the proxy. Only the presets listed are permitted.\"},"
    "\"secrets\": {\"type\": \"array\", \"maxItems\": 16, \"items\": {\"type\": \"string\"}, "
    "\"description\": \"API keys the sandbox may use, by name (e.g. anthropic). The key itself "
    "never enters the sandbox: its environment gets a placeholder (e.g. ANTHROPIC_API_KEY), which "
    "the egress proxy replaces with the real key in requests to the hosts the key is bound to. "
    "Only the names listed are permitted.\"}},"
    "\"required\": [\"name\", \"size\", \"policy\"], \"additionalProperties\": false}";

static const char create_out[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"vmid\": {\"description\": \"Proxmox VM id\"}, \"name\": {\"type\": \"string\"},"
    "\"node\": {\"type\": \"string\"}, \"address\": {\"type\": \"string\"},"
    "\"owner\": {\"type\": \"string\"}, \"policy\": {\"type\": \"string\"},"
    "\"expires\": {\"type\": \"string\", \"description\": \"RFC 3339 time of destruction\"},"
    "\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "\"ready_seconds\": {\"type\": \"number\"}}, \"required\": [\"name\"]}";

static const char list_in[] =
    "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";

static const char list_out[] =
    "{\"type\": \"object\", \"properties\": {\"sandboxes\": {\"type\": \"array\", \"items\": "
    "{\"type\": \"object\", \"properties\": {\"vmid\": {}, \"name\": {\"type\": \"string\"},"
    "\"node\": {\"type\": \"string\"}, \"owner\": {\"type\": \"string\"},"
    "\"size\": {\"type\": [\"string\", \"null\"], \"description\": \"The size line the "
    "VM's cores and memory match, null for none\"}, \"cores\": {\"type\": \"integer\"},"
    "\"memory_mib\": {\"type\": \"integer\"},"
    "\"policy\": {\"type\": \"string\"}, \"address\": {\"type\": \"string\"},"
    "\"created\": {\"type\": \"string\"}, \"expires\": {\"type\": \"string\"},"
    "\"secrets\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
    "\"grants\": {\"type\": \"array\", \"description\": \"Hosts granted by access requests, "
    "until they lapse\", \"items\": {\"type\": \"object\", \"properties\": {\"host\": "
    "{\"type\": \"string\"}, \"until\": {\"type\": \"string\"}}}},"
    "\"status\": {\"type\": \"string\"}}}}}, \"required\": [\"sandboxes\"]}";

static const char exec_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"command\": {\"type\": \"array\", \"minItems\": 1, \"items\": {\"type\": \"string\"}, "
    "\"description\": \"Program and arguments, run directly without a shell: use [\\\"sh\\\", "
    "\\\"-c\\\", \\\"cd /src && make test\\\"] for shell syntax.\"},"
    "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, \"description\": \"Seconds before the "
    "command is killed (timed_out is then true).\"},"
    "\"input\": {\"type\": \"string\", \"description\": \"Text given to the command on its "
    "standard input.\"}},"
    "\"required\": [\"name\", \"command\"], \"additionalProperties\": false}";

static const char exec_out[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"exitcode\": {\"type\": [\"integer\", \"null\"]}, \"stdout\": {\"type\": \"string\"},"
    "\"stderr\": {\"type\": \"string\"}, \"stdout_truncated\": {\"type\": \"boolean\"},"
    "\"stderr_truncated\": {\"type\": \"boolean\"}, \"timed_out\": {\"type\": \"boolean\"}}}";

static const char read_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"path\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"Absolute path of the "
    "file inside the sandbox.\"}},"
    "\"required\": [\"name\", \"path\"], \"additionalProperties\": false}";

static const char read_out[] =
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"},"
    "\"size\": {\"type\": \"integer\"}, \"content_base64\": {\"type\": \"string\"},"
    "\"content\": {\"type\": \"string\", \"description\": \"The bytes as text, present when they "
    "are UTF-8 without NUL bytes.\"}}, \"required\": [\"content_base64\"]}";

static const char write_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"path\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"Absolute path of the "
    "file inside the sandbox; an existing file is replaced.\"},"
    "\"content\": {\"type\": \"string\", \"description\": \"The new contents as text (UTF-8). "
    "Give this or content_base64.\"},"
    "\"content_base64\": {\"type\": \"string\", \"description\": \"The new contents as base64, "
    "for binary files. Give this or content.\"}},"
    "\"required\": [\"name\", \"path\"], \"additionalProperties\": false}";

static const char write_out[] =
    "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"},"
    "\"size\": {\"type\": \"integer\"}}}";

static const char extend_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"duration\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"How much longer "
    "the sandbox lives, e.g. \\\"30m\\\" or \\\"2h\\\"; the administrator's lifetime-max "
    "caps the total.\"}},"
    "\"required\": [\"name\", \"duration\"], \"additionalProperties\": false}";

static const char extend_out[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
    "\"expires\": {\"type\": \"string\"}}, \"required\": [\"expires\"]}";

static const char name_in[] = "{\"type\": \"object\", \"properties\": {" NAME_ARG "},"
                              "\"required\": [\"name\"], \"additionalProperties\": false}";

static const char destroy_out[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"vmid\": {},"
    "\"destroyed\": {\"type\": \"boolean\"}}, \"required\": [\"destroyed\"]}";

static const char snapshot_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"label\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"Name for the "
    "snapshot (letters, digits, - and _); one is made up when omitted.\"}},"
    "\"required\": [\"name\"], \"additionalProperties\": false}";

static const char rollback_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"label\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The snapshot to go "
    "back to, as snapshot_server or list_snapshots gave it.\"}},"
    "\"required\": [\"name\", \"label\"], \"additionalProperties\": false}";

static const char label_out[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
    "\"label\": {\"type\": \"string\"}}, \"required\": [\"label\"]}";

static const char snapshots_out[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
    "\"snapshots\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": "
    "{\"label\": {\"type\": \"string\"}, \"created\": {}}}}}, \"required\": [\"snapshots\"]}";

static const char fetch_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"repo\": {\"type\": \"string\", \"minLength\": 1, \"description\": \"The label of a "
    "repository the administrator configured (mcp-repo) and pushed into this sandbox; never a "
    "path.\"}},"
    "\"required\": [\"name\", \"repo\"], \"additionalProperties\": false}";

static const char fetch_out[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"},"
    "\"repo\": {\"type\": \"string\"}, \"fetched_into\": {\"type\": \"string\"},"
    "\"flagged\": {\"type\": \"integer\"}, \"branches\": {\"type\": \"array\", \"items\": "
    "{\"type\": \"object\", \"properties\": {\"branch\": {\"type\": \"string\"}, \"commit\": "
    "{\"type\": \"string\"}, \"base\": {\"type\": \"string\"}, \"commits\": {\"type\": "
    "\"integer\"}, \"stat\": {\"type\": \"string\"}, \"flags\": {\"type\": \"array\"}}}}},"
    "\"required\": [\"branches\"]}";

static const char access_in[] =
    "{\"type\": \"object\", \"properties\": {" NAME_ARG ","
    "\"host\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 299, \"description\": "
    "\"The host the sandbox was denied, as HOST or HOST:PORT (e.g. crates.io:443); *.DOMAIN for "
    "its subdomains. Ask for no more than the work needs.\"},"
    "\"why\": {\"type\": \"string\", \"minLength\": 1, \"maxLength\": 500, \"description\": "
    "\"What the host is needed for, in a sentence the person deciding can judge.\"},"
    "\"duration\": {\"type\": \"string\", \"description\": \"How long, e.g. 30m or 2h "
    "(default 1h; the administrator caps it). The grant lapses by itself.\"},"
    "\"methods\": {\"type\": \"string\", \"maxLength\": 63, \"description\": \"The HTTP "
    "methods the work needs, comma-separated (GET,HEAD). With neither methods nor paths, the "
    "grant asked for is the narrowest that covers the sandbox's newest denied request to the "
    "host: that method and the path's first two segments.\"},"
    "\"paths\": {\"type\": \"string\", \"maxLength\": 519, \"description\": \"Path globs the "
    "work needs, comma-separated: * within a segment, ** across segments (/repos/acme/**).\"},"
    "\"whole_host\": {\"type\": \"boolean\", \"description\": \"Ask for every request to the "
    "host, not the narrowest grant; say in why what needs it.\"}},"
    "\"required\": [\"name\", \"host\", \"why\"], \"additionalProperties\": false}";

static const char access_out[] =
    "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\"},"
    "\"name\": {\"type\": \"string\"}, \"host\": {\"type\": \"string\"},"
    "\"methods\": {\"type\": \"string\"}, \"paths\": {\"type\": \"string\"},"
    "\"asked\": {\"type\": \"string\", \"description\": \"what was asked, when narrowed\"},"
    "\"denial\": {\"type\": \"object\", \"description\": \"the denied request it was narrowed "
    "to\"},"
    "\"rule\": {\"type\": \"string\", \"description\": \"the policy line the grant adds\"},"
    "\"would_pass\": {\"type\": \"array\", \"items\": {\"type\": \"object\"}, "
    "\"description\": \"the sandbox's recent denials the grant lets pass\"},"
    "\"status\": {\"type\": \"string\", \"enum\": [\"pending\", \"approved\", \"denied\"]},"
    "\"until\": {\"type\": \"string\", \"description\": \"RFC 3339 time the grant lapses\"},"
    "\"by\": {\"type\": \"string\"}, \"owner_may_approve\": {\"type\": \"boolean\"},"
    "\"note\": {\"type\": \"string\"}, \"next\": {\"type\": \"string\"}},"
    "\"required\": [\"id\", \"status\", \"next\"]}";

/* Hints (MCP ToolAnnotations); no tool reaches beyond the Proxmox pool. */
#define HINTS(ro, destructive, idempotent)                                                         \
    "{\"readOnlyHint\": " #ro ", \"destructiveHint\": " #destructive                               \
    ", \"idempotentHint\": " #idempotent ", \"openWorldHint\": false}"

size_t sbx_mcp_tools_sandbox(const struct sbx_mcp_ops *ops, struct sbx_mcp_tool *tools, size_t cap)
{
    const struct sbx_mcp_tool all[] = {
        {"create_server", "Create a sandbox VM",
         "Creates a disposable sandbox VM (a linked clone of the golden template) whose only "
         "network path is the egress proxy, with the chosen allow-list policy, and starts it. "
         "Takes about a minute; answers with its name, address and expiry time. The VM is "
         "destroyed by itself when its lifetime ends.",
         create_in, create_out, HINTS(false, false, false), ops->create,
         SBX_MCP_TOOL_PRESET_POLICY | SBX_MCP_TOOL_SETS_OWNER | SBX_MCP_TOOL_MCP_SECRETS |
             SBX_MCP_TOOL_CHANGES | SBX_MCP_TOOL_CHANGES_SET,
         NULL, NULL},
        {"list_servers", "List sandbox VMs",
         "Lists the sandbox VMs with their owner, policy, address, status and expiry time.",
         list_in, list_out, HINTS(true, false, true), ops->list, 0, NULL, NULL},
        {"run_command", "Run a command in a sandbox",
         "Runs a program inside a sandbox through the QEMU guest agent (not over the network) "
         "and waits for it: answers with its exit code, standard output and standard error. "
         "Output past the agent's cap is cut (the *_truncated flags say so).",
         exec_in, exec_out, HINTS(false, true, false), ops->exec, SBX_MCP_TOOL_OWN_SBX, NULL, NULL},
        {"read_file", "Read a file from a sandbox",
         "Reads a file inside a sandbox through the guest agent. Answers with its size and "
         "bytes as base64, and as text in \"content\" when it is UTF-8.",
         read_in, read_out, HINTS(true, false, true), ops->read, SBX_MCP_TOOL_OWN_SBX, NULL,
         read_finish},
        {"write_file", "Write a file into a sandbox",
         "Writes a file inside a sandbox through the guest agent, replacing any file at that "
         "path. Give the contents as text in \"content\" or as base64 in \"content_base64\".",
         write_in, write_out, HINTS(false, true, true), ops->write, SBX_MCP_TOOL_OWN_SBX,
         write_prepare, NULL},
        {"extend_server", "Extend a sandbox's lifetime",
         "Pushes back the time at which a sandbox is destroyed by itself, up to the "
         "administrator's maximum lifetime. Answers with the new expiry time.",
         extend_in, extend_out, HINTS(false, false, false), ops->extend, SBX_MCP_TOOL_CHANGES, NULL,
         NULL},
        {"destroy_server", "Destroy a sandbox VM",
         "Stops and deletes a sandbox VM with its disks, and removes its binding from the "
         "egress proxy. Everything inside it is lost.",
         name_in, destroy_out, HINTS(false, true, true), ops->destroy,
         SBX_MCP_TOOL_CHANGES | SBX_MCP_TOOL_CHANGES_SET, NULL, NULL},
        {"snapshot_server", "Snapshot a sandbox",
         "Takes a snapshot of a sandbox's disks (not its memory) that rollback_server can go "
         "back to. The administrator caps how many a sandbox may keep.",
         snapshot_in, label_out, HINTS(false, false, false), ops->snapshot, SBX_MCP_TOOL_CHANGES,
         NULL, NULL},
        {"rollback_server", "Roll a sandbox back to a snapshot",
         "Hard-stops a sandbox and returns its disks to a snapshot, then starts it again. "
         "Everything written since the snapshot is lost.",
         rollback_in, label_out, HINTS(false, true, true), ops->rollback, SBX_MCP_TOOL_CHANGES,
         NULL, NULL},
        {"list_snapshots", "List a sandbox's snapshots",
         "Lists the snapshots of a sandbox that rollback_server can go back to.", name_in,
         snapshots_out, HINTS(true, false, true), ops->snapshots, 0, NULL, NULL},
    };
    const struct sbx_mcp_tool fetch = {
        "fetch_changes",
        "Fetch a sandbox's commits for review",
        "Fetches the branches of a repository the administrator pushed into a sandbox back to "
        "the host, into refs/remotes/sandbox/NAME/ only (nothing is merged, no working tree or "
        "config is written), and answers with each branch's diff stat against the pushed base "
        "and the flagged changes (protected paths such as CI workflows, hooks, agent "
        "instructions and lockfiles; symlinks out of the tree). A human applies them.",
        fetch_in,
        fetch_out,
        HINTS(true, false, true),
        ops->fetch_changes,
        0,
        NULL,
        NULL};
    const struct sbx_mcp_tool access = {
        "request_access",
        "Ask for a host a sandbox was denied",
        "When the egress proxy refused a host the task needs (403 with X-Egress-Deny: "
        "not_allowed, or a TLS connection closed at once; sandbox://NAME/denials lists them), "
        "ask for it here instead of working around the wall. Hosts the administrator lists are "
        "granted at once; for some, the user is asked to approve; the rest wait for an "
        "administrator. A grant lapses by itself.",
        access_in,
        access_out,
        HINTS(false, false, true),
        sbx_mcp_request_access,
        SBX_MCP_TOOL_UNLOCKED | SBX_MCP_TOOL_CHANGES,
        NULL,
        NULL};
    size_t n = sizeof all / sizeof all[0];

    if (n > cap)
        n = cap;
    memcpy(tools, all, n * sizeof all[0]);
    if (ops->fetch_changes && n < cap)
        tools[n++] = fetch;
    if (ops->access_request && n < cap)
        tools[n++] = access;
    return n;
}
