#!/usr/bin/env python3
"""hrrd.py - a server that answers every ClientHello with a HelloRetryRequest,
for egressd's end-to-end tests of a client's second ClientHello (hello.t).

    hrrd.py --log FILE ADDR:PORT...

On each connection: read the client's first TLS record (its ClientHello),
answer with a HelloRetryRequest (RFC 8446 §4.1.4: a ServerHello whose random
is the special value of §4.1.3, selecting secp256r1) and a change_cipher_spec
(as TLS 1.3's middlebox compatibility mode sends, §D.4), then read whatever
comes until the client closes.  One JSON line per connection goes to --log
when it ends:

    {"first": SNI of the first ClientHello (null if none),
     "after": bytes received after the first record,
     "types": [content type of every later record, in order],
     "hellos": [SNI of every later ClientHello ("" when it has none)]}

"ready" is printed on stdout once every socket listens.  Python standard
library only; it is a test peer, not TLS: it never finishes a handshake.
"""
import argparse
import json
import socket
import struct
import threading

HRR_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
LOCK = threading.Lock()


def records(buf):
    """Whole records at the start of buf: ([(type, payload)], the rest)."""
    out = []
    while len(buf) >= 5:
        n = struct.unpack(">H", buf[3:5])[0]
        if len(buf) < 5 + n:
            break
        out.append((buf[0], buf[5:5 + n]))
        buf = buf[5 + n:]
    return out, buf


def hello_sni(body):
    """The host_name of a ClientHello body, "" when it has none; None if it
    does not parse."""
    try:
        p = 2 + 32
        p += 1 + body[p]
        p += 2 + struct.unpack(">H", body[p:p + 2])[0]
        p += 1 + body[p]
        if p == len(body):
            return ""
        end = p + 2 + struct.unpack(">H", body[p:p + 2])[0]
        p += 2
        while p + 4 <= end:
            kind, n = struct.unpack(">HH", body[p:p + 4])
            if kind == 0:
                name_len = struct.unpack(">H", body[p + 7:p + 9])[0]
                return body[p + 9:p + 9 + name_len].decode("latin-1")
            p += 4 + n
        return ""
    except (IndexError, struct.error):
        return None


def session_id(body):
    try:
        return body[35:35 + body[34]]
    except IndexError:
        return b""


def hrr(sid):
    """A HelloRetryRequest record echoing session id `sid`, then a
    change_cipher_spec record."""
    ext = (struct.pack(">HHH", 43, 2, 0x0304)       # supported_versions: TLS 1.3
           + struct.pack(">HHH", 51, 2, 0x0017))    # key_share: secp256r1, please
    body = (b"\x03\x03" + HRR_RANDOM + bytes([len(sid)]) + sid
            + b"\x13\x01" + b"\x00" + struct.pack(">H", len(ext)) + ext)
    msg = b"\x02" + struct.pack(">I", len(body))[1:] + body
    return (b"\x16\x03\x03" + struct.pack(">H", len(msg)) + msg
            + b"\x14\x03\x03\x00\x01\x01")


def serve(conn, log):
    line = {"first": None, "after": 0, "types": [], "hellos": []}
    buf = b""
    try:
        while True:
            recs, rest = records(buf)
            if recs:
                break
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        kind, payload = recs[0]
        if kind == 22 and payload[:1] == b"\x01":
            line["first"] = hello_sni(payload[4:])
            conn.sendall(hrr(session_id(payload[4:])))
        buf = buf[5 + len(payload):]
        line["after"] = len(buf)
        while True:
            recs, buf = records(buf)
            for kind, payload in recs:
                line["types"].append(kind)
                if kind == 22 and payload[:1] == b"\x01":
                    line["hellos"].append(hello_sni(payload[4:]))
            data = conn.recv(65536)
            if not data:
                break
            line["after"] += len(data)
            buf += data
    except OSError:
        pass
    finally:
        conn.close()
        with LOCK, open(log, "a") as f:
            f.write(json.dumps(line) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("addrs", nargs="+")
    a = ap.parse_args()
    socks = []
    for addr in a.addrs:
        host, _, port = addr.rpartition(":")
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(64)
        socks.append(s)
    print("ready", flush=True)

    def accept(s):
        while True:
            conn, _ = s.accept()
            threading.Thread(target=serve, args=(conn, a.log), daemon=True).start()

    for s in socks[1:]:
        threading.Thread(target=accept, args=(s,), daemon=True).start()
    accept(socks[0])


if __name__ == "__main__":
    main()
