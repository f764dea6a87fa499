#!/usr/bin/env bash
# tests/sandboxctl/faults.t - a fault at each step of create leaves nothing
# behind (no VM, no reservation, no binding); on PVE 8.4 and 9.1. Faults come
# from the simulator's /_sim/faults and, for the binding step, from the two
# real egressd: one refusing the binding (a preset only the other has, one
# neither has) and one that is down. Lock retries are in locks.t.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# fault_case V STEP METHOD PATH KIND: inject, create, expect failure naming STEP.
fault_case() {
    local v=$1 step=$2 method=$3 path=$4 kind=$5 out rc
    pve_sim_ctl DELETE faults >/dev/null
    pve_sim_ctl POST faults "{\"method\":\"$method\",\"path\":\"$path\",\"kind\":\"$kind\",\"count\":1}" >/dev/null
    out=$(sbx create --name f1 --size small --owner a --policy p 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q "create: $step:" <<<"$out"; echo $?)" \
        "PVE $v: $kind at '$step' fails the create, naming the step (${out:0:300})"
    nothing_left "$v" "$kind at '$step'"
}

run_version() {
    local v=$1 out rc n pid mark vmid
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    printf 'a secret\n' >"$T/secrets"
    chmod 600 "$T/secrets"
    echo "secrets-file $T/secrets" | sbx_write_config

    fault_case "$v" "linked clone" POST '/clone$' http_500
    fault_case "$v" "linked clone" POST '/clone$' task_fail
    fault_case "$v" configure PUT '/qemu/[0-9]+/config$' http_500
    fault_case "$v" firewall PUT '/firewall/options$' http_500
    fault_case "$v" firewall POST '/firewall/ipset$' http_500
    fault_case "$v" firewall POST '/firewall/ipset/ipfilter-net0$' http_500
    fault_case "$v" firewall POST '/firewall/rules$' http_500
    fault_case "$v" start POST '/status/start$' task_fail
    fault_case "$v" "guest agent" POST '/agent/ping$' http_500
    fault_case "$v" "proxy environment" POST '/agent/file-write$' http_500
    fault_case "$v" secrets POST '/agent/exec$' http_500
    pve_sim_ctl DELETE faults >/dev/null

    # egressd 2 refuses the binding: egressd 1 has a preset `solo` that egressd
    # 2 lacks, so 1 takes the binding, 2 answers 422, and 1 must drop it again.
    printf 'a.test:8000\n' >"$T/egressd1/policies/solo.allow"
    egressd_api 1 POST /v1/reload
    ok $? "PVE $v: egressd 1 reloads with a preset solo that egressd 2 lacks ($EGD_CODE $EGD_BODY)"
    mark=$(wc -l <"$T/egressd1/egressd.err")
    out=$(sbx create --name f1 --size small --owner a --policy solo 2>&1)
    rc=$?
    vmid=$(sed -nE 's|.*PUT /v1/sandboxes/([0-9]+): 422.*|\1|p' <<<"$out" | head -n 1)
    ok "$([ $rc -eq 1 ] && grep -qF "create: egressd binding: egressd $SBX_EGD2_ADMIN: PUT /v1/sandboxes/$vmid: 422" <<<"$out" &&
        grep -qF "422 sandbox $vmid: policy: expected the name of a preset, found 'solo': no such preset (presets: balanced, locked, open, p)" <<<"$out" &&
        ! grep -qF '{"error"' <<<"$out" && ! grep -qF "egressd $SBX_EGD1_ADMIN" <<<"$out"; echo $?)" \
        "PVE $v: egressd 2 refusing the binding (422, no such preset) fails the create with egressd's error text, whole (${out:0:300})"
    check "PVE $v: egressd 1 had bound the sandbox and was told to drop it (its log)" \
        test "$(tail -n +$((mark + 1)) "$T/egressd1/egressd.err" | grep -oE 'admin: sandbox [0-9]+ (bound|deleted)' | tr '\n' ,)" = \
        "admin: sandbox $vmid bound,admin: sandbox $vmid deleted,"
    nothing_left "$v" "egressd 2 refusing the binding"

    # A preset neither egressd has: both refuse, both are named.
    out=$(sbx create --name f1 --size small --owner a --policy nosuch 2>&1)
    ok "$([ $? -eq 1 ] && [ "$(grep -oE "egressd ($SBX_EGD1_ADMIN|$SBX_EGD2_ADMIN): PUT /v1/sandboxes/[0-9]+: 422" <<<"$out" | wc -l)" = 2 ]; echo $?)" \
        "PVE $v: a preset no egressd has fails the create, each egressd's 422 named (${out:0:300})"
    nothing_left "$v" "an unknown preset"

    # egressd 2 is down: the create fails naming it; egressd 1 drops the binding.
    egressd_stop 2
    ok $? "PVE $v: egressd 2 stops (exit 0)"
    mark=$(wc -l <"$T/egressd1/egressd.err")
    out=$(sbx create --name f1 --size small --owner a --policy p 2>&1)
    rc=$?
    vmid=$(sed -nE "s|.*PUT /v1/sandboxes/([0-9]+): Couldn't connect.*|\\1|p" <<<"$out" | head -n 1)
    ok "$([ $rc -eq 1 ] && grep -qF "create: egressd binding: egressd $SBX_EGD2_ADMIN: PUT /v1/sandboxes/$vmid: Couldn't connect" <<<"$out"; echo $?)" \
        "PVE $v: an egressd that is down fails the create, naming it (${out:0:300})"
    check "PVE $v: egressd 1 had bound the sandbox and was told to drop it (its log)" \
        test "$(tail -n +$((mark + 1)) "$T/egressd1/egressd.err" | grep -oE 'admin: sandbox [0-9]+ (bound|deleted)' | tr '\n' ,)" = \
        "admin: sandbox $vmid bound,admin: sandbox $vmid deleted,"
    egressd_start 2
    ok $? "PVE $v: egressd 2 starts again"
    nothing_left "$v" "egressd 2 down"

    # A slow clone task is waited for.
    pve_sim_ctl POST faults '{"method":"POST","path":"/clone$","kind":"slow_task","count":1}' >/dev/null
    check "PVE $v: a slow clone (2 s) is waited for" sbx create --name s1 --size small --owner a --policy p
    sbx destroy s1 >/dev/null

    # Interrupted while the clone runs: create undoes what it made.
    pve_sim_ctl POST faults '{"method":"POST","path":"/clone$","kind":"slow_task","count":1}' >/dev/null
    "$SBX_BIN" -c "$CONF" create --name i1 --size small --owner a --policy p >"$T/i1.out" 2>&1 &
    pid=$!
    for ((n = 0; n < 100; n++)); do
        [ "$(sim_state "len(s['vms'])")" -gt 2 ] && break
        sleep 0.05
    done
    kill -INT $pid
    wait $pid
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q 'create: linked clone: task .*interrupted' "$T/i1.out"; echo $?)" \
        "PVE $v: SIGINT while the clone runs stops the create ($(head -c 200 "$T/i1.out"))"
    nothing_left "$v" "interrupt"

    # The connection drops on the very first request (nothing to retry on).
    pve_sim_ctl POST faults '{"method":"GET","path":"^/cluster/resources$","kind":"drop","count":1}' >/dev/null
    out=$(sbx create --name d1 --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'GET /cluster/resources: .*reply' <<<"$out"; echo $?)" \
        "PVE $v: a dropped connection fails the create with curl's reason (${out:0:200})"
    pve_sim_ctl DELETE faults >/dev/null
    nothing_left "$v" "dropped connection"

    # The clone is made but its answer is lost: the VM exists without
    # sandboxctl knowing its task; the undo must still remove it.
    pve_sim_ctl POST faults '{"method":"POST","path":"/clone$","kind":"drop_after","count":1}' >/dev/null
    out=$(sbx create --name lost1 --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'create: linked clone:' <<<"$out"; echo $?)" \
        "PVE $v: a clone whose answer is lost fails the create at the clone step (${out:0:300})"
    pve_sim_ctl DELETE faults >/dev/null
    nothing_left "$v" "clone made, answer lost"
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
