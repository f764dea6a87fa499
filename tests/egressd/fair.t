#!/usr/bin/env bash
# fair.t - one sandbox cannot use up what the others need: connections it
# had refused (429) stop counting toward max-conns as soon as the answer is
# written, not when the client goes; sources without a binding each have
# their own limits instead of one shared `default` bucket.  (The byte quota
# cut mid-request is in limits.t, name lookups in starve.t.)
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_origin --banner 127.0.0.20:22 a.test || bail "the origins start"
egd_start 'max-conns 4' 'max-conns-per-sandbox 1' || bail "egressd starts"

SSH='send:CONNECT ssh.test:22 HTTP/1.1\r\nHost: ssh.test:22\r\n\r\n'
# tunnel SOURCE NAME: a tunnel from SOURCE held for 4 s in the background;
# its status line in $T/NAME.status, what it got in $T/NAME.out.
tunnel() {
    py "$EGD_DIR/rawclient.py" --source "$1" --timeout 8 --status "$T/$2.status" --out "$T/$2.out" \
        "$EGD_PROXY" "$SSH" 'expect:SSH-2.0-test\r\n' sleep:4 >/dev/null 2>&1 &
    BG+=($!)
}
# refused SOURCE NAME: a CONNECT from SOURCE that reads its answer and then
# keeps its socket open (3 s), so egressd lingers on it.
refused() {
    py "$EGD_DIR/rawclient.py" --source "$1" --timeout 8 --out "$T/$2.out" "$EGD_PROXY" \
        'send:CONNECT a.test:4443 HTTP/1.1\r\nHost: a.test:4443\r\n\r\n' head sleep:3 \
        >/dev/null 2>&1 &
    BG+=($!)
}
# wait_bg: wait for the clients started in the background.
wait_bg() {
    wait "${BG[@]}"
    BG=()
}
BG=()
status_of() { py "$EGD_DIR/rawclient.py" parse "$1" 'r[0]["status"]' 2>/dev/null; }

# --- 429s that linger hold nobody up.
egd_put 901 '{"addresses":["127.0.0.90"],"policy":"test"}' >/dev/null || bail "bind sandbox 901"
tunnel 127.0.0.90 held
sleep 0.5
egd_log_mark
for i in 1 2 3; do refused 127.0.0.90 "r$i"; done
for _ in $(seq 50); do
    [ "$(egd_log_count 'l["status"] == 429')" = 3 ] && break
    sleep 0.05
done
check "sandbox 901 at its limit of 1: three more connections got 429 (they linger, not reading on)" \
    test "$(egd_log_count 'l["status"] == 429 and l["sandbox"] == "901"')" = 3
R=$T/other.out
raw --timeout 4 --out "$R" "$EGD_PROXY" 'send:CONNECT a.test:4443 HTTP/1.1\r\nHost: a.test:4443\r\n\r\n' \
    head >/dev/null 2>&1
check_resp "while those three linger, another sandbox still gets its 200 (max-conns 4: 1 tunnel + 1)" \
    "$R" 'r[0]["status"] == 200'
wait_bg
codes="$(status_of "$T/r1.out") $(status_of "$T/r2.out") $(status_of "$T/r3.out")"
check "  the three had their 429 ($codes)" test "$codes" = "429 429 429"

# --- two sources without a binding: each its own max-conns-per-sandbox.
tunnel 127.0.0.91 s1
sleep 0.5
tunnel 127.0.0.92 s2
sleep 0.5
egd_log_mark
R=$T/third.out
py "$EGD_DIR/rawclient.py" --source 127.0.0.91 --timeout 4 --out "$R" "$EGD_PROXY" \
    'send:CONNECT a.test:4443 HTTP/1.1\r\nHost: a.test:4443\r\n\r\n' head >/dev/null 2>&1
check_resp "a second tunnel of the first source is refused, 429 limit" "$R" \
    'r[0]["status"] == 429 and r[0]["h"].get("x-egress-deny") == "limit"'
egd_log_ok "  logged for the default policy, from that source" 'l["status"] == 429' \
    'l["sandbox"] == "default" and l["reason"] == "limit" and l["src"].startswith("127.0.0.91:")'
wait_bg
for s in s1 s2; do
    check "unbound source $s: its tunnel was up (the banner came) and ran to its end ($(awk '{ print $1 }' "$T/$s.status"))" \
        sh -c "grep -q 'SSH-2.0-test' '$T/$s.out' && [ \"\$(awk '{ print \$1 }' '$T/$s.status')\" = done ]"
done

egd_finish
tap_end
