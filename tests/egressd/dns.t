#!/usr/bin/env bash
# dns.t - the policy DNS server (`dns ADDR:PORT`), asked with dig (and raw
# packets where dig cannot make them): a sandbox known by its source
# address gets the addresses of the names its policy allows, after the
# address phase, from egressd's own resolver (hosts-file, then the test's
# own DNS server, tests/egressd/dnsd.py, which logs every query it gets);
# a denied name is NXDOMAIN and never reaches that server; HTTPS/SVCB are
# NODATA; other types, unknown sources and a sandbox past its rate are
# REFUSED; malformed packets get FORMERR or nothing; TCP, EDNS0 and TC
# work; every query is logged and counted.
# TAP on stdout.  Needs BUILD_DIR, TOP, dig; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
command -v dig >/dev/null || egm_bail "dig is installed (bind9-dnsutils)"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

DNS=127.0.0.1
DNS_PORT=5353
SB_ADDR=127.0.0.5    # the sandbox's source address
OTHER_ADDR=127.0.0.6 # a source without a binding
LONG=$(printf 'x%.0s' {1..60})
MANY=$LONG.$LONG.$LONG.many.test # 16 AAAA of a long name: more than 512 bytes
{
    echo 'up.test A 127.0.0.22 300'
    echo 'v6.test AAAA 2a00:1450:4001:80b::200e 300'
    echo 'private.test A 10.0.0.5'
    echo 'mixed.test A 127.0.0.23'
    echo 'mixed.test A 192.168.1.1'
    echo 'short.test A 127.0.0.24 5'
    echo 'ssh-only.test A 127.0.0.25'
    echo 'gone.test SERVFAIL'
    echo 'rot.test A 127.0.0.26 1'
} >"$T/zone"
# (from the hosts-file: egressd's resolver asks servers over UDP without
# EDNS0, so an answer over 512 bytes could not come from one)
for i in $(seq 1 16); do egd_host "2a00:1450:4001:80b::$i" "$MANY"; done
egd_allow 'up.test' 'v6.test' 'private.test' 'mixed.test' 'short.test' 'ssh-only.test:22 raw' \
    '.many.test' 'gone.test' 'nowhere.test' "rot.test:$EGD_HTTPS_PORT"
egm_server "$T/dnsd.out" "$EGD_PY" -S -u "$EGD_DIR/dnsd.py" --listen 127.0.0.53:53 \
    --zone "$T/zone" --log "$T/upstream.log" || egm_bail "the test's DNS server starts"
DNSD_PID=${EGD_PIDS[-1]}
# --- the directives, checked by egressd -t (each error names its line)
conf_bad() { # conf_bad LINE WANT: egressd -t refuses LINE with a message matching WANT
    egd_write_config "$1"
    "$EGD_BIN" -t -c "$T/egressd.conf" >"$T/check.out" 2>&1
    local rc=$?
    if [ "$rc" -eq 1 ] && grep -q "egressd.conf:[0-9]*: $2" "$T/check.out"; then
        ok 0 "egressd -t refuses '$1'"
    else
        ok 1 "egressd -t refuses '$1' (status $rc)"
        sed 's/^/#   /' "$T/check.out"
    fi
}
conf_bad 'dns localhost:53' "expected a numeric ADDR:PORT"
conf_bad 'dnss 127.0.0.1:53' "unknown directive 'dnss'; did you mean 'dns'?"
conf_bad 'dns-ttl-max 500ms' "expected a TTL of whole seconds, 1s..24h, found '500ms'"
conf_bad 'dns-ttl-max 2d' "expected a TTL of whole seconds"
conf_bad 'dns-log some' "expected 'all', 'summary' or 'off', found 'some'"
conf_bad 'dns-rate-per-sandbox fast' "expected a number, found 'fast'"
conf_bad 'dns-aaaa yes' "expected 'on' or 'off', found 'yes'"
egd_write_config "dns $DNS:$DNS_PORT" 'dns-ttl-max 1h' 'dns-log summary' 'dns-log-interval 1s' \
    'dns-rate-per-sandbox 0' 'dns-aaaa off'
check "egressd -t takes every dns directive" "$EGD_BIN" -t -c "$T/egressd.conf"

egd_origin a.test || egm_bail "the origin a.test starts"
egd_start 'resolver 127.0.0.53' "dns $DNS:$DNS_PORT" 'dns-ttl-max 30s' \
    'dns-rate-per-sandbox 100' || egm_bail "egressd starts with a dns listener"
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"box\",\"owner\":\"alice\",\"addresses\":[\"$SB_ADDR\"],\"policy\":\"test\"}" \
    >/dev/null || egm_bail "PUT sandbox sb1"

# q [dig options...] NAME [TYPE]: dig from the sandbox's address.
q() { dig -b "$SB_ADDR" "@$DNS" -p "$DNS_PORT" +tries=1 +time=3 "$@" 2>&1; }
status_of() { sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<<"$1" | head -n 1; }
answers() { dig_answers <<<"$1"; }
dig_answers() { awk '/^;; ANSWER SECTION:/ { a = 1; next } /^$/ { a = 0 } a && !/^;/ { print $NF }'; }
ttl_of() { awk '/^;; ANSWER SECTION:/ { a = 1; next } a && !/^;/ && NF { print $2; exit }' <<<"$1"; }
upstream_asked() { grep -c -i -- "^$1 " "$T/upstream.log" 2>/dev/null; }
dns_ok() { # dns_ok TEXT OUTPUT STATUS [ANSWERS]: the status, and the answers in order
    local got
    got=$(answers "$2" | tr '\n' ' ' | sed 's/ $//')
    if [ "$(status_of "$2")" = "$3" ] && { [ $# -lt 4 ] || [ "$got" = "$4" ]; }; then
        ok 0 "$1"
    else
        ok 1 "$1 (status $(status_of "$2"), answers '$got')"
        sed 's/^/#   /' <<<"$2" | head -n 30
    fi
}

# --- allowed names
out=$(q up.test A)
dns_ok "A of an allowed name: its address, from the test's DNS server" "$out" NOERROR 127.0.0.22
ttl=$(ttl_of "$out")
ok $((!(ttl >= 1 && ttl <= 30))) "its TTL is capped at dns-ttl-max 30s (got $ttl, the server said 300)"
egd_log_mark
out=$(q a.test A)
dns_ok "A of a name from the hosts-file" "$out" NOERROR 127.0.0.16
egd_log_ok "its log line: mode dns, the sandbox, owner, name, type, answer, count" \
    'l["mode"] == "dns" and l["host"] == "a.test"' \
    'l["sandbox"] == "sb1" and l["owner"] == "alice" and l["method"] == "A" and l["decision"] == "allow" and l["answer"] == "NOERROR" and l["count"] == 1 and l["port"] == 4443 and l["src"].startswith("'$SB_ADDR':")'
dns_ok "AAAA of a name with none: NODATA" "$(q up.test AAAA)" NOERROR ""
dns_ok "AAAA of an allowed name with a public IPv6 address" "$(q v6.test AAAA)" NOERROR \
    2a00:1450:4001:80b::200e
out=$(q ssh-only.test A)
dns_ok "a name allowed on port 22 only resolves too" "$out" NOERROR 127.0.0.25
out=$(q UP.TeSt A)
dns_ok "a name in mixed case (0x20)" "$out" NOERROR 127.0.0.22
ok $(grep -q '^UP\.TeSt\.[[:space:]]' <<<"$out" && echo 0 || echo 1) \
    "the answer names the question exactly as it was asked"
out=$(q +tcp up.test A)
dns_ok "over TCP" "$out" NOERROR 127.0.0.22
out=$(q +noedns "$MANY" AAAA)
ok $(grep -q 'Truncated, retrying in TCP mode' <<<"$out" && echo 0 || echo 1) \
    "16 AAAA of a long name over UDP without EDNS0: TC set, dig asks again over TCP" ||
    sed 's/^/#   /' <<<"$out" | head -n 40
ok $(($(answers "$out" | wc -l) != 16)) "over TCP all 16 come ($(answers "$out" | wc -l))"
out=$(q +bufsize=4096 "$MANY" AAAA)
ok $(($(answers "$out" | wc -l) != 16 || $(grep -c 'Truncated' <<<"$out") != 0)) \
    "with EDNS0 (4096) they fit in one datagram of at most our 1232"
ok $(grep -q 'udp: 1232' <<<"$out" && echo 0 || echo 1) "our OPT offers 1232 bytes"
out=$(q +edns=1 +noednsnegotiation up.test A)
dns_ok "EDNS version 1: BADVERS" "$out" BADVERS

# --- denied names: NXDOMAIN, and not one query upstream
egd_log_mark
out=$(q evil.test A)
dns_ok "a name the policy does not allow: NXDOMAIN" "$out" NXDOMAIN
egd_log_ok "its log line says not_allowed, NXDOMAIN" 'l["mode"] == "dns" and l["host"] == "evil.test"' \
    'l["decision"] == "deny" and l["reason"] == "not_allowed" and l["answer"] == "NXDOMAIN" and l["port"] is None'
out=$(q "$LONG.aGVsbG8gd29ybGQ.evil.test" A)
dns_ok "a long label under a denied name: NXDOMAIN" "$out" NXDOMAIN
dns_ok "a denied name blocked.test (deny rule)" "$(q blocked.test A)" NXDOMAIN
egd_log_ok "its log line names the deny rule" 'l["mode"] == "dns" and l["host"] == "blocked.test"' \
    'l["reason"] == "deny_rule" and l["rule"].endswith("/'"$(egd_rule 'deny blocked.test')"'")'
dns_ok "an allowed name that resolves privately: NXDOMAIN" "$(q private.test A)" NXDOMAIN
egd_log_ok "its log line says private_range" 'l["mode"] == "dns" and l["host"] == "private.test"' \
    'l["reason"] == "private_range" and l["answer"] == "NXDOMAIN"'
dns_ok "one private address beside a public one: NXDOMAIN" "$(q mixed.test A)" NXDOMAIN
dns_ok "an allowed name the origin's server does not know: NXDOMAIN" "$(q nowhere.test A)" NXDOMAIN
dns_ok "an allowed name whose server fails: SERVFAIL" "$(q gone.test A)" SERVFAIL
dns_ok "a name that is an IP address: NXDOMAIN" "$(q 127.0.0.22 A)" NXDOMAIN
n=0
for name in evil.test aghvbgxvihdvcmxk.evil.test blocked.test; do
    n=$((n + $(upstream_asked "$name")))
done
ok $((n != 0)) "the test's DNS server was never asked a denied name ($n queries)"
asked=$(upstream_asked up.test)
ok $((asked < 2 || asked > 4)) \
    "the allowed name was asked at most once per worker and family, then came from the cache ($asked)"

# --- types
dns_ok "HTTPS of an allowed name: NODATA (no ECH configuration)" "$(q up.test HTTPS)" NOERROR ""
dns_ok "SVCB of an allowed name: NODATA" "$(q up.test SVCB)" NOERROR ""
dns_ok "HTTPS of a denied name: NXDOMAIN" "$(q evil.test HTTPS)" NXDOMAIN
for t in TXT ANY MX NULL CNAME NS; do
    dns_ok "$t of an allowed name: REFUSED" "$(q up.test "$t")" REFUSED
done
dns_ok "class CH: REFUSED" "$(q -c CH up.test A)" REFUSED
ok $(($(upstream_asked up.test) != asked)) "no other type reached the test's DNS server"

# --- who asks
out=$(dig -b "$OTHER_ADDR" "@$DNS" -p "$DNS_PORT" +tries=1 +time=3 up.test A 2>&1)
dns_ok "a source without a binding: REFUSED" "$out" REFUSED

# --- malformed packets (python: dig only sends well-formed ones)
raw_dns() { # raw_dns HEX: send HEX from the sandbox's address; print the answer's hex or "none"
    py - "$SB_ADDR" "$DNS" "$DNS_PORT" "$1" <<'EOF'
import socket, sys
src, dst, port, hexmsg = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
s.settimeout(1.0)
s.sendto(bytes.fromhex(hexmsg), (dst, port))
try:
    print(s.recv(65535).hex())
except socket.timeout:
    print("none")
EOF
}
ok $([ "$(raw_dns 0102030405)" = none ] && echo 0 || echo 1) "5 bytes: no answer"
# a response (QR set) is never answered: no reflection, no loops
ok $([ "$(raw_dns 12348180000100000000000002757004746573740000010001)" = none ] && echo 0 || echo 1) \
    "a response packet: no answer"
# a question whose name is a compression pointer to itself
got=$(raw_dns 1234010000010000000000000c0c00010001)
ok $([ "${got:0:8}" = 12348181 ] && echo 0 || echo 1) "a pointer in the question: FORMERR, id kept ($got)"
# two questions
got=$(raw_dns 123401000002000000000000027570047465737400000100010275700474657374000001000100)
ok $([ "${got:4:4}" = 8181 ] && echo 0 || echo 1) "two questions: FORMERR ($got)"
# opcode 2 (STATUS)
got=$(raw_dns 12341100000100000000000002757004746573740000010001)
ok $([ "${got:7:1}" = 4 ] && echo 0 || echo 1) "opcode STATUS: NOTIMP ($got)"
# a label of 64 bytes
got=$(raw_dns "12340100000100000000000040$(printf '61%.0s' {1..64})0000010001")
ok $([ "${got:4:4}" = 8181 ] || [ "$got" = none ] && echo 0 || echo 1) "a 64-byte label: FORMERR ($got)"
dns_ok "egressd still answers after all of them" "$(q up.test A)" NOERROR 127.0.0.22

# --- the denials ring holds the DNS denials
den=$(egd_admin GET /v1/sandboxes/sb1/denials)
ok_json "GET /v1/sandboxes/sb1/denials lists the denied names with mode dns" "$den" \
    'any(d["mode"] == "dns" and d["host"] == "evil.test" and d["reason"] == "not_allowed" for d in l["denials"])'

# --- the rate: a burst of 10 000 random names, then the sandbox's other traffic
burst=$(py - "$SB_ADDR" "$DNS" "$DNS_PORT" <<'EOF'
import os, socket, struct, sys, time
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
s.setblocking(False)
rcodes = {}
def drain():
    while True:
        try:
            m = s.recv(65535)
        except BlockingIOError:
            return
        rcodes[m[3] & 15] = rcodes.get(m[3] & 15, 0) + 1
for i in range(10000):
    label = os.urandom(12).hex().encode()
    msg = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
    msg += bytes([len(label)]) + label + b"\x04evil\x04test\x00" + struct.pack(">HH", 1, 1)
    try:
        s.sendto(msg, (dst, port))
    except BlockingIOError:
        pass
    if i % 100 == 0:
        drain()
end = time.time() + 2
while time.time() < end:
    drain()
    time.sleep(0.05)
print(rcodes.get(3, 0), rcodes.get(5, 0))
EOF
)
read -r nx refused <<<"$burst"
ok $((!(refused > 0 && nx <= 1000))) \
    "10 000 random names in a burst: most are REFUSED by the rate ($nx NXDOMAIN, $refused REFUSED)"
ok $(($(upstream_asked '[0-9a-f]*\.evil\.test') != 0)) "none of them reached the test's DNS server"
sleep 1.1
dns_ok "a second later the sandbox resolves again" "$(q up.test A)" NOERROR 127.0.0.22
code=$(egd_curl -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" "http://a.test:$EGD_HTTP_PORT/hello" 2>/dev/null)
ok $([ "$code" = 200 ] && echo 0 || echo 1) "its traffic through the proxy still works (HTTP $code)"
v=$(egd_metric 'egressd_dns_queries_total{result="rate_limited"}')
ok $((!(v > 0))) "egressd_dns_queries_total{result=\"rate_limited\"} counts them ($v)"
v=$(egd_metric 'egressd_dns_queries_total{result="nxdomain"}')
ok $((!(v >= 8))) "egressd_dns_queries_total{result=\"nxdomain\"} ($v)"
v=$(egd_metric 'egressd_dns_queries_total{result="answer"}')
ok $((!(v >= 8))) "egressd_dns_queries_total{result=\"answer\"} ($v)"
v=$(egd_metric 'egressd_dns_queries_total{result="refused"}')
ok $((!(v >= 7))) "egressd_dns_queries_total{result=\"refused\"} ($v)"

# --- transparent TLS trusts what the DNS server handed out: the sandbox
# asks for rot.test (127.0.0.26, TTL 1 s); then the name's server moves it
# to 127.0.0.27 and egressd's cache forgets the old answer; a redirected
# connection to 127.0.0.26 with SNI rot.test still goes through, one to
# an address nobody handed out does not.
egd_cert rot.test || egm_bail "a certificate for rot.test"
egm_server "$T/origin-rot.out" "$EGD_PY" -S -u "$EGD_DIR/origin.py" --log "$T/origin-rot.log" \
    --certs "$T/certs" --https-port "$EGD_HTTPS_PORT" --http-port "$EGD_HTTP_PORT" \
    rot.test=127.0.0.26 rot.test=127.0.0.28 || egm_bail "rot.test's origin starts"
nft -f - <<EOF || egm_bail "nftables: redirect the sandbox's port $EGD_HTTPS_PORT to egressd"
table ip egdtest {
    chain out {
        type nat hook output priority -100;
        ip saddr $SB_ADDR tcp dport $EGD_HTTPS_PORT redirect to :${EGD_TLS#*:}
    }
}
EOF
dns_ok "rot.test resolves to 127.0.0.26" "$(q rot.test A)" NOERROR 127.0.0.26
kill "$DNSD_PID" && wait "$DNSD_PID" 2>/dev/null
echo 'rot.test A 127.0.0.27 1' >"$T/zone"
egm_server "$T/dnsd2.out" "$EGD_PY" -S -u "$EGD_DIR/dnsd.py" --listen 127.0.0.53:53 \
    --zone "$T/zone" --log "$T/upstream.log" || egm_bail "the test's DNS server starts again"
sleep 1.5
egd_log_mark
tls() { egd_curl --noproxy '*' --interface "$SB_ADDR" --resolve "rot.test:$EGD_HTTPS_PORT:$1" \
    "https://rot.test:$EGD_HTTPS_PORT/hello" 2>&1; }
body=$(tls 127.0.0.26)
ok $([ "$body" = "hello from rot.test" ] && echo 0 || echo 1) \
    "redirected TLS to the address handed out, after the name moved: it answers ($body)"
egd_log_ok "logged as mode tls, allowed, upstream 127.0.0.26" \
    'l["mode"] == "tls" and l["sni"] == "rot.test"' \
    'l["decision"] == "allow" and l["upstream"].startswith("127.0.0.26:")'
egd_log_mark
body=$(tls 127.0.0.28)
ok $([ "$body" != "hello from rot.test" ] && echo 0 || echo 1) \
    "redirected TLS to an address nobody handed out: refused"
egd_log_ok "logged as sni_mismatch" 'l["mode"] == "tls" and l["sni"] == "rot.test"' \
    'l["decision"] == "deny" and l["reason"] == "sni_mismatch"'
nft delete table ip egdtest

# --- an expired binding resolves nothing
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"box\",\"owner\":\"alice\",\"addresses\":[\"$SB_ADDR\"],\"policy\":\"test\",\"expires\":\"2020-01-01T00:00Z\"}" \
    >/dev/null
dns_ok "a sandbox past its expiry: NXDOMAIN for an allowed name" "$(q up.test A)" NXDOMAIN
egd_finish

# --- dns-log summary: one line per (sandbox, name, type, answer) and interval
egd_start 'resolver 127.0.0.53' "dns $DNS:$DNS_PORT" 'dns-log summary' 'dns-log-interval 2s' ||
    egm_bail "egressd starts with dns-log summary"
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"box\",\"owner\":\"alice\",\"addresses\":[\"$SB_ADDR\"],\"policy\":\"test\"}" \
    >/dev/null
egd_log_mark
for i in $(seq 1 20); do q +short evil.test A >/dev/null; done
sleep 2.5
lines=$(egd_log_count 'l["mode"] == "dns" and l["host"] == "evil.test" and l["answer"] == "NXDOMAIN" and l["sandbox"] == "sb1"')
total=$(egm_log_lines 'l["mode"] == "dns" and l["host"] == "evil.test"' | py -c 'import json, sys; print(sum(l["count"] for l in json.load(sys.stdin)))')
ok $((!(lines >= 1 && lines <= 4))) \
    "20 queries for one denied name: a summary line per worker and interval ($lines lines)"
ok $((total != 20)) "their counts add up to 20 ($total)"
ok $(($(egd_log_count 'l["mode"] == "dns"') != lines)) "and there is no other line for them"
egd_finish
tap_end
