/* cli.h - the commands of sandboxctl's command line kept apart from
 * main.c (which parses the common options and dispatches).
 *
 * Each takes argv from the command's name on and json (1: print the
 * operation's JSON result instead of the human form), and returns the
 * exit status: 0 ok, 1 the operation failed, 2 a usage error. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include "sbx.h"

/* access request NAME HOST[:PORTS] --why TEXT [--for DURATION]
 * access list [NAME] [--all]
 * access approve ID [--for DURATION]
 * access deny ID */
int sbx_cli_access(struct sbx *s, int json, int argc, char **argv);

/* denials NAME */
int sbx_cli_denials(struct sbx *s, int json, int argc, char **argv);

#endif
