#!/usr/bin/env bash
# image-binding.t - the egressd binding build-template.sh gives the golden
# template's build address, put into a running egressd with the command
# the script prints (its --dry-run, pointed at this egressd's admin
# socket), the shipped presets loaded: egressd takes it as it is; under it
# the hosts the build needs (Debian's archive, nodejs.org,
# registry.npmjs.org) are allowed and others are not; nodejs.org is denied
# without it; the script's DELETE removes it.  TAP on stdout.
# Needs BUILD_DIR, TOP; runs itself in a network namespace.
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/egressd/lib.sh
. "$TOP/tests/egressd/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
cp "$TOP"/deploy/policies/*.allow "$T/policies/" || bail "the shipped presets"
# The build's hosts, and one it does not need, on addresses allow-range
# opens: the verdicts below are the names'.
NEEDED='nodejs.org registry.npmjs.org deb.debian.org security.debian.org'
i=24
for h in $NEEDED example.com; do
    egd_host "127.0.0.$i" "$h"
    i=$((i + 1))
done
# shellcheck disable=SC2119 # no extra config lines
egd_start || bail "egressd starts and answers /healthz"

"$TOP/deploy/image/build-template.sh" --dry-run --admin-socket "$T/admin.sock" >"$T/dry" 2>&1
ok $? "build-template.sh --dry-run --admin-socket runs" || diag_file "$T/dry"
put=$(grep -E '^\+ curl .* -X PUT ' "$T/dry")
del=$(grep -E '^\+ curl .* -X DELETE ' "$T/dry")
check "it prints the binding's PUT and DELETE" test -n "$put" -a -n "$del"

# The request exactly as printed (the script runs what it prints).
bash -c "${put#+ }" >"$T/put.out" 2>&1
ok $? "egressd takes the binding" || diag_file "$T/put.out"
b=$(egd_admin GET /v1/sandboxes/template-9000)
ok_json "the binding: the build address, the balanced preset, nodejs.org, no token" "$b" \
    'l["addresses"] == ["10.99.0.9"] and l["policy"] == "balanced" and l["allow"] == ["nodejs.org"] and "token" not in l'
now=$(date +%s)
exp=$(date -d "$(egd_json "$b" 'l["expires"]')" +%s 2>/dev/null || echo 0)
check "... which expires within two hours ($((exp - now)) s)" test "$exp" -gt "$now" -a "$exp" -le $((now + 7200))

# verdict SANDBOX HOST PORT: egressd's decision for it.
verdict() {
    local q="host=$2&port=$3"
    [ -n "$1" ] && q="sandbox=$1&$q"
    egd_json "$(egd_admin GET "/v1/explain?$q")" 'l["decision"]'
}
for h in $NEEDED; do
    check "under it, $h:443 is allowed" test "$(verdict template-9000 "$h" 443)" = allow
done
check "... and deb.debian.org:80 (apt over plain HTTP)" test "$(verdict template-9000 deb.debian.org 80)" = allow
check "... and example.com is not" test "$(verdict template-9000 example.com 443)" = deny
check "without it (the default policy), nodejs.org is denied" test "$(verdict '' nodejs.org 443)" = deny

bash -c "${del#+ }" >"$T/del.out" 2>&1
ok $? "the script's DELETE removes it" || diag_file "$T/del.out"
egd_admin GET /v1/sandboxes/template-9000 >/dev/null 2>&1
ok $((!$?)) "... and egressd knows it no more"
egd_finish
tap_end
