#!/usr/bin/env bash
# tests/mcp/sandboxctl.t - `sandboxctl mcp` for real: the official MCP SDK
# client calls every tool over stdio, then again over Streamable HTTP with
# the bearer token, against sandboxctl backed by the Proxmox simulator
# (tests/pve-sim) with real guest-agent commands and files.  Checks that
# the sandboxes really came and went in the simulator, that the owner was
# set by the server, and the server-side refusal of a preset outside
# mcp-presets and of a secret outside mcp-secrets (tests/sandboxctl/secrets.t
# makes sandboxes with secrets through MCP, against egressd with secrets).
# The SDK client also checks progress (create_server's steps, run_command's
# "run" step of `sleep 4`) and log messages over both transports, resources
# (an update after extend_server of a subscribed sandbox), prompts and
# completion.
set -u
. "$TOP/tests/sandboxctl/lib.sh"
. "$TOP/tests/mcp/lib.sh"

mcp_pid=
stop_mcp() {
    if [ -n "$mcp_pid" ]; then
        kill -TERM "$mcp_pid" 2>/dev/null
        wait "$mcp_pid" 2>/dev/null
        mcp_pid=
    fi
}
mcp_sbx_setup || tap_stop
trap 'stop_mcp; sbx_stop_all quiet' EXIT
echo 'mcp-secrets anthropic' >>"$CONF"

# sdk MODE NAME ARGS...: the SDK client script, its lines numbered here.
sdk() {
    local mode=$1 name=$2 rc
    shift 2
    MCP_SANDBOX=$name MCP_PRESETS=balanced,locked MCP_DENIED_PRESET=open MCP_PROGRESS=steps \
        MCP_RUN_SECONDS=4 MCP_EXTRA_TOOLS=request_access \
        MCP_SECRETS=anthropic MCP_DENIED_SECRET=github \
        "$MCP_NODE22" "$TOP/tests/mcp/sdk-client.mjs" "$mode" "$@" \
        >"$T/sdk-$mode.out" 2>"$T/sdk-$mode.log"
    rc=$?
    tap_relay <"$T/sdk-$mode.out"
    tap_ok $rc "the SDK client over $mode ran to its end (exit $rc)"
    [ $rc -eq 0 ] || tail -n 30 "$T/sdk-$mode.log" | sed 's/^/# /'
}

# stdio: the client starts `sandboxctl -c CONF mcp` itself.
sdk stdio mcp-stdio-1 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester
! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/sdk-stdio.log"
tap_ok $? "stdio: the server (started by the client) reported no sanitizer error"
! grep -q '^{' "$T/sdk-stdio.log"
tap_ok $? "stdio: nothing but MCP messages went to stdout (the log holds no JSON lines)"

# What the simulator saw: the sandbox was created with the server's owner and
# is gone again.
sbx --json list >"$T/list.json" 2>"$T/list.err"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
names = [s["name"] for s in d["sandboxes"]]
sys.exit(0 if "mcp-stdio-1" not in names else 1)' "$T/list.json"
tap_ok $? "sandboxctl list agrees: mcp-stdio-1 was destroyed"
test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] not in (9000, 9001)]")" = "[]" &&
    test "$(sim_state "len([t for t in s['tasks'] if 'clone' in str(t)])")" -ge 1
tap_ok $? "the simulator saw a clone, and holds no VM but the templates afterwards"

# Owner: create through MCP, then read it back with the command line.
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_server","arguments":{"name":"mcp-owner-1","size":"small","lifetime":"1h","policy":"locked"}}}' \
    | timeout 120 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester >"$T/owner.out" 2>"$T/owner.err"
sbx --json list >"$T/list2.json" 2>>"$T/list.err"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
box = [s for s in d["sandboxes"] if s["name"] == "mcp-owner-1"]
sys.exit(0 if box and box[0]["owner"] == "mcp-tester" and box[0]["policy"] == "locked" else 1)' "$T/list2.json"
tap_ok $? "a sandbox made over MCP belongs to the server's --owner and has the chosen preset"
grep -q '"isError":false' "$T/owner.out"
tap_ok $? "create_server over a plain pipe answered without a tool error"
version=$(meson introspect "$BUILD_DIR" --projectinfo |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
python3 -c '
import json, sys
first = json.loads(open(sys.argv[1]).readline())
info = first["result"]["serverInfo"]
sys.exit(0 if info["name"] == "sandboxctl" and info["version"] == sys.argv[2] else 1)' \
    "$T/owner.out" "$version"
tap_ok $? "initialize: serverInfo.version is meson's project version ($version)"
sbx destroy mcp-owner-1 >/dev/null 2>&1
tap_ok $? "the command line destroys it again"
! grep -q 'notifications/progress' "$T/owner.out"
tap_ok $? "a create_server without _meta.progressToken gets no notifications/progress"

# Progress over raw JSON-RPC: the request's token on every notification,
# a start and an end per step in order, all before the result (stdio also
# carries the notifications tied to no request, such as list_changed).
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_server","_meta":{"progressToken":"tok-7"},"arguments":{"name":"mcp-progress-1","size":"small","lifetime":"1h","policy":"locked"}}}' \
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"destroy_server","_meta":{"progressToken":8},"arguments":{"name":"mcp-progress-1"}}}' \
    | timeout 120 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester >"$T/progress.out" 2>"$T/progress.err"
python3 - "$T/progress.out" <<'PY'
import json, re, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
at = next(i for i, m in enumerate(msgs) if m.get("id") == 2)
notes = [m for m in msgs[:at] if m.get("method") == "notifications/progress"]
steps = ["clone", "configure", "firewall", "start", "guest agent", "guest setup", "binding"]
want = [s + w for s in steps for w in (": started (", ": done in ")]
p = [n["params"] for n in notes]
ok = (len(p) == 14 and all(x["progressToken"] == "tok-7" for x in p)
      and [x["progress"] for x in p] == list(range(1, 15)) and all(x["total"] == 14 for x in p)
      and all(x["message"].startswith(w) and re.search(r"\(\d+\.\d s so far\)$", x["message"])
              for x, w in zip(p, want))
      and msgs[at]["result"]["isError"] is False
      and not any(m.get("method") == "notifications/progress" for m in msgs[at + 1:])
      and [m.get("method") for m in msgs[:at]].count("notifications/resources/list_changed") == 1)
if not ok:
    print("# " + json.dumps(p)[-600:])
    print("# result: " + json.dumps(msgs[at])[:600])
    print("# after: " + json.dumps(msgs[at + 1:])[:800])
sys.exit(0 if ok else 1)
PY
tap_ok $? "create_server with _meta.progressToken: 14 notifications/progress with the token, in step order, and resources/list_changed, then the result; destroy_server sends no progress"

# Owner scope: another owner's sandbox does not exist for the MCP server.
sbx create --name other-owner-1 --size small --lifetime 1h --owner someone-else \
    --policy locked >"$T/other.out" 2>&1
tap_ok $? "the command line creates other-owner-1 for owner someone-else"
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_servers","arguments":{}}}' \
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_command","arguments":{"name":"other-owner-1","command":["touch","/tmp/mcp-was-here"]}}}' \
    '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"destroy_server","arguments":{"name":"other-owner-1"}}}' \
    | timeout 60 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester >"$T/scope.out" 2>"$T/scope.err"
python3 - "$T/scope.out" <<'PY'
import json, sys
answers = {m.get("id"): m for m in map(json.loads, open(sys.argv[1])) if "id" in m}
listed = answers[2]["result"]["structuredContent"]["sandboxes"]
ok = not any(b["name"] == "other-owner-1" for b in listed)
for i in (3, 4):
    r = answers[i]["result"]
    ok = ok and r["isError"] and "of owner 'mcp-tester'" in r["content"][0]["text"]
sys.exit(0 if ok else 1)
PY
tap_ok $? "owner scope: list_servers leaves another owner's sandbox out; run_command and destroy_server on it are tool errors"
sbx --json list >"$T/list3.json" 2>>"$T/list.err"
grep -q '"other-owner-1"' "$T/list3.json" && sbx exec other-owner-1 -- test ! -e /tmp/mcp-was-here >/dev/null 2>&1
tap_ok $? "owner scope: other-owner-1 still exists and the command never ran in it"
sbx destroy other-owner-1 >/dev/null 2>&1
tap_ok $? "the command line destroys other-owner-1"

# A preset outside mcp-presets never reaches Proxmox.
before=$(sim_state "(len(s['tasks']), len(s['vms']))")
printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' \
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_server","arguments":{"name":"mcp-open-1","size":"small","policy":"open"}}}' \
    | timeout 60 "$SBX_BIN" -c "$CONF" mcp >"$T/open.out" 2>"$T/open.err"
after=$(sim_state "(len(s['tasks']), len(s['vms']))")
grep -q '"isError":true' "$T/open.out" && grep -q 'not a preset permitted' "$T/open.out" &&
    [ -n "$before" ] && [ "$before" = "$after" ]
tap_ok $? "policy 'open' (not in mcp-presets): a tool error, and Proxmox saw no task and no new VM ($before -> $after)"

# HTTP: the same client with the bearer token.
"$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/mcp.port" 2>"$T/mcp-http.log" &
mcp_pid=$!
if mcp_wait_file "$T/mcp.port" "$mcp_pid"; then
    url=http://127.0.0.1:$(cat "$T/mcp.port")/mcp
    sdk http mcp-http-1 "$url" "$T/mcp-token"
    code=$(curl -sS --noproxy '*' -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        -d '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$url")
    [ "$code" = 401 ]
    tap_ok $? "sandboxctl mcp --http without the token: 401 (got $code)"
    kill -TERM "$mcp_pid"
    rc=0
    wait "$mcp_pid" || rc=$?
    mcp_pid=
    tap_ok $rc "sandboxctl mcp --http stops cleanly on SIGTERM (exit $rc)"
    ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/mcp-http.log"
    tap_ok $? "http: the server reported no sanitizer error, also at its stop"
    grep -E -A20 'ERROR: (Address|Leak)Sanitizer|runtime error' "$T/mcp-http.log" | head -n 30 | sed 's/^/# /'
else
    tap_ok 1 "sandboxctl mcp --http starts"
    sed 's/^/# /' "$T/mcp-http.log"
fi

# No token file configured: --http refuses to start, saying why.
grep -v '^mcp-token-file' "$CONF" >"$T/notoken.conf"
timeout 10 "$SBX_BIN" -c "$T/notoken.conf" mcp --http 127.0.0.1:0 >/dev/null 2>"$T/notoken.err"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q 'mcp-token-file' "$T/notoken.err"
tap_ok $? "without mcp-token-file, mcp --http refuses to start and names the setting (exit $rc)"
sbx_stop_all
echo "1..$tap_n"
[ "$tap_failed" -eq 0 ]
