"""The real QEMU guest agent (Debian's qemu-guest-agent) inside a simulated
VM, and the agent calls relayed to it as Proxmox relays them (--agent qga).

qemu-ga runs in the VM's namespaces and root (nsenter, as every guest
command here), listening on a unix socket in the guest's /tmp, which the
simulator reaches through the private dir that backs it. Each call is one
QGA exchange on one kept connection: guest-sync-delimited with a fresh id
first (the answer is read up to the 0xFF delimiter and must carry that id:
replies to an earlier, abandoned exchange are skipped, as PVE's QMP client
does), then the command. What Proxmox does around the commands
(PVE::API2::Qemu::Agent, PVE::QemuServer::Agent):

    exec         guest-exec {path, arg, capture-output, input-data (base64)}
    exec-status  guest-exec-status {pid}; out-data/err-data base64-decoded
    file-read    guest-file-open {path}, guest-file-read {handle, count 1 MiB}
                 until eof or 16 MiB, guest-file-close; content as bytes
                 (Latin-1 code points) or, with decode=0, base64
    file-write   guest-file-open {path, mode "wb"}, guest-file-write
                 {handle, buf-b64}, guest-file-close
    ping         guest-ping
"""

import base64
import json
import os
import random
import socket
import subprocess
import threading
import time

READ_CHUNK = 1024 * 1024
SOCK = "/tmp/.qga.sock"  # in the guest
STATE = "/tmp/.qga-state"


class QgaError(Exception):
    """The agent's error (its "desc"), or a broken exchange; cmd is the
    QGA command that failed."""

    def __init__(self, msg, cmd=None):
        super().__init__(msg)
        self.cmd = cmd


class Qga:
    def __init__(self, guest):
        self.guest = guest
        self.proc = None
        self.sock = None
        self.buf = b""  # read from sock, not yet taken
        self.lock = threading.Lock()

    def host_path(self, guest_path):
        return os.path.join(self.guest.disk, "private", "tmp", os.path.relpath(guest_path, "/tmp"))

    def start(self, env):
        """Start qemu-ga in the guest and wait (10 s) for its socket."""
        log = open(os.path.join(self.guest.vmdir, "qemu-ga.log"), "wb")
        self.proc = subprocess.Popen(
            self.guest._nsenter(["/bin/sh", "-c", 'mkdir -p "$2" && exec qemu-ga -m unix-listen -p "$1" -t "$2"', "sh", SOCK, STATE]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
            env=env,
            start_new_session=True,
        )
        log.close()
        # nsenter (no -p) and sh exec: this is qemu-ga's own pid
        with open(os.path.join(self.guest.vmdir, "qemu-ga.pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(self.host_path(SOCK)):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        with open(os.path.join(self.guest.vmdir, "qemu-ga.log"), "rb") as f:
            raise QgaError("qemu-ga did not come up: %s" % f.read().decode("utf-8", "replace").strip())

    def stop(self):
        with self.lock:
            if self.sock:
                self.sock.close()
                self.sock = None
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def _read_until(self, stop):
        """The bytes up to the next stop byte (taken, not returned)."""
        while True:
            i = self.buf.find(stop)
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + 1 :]
                return out
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise QgaError("the agent closed the connection")
            self.buf += chunk

    def _exchange(self, cmd, args, timeout):
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(self.host_path(SOCK))
            self.buf = b""
        self.sock.settimeout(timeout)
        sync = random.randrange(1, 1 << 31)
        self.sock.sendall(b"\xff" + json.dumps({"execute": "guest-sync-delimited", "arguments": {"id": sync}}).encode())
        while True:
            self._read_until(b"\xff")
            line = self._read_until(b"\n")
            try:
                if json.loads(line).get("return") == sync:
                    break
            except ValueError:
                continue  # the rest of an abandoned answer
        msg = {"execute": cmd}
        if args is not None:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        reply = json.loads(self._read_until(b"\n"))
        if "error" in reply:
            raise QgaError(reply["error"].get("desc", "error"), cmd)
        return reply.get("return")

    def call(self, cmd, args=None, timeout=30):
        """One command; QgaError with the agent's words on its error."""
        with self.lock:
            try:
                return self._exchange(cmd, args, timeout)
            except (OSError, ValueError) as e:
                if self.sock:
                    self.sock.close()
                self.sock = None
                raise QgaError("agent exchange failed: %s" % e, cmd)

    # -- what Proxmox does around the commands ---------------------------------

    def exec(self, command, stdin_bytes):
        args = {"path": command[0], "arg": list(command[1:]), "capture-output": True}
        if stdin_bytes:
            args["input-data"] = base64.b64encode(stdin_bytes).decode("ascii")
        return self.call("guest-exec", args)["pid"]

    def exec_status(self, pid):
        res = dict(self.call("guest-exec-status", {"pid": pid}))
        for k in ("out-data", "err-data"):
            if k in res:
                res[k] = base64.b64decode(res[k])
        return res

    def write_file(self, path, data):
        h = self.call("guest-file-open", {"path": path, "mode": "wb"})
        try:
            self.call("guest-file-write", {"handle": h, "buf-b64": base64.b64encode(data).decode("ascii")})
        finally:
            self.call("guest-file-close", {"handle": h})

    def read_file(self, path, limit):
        """(bytes, truncated): up to limit bytes, as PVE reads them."""
        h = self.call("guest-file-open", {"path": path})
        data = bytearray()
        eof = False
        try:
            while len(data) < limit and not eof:
                r = self.call("guest-file-read", {"handle": h, "count": READ_CHUNK})
                data += base64.b64decode(r.get("buf-b64", ""))
                eof = bool(r.get("eof"))
        finally:
            self.call("guest-file-close", {"handle": h})
        return bytes(data[:limit]), len(data) > limit or not eof
