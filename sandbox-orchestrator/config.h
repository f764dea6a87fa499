/* config.h - sandboxctl.conf: one directive per line, `#` comments.
 *
 * The same line syntax as egressd.conf: a directive name, then its words.
 * Durations are written 500ms, 5s, 10m, 24h; sizes 512, 16k, 4m, 1g.
 * Errors name file:line and what was expected.
 */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define SBX_MAX_TEMPLATES   16
#define SBX_MAX_EGRESS      8
#define SBX_MAX_SIZES       8
#define SBX_MAX_PRESETS     32
#define SBX_NAME_MAX        64
#define SBX_MAX_PROTECTED   128
#define SBX_MAX_MCP_REPOS   16
#define SBX_MAX_SECRET_ENV  64
#define SBX_MAX_MCP_SECRETS 64
#define SBX_ENV_NAME_MAX    64 /* an environment variable's name and its NUL */
#define SBX_MAX_ACCESS      64 /* patterns of access-auto and of access-owner-approves */

/* One `template [NODE:]VMID` line; node is "" when not given (any node). */
struct sbx_template {
    char node[SBX_NAME_MAX];
    int vmid;
};

/* One `size NAME CORES MEMORY_MIB` line (or a built-in default). */
struct sbx_size {
    char name[SBX_NAME_MAX];
    int cores;
    int memory_mib;
};

/* One `mcp-repo LABEL DIR` line: the host repository an MCP client may
 * fetch a sandbox's changes into, by label (never by path). */
struct sbx_mcp_repo {
    char label[SBX_NAME_MAX];
    char *dir;
};

/* One `secret-env NAME VAR` line: the guest's environment variable that
 * holds the placeholder of secret NAME (credential injection). */
struct sbx_secret_env {
    char name[64];
    char var[SBX_ENV_NAME_MAX];
};

/* The whole configuration; every string is owned by the struct (or NULL
 * when not set).  Durations are in milliseconds. */
struct sbx_config {
    char *path;
    char *pve_url; /* https://HOST:8006 (no /api2/json) */
    char *pve_token_file;
    char *pve_ca_file;     /* either this ... */
    unsigned char pin[32]; /* ... or the pinned SHA-256 of the leaf certificate */
    int have_pin;
    char *node; /* a node name, or "auto" */
    struct sbx_template templates[SBX_MAX_TEMPLATES];
    int ntemplates;
    char *pool, *storage, *bridge;
    uint32_t ip_first, ip_last; /* host byte order */
    int ip_prefix;
    char *gateway;
    char *proxy_addr;
    int proxy_port;
    /* `dns-addr`: the DNS server the sandboxes may ask (their firewall's
     * DNS rule and resolv.conf); the proxy address when not given, NULL
     * after `dns-addr none` (no DNS rule, no resolv.conf). */
    char *dns_addr;
    int dns_none;
    /* `transparent on`: the firewall also lets tcp 80 and 443 out to any
     * address, for the host to redirect to egressd's transparent ports
     * (deploy/proxmox/egressd-redirect.nft); off by default. */
    int transparent;
    char *egress[SBX_MAX_EGRESS]; /* unix:PATH or http(s)://HOST:PORT */
    int negress;
    char *egress_token_file;
    struct sbx_size sizes[SBX_MAX_SIZES];
    int nsizes;
    int max_cores, max_memory_mib, max_total_memory_mib;
    long lifetime_default_ms, lifetime_max_ms;
    int max_snapshots;
    char *secrets_file;
    char *mcp_presets[SBX_MAX_PRESETS + 1]; /* NULL-terminated */
    char *mcp_token_file;
    char *state_dir;
    long http_timeout_ms, task_timeout_ms, agent_timeout_ms, exec_timeout_ms;
    long exec_output_max;
    /* push/pull (ops_git.c): the guest's user, the caps on what pull takes
     * in, the paths it flags, and the repositories MCP may fetch into. */
    char *guest_user;
    long pull_max_bytes, pull_max_objects, pull_max_blob_bytes;
    int pull_max_refs;
    char *protected_paths[SBX_MAX_PROTECTED + 1]; /* NULL-terminated */
    int protected_set;                            /* a protected-paths line was read */
    struct sbx_mcp_repo mcp_repos[SBX_MAX_MCP_REPOS];
    int nmcp_repos;
    /* Credential injection: the `secret-env` lines (on top of the
     * built-in names, sbx_config_secret_env()), and the secrets an MCP
     * client may ask for (`mcp-secrets`; none by default). */
    struct sbx_secret_env secret_env[SBX_MAX_SECRET_ENV];
    int nsecret_env;
    char *mcp_secrets[SBX_MAX_MCP_SECRETS + 1]; /* NULL-terminated */
    /* Access requests (ops_access.c): the host patterns granted without
     * anyone approving (`access-auto`), those the sandbox's owner may
     * approve through MCP (`access-owner-approves`), both NULL-terminated
     * (access.h), and the longest a grant may last (`access-max`). */
    char *access_auto[SBX_MAX_ACCESS + 1];
    char *access_owner[SBX_MAX_ACCESS + 1];
    long access_max_ms;
    /* The operator console (console/): where it listens, its TLS files
     * (both or neither), the Proxmox group whose members see every
     * sandbox, the realm whose users own sandboxes by their bare name,
     * the audit log, and how long a sign-in lasts. */
    char *console_listen;
    char *console_cert_file, *console_key_file;
    char *console_admin_group;
    char *console_owner_realm;
    char *console_audit_log;
    char *console_access_log; /* egressd's access log on this host, or NULL */
    long console_session_ms;
};

/* Fill c from the text of a config file named name (used in messages).
 * Returns 0, or -1 with "name:line: what was expected" in err.  On -1 the
 * caller still calls sbx_config_free(). */
int sbx_config_parse(struct sbx_config *c, const char *text, const char *name, char *err,
                     size_t errlen);

/* Read and parse the file at path; as sbx_config_parse(). */
int sbx_config_load(struct sbx_config *c, const char *path, char *err, size_t errlen);

/* Release what c holds; c itself is the caller's.  Safe on a zeroed c. */
void sbx_config_free(struct sbx_config *c);

/* The directory of the mcp-repo called label, or NULL. */
const char *sbx_config_mcp_repo(const struct sbx_config *c, const char *label);

/* The guest's environment variable for the placeholder of secret name
 * into var (len bytes): its `secret-env` line, else the built-in one
 * (anthropic ANTHROPIC_API_KEY, openai OPENAI_API_KEY, gemini
 * GEMINI_API_KEY, github GH_TOKEN), else EGRESSD_SECRET_NAME (upper case,
 * '-' as '_'). */
void sbx_config_secret_env(const struct sbx_config *c, const char *name, char *var, size_t len);

/* The size called name, or NULL. */
const struct sbx_size *sbx_config_size(const struct sbx_config *c, const char *name);

/* Parse a duration ("500ms", "5s", "10m", "24h", "1d"; a bare number is
 * seconds) into milliseconds.  Returns 0, or -1 when s is not one. */
int sbx_duration_parse(const char *s, long *ms);

/* Parse a size ("512", "16k", "4m", "1g") into bytes.  Returns 0 or -1. */
int sbx_bytes_parse(const char *s, long *bytes);

/* Format ms as the shortest exact duration ("4h", "90m", "1500ms") into buf. */
void sbx_duration_format(long ms, char *buf, size_t len);

#endif
