/*
 * logins.h - the OAuth logins egressd keeps alive (docs/credentials.md,
 * "Subscription logins").
 *
 * A secret whose file is a CLI's own credentials file (Claude Code's
 * .credentials.json, codex's auth.json in ChatGPT mode, gemini's
 * oauth_creds.json; oauth/ reads them) is a login.  Its tokens live here,
 * not in the world's secrets store, because they change without a reload:
 *
 *   main thread   owns the table; on its loop it refreshes each login
 *                 ahead of expiry (at 3/4 of the token's life) and when a
 *                 worker reports a 401: resolve, check the addresses,
 *                 connect, TLS (verified), POST, write the rotated tokens
 *                 back into the file (tmp, fsync, rename), then swap them in
 *   workers       copy the current access token into a request, report a
 *                 401, and answer a sandbox's own refresh with placeholders
 *
 * One refresh per login is in flight at a time, whatever asks for it.  A
 * failed refresh keeps the current tokens, logs why, counts it and backs
 * off.  Token values never reach a log line, an error or a metric.
 */
#ifndef PX_LOGINS_H
#define PX_LOGINS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "resolver.h"
#include "secrets.h"

struct event_base;

/* Start the table: refreshes run on `base` (the main loop) and resolve
 * with `r`.  Call once, before the first px_logins_sync. */
void px_logins_init(struct event_base *base, struct px_resolver *r, const struct px_config *cfg);
/* Main thread, after each world swap: take the logins of the new world's
 * store s.  A new login file is read; one egressd wrote itself is
 * recognized and kept; one an admin replaced is taken (a refresh in flight
 * is dropped); a login no longer in s is forgotten. */
void px_logins_sync(const struct px_secrets *s);
/* Main thread, at exit: stop every refresh and wipe the tokens. */
void px_logins_shutdown(void);

/* ---- any thread */

/* The current access token of login `name` into out (NUL-terminated, cap
 * bytes) with its length and generation (it changes with every new
 * token); false when there is no such login or it does not fit. */
bool px_login_token(const char *name, char *out, size_t cap, size_t *len, uint64_t *gen);
/* An origin answered 401 to a request that carried generation `gen` of
 * login `name`'s token: refresh it now, unless that token has already
 * been replaced or a refresh is in flight. */
void px_login_rejected(const char *name, uint64_t gen);
/* Whether login `name` has a refresh in flight now. */
bool px_login_busy(const char *name);
/* The path of login `name`'s token endpoint (its provider's, or the
 * config's) into out; false when there is no such login. */
bool px_login_token_path(const char *name, char *out, size_t cap);
/* The body of egressd's answer to a sandbox's refresh of login `name`, in
 * its provider's shape, carrying only the sandbox's placeholders (access_ph,
 * refresh_ph) and a far expiry; 0 with *len, or -1. */
int px_login_answer(const char *name, const char *access_ph, const char *refresh_ph, char *out,
                    size_t cap, size_t *len);

/* The logins' metric families, for the metrics page (metrics.c). */
void px_logins_render(FILE *f);

#endif
