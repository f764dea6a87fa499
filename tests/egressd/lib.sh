# tests/egressd/lib.sh - shared set-up of egressd's end-to-end scripts.
#
# Source from bash; it needs BUILD_DIR and TOP (DATA_DIR, default
# $TOP/tests/data, or CLIENTHELLO_DIR names another copy of the test data).
# A script starts with
#
#   . "$(dirname "$0")/lib.sh"
#   egd_netns "$@"          # re-runs the script inside `unshare -n`, lo up
#   egd_setup               # $T, test CA, hosts file, policies/test.allow
#   egd_origin a.test ...   # the origins (tests/egressd/origin.py)
#   egd_start [LINE...]     # egressd with extra config lines
#
# and ends with `egd_finish` (stops egressd: exit status and sanitizer
# checks) and `tap_end`.
#
#   egd_netns "$@"         run the calling .t in a new network namespace
#   egd_setup              temp dir $T (the EXIT trap stops every process
#                          started here and removes it), CA $EGD_CA, hosts
#                          file, policies/test.allow, a scrubbed environment
#   egd_cert NAME          leaf certificate $T/certs/NAME.pem (+ .key)
#   egd_host ADDR NAME     one more hosts-file line
#   egd_addr NAME          NAME's first address in the hosts file
#   egd_allow LINE...      more lines in policies/test.allow
#   egd_rule WORD          "test.allow:N" of the first rule line whose
#                          first word is WORD ("deny WORD" for deny lines)
#   egd_origin [--banner ADDR:PORT] NAME...
#                          origin.py on the names' addresses: HTTPS on
#                          $EGD_HTTPS_PORT, HTTP on $EGD_HTTP_PORT
#   origin_log_count PYEXPR   how many origin log lines (`o`, the parsed
#                          JSON: event connect|hello|tls_fail|request|banner)
#                          PYEXPR holds for
#   egd_start [LINE...]    write $T/egressd.conf, start egressd, wait for /healthz
#   egd_stop               SIGTERM, wait; returns egressd's exit status
#   egd_finish             egd_stop as two TAP lines (exit 0, no sanitizer report)
#   egd_no_sanitizer_report [WHAT]   one TAP line: egressd.err holds no sanitizer report
#   egd_put ID JSON        PUT /v1/sandboxes/ID on the admin socket
#   egd_admin METHOD PATH [JSON]   any admin call; prints the body
#   egd_log_mark           later egd_log_* calls look only at lines after now
#   egd_log_wait PYEXPR    poll the access log (5 s) for a line where PYEXPR
#                          over `l` (the parsed JSON) is true; print it
#   egd_log_count PYEXPR   how many lines after the mark match, now
#   egd_json LINE PYEXPR   PYEXPR over `l` = the parsed LINE
#   ok_json TEXT LINE PYEXPR   one TAP line: PYEXPR over the line is true
#                          (the line is shown when it is not)
#   egd_log_ok TEXT MATCH COND   egd_log_wait MATCH, then ok_json on COND
#   check_resp TEXT FILE PYEXPR  one TAP line for PYEXPR over the HTTP
#                          responses a rawclient.py run wrote to FILE
#   egd_metric 'NAME{k="v",...}'  sum of the series of NAME whose labels
#                          include the given ones (exit 1 if none)
#   egd_curl / egd_wget / egd_python   the clients, with the test CA and
#                          with no proxy, CA or config from the environment
#                          (leading NAME=VALUE arguments are set for them)
#   egd_env CMD...         CMD in that scrubbed environment
#   raw ARGS...            tests/egressd/rawclient.py ARGS...
#   py ARGS...             python3 for the helpers (quick to start)
#   ok STATUS TEXT, check TEXT CMD..., diag TEXT, bail TEXT, tap_end (tests/tap.sh)

set -u
: "${BUILD_DIR:?BUILD_DIR is not set}" "${TOP:?TOP is not set}"
DATA_DIR=${DATA_DIR:-$TOP/tests/data}
EGD_BIN=$BUILD_DIR/proxy/egressd
EGD_DIR=$TOP/tests/egressd
EGD_HELLOS=${CLIENTHELLO_DIR:-$DATA_DIR/clienthello}
EGD_HTTPS_PORT=4443
EGD_HTTP_PORT=8000
EGD_PROXY=127.0.0.1:3128
EGD_TLS=127.0.0.1:8443
EGD_PLAIN=127.0.0.1:8080
EGD_METRICS=127.0.0.1:9464
# The TLS alert egressd sends before closing a denied TLS stream:
# alert record, TLS 1.2, length 2, fatal(2) access_denied(49).
EGD_ALERT=15030300020231
# The helpers' python: the interpreter itself (not a version manager's
# wrapper script) and -S (no site packages: they only slow the start down).
EGD_PY=$(python3 -S -c 'import sys; print(sys.executable)')
py() { "$EGD_PY" -S "$@"; }
EGD_PIDS=()
EGD_PID=
EGD_LOG_MARK=0

. "$TOP/tests/tap.sh"

# egd_netns "$@": re-execute the calling script inside a network namespace of
# its own (nothing it starts can reach or be reached from outside), with lo up.
egd_netns() {
    if [ -z "${EGD_IN_NETNS:-}" ]; then
        export EGD_IN_NETNS=1
        exec unshare -n -- bash "$0" "$@"
    fi
    ip link set lo up || {
        echo "not ok 1 - ip link set lo up in the new namespace"
        echo "1..1"
        exit 1
    }
}

# The names the tests use, and their addresses.  127.0.0.16/28 is opened by
# allow-range; the others resolve into denied ranges.
EGD_HOSTS='127.0.0.16 a.test
127.0.0.17 b.test
127.0.0.18 denied.test
127.0.0.19 blocked.test
127.0.0.20 ssh.test
127.0.0.21 extra.test
127.0.0.1 loop.test
127.0.0.99 high.test
10.1.2.3 ten.test
169.254.169.254 meta.test
::ffff:127.0.0.1 mapped.test'

egd_cleanup() {
    local p
    if [ -n "$EGD_PID" ]; then
        kill -TERM "$EGD_PID" 2>/dev/null
        wait "$EGD_PID" 2>/dev/null
        EGD_PID=
    fi
    for p in "${EGD_PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    EGD_PIDS=()
    [ -n "${T:-}" ] && [ -d "$T" ] && [ -z "${EGD_KEEP:-}" ] && rm -rf "$T"
}

# The environment of every client: no proxy, CA or config from this machine.
EGD_SCRUB=(-u CURL_CA_BUNDLE -u SSL_CERT_FILE -u SSL_CERT_DIR -u GIT_SSL_CAINFO
    -u NODE_EXTRA_CA_CERTS -u REQUESTS_CA_BUNDLE -u npm_config_cafile -u NPM_CONFIG_CAFILE
    -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u all_proxy -u ALL_PROXY
    -u ftp_proxy -u no_proxy -u NO_PROXY -u CURL_HOME -u WGETRC -u SSLKEYLOGFILE)

egd_setup() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/egd-test.XXXXXX")
    trap egd_cleanup EXIT
    unset CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR GIT_SSL_CAINFO NODE_EXTRA_CA_CERTS \
        REQUESTS_CA_BUNDLE npm_config_cafile NPM_CONFIG_CAFILE http_proxy https_proxy \
        HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY ftp_proxy no_proxy NO_PROXY CURL_HOME WGETRC
    export HOME=$T/home
    mkdir -p "$T/certs" "$T/policies" "$T/state" "$HOME"
    EGD_CA=$T/certs/ca.pem
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj '/CN=egressd test CA' -keyout "$T/certs/ca.key" -out "$EGD_CA" \
        -addext 'basicConstraints=critical,CA:TRUE' \
        -addext 'keyUsage=critical,keyCertSign,cRLSign' >"$T/certs/openssl.log" 2>&1 || {
        echo "# openssl could not make the test CA" >&2
        cat "$T/certs/openssl.log" >&2
        return 1
    }
    printf '%s\n' "$EGD_HOSTS" >"$T/hosts"
    cat >"$T/policies/test.allow" <<'EOF'
# the preset of egressd's end-to-end tests
a.test:4443,8000
b.test:4443,8000
ssh.test:22 raw
blocked.test:4443,8000
deny blocked.test:*
loop.test:4443,8000
high.test:4443,8000
ten.test:4443,8000
meta.test:4443,8000
mapped.test:4443,8000
EOF
}

# egd_cert NAME: a leaf certificate for NAME (SAN DNS:NAME), signed by the test CA.
egd_cert() {
    local name=$1 c=$T/certs
    [ -f "$c/$name.pem" ] && return 0
    printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' \
        "$name" >"$c/$name.ext"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
        -keyout "$c/$name.key" -out "$c/$name.csr" >>"$c/openssl.log" 2>&1 &&
        openssl x509 -req -in "$c/$name.csr" -CA "$EGD_CA" -CAkey "$c/ca.key" -CAcreateserial \
            -days 2 -extfile "$c/$name.ext" -out "$c/$name.pem" >>"$c/openssl.log" 2>&1 || {
        echo "# openssl could not make a certificate for $name" >&2
        tail -n 5 "$c/openssl.log" >&2
        return 1
    }
}

egd_host() { printf '%s %s\n' "$1" "$2" >>"$T/hosts"; }
egd_allow() { printf '%s\n' "$@" >>"$T/policies/test.allow"; }

# egd_rule WORD: "test.allow:N" for the first line "WORD..." (or "deny WORD").
egd_rule() {
    local n
    n=$(awk -v w="$*" '{ sub(/#.*/, ""); if (NF == 0) next
            k = $1; if (k == "deny") k = "deny " $2
            sub(/:.*/, "", k)
            if (k == w) { print NR; exit } }' "$T/policies/test.allow")
    [ -n "$n" ] || { echo "# egd_rule: no line for '$*'" >&2; return 1; }
    echo "test.allow:$n"
}

# egd_addr NAME: the first address of NAME in the hosts file.
egd_addr() { awk -v n="$1" '{ for (i = 2; i <= NF; i++) if ($i == n) { print $1; exit } }' "$T/hosts"; }

# egd_origin [--banner ADDR:PORT] NAME...: start origin.py for NAME... (on each
# name's hosts-file address); waits until it listens.
egd_origin() {
    local opts=() sites=() name addr i log=$T/origin.$((${#EGD_PIDS[@]} + 1)).out
    while [ $# -gt 0 ]; do
        case $1 in
            --*) opts+=("$1" "$2"); shift 2 ;;
            *)
                name=$1
                shift
                addr=$(egd_addr "$name")
                [ -n "$addr" ] || { echo "# egd_origin: $name is not in the hosts file" >&2; return 1; }
                egd_cert "$name" || return 1
                sites+=("$name=$addr")
                ;;
        esac
    done
    # Python itself in the background (not through the py function, which
    # would leave a subshell between $! and python, and python behind).
    "$EGD_PY" -S -u "$EGD_DIR/origin.py" --log "$T/origin.log" --certs "$T/certs" \
        --https-port "$EGD_HTTPS_PORT" --http-port "$EGD_HTTP_PORT" "${opts[@]}" "${sites[@]}" \
        >"$log" 2>&1 &
    EGD_PIDS+=($!)
    for ((i = 0; i < 100; i++)); do
        grep -q '^ready' "$log" 2>/dev/null && return 0
        kill -0 "${EGD_PIDS[-1]}" 2>/dev/null || break
        sleep 0.05
    done
    echo "# origin.py did not start" >&2
    cat "$log" >&2
    return 1
}

# origin_log_count PYEXPR: lines of the origin log (JSON) where PYEXPR over `o` holds.
origin_log_count() {
    py - "$T/origin.log" "$1" <<'EOF'
import json, sys
n = 0
try:
    lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
except FileNotFoundError:
    lines = []
for line in lines:
    try:
        o = json.loads(line)
    except ValueError:
        continue
    try:
        if eval(sys.argv[2]):
            n += 1
    except Exception:
        pass
print(n)
EOF
}

egd_write_config() {
    {
        cat <<EOF
# egressd end-to-end test configuration
listen ${EGD_PROXY}
transparent-tls ${EGD_TLS} upstream-port ${EGD_HTTPS_PORT}
transparent-http ${EGD_PLAIN}
admin unix:$T/admin.sock
metrics ${EGD_METRICS}
workers 2
hosts-file hosts
policy-dir policies
default-policy test
state-dir state
access-log access.log
allow-range 127.0.0.16/28
EOF
        [ $# -gt 0 ] && printf '%s\n' "$@"
    } >"$T/egressd.conf"
}

# egd_start [LINE...]: write the config (plus LINE...), start egressd, wait
# until /healthz answers "ok" (10 s: the sanitizer build starts slowly).
egd_start() {
    local i
    if [ ! -x "$EGD_BIN" ]; then
        echo "# $EGD_BIN is not built" >&2
        return 1
    fi
    egd_write_config "$@"
    "$EGD_BIN" -c "$T/egressd.conf" 2>>"$T/egressd.err" &
    EGD_PID=$!
    for ((i = 0; i < 200; i++)); do
        if [ "$(curl -q -s --noproxy '*' -m 1 "http://$EGD_METRICS/healthz" 2>/dev/null)" = ok ]; then
            return 0
        fi
        if ! kill -0 "$EGD_PID" 2>/dev/null; then
            wait "$EGD_PID"
            echo "# egressd exited with status $? before it was ready:" >&2
            sed 's/^/#   /' "$T/egressd.err" >&2
            EGD_PID=
            return 1
        fi
        sleep 0.05
    done
    echo "# egressd did not answer /healthz within 10 s:" >&2
    sed 's/^/#   /' "$T/egressd.err" >&2
    return 1
}

# egd_stop: SIGTERM, wait (up to 15 s); returns egressd's exit status.
egd_stop() {
    local rc i
    [ -n "$EGD_PID" ] || return 0
    kill -TERM "$EGD_PID" 2>/dev/null
    for ((i = 0; i < 150; i++)); do
        kill -0 "$EGD_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$EGD_PID" 2>/dev/null; then
        echo "# egressd still running 15 s after SIGTERM; killed" >&2
        kill -KILL "$EGD_PID"
    fi
    wait "$EGD_PID"
    rc=$?
    EGD_PID=
    return $rc
}

# egd_finish: stop egressd; TAP: it exits 0, and its stderr holds no
# sanitizer report.
egd_finish() {
    local rc=0
    egd_stop || rc=$?
    ok "$rc" "egressd exits 0 on SIGTERM (status $rc)"
    egd_no_sanitizer_report
}

# egd_no_sanitizer_report [WHAT]: TAP: $T/egressd.err holds no ASan, LSan
# or UBSan report (the first one shown when it does).
egd_no_sanitizer_report() {
    local what=${1:-"egressd's stderr holds no sanitizer report"}
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)' "$T/egressd.err"; then
        ok 1 "$what"
        grep -E -A 12 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$T/egressd.err" | head -n 40 | sed 's/^/#   /'
    else
        ok 0 "$what"
    fi
}

# egd_admin METHOD PATH [JSON]: one admin API call; prints the body; fails
# unless the status is 2xx.
egd_admin() {
    local method=$1 path=$2 data=${3-} code
    local args=(-q -sS --noproxy '*' -m 5 --unix-socket "$T/admin.sock" -X "$method"
        -o "$T/admin.body" -w '%{http_code}')
    [ $# -ge 3 ] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
    code=$(curl "${args[@]}" "http://egressd$path") || return 1
    cat "$T/admin.body"
    case $code in 2??) return 0 ;; esac
    echo "# admin $method $path: status $code" >&2
    return 1
}
egd_put() { egd_admin PUT "/v1/sandboxes/$1" "$2"; }

egd_log_mark() {
    EGD_LOG_MARK=$(wc -l <"$T/access.log" 2>/dev/null || echo 0)
    EGD_LOG_MARK=${EGD_LOG_MARK// /}
}

# The python that reads the access log: argv = file, mark, expr, mode, wait.
EGD_LOG_PY='
import json, sys, time
import os
path, mark, expr, mode, wait = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
pid = int(sys.argv[6] or 0)
end = time.monotonic() + wait
while True:
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    except FileNotFoundError:
        lines = []
    done = lines[:-1]  # a line without its newline yet is not written
    hits = []
    for raw in done[mark:]:
        try:
            l = json.loads(raw)
        except ValueError:
            continue
        try:
            if eval(expr):
                hits.append(raw)
        except Exception:
            pass
    if mode == "count":
        print(len(hits))
        sys.exit(0)
    if hits:
        print(hits[0])
        sys.exit(0)
    gone = False
    if pid:
        try:
            os.kill(pid, 0)
        except OSError:
            gone = True  # egressd is not running: no line will come
    if time.monotonic() >= end or gone:
        sys.stderr.write("# no access log line where %s; the last lines:\n" % expr)
        for raw in done[max(mark, len(done) - 4):]:
            sys.stderr.write("#   %s\n" % raw)
        sys.exit(1)
    time.sleep(0.05)
'

egd_log_wait() { py -c "$EGD_LOG_PY" "$T/access.log" "$EGD_LOG_MARK" "$1" first "${2:-5}" "$EGD_PID"; }
egd_log_count() { py -c "$EGD_LOG_PY" "$T/access.log" "$EGD_LOG_MARK" "$1" count 0 "$EGD_PID"; }

# egd_json LINE PYEXPR: evaluate PYEXPR with `l` = the parsed LINE; exit 1
# when it is false (or the line is not JSON).
egd_json() {
    py -c '
import json, sys
try:
    l = json.loads(sys.argv[1])
except ValueError:
    sys.exit(2)
v = eval(sys.argv[2])
print(v if not isinstance(v, (dict, list)) else json.dumps(v))
sys.exit(0 if v else 1)' "$1" "$2"
}

# ok_json TEXT LINE PYEXPR: one TAP line for PYEXPR over the log line.
ok_json() {
    local rc=0
    egd_json "$2" "$3" >/dev/null 2>&1 || rc=1
    ok "$rc" "$1"
    if [ "$rc" -ne 0 ]; then
        diag "wanted: $3"
        diag "line:   ${2:-(no line)}"
    fi
}

# egd_log_ok TEXT MATCH COND: wait for the first line after the mark where
# MATCH holds, then one TAP line for COND over it.
egd_log_ok() {
    local line
    line=$(egd_log_wait "$2")
    ok_json "$1" "$line" "$3"
}

# check_resp TEXT FILE PYEXPR: one TAP line for PYEXPR over the responses in
# FILE (rawclient.py parse: `r`, `rest`); shows the start of FILE if false.
check_resp() {
    local rc=0
    raw parse "$2" "$3" >/dev/null 2>&1 || rc=1
    ok "$rc" "$1"
    if [ "$rc" -ne 0 ]; then
        diag "wanted: $3"
        diag "got ($(wc -c <"$2" 2>/dev/null || echo no) bytes):"
        head -c 400 "$2" 2>/dev/null | cat -v | sed 's/^/#   /'
        echo
    fi
}

# egd_metric 'NAME{k="v",...}': the sum of NAME's series whose labels
# include the given ones.
egd_metric() {
    curl -q -s --noproxy '*' -m 5 "http://$EGD_METRICS/metrics" | py -c '
import re, sys
want = sys.argv[1]
m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?", want)
lab = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"")
name, labels = m.group(1), dict(lab.findall(m.group(2) or ""))
total, seen = 0.0, False
for line in sys.stdin:
    if line.startswith("#") or not line.strip():
        continue
    s = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)", line)
    if not s or s.group(1) != name:
        continue
    have = dict(lab.findall(s.group(2) or ""))
    if all(have.get(k) == v for k, v in labels.items()):
        total += float(s.group(3))
        seen = True
if not seen:
    sys.exit(1)
print(int(total) if total == int(total) else total)' "$1"
}

# The clients: the test CA, nothing from the environment or config files.
# Leading NAME=VALUE arguments are set in the client's environment (after
# the scrub), e.g. `egd_wget https_proxy=http://$EGD_PROXY -O - URL`.
egd_env() { env "${EGD_SCRUB[@]}" "$@"; }
egd_curl() {
    local vars=()
    while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do vars+=("$1"); shift; done
    env "${EGD_SCRUB[@]}" "${vars[@]}" curl -q -sS --cacert "$EGD_CA" -m 10 "$@"
}
egd_wget() {
    local vars=()
    while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do vars+=("$1"); shift; done
    env "${EGD_SCRUB[@]}" "${vars[@]}" wget --no-config --ca-certificate="$EGD_CA" \
        --timeout=10 --tries=1 "$@"
}
egd_python() {
    local vars=()
    while [ $# -gt 0 ] && [[ $1 == [A-Za-z_]*=* ]]; do vars+=("$1"); shift; done
    env "${EGD_SCRUB[@]}" "${vars[@]}" python3 "$@"
}
raw() { py "$EGD_DIR/rawclient.py" "$@"; }
