#!/usr/bin/env bash
# tests/wall/pair.t - an active/standby pair of egressd with the real
# keepalived (deploy/keepalived/: keepalived.conf with its placeholders
# filled, egressd-check as its vrrp_script, egressd-node.nft as each node's
# wall), all in network namespaces of its own:
#
#   this namespace: the switch: bridges vmbr99 (the sandboxes' ports,
#   isolated, and both nodes') and wan0 (the nodes' uplinks, the internet)
#   n1  10.99.0.2 on vmbr99, 198.51.100.2 on wan0: egressd + keepalived,
#       priority 100 (the node that should hold the address)
#   n2  10.99.0.3, 198.51.100.3: egressd + keepalived, priority 90;
#       stand-ins for sshd on its own address and on the VIP
#   VIP 10.99.0.1: proxy :3128, DNS :53, transparent :8443/:8080 (the
#       node's dnat), metrics :9464 (walled off); egressd binds it on both
#       nodes (net.ipv4.ip_nonlocal_bind=1)
#   sa  10.99.0.11 (sandbox 101 of alice: policy pair, and denied.test by
#       its binding), sb 10.99.0.12 (sandbox 102 of bob: policy pair
#       alone; a stand-in on 10.99.0.12:8080), gateway and DNS the VIP
#   probe 10.99.0.5 on a port that is not isolated (a negative control)
#   inet 198.51.100.1 on wan0: origins allowed.test 203.0.113.10 and
#       denied.test 203.0.113.11 (HTTPS and HTTP), DNS 203.0.113.53
#
# The bindings come from sandboxctl sync (the Proxmox simulator holds the
# two VMs).  Under load (each sandbox a new request every 50 ms through
# the VIP, CONNECT and HTTP, to both origins): SIGKILL of the active
# egressd, then its return (held back until sync heals its stale set),
# then its link cut, then its return.  Each time the VIP moves, requests
# succeed again through the other node; the time from the failure to the
# first answer and the gap of each return are printed as TAP comments (no
# pass/fail on them).  Before and after, each sandbox gets only its own
# policy (denied.test: 200 for alice, 403 for bob, in every answer).  After
# the first failover the wall's points run against the standby holding the
# VIP (tests/wall/probe.sh, transparent requests, deploy/wall-test inside a
# sandbox), with controls that show the wall is what blocks.  Last, an
# in-place upgrade of the node holding the VIP (egressctl upgrade): its
# successor answers, carries the word that its set is current (so the VIP
# stays), and no answer is another sandbox's.
# Root; about 50 s.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
wall_netns "$@"
. "$TOP/tests/tap.sh"
started=$SECONDS
KEEPALIVED=$(command -v keepalived || echo /usr/sbin/keepalived)
EGCTL_BIN=$BUILD_DIR/proxy/egressctl
KA_DIR=$TOP/deploy/keepalived
VIP=10.99.0.1
SA_IP=10.99.0.11
SB_IP=10.99.0.12
declare -A KA_PID EGD_PID
LOADS=()

section() { diag "--- $1 (at $((SECONDS - started)) s)"; }
summary() {
    echo "# $((tap_n - tap_failed)) passed, $tap_failed failed ($((SECONDS - started)) s)"
    tap_end
}
now() { date +%s.%N; }

pair_down() {
    local p
    for p in "${LOADS[@]}" "${KA_PID[@]}" "${EGD_PID[@]}" ${SUCCESSOR:-}; do
        kill -TERM "$p" 2>/dev/null
    done
    for p in "${LOADS[@]}" "${KA_PID[@]}" "${EGD_PID[@]}"; do
        wait "$p" 2>/dev/null
    done
    LOADS=() KA_PID=() EGD_PID=()
    ip link del wan0 2>/dev/null
    wall_down
}

# plug NS BRIDGE PORT IF ADDR...: a veth pair PORT (on BRIDGE, here) - IF
# (in NS) with addresses.
plug() {
    local ns=$1 br=$2 port=$3 ifname=$4 pid a
    shift 4
    eval "pid=\$NS_$ns"
    ip link add "$port" type veth peer name "$ifname" netns "$pid" &&
        ip link set "$port" master "$br" up &&
        in_ns "$ns" ip link set lo up &&
        in_ns "$ns" ip link set "$ifname" up || return 1
    for a in "$@"; do
        in_ns "$ns" ip addr add "$a" dev "$ifname" || return 1
    done
}

# node_conf N: $T/nN/ with egressd.conf (every listener on the VIP), the
# presets, keepalived.conf (the shipped one, its placeholders filled) and
# the wall (the shipped egressd-node.nft, its defines set).
node_conf() {
    local n=$1 d=$T/n$1 self peer prio
    self=10.99.0.$((n + 1)) peer=10.99.0.$((4 - n)) prio=$((110 - 10 * n))
    mkdir -p "$d/policies" "$d/state"
    cp "$TOP"/deploy/policies/locked.allow "$d/policies/"
    printf '%s\n' '# the pair test: one origin of its internet' 'allowed.test' >"$d/policies/pair.allow"
    cat >"$d/egressd.conf" <<EOF
# egressd on node $n of the pair test: every listener on the VIP
listen $VIP:3128
transparent-tls $VIP:8443
transparent-http $VIP:8080
dns $VIP:53
metrics $VIP:9464
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
    sed -e "s|@NODE@|egressd-n$n|" -e "s|@INTERFACE@|eth0|g" -e "s|@SELF@|$self|" \
        -e "s|@PEER@|$peer|" -e "s|@VIP@|$VIP/24|" -e "s|@VRID@|99|" -e "s|@PRIORITY@|$prio|" \
        -e "s|@CHECK@|/usr/bin/env EGRESSCTL=$EGCTL_BIN $KA_DIR/egressd-check|" \
        -e "s|@CONF@|$d/egressd.conf|" "$KA_DIR/keepalived.conf" >"$d/keepalived.conf"
    sed -e "s|^define SANDBOX_IF = .*|define SANDBOX_IF = \"eth0\"|" \
        -e "s|^define VIP = .*|define VIP = $VIP|" -e "s|^define PEER = .*|define PEER = $peer|" \
        "$KA_DIR/egressd-node.nft" >"$d/wall.nft"
}

# egd_start N: egressd in node N (EGD_PID[N]), until its admin API answers.
egd_start() {
    local n=$1 d=$T/n$1 i
    # (nsenter execs egressd: $! is egressd itself, for the SIGKILL)
    nsenter -t "$(ns_pid "n$n")" -n -- "$EGD_BIN" -c "$d/egressd.conf" 2>>"$d/egressd.err" &
    EGD_PID[$n]=$!
    for ((i = 0; i < 400; i++)); do
        curl -q -sS --noproxy '*' -m 2 --unix-socket "$d/admin.sock" -o /dev/null \
            http://egressd/v1/status 2>/dev/null && return 0
        kill -0 "${EGD_PID[$n]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "# egressd $n did not come up:" >&2
    diag_file "$d/egressd.err" >&2
    return 1
}

ka_start() {
    local d=$T/n$1
    nsenter -t "$(ns_pid "n$1")" -n -- "$KEEPALIVED" -n -l -D -P -f "$d/keepalived.conf" -p "$d/keepalived.pid" \
        -r "$d/vrrp.pid" >>"$d/keepalived.log" 2>&1 &
    KA_PID[$1]=$!
}

ns_pid() { eval "echo \$NS_$1"; }

# has_vip N: node N holds the VIP now.
has_vip() { in_ns "n$1" ip -o -4 addr show dev eth0 | grep -q " $VIP/24 "; }
# wait_vip N SECONDS: until node N holds the VIP and the other does not.
wait_vip() {
    local end=$((SECONDS + $2)) other=$((3 - $1))
    until has_vip "$1" && ! has_vip "$other"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.05
    done
}

world() {
    local exp
    exp=$(date -u -d '+4 hours' +%Y-%m-%dT%H:%M:%SZ)
    "$WALL_PY" -S - "$WALL_TOKEN_ID" "$WALL_SECRET" "$exp" <<'EOF'
import json, sys
privs = ["VM.Allocate", "VM.Audit", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network",
         "VM.Config.Cloudinit", "VM.Config.Options", "VM.PowerMgmt", "VM.Snapshot",
         "VM.Snapshot.Rollback", "Pool.Audit", "VM.GuestAgent.Unrestricted"]
def vm(vmid, name, owner, addr, extra):
    return {"node": "pve1", "vmid": vmid, "name": name, "pool": "sandboxes", "status": "running",
            "tags": "sandboxctl", "config": {"memory": "2048"},
            "description": "Sandbox managed by sandboxctl\n\nsandboxctl-sandbox v1\nowner: %s\n"
                           "created: 2026-01-01T00:00:00Z\nexpires: %s\npolicy: pair\n"
                           "address: %s%s" % (owner, sys.argv[3], addr, extra)}
print(json.dumps({
    "nodes": [{"name": "pve1", "maxmem": 68719476736, "mem": 8589934592, "maxcpu": 16}],
    "storage": "local-lvm", "bridge": "vmbr99", "pool": "sandboxes",
    "templates": [{"node": "pve1", "vmid": 9000, "name": "agent-template", "config": {}}],
    "vms": [vm(101, "alice-1", "alice", "10.99.0.11", "\nallow: denied.test"),
            vm(102, "bob-1", "bob", "10.99.0.12", "")],
    "tokens": [{"id": sys.argv[1], "secret": sys.argv[2], "privsep": True,
                "acl": {"/pool/sandboxes": privs, "/vms/9000": ["VM.Clone", "VM.Audit"],
                        "/storage/local-lvm": ["Datastore.AllocateSpace"], "/nodes": ["Sys.Audit"]}}],
}))
EOF
}

pair_up() {
    local n f
    T=$(mktemp -d "${TMPDIR:-/tmp}/pair-test.XXXXXX")
    trap pair_down EXIT
    export HOME=$T/home
    mkdir -p "$HOME"
    for f in "$EGD_BIN" "$SBX_BIN" "$EGCTL_BIN" "$KEEPALIVED"; do
        [ -x "$f" ] || { echo "# $f is not there (keepalived: deploy/install-deps.sh --test)" >&2; return 1; }
    done
    wall_certs || return 1
    ip link add vmbr99 type bridge && ip link set vmbr99 up &&
        ip link add wan0 type bridge && ip link set wan0 up || return 1
    for n in n1 n2 sa sb probe inet; do wall_ns "$n" || return 1; done
    plug n1 vmbr99 n1p eth0 10.99.0.2/24 && plug n1 wan0 n1w eth1 198.51.100.2/24 &&
        plug n2 vmbr99 n2p eth0 10.99.0.3/24 && plug n2 wan0 n2w eth1 198.51.100.3/24 &&
        plug sa vmbr99 sap eth0 $SA_IP/24 && plug sb vmbr99 sbp eth0 $SB_IP/24 &&
        plug probe vmbr99 prp eth0 $PROBE_IP/24 &&
        plug inet wan0 inp eth0 198.51.100.1/24 $ALLOWED_IP/24 $DENIED_IP/24 $INET_DNS/24 || return 1
    # The sandboxes' ports are isolated from each other (not from the nodes').
    bridge link set dev sap isolated on && bridge link set dev sbp isolated on || return 1
    for n in sa sb probe; do in_ns $n ip route add default via $VIP || return 1; done
    for n in 1 2; do
        in_ns n$n ip route add 203.0.113.0/24 via 198.51.100.1 &&
            in_ns n$n sysctl -qw net.ipv4.ip_nonlocal_bind=1 net.ipv4.ip_forward=0 || return 1
        node_conf $n
        in_ns n$n nft -f "$T/n$n/wall.nft" || return 1
    done
    printf 'allowed.test A %s\ndenied.test A %s\n' $ALLOWED_IP $DENIED_IP >"$T/zone"
    bg inet "$T/dns-inet.out" "$WALL_PY" -S -u "$TOP/tests/egressd/dnsd.py" \
        --listen $INET_DNS:53 --zone "$T/zone" --log "$T/dns-inet.log" || return 1
    bg inet "$T/origin.out" "$WALL_PY" -S -u "$TOP/tests/egressd/origin.py" --log "$T/origin.log" \
        --certs "$T/certs" --https-port 443 --http-port 80 \
        allowed.test=$ALLOWED_IP denied.test=$DENIED_IP || return 1
    bg n2 "$T/standin-n2.out" "$WALL_PY" -S -u "$WALL_DIR/standin.py" --log "$T/standin.log" \
        10.99.0.3:22 $VIP:22 || return 1
    bg sb "$T/standin-sb.out" "$WALL_PY" -S -u "$WALL_DIR/standin.py" --log "$T/standin.log" \
        $SB_IP:8080 || return 1
    egd_start 1 && egd_start 2 || return 1
    pve_sim_start 9 "$(world)" || return 1
    wall_sandboxctl "$VIP" "$VIP:3128" "$T/n1/admin.sock" "$T/n2/admin.sock"
}

log=$(mktemp "${TMPDIR:-/tmp}/pair-up.XXXXXX")
if ! pair_up >"$log" 2>&1; then
    ok 1 "the topology comes up (bridges, two nodes, sandboxes, internet, egressd on both, the simulator)"
    sed 's/^/#   /' "$log"
    rm -f "$log"
    summary
    exit 1
fi
rm -f "$log"
ok 0 "the topology is up: two egressd nodes on vmbr99 listening on the VIP $VIP, two sandboxes, the internet"

# figures PYEXPR ARGS...: PYEXPR over the load logs: tries = [(start, end,
# who, spec, result)], sorted by end; args = ARGS (floats).
figures() {
    local expr=$1
    shift
    "$WALL_PY" -S - "$T/load-sa.log" "$T/load-sb.log" "$expr" "$@" <<'EOF'
import sys
tries = []
for path, who in ((sys.argv[1], "alice"), (sys.argv[2], "bob")):
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if len(f) == 4:
            tries.append((float(f[0]), float(f[1]), who, f[2], f[3]))
tries.sort(key=lambda t: t[1])
args = [float(a) for a in sys.argv[4:]]
answered = lambda t: t[4].isdigit()
def first_after(t0):
    """Seconds from t0 to the end of the first answered try begun after it."""
    ends = [t[1] for t in tries if t[0] >= t0 and answered(t)]
    return "%.2f" % (min(ends) - t0) if ends else "none"
def gap(t0, t1):
    """The longest time without an answer between t0 and t1, and the tries that failed."""
    t1 = min(t1, tries[-1][1])  # (no later than the logs go)
    ends = [t0] + [t[1] for t in tries if t0 <= t[1] <= t1 and answered(t)] + [t1]
    failed = [t for t in tries if t0 <= t[1] <= t1 and not answered(t)]
    return "%.2f s without an answer at most, %d of %d tries failed" % (
        max(b - a for a, b in zip(ends, ends[1:])), len(failed),
        len([t for t in tries if t0 <= t[1] <= t1]))
def wrong(t0):
    """Answers after t0 that are not the sandbox's own policy's."""
    want = {("alice", "allowed.test"): "200", ("alice", "denied.test"): "200",
            ("bob", "allowed.test"): "200", ("bob", "denied.test"): "403"}
    return [t for t in tries if t[0] >= t0 and answered(t)
            and want[(t[2], t[3].split(":")[1])] != t[4]]
def seen(t0, who, host, result):
    return len([t for t in tries if t[0] >= t0 and t[2] == who and t[3].split(":")[1] == host
                and t[4] == result])
print(eval(sys.argv[3]))
EOF
}
# served_since T: whether both sandboxes got their own answers (alice 200 for
# denied.test, bob 403) begun after T, and no wrong one.
served_since() {
    [ "$(figures 'seen(args[0], "alice", "denied.test", "200") > 0 and seen(args[0], "bob", "denied.test", "403") > 0 and seen(args[0], "bob", "allowed.test", "200") > 0' "$1")" = True ]
}
# wait_served T SECONDS
wait_served() {
    local end=$((SECONDS + $2))
    until served_since "$1"; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.1
    done
}
egd_lines() { wc -l <"$T/n$1/access.log" 2>/dev/null || echo 0; }

section "the health check, the bindings, then keepalived"
# check ARGS...: deploy/keepalived/egressd-check with this build's egressctl;
# its exit status in CK_RC, its stderr in CK_ERR
check_run() {
    CK_ERR=$(EGRESSCTL=$EGCTL_BIN "$KA_DIR/egressd-check" "$@" 2>&1)
    CK_RC=$?
}
check_run -c "$T/n1/egressd.conf"
ok "$([ $CK_RC = 0 ]; echo $?)" "egressd-check -c: node 1's egressd answers and is not draining ($CK_RC $CK_ERR)"
check_run --synced -s "$T/n1/admin.sock"
ok "$([ $CK_RC = 1 ] && grep -q 'not replaced since its start (sandboxes_replaced_s: null): run sandboxctl sync' <<<"$CK_ERR"; echo $?)" \
    "egressd-check --synced before any sync: 1, and why ($CK_ERR)"
check_run -s "$T/nothing.sock"
ok "$([ $CK_RC = 1 ] && grep -q '^egressd-check: egressd does not answer (-s .*nothing.sock)' <<<"$CK_ERR"; echo $?)" \
    "egressd-check on a socket nobody serves: 1, and why ($(head -c 120 <<<"$CK_ERR"))"
check_run --synced
ok "$([ $CK_RC = 2 ] && grep -q '^usage: egressd-check' <<<"$CK_ERR"; echo $?)" "egressd-check without an egressd to ask: usage, 2"
out=$(sbx --json sync 2>&1)
ok "$("$WALL_PY" -S -c '
import json, sys
j = json.loads(sys.argv[1])
sys.exit(0 if j["bindings"] == 2 and [n["result"] for n in j["egressd"]] == ["healed", "healed"] else 1)' "$out" 2>/dev/null; echo $?)" \
    "sandboxctl sync binds alice-1 and bob-1 on both nodes ($(tr -d '\n ' <<<"$out" | head -c 160))"
check_run --synced -c "$T/n2/egressd.conf"
ok "$([ $CK_RC = 0 ]; echo $?)" "  egressd-check --synced after it: 0 ($CK_ERR)"
ka_start 1
ka_start 2
wait_vip 1 15
ok $? "keepalived: node 1 (priority 100, +20 synced) holds the VIP, node 2 does not"
[ $? -eq 0 ] || { diag_file "$T/n1/keepalived.log" 30; diag_file "$T/n2/keepalived.log" 30; }

for s in sa sb; do
    bg $s "$T/load-$s.out" "$WALL_PY" -S -u "$WALL_DIR/pairload.py" --proxy $VIP:3128 \
        --log "$T/load-$s.log" connect:allowed.test:443 http:allowed.test connect:denied.test:443 \
        http:denied.test
    LOADS+=("${WALL_PIDS[-1]}")
done
t=$(now)
wait_served "$t" 10
ok $? "under load through the VIP: alice-1 gets denied.test (its binding), bob-1 gets 403 for it and allowed.test"
n1_before=$(egd_lines 1)
sleep 0.5
ok "$([ "$(egd_lines 1)" -gt "$n1_before" ] && [ "$(egd_lines 2)" = 0 ]; echo $?)" \
    "  node 1 serves the load ($(egd_lines 1) lines in its access log), node 2 nothing"

section "SIGKILL of the active egressd"
t_kill=$(now)
kill -KILL "${EGD_PID[1]}"
wait "${EGD_PID[1]}" 2>/dev/null
unset 'EGD_PID[1]'
wait_vip 2 15
ok $? "node 2 takes the VIP (node 1's egressd-check fails: FAULT)"
wait_served "$t_kill" 15
ok $? "new requests through the VIP are answered again, by node 2, each sandbox by its own policy"
diag "failover after SIGKILL: $(figures 'first_after(args[0])' "$t_kill") s from the kill to the first answer through node 2"
diag "  ($(figures 'gap(args[0], args[0] + 6)' "$t_kill"))"
ok "$([ "$(egd_lines 2)" -gt 0 ]; echo $?)" "  node 2's access log has the requests ($(egd_lines 2) lines)"

section "the wall, against node 2 holding the VIP"
declare -A R
probe() {
    local ns=$1 spec rc
    shift
    R=()
    while read -r spec rc; do
        [ -n "$spec" ] && R[$spec]=$rc
    done < <(ns_probe "$ns" "$@")
}
reached() { ok "$([ "${R[$2]:-x}" = 0 ]; echo $?)" "$1 (${R[$2]:-no result})"; }
blocked() { ok "$([ -n "${R[$2]:-}" ] && [ "${R[$2]}" != 0 ]; echo $?)" "$1 (${R[$2]:-no result})"; }
WALL_POINTS=("tcp:$VIP:3128" "udpdns:$VIP" "tcpdns:$VIP" "tcp:$ALLOWED_IP:22" "tcp:$ALLOWED_IP:8000"
    "udpdns:$INET_DNS" "tcpdns:$INET_DNS" tcp:10.99.0.3:22 "tcp:$VIP:22" "tcp:$VIP:9464" "tcp:$SB_IP:8080")
probe sa 1 "${WALL_POINTS[@]}"
reached "alice-1 reaches the proxy on the VIP" tcp:$VIP:3128
reached "alice-1: egressd's DNS server on the VIP answers over UDP" udpdns:$VIP
reached "alice-1:   and over TCP" tcpdns:$VIP
blocked "alice-1: no direct connection to the internet (port 22)" tcp:$ALLOWED_IP:22
blocked "alice-1:   nor port 8000" tcp:$ALLOWED_IP:8000
blocked "alice-1: no DNS answer from the internet's server over UDP" udpdns:$INET_DNS
blocked "alice-1:   nor over TCP" tcpdns:$INET_DNS
blocked "alice-1: not node 2's sshd on its own address" tcp:10.99.0.3:22
blocked "alice-1: not node 2's sshd on the VIP" tcp:$VIP:22
blocked "alice-1: not egressd's metrics on the VIP" tcp:$VIP:9464
blocked "alice-1: not the other sandbox (bob-1's $SB_IP:8080)" tcp:$SB_IP:8080
dig_a() { in_ns "$1" dig +time=2 +tries=1 +short @$VIP "$2" A 2>&1 | head -n 1; }
a=$(dig_a sa denied.test) b=$(dig_a sb denied.test) c=$(dig_a sb allowed.test)
ok "$([ "$a" = $DENIED_IP ] && [ -z "$b" ] && [ "$c" = $ALLOWED_IP ]; echo $?)" \
    "DNS on the VIP by each sandbox's policy: denied.test is $DENIED_IP for alice-1 (${a:-nothing}), nothing for bob-1 (${b:-nothing}); allowed.test for bob-1 (${c:-nothing})"
echo "nameserver $VIP" >"$T/resolv.conf"
# tcurl NS CURLARGS...: curl in NS with no proxy, the VIP as its DNS server.
tcurl() {
    local ns=$1
    shift
    in_ns "$ns" unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$T/resolv.conf" \
        curl -q -sS -m 10 --noproxy '*' --cacert "$T/certs/ca.pem" "$@"
}
body=$(tcurl sa https://denied.test/hello 2>&1)
ok "$([ "$body" = "hello from denied.test" ]; echo $?)" \
    "transparent: alice-1, no proxy, https://denied.test/hello (its binding) through the VIP's DNS and node 2's dnat ($body)"
body=$(tcurl sb http://allowed.test/hello 2>&1)
ok "$([ "$body" = "hello from allowed.test" ]; echo $?)" "transparent: bob-1, plain http://allowed.test/hello ($body)"
mark=$(egd_lines 2)
code=$(tcurl sb --resolve denied.test:443:$DENIED_IP -o /dev/null -w '%{http_code}' https://denied.test/hello 2>/dev/null)
sleep 0.3
ok "$([ "$code" = 000 ] && tail -n +$((mark + 1)) "$T/n2/access.log" | grep '"mode":"tls"' | grep '"sni":"denied.test"' |
    grep '"owner":"bob"' | grep -q '"decision":"deny"'; echo $?)" \
    "transparent: bob-1 to denied.test at its address anyway: node 2 denies it, logged as bob's ($code)"
# deploy/wall-test from inside bob-1, the VIP its proxy and DNS server
WT_ARGS=(--proxy "$VIP:3128" --allowed http://allowed.test/hello --denied http://denied.test/
    --direct 10.99.0.3:22 --direct "$VIP:22" --direct "$VIP:9464" --direct "$ALLOWED_IP:22"
    --dns "$INET_DNS" --timeout 1)
wall_test() {
    in_ns sb unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec bash "$@"' "$T/resolv.conf" \
        "$TOP/deploy/wall-test" "${WT_ARGS[@]}" 2>&1
}
out=$(wall_test)
rc=$?
ok "$([ $rc -eq 0 ] && grep -qE '^[0-9]+ passed, 0 failed$' <<<"$out"; echo $?)" \
    "deploy/wall-test inside bob-1 against the VIP on node 2: $(tail -n 1 <<<"$out")"
[ $rc -eq 0 ] || sed 's/^/#   /' <<<"$out"
probe probe 1 tcp:$SB_IP:8080 tcp:10.99.0.3:22
reached "control: a port that is not isolated reaches bob-1's 8080" tcp:$SB_IP:8080
blocked "control: but not node 2's sshd either (its wall)" tcp:10.99.0.3:22
in_ns n2 nft delete table inet egressd_node
probe sa 1 tcp:10.99.0.3:22 tcp:$VIP:9464
reached "control: node 2's wall removed, alice-1 reaches its sshd" tcp:10.99.0.3:22
reached "control:   and its metrics" tcp:$VIP:9464
out=$(wall_test)
ok "$([ $? -eq 1 ] && grep -q '^not ok .* no direct connection to 10.99.0.3:22$' <<<"$out"; echo $?)" \
    "control: and deploy/wall-test fails, naming the hole: $(tail -n 1 <<<"$out")"
in_ns n2 nft -f "$T/n2/wall.nft"
probe sa 1 tcp:10.99.0.3:22
blocked "  the wall loaded again: blocked again" tcp:10.99.0.3:22

section "node 1 comes back stale; sync heals it; the VIP returns"
out=$(sbx --json extend bob-1 2h 2>&1)
ok "$([ $? -eq 1 ] && grep -q "n1/admin.sock" <<<"$out"; echo $?)" \
    "extend bob-1 while node 1 is down: Proxmox and node 2 get the new expiry, node 1's failure is named"
ka_mark=$(wc -l <"$T/n1/keepalived.log")
egd_start 1
ok $? "egressd on node 1 starts again, with its state-dir's set (bob-1's old expiry)"
# ka_since PATTERN: a line of node 1's keepalived log after ka_mark matches
ka_since() { tail -n +$((ka_mark + 1)) "$T/n1/keepalived.log" | grep -q "$1"; }
for ((i = 0; i < 150; i++)); do
    ka_since 'VRRP_Script(egressd_alive) succeeded' && break
    sleep 0.1
done
ok "$(ka_since 'VRRP_Script(egressd_alive) succeeded'; echo $?)" "  node 1's keepalived: egressd_alive succeeded (BACKUP)"
# (a node 1 that counted as synced would start its preempt_delay, 2 s, now
# and take the VIP after it: 3.5 s is past that)
sleep 3.5
ok "$(has_vip 2 && ! has_vip 1 && ! ka_since 'preempt delay' && ! ka_since 'egressd_synced) succeeded'; echo $?)" \
    "  3.5 s later node 2 still holds the VIP: node 1 answers, but its set was not replaced since its start (egressd_synced fails)"
t_sync=$(now)
out=$(sbx --json sync 2>&1)
ok "$("$WALL_PY" -S -c '
import json, sys
j = json.loads(sys.argv[1])
n = {e["egressd"].split("/")[-2]: e for e in j["egressd"]}
sys.exit(0 if n["n1"]["result"] == "healed" and n["n1"]["changed"] == ["102"] and n["n2"]["result"] == "current" else 1)' "$out" 2>/dev/null; echo $?)" \
    "sync: node 1 healed (changed: bob-1's 102), node 2 current ($(tr -d '\n ' <<<"$out" | head -c 200))"
wait_vip 1 15
ok $? "node 1 takes the VIP back (synced: 120 against 110, after preempt_delay)"
t_back=$(now)
sleep 1.5
diag "return after SIGKILL: the VIP moved $(awk -v a="$t_sync" -v b="$t_back" 'BEGIN { printf "%.2f", b - a }') s after sync; $(figures 'gap(args[0], args[1])' "$t_sync" "$(now)")"
n1_before=$(egd_lines 1)
t=$(now)
wait_served "$t" 10
ok "$([ $? -eq 0 ] && [ "$(egd_lines 1)" -gt "$n1_before" ]; echo $?)" "  node 1 answers the load again, each sandbox by its own policy"

section "node 1's link cut"
t_cut=$(now)
ip link set n1p down
wait_vip 2 15
ok $? "node 2 takes the VIP (it hears no more advertisements from node 1)"
wait_served "$t_cut" 15
ok $? "new requests through the VIP are answered again, by node 2"
diag "failover after the link cut: $(figures 'first_after(args[0])' "$t_cut") s from the cut to the first answer through node 2"
diag "  ($(figures 'gap(args[0], args[0] + 6)' "$t_cut"))"
t_up=$(now)
ip link set n1p up
wait_vip 1 15
ok $? "the link back: node 1 (still synced) takes the VIP back"
t_back=$(now)
sleep 1.5
diag "return after the link cut: the VIP moved $(awk -v a="$t_up" -v b="$t_back" 'BEGIN { printf "%.2f", b - a }') s after the link came up; $(figures 'gap(args[0], args[1])' "$t_up" "$(now)")"
t=$(now)
wait_served "$t" 10
ok $? "  the load is answered through node 1 again"

section "an in-place upgrade of node 1 (egressctl upgrade) while it holds the VIP"
# The successor takes the listeners, the state-dir's set and the word
# that the set was replaced in this run (sandboxes_replaced_s, handed
# over): its egressd-check --synced holds, and node 1 keeps the VIP.
# What the sandboxes see of it is printed.
status_pid() {
    curl -q -sS --noproxy '*' -m 2 --unix-socket "$T/n1/admin.sock" http://egressd/v1/status 2>/dev/null |
        "$WALL_PY" -S -c 'import json, sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null
}
t_up=$(now)
out=$("$EGCTL_BIN" -c "$T/n1/egressd.conf" upgrade 2>&1)
ok $? "egressctl upgrade on node 1 exits 0 ($(tr -d '\n' <<<"$out" | head -c 160))"
old_pid=${EGD_PID[1]}
for ((i = 0; i < 150; i++)); do # (the predecessor drains: timeout-drain 2s)
    kill -0 "$old_pid" 2>/dev/null || break
    sleep 0.1
done
if ! kill -0 "$old_pid" 2>/dev/null; then
    wait "$old_pid" 2>/dev/null
    unset 'EGD_PID[1]'
fi
# (the successor is the predecessor's child, not ours: stopped by its pid)
SUCCESSOR=$(status_pid)
ok "$([ -n "$SUCCESSOR" ] && [ "$SUCCESSOR" != "$old_pid" ] && kill -0 "$SUCCESSOR" 2>/dev/null &&
    [ -z "${EGD_PID[1]:-}" ]; echo $?)" \
    "a successor (pid ${SUCCESSOR:-none}) answers on node 1's admin socket; its predecessor ($old_pid) is gone"
[ "$SUCCESSOR" != "$old_pid" ] || SUCCESSOR=
sleep 5
moved=$(has_vip 2 && echo "node 2 took it" || echo "it stayed on node 1")
check_run --synced -c "$T/n1/egressd.conf"
ok "$([ "$CK_RC" = 0 ] && has_vip 1 && ! has_vip 2; echo $?)" \
    "  the successor counts as synced (egressd-check --synced: $CK_RC) and node 1 keeps the VIP ($moved)"
diag "after the upgrade: $(figures 'gap(args[0], args[1])' "$t_up" "$(now)")"
sbx sync >/dev/null 2>&1
wait_vip 1 15
ok $? "  sync: node 1 holds the VIP again"
t=$(now)
wait_served "$t" 10
ok $? "  and the load is answered, each sandbox by its own policy"

section "every answer was the sandbox's own policy's"
for p in "${LOADS[@]}"; do kill -TERM "$p" 2>/dev/null; done
LOADS=()
ok "$([ "$(figures 'len(wrong(0))' 0)" = 0 ]; echo $?)" \
    "no answer of the whole run gave a sandbox another's policy ($(figures 'len([t for t in tries if answered(t)])' 0) answered, $(figures 'len([t for t in tries if not answered(t)])' 0) failed tries; wrong: $(figures 'wrong(0)[:3]' 0))"
ok "$([ "$(figures 'seen(0, "bob", "denied.test", "403") > 10 and seen(0, "alice", "denied.test", "200") > 10' 0)" = True ]; echo $?)" \
    "  and both policies were asked many times (alice-1 denied.test 200: $(figures 'seen(0, "alice", "denied.test", "200")' 0), bob-1 403: $(figures 'seen(0, "bob", "denied.test", "403")' 0))"
rc=0
for n in 1 2; do
    [ -n "${EGD_PID[$n]:-}" ] || continue
    kill -TERM "${EGD_PID[$n]}" && wait "${EGD_PID[$n]}" || rc=$?
    unset "EGD_PID[$n]"
done
if [ -n "${SUCCESSOR:-}" ]; then
    kill -TERM "$SUCCESSOR"
    for ((i = 0; i < 150; i++)); do
        kill -0 "$SUCCESSOR" 2>/dev/null || break
        sleep 0.1
    done
    kill -0 "$SUCCESSOR" 2>/dev/null && { kill -KILL "$SUCCESSOR"; rc=137; }
fi
ok "$([ $rc -eq 0 ] && ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T"/n1/egressd.err "$T"/n2/egressd.err; echo $?)" \
    "both egressd stop cleanly (exit $rc; node 1's successor gone within 15 s; no sanitizer report)"
summary
