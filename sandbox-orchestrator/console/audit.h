/* audit.h - the console's audit log: one JSON line per sign-in (and
 * failed sign-in), sign-out and state-changing action, saying who, what,
 * on which target, when, from where and with what result:
 *   {"ts":"2026-12-05T10:00:00Z","user":"alice@pve","from":"192.0.2.7",
 *    "action":"access.approve","target":"a1b2c3","ok":true,"detail":"..."}
 * Appended (O_APPEND, mode 0600) and flushed line by line, so a crash
 * loses no line written before it.  Thread-safe.
 */
#ifndef SBX_CONSOLE_AUDIT_H
#define SBX_CONSOLE_AUDIT_H

#include <stdbool.h>
#include <stddef.h>

struct sbx_audit;

/* Open (create) the log at path.  NULL with the cause in err. */
struct sbx_audit *sbx_audit_open(const char *path, char *err, size_t errlen);
void sbx_audit_close(struct sbx_audit *a);

/* Append one line.  user, target and detail may be NULL; every string is
 * written as JSON, whatever bytes it holds.  A failed write is said once
 * on stderr and counted; it never stops the console. */
void sbx_audit(struct sbx_audit *a, const char *user, const char *from, const char *action,
               const char *target, bool ok, const char *detail);

#endif
