/* xfer.c - large files in and out of a sandbox, in parts, checksummed.
 * Each copy is a step of s->progress ("copy in", "copy out") that reports
 * the bytes moved after every part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "guest.h"
#include "xfer.h"

#define PART          SBX_GUEST_FILE_MAX
#define PART_NAME_MAX 4200

void sbx_sha256_hex(const unsigned char *data, size_t len, char hex[65])
{
    unsigned char md[32];
    unsigned int n = 0;

    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void part_name(char *buf, size_t len, const char *path, size_t i)
{
    snprintf(buf, len, "%s.sbx-chunk-%04zu", path, i);
}

/* In the guest: join the parts (all but a single one) into path, remove
 * them, print path's sha256sum. */
static int join_and_hash(struct sbx *s, const char *node, int vmid, const char *path, size_t nparts,
                         char hex[65], char *err, size_t errlen)
{
    static const char script[] =
        "set -e; f=$1; n=$2; i=0; : > \"$f.sbx-join\"\n"
        "while [ \"$i\" -lt \"$n\" ]; do p=$(printf '%s.sbx-chunk-%04d' \"$f\" \"$i\");\n"
        "  cat -- \"$p\" >> \"$f.sbx-join\"; rm -f -- \"$p\"; i=$((i+1)); done\n"
        "mv -f -- \"$f.sbx-join\" \"$f\"; sha256sum -- \"$f\" | cut -c1-64";
    static const char hash_only[] = "sha256sum -- \"$1\" | cut -c1-64";
    char n[32], *out = NULL;
    const char *args[] = {path, n, NULL};
    int rc;

    snprintf(n, sizeof n, "%zu", nparts);
    rc = sbx_guest_script(s, node, vmid, "checking the copy in the sandbox",
                          nparts > 1 ? script : hash_only, args, s->cfg.exec_timeout_ms, &out, err,
                          errlen);
    if (rc == 0 && strlen(out) < 64) {
        snprintf(err, errlen, "checking the copy in the sandbox: sha256sum printed no digest");
        rc = -1;
    }
    if (rc == 0)
        memcpy(hex, out, 64), hex[64] = '\0';
    free(out);
    return rc;
}

/* Write the parts of data into the guest, each counted in s->progress. */
static int put_parts(struct sbx *s, const char *node, int vmid, const char *path,
                     const unsigned char *data, size_t len, size_t nparts, char *err, size_t errlen)
{
    char part[PART_NAME_MAX];

    for (size_t i = 0; i < nparts; i++) {
        size_t off = i * PART, n = len - off < PART ? len - off : PART;
        if (nparts == 1)
            snprintf(part, sizeof part, "%s", path);
        else
            part_name(part, sizeof part, path, i);
        if (sbx_guest_write(s, node, vmid, part, data + off, n, err, errlen))
            return -1;
        sbx_progress_bytes(&s->progress, (long long)(off + n), (long long)len);
    }
    return 0;
}

int sbx_xfer_put(struct sbx *s, const char *node, int vmid, const char *path,
                 const unsigned char *data, size_t len, char *err, size_t errlen)
{
    char ours[65], theirs[65];
    size_t nparts = len <= PART ? 1 : (len + PART - 1) / PART;

    sbx_sha256_hex(data, len, ours);
    sbx_progress_begin(&s->progress, "copy in");
    if (sbx_progress_end(&s->progress,
                         put_parts(s, node, vmid, path, data, len, nparts, err, errlen) != 0))
        return -1;
    if (join_and_hash(s, node, vmid, path, nparts, theirs, err, errlen))
        return -1;
    if (strcmp(ours, theirs) != 0) {
        snprintf(err, errlen, "copy into the sandbox: %s has SHA-256 %s there, %s here", path,
                 theirs, ours);
        return -1;
    }
    return 0;
}

/* In the guest: cut path into nparts parts of PART bytes. */
static int cut_parts(struct sbx *s, const char *node, int vmid, const char *path, size_t nparts,
                     char *err, size_t errlen)
{
    static const char script[] =
        "set -e; f=$1; b=$2; n=$3; i=0\n"
        "while [ \"$i\" -lt \"$n\" ]; do p=$(printf '%s.sbx-chunk-%04d' \"$f\" \"$i\");\n"
        "  dd if=\"$f\" of=\"$p\" bs=\"$b\" skip=\"$i\" count=1 status=none; i=$((i+1)); done";
    char b[32], n[32];
    const char *args[] = {path, b, n, NULL};

    snprintf(b, sizeof b, "%ld", (long)PART);
    snprintf(n, sizeof n, "%zu", nparts);
    return sbx_guest_script(s, node, vmid, "cutting the bundle in parts", script, args,
                            s->cfg.exec_timeout_ms, NULL, err, errlen);
}

static void remove_parts(struct sbx *s, const char *node, int vmid, const char *path, size_t nparts)
{
    static const char script[] = "f=$1; n=$2; i=0; while [ \"$i\" -lt \"$n\" ]; do "
                                 "rm -f -- \"$(printf '%s.sbx-chunk-%04d' \"$f\" \"$i\")\"; "
                                 "i=$((i+1)); done";
    char n[32], ignored[256];
    const char *args[] = {path, n, NULL};

    snprintf(n, sizeof n, "%zu", nparts);
    (void)sbx_guest_script(s, node, vmid, "removing parts", script, args, s->cfg.exec_timeout_ms,
                           NULL, ignored, sizeof ignored);
}

/* Read the parts one after the other into buf (size bytes). */
static int read_parts(struct sbx *s, const char *node, int vmid, const char *path, size_t nparts,
                      unsigned char *buf, size_t size, char *err, size_t errlen)
{
    char part[PART_NAME_MAX];
    size_t off = 0;

    for (size_t i = 0; i < nparts; i++) {
        unsigned char *d;
        size_t n;
        if (nparts == 1)
            snprintf(part, sizeof part, "%s", path);
        else
            part_name(part, sizeof part, path, i);
        if (sbx_guest_read(s, node, vmid, part, &d, &n, err, errlen))
            return -1;
        if (n > size - off) {
            free(d);
            snprintf(err, errlen, "copy out of the sandbox: %s grew past the %zu bytes reported",
                     path, size);
            return -1;
        }
        memcpy(buf + off, d, n);
        off += n;
        free(d);
        sbx_progress_bytes(&s->progress, (long long)off, (long long)size);
    }
    if (off != size) {
        snprintf(err, errlen, "copy out of the sandbox: read %zu bytes of %s, %zu reported", off,
                 path, size);
        return -1;
    }
    return 0;
}

int sbx_xfer_get(struct sbx *s, const char *node, int vmid, const char *path, long size,
                 const char *sha_hex, unsigned char **data, size_t *len, char *err, size_t errlen)
{
    size_t n = (size_t)size, nparts = n <= PART ? 1 : (n + PART - 1) / PART;
    unsigned char *buf;
    char ours[65];
    int rc;

    *data = NULL;
    *len = 0;
    if (nparts > 1 && cut_parts(s, node, vmid, path, nparts, err, errlen)) {
        remove_parts(s, node, vmid, path, nparts);
        return -1;
    }
    buf = malloc(n ? n : 1);
    if (!buf)
        abort();
    sbx_progress_begin(&s->progress, "copy out");
    rc = sbx_progress_end(&s->progress,
                          read_parts(s, node, vmid, path, nparts, buf, n, err, errlen) != 0);
    if (nparts > 1)
        remove_parts(s, node, vmid, path, nparts);
    if (rc == 0) {
        sbx_sha256_hex(buf, n, ours);
        if (strcmp(ours, sha_hex) != 0) {
            snprintf(err, errlen, "copy out of the sandbox: %s has SHA-256 %s here, %s there", path,
                     ours, sha_hex);
            rc = -1;
        }
    }
    if (rc) {
        free(buf);
        return -1;
    }
    *data = buf;
    *len = n;
    return 0;
}
