"""A guest agent that lies, as sandboxctl would meet it through Proxmox.

The guest agent answers from inside the sandbox, so every byte of its
answers is the guest's. A test arms a lie for one VM and one agent call
(POST /_sim/hostile); the call's handler then answers with what Proxmox
would relay for such an agent, instead of the truth. See README.md
("A hostile guest agent") for which answers Proxmox would pass on as they
are, which it would turn into an error of its own, and which go beyond
what Proxmox does (kept to check sandboxctl's decoding all the same).
"""

import base64
import json

from common import ApiError

# What each agent call can be made to say (kind -> one line of what).
KINDS = {
    "exec": {
        "pid_string": 'pid as a string of digits ("12"): PVE\'s integer check lets it through',
        "bad_json": "the agent wrote bytes that are not JSON: PVE's 500, quoting them",
        "drip": "the answer one byte a second",
    },
    "exec-status": {
        "never_exits": "exited false, for ever",
        "huge_output": "exited, with BYTES of stdout (default 2 GiB), streamed",
        "wrong_types": 'exited "yes", exitcode "0", out-data 42: each passes PVE\'s loose type check',
        "missing_exited": "no exited: PVE's own result check fails (500 Result verification failed)",
        "other_pid": "the answer of another process (the last one that ended in this VM)",
        "bad_json": "the agent wrote bytes that are not JSON: PVE's 500, quoting them",
        "not_json": "a 200 whose body is not JSON (beyond PVE: a decoder check)",
        "drip": "the answer one byte a second",
    },
    "file-read": {
        "more_than_asked": "BYTES of content (default 64 MiB, over the 16 MiB asked), not truncated",
        "huge": "BYTES of content (default 2 GiB), streamed",
        "other_file": "the content of another file (/etc/passwd)",
        "bad_base64": "content that is not base64 (PVE 9 decode=0 passes the agent's text as is)",
        "wrong_types": 'content 12345, truncated "yes"',
        "count_lie": "bytes-read that is not the length of the content",
        "bad_json": "the agent wrote bytes that are not JSON: PVE's 500, quoting them",
        "drip": "the answer one byte a second",
    },
    "file-write": {
        "bad_json": "the agent wrote bytes that are not JSON: PVE's 500, quoting them",
        "drip": "the answer one byte a second",
    },
}

# Garbage an agent may write: invalid UTF-8, control bytes, a terminal
# escape, a NUL.
GARBAGE = b"\xff\xfe\x1b[2J\x1b]0;pwned\x07\x00{\"exited\":\xc3("
GIB = 1 << 30


class RawAnswer(Exception):
    """An answer the HTTP layer writes as given: status, reason (bytes),
    a body as a list of byte strings (or a generator with a length), and
    a delay between bytes (drip)."""

    def __init__(self, status, reason, chunks, length, drip=0.0):
        super().__init__("raw answer")
        self.status = status
        self.reason = reason
        self.chunks = chunks
        self.length = length
        self.drip = drip


def check(spec):
    """The lie a test asked for, checked; ValueError says what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError("expected a JSON object")
    call = spec.get("call")
    if call not in KINDS:
        raise ValueError("call must be one of %s" % "|".join(sorted(KINDS)))
    if spec.get("kind") not in KINDS[call]:
        raise ValueError("kind for %s must be one of %s" % (call, "|".join(sorted(KINDS[call]))))
    vmid = spec.get("vmid")
    if isinstance(vmid, bool) or not isinstance(vmid, int):
        raise ValueError("vmid must be an integer")
    count = spec.get("count", -1)
    nbytes = spec.get("bytes", 0)
    for k, v in (("count", count), ("bytes", nbytes)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("%s must be an integer" % k)
    return {"vmid": vmid, "call": call, "kind": spec["kind"], "count": count, "bytes": nbytes, "hits": 0}


def take(lies, vmid, call):
    """The armed lie for this VM and call, counted (None: tell the truth).
    The caller holds the simulator's lock."""
    for lie in lies:
        if lie["vmid"] == vmid and lie["call"] == call and lie["count"] != 0:
            if lie["count"] > 0:
                lie["count"] -= 1
            lie["hits"] += 1
            return lie
    return None


def _json_answer(data):
    return json.dumps({"data": data}, ensure_ascii=False).encode("utf-8")


def _bad_json(vm, call):
    """What PVE answers when the agent's reply does not parse: its QMP
    client's die, with the JSON parser's words, which quote the bytes."""
    quoted = GARBAGE.decode("latin-1")
    msg = "VM %d qmp command 'guest-%s' failed - malformed JSON string, neither tag, array, object, number, string or atom, at character offset 0 (before \"%s\")" % (vm.vmid, call, quoted)
    body = json.dumps({"data": None, "message": msg + "\n"}, ensure_ascii=False).encode("utf-8")
    # the reason phrase carries the raw bytes, as PVE's HTTP server sends them
    reason = b"VM %d qmp command 'guest-%s' failed - malformed JSON string (before \"" % (vm.vmid, call.encode()) + GARBAGE.replace(b"\x00", b"") + b'")'
    raise RawAnswer(500, reason.replace(b"\r", b" ").replace(b"\n", b" "), [body], len(body))


def _drip(data):
    body = _json_answer(data)
    raise RawAnswer(200, b"OK", [body], len(body), drip=1.0)


def _streamed(head, fill, nbytes, tail):
    """A JSON answer whose middle is nbytes of fill, streamed."""
    piece = fill * (1 << 20)

    def gen():
        yield head
        left = nbytes
        while left > 0:
            n = min(left, len(piece))
            yield piece[:n]
            left -= n
        yield tail

    raise RawAnswer(200, b"OK", gen(), len(head) + nbytes + len(tail))


def exec_answer(sim, vm, lie):
    """agent/exec's lie (the command did not run)."""
    kind = lie["kind"]
    if kind == "pid_string":
        return {"pid": "12"}
    if kind == "bad_json":
        _bad_json(vm, "exec")
    _drip({"pid": 4242})


def status_answer(sim, vm, lie, truth):
    """agent/exec-status's lie; truth() gives the real answer, when needed."""
    kind = lie["kind"]
    if kind == "never_exits":
        return {"exited": 0}
    if kind == "huge_output":
        n = lie["bytes"] or 2 * GIB
        _streamed(b'{"data":{"exited":1,"exitcode":0,"out-data":"', b"A", n, b'"}}')
    if kind == "wrong_types":
        return {"exited": "yes", "exitcode": "0", "out-data": 42}
    if kind == "missing_exited":
        raise ApiError(500, "Result verification failed", {"exited": "property is missing and it is not optional"})
    if kind == "other_pid":
        other = vm.guest.last_status
        if other is None:
            other = {"exited": 1, "exitcode": 0, "out-data": "output of pid 1\n"}
        return dict(other)
    if kind == "bad_json":
        _bad_json(vm, "exec-status")
    if kind == "not_json":
        body = b"<html>\xff\xfe not json \x00</html>"
        raise RawAnswer(200, b"OK", [body], len(body))
    _drip(truth())


def read_answer(sim, vm, lie, decode, truth, read_other):
    """agent/file-read's lie; truth() gives the real answer, read_other(path)
    another file's bytes."""
    kind = lie["kind"]

    def content(data):
        return data.decode("latin-1") if decode else base64.b64encode(data).decode("ascii")

    if kind == "more_than_asked":
        data = b"M" * (lie["bytes"] or 64 << 20)
        return {"content": content(data), "bytes-read": len(data)}
    if kind == "huge":
        n = lie["bytes"] or 2 * GIB
        fill = b"A"  # a byte, or a base64 digit: both one character
        _streamed(b'{"data":{"content":"', fill, n, b'"}}')
    if kind == "other_file":
        data = read_other("/etc/passwd")
        return {"content": content(data), "bytes-read": len(data)}
    if kind == "bad_base64":
        if decode:
            # PVE 8 decodes leniently (MIME::Base64): the garbage becomes bytes
            return {"content": GARBAGE.decode("latin-1"), "bytes-read": len(GARBAGE)}
        return {"content": "!!not base64: " + GARBAGE.decode("latin-1"), "bytes-read": 3}
    if kind == "wrong_types":
        return {"content": 12345, "truncated": "yes"}
    if kind == "count_lie":
        real = truth()
        real["bytes-read"] = real.get("bytes-read", 0) + 1000
        return real
    if kind == "bad_json":
        _bad_json(vm, "file-read")
    _drip(truth())


def write_answer(sim, vm, lie):
    """agent/file-write's lie (nothing was written)."""
    if lie["kind"] == "bad_json":
        _bad_json(vm, "file-write")
    _drip(None)
