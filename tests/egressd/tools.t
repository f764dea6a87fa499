#!/usr/bin/env bash
# tools.t - real tools through egressd's explicit proxy to local origins
# that use the test CA: git (smart HTTP from `git http-backend`), node
# (undici's EnvHttpProxyAgent), npm (install from a registry served here)
# and apt (update + download from a repository built here).  Each checks
# what the tool got and the access-log lines of its connections: sandbox,
# owner, decision, rule, bytes.  TAP on stdout.  Needs BUILD_DIR, TOP;
# installs undici from npm once, then runs itself in a network namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"

# Outside the namespace (the npm registry is reachable only here): the
# pinned undici, once (EGM_INSTALL_OK, EGM_INSTALL_LOG inside).
egm_install_outside egm_node_setup
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

egd_host 127.0.0.22 git.test
egd_host 127.0.0.23 registry.test
egd_host 127.0.0.24 deb.test
egd_allow 'git.test:443' 'registry.test:443'
RULE_GIT=$(egd_rule git.test)
RULE_REG=$(egd_rule registry.test)
RULE_A=$(egd_rule a.test)
P=http://$EGD_PROXY
TOKEN=tools-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
SCRUBBED=(env "${EGD_SCRUB[@]}" -u GIT_CONFIG_GLOBAL HOME="$HOME")

# Every client runs from 127.0.0.1: sandbox 301 of carol.  deb.test is
# allowed by the binding's own line, the others by the preset.
CAROL='all(l["sandbox"] == "301" and l["owner"] == "carol" and l["mode"] == "connect" and l["decision"] == "allow" and l["reason"] == "allowed" and l["status"] == 200 for l in ls)'

# bytes_ok BYTES REQUESTS: a bytes_down sum that carries the origin's
# bodies, bounded by them plus TLS and HTTP overhead (2 %, 6 KiB a
# connection, 1 KiB a request): no byte counted twice.
bytes_ok() {
    echo "sum(l['bytes_down'] for l in ls) >= $1 and sum(l['bytes_down'] for l in ls) <= $1 * 1.02 + 6144 * len(ls) + 1024 * $2 and all(l['bytes_up'] > 0 for l in ls)"
}
# toolsrv_sent NAME: requests and body bytes toolsrv.py logged for NAME.
toolsrv_sent() {
    python3 -c '
import json, sys
rs = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
print(len(rs), sum(r["bytes"] for r in rs))' "$T/toolsrv-$1.log" 2>/dev/null || echo "0 0"
}

# ---- the servers
mkdir -p "$T/git" "$T/reg" "$T/deb"
egm_toolsrv git.test "$T/git" --git "$T/git" || egm_bail "toolsrv.py serves git.test"
egm_toolsrv registry.test "$T/reg" || egm_bail "toolsrv.py serves registry.test"
egm_toolsrv deb.test "$T/deb" || egm_bail "toolsrv.py serves deb.test"
egd_origin a.test denied.test || egm_bail "origin.py serves a.test"
egd_start || egm_bail "egressd starts and answers /healthz"
check "admin: PUT sandbox 301 (carol, by address 127.0.0.1, + deb.test:443)" egd_put 301 \
    '{"id":"301","name":"agent-carol-1","owner":"carol","addresses":["127.0.0.1"],"policy":"test","allow":["deb.test:443"]}'
RULE_DEB="sandbox 301:1"

# ---- git: clone over smart HTTP through CONNECT
(
    set -e
    mkdir -p "$T/git-work"
    cd "$T/git-work"
    git init -q -b main .
    echo "$TOKEN" >README
    head -c 262144 /dev/urandom >blob.bin
    git add README blob.bin
    git -c user.name=egressd-tests -c user.email=tests@egressd.invalid commit -q -m 'a commit'
    git clone -q --bare "$T/git-work" "$T/git/repo.git"
) >"$T/git-setup.log" 2>&1 || {
    diag_file "$T/git-setup.log"
    egm_bail "git: the bare repository is made"
}
egd_log_mark
timeout 60 "${SCRUBBED[@]}" GIT_SSL_CAINFO="$EGD_CA" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 \
    git -c http.proxy="$P" clone -q https://git.test/git/repo.git "$T/git-clone" >"$T/git.log" 2>&1
rc=$?
ok $rc "git clone https://git.test/git/repo.git through the proxy: exit 0"
[ $rc -eq 0 ] || diag_file "$T/git.log"
check "git: the clone's README is the commit's, its 256 KiB blob byte for byte" \
    sh -c 'test "$(cat "$1/git-clone/README")" = "$2" && cmp -s "$1/git-clone/blob.bin" "$1/git-work/blob.bin"' \
    sh "$T" "$TOKEN"
lines=$(egm_log_lines 'l["host"] == "git.test"')
egm_lines_ok "git: logged allow for sandbox 301/carol, CONNECT git.test:443, sni git.test, rule $RULE_GIT, 200" "$lines" \
    "ls and $CAROL and all(l['rule'] == '$RULE_GIT' and l['port'] == 443 and l['sni'] == 'git.test' and l['upstream'] == '127.0.0.22:443' for l in ls)"
read -r reqs sent < <(toolsrv_sent git.test)
egm_lines_ok "git: bytes_down carries the $sent body bytes of the $reqs answers (>= 256 KiB), bytes_up > 0" "$lines" \
    "$sent >= 262144 and $(bytes_ok "$sent" "$reqs")"

# ---- node: undici's EnvHttpProxyAgent, fetch through HTTPS_PROXY
MODS=
if [ "${EGM_INSTALL_OK:-0}" = 1 ]; then
    ok 0 "node: undici $EGM_UNDICI_VERSION is installed in BUILD_DIR/e2e-node"
    MODS=$(egm_node_modules)
else
    ok 1 "node: undici $EGM_UNDICI_VERSION is installed in BUILD_DIR/e2e-node"
    diag_file "$EGM_INSTALL_LOG"
fi
rm -f "$EGM_INSTALL_LOG"
cat >"$T/fetch.js" <<'EOF'
// node fetch.js UNDICI_DIR URL: one fetch through EnvHttpProxyAgent; prints
// {"status", "length", "sha256", "origin"} or {"error", "cause"} (the
// chain of causes).
const { EnvHttpProxyAgent, fetch } = require(process.argv[2]);
const crypto = require("crypto");
(async () => {
    const agent = new EnvHttpProxyAgent();
    try {
        const r = await fetch(process.argv[3], { dispatcher: agent });
        const b = Buffer.from(await r.arrayBuffer());
        console.log(JSON.stringify({ status: r.status, length: b.length,
            sha256: crypto.createHash("sha256").update(b).digest("hex"),
            origin: r.headers.get("x-origin") }));
    } catch (e) {
        const causes = [];
        for (let c = e.cause; c && causes.length < 5; c = c.cause)
            causes.push(String(c));
        console.log(JSON.stringify({ error: String(e), cause: causes.join(" <- ") }));
    }
    await agent.close();
})();
EOF
node_fetch() {
    timeout 30 "${SCRUBBED[@]}" HTTPS_PROXY="$P" NODE_EXTRA_CA_CERTS="$EGD_CA" \
        node "$T/fetch.js" "$MODS/undici" "$1" 2>"$T/node.err"
}
want=$(python3 -c '
import hashlib
p = b"0123456789abcdef" * 4096
print(hashlib.sha256((p * 4)[:200000]).hexdigest())')
egd_log_mark
out=$(node_fetch https://a.test:4443/bytes/200000)
ok_json "node: fetch https://a.test:4443/bytes/200000 via EnvHttpProxyAgent: 200, 200000 bytes as sent" \
    "$out" "l['status'] == 200 and l['length'] == 200000 and l['sha256'] == '$want' and l['origin'] == 'a.test'"
[ -s "$T/node.err" ] && diag_file "$T/node.err"
lines=$(egm_log_lines 'l["host"] == "a.test"')
egm_lines_ok "node: one connection logged allow for 301/carol, CONNECT a.test:4443, rule $RULE_A, bytes_down > 200000" "$lines" \
    "len(ls) == 1 and $CAROL and ls[0]['rule'] == '$RULE_A' and ls[0]['port'] == 4443 and ls[0]['sni'] == 'a.test' and 200000 < ls[0]['bytes_down'] < 210000 and ls[0]['bytes_up'] > 0"
egd_log_mark
out=$(node_fetch https://denied.test:4443/hello)
ok_json "node: fetch https://denied.test:4443/hello fails (the proxy refused the tunnel)" "$out" \
    "'error' in l and 'Proxy response (403)' in l['cause']"
lines=$(egm_log_lines 'l["host"] == "denied.test"')
egm_lines_ok "node: logged deny not_allowed for 301/carol, no rule, no upstream, 403" "$lines" \
    "len(ls) == 1 and ls[0]['sandbox'] == '301' and ls[0]['owner'] == 'carol' and ls[0]['decision'] == 'deny' and ls[0]['reason'] == 'not_allowed' and ls[0]['rule'] is None and ls[0]['upstream'] is None and ls[0]['status'] == 403"

# ---- npm: install a package from a registry served here
NPMDIR=$T/npm
mkdir -p "$NPMDIR/pkg" "$NPMDIR/app" "$T/reg/egd-tiny/-"
cat >"$NPMDIR/pkg/package.json" <<'EOF'
{"name": "egd-tiny", "version": "1.0.0", "main": "index.js", "license": "MIT",
 "description": "a package for egressd's end-to-end tests"}
EOF
echo "module.exports = \"$TOKEN\";" >"$NPMDIR/pkg/index.js"
echo '{"name": "app", "version": "1.0.0", "private": true}' >"$NPMDIR/app/package.json"
: >"$NPMDIR/npmrc"
: >"$NPMDIR/npmrc-global"
NPM=("${SCRUBBED[@]}" npm --userconfig "$NPMDIR/npmrc" --globalconfig "$NPMDIR/npmrc-global"
    --cache "$NPMDIR/cache" --no-audit --no-fund --no-update-notifier --loglevel=error)
(cd "$NPMDIR/pkg" && "${NPM[@]}" pack --pack-destination "$T/reg/egd-tiny/-") >"$NPMDIR/pack.log" 2>&1 &&
    python3 - "$T/reg/egd-tiny" <<'EOF' >>"$NPMDIR/pack.log" 2>&1
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
    diag_file "$NPMDIR/pack.log"
    egm_bail "npm: the package is packed and its registry document written"
}
egd_log_mark
(cd "$NPMDIR/app" && timeout 60 "${NPM[@]}" install egd-tiny@1.0.0 --registry https://registry.test/ \
    --proxy "$P" --https-proxy "$P" --noproxy '' --cafile "$EGD_CA" --prefer-online) >"$NPMDIR/install.log" 2>&1
rc=$?
ok $rc "npm install egd-tiny from https://registry.test/ through the proxy: exit 0"
[ $rc -eq 0 ] || diag_file "$NPMDIR/install.log"
got=$(cd "$NPMDIR/app" && "${SCRUBBED[@]}" node -e 'console.log(require("egd-tiny"))' 2>&1)
check "npm: node_modules/egd-tiny is the package (require() gives its token)" test "$got" = "$TOKEN"
integrity=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["versions"]["1.0.0"]["dist"]["integrity"])' "$T/reg/egd-tiny/index.json")
check "npm: package-lock.json holds the registry's integrity" \
    grep -qF "\"integrity\": \"$integrity\"" "$NPMDIR/app/package-lock.json"
lines=$(egm_log_lines 'l["host"] == "registry.test"')
egm_lines_ok "npm: logged allow for 301/carol, CONNECT registry.test:443, sni registry.test, rule $RULE_REG, 200" "$lines" \
    "ls and $CAROL and all(l['rule'] == '$RULE_REG' and l['port'] == 443 and l['sni'] == 'registry.test' and l['upstream'] == '127.0.0.23:443' for l in ls)"
read -r reqs sent < <(toolsrv_sent registry.test)
egm_lines_ok "npm: bytes_down carries the $sent body bytes of the $reqs answers (document and tarball)" "$lines" \
    "$sent > 0 and $(bytes_ok "$sent" "$reqs")"

# ---- apt: update and download from a repository served here; this
# machine's apt state and configuration are never read or written.
A=$T/apt
mkdir -p "$A/pkg/DEBIAN" "$A/pkg/usr/share/egd-tiny" "$T/deb/debian" "$A/empty" "$A/lists/partial" \
    "$A/cache/archives/partial" "$A/state" "$A/log" "$A/dl"
cat >"$A/pkg/DEBIAN/control" <<'EOF'
Package: egd-tiny
Version: 1.0-1
Architecture: all
Maintainer: egressd tests <tests@egressd.invalid>
Description: a package for egressd's end-to-end tests
EOF
echo "$TOKEN" >"$A/pkg/usr/share/egd-tiny/token"
(
    set -e
    dpkg-deb --root-owner-group -Zgzip --build "$A/pkg" "$T/deb/debian/egd-tiny_1.0-1_all.deb"
    cd "$T/deb/debian"
    apt-ftparchive packages . >Packages
    gzip -9k Packages
    apt-ftparchive release . >Release
) >"$A/build.log" 2>&1 || {
    diag_file "$A/build.log"
    egm_bail "apt: the .deb and the repository (dpkg-deb, apt-ftparchive) are built"
}
: >"$A/status"
echo 'deb [trusted=yes] https://deb.test/debian ./' >"$A/sources.list"
cat >"$A/apt.conf" <<EOF
Dir::Etc::Parts "$A/empty";
Dir::Etc::Main "/dev/null";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$A/empty";
Dir::Etc::Trusted "/dev/null";
Dir::Etc::TrustedParts "$A/empty";
Dir::State "$A/state";
Dir::State::status "$A/status";
Dir::Log "$A/log";
APT::Sandbox::User "root";
Acquire::Languages "none";
Acquire::Retries "0";
EOF
APT=(timeout 60 "${SCRUBBED[@]}" APT_CONFIG="$A/apt.conf" apt-get -q
    -o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache" -o Dir::Cache::Archives="$A/cache/archives"
    -o Debug::NoLocking=1 -o Acquire::https::Proxy="$P" -o Acquire::http::Proxy="$P"
    -o Acquire::https::CAInfo="$EGD_CA")
egd_log_mark
"${APT[@]}" update >"$A/update.log" 2>&1
rc=$?
grep -q '^[WE]:' "$A/update.log" && rc=1
ok $rc "apt-get update from https://deb.test/debian through the proxy: exit 0, no warning or error"
[ $rc -eq 0 ] || diag_file "$A/update.log"
(cd "$A/dl" && "${APT[@]}" download egd-tiny) >"$A/download.log" 2>&1
rc=$?
ok $rc "apt-get download egd-tiny: exit 0"
[ $rc -eq 0 ] || diag_file "$A/download.log"
check "apt: the downloaded .deb is the one built, its file holds the token" \
    sh -c 'cmp -s "$1/dl/egd-tiny_1.0-1_all.deb" "$2" && dpkg-deb --fsys-tarfile "$2" | tar -xOf - ./usr/share/egd-tiny/token | grep -qx "$3"' \
    sh "$A" "$T/deb/debian/egd-tiny_1.0-1_all.deb" "$TOKEN"
lines=$(egm_log_lines 'l["host"] == "deb.test"')
egm_lines_ok "apt: logged allow for 301/carol, CONNECT deb.test:443, sni deb.test, rule '$RULE_DEB' (the binding's line)" "$lines" \
    "ls and $CAROL and all(l['rule'] == '$RULE_DEB' and l['port'] == 443 and l['sni'] == 'deb.test' and l['upstream'] == '127.0.0.24:443' for l in ls)"
read -r reqs sent < <(toolsrv_sent deb.test)
egm_lines_ok "apt: bytes_down carries the $sent body bytes of the $reqs answers (Release, Packages, .deb)" "$lines" \
    "$sent > 0 and $(bytes_ok "$sent" "$reqs")"
check "apt: the lists went to the temp dir, none to this machine's /var/lib/apt/lists or archives" \
    sh -c 'ls "$1/lists" | grep -q "^deb.test_" && ! ls /var/lib/apt/lists /var/cache/apt/archives | grep -q -e "^deb.test_" -e "^egd-tiny"' \
    sh "$A"

egd_finish
tap_end
