#!/usr/bin/env bash
# bench/run-egressd.sh - egressd under egress-load, beside the same workloads
# sent straight to the sink, as one table.
#
#   bench/run-egressd.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR defaults to build/release (configured with --buildtype=release
# when missing).  Everything runs in a network namespace of its own (the
# script re-executes itself under `unshare -n`): egress-sink on 127.0.0.16
# (the name sink.test in egressd's hosts file, allowed by a test preset),
# egressd on 127.0.0.1 (explicit proxy :3128, transparent TLS :8443), and
# egress-load.  Workloads, each through egressd and direct to the sink:
#
#   idle     BENCH_IDLE tunnels held open (CONNECT + hello + answer); egressd's
#            VmRSS before and while they are held, divided by their number.
#            Run first, while egressd's heap is fresh.
#   connect  CONNECT + ClientHello + a BENCH_REPLY-byte answer, then close;
#            also egressd's CPU time (utime+stime) per connection.
#   sni      the same to the transparent TLS port (no CONNECT).
#   http     keep-alive absolute-URI GETs.
#   bulk     BENCH_BULK_CONNS tunnels moving BENCH_BULK_BYTES each way.
#   deny     CONNECT to a name the preset does not allow: 403 expected.
#
# --smoke runs every workload for about a second with small numbers (for
# tests/run.sh, so the script cannot rot); it fails when any exchange fails.
# Knobs (environment): BENCH_WORKERS (egressd workers, default auto),
# BENCH_THREADS (egress-load threads, 1), BENCH_SINK_THREADS (1), BENCH_CONNS
# (concurrency, 50), BENCH_TOTAL (connections per connect/sni/deny run,
# 20000), BENCH_REQUESTS (http, 100000), BENCH_REPLY (4096), BENCH_IDLE
# (5000), BENCH_BULK_CONNS (4), BENCH_BULK_BYTES (512m), BENCH_HELLO (the
# ClientHello capture, default $CLIENTHELLO_DIR/curl.bin).
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
smoke=0
build=
for a in "$@"; do
    case $a in
    --smoke) smoke=1 ;;
    -h | --help)
        sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) echo "run-egressd.sh: unknown option $a" >&2 && exit 2 ;;
    *) build=$a ;;
    esac
done
build=${build:-$top/build/release}
case $build in /*) ;; *) build=$PWD/$build ;; esac

if [ -z "${EGRESS_BENCH_NETNS:-}" ]; then
    if [ ! -f "$build/build.ninja" ]; then
        meson setup --buildtype=release "$build" "$top" >/dev/null || exit 1
    fi
    ninja -C "$build" bench/egress-load bench/egress-sink proxy/egressd >/dev/null || {
        echo "run-egressd.sh: could not build egressd, egress-load and egress-sink in $build" >&2
        ninja -C "$build" bench/egress-load bench/egress-sink proxy/egressd 2>&1 | tail -n 20 >&2
        exit 1
    }
    export EGRESS_BENCH_NETNS=1
    exec unshare -n -- bash "$0" "$@"
fi

ip link set lo up || exit 1
# Many short connections on one loopback: more source ports, TIME_WAIT ports
# reused for new connections, a longer accept queue.  All per namespace.
sysctl -qw net.ipv4.ip_local_port_range="1024 65535" net.ipv4.tcp_tw_reuse=1 \
    net.core.somaxconn=8192 net.ipv4.tcp_max_syn_backlog=8192 2>/dev/null
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

LOAD=$build/bench/egress-load
SINK=$build/bench/egress-sink
EGRESSD=$build/proxy/egressd
HELLO=${BENCH_HELLO:-${CLIENTHELLO_DIR:-$top/../shared/data/clienthello}/curl.bin}
WORKERS=${BENCH_WORKERS:-auto}
THREADS=${BENCH_THREADS:-1}
SINK_THREADS=${BENCH_SINK_THREADS:-1}
REPLY=${BENCH_REPLY:-4096}
if [ "$smoke" = 1 ]; then
    CONNS=${BENCH_CONNS:-10} IDLE=${BENCH_IDLE:-200}
    BULK_CONNS=${BENCH_BULK_CONNS:-2} BULK_BYTES=${BENCH_BULK_BYTES:-8m}
    AMOUNT=(--duration 1) REQUESTS=(--duration 1)
else
    CONNS=${BENCH_CONNS:-50} IDLE=${BENCH_IDLE:-5000}
    BULK_CONNS=${BENCH_BULK_CONNS:-4} BULK_BYTES=${BENCH_BULK_BYTES:-512m}
    AMOUNT=(--total "${BENCH_TOTAL:-20000}") REQUESTS=(--total "${BENCH_REQUESTS:-100000}")
fi
# egressd holds two descriptors per tunnel (client and upstream).
if [ $((IDLE * 2 + 200)) -gt "$(ulimit -n)" ]; then
    echo "# note: open files limited to $(ulimit -n): egressd can hold about" \
        "$((($(ulimit -n) - 200) / 2)) tunnels, fewer than BENCH_IDLE=$IDLE" >&2
fi
PROXY=127.0.0.1:3128
TLS=127.0.0.1:8443
SINK_ADDR=127.0.0.16
PIDS=()
EGD_PID=
T=$(mktemp -d "${TMPDIR:-/tmp}/egress-bench.XXXXXX")

cleanup() {
    local p
    [ -n "$EGD_PID" ] && kill -TERM "$EGD_PID" 2>/dev/null && wait "$EGD_PID" 2>/dev/null
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP # so that cleanup runs then too
die() {
    echo "run-egressd.sh: $*" >&2
    [ -f "$T/egressd.err" ] && tail -n 20 "$T/egressd.err" | sed 's/^/  egressd: /' >&2
    exit 1
}

for f in "$LOAD" "$SINK" "$EGRESSD" "$HELLO"; do
    [ -e "$f" ] || die "$f is missing"
done
"$LOAD" --selftest "$(dirname "$HELLO")" >"$T/selftest.tap" 2>&1 ||
    die "egress-load --selftest failed: $(grep -m1 '^not ok' "$T/selftest.tap")"

# The origins: one sink per kind of answer, all on sink.test's address.
"$SINK" --listen $SINK_ADDR:4443 --tls-like --reply-bytes "$REPLY" --threads "$SINK_THREADS" &
TLS_SINK_PID=$!
PIDS+=($!)
"$SINK" --listen $SINK_ADDR:8000 --http --reply-bytes "$REPLY" --threads "$SINK_THREADS" &
PIDS+=($!)
"$SINK" --listen $SINK_ADDR:9000 --bulk --reply-bytes "$BULK_BYTES" --threads "$SINK_THREADS" &
PIDS+=($!)

mkdir -p "$T/policies" "$T/state"
printf '%s sink.test\n127.0.0.18 denied.test\n' $SINK_ADDR >"$T/hosts"
printf '# egress-load'"'"'s origins\nsink.test:4443,8000,9000\n' >"$T/policies/bench.allow"
cat >"$T/egressd.conf" <<EOF
listen $PROXY
transparent-tls $TLS upstream-port 4443
metrics 127.0.0.1:9464
workers $WORKERS
hosts-file hosts
policy-dir policies
default-policy bench
state-dir state
access-log access.log
allow-range 127.0.0.16/28
max-conns 200000
max-conns-per-sandbox 200000
EOF
"$EGRESSD" -c "$T/egressd.conf" 2>"$T/egressd.err" &
EGD_PID=$!
for _ in $(seq 100); do
    [ "$(curl -s --max-time 1 --noproxy '*' http://127.0.0.1:9464/healthz 2>/dev/null)" = ok ] && break
    kill -0 "$EGD_PID" 2>/dev/null || die "egressd exited at start"
    sleep 0.1
done
[ "$(curl -s --max-time 1 --noproxy '*' http://127.0.0.1:9464/healthz)" = ok ] ||
    die "egressd did not answer /healthz within 10 s"

failed=0
# load NAME ARGS...: one egress-load run; its JSON line into $T/NAME.json.
load() {
    local name=$1
    shift
    "$LOAD" --threads "$THREADS" --hello "$HELLO" --label "$name" "$@" >"$T/$name.out" \
        2>"$T/$name.err"
    local rc=$?
    grep '^{' "$T/$name.out" | tail -n 1 >"$T/$name.json"
    grep -v '^{' "$T/$name.out" | sed 's/^/  /'
    if [ "$rc" -ne 0 ]; then
        failed=1
        sed 's/^/  /' "$T/$name.err" | head -n 5
    fi
    [ -s "$T/$name.json" ] || die "egress-load $name gave no result (exit $rc)"
    kill -0 "$EGD_PID" 2>/dev/null || die "egressd died during $name"
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
egd_rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$EGD_PID/status"; }
# cpu PID NAME CMD...: CMD, and PID's CPU time meanwhile into $T/NAME.cpu (ticks).
cpu() {
    local pid=$1 name=$2 t0
    shift 2
    t0=$(ticks "$pid")
    "$@"
    echo $(($(ticks "$pid") - t0)) >"$T/$name.cpu"
}
# idle NAME ARGS...: hold the tunnels; egressd's VmRSS before/while into $T/NAME.rss.
idle() {
    local name=$1 before pid rc
    shift
    before=$(egd_rss_kib)
    "$LOAD" --mode idle --threads "$THREADS" --hello "$HELLO" --label "$name" \
        --conns "$IDLE" "$@" >"$T/$name.out" 2>"$T/$name.err" &
    pid=$!
    for _ in $(seq 1200); do
        grep -q 'up:' "$T/$name.out" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.2 # let egressd settle (logging, buffers) before reading
    echo "$before $(egd_rss_kib)" >"$T/$name.rss"
    kill -INT $pid 2>/dev/null
    wait $pid
    rc=$?
    grep '^{' "$T/$name.out" | tail -n 1 >"$T/$name.json"
    grep -v '^{' "$T/$name.out" | sed 's/^/  /'
    if [ "$rc" -ne 0 ]; then
        failed=1
        sed 's/^/  /' "$T/$name.err" | head -n 5
    fi
    [ -s "$T/$name.json" ] || die "egress-load $name gave no result"
    kill -0 "$EGD_PID" 2>/dev/null || die "egressd died during $name"
}

echo "# egressd workers $WORKERS; $(nproc) CPUs;" \
    "egress-load $THREADS thread(s), sinks $SINK_THREADS; hello $(basename "$HELLO")"
# A few connections first, so what every worker sets up once is not counted
# as the tunnels' memory.
load warmup --mode connect --proxy $PROXY --target sink.test:4443 --conns 4 --total 200 \
    --reply-bytes "$REPLY" >/dev/null
idle idle-proxy --proxy $PROXY --target sink.test:4443 --reply-bytes "$REPLY"
idle idle-direct --direct $SINK_ADDR:4443 --target sink.test:4443 --reply-bytes "$REPLY"
cpu "$EGD_PID" connect-proxy load connect-proxy --mode connect --proxy $PROXY --target sink.test:4443 \
    --conns "$CONNS" "${AMOUNT[@]}" --reply-bytes "$REPLY"
cpu "$TLS_SINK_PID" connect-direct load connect-direct --mode connect --direct $SINK_ADDR:4443 --target sink.test:4443 \
    --conns "$CONNS" "${AMOUNT[@]}" --reply-bytes "$REPLY"
cpu "$EGD_PID" sni-proxy load sni-proxy --mode sni --proxy $TLS --target sink.test:4443 \
    --conns "$CONNS" "${AMOUNT[@]}" --reply-bytes "$REPLY"
load sni-direct --mode sni --direct $SINK_ADDR:4443 --target sink.test:4443 \
    --conns "$CONNS" "${AMOUNT[@]}" --reply-bytes "$REPLY"
cpu "$EGD_PID" http-proxy load http-proxy --mode http --proxy $PROXY --target sink.test:8000 \
    --conns "$CONNS" "${REQUESTS[@]}"
load http-direct --mode http --direct $SINK_ADDR:8000 --target sink.test:8000 \
    --conns "$CONNS" "${REQUESTS[@]}"
load bulk-proxy --mode bulk --proxy $PROXY --target sink.test:9000 --conns "$BULK_CONNS" \
    --total "$BULK_CONNS" --bytes "$BULK_BYTES" --timeout 30
load bulk-direct --mode bulk --direct $SINK_ADDR:9000 --target sink.test:9000 \
    --conns "$BULK_CONNS" --total "$BULK_CONNS" --bytes "$BULK_BYTES" --timeout 30
cpu "$EGD_PID" deny-proxy load deny-proxy --mode deny --proxy $PROXY --target denied.test:4443 \
    --conns "$CONNS" "${AMOUNT[@]}"

kill -TERM "$EGD_PID"
wait "$EGD_PID"
rc=$?
EGD_PID=
[ "$rc" -eq 0 ] || {
    echo "run-egressd.sh: egressd exited with status $rc after SIGTERM" >&2
    failed=1
}
if grep -q 'AddressSanitizer\|runtime error:' "$T/egressd.err"; then
    echo "run-egressd.sh: egressd reported a sanitizer error:" >&2
    grep -m 5 'AddressSanitizer\|runtime error:' "$T/egressd.err" >&2
    failed=1
fi

CLK_TCK=$(getconf CLK_TCK) python3 - "$T" <<'EOF'
import json, os, sys
t = sys.argv[1]
tck = int(os.environ["CLK_TCK"])

def get(name):
    try:
        with open(os.path.join(t, name + ".json")) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None

def cell(r, what):
    if r is None:
        return "-"
    if what == "rate":
        if r["mode"] == "bulk":
            return "%.2f Gbit/s" % r["gbit_s"]
        return "%.0f %s" % (r["rate"], r["unit"])
    if what == "errors":
        e = {k: v for k, v in r["errors"].items() if v}
        return ",".join("%s=%d" % kv for kv in e.items()) or "0"
    return "%d" % r[what]

rows = [("connect", "connect"), ("sni", "sni"), ("http", "http"), ("bulk", "bulk"),
        ("deny (403)", "deny"), ("idle (open)", "idle")]
head = ("workload", "egressd", "p50 us", "p99 us", "errors", "direct", "p50 us", "p99 us",
        "errors")
fmt = "%-12s %16s %8s %8s %8s  %16s %8s %8s %8s"
print(fmt % head)
for label, name in rows:
    p, d = get(name + "-proxy"), get(name + "-direct")
    print(fmt % ((label,) + tuple(cell(p, w) for w in ("rate", "p50_us", "p99_us", "errors"))
                 + tuple(cell(d, w) for w in ("rate", "p50_us", "p99_us", "errors"))))
idle = get("idle-proxy")
try:
    before, held = (int(x) for x in open(os.path.join(t, "idle-proxy.rss")).read().split())
    n = idle["total"] if idle else 0
    if n:
        print("egressd memory: VmRSS %d KiB -> %d KiB holding %d tunnels = %.1f KiB per tunnel"
              " (user space only; socket buffers are kernel memory)"
              % (before, held, n, (held - before) / n))
except (OSError, ValueError):
    pass
for run, who, what in (("connect-proxy", "egressd", "connection"),
                       ("sni-proxy", "egressd", "connection"),
                       ("http-proxy", "egressd", "request"),
                       ("deny-proxy", "egressd", "connection"),
                       ("connect-direct", "the sink, for reference,", "connection")):
    r = get(run)
    try:
        ticks = int(open(os.path.join(t, run + ".cpu")).read())
    except (OSError, ValueError):
        continue
    n = r["total"] + r["error_total"] if r else 0
    if n:
        print("CPU of %s %s: %.1f us per %s (utime+stime %d ticks / %d)"
              % (who, run.split("-")[0], ticks * 1e6 / tck / n, what, ticks, n))
EOF
if [ "$failed" -ne 0 ]; then
    echo "run-egressd.sh: some exchanges failed (see the errors columns)" >&2
    exit 1
fi
