/* ops_sync.c - make every egressd's bindings equal to what Proxmox holds
 * (saying per egressd what it lacked, held too many or held otherwise),
 * and each running sandbox's guest (or the one named) hold the credentials
 * egressd gives it now (its sandbox CA follows the hosts its secrets are
 * bound to). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "creds.h"
#include "egress.h"
#include "guard.h"
#include "guest.h"
#include "sbx.h"
#include "vm.h"

/* The certificate of PEM text p[0..n), or NULL. */
static X509 *cert_of(const void *p, size_t n)
{
    BIO *b = n <= INT32_MAX ? BIO_new_mem_buf(p, (int)n) : NULL;
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

    BIO_free(b);
    return x;
}

/* The DER of x's nameConstraints extension, or NULL. */
static const ASN1_OCTET_STRING *constraints_of(const X509 *x)
{
    int i = X509_get_ext_by_NID(x, NID_name_constraints, -1);
    return i < 0 ? NULL : X509_EXTENSION_get_data(X509_get_ext(x, i));
}

/* Whether two sandbox CA certificates permit the same: the same key and
 * the same name constraints (egressd makes the certificate anew at each
 * start; only a change of its hosts matters to the guest). */
static bool same_authority(const X509 *a, const X509 *b)
{
    const ASN1_OCTET_STRING *ca = constraints_of(a), *cb = constraints_of(b);
    return EVP_PKEY_eq(X509_get0_pubkey(a), X509_get0_pubkey(b)) == 1 && ca != NULL && cb != NULL &&
           ASN1_OCTET_STRING_cmp(ca, cb) == 0;
}

/* Whether the guest of vm holds a CA that permits what cr's does; -1 when
 * the file cannot be read (why). */
static int guest_has_ca(struct sbx *s, const struct sbx_vm *vm, const struct sbx_creds *cr,
                        char *why, size_t len)
{
    unsigned char *data = NULL;
    size_t n = 0;

    if (sbx_guest_read(s, vm->node, vm->vmid, SBX_CREDS_CA_FILE, &data, &n, why, len))
        return -1;
    X509 *held = cert_of(data, n), *now = cert_of(cr->ca_pem, strlen(cr->ca_pem));
    int same = held != NULL && now != NULL && same_authority(held, now);
    X509_free(held);
    X509_free(now);
    free(data);
    return same;
}

/* See ops.h. */
const char *sbx_sync_guest_credentials(struct sbx *s, const struct sbx_vm *vm,
                                       const struct sbx_meta *m, char *why, size_t len)
{
    struct sbx_creds cr;
    json_t *answer = NULL;
    const char *result = "skipped";

    if (strcmp(vm->status, "running") != 0) {
        snprintf(why, len, "not running (%s)", vm->status);
        return result;
    }
    if (sbx_egress_credentials(&s->cfg, vm->vmid, &answer, why, len))
        return result;
    int rc = sbx_creds_parse(&s->cfg, vm->vmid, m, answer, &cr, why, len);
    json_decref(answer);
    if (rc)
        return result;
    /* A CA file that cannot be read (a guest that never had one: the
     * binding gained its first request-rule host after the create) is
     * installed as a stale one is; installing is idempotent, and when the
     * agent is the trouble the install says so. */
    int has = guest_has_ca(s, vm, &cr, why, len);
    if (has == 1)
        result = "current";
    else if (sbx_creds_install(s, vm->node, vm->vmid, &cr, why, len) == 0)
        result = "installed";
    sbx_creds_free(&cr);
    return result;
}

/* Whether egressd gives running vm, which has no secrets, a CA (its
 * policy's request rules need one): then its guest is kept current as a
 * guest with secrets is. */
static bool gets_ca(struct sbx *s, const struct sbx_vm *vm)
{
    json_t *answer = NULL;
    char why[256];

    if (strcmp(vm->status, "running") != 0 ||
        sbx_egress_credentials(&s->cfg, vm->vmid, &answer, why, sizeof why))
        return false;
    bool has = json_is_string(json_object_get(answer, "ca"));
    json_decref(answer);
    return has;
}

/* The VMIDs that creates in progress hold (a live sandboxctl's
 * reservation in state-dir): their own steps install the guest's
 * credentials, so sync leaves those guests alone (the reaper timer runs
 * sync while a create may be under way).  A JSON array of integers, or
 * NULL with the reason in err. */
static json_t *creating_vmids(struct sbx *s, char *err, size_t errlen)
{
    struct sbx_guard g;
    json_t *ids, *r;
    size_t i;

    if (sbx_guard_open(&g, s->cfg.state_dir, err, errlen))
        return NULL;
    ids = json_array();
    json_array_foreach(g.reservations, i, r)
    {
        json_t *vmid = json_object_get(r, "vmid");
        if (json_is_integer(vmid))
            json_array_append(ids, vmid);
    }
    sbx_guard_close(&g);
    return ids;
}

/* Whether ids (of creating_vmids) holds vmid. */
static bool is_creating(json_t *ids, int vmid)
{
    json_t *v;
    size_t i;

    json_array_foreach(ids, i, v)
    {
        if (json_integer_value(v) == vmid)
            return true;
    }
    return false;
}

/* The ids of set's bindings in an object, each to its binding (borrowed). */
static json_t *by_id(json_t *set)
{
    json_t *ids = json_object(), *b;
    size_t i;

    json_array_foreach(set, i, b)
    {
        const char *id = json_string_value(json_object_get(b, "id"));
        if (id)
            json_object_set(ids, id, b);
    }
    return ids;
}

/* What the egressd at target holds (held: its GET /v1/sandboxes) against
 * want (the bindings from Proxmox), compared binding by binding, whole:
 *   {"egressd": target, "result": "current" or "healed",
 *    "added": [ids it lacked], "removed": [ids it held that Proxmox has
 *    not], "changed": [ids it held otherwise]}
 * A node that was down while sandboxes were made, destroyed or granted
 * something holds the set of before (its state-dir): this says how. */
static json_t *node_diff(const char *target, json_t *held, json_t *want)
{
    json_t *h = by_id(held), *w = by_id(want), *added = json_array(), *removed = json_array(),
           *changed = json_array(), *b;
    const char *id;

    json_object_foreach(w, id, b)
    {
        json_t *old = json_object_get(h, id);
        if (old == NULL)
            json_array_append_new(added, json_string(id));
        else if (!sbx_egress_binding_current(b, old))
            json_array_append_new(changed, json_string(id));
    }
    json_object_foreach(h, id, b)
    {
        if (json_object_get(w, id) == NULL)
            json_array_append_new(removed, json_string(id));
    }
    bool same = json_array_size(added) + json_array_size(removed) + json_array_size(changed) == 0 &&
                json_array_size(held) == json_object_size(h);
    json_decref(h);
    json_decref(w);
    return json_pack("{s:s,s:s,s:o,s:o,s:o}", "egressd", target, "result",
                     same ? "current" : "healed", "added", added, "removed", removed, "changed",
                     changed);
}

/* Make the egressd at target hold bindings: read its set, compare, then
 * replace it (also when current: the replace tells egressd it is in step,
 * which a pair's returning node waits for).  Its entry of the answer's
 * "egressd" list (node_diff), or {"egressd", "error"} with the reason
 * also in err; *failed set then. */
static json_t *sync_node(struct sbx *s, const char *target, json_t *bindings, bool *failed,
                         char *err, size_t errlen)
{
    json_t *held = NULL, *entry = NULL;
    char why[800];

    if (sbx_egress_get(&s->cfg, target, "/v1/sandboxes", &held, why, sizeof why) == 0 &&
        !json_is_array(held))
        snprintf(why, sizeof why, "egressd %s: GET /v1/sandboxes: not an array", target);
    else if (held != NULL &&
             sbx_egress_replace_one(&s->cfg, target, bindings, why, sizeof why) == 0)
        entry = node_diff(target, held, bindings);
    json_decref(held);
    if (entry != NULL)
        return entry;
    size_t used = strlen(err);
    snprintf(err + used, errlen - used, "%s%s", *failed ? "; " : "sync: ", why);
    *failed = true;
    return json_pack("{s:s,s:s}", "egressd", target, "error", why);
}

/* Every egressd made to hold bindings: their entries (sync_node) in
 * *nodes; 0, or -1 when one failed (err names each). */
static int sync_nodes(struct sbx *s, json_t *bindings, json_t **nodes, char *err, size_t errlen)
{
    bool failed = false;

    err[0] = '\0';
    *nodes = json_array();
    for (int i = 0; i < s->cfg.negress; i++)
        json_array_append_new(*nodes,
                              sync_node(s, s->cfg.egress[i], bindings, &failed, err, errlen));
    return failed ? -1 : 0;
}

/* Whether vm is the sandbox `name` (its name or its VMID). */
static bool is_named(const struct sbx_vm *vm, const char *name)
{
    return strcmp(vm->name, name) == 0 || atoi(name) == vm->vmid;
}

/* One entry of the answer's "credentials" list; creating: the VMIDs of
 * creates in progress. */
static json_t *credentials_entry(struct sbx *s, const struct sbx_vm *vm, const struct sbx_meta *m,
                                 json_t *creating)
{
    char why[512] = "its create is in progress (the create installs its credentials)";
    const char *result = is_creating(creating, vm->vmid)
                             ? "skipped"
                             : sbx_sync_guest_credentials(s, vm, m, why, sizeof why);

    if (strcmp(result, "skipped") == 0)
        return json_pack("{s:i,s:s,s:s,s:s}", "vmid", vm->vmid, "name", vm->name, "result", result,
                         "why", why);
    return json_pack("{s:i,s:s,s:s}", "vmid", vm->vmid, "name", vm->name, "result", result);
}

int sbx_op_sync(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {"name", NULL};
    struct sbx_vm *vms;
    struct sbx_meta *metas;
    bool *have;
    size_t n;
    json_t *bindings, *nodes = NULL, *skipped;
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
    metas = calloc(n ? n : 1, sizeof *metas);
    have = calloc(n ? n : 1, sizeof *have);
    if (metas == NULL || have == NULL)
        abort();
    bindings = json_array();
    skipped = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *config = NULL;
        char why[512];
        /* A config that cannot be read now (Proxmox busy, a dropped
         * connection) says nothing about the sandbox: replacing the set
         * without it would cut a live sandbox off.  Stop instead. */
        if (sbx_vm_config(s, vms[i].node, vms[i].vmid, &config, why, sizeof why) &&
            !sbx_vm_gone(why)) {
            snprintf(err, errlen, "sync: VM %d: %s; no egressd was changed", vms[i].vmid, why);
            free(vms);
            free(metas);
            free(have);
            json_decref(bindings);
            json_decref(skipped);
            return -1;
        }
        if (!config || sbx_vm_meta(config, &metas[i], why, sizeof why))
            /* Without readable metadata there is no policy to bind: such a
             * VM gets nothing through the proxy, which is the safe side. */
            json_array_append_new(skipped, json_sprintf("VM %d: %s", vms[i].vmid, why));
        else {
            json_array_append_new(bindings,
                                  sbx_egress_binding(vms[i].vmid, vms[i].name, &metas[i]));
            have[i] = true;
        }
        json_decref(config);
    }
    const char *only = json_string_value(json_object_get(args, "name"));
    bool named = only == NULL;
    for (size_t i = 0; i < n && !named; i++)
        named = is_named(&vms[i], only);
    rc = named ? sync_nodes(s, bindings, &nodes, err, errlen) : -1;
    if (!named)
        snprintf(err, errlen, "sync: no sandbox '%s' (sandboxctl list)", only);
    /* (creates in progress are read after the VM list: a listed VM's
     * create reserved it before its clone, so it is under way or done) */
    char why[400];
    json_t *creating = rc == 0 ? creating_vmids(s, why, sizeof why) : NULL;
    if (rc == 0 && creating == NULL) {
        snprintf(err, errlen,
                 "sync: the bindings are in place, but the creates in progress cannot be read "
                 "(%s): no guest's credentials were checked",
                 why);
        rc = -1;
    }
    if (rc == 0) {
        json_t *creds = json_array();
        for (size_t i = 0; i < n; i++)
            if (have[i] && (only == NULL || is_named(&vms[i], only)) &&
                (metas[i].nsecrets > 0 || gets_ca(s, &vms[i])))
                json_array_append_new(creds, credentials_entry(s, &vms[i], &metas[i], creating));
        *out = json_pack("{s:I,s:O,s:O,s:o}", "bindings", (json_int_t)json_array_size(bindings),
                         "egressd", nodes, "skipped", skipped, "credentials", creds);
    }
    json_decref(nodes);
    json_decref(creating);
    free(vms);
    free(metas);
    free(have);
    json_decref(bindings);
    json_decref(skipped);
    return rc;
}
