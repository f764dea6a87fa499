#!/usr/bin/env python3
"""gitsrv.py - git's smart HTTP for egressd's tests: `git http-backend`
(Debian's git, /usr/lib/git-core) run as a CGI program (RFC 3875) for each
request.

    gitsrv.py --listen ADDR:PORT --root DIR [--tls CERT KEY] [--log FILE]

The repositories under DIR are at http(s)://HOST:PORT/git/NAME.git, every
one exported (GIT_HTTP_EXPORT_ALL); pushes need the repository's own
`http.receivepack true`.  The CGI runner is this file's: it gives the
program the request's meta-variables and body, reads its whole answer and
sends it as an HTTP/1.1 response with a Content-Length (git http-backend
streams its answers without one, and an answer delimited by the close of a
TLS connection is one clients may not trust).  Request bodies may be
chunked (git sends large pushes so).  --tls serves HTTPS with that
certificate; --log writes a JSON line per request (method, path, the
Authorization field as received).  Prints "ready" once it listens.
"""

import argparse
import json
import os
import ssl
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BACKEND = "/usr/lib/git-core/git-http-backend"
PREFIX = "/git"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = None
    log_file = None

    def log_message(self, *args):
        pass

    def body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def cgi(self):
        if Handler.log_file is not None:
            Handler.log_file.write(json.dumps({
                "method": self.command, "path": self.path,
                "authorization": self.headers.get("Authorization")}) + "\n")
            Handler.log_file.flush()
        path, _, query = self.path.partition("?")
        if not path.startswith(PREFIX + "/"):
            self.answer(404, [("Content-Type", "text/plain")], b"not here\n")
            return
        data = self.body() if self.command == "POST" else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": Handler.root, "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command, "PATH_INFO": path[len(PREFIX):],
            "QUERY_STRING": query, "CONTENT_LENGTH": str(len(data)),
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "REMOTE_ADDR": self.client_address[0],
        }
        out = subprocess.run([BACKEND], input=data, env=env, capture_output=True).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        status, fields = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                fields.append((name, value.strip()))
        self.answer(status, fields, body)

    def answer(self, status, fields, body):
        self.send_response(status)
        for name, value in fields:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = cgi
    do_POST = cgi


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--log")
    a = ap.parse_args()
    addr, port = a.listen.rsplit(":", 1)
    Handler.root = os.path.abspath(a.root)
    if a.log:
        Handler.log_file = open(a.log, "a", encoding="utf-8")
    srv = ThreadingHTTPServer((addr, int(port)), Handler)
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls[0], a.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
