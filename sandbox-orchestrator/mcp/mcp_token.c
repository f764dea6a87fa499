/* mcp_token.c - the HTTP transport's bearer token: read from a file,
 * compared in constant time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "mcp_server.h"

/* Shorter tokens are guessable: refuse them rather than serve behind one. */
#define TOKEN_MIN 16
#define TOKEN_MAX 4096

char *sbx_mcp_token_read(const char *path, char *err, size_t errlen)
{
    char buf[TOKEN_MAX + 2], *s, *e;
    struct stat st;
    FILE *f;

    if (!path || !*path) {
        snprintf(err, errlen, "mcp-token-file is not set: the HTTP transport needs a token");
        return NULL;
    }
    f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & S_IROTH))
        fprintf(stderr, "sandboxctl mcp: warning: %s is readable by every user (chmod 0600)\n",
                path);
    s = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!s) {
        snprintf(err, errlen, "%s:1: expected a token, found an empty file", path);
        return NULL;
    }
    if (strlen(s) > TOKEN_MAX) {
        snprintf(err, errlen, "%s:1: token longer than %d bytes", path, TOKEN_MAX);
        return NULL;
    }
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && strchr(" \t\r\n", e[-1]))
        *--e = '\0';
    if (e - s < TOKEN_MIN || strpbrk(s, " \t")) {
        snprintf(err, errlen, "%s:1: expected one token of at least %d characters, no blanks", path,
                 TOKEN_MIN);
        return NULL;
    }
    s = strdup(s);
    if (!s)
        abort();
    return s;
}

int sbx_mcp_token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    volatile unsigned char diff = alen != blen;

    /* Walk all of a whatever b holds, so the time tells only a's length. */
    for (size_t i = 0; i < alen; i++)
        diff |= (unsigned char)(a[i] ^ (blen ? b[i % blen] : 0));
    return diff == 0;
}
