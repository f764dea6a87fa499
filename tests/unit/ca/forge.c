/*
 * forge.c - leaves made by hand with a CA's key (forge.h).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "forge.h"

bool forge_is_ip(const char *name)
{
    unsigned char buf[16];

    return inet_pton(AF_INET, name, buf) == 1 || inet_pton(AF_INET6, name, buf) == 1;
}

/* Add extension nid from OpenSSL's configuration syntax, e.g. "critical,CA:FALSE". */
static bool ext_add(X509V3_CTX *ctx, X509 *x, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
    bool ok = e != NULL && X509_add_ext(x, e, -1) == 1;

    X509_EXTENSION_free(e);
    return ok;
}

/* A random 64-bit serial: leaves forged at the same second differ. */
static bool forge_serial(X509 *x)
{
    BIGNUM *bn = BN_new();
    bool ok = bn != NULL && BN_rand(bn, 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ODD) &&
              BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;

    BN_free(bn);
    return ok;
}

static bool forge_names(X509 *x, X509 *ca, const char *name)
{
    return X509_set_issuer_name(x, X509_get_subject_name(ca)) &&
           (strlen(name) > 64 ||
            X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                                       (const unsigned char *)name, -1, -1, 0));
}

static bool forge_exts(X509 *x, X509 *ca, const char *name)
{
    X509V3_CTX ctx;
    char san[300];

    snprintf(san, sizeof san, "%s%s:%s", strlen(name) > 64 ? "critical," : "",
             forge_is_ip(name) ? "IP" : "DNS", name);
    X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
    return ext_add(&ctx, x, NID_basic_constraints, "critical,CA:FALSE") &&
           ext_add(&ctx, x, NID_key_usage, "critical,digitalSignature") &&
           ext_add(&ctx, x, NID_ext_key_usage, "serverAuth") &&
           ext_add(&ctx, x, NID_subject_key_identifier, "hash") &&
           ext_add(&ctx, x, NID_authority_key_identifier, "keyid:always") &&
           ext_add(&ctx, x, NID_subject_alt_name, san);
}

X509 *forge_leaf(X509 *ca, EVP_PKEY *ca_key, const char *name, EVP_PKEY *leaf_key, int64_t now)
{
    X509 *x = X509_new();
    bool ok = x != NULL && X509_set_version(x, X509_VERSION_3) && forge_serial(x) &&
              ASN1_TIME_set(X509_getm_notBefore(x), (time_t)(now - 300)) &&
              ASN1_TIME_set(X509_getm_notAfter(x), (time_t)(now + 86400)) &&
              X509_set_pubkey(x, leaf_key) && forge_names(x, ca, name) && forge_exts(x, ca, name) &&
              X509_sign(x, ca_key, EVP_sha256()) > 0;

    if (!ok) {
        fprintf(stderr, "forge_leaf %s: ", name);
        ERR_print_errors_fp(stderr);
        X509_free(x);
        return NULL;
    }
    return x;
}

X509 *forge_unconstrained(X509 *ca, EVP_PKEY *ca_key)
{
    X509 *c = X509_dup(ca);
    int at = c != NULL ? X509_get_ext_by_NID(c, NID_name_constraints, -1) : -1;

    if (at < 0) {
        X509_free(c);
        return NULL;
    }
    X509_EXTENSION_free(X509_delete_ext(c, at));
    if (X509_sign(c, ca_key, EVP_sha256()) <= 0) {
        X509_free(c);
        return NULL;
    }
    return c;
}
