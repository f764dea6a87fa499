#!/usr/bin/env bash
# inject-tools.t - real clients through egressd's credential injection
# (docs/credentials.md): python (urllib, Debian's requests), node (undici's
# EnvHttpProxyAgent, and the global fetch through setGlobalDispatcher), git
# clone and push (basic), npm install from a registry that wants its
# _authToken (bearer), and the real Anthropic and OpenAI SDKs streaming
# from a local fake API (fakeapi.py).  For each: the origin saw the real
# secret, the sandbox side never did (what it received, its environment:
# the placeholder only), and a stream's first event arrived before its last
# was sent.  Then the sandbox CA's name constraints in curl, python, node,
# git and openssl: a leaf signed by hand with the appliance key for a name
# outside them is refused, one for a permitted name accepted.
# TAP on stdout.  Needs BUILD_DIR, TOP; installs undici and the SDKs from
# npm once, then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"

# Outside the namespace (the npm registry is reachable only here): the
# pinned packages, once.  The outcome goes to the run inside.
if [ -z "${EGD_IN_NETNS:-}" ]; then
    EGM_NODE_LOG=$(mktemp "${TMPDIR:-/tmp}/egd-node-setup.XXXXXX")
    EGM_NODE_OK=0
    egm_node_setup >"$EGM_NODE_LOG" 2>&1 && egm_sdk_setup >>"$EGM_NODE_LOG" 2>&1 && EGM_NODE_OK=1
    export EGM_NODE_LOG EGM_NODE_OK
fi
egd_netns "$@"
egd_setup || { rm -f "${EGM_NODE_LOG:-}"; egm_bail "set-up: temp dir, test CA, hosts, preset"; }
[ -f "${EGM_NODE_LOG:-}" ] && mv "$EGM_NODE_LOG" "$T/node-setup.log"

# The sandbox sb1 is 127.0.0.1, the source of every client here.
SB=127.0.0.1
egd_host 127.0.0.24 key.test           # origin.py: x-api-key, anthropic
egd_host 127.0.0.25 bear.test          # origin.py: bearer, openai
egd_host 127.0.0.26 git.test           # toolsrv.py + git http-backend: basic, github
egd_host 127.0.0.27 registry.test      # toolsrv.py, an npm registry: bearer, npm
egd_host 127.0.0.28 api.anthropic.test # fakeapi.py: bearer (see the SDKs), anthropic
egd_host 127.0.0.29 api.openai.test    # fakeapi.py: bearer, openai
egd_allow "key.test:4443 inject x-api-key secret anthropic" \
    "bear.test:4443 inject bearer secret openai" \
    "git.test:443 inject basic secret github" \
    "registry.test:443 inject bearer secret npm" \
    "api.anthropic.test:4443 inject bearer secret anthropic" \
    "api.openai.test:4443 inject bearer secret openai"

# The secrets: random, so that a search for one finds only it.
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
S=$T/secrets
mkdir -m 700 "$S"
put_secret() { (umask 077 && printf '%s\n' "$2" >"$S/$1"); }
SEC_A=sk-ant-REAL-$(rnd)
SEC_O=sk-REAL-$(rnd)
SEC_G=ghp_REAL$(rnd)
SEC_N=npm_REAL$(rnd)
put_secret anthropic "$SEC_A"
put_secret openai "$SEC_O"
put_secret github "$SEC_G"
put_secret npm "$SEC_N"
# What the origins expect (the fake API reads these files at each request).
mkdir -p "$T/want"
printf '%s\n' "$SEC_A" >"$T/want/anthropic"
printf '%s\n' "$SEC_O" >"$T/want/openai"
sha16() { printf '%s' "$1" | sha256sum | cut -c1-16; }
# Every secret's value, one a line, for the searches of what the sandbox
# side holds (grep -F -f).
SECRETS=$T/secrets.list
printf '%s\n' "$SEC_A" "$SEC_O" "$SEC_G" "$SEC_N" >"$SECRETS"
# Where the sandbox side's outputs, traces and files go: searched at the end.
SBX=$T/sandbox
mkdir -p "$SBX"

# ---- the servers
egd_cert api.anthropic.test && egd_cert api.openai.test || egm_bail "certificates for the fake APIs"
egm_server "$T/fakeapi.out" python3 -u "$EGD_DIR/fakeapi.py" --log "$T/fakeapi.log" \
    --certs "$T/certs" --anthropic-key "$T/want/anthropic" --openai-key "$T/want/openai" \
    api.anthropic.test=127.0.0.28:4443 api.openai.test=127.0.0.29:4443 ||
    egm_bail "fakeapi.py serves api.anthropic.test and api.openai.test"
egd_origin key.test bear.test || egm_bail "origin.py serves key.test and bear.test"
egm_secret_sandbox "$T/sbca.pem" '"name":"box","owner":"alice",' anthropic openai github npm
PH_A=$(egm_placeholder anthropic)
PH_O=$(egm_placeholder openai)
PH_G=$(egm_placeholder github)
PH_N=$(egm_placeholder npm)
[[ $PH_A == egressd-ph-anthropic-* && $PH_N == egressd-ph-npm-* ]] || egm_bail "the credentials hold a placeholder per secret"
SBCA=$SBX/sbca.pem
cp "$T/sbca.pem" "$SBCA"
P=http://$EGD_PROXY

# The sandbox side's environment: nothing of this machine's but PATH, its
# own HOME, the proxy, the placeholders.
mkdir -p "$SBX/home"
SBENV=(env -i PATH="$PATH" LANG=C.UTF-8 HOME="$SBX/home" https_proxy="$P" HTTPS_PROXY="$P"
    ANTHROPIC_API_KEY="$PH_A" OPENAI_API_KEY="$PH_O")

# origin_saw PYEXPR: request heads origin.py logged where PYEXPR over `o` holds.
origin_saw() { origin_log_count "o['event'] == 'request' and ($1)"; }
hdr() { echo "dict(o['headers']).get('$1')"; }
# env_ok FILE VAR PH: the environment a client dumped (JSON in FILE's
# "env") has VAR = PH, the placeholder, and no secret's value.
env_ok() {
    python3 - "$@" "$SECRETS" <<'EOF'
import json, sys
path, var, ph, secrets = sys.argv[1:5]
secrets = open(secrets).read().split()
env = None
for line in open(path):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if "env" in j:
        env = j["env"]
sys.exit(0 if env is not None and env.get(var) == ph
         and not any(x in k + "=" + v for k, v in env.items() for x in secrets) else 1)
EOF
}
# STREAM_OK, over a client's output `l`: its "events" (origin.py's /sse/5:
# "data: I SENT", each with its arrival) are 5, and the first came at
# least 0.5 s before the last was sent.
STREAM_OK="len(l['events']) == 5 and l['events'][0][1] < float(l['events'][4][0].split()[1]) - 0.5"

# ---- python: urllib (https_proxy from the environment, the CA from
# SSL_CERT_FILE) and Debian's requests (REQUESTS_CA_BUNDLE)
cat >"$T/sbpy.py" <<'EOF'
# sbpy.py urllib|requests URL HEADER:VALUE: a GET through the proxy of the
# environment; prints {"status", "body" | "events": [[data, arrival], ...],
# "env"} (a text/event-stream is read line by line as it comes).
import json, os, sys, time
mode, url, field = sys.argv[1:4]
name, _, value = field.partition(":")
hdrs = {name: value.strip()}
out = {"env": dict(os.environ), "mode": mode}
events = []
if mode == "urllib":
    import ssl, urllib.request
    ctx = ssl.create_default_context()  # SSL_CERT_FILE: the sandbox CA alone
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
    r = opener.open(urllib.request.Request(url, headers=hdrs), timeout=20)
    out["status"] = r.status
    if r.headers.get("content-type") == "text/event-stream":
        for line in iter(r.readline, b""):
            if line.startswith(b"data: "):
                events.append([line[6:].decode().strip(), time.time()])
    else:
        out["body"] = r.read().decode()
else:
    import requests
    out["requests"] = requests.__version__ + " " + requests.__file__
    r = requests.get(url, headers=hdrs, stream=True, timeout=20)
    out["status"] = r.status_code
    if r.headers.get("content-type") == "text/event-stream":
        for line in r.iter_lines(chunk_size=1):
            if line.startswith(b"data: "):
                events.append([line[6:].decode().strip(), time.time()])
    else:
        out["body"] = r.text
out["events"] = events
print(json.dumps(out))
EOF
# Debian's python (python3-requests is a Debian package), not one on PATH.
DEBPY=/usr/bin/python3
egd_log_mark
"${SBENV[@]}" SSL_CERT_FILE="$SBCA" "$DEBPY" -S "$T/sbpy.py" urllib "https://key.test:4443/hello" \
    "x-api-key: $PH_A" >"$SBX/urllib.out" 2>&1
ok_json "python urllib: GET https://key.test:4443/hello through https_proxy, the sandbox CA: 200" \
    "$(tail -n 1 "$SBX/urllib.out")" "l['status'] == 200 and l['body'] == 'hello from key.test\n'"
ok "$([ "$(origin_saw "$(hdr x-api-key) == '$SEC_A'")" = 1 ] && echo 0 || echo 1)" \
    "python urllib: the origin saw the real key"
check "python urllib: its environment holds the placeholder, no secret" env_ok "$SBX/urllib.out" ANTHROPIC_API_KEY "$PH_A"
egd_log_ok "python urllib: the inner request logged intercept, anthropic added" \
    "l['mode'] == 'intercept' and l['host'] == 'key.test'" \
    "l['inject'] == 'anthropic' and l['sandbox'] == 'sb1' and l['status'] == 200"
"${SBENV[@]}" SSL_CERT_FILE="$SBCA" "$DEBPY" -S "$T/sbpy.py" urllib "https://key.test:4443/sse/5" \
    "x-api-key: $PH_A" >"$SBX/urllib-sse.out" 2>&1
ok_json "python urllib: /sse/5 streamed, the first event before the last was sent" \
    "$(tail -n 1 "$SBX/urllib-sse.out")" "l['status'] == 200 and $STREAM_OK"

# requests: with -S Debian's dist-packages are not on the path; without it.
"${SBENV[@]}" REQUESTS_CA_BUNDLE="$SBCA" "$DEBPY" "$T/sbpy.py" requests "https://bear.test:4443/hello" \
    "Authorization: Bearer $PH_O" >"$SBX/requests.out" 2>&1
ok_json "python requests (Debian's): GET https://bear.test:4443/hello, REQUESTS_CA_BUNDLE: 200" \
    "$(tail -n 1 "$SBX/requests.out")" \
    "l['status'] == 200 and l['body'] == 'hello from bear.test\n' and '/usr/lib/python3/dist-packages/' in l['requests']"
ok "$([ "$(origin_saw "$(hdr authorization) == 'Bearer $SEC_O'")" = 1 ] && echo 0 || echo 1)" \
    "python requests: the origin saw the real token"
check "python requests: its environment holds the placeholder, no secret" env_ok "$SBX/requests.out" OPENAI_API_KEY "$PH_O"
"${SBENV[@]}" REQUESTS_CA_BUNDLE="$SBCA" "$DEBPY" "$T/sbpy.py" requests "https://bear.test:4443/sse/5" \
    "Authorization: Bearer $PH_O" >"$SBX/requests-sse.out" 2>&1
ok_json "python requests: /sse/5 streamed, the first event before the last was sent" \
    "$(tail -n 1 "$SBX/requests-sse.out")" "l['status'] == 200 and $STREAM_OK"

# ---- node: undici's EnvHttpProxyAgent (HTTPS_PROXY from the environment)
# with undici's fetch, and node's own global fetch through
# setGlobalDispatcher; NODE_EXTRA_CA_CERTS is the sandbox CA.
MODS= SDKS=
if [ "${EGM_NODE_OK:-0}" = 1 ]; then
    ok 0 "node: undici $EGM_UNDICI_VERSION and ${EGM_SDK_PACKAGES[*]} are installed in BUILD_DIR"
    MODS=$(egm_node_modules)
    SDKS=$(egm_sdk_modules)
else
    ok 1 "node: undici $EGM_UNDICI_VERSION and ${EGM_SDK_PACKAGES[*]} are installed in BUILD_DIR"
    diag_file "$T/node-setup.log"
fi
cat >"$T/sbfetch.js" <<'EOF'
// node sbfetch.js UNDICI agent|global URL FIELD:VALUE: one GET through
// EnvHttpProxyAgent, by undici's fetch with it as the dispatcher (agent) or
// by node's global fetch after setGlobalDispatcher (global).  Prints
// {"status", "body" | "events": [[data, arrival], ...], "env", "error"}.
const undici = require(process.argv[2]);
const [mode, url, field] = process.argv.slice(3);
const colon = field.indexOf(":");
const headers = { [field.slice(0, colon)]: field.slice(colon + 1).trim() };
(async () => {
    const out = { env: process.env, mode };
    const agent = new undici.EnvHttpProxyAgent();
    let get;
    if (mode === "agent") {
        get = (u, o) => undici.fetch(u, { ...o, dispatcher: agent });
    } else {
        undici.setGlobalDispatcher(agent);
        get = globalThis.fetch;
        out.fetch_is_undicis = globalThis.fetch === undici.fetch;
    }
    try {
        const r = await get(url, { headers });
        out.status = r.status;
        if (r.headers.get("content-type") === "text/event-stream") {
            const dec = new TextDecoder();
            let buf = "";
            out.events = [];
            for await (const chunk of r.body) {
                buf += dec.decode(chunk, { stream: true });
                for (let k; (k = buf.indexOf("\n")) >= 0; buf = buf.slice(k + 1)) {
                    const line = buf.slice(0, k);
                    if (line.startsWith("data: "))
                        out.events.push([line.slice(6).trim(), Date.now() / 1000]);
                }
            }
        } else {
            out.body = await r.text();
        }
    } catch (e) {
        const causes = [];
        for (let c = e.cause; c && causes.length < 5; c = c.cause) causes.push(String(c));
        out.error = String(e) + " <- " + causes.join(" <- ");
    }
    console.log(JSON.stringify(out));
    await agent.close();
})();
EOF
for mode in agent global; do
    what="node undici fetch + EnvHttpProxyAgent" ua=undici
    [ $mode = global ] && what="node global fetch + setGlobalDispatcher(EnvHttpProxyAgent)" ua=node
    "${SBENV[@]}" NODE_EXTRA_CA_CERTS="$SBCA" timeout 20 node "$T/sbfetch.js" "$MODS/undici" $mode \
        "https://key.test:4443/hello" "x-api-key: $PH_A" >"$SBX/node-$mode.out" 2>&1
    ok_json "$what: GET https://key.test:4443/hello: 200" "$(tail -n 1 "$SBX/node-$mode.out")" \
        "l['status'] == 200 and l['body'] == 'hello from key.test\n'"
    ok "$([ "$(origin_saw "$(hdr x-api-key) == '$SEC_A' and $(hdr user-agent) == '$ua'")" = 1 ] && echo 0 || echo 1)" \
        "$what: the origin saw the real key (from user agent '$ua')"
    check "$what: its environment holds the placeholder, no secret" env_ok "$SBX/node-$mode.out" ANTHROPIC_API_KEY "$PH_A"
    "${SBENV[@]}" NODE_EXTRA_CA_CERTS="$SBCA" timeout 20 node "$T/sbfetch.js" "$MODS/undici" $mode \
        "https://bear.test:4443/sse/5" "Authorization: Bearer $PH_O" >"$SBX/node-$mode-sse.out" 2>&1
    ok_json "$what: /sse/5 streamed, the first event before the last was sent" \
        "$(tail -n 1 "$SBX/node-$mode-sse.out")" "l['status'] == 200 and $STREAM_OK"
done
ok "$([ "$(origin_saw "$(hdr authorization) == 'Bearer $SEC_O' and o['target'] == '/sse/5'")" = 3 ] && echo 0 || echo 1)" \
    "bear.test saw the real token on the three /sse/5 streams (requests', node's two)"

# toolsrv_auth NAME PYEXPR: how many of toolsrv.py's log lines for NAME
# (`r`: method, path, status, auth, auth_sha256) PYEXPR holds for.
toolsrv_auth() {
    python3 - "$T/toolsrv-$1.log" "$2" <<'EOF'
import json, sys
rs = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
print(sum(1 for r in rs if eval(sys.argv[2])))
EOF
}

# ---- git: clone and push over HTTPS, `basic` injection; the forge
# (toolsrv.py --require-auth) answers 401 + WWW-Authenticate without the
# real token.  The sandbox's git has the placeholder in its credential
# store; GIT_TRACE_CURL (unredacted) records everything it sent and got.
mkdir -p "$T/git"
(
    set -e
    mkdir -p "$T/git-work"
    cd "$T/git-work"
    git init -q -b main .
    echo "from the forge" >README
    git add README
    git -c user.name=egressd-tests -c user.email=tests@egressd.invalid commit -q -m 'a commit'
    git clone -q --bare "$T/git-work" "$T/git/repo.git"
) >"$T/git-setup.log" 2>&1 || {
    diag_file "$T/git-setup.log"
    egm_bail "git: the bare repository is made"
}
egm_toolsrv git.test "$T/git" --git "$T/git" --require-auth "x-access-token:$SEC_G" ||
    egm_bail "toolsrv.py serves git.test, wanting x-access-token:the github secret"
printf 'https://x-access-token:%s@git.test\n' "$PH_G" >"$SBX/home/.git-credentials"
chmod 600 "$SBX/home/.git-credentials"
B64_G=$(printf 'x-access-token:%s' "$SEC_G" | base64 -w0)
B64_PH_G=$(printf 'x-access-token:%s' "$PH_G" | base64 -w0)
echo "$B64_G" >>"$SECRETS"
# sbgit NAME ARGS...: the sandbox's git, its curl trace in $SBX/git-NAME.trace.
sbgit() {
    "${SBENV[@]}" GIT_SSL_CAINFO="$SBCA" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
        GIT_TRACE_REDACT=0 GIT_TRACE_CURL="$SBX/git-$1.trace" GIT_TRACE_CURL_NO_DATA=1 \
        timeout 30 git -c credential.helper=store -c user.name=sandbox \
        -c user.email=sandbox@egressd.invalid "${@:2}"
}
egd_log_mark
(cd "$SBX" && sbgit clone clone -q https://x-access-token@git.test/git/repo.git clone) \
    >"$SBX/git-clone.log" 2>&1
rc=$?
ok "$([ $rc -eq 0 ] && [ "$(cat "$SBX/clone/README" 2>/dev/null)" = "from the forge" ] && echo 0 || echo 1)" \
    "git clone https://x-access-token@git.test/git/repo.git (401, then the stored placeholder): exit 0, the README"
[ $rc -eq 0 ] || diag_file "$SBX/git-clone.log"
ok "$([ "$(toolsrv_auth git.test "r['auth'] == 'absent' and r['status'] == 401")" -ge 1 ] &&
    [ "$(toolsrv_auth git.test "r['auth'] == 'match' and r['auth_sha256'] == '$(sha16 "$SEC_G")' and r['status'] == 200")" -ge 2 ] &&
    [ "$(toolsrv_auth git.test "r['auth_sha256'] == '$(sha16 "$PH_G")'")" = 0 ] && echo 0 || echo 1)" \
    "git clone: the forge answered 401 without a credential, then saw the real token (info/refs, upload-pack), never the placeholder"
egm_lines_ok "git clone: the inner requests logged intercept, github added to the authorized ones" \
    "$(egm_log_lines 'l["host"] == "git.test" and l["mode"] == "intercept"')" \
    "any(l['inject'] == 'github' and l['method'] == 'POST' and l['status'] == 200 for l in ls) and any(l['status'] == 401 for l in ls)"
# The push: a commit from the sandbox lands in the forge's bare repository.
(
    cd "$SBX/clone" && echo "from the sandbox" >NEW &&
        sbgit commit add NEW && sbgit commit commit -q -m 'from the sandbox' &&
        sbgit push push -q origin main
) >"$SBX/git-push.log" 2>&1
rc=$?
head=$(git -C "$SBX/clone" rev-parse HEAD 2>/dev/null)
ok "$([ $rc -eq 0 ] && [ -n "$head" ] && [ "$(git --git-dir "$T/git/repo.git" rev-parse main)" = "$head" ] &&
    [ "$(git --git-dir "$T/git/repo.git" show main:NEW)" = "from the sandbox" ] && echo 0 || echo 1)" \
    "git push origin main: exit 0, the commit landed in the forge's bare repository"
[ $rc -eq 0 ] || diag_file "$SBX/git-push.log"
ok "$([ "$(toolsrv_auth git.test "r['auth'] == 'match' and 'receive-pack' in r['path'] and r['status'] == 200")" -ge 2 ] && echo 0 || echo 1)" \
    "git push: the forge saw the real token on receive-pack (info/refs and the POST)"
ok "$(grep -q "Send header: Authorization: Basic $B64_PH_G" "$SBX/git-clone.trace" "$SBX/git-push.trace" &&
    grep -q "Recv header: WWW-Authenticate: Basic" "$SBX/git-clone.trace" &&
    ! grep -qF -f "$SECRETS" "$SBX/git-clone.trace" "$SBX/git-push.trace" && echo 0 || echo 1)" \
    "git: its curl traces show Basic with the placeholder sent, the 401's challenge, and no secret"

# ---- npm: install from a registry that wants its _authToken (toolsrv.py
# --require-bearer), `bearer` injection; the sandbox's .npmrc holds
# //registry.test/:_authToken=PLACEHOLDER.
N=$T/npmsrc
mkdir -p "$N/pkg" "$T/reg/egd-tiny/-"
NPM_TOKEN=npm-$(rnd)
cat >"$N/pkg/package.json" <<'EOF'
{"name": "egd-tiny", "version": "1.0.0", "main": "index.js", "license": "MIT",
 "description": "a package for egressd's end-to-end tests"}
EOF
echo "module.exports = \"$NPM_TOKEN\";" >"$N/pkg/index.js"
(cd "$N/pkg" && env "${EGD_SCRUB[@]}" npm --userconfig /dev/null --cache "$N/cache" --loglevel=error \
    pack --pack-destination "$T/reg/egd-tiny/-") >"$N/pack.log" 2>&1 &&
    python3 - "$T/reg/egd-tiny" <<'EOF' >>"$N/pack.log" 2>&1
import base64, hashlib, json, sys
d = sys.argv[1]
tgz = open(d + "/-/egd-tiny-1.0.0.tgz", "rb").read()
pkg = {"name": "egd-tiny", "version": "1.0.0", "main": "index.js", "license": "MIT",
       "dist": {"tarball": "https://registry.test/egd-tiny/-/egd-tiny-1.0.0.tgz",
                "shasum": hashlib.sha1(tgz).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}
doc = {"name": "egd-tiny", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": pkg}}
json.dump(doc, open(d + "/index.json", "w"))
EOF
[ $? -eq 0 ] || {
    diag_file "$N/pack.log"
    egm_bail "npm: the package is packed and its registry document written"
}
egm_toolsrv registry.test "$T/reg" --require-bearer "$SEC_N" ||
    egm_bail "toolsrv.py serves registry.test, wanting Bearer the npm secret"
mkdir -p "$SBX/npm/app"
cat >"$SBX/npm/npmrc" <<EOF
registry=https://registry.test/
//registry.test/:_authToken=$PH_N
cafile=$SBCA
proxy=$P
https-proxy=$P
EOF
: >"$SBX/npm/npmrc-global"
echo '{"name": "app", "version": "1.0.0", "private": true}' >"$SBX/npm/app/package.json"
egd_log_mark
(cd "$SBX/npm/app" && "${SBENV[@]}" timeout 60 npm --userconfig "$SBX/npm/npmrc" \
    --globalconfig "$SBX/npm/npmrc-global" --cache "$SBX/npm/cache" --no-audit --no-fund \
    --no-update-notifier --loglevel=error install egd-tiny@1.0.0) >"$SBX/npm/install.log" 2>&1
rc=$?
got=$(cd "$SBX/npm/app" && "${SBENV[@]}" node -e 'console.log(require("egd-tiny"))' 2>&1)
ok "$([ $rc -eq 0 ] && [ "$got" = "$NPM_TOKEN" ] && echo 0 || echo 1)" \
    "npm install egd-tiny from https://registry.test/ (_authToken = the placeholder): exit 0, the package"
[ $rc -eq 0 ] || diag_file "$SBX/npm/install.log"
ok "$([ "$(toolsrv_auth registry.test "r['auth'] == 'match' and r['auth_sha256'] == '$(sha16 "$SEC_N")' and r['status'] == 200 and r['path'].endswith('.tgz')")" -ge 1 ] &&
    [ "$(toolsrv_auth registry.test "r['auth'] == 'match' and r['path'] == '/egd-tiny'")" -ge 1 ] &&
    [ "$(toolsrv_auth registry.test "r['auth'] != 'match'")" = 0 ] && echo 0 || echo 1)" \
    "npm: the registry saw the real token on the document and the tarball, and nothing else"
egm_lines_ok "npm: the inner requests logged intercept, npm added, 200" \
    "$(egm_log_lines 'l["host"] == "registry.test" and l["mode"] == "intercept"')" \
    "len(ls) >= 2 and all(l['inject'] == 'npm' and l['status'] == 200 and l['method'] == 'GET' for l in ls)"

# ---- the SDKs: @anthropic-ai/sdk (messages.stream) and openai (chat
# completions and responses, streamed) against fakeapi.py, through the
# proxy: undici's fetch with EnvHttpProxyAgent as their fetch dispatcher,
# the placeholder as apiKey (from the environment).  @anthropic-ai/sdk
# 1.x sends its apiKey as "Authorization: Bearer" (0.x sent X-Api-Key):
# api.anthropic.test's rule here is `inject bearer`, and a host whose rule
# is `inject x-api-key` refuses this SDK's request (credential_host_mismatch).
cat >"$T/sdk.js" <<'EOF'
// node sdk.js SDK_MODULES UNDICI anthropic|chat|responses BASE_URL: one
// streamed call; prints {"text", "events": [[type, arrival], ...], "sdk",
// "env", "error", "status"}.
const [mods, undiciDir, api, base] = process.argv.slice(2);
const undici = require(undiciDir);
const dispatcher = new undici.EnvHttpProxyAgent();
const opts = { fetch: undici.fetch, fetchOptions: { dispatcher }, maxRetries: 0, timeout: 20000 };
const out = { env: process.env, api, events: [], text: "" };
const seen = (type) => out.events.push([type, Date.now() / 1000]);
(async () => {
    try {
        if (api === "anthropic") {
            const Anthropic = require(mods + "/@anthropic-ai/sdk").default;
            out.sdk = "@anthropic-ai/sdk " + require(mods + "/@anthropic-ai/sdk/package.json").version;
            const client = new Anthropic({ baseURL: base, apiKey: process.env.ANTHROPIC_API_KEY, ...opts });
            const stream = client.messages.stream({ model: "claude-fake", max_tokens: 64,
                messages: [{ role: "user", content: "say hi" }] });
            for await (const ev of stream) {
                seen(ev.type);
                if (ev.type === "content_block_delta") out.text += ev.delta.text;
            }
            out.final = (await stream.finalMessage()).content[0].text;
        } else {
            const OpenAI = require(mods + "/openai").default;
            out.sdk = "openai " + require(mods + "/openai/package.json").version;
            const client = new OpenAI({ baseURL: base + "/v1", apiKey: process.env.OPENAI_API_KEY, ...opts });
            if (api === "chat") {
                const stream = await client.chat.completions.create({ model: "gpt-fake", stream: true,
                    messages: [{ role: "user", content: "say hi" }] });
                for await (const chunk of stream) {
                    seen(chunk.object);
                    out.text += chunk.choices[0]?.delta?.content || "";
                }
            } else {
                const stream = await client.responses.create({ model: "gpt-fake", input: "say hi",
                    stream: true });
                for await (const ev of stream) {
                    seen(ev.type);
                    if (ev.type === "response.output_text.delta") out.text += ev.delta;
                    if (ev.type === "response.completed") out.final = ev.response.output[0].content[0].text;
                }
            }
        }
    } catch (e) {
        out.error = String(e);
        out.status = e.status;
    }
    console.log(JSON.stringify(out));
    await dispatcher.close();
})();
EOF
CANNED="Hello from the fake API."
# fakeapi_saw PYEXPR: how many of fakeapi.py's log lines PYEXPR over `o` holds for.
fakeapi_saw() {
    python3 - "$T/fakeapi.log" "$1" <<'EOF'
import json, sys
os_ = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
print(sum(1 for o in os_ if eval(sys.argv[2])))
EOF
}
# first_before_last FILE N: the client's first event (FILE's last line)
# arrived before fakeapi.py sent the last event of its request N.
first_before_last() {
    python3 - "$T/fakeapi.log" "$1" "$2" <<'EOF'
import json, sys
sent = [o for o in map(json.loads, filter(str.strip, open(sys.argv[1])))
        if o["event"] == "sent" and o["n"] == int(sys.argv[3])]
got = json.loads(open(sys.argv[2]).read().splitlines()[-1])["events"]
sys.exit(0 if len(sent) >= 5 and got and got[0][1] < sent[-1]["t"] - 0.5 else 1)
EOF
}
# sdk_run NAME API BASE: the SDK call; its output in $SBX/sdk-NAME.out.
sdk_run() {
    "${SBENV[@]}" NODE_EXTRA_CA_CERTS="$SBCA" timeout 30 node "$T/sdk.js" "$SDKS" "$MODS/undici" "$2" "$3" \
        >"$SBX/sdk-$1.out" 2>&1
}
egd_log_mark
for api in anthropic chat responses; do
    case $api in
        anthropic) base=https://api.anthropic.test:4443 what="@anthropic-ai/sdk messages.stream" path=/v1/messages sec=$SEC_A ;;
        chat) base=https://api.openai.test:4443 what="openai chat.completions (stream)" path=/v1/chat/completions sec=$SEC_O ;;
        responses) base=https://api.openai.test:4443 what="openai responses (stream)" path=/v1/responses sec=$SEC_O ;;
    esac
    sdk_run $api $api $base
    ok_json "$what via $base through the proxy: the canned text" "$(tail -n 1 "$SBX/sdk-$api.out")" \
        "'error' not in l and l['text'] == '$CANNED' and l.get('final', '$CANNED') == '$CANNED'"
    n=$(python3 -c '
import json, sys
rs = [o for o in map(json.loads, filter(str.strip, open(sys.argv[1]))) if o["event"] == "request" and o["path"] == sys.argv[2]]
print(rs[-1]["n"] if rs else 0)' "$T/fakeapi.log" $path)
    ok "$([ "$(fakeapi_saw "o['event'] == 'request' and o['n'] == $n and o['auth'] == 'match' and o['auth_sha256'] == '$(sha16 "$sec")' and o['stream'] and o['status'] == 200")" = 1 ] && echo 0 || echo 1)" \
        "$what: the fake API saw the real key (request $n), streamed"
    check "$what: the first event arrived before the last was sent" first_before_last "$SBX/sdk-$api.out" "$n"
    check "$what: its environment holds the placeholder, no secret" env_ok "$SBX/sdk-$api.out" \
        "$([ $api = anthropic ] && echo ANTHROPIC_API_KEY || echo OPENAI_API_KEY)" "$([ $api = anthropic ] && echo "$PH_A" || echo "$PH_O")"
done
# A key of the client's own passes untouched: the fake API refuses it.
"${SBENV[@]}" ANTHROPIC_API_KEY=sk-ant-own-key NODE_EXTRA_CA_CERTS="$SBCA" timeout 30 node "$T/sdk.js" \
    "$SDKS" "$MODS/undici" anthropic https://api.anthropic.test:4443 >"$SBX/sdk-own.out" 2>&1
ok_json "@anthropic-ai/sdk with a key of its own (not the placeholder): 401 from the fake API" \
    "$(tail -n 1 "$SBX/sdk-own.out")" "l['status'] == 401 and 'authentication_error' in l['error']"
ok "$([ "$(fakeapi_saw "o['event'] == 'request' and o['auth'] == 'mismatch' and o['auth_sha256'] == '$(sha16 sk-ant-own-key)'")" = 1 ] && echo 0 || echo 1)" \
    "... and the fake API saw that key, unchanged"
egm_lines_ok "the SDKs' inner requests logged intercept, with anthropic or openai added" \
    "$(egm_log_lines 'l["mode"] == "intercept" and l["host"].startswith("api.")')" \
    "len(ls) == 4 and sum(l['inject'] == 'anthropic' and l['method'] == 'POST' and l['status'] == 200 for l in ls) == 1 and sum(l['inject'] == 'openai' and l['status'] == 200 for l in ls) == 2 and sum(l['status'] == 401 and not l['inject'] for l in ls) == 1"
ok "$([ "$(fakeapi_saw "o['event'] == 'request' and o['api'] == 'anthropic' and o['auth'] == 'match' and o['auth_field'] == 'authorization' and o['anthropic_version'] and 'Anthropic/JS' in (o['user_agent'] or '')")" = 1 ] && echo 0 || echo 1)" \
    "@anthropic-ai/sdk: the fake API saw the key in Authorization: Bearer, its anthropic-version and user agent"
# The same SDK toward key.test, whose rule is `inject x-api-key`: refused.
egd_log_mark
"${SBENV[@]}" NODE_EXTRA_CA_CERTS="$SBCA" timeout 30 node "$T/sdk.js" "$SDKS" "$MODS/undici" \
    anthropic https://key.test:4443 >"$SBX/sdk-xkey.out" 2>&1
ok_json "@anthropic-ai/sdk toward an \`inject x-api-key\` host (key.test): 403 from egressd" \
    "$(tail -n 1 "$SBX/sdk-xkey.out")" "l['status'] == 403"
egd_log_ok "... logged credential_host_mismatch, anthropic; the origin saw no request" \
    "l['mode'] == 'intercept' and l['host'] == 'key.test'" \
    "l['reason'] == 'credential_host_mismatch' and l['inject'] == 'anthropic' and $(origin_saw "o['target'] == '/v1/messages'") == 0"
# ---- the sandbox CA's name constraints, in every client.  Leaves signed
# by hand (openssl x509 -req) with the appliance key egressd wrote and the
# sandbox CA from the credentials endpoint, served by openssl s_server:
# key.test (permitted: the control), evil.test (outside every permitted
# name) and sub.key.test (under an exact host: excluded).  Debian's git
# uses libcurl-gnutls, which names no reason ("server certificate
# verification failed"); the control, signed the same way, shows that the
# name is the difference there.
NC=$T/nc
mkdir -p "$NC"
# nc_leaf NAME: $NC/NAME.pem, signed with the appliance key under the sandbox CA.
nc_leaf() {
    printf 'subjectAltName=DNS:%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' \
        "$1" >"$NC/$1.ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$NC/$1.key" -out "$NC/$1.csr" >>"$NC/openssl.log" 2>&1 &&
        openssl x509 -req -in "$NC/$1.csr" -CA "$T/sbca.pem" -CAkey "$T/state/appliance.key" \
            -set_serial "0x$(rnd)" -days 2 -extfile "$NC/$1.ext" -out "$NC/$1.pem" >>"$NC/openssl.log" 2>&1
}
NC_NAMES=(key.test evil.test sub.key.test)
declare -A NC_ADDR=([key.test]=127.0.0.40 [evil.test]=127.0.0.41 [sub.key.test]=127.0.0.42)
for name in "${NC_NAMES[@]}"; do
    nc_leaf "$name" || {
        diag_file "$NC/openssl.log"
        egm_bail "a leaf for $name signed with state-dir/appliance.key under the sandbox CA"
    }
    openssl s_server -accept "${NC_ADDR[$name]}:5443" -cert "$NC/$name.pem" -key "$NC/$name.key" \
        -www >"$NC/s_server-$name.log" 2>&1 </dev/null &
    EGD_PIDS+=($!)
done
for name in "${NC_NAMES[@]}"; do
    for ((i = 0; i < 100; i++)); do
        grep -q '^ACCEPT' "$NC/s_server-$name.log" && break
        sleep 0.05
    done
done
ok "$(openssl verify -CAfile "$T/sbca.pem" "$NC/key.test.pem" >/dev/null 2>&1 &&
    openssl x509 -in "$NC/evil.test.pem" -noout -issuer | grep -q "$(openssl x509 -in "$T/sbca.pem" -noout -subject | sed 's/^subject=//')" &&
    grep -q '^ACCEPT' "$NC/s_server-evil.test.log" && echo 0 || echo 1)" \
    "name constraints: the leaves are signed by the sandbox CA (openssl verify: key.test), three s_servers listen"
cat >"$T/nc.js" <<'EOF'
// node nc.js CA NAME ADDR PORT: https.get https://NAME:PORT/ at ADDR, the
// CA alone trusted; prints {"status"} or {"code", "error"}.
const [ca, name, addr, port] = process.argv.slice(2);
const lookup = (h, o, cb) => (o && o.all ? cb(null, [{ address: addr, family: 4 }]) : cb(null, addr, 4));
require("https").get({ host: name, port, path: "/", ca: require("fs").readFileSync(ca), lookup,
                       agent: false, timeout: 10000 }, (r) => {
    console.log(JSON.stringify({ status: r.statusCode }));
    r.resume();
    r.on("end", () => process.exit(0));
}).on("error", (e) => console.log(JSON.stringify({ code: e.code, error: String(e) })));
EOF
# nc_client CLIENT NAME: one client toward NAME's s_server; "accepted" or
# "refused: REASON" (the verification error as the client says it).
nc_client() {
    local name=$2 addr=${NC_ADDR[$2]} out rc
    case $1 in
        curl)
            out=$("${SBENV[@]}" curl -q -sS -m 10 --noproxy '*' --cacert "$SBCA" \
                --resolve "$name:5443:$addr" -o /dev/null -w '%{http_code}' "https://$name:5443/" 2>&1)
            rc=$? ;;
        python)
            out=$("${SBENV[@]}" "$DEBPY" -S -c '
import socket, ssl, sys
ca, name, addr = sys.argv[1:4]
ctx = ssl.create_default_context(cafile=ca)
with socket.create_connection((addr, 5443), timeout=10) as s:
    try:
        with ctx.wrap_socket(s, server_hostname=name) as t:
            print("ok", t.version())
    except ssl.SSLCertVerificationError as e:
        print(e.verify_message); sys.exit(1)' "$SBCA" "$name" "$addr" 2>&1)
            rc=$? ;;
        node)
            out=$("${SBENV[@]}" timeout 15 node "$T/nc.js" "$SBCA" "$name" "$addr" 5443 2>&1)
            rc=1
            [[ $out == *'"status":200'* ]] && rc=0 ;;
        git)
            out=$("${SBENV[@]}" no_proxy="*" GIT_SSL_CAINFO="$SBCA" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
                timeout 15 git -c "http.curloptResolve=$name:5443:$addr" ls-remote \
                "https://$name:5443/repo.git" 2>&1)
            # s_server -www answers every GET with its status page: past TLS,
            # git finds no repository there.
            rc=1
            [[ $out == *"not valid: is this a git repository"* ]] && rc=0 ;;
        openssl)
            out=$(openssl s_client -connect "$addr:5443" -servername "$name" -verify_hostname "$name" \
                -CAfile "$SBCA" -verify_return_error </dev/null 2>&1)
            rc=$?
            [ $rc -eq 0 ] && ! grep -q 'Verify return code: 0 (ok)' <<<"$out" && rc=1 ;;
    esac
    if [ $rc -eq 0 ]; then
        echo accepted
    else
        echo "refused: $(grep -o -i -m1 -E '(permitted|excluded) subtree violation|[a-z_]*SUBTREE_VIOLATION|certificate verify failed[^"]*|SSL certificate problem: [^"]*' <<<"$out" || echo "${out:0:200}")"
    fi
}
for client in curl python node git openssl; do
    got=$(nc_client $client key.test)
    ok "$([ "$got" = accepted ] && echo 0 || echo 1)" \
        "name constraints, $client: a hand-signed leaf for key.test (permitted) is accepted"
    [ "$got" = accepted ] || diag "$got"
    permitted='*permitted*subtree*violation*' excluded='*excluded*subtree*violation*'
    [ $client = git ] && permitted='*server certificate verification failed*' excluded=$permitted
    got=$(nc_client $client evil.test)
    # shellcheck disable=SC2053 # $permitted and $excluded are patterns
    ok "$([[ $got == refused:* && ${got,,} == $permitted ]] && echo 0 || echo 1)" \
        "name constraints, $client: one for evil.test (outside them) is refused (${got%%. CAfile*})"
    got=$(nc_client $client sub.key.test)
    # shellcheck disable=SC2053
    ok "$([[ $got == refused:* && ${got,,} == $excluded ]] && echo 0 || echo 1)" \
        "name constraints, $client: one for sub.key.test (under an exact host) is refused (${got%%. CAfile*})"
done

# ---- what the sandbox side holds, all of it: the clients' outputs and
# environments, git's traces and clone, npm's cache and node_modules, HOME.
nfiles=$(find "$SBX" -type f | wc -l)
ok "$([ "$nfiles" -ge 40 ] && ! grep -rqF -f "$SECRETS" "$SBX" && echo 0 || echo 1)" \
    "no secret's value (nor git's Basic of it) in the $nfiles files the sandbox side wrote or got"
grep -rlF -f "$SECRETS" "$SBX" 2>/dev/null | head -n 5 | sed 's/^/#   holds a secret: /'
ok "$([ "$(grep -rlF -e "$PH_A" -e "$PH_O" "$SBX" | wc -l)" -ge 10 ] && echo 0 || echo 1)" \
    "... where the placeholders are (the clients' environments)"
ok "$(grep -qF -f "$SECRETS" "$T/access.log" "$T/egressd.err" && echo 1 || echo 0)" \
    "no secret's value in egressd's access log or diagnostics"

egd_finish
tap_end
