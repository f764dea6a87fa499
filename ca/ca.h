/*
 * ca.h - the certificates of credential injection.
 *
 * egressd terminates TLS for the few hosts whose requests it puts secrets
 * into.  Each sandbox trusts a CA certificate made for it alone, whose name
 * constraints permit only those hosts, so that the CA can vouch for nothing
 * else, whoever holds its key.  This module mints that CA certificate and
 * the leaf certificates egressd presents under it.  README.md gives the
 * certificates' shape and the reasons for it.
 *
 * Implements:
 *   RFC 5280 §4.1        v3 certificates: serial, validity, names
 *   RFC 5280 §4.2.1.1-2  authority and subject key identifiers (method 1)
 *   RFC 5280 §4.2.1.3    keyUsage; §4.2.1.12 extendedKeyUsage
 *   RFC 5280 §4.2.1.6    subjectAltName (one dNSName)
 *   RFC 5280 §4.2.1.9    basicConstraints
 *   RFC 5280 §4.2.1.10   nameConstraints: dNSName subtrees, every iPAddress
 *                        excluded; a leading '.' means "subdomains only", as
 *                        OpenSSL, GnuTLS, NSS, Go and Chrome read it
 *   RFC 5480, RFC 5758   ECDSA P-256 keys, ecdsa-with-SHA256 signatures
 *
 * The module is pure: no file or socket I/O, no logging, no globals.  It
 * uses OpenSSL 3 for the encoding and the signatures and RAND_bytes() for
 * serial numbers.  Every function leaves the calling thread's OpenSSL error
 * queue as it found it; a failure is described in the caller's err buffer
 * (err may be NULL, errlen 0), naming the argument and the cause.  The
 * objects are immutable once made: a const ca_authority may be used by
 * several threads at once.
 */
#ifndef CA_CA_H
#define CA_CA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

#define CA_ID_MAX       63        /* a sandbox id: [A-Za-z0-9._-]{1,63} */
#define CA_NAMES_MAX    64        /* names one CA may permit */
#define CA_HOST_MAX     253       /* a DNS name, no trailing dot */
#define CA_VALIDITY_MAX 631152000 /* 20 years, in seconds: the longest validity_s */
#define CA_KEY_PEM_MAX  1024      /* ca_key_to_pem() of a P-256 key fits */
#define CA_LEAF_PEM_MAX 4096      /* ca_cert_to_pem() of any leaf fits */
#define CA_PEM_MAX      65536     /* ca_authority_pem() of any CA fits */

/*
 * The appliance key: ECDSA on P-256 (named curve).  Every sandbox CA
 * certificate carries its public key and is signed with it: one key, and
 * the CAs differ by subject and constraints.  The leaves' shared key is
 * made the same way.  Returns a new key (EVP_PKEY_free() it), NULL only if
 * OpenSSL cannot make one.
 */
EVP_PKEY *ca_key_generate(void);

/*
 * Read a private key from len bytes of PEM (PKCS#8 "PRIVATE KEY" or SEC1
 * "EC PRIVATE KEY"; no NUL needed).  Anything but an unencrypted EC P-256
 * private key whose public and private parts agree is refused: an RSA or
 * other-curve key, explicit curve parameters, an encrypted key (no
 * passphrase is ever asked for), a public key, garbage.  Returns a new key,
 * or NULL with err saying which.
 */
EVP_PKEY *ca_key_from_pem(const char *pem, size_t len, char *err, size_t errlen);

/*
 * Write k's private key as unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY") and
 * a NUL into out.  Returns the PEM's length (without the NUL), or 0 if it
 * does not fit in cap bytes (CA_KEY_PEM_MAX always does for a P-256 key) or
 * k holds no private key.
 */
size_t ca_key_to_pem(const EVP_PKEY *k, char *out, size_t cap);

/* A sandbox's CA: its certificate and a reference to the appliance key. */
struct ca_authority;

/*
 * Make the CA certificate of sandbox id, self-signed with key (an EC P-256
 * private key; the authority takes its own reference).
 *
 * names[0..n) are the hosts the sandbox's secrets are bound to, normalized
 * (lower-case LDH labels, no trailing dot, not an IP address), each written
 * as policy/ writes a host rule:
 *   "api.anthropic.com"        that host only
 *   "*.githubusercontent.com"  any subdomain, not the apex
 *   ".github.com"              the apex and any subdomain
 * The CA permits exactly those names (README.md: the mapping; when one name
 * lies under an exact host, that host's other subdomains stay permitted too,
 * since X.509 cannot carve holes), and no IP address.  "*", regexes, IP
 * literals and n == 0 are refused: a CA that permits everything, or
 * nothing, is not made.
 *
 * The certificate: subject "CN=egressd sandbox <id> CA, O=egressd" (for ids
 * over 45 bytes, whose CN would pass the 64-byte limit of RFC 5280,
 * "CN=<id>, OU=egressd sandbox CA, O=egressd"), a 128-bit random serial,
 * valid from now - 3600 to now + validity_s (1..CA_VALIDITY_MAX),
 * basicConstraints critical CA:TRUE pathlen:0, keyUsage critical
 * keyCertSign cRLSign, extendedKeyUsage serverAuth, subject and authority
 * key identifiers, and the critical nameConstraints.
 *
 * Returns a new authority (ca_authority_free() it), or NULL with err.
 */
struct ca_authority *ca_authority_new(EVP_PKEY *key, const char *id, const char *const *names,
                                      size_t n, int64_t now, int64_t validity_s, char *err,
                                      size_t errlen);

/* Release a and its references.  ca_authority_free(NULL) does nothing. */
void ca_authority_free(struct ca_authority *a);

/* a's certificate, borrowed: valid as long as a (X509_up_ref() to keep it). */
X509 *ca_authority_cert(const struct ca_authority *a);

/* ca_cert_to_pem() of a's certificate: what the sandbox installs and trusts. */
size_t ca_authority_pem(const struct ca_authority *a, char *out, size_t cap);

/*
 * Whether a's name constraints admit host, a normalized (lower-case) DNS
 * name: OpenSSL's own test (NAME_CONSTRAINTS_check) against the extension as
 * encoded in a's certificate, which is the test the sandbox's clients make.
 * False for anything that is not a DNS name (an IP literal, upper case, a
 * trailing dot), which ca_leaf_mint() refuses too.
 */
bool ca_authority_permits(const struct ca_authority *a, const char *host);

/*
 * Mint a leaf for exactly host (as for ca_authority_permits(); refused when
 * it is false) with public key leaf_key (EC P-256; the caller makes it once
 * and shares it among leaves), signed by a: subject CN=host (an empty subject
 * and a critical subjectAltName when host is over 64 bytes), subjectAltName
 * dNSName host, basicConstraints critical CA:FALSE, keyUsage critical
 * digitalSignature, extendedKeyUsage serverAuth, subject key identifier, and
 * authority key identifier a's.  Valid from now - 300 to now + validity_s
 * (1..CA_VALIDITY_MAX) or a's own end, whichever is first; refused once a
 * has expired.  A 128-bit random serial.  The shape passes OpenSSL's
 * X509_V_FLAG_X509_STRICT (Python 3.13's default VERIFY_X509_STRICT).
 * Returns a new X509 (X509_free() it), or NULL with err.
 */
X509 *ca_leaf_mint(const struct ca_authority *a, const char *host, EVP_PKEY *leaf_key, int64_t now,
                   int64_t validity_s, char *err, size_t errlen);

/*
 * Write x as PEM ("BEGIN CERTIFICATE") and a NUL into out.  Returns the PEM's
 * length (without the NUL), or 0 if it does not fit in cap bytes.
 */
size_t ca_cert_to_pem(X509 *x, char *out, size_t cap);

#endif
