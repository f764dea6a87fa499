/* sbx.h - struct sbx: what every operation of sandboxctl works with.
 *
 * A struct sbx holds the configuration and the Proxmox client.  The front
 * ends (main.c, mcp/) create one with sbx_new(), pass it to the operations
 * of ops.h, and free it with sbx_free().  The MCP server treats it as
 * opaque and reads only the settings offered by the accessors below.
 * Single-threaded: one struct sbx serves one operation at a time.
 */
#ifndef SBX_SBX_H
#define SBX_SBX_H

#include <stddef.h>

#include <jansson.h>

#include "config.h"
#include "progress.h"
#include "pve.h"

struct sbx {
    struct sbx_config cfg;
    struct sbx_pve *pve;
    int pve_major; /* Proxmox VE major version, 0 until asked */
    /* When set, only this owner's sandboxes exist for the operations: the
     * MCP server sets it so an assistant sees and touches its own only. */
    char owner_scope[65];
    /* Who hears of the steps of create, push and pull as they run
     * (progress.h); no one by default. */
    struct sbx_progress progress;
    /* The names of cfg.sizes, NULL-terminated (sbx_config_size_names). */
    const char *size_names[SBX_MAX_SIZES + 1];
};

/* Let fn(arg, event) hear the steps of every later operation (fn NULL:
 * no one); for front ends that do not read struct sbx (mcp/). */
void sbx_progress_set(struct sbx *s, sbx_progress_fn fn, void *arg);

/* Limit every later operation to the sandboxes of `owner` (NULL: all). */
void sbx_scope_owner(struct sbx *s, const char *owner);

/* Load the config at path and build the Proxmox client (reading the token
 * file; the egressd admin token file is checked too).  Returns NULL with
 * "file:line: ..." or the token problem in err. */
struct sbx *sbx_new(const char *config_path, char *err, size_t errlen);

/* Release s; NULL is a no-op. */
void sbx_free(struct sbx *s);

/* A struct sbx for one operation on another thread (the MCP server's guest
 * calls): the configuration and owner scope of s, shared read-only (s must
 * outlive it), a Proxmox client of its own, no progress listener.  NULL
 * with err when the client cannot be made (the token file). */
struct sbx *sbx_sibling_new(struct sbx *s, char *err, size_t errlen);

/* Release a sibling: its client and itself, not the shared configuration;
 * NULL is a no-op. */
void sbx_sibling_free(struct sbx *own);

/* The presets the MCP server may choose (NULL-terminated; empty = none). */
const char *const *sbx_config_mcp_presets(const struct sbx *s);

/* The secrets an MCP client may give a sandbox (mcp-secrets;
 * NULL-terminated; empty = none). */
const char *const *sbx_config_mcp_secrets(const struct sbx *s);

/* The names of the configured sizes (`size` lines and the built-in
 * small and medium; NULL-terminated). */
const char *const *sbx_config_size_names(struct sbx *s);

/* The MCP HTTP bearer token file, or NULL when not configured. */
const char *sbx_config_mcp_token_file(const struct sbx *s);

/* How many `mcp-repo` lines the config has (fetch_changes is offered
 * only when there is one). */
int sbx_config_mcp_repos(const struct sbx *s);

/* The Proxmox VE major version (asked once with GET /version); 0 on error. */
int sbx_pve_major(struct sbx *s, char *err, size_t errlen);

/* Operations beyond ops.h, for the command line and the reaper timer
 * (same contract as ops.h):
 *   reap    (none) -> {reaped: [{vmid, name, expires}], kept (n), errors: [string]}
 *   sync    (none) -> {bindings (n), egressd: [target]}
 *   doctor  (none) -> {ok (bool), version, checks: [{check, ok, detail, fix}]}  */
int sbx_op_reap(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_sync(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_doctor(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);

/* Check that args is an object whose keys are all in allowed (a
 * NULL-terminated list); -1 names the first unknown key in err. */
int sbx_args_check(json_t *args, const char *const *allowed, char *err, size_t errlen);

/* The string member key of args, or NULL; required ones fail with err. */
const char *sbx_args_string(json_t *args, const char *key, int required, char *err, size_t errlen);

#endif
