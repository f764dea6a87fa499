"""The inside of a simulated VM: its own file system, and the commands the
guest agent runs in it.

Each VM has a disk directory under the state dir:
    disk/upper, disk/work     overlayfs upper and work dirs over the host's /
    disk/private/{tmp,var-tmp,root,home}
                              bind-mounted over /tmp, /var/tmp, /root, /home so
                              the guest starts with them empty (as a fresh
                              image would) and never sees the host's.
When the VM starts, an "init" process is started in a new mount namespace
(unshare --mount --fork): it mounts the overlay, the private dirs, /dev,
/proc and /sys, chroots into the merged tree and sleeps. Every agent call then
runs through nsenter into that namespace and root, so exec, file-read and
file-write all see one and the same file system. Stopping the VM kills init;
the mount namespace goes away with it, the disk stays.

With --vm-net the init also gets a network namespace of its own (unshare
--net; agent calls nsenter -n too), wired as a VM's NIC would be: a veth pair
tap{vmid}i0 (in the simulator's namespace, attached to the Linux bridge named
in net0) and eth0 in the guest (net0's MAC), with the address and default
route of ipconfig0, as cloud-init would set them; cloud-init's /etc/hosts
(the VM's name) and /etc/resolv.conf (nameserver and searchdomain of the
config, else none: not the host's) are written at each start. Stopping the VM kills every
process in that namespace (also daemons started through exec) and removes
the tap.
"""

import os
import shutil
import signal
import subprocess
import threading
import time

import qga as qgamod

PRIVATE = {"tmp": ("/tmp", 0o1777), "var-tmp": ("/var/tmp", 0o1777), "root": ("/root", 0o700), "home": ("/home", 0o755)}
GUEST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def linux_bridge(name):
    """Whether a Linux bridge of that name exists in this network namespace
    (not /sys: it shows the namespace that mounted it)."""
    p = subprocess.run(["ip", "-d", "link", "show", "dev", name], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return p.returncode == 0 and b" bridge " in p.stdout


class GuestError(Exception):
    """An error the guest agent reports (PVE turns it into a 500)."""


def check_host(vm_net=False):
    """'' when overlay-in-a-mount-namespace works here (and with vm_net,
    veth, bridges and nftables with br_netfilter), else why not."""
    if os.geteuid() != 0:
        return "the guest model needs root (unshare --mount, overlayfs)"
    for tool in ("unshare", "nsenter", "chroot") + (("ip", "nft") if vm_net else ()):
        if shutil.which(tool) is None:
            return "%s not found" % tool
    if vm_net:
        # pve-firewall's conntrack sees bridged traffic through br_netfilter;
        # a Proxmox host turns these on, and so does the simulator (in its
        # own network namespace).
        for fam in ("iptables", "ip6tables"):
            p = "/proc/sys/net/bridge/bridge-nf-call-" + fam
            try:
                with open(p, "w") as f:
                    f.write("1\n")
            except OSError as e:
                return "--vm-net needs br_netfilter (%s: %s)" % (p, e.strerror)
    return ""


class Guest:
    def __init__(self, vmdir, output_cap, vm_net=False, real_agent=False):
        self.vmdir = vmdir
        # --agent qga: Debian's qemu-ga answers the agent calls (qga.py)
        self.qga = qgamod.Qga(self) if real_agent else None
        self.vm_net = vm_net
        self.tap = None  # the host side of the NIC while it exists
        self.netns_ino = None  # the guest's network namespace (inode)
        self.disk = os.path.join(vmdir, "disk")
        self.output_cap = output_cap
        self.init = None  # Popen of unshare
        self.init_pid = None  # pid of the chrooted sleeper inside the namespace
        self.procs = {}  # pid -> exec record
        self.last_status = None  # the last exec-status answer that said exited (hostile.py)
        self.lock = threading.Lock()
        self._make_disk(self.disk)

    @staticmethod
    def _make_disk(disk):
        for d in ("upper", "work", "merged"):
            os.makedirs(os.path.join(disk, d), exist_ok=True)
        for name, (_, mode) in PRIVATE.items():
            p = os.path.join(disk, "private", name)
            if not os.path.isdir(p):
                os.makedirs(p)
                os.chmod(p, mode)

    def clone_disk_from(self, other):
        """A linked clone starts from the template's disk (its changes over
        the base image), copied."""
        self.restore_from(other.disk)

    def running(self):
        return self.init is not None and self.init.poll() is None

    def boot(self, net=None):
        """Start the VM's namespace; GuestError when it cannot. With vm_net,
        net is {"tap", "bridge", "mac", "cidr", "gw", "hostname", "nameserver",
        "searchdomain"} (all but tap and bridge may be None; no cidr: no
        address) or None (no NIC)."""
        if self.running():
            return
        d = self.disk
        pidfile = os.path.join(self.vmdir, "init.pid")
        if os.path.exists(pidfile):
            os.unlink(pidfile)
        m = os.path.join(d, "merged")
        # Every start, with or without --vm-net: a guest never sees the
        # machine's resolver.
        self._cloud_init_files(net or {})
        script = [
            "set -e",
            'mount -t overlay overlay -o lowerdir=/,upperdir="$1/upper",workdir="$1/work" "$2"',
        ]
        for name, (target, _) in PRIVATE.items():
            script.append('mount --bind "$1/private/%s" "$2%s"' % (name, target))
        script += [
            'mount --rbind /dev "$2/dev"',
            'mount -t proc proc "$2/proc"',
            'mount --rbind /sys "$2/sys"',
            'cd "$2"',
            'echo $$ > "$3"',
            # init lives as long as the simulator: no guest outlives a
            # SIGKILLed simulator by more than a second. (PR_SET_PDEATHSIG
            # would fire when the request thread that started it ends.)
            "exec chroot . /bin/sh -c 'cd / && while kill -0 \"$0\" 2>/dev/null; do sleep 1; done' %d" % os.getpid(),
        ]
        err = open(os.path.join(self.vmdir, "init.log"), "wb")
        self.init = subprocess.Popen(
            ["unshare", "--mount"] + (["--net"] if self.vm_net else []) + ["--fork", "--kill-child", "--", "/bin/sh", "-c", "\n".join(script), "init", d, m, pidfile],
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            cwd="/",
            start_new_session=True,
        )
        err.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            if os.path.exists(pidfile):
                try:
                    with open(pidfile) as f:
                        self.init_pid = int(f.read().strip())
                except ValueError:
                    time.sleep(0.01)
                    continue
                if self.vm_net:
                    self._wire(net)
                if self.qga:
                    try:
                        self.qga.start({"PATH": GUEST_PATH})
                    except qgamod.QgaError as e:
                        self.shutdown()
                        raise GuestError(str(e))
                return
            if self.init.poll() is not None:
                break
            time.sleep(0.01)
        with open(os.path.join(self.vmdir, "init.log"), "rb") as f:
            log = f.read().decode("utf-8", "replace").strip()
        self.shutdown()
        raise GuestError("guest file system did not come up: %s" % (log or "timeout"))

    def _cloud_init_files(self, net):
        """/etc/hosts and /etc/resolv.conf as cloud-init writes them at each
        boot: the VM's name on its address, and the nameserver/searchdomain
        of its config. Without a nameserver the file names none (a real PVE
        would copy the host's; here that is the machine's resolver, which a
        guest on its own network must not use): the C library then asks
        127.0.0.1, the guest's own loopback, and fails at once instead of
        waiting for a server the firewall hides (reverse lookups such as
        Python's http.server makes would stall a listener for seconds).
        Written into the overlay's upper dir before it is mounted."""
        etc = os.path.join(self.disk, "upper", "etc")
        os.makedirs(etc, exist_ok=True)
        hosts = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
        if net.get("cidr") and net.get("hostname"):
            hosts += "%s %s\n" % (net["cidr"].split("/")[0], net["hostname"])
        resolv = "# cloud-init: the VM's nameserver and searchdomain\n"
        if net.get("searchdomain"):
            resolv += "search %s\n" % " ".join(net["searchdomain"].split())
        for ns in (net.get("nameserver") or "").replace(",", " ").split():
            resolv += "nameserver %s\n" % ns
        for name, text in (("hosts", hosts), ("resolv.conf", resolv)):
            path = os.path.join(etc, name)
            if os.path.lexists(path) and not os.path.isfile(path):
                os.unlink(path)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(path, 0o644)

    def _wire(self, net):
        """The NIC (see the module doc); GuestError, after a shutdown, when
        it cannot be made."""
        try:
            self.netns_ino = os.stat("/proc/%d/ns/net" % self.init_pid).st_ino
        except OSError as e:
            self.shutdown()
            raise GuestError("guest network namespace: %s" % e)
        steps = [["ip", "link", "set", "lo", "up"]]
        host = []
        if net:
            host = [
                ["ip", "link", "add", net["tap"], "type", "veth", "peer", "name", "eth0", "netns", str(self.init_pid)],
                ["ip", "link", "set", net["tap"], "master", net["bridge"]],
                ["ip", "link", "set", net["tap"], "up"],
            ]
            if net.get("mac"):
                steps.append(["ip", "link", "set", "eth0", "address", net["mac"]])
            steps.append(["ip", "link", "set", "eth0", "up"])
            if net.get("cidr"):
                steps.append(["ip", "addr", "add", net["cidr"], "dev", "eth0"])
                if net.get("gw"):
                    steps.append(["ip", "route", "add", "default", "via", net["gw"], "dev", "eth0"])
        ns = ["nsenter", "-t", str(self.init_pid), "-n", "--"]
        for argv in host + [ns + a for a in steps]:
            if argv[:3] == ["ip", "link", "add"]:
                self.tap = net["tap"]
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd="/")
            if p.returncode != 0:
                out = p.stdout.decode("utf-8", "replace").strip()
                self.shutdown()
                raise GuestError("guest network: '%s' failed: %s" % (" ".join(argv[-6:]), out))

    def _netns_pids(self):
        """Every process in the guest's network namespace."""
        pids = []
        if self.netns_ino is None:
            return pids
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                if os.stat("/proc/%s/ns/net" % d).st_ino == self.netns_ino:
                    pids.append(int(d))
            except OSError:
                pass
        return pids

    def shutdown(self):
        """Kill every guest process and the namespace (a hard stop)."""
        if self.vm_net:
            # Daemons an exec left behind in their own session are in no
            # process group of ours: the namespace names them all.
            for _ in range(3):
                pids = [p for p in self._netns_pids() if p != os.getpid()]
                if not pids:
                    break
                for p in pids:
                    try:
                        os.kill(p, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.05)
        if self.qga:
            self.qga.stop()
        with self.lock:
            for rec in self.procs.values():
                if rec["popen"].poll() is None:
                    try:
                        os.killpg(rec["popen"].pid, signal.SIGKILL)
                    except OSError:
                        pass
            self.procs.clear()
        if self.init is not None:
            try:
                os.killpg(self.init.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.init.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.init = None
        self.init_pid = None
        if self.tap:
            # gone with the namespace already, unless something held it
            subprocess.run(["ip", "link", "del", self.tap], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.tap = None
        self.netns_ino = None

    def _nsenter(self, argv):
        net = ["-n"] if self.vm_net else []
        return ["nsenter", "-t", str(self.init_pid), "-m", "-r"] + net + ["-w", "--"] + argv

    def _run(self, argv, data=b"", limit=None):
        p = subprocess.run(
            self._nsenter(argv),
            input=data,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            env={"PATH": GUEST_PATH},
            timeout=60,
        )
        return p.returncode, p.stdout, p.stderr

    # -- guest-exec / guest-exec-status --------------------------------------

    def exec(self, command, stdin_bytes):
        """Start command (a list) in the guest; returns its pid."""
        if not command:
            raise GuestError("Invalid parameter 'path'")
        prog = command[0]
        rc, out, _ = self._run(["/bin/sh", "-c", 'command -v -- "$1"', "sh", prog])
        if rc != 0 or not out.strip():
            raise GuestError("Failed to execute child process \u201c%s\u201d (No such file or directory)" % prog)
        popen = subprocess.Popen(
            self._nsenter(list(command)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd="/",
            env={"PATH": GUEST_PATH},
            start_new_session=True,
        )
        rec = {"popen": popen, "out": bytearray(), "err": bytearray(), "out_trunc": False, "err_trunc": False, "done": threading.Event()}
        threads = [
            threading.Thread(target=self._feed, args=(popen.stdin, stdin_bytes), daemon=True),
            threading.Thread(target=self._drain, args=(popen.stdout, rec, "out"), daemon=True),
            threading.Thread(target=self._drain, args=(popen.stderr, rec, "err"), daemon=True),
        ]
        for t in threads:
            t.start()

        def reap():
            for t in threads:
                t.join()
            popen.wait()
            rec["done"].set()

        threading.Thread(target=reap, daemon=True).start()
        with self.lock:
            self.procs[popen.pid] = rec
        return popen.pid

    @staticmethod
    def _feed(pipe, data):
        try:
            if data:
                pipe.write(data)
        except OSError:
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _drain(self, pipe, rec, which):
        buf = rec[which]
        while True:
            chunk = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
            if not chunk:
                break
            room = self.output_cap - len(buf)
            if room > 0:
                buf += chunk[:room]
            if len(chunk) > max(room, 0):
                rec[which + "_trunc"] = True
        pipe.close()

    def exec_status(self, pid):
        """guest-exec-status: a dict; the first answer with exited frees the pid."""
        with self.lock:
            rec = self.procs.get(pid)
            if rec is None:
                raise GuestError("Invalid parameter 'pid'")
            if not rec["done"].is_set():
                return {"exited": 0}
            del self.procs[pid]
        res = {"exited": 1}
        rc = rec["popen"].returncode
        if rc < 0:
            res["signal"] = -rc
        else:
            res["exitcode"] = rc
        for which in ("out", "err"):
            if rec[which]:
                res[which + "-data"] = bytes(rec[which])
            if rec[which + "_trunc"]:
                res[which + "-truncated"] = 1
        self.last_status = {k: (v.decode("latin-1") if isinstance(v, bytes) else v) for k, v in res.items()}
        return res

    # -- guest-file-* ----------------------------------------------------------

    def write_file(self, path, data):
        """guest-file-open(w) + write + close: truncates, mode 0644 if new."""
        rc, _, err = self._run(["/bin/sh", "-c", 'umask 022; exec cat > "$1"', "sh", path], data)
        if rc != 0:
            raise GuestError("failed to open file '%s' (mode: 'w'): %s" % (path, _errno_text(err)))

    def read_file(self, path, offset, count):
        """Up to count bytes from offset; returns (bytes, eof)."""
        script = 'exec dd if="$1" bs=65536 iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none'
        rc, out, err = self._run(["/bin/sh", "-c", '[ -f "$1" ] || { cat -- "$1" >/dev/null; exit 1; }; ' + script, "sh", path, str(offset), str(count + 1)])
        if rc != 0:
            raise GuestError("failed to open file '%s' (mode: 'r'): %s" % (path, _errno_text(err)))
        return out[:count], len(out) <= count

    def snapshot_to(self, dest):
        """Copy the disk (upper and private dirs; not the overlay work dir)."""
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for part in ("upper", "private"):
            _cp_a(os.path.join(self.disk, part), os.path.join(dest, part))

    def restore_from(self, src):
        """Replace the disk with a copy of src (the VM must be stopped)."""
        for part in ("upper", "private", "work"):
            shutil.rmtree(os.path.join(self.disk, part), ignore_errors=True)
        for part in ("upper", "private"):
            _cp_a(os.path.join(src, part), os.path.join(self.disk, part))
        self._make_disk(self.disk)

    def listing(self, limit=200):
        """Files the guest changed (the overlay upper dir and the private dirs)."""
        out = []
        roots = [(os.path.join(self.disk, "upper"), "")]
        roots += [(os.path.join(self.disk, "private", n), t) for n, (t, _) in PRIVATE.items()]
        for base, prefix in roots:
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames.sort()
                for fn in sorted(filenames):
                    rel = os.path.relpath(os.path.join(dirpath, fn), base)
                    out.append(prefix + "/" + rel)
                    if len(out) >= limit:
                        return out
        return out

    def destroy(self):
        self.shutdown()
        shutil.rmtree(self.vmdir, ignore_errors=True)


def _cp_a(src, dst):
    # cp -a keeps overlay whiteouts (device nodes) and xattrs; shutil does not.
    p = subprocess.run(["cp", "-a", "--", src, dst], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise GuestError("copying the guest disk failed: %s" % p.stdout.decode("utf-8", "replace").strip())


def _errno_text(err):
    text = err.decode("utf-8", "replace").strip().splitlines()
    last = text[-1] if text else "error"
    if "nonexistent" in last or "can't open" in last or "No such file" in last:
        return "No such file or directory"
    for known in ("No such file or directory", "Is a directory", "Permission denied", "Not a directory"):
        if known in last:
            return known
    return last
