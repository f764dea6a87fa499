# lib-agents.sh - what the tests of the agents' own logins share
# (agents-oauth.t, agents-oauth-codex.t, agents-oauth-gemini.t), after
# lib.sh and lib-more.sh.  Each test defines
#   agent_run NAME   one run of its CLI on the sandbox side, output in
#                    $SBX/NAME.out and $SBX/NAME.err; prints the exit status
# and sets CANNED (the fake API's answer), S (secret-dir), SB (the
# sandbox's address) and SBX; oauthd.py logs to
# $T/oauthd.log and wrote its first pair to $T/seed.json.
#
#   agents_count FILE PYEXPR   how many JSON lines of FILE PYEXPR (over `o`)
#                              holds for
#   agents_run_ok NAME TEXT    one run; one TAP line: exit 0, the answer
#   agents_unattended CLI      runs for over a minute, 3 s apart, while the
#                              real token lapses every 10 s; one TAP line;
#                              AGENTS_RUNS: how many
#   agents_refreshes_ok CLIENT_ID CLI
#                              one TAP line: the token endpoint saw at least
#                              5 refreshes, every one egressd's (that client
#                              id, a refresh token oauthd issued)
#   agents_no_real_token WHAT [VALUE...]
#                              one TAP line: no file under $SBX holds any
#                              token oauthd issued or was shown, nor VALUE
#   agents_sandbox SECRET...   egm_secret_sandbox (lib-more.sh): egressd up,
#                              sb1 bound with those secrets, its credentials
#                              in $T/cred.json, CA in $SBX/sbca.pem
#   agents_guest_file SECRET PATH
#                              egressd's file for the login SECRET at PATH

# shellcheck shell=bash disable=SC2034 # (AGENTS_RUNS is the caller's)
agents_count() {
    python3 -c 'import json, sys
n = 0
for line in open(sys.argv[1]):
    if line.strip():
        o = json.loads(line)
        n += bool(eval(sys.argv[2]))
print(n)' "$1" "$2"
}

# agents_answered NAME: the run's output ends with the fake API's answer.
agents_answered() { [ "$(tail -n 1 "$SBX/$1.out")" = "$CANNED" ]; }

agents_run_ok() {
    local rc
    rc=$(agent_run "$1")
    ok "$([ "$rc" = 0 ] && agents_answered "$1" && echo 0 || echo 1)" "$2"
    [ "$rc" = 0 ] || { diag "exit $rc: $(head -c 300 "$SBX/$1.out")"; diag_file "$SBX/$1.err"; }
}

agents_unattended() {
    local start runs=0 fails=0 rc
    start=$(date +%s)
    while [ $(($(date +%s) - start)) -lt 65 ]; do
        rc=$(agent_run "run$runs")
        [ "$rc" = 0 ] && agents_answered "run$runs" || {
            fails=$((fails + 1))
            diag "run $runs: exit $rc: $(tail -c 200 "$SBX/run$runs.err")"
        }
        runs=$((runs + 1))
        sleep 3
    done
    AGENTS_RUNS=$runs
    ok "$([ "$fails" = 0 ] && [ "$runs" -ge 5 ] && echo 0 || echo 1)" \
        "$runs $1 runs over $(($(date +%s) - start)) s with 10 s tokens: $fails failed"
}

agents_refreshes_ok() {
    local issued
    issued=$(agents_count "$T/oauthd.log" "o['kind'] == 'token' and o['result'] == 'issued'")
    ok "$([ "$issued" -ge 5 ] &&
        [ "$(agents_count "$T/oauthd.log" "o['kind'] == 'token' and (o['client_id'] != '$1' or not o['refresh_token'].startswith('REALREFRESH-'))")" = 0 ] &&
        echo 0 || echo 1)" \
        "the token endpoint saw $issued refreshes, every one egressd's ($2's client id, a refresh token it issued)"
}

agents_no_real_token() {
    local what=$1 n
    shift
    python3 - "$T/oauthd.log" "$T/seed.json" "$@" >"$T/real.list" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    for k in ("access_token", "new_refresh_token", "refresh_token", "bearer"):
        if o.get(k):
            print(o[k])
s = json.load(open(sys.argv[2]))
print(s["access"])
print(s["refresh"])
for v in sys.argv[3:]:
    print(v)
EOF
    n=$(sort -u "$T/real.list" | wc -l)
    ok "$([ "$n" -ge 7 ] && ! grep -rqF -f "$T/real.list" "$SBX" && echo 0 || echo 1)" \
        "no file on the sandbox side ($what) holds any of the $n real tokens"
    grep -rlF -f "$T/real.list" "$SBX" 2>/dev/null | head -n 5 | sed 's/^/#   holds a real token: /'
}

# agents_sandbox SECRET...: egm_secret_sandbox with the CA in $SBX/sbca.pem.
agents_sandbox() { egm_secret_sandbox "$SBX/sbca.pem" "" "$@"; }

# agents_guest_file SECRET PATH: egressd's file for the login SECRET (in
# $T/cred.json) at PATH, mode 0600: what sandboxctl writes into the guest
# user's home.
agents_guest_file() {
    (umask 077 && python3 -c 'import json, sys
open(sys.argv[3], "w").write(json.load(open(sys.argv[1]))["secrets"][sys.argv[2]]["file"])' \
        "$T/cred.json" "$1" "$2") || egm_bail "the guest's file for $1"
}
