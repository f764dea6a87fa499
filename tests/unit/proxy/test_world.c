/*
 * test_world.c - the world snapshot (proxy/world.c): bindings put,
 * replaced, deleted and validated field by field; persisted in
 * state-dir/sandboxes.json and restored; reload keeping the bindings, or
 * failing and keeping the old world; lookups by address, id and
 * Proxy-Authorization; a binding whose preset is gone at start; readers on
 * other threads while the main thread swaps worlds.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "metrics.h"
#include "policy.h"
#include "policy_load.h"
#include "sblimits.h"
#include "tap.h"
#include "world.h"

#define NOW 1796083200 /* 2026-12-01 */

static char dir[256];
static struct px_config cfg;
static struct px_geo geo;
static char err[65536];

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

static char *read_state(void)
{
    static char buf[65536];
    char path[512];
    snprintf(path, sizeof(path), "%s/state/sandboxes.json", dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return f ? buf : NULL;
}

static json_t *J(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (j == NULL) {
        fprintf(stderr, "bad test JSON %s: %s\n", text, je.text);
        exit(1);
    }
    return j;
}

/* PUT id with JSON text; returns the result, err filled. */
static int put(const char *id, const char *text)
{
    json_t *j = J(text);
    int rc = px_world_put_sandbox(id, j, err, sizeof(err));
    json_decref(j);
    return rc;
}

static uint64_t gen(void)
{
    struct px_world *w = px_world_get();
    uint64_t g = w->generation;
    px_world_put(w);
    return g;
}

static size_t count(void)
{
    struct px_world *w = px_world_get();
    size_t n = w->n_sandboxes;
    px_world_put(w);
    return n;
}

static const struct px_sandbox *addr_lookup(struct px_world *w, const char *ip)
{
    uint8_t a[16];
    if (!policy_addr_parse(ip, strlen(ip), a))
        return NULL;
    return px_world_by_addr(w, a);
}

/* Which sandbox (id, or "-") the address maps to in the current world. */
static const char *who_has(const char *ip)
{
    static char id[64];
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = addr_lookup(w, ip);
    snprintf(id, sizeof(id), "%s", sb ? sb->id : "-");
    px_world_put(w);
    return id;
}

static bool err_has(const char *s)
{
    if (strstr(err, s) != NULL)
        return true;
    diag("error was: %s", err);
    diag("wanted:    %s", s);
    return false;
}

/* The decision of sandbox id (NULL: the default binding) on host:port. */
static enum policy_decision decide(const char *id, const char *host, uint16_t port,
                                   struct policy_verdict *v)
{
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = id ? px_world_by_id(w, id) : NULL;
    const struct policy_binding *pb = id ? (sb ? sb->pb : NULL) : w->default_pb;
    struct policy_host h;
    enum policy_decision d = POLICY_DENY;

    policy_host_normalize(host, strlen(host), &h);
    if (pb != NULL)
        d = policy_decide_name(pb, &h, port, NOW, v);
    px_world_put(w);
    return d;
}

static int init(void)
{
    err[0] = '\0';
    return px_world_init(&cfg, &geo, err, sizeof(err));
}

static void setup(void)
{
    char conf[512];

    snprintf(dir, sizeof(dir), "%s/test_world.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(conf, sizeof(conf), "%s/policies", dir);
    mkdir(conf, 0700);
    write_file("policies/test.allow", "a.test\nb.test:8000\n");
    write_file("policies/other.allow", "other.test\n");
    write_file("hosts", "127.0.0.16 a.test\n");
    write_file("egressd.conf", "listen 127.0.0.1:3128\n"
                               "policy-dir policies\n"
                               "default-policy test\n"
                               "hosts-file hosts\n"
                               "state-dir state\n");
    snprintf(conf, sizeof(conf), "%s/egressd.conf", dir);
    if (px_config_load(&cfg, conf, err, sizeof(err)) == -1) {
        fprintf(stderr, "config: %s\n", err);
        exit(1);
    }
    memset(&geo, 0, sizeof(geo));
}

static const char *alice = "{\"id\":\"101\",\"name\":\"agent-alice-1\",\"owner\":\"alice\","
                           "\"addresses\":[\"10.99.0.11\",\"2001:db8::11\"],\"policy\":\"test\","
                           "\"allow\":[\"extra.test\",\"x.test:22\"],\"token\":\"s3cret\","
                           "\"expires\":\"2026-11-30T09:00:00Z\"}";

static void test_init_and_put(void)
{
    struct px_world *w;
    struct policy_verdict v;
    struct stat st;
    char path[512];

    ok(init() == 0, "init from a config with a missing state dir");
    snprintf(path, sizeof(path), "%s/state", dir);
    ok(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
       "the state dir is created, mode 0700");
    ok(count() == 0, "no state file: no bindings");
    w = px_world_get();
    ok(w != NULL && w->policy != NULL && w->hosts != NULL && w->default_pb != NULL,
       "the first world has a policy, the hosts table and the default binding");
    ok(w->generation >= 1, "generation counts from 1");
    px_world_put(w);
    ok(decide(NULL, "a.test", 443, &v) == POLICY_ALLOW && v.rule.line == 1,
       "the default binding decides with default-policy");

    uint64_t g = gen();
    ok(put("101", alice) == 0, "put a full binding");
    ok(gen() == g + 1, "a put makes a new generation");
    w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "101");
    ok(sb != NULL && strcmp(sb->name, "agent-alice-1") == 0 && strcmp(sb->owner, "alice") == 0 &&
           strcmp(sb->policy, "test") == 0 && sb->n_addrs == 2 &&
           strcmp(sb->token, "s3cret") == 0 && sb->expires == 1796029200 && sb->pb != NULL,
       "every field is in the binding");
    json_t *given = J(alice);
    ok(sb != NULL && json_object_get(sb->json, "token") == NULL &&
           json_equal(json_object_get(sb->json, "allow"), json_object_get(given, "allow")),
       "its JSON holds the allow lines, not the token");
    json_decref(given);
    ok(addr_lookup(w, "10.99.0.11") == sb && addr_lookup(w, "2001:db8::11") == sb,
       "both addresses find it");
    ok(addr_lookup(w, "::ffff:10.99.0.11") == sb, "the IPv4-mapped form is the same address");
    ok(addr_lookup(w, "10.99.0.12") == NULL, "another address finds nothing");
    ok(px_world_by_id(w, "102") == NULL, "another id finds nothing");
    px_world_put(w);

    ok(decide("101", "extra.test", 443, &v) == POLICY_ALLOW && v.rule.file != NULL &&
           strcmp(v.rule.file, "sandbox 101") == 0 && v.rule.line == 1,
       "an extra line allows, named 'sandbox 101:1'");
    ok(decide("101", "x.test", 443, &v) == POLICY_DENY, "the extra's port holds");
    ok(decide("101", "a.test", 443, &v) == POLICY_ALLOW && strstr(v.rule.file, "test.allow"),
       "the preset's lines hold too");
    ok(decide(NULL, "extra.test", 443, &v) == POLICY_DENY, "the default binding has no extras");

    json_t *all = px_world_sandboxes_json();
    ok(json_array_size(all) == 1 && json_object_get(json_array_get(all, 0), "token") == NULL &&
           strcmp(json_string_value(json_object_get(json_array_get(all, 0), "owner")), "alice") ==
               0,
       "the list has the binding, without its token");
    json_decref(all);

    snprintf(path, sizeof(path), "%s/state/sandboxes.json", dir);
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "the state file is mode 0600");
    ok(read_state() != NULL && strstr(read_state(), "s3cret") != NULL,
       "the state file keeps the token");

    ok(put("102", "{\"policy\":\"other\",\"addresses\":[\"10.99.0.12\"]}") == 0,
       "put without an id in the body (the path's id) and only the required fields");
    ok(strcmp(who_has("10.99.0.12"), "102") == 0, "102 is found by its address");
    w = px_world_get();
    ok(w->n_sandboxes == 2 && strcmp(w->sandboxes[0].id, "101") == 0 &&
           strcmp(w->sandboxes[1].id, "102") == 0,
       "bindings are sorted by id");
    ok(strcmp(json_string_value(json_object_get(px_world_by_id(w, "102")->json, "id")), "102") == 0,
       "the stored JSON gets the id");
    px_world_put(w);
}

/* A binding deleted takes its per-sandbox counters along. */
static void test_limits_follow_bindings(void)
{
    char err[512];

    ok(put("104", "{\"policy\":\"test\",\"addresses\":[\"10.99.0.44\"]}") == 0, "put 104");
    struct px_limit *l = px_limit_get("104");
    (void)px_limit_bytes(l, 1000, 0);
    px_limit_put(l);
    size_t before = px_limit_count();
    int refused = put("106", "{\"policy\":\"test\",\"addresses\":[\"10.99.0.44\"]}");
    size_t after = px_limit_count();
    ok(refused == -1 && after == before,
       "a binding refused (its address is 104's) leaves no counters behind (%zu -> %zu)", before,
       after);
    ok(px_world_delete_sandbox("104", err, sizeof(err)) == PX_WORLD_DELETED, "delete 104");
    ok(px_limit_count() == before - 1, "its counters are gone with it (%zu -> %zu)", before,
       px_limit_count());
    ok(put("104", "{\"policy\":\"test\",\"addresses\":[\"10.99.0.44\"]}") == 0,
       "put 104 again (a reused id)");
    l = px_limit_get("104");
    ok(!px_limit_over_quota(l, 1000), "it starts with a fresh quota");
    px_limit_put(l);
    ok(px_world_delete_sandbox("104", err, sizeof(err)) == PX_WORLD_DELETED, "delete 104 again");
}

/* Whether the metrics page has a series for sandbox id. */
static bool series_of(const char *id)
{
    char *page = px_metrics_render(NULL), want[128];

    snprintf(want, sizeof(want), "egressd_active_connections{sandbox=\"%s\"", id);
    bool found = strstr(page, want) != NULL;
    free(page);
    return found;
}

/* The world holds each binding's metrics and limits handles (what a
 * connection takes without a lock); a binding deleted takes its series off
 * the page once the last world that held it is let go - after the grace
 * period, not before, and not later. */
static void test_handles_follow_bindings(void)
{
    char err[512];

    ok(put("105", "{\"policy\":\"test\",\"owner\":\"o5\",\"addresses\":[\"10.99.0.45\"]}") == 0,
       "put 105");
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "105");
    ok(sb != NULL && sb->msb != NULL && sb->lim != NULL && w->default_msb != NULL,
       "the world holds 105's handles and the default series'");
    struct px_limit *l = px_limit_ref(sb->lim);
    ok(l == px_limit_get("105"), "its limits are the ones the table has for 105");
    px_limit_put(l);
    px_metrics_active(px_metrics_sandbox_ref(sb->msb), +1); /* a connection */
    struct px_msb *conn_msb = sb->msb;
    px_world_put(w);
    ok(series_of("105") && series_of("default"), "a bound sandbox has a series before traffic");
    int r = px_world_reader_add(); /* test_grace's readers: 0 .. r-1 */
    for (int i = 0; i <= r; i++)
        px_world_quiescent(i);
    ok(px_world_delete_sandbox("105", err, sizeof(err)) == PX_WORLD_DELETED, "delete 105");
    ok(px_world_retired() == 1 && series_of("105"),
       "the old world waits for its grace period, and 105's series with it");
    for (int i = 0; i <= r; i++)
        px_world_quiescent(i);
    ok(px_world_retired() == 0 && series_of("105"),
       "let go: the series stays while a connection still counts in it");
    px_metrics_active(conn_msb, -1);
    px_metrics_sandbox_put(conn_msb); /* it closes */
    ok(!series_of("105") && series_of("default"), "closed: 105's series is gone at the next page");
    px_limit_put(l);
}

static void test_replace_one(void)
{
    ok(put("101", "{\"id\":\"101\",\"policy\":\"test\",\"addresses\":[\"10.99.0.21\"],"
                  "\"token\":\"new\"}") == 0,
       "put again replaces the binding");
    ok(strcmp(who_has("10.99.0.11"), "-") == 0, "its old address is free");
    ok(strcmp(who_has("10.99.0.21"), "101") == 0, "its new address finds it");
    ok(strcmp(who_has("10.99.0.12"), "102") == 0, "the other binding is untouched");
    ok(count() == 2, "still two bindings");
    ok(put("102", "{\"policy\":\"other\",\"addresses\":[\"10.99.0.11\"]}") == 0,
       "the freed address can be taken by another sandbox");
}

struct bad {
    const char *id, *json, *want;
    int status;
};

static void test_validation(void)
{
    static const struct bad bad[] = {
        {"103", "[1]", "expected a JSON object (a binding), found an array", 400},
        {"10 3", "{\"policy\":\"test\"}", "sandbox id: expected 1..63", 400},
        {"103", "{\"id\":\"104\",\"policy\":\"test\"}", "id: '104' differs from the id in the path",
         400},
        {"103", "{\"id\":7,\"policy\":\"test\"}", "sandbox 103: id: expected 1..63", 400},
        {"default", "{\"policy\":\"test\"}", "'default' is reserved", 400},
        {"103", "{\"policy\":\"test\",\"polcy\":\"x\"}",
         "unknown field 'polcy' (did you mean 'policy'?)", 400},
        {"103", "{\"policy\":\"test\",\"colour\":\"x\"}", "sandbox 103: unknown field 'colour'",
         400},
        {"103", "{\"name\":\"x\"}", "sandbox 103: policy: required", 400},
        {"103", "{\"policy\":5}", "policy: expected the name of a preset, found an integer", 400},
        {"103", "{\"policy\":\"nope\"}",
         "policy: expected the name of a preset, found 'nope': no such preset (presets: other, "
         "test)",
         422},
        {"103", "{\"policy\":\"test\",\"name\":\"a\\nb\"}",
         "name: expected a string of at most 127", 400},
        {"103", "{\"policy\":\"test\",\"owner\":[]}",
         "owner: expected a string of at most 127 characters, no control characters, found an "
         "array",
         400},
        {"103", "{\"policy\":\"test\",\"addresses\":\"10.0.0.1\"}",
         "addresses: expected an array of at most 16 IP addresses, found '10.0.0.1'", 400},
        {"103", "{\"policy\":\"test\",\"addresses\":[\"10.0.0.1\",\"ten.test\"]}",
         "addresses[1]: expected an IP address, found 'ten.test'", 400},
        {"103", "{\"policy\":\"test\",\"addresses\":[\"10.0.0.1\",\"10.0.0.1\"]}",
         "addresses[1]: 10.0.0.1 is listed twice", 400},
        {"103",
         "{\"policy\":\"test\",\"addresses\":[\"10.0.0.1\",\"10.0.0.2\",\"10.0.0.3\",\"10.0.0.4\","
         "\"10.0.0.5\",\"10.0.0.6\",\"10.0.0.7\",\"10.0.0.8\",\"10.0.0.9\",\"10.0.0.10\",\"10.0.0."
         "11\",\"10.0.0.12\",\"10.0.0.13\",\"10.0.0.14\",\"10.0.0.15\",\"10.0.0.16\",\"10.0.0.17\"]"
         "}",
         "addresses: expected an array of at most 16 IP addresses, found 17", 400},
        {"103", "{\"policy\":\"test\",\"allow\":\"a.test\"}",
         "allow: expected an array of at most 256 strings", 400},
        {"103", "{\"policy\":\"test\",\"allow\":[\"a.test\",5]}", "allow[1] is not a string", 400},
        {"103", "{\"policy\":\"test\",\"allow\":[\"a.test\\nb.test\"]}",
         "allow[0]: expected one policy line", 400},
        {"103", "{\"policy\":\"test\",\"allow\":[\"ok.test\",\"deny github.com\"]}",
         "sandbox 103:2:1: 'deny' is not allowed", 422},
        {"103", "{\"policy\":\"test\",\"allow\":[\"bad_host!\"]}", "sandbox 103:1:", 422},
        {"103", "{\"policy\":\"test\",\"token\":\"\"}",
         "token: expected 1..127 printable ASCII characters", 400},
        {"103", "{\"policy\":\"test\",\"token\":\"has space\"}",
         "token: expected 1..127 printable ASCII characters, no spaces, found another string", 400},
        {"103", "{\"policy\":\"test\",\"token\":42}", "token: expected 1..127", 400},
        {"103", "{\"policy\":\"test\",\"expires\":\"tomorrow\"}",
         "expires: expected an RFC 3339 time such as 2026-11-30T09:00:00Z, found 'tomorrow'", 400},
        {"103", "{\"policy\":\"test\",\"addresses\":[\"10.99.0.21\"]}",
         "sandbox 103: addresses: 10.99.0.21 is already bound to sandbox 101", 422},
        {"103", "{\"policy\":\"test\",\"addresses\":[\"::ffff:10.99.0.11\"]}",
         "10.99.0.11 is already bound to sandbox 102", 422},
    };
    char longname[200], text[400];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t g = gen();
        char *before = strdup(read_state());
        int rc = put(bad[i].id, bad[i].json);
        ok(rc == -1 && px_world_error_status() == bad[i].status && err_has(bad[i].want),
           "refused (%d): %s", bad[i].status, bad[i].want);
        ok(gen() == g && count() == 2 && strcmp(read_state(), before) == 0,
           "  and nothing changed (world, state file)");
        free(before);
    }
    memset(longname, 'n', 128);
    longname[128] = '\0';
    snprintf(text, sizeof(text), "{\"policy\":\"test\",\"name\":\"%s\"}", longname);
    ok(put("103", text) == -1 && err_has("name: expected a string of at most 127"),
       "a name of 128 bytes is refused");
    longname[127] = '\0';
    snprintf(text, sizeof(text), "{\"policy\":\"test\",\"name\":\"%s\",\"expires\":null}",
             longname);
    ok(put("103", text) == 0, "127 bytes is fine, and null stands for an absent field");
    ok(px_world_delete_sandbox("103", err, sizeof(err)) == PX_WORLD_DELETED, "delete it");

    json_t *big = J("{\"policy\":\"test\",\"allow\":[]}");
    for (int i = 0; i < 257; i++)
        json_array_append_new(json_object_get(big, "allow"), json_string("a.test"));
    ok(px_world_put_sandbox("103", big, err, sizeof(err)) == -1 &&
           err_has("allow: expected an array of at most 256 strings (policy lines), found 257"),
       "257 allow lines are refused");
    json_array_remove(json_object_get(big, "allow"), 0);
    ok(px_world_put_sandbox("103", big, err, sizeof(err)) == 0, "256 are fine");
    json_decref(big);
    ok(px_world_delete_sandbox("103", err, sizeof(err)) == PX_WORLD_DELETED, "delete it");
    ok(px_world_delete_sandbox("103", err, sizeof(err)) == PX_WORLD_NO_SUCH,
       "deleting it again: none");
    ok(count() == 2, "two bindings remain");
}

static void test_basic_auth(void)
{
    /* "101:new" "101:wrong" "102:x" "101:" "101:newx" */
    static const struct {
        const char *value, *id, *what;
    } cases[] = {
        {"Basic MTAxOm5ldw==", "101", "the right id:token"},
        {"basic MTAxOm5ldw==", "101", "the scheme in any case"},
        {"  BASIC   MTAxOm5ldw==  ", "101", "blanks around"},
        {"Basic MTAxOm5ldw", NULL, "padding left out (RFC 7617: RFC 4648 base64, padded)"},
        {"Basic MTAxOm5ldx==", NULL, "pad bits not zero (the loose decoder read it as 101:new)"},
        {"Basic MTAxOndyb25n", NULL, "a wrong token"},
        {"Basic MTAxOm5ld3g=", NULL, "a token with one byte more"},
        {"Basic MTAxOm5l", NULL, "a token with one byte less"},
        {"Basic MTAxOg==", NULL, "an empty token"},
        {"Basic MTAyOng=", NULL, "a binding without a token never matches"},
        {"Basic MTA0Om5ldw==", NULL, "an unknown id"},
        {"Basic MTAxbmV3", NULL, "no colon"},
        {"Basic MTAxOm5ldw=*", NULL, "not base64"},
        {"Bearer MTAxOm5ldw==", NULL, "another scheme"},
        {"BasicMTAxOm5ldw==", NULL, "no blank after the scheme"},
        {"Basic ", NULL, "nothing after the scheme"},
        {"", NULL, "an empty value"},
        {"Basic MTAxADpuZXc=", NULL, "\"101\\0\" is not 101 (found by fuzz_auth)"},
    };
    struct px_world *w = px_world_get();

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct px_sandbox *sb =
            px_world_by_basic_auth(w, cases[i].value, strlen(cases[i].value));
        ok(cases[i].id ? sb != NULL && strcmp(sb->id, cases[i].id) == 0 : sb == NULL,
           "basic auth: %s -> %s", cases[i].what, cases[i].id ? cases[i].id : "none");
    }
    char longv[2000] = "Basic ";
    memset(longv + 6, 'A', sizeof(longv) - 7);
    ok(px_world_by_basic_auth(w, longv, strlen(longv)) == NULL, "basic auth: 2 KB of base64: none");
    ok(px_world_by_basic_auth(w, "Basic MTAxOm5ldw==XYZ", 18) != NULL,
       "basic auth: only `len` bytes are read");
    px_world_put(w);
}

static void test_replace_all(void)
{
    json_t *set;

    set =
        J("[{\"id\":\"201\",\"policy\":\"test\",\"addresses\":[\"10.99.0.11\"]},"
          " {\"id\":\"202\",\"policy\":\"other\",\"addresses\":[\"10.99.0.12\"],\"token\":\"t\"}]");
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == 0, "replace the whole set");
    json_decref(set);
    ok(count() == 2 && strcmp(who_has("10.99.0.11"), "201") == 0 &&
           strcmp(who_has("10.99.0.12"), "202") == 0 && strcmp(who_has("10.99.0.21"), "-") == 0,
       "only the new set is there (an address may move between sandboxes)");

    uint64_t g = gen();
    set = J("[{\"id\":\"301\",\"policy\":\"test\"}, {\"id\":\"301\",\"policy\":\"test\"}]");
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == -1 && px_world_error_status() == 400 &&
           err_has("sandbox 301: id: given twice"),
       "replace: an id twice is refused (400)");
    json_decref(set);
    set = J("[{\"id\":\"301\",\"policy\":\"test\",\"addresses\":[\"10.0.0.1\"]},"
            " {\"id\":\"302\",\"policy\":\"test\",\"addresses\":[\"10.0.0.1\"]}]");
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == -1 && px_world_error_status() == 422 &&
           err_has("sandbox 301: addresses: 10.0.0.1 is already bound to sandbox 302"),
       "replace: an address in two bindings is refused (422)");
    json_decref(set);
    set = J("[{\"policy\":\"test\"}, {\"id\":\"302\",\"policy\":\"nope\"}, "
            "{\"id\":\"303\",\"policy\":\"test\",\"allow\":[\"deny x.test\"]}]");
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == -1 && px_world_error_status() == 400 &&
           err_has("sandbox ?: id: required") &&
           err_has("sandbox 302: policy: expected the name of a preset, found 'nope'") &&
           err_has("sandbox 303:1:1:"),
       "replace: every binding's error is reported, 400 when one is not a binding");
    json_decref(set);
    set = J("{\"id\":\"301\"}");
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == -1 && px_world_error_status() == 400 &&
           err_has("expected a JSON array"),
       "replace: an object instead of an array is refused");
    json_decref(set);
    ok(gen() == g && count() == 2 && strcmp(who_has("10.99.0.11"), "201") == 0,
       "refused sets changed nothing");
    set = json_array();
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == 0 && count() == 0,
       "replace with an empty set removes every binding");
    json_decref(set);
}

static void test_persistence(void)
{
    json_t *before, *after;
    char path[512], moved[512];

    ok(put("101", alice) == 0 &&
           put("102", "{\"policy\":\"other\",\"addresses\":[\"10.99.0.12\"]}") == 0,
       "two bindings again");
    before = px_world_sandboxes_json();
    px_world_shutdown();
    ok(px_world_get() == NULL, "after shutdown there is no world");
    ok(init() == 0, "init again from the same state dir");
    after = px_world_sandboxes_json();
    ok(json_equal(before, after), "the same bindings are back");
    json_decref(before);
    json_decref(after);
    struct px_world *w = px_world_get();
    ok(px_world_by_basic_auth(w, "Basic MTAxOnMzY3JldA==", 22) != NULL, "the token is back too");
    ok(strcmp(who_has("2001:db8::11"), "101") == 0, "and the address index");
    px_world_put(w);

    /* A state dir that cannot be written: the change is refused whole. */
    uint64_t g = gen();
    snprintf(path, sizeof(path), "%s/state", dir);
    snprintf(moved, sizeof(moved), "%s/state.moved", dir);
    rename(path, moved);
    write_file("state", "not a directory\n");
    ok(put("103", "{\"policy\":\"test\",\"addresses\":[\"10.99.0.13\"]}") == -1 &&
           px_world_error_status() == 500 && err_has("cannot create a temporary file"),
       "put: a failed write is an error (500)");
    ok(gen() == g && count() == 2 && strcmp(who_has("10.99.0.13"), "-") == 0,
       "  and the old world stays");
    ok(px_world_delete_sandbox("101", err, sizeof(err)) == PX_WORLD_FAILED &&
           px_world_error_status() == 500,
       "delete: a failed write is an error");
    ok(count() == 2 && strcmp(who_has("10.99.0.11"), "101") == 0, "  and 101 is still bound");
    json_t *set = json_array();
    ok(px_world_replace_sandboxes(set, err, sizeof(err)) == -1 && count() == 2,
       "replace: a failed write changes nothing");
    json_decref(set);
    unlink(path);
    rename(moved, path);

    /* A state file that is a directory: rename fails after the temp file is written. */
    snprintf(path, sizeof(path), "%s/state/sandboxes.json", dir);
    snprintf(moved, sizeof(moved), "%s/state/saved.json", dir);
    rename(path, moved);
    mkdir(path, 0700);
    ok(put("103", "{\"policy\":\"test\"}") == -1 && err_has("cannot replace"),
       "put: a failed rename is an error");
    ok(count() == 2, "  and changed nothing");
    rmdir(path);
    rename(moved, path);
    ok(put("103", "{\"policy\":\"test\"}") == 0 && count() == 3,
       "with the state dir back, a put works");
    ok(px_world_delete_sandbox("103", err, sizeof(err)) == PX_WORLD_DELETED, "delete it");
}

static void test_reload(void)
{
    struct policy_verdict v;
    uint64_t g = gen();

    write_file("policies/test.allow", "a.test\nb.test:8000\nc.test\n");
    ok(px_world_reload(err, sizeof(err)) == 0, "reload");
    ok(gen() == g + 1, "a reload makes a new generation");
    ok(count() == 2 && strcmp(who_has("10.99.0.11"), "101") == 0,
       "the bindings are kept through a reload");
    ok(decide("101", "c.test", 443, &v) == POLICY_ALLOW, "a binding decides with the new preset");
    ok(decide("101", "extra.test", 443, &v) == POLICY_ALLOW, "  and still with its own lines");
    ok(decide(NULL, "c.test", 443, &v) == POLICY_ALLOW, "so does the default binding");

    struct px_world *old = px_world_get();
    write_file("policies/test.allow", "a.test\nb.test:70000\n");
    ok(px_world_reload(err, sizeof(err)) == -1 && px_world_error_status() == 422 &&
           err_has("test.allow:2:8: expected a port 1..65535"),
       "a broken preset: reload fails, naming file:line:col");
    struct px_world *now = px_world_get();
    ok(now == old && now->generation == g + 1, "the old world stays");
    px_world_put(now);
    ok(decide("101", "c.test", 443, &v) == POLICY_ALLOW, "and decides as before");

    write_file("policies/test.allow", "a.test\n");
    write_file("hosts", "127.0.0.16 a.test\nnot-an-address b.test\n");
    ok(px_world_reload(err, sizeof(err)) == -1 && err_has("hosts:2"),
       "a broken hosts file: reload fails, naming file:line");
    write_file("hosts", "127.0.0.16 a.test\n");

    char path[512];
    snprintf(path, sizeof(path), "%s/policies/other.allow", dir);
    unlink(path);
    ok(px_world_reload(err, sizeof(err)) == -1 &&
           err_has("sandbox 102: policy: expected the name of a preset, found 'other'"),
       "a preset a binding needs is gone: reload fails, naming the sandbox");
    now = px_world_get();
    ok(now == old, "the old world stays");
    px_world_put(now);
    px_world_put(old);
}

/* Start with a binding whose preset is gone: kept, denied, warned about. */
static void test_preset_gone_at_init(void)
{
    struct policy_verdict v;

    px_world_shutdown();
    ok(init() == 0, "init with a saved binding whose preset is gone succeeds");
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_id(w, "102");
    ok(sb != NULL && sb->pb == NULL, "the binding is kept, with no policy binding");
    ok(sb != NULL && addr_lookup(w, "10.99.0.12") == sb, "its address still finds it");
    px_world_put(w);
    ok(decide("101", "a.test", 443, &v) == POLICY_ALLOW, "the other binding works");
    ok(px_world_reload(err, sizeof(err)) == -1 && err_has("sandbox 102"),
       "a reload still names it");
    write_file("policies/other.allow", "other.test\n");
    ok(px_world_reload(err, sizeof(err)) == 0, "with the preset back, reload works");
    w = px_world_get();
    ok(px_world_by_id(w, "102")->pb != NULL, "and the binding loads again");
    px_world_put(w);
    ok(strstr(read_state(), "\"other\"") != NULL, "the state file kept it all along");
}

static void test_corrupt_state(void)
{
    char *saved = strdup(read_state());

    px_world_shutdown();
    write_file("state/sandboxes.json", "[{\"id\":\"101\",\n \"policy\":\"test\",,}]\n");
    ok(init() == -1 && err_has("state/sandboxes.json:2:") && err_has("sandboxes.json"),
       "a corrupt state file: init fails, naming file and position");
    ok(px_world_get() == NULL, "  and there is no world");
    write_file("state/sandboxes.json", "[{\"id\":\"101\",\"policy\":\"test\",\"adresses\":[]}]");
    ok(init() == -1 && err_has("sandboxes.json: [0]: sandbox 101: unknown field 'adresses'"),
       "a state file with a bad binding: init fails, naming it");
    write_file("state/sandboxes.json", "{}");
    ok(init() == -1 && err_has("expected an array"), "a state file that is not an array");
    write_file("state/sandboxes.json",
               "[{\"id\":\"1\",\"policy\":\"test\",\"addresses\":[\"10.0.0.1\"]},"
               "{\"id\":\"2\",\"policy\":\"test\",\"addresses\":[\"10.0.0.1\"]}]");
    ok(init() == -1 && err_has("10.0.0.1 is already bound"), "a state file with an address twice");
    write_file("state/sandboxes.json", saved);
    free(saved);
    ok(init() == 0 && count() == 2, "the good file again: init works");
}

/* The grace period: a world swapped out keeps its `cur` reference until
 * every registered reader has passed a quiescent point; with none, it goes
 * at once.  (This thread plays the reader.) */
static void test_grace(void)
{
    const char *one = "{\"policy\":\"test\",\"addresses\":[\"10.97.0.1\"]}";

    ok(put("g1", one) == 0 && px_world_retired() == 0,
       "no readers: a swapped-out world is let go at once");
    int r = px_world_reader_add();
    ok(put("g1", one) == 0 && px_world_retired() == 1,
       "a reader that has not passed a quiescent point: the old world waits (%zu)",
       px_world_retired());
    ok(put("g1", one) == 0 && px_world_retired() == 2, "and the next one too (%zu)",
       px_world_retired());
    struct px_world *held = px_world_get();
    px_world_quiescent(r);
    ok(px_world_retired() == 0, "after its quiescent point both go (%zu)", px_world_retired());
    ok(put("g1", one) == 0 && px_world_by_id(held, "g1") != NULL && held->generation > 0,
       "a world the reader took a reference to stays whole after its swap");
    px_world_put(held);
    px_world_quiescent(r);
    ok(px_world_delete_sandbox("g1", err, sizeof(err)) == PX_WORLD_DELETED, "delete g1");
    px_world_quiescent(r);
}

/* Readers take and drop worlds on other threads while the main thread
 * swaps: each world they hold stays whole (ASan sees any early free).
 * Each is a registered reader and passes a quiescent point between two
 * px_world_get calls, as a worker does between callbacks. */
static atomic_bool stop;
static atomic_int torn;

static void *reader(void *arg)
{
    int r = *(int *)arg;

    while (!atomic_load(&stop)) {
        px_world_quiescent(r);
        struct px_world *w = px_world_get();
        const struct px_sandbox *sb = addr_lookup(w, "10.99.0.12");
        if (sb == NULL || strcmp(sb->id, "102") != 0 || px_world_by_id(w, "102") != sb)
            atomic_fetch_add(&torn, 1);
        for (size_t i = 0; i < w->n_sandboxes; i++)
            if (px_world_by_id(w, w->sandboxes[i].id) != &w->sandboxes[i])
                atomic_fetch_add(&torn, 1);
        px_world_put(w);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[3];
    int fails = 0;
    char id[16], text[128];

    int idx[3];

    for (int i = 0; i < 3; i++) {
        idx[i] = px_world_reader_add();
        pthread_create(&t[i], NULL, reader, &idx[i]);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(id, sizeof(id), "t%d", i % 7);
        snprintf(text, sizeof(text), "{\"policy\":\"test\",\"addresses\":[\"10.98.%d.%d\"]}", i % 7,
                 i);
        if (i % 3 == 2 ? px_world_delete_sandbox(id, err, sizeof(err)) == PX_WORLD_FAILED
                       : put(id, text) != 0)
            fails++;
        if (i % 50 == 0 && px_world_reload(err, sizeof(err)) != 0)
            fails++;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    ok(fails == 0, "200 changes and 4 reloads while 3 threads read");
    ok(atomic_load(&torn) == 0, "no reader saw a torn world (%d)", atomic_load(&torn));
}

int main(void)
{
    char cmd[600];

    px_log_init("test_world", false);
    px_metrics_init("test");
    setup();
    test_init_and_put();
    test_replace_one();
    test_limits_follow_bindings();
    test_validation();
    test_basic_auth();
    test_replace_all();
    test_persistence();
    test_reload();
    test_preset_gone_at_init();
    test_corrupt_state();
    test_grace();
    test_handles_follow_bindings();
    test_threads();
    px_world_shutdown();
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return tap_done();
}
