/* ops.h - the sandbox operations that both front ends of sandboxctl share.
 *
 * The command line (main.c) and the MCP server (mcp/) are two front ends over
 * one set of operations.  Each operation takes its arguments as a JSON object
 * (the same keys an MCP tool call carries, so the MCP server passes them
 * through unchanged) and answers with a new JSON object.
 *
 * Contract for every sbx_op_*:
 *   - returns 0 and stores a new reference in *out (the caller json_decref()s it),
 *   - or returns -1, leaves *out NULL and writes one line into err (errlen
 *     bytes, NUL-terminated) saying what failed and why, in words an operator
 *     or an assistant can act on ("memory guard: 20480 MiB in use + 4096 MiB
 *     asked > max-total-memory-mib 20480").
 *   - args is borrowed; unknown keys are an error, as are missing required ones.
 *   - create, push and pull tell s->progress (progress.h) of each step as it
 *     starts and ends, and of the bytes each copy has moved; nothing else is
 *     written while they run.
 *
 * Argument keys (all strings unless noted):
 *   create     name, size ("small"|"medium"), lifetime ("1h".."24h", default
 *              from config), owner, policy, allow (array of strings, optional),
 *              secrets (array of egressd secret names, optional: the guest
 *              gets a placeholder for each and the sandbox CA, creds.h)
 *              -> {vmid, name, node, address, owner, policy, expires,
 *                  secrets, ready_seconds (number)}
 *   list       (none) -> {sandboxes: [{vmid, name, node, owner, policy,
 *              address, created, expires, secrets, grants: [{host, until}]
 *              (access grants not lapsed yet), status}]}
 *   exec       name, command (array of strings), timeout (integer seconds,
 *              optional), input (string, optional)
 *              -> {exitcode, stdout, stderr, stdout_truncated (bool),
 *                  stderr_truncated (bool), timed_out (bool), signal (number,
 *                  only when a signal killed the command; exitcode is then
 *                  128 + signal)}
 *   read       name, path -> {path, size, content_base64}
 *   write      name, path, content_base64 -> {path, size}
 *   extend     name, duration ("30m", "2h") -> {name, expires}
 *   destroy    name -> {name, vmid, destroyed: true}
 *   snapshot   name, label (optional) -> {name, label}
 *   rollback   name, label -> {name, label}
 *   snapshots  name -> {name, snapshots: [{label, created}]}
 *   push       name, repo (host directory), ref (array, optional: the
 *              current branch), path (optional: GUEST_HOME/repos/REPONAME)
 *              -> {name, repo, refs, base, branch, user, guest_path,
 *                  bundle_bytes}; the base is recorded in the state-dir
 *   pull       name, repo, path (optional: the pushed one), ref (array,
 *              optional: every branch) -> {name, repo, guest_path,
 *              bundle_bytes, objects, fetched_into, flagged (n),
 *              branches: [{branch, ref, commit, base, commits, descendant,
 *              stat, files, flags: [{path, why}]}]}
 *   fetch_changes  name, repo (an mcp-repo label) -> as pull; only for a
 *              repository the administrator pushed to that sandbox
 *   apply      name, repo, onto, from (optional: onto), commit (optional:
 *              must still be the sandbox branch's), apply (bool: without
 *              it only the plan), accept_protected (bool)
 *              -> {name, onto, from, commit, old, how ("fast-forward",
 *                  "merge", "nothing"), review, applied (bool)}
 *   access_request  name, host (HOST[:PORTS], access.h), why, duration
 *              (optional, default 1h, at most access-max), methods and
 *              paths (optional, grant.h), whole_host (bool: not narrowed)
 *              -> the request: {id, name, vmid, owner, host, methods,
 *                 paths, asked, denial, seconds, why, requested, status
 *                 ("pending"|"approved"), owner_may_approve (bool), and
 *                 when granted at once (access-auto) decided, by, until,
 *                 guest_ca}, with what it changes: rule (its policy line)
 *                 and would_pass ([denial], see access_show); the same
 *                 pending request again gives the first
 *   access_list  name (optional), all (bool: decided ones too)
 *              -> {requests: [request]}
 *   access_show  id -> the request, with rule and would_pass: the
 *              sandbox's recent denials its grant lets pass (or
 *              denials_error when egressd could not say)
 *   access_approve  id, duration (optional: the one asked), as_owner (bool:
 *              only hosts of access-owner-approves) -> the request, approved
 *   access_deny  id, as_owner (bool: by the sandbox's owner; any host)
 *              -> the request, denied
 *   denials    name -> {name, vmid, denials: [{ts, mode, method, host, port,
 *              sni, reason, rule, status, hint, egressd}]}, newest first
 */
#ifndef SBX_OPS_H
#define SBX_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct sbx; /* configuration + Proxmox client; see sbx.h */

typedef int (*sbx_op_fn)(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);

int sbx_op_create(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_list(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_exec(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_read(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_write(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_extend(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_destroy(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_snapshot(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_rollback(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_snapshots(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_push(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_pull(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_fetch_changes(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_apply(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_access_request(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_access_list(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_access_show(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_access_approve(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_access_deny(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);
int sbx_op_denials(struct sbx *s, json_t *args, json_t **out, char *err, size_t errlen);

/* What the access operations decide, for a caller that shows it before
 * acting (the console's grant preview), from ops_access.c:
 * the seconds of a grant's duration text, 1m .. access-max (0, or -1 with
 * err naming access-max); and whether a sandbox's owner may approve a
 * request for entry (normalized) themselves: access-owner-approves
 * covers it. */
int sbx_access_seconds(const struct sbx *s, const char *duration, long *seconds, char *err,
                       size_t errlen);
bool sbx_access_owner_may(const struct sbx *s, const char *entry);

/* Settles every access request whose approval a killed process left
 * half-way (ops_access.c; doctor): approved when its grant reached the
 * description, else pending again.  Appends each to settled as {id, name,
 * vmid, host, detail, settled (bool: false when its description could
 * not be read now)}.  0, or -1 with err when the store cannot be read or
 * written. */
int sbx_access_settle_all(struct sbx *s, json_t *settled, char *err, size_t errlen);

/* Bring the credentials in vm's guest (metadata m) up to what egressd
 * gives it now (ops_sync.c): "current", "installed" (its CA had changed:
 * the inject or request-rule hosts of its binding or preset changed), or
 * "skipped" with why.  sync does it for every guest; a grant that makes
 * egressd read a host's requests does it for its own. */
struct sbx_vm;
struct sbx_meta;
const char *sbx_sync_guest_credentials(struct sbx *s, const struct sbx_vm *vm,
                                       const struct sbx_meta *m, char *why, size_t len);

#endif
