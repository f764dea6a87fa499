#!/usr/bin/env python3
"""tests/pve-sim/sim.t - the Proxmox VE simulator against both API schemas,
driven with real HTTPS requests. Prints TAP."""

import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import firewall  # noqa: E402  (the simulator's firewall model)
TOP = os.environ.get("TOP") or os.path.dirname(os.path.dirname(HERE))
DATA = os.environ.get("DATA_DIR") or os.path.join(TOP, "tests", "data")
SCHEMAS = {8: os.path.join(DATA, "proxmox/pve-8.4-apischema.json"), 9: os.path.join(DATA, "proxmox/pve-9.1-apischema.json")}
SECRET = "5f0c1d2e-3a4b-4c5d-8e9f-0123456789ab"
TOKEN = "sandboxctl@pve!ctl"
WEAK = "viewer@pve!ro"
# users (sign-in): passwords and the TOTP secret of carol and tom
ALICE_PW = "alice: correct horse"
ROOT_PW = "root-pw-1"
TOTP_SECRET = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

n_checks = 0
n_failed = 0


def ok(cond, name, detail=None):
    global n_checks, n_failed
    n_checks += 1
    if cond:
        print("ok %d - %s" % (n_checks, name))
    else:
        n_failed += 1
        print("not ok %d - %s" % (n_checks, name))
        if detail is not None:
            for line in str(detail).splitlines()[:15]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


def world(version):
    pool_privs = ["VM.Allocate", "VM.Audit", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Cloudinit", "VM.Config.Options", "VM.PowerMgmt", "VM.Snapshot", "VM.Snapshot.Rollback", "Pool.Audit"]
    pool_privs.append("VM.Monitor" if version == 8 else "VM.GuestAgent.Unrestricted")
    return {
        "nodes": [{"name": "pve1", "maxmem": 64 << 30, "mem": 8 << 30, "maxcpu": 16}, {"name": "pve2", "maxmem": 64 << 30, "mem": 4 << 30, "maxcpu": 16}],
        "storage": "local-lvm",
        "bridge": "vmbr99",
        "pool": "sandboxes",
        "templates": [
            {"node": "pve1", "vmid": 9000, "name": "agent-template", "protection": True, "config": {"net0": "virtio=BC:24:11:00:23:28,bridge=vmbr99,firewall=1", "memory": "1024"}, "firewall": {"options": {"enable": 1, "policy_in": "DROP", "policy_out": "DROP"}}, "files": {"/etc/agent-template-release": "golden-1\n"}},
            {"node": "pve2", "vmid": 9001, "name": "agent-template"},
        ],
        "vms": [{"node": "pve2", "vmid": 120, "name": "old-sandbox", "pool": "sandboxes", "status": "running", "description": "owner=bob\nexpires=2020-01-01T00:00:00Z", "tags": "Sandbox", "files": {"/root/note.txt": "left by bob\n"}}],
        "cluster_firewall": True,
        "tokens": [
            {"id": TOKEN, "secret": SECRET, "privsep": True, "acl": {"/pool/sandboxes": pool_privs, "/vms/9000": ["VM.Clone", "VM.Audit"], "/storage/local-lvm": ["Datastore.AllocateSpace"], "/sdn/zones/localnetwork/vmbr99": ["SDN.Use"], "/nodes": ["Sys.Audit"], "/access/groups": ["Sys.Audit"]}},
            {"id": WEAK, "secret": "weak-secret", "privsep": True, "acl": {"/pool/sandboxes": ["VM.Audit", "Pool.Audit"], "/access/groups/sandbox-admins": ["Sys.Audit"]}},
        ],
        "users": [
            {"userid": "alice@pve", "password": ALICE_PW, "firstname": "Alice", "acl": {"/pool/sandboxes": ["VM.Audit", "Pool.Audit"]}},
            {"userid": "bob@pve", "password": "bob-pw"},
            {"userid": "carol@pve", "password": "carol-pw", "totp": TOTP_SECRET},
            {"userid": "tom@pve", "password": "tom-pw", "totp": TOTP_SECRET},
            {"userid": "dave@pve", "password": "dave-pw", "enable": 0},
            {"userid": "erin@pve", "password": "erin-pw", "expire": 1000000000},
            {"userid": "root@pam", "password": ROOT_PW},
        ],
        "groups": [
            {"groupid": "sandbox-admins", "members": ["root@pam", "alice@pve"], "comment": "may see every sandbox",
             "acl": {"/pool/sandboxes": ["VM.Audit", "Pool.Audit", "VM.PowerMgmt"], "/nodes": ["Sys.Audit"]}},
            {"groupid": "empty"},
        ],
    }


class Sim:
    def __init__(self, version, extra, tmp):
        self.version = version
        self.dir = tempfile.mkdtemp(prefix="v%d-" % version, dir=tmp)
        d = self.dir
        self.ca = os.path.join(d, "ca.pem")
        run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: E731
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=sim test CA", "-keyout", d + "/ca.key", "-out", self.ca, "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
        run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", d + "/key.pem", "-out", d + "/csr.pem")
        with open(d + "/ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
        run("openssl", "x509", "-req", "-in", d + "/csr.pem", "-CA", self.ca, "-CAkey", d + "/ca.key", "-CAcreateserial", "-days", "1", "-out", d + "/cert.pem", "-extfile", d + "/ext")
        with open(d + "/world.json", "w") as f:
            json.dump(world(version), f)
        self.log = open(d + "/sim.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "pve_sim.py"), "--schema", SCHEMAS[version], "--world", d + "/world.json", "--cert", d + "/cert.pem", "--key", d + "/key.pem", "--listen", "127.0.0.1:0", "--port-file", d + "/port", "--state-dir", d + "/state"] + extra,
            stdout=self.log,
            stderr=self.log,
        )
        for _ in range(200):
            if os.path.exists(d + "/port") or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        with open(d + "/port") as f:
            self.port = int(f.read())
        self.ctx = ssl.create_default_context(cafile=self.ca)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def raw(self, method, path, params=None, token=TOKEN, secret=SECRET, as_json=False, auth=True, headers=None):
        """One request; returns (status, reason, body-json, seconds).
        auth=False sends no Authorization header; headers are added."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=20)
        headers = dict(headers or {})
        if auth:
            headers["Authorization"] = "PVEAPIToken=%s=%s" % (token, secret)
        body = None
        url = path if path.startswith("/_sim/") else "/api2/json" + path
        if params:
            if method in ("GET", "DELETE"):
                url += "?" + urllib.parse.urlencode(params, doseq=True)
            elif as_json:
                body = json.dumps(params).encode()
                headers["Content-Type"] = "application/json"
            else:
                body = urllib.parse.urlencode(params, doseq=True).encode()
                headers["Content-Type"] = "application/x-www-form-urlencoded"
        t0 = time.monotonic()
        conn.request(method, url, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read()
        took = time.monotonic() - t0
        conn.close()
        try:
            js = json.loads(data.decode("utf-8"))
        except ValueError:
            js = None
        return r.status, r.reason, js, took

    def call(self, method, path, params=None, **kw):
        st, reason, js, _ = self.raw(method, path, params, **kw)
        return st, (js or {}).get("data") if st == 200 else reason, js

    def wait_task(self, node, upid, limit=10):
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            st, data, _ = self.call("GET", "/nodes/%s/tasks/%s/status" % (node, urllib.parse.quote(upid, safe="")))
            if st != 200:
                return {"error": data}
            if data["status"] == "stopped":
                return data
            time.sleep(0.02)
        return {"error": "timeout"}

    def task(self, method, path, params=None, node="pve1", **kw):
        st, data, js = self.call(method, path, params, **kw)
        if st != 200:
            return {"error": "%s %s" % (st, data)}
        return self.wait_task(node, data)

    def exec_wait(self, vmid, command, stdin=None, node="pve1"):
        p = {"command": command}
        if stdin is not None:
            p["input-data"] = stdin
        st, data, js = self.call("POST", "/nodes/%s/qemu/%d/agent/exec" % (node, vmid), p, as_json=True)
        if st != 200:
            return {"error": "%s %s" % (st, data)}
        pid = data["pid"]
        for _ in range(500):
            st, data, js = self.call("GET", "/nodes/%s/qemu/%d/agent/exec-status" % (node, vmid), {"pid": pid})
            if st != 200:
                return {"error": "%s %s" % (st, data)}
            if data.get("exited"):
                data["_pid"] = pid
                return data
            time.sleep(0.02)
        return {"error": "timeout"}


def scenario(version, tmp, task_ms):
    V = "pve%d: " % version
    sim = Sim(version, ["--task-ms", str(task_ms), "--agent-output-cap", "1000"], tmp)
    try:
        run_scenario(sim, V, version, task_ms)
    finally:
        sim.stop()
        ok(sim.proc.returncode == 0, V + "simulator exits 0 on SIGTERM", open(sim.dir + "/sim.log").read()[-2000:])


def totp(secret, step):
    """RFC 6238 (SHA-1, 6 digits, 30 s steps) code of a step, computed here
    independently of the simulator."""
    import hmac
    import struct

    key = base64.b32decode(secret + "=" * (-len(secret) % 8))
    mac = hmac.new(key, struct.pack(">Q", step), hashlib.sha1).digest()
    off = mac[-1] & 15
    return "%06d" % ((struct.unpack(">I", mac[off : off + 4])[0] & 0x7FFFFFFF) % 1000000)


def returns_shape(version, method, template):
    """The schema's 'returns' of a call."""
    with open(SCHEMAS[version]) as f:
        tree = json.load(f)
    stack = list(tree)
    while stack:
        n = stack.pop()
        if n["path"] == template:
            return n["info"][method]["returns"]
        stack.extend(n.get("children", []))
    return None


def shape_errors(sch, v, where="data"):
    """Where v does not have the shape of schema sch (types, required and
    unknown properties, array items); [] when it does."""
    t = sch.get("type")
    errs = []
    pytypes = {"object": dict, "array": list, "string": str, "integer": int, "boolean": int, "number": (int, float), "null": type(None)}
    if t in pytypes and not isinstance(v, pytypes[t]) or (t in ("integer", "boolean") and isinstance(v, bool)):
        return ["%s: %r is not %s" % (where, v, t)]
    if t == "boolean" and v not in (0, 1):
        return ["%s: %r is not 0/1" % (where, v)]
    if t == "object":
        props = sch.get("properties", {})
        for k, ps in props.items():
            if k not in v and not ps.get("optional"):
                errs.append("%s: missing %s" % (where, k))
        for k, x in v.items():
            if k in props:
                errs += shape_errors(props[k], x, where + "." + k)
            elif isinstance(sch.get("additionalProperties"), dict):
                errs += shape_errors(sch["additionalProperties"], x, where + "." + k)
            elif sch.get("additionalProperties") == 0:
                errs.append("%s: %s is not in the schema" % (where, k))
    if t == "array":
        for i, x in enumerate(v):
            errs += shape_errors(sch.get("items", {}), x, "%s[%d]" % (where, i))
    return errs


def sign_in(sim, username, password, **more):
    p = {"username": username, "password": password}
    p.update(more)
    return sim.raw("POST", "/access/ticket", p, auth=False)


def run_access(sim, V, version):
    """Sign-in as PVE does it: tickets, CSRF, TOTP, users and groups."""
    DENIED = {"data": None, "message": "authentication failure\n"}
    pw_answers = []

    # -- the right password -----------------------------------------------------
    t0 = int(time.time())
    st, reason, js, _ = sign_in(sim, "alice@pve", ALICE_PW)
    d = (js or {}).get("data") or {}
    tk = d.get("ticket", "")
    m = __import__("re").match(r"^PVE:alice@pve:([0-9A-F]{8})::[A-Za-z0-9+/=]{300,}$", tk)
    ok(st == 200 and d.get("username") == "alice@pve" and m and abs(int(m.group(1), 16) - t0) <= 2 and "NeedTFA" not in d, V + "sign-in with the right password: a ticket PVE:alice@pve:HEXTIME::SIG naming the user", js)
    ok(__import__("re").match(r"^[0-9A-F]{8}:[A-Za-z0-9+/]{43}$", d.get("CSRFPreventionToken", "")) is not None, V + "the answer carries a CSRFPreventionToken HEXTIME:BASE64", d.get("CSRFPreventionToken"))
    cap = d.get("cap") or {}
    ok(sorted(cap) == ["access", "dc", "mapping", "nodes", "sdn", "storage", "vms"] and cap["vms"] == {"VM.Audit": 1} and cap["nodes"] == {"Sys.Audit": 1} and cap["access"] == {}, V + "cap as compute_api_permission: own ACL over the group's on /pool, the group's on /nodes", cap)
    sch = returns_shape(version, "POST", "/access/ticket")
    errs = shape_errors(dict(sch, additionalProperties={}), {k: v for k, v in d.items() if k != "cap"})
    ok(st == 200 and not errs, V + "the ticket answer has the schema's shape (username, ticket, CSRFPreventionToken)", errs)
    alice, alice_csrf = tk, d.get("CSRFPreventionToken")
    st, reason, js, _ = sign_in(sim, "alice", ALICE_PW, realm="pve")
    ok(st == 200 and js["data"]["username"] == "alice@pve" and js["data"]["ticket"].startswith("PVE:alice@pve:"), V + "username without realm plus realm=pve: the same user", (st, reason))
    st, reason, js, _ = sign_in(sim, "root@pam", ROOT_PW)
    root = (js or {}).get("data", {}).get("ticket") if st == 200 else None
    ok(st == 200 and (js["data"]["cap"].get("access") or {}).get("User.Modify") == 1, V + "root@pam signs in (pam realm) with every privilege", (st, reason))

    # -- every failure looks the same ------------------------------------------
    st0, _, state0, _ = sim.raw("GET", "/_sim/state", auth=False)
    fails0 = dict(state0["auth"]["failures"])
    cases = [("alice@pve", "wrong", {}), ("alice@pve", ALICE_PW.upper(), {}), ("nobody@pve", "x", {}), ("dave@pve", "dave-pw", {}), ("erin@pve", "erin-pw", {}),
             ("alice@pve", ALICE_PW, {"realm": "pve"}), ("alice@pam", ALICE_PW, {}), ("alice@ldap", ALICE_PW, {}), ("alice", ALICE_PW, {}), ("bob@pve", "", {})]
    for u, pw, more in cases:
        st, reason, js, took = sign_in(sim, u, pw, **more)
        pw_answers.append((u, st, reason, js, took >= 0.19))
    ok(all(a[1:] == (401, "authentication failure", DENIED, True) for a in pw_answers),
       V + "wrong password, unknown user, disabled, expired, doubled realm, wrong realm, unknown realm, no realm, empty password: all the same 401 'authentication failure', after the delay", [a for a in pw_answers if a[1:] != (401, "authentication failure", DENIED, True)] or pw_answers[:1])
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    fails = state["auth"]["failures"]
    want = {}
    for u, pw, more in cases:
        name = u + ("@" + more["realm"] if more.get("realm") else "")
        want[name] = want.get(name, 0) + 1
    got = {k: fails.get(k, 0) - fails0.get(k, 0) for k in set(fails) | set(want)}
    ok(got == {k: want.get(k, 0) for k in got}, V + "/_sim/state counts the failed sign-ins per user name as posted", (got, want))
    msgs = {e["username"]: e["msg"] for e in state["auth"]["log"] if e["result"] == "failure"}
    ok(msgs.get("dave@pve") == "user 'dave@pve' is disabled" and msgs.get("erin@pve") == "user 'erin@pve' access expired" and msgs.get("nobody@pve") == "no such user ('nobody@pve')",
       V + "the auth log keeps PVE's reason (syslog), which the answer never gives", msgs)
    _, _, calls, _ = sim.raw("GET", "/_sim/calls", auth=False)
    dump = json.dumps(calls)
    tick = [c for c in calls if c["path"] == "/access/ticket"]
    ok(tick and all(c["params"].get("password") == "<secret>" for c in tick) and ALICE_PW not in dump and ROOT_PW not in dump and "dave-pw" not in dump, V + "/_sim/calls never records a password", tick[:2])

    # -- the ticket as a cookie ---------------------------------------------------
    ck = {"Cookie": "PVEAuthCookie=" + urllib.parse.quote(alice, safe="")}
    st, reason, js, _ = sim.raw("GET", "/nodes/pve2/qemu/120/status/current", auth=False, headers=ck)
    ok(st == 200 and js["data"]["status"] == "running", V + "the ticket works as cookie PVEAuthCookie for a GET", (st, reason))
    st, reason, js, _ = sim.raw("GET", "/nodes/pve2/qemu/120/status/current", auth=False, headers={"Authorization": "PVEAuthCookie=" + alice})
    ok(st == 200, V + "... and as 'Authorization: PVEAuthCookie=' header", (st, reason))
    st, reason, js, _ = sim.raw("GET", "/access/permissions", {"path": "/pool/sandboxes"}, auth=False, headers=ck)
    st2, reason2, js2, _ = sim.raw("GET", "/access/permissions", {"path": "/nodes/pve1"}, auth=False, headers=ck)
    ok(st == 200 and js["data"] == {"/pool/sandboxes": {"Pool.Audit": 1, "VM.Audit": 1}} and st2 == 200 and js2["data"] == {"/nodes/pve1": {"Sys.Audit": 1}},
       V + "a user's privileges: own ACL overrides the group's on the same path, the group's /nodes propagates", (js, js2))
    st, reason, js, _ = sim.raw("GET", "/nodes/pve1/qemu/9001/status/current", auth=False, headers=ck)
    ok(st == 403 and reason == "Permission check failed (/vms/9001, VM.Audit)", V + "the ticket's user is checked like a token: 403 outside the ACLs", (st, reason))
    st, reason, js, _ = sim.raw("POST", "/nodes/pve2/qemu/120/status/stop", auth=False, headers=ck)
    ok(st == 401 and reason == "Permission denied - invalid csrf token", V + "POST with the ticket but no CSRFPreventionToken header: 401", (st, reason))
    st, reason, js, _ = sim.raw("POST", "/nodes/pve2/qemu/120/status/stop", auth=False, headers=dict(ck, CSRFPreventionToken=alice_csrf[:-2] + "xx"))
    ok(st == 401 and reason == "Permission denied - invalid csrf token", V + "POST with a forged CSRFPreventionToken: 401", (st, reason))
    st, reason, js, _ = sim.raw("POST", "/nodes/pve2/qemu/120/status/stop", auth=False, headers=dict(ck, CSRFPreventionToken=alice_csrf))
    ok(st == 403 and reason == "Permission check failed (/vms/120, VM.PowerMgmt)", V + "POST with the right CSRFPreventionToken passes auth (then 403: alice's own ACL leaves out the group's VM.PowerMgmt)", (st, reason))
    forged = alice.replace("PVE:alice@pve:", "PVE:root@pam:")
    st, reason, js, _ = sim.raw("GET", "/version", auth=False, headers={"Cookie": "PVEAuthCookie=" + forged})
    ok(st == 401 and reason == "Authentication failed!", V + "a ticket whose user was changed: 401 Authentication failed!", (st, reason))
    st, reason, js, _ = sign_in(sim, "alice@pve", alice)
    ok(st == 200 and js["data"]["ticket"].startswith("PVE:alice@pve:"), V + "a valid ticket as password renews it", (st, reason))
    st, reason, js, _ = sign_in(sim, "bob@pve", alice)
    ok(st == 401, V + "... but not for another user", (st, reason))
    st, reason, js, _ = sign_in(sim, "alice@pve", alice, path="/nodes", privs="Sys.Audit")
    st2, reason2, js2, _ = sign_in(sim, "alice@pve", alice, path="/vms/9001", privs="VM.Audit")
    ok(st == 200 and js["data"]["username"] == "alice@pve" and "ticket" not in js["data"] and st2 == 401, V + "path and privs verify a ticket's privilege (no new ticket); without the privilege: 401", (st, js, st2))
    sim.raw("POST", "/_sim/clock", {"offset": 7200}, as_json=True, auth=False)
    st, reason, js, _ = sim.raw("GET", "/version", auth=False, headers=ck)
    sim.raw("POST", "/_sim/clock", {"offset": 7195}, as_json=True, auth=False)
    st2, reason2, js2, _ = sim.raw("GET", "/version", auth=False, headers=ck)
    sim.raw("POST", "/_sim/clock", {"offset": 0}, as_json=True, auth=False)
    ok(st == 401 and reason == "Authentication failed!" and st2 == 200, V + "a ticket lasts 2 h: 401 once 2 h old (/_sim/clock), valid just before", (st, reason, st2))
    st, reason, js, _ = sim.raw("POST", "/access/ticket", {"username": "alice@pve", "password": ALICE_PW})
    ok(st == 403 and reason.startswith("Permission check failed (URI '/access/ticket' not available with API token"), V + "POST /access/ticket with an API token: 403 (allowtoken 0)", (st, reason))

    # -- TOTP: two steps -----------------------------------------------------------
    if time.time() % 30 > 24:
        time.sleep(30.2 - time.time() % 30)  # the steps must not move under us
    step = int(time.time()) // 30
    st, reason, js, _ = sign_in(sim, "carol@pve", "carol-pw")
    d = (js or {}).get("data") or {}
    chal = d.get("ticket", "")
    ok(st == 200 and d.get("NeedTFA") == 1 and chal.startswith('PVE:!tfa!{"totp"%3Atrue}:') and d.get("username") == "carol@pve" and "cap" not in d, V + "a TOTP user's password: NeedTFA 1 and a challenge ticket PVE:!tfa!...", js)
    st, reason, js, _ = sim.raw("GET", "/version", auth=False, headers={"Cookie": "PVEAuthCookie=" + chal})
    ok(st == 401, V + "the challenge ticket is no ticket for the API", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step - 1), **{"tfa-challenge": chal})
    ok(st == 200 and js["data"]["ticket"].startswith("PVE:carol@pve:") and "NeedTFA" not in js["data"] and "cap" in js["data"], V + "tfa-challenge + password totp:CODE (code of the step before): the full ticket", (st, reason, js))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step - 1), **{"tfa-challenge": chal})
    ok((st, reason, js) == (401, "authentication failure", DENIED), V + "the same code again (replay): 401", (st, reason, js))
    wrong = next(c for c in ("%06d" % i for i in range(1000000)) if c not in [totp(TOTP_SECRET, step + k) for k in (-1, 0, 1)])
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + wrong, **{"tfa-challenge": chal})
    ok((st, reason, js) == (401, "authentication failure", DENIED), V + "a wrong code: 401", (st, reason, js))
    st, reason, js, _ = sign_in(sim, "carol@pve", totp(TOTP_SECRET, step), **{"tfa-challenge": chal})
    ok(st == 401, V + "a code without 'totp:': 401", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step), **{"tfa-challenge": chal, "otp": "x"})
    ok(st == 401, V + "tfa-challenge together with otp: 401", (st, reason))
    st, reason, js, _ = sign_in(sim, "tom@pve", "totp:" + totp(TOTP_SECRET, step), **{"tfa-challenge": chal})
    ok(st == 401, V + "carol's challenge ticket for another user (same secret): 401", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "carol-pw", otp="totp:" + totp(TOTP_SECRET, step))
    ok(st == 200 and js["data"]["ticket"].startswith("PVE:carol@pve:"), V + "password with otp=totp:CODE in one call: the full ticket", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step + 1), **{"tfa-challenge": chal})
    ok(st == 200 and js["data"]["ticket"].startswith("PVE:carol@pve:"), V + "the code of the next step is accepted too (one step of drift)", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step), **{"tfa-challenge": chal})
    ok(st == 401, V + "a code older than the last one used: 401", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "totp:" + totp(TOTP_SECRET, step + 3), **{"tfa-challenge": chal})
    ok(st == 401, V + "a code 3 steps ahead: 401", (st, reason))
    st, reason, js, _ = sign_in(sim, "carol@pve", "wrong-pw")
    ok((st, reason, js) == (401, "authentication failure", DENIED), V + "a TOTP user's wrong password: 401, no challenge", (st, reason, js))
    st, reason, js, _ = sign_in(sim, "tom@pve", "tom-pw")
    tchal = ((js or {}).get("data") or {}).get("ticket", "")
    wrongs = [sign_in(sim, "tom@pve", "totp:" + wrong, **{"tfa-challenge": tchal})[0] for _ in range(8)]
    st, reason, js, _ = sign_in(sim, "tom@pve", "totp:" + totp(TOTP_SECRET, step + 1), **{"tfa-challenge": tchal})
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    ok(wrongs == [401] * 8 and st == 401 and state["auth"]["users"]["tom@pve"]["totp_locked"], V + "8 wrong codes lock TOTP: then even a right code is 401", (wrongs, st))

    # -- groups and users --------------------------------------------------------------
    st, data, js = sim.call("GET", "/access/groups/sandbox-admins")
    errs = shape_errors(returns_shape(version, "GET", "/access/groups/{groupid}"), data) if st == 200 else ["status %s" % st]
    ok(st == 200 and data == {"members": ["alice@pve", "root@pam"], "comment": "may see every sandbox"} and not errs, V + "a group's members read with a token that has Sys.Audit on /access/groups (schema shape)", (data, errs))
    st, reason, _ = sim.call("GET", "/access/groups/sandbox-admins", token=WEAK, secret="weak-secret")
    ok(st == 403 and reason == "Permission check failed (/access/groups, Sys.Audit|Group.Allocate)", V + "... refused (403) without it (Sys.Audit on one group is not on /access/groups)", (st, reason))
    st, reason, _ = sim.call("GET", "/access/groups/nosuchgroup")
    ok(st == 500 and reason == "group 'nosuchgroup' does not exist", V + "an unknown group: 500 as PVE", (st, reason))
    st, reason, js = sim.call("GET", "/access/groups/bad%20name")
    ok(st == 400 and "groupid" in js.get("errors", {}), V + "a group id outside pve-groupid: 400", js)
    st, data, js = sim.call("GET", "/access/users/alice@pve")
    errs = shape_errors(returns_shape(version, "GET", "/access/users/{userid}"), data) if st == 200 else ["status %s" % st]
    ok(st == 200 and data == {"enable": 1, "expire": 0, "firstname": "Alice", "groups": ["sandbox-admins"]} and not errs, V + "a user's groups read with that token (schema shape)", (data, errs))
    st, data, js = sim.call("GET", "/access/users/sandboxctl@pve")
    errs = shape_errors(returns_shape(version, "GET", "/access/users/{userid}"), data) if st == 200 else ["status %s" % st]
    ok(st == 200 and data.get("groups") == [] and data.get("tokens") == {"ctl": {"privsep": 1, "expire": 0}} and not errs, V + "a token's owner exists as a user and lists its tokens", (data, errs))
    st, data, _ = sim.call("GET", "/access/users/alice@pve", token=WEAK, secret="weak-secret")
    st2, reason2, _ = sim.call("GET", "/access/users/bob@pve", token=WEAK, secret="weak-secret")
    ok(st == 200 and st2 == 403 and reason2 == "Permission check failed", V + "Sys.Audit on a group reads its members' users only (userid-group)", (st, st2, reason2))
    st, reason, _ = sim.call("GET", "/access/users/nobody@pve")
    ok(st == 500 and reason == "no such user ('nobody@pve')", V + "an unknown user: 500 no such user (the permission check finds out first)", (st, reason))
    st, reason, js, _ = sim.raw("GET", "/access/users/alice@pve", auth=False, headers=ck)
    st2, reason2, js2, _ = sim.raw("GET", "/access/users/alice@pve", auth=False, headers={"Cookie": "PVEAuthCookie=" + (root or "")})
    ok(st == 403 and st2 == 200 and js2["data"]["groups"] == ["sandbox-admins"], V + "alice's own ticket may not read her user; root@pam's may", (st, reason, st2))
    st, data, _ = sim.call("GET", "/access/users/carol@pve")
    ok(st == 200 and data.get("keys") == "x" and data.get("groups") == [], V + "a TOTP user shows keys 'x' (second factors in tfa.cfg)", data)

    # -- bad parameters -------------------------------------------------------------------
    st, reason, js, _ = sign_in(sim, "a" * 61 + "@pve", "x")
    ok(st == 400 and reason == "Parameter verification failed." and js.get("errors", {}).get("username") == "value may only be 64 characters long", V + "a username over the schema's maxLength 64: 400", (st, js))
    st, reason, js, _ = sim.raw("POST", "/access/ticket", {"username": "alice@pve"}, auth=False)
    ok(st == 400 and "missing" in js.get("errors", {}).get("password", ""), V + "no password: 400 (required by the schema)", js)
    st, reason, js, _ = sign_in(sim, "alice", "x", realm="p")
    ok(st == 400 and "realm" in js.get("errors", {}), V + "a realm outside pve-realm: 400", js)
    st, reason, js, _ = sign_in(sim, "alice@pve", alice, path="/nodes")
    ok(st == 400 and js.get("errors", {}).get("privs") == "missing property required by 'path'", V + "path without privs: 400 (requires)", js)
    st, reason, js, _ = sign_in(sim, "alice@pve", ALICE_PW, totp="123456")
    ok(st == 400 and "totp" in js.get("errors", {}), V + "an unknown parameter: 400", js)
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    ok(state["auth"]["failures"].get("a" * 61 + "@pve") is None, V + "a call refused by the schema is no sign-in attempt", state["auth"]["failures"])


def run_scenario(sim, V, version, task_ms):
    Q = "/nodes/pve1/qemu/100"

    # -- version, auth --------------------------------------------------------
    st, data, _ = sim.call("GET", "/version")
    ok(st == 200 and data["release"] == ("8.4" if version == 8 else "9.1"), V + "/version reports the release of the schema", data)
    st, reason, js, took = sim.raw("GET", "/version", auth=False)
    ok(st == 401 and took >= 0.19, V + "no token: 401 after the auth delay (%.2fs)" % took, (st, reason))
    st, reason, js, took = sim.raw("GET", "/version", secret="wrong")
    ok(st == 401 and took >= 0.19, V + "wrong secret: 401 after the auth delay", (st, reason))
    st, reason, js, took = sim.raw("GET", "/version", token="nobody@pve!x")
    ok(st == 401, V + "unknown token: 401", (st, reason))
    run_access(sim, V, version)

    # -- schema ---------------------------------------------------------------
    st, reason, js, _ = sim.raw("GET", "/nodes/pve1/bogus")
    ok(st == 501 and reason == "Method 'GET /nodes/pve1/bogus' not implemented", V + "unknown path: 501 naming method and path", (st, reason))
    st, reason, js, _ = sim.raw("DELETE", "/version")
    ok(st == 501, V + "known path, method not in schema: 501", (st, reason))
    st, reason, js, _ = sim.raw("GET", "/cluster/resources", {"type": "vmx", "colour": "red"})
    errs = (js or {}).get("errors") or {}
    ok(st == 400 and "enumeration" in errs.get("type", "") and "not defined in schema" in errs.get("colour", ""), V + "bad enum and unknown parameter: 400 with errors per parameter", js)
    st, reason, js, _ = sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"name": "x", "pool": "sandboxes"})
    ok(st == 400 and "missing" in ((js or {}).get("errors") or {}).get("newid", ""), V + "missing required parameter: 400 naming it", js)
    st, reason, js, _ = sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"newid": "abc", "pool": "sandboxes"})
    ok(st == 400 and "type check ('integer')" in js["errors"].get("newid", ""), V + "wrongly typed parameter: 400", js)
    st, reason, js, _ = sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"newid": "42", "pool": "sandboxes"})
    ok(st == 400 and "minimum" in js["errors"].get("newid", ""), V + "VMID below 100: 400 minimum", js)
    st, reason, js, _ = sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"newid": "100", "name": "not a dns name!", "pool": "sandboxes"})
    ok(st == 400 and "name" in js["errors"], V + "format dns-name enforced for clone name", js)
    st, reason, js, _ = sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"newid": "100"})
    ok(st == 403 and reason == "Permission check failed", V + "clone outside the pool without VM.Allocate on /vms/100: 403 (checked before the parameters, as PVE does)", (st, reason))

    # -- a VM that the world starts with ----------------------------------------
    st, conf, _ = sim.call("GET", "/nodes/pve2/qemu/120/config")
    ok(st == 200 and conf.get("description") == "owner=bob\nexpires=2020-01-01T00:00:00Z" and conf.get("tags") == "sandbox", V + "world VM: description and lower-cased tags", conf)
    r = sim.exec_wait(120, ["cat", "/root/note.txt"], node="pve2")
    ok(r.get("out-data") == "left by bob\n", V + "world VM runs, its agent answers, its seeded files are there", r)
    st, reason, _ = sim.call("GET", "/nodes/pve1/qemu/120/config")
    ok(st == 500 and reason == "Configuration file 'nodes/pve1/qemu-server/120.conf' does not exist", V + "VM addressed on the wrong node", (st, reason))

    # -- several clients at once -------------------------------------------------
    import threading

    st, data, _ = sim.call("POST", "/nodes/pve2/qemu/120/agent/exec", {"command": ["sleep", "2"]}, as_json=True)
    results = []

    def one():
        try:
            results.append(sim.raw("GET", "/version")[0])
        except Exception as e:  # noqa: BLE001
            results.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(12)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    ok(results == [200] * 12 and time.monotonic() - t0 < 1.5, V + "12 parallel clients served while a guest command runs", results)

    # -- nextid, clone, lock, task ---------------------------------------------
    st, data, _ = sim.call("GET", "/cluster/nextid")
    ok(st == 200 and data == "100", V + "nextid is the lowest free id >= 100", data)
    st, upid, _ = sim.call("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "name": "sb-100", "pool": "sandboxes", "full": 0})
    ok(st == 200 and isinstance(upid, str) and upid.startswith("UPID:pve1:") and ":qmclone:9000:%s:" % TOKEN in upid, V + "clone returns a UPID", upid)
    st, conf, _ = sim.call("GET", Q + "/config")
    ok(st == 200 and conf.get("lock") == "clone" and "bridge=vmbr99" in conf.get("net0", ""), V + "new clone carries lock: clone and the template's net0", conf)
    st, reason, _ = sim.call("PUT", Q + "/config", {"cores": 2})
    ok(st == 500 and reason == "VM is locked (clone)", V + "config change on the locked clone: 'VM is locked (clone)'", (st, reason))
    t = sim.wait_task("pve1", upid)
    ok(t.get("status") == "stopped" and t.get("exitstatus") == "OK", V + "clone task ends OK", t)
    st, conf, _ = sim.call("GET", Q + "/config")
    ok(st == 200 and "lock" not in conf and conf.get("name") == "sb-100" and isinstance(conf.get("cores"), int) and conf.get("memory") == "1024", V + "lock gone once the task is seen finished; typed values", conf)
    st, fw, _ = sim.call("GET", Q + "/firewall/options")
    ok(st == 200 and fw.get("enable") == 1 and fw.get("policy_out") == "DROP", V + "clone inherits the template's firewall defaults", fw)
    st, reason, _ = sim.call("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "name": "again"})
    ok(st == 500 and reason == "unable to create VM 100 - config file already exists", V + "clone into an existing id fails", (st, reason))
    st, data, _ = sim.call("GET", "/cluster/nextid")
    ok(data == "101", V + "nextid skips the new VM", data)

    # -- permissions ------------------------------------------------------------
    priv = "VM.Monitor" if version == 8 else "VM.GuestAgent.Unrestricted"
    st, reason, _ = sim.call("POST", Q + "/agent/exec", {"command": "true"}, token=WEAK, secret="weak-secret")
    ok(st == 403 and reason == "Permission check failed (/vms/100, %s)" % priv, V + "403 names path and privilege (%s)" % priv, (st, reason))
    st, data, _ = sim.call("GET", Q + "/status/current", token=WEAK, secret="weak-secret")
    ok(st == 200 and data["status"] == "stopped", V + "ACL on /pool/sandboxes covers its member VM 100", data)
    st, reason, _ = sim.call("GET", "/nodes/pve2/qemu/9001/status/current")
    ok(st == 403 and reason == "Permission check failed (/vms/9001, VM.Audit)", V + "VM outside the pool and ACLs: 403", (st, reason))
    st, reason, _ = sim.call("PUT", Q + "/config", {"net0": "virtio,bridge=vmbr0,firewall=1"})
    ok(st == 403 and reason == "Permission check failed (/sdn/zones/localnetwork/vmbr0, SDN.Use)", V + "bridge without SDN.Use: 403", (st, reason))
    st, reason, _ = sim.call("PUT", Q + "/config", {"description": "x"}, token=WEAK, secret="weak-secret")
    ok(st == 403 and "VM.Config.Options" in str(reason), V + "config option needs its own privilege (VM.Config.Options)", (st, reason))
    st, data, _ = sim.call("GET", "/access/permissions", {"path": "/pool/sandboxes"})
    ok(st == 200 and data.get("/pool/sandboxes", {}).get("VM.Allocate") == 1 and priv in data["/pool/sandboxes"], V + "/access/permissions lists the pool privileges", data)
    st, data, _ = sim.call("GET", "/cluster/resources", {"type": "node"}, token=WEAK, secret="weak-secret")
    ok(st == 200 and len(data) == 2 and all("mem" not in n for n in data), V + "node entries carry no memory figures without Sys.Audit", data)

    # -- config: digest, tags, description ---------------------------------------
    st, conf, _ = sim.call("GET", Q + "/config")
    d0 = conf["digest"]
    st, data, _ = sim.call("PUT", Q + "/config", {"description": "owner=alice\nexpires=soon\n\n", "cores": 2, "memory": "2048", "balloon": 0, "ipconfig0": "ip=10.99.0.11/24,gw=10.99.0.1", "digest": d0})
    ok(st == 200 and data is None, V + "PUT config with the current digest", data)
    st, reason, js = sim.call("PUT", Q + "/config", {"description": "late", "digest": d0})
    ok(st == 400 and "detected modified configuration" in str(reason), V + "PUT config with a stale digest: refused", (st, reason))
    st, reason, js = sim.call("PUT", Q + "/config", {"ipconfig0": "ip=10.99.0.300/24"})
    ok(st == 400 and "ipconfig0" in js.get("errors", {}), V + "malformed ipconfig0: 400", js)
    st, data, _ = sim.call("PUT", Q + "/config", {"tags": "Zeta;alpha;Beta;alpha"}, as_json=True)
    st, conf, _ = sim.call("GET", Q + "/config")
    ok(conf.get("tags") == "alpha;beta;zeta" and conf.get("description") == "owner=alice\nexpires=soon", V + "tags stored lower-cased, sorted, unique; description without trailing newlines", conf)
    st, reason, js = sim.call("PUT", Q + "/config", {"tags": "a:b"}, as_json=True)
    ok(st == 400 and "tags" in js.get("errors", {}), V + "tag with ':' refused", js)
    st, reason, js = sim.call("PUT", Q + "/config", {"description": "x" * 8193}, as_json=True)
    ok(st == 400 and "8192" in js.get("errors", {}).get("description", ""), V + "description over 8 KiB refused", js)
    st, reason, js, _ = sim.raw("PUT", Q + "/config", None)
    st, reason, js, _ = sim.raw("PUT", Q + "/config", {"x": 1})
    ok(st == 400 and "x" in js["errors"], V + "unknown config key refused", js)
    st, data, _ = sim.call("GET", "/cluster/resources", {"type": "vm"})
    vm100 = [r for r in data if r["vmid"] == 100]
    ok(vm100 and vm100[0].get("tags") == "alpha;beta;zeta" and vm100[0].get("pool") == "sandboxes" and vm100[0]["maxmem"] == 2048 << 20 and "description" not in vm100[0], V + "/cluster/resources type=vm: tags, pool, maxmem, no description", vm100)
    st, data, _ = sim.call("GET", "/pools/sandboxes")
    ok(st == 200 and [m["vmid"] for m in data["members"]] == [100, 120], V + "/pools/sandboxes lists the clone", data)

    # -- start, agent -----------------------------------------------------------------
    st, reason, _ = sim.call("POST", Q + "/agent/ping")
    ok(st == 500 and reason == "VM 100 is not running", V + "agent before start: VM is not running", (st, reason))
    st, nodes0, _ = sim.call("GET", "/cluster/resources", {"type": "node"})
    t = sim.task("POST", Q + "/status/start")
    ok(t.get("exitstatus") == "OK", V + "start task OK", t)
    if task_ms > 0:
        st, reason, _ = sim.call("POST", Q + "/agent/ping")
        ok(st == 500 and reason == "QEMU guest agent is not running", V + "agent during the boot delay: not running", (st, reason))
        time.sleep(task_ms / 1000.0 + 0.05)
    st, data, _ = sim.call("POST", Q + "/agent/ping")
    ok(st == 200 and data == {"result": {}}, V + "agent answers after boot", (st, data))
    st, nodes1, _ = sim.call("GET", "/cluster/resources", {"type": "node"})
    m0 = {n["node"]: n["mem"] for n in nodes0}
    m1 = {n["node"]: n["mem"] for n in nodes1}
    ok(m1["pve1"] - m0["pve1"] == 2048 << 20 and m1["pve2"] == m0["pve2"], V + "node memory in use rises by the VM's memory on start", (m0, m1))

    st, data, _ = sim.call("POST", Q + "/agent/file-write", {"file": "/etc/profile.d/proxy.sh", "content": "export HTTPS_PROXY=http://10.99.0.1:3128\n"})
    ok(st == 200 and data is None, V + "file-write (encode default)", (st, data))
    r = sim.exec_wait(100, ["cat", "/etc/profile.d/proxy.sh"])
    ok(r.get("exitcode") == 0 and r.get("out-data") == "export HTTPS_PROXY=http://10.99.0.1:3128\n", V + "exec sees what file-write wrote", r)
    ok(not os.path.exists("/etc/profile.d/proxy.sh") or open("/etc/profile.d/proxy.sh").read() != "export HTTPS_PROXY=http://10.99.0.1:3128\n", V + "the host's /etc is untouched")
    r = sim.exec_wait(100, ["cat", "/etc/agent-template-release"])
    ok(r.get("out-data") == "golden-1\n", V + "linked clone sees the template's files", r)
    st, data, _ = sim.call("GET", "/nodes/pve1/qemu/%d/agent/exec-status" % 100, {"pid": r.get("_pid", 0)})
    ok(st == 500 and "Invalid parameter 'pid'" in str(data), V + "the first exited answer frees the pid", (st, data))
    r = sim.exec_wait(100, ["cat", "/etc/resolv.conf"])
    servers = [l for l in r.get("out-data", "").splitlines() if l.split()[:1] == ["nameserver"]]
    ok(r.get("exitcode") == 0 and r.get("out-data", "").startswith("# cloud-init") and servers == [],
       V + "the guest's resolv.conf is its own (the VM sets no nameserver: it names none), never the machine's", r)
    r = sim.exec_wait(100, ["sh", "-c", "cat; echo oops >&2; exit 3"], stdin="line1\nline2\n")
    ok(r.get("exitcode") == 3 and r.get("out-data") == "line1\nline2\n" and r.get("err-data") == "oops\n", V + "exec: stdin from input-data, stdout, stderr, exit code", r)
    blob = bytes(range(256)) * 2
    st, data, _ = sim.call("POST", Q + "/agent/file-write", {"file": "/root/blob.bin", "content": base64.b64encode(blob).decode(), "encode": 0}, as_json=True)
    r = sim.exec_wait(100, ["sh", "-c", "base64 -w0 /root/blob.bin"])
    ok(st == 200 and base64.b64decode(r.get("out-data", "")) == blob, V + "binary file-write with encode=0, read back with base64 through exec", r)
    st, data, _ = sim.call("GET", Q + "/agent/file-read", {"file": "/root/blob.bin"})
    ok(st == 200 and data["content"].encode("latin-1") == blob and data.get("bytes-read") == len(blob) and "truncated" not in data, V + "file-read returns bytes as Latin-1 code points", {k: v for k, v in (data or {}).items() if k != "content"})
    st, data, _ = sim.call("POST", Q + "/agent/file-write", {"file": "/tmp/u.txt", "content": "caf\u00e9"}, as_json=True)
    r = sim.exec_wait(100, ["od", "-An", "-tx1", "/tmp/u.txt"])
    ok(st == 200 and r.get("out-data", "").split() == ["63", "61", "66", "e9"], V + "encode=1 writes each character as one byte (Perl semantics)", r)
    st, reason, _ = sim.call("POST", Q + "/agent/file-write", {"file": "/tmp/w.txt", "content": "\u20ac"}, as_json=True)
    ok(st == 500 and "Wide character" in str(reason), V + "encode=1 with a character above U+00FF fails", (st, reason))
    st, reason, js = sim.call("POST", Q + "/agent/file-write", {"file": "/tmp/big", "content": "a" * 61441}, as_json=True)
    ok(st == 400 and "content" in js.get("errors", {}), V + "file-write content over 61440 refused", js)
    st, reason, js = sim.call("POST", Q + "/agent/exec", {"command": ["cat"], "input-data": "a" * 65537}, as_json=True)
    ok(st == 400 and "input-data" in js.get("errors", {}), V + "input-data over 64 KiB refused", js)
    r = sim.exec_wait(100, ["sh", "-c", "head -c 5000 /dev/zero; head -c 10 /dev/zero >&2"])
    ok(len(r.get("out-data", "")) == 1000 and r.get("out-truncated") == 1 and len(r.get("err-data", "")) == 10 and "err-truncated" not in r, V + "output capped at --agent-output-cap, flagged out-truncated", {k: (len(v) if isinstance(v, str) else v) for k, v in r.items()})
    st, reason, _ = sim.call("POST", Q + "/agent/exec", {"command": ["no-such-program"]}, as_json=True)
    ok(st == 500 and "no-such-program" in str(reason), V + "exec of a missing program: agent error", (st, reason))
    st, reason, _ = sim.call("GET", Q + "/agent/file-read", {"file": "/nonexistent/file"})
    ok(st == 500 and "No such file or directory" in str(reason), V + "file-read of a missing file: agent error", (st, reason))
    if version == 9:
        sim.call("POST", Q + "/agent/file-write", {"file": "/tmp/abc", "content": "abcdefgh"})
        st, data, _ = sim.call("GET", Q + "/agent/file-read", {"file": "/tmp/abc", "offset": 2, "count": 3})
        ok(st == 200 and data["content"] == "cde" and data.get("truncated") == 1, V + "9.1 file-read offset/count, truncated", data)
        st, data, _ = sim.call("GET", Q + "/agent/file-read", {"file": "/tmp/abc", "decode": 0})
        ok(st == 200 and base64.b64decode(data["content"]) == b"abcdefgh", V + "9.1 file-read decode=0 returns base64", data)
    else:
        st, reason, js = sim.call("GET", Q + "/agent/file-read", {"file": "/tmp/abc", "count": 3})
        ok(st == 400 and "count" in js.get("errors", {}), V + "8.4 has no file-read count parameter", js)

    # second VM: its own file system
    t = sim.task("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 101, "name": "sb-101", "pool": "sandboxes"})
    sim.task("POST", "/nodes/pve1/qemu/101/status/start")
    time.sleep(task_ms / 1000.0 + 0.02)
    r = sim.exec_wait(101, ["sh", "-c", "test -e /etc/profile.d/proxy.sh && echo yes || echo no"])
    ok(r.get("out-data") == "no\n", V + "another VM does not see VM 100's files", r)

    # -- firewall -----------------------------------------------------------------------
    st, reason, js = sim.call("POST", Q + "/firewall/ipset", {"name": "1bad"})
    ok(st == 400 and "regex" in js.get("errors", {}).get("name", ""), V + "ipset name against the schema pattern: 400", js)
    st, data, _ = sim.call("POST", Q + "/firewall/ipset", {"name": "ipfilter-net0"})
    st2, data2, _ = sim.call("POST", Q + "/firewall/ipset/ipfilter-net0", {"cidr": "10.99.0.11"})
    st3, data3, _ = sim.call("GET", Q + "/firewall/ipset/ipfilter-net0")
    ok(st == 200 and st2 == 200 and [e["cidr"] for e in data3] == ["10.99.0.11"], V + "ipset created and filled", (st, st2, data3))
    sim.call("POST", Q + "/firewall/rules", {"type": "out", "action": "DROP", "enable": 1})
    sim.call("POST", Q + "/firewall/rules", {"type": "out", "action": "ACCEPT", "dest": "10.99.0.1", "proto": "tcp", "dport": "3128", "iface": "net0", "enable": 1})
    st, rules, _ = sim.call("GET", Q + "/firewall/rules")
    ok(st == 200 and rules[0].get("action") == "ACCEPT" and rules[0]["pos"] == 0 and rules[1]["action"] == "DROP", V + "new firewall rules go to the top", rules)
    st, reason, js = sim.call("POST", Q + "/firewall/rules", {"type": "sideways", "action": "ACCEPT"})
    ok(st == 400 and "type" in js.get("errors", {}), V + "firewall rule type outside the enum refused", js)
    # macros: `macro` is a rule parameter of both schemas; the name is looked
    # up case-insensitively and stored in PVE's spelling, an unknown one and
    # a field that contradicts the macro are refused (verify_rule)
    dns_rule = {"type": "out", "action": "ACCEPT", "macro": "dns", "dest": "10.99.0.53", "iface": "net0", "enable": 1}
    st, _, js = sim.call("POST", Q + "/firewall/rules", dns_rule)
    st2, rules, _ = sim.call("GET", Q + "/firewall/rules")
    ok(st == 200 and rules[0].get("macro") == "DNS" and rules[0].get("dest") == "10.99.0.53" and "proto" not in rules[0], V + "a rule with macro dns is stored as macro DNS", (st, js, rules[:1]))
    st, reason, js = sim.call("POST", Q + "/firewall/rules", dict(dns_rule, macro="NoSuchMacro"))
    ok(st == 400 and "unknown macro 'NoSuchMacro'" in js.get("errors", {}).get("macro", ""), V + "an unknown macro is refused", js)
    st, reason, js = sim.call("POST", Q + "/firewall/rules", dict(dns_rule, proto="tcp"))
    ok(st == 400 and "already define in macro" in js.get("errors", {}).get("proto", ""), V + "macro DNS with proto tcp is refused (the macro sets udp, then tcp)", js)
    st, reason, js = sim.call("POST", Q + "/firewall/rules", dict(dns_rule, proto="udp", dport="5353"))
    ok(st == 400 and "already define in macro" in js.get("errors", {}).get("proto", "") + js.get("errors", {}).get("dport", ""), V + "macro DNS with another port is refused", js)
    # ... and compiled as pve-firewall expands it: udp and tcp 53 to the
    # rule's dest, nothing else
    stub = type("VM", (), {"fw_ipsets": {}, "vmid": 100})()
    got = firewall.compile_rule(stub, dict(dns_rule, macro="DNS"), "out")
    nodnat = "meta mark & 0x%x == 0 " % firewall.DNAT
    ok(got == [nodnat + "ip daddr { 10.99.0.53 } meta l4proto udp th dport { 53 }", nodnat + "ip daddr { 10.99.0.53 } meta l4proto tcp th dport { 53 }"], V + "macro DNS compiles to udp and tcp port 53 to its dest only (and never takes a redirected packet)", got)
    # a redirected packet (the node's nat prerouting) is judged by its
    # original port, as on the firewall bridge of a real node: a rule
    # without dest for tcp 80,443 takes it, one for tcp 22 does not
    got = firewall.compile_rule(stub, {"type": "out", "action": "ACCEPT", "proto": "tcp", "dport": "80,443", "enable": 1}, "out")
    any_ip = "ether type { ip, ip6 } "
    ok(got == [nodnat + any_ip + "meta l4proto tcp th dport { 80, 443 }",
               any_ip + "meta l4proto tcp meta mark & 0x%x == 0x%x" % (firewall.DNAT_PORTS[80], firewall.DNAT_PORTS[80]),
               any_ip + "meta l4proto tcp meta mark & 0x%x == 0x%x" % (firewall.DNAT_PORTS[443], firewall.DNAT_PORTS[443])],
       V + "tcp 80,443 out without dest also takes packets redirected from 80 and 443", got)
    got = firewall.compile_rule(stub, {"type": "out", "action": "ACCEPT", "proto": "tcp", "dport": "22", "enable": 1}, "out")
    ok(got == [nodnat + any_ip + "meta l4proto tcp th dport { 22 }"], V + "tcp 22 out takes no redirected packet", got)
    ok(firewall.compile_rule(stub, dict(dns_rule, macro="DNS"), "in") is None, V + "an out rule is not compiled into the in chain", None)

    # -- snapshots, rollback ---------------------------------------------------------------
    st, conf, _ = sim.call("GET", Q + "/config")
    t = sim.task("POST", Q + "/snapshot", {"snapname": "before", "vmstate": 0})
    ok(t.get("exitstatus") == "OK", V + "snapshot task OK", t)
    sim.call("PUT", Q + "/config", {"description": "owner=mallory", "tags": "changed"}, as_json=True)
    sim.call("POST", Q + "/agent/file-write", {"file": "/root/after.txt", "content": "new"})
    t = sim.task("POST", Q + "/snapshot/before/rollback")
    st, conf2, _ = sim.call("GET", Q + "/config")
    st, cur, _ = sim.call("GET", Q + "/status/current")
    ok(t.get("exitstatus") == "OK" and conf2.get("description") == conf.get("description") and conf2.get("tags") == "alpha;beta;zeta", V + "rollback restores description and tags", conf2)
    ok(cur["status"] == "stopped", V + "rollback stops the running VM", cur)
    t = sim.task("POST", Q + "/snapshot/before/rollback", {"start": 1})
    time.sleep(task_ms / 1000.0 + 0.02)
    r = sim.exec_wait(100, ["sh", "-c", "test -e /root/after.txt && echo yes || echo no; cat /etc/profile.d/proxy.sh"])
    ok(r.get("out-data", "").startswith("no\nexport HTTPS_PROXY"), V + "rollback with start=1: running again, guest files as at the snapshot", r)
    st, snaps, _ = sim.call("GET", Q + "/snapshot")
    ok([s["name"] for s in snaps] == ["before", "current"] and snaps[1].get("parent") == "before", V + "snapshot list with current", snaps)
    st, reason, _ = sim.call("POST", Q + "/snapshot", {"snapname": "before"})
    ok(st == 500 and "already used" in str(reason), V + "duplicate snapshot name refused", (st, reason))
    t = sim.task("DELETE", Q + "/snapshot/before")
    st, snaps, _ = sim.call("GET", Q + "/snapshot")
    ok(t.get("exitstatus") == "OK" and [s["name"] for s in snaps] == ["current"], V + "snapshot deleted", snaps)

    # -- faults -------------------------------------------------------------------------------
    st, _, js, _ = sim.raw("POST", "/_sim/faults", {"method": "GET", "path": "/status/current$", "kind": "http_500", "count": 1}, as_json=True)
    st1, r1, _ = sim.call("GET", Q + "/status/current")
    st2, r2, _ = sim.call("GET", Q + "/status/current")
    ok(st == 200 and st1 == 500 and st2 == 200, V + "fault http_500 fails exactly count calls", (st, st1, r1, st2))
    sim.raw("POST", "/_sim/faults", {"method": "PUT", "path": "/qemu/100/config$", "kind": "lock_timeout"}, as_json=True)
    st, reason, _ = sim.call("PUT", Q + "/config", {"cores": 1})
    ok(st == 500 and reason == "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout", V + "fault lock_timeout", (st, reason))
    sim.raw("POST", "/_sim/faults", {"method": "POST", "path": "/clone$", "kind": "task_fail"}, as_json=True)
    st, upid, _ = sim.call("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 102, "name": "doomed", "pool": "sandboxes"})
    t = sim.wait_task("pve1", upid)
    st, log, _ = sim.call("GET", "/nodes/pve1/tasks/%s/log" % urllib.parse.quote(upid, safe=""))
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    st2 = 102 in state["used_ids"]
    ok(t.get("exitstatus") not in (None, "OK") and log[-1]["t"].startswith("TASK ERROR") and not st2, V + "fault task_fail: task error, log, no VM left", (t, log, st2))
    sim.raw("POST", "/_sim/faults", {"path": "/nextid$", "kind": "drop"}, as_json=True)
    try:
        sim.raw("GET", "/cluster/nextid")
        dropped = False
    except (http.client.RemoteDisconnected, ConnectionError, ssl.SSLError):
        dropped = True
    ok(dropped, V + "fault drop closes the connection without an answer")
    sim.raw("POST", "/_sim/faults", {"method": "POST", "path": "/clone$", "kind": "drop_after"}, as_json=True)
    try:
        sim.raw("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 103, "name": "lost", "pool": "sandboxes"}, as_json=True)
        dropped = False
    except (http.client.RemoteDisconnected, ConnectionError, ssl.SSLError):
        dropped = True
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    made = [v for v in state["vms"] if v["vmid"] == 103]
    ok(dropped and made and made[0]["lock"] == "clone", V + "fault drop_after: the clone is made (locked), its answer lost", (dropped, made[:1]))
    time.sleep(2.1)
    sim.call("GET", "/version")
    _, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    made = [v for v in state["vms"] if v["vmid"] == 103]
    ok(made and not made[0].get("lock"), V + "an unwatched clone task still ends: the lock goes after 2 s", made[:1])
    sim.task("DELETE", "/nodes/pve1/qemu/103", {"purge": 1})
    if version == 8:
        sim.raw("POST", "/_sim/faults", {"path": "/status/stop$", "kind": "slow_task"}, as_json=True)
        st, upid, _ = sim.call("POST", "/nodes/pve1/qemu/101/status/stop")
        time.sleep(0.3)
        st, s1, _ = sim.call("GET", "/nodes/pve1/tasks/%s/status" % urllib.parse.quote(upid, safe=""))
        t0 = time.monotonic()
        t = sim.wait_task("pve1", upid)
        ok(s1["status"] == "running" and t.get("exitstatus") == "OK" and time.monotonic() - t0 >= 1.4, V + "fault slow_task: the task runs 2 s", (s1, t))
    st, _, js, _ = sim.raw("POST", "/_sim/faults", {"path": "x", "kind": "meteor"}, as_json=True)
    ok(st == 400, V + "unknown fault kind refused", js)

    # -- a hostile guest agent (hostile.py) --------------------------------------------------------
    st, _, js, _ = sim.raw("POST", "/_sim/hostile", {"vmid": 100, "call": "exec-status", "kind": "meteor"}, as_json=True)
    ok(st == 400 and "kind for exec-status" in str(js), V + "hostile: an unknown lie is refused, naming the kinds", js)
    sim.raw("POST", "/_sim/hostile", {"vmid": 100, "call": "exec-status", "kind": "wrong_types", "count": 1}, as_json=True)
    st, data, _ = sim.call("GET", Q + "/agent/exec-status", {"pid": 1})
    ok(st == 200 and data == {"exited": "yes", "exitcode": "0", "out-data": 42}, V + "hostile: wrong_types as PVE's loose check would relay it", (st, data))
    st, data, _ = sim.call("GET", Q + "/agent/exec-status", {"pid": 1})
    ok(st == 500 and "Invalid parameter 'pid'" in str(data), V + "hostile: count 1: the next answer is the truth again", (st, data))
    sim.raw("POST", "/_sim/hostile", {"vmid": 100, "call": "exec-status", "kind": "missing_exited"}, as_json=True)
    st, data, _ = sim.call("GET", Q + "/agent/exec-status", {"pid": 1})
    ok(st == 500 and "Result verification failed" in str(data), V + "hostile: a missing exited is PVE's own 500", (st, data))
    st, _, js, _ = sim.raw("GET", "/_sim/hostile")
    ok(st == 200 and [(x["kind"], x["hits"]) for x in js] == [("wrong_types", 1), ("missing_exited", 1)], V + "hostile: GET lists the lies and their hits", js)
    sim.raw("DELETE", "/_sim/hostile")

    # -- delete, calls -----------------------------------------------------------------------------
    st, reason, _ = sim.call("DELETE", Q, {"purge": 1, "destroy-unreferenced-disks": 1})
    ok(st == 500 and reason == "VM 100 is running - destroy failed", V + "delete of a running VM refused", (st, reason))
    st, reason, _ = sim.call("DELETE", "/nodes/pve1/qemu/9000", {"purge": 1}, token=TOKEN)
    ok(st == 403, V + "token may not delete the template", (st, reason))
    sim.raw("DELETE", "/_sim/calls")
    st, nodes1, _ = sim.call("GET", "/cluster/resources", {"type": "node"})
    sim.task("POST", Q + "/status/stop")
    st, nodes2, _ = sim.call("GET", "/cluster/resources", {"type": "node"})
    t = sim.task("DELETE", Q, {"purge": 1, "destroy-unreferenced-disks": 1})
    st, reason, _ = sim.call("GET", Q + "/config")
    st2, res, _ = sim.call("GET", "/cluster/resources", {"type": "vm"})
    ok(t.get("exitstatus") == "OK" and st == 403 and 100 not in [r["vmid"] for r in res], V + "stop then delete removes the VM (its ACL path is gone with its pool membership)", (t, st, reason))
    st, data, _ = sim.call("GET", "/cluster/nextid")
    ok(data == ("100"), V + "nextid reuses the freed id", data)
    m1 = {n["node"]: n["mem"] for n in nodes1}
    m2 = {n["node"]: n["mem"] for n in nodes2}
    ok(m1["pve1"] - m2["pve1"] == 2048 << 20, V + "node memory falls again when the VM stops", (m1, m2))
    st, _, calls, _ = sim.raw("GET", "/_sim/calls", auth=False)
    first = calls[1] if len(calls) > 1 else {}
    ok(st == 200 and calls[0]["path"] == "/cluster/resources" and first.get("method") == "POST" and first.get("path") == "/nodes/pve1/qemu/100/status/stop" and first.get("status") == 200 and calls[2]["path"].startswith("/nodes/pve1/tasks/UPID:pve1:") and any(c["method"] == "DELETE" and c["params"].get("purge") == "1" for c in calls), V + "_sim/calls records method, path, params, status since the last clear", calls[:3])
    st, _, state, _ = sim.raw("GET", "/_sim/state", auth=False)
    ok(st == 200 and [v["vmid"] for v in state["vms"]] == [101, 120, 9000, 9001] and 100 not in state["used_ids"], V + "_sim/state shows the world", [v["vmid"] for v in (state or {}).get("vms", [])])
    st, reason, js, _ = sim.raw("PUT", "/nodes/pve1/qemu/101/config", None)
    ok(st == 400, V + "config update without options refused", js)


def slow_reader_checks(tmp):
    """--idle-timeout bounds a wait for progress, not an exchange: a 16 MiB
    file-read answer (22 MB of base64) to a reader that takes it in slowly,
    for several times the timeout, arrives whole; a connection that sends
    nothing is closed after the timeout."""
    idle = 2.0
    V = "pve9 --idle-timeout %g: " % idle
    sim = Sim(9, ["--idle-timeout", str(idle)], tmp)
    try:
        run_slow_reader(sim, V, idle)
    finally:
        sim.stop()
        ok(sim.proc.returncode == 0, V + "simulator exits 0 on SIGTERM", open(sim.dir + "/sim.log").read()[-2000:])


def tls_connect(sim, rcvbuf=None):
    """A TLS connection to the simulator; rcvbuf (set before connecting)
    turns off the kernel's receive buffer growth, so only what the reader
    takes in makes room for the server's writes."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(120)
    s.connect(("127.0.0.1", sim.port))
    return sim.ctx.wrap_socket(s, server_hostname="127.0.0.1")


def read_answer(tls, piece, pause):
    """One HTTP answer, taken in at most piece bytes at a time with pause
    seconds before each (the pauses alone set a floor on how long it
    takes); returns (head, body), body None when the connection ended
    first."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = tls.recv(piece)
        if not chunk:
            return buf, None
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    body = bytearray(rest)  # appending to bytes would copy it each time
    length = int([l.split(b":", 1)[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
    while len(body) < length:
        time.sleep(pause)
        want = min(len(body) + piece, length)
        while len(body) < want:  # a TLS read returns one record (16 KiB) at most
            chunk = tls.recv(want - len(body))
            if not chunk:
                return head, None
            body += chunk
    return head, bytes(body)


def run_slow_reader(sim, V, idle):
    size = 16 << 20
    r = sim.exec_wait(120, ["sh", "-c", "head -c %d /dev/urandom > /root/big && sha256sum /root/big" % size], node="pve2")
    want = (r.get("out-data") or "")[:64]
    ok(r.get("exitcode") == 0 and len(want) == 64, V + "a 16 MiB file in the guest", r)
    tls = tls_connect(sim, rcvbuf=64 << 10)
    auth = "Authorization: PVEAPIToken=%s=%s\r\n" % (TOKEN, SECRET)
    tls.sendall(("GET /api2/json/nodes/pve2/qemu/120/agent/file-read?file=/root/big&decode=0 HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n").encode())
    # 64 KiB each 20 ms at most: the 22 MB take at least 6.8 s, and the
    # server's last write (the kernel's send buffer takes up to 4 MiB of
    # the end) waits at least 5.5 s for the reader, far past the timeout;
    # yet each 256 KiB slice finds room within 80 ms.
    t0 = time.monotonic()
    head, body = read_answer(tls, 64 << 10, 0.02)
    took = time.monotonic() - t0
    got = ""
    if body is not None:
        try:
            data = base64.b64decode(json.loads(body)["data"]["content"])
            got = hashlib.sha256(data).hexdigest() if len(data) == size else "%d bytes" % len(data)
        except (ValueError, KeyError, TypeError) as e:
            got = "not a file-read answer: %s" % e
    ok(head.startswith(b"HTTP/1.1 200") and got == want and took > 3 * idle, V + "a file-read answer taken in slowly for %.1f s arrives whole (SHA-256 as in the guest)" % took, (head[:200], got, want, len(body or b"")))
    tls.close()
    tls = tls_connect(sim)
    t0 = time.monotonic()
    try:
        closed = tls.recv(1) == b""
    except (ssl.SSLError, OSError) as e:
        closed = "connection reset" in str(e).lower() or isinstance(e, ssl.SSLEOFError)
    took = time.monotonic() - t0
    ok(closed and took >= idle * 0.9, V + "a connection that sends nothing is closed after the idle timeout (%.1f s)" % took, (closed, took))
    tls.close()


def lib_sh_check(tmp):
    """lib.sh: start, exported variables, fingerprint, stop and clean-up."""
    script = r"""
set -u
. "$1/lib.sh"
pve_sim_start 8 "$2" || exit 1
echo "DIR=$PVE_SIM_DIR"; echo "PID=$PVE_SIM_PID"; echo "FP=$PVE_SIM_FINGERPRINT"
echo "VER=$(curl -sS --cacert "$PVE_SIM_CA" -H "Authorization: PVEAPIToken=sandboxctl@pve!ctl=$3" "$PVE_SIM_URL/version")"
echo "SEEN=$(openssl s_client -connect 127.0.0.1:$PVE_SIM_PORT </dev/null 2>/dev/null | openssl x509 -noout -fingerprint -sha256 | sed 's/^.*=//')"
pve_sim_token_file "sandboxctl@pve!ctl=$3" "$4/tok"
echo "MODE=$(stat -c %a "$4/tok")"
pve_sim_stop
"""
    wpath = os.path.join(tmp, "lib-world.json")
    with open(wpath, "w") as f:
        json.dump(world(8), f)
    env = dict(os.environ, DATA_DIR=DATA, TMPDIR=tmp)
    p = subprocess.run(["bash", "-c", script, "lib", HERE, wpath, SECRET, tmp], capture_output=True, text=True, env=env, timeout=60)
    out = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    ok(p.returncode == 0 and '"release": "8.4"' in out.get("VER", ""), "lib.sh: pve_sim_start brings up a simulator reachable with PVE_SIM_CA", p.stdout + p.stderr)
    ok(out.get("FP") and out.get("FP") == out.get("SEEN") and len(out["FP"]) == 95, "lib.sh: PVE_SIM_FINGERPRINT is the served certificate's SHA-256", out)
    ok(out.get("MODE") == "600", "lib.sh: pve_sim_token_file writes mode 0600", out)
    pid = int(out.get("PID", "0") or 0)
    gone = pid > 0
    if pid:
        try:
            os.kill(pid, 0)
            gone = False
        except OSError:
            pass
    ok(gone and out.get("DIR") and not os.path.exists(out["DIR"]), "lib.sh: pve_sim_stop ends the simulator and removes its dir", out)


def cli_checks(tmp):
    """--help and a bad world file."""
    p = subprocess.run([sys.executable, os.path.join(HERE, "pve_sim.py"), "--help"], capture_output=True, text=True)
    ok(p.returncode == 0 and "--world" in p.stdout and "/_sim/faults" in p.stdout and "--agent-output-cap" in p.stdout and "--idle-timeout" in p.stdout, "pve_sim.py --help describes the options and control endpoints", p.stdout + p.stderr)
    bad = os.path.join(tmp, "bad-world.json")
    w = world(8)
    w["vms"][0]["node"] = "pve7"
    with open(bad, "w") as f:
        json.dump(w, f)
    d = tempfile.mkdtemp(dir=tmp)
    p = subprocess.run([sys.executable, os.path.join(HERE, "pve_sim.py"), "--schema", SCHEMAS[8], "--world", bad, "--cert", "/nonexistent", "--key", "/nonexistent", "--state-dir", d], capture_output=True, text=True, timeout=30)
    ok(p.returncode == 2 and "bad-world.json" in p.stderr and "unknown node 'pve7'" in p.stderr, "a world naming an unknown node: exit 2, naming file and cause", p.stderr)
    with open(bad, "w") as f:
        f.write('{"nodes": [')
    p = subprocess.run([sys.executable, os.path.join(HERE, "pve_sim.py"), "--schema", SCHEMAS[8], "--world", bad, "--cert", "/nonexistent", "--key", "/nonexistent", "--state-dir", d], capture_output=True, text=True, timeout=30)
    ok(p.returncode == 2 and "not valid JSON" in p.stderr, "a world that is not JSON: exit 2", p.stderr)
    bad_users = [
        ({"users": [{"userid": "eve@ldap", "password": "x"}]}, "user 'eve@ldap': auth domain 'ldap' does not exist"),
        ({"users": [{"userid": "eve", "password": "x"}]}, "user 'eve': value 'eve' does not look like a valid user name"),
        ({"users": [{"userid": "eve@pve", "totp": "not base32!"}]}, "user 'eve@pve': 'totp' is not a usable base32 secret"),
        ({"users": [{"userid": "eve@pve", "pasword": "x"}]}, "user 'eve@pve': unknown key(s) pasword"),
        ({"groups": [{"groupid": "admins", "members": ["eve@pve"]}]}, "group 'admins': member 'eve@pve' is not a user of the world"),
        ({"users": [{"userid": "eve@pve", "acl": {"pool/x": ["VM.Audit"]}}]}, "user eve@pve: ACL path 'pool/x' must start with '/'"),
    ]
    for extra, want in bad_users:
        w = world(8)
        w.update(extra)
        with open(bad, "w") as f:
            json.dump(w, f)
        p = subprocess.run([sys.executable, os.path.join(HERE, "pve_sim.py"), "--schema", SCHEMAS[8], "--world", bad, "--cert", "/nonexistent", "--key", "/nonexistent", "--state-dir", d], capture_output=True, text=True, timeout=30)
        ok(p.returncode == 2 and want in p.stderr, "a world with a bad user or group: exit 2, %s" % want, p.stderr)


def main():
    for v, path in SCHEMAS.items():
        if not os.path.exists(path):
            print("not ok 1 - schema %s not found (set DATA_DIR)" % path)
            print("1..1")
            return 1
    tmp = tempfile.mkdtemp(prefix="pve-sim-t-")
    try:
        scenario(8, tmp, 0)
        scenario(9, tmp, 150)
        slow_reader_checks(tmp)
        lib_sh_check(tmp)
        cli_checks(tmp)
    except Exception as e:  # a crash is one more failure, with its story
        import traceback

        ok(False, "test script raised %s" % type(e).__name__, traceback.format_exc())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("1..%d" % n_checks)
    return 1 if n_failed else 0


if __name__ == "__main__":
    sys.exit(main())
