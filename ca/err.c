/*
 * err.c - the caller's error buffer, and OpenSSL's reason added to it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "ca_int.h"

static void err_vformat(char *err, size_t errlen, const char *fmt, va_list ap)
{
    if (err == NULL || errlen == 0)
        return;
    vsnprintf(err, errlen, fmt, ap);
}

void ca_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    err_vformat(err, errlen, fmt, ap);
    va_end(ap);
}

/* OpenSSL's words for the newest error queued, e.g. "PEM routines: no
 * start line"; the numeric code when it has no words for it. */
static void ssl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    const char *lib = ERR_lib_error_string(e);
    const char *reason = ERR_reason_error_string(e);

    if (reason != NULL)
        snprintf(buf, len, "%s: %s", lib != NULL ? lib : "?", reason);
    else
        snprintf(buf, len, "error %#lx", e);
}

void ca_err_ssl(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    size_t used;
    char why[160];

    va_start(ap, fmt);
    err_vformat(err, errlen, fmt, ap);
    va_end(ap);
    if (err == NULL || errlen == 0 || ERR_peek_last_error() == 0)
        return;
    ssl_reason(why, sizeof why);
    used = strlen(err);
    snprintf(err + used, errlen - used, " (OpenSSL: %s)", why);
}
