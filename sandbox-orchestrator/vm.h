/* vm.h - the sandbox VMs of the pool as Proxmox reports them.
 *
 * Only VMs in the configured pool are sandboxes: nothing here ever finds,
 * changes or destroys a VM outside it.
 */
#ifndef SBX_VM_H
#define SBX_VM_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "meta.h"
#include "sbx.h"

struct sbx_vm {
    int vmid;
    char node[64];
    char name[64];
    char status[32]; /* running, stopped, ... */
    long maxmem_mib;
    int maxcpu; /* the VM's cores, as the cluster counts them */
    char tags[512];
};

/* The pool's VMs from GET /cluster/resources?type=vm (templates left out),
 * as a new array of struct sbx_vm in *vms with *n entries (caller frees).
 * When all is non-NULL it receives the raw answer (every VM, new reference).
 * Returns 0, or -1 with err. */
int sbx_vm_list(struct sbx *s, struct sbx_vm **vms, size_t *n, json_t **all, char *err,
                size_t errlen);

/* Find the pool's VM called name (or with that VMID when name is all
 * digits).  Returns 0, or -1 with err (not found, or more than one). */
int sbx_vm_find(struct sbx *s, const char *name, struct sbx_vm *vm, char *err, size_t errlen);

/* "/nodes/NODE/qemu/VMID" followed by suffix, into buf. */
void sbx_vm_path(char *buf, size_t len, const char *node, int vmid, const char *suffix);

/* GET the VM's config (new reference in *config).  0 / -1 with err. */
int sbx_vm_config(struct sbx *s, const char *node, int vmid, json_t **config, char *err,
                  size_t errlen);

/* Decode the metadata in a config's description into m.  Returns 0; 1
 * when there is no sandboxctl block (not a sandbox of ours); -1 when the
 * block is malformed.  err says why on 1 and -1. */
int sbx_vm_meta(json_t *config, struct sbx_meta *m, char *err, size_t errlen);

/* Tags for a sandbox: "sandboxctl;ip-ADDRESS;owner-OWNER" (owner reduced to
 * the characters tags may hold). */
void sbx_vm_tags(const struct sbx_meta *m, char *buf, size_t len);

/* Write m as the description (and tags) with PUT config, guarded by
 * digest (may be NULL).  0 / -1 with err. */
int sbx_vm_write_meta(struct sbx *s, const char *node, int vmid, const struct sbx_meta *m,
                      const char *digest, char *err, size_t errlen);

/* Changes vm's metadata: reads it with the config's digest, lets
 * edit(m, arg, err, errlen) change m (it returns 0, or -1 with err filled
 * to write nothing), and writes it back guarded by that digest; when
 * another writer came in between, it starts again from the read (a few
 * times).  Returns 0 with *m as written, or -1 with err. */
int sbx_vm_edit_meta(struct sbx *s, const struct sbx_vm *vm,
                     int (*edit)(struct sbx_meta *m, void *arg, char *err, size_t errlen),
                     void *arg, struct sbx_meta *m, char *err, size_t errlen);

/* Stop (when running) and delete vmid with purge and its unreferenced
 * disks, waiting for both tasks.  A VM that no longer exists counts as
 * destroyed.  0 / -1 with err. */
int sbx_vm_destroy(struct sbx *s, const char *node, int vmid, char *err, size_t errlen);

/* Call an asynchronous API (method, path, params) and wait for its task.
 * params is consumed (may be NULL).  Returns 0, or -1 with the reason. */
int sbx_vm_task(struct sbx *s, const char *method, const char *path, json_t *params, char *err,
                size_t errlen);

/* Whether vm belongs to the owner the operations are scoped to (always,
 * when none is set; never, when its metadata cannot be read). */
bool sbx_vm_in_scope(struct sbx *s, const struct sbx_vm *vm);

/* Whether an error text says the VM does not exist (any more). */
int sbx_vm_gone(const char *err);

#endif
