/*
 * test_ca.c - the sandbox CA module (ca/ca.h).
 *
 * The property that matters: a sandbox trusting its CA accepts the leaves
 * egressd mints for the bound hosts and nothing else, even a leaf made by
 * someone holding the appliance key.  Every verdict here is OpenSSL's
 * X509_verify_cert() against a store holding only the CA, with
 * X509_V_FLAG_X509_STRICT (what Python 3.13 turns on by default), the TLS
 * server purpose and the host name set, as a client would.  Leaves outside
 * the constraints are forged by hand (forge.c) and must fail with a
 * name-constraint error, while the same leaves pass under a copy of the CA
 * stripped of its constraints: the constraints, and only they, refuse them.
 *
 * Also: the appliance key's PEM round trip and every key refused; every
 * argument ca_authority_new() refuses; the CA's and the leaves' fields one
 * by one; ca_authority_permits() against the verifier and against a table
 * written by hand; sandboxes sharing the key but not their leaves; names
 * and ids at their limits; the PEM size bounds; OpenSSL's error queue left
 * clean.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ca.h"
#include "forge.h"
#include "tap.h"

enum {
    DAY = 86400,
    ERRLEN = 256,
    CA_DAYS = 30,
    LEAF_DAYS = 7,
};

static int64_t now;
static char err[ERRLEN];
static EVP_PKEY *ca_key;   /* the appliance key */
static EVP_PKEY *leaf_key; /* the leaves' shared key */

/* The test CA: one rule of each kind. */
static const char *const names3[] = {"api.anthropic.com", ".github.com", "*.githubusercontent.com"};

/* ---- helpers ----------------------------------------------------------- */

static bool has(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

/* a's certificate, or NULL when a could not be made (the checks then fail). */
static X509 *cert_of(const struct ca_authority *a)
{
    return a != NULL ? ca_authority_cert(a) : NULL;
}

/* What a client of the sandbox decides: X509_V_OK or the verifier's error. */
static int verify_at(X509 *ca, X509 *leaf, const char *name, int64_t at)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int rc = -1;

    if (st != NULL && ctx != NULL && ca != NULL && leaf != NULL && X509_STORE_add_cert(st, ca) &&
        X509_STORE_CTX_init(ctx, st, leaf, NULL)) {
        X509_VERIFY_PARAM *p = X509_STORE_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_X509_STRICT);
        X509_VERIFY_PARAM_set_time(p, (time_t)at);
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
        if (forge_is_ip(name))
            X509_VERIFY_PARAM_set1_ip_asc(p, name);
        else
            X509_VERIFY_PARAM_set1_host(p, name, 0);
        rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    ERR_clear_error();
    return rc;
}

static int verify(X509 *ca, X509 *leaf, const char *name)
{
    return verify_at(ca, leaf, name, now);
}

static const char *verr(int rc)
{
    return rc < 0 ? "(no verdict)" : X509_verify_cert_error_string(rc);
}

static bool nc_violation(int rc)
{
    return rc == X509_V_ERR_PERMITTED_VIOLATION || rc == X509_V_ERR_EXCLUDED_VIOLATION;
}

static struct ca_authority *authority(const char *id, const char *const *names, size_t n)
{
    struct ca_authority *a =
        ca_authority_new(ca_key, id, names, n, now, (int64_t)CA_DAYS * DAY, err, sizeof err);

    if (a == NULL)
        diag("ca_authority_new(%s): %s", id, err);
    return a;
}

static X509 *mint(const struct ca_authority *a, const char *host)
{
    return ca_leaf_mint(a, host, leaf_key, now, (int64_t)LEAF_DAYS * DAY, err, sizeof err);
}

static char *pem_of_key(EVP_PKEY *k, const EVP_CIPHER *enc, bool traditional, size_t *len)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p, *out;
    long n;
    int ok = traditional ? PEM_write_bio_PrivateKey_traditional(b, k, NULL, NULL, 0, NULL, NULL)
             : enc != NULL
                 ? PEM_write_bio_PrivateKey(b, k, enc, (unsigned char *)"pw", 2, NULL, NULL)
                 : PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);

    n = ok ? BIO_get_mem_data(b, &p) : 0;
    out = malloc((size_t)n + 1);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    *len = (size_t)n;
    BIO_free(b);
    return out;
}

/* The RFC 2253 text of a name, e.g. "CN=x,O=y". */
static void name_text(const X509_NAME *nm, char *out, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *p;
    long n;

    X509_NAME_print_ex(b, nm, 0, XN_FLAG_RFC2253);
    n = BIO_get_mem_data(b, &p);
    snprintf(out, cap, "%.*s", (int)n, p);
    BIO_free(b);
}

static bool ext_critical(X509 *x, int nid)
{
    int at = X509_get_ext_by_NID(x, nid, -1);

    return at >= 0 && X509_EXTENSION_get_critical(X509_get_ext(x, at)) == 1;
}

/* x's notBefore/notAfter equal to t. */
static bool time_is(const ASN1_TIME *a, int64_t t)
{
    return ASN1_TIME_cmp_time_t(a, (time_t)t) == 0;
}

static bool serial_ok(X509 *x)
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    bool ok = bn != NULL && !BN_is_negative(bn) && !BN_is_zero(bn) && BN_num_bits(bn) <= 128;

    BN_free(bn);
    return ok;
}

/* ---- the appliance key ------------------------------------------------- */

static void test_key_round_trip(void)
{
    char pem[CA_KEY_PEM_MAX], small[CA_KEY_PEM_MAX];
    size_t n = ca_key_to_pem(ca_key, pem, sizeof pem);
    EVP_PKEY *back;

    ok(n > 0 && strncmp(pem, "-----BEGIN PRIVATE KEY-----\n", 28) == 0 && pem[n] == '\0',
       "key: ca_key_to_pem writes PKCS#8 PEM (%zu bytes)", n);
    ok(ca_key_to_pem(ca_key, small, n) == 0, "key: no room for the NUL: 0");
    ok(ca_key_to_pem(ca_key, small, n + 1) == n, "key: exactly enough room: written");
    back = ca_key_from_pem(pem, n, err, sizeof err);
    ok(back != NULL && EVP_PKEY_eq(back, ca_key) == 1, "key: PEM round trip gives the same key");
    EVP_PKEY_free(back);

    size_t sec1_len;
    char *sec1 = pem_of_key(ca_key, NULL, true, &sec1_len);
    back = ca_key_from_pem(sec1, sec1_len, err, sizeof err);
    ok(has(sec1, "BEGIN EC PRIVATE KEY") && back != NULL && EVP_PKEY_eq(back, ca_key) == 1,
       "key: SEC1 \"EC PRIVATE KEY\" is read too");
    EVP_PKEY_free(back);
    free(sec1);
}

/* ca_key_from_pem(k's PEM) is refused with an error containing want. */
static void refuse_key(const char *what, const char *pem, size_t len, const char *want)
{
    EVP_PKEY *k;

    err[0] = '\0';
    k = ca_key_from_pem(pem, len, err, sizeof err);
    ok(k == NULL && has(err, want), "key: %s refused: %s", what, err);
    EVP_PKEY_free(k);
}

static void refuse_key_of(const char *what, EVP_PKEY *k, const EVP_CIPHER *enc, const char *want)
{
    size_t len;
    char *pem = pem_of_key(k, enc, false, &len);

    refuse_key(what, pem, len, want);
    free(pem);
}

/* A SEC1 PEM whose private part is k's and whose public part is other's:
 * ECPrivateKey (RFC 5915 §3) ends with the [1] BIT STRING of the
 * uncompressed point, 65 bytes for P-256. */
static char *mismatched_pem(EVP_PKEY *k, EVP_PKEY *other, size_t *len)
{
    unsigned char *a = NULL, *b = NULL;
    int alen = i2d_PrivateKey(k, &a), blen = i2d_PrivateKey(other, &b);
    BIO *bio = BIO_new(BIO_s_mem());
    char *p, *out;
    long n;

    memcpy(a + alen - 65, b + blen - 65, 65);
    PEM_write_bio(bio, "EC PRIVATE KEY", "", a, alen);
    n = BIO_get_mem_data(bio, &p);
    out = malloc((size_t)n + 1);
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
    *len = (size_t)n;
    OPENSSL_free(a);
    OPENSSL_free(b);
    BIO_free(bio);
    return out;
}

static void test_key_refusals(void)
{
    EVP_PKEY *rsa = EVP_RSA_gen(2048);
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    EVP_PKEY *ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    EVP_PKEY *expl = EVP_PKEY_dup(ca_key);
    static const char garbage[] = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n"
                                  "-----END PRIVATE KEY-----\n";

    refuse_key_of("RSA", rsa, NULL, "the key is RSA, not EC P-256");
    refuse_key_of("P-384", p384, NULL, "EC on secp384r1, not P-256");
    refuse_key_of("Ed25519", ed, NULL, "ED25519, not EC P-256");
    refuse_key_of("encrypted", ca_key, EVP_aes_128_cbc(), "encrypted");
    EVP_PKEY_set_utf8_string_param(expl, "encoding", "explicit");
    refuse_key_of("explicit curve parameters", expl, NULL, "explicit curve parameters");
    size_t mlen;
    char *mis = mismatched_pem(ca_key, leaf_key, &mlen);
    refuse_key("a private part that does not match its public part", mis, mlen,
               "the private and public parts disagree");
    free(mis);
    refuse_key("garbage", "hello, world\n", 13, "no PEM private key");
    refuse_key("a broken PEM body", garbage, sizeof garbage - 1, "no PEM private key");
    refuse_key("nothing", "", 0, "no PEM private key");
    refuse_key("NULL", NULL, 0, "no PEM");

    BIO *b = BIO_new(BIO_s_mem());
    char *p, out[CA_KEY_PEM_MAX];
    PEM_write_bio_PUBKEY(b, ca_key);
    long n = BIO_get_mem_data(b, &p);
    refuse_key("a public key", p, (size_t)n, "no PEM private key");
    EVP_PKEY *pub = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
    ok(pub != NULL && ca_key_to_pem(pub, out, sizeof out) == 0,
       "key: ca_key_to_pem of a public key: 0");
    BIO_free(b);

    ok(ERR_peek_error() == 0, "key: OpenSSL's error queue is left empty");
    EVP_PKEY_free(pub);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(p384);
    EVP_PKEY_free(ed);
    EVP_PKEY_free(expl);
}

/* ---- ca_authority_new's refusals ---------------------------------------- */

static void refuse_ca(const char *what, EVP_PKEY *key, const char *id, const char *const *names,
                      size_t n, int64_t validity, const char *want)
{
    struct ca_authority *a;

    err[0] = '\0';
    a = ca_authority_new(key, id, names, n, now, validity, err, sizeof err);
    ok(a == NULL && has(err, want), "new: %s refused: %s", what, err);
    ca_authority_free(a);
}

static void refuse_name(const char *name, const char *want)
{
    const char *names[] = {"fine.example", name};
    char what[300];

    snprintf(what, sizeof what, "name \"%s\"", name);
    refuse_ca(what, ca_key, "s", names, 2, DAY, want);
}

static void test_new_refusals(void)
{
    static const char *const one[] = {"api.anthropic.com"};
    const char *many[CA_NAMES_MAX + 1];
    char id64[65];
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    EVP_PKEY *pub = EVP_PKEY_new();
    unsigned char *der = NULL;
    const unsigned char *q;
    int dlen = i2d_PUBKEY(ca_key, &der);

    q = der;
    EVP_PKEY_free(pub);
    pub = d2i_PUBKEY(NULL, &q, dlen);
    OPENSSL_free(der);
    for (size_t i = 0; i <= CA_NAMES_MAX; i++)
        many[i] = "api.anthropic.com";
    memset(id64, 'a', 64);
    id64[64] = '\0';

    refuse_ca("n == 0", ca_key, "s", one, 0, DAY, "one that permits nothing is not made");
    refuse_ca("names NULL", ca_key, "s", NULL, 1, DAY, "ca_authority_new: names is NULL");
    refuse_ca("65 names", ca_key, "s", many, CA_NAMES_MAX + 1, DAY, "65 names");
    refuse_ca("no key", NULL, "s", one, 1, DAY, "ca_authority_new: key: no key");
    refuse_ca("a P-384 key", p384, "s", one, 1, DAY, "not P-256");
    refuse_ca("a public key", pub, "s", one, 1, DAY, "without its private part");
    refuse_ca("empty id", ca_key, "", one, 1, DAY, "id \"\"");
    refuse_ca("NULL id", ca_key, NULL, one, 1, DAY, "id \"(null)\"");
    refuse_ca("id with a space", ca_key, "a b", one, 1, DAY, "is not [A-Za-z0-9._-]{1,63}");
    refuse_ca("id with a slash", ca_key, "a/b", one, 1, DAY, "is not [A-Za-z0-9._-]{1,63}");
    refuse_ca("id of 64 bytes", ca_key, id64, one, 1, DAY, "is not [A-Za-z0-9._-]{1,63}");
    refuse_ca("validity 0", ca_key, "s", one, 1, 0, "validity_s 0 is not within");
    refuse_ca("validity past the maximum", ca_key, "s", one, 1, (int64_t)CA_VALIDITY_MAX + 1,
              "validity_s");

    refuse_name("*", "names[1] \"*\": the catch-all rule names no domain");
    refuse_name("~[a-z]+\\.example", "names[1] \"~[a-z]+\\.example\": a regex rule");
    refuse_name("API.anthropic.com", "names[1] \"API.anthropic.com\": upper case");
    refuse_name("127.0.0.1", "an IP address");
    refuse_name("::1", "an IP address");
    refuse_name("*.10.0.0.1", "an IP address");
    refuse_name("a..example", "an empty label");
    refuse_name("example.", "an empty label");
    refuse_name("", "empty");
    refuse_name(".", "empty");
    refuse_name("*.", "empty");
    refuse_name("*.*.example", "a byte other than");
    refuse_name("a_b.example", "a byte other than");
    refuse_name("-a.example", "starts or ends with '-'");
    refuse_name("x.*.example", "a byte other than");
    refuse_name("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example",
                "a label longer than 63");
    const char *with_null[] = {"fine.example", NULL};
    refuse_ca("a NULL name", ca_key, "s", with_null, 2, DAY, "names[1] is NULL");

    ok(ERR_peek_error() == 0, "new: OpenSSL's error queue is left empty");
    EVP_PKEY_free(p384);
    EVP_PKEY_free(pub);
}

/* ---- the CA's shape ----------------------------------------------------- */

/* The text of one GeneralName of a subtree: a dNSName, or "IP/<n bytes>". */
static void subtree_text(GENERAL_SUBTREE *t, char *out, size_t cap)
{
    const ASN1_STRING *s = t->base->d.ia5;

    if (t->base->type == GEN_DNS)
        snprintf(out, cap, "%.*s", ASN1_STRING_length(s), ASN1_STRING_get0_data(s));
    else if (t->base->type == GEN_IPADD) {
        bool zero = true;
        for (int i = 0; i < ASN1_STRING_length(s); i++)
            zero = zero && ASN1_STRING_get0_data(s)[i] == 0;
        snprintf(out, cap, "IP/%d%s", ASN1_STRING_length(s), zero ? " zero" : "");
    } else
        snprintf(out, cap, "type %d", t->base->type);
}

/* All the subtrees of sk, joined by spaces. */
static void subtrees_text(STACK_OF(GENERAL_SUBTREE) * sk, char *out, size_t cap)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < sk_GENERAL_SUBTREE_num(sk) && used < cap; i++) {
        char one[300];
        subtree_text(sk_GENERAL_SUBTREE_value(sk, i), one, sizeof one);
        used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? " " : "", one);
    }
}

/* The CA's constraints as "permitted | excluded". */
static void constraints_text(X509 *ca, char *out, size_t cap)
{
    NAME_CONSTRAINTS *nc = X509_get_ext_d2i(ca, NID_name_constraints, NULL, NULL);
    char p[1024], e[1024];

    if (nc == NULL) {
        snprintf(out, cap, "(none)");
        return;
    }
    subtrees_text(nc->permittedSubtrees, p, sizeof p);
    subtrees_text(nc->excludedSubtrees, e, sizeof e);
    snprintf(out, cap, "%s | %s", p, e);
    NAME_CONSTRAINTS_free(nc);
}

static void test_ca_shape(const struct ca_authority *a)
{
    X509 *ca = ca_authority_cert(a);
    char text[4096];
    int crit = -1;
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(ca, NID_basic_constraints, &crit, NULL);
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(ca);
    const ASN1_OCTET_STRING *akid = X509_get0_authority_key_id(ca);

    name_text(X509_get_subject_name(ca), text, sizeof text);
    ok(strcmp(text, "CN=egressd sandbox sbx-1 CA,O=egressd") == 0, "ca: subject %s", text);
    ok(X509_NAME_cmp(X509_get_subject_name(ca), X509_get_issuer_name(ca)) == 0,
       "ca: issuer is the subject");
    ok(X509_get_version(ca) == X509_VERSION_3, "ca: v3");
    ok(X509_verify(ca, ca_key) == 1, "ca: signed by the appliance key");
    ok(EVP_PKEY_eq(X509_get0_pubkey(ca), ca_key) == 1, "ca: carries the appliance public key");
    ok(X509_get_signature_nid(ca) == NID_ecdsa_with_SHA256, "ca: ecdsa-with-SHA256");
    ok(serial_ok(ca), "ca: serial positive, nonzero, at most 128 bits");
    ok(time_is(X509_get0_notBefore(ca), now - 3600), "ca: notBefore is now - 3600");
    ok(time_is(X509_get0_notAfter(ca), now + (int64_t)CA_DAYS * DAY),
       "ca: notAfter is now + validity_s");
    ok(bc != NULL && bc->ca && bc->pathlen != NULL && ASN1_INTEGER_get(bc->pathlen) == 0 &&
           crit == 1,
       "ca: basicConstraints critical CA:TRUE pathlen:0");
    ok(X509_check_ca(ca) == 1, "ca: OpenSSL sees a CA");
    ok(X509_get_key_usage(ca) == (KU_KEY_CERT_SIGN | KU_CRL_SIGN) &&
           ext_critical(ca, NID_key_usage),
       "ca: keyUsage critical keyCertSign cRLSign");
    ok(X509_get_extended_key_usage(ca) == XKU_SSL_SERVER, "ca: extendedKeyUsage serverAuth");
    ok(ski != NULL && ASN1_STRING_length(ski) == 20 &&
           !ext_critical(ca, NID_subject_key_identifier),
       "ca: subjectKeyIdentifier (SHA-1, not critical)");
    ok(akid != NULL && ASN1_OCTET_STRING_cmp(akid, ski) == 0, "ca: authorityKeyIdentifier = SKI");
    ok(ext_critical(ca, NID_name_constraints), "ca: nameConstraints critical");
    constraints_text(ca, text, sizeof text);
    ok(strcmp(text, "api.anthropic.com github.com .githubusercontent.com | .api.anthropic.com "
                    "IP/8 zero IP/32 zero") == 0,
       "ca: constraints %s", text);
    ok(X509_get_ext_count(ca) == 6, "ca: six extensions, nothing else");
    BASIC_CONSTRAINTS_free(bc);

    char pem[CA_PEM_MAX];
    size_t n = ca_authority_pem(a, pem, sizeof pem);
    BIO *b = BIO_new_mem_buf(pem, (int)n);
    X509 *back = PEM_read_bio_X509(b, NULL, NULL, NULL);
    ok(n > 0 && strncmp(pem, "-----BEGIN CERTIFICATE-----\n", 28) == 0 && back != NULL &&
           X509_cmp(back, ca) == 0,
       "ca: ca_authority_pem reads back as the same certificate");
    ok(ca_authority_pem(a, pem, n) == 0 && ca_authority_pem(a, pem, n + 1) == n,
       "ca: ca_authority_pem needs length + 1 bytes");
    X509_free(back);
    BIO_free(b);

    struct ca_authority *other = authority("sbx-1", names3, 3);
    ok(other != NULL && ASN1_INTEGER_cmp(X509_get0_serialNumber(ca),
                                         X509_get0_serialNumber(ca_authority_cert(other))) != 0,
       "ca: two CAs get different serials");
    ca_authority_free(other);
}

/* ---- leaves ------------------------------------------------------------- */

static void test_leaf_shape(const struct ca_authority *a)
{
    X509 *ca = ca_authority_cert(a);
    X509 *x = mint(a, "api.anthropic.com");
    X509 *y = mint(a, "api.anthropic.com");
    char text[512];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int crit = -1;

    if (!ok(x != NULL && y != NULL, "leaf: minted for api.anthropic.com")) {
        diag("%s", err);
        return;
    }
    BASIC_CONSTRAINTS *bc = X509_get_ext_d2i(x, NID_basic_constraints, &crit, NULL);
    GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    GENERAL_NAME *g = sk_GENERAL_NAME_num(san) == 1 ? sk_GENERAL_NAME_value(san, 0) : NULL;

    name_text(X509_get_subject_name(x), text, sizeof text);
    ok(strcmp(text, "CN=api.anthropic.com") == 0, "leaf: subject %s", text);
    ok(X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca)) == 0,
       "leaf: issuer is the CA's subject");
    ok(X509_get_version(x) == X509_VERSION_3, "leaf: v3");
    ok(X509_verify(x, ca_key) == 1 && X509_get_signature_nid(x) == NID_ecdsa_with_SHA256,
       "leaf: signed ecdsa-with-SHA256 by the appliance key");
    ok(EVP_PKEY_eq(X509_get0_pubkey(x), leaf_key) == 1, "leaf: carries leaf_key");
    ok(serial_ok(x) && ASN1_INTEGER_cmp(X509_get0_serialNumber(x), X509_get0_serialNumber(y)),
       "leaf: serial positive, at most 128 bits, different each time");
    ok(time_is(X509_get0_notBefore(x), now - 300) &&
           time_is(X509_get0_notAfter(x), now + (int64_t)LEAF_DAYS * DAY),
       "leaf: valid from now - 300 to now + validity_s");
    ok(g != NULL && g->type == GEN_DNS && ASN1_STRING_length(g->d.dNSName) == 17 &&
           memcmp(ASN1_STRING_get0_data(g->d.dNSName), "api.anthropic.com", 17) == 0 &&
           !ext_critical(x, NID_subject_alt_name),
       "leaf: subjectAltName the one dNSName, not critical");
    ok(bc != NULL && !bc->ca && bc->pathlen == NULL && crit == 1 && X509_check_ca(x) == 0,
       "leaf: basicConstraints critical CA:FALSE");
    ok(X509_get_key_usage(x) == KU_DIGITAL_SIGNATURE && ext_critical(x, NID_key_usage),
       "leaf: keyUsage critical digitalSignature");
    ok(X509_get_extended_key_usage(x) == XKU_SSL_SERVER, "leaf: extendedKeyUsage serverAuth");
    X509_pubkey_digest(x, EVP_sha1(), md, &mdlen);
    ok(X509_get0_subject_key_id(x) != NULL &&
           ASN1_STRING_length(X509_get0_subject_key_id(x)) == (int)mdlen &&
           memcmp(ASN1_STRING_get0_data(X509_get0_subject_key_id(x)), md, mdlen) == 0,
       "leaf: subjectKeyIdentifier = SHA-1 of its public key");
    ok(X509_get0_authority_key_id(x) != NULL &&
           ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x), X509_get0_subject_key_id(ca)) == 0,
       "leaf: authorityKeyIdentifier = the CA's SKI");
    ok(X509_get_ext_count(x) == 6, "leaf: six extensions, nothing else");
    ok(verify(ca, x, "github.com") == X509_V_ERR_HOSTNAME_MISMATCH,
       "leaf: the verifier checks the host (api.anthropic.com's leaf is not github.com's)");
    BASIC_CONSTRAINTS_free(bc);
    GENERAL_NAMES_free(san);
    X509_free(x);
    X509_free(y);
}

static void test_leaves_accepted(const struct ca_authority *a)
{
    static const char *const hosts[] = {"api.anthropic.com",
                                        "github.com",
                                        "www.github.com",
                                        "a.b.github.com",
                                        "raw.githubusercontent.com",
                                        "objects.githubusercontent.com"};
    char pem[CA_LEAF_PEM_MAX];

    for (size_t i = 0; i < sizeof hosts / sizeof *hosts; i++) {
        X509 *x = mint(a, hosts[i]);
        int rc = verify(ca_authority_cert(a), x, hosts[i]);
        ok(x != NULL && rc == X509_V_OK, "accept: %s: %s", hosts[i], x ? verr(rc) : err);
        ok(x != NULL && ca_cert_to_pem(x, pem, sizeof pem) > 0, "accept: %s: PEM", hosts[i]);
        X509_free(x);
    }
}

/* Hosts as long as they come: CN only up to 64 bytes, else an empty subject
 * and a critical subjectAltName (RFC 5280 §4.1.2.6). */
static void test_long_hosts(const struct ca_authority *a)
{
    char h64[65], h65[66], h253[254], pem[CA_LEAF_PEM_MAX];
    const char *tail = ".github.com"; /* 11 bytes */

    memset(h64, 'a', 64 - 11);
    strcpy(h64 + 64 - 11, tail);
    memset(h65, 'a', 65 - 11);
    strcpy(h65 + 65 - 11, tail);
    /* 63 + 1 + 63 + 1 + 63 + 1 + 50 + 11 = 253 */
    memset(h253, 'b', 253 - 11);
    h253[63] = h253[127] = h253[191] = '.';
    strcpy(h253 + 253 - 11, tail);

    X509 *x64 = mint(a, h64), *x65 = mint(a, h65), *x253 = mint(a, h253);
    ok(x64 != NULL && X509_NAME_entry_count(X509_get_subject_name(x64)) == 1 &&
           !ext_critical(x64, NID_subject_alt_name) && verify(ca_authority_cert(a), x64, h64) == 0,
       "long: a 64-byte host keeps its CN and verifies");
    ok(x65 != NULL && X509_NAME_entry_count(X509_get_subject_name(x65)) == 0 &&
           ext_critical(x65, NID_subject_alt_name) && verify(ca_authority_cert(a), x65, h65) == 0,
       "long: a 65-byte host: empty subject, critical SAN, verifies strictly");
    ok(x253 != NULL && verify(ca_authority_cert(a), x253, h253) == 0 &&
           ca_cert_to_pem(x253, pem, sizeof pem) > 0,
       "long: a 253-byte host verifies, its PEM within CA_LEAF_PEM_MAX (%zu)",
       x253 ? strlen(pem) : 0);
    X509_free(x64);
    X509_free(x65);
    X509_free(x253);
}

static void test_leaf_times(const struct ca_authority *a)
{
    X509 *ca = ca_authority_cert(a);
    X509 *longer = ca_leaf_mint(a, "github.com", leaf_key, now, CA_VALIDITY_MAX, err, sizeof err);
    X509 *old = ca_leaf_mint(a, "github.com", leaf_key, now - 2 * DAY, DAY, err, sizeof err);
    X509 *late;

    ok(longer != NULL && ASN1_TIME_compare(X509_get0_notAfter(longer), X509_get0_notAfter(ca)) == 0,
       "times: a leaf asked to outlive its CA ends with it");
    ok(old != NULL && verify(ca, old, "github.com") == X509_V_ERR_CERT_HAS_EXPIRED,
       "times: a leaf past its end is refused (the verifier reads the times)");
    late =
        ca_leaf_mint(a, "github.com", leaf_key, now + (int64_t)CA_DAYS * DAY, DAY, err, sizeof err);
    ok(late == NULL && has(err, "the CA is no longer valid"),
       "times: no leaf once the CA ended: %s", err);
    ok(ca_leaf_mint(a, "github.com", leaf_key, now, 0, err, sizeof err) == NULL &&
           has(err, "ca_leaf_mint: validity_s 0"),
       "times: validity_s 0 refused: %s", err);
    X509_free(longer);
    X509_free(old);
    X509_free(late);
}

/* ---- what the CA cannot vouch for ---------------------------------------- */

/* Names outside names3's rules; want[i] says the verifier's error. */
static const struct {
    const char *name;
    int want;
} outside[] = {
    {"evil.example", X509_V_ERR_PERMITTED_VIOLATION},
    {"api.anthropic.com.evil.example", X509_V_ERR_PERMITTED_VIOLATION},
    {"xapi.anthropic.com", X509_V_ERR_PERMITTED_VIOLATION},
    {"anthropic.com", X509_V_ERR_PERMITTED_VIOLATION},
    {"x.api.anthropic.com", X509_V_ERR_EXCLUDED_VIOLATION},
    {"githubusercontent.com", X509_V_ERR_PERMITTED_VIOLATION},
    {"xgithub.com", X509_V_ERR_PERMITTED_VIOLATION},
    {"github.com.evil.example", X509_V_ERR_PERMITTED_VIOLATION},
    {"127.0.0.1", X509_V_ERR_EXCLUDED_VIOLATION},
    {"10.1.2.3", X509_V_ERR_EXCLUDED_VIOLATION},
    {"::1", X509_V_ERR_EXCLUDED_VIOLATION},
    {"2001:db8::1", X509_V_ERR_EXCLUDED_VIOLATION},
};

static void test_forged_refused(const struct ca_authority *a)
{
    X509 *ca = ca_authority_cert(a);
    X509 *bare = forge_unconstrained(ca, ca_key);
    X509 *good = forge_leaf(ca, ca_key, "api.anthropic.com", leaf_key, now);

    ok(verify(ca, good, "api.anthropic.com") == X509_V_OK,
       "forged: a forged leaf inside the constraints verifies (the forger's shape is sound)");
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        const char *name = outside[i].name;
        X509 *x = forge_leaf(ca, ca_key, name, leaf_key, now);
        int rc = verify(ca, x, name);
        ok(rc == outside[i].want, "forged: %s under the CA: %s", name, verr(rc));
        rc = verify(bare, x, name);
        ok(rc == X509_V_OK, "forged: %s under the CA stripped of its constraints: %s", name,
           verr(rc));
        X509_free(x);
    }
    X509_free(good);
    X509_free(bare);
}

static void test_mint_refuses(const struct ca_authority *a)
{
    static const struct {
        const char *host, *want;
    } bad[] = {
        {"127.0.0.1", "an IP address"},
        {"::1", "an IP address"},
        {"API.anthropic.com", "upper case"},
        {"api.anthropic.com.", "an empty label"},
        {"", "empty"},
        {"*.github.com", "a byte other than"},
    };

    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        if (forge_is_ip(outside[i].name))
            continue;
        X509 *x = mint(a, outside[i].name);
        ok(x == NULL && has(err, "outside the CA's name constraints"), "mint: %s refused: %s",
           outside[i].name, err);
        X509_free(x);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        X509 *x = mint(a, bad[i].host);
        ok(x == NULL && has(err, bad[i].want), "mint: \"%s\" refused: %s", bad[i].host, err);
        X509_free(x);
    }
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    X509 *x = ca_leaf_mint(a, "github.com", p384, now, DAY, err, sizeof err);
    ok(x == NULL && has(err, "ca_leaf_mint: leaf_key: the key is EC on secp384r1"),
       "mint: a P-384 leaf key refused: %s", err);
    ok(ca_leaf_mint(NULL, "github.com", leaf_key, now, DAY, err, sizeof err) == NULL &&
           has(err, "no authority"),
       "mint: no authority refused");
    ok(ERR_peek_error() == 0, "mint: OpenSSL's error queue is left empty");
    EVP_PKEY_free(p384);
    X509_free(x);
}

/* ---- ca_authority_permits against the verifier --------------------------- */

static const char *const probes[] = {
    "api.anthropic.com",
    "x.api.anthropic.com",
    "anthropic.com",
    "xapi.anthropic.com",
    "api.anthropic.com.evil.example",
    "github.com",
    "www.github.com",
    "api.github.com",
    "x.api.github.com",
    "xgithub.com",
    "githubusercontent.com",
    "raw.githubusercontent.com",
    "a.b.githubusercontent.com",
    "x.com",
    "a.x.com",
    "b.a.x.com",
    "evil.example",
    "com",
    "127.0.0.1",
    "::1",
    "localhost",
};

/* For each probe: permits() says what a client decides on a forged leaf. */
static void agree(const char *label, const char *const *names, size_t n)
{
    struct ca_authority *a = authority("agree", names, n);
    int disagree = 0;

    for (size_t i = 0; a != NULL && i < sizeof probes / sizeof *probes; i++) {
        X509 *x = forge_leaf(cert_of(a), ca_key, probes[i], leaf_key, now);
        int rc = verify(cert_of(a), x, probes[i]);
        bool p = ca_authority_permits(a, probes[i]);
        if (p != (rc == X509_V_OK) || (!p && !nc_violation(rc))) {
            diag("%s: %s: permits %d, verifier %s", label, probes[i], p, verr(rc));
            disagree++;
        }
        X509_free(x);
    }
    ok(a != NULL && disagree == 0, "agree: %s: permits() matches the verifier on %zu names", label,
       sizeof probes / sizeof *probes);
    ca_authority_free(a);
}

/* permits() for names under rules, as written by hand: 'y' or 'n' per probe. */
static void expect(const char *label, const char *const *names, size_t n, const char *want)
{
    struct ca_authority *a = authority("expect", names, n);
    char got[sizeof probes / sizeof *probes + 1];

    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++)
        got[i] = a != NULL && ca_authority_permits(a, probes[i]) ? 'y' : 'n';
    got[sizeof got - 1] = '\0';
    ok(strcmp(got, want) == 0, "expect: %s: %s", label, got);
    if (strcmp(got, want) != 0)
        diag("wanted %s", want);
    ca_authority_free(a);
}

static void test_permits(void)
{
    static const char *const exact2[] = {"api.anthropic.com", "github.com"};
    static const char *const nested[] = {"github.com", "api.github.com"};
    static const char *const apex_and_subs[] = {"github.com", "*.github.com"};
    static const char *const sub_and_host[] = {"*.x.com", "a.x.com"};
    static const char *const dup[] = {"x.com", "x.com", ".x.com", ".x.com"};

    /* probes:                       api  x.api anthr xapi  a.a.e gh   www  api.g x.a.g xgh  guc
                                        raw  a.b.guc x  a.x  b.a.x evil com  ipv4 ipv6 localhost */
    expect("one rule of each kind", names3, 3, "ynnnnyyyynnyynnnnnnnn");
    expect("two exact hosts", exact2, 2, "ynnnnynnnnnnnnnnnnnnn");
    expect("an exact host under another", nested, 2, "nnnnnyyynnnnnnnnnnnnn");
    expect("an apex and its subdomains", apex_and_subs, 2, "nnnnnyyyynnnnnnnnnnnn");
    expect("subdomains and one of them", sub_and_host, 2, "nnnnnnnnnnnnnnyynnnnn");
    expect("repeated rules", dup, 4, "nnnnnnnnnnnnnyyynnnnn");

    agree("one rule of each kind", names3, 3);
    agree("two exact hosts", exact2, 2);
    agree("an exact host under another", nested, 2);
    agree("an apex and its subdomains", apex_and_subs, 2);
    agree("subdomains and one of them", sub_and_host, 2);
    agree("repeated rules", dup, 4);

    struct ca_authority *a = authority("p", exact2, 2);
    ok(!ca_authority_permits(a, "API.anthropic.com") &&
           !ca_authority_permits(a, "api.anthropic.com.") && !ca_authority_permits(a, "") &&
           !ca_authority_permits(a, NULL) && !ca_authority_permits(NULL, "github.com"),
       "permits: no for what is not a normalized DNS name");
    ca_authority_free(a);
}

/* ---- sandboxes, ids, sizes ----------------------------------------------- */

/* Every CA carries the same key; a leaf still chains only to its own CA. */
static void test_sandboxes_apart(void)
{
    static const char *const one[] = {"api.anthropic.com"};
    struct ca_authority *a = authority("sbx-a", one, 1);
    struct ca_authority *b = authority("sbx-b", one, 1);
    X509 *xb = mint(b, "api.anthropic.com");
    int rc = verify(cert_of(a), xb, "api.anthropic.com");

    ok(a != NULL && b != NULL &&
           EVP_PKEY_eq(X509_get0_pubkey(cert_of(a)), X509_get0_pubkey(cert_of(b))) == 1,
       "apart: two sandboxes' CAs carry the one appliance key");
    ok(rc == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
       "apart: sandbox b's leaf is refused by sandbox a: %s", verr(rc));
    ok(verify(cert_of(b), xb, "api.anthropic.com") == X509_V_OK,
       "apart: and accepted by sandbox b");
    X509_free(xb);
    ca_authority_free(a);
    ca_authority_free(b);
}

static void test_long_ids(void)
{
    static const char *const one[] = {"github.com"};
    char id45[46], id46[47], id63[64], text[256], want[256];

    memset(id45, 'i', 45);
    id45[45] = '\0';
    memset(id46, 'j', 46);
    id46[46] = '\0';
    memset(id63, 'k', 63);
    id63[63] = '\0';
    struct ca_authority *a45 = authority(id45, one, 1);
    struct ca_authority *a46 = authority(id46, one, 1);
    struct ca_authority *a63 = authority(id63, one, 1);
    X509 *x63 = a63 != NULL ? mint(a63, "github.com") : NULL;

    text[0] = '\0';
    if (a45 != NULL)
        name_text(X509_get_subject_name(cert_of(a45)), text, sizeof text);
    snprintf(want, sizeof want, "CN=egressd sandbox %s CA,O=egressd", id45);
    ok(strcmp(text, want) == 0, "ids: a 45-byte id is in the CN: %s", text);
    text[0] = '\0';
    if (a46 != NULL)
        name_text(X509_get_subject_name(cert_of(a46)), text, sizeof text);
    snprintf(want, sizeof want, "CN=%s,OU=egressd sandbox CA,O=egressd", id46);
    ok(strcmp(text, want) == 0, "ids: a 46-byte id is the CN alone: %s", text);
    ok(x63 != NULL && verify(cert_of(a63), x63, "github.com") == X509_V_OK,
       "ids: a 63-byte id's CA verifies its leaves");
    X509_free(x63);
    ca_authority_free(a45);
    ca_authority_free(a46);
    ca_authority_free(a63);
}

/* A name of len bytes: labels of 63 and a last label of 'z's, under a
 * first label that starts with tag. */
static void long_name(char *out, size_t len, char tag)
{
    memset(out, 'z', len);
    out[len] = '\0';
    out[0] = tag;
    for (size_t dot = 63; dot + 1 < len; dot += 64)
        out[dot] = '.';
}

/* Every constraint stays within 253 bytes, which some verifiers (rustls-webpki)
 * require of a constraint before they will use the CA at all: an exact host
 * over 251 bytes, with no name under it, gets no ".h" exclusion; "*.d" needs
 * a d of at most 251 bytes. */
static void test_constraint_lengths(void)
{
    char h251[252], h252[253], d252[256], text[4096], want[1024];
    const char *names[2] = {h251, h252};

    long_name(h251, 251, 'a');
    long_name(h252, 252, 'b');
    struct ca_authority *a = authority("len", names, 2);
    text[0] = '\0';
    if (a != NULL)
        constraints_text(cert_of(a), text, sizeof text);
    snprintf(want, sizeof want, "%s %s | .%s IP/8 zero IP/32 zero", h251, h252, h251);
    ok(strcmp(text, want) == 0, "lengths: a 251-byte host gets its exclusion, a 252-byte one none");
    ca_authority_free(a);

    d252[0] = '*';
    d252[1] = '.';
    long_name(d252 + 2, 252, 'c');
    names[1] = d252;
    refuse_ca("\"*.\" and a 252-byte domain", ca_key, "len", names, 2, DAY,
              "no host name fits under a domain of 252 bytes");
}

/* The largest CA: CA_NAMES_MAX exact hosts of 251 bytes, each permitted and
 * its subdomains excluded. */
static void test_biggest_ca(void)
{
    static char hosts[CA_NAMES_MAX][252];
    const char *names[CA_NAMES_MAX];
    static char pem[CA_PEM_MAX];

    for (int i = 0; i < CA_NAMES_MAX; i++) {
        long_name(hosts[i], 251, (char)('a' + i / 26));
        hosts[i][1] = (char)('a' + i % 26);
        names[i] = hosts[i];
    }
    struct ca_authority *a = authority("big", names, CA_NAMES_MAX);
    size_t n = a != NULL ? ca_authority_pem(a, pem, sizeof pem) : 0;
    X509 *x = a != NULL ? mint(a, hosts[CA_NAMES_MAX - 1]) : NULL;

    ok(n > 0, "big: %d names of 251 bytes: PEM of %zu bytes within CA_PEM_MAX", CA_NAMES_MAX, n);
    ok(x != NULL && verify(cert_of(a), x, hosts[CA_NAMES_MAX - 1]) == X509_V_OK,
       "big: its last host's leaf verifies");
    X509_free(x);
    ca_authority_free(a);
}

int main(void)
{
    now = (int64_t)time(NULL);
    ca_key = ca_key_generate();
    leaf_key = ca_key_generate();
    if (!ok(ca_key != NULL && leaf_key != NULL, "keys generated"))
        return tap_done();

    test_key_round_trip();
    test_key_refusals();
    test_new_refusals();

    struct ca_authority *a = authority("sbx-1", names3, 3);
    if (ok(a != NULL, "the test CA is made")) {
        test_ca_shape(a);
        test_leaf_shape(a);
        test_leaves_accepted(a);
        test_long_hosts(a);
        test_leaf_times(a);
        test_forged_refused(a);
        test_mint_refuses(a);
    }
    ca_authority_free(a);
    test_permits();
    test_sandboxes_apart();
    test_long_ids();
    test_constraint_lengths();
    test_biggest_ca();
    ok(ERR_peek_error() == 0, "OpenSSL's error queue is empty at the end");

    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    return tap_done();
}
