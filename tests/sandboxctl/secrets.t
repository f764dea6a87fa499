#!/usr/bin/env bash
# tests/sandboxctl/secrets.t - the sandboxctl side of credential injection
# (docs/credentials.md), against the Proxmox simulator and two real egressd
# with a secret-dir and one appliance key: `create --secret` puts the names
# into both bindings and the sandbox's metadata; the guest gets the sandbox
# CA (the one egressd gives, in the system bundle after
# update-ca-certificates) and its placeholders in the environment files
# (secret-env and the built-in names), root's and 0644; a login shell, the
# agent user's login shell and curl with the system trust store use them
# through egressd, which adds the real key; no file of the guest, no
# description and no output holds a secret's value.  An unknown secret
# (egressd's "did you mean"), a policy that binds no secret, a guest agent
# failure and egressd that disagree on the placeholders each fail the
# create and leave nothing behind.  sync after a wipe of egressd's
# bindings restores their secrets; a sandbox without secrets whose policy
# has request rules gets the CA they need (and curl in it is judged per
# request), one without gets none; extend and list keep and show them; MCP
# create_server takes only the secrets of mcp-secrets.  The sandboxes'
# addresses are 127.0.0.40-49, the origin key.test (127.0.0.18:8443, TLS);
# everything runs in a network namespace of its own.  PVE 9.1 schema.
set -u
if [ -z "${SBX_IN_NETNS:-}" ]; then
    export SBX_IN_NETNS=1
    exec unshare -n -- bash "$0" "$@"
fi
. "$TOP/tests/sandboxctl/lib.sh"
ip link set lo up || bail "ip link set lo up in the new network namespace"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY \
    CURL_CA_BUNDLE SSL_CERT_FILE CURL_HOME NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE GIT_SSL_CAINFO

ORIGIN_PID=
sbx_start 9 "" --task-ms 50 || bail "the simulator and both egressd start"
trap '[ -n "$ORIGIN_PID" ] && kill "$ORIGIN_PID" 2>/dev/null; sbx_stop_all quiet' EXIT

# --- the appliance side: secrets, a preset that binds them, the origin
S=$T/secrets
mkdir -m 700 "$S"
put_secret() { (umask 077 && printf '%s\n' "$2" >"$S/$1"); }
put_secret anthropic sk-ant-REAL-7d1e0c
put_secret github ghp_REAL_52b9aa
put_secret build-cache bc-REAL-0f77
REAL='sk-ant-REAL-7d1e0c ghp_REAL_52b9aa bc-REAL-0f77'
O=$T/origin
mkdir -p "$O"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=secrets-test-origin-ca -keyout "$O/ca.key" -out "$O/ca.pem" 2>/dev/null &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=key.test \
        -keyout "$O/key.test.key" -out "$O/key.test.csr" 2>/dev/null &&
    openssl x509 -req -in "$O/key.test.csr" -CA "$O/ca.pem" -CAkey "$O/ca.key" -CAcreateserial \
        -days 2 -out "$O/key.test.pem" \
        -extfile <(printf 'subjectAltName=DNS:key.test\nbasicConstraints=CA:FALSE\n') 2>/dev/null ||
    bail "a test CA and key.test's certificate"
for n in 1 2; do egressd_stop "$n"; done
cp "$T/egressd1/state/appliance.key" "$T/egressd2/state/appliance.key"
for n in 1 2; do
    d=$T/egressd$n
    printf '127.0.0.18 key.test\n' >>"$d/hosts"
    printf '%s\n' '# ai: the sandboxes with secrets' 'key.test:8443 inject x-api-key secret anthropic' \
        'key.test:8444 inject basic secret github' 'key.test:8445 inject bearer secret build-cache' \
        >"$d/policies/ai.allow"
    printf 'secret-dir %s\nupstream-ca-file %s\n' "$S" "$O/ca.pem" >>"$d/egressd.conf"
    egressd_start "$n" || bail "egressd $n starts again with secret-dir"
done
python3 -u "$TOP/tests/egressd/origin.py" --log "$O/log" --certs "$O" --https-port 8443 \
    --http-port 8080 key.test=127.0.0.18 >"$O/out" 2>&1 &
ORIGIN_PID=$!
for ((i = 0; i < 100; i++)); do
    grep -q '^ready' "$O/out" && break
    sleep 0.05
done
check "the origin key.test listens (TLS, 127.0.0.18:8443)" grep -q '^ready' "$O/out"

sbx_write_config <<EOF
secret-env github GITHUB_TOKEN
EOF
sed -i -e 's|^ip-pool .*|ip-pool 127.0.0.40-127.0.0.49/24|' -e 's|^gateway .*|gateway 127.0.0.1|' \
    -e "s|^proxy .*|proxy $SBX_EGD1_PROXY|" "$CONF"

# guest_file VMID PATH: a file of the guest's disk as the simulator holds it.
guest_file() { cat "$PVE_SIM_DIR/state/vms/$1/disk/upper$2" 2>/dev/null; }
# others V: the VMs but the templates and V (a sandbox kept across checks).
others() { sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] not in (9000, 9001, $1)]"; }
# left_nothing KEEP WHAT: a failed create made nothing besides sandbox KEEP.
left_nothing() {
    check "$2: no VM left in Proxmox" test "$(others "$1")" = "[]"
    check "$2: no reservation left" test "$(tr -d ' \n' <"$T/state/reservations.json")" = "[]"
    check "$2: no binding left in either egressd" \
        test "$(egressd_state 1 'sorted(b)')$(egressd_state 2 'sorted(b)')" = "[\"$1\"][\"$1\"]"
}
# creds N VMID PYEXPR: PYEXPR over `c`, egressd N's credentials for VMID.
creds() {
    egressd_api "$1" GET "/v1/sandboxes/$2/credentials" || return 1
    json_get "$EGD_BODY" "c = j; $3"
}

# --- create with three secrets
out=$(sbx --json create --name a1 --size small --owner alice --policy ai \
    --secret anthropic --secret github --secret build-cache 2>&1)
rc=$?
ok $rc "create a1 --secret anthropic --secret github --secret build-cache ($(tr -d '\n' <<<"$out" | head -c 300))"
a1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
a1addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
check "  its answer names the secrets" \
    test "$(json_get "$out" 'j["secrets"]' 2>/dev/null)" = '["anthropic", "github", "build-cache"]'
check "  both egressd's bindings list them" \
    test "$(egressd_state 1 "b['$a1']['secrets']")|$(egressd_state 2 "b['$a1']['secrets']")" = \
    '["anthropic", "github", "build-cache"]|["anthropic", "github", "build-cache"]'
check "  the sandbox's metadata in Proxmox remembers them" \
    test "$(sim_state "[x['config']['description'] for x in s['vms'] if x['vmid'] == $a1][0].split('\n').count('secrets: anthropic github build-cache')")" = 1
PH_A=$(creds 1 "$a1" 'c["placeholders"]["anthropic"]')
PH_G=$(creds 1 "$a1" 'c["placeholders"]["github"]')
PH_B=$(creds 1 "$a1" 'c["placeholders"]["build-cache"]')
creds 1 "$a1" 'c["ca"]' >"$T/a1-ca.pem"
check "egressd gives a1 a CA and a placeholder per secret ($PH_A)" \
    test "$(grep -c BEGIN "$T/a1-ca.pem")${PH_A:0:21}${PH_B:0:23}" = 1egressd-ph-anthropic-egressd-ph-build-cache-
check "  the same placeholders from egressd 2 (one appliance key)" \
    test "$(creds 2 "$a1" 'c["placeholders"]')" = "$(creds 1 "$a1" 'c["placeholders"]')"

# --- what the guest got
der() { openssl x509 -outform DER 2>/dev/null | od -An -tx1 | tr -d ' \n'; }
want_der=$(der <"$T/a1-ca.pem")
got_der=$(guest_file "$a1" /usr/local/share/ca-certificates/egressd-sandbox.crt | der)
check "the guest holds egressd's CA at /usr/local/share/ca-certificates/egressd-sandbox.crt" \
    test -n "$want_der" -a "$got_der" = "$want_der"
body=$(grep -v -- ----- "$T/a1-ca.pem" | tr -d '\n')
check "  and update-ca-certificates put it into /etc/ssl/certs/ca-certificates.crt" \
    bash -c '[ -n "$1" ] && tr -d "\n" <"$2" | grep -qF -- "$1"' _ "$body" \
    "$PVE_SIM_DIR/state/vms/$a1/disk/upper/etc/ssl/certs/ca-certificates.crt"
profile=$(guest_file "$a1" /etc/profile.d/egressd-credentials.sh)
want_profile="export ANTHROPIC_API_KEY=$PH_A
export GITHUB_TOKEN=$PH_G
export EGRESSD_SECRET_BUILD_CACHE=$PH_B
export NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/egressd-sandbox.crt
export REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
export SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
export GIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt"
check "/etc/profile.d/egressd-credentials.sh: a placeholder per secret (built-in name, secret-env, EGRESSD_SECRET_), the CA variables" \
    test "$(grep -v '^#' <<<"$profile")" = "$want_profile"
check "/etc/environment.d/90-egressd-credentials.conf: the same as VAR=VALUE" \
    test "$(guest_file "$a1" /etc/environment.d/90-egressd-credentials.conf | grep -v '^#')" = \
    "$(sed 's/^export //' <<<"$want_profile")"
check "/etc/npmrc: npm's cafile is the bundle, next to the proxy" \
    test "$(guest_file "$a1" /etc/npmrc | grep -v '^#')" = \
    "$(printf 'proxy=http://%s\nhttps-proxy=http://%s\ncafile=/etc/ssl/certs/ca-certificates.crt' "$SBX_EGD1_PROXY" "$SBX_EGD1_PROXY")"
out=$(sbx exec a1 -- stat -c '%a %U:%G %n' /usr/local/share/ca-certificates/egressd-sandbox.crt \
    /etc/profile.d/egressd-credentials.sh /etc/environment.d/90-egressd-credentials.conf 2>&1)
check "  the three files are 0644 and root's ($(tr '\n' ' ' <<<"$out"))" \
    test "$(cut -d' ' -f1,2 <<<"$out" | sort -u)" = "644 root:root"
# printenv: what a login shell hands its commands (exported), not just its own variables.
out=$(sbx exec a1 -- bash -lc 'printenv ANTHROPIC_API_KEY GITHUB_TOKEN NODE_EXTRA_CA_CERTS SSL_CERT_FILE | tr "\n" "|"' 2>&1)
check "a login shell in the guest exports the placeholders and the CA variables" \
    test "$out" = "$PH_A|$PH_G|/usr/local/share/ca-certificates/egressd-sandbox.crt|/etc/ssl/certs/ca-certificates.crt|"
sbx exec a1 -- useradd -m -s /bin/bash agent >/dev/null 2>&1
out=$(sbx exec a1 -- su - agent -c 'id -un; printenv ANTHROPIC_API_KEY REQUESTS_CA_BUNDLE; head -c 27 "$NODE_EXTRA_CA_CERTS"' 2>&1 | tr '\n' '|')
check "  and so has the agent user's login shell (su - agent, as sudo -u agent -i), which reads the CA" \
    test "$out" = "agent|$PH_A|/etc/ssl/certs/ca-certificates.crt|-----BEGIN CERTIFICATE-----"

# --- used for real: curl in the guest, the system trust store, egressd adds the key
out=$(sbx exec a1 -- bash -lc "curl -sS -m 10 --interface $a1addr -H \"x-api-key: \$ANTHROPIC_API_KEY\" https://key.test:8443/hello" 2>&1)
check "curl in the guest's login shell (its proxy, its trust store) reaches key.test through egressd ($out)" \
    test "$out" = "hello from key.test"
check "  the origin saw the real key, not the placeholder" python3 -c '
import json, sys
heads = [l for l in map(json.loads, open(sys.argv[1])) if l.get("event") == "request"]
sys.exit(0 if heads and dict(heads[-1]["headers"]).get("x-api-key") == "sk-ant-REAL-7d1e0c"
         and sys.argv[2] not in heads[-1]["head"] else 1)' "$O/log" "$PH_A"
check "  egressd 1 logged it: intercepted for sandbox $a1, anthropic added" python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sys.exit(0 if any(l.get("mode") == "intercept" and l.get("host") == "key.test" and
                  l.get("sandbox") == sys.argv[2] and l.get("inject") == "anthropic" and
                  l.get("status") == 200 for l in lines) else 1)' "$T/egressd1/access.log" "$a1"

# --- no secret's value anywhere
found=$(for v in $REAL; do grep -rlF -- "$v" "$PVE_SIM_DIR" "$T/state" "$CONF" 2>/dev/null; done)
check "no file of the guest, of the simulator (descriptions, calls) or of sandboxctl holds a secret's value${found:+ ($found)}" \
    test -z "$found"

# --- list, extend keep and show them
out=$(sbx --json list)
check "list --json shows a1's secrets" \
    test "$(json_get "$out" "[x['secrets'] for x in j['sandboxes'] if x['name'] == 'a1']")" = '[["anthropic", "github", "build-cache"]]'
out=$(sbx list)
check "  the table too" grep -qE "^$a1 +a1 .* anthropic,github,build-cache\$" <<<"$out"
check "extend a1 1h" sbx extend a1 1h
check "  the new binding keeps the secrets" \
    test "$(egressd_state 2 "b['$a1']['secrets']")" = '["anthropic", "github", "build-cache"]'

# --- reconcile: sync restores the secrets of wiped bindings
egressd_api 1 PUT /v1/sandboxes '[]' && egressd_api 2 PUT /v1/sandboxes '[]'
ok $? "both egressd's bindings wiped (PUT /v1/sandboxes [])"
check "sync" sbx sync
check "  both bindings list the secrets again" \
    test "$(egressd_state 1 "b['$a1']['secrets']")|$(egressd_state 2 "b['$a1']['secrets']")" = \
    '["anthropic", "github", "build-cache"]|["anthropic", "github", "build-cache"]'
check "  and the placeholders the guest holds are still a1's" \
    test "$(creds 1 "$a1" 'c["placeholders"]["anthropic"]')" = "$PH_A"

# --- the sandbox CA follows its hosts: a preset that binds a secret to
# one more host gives a1 a new CA, and sync puts it into the guest
out=$(sbx --json sync)
check "sync with nothing changed: a1's guest credentials are current" \
    test "$(json_get "$out" "[x['result'] for x in j['credentials'] if x['vmid'] == $a1]")" = '["current"]'
# new_ca FILE SED...: both egressd's ai preset edited with sed (the
# arguments), reloaded; then a1's CA (GET credentials) into FILE once it
# differs from $T/a1-ca.pem (5 s at most).
new_ca() {
    local out=$1 n i
    shift
    for n in 1 2; do
        sed -i "$@" "$T/egressd$n/policies/ai.allow"
        egressd_api "$n" POST /v1/reload >/dev/null
    done
    for ((i = 0; i < 50; i++)); do
        creds 1 "$a1" 'c["ca"]' >"$out"
        grep -q BEGIN "$out" && ! cmp -s "$T/a1-ca.pem" "$out" && break
        sleep 0.1
    done
}
new_ca "$T/a1-ca2.pem" '$a more.test:8443 inject x-api-key secret anthropic'
check "a reload that binds anthropic to more.test too gives a1 a CA that permits it" \
    sh -c "openssl x509 -in '$T/a1-ca2.pem' -noout -ext nameConstraints | grep -q 'DNS:more.test'"
check "  egressd says so, and that the guest needs it" \
    grep -q "sandbox $a1: a new CA for interception, for its hosts now:.*more.test.*sandboxctl sync" \
    "$T/egressd1/egressd.err"
out=$(sbx sync nosuch 2>&1)
ok "$([ $? -eq 1 ] && grep -q "sync: no sandbox 'nosuch'" <<<"$out"; echo $?)" "sync NAME of no sandbox fails, naming it ($out)"
out=$(sbx --json sync a1)
check "sync a1 installs it in a1's guest ($(json_get "$out" 'j["credentials"]' 2>/dev/null))" \
    test "$(json_get "$out" "[x['result'] for x in j['credentials'] if x['vmid'] == $a1]")" = '["installed"]'
check "  the guest's CA file now permits more.test" \
    sh -c "guest_ca=\$(mktemp); cat '$PVE_SIM_DIR/state/vms/$a1/disk/upper/usr/local/share/ca-certificates/egressd-sandbox.crt' >\"\$guest_ca\"; openssl x509 -in \"\$guest_ca\" -noout -ext nameConstraints | grep -q 'DNS:more.test'; r=\$?; rm -f \"\$guest_ca\"; exit \$r"
out=$(sbx --json sync)
check "  a second sync finds it current" \
    test "$(json_get "$out" "[x['result'] for x in j['credentials'] if x['vmid'] == $a1]")" = '["current"]'
cp "$T/a1-ca2.pem" "$T/a1-ca.pem"

# --- a create in progress is left to that create: the reaper timer runs
# sync beside creates.  a1 as if its create still ran (a live process's
# reservation of its VMID), its CA changed again (more.test unbound).
sleep 120 &
holder=$!
cp "$T/state/reservations.json" "$T/reservations.before"
python3 - "$T/state/reservations.json" "$holder" "$a1" <<'EOF2'
import json, sys
pid, vmid = int(sys.argv[2]), int(sys.argv[3])
start = int(open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()[19])
json.dump([{"pid": pid, "start": start, "name": "a1", "cores": 1, "memory_mib": 512,
            "vmid": vmid, "address": "10.99.0.250"}], open(sys.argv[1], "w"))
EOF2
new_ca "$T/a1-ca3.pem" '/^more.test:8443 /d'
out=$(sbx --json sync)
check "sync while a1's create is in progress: its guest is skipped, saying why, not installed ($(json_get "$out" 'j["credentials"]' 2>/dev/null))" \
    test "$(json_get "$out" "[(x['result'], 'create is in progress' in x.get('why', '')) for x in j['credentials'] if x['vmid'] == $a1]")" = '[["skipped", true]]'
check "  its binding is synced all the same" \
    test "$(egressd_state 1 "b['$a1']['secrets']")" = '["anthropic", "github", "build-cache"]'
kill "$holder"
wait "$holder" 2>/dev/null
cp "$T/reservations.before" "$T/state/reservations.json"
out=$(sbx --json sync)
check "once that create has ended, sync installs a1's new CA ($(json_get "$out" 'j["credentials"]' 2>/dev/null))" \
    test "$(json_get "$out" "[x['result'] for x in j['credentials'] if x['vmid'] == $a1]")" = '["installed"]'
cp "$T/a1-ca3.pem" "$T/a1-ca.pem"

# --- failures leave nothing behind
out=$(sbx create --name b2 --size small --owner bob --policy ai --secret anthropc 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q "create: egressd binding: .*no secret 'anthropc' in secret-dir; did you mean 'anthropic'" <<<"$out"; echo $?)" \
    "an unknown secret fails the create with egressd's 'did you mean' ($out)"
left_nothing "$a1" "  unknown secret"
out=$(sbx create --name b2 --size small --owner bob --policy p --secret anthropic 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q "create: credentials: egressd gives sandbox [0-9]* no CA: no inject rule of policy 'p' binds anthropic" <<<"$out"; echo $?)" \
    "a policy that binds no secret to a host fails the create, saying so ($out)"
left_nothing "$a1" "  no CA"
pve_sim_ctl POST faults '{"method":"POST","path":"/agent/exec$","kind":"http_500","count":1}' >/dev/null
out=$(sbx create --name b2 --size small --owner bob --policy ai --secret anthropic 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q "create: credentials: directories: " <<<"$out"; echo $?)" \
    "a guest agent failure while installing fails the create, naming the step ($out)"
left_nothing "$a1" "  guest agent failure"
out=$(sbx create --name b2 --size small --owner bob --policy ai --secret anthropic --secret anthropic 2>&1)
ok "$([ $? -eq 1 ] && grep -q "secrets: 'anthropic' is given twice" <<<"$out"; echo $?)" "a secret given twice is refused ($out)"
out=$(sbx create --name b2 --size small --owner bob --policy ai --secret 'Bad/Name' 2>&1)
ok "$([ $? -eq 1 ] && grep -q "secrets: 'Bad/Name' is not a secret's name" <<<"$out"; echo $?)" "a malformed name is refused before anything is made ($out)"
grep -v '^egressd-admin' "$CONF" >"$T/no-egressd.conf"
out=$("$SBX_BIN" -c "$T/no-egressd.conf" create --name b2 --size small --owner bob --policy ai \
    --secret anthropic 2>&1)
ok "$([ $? -eq 1 ] && grep -q "secrets: credential injection needs egressd, and .* has no \`egressd-admin\`" <<<"$out" &&
    [ "$(others "$a1")" = "[]" ]; echo $?)" "without egressd-admin a secret is refused before anything is made ($out)"

# --- MCP: create_server takes the secrets of mcp-secrets only
cat >>"$CONF" <<EOF
mcp-presets ai
mcp-secrets anthropic
EOF
mcp() {
    {
        printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}' \
            '{"jsonrpc":"2.0","method":"notifications/initialized"}'
        local i=2 m
        for m in "$@"; do
            printf '{"jsonrpc":"2.0","id":%d,"method":%s}\n' "$i" "$m"
            i=$((i + 1))
        done
    } | timeout 120 "$SBX_BIN" -c "$CONF" mcp --owner mcp-tester 2>>"$T/mcp.err"
}
# answer FILE ID PYEXPR: PYEXPR over `r`, the result of request ID.
answer() {
    python3 -c 'import json,sys; a={m.get("id"): m for m in map(json.loads, open(sys.argv[1])) if "id" in m}; r=a[int(sys.argv[2])]["result"]; print(eval(sys.argv[3]))' "$@" 2>&1
}
before=$(sim_state "(len(s['tasks']), len(s['vms']))")
mcp '"tools/list"' \
    '"tools/call","params":{"name":"create_server","arguments":{"name":"m2","size":"small","lifetime":"1h","policy":"ai","secrets":["github"]}}' \
    '"tools/call","params":{"name":"create_server","arguments":{"name":"m1","size":"small","lifetime":"1h","policy":"ai","secrets":["anthropic"]}}' \
    >"$T/mcp1.out"
check "MCP tools/list: create_server's secrets are an array of the names of mcp-secrets" \
    test "$(answer "$T/mcp1.out" 2 '[t["inputSchema"]["properties"]["secrets"]["items"]["enum"] for t in r["tools"] if t["name"] == "create_server"]')" = "[['anthropic']]"
check "MCP create_server with secret github (not in mcp-secrets): a tool error naming the permitted ones" \
    test "$(answer "$T/mcp1.out" 3 'r["isError"] and "\"github\" is not a secret permitted over MCP; the administrator permits: anthropic" in r["content"][0]["text"]')" = True
check "MCP create_server with secret anthropic: made" \
    test "$(answer "$T/mcp1.out" 4 'r["isError"] is False and r["structuredContent"]["secrets"] == ["anthropic"]')" = True
m1=$(answer "$T/mcp1.out" 4 'r["structuredContent"]["vmid"]')
check "  m2 never reached Proxmox: one clone more (m1's), no VM m2" \
    test "$(sim_state "len([x for x in s['vms'] if x['name'] == 'm2'])") $(sim_state "len(s['vms'])")" = "0 $(($(cut -d, -f2 <<<"$before" | tr -d ' )') + 1))"
check "  m1's binding lists anthropic" test "$(egressd_state 1 "b['$m1']['secrets']")" = '["anthropic"]'
check "  m1's guest holds m1's placeholder" \
    grep -qx "export ANTHROPIC_API_KEY=$(creds 1 "$m1" 'c["placeholders"]["anthropic"]')" \
    "$PVE_SIM_DIR/state/vms/$m1/disk/upper/etc/profile.d/egressd-credentials.sh"
check "  which is not a1's" test "$(creds 1 "$m1" 'c["placeholders"]["anthropic"]')" != "$PH_A"
check "sandboxctl destroys m1" sbx destroy m1
sed -i '/^mcp-secrets/d' "$CONF"
mcp '"tools/list"' \
    '"tools/call","params":{"name":"create_server","arguments":{"name":"m3","size":"small","lifetime":"1h","policy":"ai","secrets":["anthropic"]}}' \
    >"$T/mcp2.out"
check "without mcp-secrets, create_server offers no secrets" \
    test "$(answer "$T/mcp2.out" 2 '[("secrets" in t["inputSchema"]["properties"]) for t in r["tools"] if t["name"] == "create_server"]')" = "[False]"
check "  and refuses them, saying none is permitted" \
    test "$(answer "$T/mcp2.out" 3 'r["isError"] and "no secret is permitted over MCP" in r["content"][0]["text"]')" = True

# --- a login egressd keeps, and what the CLIs read from the user's home
put_secret openai sk-REAL-openai-9e1c
(umask 077 && printf '{"claudeAiOauth": {"accessToken": "sk-ant-oat01-REAL-c1a0", "refreshToken": "sk-ant-ort01-REAL-c1a1", "expiresAt": %s, "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}}\n' \
    "$((($(date +%s) + 3600) * 1000))" >"$S/claude")
REAL_LOGIN='sk-REAL-openai-9e1c sk-ant-oat01-REAL-c1a0 sk-ant-ort01-REAL-c1a1'
for n in 1 2; do
    egressd_stop "$n"
    printf '%s\n' 'key.test:8446 inject bearer secret claude' 'key.test:8446 inject token-endpoint secret claude' \
        'key.test:8447 inject bearer secret openai' >>"$T/egressd$n/policies/ai.allow"
    egressd_start "$n" || bail "egressd $n starts again with a login in secret-dir"
done
out=$(sbx create --name c1 --size small --owner carol --policy ai --secret claude --secret openai 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q "the sandbox has no user 'agent' (guest-user)" <<<"$out"; echo $?)" \
    "a login for a guest without guest-user fails the create, naming the user ($(tr -d '\n' <<<"$out" | head -c 300))"
left_nothing "$a1" "  no guest-user"
echo 'guest-user root' >>"$CONF"
out=$(sbx --json create --name c1 --size small --owner carol --policy ai --secret claude --secret openai 2>"$T/c1.err")
ok $? "create c1 --secret claude (a login) --secret openai, guest-user root ($(tr -d '\n' <<<"$out" | head -c 200))"
[ -s "$T/c1.err" ] && sed "s/^/#   /" "$T/c1.err" | head -n 20
c1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
PH_C=$(creds 1 "$c1" 'c["secrets"]["claude"]["placeholder"]')
RPH_C=$(creds 1 "$c1" 'c["secrets"]["claude"]["refresh_placeholder"]')
PH_O=$(creds 1 "$c1" 'c["secrets"]["openai"]["placeholder"]')
check "egressd says claude is an anthropic login and openai a plain secret" \
    test "$(creds 1 "$c1" '[c["secrets"]["claude"]["kind"], c["secrets"]["claude"]["provider"], c["secrets"]["openai"]["kind"]]')" = '["login", "anthropic", "value"]'
up=$PVE_SIM_DIR/state/vms/$c1/disk/private # the guest's /root is its private root/
check "  ~/.claude/.credentials.json in the guest: Claude Code's shape, the two placeholders, a year ahead" \
    python3 -c 'import json, sys, time
j = json.load(open(sys.argv[1]))["claudeAiOauth"]
sys.exit(0 if j["accessToken"] == sys.argv[2] and j["refreshToken"] == sys.argv[3] and
         j["expiresAt"] > (time.time() + 300 * 86400) * 1000 and j["scopes"] == ["user:inference", "user:profile"] else 1)' \
    "$up/root/.claude/.credentials.json" "$PH_C" "$RPH_C"
check "  ~/.codex/auth.json: API-key mode with the openai placeholder (codex's built-in provider reads it)" \
    python3 -c 'import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if j == {"auth_mode": "apikey", "OPENAI_API_KEY": sys.argv[2]} else 1)' "$up/root/.codex/auth.json" "$PH_O"
check "  both the user's (root here) and 0600" \
    test "$(stat -c '%U %a' "$up/root/.claude/.credentials.json" "$up/root/.codex/auth.json" | sort -u)" = "root 600"
found=$(for v in $REAL $REAL_LOGIN; do grep -rlF -- "$v" "$PVE_SIM_DIR" "$T/state" "$CONF" 2>/dev/null; done)
check "  no file of the guest, the simulator or sandboxctl holds a real token${found:+ ($found)}" \
    test -z "$found"
check "destroy c1" sbx destroy c1
sed -i '/^guest-user root$/d' "$CONF"
rm -f "$S/claude" "$S/openai"

# --- request rules without secrets: the guest gets the CA egressd
# intercepts their hosts with, and curl in it is judged request by request
for n in 1 2; do
    printf '%s\n' '# rules: no secrets, a request rule' 'key.test:8443 methods GET paths /hello' \
        >"$T/egressd$n/policies/rules.allow"
    egressd_api "$n" POST /v1/reload || bail "egressd $n reloads with rules.allow"
done
out=$(sbx --json create --name r1 --size small --owner alice --policy rules 2>&1)
rc=$?
ok $rc "create r1 --policy rules (a request rule, no secrets) ($(tr -d '\n' <<<"$out" | head -c 200))"
r1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
r1addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
creds 1 "$r1" 'c["ca"]' >"$T/r1-ca.pem"
check "egressd gives r1 a CA for key.test, its request rule's host" \
    bash -c 'openssl x509 -in "$1" -noout -ext nameConstraints | grep -q "DNS:key.test"' _ "$T/r1-ca.pem"
check "  the guest holds it, and update-ca-certificates put it in the bundle" \
    bash -c '[ -n "$1" ] && [ "$1" = "$2" ] && tr -d "\n" <"$3" | grep -qF -- "$4"' _ \
    "$(der <"$T/r1-ca.pem")" "$(guest_file "$r1" /usr/local/share/ca-certificates/egressd-sandbox.crt | der)" \
    "$PVE_SIM_DIR/state/vms/$r1/disk/upper/etc/ssl/certs/ca-certificates.crt" \
    "$(grep -v -- ----- "$T/r1-ca.pem" | tr -d '\n')"
check "  its environment points node, python and git at it" \
    bash -c 'grep -q "^NODE_EXTRA_CA_CERTS=" <<<"$1" && grep -q "^REQUESTS_CA_BUNDLE=" <<<"$1"' _ \
    "$(guest_file "$r1" /etc/environment.d/90-egressd-credentials.conf)"
out=$(sbx exec r1 -- bash -lc "curl -sS -m 10 --interface $r1addr -o /dev/null -w '%{http_code}' https://key.test:8443/hello; echo; curl -sS -m 10 --interface $r1addr -o /dev/null -w '%{http_code}' -X POST https://key.test:8443/hello" 2>&1)
out=$(echo $out) # one line, words apart
check "curl in the guest: GET /hello passes, POST /hello is refused inside the tunnel ($out)" \
    test "$out" = "200 403"
for n in 1 2; do
    printf '%s\n' 'key2.test:8443 methods GET' >>"$T/egressd$n/policies/rules.allow"
    egressd_api "$n" POST /v1/reload >/dev/null
done
for ((i = 0; i < 50; i++)); do
    creds 1 "$r1" 'c["ca"]' >"$T/r1-ca2.pem"
    grep -q BEGIN "$T/r1-ca2.pem" && ! cmp -s "$T/r1-ca.pem" "$T/r1-ca2.pem" && break
    sleep 0.1
done
out=$(sbx --json sync r1)
check "a request rule for one more host: a new CA, and sync installs it in r1's guest ($(json_get "$out" 'j["credentials"]' 2>/dev/null))" \
    bash -c '[ "$1" = "[\"installed\"]" ] && [ "$2" = "$3" ]' _ \
    "$(json_get "$out" "[x['result'] for x in j['credentials'] if x['vmid'] == $r1]")" \
    "$(der <"$T/r1-ca2.pem")" "$(guest_file "$r1" /usr/local/share/ca-certificates/egressd-sandbox.crt | der)"
out=$(sbx --json create --name n1 --size small --owner alice --policy ai 2>&1)
ok $? "create n1 --policy ai (no secrets, no request rules)"
n1=$(json_get "$out" 'j["vmid"]' 2>/dev/null)
check "  egressd gives it no CA, and the guest holds none" \
    bash -c '[ "$1" = None ] && [ -z "$2" ]' _ "$(creds 1 "$n1" 'c["ca"]')" \
    "$(guest_file "$n1" /usr/local/share/ca-certificates/egressd-sandbox.crt)"
check "destroy r1" sbx destroy r1
check "destroy n1" sbx destroy n1

# --- egressd that do not share the appliance key
egressd_stop 2
mv "$T/egressd2/state/appliance.key" "$T/egressd2/state/appliance.key.shared"
egressd_start 2
ok $? "egressd 2 starts again with an appliance key of its own"
out=$(sbx create --name b2 --size small --owner bob --policy ai --secret anthropic 2>&1)
rc=$?
ok "$([ $rc -eq 1 ] && grep -q "create: credentials: egressd .* and egressd .* give sandbox [0-9]* different placeholders: .*appliance.key" <<<"$out"; echo $?)" \
    "egressd with different appliance keys fail the create, with the fix ($out)"
left_nothing "$a1" "  different keys"

check "destroy a1" sbx destroy a1
check "  its binding is gone from both egressd" \
    test "$(egressd_state 1 'len(b)')$(egressd_state 2 'len(b)')" = 00
sbx_stop_all
tap_end
