#!/usr/bin/env python3
"""rawclient.py - byte-exact client steps for egressd's end-to-end tests.

    rawclient.py [--timeout S] [--out FILE] [--status FILE] [--source ADDR] ADDR:PORT STEP...
        Connect, run the steps in order, write every byte received to
        --out (default stdout) and one line "EVENT SECONDS" to --status:
        EVENT is "eof" (the peer closed), "reset", "timeout" (a step waited
        --timeout seconds, default 5), "done" (every step ran and the
        connection was still open) or "connect-error" (nothing ran; the
        --out file is empty); SECONDS counts from the connect.
        --source binds the client's end to ADDR (a sandbox's address).
        Exit status 0 when every step ran, 1 otherwise.
      send:TEXT       send TEXT (Python escapes: \\r \\n \\x00 ...)
      file:PATH       send the bytes of PATH
      sleep:S         wait S seconds
      head            read until the end of a response head (CRLF CRLF)
      expect:TEXT     read until TEXT (escapes as for send) has been received
      read:N          read until N more bytes have been received
      eof             read until the peer closes
      drip:S:TEXT     send TEXT one byte every S seconds, reading meanwhile;
                      stops early when the peer closes
      shut            shut the sending side down

    rawclient.py hello IN OUT [--sni NAME] [--no-sni] [--ech]
        Rewrite the TLS ClientHello record(s) in IN into one record in OUT:
        --sni sets server_name to NAME, --no-sni drops it, --ech adds an
        outer encrypted_client_hello extension (0xfe0d: HPKE X25519,
        HKDF-SHA256, AES-128-GCM, a 32-byte enc and a 200-byte payload).

    rawclient.py parse FILE PYEXPR
        Split FILE into HTTP/1.1 responses and print PYEXPR over `r`, the
        list of them: each a dict with "status" (int), "reason", "headers"
        (a list of [lower-case name, value]), "h" (a dict of the same, the
        last value of a name winning), "body" (str, latin-1) and "raw"
        (the head as text); `rest` is what follows the last one (hex).
"""

import codecs
import os
import select
import socket
import struct
import sys
import time


def unescape(text):
    return codecs.escape_decode(text.encode("latin-1"))[0]


# ---- the client

class Done(Exception):
    def __init__(self, event):
        self.event = event


class Client:
    def __init__(self, addr, timeout, source=None):
        host, _, port = addr.rpartition(":")
        host = host.strip("[]")
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(fam, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        if source:
            self.sock.bind((source, 0))
        self.sock.connect((host, int(port)))
        self.t0 = time.monotonic()
        self.timeout = timeout
        self.got = b""
        self.pos = 0  # what "head"/"expect" already looked at

    def elapsed(self):
        return time.monotonic() - self.t0

    def recv_some(self, wait):
        r, _, _ = select.select([self.sock], [], [], max(wait, 0))
        if not r:
            return False
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            raise Done("reset")
        if not data:
            raise Done("eof")
        self.got += data
        return True

    def read_until(self, pred):
        end = time.monotonic() + self.timeout
        while not pred():
            if not self.recv_some(end - time.monotonic()):
                raise Done("timeout")

    def send(self, data):
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # The peer closed: collect what it sent before.
            try:
                while self.recv_some(0.5):
                    pass
            except Done as d:
                raise Done(d.event)
            raise Done("reset")

    def step(self, s):
        kind, _, arg = s.partition(":")
        if kind == "send":
            self.send(unescape(arg))
        elif kind == "file":
            with open(arg, "rb") as f:
                self.send(f.read())
        elif kind == "sleep":
            time.sleep(float(arg))
        elif kind == "head":
            start = self.pos

            def have_head():
                i = self.got.find(b"\r\n\r\n", start)
                if i >= 0:
                    self.pos = i + 4
                return i >= 0
            self.read_until(have_head)
        elif kind == "expect":
            want, start = unescape(arg), self.pos

            def have():
                i = self.got.find(want, start)
                if i >= 0:
                    self.pos = i + len(want)
                return i >= 0
            self.read_until(have)
        elif kind == "read":
            n = len(self.got) + int(arg)
            self.read_until(lambda: len(self.got) >= n)
            self.pos = len(self.got)
        elif kind == "eof":
            self.read_until(lambda: False)
        elif kind == "drip":
            secs, _, text = arg.partition(":")
            for b in unescape(text):
                self.send(bytes([b]))
                end = time.monotonic() + float(secs)
                while time.monotonic() < end:
                    self.recv_some(end - time.monotonic())
        elif kind == "shut":
            self.sock.shutdown(socket.SHUT_WR)
        else:
            raise SystemExit("rawclient: unknown step %r" % s)


def run(argv):
    timeout, out, status, source = 5.0, None, None, None
    while argv and argv[0].startswith("--"):
        opt = argv.pop(0)
        if opt == "--timeout":
            timeout = float(argv.pop(0))
        elif opt == "--out":
            out = argv.pop(0)
        elif opt == "--status":
            status = argv.pop(0)
        elif opt == "--source":
            source = argv.pop(0)
        else:
            raise SystemExit("rawclient: unknown option " + opt)
    try:
        c = Client(argv[0], timeout, source)
    except OSError as e:
        # Write the (empty) results anyway: a check must never read the
        # answer of an earlier run.
        if out:
            open(out, "wb").close()
        line = "connect-error 0 %s\n" % e
        if status:
            with open(status, "w") as f:
                f.write(line)
        sys.stderr.write("rawclient: " + line)
        return 1
    event = "done"
    try:
        for s in argv[1:]:
            c.step(s)
    except Done as d:
        event = d.event
    line = "%s %.3f\n" % (event, c.elapsed())
    c.sock.close()
    if out:
        with open(out, "wb") as f:
            f.write(c.got)
    else:
        sys.stdout.buffer.write(c.got)
    if status:
        with open(status, "w") as f:
            f.write(line)
    else:
        sys.stderr.write("rawclient: " + line)
    # Steps cut short by the peer closing are not all run, unless the last
    # step was waiting for exactly that.
    last = argv[-1].partition(":")[0]
    ran_all = event == "done" or (event == "eof" and last in ("eof", "drip"))
    return 0 if ran_all else 1


# ---- ClientHello surgery

def hello_rewrite(src, dst, sni=None, no_sni=False, ech=False):
    data = open(src, "rb").read()
    payload, i = b"", 0
    while i < len(data):
        typ, ver, n = struct.unpack(">BHH", data[i:i + 5])
        assert typ == 22, "not a handshake record"
        payload += data[i + 5:i + 5 + n]
        i += 5 + n
    assert payload[0] == 1, "not a ClientHello"
    hlen = int.from_bytes(payload[1:4], "big")
    body = payload[4:4 + hlen]
    p = 2 + 32
    p += 1 + body[p]                                        # session id
    p += 2 + int.from_bytes(body[p:p + 2], "big")          # cipher suites
    p += 1 + body[p]                                        # compression
    fixed = body[:p]
    elen = int.from_bytes(body[p:p + 2], "big")
    exts, q = [], p + 2
    while q < p + 2 + elen:
        t, n = struct.unpack(">HH", body[q:q + 4])
        exts.append([t, body[q + 4:q + 4 + n]])
        q += 4 + n
    if sni is not None or no_sni:
        name_ext = None
        if sni is not None:
            name = sni.encode()
            entry = b"\x00" + struct.pack(">H", len(name)) + name
            name_ext = struct.pack(">H", len(entry)) + entry
        out = []
        placed = False
        for t, v in exts:
            if t == 0:
                if name_ext is not None:
                    out.append([0, name_ext])
                placed = True
            else:
                out.append([t, v])
        if not placed and name_ext is not None:
            out.insert(0, [0, name_ext])
        exts = out
    if ech:
        exts = [e for e in exts if e[0] != 0xFE0D]
        enc = os.urandom(32)
        ech_body = (b"\x00" + struct.pack(">HH", 0x0001, 0x0001) + b"\x2a"
                    + struct.pack(">H", len(enc)) + enc
                    + struct.pack(">H", 200) + os.urandom(200))
        # Before a pre_shared_key extension, which must stay last.
        at = len(exts) - 1 if exts and exts[-1][0] == 41 else len(exts)
        exts.insert(at, [0xFE0D, ech_body])
    ext_bytes = b"".join(struct.pack(">HH", t, len(v)) + v for t, v in exts)
    body = fixed + struct.pack(">H", len(ext_bytes)) + ext_bytes
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    assert len(hs) <= 16384
    rec = struct.pack(">BHH", 22, 0x0301, len(hs)) + hs
    open(dst, "wb").write(rec)


# ---- response parsing

def parse(path, expr):
    data = open(path, "rb").read()
    r, i = [], 0
    while data.startswith(b"HTTP/", i):
        j = data.find(b"\r\n\r\n", i)
        if j < 0:
            break
        lines = data[i:j].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers.append([k.strip().lower(), v.strip()])
        h = dict(headers)
        status = int(parts[1])
        start = j + 4
        if "content-length" in h:
            end = start + int(h["content-length"])
        elif status in (100, 101, 204, 304) or 100 <= status < 200:
            end = start
        else:
            end = len(data)
        r.append({"status": status, "reason": parts[2] if len(parts) > 2 else "",
                  "headers": headers, "h": h, "body": data[start:end].decode("latin-1"),
                  "raw": data[i:j].decode("latin-1")})
        i = end
    rest = data[i:].hex()
    v = eval(expr)
    print(v)
    return 1 if v is None or v is False else 0


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "hello":
        a = argv[1:]
        sni, no_sni, ech = None, False, False
        src, dst = a[0], a[1]
        k = 2
        while k < len(a):
            if a[k] == "--sni":
                sni = a[k + 1]
                k += 2
            elif a[k] == "--no-sni":
                no_sni = True
                k += 1
            elif a[k] == "--ech":
                ech = True
                k += 1
            else:
                raise SystemExit("rawclient hello: unknown option " + a[k])
        hello_rewrite(src, dst, sni, no_sni, ech)
        return 0
    if argv and argv[0] == "parse":
        return parse(argv[1], argv[2])
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
