#!/usr/bin/env bash
# termination.t - the access log's termination field: who ended the
# connection, and in which phase ("WHO/PHASE"; null for a request whose
# connection stayed open for the next).  One case per who: the client and
# the origin ending a tunnel, egressd denying in the head and in the
# address phase, an origin that refuses, a header timeout, the byte quota,
# a revocation, and HTTP keep-alive and `Connection: close`.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.25 echo.test
egd_host 127.0.0.27 closer.test
egd_host 127.0.0.28 refuser.test
egd_host 127.0.0.40 inside.test
egd_allow 'echo.test:7000 raw' 'closer.test:7001 raw' 'refuser.test:7002 raw' 'inside.test:8000'
egd_origin a.test || egm_bail "the origins start"
egm_server "$T/echo.out" python3 -u "$EGD_DIR/tunnels.py" echo 127.0.0.25:7000 ||
    egm_bail "the echo server starts"
# closer.test: says "bye" and closes at once (the origin ends the tunnel).
egm_server "$T/closer.out" python3 -u -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.27", 7001))
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"bye\n")
    c.close()
' || egm_bail "the closing server starts"
egd_start 'timeout-header 1s' 'quota-bytes-per-sandbox 300k' || egm_bail "egressd starts"
A=http://a.test:$EGD_HTTP_PORT

# tunnel SOURCE TARGET MODE: a CONNECT tunnel from SOURCE; MODE echo
# (send a line, read it back, then close: the client ends it), wait (read
# until the origin closes), or hold (stay open until killed).
tunnel() {
    py - "$EGD_PROXY" "$1" "$2" "$3" <<'EOF'
import socket, sys, time
proxy, source, target, mode = sys.argv[1:5]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(1)
    if not d:
        sys.exit("no answer to the CONNECT")
    head += d
if not head.startswith(b"HTTP/1.1 200"):
    sys.exit("CONNECT: " + head.decode("latin-1").splitlines()[0])
if mode == "echo":
    s.sendall(b"ping\n")
    got = b""
    while b"\n" not in got:
        got += s.recv(100)
    print(got.decode().strip(), flush=True)
elif mode == "wait":
    got = b""
    while True:
        d = s.recv(100)
        if not d:
            break
        got += d
    print(got.decode().strip(), flush=True)
else:
    print("open", flush=True)
    time.sleep(30)
s.close()
EOF
}
term_ok() { # term_ok TEXT MATCH WANT: the line MATCH finds has termination WANT
    local line
    line=$(egd_log_wait "$2")
    ok_json "$1" "$line" "l['termination'] == $3"
}

# --- the client ends a tunnel
egd_log_mark
got=$(tunnel 127.0.0.1 echo.test:7000 echo)
check "a tunnel to the echo origin echoes (got '$got')" test "$got" = ping
term_ok "the client closes its tunnel: client/relay" 'l["host"] == "echo.test"' '"client/relay"'

# --- the origin ends a tunnel
egd_log_mark
got=$(tunnel 127.0.0.1 closer.test:7001 wait)
check "the closing origin says bye (got '$got')" test "$got" = bye
term_ok "the origin closes the tunnel: upstream/relay" 'l["host"] == "closer.test"' '"upstream/relay"'

# --- egressd denies in the name phase (the request head) ...
egd_log_mark
code=$(egd_curl -s -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" http://denied.test/)
check "a host no rule allows: 403 (got $code)" test "$code" = 403
term_ok "denied by name: proxy/head" 'l["host"] == "denied.test"' '"proxy/head"'

# --- ... and in the address phase (after the lookup)
egd_log_mark
code=$(egd_curl -s -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" http://inside.test:$EGD_HTTP_PORT/)
check "an allowed name on a private address: 403 (got $code)" test "$code" = 403
term_ok "denied by address: proxy/resolve" 'l["host"] == "inside.test" and l["reason"] == "private_range"' \
    '"proxy/resolve"'

# status_line BYTES: send BYTES (with \r, \n escapes) to the proxy port and
# print the first line of its answer.
status_line() {
    py - "$EGD_PROXY" "$1" <<'EOF'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(sys.argv[2].replace("\\r", "\r").replace("\\n", "\n").encode())
print(s.recv(200).decode("latin-1").splitlines()[0])
EOF
}

# --- an origin that refuses the connection
egd_log_mark
got=$(status_line 'CONNECT refuser.test:7002 HTTP/1.1\r\nHost: refuser.test:7002\r\n\r\n' 2>&1)
check "nothing listens on the origin: 502 (got $got)" test "${got#HTTP/1.1 502}" != "$got"
term_ok "the origin refuses: upstream/connect" 'l["host"] == "refuser.test"' '"upstream/connect"'

# --- a request head that does not come in time (timeout-header 1s)
egd_log_mark
got=$(status_line 'GET http://a.test:8000/hello HTTP/1.1\r\n' 2>&1)
check "half a head for over timeout-header: 408 (got $got)" test "${got#HTTP/1.1 408}" != "$got"
term_ok "the head timed out: timeout/head" 'l["status"] == 408' '"timeout/head"'

# --- the byte quota (300k), reached in the middle of an answer
egd_log_mark
n=$(egd_curl --interface 127.0.0.6 -s -x "http://$EGD_PROXY" "$A/bytes/1000000" | wc -c)
check "the quota cuts a download of 1 MB (got $n bytes)" test "$n" -lt 1000000
term_ok "the quota ended it: limit/response" 'l["src"].startswith("127.0.0.6:") and l["reason"] == "limit"' \
    '"limit/response"'

# --- a revocation: the binding is deleted under an open tunnel
egd_put 301 '{"id":"301","name":"t","owner":"carol","addresses":["127.0.0.7"],"policy":"test"}' >/dev/null
egd_log_mark
tunnel 127.0.0.7 echo.test:7000 hold >"$T/hold.out" 2>&1 &
for _ in $(seq 100); do [ -s "$T/hold.out" ] && break; sleep 0.05; done
check "the sandbox's tunnel is open" grep -q open "$T/hold.out"
egd_admin DELETE /v1/sandboxes/301 >/dev/null
term_ok "the binding was deleted: revoked/relay" 'l["sandbox"] == "301"' '"revoked/relay"'

# --- HTTP: a kept-alive request, then one with Connection: close
egd_log_mark
py "$EGD_DIR/keepalive.py" --timeout 10 "$EGD_PROXY" "get:$A/hello" "get:$A/hello" >"$T/ka.out" 2>&1
check "two requests on one kept-alive connection" test "$(grep -c 'hello from a.test' "$T/ka.out")" = 2
lines=$(egm_log_lines 'l["host"] == "a.test" and l["method"] == "GET"')
egm_lines_ok "kept alive: both request lines say termination null (the connection went on)" "$lines" \
    'len(ls) == 2 and all(l["termination"] is None for l in ls)'
egd_log_mark
egd_curl -s -o /dev/null -H 'Connection: close' -x "http://$EGD_PROXY" "$A/hello"
term_ok "Connection: close from the client: client/response" 'l["host"] == "a.test"' '"client/response"'

egd_finish
tap_end
