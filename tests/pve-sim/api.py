"""Handlers for the API calls the simulator models, keyed by (method, schema
path template). Parameters arrive validated and typed by schema.py; the
schema's own permission check has passed. What a handler checks beyond that
is what PVE checks in code (locks, per-option privileges, SDN.Use, ...)."""

import base64
import copy
import re
import time

import access
import firewall
import guest as guestmod
import hostile
import qga as qgamod
from common import ApiError, perm_denied
from schema import TAG_RE, split_tags, typed_config_value

HANDLERS = {}
Q = "/nodes/{node}/qemu/{vmid}"


def route(method, template):
    def deco(fn):
        HANDLERS[(method, template)] = fn
        return fn

    return deco


def _digest_check(given, current):
    if given and given != current:
        raise ApiError(400, "detected modified configuration - file changed by other user? Try again.")


def _vm(sim, p):
    return sim.vm_at(p["node"], p["vmid"])


def _bool(v):
    return v in (1, "1", True)


# -- cluster, pools, version, access ------------------------------------------


@route("GET", "/version")
def version(sim, p, ctx):
    v = {8: {"version": "8.4.1", "release": "8.4", "repoid": "2a5fa54a8503f96d"}, 9: {"version": "9.1.1", "release": "9.1", "repoid": "42b2f5c0f3a0e5d7"}}[sim.version]
    return dict(v, console="html5")


@route("GET", "/cluster/nextid")
def nextid(sim, p, ctx):
    with sim.lock:
        used = sim.world.used_ids
        if "vmid" in p:
            if p["vmid"] in used:
                raise ApiError(400, "Parameter verification failed.", {"vmid": "VM %d already exists" % p["vmid"]})
            return str(p["vmid"])
        i = 100
        while i in used:
            i += 1
        return str(i)


def _node_entry(sim, token, n):
    d = {"id": "node/" + n["name"], "type": "node", "node": n["name"], "status": n["status"], "level": ""}
    if sim.has(token, "/nodes/" + n["name"], ["Sys.Audit"]):
        d.update({"maxmem": n["maxmem"], "mem": n["mem"], "maxcpu": n["maxcpu"], "cpu": 0.05, "uptime": 86400, "maxdisk": 100 << 30, "disk": 10 << 30, "cgroup-mode": 2})
    return d


@route("GET", "/cluster/resources")
def resources(sim, p, ctx):
    token = ctx["token"]
    t = p.get("type")
    out = []
    with sim.lock:
        w = sim.world
        if t in (None, "vm"):
            for vm in sorted(w.vms.values(), key=lambda v: v.vmid):
                if sim.has(token, "/vms/%d" % vm.vmid, ["VM.Audit"]):
                    out.append(sim.vm_resource(vm))
        if t in (None, "node"):
            for n in w.nodes.values():
                out.append(_node_entry(sim, token, n))
        if t in (None, "storage"):
            for n in w.nodes:
                if sim.has(token, "/storage/" + w.storage, ["Datastore.Audit", "Datastore.AllocateSpace"], any_=True):
                    out.append({"id": "storage/%s/%s" % (n, w.storage), "type": "storage", "storage": w.storage, "node": n, "status": "available", "plugintype": "lvmthin", "content": "images,rootdir", "shared": 0, "maxdisk": 500 << 30, "disk": 50 << 30})
    return out


def _pool_members(sim, pool, t=None):
    out = []
    for vm in sorted(sim.world.vms.values(), key=lambda v: v.vmid):
        if vm.pool == pool and t in (None, "qemu"):
            out.append(sim.vm_resource(vm))
    return out


@route("GET", "/pools/{poolid}")
def pool_get(sim, p, ctx):
    with sim.lock:
        pool = sim.world.pools.get(p["poolid"])
        if pool is None:
            raise ApiError(500, "pool '%s' does not exist" % p["poolid"])
        d = {"members": _pool_members(sim, p["poolid"], p.get("type"))}
        if pool.get("comment"):
            d["comment"] = pool["comment"]
        return d


@route("GET", "/pools")
def pools_list(sim, p, ctx):
    out = []
    with sim.lock:
        for name, pool in sorted(sim.world.pools.items()):
            if "poolid" in p and p["poolid"] != name:
                continue
            if not sim.has(ctx["token"], "/pool/" + name, ["Pool.Audit"]):
                continue
            d = {"poolid": name}
            if "poolid" in p:
                d["members"] = _pool_members(sim, name, p.get("type"))
            out.append(d)
    return out


@route("GET", "/access/permissions")
def permissions(sim, p, ctx):
    token = ctx["token"]
    if p.get("userid") not in (None, token):
        raise perm_denied("/access", "Sys.Audit")
    with sim.lock:
        paths = [p["path"]] if "path" in p else sim.acl_paths(token)
        return {path: {priv: 1 for priv in sorted(sim.privs(token, path))} for path in paths}


# -- sign-in, users, groups (access.py) ---------------------------------------


@route("GET", "/access/ticket")
def ticket_get(sim, p, ctx):
    return None  # "Dummy. Useful for formatters which want to provide a login page."


def _check_privs(sim):
    def check(userid, path, privs):
        path = re.sub(r"/+", "/", path).rstrip("/") or "/"
        privlist = [x for x in re.split(r"[,;\s]+", privs) if x]
        return bool(privlist) and sim.has(userid, path, privlist)

    return check


@route("POST", "/access/ticket")
def ticket_create(sim, p, ctx):
    with sim.lock:
        try:
            res = sim.auth.create_ticket(p, _check_privs(sim))
        except access.AuthFailure:
            # "do not return any info to prevent user enumeration attacks"
            raise ApiError(401, "authentication failure")
        if not res.get("NeedTFA"):
            who = res["username"]
            paths = set()
            for t in sim.world.tokens.values():
                paths |= set(t["acl"])
            for u in sim.world.users.values():
                paths |= set(u["acl"])
            for g in sim.world.groups.values():
                paths |= set(g["acl"])
            res["cap"] = access.compute_cap(lambda path: sim.privs(who, path), sorted(paths))
        return res


@route("GET", "/access/groups/{groupid}")
def group_get(sim, p, ctx):
    with sim.lock:
        g = sim.world.groups.get(p["groupid"])
        if g is None:
            raise ApiError(500, "group '%s' does not exist" % p["groupid"])
        d = {"members": sorted(g["members"])}
        if g.get("comment") is not None:
            d["comment"] = g["comment"]
        return d


@route("GET", "/access/users/{userid}")
def user_get(sim, p, ctx):
    with sim.lock:
        u = sim.world.users.get(p["userid"])
        if u is None:  # the permission check found it; kept for safety
            raise ApiError(500, "no such user ('%s')" % p["userid"])
        d = {"enable": u["enable"], "expire": u["expire"]}
        d.update(u["info"])
        if u["totp_key"] is not None:
            d["keys"] = "x"  # user.cfg's marker: second factors are in tfa.cfg
        d["groups"] = sorted(u["groups"])
        tokens = {}
        for tid, t in sorted(sim.world.tokens.items()):
            owner, _, name = tid.partition("!")
            if owner == p["userid"]:
                tokens[name] = {"privsep": 1 if t["privsep"] else 0, "expire": 0}
        if tokens:
            d["tokens"] = tokens
        return d


@route("GET", "/nodes")
def nodes_list(sim, p, ctx):
    with sim.lock:
        return [dict(_node_entry(sim, ctx["token"], n), id="node/" + n["name"]) for n in sim.world.nodes.values()]


@route("GET", "/nodes/{node}/network")
def network(sim, p, ctx):
    with sim.lock:
        if p["node"] not in sim.world.nodes:
            raise ApiError(500, "no such cluster node '%s'" % p["node"])
        t = p.get("type")
        out = []
        if t in (None, "eth"):
            out.append({"iface": "eth0", "type": "eth", "active": 1, "autostart": 1, "method": "manual", "families": ["inet"], "priority": 1, "exists": 1})
        if t in (None, "bridge", "any_bridge", "any_local_bridge"):
            for i, b in enumerate(sim.world.bridges):
                d = {"iface": b, "type": "bridge", "active": 1, "autostart": 1, "method": "manual", "method6": "manual", "families": ["inet"], "priority": 2 + i, "bridge_stp": "off", "bridge_fd": "0"}
                if b == "vmbr0":
                    d.update({"bridge_ports": "eth0", "method": "static", "cidr": "192.0.2.10/24", "address": "192.0.2.10", "netmask": "24", "gateway": "192.0.2.1"})
                else:
                    d["bridge_ports"] = ""
                out.append(d)
        return out


@route("GET", "/nodes/{node}/qemu")
def qemu_list(sim, p, ctx):
    with sim.lock:
        if p["node"] not in sim.world.nodes:
            raise ApiError(500, "no such cluster node '%s'" % p["node"])
        out = []
        for vm in sorted(sim.world.vms.values(), key=lambda v: v.vmid):
            if vm.node == p["node"] and sim.has(ctx["token"], "/vms/%d" % vm.vmid, ["VM.Audit"]):
                r = sim.vm_resource(vm)
                for k in ("id", "type", "node", "pool"):
                    r.pop(k, None)
                r["cpus"] = r.pop("maxcpu")
                out.append(r)
        return out


# -- tasks ------------------------------------------------------------------


def _task(sim, p, ctx):
    upid = p["upid"]
    if not re.match(r"^UPID:[^:]+:[0-9A-F]{8}:[0-9A-F]{8,9}:[0-9A-F]{8}:[^:]+:[^:]*:[^:]+:$", upid):
        raise ApiError(500, "unable to parse worker upid '%s'" % upid)
    t = sim.tasks.get(upid)
    if t is None or t.node != p["node"]:
        raise ApiError(500, "no such task")
    if t.user != ctx["token"] and not sim.has(ctx["token"], "/nodes/" + p["node"], ["Sys.Audit"]):
        raise perm_denied("/nodes/" + p["node"], "Sys.Audit")
    return t


@route("GET", "/nodes/{node}/tasks/{upid}/status")
def task_status(sim, p, ctx):
    with sim.lock:
        t = _task(sim, p, ctx)
        t.polled = True
        if t.due(sim.task_ms):
            sim.finish(t)
        return t.public()


@route("GET", "/nodes/{node}/tasks/{upid}/log")
def task_log(sim, p, ctx):
    with sim.lock:
        t = _task(sim, p, ctx)
        start = p.get("start", 0)
        limit = p.get("limit", 50)
        lines = t.log if t.log else ["no content"]
        sel = lines[start : start + limit] if limit else lines[start:]
        return [{"n": start + i + 1, "t": line} for i, line in enumerate(sel)]


# -- VM lifecycle -------------------------------------------------------------


def _nets(conf):
    for k, v in conf.items():
        if re.match(r"^net\d+$", k):
            m = re.search(r"(?:^|,)bridge=([^,]+)", v)
            if m:
                yield k, m.group(1)


@route("POST", Q + "/clone")
def clone(sim, p, ctx):
    token = ctx["token"]
    with sim.lock:
        w = sim.world
        src = _vm(sim, p)
        newid = p["newid"]
        is_tpl = src.config.get("template") == "1"
        full = p.get("full", 0 if is_tpl else 1)
        if not is_tpl and not full:
            raise ApiError(500, "Linked clone feature is not supported for a VM that is not a template")
        if src.lock and src.lock != "clone":
            raise ApiError(500, "VM is locked (%s)" % src.lock)
        if p.get("target") and p["target"] != src.node:
            raise ApiError(500, "Can't clone to node '%s' - storage '%s' is not shared" % (p["target"], w.storage))
        if p.get("snapname") and p["snapname"] not in src.snapshots:
            raise ApiError(500, "snapshot '%s' does not exist" % p["snapname"])
        pool = p.get("pool")
        if pool is not None and pool not in w.pools:
            raise ApiError(500, "pool '%s' does not exist" % pool)
        storage = p.get("storage", w.storage)
        sim.require(token, "/storage/" + storage, ["Datastore.AllocateSpace"])
        for _, bridge in _nets(src.config):
            if sim.version >= 8:
                sim.require(token, "/sdn/zones/localnetwork/" + bridge, ["SDN.Use"])
        if newid in w.used_ids:
            raise ApiError(500, "unable to create VM %d - config file already exists" % newid)
        conf = copy.deepcopy(src.snapshots[p["snapname"]]["config"] if p.get("snapname") else src.config)
        conf.pop("template", None)
        conf.pop("protection", None)
        conf["name"] = p.get("name", "Copy-of-VM-" + src.config.get("name", str(src.vmid)))
        if "description" in p:
            conf["description"] = p["description"].rstrip()
            if not conf["description"]:
                del conf["description"]
        log = []
        for k in list(conf):
            if re.match(r"^(scsi|virtio|sata|ide|efidisk|tpmstate)\d+$", k) and "media=cdrom" not in conf[k]:
                vol = conf[k].split(",", 1)
                disk = "vm-%d-disk-%s" % (newid, k[-1])
                if full:
                    conf[k] = "%s:%s" % (storage, disk) + ("," + vol[1] if len(vol) > 1 else "")
                    log.append("drive '%s': full clone of %s" % (k, vol[0]))
                else:
                    conf[k] = "%s:%s/%s" % (w.storage, vol[0].split(":")[-1].split("/")[-1], disk) + ("," + vol[1] if len(vol) > 1 else "")
                    log.append("create linked clone of drive %s (%s)" % (k, vol[0]))
                    log.append('  Logical volume "%s" created.' % disk)
            if re.match(r"^ide\d+$", k) and "cloudinit" in conf[k]:
                conf[k] = "%s:vm-%d-cloudinit,media=cdrom" % (w.storage, newid)
        for k, _ in list(_nets(conf)):
            conf[k] = re.sub(r"=([0-9A-F]{2}:){5}[0-9A-F]{2}", "=BC:24:11:%02X:%02X:%02X" % ((newid >> 16) & 255, (newid >> 8) & 255, newid & 255), conf[k], count=1)
        conf["vmgenid"] = "00000000-0000-4000-8000-%012d" % newid
        conf["smbios1"] = "uuid=00000000-0000-4000-9000-%012d" % newid
        conf["lock"] = "clone"
        vm = sim.VM(newid, src.node, conf, pool)
        vm.fw_options = copy.deepcopy(src.fw_options)
        vm.fw_ipsets = copy.deepcopy(src.fw_ipsets)
        vm.fw_rules = copy.deepcopy(src.fw_rules)
        vm.guest = guestmod.Guest(sim.world.state_dir + "/vms/%d" % newid, sim.world.output_cap, sim.world.vm_net, sim.world.real_agent)
        vm.guest.clone_disk_from(src.guest)
        w.vms[newid] = vm
        w.used_ids.add(newid)

        def done(t, failed):
            if failed:
                _remove_vm(sim, vm)
            else:
                vm.config.pop("lock", None)

        return sim.new_task(src.node, "qmclone", src.vmid, token, done, ctx, log).upid


def _remove_vm(sim, vm):
    w = sim.world
    if w.vms.get(vm.vmid) is vm:
        del w.vms[vm.vmid]
        w.used_ids.discard(vm.vmid)
    if vm.guest:
        vm.guest.destroy()


def _boot(sim, vm):
    for k, bridge in _nets(vm.config):
        if bridge not in sim.world.bridges:
            raise ApiError(500, "bridge '%s' does not exist" % bridge)
        if sim.world.vm_net and not guestmod.linux_bridge(bridge):
            raise ApiError(500, "bridge '%s' does not exist" % bridge)
    vm.guest.boot(sim.world.net_spec(vm))
    vm.status = "running"
    vm.started_at = time.time()
    vm.agent_ready_at = time.monotonic() + sim.task_ms / 1000.0
    sim.world.nodes[vm.node]["mem"] += vm.memory_bytes()


def _halt(sim, vm):
    if vm.status != "running":
        return
    vm.guest.shutdown()
    vm.status = "stopped"
    vm.started_at = None
    vm.agent_ready_at = None
    n = sim.world.nodes[vm.node]
    n["mem"] = max(0, n["mem"] - vm.memory_bytes())


def _no_skiplock(p):
    if p.get("skiplock"):
        raise ApiError(403, "Only root may use this option.")


@route("POST", Q + "/status/start")
def start(sim, p, ctx):
    _no_skiplock(p)
    with sim.lock:
        vm = _vm(sim, p)
        sim.check_lock(vm)
        if vm.config.get("template") == "1":
            raise ApiError(500, "you can't start a vm if it's a template")
        already = vm.status == "running"

        def done(t, failed):
            if failed:
                return
            if already or vm.status == "running":
                raise ApiError(500, "VM %d already running" % vm.vmid)
            _boot(sim, vm)

        return sim.new_task(vm.node, "qmstart", vm.vmid, ctx["token"], done, ctx).upid


@route("POST", Q + "/status/stop")
def stop(sim, p, ctx):
    _no_skiplock(p)
    with sim.lock:
        vm = _vm(sim, p)
        sim.check_lock(vm)

        def done(t, failed):
            if not failed:
                _halt(sim, vm)

        return sim.new_task(vm.node, "qmstop", vm.vmid, ctx["token"], done, ctx).upid


@route("DELETE", Q)
def destroy(sim, p, ctx):
    _no_skiplock(p)
    with sim.lock:
        vm = _vm(sim, p)
        sim.check_lock(vm)
        if vm.config.get("protection") == "1":
            raise ApiError(500, "can't remove VM %d - protection mode enabled" % vm.vmid)
        if vm.status == "running":
            raise ApiError(500, "VM %d is running - destroy failed" % vm.vmid)

        def done(t, failed):
            if not failed:
                t.log.append("Logical volume \"vm-%d-disk-0\" successfully removed." % vm.vmid)
                _remove_vm(sim, vm)

        return sim.new_task(vm.node, "qmdestroy", vm.vmid, ctx["token"], done, ctx).upid


@route("GET", Q + "/status/current")
def status_current(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        r = sim.vm_resource(vm)
        d = {"vmid": vm.vmid, "name": r["name"], "status": vm.status, "qmpstatus": vm.status, "cpus": r["maxcpu"], "maxmem": r["maxmem"], "mem": r["mem"], "cpu": r["cpu"], "uptime": r["uptime"], "maxdisk": r["maxdisk"], "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "ha": {"managed": 0}}
        if vm.config.get("agent", "0").split(",")[0].replace("enabled=", "") in ("1", "on", "yes", "true"):
            d["agent"] = 1
        if vm.status == "running":
            d["pid"] = vm.guest.init_pid or 0
            d["running-machine"] = "pc-i440fx-9.0+pve0"
            d["running-qemu"] = "9.0.2"
        for k in ("lock", "tags"):
            if vm.config.get(k):
                d[k] = vm.config[k]
        if vm.config.get("template") == "1":
            d["template"] = 1
        return d


# -- config -------------------------------------------------------------------

_CPU = {"cores", "sockets", "cpu", "cpulimit", "cpuunits", "vcpus", "affinity", "numa", "smp"}
_MEM = {"memory", "balloon", "shares", "hugepages", "keephugepages"}
_CLOUDINIT = {"ciuser", "cipassword", "citype", "cicustom", "ciupgrade", "nameserver", "searchdomain", "sshkeys"}
_HW = {"acpi", "hotplug", "kvm", "machine", "scsihw", "smbios1", "tablet", "vga", "watchdog", "audio0", "bios", "rng0", "tdf", "localtime", "freeze", "vmgenid", "arch", "amd-sev", "intel-tdx", "ivshmem", "spice_enhancements", "keyboard"}
_ROOT_ONLY = {"lock", "args", "hookscript", "startdate"}


def _priv_for_key(key, value):
    """The privilege PVE's check_vm_modify_config_perm wants for one option."""
    base = re.sub(r"\d+$", "", key)
    if key in _CPU:
        return "VM.Config.CPU"
    if key in _MEM:
        return "VM.Config.Memory"
    if base == "net":
        return "VM.Config.Network"
    if base == "ipconfig" or key in _CLOUDINIT:
        return "VM.Config.Cloudinit"
    if base in ("ide", "sata", "scsi", "virtio", "efidisk", "tpmstate", "unused"):
        return "VM.Config.CDROM" if value and "media=cdrom" in str(value) else "VM.Config.Disk"
    if key in _HW or base in ("usb", "hostpci", "serial", "parallel", "numa"):
        return "VM.Config.HWType"
    return "VM.Config.Options"


_NIC_MODELS = ("virtio", "e1000", "e1000e", "rtl8139", "vmxnet3")


def _net_with_mac(value, old, vmid):
    """A net[n] without a MAC gets one, as qemu-server's parse_net does (it
    draws a random one; here the one the NIC had, else one from the vmid)."""
    parts = value.split(",")
    if parts[0] not in _NIC_MODELS and "model=" not in value:
        return value
    if any(re.match(r"^(%s)=" % "|".join(_NIC_MODELS), x) or x.startswith("macaddr=") for x in parts):
        return value
    m = re.search(r"=(([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2})", old or "")
    mac = m.group(1).upper() if m else "BC:24:11:%02X:%02X:%02X" % ((vmid >> 16) & 255, (vmid >> 8) & 255, vmid & 255)
    if parts[0] in _NIC_MODELS:
        parts[0] = "%s=%s" % (parts[0], mac)
    else:
        parts.append("macaddr=" + mac)
    return ",".join(parts)


def _store_value(key, value):
    if key == "description":
        return value.rstrip()
    if key == "tags":
        tags = split_tags(value)
        for t in tags:
            if not TAG_RE.match(t):
                raise ApiError(400, "Parameter verification failed.", {"tags": "invalid tag '%s'" % t})
        return ";".join(sorted({t.lower() for t in tags}))
    return str(value)


def _config_update(sim, p, ctx, sync):
    token = ctx["token"]
    _no_skiplock(p)
    digest = p.pop("digest", None)
    delete = [k for k in re.split(r"[,; ]+", p.pop("delete", "")) if k]
    for k in ("revert", "force", "background_delay", "node", "vmid", "skiplock"):
        p.pop(k, None)
    errors = {}
    for k in delete:
        if k in p:
            errors["delete"] = "you can't use '-%s' and '-delete %s' at the same time" % (k, k)
    if errors:
        raise ApiError(400, "Parameter verification failed.", errors)
    if not p and not delete:
        raise ApiError(400, "Parameter verification failed.", {"": "no options specified"})
    with sim.lock:
        vm = _vm(sim, ctx["params"])
        path = "/vms/%d" % vm.vmid
        for k in list(p) + delete:
            if k in _ROOT_ONLY:
                raise ApiError(403, "only root can set '%s' config" % k)
            sim.require(token, path, [_priv_for_key(k, p.get(k, vm.config.get(k)))])
        for k, v in p.items():
            if re.match(r"^net\d+$", k):
                m = re.search(r"(?:^|,)bridge=([^,]+)", v)
                if m:
                    sim.require(token, "/sdn/zones/localnetwork/" + m.group(1), ["SDN.Use"])
        sim.check_lock(vm)
        _digest_check(digest, vm.digest())
        new = dict(vm.config)
        for k in delete:
            new.pop(k, None)
        for k, v in p.items():
            sv = _store_value(k, v)
            if re.match(r"^net\d+$", k):
                sv = _net_with_mac(sv, vm.config.get(k), vm.vmid)
            if sv == "" and k in ("description", "tags"):
                new.pop(k, None)
            else:
                new[k] = sv
        vm.config = new
        if sync:
            return None

        def done(t, failed):
            pass

        t = sim.new_task(vm.node, "qmconfig", vm.vmid, token, done, ctx)
        t.log.append("update VM %d: %s" % (vm.vmid, " ".join("-%s %s" % (k, v) for k, v in sorted(p.items()))))
        return t.upid


@route("PUT", Q + "/config")
def config_put(sim, p, ctx):
    ctx["params"] = {"node": p["node"], "vmid": p["vmid"]}
    return _config_update(sim, p, ctx, True)


@route("POST", Q + "/config")
def config_post(sim, p, ctx):
    ctx["params"] = {"node": p["node"], "vmid": p["vmid"]}
    return _config_update(sim, p, ctx, False)


@route("GET", Q + "/config")
def config_get(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        conf = vm.config
        if p.get("snapshot"):
            s = vm.snapshots.get(p["snapshot"])
            if s is None:
                raise ApiError(500, "snapshot '%s' does not exist" % p["snapshot"])
            conf = dict(s["config"], snaptime=str(s["snaptime"]))
        info = sim.schema.index[Q + "/config"]["info"]["PUT"]["parameters"]["properties"]

        def props_for(k):
            return sim.schema.prop_for(info, k)

        out = {k: typed_config_value(props_for, k, v) for k, v in conf.items()}
        if vm.parent and not p.get("snapshot"):
            out["parent"] = vm.parent
        out["digest"] = vm.digest()
        return out


# -- firewall -----------------------------------------------------------------

FW = Q + "/firewall"


@route("GET", FW + "/options")
def fw_options_get(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        return dict(vm.fw_options, digest=vm.fw_digest())


@route("PUT", FW + "/options")
def fw_options_put(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        _digest_check(p.pop("digest", None), vm.fw_digest())
        delete = [k for k in re.split(r"[,; ]+", p.pop("delete", "")) if k]
        for k in ("node", "vmid"):
            p.pop(k)
        for k in delete:
            vm.fw_options.pop(k, None)
        vm.fw_options.update(p)
        return None


@route("GET", FW + "/ipset")
def fw_ipset_list(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        dg = vm.fw_digest()
        return [dict({"name": n, "digest": dg}, **({"comment": s["comment"]} if s.get("comment") else {})) for n, s in sorted(vm.fw_ipsets.items())]


@route("POST", FW + "/ipset")
def fw_ipset_create(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        _digest_check(p.get("digest"), vm.fw_digest())
        name = p["name"]
        if p.get("rename"):
            old = p["rename"]
            if old not in vm.fw_ipsets:
                raise ApiError(500, "IPSet '%s' does not exist" % old)
            if name != old and name in vm.fw_ipsets:
                raise ApiError(500, "IPSet '%s' already exists" % name)
            s = vm.fw_ipsets.pop(old)
            if "comment" in p:
                s["comment"] = p["comment"]
            vm.fw_ipsets[name] = s
            return None
        if name in vm.fw_ipsets:
            raise ApiError(500, "IPSet '%s' already exists" % name)
        vm.fw_ipsets[name] = {"comment": p.get("comment", ""), "entries": []}
        return None


def _ipset(vm, name):
    s = vm.fw_ipsets.get(name)
    if s is None:
        raise ApiError(500, "no such IPSet '%s'" % name)
    return s


@route("GET", FW + "/ipset/{name}")
def fw_ipset_get(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        s = _ipset(vm, p["name"])
        dg = vm.fw_digest()
        return [dict({k: v for k, v in e.items() if v not in (None, "")}, digest=dg) for e in s["entries"]]


@route("POST", FW + "/ipset/{name}")
def fw_ipset_add(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        s = _ipset(vm, p["name"])
        cidr = p["cidr"]
        if any(e["cidr"] == cidr for e in s["entries"]):
            raise ApiError(500, "address '%s' already exists" % cidr)
        e = {"cidr": cidr}
        if p.get("comment"):
            e["comment"] = p["comment"]
        if p.get("nomatch"):
            e["nomatch"] = 1
        s["entries"].append(e)
        return None


_RULE_KEYS = ("type", "action", "macro", "source", "dest", "proto", "dport", "sport", "iface", "log", "comment", "icmp-type", "enable")


@route("GET", FW + "/rules")
def fw_rules_get(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        dg = vm.fw_digest()
        return [dict(r, pos=i, digest=dg, ipversion=4) if r.get("dest") or r.get("source") else dict(r, pos=i, digest=dg) for i, r in enumerate(vm.fw_rules)]


@route("POST", FW + "/rules")
def fw_rules_add(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        _digest_check(p.get("digest"), vm.fw_digest())
        rule = {k: p[k] for k in _RULE_KEYS if k in p}
        if rule.get("dport") and not rule.get("proto"):  # also with a macro, as PVE
            raise ApiError(400, "Parameter verification failed.", {"proto": "missing property - 'dport' requires this property"})
        if rule.get("macro") is not None:
            # PVE's verify_rule: the macro's preferred name is stored, an
            # unknown one refused, and the rule must fit what the macro sets.
            name = firewall.macro_name(rule["macro"])
            if name is None:
                raise ApiError(400, "Parameter verification failed.", {"macro": "unknown macro '%s'" % rule["macro"]})
            rule["macro"] = name
            try:
                firewall.expand_macro(rule)
            except ValueError as e:
                raise ApiError(400, "Parameter verification failed.", {e.args[0]: e.args[1]})
        pos = p.get("pos", 0)
        pos = min(pos, len(vm.fw_rules))
        vm.fw_rules.insert(pos, rule)
        return None


# -- snapshots ----------------------------------------------------------------


def _snapshot_config(vm):
    c = dict(vm.config)
    for k in ("lock", "parent", "snaptime", "vmstate", "runningmachine", "runningcpu"):
        c.pop(k, None)
    return c


@route("GET", Q + "/snapshot")
def snap_list(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        out = []
        for n, s in sorted(vm.snapshots.items(), key=lambda kv: kv[1]["snaptime"]):
            d = {"name": n, "description": s.get("description", ""), "snaptime": s["snaptime"]}
            if s.get("vmstate"):
                d["vmstate"] = 1
            if s.get("parent"):
                d["parent"] = s["parent"]
            out.append(d)
        cur = {"name": "current", "description": "You are here!", "running": 1 if vm.status == "running" else 0, "digest": vm.digest()}
        if vm.parent:
            cur["parent"] = vm.parent
        out.append(cur)
        return out


@route("POST", Q + "/snapshot")
def snap_create(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        name = p["snapname"]
        sim.check_lock(vm)
        if name.lower() in ("current", "pending"):
            raise ApiError(500, "invalid snapshot name '%s'" % name)
        if name in vm.snapshots:
            raise ApiError(500, "snapshot name '%s' already used" % name)
        snap = {"config": _snapshot_config(vm), "snaptime": int(time.time()), "description": p.get("description", "").rstrip(), "vmstate": 1 if (p.get("vmstate") and vm.status == "running") else 0, "parent": vm.parent}
        disk = "%s/snapshots/%s" % (vm.guest.vmdir, name)
        vm.guest.snapshot_to(disk)
        vm.config["lock"] = "snapshot"

        def done(t, failed):
            vm.config.pop("lock", None)
            if failed:
                return
            snap["disk"] = disk
            vm.snapshots[name] = snap
            vm.parent = name

        return sim.new_task(vm.node, "qmsnapshot", vm.vmid, ctx["token"], done, ctx).upid


def _snap(vm, name):
    s = vm.snapshots.get(name)
    if s is None:
        raise ApiError(500, "snapshot '%s' does not exist" % name)
    return s


@route("DELETE", Q + "/snapshot/{snapname}")
def snap_delete(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        name = p["snapname"]
        if not p.get("force"):
            sim.check_lock(vm)
        s = _snap(vm, name)
        vm.config["lock"] = "snapshot-delete"

        def done(t, failed):
            vm.config.pop("lock", None)
            if failed:
                return
            for other in vm.snapshots.values():
                if other.get("parent") == name:
                    other["parent"] = s.get("parent")
            if vm.parent == name:
                vm.parent = s.get("parent")
            vm.snapshots.pop(name, None)

        return sim.new_task(vm.node, "qmdelsnapshot", vm.vmid, ctx["token"], done, ctx).upid


@route("POST", Q + "/snapshot/{snapname}/rollback")
def snap_rollback(sim, p, ctx):
    with sim.lock:
        vm = _vm(sim, p)
        name = p["snapname"]
        sim.check_lock(vm)
        s = _snap(vm, name)
        vm.config["lock"] = "rollback"

        def done(t, failed):
            if failed:
                vm.config.pop("lock", None)
                return
            if vm.status == "running":
                t.log.append("stopping VM %d (rollback)" % vm.vmid)
                _halt(sim, vm)
            vm.config = dict(s["config"])
            vm.parent = name
            vm.guest.restore_from(s["disk"])
            if p.get("start"):
                _boot(sim, vm)

        return sim.new_task(vm.node, "qmrollback", vm.vmid, ctx["token"], done, ctx).upid


# -- guest agent --------------------------------------------------------------

A = Q + "/agent"


def _agent_vm(sim, p):
    with sim.lock:
        vm = _vm(sim, p)
        sim.agent_ready(vm)
        return vm


def _lie(sim, vm, call):
    """The lie armed for this VM's call (hostile.py), or None."""
    with sim.lock:
        return hostile.take(sim.hostile, vm.vmid, call)


def _relay(vm, cmd, fn):
    """fn(qga) against the real agent (--agent qga); its error as PVE's."""
    try:
        return fn(vm.guest.qga)
    except qgamod.QgaError as e:
        raise _qga_fail(vm, e.cmd or cmd, e)


def _qga_fail(vm, cmd, e):
    return ApiError(500, "VM %d qmp command '%s' failed - %s" % (vm.vmid, cmd, e))


@route("POST", A + "/ping")
def agent_ping(sim, p, ctx):
    vm = _agent_vm(sim, p)
    if vm.guest.qga:
        _relay(vm, "guest-ping", lambda q: q.call("guest-ping"))
    return {"result": {}}


@route("POST", A + "/exec")
def agent_exec(sim, p, ctx):
    vm = _agent_vm(sim, p)
    cmd = p["command"]
    if not cmd:
        raise ApiError(400, "Parameter verification failed.", {"command": "property is missing and it is not optional"})
    data = sim.input_bytes(p.get("input-data", ""), "input-data")
    lie = _lie(sim, vm, "exec")
    if lie:
        return hostile.exec_answer(sim, vm, lie)
    if vm.guest.qga:
        return {"pid": _relay(vm, "guest-exec", lambda q: q.exec(cmd, data))}
    try:
        return {"pid": vm.guest.exec(cmd, data)}
    except guestmod.GuestError as e:
        raise _qga_fail(vm, "guest-exec", e)


@route("GET", A + "/exec-status")
def agent_exec_status(sim, p, ctx):
    vm = _agent_vm(sim, p)

    def truth():
        try:
            if vm.guest.qga:
                res = _relay(vm, "guest-exec-status", lambda q: q.exec_status(p["pid"]))
            else:
                res = vm.guest.exec_status(p["pid"])
        except guestmod.GuestError as e:
            raise _qga_fail(vm, "guest-exec-status", e)
        for k in ("out-data", "err-data"):
            if k in res:
                res[k] = sim.encode_out(res[k])
        return res

    lie = _lie(sim, vm, "exec-status")
    if lie:
        return hostile.status_answer(sim, vm, lie, truth)
    return truth()


@route("POST", A + "/file-write")
def agent_file_write(sim, p, ctx):
    vm = _agent_vm(sim, p)
    lie = _lie(sim, vm, "file-write")
    if lie:
        return hostile.write_answer(sim, vm, lie)
    content = p["content"]
    if p.get("encode", 1):
        data = sim.input_bytes(content, "content")
    else:
        try:
            data = base64.b64decode(content, validate=True)
        except (ValueError, base64.binascii.Error):
            raise _qga_fail(vm, "guest-file-write", "Invalid parameter 'buf-b64' (content is not valid base64)")
    if vm.guest.qga:
        _relay(vm, "guest-file-write", lambda q: q.write_file(p["file"], data))
        return None
    try:
        vm.guest.write_file(p["file"], data)
    except guestmod.GuestError as e:
        raise _qga_fail(vm, "guest-file-open", e)
    return None


@route("GET", A + "/file-read")
def agent_file_read(sim, p, ctx):
    vm = _agent_vm(sim, p)
    count = p.get("count", sim.FILE_READ_MAX)
    offset = p.get("offset", 0)
    decode = p.get("decode", 1)

    def read(path):
        if vm.guest.qga and not offset:
            data, truncated = _relay(vm, "guest-file-read", lambda q: q.read_file(path, count))
            return data, not truncated
        try:
            return vm.guest.read_file(path, offset, count)
        except guestmod.GuestError as e:
            raise _qga_fail(vm, "guest-file-open", e)

    def truth():
        data, eof = read(p["file"])
        if decode:
            res = {"content": sim.encode_out(data)}
        else:
            res = {"content": base64.b64encode(data).decode("ascii")}
        res["bytes-read"] = len(data)
        if not eof:
            res["truncated"] = 1
        return res

    lie = _lie(sim, vm, "file-read")
    if lie:
        return hostile.read_answer(sim, vm, lie, decode, truth, lambda path: read(path)[0])
    return truth()
