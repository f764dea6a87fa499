#!/usr/bin/env bash
# tests/sandboxctl/access.t - access requests end to end, against two real
# egressd: a sandbox denied b.test sees the denial (sandboxctl denials,
# from both egressd), asks for it (access request), waits while nobody
# decides, and reaches it once an administrator approves, on both egressd,
# by a grant that is in its Proxmox description and its binding; a grant
# lapses in egressd by itself; access-auto grants at once only what its
# patterns cover; a request that names no methods or paths is narrowed to
# the denied request (its method, its path's first two segments), `access
# show` computes the rule it adds and which denials it lifts, and the
# grant admits that and nothing more; deny, list, and every bad input gets
# its error and changes nothing.  Sandboxes on 127.0.0.40-49, origins
# a.test, b.test and c.test (127.0.0.16, .17, .18, port 8000), in a
# network namespace of its own; the
# whole of it against the simulator of each schema, PVE 8.4 and 9.1.
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

ORIGIN_PID=
ORIGIN_OUT=$(mktemp "${TMPDIR:-/tmp}/access-origin.XXXXXX")
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -f "$ORIGIN_OUT"; sbx_stop_all quiet' EXIT
sbx_origins "$ORIGIN_OUT" a.test=127.0.0.16 b.test=127.0.0.17 c.test=127.0.0.18
ok $? "the origins a.test, b.test and c.test listen"
ORIGIN_PID=$SBX_ORIGIN_PID

# suite VERSION: every check against the simulator of PVE VERSION's schema.
suite() {
local v=$1
sbx_start "$v" || {
    ok 1 "PVE $v: the simulator and both egressd start"
    tap_end
    exit 1
}
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -f "$ORIGIN_OUT"; sbx_stop_all quiet' EXIT
config() {
    sbx_write_config
    sed -i -e 's|^ip-pool .*|ip-pool 127.0.0.40-127.0.0.49/24|' -e 's|^gateway .*|gateway 127.0.0.1|' \
        -e "s|^proxy .*|proxy $SBX_EGD1_PROXY|" "$CONF"
}
config </dev/null

# via N ADDR HOST [PATH [CURL ARGS...]]: the status of GET (or what the
# curl arguments make it) http://HOST:8000PATH through egressd N from
# ADDR (000 when there was none).
via() {
    local proxy
    eval "proxy=\$SBX_EGD$1_PROXY"
    curl -q -sS -m 10 --interface "$2" -x "http://$proxy" -o /dev/null -w '%{http_code}' \
        "${@:5}" "http://$3:8000${4:-/}" 2>/dev/null || true
}

# description VMID: the VM's Proxmox description.
description() {
    sim_state '[v["config"]["description"] for v in s["vms"] if v["vmid"] == '"$1"'][0]'
}

out=$(sbx --json create --name s1 --size small --owner alice --policy p 2>&1)
ok $? "PVE $v: create s1 (policy p: a.test:8000 only) ($(tr -d "\n" <<<"$out" | head -c 160))"
s1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
a1=$(json_get "$out" 'j["address"]' 2>/dev/null)
check "s1 reaches a.test through egressd 1 (200)" test "$(via 1 "$a1" a.test)" = 200
check "s1 is refused b.test through egressd 1 (403)" test "$(via 1 "$a1" b.test)" = 403
check "  and through egressd 2 (403)" test "$(via 2 "$a1" b.test)" = 403

# --- denials: what egressd refused, from both
out=$(sbx --json denials s1 2>&1)
ok $? "denials s1 ($(tr -d "\n" <<<"$out" | head -c 160))"
check "  holds the b.test:8000 denial of each egressd, reason not_allowed, newest first" test "$(json_get "$out" 'd = [x for x in j["denials"] if x["host"] == "b.test" and x["port"] == 8000 and x["reason"] == "not_allowed"]; ts = [x["ts"] for x in j["denials"]]; sorted({x["egressd"] for x in d}) == sorted(["'"$SBX_EGD1_ADMIN"'", "'"$SBX_EGD2_ADMIN"'"]) and ts == sorted(ts, reverse=True) and j["vmid"] == '"$s1"'' 2>&1)" = True
out=$(sbx denials s1 2>&1)
check "  the table names b.test:8000 and not_allowed" grep -qE 'b\.test:8000 +not_allowed' <<<"$out"
out=$(sbx denials nosuch 2>&1)
ok "$([ $? -eq 1 ] && grep -q "no sandbox called 'nosuch'" <<<"$out"; echo $?)" "denials of a sandbox that does not exist: exit 1, named ($out)"

# --- a name a sandbox chose, of any bytes: egressd 1 again with a policy DNS
# server (its bindings stay in its state dir), asked by s1 with dig for a
# name that holds ESC bytes; `sandboxctl denials` prints no control byte.
dns_port=$(sbx_ports 1)
echo "dns 127.0.0.1:$dns_port" >>"$T/egressd1/egressd.conf"
egressd_stop 1
egressd_start 1 2>"$T/egressd1.restart"
ok $? "egressd 1 starts again with a dns listener"
dig -b "$a1" @127.0.0.1 -p "$dns_port" +tries=1 +time=5 'a\027[31mRED\027[0m.test' A >"$T/dig.out" 2>&1
check "  s1 asks it for a\\027[31mRED\\027[0m.test: NXDOMAIN" grep -q 'status: NXDOMAIN' "$T/dig.out"
sbx denials s1 >"$T/denials.out" 2>&1
ok $? "denials s1 after the question"
check "  the table holds no control byte (od: $(tr -d '\n' <"$T/denials.out" | LC_ALL=C grep -oP '[\x00-\x1f\x7f]' | od -An -c | tr -s ' ' | head -c 60))" \
    test "$(tr -d '\n' <"$T/denials.out" | LC_ALL=C grep -cP '[\x00-\x1f\x7f]')" = 0
check "  and names it as egressd keeps it, a\\027[31mRED\\027[0m.test" \
    grep -qF 'a\027[31mRED\027[0m.test:0' "$T/denials.out"

# --- request, and nothing changes while it waits
out=$(sbx --json access request s1 b.test:8000 --whole-host --for 30m --why "the crate mirror" 2>&1)
ok $? "access request s1 b.test:8000 --whole-host --for 30m ($(tr -d "\n" <<<"$out" | head -c 200))"
id=$(json_get "$out" 'j["id"]' 2>/dev/null)
check "  pending, 1800 s, not one the owner may approve (no access-owner-approves), the whole host" test "$(json_get "$out" 'j["status"] == "pending" and j["seconds"] == 1800 and j["owner_may_approve"] is False and j["owner"] == "alice" and j["vmid"] == '"$s1"' and "methods" not in j and "paths" not in j and "denial" not in j' 2>&1)" = True
out=$(sbx --json access request s1 B.TEST.:8000 --whole-host --why "again" 2>&1)
check "  the same host again (B.TEST.:8000) is the same request $id" test "$(json_get "$out" 'j["id"]' 2>/dev/null)" = "$id"
out=$(sbx access request s1 b.test:8000 --whole-host --why "x" 2>&1)
check "  the human form says how an administrator decides it" grep -q "sandboxctl access approve $id" <<<"$out"
check "while it waits s1 is still refused b.test (403)" test "$(via 1 "$a1" b.test)" = 403
check "  and the description holds no grant" bash -c '! grep -q "^grants:" <<<"$1"' _ "$(description "$s1")"
out=$(sbx --json access list 2>&1)
check "access list shows the one pending request" test "$(json_get "$out" '[r["id"] for r in j["requests"]] == ["'"$id"'"]' 2>&1)" = True
out=$(sbx --json access list nosuch 2>&1)
check "access list of another name shows none" test "$(json_get "$out" 'len(j["requests"])' 2>&1)" = 0
out=$(sbx access list 2>&1)
check "  the table has its id, host, 30m and the reason" grep -qE "^$id +s1 +b\.test:8000 +30m +pending .*the crate mirror" <<<"$out"

# --- approve: the grant in the description, both bindings, both egressd
before=$(date +%s)
out=$(sbx --json access approve "$id" 2>&1)
ok $? "access approve $id ($(tr -d "\n" <<<"$out" | head -c 200))"
until=$(json_get "$out" 'j["until"]' 2>/dev/null)
check "  approved by admin, until about 30 minutes from now ($until)" test "$(json_get "$out" 'import calendar, time; u = calendar.timegm(time.strptime(j["until"], "%Y-%m-%dT%H:%M:%SZ")); j["status"] == "approved" and j["by"] == "admin" and '"$before"' + 1790 <= u <= '"$before"' + 1810' 2>&1)" = True
check "  s1's description holds the grant b.test:8000@$until" grep -qx "grants: b.test:8000@$until" <<<"$(description "$s1")"
check "  egressd 1's binding allows it until then" test "$(egressd_state 1 'b["'"$s1"'"]["allow"]' 2>&1)" = "[\"b.test:8000 until $until\"]"
check "  and egressd 2's" test "$(egressd_state 2 'b["'"$s1"'"]["allow"]' 2>&1)" = "[\"b.test:8000 until $until\"]"
out=$(sbx --json list 2>&1)
check "  list shows s1's grant and when it lapses" test "$(json_get "$out" '[x["grants"] for x in j["sandboxes"] if x["name"] == "s1"]' 2>&1)" = "[[{\"host\": \"b.test:8000\", \"until\": \"$until\"}]]"
check "s1 now reaches b.test through egressd 1 (200)" test "$(via 1 "$a1" b.test)" = 200
check "  and through egressd 2 (200)" test "$(via 2 "$a1" b.test)" = 200
out=$(sbx access approve "$id" 2>&1)
ok "$([ $? -eq 1 ] && grep -q "access request $id is approved already" <<<"$out"; echo $?)" "approving it again: exit 1, says it is approved already ($out)"
out=$(sbx --json sync 2>&1)
check "sync keeps the grant in both bindings (the description is the truth)" test "$(egressd_state 1 'b["'"$s1"'"]["allow"]' 2>&1)$(egressd_state 2 'b["'"$s1"'"]["allow"]' 2>&1)" = "[\"b.test:8000 until $until\"][\"b.test:8000 until $until\"]"
sbx extend s1 30m >/dev/null
check "extend keeps the grant in the description" grep -qx "grants: b.test:8000@$until" <<<"$(description "$s1")"

# --- deny, list --all
out=$(sbx --json access request s1 a.test:9999 --why "a port it lacks" 2>&1)
id2=$(json_get "$out" 'j["id"]' 2>/dev/null)
out=$(sbx --json access deny "$id2" 2>&1)
ok $? "access deny $id2 ($(tr -d "\n" <<<"$out" | head -c 160))"
check "  denied by admin" test "$(json_get "$out" 'j["status"] == "denied" and j["by"] == "admin" and "until" not in j' 2>&1)" = True
check "  the description still holds the b.test grant only" test "$(grep '^grants:' <<<"$(description "$s1")")" = "grants: b.test:8000@$until"
out=$(sbx --json access list 2>&1)
check "access list shows nothing pending now" test "$(json_get "$out" 'len(j["requests"])' 2>&1)" = 0
out=$(sbx --json access list --all 2>&1)
check "access list --all shows the approved and the denied" test "$(json_get "$out" 'sorted(r["status"] for r in j["requests"])' 2>&1)" = '["approved", "denied"]'
out=$(sbx access deny "$id2" 2>&1)
ok "$([ $? -eq 1 ] && grep -q "is denied already" <<<"$out"; echo $?)" "denying it again: exit 1 ($out)"

# --- a grant lapses in egressd by itself (the description's time, 20 s
# on: the put, the sync and the first request fit in it on a busy machine,
# under the sanitizers; the loop below waits out the rest)
desc=$(description "$s1")
soon=$(date -u -d '@'"$(($(date +%s) + 20))" +%Y-%m-%dT%H:%M:%SZ)
new=$(sed "s|^grants: .*|grants: b.test:8000@$soon|" <<<"$desc")
curl -sS --cacert "$PVE_SIM_CA" -X PUT -H "Authorization: PVEAPIToken=$SBX_TOKEN_ID=$SBX_SECRET" \
    -H 'Content-Type: application/json' --data "$(python3 -c 'import json,sys; print(json.dumps({"description": sys.argv[1]}))' "$new")" \
    "$PVE_SIM_URL/nodes/$(sim_state '[v for v in s["vms"] if v["vmid"] == '"$s1"'][0]["node"]')/qemu/$s1/config" >/dev/null
sbx sync >/dev/null
check "a grant that lapses at $soon: egressd 1's binding says so after sync" test "$(egressd_state 1 'b["'"$s1"'"]["allow"]' 2>&1)" = "[\"b.test:8000 until $soon\"]"
check "  s1 reaches b.test before it lapses (200)" test "$(via 1 "$a1" b.test)" = 200
while [ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \< "$soon" ] || [ "$(date -u +%Y-%m-%dT%H:%M:%SZ)" = "$soon" ]; do sleep 0.2; done
sleep 0.5
check "  and is refused once it lapsed, with no one telling egressd (403)" test "$(via 1 "$a1" b.test)" = 403
check "  on egressd 2 too (403)" test "$(via 2 "$a1" b.test)" = 403
out=$(sbx --json access request s1 b.test:8000 --whole-host --for 10m --why "once more" 2>&1)
id3=$(json_get "$out" 'j["id"]' 2>/dev/null)
sbx access approve "$id3" >/dev/null
check "a new grant of the same host replaces the lapsed one in the description" test "$(grep -c 'b.test:8000@' <<<"$(description "$s1")")" = 1

# --- access-auto: granted at once, only what the patterns cover
printf '%s\n' 'access-auto .b.test:8000 a.test:443' 'access-max 2h' | config
out=$(sbx --json create --name s2 --size small --owner bob --policy p 2>&1)
ok $? "PVE $v: create s2 with access-auto .b.test:8000 a.test:443 in the config"
s2=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
a2=$(json_get "$out" 'j["address"]' 2>/dev/null)
check "s2 is refused b.test before it asks (403)" test "$(via 1 "$a2" b.test)" = 403
out=$(sbx --json access request s2 b.test:8000 --why "the registry" 2>&1)
ok $? "access request s2 b.test:8000 ($(tr -d "\n" <<<"$out" | head -c 200))"
check "  granted at once, for the default 1h, by access-auto .b.test:8000, narrowed to the denied GET /" test "$(json_get "$out" 'j["status"] == "approved" and j["by"] == "access-auto .b.test:8000" and j["seconds"] == 3600 and j["methods"] == "GET" and j["paths"] == "/"' 2>&1)" = True
check "  s2 reaches b.test at once (200)" test "$(via 1 "$a2" b.test)" = 200
out=$(sbx --json access request s2 b.test --why "default ports" 2>&1)
check "b.test without a port (443 and 80) is not covered by .b.test:8000: pending" test "$(json_get "$out" 'j["status"]' 2>&1)" = pending
out=$(sbx --json access request s2 '*.a.test:443' --why "subdomains" 2>&1)
check "*.a.test:443 is not covered by a.test:443: pending" test "$(json_get "$out" 'j["status"]' 2>&1)" = pending

bad() { # TEXT WANT ARGS...: exit 1 and WANT in the message
    local text=$1 want=$2 out rc
    shift 2
    out=$(sbx "$@" 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -qF -- "$want" <<<"$out"; echo $?)" "$text: exit 1, '$want' ($(head -c 160 <<<"$out"))"
}
# --- the narrowest grant: a request naming no methods or paths is
# narrowed to the sandbox's newest denied request its host covers (that
# method, the path's first two segments); access show computes the rule
# and which denials it lifts with egressd's own decision; the grant admits
# exactly that, as egressd then judges each request
check "s1: POST c.test/repos/acme/widget/issues is refused (403)" test "$(via 1 "$a1" c.test /repos/acme/widget/issues -d x=1)" = 403
check "  and GET c.test/repos/acme/widget/pulls, the newer one (403)" test "$(via 1 "$a1" c.test /repos/acme/widget/pulls?state=open)" = 403
out=$(sbx --json access request s1 c.test:8000 --why "read the pulls" 2>&1)
ok $? "access request s1 c.test:8000, no methods or paths ($(tr -d "\n" <<<"$out" | head -c 300))"
idn=$(json_get "$out" 'j["id"]' 2>/dev/null)
check "  narrowed to the denied GET: methods GET, paths /repos/acme/**, asked c.test:8000, the denial kept" test "$(json_get "$out" 'j["host"] == "c.test:8000" and j["methods"] == "GET" and j["paths"] == "/repos/acme/**" and j["asked"] == "c.test:8000" and j["denial"]["method"] == "GET" and j["denial"]["path"] == "/repos/acme/widget/pulls" and j["status"] == "pending"' 2>&1)" = True
check "  it says the rule it adds and that it lifts the GET, not the POST" test "$(json_get "$out" 'j["rule"].startswith("c.test:8000 methods GET paths /repos/acme/** until ") and [(d["method"], d["path"]) for d in j["would_pass"]] == [("GET", "/repos/acme/widget/pulls")]' 2>&1)" = True
out=$(sbx --json access show "$idn" 2>&1)
ok $? "access show $idn"
check "  the same rule, and of the recent denials only the GET would pass" test "$(json_get "$out" 'j["id"] == "'"$idn"'" and j["rule"].startswith("c.test:8000 methods GET paths /repos/acme/** until ") and [(d["method"], d["host"], d["path"], d["reason"]) for d in j["would_pass"]] == [("GET", "c.test", "/repos/acme/widget/pulls", "not_allowed")] and j["recent"] >= 3' 2>&1)" = True
out=$(sbx access show "$idn" 2>&1)
check "  the human form prints the rule and the denial it lifts" bash -c 'grep -qF "adds the rule: c.test:8000 methods GET paths /repos/acme/** until" <<<"$1" && grep -qE "it would let 1 pass:" <<<"$1" && grep -qE " GET c\.test:8000 /repos/acme/widget/pulls \(not_allowed\)" <<<"$1" && grep -qF "narrowed to the request egressd denied" <<<"$1"' _ "$out"
out=$(sbx --json access approve "$idn" 2>&1)
ok $? "access approve $idn ($(tr -d "\n" <<<"$out" | head -c 200))"
untiln=$(json_get "$out" 'j["until"]' 2>/dev/null)
check "  the description holds c.test:8000|methods=GET|paths=/repos/acme/**@$untiln" grep -qF "c.test:8000|methods=GET|paths=/repos/acme/**@$untiln" <<<"$(description "$s1")"
check "  egressd 1's binding holds the line with methods and paths" test "$(egressd_state 1 '"c.test:8000 methods GET paths /repos/acme/** until '"$untiln"'" in b["'"$s1"'"]["allow"]' 2>&1)" = True
check "  and egressd 2's" test "$(egressd_state 2 '"c.test:8000 methods GET paths /repos/acme/** until '"$untiln"'" in b["'"$s1"'"]["allow"]' 2>&1)" = True
check "  the guest got the CA that now covers c.test (guest_ca: $(json_get "$out" 'j.get("guest_ca")' 2>&1))" test "$(json_get "$out" 'j.get("guest_ca") in ("installed", "current")' 2>&1)" = True
check "s1: GET c.test/repos/acme/widget/pulls passes now (200)" test "$(via 1 "$a1" c.test /repos/acme/widget/pulls?state=open)" = 200
check "  and GET c.test/repos/acme/other, under the same prefix (200)" test "$(via 2 "$a1" c.test /repos/acme/other)" = 200
check "  POST c.test/repos/acme/widget/issues is still refused (403)" test "$(via 1 "$a1" c.test /repos/acme/widget/issues -d x=1)" = 403
check "  GET c.test/repos/other is still refused (403)" test "$(via 1 "$a1" c.test /repos/other)" = 403
check "  GET c.test/repos/acme/../other/x is refused, its path normalized (403)" test "$(via 1 "$a1" c.test /repos/acme/%2e%2e/other/x --path-as-is)" = 403
out=$(sbx --json access request s1 c.test:8000 --methods post,Post --paths /repos/acme/widget/issues --why "file an issue" 2>&1)
ok $? "access request with --methods post,Post --paths /repos/acme/widget/issues ($(tr -d "\n" <<<"$out" | head -c 200))"
check "  as asked, the method written POST once, not narrowed" test "$(json_get "$out" 'j["methods"] == "POST" and j["paths"] == "/repos/acme/widget/issues" and "denial" not in j' 2>&1)" = True
check "  it would lift the POST denials, not the GET ones" test "$(json_get "$out" 'len(j["would_pass"]) >= 1 and all(d["method"] == "POST" for d in j["would_pass"])' 2>&1)" = True
out=$(sbx --json access request s1 c.test:8000 --whole-host --why "all of it" 2>&1)
check "--whole-host: the host without methods or paths, lifting GET and POST denials alike" test "$(json_get "$out" '"methods" not in j and "paths" not in j and j["rule"].startswith("c.test:8000 until ") and {d["method"] for d in j["would_pass"]} >= {"GET", "POST"}' 2>&1)" = True
cp "$T/state/access.json" "$T/access.scoped"
bad "an unknown method" "methods: 'FETCH' is not one of" access request s1 c.test:8000 --methods GET,FETCH --why x
bad "a path glob no path can match" "paths: '/a/../b'" access request s1 c.test:8000 --paths /a/../b --why x
bad "paths on port 22: what egressd would refuse to load" "grant:1:" access request s1 c.test:22 --paths /x --why x
bad "show an unknown id" "no access request 'feedbeef'" access show feedbeef
check "  none of them filed a request" cmp -s "$T/state/access.json" "$T/access.scoped"

# --- bad input: an error naming the cause, nothing filed
cp "$T/state/access.json" "$T/access.before"
bad "a host that is not one" "host: expected HOST" access request s2 'no host!' --why x
bad "a regex host" "host: expected HOST" access request s2 '~.*' --why x
bad "an IP address" "host: expected HOST" access request s2 127.0.0.17:8000 --why x
bad "a host with an escape sequence: shown with ? for it" "got 'a?[2Jb.test'" access request s2 "$(printf 'a\033[2Jb.test')" --why x
bad "longer than access-max 2h" "duration: expected 1m .. 2h (access-max)" access request s2 b.test:8000 --for 3h --why x
bad "an empty reason" "why: expected 1 to 500 bytes" access request s2 b.test:8000 --why ''
bad "a reason with a control character" "why: control characters" access request s2 b.test:8000 --why "$(printf 'a\033[2Jb')"
bad "no reason" "missing" access request s2 b.test:8000
bad "a sandbox that does not exist" "no sandbox called 'ghost'" access request ghost b.test:8000 --why x
bad "approve an unknown id" "no access request 'feedbeef'" access approve feedbeef
bad "deny an unknown id" "no access request 'feedbeef'" access deny feedbeef
check "  none of them filed or changed a request" cmp -s "$T/state/access.json" "$T/access.before"
out=$(sbx access frobnicate 2>&1)
ok "$([ $? -eq 2 ]; echo $?)" "access frobnicate: a usage error (exit 2)"
for ((i = 0; i < 16; i++)); do
    sbx access request s2 "h$i.example:443" --why "flood $i" >/dev/null 2>&1
done
bad "a 17th waiting request of one sandbox" "has 16 requests waiting already" access request s2 h99.example:443 --why x
printf '%s\n' 'access-auto ???' | config
out=$(sbx access list 2>&1)
ok "$([ $? -eq 2 ] && grep -qF ":20: access-auto: '???' is not HOST" <<<"$out"; echo $?)" "an access-auto pattern that is not one: exit 2, names the line ($out)"
printf '%s\n' 'access-owner-approves 10.0.0.1' | config
out=$(sbx access list 2>&1)
ok "$([ $? -eq 2 ] && grep -qF ":20: access-owner-approves: '10.0.0.1' is not HOST" <<<"$out"; echo $?)" "an address as access-owner-approves pattern: exit 2, names the line ($out)"
config </dev/null
echo '[{"id": ' >"$T/state/access.json"
cp "$T/state/access.json" "$T/access.broken"
bad "a broken access.json" "access.json: " access list
check "  it is named and left as it was, not emptied" cmp -s "$T/state/access.json" "$T/access.broken"

sbx destroy s1 >/dev/null
sbx destroy s2 >/dev/null
sbx_stop_all
}

for v in 8 9; do
    suite "$v"
done
tap_end
