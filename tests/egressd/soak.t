#!/usr/bin/env bash
# soak.t - 100 000 short connections through egressd (plain HTTP GETs,
# CONNECT tunnels with a tiny exchange, denied CONNECTs): every one answered
# as it must, one access-log line each, and afterwards egressd holds exactly
# the descriptors it held before and at most SOAK_RSS_KIB (10 MiB) more
# memory.  The figures are printed as "# soak: ..." lines.  TAP on stdout.
# Needs BUILD_DIR, TOP; runs itself in a network namespace.
#
# Environment: SOAK_N (100000), SOAK_WARMUP (5000: connections before the
# baseline is taken, so that allocator caches and, in a sanitizer build,
# ASan's quarantine are filled), SOAK_RSS_KIB (10240), SOAK_MAX_SECONDS
# (150) and SOAK_RELEASE_BIN (BUILD_DIR/../gcc/proxy/egressd): when the
# warm-up's rate says SOAK_N would take longer than SOAK_MAX_SECONDS, the
# soak runs against SOAK_RELEASE_BIN instead (a diag line says so).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

SOAK_N=${SOAK_N:-100000}
SOAK_WARMUP=${SOAK_WARMUP:-5000}
SOAK_RSS_KIB=${SOAK_RSS_KIB:-10240}
SOAK_MAX_SECONDS=${SOAK_MAX_SECONDS:-150}
SOAK_RELEASE_BIN=${SOAK_RELEASE_BIN:-$(dirname "$BUILD_DIR")/gcc/proxy/egressd}
# In a sanitizer build, freed memory waits in ASan's quarantine (256 MiB by
# default) before it is reused: RSS would grow by that much whatever
# egressd does.  A 16 MiB quarantine fills during the warm-up.
# (clang links the ASan runtime in; gcc links libasan.so.)
if grep -q AddressSanitizer "$EGD_BIN" 2>/dev/null || ldd "$EGD_BIN" 2>/dev/null | grep -q libasan; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
    diag "soak: sanitizer build; ASAN_OPTIONS=$ASAN_OPTIONS"
fi

egd_host 127.0.0.29 soak.test
egd_allow 'soak.test:8000' 'soak.test:7000 raw'
egm_server "$T/soakload.out" python3 -u "$EGD_DIR/soakload.py" serve \
    --http 127.0.0.29:8000 --echo 127.0.0.29:7000 || egm_bail "the soak origins start"
egd_start || egm_bail "egressd starts and answers /healthz"

LOAD=(python3 "$EGD_DIR/soakload.py" load --proxy "$EGD_PROXY" --http soak.test:8000
    --echo soak.test:7000 --deny denied.test:4443 --concurrency 50)
# settle N: wait (60 s) until the access log has N lines and no connection
# is open, then 2 s more.
settle() {
    local i
    for ((i = 0; i < 600; i++)); do
        [ "$(wc -l <"$T/access.log")" -ge "$1" ] &&
            [ "$(egd_metric egressd_active_connections)" = 0 ] && break
        sleep 0.1
    done
    sleep 2
}

made=0
# warmup FILE: SOAK_WARMUP connections; sets rate (connections a second).
warmup() {
    "${LOAD[@]}" -n "$SOAK_WARMUP" >"$1" 2>"$T/warmup.err"
    ok $? "warm-up: $SOAK_WARMUP connections answered as they must ($EGD_BIN)"
    [ -s "$T/warmup.err" ] && diag_file "$T/warmup.err"
    rate=$(python3 -c 'import json,sys; r = json.load(open(sys.argv[1])); print(max(1, int(r["n"] / r["seconds"])))' "$1" 2>/dev/null || echo 1)
    made=$((made + SOAK_WARMUP))
    settle "$made"
}
warmup "$T/warmup.json"
# A sanitizer build on a busy machine may be too slow for SOAK_N in
# SOAK_MAX_SECONDS: then the soak runs against the gcc build beside it
# (run.sh builds both), and says so.
projected=$((SOAK_N / rate))
diag "soak: warm-up at $rate connections/s: $SOAK_N should take about $projected s"
if [ "$projected" -gt "$SOAK_MAX_SECONDS" ]; then
    if [ -x "$SOAK_RELEASE_BIN" ] && [ "$SOAK_RELEASE_BIN" != "$EGD_BIN" ]; then
        diag "soak: $EGD_BIN makes $rate connections/s: $SOAK_N would take ${projected} s (> $SOAK_MAX_SECONDS s); the soak runs against $SOAK_RELEASE_BIN instead"
        egd_finish
        EGD_BIN=$SOAK_RELEASE_BIN
        egd_start || egm_bail "egressd ($EGD_BIN) starts and answers /healthz"
        warmup "$T/warmup2.json"
    else
        diag "soak: $EGD_BIN makes $rate connections/s: $SOAK_N will take about ${projected} s; no other build to use"
    fi
fi
fd0=$(egm_fds "$EGD_PID")
rss0=$(egm_rss "$EGD_PID")
diag "soak: baseline after $SOAK_WARMUP connections: $fd0 fds, VmRSS $rss0 KiB"

"${LOAD[@]}" -n "$SOAK_N" --timeout 20 >"$T/load.json" 2>"$T/load.err"
rc=$?
ok $rc "soak: $SOAK_N connections answered as they must (http 200 ok, connect echo, deny 403)"
[ -s "$T/load.err" ] && diag_file "$T/load.err"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("# soak: %d connections in %.1f s (%.0f/s), ok %s, errors %d" % (
    r["n"], r["seconds"], r["n"] / r["seconds"], json.dumps(r["ok"], sort_keys=True), r["errors"]))
for e in r["first_errors"]:
    print("#   " + e)' "$T/load.json" 2>/dev/null || diag_file "$T/load.json"

made=$((made + SOAK_N))
settle "$made"
fd1=$(egm_fds "$EGD_PID")
rss1=$(egm_rss "$EGD_PID")
diag "soak: after, settled: $fd1 fds, VmRSS $rss1 KiB ($((rss1 - rss0)) KiB more)"
check "soak: egressd's open descriptors are back to the baseline exactly ($fd0 -> $fd1)" \
    test "$fd1" -eq "$fd0"
[ "$fd1" -eq "$fd0" ] || ls -l "/proc/$EGD_PID/fd" 2>/dev/null | tail -n 5 | sed 's/^/#   /'
check "soak: VmRSS grew by at most $SOAK_RSS_KIB KiB ($rss0 -> $rss1 KiB)" \
    test $((rss1 - rss0)) -le "$SOAK_RSS_KIB"

python3 - "$T/access.log" "$T"/warmup*.json "$T/load.json" >"$T/count.out" 2>&1 <<'EOF'
import collections, json, sys
c = collections.Counter()
for raw in open(sys.argv[1]):
    l = json.loads(raw)
    c[(l["mode"], l["decision"], l["reason"])] += 1
want = collections.Counter()
for f in sys.argv[2:]:
    r = json.load(open(f))
    want[("http", "allow", "allowed")] += r["ok"]["http"]
    want[("connect", "allow", "allowed")] += r["ok"]["connect"]
    want[("connect", "deny", "not_allowed")] += r["ok"]["deny"]
for k in sorted(set(c) | set(want)):
    print("%s: logged %d, made %d" % ("/".join(k), c[k], want[k]))
sys.exit(0 if c == want else 1)
EOF
ok $? "soak: one access-log line per connection, by mode, decision and reason"
diag_file "$T/count.out" 6
m=$(egd_metric 'egressd_connections_total')
check "soak: connections_total sums to $((SOAK_WARMUP + SOAK_N)) (got ${m:-none})" \
    test "${m:-0}" = $((SOAK_WARMUP + SOAK_N))

egd_finish
tap_end
