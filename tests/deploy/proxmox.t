#!/usr/bin/env bash
# proxmox.t - deploy/proxmox/: the pveum script grants exactly what
# `sandboxctl doctor` checks (both lists parsed: ops_doctor.c and the
# script's printed commands), for PVE 8 and 9; its --dry-run; two real runs
# against a stand-in pveum (idempotent: the second adds nothing; the token's
# secret lands in a 0600 file); the template's firewall file as sandboxctl
# requires it; cluster.fw and the bridge stanza against sandboxctl's example
# config; shellcheck and bash -n on every shell script in deploy/.
# TAP on stdout.  Needs TOP.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

PX=$TOP/deploy/proxmox
PVEUM=$PX/pveum-sandboxctl.sh
DOCTOR=$TOP/sandbox-orchestrator/ops_doctor.c
PRIVS=$TOP/tests/deploy/privs.py
SBXCONF=$TOP/sandbox-orchestrator/sandboxctl.conf.example
T=$(mktemp -d /tmp/deploy-pve.XXXXXX)
trap 'rm -rf "$T"' EXIT

# --- privileges: the script against ops_doctor.c
for v in 8 9; do
    "$PVEUM" --dry-run --pve "$v" --pool sbx --template 9000 --storage local-lvm --bridge vmbr99 \
        >"$T/dry$v" 2>&1
    ok $? "pveum script --dry-run --pve $v" || diag_file "$T/dry$v"
    python3 "$PRIVS" "$DOCTOR" "$T/dry$v" "$v" sbx 9000 local-lvm vmbr99 >"$T/cmp$v" 2>&1
    ok $? "PVE $v: every path gets exactly what sandboxctl doctor checks, user and token alike" ||
        diag_file "$T/cmp$v"
done
check "PVE 8: the guest agent through VM.Monitor" grep -q 'SandboxctlPool --privs .*VM\.Monitor' "$T/dry8"
check "PVE 9: the guest agent through VM.GuestAgent.Unrestricted, no VM.Monitor" \
    sh -c "grep -q 'SandboxctlPool --privs .*VM\.GuestAgent\.Unrestricted' '$T/dry9' && ! grep -q 'VM\.Monitor' '$T/dry9'"
check "no role name starts with PVE (those are Proxmox's own)" \
    sh -c "! grep -qE 'pveum role (add|modify) PVE' '$T/dry8' '$T/dry9'"
python3 "$PRIVS" "$DOCTOR" "$T/dry9" 8 sbx 9000 local-lvm vmbr99 >/dev/null 2>&1
ok $((!$?)) "the comparison fails for PVE 9's grants against PVE 8's checks (it can fail)"
sed 's/"SDN.Use"/"SDN.Use", "SDN.Audit"/' "$DOCTOR" >"$T/doctor-more.c"
python3 "$PRIVS" "$T/doctor-more.c" "$T/dry9" 9 sbx 9000 local-lvm vmbr99 >"$T/cmp" 2>&1
ok $((!$?)) "a privilege doctor would check and the script does not grant is found"
check "... and named" grep -q 'missing \[.SDN.Audit.\]' "$T/cmp"
"$PVEUM" --dry-run --pve 9 --pool sbx --template 9000 --template 9001 --no-node-auto >"$T/dry-t2" 2>&1
python3 "$PRIVS" "$DOCTOR" "$T/dry-t2" 9 sbx 9001 local-lvm vmbr99 no-nodes >"$T/cmp" 2>&1
check "two templates: the second gets VM.Clone and VM.Audit too" \
    grep -q "pveum acl modify /vms/9001 --roles SandboxctlTemplate --tokens sandboxctl@pve!ctl" "$T/dry-t2"
check "--no-node-auto: no grant on /nodes" sh -c "! grep -q '/nodes' '$T/dry-t2'"
check "--dry-run: the token's secret is never asked for, and the token file named" \
    grep -q 'pveum user token add sandboxctl@pve ctl --privsep 1 .* > /etc/sandboxctl/pve-token' "$T/dry9"
check "--dry-run without --pve away from Proxmox: refused, version unknown" \
    sh -c "! '$PVEUM' --dry-run >/dev/null 2>&1"
"$PVEUM" --pve 9 >"$T/nopve" 2>&1
ok $((!$?)) "without pveum and without --dry-run: refused"

# --- two real runs against a stand-in pveum that keeps its state in files
mkdir -p "$T/bin" "$T/state"
cat >"$T/bin/pveum" <<'EOF'
#!/usr/bin/env bash
# stand-in: records each call, keeps roles/users/pools/tokens as files.
s=$PVEUM_STATE
echo "$*" >>"$s/calls"
list() { local k=$1 f first=1; printf '['; for f in "$s"/"$2".*; do [ -e "$f" ] || continue;
    [ $first = 1 ] || printf ','; first=0; printf '{"%s":"%s"}' "$k" "${f##*/$2.}"; done; printf ']\n'; }
case "$1 $2" in
    "role list") list roleid role ;;
    "user list") list userid user ;;
    "pool list") list poolid pool ;;
    "role add" | "role modify") echo "$5" >"$s/role.$3" ;;
    "user add") touch "$s/user.$3" ;;
    "pool add") touch "$s/pool.$3" ;;
    "user token")
        case $3 in
            list) list tokenid token ;;
            add) touch "$s/token.$5"; echo '{"full-tokenid":"'"$4!$5"'","info":{"privsep":"1"},"value":"0a1b2c3d-secret"}' ;;
        esac ;;
    "acl modify") ;;
    *) echo "pveum stand-in: unknown call $*" >&2; exit 1 ;;
esac
EOF
printf '#!/bin/sh\necho "pve-manager/9.0.3/025864202ebb6109 (running kernel: 6.14.8-2-pve)"\n' >"$T/bin/pveversion"
chmod +x "$T/bin/pveum" "$T/bin/pveversion"
export PVEUM_STATE=$T/state
PATH=$T/bin:$PATH "$PVEUM" --token-file "$T/etc/pve-token" >"$T/run1" 2>&1
ok $? "first run (stand-in pveum, version from pveversion)" || diag_file "$T/run1"
check "first run: PVE 9 detected from pveversion" grep -q 'Proxmox VE 9' "$T/run1"
check "first run: made the role, pool, user and token" \
    sh -c "grep -q '^role add SandboxctlPool' '$T/state/calls' && grep -q '^pool add sandboxes' '$T/state/calls' &&
           grep -q '^user add sandboxctl@pve' '$T/state/calls' && grep -q '^user token add sandboxctl@pve ctl --privsep 1' '$T/state/calls'"
check "the token file holds USER@REALM!TOKENID=SECRET" \
    test "$(cat "$T/etc/pve-token" 2>/dev/null)" = 'sandboxctl@pve!ctl=0a1b2c3d-secret'
check "the token file is mode 0600" test "$(stat -c %a "$T/etc/pve-token" 2>/dev/null)" = 600
check "the secret is not printed" sh -c "! grep -q 0a1b2c3d '$T/run1'"
check "the role holds VM.GuestAgent.Unrestricted" grep -q 'VM.GuestAgent.Unrestricted' "$T/state/role.SandboxctlPool"
mv "$T/state/calls" "$T/calls1"
PATH=$T/bin:$PATH "$PVEUM" --token-file "$T/etc/pve-token" >"$T/run2" 2>&1
ok $? "second run" || diag_file "$T/run2"
check "second run: nothing added (roles set again, ACLs again)" \
    sh -c "! grep -qE '^(role add|pool add|user add|user token add)' '$T/state/calls' && grep -q '^role modify SandboxctlPool' '$T/state/calls'"
check "second run: says the token exists and how to replace it" grep -q 'token sandboxctl@pve!ctl exists' "$T/run2"
check "second run: the token file is untouched" test "$(cat "$T/etc/pve-token")" = 'sandboxctl@pve!ctl=0a1b2c3d-secret'
check "both runs grant the same ACLs" \
    test "$(grep -c '^acl modify' "$T/calls1")" = "$(grep -c '^acl modify' "$T/state/calls")"

# --- the template's firewall: sandboxctl refuses any inherited rule or IP set entry
fw=$PX/9000.fw
sections=$(grep -oE '^\[[A-Za-z_ -]+' "$fw" | tr -d '[' | tr '\n' ' ')
check "9000.fw has an [OPTIONS] section only (sections: $sections)" test "$sections" = "OPTIONS "
check "9000.fw: no rule lines (IN/OUT/GROUP)" sh -c "! grep -qE '^\|?(IN|OUT|GROUP) ' '$fw'"
for o in 'enable: 1' 'ipfilter: 1' 'policy_in: DROP' 'policy_out: DROP' 'dhcp: 0' 'ndp: 0' 'radv: 0'; do
    check "9000.fw: $o" grep -qx "$o" "$fw"
done

# --- cluster.fw and the bridge against sandboxctl's example config
proxy=$(sed -n 's/^proxy \([0-9.]*\):\([0-9]*\).*/\1 \2/p' "$SBXCONF")
paddr=${proxy% *} pport=${proxy#* }
gw=$(sed -n 's/^gateway \([0-9.]*\).*/\1/p' "$SBXCONF")
bridge=$(sed -n 's/^bridge \([a-z0-9]*\).*/\1/p' "$SBXCONF")
check "sandboxctl.conf.example names proxy $paddr:$pport, gateway $gw, bridge $bridge" \
    test -n "$paddr" -a -n "$pport" -a -n "$gw" -a -n "$bridge"
cfw=$PX/cluster.fw
check "cluster.fw: enable: 1" grep -qx 'enable: 1' "$cfw"
check "cluster.fw: an IP set for egressd holding the proxy address" \
    sh -c "sed -n '/^\[IPSET egressd\]/,/^\[/p' '$cfw' | grep -qx '$paddr'"
check "cluster.fw: the sandboxes may reach the proxy port on the node" \
    grep -qE "^IN ACCEPT -i $bridge -source \+sandboxes -dest \+egressd -p tcp -dport $pport( |$)" "$cfw"
dns=$(sed -n 's/^dns-addr \([0-9.]*\).*/\1/p' "$SBXCONF")
check "sandboxctl.conf.example: DNS goes to the proxy's address (no dns-addr, or the same: ${dns:-none given})" \
    test "${dns:-$paddr}" = "$paddr"
check "cluster.fw: the sandboxes may reach egressd's DNS server on the node (macro DNS)" \
    grep -qE "^IN DNS\(ACCEPT\) -i $bridge -source \+sandboxes -dest \+egressd( |$)" "$cfw"
check "cluster.fw: before nothing else from the bridge" \
    test "$(grep -nE "^IN DNS\(ACCEPT\) -i $bridge " "$cfw" | cut -d: -f1)" -lt "$(grep -nE "^IN DROP -i $bridge( |$)" "$cfw" | cut -d: -f1)"
check "cluster.fw: then nothing else from the bridge" grep -qE "^IN DROP -i $bridge( |$)" "$cfw"
# the transparent path: egressd-redirect.nft sends tcp/443 and tcp/80 to the
# ports egressd.conf's transparent listeners use, and the node lets them in
rdr=$PX/egressd-redirect.nft
tls=$(sed -n 's/^transparent-tls *[0-9.]*:\([0-9]*\).*/\1/p' "$TOP/deploy/egressd.conf")
plain=$(sed -n 's/^transparent-http *[0-9.]*:\([0-9]*\).*/\1/p' "$TOP/deploy/egressd.conf")
check "egressd-redirect.nft parses (nft -c)" unshare -n nft -c -f "$rdr"
check "egressd-redirect.nft: its ports are egressd.conf's transparent ones ($tls, $plain) and its bridge is $bridge" \
    sh -c "grep -qx 'define TLS_PORT = $tls .*' '$rdr' && grep -qx 'define HTTP_PORT = $plain .*' '$rdr' &&
           grep -qx 'define SANDBOX_BRIDGE = \"$bridge\" .*' '$rdr'"
check "cluster.fw: the sandboxes may reach those ports on the node" \
    grep -qE "^IN ACCEPT -i $bridge -source \+sandboxes -dest \+egressd -p tcp -dport $tls,$plain( |$)" "$cfw"
check "cluster.fw: before nothing else from the bridge (transparent ports)" \
    test "$(grep -nE "^IN ACCEPT -i $bridge .*-dport $tls,$plain" "$cfw" | cut -d: -f1)" -lt "$(grep -nE "^IN DROP -i $bridge( |$)" "$cfw" | cut -d: -f1)"
ifs=$PX/interfaces.vmbr99
check "bridge stanza: $bridge holds the gateway $gw/24" \
    sh -c "grep -qx 'iface $bridge inet static' '$ifs' && grep -qxE '[[:space:]]+address $gw/24' '$ifs'"
check "bridge stanza: no physical port" grep -qxE '[[:space:]]+bridge-ports none' "$ifs"
check "bridge stanza: no gateway, no forwarding from it" \
    sh -c "! grep -qE '^[[:space:]]+gateway' '$ifs' && grep -q 'net.ipv4.conf.$bridge.forwarding=0' '$ifs'"
check "egressd.conf listens on the proxy address sandboxctl hands out" \
    grep -qE "^listen[[:space:]]+$paddr:$pport\b" "$TOP/deploy/egressd.conf"

# --- every shell script in deploy/
scripts=()
while IFS= read -r f; do
    head -n1 "$f" | grep -qE '^#!.*\b(ba)?sh\b' && scripts+=("$f")
done < <(find "$TOP/deploy" -type f ! -name '*.nft' | sort)
check "deploy/ has shell scripts (${#scripts[@]})" test "${#scripts[@]}" -ge 6
# All at once: each shellcheck takes a while.
for i in "${!scripts[@]}"; do
    (shellcheck -x "${scripts[$i]}" >"$T/sc$i" 2>&1; echo $? >"$T/sc$i.rc") &
done
wait
for i in "${!scripts[@]}"; do
    f=${scripts[$i]}
    check "bash -n ${f#"$TOP"/}" bash -n "$f"
    ok "$(cat "$T/sc$i.rc")" "shellcheck ${f#"$TOP"/}" || diag_file "$T/sc$i"
done
tap_end
