#!/usr/bin/env python3
"""wsorigin.py - a TLS WebSocket origin, for the end-to-end tests of
WebSockets through egressd's credential injection (wsproto.py does the
protocol).

    wsorigin.py --log FILE --cert PEM --key PEM --secret-file FILE
                --listen ADDR:PORT [--listen ADDR:PORT...]
                [--max-message BYTES]

HTTPS (ALPN http/1.1) on every --listen, HTTP/1.1 with keep-alive, one
thread per connection; prints "ready" once every socket listens.

A request with "Upgrade: websocket" carries its credential as
"x-api-key: VALUE" or "Authorization: Bearer VALUE" (x-api-key first);
it must equal the content of --secret-file (read at each request, one
trailing newline dropped).  Wrong or absent: 401 with a small JSON body,
no upgrade, the connection kept.  Then a path other than /echo and
/headers gets 404, a bad handshake 400 (426 for another
Sec-WebSocket-Version); else 101 Switching Protocols.  A request without
Upgrade gets 426.

After the upgrade (client messages up to --max-message bytes, 16 MiB by
default; over that, the close 1009):
    /echo     each text or binary message comes back as one message of
              its type, but for these text commands:
                ping-me    a ping with payload "p1"; when its pong comes,
                           the text "pong-ok"
                frag N K   a text message of N bytes ("x" * N) in K frames
                           (the first, then continuations), with a ping
                           (payload "f1") after the first frame
                big N      one binary message of N bytes of
                           bytes(range(256)) repeated
                close-me   the close handshake from the server: 1000 "bye"
                sleep S    after S seconds (still reading), the text "awake"
    /headers  first one text message: the JSON object of the upgrade
              request's fields as they came (name -> value, repeated
              fields joined by ", "), then as /echo.
Pings get their pong; a close gets its close, and the connection ends.

The log (--log) gets one JSON line per event, never a credential's value:
    {"event": "upgrade", "path", "auth": "match" | "mismatch" | "absent",
     "auth_field": "x-api-key" | "authorization" | null, "placeholder"
     (whether the value starts with "egressd-ph-"), "status"}
    {"event": "message", "path", "opcode": "text" | "binary", "len",
     "sha16": the first 16 hex digits of the payload's sha256}
    {"event": "ping", "path", "len"}                  a client's ping
    {"event": "pong", "path", "ok": whether it answers a ping we sent}
    {"event": "close", "path", "code", "reason", "by": "client" | "server"
     | "eof"}   by "server": close-me ("reply": the code of the client's
     answer, null if none came in 10 s) or a protocol error of the client
     (its code and reason)
    {"event": "http", "path", "status"}               a request without Upgrade
Each line also has "t" (the time) and "conn" (the connection's number).
"""

import argparse
import hashlib
import http
import json
import socket
import ssl
import sys
import threading
import time

import wsproto

args = None
log_lock = threading.Lock()
conn_counter = [0]
MAX_HEAD = 64 << 10
CLOSE_WAIT = 10.0


def log(**kv):
    kv.setdefault("t", round(time.time(), 3))
    with log_lock:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(kv, sort_keys=True) + "\n")


def read_secret():
    with open(args.secret_file, encoding="utf-8") as f:
        v = f.read()
    return v[:-1] if v.endswith("\n") else v


def credential(headers):
    """(flag, value, field) of the request's credential against the
    secret file: x-api-key, else a Bearer Authorization."""
    value, field = wsproto.header(headers, "x-api-key"), "x-api-key"
    if value is None:
        value, field = wsproto.header(headers, "authorization"), "authorization"
        if value is not None and value[:7].lower() == "bearer ":
            value = value[7:]
    if value is None:
        return "absent", None, None
    return ("match" if value == read_secret() else "mismatch"), value, field


def pattern(n):
    """n bytes of bytes(range(256)) repeated."""
    return (bytes(range(256)) * (n // 256 + 1))[:n]


def sha16(data):
    return hashlib.sha256(data).hexdigest()[:16]


def response(status, headers=(), body=b""):
    """An HTTP/1.1 response (bytes) with Content-Length."""
    lines = ["HTTP/1.1 %d %s" % (status, http.HTTPStatus(status).phrase)]
    lines += ["%s: %s" % kv for kv in headers]
    lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def json_response(status, message, headers=()):
    body = json.dumps({"error": {"status": status, "message": message}}).encode()
    return response(status, [("Content-Type", "application/json")] + list(headers), body)


class BadRequest(Exception):
    """A request head that cannot be parsed."""


def read_head(sock, buf):
    """(method, target, version, [(name, value)...], the bytes after the
    head) of the next request on sock, buf: bytes already read; None at
    EOF before a request; raises BadRequest."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(buf) > MAX_HEAD:
            raise BadRequest("request head too long")
        data = sock.recv(65536)
        if not data:
            if buf.strip():
                raise BadRequest("EOF inside a request head")
            return None
        buf += data
    head, rest = buf[:end].decode("latin-1"), buf[end + 4:]
    lines = head.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise BadRequest("bad request line")
    fields = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or line[0] in " \t":
            raise BadRequest("bad header line")
        fields.append((name, value.strip(" \t")))
    return parts[0], parts[1], parts[2], fields, rest


class Session:
    """One upgraded connection: the WebSocket on path, until it ends."""

    def __init__(self, tls, conn, path, fields, buffered):
        self.tls, self.conn, self.path, self.fields = tls, conn, path, fields
        self.wait = None                     # the read timeout, from the timers
        self.ws = wsproto.WebSocket(self.recv, self.send, max_message=args.max_message,
                                    buffered=buffered)
        self.pings = {}                      # payload of a ping we sent -> why
        self.timers = []                     # (when, function)
        self.closing_since = None            # when we sent close-me's close

    def recv(self, n):
        self.tls.settimeout(self.wait)
        return self.tls.recv(n)

    def send(self, data):
        self.tls.settimeout(60)
        self.tls.sendall(data)

    def log(self, **kv):
        log(conn=self.conn, path=self.path, **kv)

    def run(self):
        """Serves messages until the close, EOF or an error."""
        if self.path == "/headers":
            got = {}
            for name, value in self.fields:
                got[name] = got[name] + ", " + value if name in got else value
            self.ws.send_text(json.dumps(got))
        while True:
            due = [w for w, _ in self.timers]
            if self.closing_since is not None:
                due.append(self.closing_since + CLOSE_WAIT)
            self.wait = max(0.001, min(due) - time.time()) if due else None
            try:
                msg = self.ws.recv()
            except (socket.timeout, TimeoutError):
                if self.run_timers():
                    return
                continue
            except wsproto.ProtocolError as e:
                self.log(event="close", code=e.code, reason=e.reason, by="server")
                return
            except (wsproto.ConnectionClosed, OSError):
                self.log(event="close", code=None, reason="", by="eof")
                return
            if self.on_message(msg):
                return

    def run_timers(self):
        """Runs the timers that are due; True when the session is over (no
        answer to our close in time)."""
        now = time.time()
        if self.closing_since is not None and now >= self.closing_since + CLOSE_WAIT:
            self.log(event="close", code=wsproto.NORMAL, reason="bye", by="server", reply=None)
            return True
        for item in [t for t in self.timers if t[0] <= now]:
            self.timers.remove(item)
            item[1]()
        return False

    def on_message(self, msg):
        """Handles one Message; True when the session is over."""
        if msg.kind == "close":
            if self.closing_since is not None:
                self.log(event="close", code=wsproto.NORMAL, reason="bye", by="server",
                         reply=msg.code)
            else:
                self.log(event="close", code=msg.code, reason=msg.reason, by="client")
            return True
        if msg.kind == "ping":
            self.log(event="ping", len=len(msg.data))
            return False
        if msg.kind == "pong":
            why = self.pings.pop(msg.data, None)
            self.log(event="pong", ok=why is not None)
            if why == "ping-me":
                self.say("pong-ok")
            return False
        raw = msg.data.encode("utf-8") if msg.kind == "text" else msg.data
        self.log(event="message", opcode=msg.kind, len=len(raw), sha16=sha16(raw))
        if self.ws.close_sent or (msg.kind == "text" and self.command(msg.data)):
            return False
        if msg.kind == "text":
            self.ws.send_text(msg.data)
        else:
            self.ws.send_binary(msg.data)
        return False

    def say(self, text):
        """Sends text unless our close has gone out."""
        if not self.ws.close_sent:
            self.ws.send_text(text)

    def command(self, text):
        """Runs text if it is a command (see the top); whether it was."""
        words = text.split()
        try:
            if words == ["ping-me"]:
                self.server_ping(b"p1", "ping-me")
            elif len(words) == 3 and words[0] == "frag":
                n, k = int(words[1]), int(words[2])
                if n < 0 or k < 1:
                    return False
                self.ws.send_fragmented(
                    "text", "x" * n, k,
                    between=lambda i: self.server_ping(b"f1", "frag") if i == 0 else None)
            elif len(words) == 2 and words[0] == "big" and int(words[1]) >= 0:
                self.ws.send_binary(pattern(int(words[1])))
            elif words == ["close-me"]:
                self.ws.close(wsproto.NORMAL, "bye")
                self.closing_since = time.time()
            elif len(words) == 2 and words[0] == "sleep" and float(words[1]) >= 0:
                self.timers.append((time.time() + float(words[1]), lambda: self.say("awake")))
            else:
                return False
        except ValueError:
            return False
        return True

    def server_ping(self, payload, why):
        self.pings[payload] = why
        self.ws.ping(payload)


def serve(sock, conn):
    """One connection: TLS, then requests until an upgrade or the end."""
    tls = None
    try:
        sock.settimeout(30)
        tls = args.ctx.wrap_socket(sock, server_side=True)
        buf = b""
        while True:
            tls.settimeout(120)
            try:
                req = read_head(tls, buf)
            except BadRequest as e:
                tls.sendall(json_response(400, str(e), [("Connection", "close")]))
                return
            if req is None:
                return
            method, target, version, fields, buf = req
            path = target.split("?")[0]
            length = wsproto.header(fields, "Content-Length")
            if wsproto.header(fields, "Transfer-Encoding") or (length and not length.isdigit()):
                tls.sendall(json_response(400, "no request body here", [("Connection", "close")]))
                return
            while length and len(buf) < int(length):
                data = tls.recv(65536)
                if not data:
                    return
                buf += data
            buf = buf[int(length or 0):]
            closing = "close" in wsproto.tokens(wsproto.header(fields, "Connection"))
            if not wsproto.is_upgrade(fields):
                log(conn=conn, event="http", path=path, status=426)
                tls.sendall(json_response(426, "a WebSocket lives here",
                                          [("Upgrade", "websocket"), ("Connection", "Upgrade")]))
                if closing:
                    return
                continue
            flag, value, field = credential(fields)
            entry = dict(conn=conn, event="upgrade", path=path, auth=flag, auth_field=field,
                         placeholder=bool(value and value.startswith("egressd-ph-")))
            if flag != "match":
                log(status=401, **entry)
                tls.sendall(json_response(401, "invalid credential"))
                if closing:
                    return
                continue
            if path not in ("/echo", "/headers"):
                log(status=404, **entry)
                tls.sendall(json_response(404, "no such path"))
                continue
            try:
                key = wsproto.check_upgrade(method, fields, version)
            except wsproto.HandshakeError as e:
                log(status=e.status, **entry)
                tls.sendall(json_response(e.status, e.reason,
                                          e.headers + [("Connection", "close")]))
                return
            log(status=101, **entry)
            tls.sendall(wsproto.handshake_response(key))
            Session(tls, conn, path, fields, buf).run()
            return
    except (OSError, ValueError, ssl.SSLError) as e:
        # A client that vanished, a TLS failure: this connection only.
        print("wsorigin: connection %d: %s: %s" % (conn, type(e).__name__, e),
              file=sys.stderr, flush=True)
    except Exception as e:  # noqa: BLE001 - one connection never takes the server down
        print("wsorigin: connection %d: unexpected %s: %s" % (conn, type(e).__name__, e),
              file=sys.stderr, flush=True)
    finally:
        try:
            (tls or sock).close()
        except OSError:
            pass


def accept_loop(lsock):
    """Accepts connections on lsock forever, a thread each."""
    while True:
        try:
            sock, _ = lsock.accept()
        except OSError:
            time.sleep(0.05)
            continue
        with log_lock:
            conn_counter[0] += 1
            conn = conn_counter[0]
        threading.Thread(target=serve, args=(sock, conn), daemon=True).start()


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--secret-file", required=True)
    ap.add_argument("--listen", action="append", required=True, metavar="ADDR:PORT")
    ap.add_argument("--max-message", type=int, default=wsproto.DEFAULT_MAX_MESSAGE)
    args = ap.parse_args()
    args.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    args.ctx.load_cert_chain(args.cert, args.key)
    args.ctx.set_alpn_protocols(["http/1.1"])
    socks = []
    for where in args.listen:
        addr, _, port = where.rpartition(":")
        addr = addr.strip("[]")
        lsock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((addr, int(port)))
        lsock.listen(128)
        socks.append(lsock)
    for lsock in socks:
        threading.Thread(target=accept_loop, args=(lsock,), daemon=True).start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
