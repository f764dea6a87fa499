/* ops_create.c - create a sandbox: guard, clone, wall in, start, bind,
 * and with secrets give the guest its placeholders and CA.
 *
 * Every step that makes something records it in struct build, and one
 * function, undo(), removes whatever was made when a later step fails: the
 * binding in every egressd, the VM (stopped and purged) and the guard's
 * reservation.  The reservation is dropped last, so the memory it stands
 * for stays counted until the VM is really gone.  A sandbox whose
 * credentials could not be installed is rolled back as well: one that
 * holds a placeholder without the CA (or the CA without its variables)
 * fails every call to its API in ways far from the cause.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "creds.h"
#include "egress.h"
#include "guard.h"
#include "guest.h"
#include "meta.h"
#include "ops.h"
#include "sbx.h"
#include "task.h"
#include "vm.h"

#define SECRETS_MAX   65536
#define SECRETS_GUEST "/root/.sandbox-secrets"
#define VMID_TRIES    1000

struct build {
    char name[64];
    const struct sbx_size *size;
    struct sbx_meta meta;
    char node[64];
    int template_vmid;
    int vmid;
    long started_ms;
    char *secrets; /* the secrets file's content, or NULL */
    size_t secrets_len;
    /* what exists so far, for undo(); cloned is CLONE_MAYBE when the clone
     * may have been made without sandboxctl seeing it (answer lost) */
    int reserved, cloned, bound;
};

enum { CLONE_MAYBE = 2 };

static int valid_vm_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
            return 0;
    return 1;
}

static int parse_allow(struct build *b, json_t *allow, char *err, size_t errlen)
{
    size_t i;
    json_t *v;

    if (!allow || json_is_null(allow))
        return 0;
    if (!json_is_array(allow) || json_array_size(allow) > SBX_META_MAX_ALLOW) {
        snprintf(err, errlen, "allow: expected a list of at most %d hosts", SBX_META_MAX_ALLOW);
        return -1;
    }
    json_array_foreach(allow, i, v)
    {
        const char *h = json_string_value(v);
        if (!h || !sbx_meta_valid_allow(h)) {
            snprintf(err, errlen,
                     "allow: '%.100s' is not a host (example.org, *.example.org, .example.org, "
                     "optionally :PORT[,PORT])",
                     h ? h : "(not a string)");
            return -1;
        }
        snprintf(b->meta.allow[b->meta.nallow++], SBX_ALLOW_MAX, "%s", h);
    }
    return 0;
}

/* "secrets": the names of egressd's secrets the sandbox gets placeholders
 * for; whether egressd has them is egressd's to say (the binding step). */
static int parse_secrets(struct sbx *s, struct build *b, json_t *secrets, char *err, size_t errlen)
{
    size_t i;
    json_t *v;

    if (!secrets || json_is_null(secrets))
        return 0;
    if (!json_is_array(secrets) || json_array_size(secrets) > SBX_META_MAX_SECRETS) {
        snprintf(err, errlen, "secrets: expected a list of at most %d secret names",
                 SBX_META_MAX_SECRETS);
        return -1;
    }
    json_array_foreach(secrets, i, v)
    {
        const char *n = json_string_value(v);
        if (!n || strlen(n) != json_string_length(v) || !sbx_meta_valid_secret(n)) {
            snprintf(err, errlen,
                     "secrets: '%.100s' is not a secret's name ([a-z0-9][a-z0-9_-]*, as the "
                     "files of egressd's secret-dir are named)",
                     n ? n : "(not a string)");
            return -1;
        }
        for (int k = 0; k < b->meta.nsecrets; k++)
            if (strcmp(b->meta.secrets[k], n) == 0) {
                snprintf(err, errlen, "secrets: '%s' is given twice", n);
                return -1;
            }
        snprintf(b->meta.secrets[b->meta.nsecrets++], SBX_SECRET_NAME_MAX, "%s", n);
    }
    if (b->meta.nsecrets && s->cfg.negress == 0) {
        snprintf(err, errlen,
                 "secrets: credential injection needs egressd, and %s has no `egressd-admin`",
                 s->cfg.path);
        return -1;
    }
    return sbx_creds_check_vars(&s->cfg, &b->meta, err, errlen);
}

static int parse_lifetime(struct sbx *s, json_t *args, long *ms, char *err, size_t errlen)
{
    const char *lt;
    char max[32];

    err[0] = '\0';
    lt = sbx_args_string(args, "lifetime", 0, err, errlen);
    if (err[0])
        return -1;
    *ms = s->cfg.lifetime_default_ms;
    sbx_duration_format(s->cfg.lifetime_max_ms, max, sizeof max);
    if (lt && (sbx_duration_parse(lt, ms) || *ms < 3600 * 1000L || *ms > s->cfg.lifetime_max_ms)) {
        snprintf(err, errlen,
                 "lifetime: expected a duration from 1h to %s (lifetime-max), got '%.40s'", max,
                 lt);
        return -1;
    }
    return 0;
}

static int parse_args(struct sbx *s, json_t *args, struct build *b, char *err, size_t errlen)
{
    static const char *const keys[] = {"name",   "size",  "lifetime", "owner",
                                       "policy", "allow", "secrets",  NULL};
    const char *name, *size, *owner, *policy;
    long lifetime;

    if (sbx_args_check(args, keys, err, errlen) ||
        !(name = sbx_args_string(args, "name", 1, err, errlen)) ||
        !(size = sbx_args_string(args, "size", 1, err, errlen)) ||
        !(owner = sbx_args_string(args, "owner", 1, err, errlen)) ||
        !(policy = sbx_args_string(args, "policy", 1, err, errlen)) ||
        parse_lifetime(s, args, &lifetime, err, errlen))
        return -1;
    if (!valid_vm_name(name)) {
        snprintf(err, errlen,
                 "name: '%.64s' is not 1-63 of a-z 0-9 - (starting with a letter or "
                 "digit)",
                 name);
        return -1;
    }
    if (!(b->size = sbx_config_size(&s->cfg, size))) {
        snprintf(err, errlen, "size: no size '%.64s' (small, medium, or a `size` line)", size);
        return -1;
    }
    if (!sbx_meta_valid_owner(owner) || !sbx_meta_valid_policy(policy)) {
        snprintf(err, errlen, "%s: '%.64s' is not a valid name",
                 sbx_meta_valid_owner(owner) ? "policy" : "owner",
                 sbx_meta_valid_owner(owner) ? policy : owner);
        return -1;
    }
    snprintf(b->name, sizeof b->name, "%s", name);
    snprintf(b->meta.owner, sizeof b->meta.owner, "%s", owner);
    snprintf(b->meta.policy, sizeof b->meta.policy, "%s", policy);
    b->meta.created = time(NULL);
    b->meta.expires = b->meta.created + lifetime / 1000;
    return parse_allow(b, json_object_get(args, "allow"), err, errlen) ||
                   parse_secrets(s, b, json_object_get(args, "secrets"), err, errlen)
               ? -1
               : 0;
}

/* The node of VM vmid in the resources list, or NULL. */
static const char *node_of(json_t *all, int vmid)
{
    size_t i;
    json_t *r;

    json_array_foreach(all, i, r)
    {
        if (json_integer_value(json_object_get(r, "vmid")) == vmid)
            return json_string_value(json_object_get(r, "node"));
    }
    return NULL;
}

/* Free memory of node in the node list (bytes), or -1 when not online. */
static long long node_free(json_t *nodes, const char *node)
{
    size_t i;
    json_t *r;

    json_array_foreach(nodes, i, r)
    {
        const char *name = json_string_value(json_object_get(r, "node"));
        const char *status = json_string_value(json_object_get(r, "status"));
        if (name && strcmp(name, node) == 0 && (!status || strcmp(status, "online") == 0))
            return (long long)json_integer_value(json_object_get(r, "maxmem")) -
                   (long long)json_integer_value(json_object_get(r, "mem"));
    }
    return -1;
}

/* `node NAME`: its template; `node auto`: among the nodes holding a
 * template, the one with the most free memory. */
static int pick_node(struct sbx *s, struct build *b, json_t *all, char *err, size_t errlen)
{
    json_t *params = json_pack("{s:s}", "type", "node"), *nodes = NULL;
    long long best = -1;
    int fixed = strcmp(s->cfg.node, "auto") != 0;

    if (sbx_pve_call(s->pve, "GET", "/cluster/resources", params, &nodes, err, errlen)) {
        json_decref(params);
        return -1;
    }
    json_decref(params);
    for (int i = 0; i < s->cfg.ntemplates; i++) {
        const struct sbx_template *t = &s->cfg.templates[i];
        const char *node = t->node[0] ? t->node : node_of(all, t->vmid);
        long long fr;
        if (!node || (fixed && strcmp(node, s->cfg.node) != 0))
            continue;
        fr = node_free(nodes, node);
        if (fr > best) {
            best = fr;
            snprintf(b->node, sizeof b->node, "%s", node);
            b->template_vmid = t->vmid;
        }
    }
    json_decref(nodes);
    if (best < 0) {
        snprintf(err, errlen,
                 "no template on %s%s: check the `template` lines and that the template VMs "
                 "exist (sandboxctl doctor)",
                 fixed ? "node " : "an online node", fixed ? s->cfg.node : "");
        return -1;
    }
    return 0;
}

static int reserved_vmid(json_t *res, int vmid)
{
    size_t i;
    json_t *r;

    json_array_foreach(res, i, r)
    {
        if (json_integer_value(json_object_get(r, "vmid")) == vmid)
            return 1;
    }
    return 0;
}

static int reserved_name(json_t *res, const char *name)
{
    size_t i;
    json_t *r;

    json_array_foreach(res, i, r)
    {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (n && strcmp(n, name) == 0)
            return 1;
    }
    return 0;
}

/* The address in a config's ipconfig0 ("ip=10.99.0.11/24,gw=..."). */
static int ipconfig_address(json_t *config, char *addr, size_t len)
{
    const char *ip = json_string_value(json_object_get(config, "ipconfig0"));
    const char *at = ip ? strstr(ip, "ip=") : NULL;

    if (at == NULL || (at != ip && at[-1] != ','))
        return -1;
    size_t n = strcspn(at + 3, "/,");
    snprintf(addr, len, "%.*s", (int)(n < 16 ? n : 15), at + 3);
    return sbx_meta_valid_address(addr) ? 0 : -1;
}

/* The address a pool VM holds: its ip- tag, else its description, else
 * its ipconfig0 (a VM whose metadata was damaged still holds its address).
 * Returns 0 with addr, 1 when it holds none, -1 (why in err) when its
 * config cannot be read: then no address can be handed out safely. */
static int vm_address(struct sbx *s, const struct sbx_vm *vm, char *addr, size_t len, char *err,
                      size_t errlen)
{
    const char *tag = strstr(vm->tags, "ip-");
    struct sbx_meta m;
    json_t *config = NULL;
    char ignored[512];
    int rc;

    if (tag && (tag == vm->tags || tag[-1] == ';')) {
        size_t n = strcspn(tag + 3, ";");
        snprintf(addr, len, "%.*s", (int)(n < 16 ? n : 15), tag + 3);
        if (sbx_meta_valid_address(addr))
            return 0;
    }
    if (sbx_vm_config(s, vm->node, vm->vmid, &config, err, errlen))
        return -1;
    rc = sbx_vm_meta(config, &m, ignored, sizeof ignored);
    if (rc == 0)
        snprintf(addr, len, "%s", m.address);
    else
        rc = ipconfig_address(config, addr, len) == 0 ? 0 : 1;
    json_decref(config);
    return rc;
}

static int addr_taken(char (*used)[16], size_t n, const char *a)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(used[i], a) == 0)
            return 1;
    return 0;
}

/* The first address of the ip-pool that no pool VM, reservation, gateway,
 * proxy or DNS server holds. */
static int pick_address(struct sbx *s, struct build *b, struct sbx_vm *vms, size_t n, json_t *res,
                        char *err, size_t errlen)
{
    size_t cap = n + json_array_size(res) + 3, used_n = 0;
    char(*used)[16] = calloc(cap, sizeof *used);
    size_t i;
    json_t *r;
    int rc = -1;

    if (!used)
        abort();
    for (i = 0; i < n; i++) {
        int got = vm_address(s, &vms[i], used[used_n], sizeof used[0], err, errlen);
        if (got < 0) {
            free(used);
            return -1; /* an address in use may be unknown: hand out none */
        }
        used_n += got == 0;
    }
    json_array_foreach(res, i, r)
    {
        const char *a = json_string_value(json_object_get(r, "address"));
        snprintf(used[used_n++], sizeof used[0], "%s", a ? a : "");
    }
    snprintf(used[used_n++], sizeof used[0], "%s", s->cfg.gateway);
    snprintf(used[used_n++], sizeof used[0], "%s", s->cfg.proxy_addr);
    if (s->cfg.dns_addr)
        snprintf(used[used_n++], sizeof used[0], "%s", s->cfg.dns_addr);
    for (uint32_t a = s->cfg.ip_first; a <= s->cfg.ip_last && rc; a++) {
        struct in_addr in = {htonl(a)};
        char text[16];
        inet_ntop(AF_INET, &in, text, sizeof text);
        if (!addr_taken(used, used_n, text)) {
            snprintf(b->meta.address, sizeof b->meta.address, "%s", text);
            rc = 0;
        }
        if (a == UINT32_MAX)
            break;
    }
    free(used);
    if (rc)
        snprintf(err, errlen, "ip-pool: every address is in use (%zu sandboxes and reservations)",
                 n + json_array_size(res));
    return rc;
}

/* Proxmox's next free VMID, moved past those reserved by other creates. */
static int pick_vmid(struct sbx *s, struct build *b, json_t *all, json_t *res, char *err,
                     size_t errlen)
{
    json_t *id = NULL;
    int vmid;

    if (sbx_pve_call(s->pve, "GET", "/cluster/nextid", NULL, &id, err, errlen))
        return -1;
    vmid = json_is_string(id) ? atoi(json_string_value(id)) : (int)json_integer_value(id);
    json_decref(id);
    for (int i = 0; i < VMID_TRIES; i++, vmid++) {
        if (vmid >= 100 && !reserved_vmid(res, vmid) && !node_of(all, vmid)) {
            b->vmid = vmid;
            return 0;
        }
    }
    snprintf(err, errlen, "no free VMID near /cluster/nextid");
    return -1;
}

static long used_memory(struct sbx_vm *vms, size_t n, json_t *res)
{
    long used = 0;
    size_t i;
    json_t *r;

    for (i = 0; i < n; i++)
        if (!reserved_vmid(res, vms[i].vmid))
            used += vms[i].maxmem_mib;
    json_array_foreach(res, i, r)
    {
        used += (long)json_integer_value(json_object_get(r, "memory_mib"));
    }
    return used;
}

/* Under the guard's lock: count, check, choose node, VMID and address,
 * and record the reservation, which is also the create's record: a
 * create killed from here on leaves it for doctor to undo (guard.h). */
static int reserve(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    struct sbx_guard g;
    struct sbx_vm *vms = NULL;
    size_t n = 0;
    json_t *all = NULL, *held = NULL;
    int rc = -1;

    if (sbx_guard_check_size(&s->cfg, b->size->cores, b->size->memory_mib, err, errlen) ||
        sbx_guard_open(&g, s->cfg.state_dir, err, errlen))
        return -1;
    if (sbx_vm_list(s, &vms, &n, &all, err, errlen))
        goto out;
    for (size_t i = 0; i < n; i++)
        if (strcmp(vms[i].name, b->name) == 0) {
            snprintf(err, errlen, "name: a sandbox called '%s' exists already", b->name);
            goto out;
        }
    if (reserved_name(g.reservations, b->name)) {
        snprintf(err, errlen, "name: a sandbox called '%s' is being created", b->name);
        goto out;
    }
    /* A killed create's VMID stays its own until doctor has looked. */
    held = json_array();
    json_array_extend(held, g.reservations);
    json_array_extend(held, g.interrupted);
    if (sbx_guard_check_total(&s->cfg, used_memory(vms, n, g.reservations), b->size->memory_mib,
                              err, errlen) ||
        pick_node(s, b, all, err, errlen) || pick_vmid(s, b, all, held, err, errlen) ||
        pick_address(s, b, vms, n, g.reservations, err, errlen))
        goto out;
    json_array_append_new(g.reservations,
                          sbx_guard_reservation(b->name, b->size->cores, b->size->memory_mib,
                                                b->vmid, b->meta.address));
    if (sbx_guard_save(&g, err, errlen) == 0) {
        b->reserved = 1;
        rc = 0;
    }
out:
    free(vms);
    json_decref(all);
    json_decref(held);
    sbx_guard_close(&g);
    return rc;
}

/* Call and, when it answers a UPID, wait for the task. */
static int call_task(struct sbx *s, const char *method, const char *path, json_t *params, int *made,
                     char *err, size_t errlen)
{
    json_t *upid = NULL;
    int rc = sbx_pve_call(s->pve, method, path, params, &upid, err, errlen);

    if (rc == 0) {
        if (made)
            *made = 1;
        rc = sbx_task_wait_json(s->pve, upid, s->cfg.task_timeout_ms, err, errlen);
    }
    json_decref(upid);
    json_decref(params);
    return rc;
}

static int clone_vm(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char desc[SBX_DESC_MAX + 1], path[256];
    int rc;

    if (sbx_meta_encode(&b->meta, desc, sizeof desc, err, errlen) < 0)
        return -1;
    sbx_vm_path(path, sizeof path, b->node, b->template_vmid, "/clone");
    rc = call_task(s, "POST", path,
                   json_pack("{s:i,s:s,s:s,s:i,s:s}", "newid", b->vmid, "name", b->name, "pool",
                             s->cfg.pool, "full", 0, "description", desc),
                   &b->cloned, err, errlen);
    /* No answer (a timeout, a dropped connection) does not mean no clone:
     * Proxmox may have made it.  Nor does "already exists" after such a
     * loss, when the HTTP client sent the request again on a new
     * connection.  undo() then removes the VM only if it is this one. */
    if (rc && (sbx_pve_last_status(s->pve) == 0 || strstr(err, "already exists") != NULL))
        b->cloned = CLONE_MAYBE;
    return rc;
}

static int configure(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char path[256], net0[128], ipconfig[128], tags[256];
    json_t *params;
    int rc;

    snprintf(net0, sizeof net0, "virtio,bridge=%s,firewall=1", s->cfg.bridge);
    snprintf(ipconfig, sizeof ipconfig, "ip=%s/%d,gw=%s", b->meta.address, s->cfg.ip_prefix,
             s->cfg.gateway);
    sbx_vm_tags(&b->meta, tags, sizeof tags);
    params = json_pack("{s:i,s:i,s:i,s:s,s:s,s:s}", "cores", b->size->cores, "memory",
                       b->size->memory_mib, "balloon", 0, "net0", net0, "ipconfig0", ipconfig,
                       "tags", tags);
    /* cloud-init's resolv.conf too: without a nameserver Proxmox hands the
     * guest the host's own resolvers, which the wall does not let it reach. */
    if (s->cfg.dns_addr)
        json_object_set_new(params, "nameserver", json_string(s->cfg.dns_addr));
    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/config");
    rc = sbx_pve_call(s->pve, "PUT", path, params, NULL, err, errlen);
    json_decref(params);
    return rc;
}

/* The ports `transparent on` opens to any address: the host redirects
 * them to egressd's transparent listeners and forwards nothing, so the
 * rule reaches egressd and nowhere else (deploy/proxmox/egressd-redirect.nft). */
#define TRANSPARENT_PORTS "80,443"

/* Per-VM firewall: default-deny both ways, IP filter with the address,
 * one rule out to the proxy, with a dns-addr one out to the DNS server
 * (Proxmox's macro DNS: udp and tcp 53), and with `transparent on` one
 * out for tcp 80 and 443. */
static int firewall(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char path[256], port[16];
    json_t *p;
    int rc;

    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/options");
    p = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:s}", "enable", 1, "ipfilter", 1, "dhcp", 0, "ndp",
                  0, "radv", 0, "macfilter", 1, "policy_in", "DROP", "policy_out", "DROP");
    rc = sbx_pve_call(s->pve, "PUT", path, p, NULL, err, errlen);
    json_decref(p);
    if (rc)
        return -1;
    /* A clone inherits the template's firewall: the set may exist already. */
    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/ipset");
    p = json_pack("{s:s,s:s}", "name", "ipfilter-net0", "comment", "sandboxctl: source address");
    rc = sbx_pve_call(s->pve, "POST", path, p, NULL, err, errlen);
    json_decref(p);
    if (rc && !strstr(err, "already exists"))
        return -1;
    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/ipset/ipfilter-net0");
    p = json_pack("{s:s}", "cidr", b->meta.address);
    rc = sbx_pve_call(s->pve, "POST", path, p, NULL, err, errlen);
    json_decref(p);
    if (rc)
        return -1;
    snprintf(port, sizeof port, "%d", s->cfg.proxy_port);
    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/rules");
    p = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "type", "out", "action", "ACCEPT", "dest",
                  s->cfg.proxy_addr, "proto", "tcp", "dport", port, "iface", "net0", "enable", 1,
                  "comment", "sandboxctl: the egress proxy only");
    rc = sbx_pve_call(s->pve, "POST", path, p, NULL, err, errlen);
    json_decref(p);
    if (rc == 0 && s->cfg.dns_addr) {
        p = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "type", "out", "action", "ACCEPT", "macro",
                      "DNS", "dest", s->cfg.dns_addr, "iface", "net0", "enable", 1, "comment",
                      "sandboxctl: DNS (udp and tcp 53) to dns-addr only");
        rc = sbx_pve_call(s->pve, "POST", path, p, NULL, err, errlen);
        json_decref(p);
    }
    if (rc == 0 && s->cfg.transparent) {
        p = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:s}", "type", "out", "action", "ACCEPT", "proto",
                      "tcp", "dport", TRANSPARENT_PORTS, "iface", "net0", "enable", 1, "comment",
                      "sandboxctl: tcp 80 and 443, which the host redirects to egressd");
        rc = sbx_pve_call(s->pve, "POST", path, p, NULL, err, errlen);
        json_decref(p);
    }
    return rc;
}

/* r's string field key, or NULL. */
static const char *rule_str(json_t *r, const char *key)
{
    return json_string_value(json_object_get(r, key));
}

/* Whether r's field key is the number n (Proxmox may answer "3128" or 3128). */
static bool rule_num(json_t *r, const char *key, long n)
{
    json_t *v = json_object_get(r, key);
    const char *t = json_string_value(v);
    char *end;

    if (json_is_integer(v))
        return json_integer_value(v) == n;
    if (!t || !isdigit((unsigned char)t[0]))
        return false;
    errno = 0;
    return strtol(t, &end, 10) == n && *end == '\0' && errno == 0;
}

static bool rule_is(json_t *r, const char *key, const char *want)
{
    const char *v = rule_str(r, key);

    return v && want && strcmp(v, want) == 0;
}

enum { RULE_OTHER = 0, RULE_PROXY = 1, RULE_DNS = 2, RULE_TRANSPARENT = 4 };

/* Which of sandboxctl's rules r is: out, ACCEPT, on net0, enabled, to the
 * proxy's tcp port, or macro DNS (nothing else: no proto, no port) to the
 * DNS address; RULE_OTHER for anything else, a rule that would let other
 * traffic out included. */
static int our_rule(const struct sbx_config *c, json_t *r)
{
    const char *macro = rule_str(r, "macro");

    if (!rule_is(r, "type", "out") || !rule_is(r, "action", "ACCEPT") ||
        !rule_is(r, "iface", "net0") || !rule_num(r, "enable", 1) || json_object_get(r, "source") ||
        json_object_get(r, "sport") || json_object_get(r, "icmp-type"))
        return RULE_OTHER;
    if (!macro && rule_is(r, "proto", "tcp") && rule_num(r, "dport", c->proxy_port) &&
        rule_is(r, "dest", c->proxy_addr))
        return RULE_PROXY;
    if (macro && strcasecmp(macro, "DNS") == 0 && c->dns_addr && !json_object_get(r, "proto") &&
        !json_object_get(r, "dport") && rule_is(r, "dest", c->dns_addr))
        return RULE_DNS;
    if (!macro && c->transparent && rule_is(r, "proto", "tcp") &&
        rule_is(r, "dport", TRANSPARENT_PORTS) && !json_object_get(r, "dest"))
        return RULE_TRANSPARENT;
    return RULE_OTHER;
}

/* A clone inherits the template's firewall: after our changes the VM must
 * hold exactly our rules (the proxy's, and the DNS server's with a
 * dns-addr) and our one address, or an inherited ACCEPT rule or address
 * would open a hole in the wall. */
static int verify_firewall(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char path[256];
    json_t *rules = NULL, *set = NULL, *r = NULL;
    size_t nset, i, want = 1 + (s->cfg.dns_addr != NULL) + (s->cfg.transparent != 0);
    int rc = -1, seen = 0;

    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/rules");
    if (sbx_pve_call(s->pve, "GET", path, NULL, &rules, err, errlen))
        return -1;
    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/firewall/ipset/ipfilter-net0");
    if (sbx_pve_call(s->pve, "GET", path, NULL, &set, err, errlen))
        goto out;
    nset = json_array_size(set);
    json_array_foreach(rules, i, r)
    {
        int kind = our_rule(&s->cfg, r);
        if (kind == RULE_OTHER || seen & kind)
            break;
        seen |= kind;
    }
    if (json_array_size(rules) != want)
        snprintf(err, errlen,
                 "the VM has %zu firewall rules where sandboxctl made %zu, inherited from template "
                 "%d: remove the template's rules (its firewall must be empty)",
                 json_array_size(rules), want, b->template_vmid);
    else if (i < json_array_size(rules))
        snprintf(err, errlen,
                 "firewall rule %zu of the VM (%s %s%s%s to %s) is not one sandboxctl made, "
                 "inherited from template %d: remove the template's rules (its firewall must be "
                 "empty)",
                 i, rule_str(r, "type") ? rule_str(r, "type") : "?",
                 rule_str(r, "action") ? rule_str(r, "action") : "?",
                 rule_str(r, "macro") ? " macro " : "",
                 rule_str(r, "macro") ? rule_str(r, "macro") : "",
                 rule_str(r, "dest") ? rule_str(r, "dest") : "anywhere", b->template_vmid);
    else if (nset != 1 || !json_is_string(json_object_get(json_array_get(set, 0), "cidr")) ||
             strcmp(json_string_value(json_object_get(json_array_get(set, 0), "cidr")),
                    b->meta.address) != 0)
        snprintf(err, errlen,
                 "IP set ipfilter-net0 holds %zu entries, inherited from template %d: remove the "
                 "template's IP sets",
                 nset, b->template_vmid);
    else
        rc = 0;
out:
    json_decref(rules);
    json_decref(set);
    return rc;
}

/* A file write_env() writes into the guest: fmt's %1$s is the value. */
struct guest_file {
    const char *path;
    const char *fmt;
};

/* The proxy settings every tool in the guest reads (the proxy's URL). */
static const struct guest_file proxy_files[] = {
    {"/etc/profile.d/sandbox-proxy.sh",
     "# written by sandboxctl: all traffic leaves through the egress proxy\n"
     "export http_proxy=%1$s https_proxy=%1$s HTTP_PROXY=%1$s HTTPS_PROXY=%1$s\n"
     "export no_proxy=localhost,127.0.0.1,::1 NO_PROXY=localhost,127.0.0.1,::1\n"},
    {"/etc/apt/apt.conf.d/95sandbox-proxy",
     "// written by sandboxctl\nAcquire::http::Proxy \"%1$s\";\nAcquire::https::Proxy "
     "\"%1$s\";\n"},
    {"/etc/pip.conf", "# written by sandboxctl\n[global]\nproxy = %1$s\n"},
    {"/etc/gitconfig", "# written by sandboxctl\n[http]\n\tproxy = %1$s\n[https]\n\tproxy = "
                       "%1$s\n"},
};

/* The guest's resolver: the one DNS server its firewall lets it ask
 * (dns-addr); not written with `dns-addr none`. */
static const struct guest_file dns_files[] = {
    {"/etc/resolv.conf", "# written by sandboxctl: the one DNS server the firewall lets out\n"
                         "nameserver %1$s\noptions edns0\n"},
};

static int write_files(struct sbx *s, struct build *b, const struct guest_file *files, size_t n,
                       const char *value, char *err, size_t errlen)
{
    char text[1024];

    for (size_t i = 0; i < n; i++) {
        int len = snprintf(text, sizeof text, files[i].fmt, value);
        if (sbx_guest_write(s, b->node, b->vmid, files[i].path, (const unsigned char *)text,
                            (size_t)len, err, errlen))
            return -1;
    }
    return 0;
}

/* npm's global config: the proxy, and with secrets the bundle that holds
 * the sandbox CA (npm's cafile replaces its built-in list, so the whole
 * bundle, not the CA alone). */
static int write_npmrc(struct sbx *s, struct build *b, const char *url, char *err, size_t errlen)
{
    char text[512];
    int len = snprintf(text, sizeof text, "# written by sandboxctl\nproxy=%s\nhttps-proxy=%s\n%s",
                       url, url, b->meta.nsecrets ? "cafile=" SBX_CREDS_BUNDLE "\n" : "");

    return sbx_guest_write(s, b->node, b->vmid, "/etc/npmrc", (const unsigned char *)text,
                           (size_t)len, err, errlen);
}

/* The proxy settings every tool in the guest reads, and its DNS server. */
static int write_env(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char url[128];

    snprintf(url, sizeof url, "http://%s:%d", s->cfg.proxy_addr, s->cfg.proxy_port);
    if (write_files(s, b, proxy_files, sizeof proxy_files / sizeof proxy_files[0], url, err,
                    errlen) ||
        write_npmrc(s, b, url, err, errlen))
        return -1;
    if (s->cfg.dns_addr && write_files(s, b, dns_files, sizeof dns_files / sizeof dns_files[0],
                                       s->cfg.dns_addr, err, errlen))
        return -1;
    return 0;
}

/* Read the local secrets file: it must not be readable by others either. */
static char *read_secrets(const char *path, size_t *len, char *err, size_t errlen)
{
    struct stat st;
    char *buf;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd == -1 || fstat(fd, &st) == -1) {
        snprintf(err, errlen, "secrets-file %s: %s", path, strerror(errno));
        if (fd != -1)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_mode & 077 || st.st_size > SECRETS_MAX) {
        if (!S_ISREG(st.st_mode))
            snprintf(err, errlen, "secrets-file %s: not a regular file", path);
        else if (st.st_mode & 077)
            snprintf(err, errlen,
                     "secrets-file %s: mode %04o lets other users read it; it must be 0600 "
                     "(fix: chmod 600 %s)",
                     path, (unsigned)(st.st_mode & 07777), path);
        else
            snprintf(err, errlen, "secrets-file %s: %lld bytes, more than the %d allowed", path,
                     (long long)st.st_size, SECRETS_MAX);
        close(fd);
        return NULL;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        abort();
    n = read(fd, buf, (size_t)st.st_size);
    close(fd);
    if (n < 0) {
        free(buf);
        snprintf(err, errlen, "secrets-file %s: %s", path, strerror(errno));
        return NULL;
    }
    *len = (size_t)n;
    return buf;
}

/* The secrets file goes in through exec's stdin into a file created 0600
 * (read before anything is made: b->secrets). */
static int write_secrets(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    json_t *argv, *st = NULL;
    int rc, code, sig;

    if (!b->secrets)
        return 0;
    argv = json_pack("[s,s,s]", "/bin/sh", "-c",
                     "umask 077 && cat > " SECRETS_GUEST " && chown 0:0 " SECRETS_GUEST
                     " && chmod 600 " SECRETS_GUEST);
    rc = sbx_guest_exec(s, b->node, b->vmid, argv, b->secrets, b->secrets_len,
                        s->cfg.exec_timeout_ms, &st, err, errlen);
    if (rc == 0 && (code = sbx_guest_exit_code(st, &sig)) != 0) {
        snprintf(err, errlen, "secrets: writing %s in the guest failed (exit %d): %.200s",
                 SECRETS_GUEST, code, json_string_value(json_object_get(st, "err-bytes")));
        rc = -1;
    }
    json_decref(st);
    json_decref(argv);
    return rc;
}

static bool has_secrets(const struct build *b)
{
    return b->meta.nsecrets > 0;
}

/* What egressd gives the guest (every egressd alike), checked, into the
 * guest: with secrets, always (credentials); without, only a CA that
 * request rules of its policy need (when_ca), and nothing when there is
 * none. */
static int put_credentials(struct sbx *s, struct build *b, bool when_ca, char *err, size_t errlen)
{
    struct sbx_creds cr;
    json_t *answer = NULL;
    int rc;

    if (sbx_egress_credentials(&s->cfg, b->vmid, &answer, err, errlen))
        return -1;
    if (when_ca && !json_is_string(json_object_get(answer, "ca"))) {
        json_decref(answer);
        return 0;
    }
    rc = sbx_creds_parse(&s->cfg, b->vmid, &b->meta, answer, &cr, err, errlen);
    json_decref(answer);
    if (rc == 0)
        rc = sbx_creds_install(s, b->node, b->vmid, &cr, err, errlen);
    sbx_creds_free(&cr);
    return rc;
}

/* The binding in every egressd; for a sandbox without secrets, then the
 * CA egressd intercepts its request rules' hosts with, if it has one
 * (with secrets the credentials step installs it). */
static int bind_sandbox(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    json_t *binding = sbx_egress_binding(b->vmid, b->name, &b->meta);
    int rc;

    b->bound = 1; /* even a partial failure may have reached some egressd */
    rc = sbx_egress_put(&s->cfg, binding, err, errlen);
    json_decref(binding);
    if (rc == 0 && !has_secrets(b) && s->cfg.negress > 0)
        rc = put_credentials(s, b, true, err, errlen);
    return rc;
}

/* With secrets, after the binding: their credentials into the guest. */
static int install_credentials(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    return put_credentials(s, b, false, err, errlen);
}

/* Whether VM b->vmid is the one this create made: in our pool, with our
 * name, and metadata of our owner and creation time.  A VMID that someone
 * else took in the meantime is left alone. */
static bool ours(struct sbx *s, struct build *b)
{
    json_t *config = NULL;
    struct sbx_meta m;
    char why[512];
    bool same;

    if (sbx_vm_config(s, b->node, b->vmid, &config, why, sizeof why))
        return false;
    const char *name = json_string_value(json_object_get(config, "name"));
    same = name && strcmp(name, b->name) == 0 && sbx_vm_meta(config, &m, why, sizeof why) == 0 &&
           strcmp(m.owner, b->meta.owner) == 0 && m.created == b->meta.created;
    json_decref(config);
    return same;
}

/* Remove whatever the failed create made; append problems to err.  An
 * interrupt has been noted: the cleanup itself must not stop at it. */
static void undo(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char why[1024];
    size_t n = strlen(err);

    sbx_cancel = 0;
    if (b->bound && sbx_egress_delete(&s->cfg, b->vmid, why, sizeof why) && n < errlen)
        n += (size_t)snprintf(err + n, errlen - n,
                              "; cleanup: the binding of VM %d is left in egressd (%s): remove it "
                              "with `sandboxctl sync`",
                              b->vmid, why);
    if (b->cloned == CLONE_MAYBE && !ours(s, b))
        b->cloned = 0;
    if (b->cloned && sbx_vm_destroy(s, b->node, b->vmid, why, sizeof why) && n < errlen)
        n += (size_t)snprintf(err + n, errlen - n,
                              "; cleanup: VM %d '%s' on node %s is left behind (%s): remove it "
                              "with `sandboxctl destroy %d`",
                              b->vmid, b->name, b->node, why, b->vmid);
    /* A reservation names its process: it lapses when this one exits. */
    if (b->reserved && sbx_guard_release(s->cfg.state_dir, b->vmid, why, sizeof why) && n < errlen)
        snprintf(err + n, errlen - n,
                 "; cleanup: the reservation of VM %d stays until this process exits (%s)", b->vmid,
                 why);
}

/* Prefix err with the step that failed; returns -1. */
static int name_step(const char *step, char *err, size_t errlen)
{
    char copy[2048];

    snprintf(copy, sizeof copy, "%s", err);
    snprintf(err, errlen, "create: %s: %s", step, copy);
    return -1;
}

/* Whether an interrupt asks to stop before the next step (err says so). */
static int stopped(char *err, size_t errlen)
{
    if (sbx_cancel)
        snprintf(err, errlen, "interrupted");
    return sbx_cancel != 0;
}

/* firewall, then the check that the VM holds exactly what we made. */
static int walled(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    return firewall(s, b, err, errlen) || verify_firewall(s, b, err, errlen) ? -1 : 0;
}

static int start_vm(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    char path[256];

    sbx_vm_path(path, sizeof path, b->node, b->vmid, "/status/start");
    return call_task(s, "POST", path, NULL, NULL, err, errlen);
}

static int agent_up(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    return sbx_guest_wait(s, b->node, b->vmid, s->cfg.agent_timeout_ms, err, errlen);
}

/* Inside the guest: the proxy environment, then the secrets. */
static int guest_setup(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    if (write_env(s, b, err, errlen))
        return name_step("proxy environment", err, errlen);
    if (write_secrets(s, b, err, errlen))
        return name_step("secrets", err, errlen);
    return 0;
}

/* One step of create: what progress calls it, what an error calls it
 * (NULL: the step names its own), what it does (0 / -1 with err), and
 * whether this create has it (NULL: always). */
struct step {
    const char *label, *what;
    int (*run)(struct sbx *s, struct build *b, char *err, size_t errlen);
    bool (*wanted)(const struct build *b);
};

static const struct step steps[] = {
    {"clone", "linked clone", clone_vm, NULL},
    {"configure", "configure", configure, NULL},
    {"firewall", "firewall", walled, NULL},
    {"start", "start", start_vm, NULL},
    {"guest agent", "guest agent", agent_up, NULL},
    {"guest setup", NULL, guest_setup, NULL},
    {"binding", "egressd binding", bind_sandbox, NULL},
    {"credentials", "credentials", install_credentials, has_secrets},
};

/* Run the steps in order, each announced to s->progress; stop at the first
 * failure or interrupt, with err saying "create: STEP: why". */
static int run_steps(struct sbx *s, struct build *b, char *err, size_t errlen)
{
    int rc, n = 0;

    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        n += !steps[i].wanted || steps[i].wanted(b);
    sbx_progress_reset(&s->progress, n);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        const struct step *st = &steps[i];
        if (st->wanted && !st->wanted(b))
            continue;
        if (stopped(err, errlen))
            return name_step(st->what ? st->what : st->label, err, errlen);
        sbx_progress_begin(&s->progress, st->label);
        rc = sbx_progress_end(&s->progress, st->run(s, b, err, errlen) != 0);
        if (rc && st->what)
            return name_step(st->what, err, errlen);
        if (rc)
            return -1;
    }
    return 0;
}

static void forget_secrets(struct build *b)
{
    if (b->secrets)
        explicit_bzero(b->secrets, b->secrets_len);
    free(b->secrets);
    b->secrets = NULL;
}

int sbx_op_create(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen)
{
    struct build b;
    char expires[32], why[512];
    json_t *secrets;

    memset(&b, 0, sizeof b);
    *out = NULL;
    b.started_ms = sbx_now_ms();
    if (parse_args(s, args, &b, err, errlen))
        return -1;
    /* A secrets file that will be refused is refused before anything is made. */
    if (s->cfg.secrets_file &&
        !(b.secrets = read_secrets(s->cfg.secrets_file, &b.secrets_len, err, errlen)))
        return -1;
    if (reserve(s, &b, err, errlen)) {
        forget_secrets(&b);
        return -1;
    }
    if (run_steps(s, &b, err, errlen)) {
        forget_secrets(&b);
        undo(s, &b, err, errlen);
        return -1;
    }
    forget_secrets(&b);
    if (sbx_guard_release(s->cfg.state_dir, b.vmid, why, sizeof why))
        fprintf(stderr, "sandboxctl: warning: %s\n", why);
    sbx_time_format(b.meta.expires, expires, sizeof expires);
    secrets = json_array();
    for (int i = 0; i < b.meta.nsecrets; i++)
        json_array_append_new(secrets, json_string(b.meta.secrets[i]));
    *out = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:o,s:f}", "vmid", b.vmid, "name", b.name,
                     "node", b.node, "address", b.meta.address, "owner", b.meta.owner, "policy",
                     b.meta.policy, "expires", expires, "secrets", secrets, "ready_seconds",
                     (sbx_now_ms() - b.started_ms) / 1000.0);
    return 0;
}
