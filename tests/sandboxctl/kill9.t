#!/usr/bin/env bash
# tests/sandboxctl/kill9.t - sandboxctl killed with SIGKILL at any moment
# keeps its state whole, against the simulator (PVE 9.1) and two real
# egressd.
#
# KILL9_COUNT times, an operation drawn at random (killops.py: create,
# destroy, extend, access request (some granted at once by access-auto),
# approve, deny) is started and sandboxctl is killed with SIGKILL a random
# moment into it; half of them with one of its Proxmox calls answering 1 s
# late after it took effect (the simulator's slow_answer), so that the kill
# lands between two of its steps.  An operation that ends first (exit 0)
# is acknowledged, and checked with the rest after the next kill.  After
# each kill, once the simulator's tasks have ended:
#   - state-dir's files parse and hold at most one temporary file each;
#   - `sandboxctl doctor` answers, exits 0 and says each repair it made
#     (naming the sandbox); after a repair a second doctor finds nothing;
#   - then the pool, both egressd and state-dir are consistent: every
#     sandbox VM has a whole description and the binding it says in both
#     egressd, its firewall on and every file of its guest setup written
#     (the simulator's record of the calls), every binding its VM, no
#     reservation, no half-approved
#     request, no temporary file; and everything acknowledged is there
#     (sandboxes and their expiry, destroyed ones gone, requests with their
#     state and their grants in the description);
#   - `sandboxctl sync` then changes no binding.
# The figures (kills, operations acknowledged, doctor's repairs by kind)
# are printed as comments.  KILL9_COUNT defaults to 12 (the suite's time);
# `kill9.t --long` runs 200 kills.  Some operations end before their kill:
# the loop gives up after 8 runs a kill wanted.  KILL9_SEED replays the
# draws (not the timings, which follow how long each operation took).
set -u
. "$TOP/tests/sandboxctl/lib.sh"
KILL9_COUNT=${KILL9_COUNT:-12}
for a in "$@"; do [ "$a" = --long ] && KILL9_COUNT=200; done
SEED=${KILL9_SEED:-$RANDOM}
OPS=$TOP/tests/sandboxctl/killops.py

sbx_start 9 || bail "the simulator and both egressd start"
printf '%s\n' "size tiny 1 512" "max-total-memory-mib 100000" "access-auto auto.test:443" |
    sbx_write_config
M=$T/model.json C=$T/repairs.json

# settle: wait (10 s at most) until the simulator runs no task: a task a
# killed sandboxctl started runs on, as in Proxmox.
settle() {
    local i
    for ((i = 0; i < 200; i++)); do
        [ "$(sim_state 'sum(t["status"] == "running" for t in s["tasks"])')" = 0 ] && return 0
        sleep 0.05
    done
    return 1
}
# bindings N FILE: egressd N's bindings (a JSON array) into FILE
bindings() { egressd_api "$1" GET /v1/sandboxes && printf '%s' "$EGD_BODY" >"$2"; }
# tmp_files: the temporary files in state-dir, one a line (each state
# file's is PATH.tmp, which its next write replaces)
tmp_files() { find "$T/state" -maxdepth 2 -type f \( -name '*.tmp' -o -name '*.new' \) -printf '%f\n' | sort; }

diag "seed $SEED (KILL9_SEED=$SEED replays it)"
kills=0 acked=0 runs=0 seconds=0 sanitizer=0 torn=0 piled=0 doctor_bad=0 again=0 bad=0 sync_changed=0 stuck=0 repairs=0
for ((i = 1; kills < KILL9_COUNT && i <= 8 * KILL9_COUNT; i++)); do
    runs=$i
    op=$(python3 "$OPS" next "$M" $((SEED * 1000 + i)))
    fault=$(json_get "$op" 'j["fault"] and json.dumps(j["fault"]) or ""')
    [ -n "$fault" ] && pve_sim_ctl POST faults "$fault" >/dev/null
    mapfile -t argv < <(json_get "$op" '"\n".join(j["argv"])')
    start=$(date +%s%N)
    "$SBX_BIN" -c "$CONF" "${argv[@]}" >"$T/op.out" 2>"$T/op.err" &
    pid=$!
    sleep "$(json_get "$op" 'j["delay"]')"
    killed=0
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null && killed=1
    wait "$pid" 2>/dev/null
    rc=$?
    took=$(( ($(date +%s%N) - start) / 1000000 ))
    pve_sim_ctl DELETE faults >/dev/null
    [ "$killed" = 1 ] && [ "$rc" = 137 ] && kills=$((kills + 1))
    [ "$killed" = 1 ] && [ "$rc" != 137 ] && killed=0 # it ended before the signal
    python3 "$OPS" record "$M" "$op" "$rc" "$T/op.out" "$((took / 1000)).$(printf %03d $((took % 1000)))" >/dev/null
    [ "$rc" = 0 ] && acked=$((acked + 1))
    if [ "$rc" != 0 ] && [ "$rc" != 137 ]; then
        diag "run $i: $(json_get "$op" '" ".join(j["argv"])') exited $rc: $(head -c 300 "$T/op.err")"
    fi
    # An operation that ended by itself is checked at the next kill.
    [ "$killed" = 1 ] || continue
    settle || stuck=$((stuck + 1))
    # the state files parse; at most one temporary file each
    for f in reservations.json access.json; do
        [ -f "$T/state/$f" ] || continue
        python3 -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1])), list)' "$T/state/$f" 2>/dev/null ||
            { torn=$((torn + 1)); diag "run $i: $f does not parse"; }
    done
    left=$(tmp_files | grep -vxE 'reservations\.json\.tmp|access\.json\.tmp')
    [ -z "$left" ] || { piled=$((piled + 1)); diag "run $i: temporary files in state-dir: $left"; }
    # doctor repairs and says so; a second one finds nothing
    sbx --json doctor >"$T/doctor.json" 2>"$T/doctor.err"
    drc=$?
    grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/doctor.err" && sanitizer=$((sanitizer + 1))
    n=$(python3 "$OPS" tally "$C" "$T/doctor.json")
    if [ "$drc" != 0 ] || [ "$n" -lt 0 ]; then
        doctor_bad=$((doctor_bad + 1))
        diag "run $i: doctor exited $drc: $(json_get "$(cat "$T/doctor.json")" '[c["detail"] for c in j["checks"] if not c["ok"]]' 2>&1 | head -c 600)"
    fi
    repairs=$((repairs + (n > 0 ? n : 0)))
    [ "$n" -gt 0 ] && [ "$i" -le 40 ] && json_get "$(cat "$T/doctor.json")" '"\n".join(r["kind"] + ": " + r["detail"] for r in j["repairs"])' | sed "s/^/# run $i repaired /" | cut -c1-400
    if [ "$n" != 0 ]; then
        sbx --json doctor >"$T/doctor2.json" 2>&1
        n2=$(json_get "$(cat "$T/doctor2.json")" 'len(j["repairs"])' 2>/dev/null || echo -1)
        seconds=$((seconds + 1))
        if [ "$n2" != 0 ]; then
            again=$((again + 1))
            diag "run $i: the second doctor repaired $n2: $(head -c 600 "$T/doctor2.json")"
        fi
    fi
    # consistent, and what was acknowledged is there
    if bindings 1 "$T/egd1.json" && bindings 2 "$T/egd2.json"; then
        pve_sim_ctl GET state >"$T/sim.json"
        pve_sim_ctl GET calls >"$T/calls.json"
        out=$(python3 "$OPS" check "$M" "$T/state" "$T/sim.json" "$T/calls.json" "$T/egd1.json" "$T/egd2.json")
        if [ $? != 0 ]; then
            bad=$((bad + 1))
            diag "run $i: after $(json_get "$op" '" ".join(j["argv"][1:])') (exit $rc, fault $fault):"
            sed 's/^/#   /' <<<"$out" | cut -c1-600
        fi
        sbx sync >/dev/null 2>&1
        bindings 1 "$T/egd1.after" && bindings 2 "$T/egd2.after"
        cmp -s "$T/egd1.json" "$T/egd1.after" && cmp -s "$T/egd2.json" "$T/egd2.after" ||
            { sync_changed=$((sync_changed + 1)); diag "run $i: sync changed a binding that doctor left"; }
    else
        bad=$((bad + 1))
        diag "run $i: an egressd did not answer GET /v1/sandboxes"
    fi
done
diag "$kills kills in $runs runs; $acked operations acknowledged; doctor made $repairs repairs: $(tr -d '{}"' <"$C" 2>/dev/null)"
ok "$([ "$kills" -ge "$KILL9_COUNT" ]; echo $?)" "sandboxctl was killed $kills times (of $KILL9_COUNT wanted) in $runs runs"
check "an operation ran to its end, acknowledged, between the kills ($acked)" test "$acked" -gt 0
check "the simulator's tasks ended after every kill ($stuck did not)" test "$stuck" = 0
check "state-dir's files parsed after every kill ($torn did not)" test "$torn" = 0
check "state-dir held no temporary file but the one each state file's next write replaces ($piled)" test "$piled" = 0
check "doctor answered and exited 0 after every kill, repairs said ($doctor_bad did not)" test "$doctor_bad" = 0
check "no doctor run printed a sanitizer report ($sanitizer did)" test "$sanitizer" = 0
check "doctor made repairs, each named (a kill left something to repair: $repairs)" test "$repairs" -gt 0
check "a second doctor found nothing to repair after each of the $seconds that repaired ($again did)" \
    test "$again" = 0 -a "$seconds" -gt 0
check "after doctor the pool, both egressd and state-dir were consistent and held everything acknowledged ($bad were not)" \
    test "$bad" = 0
check "sync after doctor changed no binding ($sync_changed)" test "$sync_changed" = 0
sbx_stop_all
tap_end
