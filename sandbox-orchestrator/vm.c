/* vm.c - find, describe and destroy the sandbox VMs of the pool. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task.h"
#include "vm.h"

void sbx_vm_path(char *buf, size_t len, const char *node, int vmid, const char *suffix)
{
    snprintf(buf, len, "/nodes/%s/qemu/%d%s", node, vmid, suffix ? suffix : "");
}

static void copy_str(char *dst, size_t len, json_t *v)
{
    snprintf(dst, len, "%s", json_is_string(v) ? json_string_value(v) : "");
}

/* One /cluster/resources entry into vm; 0 when it is a sandbox of the pool. */
static int from_resource(const struct sbx *s, json_t *r, struct sbx_vm *vm)
{
    json_t *pool = json_object_get(r, "pool"), *tmpl = json_object_get(r, "template");

    if (!json_is_string(pool) || strcmp(json_string_value(pool), s->cfg.pool) != 0)
        return -1;
    if (json_is_true(tmpl) || (json_is_integer(tmpl) && json_integer_value(tmpl) != 0))
        return -1;
    if (!json_is_integer(json_object_get(r, "vmid")))
        return -1;
    memset(vm, 0, sizeof *vm);
    vm->vmid = (int)json_integer_value(json_object_get(r, "vmid"));
    copy_str(vm->node, sizeof vm->node, json_object_get(r, "node"));
    copy_str(vm->name, sizeof vm->name, json_object_get(r, "name"));
    copy_str(vm->status, sizeof vm->status, json_object_get(r, "status"));
    copy_str(vm->tags, sizeof vm->tags, json_object_get(r, "tags"));
    vm->maxmem_mib = (long)(json_integer_value(json_object_get(r, "maxmem")) / (1024 * 1024));
    vm->maxcpu = (int)json_number_value(json_object_get(r, "maxcpu")); /* a number */
    return vm->node[0] ? 0 : -1;
}

int sbx_vm_list(struct sbx *s, struct sbx_vm **vms, size_t *n, json_t **all, char *err,
                size_t errlen)
{
    json_t *params = json_pack("{s:s}", "type", "vm"), *res = NULL, *r;
    size_t i;

    *vms = NULL;
    *n = 0;
    if (all)
        *all = NULL;
    if (sbx_pve_call(s->pve, "GET", "/cluster/resources", params, &res, err, errlen)) {
        json_decref(params);
        return -1;
    }
    json_decref(params);
    if (!json_is_array(res)) {
        snprintf(err, errlen, "GET /cluster/resources: answer is not a list");
        json_decref(res);
        return -1;
    }
    *vms = calloc(json_array_size(res) + 1, sizeof **vms);
    if (!*vms)
        abort();
    json_array_foreach(res, i, r)
    {
        if (from_resource(s, r, &(*vms)[*n]) == 0)
            (*n)++;
    }
    if (all)
        *all = res;
    else
        json_decref(res);
    return 0;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

bool sbx_vm_in_scope(struct sbx *s, const struct sbx_vm *vm)
{
    json_t *config = NULL;
    struct sbx_meta m;
    char why[256];
    bool mine;

    if (s->owner_scope[0] == '\0')
        return true;
    mine = sbx_vm_config(s, vm->node, vm->vmid, &config, why, sizeof why) == 0 &&
           sbx_vm_meta(config, &m, why, sizeof why) == 0 && strcmp(m.owner, s->owner_scope) == 0;
    json_decref(config);
    return mine;
}

int sbx_vm_find(struct sbx *s, const char *name, struct sbx_vm *vm, char *err, size_t errlen)
{
    struct sbx_vm *vms;
    size_t n, found = 0;
    int byid = all_digits(name);

    if (sbx_vm_list(s, &vms, &n, NULL, err, errlen))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (byid ? vms[i].vmid == atoi(name) : strcmp(vms[i].name, name) == 0) {
            if (found++ == 0)
                *vm = vms[i];
        }
    }
    free(vms);
    if (found == 1 && !sbx_vm_in_scope(s, vm))
        found = 0; /* another owner's: it does not exist for this caller */
    if (found == 1)
        return 0;
    if (found == 0 && s->owner_scope[0])
        snprintf(err, errlen, "no sandbox called '%.64s' of owner '%s' in pool '%s'", name,
                 s->owner_scope, s->cfg.pool);
    else if (found == 0)
        snprintf(err, errlen, "no sandbox called '%.64s' in pool '%s'", name, s->cfg.pool);
    else
        snprintf(err, errlen, "%zu sandboxes are called '%.64s' in pool '%s': use the VMID", found,
                 name, s->cfg.pool);
    return -1;
}

int sbx_vm_config(struct sbx *s, const char *node, int vmid, json_t **config, char *err,
                  size_t errlen)
{
    char path[256];

    sbx_vm_path(path, sizeof path, node, vmid, "/config");
    if (sbx_pve_call(s->pve, "GET", path, NULL, config, err, errlen))
        return -1;
    if (!json_is_object(*config)) {
        snprintf(err, errlen, "GET %s: answer is not an object", path);
        json_decref(*config);
        *config = NULL;
        return -1;
    }
    return 0;
}

int sbx_vm_meta(json_t *config, struct sbx_meta *m, char *err, size_t errlen)
{
    json_t *d = json_object_get(config, "description");
    char why[512];

    if (!json_is_string(d)) {
        snprintf(err, errlen, "no description (no sandboxctl metadata)");
        return 1;
    }
    switch (sbx_meta_decode(json_string_value(d), json_string_length(d), m, why, sizeof why)) {
    case SBX_META_OK: return 0;
    case SBX_META_ABSENT: snprintf(err, errlen, "description holds no sandboxctl block"); return 1;
    default: snprintf(err, errlen, "%s", why); return -1;
    }
}

void sbx_vm_tags(const struct sbx_meta *m, char *buf, size_t len)
{
    char owner[sizeof m->owner];
    size_t i;

    for (i = 0; m->owner[i]; i++) {
        char c = (char)tolower((unsigned char)m->owner[i]);
        owner[i] = isalnum((unsigned char)c) || strchr("_+.-", c) ? c : '_';
    }
    owner[i] = '\0';
    snprintf(buf, len, "ip-%s;owner-%s;sandboxctl", m->address, owner);
}

int sbx_vm_write_meta(struct sbx *s, const char *node, int vmid, const struct sbx_meta *m,
                      const char *digest, char *err, size_t errlen)
{
    char desc[SBX_DESC_MAX + 1], tags[256], path[256];
    json_t *params;
    int rc;

    if (sbx_meta_encode(m, desc, sizeof desc, err, errlen) < 0)
        return -1;
    sbx_vm_tags(m, tags, sizeof tags);
    params = json_pack("{s:s,s:s}", "description", desc, "tags", tags);
    if (digest)
        json_object_set_new(params, "digest", json_string(digest));
    sbx_vm_path(path, sizeof path, node, vmid, "/config");
    rc = sbx_pve_call(s->pve, "PUT", path, params, NULL, err, errlen);
    json_decref(params);
    return rc;
}

#define DIGEST_TRIES 3

/* Another writer changed the config between our read and our write. */
static int digest_conflict(const char *err)
{
    return strstr(err, "digest") || strstr(err, "modified configuration");
}

int sbx_vm_edit_meta(struct sbx *s, const struct sbx_vm *vm,
                     int (*edit)(struct sbx_meta *m, void *arg, char *err, size_t errlen),
                     void *arg, struct sbx_meta *m, char *err, size_t errlen)
{
    for (int attempt = 1;; attempt++) {
        json_t *config = NULL;
        char digest[128];
        const char *d;
        int rc;

        if (sbx_vm_config(s, vm->node, vm->vmid, &config, err, errlen))
            return -1;
        rc = sbx_vm_meta(config, m, err, errlen);
        d = json_string_value(json_object_get(config, "digest"));
        snprintf(digest, sizeof digest, "%s", d ? d : "");
        json_decref(config);
        if (rc || edit(m, arg, err, errlen))
            return -1;
        rc = sbx_vm_write_meta(s, vm->node, vm->vmid, m, digest[0] ? digest : NULL, err, errlen);
        if (rc == 0 || !digest_conflict(err) || attempt == DIGEST_TRIES)
            return rc;
    }
}

int sbx_vm_gone(const char *err)
{
    return strstr(err, "does not exist") != NULL;
}

int sbx_vm_task(struct sbx *s, const char *method, const char *path, json_t *params, char *err,
                size_t errlen)
{
    json_t *upid = NULL;
    int rc = sbx_pve_call(s->pve, method, path, params, &upid, err, errlen);

    if (rc == 0)
        rc = sbx_task_wait_json(s->pve, upid, s->cfg.task_timeout_ms, err, errlen);
    json_decref(upid);
    json_decref(params);
    return rc;
}

int sbx_vm_destroy(struct sbx *s, const char *node, int vmid, char *err, size_t errlen)
{
    char path[256];
    json_t *cur = NULL, *params;
    const char *status;
    int rc;

    sbx_vm_path(path, sizeof path, node, vmid, "/status/current");
    if (sbx_pve_call(s->pve, "GET", path, NULL, &cur, err, errlen))
        return sbx_vm_gone(err) ? 0 : -1;
    status = json_string_value(json_object_get(cur, "status"));
    if (status && strcmp(status, "stopped") != 0) {
        sbx_vm_path(path, sizeof path, node, vmid, "/status/stop");
        if (sbx_vm_task(s, "POST", path, NULL, err, errlen) && !sbx_vm_gone(err)) {
            json_decref(cur);
            return -1;
        }
    }
    json_decref(cur);
    sbx_vm_path(path, sizeof path, node, vmid, "");
    params = json_pack("{s:i,s:i}", "purge", 1, "destroy-unreferenced-disks", 1);
    rc = sbx_vm_task(s, "DELETE", path, params, err, errlen);
    if (rc && sbx_vm_gone(err))
        rc = 0;
    return rc;
}
