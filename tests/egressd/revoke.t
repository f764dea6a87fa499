#!/usr/bin/env bash
# revoke.t - revocation reaches what a sandbox already holds.  For each of a
# DELETE of the binding, its expiry, and a reload that stops allowing a
# host: tunnels that stream, a request in the middle of its answer and a
# kept-alive connection between requests are closed within a moment, and
# the log lines say `revoked`; tunnels that the new world still allows
# stream through the reload byte for byte.  max-conn-life bounds a
# kept-alive connection.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.25 echo.test
egd_host 127.0.0.26 echo2.test
egd_allow 'echo.test:7000 raw' 'echo2.test:7000 raw'
egd_origin a.test || egm_bail "the origins start"
egm_server "$T/echo.out" python3 -u "$EGD_DIR/tunnels.py" echo 127.0.0.25:7000 127.0.0.26:7000 ||
    egm_bail "the echo servers start"
egd_start || egm_bail "egressd starts"

A=http://a.test:$EGD_HTTP_PORT
now() { date +%s.%N; }
# within X LO HI: LO <= X <= HI (decimals).
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
wait_file() {
    local i
    for ((i = 0; i < 200; i++)); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}

# hold NAME SOURCE: what a sandbox holds, started in the background: three
# tunnels streaming to echo.test, a request in the middle of its answer
# (/slow/40: 40 lines, 200 ms apart), and a kept-alive connection between
# two requests (its second request waits for $T/NAME.go).
hold() {
    local name=$1 src=$2
    rm -f "$T/$name.opened" "$T/$name.json"
    python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --source "$src" --target echo.test:7000 \
        -n 3 --interval 0.05 --min-rounds 1 --until "$T/never" --opened "$T/$name.opened" \
        --out "$T/$name.json" --timeout 20 &
    TUN_PID=$!
    py "$EGD_DIR/keepalive.py" --source "$src" --timeout 20 "$EGD_PROXY" "get:$A/hello" \
        "wait:$T/$name.go" "get:$A/hello" >"$T/$name.ka" 2>&1 &
    KA_PID=$!
    wait_file "$T/$name.opened" || diag "$name: the tunnels did not open"
    for _ in $(seq 100); do [ -s "$T/$name.ka" ] && break; sleep 0.05; done
    egd_curl --interface "$src" -x "http://$EGD_PROXY" -o "$T/$name.slow" "$A/slow/40" \
        >/dev/null 2>&1 &
    SLOW_PID=$!
    sleep 0.4 # the answer is on its way now
}
# held_ended NAME T0: the checks after the revocation at T0.
held_ended() {
    local name=$1 t0=$2
    wait "$TUN_PID"
    check "$name: the three tunnels were closed by egressd within a second" python3 -c '
import json, sys
o, t0 = json.load(open(sys.argv[1])), float(sys.argv[2])
ts = o["tunnels"]
sys.exit(0 if o["completed"] == 0 and len(ts) == 3 and
         all(t.get("failed") and t0 - 0.1 <= t["failed"] <= t0 + 1.0 for t in ts) else 1)' \
        "$T/$name.json" "$t0"
    wait "$SLOW_PID"
    check "$name: the request in the middle of its answer was cut ($(wc -c <"$T/$name.slow") of 200 bytes)" \
        test "$(wc -c <"$T/$name.slow")" -lt 200
    touch "$T/$name.go"
    wait "$KA_PID"
    ok_json "$name: the kept-alive connection was closed between its requests" \
        "$(sed -n 2p "$T/$name.ka")" 'l["closed_before"]'
}

# --- DELETE /v1/sandboxes/801
egd_put 801 '{"addresses":["127.0.0.80"],"owner":"olga","policy":"test"}' >/dev/null ||
    egm_bail "bind sandbox 801"
hold delete 127.0.0.80
egd_log_mark
t0=$(now)
egd_admin DELETE /v1/sandboxes/801 >/dev/null || egm_bail "delete sandbox 801"
held_ended delete "$t0"
lines=$(egm_log_lines 'l["sandbox"] == "801" and l["reason"] == "revoked"')
egm_lines_ok "delete: the tunnels' and the request's lines say revoked (deny, no rule)" "$lines" \
    'len([l for l in ls if l["mode"] == "connect"]) == 3 and len([l for l in ls if l["mode"] == "http"]) == 1 and all(l["decision"] == "deny" and l["rule"] is None and l["owner"] == "olga" for l in ls)'
egm_lines_ok "delete: the tunnels' lines count what they carried" "$lines" \
    'len([l for l in ls if l["mode"] == "connect"]) == 3 and all(l["bytes_up"] > 0 and l["bytes_down"] > 0 for l in ls if l["mode"] == "connect")'

# --- the binding of 802 expires
exp=$(($(date +%s) + 3))
egd_put 802 "{\"addresses\":[\"127.0.0.81\"],\"policy\":\"test\",\"expires\":\"$(date -u -d "@$exp" +%FT%TZ)\"}" \
    >/dev/null || egm_bail "bind sandbox 802"
hold expiry 127.0.0.81
egd_log_mark
held_ended expiry "$exp"
lines=$(egm_log_lines 'l["sandbox"] == "802" and l["reason"] == "revoked"')
egm_lines_ok "expiry: three tunnels and one request logged revoked" "$lines" \
    'len([l for l in ls if l["mode"] == "connect"]) == 3 and len([l for l in ls if l["mode"] == "http"]) == 1'

# --- a reload that denies echo.test, while echo2.test streams on
rm -f "$T/keep.opened" "$T/keep.json" "$T/keep.until"
python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --target echo2.test:7000 -n 3 --chunk 4096 \
    --interval 0.02 --min-rounds 20 --until "$T/keep.until" --opened "$T/keep.opened" \
    --out "$T/keep.json" --timeout 30 &
KEEP_PID=$!
python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --target echo.test:7000 -n 3 \
    --interval 0.05 --min-rounds 1 --until "$T/never" --opened "$T/gone.opened" \
    --out "$T/gone.json" --timeout 20 &
GONE_PID=$!
wait_file "$T/keep.opened" && wait_file "$T/gone.opened" || diag "reload: the tunnels did not open"
sed -i 's/^echo\.test:7000 raw$/deny echo.test:*/' "$T/policies/test.allow"
RULE=$(egd_rule "deny echo.test")
egd_log_mark
t0=$(now)
egd_admin POST /v1/reload >/dev/null || egm_bail "egressd reloads"
wait "$GONE_PID"
check "reload: the three tunnels to the host now denied were closed within a second" python3 -c '
import json, sys
o, t0 = json.load(open(sys.argv[1])), float(sys.argv[2])
sys.exit(0 if o["completed"] == 0 and len(o["tunnels"]) == 3 and all(t.get("failed") and t["failed"] <= t0 + 1.0 for t in o["tunnels"]) else 1)' \
    "$T/gone.json" "$t0"
lines=$(egm_log_lines 'l["host"] == "echo.test" and l["reason"] == "revoked"')
egm_lines_ok "reload: their lines say revoked, with the rule that denies them now ($RULE)" "$lines" \
    "len(ls) == 3 and all(l['decision'] == 'deny' and l['rule'] == '$RULE' for l in ls)"
sleep 0.5
touch "$T/keep.until"
wait "$KEEP_PID"
check "reload: the three tunnels still allowed streamed through it, every byte checked, and completed" python3 -c '
import json, sys
o, t0 = json.load(open(sys.argv[1])), float(sys.argv[2])
sys.exit(0 if o["completed"] == 3 and all(t["opened"] < t0 < t["closed"] and t["rounds"] >= 20 for t in o["tunnels"]) else 1)' \
    "$T/keep.json" "$t0"
lines=$(egm_log_lines 'l["host"] == "echo2.test"')
egm_lines_ok "reload: the kept tunnels' lines say allowed, every byte counted" "$lines" \
    'len(ls) == 3 and all(l["decision"] == "allow" and l["reason"] == "allowed" and l["bytes_up"] == l["bytes_down"] > 20 * 4096 for l in ls)'

# --- max-conn-life 3s: a kept-alive connection ends by its life.
egd_stop
egd_start 'max-conn-life 3s' || egm_bail "egressd starts again with max-conn-life 3s"
py "$EGD_DIR/keepalive.py" "$EGD_PROXY" "get:$A/hello" sleep:1 "get:$A/hello" sleep:1 \
    "get:$A/hello" sleep:1.2 "get:$A/hello" >"$T/life.ka" 2>&1
check "max-conn-life: three requests on one connection, then it is closed by its life" python3 -c '
import json, sys
ls = [json.loads(x) for x in open(sys.argv[1])]
sys.exit(0 if [l["status"] for l in ls] == [200] * 4 and [l["conn"] for l in ls] == [1, 1, 1, 2] else 1)' \
    "$T/life.ka"

egd_finish
tap_end
