#!/usr/bin/env python3
"""origin.py - the web servers behind egressd in its end-to-end tests.

    origin.py --log FILE --certs DIR --https-port N --http-port N
              [--banner ADDR:PORT] NAME=ADDR...

For every NAME=ADDR it listens on ADDR, HTTPS on --https-port (the
certificate DIR/NAME.pem, key DIR/NAME.key, chosen by the ClientHello's
server_name; the first site's when the name is unknown or absent) and plain
HTTP on --http-port.  HTTP/1.1 with keep-alive; one thread per connection.

Endpoints:
    /hello          "hello from NAME\\n" (NAME: the site of the local address)
    /echo           the request head exactly as received (then its body)
    /bytes/N        N bytes (N <= 64 MiB)
    /slow           five lines, 200 ms apart
    /slow/N         N lines "slow\n", 200 ms apart (N <= 600)
    /status/N       an empty answer with status N
    /close          an answer, then the connection is closed
    /sse/N          N server-sent events (N <= 100), chunked, 300 ms apart;
                    each event says when it was sent ("data: I T")
    anything else   404

--banner ADDR:PORT serves an SSH-style protocol: the server speaks first
("SSH-2.0-test\\r\\n"), reads one line and answers "got LINE\\r\\n".

Every connection, ClientHello name, request and banner exchange is one JSON
line in --log: {"event": ..., "local": "ADDR:PORT", ...}.  Prints "ready"
once every socket listens.
"""

import argparse
import json
import os
import socket
import ssl
import sys
import threading
import time

MAX_HEAD = 65536
MAX_BODY = 64 << 20

log_lock = threading.Lock()
log_file = None


def log(**kv):
    kv["t"] = round(time.time(), 3)
    line = json.dumps(kv, sort_keys=True) + "\n"
    with log_lock:
        log_file.write(line)
        log_file.flush()


def listen(addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(128)
    return s


class Conn:
    """One client connection: buffered reads over a (TLS) socket."""

    def __init__(self, sock, local, site, tls, sni):
        self.sock, self.local, self.site, self.tls, self.sni = sock, local, site, tls, sni
        self.buf = b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            return False
        self.buf += data
        return True

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self.fill():
                return None
        i = self.buf.index(b"\r\n\r\n") + 4
        head, self.buf = self.buf[:i], self.buf[i:]
        return head

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self.fill():
                raise EOFError
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > MAX_HEAD or not self.fill():
                raise EOFError
        i = self.buf.index(b"\r\n") + 2
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def read_chunked(self):
        body = b""
        while True:
            size = int(self.read_line().split(b";")[0].strip(), 16)
            if size == 0:
                while self.read_line() != b"\r\n":
                    pass
                return body
            body += self.read_exact(size)
            self.read_line()
            if len(body) > MAX_BODY:
                raise EOFError


def respond(c, status, body, close=False, extra=()):
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}.get(status, "Status")
    head = ["HTTP/1.1 %d %s" % (status, reason), "Content-Length: %d" % len(body),
            "Content-Type: text/plain", "X-Origin: %s" % c.site]
    head += list(extra)
    if close:
        head.append("Connection: close")
    c.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)


def serve_sse(c, n, close):
    """n events of a text/event-stream, one chunk each, 300 ms apart."""
    c.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   b"Transfer-Encoding: chunked\r\n" + (b"Connection: close\r\n" if close else b"")
                   + b"\r\n")
    for i in range(n):
        if i:
            time.sleep(0.3)
        ev = ("data: %d %.3f\n\n" % (i, time.time())).encode()
        c.sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
    c.sock.sendall(b"0\r\n\r\n")


def serve_http(c):
    while True:
        head = c.read_head()
        if head is None:
            return
        lines = head[:-4].split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ")
        if len(parts) != 3:
            respond(c, 400, b"bad request line\n", close=True)
            return
        method, target, version = parts
        fields = []
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            fields.append((name.strip().lower(), value.strip()))
        get = lambda n: [v for k, v in fields if k == n]
        body = b""
        if "chunked" in ",".join(get("transfer-encoding")).lower():
            body = c.read_chunked()
        elif get("content-length"):
            body = c.read_exact(int(get("content-length")[0]))
        conn_tokens = ",".join(get("connection")).lower()
        close = "close" in conn_tokens or (version == "HTTP/1.0" and "keep-alive" not in conn_tokens)
        log(event="request", local=c.local, site=c.site, tls=c.tls, sni=c.sni, method=method,
            target=target, version=version, headers=[[k, v] for k, v in fields],
            head=head.decode("latin-1"), body_bytes=len(body))
        path = target.split("?")[0]
        if path == "/hello":
            respond(c, 200, ("hello from %s\n" % c.site).encode(), close)
        elif path == "/echo":
            respond(c, 200, head + body, close)
        elif path.startswith("/bytes/") and path[7:].isdigit() and int(path[7:]) <= MAX_BODY:
            n = int(path[7:])
            pattern = b"0123456789abcdef" * 4096
            respond(c, 200, (pattern * (n // len(pattern) + 1))[:n], close)
        elif path == "/slow" or (path.startswith("/slow/") and path[6:].isdigit()
                                  and int(path[6:]) <= 600):
            lines = int(path[6:]) if path != "/slow" else 5
            c.sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n"
                           % (5 * lines) + (b"Connection: close\r\n" if close else b"") + b"\r\n")
            for _ in range(lines):
                time.sleep(0.2)
                c.sock.sendall(b"slow\n")
        elif path.startswith("/status/") and path[8:].isdigit():
            respond(c, int(path[8:]), b"", close)
        elif path.startswith("/sse/") and path[5:].isdigit() and int(path[5:]) <= 100:
            serve_sse(c, int(path[5:]), close)
        elif path == "/close":
            respond(c, 200, b"bye\n", True)
            return
        else:
            respond(c, 404, b"not found\n", close)
        if close:
            return


def handle(sock, peer, local, site, tls_ctx):
    sni = None
    try:
        sock.settimeout(30)
        if tls_ctx is not None:
            sock = tls_ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            try:
                sock.do_handshake()
            except (ssl.SSLError, OSError) as e:
                log(event="tls_fail", local=local, site=site, sni=getattr(sock, "egd_sni", None),
                    error=str(e))
                return
            sni = getattr(sock, "egd_sni", None)
        log(event="connect", local=local, site=site, tls=tls_ctx is not None, sni=sni,
            peer="%s:%d" % peer[:2])
        serve_http(Conn(sock, local, site, tls_ctx is not None, sni))
    except (OSError, EOFError, ValueError, ssl.SSLError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def serve_banner(sock, peer, local):
    try:
        sock.settimeout(30)
        sock.sendall(b"SSH-2.0-test\r\n")
        buf = b""
        while b"\n" not in buf:
            data = sock.recv(4096)
            if not data:
                log(event="banner", local=local, got=None)
                return
            buf += data
        line = buf.split(b"\n")[0].rstrip(b"\r")
        log(event="banner", local=local, got=line.decode("latin-1"), peer="%s:%d" % peer[:2])
        sock.sendall(b"got " + line + b"\r\n")
        while sock.recv(4096):
            pass
    except OSError:
        pass
    finally:
        sock.close()


def accept_loop(lsock, fn):
    while True:
        try:
            s, peer = lsock.accept()
        except OSError:
            continue
        threading.Thread(target=fn, args=(s, peer), daemon=True).start()


certs = {}  # name -> its server context


def on_sni(ssl_sock, name, ctx):
    """The ClientHello's server_name: remember it, pick its certificate."""
    ssl_sock.egd_sni = name
    addr, port = ssl_sock.getsockname()[:2]
    log(event="hello", local=("[%s]:%d" if ":" in addr else "%s:%d") % (addr, port), sni=name)
    if name in certs:
        ssl_sock.context = certs[name]


def context_for(certdir, name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(certdir, name + ".pem"), os.path.join(certdir, name + ".key"))
    ctx.sni_callback = on_sni
    return ctx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--certs", required=True)
    ap.add_argument("--https-port", type=int, required=True)
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--banner", action="append", default=[])
    ap.add_argument("sites", nargs="*")
    a = ap.parse_args()
    global log_file
    log_file = open(a.log, "a", encoding="utf-8")

    sites = []  # (name, addr), in order
    for s in a.sites:
        name, _, addr = s.partition("=")
        sites.append((name, addr))
    for name, _ in sites:
        certs[name] = context_for(a.certs, name)
    site_of = {}
    for name, addr in sites:
        site_of.setdefault(addr, name)

    threads = []
    for addr, site in site_of.items():
        default_name = site
        for port, tls in ((a.https_port, True), (a.http_port, False)):
            lsock = listen(addr, port)
            local = ("[%s]:%d" if ":" in addr else "%s:%d") % (addr, port)
            ctx = certs[default_name] if tls else None
            fn = (lambda s, p, local=local, site=site, ctx=ctx:
                  handle(s, p, local, site, ctx))
            threads.append(threading.Thread(target=accept_loop, args=(lsock, fn), daemon=True))
    for b in a.banner:
        addr, _, port = b.rpartition(":")
        lsock = listen(addr.strip("[]"), int(port))
        fn = lambda s, p, local=b: serve_banner(s, p, local)
        threads.append(threading.Thread(target=accept_loop, args=(lsock, fn), daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
