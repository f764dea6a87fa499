/*
 * egressctl - egressd's command-line tool.
 *
 * Offline commands, from the files alone (no daemon needed):
 *   egressctl check -c egressd.conf
 *   egressctl explain -c egressd.conf [--preset P] [--sandbox FILE.json]
 *                     [--addr IP]... [--at RFC3339] HOST[:PORT]
 *
 * Exit status: check 0 valid / 1 errors; explain 0 allowed (or would_deny
 * in report mode) / 1 denied; 2 for a usage or configuration error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "config.h"
#include "policy.h"
#include "policy_load.h"

#define EXIT_DENIED 1
#define EXIT_USAGE  2
#define MAX_ADDRS   16

static void usage(FILE *f)
{
    fputs("usage: egressctl check -c egressd.conf\n"
          "       egressctl explain -c egressd.conf [--preset P] [--sandbox FILE.json]\n"
          "                         [--addr IP]... [--at RFC3339] HOST[:PORT]\n"
          "\n"
          "check    validate egressd.conf and every preset in its policy-dir; print all errors\n"
          "explain  the verdict for HOST[:PORT] (default port 443) under a preset or a sandbox\n"
          "         binding (JSON as the admin API takes it), with the rule that decided;\n"
          "         --addr runs the address phase on an address the name resolved to\n",
          f);
}

static void print_diag(const struct policy_diag *d)
{
    for (size_t i = 0; i < d->n; i++)
        fprintf(stderr, "%s\n", d->lines[i]);
}

/* Config + geo + snapshot, or an exit status with every error printed. */
static int load_all(const char *conf, struct px_config *c, struct px_geo *g, struct policy **p)
{
    static char err[16384];
    struct policy_diag d = {0};

    if (px_config_load(c, conf, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        return EXIT_DENIED;
    }
    if (px_geo_open(g, c, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        return EXIT_DENIED;
    }
    *p = px_policy_load(c, g, &d);
    print_diag(&d);
    policy_diag_free(&d);
    if (*p == NULL) {
        px_geo_close(g);
        return EXIT_DENIED;
    }
    return 0;
}

static int cmd_check(const char *conf)
{
    struct px_config *c = malloc(sizeof(*c));
    struct px_geo g;
    struct policy *p = NULL;
    int rc = load_all(conf, c, &g, &p);

    if (rc == 0) {
        size_t n = 0;
        long rules = 0;
        for (const char *name; (name = policy_preset_name(p, n)) != NULL; n++)
            rules += policy_preset_rules(p, name);
        printf("%s: OK: %zu presets, %ld rules, default-policy %s\n", conf, n, rules,
               c->default_policy);
        policy_unref(p);
        px_geo_close(&g);
    }
    free(c);
    return rc;
}

/* The binding of a sandbox file as the admin API takes it. */
static struct policy_binding *sandbox_binding(struct policy *p, const char *file,
                                              const char *preset)
{
    json_error_t je;
    json_t *j = json_load_file(file, 0, &je), *allow;
    const char *lines[256], *policy, *id;
    char origin[128];
    size_t n = 0;
    struct policy_diag d = {0};
    struct policy_binding *b = NULL;

    if (j == NULL) {
        fprintf(stderr, "%s:%d:%d: %s\n", file, je.line, je.column, je.text);
        return NULL;
    }
    policy = json_string_value(json_object_get(j, "policy"));
    id = json_string_value(json_object_get(j, "id"));
    allow = json_object_get(j, "allow");
    if (policy == NULL && preset == NULL) {
        fprintf(stderr, "%s: expected a string \"policy\" (the preset) or --preset\n", file);
    } else if (allow != NULL && (!json_is_array(allow) || json_array_size(allow) > 256)) {
        fprintf(stderr, "%s: expected \"allow\" as an array of at most 256 strings\n", file);
    } else {
        for (; allow != NULL && n < json_array_size(allow); n++)
            if ((lines[n] = json_string_value(json_array_get(allow, n))) == NULL)
                break;
        if (allow != NULL && n < json_array_size(allow)) {
            fprintf(stderr, "%s: allow[%zu] is not a string\n", file, n);
        } else {
            snprintf(origin, sizeof(origin), "sandbox %s", id ? id : file);
            b = policy_binding_new(p, preset ? preset : policy, lines, n, origin, &d);
            print_diag(&d);
        }
    }
    policy_diag_free(&d);
    json_decref(j);
    return b;
}

static void print_rule(const char *label, const struct policy_verdict *v)
{
    printf("%-9s %s %s", label, policy_decision_str(v->decision), policy_reason_str(v->reason));
    if (v->rule.file != NULL)
        printf(" rule %s:%u", v->rule.file, v->rule.line);
    else if (v->reason == POLICY_R_NOT_ALLOWED)
        printf(": no rule matched: default deny");
    else if (v->reason == POLICY_R_PRIVATE_RANGE)
        printf(" (deny-range)");
    if (v->raw)
        printf(" [raw]");
    if (v->private_ok)
        printf(" [private-ok]");
    if (v->country[0] != '\0')
        printf(" country %s", v->country);
    if (v->asn != 0)
        printf(" asn %u", v->asn);
    printf("\n");
}

/* HOST[:PORT] (IPv6 in brackets) into host text and port. */
static bool split_target(const char *arg, char *host, size_t size, uint16_t *port)
{
    const char *colon = arg[0] == '[' ? strstr(arg, "]:") : strrchr(arg, ':');
    size_t hl = strlen(arg);
    *port = 443;
    if (colon != NULL) {
        if (arg[0] == '[')
            colon++;
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || v < 1 || v > 65535)
            return false;
        *port = (uint16_t)v;
        hl = (size_t)(colon - arg);
    }
    if (hl >= size)
        return false;
    memcpy(host, arg, hl);
    host[hl] = '\0';
    return true;
}

struct explain_args {
    const char *conf, *preset, *sandbox, *target;
    const char *addrs[MAX_ADDRS];
    size_t n_addrs;
    int64_t now;
};

static int explain(struct policy *p, const struct explain_args *a, const char *default_preset)
{
    char text[300];
    uint16_t port;
    struct policy_host h;
    struct policy_verdict name, v;
    enum policy_host_error e;
    struct policy_binding *b;
    struct policy_diag d = {0};
    int rc = 0;

    if (!split_target(a->target, text, sizeof(text), &port)) {
        fprintf(stderr, "egressctl: expected HOST[:PORT] with a port 1..65535, found '%s'\n",
                a->target);
        return EXIT_USAGE;
    }
    b = a->sandbox ? sandbox_binding(p, a->sandbox, a->preset)
                   : policy_binding_new(p, a->preset ? a->preset : default_preset, NULL, 0,
                                        "--preset", &d);
    print_diag(&d);
    policy_diag_free(&d);
    if (b == NULL)
        return EXIT_USAGE;
    e = policy_host_normalize(text, strlen(text), &h);
    if (e != POLICY_HOST_OK) {
        printf("host      '%s' does not normalize: %s\nverdict   deny bad_host\n", text,
               policy_host_error_str(e));
        policy_binding_free(b);
        return EXIT_DENIED;
    }
    printf("host      %s port %u\npreset    %s%s\n", h.text, port, policy_binding_preset(b),
           policy_binding_report(b) ? " (mode report)" : "");
    policy_decide_name(b, &h, port, a->now, &name);
    print_rule("name", &name);
    v = name;
    if (name.decision != POLICY_DENY) {
        uint8_t addr[16];
        size_t n = a->n_addrs;
        for (size_t i = 0; i < n || (n == 0 && h.kind != POLICY_HOST_NAME && i == 0); i++) {
            const char *s = n ? a->addrs[i] : h.text;
            if (!policy_addr_parse(s, strlen(s), addr)) {
                fprintf(stderr, "egressctl: --addr: expected an IP address, found '%s'\n", s);
                policy_binding_free(b);
                return EXIT_USAGE;
            }
            struct policy_verdict av;
            char label[80];
            policy_decide_addr(b, addr, port, &name, a->now, &av);
            snprintf(label, sizeof(label), "address %s", s);
            print_rule(label, &av);
            if (av.decision != POLICY_ALLOW && v.decision == POLICY_ALLOW)
                v = av;
        }
    }
    print_rule("verdict", &v);
    rc = v.decision == POLICY_DENY ? EXIT_DENIED : 0;
    policy_binding_free(b);
    return rc;
}

static int cmd_explain(struct explain_args *a)
{
    struct px_config *c = malloc(sizeof(*c));
    struct px_geo g;
    struct policy *p = NULL;
    int rc = load_all(a->conf, c, &g, &p);

    if (rc == 0) {
        rc = explain(p, a, c->default_policy);
        policy_unref(p);
        px_geo_close(&g);
    } else {
        rc = EXIT_USAGE;
    }
    free(c);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"preset", required_argument, NULL, 'p'},
        {"sandbox", required_argument, NULL, 's'},
        {"addr", required_argument, NULL, 'a'},
        {"at", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct explain_args a = {.now = (int64_t)time(NULL)};
    const char *cmd = argc > 1 ? argv[1] : NULL;
    int o;

    if (cmd == NULL || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(cmd ? stdout : stderr);
        return cmd ? 0 : EXIT_USAGE;
    }
    optind = 2;
    while ((o = getopt_long(argc, argv, "c:p:s:a:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': a.conf = optarg; break;
        case 'p': a.preset = optarg; break;
        case 's': a.sandbox = optarg; break;
        case 'a':
            if (a.n_addrs == MAX_ADDRS) {
                fprintf(stderr, "egressctl: at most %d --addr\n", MAX_ADDRS);
                return EXIT_USAGE;
            }
            a.addrs[a.n_addrs++] = optarg;
            break;
        case 't':
            if (!policy_time_parse(optarg, strlen(optarg), &a.now)) {
                fprintf(stderr, "egressctl: --at: expected an RFC 3339 time, found '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (a.conf == NULL) {
        fprintf(stderr, "egressctl %s: -c egressd.conf is required\n", cmd);
        return EXIT_USAGE;
    }
    if (strcmp(cmd, "check") == 0 && optind == argc)
        return cmd_check(a.conf) == 0 ? 0 : 1;
    if (strcmp(cmd, "explain") == 0 && optind + 1 == argc) {
        a.target = argv[optind];
        return cmd_explain(&a);
    }
    usage(stderr);
    return EXIT_USAGE;
}
