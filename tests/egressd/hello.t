#!/usr/bin/env bash
# hello.t - every ClientHello of a tunnel is checked, not only the first.
# After a HelloRetryRequest the client sends a second ClientHello; one that
# names another host (or none, or carries ECH, or is not a ClientHello at
# all) closes the tunnel before any of it reaches the origin, however it is
# sent: alone, after a change_cipher_spec or 0-RTT data, split over
# records, or ahead of the server's answer; on CONNECT and on the
# transparent TLS port.  A real retry (openssl s_server offering P-256
# only, curl and openssl s_client offering X25519 first) goes through.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
egd_host 127.0.0.28 retry.test
egd_host 127.0.0.29 real.test
egd_allow 'retry.test:4443' 'real.test:4443'
egd_origin a.test b.test || egm_bail "the origins start"
egm_server "$T/hrrd.out" python3 -u "$EGD_DIR/hrrd.py" --log "$T/hrrd.log" 127.0.0.28:4443 ||
    egm_bail "hrrd.py (a server that always asks for a retry) starts"
egd_cert real.test || egm_bail "a certificate for real.test"
openssl s_server -accept 127.0.0.29:4443 -cert "$T/certs/real.test.pem" -key "$T/certs/real.test.key" \
    -groups P-256 -tls1_3 -www -quiet >"$T/s_server.out" 2>&1 &
EGD_PIDS+=($!)
egd_start || egm_bail "egressd starts"

CONNECT='send:CONNECT retry.test:4443 HTTP/1.1\r\nHost: retry.test:4443\r\n\r\n'
# hello NAME ARGS...: the curl capture as one record, rewritten (rawclient.py hello).
hello() { raw hello "$EGD_HELLOS/curl.bin" "$T/$1.bin" "${@:2}"; }
hello h1 --sni retry.test
hello same --sni retry.test
hello other --sni b.test
hello nosni --no-sni
hello ech --sni retry.test --ech
hello upper --sni Retry.TEST
# split IN OUT: the one record of IN as two records (payload cut in the middle).
split() {
    py - "$1" "$2" <<'EOF'
import struct, sys
rec = open(sys.argv[1], "rb").read()
body = rec[5:]
cut = len(body) // 2
out = b""
for part in (body[:cut], body[cut:]):
    out += b"\x16\x03\x01" + struct.pack(">H", len(part)) + part
open(sys.argv[2], "wb").write(out)
EOF
}
split "$T/other.bin" "$T/other2.bin"
split "$T/same.bin" "$T/same2.bin"
printf '\x14\x03\x03\x00\x01\x01' >"$T/ccs.bin"
printf '\x17\x03\x03\x00\x05early' >"$T/early.bin"
printf '\x18\x03\x03\x00\x02\x01\x00' >"$T/junk.bin"
cat "$T/h1.bin" "$T/other.bin" >"$T/both.bin"
# The HRR and the change_cipher_spec hrrd.py answers with: 5 + 4 + 50 + 32 (session id) + 6.
HRR_LEN=$(py -c 'import sys; d=open(sys.argv[1],"rb").read(); print(5 + 4 + 2 + 32 + 1 + d[5+4+34] + 2 + 1 + 2 + 12 + 6)' "$T/h1.bin")

# attempt TEXT TO STEPS...: through egressd (TO: connect or tls), with
# hrrd.py logging what reached it; sets $R (rawclient's output), $S (its
# status) and $H (hrrd.py's line for the connection).
attempt() {
    local to=$1 n
    shift
    n=$(cat "$T/hrrd.log" 2>/dev/null | wc -l)
    R=$T/r.out S=$T/r.status
    if [ "$to" = connect ]; then
        raw --timeout 5 --out "$R" --status "$S" "$EGD_PROXY" "$CONNECT" head "$@" >/dev/null 2>&1
    else
        raw --timeout 5 --out "$R" --status "$S" "$EGD_TLS" "$@" >/dev/null 2>&1
    fi
    for _ in $(seq 100); do
        [ "$(cat "$T/hrrd.log" 2>/dev/null | wc -l)" -gt "$n" ] && break
        sleep 0.05
    done
    H=$(sed -n "$((n + 1))p" "$T/hrrd.log")
}
# refused TEXT REASON: the last attempt was closed by egressd, logged REASON,
# and nothing of the later hello reached the server.
refused() {
    check "$1: egressd closes the tunnel ($(awk '{ print $1 }' "$S"))" \
        test "$(awk '{ print $1 }' "$S")" = eof
    ok_json "  no later ClientHello reached the server" "$H" 'l["first"] == "retry.test" and l["hellos"] == []'
    egd_log_ok "  logged deny $2" 'l["host"] == "retry.test"' \
        "l['decision'] == 'deny' and l['reason'] == '$2' and l['sni'] == 'retry.test'"
}

# --- the second hello names the same host: it reaches the server.
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/same.bin" sleep:0.3
ok_json "CONNECT, a retry naming the same host: it reaches the server" "$H" \
    'l["first"] == "retry.test" and l["hellos"] == ["retry.test"] and l["types"] == [22]'
egd_log_ok "  logged allow" 'l["host"] == "retry.test"' 'l["decision"] == "allow"'
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/ccs.bin" "file:$T/same2.bin" sleep:0.3
ok_json "CONNECT, change_cipher_spec then the same host in two records: all of it reaches the server" "$H" \
    'l["hellos"] == ["retry.test"] and l["types"] == [20, 22, 22]'

# --- the second hello names another host.
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/other.bin" eof
refused "CONNECT, a retry naming b.test" sni_mismatch
check_resp "  the client got the HelloRetryRequest and nothing more" "$R" \
    'len(r) == 1 and len(r[0]["body"]) == '"$HRR_LEN"
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/ccs.bin" "file:$T/other.bin" eof
refused "CONNECT, change_cipher_spec, then a retry naming b.test" sni_mismatch
ok_json "  the change_cipher_spec did reach the server" "$H" 'l["types"] == [20] and l["after"] == 6'
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/early.bin" "file:$T/other.bin" eof
refused "CONNECT, 0-RTT data, then a retry naming b.test" sni_mismatch
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/other2.bin" eof
refused "CONNECT, a retry naming b.test split over two records" sni_mismatch
egd_log_mark
attempt connect "file:$T/both.bin" eof
check "CONNECT, the second hello sent along with the first, before any answer: egressd closes the tunnel ($(awk '{ print $1 }' "$S"))" \
    test "$(awk '{ print $1 }' "$S")" = eof
ok_json "  nothing reached the server: the pair is refused before a byte is written" "$H" \
    'l["first"] is None and l["after"] == 0'
egd_log_ok "  logged deny sni_mismatch" 'l["host"] == "retry.test"' \
    "l['decision'] == 'deny' and l['reason'] == 'sni_mismatch'"
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/nosni.bin" eof
refused "CONNECT, a retry without a server_name" sni_mismatch
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/ech.bin" eof
refused "CONNECT, a retry with an encrypted_client_hello (ech deny)" ech
egd_log_mark
attempt connect "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/junk.bin" "file:$T/same.bin" eof
refused "CONNECT, a record that is not TLS (type 24) before the retry" not_tls

# --- the transparent TLS port (not redirected: retry.test:4443).
egd_log_mark
attempt tls "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/other.bin" eof
refused "transparent TLS, a retry naming b.test" sni_mismatch
egd_log_mark
attempt tls "file:$T/h1.bin" "read:$HRR_LEN" "file:$T/same.bin" sleep:0.3
ok_json "transparent TLS, a retry naming the same host: it reaches the server" "$H" \
    'l["hellos"] == ["retry.test"]'

# --- the log's sni is the name as the hello sent it, the host as judged
egd_log_mark
attempt connect "file:$T/upper.bin" sleep:0.3
ok_json "CONNECT retry.test with a hello naming Retry.TEST: it reaches the server" "$H" 'l["first"] == "Retry.TEST"'
egd_log_ok "  logged allow, host retry.test, sni Retry.TEST as sent" 'l["host"] == "retry.test"' \
    'l["decision"] == "allow" and l["sni"] == "Retry.TEST"'
egd_log_mark
attempt tls "file:$T/upper.bin" sleep:0.3
egd_log_ok "transparent TLS, a hello naming Retry.TEST: host retry.test, sni Retry.TEST" \
    'l["host"] == "retry.test" and l["mode"] == "tls"' 'l["decision"] == "allow" and l["sni"] == "Retry.TEST"'
egd_log_mark
attempt tls "file:$T/h1.bin" sleep:0.3
egd_log_ok "transparent TLS, a hello naming retry.test: sni retry.test" \
    'l["host"] == "retry.test" and l["mode"] == "tls"' 'l["decision"] == "allow" and l["sni"] == "retry.test"'
# --- a real retry: s_server takes P-256 only, the clients offer X25519 first.
egd_log_mark
body=$(egd_curl -x "http://$EGD_PROXY" --curves X25519:P-256 "https://real.test:4443/" 2>"$T/curl.err")
check "curl through CONNECT to a server that asks for a retry: its page ($(head -c 60 <<<"$body" | tr -d '\n'))" \
    grep -q 's_server' <<<"$body"
egd_env openssl s_client -proxy "$EGD_PROXY" -connect real.test:4443 -servername real.test \
    -CAfile "$EGD_CA" -groups X25519:P-256 -msg -verify_return_error </dev/null >"$T/s_client.out" 2>&1
check "openssl s_client through CONNECT: it sent two ClientHellos (a real retry), and the handshake completed" \
    sh -c "[ \$(grep -c '>>> .*ClientHello' '$T/s_client.out') -eq 2 ] && grep -q 'Verify return code: 0 (ok)' '$T/s_client.out'"
egd_env openssl s_client -connect "$EGD_TLS" -servername real.test -CAfile "$EGD_CA" -groups X25519:P-256 \
    -msg -verify_return_error </dev/null >"$T/s_client2.out" 2>&1
check "openssl s_client to the transparent port, the same retry: completed" \
    sh -c "[ \$(grep -c '>>> .*ClientHello' '$T/s_client2.out') -eq 2 ] && grep -q 'Verify return code: 0 (ok)' '$T/s_client2.out'"
egd_log_ok "  logged allow, with bytes both ways" 'l["host"] == "real.test" and l["mode"] == "tls"' \
    'l["decision"] == "allow" and l["bytes_up"] > 0 and l["bytes_down"] > 0'

egd_finish
tap_end
