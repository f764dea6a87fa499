#!/usr/bin/env bash
# tests/run.sh - install what the suite needs, build, run every test, and end
# with one line "N passed, M failed" (exit status 1 when M > 0).
#
# Builds (under build/):
#   gcc    gcc, -Wall -Wextra -Werror          unit tests, bench smoke run
#   clang  clang, same flags                   compiles clean with clang too
#   release gcc -O3 (quickstart's build)       compiles clean with -O3 too
#   asan   clang, ASan + UBSan                 unit tests again, under sanitizers
#   fuzz   clang, libFuzzer + ASan + UBSan     each harness for FUZZ_SECONDS
#
# Then every executable tests/**/*.t script (integration tests that drive the
# real programs; each prints TAP) runs once against the ASan+UBSan build, with
# BUILD_DIR, DATA_DIR and TOP in its environment (tests/egressd/ in a second
# lane beside the others).
#
# Environment: FUZZ_SECONDS (default 15 per harness, so that the whole suite
# stays within 20 minutes on 2 cores; half that for sandboxctl's harnesses;
# 0 skips fuzzing, and says so),
# DATA_DIR (default tests/data of this tree: the third-party test data, see
# tests/data/README.md), CLIENTHELLO_DIR (default $DATA_DIR/clienthello),
# MMDB_DIR (default $DATA_DIR/mmdb), GIT_PUSH_DIR (default
# $DATA_DIR/git-push) and GIT_PACK_DIR (default $DATA_DIR/git-pack).
# Each check prints one line; logs of every step are in build/test-logs/.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
DATA_DIR=${DATA_DIR:-$top/tests/data}
FUZZ_SECONDS=${FUZZ_SECONDS:-15}
logs=$top/build/test-logs
passed=0
failed=0

export CLIENTHELLO_DIR=${CLIENTHELLO_DIR:-$DATA_DIR/clienthello}
export MMDB_DIR=${MMDB_DIR:-$DATA_DIR/mmdb}
export GIT_PUSH_DIR=${GIT_PUSH_DIR:-$DATA_DIR/git-push}
export GIT_PACK_DIR=${GIT_PACK_DIR:-$DATA_DIR/git-pack}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Nothing under test may use this machine's certificate or proxy settings.
unset CURL_CA_BUNDLE SSL_CERT_FILE GIT_SSL_CAINFO NODE_EXTRA_CA_CERTS \
      http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY

pass() { passed=$((passed + 1)); printf 'PASS %s\n' "$*"; }
fail() { failed=$((failed + 1)); printf 'FAIL %s\n' "$*"; }

# step NAME LOG CMD...: run CMD with output to LOG; one check.
step() {
    local name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then
        pass "$name"
    else
        fail "$name (log: ${log#"$top"/})"
        tail -n 20 "$log" | sed 's/^/    /'
        return 1
    fi
}

# setup_build DIR CC [meson options...]: configure (once) and build; one check.
setup_build() {
    local dir=$1 compiler=$2
    shift 2
    step "build $(basename "$dir") ($compiler${*:+ $*})" "$logs/build-$(basename "$dir").log" \
        env CC="$compiler" sh -c '[ -f "$0/build.ninja" ] || meson setup "$0" "$@" || exit 1
                                  ninja -C "$0"' "$dir" "$@"
}

# run_tap NAME LOG CMD...: run a TAP-producing program; every "ok" and
# "not ok" line is one check, and a non-zero exit without a failing line
# (a crash, a sanitizer report) is one more failure.  So is a plan ("1..N",
# first or last) that is missing or does not match the lines the program
# printed: a program that stops early, or skips checks, cannot pass.
run_tap() {
    local name=$1 log=$2
    shift 2
    tap_run "$log" "$@"
    tap_count "$name" "$log"
}

# tap_run LOG CMD...: the running half (output in LOG, exit status in LOG.rc),
# which may happen in another process; tap_count NAME LOG: the counting half.
tap_run() {
    local log=$1 rc=0
    shift
    "$@" >"$log" 2>&1 || rc=$?
    echo "$rc" >"$log.rc"
}

# tap_plan_problem LOG RAN: what is wrong with the plan in LOG, for RAN
# "ok"/"not ok" lines; nothing when it is right.  TAP puts the plan
# first or last: either is taken, one of them.
tap_plan_problem() {
    local log=$1 ran=$2 plans planned
    plans=$(grep -cE '^1\.\.[0-9]+([[:space:]]|$)' "$log")
    if [ "$plans" -eq 0 ]; then
        echo "no plan (no 1..N line), ran $ran"
    elif [ "$plans" -gt 1 ]; then
        echo "$plans plan lines, ran $ran"
    else
        planned=$(grep -m1 -oE '^1\.\.[0-9]+' "$log")
        planned=${planned#1..}
        [ "$planned" -eq "$ran" ] || echo "planned $planned, ran $ran"
    fi
}

tap_count() {
    local name=$1 log=$2 rc ok_n nok_n plan
    rc=$(cat "$log.rc" 2>/dev/null || echo 127)
    ok_n=$(grep -c '^ok ' "$log")
    nok_n=$(grep -c '^not ok ' "$log")
    plan=$(tap_plan_problem "$log" $((ok_n + nok_n)))
    passed=$((passed + ok_n))
    failed=$((failed + nok_n))
    if [ "$rc" -ne 0 ] && [ "$nok_n" -eq 0 ]; then
        failed=$((failed + 1))
        nok_n=1
        echo "not ok - $name exited with status $rc" >>"$log"
    fi
    if [ -n "$plan" ]; then
        failed=$((failed + 1))
        nok_n=$((nok_n + 1))
        echo "not ok - $name: $plan" >>"$log"
        plan=": $plan"
    fi
    if [ "$nok_n" -eq 0 ]; then
        printf 'PASS %s (%d checks)\n' "$name" "$ok_n"
    else
        printf 'FAIL %s%s (%d passed, %d failed; log: %s)\n' "$name" "$plan" "$ok_n" "$nok_n" \
            "${log#"$top"/}"
        grep -A2 '^not ok' "$log" | head -n 30 | sed 's/^/    /'
        grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$log" | head -n 5 | sed 's/^/    /'
    fi
}

# The unit tests meson knows of in a build directory, as "name<TAB>program".
unit_tests() {
    meson introspect "$1" --tests | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    print(t["name"] + "\t" + t["cmd"][0])'
}

run_unit_tests() {
    local dir=$1 label=$2 name prog
    while IFS=$'\t' read -r name prog; do
        run_tap "$label $name" "$logs/$label-$name.log" "$prog"
    done < <(unit_tests "$dir")
}

# run_fuzzer NAME PROGRAM SECONDS SEED...: SECONDS of libFuzzer, its corpus
# in build/fuzz-corpus/NAME started from the SEED files.
run_fuzzer() {
    local name=$1 prog=$2 secs=$3 log=$logs/fuzz-$1.log corpus
    shift 3
    if [ "$FUZZ_SECONDS" -eq 0 ]; then
        printf 'SKIP fuzz %s (FUZZ_SECONDS=0; not counted)\n' "$name"
        return
    fi
    corpus=$top/build/fuzz-corpus/$name
    mkdir -p "$corpus"
    [ $# -eq 0 ] || cp -n "$@" "$corpus"/
    if step "fuzz $name for ${secs}s" "$log" \
        "$prog" -max_total_time="$secs" -max_len=20000 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="$top/build/fuzz-" "$corpus"; then
        grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)' "$log" | sed 's/^/    /'
    fi
}

# Seeds for the host normalizer: names, literals and the forms it refuses.
host_seeds() {
    local dir=$top/build/fuzz-seeds/host i=0 h
    mkdir -p "$dir"
    for h in example.com Example.COM. xn--bcher-kva.example 192.0.2.1 '[2001:db8::1]' \
             '[::ffff:127.0.0.1]' 2130706433 0x7f.1 0177.0.0.1 a-b.c-d.e 1password.com; do
        printf '%s' "$h" >"$dir/seed$((i += 1))"
    done
    echo "$dir"/seed*
}

mkdir -p "$logs"
if ! deploy/install-deps.sh --test >"$logs/install.log" 2>&1; then
    fail "install dependencies (log: build/test-logs/install.log)"
    tail -n 20 "$logs/install.log"
    echo "$passed passed, $failed failed"
    exit 1
fi
if [ ! -d "$CLIENTHELLO_DIR" ]; then
    fail "test data: $CLIENTHELLO_DIR not found (set DATA_DIR or CLIENTHELLO_DIR)"
fi

# The C sources of the project: what git tracks, or every one outside build/.
c_sources() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files '*.c' '*.h'
    else
        find . -path ./build -prune -o -name '*.[ch]' -print
    fi
}
c_sources >"$logs/sources.txt"
step "clang-format: sources follow .clang-format" "$logs/format.log" \
    xargs -a "$logs/sources.txt" clang-format --dry-run --Werror

setup_build build/gcc gcc && {
    run_unit_tests build/gcc gcc
    step "bench smoke: bench_sni parses every sample" "$logs/bench-sni.log" \
        build/gcc/bench/bench_sni -n 2000 -r 3 "$CLIENTHELLO_DIR"
    step "bench smoke: bench_policy decides right on a 20 000-rule policy" "$logs/bench-policy.log" \
        build/gcc/bench/bench_policy -r 20000 -x 200 -n 20000
    run_tap "bench smoke: egress-load rewrites the SNI of every sample" "$logs/bench-selftest.log" \
        build/gcc/bench/egress-load --selftest "$CLIENTHELLO_DIR"
    step "bench smoke: run.sh, every workload briefly through egressd and each peer proxy" \
        "$logs/bench-peers.log" bench/run.sh --smoke build/gcc
    step "bench smoke: dns.sh, egressd's DNS server and dnsmasq, allowed and denied names" \
        "$logs/bench-dns.log" bench/dns.sh --smoke build/gcc
}
setup_build build/clang clang
# What deploy/quickstart.sh builds: gcc -O3 warns of things -O2 does not.
setup_build build/release gcc --buildtype=release
setup_build build/asan clang -Db_sanitize=address,undefined -Db_lundef=false && \
    run_unit_tests build/asan asan
setup_build build/fuzz clang -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false && {
    for prog in build/fuzz/tests/fuzz/fuzz_*; do
        [ -f "$prog" ] && [ -x "$prog" ] || continue
        name=$(basename "$prog")
        name=${name#fuzz_}
        case $name in
            sni*)   seeds=("$CLIENTHELLO_DIR"/*.bin) ;;
            policy) seeds=(deploy/policies/*.allow tests/fuzz/seeds/policy/*) ;;
            receivepack) seeds=("$GIT_PUSH_DIR"/*.bin) ;;
            gitpack) seeds=("$GIT_PACK_DIR"/*.pack tests/fuzz/seeds/gitpack/*) ;;
            host)   read -ra seeds < <(host_seeds) ;;
            *)      seeds=(tests/fuzz/seeds/"$name"/*) ;;
        esac
        # sandboxctl's parsers read an admin's files and local clients:
        # half the time of the parsers of traffic from sandboxes.
        secs=$FUZZ_SECONDS
        case $name in sbx_* | mcp_*) secs=$(((FUZZ_SECONDS + 1) / 2)) ;; esac
        run_fuzzer "$name" "$prog" "$secs" "${seeds[@]}"
    done
}

# Integration scripts: TAP on stdout, run against the sanitizer build so a
# memory error in a real run fails the suite too.  The scripts share
# nothing (egressd's, deploy/'s and the wall test run in network namespaces
# of their own; the others use ports they pick), so they run in two lanes of
# about equal length: egressd's (but agents.t and agents-oauth.t) and
# deploy's in one; the Proxmox simulator's and sandboxctl's (which mostly
# wait on the simulator), mcp's, the wall's and those two in the other; the
# results are counted afterwards, in order.
script_log() {
    local name=${1#tests/}
    name=${name%.t}
    echo "$logs/script-${name//\//-}.log"
}
run_scripts() {
    local t
    for t in "$@"; do
        tap_run "$(script_log "$t")" \
            env BUILD_DIR="$top/build/asan" DATA_DIR="$DATA_DIR" TOP="$top" "$t"
    done
}
if [ -f build/asan/build.ninja ]; then
    scripts=() lane1=() lane2=()
    while IFS= read -r t; do
        [ -x "$t" ] || continue
        scripts+=("$t")
        case $t in
            tests/egressd/agents.t | tests/egressd/agents-oauth.t) lane2+=("$t") ;;
            tests/egressd/* | tests/deploy/*) lane1+=("$t") ;;
            *) lane2+=("$t") ;;
        esac
    done < <(find tests -name '*.t' -type f | sort)
    run_scripts "${lane1[@]}" &
    lane1_pid=$!
    run_scripts "${lane2[@]}"
    wait "$lane1_pid"
    for t in "${scripts[@]}"; do
        name=${t#tests/}
        tap_count "script ${name%.t}" "$(script_log "$t")"
    done
else
    fail "integration scripts: no ASan build to run them against"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
