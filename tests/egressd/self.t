#!/usr/bin/env bash
# self.t - egressd never connects to an address of its own host, even one
# no deny range names: a dummy interface self0 gets 11.22.33.44 (outside
# every default range), a TCP service listens there, and the test preset
# allows it by name (self.test) and as a literal.  CONNECT to either is 403
# private_range (status, X-Egress-Deny, body, access log) and the service
# sees no connection; an address added to self0 later (11.22.33.45) is denied
# after a reload; egressctl explain, which reads the same files, says so too,
# also once self0 is down; an address not on the host (a.test) still goes
# through; and an allow-range naming 11.22.33.44 lifts it, as for any denied
# range.  Without any reload: an address added to self0 while egressd runs
# (11.22.33.46, and the IPv6 2a01:4f8::77) is denied once egressd has heard
# of it (netlink; its log line names the address), a burst of five is denied
# whole, an address removed is no longer denied (egressd then tries to
# connect: no route there, 502), and a flood of them while egressd is
# stopped (messages lost: ENOBUFS) is denied whole once it runs again.  TAP on stdout.  Needs BUILD_DIR, TOP; runs
# itself in a network namespace (root: it adds an interface there).
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
# A dummy interface; where the kernel has no dummy driver, a bridge without
# ports serves as well (an address on it is as much the host's own).
{ ip link add self0 type dummy 2>/dev/null || ip link add self0 type bridge; } &&
    ip addr add 11.22.33.44/32 dev self0 && ip link set self0 up ||
    bail "an interface self0 with 11.22.33.44 in the test namespace"

PORT=7000
SELF_LOG=$T/self.log
R=$T/resp
CTL=$BUILD_DIR/proxy/egressctl

# The service on every address of the namespace: one line "accept LOCAL PEER"
# per connection it takes, so a denial is seen to keep egressd away from it.
cat >"$T/selfsrv.py" <<'EOF'
import socketserver, sys

class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        with open(sys.argv[1], "a") as log:
            log.write("accept %s %s\n" % (self.request.getsockname()[0], self.client_address[0]))
        self.request.sendall(b"self service\r\n")

socketserver.TCPServer.allow_reuse_address = True
srv = socketserver.ThreadingTCPServer(("0.0.0.0", int(sys.argv[2])), Handler)
print("ready", flush=True)
srv.serve_forever()
EOF
"$EGD_PY" -S -u "$T/selfsrv.py" "$SELF_LOG" "$PORT" >"$T/selfsrv.out" 2>&1 &
EGD_PIDS+=($!)
for ((i = 0; i < 100; i++)); do
    grep -q '^ready' "$T/selfsrv.out" 2>/dev/null && break
    sleep 0.05
done
# accepted ADDR: how many connections the service took on ADDR.
accepted() { grep -c "^accept $1 " "$SELF_LOG" 2>/dev/null || true; }
# accepted_reaches ADDR N: true once the service has taken N on ADDR (2 s).
accepted_reaches() {
    local i
    for ((i = 0; i < 40; i++)); do
        [ "$(accepted "$1")" -ge "$2" ] && return 0
        sleep 0.05
    done
    return 1
}
py -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2).recv(64)' \
    11.22.33.44 "$PORT"
check "control: the service on 11.22.33.44:$PORT takes a direct connection" \
    accepted_reaches 11.22.33.44 1

egd_host 11.22.33.44 self.test
egd_host 11.22.33.45 self2.test
egd_host 11.22.33.46 self3.test
egd_allow "self.test:$PORT" "self2.test:$PORT" "ip 11.22.33.44/32:$PORT" "ip 11.22.33.45/32:$PORT"
egd_allow "self3.test:$PORT" "ip 11.22.33.0/24:$PORT" "ip [2a01:4f8::77]:$PORT" "ip 11.24.0.0/16:$PORT"
egd_origin a.test || bail "the origin a.test starts"
egd_start || bail "egressd starts and answers /healthz"

connect() { printf 'send:CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' "$1" "$1"; }

# self_denied HOST ADDR: CONNECT HOST:PORT is 403 private_range with no rule,
# on the wire and in the access log, and the service took no connection on ADDR.
self_denied() {
    local host=$1 addr=$2 before
    before=$(accepted "$addr")
    egd_log_mark
    raw --out "$R" --status "$R.st" "$EGD_PROXY" "$(connect "$host:$PORT")" head >/dev/null 2>&1
    check_resp "CONNECT $host:$PORT ($addr, egressd's own): 403, X-Egress-Deny: private_range" "$R" \
        "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'private_range' and r[0]['body'] == 'egressd: denied (private_range): $host:$PORT\n'"
    egd_log_ok "CONNECT $host:$PORT: logged deny private_range, rule null, 403" \
        "l['host'] == '$host' and l['mode'] == 'connect'" \
        "l['decision'] == 'deny' and l['reason'] == 'private_range' and l['rule'] is None and l['status'] == 403 and l['upstream'] is None"
    check "CONNECT $host:$PORT: the service on $addr took no connection" \
        test "$(accepted "$addr")" = "$before"
}

self_denied self.test 11.22.33.44
self_denied 11.22.33.44 11.22.33.44

# An address on the host (a.test's 127.0.0.16, opened by allow-range) that is
# not one of egressd's own interface addresses still goes through.
egd_log_mark
body=$(egd_curl -x "http://$EGD_PROXY" "https://a.test:$EGD_HTTPS_PORT/hello")
check "control: curl https://a.test through CONNECT gets the origin's body" \
    test "$body" = "hello from a.test"
egd_log_ok "control: logged allow a.test" 'l["host"] == "a.test"' \
    'l["decision"] == "allow" and l["upstream"] == "127.0.0.16:4443"'

# An address added later is denied from the next reload on.
ip addr add 11.22.33.45/32 dev self0 || bail "add 11.22.33.45 to self0"
gen=$(egd_admin POST /v1/reload)
ok $? "reload after 11.22.33.45 was added: 200 ($gen)"
self_denied self2.test 11.22.33.45
self_denied 11.22.33.45 11.22.33.45

# egressctl explain reads the same files the same way (px_policy_load).
out=$("$CTL" explain -c "$T/egressd.conf" "11.22.33.45:$PORT" 2>&1)
rc=$?
ok $((rc != 1)) "egressctl explain 11.22.33.45:$PORT: exit 1 (got $rc)"
check "egressctl explain: address 11.22.33.45 deny private_range" \
    grep -qF "address 11.22.33.45 deny private_range" <<<"$out"
out=$("$CTL" explain -c "$T/egressd.conf" "a.test:$EGD_HTTPS_PORT" --addr 127.0.0.16 2>&1)
ok $? "egressctl explain a.test --addr 127.0.0.16: allowed"

# Without a reload: egressd hears of the host's address changes (netlink)
# and builds its world again, as a reload does.
# heard TEXT: egressd's diagnostics gain a reload line naming TEXT (10 s).
heard() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -qF "policy reloaded (own addresses: " "$T/egressd.err" &&
            grep "policy reloaded (own addresses: " "$T/egressd.err" | grep -qF "$1" && return 0
        sleep 0.05
    done
    return 1
}
# not_self HOST: CONNECT HOST:PORT is not denied as egressd's own: egressd
# tries the address, which nothing answers (no route there): 502, and the
# log line says it went for that address.
not_self() {
    egd_log_mark
    raw --out "$R" "$EGD_PROXY" "$(connect "$1:$PORT")" head >/dev/null 2>&1
    check_resp "CONNECT $1:$PORT ($2, not on the host): 502, not a denial" "$R" \
        "r[0]['status'] == 502 and 'x-egress-deny' not in r[0]['h']"
    egd_log_ok "CONNECT $1:$PORT: logged with status 502, no deny reason" \
        "l['host'] == '$1' and l['mode'] == 'connect'" \
        "l['status'] == 502 and l['reason'] != 'private_range'"
}
reloads() { grep -c "policy reloaded" "$T/egressd.err"; }
# egd_wait_err TEXT: egressd's diagnostics gain a line holding TEXT (10 s).
egd_wait_err() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -qF "$1" "$T/egressd.err" && return 0
        sleep 0.05
    done
    return 1
}
not_self self3.test 11.22.33.46
r0=$(reloads)
ip addr add 11.22.33.46/32 dev self0 || bail "add 11.22.33.46 to self0"
check "egressd heard 11.22.33.46 come (log: '11.22.33.46 added on self0')" \
    heard "11.22.33.46 added on self0"
self_denied self3.test 11.22.33.46
self_denied 11.22.33.46 11.22.33.46
check "... one world built for it ($r0 reload lines before, $(reloads) now)" \
    test "$(reloads)" = $((r0 + 1))
ip addr del 11.22.33.46/32 dev self0 || bail "remove 11.22.33.46 from self0"
check "egressd heard 11.22.33.46 go (log: '11.22.33.46 removed from self0')" \
    heard "11.22.33.46 removed from self0"
not_self self3.test 11.22.33.46
# IPv6 (another netlink group).
ip addr add 2a01:4f8::77/128 dev self0 nodad || bail "add 2a01:4f8::77 to self0"
check "egressd heard 2a01:4f8::77 come" heard "2a01:4f8::77 added on self0"
egd_log_mark
raw --out "$R" "$EGD_PROXY" "$(connect "[2a01:4f8::77]:$PORT")" head >/dev/null 2>&1
check_resp "CONNECT [2a01:4f8::77]:$PORT (egressd's own now): 403 private_range" "$R" \
    "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'private_range'"
# A burst: five addresses in one go, each of them denied afterwards.
for n in 50 51 52 53 54; do echo "addr add 11.22.33.$n/32 dev self0"; done >"$T/burst"
ip -batch "$T/burst" || bail "add 11.22.33.50-54 to self0"
check "egressd heard of all five (the last: 11.22.33.54)" heard "11.22.33.54 added on self0"
check "... and of the first (11.22.33.50)" heard "11.22.33.50 added on self0"
diag "reload lines for the burst of five: $(($(reloads) - r0 - 3))"
bad=0
for n in 50 51 52 53 54; do
    raw --out "$R" "$EGD_PROXY" "$(connect "11.22.33.$n:$PORT")" head >/dev/null 2>&1
    raw parse "$R" "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'private_range'" \
        >/dev/null 2>&1 || { bad=1; diag "11.22.33.$n: not 403 private_range"; }
done
ok $bad "each of 11.22.33.50-54 is denied (403 private_range) without a reload"
# Messages lost: egressd stopped (SIGSTOP) while more address messages come
# than its socket's buffer holds (rmem_default; each message takes far more
# than 200 bytes of it), so the kernel drops some and says ENOBUFS; once
# egressd runs again it lists the addresses anyway and denies them all.
n=$(($(cat /proc/sys/net/core/rmem_default) / 200 + 500))
[ "$n" -gt 60000 ] && n=60000
for ((i = 1; i <= n; i++)); do echo "addr add 11.24.$((i / 250)).$((i % 250 + 1))/32 dev self0"; done >"$T/flood"
last="11.24.$((n / 250)).$((n % 250 + 1))"
kill -STOP "$EGD_PID"
ip -batch "$T/flood" >/dev/null 2>&1
rc=$?
kill -CONT "$EGD_PID"
ok $rc "$n addresses added to self0 while egressd was stopped (the last: $last)"
check "egressd says it lost address messages (ENOBUFS) and lists them anyway" \
    egd_wait_err "address messages lost (ENOBUFS)"
check "... then names them in one reload ('11.24.0.2 added on self0', 'and N more')" \
    heard "11.24.0.2 added on self0, "
bad=0
for a in 11.24.0.2 "$last"; do
    raw --out "$R" "$EGD_PROXY" "$(connect "$a:$PORT")" head >/dev/null 2>&1
    raw parse "$R" "r[0]['status'] == 403 and r[0]['h'].get('x-egress-deny') == 'private_range'" \
        >/dev/null 2>&1 || { bad=1; diag "$a: not 403 private_range"; }
done
ok $bad "the first and the last of them are denied (403 private_range)"
egd_finish

# allow-range lifts an own address as it lifts any denied range, and only it.
egd_start "allow-range 11.22.33.44/32" || bail "egressd starts with allow-range 11.22.33.44/32"
egd_log_mark
before=$(accepted 11.22.33.44)
raw --out "$R" "$EGD_PROXY" "$(connect "self.test:$PORT")" head >/dev/null 2>&1
check_resp "allow-range 11.22.33.44/32: CONNECT self.test:$PORT is 200" "$R" "r[0]['status'] == 200"
egd_log_ok "allow-range 11.22.33.44/32: logged allow, upstream 11.22.33.44:$PORT" \
    'l["host"] == "self.test"' "l['decision'] == 'allow' and l['upstream'] == '11.22.33.44:$PORT'"
check "allow-range 11.22.33.44/32: the service took egressd's connection" \
    accepted_reaches 11.22.33.44 $((before + 1))
self_denied self2.test 11.22.33.45
egd_finish

# An interface that is down still holds its addresses: they stay denied
# (11.22.33.45: the config now opens 11.22.33.44).
ip link set self0 down || bail "set self0 down"
out=$("$CTL" explain -c "$T/egressd.conf" "11.22.33.45:$PORT" 2>&1)
check "self0 down: egressctl explain still denies 11.22.33.45" \
    grep -qF "address 11.22.33.45 deny private_range" <<<"$out"
tap_end
