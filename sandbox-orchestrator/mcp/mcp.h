/* mcp.h - sandboxctl's Model Context Protocol server (the `mcp` command).
 *
 * sbx_mcp_main() runs the server until its input ends (stdio) or it is
 * signalled (HTTP).  argv holds the arguments after "mcp": none for stdio,
 * or "--http ADDR:PORT".  The tools call the operations of ../ops.h.
 * Returns the process exit status.
 */
#ifndef SBX_MCP_H
#define SBX_MCP_H

struct sbx;

int sbx_mcp_main(struct sbx *s, int argc, char **argv);

#endif
