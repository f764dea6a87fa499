/* pve.h - the Proxmox VE API client (libcurl + jansson).
 *
 * One client holds one curl easy handle (connections are kept alive), the
 * API token read from its file (mode 0600 or stricter, else refused) and the
 * server-certificate check: a CA file, or a pinned SHA-256 fingerprint of
 * the leaf certificate checked in OpenSSL's verify callback.  Every request
 * has a connect and a total timeout.  Requests carry JSON bodies.
 */
#ifndef SBX_PVE_H
#define SBX_PVE_H

#include <signal.h>
#include <stddef.h>

#include <jansson.h>

#include "config.h"

struct sbx_pve;

/* Build a client from the config: reads and checks the token file.
 * Returns NULL with the reason in err (e.g. the token file's mode and the
 * chmod that fixes it). */
struct sbx_pve *sbx_pve_new(const struct sbx_config *c, char *err, size_t errlen);

/* Release the client; NULL is a no-op. */
void sbx_pve_free(struct sbx_pve *p);

/* Call METHOD path (below /api2/json, e.g. "/cluster/nextid").  params
 * (borrowed, may be NULL) is sent as the query of GET/DELETE or as the JSON
 * body of POST/PUT.  Lock errors ("VM is locked", "can't lock file ... got
 * timeout") are retried with back-off a bounded number of times.
 * Returns 0 with a new reference to the answer's "data" in *data (json null
 * when absent; data may be NULL when the caller does not want it), or -1
 * with "METHOD PATH: STATUS REASON: message (param: error; ...)" in err. */
int sbx_pve_call(struct sbx_pve *p, const char *method, const char *path, json_t *params,
                 json_t **data, char *err, size_t errlen);

/* sbx_pve_call with a smaller cap on the answer's size: body_max bytes
 * (0, or more than the client's own 128 MiB: that one).  A larger answer
 * is not read further: -1 with "METHOD PATH: answer larger than N bytes". */
int sbx_pve_call_max(struct sbx_pve *p, const char *method, const char *path, json_t *params,
                     size_t body_max, json_t **data, char *err, size_t errlen);

/* A person's sign-in: POST /access/ticket with params (username,
 * password, realm, tfa-challenge; borrowed) and without the API token.
 * The request body, which holds the password, is wiped once sent.
 * Returns 0 with the answer's "data" object in *data (new reference:
 * username, ticket, CSRFPreventionToken, or NeedTFA with a challenge
 * ticket), or -1 with *data NULL and "POST /access/ticket: 401 ..." in
 * err (sbx_pve_last_status() tells 401 from a transport failure, 0).
 * Never retried. */
int sbx_pve_ticket(struct sbx_pve *p, json_t *params, json_t **data, char *err, size_t errlen);

/* The HTTP status of the last answer (0 when no answer came). */
long sbx_pve_last_status(const struct sbx_pve *p);

/* 1 when the last request failed for want of a whole answer within
 * http-timeout (a server that drips its answer, or none), else 0. */
int sbx_pve_timed_out(const struct sbx_pve *p);

/* Number of HTTP requests made so far (for the create statistics). */
unsigned long sbx_pve_requests(const struct sbx_pve *p);

/* Percent-encode s for a URL path segment or query value into a new
 * string the caller frees. */
char *sbx_pve_escape(const char *s);

/* Set (to 1) by the command line's SIGINT/SIGTERM handler: the waits for
 * tasks and the guest agent give up, and create undoes what it made. */
extern volatile sig_atomic_t sbx_cancel;

/* Sleep ms milliseconds (restarting after signals, unless sbx_cancel). */
void sbx_msleep(long ms);

/* Milliseconds of a monotonic clock. */
long sbx_now_ms(void);

#endif
