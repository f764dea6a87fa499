#!/usr/bin/env bash
# install-deps.sh [--test] - install the Debian 12 packages egressd builds with
# (and, with --test, those its test suite uses).  Installs only what is
# missing, so a second run asks apt nothing.  Needs root when anything is.
set -eu

build_pkgs=(meson ninja-build pkg-config gcc libc6-dev
            libevent-dev libssl-dev libpcre2-dev libmaxminddb-dev libjansson-dev
            libcurl4-openssl-dev libmicrohttpd-dev zlib1g-dev)
# clang + compiler-rt: the ASan/UBSan build and libFuzzer; python3 reads meson's
# test list; clang-format checks the committed style.
# openssl/curl: certificates and real clients in the integration tests;
# Node.js + npm: the MCP SDK client and conformance suite.
test_pkgs=(clang libclang-rt-14-dev clang-format python3 openssl curl ca-certificates
           util-linux iproute2)
# egressd's end-to-end tools.t/metrics.t: real clients through the proxy (git
# with its http-backend, wget, apt with apt-ftparchive and dpkg-deb) and a real
# Prometheus server with promtool.
test_pkgs+=(git wget apt-utils dpkg prometheus nftables)
# deploy/'s checks: systemd-analyze verify on the units, shellcheck on the
# scripts, cloud-init's own schema check on the golden image's user data.
test_pkgs+=(systemd shellcheck cloud-init)
# bench/run.sh: the peers egressd is measured against, side by side.
# squid-openssl is Debian's squid built with OpenSSL (the same program as
# `squid`, which it replaces: the two conflict), for its ssl-bump and
# security_file_certgen: the intercept workloads' peer.
test_pkgs+=(squid-openssl tinyproxy sniproxy haproxy nginx libnginx-mod-stream)
# bench/dns.sh: dnsmasq (the program only, no service) as the policy DNS
# server's peer; dig checks every server's answers there and in
# tests/egressd/dns.t.
test_pkgs+=(dnsmasq-base bind9-dnsutils)
# tests/egressd/chromium.t: the real Chromium, headless, through egressd.
test_pkgs+=(chromium)
# tests/wall/iodine.t: DNS tunnelling with the real tool (iodine client and
# iodined server) from a sandbox, and where there is no wall.
test_pkgs+=(iodine)
# Debian's python requests, a client of credential injection's tests
# (tests/egressd/inject-tools.t).
test_pkgs+=(python3-requests)
# Debian's python yaml (cloud-init has it too): tests that read the golden
# image's user data (tests/deploy/cloudinit.t, tests/egressd/agents-oauth-gemini.t).
test_pkgs+=(python3-yaml)
# tests/egressd/deny.t: tcpdump sees that a denial and its FIN share a segment.
test_pkgs+=(tcpdump)
# tests/deploy/debian.t: the Debian packages built (dpkg-buildpackage with
# debhelper, fakeroot) and checked with lintian.
test_pkgs+=(debhelper dpkg-dev fakeroot lintian)
# tests/sandboxctl/qga.t: the real QEMU guest agent (qemu-ga on a unix
# socket) answers the simulator's agent calls.
test_pkgs+=(qemu-guest-agent)
# tests/wall/pair.t: the real keepalived holds the pair's virtual address.
test_pkgs+=(keepalived)
command -v node >/dev/null 2>&1 || test_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || test_pkgs+=(npm)

pkgs=("${build_pkgs[@]}")
[ "${1-}" = --test ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages: ${missing[*]}; run as root or: apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Packages with a daemon (squid, nginx, haproxy, prometheus, ...) are only
# wanted as programs: keep apt from starting their services on this host.
# (policy-rc.d exit 101 = "action not allowed"; removed again afterwards.)
policy_rc=/usr/sbin/policy-rc.d
own_policy_rc=
if [ ! -e "$policy_rc" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy_rc"
    chmod 755 "$policy_rc"
    own_policy_rc=1
    trap 'rm -f "$policy_rc"' EXIT
fi
apt-get update -q >&2
apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
[ -z "$own_policy_rc" ] || rm -f "$policy_rc"
