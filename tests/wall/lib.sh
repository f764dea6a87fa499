# tests/wall/lib.sh - the walled-in world of the wall test (tests/wall/wall.t)
# and of deploy/demo.sh: a Proxmox host with sandboxes on a proxy-only
# bridge, a fake internet and a fake LAN, all in network namespaces this
# script makes and removes. Source from bash; needs BUILD_DIR and TOP (the
# Proxmox API schemas come from DATA_DIR, default $TOP/tests/data).
#
#   wall_netns "$@"   re-run the calling script in `unshare -n` (the "Proxmox
#                     host" namespace), lo up
#   wall_up           build everything below; the EXIT trap (wall_down)
#                     removes it all, also on failure; 0 when all came up
#   wall_up_tap TEXT  wall_up as one TAP line; exit 1 (after `summary`) if not
#   wall_down         stop every process, remove $T
#   in_ns NS CMD...   run CMD in namespace NS (inet, lan or probe)
#   sbx ARGS...       sandboxctl -c $CONF ARGS...
#   pve_api METHOD PATH [JSON]   one Proxmox API call with sandboxctl's token
#   guest_probe NAME WAIT SPEC...  tests/wall/probe.sh in sandbox NAME
#   ns_probe NS WAIT SPEC...       the same in namespace NS
#   egd_log_since N   the access-log lines after line N
#
# The topology (addresses are fixed; everything is inside our namespaces):
#
#   host ns   vmbr99 10.99.0.1/24 (no physical port): egressd :3128 (proxy),
#             :8443 and :8080 (transparent TLS and HTTP, which the node's
#             deploy/proxmox/egressd-redirect.nft feeds once a test loads it),
#             :53 (its policy DNS server, UDP and TCP), :9464 (metrics),
#             admin on a unix socket; stand-ins for pveproxy :8006 and sshd
#             :22, each logging who came; the simulator on 127.0.0.1
#             (--vm-net: every VM is a namespace on vmbr99 behind its
#             firewall); ip_forward off
#   inet ns   203.0.113.2/24 via wan0 (host 203.0.113.1): origins
#             allowed.test 203.0.113.10 and denied.test 203.0.113.11 (HTTPS
#             443, HTTP 80), tools.test 203.0.113.12 (git over HTTPS), DNS 203.0.113.53 (egressd's resolver, which also
#             says private.test is 192.168.77.10; it logs each query with the
#             client's address)
#   lan ns    192.168.77.10/24 via lan0 (host 192.168.77.1): stand-ins :8006 :22
#   probe ns  10.99.0.5/24 on vmbr99 through probe0, with no firewall: the
#             negative control (what a VM without its wall could reach)

set -u
: "${BUILD_DIR:?BUILD_DIR is not set}" "${TOP:?TOP is not set}"
WALL_DIR=$TOP/tests/wall
SBX_BIN=$BUILD_DIR/sandbox-orchestrator/sandboxctl
EGD_BIN=$BUILD_DIR/proxy/egressd
WALL_PY=$(python3 -S -c 'import sys; print(sys.executable)')
WALL_TOKEN_ID='sandboxctl@pve!ctl'
WALL_SECRET=3c1e9a70-5b2d-4e8f-9a61-7d0c2b4e8f13
WALL_PIDS=()
WALL_EGD_PID=
PROXY=10.99.0.1:3128
METRICS=10.99.0.1:9464
ALLOWED_IP=203.0.113.10
DENIED_IP=203.0.113.11
INET_DNS=203.0.113.53
TOOLS_IP=203.0.113.12
LAN_IP=192.168.77.10
PROBE_IP=10.99.0.5
. "$TOP/tests/pve-sim/lib.sh"

wall_netns() {
    if [ -z "${WALL_IN_NETNS:-}" ]; then
        export WALL_IN_NETNS=1
        exec unshare -n -- bash "$0" "$@"
    fi
    ip link set lo up
}

# The clients of this script never see this machine's CA or proxy settings.
unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR GIT_SSL_CAINFO NODE_EXTRA_CA_CERTS \
    REQUESTS_CA_BUNDLE npm_config_cafile NPM_CONFIG_CAFILE http_proxy https_proxy \
    HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY CURL_HOME

wall_down() {
    local p
    if [ -n "$WALL_EGD_PID" ]; then
        kill -TERM "$WALL_EGD_PID" 2>/dev/null
        wait "$WALL_EGD_PID" 2>/dev/null
        WALL_EGD_PID=
    fi
    pve_sim_stop
    for p in "${WALL_PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    WALL_PIDS=()
    # The namespace holders are gone, and with them inet, lan and probe
    # and their veth pairs; these are in our own namespace, which ends with us.
    for p in probe0 wan0 lan0 vmbr99; do
        ip link del "$p" 2>/dev/null
    done
    nft delete table bridge pve_sim 2>/dev/null
    nft delete table inet pve_sim 2>/dev/null
    [ -n "${T:-}" ] && [ -d "$T" ] && rm -rf "$T"
    T=
}

# wall_ns NAME: a network namespace held by a sleeping process ($NS_NAME).
wall_ns() {
    local pid i
    unshare -n sleep infinity &
    pid=$!
    WALL_PIDS+=("$pid")
    eval "NS_$1=$pid"
    # until unshare has made the namespace (before, the pid is still in ours)
    for ((i = 0; i < 200; i++)); do
        [ "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/self/ns/net)" ] && return 0
        sleep 0.01
    done
    return 1
}
in_ns() {
    local pid
    eval "pid=\$NS_$1"
    shift
    nsenter -t "$pid" -n -- "$@"
}

# wall_link NS HOSTIF HOSTADDR NSADDR...: a veth pair HOSTIF (here) -
# eth0 (in NS) with addresses, NS's default route through HOSTADDR.
wall_link() {
    local ns=$1 hif=$2 haddr=$3 pid a
    shift 3
    eval "pid=\$NS_$ns"
    ip link add "$hif" type veth peer name eth0 netns "$pid" || return 1
    [ -n "$haddr" ] && { ip addr add "$haddr" dev "$hif" || return 1; }
    ip link set "$hif" up || return 1
    in_ns "$ns" ip link set lo up || return 1
    in_ns "$ns" ip link set eth0 up || return 1
    for a in "$@"; do
        in_ns "$ns" ip addr add "$a" dev eth0 || return 1
    done
}

# wait_ready FILE PID WHAT: until FILE says "ready" (10 s).
wait_ready() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -q '^ready' "$1" 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.05
    done
    echo "# $3 did not start:" >&2
    sed 's/^/#   /' "$1" >&2
    return 1
}

# bg NS LOG CMD...: CMD in the background in NS ("" = here), python itself
# as the process (nsenter execs it), so that the EXIT trap's kill reaches it.
bg() {
    local ns=$1 log=$2 pid
    shift 2
    if [ -n "$ns" ]; then
        eval "pid=\$NS_$ns"
        nsenter -t "$pid" -n -- "$@" >"$log" 2>&1 &
    else
        "$@" >"$log" 2>&1 &
    fi
    WALL_PIDS+=($!)
    wait_ready "$log" $! "$(basename "$log" .out)"
}

wall_certs() {
    local c=$T/certs n
    mkdir -p "$c"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj '/CN=wall test CA' -keyout "$c/ca.key" -out "$c/ca.pem" \
        -addext 'basicConstraints=critical,CA:TRUE' \
        -addext 'keyUsage=critical,keyCertSign,cRLSign' >"$c/openssl.log" 2>&1 || return 1
    for n in allowed.test denied.test tools.test; do
        printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$n" >"$c/$n.ext"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$n" \
            -keyout "$c/$n.key" -out "$c/$n.csr" >>"$c/openssl.log" 2>&1 &&
            openssl x509 -req -in "$c/$n.csr" -CA "$c/ca.pem" -CAkey "$c/ca.key" -CAcreateserial \
                -days 2 -extfile "$c/$n.ext" -out "$c/$n.pem" >>"$c/openssl.log" 2>&1 || return 1
    done
}

# The world of the simulator: one node, the template on vmbr99 with an
# empty firewall, and sandbox 150 of zoe, running since before, long past
# its end of life (reap's work), walled in as sandboxctl walls a sandbox.
wall_world() {
    "$WALL_PY" -S - "$WALL_TOKEN_ID" "$WALL_SECRET" <<'EOF'
import json, sys
privs = ["VM.Allocate", "VM.Audit", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network",
         "VM.Config.Cloudinit", "VM.Config.Options", "VM.PowerMgmt", "VM.Snapshot",
         "VM.Snapshot.Rollback", "Pool.Audit", "VM.GuestAgent.Unrestricted"]
late_fw = {"options": {"enable": 1, "ipfilter": 1, "macfilter": 1, "dhcp": 0, "ndp": 0, "radv": 0,
                       "policy_in": "DROP", "policy_out": "DROP"},
           "ipsets": {"ipfilter-net0": ["10.99.0.60"]},
           "rules": [{"type": "out", "action": "ACCEPT", "dest": "10.99.0.1", "proto": "tcp",
                      "dport": "3128", "iface": "net0", "enable": 1}]}
print(json.dumps({
    "nodes": [{"name": "pve1", "maxmem": 68719476736, "mem": 8589934592, "maxcpu": 16}],
    "storage": "local-lvm", "bridge": "vmbr99", "pool": "sandboxes", "cluster_firewall": True,
    "templates": [{"node": "pve1", "vmid": 9000, "name": "agent-template",
                   "config": {"net0": "virtio=BC:24:11:00:23:28,bridge=vmbr99,firewall=1"}}],
    "vms": [{"node": "pve1", "vmid": 150, "name": "late", "pool": "sandboxes", "status": "running",
             "config": {"net0": "virtio=BC:24:11:00:00:96,bridge=vmbr99,firewall=1",
                        "ipconfig0": "ip=10.99.0.60/24,gw=10.99.0.1", "memory": "2048"},
             "firewall": late_fw, "tags": "sandboxctl",
             "description": "Sandbox managed by sandboxctl\n\nsandboxctl-sandbox v1\nowner: zoe\n"
                            "created: 2020-01-01T00:00:00Z\nexpires: 2020-01-01T04:00:00Z\n"
                            "policy: wall\naddress: 10.99.0.60"}],
    "tokens": [{"id": sys.argv[1], "secret": sys.argv[2], "privsep": True,
                "acl": {"/pool/sandboxes": privs, "/vms/9000": ["VM.Clone", "VM.Audit"],
                        "/storage/local-lvm": ["Datastore.AllocateSpace"],
                        "/sdn/zones/localnetwork/vmbr99": ["SDN.Use"], "/nodes": ["Sys.Audit"]}}],
}))
EOF
}

# wall_git_repo: $T/git/repo.git, bare, one commit (tools.test serves it).
wall_git_repo() {
    local w=$T/git-work
    mkdir -p "$T/git" "$w" &&
        git -C "$w" init -q -b main &&
        echo "hello from tools.test's repository" >"$w/README" &&
        git -C "$w" add README &&
        git -C "$w" -c user.name=wall -c user.email=wall@tools.test commit -q -m first &&
        git clone -q --bare "$w" "$T/git/repo.git"
}

wall_egressd() {
    local d=$T/egressd i
    mkdir -p "$d/policies" "$d/state"
    cp "$TOP"/deploy/policies/locked.allow "$d/policies/"
    printf '%s\n' '# the wall test: one origin of its internet' 'allowed.test' \
        '# and a careless line: deny-range keeps the LAN closed all the same' \
        'ip 192.168.77.0/24:8006' \
        '# allowed by name, but it resolves into the LAN: the DNS server says NXDOMAIN' \
        'private.test' '# a git server (HTTPS smart protocol)' 'tools.test' >"$d/policies/wall.allow"
    cat >"$d/egressd.conf" <<EOF
# egressd of the wall test: on the proxy-only bridge, resolving with the
# internet namespace's DNS server
listen $PROXY
transparent-tls 10.99.0.1:8443
transparent-http 10.99.0.1:8080
dns 10.99.0.1:53
metrics $METRICS
admin unix:$d/admin.sock
workers 1
resolver $INET_DNS
policy-dir policies
default-policy locked
state-dir state
access-log access.log
allow-range 203.0.113.0/24
timeout-connect 3s
timeout-drain 2s
EOF
    "$EGD_BIN" -c "$d/egressd.conf" 2>>"$d/egressd.err" &
    WALL_EGD_PID=$!
    for ((i = 0; i < 400; i++)); do
        curl -q -sS --noproxy '*' -m 2 --unix-socket "$d/admin.sock" -o /dev/null \
            http://egressd/v1/status 2>/dev/null && return 0
        kill -0 "$WALL_EGD_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "# egressd did not come up:" >&2
    sed 's/^/#   /' "$d/egressd.err" >&2
    return 1
}

# wall_sandboxctl [GATEWAY PROXY ADMIN-SOCKET...]: $CONF for sandboxctl on
# the simulator (default: gateway 10.99.0.1, proxy $PROXY, the one
# egressd's admin socket; the pair test names its VIP and both nodes).
wall_sandboxctl() {
    local gateway=${1:-10.99.0.1} proxy=${2:-$PROXY} admins=("${@:3}") a
    [ ${#admins[@]} -gt 0 ] || admins=("$T/egressd/admin.sock")
    pve_sim_token_file "$WALL_TOKEN_ID=$WALL_SECRET" "$T/token"
    mkdir -p "$T/sbx-state"
    CONF=$T/sandboxctl.conf
    {
        cat <<EOF
# sandboxctl of the wall test
pve-url $PVE_SIM_BASE
pve-token-file $T/token
pve-ca-file $PVE_SIM_CA
node auto
template pve1:9000
pool sandboxes
storage local-lvm
bridge vmbr99
ip-pool 10.99.0.10-10.99.0.250/24
gateway $gateway
proxy $proxy
state-dir $T/sbx-state
agent-timeout 30s
task-timeout 30s
EOF
        for a in "${admins[@]}"; do echo "egressd-admin unix:$a"; done
    } >"$CONF"
}

wall_up() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/wall-test.XXXXXX")
    trap wall_down EXIT
    export HOME=$T/home
    mkdir -p "$HOME"
    local f
    for f in "$EGD_BIN" "$SBX_BIN"; do
        [ -x "$f" ] || { echo "# $f is not built" >&2; return 1; }
    done
    wall_certs || { echo "# openssl could not make the test certificates" >&2; return 1; }
    echo 0 >/proc/sys/net/ipv4/ip_forward
    # A fixed MAC: a bridge without one takes its ports' lowest, and
    # changes it under the guests' ARP caches when that port goes.
    ip link add vmbr99 address 02:00:0a:63:00:01 type bridge || return 1
    ip addr add 10.99.0.1/24 dev vmbr99 && ip link set vmbr99 up || return 1
    wall_ns inet && wall_ns lan && wall_ns probe || return 1
    wall_link inet wan0 203.0.113.1/24 203.0.113.2/24 $ALLOWED_IP/24 $DENIED_IP/24 $INET_DNS/24 \
        $TOOLS_IP/24 || return 1
    in_ns inet ip route add default via 203.0.113.1 || return 1
    wall_link lan lan0 192.168.77.1/24 $LAN_IP/24 || return 1
    in_ns lan ip route add default via 192.168.77.1 || return 1
    wall_link probe probe0 "" $PROBE_IP/24 || return 1
    ip link set probe0 master vmbr99 || return 1
    in_ns probe ip route add default via 10.99.0.1 || return 1
    printf 'allowed.test A %s\ndenied.test A %s\nprivate.test A %s\ntools.test A %s\n' $ALLOWED_IP \
        $DENIED_IP $LAN_IP $TOOLS_IP >"$T/zone"
    bg inet "$T/dns-inet.out" "$WALL_PY" -S -u "$TOP/tests/egressd/dnsd.py" \
        --listen $INET_DNS:53 --zone "$T/zone" --log "$T/dns-inet.log" || return 1
    bg inet "$T/origin.out" "$WALL_PY" -S -u "$TOP/tests/egressd/origin.py" --log "$T/origin.log" \
        --certs "$T/certs" --https-port 443 --http-port 80 \
        allowed.test=$ALLOWED_IP denied.test=$DENIED_IP || return 1
    wall_git_repo || return 1
    bg inet "$T/toolsrv.out" "$WALL_PY" -S -u "$TOP/tests/egressd/toolsrv.py" \
        --listen $TOOLS_IP:443 --cert "$T/certs/tools.test.pem" --key "$T/certs/tools.test.key" \
        --root "$T/git" --git "$T/git" --log "$T/toolsrv.log" || return 1
    bg "" "$T/standin-host.out" "$WALL_PY" -S -u "$WALL_DIR/standin.py" --log "$T/standin.log" \
        10.99.0.1:8006 10.99.0.1:22 || return 1
    bg lan "$T/standin-lan.out" "$WALL_PY" -S -u "$WALL_DIR/standin.py" --log "$T/standin.log" \
        $LAN_IP:8006 $LAN_IP:22 || return 1
    wall_egressd || return 1
    pve_sim_start 9 "$(wall_world)" --vm-net || return 1
    wall_sandboxctl
}

# wall_up_tap TEXT: wall_up as one TAP line, TEXT when all came up; else
# its output and the simulator's log as diagnostics, the caller's
# `summary`, and exit 1 (the scripts go no further without it).
wall_up_tap() {
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/wall-up.XXXXXX")
    if ! wall_up >"$log" 2>&1; then
        ok 1 "the topology comes up (bridge, internet, LAN, egressd, simulator with --vm-net)"
        sed 's/^/#   /' "$log"
        [ -n "${PVE_SIM_DIR:-}" ] && diag_file "$PVE_SIM_DIR/sim.log"
        rm -f "$log"
        summary
        exit 1
    fi
    rm -f "$log"
    ok 0 "$1"
}

sbx() { "$SBX_BIN" -c "$CONF" "$@"; }

pve_api() {
    local args=(-q -sS --cacert "$PVE_SIM_CA" -m 10 -X "$1"
        -H "Authorization: PVEAPIToken=$WALL_TOKEN_ID=$WALL_SECRET")
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    curl "${args[@]}" "$PVE_SIM_URL$2"
}

guest_probe() {
    local name=$1
    shift
    sbx exec "$name" --timeout 30 -- bash -c "$(cat "$WALL_DIR/probe.sh")" probe "$@"
}
ns_probe() {
    local ns=$1
    shift
    in_ns "$ns" bash "$WALL_DIR/probe.sh" "$@"
}

egd_log_lines() { wc -l <"$T/egressd/access.log" 2>/dev/null || echo 0; }
egd_log_since() { tail -n +"$(($1 + 1))" "$T/egressd/access.log" 2>/dev/null; }
