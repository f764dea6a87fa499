#!/usr/bin/env bash
# install.t - deploy/install.sh into a DESTDIR, twice: the tree it makes, the
# user egressd, the installed config passing `egressd -t`, and a second run
# that changes nothing an admin edited (nor anything else).  PREFIX moves the
# units' paths with the programs.  TAP on stdout.  Needs BUILD_DIR, TOP.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

T=$(mktemp -d /tmp/deploy-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
R=$T/root
INSTALL=$TOP/deploy/install.sh

DESTDIR=$R "$INSTALL" "$BUILD_DIR" >"$T/run1" 2>&1
ok $? "install.sh BUILD_DIR into DESTDIR" || diag_file "$T/run1"

for f in usr/local/sbin/egressd usr/local/bin/egressctl usr/local/bin/sandboxctl; do
    check "program $f installed, executable" test -x "$R/$f"
done
check "the installed egressd is the build's" cmp -s "$R/usr/local/sbin/egressd" "$BUILD_DIR/proxy/egressd"
for f in egressd.service sandboxctl-reap.service sandboxctl-reap.timer; do
    check "unit $f installed" test -f "$R/usr/local/lib/systemd/system/$f"
done
for f in etc/egressd/egressd.conf etc/egressd/policies/locked.allow etc/egressd/policies/balanced.allow \
         etc/egressd/policies/open.allow etc/logrotate.d/egressd \
         usr/local/share/egressd/image/user-data.yaml usr/local/share/egressd/image/build-template.sh \
         usr/local/share/egressd/proxmox/pveum-sandboxctl.sh usr/local/share/egressd/proxmox/9000.fw \
         usr/local/share/egressd/proxmox/cluster.fw usr/local/share/egressd/proxmox/interfaces.vmbr99 \
         usr/local/share/egressd/nftables/egressd-wall.nft usr/local/share/egressd/prometheus/egressd-alerts.yml \
         usr/local/share/egressd/sandboxctl.conf.example usr/local/share/doc/egressd/README.md; do
    check "$f installed" test -s "$R/$f"
done
check "the user data lands as shipped" cmp -s "$R/usr/local/share/egressd/image/user-data.yaml" "$TOP/deploy/image/user-data.yaml"
check "the unit lands as shipped (PREFIX /usr/local)" \
    cmp -s "$R/usr/local/lib/systemd/system/egressd.service" "$TOP/deploy/systemd/egressd.service"
check "the shipped scripts stay executable" test -x "$R/usr/local/share/egressd/proxmox/pveum-sandboxctl.sh"
check "the user egressd exists: system uid, home /var/lib/egressd, no login shell" \
    grep -qE '^egressd:x:[1-9][0-9]{0,2}:[0-9]+:[^:]*:/var/lib/egressd:/usr/sbin/nologin$' "$R/etc/passwd"
check "the group egressd exists" grep -q '^egressd:x:' "$R/etc/group"
check "sysusers.d keeps the user at every boot" grep -q '^u egressd ' "$R/usr/local/lib/sysusers.d/egressd.conf"

"$R/usr/local/sbin/egressd" -t -c "$R/etc/egressd/egressd.conf" >"$T/check" 2>&1
ok $? "egressd -t -c on the installed egressd.conf passes (with its presets)" || diag_file "$T/check"
"$R/usr/local/bin/egressctl" check -c "$R/etc/egressd/egressd.conf" >"$T/check" 2>&1
ok $? "egressctl check on the installed config passes" || diag_file "$T/check"

# An admin's edits, then the second run.
echo "# edited by the admin" >>"$R/etc/egressd/egressd.conf"
echo "example.org" >>"$R/etc/egressd/policies/locked.allow"
echo "# admin's rotation" >>"$R/etc/logrotate.d/egressd"
cp "$R/etc/egressd/egressd.conf" "$T/conf.edited"
cp "$R/etc/egressd/policies/locked.allow" "$T/locked.edited"
rm "$R/etc/egressd/policies/open.allow"
(cd "$R" && find . -path ./etc/egressd/policies/open.allow -prune -o -print | sort) >"$T/tree1"
(cd "$R" && find . -type f ! -name .pwd.lock -exec sha256sum {} + | sort -k2) >"$T/sums1"
DESTDIR=$R "$INSTALL" "$BUILD_DIR" >"$T/run2" 2>&1
ok $? "install.sh again (idempotent)" || diag_file "$T/run2"
check "the edited egressd.conf is kept" cmp -s "$R/etc/egressd/egressd.conf" "$T/conf.edited"
check "the edited preset is kept" cmp -s "$R/etc/egressd/policies/locked.allow" "$T/locked.edited"
check "the edited logrotate snippet is kept" grep -q "admin's rotation" "$R/etc/logrotate.d/egressd"
check "the second run names what it kept and where the shipped copy is" \
    grep -q 'kept /etc/egressd/egressd.conf (yours); the shipped version is /usr/local/share/egressd/egressd.conf' "$T/run2"
check "a preset the admin deleted comes back" cmp -s "$R/etc/egressd/policies/open.allow" "$TOP/deploy/policies/open.allow"
check "one user egressd, not two" test "$(grep -c '^egressd:' "$R/etc/passwd")" = 1
(cd "$R" && find . -path ./etc/egressd/policies/open.allow -prune -o -print | sort) >"$T/tree2"
diff "$T/tree1" "$T/tree2" >"$T/diff" 2>&1
ok $? "the second run adds no file (but the deleted preset)" || diag_file "$T/diff"
(cd "$R" && find . -type f ! -name .pwd.lock ! -path ./etc/egressd/policies/open.allow -exec sha256sum {} + | sort -k2) >"$T/sums2"
grep -v ' ./etc/egressd/policies/open.allow$' "$T/sums1" | diff - "$T/sums2" >"$T/diff" 2>&1
ok $? "the second run changes no file's content" || diag_file "$T/diff"
"$R/usr/local/sbin/egressd" -t -c "$R/etc/egressd/egressd.conf" >"$T/check" 2>&1
ok $? "egressd -t still passes on the admin's config after the second run" || diag_file "$T/check"

# PREFIX: the units name the programs where they are.
DESTDIR=$T/opt PREFIX=/opt/egd "$INSTALL" "$BUILD_DIR" >"$T/run3" 2>&1
ok $? "install.sh with PREFIX=/opt/egd" || diag_file "$T/run3"
check "PREFIX: egressd in /opt/egd/sbin, and the unit's ExecStart names it" \
    sh -c "test -x '$T/opt/opt/egd/sbin/egressd' && grep -q '^ExecStart=/opt/egd/sbin/egressd ' '$T/opt/opt/egd/lib/systemd/system/egressd.service'"
check "PREFIX: no unit names /usr/local any more" \
    sh -c "! grep -rq /usr/local '$T/opt/opt/egd/lib/systemd/system/'"

DESTDIR=$T/none "$INSTALL" "$T/no-such-build" >"$T/run4" 2>&1
ok $((!$?)) "install.sh refuses a build directory without the programs"
check "... and says to build first" grep -q 'build first' "$T/run4"
check "... having installed nothing" test ! -e "$T/none"
tap_end
