#!/usr/bin/env bash
# agents-oauth.t - the real `claude` (npm's @anthropic-ai/claude-code) with a
# Claude subscription login that egressd keeps (docs/credentials.md,
# "Subscription logins"), by the real host names and egressd's built-in
# Anthropic profile (platform.claude.com, Claude Code's client id), against
# a fake token endpoint (oauthd.py, 10 s tokens) and a fake Messages API
# (fakeapi.py, which takes only the last two tokens oauthd issued):
#   - the guest's ~/.claude/.credentials.json is the one egressd makes for
#     it (GET credentials: placeholders only, a year ahead): the run
#     completes with the fake API's answer; lapsed, claude refreshes at
#     once, egressd answers it, and the run completes;
#   - an unattended stretch of over a minute of claude runs, while the
#     real token lapses every 10 s: every run completes, the API saw only
#     real tokens, the token endpoint saw refreshes only from egressd;
#   - nothing the sandbox side holds afterwards has a real token.
# TAP on stdout.  Needs BUILD_DIR, TOP; installs the CLIs from npm once
# (as agents.t), then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"

egm_install_outside egm_agents_setup
egd_netns "$@"
egd_setup || { rm -f "${EGM_INSTALL_LOG:-}"; egm_bail "set-up: temp dir, test CA, hosts, preset"; }
egm_install_check "the CLIs ${EGM_AGENT_PACKAGES[*]} are installed in BUILD_DIR" \
    "nothing to run without the CLIs"
BIN=$(egm_agents_modules)/.bin

SB=127.0.0.1
CLIENT_ID=9d1c250a-e61b-44d9-88ed-5944d1962f5e # Claude Code's, egressd's built-in profile
egd_host 127.0.0.28 api.anthropic.com
egd_host 127.0.0.29 platform.claude.com
egd_allow "api.anthropic.com:443 inject bearer secret claude" \
    "platform.claude.com:443 inject token-endpoint secret claude"
S=$T/secrets
mkdir -m 700 "$S"
SBX=$T/sandbox
mkdir -p "$SBX/home/.claude" "$SBX/work"

egd_cert api.anthropic.com && egd_cert platform.claude.com || egm_bail "the fakes' certificates"
egm_server "$T/oauthd.out" python3 -u "$EGD_DIR/oauthd.py" --provider anthropic \
    --listen 127.0.0.29:443 --cert "$T/certs/platform.claude.com.pem" \
    --key "$T/certs/platform.claude.com.key" --log "$T/oauthd.log" --client-id "$CLIENT_ID" \
    --lifetime 10 --seed-state "$T/seed.json" --current "$T/current" ||
    egm_bail "oauthd.py serves platform.claude.com"
CANNED="Hello from the fake API."
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/current" --openai-key "$T/current" \
    --delay 0.05 --text "$CANNED" api.anthropic.com=127.0.0.28:443 ||
    egm_bail "fakeapi.py serves api.anthropic.com"

# The appliance's copy of the login, as `claude` wrote it on a workstation.
python3 - "$T/seed.json" >"$S/claude" <<'EOF' || egm_bail "the login file"
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"claudeAiOauth": {"accessToken": s["access"], "refreshToken": s["refresh"],
    "expiresAt": s["expires_ms"], "scopes": ["user:inference", "user:profile"],
    "subscriptionType": "max"}}))
EOF
chmod 600 "$S/claude"
egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" || egm_bail "egressd starts with the login"
egd_put sb1 "{\"id\":\"sb1\",\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[\"claude\"]}" \
    >/dev/null || egm_bail "PUT sandbox sb1 with the login"
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
python3 - "$T/cred.json" "$SBX" <<'EOF' || egm_bail "the guest's CA and credentials file"
import json, sys
c = json.load(open(sys.argv[1]))
open(sys.argv[2] + "/sbca.pem", "w").write(c["ca"])
# What sandboxctl writes into the guest user's home: egressd's file.
open(sys.argv[2] + "/home/.claude/.credentials.json", "w").write(c["secrets"]["claude"]["file"])
EOF
chmod 600 "$SBX/home/.claude/.credentials.json"

SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY"
    https_proxy="http://$EGD_PROXY" NODE_EXTRA_CA_CERTS="$SBX/sbca.pem")
# claude_run NAME: `claude -p "say hi"` on the sandbox side; rc printed.
claude_run() {
    (cd "$SBX/work" && "${SBENV[@]}" timeout 60 "$BIN/claude" -p "say hi" </dev/null \
        >"$SBX/$1.out" 2>"$SBX/$1.err")
    echo $?
}
count() {
    python3 -c 'import json, sys
n = 0
for line in open(sys.argv[1]):
    if line.strip():
        o = json.loads(line)
        n += bool(eval(sys.argv[2]))
print(n)' "$1" "$2"
}

# --- the guest's file as egressd made it (a year ahead), then lapsed
rc=$(claude_run given)
ok "$([ "$rc" = 0 ] && [ "$(cat "$SBX/given.out")" = "$CANNED" ] && echo 0 || echo 1)" \
    "claude -p with the .credentials.json egressd made for the guest: exit 0, the fake API's answer"
[ "$rc" = 0 ] || { diag "exit $rc: $(head -c 300 "$SBX/given.out")"; diag_file "$SBX/given.err"; }
python3 - "$SBX/home/.claude/.credentials.json" <<'EOF'
import json, sys, time
j = json.load(open(sys.argv[1]))
j["claudeAiOauth"]["expiresAt"] = int(time.time() * 1000) - 60000 # lapsed a minute ago
json.dump(j, open(sys.argv[1], "w"))
EOF
egd_log_mark
rc=$(claude_run first)
ok "$([ "$rc" = 0 ] && [ "$(cat "$SBX/first.out")" = "$CANNED" ] && echo 0 || echo 1)" \
    "claude -p with the login lapsed in the guest: exit 0, the fake API's answer"
[ "$rc" = 0 ] || { diag "exit $rc: $(head -c 300 "$SBX/first.out")"; diag_file "$SBX/first.err"; }
ok "$(egd_log_count "l['host'] == 'platform.claude.com' and l.get('path') == '/v1/oauth/token' and l['status'] == 200" |
    awk '{ exit !($1 >= 1) }' && echo 0 || echo 1)" \
    "claude refreshed its login first, and egressd answered it"
ok "$(python3 -c 'import json,sys,time; j=json.load(open(sys.argv[1]))["claudeAiOauth"]; c=json.load(open(sys.argv[2]))["secrets"]["claude"]; sys.exit(0 if j["accessToken"] == c["placeholder"] and j["refreshToken"] == c["refresh_placeholder"] and j["expiresAt"] > time.time() * 1000 else 1)' \
    "$SBX/home/.claude/.credentials.json" "$T/cred.json" && echo 0 || echo 1)" \
    "claude's credentials file still holds the placeholders, with the expiry egressd gave"

# --- unattended: over a minute of runs while the real token lapses every 10 s
start=$(date +%s)
runs=0
fails=0
while [ $(($(date +%s) - start)) -lt 65 ]; do
    rc=$(claude_run "run$runs")
    [ "$rc" = 0 ] && [ "$(cat "$SBX/run$runs.out")" = "$CANNED" ] || {
        fails=$((fails + 1))
        diag "run $runs: exit $rc: $(head -c 200 "$SBX/run$runs.err")"
    }
    runs=$((runs + 1))
    sleep 3
done
ok "$([ "$fails" = 0 ] && [ "$runs" -ge 5 ] && echo 0 || echo 1)" \
    "$runs claude runs over $(($(date +%s) - start)) s with 10 s tokens: $fails failed"
issued=$(count "$T/oauthd.log" "o['kind'] == 'token' and o['result'] == 'issued'")
ok "$([ "$issued" -ge 5 ] &&
    [ "$(count "$T/oauthd.log" "o['kind'] == 'token' and (o['client_id'] != '$CLIENT_ID' or not o['refresh_token'].startswith('REALREFRESH-'))")" = 0 ] &&
    echo 0 || echo 1)" \
    "the token endpoint saw $issued refreshes, every one egressd's (Claude Code's client id, a refresh token it issued)"
ok "$([ "$(count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('api') == 'anthropic'")" -ge "$runs" ] &&
    [ "$(count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('api') == 'anthropic' and o.get('auth') != 'match'")" = 0 ] &&
    echo 0 || echo 1)" \
    "the Messages API got every request with a real token good at the time (the last issued or the one before)"
ok "$(grep -rl 'REAL' "$SBX" 2>/dev/null | grep -q . && echo 1 || echo 0)" \
    "no file on the sandbox side (claude's home, its outputs) holds a real token"

egd_finish
tap_end
