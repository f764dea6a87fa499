/*
 * fuzz_auth.c - the Proxy-Authorization value a sandbox sends, as egressd's
 * world reads it (px_world_by_basic_auth).  Properties:
 *   - it names sandbox 101 (the one binding with a token) or nobody;
 *   - it names 101 only if the value is "Basic" + white space + base64 whose
 *     bytes, decoded here independently, are exactly "101:s3cret";
 *   - and only if that base64 is the one strict encoding of those bytes
 *     (RFC 4648 section 3.5, padded, pad bits zero: what RFC 7617 asks
 *     for), MTAxOnMzY3JldA==; and whenever the value is that encoding
 *     between the scheme and blanks, it names 101.
 * Setup: a temporary policy dir, state dir and world made once.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "world.h"

static const char secret[] = "101:s3cret";
static const char strict_b64[] = "MTAxOnMzY3JldA==";

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f == NULL || fputs(text, f) == EOF || fclose(f) != 0)
        abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char dir[256], err[4096];
    static struct px_config cfg;
    static struct px_geo geo;
    char sub[300];
    (void)argc, (void)argv;

    snprintf(dir, sizeof(dir), "%s/fuzz_auth.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        abort();
    snprintf(sub, sizeof(sub), "%s/policies", dir);
    mkdir(sub, 0700);
    write_file(dir, "policies/p.allow", "a.test\n");
    write_file(dir, "egressd.conf",
               "listen 127.0.0.1:3128\npolicy-dir policies\n"
               "default-policy p\nstate-dir state\n");
    snprintf(sub, sizeof(sub), "%s/egressd.conf", dir);
    if (px_config_load(&cfg, sub, err, sizeof(err)) == -1 ||
        px_world_init(&cfg, &geo, err, sizeof(err)) == -1) {
        fprintf(stderr, "fuzz_auth setup: %s\n", err);
        abort();
    }
    json_t *b = json_pack("{s:s,s:s,s:s}", "id", "101", "policy", "p", "token", "s3cret");
    json_t *c = json_pack("{s:s,s:s}", "id", "102", "policy", "p");
    if (px_world_put_sandbox("101", b, err, sizeof(err)) == -1 ||
        px_world_put_sandbox("102", c, err, sizeof(err)) == -1) {
        fprintf(stderr, "fuzz_auth setup: %s\n", err);
        abort();
    }
    json_decref(b);
    json_decref(c);
    /* The state file is written; the directory can go. */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        abort();
    return 0;
}

static int b64v(unsigned char ch)
{
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = ch ? strchr(a, ch) : NULL;
    return p ? (int)(p - a) : -1;
}

/* The credentials part of a value: past "basic" (any case) and SP/HT,
 * before trailing SP/HT, into *start and *end; false if there is no
 * scheme. */
static bool credentials_part(const uint8_t *v, size_t n, size_t *start, size_t *end)
{
    size_t i = 0;

    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    if (n - i < 6 || strncasecmp((const char *)v + i, "basic", 5) != 0 ||
        (v[i + 5] != ' ' && v[i + 5] != '\t'))
        return false;
    for (i += 5; i < n && (v[i] == ' ' || v[i] == '\t'); i++)
        ;
    while (n > i && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    *start = i;
    *end = n;
    return true;
}

/* Independent reading: base64 (padding optional, leftover bits ignored)
 * of the credentials part; the bytes. */
static long decode(const uint8_t *v, size_t n, uint8_t *out, size_t cap)
{
    size_t i, o = 0, bits = 0;
    uint32_t acc = 0;

    if (!credentials_part(v, n, &i, &n))
        return -1;
    while (n > i && v[n - 1] == '=')
        n--;
    for (; i < n; i++) {
        int x = b64v(v[i]);
        if (x < 0)
            return -1;
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (long)o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct px_world *w = px_world_get();
    const struct px_sandbox *sb = px_world_by_basic_auth(w, (const char *)data, size);
    uint8_t dec[1024];

    CHECK(sb == NULL || strcmp(sb->id, "101") == 0, "named sandbox %s, which has no token", sb->id);
    if (sb != NULL) {
        long n = decode(data, size, dec, sizeof(dec));
        CHECK(n == (long)strlen(secret) && memcmp(dec, secret, (size_t)n) == 0,
              "accepted a value that does not decode to the credentials (%ld bytes)", n);
    }
    size_t a, b;
    bool strict = credentials_part(data, size, &a, &b) && b - a == strlen(strict_b64) &&
                  memcmp(data + a, strict_b64, b - a) == 0;
    CHECK((sb != NULL) == strict, "%s a value whose credentials are %sthe strict encoding",
          sb != NULL ? "accepted" : "refused", strict ? "" : "not ");
    px_world_put(w);
    return 0;
}
