#!/usr/bin/env bash
# nftables.t - deploy/nftables/egressd-wall.nft checked by nft, then shown
# to hold in network namespaces this script creates (and removes):
#
#   S1 10.99.0.11 ─┐                 H: the host, forwarding on      L: the "LAN" 192.168.50.2
#   S2 10.99.0.12 ─┴─ vmbr99 ─ 10.99.0.1 · 192.168.50.1 ──────────── and, behind it, the
#                     (ports isolated by isolate-ports.sh)           "far" address 203.0.113.10
#
# Listeners stand in for egressd (H: 3128, 8443, 8080, and its DNS server
# on 10.99.0.1:53, udp and tcp) and for what must stay out of reach (H: 22,
# 8006, udp/3128, udp/5353, DNS on its LAN address 192.168.50.1; L: 443, 80,
# 9999, DNS over udp and tcp; S2: 7000, udp/7001).  Every probe is made once
# before the wall is up, so that a "not reachable" afterwards is the wall's
# doing, not the test network's.
#
# Then deploy/nftables/egressd-ports.nft and port-guard.sh, the sandboxes'
# identity on the bridge: with entries for S1 and S2, S1 sending from S2's
# address, claiming it in ARP, or with another MAC gets nothing to the host,
# S1 as itself still does, and so does nothing once its entry is gone (a
# port without an entry is fail-closed).  Each of those probes is made once
# on the bare bridge first (no wall, no guard), where they get in.  The
# wall needs the guard: loaded alone it lets nothing in from the bridge,
# neither S1 sending from S2's address (egressd would count that datagram
# against S2's DNS rate) nor S1 as itself; what a guarded port sends from
# its own address carries the guard's mark, which the wall requires.
#
# A flood of udp/53 from S1 is cut to its own bucket (the wall's set
# dns_rate) while S2's query in the middle of it still gets through.
# TAP on stdout.  Needs TOP; run as root.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

WALL=$TOP/deploy/nftables/egressd-wall.nft
PORTS=$TOP/deploy/nftables/egressd-ports.nft
GUARD=$TOP/deploy/nftables/port-guard.sh
ISOLATE=$TOP/deploy/nftables/isolate-ports.sh
PROBE=$TOP/tests/deploy/netprobe.py
# Debian's python3 without a version manager's start-up time.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
T=$(mktemp -d /tmp/deploy-nft.XXXXXX)
export PORT_GUARD_LOCK=$T/port-guard.lock
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
check "nft -c: egressd-ports.nft parses and is accepted" unshare -n nft -c -f "$PORTS"
# shellcheck disable=SC2016 # nft variables, not the shell's
sed 's/ip saddr \$SANDBOX_NET/ip saddr $NO_SUCH_NET/' "$PORTS" >"$T/bad-ports.nft"
unshare -n nft -c -f "$T/bad-ports.nft" >/dev/null 2>&1
ok $((!$?)) "nft -c: a copy of it naming an undefined net is refused (the check can fail)"

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
    tcp:0.0.0.0:8006 udp:10.99.0.1:53 tcp:10.99.0.1:53 udp:192.168.50.1:53 tcp:192.168.50.1:53 \
    udp:0.0.0.0:3128 udp:0.0.0.0:5353 || bail "set-up: the host's listeners"
serve "$ns_l" L tcp:0.0.0.0:443 tcp:0.0.0.0:80 tcp:0.0.0.0:9999 udp:0.0.0.0:53 tcp:0.0.0.0:53 ||
    bail "set-up: the LAN's listeners"
serve "$ns_s2" S2 tcp:0.0.0.0:7000 udp:0.0.0.0:7001 || bail "set-up: sandbox 2's listener"

# probe NS PROTO ADDR PORT [SRC_ADDR:SRC_PORT]: who answered ("NAME:PORT"),
# or "none".
probe() { nsx "$1" "$PY" "$PROBE" probe "$2" "$3" "$4" 1 ${5:+"$5"}; }

# --- before the wall: everything is reachable (the checks below can fail)
declare -A before=(
    ["tcp 203.0.113.10 443"]=L:443 ["tcp 203.0.113.10 80"]=L:80 ["tcp 203.0.113.10 9999"]=L:9999
    ["tcp 192.168.50.2 9999"]=L:9999 ["udp 192.168.50.2 53"]=L:53 ["tcp 10.99.0.12 7000"]=S2:7000
    ["udp 10.99.0.12 7001"]=S2:7001 ["tcp 10.99.0.1 22"]=H:22 ["tcp 10.99.0.1 8006"]=H:8006
    ["tcp 192.168.50.1 22"]=H:22 ["udp 10.99.0.1 53"]=H:53 ["tcp 10.99.0.1 53"]=H:53
    ["tcp 192.168.50.2 53"]=L:53 ["udp 203.0.113.10 53"]=L:53 ["udp 192.168.50.1 53"]=H:53
    ["tcp 192.168.50.1 53"]=H:53 ["udp 10.99.0.1 3128"]=H:3128 ["udp 10.99.0.1 5353"]=H:5353
)
bad=0
for k in "${!before[@]}"; do
    # shellcheck disable=SC2086 # "PROTO ADDR PORT"
    got=$(probe "$ns_s1" $k)
    [ "$got" = "${before[$k]}" ] || { bad=1; diag "without the wall: $k answered by '$got', wanted ${before[$k]}"; }
done
ok $bad "without the wall, sandbox 1 reaches the LAN, the far address, sandbox 2 and the host's 22, 8006, DNS on both its addresses, udp/3128 and udp/5353 (${#before[@]} probes)"

# --- posing as another sandbox, on the bare bridge (neither wall nor guard)
mac_of() { nsx "$1" cat /sys/class/net/eth0/address; }
mac1=$(mac_of "$ns_s1") mac2=$(mac_of "$ns_s2")
fake_mac=02:00:00:00:99:11
# seen PEER: whether the host's DNS stand-in got a datagram from PEER (ADDR:PORT).
seen() { grep -q "\"peer\": \"$1\", \"local\": \"10.99.0.1:53\"" "$T/H.log"; }
# neigh_mac ADDR: the MAC the host holds for ADDR on vmbr99 ("" when none).
neigh_mac() { nsx "$ns_h" ip neigh show "$1" dev vmbr99 | awk '{ for (i = 1; i < NF; i++) if ($i == "lladdr") print $(i + 1) }'; }
# spoof_probes TAG: what S1 tries, each seen (or not) by the host:
#   a datagram to the DNS stand-in from S2's address (10.99.0.12:45TAG02);
#   an ARP claim to 10.99.0.12 (arp_claim: what the host then holds for it);
#   an ARP from its own address and frame naming another MAC as the
#   sender's (arp_sha: what the host then holds for 10.99.0.11);
#   a datagram from its own address with another MAC (10.99.0.11:45TAG01;
#   S1 is given the host's MAC by hand, so that no ARP from the other MAC
#   is needed first);
# then S1 is itself again and the host forgets every claim.
spoof_probes() {
    local tag=$1 hmac
    hmac=$(nsx "$ns_h" cat /sys/class/net/vmbr99/address)
    probe "$ns_s1" udp 10.99.0.1 53 "10.99.0.12:45${tag}02" >/dev/null
    nsx "$ns_h" ip neigh flush dev vmbr99
    nsx "$ns_s1" "$PY" "$PROBE" arp eth0 10.99.0.12 10.99.0.1
    nsx "$ns_s1" "$PY" "$PROBE" arp eth0 10.99.0.11 10.99.0.1 "$fake_mac"
    sleep 0.2
    arp_claim=$(neigh_mac 10.99.0.12) arp_sha=$(neigh_mac 10.99.0.11)
    nsx "$ns_h" ip neigh flush dev vmbr99
    nsx "$ns_s1" ip link set eth0 address "$fake_mac"
    nsx "$ns_s1" ip neigh replace 10.99.0.1 lladdr "$hmac" dev eth0 nud permanent
    probe "$ns_s1" udp 10.99.0.1 53 "10.99.0.11:45${tag}01" >/dev/null
    nsx "$ns_s1" ip link set eth0 address "$mac1"
    nsx "$ns_s1" ip neigh flush dev eth0
    nsx "$ns_h" ip neigh flush dev vmbr99
}
# fdb_port MAC: the port the bridge sends frames for MAC to.
fdb_port() {
    nsx "$ns_h" bridge fdb show br vmbr99 |
        awk -v m="$1" '$1 == m { for (i = 2; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }'
}
# mac_steal: S1 sends one frame (ARP, from an address outside the sandbox
# network) with S2's MAC; stolen is the port the bridge then holds S2's MAC
# on.  Then S1 is itself again and S2 teaches the bridge its MAC again.
mac_steal() {
    nsx "$ns_s1" ip link set eth0 address "$mac2"
    nsx "$ns_s1" "$PY" "$PROBE" arp eth0 192.0.2.1 192.0.2.2
    sleep 0.1
    stolen=$(fdb_port "$mac2")
    nsx "$ns_s1" ip link set eth0 address "$mac1"
    nsx "$ns_s1" ip neigh flush dev eth0
    probe "$ns_s2" udp 10.99.0.1 53 >/dev/null
}
check "set-up: the sandboxes' MACs ($mac1, $mac2)" test -n "$mac1" -a -n "$mac2" -a "$mac1" != "$mac2"
: >"$T/H.log"
spoof_probes 1
ok "$(seen 10.99.0.12:45102; echo $?)" \
    "bare bridge: a datagram S1 sends from S2's address 10.99.0.12 reaches the host's DNS"
ok "$([ "$arp_claim" = "$mac1" ]; echo $?)" \
    "bare bridge: S1's ARP claim to 10.99.0.12 makes the host send S2's traffic to S1 (${arp_claim:-no entry})"
ok "$([ "$arp_sha" = "$fake_mac" ]; echo $?)" \
    "bare bridge: S1's ARP naming another sender MAC for its own address is taken (${arp_sha:-no entry})"
ok "$(seen 10.99.0.11:45101; echo $?)" "bare bridge: S1 with another MAC ($fake_mac) reaches the host's DNS"
mac_steal
ok "$([ "$stolen" = p1 ]; echo $?)" "bare bridge: a frame from S1 with S2's MAC moves S2's MAC to port ${stolen:-none} (p1)"
check "... and S2 gets it back by sending" test "$(fdb_port "$mac2")" = p2


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

# The wall without the guard (egressd-ports.nft not loaded): the wall lets
# in from the bridge only what a guarded port marked, so nothing; in
# particular not a datagram to egressd's DNS port from S1's port with S2's
# address, which egressd would count against S2's DNS rate.
: >"$T/H.log"
probe "$ns_s1" udp 10.99.0.1 53 10.99.0.12:45501 >"$T/p.out"
ok "$([ "$(cat "$T/p.out")" = none ] && ! seen 10.99.0.12:45501; echo $?)" \
    "the wall without the guard: S1 sending from S2's address gets nothing to egressd's DNS ($(cat "$T/p.out"))"
probe "$ns_s1" udp 10.99.0.1 53 10.99.0.11:45502 >"$T/p.out"
ok "$([ "$(cat "$T/p.out")" = none ] && ! seen 10.99.0.11:45502; echo $?)" \
    "the wall without the guard: nor S1 as itself (fail-closed; $(cat "$T/p.out"))"
check "the wall without the guard: nor S1's tcp to the proxy port" \
    test "$(probe "$ns_s1" tcp 10.99.0.1 3128)" = none
unguarded() { nsx "$ns_h" nft list chain inet egressd_wall from_sandboxes | sed -n 's/.*counter packets \([0-9]*\) .*not through a guarded port.*/\1/p'; }
check "... each counted by the wall's 'not through a guarded port' drop ($(unguarded) packets)" \
    test "$(unguarded)" -ge 3

# The guard: an entry for each sandbox's port (port-guard.sh).
nsx "$ns_h" "$GUARD" add p1 10.99.0.11 "$mac1" >"$T/guard.out" 2>&1
ok $? "port-guard.sh add p1 10.99.0.11 $mac1 (loads egressd-ports.nft)" || diag_file "$T/guard.out"
nsx "$ns_h" "$GUARD" add p2 10.99.0.12 "${mac2^^}" >"$T/guard.out" 2>&1
ok $? "port-guard.sh add p2 10.99.0.12 (the MAC in capitals)" || diag_file "$T/guard.out"
nsx "$ns_h" "$GUARD" add p2 10.99.0.12 "$mac2" >"$T/guard.out" 2>&1
ok $? "port-guard.sh add again: the same entry, no error (idempotent)" || diag_file "$T/guard.out"
check "port-guard.sh list: the two entries" \
    test "$(nsx "$ns_h" "$GUARD" list | sort | tr '\n' ' ')" = "p1 10.99.0.11 $mac1 p2 10.99.0.12 $mac2 "
check "one chain per guarded port" \
    test "$(nsx "$ns_h" nft list table bridge egressd_ports | grep -cE '^\s+chain port_p[12] \{')" = 2

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
check "sandbox 1 reaches egressd's DNS server over UDP (10.99.0.1:53)" \
    test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53
check "... and over TCP" test "$(probe "$ns_s1" tcp 10.99.0.1 53)" = H:53
check "sandbox 2 reaches it too (UDP)" test "$(probe "$ns_s2" udp 10.99.0.1 53)" = H:53
check "... which saw both, on 10.99.0.1 from their own addresses" \
    sh -c "grep -q '\"proto\": \"udp\", \"peer\": \"10.99.0.11:[0-9]*\", \"local\": \"10.99.0.1:53\"' '$T/H.log' &&
           grep -q '\"proto\": \"tcp\", \"peer\": \"10.99.0.11:[0-9]*\", \"local\": \"10.99.0.1:53\"' '$T/H.log' &&
           grep -q '\"peer\": \"10.99.0.12:[0-9]*\", \"local\": \"10.99.0.1:53\"' '$T/H.log'"

# unreachable NS PROTO ADDR PORT TEXT
# The probes that must fail wait out their timeout: all at once.
unreachable_probes=(
    "tcp 203.0.113.10 9999|other ports of the far address: not forwarded"
    "tcp 192.168.50.2 9999|the LAN behind the host: not forwarded"
    "udp 192.168.50.2 53|DNS on the LAN: not forwarded"
    "tcp 192.168.50.2 53|DNS over TCP on the LAN: not forwarded"
    "udp 203.0.113.10 53|DNS to a far server: neither forwarded nor redirected"
    "udp 192.168.50.1 53|DNS on the host's LAN address: unreachable (DNS only to 10.99.0.1)"
    "tcp 192.168.50.1 53|DNS over TCP on the host's LAN address: unreachable"
    "udp 10.99.0.1 3128|udp/3128 on 10.99.0.1 (the proxy port is TCP only): unreachable"
    "udp 10.99.0.1 5353|udp/5353 on 10.99.0.1 (DNS is port 53 only): unreachable"
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
check "the host's 22, 8006, udp/3128, udp/5353 and DNS on 192.168.50.1 saw nothing once the wall was up" \
    sh -c "! grep -qE '\"listener\": (22|8006|5353),|\"listener\": 3128, \"proto\": \"udp\"|\"local\": \"192\.168\.50\.1:53\"' '$T/H.log'"
fwd=$(nsx "$ns_h" nft list chain inet egressd_wall forward | grep -o 'packets [0-9]*' | awk '{ s += $2 } END { print s + 0 }')
check "the forward chain's drop counters counted the attempts ($fwd packets)" test "$fwd" -gt 0

# --- a DNS flood from one sandbox: metered per source (set dns_rate)
# dns_over: the packets the wall's "DNS over a source's rate" rule dropped.
dns_over() {
    nsx "$ns_h" nft list chain inet egressd_wall from_sandboxes |
        awk '/DNS over a source/ { for (i = 1; i < NF; i++) if ($i == "counter") print $(i + 2) }'
}
DNS_RATE=1000 DNS_BURST=2000 # the rule's figures
over0=$(dns_over)
nsx "$ns_s1" "$PY" "$PROBE" blast 10.99.0.1 53 2 >"$T/blast.out" &
blast_pid=$!
sleep 0.7
s2_during=$(probe "$ns_s2" udp 10.99.0.1 53)
wait "$blast_pid"
read -r sent secs <"$T/blast.out"
over=$(($(dns_over) - over0))
passed=$((sent - over))
# The most a bucket lets through in secs (rounded up) and a second more.
most=$(awk -v s="$secs" -v r=$DNS_RATE -v b=$DNS_BURST 'BEGIN { print b + r * (int(s) + 2) }')
diag "S1's flood: $sent datagrams in $secs s; $over over its rate, $passed let in"
ok "$((sent > 2 * most ? 0 : 1))" "S1 floods udp/53: $sent datagrams in $secs s, more than twice its bucket's $most"
ok "$((over > 0 && passed <= most ? 0 : 1))" \
    "... of which the wall let in at most $most (burst $DNS_BURST + $DNS_RATE a second): $passed"
check "... while S2, in the middle of it, still reached the DNS server" test "$s2_during" = H:53
sleep 1
check "... and S1 does again a second after its flood" test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53

# --- the guard: each port's address and MAC (egressd-ports.nft, port-guard.sh)
check "guarded, S1 as itself reaches egressd's DNS server" test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53
check "... and its proxy port" test "$(probe "$ns_s1" tcp 10.99.0.1 3128)" = H:3128
check "guarded, S2 as itself reaches egressd's DNS server" test "$(probe "$ns_s2" udp 10.99.0.1 53)" = H:53
: >"$T/H.log"
spoof_probes 2
ok "$(! seen 10.99.0.12:45202; echo $?)" \
    "guarded: S1 sending from S2's address gets nothing through (the host's DNS saw nothing from 10.99.0.12:45202)"
ok "$([ "$arp_claim" != "$mac1" ]; echo $?)" \
    "guarded: S1's ARP claim to 10.99.0.12 does not reach the host (its entry: ${arp_claim:-none})"
ok "$([ "$arp_sha" != "$fake_mac" ]; echo $?)" \
    "guarded: an ARP from S1 naming another sender MAC does not reach the host (its entry for 10.99.0.11: ${arp_sha:-none})"
ok "$(! seen 10.99.0.11:45201; echo $?)" \
    "guarded: S1 with another MAC gets nothing through (the host's DNS saw nothing from 10.99.0.11:45201)"
check "... and nothing of that from S1 at all" sh -c "! grep -qE '\"peer\": \"10\\.99\\.0\\.1[12]:452' '$T/H.log'"
check "guarded, S1 with its own address and MAC again reaches egressd's DNS server" \
    test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53
check "... and S2 too" test "$(probe "$ns_s2" udp 10.99.0.1 53)" = H:53
drops() { nsx "$ns_h" nft list chain bridge egressd_ports "port_$1" | awk '/counter packets/ { n = $0 } END { sub(/.*counter packets /, "", n); sub(/ .*/, "", n); print n + 0 }'; }
v6_before=$(drops p1)
nsx "$ns_s1" "$PY" -c '
import socket
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, socket.if_nametoindex("eth0"))
for _ in range(3):
    s.sendto(b"v6", ("ff02::1", 9))'
v6_after=$(drops p1)
check "guarded: IPv6 from S1 ends in its port chain's last drop ($v6_before, then $v6_after packets)" \
    test "$v6_after" -ge $((v6_before + 3))

# A port without an entry: fail-closed for the sandbox network.
nsx "$ns_h" "$GUARD" del p1 >"$T/guard.out" 2>&1
ok $? "port-guard.sh del p1" || diag_file "$T/guard.out"
check "port-guard.sh del p1 again: nothing to remove, no error" nsx "$ns_h" "$GUARD" del p1
check "port-guard.sh list: p2 only" test "$(nsx "$ns_h" "$GUARD" list)" = "p2 10.99.0.12 $mac2"
: >"$T/H.log"
probe "$ns_s1" udp 10.99.0.1 53 10.99.0.11:45301 >"$T/p1.out"
ok "$([ "$(cat "$T/p1.out")" = none ] && ! seen 10.99.0.11:45301; echo $?)" \
    "p1 without an entry: S1 as itself gets nothing to the host (fail-closed; $(cat "$T/p1.out"))"
nsx "$ns_h" ip neigh flush dev vmbr99
nsx "$ns_s1" "$PY" "$PROBE" arp eth0 10.99.0.12 10.99.0.1
sleep 0.2
arp_claim=$(neigh_mac 10.99.0.12)
ok "$([ "$arp_claim" != "$mac1" ]; echo $?)" \
    "p1 without an entry: S1's ARP claim to 10.99.0.12 does not reach the host (its entry: ${arp_claim:-none})"
mac_steal
ok "$([ "$stolen" = p2 ]; echo $?)" \
    "p1 without an entry: a frame from S1 with S2's (guarded) MAC is dropped, S2's MAC stays on ${stolen:-none} (p2)"
nsx "$ns_h" "$GUARD" add p1 10.99.0.11 "$mac1" >/dev/null 2>&1
check "... and with its entry back it does again" test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53

# Reloads keep the entries.
nsx "$ns_h" nft -f "$PORTS" >"$T/nft.err" 2>&1
ok $? "nft -f egressd-ports.nft again (a reload)" || diag_file "$T/nft.err"
check "... keeps both entries" test "$(nsx "$ns_h" "$GUARD" list | wc -l)" = 2
check "... and still one prerouting rule set (not two)" \
    test "$(nsx "$ns_h" nft list chain bridge egressd_ports prerouting | grep -c 'vmap @ports')" = 1
nsx "$ns_h" nft -f "$WALL" >"$T/nft.err" 2>&1
ok $? "nft -f egressd-wall.nft again" || diag_file "$T/nft.err"
check "... leaves the guard's entries alone" test "$(nsx "$ns_h" "$GUARD" list | wc -l)" = 2
check "after both reloads S1 reaches egressd's DNS server" test "$(probe "$ns_s1" udp 10.99.0.1 53)" = H:53
: >"$T/H.log"
probe "$ns_s1" udp 10.99.0.1 53 10.99.0.12:45401 >/dev/null
check "... and still not from S2's address" sh -c "! grep -q '10.99.0.12:45401' '$T/H.log'"

# What port-guard.sh refuses, naming it.
guard_refuses() {
    local want=$1 rc=$2 out
    shift 2
    out=$(nsx "$ns_h" "$GUARD" "$@" 2>&1)
    ok "$([ $? -eq "$rc" ] && grep -qF -- "$want" <<<"$out"; echo $?)" "port-guard.sh $*: exit $rc, '$want'"
}
guard_refuses "ADDR 10.99.0.12 is held by port p2" 1 add p9 10.99.0.12 02:00:00:00:00:09
guard_refuses "MAC $mac2 is held by port p2" 1 add p9 10.99.0.19 "$mac2"
guard_refuses "ADDR '10.99.0.300' is not a unicast IPv4 address" 2 add p9 10.99.0.300 02:00:00:00:00:09
guard_refuses "MAC '01:00:5e:00:00:09' is not a unicast MAC address" 2 add p9 10.99.0.19 01:00:5e:00:00:09
guard_refuses "PORT 'p9;x' is not an interface name" 2 add 'p9;x' 10.99.0.19 02:00:00:00:00:09
guard_refuses "usage: port-guard.sh add PORT ADDR MAC" 2 add p9
check "... and none of those made an entry" test "$(nsx "$ns_h" "$GUARD" list | wc -l)" = 2

# A port that joins later and is not isolated is named by --check.
ip link add p3 netns "$ns_h" type veth peer name p3x netns "$ns_h" &&
    nsx "$ns_h" ip link set p3 master vmbr99
nsx "$ns_h" "$ISOLATE" --check vmbr99 >"$T/iso.out" 2>&1
ok $((!$?)) "isolate-ports.sh --check: a new, open port makes it fail"
check "... and it names the port" grep -q 'port p3 of vmbr99 is not isolated' "$T/iso.out"

tap_end
