/* protect.c - protected paths and escaping symlinks (protect.h). */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "protect.h"

#define COMPONENT_MAX 256

/* Component i of path into buf; 0 when there is none. */
static int component(const char *path, int i, char *buf, size_t len, int *last)
{
    const char *p = path, *e;

    for (; i > 0; i--) {
        p = strchr(p, '/');
        if (!p)
            return 0;
        p++;
    }
    e = strchr(p, '/');
    *last = e == NULL;
    if (!e)
        e = p + strlen(p);
    if ((size_t)(e - p) >= len || e == p)
        return 0;
    memcpy(buf, p, (size_t)(e - p));
    buf[e - p] = '\0';
    return 1;
}

static int matches(const char *pattern, const char *path)
{
    char pat[COMPONENT_MAX], comp[COMPONENT_MAX];
    size_t n = strlen(pattern);
    int top = pattern[0] == '/', dir = n > 1 && pattern[n - 1] == '/', last;

    if (n - (size_t)top - (size_t)dir >= sizeof pat || n - (size_t)top - (size_t)dir == 0)
        return 0;
    memcpy(pat, pattern + top, n - (size_t)top - (size_t)dir);
    pat[n - (size_t)top - (size_t)dir] = '\0';
    for (int i = 0; component(path, i, comp, sizeof comp, &last); i++) {
        if (fnmatch(pat, comp, FNM_PERIOD) == 0 && !(dir && last))
            return 1;
        if (top)
            return 0;
    }
    return 0;
}

const char *sbx_protected_match(const char *const *patterns, const char *path)
{
    for (int i = 0; patterns && patterns[i]; i++)
        if (matches(patterns[i], path))
            return patterns[i];
    return NULL;
}

int sbx_link_escapes(const char *path, const char *target)
{
    int depth = 0;
    const char *p;

    if (target[0] == '/' || target[0] == '\0')
        return 1;
    for (p = path; (p = strchr(p, '/')); p++)
        depth++; /* directories above the link */
    for (p = target; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return 1;
        } else if (!(n == 1 && p[0] == '.') && n > 0) {
            depth++;
        }
        p += n + (e != NULL);
    }
    return 0;
}
