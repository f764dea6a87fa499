#!/usr/bin/env bash
# chromium.t - the real Chromium from Debian 12 (the `chromium` package,
# headless) through egressd, loading https://a.test:4443/hello from origin.py.
#
#   1. --proxy-server, without the managed policy: the ClientHello Chromium
#      sends after the CONNECT's 200 is captured off lo (it carries
#      encrypted_client_hello, 0xfe0d: GREASE, as no ECH configuration exists
#      anywhere here); the page does not load, the access log says `ech`, and
#      GET /v1/sandboxes/sb1/denials lists it with the hint.
#   2. --proxy-server, with the policy the golden image ships (taken from the
#      write_files entry of deploy/image/user-data.yaml): no 0xfe0d, the page
#      loads, the access log says allow.
#   3. no proxy, the transparent way: an nft redirect of the browser's
#      connections to port 4443 onto egressd's transparent-tls port, and
#      /etc/resolv.conf naming egressd's DNS server (`dns 127.0.0.1:53`);
#      with the policy the page loads (a `dns` line for a.test, a `tls` line
#      allowed); without it the hello again carries 0xfe0d (GREASE: the only
#      DNS server is egressd's, which hands out no ECH configuration) and
#      is denied `ech`.
#
# Nothing on the machine changes: the script runs in a network namespace of
# its own (egd_netns), and every Chromium runs in a mount namespace of its
# own (unshare -m, private propagation) where a copy of /etc/chromium (with
# or without policies/managed/egressd.json) is bind-mounted over
# /etc/chromium and the test's resolv.conf over /etc/resolv.conf; its
# profile and HOME are in $T.  Certificates: the point is the ClientHello and
# egressd's decision, not PKI, so Chromium is told to accept the leaf of
# a.test by its key (--ignore-certificate-errors-spki-list, which Chromium
# honours only with --user-data-dir) instead of being given the test CA.
#
# Background requests: even with the flags below, Chromium 156 asks
# update.googleapis.com for one component (the Optimization Guide's model
# manifest, "installsource": "ondemand"); it goes to egressd like the
# rest (through the proxy, or to egressd's DNS server) and is denied
# `not_allowed` inside the namespace; it is not checked here.
# TAP on stdout.  Needs BUILD_DIR, TOP, chromium, nft, setpriv; root.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
CHR=/usr/lib/chromium/chromium
[ -x "$CHR" ] || egm_bail "chromium is installed (apt-get install chromium)"
command -v nft >/dev/null || egm_bail "nft is installed (nftables)"
command -v setpriv >/dev/null || egm_bail "setpriv is installed (util-linux)"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

URL=https://a.test:$EGD_HTTPS_PORT/hello
WANT="hello from a.test"
# The browser's own group: Chromium runs as root (uid 0) like egressd, and
# from the same source address, 127.0.0.1 (the netns has only lo), as
# egressd's own connections to the origin; a redirect by source address
# would loop those back into egressd.  So the browser runs with a group id
# of its own (setpriv --regid) and the redirect matches `meta skgid`.  The
# sandbox binding holds 127.0.0.1: the address its proxy connections, its
# DNS queries and its redirected connections come from.
CHR_GID=4711
SB_ADDR=127.0.0.1
DNS_LISTEN=127.0.0.1:53

# --- the policy the golden image ships, read from its write_files entry
# (yaml-free: the entry's `content: |` block, dedented)
USER_DATA=$TOP/deploy/image/user-data.yaml
POLICY_PATH=/etc/chromium/policies/managed/egressd.json
py - "$USER_DATA" "$POLICY_PATH" >"$T/policy.json" <<'EOF'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
for i, line in enumerate(lines):
    m = re.match(r"( *)- path: *[\"']?([^\"'\s]+)[\"']? *$", line)
    if not m or m.group(2) != sys.argv[2]:
        continue
    keys = len(m.group(1)) + 2  # the indentation of the entry's other keys
    for j in range(i + 1, len(lines)):
        k = re.match(r"( *)(\S.*)$", lines[j])
        if not k:
            continue
        if len(k.group(1)) < keys:
            break  # the next entry, or the end of write_files
        if len(k.group(1)) == keys and re.match(r"content: *\|-? *$", k.group(2)):
            block = []
            for l in lines[j + 1:]:
                if l.strip() and len(l) - len(l.lstrip(" ")) <= keys:
                    break
                block.append(l)
            while block and not block[-1].strip():
                block.pop()
            ind = min(len(l) - len(l.lstrip(" ")) for l in block if l.strip())
            sys.stdout.write("\n".join(l[ind:] for l in block) + "\n")
            sys.exit(0)
sys.exit(1)
EOF
rc=$?
ok_json "user-data.yaml's write_files has $POLICY_PATH: JSON, EncryptedClientHelloEnabled false" \
    "$(cat "$T/policy.json")" 'isinstance(l, dict) and l.get("EncryptedClientHelloEnabled") is False'
[ "$rc" -eq 0 ] || egm_bail "the policy is read from $USER_DATA"
diag "the policy: $(cat "$T/policy.json")"
# Two copies of /etc/chromium: without any policies/ (whatever this machine
# has), and with the policy where the image puts it.
for d in nopolicy policy; do
    mkdir -p "$T/etc-$d" && cp -a /etc/chromium/. "$T/etc-$d/" && rm -rf "$T/etc-$d/policies" ||
        egm_bail "a copy of /etc/chromium"
done
mkdir -p "$T/etc-policy/policies/managed" &&
    cp "$T/policy.json" "$T/etc-policy/policies/managed/egressd.json" || egm_bail "the policy in the copy"
printf 'nameserver %s\noptions attempts:1 timeout:2\n' "${DNS_LISTEN%:*}" >"$T/resolv.conf"

egd_origin a.test || egm_bail "the origin a.test starts"
SPKI=$(openssl x509 -in "$T/certs/a.test.pem" -pubkey -noout | openssl pkey -pubin -outform der |
    openssl dgst -sha256 -binary | base64)
# resolver: nothing listens there; every name the preset allows is in the
# hosts-file, and denied names are never asked.
egd_start 'resolver 127.0.0.53' "dns $DNS_LISTEN" || egm_bail "egressd starts with dns $DNS_LISTEN"
egd_put sb1 "{\"id\":\"sb1\",\"name\":\"browser\",\"owner\":\"test\",\"addresses\":[\"$SB_ADDR\"],\"policy\":\"test\"}" \
    >/dev/null || egm_bail "PUT sandbox sb1 ($SB_ADDR)"

# --- the capture: every TCP connection to egressd's proxy or transparent
# port, from lo (AF_PACKET, outside the path): the client's first bytes up
# to the end of its first TLS record (after the CONNECT head, if any), one
# JSON line per connection.
cat >"$T/hellocap.py" <<'EOF'
import json, socket, struct, sys
out, ports = sys.argv[1], {int(p) for p in sys.argv[2].split(",")}
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
s.bind(("lo", 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
log = open(out, "a")
flows = {}
print("ready", flush=True)
def emit(key, head, rec):
    log.write(json.dumps({"src": "%s:%d" % key[:2], "dst": "%s:%d" % key[2:], "head": head,
                          "hello": rec.hex()}) + "\n")
    log.flush()
    del flows[key]
while True:
    pkt, addr = s.recvfrom(262144)
    # each packet on lo shows twice, going out and coming in: take one
    if addr[2] == socket.PACKET_OUTGOING or pkt[12:14] != b"\x08\x00":
        continue
    ip = pkt[14:]
    if ip[9] != 6:
        continue
    tcp = ip[(ip[0] & 15) * 4:struct.unpack(">H", ip[2:4])[0]]
    sport, dport, seq = struct.unpack(">HHI", tcp[:8])
    if dport not in ports:
        continue
    key = (socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport)
    if tcp[13] & 2:  # SYN: the data starts at seq + 1
        flows[key] = [(seq + 1) & 0xFFFFFFFF, {}]
        continue
    f = flows.get(key)
    data = tcp[(tcp[12] >> 4) * 4:]
    if f is None or not data:
        continue
    f[1][(seq - f[0]) & 0xFFFFFFFF] = data
    buf = b""
    while len(buf) in f[1] and len(buf) < 65536:
        buf += f[1][len(buf)]
    head, rec = "", buf
    if buf[:1] != b"\x16":
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            continue
        head, rec = buf[:end].split(b"\r\n")[0].decode("latin-1"), buf[end + 4:]
        if not head.startswith("CONNECT ") or rec[:1] not in (b"", b"\x16"):
            emit(key, head, b"")  # not a tunnel, or no TLS in it
            continue
    if len(rec) >= 5 and len(rec) >= 5 + int.from_bytes(rec[3:5], "big"):
        emit(key, head, rec[:5 + int.from_bytes(rec[3:5], "big")])
EOF
egm_server "$T/hellocap.out" "$EGD_PY" -S -u "$T/hellocap.py" "$T/hellos.log" \
    "${EGD_PROXY#*:},${EGD_TLS#*:}" || egm_bail "the capture on lo starts"

# hellos MARK PYEXPR: the captured hellos after line MARK where PYEXPR over
# `h` holds, parsed, as a JSON array of {dst, head, size, exts, sni, ech}
# (size: the record with its header; exts: the extension types in order).
HELLOS_PY='
import json, sys
def parse(b):
    p = 5 + 4 + 2 + 32
    p += 1 + b[p]
    p += 2 + int.from_bytes(b[p:p + 2], "big")
    p += 1 + b[p]
    end = p + 2 + int.from_bytes(b[p:p + 2], "big")
    p += 2
    exts, sni, lens = [], None, {}
    while p + 4 <= end:
        t, n = int.from_bytes(b[p:p + 2], "big"), int.from_bytes(b[p + 2:p + 4], "big")
        if t == 0:
            sni = b[p + 9:p + 9 + int.from_bytes(b[p + 7:p + 9], "big")].decode("ascii", "replace")
        exts.append(t)
        lens[t] = n
        p += 4 + n
    return exts, sni, lens
out = []
lines = open(sys.argv[1]).read().splitlines() if sys.argv[1] else []
for line in lines[int(sys.argv[2]):]:
    h = json.loads(line)
    b = bytes.fromhex(h["hello"])
    h["size"] = len(b)
    h["exts"], h["sni"], lens = parse(b) if b[:1] == b"\x16" and len(b) > 50 else ([], None, {})
    h["ech"] = lens.get(0xFE0D)
    del h["hello"]
    try:
        if eval(sys.argv[3]):
            out.append(h)
    except Exception:
        pass
print(json.dumps(out))
'
hellos() { py -c "$HELLOS_PY" "$T/hellos.log" "$1" "$2"; }
hellos_mark() { HELLOS_MARK=$(wc -l <"$T/hellos.log"); HELLOS_MARK=${HELLOS_MARK// /}; }
# hellos_wait PYEXPR: hellos after the mark, once there is one and no more
# came for 0.3 s (3 s at most)
hellos_wait() {
    local i got last="" same=0
    for ((i = 0; i < 30; i++)); do
        got=$(hellos "$HELLOS_MARK" "$1")
        if [ "$got" != "[]" ] && [ "$got" = "$last" ]; then
            same=$((same + 1))
            [ "$same" -ge 3 ] && break
        else
            same=0
        fi
        last=$got
        sleep 0.1
    done
    echo "$got"
}
# hellos_diag JSON: one diagnostic line per hello
hellos_diag() {
    py -c '
import json, sys
for h in json.loads(sys.argv[1]):
    print("#   %s%s: %d bytes, sni %s, %d extensions: %s%s" % (
        h["head"] + " then " if h["head"] else "", h["dst"], h["size"], h["sni"], len(h["exts"]),
        " ".join("%04x" % t for t in h["exts"]),
        "; encrypted_client_hello (fe0d) of %d bytes" % h["ech"] if h["ech"] is not None
        else "; no encrypted_client_hello"))' "$1"
}

# chr NAME ETC [FLAG...]: one Chromium (60 s at most) loads $URL with a
# fresh profile $T/NAME, in a mount namespace where $T/etc-ETC is
# /etc/chromium and $T/resolv.conf /etc/resolv.conf, with its own group;
# the DOM in $T/NAME.dom, stderr in $T/NAME.err, the exit status in CHR_RC,
# the error of a failed load in CHR_ERR.
CHR_FLAGS=(--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run
    --no-default-browser-check --disable-background-networking --disable-component-update
    --disable-sync --metrics-recording-only --disable-extensions --disable-default-apps
    --disable-domain-reliability --no-pings --disable-breakpad
    --disable-client-side-phishing-detection
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate"
    "--ignore-certificate-errors-spki-list=$SPKI")
chr() {
    local name=$1 etc=$T/etc-$2
    shift 2
    CHR_RC=0
    timeout -k 5 60 unshare -m -- sh -c \
        'mount --bind "$1" /etc/chromium && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"' \
        chr "$etc" "$T/resolv.conf" setpriv --regid="$CHR_GID" --clear-groups -- \
        env "${EGD_SCRUB[@]}" "$CHR" "${CHR_FLAGS[@]}" "--user-data-dir=$T/$name" "$@" \
        --dump-dom "$URL" >"$T/$name.dom" 2>"$T/$name.err" || CHR_RC=$?
    CHR_ERR=$(grep -o 'Page load failed: [^ ]*' "$T/$name.err" | tail -n 1)
    CHR_ERR=${CHR_ERR#Page load failed: }
}
# loaded NAME: the DOM holds origin.py's answer
loaded() { grep -q "$WANT" "$T/$1.dom"; }
chr_diag() { diag "chromium exit $CHR_RC${CHR_ERR:+, $CHR_ERR}; its DOM: $(head -c 200 "$T/$1.dom" | tr '\n' ' ')"; }

# --- 1. through --proxy-server, without the policy
egd_log_mark
hellos_mark
origin_before=$(origin_log_count 'o["event"] in ("hello", "request")')
chr c1 nopolicy "--proxy-server=http://$EGD_PROXY"
if ! loaded c1; then
    ok 0 "without the policy, through --proxy-server: the page does not load (${CHR_ERR:-no error})"
else
    ok 1 "without the policy, through --proxy-server: the page does not load"
    chr_diag c1
fi
H=$(hellos_wait 'h["head"] == "CONNECT a.test:4443 HTTP/1.1"')
ok_json "Chromium's ClientHellos after CONNECT a.test:4443 (captured): sni a.test, every one with encrypted_client_hello (0xfe0d)" \
    "$H" 'len(l) >= 1 and all(h["sni"] == "a.test" and h["ech"] is not None for h in l)'
hellos_diag "$H"
line=$(egd_log_wait 'l["mode"] == "connect" and l["host"] == "a.test"')
# (egressd logs the sni of an ech denial as null: the outer name says
# nothing about where the tunnel would go)
ok_json "egressd denies it: mode connect, a.test, sandbox sb1, reason ech, status 200 (the alert follows)" \
    "$line" 'l["decision"] == "deny" and l["reason"] == "ech" and l["sandbox"] == "sb1" and l["status"] == 200 and l["termination"] == "proxy/hello"'
diag "its access-log line: $line"
egm_lines_ok "egressd denies every one of the captured hellos the same way (none allowed)" \
    "$(egm_log_lines 'l["mode"] == "connect" and l["host"] == "a.test"')" \
    'len(ls) == '"$(py -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$H")"' and all(l["decision"] == "deny" and l["reason"] == "ech" for l in ls)'
n=$(($(origin_log_count 'o["event"] in ("hello", "request")') - origin_before))
ok $((n != 0)) "the origin saw no ClientHello and no request ($n)"
den=$(egd_admin GET /v1/sandboxes/sb1/denials)
ok_json "GET /v1/sandboxes/sb1/denials lists it: a.test, reason ech, with the hint (the policy, the flag)" \
    "$den" 'any(d["host"] == "a.test" and d["reason"] == "ech" and d["mode"] == "connect" and "EncryptedClientHelloEnabled" in d["hint"] and "--disable-features=EncryptedClientHello" in d["hint"] for d in l["denials"])'
diag "the denial: $(py -c 'import json, sys; print(json.dumps(next((d for d in json.loads(sys.argv[1])["denials"] if d["reason"] == "ech"), None)))' "$den")"

# --- 2. through --proxy-server, with the policy
egd_log_mark
hellos_mark
origin_before=$(origin_log_count 'o["event"] == "request" and o["target"] == "/hello"')
chr c2 policy "--proxy-server=http://$EGD_PROXY"
if loaded c2; then
    ok 0 "with the policy, through --proxy-server: the page loads ('$WANT')"
else
    ok 1 "with the policy, through --proxy-server: the page loads ('$WANT')"
    chr_diag c2
fi
H=$(hellos_wait 'h["head"] == "CONNECT a.test:4443 HTTP/1.1"')
ok_json "its ClientHellos after CONNECT a.test:4443: sni a.test, no encrypted_client_hello" \
    "$H" 'len(l) >= 1 and all(h["sni"] == "a.test" and h["ech"] is None for h in l)'
hellos_diag "$H"
egd_log_ok "egressd allows it: mode connect, a.test, sni a.test, sandbox sb1, upstream 127.0.0.16" \
    'l["mode"] == "connect" and l["host"] == "a.test"' \
    'l["decision"] == "allow" and l["reason"] == "allowed" and l["sni"] == "a.test" and l["sandbox"] == "sb1" and l["upstream"].startswith("127.0.0.16:")'
n=$(egd_log_count 'l["reason"] == "ech"')
ok $((n != 0)) "nothing denied ech ($n)"
n=$(($(origin_log_count 'o["event"] == "request" and o["target"] == "/hello"') - origin_before))
ok $((n < 1)) "the origin answered GET /hello ($n)"

# --- 3. transparent: no proxy; the redirect and the policy DNS server.
# Chromium resolves with its own DNS client (it reads /etc/resolv.conf, and
# asks HTTPS records, which getaddrinfo never does): HTTPS for
# _4443._https.a.test (RFC 9460's name for a port other than 443), which
# egressd answers NXDOMAIN (bad_host: not an LDH name), and A for a.test;
# no AAAA (nothing but lo here).  The capture sees the redirected
# connection after the redirect, i.e. to egressd's 127.0.0.1:8443.
nft -f - <<EOF || egm_bail "nftables: redirect the browser's port $EGD_HTTPS_PORT to egressd"
table ip egdchr {
    chain out {
        type nat hook output priority -100;
        meta skgid $CHR_GID tcp dport $EGD_HTTPS_PORT redirect to :${EGD_TLS#*:}
    }
}
EOF
egd_log_mark
hellos_mark
origin_before=$(origin_log_count 'o["event"] == "request" and o["target"] == "/hello"')
chr c3 policy --no-proxy-server
if loaded c3; then
    ok 0 "with the policy, transparently (no proxy): the page loads ('$WANT')"
else
    ok 1 "with the policy, transparently (no proxy): the page loads ('$WANT')"
    chr_diag c3
fi
egd_log_ok "egressd's DNS server answered a.test: mode dns, A, NOERROR, sandbox sb1" \
    'l["mode"] == "dns" and l["host"] == "a.test" and l["method"] == "A"' \
    'l["decision"] == "allow" and l["answer"] == "NOERROR" and l["sandbox"] == "sb1"'
diag "what Chromium asked egressd's DNS server: $(egm_log_lines 'l["mode"] == "dns"' | py -c '
import json, sys
print(", ".join(sorted({"%s %s: %s (%s)" % (l["host"], l["method"], l["answer"], l["reason"]) for l in json.load(sys.stdin)})))')"
egd_log_ok "the redirected connection: mode tls, sni a.test, allowed, sandbox sb1, upstream 127.0.0.16:4443" \
    'l["mode"] == "tls" and l["sni"] == "a.test"' \
    'l["decision"] == "allow" and l["sandbox"] == "sb1" and l["upstream"] == "127.0.0.16:'"$EGD_HTTPS_PORT"'"'
H=$(hellos_wait 'h["dst"] == "'"$EGD_TLS"'" and h["sni"] == "a.test"')
ok_json "its ClientHellos at the transparent port: no encrypted_client_hello" \
    "$H" 'len(l) >= 1 and all(h["ech"] is None for h in l)'
hellos_diag "$H"
n=$(($(origin_log_count 'o["event"] == "request" and o["target"] == "/hello"') - origin_before))
ok $((n < 1)) "the origin answered GET /hello ($n)"

# --- 3b. transparent, without the policy: GREASE ECH even so
egd_log_mark
hellos_mark
chr c4 nopolicy --no-proxy-server
if ! loaded c4; then
    ok 0 "without the policy, transparently: the page does not load (${CHR_ERR:-no error})"
else
    ok 1 "without the policy, transparently: the page does not load"
    chr_diag c4
fi
H=$(hellos_wait 'h["dst"] == "'"$EGD_TLS"'" and h["sni"] == "a.test"')
ok_json "its ClientHellos at the transparent port (captured): sni a.test, every one with encrypted_client_hello" \
    "$H" 'len(l) >= 1 and all(h["ech"] is not None for h in l)'
hellos_diag "$H"
# (an ech denial at the transparent port is logged with host and sni null;
# the capture above ties these connections to a.test)
egm_lines_ok "egressd denies every one of them: mode tls, reason ech, sandbox sb1" \
    "$(egm_log_lines 'l["mode"] == "tls"')" \
    'len(ls) == '"$(py -c 'import json, sys; print(len(json.loads(sys.argv[1])))' "$H")"' and all(l["decision"] == "deny" and l["reason"] == "ech" and l["sandbox"] == "sb1" for l in ls)'
nft delete table ip egdchr

egd_finish
tap_end
