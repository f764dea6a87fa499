/* mcp.c - `sandboxctl mcp [--http ADDR:PORT [--port-file FILE]] [--owner NAME]`:
 * binds the sandbox tools to the real operations (../ops.h) and the
 * configuration, and runs one transport. */
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "mcp.h"
#include "mcp_server.h"
#include "version.h"

#if __has_include("../sbx.h")
#include "../sbx.h"
#endif
/* The orchestrator's configuration accessors (sbx.h); declared here too so
 * that this file states exactly what it relies on. */
const char *const *sbx_config_mcp_presets(const struct sbx *s);
const char *const *sbx_config_mcp_secrets(const struct sbx *s);
const char *const *sbx_config_size_names(struct sbx *s);
const char *sbx_config_mcp_token_file(const struct sbx *s);
int sbx_config_mcp_repos(const struct sbx *s);
void sbx_progress_set(struct sbx *s, sbx_progress_fn fn, void *arg);
struct sbx *sbx_sibling_new(struct sbx *s, char *err, size_t errlen);
void sbx_sibling_free(struct sbx *own);

static struct sbx_mcp_ops real_ops = {
    .create = sbx_op_create,
    .list = sbx_op_list,
    .exec = sbx_op_exec,
    .read = sbx_op_read,
    .write = sbx_op_write,
    .extend = sbx_op_extend,
    .destroy = sbx_op_destroy,
    .snapshot = sbx_op_snapshot,
    .rollback = sbx_op_rollback,
    .snapshots = sbx_op_snapshots,
    .denials = sbx_op_denials,
    .access_request = sbx_op_access_request,
    .access_approve = sbx_op_access_approve,
    .access_deny = sbx_op_access_deny,
};

/* A guest command of run_command reports that it still runs this often. */
#define RUN_TICK_MS 3000

/* The server's progress hook: sbx_progress_set, and ticks for run_command
 * (the command line sets none, so `sandboxctl exec` stays quiet). */
static void progress_set(struct sbx *s, sbx_progress_fn fn, void *arg)
{
    sbx_progress_set(s, fn, arg);
    sbx_progress_ticks(&s->progress, fn ? RUN_TICK_MS : 0);
}

struct mcp_args {
    const char *http, *port_file, *owner;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sandboxctl mcp                       serve MCP on stdin/stdout\n"
            "       sandboxctl mcp --http ADDR:PORT [--port-file FILE]\n"
            "                                            serve Streamable HTTP on ADDR:PORT/mcp\n"
            "options: --owner NAME   owner of the sandboxes created (default: this user)\n");
}

/* Returns 0, 1 after --help, or -1 on a bad argument (said on stderr). */
static int parse_args(int argc, char **argv, struct mcp_args *a)
{
    for (int i = 0; i < argc; i++) {
        const char **slot = NULL;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(argv[i], "--http") == 0)
            slot = &a->http;
        else if (strcmp(argv[i], "--port-file") == 0)
            slot = &a->port_file;
        else if (strcmp(argv[i], "--owner") == 0)
            slot = &a->owner;
        if (!slot || i + 1 >= argc || !argv[i + 1][0]) {
            fprintf(stderr, "sandboxctl mcp: %s: %s\n", argv[i],
                    slot ? "needs a value" : "unknown option");
            usage(stderr);
            return -1;
        }
        *slot = argv[++i];
    }
    if (a->port_file && !a->http) {
        fprintf(stderr, "sandboxctl mcp: --port-file goes with --http\n");
        return -1;
    }
    return 0;
}

/* The owner of what this server creates: --owner, else the user running it. */
static const char *default_owner(const char *given)
{
    const struct passwd *pw;

    if (given)
        return given;
    pw = getpwuid(getuid());
    return pw ? pw->pw_name : "mcp";
}

/* stdout carries only MCP messages: anything else that writes to fd 1 goes
 * to stderr instead.  Returns the fd for messages, or -1. */
static int claim_stdout(void)
{
    int out;

    fflush(stdout);
    out = dup(STDOUT_FILENO);
    if (out == -1 || dup2(STDERR_FILENO, STDOUT_FILENO) == -1)
        return -1;
    return out;
}

/* A connection thread ends: OpenSSL's per-thread state (its error queue,
 * from the Proxmox calls the thread's tools made) goes with it now, not
 * in a destructor that may run after a stop has let the process exit. */
static void openssl_thread_end(void)
{
    OPENSSL_thread_stop();
}

static int run(struct sbx_mcp_server *srv, struct sbx *s, const struct mcp_args *a)
{
    struct sbx_mcp_http_opts opts = {
        .listen = a->http, .port_file = a->port_file, .thread_end = openssl_thread_end};
    char err[512], *token;
    int out, rc;

    if (!a->http) {
        out = claim_stdout();
        if (out == -1) {
            perror("sandboxctl mcp: stdout");
            return 1;
        }
        rc = sbx_mcp_stdio_run(srv, STDIN_FILENO, out);
        close(out);
        return rc;
    }
    token = sbx_mcp_token_read(sbx_config_mcp_token_file(s), err, sizeof err);
    if (!token) {
        fprintf(stderr, "sandboxctl mcp: %s\n", err);
        return 1;
    }
    opts.token = token;
    rc = sbx_mcp_http_run(srv, &opts);
    free(token);
    return rc;
}

int sbx_mcp_main(struct sbx *s, int argc, char **argv)
{
    struct sbx_mcp_tool tools[16];
    struct mcp_args a = {0};
    struct sbx_mcp_config cfg;
    struct sbx_mcp_server *srv;
    char err[512];
    int rc;

    rc = parse_args(argc, argv, &a);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0); /* before any thread: jansson seeds its hash once */
    if (sbx_config_mcp_repos(s) > 0)
        real_ops.fetch_changes = sbx_op_fetch_changes;
    cfg = (struct sbx_mcp_config){
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&real_ops, tools, sizeof tools / sizeof tools[0]),
        .sbx = s,
        .presets = sbx_config_mcp_presets(s),
        .secrets = sbx_config_mcp_secrets(s),
        .sizes = sbx_config_size_names(s),
        .owner = default_owner(a.owner),
        .version = EGRESSD_VERSION, /* serverInfo.version */
        .progress_set = progress_set,
        /* exec, read and write: each on its own Proxmox connection */
        .sbx_sibling = sbx_sibling_new,
        .sbx_sibling_free = sbx_sibling_free,
        .ops = &real_ops, /* resources and completion: list (denials: when bound) */
    };
    /* The assistant sees and touches its owner's sandboxes only. */
    sbx_scope_owner(s, cfg.owner);
    srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "sandboxctl mcp: %s\n", err);
        return 1;
    }
    rc = run(srv, s, &a);
    sbx_mcp_server_free(srv);
    return rc;
}
