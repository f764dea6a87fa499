#!/usr/bin/env bash
# tests/mcp/conformance.t - the MCP conformance suite
# (@modelcontextprotocol/conformance, run with the Node 22 it needs), one
# TAP line per server scenario of its active suite, against two servers over
# Streamable HTTP:
#   sandboxctl  the real `sandboxctl mcp --http` (with the Proxmox simulator);
#   fixtures    mcp_conformance_server: the same protocol library serving the
#               tools, resources and prompts the suite's scenarios call
#               (tests/unit/mcp/conformance_fixtures.c) and nothing else.
# The suite's client sends no token, so tests/mcp/auth-relay.mjs adds the
# bearer token and passes everything else (Host, Origin) through.
#
# Per server, an expected-failures file lists the scenarios that must fail
# (a pass means the list is stale, and fails the test too), and a
# not-applicable file the scenarios that are not run against it (reported as
# comments, not as checks).  Every other scenario must pass.
#   sandboxctl  conformance-expected-failures.yml (none),
#               conformance-not-applicable.txt (the fixtures it lacks; each
#               line names the fixtures run that covers it)
#   fixtures    conformance-fixtures-expected-failures.yml (tools-call-sampling),
#               none not applicable
set -u
. "$TOP/tests/sandboxctl/lib.sh"
. "$TOP/tests/mcp/lib.sh"

mcp_pid= relay_pid=
stop_all() {
    local p
    for p in "$relay_pid" "$mcp_pid"; do
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    mcp_pid= relay_pid=
    sbx_stop_all quiet
}
mcp_sbx_setup || tap_stop
trap stop_all EXIT
suite=$MCP_NODE_MODULES/@modelcontextprotocol/conformance/dist/index.js
fixture_server=$BUILD_DIR/tests/unit/mcp/mcp_conformance_server

# The scenarios of the active suite, as the suite lists them.
(cd "$T" && "$MCP_NODE22" "$suite" list --server) >"$T/list.txt" 2>&1
sed -n 's/^ *- \([a-z0-9-]*\) .*/\1/p' "$T/list.txt" >"$T/scenarios.txt"
[ -s "$T/scenarios.txt" ]
tap_ok $? "the conformance suite $MCP_CONFORMANCE_VERSION lists its server scenarios ($(wc -l <"$T/scenarios.txt"))"

# start_relay NAME: the token relay in front of the server on $T/NAME.port;
# sets url.  1 when it does not start.
start_relay() {
    "$MCP_NODE22" "$TOP/tests/mcp/auth-relay.mjs" "$(cat "$T/$1.port")" "$T/mcp-token" \
        "$T/$1-relay.port" 2>"$T/$1-relay.log" &
    relay_pid=$!
    if ! mcp_wait_file "$T/$1-relay.port" "$relay_pid"; then
        tap_ok 1 "$1: the token relay starts"
        return 1
    fi
    url=http://127.0.0.1:$(cat "$T/$1-relay.port")/mcp
}

# run_suite NAME EXPECTED NOT_APPLICABLE: every scenario against $url, its
# TAP line saying what was expected of it.
run_suite() {
    local name=$1 expected=$2 not_applicable=$3 s rc
    # Every scenario named in the two lists exists in the suite.
    for s in $(sed -n 's/^  - \([a-z0-9-]*\).*/\1/p' "$expected") $(grep -v '^#' "$not_applicable" | awk '{print $1}'); do
        grep -qx "$s" "$T/scenarios.txt"
        tap_ok $? "$name: listed scenario $s exists in the suite"
    done
    while IFS= read -r s; do
        if grep -q "^$s " "$not_applicable"; then
            echo "# $name: not run: $s: $(grep "^$s " "$not_applicable" | sed 's/^[^ ]* *//')"
            continue
        fi
        (cd "$T" && timeout 120 "$MCP_NODE22" "$suite" server --url "$url" --scenario "$s" \
            --expected-failures "$expected" -o "$T/results-$name") >"$T/run-$name-$s.log" 2>&1
        rc=$?
        if grep -q "^  - $s\b" "$expected"; then
            tap_ok $rc "$name: conformance $s: fails as expected ($(sed -n "s/^  - $s *# *//p" "$expected"))"
        else
            tap_ok $rc "$name: conformance $s: passes"
        fi
        if [ $rc -ne 0 ]; then
            grep -E '✗|✓|FAIL|stale|Error|error' "$T/run-$name-$s.log" | head -n 10 | sed 's/^/# /'
        fi
    done <"$T/scenarios.txt"
}

# stop_server NAME LOG: SIGTERM, and a clean exit is a check.
stop_server() {
    local rc=0
    kill -TERM "$mcp_pid"
    wait "$mcp_pid" || rc=$?
    mcp_pid=
    tap_ok $rc "$1: the server stops cleanly after the suite (exit $rc)"
    [ $rc -eq 0 ] || tail -n 20 "$2" | sed 's/^/# /'
    kill -TERM "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
    relay_pid=
}

# The real sandboxctl.
"$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/sandboxctl.port" \
    2>"$T/sandboxctl-http.log" &
mcp_pid=$!
if ! mcp_wait_file "$T/sandboxctl.port" "$mcp_pid"; then
    tap_ok 1 "sandboxctl mcp --http starts"
    sed 's/^/# /' "$T/sandboxctl-http.log"
    tap_stop
fi
start_relay sandboxctl || tap_stop
run_suite sandboxctl "$TOP/tests/mcp/conformance-expected-failures.yml" \
    "$TOP/tests/mcp/conformance-not-applicable.txt"
stop_server sandboxctl "$T/sandboxctl-http.log"

# The fixture server: the same protocol layer, the suite's fixtures.
if [ ! -x "$fixture_server" ]; then
    tap_ok 1 "mcp_conformance_server is built ($fixture_server)"
    tap_stop
fi
"$fixture_server" --http 127.0.0.1:0 --token-file "$T/mcp-token" --port-file "$T/fixtures.port" \
    2>"$T/fixtures-http.log" &
mcp_pid=$!
if ! mcp_wait_file "$T/fixtures.port" "$mcp_pid"; then
    tap_ok 1 "mcp_conformance_server --http starts"
    sed 's/^/# /' "$T/fixtures-http.log"
    tap_stop
fi
start_relay fixtures || tap_stop
run_suite fixtures "$TOP/tests/mcp/conformance-fixtures-expected-failures.yml" /dev/null
stop_server fixtures "$T/fixtures-http.log"

sbx_stop_all
echo "1..$tap_n"
[ "$tap_failed" -eq 0 ]
