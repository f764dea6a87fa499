/* ops_doctor.c - check the Proxmox side and the egressds; name each fix;
 * repair what a sandboxctl killed half-way left, and say each repair.
 *
 * What a killed sandboxctl can leave, and what doctor does about it:
 *   - a create's record in state-dir (guard.h) of a process that has gone:
 *     the create was killed before it finished.  Its VM, if it made one,
 *     goes with its bindings (what undo() would have done); the record
 *     goes.
 *   - an access request marked "granting" (ops_access.c): its approval was
 *     killed between the store and the description; settled by the
 *     description.
 *   - a sandbox whose binding some egressd lacks or holds stale (a create,
 *     extend, grant or destroy killed between Proxmox and egressd): bound
 *     again as its description says; a binding whose VM the pool no longer
 *     holds as a sandbox: removed.  A VM whose create is in progress (a
 *     live reservation) is left to its create.
 *   - a temporary file of a state-dir write killed before its rename:
 *     removed, under the lock of the file it was for.
 * Each repair is one "repair" line naming the sandbox, what was wrong and
 * what was done, and one entry of the answer's "repairs"; a second run
 * finds nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress.h"
#include "guard.h"
#include "ops.h"
#include "sbx.h"
#include "vm.h"

/* The privileges the token needs on the pool (PVE 8 and 9 differ in the
 * guest agent's). */
static const char *const pool_privs[] = {
    "VM.Allocate",          "VM.Audit",          "VM.Config.CPU",
    "VM.Config.Memory",     "VM.Config.Network", "VM.Config.Cloudinit",
    "VM.Config.Options",    "VM.PowerMgmt",      "VM.Snapshot",
    "VM.Snapshot.Rollback", "Pool.Audit",        NULL};
static const char *const template_privs[] = {"VM.Clone", "VM.Audit", NULL};
static const char *const storage_privs[] = {"Datastore.AllocateSpace", NULL};
static const char *const bridge_privs[] = {"SDN.Use", NULL};
/* `node auto` reads each node's free memory, shown only with Sys.Audit. */
static const char *const nodes_privs[] = {"Sys.Audit", NULL};

struct report {
    json_t *checks;
    json_t *repairs;
    int ok;
};

static void add(struct report *r, const char *check, int ok, const char *detail, const char *fix)
{
    json_t *c = json_pack("{s:s,s:b,s:s}", "check", check, "ok", ok, "detail", detail);

    if (!ok) {
        json_object_set_new(c, "fix", json_string(fix));
        r->ok = 0;
    }
    json_array_append_new(r->checks, c);
}

/* One repair of kind (done, or tried and failed: then fix says what to
 * do), for VM vmid called name (0 and NULL: none): a "repair" check line
 * and an entry of the answer's repairs. */
static void repaired(struct report *r, const char *kind, int vmid, const char *name, int done,
                     const char *detail, const char *fix)
{
    add(r, "repair", done, detail, fix);
    json_array_append_new(r->repairs,
                          json_pack("{s:s,s:i,s:s?,s:s,s:b}", "kind", kind, "vmid", vmid, "name",
                                    name, "detail", detail, "done", done));
}

static void check_version(struct sbx *s, struct report *r, json_t **version)
{
    char err[1024], detail[256];
    json_t *v = NULL;
    const char *ver;

    if (sbx_pve_call(s->pve, "GET", "/version", NULL, &v, err, sizeof err)) {
        add(r, "api", 0, err, "check pve-url, the network path and pve-token-file");
        return;
    }
    ver = json_string_value(json_object_get(v, "version"));
    s->pve_major = ver ? atoi(ver) : 0;
    snprintf(detail, sizeof detail, "Proxmox VE %s", ver ? ver : "(unknown)");
    add(r, "version", s->pve_major >= 8, detail, "upgrade to Proxmox VE 8 or later");
    *version = json_string(ver ? ver : "");
    json_decref(v);
}

/* The privileges the token holds on path, or NULL with err. */
static json_t *privileges(struct sbx *s, const char *path, char *err, size_t errlen)
{
    json_t *params = json_pack("{s:s}", "path", path), *ans = NULL, *p;

    if (sbx_pve_call(s->pve, "GET", "/access/permissions", params, &ans, err, errlen)) {
        json_decref(params);
        return NULL;
    }
    json_decref(params);
    p = json_incref(json_object_get(ans, path));
    json_decref(ans);
    return p ? p : json_object();
}

static void check_privs(struct sbx *s, struct report *r, const char *path, const char *const *want,
                        const char *extra)
{
    char err[1024], missing[512] = "", detail[700], fix[900];
    json_t *have = privileges(s, path, err, sizeof err);
    size_t n = 0;

    if (!have) {
        add(r, "privileges", 0, err, "the token cannot read its own permissions: check it");
        return;
    }
    for (int i = 0; want[i] || extra; i++) {
        const char *priv = want[i] ? want[i] : extra;
        if (!json_object_get(have, priv) && n < sizeof missing)
            n += (size_t)snprintf(missing + n, sizeof missing - n, "%s%s", n ? " " : "", priv);
        if (!want[i])
            break;
    }
    json_decref(have);
    if (n == 0) {
        snprintf(detail, sizeof detail, "the token holds what it needs on %s", path);
        add(r, "privileges", 1, detail, NULL);
        return;
    }
    snprintf(detail, sizeof detail, "the token lacks %s on %s", missing, path);
    snprintf(fix, sizeof fix,
             "grant %s on %s to the token and to its user (privilege separation: the token gets "
             "the intersection), e.g. a role with them: pveum acl modify %s --roles ROLE "
             "--tokens 'USER@REALM!TOKEN'",
             missing, path, path);
    add(r, "privileges", 0, detail, fix);
}

/* Clones inherit the template's firewall: it must hold no rules and no IP
 * sets, or create refuses every clone. */
static void check_template_firewall(struct sbx *s, struct report *r, const char *node, int vmid)
{
    char path[256], err[1024], detail[1200];
    json_t *rules = NULL, *sets = NULL;

    sbx_vm_path(path, sizeof path, node, vmid, "/firewall/rules");
    if (sbx_pve_call(s->pve, "GET", path, NULL, &rules, err, sizeof err) == 0) {
        sbx_vm_path(path, sizeof path, node, vmid, "/firewall/ipset");
        if (sbx_pve_call(s->pve, "GET", path, NULL, &sets, err, sizeof err) == 0) {
            int clean = json_array_size(rules) == 0 && json_array_size(sets) == 0;
            snprintf(detail, sizeof detail, "template %d: %zu firewall rules, %zu IP sets%s", vmid,
                     json_array_size(rules), json_array_size(sets),
                     clean ? "" : " (clones inherit them: create refuses such clones)");
            add(r, "template", clean, detail,
                "delete the template's firewall rules and IP sets (Datacenter > VM > Firewall)");
        }
    }
    if (!rules || !sets)
        add(r, "template", 0, err, "the token needs VM.Audit on the template");
    json_decref(rules);
    json_decref(sets);
}

static void check_templates(struct sbx *s, struct report *r)
{
    json_t *params = json_pack("{s:s}", "type", "vm"), *all = NULL;
    char err[1024], detail[1200], path[128];

    if (sbx_pve_call(s->pve, "GET", "/cluster/resources", params, &all, err, sizeof err))
        add(r, "template", 0, err, "the token needs VM.Audit on the templates");
    json_decref(params);
    for (int i = 0; i < s->cfg.ntemplates && all; i++) {
        const struct sbx_template *t = &s->cfg.templates[i];
        json_t *v, *found = NULL;
        size_t j;
        json_array_foreach(all, j, v)
        {
            if (json_integer_value(json_object_get(v, "vmid")) == t->vmid)
                found = v;
        }
        snprintf(path, sizeof path, "/vms/%d", t->vmid);
        check_privs(s, r, path, template_privs, NULL);
        if (!found) {
            snprintf(detail, sizeof detail, "template %d: not visible to the token", t->vmid);
            add(r, "template", 0, detail,
                "create the template VM, or grant VM.Clone and VM.Audit on /vms/VMID");
        } else if (t->node[0] &&
                   strcmp(json_string_value(json_object_get(found, "node")), t->node) != 0) {
            snprintf(detail, sizeof detail, "template %d is on node %s, not %s", t->vmid,
                     json_string_value(json_object_get(found, "node")), t->node);
            add(r, "template", 0, detail, "correct the `template NODE:VMID` line");
        } else if (json_integer_value(json_object_get(found, "template")) != 1) {
            snprintf(detail, sizeof detail, "VM %d is not a template", t->vmid);
            add(r, "template", 0, detail, "convert it: qm template VMID");
        } else {
            snprintf(detail, sizeof detail, "template %d on %s", t->vmid,
                     json_string_value(json_object_get(found, "node")));
            add(r, "template", 1, detail, NULL);
            check_template_firewall(s, r, json_string_value(json_object_get(found, "node")),
                                    t->vmid);
        }
    }
    json_decref(all);
}

static void check_bridge(struct sbx *s, struct report *r, const char *node)
{
    char path[128], err[1024], detail[1200];
    json_t *params = json_pack("{s:s}", "type", "bridge"), *list = NULL, *v;
    size_t i;
    int found = 0;

    snprintf(path, sizeof path, "/nodes/%s/network", node);
    if (sbx_pve_call(s->pve, "GET", path, params, &list, err, sizeof err)) {
        json_decref(params);
        snprintf(detail, sizeof detail, "bridge %s on %s: not verified: %s", s->cfg.bridge, node,
                 err);
        add(r, "bridge", 1, detail, NULL);
        return;
    }
    json_decref(params);
    json_array_foreach(list, i, v)
    {
        const char *iface = json_string_value(json_object_get(v, "iface"));
        found |= iface && strcmp(iface, s->cfg.bridge) == 0;
    }
    json_decref(list);
    snprintf(detail, sizeof detail, "bridge %s %s on node %s", s->cfg.bridge,
             found ? "exists" : "is missing", node);
    add(r, "bridge", found, detail,
        "create the proxy-only bridge (no physical port) on that node: see deploy/");
}

static void check_firewall(struct sbx *s, struct report *r)
{
    char err[1024], detail[1200];
    json_t *opts = NULL;

    if (sbx_pve_call(s->pve, "GET", "/cluster/firewall/options", NULL, &opts, err, sizeof err)) {
        /* The token rightly lacks Sys.Audit on /: say it was not verified. */
        snprintf(detail, sizeof detail,
                 "cluster firewall: not verified (%s); make sure Datacenter > Firewall > Options "
                 "> Firewall is Yes, or the per-VM rules do nothing",
                 err);
        add(r, "firewall", 1, detail, NULL);
        return;
    }
    snprintf(detail, sizeof detail, "cluster firewall is %s",
             json_integer_value(json_object_get(opts, "enable")) == 1 ? "enabled" : "disabled");
    add(r, "firewall", json_integer_value(json_object_get(opts, "enable")) == 1, detail,
        "enable it (an admin step): pvesh set /cluster/firewall/options --enable 1");
    json_decref(opts);
}

/* Every sandbox's own firewall must still be on, filtering its address:
 * without it the bridge is the only wall left. */
static void check_sandbox_firewalls(struct sbx *s, struct report *r)
{
    struct sbx_vm *vms;
    size_t n, on = 0;
    char err[1024], detail[1200];

    if (sbx_vm_list(s, &vms, &n, NULL, err, sizeof err)) {
        add(r, "firewall", 0, err, "the token needs VM.Audit on the pool");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char path[256];
        json_t *o = NULL;
        sbx_vm_path(path, sizeof path, vms[i].node, vms[i].vmid, "/firewall/options");
        if (sbx_pve_call(s->pve, "GET", path, NULL, &o, err, sizeof err)) {
            add(r, "firewall", 0, err, "the token needs VM.Audit on the pool");
        } else if (json_integer_value(json_object_get(o, "enable")) != 1 ||
                   json_integer_value(json_object_get(o, "ipfilter")) != 1) {
            snprintf(detail, sizeof detail, "sandbox %s (VM %d) has its firewall or IP filter off",
                     vms[i].name, vms[i].vmid);
            add(r, "firewall", 0, detail,
                "destroy it (sandboxctl destroy NAME), or set enable=1 ipfilter=1 in its "
                "firewall options");
        } else {
            on++;
        }
        json_decref(o);
    }
    if (n > 0 && on == n) {
        snprintf(detail, sizeof detail, "all %zu sandboxes have their firewall and IP filter on",
                 n);
        add(r, "firewall", 1, detail, NULL);
    }
    free(vms);
}

/* The console's settings that only the running host can check: that the
 * token may read console-admin-group's members (sign-in asks for them),
 * and that console-access-log can be read. */
static void check_console(struct sbx *s, struct report *r)
{
    char err[1024], path[300], detail[1200], fix[600];
    json_t *g = NULL;

    if (s->cfg.console_admin_group) {
        char *eg = sbx_pve_escape(s->cfg.console_admin_group);
        snprintf(path, sizeof path, "/access/groups/%s", eg);
        free(eg);
        int rc = sbx_pve_call(s->pve, "GET", path, NULL, &g, err, sizeof err);
        long status = sbx_pve_last_status(s->pve);
        if (rc == 0) {
            snprintf(detail, sizeof detail, "console-admin-group %s: %zu members",
                     s->cfg.console_admin_group, json_array_size(json_object_get(g, "members")));
            add(r, "console", 1, detail, NULL);
        } else {
            snprintf(detail, sizeof detail, "console-admin-group %s: %s",
                     s->cfg.console_admin_group, err);
            if (status == 403)
                snprintf(fix, sizeof fix,
                         "give the token Sys.Audit on /access/groups (no one can sign in to the "
                         "console until then): pveum acl modify /access/groups --roles "
                         "PVEAuditor --tokens 'USER@REALM!TOKEN'");
            else
                snprintf(fix, sizeof fix,
                         "create the group (pveum group add %s) or name one that "
                         "exists in console-admin-group",
                         s->cfg.console_admin_group);
            add(r, "console", 0, detail, fix);
        }
        json_decref(g);
    }
    if (s->cfg.console_access_log) {
        FILE *f = fopen(s->cfg.console_access_log, "r");
        snprintf(detail, sizeof detail, "console-access-log %s: %s", s->cfg.console_access_log,
                 f ? "readable" : strerror(errno));
        add(r, "console", f != NULL, detail,
            f ? NULL
              : "point console-access-log at egressd's access-log (egressd.conf), readable by "
                "this user (the group egressd)");
        if (f)
            fclose(f);
    }
}

static void check_egress(struct sbx *s, struct report *r)
{
    char err[1024], detail[1200];

    if (s->cfg.negress == 0)
        add(r, "egressd", 0, "no egressd-admin configured",
            "add `egressd-admin unix:/run/egressd/admin.sock` to the config");
    for (int i = 0; i < s->cfg.negress; i++) {
        int ok = sbx_egress_status(&s->cfg, s->cfg.egress[i], err, sizeof err) == 0;
        snprintf(detail, sizeof detail, "egressd %s %s%s", s->cfg.egress[i],
                 ok ? "answers" : "does not answer: ", ok ? "" : err);
        add(r, "egressd", ok, detail, "start egressd (systemctl start egressd) or fix the address");
    }
}

/* ------------------------------------------------------------ repairs */

/* The VM of vms (n) with VMID vmid, or NULL. */
static const struct sbx_vm *vm_of(const struct sbx_vm *vms, size_t n, int vmid)
{
    for (size_t i = 0; i < n; i++)
        if (vms[i].vmid == vmid)
            return &vms[i];
    return NULL;
}

/* Undo what the killed create of record rec made: its bindings and its
 * VM, when the pool holds one of its VMID and its name.  Returns 1 when
 * done (the record may go), 0 when not (detail and fix say why). */
static int undo_create(struct sbx *s, json_t *rec, const struct sbx_vm *vms, size_t n, char *detail,
                       size_t len, char *fix, size_t fixlen)
{
    int vmid = (int)json_integer_value(json_object_get(rec, "vmid"));
    int pid = (int)json_integer_value(json_object_get(rec, "pid"));
    const char *name = json_string_value(json_object_get(rec, "name"));
    const struct sbx_vm *vm = vm_of(vms, n, vmid);
    char why[1024];

    if (vm == NULL) {
        snprintf(detail, len,
                 "sandbox %s (VM %d): its create (process %d) was killed before Proxmox made the "
                 "VM; its reservation dropped",
                 name ? name : "?", vmid, pid);
        return 1;
    }
    if (name == NULL || strcmp(vm->name, name) != 0) {
        snprintf(detail, len,
                 "sandbox %s (VM %d): its create (process %d) was killed; VM %d is '%s', not "
                 "the one it made: left alone, the reservation dropped",
                 name ? name : "?", vmid, pid, vmid, vm->name);
        return 1;
    }
    if (sbx_egress_delete(&s->cfg, vmid, why, sizeof why) ||
        sbx_vm_destroy(s, vm->node, vmid, why, sizeof why)) {
        snprintf(detail, len,
                 "sandbox %s (VM %d): its create (process %d) was killed half-way, and undoing "
                 "it failed: %.600s",
                 name, vmid, pid, why);
        snprintf(fix, fixlen, "run sandboxctl doctor again, or sandboxctl destroy %d", vmid);
        return 0;
    }
    snprintf(detail, len,
             "sandbox %s (VM %d): its create (process %d) was killed half-way; removed its "
             "bindings and destroyed the VM",
             name, vmid, pid);
    return 1;
}

/* Drops the records of done (interrupted creates, by pid and VMID) from
 * the guard's state.  0 / -1 with err. */
static int forget_creates(struct sbx *s, json_t *done, char *err, size_t errlen)
{
    struct sbx_guard g;
    size_t i = 0, j;
    json_t *d;
    int rc;

    if (sbx_guard_open(&g, s->cfg.state_dir, err, errlen))
        return -1;
    while (i < json_array_size(g.interrupted)) {
        json_t *rec = json_array_get(g.interrupted, i);
        int drop = 0;
        json_array_foreach(done, j, d)
        {
            drop |= json_equal(json_object_get(d, "pid"), json_object_get(rec, "pid")) &&
                    json_equal(json_object_get(d, "vmid"), json_object_get(rec, "vmid"));
        }
        if (drop)
            json_array_remove(g.interrupted, i);
        else
            i++;
    }
    rc = sbx_guard_save(&g, err, errlen);
    sbx_guard_close(&g);
    return rc;
}

/* Creates killed half-way (guard.h): each undone and its record dropped. */
static void repair_creates(struct sbx *s, struct report *r)
{
    struct sbx_guard g;
    struct sbx_vm *vms = NULL;
    size_t n = 0, i;
    json_t *recs, *rec, *done;
    char err[1024];

    if (access(s->cfg.state_dir, F_OK) != 0) /* no create has run here */
        return;
    if (sbx_guard_open(&g, s->cfg.state_dir, err, sizeof err)) {
        add(r, "repair", 0, err, "make state-dir readable and writable to this user");
        return;
    }
    recs = json_incref(g.interrupted);
    sbx_guard_close(&g);
    if (json_array_size(recs) > 0 && sbx_vm_list(s, &vms, &n, NULL, err, sizeof err)) {
        add(r, "repair", 0, err, "the token needs VM.Audit on the pool");
        json_decref(recs);
        return;
    }
    done = json_array();
    json_array_foreach(recs, i, rec)
    {
        char detail[1400], fix[256] = "";
        int ok = undo_create(s, rec, vms, n, detail, sizeof detail, fix, sizeof fix);
        repaired(r, "interrupted create", (int)json_integer_value(json_object_get(rec, "vmid")),
                 json_string_value(json_object_get(rec, "name")), ok, detail, fix);
        if (ok)
            json_array_append(done, rec);
    }
    if (json_array_size(done) > 0 && forget_creates(s, done, err, sizeof err))
        add(r, "repair", 0, err, "make state-dir writable to this user");
    json_decref(done);
    json_decref(recs);
    free(vms);
}

/* Access approvals killed half-way (ops_access.c), settled. */
static void repair_approvals(struct sbx *s, struct report *r)
{
    json_t *settled = json_array(), *e;
    char err[1024], detail[1600];
    size_t i;

    if (sbx_access_settle_all(s, settled, err, sizeof err))
        add(r, "repair", 0, err, "fix or move away the access requests' file it names");
    json_array_foreach(settled, i, e)
    {
        snprintf(detail, sizeof detail,
                 "sandbox %s (VM %d): the approval of access request %s (%s) was killed half-way; "
                 "%s",
                 json_string_value(json_object_get(e, "name")),
                 (int)json_integer_value(json_object_get(e, "vmid")),
                 json_string_value(json_object_get(e, "id")),
                 json_string_value(json_object_get(e, "host")),
                 json_string_value(json_object_get(e, "detail")));
        repaired(r, "interrupted approval", (int)json_integer_value(json_object_get(e, "vmid")),
                 json_string_value(json_object_get(e, "name")),
                 json_is_true(json_object_get(e, "settled")), detail,
                 "run sandboxctl doctor again once Proxmox answers");
    }
    json_decref(settled);
}

/* What the pool says every egressd should hold: {ID: binding} of the
 * sandboxes whose description can be read; ids of VMs that cannot be
 * judged now (config unreadable, or a create in progress) in unsure. */
struct wanted {
    json_t *bindings; /* object: id -> binding */
    json_t *names;    /* object: id -> name */
    json_t *unsure;   /* object: id -> true */
};

static int wanted_bindings(struct sbx *s, struct wanted *w, char *err, size_t errlen)
{
    struct sbx_guard g;
    struct sbx_vm *vms;
    size_t n, i;
    json_t *rec;
    char id[16];

    bool guarded = access(s->cfg.state_dir, F_OK) == 0; /* else no create runs */

    if (sbx_vm_list(s, &vms, &n, NULL, err, errlen))
        return -1;
    if (guarded && sbx_guard_open(&g, s->cfg.state_dir, err, errlen)) {
        free(vms);
        return -1;
    }
    w->bindings = json_object();
    w->names = json_object();
    w->unsure = json_object();
    if (guarded) {
        json_array_foreach(g.reservations, i, rec)
        {
            snprintf(id, sizeof id, "%d", (int)json_integer_value(json_object_get(rec, "vmid")));
            json_object_set_new(w->unsure, id, json_true());
        }
        sbx_guard_close(&g);
    }
    for (i = 0; i < n; i++) {
        json_t *config = NULL;
        struct sbx_meta m;
        char why[512];
        snprintf(id, sizeof id, "%d", vms[i].vmid);
        json_object_set_new(w->names, id, json_string(vms[i].name));
        if (sbx_vm_config(s, vms[i].node, vms[i].vmid, &config, why, sizeof why)) {
            if (!sbx_vm_gone(why))
                json_object_set_new(w->unsure, id, json_true());
        } else if (sbx_vm_meta(config, &m, why, sizeof why) == 0) {
            json_object_set_new(w->bindings, id, sbx_egress_binding(vms[i].vmid, vms[i].name, &m));
        }
        json_decref(config);
    }
    free(vms);
    return 0;
}

/* The binding of id in an egressd's list, or NULL. */
static json_t *binding_in(json_t *list, const char *id)
{
    size_t i;
    json_t *b;

    json_array_foreach(list, i, b)
    {
        const char *bid = json_string_value(json_object_get(b, "id"));
        if (bid && strcmp(bid, id) == 0)
            return b;
    }
    return NULL;
}

/* Appends "egressd T lacks it" or "egressd T holds it stale (...)" to
 * buf (at *used) when egressd target's list does not hold want. */
static int note_binding(const char *target, json_t *list, const char *id, json_t *want, char *buf,
                        size_t len, size_t *used)
{
    json_t *held = binding_in(list, id);
    int n;

    if (sbx_egress_binding_current(want, held))
        return 0;
    if (held)
        n = snprintf(buf + *used, len - *used,
                     "%segressd %s held a stale one (expires %s, policy %s)", *used ? "; " : "",
                     target,
                     json_string_value(json_object_get(held, "expires"))
                         ? json_string_value(json_object_get(held, "expires"))
                         : "?",
                     json_string_value(json_object_get(held, "policy"))
                         ? json_string_value(json_object_get(held, "policy"))
                         : "?");
    else
        n = snprintf(buf + *used, len - *used, "%segressd %s had none", *used ? "; " : "", target);
    if (n > 0)
        *used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
    return 1;
}

/* Every sandbox bound as its description says in every egressd, and no
 * binding without its sandbox. */
static void repair_bindings(struct sbx *s, struct report *r)
{
    struct wanted w;
    json_t *lists[SBX_MAX_EGRESS] = {NULL}, *want, *seen = json_object();
    const char *id;
    char err[1024], detail[2400], why[1024];

    if (s->cfg.negress == 0)
        return;
    if (wanted_bindings(s, &w, err, sizeof err)) {
        add(r, "repair", 0, err, "the token needs VM.Audit on the pool; state-dir readable");
        json_decref(seen);
        return;
    }
    for (int e = 0; e < s->cfg.negress; e++)
        if (sbx_egress_get(&s->cfg, s->cfg.egress[e], "/v1/sandboxes", &lists[e], err,
                           sizeof err) ||
            !json_is_array(lists[e])) {
            json_decref(lists[e]);
            lists[e] = NULL; /* check_egress names an egressd that does not answer */
        }
    json_object_foreach(w.bindings, id, want)
    {
        size_t used = 0;
        int off = 0;
        if (json_object_get(w.unsure, id))
            continue;
        for (int e = 0; e < s->cfg.negress; e++)
            if (lists[e])
                off |= note_binding(s->cfg.egress[e], lists[e], id, want, detail, sizeof detail,
                                    &used);
        if (!off)
            continue;
        int done = sbx_egress_put(&s->cfg, want, why, sizeof why) == 0;
        snprintf(detail + used, sizeof detail - used, "%s%.700s",
                 done ? ": bound it again in every egressd as its description says"
                      : ": binding it again failed: ",
                 done ? "" : why);
        char head[2600];
        snprintf(head, sizeof head, "sandbox %s (VM %s): %s",
                 json_string_value(json_object_get(w.names, id)), id, detail);
        repaired(r, "binding", atoi(id), json_string_value(json_object_get(w.names, id)), done,
                 head, "run sandboxctl sync once every egressd answers");
    }
    for (int e = 0; e < s->cfg.negress; e++) {
        size_t i;
        json_t *b;
        json_array_foreach(lists[e], i, b)
        {
            const char *bid = json_string_value(json_object_get(b, "id"));
            if (!bid || json_object_get(w.bindings, bid) || json_object_get(w.unsure, bid) ||
                json_object_get(seen, bid))
                continue;
            json_object_set_new(seen, bid, json_true());
            int done = sbx_egress_delete(&s->cfg, atoi(bid), why, sizeof why) == 0;
            const char *name = json_string_value(json_object_get(w.names, bid));
            snprintf(
                detail, sizeof detail, "binding %s (%s) in egressd %s: %s; %s%.700s", bid,
                json_string_value(json_object_get(b, "name"))
                    ? json_string_value(json_object_get(b, "name"))
                    : "?",
                s->cfg.egress[e],
                name ? "its VM's description is not a sandbox's"
                     : "the pool holds no VM of that id",
                done ? "removed it from every egressd" : "removing it failed: ", done ? "" : why);
            repaired(r, "orphan binding", atoi(bid), json_string_value(json_object_get(b, "name")),
                     done, detail, "run sandboxctl sync once every egressd answers");
        }
    }
    for (int e = 0; e < s->cfg.negress; e++)
        json_decref(lists[e]);
    json_decref(seen);
    json_decref(w.bindings);
    json_decref(w.names);
    json_decref(w.unsure);
}

/* A temporary file (sbx_state_write) left by a write killed before its
 * rename: removed under the lock of the file it was for. */
static void repair_temp_files(struct sbx *s, struct report *r)
{
    static const char *const files[][2] = {{"guard.lock", "reservations.json"},
                                           {"access.lock", "access.json"}};
    char path[4200], detail[4400], err[1024];

    if (access(s->cfg.state_dir, F_OK) != 0)
        return;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int fd = sbx_state_lock(s->cfg.state_dir, files[i][0], err, sizeof err);
        if (fd == -1) {
            add(r, "repair", 0, err, "make state-dir readable and writable to this user");
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.tmp", s->cfg.state_dir, files[i][1]);
        if (access(path, F_OK) == 0) {
            int done = unlink(path) == 0;
            snprintf(detail, sizeof detail,
                     "state-dir: %s, the new copy of %s a killed write left before its rename: "
                     "%s%s",
                     path, files[i][1],
                     done ? "removed" : "could not be removed: ", done ? "" : strerror(errno));
            repaired(r, "temporary file", 0, NULL, done, detail, "remove it by hand");
        }
        close(fd);
    }
}

int sbx_op_doctor(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    struct report r = {json_array(), json_array(), 1};
    json_t *version = NULL;
    char path[256], nodes[SBX_MAX_TEMPLATES][SBX_NAME_MAX];
    int nnodes = 0;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen)) {
        json_decref(r.checks);
        json_decref(r.repairs);
        return -1;
    }
    check_version(s, &r, &version);
    /* The repairs first: the checks then see what they left (a half-made
     * VM's firewall, say, is gone with the VM). */
    if (version) {
        repair_creates(s, &r);
        repair_approvals(s, &r);
        repair_bindings(s, &r);
    }
    repair_temp_files(s, &r);
    if (version) {
        snprintf(path, sizeof path, "/pool/%s", s->cfg.pool);
        check_privs(s, &r, path, pool_privs,
                    s->pve_major >= 9 ? "VM.GuestAgent.Unrestricted" : "VM.Monitor");
        if (s->cfg.storage) {
            snprintf(path, sizeof path, "/storage/%s", s->cfg.storage);
            check_privs(s, &r, path, storage_privs, NULL);
        }
        snprintf(path, sizeof path, "/sdn/zones/localnetwork/%s", s->cfg.bridge);
        check_privs(s, &r, path, bridge_privs, NULL);
        if (strcmp(s->cfg.node, "auto") == 0)
            check_privs(s, &r, "/nodes", nodes_privs, NULL);
        check_templates(s, &r);
        for (int i = 0; i < s->cfg.ntemplates; i++) {
            int seen = 0;
            for (int j = 0; j < nnodes; j++)
                seen |= strcmp(nodes[j], s->cfg.templates[i].node) == 0;
            if (!seen && s->cfg.templates[i].node[0]) {
                snprintf(nodes[nnodes++], SBX_NAME_MAX, "%s", s->cfg.templates[i].node);
                check_bridge(s, &r, s->cfg.templates[i].node);
            }
        }
        check_firewall(s, &r);
        check_sandbox_firewalls(s, &r);
        check_console(s, &r);
    }
    check_egress(s, &r);
    *out = json_pack("{s:b,s:o,s:o,s:o}", "ok", r.ok, "version", version ? version : json_null(),
                     "checks", r.checks, "repairs", r.repairs);
    return 0;
}
