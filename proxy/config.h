/*
 * config.h - egressd.conf: one directive per line, `#` comments
 * (docs/design.md, "Configuration").  Shared by egressd and egressctl.
 */
#ifndef PX_CONFIG_H
#define PX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PX_MAX_LISTENERS 16
#define PX_MAX_RESOLVERS 8
#define PX_MAX_RANGES    64
/* max-header-bytes: at most what egressd can forward in one head (the
 * origin-form head it writes for a request of this size fits its buffer),
 * at least what any real client's head needs. */
#define PX_HEADER_BYTES_MAX (64 * 1024)
#define PX_HEADER_BYTES_MIN 1024

/* A numeric address and port ("127.0.0.1:3128", "[::1]:3128"); never a
 * name, so reading the config never asks a resolver. */
struct px_addr {
    char text[64];
    struct sockaddr_storage ss;
    socklen_t len;
};

struct px_range {
    char spec[64];  /* a CIDR, or "default" for deny-range */
    char where[96]; /* "FILE:LINE" */
};

/* dns-log: a line per query, per (sandbox, name, type, answer) and
 * interval, or none. */
enum px_dns_log { PX_DNS_LOG_ALL, PX_DNS_LOG_SUMMARY, PX_DNS_LOG_OFF };

/* `oauth-provider NAME token-url URL [client-id ID] [client-secret S]`:
 * where a login of provider NAME (anthropic, openai, google) is refreshed,
 * in place of the built-in profile (logins.c); for tests and for an
 * appliance behind its own gateway. */
#define PX_OAUTH_PROVIDERS 3
struct px_oauth_cfg {
    bool set;
    char host[256];
    uint16_t port;
    char path[256];
    char client_id[256], client_secret[256]; /* "": the built-in one */
};

struct px_config {
    char file[1024]; /* the config file, as given */
    struct px_addr listen[PX_MAX_LISTENERS];
    size_t n_listen;
    struct px_addr transparent_tls[PX_MAX_LISTENERS];
    uint16_t tls_upstream_port[PX_MAX_LISTENERS]; /* default 443 */
    size_t n_transparent_tls;
    struct px_addr transparent_http[PX_MAX_LISTENERS];
    size_t n_transparent_http;
    char admin_unix[108];     /* "admin unix:PATH" */
    struct px_addr admin_tcp; /* "admin ADDR:PORT" (needs admin-token-file) */
    bool admin_is_tcp, have_admin;
    char admin_token_file[1024];
    struct px_addr metrics;
    bool have_metrics;
    unsigned workers; /* 0: auto (one per CPU) */
    struct px_addr resolvers[PX_MAX_RESOLVERS];
    size_t n_resolvers;
    char hosts_file[1024];
    char policy_dir[1024];
    char default_policy[64];
    char state_dir[1024];
    char secret_dir[1024]; /* "": no secrets */
    char
        upstream_ca_file[1024]; /* intercepted origins are verified with it; "": the system store */
    char access_log[1024];      /* a path or "stdout" */
    char geoip_country[1024], geoip_asn[1024];
    struct px_range deny_ranges[PX_MAX_RANGES], allow_ranges[PX_MAX_RANGES];
    size_t n_deny_ranges, n_allow_ranges;
    bool require_sni, ech_allow;
    uint64_t timeout_header_ms, timeout_connect_ms, timeout_idle_ms, max_tunnel_life_ms;
    uint64_t max_conn_life_ms; /* a kept-alive client connection's, from its accept */
    uint64_t timeout_drain_ms; /* SIGTERM: how long tunnels may finish */
    uint64_t max_conns, max_conns_per_sandbox, max_header_bytes;
    uint64_t quota_bytes_per_sandbox;    /* 0: none */
    uint64_t rate_new_conns_per_sandbox; /* per second; 0: none */
    uint64_t max_lookups_per_sandbox;    /* queries to the resolvers in flight; 0: none */
    /* The policy DNS server (docs/design.md, "Policy DNS server"). */
    struct px_addr dns[PX_MAX_LISTENERS]; /* UDP and TCP on each */
    size_t n_dns;
    uint64_t dns_ttl_max_ms;       /* answers' TTL at most this */
    uint64_t dns_rate_per_sandbox; /* queries per second; 0: none */
    bool dns_aaaa;                 /* answer AAAA (off: NODATA) */
    enum px_dns_log dns_log;       /* which queries get a log line */
    uint64_t dns_log_interval_ms;  /* PX_DNS_LOG_SUMMARY: one line per key per interval */
    char user[64];
    struct px_oauth_cfg oauth[PX_OAUTH_PROVIDERS]; /* anthropic, openai, google */
};

/* The index of provider `name` in px_config.oauth, or -1. */
int px_oauth_provider_index(const char *name);

/* Read and check `path`.  Relative paths inside the file are taken from the
 * file's own directory.  Returns 0, or -1 with every error found, one per
 * line ("FILE:LINE: what was expected, found what"), in err. */
int px_config_load(struct px_config *c, const char *path, char *err, size_t errlen);

/* "500ms", "5s", "10m", "24h" into milliseconds; false if not one. */
bool px_parse_duration(const char *s, uint64_t *ms);
/* "512", "16k", "4m", "1g" into bytes; false if not one. */
bool px_parse_size(const char *s, uint64_t *bytes);
/* "ADDR:PORT", numeric only; false if not one. */
bool px_parse_addr(const char *s, struct px_addr *a, uint16_t default_port);

#endif
