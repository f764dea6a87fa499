#!/usr/bin/env bash
# egressctl check / explain against real files: the shipped presets, a
# config full of mistakes, sandbox bindings, GeoIP rules and report mode.
# TAP on stdout.  Needs BUILD_DIR (a meson build); the MaxMind test databases
# come from MMDB_DIR (default DATA_DIR/mmdb, DATA_DIR default tests/data).
set -u
ctl=$BUILD_DIR/proxy/egressctl
top=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
mmdb=${MMDB_DIR:-${DATA_DIR:-$top/tests/data}/mmdb}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }
# expect NAME WANT_RC PATTERN... -- CMD...: exit status and every pattern in the output
expect() {
    local name=$1 want=$2 pats=() out rc=0
    shift 2
    while [ "$1" != -- ]; do pats+=("$1"); shift; done
    shift
    out=$("$@" 2>&1) || rc=$?
    local bad=0 p
    [ "$rc" -eq "$want" ] || { bad=1; echo "# exit $rc, wanted $want"; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" <<<"$out" || { bad=1; echo "# missing: $p"; }
    done
    [ "$bad" -eq 0 ] || sed 's/^/#   /' <<<"$out"
    ok "$bad" "$name"
}

# --- the shipped configuration and presets
cp -r "$top/deploy/policies" "$tmp/policies"
cp "$top/deploy/egressd.conf" "$tmp/egressd.conf"
conf=$tmp/egressd.conf
bal=$tmp/policies/balanced.allow
line_of() { grep -n -- "^$1\b" "$2" | head -n1 | cut -d: -f1; }

expect "check: the shipped config and presets are valid" 0 \
    "OK: 3 presets" "default-policy balanced" -- "$ctl" check -c "$conf"
expect "explain: balanced allows github.com:443 by its line" 0 \
    "verdict   allow allowed rule $bal:$(line_of github.com "$bal")" -- "$ctl" explain -c "$conf" github.com
expect "explain: balanced allows git over SSH, raw" 0 "[raw]" \
    -- "$ctl" explain -c "$conf" github.com:22
expect "explain: balanced allows objects.githubusercontent.com" 0 "allow allowed" \
    -- "$ctl" explain -c "$conf" objects.githubusercontent.com
for host in pypi.org files.pythonhosted.org registry.npmjs.org crates.io static.crates.io \
            index.crates.io proxy.golang.org sum.golang.org repo.maven.apache.org rubygems.org \
            deb.debian.org archive.ubuntu.com registry-1.docker.io api.anthropic.com \
            api.openai.com generativelanguage.googleapis.com gitlab.com codeload.github.com; do
    expect "explain: balanced allows $host" 0 "verdict   allow allowed" \
        -- "$ctl" explain -c "$conf" "$host"
done
expect "explain: balanced denies example.com: no rule matched" 1 \
    "verdict   deny not_allowed: no rule matched: default deny" -- "$ctl" explain -c "$conf" example.com
expect "explain: balanced denies github.com:8080" 1 "deny not_allowed" \
    -- "$ctl" explain -c "$conf" github.com:8080
expect "explain: a name resolving into 169.254.169.254 is private_range" 1 \
    "address 169.254.169.254 deny private_range" -- "$ctl" explain -c "$conf" github.com --addr 169.254.169.254
expect "explain: the first bad address decides" 1 "address 140.82.112.3 allow" \
    "address 10.1.1.1 deny private_range" "verdict   deny private_range" \
    -- "$ctl" explain -c "$conf" github.com --addr 140.82.112.3 --addr 10.1.1.1
expect "explain: locked allows nothing" 1 "preset    locked" "no rule matched" \
    -- "$ctl" explain -c "$conf" --preset locked github.com
expect "explain: open allows a public literal" 0 "address 93.184.216.34 allow" \
    -- "$ctl" explain -c "$conf" --preset open 93.184.216.34
expect "explain: open still denies 127.0.0.1" 1 "deny private_range" \
    -- "$ctl" explain -c "$conf" --preset open 127.0.0.1:80
expect "explain: open denies [::ffff:10.0.0.1]" 1 "deny private_range" \
    -- "$ctl" explain -c "$conf" --preset open '[::ffff:10.0.0.1]'
for bad in 2130706433 0x7f.1 0177.0.0.1 'exa mple.com' 'b_d.example'; do
    expect "explain: '$bad' is bad_host" 1 "verdict   deny bad_host" \
        -- "$ctl" explain -c "$conf" --preset open "$bad"
done

# --- a sandbox binding as the admin API takes it
cat >"$tmp/sb.json" <<'JSON'
{"id":"101","name":"agent-alice-1","owner":"alice","addresses":["10.99.0.11"],
 "policy":"locked","allow":["pypi.org","files.pythonhosted.org:443"],
 "expires":"2026-11-30T09:00:00Z"}
JSON
expect "explain --sandbox: an extra line allows, named by the sandbox" 0 \
    "verdict   allow allowed rule sandbox 101:1" -- "$ctl" explain -c "$conf" --sandbox "$tmp/sb.json" pypi.org
expect "explain --sandbox: the extra's ports hold" 1 "deny not_allowed" \
    -- "$ctl" explain -c "$conf" --sandbox "$tmp/sb.json" files.pythonhosted.org:80
echo '{"id":"7","policy":"locked","allow":["deny github.com", 5]}' >"$tmp/bad.json"
expect "explain --sandbox: a non-string line is named" 2 "allow[1] is not a string" \
    -- "$ctl" explain -c "$conf" --sandbox "$tmp/bad.json" github.com
echo '{"id":"7","policy":"locked","allow":["deny github.com"]}' >"$tmp/bad.json"
expect "explain --sandbox: a deny line is refused, with its place" 2 \
    "sandbox 7:1:1: 'deny' is not allowed" -- "$ctl" explain -c "$conf" --sandbox "$tmp/bad.json" github.com
echo '{"id":"7","policy":"nope"}' >"$tmp/bad.json"
expect "explain --sandbox: an unknown preset is named" 2 "found 'nope': no such preset" \
    -- "$ctl" explain -c "$conf" --sandbox "$tmp/bad.json" github.com
echo '{"id":' >"$tmp/bad.json"
expect "explain --sandbox: broken JSON names the file, line and column" 2 "$tmp/bad.json:2:0: unexpected token" \
    -- "$ctl" explain -c "$conf" --sandbox "$tmp/bad.json" github.com

# --- until, report mode, geo
mkdir -p "$tmp/geo/p"
cat >"$tmp/geo/p/temp.allow" <<'EOF2'
pypi.org until 2026-12-01T00:00Z
EOF2
cat >"$tmp/geo/p/watch.allow" <<'EOF2'
mode report
github.com
EOF2
cat >"$tmp/geo/p/rep.allow" <<'EOF2'
mode report
example.com
deny ip 1.2.3.0/24
EOF2
cat >"$tmp/geo/p/geo.allow" <<'EOF2'
*
deny country SE
deny asn 209
EOF2
cat >"$tmp/geo/egressd.conf" <<EOF2
listen 127.0.0.1:3128
policy-dir p
default-policy temp
geoip-country $mmdb/GeoIP2-Country-Test.mmdb
geoip-asn $mmdb/GeoLite2-ASN-Test.mmdb
EOF2
gconf=$tmp/geo/egressd.conf
expect "explain --at: an until rule holds before its time" 0 "allow allowed" \
    -- "$ctl" explain -c "$gconf" --at 2026-11-30T23:59:59Z pypi.org
expect "explain --at: and has expired at its time" 1 "no rule matched" \
    -- "$ctl" explain -c "$gconf" --at 2026-12-01T00:00:00Z pypi.org
expect "explain: report mode says would_deny and exits 0" 0 "preset    watch (mode report)" \
    "verdict   would_deny not_allowed" -- "$ctl" explain -c "$gconf" --preset watch example.com
# Any deny wins, in either order: the private range denies even in report
# mode, beside an address the ip rule would deny.
for order in "1.2.3.4 10.0.0.1" "10.0.0.1 1.2.3.4"; do
    read -r a1 a2 <<<"$order"
    expect "explain: report mode, --addr $a1 --addr $a2: deny private_range, exit 1" 1 \
        "address 1.2.3.4 would_deny deny_rule" "verdict   deny private_range" \
        -- "$ctl" explain -c "$gconf" --preset rep example.com --addr "$a1" --addr "$a2"
done
expect "explain: deny country SE on 89.160.20.112" 1 \
    "deny geo rule $tmp/geo/p/geo.allow:2 country SE asn 29518" \
    -- "$ctl" explain -c "$gconf" --preset geo cdn.example --addr 89.160.20.112
expect "explain: deny asn 209 on 216.160.83.56" 1 "deny geo rule $tmp/geo/p/geo.allow:3" \
    -- "$ctl" explain -c "$gconf" --preset geo cdn.example --addr 216.160.83.56
expect "explain: 81.2.69.142 (GB) passes the geo rules" 0 "allow allowed" "country GB" \
    -- "$ctl" explain -c "$gconf" --preset geo cdn.example --addr 81.2.69.142

# --- a configuration and presets full of mistakes: every one is reported
mkdir -p "$tmp/bad/p"
cat >"$tmp/bad/p/a.allow" <<'EOF2'
github.com:70000
include b
deny country ZZ
~^(open
EOF2
printf 'include a\nip 10.0.0.1/8\n' >"$tmp/bad/p/b.allow"
cat >"$tmp/bad/egressd.conf" <<'EOF2'
lisen 127.0.0.1:3128
listen localhost:3128
listen 127.0.0.1:3128
timeout-idle 5 minutes
timeout-connect forever
workers many
policy-dir p
default-policy missing
deny-range 10.0.0.0/33
EOF2
bconf=$tmp/bad/egressd.conf
expect "check: every config error, with file:line" 1 \
    "$bconf:1: unknown directive 'lisen'; did you mean 'listen'?" \
    "$bconf:2: expected a numeric ADDR:PORT to listen on" \
    "$bconf:4: expected one value after 'timeout-idle', found 2" \
    "$bconf:5: expected a duration such as 500ms, 5s, 10m or 24h, found 'forever'" \
    "$bconf:6: expected 'auto' or a number of workers 1..256, found 'many'" \
    -- "$ctl" check -c "$bconf"
sed -i '1,6d' "$bconf"
sed -i '1i listen 127.0.0.1:3128' "$bconf"
expect "check: every policy error, with file:line:col" 1 \
    "p/a.allow:1:12: expected a port 1..65535 (or ':*' for any port), found '70000'" \
    "p/a.allow:3:14: expected a country code (ISO 3166-1 alpha-2, such as KP), found 'ZZ'" \
    "p/a.allow:4:8: regular expression error at offset 6: missing closing parenthesis" \
    "p/b.allow:2:4: expected a network address (host bits zero) for /8, found '10.0.0.1/8'" \
    "include cycle" \
    "$bconf:4: expected a prefix length of 0..32 after '/' (or 'default'), found '10.0.0.0/33'" \
    -- "$ctl" check -c "$bconf"
printf 'listen 127.0.0.1:3128\npolicy-dir p\ndefault-policy missing\n' >"$bconf"
printf 'github.com\n' >"$tmp/bad/p/a.allow"
rm "$tmp/bad/p/b.allow"
expect "check: default-policy naming no preset" 1 "default-policy 'missing' names no preset" \
    -- "$ctl" check -c "$bconf"
printf 'listen 127.0.0.1:3128\npolicy-dir nowhere\n' >"$bconf"
expect "check: a missing policy-dir is named" 1 "nowhere: policy-dir: No such file or directory" \
    -- "$ctl" check -c "$bconf"
expect "check: a missing config file is named" 1 "$tmp/none.conf: cannot open: No such file" \
    -- "$ctl" check -c "$tmp/none.conf"
printf 'policy-dir p\nadmin 127.0.0.1:9000\n' >"$bconf"
expect "check: whole-file rules (a listener; a token for TCP admin)" 1 \
    "no listener" "admin on a TCP address needs admin-token-file" -- "$ctl" check -c "$bconf"
expect "usage: no -c is a usage error" 2 "-c egressd.conf is required" -- "$ctl" check
expect "usage: an unknown command" 2 "usage: egressctl" -- "$ctl" frobnicate -c "$conf"
expect "usage: a bad port" 2 "expected HOST[:PORT]" -- "$ctl" explain -c "$conf" github.com:0
echo "1..$n"
