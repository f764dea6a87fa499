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

/* Levenshtein distance of a[0..la) and b (both under 32 bytes). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t row[33];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *policy_nearest_word(const char *word, size_t len, const char *const *candidates)
{
    const char *near = NULL;
    size_t best = 3; /* two edits at most */

    if (len >= 32)
        return NULL;
    for (size_t k = 0; candidates[k] != NULL; k++) {
        size_t lc = strlen(candidates[k]);
        if (lc >= 32)
            continue;
        size_t d = edit_distance(word, len, candidates[k], lc);
        if (d < best) {
            best = d;
            near = candidates[k];
        }
    }
    return near;
}
