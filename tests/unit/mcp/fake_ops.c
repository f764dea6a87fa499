/* fake_ops.c - test-only operations with the contract of ops.h: each checks
 * its arguments as the real ones do, keeps sandboxes and their files in
 * memory, and fails with a one-line reason where the real one would. */
#include <stdio.h>
#include <string.h>

#include "fake_ops.h"

#define MAX_BOXES 16

json_t *fake_last_args;
int fake_calls;
static sbx_progress_fn progress_fn;
static void *progress_arg;
static json_t *boxes; /* name -> {vmid, owner, policy, expires, files: {path: b64}, snaps: []} */
static int next_vmid = 100;

void fake_reset(void)
{
    json_decref(fake_last_args);
    json_decref(boxes);
    fake_last_args = NULL;
    boxes = NULL;
    fake_calls = 0;
    next_vmid = 100;
}

/* Records the call; checks that args holds only the allowed keys. */
static int begin(json_t *args, const char *const *allowed, char *err, size_t errlen)
{
    const char *k;
    json_t *v;

    fake_calls++;
    json_decref(fake_last_args);
    fake_last_args = json_deep_copy(args);
    if (!boxes)
        boxes = json_object();
    json_object_foreach(args, k, v)
    {
        int known = 0;

        for (const char *const *a = allowed; *a; a++)
            known |= strcmp(*a, k) == 0;
        if (!known) {
            snprintf(err, errlen, "unknown argument '%s'", k);
            return -1;
        }
    }
    return 0;
}

static const char *str(json_t *args, const char *key, char *err, size_t errlen)
{
    const char *v = json_string_value(json_object_get(args, key));

    if (!v)
        snprintf(err, errlen, "missing argument '%s'", key);
    return v;
}

/* The sandbox named by args.name, or NULL with err filled. */
static json_t *box(json_t *args, char *err, size_t errlen)
{
    const char *name = str(args, "name", err, errlen);
    json_t *b = name ? json_object_get(boxes, name) : NULL;

    if (name && !b)
        snprintf(err, errlen, "no sandbox named '%s' (list_servers shows them)", name);
    return b;
}

static int fake_create(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name",   "size",  "lifetime", "owner",
                                       "policy", "allow", "secrets",  NULL};
    const char *name, *owner, *policy;
    char addr[32];

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(name = str(args, "name", err, errlen)) ||
        !(owner = str(args, "owner", err, errlen)) || !(policy = str(args, "policy", err, errlen)))
        return -1;
    if (strcmp(name, "too-big") == 0) {
        snprintf(err, errlen,
                 "memory guard: 20480 MiB in use + 4096 MiB asked > "
                 "max-total-memory-mib 20480");
        return -1;
    }
    if (json_object_get(boxes, name) || json_object_size(boxes) >= MAX_BOXES) {
        snprintf(err, errlen, "a sandbox named '%s' exists already", name);
        return -1;
    }
    snprintf(addr, sizeof addr, "10.99.0.%d", next_vmid - 89);
    json_object_set_new(boxes, name,
                        json_pack("{s:i, s:s, s:s, s:s, s:s, s:{}, s:[]}", "vmid", next_vmid,
                                  "owner", owner, "policy", policy, "address", addr, "expires",
                                  "2030-01-01T04:00:00Z", "files", "snaps"));
    *out = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:f}", "vmid", next_vmid++, "name", name,
                     "node", "pve1", "address", addr, "owner", owner, "policy", policy, "expires",
                     "2030-01-01T04:00:00Z", "ready_seconds", 1.5);
    return 0;
}

static int fake_list(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    const char *name;
    json_t *b, *list;

    (void)s;
    if (begin(args, keys, err, errlen) == -1)
        return -1;
    list = json_array();
    json_object_foreach(boxes, name, b)
    {
        json_array_append_new(list, json_pack("{s:O, s:s, s:s, s:O, s:O, s:O, s:s, s:O, s:s}",
                                              "vmid", json_object_get(b, "vmid"), "name", name,
                                              "node", "pve1", "owner", json_object_get(b, "owner"),
                                              "policy", json_object_get(b, "policy"), "address",
                                              json_object_get(b, "address"), "created",
                                              "2030-01-01T00:00:00Z", "expires",
                                              json_object_get(b, "expires"), "status", "running"));
    }
    *out = json_pack("{s:o}", "sandboxes", list);
    return 0;
}

void fake_progress_set(struct sbx *s, sbx_progress_fn fn, void *arg)
{
    (void)s;
    progress_fn = fn;
    progress_arg = arg;
}

/* Tells the listener, if any, of step "run" in phase. */
static void progress(enum sbx_progress_phase phase, double seconds)
{
    struct sbx_progress_event ev = {"run", phase, seconds, seconds, 0, 0, 0, 0};

    if (progress_fn)
        progress_fn(progress_arg, &ev);
}

/* exec: "echo" prints its arguments, "false" exits 1, anything else 127;
 * it reports a step "run" (a start, a tick, an end) as run_command's. */
static int fake_exec(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "command", "timeout", "input", NULL};
    json_t *cmd = json_object_get(args, "command"), *v;
    char buf[1024] = "";
    const char *prog;
    size_t i, off = 0;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !box(args, err, errlen))
        return -1;
    prog = json_string_value(json_array_get(cmd, 0));
    if (!prog) {
        snprintf(err, errlen, "command: expected an array of strings");
        return -1;
    }
    progress(SBX_PROGRESS_START, 0);
    progress(SBX_PROGRESS_TICK, 3);
    progress(SBX_PROGRESS_END, 3.5);
    json_array_foreach(cmd, i, v) if (i > 0 && off < sizeof buf) off += (size_t)snprintf(
        buf + off, sizeof buf - off, "%s%s", i > 1 ? " " : "", json_string_value(v));
    if (strcmp(prog, "echo") == 0 && off < sizeof buf - 1)
        strcat(buf, "\n");
    *out = json_pack(
        "{s:i, s:s, s:s, s:b, s:b, s:b}", "exitcode",
        strcmp(prog, "echo") == 0    ? 0
        : strcmp(prog, "false") == 0 ? 1
                                     : 127,
        "stdout", strcmp(prog, "echo") == 0 ? buf : "", "stderr",
        strcmp(prog, "echo") == 0 || strcmp(prog, "false") == 0 ? "" : "command not found\n",
        "stdout_truncated", 0, "stderr_truncated", 0, "timed_out", 0);
    return 0;
}

static int fake_read(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "path", NULL};
    json_t *b, *f;
    const char *path;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)) ||
        !(path = str(args, "path", err, errlen)))
        return -1;
    f = json_object_get(json_object_get(b, "files"), path);
    if (!f) {
        snprintf(err, errlen, "file-read %s: No such file or directory", path);
        return -1;
    }
    *out = json_pack("{s:s, s:I, s:O}", "path", path, "size",
                     (json_int_t)(json_string_length(f) / 4 * 3), "content_base64", f);
    return 0;
}

static int fake_write(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "path", "content_base64", NULL};
    json_t *b;
    const char *path, *content;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)) ||
        !(path = str(args, "path", err, errlen)) ||
        !(content = str(args, "content_base64", err, errlen)))
        return -1;
    json_object_set_new(json_object_get(b, "files"), path, json_string(content));
    *out = json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)(strlen(content) / 4 * 3));
    return 0;
}

static int fake_extend(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "duration", NULL};
    json_t *b;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)) ||
        !str(args, "duration", err, errlen))
        return -1;
    json_object_set_new(b, "expires", json_string("2030-01-01T06:00:00Z"));
    *out = json_pack("{s:O, s:s}", "name", json_object_get(args, "name"), "expires",
                     "2030-01-01T06:00:00Z");
    return 0;
}

static int fake_destroy(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    json_t *b;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)))
        return -1;
    *out = json_pack("{s:O, s:O, s:b}", "name", json_object_get(args, "name"), "vmid",
                     json_object_get(b, "vmid"), "destroyed", 1);
    json_object_del(boxes, json_string_value(json_object_get(args, "name")));
    return 0;
}

static int fake_snapshot(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "label", NULL};
    json_t *b;
    const char *label;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)))
        return -1;
    label = json_string_value(json_object_get(args, "label"));
    if (!label)
        label = "snap1";
    json_array_append_new(json_object_get(b, "snaps"), json_string(label));
    *out = json_pack("{s:O, s:s}", "name", json_object_get(args, "name"), "label", label);
    return 0;
}

static int fake_rollback(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "label", NULL};
    json_t *b, *v;
    const char *label;
    size_t i;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)) ||
        !(label = str(args, "label", err, errlen)))
        return -1;
    json_array_foreach(json_object_get(b, "snaps"), i,
                       v) if (strcmp(json_string_value(v), label) == 0)
    {
        *out = json_pack("{s:O, s:s}", "name", json_object_get(args, "name"), "label", label);
        return 0;
    }
    snprintf(err, errlen, "no snapshot '%s'", label);
    return -1;
}

static int fake_snapshots(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    json_t *b, *v, *list;
    size_t i;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)))
        return -1;
    list = json_array();
    json_array_foreach(json_object_get(b, "snaps"), i, v) json_array_append_new(
        list, json_pack("{s:O, s:s}", "label", v, "created", "2030-01-01T01:00:00Z"));
    *out = json_pack("{s:O, s:o}", "name", json_object_get(args, "name"), "snapshots", list);
    return 0;
}

/* denials: two made-up refusals of the sandbox. */
static int fake_denials(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    json_t *b;

    (void)s;
    if (begin(args, keys, err, errlen) == -1 || !(b = box(args, err, errlen)))
        return -1;
    *out = json_pack("{s:O, s:O, s:[{s:s, s:s}, {s:s, s:s}]}", "name",
                     json_object_get(args, "name"), "vmid", json_object_get(b, "vmid"), "denials",
                     "host", "evil.example", "reason", "not in the allowlist", "host",
                     "pastebin.example", "reason", "not in the allowlist");
    return 0;
}

/* test_confirm: asks the client (sbx_mcp_elicit) whether to go ahead and
 * answers with what it said. */
static int fake_confirm(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    const char *q = json_string_value(json_object_get(args, "question"));
    json_int_t timeout = json_integer_value(json_object_get(args, "timeout_ms"));
    json_t *schema =
        json_pack("{s:s, s:{s:{s:s, s:s}}, s:[s]}", "type", "object", "properties", "confirm",
                  "type", "boolean", "description", "Go ahead?", "required", "confirm");
    static const char *const actions[] = {"accept", "decline", "cancel"};
    json_t *content = NULL;
    int a;

    (void)s;
    a = sbx_mcp_elicit(sbx_mcp_current_session(), q ? q : "Go ahead?", schema,
                       timeout > 0 ? (int)timeout : 10000, &content, err, errlen);
    json_decref(schema);
    if (a == SBX_MCP_ELICIT_ERROR)
        return -1;
    *out =
        json_pack("{s:s, s:o}", "action", actions[a], "content", content ? content : json_null());
    return 0;
}

const struct sbx_mcp_tool fake_confirm_tool = {
    "test_confirm",
    "Ask before going ahead (test only)",
    "Asks the user, through the client, whether to go ahead; answers with the action and "
    "what the user filled in.",
    "{\"type\": \"object\", \"properties\": {\"question\": {\"type\": \"string\"}, "
    "\"timeout_ms\": {\"type\": \"integer\", \"minimum\": 1}}, \"additionalProperties\": false}",
    NULL,
    NULL,
    fake_confirm,
    0,
    NULL,
    NULL};

const struct sbx_mcp_ops fake_ops = {
    .create = fake_create,
    .list = fake_list,
    .exec = fake_exec,
    .read = fake_read,
    .write = fake_write,
    .extend = fake_extend,
    .destroy = fake_destroy,
    .snapshot = fake_snapshot,
    .rollback = fake_rollback,
    .snapshots = fake_snapshots,
    .denials = fake_denials,
};
