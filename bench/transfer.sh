#!/usr/bin/env bash
# bench/transfer.sh - how fast a file moves through the QEMU guest agent:
# sandboxctl push and pull of a bundle of BENCH_MIB (20) MiB through the
# Proxmox simulator (tests/pve-sim), on the PVE 8.4 and the 9.1 schema.
#
#   bench/transfer.sh [BUILD_DIR]
#
# BUILD_DIR defaults to build/release (configured with --buildtype=release
# when missing); only sandboxctl and egressd are built.  Needs root (the
# simulator's guest model: mount namespaces, overlayfs), as sandboxctl's
# tests do, and git.  Everything listens on 127.0.0.1 (the simulator and two
# egressd, set up as in tests/sandboxctl/lib.sh, which this sources).
#
# Per PVE version: one sandbox, a host repository holding one commit of
# BENCH_MIB MiB of random bytes (so the bundle is that size: nothing to
# compress), then BENCH_ROUNDS rounds of
#   push  `sandboxctl push` of the repository into a new path of the guest
#         (file-write calls of 46 080 bytes, in parts of 16 MiB joined and
#         checked in the guest)
#   pull  `sandboxctl pull` of it (file-read calls of up to 16 MiB, one per
#         part cut in the guest)
# each on a pseudo-terminal, where sandboxctl shows the copy step ("copy
# in" / "copy out") with its bytes.  The rate is the bundle's MiB over the
# time from the step's first line to its last bytes, timestamped by the
# reader of the terminal: the transfer through the API alone, not the git
# work around it (that is in the command's seconds, also shown).  Each cell
# is the median round, with the slowest and fastest.
#
# Knobs (environment): BENCH_PVE ("8 9"), BENCH_ROUNDS (5), BENCH_MIB (20),
# DATA_DIR (tests/data: the Proxmox API schemas).
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=${1:-build/release}
case $build in /*) ;; *) build=$top/$build ;; esac
BENCH_PVE=${BENCH_PVE:-"8 9"}
BENCH_ROUNDS=${BENCH_ROUNDS:-5}
BENCH_MIB=${BENCH_MIB:-20}

if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || exit 1
fi
ninja -C "$build" sandbox-orchestrator/sandboxctl proxy/egressd >/dev/null || exit 1
# Nothing here may use this machine's certificate or proxy settings.
unset CURL_CA_BUNDLE SSL_CERT_FILE GIT_SSL_CAINFO NODE_EXTRA_CA_CERTS \
    http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY
export BUILD_DIR=$build TOP=$top DATA_DIR=${DATA_DIR:-$top/tests/data}
. "$top/tests/sandboxctl/lib.sh"

# timed_copy STEP CMD...: run CMD on a pseudo-terminal; print "SECONDS MIB
# WALL": the copy step's time (its first line to its last byte count), its
# MiB, and CMD's wall time.  Fails when CMD fails or shows no such step.
timed_copy() {
    python3 - "$@" <<'PY'
import os, pty, re, subprocess, sys, time
step, argv = sys.argv[1], sys.argv[2:]
master, slave = pty.openpty()
t0 = time.monotonic()
p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True)
os.close(slave)
got, begin, end, mib = b"", None, None, None
done = re.compile(rb"\r  %s +\.\.\. ([0-9.]+)/\1 MiB" % re.escape(step.encode()))
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: every writer has closed the terminal
        break
    if not chunk:
        break
    now = time.monotonic()
    got += chunk
    if begin is None and (b"  %s " % step.encode()) in got:
        begin = now
    m = done.search(got) if end is None else None
    if m:
        end, mib = now, float(m.group(1).decode())
rc = p.wait()
wall = time.monotonic() - t0
if rc != 0 or begin is None or end is None:
    sys.stderr.write("%s: exit %d, output: %r\n" % (" ".join(argv[3:5]), rc, got[-600:]))
    sys.exit(1)
print("%.3f %.1f %.2f" % (end - begin, mib, wall))
PY
}

# summary LABEL FILE: FILE has lines "SECONDS MIB WALL"; one table row.
summary() {
    python3 - "$@" <<'PY'
import statistics, sys
label, path = sys.argv[1], sys.argv[2]
rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
rates = sorted(m / s for s, m, _ in rows)
walls = [w for _, _, w in rows]
print("%-16s %6d %9.1f %9.1f %9.1f %9.2f %9.1f" % (label, len(rows), statistics.median(rates),
      rates[0], rates[-1], statistics.median(s for s, _, _ in rows), statistics.median(walls)))
PY
}

bench_version() {
    local v=$1 h i rc=0
    sbx_start "$v" || { echo "PVE $v: the simulator or egressd did not start" >&2; return 1; }
    printf '%s\n' "exec-timeout 300s" "http-timeout 300s" | sbx_write_config
    if ! sbx create --name bench --size small --owner bench --policy p >/dev/null ||
        ! sbx exec bench -- useradd -m -s /bin/sh agent >/dev/null; then
        echo "PVE $v: the sandbox could not be set up" >&2
        return 1
    fi
    h=$T/host
    git init -q -b main "$h" && git -C "$h" config user.name bench &&
        git -C "$h" config user.email bench@example.org &&
        head -c $((BENCH_MIB << 20)) /dev/urandom >"$h/blob" &&
        git -C "$h" add blob && git -C "$h" commit -qm blob || return 1
    : >"$T/push" && : >"$T/pull"
    for ((i = 1; i <= BENCH_ROUNDS && rc == 0; i++)); do
        timed_copy "copy in" "$SBX_BIN" -c "$CONF" push bench --repo "$h" \
            --path "/home/agent/bench/r$i" >>"$T/push" &&
            timed_copy "copy out" "$SBX_BIN" -c "$CONF" pull bench --repo "$h" >>"$T/pull" ||
            rc=1
    done
    # the rounds that did finish, also when one failed
    [ -s "$T/push" ] && summary "PVE $v push" "$T/push"
    [ -s "$T/pull" ] && summary "PVE $v pull" "$T/pull"
    return $rc
}

printf '%-16s %6s %9s %9s %9s %9s %9s\n' "" rounds "MiB/s" min max "copy s" "command s"
status=0
for v in $BENCH_PVE; do
    bench_version "$v" || status=1
    sbx_stop_all quiet
done
exit $status
