#!/usr/bin/env bash
# tests/sandboxctl/dns.t - the sandboxes' DNS: sandboxctl's firewall rule
# (macro DNS to dns-addr) as the simulator applies it (--vm-net: each VM a
# network namespace on vmbr99 behind its firewall, tests/pve-sim/firewall.py)
# and the guest's resolv.conf.  The host holds 10.99.0.1 and 10.99.0.2 on
# vmbr99, each with a DNS stand-in on udp and tcp 53 (and 10.99.0.1 one on
# udp/5353).  A namespace on the bridge without a firewall reaches all of
# them (the control); a sandbox only DNS on its dns-addr: the default (the
# proxy's address), another address, and with `dns-addr none` no DNS at all
# and no resolv.conf.  PVE 9.1 schema; everything in a network namespace of
# its own.  TAP on stdout.  Root.
set -u
if [ -z "${SBX_IN_NETNS:-}" ]; then
    export SBX_IN_NETNS=1
    exec unshare -n -- bash "$0" "$@"
fi
. "$TOP/tests/sandboxctl/lib.sh"
PROBE=$TOP/tests/deploy/netprobe.py
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
ns_c=sbxdns$$c
STANDIN_PIDS=()

if ! { ip link set lo up && ip link add vmbr99 type bridge && ip addr add 10.99.0.1/24 dev vmbr99 &&
    ip addr add 10.99.0.2/24 dev vmbr99 && ip link set vmbr99 up; }; then
    bail "set-up: vmbr99 with 10.99.0.1 and 10.99.0.2"
fi
sbx_start 9 "" --vm-net || {
    ok 1 "the simulator (--vm-net) and both egressd start"
    [ -n "${PVE_SIM_DIR:-}" ] && diag_file "$PVE_SIM_DIR/sim.log"
    tap_end
    exit 1
}
cleanup() {
    [ ${#STANDIN_PIDS[@]} -gt 0 ] && kill "${STANDIN_PIDS[@]}" 2>/dev/null
    ip netns pids "$ns_c" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del "$ns_c" 2>/dev/null
    sbx_stop_all quiet
}
trap cleanup EXIT

# The stand-ins: D1 on 10.99.0.1, D2 on 10.99.0.2, each answering its name.
: >"$T/D1.log"
: >"$T/D2.log"
"$PY" "$PROBE" listen D1 "$T/D1.log" udp:10.99.0.1:53 tcp:10.99.0.1:53 udp:10.99.0.1:5353 >"$T/D1.out" 2>&1 &
STANDIN_PIDS+=($!)
"$PY" "$PROBE" listen D2 "$T/D2.log" udp:10.99.0.2:53 tcp:10.99.0.2:53 >"$T/D2.out" 2>&1 &
STANDIN_PIDS+=($!)
for _ in $(seq 50); do
    grep -q ready "$T/D1.out" && grep -q ready "$T/D2.out" && break
    sleep 0.1
done
check "the DNS stand-ins listen on 10.99.0.1 and 10.99.0.2" sh -c "grep -q ready '$T/D1.out' && grep -q ready '$T/D2.out'"

SPECS=(udp:10.99.0.1:53 tcp:10.99.0.1:53 udp:10.99.0.2:53 tcp:10.99.0.2:53 udp:10.99.0.1:5353)
# probes PYTHON PROBER CMD...: every probe of SPECS at once, started through
# CMD (a command that runs its arguments where the probes should start),
# one line each: "PROTO:ADDR:PORT ANSWER" (ANSWER "none": nothing answered).
probes() {
    local py=$1 prober=$2
    shift 2
    # shellcheck disable=SC2016 # the inner shell's variables
    "$@" sh -c 'py=$1 prober=$2; shift 2; for s in "$@"; do
        (IFS=:; set -- $s; echo "$1:$2:$3 $("$py" "$prober" probe "$1" "$2" "$3" 1)") &
    done; wait' sh "$py" "$prober" "${SPECS[@]}" 2>/dev/null
}
# answer OUT SPEC: what answered SPEC in the output of probes.
answer() { sed -n "s/^$2 //p" <<<"$1"; }

# The control: a namespace on vmbr99 without any firewall reaches them all.
if ! { ip netns add "$ns_c" && ip link add c0 type veth peer name eth0 netns "$ns_c" &&
    ip link set c0 master vmbr99 up && ip -n "$ns_c" addr add 10.99.0.5/24 dev eth0 &&
    ip -n "$ns_c" link set eth0 up && ip -n "$ns_c" link set lo up; }; then
    bail "set-up: the control namespace on vmbr99"
fi
out=$(probes "$PY" "$PROBE" ip netns exec "$ns_c")
ok "$([ "$(answer "$out" udp:10.99.0.1:53)$(answer "$out" tcp:10.99.0.1:53)$(answer "$out" udp:10.99.0.2:53)$(answer "$out" tcp:10.99.0.2:53)$(answer "$out" udp:10.99.0.1:5353)" = D1:53D1:53D2:53D2:53D1:5353 ]; echo $?)" \
    "control: a namespace on vmbr99 without a firewall reaches DNS on 10.99.0.1 and 10.99.0.2 (udp, tcp) and udp/5353" ||
    diag "$out"

# sandbox NAME: create it (its address and VMID in addr[NAME], vmid[NAME])
# and put the prober in its guest; 0 when both worked.
declare -A addr vmid
sandbox() {
    local name=$1 out
    out=$(sbx --json create --name "$name" --size small --owner dora --policy p 2>&1)
    if ! ok $? "create $name"; then
        diag "$out"
        return 1
    fi
    addr[$name]=$(json_get "$out" 'j["address"]')
    vmid[$name]=$(json_get "$out" 'j["vmid"]')
    sbx write "$name" /tmp/netprobe.py <"$PROBE" >/dev/null
}
in_guest() { sbx exec "$GUEST" --timeout 30 -- "$@"; }
guest_probes() { GUEST=$1 probes python3 /tmp/netprobe.py in_guest; }
rules_of() { sim_state "[x for x in s['vms'] if x['vmid'] == $1][0]['firewall']['rules']"; }
resolv_of() { sbx exec "$1" -- cat /etc/resolv.conf 2>/dev/null | grep -v '^#' | tr '\n' ' '; }
nameserver_of() { sim_state "[x for x in s['vms'] if x['vmid'] == $1][0]['config'].get('nameserver')"; }

# --- the default dns-addr: the proxy's address, 10.99.0.1
if sandbox d1; then
    r=$(rules_of "${vmid[d1]}")
    check "d1: a DNS rule: out ACCEPT macro DNS to 10.99.0.1 on net0, beside the proxy's" \
        test "$(json_get "$r" 'd = [x for x in j if x.get("macro")]; len(j) == 2 and len(d) == 1 and d[0]["macro"] == "DNS" and d[0]["dest"] == "10.99.0.1" and d[0]["iface"] == "net0" and d[0]["type"] == "out" and d[0]["action"] == "ACCEPT"')" = True
    check "d1: resolv.conf: nameserver 10.99.0.1, options edns0" test "$(resolv_of d1)" = "nameserver 10.99.0.1 options edns0 "
    check "d1: the VM's cloud-init nameserver is 10.99.0.1 too" test "$(nameserver_of "${vmid[d1]}")" = 10.99.0.1
    out=$(guest_probes d1)
    check "d1 reaches DNS on 10.99.0.1 over UDP" test "$(answer "$out" udp:10.99.0.1:53)" = D1:53
    check "d1 reaches DNS on 10.99.0.1 over TCP" test "$(answer "$out" tcp:10.99.0.1:53)" = D1:53
    check "d1: not DNS on the host's other address 10.99.0.2 (UDP)" test "$(answer "$out" udp:10.99.0.2:53)" = none
    check "d1: nor over TCP" test "$(answer "$out" tcp:10.99.0.2:53)" = none
    check "d1: not udp/5353 on 10.99.0.1 (DNS is port 53 only)" test "$(answer "$out" udp:10.99.0.1:5353)" = none
    check "d1: the stand-ins saw it only on 10.99.0.1:53" \
        sh -c "! grep -q '\"peer\": \"${addr[d1]}:' '$T/D2.log' && ! grep -q '\"listener\": 5353, .*\"peer\": \"${addr[d1]}:' '$T/D1.log' &&
               test \$(grep -c '\"peer\": \"${addr[d1]}:' '$T/D1.log') = 2"
    check "the simulator compiled every rule (no rule left out)" sh -c "! grep -q 'left out' '$PVE_SIM_DIR/sim.log'"
fi

# --- dns-addr 10.99.0.2: that address only
echo "dns-addr 10.99.0.2" | sbx_write_config
if sandbox d2; then
    check "d2: its DNS rule goes to dns-addr 10.99.0.2" \
        test "$(json_get "$(rules_of "${vmid[d2]}")" '[x["dest"] for x in j if x.get("macro") == "DNS"]')" = '["10.99.0.2"]'
    check "d2: resolv.conf: nameserver 10.99.0.2" test "$(resolv_of d2)" = "nameserver 10.99.0.2 options edns0 "
    check "d2: and its cloud-init nameserver" test "$(nameserver_of "${vmid[d2]}")" = 10.99.0.2
    out=$(guest_probes d2)
    check "d2 reaches DNS on 10.99.0.2 over UDP and TCP" \
        test "$(answer "$out" udp:10.99.0.2:53) $(answer "$out" tcp:10.99.0.2:53)" = "D2:53 D2:53"
    check "d2: not DNS on 10.99.0.1 (UDP, TCP)" \
        test "$(answer "$out" udp:10.99.0.1:53) $(answer "$out" tcp:10.99.0.1:53)" = "none none"
fi

# --- dns-addr none: no DNS rule, no resolv.conf
echo "dns-addr none" | sbx_write_config
if sandbox d3; then
    check "d3 (dns-addr none): the proxy's rule only" \
        test "$(json_get "$(rules_of "${vmid[d3]}")" 'len(j) == 1 and "macro" not in j[0] and j[0]["proto"] == "tcp"')" = True
    check "d3: no cloud-init nameserver" test "$(nameserver_of "${vmid[d3]}")" = None
    r=$(resolv_of d3)
    ok "$(! grep -q nameserver <<<"$r"; echo $?)" "d3: sandboxctl wrote no resolv.conf: it names no server (${r:-empty})"
    out=$(guest_probes d3)
    check "d3: no DNS anywhere: not 10.99.0.1, not 10.99.0.2, neither UDP nor TCP" \
        test "$(answer "$out" udp:10.99.0.1:53) $(answer "$out" tcp:10.99.0.1:53) $(answer "$out" udp:10.99.0.2:53) $(answer "$out" tcp:10.99.0.2:53)" = "none none none none"
fi

for n in d1 d2 d3; do
    sbx destroy "$n" >/dev/null 2>&1
done
check "destroy: the three are gone" test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] not in (9000, 9001)]")" = "[]"
sbx_stop_all
tap_end
