#!/usr/bin/env bash
# tests/sandboxctl/qga.t - sandboxctl against the real QEMU guest agent:
# the simulator with --agent qga runs Debian's qemu-ga (qemu-guest-agent)
# in each VM's namespaces, listening on a unix socket, and relays exec,
# exec-status, file-read and file-write to it as Proxmox does
# (tests/pve-sim/qga.py).  A create (its guest setup goes through the agent
# too), then exec, read and write: output, exit codes, signals, stdin,
# binary bytes both ways, a file over one file-write, a missing file,
# output over the agent's own 16 MiB cap.  PVE 9.1 (base64 file reads) and
# 8.4 (Latin-1 ones).
set -u
. "$TOP/tests/sandboxctl/lib.sh"

run_version() {
    local v=$1 out rc
    sbx_start "$v" "" --agent qga || { ok 1 "PVE $v: simulator (--agent qga) and both egressd start"; sbx_stop_all quiet; return; }
    out=$(sbx --json create --name q1 --size small --owner alice --policy balanced 2>&1)
    ok $? "PVE $v: create q1 through qemu-ga ($(tr -d '\n' <<<"${out:0:160}"))"
    QVMID=$(json_get "$out" 'j["vmid"]')
    # sh's parent is timeout(1), exec's wrapper; its parent the agent
    out=$(sbx exec q1 -- sh -c 'read -r _ _ _ pp _ </proc/$PPID/stat; cat /proc/$pp/comm')
    ok "$([ "$out" = qemu-ga ]; echo $?)" "PVE $v: the command runs under qemu-ga in the guest (got '$out')"

    out=$(sbx exec q1 -- sh -c 'echo out; echo err >&2; exit 3' 2>"$T/err")
    rc=$?
    ok "$([ $rc = 1 ] && [ "$out" = out ] && grep -qx err "$T/err" &&
        grep -q 'exited with status 3' "$T/err"; echo $?)" \
        "PVE $v: exec: stdout, stderr and exit status 3 as qemu-ga reports them (rc $rc, '$out', $(tr '\n' ' ' <"$T/err"))"
    out=$(sbx --json exec q1 -- sh -c 'kill -9 $$' 2>&1)
    ok "$([ "$(json_get "$out" 'j["exitcode"], j.get("signal")')" = "(137, 9)" ]; echo $?)" \
        "PVE $v: exec: a command killed by SIGKILL: exitcode 137, signal 9 ($(tr -d '\n' <<<"${out:0:200}"))"
    out=$(printf 'line one\nline two\n' | sbx exec q1 --stdin -- wc -l)
    ok "$([ "$out" = 2 ]; echo $?)" "PVE $v: exec --stdin: qemu-ga hands the input over (wc -l: '$out')"
    sbx exec q1 -- sh -c 'printf "\000\377\001\302\251"' >"$T/bin"
    # exec's result is text: a byte that is not UTF-8 becomes U+FFFD (ef bf bd)
    ok "$([ "$(od -An -tx1 "$T/bin" | tr -d ' \n')" = 00efbfbd01c2a9 ]; echo $?)" \
        "PVE $v: exec: stdout bytes through qemu-ga's base64, invalid UTF-8 as U+FFFD ($(od -An -tx1 "$T/bin" | tr -d '\n'))"

    # every byte value both ways, and a file over one file-write (46080 bytes)
    python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)' >"$T/all"
    sbx write q1 /root/all <"$T/all" >/dev/null && sbx read q1 /root/all >"$T/all.back"
    check "PVE $v: write then read of every byte value through qemu-ga: the same bytes" cmp "$T/all" "$T/all.back"
    check "PVE $v: ... and the guest's sha256sum of it is ours" \
        test "$(sbx exec q1 -- sha256sum /root/all | cut -c1-64)" = "$(sha256sum <"$T/all" | cut -c1-64)"
    head -c 300000 /dev/urandom >"$T/big"
    sbx write q1 /root/big <"$T/big" >/dev/null && sbx read q1 /root/big >"$T/big.back"
    check "PVE $v: a 300 000-byte file (7 file-writes joined in the guest) read back whole" cmp "$T/big" "$T/big.back"
    out=$(sbx read q1 /root/none 2>&1)
    rc=$?
    ok "$([ $rc = 1 ] && grep -q "sandbox q1: read /root/none: .*qmp command 'guest-file-open' failed - .*No such file" <<<"$out"; echo $?)" \
        "PVE $v: read of a missing file: qemu-ga's error, named (rc $rc: $out)"
    out=$(sbx exec q1 -- sh -c 'head -c 17000000 /dev/zero | tr "\000" A' 2>"$T/err" | wc -c)
    ok "$([ "$out" = 1048576 ] && grep -q 'stdout was truncated' "$T/err"; echo $?)" \
        "PVE $v: 17 MB of output: qemu-ga keeps 16 MiB, sandboxctl exec-output-max (got $out bytes, $(tr '\n' ' ' <"$T/err"))"
    sbx exec q1 -- sh -c 'head -c 17000000 /dev/zero > /root/large' >/dev/null
    out=$(sbx read q1 /root/large 2>&1 >/dev/null)
    ok "$([ $? = 1 ] && grep -q 'the file is larger than 16777216 bytes' <<<"$out"; echo $?)" \
        "PVE $v: read of a 17 MB file: refused as larger than 16 MiB ($out)"
    local pid
    pid=$(cat "$PVE_SIM_DIR/state/vms/$QVMID/qemu-ga.pid" 2>/dev/null)
    ok "$([ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm)" = qemu-ga ]; echo $?)" \
        "PVE $v: qemu-ga runs as pid ${pid:-?}"
    check "PVE $v: destroy q1" sbx destroy q1
    check "PVE $v: ... and its qemu-ga is gone with the VM" test ! -e "/proc/$pid"
    sbx_stop_all
}

if ! command -v qemu-ga >/dev/null; then
    bail "qemu-ga is installed (Debian package qemu-guest-agent: deploy/install-deps.sh --test)"
fi
run_version 9
run_version 8
tap_end
