#!/usr/bin/env bash
# tests/sandboxctl/faults.t - a fault at each step of create leaves nothing
# behind (no VM, no reservation, no binding); on PVE 8.4 and 9.1. Faults come from the
# simulator's /_sim/faults and, for the binding step, from the egressd
# stand-in (tests/sandboxctl/egress_recorder.py, in place of egressd's admin
# API until egressd lands). Lock retries are in locks.t.
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
    local v=$1 out rc n pid
    sbx_start "$v" || { ok 1 "PVE $v: simulator and stand-ins start"; return; }
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

    # egressd refuses the binding: the one that took it must drop it again.
    curl -sS --data '{"method":"PUT","count":1}' "http://127.0.0.1:$(cat "$T/rec2.port")/_rec/fail" >/dev/null
    out=$(sbx create --name f1 --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'create: egressd binding:' <<<"$out"; echo $?)" \
        "PVE $v: an egressd refusing the binding fails the create (${out:0:200})"
    check "PVE $v: the other egressd had taken the binding and was told to drop it" \
        test "$(rec_state 1 '[x["method"] for x in r["requests"]][-2:]')" = '["PUT", "DELETE"]'
    nothing_left "$v" "egressd failure"

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
