/*
 * pool.c - chunked memory for compiled rules: one free for all of them.
 */
#include <stdlib.h>
#include <string.h>

#include "policy_int.h"

#define CHUNK_SIZE 65536

void *pool_alloc(struct pool *p, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (n > CHUNK_SIZE / 4) { /* big: a chunk of its own */
        if (p->n_chunks == p->cap_chunks) {
            p->cap_chunks = p->cap_chunks ? p->cap_chunks * 2 : 16;
            p->chunks = xrealloc(p->chunks, p->cap_chunks * sizeof(*p->chunks));
        }
        /* keep the newest small chunk last: insert before it */
        char *c = xcalloc(1, n);
        if (p->n_chunks > 0) {
            p->chunks[p->n_chunks] = p->chunks[p->n_chunks - 1];
            p->chunks[p->n_chunks - 1] = c;
        } else {
            p->chunks[0] = c;
            p->room = 0;
        }
        p->n_chunks++;
        p->bytes += n;
        return c;
    }
    if (p->room - p->used < n || p->n_chunks == 0) {
        if (p->n_chunks == p->cap_chunks) {
            p->cap_chunks = p->cap_chunks ? p->cap_chunks * 2 : 16;
            p->chunks = xrealloc(p->chunks, p->cap_chunks * sizeof(*p->chunks));
        }
        p->chunks[p->n_chunks++] = xcalloc(1, CHUNK_SIZE);
        p->used = 0;
        p->room = CHUNK_SIZE;
        p->bytes += CHUNK_SIZE;
    }
    void *r = p->chunks[p->n_chunks - 1] + p->used;
    p->used += n;
    return r;
}

char *pool_strndup(struct pool *p, const char *s, size_t n)
{
    char *d = pool_alloc(p, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void pool_own_code(struct pool *p, pcre2_code *re)
{
    if (p->n_codes == p->cap_codes) {
        p->cap_codes = p->cap_codes ? p->cap_codes * 2 : 16;
        p->codes = xrealloc(p->codes, p->cap_codes * sizeof(*p->codes));
    }
    p->codes[p->n_codes++] = re;
    size_t size = 0;
    if (pcre2_pattern_info(re, PCRE2_INFO_SIZE, &size) == 0)
        p->bytes += size;
}

void pool_free(struct pool *p)
{
    for (size_t i = 0; i < p->n_chunks; i++)
        free(p->chunks[i]);
    for (size_t i = 0; i < p->n_codes; i++)
        pcre2_code_free(p->codes[i]);
    free(p->chunks);
    free(p->codes);
    memset(p, 0, sizeof(*p));
}
