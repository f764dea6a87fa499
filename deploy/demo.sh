#!/usr/bin/env bash
# deploy/demo.sh - the whole appliance in one command, on this machine, with
# nothing leaving it (root): a simulated Proxmox host whose VMs are network
# namespaces on the proxy-only bridge vmbr99 behind their firewall, egressd on
# the bridge, a fake internet (allowed.test, denied.test, a DNS server) and a
# fake LAN, all in network namespaces this script makes and removes (the
# topology of tests/wall/, drawn in tests/wall/lib.sh).
#
# It creates a sandbox with sandboxctl, runs curl inside it (through the
# guest agent) to an allowed and a denied host and straight past the proxy,
# then shows egressd's access-log lines and metrics, and removes everything.
#
#   deploy/demo.sh            uses build/release (deploy/quickstart.sh makes it)
#   BUILD_DIR=build/x deploy/demo.sh
#
# Needs: the built egressd and sandboxctl, python3, curl, openssl, iproute2,
# nftables, util-linux, and the Proxmox API schema in DATA_DIR/proxmox
# (default: tests/data/proxmox of this tree).
set -u
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$TOP/build/release}
DATA_DIR=${DATA_DIR:-$TOP/tests/data}
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
export TOP BUILD_DIR DATA_DIR
if [ "$(id -u)" -ne 0 ]; then
    echo "demo.sh: run it as root (it makes network namespaces, a bridge and nftables rules)" >&2
    exit 2
fi
for f in "$BUILD_DIR/proxy/egressd" "$BUILD_DIR/sandbox-orchestrator/sandboxctl"; do
    if [ ! -x "$f" ]; then
        echo "demo.sh: $f is not built (deploy/quickstart.sh, or: meson setup build/release && ninja -C build/release)" >&2
        exit 2
    fi
done
. "$TOP/tests/wall/lib.sh"
wall_netns "$@"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() {
    local shown="$*"
    printf '$ %s\n' "${shown/#sbx /sandboxctl }"
    "$@" 2>&1 | sed 's/^/  /'
}

say "Setting up: vmbr99 10.99.0.1/24, egressd on $PROXY, the internet and the LAN in namespaces, the simulated Proxmox host"
if ! wall_up; then
    echo "demo.sh: the topology did not come up" >&2
    exit 1
fi
echo "ok (the whole demo runs in its own network namespaces; nothing leaves this machine)"

say "sandboxctl create: a linked clone on vmbr99, walled in, bound in egressd"
show sbx create --name demo-1 --size small --owner alice --policy wall ||
    exit 1
sbx write demo-1 /etc/demo-ca.pem <"$T/certs/ca.pem" >/dev/null
vmid=$(sbx --json list | "$WALL_PY" -S -c 'import json,sys; print([x["vmid"] for x in json.load(sys.stdin)["sandboxes"] if x["name"] == "demo-1"][0])' 2>/dev/null)
echo "The VM's firewall, as the simulator applies it (nftables, chains of VM ${vmid:-?}):"
pve_sim_ctl GET state | "$WALL_PY" -S -c 'import json,sys; t=json.load(sys.stdin)["firewall_nft"] or ""; v=sys.argv[1]
keep=False
for line in t.splitlines():
    if line.strip().startswith("chain vm%s_" % v): keep=True
    if keep: print("  " + line)
    if keep and line.strip() == "}": keep=False' "${vmid:-0}"

mark=$(egd_log_lines)
say "Inside the sandbox: the policy allows allowed.test"
show sbx exec demo-1 -- curl -sS -m 10 --cacert /etc/demo-ca.pem -x "http://$PROXY" https://allowed.test/hello
say "Inside the sandbox: denied.test is not in the policy (403 with X-Egress-Deny)"
show sbx exec demo-1 -- curl -sS -m 10 -x "http://$PROXY" -D - -o /dev/null http://denied.test/
say "Inside the sandbox: past the proxy, straight to allowed.test's address (the firewall drops it)"
show sbx exec demo-1 -- curl -sS -m 3 --noproxy '*' "http://$ALLOWED_IP/hello"
say "Inside the sandbox: the Proxmox host's own 8006 (dropped too)"
show sbx exec demo-1 -- curl -sS -m 3 --noproxy '*' -k https://10.99.0.1:8006/

say "egressd's access log: one JSON line per connection, with the sandbox and its owner"
sleep 0.5
egd_log_since "$mark" | "$WALL_PY" -S -c 'import json,sys
for raw in sys.stdin:
    l = json.loads(raw)
    print("  " + json.dumps({k: l[k] for k in ("ts", "sandbox", "owner", "src", "mode", "host", "port", "decision", "reason", "rule", "status")}))'

say "egressd's metrics ($METRICS/metrics), the connection counters"
curl -q -sS --noproxy '*' -m 5 "http://$METRICS/metrics" | grep -E '^egressd_sandboxes ' | sed 's/^/  /'
curl -q -sS --noproxy '*' -m 5 "http://$METRICS/metrics" | grep -E '^egressd_connections_total\{' | sed 's/^/  /'

say "sandboxctl destroy: the VM, its NIC and its binding go"
show sbx destroy demo-1
say "Removing the demo's namespaces, bridge and processes"
