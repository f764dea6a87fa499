#!/usr/bin/env bash
# rules-tools.t - request rules with the tools agents use: a registry that
# a rule holds to `methods GET,HEAD` lets the real npm install a package
# through egressd and refuses `npm publish` (a PUT) before the registry
# sees it, with egressd's reason in npm's error; python's requests library
# reads and is refused a write the same way.  The registry is npmreg.py on
# its own address.  TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own
# netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.26 reg.test
egd_allow 'reg.test:8000 methods GET,HEAD'
RULE_LINE=$(awk '/^reg\.test:8000 methods/ { print "test.allow:" NR; exit }' "$T/policies/test.allow")
egm_server "$T/reg.out" "$EGD_PY" -S -u "$EGD_DIR/npmreg.py" --listen 127.0.0.26:8000 \
    --log "$T/reg.log" --name reg.test || bail "the registry starts"
egd_start || bail "egressd starts and answers /healthz"
REG=http://reg.test:8000/

# reg_saw METHOD: how many requests of METHOD the registry got.
reg_saw() { grep -c "\"method\": \"$1\"" "$T/reg.log" 2>/dev/null; }

if ! command -v npm >/dev/null 2>&1; then
    bail "npm is not installed (deploy/install-deps.sh installs it)"
fi
# npm with nothing of this machine's: its own config, cache and home.
printf '%s\n' "registry=$REG" "proxy=http://$EGD_PROXY" "update-notifier=false" "audit=false" \
    "fund=false" "//reg.test:8000/:_authToken=test-token" >"$T/npmrc"
npmx() {
    (cd "$1" && shift && egd_env npm_config_userconfig="$T/npmrc" npm_config_cache="$T/npm-cache" \
        npm "$@")
}

# --- npm install: GETs only, let through.
mkdir -p "$T/app"
printf '{"name":"app","version":"1.0.0","private":true}\n' >"$T/app/package.json"
npmx "$T/app" install leftpad-test >"$T/install.out" 2>&1
rc=$?
ok $rc "npm install leftpad-test through egressd, the registry held to GET and HEAD"
[ $rc -eq 0 ] || sed 's/^/#   /' "$T/install.out" | tail -n 15
check "  the package is installed, its code runs" \
    test "$(cd "$T/app" && node -e 'console.log(require("leftpad-test")("x", 3))')" = "  x"

# --- npm publish: a PUT, refused before the registry.
mkdir -p "$T/mine"
printf '{"name":"mine-test","version":"1.0.0"}\n' >"$T/mine/package.json"
printf 'module.exports = 1;\n' >"$T/mine/index.js"
egd_log_mark
npmx "$T/mine" publish >"$T/publish.out" 2>&1
rc=$?
ok "$([ $rc -ne 0 ] && grep -q 'E403' "$T/publish.out" && echo 0 || echo 1)" \
    "npm publish fails with 403"
sed 's/^/#   /' "$T/publish.out" | grep -iE 'E403|403|forbidden' | head -n 3
check "  the registry never saw the PUT" test "$(reg_saw PUT)" = 0
egd_log_ok "  egressd logged it: PUT denied as method_not_allowed by $RULE_LINE" \
    'l["host"] == "reg.test" and l["method"] == "PUT"' \
    "l['decision'] == 'deny' and l['reason'] == 'method_not_allowed' and l['rule'] == '$RULE_LINE'"

# --- python requests: a read passes, a write is refused with the reason.
pyout=$(egd_python - "http://$EGD_PROXY" "$REG" 2>&1 <<'EOF'
import sys
import requests
proxies = {"http": sys.argv[1]}
r = requests.get(sys.argv[2] + "leftpad-test", proxies=proxies, timeout=10)
w = requests.delete(sys.argv[2] + "leftpad-test/-rev/1", proxies=proxies, timeout=10)
h = requests.head(sys.argv[2] + "leftpad-test", proxies=proxies, timeout=10)
print(r.status_code, r.json()["dist-tags"]["latest"], "|", w.status_code,
      w.headers.get("X-Egress-Deny", "").split(";")[0], "|", h.status_code)
EOF
)
check "python requests: GET passes, DELETE is refused (method_not_allowed), HEAD passes ($pyout)" \
    test "$pyout" = "200 1.0.0 | 403 method_not_allowed | 200"
check "  the registry never saw the DELETE" test "$(reg_saw DELETE)" = 0

egd_finish
tap_end
