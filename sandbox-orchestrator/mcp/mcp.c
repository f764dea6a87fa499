/* mcp.c - placeholder until the MCP server lands: says so and fails. */
#include <stdio.h>

#include "mcp.h"

int sbx_mcp_main(struct sbx *s, int argc, char **argv)
{
    (void)s;
    (void)argc;
    (void)argv;
    fprintf(stderr, "sandboxctl mcp: the MCP server is not built yet\n");
    return 2;
}
