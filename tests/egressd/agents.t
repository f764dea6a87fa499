#!/usr/bin/env bash
# agents.t - the real coding agents' CLIs through egressd's credential
# injection, against a local fake API (fakeapi.py): `claude -p` (npm's
# @anthropic-ai/claude-code) toward a fake Anthropic Messages API, and
# `codex exec` (npm's @openai/codex) toward a fake OpenAI Responses API.
# Each prints the canned answer; the fake API saw the real key; the
# sandbox side never held it (environment: the placeholder; nothing the
# CLI wrote or got has the secret); the answer streamed through as it was
# sent; the endpoints the CLIs call besides the API (telemetry, plugins,
# feature flags) are denied by the policy and the run still completes.
# Then codex with its defaults: the key in auth.json, the Responses API
# over a WebSocket, served inside the intercepted tunnel.
# TAP on stdout.  Needs BUILD_DIR, TOP; installs the two CLIs from npm
# once, then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"

# The pinned CLIs, once, outside the namespace.
egm_install_outside egm_agents_setup
egd_netns "$@"
egd_setup || { rm -f "${EGM_INSTALL_LOG:-}"; egm_bail "set-up: temp dir, test CA, hosts, preset"; }
egm_install_check "the CLIs ${EGM_AGENT_PACKAGES[*]} are installed in BUILD_DIR" \
    "nothing to run without the CLIs"
BIN=$(egm_agents_modules)/.bin

# The sandbox sb1 is 127.0.0.1, the source of every client here.  Only the
# two fake APIs are bound (claude sends its key as x-api-key, codex as a
# Bearer token); every other name the CLIs ask for is denied.
SB=127.0.0.1
egd_host 127.0.0.28 api.anthropic.test
egd_host 127.0.0.29 api.openai.test
egd_allow "api.anthropic.test:4443 inject x-api-key secret anthropic" \
    "api.openai.test:4443 inject bearer secret openai"
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
S=$T/secrets
mkdir -m 700 "$S"
put_secret() { (umask 077 && printf '%s\n' "$2" >"$S/$1"); }
SEC_A=sk-ant-REAL-$(rnd)
SEC_O=sk-REAL-$(rnd)
put_secret anthropic "$SEC_A"
put_secret openai "$SEC_O"
mkdir -p "$T/want"
printf '%s\n' "$SEC_A" >"$T/want/anthropic"
printf '%s\n' "$SEC_O" >"$T/want/openai"
SECRETS=$T/secrets.list
printf '%s\n' "$SEC_A" "$SEC_O" >"$SECRETS"
sha16() { printf '%s' "$1" | sha256sum | cut -c1-16; }
SBX=$T/sandbox
mkdir -p "$SBX/home" "$SBX/work"

# The fake API: events 0.2 s apart, the last one 1.2 s after the one
# before it, so that an answer relayed as it comes is seen well before the
# stream ends.
CANNED="Hello from the fake API."
egd_cert api.anthropic.test && egd_cert api.openai.test || egm_bail "certificates for the fake APIs"
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/want/anthropic" --openai-key "$T/want/openai" \
    --delay 0.2 --last-delay 1.2 --text "$CANNED" \
    api.anthropic.test=127.0.0.28:4443 api.openai.test=127.0.0.29:4443 ||
    egm_bail "fakeapi.py serves api.anthropic.test and api.openai.test"
egm_secret_sandbox "$SBX/sbca.pem" '"name":"agents","owner":"alice",' anthropic openai
PH_A=$(egm_placeholder anthropic)
PH_O=$(egm_placeholder openai)
[[ $PH_A == egressd-ph-anthropic-* && $PH_O == egressd-ph-openai-* ]] ||
    egm_bail "the credentials hold a placeholder per secret"

# The sandbox side's environment: nothing of this machine's but PATH, its
# own HOME, the proxy.  sbrun ENVFILE OUT ERR VAR=VALUE... -- CMD...: CMD
# there (in $SBX/work, stdin closed, 60 s at most), its environment
# written to ENVFILE first.
SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" HTTPS_PROXY="http://$EGD_PROXY"
    https_proxy="http://$EGD_PROXY")
sbrun() {
    local envfile=$1 out=$2 err=$3 vars=()
    shift 3
    while [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    (cd "$SBX/work" && "${SBENV[@]}" "${vars[@]}" sh -c 'env >"$0"; exec timeout 60 "$@"' \
        "$envfile" "$@" </dev/null >"$out" 2>"$err")
}
# Timestamp each line of stdin as it comes: [arrival, line] as JSON.
STAMP='import json, sys, time
for line in sys.stdin:
    print(json.dumps([time.time(), line.rstrip("\n")]), flush=True)'
# env_ok FILE VAR PH: the environment in FILE (env's output) has VAR=PH
# and no secret's value.
env_ok() { grep -qxF "$2=$3" "$1" && ! grep -qF -f "$SECRETS" "$1"; }
# fake_mark / fake_since PYEXPR: fakeapi.py's log lines after the mark
# where PYEXPR over `o` holds, as a JSON array.
FAKE_MARK=0
fake_mark() { FAKE_MARK=$(cat "$T/fakeapi.log" 2>/dev/null | wc -l); }
fake_since() {
    python3 - "$T/fakeapi.log" "$FAKE_MARK" "$1" <<'EOF'
import json, sys
try:
    lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]
except FileNotFoundError:
    lines = []
print(json.dumps([o for o in map(json.loads, filter(str.strip, lines)) if eval(sys.argv[3])]))
EOF
}
# others_ok LINES: the access-log lines of the CONNECTs to anything but
# the two APIs: there are some, and every one is denied (not_allowed).
OTHERS='ls and all(l["decision"] == "deny" and l["reason"] == "not_allowed" and l["status"] == 403 for l in ls)'
others() { egm_log_lines 'l["mode"] == "connect" and not l["host"].endswith(".test")'; }
others_diag() {
    python3 -c '
import collections, json, sys
c = collections.Counter("%s:%s %s" % (l["host"], l["port"], l["decision"]) for l in json.loads(sys.argv[1] or "[]"))
print("# the CLI also asked for: " + (", ".join("%s (x%d)" % kv for kv in sorted(c.items())) or "nothing"))' "$1"
}

# ---- claude -p "say hi": ANTHROPIC_BASE_URL is the fake API,
# ANTHROPIC_API_KEY the placeholder, NODE_EXTRA_CA_CERTS the sandbox CA.
CLAUDE_VARS=(ANTHROPIC_BASE_URL=https://api.anthropic.test:4443 ANTHROPIC_API_KEY="$PH_A"
    NODE_EXTRA_CA_CERTS="$SBX/sbca.pem")
egd_log_mark
fake_mark
sbrun "$SBX/claude.env" "$SBX/claude.out" "$SBX/claude.err" "${CLAUDE_VARS[@]}" -- "$BIN/claude" -p "say hi"
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(cat "$SBX/claude.out")" = "$CANNED" ] && echo 0 || echo 1)" \
    "claude -p \"say hi\" through the proxy: exit 0, prints the fake API's answer"
[ $rc -eq 0 ] || { diag "exit $rc; stdout: $(head -c 300 "$SBX/claude.out")"; diag_file "$SBX/claude.err"; }
reqs=$(fake_since "o['event'] == 'request'")
egm_lines_ok "claude: the fake API saw POST /v1/messages, streamed, with the real key in x-api-key and anthropic-version" "$reqs" \
    "any(o['path'].startswith('/v1/messages') and o['method'] == 'POST' and o['stream'] and o['status'] == 200 and o['auth_field'] == 'x-api-key' and o['auth_sha256'] == '$(sha16 "$SEC_A")' and o['anthropic_version'] for o in ls)"
egm_lines_ok "claude: every request it made to the API carried the real key (none the placeholder, none without)" "$reqs" \
    "ls and all(o['auth'] == 'match' and not o['placeholder'] for o in ls)"
python3 -c 'import json,sys; print("# claude: user agent %s, requests %s" % (json.loads(sys.argv[1])[0]["user_agent"], [o["path"] for o in json.loads(sys.argv[1])]))' "$reqs" 2>/dev/null
egm_lines_ok "claude: the inner requests logged intercept, anthropic added, 200" \
    "$(egm_log_lines 'l["mode"] == "intercept"')" \
    "ls and all(l['host'] == 'api.anthropic.test' and l['inject'] == 'anthropic' and l['status'] == 200 and l['sandbox'] == 'sb1' for l in ls)"
lines=$(others)
egm_lines_ok "claude: what else it asked for (telemetry, registries) was denied, not_allowed, and it completed" "$lines" "$OTHERS"
others_diag "$lines"
check "claude: its environment holds the placeholder as ANTHROPIC_API_KEY, no secret" \
    env_ok "$SBX/claude.env" ANTHROPIC_API_KEY "$PH_A"

# The same with stream-json and partial messages: each event as it comes.
fake_mark
(cd "$SBX/work" && "${SBENV[@]}" "${CLAUDE_VARS[@]}" timeout 60 "$BIN/claude" -p "say hi" \
    --output-format stream-json --verbose --include-partial-messages </dev/null 2>"$SBX/claude-stream.err" |
    python3 -u -c "$STAMP" >"$SBX/claude-stream.out")
sent=$(fake_since "o['event'] == 'sent'")
python3 - "$SBX/claude-stream.out" "$sent" "$CANNED" <<'EOF' >"$T/claude-stream.json"
import json, sys
lines = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
sent = json.loads(sys.argv[2])
out = {"result": None, "first_delta": None, "last_sent": None}
for t, line in lines:
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j.get("type") == "result":
        out["result"] = j.get("result")
    ev = j.get("event") or {}
    if j.get("type") == "stream_event" and ev.get("type") == "content_block_delta" and out["first_delta"] is None:
        out["first_delta"] = t
if sent:
    n = sent[0]["n"]
    out["last_sent"] = [o["t"] for o in sent if o["n"] == n][-1]
print(json.dumps(out))
EOF
ok_json "claude --output-format stream-json: the result is the answer, its first text delta came >= 1 s before the stream's last event was sent" \
    "$(cat "$T/claude-stream.json")" \
    "l['result'] == '$CANNED' and l['first_delta'] is not None and l['first_delta'] < l['last_sent'] - 1.0"

# ---- codex exec "say hi": a model provider for the fake API in
# CODEX_HOME/config.toml (Responses over HTTP: supports_websockets =
# false), OPENAI_API_KEY the placeholder, SSL_CERT_FILE the sandbox CA.
mkdir -p "$SBX/codex"
cat >"$SBX/codex/config.toml" <<'EOF'
model = "gpt-fake"
model_provider = "fake"

[model_providers.fake]
name = "fake OpenAI"
base_url = "https://api.openai.test:4443/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
supports_websockets = false
EOF
CODEX_VARS=(CODEX_HOME="$SBX/codex" OPENAI_API_KEY="$PH_O" SSL_CERT_FILE="$SBX/sbca.pem")
egd_log_mark
fake_mark
sbrun "$SBX/codex.env" "$SBX/codex.out" "$SBX/codex.err" "${CODEX_VARS[@]}" -- \
    "$BIN/codex" exec --skip-git-repo-check "say hi"
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(tail -n 1 "$SBX/codex.out")" = "$CANNED" ] && echo 0 || echo 1)" \
    "codex exec \"say hi\" through the proxy: exit 0, prints the fake API's answer"
[ $rc -eq 0 ] || { diag "exit $rc; stdout: $(head -c 300 "$SBX/codex.out")"; diag_file "$SBX/codex.err"; }
reqs=$(fake_since "o['event'] == 'request'")
egm_lines_ok "codex: the fake API saw POST /v1/responses, streamed, with the real key as the Bearer token" "$reqs" \
    "any(o['path'] == '/v1/responses' and o['method'] == 'POST' and o['stream'] and o['status'] == 200 and o['auth_field'] == 'authorization' and o['auth_sha256'] == '$(sha16 "$SEC_O")' for o in ls)"
egm_lines_ok "codex: every request it made to the API carried the real key" "$reqs" \
    "ls and all(o['auth'] == 'match' and not o['placeholder'] for o in ls)"
python3 -c 'import json,sys; print("# codex: user agent %s, requests %s" % (json.loads(sys.argv[1])[0]["user_agent"], [o["path"] for o in json.loads(sys.argv[1])]))' "$reqs" 2>/dev/null
egm_lines_ok "codex: the inner requests logged intercept, openai added, 200" \
    "$(egm_log_lines 'l["mode"] == "intercept"')" \
    "ls and all(l['host'] == 'api.openai.test' and l['inject'] == 'openai' and l['status'] == 200 for l in ls)"
lines=$(others)
egm_lines_ok "codex: what else it asked for (plugins, analytics) was denied, not_allowed, and it completed" "$lines" "$OTHERS"
others_diag "$lines"
check "codex: its environment holds the placeholder as OPENAI_API_KEY, no secret" \
    env_ok "$SBX/codex.env" OPENAI_API_KEY "$PH_O"

# codex exec --json: the agent's message as an event, as it comes.
fake_mark
(cd "$SBX/work" && "${SBENV[@]}" "${CODEX_VARS[@]}" timeout 60 "$BIN/codex" exec --json \
    --skip-git-repo-check "say hi" </dev/null 2>"$SBX/codex-json.err" |
    python3 -u -c "$STAMP" >"$SBX/codex-json.out")
sent=$(fake_since "o['event'] == 'sent'")
python3 - "$SBX/codex-json.out" "$sent" <<'EOF' >"$T/codex-json.json"
import json, sys
lines = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
sent = json.loads(sys.argv[2])
out = {"text": None, "arrival": None, "last_sent": None}
for t, line in lines:
    try:
        j = json.loads(line)
    except ValueError:
        continue
    item = j.get("item") or {}
    if j.get("type") == "item.completed" and item.get("type") == "agent_message":
        out["text"], out["arrival"] = item.get("text"), t
if sent:
    n = sent[0]["n"]
    out["last_sent"] = [o["t"] for o in sent if o["n"] == n][-1]
print(json.dumps(out))
EOF
ok_json "codex exec --json: its agent message is the answer, and came >= 1 s before the stream's last event was sent" \
    "$(cat "$T/codex-json.json")" \
    "l['text'] == '$CANNED' and l['arrival'] is not None and l['arrival'] < l['last_sent'] - 1.0"

# ---- codex with its defaults: the built-in provider (only its base URL
# set, openai_base_url) and the key where `codex login --with-api-key`
# puts it, CODEX_HOME/auth.json in API-key mode, the placeholder in it.
# codex then speaks the Responses API over a WebSocket (a warm-up
# response.create at start, the turn on the same connection); egressd
# judges the upgrade, adds the key, and relays the frames.
mkdir -p "$SBX/codex-default"
(umask 077 && printf '{\n  "auth_mode": "apikey",\n  "OPENAI_API_KEY": "%s"\n}\n' "$PH_O" \
    >"$SBX/codex-default/auth.json")
egd_log_mark
fake_mark
sbrun "$SBX/codex-ws.env" "$SBX/codex-ws.out" "$SBX/codex-ws.err" CODEX_HOME="$SBX/codex-default" \
    SSL_CERT_FILE="$SBX/sbca.pem" -- \
    "$BIN/codex" exec --skip-git-repo-check -c 'openai_base_url="https://api.openai.test:4443/v1"' "say hi"
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(tail -n 1 "$SBX/codex-ws.out")" = "$CANNED" ] && echo 0 || echo 1)" \
    "codex with its defaults (auth.json in API-key mode, the built-in provider): exit 0, prints the answer"
[ $rc -eq 0 ] || { diag "exit $rc; stdout: $(head -c 300 "$SBX/codex-ws.out")"; diag_file "$SBX/codex-ws.err" 10; }
reqs=$(fake_since "o['event'] == 'request'")
egm_lines_ok "... over a WebSocket: the upgrade had the real key (101), then its warm-up and its turn as response.create messages" "$reqs" \
    "any(o['ws'] and o['method'] == 'GET' and o['status'] == 101 and o['auth'] == 'match' and o['auth_sha256'] == '$(sha16 "$SEC_O")' for o in ls) and any(o['method'] == 'WS' and o.get('warmup') for o in ls) and any(o['method'] == 'WS' and not o.get('warmup') and o['status'] == 200 for o in ls)"
egm_lines_ok "... and nothing reached the fake API without the real key" "$reqs" \
    "ls and all(o['auth'] == 'match' and not o['placeholder'] for o in ls)"
egm_lines_ok "... logged: the intercepted upgrade, GET /v1/responses, 101, openai added" \
    "$(egm_log_lines 'l["mode"] == "intercept" and l["host"] == "api.openai.test"')" \
    "any(l['method'] == 'GET' and l['path'] == '/v1/responses' and l['status'] == 101 and l['inject'] == 'openai' and l['decision'] == 'allow' for l in ls)"
check "... its auth.json still holds the placeholder, no secret" \
    sh -c "grep -qF '$PH_O' '$SBX/codex-default/auth.json' && ! grep -qF -f '$SECRETS' '$SBX/codex-default/auth.json'"

# ---- what the sandbox side holds, all of it: outputs, environments,
# HOME (~/.claude.json, ~/.claude: debug, telemetry, transcripts), CODEX_HOME.
nfiles=$(find "$SBX" -type f | wc -l)
ok "$([ "$nfiles" -ge 15 ] && ! grep -rqF -f "$SECRETS" "$SBX" && echo 0 || echo 1)" \
    "no secret's value in the $nfiles files the CLIs wrote or got"
grep -rlF -f "$SECRETS" "$SBX" 2>/dev/null | head -n 5 | sed 's/^/#   holds a secret: /'
ok "$(grep -qF -f "$SECRETS" "$T/access.log" "$T/egressd.err" && echo 1 || echo 0)" \
    "no secret's value in egressd's access log or diagnostics"

egd_finish
tap_end
