/* bundle.c - a sandbox's git bundle, read before git reads it (bundle.h). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bundle.h"

#define OID_HEX     40
#define HEADS       "refs/heads/"
#define REFNAME_MAX 1000

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int is_oid(const char *p, size_t n)
{
    if (n != OID_HEX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)p[i]) || isupper((unsigned char)p[i]))
            return 0;
    return 1;
}

/* A branch name as we let it into refs/remotes/sandbox/NAME/ (git's own
 * check-ref-format runs again in the fetch). */
static int plain_branch(const char *ref, size_t n)
{
    if (n <= strlen(HEADS) || n > REFNAME_MAX || strncmp(ref, HEADS, strlen(HEADS)) != 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)ref[i];
        if (c < 0x21 || c >= 0x7f || strchr("~^:?*[\\", c))
            return 0;
        if (c == '.' && i + 1 < n && ref[i + 1] == '.')
            return 0;
    }
    return 1;
}

/* One ref line "OID REFNAME" into refs; -1 with err. */
static int ref_line(const char *line, size_t n, json_t *refs, char *err, size_t errlen)
{
    char ref[REFNAME_MAX + 1], oid[OID_HEX + 1];

    if (n < OID_HEX + 2 || line[OID_HEX] != ' ' || !is_oid(line, OID_HEX)) {
        snprintf(err, errlen, "pull: the bundle's header has a line that is no ref: '%.60s'", line);
        return -1;
    }
    if (!plain_branch(line + OID_HEX + 1, n - OID_HEX - 1)) {
        snprintf(err, errlen,
                 "pull: the bundle holds '%.*s', not a branch (only refs/heads/* are taken)",
                 (int)(n - OID_HEX - 1 > 200 ? 200 : n - OID_HEX - 1), line + OID_HEX + 1);
        return -1;
    }
    memcpy(oid, line, OID_HEX);
    oid[OID_HEX] = '\0';
    snprintf(ref, sizeof ref, "%.*s", (int)(n - OID_HEX - 1), line + OID_HEX + 1);
    json_array_append_new(refs, json_pack("{s:s,s:s}", "ref", ref, "commit", oid));
    return 0;
}

/* The header lines up to the empty one; *pack = where the pack starts. */
static int header(const unsigned char *data, size_t len, int max_refs, json_t *refs, size_t *pack,
                  char *err, size_t errlen)
{
    size_t off = 16;
    long nrefs = 0;

    for (;;) {
        const unsigned char *nl = memchr(data + off, '\n', len - off);
        size_t n;
        if (!nl) {
            snprintf(err, errlen, "pull: the bundle's header does not end (no empty line)");
            return -1;
        }
        n = (size_t)(nl - (data + off));
        if (n == 0) {
            *pack = off + 1;
            return 0;
        }
        if (data[off] == '-' || data[off] == '@') {
            /* a prerequisite or a v3 capability: git bundle verify judges it */
        } else if (++nrefs > max_refs) {
            long more = nrefs;
            for (const unsigned char *p = nl + 1; p < data + len && *p != '\n';) {
                const unsigned char *e = memchr(p, '\n', (size_t)(data + len - p));
                if (!e)
                    break;
                more += *p != '-' && *p != '@';
                p = e + 1;
            }
            snprintf(err, errlen, "pull: the bundle holds %ld refs, more than pull-max-refs %d",
                     more, max_refs);
            return -1;
        } else if (ref_line((const char *)data + off, n, refs, err, errlen)) {
            return -1;
        }
        off += n + 1;
    }
}

int sbx_bundle_check(const unsigned char *data, size_t len, int max_refs, long max_objects,
                     json_t **refs, long *objects, char *err, size_t errlen)
{
    size_t pack;
    uint32_t count, version;

    *refs = NULL;
    if (len < 16 || (memcmp(data, "# v2 git bundle\n", 16) != 0 &&
                     memcmp(data, "# v3 git bundle\n", 16) != 0)) {
        char start[40];
        size_t n = len < 24 ? len : 24;
        for (size_t i = 0; i < n; i++)
            start[i] = isprint(data[i]) ? (char)data[i] : '.';
        start[n] = '\0';
        snprintf(err, errlen, "pull: what the sandbox sent is not a git bundle (it starts '%s')",
                 start);
        return -1;
    }
    *refs = json_array();
    if (header(data, len, max_refs, *refs, &pack, err, errlen))
        goto bad;
    if (json_array_size(*refs) == 0) {
        snprintf(err, errlen, "pull: the bundle holds no branch");
        goto bad;
    }
    if (len - pack < 12 || memcmp(data + pack, "PACK", 4) != 0 ||
        ((version = be32(data + pack + 4)) != 2 && version != 3)) {
        snprintf(err, errlen, "pull: the bundle holds no pack after its header");
        goto bad;
    }
    count = be32(data + pack + 8);
    if ((long)count > max_objects) {
        snprintf(err, errlen,
                 "pull: the bundle's pack holds %lu objects, more than "
                 "pull-max-objects %ld",
                 (unsigned long)count, max_objects);
        goto bad;
    }
    *objects = (long)count;
    return 0;
bad:
    json_decref(*refs);
    *refs = NULL;
    return -1;
}

char *sbx_pack_idx_names(const unsigned char *idx, size_t len, size_t *outlen)
{
    static const unsigned char magic[8] = {0xff, 't', 'O', 'c', 0, 0, 0, 2};
    size_t n, base = 8 + 256 * 4;
    char *out, *o;

    if (len < base || memcmp(idx, magic, 8) != 0)
        return NULL;
    n = be32(idx + 8 + 255 * 4);
    if (n > (len - base) / 20)
        return NULL;
    out = o = malloc(n * 41 + 1);
    if (!out)
        abort();
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < 20; k++)
            o += sprintf(o, "%02x", idx[base + i * 20 + k]);
        *o++ = '\n';
    }
    *o = '\0';
    *outlen = (size_t)(o - out);
    return out;
}
