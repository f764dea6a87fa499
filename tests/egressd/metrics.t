#!/usr/bin/env bash
# metrics.t - egressd's /metrics after some traffic (allowed and denied, two
# sandboxes): `promtool check metrics` passes, docs/design.md's families are there
# with their types and only their bounded labels (no host name or address
# anywhere), the counts agree with the access log, and a real Prometheus
# server scrapes it and answers queries with the same series.  TAP on
# stdout.  Needs BUILD_DIR, TOP; runs itself in a network
# namespace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-more.sh"
egd_netns "$@"
egd_setup || egm_bail "set-up: temp dir, test CA, hosts, preset"
PROM_ADDR=127.0.0.1:9090
P=http://$EGD_PROXY

egd_origin a.test b.test || egm_bail "the origins start"
egd_start || egm_bail "egressd starts and answers /healthz"
check "admin: PUT sandbox 501 (frank, 127.0.0.2)" egd_put 501 \
    '{"id":"501","name":"agent-frank-1","owner":"frank","addresses":["127.0.0.2"],"policy":"test"}'

# ---- traffic: 9 connections or requests, each one access-log line
egd_log_mark
n=0
t() { egd_curl -o /dev/null -x "$P" "$@" 2>/dev/null; n=$((n + 1)); }
t https://a.test:4443/hello                            # default: allow connect
t https://a.test:4443/bytes/5000                       # default: allow connect
t http://a.test:8000/hello                             # default: allow http
t https://denied.test:4443/hello                       # default: deny not_allowed
t http://loop.test:8000/hello                          # default: deny private_range
t https://blocked.test:4443/hello                      # default: deny deny_rule
t --interface 127.0.0.2 https://b.test:4443/hello      # 501: allow connect
t --interface 127.0.0.2 http://b.test:8000/bytes/777   # 501: allow http
t --interface 127.0.0.2 https://denied.test:4443/x     # 501: deny not_allowed
for ((i = 0; i < 100; i++)); do
    [ "$(egd_log_count True)" -ge "$n" ] && break
    sleep 0.05
done
check "the $n requests are in the access log" test "$(egd_log_count True)" -eq "$n"
sleep 0.3

page_head=$(curl -q -sS --noproxy '*' -m 5 -D - -o "$T/metrics.txt" "http://$EGD_METRICS/metrics")
check "GET /metrics: 200, Content-Type text/plain; version=0.0.4" \
    sh -c 'printf "%s" "$1" | head -n 1 | grep -q " 200" &&
           printf "%s" "$1" | grep -qiE "^content-type: text/plain; *version=0\.0\.4"' sh "$page_head"

promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1
rc=$?
ok $rc "promtool check metrics passes (exit $rc)"
diag_file "$T/promtool.out" 20

# ---- families, types, labels
python3 - "$T/metrics.txt" "$T/hosts" >"$T/families.out" 2>&1 <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
types, series = {}, []
lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
for line in text.splitlines():
    m = re.match(r"# TYPE (\S+) (\S+)$", line)
    if m:
        types[m.group(1)] = m.group(2)
    elif line and not line.startswith("#"):
        s = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)", line)
        series.append((s.group(1), dict(lab.findall(s.group(2) or "")), float(s.group(3))))
want = {
    "egressd_connections_total": ("counter", {"sandbox", "owner", "mode", "decision", "reason"}),
    "egressd_active_connections": ("gauge", {"sandbox", "owner"}),
    "egressd_bytes_total": ("counter", {"sandbox", "owner", "direction"}),
    "egressd_upstream_connect_seconds": ("histogram", set()),
    "egressd_dns_lookups_total": ("counter", {"result"}),
    "egressd_policy_reloads_total": ("counter", {"result"}),
    "egressd_policy_rules": ("gauge", {"preset"}),
    "egressd_sandboxes": ("gauge", set()),
    "egressd_build_info": ("gauge", {"version"}),
}
bad = []
for fam, (typ, labels) in want.items():
    if types.get(fam) != typ:
        bad.append("family %s: TYPE %s, expected %s" % (fam, types.get(fam), typ))
    names = [fam + x for x in ("_bucket", "_sum", "_count")] if typ == "histogram" else [fam]
    got = [s for s in series if s[0] in names]
    if not got:
        bad.append("family %s: no series" % fam)
    for name, ls, _ in got:
        keys = set(ls) - ({"le"} if name.endswith("_bucket") else set())
        if keys != labels:
            bad.append("%s: labels %s, expected %s" % (name, sorted(keys), sorted(labels)))
print("families:", len(types), "series:", len(series))
# Bounded label values.
reasons = set("allowed not_allowed deny_rule private_range geo sni_mismatch no_sni not_tls ech "
              "bad_host bad_request dns_fail connect_fail timeout limit revoked "
              "credential_host_mismatch upstream_tls".split())
allowed = {"mode": {"connect", "http", "tls", "plain", "intercept"}, "decision": {"allow", "deny", "would_deny"},
           "reason": reasons, "direction": {"up", "down"}, "sandbox": {"default", "501"},
           "owner": {"", "frank"}}
for name, ls, _ in series:
    for k, v in ls.items():
        if k in allowed and v not in allowed[k]:
            bad.append("%s: %s=%r is not one of the bounded values" % (name, k, v))
# No host name or address anywhere in the page.
for line in open(sys.argv[2]):
    for word in line.split():
        if word in text:
            bad.append("the page holds %r (from the hosts file)" % word)
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
EOF
ok $? "docs/design.md's families with their types and exactly their label names; label values bounded; no host name or address in the page"
diag_file "$T/families.out" 20

# ---- build_info: the version meson built (project() in meson.build)
version=$(meson introspect "$BUILD_DIR" --projectinfo |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
check "egressd_build_info{version=\"$version\"}: meson's project version" \
    grep -qxF "egressd_build_info{version=\"$version\"} 1" "$T/metrics.txt"

# ---- the counts agree with the access log
python3 - "$T/metrics.txt" "$T/access.log" >"$T/agree.out" 2>&1 <<'EOF'
import collections, json, re, sys
lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
page = collections.Counter()
byt = collections.Counter()
for line in open(sys.argv[1]):
    s = re.match(r"(egressd_connections_total|egressd_bytes_total)\{(.*)\}\s+(\S+)", line)
    if not s:
        continue
    ls = dict(lab.findall(s.group(2)))
    if s.group(1) == "egressd_connections_total":
        k = (ls["sandbox"], ls["owner"], ls["mode"], ls["decision"], ls["reason"])
        page[k] += float(s.group(3))
    else:
        byt[(ls["sandbox"], ls["owner"], ls["direction"])] += float(s.group(3))
log = collections.Counter()
lbyt = collections.Counter()
for raw in open(sys.argv[2]):
    l = json.loads(raw)
    o = l["owner"] or ""
    log[(l["sandbox"], o, l["mode"], l["decision"], l["reason"])] += 1
    lbyt[(l["sandbox"], o, "up")] += l["bytes_up"]
    lbyt[(l["sandbox"], o, "down")] += l["bytes_down"]
page = {k: v for k, v in page.items() if v}
byt = {k: v for k, v in byt.items() if v}
lbyt = {k: v for k, v in lbyt.items() if v}
bad = 0
for k in sorted(set(page) | set(log)):
    if page.get(k, 0) != log.get(k, 0):
        print("connections_total%s: page %s, access log %s" % (k, page.get(k, 0), log.get(k, 0)))
        bad += 1
for k in sorted(set(byt) | set(lbyt)):
    if byt.get(k, 0) != lbyt.get(k, 0):
        print("bytes_total%s: page %s, access log %s" % (k, byt.get(k, 0), lbyt.get(k, 0)))
        bad += 1
print("%d connections_total series, %d bytes_total series compared" % (len(page), len(byt)))
sys.exit(1 if bad else 0)
EOF
ok $? "connections_total and bytes_total agree with the access log, series by series"
diag_file "$T/agree.out" 12
m=$(egd_metric 'egressd_connections_total{sandbox="501",owner="frank",mode="connect",decision="deny",reason="not_allowed"}')
check "connections_total{501,frank,connect,deny,not_allowed} is 1 (got ${m:-none})" test "$m" = 1
m=$(egd_metric 'egressd_connections_total{sandbox="default",owner="",mode="connect",decision="allow",reason="allowed"}')
check "connections_total{default,connect,allow,allowed} is 2 (got ${m:-none})" test "$m" = 2
rules=$(grep -cvE '^[[:space:]]*(#|$)' "$T/policies/test.allow")
m=$(egd_metric 'egressd_policy_rules{preset="test"}')
check "policy_rules{preset=test} is the preset's $rules rule lines (got ${m:-none})" test "$m" = "$rules"
check "sandboxes is 1 (got $(egd_metric egressd_sandboxes))" test "$(egd_metric egressd_sandboxes)" = 1
m=$(egd_metric 'egressd_active_connections')
check "active_connections sums to 0 once every connection is closed (got ${m:-none})" test "$m" = 0

# ---- a real Prometheus server scrapes egressd
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: egressd
    static_configs:
      - targets: ['$EGD_METRICS']
EOF
prometheus --config.file="$T/prometheus.yml" --web.listen-address="$PROM_ADDR" \
    --storage.tsdb.path="$T/prom" >"$T/prometheus.log" 2>&1 &
EGD_PIDS+=($!)
# query EXPR: the JSON answer of Prometheus' instant query API.
query() {
    curl -q -sS --noproxy '*' -m 5 -G --data-urlencode "query=$1" "http://$PROM_ADDR/api/v1/query" 2>/dev/null
}
# The series Prometheus holds must be the page's: same labels, same values.
# One scrape every second; the page does not change any more.
cat >"$T/compare.py" <<'EOF'
import json, re, sys
ans = json.loads(sys.argv[1])
lab = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
page = {}
for line in open(sys.argv[2]):
    s = re.match(r"egressd_connections_total\{(.*)\}\s+(\S+)", line)
    if s:
        # Prometheus drops labels whose value is empty (owner="").
        page[tuple(sorted((k, v) for k, v in lab.findall(s.group(1)) if v))] = float(s.group(2))
got = {}
for r in ans["data"]["result"]:
    m = {k: v for k, v in r["metric"].items() if k not in ("__name__", "job", "instance")}
    got[tuple(sorted(m.items()))] = float(r["value"][1])
sys.exit(0 if ans["status"] == "success" and got == page and page else 1)
EOF
rc=1
end=$((SECONDS + 20))
while [ $SECONDS -lt $end ]; do
    ans=$(query egressd_connections_total)
    python3 "$T/compare.py" "$ans" "$T/metrics.txt" 2>/dev/null && { rc=0; break; }
    sleep 0.5
done
ok $rc "prometheus: /api/v1/query egressd_connections_total answers the page's series and values (within 20 s)"
if [ $rc -ne 0 ]; then
    diag "answer: ${ans:0:600}"
    diag_file "$T/prometheus.log" 10
fi
ans=$(query 'up{job="egressd"}')
ok_json "prometheus: up{job=egressd} is 1" "$ans" \
    "l['status'] == 'success' and [r['value'][1] for r in l['data']['result']] == ['1']"
ans=$(query 'sum(egressd_upstream_connect_seconds_count)')
ok_json "prometheus: the upstream_connect_seconds histogram counts the 5 upstream connections" "$ans" \
    "l['status'] == 'success' and [r['value'][1] for r in l['data']['result']] == ['5']"
ans=$(query 'count by (__name__) ({__name__=~"egressd_.+", job="egressd"})')
ok_json "prometheus: every family of the page was ingested (scrape without errors)" "$ans" \
    "l['status'] == 'success' and {'egressd_connections_total', 'egressd_bytes_total', 'egressd_build_info', 'egressd_sandboxes', 'egressd_upstream_connect_seconds_bucket'} <= {r['metric']['__name__'] for r in l['data']['result']}"

egd_finish
tap_end
