/*
 * leaf.c - the certificate egressd presents for one host, under a
 * sandbox's CA.
 */
#include <string.h>

#include <openssl/err.h>

#include "ca_int.h"

enum {
    CN_MAX = 64,         /* ub-common-name (RFC 5280 appendix A) */
    LEAF_BACKDATE = 300, /* not_before = now - this, for clocks a little behind */
};

static bool args_ok(const struct ca_authority *a, const char *host, EVP_PKEY *leaf_key, int64_t now,
                    int64_t validity_s, char *err, size_t errlen)
{
    enum ca_name_error e;

    if (a == NULL || host == NULL) {
        ca_err(err, errlen, "ca_leaf_mint: no %s", a == NULL ? "authority" : "host");
        return false;
    }
    e = ca_name_check(host, strlen(host));
    if (e != CA_NAME_OK) {
        ca_err(err, errlen, "ca_leaf_mint: host \"%.64s\": %s", host, ca_name_error_str(e));
        return false;
    }
    if (!ca_authority_permits(a, host)) {
        ca_err(err, errlen, "ca_leaf_mint: host \"%.253s\" is outside the CA's name constraints",
               host);
        return false;
    }
    if (!ca_key_check(leaf_key, false, "ca_leaf_mint: leaf_key", err, errlen))
        return false;
    if (!ca_cert_times_ok("ca_leaf_mint", now, validity_s, err, errlen))
        return false;
    if (ASN1_TIME_cmp_time_t(X509_get0_notAfter(ca_authority_cert(a)), (time_t)now) <= 0) {
        ca_err(err, errlen, "ca_leaf_mint: the CA is no longer valid at now %lld", (long long)now);
        return false;
    }
    return true;
}

/* Issuer, and subject CN=host when it fits (RFC 5280 §4.1.2.6: an empty
 * subject then, and the subjectAltName critical). */
static bool names_set(X509 *x, const X509 *ca, const char *host, char *err, size_t errlen)
{
    bool ok = X509_set_issuer_name(x, X509_get_subject_name(ca));

    if (ok && strlen(host) <= CN_MAX)
        ok = X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                                        (const unsigned char *)host, -1, -1, 0) == 1;
    if (!ok)
        ca_err_ssl(err, errlen, "ca_leaf_mint: cannot write the names");
    return ok;
}

/* A leaf never outlives its CA: a chain is only as good as its shortest. */
static bool clamp_to_ca(X509 *x, const X509 *ca, char *err, size_t errlen)
{
    const ASN1_TIME *end = X509_get0_notAfter(ca);

    if (ASN1_TIME_compare(X509_get0_notAfter(x), end) > 0 && !X509_set1_notAfter(x, end)) {
        ca_err_ssl(err, errlen, "ca_leaf_mint: cannot write notAfter");
        return false;
    }
    return true;
}

static X509 *leaf_make(const struct ca_authority *a, const char *host, EVP_PKEY *leaf_key,
                       int64_t now, int64_t validity_s, char *err, size_t errlen)
{
    X509 *ca, *x;
    GENERAL_NAMES *san;
    bool ok;

    if (!args_ok(a, host, leaf_key, now, validity_s, err, errlen))
        return NULL;
    ca = ca_authority_cert(a);
    x = ca_cert_start(leaf_key, now - LEAF_BACKDATE, now + validity_s, err, errlen);
    if (x == NULL)
        return NULL;
    san = ca_san_dns(host);
    ok = clamp_to_ca(x, ca, err, errlen) && names_set(x, ca, host, err, errlen) &&
         ca_cert_usage(x, false, KU_DIGITAL_SIGNATURE, err, errlen) &&
         ca_cert_key_ids(x, X509_get0_subject_key_id(ca), err, errlen) &&
         ca_cert_add(x, NID_subject_alt_name, san, strlen(host) > CN_MAX, err, errlen) &&
         ca_cert_sign(x, ca_authority_key(a), err, errlen);
    GENERAL_NAMES_free(san);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

X509 *ca_leaf_mint(const struct ca_authority *a, const char *host, EVP_PKEY *leaf_key, int64_t now,
                   int64_t validity_s, char *err, size_t errlen)
{
    X509 *x;

    ERR_set_mark();
    x = leaf_make(a, host, leaf_key, now, validity_s, err, errlen);
    ERR_pop_to_mark();
    return x;
}
