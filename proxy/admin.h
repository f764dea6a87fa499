/*
 * admin.h - the admin API (docs/design.md, "Sandbox bindings"): HTTP/1.1 + JSON
 * on a unix socket (`admin unix:PATH`, mode 0660), or on TCP with a bearer
 * token (`admin ADDR:PORT` + `admin-token-file`), served by evhttp on the
 * main thread's event loop.
 *
 *   GET    /v1/sandboxes          all bindings (array)
 *   PUT    /v1/sandboxes/{id}     add or replace one binding   -> 200 + the binding
 *   DELETE /v1/sandboxes/{id}     remove it                    -> 204, 404 if none
 *   PUT    /v1/sandboxes          replace the whole set        -> 200 + the set
 *   POST   /v1/reload             reread policy-dir and hosts  -> 200, 422 + errors
 *   GET    /v1/explain?sandbox=ID&host=H&port=P   the live verdict, resolving H
 *   GET    /v1/status             version, uptime, world generation, counts
 *
 * Errors are JSON: {"error":"what went wrong"} with 400 (bad JSON or
 * field), 401 (token), 404, 405, 413 (body over 1 MiB), 422 (policy or
 * binding does not load).
 */
#ifndef PX_ADMIN_H
#define PX_ADMIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "resolver.h"

struct evhttp_request;

struct event_base;

struct px_admin_hooks {
    /* Fields the daemon adds to /v1/status (workers, active connections,
     * ...); a new reference, or NULL. */
    json_t *(*status)(void *arg);
    void *arg;
    /* The placeholders' key (placeholder.h), for
     * /v1/sandboxes/{id}/credentials; NULL: none are made. */
    const uint8_t *placeholder_key;
    /* POST /v1/upgrade: start a successor (successor.h) and answer req
     * with px_admin_upgrade_reply() when it serves or failed; 0, or -1
     * with the reason in err (answered 409: nothing was started). */
    int (*upgrade)(void *arg, struct evhttp_request *req, char *err, size_t errlen);
};

/* Listen as cfg says (unix socket: an old socket file is replaced; TCP:
 * the token file is read now and must not be readable by others).  `r` is
 * a resolver on `base` for explain.  Returns 0, or -1 with the reason. */
int px_admin_start(struct event_base *base, const struct px_config *cfg, struct px_resolver *r,
                   const struct px_admin_hooks *hooks, char *err, size_t errlen);
void px_admin_stop(void);
/* Stop accepting on the admin listener (a successor serves it now: a
 * unix socket's file is not removed at the stop); the connections open go
 * on. */
void px_admin_unlisten(void);
/* How long ago (seconds) the whole set of bindings was last replaced in
 * this run (GET /v1/status's sandboxes_replaced_s; JSON null: not since the
 * start), a new reference; and the same set by an upgrade's successor
 * from its predecessor's, after px_admin_start() (null: left unset). */
json_t *px_admin_replaced_ago(void);
void px_admin_set_replaced_ago(const json_t *ago);
/* The answer to POST /v1/upgrade: 200 {"pid", "version", "previous_pid"}
 * when the successor serves, 500 {"error", "pid"} when it failed. */
void px_admin_upgrade_reply(struct evhttp_request *req, long pid, const char *version,
                            const char *error);

#endif
