/* ops_sync.c - make every egressd's bindings equal to what Proxmox holds. */
#include <stdio.h>
#include <stdlib.h>

#include "egress.h"
#include "sbx.h"
#include "vm.h"

int sbx_op_sync(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    struct sbx_vm *vms;
    size_t n;
    json_t *bindings, *targets, *skipped;
    int rc;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen))
        return -1;
    if (s->cfg.negress == 0) {
        snprintf(err, errlen, "sync: no `egressd-admin` in %s", s->cfg.path);
        return -1;
    }
    if (sbx_vm_list(s, &vms, &n, NULL, err, errlen))
        return -1;
    bindings = json_array();
    skipped = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *config = NULL;
        struct sbx_meta m;
        char why[512];
        /* A config that cannot be read now (Proxmox busy, a dropped
         * connection) says nothing about the sandbox: replacing the set
         * without it would cut a live sandbox off.  Stop instead. */
        if (sbx_vm_config(s, vms[i].node, vms[i].vmid, &config, why, sizeof why) &&
            !sbx_vm_gone(why)) {
            snprintf(err, errlen, "sync: VM %d: %s; no egressd was changed", vms[i].vmid, why);
            free(vms);
            json_decref(bindings);
            json_decref(skipped);
            return -1;
        }
        if (!config || sbx_vm_meta(config, &m, why, sizeof why))
            /* Without readable metadata there is no policy to bind: such a
             * VM gets nothing through the proxy, which is the safe side. */
            json_array_append_new(skipped, json_sprintf("VM %d: %s", vms[i].vmid, why));
        else
            json_array_append_new(bindings, sbx_egress_binding(vms[i].vmid, vms[i].name, &m));
        json_decref(config);
    }
    free(vms);
    rc = sbx_egress_replace(&s->cfg, bindings, err, errlen);
    if (rc == 0) {
        targets = json_array();
        for (int i = 0; i < s->cfg.negress; i++)
            json_array_append_new(targets, json_string(s->cfg.egress[i]));
        *out = json_pack("{s:I,s:o,s:O}", "bindings", (json_int_t)json_array_size(bindings),
                         "egressd", targets, "skipped", skipped);
    }
    json_decref(bindings);
    json_decref(skipped);
    return rc;
}
