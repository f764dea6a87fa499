#!/usr/bin/env python3
"""egress_recorder.py - stands in for egressd's admin API in sandboxctl's tests
until egressd itself has landed: it keeps the bindings it is sent, as egressd
would (PUT /v1/sandboxes/{id}, DELETE /v1/sandboxes/{id}, PUT /v1/sandboxes to
replace the set, GET /v1/sandboxes, GET /v1/status), and records every request
so a test can assert on what sandboxctl sent.

    egress_recorder.py --unix PATH | --listen 127.0.0.1:0 --port-file FILE
                       --state FILE

After each request FILE holds {"bindings": {id: binding}, "requests":
[{method, path, body}]}. Test control: POST /_rec/fail {"method": "PUT",
"count": 1} makes the next matching requests answer 500.
"""

import argparse
import http.server
import json
import os
import re
import signal
import socketserver
import sys
import threading

LOCK = threading.Lock()
STATE = {"bindings": {}, "requests": []}
FAULTS = []


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def address_string(self):
        return "recorder"

    def answer(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return self.answer(400, {"error": "body is not JSON"})
        if self.path == "/_rec/fail" and method == "POST":
            with LOCK:
                FAULTS.append({"method": body.get("method", "PUT"), "count": int(body.get("count", 1))})
            return self.answer(200, {})
        with LOCK:
            STATE["requests"].append({"method": method, "path": self.path, "body": body})
            for f in FAULTS:
                if f["count"] > 0 and f["method"] == method:
                    f["count"] -= 1
                    save()
                    return self.answer(500, {"error": "recorder: injected failure"})
            status, obj = self.apply(method, body)
            save()
        return self.answer(status, obj)

    def apply(self, method, body):
        m = re.fullmatch(r"/v1/sandboxes/([0-9]+)", self.path)
        if m and method == "PUT":
            if not isinstance(body, dict) or body.get("id") != m.group(1):
                return 400, {"error": "binding id does not match the path"}
            STATE["bindings"][m.group(1)] = body
            return 200, body
        if m and method == "DELETE":
            if STATE["bindings"].pop(m.group(1), None) is None:
                return 404, {"error": "no such sandbox"}
            return 200, {}
        if self.path == "/v1/sandboxes" and method == "PUT":
            if not isinstance(body, list):
                return 400, {"error": "expected a list of bindings"}
            STATE["bindings"] = {b["id"]: b for b in body}
            return 200, {"count": len(body)}
        if self.path == "/v1/sandboxes" and method == "GET":
            return 200, list(STATE["bindings"].values())
        if self.path == "/v1/status" and method == "GET":
            return 200, {"sandboxes": len(STATE["bindings"])}
        return 404, {"error": "not found"}

    def do_GET(self):
        self.handle_any("GET")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")


def save():
    tmp = ARGS.state + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STATE, f)
    os.replace(tmp, ARGS.state)


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        req, _ = super().get_request()
        return req, ("unix", 0)


class TcpServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--unix")
    p.add_argument("--listen")
    p.add_argument("--port-file")
    p.add_argument("--state", required=True)
    ARGS = p.parse_args()
    if ARGS.unix:
        if os.path.exists(ARGS.unix):
            os.unlink(ARGS.unix)
        srv = UnixServer(ARGS.unix, Handler)
    else:
        host, port = ARGS.listen.rsplit(":", 1)
        srv = TcpServer((host, int(port)), Handler)
    save()
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]) if not ARGS.unix else "unix")
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    srv.serve_forever()


if __name__ == "__main__":
    main()
