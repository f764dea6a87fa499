#!/usr/bin/env bash
# upgrade.t - egressd upgraded in place (egressctl upgrade): the running
# process starts the binary now on disk, hands it its listening sockets
# (proxy, transparent TLS and HTTP, DNS over UDP and TCP, metrics, admin)
# and drains.
#
#   - a successor that cannot start (a config that does not check, a
#     binary that exits, one killed by a signal) leaves the old process
#     serving, and egressctl says why;
#   - a binding deleted in the successor cuts the draining process's
#     tunnel of that sandbox too; quota counts go on where they were;
#   - under load (egress-load on CONNECT, transparent TLS and HTTP, 200
#     long tunnels, a server-sent-events stream, dns-load on the DNS
#     server), five upgrades in a row: no load generator sees an error
#     (refused, reset, a held tunnel dropped), the stream is whole, no DNS
#     answer is lost, and every exchange has its access-log line.
#
# The binary upgraded is a copy in the test's directory, so the failing
# starts can replace it as a package upgrade replaces /usr/sbin/egressd.
. "$(dirname "$0")/../tap.sh"
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup
# successors are not this shell's children: every egressd of this test
# directory goes at the exit too
trap 'pkill -KILL -f "^$T/egressd -c" 2>/dev/null; egd_cleanup' EXIT

LOAD=$BUILD_DIR/bench/egress-load
SINK=$BUILD_DIR/bench/egress-sink
DNSLOAD=$BUILD_DIR/bench/dns-load
CTL=$BUILD_DIR/proxy/egressctl
DNS=127.0.0.1:5300
SECONDS_LOAD=14

egd_host 127.0.0.20 a.test
egd_host 127.0.0.21 b.test
egd_allow a.test "b.test:$EGD_HTTPS_PORT,$EGD_HTTP_PORT"
egd_origin a.test
cp "$BUILD_DIR/proxy/egressd" "$T/egressd"
EGD_BIN=$T/egressd
# systemd's side of Type=notify, as sd_notify(3) describes it: one line
# per datagram (newlines as |), a BARRIER=1's descriptor closed at once
"$EGD_PY" -S -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
out = open(sys.argv[2], "a", buffering=1)
while True:
    msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(4 * 4))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            for i in range(0, len(data) - len(data) % 4, 4):
                os.close(int.from_bytes(data[i:i + 4], sys.byteorder))
    out.write(msg.decode().replace("\n", "|") + "\n")
' "$T/notify.sock" "$T/notify.log" &
EGD_PIDS+=($!)
for ((i = 0; i < 50; i++)); do [ -S "$T/notify.sock" ] && break; sleep 0.1; done
export NOTIFY_SOCKET=$T/notify.sock
QUOTA=$((64 << 20))
egd_start "timeout-drain 60s" "dns $DNS" "quota-bytes-per-sandbox $QUOTA" || bail "egressd did not start"

ctl() { "$CTL" -s "$T/admin.sock" "$@"; }
serving_pid() { egd_admin GET /v1/status | py -c 'import json,sys; print(json.load(sys.stdin)["pid"])'; }
# every egressd of this test still running (the first and its successors)
ours() { pgrep -f "^$T/egressd -c" | tr '\n' ' '; }
hello() { egd_curl -sS -m 5 -x "http://$EGD_PROXY" "http://a.test:$EGD_HTTP_PORT/hello"; }

# --- a successor that cannot start leaves the old one serving
first=$(serving_pid)
cp "$T/egressd.conf" "$T/egressd.conf.good"
echo "no-such-directive 1" >>"$T/egressd.conf"
out=$(ctl upgrade 2>&1)
rc=$?
ok $((rc == 0)) "a config that does not check: egressctl upgrade fails (exit $rc)"
check "the failure names the config's line" grep -q "egressd.conf:[0-9]*:.*no-such-directive" <<<"$out"
echo "$out" | sed 's/^/#   /'
check "the old egressd serves on (same pid)" test "$(serving_pid)" = "$first"
check "and proxies" test "$(hello)" = "hello from a.test"
cp "$T/egressd.conf.good" "$T/egressd.conf"

# put_binary FILE: FILE becomes the binary on disk, renamed over it as a
# package upgrade does (the running file cannot be written: ETXTBSY)
put_binary() { cp "$1" "$T/egressd.new" && chmod +x "$T/egressd.new" && mv -f "$T/egressd.new" "$T/egressd"; }
printf '#!/bin/sh\necho "cannot start" >&2\nexit 3\n' >"$T/exits"
put_binary "$T/exits"
out=$(ctl upgrade 2>&1)
rc=$?
ok $((rc == 0)) "a binary that exits at once: egressctl upgrade fails (exit $rc)"
check "the failure gives its exit status" grep -q "exited with status 3" <<<"$out"
printf '#!/bin/sh\nkill -SEGV $$\n' >"$T/crashes"
put_binary "$T/crashes"
out=$(ctl upgrade 2>&1)
ok $(($? == 0)) "a binary killed by a signal: egressctl upgrade fails"
check "the failure names the signal" grep -q "signal 11" <<<"$out"
check "the old egressd serves on after both" test "$(serving_pid)" = "$first"
check "and proxies" test "$(hello)" = "hello from a.test"
put_binary "$BUILD_DIR/proxy/egressd"

# --- revocation and quota reach across the handover
egd_put s1 '{"addresses":["127.0.0.80"],"owner":"ivo","policy":"test"}' >/dev/null
egd_put s2 '{"addresses":["127.0.0.81"],"owner":"ivo","policy":"test"}' >/dev/null
egd_env curl -sS -m 30 --interface 127.0.0.80 -x "http://$EGD_PROXY" \
    "http://a.test:$EGD_HTTP_PORT/slow/60" -o "$T/revoked.out" 2>/dev/null &
revoked_curl=$!
# s2 uses 48 MiB of its 64 MiB quota before the upgrade
q1=0
for _ in 1 2; do
    n=$(egd_curl -s -m 20 --interface 127.0.0.81 -x "http://$EGD_PROXY" -o /dev/null -w '%{size_download}' \
        "http://a.test:$EGD_HTTP_PORT/bytes/$((24 << 20))")
    q1=$((q1 + n))
done
sleep 0.5
out=$(ctl upgrade 2>&1)
ok $? "upgrade with a slow stream open: egressctl upgrade exits 0"
echo "$out" | sed 's/^/#   /'
second=$(serving_pid)
check "a new process serves ($first -> $second)" test "$second" != "$first"
check "systemd was told READY=1 at the start, then MAINPID=$second before a barrier" \
    test "$(cat "$T/notify.log" | tr '\n' ' ')" = "READY=1 MAINPID=$second|READY=1 BARRIER=1 "
check "the old one still runs, draining its stream" kill -0 "$first"
egd_admin DELETE /v1/sandboxes/s1 >/dev/null
wait "$revoked_curl"
rc=$?
got=$(stat -c %s "$T/revoked.out" 2>/dev/null || echo 0)
ok $((rc == 0 || got >= 300)) "deleting s1 in the successor cuts its stream in the draining process (curl $rc, $got of 300 bytes)"
egd_log_mark
q2=$(egd_curl -s -m 20 --interface 127.0.0.81 -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code} %{size_download}' \
     "http://a.test:$EGD_HTTP_PORT/bytes/$((24 << 20))")
check "s2 used $q1 bytes of its $QUOTA-byte quota before the upgrade: 24 MiB more do not fit after it ($q2)" \
    test "${q2#* }" -lt $((24 << 20))
first=$second

# --- with no connection open the predecessor stops at once: the answer
# must still reach egressctl
replaced_s() { egd_admin GET /v1/status | py -c 'import json,sys; print(json.load(sys.stdin)["sandboxes_replaced_s"])'; }
egd_admin PUT /v1/sandboxes '[{"id":"s2","addresses":["127.0.0.81"],"owner":"ivo","policy":"test"}]' >/dev/null
out=$(ctl upgrade 2>&1)
ok $? "upgrade with no connection open: egressctl upgrade exits 0 with the answer ($out)"
first=$(serving_pid)
r=$(replaced_s)
check "the successor carries when the set was last replaced (sandboxes_replaced_s $r, not None)" \
    test "$r" != None -a -n "$r"

# --- five upgrades under load
"$SINK" --listen "127.0.0.21:$EGD_HTTPS_PORT" --reply-bytes 256 >"$T/sink-tls.log" 2>&1 &
EGD_PIDS+=($!)
"$SINK" --listen "127.0.0.21:$EGD_HTTP_PORT" --http --reply-bytes 64 >"$T/sink-http.log" 2>&1 &
EGD_PIDS+=($!)
sleep 0.3
hello_file=${CLIENTHELLO_DIR:-${DATA_DIR:-$TOP/tests/data}/clienthello}/curl.bin
load() {
    local name=$1
    shift
    "$LOAD" --duration "$SECONDS_LOAD" --timeout 10 --label "$name" "$@" >"$T/load-$name.json" 2>"$T/load-$name.err" &
    load_pids+=($!)
}
load_pids=()
# (one slot each: a steady stream of exchanges, one after another)
load connect --mode connect --proxy "$EGD_PROXY" --target "b.test:$EGD_HTTPS_PORT" --conns 1 \
    --hello "$hello_file" --reply-bytes 256
load sni --mode sni --proxy "$EGD_TLS" --target "b.test:$EGD_HTTPS_PORT" --conns 1 \
    --hello "$hello_file" --reply-bytes 256
load http --mode http --proxy "$EGD_PROXY" --target "b.test:$EGD_HTTP_PORT" --conns 1 --reply-bytes 64
load idle --mode idle --proxy "$EGD_PROXY" --target "b.test:$EGD_HTTPS_PORT" --conns 200 --ramp 50 \
    --hello "$hello_file" --reply-bytes 256
"$DNSLOAD" --server "$DNS" --source 127.0.0.1 --name a.test --seconds "$SECONDS_LOAD" --window 2 \
    --timeout 3000 --json >"$T/dns-load.json" 2>"$T/dns-load.err" &
dns_job=$!
egd_curl -sS -N -m 60 -x "http://$EGD_PROXY" "http://a.test:$EGD_HTTP_PORT/sse/40" -o "$T/sse.out" &
sse_job=$!
sleep 2
pids=("$first")
for i in 1 2 3 4 5; do
    out=$(ctl upgrade 2>&1)
    rc=$?
    pids+=("$(serving_pid)")
    ok "$rc" "upgrade $i of 5 under load: egressctl upgrade exits 0 (pid ${pids[-2]} -> ${pids[-1]})"
    [ "$rc" = 0 ] || echo "$out" | sed 's/^/#   /'
    sleep 1.5
done
wait "$sse_job"
ok $? "the server-sent-events stream through five upgrades: curl exits 0"
check "all 40 events came" test "$(grep -c '^data: ' "$T/sse.out")" = 40
wait "$dns_job"
for p in "${load_pids[@]}"; do wait "$p"; done
# every process but the last has drained and gone
for ((i = 0; i < 300; i++)); do
    [ "$(ours | wc -w)" -le 1 ] && break
    sleep 0.2
done
check "every predecessor has drained and exited (left: $(ours))" test "$(ours | wc -w)" = 1

# load_field NAME EXPR: a value of load NAME's JSON line
load_field() { py -c "import json,sys; o=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][0]; print($2)" "$T/load-$1.json"; }
for name in connect sni http idle; do
    n=$(load_field "$name" 'o["total"]')
    e=$(load_field "$name" 'o["error_total"]')
    check "$name load: $n exchanges, no error ($(load_field "$name" 'o["errors"]'))" test "$e" = 0 -a "$n" -gt 0
done
check "idle: all 200 long tunnels were up for the whole run" test "$(load_field idle 'o["total"]')" = 200
lost=$(py -c 'import json,sys; o=json.loads(open(sys.argv[1]).readline()); print(o["lost"], o["answered"])' "$T/dns-load.json")
check "DNS: no query lost through five upgrades (lost, answered: $lost)" test "${lost% *}" = 0 -a "${lost#* }" -gt 0

# log lines: one per exchange of each generator
count_lines() { py -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    try: l = json.loads(line)
    except ValueError: continue
    if eval(sys.argv[2]): n += 1
print(n)' "$T/access.log" "$1"; }
want=$(($(load_field connect 'o["total"]') + $(load_field idle 'o["total"]')))
got=$(count_lines "l.get(\"host\") == \"b.test\" and l.get(\"mode\") == \"connect\"")
check "CONNECT: $got access-log lines for $want exchanges (connect + idle)" test "$got" = "$want"
want=$(load_field sni 'o["total"]')
got=$(count_lines "l.get(\"host\") == \"b.test\" and l.get(\"mode\") == \"tls\"")
check "transparent TLS: $got access-log lines for $want exchanges" test "$got" = "$want"
want=$(load_field http 'o["total"]')
got=$(count_lines "l.get(\"host\") == \"b.test\" and l.get(\"mode\") == \"http\"")
check "HTTP: $got access-log lines for $want requests" test "$got" = "$want"
for name in connect sni http idle; do
    echo "# $(grep -v '^[{]' "$T/load-$name.json" | tail -n 1)"
done
echo "# dns: $(head -c 300 "$T/dns-load.json")"

# --- SIGUSR2 does the same (systemctl kill -s SIGUSR2 egressd)
before=$(serving_pid)
kill -USR2 "$before"
for ((i = 0; i < 100; i++)); do
    now=$(serving_pid)
    [ -n "$now" ] && [ "$now" != "$before" ] && break
    sleep 0.1
done
check "SIGUSR2: a successor serves ($before -> $now)" test -n "$now" -a "$now" != "$before"
check "and proxies" test "$(hello)" = "hello from a.test"
for ((i = 0; i < 100; i++)); do kill -0 "$before" 2>/dev/null || break; sleep 0.1; done
check "the one signalled drains and exits" test ! -e "/proc/$before"

# --- the last one stops as before
last=$(serving_pid)
kill -TERM "$last"
for ((i = 0; i < 150; i++)); do kill -0 "$last" 2>/dev/null || break; sleep 0.1; done
check "the last successor stops on SIGTERM" test ! -e "/proc/$last"
EGD_PID=
egd_no_sanitizer_report "no egressd's stderr (the first and its successors) holds a sanitizer report"
tap_end
