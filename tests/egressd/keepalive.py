#!/usr/bin/env python3
"""keepalive.py - HTTP requests on one kept-alive proxy connection, for
egressd's end-to-end tests of what happens between two requests.

    keepalive.py [--source ADDR] [--timeout S] PROXY STEP...
      get:URL[|NAME: VALUE]...   an absolute-URI GET (HTTP/1.1, keep-alive)
                                 with extra header fields, and its response
      wait:PATH                  wait (at most --timeout) until PATH exists:
                                 the script's go-ahead for the next step
      sleep:S                    wait S seconds

Requests go on the connection of the one before, as long as egressd keeps
it open; one closed in between (seen before the request is sent, or as an
end instead of an answer) is noted and a new connection is made.  One JSON
line per get: {"status", "deny" (X-Egress-Deny or null), "proxy_status",
"connection" (the Connection field or null), "body" (latin-1, cut to 300),
"reused" (true when it went on the connection of the request before),
"closed_before" (egressd had closed that connection), "conn" (1, 2, ...)}.
--source binds the client's end to ADDR (the sandbox's address).  Python
standard library only.
"""
import argparse
import json
import os
import select
import socket
import sys
import time


class Conn:
    def __init__(self, proxy, source, timeout):
        host, _, port = proxy.rpartition(":")
        self.sock = socket.create_connection(
            (host, int(port)), timeout=timeout, source_address=(source, 0) if source else None
        )
        self.buf = b""

    def closed_by_peer(self):
        """True when the peer has closed (an end or a reset is waiting)."""
        r, _, _ = select.select([self.sock], [], [], 0)
        if not r:
            return False
        try:
            data = self.sock.recv(65536, socket.MSG_PEEK)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self.fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        n = int(fields.get("content-length", "0"))
        while len(self.buf) < n:
            self.fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, fields, body

    def close(self):
        self.sock.close()


def request(url, extra):
    host = url.split("/")[2]
    head = "GET %s HTTP/1.1\r\nHost: %s\r\n" % (url, host)
    for field in extra:
        head += field + "\r\n"
    return (head + "\r\n").encode("latin-1")


def get(state, arg):
    url, *extra = arg.split("|")
    closed_before = state["conn"] is not None and state["conn"].closed_by_peer()
    reused = state["conn"] is not None and not closed_before
    for attempt in (1, 2):
        if not reused:
            if state["conn"] is not None:
                state["conn"].close()
            state["conn"] = Conn(state["proxy"], state["source"], state["timeout"])
            state["n"] += 1
        try:
            state["conn"].sock.sendall(request(url, extra))
            status, fields, body = state["conn"].response()
            break
        except (EOFError, ConnectionResetError, BrokenPipeError):
            if attempt == 2:
                raise
            closed_before, reused = True, False
    print(json.dumps({
        "status": status, "deny": fields.get("x-egress-deny"),
        "proxy_status": fields.get("proxy-status"), "connection": fields.get("connection"),
        "body": body[:300].decode("latin-1"), "reused": reused,
        "closed_before": closed_before, "conn": state["n"],
    }), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("proxy")
    ap.add_argument("steps", nargs="+")
    a = ap.parse_args()
    state = {"proxy": a.proxy, "source": a.source, "timeout": a.timeout, "conn": None, "n": 0}
    for step in a.steps:
        kind, _, arg = step.partition(":")
        if kind == "get":
            get(state, arg)
        elif kind == "wait":
            end = time.monotonic() + a.timeout
            while not os.path.exists(arg):
                if time.monotonic() > end:
                    sys.exit("keepalive.py: no go-ahead %s within %s s" % (arg, a.timeout))
                time.sleep(0.02)
        elif kind == "sleep":
            time.sleep(float(arg))
        else:
            sys.exit("keepalive.py: unknown step %r" % step)


if __name__ == "__main__":
    main()
