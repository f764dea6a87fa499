#!/usr/bin/env bash
# tests/sandboxctl/progress.t - create, push and pull show their steps on a
# terminal and nothing more without one, against the Proxmox simulator
# (tests/pve-sim), on the PVE 8.4 and the 9.1 schema.
#
# The terminal is a pseudo-terminal (python3's pty module, on_tty): for the human form stdout and stderr both go to it, for --json
# only stderr does while stdout stays a pipe.  Without a terminal stderr
# must stay empty and stdout must be exactly what it was before progress
# existed.  The push and pull move a bundle of more than one 16 MiB part.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

STEPS=("clone" "configure" "firewall" "start" "guest agent" "guest setup" "binding")

# on_tty OUT WHICH CMD...: run CMD with WHICH (both | stderr) on a
# pseudo-terminal; the terminal's bytes go to OUT, stdout (stderr mode) to
# OUT.stdout.  Returns CMD's status.
on_tty() {
    local out=$1 which=$2
    shift 2
    python3 - "$out" "$which" "$@" <<'PY'
import os, pty, subprocess, sys
out, which, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
master, slave = pty.openpty()
stdout = subprocess.PIPE if which == "stderr" else slave
p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=slave,
                     close_fds=True)
os.close(slave)
got = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: every writer has closed the terminal
        break
    if not chunk:
        break
    got += chunk
rc = p.wait()
with open(out, "wb") as f:
    f.write(got)
if which == "stderr":
    with open(out + ".stdout", "wb") as f:
        f.write(p.stdout.read())
sys.exit(rc)
PY
}

# steps_in_order FILE: every create step is one line "  STEP ... N.N s",
# in the order of STEPS, and nothing else names a step.
steps_in_order() {
    python3 - "$1" "${STEPS[@]}" <<'PY'
import re, sys
text = open(sys.argv[1], "rb").read().decode().replace("\r\n", "\n")
want = sys.argv[2:]
got = [m.group(1) for m in re.finditer(r"^  (\S+(?: \S+)?) +\.\.\. ([0-9]+\.[0-9]) s$", text, re.M)]
if got != want:
    print("# steps seen: %r in %r" % (got, text[:600]))
    sys.exit(1)
PY
}

run_version() {
    local v=$1 out rc H
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    # (a 16 MiB part is 22 MB of base64 from the simulator: under the whole
    # suite's load one call can take more than the default 30 s)
    printf '%s\n' "exec-timeout 120s" "http-timeout 180s" | sbx_write_config

    # on a terminal: the steps, then the human result
    on_tty "$T/t1" both "$SBX_BIN" -c "$CONF" create --name p1 --size small --owner alice --policy p
    ok $? "PVE $v: create on a terminal succeeds ($(tr -d '\r' <"$T/t1" | tr '\n' ' ' | head -c 300))"
    check "PVE $v: each of the 7 steps is one line with its seconds, in order" steps_in_order "$T/t1"
    check "PVE $v: ... and the result line comes after the last step" \
        python3 -c 'import sys; t=open(sys.argv[1]).read(); sys.exit(0 if t.index("created p1 (VM ") > t.index("  binding ") else 1)' "$T/t1"

    # --json with stderr on a terminal: the steps there, stdout only JSON
    on_tty "$T/t2" stderr "$SBX_BIN" -c "$CONF" --json create --name p2 --size small --owner alice --policy p
    ok $? "PVE $v: --json create with stderr on a terminal succeeds"
    check "PVE $v: --json: the steps are on stderr (the terminal)" steps_in_order "$T/t2"
    check "PVE $v: --json: stdout is exactly the JSON result" \
        python3 -c 'import json,sys; t=open(sys.argv[1]).read(); j=json.loads(t); sys.exit(0 if j["name"] == "p2" and t.startswith("{\n") and t.endswith("}\n") and "..." not in t else 1)' "$T/t2.stdout"

    # without a terminal: nothing on stderr, stdout as before
    out=$(sbx --json create --name p3 --size small --owner alice --policy p 2>"$T/err3")
    ok $? "PVE $v: --json create without a terminal succeeds"
    check "PVE $v: --json without a terminal: stderr is empty" test ! -s "$T/err3"
    check "PVE $v: --json without a terminal: stdout is the JSON result only" \
        python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if j["name"] == "p3" and set(j) == {"vmid","name","node","address","owner","policy","expires","secrets","ready_seconds"} and j["secrets"] == [] else 1)' "$out"
    sbx create --name p4 --size small --owner alice --policy p >"$T/out4" 2>"$T/err4"
    ok $? "PVE $v: create without a terminal succeeds"
    check "PVE $v: without a terminal: stderr is empty" test ! -s "$T/err4"
    check "PVE $v: without a terminal: stdout is the one result line" \
        sh -c "test \$(wc -l <'$T/out4') = 1 && grep -qE '^created p4 \(VM [0-9]+ on pve[12]\), address [0-9.]+, expires .*, ready in [0-9]+\.[0-9] s$' '$T/out4'"

    # a failing step on a terminal says "failed", the error follows
    pve_sim_ctl POST faults '{"method":"POST","path":"/firewall/rules$","kind":"http_500","count":1}' >/dev/null
    on_tty "$T/t5" both "$SBX_BIN" -c "$CONF" create --name p5 --size small --owner alice --policy p
    ok "$([ $? -eq 1 ]; echo $?)" "PVE $v: create with a failing firewall step exits 1"
    check "PVE $v: the failed step ends in 'failed after N.N s', then the error" \
        python3 -c 'import re,sys; t=open(sys.argv[1]).read().replace("\r\n","\n"); sys.exit(0 if re.search(r"^  configure +\.\.\. [0-9.]+ s\n  firewall +\.\.\. failed after [0-9]+\.[0-9] s\nsandboxctl: create: firewall: ", t, re.M) else 1)' "$T/t5"
    pve_sim_ctl DELETE faults >/dev/null

    # push and pull of a bundle of two parts: bytes per part on a terminal
    check "PVE $v: the guest gets a non-root user agent (useradd)" \
        sbx exec p1 -- useradd -m -s /bin/sh agent
    H=$T/host
    git init -q -b main "$H" && git -C "$H" config user.name host && git -C "$H" config user.email host@example.org
    head -c $((20 << 20)) /dev/urandom >"$H/blob"
    git -C "$H" add -A && git -C "$H" commit -qm blob
    on_tty "$T/t6" both "$SBX_BIN" -c "$CONF" push p1 --repo "$H"
    ok $? "PVE $v: push of a 20 MiB bundle on a terminal ($(tr '\r' '|' <"$T/t6" | tr '\n' ' ' | head -c 300))"
    check "PVE $v: push: the copy shows 16 MiB after the first part, all of it at the end, with seconds" \
        python3 -c 'import re,sys; t=open(sys.argv[1], newline="").read(); sys.exit(0 if re.search(r"  copy in +\.\.\.\r  copy in +\.\.\. 16\.0/20\.0 MiB\r  copy in +\.\.\. 20\.0/20\.0 MiB [0-9]+\.[0-9] s\r?\n", t) else 1)' "$T/t6"
    sbx exec p1 -- runuser -u agent -- sh -c 'cd /home/agent/repos/host && git -c user.name=a -c user.email=a@b commit -q --allow-empty -m more' >/dev/null
    on_tty "$T/t7" both "$SBX_BIN" -c "$CONF" pull p1 --repo "$H"
    ok $? "PVE $v: pull of a 20 MiB bundle on a terminal ($(tr '\r' '|' <"$T/t7" | tr '\n' ' ' | head -c 300))"
    check "PVE $v: pull: the copy out shows its bytes per part, with seconds" \
        python3 -c 'import re,sys; t=open(sys.argv[1], newline="").read(); sys.exit(0 if re.search(r"  copy out +\.\.\.\r  copy out +\.\.\. 16\.0/20\.0 MiB\r  copy out +\.\.\. 20\.0/20\.0 MiB [0-9]+\.[0-9] s\r?\n", t) else 1)' "$T/t7"
    sbx pull p1 --repo "$H" >"$T/out8" 2>"$T/err8"
    ok $? "PVE $v: pull without a terminal succeeds"
    check "PVE $v: pull without a terminal: stderr is empty, stdout has no progress" \
        sh -c "test ! -s '$T/err8' && ! grep -q 'copy out' '$T/out8'"

    for n in p1 p2 p3 p4; do sbx destroy "$n" >/dev/null; done
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
