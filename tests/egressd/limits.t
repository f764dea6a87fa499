#!/usr/bin/env bash
# limits.t - egressd's timeouts and per-sandbox limits, each seen end to end:
# timeout-idle closes a quiet tunnel, max-tunnel-life a busy one,
# timeout-connect gives up on an origin that never answers the SYN (then
# 504 connection_timeout), max-conns-per-sandbox refuses a third tunnel
# with 429 and lets one in again once one closed, quota-bytes-per-sandbox
# cuts a download where the quota ends and refuses requests after.  Each with its log line.  Last, egressd
# out of descriptors: it pauses its accepts instead of spinning, and serves
# again once descriptors are free.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.22 slow.test
egd_allow 'slow.test:4443'
egd_origin --banner 127.0.0.20:22 a.test || bail "the origins start"
egd_start 'timeout-idle 1s' 'max-tunnel-life 3s' 'timeout-connect 1s' \
    'max-conns-per-sandbox 2' 'quota-bytes-per-sandbox 300k' || bail "egressd starts"

SSH='send:CONNECT ssh.test:22 HTTP/1.1\r\nHost: ssh.test:22\r\n\r\n'
S=$T/status
# secs FILE: the seconds of rawclient's status line; event FILE: its event.
secs() { awk '{ print $2 }' "$1"; }
event() { awk '{ print $1 }' "$1"; }
within() { python3 -c 'import sys; v = float(sys.argv[1]); sys.exit(not (float(sys.argv[2]) <= v <= float(sys.argv[3])))' "$@"; }

# --- timeout-idle 1s: a tunnel nobody speaks on is closed.
egd_log_mark
raw --timeout 6 --status "$S.idle" "$EGD_PROXY" "$SSH" 'expect:SSH-2.0-test\r\n' eof >/dev/null 2>&1
check "idle tunnel: egressd closes it (event $(event "$S.idle") after $(secs "$S.idle") s, wanted 1..2.9 s)" \
    within "$(secs "$S.idle")" 0.9 2.9
egd_log_ok "idle tunnel: logged allow, reason timeout" 'l["host"] == "ssh.test"' \
    'l["decision"] == "allow" and l["reason"] == "timeout" and l["bytes_down"] >= 14'

# --- max-tunnel-life 3s: a tunnel that keeps talking is closed anyway.
egd_log_mark
raw --timeout 10 --status "$S.life" "$EGD_PROXY" "$SSH" 'expect:SSH-2.0-test\r\n' \
    'drip:0.25:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' >/dev/null 2>&1
check "busy tunnel: closed at its life's end (event $(event "$S.life") after $(secs "$S.life") s, wanted 2.9..4.5 s)" \
    within "$(secs "$S.life")" 2.9 4.5
egd_log_ok "busy tunnel: logged reason timeout, the dripped bytes counted" 'l["host"] == "ssh.test"' \
    'l["reason"] == "timeout" and l["bytes_up"] >= 10'

# --- timeout-connect 1s: SYNs to slow.test are dropped.
nft -f - <<EOF || bail "nftables: drop SYNs to 127.0.0.22"
table ip egdlimits {
    chain out {
        type filter hook output priority 0;
        ip daddr 127.0.0.22 tcp dport 4443 drop
    }
}
EOF
egd_log_mark
R=$T/slow.out
raw --timeout 6 --out "$R" --status "$S.slow" "$EGD_PROXY" \
    'send:CONNECT slow.test:4443 HTTP/1.1\r\nHost: slow.test:4443\r\n\r\n' head >/dev/null 2>&1
check_resp "origin that never answers: 504, Proxy-Status: egressd; error=connection_timeout" "$R" \
    'r[0]["status"] == 504 and "x-egress-deny" not in r[0]["h"] and r[0]["h"].get("proxy-status") == "egressd; error=connection_timeout"'
check "origin that never answers: the 504 came after timeout-connect ($(secs "$S.slow") s, wanted 0.9..2.5)" \
    within "$(secs "$S.slow")" 0.9 2.5
egd_log_ok "origin that never answers: logged allow, reason timeout" 'l["host"] == "slow.test"' \
    'l["decision"] == "allow" and l["reason"] == "timeout" and l["status"] == 504 and l["upstream"] == "127.0.0.22:4443"'
nft delete table ip egdlimits

# --- max-conns-per-sandbox 2: two tunnels held, a third is refused.
egd_log_mark
held=()
for i in 1 2; do
    raw --timeout 6 --status "$S.held$i" "$EGD_PROXY" "$SSH" 'expect:SSH-2.0-test\r\n' \
        'drip:0.2:xxxxxxxxxx' >/dev/null 2>&1 &
    held+=($!)
done
sleep 0.7
R=$T/third.out
raw --timeout 4 --out "$R" "$EGD_PROXY" \
    'send:CONNECT a.test:4443 HTTP/1.1\r\nHost: a.test:4443\r\n\r\n' head >/dev/null 2>&1
check_resp "two tunnels held: a third connection of the same sandbox gets 429, X-Egress-Deny: limit" \
    "$R" 'r[0]["status"] == 429 and r[0]["h"].get("x-egress-deny") == "limit"'
egd_log_ok "the third: logged deny limit" 'l["status"] == 429' \
    'l["decision"] == "deny" and l["reason"] == "limit" and l["sandbox"] == "default"'
wait "${held[@]}"
check "the two held tunnels ran to their end ($(event "$S.held1") $(event "$S.held2"))" \
    test "$(event "$S.held1") $(event "$S.held2")" = "done done"
# (egressd sees the clients' close a moment after they made it)
for _ in $(seq 20); do
    [ "$(egd_metric 'egressd_active_connections{sandbox="default"}')" = 0 ] && break
    sleep 0.1
done
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://a.test:$EGD_HTTP_PORT/hello")
check "once they closed, a new connection is let in again (got $code)" test "$code" = 200

# --- quota-bytes-per-sandbox 300k (what came before counts too).
egd_log_mark
n1=$(egd_curl -x "http://$EGD_PROXY" "http://a.test:$EGD_HTTP_PORT/bytes/200000" | wc -c)
check "under the quota: 200 000 bytes come through (got $n1)" test "$n1" = 200000
egd_log_mark
n2=$(egd_curl -x "http://$EGD_PROXY" "http://a.test:$EGD_HTTP_PORT/bytes/150000" 2>/dev/null | wc -c)
check "under the quota when it starts, over it midway: the download is cut (got $n2 of 150 000 bytes)" \
    test "$n2" -gt 0 -a "$n2" -lt 150000
egd_log_ok "the cut download: logged reason limit, with the bytes that got through" 'l["host"] == "a.test"' \
    'l["reason"] == "limit" and l["status"] == 200 and l["bytes_down"] < 150000'
egd_log_mark
code=$(egd_curl -x "http://$EGD_PROXY" -o "$T/q.body" -D "$T/q.head" -w '%{http_code}' \
    "http://a.test:$EGD_HTTP_PORT/hello")
check "over the quota: 429 (got $code)" test "$code" = 429
check "over the quota: X-Egress-Deny: limit, and the body says why" \
    sh -c "grep -qi '^x-egress-deny: limit' '$T/q.head' && grep -q 'quota' '$T/q.body'"
egd_log_ok "over the quota: logged deny limit" 'l["status"] == 429' \
    'l["decision"] == "deny" and l["reason"] == "limit" and l["host"] == "a.test"'

# --- out of descriptors: egressd pauses its accepts (a warning, no spin)
# and serves again once descriptors are free.  Its open-files limit is
# lowered to what it holds plus 6, then 20 clients connect and wait.
nfd() { find "/proc/$EGD_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
cpu() { awk '{ print $14 + $15 }' "/proc/$EGD_PID/stat"; }
old_limit=$(prlimit --pid "$EGD_PID" --nofile --output SOFT,HARD --noheadings | awk '{ print $1 ":" $2 }')
n0=$(nfd)
prlimit --pid "$EGD_PID" --nofile=$((n0 + 6)):"${old_limit#*:}" || bail "prlimit on egressd"
py - "$EGD_PROXY" "$T/emfile.go" >"$T/emfile.out" 2>&1 <<'EOF' &
import os, socket, sys, time
host, _, port = sys.argv[1].rpartition(":")
socks = [socket.create_connection((host, int(port)), timeout=5) for _ in range(20)]
print("connected", len(socks), flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
for s in socks:
    s.close()
EOF
holder=$!
for _ in $(seq 50); do grep -q connected "$T/emfile.out" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
c0=$(cpu)
sleep 1
c1=$(cpu)
check "out of descriptors: egressd says so ('pausing accepts for 250 ms' in its log)" \
    grep -q 'pausing accepts for 250 ms' "$T/egressd.err"
check "... and does not spin: $((c1 - c0)) clock ticks of CPU in 1 s (at most 20)" test $((c1 - c0)) -le 20
touch "$T/emfile.go"
wait "$holder"
prlimit --pid "$EGD_PID" --nofile="$old_limit"
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://a.test:$EGD_HTTP_PORT/hello")
check "descriptors free again: a new request is answered (the quota's 429; got $code)" test "$code" = 429

egd_finish
tap_end
