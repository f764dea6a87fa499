/*
 * world.h - everything a connection decides with, as one immutable,
 * reference-counted snapshot: the policy, the hosts table, the secrets of
 * secret-dir and the sandbox bindings (docs/design.md, "Sandbox
 * bindings").  Workers take the current world when a connection (or
 * request) starts and keep it until it ends; the main thread builds a new
 * world for every change (reload, binding put/delete) and swaps it in
 * atomically.  A connection never sees half a change.
 *
 * Bindings are persisted in `state-dir/sandboxes.json` (write, fsync,
 * rename, fsync of the directory) before a change is acknowledged, and
 * restored at start: a restart loses none.
 */
#ifndef PX_WORLD_H
#define PX_WORLD_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "binding.h"
#include "config.h"
#include "policy.h"
#include "policy_load.h"
#include "resolver.h"
#include "secrets.h"

struct px_world {
    uint64_t generation; /* 1, 2, ... in the order worlds were made */
    struct policy *policy;
    struct px_hosts *hosts;             /* NULL without hosts-file */
    struct policy_binding *default_pb;  /* default-policy, no extras */
    struct px_msb *default_msb;         /* the "default" series, held by the world */
    struct px_secrets *secrets;         /* secret-dir's (empty without); never NULL */
    const struct px_sandbox *sandboxes; /* sorted by id */
    size_t n_sandboxes;
    /* private: the reference count and the address index follow */
};

/* ---- any thread */

/* The current world, with a reference the caller drops with px_world_put().
 * Never NULL after px_world_init() succeeded.  Takes no lock.  Any thread
 * but the main one that calls it must be a registered reader. */
struct px_world *px_world_get(void);
/* Register a reader (a worker), before its thread starts; its index. */
int px_world_reader_add(void);
/* Reader `reader` is outside any px_world_get() now (call it on its thread,
 * at least once after every swap: the workers do at the recheck that
 * follows each one).  Worlds swapped out before this point are let go. */
void px_world_quiescent(int reader);
/* How many swapped-out worlds still wait for a reader's quiescent point
 * (for tests). */
size_t px_world_retired(void);
/* One more reference to w (held already by the caller). */
struct px_world *px_world_ref(struct px_world *w);
void px_world_put(struct px_world *w);

/* The binding whose addresses include `addr` (16 bytes, IPv4 mapped), or NULL. */
const struct px_sandbox *px_world_by_addr(const struct px_world *w, const uint8_t addr[16]);
/* The binding with this id, or NULL. */
const struct px_sandbox *px_world_by_id(const struct px_world *w, const char *id);
/* The binding a `Proxy-Authorization: Basic ...` value names (user = id,
 * password = token, compared in constant time), or NULL. */
const struct px_sandbox *px_world_by_basic_auth(const struct px_world *w, const char *value,
                                                size_t len);

/* ---- main thread only */

/* Load the policy (px_policy_load with `geo`, which must outlive every
 * world), the hosts file, the secrets of secret-dir and the bindings
 * saved in state-dir, and make the first world.  Keeps the `cfg` and
 * `geo` pointers.  Returns 0, or -1 with every error (one per line,
 * "FILE:LINE: ..." or "STATE-DIR/sandboxes.json: ...") in err.  A saved
 * binding whose preset or extra lines no longer load is not dropped: it is
 * kept with pb == NULL (its sandbox is denied everything, `not_allowed`), a
 * warning goes to the diagnostics log, and start goes on; so is one naming
 * a secret that secret-dir does not have (a warning names sandbox and
 * secret). */
int px_world_init(const struct px_config *cfg, struct px_geo *geo, char *err, size_t errlen);

/* Reread policy-dir, hosts-file and secret-dir into a new world with the
 * same bindings.  A binding whose preset is gone (or whose extra lines no
 * longer load) is an error naming the sandbox; one whose secret is gone is
 * kept, with a warning to the diagnostics log naming sandbox and secret.
 * On any error (a bad secret-dir too) the current world stays and every
 * error is in err (one per line); returns 0 or -1.  Counts
 * policy_reloads_total. */
int px_world_reload(char *err, size_t errlen);

/* Take the bindings saved in state-dir as they are now, without writing
 * them: a process that handed its sockets to a successor follows the
 * successor's changes so (a binding deleted there cuts this process's
 * connections too).  The policy stays.  0, or -1 with err (the bindings
 * in force stay). */
int px_world_follow(char *err, size_t errlen);

/* Add or replace binding `id` from JSON `obj` (the object of docs/design.md; its
 * "id", if present, must equal `id`).  Validates everything (addresses,
 * preset exists, extra allow lines parse, an address bound to another
 * sandbox, every secret it names is in the world's store), persists,
 * swaps.  Returns 0, or -1 with the reason in err
 * (nothing changed). */
int px_world_put_sandbox(const char *id, const json_t *obj, char *err, size_t errlen);

enum px_world_delete {
    PX_WORLD_DELETED, /* gone, persisted, and the new world swapped in */
    PX_WORLD_NO_SUCH, /* there was no binding `id` */
    PX_WORLD_FAILED,  /* persisting failed (the reason in err); nothing changed */
};
/* Remove binding `id`. */
enum px_world_delete px_world_delete_sandbox(const char *id, char *err, size_t errlen);

/* Replace all bindings with the JSON array `arr` (all or nothing). */
int px_world_replace_sandboxes(const json_t *arr, char *err, size_t errlen);

/* All bindings as a JSON array (new reference); tokens are never shown. */
json_t *px_world_sandboxes_json(void);

/* The HTTP status that fits the last failure of px_world_put_sandbox(),
 * px_world_delete_sandbox(), px_world_replace_sandboxes() or
 * px_world_reload(): 400 (not a binding: JSON shape, a field), 422 (a
 * binding or policy that does not load: unknown preset, a bad line, an
 * address bound to another sandbox, a secret secret-dir does not have),
 * 500 (persisting failed). */
int px_world_error_status(void);

/* The key every sandbox CA is made with from now on (the appliance key,
 * kept by the caller for as long as any world); NULL: no CAs.  Main
 * thread, before px_world_init(). */
void px_world_ca_key(EVP_PKEY *key);

/* Drop the current world (at exit). */
void px_world_shutdown(void);

/* Call `hook` (main thread) after every swap, once the new world is the
 * current one: egressd judges its open connections again then. */
void px_world_on_swap(void (*hook)(void));

#endif
