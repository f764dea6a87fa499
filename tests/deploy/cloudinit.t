#!/usr/bin/env bash
# cloudinit.t - deploy/image/user-data.yaml, the golden template's cloud-init
# user data: cloud-init's own schema check passes (and fails on a broken
# copy); every tool in the guest is pointed at the proxy, and its resolver at
# egressd's DNS server, with the same files sandboxctl writes; Chromium's and
# Chrome's managed policy turns ECH off; the user `agent` (sandboxctl's
# guest-user), in no privileged group; the guest agent installed and
# enabled; the agents' tools, Node.js pinned to an LTS release and checked by
# its SHA-256, the three coding agents pinned; their self-updates off; a
# user's npm prefix; no credential of any kind, and no API key, placeholder
# or CA anywhere in deploy/image/; build-template.sh --dry-run has every qm
# step and the build's egressd binding.  (image-agents.t runs the agents'
# script, image-binding.t puts the binding into egressd.)  TAP on stdout.
# Needs TOP.
# shellcheck disable=SC2016 # patterns and child shells' scripts, literally
set -u
TOP=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=tests/tap.sh
. "$TOP/tests/tap.sh"

UD=$TOP/deploy/image/user-data.yaml
T=$(mktemp -d /tmp/deploy-ci.XXXXXX)
trap 'rm -rf "$T"' EXIT
PROXY=http://10.99.0.1:3128
# Debian's python3 (it has yaml) without a version manager's start-up time.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

cloud-init schema --config-file "$UD" >"$T/out" 2>&1
ok $? "cloud-init schema: the user data is valid cloud-config" || diag_file "$T/out"
sed 's/^disable_root: true/disable_root: 5/' "$UD" >"$T/bad.yaml"
cloud-init schema --config-file "$T/bad.yaml" >/dev/null 2>&1
ok $((!$?)) "cloud-init schema: a copy with a wrong type is refused (the check can fail)"
check "the first line is #cloud-config" test "$(head -n1 "$UD")" = "#cloud-config"

# The files the user data writes, as a JSON map path -> content.
"$PY" - "$UD" >"$T/files.json" <<'EOF'
import json, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
json.dump({"files": {f["path"]: f.get("content", "") for f in d.get("write_files", [])},
           "doc": d}, sys.stdout)
EOF
ok $? "the user data parses as YAML"
# file_has PATH PYTHON-REGEX TEXT: the content written to PATH matches.
file_has() {
    "$PY" - "$T/files.json" "$1" "$2" <<'EOF'
import json, re, sys
files = json.load(open(sys.argv[1]))["files"]
sys.exit(0 if sys.argv[2] in files and re.search(sys.argv[3], files[sys.argv[2]], re.M) else 1)
EOF
    ok $? "$3"
}
# doc PYTHON-EXPR TEXT: the expression over the parsed user data `d` holds.
doc() {
    "$PY" - "$T/files.json" "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["doc"]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
    ok $? "$2"
}
p=${PROXY//./\\.}
for v in http_proxy https_proxy HTTP_PROXY HTTPS_PROXY; do
    file_has /etc/environment "^$v=$p\$" "/etc/environment sets $v"
    file_has /etc/profile.d/sandbox-proxy.sh "^export .*\\b$v=$p( |\$)" "profile.d exports $v"
done
file_has /etc/environment '^no_proxy=localhost,127\.0\.0\.1,::1$' "/etc/environment sets no_proxy to loopback only"
file_has /etc/profile.d/sandbox-proxy.sh '\bno_proxy=localhost,127\.0\.0\.1,::1\b' "profile.d exports no_proxy"
file_has /etc/apt/apt.conf.d/95sandbox-proxy "^Acquire::http::Proxy \"$p\";\$" "apt: Acquire::http::Proxy"
file_has /etc/apt/apt.conf.d/95sandbox-proxy "^Acquire::https::Proxy \"$p\";\$" "apt: Acquire::https::Proxy"
file_has /etc/npmrc "^proxy=$p\$" "npm: proxy"
file_has /etc/npmrc "^https-proxy=$p\$" "npm: https-proxy"
file_has /etc/pip.conf "^\\[global\\]\\n(.*\\n)*proxy = $p\$" "pip: [global] proxy"
file_has /etc/gitconfig "^\\[http\\]\\n\\s+proxy = $p\$" "git: http.proxy in /etc/gitconfig"

# The resolver: egressd's DNS server, the one the firewall lets out, and no
# other.
file_has /etc/resolv.conf '^nameserver 10\.99\.0\.1$' "resolv.conf: nameserver 10.99.0.1 (egressd's DNS server)"
file_has /etc/resolv.conf '^options edns0$' "resolv.conf: options edns0"
file_has /etc/resolv.conf '\A(#.*\n)*nameserver 10\.99\.0\.1\noptions edns0\n\Z' "resolv.conf: those two lines and nothing else"
check "cloud-init's resolv_conf module is not used (it does not run on Debian; the file is written whole)" \
    sh -c "! grep -qE '^ *(manage_resolv_conf|resolv_conf|nameservers?):' '$UD'"

# Chromium and Chrome: no GREASE ECH, which egressd would refuse.
for f in /etc/chromium/policies/managed/egressd.json /etc/opt/chrome/policies/managed/egressd.json; do
    "$PY" - "$T/files.json" "$f" <<'EOF2'
import json, sys
files = json.load(open(sys.argv[1]))["files"]
policy = json.loads(files[sys.argv[2]])
sys.exit(0 if isinstance(policy, dict) and policy.get("EncryptedClientHelloEnabled") is False else 1)
EOF2
    ok $? "$f: valid JSON, EncryptedClientHelloEnabled false"
done
"$PY" - "$T/files.json" <<'EOF2' >"$T/bad-policy.json"
import json, sys
d = json.load(open(sys.argv[1]))
d["files"]["/etc/chromium/policies/managed/egressd.json"] = '{"EncryptedClientHelloEnabled": "false"}'
json.dump(d, sys.stdout)
EOF2
"$PY" - "$T/bad-policy.json" /etc/chromium/policies/managed/egressd.json <<'EOF2'
import json, sys
policy = json.loads(json.load(open(sys.argv[1]))["files"][sys.argv[2]])
sys.exit(0 if isinstance(policy, dict) and policy.get("EncryptedClientHelloEnabled") is False else 1)
EOF2
ok $((!$?)) "the policy check refuses the string \"false\" (it can fail)"

# The same paths sandboxctl writes at create (ops_create.c), so its values
# replace these rather than sit beside them.
grep -o '"/etc/[^"]*"' "$TOP/sandbox-orchestrator/ops_create.c" | tr -d '"' | sort -u >"$T/sbx-paths"
# The image's own files, which sandboxctl leaves alone.
IMAGE_FILES='/etc/environment /etc/profile.d/npm-user-prefix.sh /etc/claude-code/managed-settings.json
/etc/gemini-cli/settings.json /etc/codex/config.toml /home/agent/.claude.json'
"$PY" -c 'import json,sys; own = sys.argv[2].split(); print("\n".join(sorted(p for p in json.load(open(sys.argv[1]))["files"] if p not in own and "/policies/managed/" not in p)))' \
    "$T/files.json" "$IMAGE_FILES" >"$T/ud-paths"
check "sandboxctl writes some proxy files ($(wc -l <"$T/sbx-paths"))" test -s "$T/sbx-paths"
check "... and /etc/resolv.conf" grep -qx /etc/resolv.conf "$T/sbx-paths"
diff "$T/sbx-paths" "$T/ud-paths" >"$T/diff" 2>&1
ok $? "the user data writes exactly the files sandboxctl writes (and its own: /etc/environment, the browser policies, the agents' settings, npm's user prefix)" || diag_file "$T/diff"
doc 'not any(p.startswith("/usr/local/share/ca-certificates/") or p == "/etc/profile.d/egressd-credentials.sh" for p in (f["path"] for f in d["write_files"]))' \
    "the user data writes none of the per-sandbox files (the sandbox CA, the placeholders)"

doc 'any(u != "default" and isinstance(u, dict) and u["name"] != "root" for u in d["users"])' \
    "a non-root user is made"
guest_user=$(sed -n 's/.*guest_user = xstrdup("\([^"]*\)").*/\1/p' "$TOP/sandbox-orchestrator/config.c")
check "sandboxctl's default guest-user is agent" test "$guest_user" = agent
doc '[u["name"] for u in d["users"] if isinstance(u, dict)] == ["agent"] and "default" not in d["users"]' \
    "the one user is agent (no distribution default user)"
doc 'all(u.get("shell") == "/bin/bash" and not u.get("no_create_home") and not u.get("homedir") and not u.get("system") for u in d["users"] if isinstance(u, dict))' \
    "agent has a home (/home/agent) and bash, whose login shells read /etc/profile.d"
# unprivileged FILE: no user of FILE has a sudo rule or a privileged group.
unprivileged() {
    "$PY" - "$1" <<'EOF'
import sys, yaml
priv = {"sudo", "adm", "wheel", "admin", "root", "docker", "lxd", "disk", "shadow", "kvm"}
for u in yaml.safe_load(open(sys.argv[1]))["users"]:
    if not isinstance(u, dict):
        continue
    g = u.get("groups") or []
    g = [x.strip() for x in g.split(",")] if isinstance(g, str) else list(g)
    if u.get("sudo") or u.get("doas") or set(g) & priv or u.get("primary_group") in priv:
        sys.exit(1)
EOF
}
unprivileged "$UD"
ok $? "agent has no sudo rule and is in no privileged group"
for bad in '    groups: [sudo]' '    groups: users, adm' '    sudo: "ALL=(ALL) NOPASSWD:ALL"'; do
    sed "s/^    lock_passwd: true\$/&\n$bad/" "$UD" >"$T/priv.yaml"
    unprivileged "$T/priv.yaml"
    ok $((!$?)) "the privilege check finds: ${bad#"${bad%%[! ]*}"}"
done
doc 'all(u.get("lock_passwd") is True for u in d["users"] if isinstance(u, dict))' \
    "every user's password is locked"
doc 'd.get("ssh_pwauth") is False and d.get("disable_root") is True' "no SSH password login, no root login"
doc 'any("qemu-guest-agent" in str(c) and "apt-get install" in str(c) for c in d["runcmd"])' \
    "the guest agent is installed (through the apt proxy) when missing"
doc '["systemctl", "enable", "--now", "qemu-guest-agent"] in d["runcmd"]' "the guest agent is enabled and started"
doc 'not d.get("package_upgrade") and not d.get("package_update")' "a clone boots without refreshing or upgrading packages"

# The agents' script: the runcmd item that installs them.
"$PY" - "$T/files.json" >"$T/agents.sh" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["doc"]
print(next(c[2] for c in d["runcmd"] if isinstance(c, list) and "npm install" in str(c)), end="")
EOF
ok $? "a runcmd item installs the agents with npm"
doc 'd["runcmd"][-1][:2] == ["sh", "-ec"] and "npm install" in d["runcmd"][-1][2]' \
    "it is the last runcmd item, under sh -e: a failure fails cloud-init's run"
# var NAME: the value of NAME="..." (or NAME=...) in the agents' script.
var() { sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" "$T/agents.sh"; }
# pins SCRIPT: the agents' pins are the three packages, each at an exact version.
pins() {
    "$PY" - "$1" <<'EOF'
import re, sys
m = re.search(r'^agents="([^"]*)"$', open(sys.argv[1]).read(), re.M)
specs = m.group(1).split() if m else []
names = sorted(s.rpartition("@")[0] for s in specs)
ok = names == ["@anthropic-ai/claude-code", "@google/gemini-cli", "@openai/codex"] and \
    all(re.fullmatch(r"\d+\.\d+\.\d+", s.rpartition("@")[2]) for s in specs)
sys.exit(0 if ok else 1)
EOF
}
pins "$T/agents.sh"
ok $? "the agents: @anthropic-ai/claude-code, @openai/codex, @google/gemini-cli, each pinned X.Y.Z ($(var agents))"
sed 's|@openai/codex@[0-9.]*|@openai/codex@latest|' "$T/agents.sh" >"$T/agents-latest.sh"
pins "$T/agents-latest.sh"
ok $((!$?)) "the pin check refuses @latest (it can fail)"
# The end-to-end tests of the agents (tests/egressd/agents*.t) run the
# versions the image installs.
tested=$(sed -n -e 's/^EGM_AGENT_PACKAGES=(\(.*\))$/\1/p' -e 's/^EGM_GEMINI_PACKAGE=\(.*\)$/\1/p' \
    "$TOP/tests/egressd/lib-more.sh" | tr ' ' '\n' | sort | tr '\n' ' ')
check "the agents' end-to-end tests run the image's versions ($tested)" \
    test "$tested" = "$(var agents | tr ' ' '\n' | sort | tr '\n' ' ')"
check "they are installed with npm install --global, from those pins" \
    grep -qE '^ +npm_config_nodedir=/usr/local /usr/local/bin/npm install --global .*\$agents$' "$T/agents.sh"
node=$(var node)
major=${node#v}
major=${major%%.*}
check "Node.js is pinned to a release ($node)" grep -qE '^v[0-9]+\.[0-9]+\.[0-9]+$' <<<"$node"
check "... of an LTS line that meets the agents' engines (even major, >= 22: claude-code wants >=22.0.0)" \
    test "$((major % 2))" = 0 -a "$major" -ge 22
check "... with its SHA-256" grep -qE '^[0-9a-f]{64}$' <<<"$(var node_sha256)"
check "... the official linux-x64 tarball from nodejs.org" \
    grep -qF 'curl -fsSL --proto '"'"'=https'"'"' -o "/var/tmp/$d.tar.xz" "https://nodejs.org/dist/$node/$d.tar.xz"' "$T/agents.sh"
check "... checked (sha256sum --check) before it is unpacked" \
    sh -c "grep -n . '$T/agents.sh' | grep -E 'sha256sum --check|tar -xJf' | head -n1 | grep -q sha256sum"
check "... into /usr/local, npm included" grep -qE 'tar -xJf "/var/tmp/\$d\.tar\.xz" -C /usr/local --strip-components=1' "$T/agents.sh"
check "npm reads /etc/npmrc (sandboxctl's), not /usr/local/etc/npmrc" \
    grep -qxF "echo 'globalconfig=/etc/npmrc' >/usr/local/lib/node_modules/npm/npmrc" <(sed 's/^ *//' "$T/agents.sh")
tools=" $(var tools) "
missing=
for p in git tmux build-essential python3 ca-certificates curl jq ripgrep xz-utils; do
    case $tools in *" $p "*) ;; *) missing+=" $p" ;; esac
done
ok "$([ -z "$missing" ]; echo $?)" "the agents' tools are installed:$tools" || diag "missing:$missing"

# The agents' settings: no self-update, no telemetry.
setting() {
    "$PY" - "$T/files.json" "$1" "$2" <<'EOF'
import json, sys, tomllib
text = json.load(open(sys.argv[1]))["files"].get(sys.argv[2], "")
s = tomllib.loads(text) if sys.argv[2].endswith(".toml") else json.loads(text)
sys.exit(0 if eval(sys.argv[3]) else 1)
EOF
    ok $? "$1: $2"
}
setting /etc/claude-code/managed-settings.json 's["env"]["DISABLE_AUTOUPDATER"] == "1" and s["env"]["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"'
setting /etc/gemini-cli/settings.json 's["general"]["enableAutoUpdate"] is False and s["general"]["enableAutoUpdateNotification"] is False and s["privacy"]["usageStatisticsEnabled"] is False and s["security"]["folderTrust"]["enabled"] is False'
setting /home/agent/.claude.json 's["hasCompletedOnboarding"] is True'
setting /etc/codex/config.toml 's["check_for_update_on_startup"] is False'

# npm's user prefix, sourced as a login shell does, by a user and by root.
"$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["files"]["/etc/profile.d/npm-user-prefix.sh"], end="")' \
    "$T/files.json" >"$T/npm-user-prefix.sh"
mkdir -p "$T/bin1000" "$T/bin0"
printf '#!/bin/sh\necho 1000\n' >"$T/bin1000/id"
printf '#!/bin/sh\necho 0\n' >"$T/bin0/id"
chmod +x "$T/bin1000/id" "$T/bin0/id"
out=$(env -i HOME=/home/agent PATH="$T/bin1000:/usr/bin:/bin" sh -c '. "$1"; . "$1"; echo "$NPM_CONFIG_PREFIX|$PATH"' sh "$T/npm-user-prefix.sh")
check "a user: NPM_CONFIG_PREFIX=~/.local and ~/.local/bin first in PATH, once ($out)" \
    test "$out" = "/home/agent/.local|/home/agent/.local/bin:$T/bin1000:/usr/bin:/bin"
out=$(env -i HOME=/root PATH="$T/bin0:/usr/bin:/bin" sh -c '. "$1"; echo "${NPM_CONFIG_PREFIX-unset}|$PATH"' sh "$T/npm-user-prefix.sh")
check "root: npm's own prefix, PATH unchanged ($out)" test "$out" = "unset|$T/bin0:/usr/bin:/bin"

# The user data's shell: shellcheck (lists are split on purpose: SC2086;
# the sourced proxy file is the guest's: SC1091).
"$PY" - "$T/files.json" "$T" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
n = 0
for c in j["doc"]["runcmd"]:
    if isinstance(c, list) and c[0] == "sh":
        n += 1
        open(f"{sys.argv[2]}/runcmd{n}.sh", "w").write("#!/bin/sh\n" + c[2])
for p, text in j["files"].items():
    if p.endswith(".sh"):
        open(f"{sys.argv[2]}/{p.rsplit('/', 1)[1]}", "w").write("#!/bin/sh\n" + text)
EOF
for f in "$T"/runcmd*.sh "$T/sandbox-proxy.sh" "$T/npm-user-prefix.sh"; do
    shellcheck -s sh -e SC2086,SC1091 "$f" >"$T/sc.out" 2>&1
    ok $? "shellcheck: $(basename "$f")" || diag_file "$T/sc.out"
done

# No credential baked in: no password or hash, no key, no token.
creds() {
    grep -nE 'passwd:|password|plain_text_passwd|hashed_passwd|chpasswd|\$[0-9a-z]+\$|ssh_authorized_keys|ssh-(rsa|ed25519|dss)|ecdsa-sha2|BEGIN [A-Z ]*PRIVATE|PVEAPIToken|token|secret|api[_-]?key' "$1" |
        grep -vE '^[0-9]+: *#|lock_passwd: true'
}
bad=$(creds "$UD")
ok "$([ -z "$bad" ]; echo $?)" "no password, hash, SSH key, token or secret in the user data"
[ -z "$bad" ] || diag "$bad"
# shellcheck disable=SC2016 # a password hash, literally
for leak in '    passwd: $6$rounds=4096$abc$def' '    ssh_authorized_keys: [ssh-ed25519 AAAAC3Nz]' \
            '  - path: /root/.config/token'; do
    { cat "$UD"; echo "$leak"; } >"$T/leak.yaml"
    check "the credential check finds: $leak" test -n "$(creds "$T/leak.yaml")"
done

# Nowhere in deploy/image/: an API key's value, a placeholder, a token, a CA
# (those are per sandbox: sandboxctl writes them at create).
keys() {
    grep -rnE '[A-Z_]*(API_KEY|_TOKEN)=[^ ]|egressd-ph-|BEGIN CERTIFICATE|sk-ant-|ghp_' "$1"
}
bad=$(keys "$TOP/deploy/image")
ok "$([ -z "$bad" ]; echo $?)" "no API key, token, placeholder or certificate in deploy/image/"
[ -z "$bad" ] || diag "$bad"
cp -R "$TOP/deploy/image" "$T/image"
for leak in 'ANTHROPIC_API_KEY=egressd-ph-anthropic-0123' 'export GH_TOKEN=x' '-----BEGIN CERTIFICATE-----'; do
    cp "$UD" "$T/image/user-data.yaml"
    printf '      %s\n' "$leak" >>"$T/image/user-data.yaml"
    check "the check finds: $leak" test -n "$(keys "$T/image")"
done

# The golden image's qm steps.
"$TOP/deploy/image/build-template.sh" --dry-run >"$T/dry" 2>&1
ok $? "build-template.sh --dry-run runs" || diag_file "$T/dry"
step() { grep -qE -- "$1" "$T/dry"; ok $? "build-template.sh: $2"; }
step '^\+ qm create 9000 ' "qm create 9000"
step '--scsi0 local-lvm:0,import-from=[^ ]*debian-12-genericcloud-amd64\.qcow2' "scsi0 imported from the Debian 12 cloud image"
step '--ide2 local-lvm:cloudinit' "a cloud-init drive"
step '--agent enabled=1' "guest agent on"
step '--net0 virtio,bridge=vmbr99,firewall=1' "net0 on vmbr99 with firewall=1"
step '--serial0 socket --vga serial0' "serial console"
step '--cicustom user=local:snippets/' "the user data as the template's cicustom"
step 'sha512sum -c' "the image is checked against Debian's SHA512SUMS"
step '9000\.fw /etc/pve/firewall/9000\.fw' "the template's firewall file is installed"
step '^\+ qm set 9000 --protection 1' "protection on"
step "^\\+ curl .*--unix-socket /run/egressd/admin.sock .*-X PUT .*\"addresses\":\\[\"10\\.99\\.0\\.9\"\\],\"policy\":\"balanced\",\"allow\":\\[\"nodejs\\.org\"\\],\"expires\":\"[0-9T:-]+Z\"\\}' http://egressd/v1/sandboxes/template-9000\$" \
    "the build address bound in egressd: balanced and nodejs.org, with an expiry"
step '^\+ qm guest exec 9000 --timeout 1800 -- cloud-init status --wait$' "cloud-init's end awaited"
step 'runuser -u agent -- env -i HOME=.* sh -ec .*node --version; claude --version; codex --version; gemini --version' \
    "the agents run as agent"
step 'rm -rf /root/.npm /root/.cache ' "npm's cache is not left in the template"
order=$(grep -nE '^\+ (curl .*-X (PUT|DELETE)|qm (start|shutdown|template)) ' "$T/dry" | sed -E 's/^[0-9]+:\+ (curl .*-X ([A-Z]+)|qm ([a-z]+)) .*/\2\3/' | tr '\n' ' ')
check "bound before the boot, unbound after the shutdown, before qm template ($order)" \
    test "$order" = "PUT start shutdown DELETE template "
step '^\+ qm template 9000$' "qm template"
"$TOP/deploy/image/build-template.sh" --dry-run --vmid 9100 --bridge vmbr7 --proxy 10.7.0.1:3128 \
    --build-ip 10.7.0.9/24 --build-policy open --admin-socket /run/e2/admin.sock >"$T/dry2" 2>&1
check "build-template.sh: --vmid, --bridge and --proxy are used" \
    sh -c "grep -q '^+ qm template 9100\$' '$T/dry2' && grep -q 'bridge=vmbr7,' '$T/dry2' && grep -q 's/10.99.0.1:3128/10.7.0.1:3128/g' '$T/dry2'"
check "build-template.sh: --build-ip, --build-policy and --admin-socket make the binding" \
    grep -qE -- "--unix-socket /run/e2/admin.sock .*\"addresses\":\\[\"10\\.7\\.0\\.9\"\\],\"policy\":\"open\".* http://egressd/v1/sandboxes/template-9100\$" "$T/dry2"
"$TOP/deploy/image/build-template.sh" --dry-run --build-policy 'x"y' >/dev/null 2>&1
check "build-template.sh: a preset name that is not one is refused (exit 2)" test $? = 2
check "build-template.sh: the nameserver follows --proxy's address" grep -qF 's/nameserver 10.99.0.1\$/nameserver 10.7.0.1/' "$T/dry2"
"$TOP/deploy/image/build-template.sh" --dry-run --dns 10.7.0.53 >"$T/dry3" 2>&1
check "build-template.sh: or --dns" grep -qF 's/nameserver 10.99.0.1\$/nameserver 10.7.0.53/' "$T/dry3"
check "... which finds the one nameserver line of the user data" test "$(grep -c 'nameserver 10\.99\.0\.1$' "$UD")" = 1
tap_end
