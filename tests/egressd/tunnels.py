#!/usr/bin/env python3
"""tunnels.py - long-lived CONNECT tunnels through egressd (ops.t).

    tunnels.py echo ADDR:PORT...
        Echo servers (asyncio): every byte read is written back; the
        connection is closed once the client has shut its side and all is
        written back.  Prints "ready" once every socket listens.

    tunnels.py run --proxy ADDR:PORT --target HOST:PORT [-n N] [--chunk B]
                   [--interval S] [--min-rounds R] [--until FILE]
                   [--opened FILE] [--out FILE] [--timeout S] [--source ADDR]
        Open N tunnels (`CONNECT HOST:PORT`) at once.  Each one, in rounds
        --interval apart, sends --chunk bytes (a pattern of its own, never
        the same twice) and reads them back, checking every byte.  When all
        N have done their first round, FILE --opened is written.  A tunnel
        stops after --min-rounds rounds and once FILE --until exists (with
        no --until: after --min-rounds), then shuts its side and reads until
        the peer closes.  --timeout bounds the whole run; --source binds
        the tunnels' client end to ADDR (a sandbox's address).  Writes one JSON
        object to --out (default stdout):
          {"n": N, "completed": K, "failures": [{"id", "error"}...],
           "tunnels": [{"id", "port" (the local port), "sent", "recv",
                        "rounds", "opened", "last", "closed", "failed"}...]}
        (times: seconds since the epoch; "last": the last round's answer,
        "failed": when a tunnel that failed did).
        Exit status 0 when every tunnel completed.
"""

import argparse
import asyncio
import hashlib
import json
import os
import sys
import time


# ---- echo

async def on_echo(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def echo_main(addrs):
    servers = []
    for a in addrs:
        host, _, port = a.rpartition(":")
        servers.append(await asyncio.start_server(on_echo, host.strip("[]"), int(port),
                                                  backlog=1024, reuse_address=True))
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


# ---- tunnels

def pattern(tid, rnd, n):
    """n bytes that depend on the tunnel and the round."""
    out = b""
    k = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d/%d/%d" % (tid, rnd, k)).digest()
        k += 1
    return out[:n]


class Run:
    def __init__(self, a):
        self.a = a
        self.first_round = 0
        self.all_open = asyncio.Event()

    async def tunnel(self, tid):
        a = self.a
        t = {"id": tid, "port": None, "sent": 0, "recv": 0, "rounds": 0,
             "opened": None, "last": None, "closed": None}
        phost, _, pport = a.proxy.rpartition(":")
        local = (a.source, 0) if a.source else None
        reader, writer = await asyncio.open_connection(phost, int(pport), local_addr=local)
        t["port"] = writer.get_extra_info("sockname")[1]
        try:
            writer.write(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (a.target, a.target)).encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = head.split(b"\r\n")[0]
            if status.split(b" ")[1:2] != [b"200"]:
                raise RuntimeError("CONNECT answered %r" % status.decode("latin-1"))
            t["opened"] = time.time()
            while True:
                data = pattern(tid, t["rounds"], a.chunk)
                writer.write(data)
                await writer.drain()
                t["sent"] += len(data)
                back = await reader.readexactly(len(data))
                t["recv"] += len(back)
                if back != data:
                    raise RuntimeError("round %d: the echo differs" % t["rounds"])
                t["rounds"] += 1
                t["last"] = time.time()
                if t["rounds"] == 1:
                    self.first_round += 1
                    if self.first_round == a.n:
                        self.all_open.set()
                if t["rounds"] >= a.min_rounds and (a.until is None or os.path.exists(a.until)):
                    break
                await asyncio.sleep(a.interval)
            writer.write_eof()
            rest = await reader.read()
            if rest:
                t["recv"] += len(rest)
                raise RuntimeError("%d bytes after the last round" % len(rest))
            t["closed"] = time.time()
            return t, None
        except (asyncio.IncompleteReadError, ConnectionError, OSError, RuntimeError) as e:
            t["failed"] = time.time()
            return t, "%s: %s (after %d rounds)" % (type(e).__name__, e, t["rounds"])
        finally:
            writer.close()

    async def guarded(self, tid):
        try:
            return await self.tunnel(tid)
        except (ConnectionError, OSError) as e:
            return {"id": tid, "port": None, "sent": 0, "recv": 0, "rounds": 0}, "connect: %s" % e

    async def opened_file(self):
        await self.all_open.wait()
        if self.a.opened:
            with open(self.a.opened + ".tmp", "w") as f:
                f.write("%f\n" % time.time())
            os.rename(self.a.opened + ".tmp", self.a.opened)

    async def main(self):
        marker = asyncio.ensure_future(self.opened_file())
        tasks = [asyncio.ensure_future(self.guarded(i)) for i in range(self.a.n)]
        done, pending = await asyncio.wait(tasks, timeout=self.a.timeout)
        for p in pending:
            p.cancel()
        marker.cancel()
        out = {"n": self.a.n, "completed": 0, "failures": [], "tunnels": []}
        for i, task in enumerate(tasks):
            if task in pending:
                out["failures"].append({"id": i, "error": "still running after --timeout"})
                continue
            t, err = task.result()
            out["tunnels"].append(t)
            if err:
                out["failures"].append({"id": i, "error": err})
            else:
                out["completed"] += 1
        return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "echo":
        asyncio.run(echo_main(sys.argv[2:]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["run"])
    ap.add_argument("--proxy", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--min-rounds", type=int, default=10)
    ap.add_argument("--until")
    ap.add_argument("--opened")
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--source")
    a = ap.parse_args()
    out = asyncio.run(Run(a).main())
    text = json.dumps(out)
    if a.out:
        with open(a.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.rename(a.out + ".tmp", a.out)
    else:
        print(text)
    return 0 if out["completed"] == a.n else 1


if __name__ == "__main__":
    sys.exit(main())
