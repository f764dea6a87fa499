#!/usr/bin/env bash
# tests/mcp/http.t - the Streamable HTTP transport of the MCP server: the
# transport's rules checked with curl (bearer token, Origin and Host,
# sessions, protocol version, methods, caps and deadlines), event streams
# with raw sockets (a POST's notifications before its answer, in chunks on a
# kept-alive connection; the session's GET stream with the notifications of
# other sessions' changes), then the official MCP SDK client over HTTP and
# over stdio, calling every tool, and elicitation with the SDK client's
# handler (tests/mcp/sdk-elicit.mjs) over both.
#
# Runs the MCP server's protocol layer and transports over the test-only
# operations of tests/unit/mcp/fake_ops.c (mcp_fake_server), so it needs no
# Proxmox; tests/mcp/sandboxctl.t runs the real sandboxctl the same way.
set -u
: "${BUILD_DIR:?}" "${TOP:?}"
. "$TOP/tests/mcp/lib.sh"

server=$BUILD_DIR/tests/unit/mcp/mcp_fake_server
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcp-http.XXXXXX")
pid= pid2=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    [ -n "$pid2" ] && kill -KILL "$pid2" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

if [ ! -x "$server" ]; then
    tap_ok 1 "mcp_fake_server is built ($server)"
    tap_stop
fi
token=0123456789abcdef-test-token
printf '%s\n' "$token" >"$tmp/token"
chmod 600 "$tmp/token"
"$server" --http 127.0.0.1:0 --port-file "$tmp/port" --token-file "$tmp/token" \
    --timeout-ms 1500 2>"$tmp/server.log" &
pid=$!
if ! mcp_wait_file "$tmp/port" "$pid"; then
    tap_ok 1 "the HTTP server starts"
    cat "$tmp/server.log"
    tap_stop
fi
port=$(cat "$tmp/port")
url=http://127.0.0.1:$port/mcp

# req NAME [curl args...]: POST-or-whatever to $url; prints the status code;
# headers in $tmp/NAME.h, body in $tmp/NAME.b.
req() {
    local name=$1
    shift
    curl -sS --noproxy '*' -o "$tmp/$name.b" -D "$tmp/$name.h" -w '%{http_code}' \
        --max-time 10 "$@"
}
header() { # header NAME FIELD: the value of FIELD in $tmp/NAME.h
    sed -n "s/^$2: *//Ip" "$tmp/$1.h" | tr -d '\r' | head -n 1
}
auth=(-H "Authorization: Bearer $token")
json=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
list='{"jsonrpc":"2.0","id":2,"method":"tools/list"}'

# Authentication and DNS-rebinding protection.
code=$(req noauth "${json[@]}" -d "$init" "$url")
[ "$code" = 401 ] && header noauth WWW-Authenticate | grep -q '^Bearer'
tap_ok $? "no Authorization: 401 with WWW-Authenticate: Bearer (got $code)"
code=$(req badauth "${json[@]}" -H "Authorization: Bearer ${token}x" -d "$init" "$url")
[ "$code" = 401 ] && header badauth WWW-Authenticate | grep -q 'invalid_token'
tap_ok $? "a wrong token: 401, error=\"invalid_token\" (got $code)"
code=$(req prefix "${json[@]}" -H "Authorization: Bearer ${token%?}" -d "$init" "$url")
[ "$code" = 401 ]
tap_ok $? "the token less its last byte: 401 (got $code)"
code=$(req basic "${json[@]}" -H "Authorization: Basic $(printf 'x:%s' "$token" | base64 -w0)" -d "$init" "$url")
[ "$code" = 401 ]
tap_ok $? "the token in Basic auth: 401 (got $code)"
code=$(req evil "${auth[@]}" "${json[@]}" -H 'Origin: http://evil.example' -d "$init" "$url")
[ "$code" = 403 ]
tap_ok $? "Origin http://evil.example with a good token: 403 (got $code)"
code=$(req evilport "${auth[@]}" "${json[@]}" -H 'Origin: http://localhost.evil.example:80' -d "$init" "$url")
[ "$code" = 403 ]
tap_ok $? "Origin http://localhost.evil.example:80: 403 (got $code)"
code=$(req nullorigin "${auth[@]}" "${json[@]}" -H 'Origin: null' -d "$init" "$url")
[ "$code" = 403 ]
tap_ok $? "Origin null: 403 (got $code)"
code=$(req evilhost "${auth[@]}" "${json[@]}" -H 'Host: evil.example.com' -d "$init" "$url")
[ "$code" = 403 ]
tap_ok $? "Host evil.example.com (DNS rebinding) on a loopback listener: 403 (got $code)"
code=$(req goodorigin "${auth[@]}" "${json[@]}" -H "Origin: http://localhost:$port" -d "$init" "$url")
[ "$code" = 200 ]
tap_ok $? "Origin http://localhost:PORT: accepted (got $code)"
code=$(req v6origin "${auth[@]}" "${json[@]}" -H "Origin: http://[::1]:$port" -d "$init" "$url")
[ "$code" = 200 ]
tap_ok $? "Origin http://[::1]:PORT: accepted (got $code)"

# Sessions.
code=$(req init "${auth[@]}" "${json[@]}" -d "$init" "$url")
sid=$(header init Mcp-Session-Id)
[ "$code" = 200 ] && [ ${#sid} -eq 32 ] && header init Content-Type | grep -q '^application/json' &&
    grep -q '"protocolVersion":"2025-11-25"' "$tmp/init.b"
tap_ok $? "initialize: 200 application/json, 2025-11-25, a 128-bit Mcp-Session-Id (got $code '$sid')"
code=$(req init2 "${auth[@]}" "${json[@]}" -d "$init" "$url")
sid2=$(header init2 Mcp-Session-Id)
[ "$code" = 200 ] && [ -n "$sid2" ] && [ "$sid2" != "$sid" ]
tap_ok $? "a second initialize opens a second session with another id"
code=$(req nosid "${auth[@]}" "${json[@]}" -d "$list" "$url")
[ "$code" = 400 ]
tap_ok $? "tools/list without Mcp-Session-Id: 400 (got $code)"
code=$(req badsid "${auth[@]}" "${json[@]}" -H 'Mcp-Session-Id: 00000000000000000000000000000000' -d "$list" "$url")
[ "$code" = 404 ]
tap_ok $? "an unknown Mcp-Session-Id: 404 (got $code)"
s=(-H "Mcp-Session-Id: $sid")
code=$(req notif "${auth[@]}" "${json[@]}" "${s[@]}" -H 'MCP-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url")
[ "$code" = 202 ] && [ ! -s "$tmp/notif.b" ]
tap_ok $? "notifications/initialized: 202 with no body (got $code)"
code=$(req list "${auth[@]}" "${json[@]}" "${s[@]}" -H 'MCP-Protocol-Version: 2025-11-25' -d "$list" "$url")
[ "$code" = 200 ] && python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
assert r["id"] == 2 and len(r["result"]["tools"]) == 10' "$tmp/list.b"
tap_ok $? "tools/list in the session: 200 with 10 tools (got $code)"
code=$(req ver "${auth[@]}" "${json[@]}" "${s[@]}" -H 'MCP-Protocol-Version: 1999-01-01' -d "$list" "$url")
[ "$code" = 400 ]
tap_ok $? "an unsupported MCP-Protocol-Version: 400 (got $code)"
code=$(req ver2 "${auth[@]}" "${json[@]}" "${s[@]}" -H 'MCP-Protocol-Version: 2025-06-18' -d "$list" "$url")
[ "$code" = 200 ]
tap_ok $? "another supported version than the session's (2025-06-18): accepted, the spec refuses only unsupported ones (got $code)"
code=$(req nover "${auth[@]}" "${json[@]}" "${s[@]}" -d "$list" "$url")
[ "$code" = 200 ]
tap_ok $? "no MCP-Protocol-Version header (older clients): accepted (got $code)"
code=$(req call "${auth[@]}" "${json[@]}" "${s[@]}" \
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_server","arguments":{"name":"c1","size":"small","policy":"open"}}}' "$url")
[ "$code" = 200 ] && grep -q '"isError":true' "$tmp/call.b" && grep -q 'not a preset permitted' "$tmp/call.b"
tap_ok $? "create_server with a preset outside mcp-presets: 200 carrying a tool error (got $code)"
code=$(req unknown "${auth[@]}" "${json[@]}" "${s[@]}" -d '{"jsonrpc":"2.0","id":4,"method":"nope"}' "$url")
[ "$code" = 200 ] && grep -q '"code":-32601' "$tmp/unknown.b"
tap_ok $? "an unknown method: 200 carrying -32601 (got $code)"
code=$(req batch "${auth[@]}" "${json[@]}" "${s[@]}" -d "[$list]" "$url")
[ "$code" = 400 ] && grep -q '"code":-32600' "$tmp/batch.b"
tap_ok $? "a JSON-RPC batch: 400 carrying -32600 (got $code)"
code=$(req parse "${auth[@]}" "${json[@]}" "${s[@]}" -d '{"jsonrpc":' "$url")
[ "$code" = 400 ] && grep -q '"code":-32700' "$tmp/parse.b"
tap_ok $? "malformed JSON: 400 carrying -32700 (got $code)"
code=$(req ctype "${auth[@]}" -H 'Content-Type: text/plain' "${s[@]}" -d "$list" "$url")
[ "$code" = 415 ]
tap_ok $? "Content-Type text/plain: 415 (got $code)"
code=$(req accept "${auth[@]}" -H 'Content-Type: application/json' -H 'Accept: text/html' "${s[@]}" -d "$list" "$url")
[ "$code" = 406 ]
tap_ok $? "Accept without application/json: 406 (got $code)"
code=$(req get "${auth[@]}" "${s[@]}" "$url")
[ "$code" = 406 ]
tap_ok $? "GET /mcp without text/event-stream in Accept: 406 (got $code)"
code=$(req getnosid "${auth[@]}" -H 'Accept: text/event-stream' "$url")
[ "$code" = 400 ]
tap_ok $? "GET /mcp without Mcp-Session-Id: 400 (got $code)"
code=$(req getbadsid "${auth[@]}" -H 'Accept: text/event-stream' \
    -H 'Mcp-Session-Id: 00000000000000000000000000000000' "$url")
[ "$code" = 404 ]
tap_ok $? "GET /mcp with an unknown session: 404 (got $code)"
code=$(req put "${auth[@]}" "${s[@]}" -X PUT "$url")
[ "$code" = 405 ] && header put Allow | grep -q 'GET, POST, DELETE'
tap_ok $? "PUT /mcp: 405 with Allow: GET, POST, DELETE (got $code)"
code=$(req path "${auth[@]}" "${json[@]}" -d "$init" "http://127.0.0.1:$port/other")
[ "$code" = 404 ]
tap_ok $? "POST /other: 404 (got $code)"
code=$(req del "${auth[@]}" "${s[@]}" -X DELETE "$url")
[ "$code" = 200 ]
tap_ok $? "DELETE ends the session: 200 (got $code)"
code=$(req afterdel "${auth[@]}" "${json[@]}" "${s[@]}" -d "$list" "$url")
[ "$code" = 404 ]
tap_ok $? "the ended session: 404 (got $code)"
code=$(req del2 "${auth[@]}" -H "Mcp-Session-Id: $sid2" -X DELETE "$url")
[ "$code" = 200 ]
tap_ok $? "the other session is ended separately (got $code)"

# Caps and deadlines, with raw sockets.
python3 - "$port" "$token" >"$tmp/raw.out" 2>&1 <<'EOF'
import socket, sys, time
port, token = int(sys.argv[1]), sys.argv[2]

def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s

def status(s):
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b" ")[1].decode() if data.startswith(b"HTTP/1.1 ") else "closed"

def report(ok, what):
    print(("ok - " if ok else "not ok - ") + what)

# A body above the 8 MiB cap is refused before it is read.
s = conn()
s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
          b"Content-Type: application/json\r\nContent-Length: 9000000\r\n\r\n" % token.encode())
st = status(s)
report(st == "413", "a Content-Length above the body cap: 413 (got %s)" % st)
s.close()
# A head above 16 KiB.
s = conn()
try:
    s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
except OSError:
    pass
st = status(s)
report(st == "431", "a request head above 16 KiB: 431 (got %s)" % st)
s.close()
# Chunked bodies are not taken (request smuggling needs two framings).
s = conn()
s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
st = status(s)
report(st == "501", "Transfer-Encoding: chunked: 501 (got %s)" % st)
s.close()
# Two Content-Length headers.
s = conn()
s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}")
st = status(s)
report(st == "400", "two Content-Length headers: 400 (got %s)" % st)
s.close()
# Headers without a blank after the colon are well formed (RFC 9110 5.6.3).
s = conn()
s.sendall(b"PUT /mcp HTTP/1.1\r\nHost:127.0.0.1\r\nAuthorization:Bearer %s\r\n\r\n" % token.encode())
st = status(s)
report(st == "405", "headers written 'Name:value' are read (got %s)" % st)
s.close()
# A blank before the colon is refused (RFC 9112 5.1).
s = conn()
s.sendall(b"PUT /mcp HTTP/1.1\r\nHost : 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n" % token.encode())
st = status(s)
report(st == "400", "a blank between a header name and its colon: 400 (got %s)" % st)
s.close()
# Two Authorization headers.
s = conn()
s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer x\r\n"
          b"Authorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}" % token.encode())
st = status(s)
report(st == "400", "two Authorization headers: 400 (got %s)" % st)
s.close()
# A client that stops halfway through its head is cut off at the deadline
# (1.5 s in this test), and meanwhile others are served.
slow = conn()
slow.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0")
t0 = time.time()
other = conn()
other.sendall(b"PUT /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n" % token.encode())
st = status(other)
report(st == "405", "another client is served while one is stalled (got %s)" % st)
other.close()
slow.settimeout(10)
try:
    rest = slow.recv(4096)
except OSError:
    rest = b""
dt = time.time() - t0
report(dt < 5, "the stalled client is cut off at the head deadline (%.1fs, answer %r)" % (dt, rest[:12]))
slow.close()
# More than 32 connections at once: the 33rd is refused with 503.
idle = [conn() for _ in range(32)]
time.sleep(0.3)
extra = conn()
st = status(extra)
report(st == "503", "a 33rd connection while 32 are open: 503 (got %s)" % st)
extra.close()
for s in idle:
    s.close()
time.sleep(0.5)
s = conn()
s.sendall(b"PUT /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n" % token.encode())
st = status(s)
report(st == "405", "once they are gone, connections are taken again (got %s)" % st)
s.close()
EOF
tap_relay <"$tmp/raw.out"

# Event streams, with raw sockets: tests/mcp/sse.py.
python3 "$TOP/tests/mcp/sse.py" "$port" "$token" >"$tmp/sse.out" 2>&1
rc=$?
tap_relay <"$tmp/sse.out"
tap_ok $rc "the event stream checks ran to their end (exit $rc)"

# The MCP SDK client over Streamable HTTP, then over stdio.
if mcp_node_setup 2>"$tmp/npm.log"; then
    tap_ok 0 "the MCP SDK $MCP_SDK_VERSION is installed (build/mcp-node)"
    MCP_SANDBOX=sdk-http MCP_PRESETS=balanced,locked MCP_DENIED_PRESET=open \
        "$MCP_NODE22" "$TOP/tests/mcp/sdk-client.mjs" http "$url" "$tmp/token" \
        >"$tmp/sdk-http.out" 2>"$tmp/sdk-http.log"
    rc=$?
    tap_relay <"$tmp/sdk-http.out"
    tap_ok $rc "the SDK client over http ran to its end (exit $rc)"
    [ $rc -eq 0 ] || tail -n 20 "$tmp/sdk-http.log" | sed 's/^/# /'
    MCP_SANDBOX=sdk-stdio MCP_PRESETS=balanced,locked MCP_DENIED_PRESET=open \
        "$MCP_NODE22" "$TOP/tests/mcp/sdk-client.mjs" stdio "$server" \
        >"$tmp/sdk-stdio.out" 2>"$tmp/sdk-stdio.log"
    rc=$?
    tap_relay <"$tmp/sdk-stdio.out"
    tap_ok $rc "the SDK client over stdio ran to its end (exit $rc)"
    ! grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/sdk-stdio.log"
    tap_ok $? "stdio: the server (started by the client) reported no sanitizer error"
    [ $rc -eq 0 ] || tail -n 20 "$tmp/sdk-stdio.log" | sed 's/^/# /'
    # Elicitation: a second server with the test-only tool test_confirm.
    "$server" --http 127.0.0.1:0 --port-file "$tmp/port2" --token-file "$tmp/token" \
        --elicit-tool yes 2>"$tmp/server2.log" &
    pid2=$!
    if mcp_wait_file "$tmp/port2" "$pid2"; then
        for m in http stdio; do
            if [ $m = http ]; then
                set -- http "http://127.0.0.1:$(cat "$tmp/port2")/mcp" "$tmp/token"
            else
                set -- stdio "$server" --elicit-tool yes
            fi
            timeout 60 "$MCP_NODE22" "$TOP/tests/mcp/sdk-elicit.mjs" "$@" \
                >"$tmp/elicit-$m.out" 2>"$tmp/elicit-$m.log"
            rc=$?
            tap_relay <"$tmp/elicit-$m.out"
            tap_ok $rc "the SDK elicitation client over $m ran to its end (exit $rc)"
            [ $rc -eq 0 ] || tail -n 20 "$tmp/elicit-$m.log" | sed 's/^/# /'
        done
    else
        tap_ok 1 "the server with test_confirm starts"
    fi
    kill -TERM "$pid2"
    rc=0
    wait "$pid2" || rc=$?
    pid2=
    tap_ok $rc "the server with test_confirm stops cleanly (exit $rc)"
else
    tap_ok 1 "the MCP SDK is installed from npm"
    cat "$tmp/npm.log"
fi

# A clean stop on SIGTERM (the sanitizer build checks for leaks at exit).
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 0 ] && grep -q 'stopped' "$tmp/server.log"
tap_ok $? "SIGTERM stops the server cleanly (exit $rc)"
if [ "$rc" -ne 0 ]; then
    tail -n 30 "$tmp/server.log" | sed 's/^/# /'
fi
echo "1..$tap_n"
[ "$tap_failed" -eq 0 ]
