#!/usr/bin/env bash
# inject.t - credential injection (docs/credentials.md): the sandbox holds
# placeholders, egressd terminates a CONNECT to a host whose `inject` rule
# binds one of the sandbox's secrets, and adds the real value to the
# request header the rule names, only for that host (and, for a rule with
# methods and paths, only in the requests it admits).  Checked with curl and
# python's ssl against the test origins (tests/egressd/origin.py, which
# logs every request head it gets): what the origin saw, what the client
# got, the access log, and every denial of the contract.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

SB=127.0.0.5    # sandbox sb1: secrets anthropic, openai, github
SB2=127.0.0.6   # sandbox sb2: no secrets
P=$EGD_HTTPS_PORT
egd_host 127.0.0.24 key.test   # x-api-key, anthropic
egd_host 127.0.0.25 bear.test  # bearer, openai
egd_host 127.0.0.26 git.test   # basic, github
egd_host 127.0.0.27 hdr.test   # header x-goog-api-key, gemini (not in sb1's binding)
egd_host 127.0.0.24 wrong.test # key.test's address: its certificate is not for this name
egd_host 127.0.0.28 self.test  # an origin whose certificate is self-signed
egd_host 127.0.0.29 scope.test # bearer, github, only for GET /hello
egd_allow "key.test:$P inject x-api-key secret anthropic" \
    "key.test:$P inject bearer secret anthropic" \
    "bear.test:$P inject bearer secret openai" \
    "git.test:$P inject basic secret github" \
    "hdr.test:$P inject header x-goog-api-key secret gemini" \
    "wrong.test:$P inject x-api-key secret anthropic" \
    "self.test:$P inject x-api-key secret anthropic"

S=$T/secrets
mkdir -m 700 "$S"
put_secret() { (umask 077 && printf '%s\n' "$2" >"$S/$1"); }
put_secret anthropic sk-ant-REAL-one
put_secret openai sk-REAL-two
put_secret github ghp_REAL_three
put_secret gemini AIzaREAL-four

# --- the secret files, as egressd -t checks them
put_secret loose sk-REAL-loose
chmod 644 "$S/loose"
egd_write_config "secret-dir $S" "upstream-ca-file $EGD_CA"
"$EGD_BIN" -t -c "$T/egressd.conf" >"$T/check.out" 2>&1
rc=$?
ok "$([ "$rc" -eq 1 ] && grep -q "loose: mode 0644 is looser than 0600" "$T/check.out" && echo 0 || echo 1)" \
    "egressd -t refuses a secret file readable by others, naming it"
ok "$(grep -q REAL "$T/check.out" && echo 1 || echo 0)" "... and the refusal does not show its value"
sed 's/^/#   /' "$T/check.out" | head -n 3
rm -f "$S/loose"

egd_origin key.test bear.test git.test hdr.test a.test scope.test || egm_bail "the origins start"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=self.test \
    -addext subjectAltName=DNS:self.test -keyout "$T/self.key" -out "$T/self.pem" >/dev/null 2>&1
egm_server "$T/self.out" sh -c "echo ready; exec openssl s_server -quiet -accept 127.0.0.28:$P \
    -cert '$T/self.pem' -key '$T/self.key' -www" || egm_bail "the self-signed origin starts"
egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" || egm_bail "egressd starts with secret-dir"
# (sb1's own lines: scope.test's rules hold for it alone)
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"box\",\"owner\":\"alice\",\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[\"anthropic\",\"openai\",\"github\"],\"allow\":[\"scope.test:$P inject bearer secret github methods GET paths /hello\",\"scope.test:$P methods POST\"]}" \
    >/dev/null || egm_bail "PUT sandbox sb1 with three secrets"
egd_put sb2 "{\"id\":\"sb2\",\"addresses\":[\"$SB2\"],\"policy\":\"test\"}" >/dev/null ||
    egm_bail "PUT sandbox sb2"
egd_put sb3 "{\"id\":\"sb3\",\"addresses\":[\"127.0.0.7\"],\"policy\":\"test\",\"secrets\":[\"anthropc\"]}" \
    >"$T/put.out" 2>&1
ok "$(grep -q "no secret 'anthropc'.*did you mean 'anthropic'" "$T/put.out" && echo 0 || echo 1)" \
    "a binding naming an unknown secret is refused, with the near name"

# --- what the guest is given
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$T/sbca.pem"
ph() { py -c 'import json,sys; print(json.load(open(sys.argv[1]))["placeholders"][sys.argv[2]])' "$T/cred.json" "$1"; }
PH_A=$(ph anthropic)
PH_O=$(ph openai)
PH_G=$(ph github)
ok "$([[ $PH_A =~ ^egressd-ph-anthropic-[0-9a-f]{32}$ ]] && [[ $PH_O == egressd-ph-openai-* ]] && echo 0 || echo 1)" \
    "credentials: a placeholder per secret of the binding ($PH_A)"
ok "$(grep -q REAL "$T/cred.json" && echo 1 || echo 0)" "credentials: no secret's value"
openssl x509 -in "$T/sbca.pem" -noout -ext nameConstraints >"$T/nc.txt" 2>&1
ok "$(grep -q 'DNS:key.test' "$T/nc.txt" && grep -q 'DNS:git.test' "$T/nc.txt" &&
    ! grep -q 'hdr.test' "$T/nc.txt" && echo 0 || echo 1)" \
    "the sandbox CA permits only the hosts of its binding's secrets"
sed 's/^/#   /' "$T/nc.txt"
egd_admin GET /v1/sandboxes/sb2/credentials >"$T/cred2.json"
ok_json "a sandbox without secrets gets no CA" "$(cat "$T/cred2.json")" \
    'l["ca"] is None and l["placeholders"] == {}'

egd_admin GET "/v1/explain?sandbox=sb1&host=key.test&port=$P" >"$T/explain.json"
ok_json "explain says an inject rule decides key.test" "$(cat "$T/explain.json")" \
    "l['decision'] == 'allow' and l.get('inject') is True"
"$BUILD_DIR/proxy/egressctl" -s "$T/admin.sock" explain --sandbox sb1 "key.test:$P" >"$T/explain.out" 2>&1
ok "$(grep -q '\[inject\]' "$T/explain.out" && echo 0 || echo 1)" "egressctl explain marks it [inject]"
sed 's/^/#   /' "$T/explain.out" | head -n 4

# sbcurl ARGS...: curl from sb1 through egressd, trusting only the sandbox CA.
sbcurl() {
    env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$T/sbca.pem" -m 10 --interface "$SB" \
        -x "http://$EGD_PROXY" "$@"
}
# origin_saw PYEXPR: how many request heads the origins logged where PYEXPR
# over `o` (headers as [[name, value], ...]) holds.
origin_saw() { origin_log_count "o['event'] == 'request' and ($1)"; }
hdr() { echo "dict(o['headers']).get('$1')"; }

# --- x-api-key
egd_log_mark
out=$(sbcurl -H "x-api-key: $PH_A" "https://key.test:$P/hello" 2>&1)
ok "$([ "$out" = "hello from key.test" ] && echo 0 || echo 1)" "x-api-key: curl gets the origin's answer"
[ "$out" = "hello from key.test" ] || diag "got: $out"
ok "$([ "$(origin_saw "$(hdr x-api-key) == 'sk-ant-REAL-one'")" = 1 ] && echo 0 || echo 1)" \
    "x-api-key: the origin saw the real key"
ok "$([ "$(origin_saw "'$PH_A' in o['head']")" = 0 ] && echo 0 || echo 1)" \
    "x-api-key: the origin never saw the placeholder"
egd_log_ok "the CONNECT's line says which secret is bound" \
    "l['mode'] == 'connect' and l['host'] == 'key.test'" \
    "l['inject'] == 'anthropic' and l['decision'] == 'allow' and l['status'] == 200"
egd_log_ok "the inner request's line: mode intercept, the secret added, the status" \
    "l['mode'] == 'intercept' and l['host'] == 'key.test'" \
    "l['inject'] == 'anthropic' and l['method'] == 'GET' and l['status'] == 200 and l['sni'] == 'key.test' and l['path'] == '/hello'"

# --- bearer, basic; a client's own token passes untouched
egd_log_mark
sbcurl -o /dev/null -H "Authorization: Bearer $PH_O" "https://bear.test:$P/hello?q=private"
ok "$([ "$(origin_saw "$(hdr authorization) == 'Bearer sk-REAL-two'")" = 1 ] && echo 0 || echo 1)" \
    "bearer: the origin saw the real token"
egd_log_ok "bearer: logged with its path, without the query" \
    "l['mode'] == 'intercept' and l['host'] == 'bear.test'" "l['path'] == '/hello' and l['inject'] == 'openai'"
sbcurl -o /dev/null -u "x-access-token:$PH_G" "https://git.test:$P/hello"
want=$(printf 'x-access-token:ghp_REAL_three' | base64 -w0)
ok "$([ "$(origin_saw "$(hdr authorization) == 'Basic $want'")" = 1 ] && echo 0 || echo 1)" \
    "basic: the password swapped, the user kept, re-encoded"
sbcurl -o /dev/null -H "Authorization: Bearer $PH_A" "https://key.test:$P/hello"
ok "$([ "$(origin_saw "o['local'].startswith('127.0.0.24:') and $(hdr authorization) == 'Bearer sk-ant-REAL-one'")" = 1 ] && echo 0 || echo 1)" \
    "two rules bind anthropic to key.test: its Bearer shape works as well as x-api-key"
sbcurl -o /dev/null -H "x-api-key: my-own-key" "https://key.test:$P/hello"
ok "$([ "$(origin_saw "$(hdr x-api-key) == 'my-own-key'")" = 1 ] && echo 0 || echo 1)" \
    "a header the client set to its own value passes untouched"

# --- an inject rule with methods and paths binds its secret only in the
# requests it admits: a POST that another rule allows gets no secret
sbcurl -o /dev/null -H "Authorization: Bearer $PH_G" "https://scope.test:$P/hello"
ok "$([ "$(origin_saw "o['local'].startswith('127.0.0.29:') and o['method'] == 'GET' and $(hdr authorization) == 'Bearer ghp_REAL_three'")" = 1 ] && echo 0 || echo 1)" \
    "a rule 'inject ... methods GET paths /hello': a GET /hello gets the secret"
code=$(sbcurl -o /dev/null -w '%{http_code}' -D "$T/scope.head" -X POST -d x=1 \
    -H "Authorization: Bearer $PH_G" "https://scope.test:$P/hello")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: credential_host_mismatch' "$T/scope.head" && echo 0 || echo 1)" \
    "  a POST /hello with the placeholder (another rule allows POST): 403 credential_host_mismatch ($code)"
ok "$([ "$(origin_saw "o['local'].startswith('127.0.0.29:') and o['method'] == 'POST'")" = 0 ] && echo 0 || echo 1)" \
    "  the origin never saw that POST, nor the secret in it"
code=$(sbcurl -o /dev/null -w '%{http_code}' -X POST -d x=1 "https://scope.test:$P/hello")
ok "$([ "$code" = 200 ] && echo 0 || echo 1)" "  a POST /hello without it passes, as the POST rule allows ($code)"

# --- denials
egd_log_mark
code=$(sbcurl -o "$T/deny.body" -w '%{http_code}' -D "$T/deny.head" -H "x-api-key: $PH_A" \
    "https://bear.test:$P/hello")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: credential_host_mismatch' "$T/deny.head" && echo 0 || echo 1)" \
    "anthropic's placeholder sent to bear.test (openai's host): 403 credential_host_mismatch"
ok "$([ "$(origin_saw "o['local'].startswith('127.0.0.25:') and ('$PH_A' in o['head'] or 'sk-ant-REAL' in o['head'])")" = 0 ] && echo 0 || echo 1)" \
    "... and nothing of it reached the origin"
egd_log_ok "... logged with the secret's name" "l['reason'] == 'credential_host_mismatch'" \
    "l['inject'] == 'anthropic' and l['decision'] == 'deny'"
egd_admin GET /v1/sandboxes/sb1/denials >"$T/denials.json"
ok_json "the denials ring says what went wrong, for the agent to read" "$(cat "$T/denials.json")" \
    "l['denials'][0]['reason'] == 'credential_host_mismatch' and 'placeholder' in l['denials'][0]['hint']"
code=$(sbcurl -o /dev/null -w '%{http_code}' -D "$T/deny2.head" -H "x-api-key: $PH_A" \
    "http://a.test:$EGD_HTTP_PORT/hello")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: credential_host_mismatch' "$T/deny2.head" && echo 0 || echo 1)" \
    "a placeholder in plain HTTP to an allowed host: 403 credential_host_mismatch"
code=$(sbcurl -o /dev/null -w '%{http_code}' -D "$T/deny3.head" -H "Host: bear.test:$P" \
    -H "Authorization: Bearer $PH_O" "https://key.test:$P/hello")
ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: sni_mismatch' "$T/deny3.head" && echo 0 || echo 1)" \
    "a Host other than the CONNECT host inside the tunnel: 403 sni_mismatch"
ok "$([ "$(origin_saw "'sk-REAL-two' in o['head'] and o['local'].startswith('127.0.0.24')")" = 0 ] && echo 0 || echo 1)" \
    "... and no secret went to the CONNECT host"
code=$(sbcurl -o /dev/null -w '%{http_code}' -D "$T/deny4.head" -H "x-api-key: $PH_A" \
    "https://wrong.test:$P/hello")
ok "$([ "$code" = 502 ] && grep -qi '^proxy-status: egressd; error=tls_certificate_error' "$T/deny4.head" && echo 0 || echo 1)" \
    "an origin whose certificate is for another name: 502 tls_certificate_error"
ok "$([ "$(origin_saw "'sk-ant-REAL' in o['head'] and o.get('sni') == 'wrong.test'")" = 0 ] && echo 0 || echo 1)" \
    "... and no request, no secret reached it"
code=$(sbcurl -o /dev/null -w '%{http_code}' -D "$T/deny5.head" -H "x-api-key: $PH_A" \
    "https://self.test:$P/hello")
ok "$([ "$code" = 502 ] && grep -qi '^proxy-status: egressd; error=tls_certificate_error' "$T/deny5.head" && echo 0 || echo 1)" \
    "an origin whose certificate no trusted CA signed: 502 tls_certificate_error"
code=$(sbcurl -o "$T/up.body" -w '%{http_code}' -D "$T/up.head" -H "x-api-key: $PH_A" \
    -H 'Connection: Upgrade, HTTP2-Settings' -H 'Upgrade: h2c' -H 'HTTP2-Settings: AAMAAABkAAQAAP__' \
    "https://key.test:$P/hello")
ok "$([ "$code" = 426 ] && grep -q 'only a WebSocket upgrade' "$T/up.body" && grep -qi '^upgrade: HTTP/1.1' "$T/up.head" && echo 0 || echo 1)" \
    "an Upgrade to h2c inside the tunnel: 426, said so"
egd_log_ok "... logged for the tunnel's host" "l['mode'] == 'intercept' and l['status'] == 426" \
    "l['host'] == 'key.test' and l['sni'] == 'key.test' and l['method'] == 'GET' and l['reason'] == 'bad_request'"
code=$(sbcurl -o "$T/ws.body" -w '%{http_code}' -H "x-api-key: $PH_A" -H 'Connection: Upgrade' \
    -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
    "https://key.test:$P/hello")
ok "$([ "$code" = 200 ] && echo 0 || echo 1)" \
    "a WebSocket upgrade to an origin that does not switch: its own answer (200) passes ($code)"
ok "$([ "$(origin_saw "'upgrade: websocket' in o['head'].lower() and 'sk-ant-REAL' in o['head']")" -ge 1 ] && echo 0 || echo 1)" \
    "... the origin saw the upgrade with Upgrade: websocket and the real key"
py "$EGD_DIR/inject.py" --proxy "$EGD_PROXY" --source "$SB" --ca "$T/sbca.pem" --host key.test \
    --port "$P" --h2-preface >"$T/h2.out" 2>&1
ok_json "the HTTP/2 preface inside the tunnel: 400, said so" "$(head -n 1 "$T/h2.out")" \
    "l.get('status') == 400 and 'HTTP/2' in l['body']"
ok "$(grep -q 'key.test: refused the HTTP/2 preface' "$T/egressd.err" && echo 0 || echo 1)" \
    "... and the diagnostics log says so" 

# --- no interception where no secret of the binding is bound
out=$(env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$EGD_CA" -m 10 --interface "$SB" \
    -x "http://$EGD_PROXY" -H "x-goog-api-key: egressd-ph-gemini-00" "https://hdr.test:$P/hello" 2>&1)
ok "$([ "$out" = "hello from hdr.test" ] && echo 0 || echo 1)" \
    "hdr.test (gemini, not in sb1's binding): an opaque tunnel, the origin's own certificate"
ok "$([ "$(origin_saw "$(hdr x-goog-api-key) == 'egressd-ph-gemini-00'")" = 1 ] && echo 0 || echo 1)" \
    "... and the header reaches it unchanged"
out=$(env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$EGD_CA" -m 10 --interface "$SB2" \
    -x "http://$EGD_PROXY" "https://key.test:$P/hello" 2>&1)
ok "$([ "$out" = "hello from key.test" ] && echo 0 || echo 1)" \
    "sb2 (no secrets) to key.test: an opaque tunnel"

# --- one tunnel: keep-alive, a rotated secret, a stream that arrives as it is sent
egd_log_mark
rm -f "$T/go"
py "$EGD_DIR/inject.py" --proxy "$EGD_PROXY" --source "$SB" --ca "$T/sbca.pem" --host key.test \
    --port "$P" --pause-file "$T/go" "GET /hello|x-api-key: $PH_A" "GET /hello|x-api-key: $PH_A" \
    "GET /sse/5|x-api-key: $PH_A" >"$T/keep.out" 2>"$T/keep.err" &
KPID=$!
for ((i = 0; i < 100; i++)); do [ "$(wc -l <"$T/keep.out")" -ge 1 ] && break; sleep 0.05; done
before=$(egd_metric 'egressd_policy_reloads_total{result="ok"}' || echo 0)
put_secret anthropic sk-ant-REAL-rotated
kill -HUP "$EGD_PID"
for ((i = 0; i < 100; i++)); do
    [ "$(egd_metric 'egressd_policy_reloads_total{result="ok"}' || echo 0)" != "$before" ] && break
    sleep 0.05
done
touch "$T/go"
for ((i = 0; i < 100; i++)); do [ ! -e "$T/go" ] && break; sleep 0.05; done
sleep 0.3
touch "$T/go"
wait "$KPID"
ok "$([ "$(grep -c '"status": 200' "$T/keep.out")" = 3 ] && echo 0 || echo 1)" \
    "one tunnel: three requests answered, the connection kept across a reload"
sed 's/^/#   /' "$T/keep.err" | head -n 3
ok "$([ "$(origin_saw "$(hdr x-api-key) == 'sk-ant-REAL-rotated'")" -ge 2 ] && echo 0 || echo 1)" \
    "a rotated secret file: the next request on the same tunnel carries the new value"
ok_json "server-sent events arrive as they are sent, not buffered" "$(sed -n 3p "$T/keep.out")" \
    "len(l['events']) == 5 and l['events'][0][1] < float(l['events'][4][0].split()[2]) - 0.5"
ok "$(grep -q REAL "$T/keep.out" && echo 1 || echo 0)" "the client never received a secret"

# --- a secret file replaced in place: inotify reloads, the next request has it
before=$(egd_metric 'egressd_policy_reloads_total{result="ok"}' || echo 0)
(umask 077 && printf 'sk-REAL-two-renewed\n' >"$T/openai.new") && mv "$T/openai.new" "$S/openai"
for ((i = 0; i < 100; i++)); do
    [ "$(egd_metric 'egressd_policy_reloads_total{result="ok"}' || echo 0)" != "$before" ] && break
    sleep 0.05
done
sbcurl -o /dev/null -H "Authorization: Bearer $PH_O" "https://bear.test:$P/hello"
ok "$([ "$(origin_saw "$(hdr authorization) == 'Bearer sk-REAL-two-renewed'")" = 1 ] && echo 0 || echo 1)" \
    "a secret file renamed into place: reloaded without a signal, the next request carries it"

# --- transparent TLS: the same interception, on the TLS listener
egd_log_mark
out=$(env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$T/sbca.pem" -m 10 --interface "$SB" \
    --connect-to "key.test:$P:${EGD_TLS%:*}:${EGD_TLS##*:}" -H "x-api-key: $PH_A" \
    "https://key.test:$P/hello" 2>&1)
ok "$([ "$out" = "hello from key.test" ] && echo 0 || echo 1)" \
    "transparent TLS to key.test: intercepted, the sandbox CA's leaf, the origin's answer"
[ "$out" = "hello from key.test" ] || diag "got: $out"
egd_log_ok "... its request line: mode intercept, the secret added" \
    "l['mode'] == 'intercept' and l['host'] == 'key.test'" "l['inject'] == 'anthropic' and l['status'] == 200"
egd_log_ok "... and the transparent connection's own line names it" \
    "l['mode'] == 'tls' and l['host'] == 'key.test'" "l['inject'] == 'anthropic' and l['decision'] == 'allow'"

# --- the counts
ok "$([ "$(egd_metric 'egressd_injections_total{secret="anthropic",result="added"}')" != 0 ] &&
    [ "$(egd_metric 'egressd_injections_total{secret="anthropic",result="mismatch"}')" -ge 2 ] && echo 0 || echo 1)" \
    "injections_total counts the additions and the mismatches per secret"
ok "$([ "$(egd_metric 'egressd_leaf_certificates_total{result="hit"}')" -ge 1 ] &&
    [ "$(egd_metric 'egressd_leaf_certificates_total{result="mint"}')" -le 10 ] && echo 0 || echo 1)" \
    "leaf certificates: at most one mint per host and worker (5 x 2), across reloads"
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred-later.json"
ok "$(cmp -s "$T/cred.json" "$T/cred-later.json" && echo 0 || echo 1)" \
    "after three reloads the sandbox's CA and placeholders are the same"

# --- nothing of a secret in egressd's own output
ok "$(grep -q 'REAL' "$T/access.log" "$T/egressd.err" && echo 1 || echo 0)" \
    "no secret's value in the access log or the diagnostics"

# --- a guest without the sandbox CA: egressd says so
env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$EGD_CA" -m 10 --interface "$SB" -x "http://$EGD_PROXY" \
    -H "x-api-key: $PH_A" "https://key.test:$P/hello" >/dev/null 2>&1
for ((i = 0; i < 50; i++)); do
    grep -q "sandbox sb1 refused egressd's certificate for key.test" "$T/egressd.err" && break
    sleep 0.1
done
ok "$(grep -q "sandbox sb1 refused egressd's certificate for key.test (.*): its guest may not hold its current sandbox CA" "$T/egressd.err" && echo 0 || echo 1)" \
    "a client that does not trust the sandbox CA: egressd names the sandbox, the host and the fix"

egd_finish
tap_end
