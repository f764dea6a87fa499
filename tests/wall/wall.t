#!/usr/bin/env bash
# tests/wall/wall.t - the walls end to end: sandboxctl creates two sandboxes
# for two owners on a simulated Proxmox host whose VMs are network
# namespaces on a proxy-only bridge behind their firewall (tests/pve-sim
# --vm-net, nftables as pve-firewall would apply it), egressd on the bridge,
# a fake internet and a fake LAN (tests/wall/lib.sh draws the topology).
# From inside the sandboxes: the proxy works and logs the right owner, a
# denied host gets the deny contract, and nothing else gets out (the
# internet, the LAN, the host's 8006 and 22, the operator console (the real
# sandboxctl console, served on the host's bridge address), egressd's metrics, DNS but
# egressd's policy DNS server, the other sandbox, a spoofed address or MAC);
# egressd's DNS server answers the names the sandbox's policy allows and
# nothing else, and never passes a query on.  A third sandbox, made with
# `transparent on` on a node that loads deploy/proxmox/egressd-redirect.nft,
# gets through with no proxy settings at all (curl, python3, git): its
# tcp/443 and tcp/80 land on egressd's transparent listeners. Negative controls show the
# firewall is what blocks: a namespace on the same bridge without it
# reaches those services, and so does a sandbox whose firewall is turned off
# through the API. deploy/wall-test runs inside a sandbox, and fails in the
# unwalled namespace. extend, reap and destroy remove exactly what they
# should. Root; everything in namespaces of its own.
set -u
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
wall_netns "$@"
. "$TOP/tests/tap.sh"
started=$SECONDS

section() { diag "--- $1 (at $((SECONDS - started)) s)"; }
summary() {
    echo "$((tap_n - tap_failed)) passed, $tap_failed failed ($((SECONDS - started)) s)"
    tap_end
}
wall_up_tap "the topology is up: vmbr99 10.99.0.1/24, internet, LAN, egressd on $PROXY, the simulator with --vm-net"

# json_get JSON PYEXPR: PYEXPR over j = the parsed JSON.
json_get() {
    "$WALL_PY" -S -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(v if not isinstance(v,(dict,list)) else json.dumps(v, sort_keys=True))' "$1" "$2" 2>/dev/null
}
sim_state() {
    pve_sim_ctl GET state | "$WALL_PY" -S -c 'import json,sys; s=json.load(sys.stdin); r=eval(sys.argv[1]); print(r if not isinstance(r,(dict,list)) else json.dumps(r))' "$1"
}
bindings() {
    curl -q -sS --noproxy '*' -m 5 --unix-socket "$T/egressd/admin.sock" http://egressd/v1/sandboxes |
        "$WALL_PY" -S -c 'import json,sys; b={x["id"]: x for x in json.load(sys.stdin)}; r=eval(sys.argv[1]); print(r if not isinstance(r,(dict,list)) else json.dumps(r, sort_keys=True))' "$1"
}
# log_find MARK PYEXPR: the first access-log line after line MARK where
# PYEXPR over l holds (polled for 5 s: a line is written when a request ends).
log_find() {
    "$WALL_PY" -S - "$T/egressd/access.log" "$1" "$2" <<'EOF'
import json, sys, time
path, mark, expr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
end = time.monotonic() + 5
while True:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")[:-1]
    except FileNotFoundError:
        lines = []
    for raw in lines[mark:]:
        try:
            l = json.loads(raw)
            if eval(expr):
                print(raw)
                sys.exit(0)
        except Exception:
            pass
    if time.monotonic() >= end:
        sys.exit(1)
    time.sleep(0.05)
EOF
}
# gcurl NAME ARGS...: curl in sandbox NAME through the proxy, with the test CA.
gcurl() {
    local name=$1
    shift
    sbx exec "$name" --timeout 20 -- curl -q -sS -m 10 --cacert /etc/wall-ca.pem -x "http://$PROXY" "$@"
}
# probe WHO WAIT SPEC...: tests/wall/probe.sh in sandbox WHO or namespace
# ns:NAME; the results in R[SPEC] (the exit status of each try, 0 = reached).
declare -A R
probe() {
    local who=$1 out spec rc
    shift
    R=()
    if [[ $who == ns:* ]]; then
        out=$(ns_probe "${who#ns:}" "$@")
    else
        out=$(guest_probe "$who" "$@")
    fi
    while read -r spec rc; do
        [ -n "$spec" ] && R[$spec]=$rc
    done <<<"$out"
}
reached() { ok "$([ "${R[$2]:-x}" = 0 ]; echo $?)" "$1 (${R[$2]:-no result})"; }
blocked() { ok "$([ -n "${R[$2]:-}" ] && [ "${R[$2]}" != 0 ]; echo $?)" "$1 (${R[$2]:-no result})"; }
standin_count() { grep -c " $1\$" "$T/standin.log" 2>/dev/null; }
lines_of() { wc -l <"$1" 2>/dev/null || echo 0; }

section "two sandboxes, two owners"
out=$(sbx --json create --name alice-1 --size small --owner alice --policy wall 2>&1)
ok $? "sandboxctl create alice-1 (owner alice, policy wall) ($(tr -d '\n' <<<"$out" | head -c 160))"
A=$(json_get "$out" 'j["vmid"]')
A_IP=$(json_get "$out" 'j["address"]')
out=$(sbx --json create --name bob-1 --size small --owner bob --policy wall 2>&1)
ok $? "sandboxctl create bob-1 (owner bob, policy wall) ($(tr -d '\n' <<<"$out" | head -c 160))"
B=$(json_get "$out" 'j["vmid"]')
B_IP=$(json_get "$out" 'j["address"]')
[ -n "$A" ] && [ -n "$B" ] || {
    diag_file "$PVE_SIM_DIR/sim.log"
    bail "both sandboxes exist"
}
A_MAC=$(sim_state "[v['config']['net0'] for v in s['vms'] if v['vmid'] == $A][0].split(',')[0].split('=')[1].lower()")
ok "$(ip -o link show "tap${A}i0" 2>/dev/null | grep -q 'master vmbr99'; echo $?)" \
    "alice-1's NIC: tap${A}i0 is a port of vmbr99"
gaddr=$(sbx exec alice-1 -- ip -o addr show dev eth0 2>&1)
glink=$(sbx exec alice-1 -- ip -o link show dev eth0 2>&1)
ok "$(grep -q "inet $A_IP/24" <<<"$gaddr" && grep -qi "$A_MAC" <<<"$glink"; echo $?)" \
    "  inside it, eth0 has ipconfig0's $A_IP/24 and net0's MAC $A_MAC"
nft=$(sim_state 's["firewall_nft"]')
ok "$(grep -q "ether saddr != $A_MAC .*drop" <<<"$nft" &&
    grep -q "set vm${A}_ipfilter .*elements = { $A_IP }" <<<"$nft" &&
    grep -q "ip daddr { 10.99.0.1 } meta l4proto tcp th dport { 3128 } counter return" <<<"$nft" &&
    grep -q 'drop comment "policy_out DROP"' <<<"$nft"; echo $?)" \
    "  its firewall in nftables: MAC filter, ipfilter-net0 = {$A_IP}, out only to 10.99.0.1:3128, policy_out DROP"
sbx write alice-1 /etc/wall-ca.pem <"$T/certs/ca.pem" >/dev/null &&
    sbx write bob-1 /etc/wall-ca.pem <"$T/certs/ca.pem" >/dev/null
ok $? "the test CA goes into both sandboxes (sandboxctl write)"
out=$(sbx --json sync 2>&1)
ok "$([ "$(json_get "$out" 'j["bindings"]')" = 3 ]; echo $?)" \
    "sandboxctl sync: 3 bindings (alice-1, bob-1 and zoe's late sandbox 150) ($(tr -d '\n' <<<"$out" | head -c 120))"

section "through the proxy"
mark=$(egd_log_lines)
body=$(gcurl alice-1 https://allowed.test/hello 2>&1)
ok "$([ "$body" = "hello from allowed.test" ]; echo $?)" "alice-1: https://allowed.test/hello through the proxy answers ($body)"
line=$(log_find "$mark" 'l["host"] == "allowed.test" and l["src"].split(":")[0] == "'"$A_IP"'"')
ok "$([ "$(json_get "$line" 'j["sandbox"] == "'"$A"'" and j["owner"] == "alice" and j["decision"] == "allow" and j["mode"] == "connect"')" = True ]; echo $?)" \
    "  its log line: sandbox $A, owner alice, connect, allow (${line:0:200})"
mark=$(egd_log_lines)
body=$(gcurl bob-1 http://allowed.test/hello 2>&1)
line=$(log_find "$mark" 'l["host"] == "allowed.test" and l["src"].split(":")[0] == "'"$B_IP"'"')
ok "$([ "$body" = "hello from allowed.test" ] &&
    [ "$(json_get "$line" 'j["sandbox"] == "'"$B"'" and j["owner"] == "bob" and j["mode"] == "http" and j["status"] == 200')" = True ]; echo $?)" \
    "bob-1: http://allowed.test/hello answers, logged as sandbox $B of bob (${line:0:160})"
mark=$(egd_log_lines)
resp=$(gcurl alice-1 -D - -o /dev/null http://denied.test/ 2>&1 | tr -d '\r')
rule=$(sed -n 's/^X-Egress-Deny: //p' <<<"$resp")
ok "$(head -n 1 <<<"$resp" | grep -q '^HTTP/1.1 403' && [ "${rule%%;*}" = not_allowed ]; echo $?)" \
    "alice-1: http://denied.test/ is refused by policy: 403, X-Egress-Deny: $rule"
line=$(log_find "$mark" 'l["host"] == "denied.test"')
ok "$([ "$(json_get "$line" 'j["decision"] == "deny" and j["reason"] == "not_allowed" and j["owner"] == "alice"')" = True ]; echo $?)" \
    "  logged: deny, not_allowed, owner alice"
code=$(gcurl alice-1 -o /dev/null -w '%{http_connect}' https://denied.test/ 2>/dev/null)
ok "$([ "$code" = 403 ]; echo $?)" "alice-1: CONNECT denied.test:443 gets 403 ($code)"
resp=$(gcurl alice-1 -D - -o /dev/null "http://$LAN_IP:8006/" 2>&1 | tr -d '\r')
ok "$(grep -q '^X-Egress-Deny: private_range' <<<"$resp"; echo $?)" \
    "alice-1: the LAN through the proxy (http://$LAN_IP:8006/) is refused, though the preset names it: private_range"
[ $? -eq 0 ] || sed 's/^/#   /' <<<"$resp"

section "the walls, from alice-1"
# (http.server binds, then looks its address up, then listens: egressd's
# DNS server, which the guest's resolv.conf names, refuses that PTR query
# at once)
sbx exec bob-1 -- sh -c "setsid python3 -m http.server 8080 --bind $B_IP </dev/null >/tmp/http.log 2>&1 &"
deadline=$((SECONDS + 15))
while :; do
    code=$(sbx exec bob-1 -- curl -q -s --noproxy '*' -m 2 -o /dev/null -w '%{http_code}' "http://$B_IP:8080/" 2>/dev/null)
    [ "$code" = 200 ] || [ $SECONDS -ge $deadline ] && break
    sleep 0.1
done
ok "$([ "$code" = 200 ]; echo $?)" "bob-1 serves http://$B_IP:8080/ (seen from inside bob-1: the listener is up) (${code:-000})"
[ "$code" = 200 ] || sbx exec bob-1 -- sh -c 'ss -ltnp; tail -n 5 /tmp/http.log' 2>&1 | sed 's/^/#   /'
# The operator console, served where it must never be reachable from: the
# host's address on the sandbox bridge (HTTPS, as any address but loopback
# needs).  The per-VM firewall must keep the sandboxes from it all the same.
{ cat "$CONF"; printf 'console-cert-file %s\nconsole-key-file %s\n' "$T/certs/tools.test.pem" \
    "$T/certs/tools.test.key"; } >"$T/console.conf"
"$SBX_BIN" -c "$T/console.conf" console --listen 10.99.0.1:8480 --port-file "$T/console.port" \
    2>"$T/console.err" &
WALL_PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s "$T/console.port" ] && break; sleep 0.05; done
ok "$([ -s "$T/console.port" ]; echo $?)" "sandboxctl console serves on the host's bridge address 10.99.0.1:8480 (HTTPS) $(head -c 120 "$T/console.err")"
mark=$(egd_log_lines)
probe alice-1 1 tcp:$PROXY tcp:$ALLOWED_IP:443 tcp:$ALLOWED_IP:80 tcp:$LAN_IP:8006 tcp:$LAN_IP:22 \
    tcp:10.99.0.1:8006 tcp:10.99.0.1:22 tcp:10.99.0.1:8480 tcp:$B_IP:8080 tcp:$METRICS \
    udpdns:10.99.0.1 tcpdns:10.99.0.1 udpdns:$INET_DNS tcpdns:$INET_DNS
reached "alice-1 reaches the proxy $PROXY" tcp:$PROXY
blocked "alice-1: no direct HTTPS to the internet ($ALLOWED_IP:443)" tcp:$ALLOWED_IP:443
blocked "alice-1: no direct HTTP to the internet ($ALLOWED_IP:80)" tcp:$ALLOWED_IP:80
blocked "alice-1: not the LAN's 8006 ($LAN_IP)" tcp:$LAN_IP:8006
blocked "alice-1: not the LAN's 22" tcp:$LAN_IP:22
blocked "alice-1: not the host's pveproxy 8006 (10.99.0.1)" tcp:10.99.0.1:8006
blocked "alice-1: not the operator console on the host's 8480, even bound to the bridge" tcp:10.99.0.1:8480
blocked "alice-1: not the host's sshd 22" tcp:10.99.0.1:22
blocked "alice-1: not the other sandbox (bob-1's $B_IP:8080)" tcp:$B_IP:8080
blocked "alice-1: not egressd's metrics ($METRICS)" tcp:$METRICS
reached "alice-1: egressd's DNS server on the host answers over UDP" udpdns:10.99.0.1
reached "alice-1:   and over TCP" tcpdns:10.99.0.1
blocked "alice-1: no DNS answer from the internet's server over UDP ($INET_DNS)" udpdns:$INET_DNS
blocked "alice-1: no DNS answer from the internet's server over TCP" tcpdns:$INET_DNS
ok "$([ "$(standin_count "$A_IP")" = 0 ] && ! grep -q " $A_IP\$" "$T/dns-inet.log" &&
    ! grep -q "\"peer\": \"$A_IP:" "$T/origin.log"; echo $?)" \
    "  and no stand-in, no DNS server but egressd's, and no origin saw anything of alice-1"
line=$(log_find "$mark" 'l["mode"] == "dns" and l["src"].startswith("'"$A_IP"':") and l["host"] == "allowed.test"')
ok "$([ "$(json_get "$line" 'j["owner"] == "alice" and j["answer"] == "NOERROR" and j["decision"] == "allow"')" = True ]; echo $?)" \
    "  egressd logged alice-1's query for allowed.test: owner alice, NOERROR"

section "egressd's DNS server, from alice-1's resolver"
inet_before=$(lines_of "$T/dns-inet.log")
out=$(sbx exec alice-1 -- getent ahostsv4 allowed.test 2>&1)
ok "$(grep -q "^$ALLOWED_IP " <<<"$out"; echo $?)" \
    "alice-1 resolves allowed.test through egressd's DNS server (getent): $(head -n 1 <<<"$out")"
# (sandboxctl exec says 1 for any failure: the guest's status is printed)
gstatus() { sbx exec alice-1 -- sh -c "$1 >/dev/null 2>&1; echo \$?" 2>/dev/null; }
st=$(gstatus 'getent ahostsv4 denied.test')
ok "$([ "$st" = 2 ]; echo $?)" "alice-1: denied.test, which its policy does not allow, does not resolve (getent: $st)"
st=$(gstatus 'getent ahostsv4 private.test')
ok "$([ "$st" = 2 ]; echo $?)" \
    "alice-1: private.test, allowed by name but in the LAN's range, does not resolve (getent: $st)"
ok "$(! grep -q '^denied\.test ' <(tail -n +"$((inet_before + 1))" "$T/dns-inet.log"); echo $?)" \
    "  the internet's DNS server was never asked for denied.test"
mark=$(egd_log_lines)
sbx exec alice-1 -- getent ahostsv4 private.test >/dev/null 2>&1
line=$(log_find "$mark" 'l["mode"] == "dns" and l["host"] == "private.test"')
ok "$([ "$(json_get "$line" 'j["answer"] == "NXDOMAIN" and j["reason"] == "private_range"')" = True ]; echo $?)" \
    "  logged: private.test NXDOMAIN, private_range"
code=$(sbx exec alice-1 -- curl -q -s --noproxy '*' -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:9464/metrics" 2>/dev/null)
ok "$([ "${code:-000}" = 000 ]; echo $?)" "alice-1: 127.0.0.1:9464 is its own loopback: no metrics there (${code:-000})"
probe bob-1 1 tcp:10.99.0.1:22 tcp:$METRICS udpdns:$INET_DNS tcp:$ALLOWED_IP:443 tcp:10.99.0.60:22
blocked "bob-1: not the host's 22" tcp:10.99.0.1:22
blocked "bob-1: not egressd's metrics" tcp:$METRICS
blocked "bob-1: no DNS from the internet's server" udpdns:$INET_DNS
blocked "bob-1: no direct HTTPS to the internet" tcp:$ALLOWED_IP:443

section "negative controls: the firewall is what blocks"
before=$(standin_count $PROBE_IP)
probe ns:probe 1 tcp:10.99.0.1:8006 tcp:10.99.0.1:22 tcp:10.99.0.1:8480 tcp:$METRICS udpdns:10.99.0.1 tcp:10.99.0.1:53 \
    tcp:$B_IP:8080 tcp:$ALLOWED_IP:80
reached "control: a namespace on vmbr99 without a firewall reaches the host's 8006" tcp:10.99.0.1:8006
reached "control: and its 22" tcp:10.99.0.1:22
reached "control: and the operator console (8480)" tcp:10.99.0.1:8480
ok "$([ "$(standin_count $PROBE_IP)" -ge $((before + 2)) ]; echo $?)" "control: the stand-ins logged those connections"
reached "control: and egressd's metrics" tcp:$METRICS
reached "control: and the host's DNS server (UDP)" udpdns:10.99.0.1
# (over TCP egressd closes a source without a binding right after the
# accept, so what the firewall would block here is the connection itself)
reached "control: and its TCP port 53" tcp:10.99.0.1:53
blocked "bob-1's own policy_in DROP keeps the unwalled namespace out of its $B_IP:8080" tcp:$B_IP:8080
blocked "with ip_forward off the unwalled namespace does not reach the internet either" tcp:$ALLOWED_IP:80
echo 1 >/proc/sys/net/ipv4/ip_forward
probe ns:probe 1 tcp:$ALLOWED_IP:80 tcp:$LAN_IP:22
reached "control: with ip_forward on (a careless host), the unwalled namespace reaches the internet directly" tcp:$ALLOWED_IP:80
reached "control: and the LAN" tcp:$LAN_IP:22
probe alice-1 1 tcp:$ALLOWED_IP:80 tcp:$LAN_IP:22
blocked "alice-1 still reaches neither: the internet" tcp:$ALLOWED_IP:80
blocked "  nor the LAN" tcp:$LAN_IP:22
echo 0 >/proc/sys/net/ipv4/ip_forward
pve_api PUT "/nodes/pve1/qemu/$A/firewall/options" '{"enable":0}' >/dev/null
probe alice-1 1 tcp:10.99.0.1:8006
reached "control: alice-1's firewall turned off through the API (enable=0): it reaches the host's 8006" tcp:10.99.0.1:8006
pve_api PUT "/nodes/pve1/qemu/$A/firewall/options" '{"enable":1}' >/dev/null
probe alice-1 1 tcp:10.99.0.1:8006
blocked "  and on again (enable=1): blocked again" tcp:10.99.0.1:8006

section "spoofing"
mark=$(egd_log_lines)
out=$(sbx exec alice-1 -- sh -c "ip addr add $B_IP/32 dev eth0 && curl -q -sS -m 2 --interface $B_IP -x http://$PROXY -o /dev/null -w '%{http_code}' http://allowed.test/hello; rc=\$?; ip addr del $B_IP/32 dev eth0; exit \$rc" 2>&1)
rc=$?
sleep 0.3
ok "$([ $rc -ne 0 ] && [ -z "$(egd_log_since "$mark")" ]; echo $?)" \
    "alice-1 posing as bob-1 ($B_IP, ipfilter): nothing gets through, egressd saw nothing ($(tail -n 1 <<<"$out"))"
out=$(sbx exec alice-1 -- sh -c "ip addr add 10.99.0.200/32 dev eth0 && curl -q -sS -m 2 --interface 10.99.0.200 -x http://$PROXY -o /dev/null -w '%{http_code}' http://allowed.test/hello; rc=\$?; ip addr del 10.99.0.200/32 dev eth0; exit \$rc" 2>&1)
ok "$([ $? -ne 0 ]; echo $?)" "alice-1 from an address no sandbox has (10.99.0.200): nothing gets through"
out=$(sbx exec alice-1 -- sh -c "ip link set eth0 address 02:00:00:00:99:99 && timeout 2 bash -c 'exec 3<>/dev/tcp/${PROXY%:*}/${PROXY#*:}'; rc=\$?; ip link set eth0 address $A_MAC; exit \$rc" 2>&1)
ok "$([ $? -ne 0 ]; echo $?)" "alice-1 with another MAC (macfilter): not even the proxy"
probe alice-1 1 tcp:$PROXY
reached "  with its own MAC and address again: the proxy" tcp:$PROXY

section "deploy/wall-test inside a sandbox, and where there is no wall"
# (the targets are a few of the above: wall-test tries them one by one)
WT_ARGS=(--proxy "$PROXY" --allowed http://allowed.test/hello --denied http://denied.test/
    --direct 10.99.0.1:8006 --direct "$ALLOWED_IP:443" --dns "$INET_DNS" --peer "$B_IP:8080" --timeout 1)
# (the guest's resolv.conf names egressd's DNS server: sandboxctl wrote it)
echo "nameserver 10.99.0.1" >"$T/resolv.conf"
sbx write alice-1 /usr/local/bin/wall-test <"$TOP/deploy/wall-test" >/dev/null
out=$(sbx exec alice-1 --timeout 60 -- bash /usr/local/bin/wall-test --spoof "$B_IP" "${WT_ARGS[@]}" 2>&1)
rc=$?
ok "$([ $rc -eq 0 ] && grep -q '^14 passed, 0 failed$' <<<"$out"; echo $?)" \
    "deploy/wall-test inside alice-1 (sandboxctl exec): $(tail -n 1 <<<"$out")"
[ $rc -eq 0 ] || sed 's/^/#   /' <<<"$out"
out=$(in_ns probe unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec bash "$@"' \
    "$T/resolv.conf" "$TOP/deploy/wall-test" "${WT_ARGS[@]}" 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q '^not ok .* no direct connection to 10.99.0.1:8006$' <<<"$out"; echo $?)" \
    "deploy/wall-test in the unwalled namespace fails and names the hole: $(tail -n 1 <<<"$out")"

section "transparent: a sandbox without proxy settings (sandboxctl transparent on, the node's redirect)"
nft -f "$TOP/deploy/proxmox/egressd-redirect.nft"
ok $? "the node loads deploy/proxmox/egressd-redirect.nft (tcp/443 and tcp/80 from vmbr99 to egressd)"
CONF_T=$T/sandboxctl-transparent.conf
{ cat "$CONF"; echo "transparent on"; } >"$CONF_T"
sbx_t() { "$SBX_BIN" -c "$CONF_T" "$@"; }
out=$(sbx_t --json create --name carol-1 --size small --owner carol --policy wall 2>&1)
ok $? "sandboxctl (transparent on) creates carol-1 ($(tr -d '\n' <<<"$out" | head -c 120))"
C=$(json_get "$out" 'j["vmid"]') C_IP=$(json_get "$out" 'j["address"]')
rules=$(pve_api GET "/nodes/pve1/qemu/$C/firewall/rules")
ok "$([ "$(json_get "$rules" 'len(j["data"]) == 3 and [r for r in j["data"] if r.get("dport") == "80,443" and r["proto"] == "tcp" and not r.get("dest") and r["type"] == "out"] != []')" = True ]; echo $?)" \
    "  its firewall: the proxy, DNS, and tcp 80,443 out to any address"
sbx write carol-1 /etc/wall-ca.pem <"$T/certs/ca.pem" >/dev/null
# cexec CMD...: in carol-1 with an empty environment: no proxy variable,
# no CA bundle from anywhere but the one named
cexec() { sbx exec carol-1 --timeout 30 -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root "$@"; }
mark=$(egd_log_lines)
body=$(cexec curl -q -sS -m 10 --noproxy '*' --cacert /etc/wall-ca.pem https://allowed.test/hello 2>&1)
ok "$([ "$body" = "hello from allowed.test" ]; echo $?)" \
    "carol-1: curl --noproxy '*' https://allowed.test/hello answers, through egressd's DNS and transparent TLS ($body)"
line=$(log_find "$mark" 'l["mode"] == "tls" and l["src"].startswith("'"$C_IP"':")')
ok "$([ "$(json_get "$line" 'j["sni"] == "allowed.test" and j["decision"] == "allow" and j["owner"] == "carol" and j["upstream"] == "'"$ALLOWED_IP"':443"')" = True ]; echo $?)" \
    "  egressd logged it: mode tls, sni allowed.test, owner carol, upstream $ALLOWED_IP:443"
body=$(cexec curl -q -sS -m 10 --noproxy '*' http://allowed.test/hello 2>&1)
ok "$([ "$body" = "hello from allowed.test" ]; echo $?)" "carol-1: plain http://allowed.test/hello, through transparent HTTP ($body)"
body=$(cexec python3 -c 'import ssl, urllib.request
ctx = ssl.create_default_context(cafile="/etc/wall-ca.pem")
print(urllib.request.urlopen("https://allowed.test/hello", context=ctx, timeout=10).read().decode().strip())' 2>&1)
ok "$([ "$body" = "hello from allowed.test" ]; echo $?)" "carol-1: python3 urllib, no proxy variables ($(tail -n 1 <<<"$body"))"
out=$(cexec sh -c 'cd /tmp && rm -rf repo && GIT_SSL_CAINFO=/etc/wall-ca.pem git clone -q https://tools.test/git/repo.git repo && cat repo/README' 2>&1)
ok "$([ "$out" = "hello from tools.test's repository" ]; echo $?)" "carol-1: git clone https://tools.test/git/repo.git, no proxy ($(tail -n 1 <<<"$out"))"
code=$(cexec curl -q -s -m 10 --noproxy '*' --cacert /etc/wall-ca.pem -o /dev/null -w '%{http_code}' https://denied.test/ 2>/dev/null)
ok "$([ "$code" = 000 ]; echo $?)" "carol-1: https://denied.test/ does not resolve, so it goes nowhere ($code)"
mark=$(egd_log_lines)
code=$(cexec curl -q -s -m 10 --noproxy '*' --cacert /etc/wall-ca.pem --resolve "denied.test:443:$DENIED_IP" \
    -o /dev/null -w '%{http_code}' https://denied.test/ 2>/dev/null)
line=$(log_find "$mark" 'l["mode"] == "tls" and l["src"].startswith("'"$C_IP"':")')
ok "$([ "$code" = 000 ] && [ "$(json_get "$line" 'j["decision"] == "deny" and j["sni"] == "denied.test"')" = True ]; echo $?)" \
    "carol-1: denied.test at its address anyway (curl --resolve): the redirect brings it to egressd, which denies it"
mark=$(egd_log_lines)
code=$(cexec curl -q -s -m 10 --noproxy '*' --cacert /etc/wall-ca.pem --resolve "allowed.test:443:$DENIED_IP" \
    -o /dev/null -w '%{http_code}' https://allowed.test/hello 2>/dev/null)
line=$(log_find "$mark" 'l["mode"] == "tls" and l["src"].startswith("'"$C_IP"':")')
ok "$([ "$code" = 000 ] && [ "$(json_get "$line" 'j["reason"] == "sni_mismatch"')" = True ]; echo $?)" \
    "carol-1: an allowed name aimed at another address (domain fronting by IP): sni_mismatch"
ok "$(! grep -q "\"peer\": \"$C_IP:" "$T/origin.log" && ! grep -q " $C_IP\$" "$T/dns-inet.log"; echo $?)" \
    "  no origin and no DNS server on the internet ever saw carol-1's address"
probe carol-1 1 tcp:$ALLOWED_IP:22 tcp:$LAN_IP:22 tcp:10.99.0.1:8006 udpdns:$INET_DNS
blocked "carol-1: still no other port to the internet ($ALLOWED_IP:22)" tcp:$ALLOWED_IP:22
blocked "carol-1: nor the LAN" tcp:$LAN_IP:22
blocked "carol-1: nor the host's 8006" tcp:10.99.0.1:8006
blocked "carol-1: nor another DNS server" udpdns:$INET_DNS
check "destroy carol-1" sbx_t destroy carol-1
nft delete table inet egressd_redirect

section "extend, reap, destroy"
old=$(bindings "b['$A']['expires']")
others=$(bindings "b['$B'], b['150']")
out=$(sbx --json extend alice-1 2h 2>&1)
new=$(json_get "$out" 'j["expires"]')
ok "$([ -n "$new" ] && [ "$new" != "$old" ] && [ "$(bindings "b['$A']['expires']")" = "$new" ] &&
    sim_state "[v for v in s['vms'] if v['vmid'] == $A][0]['config']['description']" 2>/dev/null | grep -q "^expires: $new"; echo $?)" \
    "extend alice-1 2h: expires $old -> $new, in Proxmox and in egressd"
ok "$([ "$(bindings "b['$B'], b['150']")" = "$others" ]; echo $?)" "  bob-1's and sandbox 150's bindings are as they were"
mark=$(egd_log_lines)
code=$(sbx exec late -- curl -q -sS -m 5 -x "http://$PROXY" -o /dev/null -w '%{http_code}' http://allowed.test/hello 2>/dev/null)
line=$(log_find "$mark" 'l["src"].split(":")[0] == "10.99.0.60"')
ok "$([ "$code" = 403 ] && [ "$(json_get "$line" 'j["sandbox"] == "150" and j["owner"] == "zoe"')" = True ]; echo $?)" \
    "zoe's sandbox 150, past its end of life, is walled in too and denied everything ($code)"
out=$(sbx --json reap 2>&1)
ok "$([ "$(json_get "$out" '[x["vmid"] for x in j["reaped"]]')" = "[150]" ]; echo $?)" "reap reaps sandbox 150 only"
nft=$(sim_state 's["firewall_nft"]')
ok "$(! ip link show tap150i0 >/dev/null 2>&1 && ! grep -q 'vm150_' <<<"$nft" &&
    [ "$(bindings '"150" in b')" = False ] && grep -q "vm${A}_out" <<<"$nft" && grep -q "vm${B}_out" <<<"$nft" &&
    ip link show "tap${A}i0" >/dev/null 2>&1 && ip link show "tap${B}i0" >/dev/null 2>&1; echo $?)" \
    "  its NIC, firewall chains and binding are gone; alice-1's and bob-1's are there"
check "destroy alice-1" sbx destroy alice-1
nft=$(sim_state 's["firewall_nft"]')
ok "$(! ip link show "tap${A}i0" >/dev/null 2>&1 && ! grep -q "vm${A}_" <<<"$nft" &&
    [ "$(bindings "'$A' in b")" = False ] && [ "$(sim_state "[v['vmid'] for v in s['vms'] if v['vmid'] == $A]")" = "[]" ]; echo $?)" \
    "  its VM, NIC, firewall chains and binding are gone"
body=$(gcurl bob-1 https://allowed.test/hello 2>&1)
ok "$([ "$body" = "hello from allowed.test" ] && ip link show "tap${B}i0" >/dev/null 2>&1; echo $?)" \
    "  bob-1 is untouched: its NIC is there and it still gets through ($body)"
in_ns probe ip addr add "$A_IP/24" dev eth0
# The host still holds the destroyed VM's MAC for the address; a new
# holder of it would announce itself (gratuitous ARP): forget the old one.
ip neigh flush to "$A_IP" dev vmbr99
mark=$(egd_log_lines)
code=$(in_ns probe curl -q -sS -m 5 --interface "$A_IP" -x "http://$PROXY" -o /dev/null -w '%{http_code}' \
    http://allowed.test/hello 2>/dev/null)
line=$(log_find "$mark" 'l["src"].split(":")[0] == "'"$A_IP"'"')
ok "$([ "$code" = 403 ] && [ "$(json_get "$line" 'j["sandbox"] == "default" and j["owner"] is None')" = True ]; echo $?)" \
    "alice-1's old address $A_IP no longer gets through: 403, judged by the default policy ($code)"
in_ns probe ip addr del "$A_IP/24" dev eth0
check "destroy bob-1" sbx destroy bob-1
ok "$([ -z "$(ip -o link show master vmbr99 | grep -v ' probe0@')" ] && ! nft list tables | grep -q pve_sim &&
    ! pgrep -f "http.server 8080 --bind $B_IP" >/dev/null; echo $?)" \
    "no sandbox is left: no tap on vmbr99, no pve_sim table in nftables, bob-1's server process is gone"
rc=0
kill -TERM "$WALL_EGD_PID" && wait "$WALL_EGD_PID" || rc=$?
WALL_EGD_PID=
ok "$([ $rc -eq 0 ] && ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/egressd/egressd.err"; echo $?)" \
    "egressd stops cleanly (exit $rc, no sanitizer report)"
[ $rc -eq 0 ] || diag_file "$T/egressd/egressd.err"
summary
