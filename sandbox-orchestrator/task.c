/* task.c - poll a Proxmox task until it ends; report its log when it failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task.h"

#define POLL_FIRST_MS 100
#define POLL_MAX_MS   2000
#define LOG_LINES     4

/* The node of "UPID:node:pid:pstart:start:type:id:user:" into node. */
static int upid_node(const char *upid, char *node, size_t len)
{
    const char *p, *end;

    if (strncmp(upid, "UPID:", 5) != 0)
        return -1;
    p = upid + 5;
    end = strchr(p, ':');
    if (!end || end == p || (size_t)(end - p) >= len)
        return -1;
    memcpy(node, p, (size_t)(end - p));
    node[end - p] = '\0';
    return 0;
}

/* Append the last lines of the task's log to err (after what it holds). */
static void append_log(struct sbx_pve *p, const char *base, char *err, size_t errlen)
{
    char path[1100], ignored[256];
    json_t *params = json_pack("{s:i,s:i}", "start", 0, "limit", 1000);
    json_t *lines = NULL;
    size_t n = strlen(err), count;

    snprintf(path, sizeof path, "%s/log", base);
    if (sbx_pve_call(p, "GET", path, params, &lines, ignored, sizeof ignored) == 0 &&
        json_is_array(lines)) {
        count = json_array_size(lines);
        n += (size_t)snprintf(err + n, n < errlen ? errlen - n : 0, "; log:");
        for (size_t i = count > LOG_LINES ? count - LOG_LINES : 0; i < count && n < errlen; i++) {
            json_t *t = json_object_get(json_array_get(lines, i), "t");
            n += (size_t)snprintf(err + n, errlen - n, " | %s",
                                  json_is_string(t) ? json_string_value(t) : "?");
        }
    }
    json_decref(lines);
    json_decref(params);
}

int sbx_task_wait(struct sbx_pve *p, const char *upid, long timeout_ms, char *err, size_t errlen)
{
    char node[128], base[1024];
    char *esc;
    long wait = POLL_FIRST_MS, deadline = sbx_now_ms() + timeout_ms;

    if (upid_node(upid, node, sizeof node)) {
        snprintf(err, errlen, "task: '%.200s' is not a UPID", upid);
        return -1;
    }
    esc = sbx_pve_escape(upid);
    snprintf(base, sizeof base, "/nodes/%s/tasks/%s", node, esc);
    free(esc);
    for (;;) {
        char path[1100];
        json_t *st = NULL;
        const char *status, *exitstatus;
        snprintf(path, sizeof path, "%s/status", base);
        if (sbx_pve_call(p, "GET", path, NULL, &st, err, errlen))
            return -1;
        status = json_string_value(json_object_get(st, "status"));
        exitstatus = json_string_value(json_object_get(st, "exitstatus"));
        if (status && strcmp(status, "stopped") == 0) {
            int good = exitstatus &&
                       (strcmp(exitstatus, "OK") == 0 || strncmp(exitstatus, "WARNINGS", 8) == 0);
            const char *type = json_string_value(json_object_get(st, "type"));
            if (!good)
                snprintf(err, errlen, "task %s on %s failed: %s", type ? type : "?", node,
                         exitstatus ? exitstatus : "(no exit status)");
            json_decref(st);
            if (good)
                return 0;
            append_log(p, base, err, errlen);
            return -1;
        }
        json_decref(st);
        if (sbx_cancel) {
            snprintf(err, errlen, "task %.200s: interrupted while waiting", upid);
            return -1;
        }
        if (sbx_now_ms() + wait > deadline) {
            snprintf(err, errlen, "task %.200s: still running after %ld s", upid,
                     timeout_ms / 1000);
            return -1;
        }
        sbx_msleep(wait);
        wait = wait * 3 / 2 > POLL_MAX_MS ? POLL_MAX_MS : wait * 3 / 2;
    }
}

int sbx_task_wait_json(struct sbx_pve *p, json_t *upid, long timeout_ms, char *err, size_t errlen)
{
    if (!json_is_string(upid)) {
        snprintf(err, errlen, "task: Proxmox answered no UPID for an asynchronous call");
        return -1;
    }
    return sbx_task_wait(p, json_string_value(upid), timeout_ms, err, errlen);
}
