/*
 * config.c - egressd.conf, read line by line into struct px_config.
 *
 * Every directive is checked as it is read; all errors are collected so an
 * operator fixes a file in one round, not one typo per restart.
 */
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "policy.h"

#define MAX_WORDS 16

struct reader {
    struct px_config *c;
    const char *file;
    char dir[1024]; /* the config file's directory, for relative paths */
    unsigned line;
    char *err;
    size_t errlen, used;
    int errors;
};

static void fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct reader *r, const char *fmt, ...)
{
    va_list ap;
    int n;

    r->errors++;
    if (r->used + 1 >= r->errlen)
        return;
    n = r->line ? snprintf(r->err + r->used, r->errlen - r->used, "%s%s:%u: ", r->used ? "\n" : "",
                           r->file, r->line)
                : snprintf(r->err + r->used, r->errlen - r->used, "%s%s: ", r->used ? "\n" : "",
                           r->file);
    if (n > 0)
        r->used += (size_t)n < r->errlen - r->used ? (size_t)n : r->errlen - r->used - 1;
    va_start(ap, fmt);
    n = vsnprintf(r->err + r->used, r->errlen - r->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        r->used += (size_t)n < r->errlen - r->used ? (size_t)n : r->errlen - r->used - 1;
}

struct unit {
    const char *suffix;
    uint64_t scale;
};

/* A decimal number followed by one of the units (an exact suffix match). */
static bool parse_scaled(const char *s, const struct unit *units, uint64_t *out)
{
    char *end;

    if (s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return false;
    for (const struct unit *u = units; u->suffix != NULL; u++) {
        if (strcasecmp(end, u->suffix) == 0) {
            if (v > UINT64_MAX / u->scale)
                return false;
            *out = v * u->scale;
            return true;
        }
    }
    return false;
}

bool px_parse_duration(const char *s, uint64_t *ms)
{
    static const struct unit units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {NULL, 0}};
    return parse_scaled(s, units, ms);
}

bool px_parse_size(const char *s, uint64_t *bytes)
{
    static const struct unit units[] = {
        {"", 1}, {"k", 1ULL << 10}, {"m", 1ULL << 20}, {"g", 1ULL << 30}, {NULL, 0}};
    return parse_scaled(s, units, bytes);
}

bool px_parse_addr(const char *s, struct px_addr *a, uint16_t default_port)
{
    char host[64], port[8];
    const char *colon;
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *res;
    size_t hl;

    if (strlen(s) >= sizeof(a->text))
        return false;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || (end[1] != '\0' && end[1] != ':'))
            return false;
        hl = (size_t)(end - s - 1);
        memcpy(host, s + 1, hl < sizeof(host) ? hl : 0);
        colon = end[1] == ':' ? end + 1 : NULL;
    } else {
        colon = strrchr(s, ':');
        if (colon != NULL && strchr(s, ':') != colon)
            return false; /* IPv6 needs brackets when a port follows */
        hl = colon ? (size_t)(colon - s) : strlen(s);
        memcpy(host, s, hl < sizeof(host) ? hl : 0);
    }
    if (hl == 0 || hl >= sizeof(host))
        return false;
    host[hl] = '\0';
    if (colon != NULL) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || p < 0 || p > 65535)
            return false;
        snprintf(port, sizeof(port), "%ld", p);
    } else if (default_port != 0) {
        snprintf(port, sizeof(port), "%u", default_port);
    } else {
        return false;
    }
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return false;
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    snprintf(a->text, sizeof(a->text), "%s", s);
    return true;
}

/* A path directive: relative paths are taken from the config's directory. */
static void set_path(struct reader *r, char *dst, size_t size, const char *v)
{
    int n = v[0] == '/' || r->dir[0] == '\0' ? snprintf(dst, size, "%s", v)
                                             : snprintf(dst, size, "%s/%s", r->dir, v);
    if (n < 0 || (size_t)n >= size)
        fail(r, "path too long (at most %zu bytes)", size - 1);
}

static void set_addr(struct reader *r, struct px_addr *a, const char *v, const char *what)
{
    if (!px_parse_addr(v, a, 0))
        fail(r, "expected %s as a numeric ADDR:PORT (IPv6 in brackets), found '%s'", what, v);
}

static void set_duration(struct reader *r, uint64_t *ms, const char *v)
{
    if (!px_parse_duration(v, ms) || *ms == 0)
        fail(r, "expected a duration such as 500ms, 5s, 10m or 24h, found '%s'", v);
}

static void set_count(struct reader *r, uint64_t *n, const char *v, bool size)
{
    bool okay =
        size ? px_parse_size(v, n) : px_parse_size(v, n) && strspn(v, "0123456789") == strlen(v);
    if (!okay)
        fail(r, "expected %s, found '%s'", size ? "a size such as 512, 16k, 4m or 1g" : "a number",
             v);
}

/* max-header-bytes: a size within PX_HEADER_BYTES_MIN..MAX. */
static void set_header_bytes(struct reader *r, uint64_t *n, const char *v)
{
    if (!px_parse_size(v, n))
        fail(r, "expected a size such as 512, 16k, 4m or 1g, found '%s'", v);
    else if (*n < PX_HEADER_BYTES_MIN || *n > PX_HEADER_BYTES_MAX)
        fail(r,
             "expected max-header-bytes of %uk..%uk (a longer head than %uk cannot be "
             "forwarded), found '%s'",
             PX_HEADER_BYTES_MIN / 1024, PX_HEADER_BYTES_MAX / 1024, PX_HEADER_BYTES_MAX / 1024, v);
}

static void set_bool(struct reader *r, bool *b, const char *v, const char *yes, const char *no)
{
    if (strcmp(v, yes) == 0)
        *b = true;
    else if (strcmp(v, no) == 0)
        *b = false;
    else
        fail(r, "expected '%s' or '%s', found '%s'", yes, no, v);
}

static void add_listener(struct reader *r, struct px_addr *list, size_t *n, const char *v,
                         const char *what)
{
    if (*n == PX_MAX_LISTENERS) {
        fail(r, "too many %s listeners (at most %d)", what, PX_MAX_LISTENERS);
        return;
    }
    if (px_parse_addr(v, &list[*n], 0))
        (*n)++;
    else
        fail(r, "expected a numeric ADDR:PORT to listen on (IPv6 in brackets), found '%s'", v);
}

static void add_range(struct reader *r, struct px_range *list, size_t *n, const char *v)
{
    if (*n == PX_MAX_RANGES) {
        fail(r, "too many ranges (at most %d)", PX_MAX_RANGES);
        return;
    }
    snprintf(list[*n].spec, sizeof(list[*n].spec), "%s", v);
    snprintf(list[*n].where, sizeof(list[*n].where), "%s:%u", r->file, r->line);
    (*n)++;
}

static void directive_tls(struct reader *r, char **w, int n)
{
    struct px_config *c = r->c;
    size_t i = c->n_transparent_tls;

    if (n != 2 && !(n == 4 && strcmp(w[2], "upstream-port") == 0)) {
        fail(r, "expected 'transparent-tls ADDR:PORT [upstream-port N]'");
        return;
    }
    add_listener(r, c->transparent_tls, &c->n_transparent_tls, w[1], "transparent-tls");
    if (c->n_transparent_tls == i)
        return;
    c->tls_upstream_port[i] = 443;
    if (n == 4) {
        uint64_t p;
        if (px_parse_size(w[3], &p) && p >= 1 && p <= 65535 &&
            strspn(w[3], "0123456789") == strlen(w[3]))
            c->tls_upstream_port[i] = (uint16_t)p;
        else
            fail(r, "expected a port 1..65535 after upstream-port, found '%s'", w[3]);
    }
}

int px_oauth_provider_index(const char *name)
{
    static const char *const names[PX_OAUTH_PROVIDERS] = {"anthropic", "openai", "google"};

    for (int i = 0; i < PX_OAUTH_PROVIDERS; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

/* "https://HOST[:PORT]/PATH" into o; false when it is not one. */
static bool oauth_url(struct px_oauth_cfg *o, const char *v)
{
    static const char scheme[] = "https://";
    const char *host = v + sizeof(scheme) - 1, *slash, *colon;
    uint64_t port = 443;

    if (strncmp(v, scheme, sizeof(scheme) - 1) != 0 || (slash = strchr(host, '/')) == NULL ||
        strlen(slash) >= sizeof(o->path))
        return false;
    colon = memchr(host, ':', (size_t)(slash - host));
    size_t hlen = (size_t)((colon ? colon : slash) - host);
    if (hlen == 0 || hlen >= sizeof(o->host))
        return false;
    if (colon != NULL) {
        char digits[8];
        size_t dlen = (size_t)(slash - colon - 1);
        if (dlen == 0 || dlen > 5)
            return false;
        snprintf(digits, sizeof(digits), "%.*s", (int)dlen, colon + 1);
        if (strspn(digits, "0123456789") != dlen || !px_parse_size(digits, &port) || port < 1 ||
            port > 65535)
            return false;
    }
    snprintf(o->host, sizeof(o->host), "%.*s", (int)hlen, host);
    snprintf(o->path, sizeof(o->path), "%s", slash);
    o->port = (uint16_t)port;
    return true;
}

/* `oauth-provider NAME token-url URL [client-id ID] [client-secret S]`. */
static void directive_oauth(struct reader *r, char **w, int n)
{
    static const char usage[] = "expected 'oauth-provider anthropic|openai|google token-url "
                                "https://HOST[:PORT]/PATH [client-id ID] [client-secret S]'";
    int k = n >= 2 ? px_oauth_provider_index(w[1]) : -1;

    if (k < 0 || n % 2 != 0) {
        fail(r, "%s", usage);
        return;
    }
    struct px_oauth_cfg *o = &r->c->oauth[k];
    *o = (struct px_oauth_cfg){.set = true};
    for (int i = 2; i + 1 < n; i += 2) {
        if (strcmp(w[i], "token-url") == 0 && !oauth_url(o, w[i + 1]))
            fail(r, "expected an https://HOST[:PORT]/PATH URL after token-url, found '%s'",
                 w[i + 1]);
        else if (strcmp(w[i], "client-id") == 0)
            snprintf(o->client_id, sizeof(o->client_id), "%s", w[i + 1]);
        else if (strcmp(w[i], "client-secret") == 0)
            snprintf(o->client_secret, sizeof(o->client_secret), "%s", w[i + 1]);
        else if (strcmp(w[i], "token-url") != 0)
            fail(r, "%s; found '%s'", usage, w[i]);
    }
    if (o->host[0] == '\0')
        fail(r, "oauth-provider %s: no token-url", w[1]);
}

static void directive_admin(struct reader *r, const char *v)
{
    struct px_config *c = r->c;
    c->have_admin = true;
    if (strncmp(v, "unix:", 5) == 0) {
        char path[1024];
        set_path(r, path, sizeof(path), v + 5);
        if (strlen(path) >= sizeof(c->admin_unix) || v[5] == '\0')
            fail(r, "expected a unix socket path of 1..%zu bytes after 'unix:'",
                 sizeof(c->admin_unix) - 1);
        else
            snprintf(c->admin_unix, sizeof(c->admin_unix), "%s", path);
        return;
    }
    c->admin_is_tcp = true;
    set_addr(r, &c->admin_tcp, v, "unix:PATH or an address");
}

static void directive_workers(struct reader *r, const char *v)
{
    uint64_t n;
    if (strcmp(v, "auto") == 0)
        r->c->workers = 0;
    else if (px_parse_size(v, &n) && strspn(v, "0123456789") == strlen(v) && n >= 1 && n <= 256)
        r->c->workers = (unsigned)n;
    else
        fail(r, "expected 'auto' or a number of workers 1..256, found '%s'", v);
}

static void directive_resolver(struct reader *r, const char *v)
{
    struct px_config *c = r->c;
    if (c->n_resolvers == PX_MAX_RESOLVERS) {
        fail(r, "too many resolvers (at most %d)", PX_MAX_RESOLVERS);
        return;
    }
    if (px_parse_addr(v, &c->resolvers[c->n_resolvers], 53))
        c->n_resolvers++;
    else
        fail(r, "expected a resolver as a numeric ADDR[:PORT], found '%s'", v);
}

static void directive_name(struct reader *r, char *dst, size_t size, const char *v)
{
    if (strlen(v) >= size || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_.") != strlen(v))
        fail(r, "expected a name (letters, digits, '-', '_', '.'), found '%s'", v);
    else
        snprintf(dst, size, "%s", v);
}

/* dns-ttl-max: a duration of whole seconds, at least one. */
static void set_ttl_max(struct reader *r, uint64_t *ms, const char *v)
{
    if (!px_parse_duration(v, ms) || *ms < 1000 || *ms % 1000 != 0 || *ms > 86400000)
        fail(r, "expected a TTL of whole seconds, 1s..24h, found '%s'", v);
}

static void directive_dns_log(struct reader *r, const char *v)
{
    if (strcmp(v, "all") == 0)
        r->c->dns_log = PX_DNS_LOG_ALL;
    else if (strcmp(v, "summary") == 0)
        r->c->dns_log = PX_DNS_LOG_SUMMARY;
    else if (strcmp(v, "off") == 0)
        r->c->dns_log = PX_DNS_LOG_OFF;
    else
        fail(r, "expected 'all', 'summary' or 'off', found '%s'", v);
}

/* One directive with one value. */
static bool directive_1(struct reader *r, const char *k, const char *v)
{
    struct px_config *c = r->c;
    if (strcmp(k, "listen") == 0)
        add_listener(r, c->listen, &c->n_listen, v, "listen");
    else if (strcmp(k, "transparent-http") == 0)
        add_listener(r, c->transparent_http, &c->n_transparent_http, v, "transparent-http");
    else if (strcmp(k, "admin") == 0)
        directive_admin(r, v);
    else if (strcmp(k, "admin-token-file") == 0)
        set_path(r, c->admin_token_file, sizeof(c->admin_token_file), v);
    else if (strcmp(k, "metrics") == 0)
        c->have_metrics = true, set_addr(r, &c->metrics, v, "the metrics address");
    else if (strcmp(k, "workers") == 0)
        directive_workers(r, v);
    else if (strcmp(k, "resolver") == 0)
        directive_resolver(r, v);
    else if (strcmp(k, "hosts-file") == 0)
        set_path(r, c->hosts_file, sizeof(c->hosts_file), v);
    else if (strcmp(k, "policy-dir") == 0)
        set_path(r, c->policy_dir, sizeof(c->policy_dir), v);
    else if (strcmp(k, "default-policy") == 0)
        directive_name(r, c->default_policy, sizeof(c->default_policy), v);
    else if (strcmp(k, "state-dir") == 0)
        set_path(r, c->state_dir, sizeof(c->state_dir), v);
    else if (strcmp(k, "secret-dir") == 0)
        set_path(r, c->secret_dir, sizeof(c->secret_dir), v);
    else if (strcmp(k, "upstream-ca-file") == 0)
        set_path(r, c->upstream_ca_file, sizeof(c->upstream_ca_file), v);
    else if (strcmp(k, "access-log") == 0)
        strcmp(v, "stdout") == 0 ? (void)snprintf(c->access_log, sizeof(c->access_log), "stdout")
                                 : set_path(r, c->access_log, sizeof(c->access_log), v);
    else if (strcmp(k, "geoip-country") == 0)
        set_path(r, c->geoip_country, sizeof(c->geoip_country), v);
    else if (strcmp(k, "geoip-asn") == 0)
        set_path(r, c->geoip_asn, sizeof(c->geoip_asn), v);
    else if (strcmp(k, "deny-range") == 0)
        add_range(r, c->deny_ranges, &c->n_deny_ranges, v);
    else if (strcmp(k, "allow-range") == 0)
        add_range(r, c->allow_ranges, &c->n_allow_ranges, v);
    else if (strcmp(k, "require-sni") == 0)
        set_bool(r, &c->require_sni, v, "on", "off");
    else if (strcmp(k, "ech") == 0)
        set_bool(r, &c->ech_allow, v, "allow", "deny");
    else if (strcmp(k, "timeout-header") == 0)
        set_duration(r, &c->timeout_header_ms, v);
    else if (strcmp(k, "timeout-connect") == 0)
        set_duration(r, &c->timeout_connect_ms, v);
    else if (strcmp(k, "timeout-idle") == 0)
        set_duration(r, &c->timeout_idle_ms, v);
    else if (strcmp(k, "max-tunnel-life") == 0)
        set_duration(r, &c->max_tunnel_life_ms, v);
    else if (strcmp(k, "max-conn-life") == 0)
        set_duration(r, &c->max_conn_life_ms, v);
    else if (strcmp(k, "timeout-drain") == 0)
        set_duration(r, &c->timeout_drain_ms, v);
    else if (strcmp(k, "max-conns") == 0)
        set_count(r, &c->max_conns, v, false);
    else if (strcmp(k, "max-conns-per-sandbox") == 0)
        set_count(r, &c->max_conns_per_sandbox, v, false);
    else if (strcmp(k, "max-header-bytes") == 0)
        set_header_bytes(r, &c->max_header_bytes, v);
    else if (strcmp(k, "quota-bytes-per-sandbox") == 0)
        set_count(r, &c->quota_bytes_per_sandbox, v, true);
    else if (strcmp(k, "rate-new-conns-per-sandbox") == 0)
        set_count(r, &c->rate_new_conns_per_sandbox, v, false);
    else if (strcmp(k, "max-lookups-per-sandbox") == 0)
        set_count(r, &c->max_lookups_per_sandbox, v, false);
    else if (strcmp(k, "dns") == 0)
        add_listener(r, c->dns, &c->n_dns, v, "dns");
    else if (strcmp(k, "dns-ttl-max") == 0)
        set_ttl_max(r, &c->dns_ttl_max_ms, v);
    else if (strcmp(k, "dns-rate-per-sandbox") == 0)
        set_count(r, &c->dns_rate_per_sandbox, v, false);
    else if (strcmp(k, "dns-aaaa") == 0)
        set_bool(r, &c->dns_aaaa, v, "on", "off");
    else if (strcmp(k, "dns-log") == 0)
        directive_dns_log(r, v);
    else if (strcmp(k, "dns-log-interval") == 0)
        set_duration(r, &c->dns_log_interval_ms, v);
    else if (strcmp(k, "user") == 0)
        directive_name(r, c->user, sizeof(c->user), v);
    else
        return false;
    return true;
}

static const char *const known[] = {
    "listen",
    "transparent-tls",
    "transparent-http",
    "admin",
    "admin-token-file",
    "metrics",
    "workers",
    "resolver",
    "hosts-file",
    "policy-dir",
    "default-policy",
    "state-dir",
    "secret-dir",
    "upstream-ca-file",
    "access-log",
    "geoip-country",
    "geoip-asn",
    "deny-range",
    "allow-range",
    "require-sni",
    "ech",
    "timeout-header",
    "timeout-connect",
    "timeout-idle",
    "max-tunnel-life",
    "max-conn-life",
    "timeout-drain",
    "max-conns",
    "max-conns-per-sandbox",
    "max-header-bytes",
    "quota-bytes-per-sandbox",
    "rate-new-conns-per-sandbox",
    "max-lookups-per-sandbox",
    "dns",
    "dns-ttl-max",
    "dns-rate-per-sandbox",
    "dns-aaaa",
    "dns-log",
    "dns-log-interval",
    "user",
    "oauth-provider",
    NULL,
};

static void read_line(struct reader *r, char *s)
{
    char *w[MAX_WORDS], *save = NULL;
    int n = 0;

    char *hash = strchr(s, '#');
    if (hash != NULL)
        *hash = '\0';
    for (char *t = strtok_r(s, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == MAX_WORDS) {
            fail(r, "too many words on one line");
            return;
        }
        w[n++] = t;
    }
    if (n == 0)
        return;
    if (strcmp(w[0], "transparent-tls") == 0) {
        directive_tls(r, w, n);
        return;
    }
    if (strcmp(w[0], "oauth-provider") == 0) {
        directive_oauth(r, w, n);
        return;
    }
    const char *near = policy_nearest_word(w[0], strlen(w[0]), known);
    if (near == NULL || strcmp(near, w[0]) != 0) {
        if (near != NULL)
            fail(r, "unknown directive '%s'; did you mean '%s'?", w[0], near);
        else
            fail(r, "unknown directive '%s' (the directives are listed in proxy/README.md)", w[0]);
        return;
    }
    if (n != 2) {
        fail(r, "expected one value after '%s', found %d", w[0], n - 1);
        return;
    }
    directive_1(r, w[0], w[1]);
}

static void defaults(struct px_config *c)
{
    memset(c, 0, sizeof(*c));
    c->require_sni = true;
    c->timeout_header_ms = 10000;
    c->timeout_connect_ms = 10000;
    c->timeout_idle_ms = 300000;
    c->max_tunnel_life_ms = 24 * 3600000ULL;
    c->max_conn_life_ms = 3600000ULL;
    c->max_lookups_per_sandbox = 32;
    c->timeout_drain_ms = 10000;
    c->max_conns = 10000;
    c->max_conns_per_sandbox = 512;
    c->max_header_bytes = 16384;
    c->dns_ttl_max_ms = 60000;
    c->dns_rate_per_sandbox = 200;
    c->dns_aaaa = true;
    c->dns_log = PX_DNS_LOG_ALL;
    c->dns_log_interval_ms = 10000;
    snprintf(c->default_policy, sizeof(c->default_policy), "locked");
    snprintf(c->access_log, sizeof(c->access_log), "stdout");
}

/* What the whole file must hold, checked once it is read. */
static void check_whole(struct reader *r)
{
    struct px_config *c = r->c;
    r->line = 0;
    if (c->policy_dir[0] == '\0')
        fail(r, "no policy-dir: egressd needs the directory of NAME.allow presets");
    if (c->admin_is_tcp && c->admin_token_file[0] == '\0')
        fail(r, "admin on a TCP address needs admin-token-file");
    /* The placeholders of the secrets come from the appliance key there. */
    if (c->secret_dir[0] != '\0' && c->state_dir[0] == '\0')
        fail(r, "secret-dir needs state-dir (the appliance key, which placeholders are derived "
                "from, is kept there)");
    if (c->n_listen + c->n_transparent_tls + c->n_transparent_http == 0)
        fail(r, "no listener: give at least one listen, transparent-tls or transparent-http");
}

int px_config_load(struct px_config *c, const char *path, char *err, size_t errlen)
{
    struct reader r = {.c = c, .file = path, .err = err, .errlen = errlen};
    char line[4096];
    const char *slash = strrchr(path, '/');
    FILE *f;

    defaults(c);
    snprintf(c->file, sizeof(c->file), "%s", path);
    if (slash != NULL)
        snprintf(r.dir, sizeof(r.dir), "%.*s", (int)(slash - path), path);
    if (errlen > 0)
        err[0] = '\0';
    f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        r.line++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            fail(&r, "line longer than %zu bytes", sizeof(line) - 2);
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            continue;
        }
        read_line(&r, line);
    }
    fclose(f);
    check_whole(&r);
    return r.errors ? -1 : 0;
}
