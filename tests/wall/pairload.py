#!/usr/bin/env python3
"""pairload.py - a steady stream of new proxy requests, each on a new
connection, for tests/wall/pair.t: one sandbox's load through the pair's
virtual address while its nodes fail and return.

    pairload.py --proxy ADDR:PORT --log FILE [--pause S] SPEC...

SPEC is connect:HOST:PORT (CONNECT, answered once egressd has decided and
connected) or http:HOST (GET http://HOST/hello, absolute-URI).  The specs
are tried in turn, one at a time, --pause seconds apart (default 0.05),
until SIGTERM.  Each try is one line of --log:

    START END SPEC RESULT

START and END in seconds since the epoch (time.time(), to compare with the
test's `date +%s.%N`), RESULT the status egressd answered (200, 403, ...)
or fail:WHY when there was none (no connection within 0.3 s, a reset, no
answer within 2 s).  Prints "ready" before the first try.  Python's
standard library only.
"""

import argparse
import signal
import socket
import sys
import time

CONNECT_S = 0.3  # a SYN to a gone MAC: give up soon, try again
ANSWER_S = 2.0


def request(spec):
    """The bytes of the request SPEC asks for."""
    kind, _, rest = spec.partition(":")
    if kind == "connect":
        return ("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (rest, rest)).encode()
    if kind == "http":
        return ("GET http://%s/hello HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                % (rest, rest)).encode()
    raise SystemExit("pairload.py: %s: expected connect:HOST:PORT or http:HOST" % spec)


def one(proxy, spec):
    """RESULT of one try of spec through proxy."""
    try:
        s = socket.create_connection(proxy, timeout=CONNECT_S)
    except OSError as e:
        return "fail:connect:%s" % type(e).__name__
    try:
        s.settimeout(ANSWER_S)
        s.sendall(request(spec))
        head = b""
        while b"\r\n" not in head and len(head) < 4096:
            got = s.recv(4096)
            if not got:
                break
            head += got
        parts = head.split(b" ", 2)
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/1.") and parts[1].isdigit():
            return parts[1].decode()
        return "fail:no-answer"
    except OSError as e:
        return "fail:%s" % type(e).__name__
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description="new proxy requests in a loop")
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--pause", type=float, default=0.05)
    ap.add_argument("specs", nargs="+")
    args = ap.parse_args()
    host, _, port = args.proxy.rpartition(":")
    proxy = (host, int(port))
    for spec in args.specs:
        request(spec)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log = open(args.log, "a", encoding="utf-8", buffering=1)
    print("ready", flush=True)
    i = 0
    while True:
        spec = args.specs[i % len(args.specs)]
        i += 1
        start = time.time()
        result = one(proxy, spec)
        log.write("%.3f %.3f %s %s\n" % (start, time.time(), spec, result))
        time.sleep(args.pause)


if __name__ == "__main__":
    main()
