# tests/egressd/lib-more.sh - more helpers for egressd's end-to-end scripts
# (tools.t, ops.t, metrics.t, soak.t, inject-tools.t, agents.t).  Source
# after lib.sh.
#
#   egm_bail TEXT          a failing TAP line for a step nothing else can run
#                          without, then the plan; exit 1
#   egm_node_setup         (outside the namespace: it needs the npm registry)
#                          undici, pinned, in $BUILD_DIR/e2e-node, once
#   egm_node_modules       where egm_node_setup put it (empty when it failed)
#   egm_sdk_setup / egm_sdk_modules
#                          the same for the API SDKs (EGM_SDK_PACKAGES:
#                          @anthropic-ai/sdk, openai), in $EGM_SHARED/e2e-sdk
#   egm_agents_setup / egm_agents_modules
#                          the same for the coding agents' CLIs
#                          (EGM_AGENT_PACKAGES), in $EGM_SHARED/e2e-agents,
#                          and egm_gemini_setup / egm_gemini_modules for
#                          Gemini CLI's in $EGM_SHARED/e2e-gemini
#                          ($EGM_SHARED: beside the build directory, so the
#                          normal and the sanitizer build share one install
#                          of the CLIs' 700 MB)
#   egm_npm_install DIR SPEC...
#                          what the three use: SPEC... pinned in DIR, once
#   egm_install_outside FN before egd_netns: FN (one of the setups above)
#                          outside the namespace, its outcome for the run inside
#   egm_install_check TEXT WHY
#                          after egd_setup: TEXT as one TAP line; when FN failed,
#                          its log and egm_bail WHY
#   egm_secret_sandbox CA FIELDS SECRET... / egm_placeholder SECRET
#                          egressd with secret-dir, sb1 bound to secrets, its
#                          credentials and CA; a secret's placeholder
#   egm_server LOG CMD...  start CMD in the background (its pid joins
#                          EGD_PIDS), wait until LOG has a line "ready"
#   egm_toolsrv NAME ROOT [OPTION...]
#                          tests/egressd/toolsrv.py on NAME's address, port
#                          443, with NAME's certificate, serving ROOT
#   egm_log_lines PYEXPR   the lines after the mark where PYEXPR over `l`
#                          holds, as one JSON array, once at least one is
#                          there and none has come for 0.5 s (5 s at most)
#   egm_lines_ok TEXT LINES PYEXPR
#                          one TAP line: PYEXPR over `ls` (the array) holds
#   egm_err_mark / egm_err_since
#                          egressd's stderr from the mark on
#   egm_rss PID / egm_fds PID
#                          VmRSS in KiB / number of open descriptors

EGM_UNDICI_VERSION=7.30.2

egm_bail() {
    ok 1 "$1"
    tap_end
    exit 1
}

# egm_npm_install DIR SPEC...: npm_install_pinned (tests/npm.sh).
. "$TOP/tests/npm.sh"
egm_npm_install() { npm_install_pinned "$@"; }

# egm_install_outside FN: before egd_netns, outside the namespace (the npm
# registry is reachable only there), run FN once, its output in a log; the
# outcome goes to the run inside (EGM_INSTALL_OK, EGM_INSTALL_LOG).
egm_install_outside() {
    [ -z "${EGD_IN_NETNS:-}" ] || return 0
    EGM_INSTALL_LOG=$(mktemp "${TMPDIR:-/tmp}/egd-install.XXXXXX")
    EGM_INSTALL_OK=0
    "$1" >"$EGM_INSTALL_LOG" 2>&1 && EGM_INSTALL_OK=1
    export EGM_INSTALL_LOG EGM_INSTALL_OK
}

# egm_install_check TEXT WHY: after egd_setup, the install's outcome as one
# TAP line TEXT; when it failed, its log, then egm_bail WHY.
egm_install_check() {
    [ -f "${EGM_INSTALL_LOG:-}" ] && mv "$EGM_INSTALL_LOG" "$T/install.log"
    if [ "${EGM_INSTALL_OK:-0}" = 1 ]; then
        ok 0 "$1"
        return 0
    fi
    ok 1 "$1"
    diag_file "$T/install.log"
    egm_bail "$2"
}

# egm_node_setup: the pinned undici in $BUILD_DIR/e2e-node.
egm_node_setup() {
    egm_npm_install "$BUILD_DIR/e2e-node" "undici@$EGM_UNDICI_VERSION" &&
        [ -f "$BUILD_DIR/e2e-node/node_modules/undici/package.json" ]
}
egm_node_modules() { echo "$BUILD_DIR/e2e-node/node_modules"; }

EGM_SHARED=${EGM_SHARED:-$(dirname "$BUILD_DIR")}

# The API SDKs, pinned (openai 7 wants Node 22; 6.x runs on Debian's 20).
EGM_SDK_PACKAGES=(@anthropic-ai/sdk@1.15.0 openai@6.49.0)
egm_sdk_setup() {
    egm_npm_install "$EGM_SHARED/e2e-sdk" "${EGM_SDK_PACKAGES[@]}" &&
        [ -f "$EGM_SHARED/e2e-sdk/node_modules/@anthropic-ai/sdk/package.json" ] &&
        [ -f "$EGM_SHARED/e2e-sdk/node_modules/openai/package.json" ]
}
egm_sdk_modules() { echo "$EGM_SHARED/e2e-sdk/node_modules"; }

# The coding agents' CLIs, pinned: each is a native program that npm
# installs from a per-platform optional package.
EGM_AGENT_PACKAGES=(@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0)
egm_agents_setup() {
    egm_npm_install "$EGM_SHARED/e2e-agents" "${EGM_AGENT_PACKAGES[@]}" &&
        [ -x "$EGM_SHARED/e2e-agents/node_modules/.bin/claude" ] &&
        [ -x "$EGM_SHARED/e2e-agents/node_modules/.bin/codex" ]
}
egm_agents_modules() { echo "$EGM_SHARED/e2e-agents/node_modules"; }

# Gemini CLI, pinned, in a directory of its own (a JavaScript bundle; the
# two above are not installed again for it).
EGM_GEMINI_PACKAGE=@google/gemini-cli@0.61.0
egm_gemini_setup() {
    egm_npm_install "$EGM_SHARED/e2e-gemini" "$EGM_GEMINI_PACKAGE" &&
        [ -x "$EGM_SHARED/e2e-gemini/node_modules/.bin/gemini" ]
}
egm_gemini_modules() { echo "$EGM_SHARED/e2e-gemini/node_modules"; }

# egm_server LOG CMD...: CMD in the background, output to LOG; wait (10 s)
# for a line "ready" in LOG.
egm_server() {
    local log=$1 i
    shift
    "$@" >"$log" 2>&1 &
    EGD_PIDS+=($!)
    for ((i = 0; i < 200; i++)); do
        grep -q '^ready' "$log" 2>/dev/null && return 0
        kill -0 "${EGD_PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "# did not start: $*" >&2
    sed 's/^/#   /' "$log" >&2
    return 1
}

# egm_toolsrv NAME ROOT [OPTION...]: toolsrv.py for NAME on its hosts-file
# address, port 443 (HTTPS with NAME's certificate); requests in
# $T/toolsrv-NAME.log.
egm_toolsrv() {
    local name=$1 root=$2 addr
    shift 2
    addr=$(egd_addr "$name")
    [ -n "$addr" ] || { echo "# egm_toolsrv: $name is not in the hosts file" >&2; return 1; }
    egd_cert "$name" || return 1
    egm_server "$T/toolsrv-$name.out" python3 -u "$EGD_DIR/toolsrv.py" --listen "$addr:443" \
        --cert "$T/certs/$name.pem" --key "$T/certs/$name.key" --root "$root" \
        --log "$T/toolsrv-$name.log" "$@"
}

egm_log_lines() {
    python3 - "$T/access.log" "$EGD_LOG_MARK" "$1" <<'EOF'
import json, sys, time
path, mark, expr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
end = time.monotonic() + 5
seen, quiet_since = -1, time.monotonic()
while True:
    try:
        done = open(path, encoding="utf-8", errors="replace").read().split("\n")[:-1]
    except FileNotFoundError:
        done = []
    hits = []
    for raw in done[mark:]:
        try:
            l = json.loads(raw)
            if eval(expr):
                hits.append(l)
        except Exception:
            pass
    now = time.monotonic()
    if len(hits) != seen:
        seen, quiet_since = len(hits), now
    if (hits and now - quiet_since >= 0.5) or now >= end:
        print(json.dumps(hits))
        sys.exit(0 if hits else 1)
    time.sleep(0.05)
EOF
}

# egm_lines_ok TEXT LINES PYEXPR: one TAP line for PYEXPR over `ls`, the
# parsed JSON array LINES; the lines are shown when it fails.
egm_lines_ok() {
    local rc=0
    python3 -c '
import json, sys
ls = json.loads(sys.argv[1] or "[]")
sys.exit(0 if eval(sys.argv[2]) else 1)' "$2" "$3" >/dev/null 2>&1 || rc=1
    ok "$rc" "$1"
    if [ "$rc" -ne 0 ]; then
        diag "wanted: $3"
        python3 -c '
import json, sys
ls = json.loads(sys.argv[1] or "[]")
print("# lines: %d" % len(ls))
for l in ls[:6]:
    print("#   " + json.dumps(l))' "$2" 2>/dev/null || diag "lines: ${2:-(none)}"
    fi
}

EGM_ERR_MARK=0
egm_err_mark() { EGM_ERR_MARK=$(stat -c %s "$T/egressd.err" 2>/dev/null || echo 0); }
egm_err_since() { tail -c +"$((EGM_ERR_MARK + 1))" "$T/egressd.err" 2>/dev/null; }

egm_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
egm_fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

# egm_secret_sandbox CA FIELDS SECRET...: egressd started with secret-dir
# $S, the sandbox sb1 ($SB, the test policy; FIELDS: more of its binding as
# JSON members, e.g. '"owner":"alice",' or '') bound to the secrets
# SECRET...; its credentials (GET credentials) in $T/cred.json, its CA in
# the file CA.  Bails out when any of it fails.
egm_secret_sandbox() {
    local ca=$1 fields=$2 list
    shift 2
    list=$(printf '"%s",' "$@")
    egd_start "secret-dir $S" "upstream-ca-file $EGD_CA" || egm_bail "egressd starts with secret-dir"
    egd_put sb1 "{\"id\":\"sb1\",$fields\"addresses\":[\"$SB\"],\"policy\":\"test\",\"secrets\":[${list%,}]}" \
        >/dev/null || egm_bail "PUT sandbox sb1 with $*"
    egd_admin GET /v1/sandboxes/sb1/credentials >"$T/cred.json" || egm_bail "GET credentials"
    python3 -c 'import json, sys; open(sys.argv[2], "w").write(json.load(open(sys.argv[1]))["ca"])' \
        "$T/cred.json" "$ca" || egm_bail "the credentials hold the sandbox CA"
}

# egm_placeholder SECRET: its placeholder (in $T/cred.json).
egm_placeholder() {
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["placeholders"][sys.argv[2]])' \
        "$T/cred.json" "$1"
}
