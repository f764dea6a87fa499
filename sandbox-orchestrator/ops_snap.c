/* ops_snap.c - disk-only snapshots: take, roll back, list. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "meta.h"
#include "ops.h"
#include "sbx.h"
#include "task.h"
#include "vm.h"

#define BASE_LABEL "base" /* never deleted to make room */

/* Proxmox's snapshot names (pve-configid): a letter, then at least one of
 * letters, digits, _ and -; at most 40. */
static int valid_label(const char *s)
{
    size_t n = strlen(s);

    if (n < 2 || n > 40 || !isalpha((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static int by_time(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "snaptime"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "snaptime"));

    return (x > y) - (x < y);
}

/* The VM's snapshots (without "current"), oldest first, as a new array. */
static json_t *snapshots(struct sbx *s, const struct sbx_vm *vm, char *err, size_t errlen)
{
    char path[256];
    json_t *all = NULL, *v, *list, **items;
    size_t i, n = 0;

    sbx_vm_path(path, sizeof path, vm->node, vm->vmid, "/snapshot");
    if (sbx_pve_call(s->pve, "GET", path, NULL, &all, err, errlen))
        return NULL;
    items = calloc(json_array_size(all) + 1, sizeof *items);
    if (!items)
        abort();
    json_array_foreach(all, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (name && strcmp(name, "current") != 0)
            items[n++] = v;
    }
    qsort(items, n, sizeof *items, by_time);
    list = json_array();
    for (i = 0; i < n; i++)
        json_array_append(list, items[i]);
    free(items);
    json_decref(all);
    return list;
}

/* Make room for one more: delete the oldest snapshot that is not base. */
static int make_room(struct sbx *s, const struct sbx_vm *vm, json_t *list, char *dropped,
                     size_t len, char *err, size_t errlen)
{
    char path[512];
    size_t i;
    json_t *v;

    if ((int)json_array_size(list) < s->cfg.max_snapshots)
        return 0;
    json_array_foreach(list, i, v)
    {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (strcmp(name, BASE_LABEL) == 0)
            continue;
        snprintf(path, sizeof path, "/nodes/%s/qemu/%d/snapshot/%s", vm->node, vm->vmid, name);
        snprintf(dropped, len, "%s", name);
        return sbx_vm_task(s, "DELETE", path, NULL, err, errlen);
    }
    snprintf(err, errlen, "snapshot: %d snapshots exist and only '%s' is left: delete one by hand",
             s->cfg.max_snapshots, BASE_LABEL);
    return -1;
}

int sbx_op_snapshot(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "label", NULL};
    const char *name, *label;
    char deflabel[48], path[256], dropped[64] = "";
    struct sbx_vm vm;
    json_t *list;
    size_t i;
    json_t *v;
    time_t now = time(NULL);

    *out = NULL;
    err[0] = '\0';
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)))
        return -1;
    label = sbx_args_string(args, "label", 0, err, errlen);
    if (err[0])
        return -1;
    if (!label) {
        strftime(deflabel, sizeof deflabel, "s%Y%m%d-%H%M%S", gmtime(&now));
        label = deflabel;
    }
    if (!valid_label(label)) {
        snprintf(err, errlen,
                 "label: '%.64s' is not a letter followed by 1 to 39 of A-Z a-z 0-9 "
                 "_ -",
                 label);
        return -1;
    }
    if (sbx_vm_find(s, name, &vm, err, errlen) || !(list = snapshots(s, &vm, err, errlen)))
        return -1;
    json_array_foreach(list, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "name")), label) == 0) {
            snprintf(err, errlen, "snapshot: '%s' exists already on %s", label, vm.name);
            json_decref(list);
            return -1;
        }
    }
    if (make_room(s, &vm, list, dropped, sizeof dropped, err, errlen)) {
        json_decref(list);
        return -1;
    }
    json_decref(list);
    sbx_vm_path(path, sizeof path, vm.node, vm.vmid, "/snapshot");
    if (sbx_vm_task(s, "POST", path,
                    json_pack("{s:s,s:i,s:s}", "snapname", label, "vmstate", 0, "description",
                              "taken by sandboxctl"),
                    err, errlen))
        return -1;
    *out = json_pack("{s:s,s:s}", "name", vm.name, "label", label);
    if (dropped[0])
        json_object_set_new(*out, "deleted", json_string(dropped));
    return 0;
}

/* Rollback restores the snapshot's whole config, description included:
 * write the metadata of before the rollback (owner, expiry) back. */
static int restore_meta(struct sbx *s, const struct sbx_vm *vm, const struct sbx_meta *m, char *err,
                        size_t errlen)
{
    json_t *config = NULL;
    int rc;

    if (sbx_vm_config(s, vm->node, vm->vmid, &config, err, errlen))
        return -1;
    rc = sbx_vm_write_meta(s, vm->node, vm->vmid, m,
                           json_string_value(json_object_get(config, "digest")), err, errlen);
    json_decref(config);
    return rc;
}

int sbx_op_rollback(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "label", NULL};
    const char *name, *label;
    char path[512];
    struct sbx_vm vm;
    struct sbx_meta m;
    json_t *config = NULL, *params;
    int rc;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(label = sbx_args_string(args, "label", 1, err, errlen)))
        return -1;
    if (!valid_label(label)) {
        snprintf(err, errlen, "label: '%.64s' is not a snapshot name", label);
        return -1;
    }
    if (sbx_vm_find(s, name, &vm, err, errlen) ||
        sbx_vm_config(s, vm.node, vm.vmid, &config, err, errlen))
        return -1;
    rc = sbx_vm_meta(config, &m, err, errlen);
    json_decref(config);
    if (rc)
        return -1;
    snprintf(path, sizeof path, "/nodes/%s/qemu/%d/snapshot/%s/rollback", vm.node, vm.vmid, label);
    params = json_pack("{s:i}", "start", strcmp(vm.status, "running") == 0);
    if (sbx_vm_task(s, "POST", path, params, err, errlen) || restore_meta(s, &vm, &m, err, errlen))
        return -1;
    *out = json_pack("{s:s,s:s}", "name", vm.name, "label", label);
    return 0;
}

int sbx_op_snapshots(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    const char *name;
    struct sbx_vm vm;
    json_t *list, *res, *v;
    size_t i;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        sbx_vm_find(s, name, &vm, err, errlen) || !(list = snapshots(s, &vm, err, errlen)))
        return -1;
    res = json_array();
    json_array_foreach(list, i, v)
    {
        char created[32];
        sbx_time_format((time_t)json_integer_value(json_object_get(v, "snaptime")), created,
                        sizeof created);
        json_array_append_new(
            res, json_pack("{s:O,s:s}", "label", json_object_get(v, "name"), "created", created));
    }
    json_decref(list);
    *out = json_pack("{s:s,s:o}", "name", vm.name, "snapshots", res);
    return 0;
}
