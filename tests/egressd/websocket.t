#!/usr/bin/env bash
# websocket.t - WebSocket inside an intercepted tunnel (docs/credentials.md):
# a real client (undici's WebSocket, the one node's global WebSocket is
# built from, through HTTPS_PROXY) to a TLS WebSocket origin
# (wsorigin.py) whose upgrade request needs the secret in x-api-key.
#   - the upgrade is judged and gets its credential; the origin saw the real
#     key, the sandbox side only the placeholder;
#   - echo of text and binary messages, large ones, a message the origin
#     sends in fragments with a ping between them, the origin's ping
#     answered, a close from either side;
#   - one access-log line per upgrade: status 101, bytes, who ended it;
#   - an origin that sends the secret back in a frame is cut
#     (credential_reflected) before the frame reaches the client;
#   - the idle timeout, and a reload that revokes the host, cut a tunnel;
#   - an Upgrade other than WebSocket (h2c) gets a 426, on which clients
#     go on without it (curl shows it).
# TAP on stdout.  Needs BUILD_DIR, TOP; installs undici from npm once,
# then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"

egm_install_outside egm_node_setup
egd_netns "$@"
egd_setup || { rm -f "${EGM_INSTALL_LOG:-}"; egm_bail "set-up: temp dir, test CA, hosts, preset"; }
egm_install_check "node: undici $EGM_UNDICI_VERSION is installed in BUILD_DIR/e2e-node" \
    "nothing to run without undici"
MODS=$(egm_node_modules)

SB=127.0.0.1
WS_ADDR=127.0.0.30
egd_host "$WS_ADDR" ws.test
egd_allow "ws.test:4443 inject x-api-key secret wskey"
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
S=$T/secrets
mkdir -m 700 "$S"
SEC=sk-ws-REAL-$(rnd)
(umask 077 && printf '%s\n' "$SEC" >"$S/wskey")
mkdir -p "$T/want"
printf '%s\n' "$SEC" >"$T/want/wskey"
SBX=$T/sandbox
mkdir -p "$SBX/home"

egd_cert ws.test || egm_bail "a certificate for ws.test"
egm_server "$T/wsorigin.out" python3 -u "$EGD_DIR/wsorigin.py" --log "$T/wsorigin.log" \
    --cert "$T/certs/ws.test.pem" --key "$T/certs/ws.test.key" \
    --secret-file "$T/want/wskey" --listen "$WS_ADDR:4443" ||
    egm_bail "wsorigin.py serves ws.test"
egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" "timeout-idle 3s" ||
    egm_bail "egressd starts with secret-dir and timeout-idle 3s"
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"ws\",\"owner\":\"alice\",\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[\"wskey\"]}" \
    >/dev/null || egm_bail "PUT sandbox sb1 with secret wskey"
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$SBX/sbca.pem" || egm_bail "the credentials hold the sandbox CA"
PH=$(py -c 'import json,sys; print(json.load(open(sys.argv[1]))["placeholders"]["wskey"])' "$T/cred.json")
[[ $PH == egressd-ph-wskey-* ]] || egm_bail "the credentials hold the placeholder"

# ws NAME PATH SCRIPT [HEADER_JSON]: wsclient.js on the sandbox side (only
# the proxy, its CA and the placeholder); its JSON in $SBX/NAME.json.
ws() {
    local name=$1 path=$2 script=$3 headers=${4:-"{\"x-api-key\":\"$PH\"}"}
    env -i PATH="$PATH" HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY" \
        NODE_EXTRA_CA_CERTS="$SBX/sbca.pem" WS_HEADERS="$headers" WS_DUMP="$SBX/$name.got" \
        timeout 60 node "$EGD_DIR/wsclient.js" "$MODS/undici" "wss://ws.test:4443$path" "$script" \
        >"$SBX/$name.json" 2>"$SBX/$name.err"
}
ORIGIN_MARK=0
origin_mark() { ORIGIN_MARK=$(cat "$T/wsorigin.log" 2>/dev/null | wc -l); }
# origin_since PYEXPR: wsorigin.py's lines after the mark where PYEXPR over
# `o` holds, as a JSON array.
origin_since() {
    py - "$T/wsorigin.log" "$ORIGIN_MARK" "$1" <<'EOF'
import json, sys
try:
    lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
except FileNotFoundError:
    lines = []
print(json.dumps([o for o in map(json.loads, filter(str.strip, lines)) if eval(sys.argv[3])]))
EOF
}
sha16() { printf '%s' "$1" | sha256sum | cut -c1-16; }
# The binary message wsclient.js sends: byte i is i * 31 % 251.
BIN_SHA=$(py -c 'import hashlib; print(hashlib.sha256(bytes(i * 31 % 251 for i in range(100000))).hexdigest()[:16])')
TEXT_SHA=$(py -c 'import hashlib; print(hashlib.sha256(b"y" * 1048576).hexdigest()[:16])')

# ---- echo, large and fragmented messages, pings, the client's close
egd_log_mark
origin_mark
ws echo /echo "[{\"send\":\"hello\"},{\"expect\":\"hello\"},
  {\"send_bin\":100000},{\"expect_len\":100000,\"kind\":\"binary\",\"sha16\":\"$BIN_SHA\"},
  {\"send_text_len\":1048576},{\"expect_len\":1048576,\"kind\":\"text\",\"sha16\":\"$TEXT_SHA\"},
  {\"send\":\"ping-me\"},{\"expect\":\"pong-ok\"},
  {\"send\":\"frag 300000 5\"},{\"expect_len\":300000,\"kind\":\"text\"},
  {\"close\":1000,\"reason\":\"done\"},{\"expect_close\":true}]"
ok_json "echo through the intercepted tunnel: text, 100 kB binary, 1 MiB text, the origin's ping, a 5-fragment message, the client's close (1000)" \
    "$(cat "$SBX/echo.json")" "l['open'] and l['failed'] is None and l['steps'] == 12 and l['close']['code'] == 1000"
ok_json "... the origin saw the upgrade with the real key in x-api-key, not the placeholder" \
    "$(origin_since "o['event'] == 'upgrade'")" \
    "len(l) == 1 and l[0]['auth'] == 'match' and not l[0]['placeholder'] and l[0]['status'] == 101 and l[0]['path'] == '/echo'"
ok_json "... and every message whole: 5 of the client's, its pong, its close" \
    "$(origin_since "o['event'] in ('message', 'pong', 'close')")" \
    "[o.get('len') for o in l if o['event'] == 'message'] == [5, 100000, 1048576, 7, 13] and any(o['event'] == 'pong' and o['ok'] for o in l) and any(o['event'] == 'close' and o['code'] == 1000 and o['by'] == 'client' for o in l)"
# (after the close handshake the origin closes first, RFC 6455 section 7.1.1)
egd_log_ok "... one access-log line: GET, 101, allow, wskey added, the bytes both ways, ended by the origin after the handshake" \
    'l["mode"] == "intercept" and l["status"] == 101' \
    'l["method"] == "GET" and l["host"] == "ws.test" and l["path"] == "/echo" and l["decision"] == "allow" and l["inject"] == "wskey" and l["bytes_up"] > 1148000 and l["bytes_down"] > 1448000 and l["termination"] == "upstream/upgraded" and l["sandbox"] == "sb1"'

# ---- a frame that ends in what could begin the secret
PREFIX="tail ${SEC:0:14}"
ws prefix /echo "[{\"send\":\"$PREFIX\"},{\"expect\":\"$PREFIX\",\"within\":3},{\"close\":1000}]"
ok_json "a frame of the origin's that ends in the secret's first 14 bytes comes whole at once (held only to its frame's end)" \
    "$(cat "$SBX/prefix.json")" "l['open'] and l['failed'] is None and l['steps'] == 3"

# ---- the origin closes
egd_log_mark
origin_mark
ws srvclose /echo '[{"send":"close-me"},{"expect_close":true}]'
ok_json "the origin's close reaches the client: 1000, bye" "$(cat "$SBX/srvclose.json")" \
    "l['open'] and l['failed'] is None and l['close']['code'] == 1000 and l['close']['reason'] == 'bye'"
egd_log_ok "... logged as ended by the origin" 'l["mode"] == "intercept" and l["status"] == 101' \
    'l["termination"] == "upstream/upgraded" and l["decision"] == "allow"'

# ---- an origin that sends the secret back in a frame
egd_log_mark
origin_mark
ws headers /headers '[{"expect":"never"}]'
ok_json "an origin that echoes the upgrade's headers in a frame: the tunnel is cut, the client gets no message" \
    "$(cat "$SBX/headers.json")" "l['messages'] == [] and l['close'] is not None and l['close']['code'] == 1006"
check "... and nothing the client got holds the secret" sh -c "! grep -qsF '$SEC' '$SBX/headers.json' '$SBX/headers.err' '$SBX/headers.got'"
egd_log_ok "... logged credential_reflected, status 101" 'l["mode"] == "intercept" and l["path"] == "/headers"' \
    'l["status"] == 101 and l["reason"] == "credential_reflected" and l["termination"] == "proxy/upgraded"'

# ---- no key: the origin's 401 goes to the client, nothing is upgraded
egd_log_mark
origin_mark
ws nokey /echo '[]' '{}'
ok_json "without the placeholder the origin answers 401 and the client never opens" \
    "$(cat "$SBX/nokey.json")" "not l['open']"
ok_json "... the origin saw the upgrade without a key" "$(origin_since "o['event'] == 'upgrade'")" \
    "l and all(o['auth'] == 'absent' and o['status'] == 401 for o in l)"
egd_log_ok "... logged: 401, nothing added" 'l["mode"] == "intercept" and l["path"] == "/echo"' \
    'l["status"] == 401 and l["inject"] is None'

# ---- idle: nothing either way for timeout-idle (3 s)
egd_log_mark
ws idle /echo '[{"send":"hello"},{"expect":"hello"},{"expect":"never","within":8}]'
ok_json "an upgraded tunnel idle for timeout-idle (3 s) is closed (1006) before 8 s" \
    "$(cat "$SBX/idle.json")" \
    "l['open'] and l['close'] is not None and l['close']['code'] == 1006 and 2.5 < l['close']['t'] - l['messages'][0]['t'] < 6"
egd_log_ok "... logged as a timeout" 'l["mode"] == "intercept" and l["status"] == 101' \
    'l["termination"] == "timeout/upgraded"'

# ---- revocation: the host leaves the preset while a tunnel ticks
egd_log_mark
ws revoke /echo '[{"every":0.3,"for":15}]' &
WSPID=$!
sleep 2
cp "$T/policies/test.allow" "$T/test.allow.bak"
grep -v '^ws.test' "$T/test.allow.bak" >"$T/policies/test.allow"
kill -HUP "$EGD_PID"
wait "$WSPID"
ok_json "a reload that takes ws.test out of the preset cuts the ticking tunnel (1006) well before its 15 s" \
    "$(cat "$SBX/revoke.json")" \
    "l['open'] and l['close'] is not None and l['close']['code'] == 1006 and len(l['messages']) >= 3 and l['close']['t'] - l['t_open'] < 10"
egd_log_ok "... logged revoked" 'l["mode"] == "intercept" and l["status"] == 101' \
    'l["reason"] == "revoked" and l["decision"] == "deny"'
cp "$T/test.allow.bak" "$T/policies/test.allow"
kill -HUP "$EGD_PID"
sleep 0.5

# ---- an Upgrade other than WebSocket: 426
egd_log_mark
code=$(egd_env HTTPS_PROXY="http://$EGD_PROXY" curl -q -s --http1.1 --cacert "$SBX/sbca.pem" \
    -o "$T/h2c.body" -D "$T/h2c.head" -w '%{http_code}' -H "x-api-key: $PH" \
    -H 'Upgrade: h2c' -H 'Connection: Upgrade, HTTP2-Settings' -H 'HTTP2-Settings: AAMAAABkAAQAAP__' \
    https://ws.test:4443/echo)
ok "$([ "$code" = 426 ] && grep -qi '^Upgrade: HTTP/1.1' "$T/h2c.head" && echo 0 || echo 1)" \
    "curl asking for h2c inside the tunnel: 426 Upgrade Required, Upgrade: HTTP/1.1 ($code)"
egd_log_ok "... logged 426, the origin never asked" 'l["mode"] == "intercept" and l["status"] == 426' \
    'l["decision"] == "deny" and l["reason"] == "bad_request"'

# ---- what the sandbox side holds
check "no secret's value in anything the clients got or printed" sh -c "! grep -rqF '$SEC' '$SBX'"
check "no secret's value in egressd's access log or diagnostics" \
    sh -c "! grep -qF '$SEC' '$T/access.log' '$T/egressd.err'"

egd_finish
tap_end
