/* console.h - `sandboxctl console`: the operator console in the browser.
 *
 * People sign in with the Proxmox VE user they already have (signin.h);
 * an owner sees and acts on their own sandboxes, a member of
 * console-admin-group on all.  Pages: sandboxes (extend, destroy), live
 * denials from every egressd (denials.h), access requests (approve, deny,
 * a grant from a denial).  Served by libmicrohttpd (web.h) with the
 * assets built into the binary; every state-changing action is written to
 * the audit log (audit.h).  See sandbox-orchestrator/README.md.
 */
#ifndef SBX_CONSOLE_H
#define SBX_CONSOLE_H

struct sbx;

/* Run the console until SIGINT or SIGTERM: argv is what follows
 * "console" ([--listen ADDR:PORT] [--port-file FILE]).  Returns the exit
 * status (0, 1 when it could not start, 2 for bad arguments). */
int sbx_console_main(struct sbx *s, int argc, char **argv);

#endif
