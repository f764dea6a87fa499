# tests/sandboxctl/lib.sh - shared set-up of sandboxctl's integration scripts.
#
# Source from bash after setting nothing; it needs BUILD_DIR and TOP (the
# Proxmox API schemas come from DATA_DIR, default $TOP/tests/data).
#
#   sbx_start VERSION [WORLD_JSON] [pve_sim options...]
#       a temp dir ($T), the Proxmox simulator, two real egressd
#       ($BUILD_DIR/proxy/egressd, each in $T/egressdN/ with its config,
#       presets, hosts file, state dir, access log and diagnostics in
#       egressd.err): egressd 1 with its admin API on a unix socket, egressd 2
#       on TCP with a bearer token; a Proxmox token file and $CONF.  The EXIT
#       trap set by sbx_start stops everything and removes $T.
#   sbx ARGS...          run sandboxctl -c $CONF ARGS...
#   sbx_write_config     rewrite $CONF, with stdin's lines appended
#   sbx_world [PRIV_TO_DROP]   the default world (two nodes, a template on each)
#   sim_state PYEXPR     evaluate PYEXPR with `s` = GET /_sim/state
#   egressd_state N PYEXPR   evaluate PYEXPR with `b` = egressd N's bindings
#                        (GET /v1/sandboxes, a dict by id)
#   egressd_api N METHOD PATH [JSON]   one admin call to egressd N: EGD_CODE,
#                        EGD_BODY; 0 on a 2xx
#   egressd_stop N / egressd_start N   stop (SIGTERM; its exit status) and
#                        start egressd N again on the same config and ports
#   egressd_clean N      egressd N's diagnostics hold no sanitizer report
#   sbx_stop_all [quiet] stop egressd (one TAP line each: exits 0, no
#                        sanitizer report; none with quiet, as in an EXIT
#                        trap) and the simulator; remove $T
#   sbx_origins OUT NAME=ADDR...  HTTP origins on port 8000 of each ADDR
#                        (tests/sandboxctl/origin.py, "origin NAME" as the
#                        body), in the background: SBX_ORIGIN_PID; its
#                        output in OUT; 0 once they listen (5 s at most)
#   ok COND_STATUS TEXT  one TAP line; `check TEXT CMD...` runs CMD for it
#   nothing_left V WHAT  the checks that a failed create left nothing behind
#
# Both egressd have the presets of deploy/policies (balanced, locked, open)
# and `p` (a.test:8000), default-policy locked, the hosts file's a.test
# (127.0.0.16), b.test (.17) and c.test (.18), no resolver, an explicit proxy on a
# free loopback port ($SBX_EGD1_PROXY, $SBX_EGD2_PROXY).  Their admin APIs
# are $SBX_EGD1_ADMIN (unix:PATH) and $SBX_EGD2_ADMIN (http://127.0.0.1:PORT,
# token $SBX_EGD_TOKEN), the two `egressd-admin` lines of $CONF.

set -u
: "${BUILD_DIR:?BUILD_DIR is not set}" "${TOP:?TOP is not set}"
SBX_BIN=$BUILD_DIR/sandbox-orchestrator/sandboxctl
EGD_BIN=$BUILD_DIR/proxy/egressd
SBX_TOKEN_ID='sandboxctl@pve!ctl'
SBX_SECRET=5f0c7a2e-1111-4222-8333-944455556666
SBX_EGD1_PID= SBX_EGD2_PID=
. "$TOP/tests/pve-sim/lib.sh"

. "$TOP/tests/tap.sh"

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

# sbx_ports N: N distinct free TCP ports of 127.0.0.1, one a line (bound
# together, then released for the daemon that binds them next).
sbx_ports() {
    python3 -S -c '
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in ss))' "$1"
}

# sbx_egressd_setup N: $T/egressdN/ with its config, presets, hosts file and
# state dir, on free ports.
sbx_egressd_setup() {
    local n=$1 d=$T/egressd$1 ports admin
    mkdir -p "$d/policies" "$d/state"
    cp "$TOP"/deploy/policies/*.allow "$d/policies/"
    printf '%s\n' '# p: the preset most of the tests name; one origin of the test world.' \
        'a.test:8000' >"$d/policies/p.allow"
    printf '127.0.0.16 a.test\n127.0.0.17 b.test\n127.0.0.18 c.test\n' >"$d/hosts"
    mapfile -t ports < <(sbx_ports 2)
    eval "SBX_EGD${n}_PROXY=127.0.0.1:${ports[0]}"
    if [ "$n" = 1 ]; then
        admin="admin unix:$d/admin.sock"
        SBX_EGD1_ADMIN=unix:$d/admin.sock
    else
        printf '%s\n' "$SBX_EGD_TOKEN" >"$d/admin-token"
        chmod 600 "$d/admin-token"
        admin="admin 127.0.0.1:${ports[1]}
admin-token-file admin-token"
        eval "SBX_EGD${n}_ADMIN=http://127.0.0.1:${ports[1]}"
    fi
    cat >"$d/egressd.conf" <<EOF
# egressd $n of sandboxctl's tests: names from the hosts file only, no resolver
listen 127.0.0.1:${ports[0]}
$admin
workers 1
hosts-file hosts
policy-dir policies
default-policy locked
state-dir state
access-log access.log
allow-range 127.0.0.16/28
timeout-drain 2s
EOF
}

# egressd_launch N: start egressd N in the background (SBX_EGDN_PID).
egressd_launch() {
    "$EGD_BIN" -c "$T/egressd$1/egressd.conf" 2>>"$T/egressd$1/egressd.err" &
    eval "SBX_EGD$1_PID=$!"
}

# egressd_ready N: wait (20 s: the sanitizer build is slow to start) until
# egressd N's admin API answers GET /v1/status.
egressd_ready() {
    local n=$1 i pid
    eval "pid=\${SBX_EGD${n}_PID:-}"
    for ((i = 0; i < 400; i++)); do
        egressd_api "$n" GET /v1/status && return 0
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
            [ -n "$pid" ] && wait "$pid"
            echo "# egressd $n exited with status $? before it was ready:" >&2
            sed 's/^/#   /' "$T/egressd$n/egressd.err" >&2
            eval "SBX_EGD${n}_PID="
            return 1
        fi
        sleep 0.05
    done
    echo "# egressd $n did not answer on its admin API within 20 s:" >&2
    sed 's/^/#   /' "$T/egressd$n/egressd.err" >&2
    egressd_stop "$n"
    return 1
}

egressd_start() {
    if [ ! -x "$EGD_BIN" ]; then
        echo "# $EGD_BIN is not built" >&2
        return 1
    fi
    egressd_launch "$1"
    egressd_ready "$1"
}

# egressd_stop N: SIGTERM, wait (15 s, then SIGKILL); returns its exit status.
egressd_stop() {
    local n=$1 pid i rc
    eval "pid=\${SBX_EGD${n}_PID:-}"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    wait "$pid"
    rc=$?
    eval "SBX_EGD${n}_PID="
    return $rc
}

egressd_clean() {
    ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)' \
        "$T/egressd$1/egressd.err" 2>/dev/null
}

egressd_api() {
    local n=$1 method=$2 path=$3 target args
    eval "target=\${SBX_EGD${n}_ADMIN:-}"
    args=(-q -sS --noproxy '*' -m 10 -X "$method" -o "$T/egressd$n/api.body" -w '%{http_code}')
    [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    case $target in
        unix:*) args+=(--unix-socket "${target#unix:}" "http://egressd$path") ;;
        *) args+=(-H "Authorization: Bearer $SBX_EGD_TOKEN" "$target$path") ;;
    esac
    rm -f "$T/egressd$n/api.body"
    EGD_CODE=$(curl "${args[@]}" 2>/dev/null) || EGD_CODE=000
    EGD_BODY=$(cat "$T/egressd$n/api.body" 2>/dev/null)
    case $EGD_CODE in 2??) return 0 ;; esac
    return 1
}

# A failed GET prints "egressd N did not answer ...", which no check expects.
egressd_state() {
    if ! egressd_api "$1" GET /v1/sandboxes; then
        echo "egressd $1 did not answer GET /v1/sandboxes: $EGD_CODE $EGD_BODY"
        return 1
    fi
    python3 -c 'import json,sys; b={x["id"]: x for x in json.loads(sys.argv[1])}; *pre, last = sys.argv[2].split("; "); exec("\n".join(pre)); v=eval(last); print(v if not isinstance(v,(dict,list)) else json.dumps(v))' "$EGD_BODY" "$2"
}

# sbx_stop_all [quiet]: quiet (the EXIT trap) prints no TAP line.  An
# egressd a script stopped itself is not checked here.
sbx_stop_all() {
    local n rc pid
    for n in 1 2; do
        eval "pid=\${SBX_EGD${n}_PID:-}"
        [ -n "$pid" ] || continue
        rc=0
        egressd_stop "$n" || rc=$?
        [ "${1:-}" = quiet ] && continue
        [ "$rc" -eq 0 ] && egressd_clean "$n"
        ok $? "egressd $n stops cleanly (exit $rc, no sanitizer report)"
        if [ "$rc" -ne 0 ] || ! egressd_clean "$n"; then
            tail -n 30 "$T/egressd$n/egressd.err" | sed 's/^/#   /'
        fi
    done
    pve_sim_stop
    [ -n "${T:-}" ] && rm -rf "$T"
}

# sbx_write_config: write $CONF (extra lines from stdin are appended).
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
egressd-admin $SBX_EGD1_ADMIN
egressd-admin $SBX_EGD2_ADMIN
egressd-admin-token-file $T/egressd-token
state-dir $T/state
agent-timeout 60s
task-timeout 60s
EOF
        cat
    } >"$CONF"
}

sbx_start() {
    local version=$1 world=${2:-} n
    shift
    [ $# -gt 0 ] && shift
    T=$(mktemp -d "${TMPDIR:-/tmp}/sbx-test.XXXXXX")
    CONF=$T/sandboxctl.conf
    trap 'sbx_stop_all quiet' EXIT
    if [ ! -x "$EGD_BIN" ]; then
        echo "# $EGD_BIN is not built" >&2
        return 1
    fi
    [ -n "$world" ] || world=$(sbx_world "$version")
    SBX_EGD_TOKEN=egressd-admin-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
    printf '%s\n' "$SBX_EGD_TOKEN" >"$T/egressd-token"
    chmod 600 "$T/egressd-token"
    # The daemons start while the simulator does; a port taken meanwhile by
    # someone else makes an egressd exit: it gets new ones, twice at most.
    sbx_egressd_setup 1
    sbx_egressd_setup 2
    egressd_launch 1
    egressd_launch 2
    pve_sim_start "$version" "$world" "$@" || return 1
    pve_sim_token_file "$SBX_TOKEN_ID=$SBX_SECRET" "$T/token"
    for n in 1 2; do
        egressd_ready "$n" 2>"$T/egressd$n.start" ||
            { sbx_egressd_setup "$n" && egressd_start "$n" 2>"$T/egressd$n.start"; } ||
            { sbx_egressd_setup "$n" && egressd_start "$n" 2>"$T/egressd$n.start"; } ||
            { cat "$T/egressd$n.start" >&2; return 1; }
    done
    sbx_write_config </dev/null
}

sbx() { "$SBX_BIN" -c "$CONF" "$@"; }

sbx_origins() {
    local out=$1 i
    shift
    python3 -S -u "$TOP/tests/sandboxctl/origin.py" "$@" >"$out" 2>&1 &
    SBX_ORIGIN_PID=$!
    for ((i = 0; i < 100; i++)); do
        grep -q '^ready' "$out" && return 0
        sleep 0.05
    done
    return 1
}

sim_state() {
    pve_sim_ctl GET state | python3 -c 'import json,sys; s=json.load(sys.stdin); *pre, last = sys.argv[1].split("; "); exec("\n".join(pre)); r=eval(last); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"
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
        test "$(egressd_state 1 'len(b)')$(egressd_state 2 'len(b)')" = 00
}

