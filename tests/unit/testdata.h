/*
 * testdata.h - the bytes a unit test hands a parser: heap copies of
 * exactly their length (so ASan sees a read past them), and the files of
 * a test data directory named by the environment (tests/data/README.md).
 * Header-only, as tap.h.
 */
#ifndef TESTS_TESTDATA_H
#define TESTS_TESTDATA_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A heap copy of s[0..n), exactly n bytes (one when n is 0); aborts when
 * out of memory. */
static inline void *td_copy(const void *s, size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL)
        abort();
    memcpy(p, s, n);
    return p;
}

/* The bytes of file name in the directory environment variable env
 * names, at most max of them, as a td_copy (*n its length); NULL when env
 * is not set or the file cannot be opened. */
static inline uint8_t *td_load(const char *env, const char *name, size_t max, size_t *n)
{
    const char *dir = getenv(env);
    char path[4096];
    uint8_t *buf, *out;
    FILE *f;

    if (dir == NULL)
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((f = fopen(path, "rb")) == NULL)
        return NULL;
    if ((buf = malloc(max ? max : 1)) == NULL)
        abort();
    *n = fread(buf, 1, max, f);
    fclose(f);
    out = td_copy(buf, *n);
    free(buf);
    return out;
}

#endif
