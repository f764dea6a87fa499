#!/usr/bin/env bash
# agents-oauth-codex.t - the real `codex` (npm's @openai/codex) with a
# ChatGPT login that egressd keeps (docs/credentials.md, "Subscription
# logins"), with its defaults and by the real host names: egressd's
# built-in OpenAI profile (auth.openai.com, codex's client id) against a
# fake token endpoint (oauthd.py, 10 s tokens), and a fake chatgpt.com
# backend (fakeapi.py: the workspace discovery codex makes first, the
# Responses API over a WebSocket; it takes only the last two tokens
# oauthd issued):
#   - the guest's ~/.codex/auth.json is the one egressd makes for it (GET
#     credentials: placeholders, the account id, the id_token's claims):
#     the run completes with the fake API's answer; made old (codex
#     refreshes a login last refreshed over 8 days ago), codex refreshes at
#     once, egressd answers it, and the run completes;
#   - an unattended stretch of over a minute of codex runs while the real
#     token lapses every 10 s: every run completes, the backend saw only
#     real tokens and the account's id, the token endpoint saw refreshes
#     only from egressd;
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
CLIENT_ID=app_EMoamEEZ73f0CkXaXp7hrann # codex's, egressd's built-in profile
ACCOUNT=acct-fake-0001                 # oauthd.py's ChatGPT account
egd_host 127.0.0.30 chatgpt.com
egd_host 127.0.0.31 auth.openai.com
egd_allow "chatgpt.com:443 inject bearer secret codex" \
    "auth.openai.com:443 inject token-endpoint secret codex"
S=$T/secrets
mkdir -m 700 "$S"
SBX=$T/sandbox
mkdir -p "$SBX/home/.codex" "$SBX/work"

egd_cert chatgpt.com && egd_cert auth.openai.com || egm_bail "the fakes' certificates"
egm_server "$T/oauthd.out" python3 -u "$EGD_DIR/oauthd.py" --provider openai \
    --listen 127.0.0.31:443 --cert "$T/certs/auth.openai.com.pem" \
    --key "$T/certs/auth.openai.com.key" --log "$T/oauthd.log" --client-id "$CLIENT_ID" \
    --lifetime 10 --seed-state "$T/seed.json" --current "$T/current" ||
    egm_bail "oauthd.py serves auth.openai.com"
CANNED="Hello from the fake API."
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/current" --openai-key "$T/current" \
    --chatgpt-account "$ACCOUNT" --delay 0.05 --text "$CANNED" chatgpt.com=127.0.0.30:443 ||
    egm_bail "fakeapi.py serves chatgpt.com"

# The appliance's copy of the login, as `codex login` wrote it on a
# workstation (~/.codex/auth.json).
python3 - "$T/seed.json" >"$S/codex" <<'EOF' || egm_bail "the login file"
import json, sys, time
s = json.load(open(sys.argv[1]))
print(json.dumps({"OPENAI_API_KEY": None, "tokens": {"id_token": s["id_token"],
    "access_token": s["access"], "refresh_token": s["refresh"], "account_id": s["account_id"]},
    "last_refresh": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}, indent=2))
EOF
chmod 600 "$S/codex"
agents_sandbox codex
agents_guest_file codex "$SBX/home/.codex/auth.json"

# codex's defaults: ~/.codex, the built-in provider, the system's trust
# store (here the sandbox CA as SSL_CERT_FILE).
SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY"
    https_proxy="http://$EGD_PROXY" SSL_CERT_FILE="$SBX/sbca.pem")
# agent_run NAME: `codex exec "say hi"` on the sandbox side; rc printed.
agent_run() {
    (cd "$SBX/work" && "${SBENV[@]}" timeout 60 "$BIN/codex" exec --skip-git-repo-check \
        "say hi" </dev/null >"$SBX/$1.out" 2>"$SBX/$1.err")
    echo $?
}

# --- the guest's file as egressd made it, then as if refreshed long ago
agents_run_ok given \
    "codex exec with the auth.json egressd made for the guest: exit 0, the fake API's answer"
ok "$([ "$(agents_count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('path') == '/backend-api/wham/accounts/check' and o['status'] == 200")" -ge 1 ] &&
    [ "$(agents_count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('ws') and o['method'] == 'GET' and o['status'] == 101")" -ge 1 ] &&
    echo 0 || echo 1)" \
    "codex found its workspace (accounts/check, its account's id) and opened the Responses WebSocket"
python3 - "$SBX/home/.codex/auth.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
j["last_refresh"] = "2026-01-01T00:00:00.000000Z" # codex refreshes after 8 days
json.dump(j, open(sys.argv[1], "w"), indent=2)
EOF
egd_log_mark
agents_run_ok first "codex exec with a login last refreshed long ago: exit 0, the fake API's answer"
ok "$(egd_log_count "l['host'] == 'auth.openai.com' and l.get('path') == '/oauth/token' and l['status'] == 200" |
    awk '{ exit !($1 >= 1) }' && echo 0 || echo 1)" \
    "codex refreshed its login first, and egressd answered it"
ok "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); t=j["tokens"]; c=json.load(open(sys.argv[2]))["secrets"]["codex"]; sys.exit(0 if t["access_token"] == c["placeholder"] and t["refresh_token"] == c["refresh_placeholder"] and t["account_id"] == sys.argv[3] and j["last_refresh"] > "2026-02" else 1)' \
    "$SBX/home/.codex/auth.json" "$T/cred.json" "$ACCOUNT" && echo 0 || echo 1)" \
    "codex's auth.json holds the placeholders and the account id again, refreshed just now"

# --- unattended: over a minute of runs while the real token lapses every 10 s
agents_unattended codex
agents_refreshes_ok "$CLIENT_ID" codex
api() { agents_count "$T/fakeapi.log" "o.get('event') == 'request' and o.get('site') == 'chatgpt.com' and ($1)"; }
turns=$(api "o['method'] == 'WS' and not o['warmup'] and o['status'] == 200")
ok "$([ "$turns" -ge "$AGENTS_RUNS" ] && [ "$(api "o['auth'] != 'match' or o.get('account') != '$ACCOUNT'")" = 0 ] &&
    echo 0 || echo 1)" \
    "chatgpt.com got $turns turns, and every request with a real token good at the time and the account's id"

# --- what the sandbox side holds: codex's home, its outputs
agents_no_real_token "codex's home, its outputs"

egd_finish
tap_end
