#!/usr/bin/env bash
# rules.t - what a sandbox may do on a host, not only where it may go:
# `methods` and `paths` on allow rules, judged on every plain HTTP request
# (explicit proxy and transparent), by real clients (curl, python's
# urllib, node's fetch) and byte-exact ones for the tricks: dot segments
# escaped or not, "//", "..;", a method in lower case, "OPTIONS *".  A
# refused request never reaches the origin; the 403, its X-Egress-Deny and
# the access-log line name the reason and the rule.  Allows add up; a
# preset's `read-only` applies to a sandbox's own lines too; a tunnel to a
# host that only such rules allow is refused (its requests cannot be read
# there), unless its sandbox has a CA: then it is intercepted, each request
# judged inside, and an answer its origin ends by closing arrives whole
# (close_notify); node's fetch (undici's EnvHttpProxyAgent, the sandbox's
# CA in NODE_EXTRA_CA_CERTS) is judged the same way inside the tunnel; and
# `egressctl explain --method --path` says what egressd does, case by
# case.  TAP on stdout.  Needs BUILD_DIR, TOP; installs undici with npm
# once, then runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
# Outside the namespace (the npm registry is reachable only here): the
# pinned undici, once (EGM_INSTALL_OK, EGM_INSTALL_LOG inside).
egm_install_outside egm_node_setup
egd_netns "$@"
egd_setup || { rm -f "${EGM_INSTALL_LOG:-}"; bail "set-up: temp dir, test CA, hosts, preset"; }
[ -f "${EGM_INSTALL_LOG:-}" ] && mv "$EGM_INSTALL_LOG" "$T/node-setup.log"
egd_host 127.0.0.31 rules.test
egd_host 127.0.0.30 both.test
egd_host 127.0.0.29 ro.test
egd_host 127.0.0.24 close.test
egd_allow 'rules.test:8000,4443 methods GET,HEAD paths /repos/acme/**,/hello' \
    'both.test:8000 methods GET' \
    'both.test:8000 methods POST paths /w/**' 'close.test:4444 methods GET'
printf '%s\n' 'read-only' 'ro.test:8000' >"$T/policies/ro.allow"
egd_origin a.test b.test rules.test both.test ro.test || bail "the origins start"
# An origin that ends its answer by closing (HTTP/1.0, no length): openssl's.
egd_cert close.test || bail "close.test's certificate"
openssl s_server -quiet -www -accept 127.0.0.24:4444 -cert "$T/certs/close.test.pem" \
    -key "$T/certs/close.test.key" >"$T/s_server.out" 2>&1 &
EGD_PIDS+=($!)
egd_start "upstream-ca-file $EGD_CA" || bail "egressd starts and answers /healthz"
RULE=$(egd_rule rules.test)
R=$T/resp
P=http://$EGD_PROXY

# origin_saw PATH: how many requests for PATH the origins logged.
origin_saw() { origin_log_count "o.get('event') == 'request' and o.get('target', '').endswith('$1')"; }

# through METHOD URL [CURL-ARGS...]: curl through the proxy; prints
# "STATUS X-Egress-Deny" (the header empty when absent).
through() {
    local m=$1 url=$2
    shift 2
    egd_curl -x "$P" -X "$m" -o "$R.body" -D "$R.head" "$@" "$url" >/dev/null 2>&1
    local st deny
    st=$(awk 'NR == 1 { print $2 }' "$R.head" 2>/dev/null)
    deny=$(awk -F': ' 'tolower($1) == "x-egress-deny" { sub(/\r$/, "", $2); print $2 }' "$R.head" 2>/dev/null)
    echo "${st:-none} ${deny}"
}

# expect TEXT GOT WANT: one TAP line.
expect() {
    local rc=0
    [ "$2" = "$3" ] || rc=1
    ok "$rc" "$1"
    [ "$rc" -eq 0 ] || diag "got '$2', wanted '$3'"
}

U=http://rules.test:$EGD_HTTP_PORT
# --- curl: what the rule admits goes on; what it does not is refused here.
expect "GET /hello passes (200 from the origin)" "$(through GET "$U/hello")" "200 "
expect "GET /repos/acme/x passes (the origin's own 404)" "$(through GET "$U/repos/acme/x")" "404 "
expect "HEAD /repos/acme/deep/er/path passes" "$(through HEAD "$U/repos/acme/deep/er/path" -I)" "404 "
egd_log_mark
expect "POST /repos/acme/x is refused: method_not_allowed, naming the rule" \
    "$(through POST "$U/repos/acme/x" -d 'x=1')" "403 method_not_allowed; rule=$RULE"
egd_log_ok "  its log line: deny method_not_allowed, the rule, method and path" \
    'l["host"] == "rules.test"' \
    "l['decision'] == 'deny' and l['reason'] == 'method_not_allowed' and l['rule'] == '$RULE' and l['method'] == 'POST' and l.get('path') == '/repos/acme/x'"
grep -q "denied (method_not_allowed; rule=$RULE)" "$R.body"
ok $? "  its body says the same"
expect "GET /repos/other is refused: path_not_allowed" "$(through GET "$U/repos/other")" \
    "403 path_not_allowed; rule=$RULE"
expect "GET /repos/acmex is refused (a glob's segment is whole)" "$(through GET "$U/repos/acmex")" \
    "403 path_not_allowed; rule=$RULE"
expect "GET /repos/acme/a%7Eb passes (an escaped unreserved character is that character)" \
    "$(through GET "$U/repos/acme/a%7Eb")" "404 "
ok "$([ "$(origin_saw /repos/acme/a%7Eb)" -ge 1 ] && echo 0 || echo 1)" \
    "  and the origin got the path as it was sent"

# --- tricks: dot segments, "//", "..;", all refused before the origin.
for path in '/repos/acme/../other' '/repos/acme/%2e%2e/other' '/repos/acme/%2E./other' \
    '//repos/acme/x' '/repos/acme//x' '/repos/acme/..;/other' '/repos/acme%2Fx' \
    '/repos/acme/x%5C..'; do
    expect "GET $path is refused: path_not_allowed" \
        "$(through GET "$U$path" --path-as-is)" "403 path_not_allowed; rule=$RULE"
done
ok "$([ "$(origin_saw /repos/other)" -eq 0 ] && [ "$(origin_saw /repos/acme/../other)" -eq 0 ] &&
    [ "$(origin_saw /repos/acme/%2e%2e/other)" -eq 0 ] && echo 0 || echo 1)" \
    "none of the refused paths reached the origin"

# rawreq NAME REQUEST-LINE: one request through the proxy, byte for byte.
rawreq() {
    raw --out "$R.$1" --status "$R.$1.st" "$EGD_PROXY" \
        "send:$2\r\nHost: rules.test:$EGD_HTTP_PORT\r\nConnection: close\r\n\r\n" head eof \
        >/dev/null 2>&1
}
rawreq lower "get $U/hello HTTP/1.1"
check_resp "a method in lower case is another method: method_not_allowed" "$R.lower" \
    "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'method_not_allowed; rule=$RULE'"
rawreq opts "OPTIONS $U/hello HTTP/1.1"
check_resp "OPTIONS is not among the rule's methods either" "$R.opts" \
    "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'method_not_allowed; rule=$RULE'"
raw --out "$R.star" --status "$R.star.st" "$EGD_PLAIN" \
    "send:OPTIONS * HTTP/1.1\r\nHost: rules.test:$EGD_HTTP_PORT\r\nConnection: close\r\n\r\n" \
    head eof >/dev/null 2>&1
check_resp "'OPTIONS *' (transparent HTTP) is refused" "$R.star" \
    "r[0]['status'] in (400, 403) and r[0]['h'].get('x-egress-deny')"
rawreq params "GET $U/repos/acme;v=1/x HTTP/1.1"
check_resp "';' parameters in a segment are part of it (/repos/acme;v=1/x is not under /repos/acme/)" \
    "$R.params" "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'path_not_allowed; rule=$RULE'"

# --- the transparent HTTP listener judges the same way.
raw --out "$R.tp" --status "$R.tp.st" "$EGD_PLAIN" \
    "send:DELETE /repos/acme/x HTTP/1.1\r\nHost: rules.test:$EGD_HTTP_PORT\r\nConnection: close\r\n\r\n" \
    head eof >/dev/null 2>&1
check_resp "transparent HTTP: DELETE /repos/acme/x is refused: method_not_allowed" "$R.tp" \
    "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'method_not_allowed; rule=$RULE'"
raw --out "$R.tp2" --status "$R.tp2.st" "$EGD_PLAIN" \
    "send:GET /hello HTTP/1.1\r\nHost: rules.test:$EGD_HTTP_PORT\r\nConnection: close\r\n\r\n" \
    head eof >/dev/null 2>&1
check_resp "transparent HTTP: GET /hello passes" "$R.tp2" "r[0]['status'] == 200"

# --- python and node, as agents' tools send them.
pyout=$(egd_python - "$P" "$U" 2>&1 <<'EOF'
import sys, urllib.request, urllib.error
proxy, base = sys.argv[1], sys.argv[2]
op = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
def status(method, path, data=None):
    try:
        return op.open(urllib.request.Request(base + path, data=data, method=method), timeout=10).status
    except urllib.error.HTTPError as e:
        return "%d %s" % (e.code, e.headers.get("X-Egress-Deny", "").split(";")[0])
print(status("GET", "/hello"), "|", status("PUT", "/repos/acme/x", b"{}"), "|", status("GET", "/etc"))
EOF
)
expect "python urllib: GET passes, PUT and another path are refused" "$pyout" \
    "200 | 403 method_not_allowed | 403 path_not_allowed"
if command -v node >/dev/null 2>&1; then
    nodeout=$(egd_env node -e '
const http = require("http");
function req(method, path) {
  return new Promise((done) => {
    const r = http.request({host: process.argv[1].split(":")[0], port: +process.argv[1].split(":")[1],
      method, path: process.argv[2] + path, headers: {host: process.argv[2].replace("http://", "")}},
      (res) => { res.resume(); res.on("end", () => done(res.statusCode + " " + ((res.headers["x-egress-deny"] || "").split(";")[0]))); });
    r.on("error", (e) => done("error " + e.message));
    r.end(method === "PATCH" ? "{}" : undefined);
  });
}
(async () => { console.log([await req("GET", "/hello"), await req("PATCH", "/repos/acme/x")].join(" | ")); })();
' "$EGD_PROXY" "$U" 2>&1)
    expect "node http through the proxy: GET passes, PATCH is refused" "$nodeout" \
        "200  | 403 method_not_allowed"
else
    ok 1 "node http through the proxy (node is not installed)"
fi

# --- allows add up: a rule for GET anywhere and one for POST under /w/.
B=http://both.test:$EGD_HTTP_PORT
RULE_B1=$(awk '/^both\.test:8000 methods GET$/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
expect "allows add up: GET /anything passes by the first rule" "$(through GET "$B/hello")" "200 "
expect "  POST /w/x passes by the second" "$(through POST "$B/w/x" -d y)" "404 "
expect "  POST /other is refused, naming the rule that admits its path (the first)" \
    "$(through POST "$B/other" -d y)" "403 method_not_allowed; rule=$RULE_B1"

# --- a read-only preset: its sandbox's own lines are read-only too.
egd_put 731 '{"addresses":["127.0.0.73"],"policy":"ro","allow":["b.test:8000"]}' >/dev/null ||
    bail "bind sandbox 731"
ro() { egd_curl --interface 127.0.0.73 -x "$P" -X "$1" -o /dev/null -w '%{http_code}' "$2" 2>/dev/null; }
expect "read-only: GET passes" "$(ro GET "http://ro.test:$EGD_HTTP_PORT/hello")" "200"
expect "read-only: POST is refused" "$(ro POST "http://ro.test:$EGD_HTTP_PORT/hello")" "403"
expect "read-only: the sandbox's own line admits GET" "$(ro GET "http://b.test:$EGD_HTTP_PORT/hello")" "200"
expect "read-only: and refuses DELETE there too" "$(ro DELETE "http://b.test:$EGD_HTTP_PORT/hello")" "403"

# --- a tunnel cannot be judged request by request (not intercepted): refused.
st=$(egd_curl -x "$P" -o /dev/null -w '%{http_code}' "https://rules.test:$EGD_HTTPS_PORT/hello" 2>/dev/null)
expect "CONNECT to a host only request rules allow is refused" "$st" "000"
egd_log_mark
egd_curl -x "$P" -o /dev/null "https://rules.test:$EGD_HTTPS_PORT/hello" >/dev/null 2>&1
egd_log_ok "  logged as a denial of its (unread) requests, with the rule" \
    'l["host"] == "rules.test" and l["mode"] == "connect"' \
    "l['decision'] == 'deny' and l['reason'] in ('path_not_allowed', 'method_not_allowed') and l['rule'] == '$RULE'"

# --- a sandbox with a CA: the tunnel is intercepted, each request judged.
SB=127.0.0.75
egd_put rb "{\"id\":\"rb\",\"addresses\":[\"$SB\"],\"policy\":\"test\"}" >/dev/null ||
    bail "bind sandbox rb"
egd_admin GET /v1/sandboxes/rb/credentials >"$T/cred.json" || bail "GET rb's credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"] or "")' \
    "$T/cred.json" "$T/sbca.pem"
openssl x509 -in "$T/sbca.pem" -noout -ext nameConstraints >"$T/nc.txt" 2>&1
ok "$(grep -q 'DNS:rules.test' "$T/nc.txt" && grep -q 'DNS:both.test' "$T/nc.txt" &&
    ! grep -q 'a.test' "$T/nc.txt" && echo 0 || echo 1)" \
    "a sandbox without secrets gets a CA for the hosts of its request rules, and only those"
sed 's/^/#   /' "$T/nc.txt" | head -n 4
# sbreq METHOD PATH: curl from rb over HTTPS through the proxy, trusting only
# rb's CA; prints "STATUS X-Egress-Deny".
sbreq() {
    egd_env curl -q -sS --cacert "$T/sbca.pem" -m 10 --interface "$SB" -x "$P" --path-as-is \
        -X "$1" -o /dev/null -D "$R.sb" "https://rules.test:$EGD_HTTPS_PORT$2" >/dev/null 2>&1
    awk '/^HTTP\// { st = $2; d = "" } tolower($1) == "x-egress-deny:" { sub(/\r$/, ""); d = $2 " " $3 }
        END { print (st ? st : "none") " " d }' "$R.sb" 2>/dev/null
}
expect "HTTPS, intercepted: GET /hello passes" "$(sbreq GET /hello)" "200 "
expect "HTTPS, intercepted: GET /repos/acme/x passes" "$(sbreq GET /repos/acme/x)" "404 "
egd_log_mark
expect "HTTPS, intercepted: POST /repos/acme/x is refused inside the tunnel" \
    "$(sbreq POST /repos/acme/x)" "403 method_not_allowed; rule=$RULE"
egd_log_ok "  logged as an intercepted request: deny method_not_allowed with the rule and path" \
    'l["host"] == "rules.test" and l["mode"] == "intercept"' \
    "l['decision'] == 'deny' and l['reason'] == 'method_not_allowed' and l['rule'] == '$RULE' and l['path'] == '/repos/acme/x' and l['sandbox'] == 'rb'"
expect "HTTPS, intercepted: GET /repos/acme/%2e%2e/other is refused" \
    "$(sbreq GET /repos/acme/%2e%2e/other)" "403 path_not_allowed; rule=$RULE"
expect "HTTPS, intercepted: GET /repos/other is refused" "$(sbreq GET /repos/other)" \
    "403 path_not_allowed; rule=$RULE"
ok "$([ "$(origin_saw /repos/other)" -eq 0 ] && echo 0 || echo 1)" "  neither reached the origin"
# A strict TLS client (GnuTLS, as git's libcurl is, and Python with
# suppress_ragged_eofs off) takes a close without close_notify as a cut.
closeout=$(egd_python - "$EGD_PROXY" "$SB" "$T/sbca.pem" 2>&1 <<'PY'
import socket, ssl, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), source_address=(sys.argv[2], 0), timeout=10)
s.sendall(b"CONNECT close.test:4444 HTTP/1.1\r\nHost: close.test:4444\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context(cafile=sys.argv[3])
t = ctx.wrap_socket(s, server_hostname="close.test", suppress_ragged_eofs=False)
t.sendall(b"GET / HTTP/1.0\r\nHost: close.test\r\n\r\n")
body = b""
try:
    while True:
        d = t.recv(65536)
        if not d:
            break
        body += d
    print("whole" if b"s_server" in body else "short")
except ssl.SSLError as e:
    print("cut:", e.__class__.__name__)
PY
)
check "HTTPS, intercepted: an answer the origin ends by closing arrives whole, ended by egressd's close_notify ($closeout)" \
    test "$closeout" = whole
st=$(egd_env curl -q -sS --cacert "$EGD_CA" -m 10 --interface "$SB" -x "$P" -o /dev/null \
    -w '%{http_code}' "https://a.test:$EGD_HTTPS_PORT/hello" 2>/dev/null)
expect "HTTPS to a host without request rules stays an opaque tunnel (the origin's own certificate)" \
    "$st" "200"

# --- explain says what egressd does, case by case.
cat >"$T/explain.conf" <<EOF
listen $EGD_PROXY
policy-dir $T/policies
default-policy test
EOF
agree=0 total=0
while read -r m path want; do
    total=$((total + 1))
    got=$("$BUILD_DIR/proxy/egressctl" explain -c "$T/explain.conf" --method "$m" --path "$path" \
        "rules.test:$EGD_HTTP_PORT" 2>&1 | awk '$1 == "verdict" { print $2 }')
    asked=$("$BUILD_DIR/proxy/egressctl" -s "$T/admin.sock" explain --method "$m" --path "$path" \
        "rules.test:$EGD_HTTP_PORT" 2>&1 | awk '$1 == "verdict" { print $2 }')
    live=$(through "$m" "$U$path" --path-as-is)
    case $live in 403\ *) seen=deny ;; none*) seen=none ;; *) seen=allow ;; esac
    if [ "$got" = "$want" ] && [ "$asked" = "$want" ] && [ "$seen" = "$want" ]; then
        agree=$((agree + 1))
    else
        diag "$m $path: explain '$got', explain --live '$asked', egressd '$live', wanted $want"
    fi
done <<'EOF'
GET /hello allow
GET /repos/acme/x allow
HEAD /repos/acme/x/y allow
POST /repos/acme/x deny
GET /repos/other deny
GET /repos/acme/../x deny
GET /repos/acme/%2e%2e/x deny
GET //hello deny
GET /repos/acme/a%7Eb allow
DELETE /hello deny
GET /repos/acme/..;/x deny
GET /repos/acme;v=1/x deny
PUT /repos/acme/x deny
HEAD /hello allow
EOF
expect "explain, explain --live and egressd agree on every case ($total)" "$agree" "$total"

# --- node's fetch over HTTPS, as agents' tools send it: undici's
# EnvHttpProxyAgent (HTTPS_PROXY) as the global dispatcher, the CA of a
# sandbox bound to 127.0.0.1 (node's source) in NODE_EXTRA_CA_CERTS.
if [ "${EGM_INSTALL_OK:-0}" = 1 ]; then
    egd_put nb '{"id":"nb","addresses":["127.0.0.1"],"policy":"test"}' >/dev/null ||
        bail "bind sandbox nb (127.0.0.1)"
    egd_admin GET /v1/sandboxes/nb/credentials >"$T/nbcred.json" || bail "GET nb's credentials"
    py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"] or "")' \
        "$T/nbcred.json" "$T/nbca.pem"
    nodeout=$(egd_env HTTPS_PROXY="http://$EGD_PROXY" NODE_EXTRA_CA_CERTS="$T/nbca.pem" node -e '
const undici = require(process.argv[1]);
undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent());
async function status(method, path) {
  try {
    const r = await fetch(process.argv[2] + path, {method, body: method === "POST" ? "{}" : undefined});
    await r.arrayBuffer();
    return r.status + " " + (r.headers.get("x-egress-deny") || "").split(";")[0];
  } catch (e) { return "error " + (e.cause ? e.cause.code || e.cause.message : e.message); }
}
(async () => console.log([await status("GET", "/hello"), await status("POST", "/repos/acme/x"),
  await status("GET", "/repos/other")].join(" | ")))();
' "$(egm_node_modules)/undici" "https://rules.test:$EGD_HTTPS_PORT" 2>&1)
    expect "node fetch (undici EnvHttpProxyAgent), intercepted: GET passes, POST and another path refused" \
        "$nodeout" "200  | 403 method_not_allowed | 403 path_not_allowed"
else
    ok 1 "node fetch: undici $EGM_UNDICI_VERSION is installed in BUILD_DIR"
    diag_file "$T/node-setup.log"
fi

egd_finish
tap_end
