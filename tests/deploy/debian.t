#!/usr/bin/env bash
# debian.t - the Debian packages (debian/): built once from a copy of this
# tree (dpkg-buildpackage -b, nocheck: the unit tests run elsewhere), lintian
# (no E: or W: line), then installed, reinstalled, upgraded twice, removed and
# purged with dpkg in a throwaway root, checking what each step left: the
# files (the same as install.sh installs, under Debian's paths), the
# conffiles and an admin's edits to them, the user egressd, the version the
# running egressd reports, nothing enabled or started, `dpkg -V`, and what a
# purge leaves.  The first upgrade happens while the installed egressd runs
# (as egressd.service runs it): the postinst's `egressctl upgrade` must leave
# the new binary serving, a connection opened before it answered after it,
# and the old process drained and gone.
#
# The throwaway root is an overlay of this host's own root: its root file
# system read-only below, a tmpfs above, in a private mount namespace, with
# /proc, /dev (null, zero, random, urandom, ptys), /run and /tmp of its own,
# used with chroot.  The host built the packages, so it has every library they
# depend on: nothing is downloaded, nothing on the host changes, and it takes
# a second (an mmdebstrap root would need a download in the install step and
# a copy per run).  Whatever the packages do there goes to the tmpfs and is
# gone with the namespace.  systemctl is a recorder there (answering as if
# every unit were enabled and running, so that any start or restart the
# packages try is recorded), and /run/systemd/system exists, so the
# maintainer scripts act as on a host running systemd; policy-rc.d, if the
# host has one, is removed in the overlay.
#
# The "newer versions" are the built packages repacked (dpkg-deb -R, control
# and a file or two changed, dpkg-deb -b), not built again; the first
# upgrade is dpkg's, the second apt-get's.
# TAP on stdout.  Needs TOP; runs in its own mount, network and pid
# namespaces (egressd runs in the root, on addresses of that network
# namespace only, and dies with it).
# shellcheck disable=SC2016 # dpkg-query's ${Field}s, literally
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"
if [ "${1-}" != --in-ns ]; then
    exec unshare -m -n -p --fork "$0" --in-ns
fi
# okd STATUS TEXT FILE...: ok, and the end of each FILE as diagnostics when
# STATUS is a failure.
okd() {
    local status=$1 f
    ok "$status" "$2"
    shift 2
    [ "$status" -eq 0 ] && return
    for f in "$@"; do diag_file "$f" 30; done
}
mount --make-rprivate /
ip link set lo up

T=$(mktemp -d /tmp/deploy-debian.XXXXXX)
M=$T/root
mkdir -p "$T/ovl" "$M"
egd_pid=
cleanup() {
    # Everything mounted here is in this mount namespace only, and every
    # process dies with this pid namespace; stopped and unmounted first all
    # the same, and $T removed without crossing into a mount.
    [ -z "$egd_pid" ] || kill "$egd_pid" 2>/dev/null
    wait 2>/dev/null
    umount -R -l "$M" 2>/dev/null
    umount "$T/ovl" 2>/dev/null
    rm -rf --one-file-system "$T"
}
trap cleanup EXIT
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY

# ---------------------------------------------------------------- build
mkdir -p "$T/build/egressd"
tar -C "$TOP" --exclude=./build --exclude=./.git -cf - . | tar -C "$T/build/egressd" -xf -
t0=$(date +%s)
(cd "$T/build/egressd" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
    dpkg-buildpackage -b -uc -us) >"$T/build.log" 2>&1
okd $? "dpkg-buildpackage -b builds the packages" "$T/build.log"
diag "build: $(($(date +%s) - t0)) s"
V=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -SVersion)
DEB_E=$T/build/egressd_${V}_$(dpkg --print-architecture).deb
DEB_S=$T/build/sandboxctl_${V}_$(dpkg --print-architecture).deb
{ [ -f "$DEB_E" ] && [ -f "$DEB_S" ]; } || bail "egressd and sandboxctl $V built"
MESON_V=$(meson introspect --projectinfo "$TOP/meson.build" | sed -n 's/.*"version": "\([^"]*\)".*/\1/p')
check "the packages' version $V is meson's project version ($MESON_V)" \
    test "$(dpkg-deb -f "$DEB_E" Version)" = "$MESON_V" -a "$(dpkg-deb -f "$DEB_S" Version)" = "$MESON_V"

# The version check in debian/rules: a changelog that disagrees with meson
# stops the build at configure.
mkdir -p "$T/vcheck"
cp -a "$T/build/egressd/debian" "$T/build/egressd/meson.build" "$T/vcheck/"
(cd "$T/vcheck" && debian/rules check-version) >"$T/vcheck.log" 2>&1
okd $? "debian/rules check-version passes on this tree" "$T/vcheck.log"
sed -i "1s/($V)/(9.9.9)/" "$T/vcheck/debian/changelog"
(cd "$T/vcheck" && debian/rules check-version) >"$T/vcheck.log" 2>&1
ok $((!$?)) "debian/rules check-version (run before configure) refuses a changelog version that is not meson's"
check "... naming both versions" grep -q "changelog says 9.9.9 but meson.build's project() says '$MESON_V'" "$T/vcheck.log"

# debian/'s shell scripts: the maintainer scripts (#DEBHELPER# is a comment
# to the shell) and mkman.sh.
shellcheck "$TOP"/debian/*.postinst "$TOP"/debian/*.prerm "$TOP"/debian/*.postrm \
    "$TOP/debian/mkman.sh" >"$T/shellcheck" 2>&1
okd $? "shellcheck debian/'s maintainer scripts and mkman.sh" "$T/shellcheck"

t0=$(date +%s)
lintian -I --allow-root "$T/build/egressd_${V}_$(dpkg --print-architecture).changes" >"$T/lintian" 2>&1
lint_rc=$?
! grep -E '^[EW]: ' "$T/lintian" >"$T/lintian.ew" && [ "$lint_rc" -eq 0 ]
okd $? "lintian: no error and no warning" "$T/lintian"
diag "lintian: $(($(date +%s) - t0)) s, $(grep -c '^I: ' "$T/lintian") info lines"

# ---------------------------------------------------------------- repacks
# V2: the same but a line more in the README (no conffile changed);
# V3: besides, the balanced preset changed and a file left out.
V2=$V+pkgtest1
V3=$V+pkgtest2
repack() { # DEB VERSION OUT [EDIT-CMD]
    local d=$T/repack
    rm -rf "$d"
    dpkg-deb -R "$1" "$d"
    sed -i -e "s/^Version: .*/Version: $2/" -e "s/^\(Depends: .*egressd (= \)[^)]*)/\1$2)/" "$d/DEBIAN/control"
    [ -z "${4-}" ] || (cd "$d" && eval "$4")
    (cd "$d" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -printf '%P\0' |
        xargs -0 md5sum >DEBIAN/md5sums)
    dpkg-deb -b "$d" "$3" >/dev/null
}
mkdir -p "$M.debs"
readme_edit='echo "release notes of $V2" >>usr/share/doc/egressd/README.md'
repack "$DEB_E" "$V2" "$M.debs/egressd-2.deb" "$readme_edit"
repack "$DEB_S" "$V2" "$M.debs/sandboxctl-2.deb"
repack "$DEB_E" "$V3" "$M.debs/egressd-3.deb" "$readme_edit; echo '# $V3' >>etc/egressd/policies/balanced.allow;
    rm usr/share/egressd/prometheus/egressd-alerts.test.yml"
repack "$DEB_S" "$V3" "$M.debs/sandboxctl-3.deb"
check "the repacked packages say their versions" \
    test "$(dpkg-deb -f "$M.debs/egressd-3.deb" Version) $(dpkg-deb -f "$M.debs/sandboxctl-3.deb" Depends)" = \
    "$V3 $(dpkg-deb -f "$DEB_S" Depends | sed "s/(= $V)/(= $V3)/")"

# ---------------------------------------------------------------- the root
{ mount -t tmpfs tmpfs "$T/ovl" && mkdir "$T/ovl/upper" "$T/ovl/work" &&
    mount -t overlay overlay -o "lowerdir=/,upperdir=$T/ovl/upper,workdir=$T/ovl/work" "$M"; } ||
    bail "an overlay of / in a mount namespace"
mountpoint -q "$M" || bail "the overlay is mounted"
mount -t proc proc "$M/proc"
for d in dev run tmp; do mount -t tmpfs -o mode=0755 tmpfs "$M/$d"; done
chmod 1777 "$M/tmp"
for n in null zero random urandom; do
    touch "$M/dev/$n" && mount --bind "/dev/$n" "$M/dev/$n"
done
mkdir "$M/dev/pts" && mount -t devpts -o newinstance,ptmxmode=0666 devpts "$M/dev/pts" &&
    ln -s pts/ptmx "$M/dev/ptmx"
mkdir -p "$M/run/systemd/system" "$M/tmp/debs"
cp "$DEB_E" "$M/tmp/debs/egressd-1.deb"
cp "$DEB_S" "$M/tmp/debs/sandboxctl-1.deb"
cp "$M.debs"/*.deb "$M/tmp/debs/"
in_root() { chroot "$M" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
# The root starts without anything of egressd, whatever the host has.
rm -f "$M/usr/sbin/policy-rc.d"
# man-db's trigger rebuilds its index only where this file is: seconds a step.
rm -f "$M/var/lib/man-db/auto-update"
in_root sh -c 'dpkg -P egressd sandboxctl; userdel egressd; groupdel egressd' >/dev/null 2>&1
rm -rf "$M/etc/egressd" "$M/etc/sandboxctl" "$M/var/lib/egressd" "$M/var/log/egressd" \
    "$M/var/lib/sandboxctl" "$M/etc/logrotate.d/egressd"
rm -f "$M/usr/bin/systemctl" "$M/bin/systemctl"
cat >"$M/usr/bin/systemctl" <<'EOF'
#!/bin/sh
# A recorder: every call in /run/systemctl.log; every unit enabled and active.
echo "$*" >>/run/systemctl.log
case " $* " in
*" is-enabled "*) echo enabled ;;
*" --version "*) echo "systemd 252 (252)" ;;
esac
exit 0
EOF
chmod 755 "$M/usr/bin/systemctl"
[ -e "$M/bin/systemctl" ] || ln -s /usr/bin/systemctl "$M/bin/systemctl"
snapshot() { in_root find /etc /usr /var /opt /srv -xdev | sort; }
snapshot >"$T/before"

# step NAME CMD...: CMD (dpkg, apt-get) in the root, stdin closed (no prompt
# can be answered); its output in $T/NAME, systemctl's calls in $T/NAME.sysd.
times=
step() {
    local name=$1
    shift
    : >"$M/run/systemctl.log"
    local t0 rc
    t0=$(date +%s%N)
    in_root "$@" </dev/null >"$T/$name" 2>&1
    rc=$?
    times+="$name $((($(date +%s%N) - t0) / 1000000)) ms, "
    cp "$M/run/systemctl.log" "$T/$name.sysd"
    return $rc
}
# What would start, restart, reload, enable or stop a unit (deb-systemd-helper
# enables with `systemctl preset` where there is a systemctl).
ACTIONS='(start|restart|try-restart|reload-or-restart|try-reload-or-restart|reload|force-reload|enable|reenable|preset|kill|stop)'
nothing_started() { ! grep -Eq "(^| )$ACTIONS( |$)" "$1"; }
# Links to the packages' units anywhere in /etc/systemd (an enabled unit).
enabled_links() { find "$M/etc/systemd" -lname '*egressd*' -o -lname '*sandboxctl*' 2>/dev/null; }
pkg_files() { in_root dpkg-query -L egressd sandboxctl | sort -u; }

# ---------------------------------------------------------------- install
step install dpkg -i /tmp/debs/egressd-1.deb /tmp/debs/sandboxctl-1.deb
okd $? "install: dpkg -i egressd sandboxctl" "$T/install"
check "install: both packages installed, version $V" \
    test "$(in_root dpkg-query -W -f '${Status} ${Version};' egressd sandboxctl)" = \
    "install ok installed $V;install ok installed $V;"
for f in usr/sbin/egressd usr/bin/egressctl usr/bin/sandboxctl; do
    check "install: /$f, executable" test -x "$M/$f"
done
for u in egressd.service sandboxctl-reap.service sandboxctl-reap.timer sandboxctl-console.service; do
    sed 's|/usr/local/|/usr/|g' "$TOP/deploy/systemd/$u" >"$T/unit.want"
    check "install: /lib/systemd/system/$u is deploy/systemd's, its paths /usr's" \
        cmp -s "$M/lib/systemd/system/$u" "$T/unit.want"
done
check "install: the units run the programs where they are" \
    grep -qx 'ExecStart=/usr/sbin/egressd -c /etc/egressd/egressd.conf' "$M/lib/systemd/system/egressd.service"
check "install: no unit names /usr/local" sh -c "! grep -q /usr/local $M/lib/systemd/system/egressd.service $M/lib/systemd/system/sandboxctl-*"
check "install: the units' documentation is there, uncompressed" test -s "$M/usr/share/doc/egressd/README.md"
check "install: the README is deploy/README.md" cmp -s "$M/usr/share/doc/egressd/README.md" "$TOP/deploy/README.md"
in_root dpkg-query -W -f '${Conffiles}\n' egressd sandboxctl | awk 'NF {print $1}' | sort >"$T/conffiles"
printf '%s\n' /etc/egressd/egressd.conf /etc/egressd/policies/balanced.allow /etc/egressd/policies/locked.allow \
    /etc/egressd/policies/open.allow /etc/logrotate.d/egressd | sort >"$T/conffiles.want"
diff "$T/conffiles.want" "$T/conffiles" >"$T/diff" 2>&1
okd $? "install: the conffiles are egressd.conf, the three presets and the logrotate snippet" "$T/diff"
for p in locked balanced open; do
    check "install: preset $p as shipped" cmp -s "$M/etc/egressd/policies/$p.allow" "$TOP/deploy/policies/$p.allow"
done
check "install: egressd.conf as shipped" cmp -s "$M/etc/egressd/egressd.conf" "$TOP/deploy/egressd.conf"
for m in man8/egressd.8.gz man1/egressctl.1.gz man1/sandboxctl.1.gz; do
    check "install: manual page $m" test -s "$M/usr/share/man/$m"
done
check "install: egressd(8)'s synopsis is the program's usage" \
    sh -c "zcat '$M/usr/share/man/man8/egressd.8.gz' | grep -qF 'egressd \\-t \\-c egressd.conf'"
check "install: the user egressd: system uid, home /var/lib/egressd, no login shell" \
    grep -qE '^egressd:x:[1-9][0-9]{0,2}:[0-9]+:egressd egress proxy[^:]*:/var/lib/egressd:/usr/sbin/nologin$' "$M/etc/passwd"
check "install: the group egressd" grep -q '^egressd:x:' "$M/etc/group"
check "install: /var/lib/egressd egressd's, 0700 (the unit's StateDirectory)" \
    test "$(in_root stat -c '%U:%G %a' /var/lib/egressd 2>/dev/null)" = "egressd:egressd 700"
check "install: /var/log/egressd egressd's, 0750 (the unit's LogsDirectory)" \
    test "$(in_root stat -c '%U:%G %a' /var/log/egressd 2>/dev/null)" = "egressd:egressd 750"
check "install: /etc/sandboxctl for the admin's sandboxctl.conf" test -d "$M/etc/sandboxctl"
check "install: systemd reloaded (the recorder saw the scripts)" grep -qx -- '--system daemon-reload' "$T/install.sysd"
nothing_started "$T/install.sysd"
okd $? "install: nothing started, restarted or enabled through systemctl" "$T/install.sysd"
enabled_links >"$T/links"
check "install: no unit enabled (no link to one in /etc/systemd)" test ! -s "$T/links"
in_root dpkg -V egressd sandboxctl >"$T/verify" 2>&1 && [ ! -s "$T/verify" ]
okd $? "install: dpkg -V finds nothing changed" "$T/verify"
in_root egressd -t -c /etc/egressd/egressd.conf >"$T/check" 2>&1
okd $? "install: egressd -t on the installed egressd.conf and presets" "$T/check"

# The same things as install.sh, but for what Debian does otherwise.
DESTDIR=$T/src-install PREFIX=/usr "$TOP/deploy/install.sh" "$T/build/egressd/debian/build" >"$T/install.sh.log" 2>&1 ||
    diag_file "$T/install.sh.log"
(cd "$T/src-install" && find . ! -type d | sed -e 's|^\.||' -e 's|^/usr/lib/systemd/|/lib/systemd/|' |
    grep -v -E -e '^/usr/share/egressd/(systemd|logrotate|policies)/' -e '^/usr/share/egressd/egressd.conf$' \
        -e '^/usr/lib/sysusers.d/egressd.conf$' -e '^/etc/(passwd|group|shadow|gshadow)-?$' -e '^/etc/\.pwd\.lock$' |
    sort) >"$T/install.sh.files"
pkg_files >"$T/pkg.files"
comm -23 "$T/install.sh.files" "$T/pkg.files" >"$T/missing"
[ -s "$T/install.sh.files" ] && [ ! -s "$T/missing" ]
okd $? "install: every file install.sh installs (PREFIX /usr) is in a package" "$T/missing"
diag "not packaged, as Debian does them otherwise: share/egressd/{systemd,logrotate}/ (the" \
    "installed unit and snippet), share/egressd/{egressd.conf,policies/} (dpkg keeps the" \
    "shipped conffile as .dpkg-dist), sysusers.d (the postinst makes the user)"

# ---------------------------------------------------------------- reinstall
pkg_sums() { (cd "$M" && pkg_files | sed 's|^/||' | while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done |
    xargs sha256sum); }
pkg_sums >"$T/sums1"
step reinstall dpkg -i /tmp/debs/egressd-1.deb /tmp/debs/sandboxctl-1.deb
okd $? "reinstall: dpkg -i the same version again" "$T/reinstall"
pkg_sums | diff "$T/sums1" - >"$T/diff" 2>&1
okd $? "reinstall: every file of the packages as it was" "$T/diff"
check "reinstall: one user egressd" test "$(grep -c '^egressd:' "$M/etc/passwd")" = 1
nothing_started "$T/reinstall.sysd"
okd $? "reinstall: nothing started, stopped or restarted" "$T/reinstall.sysd"
check "reinstall: no egressd runs: no handover, no warning" sh -c "! grep -q -e 'handing it over' -e warning '$T/reinstall'"
in_root dpkg -V egressd sandboxctl >"$T/verify" 2>&1 && [ ! -s "$T/verify" ]
okd $? "reinstall: dpkg -V finds nothing changed" "$T/verify"

# ---------------------------------------------------------------- egressd runs
# As egressd.service runs it: /usr/sbin/egressd as the user egressd from the
# start, with CAP_NET_BIND_SERVICE only (for DNS on port 53), its runtime
# directory egressd's; the listeners on 10.99.0.1 as shipped, in this
# network namespace.  The admin's edit: a minute for a request head and for
# the drain of an upgrade (10 s each as shipped), so that a connection
# opened before the upgrade and used after it does not depend on how long
# dpkg takes on a busy machine.
sed -i 's/^timeout-header .*/timeout-header    60s                   # local: the test waits/' \
    "$M/etc/egressd/egressd.conf"
echo 'timeout-drain     60s                   # local: the test waits' >>"$M/etc/egressd/egressd.conf"
cp "$M/etc/egressd/egressd.conf" "$T/conf.edited"
ip addr add 10.99.0.1/24 dev lo
install -d -m 0750 "$M/run/egressd" && in_root chown egressd:egressd /run/egressd 2>/dev/null
chroot "$M" setpriv --reuid=egressd --regid=egressd --init-groups --inh-caps=+net_bind_service \
    --ambient-caps=+net_bind_service env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    /usr/sbin/egressd -c /etc/egressd/egressd.conf >"$T/egressd.log" 2>&1 &
egd_pid=$!
status_ok() { in_root egressctl -c /etc/egressd/egressd.conf status >"$T/status" 2>&1; }
serving_pid() { status_ok && awk '$1 == "pid" {print $2}' "$T/status"; }
for _ in $(seq 100); do status_ok && break; sleep 0.1; done
status_ok
okd $? "the installed egressd runs (as egressd.service would) and egressctl status answers" \
    "$T/status" "$T/egressd.log"
check "egressctl status: version $V, the package's" grep -qE "^version +$V\$" "$T/status"
first=$(serving_pid)
check "egressctl status: the pid of the egressd started ($egd_pid)" test "$first" = "$egd_pid"
echo "sandbox state" 2>/dev/null >"$M/var/lib/egressd/marker"

# deny_answer FD: a CONNECT for a host no preset allows, on FD; the status
# line egressd answers.
deny_answer() {
    local line=
    printf 'CONNECT denied.test:443 HTTP/1.1\r\nHost: denied.test:443\r\n\r\n' >&"$1" &&
        IFS= read -r -t 20 line <&"$1"
    printf '%s' "${line%$'\r'}"
}
exec 5<>/dev/tcp/10.99.0.1/3128
check "a client connected to the proxy before the upgrade" test -e /proc/self/fd/5

# ---------------------------------------------------------------- upgrade, egressd running
step upgrade2 dpkg -i /tmp/debs/egressd-2.deb /tmp/debs/sandboxctl-2.deb
okd $? "upgrade to $V2 (an egressd running, egressd.conf edited): dpkg -i, no prompt" "$T/upgrade2"
check "upgrade to $V2: installed" \
    test "$(in_root dpkg-query -W -f '${Version};' egressd sandboxctl)" = "$V2;$V2;"
check "upgrade to $V2: the postinst saw egressd running and asked it to upgrade in place" \
    grep -q 'an egressd is running: handing it over to the new egressd' "$T/upgrade2"
# The in-place upgrade itself (egressctl upgrade): the binary now on disk
# serves with the same sockets; the old process drains.
check "upgrade to $V2: the postinst says the new egressd serves, and warns of nothing" \
    sh -c "grep -q 'the new egressd serves' '$T/upgrade2' && ! grep -q warning '$T/upgrade2'"
second=$(serving_pid)
okd $? "upgrade to $V2: an egressd answers status" "$T/status"
check "upgrade to $V2: it is a new process (pid $first, now ${second:-none})" \
    test -n "$second" -a "$second" != "$first"
check "upgrade to $V2: its binary is the one now on disk, not the replaced one" \
    sh -c "readlink '$M/proc/$second/exe' | grep -qx '$M/usr/sbin/egressd'"
answer=$(deny_answer 5)  # (empty when there is no answer)
check "upgrade to $V2: the connection opened before it is answered after it ($answer)" \
    grep -q '^HTTP/1.1 403' <<<"$answer"
exec 5>&-
answer=
exec 6<>/dev/tcp/10.99.0.1/3128 && answer=$(deny_answer 6)
check "upgrade to $V2: a new connection is served ($answer)" grep -q '^HTTP/1.1 403' <<<"$answer"
exec 6>&- 2>/dev/null
for _ in $(seq 300); do kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
check "upgrade to $V2: the old egressd has drained and exited" sh -c "! kill -0 $first 2>/dev/null"
check "upgrade to $V2: no warning of an egressd that does not answer" sh -c "! grep -q 'gets no answer' '$T/upgrade2'"
nothing_started "$T/upgrade2.sysd"
okd $? "upgrade to $V2: the unit not stopped, restarted or started" "$T/upgrade2.sysd"
check "upgrade to $V2: the edited egressd.conf kept" cmp -s "$M/etc/egressd/egressd.conf" "$T/conf.edited"
check "upgrade to $V2: no .dpkg-dist for it (the shipped one did not change)" test ! -e "$M/etc/egressd/egressd.conf.dpkg-dist"
check "upgrade to $V2: the README replaced" grep -qx "release notes of $V2" "$M/usr/share/doc/egressd/README.md"
diag "upgrade to $V2, postinst said: $(grep '^egressd:\|^upgraded' "$T/upgrade2" | tr '\n' ' ')"
wait "$egd_pid" 2>/dev/null
egd_pid=$second
kill "$egd_pid" 2>/dev/null
for _ in $(seq 100); do status_ok || break; sleep 0.1; done
! status_ok
okd $? "egressd stopped" "$T/status"
egd_pid=

# ---------------------------------------------------------------- upgrade, a changed conffile
echo "example.org" >>"$M/etc/egressd/policies/balanced.allow"
cp "$M/etc/egressd/policies/balanced.allow" "$T/balanced.edited"
# As apt upgrades (the packages are local: the root has no network).
step upgrade3 env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    /tmp/debs/egressd-3.deb /tmp/debs/sandboxctl-3.deb
okd $? "upgrade to $V3 (balanced.allow edited and changed): apt-get install, --force-confold, no prompt" "$T/upgrade3"
check "upgrade to $V3: apt-get says no error (E:)" sh -c "! grep -q '^E: ' '$T/upgrade3'"
check "upgrade to $V3: installed" \
    test "$(in_root dpkg-query -W -f '${Version};' egressd sandboxctl)" = "$V3;$V3;"
check "upgrade to $V3: the edited balanced.allow kept" cmp -s "$M/etc/egressd/policies/balanced.allow" "$T/balanced.edited"
check "upgrade to $V3: the shipped one beside it, as .dpkg-dist" \
    grep -qx "# $V3" "$M/etc/egressd/policies/balanced.allow.dpkg-dist"
check "upgrade to $V3: the edited egressd.conf still kept" cmp -s "$M/etc/egressd/egressd.conf" "$T/conf.edited"
check "upgrade to $V3: the file the new version left out is gone" \
    test ! -e "$M/usr/share/egressd/prometheus/egressd-alerts.test.yml"
check "upgrade to $V3: no egressd answers, so no handover" sh -c "! grep -q 'handing it over' '$T/upgrade3'"
check "upgrade to $V3: /run/egressd is left, so a warning that an egressd there keeps the old version" \
    grep -q "/run/egressd exists but 'egressctl -c /etc/egressd/egressd.conf status' gets no answer" "$T/upgrade3"
nothing_started "$T/upgrade3.sysd"
okd $? "upgrade to $V3: nothing started, stopped or restarted" "$T/upgrade3.sysd"
enabled_links >"$T/links"
check "upgrade to $V3: no unit enabled" test ! -s "$T/links"
check "upgrade to $V3: egressd's state kept" test -s "$M/var/lib/egressd/marker"
check "upgrade to $V3: one user egressd" test "$(grep -c '^egressd:' "$M/etc/passwd")" = 1
in_root dpkg -V egressd sandboxctl >"$T/verify" 2>&1
sed 's/^\S* //' "$T/verify" | sort >"$T/verify.files"
printf '%s\n' 'c /etc/egressd/egressd.conf' 'c /etc/egressd/policies/balanced.allow' >"$T/verify.want"
diff "$T/verify.want" "$T/verify.files" >"$T/diff" 2>&1
okd $? "upgrade to $V3: dpkg -V finds the two edited conffiles changed, nothing else" "$T/verify" "$T/diff"

# ---------------------------------------------------------------- remove
mkdir -p "$M/var/lib/sandboxctl" && echo lock >"$M/var/lib/sandboxctl/reap.lock"
echo "pve-url https://pve.example:8006" >"$M/etc/sandboxctl/sandboxctl.conf"
step remove dpkg -r sandboxctl egressd
okd $? "remove: dpkg -r sandboxctl egressd" "$T/remove"
check "remove: both in state config-files" \
    test "$(in_root dpkg-query -W -f '${Status};' egressd sandboxctl)" = \
    "deinstall ok config-files;deinstall ok config-files;"
for f in usr/sbin/egressd usr/bin/egressctl usr/bin/sandboxctl lib/systemd/system/egressd.service \
         lib/systemd/system/sandboxctl-reap.timer usr/share/egressd usr/share/doc/egressd; do
    check "remove: /$f gone" test ! -e "$M/$f"
done
check "remove: egressd.service stopped (prerm)" grep -qE '(^| )stop egressd.service$' "$T/remove.sysd"
check "remove: the reaper's timer and service and the console stopped" \
    grep -qE '(^| )stop sandboxctl-reap.timer sandboxctl-reap.service sandboxctl-console.service$' "$T/remove.sysd"
! grep -Ev '(^| )stop (egressd|sandboxctl)' "$T/remove.sysd" | grep -Eq "(^| )$ACTIONS( |$)"
okd $? "remove: nothing started" "$T/remove.sysd"
check "remove: the conffiles stay, egressd.conf with its edit" cmp -s "$M/etc/egressd/egressd.conf" "$T/conf.edited"
check "remove: the user and the state stay" \
    sh -c "grep -q '^egressd:' '$M/etc/passwd' && test -s '$M/var/lib/egressd/marker'"

# ---------------------------------------------------------------- purge
mkdir -p "$M/etc/egressd/secrets" && echo "token" >"$M/etc/egressd/secrets/admins-token"
echo "a line" 2>/dev/null >"$M/var/log/egressd/access.log"
step purge dpkg -P egressd sandboxctl
okd $? "purge: dpkg -P egressd sandboxctl" "$T/purge"
check "purge: neither package known to dpkg any more" \
    test -z "$(in_root dpkg-query -W -f '${db:Status-Status}\n' egressd sandboxctl 2>/dev/null | grep -vx not-installed)"
for d in var/lib/egressd var/log/egressd var/lib/sandboxctl etc/logrotate.d/egressd; do
    check "purge: /$d gone" test ! -e "$M/$d"
done
(cd "$M" && find etc/egressd etc/sandboxctl 2>/dev/null | sort) >"$T/left"
printf '%s\n' etc/egressd etc/egressd/secrets etc/egressd/secrets/admins-token etc/sandboxctl \
    etc/sandboxctl/sandboxctl.conf >"$T/left.want"
diff "$T/left.want" "$T/left" >"$T/diff" 2>&1
okd $? "purge: of /etc/egressd and /etc/sandboxctl only the admin's own files are left" "$T/diff"
check "purge: the user egressd stays (files elsewhere may be its own)" grep -q '^egressd:' "$M/etc/passwd"
snapshot >"$T/after"
# What is new in the root after all this: the admin's files above, nothing
# else (not in /var/lib/dpkg either).
comm -13 "$T/before" "$T/after" | grep -v -E '^/etc/(egressd|sandboxctl)(/|$)' >"$T/new"
okd "$([ ! -s "$T/new" ]; echo $?)" "purge: nothing else of the packages is left in the root" "$T/new"
comm -23 "$T/before" "$T/after" >"$T/lost"
okd "$([ ! -s "$T/lost" ]; echo $?)" "purge: nothing that was there before is gone" "$T/lost"
diag "left after purge: $(grep -q '^egressd:' "$M/etc/passwd" && echo 'the user and group egressd;') $(tr '\n' ' ' <"$T/left")"
diag "steps: $times"
tap_end
