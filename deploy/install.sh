#!/usr/bin/env bash
# install.sh BUILD_DIR - install egressd, egressctl and sandboxctl from a
# meson build directory (e.g. build/release), with their systemd units, the
# default configuration and presets, and the egressd system user.
#
#   deploy/install.sh build/release              as root, onto this host
#   DESTDIR=/tmp/root deploy/install.sh build/release   into a staging root
#   PREFIX=/opt/egressd ...                      (default /usr/local)
#
# Idempotent: run it again to upgrade.  Programs, units and the files under
# PREFIX/share/egressd are replaced; a file in /etc (egressd.conf, a preset,
# the logrotate snippet) is installed only when it is not there yet: one an
# admin has is never touched, and when the shipped version differs, the
# difference is named (the shipped copy is in PREFIX/share/egressd).
# Nothing is enabled or started: the last lines say what to run.
set -eu

usage() {
    echo "usage: [DESTDIR=DIR] [PREFIX=/usr/local] install.sh BUILD_DIR" >&2
    exit 2
}
[ $# -eq 1 ] || usage
build=$1
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
DESTDIR=${DESTDIR:-}
PREFIX=${PREFIX:-/usr/local}
case $PREFIX in /*) ;; *) echo "install.sh: PREFIX must be absolute, found '$PREFIX'" >&2; exit 2 ;; esac
D=${DESTDIR%/}

for prog in proxy/egressd proxy/egressctl sandbox-orchestrator/sandboxctl; do
    [ -x "$build/$prog" ] || { echo "install.sh: $build/$prog not found: build first (meson setup $build && ninja -C $build)" >&2; exit 1; }
done

say() { printf 'install.sh: %s\n' "$*"; }
# put MODE SRC DEST: install SRC as DEST (replacing it), directories made.
put() {
    install -D -m "$1" "$2" "$D$3"
}
# conffile SRC DEST: DEST (under /etc) only when there is none yet.
conffile() {
    local src=$1 dest=$2
    if [ ! -e "$D$dest" ]; then
        install -D -m 0644 "$src" "$D$dest"
        say "installed $dest"
    elif cmp -s "$src" "$D$dest"; then
        :
    else
        say "kept $dest (yours); the shipped version is $PREFIX/share/egressd/${3:-$(basename "$dest")}"
    fi
}
# unit SRC: a unit file, its paths under PREFIX.
unit() {
    local dest
    dest=$PREFIX/lib/systemd/system/$(basename "$1")
    mkdir -p "$D$PREFIX/lib/systemd/system"
    sed "s|/usr/local/|$PREFIX/|g" "$1" >"$D$dest.tmp"
    chmod 0644 "$D$dest.tmp"
    mv "$D$dest.tmp" "$D$dest"
}

# The programs.
put 0755 "$build/proxy/egressd" "$PREFIX/sbin/egressd"
put 0755 "$build/proxy/egressctl" "$PREFIX/bin/egressctl"
put 0755 "$build/sandbox-orchestrator/sandboxctl" "$PREFIX/bin/sandboxctl"
say "programs in $PREFIX/sbin and $PREFIX/bin"

# The units and the system user egressd (systemd-sysusers creates it now and
# at every boot if it is missing).
for u in "$here"/systemd/egressd.service "$here"/systemd/sandboxctl-reap.service \
         "$here"/systemd/sandboxctl-reap.timer "$here"/systemd/sandboxctl-console.service; do
    unit "$u"
done
mkdir -p "$D$PREFIX/lib/sysusers.d"
printf '%s\n' "# egressd's system user (deploy/install.sh)" \
    'u egressd - "egressd egress proxy" /var/lib/egressd /usr/sbin/nologin' \
    >"$D$PREFIX/lib/sysusers.d/egressd.conf"
if command -v systemd-sysusers >/dev/null 2>&1; then
    if [ -n "$D" ]; then
        mkdir -p "$D/etc"
        systemd-sysusers --root="$D" "$D$PREFIX/lib/sysusers.d/egressd.conf"
    else
        systemd-sysusers "$PREFIX/lib/sysusers.d/egressd.conf"
    fi
elif ! grep -q '^egressd:' "$D/etc/passwd" 2>/dev/null; then
    if [ -n "$D" ]; then
        echo "install.sh: systemd-sysusers is missing: cannot create the user egressd under $D" >&2
        exit 1
    fi
    useradd --system --user-group --home-dir /var/lib/egressd --no-create-home \
        --shell /usr/sbin/nologin --comment "egressd egress proxy" egressd
fi
say "units in $PREFIX/lib/systemd/system; user egressd"

# Everything shipped, as shipped, under PREFIX/share/egressd.
share=$PREFIX/share/egressd
rm -rf "$D$share.tmp"
mkdir -p "$D$share.tmp"
cp -R "$here/policies" "$here/image" "$here/proxmox" "$here/nftables" "$here/keepalived" "$here/prometheus" \
    "$here/systemd" "$here/logrotate" "$D$share.tmp/"
cp "$here/egressd.conf" "$D$share.tmp/egressd.conf"
cp "$top/sandbox-orchestrator/sandboxctl.conf.example" "$D$share.tmp/sandboxctl.conf.example"
chmod -R u=rwX,go=rX "$D$share.tmp"
rm -rf "$D$share"
mv "$D$share.tmp" "$D$share"
put 0644 "$here/README.md" "$PREFIX/share/doc/egressd/README.md"
say "shipped files in $share"

# The configuration: the admin's once it exists.
install -d -m 0755 "$D/etc/egressd" "$D/etc/egressd/policies"
conffile "$here/egressd.conf" /etc/egressd/egressd.conf
for p in "$here"/policies/*.allow; do
    conffile "$p" "/etc/egressd/policies/$(basename "$p")" "policies/$(basename "$p")"
done
conffile "$here/logrotate/egressd" /etc/logrotate.d/egressd logrotate/egressd
install -d -m 0755 "$D/etc/sandboxctl"

if [ -z "$D" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
fi
"$D$PREFIX/sbin/egressd" -t -c "$D/etc/egressd/egressd.conf" >/dev/null ||
    say "warning: egressd -t -c /etc/egressd/egressd.conf fails: fix it before starting egressd"
cat <<EOF
install.sh: done.  Next:
  edit /etc/egressd/egressd.conf (resolver; listen addresses), then
    systemctl enable --now egressd
  for the reaper: cp $share/sandboxctl.conf.example /etc/sandboxctl/sandboxctl.conf,
    edit it, then systemctl enable --now sandboxctl-reap.timer
  Proxmox: $share/proxmox/, $share/image/; a plain host: $share/nftables/
EOF
