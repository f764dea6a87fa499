/* ops_doctor.c - check the Proxmox side and the egressds; name each fix. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
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

int sbx_op_doctor(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    static const char *const keys[] = {NULL};
    struct report r = {json_array(), 1};
    json_t *version = NULL;
    char path[256], nodes[SBX_MAX_TEMPLATES][SBX_NAME_MAX];
    int nnodes = 0;

    *out = NULL;
    if (sbx_args_check(args, keys, err, errlen)) {
        json_decref(r.checks);
        return -1;
    }
    check_version(s, &r, &version);
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
    *out = json_pack("{s:b,s:o,s:o}", "ok", r.ok, "version", version ? version : json_null(),
                     "checks", r.checks);
    return 0;
}
