#!/usr/bin/env bash
# bench/oauth.sh [BUILD_DIR] - does a login's refresh sit on a request's
# path?  egress-load's intercept mode (a TLS handshake with egressd, one GET
# whose x-api-key egressd fills in, close) against two hosts of one sandbox,
# round by round: one gets a plain secret, the other the access token of an
# OAuth login egressd keeps (docs/credentials.md, "Subscription logins"),
# whose token endpoint (tests/egressd/oauthd.py) issues tokens that live
# BENCH_LIFETIME seconds (10): egressd refreshes it every 3/4 of that on its
# main thread, writes the file back, and the next request carries the new
# token.  The sink of the login host (egress-sink --secret-file) takes only
# the token issued last (and the one before it): a request with a stale or
# missing token is a failed exchange.  Prints per round the requests/s,
# p50 and p99 of each, and the refreshes egressd made during it; then the
# time to first byte of a kept-alive connection, through egressd against
# straight to the sink (BENCH_TTFB requests, 500).
# BENCH_ROUNDS (3), BENCH_SECONDS (20 per row), BENCH_CONNS (16),
# BENCH_THREADS (1).  Re-executes itself in a network namespace of its own.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/release}
case $build in /*) ;; *) build=$PWD/$build ;; esac
if [ -z "${EGRESS_BENCH_NETNS:-}" ]; then
    [ -f "$build/build.ninja" ] || meson setup --buildtype=release "$build" "$top" >/dev/null || exit 1
    ninja -C "$build" bench/egress-load bench/egress-sink proxy/egressd >/dev/null || exit 1
    export EGRESS_BENCH_NETNS=1
    exec unshare -n -- bash "$0" "$build"
fi
ip link set lo up || exit 1
ROUNDS=${BENCH_ROUNDS:-3} SECS=${BENCH_SECONDS:-20} CONNS=${BENCH_CONNS:-16}
THREADS=${BENCH_THREADS:-1} LIFE=${BENCH_LIFETIME:-10}
T=$(mktemp -d /tmp/bench-oauth.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$T"' EXIT
die() { echo "oauth.sh: $*" >&2; exit 1; }
unset CURL_CA_BUNDLE SSL_CERT_FILE

# A bench CA and one certificate for the three names.
(cd "$T" && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=bench-oauth-ca -keyout ca.key -out ca.pem -addext basicConstraints=critical,CA:TRUE \
    -addext keyUsage=critical,keyCertSign &&
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=sink \
        -keyout sink.key -out sink.csr &&
    printf 'subjectAltName=DNS:inject.test,DNS:login.test,DNS:platform.test\nbasicConstraints=CA:FALSE\n' >sink.ext &&
    openssl x509 -req -in sink.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
        -extfile sink.ext -out sink.pem) >"$T/pki.log" 2>&1 || die "the bench CA: $(tail -n 2 "$T/pki.log")"
printf '127.0.0.16 inject.test\n127.0.0.17 login.test\n127.0.0.18 platform.test\n' >"$T/hosts"

python3 -u "$top/tests/egressd/oauthd.py" --provider anthropic --listen 127.0.0.18:4446 \
    --cert "$T/sink.pem" --key "$T/sink.key" --log "$T/oauthd.log" --client-id bench \
    --lifetime "$LIFE" --seed-state "$T/seed.json" --current "$T/current" >"$T/oauthd.out" 2>&1 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do grep -q ready "$T/oauthd.out" 2>/dev/null && break; sleep 0.05; done
SECRET=sk-bench-$(openssl rand -hex 16)
"$build/bench/egress-sink" --listen 127.0.0.16:4444 --https --cert "$T/sink.pem" --key "$T/sink.key" \
    --secret "$SECRET" >"$T/sink1.out" 2>&1 &
PIDS+=($!)
"$build/bench/egress-sink" --listen 127.0.0.17:4444 --https --cert "$T/sink.pem" --key "$T/sink.key" \
    --secret-file "$T/current" >"$T/sink2.out" 2>&1 &
PIDS+=($!)

mkdir -p "$T/policies" "$T/state" "$T/secrets" && chmod 700 "$T/secrets"
printf '%s\n' 'inject.test:4444 inject x-api-key secret plain' \
    'login.test:4444 inject x-api-key secret login' >"$T/policies/bench.allow"
(umask 077 && printf '%s\n' "$SECRET" >"$T/secrets/plain" &&
    python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"claudeAiOauth": {"accessToken": s["access"], "refreshToken": s["refresh"],
    "expiresAt": s["expires_ms"], "scopes": ["user:inference"]}}))' "$T/seed.json" >"$T/secrets/login")
printf '[{"id":"bench","addresses":["127.0.0.1"],"policy":"bench","secrets":["plain","login"]}]\n' \
    >"$T/state/sandboxes.json"
chmod 600 "$T/state/sandboxes.json"
cat >"$T/egressd.conf" <<EOF
listen 127.0.0.1:3128
metrics 127.0.0.1:9464
admin unix:$T/admin.sock
hosts-file hosts
policy-dir policies
default-policy bench
state-dir state
secret-dir secrets
upstream-ca-file ca.pem
access-log /dev/null
allow-range 127.0.0.16/28
oauth-provider anthropic token-url https://platform.test:4446/v1/oauth/token client-id bench
EOF
"$build/proxy/egressd" -c "$T/egressd.conf" >"$T/egressd.out" 2>&1 &
EGD=$!
PIDS+=($EGD)
for ((i = 0; i < 100; i++)); do
    curl -q -s --noproxy '*' -m 1 http://127.0.0.1:9464/healthz 2>/dev/null | grep -q ok && break
    sleep 0.05
done
curl -q -sS --noproxy '*' --unix-socket "$T/admin.sock" -o "$T/cred.json" \
    http://admin/v1/sandboxes/bench/credentials || die "no credentials: $(tail -n 3 "$T/egressd.out")"
python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
open(sys.argv[2], "w").write(j["ca"])
for n in ("plain", "login"):
    open(sys.argv[3] + "." + n, "w").write(j["placeholders"][n])' "$T/cred.json" "$T/sbca.pem" "$T/ph"
refreshes() {
    curl -q -s --noproxy '*' http://127.0.0.1:9464/metrics |
        awk '/^egressd_oauth_refresh_total\{secret="login",result="ok"\}/ { print $2 }'
}
# row NAME HOST: one row of the round; prints "NAME req/s p50 p99 failed refreshes".
row() {
    local r0 out
    r0=$(refreshes)
    out=$("$build/bench/egress-load" --mode intercept --proxy 127.0.0.1:3128 --target "$2:4444" \
        --ca-file "$T/sbca.pem" --api-key "$(cat "$T/ph.$1")" --conns "$CONNS" --threads "$THREADS" \
        --duration "$SECS" --reply-bytes 1024 --label "$1" 2>"$T/load.err" | grep '^{' | tail -n 1)
    python3 -c 'import json, sys
j = json.loads(sys.argv[1])
print("%-8s %9.0f %8.2f %8.2f %7d %10d" % (sys.argv[2], j.get("rate", 0), j["p50_us"] / 1000,
      j["p99_us"] / 1000, j["error_total"], int(sys.argv[4]) - int(sys.argv[3])))' \
        "$out" "$1" "$r0" "$(refreshes)" || { echo "$1: no result"; cat "$T/load.err" >&2; }
}
printf '%-8s %9s %8s %8s %7s %10s\n' row 'req/s' 'p50 ms' 'p99 ms' failed refreshes
for ((r = 1; r <= ROUNDS; r++)); do
    row plain inject.test
    row login login.test
done
kill -0 "$EGD" || die "egressd died"
echo "token endpoint: $(cat "$T/oauthd.log" 2>/dev/null | grep -c '"issued"') tokens issued; login sink: $(kill -USR1 "${PIDS[2]}"; sleep 0.3; grep '^{' "$T/sink2.out" | tail -n 1)"

# The time to first byte once the connection is up: curl, one connection,
# BENCH_TTFB requests of 1 KiB in a row (keep-alive), each one's
# starttransfer - pretransfer; through egressd (intercepted, the login's
# token put in) and straight to the same sink (the token sent by curl).
N=${BENCH_TTFB:-500}
ttfb() {
    local urls=() i
    for ((i = 0; i < N; i++)); do urls+=(-o /dev/null "https://login.test:4444/bytes/1024"); done
    env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -q -s "$@" \
        -w '%{time_pretransfer} %{time_starttransfer}\n' "${urls[@]}" |
        python3 -c 'import sys
d = sorted((float(b) - float(a)) * 1000 for a, b in (l.split() for l in sys.stdin) if a and b)
d = d[1:]  # the first carries the handshakes
print("%8.3f %8.3f %6d" % (d[len(d) // 2], d[int(len(d) * 0.99)], len(d)))'
}
printf '\n%-22s %8s %8s %6s\n' 'time to first byte' 'p50 ms' 'p99 ms' n
printf '%-22s %s\n' 'straight to the sink' "$(ttfb --cacert "$T/ca.pem" --resolve login.test:4444:127.0.0.17 \
    -H "x-api-key: $(head -n 1 "$T/current")")"
printf '%-22s %s\n' 'through egressd' "$(ttfb --cacert "$T/sbca.pem" -x http://127.0.0.1:3128 \
    -H "x-api-key: $(cat "$T/ph.login")")"
