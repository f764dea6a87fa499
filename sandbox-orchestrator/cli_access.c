/* cli_access.c - `sandboxctl access ...` and `sandboxctl denials`: the
 * command line of ops_access.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ops.h"
#include "printable.h"

#define EXIT_FAILED 1
#define EXIT_USAGE  2

static const char access_usage[] =
    "usage: sandboxctl access request NAME HOST[:PORTS] --why TEXT [--for DURATION]\n"
    "                 [--methods M[,M...]] [--paths GLOB[,GLOB...]] [--whole-host]\n"
    "       sandboxctl access list [NAME] [--all]\n"
    "       sandboxctl access show ID\n"
    "       sandboxctl access approve ID [--for DURATION]\n"
    "       sandboxctl access deny ID\n"
    "       sandboxctl denials NAME\n";

static int usage(const char *why)
{
    fprintf(stderr, "sandboxctl: %s\n%s", why, access_usage);
    return EXIT_USAGE;
}

/* Member key of o as printable text (printable.h), "-" when it is not a
 * string: hosts and reasons come from sandboxes and egressd's denials. */
static const char *str(json_t *o, const char *key)
{
    const char *v = sbx_printable_get(o, key);

    return v ? v : "-";
}

/* A request's duration as "2h". */
static const char *asked_for(const json_t *r, char *buf, size_t len)
{
    sbx_duration_format((long)json_integer_value(json_object_get(r, "seconds")) * 1000, buf, len);
    return buf;
}

/* What request r would let through: "HOST[ methods M][ paths P]" into
 * buf. */
static const char *scope(json_t *r, char *buf, size_t len)
{
    const char *m = sbx_printable_get(r, "methods"), *p = sbx_printable_get(r, "paths");

    snprintf(buf, len, "%s%s%s%s%s", str(r, "host"), m ? " methods " : "", m ? m : "",
             p ? " paths " : "", p ? p : "");
    return buf;
}

/* A denial as one line: "TS METHOD HOST:PORT PATH (REASON)". */
static void print_denial_line(const char *indent, json_t *d)
{
    printf("%s%s %s %s:%d%s%s (%s)\n", indent, str(d, "ts"), str(d, "method"), str(d, "host"),
           (int)json_integer_value(json_object_get(d, "port")),
           json_is_string(json_object_get(d, "path")) ? " " : "",
           json_is_string(json_object_get(d, "path")) ? str(d, "path") : "", str(d, "reason"));
}

static void print_request(json_t *r)
{
    char d[32], what[1200];

    if (strcmp(str(r, "status"), "approved") == 0)
        printf("request %s: %s may reach %s until %s (%s)\n", str(r, "id"), str(r, "name"),
               scope(r, what, sizeof what), str(r, "until"), str(r, "by"));
    else if (strcmp(str(r, "status"), "denied") == 0)
        printf("request %s: %s denied %s (%s)\n", str(r, "id"), str(r, "name"),
               scope(r, what, sizeof what), str(r, "by"));
    else
        printf("request %s: %s asks for %s for %s: pending; an administrator decides with "
               "`sandboxctl access approve %s` or `sandboxctl access deny %s`%s\n",
               str(r, "id"), str(r, "name"), scope(r, what, sizeof what), asked_for(r, d, sizeof d),
               str(r, "id"), str(r, "id"),
               json_is_true(json_object_get(r, "owner_may_approve"))
                   ? " (its owner may also approve it through MCP)"
                   : "");
    if (json_is_object(json_object_get(r, "denial"))) {
        printf("  asked for %s; narrowed to the request egressd denied:\n", str(r, "asked"));
        print_denial_line("    ", json_object_get(r, "denial"));
    }
    if (json_is_string(json_object_get(r, "guest_ca")))
        printf("  the guest's CA: %s\n", str(r, "guest_ca"));
}

/* access show: the request, its policy line, and which recent denials it
 * would let pass. */
static void print_show(json_t *r)
{
    json_t *pass = json_object_get(r, "would_pass"), *d;
    size_t i;

    print_request(r);
    printf("  adds the rule: %s\n", str(r, "rule"));
    if (!json_is_array(pass)) {
        printf("  which denials it lifts is not known: %s\n", str(r, "denials_error"));
        return;
    }
    printf("  of the sandbox's %d recent denials, it would let %zu pass%s\n",
           (int)json_integer_value(json_object_get(r, "recent")), json_array_size(pass),
           json_array_size(pass) ? ":" : "");
    json_array_foreach(pass, i, d)
    {
        print_denial_line("    ", d);
        if (json_is_true(json_object_get(d, "requests_judged")))
            printf("      (a tunnel: egressd will read it and judge each request inside)\n");
    }
}

static void print_list(json_t *o)
{
    json_t *r;
    size_t i;
    char d[32];

    printf("%-8s %-24s %-32s %-6s %-9s %-20s %s\n", "ID", "NAME", "HOST", "FOR", "STATUS",
           "REQUESTED", "WHY");
    json_array_foreach(json_object_get(o, "requests"), i, r)
    {
        printf("%-8s %-24s %-32s %-6s %-9s %-20s %s\n", str(r, "id"), str(r, "name"),
               str(r, "host"), asked_for(r, d, sizeof d), str(r, "status"), str(r, "requested"),
               str(r, "why"));
    }
}

static void print_denials(json_t *o)
{
    json_t *d;
    size_t i;
    char where[300];

    printf("%-24s %-40s %-24s %s\n", "TIME", "HOST:PORT", "REASON", "RULE / HINT");
    json_array_foreach(json_object_get(o, "denials"), i, d)
    {
        snprintf(where, sizeof where, "%s:%d", str(d, "host"),
                 (int)json_integer_value(json_object_get(d, "port")));
        printf("%-24s %-40s %-24s %s%s%s\n", str(d, "ts"), where, str(d, "reason"), str(d, "rule"),
               json_is_string(json_object_get(d, "hint")) ? " / " : "",
               json_is_string(json_object_get(d, "hint")) ? str(d, "hint") : "");
    }
}

/* Runs op on args (consumed) and prints its result: JSON, or human(). */
static int run(struct sbx *s, int json, sbx_op_fn op, json_t *args, void (*human)(json_t *))
{
    char err[4096];
    json_t *out = NULL;
    int rc = op(s, args, &out, err, sizeof err);

    json_decref(args);
    if (rc) {
        sbx_printable(err);
        fprintf(stderr, "sandboxctl: %s\n", err);
        return EXIT_FAILED;
    }
    if (json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
        puts(text);
        free(text);
    } else {
        human(out);
    }
    json_decref(out);
    return 0;
}

/* Splits argv (after the subcommand) into positional words and the options
 * --for D, --why T, --methods M, --paths P, --all, --whole-host and --json.  Returns how many
 * positional words went into pos (at most npos), or -1 on a usage error. */
static int split_args(int argc, char **argv, const char **pos, int npos, json_t *args, int *json)
{
    int n = 0;

    for (int i = 0; i < argc; i++) {
        const char *key = strcmp(argv[i], "--for") == 0       ? "duration"
                          : strcmp(argv[i], "--why") == 0     ? "why"
                          : strcmp(argv[i], "--methods") == 0 ? "methods"
                          : strcmp(argv[i], "--paths") == 0   ? "paths"
                                                              : NULL;
        if (key) {
            if (i + 1 >= argc || json_object_get(args, key))
                return -1;
            json_object_set_new(args, key, json_string(argv[++i]));
        } else if (strcmp(argv[i], "--all") == 0) {
            json_object_set_new(args, "all", json_true());
        } else if (strcmp(argv[i], "--whole-host") == 0) {
            json_object_set_new(args, "whole_host", json_true());
        } else if (strcmp(argv[i], "--json") == 0) {
            *json = 1;
        } else if (argv[i][0] == '-' || n == npos) {
            return -1;
        } else {
            pos[n++] = argv[i];
        }
    }
    return n;
}

int sbx_cli_access(struct sbx *s, int json, int argc, char **argv)
{
    const char *sub = argc > 1 ? argv[1] : "", *pos[2];
    json_t *args = json_object();
    int n = split_args(argc - 2, argv + 2, pos, 2, args, &json);

    if (argc < 2 || n < 0) {
        json_decref(args);
        return usage(argc < 2 ? "access: expected request, list, show, approve or deny"
                              : "access: bad arguments");
    }
    if (strcmp(sub, "request") == 0 && n == 2) {
        json_object_set_new(args, "name", json_string(pos[0]));
        json_object_set_new(args, "host", json_string(pos[1]));
        return run(s, json, sbx_op_access_request, args, print_request);
    }
    if (strcmp(sub, "list") == 0 && n <= 1) {
        if (n == 1)
            json_object_set_new(args, "name", json_string(pos[0]));
        return run(s, json, sbx_op_access_list, args, print_list);
    }
    if (strcmp(sub, "show") == 0 && n == 1) {
        json_object_set_new(args, "id", json_string(pos[0]));
        return run(s, json, sbx_op_access_show, args, print_show);
    }
    if ((strcmp(sub, "approve") == 0 || strcmp(sub, "deny") == 0) && n == 1) {
        json_object_set_new(args, "id", json_string(pos[0]));
        return run(s, json, sub[0] == 'a' ? sbx_op_access_approve : sbx_op_access_deny, args,
                   print_request);
    }
    json_decref(args);
    return usage("access: expected request NAME HOST, list [NAME], show ID, approve ID or deny ID");
}

int sbx_cli_denials(struct sbx *s, int json, int argc, char **argv)
{
    const char *pos[1];
    json_t *args = json_object();
    int n = split_args(argc - 1, argv + 1, pos, 1, args, &json);

    if (n != 1 || json_object_size(args) != 0) {
        json_decref(args);
        return usage("denials: expected NAME");
    }
    json_object_set_new(args, "name", json_string(pos[0]));
    return run(s, json, sbx_op_denials, args, print_denials);
}
