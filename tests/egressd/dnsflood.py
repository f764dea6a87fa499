#!/usr/bin/env python3
"""dnsflood.py - hostile and ordinary clients of egressd's policy DNS server,
for dnstcp.t and dnsflood.t.

    dnsflood.py noread --server ADDR:PORT --source ADDR --conns N --seconds S
                       [--pid PID]
        N TCP connections that send framed A queries (for random names under
        evil.test) as fast as the server takes them and never read an
        answer, until every one is closed by the server or S seconds pass.
        With --pid, egressd's VmRSS is sampled meanwhile.  Prints
        {"conns", "queries", "closed", "closed_s": [s...], "seconds",
         "rss0", "rss_max" (KiB), "cpu_s" (egressd's CPU meanwhile)}.

    dnsflood.py hold --server ADDR:PORT --source ADDR[,ADDR...] --conns N
                     --ready FILE [--dribble S] [--seconds S]
        N TCP connections, the sources taken in turn, each sending the first
        byte of a query's length; every --dribble seconds (0: never) one
        more byte, so no query ever completes.  Writes {"opened"} to --ready
        once every connect is done, then watches them until every one is
        closed by the server or --seconds pass.  Prints {"opened",
        "errors", "open": [[s, n]...] (how many were open when), "closed",
        "all_closed_s" (null when some stayed)}.

    dnsflood.py flood --server ADDR:PORT --source ADDR --seconds S
                      [--sockets K]
        UDP A queries for random names under evil.test from K sockets
        (source ports) as fast as they go, reading whatever comes back.
        Prints {"sent", "rcodes": {rcode: n}}.

    dnsflood.py resolve --server ADDR:PORT --source ADDR --names N1,N2,...
                        [--tcp] [--timeout S] [--tries K] [--spread S]
        Ask each name's A, one after the other (spread evenly over --spread
        seconds), as a stub resolver does: wait --timeout for the answer,
        send again, at most --tries times (over TCP: a new connection each
        try).  Prints {"asked", "answered", "rcodes": {name: rcode or null},
        "addrs": {name: [addr...]}, "tries": total}.

Python standard library only.
"""
import argparse
import json
import os
import random
import resource
import select
import socket
import struct
import time


def addr_port(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


def query(name, qid=None, qtype=1):
    """A DNS query (RD set) for name."""
    qid = random.getrandbits(16) if qid is None else qid
    wire = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + struct.pack("!HH", qtype, 1)


def random_name():
    return "%s.evil.test" % os.urandom(8).hex()


def answer_addrs(msg):
    """The A records' addresses of a response (one question, uncompressed
    or pointer-compressed owners)."""
    ancount = struct.unpack("!H", msg[6:8])[0]
    i = 12
    while msg[i] != 0:
        i += 1 + msg[i]
    i += 5
    out = []
    for _ in range(ancount):
        if msg[i] & 0xC0 == 0xC0:
            i += 2
        else:
            while msg[i] != 0:
                i += 1 + msg[i]
            i += 1
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[i:i + 10])
        i += 10
        if rtype == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(msg[i:i + 4]))
        i += rdlen
    return out


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid, encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid):
    """utime + stime of process pid, in seconds."""
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def more_files():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def tcp_connect(server, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(server)
    s.setblocking(False)
    return s


def peer_gone(poller_events):
    return poller_events & (select.POLLHUP | select.POLLERR | select.POLLRDHUP)


def noread(a):
    more_files()
    server = addr_port(a.server)
    socks = [tcp_connect(server, a.source) for _ in range(a.conns)]
    rss0 = rss_kib(a.pid) if a.pid else 0
    cpu0 = cpu_s(a.pid) if a.pid else 0.0
    rss_max = rss0
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLOUT | select.POLLRDHUP)
    # a batch of framed queries, sent whole or in part as the socket takes it
    batch = b"".join(struct.pack("!H", len(m)) + m
                     for m in (query(random_name(), i) for i in range(256)))
    left = {fd: b"" for fd in by_fd}
    queries, closed_s = 0, []
    start = time.monotonic()
    next_rss = start
    while by_fd and time.monotonic() - start < a.seconds:
        for fd, ev in poller.poll(100):
            if peer_gone(ev):
                poller.unregister(fd)
                by_fd.pop(fd).close()
                closed_s.append(round(time.monotonic() - start, 2))
                continue
            if ev & select.POLLOUT:
                if not left[fd]:
                    left[fd] = batch
                    queries += 256
                try:
                    n = by_fd[fd].send(left[fd])
                    left[fd] = left[fd][n:]
                except BlockingIOError:
                    pass
                except OSError:
                    poller.unregister(fd)
                    by_fd.pop(fd).close()
                    closed_s.append(round(time.monotonic() - start, 2))
        if a.pid and time.monotonic() >= next_rss:
            rss_max = max(rss_max, rss_kib(a.pid))
            next_rss = time.monotonic() + 0.2
    seconds = round(time.monotonic() - start, 2)
    for s in by_fd.values():
        s.close()
    print(json.dumps({"conns": a.conns, "queries": queries, "closed": len(closed_s),
                      "closed_s": closed_s, "seconds": seconds, "rss0": rss0,
                      "rss_max": rss_max,
                      "cpu_s": round(cpu_s(a.pid) - cpu0, 2) if a.pid else None}), flush=True)


def hold(a):
    more_files()
    server = addr_port(a.server)
    sources = a.source.split(",")
    socks, errors = [], 0
    for i in range(a.conns):
        try:
            s = tcp_connect(server, sources[i % len(sources)])
            s.send(b"\0")
            socks.append(s)
        except OSError:
            errors += 1
    with open(a.ready, "w", encoding="utf-8") as f:
        f.write(json.dumps({"opened": len(socks)}) + "\n")
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLRDHUP)
    start = time.monotonic()
    open_at, next_mark = [], start
    next_drip = start + a.dribble if a.dribble else None
    all_closed = None
    while time.monotonic() - start < a.seconds:
        for fd, ev in poller.poll(50):
            if peer_gone(ev) or ev & select.POLLIN:
                poller.unregister(fd)
                by_fd.pop(fd).close()
        now = time.monotonic()
        if now >= next_mark:
            open_at.append([round(now - start, 1), len(by_fd)])
            next_mark = now + 0.5
        if not by_fd:
            all_closed = round(now - start, 2)
            break
        if next_drip is not None and now >= next_drip:
            for fd, s in list(by_fd.items()):
                try:
                    s.send(b"\0")
                except OSError:
                    poller.unregister(fd)
                    by_fd.pop(fd).close()
            next_drip = now + a.dribble
    for s in by_fd.values():
        s.close()
    print(json.dumps({"opened": len(socks), "errors": errors, "open": open_at,
                      "closed": len(socks) - len(by_fd), "all_closed_s": all_closed}), flush=True)


def flood(a):
    server = addr_port(a.server)
    socks = []
    for _ in range(a.sockets):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((a.source, 0))
        s.setblocking(False)
        socks.append(s)
    rcodes, sent = {}, 0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for s in socks:
            for _ in range(32):
                try:
                    s.sendto(query(random_name(), sent & 0xFFFF), server)
                    sent += 1
                except BlockingIOError:
                    break
            while True:
                try:
                    m = s.recv(4096)
                except BlockingIOError:
                    break
                if len(m) >= 4:
                    rc = str(m[3] & 15)
                    rcodes[rc] = rcodes.get(rc, 0) + 1
    print(json.dumps({"sent": sent, "rcodes": rcodes}), flush=True)


def ask_udp(server, source, name, timeout):
    """One try over UDP: (rcode, addrs), or None on a timeout."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((source, 0))
        qid = random.getrandbits(16)
        s.sendto(query(name, qid), server)
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            try:
                m = s.recv(4096)
            except socket.timeout:
                return None
            if len(m) >= 12 and struct.unpack("!H", m[:2])[0] == qid:
                return m[3] & 15, answer_addrs(m)
    finally:
        s.close()


def ask_tcp(server, source, name, timeout):
    """One try over TCP: (rcode, addrs), or None on a timeout or a close."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((source, 0))
        s.settimeout(timeout)
        s.connect(server)
        m = query(name)
        s.sendall(struct.pack("!H", len(m)) + m)
        head = b""
        while len(head) < 2:
            more = s.recv(2 - len(head))
            if not more:
                return None
            head += more
        n = struct.unpack("!H", head)[0]
        m = b""
        while len(m) < n:
            more = s.recv(n - len(m))
            if not more:
                return None
            m += more
        return m[3] & 15, answer_addrs(m)
    except OSError:
        return None
    finally:
        s.close()


def resolve(a):
    server = addr_port(a.server)
    names = a.names.split(",")
    step = a.spread / len(names) if a.spread else 0
    rcodes, addrs, tries = {}, {}, 0
    start = time.monotonic()
    for i, name in enumerate(names):
        wait = start + i * step - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        rcodes[name] = None
        for _ in range(a.tries):
            tries += 1
            got = (ask_tcp if a.tcp else ask_udp)(server, a.source, name, a.timeout)
            if got is not None:
                rcodes[name], addrs[name] = got
                break
    print(json.dumps({"asked": len(names),
                      "answered": sum(1 for v in rcodes.values() if v is not None),
                      "rcodes": rcodes, "addrs": addrs, "tries": tries}), flush=True)


def main():
    ap = argparse.ArgumentParser(description="clients of egressd's DNS server")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("noread")
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--pid", type=int, default=0)
    p = sub.add_parser("hold")
    p.add_argument("--conns", type=int, required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--dribble", type=float, default=0)
    p.add_argument("--seconds", type=float, default=20)
    p = sub.add_parser("flood")
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--sockets", type=int, default=4)
    p = sub.add_parser("resolve")
    p.add_argument("--names", required=True)
    p.add_argument("--tcp", action="store_true")
    p.add_argument("--timeout", type=float, default=2)
    p.add_argument("--tries", type=int, default=4)
    p.add_argument("--spread", type=float, default=0)
    for p in sub.choices.values():
        p.add_argument("--server", required=True)
        p.add_argument("--source", required=True)
    a = ap.parse_args()
    {"noread": noread, "hold": hold, "flood": flood, "resolve": resolve}[a.cmd](a)


if __name__ == "__main__":
    main()
