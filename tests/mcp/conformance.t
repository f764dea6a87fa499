#!/usr/bin/env bash
# tests/mcp/conformance.t - the MCP conformance suite
# (@modelcontextprotocol/conformance, run with the Node 22 it needs) against
# `sandboxctl mcp --http`, one TAP line per server scenario of its active
# suite.  The suite's client sends no token, so tests/mcp/auth-relay.mjs adds
# the bearer token and passes everything else (Host, Origin) through.
#
# conformance-expected-failures.yml lists the scenarios of OPTIONAL features
# this server does not offer: each must fail (a pass means the list is stale).
# conformance-not-applicable.txt lists the scenarios that call fixture tools of
# the suite's own reference server: they are not run, and are reported as
# comments, not as checks.  Every other scenario must pass.
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
expected=$TOP/tests/mcp/conformance-expected-failures.yml
not_applicable=$TOP/tests/mcp/conformance-not-applicable.txt
suite=$MCP_NODE_MODULES/@modelcontextprotocol/conformance/dist/index.js

"$SBX_BIN" -c "$CONF" mcp --http 127.0.0.1:0 --port-file "$T/mcp.port" 2>"$T/mcp-http.log" &
mcp_pid=$!
if ! mcp_wait_file "$T/mcp.port" "$mcp_pid"; then
    tap_ok 1 "sandboxctl mcp --http starts"
    sed 's/^/# /' "$T/mcp-http.log"
    tap_stop
fi
"$MCP_NODE22" "$TOP/tests/mcp/auth-relay.mjs" "$(cat "$T/mcp.port")" "$T/mcp-token" "$T/relay.port" \
    2>"$T/relay.log" &
relay_pid=$!
if ! mcp_wait_file "$T/relay.port" "$relay_pid"; then
    tap_ok 1 "the token relay starts"
    tap_stop
fi
url=http://127.0.0.1:$(cat "$T/relay.port")/mcp

# The scenarios of the active suite, as the suite lists them.
(cd "$T" && "$MCP_NODE22" "$suite" list --server) >"$T/list.txt" 2>&1
sed -n 's/^ *- \([a-z0-9-]*\) .*/\1/p' "$T/list.txt" >"$T/scenarios.txt"
[ -s "$T/scenarios.txt" ]
tap_ok $? "the conformance suite $MCP_CONFORMANCE_VERSION lists its server scenarios ($(wc -l <"$T/scenarios.txt"))"

# Every scenario named in our two lists exists in the suite.
for s in $(sed -n 's/^  - \([a-z0-9-]*\).*/\1/p' "$expected") $(grep -v '^#' "$not_applicable" | awk '{print $1}'); do
    grep -qx "$s" "$T/scenarios.txt"
    tap_ok $? "listed scenario $s exists in the suite"
done

# Runs one scenario; its TAP line says what was expected of it.
while IFS= read -r s; do
    if grep -q "^$s " "$not_applicable"; then
        echo "# not run: $s: $(grep "^$s " "$not_applicable" | sed 's/^[^ ]* *//')"
        continue
    fi
    (cd "$T" && timeout 120 "$MCP_NODE22" "$suite" server --url "$url" --scenario "$s" \
        --expected-failures "$expected" -o "$T/results") >"$T/run-$s.log" 2>&1
    rc=$?
    if grep -q "^  - $s\b" "$expected"; then
        tap_ok $rc "conformance $s: fails as expected (optional feature not offered: $(sed -n "s/^  - $s *# *//p" "$expected"))"
    else
        tap_ok $rc "conformance $s: passes"
    fi
    if [ $rc -ne 0 ]; then
        grep -E '✗|✓|FAIL|stale|Error|error' "$T/run-$s.log" | head -n 10 | sed 's/^/# /'
    fi
done <"$T/scenarios.txt"

kill -TERM "$mcp_pid"
rc=0
wait "$mcp_pid" || rc=$?
mcp_pid=
tap_ok $rc "sandboxctl mcp --http stops cleanly after the suite (exit $rc)"
[ $rc -eq 0 ] || tail -n 20 "$T/mcp-http.log" | sed 's/^/# /'
kill -TERM "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
relay_pid=
sbx_stop_all
echo "1..$tap_n"
[ "$tap_failed" -eq 0 ]
