#!/usr/bin/env python3
"""inject.py - a sandbox-side client of inject.t: HTTPS requests through
egressd's CONNECT, on ONE tunnel, with the sandbox CA as the only trust.

    inject.py --proxy ADDR:PORT --source ADDR --ca FILE --host NAME --port N
              [--h2-preface] [--pause-file FILE] REQUEST...

Each REQUEST is "METHOD PATH [FIELD: VALUE]..." ('|' between fields).  The
requests go one after the other on the same TLS connection (keep-alive);
with --pause-file, the client waits before each request after the first
until FILE exists and then removes it (the test rotates a secret then).
Prints one JSON line per response: {"status", "body", "events"} where
events are [[data, arrival_time], ...] for a text/event-stream, and a
last line {"closed": true} when egressd ended the connection.
--h2-preface sends the HTTP/2 connection preface instead and prints what
came back.
"""

import argparse
import json
import os
import socket
import ssl
import sys
import time


def connect(a):
    s = socket.create_connection(a.proxy_addr, timeout=10, source_address=(a.source, 0))
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
               % (a.host, a.port, a.host, a.port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = s.recv(1)
        if not data:
            raise SystemExit("CONNECT: egressd closed")
        head += data
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit("CONNECT: " + head.decode("latin-1").splitlines()[0])
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    ctx.set_alpn_protocols(["h2", "http/1.1"] if a.h2_preface else ["http/1.1"])
    return ctx.wrap_socket(s, server_hostname=a.host)


class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""

    def fill(self):
        data = self.s.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        i = self.buf.index(b"\r\n") + 2
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def response(r):
    status = int(r.line().split()[1])
    fields = {}
    while True:
        line = r.line()
        if line == b"\r\n":
            break
        k, _, v = line.decode("latin-1").partition(":")
        fields[k.strip().lower()] = v.strip()
    body, events = b"", []
    if fields.get("transfer-encoding") == "chunked":
        while True:
            size = int(r.line().split(b";")[0], 16)
            if size == 0:
                r.line()
                break
            chunk = r.exact(size)
            r.line()
            body += chunk
            if fields.get("content-type") == "text/event-stream":
                events.append([chunk.decode().strip(), round(time.time(), 3)])
    else:
        body = r.exact(int(fields.get("content-length", "0")))
    return {"status": status, "body": body.decode("latin-1"), "events": events,
            "deny": fields.get("x-egress-deny"), "proxy_status": fields.get("proxy-status")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--h2-preface", action="store_true")
    ap.add_argument("--pause-file")
    ap.add_argument("requests", nargs="*")
    a = ap.parse_args()
    addr, _, port = a.proxy.rpartition(":")
    a.proxy_addr = (addr, int(port))
    s = connect(a)
    r = Reader(s)
    if a.h2_preface:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        try:
            print(json.dumps(response(r)))
        except (EOFError, OSError, ValueError, IndexError):
            print(json.dumps({"closed": True}))
        return
    for i, req in enumerate(a.requests):
        if i and a.pause_file:
            while not os.path.exists(a.pause_file):
                time.sleep(0.02)
            os.unlink(a.pause_file)
        parts = req.split("|")
        method, path = parts[0].split(" ", 1)
        head = "%s %s HTTP/1.1\r\nHost: %s:%d\r\n" % (method, path, a.host, a.port)
        head += "".join(f.strip() + "\r\n" for f in parts[1:] if f.strip())
        s.sendall((head + "\r\n").encode())
        try:
            print(json.dumps(response(r)), flush=True)
        except (EOFError, OSError):
            print(json.dumps({"closed": True}), flush=True)
            return
    sys.stdout.flush()


if __name__ == "__main__":
    main()
