"""killops.py - the operations tests/sandboxctl/kill9.t runs and kills,
and what it checks after each kill.

    killops.py next MODEL SEED
        Draws the next operation from what MODEL holds (a JSON file kept
        between calls): create, destroy, extend, access request (some of a
        host access-auto grants at once), approve or deny.  Prints one JSON
        line: {"op", "argv" (sandboxctl's arguments), "delay" (seconds
        before the SIGKILL), "fault" (a slow_answer for the simulator, or
        null: a call of the operation takes effect and its answer waits, so
        that the kill lands between two of its steps)}.

    killops.py record MODEL OP_JSON RC OUT
        What the operation answered (exit status RC, stdout in OUT): exit 0
        is acknowledged and goes into MODEL as fact; anything else (killed)
        marks what it touched as unknown until the next check looks.

    killops.py check MODEL STATE_DIR SIM_STATE SIM_CALLS EGD1 EGD2
        After doctor: the pool, both egressd's bindings and state-dir are
        whole and consistent (every sandbox VM has a valid description and
        the binding it says in both egressd, its firewall on and its guest
        set up (every proxy file written since its clone, as SIM_CALLS, the
        simulator's record of the calls, says), every binding has its VM, no
        reservation, no request half-approved, no temporary file, the
        state files parse), and what was acknowledged is there (sandboxes,
        their expiry, requests and their grants).  Prints "ok ..." or each
        problem; resolves the unknowns in MODEL from what it found; exit 1
        on a problem.

    killops.py tally COUNTS DOCTOR_JSON
        Adds the repairs of one doctor answer to COUNTS (JSON {kind: n});
        prints how many it made.
"""
import json
import os
import random
import sys

POOL = "sandboxes"
MAX_SANDBOXES = 8
HOSTS = ["h%d.test:443" % i for i in range(6)]
AUTO_HOST = "auto.test:443"
# What create writes into every guest, the resolver last: a sandbox
# without them is one whose create stopped half-way.
GUEST_FILES = ["/etc/profile.d/sandbox-proxy.sh", "/etc/apt/apt.conf.d/95sandbox-proxy", "/etc/pip.conf",
               "/etc/gitconfig", "/etc/npmrc", "/etc/resolv.conf"]
# The calls of each operation a slow answer may hold: the kill then comes
# after the call took effect and before the next step.
DANGEROUS = {
    "create": [("POST", "/clone$"), ("PUT", "/qemu/[0-9]+/config$"), ("PUT", "/firewall/options$"),
               ("POST", "/firewall/rules$"), ("POST", "/status/start$"), ("POST", "/agent/file-write$"),
               ("GET", "/firewall/ipset/ipfilter-net0$")],
    "destroy": [("POST", "/status/stop$"), ("DELETE", "/qemu/[0-9]+$"), ("GET", "/qemu/[0-9]+/status/current$")],
    "extend": [("PUT", "/qemu/[0-9]+/config$")],
    "approve": [("PUT", "/qemu/[0-9]+/config$")],
    "request": [("PUT", "/qemu/[0-9]+/config$"), ("GET", "/qemu/[0-9]+/config$")],
}


def load(path):
    try:
        return json.load(open(path))
    except FileNotFoundError:
        return {"seq": 0, "sandboxes": {}, "requests": {}, "time": {}, "pending_touch": {}}


def save(path, model):
    tmp = path + ".new"
    json.dump(model, open(tmp, "w"), indent=1, sort_keys=True)
    os.replace(tmp, path)


def alive(model):
    return sorted(n for n, s in model["sandboxes"].items() if s["state"] == "alive")


def draw(model, rng):
    live = alive(model)
    pending = sorted(i for i, r in model["requests"].items() if r["state"] == "pending" and r["name"] in live)
    choices = [("create", 3 if len(live) < MAX_SANDBOXES else 0)]
    if live:
        choices += [("destroy", 2 if len(live) > 2 else 1), ("extend", 2), ("request", 3)]
    if pending:
        choices += [("approve", 3), ("deny", 1)]
    total = sum(w for _, w in choices)
    x = rng.uniform(0, total)
    for kind, w in choices:
        x -= w
        if x <= 0:
            break
    if kind == "create":
        model["seq"] += 1
        name = "k%d" % model["seq"]
        return {"op": "create", "name": name,
                "argv": ["--json", "create", "--name", name, "--size", "tiny", "--owner", "kill9", "--policy", "p"]}
    if kind in ("destroy", "extend", "request"):
        name = rng.choice(live)
        if kind == "destroy":
            return {"op": kind, "name": name, "argv": ["--json", "destroy", name]}
        if kind == "extend":
            return {"op": kind, "name": name, "argv": ["--json", "extend", name, "%dm" % rng.randrange(1, 30)]}
        host = AUTO_HOST if rng.random() < 0.3 else rng.choice(HOSTS)
        return {"op": kind, "name": name, "host": host,
                "argv": ["--json", "access", "request", name, host, "--whole-host", "--why", "kill9", "--for", "1h"]}
    rid = rng.choice(pending)
    return {"op": kind, "id": rid, "name": model["requests"][rid]["name"],
            "argv": ["--json", "access", kind, rid]}


def cmd_next(model_file, seed):
    rng = random.Random(int(seed))
    model = load(model_file)
    op = draw(model, rng)
    # The delay: up to a little past how long this operation took when it
    # ran to its end (measured), so that most kills land inside it.
    took = model["time"].get(op["op"], 0.5)
    op["delay"] = round(rng.uniform(0.0, took * 0.7), 3)
    op["fault"] = None
    calls = DANGEROUS.get(op["op"] if op["op"] != "request" or op.get("host") == AUTO_HOST else "", [])
    if calls and rng.random() < 0.5:
        method, path = rng.choice(calls)
        ms = 1000
        op["fault"] = {"method": method, "path": path, "kind": "slow_answer", "count": 1, "ms": ms}
        op["delay"] = round(rng.uniform(0.0, took * 0.9 + ms / 1000.0), 3)
    save(model_file, model)
    print(json.dumps(op))


def cmd_record(model_file, op_json, rc, out_file, seconds):
    model = load(model_file)
    op = json.loads(op_json)
    rc = int(rc)
    try:
        out = json.load(open(out_file)) if rc == 0 else None
    except ValueError:
        out = None
        rc = 99  # an exit 0 without its answer is not an acknowledgement
    kind = op["op"]
    if rc == 0 and op.get("fault") is None:
        old = model["time"].get(kind)
        model["time"][kind] = float(seconds) if old is None else 0.7 * old + 0.3 * float(seconds)
    sbs, reqs = model["sandboxes"], model["requests"]
    if kind == "create":
        if rc == 0:
            sbs[op["name"]] = {"state": "alive", "vmid": out["vmid"], "expires": out["expires"]}
        else:
            sbs[op["name"]] = {"state": "maybe", "vmid": None, "expires": None}
    elif kind == "destroy":
        sbs[op["name"]]["state"] = "gone" if rc == 0 else "maybe"
    elif kind == "extend":
        if rc == 0:
            sbs[op["name"]]["expires"] = out["expires"]
    elif kind == "request":
        if rc == 0:
            reqs[out["id"]] = {"name": op["name"], "host": out["host"], "state": out["status"],
                               "until": out.get("until")}
        else:
            model.setdefault("unknown_requests", []).append([op["name"], op["host"]])
    elif kind in ("approve", "deny"):
        r = reqs[op["id"]]
        if rc == 0:
            r["state"] = out["status"]
            r["until"] = out.get("until")
        else:
            r["state"] = "maybe"
    model["ops"] = model.get("ops", 0) + 1
    model["acked"] = model.get("acked", 0) + (rc == 0)
    save(model_file, model)
    print("acknowledged" if rc == 0 else "not acknowledged (exit %d)" % rc)


def meta_of(desc):
    """The metadata block of a description as {key: value}, or None when
    it is not a whole one."""
    lines = (desc or "").split("\n")
    if "sandboxctl-sandbox v1" not in lines:
        return None
    m = {}
    for line in lines[lines.index("sandboxctl-sandbox v1") + 1:]:
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if not sep or key in m:
            return None
        m[key] = value.strip()
    need = ("owner", "created", "expires", "policy", "address")
    return m if all(k in m for k in need) else None


def grants_of(m):
    out = []
    for g in m.get("grants", "").split():
        host, _, until = g.rpartition("@")
        out.append((host, until))
    return out


def guest_writes(calls):
    """{VMID: the guest files Proxmox wrote (file-write answered 200) into
    the VM of that id since its last clone}: what its create did, as the
    simulator saw the calls."""
    written = {}
    for c in calls:
        if c["status"] != 200:
            continue
        p = c["params"]
        if c["method"] == "POST" and c["path"].endswith("/clone") and "newid" in p:
            written[int(p["newid"])] = set()
            continue
        parts = c["path"].split("/")
        if c["method"] == "POST" and c["path"].endswith("/agent/file-write") and len(parts) > 4:
            written.setdefault(int(parts[4]), set()).add(p.get("file"))
    return written


def want_binding(vmid, name, m):
    allow = m.get("allow", "").split() + ["%s until %s" % g for g in grants_of(m)]
    return {"id": str(vmid), "name": name, "owner": m["owner"], "addresses": [m["address"]],
            "policy": m["policy"], "allow": allow, "expires": m["expires"]}


def cmd_check(model_file, state_dir, sim_file, calls_file, egd1_file, egd2_file):
    model = load(model_file)
    sim = json.load(open(sim_file))
    egds = [json.load(open(egd1_file)), json.load(open(egd2_file))]
    problems = []
    # state-dir: every file parses, nothing left over
    leftovers = sorted(f for f in os.listdir(state_dir) if f.endswith(".tmp") or f.endswith(".new"))
    if leftovers:
        problems.append("state-dir holds temporary files after doctor: %s" % leftovers)
    try:
        res = json.load(open(os.path.join(state_dir, "reservations.json")))
        if res != []:
            problems.append("reservations left after doctor: %s" % res)
    except FileNotFoundError:
        pass
    except ValueError as e:
        problems.append("reservations.json does not parse: %s" % e)
    try:
        store = json.load(open(os.path.join(state_dir, "access.json")))
    except FileNotFoundError:
        store = []
    except ValueError as e:
        problems.append("access.json does not parse: %s" % e)
        store = []
    by_id = {r.get("id"): r for r in store if isinstance(r, dict)}
    for r in by_id.values():
        if "granting" in r:
            problems.append("access request %s is still half-approved after doctor" % r["id"])
    # the pool against both egressd
    vms = {v["vmid"]: v for v in sim["vms"] if v["pool"] == POOL}
    written = guest_writes(json.load(open(calls_file)))
    names = {}
    for vmid, v in vms.items():
        m = meta_of(v["config"].get("description"))
        if m is None:
            problems.append("VM %d (%s) has no whole description" % (vmid, v["name"]))
            continue
        names[v["name"]] = (vmid, m)
        fw = v["firewall"]["options"]
        if str(fw.get("enable")) != "1" or str(fw.get("ipfilter")) != "1":
            problems.append("sandbox %s (VM %d) is not walled in: firewall options %s" % (v["name"], vmid, fw))
        missing = [f for f in GUEST_FILES if f not in written.get(vmid, set())]
        if missing:
            problems.append("sandbox %s (VM %d) lacks its guest setup (no file-write of %s since its clone)" % (
                v["name"], vmid, missing))
        want = want_binding(vmid, v["name"], m)
        for n, egd in enumerate(egds, 1):
            held = {b["id"]: b for b in egd}.get(str(vmid))
            if held is None:
                problems.append("sandbox %s (VM %d) has no binding in egressd %d" % (v["name"], vmid, n))
            elif any(held.get(k) != x for k, x in want.items()):
                problems.append("sandbox %s (VM %d): egressd %d holds %s, its description says %s" % (
                    v["name"], vmid, n, {k: held.get(k) for k in want}, want))
    for n, egd in enumerate(egds, 1):
        for b in egd:
            if not b["id"].isdigit() or int(b["id"]) not in vms:
                problems.append("egressd %d holds binding %s (%s) whose VM is gone" % (n, b["id"], b.get("name")))
    # what was acknowledged
    for name, sb in sorted(model["sandboxes"].items()):
        here = names.get(name)
        if sb["state"] == "alive":
            if here is None:
                problems.append("sandbox %s was acknowledged and is gone" % name)
            elif sb["expires"] and here[1]["expires"] < sb["expires"]:
                problems.append("sandbox %s expires %s, acknowledged %s" % (name, here[1]["expires"], sb["expires"]))
        elif sb["state"] == "gone" and here is not None:
            problems.append("sandbox %s was acknowledged destroyed and is there (VM %d)" % (name, here[0]))
        elif sb["state"] == "maybe":
            sb["state"] = "alive" if here else "gone"
            if here:
                sb["vmid"], sb["expires"] = here[0], here[1]["expires"]
    for rid, r in sorted(model["requests"].items()):
        held = by_id.get(rid)
        if held is None:
            problems.append("access request %s was acknowledged and is not in access.json" % rid)
            continue
        if r["state"] == "maybe":
            r["state"], r["until"] = held["status"], held.get("until")
        elif held["status"] != r["state"]:
            problems.append("access request %s is %s, acknowledged %s" % (rid, held["status"], r["state"]))
        if r["state"] == "approved" and r["name"] in names and model["sandboxes"][r["name"]]["state"] == "alive":
            got = [u for h, u in grants_of(names[r["name"]][1]) if h == r["host"]]
            if not got or max(got) < r["until"]:
                problems.append("access request %s was approved until %s; %s's description holds %s" % (
                    rid, r["until"], r["name"], got or "no grant of " + r["host"]))
    for name, host in model.pop("unknown_requests", []):
        for rid, held in by_id.items():
            if held.get("name") == name and held.get("host") == host and rid not in model["requests"]:
                model["requests"][rid] = {"name": name, "host": host, "state": held["status"],
                                          "until": held.get("until")}
    save(model_file, model)
    if problems:
        print("MISMATCH:\n  " + "\n  ".join(problems))
        return 1
    print("ok: %d sandboxes, %d bindings in each egressd, %d requests" % (len(vms), len(egds[0]), len(by_id)))
    return 0


def cmd_tally(counts_file, doctor_file):
    try:
        counts = json.load(open(counts_file))
    except FileNotFoundError:
        counts = {}
    try:
        d = json.load(open(doctor_file))
    except ValueError:
        print(-1)
        return 1
    for r in d.get("repairs", []):
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    json.dump(counts, open(counts_file, "w"), sort_keys=True)
    print(len(d.get("repairs", [])))
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "next":
        cmd_next(a[1], a[2])
    elif a[0] == "record":
        cmd_record(*a[1:6])
    elif a[0] == "check":
        sys.exit(cmd_check(*a[1:7]))
    elif a[0] == "tally":
        sys.exit(cmd_tally(a[1], a[2]))
