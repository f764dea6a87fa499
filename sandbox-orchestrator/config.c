/* config.c - sandboxctl.conf parser (see config.h for the syntax). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "access.h"
#include "config.h"
#include "meta.h"

#define MAX_WORDS       40
#define CONFIG_MAX_SIZE (1024 * 1024)

/* The parse position, for messages. */
struct cursor {
    const char *name;
    int line;
    char *err;
    size_t errlen;
    /* Where the directives that must agree with each other were last given,
     * so that a disagreement found at the end still names a line. */
    int ca_line, pin_line, lifetime_line;
};

__attribute__((format(printf, 2, 3))) static int fail(struct cursor *cur, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(cur->err, cur->errlen, "%s:%d: ", cur->name, cur->line);

    if (n < 0 || (size_t)n >= cur->errlen)
        return -1;
    va_start(ap, fmt);
    vsnprintf(cur->err + n, cur->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);

    if (!d)
        abort();
    return d;
}

struct unit {
    const char *suffix; /* matched whole, case-insensitively */
    long scale;
};

/* A non-negative decimal number followed by one of the units. */
static int parse_scaled(const char *s, const struct unit *units, long *out)
{
    char *end;
    long v;

    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || v < 0)
        return -1;
    for (const struct unit *u = units; u->suffix; u++) {
        if (strcasecmp(end, u->suffix) == 0) {
            if (v > LONG_MAX / u->scale)
                return -1;
            *out = v * u->scale;
            return 0;
        }
    }
    return -1;
}

int sbx_duration_parse(const char *s, long *ms)
{
    static const struct unit units[] = {
        {"ms", 1},           {"s", 1000},          {"", 1000}, {"m", 60L * 1000},
        {"h", 3600L * 1000}, {"d", 86400L * 1000}, {NULL, 0}};
    return parse_scaled(s, units, ms);
}

int sbx_bytes_parse(const char *s, long *bytes)
{
    static const struct unit units[] = {
        {"", 1}, {"k", 1024}, {"m", 1024L * 1024}, {"g", 1024L * 1024 * 1024}, {NULL, 0}};
    return parse_scaled(s, units, bytes);
}

void sbx_duration_format(long ms, char *buf, size_t len)
{
    if (ms % 3600000 == 0 && ms > 0)
        snprintf(buf, len, "%ldh", ms / 3600000);
    else if (ms % 60000 == 0 && ms > 0)
        snprintf(buf, len, "%ldm", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%lds", ms / 1000);
    else
        snprintf(buf, len, "%ldms", ms);
}

/* A name as Proxmox and egressd accept them: letters, digits, . _ - */
static int valid_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= SBX_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
            return 0;
    return 1;
}

static int parse_int(struct cursor *cur, const char *dir, const char *w, int min, int max, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(w, &end, 10);
    if (errno || *end || end == w || v < min || v > max)
        return fail(cur, "%s: expected an integer %d..%d, got '%s'", dir, min, max, w);
    *out = (int)v;
    return 0;
}

static int parse_ipv4(const char *s, uint32_t *out)
{
    struct in_addr a;

    if (inet_pton(AF_INET, s, &a) != 1)
        return -1;
    *out = ntohl(a.s_addr);
    return 0;
}

/* ip-pool FIRST-LAST/PREFIX, e.g. 10.99.0.10-10.99.0.200/24 */
static int parse_ip_pool(struct cursor *cur, struct sbx_config *c, const char *w)
{
    char buf[64], *dash, *slash;
    int prefix = 0;

    if (strlen(w) >= sizeof buf)
        return fail(cur, "ip-pool: expected FIRST-LAST/PREFIX, got a too long word");
    strcpy(buf, w);
    dash = strchr(buf, '-');
    slash = strchr(buf, '/');
    if (!dash || !slash || slash < dash)
        return fail(cur,
                    "ip-pool: expected FIRST-LAST/PREFIX (10.99.0.10-10.99.0.200/24), got '%s'", w);
    *dash = *slash = '\0';
    if (parse_ipv4(buf, &c->ip_first) || parse_ipv4(dash + 1, &c->ip_last))
        return fail(cur, "ip-pool: '%s' has no IPv4 addresses FIRST-LAST", w);
    if (parse_int(cur, "ip-pool prefix", slash + 1, 8, 30, &prefix))
        return -1;
    if (c->ip_first > c->ip_last)
        return fail(cur, "ip-pool: first address after the last in '%s'", w);
    if (c->ip_last - c->ip_first > 65535)
        return fail(cur, "ip-pool: more than 65536 addresses in '%s'", w);
    c->ip_prefix = prefix;
    return 0;
}

/* pve-fingerprint: 64 hex digits, colons allowed between bytes */
static int parse_pin(struct cursor *cur, struct sbx_config *c, const char *w)
{
    int n = 0;

    for (const char *p = w; *p; p++) {
        if (*p == ':')
            continue;
        if (!isxdigit((unsigned char)p[0]) || !isxdigit((unsigned char)p[1]) || n == 32)
            return fail(cur,
                        "pve-fingerprint: expected the SHA-256 of the certificate as 64 hex "
                        "digits (colons allowed), got '%s'",
                        w);
        sscanf(p, "%2hhx", &c->pin[n++]);
        p++;
    }
    if (n != 32)
        return fail(cur, "pve-fingerprint: expected 32 bytes, got %d in '%s'", n, w);
    c->have_pin = 1;
    return 0;
}

static int parse_template(struct cursor *cur, struct sbx_config *c, const char *w)
{
    struct sbx_template *t;
    const char *colon = strrchr(w, ':');
    const char *id = colon ? colon + 1 : w;

    if (c->ntemplates == SBX_MAX_TEMPLATES)
        return fail(cur, "template: at most %d template lines", SBX_MAX_TEMPLATES);
    t = &c->templates[c->ntemplates];
    if (colon) {
        if ((size_t)(colon - w) >= sizeof t->node || colon == w)
            return fail(cur, "template: expected [NODE:]VMID, got '%s'", w);
        memcpy(t->node, w, (size_t)(colon - w));
        t->node[colon - w] = '\0';
        if (!valid_name(t->node))
            return fail(cur, "template: '%s' is not a node name", t->node);
    }
    if (parse_int(cur, "template", id, 100, 999999999, &t->vmid))
        return -1;
    c->ntemplates++;
    return 0;
}

static int parse_proxy(struct cursor *cur, struct sbx_config *c, const char *w)
{
    const char *colon = strrchr(w, ':');
    char addr[64];
    uint32_t ip;

    if (!colon || (size_t)(colon - w) >= sizeof addr)
        return fail(cur, "proxy: expected ADDR:PORT (10.99.0.1:3128), got '%s'", w);
    memcpy(addr, w, (size_t)(colon - w));
    addr[colon - w] = '\0';
    if (parse_ipv4(addr, &ip))
        return fail(cur, "proxy: '%s' is not an IPv4 address", addr);
    if (parse_int(cur, "proxy port", colon + 1, 1, 65535, &c->proxy_port))
        return -1;
    free(c->proxy_addr);
    c->proxy_addr = xstrdup(addr);
    return 0;
}

/* dns-addr ADDR|none */
static int parse_dns(struct cursor *cur, struct sbx_config *c, const char *w)
{
    uint32_t ip;

    free(c->dns_addr);
    c->dns_addr = NULL;
    c->dns_none = strcmp(w, "none") == 0;
    if (c->dns_none)
        return 0;
    if (parse_ipv4(w, &ip))
        return fail(cur, "dns-addr: expected an IPv4 address (10.99.0.1) or 'none', got '%s'", w);
    c->dns_addr = xstrdup(w);
    return 0;
}

/* transparent on|off */
static int parse_transparent(struct cursor *cur, struct sbx_config *c, const char *w)
{
    if (strcmp(w, "on") != 0 && strcmp(w, "off") != 0)
        return fail(cur, "transparent: expected 'on' or 'off', got '%s'", w);
    c->transparent = strcmp(w, "on") == 0;
    return 0;
}

static int parse_egress(struct cursor *cur, struct sbx_config *c, const char *w)
{
    if (c->negress == SBX_MAX_EGRESS)
        return fail(cur, "egressd-admin: at most %d lines", SBX_MAX_EGRESS);
    if (strncmp(w, "unix:/", 6) != 0 && strncmp(w, "http://", 7) != 0 &&
        strncmp(w, "https://", 8) != 0)
        return fail(cur, "egressd-admin: expected unix:/PATH or http(s)://HOST:PORT, got '%s'", w);
    c->egress[c->negress++] = xstrdup(w);
    return 0;
}

static int parse_size(struct cursor *cur, struct sbx_config *c, char **v)
{
    struct sbx_size *z = NULL;

    if (!valid_name(v[0]))
        return fail(cur, "size: '%s' is not a name", v[0]);
    for (int i = 0; i < c->nsizes; i++)
        if (strcmp(c->sizes[i].name, v[0]) == 0)
            z = &c->sizes[i];
    if (!z) {
        if (c->nsizes == SBX_MAX_SIZES)
            return fail(cur, "size: at most %d sizes", SBX_MAX_SIZES);
        z = &c->sizes[c->nsizes++];
    }
    snprintf(z->name, sizeof z->name, "%s", v[0]);
    if (parse_int(cur, "size cores", v[1], 1, 512, &z->cores) ||
        parse_int(cur, "size memory-mib", v[2], 16, 4 * 1024 * 1024, &z->memory_mib))
        return -1;
    return 0;
}

static int parse_duration_dir(struct cursor *cur, const char *dir, const char *w, long *out)
{
    if (sbx_duration_parse(w, out) || *out == 0)
        return fail(cur, "%s: expected a duration such as 30s, 10m, 4h, got '%s'", dir, w);
    return 0;
}

static void set_str(char **dst, const char *w)
{
    free(*dst);
    *dst = xstrdup(w);
}

/* Directives that take exactly one word stored as a string. */
static char **string_slot(struct sbx_config *c, const char *dir)
{
    static const struct {
        const char *name;
        size_t off;
    } slots[] = {
        {"pve-url", offsetof(struct sbx_config, pve_url)},
        {"pve-token-file", offsetof(struct sbx_config, pve_token_file)},
        {"pve-ca-file", offsetof(struct sbx_config, pve_ca_file)},
        {"node", offsetof(struct sbx_config, node)},
        {"pool", offsetof(struct sbx_config, pool)},
        {"storage", offsetof(struct sbx_config, storage)},
        {"bridge", offsetof(struct sbx_config, bridge)},
        {"gateway", offsetof(struct sbx_config, gateway)},
        {"secrets-file", offsetof(struct sbx_config, secrets_file)},
        {"mcp-token-file", offsetof(struct sbx_config, mcp_token_file)},
        {"state-dir", offsetof(struct sbx_config, state_dir)},
        {"egressd-admin-token-file", offsetof(struct sbx_config, egress_token_file)},
        {"guest-user", offsetof(struct sbx_config, guest_user)},
        {"console-listen", offsetof(struct sbx_config, console_listen)},
        {"console-cert-file", offsetof(struct sbx_config, console_cert_file)},
        {"console-key-file", offsetof(struct sbx_config, console_key_file)},
        {"console-admin-group", offsetof(struct sbx_config, console_admin_group)},
        {"console-owner-realm", offsetof(struct sbx_config, console_owner_realm)},
        {"console-audit-log", offsetof(struct sbx_config, console_audit_log)},
        {"console-access-log", offsetof(struct sbx_config, console_access_log)},
    };

    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
        if (strcmp(slots[i].name, dir) == 0)
            return (char **)((char *)c + slots[i].off);
    return NULL;
}

/* Directives that take one duration. */
static long *duration_slot(struct sbx_config *c, const char *dir)
{
    if (strcmp(dir, "lifetime-default") == 0)
        return &c->lifetime_default_ms;
    if (strcmp(dir, "lifetime-max") == 0)
        return &c->lifetime_max_ms;
    if (strcmp(dir, "http-timeout") == 0)
        return &c->http_timeout_ms;
    if (strcmp(dir, "task-timeout") == 0)
        return &c->task_timeout_ms;
    if (strcmp(dir, "agent-timeout") == 0)
        return &c->agent_timeout_ms;
    if (strcmp(dir, "exec-timeout") == 0)
        return &c->exec_timeout_ms;
    if (strcmp(dir, "access-max") == 0)
        return &c->access_max_ms;
    if (strcmp(dir, "console-session") == 0)
        return &c->console_session_ms;
    return NULL;
}

/* Directives that take one integer. */
static int *int_slot(struct sbx_config *c, const char *dir, int *max)
{
    *max = 16 * 1024 * 1024;
    if (strcmp(dir, "max-cores") == 0)
        return &c->max_cores;
    if (strcmp(dir, "max-memory-mib") == 0)
        return &c->max_memory_mib;
    if (strcmp(dir, "max-total-memory-mib") == 0)
        return &c->max_total_memory_mib;
    if (strcmp(dir, "max-snapshots") == 0) {
        *max = 100;
        return &c->max_snapshots;
    }
    if (strcmp(dir, "pull-max-refs") == 0) {
        *max = 1000000;
        return &c->pull_max_refs;
    }
    return NULL;
}

static int check_string_word(struct cursor *cur, const char *dir, const char *w)
{
    if (strcmp(dir, "pve-url") == 0 && strncmp(w, "https://", 8) != 0)
        return fail(cur, "pve-url: expected https://HOST:8006, got '%s'", w);
    if ((strcmp(dir, "node") == 0 || strcmp(dir, "pool") == 0 || strcmp(dir, "storage") == 0 ||
         strcmp(dir, "bridge") == 0 || strcmp(dir, "guest-user") == 0) &&
        !valid_name(w))
        return fail(cur, "%s: '%s' is not a name (letters, digits, . _ -)", dir, w);
    if (strcmp(dir, "gateway") == 0) {
        uint32_t ip;
        if (parse_ipv4(w, &ip))
            return fail(cur, "gateway: '%s' is not an IPv4 address", w);
    }
    return 0;
}

/* pull-max-bytes SIZE, pull-max-blob-bytes SIZE, pull-max-objects N */
static int parse_pull_cap(struct cursor *cur, struct sbx_config *c, const char *dir, const char *w)
{
    long v;

    if (strcmp(dir, "pull-max-objects") == 0) {
        int n = 0;
        if (parse_int(cur, dir, w, 1, 100000000, &n))
            return -1;
        c->pull_max_objects = n;
        return 0;
    }
    if (sbx_bytes_parse(w, &v) || v < 1024)
        return fail(cur, "%s: expected a size of at least 1k (64m, 1g), got '%s'", dir, w);
    if (strcmp(dir, "pull-max-bytes") == 0)
        c->pull_max_bytes = v;
    else
        c->pull_max_blob_bytes = v;
    return 0;
}

static void free_protected(struct sbx_config *c)
{
    for (int i = 0; c->protected_paths[i]; i++) {
        free(c->protected_paths[i]);
        c->protected_paths[i] = NULL;
    }
}

/* protected-paths PATTERN...: the first line replaces the built-in list,
 * later ones add to it; "none" alone empties it. */
static int parse_protected(struct cursor *cur, struct sbx_config *c, char **v, int n)
{
    int have = 0;

    if (!c->protected_set)
        free_protected(c);
    c->protected_set = 1;
    if (n == 0)
        return fail(cur, "protected-paths: expected patterns (.github/ CODEOWNERS /.*/) or none");
    if (n == 1 && strcmp(v[0], "none") == 0) {
        free_protected(c);
        return 0;
    }
    while (c->protected_paths[have])
        have++;
    for (int i = 0; i < n; i++) {
        if (have == SBX_MAX_PROTECTED)
            return fail(cur, "protected-paths: at most %d patterns", SBX_MAX_PROTECTED);
        if (strcmp(v[i], "/") == 0 || strstr(v[i], "//") || strlen(v[i]) > 200)
            return fail(cur, "protected-paths: '%.200s' is not a pattern", v[i]);
        c->protected_paths[have++] = xstrdup(v[i]);
    }
    return 0;
}

static int parse_mcp_repo(struct cursor *cur, struct sbx_config *c, const char *label,
                          const char *dir)
{
    struct sbx_mcp_repo *r;

    if (!valid_name(label))
        return fail(cur, "mcp-repo: '%s' is not a label (letters, digits, . _ -)", label);
    if (dir[0] != '/')
        return fail(cur, "mcp-repo: expected an absolute directory, got '%s'", dir);
    for (int i = 0; i < c->nmcp_repos; i++)
        if (strcmp(c->mcp_repos[i].label, label) == 0)
            return fail(cur, "mcp-repo: '%s' is given twice", label);
    if (c->nmcp_repos == SBX_MAX_MCP_REPOS)
        return fail(cur, "mcp-repo: at most %d lines", SBX_MAX_MCP_REPOS);
    r = &c->mcp_repos[c->nmcp_repos++];
    snprintf(r->label, sizeof r->label, "%s", label);
    r->dir = xstrdup(dir);
    return 0;
}

/* The variables sandboxctl sets itself in a guest: the proxy's
 * (ops_create.c) and, with secrets, the CA's (creds.c).  No secret's
 * placeholder may take their place. */
static const char *const own_vars[] = {
    "http_proxy", "https_proxy",         "HTTP_PROXY",         "HTTPS_PROXY",   "no_proxy",
    "NO_PROXY",   "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "GIT_SSL_CAINFO",
    NULL};

/* An environment variable's name as a shell exports it: [A-Za-z_][A-Za-z0-9_]*. */
static int valid_env_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= SBX_ENV_NAME_MAX || isdigit((unsigned char)s[0]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return 0;
    return 1;
}

/* secret-env NAME VAR */
static int parse_secret_env(struct cursor *cur, struct sbx_config *c, const char *name,
                            const char *var)
{
    struct sbx_secret_env *e;

    if (!sbx_meta_valid_secret(name))
        return fail(cur,
                    "secret-env: '%s' is not a secret's name ([a-z0-9][a-z0-9_-]*, as in "
                    "egressd's secret-dir)",
                    name);
    if (!valid_env_name(var))
        return fail(cur,
                    "secret-env: '%s' is not an environment variable's name "
                    "([A-Za-z_][A-Za-z0-9_]*, at most %d)",
                    var, SBX_ENV_NAME_MAX - 1);
    for (int i = 0; own_vars[i]; i++)
        if (strcmp(var, own_vars[i]) == 0)
            return fail(cur,
                        "secret-env: %s is set by sandboxctl itself (the proxy and the sandbox "
                        "CA variables)",
                        var);
    for (int i = 0; i < c->nsecret_env; i++) {
        if (strcmp(c->secret_env[i].name, name) == 0)
            return fail(cur, "secret-env: '%s' is given twice", name);
        if (strcmp(c->secret_env[i].var, var) == 0)
            return fail(cur, "secret-env: %s is already the variable of secret '%s'", var,
                        c->secret_env[i].name);
    }
    if (c->nsecret_env == SBX_MAX_SECRET_ENV)
        return fail(cur, "secret-env: at most %d lines", SBX_MAX_SECRET_ENV);
    e = &c->secret_env[c->nsecret_env++];
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->var, sizeof e->var, "%s", var);
    return 0;
}

static void free_mcp_secrets(struct sbx_config *c)
{
    for (int i = 0; c->mcp_secrets[i]; i++) {
        free(c->mcp_secrets[i]);
        c->mcp_secrets[i] = NULL;
    }
}

/* mcp-secrets NAME...: the secrets an MCP client may give a sandbox; a
 * line replaces the list (as mcp-presets does). */
static int parse_mcp_secrets(struct cursor *cur, struct sbx_config *c, char **v, int n)
{
    free_mcp_secrets(c);
    if (n > SBX_MAX_MCP_SECRETS)
        return fail(cur, "mcp-secrets: at most %d names", SBX_MAX_MCP_SECRETS);
    for (int i = 0; i < n; i++) {
        if (!sbx_meta_valid_secret(v[i]))
            return fail(cur, "mcp-secrets: '%s' is not a secret's name ([a-z0-9][a-z0-9_-]*)",
                        v[i]);
        for (int k = 0; k < i; k++)
            if (strcmp(c->mcp_secrets[k], v[i]) == 0)
                return fail(cur, "mcp-secrets: '%s' is given twice", v[i]);
        c->mcp_secrets[i] = xstrdup(v[i]);
    }
    return 0;
}

static void free_patterns(char **list)
{
    for (int i = 0; list[i]; i++) {
        free(list[i]);
        list[i] = NULL;
    }
}

/* access-auto PATTERN... and access-owner-approves PATTERN...: host
 * patterns (access.h); each line adds to the list (a long list may take
 * several lines), and `none` empties it. */
static int parse_access(struct cursor *cur, char **list, const char *dir, char **v, int n)
{
    int have = 0;

    if (n == 0)
        return fail(cur,
                    "%s: expected host patterns (pypi.org .npmjs.org *.crates.io:443) or "
                    "none",
                    dir);
    if (n == 1 && strcmp(v[0], "none") == 0) {
        free_patterns(list);
        return 0;
    }
    while (list[have])
        have++;
    for (int i = 0; i < n; i++) {
        if (have == SBX_MAX_ACCESS)
            return fail(cur, "%s: at most %d patterns in all", dir, SBX_MAX_ACCESS);
        list[have] = xstrdup(v[i]);
        if (!sbx_access_normalize(list[have++]))
            return fail(cur, "%s: '%.200s' is not HOST, *.DOMAIN or .DOMAIN with optional :PORTS",
                        dir, v[i]);
    }
    return 0;
}

static int directive(struct cursor *cur, struct sbx_config *c, char **v, int n)
{
    static const char *const one_word[] = {"pve-fingerprint",
                                           "template",
                                           "ip-pool",
                                           "proxy",
                                           "dns-addr",
                                           "egressd-admin",
                                           "exec-output-max",
                                           "transparent",
                                           "pull-max-bytes",
                                           "pull-max-objects",
                                           "pull-max-blob-bytes"};
    const char *dir = v[0];
    char **str;
    long *dur;
    int *num, max;
    int single = string_slot(c, dir) || duration_slot(c, dir) || int_slot(c, dir, &max);

    for (size_t i = 0; i < sizeof one_word / sizeof one_word[0]; i++)
        single |= strcmp(dir, one_word[i]) == 0;
    if (strcmp(dir, "pve-ca-file") == 0)
        cur->ca_line = cur->line;
    else if (strcmp(dir, "pve-fingerprint") == 0)
        cur->pin_line = cur->line;
    else if (strcmp(dir, "lifetime-default") == 0 || strcmp(dir, "lifetime-max") == 0)
        cur->lifetime_line = cur->line;
    if (single && n != 2)
        return fail(cur, "%s: expected one value, got %d", dir, n - 1);
    if ((str = string_slot(c, dir))) {
        if (check_string_word(cur, dir, v[1]))
            return -1;
        set_str(str, v[1]);
        return 0;
    }
    if ((dur = duration_slot(c, dir)))
        return parse_duration_dir(cur, dir, v[1], dur);
    if ((num = int_slot(c, dir, &max)))
        return parse_int(cur, dir, v[1], 1, max, num);
    if (strcmp(dir, "pve-fingerprint") == 0)
        return parse_pin(cur, c, v[1]);
    if (strcmp(dir, "template") == 0)
        return parse_template(cur, c, v[1]);
    if (strcmp(dir, "ip-pool") == 0)
        return parse_ip_pool(cur, c, v[1]);
    if (strcmp(dir, "proxy") == 0)
        return parse_proxy(cur, c, v[1]);
    if (strcmp(dir, "dns-addr") == 0)
        return parse_dns(cur, c, v[1]);
    if (strcmp(dir, "transparent") == 0)
        return parse_transparent(cur, c, v[1]);
    if (strcmp(dir, "egressd-admin") == 0)
        return parse_egress(cur, c, v[1]);
    if (strcmp(dir, "exec-output-max") == 0) {
        if (sbx_bytes_parse(v[1], &c->exec_output_max) || c->exec_output_max < 1024)
            return fail(cur, "exec-output-max: expected a size of at least 1k, got '%s'", v[1]);
        return 0;
    }
    if (strcmp(dir, "pull-max-bytes") == 0 || strcmp(dir, "pull-max-objects") == 0 ||
        strcmp(dir, "pull-max-blob-bytes") == 0)
        return parse_pull_cap(cur, c, dir, v[1]);
    if (strcmp(dir, "protected-paths") == 0)
        return parse_protected(cur, c, v + 1, n - 1);
    if (strcmp(dir, "mcp-repo") == 0) {
        if (n != 3)
            return fail(cur, "mcp-repo: expected LABEL DIR (an absolute path)");
        return parse_mcp_repo(cur, c, v[1], v[2]);
    }
    if (strcmp(dir, "secret-env") == 0) {
        if (n != 3)
            return fail(cur, "secret-env: expected NAME VAR (a secret and the guest's variable "
                             "for its placeholder)");
        return parse_secret_env(cur, c, v[1], v[2]);
    }
    if (strcmp(dir, "mcp-secrets") == 0)
        return parse_mcp_secrets(cur, c, v + 1, n - 1);
    if (strcmp(dir, "access-auto") == 0)
        return parse_access(cur, c->access_auto, dir, v + 1, n - 1);
    if (strcmp(dir, "access-owner-approves") == 0)
        return parse_access(cur, c->access_owner, dir, v + 1, n - 1);
    if (strcmp(dir, "size") == 0) {
        if (n != 4)
            return fail(cur, "size: expected NAME CORES MEMORY_MIB");
        return parse_size(cur, c, v + 1);
    }
    if (strcmp(dir, "mcp-presets") == 0) {
        for (int i = 0; c->mcp_presets[i]; i++)
            free(c->mcp_presets[i]);
        memset(c->mcp_presets, 0, sizeof c->mcp_presets);
        if (n - 1 > SBX_MAX_PRESETS)
            return fail(cur, "mcp-presets: at most %d names", SBX_MAX_PRESETS);
        for (int i = 1; i < n; i++) {
            if (!valid_name(v[i]))
                return fail(cur, "mcp-presets: '%s' is not a preset name", v[i]);
            c->mcp_presets[i - 1] = xstrdup(v[i]);
        }
        return 0;
    }
    return fail(cur, "unknown directive '%s'", dir);
}

/* Split line into words at blanks; a word starting with # ends the line. */
static int split(char *line, char **v)
{
    int n = 0;
    char *p = line;

    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '\0' || *p == '#')
            return n;
        if (n == MAX_WORDS)
            return -1;
        v[n++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        if (*p)
            *p++ = '\0';
    }
}

/* What pull flags unless the config says otherwise (ops_git.c matches). */
static const char *const default_protected[] = {
    ".github/",    ".husky/",        ".githooks/",
    "CODEOWNERS",  "AGENTS.md",      "CLAUDE.md",
    ".claude/",    ".vscode/",       ".gitattributes",
    ".gitmodules", "package.json",   "package-lock.json",
    "yarn.lock",   "pnpm-lock.yaml", "requirements*.txt",
    "Pipfile*",    "pyproject.toml", "poetry.lock",
    "go.mod",      "go.sum",         "Cargo.toml",
    "Cargo.lock",  "Gemfile*",       "/.*/"};

static void set_defaults(struct sbx_config *c)
{
    static const struct sbx_size sizes[] = {{"small", 2, 4096}, {"medium", 4, 8192}};

    memcpy(c->sizes, sizes, sizeof sizes);
    c->nsizes = 2;
    c->max_cores = 4;
    c->max_memory_mib = 8192;
    c->max_total_memory_mib = 20480;
    c->lifetime_default_ms = 4 * 3600 * 1000L;
    c->lifetime_max_ms = 24 * 3600 * 1000L;
    c->max_snapshots = 4;
    c->http_timeout_ms = 30 * 1000L;
    c->task_timeout_ms = 10 * 60 * 1000L;
    c->agent_timeout_ms = 5 * 60 * 1000L;
    c->exec_timeout_ms = 5 * 60 * 1000L;
    c->access_max_ms = 8 * 3600 * 1000L;
    c->console_session_ms = 2 * 3600 * 1000L; /* a Proxmox ticket's lifetime */
    c->exec_output_max = 1024 * 1024;
    c->pull_max_bytes = 64L * 1024 * 1024;
    c->pull_max_blob_bytes = 100L * 1024 * 1024;
    c->pull_max_objects = 200000;
    c->pull_max_refs = 1000;
    for (size_t i = 0; i < sizeof default_protected / sizeof default_protected[0]; i++)
        c->protected_paths[i] = xstrdup(default_protected[i]);
}

static int missing(struct cursor *cur, const char *dir)
{
    snprintf(cur->err, cur->errlen, "%s: missing directive '%s'", cur->name, dir);
    return -1;
}

static int check_complete(struct cursor *cur, struct sbx_config *c)
{
    static const char *const required[] = {"pve-url", "pve-token-file", "pool", "bridge",
                                           "gateway"};

    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!*string_slot(c, required[i]))
            return missing(cur, required[i]);
    if (!c->pve_ca_file && !c->have_pin) {
        snprintf(cur->err, cur->errlen,
                 "%s: missing directive: expected exactly one of 'pve-ca-file' or "
                 "'pve-fingerprint' (the server certificate is always verified)",
                 cur->name);
        return -1;
    }
    if (c->pve_ca_file && c->have_pin) {
        cur->line = cur->ca_line > cur->pin_line ? cur->ca_line : cur->pin_line;
        return fail(cur, "expected exactly one of 'pve-ca-file' or 'pve-fingerprint' (the server "
                         "certificate is always verified)");
    }
    if (c->ntemplates == 0)
        return missing(cur, "template");
    if (!c->ip_prefix)
        return missing(cur, "ip-pool");
    if (!c->proxy_addr)
        return missing(cur, "proxy");
    if (!c->dns_addr && !c->dns_none)
        c->dns_addr = xstrdup(c->proxy_addr);
    if (c->lifetime_default_ms > c->lifetime_max_ms) {
        cur->line = cur->lifetime_line; /* the later of the two */
        return fail(cur, "lifetime-default is longer than lifetime-max");
    }
    if (!c->node)
        c->node = xstrdup("auto");
    if (!c->state_dir)
        c->state_dir = xstrdup("/var/lib/sandboxctl");
    if (!c->guest_user)
        c->guest_user = xstrdup("agent");
    if (!c->console_cert_file != !c->console_key_file) {
        snprintf(cur->err, cur->errlen,
                 "%s: console-cert-file and console-key-file go together (the console serves "
                 "HTTPS with both, plain HTTP on loopback with neither)",
                 cur->name);
        return -1;
    }
    if (c->console_session_ms > 2 * 3600 * 1000L) {
        snprintf(cur->err, cur->errlen,
                 "%s: console-session is longer than 2h, the lifetime of the Proxmox ticket a "
                 "sign-in is checked with (a user disabled in Proxmox would keep the console)",
                 cur->name);
        return -1;
    }
    if (!c->console_owner_realm)
        c->console_owner_realm = xstrdup("pam");
    if (!c->console_audit_log &&
        asprintf(&c->console_audit_log, "%s/console-audit.log", c->state_dir) < 0)
        abort();
    return 0;
}

int sbx_config_parse(struct sbx_config *c, const char *text, const char *name, char *err,
                     size_t errlen)
{
    struct cursor cur = {.name = name, .err = err, .errlen = errlen};
    char *copy = xstrdup(text), *line = copy, *next;
    char *v[MAX_WORDS];
    int rc = 0;

    memset(c, 0, sizeof *c);
    c->path = xstrdup(name);
    set_defaults(c);
    for (; line && rc == 0; line = next) {
        int n;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        cur.line++;
        if ((n = split(line, v)) < 0)
            rc = fail(&cur, "more than %d words", MAX_WORDS);
        else if (n > 0)
            rc = directive(&cur, c, v, n);
    }
    free(copy);
    return rc ? rc : check_complete(&cur, c);
}

int sbx_config_load(struct sbx_config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;
    int rc;

    memset(c, 0, sizeof *c);
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the config file: %s", path, strerror(errno));
        return -1;
    }
    buf = malloc(CONFIG_MAX_SIZE + 1);
    if (!buf)
        abort();
    n = fread(buf, 1, CONFIG_MAX_SIZE + 1, f);
    fclose(f);
    if (n > CONFIG_MAX_SIZE || memchr(buf, '\0', n)) {
        snprintf(err, errlen, "%s: not a text config file (over 1 MiB or NUL bytes)", path);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    rc = sbx_config_parse(c, buf, path, err, errlen);
    free(buf);
    return rc;
}

void sbx_config_free(struct sbx_config *c)
{
    char **strs[] = {&c->path,
                     &c->pve_url,
                     &c->pve_token_file,
                     &c->pve_ca_file,
                     &c->node,
                     &c->pool,
                     &c->storage,
                     &c->bridge,
                     &c->gateway,
                     &c->proxy_addr,
                     &c->egress_token_file,
                     &c->secrets_file,
                     &c->mcp_token_file,
                     &c->state_dir,
                     &c->dns_addr,
                     &c->guest_user,
                     &c->console_listen,
                     &c->console_cert_file,
                     &c->console_key_file,
                     &c->console_admin_group,
                     &c->console_owner_realm,
                     &c->console_audit_log,
                     &c->console_access_log};

    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    for (int i = 0; i < c->negress; i++)
        free(c->egress[i]);
    c->negress = 0;
    for (int i = 0; c->mcp_presets[i]; i++) {
        free(c->mcp_presets[i]);
        c->mcp_presets[i] = NULL;
    }
    free_protected(c);
    free_mcp_secrets(c);
    free_patterns(c->access_auto);
    free_patterns(c->access_owner);
    c->nsecret_env = 0;
    for (int i = 0; i < c->nmcp_repos; i++)
        free(c->mcp_repos[i].dir);
    c->nmcp_repos = 0;
}

const char *sbx_config_mcp_repo(const struct sbx_config *c, const char *label)
{
    for (int i = 0; i < c->nmcp_repos; i++)
        if (strcmp(c->mcp_repos[i].label, label) == 0)
            return c->mcp_repos[i].dir;
    return NULL;
}

void sbx_config_secret_env(const struct sbx_config *c, const char *name, char *var, size_t len)
{
    static const struct {
        const char *name, *var;
    } builtin[] = {{"anthropic", "ANTHROPIC_API_KEY"},
                   {"openai", "OPENAI_API_KEY"},
                   {"gemini", "GEMINI_API_KEY"},
                   {"github", "GH_TOKEN"}};
    for (int i = 0; i < c->nsecret_env; i++)
        if (strcmp(c->secret_env[i].name, name) == 0) {
            snprintf(var, len, "%s", c->secret_env[i].var);
            return;
        }
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++)
        if (strcmp(builtin[i].name, name) == 0) {
            snprintf(var, len, "%s", builtin[i].var);
            return;
        }
    /* The prefix is upper case already: the whole text can be converted. */
    snprintf(var, len, "EGRESSD_SECRET_%s", name);
    for (char *p = var; *p; p++)
        *p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
}

const struct sbx_size *sbx_config_size(const struct sbx_config *c, const char *name)
{
    for (int i = 0; i < c->nsizes; i++)
        if (strcmp(c->sizes[i].name, name) == 0)
            return &c->sizes[i];
    return NULL;
}
