#!/usr/bin/env bash
# An explain never says what the judge would not do.  Random presets (some
# in `mode report`), sandbox bindings with extra lines, names and lists of
# addresses that mix allowed, `ip`-denied and private ones in every order;
# for each case the live explain (admin API) and the offline one (egressctl
# explain --sandbox FILE --addr ...) must agree, and on a sample a real
# request through egressd must be decided as they said (its access-log
# line: decision, and for a denial reason and rule).  The seed is printed;
# EXPLAIN_SEED=N replays one run.  The driver is explain_diff.py.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up"

seed=${EXPLAIN_SEED:-$(( $(date +%s) % 100000 ))}
cases=${EXPLAIN_CASES:-160}
sample=${EXPLAIN_SAMPLE:-80}
diag "seed $seed: $cases cases, $sample of them as real requests"
py "$EGD_DIR/explain_diff.py" gen "$T/diff" "$seed" "$cases" || bail "generate the cases"
cp "$T"/diff/policies/*.allow "$T/policies/"
cat "$T/diff/hosts.extra" >>"$T/hosts"
egd_start 'allow-range 198.51.100.0/24' 'allow-range 203.0.113.0/24' 'allow-range 2001:db8::/32' \
    || bail "start egressd"
for f in "$T"/diff/sandboxes/*.json; do
    id=$(basename "$f" .json)
    egd_put "$id" "$(cat "$f")" >/dev/null || bail "bind sandbox $id"
done
py "$EGD_DIR/explain_diff.py" run "$T/diff" "$BUILD_DIR/proxy/egressctl" "$T/egressd.conf" \
    "$T/admin.sock" "$EGD_PROXY" "$T/access.log" "$sample" >"$T/diff.out" 2>&1 ||
    diag_file "$T/diff.out"
grep '^#' "$T/diff.out"
grep -q '^RESULT ' "$T/diff.out" || bail "the driver checked nothing (replay with EXPLAIN_SEED=$seed)"
while read -r _ status text; do
    ok "$status" "$text"
    [ "$status" -eq 0 ] || diag "replay with EXPLAIN_SEED=$seed"
done < <(grep '^RESULT ' "$T/diff.out")

egd_finish
tap_end
