#!/usr/bin/env bash
# tests/console/console.t - the operator console in a real browser (Debian's
# Chromium driven by playwright-core), against the Proxmox simulator (PVE
# 9.1's schema, with users, a TOTP secret and an admin group) and two real
# egressd, in a network namespace of its own:
#   - an owner signs in with their Proxmox user and sees only their
#     sandboxes, with their size and what each egressd holds for them
#     (one that missed a sandbox says so); another owner's sandbox is not
#     on the page and acting on it answers 404;
#   - a curl from the owner's sandbox to a host its preset does not allow
#     appears in the live denials within 1 s; the owner allows it for 1 h
#     from the page; the next curl passes; the grant is in the sandbox's
#     Proxmox description;
#   - a wrong password and a wrong TOTP code are refused with Proxmox's
#     answer; an admin signs in with the TOTP step and sees every sandbox;
#   - a pending request is approved from a dialog that shows what it
#     changes, computed, for the duration chosen (a custom one too, up to
#     access-max; one beyond it is refused);
#   - a form posted from another origin, a request without the CSRF token
#     and one without a session are refused, and nothing changes;
#   - hostile strings a sandbox chose (markup in a path, control bytes, a
#     very long name) are shown as inert text;
#   - screenshots of each page at desktop and phone width (kept in
#     build/console-shots/), and the time the page took to draw a burst;
#   - every action is in the audit log, with who and from where.
set -u
CONSOLE_PLAYWRIGHT_VERSION=1.64.1
NODE_DIR=$TOP/build/console-node

# The browser driver's package, installed once outside the namespace (the
# registry is not reachable inside).
if [ -z "${SBX_IN_NETNS:-}" ]; then
    . "$TOP/tests/npm.sh"
    npm_install_pinned "$NODE_DIR" "playwright-core@$CONSOLE_PLAYWRIGHT_VERSION"
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
    CURL_CA_BUNDLE SSL_CERT_FILE CURL_HOME NODE_EXTRA_CA_CERTS

check "playwright-core $CONSOLE_PLAYWRIGHT_VERSION is installed" \
    test "$(cat "$NODE_DIR/installed" 2>/dev/null)" = "playwright-core@$CONSOLE_PLAYWRIGHT_VERSION"
check "Debian's chromium is installed" test -x /usr/bin/chromium

# Alice and bob own sandboxes by their pve user; root@pam is an admin with
# TOTP; sandboxctl's token may read the admin group.
TOTP_SECRET=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP
world=$(sbx_world 9 | python3 -c '
import json, sys
w = json.load(sys.stdin)
w["users"] = [
    {"userid": "alice@pve", "password": "alice-pw-1"},
    {"userid": "bob@pve", "password": "bob-pw-1"},
    {"userid": "root@pam", "password": "root-pw-1", "totp": sys.argv[1]},
]
w["groups"] = [{"groupid": "sandbox-admins", "members": ["root@pam"]}]
w["tokens"][0]["acl"]["/access/groups"] = ["Sys.Audit"]
print(json.dumps(w))' "$TOTP_SECRET")
ORIGIN_PID= CONSOLE_PID=
ORIGIN_OUT=$(mktemp "${TMPDIR:-/tmp}/console-origin.XXXXXX")
# stop_console: SIGTERM; CONSOLE_RC is its exit status (255: it was not
# gone within 10 s, and is killed).
CONSOLE_RC=
stop_console() {
    local i
    [ -n "$CONSOLE_PID" ] || return 0
    kill "$CONSOLE_PID" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        kill -0 "$CONSOLE_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$CONSOLE_PID" 2>/dev/null; then
        kill -9 "$CONSOLE_PID"
        CONSOLE_RC=255
    else
        wait "$CONSOLE_PID"
        CONSOLE_RC=$?
    fi
    CONSOLE_PID=
}
trap 'stop_console; [ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -f "$ORIGIN_OUT"; sbx_stop_all quiet' EXIT
sbx_origins "$ORIGIN_OUT" a.test=127.0.0.16 b.test=127.0.0.17
ok $? "the origins a.test and b.test listen"
ORIGIN_PID=$SBX_ORIGIN_PID
sbx_start 9 "$world" || {
    ok 1 "the simulator and both egressd start"
    tap_end
    exit 1
}
trap 'stop_console; [ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; rm -f "$ORIGIN_OUT"; sbx_stop_all quiet' EXIT
sbx_write_config <<EOF
console-admin-group sandbox-admins
console-owner-realm pve
console-audit-log $T/audit.log
console-access-log $T/egressd1/access.log
access-owner-approves b.test:8000,8002
EOF
sed -i -e 's|^ip-pool .*|ip-pool 127.0.0.40-127.0.0.49/24|' -e 's|^gateway .*|gateway 127.0.0.1|' \
    -e "s|^proxy .*|proxy $SBX_EGD1_PROXY|" "$CONF"

# egressd 1 with a policy DNS server: names of any bytes a sandbox asks for
# become denials (the hostile strings of the page's checks).
dns_port=$(sbx_ports 1)
echo "dns 127.0.0.1:$dns_port" >>"$T/egressd1/egressd.conf"
egressd_stop 1
egressd_start 1 2>"$T/egressd1.restart"
ok $? "egressd 1 starts again with a dns listener"

out=$(sbx --json create --name s1 --size small --owner alice --policy p 2>&1)
ok $? "create s1 of alice (alice@pve: console-owner-realm pve) (policy p: a.test:8000 only) ($(tr -d "\n" <<<"$out" | head -c 120))"
s1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
a1=$(json_get "$out" 'j["address"]' 2>/dev/null)
out=$(sbx --json create --name s2 --size small --owner bob --policy p 2>&1)
ok $? "create s2 of bob ($(tr -d "\n" <<<"$out" | head -c 120))"
s2=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
# egressd 2 misses s2 (as a node that was down while it was made): the
# sandboxes page must say so, and not only for egressd 1.
egressd_api 2 DELETE "/v1/sandboxes/$s2"
ok $? "s2's binding is taken out of egressd 2 ($EGD_CODE)"

# (not through the function sbx: $! must be the console's own pid)
"$SBX_BIN" -c "$CONF" console --listen 127.0.0.1:0 --port-file "$T/console.port" 2>"$T/console.err" &
CONSOLE_PID=$!
wait_port() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ -s "$T/console.port" ] && return 0
        kill -0 "$CONSOLE_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
wait_port
ok $? "sandboxctl console starts ($(head -c 200 "$T/console.err"))"
URL=http://127.0.0.1:$(cat "$T/console.port")

# The browser's part: its TAP lines are relayed as ours.
SHOTS=$TOP/build/console-shots
mkdir -p "$SHOTS"
CONSOLE_URL=$URL A1=$a1 PROXY1=$SBX_EGD1_PROXY EGD1=$SBX_EGD1_ADMIN EGD2=$SBX_EGD2_ADMIN DNSPORT=$dns_port TOTP_SECRET=$TOTP_SECRET SHOTS=$SHOTS \
    NODE_PATH=$NODE_DIR/node_modules \
    node "$TOP/tests/console/drive.mjs" >"$T/drive.out" 2>"$T/drive.err"
rc=$?
while IFS= read -r line; do
    case $line in
    "ok - "*) ok 0 "${line#ok - }" ;;
    "not ok - "*) ok 1 "${line#not ok - }" ;;
    "# "*) diag "${line#\# }" ;;
    *) diag "$line" ;;
    esac
done <"$T/drive.out"
ok $rc "the browser driver ran to its end (exit $rc)"
if [ "$rc" != 0 ]; then
    diag_file "$T/drive.err"
    diag "egressd 1's access-log lines of the hostile requests:"
    grep -E 'script|img|RED|xxxxxxxx' "$T/egressd1/access.log" | cut -c1-400 | sed 's/^/#   /'
fi

# After the browser: egressd's own counters, what Proxmox and the audit log hold.
egressd_api 1 GET /v1/traffic
check "egressd 1's GET /v1/traffic counts s1's denials (200 and more) and allowed requests" \
    test "$(json_get "$EGD_BODY" '[x for x in j["sandboxes"] if x["sandbox"] == "'"$s1"'"][0]["denied"] >= 200 and [x for x in j["sandboxes"] if x["sandbox"] == "'"$s1"'"][0]["allowed"] >= 3' 2>&1)" = True
check "s1's Proxmox description holds the grant of b.test:8000" \
    test "$(sim_state "[v['config']['description'] for v in s['vms'] if v['vmid'] == $s1][0]" | grep -c 'b.test:8000')" -ge 1
audit() {
    python3 -c 'import json,sys; L=[json.loads(l) for l in open(sys.argv[1])]; print(eval(sys.argv[2]))' \
        "$T/audit.log" "$1"
}
check "the audit log names alice's sign-in, from 127.0.0.1" \
    test "$(audit 'any(l["action"] == "signin" and l["ok"] and l["user"] == "alice@pve" and l["from"] == "127.0.0.1" for l in L)')" = True
check "  the grant she made, by her, on s1 b.test:8000" \
    test "$(audit 'any(l["action"] == "access.grant" and l["ok"] and l["user"] == "alice@pve" and l["target"] == "s1 b.test:8000" for l in L)')" = True
check "  at least two refused sign-ins (a wrong password, a wrong code)" \
    test "$(audit 'sum(1 for l in L if l["action"] == "signin" and not l["ok"])')" -ge 2
check "  and never a password" sh -c "! grep -q 'pw-' '$T/audit.log'"
check "  the refused action without a CSRF token" \
    test "$(audit 'any(l["action"] == "refused" and not l["ok"] for l in L)')" = True
check "s2 (bob's) still exists after alice's attempts" \
    test "$(sim_state "len([v for v in s['vms'] if v['name'] == 's2'])")" = 1
check "s1 still exists after the cross-origin destroy" \
    test "$(sim_state "len([v for v in s['vms'] if v['name'] == 's1'])")" = 1
stop_console
ok "$CONSOLE_RC" "the console stops on SIGTERM, exit 0 ($CONSOLE_RC)"
n=$(grep -vc '^sandboxctl console: serving' "$T/console.err")
ok "$([ "$n" = 0 ]; echo $?)" "  with nothing on stderr but its start line ($n more)"
[ "$n" = 0 ] || diag_file "$T/console.err"
sbx_stop_all
tap_end
