#!/usr/bin/env bash
# transparent.t - egressd's transparent listeners.  TLS: the real
# ClientHellos of tests/data/clienthello sent as they are to the TLS port
# (their SNI decides: allowed ones reach the origin, whose ServerHello comes
# back; the others get the access_denied alert), a real TLS client through
# it, no SNI, not TLS.  HTTP: origin-form requests decided on Host.  TAP on
# stdout.  Needs BUILD_DIR, TOP (DATA_DIR or CLIENTHELLO_DIR: another copy of
# the data).
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
[ -f "$EGD_HELLOS/README.md" ] || bail "the ClientHello samples ($EGD_HELLOS) are there"

# The samples and their SNI, from the data's README: rows "| `FILE` | CLIENT | `SNI` |".
mapfile -t samples < <(awk -F'|' '{ f = $2; n = $4; gsub(/[` ]/, "", f); gsub(/[` ]/, "", n) }
    f ~ /\.bin$/ && n != "" { print f, n }' "$EGD_HELLOS/README.md")
[ "${#samples[@]}" -ge 8 ] || bail "the README names the samples (found ${#samples[@]})"
# wget's name is simply not allowed, git's is denied by a rule; the others are
# allowed on the upstream port.  Each name gets an address and an origin.
declare -A sni_of addr_of
names=()
i=22
for s in "${samples[@]}"; do
    f=${s%% *}
    n=${s#* }
    [ "$n" = "(none)" ] && n=
    sni_of[$f]=$n
    [ -n "$n" ] || continue
    addr_of[$n]=127.0.0.$i
    egd_host "127.0.0.$i" "$n"
    names+=("$n")
    i=$((i + 1))
    case $f in
        wget.bin) ;;
        git.bin) egd_allow "$n:$EGD_HTTPS_PORT" "deny $n:*" ;;
        *) egd_allow "$n:$EGD_HTTPS_PORT" ;;
    esac
done
[ -n "${sni_of[wget.bin]:-}" ] && [ -n "${sni_of[git.bin]:-}" ] && [ -z "${sni_of[opensslnosni.bin]-x}" ] ||
    bail "the README gives wget.bin and git.bin a name and opensslnosni.bin none"
egd_origin a.test b.test denied.test "${names[@]}" || bail "the origins start"
egd_start || bail "egressd starts and answers /healthz"
R=$T/resp

# --- the real ClientHellos, as they are
for s in "${samples[@]}"; do
    f=${s%% *}
    n=${sni_of[$f]}
    [ -n "$n" ] || continue
    [ "$f" = wget.bin ] || [ "$f" = git.bin ] && continue
    size=$(stat -c %s "$EGD_HELLOS/$f")
    rule=$(egd_rule "$n")
    egd_log_mark
    raw --out "$R" --status "$R.st" "$EGD_TLS" "file:$EGD_HELLOS/$f" read:5 >/dev/null 2>&1
    check "$f ($n): the origin's ServerHello record comes back (16 03)" \
        py -c "import sys; sys.exit(open('$R', 'rb').read()[:2] != b'\x16\x03')"
    check "$f ($n): the origin saw this ClientHello's name" \
        test "$(origin_log_count "o['event'] == 'hello' and o['sni'] == '$n' and o['local'] == '${addr_of[$n]}:$EGD_HTTPS_PORT'")" -ge 1
    egd_log_ok "$f ($n): logged tls allow, $rule, upstream ${addr_of[$n]}:$EGD_HTTPS_PORT" \
        "l['mode'] == 'tls' and l['sni'] == '$n'" \
        "l['decision'] == 'allow' and l['reason'] == 'allowed' and l['host'] == '$n' and l['port'] == $EGD_HTTPS_PORT and l['rule'] == '$rule' and l['upstream'] == '${addr_of[$n]}:$EGD_HTTPS_PORT' and l['bytes_up'] >= $size and l['bytes_down'] > 0 and l['sandbox'] == 'default'"
done

# tls_denied TEXT FILE_STEP REASON RULE MATCH: exactly the alert, then close.
tls_denied() {
    local text=$1 step=$2 reason=$3 rule=$4 match=$5 want_rule=None
    [ -n "$rule" ] && want_rule="'$rule'"
    egd_log_mark
    raw --out "$R" --status "$R.st" "$EGD_TLS" "$step" eof >/dev/null 2>&1
    check "$text: the access_denied alert, then close" \
        py -c "import sys; sys.exit(not (open('$R', 'rb').read().hex() == '$EGD_ALERT' and open('$R.st').read().split()[0] == 'eof'))"
    egd_log_ok "$text: logged tls deny $reason, rule ${rule:-null}" "$match" \
        "l['mode'] == 'tls' and l['decision'] == 'deny' and l['reason'] == '$reason' and l['rule'] == $want_rule"
}
n=${sni_of[wget.bin]}
tls_denied "wget.bin ($n, not allowed)" "file:$EGD_HELLOS/wget.bin" not_allowed "" \
    "l['sni'] == '$n' and l['host'] == '$n'"
n=${sni_of[git.bin]}
tls_denied "git.bin ($n, a deny rule)" "file:$EGD_HELLOS/git.bin" deny_rule "$(egd_rule deny "$n")" \
    "l['sni'] == '$n' and l['host'] == '$n'"
tls_denied "opensslnosni.bin (no server_name)" "file:$EGD_HELLOS/opensslnosni.bin" no_sni "" \
    "l['mode'] == 'tls' and l['sni'] is None"
tls_denied "a plain HTTP request on the TLS port" 'send:GET / HTTP/1.1\r\nHost: a.test\r\n\r\n' not_tls "" \
    "l['mode'] == 'tls' and l['reason'] != 'allowed'"
check "the denied names' origins saw no ClientHello" \
    test "$(origin_log_count "o['event'] == 'hello' and o['sni'] in ('${sni_of[wget.bin]}', '${sni_of[git.bin]}')")" = 0

# --- a real TLS client through the transparent port
egd_log_mark
body=$(egd_curl --connect-to "a.test:$EGD_HTTPS_PORT:${EGD_TLS%:*}:${EGD_TLS#*:}" "https://a.test:$EGD_HTTPS_PORT/hello")
ok $? "curl https to the transparent TLS port: exit 0 (certificate verified)"
check "curl https to the transparent TLS port: a.test's body" test "$body" = "hello from a.test"
egd_log_ok "curl https to the transparent TLS port: logged tls allow, $(egd_rule a.test)" \
    "l['mode'] == 'tls' and l['sni'] == 'a.test'" \
    "l['decision'] == 'allow' and l['rule'] == '$(egd_rule a.test)' and l['bytes_up'] > 0 and l['bytes_down'] > 0"

# --- transparent HTTP, decided on Host
egd_log_mark
raw --out "$R" "$EGD_PLAIN" 'send:GET /hello HTTP/1.1\r\nHost: a.test:8000\r\nConnection: close\r\n\r\n' eof >/dev/null 2>&1
check_resp "plain: GET /hello with Host a.test:8000: 200 and the origin's body" \
    "$R" 'r[0]["status"] == 200 and r[0]["body"] == "hello from a.test\n"'
egd_log_ok "plain: logged plain allow GET a.test:8000, $(egd_rule a.test), 200" \
    "l['mode'] == 'plain' and l['host'] == 'a.test'" \
    "l['decision'] == 'allow' and l['method'] == 'GET' and l['port'] == 8000 and l['rule'] == '$(egd_rule a.test)' and l['status'] == 200 and l['upstream'] == '127.0.0.16:8000' and l['bytes_up'] > 0 and l['bytes_down'] > 0"

egd_log_mark
out=$(egd_curl --connect-to "a.test:$EGD_HTTP_PORT:${EGD_PLAIN%:*}:${EGD_PLAIN#*:}" "http://a.test:$EGD_HTTP_PORT/echo")
ok $? "plain: curl to the transparent HTTP port: exit 0"
check "plain: forwarded in origin form with Host a.test:8000" \
    test "$(printf '%s\n' "$out" | head -n 2 | tr -d '\r' | tr '\n' '|')" = "GET /echo HTTP/1.1|Host: a.test:8000|"

egd_log_mark
raw --out "$R" "$EGD_PLAIN" 'send:GET /hello HTTP/1.1\r\nHost: denied.test:8000\r\n\r\n' head >/dev/null 2>&1
check_resp "plain: Host denied.test: 403, X-Egress-Deny: not_allowed, the body says so" \
    "$R" 'r[0]["status"] == 403 and r[0]["h"].get("x-egress-deny") == "not_allowed" and r[0]["body"] == "egressd: denied (not_allowed): denied.test:8000\n"'
egd_log_ok "plain: logged plain deny not_allowed, 403" "l['mode'] == 'plain' and l['host'] == 'denied.test'" \
    "l['decision'] == 'deny' and l['reason'] == 'not_allowed' and l['rule'] is None and l['status'] == 403"

egd_log_mark
raw --out "$R" "$EGD_PLAIN" 'send:GET /hello HTTP/1.1\r\nHost: loop.test:8000\r\n\r\n' head >/dev/null 2>&1
check_resp "plain: Host loop.test (127.0.0.1): 403 private_range" \
    "$R" 'r[0]["status"] == 403 and r[0]["h"].get("x-egress-deny") == "private_range" and r[0]["body"] == "egressd: denied (private_range): loop.test:8000\n"'
egd_log_ok "plain: logged plain deny private_range" "l['mode'] == 'plain' and l['host'] == 'loop.test'" \
    "l['decision'] == 'deny' and l['reason'] == 'private_range' and l['status'] == 403"

egd_log_mark
raw --out "$R" "$EGD_PLAIN" 'send:GET /hello HTTP/1.1\r\n\r\n' head >/dev/null 2>&1
check_resp "plain: HTTP/1.1 without Host: 400 bad_request" \
    "$R" 'r[0]["status"] == 400 and r[0]["h"].get("x-egress-deny") == "bad_request"'
egd_log_ok "plain: logged plain deny bad_request, 400" "l['mode'] == 'plain'" \
    "l['decision'] == 'deny' and l['reason'] == 'bad_request' and l['status'] == 400"

egd_log_mark
raw --out "$R" "$EGD_PLAIN" 'send:GET /hello HTTP/1.1\r\nHost: b.test:8000\r\n\r\nGET /hello HTTP/1.1\r\nHost: denied.test:8000\r\nConnection: close\r\n\r\n' eof >/dev/null 2>&1
check_resp "plain: kept alive, b.test then denied.test: 200 then 403" \
    "$R" 'len(r) == 2 and r[0]["status"] == 200 and r[0]["body"] == "hello from b.test\n" and r[1]["status"] == 403'
check "plain: two log lines for the two requests" \
    test "$(egd_log_wait "l['mode'] == 'plain' and l['host'] == 'denied.test'" >/dev/null; egd_log_count "l['mode'] == 'plain'")" = 2

v=$(egd_metric 'egressd_connections_total{mode="tls",decision="allow"}')
check "metrics: connections_total tls allow is $((${#names[@]} - 2 + 1)) (got ${v:-none})" test "$v" = $((${#names[@]} - 2 + 1))

egd_finish
tap_end
