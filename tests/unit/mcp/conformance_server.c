/* conformance_server.c - the MCP protocol layer (sbx_mcp_proto, the same
 * library as sandboxctl's) serving the fixtures the MCP conformance suite
 * calls (conformance_fixtures.c) and nothing else: no sandbox tools, no
 * operations.  For tests only (tests/mcp/conformance.t):
 *   mcp_conformance_server                                          stdio
 *   mcp_conformance_server --http ADDR:PORT --token-file F [--port-file F]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance_fixtures.h"

/* Serves HTTP on listen with the token of token_file; the exit status. */
static int serve_http(struct sbx_mcp_server *srv, const char *listen, const char *token_file,
                      const char *port_file)
{
    char err[512];
    char *token = token_file ? sbx_mcp_token_read(token_file, err, sizeof err) : NULL;
    struct sbx_mcp_http_opts opts = {.listen = listen, .token = token, .port_file = port_file};
    int rc;

    if (!token) {
        fprintf(stderr, "mcp_conformance_server: %s\n",
                token_file ? err : "--http needs --token-file");
        return 1;
    }
    rc = sbx_mcp_http_run(srv, &opts);
    free(token);
    return rc;
}

int main(int argc, char **argv)
{
    const char *http = NULL, *token_file = NULL, *port_file = NULL;
    char err[512];
    struct sbx_mcp_server *srv;
    int rc;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--http") == 0)
            http = argv[i + 1];
        else if (strcmp(argv[i], "--token-file") == 0)
            token_file = argv[i + 1];
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
        else {
            fprintf(stderr, "mcp_conformance_server: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    struct sbx_mcp_config cfg = {
        .tools = conformance_tools,
        .ntools = conformance_ntools,
        .version = "0.0-conformance",
        .providers = &conformance_provider,
        .nproviders = 1,
    };
    srv = sbx_mcp_server_new(&cfg, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "mcp_conformance_server: %s\n", err);
        return 1;
    }
    rc = http ? serve_http(srv, http, token_file, port_file)
              : sbx_mcp_stdio_run(srv, STDIN_FILENO, STDOUT_FILENO);
    sbx_mcp_server_free(srv);
    return rc;
}
