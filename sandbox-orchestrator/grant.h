/* grant.h - what an approved access request lets a sandbox do, and what
 * it would change.  Pure: no I/O.
 *
 * A grant (struct sbx_grant, meta.h) is an allow entry (access.h) and,
 * optionally, the requests it admits: `methods` ("GET,HEAD": words of
 * POLICY_METHODS, written in that order) and `paths` ("/repos/acme,/user":
 * path globs as a policy's `paths` option takes them, comma-separated).
 * Without either it admits every request to the entry.  egressd gets it
 * as one policy line, "ENTRY [methods M] [paths P] until TIME", and this
 * module checks and judges it with egressd's own policy library: a grant
 * sandboxctl accepts is one egressd loads, and what it says would pass is
 * what egressd's one decision function (policy_decide_request) says.
 */
#ifndef SBX_GRANT_H
#define SBX_GRANT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "meta.h"

/* The most path globs a grant lists. */
#define SBX_GRANT_PATHS 8

/* Check and write in canonical form, in place: methods (any case, comma-
 * separated, each once: upper case, in POLICY_METHODS order) and paths
 * (comma-separated globs, at most SBX_GRANT_PATHS, each one
 * policy_glob_check accepts).  Either may be "" (no restriction).  0, or
 * -1 with err naming the word and the cause. */
int sbx_grant_scope_normalize(char methods[SBX_GRANT_METHODS_MAX], char paths[SBX_GRANT_PATHS_MAX],
                              char *err, size_t errlen);

/* The policy line of g into buf (len bytes): "ENTRY[ methods M][ paths
 * P]", then " until TIME" when with_until.  Returns its length, or -1
 * when it does not fit. */
int sbx_grant_line(const struct sbx_grant *g, bool with_until, char *buf, size_t len);

/* Whether egressd would load g: its line (without until) compiled by the
 * policy library.  0, or -1 with its first error in err. */
int sbx_grant_check(const struct sbx_grant *g, char *err, size_t errlen);

/* Whether reason (an egressd denial's) is one an allow can lift:
 * not_allowed, method_not_allowed, path_not_allowed.  A deny rule, a
 * private range, geo, a push rule's refusal stand whatever is granted. */
bool sbx_grant_lifts_reason(const char *reason);

/* The narrowest grant that covers denial d (an object of egressd's
 * GET /v1/sandboxes/ID/denials: host, port, method, path, reason) into g
 * (until 0): its host and port; and, when egressd read the request (a
 * method of POLICY_METHODS and a path), that method and the path's
 * policy_glob_narrowest.  false when d gives none: a reason a grant does
 * not lift, an address for a host, a host or port that is not one. */
bool sbx_grant_narrowest(json_t *d, struct sbx_grant *g);

/* The denials of the array denials that g would let pass, judged now by
 * policy_decide_request on g's line (the name phase: a denial that an
 * address check made stays one): a new array of those objects (each with
 * "requests_judged": true when g admits the host but egressd will read
 * and judge each request inside, a tunnel it could not read before), or
 * NULL with err when g does not load. */
json_t *sbx_grant_would_pass(const struct sbx_grant *g, json_t *denials, char *err, size_t errlen);

#endif
