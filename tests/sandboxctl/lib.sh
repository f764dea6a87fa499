# tests/sandboxctl/lib.sh - shared set-up of sandboxctl's integration scripts.
#
# Source from bash after setting nothing; it needs BUILD_DIR, SHARED_DIR, TOP.
#
#   sbx_start VERSION [WORLD_JSON] [pve_sim options...]
#       a temp dir ($T), the Proxmox simulator, two egressd admin stand-ins
#       (tests/sandboxctl/egress_recorder.py: one on a unix socket, one on
#       TCP), a token file and $CONF; the EXIT trap set by sbx_start stops
#       everything and removes $T.
#   sbx ARGS...          run sandboxctl -c $CONF ARGS...
#   sbx_world [PRIV_TO_DROP]   the default world (two nodes, a template on each)
#   sim_state PYEXPR     evaluate PYEXPR with `s` = GET /_sim/state
#   rec_state N PYEXPR   evaluate PYEXPR with `r` = recorder N's state (1 or 2)
#   ok COND_STATUS TEXT  one TAP line; `check TEXT CMD...` runs CMD for it
#   nothing_left V WHAT  the checks that a failed create left nothing behind

set -u
: "${BUILD_DIR:?BUILD_DIR is not set}" "${SHARED_DIR:?SHARED_DIR is not set}" "${TOP:?TOP is not set}"
SBX_BIN=$BUILD_DIR/sandbox-orchestrator/sandboxctl
SBX_TOKEN_ID='sandboxctl@pve!ctl'
SBX_SECRET=5f0c7a2e-1111-4222-8333-944455556666
. "$TOP/tests/pve-sim/lib.sh"

tap_n=0
tap_failed=0
ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        tap_failed=$((tap_failed + 1))
        echo "not ok $tap_n - $2"
    fi
}
check() {
    local what=$1
    shift
    "$@" >/dev/null 2>&1
    ok $? "$what"
}
diag() { printf '# %s\n' "$*"; }

# The privileges the token needs on the pool, for PVE VERSION.
sbx_pool_privs() {
    local agent=VM.Monitor
    [ "$1" = 9 ] && agent=VM.GuestAgent.Unrestricted
    echo "VM.Allocate VM.Audit VM.Config.CPU VM.Config.Memory VM.Config.Network VM.Config.Cloudinit VM.Config.Options VM.PowerMgmt VM.Snapshot VM.Snapshot.Rollback Pool.Audit $agent"
}

sbx_world() {
    local version=$1 drop=${2:-}
    python3 - "$version" "$drop" "$(sbx_pool_privs "$version")" <<'EOF'
import json, sys
version, drop, privs = sys.argv[1], sys.argv[2], sys.argv[3].split()
privs = [p for p in privs if p != drop]
tpl_cfg = {"net0": "virtio=BC:24:11:00:23:28,bridge=vmbr99,firewall=1", "memory": "2048"}
world = {
    "nodes": [{"name": "pve1", "maxmem": 68719476736, "mem": 8589934592, "maxcpu": 16},
              {"name": "pve2", "maxmem": 68719476736, "mem": 4294967296, "maxcpu": 16}],
    "storage": "local-lvm", "bridge": "vmbr99", "pool": "sandboxes",
    "templates": [{"node": "pve1", "vmid": 9000, "name": "agent-template", "config": tpl_cfg},
                  {"node": "pve2", "vmid": 9001, "name": "agent-template", "config": tpl_cfg}],
    "cluster_firewall": True,
    "tokens": [{"id": "sandboxctl@pve!ctl", "secret": "5f0c7a2e-1111-4222-8333-944455556666",
                "privsep": True,
                "acl": {"/pool/sandboxes": privs,
                        "/vms/9000": ["VM.Clone", "VM.Audit"], "/vms/9001": ["VM.Clone", "VM.Audit"],
                        "/storage/local-lvm": ["Datastore.AllocateSpace"],
                        "/sdn/zones/localnetwork/vmbr99": ["SDN.Use"],
                        "/nodes": ["Sys.Audit"]}}],
}
print(json.dumps(world))
EOF
}

# sbx_recorder N ARGS...: start egress recorder N with ARGS; waits for it.
sbx_recorder() {
    local n=$1 i
    shift
    python3 "$TOP/tests/sandboxctl/egress_recorder.py" --state "$T/rec$n.json" \
        --port-file "$T/rec$n.port" "$@" >"$T/rec$n.log" 2>&1 &
    eval "SBX_REC${n}_PID=$!"
    for ((i = 0; i < 100; i++)); do
        [ -s "$T/rec$n.port" ] && return 0
        sleep 0.05
    done
    echo "# egress recorder $n did not start" >&2
    cat "$T/rec$n.log" >&2
    return 1
}

sbx_stop_all() {
    local p
    for p in "${SBX_REC1_PID:-}" "${SBX_REC2_PID:-}"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    SBX_REC1_PID= SBX_REC2_PID=
    pve_sim_stop
    [ -n "${T:-}" ] && rm -rf "$T"
}

# sbx_config: write $CONF (extra lines from stdin are appended).
sbx_write_config() {
    {
        cat <<EOF
# sandboxctl test config
pve-url $PVE_SIM_BASE
pve-token-file $T/token
pve-ca-file $PVE_SIM_CA
node auto
template pve1:9000
template pve2:9001
pool sandboxes
storage local-lvm
bridge vmbr99
ip-pool 10.99.0.10-10.99.0.250/24
gateway 10.99.0.1
proxy 10.99.0.1:3128
egressd-admin unix:$T/egressd.sock
egressd-admin http://127.0.0.1:$(cat "$T/rec2.port")
state-dir $T/state
agent-timeout 60s
task-timeout 60s
EOF
        cat
    } >"$CONF"
}

sbx_start() {
    local version=$1 world=${2:-}
    shift
    [ $# -gt 0 ] && shift
    T=$(mktemp -d "${TMPDIR:-/tmp}/sbx-test.XXXXXX")
    CONF=$T/sandboxctl.conf
    trap sbx_stop_all EXIT
    [ -n "$world" ] || world=$(sbx_world "$version")
    pve_sim_start "$version" "$world" "$@" || return 1
    pve_sim_token_file "$SBX_TOKEN_ID=$SBX_SECRET" "$T/token"
    sbx_recorder 1 --unix "$T/egressd.sock" || return 1
    sbx_recorder 2 --listen 127.0.0.1:0 || return 1
    sbx_write_config </dev/null
}

sbx() { "$SBX_BIN" -c "$CONF" "$@"; }

sim_state() {
    pve_sim_ctl GET state | python3 -c 'import json,sys; s=json.load(sys.stdin); *pre, last = sys.argv[1].split("; "); exec("\n".join(pre)); r=eval(last); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"
}

rec_state() {
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); *pre, last = sys.argv[2].split("; "); exec("\n".join(pre)); v=eval(last); print(v if not isinstance(v,(dict,list)) else json.dumps(v))' "$T/rec$1.json" "$2"
}

# json_get JSON PYEXPR: evaluate PYEXPR with `j` = the parsed JSON.
json_get() {
    python3 -c 'import json,sys; j=json.loads(sys.argv[1]); *pre, last = sys.argv[2].split("; "); exec("\n".join(pre)); v=eval(last); print(v if not isinstance(v,(dict,list)) else json.dumps(v))' "$1" "$2"
}

# nothing_left V WHAT: the checks that a failed create made nothing
# (no VM but the templates, no reservation, no binding).
nothing_left() {
    local v=$1 what=$2
    check "PVE $v: $what: no VM left in Proxmox" \
        test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] not in (9000, 9001)]")" = "[]"
    check "PVE $v: $what: no reservation left" test "$(tr -d ' \n' <"$T/state/reservations.json")" = "[]"
    check "PVE $v: $what: no binding left in either egressd" \
        test "$(rec_state 1 'len(r["bindings"])')$(rec_state 2 'len(r["bindings"])')" = 00
}

tap_end() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}
