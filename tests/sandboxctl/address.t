#!/usr/bin/env bash
# tests/sandboxctl/address.t - create never hands out an address a pool VM
# already holds: read from its ip- tag, its metadata, or (metadata damaged,
# tag gone) its cloud-init ipconfig0; on PVE 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# The default world plus pool VMs holding the first two pool addresses: one
# with a damaged description and no tag, one with only an ipconfig0.
world_for() {
    sbx_world "$1" | python3 -c '
import json, sys
w = json.load(sys.stdin)
w["vms"] = [
    {"vmid": 301, "node": "pve1", "name": "damaged", "pool": "sandboxes",
     "description": "sandboxctl-sandbox v1\nowner: eve\nowner: eve again",
     "config": {"ipconfig0": "ip=10.99.0.10/24,gw=10.99.0.1"}},
    {"vmid": 302, "node": "pve2", "name": "handmade", "pool": "sandboxes",
     "description": "an admin VM", "config": {"ipconfig0": "gw=10.99.0.1,ip=10.99.0.11/24"}},
]
print(json.dumps(w))'
}

run_version() {
    local v=$1 out addr
    sbx_start "$v" "$(world_for "$v")" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    out=$(sbx --json create --name fresh-1 --size small --lifetime 1h --owner alice --policy locked 2>&1)
    check "PVE $v: create succeeds beside VMs whose metadata is damaged or absent" \
        test "$(json_get "$out" 'j["name"]' 2>/dev/null)" = fresh-1
    addr=$(json_get "$out" 'j["address"]' 2>/dev/null)
    check "PVE $v: the new sandbox does not get 10.99.0.10 (ipconfig0 of the damaged VM) or 10.99.0.11 (got $addr)" \
        test "$addr" = 10.99.0.12
    sbx destroy fresh-1 >/dev/null 2>&1
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
