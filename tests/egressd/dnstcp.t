#!/usr/bin/env bash
# dnstcp.t - the policy DNS server's TCP side against hostile clients
# (dnsflood.py): four connections that send queries and never read their
# answers leave egressd's memory bounded and are closed, and meanwhile
# another sandbox's query over TCP is answered.
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

egd_finish
tap_end
