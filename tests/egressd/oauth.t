#!/usr/bin/env bash
# oauth.t - an OAuth login kept by egressd (docs/credentials.md,
# "Subscription logins"), against a fake provider (oauthd.py) that is both
# the token endpoint (platform.claude.com) and the API (api.anthropic.com):
#   - secret-dir takes Claude Code's own .credentials.json as a login, and
#     egressd -t names a broken one and its missing field, never a value;
#   - the sandbox's requests get the current access token (bearer rule);
#     five 401s at once ask for one refresh, not five;
#   - egressd refreshes ahead of expiry by itself (10 s tokens), writes the
#     rotated tokens back into the file (0600, whole JSON) and uses them;
#   - the sandbox's own refresh (its refresh placeholder) is answered by
#     egressd with placeholders only; a real refresh token from the sandbox
#     is denied oauth_foreign_token; the provider sees neither;
#   - bad token answers (not JSON, no access_token, HTTP 500, a refused
#     grant) keep the current tokens and the file, and are counted;
#   - SIGKILL right after the endpoint answered: the file is whole and the
#     login still works after the restart;
#   - nothing the sandbox side received holds a real token.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

SB=127.0.0.5
P=$EGD_HTTPS_PORT
FAKE=127.0.0.29
egd_host "$FAKE" api.anthropic.com
egd_host "$FAKE" platform.claude.com
egd_allow "api.anthropic.com:$P inject bearer secret claude" \
    "platform.claude.com:$P inject token-endpoint secret claude" \
    "platform.claude.com:$P inject token-endpoint secret claude2"
S=$T/secrets
mkdir -m 700 "$S"
SBX=$T/sandbox # what the sandbox side holds and receives
mkdir -p "$SBX"

# --- the fake provider, with a certificate for both of its names
c=$T/certs
printf 'subjectAltName=DNS:api.anthropic.com,DNS:platform.claude.com\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$c/fake.ext"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=fake \
    -keyout "$c/fake.key" -out "$c/fake.csr" >/dev/null 2>&1 &&
    openssl x509 -req -in "$c/fake.csr" -CA "$EGD_CA" -CAkey "$c/ca.key" -CAcreateserial -days 2 \
        -extfile "$c/fake.ext" -out "$c/fake.pem" >/dev/null 2>&1 || egm_bail "the fake's certificate"
# The first token pair is already lapsed at the provider, while the file
# says it lives an hour: the first request gets a 401.
egm_server "$T/oauthd.out" python3 -u "$EGD_DIR/oauthd.py" --provider anthropic \
    --listen "$FAKE:$P" --cert "$c/fake.pem" --key "$c/fake.key" --log "$T/oauthd.log" \
    --client-id test-client --lifetime 10 --first-lifetime 0 --seed-state "$T/seed.json" \
    --mode-file "$T/mode" --notify "$T/notify" ||
    egm_bail "oauthd.py serves platform.claude.com and api.anthropic.com"

# creds_file ACCESS REFRESH EXPIRES_MS: Claude Code's .credentials.json.
creds_file() {
    py -c 'import json, sys
print(json.dumps({"claudeAiOauth": {"accessToken": sys.argv[1], "refreshToken": sys.argv[2],
    "expiresAt": int(sys.argv[3]), "scopes": ["user:inference", "user:profile"],
    "subscriptionType": "max"}}, indent=2))' "$@"
}
seed() { py -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/seed.json" "$1"; }
A0=$(seed access)
R0=$(seed refresh)
NOW_MS=$(($(date +%s) * 1000))
(umask 077 && creds_file "$A0" "$R0" $((NOW_MS + 3600000)) >"$S/claude")
# A second Claude login of the same sandbox (another account): the same
# token endpoint; egressd never refreshes it here (an hour ahead).
(umask 077 && creds_file sk-ant-oat01-REAL-second sk-ant-ort01-REAL-second $((NOW_MS + 3600000)) >"$S/claude2")

# --- egressd -t: a login file it cannot keep is named, with the field
(umask 077 && printf '{"claudeAiOauth": {"accessToken": "sk-ant-oat01-REAL-broken"}}\n' >"$S/broken")
egd_write_config "secret-dir $S" "upstream-ca-file $EGD_CA" \
    "oauth-provider anthropic token-url https://platform.claude.com:$P/v1/oauth/token client-id test-client"
"$EGD_BIN" -t -c "$T/egressd.conf" >"$T/check.out" 2>&1
rc=$?
ok "$([ "$rc" -eq 1 ] && grep -q "broken: a login file (JSON) egressd cannot keep: .*refreshToken" "$T/check.out" && echo 0 || echo 1)" \
    "egressd -t refuses a login file without its refresh token, naming the file and the field"
ok "$(grep -q REAL "$T/check.out" && echo 1 || echo 0)" "... and shows no token"
sed 's/^/#   /' "$T/check.out" | head -n 3
rm -f "$S/broken"
"$EGD_BIN" -t -c "$T/egressd.conf" >"$T/check.out" 2>&1
ok "$([ $? -eq 0 ] && grep -q "/claude: anthropic login (egressd keeps it" "$T/check.out" && echo 0 || echo 1)" \
    "egressd -t takes Claude Code's .credentials.json as a secret, and says what it found"

egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" \
    "oauth-provider anthropic token-url https://platform.claude.com:$P/v1/oauth/token client-id test-client" ||
    egm_bail "egressd starts with the login"
SB1="{\"id\":\"sb1\",\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[\"claude\",\"claude2\"]}"
egd_put sb1 "$SB1" >/dev/null || egm_bail "PUT sandbox sb1 with the logins"
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$SBX/sbca.pem"
cred() { py -c 'import json,sys; print(json.load(open(sys.argv[1]))["secrets"][sys.argv[3] if len(sys.argv) > 3 else "claude"][sys.argv[2]])' "$T/cred.json" "$@"; }
PH=$(cred placeholder)
RPH=$(cred refresh_placeholder)
ok "$([ "$(cred kind)" = login ] && [ "$(cred provider)" = anthropic ] &&
    [[ $PH == egressd-ph-claude-* ]] && [[ $RPH == egressd-ph-claude-* ]] && [ "$PH" != "$RPH" ] &&
    ! grep -q REAL "$T/cred.json" && echo 0 || echo 1)" \
    "credentials: the login's kind, provider and two placeholders (access, refresh), no token"

# sbcurl NAME ARGS...: curl from sb1 through egressd, trusting only the
# sandbox CA; the body in $SBX/NAME.body, the status printed.
sbcurl() {
    local name=$1
    shift
    env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$SBX/sbca.pem" -m 30 --interface "$SB" \
        -x "http://$EGD_PROXY" -o "$SBX/$name.body" -D "$SBX/$name.head" -w '%{http_code}' "$@"
}
api() { sbcurl "$1" -H "Authorization: Bearer $PH" "https://api.anthropic.com:$P/v1/messages"; }
# fake_count PYEXPR: lines of the fake's log where PYEXPR over `o` holds.
fake_count() {
    py -c 'import json, sys
n = 0
for line in open(sys.argv[1]):
    o = json.loads(line)
    n += bool(eval(sys.argv[2]))
print(n)' "$T/oauthd.log" "$1"
}
refreshes() { fake_count "o['kind'] == 'token'"; }
ok_metric() { [ "$(egd_metric "egressd_oauth_refresh_total{secret=\"claude\",result=\"$1\"}" 2>/dev/null || echo 0)" -ge "$2" ]; }
# wait_for 'SHELL TEST': up to 30 s for it to hold (evaluated each time).
wait_for() {
    local i
    for ((i = 0; i < 300; i++)); do eval "$1" && return 0; sleep 0.1; done
    return 1
}
file_field() {
    py -c 'import json,sys; print(json.load(open(sys.argv[1]))["claudeAiOauth"][sys.argv[2]])' "$S/claude" "$1" 2>/dev/null
}

# --- five 401s at once: one refresh
pids=()
for i in 1 2 3 4 5; do
    { api "first$i"; echo; } >"$SBX/first$i.code" &
    pids+=($!)
done
wait "${pids[@]}"
codes=$(cat "$SBX"/first?.code | sort | uniq -c | tr -s ' \n' ' ')
ok "$([ "$(cat "$SBX"/first?.code | sort -u)" = 401 ] && echo 0 || echo 1)" \
    "the lapsed token: five requests get the origin's 401 ($codes)"
wait_for 'ok_metric ok 1'
sleep 1
ok "$([ "$(refreshes)" = 1 ] && echo 0 || echo 1)" "five 401s at once asked for one refresh ($(refreshes))"
ok "$([ "$(fake_count "o['kind'] == 'token' and o['refresh_token'] == '$R0' and o['client_id'] == 'test-client'")" = 1 ] && echo 0 || echo 1)" \
    "egressd refreshed with the file's refresh token and the configured client id"
A1=$(file_field accessToken)
R1=$(file_field refreshToken)
ok "$([ -n "$A1" ] && [ "$A1" != "$A0" ] && [ -n "$R1" ] && [ "$R1" != "$R0" ] &&
    [ "$(stat -c %a "$S/claude")" = 600 ] && [ "$(file_field subscriptionType)" = max ] && echo 0 || echo 1)" \
    "the rotated tokens are in the file (0600, its other fields kept)"
code=$(api second)
ok "$([ "$code" = 200 ] && [ "$(fake_count "o['kind'] == 'api' and o['bearer'] == '$A1' and o['status'] == 200")" = 1 ] && echo 0 || echo 1)" \
    "the next request carries the new token (status $code)"

# --- ahead of expiry, by itself
wait_for '[ "$(file_field refreshToken)" != "$R1" ]'
R2=$(file_field refreshToken)
A2=$(file_field accessToken)
ok "$([ "$R2" != "$R1" ] && [ "$(fake_count "o['kind'] == 'token' and o['refresh_token'] == '$R1'")" = 1 ] && echo 0 || echo 1)" \
    "egressd refreshed again before the 10 s token lapsed, with the rotated refresh token"
exp=$(egd_metric 'egressd_oauth_token_expiry_seconds{secret="claude"}')
ok "$(py -c "import sys; sys.exit(0 if 0 < float('$exp') <= 10 else 1)" && echo 0 || echo 1)" \
    "egressd_oauth_token_expiry_seconds says when the token lapses ($exp s)"
code=$(api third)
ok "$([ "$code" = 200 ] && echo 0 || echo 1)" "requests go on with it (status $code)"

# --- the sandbox's own refresh
before=$(refreshes)
egd_log_mark
code=$(sbcurl own -H 'Content-Type: application/json' \
    --data "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RPH\",\"client_id\":\"9d1c250a-e61b-44d9-88ed-5944d1962f5e\"}" \
    "https://platform.claude.com:$P/v1/oauth/token")
ok_json "the sandbox's refresh is answered with its placeholders (status $code)" "$(cat "$SBX/own.body")" \
    "l['access_token'] == '$PH' and l['refresh_token'] == '$RPH' and l['expires_in'] > 3600 and l['token_type'] == 'Bearer'"
ok "$([ "$(refreshes)" = "$before" ] && echo 0 || echo 1)" "... and the provider never saw it"
egd_log_ok "... its line: intercept, 200, the login's name" \
    "l['host'] == 'platform.claude.com' and l.get('path') == '/v1/oauth/token'" \
    "l['status'] == 200 and l['mode'] == 'intercept' and l['inject'] == 'claude'"
code=$(sbcurl form -H 'Content-Type: application/x-www-form-urlencoded' \
    --data "grant_type=refresh_token&refresh_token=$RPH" "https://platform.claude.com:$P/v1/oauth/token")
ok "$([ "$code" = 200 ] && grep -q "\"$PH\"" "$SBX/form.body" && echo 0 || echo 1)" \
    "a form-encoded refresh is answered too (status $code)"
code=$(sbcurl second -H 'Content-Type: application/json' \
    --data "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$(cred refresh_placeholder claude2)\"}" \
    "https://platform.claude.com:$P/v1/oauth/token")
ok_json "a second login at the same endpoint: its own refresh placeholder gets its own placeholders (status $code)" \
    "$(cat "$SBX/second.body")" "l['access_token'] == '$(cred placeholder claude2)' and l['refresh_token'] == '$(cred refresh_placeholder claude2)'"
code=$(sbcurl foreign -H 'Content-Type: application/json' \
    --data "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$R2\"}" \
    "https://platform.claude.com:$P/v1/oauth/token")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: oauth_foreign_token' "$SBX/foreign.head" &&
    [ "$(refreshes)" = "$before" ] && echo 0 || echo 1)" \
    "a real refresh token from the sandbox is denied oauth_foreign_token, not sent on (status $code)"
code=$(sbcurl misplaced -H "Authorization: Bearer $RPH" "https://api.anthropic.com:$P/v1/messages")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: credential_host_mismatch' "$SBX/misplaced.head" && echo 0 || echo 1)" \
    "the refresh placeholder in a request header is out of place: credential_host_mismatch (status $code)"
code=$(sbcurl login -H 'Content-Type: application/json' \
    --data '{"grant_type":"authorization_code","code":"x","redirect_uri":"http://localhost/cb"}' \
    "https://platform.claude.com:$P/v1/oauth/token")
ok "$([ "$code" = 403 ] && [ "$(refreshes)" = "$before" ] && echo 0 || echo 1)" \
    "a new login from the sandbox (authorization_code) is denied too (status $code)"

# --- bad answers keep the tokens
for mode in notjson missing 500 refuse; do
    echo "$mode" >"$T/mode"
    sum_before=$(sha256sum <"$S/claude")
    n=$(refreshes)
    wait_for '[ "$(refreshes)" -gt "$n" ]'
    sleep 0.5
    ok "$([ "$(sha256sum <"$S/claude")" = "$sum_before" ] && kill -0 "$EGD_PID" && echo 0 || echo 1)" \
        "a token answer '$mode': the file is unchanged and egressd runs on"
done
ok "$(ok_metric bad_response 2 && ok_metric http_error 1 && ok_metric refused 1 && echo 0 || echo 1)" \
    "each is counted: bad_response, http_error, refused"
curl -q -s --noproxy '*' "http://$EGD_METRICS/metrics" | grep '^egressd_oauth' | sed 's/^/#   /'
echo ok >"$T/mode"
# The token lapsed meanwhile: the next request's 401 asks at once.
wait_for '[ "$(api recover)" = 200 ]'
ok "$(ok_metric ok 3 && echo 0 || echo 1)" "once the endpoint answers again, the login recovers"

# --- SIGKILL right after the endpoint answered, 0-40 ms after it (before
# or after egressd wrote the rotated tokens back: the provider's grace
# keeps the old refresh token good until the new one is used).
# OAUTH_KILLS rounds (default 4; `oauth.t --long`: 200).
kills=${OAUTH_KILLS:-4}
for a in "$@"; do [ "$a" = --long ] && kills=200; done
for ((round = 1; round <= kills; round++)); do
    : >"$T/notify"
    n=$(refreshes)
    api "kick$round" >/dev/null # after a restart a 401 asks; otherwise the timer
    for ((i = 0; i < 300; i++)); do [ -s "$T/notify" ] && break; sleep 0.02; done
    sleep "0.0$((RANDOM % 40 / 10))$((RANDOM % 10))"
    kill -KILL "$EGD_PID"
    wait "$EGD_PID" 2>/dev/null
    EGD_PID=
    whole=$(py -c 'import json,sys; j=json.load(open(sys.argv[1]))["claudeAiOauth"]; print(int(bool(j["accessToken"] and j["refreshToken"])))' "$S/claude" 2>/dev/null)
    ok "$([ "$whole" = 1 ] && echo 0 || echo 1)" "kill -9 after the token answer (round $round): the file is whole"
    egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" \
        "oauth-provider anthropic token-url https://platform.claude.com:$P/v1/oauth/token client-id test-client" ||
        egm_bail "egressd restarts"
    egd_put sb1 "$SB1" >/dev/null
    wait_for '[ "$(api "after$round")" = 200 ]'
    ok "$([ "$(cat "$SBX/after$round.body" | py -c 'import json,sys; print(json.load(sys.stdin).get("ok"))')" = True ] && echo 0 || echo 1)" \
        "... and after the restart the login still works"
done

# --- nothing the sandbox side received holds a real token
ok "$(grep -rl -e 'REAL' "$SBX" | grep -v sbca.pem | head -n 3 | grep -q . && echo 1 || echo 0)" \
    "no body or head the sandbox received holds a real token"
ok "$(grep -q 'sk-ant-oat01-REAL\|REALREFRESH' "$T/egressd.err" "$T/access.log" && echo 1 || echo 0)" \
    "no token in egressd's diagnostics or access log"

egd_finish
tap_end
