/*
 * test_geo.c - deny country / deny asn against MaxMind's test databases
 * (their README lists which address maps to which country and AS).
 */
#include <stdlib.h>
#include <string.h>

#include <maxminddb.h>

#include "policy.h"
#include "tap.h"

#define NOW 1796083200

static bool open_db(MMDB_s *db, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int rc = MMDB_open(path, MMDB_MODE_MMAP, db);
    return ok(rc == MMDB_SUCCESS, "open %s (%s)", name, MMDB_strerror(rc));
}

static const char *addr_verdict(const struct policy_binding *b, const char *addr,
                                struct policy_verdict *v)
{
    struct policy_host h;
    struct policy_verdict name;
    uint8_t a[16];
    policy_host_normalize("cdn.example", 11, &h);
    policy_decide_name(b, &h, 443, NOW, &name);
    policy_addr_parse(addr, strlen(addr), a);
    return policy_decision_str(policy_decide_addr(b, a, 443, &name, NOW, v));
}

int main(void)
{
    const char *dir = getenv("MMDB_DIR");
    MMDB_s country, asn;
    struct policy_diag d = {0};
    struct policy_verdict v;

    if (dir == NULL || !open_db(&country, dir, "GeoIP2-Country-Test.mmdb") ||
        !open_db(&asn, dir, "GeoLite2-ASN-Test.mmdb")) {
        ok(0, "MMDB_DIR names the MaxMind test databases");
        return tap_done();
    }
    const char *text = "cdn.example\n"
                       "deny country se JP\n"   /* 2 */
                       "deny asn AS209 7018\n"; /* 3 */
    const char *report = "include enforce\nmode report\n";
    struct policy_builder *bl = policy_builder_new();
    policy_builder_add_preset(bl, "enforce", "enforce.allow", text, strlen(text));
    policy_builder_add_preset(bl, "watch", "watch.allow", report, strlen(report));
    policy_builder_geo(bl, &country, &asn);
    struct policy *p = policy_builder_finish(bl, &d);
    if (!ok(p != NULL, "a preset with geo rules loads when both databases are given"))
        return tap_done();
    struct policy_binding *b = policy_binding_new(p, "enforce", NULL, 0, "t", &d);
    struct policy_binding *w = policy_binding_new(p, "watch", NULL, 0, "t", &d);

    ok(strcmp(addr_verdict(b, "89.160.20.112", &v), "deny") == 0 && v.reason == POLICY_R_GEO &&
           strcmp(v.country, "SE") == 0 && v.asn == 29518 && v.rule.line == 2,
       "89.160.20.112 is SE / AS29518: denied by 'deny country se' on line 2");
    ok(strcmp(addr_verdict(b, "2001:218::1", &v), "deny") == 0 && strcmp(v.country, "JP") == 0,
       "2001:218::1 is JP: denied (IPv6 lookup)");
    ok(strcmp(addr_verdict(b, "216.160.83.56", &v), "deny") == 0 && v.reason == POLICY_R_GEO &&
           strcmp(v.country, "US") == 0 && v.asn == 209 && v.rule.line == 3,
       "216.160.83.56 is US / AS209: denied by 'deny asn' on line 3");
    ok(strcmp(addr_verdict(b, "12.81.92.1", &v), "deny") == 0 && v.asn == 7018,
       "12.81.92.1 is AS7018: denied");
    ok(strcmp(addr_verdict(b, "81.2.69.142", &v), "allow") == 0 && strcmp(v.country, "GB") == 0,
       "81.2.69.142 is GB: allowed, country reported");
    ok(strcmp(addr_verdict(b, "1.128.0.1", &v), "allow") == 0 && v.asn == 1221,
       "1.128.0.1 is AS1221: allowed, ASN reported");
    ok(strcmp(addr_verdict(b, "214.1.1.1", &v), "allow") == 0 && v.country[0] == '\0',
       "214.1.1.1 has no country: allowed, country empty");
    ok(strcmp(addr_verdict(b, "[::ffff:89.160.20.112]", &v), "deny") == 0,
       "an IPv4-mapped IPv6 address is looked up as its IPv4 address");
    ok(strcmp(addr_verdict(w, "89.160.20.112", &v), "would_deny") == 0 && v.reason == POLICY_R_GEO,
       "report mode: a geo deny becomes would_deny");
    policy_binding_free(b);
    policy_binding_free(w);
    policy_unref(p);

    /* without the ASN database, 'deny asn' cannot load */
    bl = policy_builder_new();
    policy_builder_add_preset(bl, "enforce", "enforce.allow", text, strlen(text));
    policy_builder_geo(bl, &country, NULL);
    p = policy_builder_finish(bl, &d);
    ok(p == NULL && d.n == 1 && strstr(d.lines[0], "enforce.allow:3:1: 'deny asn' needs") &&
           strstr(d.lines[0], "geoip-asn"),
       "deny asn without geoip-asn is an error on its line (%s)", d.n ? d.lines[0] : "");
    policy_diag_free(&d);
    MMDB_close(&country);
    MMDB_close(&asn);
    return tap_done();
}
