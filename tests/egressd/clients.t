#!/usr/bin/env bash
# clients.t - real clients through egressd's explicit proxy: curl (CONNECT
# and absolute-URI HTTP, Proxy-Authorization), wget, python3 urllib, and a
# server-first protocol through a `raw` CONNECT.  Each checks the body the
# client got and the access-log line of its connection.  TAP on stdout.
# Needs BUILD_DIR, TOP; runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_origin --banner 127.0.0.20:22 a.test b.test extra.test || bail "the origins start"
egd_start || bail "egressd starts and answers /healthz"

P=http://$EGD_PROXY
RULE_A=$(egd_rule a.test)
RULE_B=$(egd_rule b.test)
RULE_SSH=$(egd_rule ssh.test)
FIELDS='["ts","id","sandbox","owner","src","mode","method","host","port","sni","decision","reason","rule","upstream","country","asn","bytes_up","bytes_down","duration_ms","status","termination","answer","count","inject","path"]'
# Allowed, for sandbox 101 of alice (bound to the source address 127.0.0.1).
ALICE='l["sandbox"] == "101" and l["owner"] == "alice" and l["decision"] == "allow" and l["reason"] == "allowed" and l["bytes_up"] > 0 and l["bytes_down"] > 0 and l["status"] == 200'

check "admin: PUT sandbox 101 (alice, by address 127.0.0.1)" egd_put 101 \
    '{"id":"101","name":"agent-alice-1","owner":"alice","addresses":["127.0.0.1"],"policy":"test"}'
check "admin: PUT sandbox 102 (bob, by token, extra.test)" egd_put 102 \
    '{"id":"102","name":"agent-bob-1","owner":"bob","addresses":["127.0.0.4"],"policy":"test","allow":["extra.test:4443,8000"],"token":"s3cret"}'

# --- curl, https through CONNECT
egd_log_mark
body=$(egd_curl -x "$P" https://a.test:4443/hello)
ok $? "curl https via CONNECT: exit 0"
check "curl https via CONNECT: the origin's body" test "$body" = "hello from a.test"
line=$(egd_log_wait 'l["host"] == "a.test" and l["mode"] == "connect"')
ok_json "curl https via CONNECT: logged allow, sandbox 101/alice, $RULE_A, bytes both ways, 200" "$line" \
    "$ALICE and l['rule'] == '$RULE_A' and l['port'] == 4443"
ok_json "curl https via CONNECT: sni a.test, upstream 127.0.0.16:4443, src 127.0.0.1" "$line" \
    'l["sni"] == "a.test" and l["upstream"] == "127.0.0.16:4443" and l["src"].startswith("127.0.0.1:")'
ok_json "access log: every field is present" "$line" "sorted(l) == sorted($FIELDS)"
ok_json "access log: ts is RFC 3339 UTC with milliseconds, duration_ms a number" "$line" \
    '__import__("re").fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", l["ts"]) and isinstance(l["duration_ms"], int)'

# --- curl, absolute-URI HTTP; one kept-alive connection for two requests
egd_log_mark
out=$(egd_curl -x "$P" http://a.test:8000/hello http://b.test:8000/hello)
ok $? "curl http absolute-URI: exit 0"
check "curl http absolute-URI: both origins' bodies" test "$out" = "hello from a.test
hello from b.test"
la=$(egd_log_wait 'l["host"] == "a.test" and l["mode"] == "http"')
lb=$(egd_log_wait 'l["host"] == "b.test" and l["mode"] == "http"')
ok_json "curl http: logged allow GET a.test:8000, $RULE_A, 200" "$la" \
    "$ALICE and l['rule'] == '$RULE_A' and l['method'] == 'GET' and l['port'] == 8000 and l['upstream'] == '127.0.0.16:8000'"
ok_json "curl http: logged allow GET b.test:8000, $RULE_B, 200" "$lb" \
    "$ALICE and l['rule'] == '$RULE_B' and l['method'] == 'GET' and l['port'] == 8000"
check "curl http: both requests came on one kept-alive client connection" \
    test "$(egd_json "$la" 'l["src"]')" = "$(egd_json "$lb" 'l["src"]')"

# --- what is forwarded: origin form, Host, no hop-by-hop or Proxy-* fields
egd_log_mark
echo_out=$(egd_curl --interface 127.0.0.3 -x "http://102:s3cret@$EGD_PROXY" \
    -H 'Proxy-Connection: keep-alive' -H 'Connection: X-Hop' -H 'X-Hop: 1' -H 'X-Keep: 2' \
    http://a.test:8000/echo)
ok $? "curl http /echo with Proxy-Authorization: exit 0"
head1=$(printf '%s\n' "$echo_out" | head -n 1 | tr -d '\r')
check "forwarded: request line in origin form (GET /echo HTTP/1.1)" test "$head1" = "GET /echo HTTP/1.1"
check "forwarded: Host: a.test:8000" grep -qx $'Host: a.test:8000\r' <<<"$echo_out"
check "forwarded: no Proxy-Authorization, no Proxy-Connection" \
    bash -c '! grep -qi "^proxy-" <<<"$1"' _ "$echo_out"
check "forwarded: the field Connection names (X-Hop) is dropped, X-Keep is kept" \
    bash -c '! grep -qi "^x-hop:" <<<"$1" && grep -qi "^x-keep: 2" <<<"$1"' _ "$echo_out"
egd_log_ok "curl http with Proxy-Authorization: logged as sandbox 102/bob" \
    'l["host"] == "a.test" and l["mode"] == "http"' \
    'l["sandbox"] == "102" and l["owner"] == "bob" and l["decision"] == "allow" and l["status"] == 200'

# --- Proxy-Authorization identifies the sandbox; its extra line allows
egd_log_mark
body=$(egd_curl --interface 127.0.0.3 -x "http://102:s3cret@$EGD_PROXY" https://extra.test:4443/hello)
ok $? "curl https with user:token: exit 0"
check "curl https with user:token: extra.test's body" test "$body" = "hello from extra.test"
egd_log_ok "curl https with user:token: logged sandbox 102/bob, rule 'sandbox 102:1'" \
    'l["host"] == "extra.test" and l["decision"] == "allow"' \
    'l["sandbox"] == "102" and l["owner"] == "bob" and l["rule"] == "sandbox 102:1" and l["mode"] == "connect" and l["bytes_up"] > 0 and l["bytes_down"] > 0 and l["sni"] == "extra.test"'

egd_log_mark
egd_curl --interface 127.0.0.3 -x "$P" -o /dev/null https://extra.test:4443/hello 2>/dev/null
ok $(($? == 0)) "curl https without a token from an unbound address: refused"
egd_log_ok "without a token: sandbox default, owner null, not_allowed" \
    'l["host"] == "extra.test"' \
    'l["sandbox"] == "default" and l["owner"] is None and l["decision"] == "deny" and l["reason"] == "not_allowed" and l["status"] == 403'
egd_log_mark
egd_curl --interface 127.0.0.3 -x "http://102:wrong@$EGD_PROXY" -o /dev/null https://extra.test:4443/hello 2>/dev/null
ok $(($? == 0)) "curl https with a wrong token: refused"
egd_log_ok "with a wrong token: logged deny of CONNECT extra.test, not as sandbox 102" \
    'l["src"].startswith("127.0.0.3:")' \
    'l["sandbox"] != "102" and l["decision"] == "deny" and l["mode"] == "connect" and l["host"] == "extra.test" and l["port"] == 4443'

# --- bigger bodies both ways through a tunnel
head -c 300000 /dev/urandom >"$T/upload"
egd_log_mark
n=$(egd_curl -x "$P" -o /dev/null -w '%{size_download}' https://a.test:4443/bytes/1000000)
check "curl https: 1 000 000 bytes down" test "$n" = 1000000
egd_log_ok "curl https: bytes_down counts them" 'l["host"] == "a.test" and l["mode"] == "connect"' \
    'l["bytes_down"] >= 1000000 and l["decision"] == "allow"'
egd_log_mark
n=$(egd_curl -x "$P" --data-binary @"$T/upload" -o /dev/null -w '%{size_download}' https://b.test:4443/echo)
check "curl https: 300 000 bytes up, echoed back" test "${n:-0}" -gt 300000
egd_log_ok "curl https: bytes_up counts them" 'l["host"] == "b.test" and l["mode"] == "connect"' \
    'l["bytes_up"] >= 300000 and l["bytes_down"] >= 300000'

# --- wget
egd_log_mark
body=$(egd_wget "https_proxy=$P" -q -O - https://b.test:4443/hello)
ok $? "wget https (https_proxy): exit 0"
check "wget https: the origin's body" test "$body" = "hello from b.test"
egd_log_ok "wget https: logged allow, sandbox 101/alice, $RULE_B, sni b.test" \
    'l["host"] == "b.test" and l["mode"] == "connect"' \
    "$ALICE and l['rule'] == '$RULE_B' and l['sni'] == 'b.test' and l['port'] == 4443"
egd_log_mark
body=$(egd_wget "http_proxy=$P" -q -O - http://a.test:8000/hello)
ok $? "wget http (http_proxy): exit 0"
check "wget http: the origin's body" test "$body" = "hello from a.test"
egd_log_ok "wget http: logged allow GET, $RULE_A" 'l["host"] == "a.test" and l["mode"] == "http"' \
    "$ALICE and l['rule'] == '$RULE_A' and l['method'] == 'GET'"

# --- python3 urllib
cat >"$T/client.py" <<'EOF'
import ssl, sys, urllib.request
proxy, ca, url = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
    urllib.request.HTTPSHandler(context=ctx))
with opener.open(url, timeout=10) as r:
    sys.stdout.write(r.read().decode())
EOF
egd_log_mark
body=$(egd_python "$T/client.py" "$P" "$EGD_CA" https://a.test:4443/hello)
ok $? "python urllib https: no error"
check "python urllib https: the origin's body" test "$body" = "hello from a.test"
egd_log_ok "python urllib https: logged allow, sandbox 101/alice, $RULE_A" \
    'l["host"] == "a.test" and l["mode"] == "connect"' \
    "$ALICE and l['rule'] == '$RULE_A' and l['sni'] == 'a.test'"
egd_log_mark
body=$(egd_python "$T/client.py" "$P" "$EGD_CA" http://b.test:8000/hello)
ok $? "python urllib http: no error"
check "python urllib http: the origin's body" test "$body" = "hello from b.test"
egd_log_ok "python urllib http: logged allow GET, $RULE_B" 'l["host"] == "b.test" and l["mode"] == "http"' \
    "$ALICE and l['rule'] == '$RULE_B' and l['method'] == 'GET'"
egd_log_mark
egd_python "$T/client.py" "$P" "$EGD_CA" https://denied.test:4443/hello >/dev/null 2>"$T/py.err"
ok $(($? == 0)) "python urllib https to a host not allowed: an error"
check "python urllib: the error names the 403" grep -q 403 "$T/py.err"

# --- a server-first protocol through a `raw` rule (git over SSH)
egd_log_mark
raw --out "$T/ssh.out" --status "$T/ssh.st" "$EGD_PROXY" \
    'send:CONNECT ssh.test:22 HTTP/1.1\r\nHost: ssh.test:22\r\n\r\n' head \
    'expect:SSH-2.0-test\r\n' 'send:SSH-2.0-client\r\n' 'expect:got SSH-2.0-client\r\n' shut eof
ok $? "raw CONNECT ssh.test:22: 200, the server's banner arrives before the client sends, the answer comes back"
check_resp "raw CONNECT ssh.test:22: the answer was 200" "$T/ssh.out" 'r[0]["status"] == 200'
check "raw CONNECT ssh.test:22: the server got the client's line" \
    test "$(origin_log_count 'o["event"] == "banner" and o["got"] == "SSH-2.0-client"')" = 1
egd_log_ok "raw CONNECT ssh.test:22: logged allow, $RULE_SSH, sni null, bytes both ways" \
    'l["host"] == "ssh.test"' \
    "$ALICE and l['rule'] == '$RULE_SSH' and l['port'] == 22 and l['sni'] is None and l['bytes_up'] >= 16 and l['bytes_down'] >= 34"

# --- metrics after all that
v=$(egd_metric 'egressd_connections_total{sandbox="101",owner="alice",mode="connect",decision="allow",reason="allowed"}')
check "metrics: connections_total for 101/alice connect allow is 6 (got ${v:-none})" test "$v" = 6
v=$(egd_metric 'egressd_connections_total{sandbox="101",mode="http",decision="allow"}')
check "metrics: connections_total for 101 http allow is 4 (got ${v:-none})" test "$v" = 4
v=$(egd_metric 'egressd_connections_total{sandbox="default",decision="deny",reason="not_allowed"}')
check "metrics: connections_total for default deny not_allowed is at least 1 (got ${v:-none})" test "${v:-0}" -ge 1
v=$(egd_metric 'egressd_bytes_total{sandbox="101",direction="down"}')
check "metrics: bytes_total down for 101 is at least 1 000 000 (got ${v:-none})" test "${v%.*}" -ge 1000000 2>/dev/null
v=$(egd_metric 'egressd_sandboxes')
check "metrics: sandboxes is 2 (got ${v:-none})" test "$v" = 2
check "metrics: no host name in any label" bash -c '! curl -q -s --noproxy "*" "http://$1/metrics" | grep -v "^#" | grep -q "\.test"' _ "$EGD_METRICS"

# --- a big body over plain HTTP (egressd reads the response itself past
# libevent's 4 KiB reads): every byte as the origin sent it.
want=$(python3 -c '
import hashlib
p = b"0123456789abcdef" * 4096
print(hashlib.sha256((p * 16)[:1000000]).hexdigest())')
got=$(egd_curl -x "$P" http://a.test:8000/bytes/1000000 | sha256sum | cut -d' ' -f1)
check "curl http: 1 000 000 bytes from a.test:8000, byte for byte" test "$got" = "$want"

# --- a client that half-closes after its requests is still answered:
# two pipelined GETs, then the end of its sending side.
GET2='send:GET http://a.test:8000/hello HTTP/1.1\r\nHost: a.test:8000\r\n\r\nGET http://b.test:8000/hello HTTP/1.1\r\nHost: b.test:8000\r\n\r\n'
raw --out "$T/half.out" --status "$T/half.st" "$EGD_PROXY" "$GET2" shut eof
ok $? "two pipelined GETs, then a half-close: egressd answers both and then closes"
check_resp "... the answers: 200 from a.test, then 200 from b.test" "$T/half.out" \
    'len(r) == 2 and [x["status"] for x in r] == [200, 200] and r[0]["body"] == "hello from a.test\n" and r[1]["body"] == "hello from b.test\n"'

# --- more pipelined requests than max-header-bytes (16 KiB) holds: while
# one is answered, egressd stops reading the client at the mark and reads
# on once the answer is out.  500 GETs (about 28 KiB), all answered, in
# order.
MANY=$(python3 -c 'print("send:" + "GET http://a.test:8000/hello HTTP/1.1\\r\\nHost: a.test:8000\\r\\n\\r\\n" * 500)')
raw --timeout 20 --out "$T/many.out" "$EGD_PROXY" "$MANY" shut eof
ok $? "500 pipelined GETs (past the read mark), then a half-close: egressd answers and closes"
check_resp "... 500 answers, each 200 from a.test" "$T/many.out" \
    'len(r) == 500 and all(x["status"] == 200 and x["body"] == "hello from a.test\n" for x in r)'

egd_finish
tap_end
