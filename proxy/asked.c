/*
 * asked.c - a request as the policy judges it (asked.h).
 */
#include <string.h>

#include "asked.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The byte of the unit at s[*i] (a byte, or a valid %XX escape), *i
 * past it. */
static unsigned char unit(const char *s, size_t *i)
{
    if (s[*i] != '%')
        return (unsigned char)s[(*i)++];
    unsigned char c = (unsigned char)(hex_value(s[*i + 1]) * 16 + hex_value(s[*i + 2]));
    *i += 3;
    return c;
}

/* Whether the normalized path n[0..nlen) is more than the sent one
 * p[0..plen) (query cut) with its escapes normalized: the two differ as
 * byte strings once every escape is read as its byte, that is a segment
 * was dropped ("//", ".", "..").  Both hold valid escapes only (the sent
 * one normalized). */
static bool reshaped(const char *p, size_t plen, const char *n, size_t nlen)
{
    size_t i = 0, j = 0;

    while (i < plen && p[i] != '?' && j < nlen)
        if (unit(p, &i) != unit(n, &j))
            return true;
    return j != nlen || (i < plen && p[i] != '?');
}

void px_asked_make(struct px_asked *a, const char *method, size_t mlen, const char *path,
                   size_t plen)
{
    size_t n = 0;

    a->rq = (struct policy_request){.method = method, .method_len = mlen};
    a->reshaped = false;
    a->path[0] = '\0';
    if (path == NULL) {
        a->path_result = HTTP_PATH_BAD;
        return;
    }
    a->path_result = http_path_normalize(path, plen, a->path, sizeof(a->path), &n);
    if (a->path_result != HTTP_PATH_OK)
        return;
    a->reshaped = reshaped(path, plen, a->path, n);
    if (!a->reshaped) {
        a->rq.path = a->path;
        a->rq.path_len = n;
    }
}
