#!/usr/bin/env python3
"""standin.py - stand-ins for the services a sandbox must never reach
(pveproxy on 8006, sshd on 22, a LAN host's): a TCP listener on each
ADDR:PORT that logs every connection it gets and answers one line.

    standin.py --log FILE ADDR:PORT...

Each accepted connection is one line "ADDR:PORT PEER_ADDR" in --log, then
the stand-in sends "standin ADDR:PORT\\n" and closes. Prints "ready" once
every socket listens. Python standard library only.
"""

import argparse
import socket
import sys
import threading


def serve(sock, name, log, lock):
    while True:
        try:
            conn, peer = sock.accept()
        except OSError:
            return
        with lock:
            log.write("%s %s\n" % (name, peer[0]))
            log.flush()
        try:
            conn.settimeout(2)
            conn.sendall(("standin %s\n" % name).encode())
        except OSError:
            pass
        finally:
            conn.close()


def main():
    ap = argparse.ArgumentParser(description="logging TCP stand-ins")
    ap.add_argument("--log", required=True)
    ap.add_argument("listen", nargs="+", help="ADDR:PORT")
    args = ap.parse_args()
    log = open(args.log, "a", encoding="utf-8")
    lock = threading.Lock()
    for spec in args.listen:
        addr, _, port = spec.rpartition(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, int(port)))
        s.listen(64)
        threading.Thread(target=serve, args=(s, spec, log, lock), daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
