#!/usr/bin/env bash
# kill9.t - egressd killed with SIGKILL at random moments keeps its state
# whole: what it acknowledged is there after the restart, and nothing
# half-written is read.
#
#   - its first start, which makes state-dir/appliance.key, killed within
#     0-60 ms, KILL9_FIRST times: the next start serves, and the key it
#     made is the one every later start uses;
#   - then KILL9_COUNT times: bindings change one admin call after another
#     (killwriter.py: PUT, DELETE, the whole set) and egressd is killed
#     30-400 ms into it.  After each restart its bindings are exactly the
#     acknowledged ones, or those and the one call in flight; the key is
#     unchanged; state-dir holds no temporary file but at most the one the
#     next save replaces.
#
# KILL9_COUNT defaults to 25 (the suite's time); `kill9.t --long` runs the
# 200 kills the issue of durability asks for.
. "$(dirname "$0")/../tap.sh"
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup
KILL9_FIRST=${KILL9_FIRST:-10}
KILL9_COUNT=${KILL9_COUNT:-25}
for a in "$@"; do [ "$a" = --long ] && KILL9_COUNT=200; done
W=$EGD_DIR/killwriter.py

# start_bg: egressd in the background with the test config ($EGD_PID)
start_bg() { "$EGD_BIN" -c "$T/egressd.conf" 2>>"$T/egressd.err" & EGD_PID=$!; }
# ready: the admin socket answers within 10 s
ready() {
    local i
    for ((i = 0; i < 200; i++)); do
        egd_admin GET /v1/status >/dev/null 2>&1 && return 0
        kill -0 "$EGD_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
kill9() { kill -KILL "$EGD_PID" 2>/dev/null; wait "$EGD_PID" 2>/dev/null; EGD_PID=; }
# a random number of milliseconds in [lo, hi), as seconds for sleep
ms() { printf '0.%03d' $(($1 + RANDOM % ($2 - $1))); }
key_sum() { sha256sum "$T/state/appliance.key" 2>/dev/null | cut -c1-16; }

egd_write_config
# --- the first start, killed while it makes its key
bad=0
for ((i = 0; i < KILL9_FIRST; i++)); do
    rm -rf "$T/state" && mkdir -m 700 "$T/state"
    start_bg
    sleep "$(ms 0 60)"
    kill9
    start_bg
    if ! ready; then bad=$((bad + 1)); echo "# start $i after a kill did not serve" >&2; fi
    first=$(key_sum)
    kill9
    start_bg
    ready && [ "$(key_sum)" = "$first" ] && [ -n "$first" ] || bad=$((bad + 1))
    kill9
done
check "$KILL9_FIRST first starts killed within 60 ms: each next start serves with one key that stays" test "$bad" = 0

# --- bindings changing under SIGKILL
rm -rf "$T/state" "$T/model.json" && mkdir -m 700 "$T/state"
start_bg
ready || bail "egressd did not start"
key=$(key_sum)
mismatches=0 no_start=0 key_changed=0 leftovers=0 acked=0 inflight=0
for ((i = 1; i <= KILL9_COUNT; i++)); do
    : >"$T/journal"
    py "$W" write "$T/admin.sock" "$T/journal" "$i" &
    wpid=$!
    sleep "$(ms 30 400)"
    kill9
    wait "$wpid"
    start_bg
    if ! ready; then
        no_start=$((no_start + 1))
        echo "# restart $i did not serve:" >&2
        tail -n 5 "$T/egressd.err" | sed 's/^/#   /' >&2
        break
    fi
    out=$(py "$W" check "$T/admin.sock" "$T/journal" "$T/model.json")
    case $out in
    ok*) ;;
    *) mismatches=$((mismatches + 1)); echo "$out" | sed 's/^/#   /' ;;
    esac
    acked=$((acked + $(sed -n 's/^ok: \([0-9]*\) calls.*/\1/p' <<<"$out")))
    grep -q "one in flight" <<<"$out" && inflight=$((inflight + 1))
    [ "$(key_sum)" = "$key" ] || key_changed=$((key_changed + 1))
    n=$(find "$T/state" -name '.*' -type f | wc -l)
    [ "$n" -le 1 ] || leftovers=$((leftovers + 1))
done
diag "$KILL9_COUNT kills: $acked admin calls acknowledged before them, $inflight kills with a call in flight"
check "every restart after SIGKILL serves ($no_start did not)" test "$no_start" = 0
check "after each of $KILL9_COUNT kills the bindings are the acknowledged ones (or those and the call in flight)" \
    test "$mismatches" = 0
check "the appliance key never changed" test "$key_changed" = 0
check "state-dir never held more than one temporary file" test "$leftovers" = 0
check "the kills landed while calls were in flight (at least one of $KILL9_COUNT)" test "$inflight" -gt 0
egd_finish
tap_end
