#!/usr/bin/env python3
"""dnsd.py - a small authoritative DNS server for egressd's end-to-end tests.

    dnsd.py --listen 127.0.0.1:5353 --zone FILE [--log FILE]

Serves UDP and TCP on the same address.  The zone file has one record a line
('#' comments):

    NAME A|AAAA|CNAME VALUE [TTL]     (TTL 60 when not given)
    NAME SERVFAIL                     answer SERVFAIL for every type
    NAME TIMEOUT                      never answer
    NAME DELAY MS                     answer NAME (whatever it is) MS ms late

NAME may be a wildcard, "*.SUFFIX": it stands for every name below SUFFIX
(one label or more, not SUFFIX itself) that has no lines of its own, the
nearest wildcard first (a.b.x.test: "*.b.x.test", then "*.x.test").  So

    ok.flood.test A 127.0.0.16
    *.flood.test TIMEOUT

answers ok.flood.test and leaves every other name under flood.test
unanswered.  A name neither in the zone nor under a wildcard gets NXDOMAIN;
a known name without the asked type gets an empty NOERROR answer.  CNAMEs
are followed inside the zone.  Each query is logged to --log as "NAME TYPE
CLIENT" (the name as asked, in lower case; the client's address), one line each, and "ready" is printed
on stdout once both sockets are bound.  Python standard library only.
"""
import argparse
import ipaddress
import socket
import socketserver
import struct
import sys
import threading
import time

TYPES = {"A": 1, "CNAME": 5, "AAAA": 28}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
NOERROR, SERVFAIL, NXDOMAIN, NOTIMP = 0, 2, 3, 4
MAX_CHAIN = 8  # CNAME hops followed


def load_zone(path):
    """({name: [(type, rdata bytes, ttl)] or "SERVFAIL" or "TIMEOUT"}, {name: delay in s});
    exits on errors."""
    zone, delays, errors = {}, {}, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            name = words[0].lower().rstrip(".")
            kind = words[1].upper() if len(words) > 1 else ""
            try:
                encode_name(name)
                if kind == "DELAY" and len(words) == 3:
                    if not (words[2].isascii() and words[2].isdigit() and int(words[2]) <= 60000):
                        raise ValueError("a DELAY of 0 to 60000 ms")
                    delays[name] = int(words[2]) / 1000
                    continue
                if kind in ("SERVFAIL", "TIMEOUT") and len(words) == 2:
                    if name in zone:
                        raise ValueError(f"{kind} as the only line for '{name}'")
                    zone[name] = kind
                    continue
                if kind not in TYPES or len(words) not in (3, 4):
                    raise ValueError("NAME A|AAAA|CNAME VALUE [TTL], NAME SERVFAIL, NAME TIMEOUT "
                                     "or NAME DELAY MS")
                ttl = words[3] if len(words) == 4 else "60"
                if not (ttl.isascii() and ttl.isdigit() and int(ttl) < 2**31):
                    raise ValueError("a TTL of 0 to 2147483647 seconds")
                rdata = encode_value(kind, words[2])
                records = zone.setdefault(name, [])
                if isinstance(records, str):
                    raise ValueError(f"no records for a {records} name")
                records.append((TYPES[kind], rdata, int(ttl)))
            except ValueError as e:
                errors.append(f"{path}:{n}: expected {e}, found '{line.strip()}'")
    if errors:
        sys.exit("\n".join(errors))
    return zone, delays


def zone_key(zone, name):
    """The key of `zone` (or of the delays) that answers for `name`: itself, else the
    nearest wildcard "*.SUFFIX" above it; None when there is neither."""
    if name in zone:
        return name
    labels = name.split(".")
    for i in range(1, len(labels)):
        key = "*." + ".".join(labels[i:])
        if key in zone:
            return key
    return None


def encode_value(kind, value):
    try:
        if kind == "A":
            return ipaddress.IPv4Address(value).packed
        if kind == "AAAA":
            return ipaddress.IPv6Address(value).packed
    except ValueError:
        raise ValueError(f"an {'IPv4' if kind == 'A' else 'IPv6'} address") from None
    return encode_name(value)


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if not (0 < len(label) < 64 and label.isascii()):
            raise ValueError(f"ASCII labels of 1 to 63 bytes in '{name}'")
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def parse_question(msg):
    """(id, flags, qname as sent, qtype, end of question) of a query; ValueError if malformed."""
    if len(msg) < 12:
        raise ValueError("short header")
    qid, flags, qdcount = struct.unpack("!HHH", msg[:6])
    if flags & 0x8000 or qdcount != 1:
        raise ValueError("not a one-question query")
    i, labels = 12, []
    while True:
        if i >= len(msg) or msg[i] & 0xC0:
            raise ValueError("truncated or compressed question name")
        n = msg[i]
        i += 1
        if n == 0:
            break
        labels.append(msg[i:i + n].decode("ascii", "replace"))
        i += n
    if i + 4 > len(msg):
        raise ValueError("no type and class")
    qtype = struct.unpack("!H", msg[i:i + 2])[0]
    return qid, flags, ".".join(labels), qtype, i + 4


def decode_name(wire):
    labels, i = [], 0
    while wire[i]:
        labels.append(wire[i + 1:i + 1 + wire[i]].decode("ascii"))
        i += wire[i] + 1
    return ".".join(labels).lower()


def find_records(zone, name, qtype):
    """[(owner, (type, rdata, ttl))] answering qtype for name, CNAMEs followed in the zone;
    owner None is the question's own name."""
    out, owner = [], None
    for _ in range(MAX_CHAIN):
        records = zone.get(zone_key(zone, name))
        if not isinstance(records, list):
            break
        cname = next((r for r in records if r[0] == TYPES["CNAME"]), None)
        if cname is None or qtype == TYPES["CNAME"]:
            out += [(owner, r) for r in records if r[0] == qtype]
            break
        out.append((owner, cname))
        owner, name = cname[1], decode_name(cname[1])
    return out


def answer(server, msg, limit, client):
    """The reply to one query (at most `limit` bytes, else truncated), or None to stay silent;
    sent late if the name has a DELAY."""
    zone = server.zone
    try:
        qid, flags, qname, qtype, end = parse_question(msg)
    except ValueError:
        return None
    name = qname.lower()
    server.log(name, qtype, client)  # lower case: clients may randomize it (0x20)
    key, late = zone_key(zone, name), zone_key(server.delays, name)
    if late is not None:
        time.sleep(server.delays[late])
    rcode, records = NOERROR, []
    if (flags >> 11) & 0xF:
        rcode = NOTIMP
    elif zone.get(key) == "TIMEOUT":
        return None
    elif zone.get(key) == "SERVFAIL":
        rcode = SERVFAIL
    elif key is None:
        rcode = NXDOMAIN
    else:
        records = find_records(zone, name, qtype)
    rrs = b"".join((owner or b"\xc0\x0c") + struct.pack("!HHIH", rtype, 1, ttl, len(rdata)) + rdata
                   for owner, (rtype, rdata, ttl) in records)
    flags = 0x8400 | (flags & 0x0100) | rcode  # QR, AA, RD as asked
    if end + len(rrs) > limit:
        flags, records, rrs = flags | 0x0200, [], b""  # TC: ask again over TCP
    return struct.pack("!HHHHHH", qid, flags, 1, len(records), 0, 0) + msg[12:end] + rrs


class UDPHandler(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        reply = answer(self.server, data, 512, self.client_address[0])  # no EDNS0 here
        if reply is not None:
            sock.sendto(reply, self.client_address)


class TCPHandler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            data = self.rfile.read(struct.unpack("!H", head)[0])
            reply = answer(self.server, data, 65535, self.client_address[0])
            if reply is not None:
                self.wfile.write(struct.pack("!H", len(reply)) + reply)


def main():
    ap = argparse.ArgumentParser(description="authoritative DNS server for tests")
    ap.add_argument("--listen", required=True, help="ADDR:PORT, [v6]:PORT for IPv6")
    ap.add_argument("--zone", required=True)
    ap.add_argument("--log")
    args = ap.parse_args()
    host, _, port = args.listen.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    zone, delays = load_zone(args.zone)
    logfile = open(args.log, "a", buffering=1, encoding="utf-8") if args.log else None
    lock = threading.Lock()

    def log(name, qtype, client):
        if logfile:
            with lock:
                logfile.write(f"{name} {TYPE_NAMES.get(qtype, f'TYPE{qtype}')} {client}\n")

    servers = []
    for base, handler in ((socketserver.ThreadingUDPServer, UDPHandler),
                          (socketserver.ThreadingTCPServer, TCPHandler)):
        # SO_REUSEADDR for TCP only: on UDP it would let two servers share a port.
        cls = type("Server", (base,), {"address_family": family, "daemon_threads": True,
                                       "allow_reuse_address": base is socketserver.ThreadingTCPServer})
        srv = cls((host, int(port)), handler)
        srv.zone, srv.delays, srv.log = zone, delays, log
        servers.append(srv)
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
