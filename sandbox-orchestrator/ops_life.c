/* ops_life.c - extend and destroy a sandbox. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "egress.h"
#include "ops.h"
#include "sbx.h"
#include "vm.h"

/* Moves m->expires by ms (an sbx_vm_edit_meta edit; arg is s and ms). */
struct extension {
    struct sbx *s;
    long ms;
};

static int move_expiry(struct sbx_meta *m, void *arg, char *err, size_t errlen)
{
    const struct extension *x = arg;
    time_t now = time(NULL), limit = now + x->s->cfg.lifetime_max_ms / 1000;
    char when[32], max[32];

    if (m->expires < now)
        m->expires = now;
    if (m->expires + x->ms / 1000 > limit) {
        sbx_time_format(m->expires + x->ms / 1000, when, sizeof when);
        sbx_duration_format(x->s->cfg.lifetime_max_ms, max, sizeof max);
        snprintf(err, errlen,
                 "extend: the sandbox would end at %s, more than lifetime-max %s from now; "
                 "at most %ld minutes more are possible",
                 when, max, (long)(limit - m->expires) / 60);
        return -1;
    }
    m->expires += x->ms / 1000;
    return 0;
}

int sbx_op_extend(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", "duration", NULL};
    const char *name, *dur;
    struct sbx_vm vm;
    struct sbx_meta m;
    long ms;
    char expires[32], why[1024];
    json_t *binding;
    struct extension x = {s, 0};

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(dur = sbx_args_string(args, "duration", 1, err, errlen)))
        return -1;
    if (sbx_duration_parse(dur, &ms) || ms < 60000) {
        snprintf(err, errlen, "duration: expected 30m, 2h, ... (at least 1m), got '%.40s'", dur);
        return -1;
    }
    x.ms = ms;
    if (sbx_vm_find(s, name, &vm, err, errlen) ||
        sbx_vm_edit_meta(s, &vm, move_expiry, &x, &m, err, errlen))
        return -1;
    /* The description holds the new expiry from here: an egressd not told
     * (or a process killed now) leaves a binding doctor and sync mend. */
    sbx_time_format(m.expires, expires, sizeof expires);
    binding = sbx_egress_binding(vm.vmid, vm.name, &m);
    if (sbx_egress_put(&s->cfg, binding, why, sizeof why)) {
        snprintf(err, errlen,
                 "extended in VM %d's description until %s, but egressd was not told (%s): run "
                 "sandboxctl sync",
                 vm.vmid, expires, why);
        json_decref(binding);
        return -1;
    }
    json_decref(binding);
    *out = json_pack("{s:s,s:s}", "name", vm.name, "expires", expires);
    return 0;
}

int sbx_op_destroy(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    const char *name;
    struct sbx_vm vm;
    char unbind[1024] = "";
    int unbound;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        sbx_vm_find(s, name, &vm, err, errlen))
        return -1;
    /* The binding goes first: from then on the sandbox reaches nothing. */
    unbound = sbx_egress_delete(&s->cfg, vm.vmid, unbind, sizeof unbind) == 0;
    if (sbx_vm_destroy(s, vm.node, vm.vmid, err, errlen))
        return -1;
    if (!unbound) {
        snprintf(err, errlen,
                 "VM %d destroyed, but its binding could not be removed (%s): run sandboxctl sync",
                 vm.vmid, unbind);
        return -1;
    }
    *out = json_pack("{s:s,s:i,s:b}", "name", vm.name, "vmid", vm.vmid, "destroyed", 1);
    return 0;
}
