/*
 * ca_int.h - what the files of ca/ share; not part of the interface.
 */
#ifndef CA_CA_INT_H
#define CA_CA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "ca.h"

/* ---- err.c: the caller's error buffer ------------------------------------ */

/* Write the formatted message into err (if err and errlen), truncating. */
__attribute__((format(printf, 3, 4))) void ca_err(char *err, size_t errlen, const char *fmt, ...);

/* Like ca_err(), then " (OpenSSL: <library>: <reason>)" of the newest error
 * on the thread's queue, when there is one. */
__attribute__((format(printf, 3, 4))) void ca_err_ssl(char *err, size_t errlen, const char *fmt,
                                                      ...);

/* ---- name.c: DNS names and the rules that name them ---------------------- */

/* Why a string is not a host name in the form policy/ normalizes hosts to. */
enum ca_name_error {
    CA_NAME_OK,
    CA_NAME_EMPTY,       /* no bytes */
    CA_NAME_TOO_LONG,    /* over CA_HOST_MAX bytes */
    CA_NAME_LABEL_EMPTY, /* a leading or trailing dot, or two in a row */
    CA_NAME_LABEL_LONG,  /* a label over 63 bytes (RFC 1035 §2.3.4) */
    CA_NAME_UPPER,       /* an upper-case letter: names come lower-cased */
    CA_NAME_BYTE,        /* a byte other than a-z, 0-9, '-' and '.' */
    CA_NAME_HYPHEN,      /* a label starting or ending with '-' */
    CA_NAME_IP,          /* a ':' (IPv6), or a last label all digits (IPv4): not a name */
};

/* Check s[0..len) is a DNS host name: LDH labels (RFC 1123 §2.1), lower case. */
enum ca_name_error ca_name_check(const char *s, size_t len);

/* Static English text for e. */
const char *ca_name_error_str(enum ca_name_error e);

/* True if a[0..alen) is b[0..blen) or a name under it (a label boundary). */
bool ca_name_at_or_under(const char *a, size_t alen, const char *b, size_t blen);

/* True if a[0..alen) is a name strictly under b[0..blen). */
bool ca_name_under(const char *a, size_t alen, const char *b, size_t blen);

/* What one of ca_authority_new()'s names permits. */
enum ca_rule_kind {
    CA_RULE_HOST,       /* "h": h only */
    CA_RULE_SUBDOMAINS, /* "*.d": names strictly under d */
    CA_RULE_DOMAIN,     /* ".d": d and the names under it */
};

struct ca_rule {
    enum ca_rule_kind kind;
    const char *name; /* h or d: a view into the caller's string */
    size_t len;
};

/* Parse text, names[index] of ca_authority_new(), into r.  Returns false
 * with err naming the entry and what is wrong with it. */
bool ca_rule_parse(const char *text, size_t index, struct ca_rule *r, char *err, size_t errlen);

/* ---- constraints.c: rules -> the nameConstraints extension -------------- */

/* The nameConstraints value that permits what r[0..n) name and nothing
 * else (README.md: the mapping).  NULL only on allocation failure. */
NAME_CONSTRAINTS *ca_constraints_make(const struct ca_rule *r, size_t n);

/* ---- key.c ---------------------------------------------------------------- */

/* Check k is an EC key on the named curve P-256 (and holds its private
 * part when need_private).  Returns false with err, prefixed by what. */
bool ca_key_check(const EVP_PKEY *k, bool need_private, const char *what, char *err, size_t errlen);

/* ---- cert.c: the parts common to the CA and the leaves ------------------- */

/* A new v3 certificate with a 128-bit random serial, valid from not_before
 * to not_after, carrying pub.  NULL with err on failure. */
X509 *ca_cert_start(EVP_PKEY *pub, int64_t not_before, int64_t not_after, char *err, size_t errlen);

/* Add extension nid with value (an OpenSSL extension structure), critical or
 * not.  False with err on failure. */
bool ca_cert_add(X509 *x, int nid, void *value, bool critical, char *err, size_t errlen);

/* Add basicConstraints (critical; CA:TRUE pathlen:0 when ca, else CA:FALSE),
 * keyUsage (critical, the KU_* bits in ku) and extendedKeyUsage serverAuth. */
bool ca_cert_usage(X509 *x, bool ca, unsigned ku, char *err, size_t errlen);

/* Add the subject key identifier (SHA-1 of x's public key bit string, RFC
 * 5280 §4.2.1.2 method 1) and the authority key identifier issuer_kid, or
 * x's own identifier when issuer_kid is NULL (self-signed). */
bool ca_cert_key_ids(X509 *x, const ASN1_OCTET_STRING *issuer_kid, char *err, size_t errlen);

/* Check 1 <= validity_s <= CA_VALIDITY_MAX and now in a range whose sums
 * cannot overflow.  False with err naming the function. */
bool ca_cert_times_ok(const char *fn, int64_t now, int64_t validity_s, char *err, size_t errlen);

/* Sign x with key (ecdsa-with-SHA256) and fill OpenSSL's cache of its
 * extensions, so that a const X509 is never written to later.  False with
 * err if signing fails or OpenSSL finds the extensions invalid. */
bool ca_cert_sign(X509 *x, EVP_PKEY *key, char *err, size_t errlen);

/* A GENERAL_NAME of type GEN_DNS (an IA5String) or GEN_IPADD (an OCTET
 * STRING) holding p[0..len).  NULL on allocation failure. */
GENERAL_NAME *ca_general_name(int type, const void *p, size_t len);

/* A subjectAltName value holding the one dNSName host.  NULL on failure. */
GENERAL_NAMES *ca_san_dns(const char *host);

/* Copy what BIO b holds and a NUL into out; its length, or 0 if over cap. */
size_t ca_bio_copy(BIO *b, char *out, size_t cap);

/* ---- authority.c: what leaf.c needs of an authority ---------------------- */

EVP_PKEY *ca_authority_key(const struct ca_authority *a);

#endif
