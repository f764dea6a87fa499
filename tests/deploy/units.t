#!/usr/bin/env bash
# units.t - deploy/systemd/: systemd-analyze verify on each unit as
# installed (install.sh into a DESTDIR; the units' paths pointed into it, so
# verify checks that the programs they run are really there); the hardening
# directives; systemd-analyze security's exposure under a threshold; the
# units agree with egressd.conf and sandboxctl.conf.example; and the
# logrotate snippet really rotates a running egressd's access log (SIGUSR1).
# TAP on stdout.  Needs BUILD_DIR, TOP; egressd runs in its own netns.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"
if [ "${1-}" != --in-netns ]; then
    exec unshare -n "$0" --in-netns
fi
ip link set lo up

# The exposure egressd.service had when this was written was 1.6 (the
# sandboxctl reaper's 1.6 too); a unit that loses a hardening line goes over.
THRESHOLD=2.0
S=$TOP/deploy/systemd
CONF=$TOP/deploy/egressd.conf
T=$(mktemp -d /tmp/deploy-units.XXXXXX)
egd_pid=
cleanup() {
    [ -z "$egd_pid" ] || kill "$egd_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY

R=$T/root
DESTDIR=$R "$TOP/deploy/install.sh" "$BUILD_DIR" >"$T/install" 2>&1 || bail "install.sh into a DESTDIR"
U=$R/usr/local/lib/systemd/system
mkdir -p "$T/units"
for u in egressd.service sandboxctl-reap.service sandboxctl-reap.timer sandboxctl-console.service; do
    sed "s|/usr/local/|$R/usr/local/|g" "$U/$u" >"$T/units/$u"
done

# verify FILE...: exit status 0 and not a word of warning.
verify() {
    systemd-analyze verify "$@" >"$T/verify" 2>&1 && [ ! -s "$T/verify" ]
}
verify "$T/units/egressd.service"
ok $? "systemd-analyze verify egressd.service (its programs installed)" || diag_file "$T/verify"
verify "$T/units/sandboxctl-reap.service"
ok $? "systemd-analyze verify sandboxctl-reap.service" || diag_file "$T/verify"
verify "$T/units/sandboxctl-reap.timer"
ok $? "systemd-analyze verify sandboxctl-reap.timer (with the service it starts)" || diag_file "$T/verify"
verify "$T/units/sandboxctl-console.service"
ok $? "systemd-analyze verify sandboxctl-console.service" || diag_file "$T/verify"
check "sandboxctl-console.service runs sandboxctl console" \
    grep -qx 'ExecStart=/usr/local/bin/sandboxctl -c /etc/sandboxctl/sandboxctl.conf console' "$S/sandboxctl-console.service"
check "install.sh enables no console (it is off by default)" \
    sh -c "! grep -n 'enable.*console' '$TOP/deploy/install.sh'"
mv "$R/usr/local/sbin/egressd" "$R/usr/local/sbin/egressd.away"
verify "$T/units/egressd.service"
ok $((!$?)) "verify fails when egressd is not installed (the check can fail)"
mv "$R/usr/local/sbin/egressd.away" "$R/usr/local/sbin/egressd"
sed 's/^ProtectSystem=strict/ProtectSystem=strickt/' "$T/units/egressd.service" >"$T/units/bad.service"
verify "$T/units/bad.service"
ok $((!$?)) "verify fails on a misspelt value (warnings count)"

# The hardening the unit must keep.
# shellcheck disable=SC2016 # $MAINPID is systemd's, literally
for d in 'User=egressd' 'Group=egressd' 'NoNewPrivileges=yes' 'ProtectSystem=strict' \
         'ProtectHome=yes' 'PrivateTmp=yes' 'PrivateDevices=yes' 'CapabilityBoundingSet=CAP_NET_BIND_SERVICE' \
         'AmbientCapabilities=CAP_NET_BIND_SERVICE' \
         'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK' 'SystemCallFilter=@system-service' \
         'MemoryDenyWriteExecute=yes' 'ProtectKernelTunables=yes' 'ProtectKernelModules=yes' \
         'ProtectControlGroups=yes' 'RestrictNamespaces=yes' 'LockPersonality=yes' 'RestrictSUIDSGID=yes' \
         'SystemCallArchitectures=native' 'ExecReload=/bin/kill -HUP $MAINPID' \
         'RuntimeDirectory=egressd' 'StateDirectory=egressd' 'LogsDirectory=egressd'; do
    check "egressd.service: $d" grep -qxF "$d" "$S/egressd.service"
done
check "egressd.service: ReadWritePaths holds the state, log and runtime directories and secret-dir only" \
    grep -qx 'ReadWritePaths=/var/lib/egressd /var/log/egressd /run/egressd -/etc/egressd/secrets' "$S/egressd.service"
for u in egressd.service sandboxctl-reap.service sandboxctl-console.service; do
    systemd-analyze security --offline=true "$T/units/$u" >"$T/sec" 2>&1
    level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$T/sec")
    ok "$(awk -v l="${level:-99}" -v t="$THRESHOLD" 'BEGIN { exit !(l <= t) }'; echo $?)" \
        "systemd-analyze security --offline: $u exposure ${level:-unknown} <= $THRESHOLD"
done
sed '/^NoNewPrivileges=/d; /^SystemCallFilter=/d; /^CapabilityBoundingSet=/d; /^Protect/d' \
    "$T/units/egressd.service" >"$T/units/weak.service"
systemd-analyze security --offline=true "$T/units/weak.service" >"$T/sec" 2>&1
level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$T/sec")
ok "$(awk -v l="${level:-0}" -v t="$THRESHOLD" 'BEGIN { exit !(l > t) }'; echo $?)" \
    "a copy without its hardening lines goes over the threshold (${level:-unknown})"

# The units and the configs agree.
setting() { sed -n "s/^$1[[:space:]]\+\([^[:space:]#]*\).*/\1/p" "$2" | head -n1; }
check "egressd.conf has no user line (the unit's User= is egressd from the start)" \
    sh -c "! grep -q '^user[[:space:]]' '$CONF'"
check "admin socket in RuntimeDirectory: /run/egressd/" test "$(setting admin "$CONF")" = unix:/run/egressd/admin.sock
check "sandboxctl.conf.example reaches that socket" \
    grep -qx 'egressd-admin unix:/run/egressd/admin.sock' "$TOP/sandbox-orchestrator/sandboxctl.conf.example"
check "state-dir is the StateDirectory /var/lib/egressd" test "$(setting state-dir "$CONF")" = /var/lib/egressd
check "access-log is in the LogsDirectory /var/log/egressd" \
    test "$(dirname "$(setting access-log "$CONF")")" = /var/log/egressd
check "the logrotate snippet rotates that access log" \
    grep -q "^$(setting access-log "$CONF") {" "$TOP/deploy/logrotate/egressd"
maxc=$(setting max-conns "$CONF")
nofile=$(sed -n 's/^LimitNOFILE=//p' "$S/egressd.service")
check "LimitNOFILE $nofile fits max-conns $maxc (two descriptors each + 256)" \
    test "${nofile:-0}" -ge $((${maxc:-99999999} * 2 + 256))
check "the timer runs the reaper every 5 minutes" grep -qx 'OnUnitActiveSec=5min' "$S/sandboxctl-reap.timer"
check "the reaper runs sandboxctl reap, then sandboxctl sync" \
    test "$(grep '^ExecStart=' "$S/sandboxctl-reap.service")" = "$(printf '%s\n' \
        'ExecStart=/usr/local/bin/sandboxctl -c /etc/sandboxctl/sandboxctl.conf reap' \
        'ExecStart=/usr/local/bin/sandboxctl -c /etc/sandboxctl/sandboxctl.conf sync')"
check "the reaper may open the admin socket (group egressd) and holds no capability" \
    sh -c "grep -qx 'SupplementaryGroups=egressd' '$S/sandboxctl-reap.service' && grep -qx 'CapabilityBoundingSet=' '$S/sandboxctl-reap.service'"

# logrotate's snippet against a running egressd: its rules with this test's
# paths, root instead of egressd, and the signal sent to this egressd.
mkdir -p "$T/log" "$T/policies"
echo "allowed.test" >"$T/policies/locked.allow"
printf '%s\n' 'listen 127.0.0.1:13128' 'metrics 127.0.0.1:19464' 'policy-dir policies' \
    'default-policy locked' "access-log $T/log/access.log" >"$T/egressd.conf"
"$BUILD_DIR/proxy/egressd" -c "$T/egressd.conf" 2>"$T/egressd.err" &
egd_pid=$!
for _ in $(seq 50); do
    curl -fsS --noproxy '*' http://127.0.0.1:19464/healthz >/dev/null 2>&1 && break
    sleep 0.1
done
sed -e "s|^/var/log/egressd/access.log|$T/log/access.log|" -e 's/egressd egressd$/root root/' \
    -e "s|systemctl kill .*|kill -USR1 $egd_pid|" "$TOP/deploy/logrotate/egressd" >"$T/logrotate.conf"
check "the logrotate copy still signals (postrotate kept)" grep -q "kill -USR1 $egd_pid" "$T/logrotate.conf"
curl -s --noproxy '' -x http://127.0.0.1:13128 -o /dev/null http://before.test/
logrotate -f -s "$T/logrotate.state" "$T/logrotate.conf" >"$T/logrotate.out" 2>&1
ok $? "logrotate -f with the snippet's rules" || diag_file "$T/logrotate.out"
sleep 0.3
curl -s --noproxy '' -x http://127.0.0.1:13128 -o /dev/null http://after.test/
sleep 0.2
check "the rotated file holds the line from before" grep -q '"host":"before.test"' "$T/log/access.log.1"
check "egressd reopened: the new access.log holds the line from after, alone" \
    sh -c "grep -q '\"host\":\"after.test\"' '$T/log/access.log' && ! grep -q before.test '$T/log/access.log'"
check "nothing was written to the rotated file after the rotation" sh -c "! grep -q after.test '$T/log/access.log.1'"
tap_end
