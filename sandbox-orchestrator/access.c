/* access.c - access requests' entries and the patterns that cover them. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "access.h"

#define MAX_PORTS 64 /* a policy rule's limit */

enum names { NAMES_EXACT, NAMES_SUBDOMAINS, NAMES_DOMAIN_AND_SUBDOMAINS };

/* An entry taken apart: the names it allows and its ports. */
struct entry {
    enum names names;
    char domain[SBX_ALLOW_MAX];
    int any_port;
    int nports;
    long ports[MAX_PORTS];
};

/* 1 when the host part (n bytes) of entry is an IPv4 address: a grant
 * names a host, and an address would skip what egressd checks of names. */
static int address(const char *entry, size_t n)
{
    char host[16];

    if (n >= sizeof host)
        return 0;
    memcpy(host, entry, n);
    host[n] = '\0';
    return sbx_meta_valid_address(host);
}

int sbx_access_normalize(char *entry)
{
    char *colon = strchr(entry, ':');
    size_t host = colon ? (size_t)(colon - entry) : strlen(entry);

    for (char *p = entry; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    if (host > 1 && entry[host - 1] == '.') { /* "pypi.org." is "pypi.org" */
        memmove(entry + host - 1, entry + host, strlen(entry + host) + 1);
        host--;
    }
    return sbx_meta_valid_allow(entry) && !address(entry, host);
}

/* Takes a valid entry apart (sbx_meta_valid_allow said yes). */
static void entry_split(const char *s, struct entry *e)
{
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);

    memset(e, 0, sizeof *e);
    e->names = NAMES_EXACT;
    if (s[0] == '*')
        e->names = NAMES_SUBDOMAINS, s += 2, n -= 2;
    else if (s[0] == '.')
        e->names = NAMES_DOMAIN_AND_SUBDOMAINS, s += 1, n -= 1;
    memcpy(e->domain, s, n);
    if (!colon) { /* a policy's default ports */
        e->ports[e->nports++] = 443;
        e->ports[e->nports++] = 80;
        return;
    }
    if (strcmp(colon + 1, "*") == 0) {
        e->any_port = 1;
        return;
    }
    for (const char *p = colon + 1; *p && e->nports < MAX_PORTS; p += *p == ',') {
        char *end;
        e->ports[e->nports++] = strtol(p, &end, 10);
        p = end;
    }
}

/* 1 when h is a strict subdomain of d ("a.b.c" of "b.c"). */
static int subdomain_of(const char *h, const char *d)
{
    size_t hn = strlen(h), dn = strlen(d);

    return hn > dn + 1 && h[hn - dn - 1] == '.' && strcmp(h + hn - dn, d) == 0;
}

/* 1 when every name r allows is one p allows. */
static int names_covered(const struct entry *p, const struct entry *r)
{
    int same = strcmp(p->domain, r->domain) == 0, below = subdomain_of(r->domain, p->domain);

    switch (p->names) {
    case NAMES_EXACT: return r->names == NAMES_EXACT && same;
    case NAMES_SUBDOMAINS:
        /* r's own domain is among its names unless r is *.D2 */
        return below || (same && r->names == NAMES_SUBDOMAINS);
    default: return same || below;
    }
}

/* 1 when every port r allows is one p allows. */
static int ports_covered(const struct entry *p, const struct entry *r)
{
    if (p->any_port)
        return 1;
    if (r->any_port)
        return 0;
    for (int i = 0; i < r->nports; i++) {
        int found = 0;
        for (int k = 0; k < p->nports && !found; k++)
            found = p->ports[k] == r->ports[i];
        if (!found)
            return 0;
    }
    return 1;
}

int sbx_access_covers(const char *pattern, const char *request)
{
    struct entry p, r;

    if (!sbx_meta_valid_allow(pattern) || !sbx_meta_valid_allow(request))
        return 0;
    entry_split(pattern, &p);
    entry_split(request, &r);
    return names_covered(&p, &r) && ports_covered(&p, &r);
}

const char *sbx_access_match(const char *const *patterns, const char *request)
{
    for (const char *const *p = patterns; p && *p; p++)
        if (sbx_access_covers(*p, request))
            return *p;
    return NULL;
}
