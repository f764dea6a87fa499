#!/usr/bin/env bash
# tests/sandboxctl/template.t - a clone inherits its template's firewall:
# create refuses a template whose rules or IP sets would open the wall (an
# ACCEPT rule, a DNS rule to anywhere beside sandboxctl's own to dns-addr,
# an address), and leaves nothing behind; on PVE 8.4 and 9.1.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# A template whose firewall would leak into its clones: an ACCEPT rule, a
# DNS rule like sandboxctl's own but to any address, and an IP set with
# another address.
leaky_template() {
    local v=$1 what=$2 world out
    world=$(sbx_world "$v" | WHAT=$what python3 -c '
import json, os, sys
w = json.load(sys.stdin)
fw = {"rule": {"rules": [{"type": "out", "action": "ACCEPT", "dest": "0.0.0.0/0", "enable": 1, "pos": 0}]},
      "DNS rule": {"rules": [{"type": "out", "action": "ACCEPT", "macro": "DNS", "iface": "net0", "enable": 1, "pos": 0}]},
     }.get(os.environ["WHAT"], {"ipsets": {"ipfilter-net0": ["10.99.0.200"]}})
for t in w["templates"]:
    t["firewall"] = fw
print(json.dumps(w))')
    sbx_start "$v" "$world" || { ok 1 "PVE $v: simulator starts"; return; }
    out=$(sbx create --name leak --size small --owner a --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "create: firewall: .*inherited from template 900[01]" <<<"$out"; echo $?)" \
        "PVE $v: a template with an inherited $what fails the create (${out:0:200})"
    nothing_left "$v" "leaky template ($what)"
    out=$(sbx doctor)
    ok "$([ $? -eq 1 ] && grep -q "FAIL template   template 9000: .*(clones inherit them" <<<"$out"; echo $?)" \
        "PVE $v: doctor names the template whose firewall is not empty"
    sbx_stop_all
}

for v in 8 9; do
    leaky_template $v rule
    leaky_template $v "DNS rule"
    leaky_template $v "IP set entry"
done
tap_end
