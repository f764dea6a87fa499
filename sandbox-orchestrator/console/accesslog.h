/* accesslog.h - the recent lines of an egressd's access log, for the
 * console's log view: the file's last SBX_ACCESSLOG_TAIL bytes are read
 * (the first, cut line dropped), and the JSON lines of one sandbox that
 * pass the filters are given newest first.  It reads the file of the
 * egressd on this host (console-access-log); a line that is not JSON is
 * skipped.
 */
#ifndef SBX_CONSOLE_ACCESSLOG_H
#define SBX_CONSOLE_ACCESSLOG_H

#include <stddef.h>

#include <jansson.h>

#define SBX_ACCESSLOG_TAIL (4L << 20) /* bytes read from the end */
#define SBX_ACCESSLOG_MAX  200        /* lines given at most */

/* What a line must be to be given (NULL or "" for any). */
struct sbx_accesslog_filter {
    const char *sandbox;  /* its "sandbox", exactly (required) */
    const char *owner;    /* its "owner", exactly */
    const char *host;     /* a part of its "host" */
    const char *decision; /* its "decision" ("allow", "deny", "would_deny") */
    const char *reason;   /* its "reason", exactly */
};

/* Up to max lines of path that pass f, newest first, as a new JSON array
 * in *out; also the number of lines looked at in *scanned.  0, or -1 with
 * "console-access-log PATH: why" in err. */
int sbx_accesslog_query(const char *path, const struct sbx_accesslog_filter *f, size_t max,
                        json_t **out, size_t *scanned, char *err, size_t errlen);

/* The k hosts of path's recent lines (the same tail) with decision
 * `decision` counted most, per sandbox, for owner's sandboxes (NULL: all):
 * {"SANDBOX": [{"host": "H:P", "count": N}]} in *out (a new reference).
 * 0, or -1 with err as above. */
int sbx_accesslog_top(const char *path, const char *owner, const char *decision, size_t k,
                      json_t **out, char *err, size_t errlen);

#endif
