#!/usr/bin/env bash
# cloudinit.t - deploy/image/user-data.yaml, the golden template's cloud-init
# user data: cloud-init's own schema check passes (and fails on a broken
# copy); every tool in the guest is pointed at the proxy, and its resolver at
# egressd's DNS server, with the same files sandboxctl writes; Chromium's and
# Chrome's managed policy turns ECH off; a non-root user, the guest agent
# installed and enabled; no credential of any kind; build-template.sh
# --dry-run has every qm step.  TAP on stdout.  Needs TOP.
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
grep -o '{"/etc/[^"]*"' "$TOP/sandbox-orchestrator/ops_create.c" | tr -d '{"' | sort >"$T/sbx-paths"
"$PY" -c 'import json,sys; print("\n".join(sorted(p for p in json.load(open(sys.argv[1]))["files"] if p != "/etc/environment" and "/policies/managed/" not in p)))' \
    "$T/files.json" >"$T/ud-paths"
check "sandboxctl writes some proxy files ($(wc -l <"$T/sbx-paths"))" test -s "$T/sbx-paths"
check "... and /etc/resolv.conf" grep -qx /etc/resolv.conf "$T/sbx-paths"
diff "$T/sbx-paths" "$T/ud-paths" >"$T/diff" 2>&1
ok $? "the user data writes exactly the files sandboxctl writes (and /etc/environment and the browser policies)" || diag_file "$T/diff"

doc 'any(u != "default" and isinstance(u, dict) and u["name"] != "root" for u in d["users"])' \
    "a non-root user is made"
doc 'all(u.get("lock_passwd") is True for u in d["users"] if isinstance(u, dict))' \
    "every user's password is locked"
doc 'd.get("ssh_pwauth") is False and d.get("disable_root") is True' "no SSH password login, no root login"
doc 'any("qemu-guest-agent" in str(c) and "apt-get install" in str(c) for c in d["runcmd"])' \
    "the guest agent is installed (through the apt proxy) when missing"
doc '["systemctl", "enable", "--now", "qemu-guest-agent"] in d["runcmd"]' "the guest agent is enabled and started"
doc 'not d.get("package_upgrade") and not d.get("package_update")' "a clone boots without refreshing or upgrading packages"

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
step '^\+ qm template 9000$' "qm template"
"$TOP/deploy/image/build-template.sh" --dry-run --vmid 9100 --bridge vmbr7 --proxy 10.7.0.1:3128 >"$T/dry2" 2>&1
check "build-template.sh: --vmid, --bridge and --proxy are used" \
    sh -c "grep -q '^+ qm template 9100\$' '$T/dry2' && grep -q 'bridge=vmbr7,' '$T/dry2' && grep -q 's/10.99.0.1:3128/10.7.0.1:3128/g' '$T/dry2'"
check "build-template.sh: the nameserver follows --proxy's address" grep -qF 's/nameserver 10.99.0.1\$/nameserver 10.7.0.1/' "$T/dry2"
"$TOP/deploy/image/build-template.sh" --dry-run --dns 10.7.0.53 >"$T/dry3" 2>&1
check "build-template.sh: or --dns" grep -qF 's/nameserver 10.99.0.1\$/nameserver 10.7.0.53/' "$T/dry3"
check "... which finds the one nameserver line of the user data" test "$(grep -c 'nameserver 10\.99\.0\.1$' "$UD")" = 1
tap_end
