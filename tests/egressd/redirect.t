#!/usr/bin/env bash
# redirect.t - transparent TLS and HTTP as a firewall really feeds them:
# nftables redirects a client's connections (from 127.0.0.2 only, so
# egressd's own upstream connections are left alone) to egressd's
# transparent ports, and egressd reads the original destination with
# SO_ORIGINAL_DST.  The name (SNI or Host) must resolve to that
# destination, which is where egressd then connects: a ClientHello naming
# an allowed host sent to another host's address is domain fronting.
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
egd_netns "$@"
egd_setup || bail "set-up: temp dir, test CA, hosts, preset"
egd_origin a.test b.test denied.test || bail "the origins start"
egd_start || bail "egressd starts"
ip addr add 127.0.0.2/8 dev lo 2>/dev/null

nft -f - <<EOF || bail "nftables: redirect 127.0.0.2's ports 4443 and 8000 to egressd"
table ip egdtest {
    chain out {
        type nat hook output priority -100;
        ip saddr 127.0.0.2 tcp dport $EGD_HTTPS_PORT redirect to :${EGD_TLS#*:}
        ip saddr 127.0.0.2 tcp dport $EGD_HTTP_PORT redirect to :${EGD_PLAIN#*:}
    }
}
EOF
ok 0 "nftables redirects 127.0.0.2's ports $EGD_HTTPS_PORT and $EGD_HTTP_PORT to egressd"

# cl NAME ADDR PORT CURL-ARGS...: curl from 127.0.0.2, with NAME:PORT
# resolved to ADDR by curl itself (the client's own idea of the name).
cl() {
    local name=$1 addr=$2 port=$3
    shift 3
    egd_curl --interface 127.0.0.2 --resolve "$name:$port:$addr" "$@"
}

egd_log_mark
body=$(cl a.test 127.0.0.16 "$EGD_HTTPS_PORT" "https://a.test:$EGD_HTTPS_PORT/hello")
check "TLS to a.test's address, redirected: a.test answers through egressd" \
    test "$body" = "hello from a.test"
egd_log_ok "TLS redirected: logged as mode tls, allowed, upstream the original destination" \
    'l["mode"] == "tls" and l["sni"] == "a.test"' \
    'l["decision"] == "allow" and l["upstream"] == "127.0.0.16:4443" and l["src"].startswith("127.0.0.2:")'

egd_log_mark
cl a.test 127.0.0.17 "$EGD_HTTPS_PORT" "https://a.test:$EGD_HTTPS_PORT/hello" >/dev/null 2>&1
ok $((!$?)) "TLS naming a.test sent to b.test's address: refused"
egd_log_ok "fronting by address: logged deny sni_mismatch, nothing connected" \
    'l["mode"] == "tls" and l["sni"] == "a.test"' \
    'l["decision"] == "deny" and l["reason"] == "sni_mismatch" and l["upstream"] is None'
check "fronting by address: b.test's origin saw no ClientHello for a.test" \
    test "$(origin_log_count "o['event'] == 'hello' and o['sni'] == 'a.test' and o['local'].startswith('127.0.0.17:')")" = 0

egd_log_mark
cl denied.test 127.0.0.18 "$EGD_HTTPS_PORT" "https://denied.test:$EGD_HTTPS_PORT/hello" >/dev/null 2>&1
ok $((!$?)) "TLS to a host the policy does not allow, redirected: refused"
egd_log_ok "not allowed: logged deny not_allowed with its SNI" \
    'l["mode"] == "tls" and l["sni"] == "denied.test"' \
    'l["decision"] == "deny" and l["reason"] == "not_allowed"'

egd_log_mark
body=$(cl a.test 127.0.0.16 "$EGD_HTTP_PORT" "http://a.test:$EGD_HTTP_PORT/hello")
check "HTTP to a.test, redirected: a.test answers through egressd" \
    test "$body" = "hello from a.test"
egd_log_ok "HTTP redirected: logged as mode plain, allowed, upstream the original destination" \
    'l["mode"] == "plain" and l["host"] == "a.test"' \
    'l["decision"] == "allow" and l["upstream"] == "127.0.0.16:8000" and l["status"] == 200'

egd_log_mark
code=$(cl a.test 127.0.0.17 "$EGD_HTTP_PORT" -o /dev/null -w '%{http_code}' "http://a.test:$EGD_HTTP_PORT/hello")
check "HTTP with Host a.test sent to b.test's address: 403" test "$code" = 403
egd_log_ok "Host not where the connection goes: logged deny bad_host" \
    'l["mode"] == "plain" and l["host"] == "a.test"' \
    'l["decision"] == "deny" and l["reason"] == "bad_host" and l["status"] == 403'

nft delete table ip egdtest
egd_finish
tap_end
