#!/usr/bin/env python3
"""reflectd.py - an origin that sends requests back (inject-reflect.t),
behind egressd's credential injection.

    reflectd.py --log FILE --cert PEM --key KEY --listen ADDR:PORT

HTTPS, HTTP/1.1 with keep-alive, one thread per connection.  It does what
an origin that echoes does, so the test can see whether a secret egressd
added comes back to the sandbox:
    TRACE, TRACK any path   200 message/http: the request head as received
                            (what Apache does by default for TRACE)
    GET /echo/raw           the request head, Content-Length
    GET /echo/base64        the head in base64 (one line)
    GET /echo/url           the head percent-encoded (urllib.parse.quote)
    GET /echo/split         the head, in two TCP writes 0.3 s apart, cut in
                            the middle of the x-api-key field's value
    GET /echo/chunked       the head chunked, one chunk boundary in the
                            middle of that value, each chunk its own write
    GET /echo/field         an empty body; the x-api-key value in a field
                            of the response head (X-Seen)
    GET /hello              "hello from reflectd\\n"
    GET /bytes/N            N bytes of "abcdefghijklmnop" repeated
    PATCH, DELETE, PUT, POST any path: "METHOD ok\\n" (the body read, dropped)
    anything else           404
Each request is one JSON line in --log: {"event": "request", "method",
"path", "has_key": whether an x-api-key or Authorization field came}.
Never a field's value.  Prints "ready" once it listens.
"""

import argparse
import base64
import json
import socket
import ssl
import threading
import time
import urllib.parse

args = None
log_lock = threading.Lock()


def log(**kv):
    with log_lock:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(kv, sort_keys=True) + "\n")


def read_head(conn, buf):
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None, b""
        buf += data
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def fields(head):
    out = {}
    for line in head.split(b"\r\n")[1:]:
        k, sep, v = line.partition(b":")
        if sep:
            out[k.strip().lower().decode("latin-1")] = v.strip()
    return out


def drop_body(conn, rest, f):
    """Read and drop a Content-Length body; returns what follows it."""
    n = int(f.get("content-length", b"0"))
    while len(rest) < n:
        data = conn.recv(65536)
        if not data:
            break
        rest += data
    return rest[n:]


def answer(conn, status, body, extra=b"", ctype=b"text/plain"):
    conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n"
                 % (status, ctype, len(body), extra) + body)


def split_at_key(head):
    """The offset in the middle of the x-api-key value (or of the head)."""
    i = head.lower().find(b"x-api-key:")
    if i < 0:
        return len(head) // 2
    end = head.index(b"\r\n", i)
    start = i + len(b"x-api-key:") + 1
    return (start + end) // 2


def serve_one(conn, method, path, head, f):
    if method in (b"TRACE", b"TRACK"):
        answer(conn, 200, head, ctype=b"message/http")
    elif path == b"/echo/raw":
        answer(conn, 200, head)
    elif path == b"/echo/base64":
        answer(conn, 200, base64.b64encode(head) + b"\n")
    elif path == b"/echo/url":
        answer(conn, 200, urllib.parse.quote(head).encode() + b"\n")
    elif path == b"/echo/split":
        cut = split_at_key(head)
        conn.sendall(b"HTTP/1.1 200 X\r\nContent-Length: %d\r\n\r\n" % len(head) + head[:cut])
        time.sleep(0.3)
        conn.sendall(head[cut:])
    elif path == b"/echo/chunked":
        cut = split_at_key(head)
        conn.sendall(b"HTTP/1.1 200 X\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in (head[:cut], head[cut:]):
            conn.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            time.sleep(0.3)
        conn.sendall(b"0\r\n\r\n")
    elif path == b"/echo/field":
        answer(conn, 200, b"", extra=b"X-Seen: " + f.get("x-api-key", b"-") + b"\r\n")
    elif path == b"/hello":
        answer(conn, 200, b"hello from reflectd\n")
    elif path.startswith(b"/bytes/"):
        n = int(path[len(b"/bytes/"):])
        answer(conn, 200, (b"abcdefghijklmnop" * (n // 16 + 1))[:n])
    elif method in (b"PATCH", b"DELETE", b"PUT", b"POST"):
        answer(conn, 200, method + b" ok\n")
    else:
        answer(conn, 404, b"not found\n")


def handle(conn):
    buf = b""
    try:
        while True:
            head, buf = read_head(conn, buf)
            if head is None:
                return
            method, path = head.split(b" ", 2)[:2]
            f = fields(head)
            buf = drop_body(conn, buf, f)
            log(event="request", method=method.decode("latin-1"), path=path.decode("latin-1"),
                has_key="x-api-key" in f or "authorization" in f)
            serve_one(conn, method, path, head, f)
    except (OSError, ValueError):
        pass
    finally:
        conn.close()


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--listen", required=True)
    args = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    addr, _, port = args.listen.rpartition(":")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    s.listen(64)
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        try:
            c = ctx.wrap_socket(c, server_side=True)
        except (OSError, ssl.SSLError):
            c.close()
            continue
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(c,), daemon=True).start()


if __name__ == "__main__":
    main()
