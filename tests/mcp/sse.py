"""tests/mcp/sse.py PORT TOKEN - the event streams of the Streamable HTTP
transport, with raw sockets, against mcp_fake_server (whose run_command
reports a step "run": start, tick, end).  Prints "ok - ..." lines.

  * A POST whose Accept lists text/event-stream: the request's notifications
    (progress with its token, log messages at the session's level, set by an
    earlier request) as SSE events in chunks, then the answer, then the last
    chunk; the connection serves the next request.  Without it in Accept:
    one JSON body, no notifications.
  * GET with the session id: the session's own stream, one per session
    (409 for a second), carrying resources/updated for a URI it subscribed
    to when another session's tool changes that sandbox, and list_changed;
    DELETE of the session ends the stream.
"""
import json
import socket
import sys

port, token = int(sys.argv[1]), sys.argv[2]
BOTH = "application/json, text/event-stream"


def report(ok, what, detail=None):
    print(("ok - " if ok else "not ok - ") + what)
    if not ok and detail is not None:
        print("detail: " + repr(detail)[:1500])


class Conn:
    def __init__(self):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def _fill(self):
        data = self.s.recv(65536)
        if not data:
            raise EOFError("connection closed")
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def send(self, method, headers, body=None):
        h = {"Host": "127.0.0.1:%d" % port, "Authorization": "Bearer " + token}
        h.update(headers)
        raw = body.encode() if body is not None else b""
        if body is not None:
            h["Content-Type"] = "application/json"
            h["Content-Length"] = str(len(raw))
        head = "%s /mcp HTTP/1.1\r\n" % method + "".join("%s: %s\r\n" % kv for kv in h.items())
        self.s.sendall(head.encode() + b"\r\n" + raw)

    def head(self):
        status = int(self._line().split(b" ")[1])
        headers = {}
        while True:
            line = self._line()
            if not line:
                return status, headers
            k, v = line.decode().split(":", 1)
            headers[k.strip().lower()] = v.strip()

    def chunk(self):
        """The next chunk's bytes; b"" for the last one."""
        n = int(self._line(), 16)
        data = self._take(n)
        if self._take(2) != b"\r\n":
            raise ValueError("a chunk does not end in CRLF")
        if n == 0:
            return b""
        return data

    def body(self, headers):
        if headers.get("transfer-encoding") == "chunked":
            out = b""
            while True:
                c = self.chunk()
                if not c:
                    return out
                out += c
        return self._take(int(headers.get("content-length", "0")))

    def post(self, msg, sid=None, accept=BOTH):
        h = {"Accept": accept}
        if sid:
            h["Mcp-Session-Id"] = sid
        self.send("POST", h, json.dumps(msg))
        status, headers = self.head()
        return status, headers, self.body(headers)


def events(data):
    """The JSON messages of an SSE text: one data line per event."""
    out = []
    for ev in data.decode().split("\n\n"):
        lines = [l[6:] for l in ev.split("\n") if l.startswith("data: ")]
        if lines:
            out.append(json.loads("\n".join(lines)))
    return out


def rpc(method, params=None, id=1):
    m = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        m["params"] = params
    return m


def session(c):
    st, h, b = c.post(rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
    sid = h.get("mcp-session-id")
    c.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    return sid


def call(tool, args, id=2, token=None):
    p = {"name": tool, "arguments": args}
    if token is not None:
        p["_meta"] = {"progressToken": token}
    return rpc("tools/call", p, id)


a = Conn()
sid_a = session(a)
a.post(rpc("logging/setLevel", {"level": "info"}), sid_a)
a.post(call("create_server", {"name": "sse-1", "size": "small", "lifetime": "1h",
                              "policy": "locked"}), sid_a)

# A POST answered with a stream.
st, h, body = a.post(call("run_command", {"name": "sse-1", "command": ["echo", "hi"]}, 7, "p1"),
                     sid_a)
msgs = events(body)
prog = [m["params"] for m in msgs if m.get("method") == "notifications/progress"]
logs = [m["params"] for m in msgs if m.get("method") == "notifications/message"]
report(st == 200 and h.get("content-type") == "text/event-stream" and
       h.get("transfer-encoding") == "chunked" and "content-length" not in h,
       "POST run_command with a progress token and text/event-stream in Accept: 200 "
       "text/event-stream, chunked", (st, h))
report(len(prog) == 3 and all(p["progressToken"] == "p1" for p in prog) and
       [p["message"].split(" (")[0] for p in prog] ==
       ["run: started", "run: running for 3.0 s", "run: done in 3.5 s"],
       "the stream carries the step's progress notifications with the token: start, tick, end",
       prog)
report([l["level"] for l in logs] == ["info", "info"] and
       logs[0]["data"] == "run_command started" and logs[0]["logger"] == "sandboxctl",
       "and the info log messages: the session's level (set by an earlier POST) lasted", logs)
report(msgs and msgs[-1].get("id") == 7 and msgs[-1]["result"]["isError"] is False and
       all("method" in m for m in msgs[:-1]),
       "the answer is the last event, after every notification", msgs[-1:])
st, h, body = a.post(rpc("ping", id=8), sid_a)
report(st == 200 and json.loads(body).get("id") == 8 and
       h.get("content-type") == "application/json",
       "the same connection answers the next request (keep-alive after a chunked stream); "
       "a request with nothing to stream gets JSON", (st, h, body))
st, h, body = a.post(call("run_command", {"name": "sse-1", "command": ["echo"]}, 9, "p2"),
                     sid_a, "application/json")
report(st == 200 and h.get("content-type") == "application/json" and
       json.loads(body)["id"] == 9 and b"notifications/" not in body,
       "without text/event-stream in Accept: one JSON body, no notifications", (h, body))

# The GET stream of another session.
b = Conn()
sid_b = session(b)
g = Conn()
g.send("GET", {"Accept": "text/event-stream", "Mcp-Session-Id": sid_b})
st, h = g.head()
report(st == 200 and h.get("content-type") == "text/event-stream" and
       h.get("transfer-encoding") == "chunked",
       "GET with the session id and Accept text/event-stream: 200, a chunked event stream",
       (st, h))
g2 = Conn()
g2.send("GET", {"Accept": "text/event-stream", "Mcp-Session-Id": sid_b})
st, h = g2.head()
g2.body(h)
report(st == 409, "a second GET stream for the session: 409 (got %d)" % st)
st, h, body = b.post(rpc("resources/subscribe", {"uri": "sandbox://sse-1/info"}, 3), sid_b)
report(st == 200 and json.loads(body).get("result") == {}, "resources/subscribe: {}", body)
a.post(call("extend_server", {"name": "sse-1", "duration": "1h"}, 10), sid_a)
ev = events(g.chunk())
report(ev and ev[0].get("method") == "notifications/resources/updated" and
       ev[0]["params"]["uri"] == "sandbox://sse-1/info",
       "another session's extend_server: resources/updated on the subscriber's GET stream", ev)
a.post(call("create_server", {"name": "sse-2", "size": "small", "lifetime": "1h",
                              "policy": "locked"}, 11), sid_a)
ev = events(g.chunk())
report(ev and ev[0].get("method") == "notifications/resources/list_changed",
       "create_server: resources/list_changed on it", ev)
b.send("DELETE", {"Mcp-Session-Id": sid_b})
st, h = b.head()
b.body(h)
try:
    last = g.chunk()
except (EOFError, OSError, ValueError) as e:
    last = repr(e)
report(st == 200 and last == b"", "DELETE of the session ends its GET stream with the last chunk",
       (st, last))
for c in (a, b, g, g2):
    c.s.close()
