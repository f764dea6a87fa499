/*
 * http_int.h - what the files of http/ share and nothing else sees: the
 * byte classes of RFC 9110 and the view helpers (pointer + length, no
 * copy) the head parser, the head writer and http_find use.
 */
#ifndef HTTP_INT_H
#define HTTP_INT_H

#include <stdbool.h>
#include <string.h>

#include "http.h"

/* tchar of RFC 9110 section 5.6.2. */
static inline bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* CTL of RFC 5234 other than HT: never allowed in a field value (RFC 9110
 * section 5.5) nor in a reason phrase (RFC 9112 section 4). */
static inline bool is_bad_ctl(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

static inline bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static inline int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
        return (c | 0x20) - 'a' + 10;
    return -1;
}

/* Does the view equal `lower` (lower-case ASCII), ignoring case? */
static inline bool view_is(struct http_view v, const char *lower)
{
    size_t n = strlen(lower);

    if (v.len != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v.p[i];
        if (c >= 'A' && c <= 'Z')
            c |= 0x20;
        if (c != (unsigned char)lower[i])
            return false;
    }
    return true;
}

static inline bool views_equal_nocase(struct http_view a, struct http_view b)
{
    if (a.len != b.len)
        return false;
    for (size_t i = 0; i < a.len; i++) {
        unsigned char x = (unsigned char)a.p[i], y = (unsigned char)b.p[i];
        if ((x >= 'A' && x <= 'Z' ? x | 0x20 : x) != (y >= 'A' && y <= 'Z' ? y | 0x20 : y))
            return false;
    }
    return true;
}

static inline struct http_view trim(const char *p, const char *end)
{
    while (p < end && is_ows(*p))
        p++;
    while (end > p && is_ows(end[-1]))
        end--;
    return (struct http_view){p, (size_t)(end - p)};
}

/* The next non-empty element of a comma-separated list (RFC 9110 section
 * 5.6.1: empty elements are allowed and ignored), trimmed of OWS.  *p walks
 * the list; false at its end. */
static inline bool list_next(const char **p, const char *end, struct http_view *elem)
{
    while (*p < end) {
        const char *s = *p, *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;

        *p = comma ? comma + 1 : end;
        *elem = trim(s, e);
        if (elem->len > 0)
            return true;
    }
    return false;
}

static inline bool view_is_token(struct http_view v)
{
    if (v.len == 0)
        return false;
    for (size_t i = 0; i < v.len; i++)
        if (!is_tchar((unsigned char)v.p[i]))
            return false;
    return true;
}

#endif
