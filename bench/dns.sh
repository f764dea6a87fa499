#!/usr/bin/env bash
# bench/dns.sh - egressd's policy DNS server beside dnsmasq configured as a
# forwarding allowlist resolver, under the same dns-load workloads, as one
# table.
#
#   bench/dns.sh [--smoke] [BUILD_DIR]
#
# BUILD_DIR defaults to build/release (configured with --buildtype=release
# -Doptimization=3 when missing).  The script re-executes itself under
# `unshare -n -m`: loopback only, and a tmpfs as its work directory (the
# access logs go there).  No server asks this machine's resolver: egressd
# has only its `resolver` line, dnsmasq runs with --no-resolv --no-hosts.
#
# The upstream: tests/egressd/dnsd.py on 127.0.0.53:53, authoritative for
# BENCH_NAMES (300) names nN.allowed.test, each with an address of its own
# in 10.99.0.0/16 and a TTL of 86400 s (both caches keep every name for the
# whole run), logging each query it gets: a measured run that reaches it
# was not answered from a cache, and the table says how often.
#
# The servers, each on port 5300 of its own address, all up from the start:
#   egressd      127.0.0.1  `dns-log off`
#   egressd-log  127.0.0.3  `dns-log all` (the default), to a log on the tmpfs
#   dnsmasq      127.0.0.2  --server=/allowed.test/127.0.0.53 --address=/#/
#   dnsmasq-log  127.0.0.4  the same, with --log-queries to a file on the tmpfs
# egressd: `workers` BENCH_WORKERS (2), `resolver 127.0.0.53`, a preset
# allowing *.allowed.test, `allow-range 10.99.0.0/16` (the names' addresses
# are private), `dns-rate-per-sandbox 0`, and dns-load's source address
# 127.0.0.9 bound to a sandbox through the admin API.  dnsmasq: one process
# (it has no workers), --cache-size=10000; more specific --server lines win
# over --address=/#/, which answers NXDOMAIN for every other name (man
# dnsmasq).  Before measuring, dig checks each server: an allowed name gets
# its address, a denied name and one outside both suffixes NXDOMAIN, and
# neither reaches the upstream.
#
# Workloads (dns-load, A queries, BENCH_WINDOW outstanding per thread over
# BENCH_SOCKETS source ports):
#   allowed  the allowed names drawn at random, NOERROR with each name's own
#            address expected; warmed up first (passes of 0.5 s, 16 new
#            source ports each, until one reaches the upstream no more:
#            every name in every egressd worker's cache and in dnsmasq's)
#   denied   a new name under denied.test each query, never the same twice
#            (no cache helps), NXDOMAIN expected
# For each run: answered queries/s, p50, p99, and the server's CPU per query
# (utime+stime of all its threads, /proc/PID/stat before and after).
# BENCH_ROUNDS rounds, the servers interleaved (egressd, dnsmasq,
# egressd-log, dnsmasq-log, egressd, ...); each cell the median round by
# rate (its latency with it; CPU: the median of the rounds'), then the
# ratio egressd / dnsmasq.
#
# --smoke: each run about 0.5 s, one round; fails when any answer is wrong,
# malformed or missing, a server does not start, or the table cannot be
# printed (tests/run.sh runs it).  A server that is not installed is left
# out with a note.
# Knobs (environment): BENCH_SERVERS (default "egressd dnsmasq egressd-log
# dnsmasq-log"), BENCH_WORKLOADS ("allowed denied"), BENCH_SECONDS (per
# run, 4; smoke 0.5), BENCH_ROUNDS (3; smoke 1), BENCH_WORKERS (2),
# BENCH_THREADS (dns-load threads, 1), BENCH_WINDOW (queries outstanding per
# thread, 64), BENCH_SOCKETS (source ports per thread, 8), BENCH_NAMES (300),
# BENCH_EGRESSD (the egressd to run, default BUILD_DIR/proxy/egressd),
# BENCH_PROFILE (a directory: perf record -g each measured egressd run into
# DIR/SERVER.RUN.data).
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
    -*) echo "dns.sh: unknown option $a" >&2 && exit 2 ;;
    *) build=$a ;;
    esac
done
build=${build:-$top/build/release}
case $build in /*) ;; *) build=$PWD/$build ;; esac

if [ -z "${EGRESS_DNS_BENCH_NETNS:-}" ]; then
    if [ ! -f "$build/build.ninja" ]; then
        meson setup --buildtype=release -Doptimization=3 "$build" "$top" >/dev/null || exit 1
    fi
    ninja -C "$build" bench/dns-load proxy/egressd >/dev/null || {
        echo "dns.sh: could not build dns-load and egressd in $build" >&2
        ninja -C "$build" bench/dns-load proxy/egressd 2>&1 | tail -n 20 >&2
        exit 1
    }
    export EGRESS_DNS_BENCH_NETNS=1
    exec unshare -n -m --propagation private -- bash "$0" "$@"
fi

ip link set lo up || exit 1
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

LOAD=$build/bench/dns-load
EGRESSD=${BENCH_EGRESSD:-$build/proxy/egressd}
DNSD=$top/tests/egressd/dnsd.py
SERVERS=${BENCH_SERVERS:-egressd dnsmasq egressd-log dnsmasq-log}
WORKLOADS=${BENCH_WORKLOADS:-allowed denied}
WORKERS=${BENCH_WORKERS:-2}
THREADS=${BENCH_THREADS:-1}
WINDOW=${BENCH_WINDOW:-64}
SOCKETS=${BENCH_SOCKETS:-8}
NAMES=${BENCH_NAMES:-300}
if [ "$smoke" = 1 ]; then
    SECONDS_RUN=${BENCH_SECONDS:-0.5} ROUNDS=${BENCH_ROUNDS:-1}
else
    SECONDS_RUN=${BENCH_SECONDS:-4} ROUNDS=${BENCH_ROUNDS:-3}
fi
PORT=5300
SRC=127.0.0.9 # dns-load's (and dig's) source: the sandbox's address
UPSTREAM=127.0.0.53
TTL=86400
# Warm-up passes: WARM_WINDOW queries over as many sockets (new source
# ports each pass, so every egressd worker gets some: a worker that got one
# socket would see its cold misses one at a time), fewer than egressd's
# max-lookups-per-sandbox (32), so no SERVFAIL while the caches are cold;
# until a pass reaches the upstream no more.
WARM_WINDOW=16
WARM_PASSES=6
CLK_TCK=$(getconf CLK_TCK)

T=$(mktemp -d "${TMPDIR:-/tmp}/egress-dns-bench.XXXXXX")
mount -t tmpfs -o size=25%,mode=0755 egress-dns-bench "$T" || exit 1
R=$T/results
mkdir -p "$R"
declare -A PID_OF ADDR_OF
UPSTREAM_PID=
PROFILE_PID=

cleanup() {
    local p
    [ -z "$PROFILE_PID" ] || kill -INT "$PROFILE_PID" 2>/dev/null
    for p in "${PID_OF[@]}" $UPSTREAM_PID; do
        kill -TERM "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
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
    echo "dns.sh: $*" >&2
    exit 1
}

for f in "$LOAD" "$EGRESSD" "$DNSD"; do
    [ -e "$f" ] || die "$f is missing"
done
command -v dig >/dev/null || die "dig is not installed (bind9-dnsutils)"

# ---------------------------------------------------------------------------
# The names and the upstream

# nN.allowed.test: 10.99.(N / 250).(N % 250 + 1), so every name has its own.
for i in $(seq "$NAMES"); do
    echo "n$i.allowed.test 10.99.$((i / 250)).$((i % 250 + 1))"
done >"$T/allowed.names"
awk -v ttl=$TTL '{ print $1, "A", $2, ttl }' "$T/allowed.names" >"$T/zone"
echo '*.denied.test' >"$T/denied.names"
FIRST_NAME=$(awk 'NR == 1 { print $1 }' "$T/allowed.names")
FIRST_ADDR=$(awk 'NR == 1 { print $2 }' "$T/allowed.names")

touch "$T/upstream.log"
python3 -S -u "$DNSD" --listen $UPSTREAM:53 --zone "$T/zone" --log "$T/upstream.log" \
    >"$T/dnsd.out" 2>&1 &
UPSTREAM_PID=$!
for _ in $(seq 100); do
    grep -q '^ready' "$T/dnsd.out" && break
    kill -0 $UPSTREAM_PID 2>/dev/null || break
    sleep 0.05
done
grep -q '^ready' "$T/dnsd.out" || die "the upstream (dnsd.py) did not start: $(cat "$T/dnsd.out")"
upstream_count() { wc -l <"$T/upstream.log"; }

# ---------------------------------------------------------------------------
# The servers: each start_* sets PID and VERSION.

start_egressd_as() { # start_egressd_as DIR ADDR LOGMODE
    local dir=$1 addr=$2 sb
    mkdir -p "$dir/policies" "$dir/state"
    printf '# the bench'"'"'s allowed names\n*.allowed.test\n' >"$dir/policies/bench.allow"
    cat >"$dir/egressd.conf" <<EOF
listen $addr:3128
admin unix:$dir/admin.sock
workers $WORKERS
resolver $UPSTREAM
policy-dir policies
default-policy bench
state-dir state
access-log access.log
allow-range 10.99.0.0/16
dns $addr:$PORT
dns-rate-per-sandbox 0
dns-log $3
EOF
    "$EGRESSD" -c "$dir/egressd.conf" >"$dir/out" 2>&1 &
    PID=$!
    VERSION="egressd $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo '?'), dns-log $3"
    # dns-load's address is bound to a sandbox, as a sandbox's is in a
    # deployment; a source without a binding would be REFUSED.
    sb='{"id":"bench","name":"dns-load","owner":"bench","addresses":["'$SRC'"],"policy":"bench"}'
    for _ in $(seq 100); do
        curl -q -sf --noproxy '*' -m 2 --unix-socket "$dir/admin.sock" -X PUT \
            -H 'Content-Type: application/json' --data-binary "$sb" \
            http://egressd/v1/sandboxes/bench >/dev/null 2>&1 && return 0
        kill -0 "$PID" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

start_dnsmasq_as() { # start_dnsmasq_as DIR ADDR [OPTION...]
    local dir=$1 addr=$2
    shift 2
    dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
        --bind-interfaces --listen-address="$addr" --port=$PORT --cache-size=10000 \
        --server=/allowed.test/$UPSTREAM --address=/#/ --pid-file="$dir/dnsmasq.pid" \
        --log-facility="$dir/dnsmasq.log" "$@" >"$dir/out" 2>&1 &
    PID=$!
    VERSION=$(dnsmasq --version | sed -n '1s/^Dnsmasq version \([^ ]*\).*/dnsmasq \1/p')
}
# start_server NAME DIR ADDR
start_server() {
    case $1 in
    egressd) start_egressd_as "$2" "$3" off ;;
    egressd-log) start_egressd_as "$2" "$3" all ;;
    dnsmasq) start_dnsmasq_as "$2" "$3" ;;
    dnsmasq-log) start_dnsmasq_as "$2" "$3" --log-queries ;;
    esac
}

address_of() {
    case $1 in
    egressd) echo 127.0.0.1 ;; dnsmasq) echo 127.0.0.2 ;;
    egressd-log) echo 127.0.0.3 ;; dnsmasq-log) echo 127.0.0.4 ;;
    esac
}
installed() {
    case $1 in egressd*) [ -x "$EGRESSD" ] ;; dnsmasq*) command -v dnsmasq >/dev/null ;; esac
}

# status_of ADDR NAME: the rcode dig gets for NAME's A from ADDR, and its
# addresses, on one line ("NOERROR 10.99.0.2").
status_of() {
    local out
    out=$(dig -b $SRC "@$1" -p $PORT +tries=1 +time=2 +noall +comments +answer "$2" A 2>&1)
    echo "$(sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<<"$out" | head -n 1)" \
        "$(awk '!/^;/ && NF >= 5 && $4 == "A" { print $5 }' <<<"$out" | tr '\n' ' ')"
}
# verify NAME: dig gets the first allowed name's address, NXDOMAIN for a
# denied name and for one outside both suffixes, and neither of those two
# reached the upstream.
verify() {
    local addr=${ADDR_OF[$1]} got bad=0 name
    got=$(status_of "$addr" "$FIRST_NAME")
    [ "$got" = "NOERROR $FIRST_ADDR " ] || {
        echo "dns.sh: $1: $FIRST_NAME: '$got', expected NOERROR $FIRST_ADDR" >&2
        bad=1
    }
    for name in "check-$1.denied.test" "check-$1.example.com"; do
        got=$(status_of "$addr" "$name")
        [ "$got" = "NXDOMAIN " ] || {
            echo "dns.sh: $1: $name: '$got', expected NXDOMAIN" >&2
            bad=1
        }
        ! grep -q "^$name " "$T/upstream.log" || {
            echo "dns.sh: $1 asked the upstream for $name" >&2
            bad=1
        }
    done
    return $bad
}

# ---------------------------------------------------------------------------
# Runs

failed=0
ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }'; }
# The whole machine's busy ticks (user, nice, system, irq, softirq; not
# steal): what the server, dns-load and anything else on the machine used.
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
meta() { echo "$1 $2 $3 $4" >>"$R/meta"; }
# profile_start NAME RUN, profile_stop: with BENCH_PROFILE, perf record -g
# of a measured egressd run.
profile_start() {
    case $1:$2 in egressd*:warmup*) return 0 ;; egressd*) ;; *) return 0 ;; esac
    [ -n "${BENCH_PROFILE:-}" ] || return 0
    mkdir -p "$BENCH_PROFILE"
    perf record -q -F 1999 -g -o "$BENCH_PROFILE/$1.$2.data" -p "${PID_OF[$1]}" 2>/dev/null &
    PROFILE_PID=$!
    sleep 0.2 # attached to every thread before the load starts
}
profile_stop() {
    [ -n "$PROFILE_PID" ] || return 0
    kill -INT $PROFILE_PID 2>/dev/null
    wait $PROFILE_PID
    PROFILE_PID=
}
# measure NAME RUN ARGS...: one dns-load run against NAME with the server's
# CPU and the upstream's queries meanwhile; its JSON in $R/NAME.RUN.json.
measure() {
    local name=$1 run=$2 pid=${PID_OF[$1]} out=$R/$1.$2 t0 u0 m0 rc
    shift 2
    u0=$(upstream_count)
    t0=$(ticks "$pid")
    m0=$(machine_ticks)
    profile_start "$name" "$run"
    "$LOAD" --server "${ADDR_OF[$name]}:$PORT" --source $SRC --threads "$THREADS" \
        --sockets "$SOCKETS" --label "$name $run" --json "$@" >"$out.json" 2>"$out.err"
    rc=$?
    meta "$name" "$run" machine $(($(machine_ticks) - m0))
    profile_stop
    meta "$name" "$run" ticks $(($(ticks "$pid") - t0))
    meta "$name" "$run" upstream $(($(upstream_count) - u0))
    kill -0 "$pid" 2>/dev/null || {
        echo "dns.sh: $name died during $run" >&2
        failed=1
    }
    [ -s "$out.json" ] || {
        echo "dns.sh: dns-load $name $run gave no result (exit $rc)" >&2
        failed=1
    }
    [ "$rc" -eq 0 ] && return 0
    # Lost queries under load are the server's figure (noted in the table);
    # a wrong answer, or anything missing in a smoke run, is a failure.
    if [ "$smoke" = 1 ] || ! grep -q '"error_total":0,' "$out.json"; then
        failed=1
        echo "dns.sh: $name $run: $(cat "$out.json")" >&2
        sed "s/^/  $name $run: /" "$out.err" | head -n 5 >&2
    fi
}
# warm NAME: every allowed name into every one of NAME's caches.
warm() {
    local pass u0
    for pass in $(seq $WARM_PASSES); do
        u0=$(upstream_count)
        measure "$1" "warmup$pass" --names "$T/allowed.names" --expect NOERROR \
            --window $WARM_WINDOW --sockets $WARM_WINDOW --seconds 0.5
        if [ "$(upstream_count)" -eq "$u0" ]; then
            echo "$1: warm after $pass warm-up passes (the last one all from the cache)"
            return 0
        fi
    done
    echo "dns.sh: $1 still asked the upstream after $WARM_PASSES warm-up passes" >&2
}
workload() { # workload NAME WORK RUN
    case $2 in
    allowed) measure "$1" "$3" --names "$T/allowed.names" --expect NOERROR \
        --window "$WINDOW" --seconds "$SECONDS_RUN" ;;
    denied) measure "$1" "$3" --names "$T/denied.names" --expect NXDOMAIN \
        --window "$WINDOW" --seconds "$SECONDS_RUN" ;;
    *) die "unknown workload '$2' in BENCH_WORKLOADS" ;;
    esac
}

echo "# $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), kernel $(uname -r);" \
    "load $(cut -d' ' -f1-3 /proc/loadavg); egressd workers $WORKERS; dns-load $THREADS thread(s)," \
    "window $WINDOW over $SOCKETS sockets; $NAMES allowed names; ${SECONDS_RUN}s per run," \
    "$ROUNDS round(s)"
UP=()
for name in $SERVERS; do
    addr=$(address_of "$name")
    [ -n "$addr" ] || die "unknown server '$name' in BENCH_SERVERS"
    if ! installed "$name"; then
        echo "dns.sh: $name is not installed: left out" >&2
        echo "$name not-installed" >>"$R/columns"
        continue
    fi
    dir=$T/$name
    mkdir -p "$dir"
    PID=
    VERSION=$name
    ADDR_OF[$name]=$addr
    if ! start_server "$name" "$dir" "$addr"; then
        echo "dns.sh: $name did not start:" >&2
        tail -n 20 "$dir/out" | sed 's/^/  /' >&2
        failed=1
        [ -z "$PID" ] || PID_OF[$name]=$PID
        echo "$name failed-to-start" >>"$R/columns"
        continue
    fi
    PID_OF[$name]=$PID
    for _ in $(seq 50); do
        [ -n "$(status_of "$addr" "$FIRST_NAME" | cut -d' ' -f1)" ] && break
        sleep 0.1
    done
    if ! verify "$name"; then
        failed=1
        echo "$name wrong-answers" >>"$R/columns"
        continue
    fi
    echo "$name: $VERSION, pid $PID, $addr:$PORT"
    echo "$name $(echo "$VERSION" | tr ' ' '_')" >>"$R/columns"
    UP+=("$name")
done
# Every allowed name into every cache before anything is measured.
case " $WORKLOADS " in *" allowed "*) warm=${UP[*]} ;; *) warm= ;; esac
for name in $warm; do
    warm "$name"
done
for round in $(seq "$ROUNDS"); do
    for work in $WORKLOADS; do
        for name in "${UP[@]}"; do
            workload "$name" "$work" "$work.r$round"
        done
    done
done
for name in "${UP[@]}"; do
    kill -TERM "${PID_OF[$name]}" 2>/dev/null
    wait "${PID_OF[$name]}" 2>/dev/null
    unset "PID_OF[$name]"
    case $name in
    egressd*) echo "$name: $(grep -c '"mode":"dns"' "$T/$name/access.log" 2>/dev/null) dns lines in its access log" ;;
    dnsmasq*) echo "$name: $(grep -c ' query\[' "$T/$name/dnsmasq.log" 2>/dev/null) query lines in its log" ;;
    esac
done

CLK_TCK=$CLK_TCK WORKLOADS=$WORKLOADS python3 - "$R" <<'EOF' || {
import json, os, sys
r = sys.argv[1]
tck = int(os.environ["CLK_TCK"])
cols, meta, notes = [], {}, []
for line in open(os.path.join(r, "columns")):
    name, version = line.split()
    cols.append((name, version))
try:
    for line in open(os.path.join(r, "meta")):
        name, run, key, value = line.split()
        meta[name, run, key] = float(value)
except OSError:
    pass

def load(name, run):
    try:
        with open(os.path.join(r, "%s.%s.json" % (name, run))) as f:
            return json.loads(f.read())
    except (OSError, ValueError):
        return None

def rounds(name, work):
    """Every round's result of a workload: (json, run)."""
    got, k = [], 1
    while os.path.exists(os.path.join(r, "%s.%s.r%d.json" % (name, work, k))):
        run = "%s.r%d" % (work, k)
        j = load(name, run)
        if j is None:
            notes.append("%s %s: no result" % (name, run))
        else:
            if j["lost"] or j["error_total"]:
                notes.append("%s %s: lost %d, errors %s" % (name, run, j["lost"],
                             ",".join("%s=%d" % kv for kv in j["errors"].items() if kv[1]) or "0"))
            got.append((j, run))
        k += 1
    return got

def pick(name, work):
    """The median round by rate."""
    got = sorted(rounds(name, work), key=lambda x: x[0]["rate"])
    return got[len(got) // 2] if got else (None, None)

def cpu_us(name, j, run):
    t = meta.get((name, run, "ticks"))
    return t * 1e6 / tck / j["answered"] if t is not None and j["answered"] else None

def median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None

def cell(name, work, what):
    j, run = pick(name, work)
    if j is None:
        return None
    if what == "rate":
        return j["rate"]
    if what in ("p50_us", "p99_us"):
        return j[what]
    if what == "cpu":
        return median(cpu_us(name, x, k) for x, k in rounds(name, work))
    if what == "load":
        return 100 * j["cpu_s"] / j["seconds"] if j["seconds"] else None
    if what == "others":
        # The machine's CPU beside the server's and dns-load's: other work
        # on the machine (the upstream, tools, someone else's jobs) that
        # shared the cores with this round.
        t, m = meta.get((name, run, "ticks")), meta.get((name, run, "machine"))
        if t is None or m is None or not j["seconds"]:
            return None
        return max(0.0, 100 * (m / tck - t / tck - j["cpu_s"]) / j["seconds"])
    if what == "upstream":
        return sum(meta.get((name, k, "upstream"), 0) for _, k in rounds(name, work))

rows = []
for w in os.environ["WORKLOADS"].split():
    rows += [("%s (q/s)" % w, w, "rate", "%.0f"),
             ("%s p50 (us)" % w, w, "p50_us", "%.0f"),
             ("%s p99 (us)" % w, w, "p99_us", "%.0f"),
             ("CPU %s (us/query)" % w, w, "cpu", "%.2f"),
             ("dns-load busy, %s" % w, w, "load", "%.0f%%"),
             ("others' CPU, %s" % w, w, "others", "%.0f%%"),
             ("upstream queries, %s" % w, w, "upstream", "%.0f")]
val = {}
w0 = max(len(x[0]) for x in rows) + 1
widths = [max(12, len(n) + 1) for n, _ in cols]
out = ["%-*s" % (w0, "") + "".join("%*s" % (w, n) for (n, _), w in zip(cols, widths))]
for label, work, what, fmt in rows:
    cells = []
    for (name, version), w in zip(cols, widths):
        v = cell(name, work, what) if version not in ("not-installed", "failed-to-start",
                                                      "wrong-answers") else None
        val[label, name] = v
        cells.append("%*s" % (w, fmt % v if v is not None else "-"))
    out.append("%-*s" % (w0, label) + "".join(cells))
print("\n".join(out))
for name, version in cols:
    if version in ("not-installed", "failed-to-start", "wrong-answers"):
        print("%s: %s" % (name, version.replace("-", " ")))
    else:
        print("%s: %s" % (name, version.replace("_", " ")))
for n in sorted(set(notes)):
    print("* " + n)
print("median round by rate per cell (p50/p99 from it; CPU: the median of the rounds'); "
      "upstream queries: the sum over the measured rounds (0: every answer from the cache)")

def ratio(label, a, b):
    x, y = val.get((label, a)), val.get((label, b))
    return x / y if x is not None and y else None

print()
for label, goal in (("allowed (q/s)", 2.0), ("denied (q/s)", None),
                    ("CPU allowed (us/query)", None), ("CPU denied (us/query)", None)):
    for a, b in (("egressd", "dnsmasq"), ("egressd-log", "dnsmasq-log")):
        x = ratio(label, a, b)
        if x is None:
            continue
        line = "  %-24s %-26s %6.2fx" % (label, "%s / %s" % (a, b), x)
        if goal and a == "egressd":
            line += "   target >= %gx   %s" % (goal, "met" if x >= goal else "MISSED")
        print(line)
EOF
    echo "dns.sh: the table could not be printed" >&2
    failed=1
}
if [ "$failed" -ne 0 ]; then
    echo "dns.sh: some runs failed (see above and the table's notes)" >&2
    exit 1
fi
