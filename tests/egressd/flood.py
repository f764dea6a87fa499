#!/usr/bin/env python3
"""flood.py - one sandbox's many CONNECTs at once, for starve.t.

    flood.py --proxy ADDR:PORT --source ADDR --count N --domain DOMAIN --port PORT
             --ready FILE --until FILE [--max-hold S]

Opens N connections to --proxy from --source (asyncio, at most 256 connects
under way at a time), and on each sends

    CONNECT uNNNN.DOMAIN:PORT HTTP/1.1
    Host: uNNNN.DOMAIN:PORT

with NNNN = 0..N-1, so every one asks for a name of its own.  Once every
request is sent it writes one JSON line to --ready ({"sent", "open_s"}: how
many, and how long opening and sending took).  Then it reads each answer's
status line while it holds every connection open, until the file --until
exists (or --max-hold seconds, default 20, pass); then it closes them all at
once and prints one JSON line:

    {"count": N, "sent": n, "errors": n, "status": {"429": n, ...},
     "waiting": n, "open_s": s, "held_s": s}

"waiting" is the connections that had no answer when they were closed, and
"status" counts the answers' status codes ("closed" for a connection that
ended without one).  Python standard library only.
"""

import argparse
import asyncio
import json
import os
import time


class Flood:
    def __init__(self, a):
        self.a = a
        self.host, _, port = a.proxy.rpartition(":")
        self.pport = int(port)
        self.writers, self.status = [], {}
        self.sent = self.errors = 0
        self.gate = asyncio.Semaphore(256)

    async def one(self, i):
        """One connection: connect, send its CONNECT, wait for the status line."""
        name = "u%04d.%s:%d" % (i, self.a.domain, self.a.port)
        try:
            async with self.gate:
                r, w = await asyncio.open_connection(self.host, self.pport,
                                                     local_addr=(self.a.source, 0))
            self.writers.append(w)
            w.write(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (name, name)).encode())
            await w.drain()
        except OSError:
            self.errors += 1
            return
        self.sent += 1
        try:
            line = await r.readline()
        except OSError:
            line = b""
        words = line.split()
        code = words[1].decode("ascii", "replace") if len(words) > 1 else "closed"
        self.status[code] = self.status.get(code, 0) + 1

    async def hold(self):
        """Until --until exists or --max-hold passes."""
        end = time.monotonic() + self.a.max_hold
        while not os.path.exists(self.a.until) and time.monotonic() < end:
            await asyncio.sleep(0.02)

    async def run(self):
        start = time.monotonic()
        tasks = [asyncio.create_task(self.one(i)) for i in range(self.a.count)]
        while self.sent + self.errors < self.a.count:
            await asyncio.sleep(0.01)
        open_s = time.monotonic() - start
        with open(self.a.ready, "w", encoding="utf-8") as f:
            f.write(json.dumps({"sent": self.sent, "open_s": round(open_s, 3)}) + "\n")
        await self.hold()
        held_s = time.monotonic() - start
        for w in self.writers:
            w.transport.abort()
        waiting = sum(1 for t in tasks if not t.done())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        print(json.dumps({"count": self.a.count, "sent": self.sent, "errors": self.errors,
                          "status": self.status, "waiting": waiting,
                          "open_s": round(open_s, 3), "held_s": round(held_s, 3)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description="many CONNECTs from one source address")
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--domain", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--until", required=True)
    ap.add_argument("--max-hold", type=float, default=20.0)
    asyncio.run(Flood(ap.parse_args()).run())


if __name__ == "__main__":
    main()
