#!/usr/bin/env bash
# agents-oauth-gemini.t - the real `gemini` (npm's @google/gemini-cli) with
# a Google login that egressd keeps (docs/credentials.md, "Subscription
# logins"), with the settings the golden image and sandboxctl give it and
# by the real host names: egressd's built-in Google profile
# (oauth2.googleapis.com, gemini-cli's client id and secret) against a fake
# token endpoint (oauthd.py, 10 s tokens, and its tokeninfo), a fake Code
# Assist API and account info (fakeapi.py as cloudcode-pa and www
# .googleapis.com); both take only the last two tokens oauthd issued:
#   - the guest's ~/.gemini/oauth_creds.json is the one egressd makes for
#     it (GET credentials: placeholders, an expiry a year ahead): the run
#     completes with the fake API's answer; lapsed, gemini refreshes first
#     (a form with its client secret), egressd answers it, and the run
#     completes;
#   - an unattended stretch of over a minute of gemini runs while the real
#     token lapses every 10 s: every run completes, the APIs saw only real
#     tokens, the token endpoint saw refreshes only from egressd;
#   - with an API key instead (GEMINI_API_KEY the placeholder, gemini's
#     defaults): the run completes against a fake Gemini API (fakeapi.py as
#     generativelanguage.googleapis.com), which saw only the real key; the
#     same with Vertex AI's key (GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_API_KEY,
#     aiplatform.googleapis.com);
#   - nothing the sandbox side holds afterwards has a real token or key.
# TAP on stdout.  Needs BUILD_DIR, TOP; installs the CLI from npm once,
# then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
. "$(dirname "$0")/lib-agents.sh"

egm_install_outside egm_gemini_setup
egd_netns "$@"
egd_setup || { rm -f "${EGM_INSTALL_LOG:-}"; egm_bail "set-up: temp dir, test CA, hosts, preset"; }
egm_install_check "the CLI $EGM_GEMINI_PACKAGE is installed beside BUILD_DIR" \
    "nothing to run without the CLI"
BIN=$(egm_gemini_modules)/.bin

SB=127.0.0.1
CLIENT_ID=681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com
CLIENT_SECRET=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 # gemini-cli's own: egressd's built-in profile
egd_host 127.0.0.24 oauth2.googleapis.com
egd_host 127.0.0.25 cloudcode-pa.googleapis.com
egd_host 127.0.0.26 www.googleapis.com
egd_host 127.0.0.27 generativelanguage.googleapis.com
egd_host 127.0.0.28 aiplatform.googleapis.com
egd_allow "cloudcode-pa.googleapis.com:443 inject bearer secret gemini" \
    "www.googleapis.com:443 inject bearer secret gemini" \
    "oauth2.googleapis.com:443 inject bearer secret gemini" \
    "oauth2.googleapis.com:443 inject token-endpoint secret gemini" \
    "generativelanguage.googleapis.com:443 inject header x-goog-api-key secret gemini-key" \
    "aiplatform.googleapis.com:443 inject header x-goog-api-key secret vertex-key"
S=$T/secrets
mkdir -m 700 "$S"
SBX=$T/sandbox
mkdir -p "$SBX/home/.gemini" "$SBX/work"

egd_cert oauth2.googleapis.com && egd_cert cloudcode-pa.googleapis.com &&
    egd_cert www.googleapis.com && egd_cert generativelanguage.googleapis.com &&
    egd_cert aiplatform.googleapis.com ||
    egm_bail "the fakes' certificates"
egm_server "$T/oauthd.out" python3 -u "$EGD_DIR/oauthd.py" --provider google \
    --listen 127.0.0.24:443 --cert "$T/certs/oauth2.googleapis.com.pem" \
    --key "$T/certs/oauth2.googleapis.com.key" --log "$T/oauthd.log" --client-id "$CLIENT_ID" \
    --client-secret "$CLIENT_SECRET" --lifetime 10 --seed-state "$T/seed.json" \
    --current "$T/current" || egm_bail "oauthd.py serves oauth2.googleapis.com"
CANNED="Hello from the fake API."
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/current" --openai-key "$T/current" \
    --google-key "$T/current" --delay 0.05 --text "$CANNED" \
    cloudcode-pa.googleapis.com=127.0.0.25:443 www.googleapis.com=127.0.0.26:443 ||
    egm_bail "fakeapi.py serves cloudcode-pa.googleapis.com and www.googleapis.com"
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
KEY=AIzaREAL-$(rnd)
VKEY=AQ.REAL-$(rnd)
(umask 077 && printf '%s\n' "$KEY" >"$S/gemini-key" && printf '%s\n' "$VKEY" >"$S/vertex-key" &&
    printf '%s\n' "$KEY" "$VKEY" >"$T/keys")
egm_server "$T/fakeapi-key.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi-key.log" \
    --certs "$T/certs" --anthropic-key "$T/keys" --openai-key "$T/keys" --google-key "$T/keys" \
    --delay 0.05 --text "$CANNED" generativelanguage.googleapis.com=127.0.0.27:443 \
    aiplatform.googleapis.com=127.0.0.28:443 ||
    egm_bail "fakeapi.py serves generativelanguage.googleapis.com and aiplatform.googleapis.com"

# The appliance's copy of the login, as `gemini` wrote it on a workstation
# (~/.gemini/oauth_creds.json).
python3 - "$T/seed.json" >"$S/gemini" <<'EOF' || egm_bail "the login file"
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"access_token": s["access"], "refresh_token": s["refresh"],
    "scope": "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile openid",
    "token_type": "Bearer", "expiry_date": s["expires_ms"]}))
EOF
chmod 600 "$S/gemini"
agents_sandbox gemini gemini-key vertex-key
# The guest: egressd's file, the settings sandboxctl writes beside it
# (homefiles.c), and the image's system-wide settings (folder trust off).
agents_guest_file gemini "$SBX/home/.gemini/oauth_creds.json"
PY=python3 # (Debian's has yaml)
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
"$PY" - "$SBX" "$TOP/deploy/image/user-data.yaml" <<'EOF' || egm_bail "the guest's settings"
import json, sys, yaml
json.dump({"security": {"auth": {"selectedType": "oauth-personal"}}},
          open(sys.argv[1] + "/home/.gemini/settings.json", "w"), indent=2)
files = yaml.safe_load(open(sys.argv[2]))["write_files"]
system = [f["content"] for f in files if f["path"] == "/etc/gemini-cli/settings.json"]
open(sys.argv[1] + "/system-settings.json", "w").write(system[0])
EOF

# gemini reads system-wide settings only from a path no other user can
# write to, up to /: the image's go on a tmpfs at /mnt in a mount
# namespace of the run's own.
SYSTEM=/mnt/gemini-cli/settings.json
SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY"
    https_proxy="http://$EGD_PROXY" NODE_EXTRA_CA_CERTS="$SBX/sbca.pem"
    GEMINI_CLI_SYSTEM_SETTINGS_PATH="$SYSTEM")
# agent_run NAME: `gemini -p "say hi"` on the sandbox side; rc printed.
agent_run() {
    (cd "$SBX/work" && unshare -m --propagation private sh -c \
        'mount -t tmpfs -o mode=755 egd-gemini /mnt && mkdir -m 755 "${1%/*}" &&
         cp "$2" "$1" && shift 2 && exec "$@"' sh "$SYSTEM" "$SBX/system-settings.json" \
        "${SBENV[@]}" timeout 60 "$BIN/gemini" -p "say hi" </dev/null >"$SBX/$1.out" 2>"$SBX/$1.err")
    echo $?
}
api() { agents_count "$T/fakeapi.log" "o.get('event') == 'request' and ($1)"; }

# --- the guest's file as egressd made it, then lapsed
agents_run_ok given \
    "gemini -p with the oauth_creds.json egressd made for the guest: exit 0, the fake API's answer"
ok "$([ "$(agents_count "$T/oauthd.log" "o['path'] == '/tokeninfo' and o['result'] == 'ok'")" -ge 1 ] &&
    [ "$(api "o['path'] == '/v1internal:loadCodeAssist' and o['status'] == 200")" -ge 1 ] &&
    [ "$(api "o['path'].startswith('/v1internal:streamGenerateContent') and o['status'] == 200")" -ge 1 ] &&
    echo 0 || echo 1)" \
    "gemini checked its token (tokeninfo), found its Code Assist project, and streamed the answer"
python3 - "$SBX/home/.gemini/oauth_creds.json" <<'EOF'
import json, sys, time
j = json.load(open(sys.argv[1]))
j["expiry_date"] = int(time.time() * 1000) - 60000 # lapsed a minute ago
json.dump(j, open(sys.argv[1], "w"))
EOF
egd_log_mark
agents_run_ok first "gemini -p with the login lapsed in the guest: exit 0, the fake API's answer"
ok "$(egd_log_count "l['host'] == 'oauth2.googleapis.com' and l.get('path') == '/token' and l['status'] == 200" |
    awk '{ exit !($1 >= 1) }' && echo 0 || echo 1)" \
    "gemini refreshed its login first, and egressd answered it"
ok "$(python3 -c 'import json,sys,time; j=json.load(open(sys.argv[1])); c=json.load(open(sys.argv[2]))["secrets"]["gemini"]; sys.exit(0 if j["access_token"] == c["placeholder"] and j["refresh_token"] == c["refresh_placeholder"] and j["expiry_date"] > time.time() * 1000 else 1)' \
    "$SBX/home/.gemini/oauth_creds.json" "$T/cred.json" && echo 0 || echo 1)" \
    "gemini's oauth_creds.json still holds the placeholders, with the expiry egressd gave"

# --- unattended: over a minute of runs while the real token lapses every 10 s
agents_unattended gemini
agents_refreshes_ok "$CLIENT_ID" gemini
turns=$(api "o['path'].startswith('/v1internal:streamGenerateContent') and o['status'] == 200")
ok "$([ "$turns" -ge "$AGENTS_RUNS" ] && [ "$(api "o['auth'] != 'match'")" = 0 ] &&
    [ "$(agents_count "$T/oauthd.log" "o['kind'] == 'api' and o['result'] != 'ok'")" = 0 ] &&
    echo 0 || echo 1)" \
    "Code Assist streamed $turns answers, and every request (its tokeninfo too) had a real token good at the time"

# --- an API key instead: GEMINI_API_KEY the placeholder (what sandboxctl
# puts in the guest's environment), no settings of the user's
PH_KEY=$(egm_placeholder gemini-key)
mkdir -p "$SBX/home-key"
SBENV=("${SBENV[@]/#HOME=*/HOME=$SBX/home-key}" GEMINI_API_KEY="$PH_KEY")
agents_run_ok key "gemini -p with GEMINI_API_KEY the placeholder: exit 0, the fake API's answer"
keyed() { agents_count "$T/fakeapi-key.log" "o.get('event') == 'request' and ($1)"; }
sha() { printf '%s' "$1" | sha256sum | cut -c1-16; }
ok "$([ "$(keyed "o['site'] == 'generativelanguage.googleapis.com' and ':streamGenerateContent' in o['path'] and o['status'] == 200 and o['auth_field'] == 'x-goog-api-key'")" -ge 1 ] &&
    [ "$(keyed "o['site'] == 'generativelanguage.googleapis.com' and o['auth_sha256'] != '$(sha "$KEY")'")" = 0 ] &&
    echo 0 || echo 1)" \
    "the Gemini API streamed the answer, and every request had the real key in x-goog-api-key"

# Vertex AI with an API key (express mode): GOOGLE_API_KEY the placeholder
PH_VKEY=$(egm_placeholder vertex-key)
mkdir -p "$SBX/home-vertex"
SBENV=("${SBENV[@]/#HOME=*/HOME=$SBX/home-vertex}")
SBENV=("${SBENV[@]/#GEMINI_API_KEY=*/GOOGLE_API_KEY=$PH_VKEY}" GOOGLE_GENAI_USE_VERTEXAI=true)
agents_run_ok vertex "gemini -p on Vertex AI with GOOGLE_API_KEY the placeholder: exit 0, the answer"
ok "$([ "$(keyed "o['site'] == 'aiplatform.googleapis.com' and ':streamGenerateContent' in o['path'] and o['status'] == 200 and o['auth_sha256'] == '$(sha "$VKEY")'")" -ge 1 ] &&
    [ "$(keyed "o['site'] == 'aiplatform.googleapis.com' and o['auth_sha256'] != '$(sha "$VKEY")'")" = 0 ] &&
    echo 0 || echo 1)" \
    "Vertex AI streamed the answer, and every request there had the real Vertex key"

# --- what the sandbox side holds: gemini's homes, its outputs
agents_no_real_token "gemini's homes, its outputs; the API keys too" "$KEY" "$VKEY"

egd_finish
tap_end
