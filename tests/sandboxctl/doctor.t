#!/usr/bin/env bash
# tests/sandboxctl/doctor.t - doctor passes on a good set-up and names each
# problem with its fix: a missing privilege (the PVE 8 and the PVE 9 guest
# agent privilege differ), a missing template, bridge or egressd, the
# console's admin group the token cannot read or that does not exist, its
# access log missing.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

run_version() {
    local v=$1 agent out rc
    agent=VM.Monitor
    [ "$v" = 9 ] && agent=VM.GuestAgent.Unrestricted

    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    out=$(sbx doctor)
    ok $? "PVE $v: doctor passes on a good set-up"
    check "PVE $v: it checked the guest agent privilege of this version" \
        grep -q "^ok .*the token holds what it needs on /pool/sandboxes" <<<"$out"
    # The console's settings: a group the token may not read, one that
    # does not exist, an access log that is not there.
    printf 'console-admin-group admins\nconsole-access-log %s\n' "$T/nosuch.log" | sbx_write_config
    out=$(sbx doctor)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -qE "FAIL console +console-admin-group admins: .*403" <<<"$out"; echo $?)" \
        "PVE $v: console-admin-group the token may not read: doctor fails naming it (rc $rc)"
    check "PVE $v:   and says to give it Sys.Audit on /access/groups" grep -q "fix: give the token Sys.Audit on /access/groups" <<<"$out"
    check "PVE $v: console-access-log that is not there: named with the cause" \
        grep -qE "FAIL console +console-access-log $T/nosuch.log: No such file" <<<"$out"
    sbx_stop_all
    sbx_start "$v" "$(sbx_world "$v" | python3 -c '
import json, sys
w = json.load(sys.stdin)
w["tokens"][0]["acl"]["/access/groups"] = ["Sys.Audit"]
w["users"] = [{"userid": "alice@pve", "password": "x"}]
w["groups"] = [{"groupid": "admins", "members": ["alice@pve"]}]
print(json.dumps(w))')" || { ok 1 "PVE $v: simulator starts"; return; }
    printf 'console-admin-group admins\n' | sbx_write_config
    out=$(sbx doctor)
    ok "$([ $? -eq 0 ] && grep -q "^ok .*console-admin-group admins: 1 members" <<<"$out"; echo $?)" \
        "PVE $v: with Sys.Audit on /access/groups doctor reads the group (1 member)"
    printf 'console-admin-group nosuch\n' | sbx_write_config
    out=$(sbx doctor)
    ok "$([ $? -eq 1 ] && grep -q "fix: create the group (pveum group add nosuch)" <<<"$out"; echo $?)" \
        "PVE $v: a console-admin-group that does not exist: doctor says to create it"
    sbx_stop_all

    for priv in VM.Snapshot "$agent"; do
        sbx_start "$v" "$(sbx_world "$v" "$priv")" || { ok 1 "PVE $v: simulator starts"; return; }
        out=$(sbx doctor)
        rc=$?
        ok "$([ $rc -eq 1 ] && grep -q "FAIL privileges the token lacks $priv on /pool/sandboxes" <<<"$out"; echo $?)" \
            "PVE $v: without $priv doctor fails naming it and the path"
        check "PVE $v: and says how to grant it" grep -q "fix: grant $priv on /pool/sandboxes" <<<"$out"
        if [ "$priv" = VM.Snapshot ]; then
            sbx create --name d1 --size small --owner a --policy p >/dev/null 2>&1
            out=$(sbx snapshot d1 s1 2>&1)
            ok "$([ $? -eq 1 ] && grep -q "403 Permission check failed (/vms/[0-9]*, VM.Snapshot)" <<<"$out"; echo $?)" \
                "PVE $v: and a snapshot then fails with Proxmox's reason phrase ($out)"
        fi
        out=$(sbx --json doctor)
        check "PVE $v: --json lists that one failed check" \
            test "$(json_get "$out" '[c["detail"] for c in j["checks"] if not c["ok"]]')" = "[\"the token lacks $priv on /pool/sandboxes\"]"
        sbx_stop_all
    done

    # node auto reads the nodes' free memory: that needs Sys.Audit on /nodes.
    sbx_start "$v" "$(sbx_world "$v" | python3 -c '
import json, sys
w = json.load(sys.stdin)
del w["tokens"][0]["acl"]["/nodes"]
print(json.dumps(w))')" || { ok 1 "PVE $v: simulator starts"; return; }
    out=$(sbx doctor)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q "FAIL privileges the token lacks Sys.Audit on /nodes" <<<"$out"; echo $?)" \
        "PVE $v: with node auto and no Sys.Audit on /nodes, doctor fails naming it (rc $rc)"
    sbx_stop_all

    sbx_start "$v" || { ok 1 "PVE $v: simulator starts"; return; }
    # A sandbox whose own firewall someone switched off.
    out=$(sbx --json create --name fw --size small --owner a --policy p)
    curl -sS --cacert "$PVE_SIM_CA" -X PUT -H "Authorization: PVEAPIToken=$SBX_TOKEN_ID=$SBX_SECRET" \
        -H 'Content-Type: application/json' --data '{"enable": 0}' \
        "$PVE_SIM_URL/nodes/$(json_get "$out" 'j["node"]')/qemu/$(json_get "$out" 'j["vmid"]')/firewall/options" >/dev/null
    out=$(sbx doctor)
    ok "$([ $? -eq 1 ] && grep -q "FAIL firewall   sandbox fw (VM [0-9]*) has its firewall or IP filter off" <<<"$out"; echo $?)" \
        "PVE $v: doctor names a sandbox whose firewall was switched off"
    sbx destroy fw >/dev/null
    printf '%s\n' "template pve1:9999" "bridge vmbr77" | sbx_write_config
    egressd_stop 2
    out=$(sbx doctor)
    rc=$?
    ok "$([ $rc -eq 1 ]; echo $?)" "PVE $v: doctor fails on a broken set-up"
    check "PVE $v: names the missing template" grep -q "FAIL template   template 9999: not visible" <<<"$out"
    check "PVE $v: names the missing bridge and node" grep -q "FAIL bridge     bridge vmbr77 is missing on node pve1" <<<"$out"
    check "PVE $v: names the egressd that is down" grep -qE "FAIL egressd +egressd $SBX_EGD2_ADMIN does not answer" <<<"$out"
    check "PVE $v: the egressd on the unix socket still answers" grep -qE "^ok +egressd +egressd unix:" <<<"$out"
    check "PVE $v: every failure has a fix line" \
        test "$(grep -c '^FAIL' <<<"$out")" = "$(grep -c '^     fix: ' <<<"$out")"
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
