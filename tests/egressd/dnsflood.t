#!/usr/bin/env bash
# dnsflood.t - a DNS flood costs neither the disk nor another sandbox its
# answers (dnsflood.py): sandbox "flood" sends UDP queries for random
# names as fast as it can for 5 s while sandbox "quiet" asks 22 names the
# way a stub resolver does (a timeout, then the query again); quiet gets
# every answer, the access log grows by little, and the queries refused
# by flood's rate are counted on a line per interval (reason limit, the
# count) whose counts add up to egressd_dns_queries_total's.  The same for
# a source without a binding (reason not_allowed).
# TAP on stdout.  Needs BUILD_DIR, TOP; runs in its own netns.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"

DNS=127.0.0.1:5353
FLOOD_ADDR=127.0.0.5 # sandbox "flood"
UNBOUND=127.0.0.6    # no binding
QUIET_ADDR=127.0.0.7 # sandbox "quiet"
LOG_MAX=$((2 * 1024 * 1024)) # what a flood may add to the access log
FL=(py "$EGD_DIR/dnsflood.py")
names=()
for i in $(seq -w 1 22); do
    egd_host "127.0.0.$((16 + 10#$i % 8))" "n$i.quiet.test"
    names+=("n$i.quiet.test")
done
egd_allow '.quiet.test'
NAMES=$(IFS=,; echo "${names[*]}")

egd_start "dns $DNS" 'dns-log-interval 2s' || egm_bail "egressd starts with a dns listener"
for sb in "flood $FLOOD_ADDR" "quiet $QUIET_ADDR"; do
    set -- $sb
    egd_put "$1" "{\"id\":\"$1\",\"owner\":\"o-$1\",\"addresses\":[\"$2\"],\"policy\":\"test\"}" \
        >/dev/null || egm_bail "PUT sandbox $1"
done

log_size() { stat -c %s "$T/access.log" 2>/dev/null || echo 0; }
# quiet_resolve: sandbox quiet asks the 22 names over 4 s, each up to 3
# times, 2 s apart; the result as JSON.
quiet_resolve() {
    "${FL[@]}" resolve --server "$DNS" --source "$QUIET_ADDR" --names "$NAMES" --spread 4 \
        --timeout 2 --tries 3
}
QUIET_OK='l["answered"] == 22 and all(l["rcodes"][n] == 0 and len(l["addrs"][n]) == 1 for n in l["rcodes"])'
# tally_sum PYEXPR N: the sum of the counts of the lines after the mark
# where PYEXPR holds, once it is N (or 8 s pass: the lines come every
# dns-log-interval).
tally_sum() {
    py - "$T/access.log" "$EGD_LOG_MARK" "$1" "$2" <<'EOF'
import json, sys, time
path, mark, expr, want = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
end, seen, total, rest = time.monotonic() + 8, 0, 0, b""
with open(path, "rb") as f:
    while True:
        lines = (rest + f.read()).split(b"\n")
        rest = lines.pop()  # a line without its newline yet is not written
        for raw in lines:
            seen += 1
            if seen <= mark:
                continue
            try:
                l = json.loads(raw)
                if eval(expr):
                    total += l["count"]
            except Exception:
                pass
        if total == want or time.monotonic() > end:
            break
        time.sleep(0.1)
print(total)
EOF
}
ok_json "before any flood, sandbox quiet resolves all 22 names" "$(quiet_resolve)" "$QUIET_OK"

# --- sandbox flood, 5 s, while sandbox quiet asks
egd_log_mark
size0=$(log_size)
rate0=$(egd_metric 'egressd_dns_queries_total{result="rate_limited"}')
"${FL[@]}" flood --server "$DNS" --source "$FLOOD_ADDR" --seconds 5 --sockets 4 >"$T/flood.json" &
FLOOD_PID=$!
sleep 0.5
quiet=$(quiet_resolve)
wait "$FLOOD_PID"
diag "flood: $(cat "$T/flood.json")"
diag "quiet: $(py -c 'import json, sys; l = json.loads(sys.argv[1]); print(l["answered"], "of", l["asked"], "answered,", l["tries"], "tries")' "$quiet")"
ok_json "during sandbox flood's flood, sandbox quiet resolves all 22 names" "$quiet" "$QUIET_OK"
grown=$(($(log_size) - size0))
ok $((grown > LOG_MAX)) "the access log grew by at most $((LOG_MAX / 1024)) KiB ($grown bytes)"
rate1=$(egd_metric 'egressd_dns_queries_total{result="rate_limited"}')
limited=$((rate1 - rate0))
ok $((!(limited > 1000))) "most of the flood was past sandbox flood's rate ($limited queries)"
sum=$(tally_sum 'l["mode"] == "dns" and l["reason"] == "limit" and l["sandbox"] == "flood"' "$limited")
ok $((sum != limited)) "  the lines of reason limit count them all ($sum of $limited)"
egm_lines_ok "  a line per key and interval: the source, REFUSED, the count; no name" \
    "$(egm_log_lines 'l["mode"] == "dns" and l["reason"] == "limit"')" \
    'len(ls) <= 8 and all(l["sandbox"] == "flood" and l["owner"] == "o-flood" and l["src"] == "127.0.0.5" and l["answer"] == "REFUSED" and l["decision"] == "deny" and l["host"] is None and l["method"] is None and l["count"] >= 1 for l in ls)'

# --- a source without a binding, 3 s
egd_log_mark
size0=$(log_size)
ref0=$(egd_metric 'egressd_dns_queries_total{result="refused"}')
"${FL[@]}" flood --server "$DNS" --source "$UNBOUND" --seconds 3 --sockets 4 >"$T/unbound.json"
diag "unbound: $(cat "$T/unbound.json")"
grown=$(($(log_size) - size0))
ok $((grown > LOG_MAX)) "a source without a binding, 3 s: the access log grew by at most $((LOG_MAX / 1024)) KiB ($grown bytes)"
ref1=$(egd_metric 'egressd_dns_queries_total{result="refused"}')
refused=$((ref1 - ref0))
ok $((!(refused > 1000))) "  its queries were REFUSED ($refused)"
sum=$(tally_sum 'l["mode"] == "dns" and l["reason"] == "not_allowed" and l["src"] == "127.0.0.6"' "$refused")
ok $((sum != refused)) "  the lines of reason not_allowed count them all ($sum of $refused)"
egm_lines_ok "  sandbox default, the source, REFUSED, the count; no name" \
    "$(egm_log_lines 'l["mode"] == "dns" and l["reason"] == "not_allowed"')" \
    'len(ls) <= 8 and all(l["sandbox"] == "default" and l["owner"] is None and l["src"] == "127.0.0.6" and l["answer"] == "REFUSED" and l["host"] is None for l in ls)'
ok_json "afterwards sandbox quiet resolves all 22 names" "$(quiet_resolve)" "$QUIET_OK"

egd_finish
tap_end
