#!/usr/bin/env bash
# bench/run.sh - egressd beside squid, tinyproxy, sniproxy, haproxy and nginx
# (stream, ssl_preread) under the same egress-load workloads, as one table.
#
#   bench/run.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR defaults to build/release (configured with --buildtype=release
# when missing).  The script re-executes itself under `unshare -n -m`: a
# network namespace of its own (loopback only) and a mount namespace in which
# /etc/hosts is the bench's hosts file, /etc/resolv.conf names a resolver that
# does not answer, and the work directory is a tmpfs of up to half the
# memory (every proxy's access log goes there, so no proxy waits on a disk;
# a fast machine writes several GiB of log lines in one full run).  Nothing
# outside changes.
#
# Sinks on 127.0.0.16 (sink.test): TLS-like answers :4443, HTTP :8000, bulk
# :9000; and a TLS-like sink on 127.0.0.18 (denied.test), so a proxy that let
# the denied name through would be seen doing it.  Every proxy is started at
# the beginning, each on its own address with its configuration from
# bench/peers/, and stays up (idle, it costs nothing):
#
#   direct     no proxy: the same exchanges straight to the sinks
#   null       127.0.0.7  bench/null_proxy.c, the least a forward proxy does
#              (CONNECT :3128, a bare relay of HTTP on :3128, TLS :8443,
#              :8444; no policy, no log): the limit any proxy has here
#   egressd    127.0.0.1  CONNECT/HTTP :3128, transparent TLS :8443
#   squid      127.0.0.2  CONNECT/HTTP :3128
#   tinyproxy  127.0.0.3  CONNECT/HTTP :3128
#   sniproxy   127.0.0.4  TLS :8443 (to :4443), :8444 (to the bulk sink)
#   haproxy    127.0.0.5  the same
#   nginx      127.0.0.6  the same
#   squid-bump 127.0.0.8  squid with ssl-bump: CONNECT :3128, inject.test bumped
#                         (the intercept rows only; `squid` in BENCH_PROXIES
#                         brings it along when an intercept workload is chosen)
#
# First, one proxy at a time, a warm-up and the idle workload; then
# BENCH_ROUNDS rounds, each going through every proxy's rate workloads in
# turn, so that a change in the machine's load is spread over all of them;
# each cell of the table is the median round (CPU: the median of the
# rounds' CPU).  Workloads, each where the
# proxy can do it (else "-" in the table):
#   idle     BENCH_IDLE tunnels held (CONNECT, or the TLS port); the VmRSS of
#            all the proxy's processes while they are held minus before, per
#            tunnel.
#   connect  CONNECT + ClientHello + a BENCH_REPLY-byte answer, close.
#   sni      the same to the transparent TLS port.
#   http     keep-alive absolute-URI GETs.
#   bulk     BENCH_BULK_CONNS tunnels moving BENCH_BULK_BYTES each way
#            (CONNECT, or the TLS port for the SNI-only proxies).
#   deny     CONNECT to denied.test: 403 expected.
#   denysni  the hello naming denied.test to the TLS port: closed expected.
#   intercept      real TLS (egress-load's intercept mode) through CONNECT to
#                  inject.test, whose x-api-key egressd injects (squid-bump
#                  sets it): a handshake with the proxy, one GET of
#                  BENCH_REPLY bytes, close.  Three runs: full handshakes,
#                  the same with TLS session resumption toward the proxy
#                  (--resume), and the same exchange to sink.test, which no
#                  proxy intercepts (an opaque tunnel, TLS end to end).
#   interceptbulk  BENCH_BULK_CONNS such GETs of BENCH_INTERCEPT_BULK bytes,
#                  intercepted, and the same through the opaque tunnel.
#   interceptidle  BENCH_INTERCEPT_IDLE intercepted connections held after
#                  one request each; VmRSS per connection, as idle.
#   interceptws    a WebSocket inside the intercepted TLS (egress-load's ws
#                  mode): BENCH_WS_CONNS connections, each a handshake with
#                  the proxy, one upgrade (GET /ws with the x-api-key) and
#                  then 1 KiB messages, BENCH_WS_WINDOW of them in flight,
#                  each echoed by the sink and checked; then the same with
#                  64 KiB messages; each also through the opaque tunnel to
#                  sink.test (tlsws: TLS end to end).  egressd only (direct
#                  and null have the opaque tunnel's rows: the same straight
#                  to the sink, and through the least a proxy does).
#   The HTTPS sink (127.0.0.16:4444, a certificate for sink.test and
#   inject.test from a bench CA made at the start) answers only requests
#   whose x-api-key is the real secret; any other is a failed exchange, and
#   its counts are checked at the end.
# The proxy's CPU (utime+stime of all its processes and threads, reaped
# children included) is read from /proc before and after each run.
#
# --smoke runs every proxy x workload once for about half a second with small
# numbers and fails when any exchange fails or the table is not printed (for
# tests/run.sh).  A peer that is not installed is left out with a note.
# Knobs (environment): BENCH_PROXIES (default "direct null egressd squid
# squid-bump tinyproxy sniproxy haproxy nginx"), BENCH_WORKLOADS (default
# all of the above), BENCH_SECONDS (per rate run, 4; smoke 0.5),
# BENCH_ROUNDS (3; smoke 1),
# BENCH_WORKERS (2: egressd workers, squid workers, haproxy nbthread, nginx
# worker_processes), BENCH_THREADS (egress-load threads, 1),
# BENCH_SINK_THREADS (1), BENCH_CONNS (concurrency, 50), BENCH_REPLY (4096),
# BENCH_IDLE (5000), BENCH_BULK_CONNS (4), BENCH_BULK_BYTES (256m),
# BENCH_INTERCEPT_IDLE (1000), BENCH_INTERCEPT_BULK (256m), BENCH_TLS_THREADS
# (egress-load threads for the intercept rows, BENCH_THREADS), BENCH_WS_CONNS
# (WebSocket connections, 8; smoke 2), BENCH_WS_WINDOW (messages in flight
# per WebSocket, 8), BENCH_HELLO
# (the ClientHello capture, default $CLIENTHELLO_DIR/curl.bin), BENCH_EGRESSD
# (the egressd to run, default BUILD_DIR/proxy/egressd: a before/after of one
# change runs another egressd under the same load generator and sinks),
# BENCH_LOCKS (1: count egressd's futex(2) calls per thread during each run
# with perf, the calls a thread makes when it waits on a lock or wakes a
# waiter; needs perf and tracepoints), BENCH_PROFILE (a directory: perf
# record each run of every proxy but direct into DIR/PROXY.RUN.data, for
# perf report; BENCH_PROFILE_CALLS=0 leaves out the call graphs, which
# cost the proxy more), BENCH_SYSCALLS (1: perf trace -s each run of every
# proxy but direct: its system calls per connection, by call).
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
    -*) echo "run.sh: unknown option $a" >&2 && exit 2 ;;
    *) build=$a ;;
    esac
done
build=${build:-$top/build/release}
case $build in /*) ;; *) build=$PWD/$build ;; esac

if [ -z "${EGRESS_BENCH_NETNS:-}" ]; then
    if [ ! -f "$build/build.ninja" ]; then
        meson setup --buildtype=release "$build" "$top" >/dev/null || exit 1
    fi
    ninja -C "$build" bench/egress-load bench/egress-sink bench/null-proxy proxy/egressd >/dev/null || {
        echo "run.sh: could not build egressd, egress-load, egress-sink and null-proxy in $build" >&2
        ninja -C "$build" bench/egress-load bench/egress-sink bench/null-proxy proxy/egressd 2>&1 |
            tail -n 20 >&2
        exit 1
    }
    export EGRESS_BENCH_NETNS=1
    exec unshare -n -m --propagation private -- bash "$0" "$@"
fi

ip link set lo up || exit 1
# Many short connections on one loopback: more source ports, TIME_WAIT ports
# reused for new connections, a longer accept queue.  All per namespace.  The
# source ports start above every listening port here: a client socket in
# TIME_WAIT on 127.0.0.1:3128 would keep the next proxy from binding it.
sysctl -qw net.ipv4.ip_local_port_range="10000 65535" net.ipv4.tcp_tw_reuse=1 \
    net.core.somaxconn=8192 net.ipv4.tcp_max_syn_backlog=8192 2>/dev/null
ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

LOAD=$build/bench/egress-load
SINK=$build/bench/egress-sink
EGRESSD=${BENCH_EGRESSD:-$build/proxy/egressd}
NULL_PROXY=$build/bench/null-proxy
PEERS=$top/bench/peers
HELLO=${BENCH_HELLO:-${CLIENTHELLO_DIR:-$top/tests/data/clienthello}/curl.bin}
WORKERS=${BENCH_WORKERS:-2}
THREADS=${BENCH_THREADS:-1}
TLS_THREADS=${BENCH_TLS_THREADS:-$THREADS}
SINK_THREADS=${BENCH_SINK_THREADS:-1}
REPLY=${BENCH_REPLY:-4096}
PROXIES=${BENCH_PROXIES:-direct null egressd squid squid-bump tinyproxy sniproxy haproxy nginx}
WORKLOADS=${BENCH_WORKLOADS:-idle connect sni http bulk deny denysni intercept interceptbulk interceptidle interceptws}
# chosen WORKLOAD: in BENCH_WORKLOADS.
chosen() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }
if [ "$smoke" = 1 ]; then
    SECONDS_RUN=${BENCH_SECONDS:-0.5} CONNS=${BENCH_CONNS:-10} IDLE=${BENCH_IDLE:-100}
    ROUNDS=${BENCH_ROUNDS:-1}
    BULK_CONNS=${BENCH_BULK_CONNS:-2} BULK_BYTES=${BENCH_BULK_BYTES:-8m}
    INTERCEPT_IDLE=${BENCH_INTERCEPT_IDLE:-50} INTERCEPT_BULK=${BENCH_INTERCEPT_BULK:-8m}
    WS_CONNS=${BENCH_WS_CONNS:-2}
    WARM_TLS=40
else
    SECONDS_RUN=${BENCH_SECONDS:-4} CONNS=${BENCH_CONNS:-50} IDLE=${BENCH_IDLE:-5000}
    ROUNDS=${BENCH_ROUNDS:-3}
    BULK_CONNS=${BENCH_BULK_CONNS:-4} BULK_BYTES=${BENCH_BULK_BYTES:-256m}
    INTERCEPT_IDLE=${BENCH_INTERCEPT_IDLE:-1000} INTERCEPT_BULK=${BENCH_INTERCEPT_BULK:-256m}
    WS_CONNS=${BENCH_WS_CONNS:-8}
    WARM_TLS=200
fi
WS_WINDOW=${BENCH_WS_WINDOW:-8}
WS_SIZES="1k 64k" # the WebSocket rows' message sizes (their names: interceptws1k, ...)
# Every proxy's connection limit: two descriptors per tunnel, some spare.
MAXCONN=$(((NOFILE - 200) / 2))
intercepting() {
    chosen intercept || chosen interceptbulk || chosen interceptidle || chosen interceptws
}
if intercepting && [[ " $PROXIES " == *" squid "* && " $PROXIES " != *" squid-bump "* ]]; then
    PROXIES=$(echo " $PROXIES " | sed 's/ squid / squid squid-bump /')
fi
if [ "$IDLE" -gt "$MAXCONN" ]; then
    echo "# note: open files limited to $NOFILE: BENCH_IDLE=$IDLE lowered to $MAXCONN" >&2
    IDLE=$MAXCONN
fi
if [ "$INTERCEPT_IDLE" -gt "$MAXCONN" ]; then
    echo "# note: open files limited to $NOFILE: BENCH_INTERCEPT_IDLE lowered to $MAXCONN" >&2
    INTERCEPT_IDLE=$MAXCONN
fi
SINK_ADDR=127.0.0.16
DENIED_ADDR=127.0.0.18
CLK_TCK=$(getconf CLK_TCK)

T=$(mktemp -d "${TMPDIR:-/tmp}/egress-bench.XXXXXX")
mount -t tmpfs -o size=50%,mode=0755 egress-bench "$T" || exit 1
R=$T/results
mkdir -p "$R"
SINK_PIDS=()
PROXY_PID=
declare -A PID_OF CAN_OF # the proxies started, and what each can do
# The intercept workloads, per proxy: the CA egress-load verifies the
# proxy's certificates against, and the x-api-key it sends.
declare -A TLS_CA_OF API_KEY_OF

stop_proxy() {
    [ -n "$PROXY_PID" ] || return 0
    local rc=0
    kill -TERM "$PROXY_PID" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$PROXY_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$PROXY_PID" 2>/dev/null; then
        echo "run.sh: $CUR did not stop within 10 s of SIGTERM; killed" >&2
        kill -KILL "$PROXY_PID" 2>/dev/null
        rc=1
    fi
    wait "$PROXY_PID" 2>/dev/null
    PROXY_PID=
    return $rc
}
cleanup() {
    local p
    stop_proxy
    for p in "${!PID_OF[@]}"; do
        PROXY_PID=${PID_OF[$p]} CUR=$p
        stop_proxy
    done
    for p in "${SINK_PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    [ -z "${SQUID_RUN:-}" ] || umount /run/squid 2>/dev/null
    umount /etc/hosts /etc/resolv.conf 2>/dev/null
    # A proxy's last process may still be closing its files: wait for it,
    # then detach the tmpfs lazily rather than leave it behind.
    for _ in 1 2 3 4 5; do
        umount "$T" 2>/dev/null && break
        sleep 0.2
    done
    mountpoint -q "$T" && umount -l "$T"
    rmdir "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP # so that cleanup runs then too
die() {
    echo "run.sh: $*" >&2
    exit 1
}

for f in "$LOAD" "$SINK" "$EGRESSD" "$HELLO"; do
    [ -e "$f" ] || die "$f is missing"
done
"$LOAD" --selftest "$(dirname "$HELLO")" >"$T/selftest.tap" 2>&1 ||
    die "egress-load --selftest failed: $(grep -m1 '^not ok' "$T/selftest.tap")"

# Names come from this file only, for every proxy: egressd's hosts-file,
# squid's hosts_file, and getaddrinfo() (tinyproxy) through /etc/hosts.
printf '%s sink.test\n%s inject.test\n%s denied.test\n' $SINK_ADDR $SINK_ADDR $DENIED_ADDR \
    >"$T/hosts"
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$T/resolv.conf"
mount --bind "$T/hosts" /etc/hosts || die "cannot bind-mount the hosts file"
mount --bind "$T/resolv.conf" /etc/resolv.conf || die "cannot bind-mount resolv.conf"

"$SINK" --listen $SINK_ADDR:4443 --tls-like --reply-bytes "$REPLY" --threads "$SINK_THREADS" &
TLS_SINK_PID=$!
SINK_PIDS+=($!)
"$SINK" --listen $SINK_ADDR:8000 --http --reply-bytes "$REPLY" --threads "$SINK_THREADS" &
HTTP_SINK_PID=$!
SINK_PIDS+=($!)
"$SINK" --listen $SINK_ADDR:9000 --bulk --reply-bytes "$BULK_BYTES" --threads "$SINK_THREADS" &
BULK_SINK_PID=$!
SINK_PIDS+=($!)
"$SINK" --listen $DENIED_ADDR:4443 --tls-like --reply-bytes "$REPLY" &
SINK_PIDS+=($!)

# The intercept workloads: a bench CA made now (ECDSA P-256, a day), the
# HTTPS sink's certificate from it (sink.test and inject.test), squid-bump's
# CA (its key is every leaf's key, as egressd's one leaf key is), and the
# real secret, which only egressd's secret-dir, squid-bump's configuration,
# the sink and the direct runs know.
PKI=$T/pki
HTTPS_SINK_PID=
SECRET=
# make_pki: the certificates above, in $PKI (a subshell: it changes directory).
make_pki() (
    ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
    mkdir -p "$PKI" && cd "$PKI" || exit 1
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 1 -subj "/CN=egress bench CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
        openssl req "${ec[@]}" -keyout sink.key -out sink.csr -subj "/CN=sink.test" &&
        printf '%s\n' "subjectAltName=DNS:sink.test,DNS:inject.test" "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >sink.ext &&
        openssl x509 -req -in sink.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
            -extfile sink.ext -out sink.pem &&
        openssl req -x509 "${ec[@]}" -keyout bumpca.key -out bumpca.crt -days 1 \
            -subj "/CN=squid-bump bench CA" -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign &&
        cat bumpca.crt bumpca.key >bumpca.pem &&
        # (squid-bump reads its CA's key as the user proxy)
        { chgrp proxy bumpca.pem 2>/dev/null || true; } && chmod 640 bumpca.pem
)
if intercepting; then
    make_pki >"$T/pki.log" 2>&1 || die "could not make the bench CA: $(tail -n 3 "$T/pki.log")"
    SECRET=sk-bench-$(openssl rand -hex 16)
    "$SINK" --listen $SINK_ADDR:4444 --https --cert "$PKI/sink.pem" --key "$PKI/sink.key" \
        --secret "$SECRET" --threads "$SINK_THREADS" >"$T/https-sink.out" &
    HTTPS_SINK_PID=$!
    SINK_PIDS+=($!)
fi

# ---------------------------------------------------------------------------
# Processes, CPU time and memory

# The PIDs of a process and all its descendants.
tree_pids() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { kids[$2] = kids[$2] " " $1 }
        END { q[1] = root; n = 1
              for (i = 1; i <= n; i++) { print q[i]; m = split(kids[q[i]], k, " ")
                                         for (j = 1; j <= m; j++) q[++n] = k[j] } }'
}
# utime+stime (ticks) of a process tree, threads included, and the root's
# reaped children (cutime+cstime).
tree_ticks() {
    local p sum=0 root=$1
    for p in $(tree_pids "$root"); do
        [ -r "/proc/$p/stat" ] || continue
        sum=$((sum + $(sed 's/^.*) //' "/proc/$p/stat" | awk -v r=$((p == root)) \
            '{ print $12 + $13 + (r ? $14 + $15 : 0) }')))
    done
    echo $sum
}
tree_rss_kib() {
    local p sum=0
    for p in $(tree_pids "$1"); do
        sum=$((sum + $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)))
    done
    echo $sum
}
# The whole machine's busy ticks (user, nice, system, irq, softirq; not
# steal): the proxy, egress-load, the sinks and anything else running.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# utime+stime (ticks) of every sink that answers a workload (each one
# process, no children: its /proc/PID/stat counts all its threads).
sink_ticks() {
    local p stats=()
    for p in $TLS_SINK_PID $HTTP_SINK_PID $BULK_SINK_PID $HTTPS_SINK_PID; do
        stats+=("/proc/$p/stat")
    done
    awk '{ sub(/^.*\) /, ""); sum += $12 + $13 } END { print sum + 0 }' "${stats[@]}" 2>/dev/null
}
# Wait until ADDR:PORT accepts (10 s at most).
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0
        kill -0 "$PROXY_PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# render TEMPLATE OUT: a peer's configuration with its @FIELDS@ filled in.
render() {
    sed -e "s|@DIR@|$DIR|g" -e "s|@ADDR@|$ADDR|g" -e "s|@WORKERS@|$WORKERS|g" \
        -e "s|@MAXCONN@|$MAXCONN|g" -e "s|@MAXSOCKS@|$((MAXCONN * 2))|g" \
        -e "s|@NOFILE@|$NOFILE|g" -e "s|@HOSTS@|$T/hosts|g" -e "s|@SINK@|$SINK_ADDR|g" \
        -e "s|@PKI@|$PKI|g" -e "s|@SECRET@|$SECRET|g" "$PEERS/$1" >"$2"
}

# ---------------------------------------------------------------------------
# The proxies: start_NAME sets ADDR, PROXY_PID and what the proxy can do.

start_egressd() {
    local secrets='' inject=''
    mkdir -p "$DIR/policies" "$DIR/state"
    printf '# egress-load'"'"'s origins\nsink.test:4443,4444,8000,9000\n' >"$DIR/policies/bench.allow"
    if intercepting; then
        # inject.test's x-api-key gets the secret `bench`, which the
        # sandbox's binding lists; sink.test:4444 stays an opaque tunnel.
        printf 'inject.test:4444 inject x-api-key secret bench\n' >>"$DIR/policies/bench.allow"
        mkdir -p "$DIR/secrets" && chmod 700 "$DIR/secrets"
        (umask 077 && printf '%s\n' "$SECRET" >"$DIR/secrets/bench")
        secrets=',"secrets":["bench"]'
        inject="secret-dir $DIR/secrets
upstream-ca-file $PKI/ca.pem"
    fi
    # egress-load's address is bound to a sandbox, as every sandbox's is in
    # a deployment: its connections are judged, counted and logged as the
    # sandbox's, with its owner.
    printf '[{"id":"bench","name":"egress-load","owner":"bench","addresses":["127.0.0.1"],"policy":"bench"%s}]\n' \
        "$secrets" >"$DIR/state/sandboxes.json"
    chmod 600 "$DIR/state/sandboxes.json"
    cat >"$DIR/egressd.conf" <<EOF
listen $ADDR:3128
transparent-tls $ADDR:8443 upstream-port 4443
metrics $ADDR:9464
workers $WORKERS
hosts-file $T/hosts
policy-dir policies
default-policy bench
state-dir state
access-log access.log
allow-range 127.0.0.16/28
max-conns $MAXCONN
max-conns-per-sandbox $MAXCONN
admin unix:$DIR/admin.sock
$inject
EOF
    "$EGRESSD" -c "$DIR/egressd.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="connect sni http bulk deny denysni idle"
    intercepting && CAN+=" intercept interceptbulk interceptidle tlstunnel tlsbulk interceptws tlsws"
    VERSION="egressd $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?')"
}
# ready_egressd: once it listens, what the sandbox is given (GET
# /v1/sandboxes/bench/credentials): its CA, which egress-load trusts, and
# its placeholder, which egress-load sends as its x-api-key.
ready_egressd() {
    intercepting || return 0
    curl -q -sS --noproxy '*' -m 5 --unix-socket "$DIR/admin.sock" -o "$DIR/cred.json" \
        http://admin/v1/sandboxes/bench/credentials &&
        python3 - "$DIR/cred.json" "$DIR/sandbox-ca.pem" "$DIR/placeholder" <<'EOF' || {
import json, sys
j = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(j["ca"])
open(sys.argv[3], "w").write(j["placeholders"]["bench"] + "\n")
EOF
        echo "run.sh: egressd gave no CA or placeholder for the sandbox: $(head -c 300 "$DIR/cred.json")" >&2
        return 1
    }
    TLS_CA_OF[egressd]=$DIR/sandbox-ca.pem
    API_KEY_OF[egressd]=$(cat "$DIR/placeholder")
}
start_null() {
    "$NULL_PROXY" --upstream $SINK_ADDR --explicit "$ADDR:3128" --http-port 8000 \
        --transparent "$ADDR:8443=4443" --transparent "$ADDR:8444=9000" \
        --workers "$WORKERS" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="connect sni http bulk idle" # it denies nothing
    # (it cannot terminate TLS: of the intercept rows, the opaque tunnel's)
    intercepting && CAN+=" tlstunnel tlsbulk tlsws"
    VERSION="null-proxy"
    touch "$DIR/access.log" # it writes none
}
# private_squid_run: SMP squid's kids talk over sockets in /run/squid: a
# private one, shared by squid and squid-bump (their service names, -n, keep
# their sockets and shared memory apart).
SQUID_RUN=
private_squid_run() {
    [ -d /run/squid ] && [ -z "$SQUID_RUN" ] || return 0
    SQUID_RUN=$T/squid-run
    mkdir -p "$SQUID_RUN" && chown proxy: "$SQUID_RUN" && mount --bind "$SQUID_RUN" /run/squid
}
start_squid() {
    render squid.conf "$DIR/squid.conf"
    chown -R proxy: "$DIR" 2>/dev/null
    private_squid_run
    squid --foreground -f "$DIR/squid.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="connect http bulk deny idle"
    VERSION=$(squid -v | sed -n '1s/.*Version /squid /p')
}
start_squid-bump() {
    CAN=
    VERSION=$(squid -v | sed -n '1s/.*Version /squid /p')-bump
    if ! squid -v | grep -q -- '--with-openssl'; then
        echo "run.sh: this squid is built without OpenSSL (no ssl-bump): install squid-openssl" >&2
        return 1
    fi
    render squid-bump.conf "$DIR/squid.conf"
    # The helper's certificate database, made as squid(8) says (-c).
    /usr/lib/squid/security_file_certgen -c -s "$DIR/ssl_db" -M 4MB >"$DIR/certgen.out" 2>&1 ||
        { cat "$DIR/certgen.out" >&2 && return 1; }
    chown -R proxy: "$DIR" 2>/dev/null
    private_squid_run
    squid --foreground -n squidbump -f "$DIR/squid.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="intercept interceptbulk interceptidle tlstunnel tlsbulk"
    TLS_CA_OF[squid-bump]=$PKI/bumpca.crt
    # squid sets the field whatever the client sent: this is never seen.
    API_KEY_OF[squid-bump]=replaced-by-squid
}
start_tinyproxy() {
    render tinyproxy.conf "$DIR/tinyproxy.conf"
    cp "$PEERS/tinyproxy.filter" "$DIR/filter"
    touch "$DIR/access.log"
    chown -R nobody "$DIR"
    tinyproxy -d -c "$DIR/tinyproxy.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="connect http bulk deny idle"
    VERSION=$(tinyproxy -v 2>&1 | head -n 1)
}
start_sniproxy() {
    render sniproxy.conf "$DIR/sniproxy.conf"
    chown -R nobody "$DIR"
    sniproxy -f -c "$DIR/sniproxy.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="sni bulk denysni idle"
    VERSION=$(sniproxy -V 2>&1 | head -n 1)
}
start_haproxy() {
    render haproxy.cfg "$DIR/haproxy.cfg"
    haproxy -db -f "$DIR/haproxy.cfg" >"$DIR/access.log" 2>"$DIR/out" &
    PROXY_PID=$!
    CAN="sni bulk denysni idle"
    VERSION=$(haproxy -v | sed -n '1s/HAProxy version \([^ ]*\).*/haproxy \1/p')
}
start_nginx() {
    render nginx.conf "$DIR/nginx.conf"
    nginx -e "$DIR/error.log" -p "$DIR" -c "$DIR/nginx.conf" >"$DIR/out" 2>&1 &
    PROXY_PID=$!
    CAN="sni bulk denysni idle"
    VERSION=$(nginx -v 2>&1 | sed 's/.*nginx\//nginx /')
}
address_of() {
    case $1 in
    egressd) echo 127.0.0.1 ;; squid) echo 127.0.0.2 ;; tinyproxy) echo 127.0.0.3 ;;
    null) echo 127.0.0.7 ;; squid-bump) echo 127.0.0.8 ;;
    sniproxy) echo 127.0.0.4 ;; haproxy) echo 127.0.0.5 ;; nginx) echo 127.0.0.6 ;;
    esac
}
binary_of() {
    case $1 in
    egressd) echo "$EGRESSD" ;; null) echo "$NULL_PROXY" ;; squid-bump) echo squid ;;
    *) echo "$1" ;;
    esac
}

# ---------------------------------------------------------------------------
# Runs

failed=0
# meta KEY VALUE: a fact about the current proxy's current run, for the table.
meta() { echo "$CUR $RUN $1 $2" >>"$R/meta"; }
# load RUN ARGS...: one egress-load run with the proxy's CPU and the
# generator's and the sink's meanwhile; its JSON into $R/CUR.RUN.json.
load() {
    RUN=$1
    shift
    local out=$R/$CUR.$RUN t0 s0 m0 rc
    t0=$([ -n "$PROXY_PID" ] && tree_ticks "$PROXY_PID" || echo 0)
    s0=$(sink_ticks)
    locks_start
    m0=$(machine_ticks)
    "$LOAD" --threads "$THREADS" --hello "$HELLO" --label "$CUR $RUN" "$@" >"$out.out" 2>"$out.err"
    rc=$?
    meta machine_ticks $(($(machine_ticks) - m0))
    locks_stop "$out.futex"
    if [ -n "$PROXY_PID" ]; then
        kill -0 "$PROXY_PID" 2>/dev/null || {
            echo "run.sh: $CUR died during $RUN" >&2
            failed=1
        }
        meta proxy_ticks $(($(tree_ticks "$PROXY_PID") - t0))
    fi
    meta sink_ticks $(($(sink_ticks) - s0))
    grep '^{' "$out.out" | tail -n 1 >"$out.json"
    grep -v '^{' "$out.out" | sed "s/^/  $CUR: /"
    if [ "$rc" -ne 0 ]; then
        failed=1
        sed "s/^/  $CUR $RUN: /" "$out.err" | head -n 5
    fi
    [ -s "$out.json" ] || {
        echo "run.sh: egress-load $CUR $RUN gave no result (exit $rc)" >&2
        failed=1
    }
}
# locks_start, locks_stop FILE: with BENCH_LOCKS=1, count the egressd
# threads' futex(2) calls over one run (perf stat --per-thread) and print
# the workers' and the others' totals.  An uncontended pthread mutex makes
# no system call; one a thread waits on, or a waiter it wakes, makes one.
# With BENCH_PROFILE=DIR, perf record instead.
LOCKS_PID=
locks_start() {
    [ -n "$PROXY_PID" ] && [ "$RUN" != warmup ] || return 0
    if [ -n "${BENCH_PROFILE:-}" ]; then
        local calls=-g
        [ "${BENCH_PROFILE_CALLS:-1}" = 0 ] && calls=
        mkdir -p "$BENCH_PROFILE"
        perf record -q -F 1999 $calls -o "$BENCH_PROFILE/$CUR.$RUN.data" -p "$PROXY_PID" \
            2>/dev/null &
    elif [ "${BENCH_SYSCALLS:-0}" = 1 ] && [ "$CUR" != direct ]; then
        # every process of the proxy (nginx's and squid's workers are children)
        local pids
        pids=$(printf '%s\n' "$PROXY_PID" $(pgrep -P "$PROXY_PID") | paste -sd,)
        perf trace -s -o "$T/syscalls.txt" -p "$pids" >/dev/null 2>&1 &
    elif [ "${BENCH_LOCKS:-0}" = 1 ] && [ "$CUR" = egressd ]; then
        perf stat -e syscalls:sys_enter_futex --per-thread -x, -o "$T/futex.csv" \
            -p "$PROXY_PID" 2>/dev/null &
    else
        return 0
    fi
    LOCKS_PID=$!
    sleep 0.2 # perf attaches to every thread before the load starts
}
locks_stop() {
    [ -n "$LOCKS_PID" ] || return 0
    kill -INT "$LOCKS_PID" 2>/dev/null
    # (a SIGINT that came before perf set its handler is lost: a
    # background job starts with SIGINT ignored)
    for _ in $(seq 50); do
        kill -0 "$LOCKS_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -TERM "$LOCKS_PID" 2>/dev/null
    wait "$LOCKS_PID"
    LOCKS_PID=
    [ -z "${BENCH_PROFILE:-}" ] || return 0
    if [ "${BENCH_SYSCALLS:-0}" = 1 ]; then
        syscalls_report "$1"
        return 0
    fi
    cp "$T/futex.csv" "$1" 2>/dev/null
    awk -F, -v run="$CUR $RUN" '
        $4 ~ /sys_enter_futex/ { if ($1 ~ /^egressd-w[0-9]+-/) w += $2; else o += $2; seen = 1 }
        END { if (seen) printf "  %s: futex calls: workers %d, other threads %d\n", run, w, o
              else printf "  %s: futex calls: perf gave no count\n", run }' "$1"
}
# syscalls_report FILE: with BENCH_SYSCALLS=1, the proxy's system calls
# over one run (perf trace -s, every thread summed) into FILE.syscalls, and
# a line with the calls and the epoll waits per connection (egress-load's
# count of finished exchanges in FILE's run).
syscalls_report() {
    local f=$1 n
    cp "$T/syscalls.txt" "$f.syscalls" 2>/dev/null || {
        echo "  $CUR $RUN: system calls: perf trace gave nothing"
        return 0
    }
    n=$(grep '^{' "$R/$CUR.$RUN.out" 2>/dev/null | tail -n 1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin).get("total", 0))' 2>/dev/null ||
        echo 0)
    awk -v run="$CUR $RUN" -v n="$n" '
        $1 ~ /^[a-z_0-9]+$/ && $2 ~ /^[0-9]+$/ { calls[$1] += $2; total += $2 }
        END {
            if (n <= 0) { printf "  %s: system calls: %d (no exchange count)\n", run, total; exit }
            printf "  %s: system calls per connection: %.2f;", run, total / n
            for (c in calls) if (calls[c] / n >= 0.05) printf " %s %.2f", c, calls[c] / n
            printf "\n"
        }' "$f.syscalls"
}
# idle RUN MODE N ARGS...: hold N tunnels (egress-load --mode MODE, idle or
# interceptidle); the proxy's VmRSS before and while.
idle() {
    RUN=$1
    local out=$R/$CUR.$1 mode=$2 n=$3 before pid rc
    shift 3
    before=$(tree_rss_kib "$PROXY_PID")
    "$LOAD" --mode "$mode" --threads "$THREADS" --hello "$HELLO" --label "$CUR $RUN" \
        --conns "$n" "$@" >"$out.out" 2>"$out.err" &
    pid=$!
    for _ in $(seq 1200); do
        grep -q 'up:' "$out.out" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.05
    done
    sleep 0.5 # let the proxy settle (logging, buffers) before reading
    meta rss_before "$before"
    meta rss_held "$(tree_rss_kib "$PROXY_PID")"
    kill -INT $pid 2>/dev/null
    wait $pid
    rc=$?
    grep '^{' "$out.out" | tail -n 1 >"$out.json"
    grep -v '^{' "$out.out" | sed "s/^/  $CUR: /"
    if [ "$rc" -ne 0 ]; then
        failed=1
        sed "s/^/  $CUR $RUN: /" "$out.err" | head -n 5
    fi
}
can() { case " $CAN " in *" $1 "*) return 0 ;; esac; return 1; }
# want WORKLOAD: chosen, and the current proxy can do it.
want() { chosen "$1" && can "$1"; }

# tls_args: TLSA, the intercept workloads' options for the current proxy
# (its CA, the x-api-key to send); OPAQUE, those of the opaque tunnel's
# runs (the bench CA, the real key: TLS end to end with the sink).
tls_args() {
    TLSA=(--ca-file "${TLS_CA_OF[$CUR]:-}" --api-key "${API_KEY_OF[$CUR]:-}")
    OPAQUE=(--ca-file "$PKI/ca.pem" --api-key "$SECRET")
}
# restart_proxy: the current proxy stopped and started again (a fresh
# heap for the next memory figure).
restart_proxy() {
    stop_proxy || failed=1
    DIR=$T/$CUR
    CAN=
    "start_$CUR" && wait_port "$ADDR" 3128 &&
        { ! declare -F "ready_$CUR" >/dev/null || "ready_$CUR"; } || {
        echo "run.sh: $CUR did not start again" >&2
        failed=1
        return 1
    }
    PID_OF[$CUR]=$PROXY_PID
    sleep "$([ "$smoke" = 1 ] && echo 0.3 || echo 1)" # every worker up
}
# warm_idle: a warm-up, then the idle tunnels (through CONNECT when the proxy
# has it, else its TLS port); then, for a proxy that intercepts, a warm-up of
# intercepted connections (every worker mints its leaf there) and the
# interceptidle connections, after a restart when the idle tunnels came
# first (memory the idle tunnels freed would otherwise be used again, and
# not counted).
warm_idle() {
    local via ran_idle=
    # A few connections first, so what every worker sets up once is not
    # counted as the tunnels' memory.
    if can connect; then
        via=(--proxy "$ADDR:3128")
        load warmup --mode connect --proxy "$ADDR:3128" --target sink.test:4443 --conns 4 \
            --total 200 --reply-bytes "$REPLY" >/dev/null
    elif can sni; then
        via=(--transparent --proxy "$ADDR:8443")
        load warmup --mode sni --proxy "$ADDR:8443" --target sink.test:4443 --conns 4 \
            --total 200 --reply-bytes "$REPLY" >/dev/null
    fi
    if want idle; then
        idle idle idle "$IDLE" "${via[@]}" --target sink.test:4443 --reply-bytes "$REPLY"
        ran_idle=1
    fi
    want intercept || want interceptbulk || want interceptidle || want interceptws || return 0
    if want interceptidle && [ -n "$ran_idle" ]; then
        restart_proxy || return 0
    fi
    tls_args
    load warmtls --mode intercept --proxy "$ADDR:3128" --target inject.test:4444 "${TLSA[@]}" \
        --conns 4 --total "$WARM_TLS" --reply-bytes "$REPLY" >/dev/null
    want interceptidle || return 0
    idle interceptidle interceptidle "$INTERCEPT_IDLE" --proxy "$ADDR:3128" \
        --target inject.test:4444 "${TLSA[@]}" --reply-bytes "$REPLY"
}
# rates ROUND: every rate workload the proxy can do, once.
rates() {
    local r=.r$1 explicit=$ADDR:3128 tls=$ADDR:8443 bulk_tls=$ADDR:8444
    want connect && load "connect$r" --mode connect --proxy "$explicit" --target sink.test:4443 \
        --conns "$CONNS" --duration "$SECONDS_RUN" --reply-bytes "$REPLY"
    want sni && load "sni$r" --mode sni --proxy "$tls" --target sink.test:4443 \
        --conns "$CONNS" --duration "$SECONDS_RUN" --reply-bytes "$REPLY"
    want http && load "http$r" --mode http --proxy "$explicit" --target sink.test:8000 \
        --conns "$CONNS" --duration "$SECONDS_RUN"
    if ! want bulk; then
        :
    elif can connect; then
        load "bulk$r" --mode bulk --proxy "$explicit" --target sink.test:9000 \
            --conns "$BULK_CONNS" --total "$BULK_CONNS" --bytes "$BULK_BYTES" --timeout 30
    else
        load "bulk$r" --mode bulk --transparent --proxy "$bulk_tls" --target sink.test:9000 \
            --conns "$BULK_CONNS" --total "$BULK_CONNS" --bytes "$BULK_BYTES" --timeout 30
    fi
    want deny && load "deny$r" --mode deny --proxy "$explicit" --target denied.test:4443 \
        --conns "$CONNS" --duration "$SECONDS_RUN"
    want denysni && load "denysni$r" --mode deny --transparent --proxy "$tls" \
        --target denied.test:4443 --conns "$CONNS" --duration "$SECONDS_RUN"
    tls_args
    if want intercept; then
        load "intercept$r" --mode intercept --proxy "$explicit" --target inject.test:4444 \
            "${TLSA[@]}" --threads "$TLS_THREADS" --conns "$CONNS" --duration "$SECONDS_RUN" \
            --reply-bytes "$REPLY"
        load "interceptres$r" --mode intercept --resume --proxy "$explicit" \
            --target inject.test:4444 "${TLSA[@]}" --threads "$TLS_THREADS" --conns "$CONNS" \
            --duration "$SECONDS_RUN" --reply-bytes "$REPLY"
    fi
    chosen intercept && can tlstunnel &&
        load "tlstunnel$r" --mode intercept --proxy "$explicit" --target sink.test:4444 \
            "${OPAQUE[@]}" --threads "$TLS_THREADS" --conns "$CONNS" --duration "$SECONDS_RUN" \
            --reply-bytes "$REPLY"
    want interceptbulk &&
        load "interceptbulk$r" --mode interceptbulk --proxy "$explicit" --target inject.test:4444 \
            "${TLSA[@]}" --threads "$TLS_THREADS" --conns "$BULK_CONNS" --total "$BULK_CONNS" \
            --bytes "$INTERCEPT_BULK" --timeout 30
    chosen interceptbulk && can tlsbulk &&
        load "tlsbulk$r" --mode interceptbulk --proxy "$explicit" --target sink.test:4444 \
            "${OPAQUE[@]}" --threads "$TLS_THREADS" --conns "$BULK_CONNS" --total "$BULK_CONNS" \
            --bytes "$INTERCEPT_BULK" --timeout 30
    chosen interceptws || return 0
    local size
    for size in $WS_SIZES; do
        want interceptws && ws_load "interceptws$size$r" "$size" --proxy "$explicit" \
            --target inject.test:4444 "${TLSA[@]}"
        can tlsws && ws_load "tlsws$size$r" "$size" --proxy "$explicit" \
            --target sink.test:4444 "${OPAQUE[@]}"
    done
    return 0
}
# ws_load RUN SIZE ARGS...: one WebSocket echo run (egress-load --mode ws)
# of SIZE-byte messages; ARGS: the way (--proxy or --direct), the target
# and its TLS options.
ws_load() {
    local run=$1 size=$2
    shift 2
    load "$run" --mode ws "$@" --threads "$TLS_THREADS" --conns "$WS_CONNS" \
        --window "$WS_WINDOW" --msg-bytes "$size" --duration "$SECONDS_RUN"
}
# rates_direct ROUND: the same exchanges without a proxy; connect is sni too.
rates_direct() {
    local r=.r$1
    { chosen connect || chosen sni; } &&
        load "connect$r" --mode connect --direct $SINK_ADDR:4443 --target sink.test:4443 \
        --conns "$CONNS" --duration "$SECONDS_RUN" --reply-bytes "$REPLY"
    chosen http && load "http$r" --mode http --direct $SINK_ADDR:8000 --target sink.test:8000 \
        --conns "$CONNS" --duration "$SECONDS_RUN"
    chosen bulk && load "bulk$r" --mode bulk --direct $SINK_ADDR:9000 --target sink.test:9000 \
        --conns "$BULK_CONNS" --total "$BULK_CONNS" --bytes "$BULK_BYTES" --timeout 30
    intercepting || return 0
    tls_args
    chosen intercept && load "tlstunnel$r" --mode intercept --direct $SINK_ADDR:4444 \
        --target sink.test:4444 "${OPAQUE[@]}" --threads "$TLS_THREADS" --conns "$CONNS" \
        --duration "$SECONDS_RUN" --reply-bytes "$REPLY"
    chosen interceptbulk && load "tlsbulk$r" --mode interceptbulk --direct $SINK_ADDR:4444 \
        --target sink.test:4444 "${OPAQUE[@]}" --threads "$TLS_THREADS" --conns "$BULK_CONNS" \
        --total "$BULK_CONNS" --bytes "$INTERCEPT_BULK" --timeout 30
    chosen interceptws || return 0
    local size
    for size in $WS_SIZES; do
        ws_load "tlsws$size$r" "$size" --direct $SINK_ADDR:4444 --target sink.test:4444 \
            "${OPAQUE[@]}"
    done
}
# use NAME: make NAME the current proxy (CUR, ADDR, PROXY_PID, CAN).
use() {
    CUR=$1
    ADDR=$(address_of "$1")
    PROXY_PID=${PID_OF[$1]:-}
    CAN=${CAN_OF[$1]}
}

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), kernel $(uname -r);" \
    "workers $WORKERS; egress-load $THREADS thread(s), sinks $SINK_THREADS;" \
    "concurrency $CONNS, $REPLY-byte answers, ${SECONDS_RUN}s per run, $ROUNDS round(s);" \
    "hello $(basename "$HELLO")"
# Every proxy is started first and stays up: the rounds go from one to the
# next, so a change in the machine's load spreads over all of them.
UP=()
for CUR in $PROXIES; do
    if [ "$CUR" = direct ]; then
        # (the intercept workloads: the same TLS exchange straight to the
        # sink, with the real key, as the opaque tunnel's rows)
        CAN_OF[direct]="connect sni http bulk"
        intercepting && CAN_OF[direct]+=" tlstunnel tlsbulk tlsws"
        TLS_CA_OF[direct]=$PKI/ca.pem
        API_KEY_OF[direct]=$SECRET
        echo "direct direct ${CAN_OF[direct]}" >>"$R/columns"
        UP+=(direct)
        continue
    fi
    ADDR=$(address_of "$CUR")
    [ -n "$ADDR" ] || die "unknown proxy '$CUR' in BENCH_PROXIES"
    [ "$CUR" = squid-bump ] && ! intercepting && continue # (only intercept rows)
    if ! command -v "$(binary_of "$CUR")" >/dev/null; then
        echo "run.sh: $CUR is not installed: left out" >&2
        echo "$CUR not-installed -" >>"$R/columns"
        continue
    fi
    DIR=$T/$CUR
    mkdir -p "$DIR"
    CAN=
    VERSION=$CUR
    if ! "start_$CUR"; then
        # (squid-bump: a squid without OpenSSL, or no intercept workload)
        echo "$CUR not-installed -" >>"$R/columns"
        continue
    fi
    port=3128
    case " $CAN " in *" connect "* | *" intercept"*) ;; *) port=8443 ;; esac
    if ! wait_port "$ADDR" $port || ! { ! declare -F "ready_$CUR" >/dev/null || "ready_$CUR"; }; then
        echo "run.sh: $CUR did not start (no listener on $ADDR:$port within 10 s, or not ready):" >&2
        tail -n 20 "$DIR/out" "$DIR"/*.log 2>/dev/null | sed 's/^/  /' >&2
        failed=1
        stop_proxy
        echo "$CUR failed-to-start -" >>"$R/columns"
        continue
    fi
    echo "$CUR: $VERSION, pid $PROXY_PID, $ADDR"
    echo "$CUR $(echo "$VERSION" | tr ' ' '_') $CAN" >>"$R/columns"
    PID_OF[$CUR]=$PROXY_PID
    CAN_OF[$CUR]=$CAN
    PROXY_PID=
    UP+=("$CUR")
done
sleep 1 # every worker up, not only the first
# Memory, one proxy at a time, while every heap is fresh.
for name in "${UP[@]}"; do
    [ "$name" = direct ] && continue
    use "$name"
    warm_idle
done
for round in $(seq "$ROUNDS"); do
    for name in "${UP[@]}"; do
        use "$name"
        if [ "$name" = direct ]; then rates_direct "$round"; else rates "$round"; fi
    done
done
# Every proxy is told to stop at once (squid takes seconds to), then each is
# waited for, 10 s at most from here.
for name in "${UP[@]}"; do
    [ "$name" = direct ] || kill -TERM "${PID_OF[$name]}" 2>/dev/null
done
for name in "${UP[@]}"; do
    [ "$name" = direct ] && continue
    use "$name"
    DIR=$T/$name
    stop_proxy || failed=1
    unset "PID_OF[$name]"
    # The access log is part of each proxy's work: show that it was written.
    echo "$name: $(wc -l 2>/dev/null <"$DIR/access.log" || echo 0) lines in its access log"
    if grep -q 'AddressSanitizer\|runtime error:' "$DIR/out" 2>/dev/null; then
        echo "run.sh: $name reported a sanitizer error:" >&2
        grep -m 5 'AddressSanitizer\|runtime error:' "$DIR/out" >&2
        failed=1
    fi
done
PROXY_PID=

if [ -n "$HTTPS_SINK_PID" ]; then
    # The HTTPS sink's counts so far: a request that reached it with another
    # x-api-key than the secret, or none, is a failure of the bench.
    kill -USR1 "$HTTPS_SINK_PID"
    for _ in $(seq 50); do
        [ -s "$T/https-sink.out" ] && break
        sleep 0.1
    done
    sleep 0.2
    tail -n 1 "$T/https-sink.out" >"$R/https-sink.json"
    python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j["mismatch"] + j["missing"] > 0)' \
        "$R/https-sink.json" || {
        echo "run.sh: the HTTPS sink saw requests without the real secret: $(cat "$R/https-sink.json")" >&2
        failed=1
    }
    # (and a WebSocket handshake or frame it could not take is a failure too)
    python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["ws_bad"] > 0)' \
        "$R/https-sink.json" || {
        echo "run.sh: the HTTPS sink refused WebSocket handshakes or frames: $(cat "$R/https-sink.json")" >&2
        failed=1
    }
fi
WORKERS=$WORKERS CLK_TCK=$CLK_TCK WS_CONNS=$WS_CONNS WS_WINDOW=$WS_WINDOW python3 - "$R" <<'EOF' || {
import json, os, sys
r = sys.argv[1]
tck = int(os.environ["CLK_TCK"])
cols, meta, notes = [], {}, []
for line in open(os.path.join(r, "columns")):
    name, version, *can = line.split()
    cols.append((name, version, set(can)))
try:
    for line in open(os.path.join(r, "meta")):
        name, run, key, value = line.split()
        meta[name, run, key] = float(value)
except OSError:
    pass

def load(name, key):
    try:
        with open(os.path.join(r, "%s.%s.json" % (name, key))) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None

def rounds(name, run):
    """Every round's result of a run, as (json, key); key names its meta."""
    if name == "direct" and run == "sni":
        run = "connect"  # the same exchange without a proxy
    if run in ("idle", "interceptidle"):
        return [(load(name, run), run)]
    got, k = [], 1
    while os.path.exists(os.path.join(r, "%s.%s.r%d.out" % (name, run, k))):
        got.append((load(name, "%s.r%d" % (run, k)), "%s.r%d" % (run, k)))
        k += 1
    return got

BULK = ("bulk", "interceptbulk", "tlsbulk")

def metric(j):
    return j.get("gbit_s", 0) if j["mode"] in ("bulk", "interceptbulk") else j["rate"]

# The runs of one workload: the ability (CAN) each run needs.
ABILITY = {"interceptres": "intercept", "warmtls": "intercept"}
WS_SIZES = (("1k", "1 KiB"), ("64k", "64 KiB"))  # run.sh's WS_SIZES, and their rows' names
for size, _ in WS_SIZES:
    ABILITY["interceptws" + size] = "interceptws"
    ABILITY["tlsws" + size] = "tlsws"

def able(name, can, run):
    return ABILITY.get(run, run) in can

def pick(name, run):
    """The median round by rate (its latency and CPU go with it)."""
    got = sorted((x for x in rounds(name, run) if x[0] is not None), key=lambda x: metric(x[0]))
    return got[len(got) // 2] if got else (None, None)

def res(name, run):
    return pick(name, run)[0]

def ok(j):
    return j is not None and j["error_total"] == 0

def errs(j):
    return ",".join("%s=%d" % kv for kv in j["errors"].items() if kv[1])

def ticks(name, run):
    return meta.get((name, pick(name, run)[1], "proxy_ticks"))

def trouble(name, run):
    """Errors of every round, for the notes; and whether any let a denial through."""
    leak = False
    for j, key in rounds(name, run):
        if j is None:
            notes.append("%s %s: no result" % (name, key))
        elif j["error_total"]:
            notes.append("%s %s: errors %s" % (name, key, errs(j)))
            leak = leak or j["errors"].get("let_through", 0) > 0
    return leak

def exchanges(j):
    return j["total"] + j["error_total"]

# Each row: label, and a function of (column name, its abilities) giving a
# number (for the ratios) and its text; None: the proxy cannot do it.
def rate(run):
    def f(name, can):
        j = res(name, run)
        if not able(name, can, run) or j is None:
            return None
        bad = len(notes)
        if trouble(name, run) and run.startswith("deny"):
            return (0, "LET THROUGH")
        v = metric(j)
        t = ("%.2f" % v) if run in BULK else ("%.0f" % v)
        if j.get("reconnects"):
            t += " (new conn each)" if j["reconnects"] * 2 > j["total"] else " (reconnects)"
        if len(notes) > bad:
            t += " *"
        return (v, t)
    return f

def p99(run):
    def f(name, can):
        j = res(name, run)
        if not able(name, can, run) or j is None or not j["total"]:
            return None
        return (j["p99_us"], "%.1f" % (j["p99_us"] / 1000))
    return f

def cpu_of(name, j, key, per):
    """One round's proxy CPU per exchange (us) or per GiB (s); None without."""
    t = meta.get((name, key, "proxy_ticks"))
    if j is None or t is None or not exchanges(j):
        return None
    if per == "GiB":
        gib = (j["bytes_up"] + j["bytes_down"]) / 2**30
        return t / tck / gib if gib else None
    if per == "MiB":  # of WebSocket messages echoed (one way)
        mib = j.get("payload_bytes", 0) / 2**20
        return t * 1e6 / tck / mib if mib else None
    return t * 1e6 / tck / exchanges(j)

def cpu(run, per):
    """The median over the rounds of each round's CPU per unit: a round's
    CPU swings more than its rate here, so it is not taken from the
    median round by rate."""
    def f(name, can):
        if name == "direct" or not able(name, can, run):
            return None
        got = sorted(v for v in (cpu_of(name, j, key, per) for j, key in rounds(name, run))
                     if v is not None)
        if not got:
            return None
        v = got[len(got) // 2]
        return (v, "%.2f" % v if per == "GiB" else "%.0f" % v)
    return f

def mib_s(run):
    """MiB/s of WebSocket messages echoed (one way), the median round's."""
    def f(name, can):
        j = res(name, run)
        if not able(name, can, run) or j is None or "mib_s" not in j:
            return None
        return (j["mib_s"], "%.1f" % j["mib_s"])
    return f

def rss(run):
    def f(name, can):
        j = res(name, run)
        b, h = meta.get((name, run, "rss_before")), meta.get((name, run, "rss_held"))
        if name == "direct" or j is None or b is None or h is None or not j["total"]:
            return None
        v = (h - b) / j["total"]
        t = "%.1f" % v
        if not ok(j):
            t += " *"
            notes.append("%s %s: %d of the tunnels up; errors %s" % (name, run, j["total"], errs(j)))
        return (v, t)
    return f

def resumed(run):
    """The share of the median round's handshakes that were resumptions."""
    def f(name, can):
        j = res(name, run)
        if not able(name, can, run) or j is None or not j.get("handshakes"):
            return None
        v = 100 * j["resumed"] / j["handshakes"]
        return (v, "%.0f%%" % v)
    return f

def leaf_counts(name):
    """Over every intercepted run of a proxy (warm-up included): distinct
    leaf serials seen, full handshakes, all handshakes."""
    serials, full, every = set(), 0, 0
    for f in os.listdir(r):
        if not f.startswith(name + ".") or not f.endswith(".json"):
            continue
        j = load(name, f[len(name) + 1:-5])
        if j is None or "leaves" not in j or not j["target"].startswith("inject.test:"):
            continue
        serials.update(j["leaves"])
        full += j["handshakes"] - j["resumed"]
        every += j["handshakes"]
    return serials, full, every

def leaves(name, can):
    if name == "direct" or "intercept" not in can:
        return None
    serials, full, every = leaf_counts(name)
    return (len(serials), "%d" % len(serials)) if every else None

def busy(who, runs=("connect", "sni", "intercept", "tlstunnel", "interceptws1k", "tlsws1k")):
    def f(name, can):
        run, j = None, None
        for run in runs:
            j = res(name, run) if able(name, can, run) else None
            if j is not None:  # BENCH_WORKLOADS may have left the first ones out
                break
        if j is None or not j["seconds"]:
            return None
        key = pick(name, run)[1]
        if who == "load":
            v = 100 * j["cpu_s"] / j["seconds"]
        elif who == "others":
            # The machine's CPU beside the proxy's, the generator's and the
            # sinks': other work sharing the cores with this round.
            m, p, s = (meta.get((name, key, k)) for k in ("machine_ticks", "proxy_ticks",
                                                          "sink_ticks"))
            if m is None or s is None:
                return None
            v = max(0.0, 100 * ((m - (p or 0) - s) / tck - j["cpu_s"]) / j["seconds"])
        else:
            t = meta.get((name, key, "sink_ticks"))
            if t is None:
                return None
            v = 100 * t / tck / j["seconds"]
        return (v, "%.0f%%" % v)
    return f

rows = [
    ("connect (conn/s)", rate("connect")),
    ("connect p99 (ms)", p99("connect")),
    ("sni (conn/s)", rate("sni")),
    ("sni p99 (ms)", p99("sni")),
    ("http keep-alive (req/s)", rate("http")),
    ("http p99 (ms)", p99("http")),
    ("bulk (Gbit/s each way)", rate("bulk")),
    ("deny CONNECT (conn/s)", rate("deny")),
    ("deny SNI (conn/s)", rate("denysni")),
    ("idle RSS (KiB/tunnel)", rss("idle")),
    ("CPU connect (us/conn)", cpu("connect", "conn")),
    ("CPU sni (us/conn)", cpu("sni", "conn")),
    ("CPU http (us/req)", cpu("http", "req")),
    ("CPU bulk (s/GiB)", cpu("bulk", "GiB")),
    ("CPU deny CONNECT (us/conn)", cpu("deny", "conn")),
    ("CPU deny SNI (us/conn)", cpu("denysni", "conn")),
    ("intercept (conn/s)", rate("intercept")),
    ("intercept p99 (ms)", p99("intercept")),
    ("intercept resumed (conn/s)", rate("interceptres")),
    ("intercept resumed p99 (ms)", p99("interceptres")),
    ("resumed toward the proxy", resumed("interceptres")),
    ("TLS via tunnel (conn/s)", rate("tlstunnel")),
    ("TLS via tunnel p99 (ms)", p99("tlstunnel")),
    ("bulk intercepted (Gbit/s)", rate("interceptbulk")),
    ("bulk TLS via tunnel (Gbit/s)", rate("tlsbulk")),
    ("intercept idle RSS (KiB/conn)", rss("interceptidle")),
    ("CPU intercept (us/conn)", cpu("intercept", "conn")),
    ("CPU intercept resumed (us/conn)", cpu("interceptres", "conn")),
    ("CPU TLS via tunnel (us/conn)", cpu("tlstunnel", "conn")),
    ("CPU bulk intercepted (s/GiB)", cpu("interceptbulk", "GiB")),
    ("CPU bulk TLS via tunnel (s/GiB)", cpu("tlsbulk", "GiB")),
    ("leaf certificates seen", leaves),
] + [
    row for size, text in WS_SIZES for row in (
        ("ws %s intercepted (msg/s)" % text, rate("interceptws" + size)),
        ("ws %s via tunnel (msg/s)" % text, rate("tlsws" + size)),
        ("ws %s intercepted (MiB/s)" % text, mib_s("interceptws" + size)),
        ("ws %s via tunnel (MiB/s)" % text, mib_s("tlsws" + size)),
        ("ws %s intercepted p99 (ms)" % text, p99("interceptws" + size)),
        ("ws %s via tunnel p99 (ms)" % text, p99("tlsws" + size)),
        ("CPU ws %s intercepted (us/MiB)" % text, cpu("interceptws" + size, "MiB")),
        ("CPU ws %s via tunnel (us/MiB)" % text, cpu("tlsws" + size, "MiB")),
    )
] + [
    ("egress-load busy", busy("load")),
    ("egress-load busy, deny SNI", busy("load", ("denysni",))),
    ("sinks busy", busy("sink")),
    ("others' CPU (of 1 core)", busy("others")),
]
val = {}
w0 = max(len(l) for l, _ in rows) + 1
widths = [max(10, len(n) + 1) for n, _, _ in cols]
out = ["%-*s" % (w0, "") + "".join("%*s" % (w, n) for (n, _, _), w in zip(cols, widths))]
for label, f in rows:
    cells = []
    for (name, version, can), w in zip(cols, widths):
        v = f(name, can) if version not in ("not-installed", "failed-to-start") else None
        val[label, name] = v[0] if v else None
        cells.append("%*s" % (max(w, len(v[1]) + 1 if v else 0), v[1] if v else "-"))
    out.append("%-*s" % (w0, label) + "".join(cells))
# Drop the rows no column has a figure for (a run of a few workloads).
keep = [0] + [i + 1 for i, (label, _) in enumerate(rows)
              if any(val.get((label, c[0])) is not None for c in cols)]
print("\n".join(out[i] for i in keep))
for name, version, can in cols:
    if version in ("not-installed", "failed-to-start"):
        print("%s: %s" % (name, version.replace("-", " ")))
for name, version, can in cols:
    serials, full, every = leaf_counts(name) if "intercept" in can else (set(), 0, 0)
    if every:
        print("%s: %d distinct leaf certificate(s) in %d full handshakes (%d intercepted "
              "connections, resumed ones included): at most that many leaves minted, so at least "
              "%.3f%% of the connections were served a cached leaf"
              % (name, len(serials), full, every, 100 * (every - len(serials)) / every))
try:
    sink = json.load(open(os.path.join(r, "https-sink.json")))
    print("https sink: %d handshakes (%d resumed), %d requests, %d with another x-api-key than "
          "the secret, %d without one" % (sink["handshakes"], sink["resumed"], sink["requests"],
                                          sink["mismatch"], sink["missing"]))
    if sink.get("ws_upgrades"):
        print("https sink: %d WebSocket upgrades, %d messages (%.1f MiB) echoed, %d handshakes or "
              "frames refused" % (sink["ws_upgrades"], sink["ws_frames"], sink["ws_bytes"] / 2**20,
                                  sink["ws_bad"]))
except (OSError, ValueError):
    pass
for n in notes:
    print("* " + n)
print("median of %d round(s) per cell (p99 from the median round by rate; CPU: the median of the rounds' CPU)."
      % max([len(rounds(n, k)) for n, _, _ in cols for k in ("connect", "sni", "http", "bulk", "deny",
                                                          "denysni", "intercept", "tlsws1k")] + [1]))
if any(val.get(("ws 1 KiB via tunnel (msg/s)", c[0])) is not None for c in cols):
    print("ws: MiB/s and CPU per MiB count the messages echoed once (each byte crossed the proxy"
          " both ways); %s connections, %s messages in flight on each."
          % (os.environ["WS_CONNS"], os.environ["WS_WINDOW"]))
print("workers/threads: egressd, squid (workers), haproxy (nbthread), nginx"
      " (worker_processes) as BENCH_WORKERS; tinyproxy and sniproxy as they come."
      " bulk and idle of sniproxy, haproxy, nginx: through their TLS port;"
      " direct sni = direct connect (the same exchange).")

# egressd's targets, as ratios.
def v(label, name):
    return val.get((label, name))

def ratio(a, b):
    return a / b if a is not None and b else None

names = [c[0] for c in cols]
def best(label, peers):
    got = [(v(label, p), p) for p in peers if p in names and v(label, p) is not None]
    return max(got) if got else (None, None)

# The targets are ratios to null, the least a forward proxy costs in the
# same run on the same machine, and to the best peer.
def vs(label, ref):
    return ratio(v(label, "egressd"), v(label, ref))

def vs_best(label, peers):
    b = best(label, peers)
    return "%s (%s)" % (label.split(" (")[0], b[1]), ratio(v(label, "egressd"), b[0])

n = "null"
sni_peers = ["sniproxy", "haproxy", "nginx"]
connect_peers = ["squid", "tinyproxy"]
sni_best = vs_best("sni (conn/s)", sni_peers)
deny_best = vs_best("deny CONNECT (conn/s)", connect_peers)
denysni_best = vs_best("deny SNI (conn/s)", sni_peers)
checks = [
    ("CPU per CONNECT vs null", vs("CPU connect (us/conn)", n), "<=", 1.10, "x"),
    ("CPU per TLS connection vs null", vs("CPU sni (us/conn)", n), "<=", 1.10, "x"),
    ("CONNECT conn/s vs null", vs("connect (conn/s)", n), ">=", 0.95, "x"),
    ("SNI conn/s vs null", vs("sni (conn/s)", n), ">=", 0.95, "x"),
    ("vs best SNI peer: " + sni_best[0], sni_best[1], ">=", 1.10, "x"),
    ("CONNECT p99 vs null", vs("connect p99 (ms)", n), "<=", 1.10, "x"),
    ("SNI p99 vs null", vs("sni p99 (ms)", n), "<=", 1.10, "x"),
    ("CPU per HTTP request vs null", vs("CPU http (us/req)", n), "<=", 1.3, "x"),
    ("HTTP req/s vs null", vs("http keep-alive (req/s)", n), ">=", 0.9, "x"),
    ("bulk vs null", vs("bulk (Gbit/s each way)", n), ">=", 0.95, "x"),
    ("CPU per GiB vs null", vs("CPU bulk (s/GiB)", n), "<=", 1.0, "x"),
    ("RSS per idle tunnel (KiB)", v("idle RSS (KiB/tunnel)", "egressd"), "<=", 2, ""),
    ("vs best peer: " + deny_best[0], deny_best[1], ">=", 1.2, "x"),
    ("vs best peer: " + denysni_best[0], denysni_best[1], ">=", 1.2, "x"),
]
# Interception: against squid's ssl-bump, and the opaque tunnel of the same
# run; leaves minted once per worker at most (the warm-up's first requests).
sb = "squid-bump"
ileaves = leaf_counts("egressd")[0] if "egressd" in names else set()
icheck = [
    ("intercept conn/s vs " + sb, vs("intercept (conn/s)", sb), ">=", 2, "x"),
    ("intercept resumed conn/s vs " + sb, vs("intercept resumed (conn/s)", sb), ">=", 2, "x"),
    ("CPU per intercepted conn vs " + sb, vs("CPU intercept (us/conn)", sb), "<=", 0.5, "x"),
    ("CPU per resumed one vs " + sb, vs("CPU intercept resumed (us/conn)", sb), "<=", 0.5, "x"),
    ("bulk intercepted vs opaque tunnel", ratio(v("bulk intercepted (Gbit/s)", "egressd"),
                                                v("bulk TLS via tunnel (Gbit/s)", "egressd")),
     ">=", 0.5, "x"),
    ("leaves minted per worker (at most)",
     len(ileaves) / int(os.environ["WORKERS"]) if ileaves else None, "<=", 1, ""),
]
# WebSocket inside interception: against the same messages through the
# opaque tunnel of the same run.
def vs_tunnel(label):
    return ratio(v(label % "intercepted", "egressd"), v(label % "via tunnel", "egressd"))

wcheck = [
    c for size, text in WS_SIZES for c in (
        ("ws %s MiB/s vs opaque tunnel" % text,
         vs_tunnel("ws " + text + " %s (MiB/s)"), ">=", 0.8, "x"),
        ("CPU per MiB, ws %s, vs opaque tunnel" % text,
         vs_tunnel("CPU ws " + text + " %s (us/MiB)"), "<=", 1.5, "x"),
    )
]
extra = [c for group in (icheck, wcheck) if any(x is not None for _, x, _, _, _ in group)
         for c in group]
if extra:
    checks = [c for c in checks if c[1] is not None] + extra
if "egressd" in names:
    print("\negressd against its targets:")
    for what, x, op, goal, unit in checks:
        if x is None:
            print("  %-44s %10s   target %s %g%s   not measured" % (what, "-", op, goal, unit))
            continue
        met = {">=": x >= goal, "<=": x <= goal, ">": x > goal}[op]
        print("  %-44s %9.2f%s   target %s %g%s   %s"
              % (what, x, unit or " ", op, goal, unit, "met" if met else "MISSED"))
EOF
    echo "run.sh: the table could not be printed" >&2
    failed=1
}
if [ "$failed" -ne 0 ]; then
    echo "run.sh: some runs failed (see above and the table's notes)" >&2
    exit 1
fi
