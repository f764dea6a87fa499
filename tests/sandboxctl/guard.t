#!/usr/bin/env bash
# tests/sandboxctl/guard.t - the resource guard: per-sandbox limits, the pool
# total counting creates in progress, reservations that cannot go stale, and
# 10 parallel creates that never overshoot 20 GiB (counted in what the
# simulator holds), on PVE 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

run_version() {
    local v=$1 out rc i n ok_n refused sleeper
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    printf '%s\n' "size wide 6 2048" "size fat 2 9000" | sbx_write_config

    out=$(sbx create --name w --size wide --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'cores guard: 6 cores asked > max-cores 4' <<<"$out"; echo $?)" \
        "PVE $v: 6 cores refused, naming max-cores ($out)"
    out=$(sbx create --name f --size fat --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'memory guard: 9000 MiB asked > max-memory-mib 8192' <<<"$out"; echo $?)" \
        "PVE $v: 9000 MiB refused, naming max-memory-mib ($out)"

    # A reservation of a live process counts; of a dead one it does not.
    sleep 60 &
    sleeper=$!
    mkdir -p "$T/state"
    printf '[{"pid": %d, "start": 0, "name": "other", "cores": 4, "memory_mib": 18432, "vmid": 500, "address": "10.99.0.50"}]\n' \
        "$sleeper" >"$T/state/reservations.json"
    out=$(sbx create --name r1 --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q '18432 MiB in use (pool and creates in progress) + 4096 MiB asked > max-total-memory-mib 20480' <<<"$out"; echo $?)" \
        "PVE $v: a live process's reservation counts against the total ($out)"
    kill "$sleeper"
    wait "$sleeper" 2>/dev/null
    out=$(sbx --json create --name r1 --size small --owner a --policy p 2>&1)
    ok $? "PVE $v: once that process is gone its reservation no longer counts"
    check "PVE $v: and the stale reservation is dropped from the file" \
        test "$(tr -d ' \n' <"$T/state/reservations.json")" = "[]"
    sbx destroy r1 >/dev/null

    # Two creates of one name at once: one wins, the other is told why.
    sbx create --name same --size small --owner a --policy p >"$T/s1.out" 2>&1 &
    i=$!
    sbx create --name same --size small --owner b --policy p >"$T/s2.out" 2>&1
    rc=$?
    wait $i
    n=$?
    ok "$([ $((rc + n)) -eq 1 ] && grep -qE "a sandbox called 'same' (exists already|is being created)" "$T/s1.out" "$T/s2.out"; echo $?)" \
        "PVE $v: of two creates of one name at once exactly one succeeds ($(cat "$T/s1.out" "$T/s2.out" | grep sandboxctl:))"
    check "PVE $v: Proxmox holds one VM of that name" \
        test "$(sim_state "len([x for x in s['vms'] if x['name'] == 'same'])")" = 1
    sbx destroy same >/dev/null

    # 10 creates at once, 4 GiB each, against 20 GiB.
    for ((i = 0; i < 10; i++)); do
        sbx --json create --name p$i --size small --owner o$i --policy balanced >"$T/p$i.out" 2>"$T/p$i.err" &
        eval "pid_$i=\$!"
    done
    ok_n=0
    refused=0
    for ((i = 0; i < 10; i++)); do
        eval "wait \$pid_$i"
        rc=$?
        if [ $rc -eq 0 ]; then
            ok_n=$((ok_n + 1))
        elif grep -q 'max-total-memory-mib 20480' "$T/p$i.err"; then
            refused=$((refused + 1))
        else
            diag "p$i: exit $rc: $(cat "$T/p$i.err")"
        fi
    done
    ok "$([ $ok_n -eq 5 ] && [ $refused -eq 5 ]; echo $?)" \
        "PVE $v: of 10 parallel creates 5 succeed and 5 are refused by the total ($ok_n, $refused)"
    n=$(sim_state "sum(int(x['config']['memory']) for x in s['vms'] if x['pool'] == 'sandboxes')")
    ok "$([ "$n" -le 20480 ]; echo $?)" "PVE $v: the simulator's pool holds $n MiB <= 20480"
    check "PVE $v: the simulator's pool holds exactly the 5 that succeeded" \
        test "$(sim_state "len([x for x in s['vms'] if x['pool'] == 'sandboxes'])")" = "$ok_n"
    check "PVE $v: their VMIDs and addresses are all different" \
        test "$(sim_state "vms = [x for x in s['vms'] if x['pool'] == 'sandboxes']; len({x['config']['ipconfig0'] for x in vms}) == len(vms) == len({x['vmid'] for x in vms})")" = True
    check "PVE $v: no reservation is left" test "$(tr -d ' \n' <"$T/state/reservations.json")" = "[]"
    check "PVE $v: both egressd hold a binding for each of the $ok_n, nothing else" \
        test "$(egressd_state 1 'sorted(b)') $(egressd_state 2 'sorted(b)')" = "$(sim_state "sorted(str(x['vmid']) for x in s['vms'] if x['pool'] == 'sandboxes')") $(sim_state "sorted(str(x['vmid']) for x in s['vms'] if x['pool'] == 'sandboxes')")"
    out=$(sbx create --name extra --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q '20480 MiB in use' <<<"$out"; echo $?)" "PVE $v: the pool is full: a 6th is refused ($out)"
    sbx destroy p"$(for ((i = 0; i < 10; i++)); do [ -s "$T/p$i.out" ] && { echo $i; break; }; done)" >/dev/null
    check "PVE $v: after a destroy there is room again" sbx create --name extra --size small --owner a --policy p
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
