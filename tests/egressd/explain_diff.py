#!/usr/bin/env python3
"""explain_diff.py - the differential test of explain.t: an explain never
says what the judge would not do.

  explain_diff.py gen DIR SEED CASES    write the random world into DIR:
        policies/pN.allow, sandboxes/ID.json, hosts.extra, cases.json
  explain_diff.py run DIR EGRESSCTL CONF ADMIN_SOCK PROXY ACCESS_LOG SAMPLE
        for every case: the live explain (admin API), the offline one
        (egressctl explain -c CONF --sandbox FILE --addr ...) on the
        addresses the live one judged, and, for SAMPLE cases, a real
        request through the proxy, whose access-log line must carry the
        same decision (and for a denial the same reason and rule).
        Prints "# ..." diagnostics and one "RESULT 0|1 TEXT" line per
        check (0: it holds), for explain.t to number; exits 0.

Every case has a name of its own (cN.BASE), with 1..3 addresses in the
hosts file drawn from a pool that mixes allowed, `ip`-denied and private
ones, so both orders of a would_deny and a deny come up, in report-mode
presets and enforcing ones.  Nothing is sent anywhere but to loopback:
the test runs in a namespace of its own (unshare -n) where no other
address has a route, so an allowed request to one just fails to connect.
"""
import base64
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.parse

BASES = ["a.test", "b.test", "c.test", "d.test", "e.test", "f.test"]
# Preset lines; every preset gets a few (names are cN.BASE, so a rule
# names a zone or a regex).
PRESET_RULES = [
    ".a.test", "*.b.test", "deny .b.test:8080", ".c.test:443", r"deny ~c1[0-9]*\.c\.test",
    ".d.test private-ok", "*:80", "deny .e.test:443", ".e.test:*", "ip 198.51.100.0/25:*",
    "deny ip 198.51.100.128/25", "deny ip 203.0.113.7", "ip 203.0.113.0/24:443",
    "deny ip 2001:db8::/33", "mode report", "mode report",
]
EXTRA_RULES = [".f.test", ".e.test:8080", ".c.test:80", "*.a.test:8080"]
# Allowed by the test's allow-range (TEST-NETs, 2001:db8::/32), denied by
# `ip` rules in some presets, or private (the wall): loopback, RFC 1918,
# link-local, IPv4-mapped.
ADDRS = [
    "198.51.100.5", "198.51.100.200", "203.0.113.7", "203.0.113.9", "2001:db8::1",
    "2001:db8:8000::1", "10.0.0.1", "192.168.7.7", "127.0.0.2", "169.254.169.254",
    "198.51.100.6", "203.0.113.10", "198.51.100.7", "198.51.100.8", "2001:db8::2",
]
PORTS = [443, 80, 8080]
PRESETS = 6
SANDBOXES = 8


def gen(d, seed, cases):
    rnd = random.Random(seed)
    os.makedirs(f"{d}/policies", exist_ok=True)
    os.makedirs(f"{d}/sandboxes", exist_ok=True)
    for p in range(PRESETS):
        lines = rnd.sample(PRESET_RULES, rnd.randint(2, 7))
        with open(f"{d}/policies/p{p}.allow", "w") as f:
            f.write(f"# random preset {p} (seed {seed})\n" + "\n".join(lines) + "\n")
    sandboxes = []
    for s in range(SANDBOXES):
        sid = str(601 + s)
        b = {"id": sid, "name": f"sbx-{sid}", "owner": "diff", "policy": f"p{rnd.randrange(PRESETS)}",
             "allow": rnd.sample(EXTRA_RULES, rnd.randint(0, 2)), "token": f"t{sid}"}
        with open(f"{d}/sandboxes/{sid}.json", "w") as f:
            json.dump(b, f)
        sandboxes.append(sid)
    out, hosts = [], []
    for i in range(cases):
        name = f"c{i}.{rnd.choice(BASES)}"
        addrs = rnd.sample(ADDRS, rnd.randint(1, 3))
        hosts += [f"{a} {name}" for a in addrs]
        out.append({"name": name, "port": rnd.choice(PORTS), "sandbox": rnd.choice(sandboxes)})
    with open(f"{d}/hosts.extra", "w") as f:
        f.write("\n".join(hosts) + "\n")
    with open(f"{d}/cases.json", "w") as f:
        json.dump(out, f)


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("egressd", timeout=20)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(self.path)


def live(sock, case):
    q = urllib.parse.urlencode({"host": case["name"], "port": case["port"], "sandbox": case["sandbox"]})
    c = UnixHTTP(sock)
    c.request("GET", f"/v1/explain?{q}")
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"explain: status {r.status}: {body[:200]!r}")
    return json.loads(body)


def offline(ctl, conf, d, case, addrs):
    cmd = [ctl, "explain", "-c", conf, "--sandbox", f"{d}/sandboxes/{case['sandbox']}.json"]
    for a in addrs:
        cmd += ["--addr", a]
    cmd.append(f"{case['name']}:{case['port']}")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    verdict = [l for l in p.stdout.splitlines() if l.startswith("verdict")]
    if not verdict:
        raise RuntimeError(f"egressctl printed no verdict (exit {p.returncode}): {p.stderr.strip()}")
    words = verdict[0].split()
    return {"decision": words[1], "reason": words[2].rstrip(":"), "rc": p.returncode}


def request(proxy, case):
    """One absolute-URI request through the proxy as the case's sandbox;
    the status egressd answered."""
    host, port = proxy.rsplit(":", 1)
    auth = base64.b64encode(f"{case['sandbox']}:t{case['sandbox']}".encode()).decode()
    s = socket.create_connection((host, int(port)), timeout=30)
    target = f"http://{case['name']}:{case['port']}/diff"
    s.sendall((f"GET {target} HTTP/1.1\r\nHost: {case['name']}:{case['port']}\r\n"
               f"Proxy-Authorization: Basic {auth}\r\nConnection: close\r\n\r\n").encode())
    data = b""
    while b"\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    return int(line.split()[1]) if line.startswith("HTTP/1.") else 0


def log_line(path, case, deadline=15.0):
    """The access-log line of the case's request (its name is its own)."""
    end = time.time() + deadline
    while time.time() < end:
        with open(path) as f:
            for raw in f:
                try:
                    l = json.loads(raw)
                except ValueError:
                    continue
                if l.get("host") == case["name"] and l.get("mode") == "http":
                    return l
        time.sleep(0.1)
    return None


def run(d, ctl, conf, sock, proxy, access_log, sample):
    cases = json.load(open(f"{d}/cases.json"))
    n, bad, seen = 0, 0, {}
    for i, case in enumerate(cases):
        who = f"case {i}: {case['name']}:{case['port']} as sandbox {case['sandbox']}"
        lv = live(sock, case)
        addrs = [a["addr"] for a in lv.get("addresses", [])]
        if lv.get("name", {}).get("decision") == "deny":
            # the name decided: the addresses were not looked at; give
            # egressctl the hosts file's, which it must not look at either
            addrs = [l.split()[0] for l in open(f"{d}/hosts.extra") if l.split()[1] == case["name"]]
        off = offline(ctl, conf, d, case, addrs)
        seen[lv["decision"]] = seen.get(lv["decision"], 0) + 1
        n += 1
        want_rc = 1 if lv["decision"] == "deny" else 0
        if (off["decision"], off["reason"], off["rc"]) != (lv["decision"], lv["reason"], want_rc):
            bad += 1
            print(f"# {who}: live {lv['decision']} {lv['reason']}, offline {off} (addresses {addrs})")
        if i < sample:
            status = request(proxy, case)
            l = log_line(access_log, case)
            if l is None:
                bad += 1
                print(f"# {who}: no access-log line (status {status})")
                continue
            same = l["decision"] == lv["decision"]
            if lv["decision"] == "deny":
                same = same and l["reason"] == lv["reason"] and status == 403
                same = same and (l.get("rule") or None) == (lv.get("rule") or None)
            else:
                same = same and status != 403
            if not same:
                bad += 1
                print(f"# {who}: explain said {lv['decision']} {lv['reason']} {lv.get('rule')}, "
                      f"the judge did {l['decision']} {l['reason']} {l.get('rule')} (status {status}; "
                      f"addresses {addrs})")
    print(f"# decisions of the live explain: {json.dumps(seen, sort_keys=True)}")
    print(f"RESULT {int(bad != 0)} {n} random cases: the offline and the live explain agree, and the judge did "
          f"what they said on the first {sample} ({bad} disagreements)")
    every = all(seen.get(k, 0) >= 3 for k in ("allow", "deny", "would_deny"))
    print(f"RESULT {int(not every)} the cases reach every decision: {json.dumps(seen, sort_keys=True)}")


def main():
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run(*sys.argv[2:8], int(sys.argv[8]))


if __name__ == "__main__":
    main()
