/* bindings.h - what each egressd holds for the sandboxes a list shows:
 * whether it has the sandbox bound, and whether that binding is in step
 * with the sandbox's description in Proxmox (same policy, same expiry).
 * Pure: the caller fetches each egressd's GET /v1/sandboxes. */
#ifndef SBX_CONSOLE_BINDINGS_H
#define SBX_CONSOLE_BINDINGS_H

#include <jansson.h>

/* Add to each sandbox of sandboxes (list's "sandboxes" array) an entry of
 * its "egressd" array for the egressd at target:
 *   {"egressd": target, "bound": B, "in_step": S, "policy": P, "expires": E}
 * from bindings (that egressd's GET /v1/sandboxes answer, an array), or
 *   {"egressd": target, "error": why}
 * when bindings is not an array (why says what went wrong fetching it).
 * A sandbox listed with a problem instead of its metadata is in step
 * with nothing: it gets "in_step": false. */
void sbx_bindings_note(json_t *sandboxes, const char *target, json_t *bindings, const char *why);

#endif
