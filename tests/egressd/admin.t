#!/usr/bin/env bash
# admin.t - egressd's admin API on its unix socket, driven with curl and
# egressctl: bindings put, read, replaced, deleted and refused (each answer's
# status and error), replace-all, reload (a broken preset keeps the old
# policy), explain, status, the state file, a restart that brings the
# bindings back, a stale socket replaced and a non-socket refused, and a TCP
# admin with its bearer token.  TAP on stdout.
# Needs BUILD_DIR, TOP; runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_origin a.test extra.test || bail "the origins start"
egd_start || bail "egressd starts and answers /healthz"

CTL=$BUILD_DIR/proxy/egressctl
SOCK=$T/admin.sock
CONF=$T/egressd.conf

# api METHOD PATH [BODY]: sets CODE and BODY (the answer) from the unix socket.
api() {
    local args=(-q -sS --noproxy '*' -m 10 --unix-socket "$SOCK" -X "$1" -o "$T/api.body"
        -w '%{http_code}')
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
    CODE=$(curl "${args[@]}" "http://egressd$2" 2>"$T/api.err") || CODE=000
    BODY=$(cat "$T/api.body" 2>/dev/null)
}
# want TEXT CODE [PYEXPR]: one TAP line: the last answer had CODE and PYEXPR
# over `l` (the parsed body) holds.
want() {
    local rc=0
    [ "$CODE" = "$2" ] || rc=1
    if [ "$rc" -eq 0 ] && [ $# -ge 3 ]; then
        egd_json "$BODY" "$3" >/dev/null 2>&1 || rc=1
    fi
    ok "$rc" "$1"
    if [ "$rc" -ne 0 ]; then
        diag "wanted $2${3:+ and $3}"
        diag "got $CODE: $BODY"
        diag_file "$T/api.err" 3
    fi
}
# ctl NAME WANT_RC PATTERN... -- ARGS...: egressctl ARGS: exit status and
# every pattern in its output.
ctl() {
    local name=$1 want=$2 pats=() out rc=0 bad=0 p
    shift 2
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
    out=$("$CTL" "$@" 2>&1) || rc=$?
    [ "$rc" -eq "$want" ] || { bad=1; diag "exit $rc, wanted $want"; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" <<<"$out" || { bad=1; diag "missing: $p"; }
    done
    [ "$bad" -eq 0 ] || sed 's/^/#   /' <<<"$out"
    ok "$bad" "$name"
}

# --- the socket
ok "$([ "$(stat -c %a "$SOCK")" = 660 ] && echo 0 || echo 1)" "the admin socket is mode 0660"
api GET /v1/sandboxes
want "GET /v1/sandboxes: an empty list at first" 200 'l == []'

# --- put, get
ALICE='{"id":"101","name":"agent-alice-1","owner":"alice","addresses":["127.0.0.5","::1"],"policy":"test","allow":["extra.test:4443,8000"],"token":"s3cret","expires":"2099-11-30T09:00:00Z"}'
api PUT /v1/sandboxes/101 "$ALICE"
want "PUT /v1/sandboxes/101: 200 and the binding" 200 \
    'l["id"] == "101" and l["owner"] == "alice" and l["allow"] == ["extra.test:4443,8000"]'
ok_json "  the answer does not show the token" "$BODY" '"token" not in l'
api GET /v1/sandboxes/101
want "GET /v1/sandboxes/101: the binding, no token" 200 \
    'l["name"] == "agent-alice-1" and l["addresses"] == ["127.0.0.5", "::1"] and "token" not in l'
api GET /v1/sandboxes
want "GET /v1/sandboxes: the one binding" 200 'len(l) == 1 and l[0]["id"] == "101" and "token" not in l[0]'
ok "$([ "$(stat -c %a "$T/state/sandboxes.json")" = 600 ] && echo 0 || echo 1)" \
    "the state file is mode 0600"
check "the state file keeps the token" grep -q '"s3cret"' "$T/state/sandboxes.json"
api PUT /v1/sandboxes/102 '{"owner":"bob","addresses":["127.0.0.6"],"policy":"test"}'
want "PUT without an id in the body: the path's id" 200 'l["id"] == "102" and l["owner"] == "bob"'

# --- refusals: status and the field named
api PUT /v1/sandboxes/103 '{"policy":"test","addresses":["127.0.0.5"]}'
want "an address bound to another sandbox: 422, naming it" 422 \
    '"127.0.0.5 is already bound to sandbox 101" in l["error"]'
api PUT /v1/sandboxes/103 '{"policy":"test","adresses":["127.0.0.7"]}'
want "an unknown field: 400, naming it and the near one" 400 \
    "\"unknown field 'adresses' (did you mean 'addresses'?)\" in l[\"error\"]"
api PUT /v1/sandboxes/103 '{"policy":"nope"}'
want "an unknown preset: 422, naming it" 422 "\"found 'nope': no such preset\" in l[\"error\"]"
api PUT /v1/sandboxes/103 '{"policy":"test","allow":["deny a.test"]}'
want "a deny line among the extras: 422, with its place" 422 '"sandbox 103:1:1:" in l["error"]'
api PUT /v1/sandboxes/103 '{"policy":"test","addresses":["a.test"]}'
want "a name as an address: 400" 400 "\"addresses[0]: expected an IP address, found 'a.test'\" in l[\"error\"]"
api PUT /v1/sandboxes/103 '{"id":"104","policy":"test"}'
want "an id other than the path's: 400" 400 '"differs from the id in the path" in l["error"]'
api PUT /v1/sandboxes/103 '{"policy":"test",'
want "broken JSON: 400 with line and column" 400 'l["error"].startswith("body:1:")'
api PUT /v1/sandboxes/103 '{"policy":"test","expires":"soon"}'
want "a bad expires: 400" 400 '"expires: expected an RFC 3339 time" in l["error"]'
head -c 1100000 /dev/zero | tr '\0' ' ' >"$T/big.json"
CODE=$(curl -q -s --noproxy '*' -m 10 --unix-socket "$SOCK" -X PUT -o /dev/null -w '%{http_code}' \
    --data-binary @"$T/big.json" http://egressd/v1/sandboxes/103)
ok "$([ "$CODE" = 413 ] && echo 0 || echo 1)" "a body over 1 MiB: 413 (got $CODE)"
api GET /v1/sandboxes
want "nothing refused was bound" 200 '[b["id"] for b in l] == ["101", "102"]'
api POST /v1/sandboxes
want "POST /v1/sandboxes: 405" 405 '"error" in l'
api GET /v1/nothing
want "an unknown endpoint: 404" 404 '"error" in l'

# --- delete
api DELETE /v1/sandboxes/999
want "DELETE of a sandbox that is not there: 404" 404 '"no sandbox" in l["error"]'
api DELETE /v1/sandboxes/102
ok "$([ "$CODE" = 204 ] && echo 0 || echo 1)" "DELETE /v1/sandboxes/102: 204 (got $CODE)"
api GET /v1/sandboxes/102
want "  and it is gone" 404

# --- replace the whole set
SET='[{"id":"201","owner":"carol","addresses":["127.0.0.7"],"policy":"test","token":"t201"},
      {"id":"101","owner":"alice","addresses":["127.0.0.5"],"policy":"test","allow":["extra.test:4443,8000"],"token":"s3cret"}]'
api PUT /v1/sandboxes "$SET"
want "PUT /v1/sandboxes: the new set" 200 'sorted(b["id"] for b in l) == ["101", "201"]'
api PUT /v1/sandboxes '[{"id":"301","policy":"test"},{"id":"302","policy":"nope"}]'
want "a set with one bad binding: 422, all or nothing" 422 '"sandbox 302" in l["error"]'
api PUT /v1/sandboxes '{"id":"301"}'
want "an object instead of a set: 400" 400 '"expected a JSON array" in l["error"]'
api GET /v1/sandboxes
want "  the set is unchanged" 200 'sorted(b["id"] for b in l) == ["101", "201"] and l[0]["addresses"] != ["127.0.0.5", "::1"]'

# --- explain
RULE_A=$(egd_rule a.test)
api GET '/v1/explain?sandbox=101&host=extra.test&port=4443'
want "explain: a sandbox's extra line allows, each address checked" 200 \
    'l["decision"] == "allow" and l["rule"] == "sandbox 101:1" and l["sandbox"] == "101" and [a["addr"] for a in l["addresses"]] == ["127.0.0.21"] and l["addresses"][0]["decision"] == "allow"'
api GET '/v1/explain?host=extra.test&port=4443'
want "explain: the default policy has no such line" 200 \
    'l["sandbox"] == "default" and l["decision"] == "deny" and l["reason"] == "not_allowed" and l["rule"] is None and l["addresses"] == []'
api GET '/v1/explain?host=loop.test&port=4443'
want "explain: allowed by name, but its address is private_range" 200 \
    'l["decision"] == "deny" and l["reason"] == "private_range" and l["name"]["decision"] == "allow" and l["addresses"][0]["addr"] == "127.0.0.1"'
api GET '/v1/explain?host=a.test&port=4443'
want "explain: allowed by the preset's line" 200 \
    "l['decision'] == 'allow' and l['rule'].endswith('$RULE_A') and l['port'] == 4443"
api GET '/v1/explain?host=A.Test.&port=4443'
want "explain: the host is normalized" 200 'l["host"] == "a.test" and l["decision"] == "allow"'
api GET '/v1/explain?host=0x7f.1&port=80'
want "explain: a numeric name is bad_host" 200 'l["decision"] == "deny" and l["reason"] == "bad_host"'
api PUT /v1/sandboxes/105 '{"policy":"test","addresses":["127.0.0.55"],"expires":"2020-01-01T00:00:00Z"}'
api GET '/v1/explain?sandbox=105&host=a.test&port=4443'
want "explain: a binding past its expires is denied everything, as its traffic is" 200 \
    'l["sandbox"] == "105" and l["decision"] == "deny" and l["reason"] == "not_allowed" and "expired" in l["error"]'
api DELETE /v1/sandboxes/105
api GET '/v1/explain?sandbox=999&host=a.test'
want "explain: an unknown sandbox: 404" 404
api GET '/v1/explain?host=a.test&port=0'
want "explain: a bad port: 400" 400
ctl "egressctl explain --live: allowed, the sandbox's rule" 0 \
    "sandbox   101" "address 127.0.0.21 allow allowed" "verdict   allow allowed rule sandbox 101:1" \
    -- explain --live -c "$CONF" --sandbox 101 extra.test:4443
ctl "egressctl explain --live: denied private_range, exit 1" 1 \
    "address 127.0.0.1 deny private_range" "verdict   deny private_range" \
    -- explain --live -c "$CONF" loop.test:4443
ctl "egressctl explain --live: an unknown sandbox is egressd's 404" 1 "404" "no sandbox '999'" \
    -- explain --live --socket "$SOCK" --sandbox 999 a.test
# A socket names the running egressd for explain too, without --live or -c:
# the sandbox by id and the addresses egressd resolved say the answer is its.
ctl "egressctl -s SOCK explain: the live daemon answers (a socket implies --live)" 0 \
    "sandbox   101" "address 127.0.0.21 allow allowed" "verdict   allow allowed rule sandbox 101:1" \
    -- -s "$SOCK" explain --sandbox 101 extra.test:4443
ctl "egressctl -s SOCK explain -s ID: after explain, -s is the sandbox" 1 \
    "404" "no sandbox '999'" -- -s "$SOCK" explain -s 999 a.test
ctl "egressctl explain --socket SOCK: live too" 1 \
    "address 127.0.0.1 deny private_range" "verdict   deny private_range" \
    -- explain --socket "$SOCK" loop.test:4443
ctl "egressctl -s SOCK explain --preset: refused, the live explain uses the binding" 2 \
    "--preset and --addr are for the offline explain" \
    -- -s "$SOCK" explain --preset test a.test

# --- status, sandboxes
api GET /v1/status
want "GET /v1/status: version, uptime, generation, counts, presets" 200 \
    'isinstance(l["version"], str) and l["uptime_s"] >= 0 and l["generation"] >= 1 and l["sandboxes"] == 2 and l["presets"] == ["test"]'
GEN=$(egd_json "$BODY" 'l["generation"]')
ctl "egressctl status: the same, one per line" 0 "sandboxes            2" "generation           $GEN" \
    -- status -c "$CONF"
# The version is the one meson built (project() in meson.build).
VERSION=$(meson introspect "$BUILD_DIR" --projectinfo |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
want "GET /v1/status: version $VERSION, meson's project version" 200 "l['version'] == '$VERSION'"
ctl "egressctl status: version $VERSION" 0 "$(printf '%-20s %s' version "$VERSION")" \
    -- status -c "$CONF"
ctl "egressctl sandboxes: one line per binding" 0 "201" "carol" "127.0.0.7" "+1 allow" \
    -- -s "$SOCK" sandboxes
out=$("$CTL" sandboxes -s "$SOCK" --json 2>&1)
ok_json "egressctl sandboxes --json: the API's list, no token" "$out" \
    'sorted(b["id"] for b in l) == ["101", "201"] and all("token" not in b for b in l)'

# --- reload
egd_allow 'b.test:70000'
BAD_LINE=$(wc -l <"$T/policies/test.allow")
api POST /v1/reload
want "reload with a broken preset: 422, naming file:line" 422 \
    "any(e.endswith('test.allow:$BAD_LINE:8: expected a port 1..65535 (or \\':*\\' for any port), found \\'70000\\'') for e in l['errors'])"
ctl "egressctl reload: refused, egressd's error printed, exit 1" 1 "422" "test.allow:$BAD_LINE:8" \
    -- reload -c "$CONF"
api GET /v1/status
want "  the old world stays (same generation)" 200 "l['generation'] == $GEN"
api GET '/v1/explain?host=a.test&port=4443'
want "  and it still decides" 200 'l["decision"] == "allow"'
sed -i '$d' "$T/policies/test.allow"
egd_allow 'nowhere.test:4443'
ctl "egressctl reload: the fixed preset loads" 0 "reloaded: generation $((GEN + 1))" \
    -- -c "$CONF" reload
api GET '/v1/explain?host=nowhere.test&port=4443'
want "  a new line is in force: a name it allows that does not resolve is dns_fail" 200 \
    'l["name"]["decision"] == "allow" and l["decision"] == "deny" and l["reason"] == "dns_fail" and l["addresses"] == []'
api GET /v1/sandboxes
want "  the bindings are kept" 200 'sorted(b["id"] for b in l) == ["101", "201"]'

# --- the bindings at work: address 127.0.0.7 is carol's; 101 by its token
egd_log_mark
egd_curl --interface 127.0.0.7 -x "http://$EGD_PROXY" -o /dev/null "http://a.test:$EGD_HTTP_PORT/" 
egd_log_ok "a request from 127.0.0.7 is sandbox 201's" 'l["host"] == "a.test"' \
    'l["sandbox"] == "201" and l["owner"] == "carol"'

# --- restart: the bindings come back
BEFORE=$("$CTL" -s "$SOCK" sandboxes --json)
egd_stop
ok $? "egressd stops"
ok "$([ ! -e "$SOCK" ] && echo 0 || echo 1)" "  and removes its socket"
ctl "egressctl with egressd stopped: cannot connect, exit 1" 1 "cannot connect" \
    -- status -s "$SOCK"
egd_start || bail "egressd starts again"
AFTER=$("$CTL" -s "$SOCK" sandboxes --json)
ok "$([ -n "$BEFORE" ] && [ "$BEFORE" = "$AFTER" ] && echo 0 || echo 1)" \
    "after a restart the same bindings are back"
egd_log_mark
egd_curl -x "http://101:s3cret@$EGD_PROXY" -o /dev/null "http://extra.test:$EGD_HTTP_PORT/"
egd_log_ok "  with their tokens (Proxy-Authorization names 101)" 'l["host"] == "extra.test"' \
    'l["sandbox"] == "101" and l["decision"] == "allow"'

# --- a stale socket is replaced; something else at the path is refused
kill -KILL "$EGD_PID"
wait "$EGD_PID" 2>/dev/null
EGD_PID=
ok "$([ -S "$SOCK" ] && echo 0 || echo 1)" "a killed egressd leaves its socket behind"
egd_start || bail "egressd starts over a stale socket"
api GET /v1/status
want "  and serves on it" 200 'l["sandboxes"] == 2'
egd_stop
echo 'not a socket' >"$SOCK"
if egd_start 2>/dev/null; then
    ok 1 "a regular file at the socket path: egressd refuses to start"
    egd_stop
else
    ok 0 "a regular file at the socket path: egressd refuses to start"
fi
check "  saying why" grep -q "admin.sock: admin: exists and is not a socket" "$T/egressd.err"
check "  and the file is left alone" grep -q 'not a socket' "$SOCK"
rm -f "$SOCK"

# --- TCP admin with a bearer token; and a resolver that never answers, so
# that explain has to wait for it
SILENT_DNS=127.0.0.1:5399
python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 5399))
while True: s.recvfrom(4096)' &
EGD_PIDS+=($!)
ADMIN_TCP=127.0.0.1:9470
printf 'tok-%s\n' "$RANDOM$RANDOM" >"$T/admin.token"
TOKEN=$(head -n1 "$T/admin.token")
chmod 644 "$T/admin.token"
tcp_start() {
    egd_write_config
    sed -i "s|^admin .*|admin $ADMIN_TCP\nadmin-token-file $T/admin.token\nresolver $SILENT_DNS|" \
        "$T/egressd.conf"
    "$EGD_BIN" -c "$T/egressd.conf" 2>>"$T/egressd.err" &
    EGD_PID=$!
    for ((i = 0; i < 200; i++)); do
        [ "$(curl -q -s --noproxy '*' -m 1 "http://$EGD_METRICS/healthz")" = ok ] && return 0
        kill -0 "$EGD_PID" 2>/dev/null || { wait "$EGD_PID"; EGD_PID=; return 1; }
        sleep 0.05
    done
    return 1
}
if tcp_start; then
    ok 1 "a token file others may read: egressd refuses to start"
    egd_stop
else
    ok 0 "a token file others may read: egressd refuses to start"
fi
check "  saying why and how to fix it" grep -q "admin.token: admin-token-file: group or others may access it (mode 0644).*chmod 600" "$T/egressd.err"
chmod 600 "$T/admin.token"
tcp_start || bail "egressd starts with a TCP admin"
tcp() { curl -q -s --noproxy '*' -m 5 -o "$T/api.body" -w '%{http_code}' "$@"; }
CODE=$(tcp "http://$ADMIN_TCP/v1/status")
ok "$([ "$CODE" = 401 ] && echo 0 || echo 1)" "TCP admin without a token: 401 (got $CODE)"
CODE=$(tcp -H "Authorization: Bearer ${TOKEN}x" "http://$ADMIN_TCP/v1/status")
ok "$([ "$CODE" = 401 ] && echo 0 || echo 1)" "TCP admin with a wrong token: 401 (got $CODE)"
CODE=$(tcp -H "Authorization: Bearer $TOKEN" "http://$ADMIN_TCP/v1/sandboxes")
ok "$([ "$CODE" = 200 ] && echo 0 || echo 1)" "TCP admin with the token: 200 (got $CODE)"
ok_json "  the same bindings" "$(cat "$T/api.body")" 'sorted(b["id"] for b in l) == ["101", "201"]'
ctl "egressctl -c with a TCP admin sends the token" 0 "sandboxes            2" -- status -c "$CONF"

# explain waiting for the resolver: the loop goes on meanwhile, a client
# that gives up costs nothing, and a stop answers what still waits.
EXPLAIN="http://$ADMIN_TCP/v1/explain?host=nowhere.test&port=4443"
AUTH="Authorization: Bearer $TOKEN"
CODE=$(curl -q -s --noproxy '*' -m 1 -o /dev/null -w '%{http_code}' -H "$AUTH" "$EXPLAIN")
ok "$([ "$CODE" = 000 ] && echo 0 || echo 1)" "explain of a name the silent resolver is asked: still waiting after 1 s"
curl -q -s --noproxy '*' -m 30 -o "$T/explain.slow" -H "$AUTH" "$EXPLAIN" &
SLOW=$!
t0=$(date +%s%N)
CODE=$(tcp -H "$AUTH" "http://$ADMIN_TCP/v1/status")
t1=$(date +%s%N)
ok "$([ "$CODE" = 200 ] && [ $(((t1 - t0) / 1000000)) -lt 1000 ] && echo 0 || echo 1)" \
    "  meanwhile status answers at once ($(((t1 - t0) / 1000000)) ms)"
wait "$SLOW"
ok_json "  the waiting explain ends in dns_fail when the resolver gives up" "$(cat "$T/explain.slow")" \
    'l["decision"] == "deny" and l["reason"] == "dns_fail" and l["dns"] == "fail" and l["name"]["decision"] == "allow"'
CODE=$(tcp -H "$AUTH" "http://$ADMIN_TCP/v1/status")
ok "$([ "$CODE" = 200 ] && echo 0 || echo 1)" "  egressd is well after answering a client that had gone"
curl -q -s --noproxy '*' -m 30 -o "$T/explain.stop" -w '%{http_code}' -H "$AUTH" "$EXPLAIN" \
    >"$T/explain.stop.code" &
SLOW=$!
sleep 0.5

egd_finish
wait "$SLOW"
ok "$([ "$(cat "$T/explain.stop.code")" = 503 ] && echo 0 || echo 1)" \
    "an explain still waiting at stop is answered 503 (got $(cat "$T/explain.stop.code"))"
ctl "usage: an online command without -s or -c" 2 "-s SOCKET or -c egressd.conf is required" \
    -- reload
tap_end
