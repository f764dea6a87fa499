#!/usr/bin/env bash
# ops.t - egressd in operation: policy reloads (a file renamed into
# policy-dir, SIGHUP, broken files) while 200 CONNECT tunnels stream data;
# bindings across a restart; SIGUSR1 and a renamed access log; the SIGTERM
# drain.  TAP on stdout.  Needs BUILD_DIR, TOP; runs itself in a
# network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

P=http://$EGD_PROXY
N_TUNNELS=200
egd_host 127.0.0.25 echo.test
egd_host 127.0.0.26 new.test
egd_host 127.0.0.27 old.test
egd_host 127.0.0.28 hup.test
egd_allow 'echo.test:7000 raw' 'old.test:8000' 'include hup'
RULE_ECHO=$(egd_rule echo.test)

# hup.allow lives outside policy-dir behind a symlink: writing it makes no
# inotify event in policy-dir, so only SIGHUP can make egressd read it.
mkdir -p "$T/hup"
echo '# rules that SIGHUP brings in' >"$T/hup/hup.allow"
ln -s "$T/hup/hup.allow" "$T/policies/hup.allow"

# put FILE TEXT: replace FILE by a rename (as editors and config managers do).
put() {
    printf '%s\n' "$2" >"$1.new.$$" && mv -f "$1.new.$$" "$1"
}
reloads() { egd_metric "egressd_policy_reloads_total{result=\"$1\"}" || echo -1; }
# wait_reloads RESULT N: until policy_reloads_total{result} reaches N (5 s).
wait_reloads() {
    local i
    for ((i = 0; i < 100; i++)); do
        [ "$(reloads "$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
# code URL [CURL ARGS]: the HTTP status of URL through the proxy.
code() {
    local url=$1
    shift
    egd_curl -o /dev/null -w '%{http_code}' -x "$P" "$@" "$url" 2>/dev/null
}
now() { date +%s.%N; }
# secs A B: B - A, one decimal; lt X Y: X < Y (decimals).
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
lt() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }
# err_names FILE:LINE: egressd's stderr since the mark names FILE:LINE.
err_names() { egm_err_since | grep -qE "(^|[/ ])$1(:|[^0-9]|\$)"; }

egd_origin a.test b.test new.test old.test hup.test extra.test || egm_bail "the origins start"
egm_server "$T/echo.out" python3 -u "$EGD_DIR/tunnels.py" echo 127.0.0.25:7000 ||
    egm_bail "the echo server starts"
egd_start || egm_bail "egressd starts and answers /healthz"

# ================================================================ reloads
ok_codes=$(printf '%s %s %s' "$(code http://old.test:8000/hello)" "$(code http://new.test:8000/hello)" \
    "$(code http://hup.test:8000/hello)")
check "before: old.test allowed, new.test and hup.test denied (200 403 403; got $ok_codes)" \
    test "$ok_codes" = "200 403 403"

egd_log_mark
TUN_LOG_MARK=$EGD_LOG_MARK
python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --target echo.test:7000 -n "$N_TUNNELS" \
    --chunk 2048 --interval 0.1 --min-rounds 20 --until "$T/tunnels.stop" \
    --opened "$T/tunnels.open" --out "$T/tunnels.json" --timeout 80 2>"$T/tunnels.err" &
TUN_PID=$!
for ((i = 0; i < 300; i++)); do
    [ -f "$T/tunnels.open" ] && break
    kill -0 "$TUN_PID" 2>/dev/null || break
    sleep 0.1
done
if [ ! -f "$T/tunnels.open" ]; then
    ok 1 "$N_TUNNELS tunnels to echo.test:7000 are open and echo"
    wait "$TUN_PID"
    diag_file "$T/tunnels.err"
    [ -f "$T/tunnels.json" ] && python3 -c 'import json,sys; print("#", json.load(open(sys.argv[1]))["failures"][:5])' "$T/tunnels.json"
    egm_bail "the tunnels run through the reloads"
fi
ok 0 "$N_TUNNELS tunnels to echo.test:7000 are open and echo"
active=$(egd_metric 'egressd_active_connections{sandbox="default"}')
check "metrics: active_connections{sandbox=default} counts the $N_TUNNELS tunnels (got $active)" \
    test "${active:-0}" -ge "$N_TUNNELS"
T_FIRST=$(now)

# -- a file renamed into policy-dir: old.test out, new.test in
ok0=$(reloads ok)
err0=$(reloads error)
new_preset=$(sed -e 's/^old\.test:8000$/new.test:8000/' "$T/policies/test.allow")
put "$T/policies/test.allow" "$new_preset"
RULE_NEW=$(egd_rule new.test)
wait_reloads ok $((ok0 + 1))
ok $? "rename into policy-dir: egressd reloads by itself (policy_reloads_total{result=ok} $ok0 -> $(reloads ok))"
egd_log_mark
check "after the rename: new.test is allowed (200)" test "$(code http://new.test:8000/hello)" = 200
line=$(egd_log_wait 'l["host"] == "new.test"')
ok_json "after the rename: new.test logged allow by $RULE_NEW" "$line" \
    "l['decision'] == 'allow' and l['rule'] == '$RULE_NEW'"
check "after the rename: old.test is denied (403)" test "$(code http://old.test:8000/hello)" = 403
line=$(egd_log_wait 'l["host"] == "old.test"')
ok_json "after the rename: old.test logged deny not_allowed" "$line" \
    "l['decision'] == 'deny' and l['reason'] == 'not_allowed'"

# -- SIGHUP: hup.allow (outside policy-dir) gains hup.test
put "$T/hup/hup.allow" '# rules that SIGHUP brings in
hup.test:8000'
sleep 1
check "hup.allow changed behind the symlink: no reload without SIGHUP, hup.test still 403" \
    test "$(reloads ok)/$(code http://hup.test:8000/hello)" = "$((ok0 + 1))/403"
kill -HUP "$EGD_PID"
wait_reloads ok $((ok0 + 2))
ok $? "SIGHUP: egressd reloads (policy_reloads_total{result=ok} -> $(reloads ok))"
egd_log_mark
check "after SIGHUP: hup.test is allowed (200)" test "$(code http://hup.test:8000/hello)" = 200
line=$(egd_log_wait 'l["host"] == "hup.test"')
ok_json "after SIGHUP: hup.test logged allow by hup.allow:2" "$line" \
    "l['decision'] == 'allow' and l['rule'] == 'hup.allow:2'"

# -- a broken file renamed in: the policy in force stays
egm_err_mark
broken=$(sed -e 's/^new\.test:8000$/old.test:8000/' "$T/policies/test.allow")
broken="$broken
a.test:70000"
BAD_LINE=$(printf '%s\n' "$broken" | wc -l)
put "$T/policies/test.allow" "$broken"
wait_reloads error $((err0 + 1))
ok $? "broken file renamed in: the reload fails (policy_reloads_total{result=error} $err0 -> $(reloads error))"
check "broken file: egressd's stderr names test.allow:$BAD_LINE" err_names "test\\.allow:$BAD_LINE"
egm_err_since | grep -E 'test\.allow' | head -n 3 | sed 's/^/#   /'
codes="$(code http://new.test:8000/hello) $(code http://old.test:8000/hello) $(code http://hup.test:8000/hello)"
check "broken file: the previous policy stays (new.test 200, old.test 403, hup.test 200; got $codes)" \
    test "$codes" = "200 403 200"
check "broken file: reloads{ok} did not move" test "$(reloads ok)" = $((ok0 + 2))

# -- the file fixed, then hup.allow broken and SIGHUP
put "$T/policies/test.allow" "$new_preset"
wait_reloads ok $((ok0 + 3))
ok $? "the fixed file renamed in: reloaded"
egm_err_mark
put "$T/hup/hup.allow" '# rules that SIGHUP brings in
hup.test:8000
~(unclosed'
kill -HUP "$EGD_PID"
wait_reloads error $((err0 + 2))
ok $? "SIGHUP with a broken hup.allow: the reload fails (reloads{error} -> $(reloads error))"
check "SIGHUP, broken hup.allow: egressd's stderr names hup.allow:3" err_names 'hup\.allow:3'
egm_err_since | grep -E 'hup\.allow' | head -n 3 | sed 's/^/#   /'
codes="$(code http://new.test:8000/hello) $(code http://old.test:8000/hello) $(code http://hup.test:8000/hello)"
check "SIGHUP, broken hup.allow: the previous policy stays (200 403 200; got $codes)" \
    test "$codes" = "200 403 200"
put "$T/hup/hup.allow" '# rules that SIGHUP brings in
hup.test:8000'
kill -HUP "$EGD_PID"
wait_reloads ok $((ok0 + 4))
ok $? "hup.allow fixed, SIGHUP: reloaded"
T_LAST=$(now)

# -- the tunnels: every one lived through all of it
touch "$T/tunnels.stop"
wait "$TUN_PID"
rc=$?
ok $rc "tunnels: all $N_TUNNELS completed, every byte echoed back (exit $rc)"
if [ $rc -ne 0 ]; then
    diag_file "$T/tunnels.err"
    python3 -c 'import json,sys; [print("#  ", f) for f in json.load(open(sys.argv[1]))["failures"][:8]]' \
        "$T/tunnels.json" 2>/dev/null
fi
check "tunnels: each was open before the first reload and closed after the last" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
ts = o["tunnels"]
sys.exit(0 if len(ts) == o["n"] and all(t["opened"] and t["opened"] < t0 and t["last"] > t1 for t in ts) else 1)' \
    "$T/tunnels.json" "$T_FIRST" "$T_LAST"
EGD_LOG_MARK=$TUN_LOG_MARK
lines=$(egm_log_lines 'l["host"] == "echo.test"')
python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
ls = json.loads(sys.argv[2])
by_port = {int(l["src"].rsplit(":", 1)[1]): l for l in ls}
bad = []
for t in o["tunnels"]:
    l = by_port.get(t["port"])
    if (l is None or l["decision"] != "allow" or l["rule"] != sys.argv[3] or l["mode"] != "connect"
            or l["bytes_up"] != t["sent"] or l["bytes_down"] != t["recv"]):
        bad.append((t, l))
for t, l in bad[:3]:
    print("# tunnel %s\n#   line %s" % (json.dumps(t), json.dumps(l)), file=sys.stderr)
sys.exit(0 if len(ls) == o["n"] and not bad and len(o["tunnels"]) == o["n"] else 1)' \
    "$T/tunnels.json" "$lines" "$RULE_ECHO" 2>"$T/tunnels.check"
ok $? "tunnels: one access-log line each, allow by $RULE_ECHO, bytes_up/bytes_down equal to what each sent/got"
diag_file "$T/tunnels.check" 8
python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
ts = o["tunnels"]
print("# tunnels: %d, %d rounds and %d KiB each way per tunnel at least, %.1f s the longest" % (
    len(ts), min(t["rounds"] for t in ts), min(t["sent"] for t in ts) // 1024,
    max(t["closed"] - t["opened"] for t in ts if t.get("closed"))))' "$T/tunnels.json" 2>/dev/null

# ================================================================ restart
check "admin: PUT sandbox 401 (dave, 127.0.0.2)" egd_put 401 \
    '{"id":"401","name":"agent-dave-1","owner":"dave","addresses":["127.0.0.2"],"policy":"test"}'
check "admin: PUT sandbox 402 (erin, 127.0.0.3, token, + extra.test:8000)" egd_put 402 \
    '{"id":"402","name":"agent-erin-1","owner":"erin","addresses":["127.0.0.3"],"policy":"test","allow":["extra.test:8000"],"token":"t0ken"}'
egd_stop
rc=$?
ok $rc "restart: egressd exits 0 on SIGTERM (status $rc)"
egd_start || egm_bail "restart: egressd starts again"
ok 0 "restart: egressd starts again"
got=$(egd_admin GET /v1/sandboxes)
ok_json "restart: GET /v1/sandboxes shows 401 (dave, 127.0.0.2) and 402 (erin, 127.0.0.3, extra.test:8000)" \
    "{\"s\": $got}" '{b["id"]: (b.get("owner"), b.get("addresses"), b.get("allow") or []) for b in (l["s"] if isinstance(l["s"], list) else l["s"].get("sandboxes", []))} == {"401": ("dave", ["127.0.0.2"], []), "402": ("erin", ["127.0.0.3"], ["extra.test:8000"])}'
egd_log_mark
check "restart: a request from 127.0.0.2 is answered" test "$(code http://a.test:8000/hello --interface 127.0.0.2)" = 200
line=$(egd_log_wait 'l["src"].startswith("127.0.0.2:")')
ok_json "restart: logged as sandbox 401, owner dave" "$line" \
    'l["sandbox"] == "401" and l["owner"] == "dave" and l["decision"] == "allow"'
check "restart: extra.test from 127.0.0.3 is answered (the binding's own line)" \
    test "$(code http://extra.test:8000/hello --interface 127.0.0.3)" = 200
line=$(egd_log_wait 'l["src"].startswith("127.0.0.3:")')
ok_json "restart: logged as sandbox 402, owner erin, rule 'sandbox 402:1'" "$line" \
    'l["sandbox"] == "402" and l["owner"] == "erin" and l["decision"] == "allow" and l["rule"] == "sandbox 402:1"'
check "restart: the token of 402 still identifies it (Proxy-Authorization from 127.0.0.1)" \
    test "$(egd_curl -o /dev/null -w '%{http_code}' -x "http://402:t0ken@$EGD_PROXY" http://extra.test:8000/hello)" = 200
line=$(egd_log_wait 'l["src"].startswith("127.0.0.1:") and l["host"] == "extra.test"')
ok_json "restart: logged as sandbox 402, owner erin" "$line" 'l["sandbox"] == "402" and l["owner"] == "erin"'

# ================================================================ SIGUSR1
# Each request comes from a source address of its own (127.0.0.4, .5, .6),
# which tells its line apart.
egd_log_mark
code http://a.test:8000/hello --interface 127.0.0.4 >/dev/null
egd_log_wait 'l["src"].startswith("127.0.0.4:")' >/dev/null
mv "$T/access.log" "$T/access.log.1"
code http://a.test:8000/hello --interface 127.0.0.5 >/dev/null
# in_log FILE SRC: FILE has a line whose src is SRC:port (waits 3 s).
in_log() {
    python3 - "$1" "$2" <<'EOF'
import json, sys, time
end = time.monotonic() + 3
while time.monotonic() < end:
    try:
        for raw in open(sys.argv[1]).read().split("\n")[:-1]:
            if json.loads(raw)["src"].startswith(sys.argv[2] + ":"):
                sys.exit(0)
    except (FileNotFoundError, ValueError):
        pass
    time.sleep(0.05)
sys.exit(1)
EOF
}
check "SIGUSR1: before it, a line still goes to the renamed file (still open)" in_log "$T/access.log.1" 127.0.0.5
kill -USR1 "$EGD_PID"
sleep 0.5
code http://a.test:8000/hello --interface 127.0.0.6 >/dev/null
check "SIGUSR1: the next line lands in a new access.log" in_log "$T/access.log" 127.0.0.6
check "SIGUSR1: ... and not in the renamed file" sh -c '! grep -q "\"src\":\"127.0.0.6:" "$1"' sh "$T/access.log.1"

# ================================================================ drain
egd_stop
rc=$?
ok $rc "egressd exits 0 on SIGTERM (status $rc)"
egd_start 'timeout-drain 3s' || egm_bail "egressd starts with timeout-drain 3s"
rm -f "$T/drain.open" "$T/drain.stop"
egd_log_mark
python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --target echo.test:7000 -n 1 --interval 0.05 \
    --min-rounds 5 --until "$T/drain.stop" --opened "$T/drain.open" --out "$T/drain.json" --timeout 20 \
    2>"$T/drain.err" &
DR_PID=$!
for ((i = 0; i < 100; i++)); do [ -f "$T/drain.open" ] && break; sleep 0.05; done
t_term=$(now)
kill -TERM "$EGD_PID"
sleep 0.5
egd_curl -o /dev/null -x "$P" http://a.test:8000/hello 2>/dev/null
rc=$?
ok $((rc != 7)) "drain: a new connection is refused (curl exit 7; got $rc)"
kill -0 "$EGD_PID" 2>/dev/null
ok $? "drain: egressd is still running for the open tunnel 0.5 s after SIGTERM"
sleep 0.7
touch "$T/drain.stop"
wait "$DR_PID"
ok $? "drain: the tunnel open at SIGTERM completes, every byte echoed back"
check "drain: its rounds went on after SIGTERM" python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["tunnels"][0]
sys.exit(0 if t["last"] > float(sys.argv[2]) + 1 else 1)' "$T/drain.json" "$t_term"
for ((i = 0; i < 60; i++)); do kill -0 "$EGD_PID" 2>/dev/null || break; sleep 0.1; done
t_exit=$(now)
wait "$EGD_PID"
rc=$?
EGD_PID=
ok $rc "drain: egressd exits 0 once the tunnel is done (status $rc)"
took=$(secs "$t_term" "$t_exit")
check "drain: ... within timeout-drain of the SIGTERM (took $took s)" lt "$took" 3.5
line=$(egd_log_wait 'l["host"] == "echo.test"')
ok_json "drain: the tunnel is logged with the bytes it carried" "$line" \
    "l['decision'] == 'allow' and l['bytes_up'] == $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tunnels"][0]["sent"])' "$T/drain.json") and l['bytes_up'] == l['bytes_down']"

# a tunnel that does not finish is closed when timeout-drain ends
egd_start 'timeout-drain 3s' || egm_bail "egressd starts again with timeout-drain 3s"
rm -f "$T/drain.open" "$T/drain.stop"
python3 "$EGD_DIR/tunnels.py" run --proxy "$EGD_PROXY" --target echo.test:7000 -n 1 --interval 0.05 \
    --min-rounds 5 --until "$T/drain.stop" --opened "$T/drain.open" --out "$T/drain2.json" --timeout 20 \
    2>"$T/drain.err" &
DR_PID=$!
for ((i = 0; i < 100; i++)); do [ -f "$T/drain.open" ] && break; sleep 0.05; done
t_term=$(now)
kill -TERM "$EGD_PID"
for ((i = 0; i < 100; i++)); do kill -0 "$EGD_PID" 2>/dev/null || break; sleep 0.1; done
t_exit=$(now)
wait "$EGD_PID"
rc=$?
EGD_PID=
took=$(secs "$t_term" "$t_exit")
ok $rc "drain: with a tunnel that never ends, egressd exits 0 (status $rc)"
check "drain: ... when timeout-drain ends (2.8 s to 4.5 s after SIGTERM; took $took s)" \
    awk -v x="$took" 'BEGIN { exit !(x >= 2.8 && x < 4.5) }'
wait "$DR_PID"
check "drain: that tunnel was closed by egressd (the client saw it end)" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))
sys.exit(0 if o["completed"] == 0 and o["failures"] else 1)' "$T/drain2.json"
egd_no_sanitizer_report
tap_end
