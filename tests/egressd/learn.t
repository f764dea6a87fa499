#!/usr/bin/env bash
# learn.t - a preset in `mode report` lets everything through and logs what
# enforce would deny as would_deny; `egressctl learn` turns those lines of
# the real access log into allow lines per owner (with the methods and path
# prefixes of the requests egressd read), which, added to the preset, let
# exactly those requests through in enforce mode.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
CTL=$BUILD_DIR/proxy/egressctl
egd_origin a.test b.test denied.test || bail "the origins start"
printf 'mode report\nlearning.test\n' >"$T/policies/learning.allow"
egd_start || bail "egressd starts"
egd_put 201 '{"id":"201","owner":"carol","addresses":["127.0.0.1"],"policy":"learning"}' >/dev/null ||
    bail "a binding for carol on the report-mode preset"

egd_log_mark
for u in "https://a.test:$EGD_HTTPS_PORT/hello" "https://a.test:$EGD_HTTPS_PORT/hello" \
    "http://b.test:$EGD_HTTP_PORT/hello"; do
    egd_curl -x "http://$EGD_PROXY" -o /dev/null "$u"
done
egd_curl -x "http://$EGD_PROXY" -o /dev/null -X POST -d x "http://b.test:$EGD_HTTP_PORT/api/v1/items/7"
egd_curl -x "http://$EGD_PROXY" -o /dev/null "http://b.test:$EGD_HTTP_PORT/api/v1/items/8?q=1"
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://loop.test:$EGD_HTTP_PORT/hello")
check "report mode: a.test and b.test get through, as would_deny" \
    test "$(egd_log_count 'l["decision"] == "would_deny" and l["reason"] == "not_allowed" and l["owner"] == "carol"')" = 5
egd_log_wait 'l["host"] == "loop.test"' >/dev/null

"$CTL" learn "$T/access.log" >"$T/learned" 2>"$T/learn.err"
ok $? "egressctl learn reads the access log"
check "learn: carol's section has a.test:4443 (twice) and b.test:8000, each once" \
    sh -c "grep -q '^# owner carol' '$T/learned' && test \$(grep -c '^a.test:4443 ' '$T/learned') = 1 &&
        grep -q '^a.test:4443 .*# 2 times' '$T/learned' && grep -q '^b.test:8000 ' '$T/learned'"
check "learn: b.test (plain HTTP) gets the methods and the path prefixes it was asked for" \
    grep -q '^b.test:8000 methods GET,POST paths /api/v1/\*\*,/hello  *# 3 times' "$T/learned"
check "learn: a.test (a tunnel egressd did not read) gets a whole-host line" \
    grep -q '^a.test:4443  *# 2 times' "$T/learned"
check "report mode never opens a private range: loop.test was denied (got $code)" test "$code" = 403
check "learn: so it proposes no line for loop.test" sh -c "! grep -q 'loop.test' '$T/learned'"
"$CTL" learn --owner nobody "$T/access.log" >"$T/learned.none" 2>/dev/null
check "learn --owner with no lines: says so" grep -q 'no would_deny lines for this owner' "$T/learned.none"

# The learned lines, in enforce mode: those requests pass, others do not.
{ echo learning.test; grep -v '^#' "$T/learned"; } >"$T/policies/learning.allow"
"$CTL" check -c "$T/egressd.conf" >"$T/check.out" 2>&1
ok $? "the learned lines form a valid preset (egressctl check)"
kill -HUP "$EGD_PID"
sleep 1
egd_log_mark
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "https://a.test:$EGD_HTTPS_PORT/hello")
check "enforce with the learned lines: a.test:4443 allowed (got $code)" test "$code" = 200
egd_log_ok "enforce: logged allow by the learned line" 'l["host"] == "a.test"' \
    'l["decision"] == "allow" and l["rule"].startswith("learning.allow:")'
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://denied.test:$EGD_HTTP_PORT/hello")
check "enforce: a host never seen is denied (got $code)" test "$code" = 403
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://b.test:$EGD_HTTP_PORT/api/v1/other")
check "enforce: b.test under a learned path prefix passes (got $code, the origin's 404)" test "$code" = 404
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' -X DELETE "http://b.test:$EGD_HTTP_PORT/hello")
check "enforce: a method never seen there is refused (got $code)" test "$code" = 403
code=$(egd_curl -x "http://$EGD_PROXY" -o /dev/null -w '%{http_code}' "http://b.test:$EGD_HTTP_PORT/elsewhere")
check "enforce: a path never seen there is refused (got $code)" test "$code" = 403
egd_finish
tap_end
