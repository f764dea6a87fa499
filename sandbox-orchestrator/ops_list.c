/* ops_list.c - list the pool's sandboxes with their metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "sbx.h"
#include "vm.h"

/* The access grants of m that have not lapsed at now: [{host, until}]. */
static json_t *grants_json(const struct sbx_meta *m, time_t now)
{
    json_t *list = json_array();
    char until[32];

    for (int i = 0; i < m->ngrants; i++) {
        if (m->grants[i].until <= now)
            continue;
        sbx_time_format(m->grants[i].until, until, sizeof until);
        json_array_append_new(list,
                              json_pack("{s:s,s:s}", "host", m->grants[i].allow, "until", until));
    }
    return list;
}

/* The name of the configured size vm has (its cores and memory), or NULL
 * when it has none of them (resized by hand, or a size line changed). */
static const char *size_name(const struct sbx_config *c, const struct sbx_vm *vm)
{
    for (int i = 0; i < c->nsizes; i++)
        if (c->sizes[i].cores == vm->maxcpu && c->sizes[i].memory_mib == vm->maxmem_mib)
            return c->sizes[i].name;
    return NULL;
}

/* One sandbox as list shows it; a VM whose description cannot be read is
 * listed with the problem instead of its metadata.  NULL: another owner's
 * sandbox while the operations are scoped to one owner. */
static json_t *describe(struct sbx *s, const struct sbx_vm *vm)
{
    json_t *config = NULL, *o;
    struct sbx_meta m;
    char why[512], created[32], expires[32];
    const char *size = size_name(&s->cfg, vm);

    o = json_pack("{s:i,s:s,s:s,s:s,s:o,s:i,s:I}", "vmid", vm->vmid, "name", vm->name, "node",
                  vm->node, "status", vm->status, "size", size ? json_string(size) : json_null(),
                  "cores", vm->maxcpu, "memory_mib", (json_int_t)vm->maxmem_mib);
    if (sbx_vm_config(s, vm->node, vm->vmid, &config, why, sizeof why) ||
        sbx_vm_meta(config, &m, why, sizeof why)) {
        json_decref(config);
        if (s->owner_scope[0]) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, "problem", json_string(why));
        return o;
    }
    json_decref(config);
    if (s->owner_scope[0] && strcmp(m.owner, s->owner_scope) != 0) {
        json_decref(o);
        return NULL;
    }
    sbx_time_format(m.created, created, sizeof created);
    sbx_time_format(m.expires, expires, sizeof expires);
    json_object_set_new(o, "owner", json_string(m.owner));
    json_object_set_new(o, "policy", json_string(m.policy));
    json_object_set_new(o, "address", json_string(m.address));
    json_object_set_new(o, "created", json_string(created));
    json_object_set_new(o, "expires", json_string(expires));
    json_object_set_new(o, "secrets", json_array());
    for (int i = 0; i < m.nsecrets; i++)
        json_array_append_new(json_object_get(o, "secrets"), json_string(m.secrets[i]));
    json_object_set_new(o, "grants", grants_json(&m, time(NULL)));
    return o;
}

static int by_vmid(const void *a, const void *b)
{
    return ((const struct sbx_vm *)a)->vmid - ((const struct sbx_vm *)b)->vmid;
}

int sbx_op_list(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    struct sbx_vm *vms;
    size_t n;
    json_t *list;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) || sbx_vm_list(s, &vms, &n, NULL, err, errlen))
        return -1;
    qsort(vms, n, sizeof *vms, by_vmid);
    list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *one = describe(s, &vms[i]);
        if (one)
            json_array_append_new(list, one);
    }
    free(vms);
    *out = json_pack("{s:o}", "sandboxes", list);
    return 0;
}
