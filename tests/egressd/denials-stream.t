#!/usr/bin/env bash
# denials-stream.t - GET /v1/denials and its live stream (?follow=1, server-
# sent events), followed with curl -N: a denial a real curl caused through
# the proxy reaches a follower within a second (the latencies are printed),
# with its sandbox, host, port, method, path (never the query) and reason;
# several sandboxes' denials in the order made, numbered one after another;
# GET /v1/denials newest first, each entry what the stream gave; the ones
# missed sent again after Last-Event-ID (or since=); a keepalive comment
# when idle; hostile names escaped as the per-sandbox endpoint shows them;
# at most 32 followers (the 33rd gets 503) and one that closes is forgotten
# at once; a follower that does not read while 20 000 denials are made
# (20 000 a second, 5 000 in a sanitizer build) leaves egressd's RSS
# bounded, a follower beside it gets every one, and once it reads it is
# told how many it lost; the admin token is required; stopping egressd
# ends the streams with their last chunk.
# TAP on stdout.  Needs BUILD_DIR, TOP, dig; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
command -v dig >/dev/null || egm_bail "dig is installed (bind9-dnsutils)"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

FLOOD=20000         # denials made while a follower does not read
FLOOD_RATE=20000    # a second: the ring (1024) lasts 50 ms, so the nudge is needed
FLOOD_AHEAD=350     # how far the flood may run ahead of f1: < the ring, 350 x 611 B < the cap
RSS_BOUND_KIB=6144  # how much more egressd may hold after them
FOLLOW_MAX=32       # PX_FEED_MAX
LATENCY_MAX_MS=1000 # a denial reaches a follower within a second
# In a sanitizer build, freed memory waits in ASan's quarantine (256 MiB by
# default): RSS would grow by that much whatever egressd does.  A 16 MiB
# one fills during the first flood, before the baseline is taken.
if grep -q AddressSanitizer "$EGD_BIN" 2>/dev/null || ldd "$EGD_BIN" 2>/dev/null | grep -q libasan; then
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16
    RSS_BOUND_KIB=12288 # ASan's allocator holds more of what comes and goes
    FLOOD_RATE=5000     # its main loop makes the events 5-10 times slower
    diag "sanitizer build; ASAN_OPTIONS=$ASAN_OPTIONS"
fi

ADMIN=127.0.0.1:9470
DNS=127.0.0.1
DNS_PORT=5353
printf 'tok-%s\n' "$RANDOM$RANDOM$RANDOM" >"$T/admin.token"
chmod 600 "$T/admin.token"
TOKEN=$(head -n1 "$T/admin.token")
# egressd with a TCP admin and its token, the policy DNS server, and a DNS
# rate that lets the flood through.
egd_write_config "dns $DNS:$DNS_PORT" "dns-rate-per-sandbox 1000000"
sed -i "s|^admin .*|admin $ADMIN\nadmin-token-file $T/admin.token|" "$T/egressd.conf"
"$EGD_BIN" -c "$T/egressd.conf" 2>>"$T/egressd.err" &
EGD_PID=$!
for ((i = 0; i < 200; i++)); do
    [ "$(curl -q -s --noproxy '*' -m 1 "http://$EGD_METRICS/healthz")" = ok ] && break
    sleep 0.05
done
[ "$(curl -q -s --noproxy '*' -m 1 "http://$EGD_METRICS/healthz")" = ok ] ||
    { diag_file "$T/egressd.err"; egm_bail "egressd starts with a TCP admin"; }

# api METHOD PATH [CURL ARGS...]: the admin API with the token; the body
# in $T/api.body; prints the status.
api() {
    local method=$1 path=$2
    shift 2
    curl -q -s --noproxy '*' -m 5 -X "$method" -H "Authorization: Bearer $TOKEN" \
        -o "$T/api.body" -w '%{http_code}' "$@" "http://$ADMIN$path"
}
for sb in 501:127.0.0.5 502:127.0.0.6 503:127.0.0.7; do
    api PUT "/v1/sandboxes/${sb%%:*}" -H 'Content-Type: application/json' --data-binary \
        '{"id":"'"${sb%%:*}"'","owner":"o'"${sb%%:*}"'","addresses":["'"${sb#*:}"'"],"policy":"test"}' \
        >/dev/null
done
[ "$(api GET /v1/sandboxes)" = 200 ] && py -c 'import json,sys; sys.exit(len(json.load(open(sys.argv[1]))) != 3)' "$T/api.body" ||
    egm_bail "sandboxes 501, 502, 503 bound"

# Each line a follower reads, with the wall-clock time it came (read in
# bulk: a flood must not find the follower slower than curl).
STAMP_PY='
import os, sys, time
rest = b""
while True:
    b = os.read(0, 1 << 20)
    if not b:
        break
    lines = (rest + b).split(b"\n")
    rest = lines.pop()
    t = b"%.6f " % time.time()
    os.write(1, b"".join(t + l + b"\n" for l in lines))
'
# follow NAME [CURL ARGS...]: a follower, curl -N, in the background; its
# stamped lines in $T/NAME.out, its head in $T/NAME.head, curl's pid in
# FPID[NAME]; waits until the stream has begun.
declare -A FPID
follow() {
    local name=$1 i
    shift
    curl -q -sS -N --noproxy '*' -D "$T/$name.head" -H "Authorization: Bearer $TOKEN" "$@" \
        "http://$ADMIN/v1/denials?follow=1${FOLLOW_QUERY:-}" \
        > >(py -c "$STAMP_PY" >"$T/$name.out") 2>"$T/$name.err" &
    FPID[$name]=$!
    EGD_PIDS+=($!)
    for ((i = 0; i < 100; i++)); do
        grep -q ': following denials after' "$T/$name.out" 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}
unfollow() {
    [ -n "${FPID[$1]:-}" ] || return 0
    kill "${FPID[$1]}" 2>/dev/null
    wait "${FPID[$1]}" 2>/dev/null
}
# The events of follower NAME as a JSON list: {"t": when its last line
# came, "id", "event", "data" (parsed), "comments": [...]}.
EVENTS_PY='
import json, sys
evs, cur = [], {}
for raw in open(sys.argv[1], "rb").read().split(b"\n"):
    if not raw:
        continue
    t, _, line = raw.partition(b" ")
    line = line.decode("utf-8", "backslashreplace")
    if line == "":
        if cur:
            evs.append(cur)
        cur = {}
        continue
    cur["t"] = float(t)
    key, _, val = line.partition(":")
    val = val[1:] if val.startswith(" ") else val
    if key == "":
        cur.setdefault("comments", []).append(val)
    elif key == "data":
        try:
            cur["data"] = json.loads(val)
        except ValueError:
            cur["data"] = val
    else:
        cur[key] = val
print(json.dumps(evs))
'
events() { py -c "$EVENTS_PY" "$T/$1.out"; }
# ev NAME PYEXPR [ARG...]: PYEXPR over `ev` (NAME's denial events), `lost`
# (its lost events' data), `cm` (its comment lines) and sys.argv[3...]
# (ARG...); exit 1 when false.
ev() {
    events "$1" >"$T/ev.json"
    py -c '
import json, sys
evs = json.load(open(sys.argv[1]))
ev = [e for e in evs if e.get("event") == "denial"]
lost = [e["data"] for e in evs if e.get("event") == "lost"]
cm = [c for e in evs for c in e.get("comments", [])]
v = eval("(" + sys.argv[2] + ")")
sys.exit(0 if v else 1)' "$T/ev.json" "${@:2}"
}
# check_ev TEXT NAME PYEXPR [ARG...]: one TAP line; the last events when false.
check_ev() {
    local rc=0
    ev "${@:2}" || rc=1
    ok "$rc" "$1"
    if [ "$rc" -ne 0 ]; then
        diag "wanted: $3"
        events "$2" | py -c 'import json,sys; [print("#   " + json.dumps(e)[:300]) for e in json.load(sys.stdin)[-6:]]'
    fi
}
# wait_ev NAME PYEXPR [S]: until PYEXPR holds for NAME's events (5 s).
wait_ev() {
    local i
    for ((i = 0; i < ${3:-5} * 20; i++)); do
        ev "$1" "$2" && return 0
        sleep 0.05
    done
    return 1
}
deny() { # deny SOURCE URL [CURL ARGS...]: a denied request through the proxy; its status
    local src=$1 url=$2
    shift 2
    egd_curl --interface "$src" -s -o /dev/null -w '%{http_code}' -x "http://$EGD_PROXY" "$@" "$url"
}
newest_seq() { api GET /v1/denials >/dev/null && py -c 'import json,sys; print(json.load(open(sys.argv[1]))["seq"])' "$T/api.body"; }

# --- the admin token
code=$(curl -q -s --noproxy '*' -m 5 -N -o /dev/null -w '%{http_code}' "http://$ADMIN/v1/denials?follow=1")
ok "$([ "$code" = 401 ] && echo 0 || echo 1)" "the stream without the admin token: 401 (got $code)"
code=$(curl -q -s --noproxy '*' -m 5 -N -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${TOKEN}x" \
    "http://$ADMIN/v1/denials?follow=1")
ok "$([ "$code" = 401 ] && echo 0 || echo 1)" "  with a wrong token: 401 (got $code)"
code=$(curl -q -s --noproxy '*' -m 5 -o /dev/null -w '%{http_code}' "http://$ADMIN/v1/denials")
ok "$([ "$code" = 401 ] && echo 0 || echo 1)" "GET /v1/denials without it: 401 (got $code)"

# --- before any denial
code=$(api GET /v1/denials)
ok_json "GET /v1/denials before any denial: {\"denials\": [], \"seq\": 0} ($code)" "$(cat "$T/api.body")" \
    'l == {"denials": [], "seq": 0}'
follow f1 || egm_bail "a follower (curl -N) starts"
check "the stream's head: 200, text/event-stream, no-store, chunked" py -c '
import sys
h = open(sys.argv[1]).read().lower()
sys.exit(not (h.startswith("http/1.1 200") and "content-type: text/event-stream" in h
              and "cache-control: no-store" in h and "transfer-encoding: chunked" in h))' "$T/f1.head"
code=$(api POST /v1/denials)
ok "$([ "$code" = 405 ] && echo 0 || echo 1)" "POST /v1/denials: 405 (got $code)"
code=$(api GET '/v1/denials?follow=1&since=x')
ok "$([ "$code" = 400 ] && echo 0 || echo 1)" "since=x: 400 (got $code)"
code=$(api GET /v1/nothing)
check "the 404 lists /v1/denials and ?follow=1 (got $code)" grep -q '/v1/denials, /v1/denials?follow=1' "$T/api.body"

# --- idle: a keepalive comment every 15 s
sleep 16
check_ev "idle for 16 s: a ': keepalive' comment, and no event" f1 '"keepalive" in cm and ev == [] and lost == []'

# --- a real curl's denial, within a second, with its fields
for i in 1 2 3 4 5; do
    deny 127.0.0.5 "http://lat$i.test/deep/path/$i?token=SECRET$i" >/dev/null
    sleep 0.3
done
egd_log_wait 'l["host"] == "lat5.test"' >/dev/null
wait_ev f1 'len([e for e in ev if e["data"]["host"].startswith("lat")]) == 5' 3
check_ev "a follower gets each denial a real curl caused: sandbox, host, port, method, path, reason, mode, status, seq" f1 '
[(e["id"], e["data"]["seq"], e["data"]["sandbox"], e["data"]["host"], e["data"]["port"], e["data"]["method"],
  e["data"]["path"], e["data"]["reason"], e["data"]["mode"], e["data"]["status"]) for e in ev[:5]] ==
[(str(i), i, "501", "lat%d.test" % i, 80, "GET", "/deep/path/%d" % i, "not_allowed", "http", 403) for i in range(1, 6)]'
check "  never the query (SECRET is nowhere in the stream)" test "$(grep -c SECRET "$T/f1.out")" = 0
lat=$(events f1 | py -c '
import json, sys, datetime
evs = [e for e in json.load(sys.stdin) if e.get("event") == "denial" and e["data"]["host"].startswith("lat")]
ms = []
for e in evs:
    ts = datetime.datetime.strptime(e["data"]["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    ms.append(round((e["t"] - ts.timestamp()) * 1000))
print(" ".join(str(m) for m in ms))')
diag "latency from each denial's access-log time to the follower (ms): $lat"
check "  each within $LATENCY_MAX_MS ms (${lat:-none})" py -c '
import sys
ms = [int(x) for x in sys.argv[1].split()]
sys.exit(not (len(ms) == 5 and all(0 <= m < int(sys.argv[2]) for m in ms)))' "$lat" "$LATENCY_MAX_MS"
c=$(egd_curl --interface 127.0.0.5 -s -o /dev/null -w '%{http_code}' -p -x "http://$EGD_PROXY" https://blocked.test/ 2>/dev/null)
RULE_BLOCKED=$(egd_rule "deny blocked.test")
wait_ev f1 'ev[-1]["data"]["host"] == "blocked.test"' 3
check_ev "a CONNECT's denial ($c): mode connect, deny_rule $RULE_BLOCKED, path null" f1 '
ev[-1]["data"]["mode"] == "connect" and ev[-1]["data"]["path"] is None and ev[-1]["data"]["reason"] == "deny_rule" and ev[-1]["data"]["rule"] == "'"$RULE_BLOCKED"'"'
egd_curl --interface 127.0.0.6 -s -o /dev/null -H 'Host: nowhere.test' "http://$EGD_PLAIN/plain/p?q=SECRETQ"
wait_ev f1 'ev[-1]["data"]["mode"] == "plain"' 3
check_ev "a transparent HTTP request's denial: its path, without the query" f1 '
ev[-1]["data"]["sandbox"] == "502" and ev[-1]["data"]["path"] == "/plain/p" and "SECRETQ" not in json.dumps(ev)'

# --- several sandboxes, interleaved: in the order made, numbered one after another
made=()
for r in 1 2 3 4; do
    for sb in 5:501 6:502 7:503; do
        deny "127.0.0.${sb%%:*}" "http://il-$r-${sb#*:}.test/" >/dev/null
        made+=("il-$r-${sb#*:}.test:${sb#*:}")
    done
done
wait_ev f1 'len([e for e in ev if e["data"]["host"].startswith("il-")]) == 12' 3
check_ev "12 denials of 501, 502, 503 interleaved: each in the order made, with its sandbox" f1 '
[(e["data"]["host"] + ":" + e["data"]["sandbox"]) for e in ev if e["data"]["host"].startswith("il-")] == sys.argv[3].split()' \
    "${made[*]}"
check_ev "  every event's seq is one more than the one before, and its id is its seq" f1 '
all(b["data"]["seq"] == a["data"]["seq"] + 1 for a, b in zip(ev, ev[1:])) and all(e["id"] == str(e["data"]["seq"]) for e in ev) and ev[0]["data"]["seq"] == 1'

# --- GET /v1/denials: newest first, what the stream gave
api GET /v1/denials >/dev/null
cp "$T/api.body" "$T/all.json"
events f1 >"$T/f1.json"
check "GET /v1/denials: newest first, \"seq\" the newest, each entry exactly what the stream gave" py -c '
import json, sys
a = json.load(open(sys.argv[1]))
f = [e["data"] for e in json.load(open(sys.argv[2])) if e.get("event") == "denial"]
d = a["denials"]
sys.exit(not (a["seq"] == f[-1]["seq"] == d[0]["seq"] and d == f[::-1]))' "$T/all.json" "$T/f1.json"
IL_MID=$(py -c 'import json,sys; print([e["seq"] for e in json.load(open(sys.argv[1]))["denials"] if e["host"] == "il-2-502.test"][0])' "$T/all.json")
LAST=$(newest_seq)
code=$(api GET "/v1/denials?since=$IL_MID")
ok_json "  ?since=$IL_MID: only the later ones ($code)" "$(cat "$T/api.body")" \
    '[x["seq"] for x in l["denials"]] == list(range('"$LAST"', '"$IL_MID"', -1))'
code=$(api GET /v1/sandboxes/501/denials)
check "the per-sandbox endpoint shows the path too, the same entry less seq and sandbox" py -c '
import json, sys
one = json.load(open(sys.argv[1]))["denials"]
a = [dict((k, v) for k, v in x.items() if k not in ("seq", "sandbox")) for x in json.load(open(sys.argv[2]))["denials"] if x["sandbox"] == "501"]
sys.exit(not (one[0] == a[0] and any(x["path"] == "/deep/path/5" for x in one) and list(one[0]) == list(a[0])))' \
    "$T/api.body" "$T/all.json"

# --- Last-Event-ID: the missed ones first
follow f2 -H "Last-Event-ID: $IL_MID" || egm_bail "a follower with Last-Event-ID starts"
FOLLOW_QUERY="&since=$IL_MID" follow f3 || egm_bail "a follower with since= starts"
follow f4 || egm_bail "a follower without either starts"
follow f5 -H "Last-Event-ID: 99999999" || egm_bail "a follower with a Last-Event-ID from before a restart starts"
deny 127.0.0.7 http://after.test/ >/dev/null
for f in f1 f2 f3 f4 f5; do wait_ev $f 'ev and ev[-1]["data"]["host"] == "after.test"' 3; done
AFTER=$((LAST + 1))
check_ev "Last-Event-ID: $IL_MID: first every denial after it (to $LAST), then the new one" f2 \
    '[e["data"]["seq"] for e in ev] == list(range('"$IL_MID"' + 1, '"$AFTER"' + 1)) and lost == []'
check "  the same as the first follower got" py -c '
import json, sys
a = [e for e in json.load(open(sys.argv[1])) if e.get("event") == "denial" and int(e["id"]) > int(sys.argv[3])]
b = [e for e in json.load(open(sys.argv[2])) if e.get("event") == "denial"][:len(a)]
sys.exit(not (len(a) > 0 and [e["data"] for e in a] == [e["data"] for e in b]))' \
    "$T/f1.json" <(events f2) "$IL_MID"
check_ev "since=$IL_MID in the query: the same" f3 '[e["data"]["seq"] for e in ev] == list(range('"$IL_MID"' + 1, '"$AFTER"' + 1))'
check_ev "without either: only the new one" f4 '[e["data"]["host"] for e in ev] == ["after.test"]'
check_ev "a Last-Event-ID above the newest (a previous egressd's): all the ring holds" f5 \
    '[e["data"]["seq"] for e in ev] == list(range(1, '"$AFTER"' + 1))'
for f in f2 f3 f4 f5; do unfollow $f; done

# --- hostile names stay escaped, as the per-sandbox endpoint shows them
out=$(dig -b 127.0.0.5 "@$DNS" -p "$DNS_PORT" +tries=1 +time=3 'x\027[31m"<script>\007.test' A 2>&1)
check "a DNS question for x<ESC>[31m\"<script><BEL>.test is answered NXDOMAIN" grep -q 'status: NXDOMAIN' <<<"$out"
HOSTILE='x\027[31m"<script>\007.test'
wait_ev f1 'ev[-1]["data"]["mode"] == "dns"' 3
api GET /v1/sandboxes/501/denials >/dev/null
cp "$T/api.body" "$T/one.json"
api GET /v1/denials >/dev/null
check_ev "its host in the stream: $HOSTILE, exactly as the per-sandbox endpoint and GET /v1/denials show it" f1 '
ev[-1]["data"]["host"] == sys.argv[3] == json.load(open(sys.argv[4]))["denials"][0]["host"] == json.load(open(sys.argv[5]))["denials"][0]["host"]' \
    "$HOSTILE" "$T/one.json" "$T/api.body"
check "  no control byte in what the follower read, but its line ends" py -c '
import sys
sys.exit(any(b < 0x20 and b != 0x0a or b == 0x7f for b in open(sys.argv[1], "rb").read()))' "$T/f1.out"

# --- at most 32 followers; one that closes is forgotten at once
for i in $(seq 2 "$FOLLOW_MAX"); do follow "c$i" || break; done
code=$(curl -q -s --noproxy '*' -m 5 -N -o "$T/c33.body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    "http://$ADMIN/v1/denials?follow=1")
ok "$([ "$code" = 503 ] && echo 0 || echo 1)" "with $FOLLOW_MAX following, the next gets 503 (got $code)"
ok_json "  saying the limit" "$(cat "$T/c33.body")" '"32" in l["error"] and "/v1/denials" in l["error"]'
unfollow c2
follow c2again
ok $? "one of them closes: the next follower is taken at once"
code=$(curl -q -s --noproxy '*' -m 5 -N -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    "http://$ADMIN/v1/denials?follow=1")
ok "$([ "$code" = 503 ] && echo 0 || echo 1)" "  and the one after it gets 503 again (got $code)"
unfollow c2again
for i in $(seq 3 "$FOLLOW_MAX"); do unfollow "c$i"; done

# --- a follower that does not read, a flood of denials
# flood N PREFIX: N denied DNS questions (names of ~200 bytes) from 501, up
# to 64 unanswered at a time, at most FLOOD_RATE a second, and never more
# than FLOOD_AHEAD beyond what follower f1 has received of this flood (as
# $T/f1.out shows it); prints {"sent", "answered", "seconds", "stalls"}.
# Held to f1 so, f1 can neither fall out of the ring (1024) nor past its
# unsent cap (PX_FEED_OUT_CAP) on a busy machine: "f1 gets every one" is
# then true whatever the scheduler does, and a flood that runs ahead of f1
# by more than a look (PX_DENIALS_NUDGE_EVERY, 256) still needs the nudge
# to go fast.  A follower that does not read is not held to (slow below).
FLOOD_PY='
import json, os, socket, struct, sys, time
n, prefix, server, port, rate = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
follower, ahead = sys.argv[6], int(sys.argv[7])
fd = os.open(follower, os.O_RDONLY)
os.lseek(fd, 0, os.SEEK_END)
mark, got, tail = b"\"host\":\"" + prefix.encode(), 0, b""
def received():
    global got, tail
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return got
        b = tail + b
        got += b.count(mark)
        tail = b[-(len(mark) - 1):]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.5", 0))
s.settimeout(1.0)
def query(i):
    labels = ["%s%d" % (prefix, i), "a" * 60, "b" * 60, "c" * 60, "evil", "test"]
    q = b"".join(bytes([len(l)]) + l.encode() for l in labels) + b"\0"
    return struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0) + q + struct.pack(">HH", 1, 1)
t0, sent, answered, window, stalls, moved = time.monotonic(), 0, 0, 64, 0, time.monotonic()
while answered < n:
    if sent - received() >= ahead:
        if time.monotonic() - moved > 10:
            break # f1 stopped getting them: the check below says so
        stalls += 1
        time.sleep(0.001)
        continue
    moved = time.monotonic()
    while sent < n and sent - answered < window and sent - got < ahead and sent < rate * (time.monotonic() - t0) + window:
        s.sendto(query(sent), (server, port))
        sent += 1
    if sent == answered:
        time.sleep(0.001)
        continue
    try:
        s.recv(4096)
        answered += 1
    except socket.timeout:
        break
print(json.dumps({"sent": sent, "answered": answered, "seconds": round(time.monotonic() - t0, 2), "stalls": stalls}))
'
flood() { py -c "$FLOOD_PY" "$1" "$2" "$DNS" "$DNS_PORT" "$FLOOD_RATE" "$T/f1.out" "$FLOOD_AHEAD"; }
# The slow follower: SO_RCVBUF 4 KiB, reads the stream's head, then stops
# reading until the file $T/go exists; then reads until nothing has come
# for 2 s.  Prints {"denials", "lost": [N...], "first", "last"}.
SLOW_PY='
import json, os, socket, sys, time
admin, token, go, ready = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
host, port = admin.rsplit(":", 1)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect((host, int(port)))
s.sendall(("GET /v1/denials?follow=1 HTTP/1.1\r\nHost: egressd\r\nAuthorization: Bearer %s\r\n\r\n" % token).encode())
s.settimeout(10.0)
data = b""
while b": following denials after" not in data:
    b = s.recv(4096)
    if not b:
        print(json.dumps({"refused": data.decode("utf-8", "replace")[:200]}))
        sys.exit(1)
    data += b
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
s.settimeout(2.0)
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
except socket.timeout:
    pass
text = data.decode("utf-8", "replace")
ids = [int(l[4:]) for l in text.split("\n") if l.startswith("id: ")]
lost = [json.loads(l[6:])["lost"] for i, l in enumerate(text.split("\n")) if l.startswith("data: {\"lost\"")]
print(json.dumps({"denials": len(ids), "lost": lost, "first": ids[0] if ids else None, "last": ids[-1] if ids else None}))
'
# flood_ok TEXT PREFIX FROM: f1 got every denial of the flood PREFIX (as
# many as the access log has lines for, each seq one more than the one
# before from FROM on, no lost event since the flood began).
flood_ok() {
    local want i
    want=$(egd_log_count 'l["decision"] == "deny" and l["host"].startswith("'"$2"'")')
    for ((i = 0; i < 200; i++)); do
        [ "$(grep -c "\"host\":\"$2" "$T/f1.out")" -ge "$want" ] && break
        sleep 0.1
    done
    local mine='[e for e in ev if e["data"]["seq"] > '"$3"']'
    local lost_since='[e["data"] for e in evs if e.get("event") == "lost" and e["t"] >= [x for x in ev if x["data"]["seq"] > '"$3"'][0]["t"]]'
    ev f1 'print("# follower: %d of them, lost since: %s" % (len('"$mine"'), '"$lost_since"')) or True'
    check_ev "$1 ($want in the access log)" f1 '
len([e for e in ev if e["data"]["host"].startswith("'"$2"'")]) == '"$want"' > 0 and '"$lost_since"' == []
and [e["data"]["seq"] for e in '"$mine"'] == list(range('"$3"' + 1, '"$3"' + 1 + len('"$mine"')))'
}

egd_log_mark
from=$(newest_seq)
r=$(flood "$FLOOD" warm)
diag "warm-up flood: $r"
flood_ok "a warm-up flood of $FLOOD denials: the follower gets every one, in order" warm "$from"
rss0=$(egm_rss "$EGD_PID")
rm -f "$T/go" "$T/slow.ready"
py -c "$SLOW_PY" "$ADMIN" "$TOKEN" "$T/go" "$T/slow.ready" >"$T/slow.json" 2>"$T/slow.err" &
SLOW_PID=$!
EGD_PIDS+=("$SLOW_PID")
for ((i = 0; i < 100; i++)); do [ -e "$T/slow.ready" ] && break; sleep 0.05; done
check "a follower that reads its head, then nothing (SO_RCVBUF 4 KiB)" test -e "$T/slow.ready"
slow_from=$(newest_seq)
egd_log_mark
r=$(flood "$FLOOD" slow)
diag "flood beside the slow follower: $r"
flood_ok "$FLOOD denials: the follower beside it gets every one, in order" slow "$slow_from"
rss1=$(egm_rss "$EGD_PID")
slow_to=$(newest_seq)
diag "egressd VmRSS: $rss0 KiB before, $rss1 KiB after ($((rss1 - rss0)) KiB more)"
check "  egressd holds at most $RSS_BOUND_KIB KiB more for the one that does not read ($rss0 -> $rss1 KiB)" \
    test $((rss1 - rss0)) -le "$RSS_BOUND_KIB"
touch "$T/go"
wait "$SLOW_PID"
slow=$(cat "$T/slow.json")
diag "the slow follower, once it read: $slow (denials $((slow_from + 1))..$slow_to were made)"
ok_json "  once it reads, it is told how many it lost (event: lost, N > 0)" "$slow" 'len(l["lost"]) >= 1 and all(n > 0 for n in l["lost"])'
ok_json "  what it got and what it lost add up to every denial made meanwhile" "$slow" \
    'l["denials"] + sum(l["lost"]) == '"$((slow_to - slow_from))"' and l["last"] <= '"$slow_to"

# --- stopping egressd ends the streams
egd_finish
for ((i = 0; i < 50; i++)); do kill -0 "${FPID[f1]}" 2>/dev/null || break; sleep 0.1; done
if kill -0 "${FPID[f1]}" 2>/dev/null; then
    ok 1 "egressd stopped: the follower's stream ends (curl still runs 5 s later)"
    kill "${FPID[f1]}"
else
    wait "${FPID[f1]}"
    rc=$?
    # 18 would be a stream cut without its last chunk
    ok "$([ "$rc" = 0 ] && echo 0 || echo 1)" "egressd stopped: the follower's stream ends with its last chunk (curl exits $rc)"
fi
tap_end
