/* guest.c - exec, file-read and file-write through the QEMU guest agent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest.h"
#include "http.h"
#include "vm.h"

#define WRITE_CHUNK    46080 /* raw bytes per file-write: 61440 base64 characters */
#define POLL_FIRST_MS  50
#define POLL_MAX_MS    1000
#define STATUS_MAX_ERR 512

/* Bytes to a string of Latin-1 code points, UTF-8 encoded (how Proxmox
 * expects input-data); new buffer of *outlen bytes. */
static char *latin1_to_utf8(const char *in, size_t len, size_t *outlen)
{
    char *out = malloc(len * 2 + 1), *o = out;

    if (!out)
        abort();
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x80) {
            *o++ = (char)c;
        } else {
            *o++ = (char)(0xC0 | (c >> 6));
            *o++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *o = '\0';
    *outlen = (size_t)(o - out);
    return out;
}

/* The reverse: a string whose code points are bytes back to the bytes,
 * at most max of them (*cut = 1 when there were more).  When a code point
 * above U+00FF shows up the text was real UTF-8, and its bytes are
 * returned unchanged (cut to max too).  New buffer of *outlen bytes. */
static unsigned char *utf8_to_latin1(const char *in, size_t len, size_t max, size_t *outlen,
                                     int *cut)
{
    unsigned char *out = malloc((len < max ? len : max) + 1), *o = out;

    if (!out)
        abort();
    *cut = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if ((size_t)(o - out) == max) {
            *cut = 1;
            break;
        }
        if (c < 0x80) {
            *o++ = c;
        } else if ((c == 0xC2 || c == 0xC3) && i + 1 < len &&
                   ((unsigned char)in[i + 1] & 0xC0) == 0x80) {
            *o++ = (unsigned char)(((c & 0x03) << 6) | ((unsigned char)in[i + 1] & 0x3F));
            i++;
        } else {
            *outlen = len < max ? len : max;
            *cut = len > max;
            memcpy(out, in, *outlen);
            return out;
        }
    }
    *outlen = (size_t)(o - out);
    return out;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
    size_t n;
    unsigned cp;

    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF)
        n = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF)
        n = 3;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4)
        n = 4;
    else
        return 0;
    cp = p[0] & (0x7F >> n);
    if (n > left)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

json_t *sbx_guest_text(const unsigned char *data, size_t len)
{
    char *out = malloc(len * 3 + 1), *o = out;
    json_t *j;

    if (!out)
        abort();
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(data + i, len - i);
        if (n == 0) {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(o, data + i, n);
            o += n;
            i += n;
        }
    }
    j = json_stringn(out, (size_t)(o - out));
    free(out);
    return j;
}

/* Put text before err (cut at errlen). */
static void prefix(char *err, size_t errlen, const char *text)
{
    size_t n = strlen(text), m = strlen(err);

    if (n >= errlen)
        n = errlen - 1;
    if (m > errlen - 1 - n)
        m = errlen - 1 - n;
    memmove(err + n, err, m);
    memcpy(err, text, n);
    err[n + m] = '\0';
}

/* What the calls are named in errors: the path below the VM. */
static const char *call_name(const char *suffix)
{
    return suffix[0] == '/' ? suffix + 1 : suffix;
}

/* One guest agent call, METHOD /nodes/N/qemu/V/SUFFIX, its answer at most
 * body_max bytes (0: the client's cap).  An answer that did not come whole
 * within http-timeout (an agent that drips it, or is silent) fails as
 * "agent/CALL: no answer within N s". */
static int agent_call_max(struct sbx *s, const char *node, int vmid, const char *method,
                          const char *suffix, json_t *params, size_t body_max, json_t **ans,
                          char *err, size_t errlen)
{
    char path[256];

    sbx_vm_path(path, sizeof path, node, vmid, suffix);
    if (sbx_pve_call_max(s->pve, method, path, params, body_max, ans, err, errlen) == 0)
        return 0;
    if (sbx_pve_timed_out(s->pve))
        snprintf(err, errlen, "%s: no answer within %ld.%ld s", call_name(suffix),
                 s->cfg.http_timeout_ms / 1000, s->cfg.http_timeout_ms % 1000 / 100);
    return -1;
}

/* The same, with the client's cap on the answer. */
static int agent_call(struct sbx *s, const char *node, int vmid, const char *method,
                      const char *suffix, json_t *params, json_t **ans, char *err, size_t errlen)
{
    return agent_call_max(s, node, vmid, method, suffix, params, 0, ans, err, errlen);
}

int sbx_guest_wait(struct sbx *s, const char *node, int vmid, long timeout_ms, char *err,
                   size_t errlen)
{
    long wait = POLL_FIRST_MS, deadline = sbx_now_ms() + timeout_ms;

    for (;;) {
        if (agent_call(s, node, vmid, "POST", "/agent/ping", NULL, NULL, err, errlen) == 0)
            return 0;
        if (!strstr(err, "guest agent is not running"))
            return -1;
        if (sbx_cancel) {
            snprintf(err, errlen, "interrupted while waiting for the guest agent");
            return -1;
        }
        if (sbx_now_ms() + wait > deadline) {
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, " (waited %ld s for the guest agent)", timeout_ms / 1000);
            return -1;
        }
        sbx_msleep(wait);
        wait = wait * 2 > POLL_MAX_MS ? POLL_MAX_MS : wait * 2;
    }
}

/* A flag of the answer: absent, false, true or an integer 0 or 1. */
static int flag_value(json_t *v, int *set)
{
    *set = 0;
    if (!v || json_is_false(v))
        return 0;
    if (json_is_true(v)) {
        *set = 1;
        return 0;
    }
    if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
        *set = json_integer_value(v) == 1;
        return 0;
    }
    return -1;
}

static const char *type_name(json_t *v)
{
    if (!v)
        return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Replace key (Latin-1 text, or absent) in st by at most max of its bytes
 * under newkey; a cut sets the flag trunc. */
static void convert_stream(json_t *st, const char *key, const char *newkey, const char *trunc,
                           size_t max)
{
    json_t *v = json_object_get(st, key);
    unsigned char *raw;
    size_t n = 0;
    int cut = 0;

    if (!json_is_string(v)) {
        json_object_set_new(st, newkey, json_stringn_nocheck("", 0));
        return;
    }
    raw = utf8_to_latin1(json_string_value(v), json_string_length(v), max, &n, &cut);
    json_object_set_new(st, newkey, json_stringn_nocheck((const char *)raw, n));
    free(raw);
    if (cut)
        json_object_set_new(st, trunc, json_true());
}

/* The fields of exec-status the schema names, and the type each must
 * have when it is there. */
enum field_type { FIELD_FLAG, FIELD_INT, FIELD_TEXT };
static const struct {
    const char *name;
    enum field_type type;
} status_schema[] = {
    {"exited", FIELD_FLAG},   {"out-truncated", FIELD_FLAG}, {"err-truncated", FIELD_FLAG},
    {"exitcode", FIELD_INT},  {"signal", FIELD_INT},         {"out-data", FIELD_TEXT},
    {"err-data", FIELD_TEXT},
};

/* Every field of status_schema in st of its type: -1 with err naming the
 * first that is not. */
static int status_fields(json_t *st, char *err, size_t errlen)
{
    static const char *const words[] = {"a boolean", "an integer", "a string"};
    int set;

    for (size_t i = 0; i < sizeof status_schema / sizeof status_schema[0]; i++) {
        json_t *v = json_object_get(st, status_schema[i].name);
        int bad = 0;
        if (!v)
            continue;
        switch (status_schema[i].type) {
        case FIELD_FLAG: bad = flag_value(v, &set) != 0; break;
        case FIELD_INT: bad = !json_is_integer(v); break;
        case FIELD_TEXT: bad = !json_is_string(v); break;
        }
        if (bad) {
            snprintf(err, errlen, "agent/exec-status: '%s' is %s, not %s", status_schema[i].name,
                     type_name(v), words[status_schema[i].type]);
            return -1;
        }
    }
    return 0;
}

enum sbx_guest_state sbx_guest_status_decode(json_t *st, size_t max, char *err, size_t errlen)
{
    int exited, set;

    if (!json_is_object(st)) {
        snprintf(err, errlen, "agent/exec-status: the answer is %s, not an object", type_name(st));
        return SBX_GUEST_BAD;
    }
    if (!json_object_get(st, "exited")) {
        snprintf(err, errlen, "agent/exec-status: the answer has no 'exited'");
        return SBX_GUEST_BAD;
    }
    if (status_fields(st, err, errlen))
        return SBX_GUEST_BAD;
    flag_value(json_object_get(st, "exited"), &exited);
    if (!exited)
        return SBX_GUEST_RUNNING;
    flag_value(json_object_get(st, "out-truncated"), &set);
    json_object_set_new(st, "out-truncated", json_boolean(set));
    flag_value(json_object_get(st, "err-truncated"), &set);
    json_object_set_new(st, "err-truncated", json_boolean(set));
    convert_stream(st, "out-data", "out-bytes", "out-truncated", max);
    convert_stream(st, "err-data", "err-bytes", "err-truncated", max);
    /* The text is kept once only: as bytes. */
    json_object_del(st, "out-data");
    json_object_del(st, "err-data");
    return SBX_GUEST_EXITED;
}

static int exec_start(struct sbx *s, const char *node, int vmid, json_t *argv, const char *input,
                      size_t len, json_int_t *pid, char *err, size_t errlen)
{
    json_t *params = json_pack("{s:O}", "command", argv), *ans = NULL, *p;
    int rc;

    if (input) {
        size_t n;
        char *text = latin1_to_utf8(input, len, &n);
        json_object_set_new(params, "input-data", json_stringn(text, n));
        free(text);
    }
    rc = agent_call(s, node, vmid, "POST", "/agent/exec", params, &ans, err, errlen);
    json_decref(params);
    p = json_object_get(ans, "pid");
    if (rc == 0 && !json_is_integer(p)) {
        snprintf(err, errlen, "agent/exec: the answer holds no pid ('pid' is %s)",
                 p ? type_name(p) : "missing");
        rc = -1;
    }
    if (rc == 0)
        *pid = json_integer_value(p);
    json_decref(ans);
    return rc;
}

/* Polls exec-status for pid until it exits, the deadline passes or the
 * user interrupts; with tick, each poll may tick the progress step "run"
 * (the steps of create count their notifications and get no ticks).  An
 * answer that breaks the schema ends the wait at once (err names the
 * field). */
static int exec_wait(struct sbx *s, const char *node, int vmid, json_int_t pid, long timeout_ms,
                     int tick, json_t **status, char *err, size_t errlen)
{
    long wait = POLL_FIRST_MS, deadline = sbx_now_ms() + timeout_ms;

    for (;;) {
        json_t *params = json_pack("{s:I}", "pid", pid), *st = NULL;
        int rc = agent_call(s, node, vmid, "GET", "/agent/exec-status", params, &st, err, errlen);
        enum sbx_guest_state state;
        json_decref(params);
        if (rc)
            return -1;
        state = sbx_guest_status_decode(st, SBX_GUEST_OUTPUT_MAX, err, errlen);
        if (state == SBX_GUEST_EXITED) {
            *status = st;
            return 0;
        }
        json_decref(st);
        if (state == SBX_GUEST_BAD)
            return -1;
        if (sbx_cancel) {
            snprintf(err, errlen, "exec: interrupted while pid %" JSON_INTEGER_FORMAT " runs", pid);
            return -1;
        }
        if (sbx_now_ms() + wait > deadline) {
            snprintf(err, errlen,
                     "agent/exec-status: pid %" JSON_INTEGER_FORMAT " still running after %ld s",
                     pid, timeout_ms / 1000);
            return -1;
        }
        if (tick)
            sbx_progress_tick(&s->progress);
        sbx_msleep(wait);
        wait = wait * 2 > POLL_MAX_MS ? POLL_MAX_MS : wait * 2;
    }
}

/* A command run outside any step (run_command's) is a step "run" of its
 * own, when the front end asked for ticks (the MCP server; the command
 * line does not, so `sandboxctl exec` prints nothing new); inside a step
 * (create's guest setup) it is part of that step. */
int sbx_guest_exec(struct sbx *s, const char *node, int vmid, json_t *argv, const char *input,
                   size_t len, long timeout_ms, json_t **status, char *err, size_t errlen)
{
    int own_step = s->progress.fn && !s->progress.step && s->progress.tick_ms > 0;
    json_int_t pid;
    int rc;

    *status = NULL;
    if (own_step)
        sbx_progress_begin(&s->progress, "run");
    rc = exec_start(s, node, vmid, argv, input, len, &pid, err, errlen);
    if (rc == 0)
        rc = exec_wait(s, node, vmid, pid, timeout_ms, own_step, status, err, errlen);
    if (own_step)
        sbx_progress_end(&s->progress, rc != 0);
    return rc;
}

int sbx_guest_exit_code(json_t *st, int *signal)
{
    json_t *code = json_object_get(st, "exitcode"), *sig = json_object_get(st, "signal");

    *signal = 0;
    if (json_is_integer(code))
        return (int)json_integer_value(code);
    if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128) {
        *signal = (int)json_integer_value(sig);
        return 128 + *signal;
    }
    return -1;
}

static int write_one(struct sbx *s, const char *node, int vmid, const char *path,
                     const unsigned char *data, size_t len, char *err, size_t errlen)
{
    char *b64 = http_base64_encode_new(data, len);
    json_t *params = json_pack("{s:s,s:s,s:i}", "file", path, "content", b64, "encode", 0);
    int rc;

    rc = agent_call(s, node, vmid, "POST", "/agent/file-write", params, NULL, err, errlen);
    json_decref(params);
    free(b64);
    return rc;
}

/* Join the parts into path inside the guest, then remove them. */
static int join_parts(struct sbx *s, const char *node, int vmid, const char *path, json_t *parts,
                      char *err, size_t errlen)
{
    static const char script[] = "f=$1; shift; cat -- \"$@\" > \"$f.sbx-new\" && "
                                 "mv -f -- \"$f.sbx-new\" \"$f\"; rc=$?; rm -f -- \"$@\"; exit $rc";
    json_t *argv = json_pack("[s,s,s,s,s]", "/bin/sh", "-c", script, "sh", path), *st = NULL;
    int rc, sig;

    json_array_extend(argv, parts);
    rc = sbx_guest_exec(s, node, vmid, argv, NULL, 0, s->cfg.exec_timeout_ms, &st, err, errlen);
    if (rc == 0 && sbx_guest_exit_code(st, &sig) != 0) {
        json_t *e = json_object_get(st, "err-bytes");
        snprintf(err, errlen, "write %s: joining the parts failed (exit %d): %.300s", path,
                 sbx_guest_exit_code(st, &sig), json_is_string(e) ? json_string_value(e) : "");
        rc = -1;
    }
    json_decref(st);
    json_decref(argv);
    return rc;
}

/* After a failed part: remove the parts already written (best effort; the
 * write's own error is what the caller hears). */
static void remove_parts(struct sbx *s, const char *node, int vmid, json_t *parts)
{
    json_t *argv = json_pack("[s,s]", "/bin/rm", "-f"), *st = NULL;
    char ignored[256];

    json_array_append_new(argv, json_string("--"));
    json_array_extend(argv, parts);
    (void)sbx_guest_exec(s, node, vmid, argv, NULL, 0, s->cfg.exec_timeout_ms, &st, ignored,
                         sizeof ignored);
    json_decref(st);
    json_decref(argv);
}

int sbx_guest_write(struct sbx *s, const char *node, int vmid, const char *path,
                    const unsigned char *data, size_t len, char *err, size_t errlen)
{
    json_t *parts;
    int rc = 0;

    if (len > (size_t)SBX_GUEST_FILE_MAX) {
        snprintf(err, errlen, "write %s: %zu bytes is more than the %ld bytes allowed", path, len,
                 SBX_GUEST_FILE_MAX);
        return -1;
    }
    if (len <= WRITE_CHUNK)
        return write_one(s, node, vmid, path, data, len, err, errlen);
    parts = json_array();
    for (size_t off = 0, i = 0; off < len && rc == 0; off += WRITE_CHUNK, i++) {
        char part[4200];
        size_t n = len - off < WRITE_CHUNK ? len - off : WRITE_CHUNK;
        snprintf(part, sizeof part, "%s.sbx-part-%06zu", path, i);
        json_array_append_new(parts, json_string(part));
        rc = write_one(s, node, vmid, part, data + off, n, err, errlen);
    }
    if (rc == 0)
        rc = join_parts(s, node, vmid, path, parts, err, errlen);
    else if (json_array_size(parts) > 1)
        remove_parts(s, node, vmid, parts);
    json_decref(parts);
    return rc;
}

/* Base64 that decodes to at most max bytes is at most this long. */
static size_t b64_len_max(size_t max)
{
    return (max + 2) / 3 * 4;
}

/* A PVE 9 file-read answer (base64 content) of a whole 16 MiB file, and
 * room for the JSON around it: more is not read (the Latin-1 answers of
 * PVE 8 may take up to 6 bytes a byte: they have the client's cap). */
#define READ_ANSWER_MAX_B64 ((size_t)(SBX_GUEST_FILE_MAX + 2) / 3 * 4 + 65536)

/* The content of a file-read answer as bytes (see guest.h). */
static int content_bytes(json_t *content, int b64, size_t max, unsigned char **data, size_t *len,
                         char *err, size_t errlen)
{
    const char *text = json_string_value(content);
    size_t n = json_string_length(content);
    int cut;

    if (n > (b64 ? b64_len_max(max) : 2 * max)) {
        snprintf(err, errlen, "agent/file-read: 'content' holds more than the %zu bytes asked for",
                 max);
        return -1;
    }
    if (b64) {
        *data = http_base64_decode_new(text, n, len);
        if (!*data) {
            snprintf(err, errlen, "agent/file-read: 'content' is not base64");
            return -1;
        }
    } else {
        *data = utf8_to_latin1(text, n, max, len, &cut);
    }
    if (*len > max || (!b64 && cut)) {
        snprintf(err, errlen, "agent/file-read: 'content' holds more than the %zu bytes asked for",
                 max);
        free(*data);
        *data = NULL;
        return -1;
    }
    return 0;
}

int sbx_guest_read_decode(json_t *ans, int b64, size_t max, unsigned char **data, size_t *len,
                          char *err, size_t errlen)
{
    json_t *content = json_object_get(ans, "content"), *count = json_object_get(ans, "bytes-read");
    int truncated;

    *data = NULL;
    *len = 0;
    if (!json_is_object(ans)) {
        snprintf(err, errlen, "agent/file-read: the answer is %s, not an object", type_name(ans));
        return -1;
    }
    if (flag_value(json_object_get(ans, "truncated"), &truncated)) {
        snprintf(err, errlen, "agent/file-read: 'truncated' is %s, not a boolean",
                 type_name(json_object_get(ans, "truncated")));
        return -1;
    }
    if (truncated) {
        snprintf(err, errlen, "agent/file-read: the file is larger than %zu bytes", max);
        return -1;
    }
    if (!json_is_string(content)) {
        snprintf(err, errlen, "agent/file-read: 'content' is %s, not a string",
                 content ? type_name(content) : "missing");
        return -1;
    }
    if (count && !json_is_integer(count)) {
        snprintf(err, errlen, "agent/file-read: 'bytes-read' is %s, not an integer",
                 type_name(count));
        return -1;
    }
    if (content_bytes(content, b64, max, data, len, err, errlen))
        return -1;
    if (count && (json_integer_value(count) < 0 || (size_t)json_integer_value(count) != *len)) {
        snprintf(err, errlen,
                 "agent/file-read: 'bytes-read' says %" JSON_INTEGER_FORMAT
                 ", 'content' holds %zu bytes",
                 json_integer_value(count), *len);
        free(*data);
        *data = NULL;
        *len = 0;
        return -1;
    }
    return 0;
}

int sbx_guest_read(struct sbx *s, const char *node, int vmid, const char *path,
                   unsigned char **data, size_t *len, char *err, size_t errlen)
{
    int major = sbx_pve_major(s, err, errlen);
    json_t *params = json_pack("{s:s}", "file", path), *ans = NULL;
    int rc;

    *data = NULL;
    *len = 0;
    if (major == 0) {
        json_decref(params);
        return -1;
    }
    /* From PVE 9 the agent's base64 can be had as is: exact for any bytes. */
    if (major >= 9)
        json_object_set_new(params, "decode", json_integer(0));
    rc = agent_call_max(s, node, vmid, "GET", "/agent/file-read", params,
                        major >= 9 ? READ_ANSWER_MAX_B64 : 0, &ans, err, errlen);
    json_decref(params);
    if (rc == 0)
        rc = sbx_guest_read_decode(ans, major >= 9, (size_t)SBX_GUEST_FILE_MAX, data, len, err,
                                   errlen);
    json_decref(ans);
    if (rc) {
        /* the path is ours, not the guest's */
        char what[4200 + 16];
        snprintf(what, sizeof what, "read %s: ", path);
        prefix(err, errlen, what);
    }
    return rc;
}

/* The last line(s) of a stream, trimmed, at most 400 bytes. */
static void tail_text(json_t *v, char *buf, size_t len)
{
    const char *t = json_is_string(v) ? json_string_value(v) : "";
    size_t n = json_is_string(v) ? json_string_length(v) : 0;

    while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == ' '))
        n--;
    if (n > 400) {
        t += n - 400;
        n = 400;
    }
    snprintf(buf, len, "%.*s", (int)n, t);
}

int sbx_guest_script(struct sbx *s, const char *node, int vmid, const char *what,
                     const char *script, const char *const *args, long timeout_ms, char **out,
                     char *err, size_t errlen)
{
    json_t *argv = json_pack("[s,s,s,s]", "/bin/sh", "-c", script, "sh"), *st = NULL;
    int rc, sig, code;

    if (out)
        *out = NULL;
    for (size_t i = 0; args && args[i]; i++)
        json_array_append_new(argv, json_string(args[i]));
    rc = sbx_guest_exec(s, node, vmid, argv, NULL, 0, timeout_ms, &st, err, errlen);
    json_decref(argv);
    if (rc)
        return -1;
    code = sbx_guest_exit_code(st, &sig);
    if (code != 0) {
        char tail[512];
        tail_text(json_object_get(st, "err-bytes"), tail, sizeof tail);
        snprintf(err, errlen, "%s: exit %d in the sandbox%s%s", what, code, tail[0] ? ": " : "",
                 tail);
        json_decref(st);
        return -1;
    }
    if (out) {
        json_t *o = json_object_get(st, "out-bytes");
        size_t n = json_string_length(o);
        *out = malloc(n + 1);
        if (!*out)
            abort();
        memcpy(*out, json_string_value(o), n);
        (*out)[n] = '\0';
    }
    json_decref(st);
    return 0;
}
