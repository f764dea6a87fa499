#!/usr/bin/env bash
# tests/sandboxctl/tls.t - the token file must be 0600 (or stricter); the
# server is verified against the CA file or a pinned SHA-256 fingerprint of
# its leaf certificate, never not at all.
set -u
. "$TOP/tests/sandboxctl/lib.sh"

# config_with LINE...: $CONF with the TLS lines replaced.
config_with() {
    sbx_write_config </dev/null
    grep -v -e '^pve-ca-file' -e '^pve-token-file' "$CONF" >"$CONF.new"
    printf '%s\n' "$@" >>"$CONF.new"
    mv "$CONF.new" "$CONF"
}

run_version() {
    local v=$1 out rc pin wrong
    sbx_start "$v" || { ok 1 "PVE $v: simulator and both egressd start"; return; }

    for mode in 644 640 604 660; do
        chmod "$mode" "$T/token"
        out=$(sbx list 2>&1)
        ok "$([ $? -eq 2 ] && grep -q "mode 0$mode lets other users read the API token; it must be 0600 (fix: chmod 600 $T/token)" <<<"$out"; echo $?)" \
            "PVE $v: token file mode $mode is refused, saying the mode and the fix"
    done
    chmod 400 "$T/token"
    check "PVE $v: mode 0400 is accepted" sbx list
    chmod 600 "$T/token"
    check "PVE $v: mode 0600 is accepted" sbx list
    printf 'not-a-token\n' >"$T/token2"
    chmod 600 "$T/token2"
    config_with "pve-ca-file $PVE_SIM_CA" "pve-token-file $T/token2"
    out=$(sbx list 2>&1)
    ok "$([ $? -eq 2 ] && grep -q 'expected one line USER@REALM!TOKENID=SECRET' <<<"$out"; echo $?)" "PVE $v: a malformed token is refused ($out)"
    pve_sim_token_file "$SBX_TOKEN_ID=wrong-secret" "$T/token2"
    out=$(sbx list 2>&1)
    ok "$([ $? -eq 1 ] && grep -q '401' <<<"$out"; echo $?)" "PVE $v: a wrong secret fails with Proxmox's 401 ($out)"

    pin=$PVE_SIM_FINGERPRINT
    config_with "pve-fingerprint $pin" "pve-token-file $T/token"
    out=$(sbx list 2>&1)
    ok $? "PVE $v: the right pin is accepted ($out)"
    wrong=$(python3 -c 'import sys; p = sys.argv[1]; print(p[:-1] + ("0" if p[-1] != "0" else "1"))' "$pin")
    config_with "pve-fingerprint $wrong" "pve-token-file $T/token"
    out=$(sbx list 2>&1)
    rc=$?
    ok "$([ $rc -eq 1 ] && grep -q "has SHA-256 fingerprint $(tr -d : <<<"$pin" | tr A-F a-f), which is not the pinned pve-fingerprint" <<<"$out"; echo $?)" \
        "PVE $v: a wrong pin is refused, naming the fingerprint seen ($out)"
    out=$(openssl x509 -in "$PVE_SIM_CA" -noout -fingerprint -sha256 | sed 's/^.*=//')
    config_with "pve-fingerprint $out" "pve-token-file $T/token"
    out=$(sbx list 2>&1)
    ok "$([ $? -eq 1 ] && grep -q 'not the pinned' <<<"$out"; echo $?)" "PVE $v: pinning the CA instead of the server certificate is refused"
    pve_sim_ctl DELETE calls >/dev/null
    check "PVE $v: a refused server got no request with the token" \
        test "$(pve_sim_ctl GET calls | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 0

    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=other CA" \
        -keyout "$T/other.key" -out "$T/other.pem" >/dev/null 2>&1
    config_with "pve-ca-file $T/other.pem" "pve-token-file $T/token"
    out=$(sbx list 2>&1)
    ok "$([ $? -eq 1 ] && grep -qi 'certificate' <<<"$out"; echo $?)" "PVE $v: a server not signed by pve-ca-file is refused ($out)"
    config_with "pve-ca-file $PVE_SIM_CA" "pve-token-file $T/token"
    check "PVE $v: the right CA file is accepted" sbx list
    config_with "pve-token-file $T/token"
    out=$(sbx list 2>&1)
    ok "$([ $? -eq 2 ] && grep -q "exactly one of 'pve-ca-file' or 'pve-fingerprint'" <<<"$out"; echo $?)" \
        "PVE $v: without a CA file or a pin sandboxctl refuses to start ($out)"
    sbx_stop_all
}

run_version 8
run_version 9
tap_end
