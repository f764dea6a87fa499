/*
 * egressctl - egressd's command-line tool.
 *
 * Offline commands, from the files alone (no daemon needed):
 *   egressctl check -c egressd.conf
 *   egressctl explain -c egressd.conf [--preset P] [--sandbox FILE.json]
 *                     [--addr IP]... [--at RFC3339] HOST[:PORT]
 *
 * Commands that ask the running egressd over its admin API (the socket or
 * address of the config's `admin` directive, or -s/--socket):
 *   egressctl [-s SOCKET | -c egressd.conf] reload | sandboxes [--json] | status
 *   egressctl [-s SOCKET | -c egressd.conf] upgrade
 *   egressctl explain --live [-c egressd.conf] [--sandbox ID] HOST[:PORT]
 *   egressctl -s SOCKET explain [--sandbox ID] HOST[:PORT]
 * For explain a socket (-s SOCKET before the command, --socket after it)
 * implies --live, as -s means the running egressd for every other command.
 *
 * From an access log: egressctl learn [--owner OWNER] [ACCESS-LOG]
 *
 * Exit status: check 0 valid / 1 errors; explain 0 allowed (or would_deny
 * in report mode) / 1 denied; the admin commands 0 done / 1 refused or
 * egressd not reached (its error is printed); 2 for a usage or
 * configuration error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "asked.h"
#include "config.h"
#include "learn.h"
#include "policy.h"
#include "policy_load.h"
#include "world.h"

#define EXIT_DENIED 1
#define EXIT_FAIL   1
#define EXIT_USAGE  2
#define MAX_ADDRS   16
#define ANSWER_MAX  (16u << 20) /* an answer larger than this is not egressd's */
#define TIMEOUT_S   40          /* explain may wait for a DNS answer; upgrade for a start (30 s) */

static void usage(FILE *f)
{
    fputs("usage: egressctl check -c egressd.conf\n"
          "       egressctl explain -c egressd.conf [--preset P] [--sandbox FILE.json]\n"
          "                         [--addr IP]... [--at RFC3339] [--method M] [--path P]\n"
          "                         HOST[:PORT]\n"
          "       egressctl [-s SOCKET | -c egressd.conf] reload | sandboxes [--json] | status\n"
          "       egressctl [-s SOCKET | -c egressd.conf] upgrade\n"
          "       egressctl explain --live [-c egressd.conf] [--sandbox ID] [--method M]\n"
          "                         [--path P] HOST[:PORT]\n"
          "       egressctl -s SOCKET explain [--sandbox ID] [--method M] [--path P] HOST[:PORT]\n"
          "       egressctl learn [--owner OWNER] [ACCESS-LOG]\n"
          "\n"
          "check      validate egressd.conf and every preset in its policy-dir; print all errors\n"
          "explain    the verdict for HOST[:PORT] (default port 443) under a preset or a sandbox\n"
          "           binding (JSON as the admin API takes it), with the rule that decided;\n"
          "           --addr runs the address phase on an address the name resolved to;\n"
          "           --method and --path judge one request (GET and / when one is not\n"
          "           given), for hosts that rules with methods or paths allow;\n"
          "           --live asks the running egressd (sandbox by id, names resolved by it);\n"
          "           a socket (-s SOCKET before explain, or --socket) implies --live\n"
          "reload     make the running egressd reread policy-dir and hosts-file\n"
          "sandboxes  the running egressd's sandbox bindings\n"
          "status     the running egressd's version, uptime, generation and counts\n"
          "upgrade    make the running egressd start the egressd binary now on disk, hand it\n"
          "           its listening sockets and drain (no connection refused or cut); the\n"
          "           old one serves on when the new one fails to start\n"
          "learn      from an access log (default stdin) of presets in `mode report`: the\n"
          "           allow lines that would let the would_deny requests through, per owner,\n"
          "           with the methods and path prefixes of the requests egressd read\n"
          "\n"
          "SOCKET is the admin socket's path (unix:PATH or PATH); with -c, the config's\n"
          "`admin` directive (and admin-token-file for a TCP admin address) says where.\n",
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

/* The binding of a sandbox file as the admin API takes it, checked by the
 * daemon's own parser (--preset, when given, replaces its "policy"). */
static struct policy_binding *sandbox_binding(struct policy *p, const char *file,
                                              const char *preset)
{
    json_error_t je;
    json_t *j = json_load_file(file, JSON_REJECT_DUPLICATES, &je);
    struct px_sandbox sb;
    struct policy_diag d = {0};
    struct policy_binding *b = NULL;
    char err[4096];

    if (j == NULL) {
        fprintf(stderr, "%s:%d:%d: %s\n", file, je.line, je.column, je.text);
        return NULL;
    }
    if (preset != NULL && json_is_object(j))
        json_object_set_new(j, "policy", json_string(preset));
    if (px_sandbox_parse(j, NULL, &sb, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s: %s\n", file, err);
    } else {
        b = px_sandbox_bind(p, &sb, &d);
        print_diag(&d);
        json_decref(sb.json);
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
    if (v->inject)
        printf(" [inject]");
    if (v->requests)
        printf(" [per request: give --method and --path]");
    if (v->push)
        printf(" [git-push rules: pushes are read]");
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
    const char *method, *path; /* the request asked about; NULL: none given */
    const char *addrs[MAX_ADDRS];
    size_t n_addrs;
    int64_t now;
};

/* The addresses to judge host h at: the --addr ones, or an IP literal's
 * own; into addr[], their number into *n.  False, with the reason
 * printed, when one is not an address. */
static bool parse_addrs(const struct explain_args *a, const struct policy_host *h,
                        uint8_t addr[][16], size_t *n)
{
    *n = 0;
    if (a->n_addrs == 0 && h->kind != POLICY_HOST_NAME) {
        memcpy(addr[0], h->addr, 16);
        *n = 1;
        return true;
    }
    for (size_t i = 0; i < a->n_addrs; i++) {
        const char *s = a->addrs[i];
        if (!policy_addr_parse(s, strlen(s), addr[i])) {
            fprintf(stderr, "egressctl: --addr: expected an IP address, found '%s'\n", s);
            return false;
        }
    }
    *n = a->n_addrs;
    return true;
}

/* The request --method and --path ask about (GET and "/" for the one not
 * given), as egressd judges it, printed; NULL when neither is given. */
static struct px_asked *request_asked(const struct explain_args *a)
{
    const char *m = a->method ? a->method : "GET", *path = a->path ? a->path : "/";
    struct px_asked *asked;

    if (a->method == NULL && a->path == NULL)
        return NULL;
    asked = malloc(sizeof(*asked));
    if (asked == NULL)
        abort();
    px_asked_make(asked, m, strlen(m), path, strlen(path));
    printf("request   %s %s", m, path);
    if (asked->path_result != HTTP_PATH_OK)
        printf(" (path %s: no 'paths' glob admits it)", http_path_result_str(asked->path_result));
    else if (asked->reshaped)
        printf(" (not in normal form, %s: no 'paths' glob admits it)", asked->path);
    else if (strcmp(asked->path, path) != 0)
        printf(" (judged as %s)", asked->path);
    printf("\n");
    return asked;
}

static int explain(struct policy *p, const struct explain_args *a, const char *default_preset)
{
    char text[300];
    uint16_t port;
    struct policy_host h;
    struct policy_verdict name, v, each[MAX_ADDRS];
    uint8_t addr[MAX_ADDRS][16];
    size_t n;
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
    if (!parse_addrs(a, &h, addr, &n)) {
        policy_binding_free(b);
        return EXIT_USAGE;
    }
    struct px_asked *asked = request_asked(a);
    policy_decide_request(b, &h, port, asked ? &asked->rq : NULL, NULL, 0, a->now, &name);
    print_rule("name", &name);
    policy_decide_addrs(b, &name, port, (const uint8_t(*)[16])addr, n, a->now, &v, each);
    for (size_t i = 0; i < n && name.decision != POLICY_DENY; i++) {
        char label[320];
        snprintf(label, sizeof(label), "address %s", a->n_addrs > 0 ? a->addrs[i] : h.text);
        print_rule(label, &each[i]);
    }
    print_rule("verdict", &v);
    rc = v.decision == POLICY_DENY ? EXIT_DENIED : 0;
    policy_binding_free(b);
    free(asked);
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

/* ------------------------------------------------ the admin API client */

/* Where the running egressd's admin API is. */
struct target {
    bool tcp;
    char path[108]; /* unix socket */
    struct px_addr addr;
    char token[256]; /* "" unless a TCP admin with admin-token-file */
    char text[1100]; /* as messages name it */
};

/* The first line of the admin token file (which egressd insists is 0600). */
static int read_token(const char *file, char *tok, size_t size)
{
    FILE *f = fopen(file, "r");
    if (f == NULL || fgets(tok, (int)size, f) == NULL) {
        fprintf(stderr, "egressctl: %s: admin-token-file: %s\n", file,
                f ? "empty" : strerror(errno));
        if (f != NULL)
            fclose(f);
        return -1;
    }
    fclose(f);
    tok[strcspn(tok, "\r\n")] = '\0';
    return 0;
}

/* The admin address from --socket or the config.  Returns 0 or an exit
 * status, with the reason printed. */
static int target_find(const char *sock, const char *conf, struct target *t)
{
    memset(t, 0, sizeof(*t));
    if (sock != NULL) {
        const char *path = strncmp(sock, "unix:", 5) == 0 ? sock + 5 : sock;
        if (*path == '\0' || strlen(path) >= sizeof(t->path)) {
            fprintf(stderr, "egressctl: expected a socket path of 1..%zu bytes, found '%s'\n",
                    sizeof(t->path) - 1, sock);
            return EXIT_USAGE;
        }
        snprintf(t->path, sizeof(t->path), "%s", path);
        snprintf(t->text, sizeof(t->text), "unix:%s", path);
        return 0;
    }
    if (conf == NULL) {
        fprintf(stderr, "egressctl: -s SOCKET or -c egressd.conf is required\n");
        return EXIT_USAGE;
    }
    struct px_config *c = malloc(sizeof(*c));
    static char err[16384];
    int rc = 0;
    if (c == NULL)
        abort();
    if (px_config_load(c, conf, err, sizeof(err)) == -1) {
        fprintf(stderr, "%s\n", err);
        rc = EXIT_USAGE;
    } else if (!c->have_admin) {
        fprintf(stderr, "egressctl: %s: no `admin` directive: egressd serves no admin API\n", conf);
        rc = EXIT_USAGE;
    } else if (c->admin_is_tcp) {
        t->tcp = true;
        t->addr = c->admin_tcp;
        snprintf(t->text, sizeof(t->text), "%s", c->admin_tcp.text);
        if (read_token(c->admin_token_file, t->token, sizeof(t->token)) == -1)
            rc = EXIT_USAGE;
    } else {
        snprintf(t->path, sizeof(t->path), "%s", c->admin_unix);
        snprintf(t->text, sizeof(t->text), "unix:%s", c->admin_unix);
    }
    free(c);
    return rc;
}

static int target_connect(const struct target *t)
{
    struct timeval tv = {.tv_sec = TIMEOUT_S};
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    int fd = socket(t->tcp ? t->addr.ss.ss_family : AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd == -1)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    memcpy(sun.sun_path, t->path, strlen(t->path) + 1);
    if (t->tcp ? connect(fd, (const struct sockaddr *)&t->addr.ss, t->addr.len)
               : connect(fd, (const struct sockaddr *)&sun, sizeof(sun))) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read the whole answer (egressd closes after it: Connection: close). */
static char *recv_all(int fd, size_t *len)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);

    for (;;) {
        if (buf == NULL)
            abort();
        ssize_t k = recv(fd, buf + n, cap - n, 0);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1) {
            free(buf);
            return NULL;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n == cap) {
            if (cap >= ANSWER_MAX) {
                free(buf);
                errno = EMSGSIZE;
                return NULL;
            }
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* One HTTP/1.1 exchange; the status, and the body parsed as JSON in *out
 * (NULL when there is none).  -1 with the reason printed when egressd
 * cannot be reached or answers something that is not HTTP. */
static int call(const struct target *t, const char *method, const char *path, const char *body,
                json_t **out)
{
    char head[2048], *ans, *p;
    size_t blen = body ? strlen(body) : 0, len = 0;
    int fd = target_connect(t), status;

    *out = NULL;
    if (fd == -1) {
        fprintf(stderr, "egressctl: %s: cannot connect: %s (is egressd running?)\n", t->text,
                strerror(errno));
        return -1;
    }
    snprintf(head, sizeof(head),
             "%s %s HTTP/1.1\r\nHost: egressd\r\nUser-Agent: egressctl\r\nConnection: close\r\n"
             "%s%s%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
             method, path, t->token[0] ? "Authorization: Bearer " : "", t->token,
             t->token[0] ? "\r\n" : "", blen);
    if (send_all(fd, head, strlen(head)) == -1 || send_all(fd, body ? body : "", blen) == -1 ||
        (ans = recv_all(fd, &len)) == NULL) {
        fprintf(stderr, "egressctl: %s: %s %s: %s\n", t->text, method, path, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    explicit_bzero(head, sizeof(head));
    p = strstr(ans, "\r\n\r\n");
    if (sscanf(ans, "HTTP/1.%*[01] %3d", &status) != 1 || p == NULL) {
        fprintf(stderr, "egressctl: %s: %s %s: not an HTTP answer\n", t->text, method, path);
        free(ans);
        return -1;
    }
    p += 4;
    if (*p != '\0')
        *out = json_loadb(p, len - (size_t)(p - ans), 0, NULL);
    free(ans);
    return status;
}

/* Print egressd's refusal: {"error": "..."} line by line. */
static void print_refusal(const char *what, int status, const json_t *ans)
{
    const char *e = json_string_value(json_object_get(ans, "error"));
    fprintf(stderr, "egressctl: %s: %d%s\n", what, status, e ? ":" : "");
    while (e != NULL && *e != '\0') {
        size_t n = strcspn(e, "\n");
        fprintf(stderr, "  %.*s\n", (int)n, e);
        e += n + (e[n] == '\n');
    }
}

static int cmd_reload(const struct target *t)
{
    json_t *ans;
    int st = call(t, "POST", "/v1/reload", NULL, &ans), rc = EXIT_FAIL;

    if (st == 200) {
        printf("reloaded: generation %" JSON_INTEGER_FORMAT "\n",
               json_integer_value(json_object_get(ans, "generation")));
        rc = 0;
    } else if (st > 0) {
        print_refusal("reload refused, the policy in force stays", st, ans);
    }
    json_decref(ans);
    return rc;
}

static int cmd_upgrade(const struct target *t)
{
    json_t *ans;
    int st = call(t, "POST", "/v1/upgrade", NULL, &ans), rc = EXIT_FAIL;

    if (st == 200) {
        printf("upgraded: pid %" JSON_INTEGER_FORMAT
               " (egressd %s) serves; pid %" JSON_INTEGER_FORMAT " drains\n",
               json_integer_value(json_object_get(ans, "pid")),
               json_string_value(json_object_get(ans, "version")),
               json_integer_value(json_object_get(ans, "previous_pid")));
        rc = 0;
    } else if (st > 0) {
        print_refusal("upgrade failed, the running egressd serves on", st, ans);
    }
    json_decref(ans);
    return rc;
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v && *v ? v : dflt;
}

static void print_sandbox(const json_t *b)
{
    const json_t *addrs = json_object_get(b, "addresses"), *allow = json_object_get(b, "allow");
    size_t i;

    printf("%-12s %-20s %-12s %-12s ", str_or(b, "id", "-"), str_or(b, "name", "-"),
           str_or(b, "owner", "-"), str_or(b, "policy", "-"));
    for (i = 0; i < json_array_size(addrs); i++)
        printf("%s%s", i ? "," : "", json_string_value(json_array_get(addrs, i)));
    printf("%s %s", i ? "" : "-", str_or(b, "expires", "-"));
    if (json_array_size(allow) > 0)
        printf(" +%zu allow", json_array_size(allow));
    printf("\n");
}

static int cmd_sandboxes(const struct target *t, bool as_json)
{
    json_t *ans;
    int st = call(t, "GET", "/v1/sandboxes", NULL, &ans);

    if (st != 200 || !json_is_array(ans)) {
        if (st > 0)
            print_refusal("GET /v1/sandboxes", st, ans);
        json_decref(ans);
        return EXIT_FAIL;
    }
    if (as_json) {
        json_dumpf(ans, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("\n");
    } else {
        printf("%-12s %-20s %-12s %-12s %s\n", "ID", "NAME", "OWNER", "POLICY",
               "ADDRESSES EXPIRES");
        for (size_t i = 0; i < json_array_size(ans); i++)
            print_sandbox(json_array_get(ans, i));
    }
    json_decref(ans);
    return 0;
}

static int cmd_status(const struct target *t)
{
    json_t *ans, *v;
    const char *key;
    int st = call(t, "GET", "/v1/status", NULL, &ans);

    if (st != 200 || !json_is_object(ans)) {
        if (st > 0)
            print_refusal("GET /v1/status", st, ans);
        json_decref(ans);
        return EXIT_FAIL;
    }
    json_object_foreach(ans, key, v)
    {
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        printf("%-20s %s\n", key, text ? text : json_string_value(v));
        free(text);
    }
    json_decref(ans);
    return 0;
}

/* Percent-encode a query value (RFC 3986 section 2.1). */
static void url_encode(const char *in, char *out, size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (; *in != '\0' && o + 4 < size; in++) {
        unsigned char c = (unsigned char)*in;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~", c) != NULL) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
}

/* One verdict of the live explain, as print_rule() prints the offline one. */
static void print_live(const char *label, const json_t *v)
{
    const char *reason = str_or(v, "reason", "?"), *rule = str_or(v, "rule", NULL);

    printf("%-9s %s %s", label, str_or(v, "decision", "?"), reason);
    if (rule != NULL)
        printf(" rule %s", rule);
    else if (strcmp(reason, "not_allowed") == 0)
        printf(": no rule matched: default deny");
    else if (strcmp(reason, "private_range") == 0)
        printf(" (deny-range)");
    if (json_is_true(json_object_get(v, "raw")))
        printf(" [raw]");
    if (json_is_true(json_object_get(v, "private_ok")))
        printf(" [private-ok]");
    if (json_is_true(json_object_get(v, "inject")))
        printf(" [inject]");
    if (json_is_true(json_object_get(v, "requests")))
        printf(" [per request: give --method and --path]");
    if (json_is_string(json_object_get(v, "country")))
        printf(" country %s", str_or(v, "country", ""));
    if (json_is_integer(json_object_get(v, "asn")))
        printf(" asn %" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(v, "asn")));
    printf("\n");
}

static int cmd_explain_live(const struct target *t, const struct explain_args *a)
{
    const char *sandbox = a->sandbox, *target = a->target;
    char host[300], eh[1000], es[200], path[4200], em[100], ep[2800];
    uint16_t port;
    json_t *ans;

    if (!split_target(target, host, sizeof(host), &port)) {
        fprintf(stderr, "egressctl: expected HOST[:PORT] with a port 1..65535, found '%s'\n",
                target);
        return EXIT_USAGE;
    }
    url_encode(host, eh, sizeof(eh));
    url_encode(sandbox ? sandbox : "default", es, sizeof(es));
    snprintf(path, sizeof(path), "/v1/explain?sandbox=%s&host=%s&port=%u", es, eh, port);
    if (a->method != NULL || a->path != NULL) {
        if (strlen(a->path ? a->path : "") > 900) {
            fprintf(stderr, "egressctl: --path: at most 900 bytes for the live explain\n");
            return EXIT_USAGE;
        }
        url_encode(a->method ? a->method : "GET", em, sizeof(em));
        url_encode(a->path ? a->path : "/", ep, sizeof(ep));
        size_t o = strlen(path);
        snprintf(path + o, sizeof(path) - o, "&method=%s&path=%s", em, ep);
    }
    int st = call(t, "GET", path, NULL, &ans);
    if (st != 200 || !json_is_object(ans)) {
        if (st > 0)
            print_refusal("explain", st, ans);
        json_decref(ans);
        return EXIT_FAIL;
    }
    printf("host      %s port %" JSON_INTEGER_FORMAT "\nsandbox   %s\npreset    %s\n",
           str_or(ans, "host", "?"), json_integer_value(json_object_get(ans, "port")),
           str_or(ans, "sandbox", "?"), str_or(ans, "preset", "-"));
    const json_t *rq = json_object_get(ans, "request");
    if (json_is_object(rq))
        printf("request   %s %s%s%s%s\n", str_or(rq, "method", "?"), a->path ? a->path : "/",
               json_is_string(json_object_get(rq, "path_error")) ? " (" : "",
               str_or(rq, "path_error", ""),
               json_is_string(json_object_get(rq, "path_error")) ? ": no 'paths' glob admits it)"
                                                                 : "");
    if (json_is_object(json_object_get(ans, "name")))
        print_live("name", json_object_get(ans, "name"));
    const json_t *addrs = json_object_get(ans, "addresses");
    for (size_t i = 0; i < json_array_size(addrs); i++) {
        char label[80];
        snprintf(label, sizeof(label), "address %s", str_or(json_array_get(addrs, i), "addr", "?"));
        print_live(label, json_array_get(addrs, i));
    }
    if (json_is_string(json_object_get(ans, "dns")))
        printf("dns       %s: no address to check\n", str_or(ans, "dns", "?"));
    if (json_is_string(json_object_get(ans, "error")))
        printf("error     %s\n", str_or(ans, "error", "?"));
    print_live("verdict", ans);
    int rc = strcmp(str_or(ans, "decision", "deny"), "deny") == 0 ? EXIT_DENIED : 0;
    json_decref(ans);
    return rc;
}

/* Options before the command: -s SOCKET, --socket SOCKET, -c CONF. */
static int global_opts(int argc, char **argv, const char **sock, const char **conf)
{
    int i = 1;
    while (i + 1 < argc && argv[i][0] == '-') {
        if (strcmp(argv[i], "-s") == 0 || strcmp(argv[i], "--socket") == 0)
            *sock = argv[i + 1];
        else if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0)
            *conf = argv[i + 1];
        else
            break;
        i += 2;
    }
    return i;
}

/* ------------------------------------------------------------ learn */

/* `egressctl learn [--owner OWNER] [ACCESS-LOG]` (learn.h). */
static int cmd_learn(const char *file, const char *only_owner)
{
    FILE *f = file ? fopen(file, "r") : stdin;

    if (f == NULL) {
        fprintf(stderr, "egressctl learn: %s: %s\n", file, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = px_learn(f, only_owner, stdout, stderr);
    if (file)
        fclose(f);
    return rc;
}

static int cmd_online(const char *cmd, const char *sock, const char *conf, bool as_json)
{
    struct target t;
    int rc = target_find(sock, conf, &t);

    if (rc != 0)
        return rc;
    if (strcmp(cmd, "reload") == 0)
        rc = cmd_reload(&t);
    else if (strcmp(cmd, "sandboxes") == 0)
        rc = cmd_sandboxes(&t, as_json);
    else if (strcmp(cmd, "upgrade") == 0)
        rc = cmd_upgrade(&t);
    else
        rc = cmd_status(&t);
    explicit_bzero(t.token, sizeof(t.token));
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"preset", required_argument, NULL, 'p'},
        {"sandbox", required_argument, NULL, 's'},
        {"socket", required_argument, NULL, 'S'},
        {"live", no_argument, NULL, 'l'},
        {"json", no_argument, NULL, 'j'},
        {"addr", required_argument, NULL, 'a'},
        {"at", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {"owner", required_argument, NULL, 'o'},
        {"method", required_argument, NULL, 'M'},
        {"path", required_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    struct explain_args a = {.now = (int64_t)time(NULL)};
    const char *sock = NULL, *owner = NULL;
    bool live = false, as_json = false;
    int first = global_opts(argc, argv, &sock, &a.conf);
    const char *cmd = first < argc ? argv[first] : NULL;
    int o;

    if (cmd == NULL || strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
        usage(cmd ? stdout : stderr);
        return cmd ? 0 : EXIT_USAGE;
    }
    bool online = strcmp(cmd, "reload") == 0 || strcmp(cmd, "sandboxes") == 0 ||
                  strcmp(cmd, "status") == 0 || strcmp(cmd, "upgrade") == 0;
    optind = first + 1;
    while ((o = getopt_long(argc, argv, "c:p:s:a:t:h", opts, NULL)) != -1) {
        switch (o) {
        case 'c': a.conf = optarg; break;
        case 'p': a.preset = optarg; break;
        /* -s: the sandbox for explain (a file, or an id with --live), the
         * socket for the other commands, which take no sandbox. */
        case 's': *(online ? &sock : &a.sandbox) = optarg; break;
        case 'S': sock = optarg; break;
        case 'l': live = true; break;
        case 'j': as_json = true; break;
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
        case 'o': owner = optarg; break;
        case 'M': a.method = optarg; break;
        case 'P': a.path = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (strcmp(cmd, "learn") == 0 && optind + 1 >= argc)
        return cmd_learn(optind < argc ? argv[optind] : NULL, owner);
    if (online && optind == argc)
        return cmd_online(cmd, sock, a.conf, as_json);
    /* A socket names the running egressd, for explain as for the rest. */
    if (strcmp(cmd, "explain") == 0 && sock != NULL)
        live = true;
    if (strcmp(cmd, "explain") == 0 && live && optind + 1 == argc) {
        if (a.preset != NULL || a.n_addrs > 0) {
            fprintf(stderr, "egressctl explain --live (or with a socket): --preset and --addr are "
                            "for the offline explain; the live one uses the sandbox's binding and "
                            "resolves\n");
            return EXIT_USAGE;
        }
        struct target t;
        int rc = target_find(sock, a.conf, &t);
        a.target = argv[optind];
        return rc ? rc : cmd_explain_live(&t, &a);
    }
    if (a.conf == NULL && (strcmp(cmd, "check") == 0 || strcmp(cmd, "explain") == 0)) {
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
