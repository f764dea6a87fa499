/* ops_guest.c - exec, read and write in a sandbox through the guest agent. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest.h"
#include "http.h"
#include "ops.h"
#include "sbx.h"
#include "vm.h"

#define INPUT_MAX     65536 /* input-data's limit in the API */
#define TIMEOUT_MAX   86400
#define KILL_GRACE_S  5                  /* timeout -k: SIGKILL this long after SIGTERM */
#define TIMEOUT_PROG  "/usr/bin/timeout" /* coreutils, by path: exec may get no PATH */
#define TIMEOUT_EXIT  124                /* timeout(1): the command ran out of time */
#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* A guest call's error as the user reads it: "sandbox NAME: " first, so
 * that one of several sandboxes at work is told apart.  Returns -1. */
static int name_error(const char *name, char *err, size_t errlen)
{
    char *copy = strdup(err);

    if (!copy)
        abort();
    snprintf(err, errlen, "sandbox %.200s: %s", name, copy);
    free(copy);
    return -1;
}

/* How long exec waits for the command's end: its timeout, timeout(1)'s
 * grace before SIGKILL, and one http-timeout for the answer that says so.
 * An agent that keeps saying "not exited" is given up on after that. */
static long exec_wait_ms(const struct sbx *s, long timeout)
{
    return (timeout + KILL_GRACE_S) * 1000 + s->cfg.http_timeout_ms;
}

static int check_path(const char *path, char *err, size_t errlen)
{
    if (path[0] != '/' || strlen(path) > 4000) {
        snprintf(err, errlen, "path: expected an absolute path in the sandbox, got '%.100s'", path);
        return -1;
    }
    return 0;
}

/* Build ["timeout", "-k", "5", "Ns", command...] from the command array. */
static json_t *wrap_command(json_t *command, long timeout, char *err, size_t errlen)
{
    char t[32];
    json_t *argv, *v;
    size_t i;

    if (!json_is_array(command) || json_array_size(command) == 0) {
        snprintf(err, errlen, "command: expected a non-empty list of strings");
        return NULL;
    }
    snprintf(t, sizeof t, "%lds", timeout);
    argv = json_pack("[s,s,s,s]", TIMEOUT_PROG, "-k", STRINGIFY(KILL_GRACE_S), t);
    json_array_foreach(command, i, v)
    {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
            snprintf(err, errlen, "command: element %zu is not a string without NUL bytes", i);
            json_decref(argv);
            return NULL;
        }
        json_array_append(argv, v);
    }
    return argv;
}

static int exec_args(struct sbx *s, json_t *args, long *timeout, const char **input, char *err,
                     size_t errlen)
{
    json_t *t = json_object_get(args, "timeout"), *in = json_object_get(args, "input");

    *timeout = s->cfg.exec_timeout_ms / 1000;
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 1 ||
            json_integer_value(t) > TIMEOUT_MAX) {
            snprintf(err, errlen, "timeout: expected whole seconds from 1 to %d", TIMEOUT_MAX);
            return -1;
        }
        *timeout = (long)json_integer_value(t);
    }
    *input = NULL;
    if (in && !json_is_null(in)) {
        if (!json_is_string(in) || json_string_length(in) > INPUT_MAX) {
            snprintf(err, errlen, "input: expected a string of at most %d bytes", INPUT_MAX);
            return -1;
        }
        *input = json_string_value(in);
    }
    return 0;
}

/* Output as the result carries it: at most exec-output-max bytes. */
static json_t *capped(json_t *st, const char *key, long max, int *truncated)
{
    json_t *v = json_object_get(st, key);
    size_t n = json_string_length(v);

    if ((long)n > max) {
        n = (size_t)max;
        *truncated = 1;
    }
    return sbx_guest_text((const unsigned char *)json_string_value(v), n);
}

int sbx_op_exec(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "command", "timeout", "input", NULL};
    const char *name, *input;
    struct sbx_vm vm;
    long timeout;
    json_t *argv, *st = NULL;
    int out_trunc, err_trunc, code, sig, rc;
    long started = sbx_now_ms();

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        exec_args(s, args, &timeout, &input, err, errlen))
        return -1;
    argv = wrap_command(json_object_get(args, "command"), timeout, err, errlen);
    if (!argv)
        return -1;
    rc = sbx_vm_find(s, name, &vm, err, errlen);
    if (rc == 0 && sbx_guest_exec(s, vm.node, vm.vmid, argv, input,
                                  input ? json_string_length(json_object_get(args, "input")) : 0,
                                  exec_wait_ms(s, timeout), &st, err, errlen))
        rc = name_error(name, err, errlen);
    json_decref(argv);
    if (rc)
        return -1;
    /* booleans: sbx_guest_status_decode made them so */
    out_trunc = json_is_true(json_object_get(st, "out-truncated"));
    err_trunc = json_is_true(json_object_get(st, "err-truncated"));
    code = sbx_guest_exit_code(st, &sig);
    *out = json_pack("{s:i,s:o,s:o}", "exitcode", code, "stdout",
                     capped(st, "out-bytes", s->cfg.exec_output_max, &out_trunc), "stderr",
                     capped(st, "err-bytes", s->cfg.exec_output_max, &err_trunc));
    json_object_set_new(*out, "stdout_truncated", json_boolean(out_trunc));
    json_object_set_new(*out, "stderr_truncated", json_boolean(err_trunc));
    if (sig)
        json_object_set_new(*out, "signal", json_integer(sig));
    /* timeout(1) exits 124; when the command outlived the grace period
     * too, timeout kills itself with SIGKILL. */
    json_object_set_new(*out, "timed_out",
                        json_boolean(code == TIMEOUT_EXIT ||
                                     (sig == SIGKILL && sbx_now_ms() - started >= timeout * 1000)));
    json_decref(st);
    return 0;
}

int sbx_op_read(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "path", NULL};
    const char *name, *path;
    struct sbx_vm vm;
    unsigned char *data;
    size_t len;
    char *b64;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(path = sbx_args_string(args, "path", 1, err, errlen)) || check_path(path, err, errlen) ||
        sbx_vm_find(s, name, &vm, err, errlen))
        return -1;
    if (sbx_guest_read(s, vm.node, vm.vmid, path, &data, &len, err, errlen))
        return name_error(name, err, errlen);
    b64 = http_base64_encode_new(data, len);
    *out = json_pack("{s:s,s:I,s:s}", "path", path, "size", (json_int_t)len, "content_base64", b64);
    free(b64);
    free(data);
    return 0;
}

int sbx_op_write(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "path", "content_base64", NULL};
    const char *name, *path, *content;
    struct sbx_vm vm;
    unsigned char *data;
    size_t len;
    int rc;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(path = sbx_args_string(args, "path", 1, err, errlen)) ||
        !(content = sbx_args_string(args, "content_base64", 1, err, errlen)) ||
        check_path(path, err, errlen))
        return -1;
    data = http_base64_decode_new(content, strlen(content), &len);
    if (!data) {
        snprintf(err, errlen, "content_base64: not valid base64 (RFC 4648, with padding)");
        return -1;
    }
    rc = sbx_vm_find(s, name, &vm, err, errlen);
    if (rc == 0 && sbx_guest_write(s, vm.node, vm.vmid, path, data, len, err, errlen))
        rc = name_error(name, err, errlen);
    free(data);
    if (rc)
        return -1;
    *out = json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)len);
    return 0;
}
