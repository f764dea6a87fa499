#!/usr/bin/env bash
# inject-reflect.t - a secret egressd added must not come back to the
# sandbox (docs/credentials.md, "Threat model"): a request that gets a
# credential is refused with TRACE, TRACK or any method outside the known
# list, before it reaches the origin; and what an intercepted origin sends
# back after a credential went to it is searched for the secret (the value,
# percent-encoded, base64): where it shows, the response is cut before a
# byte of it goes on, and the line says credential_reflected.  Against
# tests/egressd/reflectd.py, an origin that echoes requests as heads,
# bodies, base64, URL-encoded, split across writes and across chunks.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

SB=127.0.0.5 # sandbox sb1: secrets anthropic, github
P=$EGD_HTTPS_PORT
egd_host 127.0.0.30 echo.test  # x-api-key, anthropic
egd_host 127.0.0.31 basic.test # basic, github
egd_allow "echo.test:$P inject x-api-key secret anthropic" "basic.test:$P inject basic secret github"

S=$T/secrets
mkdir -m 700 "$S"
# '/', '+' and '=' so that the percent-encodings differ from the value
SECRET='sk-ant/REAL+reflect=0123456789abcdef'
(umask 077 && printf '%s\n' "$SECRET" >"$S/anthropic" && printf '%s\n' 'ghp_REAL_basic_42' >"$S/github")

for name in echo.test basic.test; do
    egd_cert "$name" || egm_bail "a certificate for $name"
    egm_server "$T/$name.out" "$EGD_PY" -S -u "$EGD_DIR/reflectd.py" --log "$T/reflectd.log" \
        --cert "$T/certs/$name.pem" --key "$T/certs/$name.key" --listen "$(egd_addr "$name"):$P" ||
        egm_bail "reflectd.py starts for $name"
done
egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" || egm_bail "egressd starts with secret-dir"
egd_put sb1 "{\"id\":\"sb1\",\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[\"anthropic\",\"github\"]}" \
    >/dev/null || egm_bail "PUT sandbox sb1"
egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
py -c 'import json,sys; j=json.load(open(sys.argv[1])); open(sys.argv[2],"w").write(j["ca"])' \
    "$T/cred.json" "$T/sbca.pem"
ph() { py -c 'import json,sys; print(json.load(open(sys.argv[1]))["placeholders"][sys.argv[2]])' "$T/cred.json" "$1"; }
PH_A=$(ph anthropic)
PH_G=$(ph github)

# sbcurl ARGS...: curl from sb1 through egressd, trusting only the sandbox CA.
sbcurl() {
    env "${EGD_SCRUB[@]}" curl -q -sS --cacert "$T/sbca.pem" -m 10 --interface "$SB" \
        -x "http://$EGD_PROXY" "$@"
}
# seen PYEXPR: how many requests reflectd logged where PYEXPR over `o` holds.
seen() {
    py -c '
import json, os, sys
n = 0
for line in open(sys.argv[1]) if os.path.exists(sys.argv[1]) else []:
    o = json.loads(line)
    n += bool(eval(sys.argv[2]))
print(n)' "$T/reflectd.log" "$1"
}
# leaks FILE SECRET: the forms of SECRET that FILE holds ("raw", "url",
# "b64", "half": its first half), space-separated; empty when none (and
# when there is no FILE: curl makes it only once a body byte came).
leaks() {
    py -c '
import base64, os, sys, urllib.parse
data = open(sys.argv[1], "rb").read() if os.path.exists(sys.argv[1]) else b""
s = sys.argv[2].encode()
found = []
if s in data: found.append("raw")
if urllib.parse.quote(s).encode() in data or urllib.parse.quote(s, safe="").encode() in data:
    found.append("url")
for a in range(3):
    enc = base64.b64encode(b"x" * a + s)
    core = enc[(8 * a + 5) // 6:(8 * (a + len(s))) // 6]
    if core in data:
        found.append("b64")
        break
if s[:len(s) // 2] in data and "raw" not in found: found.append("half")
print(" ".join(found))' "$1" "$2"
}

# --- methods that echo: refused before the origin, only with a credential
egd_log_mark
for m in TRACE TRACK; do
    code=$(sbcurl -o "$T/$m.body" -w '%{http_code}' -D "$T/$m.head" -X "$m" -H "x-api-key: $PH_A" \
        "https://echo.test:$P/anything")
    ok "$([ "$code" = 403 ] && grep -qi '^x-egress-deny: credential_method' "$T/$m.head" && echo 0 || echo 1)" \
        "$m with the placeholder: 403 credential_method"
    ok "$([ "$(seen "o['method'] == '$m'")" = 0 ] && echo 0 || echo 1)" "... and the origin saw no request"
    ok "$([ -z "$(leaks "$T/$m.body" "$SECRET")" ] && echo 0 || echo 1)" "... and the client got no secret"
    egd_log_ok "... logged: credential_method, the secret named" \
        "l['mode'] == 'intercept' and l['method'] == '$m'" \
        "l['reason'] == 'credential_method' and l['decision'] == 'deny' and l['inject'] == 'anthropic' and l['status'] == 403"
done
code=$(sbcurl -o /dev/null -w '%{http_code}' -X FOO -H "x-api-key: $PH_A" "https://echo.test:$P/x")
ok "$([ "$code" = 403 ] && [ "$(seen "o['method'] == 'FOO'")" = 0 ] && echo 0 || echo 1)" \
    "an unknown method with the placeholder: 403, nothing sent"
code=$(sbcurl -o "$T/trace-free.body" -w '%{http_code}' -X TRACE "https://echo.test:$P/free")
ok "$([ "$code" = 200 ] && [ "$(seen "o['method'] == 'TRACE' and not o['has_key']")" = 1 ] && echo 0 || echo 1)" \
    "TRACE without a credential goes through (nothing to echo)"
for m in PATCH DELETE PUT OPTIONS; do
    out=$(sbcurl -X "$m" -H "x-api-key: $PH_A" "https://echo.test:$P/item/1" 2>&1)
    ok "$([ "$out" = "$m ok" ] || { [ "$m" = OPTIONS ] && [ "$out" = "not found" ]; } && echo 0 || echo 1)" \
        "$m with the placeholder still works"
done

# --- the origin echoes the secret: cut, in every form it takes
egd_log_mark
for form in raw base64 url split chunked; do
    sbcurl -o "$T/echo-$form.body" -H "x-api-key: $PH_A" "https://echo.test:$P/echo/$form" \
        2>"$T/echo-$form.err"
    got=$(leaks "$T/echo-$form.body" "$SECRET")
    ok "$([ -z "$got" ] && [ "$(seen "o['path'] == '/echo/$form' and o['has_key']")" = 1 ] && echo 0 || echo 1)" \
        "/echo/$form: the origin got the request, the client none of the secret"
    [ -z "$got" ] || diag "the client got the secret as: $got"
    egd_log_ok "... its line: credential_reflected, cut by egressd" \
        "l['mode'] == 'intercept' and l['path'] == '/echo/$form'" \
        "l['reason'] == 'credential_reflected' and l['inject'] == 'anthropic' and l['termination'].startswith('proxy/')"
done
ok "$(grep -q "^GET /echo/split HTTP/1.1" "$T/echo-split.body" && echo 0 || echo 1)" \
    "split: the bytes before the secret went on (the echo's start), not its first half"
sbcurl -o "$T/field.body" -D "$T/field.head" -H "x-api-key: $PH_A" "https://echo.test:$P/echo/field" \
    2>"$T/field.err"
ok "$([ -z "$(leaks "$T/field.head" "$SECRET")" ] && ! grep -qi '^x-seen' "$T/field.head" &&
    [ "$(seen "o['path'] == '/echo/field'")" = 1 ] && echo 0 || echo 1)" \
    "the secret in a response head field: nothing of that head goes on"
sbcurl -o "$T/basic.body" -u "x-access-token:$PH_G" "https://basic.test:$P/echo/raw" 2>/dev/null
want=$(printf 'x-access-token:ghp_REAL_basic_42' | base64 -w0)
ok "$([ "$(seen "o['path'] == '/echo/raw' and o['has_key']")" = 2 ] && ! grep -qs "$want" "$T/basic.body" &&
    [ -z "$(leaks "$T/basic.body" ghp_REAL_basic_42)" ] && echo 0 || echo 1)" \
    "basic: an echoed Authorization (base64 of user:secret) is cut too"

# --- what does not echo is not touched
out=$(sbcurl -H "x-api-key: $PH_A" "https://echo.test:$P/hello" "https://echo.test:$P/hello" 2>&1)
ok "$([ "$out" = "hello from reflectd
hello from reflectd" ] && echo 0 || echo 1)" "a normal response, twice on one connection: unchanged"
sbcurl -o "$T/big.body" -H "x-api-key: $PH_A" "https://echo.test:$P/bytes/3000000"
want=$(py -c 'import hashlib; print(hashlib.sha256((b"abcdefghijklmnop" * 187500)).hexdigest())')
ok "$([ "$(sha256sum <"$T/big.body" | cut -d' ' -f1)" = "$want" ] && echo 0 || echo 1)" \
    "3 MB through the search: byte for byte"

# --- counted, and said without the value
ok "$([ "$(egd_metric 'egressd_injections_total{secret="anthropic",result="reflected"}')" -ge 6 ] &&
    [ "$(egd_metric 'egressd_injections_total{secret="anthropic",result="method"}')" -ge 3 ] && echo 0 || echo 1)" \
    "injections_total counts the reflections and the refused methods"
ok "$(grep -q "sent back the value of secret 'anthropic'" "$T/egressd.err" && echo 0 || echo 1)" \
    "the diagnostics log names the secret that came back"
ok "$(grep -q 'REAL' "$T/access.log" "$T/egressd.err" && echo 1 || echo 0)" \
    "no secret's value in the access log or the diagnostics"

egd_finish
tap_end
