/*
 * fuzz_sbx_config.c - sandboxctl.conf (sandbox-orchestrator/config.c) on
 * any bytes.  The file is an admin's, but a typo must still get a clear
 * error, never a crash, a hang or a half-read config.
 *
 * Properties:
 *   - a parse gives 0 and a config, or -1 and one line of error that names
 *     the file and a line that exists ("f.conf:LINE: "); the only error
 *     without a line is a directive missing from the whole file;
 *   - a config that parses holds only values its directives accept: the
 *     required directives, exactly one way to check the certificate, names
 *     of letters, digits, . _ -, ports and counts in their ranges, an
 *     ip-pool in order, lifetime-default <= lifetime-max, a dns-addr that
 *     is an IPv4 address, or none only after `dns-addr none`;
 *   - lines are counted right: the same text after one more empty line
 *     gives the same result, with every line number one higher; a comment
 *     line added at the end changes nothing;
 *   - sbx_config_free() releases everything (LeakSanitizer).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_check.h"

#define NAME "f.conf"

struct outcome {
    int rc;
    char err[1024];
};

static int name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= SBX_NAME_MAX)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static void check_config(const struct sbx_config *c)
{
    CHECK(c->pve_url && strncmp(c->pve_url, "https://", 8) == 0, "pve-url");
    CHECK(c->pve_token_file && c->pool && c->bridge && c->gateway, "a required directive unset");
    CHECK(!c->pve_ca_file != !c->have_pin, "both or neither of pve-ca-file and pve-fingerprint");
    CHECK(name_ok(c->pool) && name_ok(c->bridge), "pool '%s' or bridge '%s'", c->pool, c->bridge);
    CHECK(c->node && (strcmp(c->node, "auto") == 0 || name_ok(c->node)), "node");
    CHECK(!c->storage || name_ok(c->storage), "storage '%s'", c->storage);
    CHECK(c->ntemplates >= 1 && c->ntemplates <= SBX_MAX_TEMPLATES, "%d templates", c->ntemplates);
    for (int i = 0; i < c->ntemplates; i++)
        CHECK(c->templates[i].vmid >= 100 &&
                  (!c->templates[i].node[0] || name_ok(c->templates[i].node)),
              "template %d: %s:%d", i, c->templates[i].node, c->templates[i].vmid);
    CHECK(c->ip_prefix >= 8 && c->ip_prefix <= 30 && c->ip_first <= c->ip_last &&
              c->ip_last - c->ip_first <= 65535,
          "ip-pool /%d", c->ip_prefix);
    CHECK(c->proxy_addr && c->proxy_port >= 1 && c->proxy_port <= 65535, "proxy");
    {
        struct in_addr a;
        CHECK(c->dns_none ? c->dns_addr == NULL
                          : c->dns_addr && inet_pton(AF_INET, c->dns_addr, &a) == 1,
              "dns-addr '%s' (none: %d)", c->dns_addr ? c->dns_addr : "(null)", c->dns_none);
    }
    CHECK(c->negress >= 0 && c->negress <= SBX_MAX_EGRESS, "%d egressd-admin", c->negress);
    CHECK(c->nsizes >= 1 && c->nsizes <= SBX_MAX_SIZES, "%d sizes", c->nsizes);
    for (int i = 0; i < c->nsizes; i++)
        CHECK(name_ok(c->sizes[i].name) && c->sizes[i].cores >= 1 && c->sizes[i].memory_mib >= 16,
              "size %d", i);
    CHECK(c->max_cores >= 1 && c->max_memory_mib >= 1 && c->max_total_memory_mib >= 1 &&
              c->max_snapshots >= 1 && c->max_snapshots <= 100,
          "a limit out of range");
    CHECK(c->lifetime_default_ms > 0 && c->lifetime_default_ms <= c->lifetime_max_ms,
          "lifetimes %ld > %ld", c->lifetime_default_ms, c->lifetime_max_ms);
    CHECK(c->http_timeout_ms > 0 && c->task_timeout_ms > 0 && c->agent_timeout_ms > 0 &&
              c->exec_timeout_ms > 0 && c->exec_output_max >= 1024,
          "a timeout or exec-output-max out of range");
    for (int i = 0; i <= SBX_MAX_PRESETS && c->mcp_presets[i]; i++)
        CHECK(name_ok(c->mcp_presets[i]), "mcp-presets '%s'", c->mcp_presets[i]);
}

/* The error names the file, then a line of the text (1..lines), or says
 * which directive the whole file lacks; one line, nothing after it. */
static void check_error(const char *err, int lines)
{
    unsigned line = 0;
    int used = 0;

    CHECK(strncmp(err, NAME ":", sizeof NAME) == 0, "error without the file name: %s", err);
    CHECK(strchr(err, '\n') == NULL, "an error of more than one line: %s", err);
    static const char missing[] = NAME ": missing directive";

    if (strncmp(err, missing, sizeof missing - 1) == 0)
        return;
    CHECK(sscanf(err, NAME ":%u: %n", &line, &used) == 1 && used > 0, "error without its line: %s",
          err);
    CHECK(line >= 1 && (int)line <= lines, "line %u of %d: %s", line, lines, err);
    CHECK(err[used] != '\0', "an error that says nothing: %s", err);
}

static void parse(const char *text, struct outcome *o, int lines)
{
    struct sbx_config c;

    o->err[0] = '\0';
    o->rc = sbx_config_parse(&c, text, NAME, o->err, sizeof o->err);
    CHECK(o->rc == 0 || o->rc == -1, "rc %d", o->rc);
    if (o->rc == 0)
        check_config(&c);
    else
        check_error(o->err, lines);
    sbx_config_free(&c);
}

/* b is a's error with its line number one higher (or the same error when
 * it has no line). */
static int shifted(const char *a, const char *b)
{
    unsigned la, lb;
    int ua = 0, ub = 0;

    if (sscanf(a, NAME ":%u: %n", &la, &ua) != 1 || ua == 0)
        return strcmp(a, b) == 0;
    return sscanf(b, NAME ":%u: %n", &lb, &ub) == 1 && ub > 0 && lb == la + 1 &&
           strcmp(a + ua, b + ub) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct outcome first, later, commented;
    int lines = 1;

    if (size > 8192 || memchr(data, '\0', size))
        return 0; /* sbx_config_load() refuses NUL bytes before parsing */
    char *text = malloc(size + 16);
    memcpy(text + 1, data, size);
    text[size + 1] = '\0';
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';

    parse(text + 1, &first, lines);

    text[0] = '\n';
    parse(text, &later, lines + 1);
    CHECK(later.rc == first.rc && (first.rc == 0 || shifted(first.err, later.err)),
          "one more line before changed the outcome: '%s' then '%s'", first.err, later.err);

    memcpy(text + 1 + size, "\n# end\n", 8);
    parse(text + 1, &commented, lines + 2);
    CHECK(commented.rc == first.rc && strcmp(commented.err, first.err) == 0,
          "a comment at the end changed the outcome: '%s' then '%s'", first.err, commented.err);
    free(text);
    return 0;
}
