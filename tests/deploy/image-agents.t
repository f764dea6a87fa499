#!/usr/bin/env bash
# image-agents.t - the golden template's agents script (the last runcmd item
# of deploy/image/user-data.yaml) run here, under sh -e as cloud-init runs
# it, with its paths moved into a scratch root and apt, dpkg-query, curl,
# node and npm replaced by stand-ins that log what they are asked: a
# tarball whose SHA-256 is not the pinned one is refused and nothing is
# unpacked; with a matching one the tools are installed, Node.js unpacked
# into the prefix (its LICENSE kept under share/doc), npm pointed at
# /etc/npmrc, and the three pinned agents installed once, through the
# proxy, against Node's own headers; run again, as in a clone, it asks
# nothing of apt, curl or npm; a changed pin installs again.  TAP on stdout.
# Needs TOP.
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

UD=$TOP/deploy/image/user-data.yaml
T=$(mktemp -d /tmp/deploy-agents.XXXXXX)
trap 'rm -rf "$T"' EXIT
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
R=$T/root # the guest's / for the script
S=$T/bin  # the stand-ins, first in PATH
L=$T/log  # what they were asked, one file each
mkdir -p "$R/etc/profile.d" "$R/usr/local" "$R/var/tmp" "$S" "$L"

# The script and the proxy file it sources, from the user data.
"$PY" - "$UD" "$T/agents.sh" "$R/etc/profile.d/sandbox-proxy.sh" <<'EOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
open(sys.argv[2], "w").write(next(c[2] for c in d["runcmd"] if isinstance(c, list) and "npm install" in str(c)))
open(sys.argv[3], "w").write(next(f["content"] for f in d["write_files"] if f["path"] == "/etc/profile.d/sandbox-proxy.sh"))
EOF
ok $? "the agents' script and the proxy file are in the user data" || bail "no script to run"
var() { sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$T/agents.sh"; }
node=$(var node)
agents=$(var agents)
tools=$(var tools)
check "it pins a Node.js version ($node) and agents ($agents)" test -n "$node" -a -n "$agents"
# The guest's paths, moved under $R (/etc/npmrc is text the script writes).
sed -e "s|/usr/local|$R/usr/local|g" -e "s|/var/tmp|$R/var/tmp|g" \
    -e "s|/etc/profile.d/sandbox-proxy.sh|$R/etc/profile.d/sandbox-proxy.sh|g" "$T/agents.sh" >"$T/run.sh"

# The stand-ins.  dpkg-query: "installed" for the packages in $R/installed.
cat >"$S/dpkg-query" <<EOF
#!/bin/sh
for p; do :; done
grep -qx "\$p" "$R/installed" 2>/dev/null && printf 'install ok installed'
EOF
cat >"$S/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>"$L/apt"
[ "\$1" = install ] || exit 0
for p; do case \$p in -*|install) ;; *) echo "\$p" >>"$R/installed" ;; esac; done
EOF
# curl: hands out $T/served whatever the URL.
cat >"$S/curl" <<EOF
#!/bin/sh
echo "\$*" >>"$L/curl"
while [ \$# -gt 1 ]; do [ "\$1" = -o ] && cp "$T/served" "\$2"; shift; done
EOF
chmod +x "$S"/*

# The tarball served: node-VERSION-linux-x64/ with a node that knows its
# version and reads a package.json's version for `node -p`, and an npm that
# logs its arguments and environment and "installs" each NAME@VERSION.
d=node-$node-linux-x64
mkdir -p "$T/tar/$d/bin" "$T/tar/$d/lib/node_modules/npm" "$T/tar/$d/include/node" "$T/tar/$d/share/doc/node"
cat >"$T/tar/$d/bin/node" <<EOF
#!/bin/sh
case \$1 in
    --version) echo $node ;;
    -p) f=\$(printf '%s' "\$2" | sed -n "s/^require('\\(.*\\)').version\$/\\1/p")
        sed -n 's/.*"version": *"\\([^"]*\\)".*/\\1/p' "\$f" 2>/dev/null | grep . ;;
    *) exit 1 ;;
esac
EOF
cat >"$T/tar/$d/bin/npm" <<EOF
#!/bin/sh
echo "\$* | nodedir=\${npm_config_nodedir-} https_proxy=\${https_proxy-}" >>"$L/npm"
for a; do
    case \$a in
        @*/*@*) n=\${a%@*}; mkdir -p "$R/usr/local/lib/node_modules/\$n"
                printf '{"name": "%s", "version": "%s"}\n' "\$n" "\${a##*@}" >"$R/usr/local/lib/node_modules/\$n/package.json" ;;
    esac
done
EOF
chmod +x "$T/tar/$d/bin/node" "$T/tar/$d/bin/npm"
echo '{"name": "npm", "version": "10.0.0"}' >"$T/tar/$d/lib/node_modules/npm/package.json"
echo '/* node.h */' >"$T/tar/$d/include/node/node.h"
echo 'the licence' >"$T/tar/$d/LICENSE"
echo readme >"$T/tar/$d/README.md"
echo changes >"$T/tar/$d/CHANGELOG.md"
command -v xz >/dev/null || bail "xz (xz-utils), which the script's tar -J needs, is installed"
tar -cJf "$T/served" -C "$T/tar" "$d" || bail "xz: the test tarball"
sum=$(sha256sum "$T/served" | cut -d' ' -f1)

# go SCRIPT: run it as cloud-init does (sh -e), in a clean environment.
go() {
    env -i PATH="$S:/usr/bin:/bin" HOME="$T/home" sh -ec "$(cat "$1")" >"$T/out" 2>&1
}
count() { [ -f "$L/$1" ] && wc -l <"$L/$1" || echo 0; }

# 1. The served tarball is not the pinned one: refused, nothing unpacked.
go "$T/run.sh"
ok $((!$?)) "a tarball whose SHA-256 is not the pinned one fails the script" || diag_file "$T/out"
check "... after sha256sum said so" grep -q 'FAILED' "$T/out"
check "... and nothing is unpacked" test ! -e "$R/usr/local/bin/node"
check "... and npm never runs" test "$(count npm)" = 0
check "... the tools were installed first, all of them, after an index update" \
    test "$(sed -n 1p "$L/apt" 2>/dev/null)" = update -a \
    "$(sed -n 2p "$L/apt" 2>/dev/null)" = "install -y --no-install-recommends $tools"
check "... it asked for the official tarball over HTTPS only" \
    grep -qxF -- "-fsSL --proto =https -o $R/var/tmp/$d.tar.xz https://nodejs.org/dist/$node/$d.tar.xz" "$L/curl"

# 2. The served tarball is pinned (in a copy of the script).
sed "s/^node_sha256=.*/node_sha256=$sum/" "$T/run.sh" >"$T/run-pinned.sh"
rm -f "$L"/*
go "$T/run-pinned.sh"
ok $? "with the pinned tarball the script succeeds" || diag_file "$T/out"
check "apt is not asked again for tools that are there" test "$(count apt)" = 0
check "Node.js is unpacked into the prefix" test "$("$R/usr/local/bin/node" --version)" = "$node"
check "... with its headers (include/node) and npm" \
    test -f "$R/usr/local/include/node/node.h" -a -f "$R/usr/local/lib/node_modules/npm/package.json"
check "... its LICENSE under share/doc/node" grep -qx 'the licence' "$R/usr/local/share/doc/node/LICENSE"
check "... and no README, CHANGELOG or LICENSE in the prefix" \
    test ! -e "$R/usr/local/LICENSE" -a ! -e "$R/usr/local/README.md" -a ! -e "$R/usr/local/CHANGELOG.md"
check "... and the tarball removed" test -z "$(ls "$R/var/tmp")"
check "npm's builtin config names /etc/npmrc as its global config" \
    test "$(cat "$R/usr/local/lib/node_modules/npm/npmrc" 2>/dev/null)" = "globalconfig=/etc/npmrc"
check "npm ran once" test "$(count npm)" = 1
check "... install --global of exactly the pinned agents" \
    grep -qF "install --global --no-fund --no-audit --no-update-notifier $agents |" "$L/npm"
check "... against Node's own headers (nodedir is the prefix)" grep -qF "| nodedir=$R/usr/local " "$L/npm"
check "... through the proxy (the sourced profile.d file)" grep -qE 'https_proxy=http://10\.99\.0\.1:3128$' "$L/npm"

# 3. Again, as in a clone: everything is there.
rm -f "$L"/*
go "$T/run-pinned.sh"
ok $? "run again (a clone's first boot) it succeeds" || diag_file "$T/out"
check "... and asks nothing of apt, curl or npm" test "$(count apt)$(count curl)$(count npm)" = 000

# 4. A changed pin: npm again, Node.js not.
sed 's|@openai/codex@[0-9.]*|@openai/codex@0.0.1|' "$T/run-pinned.sh" >"$T/run-bumped.sh"
go "$T/run-bumped.sh"
ok $? "a changed agent pin succeeds" || diag_file "$T/out"
check "... installs the agents again, and fetches no Node.js" test "$(count npm)$(count curl)" = 10
check "... the new pin" grep -qF '@openai/codex@0.0.1' "$L/npm"

# 5. A missing tool: apt again, all of them.
grep -vx jq "$R/installed" >"$T/installed" && mv "$T/installed" "$R/installed"
rm -f "$L"/*
go "$T/run-pinned.sh"
ok $? "a missing tool succeeds" || diag_file "$T/out"
check "... updates the index and installs the tools" \
    test "$(tr '\n' '|' <"$L/apt")" = "update|install -y --no-install-recommends $tools|"
tap_end
