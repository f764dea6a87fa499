/*
 * forge.h - certificates made by hand with a CA's key, past ca_leaf_mint()'s
 * refusal: what anyone holding the appliance key could make.  The tests show
 * that a sandbox's verifier refuses those outside its CA's constraints, and
 * ca_mint --unchecked writes them for end-to-end tests.
 *
 * Written apart from ca/ (OpenSSL's configuration-string extensions, not the
 * module's builders), so that its leaves are an independent check of the
 * module's: same shape, no refusal.
 */
#ifndef TESTS_UNIT_CA_FORGE_H
#define TESTS_UNIT_CA_FORGE_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* True if name is an IPv4 or IPv6 literal. */
bool forge_is_ip(const char *name);

/*
 * A leaf for name issued by ca and signed with ca_key, shaped like
 * ca_leaf_mint()'s: CN=name (when at most 64 bytes), subjectAltName dNSName
 * name, or iPAddress when name is an IP literal, basicConstraints critical
 * CA:FALSE, keyUsage critical digitalSignature, extendedKeyUsage serverAuth,
 * SKI, AKI; valid from now - 300 to now + 86400.  NULL on failure (printed
 * to stderr).
 */
X509 *forge_leaf(X509 *ca, EVP_PKEY *ca_key, const char *name, EVP_PKEY *leaf_key, int64_t now);

/* A copy of ca without its nameConstraints, re-signed with ca_key: the
 * control that shows a refused leaf is refused for its name alone. */
X509 *forge_unconstrained(X509 *ca, EVP_PKEY *ca_key);

#endif
