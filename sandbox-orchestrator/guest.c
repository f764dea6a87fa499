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

/* The reverse: a string whose code points are bytes back to the bytes.
 * When a code point above U+00FF shows up the text was real UTF-8, and its
 * bytes are returned unchanged.  New buffer of *outlen bytes. */
static unsigned char *utf8_to_latin1(const char *in, size_t len, size_t *outlen)
{
    unsigned char *out = malloc(len + 1), *o = out;

    if (!out)
        abort();
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x80) {
            *o++ = c;
        } else if ((c == 0xC2 || c == 0xC3) && i + 1 < len &&
                   ((unsigned char)in[i + 1] & 0xC0) == 0x80) {
            *o++ = (unsigned char)(((c & 0x03) << 6) | ((unsigned char)in[i + 1] & 0x3F));
            i++;
        } else {
            memcpy(out, in, len);
            *outlen = len;
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

int sbx_guest_wait(struct sbx *s, const char *node, int vmid, long timeout_ms, char *err,
                   size_t errlen)
{
    char path[256];
    long wait = POLL_FIRST_MS, deadline = sbx_now_ms() + timeout_ms;

    sbx_vm_path(path, sizeof path, node, vmid, "/agent/ping");
    for (;;) {
        if (sbx_pve_call(s->pve, "POST", path, NULL, NULL, err, errlen) == 0)
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

/* Replace key (Latin-1 text) in st by its bytes under newkey. */
static void convert_stream(json_t *st, const char *key, const char *newkey)
{
    json_t *v = json_object_get(st, key);
    unsigned char *raw;
    size_t n = 0;

    if (!json_is_string(v)) {
        json_object_set_new(st, newkey, json_stringn_nocheck("", 0));
        return;
    }
    raw = utf8_to_latin1(json_string_value(v), json_string_length(v), &n);
    json_object_set_new(st, newkey, json_stringn_nocheck((const char *)raw, n));
    free(raw);
}

static int exec_start(struct sbx *s, const char *node, int vmid, json_t *argv, const char *input,
                      size_t len, json_int_t *pid, char *err, size_t errlen)
{
    char path[256];
    json_t *params = json_pack("{s:O}", "command", argv), *ans = NULL;
    int rc;

    if (input) {
        size_t n;
        char *text = latin1_to_utf8(input, len, &n);
        json_object_set_new(params, "input-data", json_stringn(text, n));
        free(text);
    }
    sbx_vm_path(path, sizeof path, node, vmid, "/agent/exec");
    rc = sbx_pve_call(s->pve, "POST", path, params, &ans, err, errlen);
    json_decref(params);
    if (rc == 0 && !json_is_integer(json_object_get(ans, "pid"))) {
        snprintf(err, errlen, "POST %s: answer holds no pid", path);
        rc = -1;
    }
    if (rc == 0)
        *pid = json_integer_value(json_object_get(ans, "pid"));
    json_decref(ans);
    return rc;
}

/* Polls exec-status for pid until it exits, the deadline passes or the
 * user interrupts; with tick, each poll may tick the progress step "run"
 * (the steps of create count their notifications and get no ticks). */
static int exec_wait(struct sbx *s, const char *node, int vmid, json_int_t pid, long timeout_ms,
                     int tick, json_t **status, char *err, size_t errlen)
{
    char path[256];
    long wait = POLL_FIRST_MS, deadline = sbx_now_ms() + timeout_ms;

    sbx_vm_path(path, sizeof path, node, vmid, "/agent/exec-status");
    for (;;) {
        json_t *params = json_pack("{s:I}", "pid", pid), *st = NULL;
        json_t *exited;
        int rc = sbx_pve_call(s->pve, "GET", path, params, &st, err, errlen);
        json_decref(params);
        if (rc)
            return -1;
        exited = json_object_get(st, "exited");
        if (json_is_true(exited) || (json_is_integer(exited) && json_integer_value(exited))) {
            convert_stream(st, "out-data", "out-bytes");
            convert_stream(st, "err-data", "err-bytes");
            *status = st;
            return 0;
        }
        json_decref(st);
        if (sbx_cancel) {
            snprintf(err, errlen, "exec: interrupted while pid %" JSON_INTEGER_FORMAT " runs", pid);
            return -1;
        }
        if (sbx_now_ms() + wait > deadline) {
            snprintf(err, errlen, "exec: pid %" JSON_INTEGER_FORMAT " still running after %ld s",
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
    char api[256];
    char *b64 = http_base64_encode_new(data, len);
    json_t *params = json_pack("{s:s,s:s,s:i}", "file", path, "content", b64, "encode", 0);
    int rc;

    sbx_vm_path(api, sizeof api, node, vmid, "/agent/file-write");
    rc = sbx_pve_call(s->pve, "POST", api, params, NULL, err, errlen);
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

int sbx_guest_read(struct sbx *s, const char *node, int vmid, const char *path,
                   unsigned char **data, size_t *len, char *err, size_t errlen)
{
    char api[256];
    int major = sbx_pve_major(s, err, errlen);
    json_t *params = json_pack("{s:s}", "file", path), *ans = NULL, *content;
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
    sbx_vm_path(api, sizeof api, node, vmid, "/agent/file-read");
    rc = sbx_pve_call(s->pve, "GET", api, params, &ans, err, errlen);
    json_decref(params);
    if (rc)
        return -1;
    content = json_object_get(ans, "content");
    if (json_is_true(json_object_get(ans, "truncated")) ||
        json_integer_value(json_object_get(ans, "truncated")) == 1) {
        snprintf(err, errlen, "read %s: the file is larger than %ld bytes", path,
                 SBX_GUEST_FILE_MAX);
        rc = -1;
    } else if (!json_is_string(content)) {
        snprintf(err, errlen, "GET %s: answer holds no content", api);
        rc = -1;
    } else if (major >= 9) {
        *data =
            http_base64_decode_new(json_string_value(content), json_string_length(content), len);
        if (!*data) {
            snprintf(err, errlen, "GET %s: content is not base64", api);
            rc = -1;
        }
    } else {
        *data = utf8_to_latin1(json_string_value(content), json_string_length(content), len);
    }
    json_decref(ans);
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
