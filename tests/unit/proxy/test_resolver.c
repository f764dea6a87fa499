/*
 * test_resolver.c - the hosts table, and the resolver against a fake DNS
 * server in this same process: a UDP socket on 127.0.0.1 (ephemeral port)
 * served by libevent's evdns server API on the resolver's own event_base.
 * The server answers from `zone` below (chosen TTLs, NXDOMAIN, SERVFAIL, or
 * never; a name "*.SUFFIX" answers every name below SUFFIX) and counts
 * every query it receives, so the tests can tell a cache hit from a lookup,
 * one coalesced query from ten, and a cancelled query (never sent again)
 * from one that evdns still retries.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/util.h>

#include "resolver.h"
#include "tap.h"

/* ------------------------------------------------------------ fake server */

enum mode { ANSWER, NXDOMAIN, SERVFAIL, SILENT };

struct rr {
    const char *name;
    enum mode mode[2];    /* [0] A, [1] AAAA */
    int ttl[2];           /* seconds */
    const char *addrs[2]; /* space-separated; "" with ANSWER is "no data" */
    int asked[2];         /* queries received */
};

static struct rr zone[] = {
    {"www.example.test",
     {ANSWER, ANSWER},
     {300, 300},
     {"192.0.2.1 192.0.2.2", "2001:db8::1"},
     {0, 0}},
    {"hosts.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.99", "2001:db8::99"}, {0, 0}},
    {"short.example.test", {ANSWER, ANSWER}, {300, 1}, {"192.0.2.10", "2001:db8::10"}, {0, 0}},
    {"zero.example.test", {ANSWER, ANSWER}, {0, 0}, {"192.0.2.11", ""}, {0, 0}},
    {"nx.example.test", {NXDOMAIN, NXDOMAIN}, {0, 0}, {"", ""}, {0, 0}},
    {"empty.example.test", {ANSWER, ANSWER}, {300, 300}, {"", ""}, {0, 0}},
    {"v6only.example.test", {ANSWER, ANSWER}, {300, 300}, {"", "2001:db8::6"}, {0, 0}},
    {"halfbroken.example.test", {ANSWER, SERVFAIL}, {300, 0}, {"192.0.2.20", ""}, {0, 0}},
    {"broken.example.test", {SERVFAIL, SERVFAIL}, {0, 0}, {"", ""}, {0, 0}},
    {"many.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.30", "2001:db8::30"}, {0, 0}},
    {"cancel.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.40", ""}, {0, 0}},
    {"cancelall.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.41", ""}, {0, 0}},
    {"inside.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.42", ""}, {0, 0}},
    {"free.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.43", ""}, {0, 0}},
    {"freecb.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.44", ""}, {0, 0}},
    {"freecb2.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"big.example.test",
     {ANSWER, ANSWER},
     {300, 300},
     {"192.0.2.101 192.0.2.102 192.0.2.103 192.0.2.104 192.0.2.105 192.0.2.106 192.0.2.107 "
      "192.0.2.108 192.0.2.109 192.0.2.110 192.0.2.111 192.0.2.112",
      "2001:db8::101 2001:db8::102 2001:db8::103 2001:db8::104 2001:db8::105 2001:db8::106 "
      "2001:db8::107 2001:db8::108"},
     {0, 0}},
    {"silent.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"cancelcb.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"last.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.45", ""}, {0, 0}},
    {"inside2.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.46", ""}, {0, 0}},
    {"gone.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"retry.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"cap1.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"cap2.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"cap3.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"nocap.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"two1.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"two2.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"two3.example.test", {SILENT, SILENT}, {0, 0}, {"", ""}, {0, 0}},
    {"share.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.60", ""}, {0, 0}},
    {"starter.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.61", ""}, {0, 0}},
    {"*.wild.example.test", {ANSWER, ANSWER}, {300, 300}, {"192.0.2.70", ""}, {0, 0}},
};
#define NZONE (sizeof(zone) / sizeof(zone[0]))

static int asked_other; /* names not in the zone (evdns's own probes included) */

/* "*.SUFFIX" holds `name` if name ends in ".SUFFIX" after one label or more. */
static bool wild_match(const char *wild, const char *name)
{
    size_t w = strlen(wild + 1), n = strlen(name);
    return n > w && strcasecmp(name + n - w, wild + 1) == 0;
}

/* evdns sends names in random case (0x20): compare without it. */
static struct rr *zone_find(const char *name)
{
    for (size_t i = 0; i < NZONE; i++)
        if (strcasecmp(zone[i].name, name) == 0 ||
            (zone[i].name[0] == '*' && wild_match(zone[i].name, name)))
            return &zone[i];
    return NULL;
}

static void add_answers(struct evdns_server_request *req, const char *qname, const struct rr *rr,
                        int fam)
{
    char list[512], *save = NULL;

    snprintf(list, sizeof(list), "%s", rr->addrs[fam]);
    for (char *a = strtok_r(list, " ", &save); a; a = strtok_r(NULL, " ", &save)) {
        uint8_t bytes[16];
        inet_pton(fam == 0 ? AF_INET : AF_INET6, a, bytes);
        if (fam == 0)
            evdns_server_request_add_a_reply(req, qname, 1, bytes, rr->ttl[0]);
        else
            evdns_server_request_add_aaaa_reply(req, qname, 1, bytes, rr->ttl[1]);
    }
}

static void on_query(struct evdns_server_request *req, void *arg)
{
    (void)arg;
    if (req->nquestions != 1) {
        evdns_server_request_respond(req, DNS_ERR_FORMAT);
        return;
    }
    const struct evdns_server_question *qu = req->questions[0];
    int fam = qu->type == EVDNS_TYPE_A ? 0 : qu->type == EVDNS_TYPE_AAAA ? 1 : -1;
    struct rr *rr = zone_find(qu->name);
    if (rr == NULL || fam < 0) {
        asked_other++;
        evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
        return;
    }
    rr->asked[fam]++;
    switch (rr->mode[fam]) {
    case SILENT: evdns_server_request_drop(req); return;
    case NXDOMAIN: evdns_server_request_respond(req, DNS_ERR_NOTEXIST); return;
    case SERVFAIL: evdns_server_request_respond(req, DNS_ERR_SERVERFAILED); return;
    case ANSWER:
        add_answers(req, qu->name, rr, fam); /* echo the question's case */
        evdns_server_request_respond(req, DNS_ERR_NONE);
        return;
    }
}

/* libevent's own messages ("Nameserver ... has failed") as TAP comments. */
static void on_libevent_log(int severity, const char *msg)
{
    (void)severity;
    diag("libevent: %s", msg);
}

/* The fake server on 127.0.0.1:0; `addr` gets the port it was given. */
static struct evdns_server_port *fake_start(struct event_base *base, struct px_addr *addr)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)&addr->ss;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);

    memset(addr, 0, sizeof(*addr));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr->len = sizeof(*sin);
    if (fd == -1 || bind(fd, (struct sockaddr *)sin, addr->len) == -1 ||
        getsockname(fd, (struct sockaddr *)sin, &addr->len) == -1)
        return NULL;
    snprintf(addr->text, sizeof(addr->text), "127.0.0.1:%u", ntohs(sin->sin_port));
    evutil_make_socket_nonblocking(fd);
    return evdns_add_server_port_with_base(base, fd, 0, on_query, NULL);
}

/* ------------------------------------------------------------ helpers */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What a callback saw, and what it should do to others while it runs. */
struct result {
    int calls;
    enum px_dns_result res;
    struct px_dns_answer a;
    uint64_t at_ms;
    struct px_dns_req **cancel;       /* cancel this request from inside cb */
    struct px_resolver **free_this;   /* free this resolver from inside cb */
    const struct px_dns_share *share; /* the share whose count cb looks at */
    unsigned seen;                    /* share->in_flight while cb ran */
};

static unsigned in_flight(const struct px_dns_share *s)
{
    return atomic_load(&s->in_flight);
}

static void on_result(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct result *r = arg;
    r->calls++;
    r->res = res;
    r->a = *a;
    r->at_ms = now_ms();
    if (r->share)
        r->seen = in_flight(r->share);
    if (r->cancel)
        px_resolve_cancel(*r->cancel);
    if (r->free_this) {
        px_resolver_free(*r->free_this);
        *r->free_this = NULL;
    }
}

/* Run the loop until `*calls` reaches `want`, or `ms` pass. */
static void run_until(struct event_base *base, const int *calls, int want, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    struct timeval tick = {0, 10000};

    while (*calls < want && now_ms() < end) {
        event_base_loopexit(base, &tick);
        event_base_dispatch(base);
    }
}

static void run_for(struct event_base *base, int ms)
{
    int never = 0;
    run_until(base, &never, 1, ms);
}

/* `a` is the address `text` (IPv4 as ::ffff:a.b.c.d). */
static bool is_addr(const uint8_t a[16], const char *text)
{
    uint8_t want[16] = {0};

    if (inet_pton(AF_INET, text, want + 12) == 1)
        want[10] = want[11] = 0xff;
    else if (inet_pton(AF_INET6, text, want) != 1)
        return false;
    return memcmp(a, want, 16) == 0;
}

static bool write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return false;
    bool good = fwrite(text, 1, len, f) == len;
    return fclose(f) == 0 && good;
}

static int count_lines(const char *s)
{
    int n = *s ? 1 : 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* ------------------------------------------------------------ hosts file */

static const char good_hosts[] = "# names egressd answers itself\n"
                                 "2001:db8::5 hosts.example.test\n"
                                 "10.0.0.5   hosts.example.test  Alias.Example.Test.  # a comment\n"
                                 "10.0.0.6\thosts.example.test\r\n"
                                 "10.0.0.5 hosts.example.test\n" /* a duplicate: dropped */
                                 "   \t \n"
                                 "::ffff:10.0.0.7 mapped.example.test\n"
                                 "10.0.0.8 last.example.test"; /* no final newline */

static struct px_hosts *test_hosts_good(const char *path)
{
    char err[1024] = "";
    uint8_t out[PX_DNS_MAX_ADDRS][16];
    static const uint8_t alias[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 5};

    ok(write_file(path, good_hosts, strlen(good_hosts)), "write a hosts file");
    struct px_hosts *h = px_hosts_load(path, err, sizeof(err));
    if (!ok(h != NULL, "a good hosts file loads"))
        diag("%s", err);
    size_t n = px_hosts_lookup(h, "hosts.example.test", out, PX_DNS_MAX_ADDRS);
    ok(n == 3, "three distinct addresses for a name on four lines (got %zu)", n);
    ok(n == 3 && is_addr(out[0], "10.0.0.5") && is_addr(out[1], "10.0.0.6") &&
           is_addr(out[2], "2001:db8::5"),
       "IPv4 first, in file order, then IPv6");
    ok(px_hosts_lookup(h, "hosts.example.test", out, 1) == 1, "lookup honours max");
    n = px_hosts_lookup(h, "alias.example.test", out, PX_DNS_MAX_ADDRS);
    ok(n == 1 && memcmp(out[0], alias, 16) == 0,
       "'Alias.Example.Test.' is stored normalized, its IPv4 as ::ffff:10.0.0.5");
    n = px_hosts_lookup(h, "mapped.example.test", out, PX_DNS_MAX_ADDRS);
    ok(n == 1 && is_addr(out[0], "10.0.0.7"), "::ffff:10.0.0.7 is the same as 10.0.0.7");
    n = px_hosts_lookup(h, "last.example.test", out, PX_DNS_MAX_ADDRS);
    ok(n == 1 && is_addr(out[0], "10.0.0.8"), "a last line without newline counts");
    ok(px_hosts_lookup(h, "www.example.test", out, PX_DNS_MAX_ADDRS) == 0, "unknown name: 0");
    ok(px_hosts_lookup(NULL, "hosts.example.test", out, PX_DNS_MAX_ADDRS) == 0, "NULL table: 0");
    return h;
}

static void test_hosts_bad(const char *path)
{
    static const char bad[] = "# line 1\n"
                              "10.0.0.1 good.example.test\n"
                              "10.0.0.2\n"
                              "999.1.1.1 bad.example.test\n"
                              "10.0.0.3 -bad-.example.test\n"
                              "10.0.0.4 10.0.0.9\n"
                              "fe80::1%eth0 zone.example.test\n"
                              "10.0.0.5 ctl\x01.example.test\n"
                              "10.0.0.6 fine.example.test # 2001:db8:: x..y\n";
    char err[4096] = "", want[1100];

    ok(write_file(path, bad, sizeof(bad) - 1), "write a bad hosts file");
    ok(px_hosts_load(path, err, sizeof(err)) == NULL, "a bad hosts file does not load");
    for (char *line = err, *nl; line != NULL; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        diag("%.*s", nl ? (int)(nl - line) : (int)strlen(line), line);
    }
    ok(count_lines(err) == 6, "one error per bad line (%d)", count_lines(err));
    snprintf(want, sizeof(want), "%s:3: expected a host name after the address", path);
    ok(strstr(err, want) != NULL, "line 3: an address without a name");
    snprintf(want, sizeof(want), "%s:4: expected an IPv4 or IPv6 address, found '999.1.1.1'", path);
    ok(strstr(err, want) != NULL, "line 4: a bad address, shown");
    snprintf(want, sizeof(want), "%s:5: expected a host name (", path);
    ok(strstr(err, want) != NULL && strstr(err, "found '-bad-.example.test'") != NULL,
       "line 5: a bad name, shown with the reason");
    snprintf(want, sizeof(want), "%s:6: expected a host name, found the address '10.0.0.9'", path);
    ok(strstr(err, want) != NULL, "line 6: an address where a name belongs");
    snprintf(want, sizeof(want), "%s:7: expected an IPv4 or IPv6 address, found 'fe80::1%%eth0'",
             path);
    ok(strstr(err, want) != NULL, "line 7: no zone ids");
    snprintf(want, sizeof(want), "%s:8: ", path);
    ok(strstr(err, want) != NULL && strstr(err, "found 'ctl?.example.test'") != NULL,
       "line 8: a control byte, shown as '?'");
    snprintf(want, sizeof(want), "%s:2:", path);
    ok(strstr(err, want) == NULL && strstr(err, ":9:") == NULL, "good lines are not named");
}

static void test_hosts_limits(const char *path)
{
    char text[2048] = "", err[1024] = "", want[1100];
    uint8_t out[PX_DNS_MAX_ADDRS][16];
    size_t used = 0;

    for (int i = 1; i <= PX_DNS_MAX_ADDRS; i++)
        used +=
            (size_t)snprintf(text + used, sizeof(text) - used, "10.1.0.%d cap.example.test\n", i);
    ok(write_file(path, text, used), "write 16 addresses for one name");
    struct px_hosts *h = px_hosts_load(path, err, sizeof(err));
    ok(h != NULL && px_hosts_lookup(h, "cap.example.test", out, PX_DNS_MAX_ADDRS) == 16,
       "16 addresses for a name load");
    px_hosts_free(h);

    used += (size_t)snprintf(text + used, sizeof(text) - used, "10.1.0.99 cap.example.test\n");
    ok(write_file(path, text, used), "write 17 addresses for one name");
    ok(px_hosts_load(path, err, sizeof(err)) == NULL, "17 addresses for a name do not");
    snprintf(want, sizeof(want), "%s:17: expected at most 16 addresses for 'cap.example.test'",
             path);
    ok(strstr(err, want) != NULL, "the error names line 17 (%s)", err);

    ok(write_file(path, "", 0), "write an empty file");
    h = px_hosts_load(path, err, sizeof(err));
    ok(h != NULL && px_hosts_lookup(h, "cap.example.test", out, 1) == 0, "an empty file loads");
    px_hosts_free(h);

    FILE *f = fopen(path, "w");
    ok(f != NULL && ftruncate(fileno(f), (16 << 20) + 1) == 0, "make a 16 MiB + 1 file");
    if (f)
        fclose(f);
    ok(px_hosts_load(path, err, sizeof(err)) == NULL && strstr(err, "at most 16777216 bytes"),
       "a file over 16 MiB is refused (%s)", err);

    unlink(path);
    ok(px_hosts_load(path, err, sizeof(err)) == NULL && strncmp(err, path, strlen(path)) == 0 &&
           strstr(err, "No such file") != NULL,
       "a missing file is named (%s)", err);
    px_hosts_free(NULL);
}

/* ------------------------------------------------------------ resolver */

/* One request that should answer at once. */
static struct result resolve_now(struct px_resolver *r, const struct px_hosts *h, const char *name,
                                 bool *sync)
{
    struct result res = {0};
    struct px_dns_req *q = px_resolve(r, h, name, on_result, &res);
    *sync = q == NULL && res.calls == 1;
    return res;
}

/* One request through the network: it must not answer at once. */
static struct result resolve_net(struct event_base *base, struct px_resolver *r, const char *name,
                                 bool *async)
{
    struct result res = {0};
    struct px_dns_req *q = px_resolve(r, NULL, name, on_result, &res);
    *async = q != NULL && res.calls == 0;
    run_until(base, &res.calls, 1, 8000);
    return res;
}

static void test_hosts_first(struct px_resolver *r, const struct px_hosts *h)
{
    struct rr *rr = zone_find("hosts.example.test");
    bool sync;

    struct result res = resolve_now(r, h, "hosts.example.test", &sync);
    ok(sync, "a hosts name answers before px_resolve returns, and it returns NULL");
    ok(res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_HOSTS && res.a.n == 3 &&
           is_addr(res.a.addr[0], "10.0.0.5"),
       "the hosts file wins over the server's 192.0.2.99");
    res = resolve_now(r, h, "HOSTS.Example.test.", &sync);
    ok(sync && res.a.source == PX_DNS_SRC_HOSTS, "an unnormalized name finds it too");
    ok(rr->asked[0] == 0 && rr->asked[1] == 0, "a hosts name is never sent to the network");
}

static void test_answers(struct event_base *base, struct px_resolver *r)
{
    struct rr *www = zone_find("www.example.test");
    bool async, sync;

    struct result res = resolve_net(base, r, "www.example.test", &async);
    ok(async, "an unknown name gives a handle and answers later");
    ok(res.calls == 1 && res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_NET,
       "www: OK from the network");
    ok(res.a.n == 3 && is_addr(res.a.addr[0], "192.0.2.1") && is_addr(res.a.addr[1], "192.0.2.2") &&
           is_addr(res.a.addr[2], "2001:db8::1"),
       "www: both A, as ::ffff:a.b.c.d, then the AAAA");
    ok(www->asked[0] == 1 && www->asked[1] == 1, "one A and one AAAA query");

    res = resolve_now(r, NULL, "www.example.test", &sync);
    ok(sync && res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_CACHE && res.a.n == 3 &&
           is_addr(res.a.addr[2], "2001:db8::1"),
       "again within the TTL: from the cache, at once");
    res = resolve_now(r, NULL, "WWW.Example.Test.", &sync);
    ok(sync && res.a.source == PX_DNS_SRC_CACHE, "the cache is keyed by the normalized name");
    ok(www->asked[0] == 1 && www->asked[1] == 1, "no new query for a cache hit");

    res = resolve_net(base, r, "v6only.example.test", &async);
    ok(async && res.res == PX_DNS_OK && res.a.n == 1 && is_addr(res.a.addr[0], "2001:db8::6"),
       "an AAAA-only name: OK with its IPv6 address");
    res = resolve_net(base, r, "halfbroken.example.test", &async);
    ok(async && res.res == PX_DNS_OK && res.a.n == 1 && is_addr(res.a.addr[0], "192.0.2.20"),
       "A answered, AAAA SERVFAIL: OK with the A");
    res = resolve_net(base, r, "big.example.test", &async);
    ok(async && res.a.n == PX_DNS_MAX_ADDRS && is_addr(res.a.addr[0], "192.0.2.101") &&
           is_addr(res.a.addr[11], "192.0.2.112") && is_addr(res.a.addr[12], "2001:db8::101") &&
           is_addr(res.a.addr[15], "2001:db8::104"),
       "12 A + 8 AAAA: capped at 16, the 12 A first");
}

static void test_ttl(struct event_base *base, struct px_resolver *r)
{
    struct rr *rr = zone_find("short.example.test"), *zero = zone_find("zero.example.test");
    bool async, sync;

    struct result res = resolve_net(base, r, "short.example.test", &async);
    ok(async && res.res == PX_DNS_OK && res.a.n == 2, "short: A (TTL 300) and AAAA (TTL 1)");
    res = resolve_now(r, NULL, "short.example.test", &sync);
    ok(sync && res.a.source == PX_DNS_SRC_CACHE, "short: cached at first");
    run_for(base, 1200);
    res = resolve_net(base, r, "short.example.test", &async);
    ok(async && res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_NET,
       "after 1.2 s the smaller TTL has expired: asked again");
    ok(rr->asked[0] == 2 && rr->asked[1] == 2, "short: two queries per family");

    res = resolve_net(base, r, "zero.example.test", &async);
    ok(async && res.res == PX_DNS_OK, "TTL 0 answers");
    res = resolve_now(r, NULL, "zero.example.test", &sync);
    ok(sync && res.a.source == PX_DNS_SRC_CACHE && zero->asked[0] == 1,
       "TTL 0 is kept for the 1 s minimum");
}

static void test_negative(struct event_base *base, struct px_resolver *r)
{
    struct rr *nx = zone_find("nx.example.test"), *broken = zone_find("broken.example.test");
    bool async, sync;

    struct result res = resolve_net(base, r, "nx.example.test", &async);
    ok(async && res.res == PX_DNS_NXDOMAIN && res.a.n == 0, "NXDOMAIN");
    res = resolve_now(r, NULL, "nx.example.test", &sync);
    ok(sync && res.res == PX_DNS_NXDOMAIN && res.a.source == PX_DNS_SRC_CACHE,
       "NXDOMAIN is cached");
    ok(nx->asked[0] == 1 && nx->asked[1] == 1, "nx: one query per family");

    res = resolve_net(base, r, "empty.example.test", &async);
    ok(async && res.res == PX_DNS_NXDOMAIN, "a name with neither A nor AAAA: NXDOMAIN");
    res = resolve_net(base, r, "nowhere.example.test", &async);
    ok(async && res.res == PX_DNS_NXDOMAIN, "a name the server does not know: NXDOMAIN");

    res = resolve_net(base, r, "broken.example.test", &async);
    ok(async && res.res == PX_DNS_FAIL, "SERVFAIL on both: FAIL");
    int before = broken->asked[0];
    res = resolve_net(base, r, "broken.example.test", &async);
    ok(async && res.res == PX_DNS_FAIL && broken->asked[0] > before,
       "SERVFAIL is not cached: asked again");

    res = resolve_now(r, NULL, "bad..name", &sync);
    ok(sync && res.res == PX_DNS_FAIL, "a name that does not normalize: FAIL at once");
    res = resolve_now(r, NULL, "192.0.2.1", &sync);
    ok(sync && res.res == PX_DNS_FAIL, "an IP literal is not resolved: FAIL at once");
}

static void test_coalesce(struct event_base *base, struct px_resolver *r)
{
    struct rr *rr = zone_find("many.example.test");
    struct result res[10] = {0};
    int handles = 0, total = 0, good = 0;

    for (int i = 0; i < 10; i++)
        handles += px_resolve(r, NULL, "many.example.test", on_result, &res[i]) != NULL;
    ok(handles == 10, "ten requests for one name: ten handles");
    for (int i = 0; i < 10; i++) {
        run_until(base, &res[i].calls, 1, 8000);
        total += res[i].calls;
        good += res[i].res == PX_DNS_OK && is_addr(res[i].a.addr[0], "192.0.2.30");
    }
    ok(total == 10 && good == 10, "each of the ten is answered once, OK");
    ok(rr->asked[0] == 1 && rr->asked[1] == 1, "one query per family for the ten (%d, %d)",
       rr->asked[0], rr->asked[1]);
}

/* Cancels from inside a callback that leave a query with no waiter: the
 * one being delivered must still finish (it is out of the table already),
 * another one is cancelled at evdns from inside evdns's callback. */
static void test_cancel_inside(struct event_base *base, struct px_resolver *r)
{
    struct result last[2] = {0}, other = {0}, silent = {0};
    struct px_dns_req *q[2], *qs;
    struct rr *rr = zone_find("cancelcb.example.test");

    for (int i = 0; i < 2; i++)
        q[i] = px_resolve(r, NULL, "last.example.test", on_result, &last[i]);
    last[0].cancel = &q[1];
    run_until(base, &last[0].calls, 1, 8000);
    run_for(base, 50);
    ok(last[0].calls == 1 && last[1].calls == 0,
       "a callback cancelling its query's last other waiter: that one is never called");

    qs = px_resolve(r, NULL, "cancelcb.example.test", on_result, &silent);
    run_until(base, &rr->asked[1], 1, 2000);
    other.cancel = &qs;
    px_resolve(r, NULL, "inside2.example.test", on_result, &other);
    run_until(base, &other.calls, 1, 8000);
    run_for(base, 50);
    ok(other.calls == 1 && silent.calls == 0,
       "a callback cancelling another query's only waiter: that one is never called");
    struct result again = {0};
    qs = px_resolve(r, NULL, "cancelcb.example.test", on_result, &again);
    run_until(base, &rr->asked[1], 2, 1000);
    ok(qs != NULL && rr->asked[0] == 2 && rr->asked[1] == 2,
       "... and that query was withdrawn: the name is asked afresh (%d, %d)", rr->asked[0],
       rr->asked[1]);
    px_resolve_cancel(qs);
}

static void test_cancel(struct event_base *base, struct px_resolver *r)
{
    struct result res[3] = {0}, all[2] = {0}, in[3] = {0};
    struct px_dns_req *q[3];
    bool async;

    for (int i = 0; i < 3; i++)
        q[i] = px_resolve(r, NULL, "cancel.example.test", on_result, &res[i]);
    px_resolve_cancel(q[1]);
    run_until(base, &res[2].calls, 1, 8000);
    run_for(base, 50);
    ok(res[0].calls == 1 && res[2].calls == 1 && res[1].calls == 0,
       "the cancelled one of three is never called, the others are");

    for (int i = 0; i < 2; i++)
        q[i] = px_resolve(r, NULL, "cancelall.example.test", on_result, &all[i]);
    for (int i = 0; i < 2; i++)
        px_resolve_cancel(q[i]);
    struct rr *rr = zone_find("cancelall.example.test");
    run_until(base, &rr->asked[1], 1, 8000);
    run_for(base, 100);
    ok(all[0].calls == 0 && all[1].calls == 0, "every caller cancelled: nobody is called");
    struct result again = resolve_net(base, r, "cancelall.example.test", &async);
    ok(async && again.res == PX_DNS_OK && again.a.source == PX_DNS_SRC_NET && rr->asked[0] == 2,
       "the cancelled query's answer was not cached: asked again (%d)", rr->asked[0]);

    /* in[0] cancels in[1] (a later waiter); in[2] cancels itself. */
    for (int i = 0; i < 3; i++)
        q[i] = px_resolve(r, NULL, "inside.example.test", on_result, &in[i]);
    in[0].cancel = &q[1];
    in[2].cancel = &q[2];
    run_until(base, &in[2].calls, 1, 8000);
    run_for(base, 50);
    ok(in[0].calls == 1 && in[1].calls == 0,
       "a request cancelled from another's callback is never called");
    ok(in[2].calls == 1, "a callback may cancel its own request (a no-op)");
    px_resolve_cancel(NULL);
    test_cancel_inside(base, r);
}

static void test_free(struct event_base *base, const struct px_addr *srv)
{
    char err[256];
    struct result res[2] = {0}, cb[3] = {0};
    struct rr *rr = zone_find("free.example.test"), *rr2 = zone_find("freecb2.example.test");

    struct px_resolver *r = px_resolver_new(base, srv, 1, err, sizeof(err));
    for (int i = 0; i < 2; i++)
        px_resolve(r, NULL, "free.example.test", on_result, &res[i]);
    px_resolver_free(r);
    run_for(base, 300);
    ok(res[0].calls == 0 && res[1].calls == 0, "freeing a resolver: its requests are never called");
    ok(rr->asked[0] <= 1, "(the server saw %d query)", rr->asked[0]);

    /* cb[0] frees the resolver: cb[1] (same query) and cb[2] (another) are never called. */
    r = px_resolver_new(base, srv, 1, err, sizeof(err));
    cb[0].free_this = &r;
    px_resolve(r, NULL, "freecb.example.test", on_result, &cb[0]);
    px_resolve(r, NULL, "freecb.example.test", on_result, &cb[1]);
    px_resolve(r, NULL, "freecb2.example.test", on_result, &cb[2]);
    run_until(base, &cb[0].calls, 1, 8000);
    run_for(base, 300);
    ok(cb[0].calls == 1 && r == NULL, "a callback freed its resolver");
    ok(cb[1].calls == 0 && cb[2].calls == 0, "after that no other callback runs (%d, %d)",
       cb[1].calls, cb[2].calls);
    ok(rr2->asked[0] >= 1, "(the other query had been sent)");
}

static void test_no_servers(struct event_base *base, const struct px_hosts *h)
{
    char err[256] = "";
    bool sync;
    int before = asked_other;
    struct rr *www = zone_find("www.example.test");
    int www_before = www->asked[0];

    struct px_resolver *r = px_resolver_new(base, NULL, 0, err, sizeof(err));
    ok(r != NULL, "a resolver without servers");
    struct result res = resolve_now(r, h, "hosts.example.test", &sync);
    ok(sync && res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_HOSTS,
       "no servers: the hosts table still answers");
    res = resolve_now(r, h, "www.example.test", &sync);
    ok(sync && res.res == PX_DNS_FAIL, "no servers: any other name is FAIL at once");
    run_for(base, 50);
    ok(www->asked[0] == www_before && asked_other == before, "no servers: nothing is sent");
    px_resolver_free(r);

    struct px_addr unix_addr = {.text = "unix"};
    unix_addr.ss.ss_family = AF_UNIX;
    unix_addr.len = sizeof(sa_family_t);
    ok(px_resolver_new(base, &unix_addr, 1, err, sizeof(err)) == NULL && strstr(err, "unix"),
       "a server that is not IPv4/IPv6 is refused (%s)", err);
}

/* ------------------------------------------------------------ shares */

/* A lookup through px_resolve_shared whose cb notes share's count. */
static struct px_dns_req *lookup(struct px_resolver *r, const struct px_hosts *h, const char *name,
                                 struct px_dns_share *s, unsigned max, struct result *res)
{
    res->share = s;
    return px_resolve_shared(r, h, name, s, max, on_result, res);
}

/* Cancel *q and forget it (so a test that fails cannot cancel it twice). */
static void drop(struct px_dns_req **q)
{
    px_resolve_cancel(*q);
    *q = NULL;
}

/* The only waiter of a query nobody answers goes: its charge at once, and
 * the query itself (the next lookup of the name is a new query). */
static void test_share_cancel(struct event_base *base, struct px_resolver *r)
{
    struct px_dns_share s = {0};
    struct result first = {0}, second = {0};
    struct rr *rr = zone_find("gone.example.test");

    struct px_dns_req *q = lookup(r, NULL, "gone.example.test", &s, 4, &first);
    run_until(base, &rr->asked[1], 1, 2000);
    ok(q != NULL && in_flight(&s) == 1 && rr->asked[0] == 1,
       "a silent name: asked, and charged to its share (%u)", in_flight(&s));
    px_resolve_cancel(q);
    ok(in_flight(&s) == 0, "its only waiter cancelled: the share is back to 0 at once (%u)",
       in_flight(&s));
    q = lookup(r, NULL, "gone.example.test", &s, 4, &second);
    run_until(base, &rr->asked[1], 2, 1000);
    ok(q != NULL && in_flight(&s) == 1 && rr->asked[0] == 2 && rr->asked[1] == 2,
       "the same name again: a new query reaches the server (%d, %d), the cancelled one is "
       "not joined",
       rr->asked[0], rr->asked[1]);
    px_resolve_cancel(q);
    run_for(base, 50);
    ok(first.calls == 0 && second.calls == 0 && in_flight(&s) == 0,
       "neither is ever called, and nothing stays charged");
}

/* max 2: a third name is refused at once; joins, hosts and cache never. */
static void test_share_cap(struct event_base *base, struct px_resolver *r, const struct px_hosts *h)
{
    struct px_dns_share s = {0};
    struct result res[7] = {0};
    struct px_dns_req *q[7];
    struct rr *cap3 = zone_find("cap3.example.test");

    q[0] = lookup(r, NULL, "cap1.example.test", &s, 2, &res[0]);
    q[1] = lookup(r, NULL, "cap2.example.test", &s, 2, &res[1]);
    ok(q[0] && q[1] && in_flight(&s) == 2, "max 2: two lookups of two silent names are taken (%u)",
       in_flight(&s));
    q[2] = lookup(r, NULL, "cap3.example.test", &s, 2, &res[2]);
    ok(q[2] == NULL && res[2].calls == 1 && res[2].res == PX_DNS_BUSY && res[2].a.n == 0,
       "a third name: PX_DNS_BUSY before px_resolve_shared returns, and NULL");
    q[3] = lookup(r, NULL, "cap1.example.test", &s, 2, &res[3]);
    ok(q[3] != NULL && res[3].calls == 0 && in_flight(&s) == 2,
       "a name already in flight is joined at the cap, at no cost");
    q[4] = lookup(r, h, "hosts.example.test", &s, 2, &res[4]);
    ok(q[4] == NULL && res[4].res == PX_DNS_OK && res[4].a.source == PX_DNS_SRC_HOSTS,
       "a hosts-table name is answered at the cap");
    q[5] = lookup(r, NULL, "www.example.test", &s, 2, &res[5]);
    ok(q[5] == NULL && res[5].res == PX_DNS_OK && res[5].a.source == PX_DNS_SRC_CACHE &&
           in_flight(&s) == 2,
       "a cached name is answered at the cap, at no cost");
    run_for(base, 50);
    ok(cap3->asked[0] == 0 && cap3->asked[1] == 0, "the refused name was never sent");
    drop(&q[1]);
    ok(in_flight(&s) == 1, "one of the two cancelled: one left in flight (%u)", in_flight(&s));
    q[6] = lookup(r, NULL, "cap3.example.test", &s, 2, &res[6]);
    ok(q[6] != NULL && res[6].calls == 0 && in_flight(&s) == 2, "then a new name is taken again");
    drop(&q[0]);
    ok(in_flight(&s) == 1, "the starter of cap1 cancelled (its joiner stays): %u in flight",
       in_flight(&s));
    drop(&q[3]);
    drop(&q[6]);
    ok(in_flight(&s) == 0 && res[0].calls + res[1].calls + res[3].calls + res[6].calls == 0,
       "all cancelled: 0 in flight, none called");
    for (int i = 0; i < 7; i++)
        drop(&q[i]); /* what a broken cap let through */
}

/* share NULL or max 0: no cap (a share with max 0 still counts). */
static void test_share_nocap(struct px_resolver *r)
{
    struct px_dns_share s = {0};
    struct result res[3] = {0};
    struct px_dns_req *q[3];

    q[0] = lookup(r, NULL, "nocap.example.test", &s, 0, &res[0]);
    q[1] = lookup(r, NULL, "two1.example.test", &s, 0, &res[1]);
    q[2] = px_resolve_shared(r, NULL, "two2.example.test", NULL, 1, on_result, &res[2]);
    ok(q[0] && q[1] && q[2] && in_flight(&s) == 2,
       "max 0 takes every name and counts them (%u); a NULL share takes any", in_flight(&s));
    for (int i = 0; i < 3; i++)
        px_resolve_cancel(q[i]);
    ok(in_flight(&s) == 0, "cancelled: 0 in flight");
}

/* The charge goes back when the query is answered (before anyone is told),
 * and when its starter goes while others still wait (they get the answer). */
static void test_share_release(struct event_base *base, struct px_resolver *r)
{
    struct px_dns_share s = {0};
    struct result ans = {0}, st = {0}, join = {0};
    struct rr *rr = zone_find("starter.example.test");

    struct px_dns_req *q = lookup(r, NULL, "share.example.test", &s, 2, &ans);
    ok(q != NULL && in_flight(&s) == 1, "an answering name: charged while it is asked");
    run_until(base, &ans.calls, 1, 8000);
    ok(ans.calls == 1 && ans.res == PX_DNS_OK && ans.seen == 0 && in_flight(&s) == 0,
       "answered: the charge was back before its callback ran (%u there, %u now)", ans.seen,
       in_flight(&s));

    q = lookup(r, NULL, "starter.example.test", &s, 1, &st);
    struct px_dns_req *q2 = lookup(r, NULL, "starter.example.test", &s, 1, &join);
    ok(q && q2 && in_flight(&s) == 1, "max 1: a starter and a joiner, one charge");
    px_resolve_cancel(q);
    ok(in_flight(&s) == 0, "the starter cancelled while another waits: the charge is back at once");
    run_until(base, &join.calls, 1, 8000);
    ok(join.calls == 1 && join.res == PX_DNS_OK && join.a.source == PX_DNS_SRC_NET &&
           is_addr(join.a.addr[0], "192.0.2.61") && join.seen == 0 && st.calls == 0,
       "the query went on: the joiner is answered from the network, with 0 in flight");
    ok(rr->asked[0] == 1 && rr->asked[1] == 1, "one query for both (%d, %d)", rr->asked[0],
       rr->asked[1]);
}

/* Two resolvers (two workers) charge one share against one cap; freeing a
 * resolver gives its requests' charges back. */
static void test_share_workers(struct event_base *base, const struct px_addr *srv)
{
    char err[256];
    struct px_dns_share s = {0};
    struct result res[6] = {0};
    struct px_resolver *r1 = px_resolver_new(base, srv, 1, err, sizeof(err));
    struct px_resolver *r2 = px_resolver_new(base, srv, 1, err, sizeof(err));

    struct px_dns_req *q1 = lookup(r1, NULL, "two1.example.test", &s, 2, &res[0]);
    struct px_dns_req *q2 = lookup(r2, NULL, "two2.example.test", &s, 2, &res[1]);
    ok(q1 && q2 && in_flight(&s) == 2, "one lookup on each of two resolvers: 2 on the share");
    ok(lookup(r1, NULL, "two3.example.test", &s, 2, &res[2]) == NULL &&
           lookup(r2, NULL, "two3.example.test", &s, 2, &res[3]) == NULL &&
           res[2].res == PX_DNS_BUSY && res[3].res == PX_DNS_BUSY,
       "a third name is BUSY on either");
    px_resolve_cancel(q1);
    ok(lookup(r2, NULL, "two3.example.test", &s, 2, &res[4]) != NULL && in_flight(&s) == 2,
       "one cancelled on the first: the second takes a new name");
    px_resolver_free(r2);
    ok(in_flight(&s) == 0, "the second resolver freed: its two charges are back (%u)",
       in_flight(&s));
    px_resolver_free(r1);
    run_for(base, 50);
    ok(res[0].calls == 0 && res[1].calls == 0 && res[4].calls == 0, "and nobody is called");
}

/* ------------------------------------------------------------ cache bound */

static int answered;

static void on_count(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    (void)a;
    (void)arg;
    answered += res == PX_DNS_OK;
}

/* More distinct names than the cache holds (the server's wildcard answers
 * them): the cache stays at PX_DNS_CACHE_MAX and the oldest went first. */
static void test_cache_bound(struct event_base *base, const struct px_addr *srv)
{
    /* In batches that the server's socket buffer holds: a lost query
     * would cost its 2 s timeout. */
    enum { BATCH = 64, N = PX_DNS_CACHE_MAX + 2 * BATCH };
    char err[256], name[64];
    size_t most = 0;
    bool sync, async;
    struct px_resolver *r = px_resolver_new(base, srv, 1, err, sizeof(err));

    answered = 0;
    for (int i = 0; i < N; i += BATCH) {
        for (int k = i; k < i + BATCH; k++) {
            snprintf(name, sizeof(name), "n%d.wild.example.test", k);
            px_resolve(r, NULL, name, on_count, NULL);
        }
        run_until(base, &answered, i + BATCH, 8000);
        most = px_resolver_cached(r) > most ? px_resolver_cached(r) : most;
    }
    ok(answered == N, "%d distinct names answered (%d)", N, answered);
    ok(px_resolver_cached(r) == PX_DNS_CACHE_MAX && most == PX_DNS_CACHE_MAX,
       "the cache holds %d of them, never more (%zu now, %zu at most)", PX_DNS_CACHE_MAX,
       px_resolver_cached(r), most);
    snprintf(name, sizeof(name), "n%d.wild.example.test", N - 1);
    struct result res = resolve_now(r, NULL, name, &sync);
    ok(sync && res.a.source == PX_DNS_SRC_CACHE, "the newest name is cached");
    res = resolve_net(base, r, "n0.wild.example.test", &async);
    ok(async && res.res == PX_DNS_OK && res.a.source == PX_DNS_SRC_NET,
       "the oldest was evicted: asked again");
    px_resolver_free(r);
}

/* The slow checks, overlapped: a silent server (2 s x 2 tries) and the
 * 5 s negative cache. */
static void test_slow(struct event_base *base, const struct px_addr *srv)
{
    char err[256];
    struct result silent = {0}, nx = {0};
    struct rr *rr = zone_find("nx.example.test");
    bool async;

    struct px_resolver *r = px_resolver_new(base, srv, 1, err, sizeof(err));
    struct rr *retry = zone_find("retry.example.test");
    struct result gone = {0};
    int before = rr->asked[0];
    uint64_t start = now_ms();
    px_resolve(r, NULL, "nx.example.test", on_result, &nx);
    px_resolve(r, NULL, "silent.example.test", on_result, &silent);
    px_resolve_cancel(px_resolve(r, NULL, "retry.example.test", on_result, &gone));
    run_until(base, &silent.calls, 1, 10000);
    uint64_t took = silent.at_ms - start;
    ok(gone.calls == 0 && retry->asked[0] == 1 && retry->asked[1] == 1,
       "a query cancelled at once is not retried by evdns after its 2 s timeout (%d, %d "
       "queries; silent.example.test got %d)",
       retry->asked[0], retry->asked[1], zone_find("silent.example.test")->asked[0]);
    ok(nx.calls == 1 && nx.res == PX_DNS_NXDOMAIN && rr->asked[0] == before + 1,
       "nx answered from the network");
    ok(silent.calls == 1 && silent.res == PX_DNS_FAIL, "a server that never answers: FAIL");
    ok(silent.calls == 1 && took >= 3500 && took <= 5500, "after the timeout: %llu ms",
       (unsigned long long)took);
    run_for(base, (int)(5300 - (now_ms() - nx.at_ms)));
    struct result res = resolve_net(base, r, "nx.example.test", &async);
    ok(async && res.res == PX_DNS_NXDOMAIN && rr->asked[0] == before + 2,
       "after 5 s the negative answer has expired: asked again");
    struct result again = {0};
    ok(px_resolve(r, NULL, "silent.example.test", on_result, &again) != NULL,
       "a timeout is not cached");
    px_resolver_free(r);
    run_for(base, 50);
    ok(again.calls == 0, "freed while waiting: never called");
}

int main(void)
{
    char path[] = "/tmp/px-hosts-XXXXXX", err[256] = "";
    int fd = mkstemp(path);
    struct px_addr srv;

    if (fd != -1)
        close(fd);
    ok(fd != -1, "temp file");
    struct px_hosts *h = test_hosts_good(path);
    test_hosts_bad(path);
    test_hosts_limits(path);

    event_set_log_callback(on_libevent_log);
    struct event_base *base = event_base_new();
    struct evdns_server_port *port = fake_start(base, &srv);
    if (!ok(base && port, "fake DNS server on %s", srv.text))
        return tap_done();
    struct px_resolver *r = px_resolver_new(base, &srv, 1, err, sizeof(err));
    if (!ok(r != NULL, "a resolver asking the fake server (%s)", err))
        return tap_done();

    test_hosts_first(r, h);
    test_answers(base, r);
    test_ttl(base, r);
    test_negative(base, r);
    test_coalesce(base, r);
    test_cancel(base, r);
    test_share_cancel(base, r);
    test_share_cap(base, r, h);
    test_share_nocap(r);
    test_share_release(base, r);
    test_share_workers(base, &srv);
    test_cache_bound(base, &srv);
    test_free(base, &srv);
    test_no_servers(base, h);
    test_slow(base, &srv);

    px_resolver_free(r);
    run_for(base, 50); /* let the freed resolvers' last evdns callbacks run */
    evdns_close_server_port(port);
    event_base_free(base);
    px_hosts_free(h);
    return tap_done();
}
