/*
 * errbuf.c - see errbuf.h.
 */
#include "errbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void px_err_add(char *err, size_t errlen, const char *fmt, ...)
{
    size_t used = strnlen(err, errlen);
    va_list ap;

    if (errlen == 0 || used + 1 >= errlen)
        return;
    if (used > 0)
        err[used++] = '\n';
    va_start(ap, fmt);
    int n = vsnprintf(err + used, errlen - used, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n >= errlen - used && errlen > 4)
        memcpy(err + errlen - 4, "...", 4);
}
