#!/usr/bin/env bash
# tests/mcp/access.t - access requests over MCP, with the official SDK
# client (tests/mcp/sdk-access.mjs) over stdio and Streamable HTTP, against
# sandboxctl backed by the Proxmox simulator and two real egressd: the
# sandbox is refused b.test, the client reads sandbox://NAME/denials, asks
# with request_access, the server asks the human (elicitation) for a host
# of access-owner-approves and applies the answer, access-auto grants at
# once, every other host waits for an administrator, who then sees the
# requests with `sandboxctl access list`.  The owner's approval is checked
# by the operation itself: a request for a host outside
# access-owner-approves cannot be approved as the owner.  Sandboxes on
# 127.0.0.40-49 and the origins a.test, b.test (127.0.0.16, .17, port 8000)
# in a network namespace of its own (the node packages are installed
# before it is entered).
set -u
# Outside the namespace (the npm registry is reachable only here): the
# pinned node packages, once; the run inside finds them installed, or
# says in its first check that they are not.
if [ -z "${SBX_IN_NETNS:-}" ]; then
    . "$TOP/tests/mcp/lib.sh"
    mcp_node_setup >/dev/null 2>&1
    export SBX_IN_NETNS=1 MCP_NODE_OFFLINE=1
    exec unshare -n -- bash "$0" "$@"
fi
. "$TOP/tests/sandboxctl/lib.sh"
. "$TOP/tests/mcp/lib.sh"
ip link set lo up || {
    tap_ok 1 "ip link set lo up in the new network namespace"
    tap_stop
}
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
    CURL_CA_BUNDLE SSL_CERT_FILE CURL_HOME NODE_EXTRA_CA_CERTS

mcp_pid= origin_pid=
stop_all() {
    [ -n "$mcp_pid" ] && kill -TERM "$mcp_pid" 2>/dev/null && wait "$mcp_pid" 2>/dev/null
    [ -n "$origin_pid" ] && kill "$origin_pid" 2>/dev/null
    mcp_pid= origin_pid=
    sbx_stop_all quiet
}
mcp_sbx_setup || tap_stop
trap stop_all EXIT
sed -i -e 's|^ip-pool .*|ip-pool 127.0.0.40-127.0.0.49/24|' -e 's|^gateway .*|gateway 127.0.0.1|' \
    -e "s|^proxy .*|proxy $SBX_EGD1_PROXY|" -e 's|^mcp-presets .*|mcp-presets p locked|' "$CONF"
printf '%s\n' 'access-owner-approves b.test:8000 .owner.test:443' 'access-auto .auto.test:443' >>"$CONF"

sbx_origins "$T/origin.out" a.test=127.0.0.16 b.test=127.0.0.17
tap_ok $? "the origins a.test and b.test listen"
origin_pid=$SBX_ORIGIN_PID

# sdk MODE NAME ARGS...: the SDK client script, its lines numbered here.
sdk() {
    local mode=$1 name=$2 rc
    shift 2
    MCP_PROXY=$SBX_EGD1_PROXY "$MCP_NODE22" "$TOP/tests/mcp/sdk-access.mjs" "$mode" "$name" "$@" \
        >"$T/sdk-$mode.out" 2>"$T/sdk-$mode.log"
    rc=$?
    tap_relay <"$T/sdk-$mode.out"
    tap_ok $rc "the SDK client over $mode ran to its end (exit $rc)"
    [ $rc -eq 0 ] || tail -n 30 "$T/sdk-$mode.log" | sed 's/^/# /'
}

sdk stdio acc-stdio "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester
! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/sdk-stdio.log"
tap_ok $? "stdio: the servers (started by the clients) reported no sanitizer error"

"$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/mcp.port" --owner mcp-tester \
    2>"$T/mcp-http.log" &
mcp_pid=$!
if mcp_wait_file "$T/mcp.port" "$mcp_pid"; then
    MCP_KEEP=1 sdk http acc-http "http://127.0.0.1:$(cat "$T/mcp.port")/mcp" "$T/mcp-token"
else
    tap_ok 1 "sandboxctl mcp --http starts"
fi

# What an administrator sees afterwards.
sbx --json access list --all >"$T/list.json" 2>"$T/list.err"
python3 - "$T/list.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["requests"]
def one(name, host):
    m = [x for x in r if x["name"] == name and x["host"] == host]
    return m[0] if len(m) == 1 else {}
ok = all(one(n, "b.test:8000").get("by") == "owner" and one(n, "b.test:8000").get("status") == "approved"
         and one(n, "x.owner.test:443").get("status") == "denied"
         and one(n, "a.test:9999").get("status") == "pending"
         and one(n, "y.owner.test:443").get("status") == "pending"
         and one(n, "pkg.auto.test:443").get("by") == "access-auto .auto.test:443"
         and all(x["owner"] == "mcp-tester" for x in r)
         for n in ("acc-stdio", "acc-http"))
if not ok:
    for x in r:
        print("# %s %s %s %s" % (x["name"], x["host"], x["status"], x.get("by")))
sys.exit(0 if ok else 1)
PY
tap_ok $? "sandboxctl access list --all: each sandbox's requests as the clients left them (owner mcp-tester)"

# There is no tool an assistant could approve with.
out=$(printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"approve_access","arguments":{"id":"x"}}}' |
    timeout 60 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester 2>/dev/null)
grep -q 'unknown tool \\"approve_access\\"' <<<"$out"
tap_ok $? "there is no tool an assistant could approve with (approve_access is unknown)"

# The owner's approval is the operation's to check: with .owner.test taken
# out of access-owner-approves, the owner's yes to the request that waits
# for y.owner.test approves nothing.
# (A running server keeps the configuration it started with: a new one.)
sed -i 's|^access-owner-approves .*|access-owner-approves b.test:8000|' "$CONF"
kill -TERM "$mcp_pid" 2>/dev/null && wait "$mcp_pid" 2>/dev/null
mcp_pid=
"$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/mcp2.port" --owner mcp-tester \
    2>>"$T/mcp-http.log" &
mcp_pid=$!
mcp_wait_file "$T/mcp2.port" "$mcp_pid"
MCP_RECHECK=1 sdk http acc-http "http://127.0.0.1:$(cat "$T/mcp2.port")/mcp" "$T/mcp-token"
test "$(sbx --json access list acc-http | python3 -c 'import json,sys; print([x["status"] for x in json.load(sys.stdin)["requests"] if x["host"] == "y.owner.test:443"])')" = "['pending']"
tap_ok $? "  and sandboxctl access list still shows y.owner.test:443 pending"
sbx destroy acc-http >/dev/null 2>&1
tap_ok $? "the command line destroys acc-http"
kill -TERM "$mcp_pid" 2>/dev/null && wait "$mcp_pid" 2>/dev/null
mcp_pid=
! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/mcp-http.log"
tap_ok $? "http: the server reported no sanitizer error"
grep -E -A30 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/mcp-http.log" | head -n 40 | sed 's/^/# /'
stop_all
echo "1..$tap_n"
[ "$tap_failed" -eq 0 ]
