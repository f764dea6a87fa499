#!/usr/bin/env bash
# build-template.sh - build the golden sandbox template (VM 9000) on a Proxmox
# VE node from the Debian 12 cloud image, as root on that node.
#
#   build-template.sh [--vmid 9000] [--storage local-lvm] [--snippets local]
#                     [--bridge vmbr99] [--build-ip 10.99.0.9/24]
#                     [--gateway 10.99.0.1] [--proxy 10.99.0.1:3128]
#                     [--dns ADDR] [--disk-size 20G] [--image FILE]
#                     [--admin-socket /run/egressd/admin.sock]
#                     [--build-policy balanced] [--dry-run]
#   (--dns: the guest's DNS server, egressd's `dns`; default the proxy's address)
#
# Before: vmbr99 exists (proxmox/interfaces.vmbr99), egressd runs on the
# node with its presets (the shipped egressd.conf and policies) and its admin
# socket, and the cluster firewall lets the sandbox network reach egressd
# (proxmox/cluster.fw).  The template boots once, on vmbr99 behind the proxy
# like any sandbox.  For that boot its build address has a binding of its
# own in egressd (template-VMID: the --build-policy preset, which must let
# Debian's archive and registry.npmjs.org through, as balanced does, and
# nodejs.org; two hours at most, removed at the end), and cloud-init installs
# the guest agent, the agents' tools, Node.js and the coding agents
# (user-data.yaml).  Then the agents are run once as the user `agent`, and
# the VM is cleaned, given its firewall file (proxmox/9000.fw: options only,
# no rules, no IP sets, as sandboxctl requires), protected and made a
# template.
# Every command is printed before it runs; --dry-run only prints them.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
vmid=9000
storage=local-lvm
snippets=local
bridge=vmbr99
build_ip=10.99.0.9/24
gateway=10.99.0.1
proxy=10.99.0.1:3128
dns=
disk_size=20G
image=
admin_socket=/run/egressd/admin.sock
build_policy=balanced
dry=
image_url=https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2
sums_url=https://cloud.debian.org/images/cloud/bookworm/latest/SHA512SUMS

usage() {
    sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
        --vmid) vmid=${2:?}; shift ;;
        --storage) storage=${2:?}; shift ;;
        --snippets) snippets=${2:?}; shift ;;
        --bridge) bridge=${2:?}; shift ;;
        --build-ip) build_ip=${2:?}; shift ;;
        --gateway) gateway=${2:?}; shift ;;
        --proxy) proxy=${2:?}; shift ;;
        --dns) dns=${2:?}; shift ;;
        --disk-size) disk_size=${2:?}; shift ;;
        --image) image=${2:?}; shift ;;
        --admin-socket) admin_socket=${2:?}; shift ;;
        --build-policy) build_policy=${2:?}; shift ;;
        --dry-run) dry=1 ;;
        *) usage ;;
    esac
    shift
done
case $vmid in '' | *[!0-9]*) echo "build-template: --vmid wants a number, found '$vmid'" >&2; exit 2 ;; esac
case $proxy in
    *[!0-9.:]* | :* | *:) echo "build-template: --proxy wants IPV4:PORT, found '$proxy'" >&2; exit 2 ;;
esac
[ -n "$dns" ] || dns=${proxy%:*}
case $dns in
    '' | *[!0-9.]*) echo "build-template: --dns wants an IPv4 address, found '$dns'" >&2; exit 2 ;;
esac
build_addr=${build_ip%/*}
case $build_addr in
    '' | *[!0-9.]*) echo "build-template: --build-ip wants IPV4/PREFIX, found '$build_ip'" >&2; exit 2 ;;
esac
case $build_policy in
    '' | *[!A-Za-z0-9._-]*) echo "build-template: --build-policy wants a preset's name, found '$build_policy'" >&2; exit 2 ;;
esac

# show CMD...: print it, quoted as a shell reads it.
show() {
    local w line=+
    for w in "$@"; do
        case $w in
            '' | *[!A-Za-z0-9_@%+=:,./!-]*) line+=" '${w//\'/\'\\\'\'}'" ;;
            *) line+=" $w" ;;
        esac
    done
    printf '%s\n' "$line"
}

# run CMD...: print it, then run it (not with --dry-run).
run() {
    show "$@"
    [ -n "$dry" ] || "$@"
}

# guest CMD...: print it, then run it in the VM through the guest agent (not
# with --dry-run), waiting up to 30 minutes; its output is printed, and a
# command that does not exit 0 (or is still running then) fails.
guest() {
    local res
    show qm guest exec "$vmid" --timeout 1800 -- "$@"
    [ -z "$dry" ] || return 0
    res=$(qm guest exec "$vmid" --timeout 1800 -- "$@") || return 1
    printf '%s' "$res" | perl -MJSON::PP -0777 -ne '
        my $r = decode_json($_);
        print $r->{"out-data"} // "";
        print STDERR $r->{"err-data"} // "";
        exit(exists $r->{exitcode} ? $r->{exitcode} : 1);'
}

# egress CURL-ARGS... PATH: a request to the node's egressd admin API.
egress() {
    local path=${*: -1}
    run curl -sS --fail-with-body --unix-socket "$admin_socket" "${@:1:$#-1}" "http://egressd$path"
}

snippet=egressd-sandbox-user-data.yaml
workdir=/var/tmp/egressd-template
[ -n "$image" ] || image=$workdir/$(basename "$image_url")

echo "# golden template $vmid on bridge $bridge, disk on $storage, proxy $proxy"
if [ -z "$dry" ] && qm status "$vmid" >/dev/null 2>&1; then
    echo "build-template: VM $vmid exists already; remove it first (qm set $vmid --protection 0; qm destroy $vmid)" >&2
    exit 1
fi
if [ -z "$dry" ] && [ ! -S "$admin_socket" ]; then
    echo "build-template: no egressd admin socket at $admin_socket: is egressd running on this node? (--admin-socket)" >&2
    exit 1
fi

# 1. The image, checked against Debian's published SHA512SUMS.
if [ ! -f "$image" ]; then
    run mkdir -p "$workdir"
    run wget -q -O "$image" "$image_url"
    run wget -q -O "$workdir/SHA512SUMS" "$sums_url"
    run sh -c "cd '$workdir' && grep ' $(basename "$image")\$' SHA512SUMS | sha512sum -c -"
fi

# 2. The user data, as a snippet (the snippets storage must allow them).
if command -v pvesh >/dev/null 2>&1; then
    content=$(pvesh get "/storage/$snippets" --output-format json | sed -n 's/.*"content":"\([^"]*\)".*/\1/p')
    snippet_dir=$(dirname "$(pvesm path "$snippets:snippets/$snippet")")
else # --dry-run away from Proxmox
    content="<its content now>"
    snippet_dir=/var/lib/vz/snippets
fi
case ",$content," in
    *,snippets,*) echo "# storage $snippets holds snippets already" ;;
    *) run pvesm set "$snippets" --content "$content,snippets" ;;
esac
run mkdir -p "$snippet_dir"
printf '+ sed -e s/10.99.0.1:3128/%s/g -e "s/nameserver 10.99.0.1\$/nameserver %s/" %s > %s\n' \
    "$proxy" "$dns" "$here/user-data.yaml" "$snippet_dir/$snippet"
[ -n "$dry" ] || sed -e "s/10\.99\.0\.1:3128/$proxy/g" -e "s/nameserver 10\.99\.0\.1\$/nameserver $dns/" \
    "$here/user-data.yaml" >"$snippet_dir/$snippet"

# 3. The VM: disk imported from the image, cloud-init drive, guest agent,
#    serial console, net0 on the proxy-only bridge behind the firewall.
run qm create "$vmid" --name sandbox-template --ostype l26 --machine q35 \
    --cpu host --cores 2 --memory 2048 --balloon 0 \
    --scsihw virtio-scsi-single \
    --scsi0 "$storage:0,import-from=$image,discard=on,ssd=1,iothread=1" \
    --ide2 "$storage:cloudinit" --boot order=scsi0 \
    --serial0 socket --vga serial0 \
    --agent enabled=1,fstrim_cloned_disks=1 \
    --net0 "virtio,bridge=$bridge,firewall=1" \
    --cicustom "user=$snippets:snippets/$snippet" \
    --ipconfig0 "ip=$build_ip,gw=$gateway" --nameserver 127.0.0.1 \
    --tags sandbox-template
run qm disk resize "$vmid" scsi0 "$disk_size"

# 4. One boot behind egressd, whose binding for the build address lets the
#    template reach its preset's hosts and nodejs.org, and no longer than
#    the build (removed when this script ends, however it ends; egressd
#    denies everything to it after `expires` anyway).  cloud-init installs
#    the guest agent, the tools, Node.js and the agents through egressd.
binding_id=template-$vmid
expires=$(date -u -d '+2 hours' +%Y-%m-%dT%H:%M:%SZ)
binding=$(printf '{"id":"%s","name":"golden template %s being built","owner":"build-template.sh","addresses":["%s"],"policy":"%s","allow":["nodejs.org"],"expires":"%s"}' \
    "$binding_id" "$vmid" "$build_addr" "$build_policy" "$expires")
bound=
unbind() {
    [ -n "$bound" ] || return 0
    bound=
    egress -w '\n' -X DELETE "/v1/sandboxes/$binding_id" ||
        echo "build-template: egressd binding $binding_id stays (it expires at $expires): remove it with curl --unix-socket $admin_socket -X DELETE http://egressd/v1/sandboxes/$binding_id" >&2
}
trap unbind EXIT
egress -w '\n' -X PUT -H 'Content-Type: application/json' --data-binary "$binding" "/v1/sandboxes/$binding_id"
bound=1
run qm start "$vmid"
if [ -z "$dry" ]; then
    echo "# waiting up to 10 minutes for the guest agent"
    for _ in $(seq 120); do
        qm agent "$vmid" ping >/dev/null 2>&1 && break
        sleep 5
    done
    qm agent "$vmid" ping >/dev/null 2>&1 || {
        echo "build-template: no guest agent after 10 minutes: is egressd running, and does the --build-policy preset ($build_policy) allow deb.debian.org?" >&2
        exit 1
    }
fi
guest cloud-init status --wait || {
    guest tail -n 40 /var/log/cloud-init-output.log || true
    echo "build-template: cloud-init failed in VM $vmid (its log's end above; all of it: /var/log/cloud-init-output.log)" >&2
    exit 1
}
# The agents, as the user they run as (in no privileged group), with the
# tools they drive; in a home that is thrown away, so that no agent's state
# or identity is left in the template.
check_agents=$(
    cat <<'EOF'
if id -nG agent | grep -qwE 'sudo|adm|wheel|root'; then echo "agent is in a privileged group: $(id -nG agent)" >&2; exit 1; fi
for c in git tmux make gcc python3 curl jq rg; do command -v "$c" >/dev/null || { echo "$c is missing" >&2; exit 1; }; done
h=$(mktemp -d /var/tmp/agent-check.XXXXXX); chown agent: "$h"; trap 'rm -rf "$h"' EXIT
runuser -u agent -- env -i HOME="$h" PATH=/usr/local/bin:/usr/bin:/bin sh -ec 'node --version; claude --version; codex --version; gemini --version'
EOF
)
guest sh -ec "$check_agents"
# Each clone is a new machine: new machine-id, new SSH host keys, cloud-init
# runs again (ipconfig0 differs, so the instance id does).  No build cache.
guest sh -c 'cloud-init clean --logs && truncate -s 0 /etc/machine-id && rm -f /var/lib/dbus/machine-id /etc/ssh/ssh_host_* && rm -rf /root/.npm /root/.cache /var/tmp/node-v* && apt-get clean && fstrim -a'
run qm shutdown "$vmid" --timeout 180
unbind

# 5. The template: no build address, its firewall file, protection.
run qm set "$vmid" --delete ipconfig0
run install -m 0644 "$here/../proxmox/9000.fw" "/etc/pve/firewall/$vmid.fw"
run qm set "$vmid" --protection 1
run qm template "$vmid"
echo "# done: template $vmid; grant VM.Clone and VM.Audit on /vms/$vmid (proxmox/pveum-sandboxctl.sh)"
