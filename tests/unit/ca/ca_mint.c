/*
 * ca_mint - write a sandbox CA and leaves under it, for end-to-end tests
 * that point real clients (curl, python, node, git, openssl s_client) at a
 * server presenting them.
 *
 *   ca_mint OUTDIR RULE... [--leaf HOST]... [--unchecked NAME]...
 *
 * RULEs are ca_authority_new()'s names ("host", "*.domain", ".domain").
 * Writes, in OUTDIR (which must exist):
 *   ca.pem           the CA, permitting the RULEs only
 *   leaf.key         the leaves' shared private key (PKCS#8)
 *   leaf-HOST.pem    from ca_leaf_mint(), for each exact host RULE, the apex
 *                    of each ".domain" RULE and each --leaf HOST
 *   leaf-NAME.pem    for each --unchecked NAME, made by hand with the CA's
 *                    key past ca_leaf_mint()'s refusal (an IP literal gets an
 *                    iPAddress subjectAltName): one a client must refuse
 * The CA key is made afresh and never written.  Exit status 0, 1 on a
 * failure (said on stderr), 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "ca.h"
#include "forge.h"

enum {
    EXIT_USAGE = 2,
    DAY = 86400,
    CA_DAYS = 30,
    LEAF_DAYS = 7,
    PATH_MAX_LEN = 4096,
};

struct args {
    const char *outdir;
    const char *rules[CA_NAMES_MAX];
    size_t nrules;
    const char *leaves[CA_NAMES_MAX];
    size_t nleaves;
    const char *unchecked[CA_NAMES_MAX];
    size_t nunchecked;
};

static int usage(void)
{
    fprintf(stderr, "usage: ca_mint OUTDIR RULE... [--leaf HOST]... [--unchecked NAME]...\n");
    return EXIT_USAGE;
}

/* Append v to list, at most CA_NAMES_MAX entries. */
static bool push(const char **list, size_t *n, const char *v)
{
    if (v == NULL || *n == CA_NAMES_MAX)
        return false;
    list[(*n)++] = v;
    return true;
}

static bool args_parse(int argc, char **argv, struct args *a)
{
    if (argc < 3)
        return false;
    a->outdir = argv[1];
    for (int i = 2; i < argc; i++) {
        bool ok;
        if (strcmp(argv[i], "--leaf") == 0)
            ok = push(a->leaves, &a->nleaves, i + 1 < argc ? argv[++i] : NULL);
        else if (strcmp(argv[i], "--unchecked") == 0)
            ok = push(a->unchecked, &a->nunchecked, i + 1 < argc ? argv[++i] : NULL);
        else
            ok = push(a->rules, &a->nrules, argv[i]);
        if (!ok)
            return false;
    }
    return a->nrules > 0;
}

static bool write_file(const char *dir, const char *name, const char *text, size_t len)
{
    char path[PATH_MAX_LEN];
    FILE *f;
    bool ok;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "w");
    ok = f != NULL && fwrite(text, 1, len, f) == len;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok)
        perror(path);
    return ok;
}

static bool write_leaf(const char *dir, const char *host, X509 *x)
{
    char name[300], pem[CA_LEAF_PEM_MAX];
    size_t n = x != NULL ? ca_cert_to_pem(x, pem, sizeof pem) : 0;

    snprintf(name, sizeof name, "leaf-%s.pem", host);
    return n > 0 && write_file(dir, name, pem, n);
}

/* The leaf for host from ca_leaf_mint(), written. */
static bool mint_one(const struct args *a, const struct ca_authority *ca, EVP_PKEY *leaf_key,
                     const char *host, int64_t now)
{
    char err[256];
    X509 *x = ca_leaf_mint(ca, host, leaf_key, now, (int64_t)LEAF_DAYS * DAY, err, sizeof err);
    bool ok = x != NULL && write_leaf(a->outdir, host, x);

    if (x == NULL)
        fprintf(stderr, "ca_mint: %s\n", err);
    X509_free(x);
    return ok;
}

/* The host a RULE names for its default leaf, or NULL ("*.d" names none). */
static const char *rule_host(const char *rule)
{
    if (rule[0] == '*')
        return NULL;
    return rule[0] == '.' ? rule + 1 : rule;
}

static bool mint_all(const struct args *a, const struct ca_authority *ca, EVP_PKEY *ca_key,
                     EVP_PKEY *leaf_key, int64_t now)
{
    bool ok = true;

    for (size_t i = 0; ok && i < a->nrules; i++)
        if (rule_host(a->rules[i]) != NULL)
            ok = mint_one(a, ca, leaf_key, rule_host(a->rules[i]), now);
    for (size_t i = 0; ok && i < a->nleaves; i++)
        ok = mint_one(a, ca, leaf_key, a->leaves[i], now);
    for (size_t i = 0; ok && i < a->nunchecked; i++) {
        X509 *x = forge_leaf(ca_authority_cert(ca), ca_key, a->unchecked[i], leaf_key, now);
        ok = write_leaf(a->outdir, a->unchecked[i], x);
        X509_free(x);
    }
    return ok;
}

static bool run(const struct args *a, EVP_PKEY *ca_key, EVP_PKEY *leaf_key)
{
    int64_t now = (int64_t)time(NULL);
    char err[256], pem[CA_PEM_MAX], key[CA_KEY_PEM_MAX];
    struct ca_authority *ca = ca_authority_new(ca_key, "ca-mint", a->rules, a->nrules, now,
                                               (int64_t)CA_DAYS * DAY, err, sizeof err);
    size_t pn = ca != NULL ? ca_authority_pem(ca, pem, sizeof pem) : 0;
    size_t kn = ca_key_to_pem(leaf_key, key, sizeof key);
    bool ok = ca != NULL && pn > 0 && kn > 0 && write_file(a->outdir, "ca.pem", pem, pn) &&
              write_file(a->outdir, "leaf.key", key, kn) && mint_all(a, ca, ca_key, leaf_key, now);

    if (ca == NULL)
        fprintf(stderr, "ca_mint: %s\n", err);
    ca_authority_free(ca);
    return ok;
}

int main(int argc, char **argv)
{
    static struct args a;
    EVP_PKEY *ca_key, *leaf_key;
    bool ok;

    if (!args_parse(argc, argv, &a))
        return usage();
    ca_key = ca_key_generate();
    leaf_key = ca_key_generate();
    ok = ca_key != NULL && leaf_key != NULL && run(&a, ca_key, leaf_key);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
