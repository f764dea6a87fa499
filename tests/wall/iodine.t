#!/usr/bin/env bash
# tests/wall/iodine.t - DNS tunnelling with the real tool: Debian's iodine
# client in a sandbox against an iodined on the fake internet
# (tests/wall/lib.sh draws the topology; iodined gets 203.0.113.54 of its
# own, authoritative for t.tunnel.test, logging every query it gets).
# From inside a walled sandbox iodine gets no tunnel, through the resolver
# of its resolv.conf (egressd's policy DNS server), through 10.99.0.1 named
# explicitly, or pointed straight at iodined (the per-VM firewall). iodined
# logs no query, the internet's DNS server (egressd's resolver) is never
# asked for anything under tunnel.test, and egressd logs every query as
# NXDOMAIN (A, AAAA) or REFUSED (the other types iodine tries). dig shows
# the same answers type by type. Negative controls show the setup works and
# each check can fail: the unwalled namespace on the bridge, with ip_forward
# on, gets a tunnel and a TCP connection through it, and iodined logs its
# queries; so does the sandbox with its firewall turned off through the API,
# the wall the only difference (and still no tunnel through egressd); with
# .tunnel.test allowed in the policy egressd does ask the internet's DNS
# server (A only) and the log check sees it. Root; everything in network
# namespaces of its own.
set -u
# shellcheck source=tests/wall/lib.sh
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
wall_netns "$@"
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"
started=$SECONDS

IODINED_IP=203.0.113.54
TUN_DOMAIN=t.tunnel.test
TUN_NET=10.53.0.1/27 # iodined's end of the tunnel: 10.53.0.1, clients from .2
TUN_PW=wall-tunnel-pw
TUN_PORT=7777 # a stand-in on iodined's tunnel address: a TCP connection through the tunnel
NAME=mallory-1

section() { diag "--- $1 (at $((SECONDS - started)) s)"; }
summary() {
    echo "$((tap_n - tap_failed)) passed, $tap_failed failed ($((SECONDS - started)) s)"
    tap_end
}
for tool in iodine iodined dig; do
    command -v "$tool" >/dev/null || bail "$tool is installed (iodine, bind9-dnsutils)"
done
[ -c /dev/net/tun ] || bail "/dev/net/tun exists (iodine and iodined need a tun device)"

wall_up_tap "the topology is up: vmbr99 10.99.0.1/24, internet, egressd on $PROXY and DNS 10.99.0.1:53, the simulator with --vm-net"

json_get() {
    "$WALL_PY" -S -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(v if not isinstance(v,(dict,list)) else json.dumps(v, sort_keys=True))' "$1" "$2" 2>/dev/null
}
lines_of() { wc -l <"$1" 2>/dev/null || echo 0; }
# rx_from ADDR: how many queries iodined logged from ADDR ("" = anyone).
rx_from() { grep -c "^RX: client ${1:-[0-9.]*}, " "$T/iodined.log"; }
# rx_types ADDR: the query types iodined logged from ADDR, by name.
rx_types() {
    sed -n "s/^RX: client $1, type \([0-9]*\),.*/\1/p" "$T/iodined.log" | sort -un |
        sed 's/^10$/NULL/; s/^65399$/PRIVATE/; s/^16$/TXT/; s/^33$/SRV/; s/^15$/MX/; s/^5$/CNAME/; s/^1$/A/' |
        tr '\n' ' ' | sed 's/ $//'
}
# inet_tunnel_queries: the internet's DNS server's queries under tunnel.test.
inet_tunnel_queries() { grep -ci '^[^ ]*tunnel\.test ' "$T/dns-inet.log"; }

# iodined: in the internet namespace on an address of its own, in the
# foreground (-f), every query logged (-DD), into the EXIT trap's list.
# `nsenter -n` execs it, so the pid is iodined's.
iodined_up() {
    local pid i
    in_ns inet ip addr add "$IODINED_IP/24" dev eth0 || return 1
    eval "pid=\$NS_inet"
    nsenter -t "$pid" -n -- iodined -f -DD -P "$TUN_PW" -l "$IODINED_IP" "$TUN_NET" "$TUN_DOMAIN" \
        >"$T/iodined.log" 2>&1 &
    WALL_PIDS+=("$!")
    for ((i = 0; i < 100; i++)); do
        grep -q '^Listening to dns for domain' "$T/iodined.log" && break
        kill -0 "${WALL_PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    grep -q '^Listening to dns for domain' "$T/iodined.log" || {
        sed 's/^/#   /' "$T/iodined.log"
        return 1
    }
    bg inet "$T/tunnel-standin.out" "$WALL_PY" -S -u "$WALL_DIR/standin.py" \
        --log "$T/tunnel-standin.log" "${TUN_NET%/*}:$TUN_PORT"
}

# The client, run in a sandbox (sandboxctl exec) or a namespace:
#   bash -c "$IO_SH" io PASSWORD WAIT IODINE-ARGS...
# iodine in the foreground (-f) without raw mode (-r: whatever comes up is
# DNS, not direct UDP to iodined), for at most WAIT s or until it says its
# tunnel is up; then a TCP connection through the tunnel to the stand-in on
# iodined's end, the tun interfaces with an address, iodine's exit status
# (1 when it gives up, and when stopped by SIGTERM while it still tries) and
# whatever is left of its interface.
# shellcheck disable=SC2016 # run by another bash
IO_SH='
pw=$1 wait_s=$2
shift 2
log=$(mktemp)
iodine -f -r -P "$pw" "$@" >"$log" 2>&1 &
pid=$!
end=$((SECONDS + wait_s))
while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
    grep -q "^Connection setup complete" "$log" && break
    sleep 0.2
done
if grep -q "^Connection setup complete" "$log"; then
    if got=$(timeout 5 bash -c "exec 3<>/dev/tcp/${TUN_SERVER}/${TUN_PORT} && head -n 1 <&3" 2>&1); then
        echo "@tcp $got"
    else
        echo "@tcp failed"
    fi
fi
ip -o -4 addr show | awk "\$2 ~ /^dns/ { print \"@tun \" \$2, \$4 }"
kill "$pid" 2>/dev/null
wait "$pid"
echo "@rc $?"
sleep 0.2
ip -o link show | awk -F": " "\$2 ~ /^dns/ { print \"@left \" \$2 }"
sed "s/^/| /" "$log"
rm -f "$log"
'
# iodine_in WHERE WAIT ARGS...: IO_SH in sandbox WHERE or namespace ns:NAME;
# the results in IO_OUT (everything), IO_RC, IO_UP (1 when the tunnel came
# up: iodine's setup-complete line, or a dns interface with an address),
# IO_TCP (the stand-in's line through the tunnel).
iodine_in() {
    local where=$1 wait_s=$2 env
    shift 2
    env=(env "TUN_SERVER=${TUN_NET%/*}" "TUN_PORT=$TUN_PORT" bash -c "$IO_SH" io "$TUN_PW" "$wait_s")
    if [[ $where == ns:* ]]; then
        IO_OUT=$(in_ns "${where#ns:}" "${env[@]}" "$@" 2>&1)
    else
        IO_OUT=$(sbx exec "$where" --timeout $((wait_s + 20)) -- "${env[@]}" "$@" 2>&1)
    fi
    IO_RC=$(sed -n 's/^@rc //p' <<<"$IO_OUT")
    IO_TCP=$(sed -n 's/^@tcp //p' <<<"$IO_OUT")
    IO_UP=0
    grep -qE '^(\| .*Connection setup complete|@tun )' <<<"$IO_OUT" && IO_UP=1
}
io_diag() { sed -n 's/^| /#   iodine: /p; s/^@\(tun\|left\|tcp\) /#   \1: /p' <<<"$IO_OUT" | head -n "${1:-12}"; }
io_last() {
    sed -n 's/^| //p' <<<"$IO_OUT" | grep -ioE '(No suitable|Stopped while|Connection setup).*' | head -n 1 | grep . ||
        sed -n 's/^| //p' <<<"$IO_OUT" | grep -v '^ *$' | tail -n 1
}
io_says() { sed -n 's/^| //p' <<<"$IO_OUT" | grep -E "$1" | head -n 1; }
no_tunnel() {
    # no setup-complete line, no tun interface with an address, none left
    # over, iodine ended non-zero (it gave up, or stopped when WAIT was over)
    ok "$([ "$IO_UP" = 0 ] && [ -n "$IO_RC" ] && [ "$IO_RC" != 0 ] && ! grep -q '^@left ' <<<"$IO_OUT"; echo $?)" \
        "$1: no tunnel (exit ${IO_RC:-none}; $(io_last))"
    [ "$IO_UP" = 0 ] || io_diag 30
}
tunnel_up() {
    ok "$([ "$IO_UP" = 1 ] && grep -q '^| .*Connection setup complete' <<<"$IO_OUT" &&
        grep -q '^@tun dns' <<<"$IO_OUT"; echo $?)" \
        "$1: the tunnel comes up ($(io_says 'Connection setup complete'); $(sed -n 's/^@tun //p' <<<"$IO_OUT" | head -n 1))"
    [ "$IO_UP" = 1 ] || io_diag 30
}

# egd_dns MARK SRC SUFFIX: egressd's dns lines after line MARK from address
# SRC for names under SUFFIX, as "TYPE ANSWER DECISION REASON COUNT" (polled
# until no new line comes for 0.5 s, at most 5 s).
egd_dns() {
    "$WALL_PY" -S - "$T/egressd/access.log" "$1" "$2" "$3" <<'EOF'
import json, sys, time
path, mark, src, suffix = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].lower()
def read():
    got = {}
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")[:-1]
    except FileNotFoundError:
        lines = []
    for raw in lines[mark:]:
        try:
            l = json.loads(raw)
        except ValueError:
            continue
        host = (l.get("host") or "").lower().rstrip(".")
        if l.get("mode") != "dns" or (l.get("src") or "").rsplit(":", 1)[0] != src:
            continue
        if host != suffix and not host.endswith("." + suffix):
            continue
        k = (l["method"], l["answer"], l["decision"], l["reason"])
        got[k] = got.get(k, 0) + (l.get("count") or 1)
    return got
end, last, seen = time.monotonic() + 5, None, time.monotonic()
while True:
    now = read()
    if now != last:
        last, seen = now, time.monotonic()
    if (last and time.monotonic() - seen >= 0.5) or time.monotonic() >= end:
        break
    time.sleep(0.1)
for k in sorted(last):
    print(*(str(x) for x in k), last[k])
EOF
}
# denied_only SUMMARY: lines there, every one denied at once by egressd: A,
# AAAA, HTTPS and SVCB NXDOMAIN by the policy (not_allowed: no server was
# asked), every other type REFUSED as not served (bad_request).
denied_only() {
    [ -n "$1" ] && ! awk '{ name = ($1 ~ /^(A|AAAA|HTTPS|SVCB)$/)
        if ($2 != (name ? "NXDOMAIN" : "REFUSED") || $3 != "deny" || $4 != (name ? "not_allowed" : "bad_request"))
            bad = 1 } END { exit !bad }' <<<"$1"
}
types_of() { awk '{ print $1 }' <<<"$1" | sort -u | tr '\n' ' ' | sed 's/ $//'; }

section "iodined on the internet, a sandbox"
iodined_up
ok $? "iodined listens on $IODINED_IP:53 for $TUN_DOMAIN, tunnel end ${TUN_NET%/*}, a stand-in on ${TUN_NET%/*}:$TUN_PORT"
out=$(sbx --json create --name "$NAME" --size small --owner mallory --policy wall 2>&1)
ok $? "sandboxctl create $NAME (owner mallory, policy wall) ($(tr -d '\n' <<<"$out" | head -c 160))"
S=$(json_get "$out" 'j["vmid"]')
S_IP=$(json_get "$out" 'j["address"]')
if [ -z "$S" ] || [ -z "$S_IP" ]; then
    [ -n "${PVE_SIM_DIR:-}" ] && diag_file "$PVE_SIM_DIR/sim.log"
    bail "the sandbox exists"
fi
resolv=$(sbx exec "$NAME" -- cat /etc/resolv.conf 2>&1)
ok "$(grep -q '^nameserver 10\.99\.0\.1$' <<<"$resolv" && [ "$(grep -c '^nameserver' <<<"$resolv")" = 1 ]; echo $?)" \
    "  its resolv.conf names egressd's DNS server only ($(grep '^nameserver' <<<"$resolv" | tr '\n' ' '))"
inet0=$(lines_of "$T/dns-inet.log")

section "iodine inside the sandbox"
mark=$(egd_log_lines)
iodine_in "$NAME" 20 "$TUN_DOMAIN"
no_tunnel "$NAME: iodine $TUN_DOMAIN (the resolver of its resolv.conf)"
io_diag 10
ok "$(io_says '^Sending DNS queries' | grep -q " to 10\.99\.0\.1\$"; echo $?)" \
    "  it did ask the resolver of resolv.conf, 10.99.0.1 ($(io_says '^Sending DNS queries'))"
r1=$(egd_dns "$mark" "$S_IP" tunnel.test)
denied_only "$r1"
ok $? "  egressd logged its queries, all denied: A/AAAA NXDOMAIN, every other type REFUSED ($(tr '\n' ',' <<<"$r1" | sed 's/,$//'))"
diag "iodine (resolv.conf) asked egressd for types: $(types_of "$r1")"
mark=$(egd_log_lines)
iodine_in "$NAME" 20 10.99.0.1 "$TUN_DOMAIN"
no_tunnel "$NAME: iodine 10.99.0.1 $TUN_DOMAIN (egressd's DNS server named)"
r2=$(egd_dns "$mark" "$S_IP" tunnel.test)
denied_only "$r2"
ok $? "  egressd logged them, all denied ($(tr '\n' ',' <<<"$r2" | sed 's/,$//'))"
diag "iodine (10.99.0.1) asked egressd for types: $(types_of "$r2")"
# iodined straight: the per-VM firewall (ip_forward is on, as on a careless
# host, so the wall alone is what blocks; the control below turns it off)
echo 1 >/proc/sys/net/ipv4/ip_forward
iodine_in "$NAME" 6 "$IODINED_IP" "$TUN_DOMAIN"
no_tunnel "$NAME: iodine $IODINED_IP $TUN_DOMAIN (iodined straight, ip_forward on): the firewall"
echo 0 >/proc/sys/net/ipv4/ip_forward
ok "$([ "$(rx_from)" = 0 ]; echo $?)" "iodined logged no query at all ($(rx_from) RX lines)"
ok "$([ "$(inet_tunnel_queries)" = 0 ]; echo $?)" \
    "the internet's DNS server ($INET_DNS) was asked nothing under tunnel.test, by anyone ($(inet_tunnel_queries) queries; $(($(lines_of "$T/dns-inet.log") - inet0)) queries in all since the sandbox was made)"
ok "$([ -z "$(sbx exec "$NAME" -- ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^dns/')" ]; echo $?)" \
    "no dns interface is left in $NAME"

section "dig in the sandbox, type by type (egressd's DNS server)"
label=$(printf 'a%.0s' {1..63})
# shellcheck disable=SC2016 # run by the guest's bash
DIG_SH='
for q in "$@"; do
    set -- $q
    h=$(dig @10.99.0.1 +tries=1 +time=2 +noall +comments "$2" "$1" 2>&1)
    st=$(sed -n "s/.*status: \([A-Z]*\),.*/\1/p" <<<"$h")
    an=$(sed -n "s/.*ANSWER: \([0-9]*\),.*/\1/p" <<<"$h")
    echo "$1 $2 ${st:-none} ${an:-none}"
done
'
mark=$(egd_log_lines)
dig_out=$(sbx exec "$NAME" --timeout 40 -- bash -c "$DIG_SH" dig "TXT x.$TUN_DOMAIN" "ANY x.$TUN_DOMAIN" \
    "NULL x.$TUN_DOMAIN" "TYPE65399 x.$TUN_DOMAIN" "SRV x.$TUN_DOMAIN" "MX x.$TUN_DOMAIN" \
    "CNAME x.$TUN_DOMAIN" "HTTPS x.$TUN_DOMAIN" "HTTPS allowed.test" "A $label.$TUN_DOMAIN" \
    "AAAA x.$TUN_DOMAIN" "A allowed.test" 2>&1)
declare -A DIG
while read -r ty nm st an; do
    [ -n "$ty" ] && DIG["$ty $nm"]="$st $an"
done <<<"$dig_out"
dig_is() { ok "$([ "${DIG[$2]:-x}" = "$3" ]; echo $?)" "$1 (dig $2: ${DIG[$2]:-no answer})"; }
dig_is "TXT under the tunnel domain: REFUSED" "TXT x.$TUN_DOMAIN" "REFUSED 0"
dig_is "ANY: REFUSED" "ANY x.$TUN_DOMAIN" "REFUSED 0"
dig_is "NULL (iodine's first choice): REFUSED" "NULL x.$TUN_DOMAIN" "REFUSED 0"
dig_is "PRIVATE (TYPE65399, iodine's second): REFUSED" "TYPE65399 x.$TUN_DOMAIN" "REFUSED 0"
dig_is "SRV: REFUSED" "SRV x.$TUN_DOMAIN" "REFUSED 0"
dig_is "MX: REFUSED" "MX x.$TUN_DOMAIN" "REFUSED 0"
dig_is "CNAME: REFUSED" "CNAME x.$TUN_DOMAIN" "REFUSED 0"
dig_is "HTTPS under the tunnel domain (denied): NXDOMAIN" "HTTPS x.$TUN_DOMAIN" "NXDOMAIN 0"
dig_is "HTTPS for allowed.test: NODATA (NOERROR, no answer)" "HTTPS allowed.test" "NOERROR 0"
dig_is "a 63-byte label under the tunnel domain (A): NXDOMAIN" "A $label.$TUN_DOMAIN" "NXDOMAIN 0"
dig_is "AAAA under the tunnel domain: NXDOMAIN" "AAAA x.$TUN_DOMAIN" "NXDOMAIN 0"
dig_is "  (and A allowed.test answers: the server does answer)" "A allowed.test" "NOERROR 1"
rd=$(egd_dns "$mark" "$S_IP" tunnel.test)
ok "$([ "$(inet_tunnel_queries)" = 0 ] && [ "$(rx_from)" = 0 ] && denied_only "$rd"; echo $?)" \
    "  all logged by egressd as denied, none passed on: the internet's DNS server and iodined heard nothing"

section "negative controls: where there is no wall, the tunnel works"
echo 1 >/proc/sys/net/ipv4/ip_forward
iodine_in ns:probe 15 "$IODINED_IP" "$TUN_DOMAIN"
tunnel_up "control: the unwalled namespace ($PROBE_IP, ip_forward on), iodine $IODINED_IP $TUN_DOMAIN"
ok "$([ "$IO_TCP" = "standin ${TUN_NET%/*}:$TUN_PORT" ] && grep -q "^${TUN_NET%/*}:$TUN_PORT 10\.53\.0\." "$T/tunnel-standin.log"; echo $?)" \
    "control: a TCP connection through the tunnel reaches the stand-in on ${TUN_NET%/*}:$TUN_PORT (${IO_TCP:-nothing}; $(tail -n 1 "$T/tunnel-standin.log" 2>/dev/null))"
ok "$([ "$(rx_from "$PROBE_IP")" -gt 0 ]; echo $?)" \
    "control: iodined logged its queries ($(rx_from "$PROBE_IP") from $PROBE_IP, types $(rx_types "$PROBE_IP"))"
ok "$(! grep -q '^@left ' <<<"$IO_OUT"; echo $?)" "control: its dns interface goes with it"
pve_api PUT "/nodes/pve1/qemu/$S/firewall/options" '{"enable":0}' >/dev/null
rx0=$(rx_from "$S_IP")
iodine_in "$NAME" 15 "$IODINED_IP" "$TUN_DOMAIN"
tunnel_up "control: $NAME with its firewall off (enable=0 through the API), the same iodine $IODINED_IP"
ok "$([ "$IO_TCP" = "standin ${TUN_NET%/*}:$TUN_PORT" ] && [ "$(rx_from "$S_IP")" -gt "$rx0" ]; echo $?)" \
    "control:   TCP through its tunnel (${IO_TCP:-nothing}), iodined logged $(($(rx_from "$S_IP") - rx0)) queries from $S_IP"
mark=$(egd_log_lines)
iodine_in "$NAME" 20 "$TUN_DOMAIN"
no_tunnel "$NAME with its firewall off, through its resolver (egressd) still"
r3=$(egd_dns "$mark" "$S_IP" tunnel.test)
ok "$(denied_only "$r3" && [ "$(inet_tunnel_queries)" = 0 ]; echo $?)" \
    "  egressd denied it all again, asking nobody ($(tr '\n' ',' <<<"$r3" | sed 's/,$//'))"
pve_api PUT "/nodes/pve1/qemu/$S/firewall/options" '{"enable":1}' >/dev/null
echo 0 >/proc/sys/net/ipv4/ip_forward

section "control: with .tunnel.test allowed, egressd passes A queries on"
# The log checks above can fail: let the policy allow the tunnel domain and
# egressd asks its resolver for the A names iodine sends (the internet's
# DNS server is not iodined's parent: still no tunnel); the other types stay
# REFUSED.
admin() { curl -q -sS --noproxy '*' -m 5 --unix-socket "$T/egressd/admin.sock" "$@"; }
cp "$T/egressd/policies/wall.allow" "$T/wall.allow.orig"
printf '%s\n' '# iodine.t: the tunnel domain allowed, for a moment' '.tunnel.test' >>"$T/egressd/policies/wall.allow"
admin -X POST -o /dev/null http://egressd/v1/reload
ok $? "egressd reloads with .tunnel.test in the wall preset"
mark=$(egd_log_lines)
iodine_in "$NAME" 20 "$TUN_DOMAIN"
r4=$(egd_dns "$mark" "$S_IP" tunnel.test)
ok "$([ "$(inet_tunnel_queries)" -gt 0 ] && ! denied_only "$r4" &&
    [ -n "$(awk '$1 == "A" && $4 != "not_allowed"' <<<"$r4")" ]; echo $?)" \
    "control: now the internet's DNS server is asked ($(inet_tunnel_queries) queries under tunnel.test) and egressd's A lines are not not_allowed: the checks above would fail ($(tr '\n' ',' <<<"$r4" | sed 's/,$//'))"
ok "$(! awk '$1 != "A" && $1 != "AAAA" && $2 != "REFUSED" { bad = 1 } END { exit !bad }' <<<"$r4" && [ "$IO_UP" = 0 ]; echo $?)" \
    "  the other types stay REFUSED, and iodine still gets no tunnel ($(io_last))"
cp "$T/wall.allow.orig" "$T/egressd/policies/wall.allow"
admin -X POST -o /dev/null http://egressd/v1/reload

section "the end"
check "destroy $NAME" sbx destroy "$NAME"
rc=0
kill -TERM "$WALL_EGD_PID" && wait "$WALL_EGD_PID" || rc=$?
WALL_EGD_PID=
ok "$([ $rc -eq 0 ] && ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/egressd/egressd.err"; echo $?)" \
    "egressd stops cleanly (exit $rc, no sanitizer report)"
[ $rc -eq 0 ] || diag_file "$T/egressd/egressd.err"
summary
