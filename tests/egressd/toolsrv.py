#!/usr/bin/env python3
"""toolsrv.py - an HTTPS server for real tools behind egressd (tools.t).

    toolsrv.py --listen ADDR:PORT --cert PEM --key KEY --root DIR --log FILE
               [--git DIR] [--require-auth USER:TOKEN | --require-bearer TOKEN]

Serves the files under --root (GET and HEAD; a directory answers with its
index.json, as an npm registry answers a package name with its document).
With --git, paths under /git/ go to `git http-backend` (the smart HTTP
protocol) with DIR as GIT_PROJECT_ROOT, every repository exported.
HTTP/1.1 with keep-alive, one thread per connection.  Every request is one
JSON line in --log: {"method", "path", "status", "bytes"} (bytes: the body
sent).  Prints "ready" once it listens.

--require-auth USER:TOKEN answers every request without "Authorization:
Basic base64(USER:TOKEN)" with 401 and "WWW-Authenticate: Basic" (as a
forge does), and runs `git http-backend` as REMOTE_USER=USER, so that it
takes pushes too.  --require-bearer TOKEN wants "Authorization: Bearer
TOKEN" (as an npm registry wants its _authToken).  With either, each log
line has "auth": "match", "mismatch" or "absent", and "auth_sha256": the
first 16 hex digits of the SHA-256 of the credential seen (the password of
a Basic one), never the value.
"""

import argparse
import base64
import binascii
import hashlib
import json
import os
import subprocess
import sys
import threading

import tlsserver

log_lock = threading.Lock()
args = None


def log(**kv):
    with log_lock:
        with open(args.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(kv, sort_keys=True) + "\n")


class Handler(tlsserver.Handler):
    TIMEOUT = 30

    def answer(self, status, body, ctype="application/octet-stream", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        auth = {}
        if args.require_auth or args.require_bearer:
            auth = {"auth": self.auth_flag, "auth_sha256": self.auth_sha256}
        log(method=self.command, path=self.path, status=status,
            bytes=0 if self.command == "HEAD" else len(body), **auth)

    def authorized(self):
        """Whether the request carries the credential --require-auth or
        --require-bearer names (True when neither is given); answers 401
        when it does not."""
        self.auth_flag, self.auth_sha256 = None, None
        if not (args.require_auth or args.require_bearer):
            return True
        h = self.headers.get("Authorization")
        scheme = "Basic" if args.require_auth else "Bearer"
        got = None
        if h and h.startswith(scheme + " "):
            got = h[len(scheme) + 1:].strip()
            if args.require_auth:
                try:
                    got = base64.b64decode(got, validate=True).decode("utf-8", "replace")
                except (binascii.Error, ValueError):
                    pass
        want = args.require_auth or args.require_bearer
        if got is None:
            self.auth_flag = "absent"
        else:
            self.auth_flag = "match" if got == want else "mismatch"
            secret = got.partition(":")[2] if args.require_auth else got
            self.auth_sha256 = hashlib.sha256(secret.encode()).hexdigest()[:16]
        if self.auth_flag == "match":
            return True
        self.answer(401, b"authentication required\n", "text/plain",
                    [("WWW-Authenticate", '%s realm="toolsrv"' % scheme)])
        return False

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        if not self.authorized():
            return
        if args.git and self.path.startswith("/git/"):
            return self.git(b"")
        path = self.path.split("?")[0]
        full = os.path.realpath(os.path.join(args.root, path.lstrip("/")))
        root = os.path.realpath(args.root)
        if full != root and not full.startswith(root + os.sep):
            return self.answer(404, b"not found\n", "text/plain")
        if os.path.isdir(full):
            full = os.path.join(full, "index.json")
        if not os.path.isfile(full):
            return self.answer(404, b"not found\n", "text/plain")
        with open(full, "rb") as f:
            body = f.read()
        ctype = "application/json" if full.endswith(".json") else "application/octet-stream"
        self.answer(200, body, ctype)

    def do_POST(self):
        body = self.read_body()
        if not self.authorized():
            return
        if args.git and self.path.startswith("/git/"):
            return self.git(body)
        self.answer(404, b"not found\n", "text/plain")

    def git(self, body):
        """Run git http-backend as a CGI program (RFC 3875)."""
        path, _, query = self.path[len("/git"):].partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": args.git,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": os.environ.get("HOME", "/nonexistent"),
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REMOTE_ADDR": self.client_address[0],
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        if args.require_auth:
            env["REMOTE_USER"] = args.require_auth.partition(":")[0]
        for name in ("Git-Protocol", "Content-Encoding"):
            if self.headers.get(name):
                env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
        p = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        out = p.stdout
        sep = out.find(b"\r\n\r\n")
        sep_len = 4
        if sep < 0 or (out.find(b"\n\n") >= 0 and out.find(b"\n\n") < sep):
            sep, sep_len = out.find(b"\n\n"), 2
        if p.returncode != 0 or sep < 0:
            sys.stderr.write("git http-backend: status %d: %s\n" % (p.returncode, p.stderr.decode()))
            return self.answer(500, b"git http-backend failed\n", "text/plain")
        status, headers = 200, []
        for line in out[:sep].decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k.strip(), v.strip()))
        ctype = dict((k.lower(), v) for k, v in headers).get("content-type", "text/plain")
        rest = [(k, v) for k, v in headers if k.lower() not in ("content-type", "content-length")]
        self.answer(status, out[sep + sep_len:], ctype, rest)


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--git")
    auth = ap.add_mutually_exclusive_group()
    auth.add_argument("--require-auth", metavar="USER:TOKEN")
    auth.add_argument("--require-bearer", metavar="TOKEN")
    args = ap.parse_args()
    addr, _, port = args.listen.rpartition(":")
    srv = tlsserver.Server((addr, int(port)), Handler, args.cert, args.key)
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
