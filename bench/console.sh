#!/usr/bin/env bash
# bench/console.sh [BUILD_DIR] - the operator console (sandboxctl console)
# under a flood of denials, and what following egressd's denials costs
# egressd.  Three parts (BENCH_PARTS, default "rates flood page"):
#
#   rates  egressd (release, BENCH_WORKERS workers) under two egress-load
#          runs at once for BENCH_SECONDS: keep-alive HTTP GETs to an
#          allowed sink (BENCH_CONNS connections) and CONNECTs to a denied
#          name (403, BENCH_DENY_CONNS connections), row by row:
#            a   nobody follows /v1/denials?follow=1
#            b   one curl -N follows it and reads everything
#            c   sandboxctl console follows it (its reader thread), with
#                BENCH_RATE_SSE curl -N clients on /api/denials/stream
#            d   a follower that never reads
#            a2  nobody again (the run-to-run noise)
#          BENCH_ROUNDS rounds of all rows; per row req/s, p50, p99 of
#          each workload, the denials/s egressd made, and CPU shares.
#   flood  BENCH_SANDBOXES sandboxes bound in egressd (PUT /v1/sandboxes,
#          127.0.1.1.., owners spread over 4 users); a paced load (one new
#          connection per denial, GET http://denied.test/..., round robin
#          over the sandboxes' addresses) of BENCH_FLOOD_RATE denials/s for
#          BENCH_FLOOD_SECONDS; a fresh console per row, with the SSE
#          subscribers of BENCH_SUBSCRIBERS ("R" readers, "R+n" readers and
#          one that never reads); the console's VmRSS at start, sampled
#          each second, VmHWM, at the end; its CPU; what each subscriber
#          got against what egressd made; and that one more stream past
#          the console's 64 answers 503.
#   page   Debian's Chromium (playwright-core) signed in as an admin on
#          /#denials for BENCH_PAGE_SECONDS of the same flood:
#          window.consoleStats and the browser's own frame rate
#          (requestAnimationFrame), bench/console-page.mjs; with
#          BENCH_PAGE_TRACE=1 also where its main thread's long tasks go
#          (a timeline trace).
#
# Needs root (unshare -n), curl, python3, node and /usr/bin/chromium for
# the page (playwright-core in build/console-node, which
# tests/console/console.t installs).  Re-executes itself in a network
# namespace of its own: loopback only, every address in 127.0.0.0/8; egressd
# takes names from a hosts file, nothing asks a resolver.  The Proxmox
# simulator (tests/pve-sim) signs people in.
# BENCH_PIN=1 puts egressd alone on CPU 0 and everything else the bench
# runs (load, sinks, followers, the console, the simulator) on CPU 1
# (taskset): then a row's rate is egressd's own, not its share of a
# machine the console also uses (with 2 CPUs and no pinning, anything the
# console spends is taken from egressd or from the load generator).
# Knobs: BENCH_PIN (0), BENCH_ROUNDS (3), BENCH_SECONDS (15), BENCH_CONNS (50),
# BENCH_DENY_CONNS (50), BENCH_THREADS (1), BENCH_WORKERS (2), BENCH_RATE_SSE
# (4), BENCH_SANDBOXES (200), BENCH_FLOOD_RATE (1000), BENCH_FLOOD_SECONDS
# (60), BENCH_SUBSCRIBERS ("0 1 16 64 0+n 63+n"), BENCH_PAGE_SECONDS (30),
# BENCH_PAGE_TRACE (0),
# BENCH_PARTS.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
case $build in /*) ;; *) build=$PWD/$build ;; esac
NODE_DIR=$top/build/console-node
if [ -z "${EGRESS_BENCH_NETNS:-}" ]; then
    [ -f "$build/build.ninja" ] || meson setup --buildtype=release "$build" "$top" >/dev/null || exit 1
    ninja -C "$build" bench/egress-load bench/egress-sink proxy/egressd \
        sandbox-orchestrator/sandboxctl >/dev/null || exit 1
    export EGRESS_BENCH_NETNS=1
    exec unshare -n -- bash "$0" "$build"
fi
ip link set lo up || exit 1
EGD_RUN=()
if [ "${BENCH_PIN:-0}" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || { echo "console.sh: BENCH_PIN=1 needs two CPUs" >&2; exit 1; }
    taskset -pc 1 $$ >/dev/null || exit 1
    EGD_RUN=(taskset -c 0)
fi
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
    CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR CURL_HOME NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE
ROUNDS=${BENCH_ROUNDS:-3} SECS=${BENCH_SECONDS:-15} CONNS=${BENCH_CONNS:-50}
DENY_CONNS=${BENCH_DENY_CONNS:-50} THREADS=${BENCH_THREADS:-1} WORKERS=${BENCH_WORKERS:-2}
RATE_SSE=${BENCH_RATE_SSE:-4} NSBX=${BENCH_SANDBOXES:-200} FLOOD_RATE=${BENCH_FLOOD_RATE:-1000}
FLOOD_SECS=${BENCH_FLOOD_SECONDS:-60} SUBS=${BENCH_SUBSCRIBERS:-0 1 16 64 0+n 63+n}
PAGE_SECS=${BENCH_PAGE_SECONDS:-30} PARTS=${BENCH_PARTS:-rates flood page}
LOAD=$build/bench/egress-load SINK=$build/bench/egress-sink
EGD_BIN=$build/proxy/egressd SBX_BIN=$build/sandbox-orchestrator/sandboxctl
HZ=$(getconf CLK_TCK)
T=$(mktemp -d /tmp/bench-console.XXXXXX)
PIDS=() CONSOLE_PID="" EGD=""
. "$top/tests/pve-sim/lib.sh"
cleanup() {
    local p
    [ -n "$CONSOLE_PID" ] && kill "$CONSOLE_PID" 2>/dev/null
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$EGD" ] && kill "$EGD" 2>/dev/null
    pve_sim_stop
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
die() {
    echo "console.sh: $*" >&2
    exit 1
}
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# ---------------------------------------------------------------------------
# Helpers in Python: the paced flood, a follower that never reads, sums.
cat >"$T/tool.py" <<'EOF'
import json, os, select, socket, sys, time

def flood(proxy, rate, seconds, first, count, host):
    """One connection per denial, round robin over `count` source
    addresses from `first`, paced at `rate` a second: GET
    http://HOST/flood/N, the answer read to its end (egressd closes)."""
    paddr, pport = proxy.rsplit(":", 1)
    base = list(map(int, first.split(".")))
    addrs = []
    for i in range(count):
        a = base[:]
        a[3] += i
        while a[3] > 255:
            a[3] -= 255
            a[2] += 1
        addrs.append(".".join(map(str, a)))
    ep = select.epoll()
    conns = {}  # fd -> [sock, t0, buf, sent]
    made = ok = other = errors = 0
    status = {}
    lat = []
    start = time.monotonic()
    end = start + seconds
    started = 0
    cpu0 = os.times()
    while True:
        now = time.monotonic()
        if now < end:
            due = min(int((now - start) * rate) - started, 256)
            for _ in range(max(due, 0)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.IPPROTO_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT
                try:
                    s.bind((addrs[started % count], 0))
                    s.setblocking(False)
                    s.connect_ex((paddr, int(pport)))
                except OSError:
                    errors += 1
                    s.close()
                    started += 1
                    continue
                req = ("GET http://%s/flood/%d HTTP/1.1\r\nHost: %s\r\nUser-Agent: console-flood\r\n\r\n"
                       % (host, started, host)).encode()
                conns[s.fileno()] = [s, now, b"", req]
                ep.register(s.fileno(), select.EPOLLOUT)
                started += 1
                made += 1
        elif not conns or now > end + 10:
            break
        nxt = start + (started + 1) / rate
        timeout = max(0.0, min(nxt - time.monotonic(), 0.05)) if now < end else 0.1
        for fd, ev in ep.poll(timeout):
            c = conns.get(fd)
            if c is None:
                continue
            s = c[0]
            try:
                if c[3] is not None and ev & select.EPOLLOUT:
                    s.send(c[3])
                    c[3] = None
                    ep.modify(fd, select.EPOLLIN)
                    continue
                d = s.recv(65536)
            except OSError:
                d = None
            if d:
                c[2] += d
                continue
            ep.unregister(fd)
            del conns[fd]
            s.close()
            if d is None:
                errors += 1
                continue
            code = c[2][9:12].decode("ascii", "replace")
            status[code] = status.get(code, 0) + 1
            if code == "403":
                ok += 1
            else:
                other += 1
            lat.append(time.monotonic() - c[1])
    for c in conns.values():
        c[0].close()
        errors += 1
    cpu1 = os.times()
    wall = time.monotonic() - start
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] * 1000 if lat else 0
    print(json.dumps({"made": made, "denied": ok, "other": other, "errors": errors, "status": status,
                      "rate": made / seconds, "p50_ms": round(pct(.5), 2), "p99_ms": round(pct(.99), 2),
                      "cpu_s": round(cpu1.user + cpu1.system - cpu0.user - cpu0.system, 2),
                      "wall_s": round(wall, 2)}), flush=True)

def nonreader(kind, where, path, cookie, src):
    """A subscriber that sends its request and never reads a byte."""
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(where)
    else:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if src:
            s.bind((src, 0))
        h, p = where.rsplit(":", 1)
        s.connect((h, int(p)))
    head = "GET %s HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n" % path
    if cookie:
        head += "Cookie: %s\r\n" % cookie
    s.sendall((head + "\r\n").encode())
    print("connected", flush=True)
    while True:
        time.sleep(3600)

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "flood":
        flood(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], int(sys.argv[6]), sys.argv[7])
    elif cmd == "nonreader":
        nonreader(*sys.argv[2:7])
EOF
TOOL="python3 -S -u $T/tool.py"

# Counting what a stream carried: egressd's (one `event: denial` each) and
# the console's (`event: denials`, a JSON array of them).  Prints at EOF
# "denials events lost_events lost_denials nameless".
AWK_COUNT='
/^event: denial$/ { n++; ev++; next }
/^event: lost/ { le++; next }
/^data: \{"lost":/ { s = $0; gsub(/[^0-9]/, "", s); lost += s; next }
/^data: \[/ { n += gsub(/"cseq":/, "&"); nul += gsub(/"name":null/, "&"); ev++; next }
END { printf "%d %d %d %d %d\n", n, ev, le, lost, nul }'

# utime+stime (ticks) of a process and its threads; machine busy ticks.
ticks() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 }' || echo 0; }
# The same of this script's whole tree (every process it started and
# still runs, and what its reaped children spent): "ours"; the machine's
# busy ticks less ours are others' (other jobs on the machine).
ours_ticks() {
    ps -e -o pid=,ppid= | awk -v root=$$ '
        { kids[$2] = kids[$2] " " $1 }
        END { q[1] = root; n = 1
              for (i = 1; i <= n; i++) { print q[i]; m = split(kids[q[i]], k, " ")
                                         for (j = 1; j <= m; j++) q[++n] = k[j] } }' |
        while read -r p; do
            sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null |
                awk -v r=$((p == $$)) '{ print $12 + $13 + (r ? $14 + $15 : 0) }'
        done | awk '{ s += $1 } END { print s + 0 }'
}
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
rss_kib() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status" 2>/dev/null; }
admin() { curl -q -sS --noproxy '*' -m 10 --unix-socket "$T/egressd/admin.sock" "$@"; }
egd_seq() { admin http://egressd/v1/denials | python3 -c 'import json,sys; print(json.load(sys.stdin)["seq"])'; }

# ---------------------------------------------------------------------------
# The origins, egressd, the Proxmox simulator.
printf '127.0.0.16 sink.test\n127.0.0.18 denied.test\n' >"$T/hosts"
"$SINK" --listen 127.0.0.16:8000 --http --reply-bytes 4096 >"$T/sink-http.out" 2>&1 &
PIDS+=($!)
"$SINK" --listen 127.0.0.18:4443 --tls-like --reply-bytes 4096 >"$T/sink-denied.out" 2>&1 &
PIDS+=($!)
mkdir -p "$T/egressd/policies" "$T/egressd/state"
printf '# the allowed half of the load\nsink.test:8000\n' >"$T/egressd/policies/bench.allow"
printf '[{"id":"bench","name":"egress-load","owner":"bench","addresses":["127.0.0.1"],"policy":"bench"}]\n' \
    >"$T/egressd/state/sandboxes.json"
chmod 600 "$T/egressd/state/sandboxes.json"
cat >"$T/egressd/egressd.conf" <<EOF
listen 127.0.0.1:3128
admin unix:$T/egressd/admin.sock
workers $WORKERS
hosts-file $T/hosts
policy-dir policies
default-policy bench
state-dir state
access-log /dev/null
allow-range 127.0.0.16/28
max-conns 20000
max-conns-per-sandbox 20000
EOF
"${EGD_RUN[@]}" "$EGD_BIN" -c "$T/egressd/egressd.conf" >"$T/egressd.out" 2>&1 &
EGD=$!
for ((i = 0; i < 100; i++)); do
    admin -o /dev/null http://egressd/v1/status 2>/dev/null && break
    sleep 0.05
done
admin -o /dev/null http://egressd/v1/status || die "egressd did not start: $(tail -n 3 "$T/egressd.out")"

# Users: ops@pve is an admin (no TOTP: curl signs in too), the owners
# are alice, bob, carol and dave @pve.  The pool holds NSBX sandboxes
# (VMs 1001.., stopped, each with its sandboxctl description: owner,
# policy bench, the address the flood sends from), the same ones
# bind_sandboxes binds in egressd: the sandboxes page lists them all.
# (the sandboxes expire at SBX_EXPIRES, in Proxmox and in egressd alike:
# the console's sandboxes page finds both in step)
SBX_EXPIRES=$(date -u -d '+4 hours' +%Y-%m-%dT%H:%M:%SZ)
world=$(python3 - "$NSBX" "$SBX_EXPIRES" <<'EOF'
import json, sys, time
n, expires = int(sys.argv[1]), sys.argv[2]
now = time.time()
iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
owners = ["alice", "bob", "carol", "dave"]
vms = []
for i in range(n):
    a = 1 + i
    addr = "127.0.%d.%d" % (1 + (a - 1) // 254, 1 + (a - 1) % 254)
    desc = ("Sandbox managed by sandboxctl: edit with `sandboxctl extend`, not by hand.\n\n"
            "sandboxctl-sandbox v1\nowner: %s\ncreated: %s\nexpires: %s\npolicy: bench\n"
            "address: %s\nallow:\n" % (owners[i % 4], iso(now), expires, addr))
    vms.append({"vmid": 1001 + i, "name": "sandbox-%03d" % (i + 1), "pool": "sandboxes",
                "description": desc, "config": {"cores": 2, "memory": 4096}})
privs = ("VM.Allocate VM.Audit VM.Config.CPU VM.Config.Memory VM.Config.Network VM.Config.Cloudinit "
         "VM.Config.Options VM.PowerMgmt VM.Snapshot VM.Snapshot.Rollback Pool.Audit "
         "VM.GuestAgent.Unrestricted").split()
tpl = {"net0": "virtio=BC:24:11:00:23:28,bridge=vmbr99,firewall=1", "memory": "2048"}
print(json.dumps({
    "nodes": [{"name": "pve1", "maxmem": 68719476736, "mem": 8589934592, "maxcpu": 16}],
    "storage": "local-lvm", "bridge": "vmbr99", "pool": "sandboxes",
    "templates": [{"node": "pve1", "vmid": 9000, "name": "agent-template", "config": tpl}],
    "cluster_firewall": True,
    "tokens": [{"id": "sandboxctl@pve!ctl", "secret": "5f0c7a2e-1111-4222-8333-944455556666",
                "privsep": True,
                "acl": {"/pool/sandboxes": privs, "/vms/9000": ["VM.Clone", "VM.Audit"],
                        "/nodes": ["Sys.Audit"], "/access/groups": ["Sys.Audit"]}}],
    "users": [{"userid": "ops@pve", "password": "ops-pw-1"}] +
             [{"userid": u + "@pve", "password": u + "-pw-1"} for u in ("alice", "bob", "carol", "dave")],
    "groups": [{"groupid": "sandbox-admins", "members": ["ops@pve"]}],
    "vms": vms,
}))
EOF
)
pve_sim_start 9 "$world" >"$T/sim.start" 2>&1 || die "the Proxmox simulator did not start: $(tail -n 5 "$T/sim.start")"
pve_sim_token_file 'sandboxctl@pve!ctl=5f0c7a2e-1111-4222-8333-944455556666' "$T/pve-token"
mkdir -p "$T/sbx-state"
cat >"$T/sandboxctl.conf" <<EOF
pve-url $PVE_SIM_BASE
pve-token-file $T/pve-token
pve-ca-file $PVE_SIM_CA
node auto
template pve1:9000
pool sandboxes
storage local-lvm
bridge vmbr99
ip-pool 10.99.0.10-10.99.0.250/24
gateway 10.99.0.1
proxy 127.0.0.1:3128
egressd-admin unix:$T/egressd/admin.sock
state-dir $T/sbx-state
console-admin-group sandbox-admins
console-owner-realm pve
console-audit-log $T/audit.log
EOF

# console_start: a fresh console, ops@pve signed in (COOKIE), its reader
# connected to egressd.
console_start() {
    local i
    rm -f "$T/console.port"
    "$SBX_BIN" -c "$T/sandboxctl.conf" console --listen 127.0.0.1:0 --port-file "$T/console.port" \
        2>>"$T/console.err" &
    CONSOLE_PID=$!
    for ((i = 0; i < 100; i++)); do
        [ -s "$T/console.port" ] && break
        kill -0 "$CONSOLE_PID" 2>/dev/null || die "the console exited: $(tail -n 3 "$T/console.err")"
        sleep 0.1
    done
    URL=http://127.0.0.1:$(cat "$T/console.port")
    COOKIE=$(curl -q -sS -m 20 -D - -o "$T/login.json" -H 'Content-Type: application/json' \
        --data-binary '{"username":"ops","password":"ops-pw-1","realm":"pve"}' "$URL/api/login" |
        tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: \(egc_session=[^;]*\).*/\1/p')
    [ -n "$COOKIE" ] || die "no sign-in: $(cat "$T/login.json")"
    for ((i = 0; i < 100; i++)); do
        curl -q -s -m 5 -H "Cookie: $COOKIE" "$URL/api/sources" | grep -q '"connected": *true' && return 0
        sleep 0.1
    done
    die "the console's reader did not connect to egressd: $(curl -q -s -H "Cookie: $COOKIE" "$URL/api/sources")"
}
console_stop() {
    [ -n "$CONSOLE_PID" ] || return 0
    kill "$CONSOLE_PID" 2>/dev/null
    wait "$CONSOLE_PID" 2>/dev/null
    CONSOLE_PID=
}
# sse_start N FIRST: N reading subscribers of the console's stream, the
# i-th from 127.0.2.(FIRST+i) (the console takes 64 connections per
# address); SSE_PIDS their curls, counts in $T/sse.K.
SSE_PIDS=()
sse_start() {
    local i k
    for ((i = 0; i < $1; i++)); do
        k=$(($2 + i))
        curl -q -sN --interface "127.0.2.$k" -H "Cookie: $COOKIE" -H 'Accept: text/event-stream' \
            "$URL/api/denials/stream" > >(awk "$AWK_COUNT" >"$T/sse.$k") 2>/dev/null &
        SSE_PIDS+=($!)
    done
}
sse_stop() {
    local p
    for p in "${SSE_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${SSE_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    SSE_PIDS=()
    sleep 0.5 # the counters write at EOF
}
# nonreader_start unix|tcp WHERE PATH [COOKIE SRC]: NR_PID.
nonreader_start() {
    $TOOL nonreader "$1" "$2" "$3" "${4:-}" "${5:-}" >"$T/nonreader.out" 2>&1 &
    NR_PID=$!
    for ((i = 0; i < 50; i++)); do
        grep -q connected "$T/nonreader.out" && return 0
        sleep 0.1
    done
    die "the non-reading subscriber did not connect: $(cat "$T/nonreader.out")"
}
nonreader_stop() {
    kill "$NR_PID" 2>/dev/null
    wait "$NR_PID" 2>/dev/null
}

# ---------------------------------------------------------------------------
# Part 1: egressd's rates with and without followers.
rate_row() { # NAME ROUND
    local name=$1 round=$2 e0 e1 m0 m1 c0=0 c1=0 s0 s1 f
    s0=$(egd_seq)
    e0=$(ticks "$EGD") m0=$(machine_ticks) o0=$(ours_ticks)
    [ -n "$CONSOLE_PID" ] && c0=$(ticks "$CONSOLE_PID")
    "$LOAD" --mode http --proxy 127.0.0.1:3128 --target sink.test:8000 --conns "$CONNS" \
        --threads "$THREADS" --duration "$SECS" --label allowed >"$T/load-http.out" 2>"$T/load-http.err" &
    local lh=$!
    "$LOAD" --mode deny --proxy 127.0.0.1:3128 --target denied.test:4443 --conns "$DENY_CONNS" \
        --threads "$THREADS" --duration "$SECS" --label denied >"$T/load-deny.out" 2>"$T/load-deny.err" &
    local ld=$!
    wait "$lh" "$ld"
    e1=$(ticks "$EGD") m1=$(machine_ticks) o1=$(ours_ticks)
    [ -n "$CONSOLE_PID" ] && c1=$(ticks "$CONSOLE_PID")
    s1=$(egd_seq)
    python3 - "$name" "$round" "$(grep '^{' "$T/load-http.out" | tail -n 1)" \
        "$(grep '^{' "$T/load-deny.out" | tail -n 1)" $((e1 - e0)) $((c1 - c0)) $((m1 - m0)) \
        $((s1 - s0)) "$HZ" "$SECS" $((m1 - m0 - o1 + o0)) >>"$T/rates.jsonl" <<'EOF'
import json, sys
name, rnd, h, d = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
egd, con, mach, denials, hz, secs, others = (int(x) for x in sys.argv[5:12])
load_cpu = h["cpu_s"] + d["cpu_s"]
print(json.dumps({"row": name, "round": rnd,
    "http_rate": h["rate"], "http_p50": h["p50_us"], "http_p99": h["p99_us"], "http_err": h["error_total"],
    "deny_rate": d["rate"], "deny_p50": d["p50_us"], "deny_p99": d["p99_us"], "deny_err": d["error_total"],
    "denials_s": denials / secs, "egd_cpu": egd / hz / secs, "con_cpu": con / hz / secs,
    "load_cpu": load_cpu / secs, "machine": mach / hz / secs, "others": others / hz / secs,
    "egd_us_per_req": egd / hz * 1e6 / max(1, h["total"] + d["total"])}))
EOF
    tail -n 1 "$T/rates.jsonl" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read())
print("  round %d %-3s http %7.0f req/s p50 %5.2f p99 %5.2f ms | deny %7.0f/s p50 %5.2f p99 %5.2f ms | %6.0f denials/s | egressd %3.0f%% (%4.1f us/req) console %3.0f%% load %3.0f%% all %3.0f%% others %3.0f%% of a core"
      % (j["round"], j["row"], j["http_rate"], j["http_p50"]/1e3, j["http_p99"]/1e3, j["deny_rate"],
         j["deny_p50"]/1e3, j["deny_p99"]/1e3, j["denials_s"], j["egd_cpu"]*100, j["egd_us_per_req"], j["con_cpu"]*100,
         j["load_cpu"]*100, j["machine"]*100, j["others"]*100))'
    for f in "$T/load-http.err" "$T/load-deny.err"; do
        grep -v '^$' "$f" | head -n 3 | sed 's/^/    (egress-load) /'
    done
}

if has_part rates; then
    echo "== egressd with and without followers: $SECS s a row, $ROUNDS rounds, http $CONNS conns + deny $DENY_CONNS conns, $WORKERS workers${EGD_RUN:+, egressd alone on CPU 0 and the rest on CPU 1}"
    "$LOAD" --mode http --proxy 127.0.0.1:3128 --target sink.test:8000 --conns 10 --total 2000 >/dev/null 2>&1
    "$LOAD" --mode deny --proxy 127.0.0.1:3128 --target denied.test:4443 --conns 10 --total 2000 >/dev/null 2>&1
    : >"$T/follow.counts"
    for ((r = 1; r <= ROUNDS; r++)); do
        rate_row a "$r"
        # b: one curl reading everything
        s0=$(egd_seq)
        curl -q -sN --unix-socket "$T/egressd/admin.sock" 'http://egressd/v1/denials?follow=1' \
            > >(awk "$AWK_COUNT" >"$T/follow.b") 2>/dev/null &
        fp=$!
        sleep 0.3
        rate_row b "$r"
        sleep 0.5
        s1=$(egd_seq)
        kill "$fp"
        wait "$fp" 2>/dev/null
        sleep 0.5
        echo "b $r $((s1 - s0)) $(cat "$T/follow.b")" >>"$T/follow.counts"
        echo "    the follower got $(cut -d' ' -f1 "$T/follow.b") of $((s1 - s0)) denials, $(cut -d' ' -f3 "$T/follow.b") lost events ($(cut -d' ' -f4 "$T/follow.b") denials)"
        # c: the console, with RATE_SSE subscribers
        console_start
        s0=$(egd_seq)
        sse_start "$RATE_SSE" 1
        sleep 0.5
        rate_row c "$r"
        sleep 1
        s1=$(egd_seq)
        sse_stop
        got=$(for ((k = 1; k <= RATE_SSE; k++)); do cut -d' ' -f1 "$T/sse.$k"; done | tr '\n' ' ')
        lostev=$(for ((k = 1; k <= RATE_SSE; k++)); do cut -d' ' -f3 "$T/sse.$k"; done | tr '\n' ' ')
        recv=$(curl -q -s -H "Cookie: $COOKIE" "$URL/api/sources" | python3 -c 'import json,sys; print(json.load(sys.stdin)["egressd"][0]["received"])')
        console_stop
        echo "c $r $((s1 - s0)) reader=$recv sse=[$got] lost_events=[$lostev]" >>"$T/follow.counts"
        echo "    the console's reader got $recv of $((s1 - s0)) denials; its $RATE_SSE subscribers got: $got(lost events: $lostev)"
        # d: a follower that never reads
        nonreader_start unix "$T/egressd/admin.sock" '/v1/denials?follow=1'
        rate_row d "$r"
        nonreader_stop
        rate_row a2 "$r"
    done
    kill -0 "$EGD" || die "egressd died"
    echo
    echo "medians of $ROUNDS rounds (p50 and p99 of the median round of that workload):"
    python3 - "$T/rates.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = []
for r in rows:
    if r["row"] not in names:
        names.append(r["row"])
what = {"a": "no follower", "b": "curl -N follows", "c": "console + SSE", "d": "never reads", "a2": "no follower (again)"}
def med(rs, k):
    return statistics.median(r[k] for r in rs)
def median_round(rs, k):
    s = sorted(rs, key=lambda r: r[k])
    return s[(len(s) - 1) // 2]
base = [r for r in rows if r["row"] == "a"]
print("%-22s %9s %6s %6s %9s %6s %6s %9s %7s %7s %8s %6s %6s %7s" % ("row", "http/s", "p50", "p99", "deny/s", "p50", "p99",
      "denials/s", "egressd", "us/req", "console", "load", "all", "others"))
for n in names:
    rs = [r for r in rows if r["row"] == n]
    mh, md = median_round(rs, "http_rate"), median_round(rs, "deny_rate")
    print("%-22s %9.0f %6.2f %6.2f %9.0f %6.2f %6.2f %9.0f %6.0f%% %7.1f %7.0f%% %5.0f%% %5.0f%% %6.0f%%" % (
        n + " " + what.get(n, ""), med(rs, "http_rate"), mh["http_p50"] / 1e3, mh["http_p99"] / 1e3,
        med(rs, "deny_rate"), md["deny_p50"] / 1e3, md["deny_p99"] / 1e3, med(rs, "denials_s"),
        med(rs, "egd_cpu") * 100, med(rs, "egd_us_per_req"), med(rs, "con_cpu") * 100,
        med(rs, "load_cpu") * 100, med(rs, "machine") * 100, med(rs, "others") * 100))
print("(ms for p50/p99; CPU in %% of one core over the row (the machine has %d): egressd, the console, both egress-load,"
      " the whole machine, and others: the machine less everything this script runs; us/req: egressd's CPU per request"
      " of both workloads)" % __import__("os").cpu_count())
a = {k: med(base, k) for k in ("http_rate", "deny_rate")}
for n in names:
    rs = [r for r in rows if r["row"] == n]
    print("  %-3s / a: http %.3f  deny %.3f   (per round: %s)" % (n, med(rs, "http_rate") / a["http_rate"],
          med(rs, "deny_rate") / a["deny_rate"],
          " ".join("%.0f+%.0f" % (r["http_rate"], r["deny_rate"]) for r in rs)))
EOF
    echo
fi

# ---------------------------------------------------------------------------
# Part 2: the console under BENCH_FLOOD_RATE denials/s of NSBX sandboxes.
bind_sandboxes() {
    python3 - "$NSBX" "$SBX_EXPIRES" >"$T/bindings.json" <<'EOF'
import json, sys
n, expires = int(sys.argv[1]), sys.argv[2]
owners = ["alice", "bob", "carol", "dave"]
b = [{"id": "bench", "name": "egress-load", "owner": "bench", "addresses": ["127.0.0.1"], "policy": "bench"}]
for i in range(n):
    a = 1 + i
    addr = "127.0.%d.%d" % (1 + (a - 1) // 254, 1 + (a - 1) % 254)
    b.append({"id": str(1001 + i), "name": "sandbox-%03d" % (i + 1), "owner": owners[i % 4],
              "addresses": [addr], "policy": "bench", "expires": expires})
print(json.dumps(b))
EOF
    admin -X PUT -H 'Content-Type: application/json' --data-binary @"$T/bindings.json" \
        -o "$T/put.out" -w '%{http_code}' http://egressd/v1/sandboxes | grep -q '^2' ||
        die "PUT /v1/sandboxes refused: $(cat "$T/put.out")"
    echo "bound $(admin http://egressd/v1/sandboxes | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') sandboxes in egressd"
}

flood_row() { # SPEC: R or R+n
    local spec=$1 readers=${1%+n} nr=0 c0 c1 m0 m1 e0 e1 s0 s1 rss0 rss_end rss_after hwm k sampler
    [ "$spec" != "$readers" ] && nr=1
    console_start
    rss0=$(rss_kib "$CONSOLE_PID" VmRSS)
    sse_start "$readers" 1
    if [ "$nr" = 1 ]; then
        nonreader_start tcp "${URL#http://}" /api/denials/stream "$COOKIE" 127.0.3.1
    fi
    sleep 1
    local extra=-
    if [ $((readers + nr)) -ge 64 ]; then
        extra=$(curl -q -s -m 5 --interface 127.0.3.2 -o "$T/extra.out" -w '%{http_code}' \
            -H "Cookie: $COOKIE" "$URL/api/denials/stream")
        extra="$extra $(head -c 80 "$T/extra.out" | tr -d '\n')"
    fi
    rss1=$(rss_kib "$CONSOLE_PID" VmRSS)
    (while kill -0 "$CONSOLE_PID" 2>/dev/null; do
        echo "$(date +%s.%N) $(rss_kib "$CONSOLE_PID" VmRSS)"
        sleep 1
    done) >"$T/rss.samples" &
    sampler=$!
    s0=$(egd_seq) c0=$(ticks "$CONSOLE_PID") e0=$(ticks "$EGD") m0=$(machine_ticks) o0=$(ours_ticks)
    $TOOL flood 127.0.0.1:3128 "$FLOOD_RATE" "$FLOOD_SECS" 127.0.1.1 "$NSBX" denied.test >"$T/flood.out" 2>&1 ||
        die "the flood failed: $(tail -n 5 "$T/flood.out")"
    c1=$(ticks "$CONSOLE_PID") e1=$(ticks "$EGD") m1=$(machine_ticks) o1=$(ours_ticks) s1=$(egd_seq)
    rss_end=$(rss_kib "$CONSOLE_PID" VmRSS)
    sleep 2 # the last batches
    local tail_ok
    tail_ok=$(curl -q -s -m 5 -H "Cookie: $COOKIE" "$URL/api/sources" | python3 -c 'import json,sys; print(json.load(sys.stdin)["egressd"][0]["received"])')
    sse_stop
    [ "$nr" = 1 ] && nonreader_stop
    sleep 2
    rss_after=$(rss_kib "$CONSOLE_PID" VmRSS)
    hwm=$(rss_kib "$CONSOLE_PID" VmHWM)
    kill "$sampler" 2>/dev/null
    wait "$sampler" 2>/dev/null
    local peak
    peak=$(awk 'BEGIN { m = 0 } $2 > m { m = $2 } END { print m }' "$T/rss.samples")
    local counts=()
    for ((k = 1; k <= readers; k++)); do counts+=("$(cat "$T/sse.$k")"); done
    python3 - "$spec" "$(cat "$T/flood.out")" $((s1 - s0)) "$tail_ok" $((c1 - c0)) $((e1 - e0)) \
        $((m1 - m0)) "$HZ" "$rss0" "$rss1" "$peak" "$hwm" "$rss_end" "$rss_after" "$extra" \
        "$(cut -d' ' -f2 "$T/rss.samples" | tr '\n' ' ')" $((m1 - m0 - o1 + o0)) "${counts[@]}" >>"$T/flood.jsonl" <<'EOF'
import json, sys
a = sys.argv[:17] + sys.argv[18:]
others = int(sys.argv[17])
spec, fl, made, reader = a[1], json.loads(a[2]), int(a[3]), int(a[4])
con, egd, mach, hz = int(a[5]), int(a[6]), int(a[7]), int(a[8])
rss0, rss1, peak, hwm, rss_end, rss_after = (int(x) for x in a[9:15])
extra, samples = a[15], [int(x) for x in a[16].split()]
counts = [list(map(int, c.split())) for c in a[17:]]
wall = fl["wall_s"]
print(json.dumps({"spec": spec, "made": made, "flood": fl, "reader": reader,
    "con_cpu": con / hz / wall, "egd_cpu": egd / hz / wall, "load_cpu": fl["cpu_s"] / wall,
    "machine": mach / hz / wall, "others": others / hz / wall, "rss0": rss0, "rss1": rss1, "peak": peak, "hwm": hwm,
    "rss_end": rss_end, "rss_after": rss_after, "extra": extra, "samples": samples,
    "got": [c[0] for c in counts], "events": [c[1] for c in counts], "lost_ev": [c[2] for c in counts],
    "lost": [c[3] for c in counts], "nameless": [c[4] for c in counts]}))
EOF
    console_stop
    tail -n 1 "$T/flood.jsonl" | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); f=j["flood"]
got=j["got"]
print("  %-5s made %d (%.0f/s; 403 %d, other %d, errors %d) | console RSS %d -> %d KiB subscribed, peak %d, HWM %d, end %d, after %d | console %.0f%% egressd %.0f%% flood %.0f%% all %.0f%% others %.0f%% | subscribers got %s..%s, lost events %d, nameless %d | 65th: %s"
  % (j["spec"], j["made"], j["made"]/f["wall_s"], f["denied"], f["other"], f["errors"], j["rss0"], j["rss1"], j["peak"], j["hwm"],
     j["rss_end"], j["rss_after"], j["con_cpu"]*100, j["egd_cpu"]*100, j["load_cpu"]*100, j["machine"]*100, j["others"]*100,
     min(got) if got else "-", max(got) if got else "-", sum(j["lost_ev"]), sum(j["nameless"]), j["extra"]))'
}

if has_part flood || has_part page; then
    bind_sandboxes
fi
if has_part flood; then
    echo "== the console under $FLOOD_RATE denials/s from $NSBX sandboxes, $FLOOD_SECS s a row"
    for spec in $SUBS; do flood_row "$spec"; done
    echo
    python3 - "$T/flood.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-26s %7s %8s %8s %8s %8s %8s %8s %7s %7s %6s %6s %7s" % ("subscribers", "made/s", "RSS0", "RSS1", "peak", "HWM",
      "end", "after", "console", "egressd", "flood", "all", "others"))
for j in rows:
    n = j["spec"]
    label = n.replace("+n", " + 1 never reads")
    print("%-26s %7.0f %8d %8d %8d %8d %8d %8d %6.0f%% %6.0f%% %5.0f%% %5.0f%% %6.0f%%" % (label, j["made"] / j["flood"]["wall_s"],
          j["rss0"], j["rss1"], j["peak"], j["hwm"], j["rss_end"], j["rss_after"], j["con_cpu"] * 100,
          j["egd_cpu"] * 100, j["load_cpu"] * 100, j["machine"] * 100, j["others"] * 100))
print("(RSS in KiB: signed in; with the subscribers; highest 1 s sample; VmHWM; at the flood's end; 2 s after the subscribers left)")
print()
print("%-26s %8s %8s %10s %10s %10s %8s %9s %s" % ("subscribers", "made", "reader", "got min", "got max", "events", "lost ev",
      "nameless", "65th stream"))
for j in rows:
    g = j["got"]
    print("%-26s %8d %8d %10s %10s %10s %8d %9d %s" % (j["spec"].replace("+n", " + 1 never reads"), j["made"], j["reader"],
          min(g) if g else "-", max(g) if g else "-", sum(j["events"]) // max(1, len(g)) if g else "-",
          sum(j["lost_ev"]), sum(j["nameless"]), j["extra"]))
print("(made: egressd's denials during the flood; reader: what the console's reader thread had received by 2 s after;")
print(" got: denials each reading subscriber received; events: SSE events per subscriber; lost ev: `lost` events, all subscribers)")
print()
for j in rows:
    g = sorted(j["got"])
    if g and min(g) < j["made"]:
        print("%s: denials each subscriber got, fewest first: %s (%d of %d got every one; %.0f%% of all delivered)"
              % (j["spec"], " ".join(str(x) for x in g), sum(1 for x in g if x >= j["made"]), len(g),
                 100.0 * sum(g) / (j["made"] * len(g))))
print("flood generator: " + "; ".join("%s p50 %.2f ms p99 %.2f ms cpu %.0f%%" % (j["spec"], j["flood"]["p50_ms"],
      j["flood"]["p99_ms"], j["load_cpu"] * 100) for j in rows))
print("RSS samples (KiB, 1 s apart) of the largest row: %s" % " ".join(str(x) for x in max(rows, key=lambda r: len(r["got"]))["samples"]))
EOF
    echo
fi

# ---------------------------------------------------------------------------
# Part 3: the page in Chromium during the flood.
if has_part page; then
    echo "== the page (#denials, Chromium, signed in as an admin) during $PAGE_SECS s of $FLOOD_RATE denials/s"
    [ -x /usr/bin/chromium ] || die "/usr/bin/chromium is missing"
    [ -d "$NODE_DIR/node_modules/playwright-core" ] ||
        die "playwright-core is not in $NODE_DIR (tests/console/console.t installs it)"
    console_start
    s0=$(egd_seq)
    c0=$(ticks "$CONSOLE_PID") m0=$(machine_ticks) o0=$(ours_ticks) e0=$(ticks "$EGD")
    CONSOLE_URL=$URL PAGE_SECONDS=$PAGE_SECS PAGE_SANDBOXES=$NSBX PAGE_TRACE=${BENCH_PAGE_TRACE:-0} PAGE_TRACE_FILE=${BENCH_PAGE_TRACE_FILE:-} CONSOLE_USER=ops CONSOLE_PASSWORD=ops-pw-1 CONSOLE_REALM=pve \
        NODE_PATH=$NODE_DIR/node_modules node "$top/bench/console-page.mjs" >"$T/page.out" 2>"$T/page.err" &
    np=$!
    for ((i = 0; i < 300; i++)); do
        grep -q '^ready' "$T/page.out" && break
        kill -0 "$np" 2>/dev/null || break
        sleep 0.1
    done
    grep -q '^ready' "$T/page.out" || die "the page driver did not get ready: $(tail -n 5 "$T/page.err")"
    # (the flood goes on while the driver also times the sandboxes page)
    $TOOL flood 127.0.0.1:3128 "$FLOOD_RATE" "$((PAGE_SECS + 20))" 127.0.1.1 "$NSBX" denied.test >"$T/flood.page" 2>&1 &
    fl=$!
    wait "$np"
    rc=$?
    wait "$fl"
    c1=$(ticks "$CONSOLE_PID") m1=$(machine_ticks) o1=$(ours_ticks) e1=$(ticks "$EGD") s1=$(egd_seq)
    console_stop
    [ "$rc" = 0 ] || { cat "$T/page.err" >&2; die "the page driver failed ($rc)"; }
    grep -v '^ready' "$T/page.out"
    echo "flood: $(cat "$T/flood.page")"
    w=$((PAGE_SECS + 20))
    echo "egressd made $((s1 - s0)) denials; CPU in % of one core over those $w s: console $(((c1 - c0) * 100 / HZ / w))%, egressd $(((e1 - e0) * 100 / HZ / w))%, the whole machine $(((m1 - m0) * 100 / HZ / w))%, others (not this script's) $(((m1 - m0 - o1 + o0) * 100 / HZ / w))%"
fi
kill -0 "$EGD" || die "egressd died"
[ -s "$T/console.err" ] && grep -v 'serving' "$T/console.err" | head -n 20 | sed 's/^/console stderr: /'
exit 0
