#!/usr/bin/env bash
# quickstart.sh - from a fresh Debian 12 machine (as root) to a running egressd.
#
# Installs the build dependencies with apt-get, builds a release build in
# build/release, and starts egressd in the background with the `balanced`
# preset:
#   proxy    http://127.0.0.1:3128   (HTTP_PROXY / HTTPS_PROXY)
#   metrics  http://127.0.0.1:9464/metrics
#   admin    unix:build/quickstart/admin.sock   (egressctl -s ...)
# Its config, state and access log live in build/quickstart/.  Names are
# resolved by the DNS server in /etc/resolv.conf (egressd asks it directly;
# set RESOLVER=ADDR to choose another).  Stop it with
#   kill "$(cat build/quickstart/egressd.pid)"
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
qs=$top/build/quickstart

deploy/install-deps.sh
if [ ! -f build/release/build.ninja ]; then
    meson setup build/release --buildtype=release
fi
ninja -C build/release

if [ -f "$qs/egressd.pid" ] && kill -0 "$(cat "$qs/egressd.pid")" 2>/dev/null; then
    echo "egressd is already running (pid $(cat "$qs/egressd.pid")); stop it first."
    exit 1
fi
resolver=${RESOLVER:-$(awk '$1 == "nameserver" { print $2; exit }' /etc/resolv.conf 2>/dev/null || true)}
mkdir -p "$qs/state"
{
    echo "# written by deploy/quickstart.sh"
    echo "listen          127.0.0.1:3128"
    echo "metrics         127.0.0.1:9464"
    echo "admin           unix:$qs/admin.sock"
    echo "policy-dir      $top/deploy/policies"
    echo "default-policy  balanced"
    echo "state-dir       $qs/state"
    echo "access-log      $qs/access.log"
    if [ -n "$resolver" ]; then
        case $resolver in *:*) echo "resolver        [$resolver]:53" ;; *) echo "resolver        $resolver" ;; esac
    fi
} >"$qs/egressd.conf"

build/release/proxy/egressd -t -c "$qs/egressd.conf"
nohup build/release/proxy/egressd -c "$qs/egressd.conf" </dev/null >"$qs/egressd.err" 2>&1 &
echo $! >"$qs/egressd.pid"
for _ in $(seq 50); do
    curl -fsS --noproxy '*' http://127.0.0.1:9464/healthz >/dev/null 2>&1 && break
    sleep 0.1
done
if ! curl -fsS --noproxy '*' http://127.0.0.1:9464/healthz >/dev/null 2>&1; then
    echo "egressd did not start:" >&2
    cat "$qs/egressd.err" >&2
    exit 1
fi

cat <<MSG

egressd is running (pid $(cat "$qs/egressd.pid")), preset 'balanced', resolver ${resolver:-none}:
  proxy     http://127.0.0.1:3128
  metrics   http://127.0.0.1:9464/metrics
  log       $qs/access.log
Try:
  curl -x http://127.0.0.1:3128 https://pypi.org/simple/ -o /dev/null -w '%{http_code}\n'   # allowed
  curl -x http://127.0.0.1:3128 https://example.com/ -D -                                  # 403, X-Egress-Deny
  build/release/proxy/egressctl -s $qs/admin.sock status
Stop:  kill \$(cat $qs/egressd.pid)
Tests: tests/run.sh
MSG
