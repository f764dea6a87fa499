#!/usr/bin/env python3
"""soakload.py - many short connections through egressd (soak.t).

    soakload.py serve --http ADDR:PORT --echo ADDR:PORT
        The origins (asyncio): --http answers every request head with
        "200", body "ok\\n", and closes; --echo writes back what it reads and
        closes after the client's EOF.  Prints "ready".

    soakload.py load --proxy ADDR:PORT --http HOST:PORT --echo HOST:PORT
                     --deny HOST:PORT [-n N] [--concurrency C] [--timeout S]
        N connections to the proxy, C at a time, in turn of three kinds:
          http     GET http://HOST:PORT/soak (absolute URI), Connection:
                   close; the answer must be 200 with the body "ok\\n"
          connect  CONNECT to --echo, 200, then 5 bytes there and back,
                   then EOF both ways
          deny     CONNECT to --deny; the answer must be a 403
        (9 in 20 http, 9 in 20 connect, 2 in 20 deny).  Prints one JSON
        object: {"n", "ok": {kind: count}, "want": {kind: count},
        "errors": count, "first_errors": [...], "seconds"}.  Exit status 0
        when every connection went as it must.
"""

import argparse
import asyncio
import json
import sys
import time

from tunnels import on_echo  # the echo origin of tunnels.py, beside this file


# ---- origins

async def on_http(reader, writer):
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")
        await writer.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(a):
    servers = []
    for addr, fn in ((a.http, on_http), (a.echo, on_echo)):
        host, _, port = addr.rpartition(":")
        servers.append(await asyncio.start_server(fn, host, int(port), backlog=4096,
                                                  reuse_address=True))
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


# ---- load

KINDS = ["http"] * 9 + ["connect"] * 9 + ["deny"] * 2


async def one(a, kind):
    host, _, port = a.proxy.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        if kind == "http":
            writer.write(b"GET http://%s/soak HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                         % (a.http.encode(), a.http.encode()))
            data = await reader.read(-1)
            if not (data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"\r\n\r\nok\n")):
                raise RuntimeError("http: %r" % data[:80])
        elif kind == "connect":
            writer.write(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.echo.encode(), a.echo.encode()))
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError("connect: %r" % head[:80])
            writer.write(b"ping\n")
            back = await reader.readexactly(5)
            if back != b"ping\n":
                raise RuntimeError("connect: echo %r" % back)
            writer.write_eof()
            rest = await reader.read(-1)
            if rest:
                raise RuntimeError("connect: %d bytes after the echo" % len(rest))
        else:
            writer.write(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.deny.encode(), a.deny.encode()))
            data = await reader.read(-1)
            if not data.startswith(b"HTTP/1.1 403 "):
                raise RuntimeError("deny: %r" % data[:80])
    finally:
        writer.close()


async def load(a):
    res = {"n": a.n, "ok": {k: 0 for k in set(KINDS)}, "want": {k: 0 for k in set(KINDS)},
           "errors": 0, "first_errors": []}
    for i in range(a.n):
        res["want"][KINDS[i % len(KINDS)]] += 1
    next_i = 0
    t0 = time.monotonic()

    async def worker():
        nonlocal next_i
        while next_i < a.n:
            i = next_i
            next_i += 1
            kind = KINDS[i % len(KINDS)]
            try:
                async with asyncio.timeout(a.timeout):
                    await one(a, kind)
                res["ok"][kind] += 1
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                    ConnectionError, OSError, RuntimeError) as e:
                res["errors"] += 1
                if len(res["first_errors"]) < 10:
                    res["first_errors"].append("#%d %s: %s: %s" % (i, kind, type(e).__name__, e))

    await asyncio.gather(*(worker() for _ in range(a.concurrency)))
    res["seconds"] = round(time.monotonic() - t0, 2)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve", "load"])
    ap.add_argument("--proxy")
    ap.add_argument("--http", required=True)
    ap.add_argument("--echo", required=True)
    ap.add_argument("--deny")
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=10)
    a = ap.parse_args()
    if a.mode == "serve":
        asyncio.run(serve(a))
        return 0
    res = asyncio.run(load(a))
    print(json.dumps(res, sort_keys=True), flush=True)
    return 0 if res["errors"] == 0 and res["ok"] == res["want"] else 1


if __name__ == "__main__":
    sys.exit(main())
