#!/usr/bin/env bash
# tests/sandboxctl/egressd.t - sandboxctl and egressd end to end: requests
# through egressd's proxy from a sandbox's address are judged by the binding
# sandboxctl pushed (the access log's sandbox, owner and rule), on both
# egressd; after destroy that address falls back to the default policy; sync
# puts back a binding deleted by hand and removes one whose VM Proxmox no
# longer holds; a restarted egressd keeps its bindings (state-dir), also a
# stale one that sync then removes; an expired binding gets nothing and reap
# removes it.  The sandboxes' addresses are 127.0.0.40-49, the origins a.test
# and b.test (127.0.0.16, .17, port 8000); everything runs in a network
# namespace of its own.  PVE 9.1 schema (commands.t covers both).
set -u
if [ -z "${SBX_IN_NETNS:-}" ]; then
    export SBX_IN_NETNS=1
    exec unshare -n -- bash "$0" "$@"
fi
. "$TOP/tests/sandboxctl/lib.sh"
ip link set lo up || {
    ok 1 "ip link set lo up in the new network namespace"
    tap_end
    exit 1
}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
    CURL_CA_BUNDLE SSL_CERT_FILE CURL_HOME

# The default world plus sandbox 250, past its end of life and not reaped
# yet, on 127.0.0.49.
world() {
    sbx_world 9 | python3 -c '
import json, sys
w = json.load(sys.stdin)
w["vms"] = [{"vmid": 250, "node": "pve1", "name": "late", "pool": "sandboxes", "status": "running",
             "description": "Sandbox managed by sandboxctl\n\nsandboxctl-sandbox v1\nowner: zoe\n"
                            "created: 2020-01-01T00:00:00Z\nexpires: 2020-01-01T04:00:00Z\n"
                            "policy: p\naddress: 127.0.0.49\nallow: b.test:8000"}]
print(json.dumps(w))'
}

ORIGIN_PID=
sbx_start 9 "$(world)" || {
    ok 1 "the simulator and both egressd start"
    tap_end
    exit 1
}
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; sbx_stop_all quiet' EXIT
sbx_write_config </dev/null
sed -i -e 's|^ip-pool .*|ip-pool 127.0.0.40-127.0.0.49/24|' -e 's|^gateway .*|gateway 127.0.0.1|' \
    -e "s|^proxy .*|proxy $SBX_EGD1_PROXY|" "$CONF"

# The origins: one HTTP server on each name's address, answering its name.
sbx_origins "$T/origin.out" a.test=127.0.0.16 b.test=127.0.0.17
ok $? "the origins a.test and b.test listen"
ORIGIN_PID=$SBX_ORIGIN_PID

# via N ADDR HOST: GET http://HOST:8000/ through egressd N's proxy from ADDR;
# prints the status (000 when there was none); the body is in $T/via.body.
via() {
    local proxy
    eval "proxy=\$SBX_EGD$1_PROXY"
    curl -q -sS -m 10 --interface "$2" -x "http://$proxy" -o "$T/via.body" -w '%{http_code}' \
        "http://$3:8000/" 2>"$T/via.err" || true
}

# log_line N MARK ADDR HOST: the first line of egressd N's access log after
# line MARK for a request from ADDR to HOST (polled for 5 s: a line is
# written when its request ends).
log_line() {
    python3 -S - "$T/egressd$1/access.log" "$2" "$3" "$4" <<'EOF'
import json, sys, time
path, mark, addr, host = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
end = time.monotonic() + 5
while True:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")[:-1]
    except FileNotFoundError:
        lines = []
    for raw in lines[mark:]:
        try:
            l = json.loads(raw)
        except ValueError:
            continue
        src = str(l.get("src"))
        if l.get("host") == host and (src == addr or src.startswith(addr + ":")):
            print(raw)
            sys.exit(0)
    if time.monotonic() >= end:
        sys.exit(1)
    time.sleep(0.05)
EOF
}

# judge TEXT N ADDR HOST CODE PYEXPR: one request (via), one TAP line: the
# answer's status is CODE and PYEXPR holds over `j`, egressd N's access-log
# line for it.
judge() {
    local text=$1 n=$2 addr=$3 host=$4 want=$5 expr=$6 mark code line rc=0
    mark=$(wc -l <"$T/egressd$n/access.log" 2>/dev/null || echo 0)
    code=$(via "$n" "$addr" "$host")
    line=$(log_line "$n" "$mark" "$addr" "$host") || rc=1
    [ "$code" = "$want" ] || rc=1
    [ "$rc" -eq 0 ] && { [ "$(json_get "$line" "$expr" 2>/dev/null)" = True ] || rc=1; }
    ok "$rc" "$text"
    if [ "$rc" -ne 0 ]; then
        diag "wanted status $want and $expr"
        diag "got status $code: $(head -c 200 "$T/via.body" 2>/dev/null) $(head -c 200 "$T/via.err")"
        diag "log line: ${line:-(none)}"
    fi
}
DEFAULT='j["sandbox"] == "default" and j["owner"] is None and j["decision"] == "deny" and j["reason"] == "not_allowed"'
P_RULE=p.allow:$(grep -n '^a\.test:8000' "$T/egressd1/policies/p.allow" | cut -d: -f1)

# --- before any sandbox: the default policy (locked)
judge "no binding yet: 127.0.0.40 is judged by the default policy (locked: 403, sandbox default)" \
    1 127.0.0.40 a.test 403 "$DEFAULT"

# --- create: the binding at work on both egressd
out=$(sbx --json create --name a1 --size small --owner alice --policy p --allow b.test:8000 2>&1)
rc=$?
ok $rc "create a1 (policy p, --allow b.test:8000) ($(tr -d "\n" <<<"$out" | head -c 200))"
a1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
check "a1 gets the pool's first address, 127.0.0.40 (got $addr)" test "$addr" = 127.0.0.40
OWN='j["sandbox"] == "'"$a1"'" and j["owner"] == "alice"'
judge "a1's address through egressd 1 to a.test: 200, judged as sandbox $a1 of alice by $P_RULE" \
    1 "$addr" a.test 200 "$OWN"' and j["decision"] == "allow" and j["rule"] == "'"$P_RULE"'" and j["mode"] == "http"'
check "  the origin's answer came through" grep -qx 'origin a.test' "$T/via.body"
judge "a1's address through egressd 2 to b.test: 200, by the binding's own line (sandbox $a1:1)" \
    2 "$addr" b.test 200 "$OWN"' and j["decision"] == "allow" and j["rule"] == "sandbox '"$a1"':1"'
judge "a1's address through egressd 2 to a.test: 200 by $P_RULE (both egressd hold the binding)" \
    2 "$addr" a.test 200 "$OWN"' and j["rule"] == "'"$P_RULE"'"'
judge "another address (127.0.0.41) is not a1: the default policy" 1 127.0.0.41 a.test 403 "$DEFAULT"

# --- destroy: the address falls back to the default policy on both
check "destroy a1" sbx destroy a1
judge "after destroy, 127.0.0.40 through egressd 1 falls back to the default policy" \
    1 127.0.0.40 a.test 403 "$DEFAULT"
judge "  and through egressd 2" 2 127.0.0.40 b.test 403 "$DEFAULT"

# --- sync puts back a binding deleted by hand
out=$(sbx --json create --name b2 --size small --owner bob --policy p 2>&1)
rc=$?
ok $rc "create b2 ($(tr -d "\n" <<<"$out" | head -c 200))"
b2=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
b2addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
before=$(egressd_state 1 'b["'"$b2"'"]')
egressd_api 1 DELETE "/v1/sandboxes/$b2"
ok $? "egressd 1: DELETE /v1/sandboxes/$b2 by hand ($EGD_CODE)"
judge "  b2's address is then the default policy's on egressd 1" 1 "$b2addr" a.test 403 "$DEFAULT"
out=$(sbx --json sync 2>&1)
rc=$?
ok $rc "sync ($(tr -d "\n" <<<"$out" | head -c 200))"
check "  sync sent 2 bindings (b2 and the expired 250) to both egressd" \
    test "$(json_get "$out" 'j["bindings"] == 2 and len(j["egressd"]) == 2')" = True
check "  egressd 1 holds b2's binding again, as it was" test "$(egressd_state 1 'b["'"$b2"'"]')" = "$before"
judge "  b2's address through egressd 1 is b2's again" 1 "$b2addr" a.test 200 \
    'j["sandbox"] == "'"$b2"'" and j["owner"] == "bob" and j["decision"] == "allow"'

# --- an expired binding gets nothing; reap removes it
check "sync bound the expired sandbox 250 on both egressd" \
    test "$(egressd_state 1 'b["250"]["expires"]') $(egressd_state 2 'b["250"]["expires"]')" = "2020-01-01T04:00:00Z 2020-01-01T04:00:00Z"
judge "250's address (127.0.0.49) is sandbox 250, but past its expiry: denied even a.test of its preset" \
    1 127.0.0.49 a.test 403 'j["sandbox"] == "250" and j["owner"] == "zoe" and j["decision"] == "deny" and j["reason"] == "not_allowed"'
out=$(sbx --json reap 2>&1)
check "reap reaps 250 only" test "$(json_get "$out" '[x["vmid"] for x in j["reaped"]]' 2>/dev/null)" = "[250]"
check "  its binding is gone from both egressd" \
    test "$(egressd_state 1 '"250" in b')$(egressd_state 2 '"250" in b')" = FalseFalse
judge "  127.0.0.49 is the default policy's" 2 127.0.0.49 a.test 403 "$DEFAULT"

# --- sync removes a binding whose VM Proxmox no longer holds: b2 removed
# by a sandboxctl that tells no egressd (a config without egressd-admin).
grep -v '^egressd-admin' "$CONF" >"$T/no-egressd.conf"
check "b2's VM is destroyed in Proxmox without a word to egressd" "$SBX_BIN" -c "$T/no-egressd.conf" destroy b2
check "  both egressd still hold b2's binding" \
    test "$(egressd_state 1 '"'"$b2"'" in b')$(egressd_state 2 '"'"$b2"'" in b')" = TrueTrue
judge "  and still judge b2's address by it" 2 "$b2addr" a.test 200 'j["sandbox"] == "'"$b2"'"'
out=$(sbx --json sync 2>&1)
check "sync binds nothing now" test "$(json_get "$out" 'j["bindings"]' 2>/dev/null)" = 0
check "  b2's binding is gone from both egressd" \
    test "$(egressd_state 1 'len(b)')$(egressd_state 2 'len(b)')" = 00
judge "  b2's address is the default policy's" 2 "$b2addr" a.test 403 "$DEFAULT"

# --- a restart keeps the bindings (state-dir)
out=$(sbx --json create --name c3 --size small --owner carol --policy p --allow b.test:8000 2>&1)
rc=$?
ok $rc "create c3 ($(tr -d "\n" <<<"$out" | head -c 200))"
c3=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
c3addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
before=$(egressd_state 1 'b')
rc=0
egressd_stop 1 || rc=$?
ok "$rc" "egressd 1 stops (exit $rc)"
egressd_start 1
ok $? "egressd 1 starts again on the same config"
check "  it holds c3's binding as before (from its state-dir)" test "$(egressd_state 1 'b')" = "$before"
judge "  and judges c3's address by it" 1 "$c3addr" b.test 200 \
    'j["sandbox"] == "'"$c3"'" and j["owner"] == "carol" and j["rule"] == "sandbox '"$c3"':1"'
out=$(sbx --json sync 2>&1)
rc=$?
ok $rc "sync after the restart ($(tr -d "\n" <<<"$out" | head -c 200))"
check "  changes nothing: the same binding" test "$(egressd_state 1 'b')" = "$before"

# --- destroyed while egressd 1 is down: its stale binding comes back with it,
# until sync removes it.
egressd_stop 1
out=$(sbx destroy c3 2>&1)
ok "$([ $? -eq 1 ] && grep -qF "VM $c3 destroyed, but its binding could not be removed (egressd $SBX_EGD1_ADMIN: DELETE /v1/sandboxes/$c3:" <<<"$out" && grep -q 'run sandboxctl sync' <<<"$out"; echo $?)" \
    "destroy c3 with egressd 1 down: the VM goes, the unremoved binding is named with the fix ($out)"
check "  egressd 2 dropped it" test "$(egressd_state 2 '"'"$c3"'" in b')" = False
egressd_start 1
ok $? "egressd 1 starts again"
check "  with c3's stale binding from its state-dir" test "$(egressd_state 1 'list(b)')" = "[\"$c3\"]"
judge "  which still judges c3's address" 1 "$c3addr" b.test 200 'j["sandbox"] == "'"$c3"'"'
check "sync" sbx sync
check "  removes it" test "$(egressd_state 1 'len(b)')" = 0
judge "  c3's address is the default policy's again" 1 "$c3addr" b.test 403 "$DEFAULT"

# --- a node that was down is behind; sync tells by comparing each egressd's
# whole set (GET /v1/sandboxes) with the bindings from Proxmox, says per
# egressd what it lacked, held without a VM or held otherwise, and heals it.
# egressd 1 misses a create, a destroy and an extend: made by a sandboxctl
# that knows egressd 2 only (one that knows both refuses a create while one
# is down); it comes back with the set of before from its state-dir.
grep -vxF "egressd-admin $SBX_EGD1_ADMIN" "$CONF" >"$T/only2.conf"
only2() { "$SBX_BIN" -c "$T/only2.conf" "$@"; }
d4=$(json_get "$(sbx --json create --name d4 --size small --owner dan --policy p 2>&1)" 'j["vmid"]' 2>/dev/null)
e5=$(json_get "$(sbx --json create --name e5 --size small --owner eve --policy p 2>&1)" 'j["vmid"]' 2>/dev/null)
check "create d4 and e5 on both egressd ($d4, $e5)" test -n "$d4" -a -n "$e5"
out=$(sbx --json sync 2>&1)
check "sync: both egressd current, nothing added, removed or changed" \
    test "$(json_get "$out" '[(n["result"], n["added"], n["removed"], n["changed"]) for n in j["egressd"]] == [("current", [], [], [])] * 2' 2>/dev/null)" = True
egressd_status_field() { egressd_api "$1" GET /v1/status && json_get "$EGD_BODY" "j[\"$2\"]"; }
check "  egressd 1's status says its set was replaced a moment ago (sandboxes_replaced_s)" \
    test "$(egressd_status_field 1 sandboxes_replaced_s)" -le 5
egressd_stop 1
out=$(sbx --json sync 2>&1)
ok "$([ $? -eq 1 ] && grep -qF "sync: egressd $SBX_EGD1_ADMIN: GET /v1/sandboxes:" <<<"$out"; echo $?)" \
    "sync with egressd 1 down fails naming it ($(head -c 160 <<<"$out"))"
out=$(only2 --json create --name g6 --size small --owner gus --policy p 2>&1)
g6=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
g6addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
check "egressd 1 down: create g6 ($g6, $g6addr) through egressd 2 alone" test -n "$g6"
check "  destroy d4" only2 destroy d4
check "  extend e5 by 2h" only2 extend e5 2h
egressd_start 1
ok $? "egressd 1 starts again"
check "  it holds the set of before: d4 and e5, no g6" test "$(egressd_state 1 'sorted(b)')" = "[\"$d4\", \"$e5\"]"
check "  e5's binding differs from egressd 2's (the old expiry)" \
    test "$(egressd_state 1 'b["'"$e5"'"]["expires"]')" != "$(egressd_state 2 'b["'"$e5"'"]["expires"]')"
check "  its status says its set was not replaced since its start (sandboxes_replaced_s null)" \
    test "$(egressd_status_field 1 sandboxes_replaced_s)" = None
judge "  g6's address through egressd 1 is the default policy's (it missed the create)" \
    1 "$g6addr" a.test 403 "$DEFAULT"
out=$(sbx --json sync 2>&1)
rc=$?
ok $rc "sync ($(tr -d "\n" <<<"$out" | head -c 300))"
check "  says egressd 1 was healed: added $g6, removed $d4, changed $e5" \
    test "$(json_get "$out" '[n for n in j["egressd"] if n["egressd"] == "'"$SBX_EGD1_ADMIN"'"] == [{"egressd": "'"$SBX_EGD1_ADMIN"'", "result": "healed", "added": ["'"$g6"'"], "removed": ["'"$d4"'"], "changed": ["'"$e5"'"]}]' 2>/dev/null)" = True
check "  and egressd 2 current" \
    test "$(json_get "$out" '[n["result"] for n in j["egressd"] if n["egressd"] == "'"$SBX_EGD2_ADMIN"'"]' 2>/dev/null)" = '["current"]'
check "  egressd 1 now holds what egressd 2 holds" test "$(egressd_state 1 b)" = "$(egressd_state 2 b)"
judge "  g6's address through egressd 1 is g6's" 1 "$g6addr" a.test 200 \
    'j["sandbox"] == "'"$g6"'" and j["owner"] == "gus" and j["decision"] == "allow"'
# restarted empty: its state-dir lost
egressd_stop 1
rm -f "$T/egressd1/state/sandboxes.json"
egressd_start 1
check "egressd 1 restarted with an empty state-dir holds nothing" test "$(egressd_state 1 'len(b)')" = 0
out=$(sbx sync 2>&1)
ok "$([ $? -eq 0 ] && grep -qxE "egressd $SBX_EGD1_ADMIN: healed added ($e5,$g6|$g6,$e5)" <<<"$out" &&
    grep -qxF "egressd $SBX_EGD2_ADMIN: current" <<<"$out"; echo $?)" \
    "sync (text) names what each egressd got: egressd 1 healed, added e5 and g6; egressd 2 current ($(tr '\n' '|' <<<"$out"))"
check "  egressd 1 holds what egressd 2 holds" test "$(egressd_state 1 b)" = "$(egressd_state 2 b)"
check "  and its status says its set was replaced" test "$(egressd_status_field 1 sandboxes_replaced_s)" -le 5

# --- bindings without a VM, put in by hand: sync names each one it removes
# (100 of them: egressd's answer, some 15 KiB, is read whole)
extra=$(python3 -c 'import json; print(json.dumps([{"id": "hand-%d" % i, "name": "hand", "owner": "x", "addresses": ["127.0.1.%d" % i], "policy": "p", "allow": [], "expires": "2099-01-01T00:00:00Z"} for i in range(1, 101)]))')
egressd_api 2 GET /v1/sandboxes
egressd_api 2 PUT /v1/sandboxes "$(python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2])))' "$EGD_BODY" "$extra")"
ok $? "egressd 2: 100 bindings more, by hand ($EGD_CODE, $(egressd_state 2 'len(b)') bindings)"
out=$(sbx --json sync 2>&1)
check "sync removes them and names each: egressd 2 healed, removed hand-1 .. hand-100" \
    test "$(json_get "$out" '[(n["result"], sorted(n["removed"]), n["added"], n["changed"]) for n in j["egressd"] if n["egressd"] == "'"$SBX_EGD2_ADMIN"'"] == [("healed", sorted("hand-%d" % i for i in range(1, 101)), [], [])]' 2>/dev/null)" = True
check "  egressd 2 holds what egressd 1 holds" test "$(egressd_state 2 b)" = "$(egressd_state 1 b)"

sbx_stop_all
tap_end
