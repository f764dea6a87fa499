#!/usr/bin/env bash
# prometheus.t - deploy/prometheus/: promtool accepts the scrape config and
# the rules, the rules' unit tests pass (and fail on a weakened rule), and
# the series the alerts read are the ones a real egressd serves: each metric
# name is a family of proxy/metrics.c and is on a running egressd's page,
# with the label values the alerts select (a denial, a refused reload).
# TAP on stdout.  Needs BUILD_DIR (egressd), TOP; runs egressd in its own netns.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"
if [ "${1-}" != --in-netns ]; then
    exec unshare -n "$0" --in-netns
fi
ip link set lo up

P=$TOP/deploy/prometheus
T=$(mktemp -d /tmp/deploy-prom.XXXXXX)
egd_pid=
cleanup() {
    [ -z "$egd_pid" ] || kill "$egd_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY CURL_CA_BUNDLE SSL_CERT_FILE

promtool check config "$P/prometheus.yml" >"$T/out" 2>&1
ok $? "promtool check config: prometheus.yml (and the rule file it names)" || diag_file "$T/out"
promtool check rules "$P/egressd-alerts.yml" >"$T/out" 2>&1
ok $? "promtool check rules: egressd-alerts.yml" || diag_file "$T/out"
check "the rule file holds the five alerts" test "$(grep -c '^      - alert: ' "$P/egressd-alerts.yml")" = 5
promtool test rules "$P/egressd-alerts.test.yml" >"$T/out" 2>&1
ok $? "promtool test rules: every alert fires where it should and nowhere else" || diag_file "$T/out"
for a in EgressdDown EgressdReloadFailed EgressdDenySurge EgressdSandboxLimitHit \
    EgressdOAuthLoginLapsing; do
    check "the unit tests expect $a firing and not firing" \
        sh -c "grep -A3 'alertname: $a\$' '$P/egressd-alerts.test.yml' | grep -q 'exp_alerts: \[\]' &&
               grep -A3 'alertname: $a\$' '$P/egressd-alerts.test.yml' | grep -q 'exp_labels:'"
done

# The unit tests can fail: weaken each rule in a copy, the tests must notice.
mutate() {
    rm -rf "$T/m"
    cp -r "$P" "$T/m"
    sed -i "$1" "$T/m/egressd-alerts.yml"
    ! promtool test rules "$T/m/egressd-alerts.test.yml" >/dev/null 2>&1
}
check "unit tests fail when EgressdDown waits 10m" mutate 's/for: 2m/for: 10m/'
check "unit tests fail when EgressdReloadFailed reads result=\"ok\"" mutate 's/result="error"/result="ok"/'
check "unit tests fail when EgressdDenySurge counts limits too" mutate 's/,reason!="limit"//'
check "unit tests fail when EgressdSandboxLimitHit ignores the reason" \
    mutate 's/{reason="limit"}\[10m\]/[10m]/'

# The metric names in the rules against the families of proxy/metrics.c
# and of the sections it renders (logins.c).
cat "$TOP/proxy/metrics.c" "$TOP/proxy/logins.c" | tr '\n' ' ' | grep -o 'family( *f, *"[a-z_]*"' |
    sed 's/.*"\(.*\)"/egressd_\1/' | sort -u >"$T/families"
grep -o 'egressd_[a-z_]*' "$P/egressd-alerts.yml" | grep -v '^egressd_$' | sort -u >"$T/used"
check "metrics.c declares some families ($(wc -l <"$T/families"))" test -s "$T/families"
missing=$(comm -23 "$T/used" "$T/families" | tr '\n' ' ')
ok "$([ -z "$missing" ] && [ -s "$T/used" ]; echo $?)" \
    "every metric the alerts read is a family of proxy/metrics.c ($(tr '\n' ' ' <"$T/used"))${missing:+; missing: $missing}"
reasons=$(sed -n '/words\[PX_R_COUNT\]/,/};/p' "$TOP/proxy/verdict.h")
check "the reason the limit alert selects (\"limit\") is one of egressd's reason codes" \
    grep -q '"limit"' <<<"$reasons"

# A real egressd: a denied request and a refused reload, then its page.
egd=$BUILD_DIR/proxy/egressd
mkdir -p "$T/policies"
echo "allowed.test" >"$T/policies/locked.allow"
cat >"$T/egressd.conf" <<EOF
listen 127.0.0.1:13128
metrics 127.0.0.1:19464
policy-dir policies
default-policy locked
access-log access.log
EOF
"$egd" -c "$T/egressd.conf" 2>"$T/egressd.err" &
egd_pid=$!
for _ in $(seq 50); do
    curl -fsS --noproxy '*' http://127.0.0.1:19464/healthz >/dev/null 2>&1 && break
    sleep 0.1
done
code=$(curl -s --noproxy '' -x http://127.0.0.1:13128 -o /dev/null -w '%{http_code}' http://denied.test/)
check "egressd runs and denies a request (403)" test "$code" = 403
echo "this line is not a rule:99999" >>"$T/policies/locked.allow"
kill -HUP "$egd_pid"
sleep 0.5
curl -fsS --noproxy '*' http://127.0.0.1:19464/metrics >"$T/metrics" 2>/dev/null
ok $? "GET /metrics answers" || diag_file "$T/egressd.err"
while read -r m; do
    check "the page declares $m" grep -q "^# TYPE $m " "$T/metrics"
done <"$T/used"
check "the page counts the denial: connections_total{decision=\"deny\",reason=\"not_allowed\"}" \
    grep -qE '^egressd_connections_total\{.*decision="deny",reason="not_allowed"\} 1$' "$T/metrics"
check "the page counts the refused reload: policy_reloads_total{result=\"error\"} > 0" \
    grep -qE '^egressd_policy_reloads_total\{result="error"\} [1-9][0-9]*$' "$T/metrics"
grep 'egressd_policy_reloads_total{' "$T/metrics" | sed 's/^/# /'
tap_end
