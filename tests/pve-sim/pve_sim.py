#!/usr/bin/env python3
"""pve_sim.py - a Proxmox VE API simulator for sandboxctl's tests.

HTTPS on loopback, token and ticket auth (users sign in with password and
TOTP, see access.py), every request validated against the official
API schema, permissions from the schema's `permissions` entries, and the calls
sandboxctl uses modelled with their real semantics (tasks, locks, digests,
pools, firewall, snapshots, the guest agent running real commands in a
per-VM file system). See README.md beside this file.
"""

import argparse
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # keep the checkout clean of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import access  # noqa: E402
import firewall  # noqa: E402
import guest as guestmod  # noqa: E402
import hostile  # noqa: E402
from common import ApiError, Drop, perm_denied  # noqa: E402
from schema import ParamError, Schema, split_tags  # noqa: E402

MAX_BODY = 512 * 1024
AUTH_DELAY = 0.2
# The timeout of each socket operation: the handshake, each read, and each
# slice of an answer.  It bounds a wait for progress, never an exchange: a
# 16 MiB file-read answer to a slow reader may take minutes and must
# arrive whole; only a peer that takes in less than one slice in that time
# (8 KiB/s at 30 s) loses its connection.  --idle-timeout sets it.
IDLE_TIMEOUT_S = 30.0
# Python's SSL write of one buffer is one operation under one deadline, so
# an answer written at once would get the timeout as its total time.
WRITE_SLICE = 256 * 1024
FILE_READ_MAX = 16 * 1024 * 1024


# ---------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------


# With --task-ms 0, how long a task that nobody polls runs before it ends.
UNWATCHED_S = 2.0


class Task:
    def __init__(self, sim, node, ttype, tid, user, duration, on_done, fail=None, log=None):
        sim.task_seq += 1
        self.node = node
        self.type = ttype
        self.id = str(tid)
        self.user = user
        self.pid = 100000 + sim.task_seq
        self.pstart = 5000000 + sim.task_seq
        self.starttime = int(time.time())
        self.created = time.monotonic()
        self.duration = duration
        self.on_done = on_done
        self.fail = fail
        self.log = list(log or [])
        self.status = "running"
        self.exitstatus = None
        self.polled = False
        self.upid = "UPID:%s:%08X:%08X:%08X:%s:%s:%s:" % (node, self.pid, self.pstart, self.starttime, ttype, self.id, user)

    def due(self, task_ms):
        if self.status != "running":
            return False
        if self.duration is not None:
            return time.monotonic() - self.created >= self.duration
        if task_ms == 0:
            # Ends when someone looks; a task nobody watches (its answer was
            # lost) still ends, as a real one does, after UNWATCHED_S.
            return self.polled or time.monotonic() - self.created >= UNWATCHED_S
        return time.monotonic() - self.created >= task_ms / 1000.0

    def public(self):
        d = {"upid": self.upid, "node": self.node, "pid": self.pid, "pstart": self.pstart, "starttime": self.starttime, "type": self.type, "id": self.id, "user": self.user, "status": self.status}
        if self.exitstatus is not None:
            d["exitstatus"] = self.exitstatus
        return d


class VM:
    def __init__(self, vmid, node, config, pool=None):
        self.vmid = vmid
        self.node = node
        self.config = config  # key -> string value, as in the config file
        self.pool = pool
        self.status = "stopped"
        self.started_at = None
        self.agent_ready_at = None
        self.snapshots = {}  # name -> {"config", "snaptime", "description", "vmstate", "parent"}
        self.parent = None  # the snapshot 'current' derives from
        self.fw_options = {}
        self.fw_ipsets = {}  # name -> {"comment", "entries": [{"cidr", "comment", "nomatch"}]}
        self.fw_rules = []
        self.guest = None

    @property
    def lock(self):
        return self.config.get("lock")

    def raw_config(self):
        """The config file text the digest is taken of (as qemu-server writes it)."""

        def section(conf):
            raw = ""
            descr = conf.get("description")
            if descr:
                for line in descr.split("\n"):
                    raw += "#" + line + "\n"
            for k in sorted(conf):
                if k != "description":
                    raw += "%s: %s\n" % (k, conf[k])
            return raw

        raw = section(self.config)
        for name in sorted(self.snapshots):
            s = self.snapshots[name]
            c = dict(s["config"])
            c["snaptime"] = str(s["snaptime"])
            if s.get("parent"):
                c["parent"] = s["parent"]
            raw += "\n[%s]\n" % name + section(c)
        return raw

    def digest(self):
        return hashlib.sha1(self.raw_config().encode("utf-8")).hexdigest()

    def fw_raw(self):
        return json.dumps([self.fw_options, self.fw_ipsets, self.fw_rules], sort_keys=True)

    def fw_digest(self):
        return hashlib.sha1(self.fw_raw().encode("utf-8")).hexdigest()

    def memory_bytes(self):
        m = self.config.get("memory", "512")
        m = m.split(",")[0].replace("current=", "")
        try:
            return int(m) * 1024 * 1024
        except ValueError:
            return 512 * 1024 * 1024

    def cores(self):
        try:
            return int(self.config.get("cores", "1")) * int(self.config.get("sockets", "1"))
        except ValueError:
            return 1


class World:
    def __init__(self, data, version, state_dir, output_cap, vm_net=False, real_agent=False):
        self.version = version
        self.vm_net = vm_net
        self.real_agent = real_agent
        self.state_dir = state_dir
        self.output_cap = output_cap
        self.nodes = {}
        for n in data.get("nodes", []):
            self.nodes[n["name"]] = {"name": n["name"], "maxmem": int(n.get("maxmem", 64 << 30)), "mem": int(n.get("mem", 4 << 30)), "maxcpu": int(n.get("maxcpu", 16)), "status": n.get("status", "online")}
        if not self.nodes:
            raise ValueError("world: 'nodes' must list at least one node")
        self.storage = data.get("storage", "local-lvm")
        self.bridge = data.get("bridge", "vmbr99")
        self.bridges = list(data.get("bridges", [])) or [self.bridge]
        if "vmbr0" not in self.bridges:
            self.bridges.append("vmbr0")
        self.pools = {}
        for p in [data.get("pool")] + list(data.get("pools", [])):
            if p:
                self.pools[p] = {"comment": ""}
        self.cluster_firewall = bool(data.get("cluster_firewall", True))
        self.tokens = {}
        for t in data.get("tokens", []):
            if "!" not in t.get("id", ""):
                raise ValueError("world: token id '%s' is not USER@REALM!TOKENID" % t.get("id"))
            self.tokens[t["id"]] = {"secret": t["secret"], "privsep": bool(t.get("privsep", True)), "acl": _norm_acl(t.get("acl", {}), "token " + t["id"])}
        self.users, self.groups = access.load(data, _norm_acl, list(self.tokens))
        self.vms = {}
        self.used_ids = set()
        for tpl in data.get("templates", []):
            self._add_vm(tpl, template=True)
        for vm in data.get("vms", []):
            self._add_vm(vm, template=False)

    def _add_vm(self, spec, template):
        vmid = int(spec["vmid"])
        node = spec.get("node") or next(iter(self.nodes))
        if node not in self.nodes:
            raise ValueError("world: VM %d is on unknown node '%s'" % (vmid, node))
        if vmid in self.vms:
            raise ValueError("world: VM %d defined twice" % vmid)
        cfg = {
            "name": spec.get("name", "vm%d" % vmid),
            "memory": "2048",
            "cores": "2",
            "sockets": "1",
            "ostype": "l26",
            "agent": "1",
            "scsihw": "virtio-scsi-single",
            "scsi0": "%s:%s-%d-disk-0,size=8G" % (self.storage, "base" if template else "vm", vmid),
            "ide2": "%s:vm-%d-cloudinit,media=cdrom" % (self.storage, vmid),
            "net0": "virtio=BC:24:11:%02X:%02X:%02X,bridge=vmbr0,firewall=1" % ((vmid >> 16) & 255, (vmid >> 8) & 255, vmid & 255),
            "boot": "order=scsi0",
            "vmgenid": "00000000-0000-4000-8000-%012d" % vmid,
            "smbios1": "uuid=00000000-0000-4000-8000-%012d" % vmid,
            "meta": "creation-qemu=9.0.2,ctime=1700000000",
        }
        if template:
            cfg["template"] = "1"
        for k, v in spec.get("config", {}).items():
            cfg[k] = str(v)
        if spec.get("description"):
            cfg["description"] = spec["description"]
        if spec.get("tags"):
            cfg["tags"] = ";".join(sorted({t.lower() for t in split_tags(spec["tags"])}))
        if spec.get("protection"):
            cfg["protection"] = "1"
        pool = spec.get("pool")
        if pool and pool not in self.pools:
            self.pools[pool] = {"comment": ""}
        vm = VM(vmid, node, cfg, pool)
        fw = spec.get("firewall", {})
        vm.fw_options = {k: v for k, v in fw.get("options", {}).items()}
        vm.fw_rules = list(fw.get("rules", []))
        for name, entries in fw.get("ipsets", {}).items():
            vm.fw_ipsets[name] = {"comment": "", "entries": [{"cidr": e} for e in entries]}
        vm.guest = guestmod.Guest(os.path.join(self.state_dir, "vms", str(vmid)), self.output_cap, self.vm_net, self.real_agent)
        for path, content in spec.get("files", {}).items():
            _seed_file(vm.guest, path, content)
        self.vms[vmid] = vm
        self.used_ids.add(vmid)
        if spec.get("status") == "running":
            vm.status = "running"
            vm.started_at = time.time()
            vm.agent_ready_at = time.monotonic()
            self.nodes[node]["mem"] += vm.memory_bytes()
            vm.guest.boot(self.net_spec(vm))

    def net_spec(self, vm):
        """What --vm-net wires for the VM's net0 (see guest.py), or None."""
        if not self.vm_net:
            return None
        v = vm.config.get("net0")
        if not v:
            return None
        m = re.search(r"(?:^|,)bridge=([^,]+)", v)
        if not m:
            return None
        mac, _ = firewall.net0_of(vm.config)
        spec = {"tap": firewall.tap_name(vm.vmid), "bridge": m.group(1), "mac": mac, "cidr": None, "gw": None}
        spec.update(hostname=vm.config.get("name"), nameserver=vm.config.get("nameserver"), searchdomain=vm.config.get("searchdomain"))
        ipc = dict(kv.split("=", 1) for kv in vm.config.get("ipconfig0", "").split(",") if "=" in kv)
        if ipc.get("ip") and ipc["ip"] != "dhcp":
            spec["cidr"] = ipc["ip"]
            spec["gw"] = ipc.get("gw")
        return spec


def _seed_file(g, path, content):
    rel = path.lstrip("/")
    for name, (target, _) in guestmod.PRIVATE.items():
        t = target.lstrip("/")
        if rel == t or rel.startswith(t + "/"):
            dest = os.path.join(g.disk, "private", name, rel[len(t) :].lstrip("/"))
            break
    else:
        dest = os.path.join(g.disk, "upper", rel)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w", encoding="utf-8") as f:
        f.write(content)


def _norm_acl(acl, who):
    """A world ACL (path -> privileges, or -> {privs, propagate}); who
    ('token X', 'user X', 'group X') names the entry in errors."""
    if not isinstance(acl, dict):
        raise ValueError("world: %s: 'acl' must map ACL paths to privileges" % who)
    out = {}
    for path, privs in acl.items():
        if not path.startswith("/"):
            raise ValueError("world: %s: ACL path '%s' must start with '/'" % (who, path))
        if isinstance(privs, dict):
            out[path.rstrip("/") or "/"] = {"privs": set(privs.get("privs", [])), "propagate": bool(privs.get("propagate", True))}
        else:
            out[path.rstrip("/") or "/"] = {"privs": set(privs), "propagate": True}
    return out


# ---------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------


class Sim:
    def __init__(self, args):
        self.args = args
        self.schema = Schema(args.schema)
        self.version = args.pve
        self.task_ms = args.task_ms
        self.lock = threading.RLock()
        self.calls = []
        self.faults = []
        self.hostile = []  # armed lies of guest agents (hostile.py)
        self.tasks = {}
        self.task_seq = 0
        with open(args.world, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except ValueError as e:
                raise ValueError("%s: not valid JSON: %s" % (args.world, e))
        if not isinstance(data, dict):
            raise ValueError("%s: the world must be a JSON object" % args.world)
        try:
            self.world = World(data, self.version, args.state_dir, args.agent_output_cap, args.vm_net, args.agent == "qga")
        except (KeyError, TypeError, ValueError) as e:
            what = "missing key %s" % e if isinstance(e, KeyError) else str(e)
            raise ValueError("%s: %s" % (args.world, what))
        self.VM = VM
        self.FILE_READ_MAX = FILE_READ_MAX
        self.auth = access.Auth(self.world.users, self.world.groups)
        self.fw_text = None  # the ruleset in force (--vm-net)
        self.fw_sync()

    def fw_sync(self):
        """--vm-net: compile the firewall of every VM and apply it when it
        changed (pve-firewall recompiles every 10 s; this at once)."""
        if not self.args.vm_net:
            return
        warnings = []
        text = firewall.compile_world(self.world, warnings.append)
        if text == self.fw_text:
            return
        for w in warnings:
            sys.stderr.write("pve-sim: firewall: %s\n" % w)
        err = firewall.apply(text)
        if err:
            # A firewall that cannot be applied must not look applied.
            sys.stderr.write("pve-sim: firewall: nft refused the ruleset: %s\n%s" % (err, text))
            self.fw_text = None
            return
        self.fw_text = text

    # -- permissions ---------------------------------------------------------

    def privs(self, who, path):
        """Privileges of a token or user on path: the deepest ACL on the way
        from '/' wins (as PVE's roles()); at each level a user's own ACL
        overrides those of the user's groups (which add up); root@pam has
        every privilege; a VM's path also gets its pool's."""
        if who == "root@pam":
            return set(access.admin_privs(self.version))
        w = self.world
        if who in w.tokens:
            acls = [[w.tokens[who]["acl"]]]
        elif who in w.users:
            u = w.users[who]
            acls = [[u["acl"]], [w.groups[g]["acl"] for g in sorted(u["groups"])]]
        else:
            return set()
        segs = [s for s in path.split("/") if s]
        cur = set()
        for i in range(len(segs) + 1):
            p = "/" + "/".join(segs[:i])
            final = i == len(segs)
            for layer in acls:
                new = None
                for acl in layer:
                    e = acl.get(p)
                    if e is not None and (final or e["propagate"]):
                        new = (new or set()) | e["privs"]
                if new is not None:
                    cur = set(new)
                    break
        m = re.match(r"^/vms/(\d+)$", path)
        if m:
            vm = self.world.vms.get(int(m.group(1)))
            if vm is not None and vm.pool:
                cur |= self.privs(who, "/pool/" + vm.pool)
        return cur

    def acl_paths(self, who):
        """The ACL paths that name who (or its groups)."""
        w = self.world
        if who == "root@pam":
            return ["/"]
        if who in w.tokens:
            return sorted(w.tokens[who]["acl"])
        u = w.users.get(who)
        if u is None:
            return []
        paths = set(u["acl"])
        for g in u["groups"]:
            paths |= set(w.groups[g]["acl"])
        return sorted(paths)

    def has(self, token, path, privs, any_=False):
        have = self.privs(token, path)
        if any_:
            return any(p in have for p in privs)
        return all(p in have for p in privs)

    def require(self, token, path, privs, any_=False):
        have = self.privs(token, path)
        if any_:
            if not any(p in have for p in privs):
                raise perm_denied(path, "|".join(privs))
            return
        for p in privs:
            if p not in have:
                raise perm_denied(path, p)

    def check_perm(self, token, check, params):
        """Evaluate a schema 'check' expression; raise 403 on failure."""
        kind = check[0]
        if kind == "perm":
            path = re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), "")), check[1])
            opts = dict(zip(check[3::2], check[4::2]))
            if "require_param" in opts and opts["require_param"] not in params:
                raise ApiError(403, "Permission check failed")
            self.require(token, path, check[2], any_=bool(opts.get("any")))
            return
        if kind == "and":
            for sub in check[1:]:
                self.check_perm(token, sub, params)
            return
        if kind == "userid-group":
            # RPCEnvironment exec_api2_perm_check: the user must exist (a
            # plain die: 500), then any of the privileges on /access/groups,
            # or on a group the user is a member of
            privs = check[1]
            userid = str(params.get("userid", ""))
            try:
                access.verify_username(userid)
            except ValueError as e:
                raise ApiError(500, str(e))
            if userid not in self.world.users:
                raise ApiError(500, "no such user ('%s')" % userid)
            if self.has(token, "/access/groups", privs, any_=True):
                return
            for gid, g in self.world.groups.items():
                if userid in g["members"] and self.has(token, "/access/groups/" + gid, privs, any_=True):
                    return
            raise ApiError(403, "Permission check failed")
        if kind == "or":
            # as PVE's exec_api2_perm_check: sub-checks quietly, then a bare
            # "Permission check failed" when none passed
            for sub in check[1:]:
                try:
                    self.check_perm(token, sub, params)
                    return
                except ApiError:
                    pass
            raise ApiError(403, "Permission check failed")
        raise ApiError(403, "Permission check failed (unsupported check '%s')" % kind)

    # -- tasks ---------------------------------------------------------------

    def new_task(self, node, ttype, tid, user, on_done, ctx, log=None):
        fault = ctx.get("fault")
        duration = None
        fail = None
        if fault == "slow_task":
            duration = 2.0
        elif fault == "task_fail":
            fail = "simulated failure (fault task_fail)"
        t = Task(self, node, ttype, tid, user, duration, on_done, fail, log)
        self.tasks[t.upid] = t
        return t

    def advance(self):
        for t in list(self.tasks.values()):
            if t.due(self.task_ms):
                self.finish(t)

    def finish(self, t):
        err = t.fail
        try:
            t.on_done(t, err is not None)
        except ApiError as e:
            err = e.message
        except guestmod.GuestError as e:
            err = str(e)
        t.status = "stopped"
        self.fw_sync()
        if err:
            t.exitstatus = err
            t.log.append("TASK ERROR: " + err)
        else:
            t.exitstatus = "OK"
            t.log.append("TASK OK")

    # -- helpers ---------------------------------------------------------------

    def vm_at(self, node, vmid):
        if node not in self.world.nodes:
            raise ApiError(500, "no such cluster node '%s'" % node)
        vm = self.world.vms.get(int(vmid))
        if vm is None or vm.node != node:
            raise ApiError(500, "Configuration file 'nodes/%s/qemu-server/%s.conf' does not exist" % (node, vmid))
        return vm

    @staticmethod
    def check_lock(vm, skiplock=False):
        if vm.lock and not skiplock:
            raise ApiError(500, "VM is locked (%s)" % vm.lock)

    def agent_ready(self, vm):
        if vm.status != "running":
            raise ApiError(500, "VM %d is not running" % vm.vmid)
        agent = vm.config.get("agent", "0").split(",")[0].replace("enabled=", "")
        if agent not in ("1", "true", "yes", "on"):
            raise ApiError(500, "No QEMU guest agent configured")
        if vm.agent_ready_at is None or time.monotonic() < vm.agent_ready_at:
            raise ApiError(500, "QEMU guest agent is not running")

    def encode_out(self, b):
        """Agent bytes as PVE returns them: each byte one Latin-1 code point."""
        return b.decode("latin-1")

    def input_bytes(self, s, what):
        """A Perl string base64-encoded for QGA: characters above 0xFF cannot be."""
        try:
            return s.encode("latin-1")
        except UnicodeEncodeError:
            raise ApiError(500, "Wide character in subroutine entry (%s)" % what)

    def node_mem(self, node):
        n = self.world.nodes[node]
        return n["mem"]

    def vm_resource(self, vm):
        d = {"id": "qemu/%d" % vm.vmid, "type": "qemu", "vmid": vm.vmid, "name": vm.config.get("name", ""), "node": vm.node, "status": vm.status, "maxmem": vm.memory_bytes(), "maxcpu": vm.cores(), "mem": vm.memory_bytes() // 2 if vm.status == "running" else 0, "cpu": 0.01 if vm.status == "running" else 0, "maxdisk": 8 << 30, "disk": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "uptime": int(time.time() - vm.started_at) if vm.status == "running" else 0, "template": 1 if vm.config.get("template") == "1" else 0, "hastate": None}
        del d["hastate"]
        if vm.pool:
            d["pool"] = vm.pool
        if vm.config.get("tags"):
            d["tags"] = vm.config["tags"]
        if vm.lock:
            d["lock"] = vm.lock
        return d


def state_dump(sim):
    w = sim.world
    vms = []
    for vm in sorted(w.vms.values(), key=lambda v: v.vmid):
        vms.append({
            "vmid": vm.vmid, "node": vm.node, "name": vm.config.get("name"), "pool": vm.pool, "status": vm.status, "lock": vm.lock,
            "config": dict(vm.config), "digest": vm.digest(),
            "agent_ready": vm.status == "running" and vm.agent_ready_at is not None and time.monotonic() >= vm.agent_ready_at,
            "firewall": {"options": vm.fw_options, "ipsets": vm.fw_ipsets, "rules": vm.fw_rules},
            "snapshots": {n: {"config": s["config"], "snaptime": s["snaptime"], "description": s.get("description", ""), "parent": s.get("parent")} for n, s in vm.snapshots.items()},
            "guest_files": vm.guest.listing() if vm.guest else [],
            "guest_running": bool(vm.guest and vm.guest.running()),
        })
    return {
        "auth": sim.auth.state(),
        "version": sim.version, "nodes": list(w.nodes.values()), "pools": {p: sorted(v.vmid for v in w.vms.values() if v.pool == p) for p in w.pools},
        "vms": vms, "used_ids": sorted(w.used_ids), "tasks": [t.public() for t in sim.tasks.values()],
        "cluster_firewall": w.cluster_firewall, "bridges": w.bridges, "vm_net": w.vm_net, "firewall_nft": sim.fw_text,
    }


import api  # noqa: E402  (handlers need the classes above)


# ---------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------


TICKET_COOKIE = "PVEAuthCookie"
# pve-manager's auth_handler lets these through without a ticket or token
NO_AUTH = {("POST", "/access/ticket"), ("GET", "/access/ticket"), ("GET", "/access/domains")}
# never recorded in /_sim/calls
SECRET_PARAMS = {"password", "otp", "new-password", "tfa-challenge"}


def _auth_value(header, key):
    """PVE::APIServer::Formatter::extract_auth_value."""
    if not header:
        return None
    m = re.search(r"(?:^|\s)%s(?:=| )([^;]*)" % re.escape(key), header)
    return urllib.parse.unquote(m.group(1)) if m and m.group(1) else None


def parse_form(body):
    """application/x-www-form-urlencoded as PVE reads it: split on & and ;,
    repeated keys become arrays."""
    out = {}
    for part in re.split(r"[&;]", body):
        if not part:
            continue
        k, _, v = part.partition("=")
        k = urllib.parse.unquote_plus(k)
        v = urllib.parse.unquote_plus(v)
        if k in out:
            if not isinstance(out[k], list):
                out[k] = [out[k]]
            out[k].append(v)
        else:
            out[k] = v
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm the
    # body then waits for the client's delayed ACK (about 40 ms a request).
    disable_nagle_algorithm = True
    server_version = "pve-api-daemon/3.0"
    sys_version = ""

    def setup(self):
        self.request.settimeout(self.server.sim.args.idle_timeout)
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError):
            self.close_connection = True
        super().setup()

    def log_message(self, fmt, *args):
        if self.server.sim.args.verbose:
            sys.stderr.write("pve-sim: %s\n" % (fmt % args))

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def send_json(self, status, obj, reason=None):
        body = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        reason = (reason or http.server.BaseHTTPRequestHandler.responses.get(status, ("",))[0]).replace("\n", " ").replace("\r", " ")
        # the reason phrase goes out as UTF-8 bytes, as PVE sends it
        self.send_response(status, reason.encode("utf-8").decode("latin-1"))
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "max-age=0")
        self.send_header("Pragma", "no-cache")
        self.end_headers()
        with memoryview(body) as view:
            for off in range(0, len(view), WRITE_SLICE):
                self.wfile.write(view[off : off + WRITE_SLICE])

    def send_raw(self, raw):
        """A hostile agent's answer (hostile.RawAnswer): the reason phrase's
        bytes as they are, the body in its chunks, with a second between
        bytes when it drips. A reader that goes away ends it."""
        head = b"HTTP/1.1 %d " % raw.status + raw.reason + b"\r\n"
        head += b"Content-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\n\r\n" % raw.length
        self.close_connection = True
        try:
            self.wfile.write(head)
            for chunk in raw.chunks:
                if raw.drip:
                    for i in range(len(chunk)):
                        self.wfile.write(chunk[i : i + 1])
                        self.wfile.flush()
                        time.sleep(raw.drip)
                    continue
                with memoryview(chunk) as view:
                    for off in range(0, len(view), WRITE_SLICE):
                        self.wfile.write(view[off : off + WRITE_SLICE])
            self.wfile.flush()
        except (OSError, ssl.SSLError):
            pass

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            # read and discard, then refuse (PVE: 501 for an oversized body)
            remaining = n
            while remaining > 0:
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
            raise ApiError(501, "request too large")
        return self.rfile.read(n) if n else b""

    def dispatch(self, method):
        sim = self.server.sim
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/_sim/"):
            return self.control(method, url)
        rec = {"method": method, "path": url.path, "params": {}, "status": None}
        try:
            try:
                status, obj, reason = self.api(method, url, rec)
            except ApiError as e:
                status, reason = e.status, e.message
                obj = {"data": None, "message": e.message + "\n"}
                if e.errors is not None:
                    obj["errors"] = e.errors
            except (Drop, ConnectionError):
                raise
            except hostile.RawAnswer as raw:
                rec["status"] = raw.status
                with sim.lock:
                    sim.calls.append(rec)
                return self.send_raw(raw)
            except Exception as e:  # a simulator bug: say so, loudly
                import traceback

                traceback.print_exc()
                status, reason = 500, "pve-sim internal error: %s: %s" % (type(e).__name__, e)
                obj = {"data": None, "message": reason + "\n"}
        except Drop:
            rec["status"] = 0
            with sim.lock:
                sim.calls.append(rec)
            self.close_connection = True
            try:
                self.request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        rec["status"] = status
        with sim.lock:
            sim.calls.append(rec)
        if status == 401:
            # PVE delays every 401 answer (3 s; here AUTH_DELAY)
            time.sleep(AUTH_DELAY)
        self.send_json(status, obj, reason)

    def api(self, method, url, rec):
        sim = self.server.sim
        prefix = "/api2/json"
        if not url.path.startswith(prefix + "/") and url.path != prefix:
            raise ApiError(404, "Not Found (use %s/...)" % prefix)
        path = url.path[len(prefix) :] or "/"
        rec["path"] = urllib.parse.unquote(path)
        body = self.read_body()
        params = parse_form(url.query) if url.query else {}
        from_json = False
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if body:
            if ctype == "application/json":
                try:
                    data = json.loads(body.decode("utf-8"))
                except (UnicodeDecodeError, ValueError) as e:
                    raise ApiError(400, "malformed JSON body: %s" % e)
                if not isinstance(data, dict):
                    raise ApiError(400, "malformed JSON body: not an object")
                params.update(data)
                from_json = True
            else:
                try:
                    params.update(parse_form(body.decode("utf-8")))
                except UnicodeDecodeError:
                    raise ApiError(400, "form body is not UTF-8")
        rec["params"] = {k: ("<%d chars>" % len(v) if isinstance(v, str) and len(v) > 512 else v) for k, v in params.items()}
        for k in SECRET_PARAMS & set(rec["params"]):
            rec["params"][k] = "<secret>"  # PVE logs no password, nor may we
        node, path_params = sim.schema.lookup(path)
        if node is None or method not in node.get("info", {}):
            raise ApiError(501, "Method '%s %s' not implemented" % (method, path))
        info = node["info"][method]
        template = node["path"]
        token, via = self.authenticate(method, template)
        for k, v in path_params.items():
            params[k] = urllib.parse.unquote(v)
        if via == "token" and str(info.get("allowtoken", 1)) == "0":
            # pve-manager's rest_handler, before the permission check
            raise ApiError(403, "Permission check failed (URI '%s' not available with API token, need proper ticket.\n)" % path)
        with sim.lock:
            sim.advance()
            perms = info.get("permissions", {})
            if "check" in perms and token != "root@pam":
                sim.check_perm(token, perms["check"], params)
        try:
            sim.schema.validate(info, params, from_json)
        except ParamError as e:
            raise ApiError(400, "Parameter verification failed.", e.errors)
        ctx = {"token": token, "auth": via, "method": method, "template": template, "path": path}
        with sim.lock:
            self.apply_fault(method, rec["path"], params, ctx)
        handler = api.HANDLERS.get((method, template))
        if handler is None:
            raise ApiError(501, "Method '%s %s' not implemented" % (method, path))
        data = handler(sim, params, ctx)
        if method != "GET":
            with sim.lock:
                sim.fw_sync()
        if ctx.get("fault") == "drop_after":
            raise Drop()  # the call took effect; its answer is lost
        if ctx.get("fault") == "slow_answer":
            time.sleep(ctx["ms"] / 1000.0)  # the call took effect; its answer waits
        return 200, {"data": data}, "OK"

    def authenticate(self, method, template):
        """(who, how): the token id or user the request authenticates as,
        and 'token' or 'ticket', as pve-manager's auth_handler: a ticket
        in the PVEAuthCookie cookie (or an 'Authorization: PVEAuthCookie='
        header) wins over an API token; a ticket needs the
        CSRFPreventionToken header on anything but GET. The calls PVE
        lets through without auth give (None, 'token' or None)."""
        sim = self.server.sim
        auth = self.headers.get("Authorization")
        ticket = _auth_value(self.headers.get("Cookie"), TICKET_COOKIE) or _auth_value(auth, TICKET_COOKIE)
        api_token = None
        if not ticket and auth:
            m = re.match(r"^PVEAPIToken[= ](\S+)$", auth.strip())
            api_token = m.group(1) if m else None
        if (method, template) in NO_AUTH:
            return None, ("token" if api_token else None)
        if ticket:
            with sim.lock:
                user = sim.auth.ticket_user(ticket)
                if user is None:
                    raise ApiError(401, "Authentication failed!")
                if method != "GET" and not sim.auth.verify_csrf(user, self.headers.get("CSRFPreventionToken")):
                    raise ApiError(401, "Permission denied - invalid csrf token")
            return user, "ticket"
        if not auth:
            raise ApiError(401, "No ticket")
        ok = False
        tokid = None
        if api_token:
            tokid, eq, secret = api_token.rpartition("=")
            if eq:
                t = sim.world.tokens.get(tokid)
                ok = t is not None and t["secret"] == secret
        if not ok:
            raise ApiError(401, "authentication failure")
        return tokid, "token"

    def apply_fault(self, method, path, params, ctx):
        sim = self.server.sim
        for f in sim.faults:
            if f["count"] <= 0:
                continue
            if f.get("method") and f["method"].upper() != method:
                continue
            if not re.search(f["path"], path):
                continue
            f["count"] -= 1
            kind = f["kind"]
            if kind == "http_500":
                raise ApiError(500, f.get("message") or "simulated internal error (fault http_500)")
            if kind == "lock_timeout":
                vmid = params.get("vmid", params.get("newid", 0))
                raise ApiError(500, "can't lock file '/var/lock/qemu-server/lock-%s.conf' - got timeout" % vmid)
            if kind == "drop":
                raise Drop()
            ctx["fault"] = kind
            ctx["ms"] = f.get("ms", 0)
            return

    # -- test control ----------------------------------------------------------

    def control(self, method, url):
        sim = self.server.sim
        try:
            body = self.read_body()
        except ApiError as e:
            return self.send_json(e.status, {"error": e.message})
        what = url.path[len("/_sim/") :]
        with sim.lock:
            if what == "calls" and method == "GET":
                return self.send_json(200, sim.calls)
            if what == "calls" and method == "DELETE":
                sim.calls.clear()
                return self.send_json(200, {"cleared": True})
            if what == "faults" and method == "POST":
                try:
                    f = json.loads(body.decode("utf-8") or "{}")
                    if f.get("kind") not in ("task_fail", "lock_timeout", "http_500", "slow_task", "drop", "drop_after", "slow_answer"):
                        raise ValueError("kind must be task_fail|lock_timeout|http_500|slow_task|drop|drop_after|slow_answer")
                    f["ms"] = int(f.get("ms", 1000))  # slow_answer: the call takes effect, its answer waits
                    re.compile(f.get("path", ""))
                    f["path"] = f.get("path", "")
                    f["count"] = int(f.get("count", 1))
                except (ValueError, re.error, UnicodeDecodeError) as e:
                    return self.send_json(400, {"error": "bad fault: %s" % e})
                sim.faults.append(f)
                return self.send_json(200, {"faults": sim.faults})
            if what == "faults" and method == "DELETE":
                sim.faults.clear()
                return self.send_json(200, {"cleared": True})
            if what == "faults" and method == "GET":
                return self.send_json(200, sim.faults)
            if what == "hostile" and method == "POST":
                try:
                    lie = hostile.check(json.loads(body.decode("utf-8") or "{}"))
                except (ValueError, UnicodeDecodeError) as e:
                    return self.send_json(400, {"error": "bad hostile agent: %s" % e})
                sim.hostile.append(lie)
                return self.send_json(200, {"hostile": sim.hostile})
            if what == "hostile" and method == "GET":
                return self.send_json(200, sim.hostile)
            if what == "hostile" and method == "DELETE":
                sim.hostile.clear()
                return self.send_json(200, {"cleared": True})
            if what == "auth" and method == "GET":
                return self.send_json(200, sim.auth.state())
            if what == "clock" and method == "GET":
                return self.send_json(200, {"now": sim.auth.now(), "offset": sim.auth.offset})
            if what == "clock" and method == "POST":
                try:
                    c = json.loads(body.decode("utf-8") or "{}")
                    off = c["offset"]
                    if isinstance(off, bool) or not isinstance(off, int):
                        raise ValueError("offset must be an integer (seconds)")
                except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
                    return self.send_json(400, {"error": "bad clock: %s (want {\"offset\": SECONDS})" % e})
                sim.auth.offset = off
                return self.send_json(200, {"now": sim.auth.now(), "offset": sim.auth.offset})
            if what == "state" and method == "GET":
                sim.advance()
                return self.send_json(200, state_dump(sim))
        self.send_json(404, {"error": "unknown control endpoint %s %s" % (method, url.path)})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="pve_sim.py",
        description="A Proxmox VE API simulator (HTTPS, token and ticket auth, schema validation, tasks, locks, guest agent) for tests. Control endpoints (no auth): GET/DELETE /_sim/calls, POST/GET/DELETE /_sim/faults, POST/GET/DELETE /_sim/hostile, GET /_sim/state, GET /_sim/auth, GET/POST /_sim/clock. See README.md.",
        epilog="Example: pve_sim.py --schema pve-8.4-apischema.json --world world.json --cert c.pem --key k.pem --listen 127.0.0.1:0 --port-file port",
    )
    ap.add_argument("--schema", required=True, help="official API schema JSON (pve-8.4-apischema.json / pve-9.1-apischema.json)")
    ap.add_argument("--pve", type=int, choices=(8, 9), help="PVE major version (default: from the schema file name)")
    ap.add_argument("--world", required=True, help="initial world JSON: nodes, storage, bridge, pool, templates, vms, tokens, users, groups")
    ap.add_argument("--listen", default="127.0.0.1:0", help="ADDR:PORT to listen on (port 0 picks a free one; default %(default)s)")
    ap.add_argument("--port-file", help="write the chosen port here once connections are accepted")
    ap.add_argument("--cert", required=True, help="TLS server certificate (PEM)")
    ap.add_argument("--key", required=True, help="TLS server key (PEM)")
    ap.add_argument("--task-ms", type=int, default=0, help="how long each task runs, ms (0: it ends when its status is next polled, or after 2 s unwatched; default %(default)s)")
    ap.add_argument("--state-dir", help="guest file systems and logs (default: a temp dir removed at exit)")
    ap.add_argument("--agent-output-cap", type=int, default=16 * 1024 * 1024, metavar="BYTES", help="exec-status output cap per stream (default 16 MiB)")
    ap.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S, metavar="SECONDS", help="timeout of each socket operation (handshake, read, each 256 KiB of an answer): a connection that makes no progress for this long is closed (default %(default)s)")
    ap.add_argument("--agent", choices=("sim", "qga"), default="sim", help="who answers the guest agent calls: the simulator's own model (sim), or Debian's qemu-ga run in each VM's namespaces, the calls relayed as Proxmox relays them (qga; see README.md)")
    ap.add_argument("--verbose", action="store_true", help="log every request to stderr")
    ap.add_argument("--vm-net", action="store_true", help="give each running VM a network namespace on the Linux bridge of its net0 (tap{vmid}i0), with ipconfig0's address, and apply the VM firewalls with nftables (see README.md)")
    args = ap.parse_args(argv)
    if args.pve is None:
        m = re.search(r"pve-(\d+)\.", os.path.basename(args.schema))
        if not m or int(m.group(1)) not in (8, 9):
            ap.error("cannot tell the PVE version from '%s': give --pve 8|9" % args.schema)
        args.pve = int(m.group(1))
    if args.agent_output_cap < 1:
        ap.error("--agent-output-cap must be positive")
    if args.idle_timeout <= 0:
        ap.error("--idle-timeout must be positive")
    if args.task_ms < 0:
        ap.error("--task-ms must be >= 0")
    return args


def main(argv):
    args = parse_args(argv)
    why = guestmod.check_host(args.vm_net)
    if not why and args.agent == "qga" and not shutil.which("qemu-ga"):
        why = "--agent qga needs qemu-ga (Debian's qemu-guest-agent)"
    if why:
        print("pve_sim: %s" % why, file=sys.stderr)
        return 2
    tmp = None
    if not args.state_dir:
        tmp = tempfile.mkdtemp(prefix="pve-sim-")
        args.state_dir = tmp
    os.makedirs(args.state_dir, exist_ok=True)
    try:
        sim = Sim(args)
    except (OSError, ValueError, guestmod.GuestError) as e:
        print("pve_sim: %s" % e, file=sys.stderr)
        return 2
    host, _, port = args.listen.rpartition(":")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv = Server((host.strip("[]"), int(port)), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    srv.sim = sim

    def on_signal(signum, frame):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.rename(args.port_file + ".tmp", args.port_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        srv.server_close()
        for vm in sim.world.vms.values():
            if vm.guest:
                vm.guest.shutdown()
        if args.vm_net:
            firewall.apply("")
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
