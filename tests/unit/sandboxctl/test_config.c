/* test_config.c - sandboxctl.conf: every directive, defaults, and errors
 * that name file:line and what was expected. */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "tap.h"

static const char good[] = "# comment line\n"
                           "pve-url https://pve.example:8006   # trailing comment\n"
                           "pve-token-file /etc/sandboxctl/token\n"
                           "pve-fingerprint "
                           "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:"
                           "89:AB:CD:EF:01:23:45:67:89\n"
                           "node auto\n"
                           "template pve1:9000\n"
                           "template 9001\n"
                           "pool sandboxes\n"
                           "storage local-lvm\n"
                           "bridge vmbr99\n"
                           "ip-pool 10.99.0.10-10.99.0.200/24\n"
                           "gateway 10.99.0.1\n"
                           "proxy 10.99.0.1:3128\n"
                           "egressd-admin unix:/run/egressd/admin.sock\n"
                           "egressd-admin http://127.0.0.1:9000\n"
                           "size large 4 8192\n"
                           "size small 1 2048\n"
                           "max-total-memory-mib 16384\n"
                           "lifetime-default 2h\n"
                           "lifetime-max 12h\n"
                           "mcp-presets locked balanced\n"
                           "mcp-token-file /etc/sandboxctl/mcp.token\n"
                           "\n";

/* Parse good + extra and return the error text ("" when it parsed). */
static const char *parse_with(const char *extra, struct sbx_config *c)
{
    static char err[512];
    char text[4096];

    snprintf(text, sizeof text, "%s%s", good, extra);
    err[0] = '\0';
    if (sbx_config_parse(c, text, "t.conf", err, sizeof err) == 0)
        err[0] = '\0';
    return err;
}

static void test_good(void)
{
    struct sbx_config c;
    const char *err = parse_with("", &c);

    ok(err[0] == '\0', "a complete config parses (%s)", err);
    ok(strcmp(c.pve_url, "https://pve.example:8006") == 0, "pve-url, comment stripped");
    ok(c.have_pin && c.pin[0] == 0xAB && c.pin[31] == 0x89, "pve-fingerprint into 32 bytes");
    ok(c.ntemplates == 2 && strcmp(c.templates[0].node, "pve1") == 0 &&
           c.templates[0].vmid == 9000 && c.templates[1].node[0] == '\0' &&
           c.templates[1].vmid == 9001,
       "template NODE:VMID and VMID");
    ok(c.ip_first == 0x0A63000A && c.ip_last == 0x0A6300C8 && c.ip_prefix == 24, "ip-pool");
    ok(strcmp(c.proxy_addr, "10.99.0.1") == 0 && c.proxy_port == 3128, "proxy ADDR:PORT");
    ok(c.negress == 2 && strcmp(c.egress[0], "unix:/run/egressd/admin.sock") == 0,
       "egressd-admin repeatable");
    ok(sbx_config_size(&c, "large") && sbx_config_size(&c, "large")->memory_mib == 8192,
       "a new size");
    ok(sbx_config_size(&c, "small")->cores == 1, "a size line overrides the built-in one");
    ok(sbx_config_size(&c, "medium")->cores == 4 &&
           sbx_config_size(&c, "medium")->memory_mib == 8192,
       "the built-in medium is 4 cores, 8 GiB");
    ok(c.max_cores == 4 && c.max_memory_mib == 8192, "guard defaults 4 cores / 8 GiB");
    ok(c.max_total_memory_mib == 16384, "max-total-memory-mib");
    ok(c.lifetime_default_ms == 2 * 3600000L && c.lifetime_max_ms == 12 * 3600000L, "lifetimes");
    ok(c.mcp_presets[0] && strcmp(c.mcp_presets[1], "balanced") == 0 && !c.mcp_presets[2],
       "mcp-presets, NULL-terminated");
    ok(strcmp(c.state_dir, "/var/lib/sandboxctl") == 0, "state-dir default");
    ok(c.dns_addr && strcmp(c.dns_addr, "10.99.0.1") == 0 && !c.dns_none,
       "dns-addr default: the proxy's address");
    ok(!c.transparent, "transparent default: off");
    sbx_config_free(&c);
}

static void test_dns(void)
{
    struct sbx_config c;
    const char *err = parse_with("dns-addr 10.99.0.53\n", &c);

    ok(err[0] == '\0' && c.dns_addr && strcmp(c.dns_addr, "10.99.0.53") == 0 && !c.dns_none,
       "dns-addr ADDR (%s)", err);
    sbx_config_free(&c);
    err = parse_with("dns-addr none\n", &c);
    ok(err[0] == '\0' && c.dns_addr == NULL && c.dns_none, "dns-addr none: no DNS address (%s)",
       err);
    sbx_config_free(&c);
    err = parse_with("dns-addr none\ndns-addr 10.99.0.2\n", &c);
    ok(err[0] == '\0' && c.dns_addr && strcmp(c.dns_addr, "10.99.0.2") == 0 && !c.dns_none,
       "a later dns-addr line replaces 'none' (%s)", err);
    sbx_config_free(&c);
    err = parse_with("dns-addr 10.99.0.2\ndns-addr none\n", &c);
    ok(err[0] == '\0' && c.dns_addr == NULL && c.dns_none, "and 'none' replaces an address (%s)",
       err);
    sbx_config_free(&c);
    err = parse_with("transparent on\n", &c);
    ok(err[0] == '\0' && c.transparent, "transparent on (%s)", err);
    sbx_config_free(&c);
    err = parse_with("transparent on\ntransparent off\n", &c);
    ok(err[0] == '\0' && !c.transparent, "transparent off after on (%s)", err);
    sbx_config_free(&c);
}

/* push/pull: guest-user, the caps, protected-paths, mcp-repo. */
static void test_git(void)
{
    struct sbx_config c;
    const char *err = parse_with("", &c);

    ok(err[0] == '\0' && strcmp(c.guest_user, "agent") == 0 && c.pull_max_bytes == 64L << 20 &&
           c.pull_max_refs == 1000 && c.pull_max_objects == 200000 &&
           strcmp(c.protected_paths[0], ".github/") == 0 && c.nmcp_repos == 0,
       "push/pull defaults: guest-user agent, pull-max-bytes 64m, refs 1000, .github/ protected");
    sbx_config_free(&c);
    err = parse_with("guest-user root\npull-max-bytes 1m\npull-max-blob-bytes 4m\n"
                     "pull-max-refs 50\npull-max-objects 10\nprotected-paths a/ b\n"
                     "protected-paths /c\nmcp-repo proj /srv/proj\n",
                     &c);
    ok(err[0] == '\0' && strcmp(c.guest_user, "root") == 0 && c.pull_max_bytes == 1L << 20 &&
           c.pull_max_blob_bytes == 4L << 20 && c.pull_max_refs == 50 && c.pull_max_objects == 10 &&
           strcmp(c.protected_paths[0], "a/") == 0 && strcmp(c.protected_paths[2], "/c") == 0 &&
           !c.protected_paths[3] && strcmp(sbx_config_mcp_repo(&c, "proj"), "/srv/proj") == 0 &&
           !sbx_config_mcp_repo(&c, "other"),
       "push/pull settings; the first protected-paths replaces the default, the next adds (%s)",
       err);
    sbx_config_free(&c);
    err = parse_with("protected-paths none\n", &c);
    ok(err[0] == '\0' && !c.protected_paths[0], "protected-paths none empties the list (%s)", err);
    sbx_config_free(&c);
}

/* Credential injection: secret-env (the guest's variable per secret, over
 * built-in names and a derived one) and mcp-secrets. */
static void test_secrets(void)
{
    struct sbx_config c;
    char var[SBX_ENV_NAME_MAX];
    const char *err = parse_with("", &c);

    ok(err[0] == '\0' && c.nsecret_env == 0 && !c.mcp_secrets[0],
       "by default: no secret-env line, no secret over MCP");
    sbx_config_secret_env(&c, "anthropic", var, sizeof var);
    ok(strcmp(var, "ANTHROPIC_API_KEY") == 0, "anthropic: ANTHROPIC_API_KEY built in (%s)", var);
    sbx_config_secret_env(&c, "openai", var, sizeof var);
    ok(strcmp(var, "OPENAI_API_KEY") == 0, "openai: OPENAI_API_KEY built in (%s)", var);
    sbx_config_secret_env(&c, "gemini", var, sizeof var);
    ok(strcmp(var, "GEMINI_API_KEY") == 0, "gemini: GEMINI_API_KEY built in (%s)", var);
    sbx_config_secret_env(&c, "github", var, sizeof var);
    ok(strcmp(var, "GH_TOKEN") == 0, "github: GH_TOKEN built in (%s)", var);
    sbx_config_secret_env(&c, "build-cache_2", var, sizeof var);
    ok(strcmp(var, "EGRESSD_SECRET_BUILD_CACHE_2") == 0,
       "another secret: EGRESSD_SECRET_ upper case, - as _ (%s)", var);
    sbx_config_secret_env(&c, "build-cache_2", var, 12);
    ok(strcmp(var, "EGRESSD_SEC") == 0, "a short buffer gets a cut, terminated name (%s)", var);
    sbx_config_free(&c);
    err = parse_with("secret-env github GITHUB_TOKEN\nsecret-env npm-ci NPM_TOKEN\n"
                     "mcp-presets balanced\nmcp-secrets anthropic\nmcp-secrets github npm-ci\n",
                     &c);
    ok(err[0] == '\0' && c.nsecret_env == 2, "secret-env lines parse (%s)", err);
    sbx_config_secret_env(&c, "github", var, sizeof var);
    ok(strcmp(var, "GITHUB_TOKEN") == 0, "secret-env replaces a built-in name (%s)", var);
    sbx_config_secret_env(&c, "npm-ci", var, sizeof var);
    ok(strcmp(var, "NPM_TOKEN") == 0, "secret-env names another secret's variable (%s)", var);
    sbx_config_secret_env(&c, "anthropic", var, sizeof var);
    ok(strcmp(var, "ANTHROPIC_API_KEY") == 0, "the other built-in names stay (%s)", var);
    ok(strcmp(c.mcp_secrets[0], "github") == 0 && strcmp(c.mcp_secrets[1], "npm-ci") == 0 &&
           !c.mcp_secrets[2],
       "mcp-secrets: the last line is the list, as with mcp-presets");
    sbx_config_free(&c);
    err = parse_with("mcp-secrets anthropic\nmcp-secrets\n", &c);
    ok(err[0] == '\0' && !c.mcp_secrets[0], "an empty mcp-secrets line permits none (%s)", err);
    sbx_config_free(&c);
}

/* Access requests: access-auto and access-owner-approves (lines add up,
 * `none` empties, entries are normalized) and access-max. */
static void test_access(void)
{
    struct sbx_config c;
    const char *err = parse_with("", &c);

    ok(err[0] == '\0' && !c.access_auto[0] && !c.access_owner[0] &&
           c.access_max_ms == 8 * 3600 * 1000L,
       "by default: nothing granted by itself, nothing an owner approves, access-max 8h");
    sbx_config_free(&c);
    err = parse_with("access-auto PyPI.org. .pythonhosted.org:443\naccess-auto *.crates.io:443\n"
                     "access-owner-approves .github.com\naccess-max 2h\n",
                     &c);
    ok(err[0] == '\0' && strcmp(c.access_auto[0], "pypi.org") == 0 &&
           strcmp(c.access_auto[1], ".pythonhosted.org:443") == 0 &&
           strcmp(c.access_auto[2], "*.crates.io:443") == 0 && !c.access_auto[3],
       "access-auto: the lines add up, normalized (%s)", err);
    ok(strcmp(c.access_owner[0], ".github.com") == 0 && !c.access_owner[1] &&
           c.access_max_ms == 2 * 3600 * 1000L,
       "access-owner-approves and access-max");
    sbx_config_free(&c);
    err = parse_with("access-auto pypi.org\naccess-auto none\n", &c);
    ok(err[0] == '\0' && !c.access_auto[0], "access-auto none empties the list (%s)", err);
    sbx_config_free(&c);
}

/* The console's directives and their defaults. */
static void test_console(void)
{
    struct sbx_config c;
    const char *err = parse_with("", &c);

    ok(err[0] == '\0' && !c.console_listen && !c.console_admin_group && !c.console_access_log &&
           strcmp(c.console_owner_realm, "pam") == 0 && c.console_session_ms == 2 * 3600 * 1000L &&
           strstr(c.console_audit_log, "/console-audit.log"),
       "console defaults: realm pam, 2h sessions, the audit log in the state-dir (%s)",
       c.console_audit_log);
    sbx_config_free(&c);
    err = parse_with("console-listen 192.0.2.1:8443\nconsole-cert-file /c.pem\n"
                     "console-key-file /c.key\nconsole-admin-group admins\n"
                     "console-owner-realm pve\nconsole-session 30m\n"
                     "console-access-log /var/log/egressd/access.log\n",
                     &c);
    ok(err[0] == '\0' && strcmp(c.console_listen, "192.0.2.1:8443") == 0 &&
           strcmp(c.console_cert_file, "/c.pem") == 0 &&
           strcmp(c.console_admin_group, "admins") == 0 &&
           strcmp(c.console_owner_realm, "pve") == 0 && c.console_session_ms == 30 * 60 * 1000L &&
           strcmp(c.console_access_log, "/var/log/egressd/access.log") == 0,
       "console directives (%s)", err);
    sbx_config_free(&c);
}

struct bad {
    const char *extra;
    const char *want; /* a substring of the error */
};

static void test_bad(void)
{
    static const struct bad bad[] = {
        {"frobnicate 1\n", "t.conf:24: unknown directive 'frobnicate'"},
        {"access-auto\n", "t.conf:24: access-auto: expected host patterns"},
        {"access-auto ~.*\n", "t.conf:24: access-auto: '~.*' is not HOST, *.DOMAIN or .DOMAIN"},
        {"access-owner-approves 10.0.0.1:443\n", "'10.0.0.1:443' is not HOST"},
        {"access-owner-approves *\n", "t.conf:24: access-owner-approves: '*' is not HOST"},
        {"access-max 2x\n", "t.conf:24: access-max"},
        {"pool\n", "t.conf:24: pool: expected one value, got 0"},
        {"pool a b\n", "t.conf:24: pool: expected one value, got 2"},
        {"max-cores x\n", "t.conf:24: max-cores: expected an integer"},
        {"max-cores 0\n", "t.conf:24: max-cores: expected an integer 1.."},
        {"ip-pool 10.99.0.10/24\n", "t.conf:24: ip-pool: expected FIRST-LAST/PREFIX"},
        {"ip-pool 10.99.0.200-10.99.0.10/24\n", "first address after the last"},
        {"ip-pool 10.99.0.1-10.99.0.9/33\n", "ip-pool prefix: expected an integer 8..30"},
        {"proxy 10.99.0.1\n", "t.conf:24: proxy: expected ADDR:PORT"},
        {"proxy proxy.example:3128\n", "is not an IPv4 address"},
        {"proxy 10.99.0.1:70000\n", "proxy port: expected an integer 1..65535"},
        {"template pve1:abc\n", "t.conf:24: template: expected an integer"},
        {"pve-fingerprint 12:34\n", "pve-fingerprint: expected 32 bytes"},
        {"pve-fingerprint zz\n", "expected the SHA-256 of the certificate"},
        {"pve-url http://pve.example:8006\n", "pve-url: expected https://"},
        {"egressd-admin ftp://x\n", "egressd-admin: expected unix:/PATH or http(s)"},
        {"lifetime-max soon\n", "lifetime-max: expected a duration"},
        {"size huge 4\n", "size: expected NAME CORES MEMORY_MIB"},
        {"gateway 10.99.0\n", "gateway: '10.99.0' is not an IPv4 address"},
        {"bridge vmbr99;x\n", "bridge: 'vmbr99;x' is not a name"},
        {"pve-ca-file /etc/pve/pve-root-ca.pem\n",
         "t.conf:24: expected exactly one of 'pve-ca-file' or"},
        {"lifetime-default 13h\n", "t.conf:24: lifetime-default is longer than lifetime-max"},
        {"mcp-presets ../../etc\n", "mcp-presets: '../../etc' is not a preset name"},
        {"dns-addr\n", "t.conf:24: dns-addr: expected one value, got 0"},
        {"transparent yes\n", "t.conf:24: transparent: expected 'on' or 'off', got 'yes'"},
        {"transparent\n", "t.conf:24: transparent: expected one value, got 0"},
        {"dns-addr 10.99.0.1 10.99.0.2\n", "t.conf:24: dns-addr: expected one value, got 2"},
        {"dns-addr dns.example\n",
         "t.conf:24: dns-addr: expected an IPv4 address (10.99.0.1) or 'none', got 'dns.example'"},
        {"dns-addr 10.99.0.1:53\n", "t.conf:24: dns-addr: expected an IPv4 address"},
        {"dns-addr 010.99.0.1\n", "t.conf:24: dns-addr: expected an IPv4 address"},
        {"dns-addr NONE\n", "t.conf:24: dns-addr: expected an IPv4 address (10.99.0.1) or 'none'"},
        {"pull-max-bytes 10\n", "t.conf:24: pull-max-bytes: expected a size of at least 1k"},
        {"pull-max-refs 0\n", "t.conf:24: pull-max-refs: expected an integer 1.."},
        {"guest-user a;b\n", "t.conf:24: guest-user: 'a;b' is not a name"},
        {"mcp-repo proj relative/dir\n", "t.conf:24: mcp-repo: expected an absolute directory"},
        {"mcp-repo ../x /srv\n", "t.conf:24: mcp-repo: '../x' is not a label"},
        {"mcp-repo p /a\nmcp-repo p /b\n", "t.conf:25: mcp-repo: 'p' is given twice"},
        {"protected-paths\n", "t.conf:24: protected-paths: expected patterns"},
        {"secret-env anthropic\n", "t.conf:24: secret-env: expected NAME VAR"},
        {"secret-env anthropic A B\n", "t.conf:24: secret-env: expected NAME VAR"},
        {"secret-env Anthropic KEY\n", "t.conf:24: secret-env: 'Anthropic' is not a secret's name"},
        {"secret-env -x KEY\n", "t.conf:24: secret-env: '-x' is not a secret's name"},
        {"secret-env anthropic 1KEY\n", "t.conf:24: secret-env: '1KEY' is not an environment"},
        {"secret-env anthropic A-KEY\n", "t.conf:24: secret-env: 'A-KEY' is not an environment"},
        {"secret-env anthropic "
         "K123456789012345678901234567890123456789012345678901234567890123\n",
         "t.conf:24: secret-env: 'K1234"},
        {"secret-env anthropic SSL_CERT_FILE\n",
         "t.conf:24: secret-env: SSL_CERT_FILE is set by sandboxctl itself"},
        {"secret-env anthropic NODE_EXTRA_CA_CERTS\n",
         "t.conf:24: secret-env: NODE_EXTRA_CA_CERTS is set by sandboxctl itself"},
        {"secret-env anthropic HTTPS_PROXY\n",
         "t.conf:24: secret-env: HTTPS_PROXY is set by sandboxctl itself"},
        {"secret-env anthropic A\nsecret-env anthropic B\n",
         "t.conf:25: secret-env: 'anthropic' is given twice"},
        {"secret-env anthropic KEY\nsecret-env openai KEY\n",
         "t.conf:25: secret-env: KEY is already the variable of secret 'anthropic'"},
        {"mcp-secrets anthropic ../x\n", "t.conf:24: mcp-secrets: '../x' is not a secret's name"},
        {"mcp-secrets a b a\n", "t.conf:24: mcp-secrets: 'a' is given twice"},
        {"console-session 3h\n", "console-session is longer than 2h"},
        {"console-session soon\n", "t.conf:24: console-session: expected a duration"},
        {"console-cert-file /etc/c.pem\n", "console-cert-file and console-key-file go together"},
        {"console-key-file /etc/c.key\n", "console-cert-file and console-key-file go together"},
        {"console-listen a b\n", "t.conf:24: console-listen: expected one value, got 2"},
    };
    struct sbx_config c;

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *err = parse_with(bad[i].extra, &c);
        ok(strstr(err, bad[i].want) != NULL, "refused '%.*s': %s", (int)strcspn(bad[i].extra, "\n"),
           bad[i].extra, err);
        sbx_config_free(&c);
    }
}

static void test_missing(void)
{
    struct sbx_config c;
    char err[512];
    int rc = sbx_config_parse(&c, "pve-url https://x:8006\n", "m.conf", err, sizeof err);

    ok(rc == -1 && strstr(err, "m.conf: missing directive 'pve-token-file'"),
       "a missing directive is named: %s", err);
    sbx_config_free(&c);
    rc = sbx_config_parse(&c,
                          "pve-url https://x:8006\npve-token-file t\npool p\nbridge b\n"
                          "gateway 10.0.0.1\n",
                          "m.conf", err, sizeof err);
    ok(rc == -1 &&
           strstr(err, "m.conf: missing directive: expected exactly one of 'pve-ca-file' or"),
       "no way to check the certificate is a missing directive: %s", err);
    sbx_config_free(&c);
    rc = sbx_config_load(&c, "/nonexistent/sandboxctl.conf", err, sizeof err);
    ok(rc == -1 && strstr(err, "/nonexistent/sandboxctl.conf: cannot open"),
       "an unreadable file is named: %s", err);
    sbx_config_free(&c);
}

static void test_durations(void)
{
    long v;
    char buf[32];

    ok(sbx_duration_parse("500ms", &v) == 0 && v == 500, "500ms");
    ok(sbx_duration_parse("5s", &v) == 0 && v == 5000, "5s");
    ok(sbx_duration_parse("10m", &v) == 0 && v == 600000, "10m");
    ok(sbx_duration_parse("24h", &v) == 0 && v == 86400000, "24h");
    ok(sbx_duration_parse("7", &v) == 0 && v == 7000, "a bare number is seconds");
    ok(sbx_duration_parse("-1h", &v) == -1, "negative refused");
    ok(sbx_duration_parse("1hour", &v) == -1, "unknown unit refused");
    ok(sbx_duration_parse("h", &v) == -1, "no number refused");
    ok(sbx_duration_parse("99999999999999999999h", &v) == -1, "overflow refused");
    ok(sbx_bytes_parse("16k", &v) == 0 && v == 16384, "16k");
    ok(sbx_bytes_parse("1g", &v) == 0 && v == 1073741824L, "1g");
    ok(sbx_bytes_parse("1kb", &v) == -1, "1kb refused");
    sbx_duration_format(4 * 3600000L, buf, sizeof buf);
    ok(strcmp(buf, "4h") == 0, "format 4h (%s)", buf);
    sbx_duration_format(90 * 60000L, buf, sizeof buf);
    ok(strcmp(buf, "90m") == 0, "format 90m (%s)", buf);
    sbx_duration_format(1500, buf, sizeof buf);
    ok(strcmp(buf, "1500ms") == 0, "format 1500ms (%s)", buf);
}

int main(void)
{
    test_good();
    test_dns();
    test_git();
    test_secrets();
    test_access();
    test_console();
    test_bad();
    test_missing();
    test_durations();
    return tap_done();
}
