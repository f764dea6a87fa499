#!/usr/bin/env bash
# port-guard.sh - the sandboxes' identity on a plain Linux bridge: per port,
# the one address and MAC a sandbox may send from (egressd-ports.nft, table
# bridge egressd_ports; nothing else from that port, and a port without an
# entry may pose as no sandbox).  What a port sends from its address is
# marked for the wall (chain guarded), which lets in nothing else.
#   port-guard.sh add PORT ADDR MAC   guard PORT: only ADDR (IPv4) and MAC;
#                                     again with other values replaces them
#   port-guard.sh del PORT            remove PORT's entry (nothing to remove
#                                     is no error)
#   port-guard.sh list                one line per guarded port: PORT ADDR MAC
# Run `add` from whatever attaches a sandbox's port to the bridge (best
# before the port comes up: until then it is a port without an entry), and
# `del` when the sandbox goes.  An address or MAC that another port holds is
# refused.  The table is loaded from egressd-ports.nft beside this script
# (or $PORT_GUARD_NFT) when it is missing.  Exit status 0 done, 1 refused or
# nft failed, 2 usage or a malformed argument (named).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
nft_file=${PORT_GUARD_NFT:-$here/egressd-ports.nft}
lock=${PORT_GUARD_LOCK:-/run/lock/egressd-port-guard.lock}
family=bridge name=egressd_ports
table="$family $name"

usage() {
    echo "usage: port-guard.sh add PORT ADDR MAC | del PORT | list" >&2
    exit 2
}
die() {
    echo "port-guard: $1" >&2
    exit "${2:-1}"
}

# An interface name as Linux takes them (1-15 characters), of the characters
# an nft chain name may hold.
valid_port() {
    [[ $1 =~ ^[A-Za-z0-9_.-]{1,15}$ ]] && [ "$1" != . ] && [ "$1" != .. ]
}
# A unicast IPv4 address in dotted-quad form, no leading zeros.
valid_addr() {
    local o
    [[ $1 =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] || return 1
    for o in "${BASH_REMATCH[@]:1}"; do
        [[ $o =~ ^(0|[1-9][0-9]*)$ ]] && [ "$o" -le 255 ] || return 1
    done
    o=${BASH_REMATCH[1]}
    [ "$o" -ne 0 ] && [ "$o" -ne 127 ] && [ "$o" -lt 224 ]
}
# A unicast MAC (lower case), not all zeros.
valid_mac() {
    [[ $1 =~ ^[0-9a-f]{2}(:[0-9a-f]{2}){5}$ ]] && [ $((0x${1:0:2} & 1)) -eq 0 ] &&
        [ "$1" != 00:00:00:00:00:00 ]
}

# The entries, "PORT ADDR MAC" a line, from the comment on each port chain's
# first rule (nothing when the table is not loaded).
entries() {
    nft list table "$family" "$name" 2>/dev/null | sed -n 's/.* comment "port-guard \([^"]*\)"$/\1/p'
}

ensure_table() {
    nft list table "$family" "$name" >/dev/null 2>&1 && return 0
    [ -r "$nft_file" ] || die "table $table is not loaded and $nft_file is not readable (set PORT_GUARD_NFT)"
    nft -f "$nft_file" || die "loading $nft_file failed"
}

take_lock() {
    exec 9>>"$lock" || die "cannot open the lock file $lock (set PORT_GUARD_LOCK)"
    flock 9
}

cmd_add() {
    local port=$1 addr=$2 mac p a m old_mac=
    mac=$(tr 'A-F' 'a-f' <<<"$3")
    valid_port "$port" || die "PORT '$port' is not an interface name (1-15 of A-Z a-z 0-9 . _ -)" 2
    valid_addr "$addr" || die "ADDR '$addr' is not a unicast IPv4 address (such as 10.99.0.11)" 2
    valid_mac "$mac" || die "MAC '$3' is not a unicast MAC address (such as 52:54:00:12:34:56)" 2
    take_lock
    ensure_table
    while read -r p a m; do
        if [ "$p" = "$port" ]; then
            old_mac=$m
        elif [ "$a" = "$addr" ]; then
            die "ADDR $addr is held by port $p (port-guard.sh del $p first)"
        elif [ "$m" = "$mac" ]; then
            die "MAC $mac is held by port $p (port-guard.sh del $p first)"
        fi
    done < <(entries)
    # One transaction: the port's chain is replaced whole, never open.
    {
        echo "add chain $table port_$port"
        echo "flush chain $table port_$port"
        echo "add rule $table port_$port ether saddr != $mac counter drop comment \"port-guard $port $addr $mac\""
        echo "add rule $table port_$port ip saddr $addr goto guarded"
        echo "add rule $table port_$port arp htype 1 arp ptype ip arp hlen 6 arp plen 4 arp saddr ether $mac arp saddr ip $addr accept"
        echo "add rule $table port_$port counter drop"
        [ -n "$old_mac" ] && [ "$old_mac" != "$mac" ] && echo "delete element $table macs { $old_mac }"
        echo "add element $table macs { $mac }"
        echo "add element $table ports { \"$port\" : jump port_$port }"
    } | nft -f - || die "nft refused the entry of port $port"
    echo "port-guard: $port: only $addr from $mac"
}

cmd_del() {
    local port=$1 p a m mac=
    valid_port "$port" || die "PORT '$port' is not an interface name (1-15 of A-Z a-z 0-9 . _ -)" 2
    take_lock
    while read -r p a m; do
        [ "$p" = "$port" ] && mac=$m
    done < <(entries)
    if [ -z "$mac" ]; then
        echo "port-guard: $port: no entry"
        return 0
    fi
    {
        echo "delete element $table ports { \"$port\" }"
        echo "delete element $table macs { $mac }"
        echo "flush chain $table port_$port"
        echo "delete chain $table port_$port"
    } | nft -f - || die "nft refused to remove the entry of port $port"
    echo "port-guard: $port: entry removed (a port without an entry may pose as no sandbox)"
}

[ $# -ge 1 ] || usage
case $1 in
    add) [ $# -eq 4 ] || usage; cmd_add "$2" "$3" "$4" ;;
    del) [ $# -eq 2 ] || usage; cmd_del "$2" ;;
    list) [ $# -eq 1 ] || usage; entries ;;
    *) usage ;;
esac
