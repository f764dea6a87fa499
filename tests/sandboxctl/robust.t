#!/usr/bin/env bash
# tests/sandboxctl/robust.t - what a review of sandboxctl found, each kept
# from coming back: bad command lines exit 2 with a clear message, output
# that cannot be written is a failure, a command killed by a signal is no
# success, file modes of the secrets, and how create and sync behave when
# a step or Proxmox fails.  On PVE 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# usage_case TEXT EXPECTED_MESSAGE ARGS...: exit 2 with the message.
usage_case() {
    local text=$1 want=$2 out rc
    shift 2
    out=$(sbx "$@" </dev/null 2>&1)
    rc=$?
    ok "$([ $rc -eq 2 ] && grep -qF -- "$want" <<<"$out"; echo $?)" "$text (rc $rc: ${out%%$'\n'*})"
}

cli_cases() {
    local v=$1
    usage_case "PVE $v: exec without -- CMD is a usage error" "exec: expected NAME" exec a1
    usage_case "PVE $v: exec with nothing after -- is a usage error" "exec: expected NAME" exec a1 --
    usage_case "PVE $v: exec --timeout abc is a usage error" "--timeout expects whole seconds" \
        exec a1 --timeout abc -- true
    usage_case "PVE $v: exec --timeout 5x is a usage error" "--timeout expects whole seconds" \
        exec a1 --timeout 5x -- true
    usage_case "PVE $v: a command argument that is not UTF-8 is refused, not dropped" \
        "argument 7 is not valid UTF-8" exec a1 -- echo $'\xff'
    usage_case "PVE $v: a snapshot label that is not UTF-8 is refused (not replaced by a default)" \
        "is not valid UTF-8" snapshot a1 $'l\xff'
    usage_case "PVE $v: a read path that is not UTF-8 is refused" "is not valid UTF-8" read a1 $'/\xff'
    usage_case "PVE $v: an --allow host that is not UTF-8 is refused" "is not valid UTF-8" \
        create --name x1 --size small --owner a --policy p --allow $'\xff'
}

run_version() {
    local v=$1 out rc vmid
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    cli_cases "$v"
    cp "$T/token" "$T/token.good"
    python3 -c 'import sys; print(sys.argv[1] + "x" * 600)' "$SBX_TOKEN_ID=$SBX_SECRET" >"$T/token"
    out=$(sbx list 2>&1)
    rc=$?
    cp "$T/token.good" "$T/token"
    ok "$([ $rc -eq 2 ] && grep -q 'longer than 511 bytes' <<<"$out"; echo $?)" \
        "PVE $v: a token file too long to be one token is refused, not cut short (rc $rc: $out)"
    out=$(sbx --json create --name a1 --size small --owner alice --policy balanced 2>&1)
    ok $? "PVE $v: create a1 ($(tr -d '\n' <<<"${out:0:200}"))"
    vmid=$(json_get "$out" 'j["vmid"]')

    # Output that cannot be written is a failure, not a success.
    printf 'some content\n' | sbx write a1 /root/f >/dev/null
    out=$(sbx read a1 /root/f 2>&1 >/dev/full)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q 'writing to stdout' <<<"$out"; echo $?)" \
        "PVE $v: read into a full disk exits 1 and says so (rc $rc: $out)"
    # An error quotes what the guest agent said: its control bytes are '?'.
    out=$(sbx read a1 "$(printf '/root/no\033[2J\033]0;x\007such')" 2>&1 >/dev/null)
    rc=$?
    ok "$([ $rc -eq 1 ] && [ "$(tr -d '\n' <<<"$out" | LC_ALL=C grep -cP '[\x00-\x1f\x7f]')" = 0 ] &&
        grep -qF 'no?[2J?]0;x?such' <<<"$out"; echo $?)" \
        "PVE $v: an error quoting the guest shows no control byte, '?' for each (rc $rc: $(tr -d '\n' <<<"$out" | cat -v | head -c 300))"
    out=$(sbx list 2>&1 >/dev/full)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q 'writing its output failed' <<<"$out"; echo $?)" \
        "PVE $v: list into a full disk exits 1 and says so (rc $rc: $out)"
    out=$(sbx write a1 /root/g 2>&1 <"$T")
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q 'reading stdin' <<<"$out"; echo $?)" \
        "PVE $v: write from an unreadable stdin fails instead of writing nothing (rc $rc: $out)"
    check "PVE $v: ... and the guest file was not created" \
        test "$(sbx exec a1 -- sh -c 'test -e /root/g && echo yes || echo no')" = no

    # A command killed by a signal did not succeed.
    out=$(sbx --json exec a1 -- sh -c 'kill -9 $$' 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && [ "$(json_get "$out" 'j["exitcode"], j.get("signal")')" = "(137, 9)" ]; echo $?)" \
        "PVE $v: exec of a command killed by SIGKILL exits 1, exitcode 137, signal 9 (rc $rc: $(tr -d '\n' <<<"${out:0:300}"))"
    out=$(sbx exec a1 -- sh -c 'kill -SEGV $$' 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q 'killed by signal 11' <<<"$out"; echo $?)" \
        "PVE $v: exec of a crashing command says so (rc $rc: $out)"
    # A command that ignores SIGTERM is killed after the grace period: timed out.
    out=$(sbx --json exec a1 --timeout 1 -- sh -c 'trap "" TERM; sleep 20' 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && [ "$(json_get "$out" 'j["timed_out"]')" = True ]; echo $?)" \
        "PVE $v: a command that ignores SIGTERM past its timeout is timed_out (rc $rc: $(tr -d '\n' <<<"${out:0:300}"))"

    # sync: a config Proxmox fails to give now does not cut the sandbox off.
    pve_sim_ctl POST faults '{"method":"GET","path":"/qemu/[0-9]+/config$","kind":"http_500","count":1}' >/dev/null
    out=$(sbx sync 2>&1)
    rc=$?
    pve_sim_ctl DELETE faults >/dev/null
    ok "$([ $rc -eq 1 ] && grep -q "sync: VM $vmid: .*500.*no egressd was changed" <<<"$out"; echo $?)" \
        "PVE $v: sync stops when a VM's config cannot be read (rc $rc: $out)"
    check "PVE $v: ... and both egressd keep the sandbox's binding" \
        test "$(egressd_state 1 'list(b)')$(egressd_state 2 'list(b)')" = "[\"$vmid\"][\"$vmid\"]"
    check "PVE $v: sync without the fault succeeds" sbx sync

    sbx destroy a1 >/dev/null

    # When the cleanup itself fails, the operator is told what is left and how to remove it.
    pve_sim_ctl POST faults '{"method":"POST","path":"/status/start$","kind":"task_fail","count":1}' >/dev/null
    pve_sim_ctl POST faults '{"method":"DELETE","path":"^/nodes/[^/]+/qemu/[0-9]+$","kind":"http_500","count":6}' >/dev/null
    out=$(sbx create --name c1 --size small --owner a --policy p 2>&1)
    rc=$?
    pve_sim_ctl DELETE faults >/dev/null
    vmid=$(sim_state "[x['vmid'] for x in s['vms'] if x['name'] == 'c1']")
    ok "$([ $rc -eq 1 ] && [ "$vmid" != "[]" ] && grep -qE "cleanup: VM ${vmid:1:-1} 'c1' on node pve[12] is left behind \(.*\): remove it with \`sandboxctl destroy ${vmid:1:-1}\`" <<<"$out"; echo $?)" \
        "PVE $v: a VM the cleanup could not remove is named, with its node and the command that removes it (rc $rc: $out)"
    check "PVE $v: ... and that command removes it" sbx destroy "${vmid:1:-1}"
    # egressd 2 is down for the binding and for its removal: sandboxctl cannot
    # know that it never took it.
    egressd_stop 2
    out=$(sbx create --name c2 --size small --owner a --policy p 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -qE "cleanup: the binding of VM [0-9]+ is left in egressd \(egressd $SBX_EGD2_ADMIN: DELETE /v1/sandboxes/[0-9]+: Couldn't connect[^)]*\): remove it with \`sandboxctl sync\`" <<<"$out"; echo $?)" \
        "PVE $v: a binding the cleanup could not remove (egressd down) is named, with the fix (rc $rc: $out)"
    egressd_start 2
    ok $? "PVE $v: egressd 2 starts again"
    check "PVE $v: ... and sync then succeeds" sbx sync
    nothing_left "$v" "failed cleanups, then destroy and sync"

    # The egressd admin token is a secret as the Proxmox token is.
    printf 'admin-token-1\n' >"$T/admin-token"
    chmod 644 "$T/admin-token"
    echo "egressd-admin-token-file $T/admin-token" | sbx_write_config
    out=$(sbx list 2>&1)
    rc=$?
    ok "$([ $rc -eq 2 ] && grep -qF "egressd-admin-token-file $T/admin-token: other users may read it; it must be a regular file of mode 0600 (fix: chmod 600 $T/admin-token)" <<<"$out"; echo $?)" \
        "PVE $v: an egressd admin token file of mode 0644 is refused with the fix (rc $rc: $out)"
    : >"$T/admin-token"
    chmod 600 "$T/admin-token"
    out=$(sbx list 2>&1)
    rc=$?
    ok "$([ $rc -eq 2 ] && grep -q "admin-token: empty" <<<"$out"; echo $?)" \
        "PVE $v: an empty egressd admin token file is refused (rc $rc: $out)"
    printf 'admin-token-1\n' >"$T/admin-token"
    out=$(sbx sync 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -qF "egressd $SBX_EGD2_ADMIN: GET /v1/sandboxes: 401" <<<"$out" && ! grep -qF "egressd $SBX_EGD1_ADMIN" <<<"$out"; echo $?)" \
        "PVE $v: mode 0600 passes sandboxctl's check, but egressd 2 refuses a wrong token with 401 (rc $rc: $out)"
    printf '%s\n' "$SBX_EGD_TOKEN" >"$T/admin-token"
    check "PVE $v: mode 0600 with egressd's token is accepted" sbx sync
    printf 'egressd-admin-token-file %s\negressd-admin http://192.0.2.7:9000\n' "$T/admin-token" |
        sbx_write_config
    out=$(sbx list 2>&1)
    rc=$?
    ok "$([ $rc -eq 2 ] && grep -qF "egressd-admin http://192.0.2.7:9000: the admin token would cross the network in clear" <<<"$out"; echo $?)" \
        "PVE $v: a token for a plain-http egressd on another host is refused (rc $rc: $out)"
    sbx_write_config </dev/null

    # A secrets file others may read is refused before anything is made.
    printf 'a secret\n' >"$T/secrets"
    chmod 644 "$T/secrets"
    echo "secrets-file $T/secrets" | sbx_write_config
    pve_sim_ctl DELETE calls >/dev/null
    out=$(sbx create --name s1 --size small --owner a --policy p 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -qF "mode 0644 lets other users read it; it must be 0600 (fix: chmod 600 $T/secrets)" <<<"$out"; echo $?)" \
        "PVE $v: a secrets file of mode 0644 fails the create, naming the mode and the fix (rc $rc: $out)"
    check "PVE $v: ... before any VM was cloned" \
        test "$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(sum(c["path"].endswith("/clone") for c in json.load(sys.stdin)))')" = 0
    nothing_left "$v" "loose secrets file"
    chmod 600 "$T/secrets"
    sbx_write_config </dev/null
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
