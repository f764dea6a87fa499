#!/usr/bin/env python3
"""npmreg.py - the smallest npm registry, for egressd's request-rule tests.

    npmreg.py --listen ADDR:PORT --log FILE --name HOST

Serves one package, leftpad-test 1.0.0 (a tarball made at start, with
its sha1 and sha512 in the packument, as registry.npmjs.org gives them):
    GET /leftpad-test                          the packument (JSON)
    GET /leftpad-test/-/leftpad-test-1.0.0.tgz the tarball
    PUT /NAME                                  a publish: 201 {"ok": true}
Anything else is 404.  Every request is one JSON line in --log
{"method", "path"}.  Prints "ready" once it listens.
"""

import argparse
import base64
import hashlib
import io
import json
import sys
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PKG = "leftpad-test"


def tarball():
    src = b"module.exports = (s, n) => String(s).padStart(n);\n"
    meta = json.dumps({"name": PKG, "version": "1.0.0", "main": "index.js"}).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (("package/package.json", meta), ("package/index.js", src)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--name", required=True)
    a = ap.parse_args()
    addr, port = a.listen.rsplit(":", 1)
    tgz = tarball()
    base = "http://%s:%s" % (a.name, port)
    packument = json.dumps({
        "name": PKG,
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": PKG, "version": "1.0.0", "main": "index.js",
            "dist": {
                "tarball": "%s/%s/-/%s-1.0.0.tgz" % (base, PKG, PKG),
                "shasum": hashlib.sha1(tgz).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
            }}},
    }).encode()
    lock = threading.Lock()
    log = open(a.log, "a", encoding="utf-8")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def note(self):
            with lock:
                log.write(json.dumps({"method": self.command, "path": self.path}) + "\n")
                log.flush()

        def send(self, status, body, ctype="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            self.note()
            path = self.path.split("?")[0]
            if path == "/" + PKG:
                self.send(200, packument)
            elif path == "/%s/-/%s-1.0.0.tgz" % (PKG, PKG):
                self.send(200, tgz, "application/octet-stream")
            else:
                self.send(404, b'{"error":"not found"}')

        do_HEAD = do_GET

        def do_PUT(self):
            self.note()
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            self.send(201, b'{"ok":true}')

    srv = ThreadingHTTPServer((addr, int(port)), Handler)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
