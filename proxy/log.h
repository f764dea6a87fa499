/*
 * log.h - egressd's own diagnostics (not the access log): one line per
 * event on stderr, which systemd's journal keeps.  Thread-safe.
 *
 * px_log_warn() adds the text of errno; px_log_warnx() does not (as
 * relayd's log_warn / log_warnx).
 */
#ifndef PX_LOG_H
#define PX_LOG_H

#include <stdbool.h>

void px_log_init(const char *progname, bool debug);
void px_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void px_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void px_log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void px_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether debug lines are written (to skip making their arguments). */
bool px_log_debugging(void);

#endif
