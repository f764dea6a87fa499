#!/usr/bin/env bash
# tests/sandboxctl/locks.t - Proxmox lock errors ("can't lock file ... got
# timeout") are retried with back-off a bounded number of times, and a lock
# that never frees fails the create without leaving anything behind; on PVE
# 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

run_version() {
    local v=$1 out rc n
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    # Lock errors: retried, bounded.
    pve_sim_ctl DELETE calls >/dev/null
    pve_sim_ctl POST faults '{"method":"PUT","path":"/qemu/[0-9]+/config$","kind":"lock_timeout","count":2}' >/dev/null
    check "PVE $v: two lock timeouts on the config are retried and the create succeeds" \
        sbx create --name l1 --size small --owner a --policy p
    n=$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print([c["status"] for c in json.load(sys.stdin) if c["method"] == "PUT" and c["path"].endswith("/config")])')
    check "PVE $v: the config PUT answered 500, 500, then 200 ($n)" test "$n" = "[500, 500, 200]"
    sbx destroy l1 >/dev/null
    pve_sim_ctl DELETE calls >/dev/null
    pve_sim_ctl POST faults '{"method":"PUT","path":"/qemu/[0-9]+/config$","kind":"lock_timeout","count":50}' >/dev/null
    out=$(sbx create --name l2 --size small --owner a --policy p 2>&1)
    rc=$?
    n=$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(len([c for c in json.load(sys.stdin) if c["method"] == "PUT" and c["path"].endswith("/config")]))')
    ok "$([ $rc -eq 1 ] && grep -q "can't lock file" <<<"$out"; echo $?)" \
        "PVE $v: a lock that never frees fails the create with Proxmox's message (${out:0:200})"
    check "PVE $v: after a bounded number of tries ($n)" test "$n" -eq 6
    pve_sim_ctl DELETE faults >/dev/null
    check "PVE $v: lasting lock: no VM left in Proxmox" \
        test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] not in (9000, 9001)]")" = "[]"
    check "PVE $v: lasting lock: no reservation left" test "$(tr -d ' \n' <"$T/state/reservations.json")" = "[]"
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
