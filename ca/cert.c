/*
 * cert.c - what the CA certificate and the leaves have in common: version,
 * serial, validity, key usages, key identifiers, the signature, PEM.
 */
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "ca_int.h"

enum { SERIAL_BYTES = 16 }; /* 128 random bits: unguessable, within RFC 5280's 20 octets */

/* The latest now: 9999-12-31T23:59:59Z, the last time X.509 can write,
 * less the longest validity. */
#define TIME_MAX (INT64_C(253402300799) - CA_VALIDITY_MAX)

/* A positive random serial (RFC 5280 §4.1.2.2): 128 bits read as an
 * unsigned number, so DER may add a 0x00 octet; never zero. */
static bool serial_set(X509 *x)
{
    unsigned char r[SERIAL_BYTES];
    BIGNUM *bn = NULL;
    bool ok;

    ok = RAND_bytes(r, sizeof r) == 1 && (bn = BN_bin2bn(r, sizeof r, NULL)) != NULL;
    if (ok && BN_is_zero(bn))
        ok = BN_one(bn);
    ok = ok && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    return ok;
}

bool ca_cert_times_ok(const char *fn, int64_t now, int64_t validity_s, char *err, size_t errlen)
{
    if (validity_s < 1 || validity_s > CA_VALIDITY_MAX) {
        ca_err(err, errlen, "%s: validity_s %lld is not within 1..%d seconds", fn,
               (long long)validity_s, CA_VALIDITY_MAX);
        return false;
    }
    if (now < 3600 || now > TIME_MAX) {
        ca_err(err, errlen, "%s: now %lld is not a time a certificate can start near", fn,
               (long long)now);
        return false;
    }
    return true;
}

X509 *ca_cert_start(EVP_PKEY *pub, int64_t not_before, int64_t not_after, char *err, size_t errlen)
{
    X509 *x = X509_new();

    if (x == NULL || !X509_set_version(x, X509_VERSION_3) || !serial_set(x) ||
        !ASN1_TIME_set(X509_getm_notBefore(x), (time_t)not_before) ||
        !ASN1_TIME_set(X509_getm_notAfter(x), (time_t)not_after) || !X509_set_pubkey(x, pub)) {
        ca_err_ssl(err, errlen, "ca: cannot start a certificate");
        X509_free(x);
        return NULL;
    }
    return x;
}

bool ca_cert_add(X509 *x, int nid, void *value, bool critical, char *err, size_t errlen)
{
    if (value == NULL || X509_add1_ext_i2d(x, nid, value, critical, X509V3_ADD_APPEND) != 1) {
        ca_err_ssl(err, errlen, "ca: cannot add the %s extension", OBJ_nid2sn(nid));
        return false;
    }
    return true;
}

static BASIC_CONSTRAINTS *basic_constraints(bool ca)
{
    BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();

    if (bc == NULL || !ca)
        return bc; /* CA:FALSE is the default: an empty SEQUENCE in DER */
    bc->ca = 0xff;
    bc->pathlen = ASN1_INTEGER_new();
    if (bc->pathlen == NULL || !ASN1_INTEGER_set(bc->pathlen, 0)) {
        BASIC_CONSTRAINTS_free(bc);
        return NULL;
    }
    return bc;
}

/* keyUsage from a mask of KU_* bits: BIT STRING bit n (0 digitalSignature
 * .. 7 encipherOnly) is mask bit 0x80 >> n; decipherOnly is not used. */
static ASN1_BIT_STRING *key_usage(unsigned ku)
{
    ASN1_BIT_STRING *bits = ASN1_BIT_STRING_new();

    for (int n = 0; bits != NULL && n < 8; n++) {
        if ((ku & (0x80u >> n)) && !ASN1_BIT_STRING_set_bit(bits, n, 1)) {
            ASN1_BIT_STRING_free(bits);
            return NULL;
        }
    }
    return bits;
}

static EXTENDED_KEY_USAGE *server_auth(void)
{
    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();

    if (eku != NULL && !sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth))) {
        sk_ASN1_OBJECT_free(eku);
        return NULL;
    }
    return eku;
}

bool ca_cert_usage(X509 *x, bool ca, unsigned ku, char *err, size_t errlen)
{
    BASIC_CONSTRAINTS *bc = basic_constraints(ca);
    ASN1_BIT_STRING *bits = key_usage(ku);
    EXTENDED_KEY_USAGE *eku = server_auth();
    bool ok = ca_cert_add(x, NID_basic_constraints, bc, true, err, errlen) &&
              ca_cert_add(x, NID_key_usage, bits, true, err, errlen) &&
              ca_cert_add(x, NID_ext_key_usage, eku, false, err, errlen);

    BASIC_CONSTRAINTS_free(bc);
    ASN1_BIT_STRING_free(bits);
    sk_ASN1_OBJECT_free(eku); /* OBJ_nid2obj's objects are static */
    return ok;
}

/* SHA-1 of x's subjectPublicKey BIT STRING (RFC 5280 §4.2.1.2, method 1). */
static ASN1_OCTET_STRING *key_id(X509 *x)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len;
    ASN1_OCTET_STRING *id = ASN1_OCTET_STRING_new();

    if (id == NULL || !X509_pubkey_digest(x, EVP_sha1(), md, &len) ||
        !ASN1_OCTET_STRING_set(id, md, (int)len)) {
        ASN1_OCTET_STRING_free(id);
        return NULL;
    }
    return id;
}

bool ca_cert_key_ids(X509 *x, const ASN1_OCTET_STRING *issuer_kid, char *err, size_t errlen)
{
    ASN1_OCTET_STRING *ski = key_id(x);
    AUTHORITY_KEYID *aki = AUTHORITY_KEYID_new();
    bool ok;

    if (aki != NULL && ski != NULL)
        aki->keyid = ASN1_OCTET_STRING_dup(issuer_kid != NULL ? issuer_kid : ski);
    if (aki != NULL && aki->keyid == NULL) {
        AUTHORITY_KEYID_free(aki);
        aki = NULL;
    }
    ok = ca_cert_add(x, NID_subject_key_identifier, ski, false, err, errlen) &&
         ca_cert_add(x, NID_authority_key_identifier, aki, false, err, errlen);
    ASN1_OCTET_STRING_free(ski);
    AUTHORITY_KEYID_free(aki);
    return ok;
}

bool ca_cert_sign(X509 *x, EVP_PKEY *key, char *err, size_t errlen)
{
    if (X509_sign(x, key, EVP_sha256()) <= 0) {
        ca_err_ssl(err, errlen, "ca: cannot sign the certificate");
        return false;
    }
    if (X509_get_extension_flags(x) & EXFLAG_INVALID) {
        ca_err_ssl(err, errlen, "ca: OpenSSL finds the certificate's extensions invalid");
        return false;
    }
    return true;
}

GENERAL_NAME *ca_general_name(int type, const void *p, size_t len)
{
    GENERAL_NAME *g = GENERAL_NAME_new();
    ASN1_STRING *s = type == GEN_DNS ? ASN1_IA5STRING_new() : ASN1_OCTET_STRING_new();

    if (g == NULL || s == NULL || !ASN1_STRING_set(s, p, (int)len)) {
        GENERAL_NAME_free(g);
        ASN1_STRING_free(s);
        return NULL;
    }
    GENERAL_NAME_set0_value(g, type, s);
    return g;
}

GENERAL_NAMES *ca_san_dns(const char *host)
{
    GENERAL_NAMES *san = sk_GENERAL_NAME_new_null();
    GENERAL_NAME *g = ca_general_name(GEN_DNS, host, strlen(host));

    if (san == NULL || g == NULL || !sk_GENERAL_NAME_push(san, g)) {
        GENERAL_NAME_free(g);
        GENERAL_NAMES_free(san);
        return NULL;
    }
    return san;
}

size_t ca_bio_copy(BIO *b, char *out, size_t cap)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);

    if (n <= 0 || out == NULL || (size_t)n >= cap)
        return 0;
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    return (size_t)n;
}

size_t ca_cert_to_pem(X509 *x, char *out, size_t cap)
{
    BIO *b;
    size_t n = 0;

    ERR_set_mark();
    b = BIO_new(BIO_s_mem());
    if (b != NULL && x != NULL && PEM_write_bio_X509(b, x))
        n = ca_bio_copy(b, out, cap);
    BIO_free(b);
    ERR_pop_to_mark();
    return n;
}
