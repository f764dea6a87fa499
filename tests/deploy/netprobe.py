#!/usr/bin/env python3
"""netprobe.py - listeners and probes for the wall test (nftables.t).

  netprobe.py listen NAME LOG tcp:ADDR:PORT|udp:ADDR:PORT ...
      Serve every given socket until killed.  A TCP client gets the line
      "NAME:PORT" (PORT: the listener's own); a UDP datagram gets it back as
      the answer.  Each one is logged to LOG as a JSON line with the
      listener's port, the peer, the local address (for UDP the one the
      socket is bound to) and, for TCP, the original destination
      (SO_ORIGINAL_DST: where the client meant to go before a redirect).
      Writes "ready" to stdout once every socket is bound.
  netprobe.py probe tcp|udp ADDR PORT [TIMEOUT [SRC_ADDR:SRC_PORT]]
      Print what answered ("NAME:PORT") and exit 0, or print "none" and
      exit 1 after TIMEOUT seconds (default 1).  With SRC, sent from that
      address and port, which need not be one of this host's
      (IP_TRANSPARENT: a spoofed source; needs CAP_NET_ADMIN).
  netprobe.py blast ADDR PORT SECONDS
      Send UDP datagrams to ADDR:PORT from one socket as fast as the
      socket takes them for SECONDS; print "SENT ELAPSED" (the datagrams
      the socket took, the seconds it took).  A flood.
  netprobe.py arp IFACE SENDER_IP TARGET_IP [SENDER_MAC]
      Broadcast one ARP request "who has TARGET_IP, tell SENDER_IP" from
      IFACE (the frame's source: IFACE's MAC) with SENDER_MAC as the
      sender's hardware address (default: IFACE's MAC).  Neither needs to
      be IFACE's own: an ARP claim.
"""
import json
import selectors
import socket
import struct
import sys
import time

SO_ORIGINAL_DST = 80
IP_TRANSPARENT = 19


def original_dst(conn):
    try:
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    except OSError:
        return None
    port, addr = struct.unpack("!2xH4s8x", raw)
    return "%s:%d" % (socket.inet_ntoa(addr), port)


def listen(name, log_path, specs):
    sel = selectors.DefaultSelector()
    log = open(log_path, "a", buffering=1)
    for spec in specs:
        proto, addr, port = spec.split(":")
        if proto == "tcp":
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, int(port)))
            s.listen(16)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((addr, int(port)))
        sel.register(s, selectors.EVENT_READ, proto)
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            port = s.getsockname()[1]
            if key.data == "tcp":
                conn, peer = s.accept()
                entry = {"listener": port, "proto": "tcp", "peer": "%s:%d" % peer,
                         "local": "%s:%d" % conn.getsockname(), "orig": original_dst(conn)}
                try:
                    conn.sendall(("%s:%d\n" % (name, port)).encode())
                except OSError:
                    pass
                conn.close()
            else:
                data, peer = s.recvfrom(2048)
                entry = {"listener": port, "proto": "udp", "peer": "%s:%d" % peer,
                         "local": "%s:%d" % s.getsockname()}
                s.sendto(("%s:%d\n" % (name, port)).encode(), peer)
            log.write(json.dumps(entry) + "\n")


def probe(proto, addr, port, timeout, src=None):
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(timeout)
    try:
        if src:
            saddr, sport = src.rsplit(":", 1)
            s.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
            s.bind((saddr, int(sport)))
        if proto == "tcp":
            s.connect((addr, port))
            answer = s.recv(256)
        else:
            s.sendto(b"probe", (addr, port))
            answer = s.recv(256)
    except OSError:
        answer = b""
    s.close()
    text = answer.decode(errors="replace").strip()
    print(text or "none")
    return 0 if text else 1


def blast(addr, port, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent, start = 0, time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        for _ in range(256):
            try:
                s.sendto(b"flood", (addr, port))
                sent += 1
            except (BlockingIOError, ConnectionRefusedError):
                pass
    print(sent, "%.3f" % (time.monotonic() - start))
    return 0


def arp(iface, sender_ip, target_ip, sender_mac=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    mac = s.getsockname()[4][:6]
    sha = bytes.fromhex(sender_mac.replace(":", "")) if sender_mac else mac
    frame = (b"\xff" * 6 + mac + struct.pack("!H", 0x0806) +
             struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) +
             sha + socket.inet_aton(sender_ip) + b"\0" * 6 + socket.inet_aton(target_ip))
    s.send(frame + b"\0" * (60 - len(frame)))
    s.close()
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "listen":
        listen(argv[2], argv[3], argv[4:])
        return 0
    if len(argv) in (5, 6, 7) and argv[1] == "probe" and argv[2] in ("tcp", "udp"):
        return probe(argv[2], argv[3], int(argv[4]), float(argv[5]) if len(argv) >= 6 else 1.0,
                     argv[6] if len(argv) == 7 else None)
    if len(argv) == 5 and argv[1] == "blast":
        return blast(argv[2], int(argv[3]), float(argv[4]))
    if len(argv) in (5, 6) and argv[1] == "arp":
        return arp(argv[2], argv[3], argv[4], argv[5] if len(argv) == 6 else None)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
