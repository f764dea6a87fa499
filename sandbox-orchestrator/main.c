/* main.c - sandboxctl's command line: parse, call one operation, print.
 *
 * Exit status: 0 ok, 1 the operation failed, 2 usage or config error.
 * `--json` prints the operation's JSON result instead of the human form.
 * On a terminal, long operations show their steps on stderr (progress.h).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli.h"
#include "console/console.h"
#include "http.h"
#include "mcp/mcp.h"
#include "ops.h"
#include "printable.h"
#include "review.h"
#include "sbx.h"

#define DEFAULT_CONFIG "/etc/sandboxctl/sandboxctl.conf"
#define EXIT_FAILED    1
#define EXIT_USAGE     2
#define STDIN_MAX      (16L * 1024 * 1024)

struct cli {
    const char *config;
    int json;
    struct sbx *s;
};

static const char usage_text[] =
    "usage: sandboxctl [-c FILE] [--json] COMMAND [ARGS]\n"
    "  create --name N --size small|medium [--lifetime 4h] --owner O --policy P [--allow HOST]...\n"
    "         [--secret NAME]...\n"
    "  list\n"
    "  exec NAME [--timeout SECONDS] [--stdin] -- CMD [ARG]...\n"
    "  read NAME PATH            (file to stdout)\n"
    "  write NAME PATH           (file from stdin)\n"
    "  extend NAME DURATION\n"
    "  destroy NAME\n"
    "  snapshot NAME [LABEL] | rollback NAME LABEL | snapshots NAME\n"
    "  push NAME --repo DIR [--ref REF]... [--path GUEST_DIR]\n"
    "  pull NAME --repo DIR [--path GUEST_REPO] [--ref REF]...\n"
    "  apply NAME --repo DIR --onto BRANCH [--from BRANCH] [--accept-protected] [--yes]\n"
    "  access request NAME HOST[:PORTS] --why TEXT [--for DURATION]\n"
    "  access list [NAME] [--all] | access approve ID [--for DURATION] | access deny ID\n"
    "  denials NAME              (what egressd refused it lately)\n"
    "  reap | sync [NAME] | doctor\n"
    "  mcp [--http ADDR:PORT]\n"
    "  console [--listen ADDR:PORT] [--port-file FILE]   (the operator console)\n"
    "config: -c FILE (default " DEFAULT_CONFIG ")\n";

static int usage(const char *why)
{
    if (why)
        fprintf(stderr, "sandboxctl: %s\n", why);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

/* An error on stderr: one line, whatever a sandbox or its guest agent
 * put into it (printable.h). */
static void print_error(const char *err)
{
    char line[4096];

    snprintf(line, sizeof line, "%s", err);
    sbx_printable(line);
    fprintf(stderr, "sandboxctl: %s\n", line);
}

/* Print a result: JSON when asked, else via the command's printer. */
static int finish(struct cli *c, int rc, json_t *out, const char *err, void (*human)(json_t *out))
{
    if (rc) {
        print_error(err);
        return EXIT_FAILED;
    }
    if (c->json) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_SORT_KEYS);
        puts(text);
        free(text);
    } else if (human) {
        human(out);
    }
    json_decref(out);
    return 0;
}

/* Member key of o as printable text (printable.h), "-" when it is not a
 * string: a printer shows names, branches and reasons a sandbox chose. */
static const char *str(json_t *o, const char *key)
{
    const char *v = sbx_printable_get(o, key);

    return v ? v : "-";
}

/* The strings of array key of o as "a,b" into buf; "-" when there are none. */
static const char *joined(json_t *o, const char *key, char *buf, size_t len)
{
    size_t used = 0, i;
    json_t *v;

    buf[0] = '\0';
    json_array_foreach(json_object_get(o, key), i, v)
    {
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                                     sbx_printable_value(v) ? json_string_value(v) : "?");
    }
    return buf[0] ? buf : "-";
}

static void print_create(json_t *o)
{
    char secrets[1200];

    printf("created %s (VM %d on %s), address %s, expires %s, ready in %.1f s\n", str(o, "name"),
           (int)json_integer_value(json_object_get(o, "vmid")), str(o, "node"), str(o, "address"),
           str(o, "expires"), json_number_value(json_object_get(o, "ready_seconds")));
    if (json_array_size(json_object_get(o, "secrets")))
        printf("secrets (placeholders in the guest's environment): %s\n",
               joined(o, "secrets", secrets, sizeof secrets));
}

static void print_list(json_t *o)
{
    json_t *v;
    size_t i;

    char secrets[1200];

    printf("%-6s %-24s %-8s %-10s %-10s %-16s %-12s %-20s %s\n", "VMID", "NAME", "STATE", "SIZE",
           "OWNER", "ADDRESS", "POLICY", "EXPIRES", "SECRETS");
    json_array_foreach(json_object_get(o, "sandboxes"), i, v)
    {
        char size[64];

        /* A size by its name; one that matches no size line by its figures. */
        if (json_is_string(json_object_get(v, "size")))
            snprintf(size, sizeof size, "%s", str(v, "size"));
        else
            snprintf(size, sizeof size, "%dc/%lldM",
                     (int)json_integer_value(json_object_get(v, "cores")),
                     (long long)json_integer_value(json_object_get(v, "memory_mib")));
        if (json_object_get(v, "problem"))
            printf("%-6d %-24s %-8s %-10s %s\n",
                   (int)json_integer_value(json_object_get(v, "vmid")), str(v, "name"),
                   str(v, "status"), size, str(v, "problem"));
        else
            printf("%-6d %-24s %-8s %-10s %-10s %-16s %-12s %-20s %s\n",
                   (int)json_integer_value(json_object_get(v, "vmid")), str(v, "name"),
                   str(v, "status"), size, str(v, "owner"), str(v, "address"), str(v, "policy"),
                   str(v, "expires"), joined(v, "secrets", secrets, sizeof secrets));
    }
}

static void print_extend(json_t *o)
{
    printf("%s now expires %s\n", str(o, "name"), str(o, "expires"));
}

static void print_destroy(json_t *o)
{
    printf("destroyed %s (VM %d)\n", str(o, "name"),
           (int)json_integer_value(json_object_get(o, "vmid")));
}

static void print_snapshot(json_t *o)
{
    printf("%s: snapshot %s%s%s\n", str(o, "name"), str(o, "label"),
           json_object_get(o, "deleted") ? ", deleted the oldest: " : "",
           json_object_get(o, "deleted") ? str(o, "deleted") : "");
}

static void print_rollback(json_t *o)
{
    printf("%s rolled back to %s\n", str(o, "name"), str(o, "label"));
}

static void print_snapshots(json_t *o)
{
    json_t *v;
    size_t i;

    json_array_foreach(json_object_get(o, "snapshots"), i, v)
    {
        printf("%-40s %s\n", str(v, "label"), str(v, "created"));
    }
}

static void print_reap(json_t *o)
{
    json_t *v;
    size_t i;

    json_array_foreach(json_object_get(o, "reaped"), i, v)
    {
        printf("reaped %s (VM %d), expired %s\n", str(v, "name"),
               (int)json_integer_value(json_object_get(v, "vmid")), str(v, "expires"));
    }
    json_array_foreach(json_object_get(o, "errors"), i, v)
    {
        fprintf(stderr, "sandboxctl: reap: %s\n", sbx_printable_value(v));
    }
    printf("%zu reaped, %d kept\n", json_array_size(json_object_get(o, "reaped")),
           (int)json_integer_value(json_object_get(o, "kept")));
}

/* The ids of list (a JSON array of strings), comma-separated, into buf. */
static const char *ids_text(json_t *list, char *buf, size_t len)
{
    json_t *v;
    size_t i, used = 0;

    buf[0] = '\0';
    json_array_foreach(list, i, v)
    {
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                                     json_string_value(v));
    }
    return buf;
}

/* One line per egressd of a sync: in step already, or what it lacked, held
 * without a VM, or held otherwise. */
static void print_sync_node(json_t *n)
{
    static const char *const kinds[] = {"added", "removed", "changed"};
    char ids[512];

    printf("egressd %s: %s", str(n, "egressd"), str(n, "result"));
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        json_t *list = json_object_get(n, kinds[k]);
        if (json_array_size(list) > 0)
            printf(" %s %s", kinds[k], ids_text(list, ids, sizeof ids));
    }
    printf("\n");
}

static void print_sync(json_t *o)
{
    json_t *v;
    size_t i;

    printf("%d bindings pushed to %zu egressd\n",
           (int)json_integer_value(json_object_get(o, "bindings")),
           json_array_size(json_object_get(o, "egressd")));
    json_array_foreach(json_object_get(o, "egressd"), i, v)
    {
        print_sync_node(v);
    }
    json_array_foreach(json_object_get(o, "credentials"), i, v)
    {
        const char *r = str(v, "result");
        if (strcmp(r, "installed") == 0)
            printf("%d %s: its credentials changed (sandbox CA): installed in the guest\n",
                   (int)json_integer_value(json_object_get(v, "vmid")), str(v, "name"));
        else if (strcmp(r, "skipped") == 0)
            printf("%d %s: credentials not checked: %s\n",
                   (int)json_integer_value(json_object_get(v, "vmid")), str(v, "name"),
                   str(v, "why"));
    }
}

static void print_doctor(json_t *o)
{
    json_t *v;
    size_t i;

    json_array_foreach(json_object_get(o, "checks"), i, v)
    {
        int ok = json_is_true(json_object_get(v, "ok"));
        printf("%-4s %-10s %s\n", ok ? "ok" : "FAIL", str(v, "check"), str(v, "detail"));
        if (!ok)
            printf("     fix: %s\n", str(v, "fix"));
    }
}

static int cmd_create(struct cli *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"name", 1, 0, 'n'},   {"size", 1, 0, 's'},   {"lifetime", 1, 0, 'l'},
        {"owner", 1, 0, 'o'},  {"policy", 1, 0, 'p'}, {"allow", 1, 0, 'a'},
        {"secret", 1, 0, 'S'}, {"json", 0, 0, 'j'},   {0, 0, 0, 0}};
    static const char *const keys[] = {"", "name", "size", "lifetime", "owner", "policy"};
    json_t *args = json_object(), *allow = json_array(), *secrets = json_array(), *out = NULL;
    char err[4096];
    int opt, rc;

    optind = 1;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *key = NULL;
        switch (opt) {
        case 'n': key = keys[1]; break;
        case 's': key = keys[2]; break;
        case 'l': key = keys[3]; break;
        case 'o': key = keys[4]; break;
        case 'p': key = keys[5]; break;
        case 'a': json_array_append_new(allow, json_string(optarg)); break;
        case 'S': json_array_append_new(secrets, json_string(optarg)); break;
        case 'j': c->json = 1; break;
        default:
            json_decref(args);
            json_decref(allow);
            json_decref(secrets);
            return usage(NULL);
        }
        if (key && !json_object_get(args, key))
            json_object_set_new(args, key, json_string(optarg));
    }
    if (optind != argc) {
        json_decref(args);
        json_decref(allow);
        json_decref(secrets);
        return usage("create: unexpected argument");
    }
    json_object_set_new(args, "allow", allow);
    json_object_set_new(args, "secrets", secrets);
    for (size_t i = 1; i < sizeof keys / sizeof keys[0]; i++)
        if (i != 3 && !json_object_get(args, keys[i])) {
            fprintf(stderr, "sandboxctl: create: --%s is required\n", keys[i]);
            json_decref(args);
            return usage(NULL);
        }
    rc = sbx_op_create(c->s, args, &out, err, sizeof err);
    json_decref(args);
    return finish(c, rc, out, err, print_create);
}

static char *read_stdin(size_t *len, char *err, size_t errlen)
{
    size_t cap = 65536, n = 0, got;
    char *buf = malloc(cap);

    if (!buf)
        abort();
    while ((got = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += got;
        if ((long)n > STDIN_MAX) {
            snprintf(err, errlen, "stdin holds more than %ld bytes", STDIN_MAX);
            free(buf);
            return NULL;
        }
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
    }
    /* A read error is not the end of the input: never pass on a part. */
    if (ferror(stdin)) {
        snprintf(err, errlen, "reading stdin: %s", strerror(errno));
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* exec NAME [--timeout N] -- CMD...: the guest's stdout and stderr are
 * copied out; the status is 0 only when the command exited 0. */
/* The --timeout value: whole seconds, nothing else; -1 when it is not. */
static long parse_seconds(const char *s)
{
    char *end;
    long v;

    if (!isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    return *end || errno ? -1 : v;
}

static int cmd_exec(struct cli *c, int argc, char **argv)
{
    json_t *args = json_object(), *cmd = json_array(), *out = NULL, *o, *e;
    char err[4096];
    int i = 1, rc, code;

    if (i < argc && strcmp(argv[i], "--json") == 0) {
        c->json = 1;
        i++;
    }
    if (i >= argc) {
        json_decref(args);
        json_decref(cmd);
        return usage("exec: NAME missing");
    }
    json_object_set_new(args, "name", json_string(argv[i++]));
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            long t = parse_seconds(argv[++i]);
            if (t < 0) {
                json_decref(args);
                json_decref(cmd);
                return usage("exec: --timeout expects whole seconds (e.g. 300)");
            }
            json_object_set_new(args, "timeout", json_integer(t));
        } else if (strcmp(argv[i], "--stdin") == 0) {
            size_t len;
            char *in = read_stdin(&len, err, sizeof err);
            if (!in) {
                json_decref(args);
                json_decref(cmd);
                return finish(c, -1, NULL, err, NULL);
            }
            json_object_set_new(args, "input", json_stringn_nocheck(in, len));
            free(in);
        } else if (strcmp(argv[i], "--json") == 0) {
            c->json = 1;
        } else {
            json_decref(args);
            json_decref(cmd);
            return usage("exec: expected NAME [--timeout SECONDS] [--stdin] -- CMD...");
        }
    }
    if (i + 1 >= argc) {
        json_decref(args);
        json_decref(cmd);
        return usage("exec: expected NAME [--timeout SECONDS] [--stdin] -- CMD...");
    }
    for (i++; i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(args, "command", cmd);
    rc = sbx_op_exec(c->s, args, &out, err, sizeof err);
    json_decref(args);
    if (rc)
        return finish(c, rc, out, err, NULL);
    code = (int)json_integer_value(json_object_get(out, "exitcode"));
    if (c->json) {
        finish(c, rc, out, err, NULL);
        return code == 0 ? 0 : EXIT_FAILED;
    }
    o = json_object_get(out, "stdout");
    e = json_object_get(out, "stderr");
    fwrite(json_string_value(o), 1, json_string_length(o), stdout);
    fwrite(json_string_value(e), 1, json_string_length(e), stderr);
    if (json_is_true(json_object_get(out, "stdout_truncated")))
        fprintf(stderr, "sandboxctl: exec: stdout was truncated\n");
    if (json_is_true(json_object_get(out, "timed_out")))
        fprintf(stderr, "sandboxctl: exec: the command timed out\n");
    if (json_is_true(json_object_get(out, "stderr_truncated")))
        fprintf(stderr, "sandboxctl: exec: stderr was truncated\n");
    if (json_is_integer(json_object_get(out, "signal")))
        fprintf(stderr, "sandboxctl: exec: the command was killed by signal %d\n",
                (int)json_integer_value(json_object_get(out, "signal")));
    else if (code != 0)
        fprintf(stderr, "sandboxctl: exec: the command exited with status %d\n", code);
    json_decref(out);
    return code == 0 ? 0 : EXIT_FAILED;
}

static int cmd_read(struct cli *c, int argc, char **argv)
{
    json_t *args, *out = NULL;
    char err[4096];
    int rc;
    unsigned char *data;
    size_t len;
    const char *b64;

    if (argc != 3)
        return usage("read: expected NAME PATH");
    args = json_pack("{s:s,s:s}", "name", argv[1], "path", argv[2]);
    rc = sbx_op_read(c->s, args, &out, err, sizeof err);
    json_decref(args);
    if (rc || c->json)
        return finish(c, rc, out, err, NULL);
    b64 = json_string_value(json_object_get(out, "content_base64"));
    data = b64 ? http_base64_decode_new(b64, strlen(b64), &len) : NULL;
    if (!data)
        snprintf(err, sizeof err, "read %s: the answer holds no valid content", argv[2]);
    else if ((len > 0 && fwrite(data, 1, len, stdout) != len) || fflush(stdout) == EOF)
        snprintf(err, sizeof err, "read %s: writing to stdout: %s", argv[2], strerror(errno));
    else
        err[0] = '\0';
    free(data);
    json_decref(out);
    return finish(c, err[0] ? -1 : 0, NULL, err, NULL);
}

static int cmd_write(struct cli *c, int argc, char **argv)
{
    json_t *args, *out = NULL;
    char err[4096], *data, *b64;
    size_t len;
    int rc;

    if (argc != 3)
        return usage("write: expected NAME PATH (the content comes from stdin)");
    data = read_stdin(&len, err, sizeof err);
    if (!data)
        return finish(c, -1, NULL, err, NULL);
    b64 = http_base64_encode_new((unsigned char *)data, len);
    free(data);
    args = json_pack("{s:s,s:s,s:s}", "name", argv[1], "path", argv[2], "content_base64", b64);
    free(b64);
    rc = sbx_op_write(c->s, args, &out, err, sizeof err);
    json_decref(args);
    if (rc == 0 && !c->json)
        printf("wrote %d bytes to %s\n", (int)json_integer_value(json_object_get(out, "size")),
               argv[2]);
    return finish(c, rc, out, err, NULL);
}

static void print_push(json_t *o)
{
    printf("pushed %s of %s to %s as %s (base %.12s, %d bytes)\n%s\n", str(o, "branch"),
           str(o, "repo"), str(o, "name"), str(o, "user"), str(o, "base"),
           (int)json_integer_value(json_object_get(o, "bundle_bytes")), str(o, "guest_path"));
}

static void print_pull(json_t *o)
{
    json_t *b;
    size_t i;

    printf("pulled %zu branch(es) of %s:%s into %s (%d bytes, %d objects)\n",
           json_array_size(json_object_get(o, "branches")), str(o, "name"), str(o, "guest_path"),
           str(o, "fetched_into"), (int)json_integer_value(json_object_get(o, "bundle_bytes")),
           (int)json_integer_value(json_object_get(o, "objects")));
    json_array_foreach(json_object_get(o, "branches"), i, b)
    {
        sbx_review_print(b, str(b, "ref"));
    }
    if (json_integer_value(json_object_get(o, "flagged")) > 0)
        printf("%d flagged change(s): apply needs --accept-protected after you reviewed them\n",
               (int)json_integer_value(json_object_get(o, "flagged")));
}

/* The options of push, pull and apply into args; -1 on a usage error. */
static int git_options(struct cli *c, int argc, char **argv, json_t *args, int *yes)
{
    static const struct option opts[] = {
        {"repo", 1, 0, 'r'}, {"ref", 1, 0, 'f'},  {"path", 1, 0, 'p'},
        {"onto", 1, 0, 'o'}, {"from", 1, 0, 'F'}, {"accept-protected", 0, 0, 'a'},
        {"yes", 0, 0, 'y'},  {"json", 0, 0, 'j'}, {0, 0, 0, 0}};
    json_t *refs = json_array();
    int opt;

    optind = 2;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *key = opt == 'r'   ? "repo"
                          : opt == 'p' ? "path"
                          : opt == 'o' ? "onto"
                          : opt == 'F' ? "from"
                                       : NULL;
        if (opt == 'f')
            json_array_append_new(refs, json_string(optarg));
        else if (opt == 'a')
            json_object_set_new(args, "accept_protected", json_true());
        else if (opt == 'y')
            *yes = 1;
        else if (opt == 'j')
            c->json = 1;
        else if (key && !json_object_get(args, key))
            json_object_set_new(args, key, json_string(optarg));
        else {
            json_decref(refs);
            return -1;
        }
    }
    if (json_array_size(refs))
        json_object_set_new(args, "ref", refs);
    else
        json_decref(refs);
    return optind == argc ? 0 : -1;
}

static const char git_usage[] = "expected NAME --repo DIR (see the usage)";

static int cmd_push_pull(struct cli *c, int argc, char **argv)
{
    int push = strcmp(argv[0], "push") == 0, yes = 0, rc;
    json_t *args, *out = NULL;
    char err[4096];

    if (argc < 2 || argv[1][0] == '-')
        return usage(git_usage);
    args = json_pack("{s:s}", "name", argv[1]);
    if (git_options(c, argc, argv, args, &yes) || yes || json_object_get(args, "onto") ||
        json_object_get(args, "from") || json_object_get(args, "accept_protected") ||
        !json_object_get(args, "repo")) {
        json_decref(args);
        return usage(git_usage);
    }
    rc = (push ? sbx_op_push : sbx_op_pull)(c->s, args, &out, err, sizeof err);
    json_decref(args);
    return finish(c, rc, out, err, push ? print_push : print_pull);
}

/* apply on a terminal asks; without one it needs --yes (and
 * --accept-protected when anything is flagged) given explicitly. */
static int confirm(json_t *plan, int yes, int accept, char *err, size_t errlen)
{
    size_t flags = json_array_size(json_object_get(json_object_get(plan, "review"), "flags"));
    char line[16];

    if (flags && !accept) {
        snprintf(err, errlen,
                 "apply: %zu flagged change(s) shown above: review them, then give "
                 "--accept-protected",
                 flags);
        return -1;
    }
    if (yes)
        return 0;
    if (!isatty(STDIN_FILENO)) {
        snprintf(err, errlen, "apply: no terminal to ask: give --yes%s to apply without asking",
                 flags ? " and --accept-protected" : "");
        return -1;
    }
    fprintf(stderr, "%s %s onto %s? [y/N] ", str(plan, "how"), str(plan, "from"),
            str(plan, "onto"));
    if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y')) {
        snprintf(err, errlen, "apply: not confirmed, nothing changed");
        return -1;
    }
    return 0;
}

static int cmd_apply(struct cli *c, int argc, char **argv)
{
    int yes = 0, rc;
    json_t *args, *plan = NULL, *out = NULL;
    char err[4096], label[400];

    if (argc < 2 || argv[1][0] == '-')
        return usage("apply: expected NAME --repo DIR --onto BRANCH");
    args = json_pack("{s:s}", "name", argv[1]);
    if (git_options(c, argc, argv, args, &yes) || json_object_get(args, "path") ||
        json_object_get(args, "ref") || !json_object_get(args, "repo") ||
        !json_object_get(args, "onto")) {
        json_decref(args);
        return usage("apply: expected NAME --repo DIR --onto BRANCH");
    }
    rc = sbx_op_apply(c->s, args, &plan, err, sizeof err);
    if (rc == 0 && !c->json) {
        snprintf(label, sizeof label, "sandbox/%s/%s", argv[1], str(plan, "from"));
        sbx_review_print(json_object_get(plan, "review"), label);
        printf("plan: %s %s onto %s (%.12s -> %.12s)\n", str(plan, "how"), label, str(plan, "onto"),
               str(plan, "old"), str(plan, "commit"));
        fflush(stdout);
    }
    if (rc == 0 && strcmp(str(plan, "how"), "nothing") == 0) {
        json_decref(args);
        return finish(c, 0, plan, err, NULL);
    }
    if (rc == 0)
        rc = confirm(plan, yes, json_is_true(json_object_get(args, "accept_protected")), err,
                     sizeof err);
    if (rc == 0) {
        json_object_set_new(args, "apply", json_true());
        json_object_set(args, "commit", json_object_get(plan, "commit"));
        rc = sbx_op_apply(c->s, args, &out, err, sizeof err);
    }
    json_decref(plan);
    json_decref(args);
    if (rc == 0 && !c->json)
        printf("applied: %s is now %.12s\n", str(out, "onto"), str(out, "commit"));
    return finish(c, rc, out, err, NULL);
}

/* Commands of positional arguments: NAME, then the listed keys. */
struct simple {
    const char *name;
    sbx_op_fn op;
    int min, max; /* positional arguments */
    const char *keys[3];
    void (*human)(json_t *);
};

static const struct simple simple_cmds[] = {
    {"list", sbx_op_list, 0, 0, {NULL}, print_list},
    {"extend", sbx_op_extend, 2, 2, {"name", "duration"}, print_extend},
    {"destroy", sbx_op_destroy, 1, 1, {"name"}, print_destroy},
    {"snapshot", sbx_op_snapshot, 1, 2, {"name", "label"}, print_snapshot},
    {"rollback", sbx_op_rollback, 2, 2, {"name", "label"}, print_rollback},
    {"snapshots", sbx_op_snapshots, 1, 1, {"name"}, print_snapshots},
    {"reap", sbx_op_reap, 0, 0, {NULL}, print_reap},
    {"sync", sbx_op_sync, 0, 1, {"name"}, print_sync},
    {"doctor", sbx_op_doctor, 0, 0, {NULL}, print_doctor},
};

static int run_simple(struct cli *c, const struct simple *cmd, int argc, char **argv)
{
    json_t *args = json_object(), *out = NULL;
    char err[4096];
    int n = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            c->json = 1;
            continue;
        }
        if (n == cmd->max) {
            json_decref(args);
            return usage("too many arguments");
        }
        json_object_set_new(args, cmd->keys[n++], json_string(argv[i]));
    }
    if (n < cmd->min) {
        json_decref(args);
        return usage("missing arguments");
    }
    rc = cmd->op(c->s, args, &out, err, sizeof err);
    json_decref(args);
    if (rc == 0 && strcmp(cmd->name, "doctor") == 0 && !json_is_true(json_object_get(out, "ok"))) {
        finish(c, 0, out, err, cmd->human);
        return EXIT_FAILED;
    }
    if (rc == 0 && strcmp(cmd->name, "reap") == 0 &&
        json_array_size(json_object_get(out, "errors")) > 0) {
        finish(c, 0, out, err, cmd->human);
        return EXIT_FAILED;
    }
    return finish(c, rc, out, err, cmd->human);
}

static int dispatch(struct cli *c, int argc, char **argv)
{
    const char *cmd = argv[0];

    if (strcmp(cmd, "mcp") == 0)
        return sbx_mcp_main(c->s, argc - 1, argv + 1);
    if (strcmp(cmd, "console") == 0)
        return sbx_console_main(c->s, argc, argv);
    if (strcmp(cmd, "create") == 0)
        return cmd_create(c, argc, argv);
    if (strcmp(cmd, "exec") == 0)
        return cmd_exec(c, argc, argv);
    if (strcmp(cmd, "read") == 0)
        return cmd_read(c, argc, argv);
    if (strcmp(cmd, "write") == 0)
        return cmd_write(c, argc, argv);
    if (strcmp(cmd, "push") == 0 || strcmp(cmd, "pull") == 0)
        return cmd_push_pull(c, argc, argv);
    if (strcmp(cmd, "apply") == 0)
        return cmd_apply(c, argc, argv);
    if (strcmp(cmd, "access") == 0)
        return sbx_cli_access(c->s, c->json, argc, argv);
    if (strcmp(cmd, "denials") == 0)
        return sbx_cli_denials(c->s, c->json, argc, argv);
    for (size_t i = 0; i < sizeof simple_cmds / sizeof simple_cmds[0]; i++)
        if (strcmp(cmd, simple_cmds[i].name) == 0)
            return run_simple(c, &simple_cmds[i], argc, argv);
    return usage("unknown command");
}

static int known(const char *cmd)
{
    static const char *const cmds[] = {"create", "exec",  "read",   "write",   "mcp",     "push",
                                       "pull",   "apply", "access", "denials", "console", NULL};

    for (int i = 0; cmds[i]; i++)
        if (strcmp(cmd, cmds[i]) == 0)
            return 1;
    for (size_t i = 0; i < sizeof simple_cmds / sizeof simple_cmds[0]; i++)
        if (strcmp(cmd, simple_cmds[i].name) == 0)
            return 1;
    return 0;
}

/* Every argument goes into a JSON string: one that is not UTF-8 would be
 * dropped there without a word, so it is refused here.  0, or -1 after the
 * usage message. */
static int check_utf8_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        json_t *j = json_string(argv[i]);
        if (!j) {
            char msg[80];
            snprintf(msg, sizeof msg, "argument %d is not valid UTF-8", i);
            usage(msg);
            return -1;
        }
        json_decref(j);
    }
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    sbx_cancel = 1;
}

/* SIGINT/SIGTERM/SIGHUP stop the waits, so that create can undo its steps
 * (the MCP server runs with its own handling). */
static void catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* On a terminal, the steps of create, push and pull appear on stderr as
 * they run (git's rule: stderr decides, so `--json ... | jq` still shows
 * them and stdout keeps only the result).  Without a terminal nothing is
 * added: scripts read stderr for the one error line, and --json's
 * ready_seconds already tells how long create took. */
static void show_progress(struct sbx *s)
{
    if (isatty(STDERR_FILENO))
        sbx_progress_set(s, sbx_progress_print, stderr);
}

int main(int argc, char **argv)
{
    struct cli c = {DEFAULT_CONFIG, 0, NULL};
    char err[4096];
    int i = 1, rc;

    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
            c.config = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            c.json = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(usage_text, stdout);
            return 0;
        } else
            return usage("unknown option");
    }
    if (i >= argc)
        return usage("no command");
    if (!known(argv[i]))
        return usage("unknown command");
    if (check_utf8_args(argc, argv))
        return EXIT_USAGE;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    c.s = sbx_new(c.config, err, sizeof err);
    if (!c.s) {
        print_error(err);
        curl_global_cleanup();
        return EXIT_USAGE;
    }
    if (strcmp(argv[i], "mcp") != 0 && strcmp(argv[i], "console") != 0) {
        catch_signals();
        show_progress(c.s);
    }
    rc = dispatch(&c, argc - i, argv + i);
    /* A result that could not be written out (a full disk, a closed pipe)
     * must not look like success to a script. */
    if (fflush(stdout) == EOF && rc == 0) {
        fprintf(stderr, "sandboxctl: %s: done, but writing its output failed: %s\n", argv[i],
                strerror(errno));
        rc = EXIT_FAILED;
    }
    sbx_free(c.s);
    curl_global_cleanup();
    return rc;
}
