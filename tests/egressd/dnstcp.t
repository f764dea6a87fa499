#!/usr/bin/env bash
# dnstcp.t - the policy DNS server's TCP side against hostile clients
# (dnsflood.py): four connections that send queries and never read their
# answers leave egressd's memory bounded and are closed; a source without
# a binding holds no connection; one sandbox's connections that never send
# a whole query hold no more than their share and go at the first-query
# deadline; many sandboxes' idle connections filling a worker's table make
# room for a new one.  Through all of it another sandbox's query over TCP
# is answered.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

# In a sanitizer build freed memory waits in ASan's quarantine (256 MiB by
# default) before it is reused, which RSS would show whatever egressd
# keeps; soak.t does the same.
if grep -q AddressSanitizer "$EGD_BIN" 2>/dev/null || ldd "$EGD_BIN" 2>/dev/null | grep -q libasan; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
    diag "sanitizer build; ASAN_OPTIONS=$ASAN_OPTIONS"
fi

DNS=127.0.0.1:5353
FLOOD_ADDR=127.0.0.5  # sandbox "flood"
UNBOUND=127.0.0.6     # no binding
QUIET_ADDR=127.0.0.7  # sandbox "quiet", the one that must keep getting answers
RSS_MAX_KIB=40960     # growth allowed while the attack runs
FL=(py "$EGD_DIR/dnsflood.py")

egd_start "dns $DNS" || egm_bail "egressd starts with a dns listener"
bind() { # bind ID ADDR...: a binding to the test preset
    local addrs
    addrs=$(printf '"%s",' "${@:2}")
    egd_put "$1" "{\"id\":\"$1\",\"addresses\":[${addrs%,}],\"policy\":\"test\"}" >/dev/null
}
bind flood "$FLOOD_ADDR" || egm_bail "PUT sandbox flood"
bind quiet "$QUIET_ADDR" || egm_bail "PUT sandbox quiet"

# quiet_ok TEXT: sandbox quiet asks a.test over TCP (3 tries of 3 s, a new
# connection each, as a stub resolver does) and gets 127.0.0.16.
quiet_ok() {
    local out
    out=$("${FL[@]}" resolve --server "$DNS" --source "$QUIET_ADDR" --tcp --timeout 3 --tries 3 \
        --names a.test)
    ok_json "$1" "$out" 'l["rcodes"]["a.test"] == 0 and l["addrs"]["a.test"] == ["127.0.0.16"]'
}
quiet_ok "over TCP, sandbox quiet resolves a.test"

# --- four connections that send queries and never read an answer
out=$("${FL[@]}" noread --server "$DNS" --source "$FLOOD_ADDR" --conns 4 --seconds 30 --pid "$EGD_PID")
diag "noread: $out"
ok_json "four connections that never read: egressd's RSS grew by at most $((RSS_MAX_KIB / 1024)) MiB" \
    "$out" "l['rss_max'] - l['rss0'] <= $RSS_MAX_KIB"
ok_json "  and egressd closed all four" "$out" 'l["closed"] == 4'
quiet_ok "  meanwhile and after, sandbox quiet resolves over TCP"

# hold NAME SOURCES CONNS: dnsflood.py hold in the background (a byte every
# second, never a whole query), its result in $T/NAME.json; returns once
# every connect is done.
hold() {
    rm -f "$T/$1.ready"
    "${FL[@]}" hold --server "$DNS" --source "$2" --conns "$3" --dribble 1 --seconds 20 \
        --ready "$T/$1.ready" >"$T/$1.json" 2>"$T/$1.err" &
    HOLD_PID=$!
    for _ in $(seq 300); do
        [ -s "$T/$1.ready" ] && return 0
        kill -0 "$HOLD_PID" 2>/dev/null || break
        sleep 0.1
    done
    diag "hold $1 did not get its connections open:"
    diag_file "$T/$1.err"
    return 1
}
# summary NAME: the result without its timeline
summary() { py -c 'import json, sys; l = json.load(open(sys.argv[1])); l.pop("open"); print(json.dumps(l))' "$T/$1.json"; }
# most_open NAME: the most connections held open at once, 1 s after the
# connects or later
most_open() { py -c 'import json, sys; print(max([n for t, n in json.load(open(sys.argv[1]))["open"] if t >= 1] or [0]))' "$T/$1.json"; }

# --- a source without a binding: 600 connections, a byte each
hold unbound "$UNBOUND" 600 || egm_bail "600 connections from a source without a binding"
quiet_ok "600 connections from a source without a binding: sandbox quiet still resolves over TCP"
wait "$HOLD_PID"
diag "unbound: $(summary unbound)"
n=$(most_open unbound)
ok $((n != 0)) "  egressd held none of them ($n open after a second)"

# --- one sandbox: 600 connections, a byte each, never a whole query
hold flood "$FLOOD_ADDR" 600 || egm_bail "600 connections from sandbox flood"
quiet_ok "600 connections from sandbox flood: sandbox quiet still resolves over TCP"
wait "$HOLD_PID"
diag "flood: $(summary flood)"
n=$(most_open flood)
ok $((n > 32)) "  sandbox flood held at most 16 per worker ($n open after a second)"
ok_json "  and none stayed past the first-query deadline" "$(cat "$T/flood.json")" \
    'l["all_closed_s"] is not None and l["all_closed_s"] < 15'

# --- 48 sources of three sandboxes: 700 connections, more than the two
# workers' tables hold (256 each), no source over its share
crowd=()
for s in 1 2 3; do
    addrs=()
    for i in $(seq 1 16); do addrs+=("127.0.1.$(((s - 1) * 16 + i))"); done
    bind "crowd$s" "${addrs[@]}" || egm_bail "PUT sandbox crowd$s"
    crowd+=("${addrs[@]}")
done
hold crowd "$(IFS=,; echo "${crowd[*]}")" 700 || egm_bail "700 connections from 48 sources"
quiet_ok "700 idle connections filling both workers' tables: sandbox quiet still resolves over TCP"
wait "$HOLD_PID"
diag "crowd: $(summary crowd)"
n=$(most_open crowd)
ok $((n > 512)) "  egressd held at most 256 per worker ($n open after a second)"

egd_finish
tap_end
