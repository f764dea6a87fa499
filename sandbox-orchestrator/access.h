/* access.h - what an access request asks for, and which of the
 * administrator's host patterns cover it.  Pure: no I/O.
 *
 * A request names an allow entry, as a sandbox's extra allows are written
 * (meta.h): HOST, *.DOMAIN (any subdomain) or .DOMAIN (the domain and any
 * subdomain), then optionally :PORTS ("443", "443,8443" or "*"); no ports
 * means 443 and 80, as in a policy.  The patterns of `access-auto` and
 * `access-owner-approves` are written the same way.  A pattern covers a
 * request when every host and every port the request would allow is one
 * the pattern names: a grant is never wider than the pattern that let it
 * through.
 */
#ifndef SBX_ACCESS_H
#define SBX_ACCESS_H

#include <stddef.h>

#include "meta.h"

/* Lower-cases entry and drops a trailing dot of its host, in place (both
 * name the same host to egressd).  Returns 1 when the result is a valid
 * allow entry (sbx_meta_valid_allow) that names a host, not an IPv4
 * address, else 0. */
int sbx_access_normalize(char *entry);

/* 1 when pattern covers request (both normalized entries), else 0. */
int sbx_access_covers(const char *pattern, const char *request);

/* The first of the NULL-terminated patterns that covers request, or NULL. */
const char *sbx_access_match(const char *const *patterns, const char *request);

#endif
