/* ops_reap.c - destroy every sandbox past its end of life.
 *
 * Reapers serialize on STATE_DIR/reap.lock, and a VM already gone counts as
 * destroyed, so two reapers at once (a timer and a hand) destroy each
 * expired sandbox once and both succeed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "egress.h"
#include "guard.h"
#include "sbx.h"
#include "vm.h"

/* Reap one VM when its metadata says it has expired; 1 = reaped. */
static int reap_one(struct sbx *s, const struct sbx_vm *vm, time_t now, json_t *reaped,
                    json_t *errors)
{
    json_t *config = NULL;
    struct sbx_meta m;
    char why[1024], expires[32];

    int rc = sbx_vm_config(s, vm->node, vm->vmid, &config, why, sizeof why);

    if (rc == 0)
        rc = sbx_vm_meta(config, &m, why, sizeof why);
    if (rc) {
        json_decref(config);
        /* Not ours (no block) or gone meanwhile: nothing to say.  A
         * tampered block is: its sandbox can no longer be reaped. */
        if (rc == -1 && !sbx_vm_gone(why))
            json_array_append_new(errors,
                                  json_sprintf("VM %d (%s): kept: %s", vm->vmid, vm->name, why));
        return 0;
    }
    json_decref(config);
    if (m.expires > now)
        return 0;
    if (sbx_egress_delete(&s->cfg, vm->vmid, why, sizeof why))
        json_array_append_new(errors, json_sprintf("VM %d: binding: %s", vm->vmid, why));
    if (sbx_vm_destroy(s, vm->node, vm->vmid, why, sizeof why)) {
        json_array_append_new(errors, json_sprintf("VM %d: %s", vm->vmid, why));
        return 0;
    }
    sbx_time_format(m.expires, expires, sizeof expires);
    json_array_append_new(
        reaped, json_pack("{s:i,s:s,s:s}", "vmid", vm->vmid, "name", vm->name, "expires", expires));
    return 1;
}

int sbx_op_reap(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    struct sbx_vm *vms;
    size_t n;
    int lock, kept = 0;
    json_t *reaped, *errors;
    time_t now = time(NULL);

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen))
        return -1;
    lock = sbx_state_lock(s->cfg.state_dir, "reap.lock", err, errlen);
    if (lock == -1)
        return -1;
    if (sbx_vm_list(s, &vms, &n, NULL, err, errlen)) {
        close(lock);
        return -1;
    }
    reaped = json_array();
    errors = json_array();
    for (size_t i = 0; i < n; i++)
        if (!reap_one(s, &vms[i], now, reaped, errors))
            kept++;
    free(vms);
    close(lock);
    *out = json_pack("{s:o,s:i,s:o}", "reaped", reaped, "kept", kept, "errors", errors);
    return 0;
}
