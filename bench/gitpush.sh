#!/usr/bin/env bash
# bench/gitpush.sh - a git push through egressd's ref check against the same
# push through an opaque tunnel: BENCH_MIB (50) MiB of random bytes in one
# commit, pushed by the real git over HTTPS to `git http-backend`
# (tests/egressd/gitsrv.py) through egressd, BENCH_ROUNDS (3) times each way,
# the two ways alternating:
#   tunnel  CONNECT open.test:4443, no request rule: egressd relays the TLS
#           bytes (relay.c)
#   check   CONNECT git.test:4443 under `git-push refs/heads/** BENCH_PUSH_OPTS`
#           (default `no-force`): egressd terminates TLS with the sandbox's
#           CA, reads the command list (pushcheck.c) and, under no-force,
#           the pack's commits (git/gitpack.c), then moves the pack through
#           the exchange
# The rate is MiB over the wall time of `git push` (the client packs, the
# origin unpacks and indexes: both ways do that same work); every push
# carries a new commit of new random bytes, so each moves the whole size.
# Prints each round, the medians and their ratio (the target: check >= 0.9
# x tunnel).
#
#   bench/gitpush.sh [BUILD_DIR]     (default build/release; needs root: a
#                                     network namespace of its own)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build/release}
case $build in /*) ;; *) build=$top/$build ;; esac
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release >/dev/null || exit 1
fi
ninja -C "$build" proxy/egressd >/dev/null || exit 1
export BUILD_DIR=$build TOP=$top
BENCH_MIB=${BENCH_MIB:-50}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_PUSH_OPTS=${BENCH_PUSH_OPTS-no-force}
. "$top/tests/egressd/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up"
egd_host 127.0.0.27 git.test
egd_host 127.0.0.28 open.test
egd_allow "git.test:4443 git-push refs/heads/** $BENCH_PUSH_OPTS" 'open.test:4443'
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@test \
    GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@test
SRV=$T/srv
mkdir -p "$SRV"
git init -q --bare -b main "$SRV/repo.git" && git -C "$SRV/repo.git" config http.receivepack true ||
    bail "the origin's repository"
for name in git.test open.test; do
    egd_cert "$name" || bail "$name's certificate"
    "$EGD_PY" -u "$EGD_DIR/gitsrv.py" --listen "$(egd_addr "$name"):4443" --root "$SRV" \
        --tls "$T/certs/$name.pem" "$T/certs/$name.key" >"$T/$name.out" 2>&1 &
    EGD_PIDS+=($!)
done
sleep 1
egd_start "upstream-ca-file $EGD_CA" || bail "egressd starts"
egd_put sb '{"id":"sb","addresses":["127.0.0.1"],"policy":"test"}' >/dev/null || bail "bind sb"
egd_admin GET /v1/sandboxes/sb/credentials >"$T/cred.json" || bail "credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$T/sbca.pem"
cat "$EGD_CA" "$T/sbca.pem" >"$T/trust.pem"

git init -q -b main "$T/work" && cd "$T/work" || bail "the work tree"
G=(git -c "http.proxy=http://$EGD_PROXY" -c "http.sslCAInfo=$T/trust.pem" -c http.postBuffer=1048576)

# push HOST REF: a new commit of BENCH_MIB MiB of random bytes (nothing of
# it on the origin yet), pushed; prints its MiB/s (or fails).
push() {
    local t0 t1
    head -c $((BENCH_MIB << 20)) /dev/urandom >blob && git add blob && git commit -q -m "$2" ||
        return 1
    t0=$(date +%s.%N)
    "${G[@]}" push -q "https://$1:4443/git/repo.git" "HEAD:$2" >"$T/push.out" 2>&1 || {
        sed 's/^/#   /' "$T/push.out" >&2
        return 1
    }
    t1=$(date +%s.%N)
    awk -v m="$BENCH_MIB" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", m / (b - a) }'
}

tunnel=() check=()
for ((r = 1; r <= BENCH_ROUNDS; r++)); do
    a=$(push open.test "refs/heads/tunnel-$r") || bail "the push through the tunnel"
    b=$(push git.test "refs/heads/check-$r") || bail "the push through the check"
    tunnel+=("$a")
    check+=("$b")
    echo "round $r: tunnel $a MiB/s, check $b MiB/s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mt=$(median "${tunnel[@]}")
mc=$(median "${check[@]}")
echo "median: tunnel $mt MiB/s, check $mc MiB/s, ratio $(awk -v a="$mc" -v b="$mt" 'BEGIN { printf "%.2f", a / b }')"
c=$(egd_log_count 'l["host"] == "git.test" and l["mode"] == "intercept" and l["method"] == "POST" and l["decision"] == "allow"')
echo "egressd's log: $c intercepted receive-pack POSTs allowed by the ref check"
cd / || true
egd_stop >/dev/null 2>&1
