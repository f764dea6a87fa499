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
#   - the simplest setup: `claude setup-token`'s year-long token as a plain
#     secret with a bearer rule, CLAUDE_CODE_OAUTH_TOKEN the placeholder:
#     the run completes, the API saw the real token;
#   - nothing the sandbox side holds afterwards has a real token.
# TAP on stdout.  Needs BUILD_DIR, TOP; installs the CLIs from npm once
# (as agents.t), then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
. "$(dirname "$0")/lib-agents.sh"

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
    "platform.claude.com:443 inject token-endpoint secret claude" \
    "api.anthropic.com:443 inject bearer secret claude-token"
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
# `claude setup-token`'s token: a plain secret (its shape, a year's life).
SETUP_TOKEN=sk-ant-oat01-REAL-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$SETUP_TOKEN" >"$S/claude-token" && printf '%s\n' "$SETUP_TOKEN" >"$T/setup-token")
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/current" --anthropic-key "$T/setup-token" \
    --openai-key "$T/current" \
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
agents_sandbox claude claude-token
agents_guest_file claude "$SBX/home/.claude/.credentials.json"

SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY"
    https_proxy="http://$EGD_PROXY" NODE_EXTRA_CA_CERTS="$SBX/sbca.pem")
# agent_run NAME: `claude -p "say hi"` on the sandbox side; rc printed.
agent_run() {
    (cd "$SBX/work" && "${SBENV[@]}" timeout 60 "$BIN/claude" -p "say hi" </dev/null \
        >"$SBX/$1.out" 2>"$SBX/$1.err")
    echo $?
}

# --- the guest's file as egressd made it (a year ahead), then lapsed
agents_run_ok given \
    "claude -p with the .credentials.json egressd made for the guest: exit 0, the fake API's answer"
python3 - "$SBX/home/.claude/.credentials.json" <<'EOF'
import json, sys, time
j = json.load(open(sys.argv[1]))
j["claudeAiOauth"]["expiresAt"] = int(time.time() * 1000) - 60000 # lapsed a minute ago
json.dump(j, open(sys.argv[1], "w"))
EOF
egd_log_mark
agents_run_ok first "claude -p with the login lapsed in the guest: exit 0, the fake API's answer"
ok "$(egd_log_count "l['host'] == 'platform.claude.com' and l.get('path') == '/v1/oauth/token' and l['status'] == 200" |
    awk '{ exit !($1 >= 1) }' && echo 0 || echo 1)" \
    "claude refreshed its login first, and egressd answered it"
ok "$(python3 -c 'import json,sys,time; j=json.load(open(sys.argv[1]))["claudeAiOauth"]; c=json.load(open(sys.argv[2]))["secrets"]["claude"]; sys.exit(0 if j["accessToken"] == c["placeholder"] and j["refreshToken"] == c["refresh_placeholder"] and j["expiresAt"] > time.time() * 1000 else 1)' \
    "$SBX/home/.claude/.credentials.json" "$T/cred.json" && echo 0 || echo 1)" \
    "claude's credentials file still holds the placeholders, with the expiry egressd gave"

# --- unattended: over a minute of runs while the real token lapses every 10 s
agents_unattended claude
agents_refreshes_ok "$CLIENT_ID" claude
ok "$([ "$(agents_count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('api') == 'anthropic'")" -ge "$AGENTS_RUNS" ] &&
    [ "$(agents_count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('api') == 'anthropic' and o.get('auth') != 'match'")" = 0 ] &&
    echo 0 || echo 1)" \
    "the Messages API got every request with a real token good at the time (the last issued or the one before)"
# --- the simplest setup: the setup token as CLAUDE_CODE_OAUTH_TOKEN (what
# sandboxctl puts in the guest's environment with `secret-env claude-token
# CLAUDE_CODE_OAUTH_TOKEN`), no credentials file
PH_TOKEN=$(egm_placeholder claude-token)
mkdir -p "$SBX/home-token"
SBENV=("${SBENV[@]/#HOME=*/HOME=$SBX/home-token}" CLAUDE_CODE_OAUTH_TOKEN="$PH_TOKEN")
FAKE_MARK=$(wc -l <"$T/fakeapi.log")
agents_run_ok token "claude -p with CLAUDE_CODE_OAUTH_TOKEN the placeholder of a plain secret: exit 0, the answer"
ok "$(python3 - "$T/fakeapi.log" "$FAKE_MARK" "$(printf '%s' "$SETUP_TOKEN" | sha256sum | cut -c1-16)" <<'EOF'
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):] if l.strip()]
ls = [o for o in ls if o.get("event") == "request" and o.get("api") == "anthropic"]
sys.exit(0 if ls and all(o["auth"] == "match" and o["auth_field"] == "authorization" and o["auth_sha256"] == sys.argv[3] for o in ls) else 1)
EOF
echo $?)" "... every request it made had the real setup token as its Bearer"

agents_no_real_token "claude's homes, its outputs; the setup token too" "$SETUP_TOKEN"

egd_finish
tap_end
