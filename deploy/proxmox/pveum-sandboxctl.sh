#!/usr/bin/env bash
# pveum-sandboxctl.sh - the Proxmox user, API token, roles and ACLs that
# sandboxctl needs, least privilege, on PVE 8 or 9.  Run as root on a node.
#
#   pveum-sandboxctl.sh [--pve 8|9] [--pool sandboxes] [--template 9000]...
#                       [--storage local-lvm] [--bridge vmbr99]
#                       [--user sandboxctl@pve] [--token ctl]
#                       [--token-file /etc/sandboxctl/pve-token]
#                       [--no-node-auto] [--dry-run]
#
# Idempotent: what exists is left (roles are set to exactly their
# privileges); every command is printed before it runs; --dry-run only
# prints them.  The token's secret is shown once by Proxmox: it goes straight
# into --token-file (mode 0600), the line sandboxctl's pve-token-file wants.
# Privilege separation stays on: the token gets the intersection of its own
# ACLs and its user's, so both get the same ones.
#
# The privileges are those `sandboxctl doctor` checks (ops_doctor.c):
#   /pool/POOL                       role SandboxctlPool
#   /vms/TEMPLATE (each)             role SandboxctlTemplate
#   /storage/STORAGE                 role SandboxctlStorage
#   /sdn/zones/localnetwork/BRIDGE   role SandboxctlBridge
#   /nodes (for `node auto`)         role SandboxctlNodes
set -eu

POOL_PRIVS="VM.Allocate VM.Audit VM.Config.CPU VM.Config.Memory VM.Config.Network VM.Config.Cloudinit VM.Config.Options VM.PowerMgmt VM.Snapshot VM.Snapshot.Rollback Pool.Audit"
AGENT_PRIV_8="VM.Monitor"                  # PVE 8: the guest agent
AGENT_PRIV_9="VM.GuestAgent.Unrestricted"  # PVE 9: VM.Monitor is gone
TEMPLATE_PRIVS="VM.Clone VM.Audit"
STORAGE_PRIVS="Datastore.AllocateSpace"
BRIDGE_PRIVS="SDN.Use"
NODES_PRIVS="Sys.Audit"

pve=
pool=sandboxes
templates=()
storage=local-lvm
bridge=vmbr99
user=sandboxctl@pve
token=ctl
token_file=/etc/sandboxctl/pve-token
node_auto=1
dry=

usage() {
    sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
        --pve) pve=${2:?}; shift ;;
        --pool) pool=${2:?}; shift ;;
        --template) templates+=("${2:?}"); shift ;;
        --storage) storage=${2:?}; shift ;;
        --bridge) bridge=${2:?}; shift ;;
        --user) user=${2:?}; shift ;;
        --token) token=${2:?}; shift ;;
        --token-file) token_file=${2:?}; shift ;;
        --no-node-auto) node_auto= ;;
        --dry-run) dry=1 ;;
        *) usage ;;
    esac
    shift
done
[ ${#templates[@]} -gt 0 ] || templates=(9000)
case $user in *@*) ;; *) echo "pveum-sandboxctl: --user wants USER@REALM, found '$user'" >&2; exit 2 ;; esac

have_pveum=
command -v pveum >/dev/null 2>&1 && have_pveum=1
if [ -z "$have_pveum" ] && [ -z "$dry" ]; then
    echo "pveum-sandboxctl: pveum not found: run this on a Proxmox VE node (or with --dry-run)" >&2
    exit 1
fi
if [ -z "$pve" ]; then
    if command -v pveversion >/dev/null 2>&1; then
        pve=$(pveversion | sed -n 's|^pve-manager/\([0-9]*\)\..*|\1|p')
    fi
    [ -n "$pve" ] || { echo "pveum-sandboxctl: cannot tell the Proxmox VE version: give --pve 8 or 9" >&2; exit 2; }
fi
case $pve in
    8) agent=$AGENT_PRIV_8 ;;
    9) agent=$AGENT_PRIV_9 ;;
    *) echo "pveum-sandboxctl: --pve wants 8 or 9, found '$pve'" >&2; exit 2 ;;
esac

# run CMD...: print it (quoted as a shell reads it), then run it (not with
# --dry-run).
run() {
    local w line=+
    for w in "$@"; do
        case $w in
            '' | *[!A-Za-z0-9_@%+=:,./!-]*) line+=" '${w//\'/\'\\\'\'}'" ;;
            *) line+=" $w" ;;
        esac
    done
    printf '%s\n' "$line"
    [ -n "$dry" ] || "$@"
}
# exists KIND NAME: whether pveum lists it (nothing exists without pveum).
exists() {
    [ -n "$have_pveum" ] || return 1
    case $1 in
        role) pveum role list --output-format json | grep -q "\"roleid\":\"$2\"" ;;
        user) pveum user list --output-format json | grep -q "\"userid\":\"$2\"" ;;
        pool) pveum pool list --output-format json | grep -q "\"poolid\":\"$2\"" ;;
        token) pveum user token list "$user" --output-format json | grep -q "\"tokenid\":\"$2\"" ;;
    esac
}
commas() { echo "$*" | tr ' ' ','; }

echo "# sandboxctl on Proxmox VE $pve: user $user, token $user!$token, pool $pool"
[ -n "$have_pveum" ] || echo "# (pveum not found: showing every command, as on a node where nothing exists yet)"

# role NAME PRIVS...: create it, or set it to exactly these privileges.
role() {
    local name=$1
    shift
    if exists role "$name"; then
        run pveum role modify "$name" --privs "$(commas "$@")"
    else
        run pveum role add "$name" --privs "$(commas "$@")"
    fi
}
# shellcheck disable=SC2086 # the lists are words on purpose
{
    role SandboxctlPool $POOL_PRIVS $agent
    role SandboxctlTemplate $TEMPLATE_PRIVS
    role SandboxctlStorage $STORAGE_PRIVS
    role SandboxctlBridge $BRIDGE_PRIVS
    [ -z "$node_auto" ] || role SandboxctlNodes $NODES_PRIVS
}

if exists pool "$pool"; then echo "# pool $pool exists"; else run pveum pool add "$pool" --comment "sandboxes made by sandboxctl"; fi
if exists user "$user"; then echo "# user $user exists"; else run pveum user add "$user" --comment "sandboxctl (API token only, no password)"; fi

if exists token "$token"; then
    echo "# token $user!$token exists; its secret is shown only when made: if $token_file is lost,"
    echo "# remove the token (pveum user token remove $user $token) and run this again"
else
    printf '+ %s\n' "pveum user token add $user $token --privsep 1 --comment sandboxctl --output-format json > $token_file (as $user!$token=SECRET, mode 0600)"
    if [ -z "$dry" ]; then
        umask 077
        mkdir -p "$(dirname "$token_file")"
        secret=$(pveum user token add "$user" "$token" --privsep 1 --comment sandboxctl --output-format json |
            sed -n 's/.*"value":"\([^"]*\)".*/\1/p')
        [ -n "$secret" ] || { echo "pveum-sandboxctl: pveum gave no token secret" >&2; exit 1; }
        printf '%s!%s=%s\n' "$user" "$token" "$secret" >"$token_file"
        chmod 600 "$token_file"
    fi
fi

# acl PATH ROLE: to the user and to its token (privilege separation).
acl() {
    run pveum acl modify "$1" --roles "$2" --users "$user"
    run pveum acl modify "$1" --roles "$2" --tokens "$user!$token"
}
acl "/pool/$pool" SandboxctlPool
for t in "${templates[@]}"; do
    acl "/vms/$t" SandboxctlTemplate
done
acl "/storage/$storage" SandboxctlStorage
acl "/sdn/zones/localnetwork/$bridge" SandboxctlBridge
[ -z "$node_auto" ] || acl /nodes SandboxctlNodes
echo "# done; check with: sandboxctl doctor"
