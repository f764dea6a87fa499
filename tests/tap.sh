# tests/tap.sh - TAP for the bash integration scripts: source it, call
# `ok STATUS TEXT` (or `check TEXT CMD...`) per check and `tap_end` last.
#
#   ok STATUS TEXT     one line: "ok N - TEXT" when STATUS is 0, else "not ok"
#   check TEXT CMD...  run CMD (output dropped); ok on its exit status
#   diag TEXT          a "# TEXT" line
#   diag_file FILE [N] the last N (20) lines of FILE as diagnostics
#   bail TEXT          a failing line for a step nothing else can do without; end
#   tap_end            the plan line "1..N"; exit status 1 if any check failed
#
# tests/run.sh checks the plan: a script that ends without tap_end (or bail),
# or whose plan differs from the lines it printed, counts one more failure.

tap_n=0
tap_failed=0
# ok STATUS WHAT: one check, passed when STATUS is 0; returns 0 or 1 as it
# went, so that `ok ... || diag_file F` shows F only for a failure.
ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
        return 0
    fi
    tap_failed=$((tap_failed + 1))
    echo "not ok $tap_n - $2"
    return 1
}
check() {
    local what=$1
    shift
    "$@" >/dev/null 2>&1
    ok $? "$what"
}
diag() { printf '# %s\n' "$*"; }
diag_file() { [ -f "$1" ] && tail -n "${2:-20}" "$1" | sed 's/^/#   /'; }
bail() {
    ok 1 "$1"
    tap_end
    exit 1
}
tap_end() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}
