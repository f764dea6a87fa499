#!/usr/bin/env bash
# tests/sandboxctl/commands.t - every sandboxctl command against the Proxmox
# simulator (tests/pve-sim), on the PVE 8.4 and the 9.1 schema.
#
# The bindings go to two real egressd (one with its admin API on a unix
# socket, one on TCP with a bearer token); the checks read them back from
# egressd's GET /v1/sandboxes.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# A world whose pve2 has the most free memory (62 GiB against 56 GiB).
world_for() {
    sbx_world "$1" | python3 -c '
import json, sys
w = json.load(sys.stdin)
w["nodes"][1]["mem"] = 2 << 30
print(json.dumps(w))'
}

run_version() {
    local v=$1 out rc a1 addr vmid calls t0 t1 blob
    sbx_start "$v" "$(world_for "$v")" || { ok 1 "PVE $v: simulator and both egressd start"; return; }
    head -c 300 /dev/urandom | base64 >"$T/secrets.in"
    cp "$T/secrets.in" "$T/secrets"
    chmod 600 "$T/secrets"
    printf '%s\n' "secrets-file $T/secrets" "exec-output-max 4k" | sbx_write_config

    # create, with the API calls and the wall time it takes
    pve_sim_ctl DELETE calls >/dev/null
    t0=$(date +%s.%N)
    out=$(sbx --json create --name a1 --size small --owner alice --policy balanced \
        --allow pypi.org --allow '*.pythonhosted.org' 2>"$T/err")
    rc=$?
    t1=$(date +%s.%N)
    calls=$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
    ok $rc "PVE $v: create a1 succeeds ($(head -c 300 "$T/err"))"
    diag "PVE $v: create = $calls API calls, $(python3 -c "print('%.2f' % ($t1 - $t0))") s wall (simulator --task-ms 0, sandboxctl from $(basename "$BUILD_DIR"))"
    vmid=$(json_get "$out" 'j["vmid"]')
    addr=$(json_get "$out" 'j["address"]')
    check "PVE $v: create reports VM, address in the pool and ready_seconds" \
        test "$(json_get "$out" 'j["vmid"] >= 100 and j["address"] == "10.99.0.10" and j["ready_seconds"] > 0')" = True
    ok "$([ "$(json_get "$out" 'j["node"]')" = pve2 ]; echo $?)" "PVE $v: node auto picks pve2, the node with the most free memory"
    a1=$(sim_state "[x for x in s['vms'] if x['vmid'] == $vmid][0]")
    check "PVE $v: the VM is in the pool, running, unlocked" \
        test "$(json_get "$a1" 'j["pool"] == "sandboxes" and j["status"] == "running" and j["lock"] is None')" = True
    check "PVE $v: cores 2, memory 4096, balloon 0" \
        test "$(json_get "$a1" 'c = j["config"]; c["cores"] == "2" and c["memory"] == "4096" and c["balloon"] == "0"')" = True
    check "PVE $v: net0 on the proxy-only bridge with firewall=1" \
        test "$(json_get "$a1" '"bridge=vmbr99" in j["config"]["net0"] and "firewall=1" in j["config"]["net0"]')" = True
    check "PVE $v: ipconfig0 is the static address" \
        test "$(json_get "$a1" 'j["config"]["ipconfig0"]')" = "ip=$addr/24,gw=10.99.0.1"
    check "PVE $v: firewall options enable, ipfilter, no dhcp/ndp/radv, macfilter, DROP both ways" \
        test "$(json_get "$a1" 'o = j["firewall"]["options"]; all(str(o.get(k)) == w for k, w in [("enable","1"),("ipfilter","1"),("dhcp","0"),("ndp","0"),("radv","0"),("macfilter","1"),("policy_in","DROP"),("policy_out","DROP")])')" = True
    check "PVE $v: IP set ipfilter-net0 holds the address" \
        test "$(json_get "$a1" '[e["cidr"] for e in j["firewall"]["ipsets"]["ipfilter-net0"]["entries"]]')" = "[\"$addr\"]"
    check "PVE $v: exactly two rules: out ACCEPT tcp to the proxy 10.99.0.1:3128, and macro DNS to 10.99.0.1 (dns-addr: the proxy's by default)" \
        test "$(json_get "$a1" 'r = sorted(j["firewall"]["rules"], key=lambda x: "macro" in x); len(r) == 2 and all(x["type"] == "out" and x["action"] == "ACCEPT" and x["dest"] == "10.99.0.1" and x["iface"] == "net0" and str(x["enable"]) == "1" for x in r) and str(r[0]["dport"]) == "3128" and r[0]["proto"] == "tcp" and "macro" not in r[0] and r[1]["macro"] == "DNS" and "proto" not in r[1] and "dport" not in r[1]')" = True
    check "PVE $v: description holds the metadata, tags name the address" \
        test "$(json_get "$a1" 'd = j["config"]["description"]; "owner: alice" in d and "policy: balanced" in d and "allow: pypi.org *.pythonhosted.org" in d and "ip-'"$addr"'" in j["config"]["tags"]')" = True
    check "PVE $v: both egressd hold the binding, the same" \
        test "$(egressd_state 1 'b["'"$vmid"'"]')" = "$(egressd_state 2 'b["'"$vmid"'"]')"
    check "PVE $v: egressd's binding is docs/design.md's (id, name, owner, addresses, policy, allow, expires)" \
        test "$(egressd_state 1 'x = b["'"$vmid"'"]; sorted(x) == sorted(["id", "name", "owner", "addresses", "policy", "allow", "expires"]) and x["id"] == "'"$vmid"'" and x["name"] == "a1" and x["owner"] == "alice" and x["addresses"] == ["'"$addr"'"] and x["policy"] == "balanced" and x["allow"] == ["pypi.org", "*.pythonhosted.org"]')" = True
    check "PVE $v: its expires is the sandbox's (create's answer)" \
        test "$(egressd_state 2 'b["'"$vmid"'"]["expires"]')" = "$(json_get "$out" 'j["expires"]')"
    egressd_api 1 GET '/v1/explain?sandbox='"$vmid"'&host=files.pythonhosted.org&port=443'
    check "PVE $v: egressd judges by it: explain under sandbox $vmid uses preset balanced" \
        test "$(json_get "$EGD_BODY" 'j["sandbox"] == "'"$vmid"'" and j["preset"] == "balanced" and j["name"]["decision"] == "allow"')" = True

    # the proxy environment and the secrets file inside the guest
    out=$(sbx exec a1 -- sh -c 'cat /etc/profile.d/sandbox-proxy.sh /etc/apt/apt.conf.d/95sandbox-proxy /etc/npmrc /etc/pip.conf /etc/gitconfig')
    check "PVE $v: profile.d, apt, npm, pip and git point at the proxy" \
        test "$(grep -c '10.99.0.1:3128' <<<"$out")" -ge 6
    out=$(sbx exec a1 -- cat /etc/resolv.conf)
    check "PVE $v: resolv.conf names the DNS server and nothing else: nameserver 10.99.0.1, options edns0" \
        test "$(grep -v '^#' <<<"$out" | tr '\n' ' ')" = "nameserver 10.99.0.1 options edns0 "
    out=$(sbx exec a1 -- stat -c '%a %u %g' /root/.sandbox-secrets)
    check "PVE $v: secrets file is mode 600, owned by root ($out)" test "$out" = "600 0 0"
    sbx read a1 /root/.sandbox-secrets >"$T/secrets.out"
    check "PVE $v: secrets file content is the configured one" cmp "$T/secrets.in" "$T/secrets.out"

    # two more: node auto follows the free memory
    out=$(sbx --json create --name b2 --size medium --owner bob --policy locked --lifetime 2h)
    ok $? "PVE $v: create b2 (medium)"
    check "PVE $v: b2 goes to pve2 (still the most free), another address" \
        test "$(json_get "$out" 'j["node"] == "pve2" and j["address"] == "10.99.0.11"')" = True
    out=$(sbx --json create --name c3 --size small --owner carol --policy open)
    ok $? "PVE $v: create c3"
    check "PVE $v: c3 goes to pve1 (now the most free)" test "$(json_get "$out" 'j["node"]')" = pve1
    out=$(sbx create --name a1 --size small --owner x --policy p 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q "exists already" <<<"$out"; echo $?)" "PVE $v: a second a1 is refused ($out)"

    # list
    out=$(sbx --json list)
    check "PVE $v: list --json shows the three with owner, address, expiry, state" \
        test "$(json_get "$out" '[(x["name"], x["owner"], x["address"], x["status"], len(x["expires"])) for x in j["sandboxes"]]')" = \
        '[["a1", "alice", "10.99.0.10", "running", 20], ["b2", "bob", "10.99.0.11", "running", 20], ["c3", "carol", "10.99.0.12", "running", 20]]'
    check "PVE $v: list --json gives each one's size by its line and its figures" \
        test "$(json_get "$(sbx --json list)" '[(x["size"], x["cores"], x["memory_mib"]) for x in j["sandboxes"]]')" = \
        '[["small", 2, 4096], ["medium", 4, 8192], ["small", 2, 4096]]'
    out=$(sbx list)
    check "PVE $v: list prints a table" test "$(grep -c ' running ' <<<"$out")" = 3
    check "PVE $v:   with each one's size" test "$(awk '$2 == "b2" {print $4}' <<<"$out")" = medium

    # exec
    sbx exec a1 -- sh -c 'echo out; echo err >&2; exit 3' >"$T/o" 2>"$T/e"
    rc=$?
    ok "$([ $rc -eq 1 ] && [ "$(cat "$T/o")" = out ] && grep -q '^err$' "$T/e" && grep -q 'status 3' "$T/e"; echo $?)" \
        "PVE $v: exec copies stdout and stderr; a failing command exits 1 and says its status"
    out=$(sbx --json exec a1 -- sh -c 'exit 3')
    rc=$?
    check "PVE $v: exec --json reports exitcode 3 (and exits 1)" test "$(json_get "$out" 'j["exitcode"]')$rc" = 31
    out=$(printf 'hello\n' | sbx exec a1 --stdin -- cat)
    check "PVE $v: exec --stdin feeds the command's stdin" test "$out" = hello
    out=$(printf '\000\377\303' | sbx exec a1 --stdin -- od -An -tx1)
    check "PVE $v: stdin bytes arrive unchanged (NUL, 0xff, a lone 0xc3: '$out')" test "$(echo $out)" = "00 ff c3"
    out=$(sbx --json exec a1 --timeout 1 -- sleep 30)
    check "PVE $v: exec --timeout 1 stops the command inside the guest (timed_out)" \
        test "$(json_get "$out" 'j["timed_out"]')" = True
    out=$(sbx --json exec a1 -- sh -c 'head -c 10000 /dev/zero | tr "\0" x')
    check "PVE $v: output over exec-output-max (4k) is cut and marked" \
        test "$(json_get "$out" 'len(j["stdout"]) == 4096 and j["stdout_truncated"] and not j["stderr_truncated"]')" = True

    # write and read: binary, and large enough to be written in parts
    head -c 150000 /dev/urandom >"$T/blob"
    python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)' >"$T/bytes"
    check "PVE $v: write a 150 kB binary file (in parts)" sh -c "\"$SBX_BIN\" -c \"$CONF\" write a1 /tmp/blob <\"$T/blob\""
    sbx read a1 /tmp/blob >"$T/blob.back"
    check "PVE $v: read gives the same bytes back" cmp "$T/blob" "$T/blob.back"
    check "PVE $v: the guest sees the file written (sha256sum through exec)" \
        test "$(sbx exec a1 -- sha256sum /tmp/blob | cut -d' ' -f1)" = "$(sha256sum "$T/blob" | cut -d' ' -f1)"
    sbx write a1 /tmp/bytes <"$T/bytes" >/dev/null && sbx read a1 /tmp/bytes >"$T/bytes.back"
    check "PVE $v: all 256 byte values survive write and read" cmp "$T/bytes" "$T/bytes.back"
    check "PVE $v: parts are gone after the join" \
        test "$(sbx exec a1 -- sh -c 'ls /tmp | grep -c sbx-part; true')" = 0
    out=$(sbx read a1 /nonexistent 2>&1)
    ok "$([ $? -eq 1 ] && [ -n "$out" ]; echo $?)" "PVE $v: reading a missing file fails with a message ($out)"

    # extend
    local before after
    before=$(sbx --json list | python3 -c 'import json,sys; print([x["expires"] for x in json.load(sys.stdin)["sandboxes"] if x["name"] == "a1"][0])')
    out=$(sbx --json extend a1 2h)
    ok $? "PVE $v: extend a1 2h"
    after=$(json_get "$out" 'j["expires"]')
    check "PVE $v: expires moved by 2 h ($before -> $after)" \
        test "$(python3 -c "import datetime as d; f=lambda s: d.datetime.strptime(s, '%Y-%m-%dT%H:%M:%SZ'); print(int((f('$after') - f('$before')).total_seconds()))")" = 7200
    check "PVE $v: both egressd's bindings carry the new expiry" \
        test "$(egressd_state 1 'b["'"$vmid"'"]["expires"]') $(egressd_state 2 'b["'"$vmid"'"]["expires"]')" = "$after $after"
    # Two extends at once: the digest makes the later writer re-read, so neither is lost.
    sbx extend a1 1h >/dev/null &
    rc=$!
    sbx extend a1 1h >/dev/null
    wait $rc
    out=$(sbx --json list | python3 -c 'import json,sys; print([x["expires"] for x in json.load(sys.stdin)["sandboxes"] if x["name"] == "a1"][0])')
    check "PVE $v: two extends of 1 h at once add 2 h ($after -> $out)" \
        test "$(python3 -c "import datetime as d; f=lambda s: d.datetime.strptime(s, '%Y-%m-%dT%H:%M:%SZ'); print(int((f('$out') - f('$after')).total_seconds()))")" = 7200
    out=$(sbx extend a1 20h 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'lifetime-max 24h' <<<"$out"; echo $?)" "PVE $v: extend past 24 h from now is refused ($out)"

    # snapshots
    check "PVE $v: snapshot a1 base" sbx snapshot a1 base
    check "PVE $v: snapshot a1 s1" sbx snapshot a1 s1
    out=$(sbx snapshot a1 x 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "label: 'x' is not" <<<"$out"; echo $?)" "PVE $v: a label Proxmox would refuse is refused first ($out)"
    out=$(sbx --json snapshots a1)
    check "PVE $v: snapshots lists base and s1" test "$(json_get "$out" '[x["label"] for x in j["snapshots"]]')" = '["base", "s1"]'
    check "PVE $v: snapshots are disk-only (no vmstate)" \
        test "$(sim_state "[x for x in s['vms'] if x['vmid'] == $vmid][0]['snapshots']['s1']['config'].get('vmstate')")" = None
    out=$(sbx --json extend a1 1h)
    after=$(json_get "$out" 'j["expires"]')
    sbx exec a1 -- touch /root/after-s1 >/dev/null
    check "PVE $v: rollback a1 s1" sbx rollback a1 s1
    check "PVE $v: after rollback the description is rewritten (expiry of before the rollback)" \
        test "$(sbx --json list | python3 -c 'import json,sys; print([x["expires"] for x in json.load(sys.stdin)["sandboxes"] if x["name"] == "a1"][0])')" = "$after"
    check "PVE $v: after rollback a file made after s1 is gone" \
        test "$(sbx exec a1 -- sh -c 'test -e /root/after-s1 && echo yes || echo no')" = no
    sbx snapshot a1 s2 >/dev/null && sbx snapshot a1 s3 >/dev/null
    out=$(sbx --json snapshot a1 s4)
    check "PVE $v: a 5th snapshot deletes the oldest but base (s1)" test "$(json_get "$out" 'j.get("deleted")')" = s1
    out=$(sbx --json snapshots a1)
    check "PVE $v: at most 4 remain, base kept" test "$(json_get "$out" '[x["label"] for x in j["snapshots"]]')" = '["base", "s2", "s3", "s4"]'

    # destroy
    local c3
    c3=$(sbx --json list | python3 -c 'import json,sys; print([x["vmid"] for x in json.load(sys.stdin)["sandboxes"] if x["name"] == "c3"][0])')
    out=$(sbx --json destroy c3)
    ok $? "PVE $v: destroy c3"
    check "PVE $v: c3 is gone from Proxmox" test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] == $c3]")" = "[]"
    check "PVE $v: c3's binding is gone from both egressd" \
        test "$(egressd_state 1 '"'"$c3"'" in b')$(egressd_state 2 '"'"$c3"'" in b')" = FalseFalse
    out=$(sbx destroy c3 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "no sandbox called 'c3'" <<<"$out"; echo $?)" "PVE $v: destroying it again fails clearly ($out)"

    out=$(sbx destroy 9000 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "no sandbox called '9000' in pool 'sandboxes'" <<<"$out"; echo $?)" \
        "PVE $v: a VM outside the pool (the template) cannot be destroyed by VMID"
    out=$(sbx exec agent-template -- true 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "no sandbox called 'agent-template'" <<<"$out"; echo $?)" \
        "PVE $v: nor reached by name"
    check "PVE $v: the template is untouched" test "$(sim_state "[x['vmid'] for x in s['vms'] if x['vmid'] in (9000, 9001)]")" = "[9000, 9001]"

    # sync repairs what egressd holds: a stale binding on one, a missing one on the other
    egressd_api 2 PUT /v1/sandboxes/999 '{"id":"999","name":"stale","owner":"x","addresses":["10.99.0.99"],"policy":"open","allow":[],"expires":"2030-01-01T00:00:00Z"}'
    ok $? "PVE $v: egressd 2 takes a stale binding 999 by hand ($EGD_CODE)"
    blob=$(egressd_state 1 'b["'"$vmid"'"]')
    egressd_api 1 DELETE "/v1/sandboxes/$vmid"
    ok $? "PVE $v: egressd 1 drops a1's binding by hand ($EGD_CODE)"
    out=$(sbx --json sync)
    ok $? "PVE $v: sync"
    check "PVE $v: sync reports 2 bindings sent to both egressd" \
        test "$(json_get "$out" 'j["bindings"] == 2 and len(j["egressd"]) == 2')" = True
    check "PVE $v: after sync both egressd hold exactly a1 and b2" \
        test "$(egressd_state 1 'sorted(x["name"] for x in b.values())')$(egressd_state 2 'sorted(x["name"] for x in b.values())')" = '["a1", "b2"]["a1", "b2"]'
    check "PVE $v: a1's binding is back on egressd 1 as it was before (the expiry of the last extend)" \
        test "$(egressd_state 1 'b["'"$vmid"'"]')" = "$blob"

    # reap with nothing expired; doctor
    out=$(sbx --json reap)
    check "PVE $v: reap with nothing expired reaps nothing and keeps 2" \
        test "$(json_get "$out" '(len(j["reaped"]), j["kept"])')" = "(0, 2)"
    out=$(sbx doctor)
    ok $? "PVE $v: doctor passes on a well-set-up world"
    check "PVE $v: doctor checked version, privileges, template, bridge" \
        test "$(grep -cE '^ok +(version|privileges|template|bridge) ' <<<"$out")" -ge 6

    # node NAME instead of auto
    echo "node pve1" | sbx_write_config
    sed -i '/^node auto$/d' "$CONF"
    out=$(sbx --json create --name n5 --size small --owner x --policy p)
    check "PVE $v: with 'node pve1' the sandbox goes to pve1" test "$(json_get "$out" 'j["node"]')" = pve1
    sbx destroy n5 >/dev/null

    # usage and config errors exit 2; a failed operation exits 1
    sbx frobnicate >/dev/null 2>&1
    ok "$([ $? -eq 2 ]; echo $?)" "PVE $v: an unknown command exits 2"
    sbx create --name x --size small 2>/dev/null
    ok "$([ $? -eq 2 ]; echo $?)" "PVE $v: create without --owner exits 2"
    printf 'pool sandboxes\nmax-cores many\n' >"$T/bad.conf"
    out=$("$SBX_BIN" -c "$T/bad.conf" list 2>&1)
    ok "$([ $? -eq 2 ] && grep -q "bad.conf:2: max-cores: expected an integer" <<<"$out"; echo $?)" \
        "PVE $v: a config error exits 2 naming file:line ($out)"
    out=$(sbx create --name d4 --size huge --owner x --policy p 2>&1)
    ok "$([ $? -eq 1 ] && grep -q "no size 'huge'" <<<"$out"; echo $?)" "PVE $v: an unknown size fails with exit 1 ($out)"
    check "PVE $v: no reservation is left behind" test "$(cat "$T/state/reservations.json" | tr -d ' \n')" = "[]"
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
