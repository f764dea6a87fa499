#!/usr/bin/env bash
# judge.t - one judge for every request: a second request on a kept-alive
# HTTP connection is decided as a new one, in the world as it is when it
# comes: after a reload that removes its rule (denied with the new rule),
# after a reload that denies the address of the upstream kept for it, once
# its sandbox's quota is used up (429), when Proxy-Authorization switches to
# a sandbox whose preset is gone (a clean deny, no crash), after its
# binding expired and after it was deleted (the connection is revoked, the
# next request is judged by what is left).  Also: max-header-bytes over
# what can be forwarded is a config error naming the limit.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.16 judge.test
egd_host 127.0.0.16 ipd.test
egd_allow 'judge.test:8000' 'ipd.test:8000'
printf '%s\n' '# a preset that goes away while a sandbox is bound to it' 'a.test:8000' \
    >"$T/policies/gone.allow"
egd_origin a.test extra.test || bail "the origins start"
egd_start 'quota-bytes-per-sandbox 100k' || bail "egressd starts"

KA=$EGD_DIR/keepalive.py
A=http://a.test:$EGD_HTTP_PORT
J=http://judge.test:$EGD_HTTP_PORT
GO=$T/go
# ka OUT ARGS...: keepalive.py in the background, JSON lines to OUT.
ka() {
    local out=$1
    shift
    rm -f "$GO"
    py "$KA" --timeout 15 "$@" >"$out" 2>"$out.err" &
    KA_PID=$!
}
# line N FILE: the Nth JSON line of FILE (waits up to 5 s for it).
line() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(wc -l <"$2" 2>/dev/null || echo 0)" -ge "$1" ] && break
        sleep 0.05
    done
    sed -n "${1}p" "$2"
}
reload() { egd_admin POST /v1/reload >/dev/null; }

# --- a reload removes the rule: the second request is denied by the new one.
ka "$T/c" "$EGD_PROXY" "get:$J/hello" "wait:$GO" "get:$J/hello"
l1=$(line 1 "$T/c")
ok_json "reload: the first request is allowed" "$l1" 'l["status"] == 200'
sed -i 's/^judge\.test:8000$/deny judge.test:*/' "$T/policies/test.allow"
reload || bail "egressd reloads"
RULE=$(egd_rule "deny judge.test")
egd_log_mark
touch "$GO"
wait "$KA_PID"
l2=$(line 2 "$T/c")
ok_json "reload: the second request, on the same connection, gets 403 deny_rule with the new rule ($RULE)" \
    "$l2" "l['reused'] and l['status'] == 403 and l['deny'] == 'deny_rule; rule=$RULE'"
egd_log_ok "  and its log line says so" 'l["host"] == "judge.test"' \
    "l['decision'] == 'deny' and l['reason'] == 'deny_rule' and l['rule'] == '$RULE'"

# --- a reload denies the address the kept upstream is connected to.
ka "$T/ip" "$EGD_PROXY" "get:http://ipd.test:$EGD_HTTP_PORT/hello" "wait:$GO" \
    "get:http://ipd.test:$EGD_HTTP_PORT/hello"
ok_json "address phase: the first request is allowed" "$(line 1 "$T/ip")" 'l["status"] == 200'
egd_allow 'deny ip 127.0.0.16/32:8000'
reload || bail "egressd reloads"
RULE_IP=$(awk '/^deny ip 127\.0\.0\.16/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
egd_log_mark
touch "$GO"
wait "$KA_PID"
ok_json "address phase: the second request to the same origin is judged on its address too ($RULE_IP)" \
    "$(line 2 "$T/ip")" "l['reused'] and l['status'] == 403 and l['deny'] == 'deny_rule; rule=$RULE_IP'"
egd_log_ok "  logged with the upstream it would have used" 'l["host"] == "ipd.test"' \
    "l['reason'] == 'deny_rule' and l['rule'] == '$RULE_IP' and l['upstream'] == '127.0.0.16:$EGD_HTTP_PORT'"
sed -i '/^deny ip 127\.0\.0\.16/d' "$T/policies/test.allow"
reload || bail "egressd reloads"

# --- the quota is used up (by another connection of the same sandbox).
egd_put 703 '{"addresses":["127.0.0.73"],"policy":"test"}' >/dev/null || bail "bind sandbox 703"
ka "$T/q" --source 127.0.0.73 "$EGD_PROXY" "get:$A/hello" "wait:$GO" "get:$A/hello"
ok_json "quota: the first request is allowed" "$(line 1 "$T/q")" 'l["status"] == 200'
egd_curl --interface 127.0.0.73 -x "http://$EGD_PROXY" -o /dev/null "$A/bytes/200000" 2>/dev/null
egd_log_mark
touch "$GO"
wait "$KA_PID"
ok_json "quota: once another connection used it up, the second request gets 429 limit" \
    "$(line 2 "$T/q")" 'l["reused"] and l["status"] == 429 and l["deny"] == "limit"'
egd_log_ok "  logged deny limit for sandbox 703" 'l["status"] == 429' \
    'l["sandbox"] == "703" and l["reason"] == "limit"'

# --- Proxy-Authorization switches to a sandbox whose preset is gone.
egd_put 705 '{"policy":"gone","token":"t705"}' >/dev/null || bail "bind sandbox 705"
egd_stop
rm "$T/policies/gone.allow"
egd_start 'quota-bytes-per-sandbox 100k' || bail "egressd starts again without the preset"
check "restart: the binding of the gone preset is kept, with a warning" \
    grep -q "sandbox 705.*gone" "$T/egressd.err"
AUTH705="Proxy-Authorization: Basic $(printf '705:t705' | base64)"
egd_log_mark
ka "$T/e" "$EGD_PROXY" "get:$A/hello" "get:$A/hello|$AUTH705" "get:$A/hello"
wait "$KA_PID"
ok_json "missing preset: the first request (default policy) is allowed" "$(line 1 "$T/e")" \
    'l["status"] == 200'
ok_json "  the second, naming sandbox 705, gets a clean 403 not_allowed" "$(line 2 "$T/e")" \
    'l["status"] == 403 and l["deny"] == "not_allowed"'
egd_log_ok "  logged as sandbox 705's" 'l["sandbox"] == "705"' \
    'l["decision"] == "deny" and l["reason"] == "not_allowed" and l["rule"] is None'
check "  egressd is still running" kill -0 "$EGD_PID"

# --- the binding expires between two requests.
exp=$(($(date +%s) + 3))
egd_put 701 "{\"addresses\":[\"127.0.0.70\"],\"policy\":\"test\",\"expires\":\"$(date -u -d "@$exp" +%FT%TZ)\"}" \
    >/dev/null || bail "bind sandbox 701"
ka "$T/a" --source 127.0.0.70 "$EGD_PROXY" "get:$A/hello" "wait:$GO" "get:$A/hello"
ok_json "expiry: the first request is allowed" "$(line 1 "$T/a")" 'l["status"] == 200'
while [ "$(date +%s)" -le "$exp" ]; do sleep 0.1; done
sleep 0.3
touch "$GO"
wait "$KA_PID"
ok_json "expiry: the kept-alive connection was closed at the expiry, the second request gets 403 not_allowed" \
    "$(line 2 "$T/a")" 'l["closed_before"] and l["status"] == 403 and l["deny"] == "not_allowed"'

# --- the binding is deleted: the next request is judged by the default policy.
egd_put 702 '{"addresses":["127.0.0.71"],"policy":"test","allow":["extra.test:8000"]}' >/dev/null ||
    bail "bind sandbox 702"
X=http://extra.test:$EGD_HTTP_PORT
ka "$T/b" --source 127.0.0.71 "$EGD_PROXY" "get:$X/hello" "wait:$GO" "get:$X/hello"
ok_json "delete: the first request, allowed by the binding's own line, passes" "$(line 1 "$T/b")" \
    'l["status"] == 200'
egd_admin DELETE /v1/sandboxes/702 >/dev/null || bail "delete sandbox 702"
sleep 0.3
egd_log_mark
touch "$GO"
wait "$KA_PID"
ok_json "delete: the kept-alive connection was closed, the next request falls back to the default policy (403 not_allowed)" \
    "$(line 2 "$T/b")" 'l["closed_before"] and l["status"] == 403 and l["deny"] == "not_allowed"'
egd_log_ok "  logged as the default policy's" 'l["host"] == "extra.test"' \
    'l["sandbox"] == "default" and l["reason"] == "not_allowed"'

# --- max-header-bytes: at most what can be forwarded.
for v in 1m 65537 512; do
    egd_write_config "max-header-bytes $v"
    "$EGD_BIN" -t -c "$T/egressd.conf" >"$T/check.out" 2>&1
    rc=$?
    check "egressd -t: max-header-bytes $v is refused (status $rc), naming the limit" \
        sh -c "[ $rc -eq 1 ] && grep -q 'egressd.conf:[0-9]*: expected max-header-bytes of 1k..64k' '$T/check.out'"
done
egd_write_config "max-header-bytes 64k"
check "egressd -t: max-header-bytes 64k is taken" "$EGD_BIN" -t -c "$T/egressd.conf"

egd_finish
tap_end
