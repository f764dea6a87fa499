#!/usr/bin/env bash
# isolate-ports.sh [--check] [BRIDGE] - the wall between sandboxes on the same
# bridge (default vmbr99): every port of the bridge isolated, so that a port
# forwards only to the host, never to another sandbox's port.
#   isolate-ports.sh vmbr99           set `isolated on` on every port now there
#   isolate-ports.sh --check vmbr99   exit 1 and name each port that is not
# Run it (or set the flag in the hypervisor's own port set-up) whenever a
# sandbox's port joins the bridge; egressd-wall.nft covers the rest.
set -eu

check=
if [ "${1-}" = --check ]; then
    check=1
    shift
fi
bridge=${1:-vmbr99}
[ $# -le 1 ] || { echo "usage: isolate-ports.sh [--check] [BRIDGE]" >&2; exit 2; }
ip link show dev "$bridge" >/dev/null 2>&1 || { echo "isolate-ports: no bridge $bridge" >&2; exit 1; }

# Each port as "NAME on|off".
ports() {
    bridge -d link show master "$bridge" |
        awk '/^[0-9]+: / { name = $2; sub(/@.*/, "", name); sub(/:$/, "", name) }
             / isolated (on|off)/ { for (i = 1; i < NF; i++) if ($i == "isolated") print name, $(i + 1) }'
}

open=0
while read -r port state; do
    [ "$state" = on ] && continue
    if [ -n "$check" ]; then
        echo "isolate-ports: port $port of $bridge is not isolated: bridge link set dev $port isolated on" >&2
        open=1
    else
        echo "+ bridge link set dev $port isolated on"
        bridge link set dev "$port" isolated on
    fi
done < <(ports)
[ "$open" -eq 0 ]
