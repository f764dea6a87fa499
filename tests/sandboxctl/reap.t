#!/usr/bin/env bash
# tests/sandboxctl/reap.t - reap destroys exactly the sandboxes past their end
# of life, also when two reapers run at once; on PVE 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# The default world plus pool VMs: three expired, one alive, one not ours,
# one whose metadata block was tampered with.
world_for() {
    sbx_world "$1" | python3 -c '
import json, sys
w = json.load(sys.stdin)
def desc(owner, exp, addr):
    return ("Sandbox managed by sandboxctl\n\nsandboxctl-sandbox v1\nowner: %s\n"
            "created: 2020-01-01T00:00:00Z\nexpires: %s\npolicy: balanced\naddress: %s\nallow:" % (owner, exp, addr))
w["vms"] = [
    {"vmid": 201, "node": "pve1", "name": "old1", "pool": "sandboxes", "status": "running",
     "description": desc("alice", "2020-01-01T04:00:00Z", "10.99.0.21")},
    {"vmid": 202, "node": "pve2", "name": "old2", "pool": "sandboxes",
     "description": desc("bob", "2021-06-01T00:00:00Z", "10.99.0.22")},
    {"vmid": 203, "node": "pve2", "name": "old3", "pool": "sandboxes", "status": "running",
     "description": desc("carol", "2024-01-01T00:00:00Z", "10.99.0.23")},
    {"vmid": 204, "node": "pve1", "name": "young", "pool": "sandboxes", "status": "running",
     "description": desc("dave", "2099-01-01T00:00:00Z", "10.99.0.24")},
    {"vmid": 205, "node": "pve1", "name": "foreign", "pool": "sandboxes", "description": "an admin VM"},
    {"vmid": 206, "node": "pve1", "name": "tampered", "pool": "sandboxes",
     "description": desc("eve", "2020-01-01T04:00:00Z", "10.99.0.26") + "\nexpires: 2099-01-01T00:00:00Z"},
]
print(json.dumps(w))'
}

run_version() {
    local v=$1 a b rca rcb out
    sbx_start "$v" "$(world_for "$v")" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    check "PVE $v: sync binds the readable sandboxes" sbx sync
    check "PVE $v: both egressd hold 201-204" \
        test "$(egressd_state 1 'sorted(b)')$(egressd_state 2 'sorted(b)')" = '["201", "202", "203", "204"]["201", "202", "203", "204"]'
    out=$(sbx list)
    check "PVE $v: list shows the tampered block as a problem" grep -q "tampered .*given twice" <<<"$out"

    pve_sim_ctl DELETE calls >/dev/null
    sbx --json reap >"$T/a.json" 2>"$T/a.err" &
    a=$!
    sbx --json reap >"$T/b.json" 2>"$T/b.err" &
    b=$!
    wait $a
    rca=$?
    wait $b
    rcb=$?
    # Both report the tampered VM (exit 1, naming it); neither fails otherwise.
    ok "$([ $rca -eq 1 ] && [ $rcb -eq 1 ] && grep -q 'VM 206 (tampered): kept' "$T/a.json" && grep -q 'VM 206' "$T/b.json"; echo $?)" \
        "PVE $v: both reapers finish, each naming only the tampered VM as a problem"
    check "PVE $v: no other error in either reaper" \
        test "$(python3 -c 'import json,sys; print(sum(len(json.load(open(f))["errors"]) for f in sys.argv[1:]))' "$T/a.json" "$T/b.json")" = 2
    check "PVE $v: together they reaped 201, 202, 203, each once" \
        test "$(python3 -c 'import json,sys; print(sorted(x["vmid"] for f in sys.argv[1:] for x in json.load(open(f))["reaped"]))' "$T/a.json" "$T/b.json")" = "[201, 202, 203]"
    check "PVE $v: Proxmox got one DELETE per expired VM" \
        test "$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(sorted(c["path"] for c in json.load(sys.stdin) if c["method"] == "DELETE"))')" = \
        "['/nodes/pve1/qemu/201', '/nodes/pve2/qemu/202', '/nodes/pve2/qemu/203']"
    check "PVE $v: the young, the foreign and the tampered VM remain" \
        test "$(sim_state "[x['vmid'] for x in s['vms'] if x['pool'] == 'sandboxes']")" = "[204, 205, 206]"
    check "PVE $v: running ones were stopped first" \
        test "$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(sorted(c["path"] for c in json.load(sys.stdin) if c["path"].endswith("/status/stop")))')" = \
        "['/nodes/pve1/qemu/201/status/stop', '/nodes/pve2/qemu/203/status/stop']"
    check "PVE $v: both egressd keep only the young one's binding" \
        test "$(egressd_state 1 'sorted(b)')$(egressd_state 2 'sorted(b)')" = '["204"]["204"]'
    out=$(sbx --json reap)
    check "PVE $v: a third reap finds nothing to do" test "$(json_get "$out" 'len(j["reaped"])')" = 0
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
