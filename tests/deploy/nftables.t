#!/usr/bin/env bash
# nftables.t - deploy/nftables/egressd-wall.nft checked by nft, then shown
# to hold in network namespaces this script creates (and removes):
#
#   S1 10.99.0.11 ─┐                 H: the host, forwarding on      L: the "LAN" 192.168.50.2
#   S2 10.99.0.12 ─┴─ vmbr99 ─ 10.99.0.1 · 192.168.50.1 ──────────── and, behind it, the
#                     (ports isolated by isolate-ports.sh)           "far" address 203.0.113.10
#
# Listeners stand in for egressd (H: 3128, 8443, 8080) and for what must
# stay out of reach (H: 22, 8006, udp/53; L: 443, 80, 9999, udp/53; S2:
# 7000, udp/7001).  Every probe is made once before the wall is up, so that
# a "not reachable" afterwards is the wall's doing, not the test network's.
# TAP on stdout.  Needs TOP; run as root.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

WALL=$TOP/deploy/nftables/egressd-wall.nft
ISOLATE=$TOP/deploy/nftables/isolate-ports.sh
PROBE=$TOP/tests/deploy/netprobe.py
# Debian's python3 without a version manager's start-up time.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
T=$(mktemp -d /tmp/deploy-nft.XXXXXX)
ns_h=egw$$h ns_l=egw$$l ns_s1=egw$$s1 ns_s2=egw$$s2
pids=()
cleanup() {
    local p n
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    # and whatever else still runs in the namespaces
    for n in "$ns_h" "$ns_l" "$ns_s1" "$ns_s2"; do
        ip netns pids "$n" 2>/dev/null | xargs -r kill 2>/dev/null
    done
    wait 2>/dev/null
    for n in "$ns_h" "$ns_l" "$ns_s1" "$ns_s2"; do ip netns del "$n" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

nsx() {
    local n=$1
    shift
    ip netns exec "$n" "$@"
}

check "nft -c: the ruleset parses and its chains and rules are accepted" \
    unshare -n nft -c -f "$WALL"
# shellcheck disable=SC2016 # nft variables, not the shell's
sed 's/redirect to :\$TLS_PORT/redirect to :$NO_SUCH_PORT/' "$WALL" >"$T/bad.nft"
unshare -n nft -c -f "$T/bad.nft" >/dev/null 2>&1
ok $((!$?)) "nft -c: a copy naming an undefined port is refused (the check can fail)"

# --- the test network
setup() {
    local n
    for n in "$ns_h" "$ns_l" "$ns_s1" "$ns_s2"; do
        ip netns add "$n" && nsx "$n" ip link set lo up || return 1
    done
    nsx "$ns_h" ip link add vmbr99 type bridge || return 1
    nsx "$ns_h" ip addr add 10.99.0.1/24 dev vmbr99
    nsx "$ns_h" ip link set vmbr99 up
    for n in 1 2; do
        local s=ns_s$n
        ip link add p$n netns "$ns_h" type veth peer name eth0 netns "${!s}" || return 1
        nsx "$ns_h" ip link set p$n master vmbr99 up
        nsx "${!s}" ip addr add 10.99.0.1$n/24 dev eth0
        nsx "${!s}" ip link set eth0 up
        nsx "${!s}" ip route add default via 10.99.0.1
    done
    ip link add up0 netns "$ns_h" type veth peer name eth0 netns "$ns_l" || return 1
    nsx "$ns_h" ip addr add 192.168.50.1/24 dev up0
    nsx "$ns_h" ip link set up0 up
    nsx "$ns_h" ip route add 203.0.113.0/24 via 192.168.50.2
    nsx "$ns_h" sysctl -qw net.ipv4.ip_forward=1
    nsx "$ns_l" ip addr add 192.168.50.2/24 dev eth0
    nsx "$ns_l" ip addr add 203.0.113.10/32 dev lo
    nsx "$ns_l" ip link set eth0 up
    nsx "$ns_l" ip route add default via 192.168.50.1
}
# serve NS NAME SPEC...: a netprobe listener in NS, logging to $T/NAME.log.
serve() {
    local n=$1 name=$2
    shift 2
    : >"$T/$name.log"
    # ip itself, not the nsx function: $! is then the listener's own pid
    # (ip execs it), which the EXIT trap can kill.
    ip netns exec "$n" "$PY" "$PROBE" listen "$name" "$T/$name.log" "$@" >"$T/$name.out" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do
        grep -q ready "$T/$name.out" && return 0
        sleep 0.1
    done
    cat "$T/$name.out" >&2
    return 1
}
setup || bail "set-up: four namespaces, the bridge, the LAN link and routes"
serve "$ns_h" H tcp:0.0.0.0:3128 tcp:0.0.0.0:8443 tcp:0.0.0.0:8080 tcp:0.0.0.0:22 \
    tcp:0.0.0.0:8006 udp:0.0.0.0:53 || bail "set-up: the host's listeners"
serve "$ns_l" L tcp:0.0.0.0:443 tcp:0.0.0.0:80 tcp:0.0.0.0:9999 udp:0.0.0.0:53 ||
    bail "set-up: the LAN's listeners"
serve "$ns_s2" S2 tcp:0.0.0.0:7000 udp:0.0.0.0:7001 || bail "set-up: sandbox 2's listener"

# probe NS PROTO ADDR PORT: who answered ("NAME:PORT"), or "none".
probe() { nsx "$1" "$PY" "$PROBE" probe "$2" "$3" "$4" 1; }

# --- before the wall: everything is reachable (the checks below can fail)
declare -A before=(
    ["tcp 203.0.113.10 443"]=L:443 ["tcp 203.0.113.10 80"]=L:80 ["tcp 203.0.113.10 9999"]=L:9999
    ["tcp 192.168.50.2 9999"]=L:9999 ["udp 192.168.50.2 53"]=L:53 ["tcp 10.99.0.12 7000"]=S2:7000
    ["udp 10.99.0.12 7001"]=S2:7001 ["tcp 10.99.0.1 22"]=H:22 ["tcp 10.99.0.1 8006"]=H:8006
    ["tcp 192.168.50.1 22"]=H:22 ["udp 10.99.0.1 53"]=H:53
)
bad=0
for k in "${!before[@]}"; do
    # shellcheck disable=SC2086 # "PROTO ADDR PORT"
    got=$(probe "$ns_s1" $k)
    [ "$got" = "${before[$k]}" ] || { bad=1; diag "without the wall: $k answered by '$got', wanted ${before[$k]}"; }
done
ok $bad "without the wall, sandbox 1 reaches the LAN, the far address, sandbox 2 and the host's 22, 8006 and udp/53 (${#before[@]} probes)"

# --- the wall
nsx "$ns_h" nft -f "$WALL" >"$T/nft.err" 2>&1
ok $? "nft -f: the ruleset loads in the host" || diag_file "$T/nft.err"
nsx "$ns_h" nft -f "$WALL" >"$T/nft.err" 2>&1
ok $? "nft -f again: it replaces its own table (reload)"
check "reloaded: one table egressd_wall, not two" \
    test "$(nsx "$ns_h" nft list tables | grep -c egressd_wall)" = 1
nsx "$ns_h" "$ISOLATE" --check vmbr99 >"$T/iso.out" 2>&1
ok $((!$?)) "isolate-ports.sh --check: fails while the sandboxes' ports are not isolated"
nsx "$ns_h" "$ISOLATE" vmbr99 >"$T/iso.out" 2>&1
ok $? "isolate-ports.sh: isolates every port of vmbr99"
check "isolate-ports.sh --check: passes now" nsx "$ns_h" "$ISOLATE" --check vmbr99
: >"$T/H.log"
: >"$T/L.log"
: >"$T/S2.log"

check "sandbox 1 reaches egressd's proxy port 10.99.0.1:3128" test "$(probe "$ns_s1" tcp 10.99.0.1 3128)" = H:3128
check "sandbox 2 reaches egressd's proxy port too" test "$(probe "$ns_s2" tcp 10.99.0.1 3128)" = H:3128
check "tcp/443 to the far address: answered by the transparent TLS port" \
    test "$(probe "$ns_s1" tcp 203.0.113.10 443)" = H:8443
check "... which reads the original destination 203.0.113.10:443 (SO_ORIGINAL_DST)" \
    grep -q '"listener": 8443, .*"orig": "203.0.113.10:443"' "$T/H.log"
check "tcp/80 to the far address: answered by the transparent HTTP port" \
    test "$(probe "$ns_s1" tcp 203.0.113.10 80)" = H:8080
check "... with the original destination 203.0.113.10:80" \
    grep -q '"listener": 8080, .*"orig": "203.0.113.10:80"' "$T/H.log"
check "tcp/443 to a LAN address is redirected to egressd too, never reaches the LAN" \
    test "$(probe "$ns_s1" tcp 192.168.50.2 443)" = H:8443

# unreachable NS PROTO ADDR PORT TEXT
# The probes that must fail wait out their timeout: all at once.
unreachable_probes=(
    "tcp 203.0.113.10 9999|other ports of the far address: not forwarded"
    "tcp 192.168.50.2 9999|the LAN behind the host: not forwarded"
    "udp 192.168.50.2 53|DNS on the LAN: not forwarded"
    "udp 10.99.0.1 53|DNS on the host: unreachable"
    "tcp 10.99.0.1 22|the host's ssh (10.99.0.1:22): unreachable"
    "tcp 10.99.0.1 8006|the host's management port 8006: unreachable"
    "tcp 192.168.50.1 22|the host's ssh on its LAN address: unreachable"
    "tcp 10.99.0.12 7000|sandbox 2's tcp port from sandbox 1: unreachable"
    "udp 10.99.0.12 7001|sandbox 2's udp port from sandbox 1: unreachable"
)
for i in "${!unreachable_probes[@]}"; do
    # shellcheck disable=SC2086 # "PROTO ADDR PORT"
    probe "$ns_s1" ${unreachable_probes[$i]%%|*} >"$T/probe$i" 2>&1 &
done
wait_probes=$(jobs -p | grep -vxF -f <(printf '%s\n' "${pids[@]}"))
# shellcheck disable=SC2086 # a list of pids
wait $wait_probes
for i in "${!unreachable_probes[@]}"; do
    got=$(cat "$T/probe$i")
    [ "$got" = none ]
    ok $? "${unreachable_probes[$i]#*|}"
    [ "$got" = none ] || diag "${unreachable_probes[$i]%%|*} answered by $got"
done
check "the LAN's listeners saw nothing once the wall was up" test ! -s "$T/L.log"
check "sandbox 2's listeners saw nothing once the wall was up" test ! -s "$T/S2.log"
check "the host's 22, 8006 and 53 saw nothing once the wall was up" \
    sh -c "! grep -qE '\"listener\": (22|8006|53),' '$T/H.log'"
fwd=$(nsx "$ns_h" nft list chain inet egressd_wall forward | grep -o 'packets [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
check "the forward chain's drop counters counted the attempts ($fwd packets)" test "$fwd" -gt 0

# A port that joins later and is not isolated is named by --check.
ip link add p3 netns "$ns_h" type veth peer name p3x netns "$ns_h" &&
    nsx "$ns_h" ip link set p3 master vmbr99
nsx "$ns_h" "$ISOLATE" --check vmbr99 >"$T/iso.out" 2>&1
ok $((!$?)) "isolate-ports.sh --check: a new, open port makes it fail"
check "... and it names the port" grep -q 'port p3 of vmbr99 is not isolated' "$T/iso.out"

tap_end
