/*
 * key.c - the appliance key: ECDSA on the named curve P-256, made here or
 * read from PEM, and written as PKCS#8 PEM.
 */
#include <limits.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>

#include "ca_int.h"

enum { PEM_IN_MAX = 64 * 1024 }; /* far more than any EC private key in PEM */

EVP_PKEY *ca_key_generate(void)
{
    EVP_PKEY *k;

    ERR_set_mark();
    k = EVP_EC_gen("P-256");
    ERR_pop_to_mark();
    return k;
}

/* Whether k's curve is P-256, by whichever name OpenSSL gives it. */
static bool is_p256(const char *group)
{
    int nid = OBJ_sn2nid(group);

    if (nid == NID_undef)
        nid = EC_curve_nist2nid(group);
    return nid == NID_X9_62_prime256v1;
}

/* Whether k would be encoded with its curve's name (not explicit
 * parameters, which strict verifiers refuse: X509_V_ERR_EC_KEY_EXPLICIT_PARAMS). */
static bool named_curve(const EVP_PKEY *k)
{
    char enc[32];
    size_t len;

    if (!EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_EC_ENCODING, enc, sizeof enc, &len))
        return true; /* no encoding parameter: the default, named_curve */
    return strcmp(enc, OSSL_PKEY_EC_ENCODING_GROUP) == 0;
}

static bool has_private(const EVP_PKEY *k)
{
    BIGNUM *priv = NULL;
    bool ok = EVP_PKEY_get_bn_param(k, OSSL_PKEY_PARAM_PRIV_KEY, &priv) == 1;

    BN_clear_free(priv);
    return ok;
}

bool ca_key_check(const EVP_PKEY *k, bool need_private, const char *what, char *err, size_t errlen)
{
    char group[64];
    size_t len;

    if (k == NULL) {
        ca_err(err, errlen, "%s: no key", what);
        return false;
    }
    if (!EVP_PKEY_is_a(k, "EC")) {
        const char *type = EVP_PKEY_get0_type_name(k);
        ca_err(err, errlen, "%s: the key is %s, not EC P-256", what,
               type != NULL ? type : "of an unknown type");
        return false;
    }
    if (!EVP_PKEY_get_group_name(k, group, sizeof group, &len) || !named_curve(k)) {
        ca_err(err, errlen,
               "%s: an EC key with explicit curve parameters, not the named curve P-256", what);
        return false;
    }
    if (!is_p256(group)) {
        ca_err(err, errlen, "%s: the key is EC on %s, not P-256", what, group);
        return false;
    }
    if (need_private && !has_private(k)) {
        ca_err(err, errlen, "%s: an EC P-256 public key without its private part", what);
        return false;
    }
    return true;
}

/* A passphrase callback that refuses: the module never asks anyone. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    *(bool *)asked = true;
    return -1;
}

/* Whether the key's private and public parts agree (and are on the curve). */
static bool pair_consistent(EVP_PKEY *k)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, k, NULL);
    bool ok = ctx != NULL && EVP_PKEY_check(ctx) == 1;

    EVP_PKEY_CTX_free(ctx);
    return ok;
}

static EVP_PKEY *key_read(const char *pem, size_t len, char *err, size_t errlen)
{
    BIO *b;
    EVP_PKEY *k;
    bool asked = false;

    if (pem == NULL || len > PEM_IN_MAX) {
        ca_err(err, errlen, "ca_key_from_pem: %s", pem == NULL ? "no PEM" : "over 64 KiB of PEM");
        return NULL;
    }
    b = BIO_new_mem_buf(pem, (int)len);
    k = b != NULL ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, &asked) : NULL;
    BIO_free(b);
    if (k == NULL && asked)
        ca_err(err, errlen, "ca_key_from_pem: the key is encrypted; give it unencrypted");
    else if (k == NULL)
        ca_err_ssl(err, errlen, "ca_key_from_pem: no PEM private key");
    return k;
}

EVP_PKEY *ca_key_from_pem(const char *pem, size_t len, char *err, size_t errlen)
{
    EVP_PKEY *k;

    ERR_set_mark();
    k = key_read(pem, len, err, errlen);
    if (k != NULL && !ca_key_check(k, true, "ca_key_from_pem", err, errlen)) {
        EVP_PKEY_free(k);
        k = NULL;
    }
    if (k != NULL && !pair_consistent(k)) {
        ca_err_ssl(err, errlen, "ca_key_from_pem: the private and public parts disagree");
        EVP_PKEY_free(k);
        k = NULL;
    }
    ERR_pop_to_mark();
    return k;
}

size_t ca_key_to_pem(const EVP_PKEY *k, char *out, size_t cap)
{
    BIO *b;
    size_t n = 0;

    ERR_set_mark();
    b = BIO_new(BIO_s_mem());
    if (b != NULL && k != NULL && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL))
        n = ca_bio_copy(b, out, cap);
    BIO_free(b);
    ERR_pop_to_mark();
    return n;
}
