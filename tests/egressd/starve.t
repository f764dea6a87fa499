#!/usr/bin/env bash
# starve.t - one sandbox cannot starve the others' DNS.  The sandbox
# "attacker" (source 127.0.0.50) opens 2000 CONNECTs at once, each to a name
# of its own under the allowed wildcard *.flood.test, whose DNS server never
# answers (each lookup would cost 2 s x 2 tries).  While it holds them, the
# sandbox "victim" (127.0.0.60) asks for v.test and w.test, which the same
# server answers at once: both must be through, with the origin's answer
# over real TLS, in under 3 s.  The attacker's lookups are capped
# (max-lookups-per-sandbox, default 32, over every worker): the rest are
# refused at once with 429 and X-Egress-Deny: limit (reason limit in the
# log), and the DNS server sees at most 32 of its names.  When the attacker
# disconnects, its lookups are cancelled: the server sees no retry of them,
# and a fresh lookup of the attacker (ok.flood.test) is taken again.
# Without the cap, every lookup went to evdns, which keeps 64 requests in
# flight per worker and queues the rest first in, first out: the victim
# waited behind thousands of timeouts (504 after 30 s).  TAP on stdout.
# Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

N=2000
CAP=32 # max-lookups-per-sandbox: egressd's default
ATTACKER=127.0.0.50
VICTIM=127.0.0.60
P=http://$EGD_PROXY

egd_allow "*.flood.test:$EGD_HTTPS_PORT" "v.test:$EGD_HTTPS_PORT" "w.test:$EGD_HTTPS_PORT"
# v.test, w.test and ok.flood.test are not in the hosts file: only the DNS
# server knows them.  Every other name under flood.test is never answered.
cat >"$T/zone" <<EOF
v.test A 127.0.0.16
w.test A 127.0.0.16
ok.flood.test A 127.0.0.16
*.flood.test TIMEOUT
EOF
for name in a.test v.test w.test ok.flood.test; do
    egd_cert "$name" || egm_bail "a certificate for $name"
done
egm_server "$T/origin.out" "$EGD_PY" -S -u "$EGD_DIR/origin.py" --log "$T/origin.log" \
    --certs "$T/certs" --https-port "$EGD_HTTPS_PORT" --http-port "$EGD_HTTP_PORT" \
    a.test=127.0.0.16 v.test=127.0.0.16 w.test=127.0.0.16 ok.flood.test=127.0.0.16 ||
    egm_bail "the origin starts on 127.0.0.16"
: >"$T/dns.log"
egm_server "$T/dnsd.out" "$EGD_PY" -S -u "$EGD_DIR/dnsd.py" --listen 127.0.0.53:53 \
    --zone "$T/zone" --log "$T/dns.log" || egm_bail "the DNS server starts"
# Descriptors for the flood (both ends) and egressd: a few per connection.
[ "$(ulimit -n)" -ge 8192 ] || ulimit -n 8192 || egm_bail "ulimit -n 8192"
# The connection limit well above the flood, so that what refuses the
# attacker is its lookups' cap, not its number of connections.
egd_start 'resolver 127.0.0.53' "max-conns-per-sandbox $((N + 100))" ||
    egm_bail "egressd starts and answers /healthz"
check "admin: PUT sandbox attacker (by address $ATTACKER)" egd_put attacker \
    "{\"id\":\"attacker\",\"owner\":\"mallory\",\"addresses\":[\"$ATTACKER\"],\"policy\":\"test\"}"
check "admin: PUT sandbox victim (by address $VICTIM)" egd_put victim \
    "{\"id\":\"victim\",\"owner\":\"alice\",\"addresses\":[\"$VICTIM\"],\"policy\":\"test\"}"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
below() { awk -v v="$1" -v m="$2" 'BEGIN { exit !(v < m) }'; }

# log_count PYEXPR: access-log lines after the mark where PYEXPR over `l`
# holds, once their number has not changed for 0.5 s (5 s at most).
log_count() {
    py - "$T/access.log" "$EGD_LOG_MARK" "$1" <<'EOF'
import json, sys, time
path, mark, expr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
end, seen, since = time.monotonic() + 5, -1, time.monotonic()
while True:
    n = 0
    for raw in open(path, encoding="utf-8", errors="replace").read().split("\n")[:-1][mark:]:
        try:
            l = json.loads(raw)
            n += bool(eval(expr))
        except Exception:
            pass
    if n != seen:
        seen, since = n, time.monotonic()
    if time.monotonic() - since >= 0.5 or time.monotonic() >= end:
        print(n)
        sys.exit(0)
    time.sleep(0.1)
EOF
}

# dns_names FROM: the distinct names under flood.test (ok.flood.test aside)
# the DNS server was asked from line FROM of its log on, and the most times
# one of them was asked for one type: "NAMES MOST".
dns_names() {
    tail -n +"$1" "$T/dns.log" | awk '$1 ~ /\.flood\.test$/ && $1 != "ok.flood.test" {
        names[$1] = 1; if (++asked[$0] > most) most = asked[$0] }
        END { n = 0; for (k in names) n++; print n, most + 0 }'
}

# victim NAME: the victim's https://NAME:4443/hello through CONNECT; prints
# "CONNECT-STATUS HTTP-STATUS SECONDS" and leaves the body in $T/NAME.body.
victim() {
    egd_curl --interface "$VICTIM" -x "$P" -m 8 -o "$T/$1.body" \
        -w '%{http_connect} %{http_code} %{time_total}' "https://$1:$EGD_HTTPS_PORT/hello" \
        2>"$T/$1.err"
}

# --- the flood: 2000 CONNECTs of the attacker to names of their own.
egd_log_mark
t0=$(now)
"$EGD_PY" -S -u "$EGD_DIR/flood.py" --proxy "$EGD_PROXY" --source "$ATTACKER" --count "$N" \
    --domain flood.test --port "$EGD_HTTPS_PORT" --ready "$T/flood.ready" \
    --until "$T/flood.stop" --max-hold 20 >"$T/flood.out" 2>"$T/flood.err" &
flood=$!
EGD_PIDS+=("$flood")
for ((i = 0; i < 300; i++)); do
    [ -s "$T/flood.ready" ] && break
    kill -0 "$flood" 2>/dev/null || break
    sleep 0.05
done
ok_json "the attacker's $N CONNECTs are all sent, and held open" "$(cat "$T/flood.ready" 2>/dev/null)" \
    "l['sent'] == $N"
diag "flood: $(cat "$T/flood.ready" 2>/dev/null) $(head -c 300 "$T/flood.err")"

# --- meanwhile the victim: two fresh lookups, at once.
victim w.test >"$T/w.out" &
wpid=$!
v=$(victim v.test)
wait "$wpid"
w=$(cat "$T/w.out")
diag "victim during the flood: v.test '$v', w.test '$w' (CONNECT, HTTP, seconds);" \
    "bodies '$(head -c 80 "$T/v.test.body" 2>/dev/null)', '$(head -c 80 "$T/w.test.body" 2>/dev/null)'"
read -r v_connect v_http v_secs <<<"$v"
read -r w_connect w_http w_secs <<<"$w"
check "victim: CONNECT v.test gets its 200 while the attacker floods" test "$v_connect" = 200
check "victim: and the origin's answer over TLS (curl, the test CA)" \
    test "$v_http $(cat "$T/v.test.body" 2>/dev/null)" = "200 hello from a.test"
check "victim: v.test in under 3 s (${v_secs:-none} s)" below "${v_secs:-99}" 3
check "victim: w.test as well, at the same time, in under 3 s (${w_secs:-none} s)" \
    test "$w_connect $w_http $(cat "$T/w.test.body" 2>/dev/null)" = "200 200 hello from a.test" -a \
    "$(below "${w_secs:-99}" 3 && echo y)" = y
egd_log_ok "victim: logged allow for sandbox victim" 'l["host"] == "v.test"' \
    'l["sandbox"] == "victim" and l["decision"] == "allow" and l["status"] == 200'

# --- one more attacker CONNECT while its lookups are at the cap: the 429
# head, seen whole.
out=$(py - "$EGD_PROXY" "$ATTACKER" <<'EOF'
import socket, sys
host, _, port = sys.argv[1].rpartition(":")
s = socket.create_connection((host, int(port)), timeout=5, source_address=(sys.argv[2], 0))
s.sendall(b"CONNECT extra1.flood.test:4443 HTTP/1.1\r\nHost: extra1.flood.test:4443\r\n\r\n")
buf = b""
try:
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
except OSError:
    pass
print(buf.split(b"\r\n\r\n")[0].decode("latin-1").replace("\r\n", " | "))
EOF
)
diag "the attacker at its cap: $out"
check "attacker at its cap: a new name is answered 429 with X-Egress-Deny: limit" \
    py -c 'import sys; h = sys.argv[1].lower(); sys.exit(not (h.startswith("http/1.1 429 ") and "x-egress-deny: limit" in h))' "$out"

# --- the attacker leaves.
touch "$T/flood.stop"
wait "$flood"
t_left=$(now)
dns_mark=$(($(wc -l <"$T/dns.log") + 1))
flood_out=$(cat "$T/flood.out")
diag "flood: $flood_out (left after $(elapsed "$t0" "$t_left") s)"
ok_json "attacker: at least $((N - CAP)) of its $N CONNECTs were answered 429 at once" "$flood_out" \
    "l['status'].get('429', 0) >= $N - $CAP"
n429=$(log_count 'l["sandbox"] == "attacker" and l["status"] == 429 and l["decision"] == "deny" and l["reason"] == "limit" and l["host"].endswith(".flood.test")')
check "attacker: ... and the access log has them as deny limit, 429 ($n429 lines)" \
    test "$n429" -ge $((N - CAP))
read -r names most <<<"$(dns_names 1)"
diag "the DNS server saw $names of the attacker's names, each asked at most $most times per type"
check "the DNS server saw at most $CAP of the attacker's names while it flooded ($names)" \
    test "$names" -ge 1 -a "$names" -le "$CAP"

# A fresh attacker lookup, right away: taken again, since its cancelled
# lookups gave their share back (they would still be in flight for 4 s).
fresh=$(egd_curl --interface "$ATTACKER" -x "$P" -m 8 -o "$T/ok.body" \
    -w '%{http_connect} %{http_code}' "https://ok.flood.test:$EGD_HTTPS_PORT/hello" 2>&1)
t_fresh=$(now)
diag "the attacker's fresh lookup after it left: '$fresh', $(elapsed "$t0" "$t_fresh") s after the flood began"
check "attacker, after it left: a fresh name is resolved and connected (200)" \
    test "$fresh $(cat "$T/ok.body" 2>/dev/null)" = "200 200 hello from a.test"
check "... before its old lookups could have timed out by themselves (under 3.8 s after the flood began)" \
    below "$(elapsed "$t0" "$t_fresh")" 3.8

# evdns retries a query after 2 s: none may come for the lookups the
# attacker left behind (they were cancelled, not detached).
sleep 2.5
read -r late _ <<<"$(dns_names "$dns_mark")"
check "after the attacker left, the DNS server saw no more queries for its names ($late names)" \
    test "$late" -eq 0

egd_finish
tap_end
