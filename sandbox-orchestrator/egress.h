/* egress.h - the client of egressd's admin API (every `egressd-admin`).
 *
 * A binding tells egressd which policy applies to a sandbox's address:
 *   {"id":"101","name":"agent-alice-1","owner":"alice","addresses":["10.99.0.11"],
 *    "policy":"balanced","allow":["pypi.org"],"expires":"2026-11-30T09:00:00Z",
 *    "secrets":["anthropic"]}
 * ("secrets" only for a sandbox that has some).  Every configured egressd
 * receives the same bindings.
 */
#ifndef SBX_EGRESS_H
#define SBX_EGRESS_H

#include <stddef.h>

#include <jansson.h>
#include <stdbool.h>

#include "config.h"
#include "meta.h"

/* The binding of sandbox vmid called name, from its metadata (new reference). */
json_t *sbx_egress_binding(int vmid, const char *name, const struct sbx_meta *m);

/* Whether held (a binding as an egressd lists it, GET /v1/sandboxes) is
 * want (as sbx_egress_binding makes it): the same JSON, member for member.
 * sync and doctor both judge a node's bindings by it. */
bool sbx_egress_binding_current(const json_t *want, const json_t *held);

/* PUT /v1/sandboxes/{id} with binding on every egressd.  Tries them all;
 * returns 0, or -1 naming each one that failed in err. */
int sbx_egress_put(const struct sbx_config *c, json_t *binding, char *err, size_t errlen);

/* DELETE /v1/sandboxes/{vmid} on every egressd (404 counts as done). */
int sbx_egress_delete(const struct sbx_config *c, int vmid, char *err, size_t errlen);

/* PUT /v1/sandboxes with the JSON array bindings on the egressd at
 * target: replace its whole set (reconciliation).  0, or -1 with err. */
int sbx_egress_replace_one(const struct sbx_config *c, const char *target, json_t *bindings,
                           char *err, size_t errlen);

/* GET /v1/sandboxes/{vmid}/credentials on every egressd: what the guest
 * is given for credential injection, {"sandbox": ID, "ca": PEM or null,
 * "placeholders": {NAME: PLACEHOLDER, ...}}, never a secret (new reference
 * in *creds: the first egressd's answer, unchecked beyond being JSON).  A
 * guest holds one placeholder per secret and must be able to use it
 * through any of them, so every egressd must give the same placeholders
 * (one appliance key) and all or none a CA.  0, or -1 with err naming the
 * egressd and the fix. */
int sbx_egress_credentials(const struct sbx_config *c, int vmid, json_t **creds, char *err,
                           size_t errlen);

/* GET /v1/sandboxes/{vmid}/denials on every egressd: the sandbox's most
 * recent denials (egressd's access log fields), newest first, each with
 * "egressd" naming the instance that denied it (new array in *denials).
 * 0, or -1 with err naming the egressd that did not answer. */
int sbx_egress_denials(const struct sbx_config *c, int vmid, json_t **denials, char *err,
                       size_t errlen);

/* Check the egressd-admin-token-file, when one is configured: a regular
 * file of mode 0600 (or stricter) holding a token.  0, or -1 with the
 * reason and the fix in err. */
int sbx_egress_check_token(const struct sbx_config *c, char *err, size_t errlen);

/* GET path on the egressd at target: 0 with its 2xx JSON answer in
 * *reply (new reference), or -1 with err. */
int sbx_egress_get(const struct sbx_config *c, const char *target, const char *path, json_t **reply,
                   char *err, size_t errlen);

/* A stream that sends nothing, not even a keepalive comment, for this
 * long is taken as dead. */
#define SBX_EGRESS_STREAM_SILENT_S 45

/* What a stream's reader is told: n bytes that arrived (buf NULL, n 0:
 * nothing did, about once a second).  0 to go on, else the stream ends. */
typedef int (*sbx_egress_bytes_fn)(void *arg, const char *buf, size_t n);

/* Read the server-sent-event stream at path (e.g. "/v1/denials?follow=1")
 * of the egressd at target, sending Last-Event-ID: last_id when given,
 * until it ends, falls silent, or fn asks to stop.  Returns 0 when the
 * stream was answered 200 (however it ended: err says how), -1 when it
 * was refused or could not be opened (err says why). */
int sbx_egress_stream(const struct sbx_config *c, const char *target, const char *path,
                      const char *last_id, sbx_egress_bytes_fn fn, void *arg, char *err,
                      size_t errlen);

/* GET /v1/status of the egressd at target; 0 when it answers 2xx. */
int sbx_egress_status(const struct sbx_config *c, const char *target, char *err, size_t errlen);

#endif
