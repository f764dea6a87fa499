#!/usr/bin/env bash
# deny.t - every way egressd's explicit proxy denies: policy (not allowed,
# port, IP literal, deny rule, bad host), addresses (names resolving into
# private ranges), the ClientHello after CONNECT (SNI mismatch, no SNI, ECH,
# not TLS), malformed and ambiguous requests (smuggling shapes, Host against
# the URI, oversize line and header count), slowloris, and a forbidden
# request pipelined behind an allowed one.  For each: the status, the
# X-Egress-Deny header, the body and the access-log line agree on the reason
# and the rule.  TAP on stdout.  Needs BUILD_DIR, TOP.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
# An origin on every address a denial must keep egressd away from, so a
# denial is never a connection that simply failed.
egd_origin --banner 127.0.0.20:22 a.test b.test denied.test blocked.test loop.test ||
    bail "the origins start"
# Allowed, but nothing listens at down.test's address, and nowhere.test is
# in no hosts file (and no resolver is configured).
egd_host 127.0.0.22 down.test
egd_allow down.test:4443 nowhere.test:4443
egd_start "timeout-header 2s" || bail "egressd starts and answers /healthz"

R=$T/resp
N=0
rule_blocked=$(egd_rule deny blocked.test)
hello() { raw hello "$EGD_HELLOS/curl.bin" "$T/$1.bin" "${@:2}"; }
hello a --sni a.test
hello b --sni b.test
hello ech --sni a.test --ech

# denied TEXT STATUS REASON RULE HOSTPORT MATCH STEP...: send STEP... (rawclient)
# to the explicit proxy; the answer must be STATUS with
#   X-Egress-Deny: REASON[; rule=RULE]
#   body "egressd: denied (REASON[; rule=RULE]): HOSTPORT\n"  (HOSTPORT "-", for
#   requests too broken to name one: the body starts "egressd: " and names
#   "(REASON")
# and the access log a line (MATCH over `l`) with the same reason and rule.
denied() {
    local text=$1 status=$2 reason=$3 rule=$4 hostport=$5 match=$6 want_hdr want_body rc=0
    shift 6
    want_hdr=$reason${rule:+; rule=$rule}
    want_body="egressd: denied ($want_hdr): $hostport"
    egd_log_mark
    raw --out "$R" --status "$R.st" "$EGD_PROXY" "$@" >/dev/null 2>&1
    if [ "$hostport" = - ]; then
        raw parse "$R" "r[0]['status'] == $status and r[0]['h'].get('x-egress-deny') == '$want_hdr' and r[0]['body'].startswith('egressd: ') and '($reason' in r[0]['body']" >/dev/null 2>&1 || rc=1
    else
        raw parse "$R" "r[0]['status'] == $status and r[0]['h'].get('x-egress-deny') == '$want_hdr' and r[0]['body'] == '''$want_body\n'''" >/dev/null 2>&1 || rc=1
    fi
    ok "$rc" "$text: $status, X-Egress-Deny: $want_hdr, the body says so"
    if [ "$rc" -ne 0 ]; then
        if [ "$hostport" = - ]; then
            diag "wanted: X-Egress-Deny: $want_hdr; a body \"egressd: ...($reason...\""
        else
            diag "wanted: X-Egress-Deny: $want_hdr; the body \"$want_body\""
        fi
        diag "got ($(cat "$R.st" 2>/dev/null)):"
        head -c 600 "$R" | cat -v | sed 's/^/#   /'
        echo
    fi
    local want_rule=None
    [ -n "$rule" ] && want_rule="'$rule'"
    egd_log_ok "$text: logged deny $reason, rule ${rule:-null}, status $status" "$match" \
        "l['decision'] == 'deny' and l['reason'] == '$reason' and l['rule'] == $want_rule and l['status'] == $status"
}

connect() { printf 'send:CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' "$1" "$1"; }
get() { printf 'send:GET http://%s/hello HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' "$1" "$1"; }

# --- policy
denied "CONNECT to a host not allowed" 403 not_allowed "" denied.test:4443 \
    'l["host"] == "denied.test" and l["mode"] == "connect"' "$(connect denied.test:4443)" head
denied "GET to a host not allowed" 403 not_allowed "" denied.test:8000 \
    'l["host"] == "denied.test" and l["mode"] == "http"' "$(get denied.test:8000)" head
denied "CONNECT to an allowed host on another port" 403 not_allowed "" a.test:9999 \
    'l["host"] == "a.test" and l["port"] == 9999' "$(connect a.test:9999)" head
denied "CONNECT to an IP literal" 403 not_allowed "" 127.0.0.16:4443 \
    'l["host"] == "127.0.0.16" and l["mode"] == "connect"' "$(connect 127.0.0.16:4443)" head
denied "GET to an IP literal" 403 not_allowed "" 127.0.0.16:8000 \
    'l["host"] == "127.0.0.16" and l["mode"] == "http"' "$(get 127.0.0.16:8000)" head
denied "CONNECT to a host a deny rule names" 403 deny_rule "$rule_blocked" blocked.test:4443 \
    'l["host"] == "blocked.test" and l["mode"] == "connect"' "$(connect blocked.test:4443)" head
denied "GET to a host a deny rule names" 403 deny_rule "$rule_blocked" blocked.test:8000 \
    'l["host"] == "blocked.test" and l["mode"] == "http"' "$(get blocked.test:8000)" head
denied "CONNECT to a number that is not a name (0x7f.1)" 403 bad_host "" 0x7f.1:4443 \
    'l["host"] == "0x7f.1"' "$(connect 0x7f.1:4443)" head
check "no request or ClientHello reached denied.test or blocked.test" \
    test "$(origin_log_count 'o["site"] in ("denied.test", "blocked.test") or o.get("sni") in ("denied.test", "blocked.test")')" = 0

# --- names that resolve into denied ranges (the preset allows every one)
for hp in loop.test:4443 high.test:4443 ten.test:4443 meta.test:4443 mapped.test:4443; do
    denied "CONNECT $hp ($(egd_addr "${hp%:*}"))" 403 private_range "" "$hp" \
        "l['host'] == '${hp%:*}' and l['mode'] == 'connect'" "$(connect "$hp")" head
done
denied "GET loop.test:8000 (127.0.0.1)" 403 private_range "" loop.test:8000 \
    'l["host"] == "loop.test" and l["mode"] == "http"' "$(get loop.test:8000)" head
check "nothing reached the origin on 127.0.0.1" test "$(origin_log_count 'o["site"] == "loop.test"')" = 0

# --- the ClientHello after CONNECT 200
# tunnel_denied TEXT REASON HELLO_STEP MATCH: CONNECT a.test:4443, then the
# hello; 200, then exactly the alert, then close; a deny line, rule null.
tunnel_denied() {
    local text=$1 reason=$2 step=$3 match=$4
    egd_log_mark
    raw --out "$R" --status "$R.st" "$EGD_PROXY" "$(connect a.test:4443)" head "$step" eof >/dev/null 2>&1
    check_resp "$text: 200, then the access_denied alert, then close" \
        "$R" "r[0]['status'] == 200 and (r[0]['body'].encode('latin-1') + bytes.fromhex(rest)).hex() == '$EGD_ALERT' and open('$R.st').read().split()[0] == 'eof'"
    egd_log_ok "$text: logged deny $reason" "$match" \
        "l['decision'] == 'deny' and l['reason'] == '$reason' and l['rule'] is None and l['mode'] == 'connect' and l['host'] == 'a.test'"
}
hellos_before=$(origin_log_count 'o["event"] == "hello"')
tunnel_denied "CONNECT a.test, hello for b.test" sni_mismatch "file:$T/b.bin" \
    'l["host"] == "a.test" and l["sni"] == "b.test"'
tunnel_denied "CONNECT a.test, hello without server_name" no_sni "file:$EGD_HELLOS/opensslnosni.bin" \
    'l["host"] == "a.test" and l["reason"] != "allowed"'
tunnel_denied "CONNECT a.test, hello for a.test with encrypted_client_hello" ech "file:$T/ech.bin" \
    'l["host"] == "a.test" and l["reason"] != "allowed" and l["sni"] == "a.test"'
tunnel_denied "CONNECT a.test, then a plain HTTP request" not_tls \
    'send:GET / HTTP/1.1\r\nHost: a.test\r\n\r\n' 'l["host"] == "a.test" and l["reason"] != "allowed"'
check "none of those ClientHellos reached the origin" \
    test "$(origin_log_count 'o["event"] == "hello"')" = "$hellos_before"
# The control: the same hello as the ECH one, without the extension, passes.
egd_log_mark
raw --out "$R" "$EGD_PROXY" "$(connect a.test:4443)" head "file:$T/a.bin" read:5 >/dev/null 2>&1
check_resp "control: CONNECT a.test with that hello minus ECH gets the origin's ServerHello" \
    "$R" "r[0]['status'] == 200 and r[0]['body'].encode('latin-1')[:2] == b'\x16\x03'"
egd_log_ok "control: logged allow, sni a.test" 'l["host"] == "a.test" and l["mode"] == "connect"' \
    'l["decision"] == "allow" and l["sni"] == "a.test"'
# Real clients.
egd_log_mark
egd_env openssl s_client -proxy "$EGD_PROXY" -connect a.test:4443 -servername b.test \
    -CAfile "$EGD_CA" </dev/null >"$T/s_client.out" 2>&1
ok $(($? == 0)) "openssl s_client -servername b.test through CONNECT a.test: fails"
egd_log_ok "openssl s_client -servername b.test: logged sni_mismatch" \
    'l["host"] == "a.test" and l["sni"] == "b.test"' 'l["reason"] == "sni_mismatch" and l["decision"] == "deny"'
egd_log_mark
egd_env openssl s_client -proxy "$EGD_PROXY" -connect a.test:4443 -noservername \
    -CAfile "$EGD_CA" </dev/null >"$T/s_client.out" 2>&1
ok $(($? == 0)) "openssl s_client -noservername through CONNECT a.test: fails"
egd_log_ok "openssl s_client -noservername: logged no_sni" \
    'l["host"] == "a.test" and l["mode"] == "connect"' 'l["reason"] == "no_sni" and l["decision"] == "deny"'
egd_log_mark
egd_curl -x "http://$EGD_PROXY" --connect-to a.test:4443:b.test:4443 -o /dev/null https://a.test:4443/hello 2>/dev/null
ok $(($? == 0)) "curl --connect-to (CONNECT b.test, SNI a.test): fails"
egd_log_ok "curl --connect-to: logged sni_mismatch" 'l["host"] == "b.test" and l["mode"] == "connect"' \
    'l["reason"] == "sni_mismatch" and l["sni"] == "a.test"'

# --- malformed and ambiguous requests: 400, and nothing reaches the origin
reqs_before=$(origin_log_count 'o["event"] == "request"')
H='POST http://a.test:8000/echo HTTP/1.1\r\nHost: a.test:8000\r\n'
denied "two Content-Length fields" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}Content-Length: 5\\r\\nContent-Length: 5\\r\\n\\r\\nhello" head
denied "Content-Length with Transfer-Encoding" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}Content-Length: 5\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n" head
denied "an obs-fold continuation line" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}X-A: 1\\r\\n folded\\r\\nContent-Length: 0\\r\\n\\r\\n" head
denied "a bare LF ending a field" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}X-A: 1\\nContent-Length: 0\\r\\n\\r\\n" head
denied "a NUL in a field value" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}X-A: a\\x00b\\r\\nContent-Length: 0\\r\\n\\r\\n" head
denied "white space between a field name and its colon" 400 bad_request "" - 'l["reason"] == "bad_request"' \
    "send:${H}Content-Length : 0\\r\\n\\r\\n" head
denied "Host naming another authority than the URI" 400 bad_request "" - \
    'l["reason"] == "bad_request"' \
    'send:GET http://a.test:8000/hello HTTP/1.1\r\nHost: b.test:8000\r\n\r\n' head
check "none of those requests reached the origin" \
    test "$(origin_log_count 'o["event"] == "request"')" = "$reqs_before"

long=$(printf 'a%.0s' $(seq 1 20000))
denied "a 20 000-byte request line" 414 bad_request "" - 'l["status"] == 414' \
    "send:GET http://a.test:8000/$long HTTP/1.1\\r\\n" head
many=$(for i in $(seq 1 300); do printf 'X-H%d: %d\\r\\n' "$i" "$i"; done)
denied "300 header fields" 431 bad_request "" - 'l["status"] == 431' \
    "send:GET http://a.test:8000/hello HTTP/1.1\\r\\nHost: a.test:8000\\r\\n$many\\r\\n" head

# --- slowloris: a head that never ends is cut at timeout-header (2 s)
egd_log_mark
raw --timeout 10 --out "$R" --status "$R.st" "$EGD_PROXY" \
    'drip:0.25:GET http://a.test:8000/hello HTTP/1.1\r\nHost: a.test:8000\r\n' eof >/dev/null 2>&1
read -r ev secs <"$R.st"
check "slowloris: egressd closes the connection after 2 s, within 3 s (closed: $ev after ${secs}s)" \
    py -c "import sys; sys.exit(not ('$ev' in ('eof', 'reset') and 1.8 <= $secs <= 3.0))"
check_resp "slowloris: 408 sent first" "$R" 'r[0]["status"] == 408'
egd_log_ok "slowloris: logged deny timeout" 'l["reason"] == "timeout"' \
    'l["decision"] == "deny" and l["status"] == 408'

# A client that waits before it starts gets no more time: the clock runs
# from the accept, not from the first byte.
egd_log_mark
raw --timeout 10 --out "$R" --status "$R.st" "$EGD_PROXY" 'sleep:1.5' \
    'drip:0.25:GET http://a.test:8000/hello HTTP/1.1\r\nHost: a.test:8000\r\n' eof >/dev/null 2>&1
read -r ev secs <"$R.st"
check "slowloris after a silent start: still closed 2 s after the connect, within 3 s (closed: $ev after ${secs}s)" \
    py -c "import sys; sys.exit(not ('$ev' in ('eof', 'reset') and 1.8 <= $secs <= 3.0))"

# --- a forbidden request pipelined behind an allowed one on one connection
egd_log_mark
raw --out "$R" --status "$R.st" "$EGD_PROXY" \
    'send:GET http://a.test:8000/hello HTTP/1.1\r\nHost: a.test:8000\r\n\r\nGET http://denied.test:8000/hello HTTP/1.1\r\nHost: denied.test:8000\r\nConnection: close\r\n\r\n' \
    eof >/dev/null 2>&1
check_resp "pipelined: the first answered 200 from the origin" \
    "$R" 'len(r) == 2 and r[0]["status"] == 200 and r[0]["body"] == "hello from a.test\n"'
check_resp "pipelined: the second answered 403 not_allowed" \
    "$R" 'len(r) == 2 and r[1]["status"] == 403 and r[1]["h"].get("x-egress-deny") == "not_allowed" and r[1]["body"] == "egressd: denied (not_allowed): denied.test:8000\n"'
la=$(egd_log_wait 'l["host"] == "a.test" and l["mode"] == "http"')
ld=$(egd_log_wait 'l["host"] == "denied.test" and l["mode"] == "http"')
ok_json "pipelined: a log line allowing the first" "$la" 'l["decision"] == "allow" and l["status"] == 200'
ok_json "pipelined: a log line denying the second" "$ld" 'l["decision"] == "deny" and l["reason"] == "not_allowed" and l["status"] == 403'
check "pipelined: both from one client connection" \
    test "$(egd_json "$la" 'l["src"]')" = "$(egd_json "$ld" 'l["src"]')"

v=$(egd_metric 'egressd_connections_total{decision="deny",reason="private_range"}')
check "metrics: connections_total deny private_range is 6 (got ${v:-none})" test "$v" = 6

# --- failures that are not policy: 502 with Proxy-Status, no X-Egress-Deny
# failed TEXT REASON ERROR HOST: CONNECT HOST:4443 answered 502,
# "Proxy-Status: egressd; error=ERROR", no X-Egress-Deny; logged REASON.
failed() {
    local text=$1 reason=$2 error=$3 host=$4
    egd_log_mark
    raw --out "$R" "$EGD_PROXY" "$(connect "$host:4443")" head >/dev/null 2>&1
    check_resp "$text: 502, Proxy-Status: egressd; error=$error, no X-Egress-Deny" \
        "$R" "r[0]['status'] == 502 and r[0]['h'].get('proxy-status') == 'egressd; error=$error' and 'x-egress-deny' not in r[0]['h']"
    egd_log_ok "$text: logged $reason, status 502" "l['host'] == '$host'" \
        "l['reason'] == '$reason' and l['status'] == 502 and l['bytes_up'] == 0 and l['bytes_down'] == 0"
}
failed "CONNECT to an allowed name nothing listens at" connect_fail connection_refused down.test
failed "CONNECT to an allowed name that does not resolve" dns_fail dns_error nowhere.test

# A denial and its FIN leave in one segment (the answer is sent with
# MSG_MORE and the shutdown follows): the 403 to a CONNECT and the alert to
# a transparent TLS client.  tcpdump watches egressd's two ports on lo.
hello denied --sni denied.test
tcpdump -i lo -nn --immediate-mode -U -w "$T/seg.pcap" 'tcp port 3128 or tcp port 8443' \
    2>"$T/tcpdump.err" &
cap=$!
for _ in $(seq 100); do grep -q "listening on" "$T/tcpdump.err" 2>/dev/null && break; sleep 0.05; done
raw --out "$R.seg1" "$EGD_PROXY" "$(connect denied.test:4443)" eof >/dev/null 2>&1
raw --out "$R.seg2" "$EGD_TLS" "file:$T/denied.bin" eof >/dev/null 2>&1
sleep 0.3
kill -TERM "$cap"
wait "$cap"
tcpdump -nn -r "$T/seg.pcap" >"$T/seg.txt" 2>/dev/null
# "IP 127.0.0.1.3128 > 127.0.0.1.N: Flags [F.], seq 1:182, ..., length 181"
segs() { grep -F "127.0.0.1.$1 >" "$T/seg.txt" | grep -v 'length 0$'; }
# one_fin_segment PORT SUFFIX: egressd's port PORT sent one segment with
# data, its line ends in SUFFIX, and it carries the FIN.
one_fin_segment() {
    py -c 'import sys; l = sys.argv[1].splitlines(); sys.exit(not (len(l) == 1 and "F" in l[0].split("Flags [")[1].split("]")[0] and l[0].endswith(sys.argv[2])))' \
        "$(segs "$1")" "$2"
}
check "the CONNECT's 403 came in one segment, with the FIN: $(segs 3128 | tr -s ' ' | cut -d' ' -f6-7)" \
    one_fin_segment 3128 ""
check "so did the TLS client's alert: $(segs 8443 | tr -s ' ' | cut -d' ' -f6-7)" \
    one_fin_segment 8443 "length 7"
check "and both were the denial: a 403 and the alert" \
    py -c 'import sys; a = open(sys.argv[1], "rb").read(); b = open(sys.argv[2], "rb").read(); sys.exit(not (a.startswith(b"HTTP/1.1 403 ") and b.hex() == sys.argv[3]))' "$R.seg1" "$R.seg2" "$EGD_ALERT"

# A denied TLS client with nothing left unread is not waited for: egressd
# closes its socket at once, with the client still connected (the kernel
# keeps the orphan in FIN-WAIT-2, owned by no process).
raw --timeout 5 --out "$R.hold" "$EGD_TLS" "file:$T/denied.bin" read:7 sleep:1.5 >/dev/null 2>&1 &
holder=$!
sleep 0.7
ss -tanp state fin-wait-2 '( sport = :8443 )' >"$T/ss.txt" 2>&1
wait "$holder"
check "a denied TLS client still connected: egressd holds no socket for it ($(tail -n +2 "$T/ss.txt" | wc -l) in FIN-WAIT-2, $(grep -c egressd "$T/ss.txt") of them egressd's)" \
    py -c 'import sys; t = open(sys.argv[1]).read().splitlines()[1:]; sys.exit(not (len(t) == 1 and "egressd" not in t[0]))' "$T/ss.txt"

# --- limits: max-conns (503) and rate-new-conns-per-sandbox (429)
rc=0
egd_stop || rc=$?
ok "$rc" "egressd exits 0 on SIGTERM, for a restart with limits (status $rc)"
egd_start "max-conns 2" || bail "egressd starts again with max-conns 2"
holders=()
for i in 1 2; do
    raw --timeout 8 --out "$T/hold$i" "$EGD_PROXY" "$(connect ssh.test:22)" head \
        'expect:SSH-2.0-test\r\n' sleep:3 shut eof >/dev/null 2>&1 &
    holders+=($!)
done
for ((i = 0; i < 100; i++)); do
    [ "$(cat "$T/hold1" "$T/hold2" 2>/dev/null | grep -c 'SSH-2.0-test')" = 2 ] && break
    # The holders write their output when they end; poll egressd instead.
    [ "$(egd_metric 'egressd_active_connections' 2>/dev/null)" = 2 ] && break
    sleep 0.05
done
egd_log_mark
raw --out "$R" "$EGD_PROXY" "$(connect a.test:4443)" head >/dev/null 2>&1
check_resp "max-conns 2, two tunnels open: a third connection gets 503, X-Egress-Deny: limit" \
    "$R" "r[0]['status'] == 503 and r[0]['h'].get('x-egress-deny') == 'limit'"
egd_log_ok "max-conns: logged deny limit, 503" "l['reason'] == 'limit'" \
    "l['decision'] == 'deny' and l['status'] == 503"
wait "${holders[@]}"
check "max-conns: the two tunnels held worked all along" \
    test "$(cat "$T/hold1" "$T/hold2" | grep -c '^SSH-2.0-test')" = 2
rc=0
egd_stop || rc=$?
ok "$rc" "egressd exits 0 on SIGTERM, for a restart with a rate limit (status $rc)"
egd_start "rate-new-conns-per-sandbox 5" || bail "egressd starts again with rate-new-conns-per-sandbox 5"
egd_log_mark
# Twelve new connections within a few milliseconds (one process: a process
# per connection would be slower than the bucket refills).
codes=$(py - "$EGD_PROXY" "$R" <<'EOF2'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
req = b"GET http://a.test:8000/hello HTTP/1.1\r\nHost: a.test:8000\r\nConnection: close\r\n\r\n"
socks = []
for i in range(12):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(req)
    socks.append(s)
codes = []
for i, s in enumerate(socks, 1):
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    open("%s.%d" % (sys.argv[2], i), "wb").write(data)
    codes.append(data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "0")
print(" ".join(codes))
EOF2
)
codes=" $codes"
check "rate 5/s: of 12 new connections within a moment 5 (or 6, one refill) pass, the others get 429 (got$codes)" \
    py -c "import sys; c = sys.argv[1:]; sys.exit(not (c.count('200') in (5, 6) and c.count('200') + c.count('429') == 12))" $codes
i=$(awk -v c="$codes" 'BEGIN { n = split(c, a, " "); for (k = 1; k <= n; k++) if (a[k] == 429) { print k; exit } }')
if [ -n "$i" ]; then
    check_resp "rate: the 429 says X-Egress-Deny: limit" \
        "$R.$i" "r[0]['h'].get('x-egress-deny') == 'limit'"
else
    ok 1 "rate: the 429 says X-Egress-Deny: limit (no 429 came)"
fi
egd_log_ok "rate: logged deny limit, 429" "l['reason'] == 'limit'" "l['decision'] == 'deny' and l['status'] == 429"

egd_finish
tap_end
