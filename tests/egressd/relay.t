#!/usr/bin/env bash
# relay.t - the tunnel relay under pressure: through a CONNECT tunnel to an
# echo origin, a client sends 12 MiB while it reads the echo back slowly at
# first (nothing for half a second, then in small reads: egressd's sends to
# it block, bytes are held and the upstream side must stop reading), then
# fast.  Past 256 KiB a direction is moved
# with splice(2); before that by copying.  Every byte must come back in
# order (SHA-256 of what was sent = of what came back), the client's
# half-close must reach the origin and the origin's end come back, and the
# log line must count exactly what each way carried.  Also a tunnel whose
# client sends before the 200 arrives (the bytes wait in egressd until the
# tunnel starts), and a client that sends ahead while its CONNECT waits for
# a name that does not resolve (egressd keeps at most 64 KiB of it), also
# on the transparent TLS port; a name whose first address refuses; an
# origin that speaks before the client's hello.  Last,
# a CONNECT after a kept-alive GET on the same client connection: the idle
# upstream the GET left must be closed, not leaked.  TAP on
# stdout.  Needs BUILD_DIR, TOP; runs in
# its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.25 echo.test
egd_allow 'echo.test:7000 raw'
egd_host 127.0.0.26 web.test
# two.test: its first address refuses, its second is the echo server.
egd_host 127.0.0.24 two.test
egd_host 127.0.0.25 two.test
egd_allow 'two.test:7000 raw'
egd_allow "web.test:$EGD_HTTP_PORT"
# banner.test speaks first (an SSH-style banner) and is not a raw rule:
# its banner waits in egressd until the client's hello starts the relay.
egd_host 127.0.0.27 banner.test
egd_allow 'banner.test:2222'
egd_origin --banner 127.0.0.27:2222 web.test || egm_bail "the web and banner origins start"
egm_server "$T/echo.out" python3 -u "$EGD_DIR/tunnels.py" echo 127.0.0.25:7000 ||
    egm_bail "the echo server starts"
# A DNS server that never answers for slow.test: its CONNECT stays in the
# decision while the client sends.
echo 'slow.test TIMEOUT' >"$T/zone"
egd_allow 'slow.test:7000 raw' "slow.test:$EGD_HTTPS_PORT"
egm_server "$T/dnsd.out" python3 -u "$EGD_DIR/dnsd.py" --listen 127.0.0.53:53 --zone "$T/zone" ||
    egm_bail "the DNS server starts"
# Small socket send buffers (this namespace only), so that egressd's sends
# block while a direction is still copied (before 256 KiB) and not only
# once it splices.
sysctl -qw net.ipv4.tcp_wmem="4096 8192 16384" || egm_bail "sysctl net.ipv4.tcp_wmem in the test's namespace"
egd_start 'resolver 127.0.0.53' || egm_bail "egressd starts and answers /healthz"

# relay_client MODE: one tunnel; prints a JSON result.
#   slow   12 MiB up, the echo read slowly for the first 2 MiB
#   early  the first bytes sent together with the CONNECT, before the 200
relay_client() {
    py - "$EGD_PROXY" "$1" <<'EOF'
import hashlib, json, os, socket, sys, threading, time
proxy, mode = sys.argv[1], sys.argv[2]
host, _, port = proxy.rpartition(":")
total = 12 * 1024 * 1024 if mode == "slow" else 300 * 1024
data = hashlib.shake_256(b"relay.t").digest(total)
s = socket.create_connection((host, int(port)), timeout=30)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
head = b"CONNECT echo.test:7000 HTTP/1.1\r\nHost: echo.test:7000\r\n\r\n"
early = data[:1000] if mode == "early" else b""
s.sendall(head + early)
buf = b""
while b"\r\n\r\n" not in buf:
    chunk = s.recv(1)
    if not chunk:
        print(json.dumps({"error": "closed before the 200"}))
        sys.exit(0)
    buf += chunk
status = buf.split(b" ", 2)[1].decode()

def send():
    off = len(early)
    while off < total:
        n = s.send(data[off:off + 65536])
        off += n
    s.shutdown(socket.SHUT_WR)

t = threading.Thread(target=send)
t.start()
h = hashlib.sha256()
got = 0
if mode == "slow":
    time.sleep(0.5)  # nothing read yet: egressd's sends to us must block
while True:
    want = 4096 if (mode == "slow" and got < 2 * 1024 * 1024) else 262144
    chunk = s.recv(want)
    if not chunk:
        break
    h.update(chunk)
    got += len(chunk)
    if mode == "slow" and got < 2 * 1024 * 1024:
        time.sleep(0.001)
t.join()
s.close()
print(json.dumps({"status": status, "sent": total, "got": got,
                  "same": h.hexdigest() == hashlib.sha256(data).hexdigest()}))
EOF
}

egd_log_mark
out=$(relay_client slow 2>&1)
diag "slow reader: $out"
ok_json "slow reader: 200, 12 MiB up, every byte echoed back in order (SHA-256), the end passed both ways" \
    "$out" 'l.get("status") == "200" and l["got"] == l["sent"] == 12 * 1024 * 1024 and l["same"]'
egd_log_ok "slow reader: logged allow with exactly 12 MiB each way" 'l["host"] == "echo.test"' \
    'l["decision"] == "allow" and l["bytes_up"] == 12 * 1024 * 1024 and l["bytes_down"] == 12 * 1024 * 1024'

egd_log_mark
out=$(relay_client early 2>&1)
diag "early bytes: $out"
ok_json "bytes sent with the CONNECT, before its 200: relayed first, in order, with the rest (300 KiB)" \
    "$out" 'l.get("status") == "200" and l["got"] == l["sent"] == 300 * 1024 and l["same"]'
egd_log_ok "early bytes: logged with every byte counted" 'l["host"] == "echo.test"' \
    'l["bytes_up"] == 300 * 1024 and l["bytes_down"] == 300 * 1024'

# While its request is decided, a client may send ahead, but egressd keeps
# at most 64 KiB of it: then it stops reading, and the kernel's (small)
# buffers fill.  Without the bound it would take all the client sends.
# send_ahead ADDR FILE: connect, send FILE, then as much as egressd takes
# for 1.5 s; prints {"sent": N}.
send_ahead() {
    py - "$1" "$2" <<'EOF'
import json, socket, sys, time
host, _, port = sys.argv[1].rpartition(":")
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(open(sys.argv[2], "rb").read())
s.setblocking(False)
sent, end, chunk = 0, time.monotonic() + 1.5, b"x" * 65536
while time.monotonic() < end:
    try:
        sent += s.send(chunk)
    except BlockingIOError:
        time.sleep(0.01)
print(json.dumps({"sent": sent}))
EOF
}
printf 'CONNECT slow.test:7000 HTTP/1.1\r\nHost: slow.test:7000\r\n\r\n' >"$T/slow.connect"
out=$(send_ahead "$EGD_PROXY" "$T/slow.connect")
diag "sending ahead while the name does not resolve: $out"
ok_json "a client sending ahead of an undecided CONNECT: egressd stops taking bytes (under 1 MiB taken in 1.5 s)" \
    "$out" 'l["sent"] < 1024 * 1024'

# The same on the transparent TLS port: a real ClientHello naming
# slow.test, then more bytes as fast as egressd takes them.
py "$EGD_DIR/rawclient.py" hello "$EGD_HELLOS/curl.bin" "$T/slow.hello" --sni slow.test ||
    egm_bail "a ClientHello for slow.test"
out=$(send_ahead "$EGD_TLS" "$T/slow.hello")
diag "transparent TLS, sending ahead while the SNI's name does not resolve: $out"
ok_json "a transparent TLS client sending ahead of its decision: egressd stops taking bytes (under 1 MiB taken in 1.5 s)" \
    "$out" 'l["sent"] < 1024 * 1024'

# A tunnel to a name whose first address refuses: the next one is tried.
egd_log_mark
raw --out "$T/two.out" "$EGD_PROXY" 'send:CONNECT two.test:7000 HTTP/1.1\r\nHost: two.test:7000\r\n\r\n' \
    head send:ping expect:ping >/dev/null 2>&1
ok $? "CONNECT to a name whose first address refuses: the echo comes back through the second"
check_resp "... after a 200" "$T/two.out" 'r[0]["status"] == 200'
egd_log_ok "... logged allow with the second address as the upstream" 'l["host"] == "two.test"' \
    'l["decision"] == "allow" and l["upstream"] == "127.0.0.25:7000"'

# An origin that speaks before the client's hello: what it sent is
# relayed once the hello starts the tunnel, first and whole.
py "$EGD_DIR/rawclient.py" hello "$EGD_HELLOS/curl.bin" "$T/banner.hello" --sni banner.test ||
    egm_bail "a ClientHello for banner.test"
out=$(py - "$EGD_PROXY" "$T/banner.hello" <<'EOF'
import json, socket, sys, time
host, _, port = sys.argv[1].rpartition(":")
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(b"CONNECT banner.test:2222 HTTP/1.1\r\nHost: banner.test:2222\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(1)
time.sleep(0.3) # the banner is at egressd before the hello is sent
s.sendall(open(sys.argv[2], "rb").read())
got = b""
try:
    while len(got) < 14:
        d = s.recv(64)
        if not d:
            break
        got += d
except OSError:
    pass
print(json.dumps({"status": buf.split(b" ")[1].decode(), "first": got[:14].decode("latin-1")}))
EOF
)
ok_json "an origin that speaks before the hello: its banner comes through once the hello is sent" \
    "$out" 'l["status"] == "200" and l["first"] == "SSH-2.0-test\r\n"'

# A CONNECT on a client connection whose previous request (a kept-alive
# GET) left an idle upstream connection: that upstream is let go, not
# forgotten open.  Twenty such connections, then egressd's descriptors are
# counted: none may be left over from them.
fds() { find "/proc/$EGD_PID/fd" -mindepth 1 -maxdepth 1 | wc -l; }
before=$(fds)
out=$(py - "$EGD_PROXY" "$EGD_HTTP_PORT" <<'EOF'
import json, socket, sys
host, _, port = sys.argv[1].rpartition(":")
web = ("web.test:%s" % sys.argv[2]).encode()
done = 0
for i in range(20):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"GET http://" + web + b"/hello HTTP/1.1\r\nHost: " + web + b"\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(4096)
    head, _, body = buf.partition(b"\r\n\r\n")
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    while n and len(body) < n[0]:
        body += s.recv(4096)
    s.sendall(b"CONNECT echo.test:7000 HTTP/1.1\r\nHost: echo.test:7000\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(1)
    s.sendall(b"ping")
    got = b""
    while len(got) < 4:
        got += s.recv(4)
    if head.startswith(b"HTTP/1.1 200 ") and buf.startswith(b"HTTP/1.1 200 ") and got == b"ping":
        done += 1
    s.close()
print(json.dumps({"done": done}))
EOF
)
sleep 0.5 # the last tunnel's close reaches egressd
after=$(fds)
diag "GET then CONNECT on one connection: $out; egressd's descriptors $before -> $after"
ok_json "GET then CONNECT on one client connection: both answered, 20 times" "$out" 'l["done"] == 20'
check "... and egressd holds no descriptor more than before ($before -> $after)" [ "$after" -le "$before" ]

egd_finish
tap_end
