#!/usr/bin/env python3
"""wsproto.py - the WebSocket protocol (RFC 6455) for the test servers
(wsorigin.py, fakeapi.py), standard library only.

What it implements:
    - the server's side of the opening handshake over a request that is
      already parsed: check_upgrade() checks GET, Host, "Upgrade:
      websocket", a Connection field with the "upgrade" token,
      "Sec-WebSocket-Version: 13" and a Sec-WebSocket-Key of 16 bytes;
      accept_key() computes Sec-WebSocket-Accept; handshake_response()
      is the 101 (with a subprotocol and extra fields if asked);
    - frames: encode_frame() (any opcode, FIN, masked or not) and
      FrameParser, an incremental parser that checks what RFC 6455
      section 5 asks of a frame (masked from a client, unmasked from a
      server; no RSV bit; known opcodes; control frames unfragmented and
      of at most 125 bytes; the minimal length encoding; a frame no
      bigger than the message limit);
    - messages: Assembler joins fragments (a continuation only after an
      unfinished text or binary frame, control frames allowed in
      between), enforces the maximum message size (1009) and UTF-8 in
      text messages and close reasons (1007), and checks close codes;
    - WebSocket: one endpoint over a recv/send pair (a socket, or a
      buffered file's read1/write): recv() gives the next message or
      control frame, answers a ping with a pong of the same payload and
      a close with a close (then the connection is over); send_text(),
      send_binary(), send_fragmented() (a message in K frames, with a
      hook between them to interleave control frames), ping(), close().
      A protocol error sends the close with its code, then raises
      ProtocolError.  Sending is thread-safe; receiving is for one
      thread.  client=True makes it the client's side (masked frames
      out), for tests.

What it does not: no extensions (a Sec-WebSocket-Extensions offer, e.g.
permessage-deflate, is ignored and none is accepted, so every RSV bit
must be 0), hence no compression; no subprotocol negotiation beyond
echoing one the caller picks; no HTTP parsing (the caller parses the
request head and passes the method and fields); no client handshake.

    python3 wsproto.py --selftest   the RFC's examples and a loopback
"""

import base64
import collections
import hashlib
import os
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
OPNAMES = {CONT: "continuation", TEXT: "text", BINARY: "binary", CLOSE: "close",
           PING: "ping", PONG: "pong"}

# Close codes (RFC 6455 section 7.4.1).
NORMAL, GOING_AWAY, PROTOCOL_ERROR, UNSUPPORTED = 1000, 1001, 1002, 1003
INVALID_DATA, POLICY, TOO_BIG = 1007, 1008, 1009

DEFAULT_MAX_MESSAGE = 16 << 20

Frame = collections.namedtuple("Frame", "fin opcode payload masked")
# kind: "text" (data: str), "binary", "ping", "pong" (data: bytes) or
# "close" (code: int or None, reason: str).
Message = collections.namedtuple("Message", "kind data code reason")


class HandshakeError(Exception):
    """A request that cannot be upgraded: answer status, with headers."""

    def __init__(self, status, reason, headers=()):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, list(headers)


class ProtocolError(Exception):
    """A peer broke the protocol: close the connection with code."""

    def __init__(self, code, reason):
        super().__init__("%d %s" % (code, reason))
        self.code, self.reason = code, reason


class ConnectionClosed(Exception):
    """The connection ended (EOF) or is over after the close handshake."""


# ---- the opening handshake -------------------------------------------------

def header(headers, name):
    """The value of field name in headers (a dict, a list of (name,
    value) pairs, or an email.message.Message as http.server has it),
    repeated fields joined by ", "; None when absent."""
    if hasattr(headers, "get_all"):
        vals = headers.get_all(name)
    else:
        pairs = headers.items() if hasattr(headers, "items") else headers
        vals = [v for k, v in pairs if k.lower() == name.lower()]
    return ", ".join(vals) if vals else None


def tokens(value):
    """The comma-separated tokens of a field value, lowercase."""
    return [t.strip().lower() for t in (value or "").split(",") if t.strip()]


def is_upgrade(headers):
    """Whether a request asks for a WebSocket (Upgrade: websocket)."""
    return "websocket" in tokens(header(headers, "Upgrade"))


def accept_key(key):
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (section 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key.strip() + GUID).encode()).digest()).decode()


def check_upgrade(method, headers, version="HTTP/1.1"):
    """The request's Sec-WebSocket-Key if it is a valid opening handshake
    (section 4.2.1); else raises HandshakeError (400, or 426 with
    Sec-WebSocket-Version: 13 for another version)."""
    if method != "GET":
        raise HandshakeError(400, "the method must be GET")
    if version not in ("HTTP/1.1",):
        raise HandshakeError(400, "HTTP/1.1 is needed")
    if not header(headers, "Host"):
        raise HandshakeError(400, "no Host")
    if "websocket" not in tokens(header(headers, "Upgrade")):
        raise HandshakeError(400, "Upgrade: websocket is missing")
    if "upgrade" not in tokens(header(headers, "Connection")):
        raise HandshakeError(400, "Connection: upgrade is missing")
    if (header(headers, "Sec-WebSocket-Version") or "").strip() != "13":
        raise HandshakeError(426, "Sec-WebSocket-Version must be 13",
                             [("Sec-WebSocket-Version", "13")])
    key = (header(headers, "Sec-WebSocket-Key") or "").strip()
    try:
        raw = base64.b64decode(key, validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise HandshakeError(400, "Sec-WebSocket-Key is not 16 bytes in base64")
    return key


def handshake_response(key, protocol=None, extra=()):
    """The 101 response (bytes) accepting key; protocol, when given, as
    Sec-WebSocket-Protocol; extra: more (name, value) fields."""
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Accept: " + accept_key(key)]
    if protocol:
        lines.append("Sec-WebSocket-Protocol: " + protocol)
    lines += ["%s: %s" % (k, v) for k, v in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# ---- frames ------------------------------------------------------------------

def mask_bytes(key, data):
    """data XOR the 4-byte masking key, repeated (section 5.3); the same
    function masks and unmasks."""
    n = len(data)
    if not n:
        return b""
    pad = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(pad, "big")).to_bytes(n, "big")


def encode_frame(opcode, payload, fin=True, mask=None):
    """One frame: mask is None (a server's frame), True (a random key) or
    a 4-byte key (a client's frame)."""
    payload = bytes(payload)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    mbit = 0x80 if mask is not None else 0
    if n < 126:
        head += bytes([mbit | n])
    elif n < 1 << 16:
        head += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mbit | 127]) + struct.pack("!Q", n)
    if mask is None:
        return head + payload
    key = os.urandom(4) if mask is True else bytes(mask)
    return head + key + mask_bytes(key, payload)


class FrameParser:
    """Frames out of a byte stream, fed as it comes.  expect_masked: True
    on a server (a client's frames must be masked), False on a client."""

    def __init__(self, expect_masked=True, max_frame=DEFAULT_MAX_MESSAGE):
        self.expect_masked, self.max_frame = expect_masked, max_frame
        self.buf = bytearray()

    def feed(self, data):
        self.buf += data

    def next_frame(self):
        """The next whole frame, unmasked; None until it has come; raises
        ProtocolError for a frame the RFC forbids (checked on its head,
        before its payload is waited for)."""
        b = self.buf
        if len(b) < 2:
            return None
        fin, rsv, opcode = b[0] & 0x80, b[0] & 0x70, b[0] & 0x0F
        masked, n, pos = b[1] & 0x80, b[1] & 0x7F, 2
        if rsv:
            raise ProtocolError(PROTOCOL_ERROR, "RSV bits set without an extension")
        if opcode not in OPNAMES:
            raise ProtocolError(PROTOCOL_ERROR, "unknown opcode %#x" % opcode)
        if opcode >= CLOSE and (not fin or n > 125):
            raise ProtocolError(PROTOCOL_ERROR, "a control frame is fragmented or over 125 bytes")
        if bool(masked) != self.expect_masked:
            raise ProtocolError(PROTOCOL_ERROR, "a client's frame must be masked"
                                if self.expect_masked else "a server's frame must not be masked")
        if n == 126:
            if len(b) < 4:
                return None
            n, pos = struct.unpack_from("!H", b, 2)[0], 4
            if n < 126:
                raise ProtocolError(PROTOCOL_ERROR, "length not in its minimal encoding")
        elif n == 127:
            if len(b) < 10:
                return None
            n, pos = struct.unpack_from("!Q", b, 2)[0], 10
            if n >> 63:
                raise ProtocolError(PROTOCOL_ERROR, "64-bit length with its top bit set")
            if n < 1 << 16:
                raise ProtocolError(PROTOCOL_ERROR, "length not in its minimal encoding")
        if n > self.max_frame:
            raise ProtocolError(TOO_BIG, "frame of %d bytes over the limit %d"
                                % (n, self.max_frame))
        key = None
        if masked:
            if len(b) < pos + 4:
                return None
            key, pos = bytes(b[pos:pos + 4]), pos + 4
        if len(b) < pos + n:
            return None
        payload = bytes(b[pos:pos + n])
        del b[:pos + n]
        if key is not None:
            payload = mask_bytes(key, payload)
        return Frame(bool(fin), opcode, payload, bool(masked))


def parse_close(payload):
    """(code, reason) of a close frame's payload; (None, "") when empty;
    raises ProtocolError for a 1-byte payload or a code that may not be
    sent (section 7.4), 1007 for a reason not in UTF-8."""
    if not payload:
        return None, ""
    if len(payload) < 2:
        raise ProtocolError(PROTOCOL_ERROR, "a close payload of 1 byte")
    code = struct.unpack("!H", payload[:2])[0]
    if not (code in (1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014)
            or 3000 <= code <= 4999):
        raise ProtocolError(PROTOCOL_ERROR, "close code %d may not be sent" % code)
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError(INVALID_DATA, "close reason not in UTF-8") from None
    return code, reason


def close_payload(code=None, reason=""):
    """A close frame's payload: nothing without a code; the reason cut to
    123 bytes of whole UTF-8 characters."""
    if code is None:
        return b""
    raw = reason.encode("utf-8")[:123].decode("utf-8", "ignore").encode("utf-8")
    return struct.pack("!H", code) + raw


class Assembler:
    """Frames to messages: joins fragments, passes control frames through
    (also between fragments), limits a message to max_message bytes."""

    def __init__(self, max_message=DEFAULT_MAX_MESSAGE):
        self.max_message = max_message
        self.opcode, self.parts, self.size = None, [], 0

    def add(self, frame):
        """The Message that frame completes, or None (a fragment); raises
        ProtocolError for a continuation out of place, a message over the
        limit (1009), a text message not in UTF-8 (1007), a bad close."""
        op = frame.opcode
        if op == CLOSE:
            code, reason = parse_close(frame.payload)
            return Message("close", b"", code, reason)
        if op in (PING, PONG):
            return Message(OPNAMES[op], frame.payload, None, "")
        if op == CONT and self.opcode is None:
            raise ProtocolError(PROTOCOL_ERROR, "a continuation frame with no message to continue")
        if op != CONT and self.opcode is not None:
            raise ProtocolError(PROTOCOL_ERROR, "a new message inside a fragmented one")
        if op != CONT:
            self.opcode = op
        self.size += len(frame.payload)
        if self.size > self.max_message:
            raise ProtocolError(TOO_BIG, "message over %d bytes" % self.max_message)
        self.parts.append(frame.payload)
        if not frame.fin:
            return None
        data, opcode = b"".join(self.parts), self.opcode
        self.opcode, self.parts, self.size = None, [], 0
        if opcode == BINARY:
            return Message("binary", data, None, "")
        try:
            return Message("text", data.decode("utf-8"), None, "")
        except UnicodeDecodeError:
            raise ProtocolError(INVALID_DATA, "text message not in UTF-8") from None


def split(data, k):
    """data in k pieces (k >= 1) of sizes as even as possible; some are
    empty when data is shorter than k."""
    k = max(1, k)
    q, r = divmod(len(data), k)
    out, pos = [], 0
    for i in range(k):
        n = q + (1 if i < r else 0)
        out.append(data[pos:pos + n])
        pos += n
    return out


# ---- an endpoint -------------------------------------------------------------

class WebSocket:
    """One side of an open WebSocket over recv(n) (returns b"" at EOF) and
    send(bytes) (sends all); buffered: bytes already read past the
    handshake."""

    def __init__(self, recv, send, client=False, max_message=DEFAULT_MAX_MESSAGE, buffered=b""):
        self._recv, self._send, self.client = recv, send, client
        self.parser = FrameParser(expect_masked=not client, max_frame=max_message)
        self.parser.feed(buffered)
        self.assembler = Assembler(max_message)
        self.lock = threading.Lock()
        self.close_sent = False    # we sent our close frame
        self.closed = False        # the close handshake is over, or EOF, or an error

    # -- receiving --

    def recv(self):
        """The next Message.  A ping is answered with its pong before it
        is returned; a close is answered (if we had not sent ours), and
        then the connection is closed.  Raises ConnectionClosed at EOF or
        once closed, ProtocolError (after sending the close) on a bad
        frame; a timeout of the underlying recv passes through and leaves
        the state whole."""
        while True:
            if self.closed:
                raise ConnectionClosed("closed")
            try:
                frame = self.parser.next_frame()
                msg = self.assembler.add(frame) if frame else None
            except ProtocolError as e:
                self.fail(e.code, e.reason)
                raise
            if frame is None:
                data = self._recv(65536)
                if not data:
                    self.closed = True
                    raise ConnectionClosed("eof")
                self.parser.feed(data)
                continue
            if msg is None:
                continue
            if msg.kind == "ping" and not self.close_sent:
                self.pong(msg.data)
            if msg.kind == "close":
                if not self.close_sent:
                    try:        # the peer may be gone already
                        self.close(msg.code, "" if msg.code is None else msg.reason)
                    except OSError:
                        pass
                self.closed = True
            return msg

    def fail(self, code, reason):
        """Closes with code after a protocol error (no wait for the peer)."""
        try:
            if not self.close_sent:
                self.close(code, reason)
        except OSError:
            pass
        self.closed = True

    # -- sending --

    def _frame(self, opcode, payload, fin=True):
        return encode_frame(opcode, payload, fin, mask=True if self.client else None)

    def send_raw(self, data):
        """Writes bytes as they are (under the send lock)."""
        with self.lock:
            self._send(data)

    def send_text(self, text):
        self.send_raw(self._frame(TEXT, text.encode("utf-8")))

    def send_binary(self, data):
        self.send_raw(self._frame(BINARY, data))

    def send_fragmented(self, kind, data, k, between=None):
        """One message (kind "text" or "binary") in k frames: a first frame
        and k-1 continuations; between(i), if given, runs after the i-th
        frame but the last (e.g. to send a ping in the middle)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        pieces = split(data, k)
        for i, piece in enumerate(pieces):
            op = (TEXT if kind == "text" else BINARY) if i == 0 else CONT
            self.send_raw(self._frame(op, piece, fin=i == len(pieces) - 1))
            if between and i < len(pieces) - 1:
                between(i)

    def ping(self, payload=b""):
        self.send_raw(self._frame(PING, payload))

    def pong(self, payload=b""):
        self.send_raw(self._frame(PONG, payload))

    def close(self, code=NORMAL, reason=""):
        """Sends our close frame (once); recv() then waits for the peer's."""
        with self.lock:
            if self.close_sent:
                return
            self.close_sent = True
            self._send(self._frame(CLOSE, close_payload(code, reason)))


# ---- self test ---------------------------------------------------------------

def selftest():
    """The examples of RFC 6455 (sections 1.3 and 5.7) and a loopback over
    a socket pair; raises AssertionError on a failure."""
    import socket
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    hello = bytes.fromhex("810548656c6c6f")
    masked = bytes.fromhex("818537fa213d7f9f4d5158")
    assert encode_frame(TEXT, b"Hello") == hello
    assert encode_frame(TEXT, b"Hello", mask=bytes.fromhex("37fa213d")) == masked
    p = FrameParser(expect_masked=True)
    for byte in masked:                 # one byte at a time
        p.feed(bytes([byte]))
    assert p.next_frame() == Frame(True, TEXT, b"Hello", True)
    p = FrameParser(expect_masked=False)
    p.feed(bytes.fromhex("010348656c") + bytes.fromhex("80026c6f"))
    a = Assembler()
    assert a.add(p.next_frame()) is None
    assert a.add(p.next_frame()) == Message("text", "Hello", None, "")
    assert encode_frame(PING, b"Hello") == bytes.fromhex("890548656c6c6f")
    assert encode_frame(PONG, b"Hello", mask=bytes.fromhex("37fa213d")) == \
        bytes.fromhex("8a8537fa213d7f9f4d5158")
    assert encode_frame(BINARY, bytes(256))[:4] == bytes.fromhex("827e0100")
    assert encode_frame(BINARY, bytes(65536))[:10] == bytes.fromhex("827f0000000000010000")
    for bad, code in [(bytes.fromhex("810548656c6c6f"), PROTOCOL_ERROR),        # unmasked
                      (bytes.fromhex("c18037fa213d"), PROTOCOL_ERROR),          # RSV1
                      (bytes.fromhex("838037fa213d"), PROTOCOL_ERROR),          # opcode 3
                      (bytes.fromhex("09fe007e"), PROTOCOL_ERROR),              # long ping
                      (bytes.fromhex("81fe0005"), PROTOCOL_ERROR)]:             # not minimal
        p = FrameParser(expect_masked=True)
        p.feed(bad)
        try:
            p.next_frame()
            raise AssertionError("accepted %s" % bad.hex())
        except ProtocolError as e:
            assert e.code == code, (bad.hex(), e)
    hs = {"Host": "x", "Upgrade": "WebSocket", "Connection": "keep-alive, Upgrade",
          "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert check_upgrade("GET", hs) == "dGhlIHNhbXBsZSBub25jZQ=="
    assert b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" in \
        handshake_response("dGhlIHNhbXBsZSBub25jZQ==")
    for change, status in [({"Sec-WebSocket-Version": "8"}, 426), ({"Connection": "close"}, 400),
                           ({"Sec-WebSocket-Key": "c2hvcnQ="}, 400)]:
        try:
            check_upgrade("GET", dict(hs, **change))
            raise AssertionError("accepted %s" % change)
        except HandshakeError as e:
            assert e.status == status, (change, e.status)
    assert split(b"abcdefg", 3) == [b"abc", b"de", b"fg"] and split(b"a", 3) == [b"a", b"", b""]

    # Loopback: a client and a server endpoint over a socket pair.
    cs, ss = socket.socketpair()
    client = WebSocket(cs.recv, cs.sendall, client=True)
    server = WebSocket(ss.recv, ss.sendall, max_message=1000)
    client.send_fragmented("text", "x" * 10, 3, between=lambda i: i or client.ping(b"mid"))
    assert server.recv() == Message("ping", b"mid", None, "")
    assert server.recv() == Message("text", "x" * 10, None, "")
    assert client.recv() == Message("pong", b"mid", None, "")
    big = bytes(range(256)) * 3
    server.send_binary(big)
    assert client.recv() == Message("binary", big, None, "")
    client.send_binary(bytes(1001))
    try:
        server.recv()
        raise AssertionError("accepted a message over the limit")
    except ProtocolError as e:
        assert e.code == TOO_BIG
    assert client.recv().code == TOO_BIG and client.closed
    cs.close(), ss.close()
    cs, ss = socket.socketpair()
    client = WebSocket(cs.recv, cs.sendall, client=True)
    server = WebSocket(ss.recv, ss.sendall)
    server.close(NORMAL, "bye")
    assert client.recv() == Message("close", b"", NORMAL, "bye") and client.closed
    assert server.recv() == Message("close", b"", NORMAL, "bye") and server.closed
    cs.close()
    try:
        server.recv()
        raise AssertionError("recv after the close")
    except ConnectionClosed:
        pass
    ss.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--selftest"]:
        selftest()
        print("wsproto selftest: ok")
    else:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        sys.exit(2)
