/*
 * authority.c - a sandbox's CA: its self-signed certificate, whose name
 * constraints permit the sandbox's bound hosts only, and the appliance key
 * that signs it and its leaves.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "ca_int.h"

enum {
    CN_MAX = 64,        /* ub-common-name (RFC 5280 appendix A) */
    ID_IN_CN = 45,      /* the longest id "egressd sandbox <id> CA" holds within CN_MAX */
    CA_BACKDATE = 3600, /* not_before = now - this: clocks a little behind still accept it */
};

struct ca_authority {
    X509 *cert;
    EVP_PKEY *key;        /* the appliance key: a reference of our own */
    NAME_CONSTRAINTS *nc; /* decoded from cert: what ca_authority_permits() tests */
};

static bool id_ok(const char *id)
{
    size_t len = id != NULL ? strlen(id) : 0;

    if (len == 0 || len > CA_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Check everything the caller gave and parse names into rules. */
static bool args_ok(EVP_PKEY *key, const char *id, const char *const *names, size_t n,
                    struct ca_rule *rules, int64_t now, int64_t validity_s, char *err,
                    size_t errlen)
{
    if (!ca_key_check(key, true, "ca_authority_new: key", err, errlen))
        return false;
    if (!id_ok(id)) {
        ca_err(err, errlen, "ca_authority_new: id \"%.80s\" is not [A-Za-z0-9._-]{1,63}",
               id != NULL ? id : "(null)");
        return false;
    }
    if (names == NULL && n > 0) {
        ca_err(err, errlen, "ca_authority_new: names is NULL");
        return false;
    }
    if (n == 0 || n > CA_NAMES_MAX) {
        ca_err(err, errlen,
               "ca_authority_new: %zu names; a CA permits 1..%d (one that permits nothing is "
               "not made)",
               n, CA_NAMES_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!ca_rule_parse(names[i], i, &rules[i], err, errlen))
            return false;
    return ca_cert_times_ok("ca_authority_new", now, validity_s, err, errlen);
}

static bool name_add(X509_NAME *nm, const char *field, const char *value)
{
    return X509_NAME_add_entry_by_txt(nm, field, MBSTRING_UTF8, (const unsigned char *)value, -1,
                                      -1, 0) == 1;
}

/* "CN=egressd sandbox <id> CA, O=egressd", or for a long id
 * "CN=<id>, OU=egressd sandbox CA, O=egressd" (RFC 4514 order: the DER
 * sequence is O first).  Distinct ids give distinct subjects, so a leaf
 * chains only to the CA that issued it, although all share one key. */
static X509_NAME *subject_make(const char *id)
{
    char cn[CN_MAX + 1];
    X509_NAME *nm = X509_NAME_new();
    bool ok = nm != NULL && name_add(nm, "O", "egressd");

    if (strlen(id) <= ID_IN_CN) {
        snprintf(cn, sizeof cn, "egressd sandbox %s CA", id);
        ok = ok && name_add(nm, "CN", cn);
    } else {
        ok = ok && name_add(nm, "OU", "egressd sandbox CA") && name_add(nm, "CN", id);
    }
    if (!ok) {
        X509_NAME_free(nm);
        return NULL;
    }
    return nm;
}

/* Name x with subject nm as both subject and issuer (self-signed). */
static bool self_name(X509 *x, X509_NAME *nm, char *err, size_t errlen)
{
    if (nm == NULL || !X509_set_subject_name(x, nm) || !X509_set_issuer_name(x, nm)) {
        ca_err_ssl(err, errlen, "ca_authority_new: cannot write the subject");
        return false;
    }
    return true;
}

static X509 *cert_make(EVP_PKEY *key, const char *id, const struct ca_rule *rules, size_t n,
                       int64_t now, int64_t validity_s, char *err, size_t errlen)
{
    X509 *x = ca_cert_start(key, now - CA_BACKDATE, now + validity_s, err, errlen);
    X509_NAME *nm = x != NULL ? subject_make(id) : NULL;
    NAME_CONSTRAINTS *nc = x != NULL ? ca_constraints_make(rules, n) : NULL;
    bool ok = x != NULL && self_name(x, nm, err, errlen) &&
              ca_cert_usage(x, true, KU_KEY_CERT_SIGN | KU_CRL_SIGN, err, errlen) &&
              ca_cert_key_ids(x, NULL, err, errlen) &&
              ca_cert_add(x, NID_name_constraints, nc, true, err, errlen) &&
              ca_cert_sign(x, key, err, errlen);

    X509_NAME_free(nm);
    NAME_CONSTRAINTS_free(nc);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

/* Wrap x (consumed) with a reference to key and its decoded constraints. */
static struct ca_authority *authority_wrap(X509 *x, EVP_PKEY *key, char *err, size_t errlen)
{
    struct ca_authority *a = calloc(1, sizeof *a);

    if (a != NULL)
        a->nc = X509_get_ext_d2i(x, NID_name_constraints, NULL, NULL);
    if (a == NULL || a->nc == NULL || !EVP_PKEY_up_ref(key)) {
        ca_err_ssl(err, errlen, "ca_authority_new: %s",
                   a == NULL       ? "out of memory"
                   : a->nc == NULL ? "cannot read the certificate's own nameConstraints back"
                                   : "cannot take a reference to the key");
        if (a != NULL)
            NAME_CONSTRAINTS_free(a->nc);
        free(a);
        X509_free(x);
        return NULL;
    }
    a->cert = x;
    a->key = key;
    return a;
}

static struct ca_authority *authority_make(EVP_PKEY *key, const char *id, const char *const *names,
                                           size_t n, int64_t now, int64_t validity_s, char *err,
                                           size_t errlen)
{
    struct ca_rule rules[CA_NAMES_MAX];
    X509 *x;

    if (!args_ok(key, id, names, n, rules, now, validity_s, err, errlen))
        return NULL;
    x = cert_make(key, id, rules, n, now, validity_s, err, errlen);
    return x != NULL ? authority_wrap(x, key, err, errlen) : NULL;
}

struct ca_authority *ca_authority_new(EVP_PKEY *key, const char *id, const char *const *names,
                                      size_t n, int64_t now, int64_t validity_s, char *err,
                                      size_t errlen)
{
    struct ca_authority *a;

    ERR_set_mark();
    a = authority_make(key, id, names, n, now, validity_s, err, errlen);
    ERR_pop_to_mark();
    return a;
}

void ca_authority_free(struct ca_authority *a)
{
    if (a == NULL)
        return;
    NAME_CONSTRAINTS_free(a->nc);
    EVP_PKEY_free(a->key);
    X509_free(a->cert);
    free(a);
}

X509 *ca_authority_cert(const struct ca_authority *a)
{
    return a->cert;
}

EVP_PKEY *ca_authority_key(const struct ca_authority *a)
{
    return a->key;
}

size_t ca_authority_pem(const struct ca_authority *a, char *out, size_t cap)
{
    return ca_cert_to_pem(a->cert, out, cap);
}

/* NAME_CONSTRAINTS_check() judges a certificate: give it one that carries
 * host as its only name, as a leaf would (its commonName is the same name). */
static bool probe_permitted(NAME_CONSTRAINTS *nc, const char *host)
{
    X509 *probe = X509_new();
    GENERAL_NAMES *san = ca_san_dns(host);
    bool ok = probe != NULL && san != NULL &&
              X509_add1_ext_i2d(probe, NID_subject_alt_name, san, 0, X509V3_ADD_APPEND) == 1;

    /* Decode the extensions into the cache the check reads its names from. */
    ok = ok && (X509_get_extension_flags(probe) & EXFLAG_SET) != 0;
    ok = ok && NAME_CONSTRAINTS_check(probe, nc) == X509_V_OK;
    GENERAL_NAMES_free(san);
    X509_free(probe);
    return ok;
}

bool ca_authority_permits(const struct ca_authority *a, const char *host)
{
    bool ok;

    if (a == NULL || host == NULL || ca_name_check(host, strlen(host)) != CA_NAME_OK)
        return false;
    ERR_set_mark();
    ok = probe_permitted(a->nc, host);
    ERR_pop_to_mark();
    return ok;
}
