"""origin.py - HTTP origins for sandboxctl's integration scripts.

    python3 -S -u origin.py NAME=ADDR [NAME=ADDR...]

One HTTP server on port 8000 of each ADDR; GET and POST (its body read
and dropped) answer 200 with the body "origin NAME\n", so a script can
tell which origin a request reached.
Prints "ready" once every server listens, then serves until killed.
"""
import http.server
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("origin %s\n" % self.server.name).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def log_message(self, *args):
        pass


for spec in sys.argv[1:]:
    name, addr = spec.split("=")
    server = http.server.ThreadingHTTPServer((addr, 8000), Handler)
    server.name = name
    threading.Thread(target=server.serve_forever, daemon=True).start()
print("ready")
threading.Event().wait()
