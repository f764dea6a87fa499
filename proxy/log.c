/*
 * log.c - see log.h.  One fprintf per line: stdio locks the stream, so
 * lines from worker threads never interleave.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *prog = "egressd";
static bool debugging;

void px_log_init(const char *progname, bool debug)
{
    prog = progname;
    debugging = debug;
}

static void vlog(const char *level, const char *fmt, va_list ap, int err)
{
    char msg[1024];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (err != 0)
        fprintf(stderr, "%s: %s: %s: %s\n", prog, level, msg, strerror(err));
    else
        fprintf(stderr, "%s: %s: %s\n", prog, level, msg);
}

#define PX_LOG_BODY(level, err)                                                                    \
    va_list ap;                                                                                    \
    va_start(ap, fmt);                                                                             \
    vlog(level, fmt, ap, err);                                                                     \
    va_end(ap)

void px_log_info(const char *fmt, ...)
{
    PX_LOG_BODY("info", 0);
}

void px_log_warn(const char *fmt, ...)
{
    int err = errno;
    PX_LOG_BODY("warning", err);
}

void px_log_warnx(const char *fmt, ...)
{
    PX_LOG_BODY("warning", 0);
}

bool px_log_debugging(void)
{
    return debugging;
}

void px_log_debug(const char *fmt, ...)
{
    if (!debugging)
        return;
    PX_LOG_BODY("debug", 0);
}
