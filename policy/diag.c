/*
 * diag.c - the error list a load fills, and allocation that aborts on
 * failure (STYLE.md rule 7: allocation failure may abort, hostile input
 * never may).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

static void *check(void *p)
{
    if (p == NULL) {
        fputs("policy: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *xmalloc(size_t n)
{
    return check(malloc(n ? n : 1));
}

void *xcalloc(size_t n, size_t size)
{
    return check(calloc(n ? n : 1, size ? size : 1));
}

void *xrealloc(void *p, size_t n)
{
    return check(realloc(p, n ? n : 1));
}

char *xstrndup(const char *s, size_t n)
{
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void policy_diag_add(struct policy_diag *d, const char *fmt, ...)
{
    va_list ap;
    char buf[512];

    if (d == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->lines = xrealloc(d->lines, d->cap * sizeof(*d->lines));
    }
    d->lines[d->n++] = xstrndup(buf, strlen(buf));
}

void policy_diag_free(struct policy_diag *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        free(d->lines[i]);
    free(d->lines);
    d->lines = NULL;
    d->n = d->cap = 0;
}
