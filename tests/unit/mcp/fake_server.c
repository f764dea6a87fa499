/* fake_server.c - the MCP server's protocol layer and transports over the
 * test-only operations of fake_ops.c (no Proxmox).  For tests only:
 *   mcp_fake_server [--presets a,b] [--owner NAME]                 stdio
 *   mcp_fake_server --http ADDR:PORT --token-file F [--port-file F]
 *                   [--timeout-ms N] ...
 * --elicit-tool yes adds the test-only tool test_confirm (fake_ops.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_ops.h"

static const char *const fake_sizes[] = {"small", "medium", NULL};

int main(int argc, char **argv)
{
    const char *http = NULL, *token_file = NULL, *port_file = NULL, *owner = "fake-owner";
    char presets_buf[256] = "balanced,locked", err[512], *presets[9] = {0}, *save = NULL;
    struct sbx_mcp_tool tools[16];
    struct sbx_mcp_server *srv;
    int rc, n = 0, timeout_ms = 0, elicit = 0;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--http") == 0)
            http = argv[i + 1];
        else if (strcmp(argv[i], "--token-file") == 0)
            token_file = argv[i + 1];
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else if (strcmp(argv[i], "--owner") == 0)
            owner = argv[i + 1];
        else if (strcmp(argv[i], "--timeout-ms") == 0)
            timeout_ms = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--elicit-tool") == 0)
            elicit = strcmp(argv[i + 1], "yes") == 0;
        else if (strcmp(argv[i], "--presets") == 0)
            snprintf(presets_buf, sizeof presets_buf, "%s", argv[i + 1]);
        else {
            fprintf(stderr, "mcp_fake_server: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    for (char *p = strtok_r(presets_buf, ",", &save); p && n < 8; p = strtok_r(NULL, ",", &save))
        presets[n++] = p;
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(0);
    struct sbx_mcp_config cfg = {
        .tools = tools,
        .ntools = sbx_mcp_tools_sandbox(&fake_ops, tools, 16),
        .presets = (const char *const *)presets,
        .sizes = fake_sizes,
        .owner = owner,
        .version = "0.0-test",
        .progress_set = fake_progress_set,
        .ops = &fake_ops,
    };
    if (elicit)
        tools[cfg.ntools++] = fake_confirm_tool;
    srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "mcp_fake_server: %s\n", err);
        return 1;
    }
    if (!http) {
        rc = sbx_mcp_stdio_run(srv, STDIN_FILENO, STDOUT_FILENO);
    } else {
        char *token = sbx_mcp_token_read(token_file, err, sizeof err);
        struct sbx_mcp_http_opts opts = {.listen = http,
                                         .token = token,
                                         .port_file = port_file,
                                         .idle_ms = timeout_ms,
                                         .head_ms = timeout_ms,
                                         .body_ms = timeout_ms};

        if (!token) {
            fprintf(stderr, "mcp_fake_server: %s\n", err);
            sbx_mcp_server_free(srv);
            return 1;
        }
        rc = sbx_mcp_http_run(srv, &opts);
        free(token);
    }
    sbx_mcp_server_free(srv);
    fake_reset();
    return rc;
}
