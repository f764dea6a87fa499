/*
 * bench_policy.c - decision speed and load cost of a large generated policy.
 *
 *   bench_policy [-r RULES] [-x REGEXES] [-q REQUEST-RULES] [-n DECISIONS] [-s SEED]
 *
 * Generates one preset of RULES rules (default 100 000): REGEXES of them
 * (default 1 000) are `~` regexes, the rest are split between exact hosts,
 * `*.suffix` and `.suffix` rules, with ports and a few denies, the shape of
 * a real allowlist grown large.  Reports:
 *   - load: parse + compile time (median of 5 loads) and heap bytes per rule;
 *   - name-phase decisions, timed one by one, median / p90 / p99 ns, for
 *     hosts that hit exact rules, wildcard rules, miss every hash rule but
 *     match a regex, and miss everything (every regex tried);
 *   - request decisions (policy_decide_request, method and path) in a
 *     second preset of REQUEST-RULES rules (default 1 000), two per host,
 *     each with `methods` and three `paths` globs: a request the first
 *     rule admits, one only the second admits, one refused for its method
 *     and one for its path.
 * Nothing is read from disk: the text is built in memory.
 */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

#define NOW 1796083200

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One decision takes about as long as clock_gettime() itself, so single
 * decisions are timed with the CPU's time-stamp counter where there is one,
 * calibrated against CLOCK_MONOTONIC. */
#if defined(__x86_64__)
#include <x86intrin.h>
static double tick_ns = 0;
static double ticks(void)
{
    unsigned aux;
    return (double)__rdtscp(&aux);
}
static void calibrate(void)
{
    double t0 = now_ns(), c0 = ticks();
    while (now_ns() - t0 < 50e6)
        ;
    tick_ns = (now_ns() - t0) / (ticks() - c0);
}
#else
static double tick_ns = 1;
static double ticks(void)
{
    return now_ns();
}
static void calibrate(void)
{
}
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

struct text {
    char *s;
    size_t len, cap;
};

static void add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    if (t->cap - t->len < 256) {
        t->cap = t->cap ? t->cap * 2 : 1 << 20;
        t->s = realloc(t->s, t->cap);
    }
    va_start(ap, fmt);
    t->len += (size_t)vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
}

static const char *const tlds[] = {"com", "org", "net", "io", "dev", "example"};

/* Rule i of the generated policy; hosts are "hN.zoneM.TLD". */
static void gen_rule(struct text *t, long i, long n_regex)
{
    const char *tld = tlds[i % 6];
    if (i < n_regex) {
        add(t, "~[a-z0-9-]+\\.svc%ld\\.%s\n", i, tld);
        return;
    }
    switch (i % 10) {
    case 0: add(t, "*.zone%ld.%s\n", i, tld); break;
    case 1: add(t, ".zone%ld.%s:443,8443\n", i, tld); break;
    case 2: add(t, "deny h%ld.zone%ld.%s\n", i, i / 7, tld); break;
    case 3: add(t, "h%ld.zone%ld.%s:*\n", i, i / 7, tld); break;
    default: add(t, "h%ld.zone%ld.%s\n", i, i / 7, tld); break;
    }
}

/* Rule i of the request-rule preset: two rules per host "hN.req.test". */
static void gen_req_rule(struct text *t, long i)
{
    long h = i / 2;
    if (i % 2 == 0)
        add(t, "h%ld.req.test methods GET,HEAD paths /org%ld/**,/api/v1/*/items,/static/*.js\n", h,
            h);
    else
        add(t, "h%ld.req.test methods POST,PUT paths /org%ld/*/issues,/upload/**,/api/v2/**\n", h,
            h);
}

/* One request decision to time: method and path for host k. */
struct req_kind {
    const char *name, *method, *want;
    void (*path)(char *buf, size_t size, long h);
};

static void path_first(char *buf, size_t size, long h)
{
    snprintf(buf, size, "/org%ld/repo/src/main.c", h);
}

static void path_second(char *buf, size_t size, long h)
{
    snprintf(buf, size, "/org%ld/repo/issues", h);
}

static void path_elsewhere(char *buf, size_t size, long h)
{
    snprintf(buf, size, "/elsewhere%ld/deep/path/a/b/c/d", h);
}

/* Time request decisions in preset "req" (n_hosts hosts): each alone,
 * sorted ns into ns; wrong counts answers other than want. */
static void time_requests(struct policy *p, const struct req_kind *k, long n, long n_hosts,
                          double *ns, double timer, long *wrong)
{
    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, "req", NULL, 0, "bench", &d);
    struct policy_host *hosts = malloc(sizeof(*hosts) * (size_t)n);
    char(*paths)[96] = malloc(sizeof(*paths) * (size_t)n), buf[128];
    struct policy_verdict v;

    for (long i = 0; i < n; i++) {
        long h = (i * 7919) % n_hosts;
        snprintf(buf, sizeof(buf), "h%ld.req.test", h);
        if (policy_host_normalize(buf, strlen(buf), &hosts[i]) != POLICY_HOST_OK)
            abort();
        k->path(paths[i], sizeof(paths[i]), h);
    }
    for (long i = 0; i < n; i++) {
        struct policy_request rq = {k->method, strlen(k->method), paths[i], strlen(paths[i])};
        double t0 = ticks();
        policy_decide_request(b, &hosts[i], 443, &rq, NULL, 0, NOW, &v);
        ns[i] = (ticks() - t0) * tick_ns - timer;
        char got[64];
        snprintf(got, sizeof(got), "%s %s", policy_decision_str(v.decision),
                 policy_reason_str(v.reason));
        if (strcmp(got, k->want) != 0)
            (*wrong)++;
    }
    qsort(ns, (size_t)n, sizeof(double), cmp_double);
    policy_binding_free(b);
    policy_diag_free(&d);
    free(hosts);
    free(paths);
}

static struct policy *load(const struct text *t, const struct text *req, double *ms, size_t *bytes)
{
    struct policy_diag d = {0};
    struct mallinfo2 before = mallinfo2();
    double t0 = now_ns();
    struct policy_builder *b = policy_builder_new();
    policy_builder_add_preset(b, "big", "big.allow", t->s, t->len);
    policy_builder_add_preset(b, "req", "req.allow", req->s, req->len);
    struct policy *p = policy_builder_finish(b, &d);
    *ms = (now_ns() - t0) / 1e6;
    *bytes = mallinfo2().uordblks - before.uordblks + (mallinfo2().hblkhd - before.hblkhd);
    for (size_t i = 0; i < d.n && i < 5; i++)
        fprintf(stderr, "%s\n", d.lines[i]);
    policy_diag_free(&d);
    return p;
}

/* Time each decision alone; fill sorted ns per decision (timer cost taken off). */
static void time_decisions(const struct policy_binding *b, struct policy_host *hosts, long n,
                           double *ns, double timer, const char *want, long *wrong)
{
    struct policy_verdict v;
    for (long i = 0; i < n; i++) {
        double t0 = ticks();
        policy_decide_name(b, &hosts[i], 443, NOW, &v);
        ns[i] = (ticks() - t0) * tick_ns - timer;
        if (strcmp(policy_decision_str(v.decision), want) != 0)
            (*wrong)++;
    }
    qsort(ns, (size_t)n, sizeof(double), cmp_double);
}

static double timer_cost(void)
{
    double ns[1001];
    for (int i = 0; i < 1001; i++) {
        double t0 = ticks();
        ns[i] = (ticks() - t0) * tick_ns;
    }
    qsort(ns, 1001, sizeof(double), cmp_double);
    return ns[500];
}

/* A pointer chase over `bytes` of memory in random order: what one cache
 * miss costs on this machine. */
static double memory_latency(size_t bytes)
{
    size_t n = bytes / 64, *perm = malloc(n * sizeof(size_t)), p = 0;
    char *buf = malloc(bytes);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = ((size_t)rand() * RAND_MAX + (size_t)rand()) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        *(size_t *)(buf + perm[i] * 64) = perm[(i + 1) % n] * 64;
    double t0 = now_ns();
    for (int i = 0; i < 1000000; i++)
        p = *(volatile size_t *)(buf + p);
    double ns = (now_ns() - t0) / 1e6;
    free(perm);
    free(buf);
    return ns;
}

typedef void (*host_fn)(char *buf, size_t size, long k, long rules, long n_regex);

/* Hosts that hit an exact rule (allowed ones: i % 10 >= 4). */
static void host_exact(char *buf, size_t size, long k, long rules, long n_regex)
{
    long i = n_regex + (k * 7919) % (rules - n_regex);
    i += (i % 10 < 4) ? 4 - i % 10 : 0;
    if (i >= rules)
        i -= 10;
    snprintf(buf, size, "h%ld.zone%ld.%s", i, i / 7, tlds[i % 6]);
}

/* Hosts under a *.zone rule (i % 10 == 0), two labels deep. */
static void host_wild(char *buf, size_t size, long k, long rules, long n_regex)
{
    long i = n_regex + (k * 7919) % (rules - n_regex);
    i -= i % 10;
    if (i < n_regex)
        i += 10;
    snprintf(buf, size, "api.v%ld.zone%ld.%s", k % 5, i, tlds[i % 6]);
}

/* The same exact hits, but drawn from 1 000 hosts: a sandbox's traffic
 * returns to the same few hosts, so their rules stay in cache. */
static void host_hot(char *buf, size_t size, long k, long rules, long n_regex)
{
    host_exact(buf, size, k % 1000, rules, n_regex);
}

static void host_regex(char *buf, size_t size, long k, long rules, long n_regex)
{
    (void)rules;
    long i = (k * 7919) % n_regex;
    snprintf(buf, size, "bucket-%ld.svc%ld.%s", k, i, tlds[i % 6]);
}

static void host_miss(char *buf, size_t size, long k, long rules, long n_regex)
{
    (void)rules;
    (void)n_regex;
    snprintf(buf, size, "www.nowhere%ld.test", k);
}

int main(int argc, char **argv)
{
    long rules = 100000, n_regex = 1000, n = 200000, n_req = 1000;
    unsigned seed = 1;
    int o;
    while ((o = getopt(argc, argv, "r:x:q:n:s:")) != -1) {
        switch (o) {
        case 'r': rules = atol(optarg); break;
        case 'q': n_req = atol(optarg); break;
        case 'x': n_regex = atol(optarg); break;
        case 'n': n = atol(optarg); break;
        case 's': seed = (unsigned)atoi(optarg); break;
        default:
            fprintf(stderr, "usage: bench_policy [-r RULES] [-x REGEXES] [-q REQUEST-RULES] "
                            "[-n DECISIONS]\n");
            return 2;
        }
    }
    if (rules < 20 || n_regex < 1 || n_regex >= rules / 2 || n < 100 || n_req < 2) {
        fprintf(stderr, "bench_policy: need RULES >= 20, 1 <= REGEXES < RULES/2, REQUEST-RULES "
                        ">= 2, DECISIONS >= 100\n");
        return 2;
    }
    srand(seed);
    struct text t = {0}, rt = {0};
    for (long i = 0; i < rules; i++)
        gen_rule(&t, i, n_regex);
    for (long i = 0; i < n_req; i++)
        gen_req_rule(&rt, i);

    double load_ms[5];
    size_t bytes = 0;
    struct policy *p = NULL;
    for (int r = 0; r < 5; r++) {
        policy_unref(p);
        p = load(&t, &rt, &load_ms[r], &bytes);
        if (p == NULL)
            return 1;
    }
    qsort(load_ms, 5, sizeof(double), cmp_double);
    printf("policy: %ld rules (%ld regex), %zu bytes of text\n", rules, n_regex, t.len);
    printf("load:   median %.1f ms (min %.1f, max %.1f) for parse + compile; %.0f bytes per rule\n",
           load_ms[2], load_ms[0], load_ms[4], (double)bytes / (double)rules);

    struct policy_diag d = {0};
    struct policy_binding *b = policy_binding_new(p, "big", NULL, 0, "bench", &d);
    struct policy_host *hosts = malloc(sizeof(*hosts) * (size_t)n);
    double *ns = malloc(sizeof(double) * (size_t)n);
    calibrate();
    double timer = timer_cost();
    static const struct {
        const char *name, *want;
        host_fn fn;
        long div; /* fewer decisions for the slow kinds */
    } kinds[] = {
        {"exact rule hit", "allow", host_exact, 1},
        {"exact rule hit, 1 000 hot hosts", "allow", host_hot, 1},
        {"wildcard rule hit", "allow", host_wild, 1},
        {"regex rule hit", "allow", host_regex, 20},
        {"no rule (all regexes tried)", "deny", host_miss, 20},
    };
    printf("decisions (name phase, ns each, timer cost %.0f ns taken off):\n", timer);
    printf("  %-32s %8s %8s %8s %8s %8s\n", "kind", "n", "median", "p90", "p99", "wrong");
    int rc = 0;
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        long m = n / kinds[k].div, wrong = 0;
        char buf[256];
        for (long i = 0; i < m; i++) {
            kinds[k].fn(buf, sizeof(buf), i, rules, n_regex);
            if (policy_host_normalize(buf, strlen(buf), &hosts[i]) != POLICY_HOST_OK)
                return 1;
        }
        time_decisions(b, hosts, m, ns, timer, kinds[k].want, &wrong);
        printf("  %-32s %8ld %8.0f %8.0f %8.0f %8ld\n", kinds[k].name, m, ns[m / 2], ns[m * 9 / 10],
               ns[m * 99 / 100], wrong);
        rc |= wrong != 0;
    }
    static const struct req_kind req_kinds[] = {
        {"admitted by the first rule", "GET", "allow allowed", path_first},
        {"admitted by the second rule", "POST", "allow allowed", path_second},
        {"refused: method", "DELETE", "deny method_not_allowed", path_first},
        {"refused: path", "GET", "deny path_not_allowed", path_elsewhere},
    };
    printf("request decisions (%ld rules with methods and paths, two per host; ns each):\n", n_req);
    printf("  %-32s %8s %8s %8s %8s %8s\n", "kind", "n", "median", "p90", "p99", "wrong");
    for (size_t k = 0; k < sizeof(req_kinds) / sizeof(req_kinds[0]); k++) {
        long wrong = 0;
        time_requests(p, &req_kinds[k], n, n_req / 2, ns, timer, &wrong);
        printf("  %-32s %8ld %8.0f %8.0f %8.0f %8ld\n", req_kinds[k].name, n, ns[n / 2],
               ns[n * 9 / 10], ns[n * 99 / 100], wrong);
        rc |= wrong != 0;
    }
    printf("memory: %.0f ns per dependent load, random over 16 MiB (the floor for a decision\n"
           "        whose rule is not in cache)\n",
           memory_latency(16u << 20));
    policy_binding_free(b);
    policy_unref(p);
    free(hosts);
    free(ns);
    free(t.s);
    free(rt.s);
    return rc;
}
