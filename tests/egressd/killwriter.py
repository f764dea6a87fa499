"""killwriter.py - change egressd's bindings until egressd is gone, and
check what a restarted egressd holds (tests/egressd/kill9.t).

    killwriter.py write SOCKET JOURNAL SEED
        One admin call after another on the unix socket SOCKET: PUT a
        binding, DELETE one, or PUT the whole set, drawn at random from a
        pool of 40 sandboxes (each its own address, so none conflicts).
        Each call is written to JOURNAL as "send OP" before it goes and
        "ack STATUS" once its answer is in.  Ends when egressd stops
        answering.

    killwriter.py check SOCKET JOURNAL MODEL
        MODEL holds the bindings acknowledged before (JSON, {id: address});
        the journal's acknowledged calls are applied to it.  The restarted
        egressd's bindings (GET /v1/sandboxes) must be that, or that with
        the one call in flight when egressd was killed (sent, not
        acknowledged: it may have been written or not).  Prints what it
        found, writes the state egressd holds back to MODEL, and exits 1
        when it is neither.
"""
import http.client
import json
import random
import socket
import sys

POOL = 40


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(self.path)


def call(sock, method, path, body=None):
    c = UnixConnection(sock)
    data = json.dumps(body) if body is not None else None
    c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    text = r.read()
    c.close()
    return r.status, text


def address(i):
    return "127.1.%d.%d" % (i // 200, 10 + i % 200)


def binding(i):
    return {"addresses": [address(i)], "owner": "kill9", "policy": "test"}


def draw(rng):
    r = rng.random()
    i = rng.randrange(POOL)
    if r < 0.6:
        return {"op": "put", "id": "k%d" % i}
    if r < 0.9:
        return {"op": "delete", "id": "k%d" % i}
    ids = rng.sample(range(POOL), rng.randrange(POOL))
    return {"op": "set", "ids": ["k%d" % j for j in sorted(ids)]}


def send(sock, op):
    if op["op"] == "put":
        i = int(op["id"][1:])
        return call(sock, "PUT", "/v1/sandboxes/" + op["id"], binding(i))[0]
    if op["op"] == "delete":
        return call(sock, "DELETE", "/v1/sandboxes/" + op["id"])[0]
    body = [dict(binding(int(k[1:])), id=k) for k in op["ids"]]
    return call(sock, "PUT", "/v1/sandboxes", body)[0]


def write(sock, journal, seed):
    rng = random.Random(int(seed))
    with open(journal, "a", buffering=1) as j:
        while True:
            op = draw(rng)
            j.write("send " + json.dumps(op) + "\n")
            try:
                status = send(sock, op)
            except (OSError, http.client.HTTPException):
                return
            j.write("ack %d\n" % status)


def apply(model, op, status):
    if status not in (200, 204):
        return
    if op["op"] == "put":
        model[op["id"]] = address(int(op["id"][1:]))
    elif op["op"] == "delete":
        model.pop(op["id"], None)
    else:
        model.clear()
        for k in op["ids"]:
            model[k] = address(int(k[1:]))


def check(sock, journal, model_file):
    try:
        model = json.load(open(model_file))
    except FileNotFoundError:
        model = {}
    pending = None
    acked = 0
    for line in open(journal):
        word, _, rest = line.rstrip("\n").partition(" ")
        if word == "send":
            pending = json.loads(rest)
        elif word == "ack" and pending is not None:
            apply(model, pending, int(rest))
            pending = None
            acked += 1
    status, text = call(sock, "GET", "/v1/sandboxes")
    held = {b["id"]: b["addresses"][0] for b in json.loads(text)} if status == 200 else None
    with_pending = dict(model)
    if pending is not None:
        apply(with_pending, pending, 200)
    fine = held == model or held == with_pending
    which = "all acknowledged" if held == model else "acknowledged + the one in flight"
    print("%s: %d calls acknowledged, %s; egressd holds %s bindings%s" % (
        "ok" if fine else "MISMATCH", acked, "one in flight" if pending else "none in flight",
        "no" if held is None else len(held), " (" + which + ")" if fine else ""))
    if not fine:
        print("  expected %s" % sorted(model.items()))
        print("  or       %s" % sorted(with_pending.items()))
        print("  held     %s" % (sorted(held.items()) if held is not None else status))
        return 1
    json.dump(held, open(model_file, "w"))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(*sys.argv[2:5])
    else:
        sys.exit(check(*sys.argv[2:5]))
