#!/usr/bin/env bash
# The shape of the source that the design rests on (docs/design.md), checked
# on the tree as it is: TAP on stdout.
#  - One decision: egressd's code decides on a destination only through
#    policy_decide / policy_decide_request / policy_decide_addrs
#    (policy/decide.c), never by running
#    the name and address phases itself, which is how six copies came to
#    disagree.  (policy_decide_name_any, the DNS server's question about any
#    port, is a question of its own.)
set -u
top=${TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 1
n=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi; }

# --- one decision
calls=$(grep -nE '\bpolicy_decide_(name|addr)\s*\(' proxy/*.c sandbox-orchestrator/*.c 2>/dev/null)
[ -z "$calls" ] || sed 's/^/# a phase run on its own: /' <<<"$calls"
ok "$([ -z "$calls" ]; echo $?)" "egressd decides only through policy_decide (no phase run alone)"
users=$(grep -lE '\bpolicy_decide(_addrs|_request)?\s*\(' proxy/*.c | xargs -n1 basename | sort | paste -sd' ')
want="admin.c dnsrule.c egressctl.c hello.c judge.c logins.c revoke.c"
[ "$users" = "$want" ] || echo "# policy_decide is called from: $users (expected $want)"
ok "$([ "$users" = "$want" ]; echo $?)" "the seven places that judge a destination all call policy_decide"

# --- the include graph of proxy/
graph=$(python3 "$top/tests/source/includes.py" "$top/proxy")
rc=$?
grep '^cycle:' <<<"$graph" | sed 's/^/# /'
ok "$rc" "proxy/: no include cycles among its headers"

# --- conn.c names no phase
phases="accept answer client exchange hello identity intercept judge rehello relay request revoke upgrade upstream"
hub=
for p in $phases; do
    [ -f "$top/proxy/$p.h" ] || hub+=" $p.h(missing)"
    grep -q "^$p\.c: .*\b$p\.h\b" <<<"$graph" || hub+=" $p.c(not including $p.h)"
    for f in conn.c conn.h; do
        grep -qE "^$f: .*\b$p\.h\b" <<<"$graph" && hub+=" $f->$p.h"
    done
done
[ -z "$hub" ] || echo "# not a pipeline:$hub"
ok "$([ -z "$hub" ]; echo $?)" "proxy/: every phase has its header, and conn.c/conn.h include none of them"

echo "1..$n"
