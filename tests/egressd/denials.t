#!/usr/bin/env bash
# denials.t - GET /v1/sandboxes/{id}/denials: a bound sandbox's most recent
# denials, newest first, with the reason and the rule, as the access log
# says them; bounded to 16; nothing for what was allowed, nothing for other
# sandboxes; 404 for a sandbox that is not bound, 405 for another method;
# a binding deleted takes its denials along; an ech denial says how to avoid it;
# a name of any bytes (DNS questions with ESC, 0xff, '.' and '\' inside a
# label) is there, in DNS presentation format (\DDD), never left out.
# TAP on stdout.  Needs BUILD_DIR, TOP, dig; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
command -v dig >/dev/null || egm_bail "dig is installed (bind9-dnsutils)"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
egd_allow 'deny blocked.test'
egd_origin a.test || egm_bail "the origins start"
DNS=127.0.0.1
DNS_PORT=5353
egd_start "dns $DNS:$DNS_PORT" || egm_bail "egressd starts"
A=http://a.test:$EGD_HTTP_PORT
RULE_BLOCKED=$(egd_rule "deny blocked.test")
SB='{"id":"401","name":"t","owner":"dana","addresses":["127.0.0.5"],"policy":"test"}'
egd_put 401 "$SB" >/dev/null || egm_bail "PUT sandbox 401"
egd_put 402 '{"id":"402","name":"u","owner":"eve","addresses":["127.0.0.6"],"policy":"test"}' \
    >/dev/null || egm_bail "PUT sandbox 402"

# denials ID PYEXPR TEXT: one check of PYEXPR over `d`, the parsed answer.
denials() {
    local body
    body=$(egd_admin GET "/v1/sandboxes/$1/denials")
    ok_json "$3" "$body" "(lambda d: $2)(l)"
}
# status METHOD PATH: the admin API's HTTP status.
status() {
    curl -q -s --noproxy '*' -m 5 --unix-socket "$T/admin.sock" -X "$1" -o /dev/null \
        -w '%{http_code}' "http://egressd$2"
}
get() { # get SOURCE URL: a proxied GET from SOURCE; the status
    egd_curl --interface "$1" -s -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" "$2"
}

denials 401 'd == {"sandbox": "401", "denials": []}' "a bound sandbox that was never denied: []"

egd_log_mark
c1=$(get 127.0.0.5 http://nowhere.test/)
c2=$(egd_curl --interface 127.0.0.5 -s -o /dev/null -w '%{http_code}' -p -x "http://$EGD_PROXY" \
    https://blocked.test/)
c3=$(get 127.0.0.5 "$A/hello")
c4=$(get 127.0.0.6 http://other.test/)
check "two denials and an allowed request from 401, one denial from 402 (got $c1 $c2 $c3 $c4)" \
    test "$c1 $c3 $c4" = "403 200 403"
egd_log_wait 'l["host"] == "other.test"' >/dev/null
denials 401 'len(d["denials"]) == 2 and [x["host"] for x in d["denials"]] == ["blocked.test", "nowhere.test"]' \
    "401's two denials, newest first; not the allowed request, not 402's"
denials 401 'd["denials"][0]["mode"] == "connect" and d["denials"][0]["reason"] == "deny_rule" and d["denials"][0]["rule"] == "'"$RULE_BLOCKED"'" and d["denials"][0]["port"] == 443 and d["denials"][0]["status"] == 403' \
    "the CONNECT one: mode, reason deny_rule, the rule ($RULE_BLOCKED), port, status"
denials 401 'd["denials"][1]["mode"] == "http" and d["denials"][1]["method"] == "GET" and d["denials"][1]["reason"] == "not_allowed" and d["denials"][1]["rule"] is None and d["denials"][1]["ts"].endswith("Z")' \
    "the HTTP one: method GET, reason not_allowed, no rule, a timestamp"
line=$(egd_log_wait 'l["host"] == "blocked.test"')
body=$(egd_admin GET /v1/sandboxes/401/denials)
check "each says what its access-log line says (host, port, reason, rule, status)" py -c '
import json, sys
l, d = json.loads(sys.argv[1]), json.loads(sys.argv[2])["denials"][0]
sys.exit(0 if all(l[k] == d[k] for k in ("host", "port", "mode", "reason", "rule", "status", "sni")) else 1)
' "$line" "$body"
denials 402 '[x["host"] for x in d["denials"]] == ["other.test"]' "402 has its own"
denials 401 'd["denials"][0]["hint"] is None' "a deny rule's denial has no hint (asking would not help)"
denials 401 '"request_access" in d["denials"][1]["hint"] and "sandboxctl access request" in d["denials"][1]["hint"]' \
    "a not_allowed denial says how to ask for the host"

# --- an ECH ClientHello: the TLS alert carries no text, the denial says what to change
raw hello "$EGD_HELLOS/curl.bin" "$T/ech.bin" --sni a.test --ech || egm_bail "an ECH hello"
egd_log_mark
egd_env python3 - "$EGD_PROXY" "$T/ech.bin" <<'EOF' >/dev/null 2>&1
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5, source_address=("127.0.0.5", 0))
s.sendall(b"CONNECT a.test:4443 HTTP/1.1\r\nHost: a.test:4443\r\n\r\n")
s.recv(4096)
s.sendall(open(sys.argv[2], "rb").read())
s.recv(4096)
EOF
egd_log_wait 'l["reason"] == "ech"' >/dev/null
denials 401 'd["denials"][0]["reason"] == "ech" and "EncryptedClientHelloEnabled" in d["denials"][0]["hint"] and "--disable-features=EncryptedClientHello" in d["denials"][0]["hint"]' \
    "an ech denial carries the hint: the managed policy, or the flag"

# --- names of any bytes: in presentation format, never left out.  dig
# reads its argument in presentation format too, so 'a\027[31m...' sends
# the ESC byte itself; the Host header carries a raw ESC.
dq() { dig -b 127.0.0.5 "@$DNS" -p "$DNS_PORT" +tries=1 +time=3 "$@" 2>&1; }
ESC_NAME='a\027[31mRED\027[0m.test'
out=$(dq "$ESC_NAME" A)
check "a DNS question with ESC bytes is answered NXDOMAIN" grep -q 'status: NXDOMAIN' <<<"$out"
denials 401 'd["denials"][0]["mode"] == "dns" and d["denials"][0]["host"] == r"a\027[31mRED\027[0m.test"' \
    "its denial's host: a\\027[31mRED\\027[0m.test, exactly"
check "  its access-log line names it the same way" \
    egd_log_wait 'l["mode"] == "dns" and l["host"] == r"a\027[31mRED\027[0m.test"' 10
out=$(dq '\255\255x.test' A)
check "a DNS question with 0xff bytes is answered NXDOMAIN" grep -q 'status: NXDOMAIN' <<<"$out"
denials 401 '"host" in d["denials"][0] and d["denials"][0]["host"] == r"\255\255x.test" and len(d["denials"][0]) == 11' \
    "its denial has its host, \\255\\255x.test, and every other field"
dq 'a\.b\092c.test' A >/dev/null
denials 401 'd["denials"][0]["host"] == r"a\.b\092c.test"' \
    "a '.' inside a label is \\. and a backslash \\092: the name's labels stay apart"
check "  so does its access-log line" \
    egd_log_wait 'l["mode"] == "dns" and l["host"] == r"a\.b\092c.test"' 10
dq 'a\000hidden.test' A >/dev/null
denials 401 'd["denials"][0]["host"] == r"a\000hidden.test"' \
    "a NUL inside a label is \\000: nothing after it is lost"
check "  nor in its access-log line" \
    egd_log_wait 'l["mode"] == "dns" and l["host"] == r"a\000hidden.test"' 10
# (the proxy's paths take a host only once the HTTP parser or the SNI parser
# has checked its bytes: a Host header with ESC or 0xff is a 400 without one)
c=$(egd_curl --interface 127.0.0.5 -s -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" \
    -H "$(printf 'Host: x\033]0;T\007\377.test')" http://x.test/)
denials 401 'not any(ord(ch) < 0x20 or ord(ch) == 0x7f for x in d["denials"] for v in x.values() if isinstance(v, str) for ch in v)' \
    "after a Host header with ESC, BEL and 0xff ($c) too, no string of the denials holds a control character"

# --- bounded: 20 more denials, the 16 newest kept
for i in $(seq 1 20); do get 127.0.0.5 "http://n$i.test/" >/dev/null; done
egd_log_wait 'l["host"] == "n20.test"' >/dev/null
denials 401 '[x["host"] for x in d["denials"]] == ["n%d.test" % i for i in range(20, 4, -1)]' \
    "22 denials: the 16 newest, newest first"

# --- what is not a bound sandbox's
check "a sandbox that is not bound: 404 (got $(status GET /v1/sandboxes/999/denials))" \
    test "$(status GET /v1/sandboxes/999/denials)" = 404
check "default-policy has no denials endpoint: 404" test "$(status GET /v1/sandboxes/default/denials)" = 404
check "POST: 405" test "$(status POST /v1/sandboxes/401/denials)" = 405
check "a path with more after the id: 404" test "$(status GET /v1/sandboxes/401/x/denials)" = 404

# --- a binding deleted takes its denials along
egd_admin DELETE /v1/sandboxes/401 >/dev/null
check "deleted: 404" test "$(status GET /v1/sandboxes/401/denials)" = 404
egd_put 401 "$SB" >/dev/null
denials 401 'd["denials"] == []' "bound again under the same id: it starts with none"

egd_finish
tap_end
