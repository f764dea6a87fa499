/*
 * appliance.h - the appliance key: `state-dir/appliance.key`, an EC P-256
 * private key (PKCS#8 PEM, mode 0600), made at the first start and kept
 * for good.  It is what placeholders are derived from (placeholder.h), so
 * losing it changes every sandbox's placeholders.  Loaded once at start,
 * not at a reload.
 */
#ifndef PX_APPLIANCE_H
#define PX_APPLIANCE_H

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

#define PX_APPLIANCE_KEY_FILE "appliance.key"

/* The appliance key of state_dir (a directory that exists): read from
 * STATE-DIR/appliance.key, or, when there is none, made, written to a
 * temporary file (0600, fsync), renamed into place (never over one that
 * appeared meanwhile: that one is read) and the directory synced.  A file
 * that is looser than 0600, not owned by egressd's effective uid, a
 * symbolic link, encrypted, or not an EC P-256 private key is refused.
 * Returns the key (the caller frees it with EVP_PKEY_free()), or NULL
 * with "STATE-DIR/appliance.key: what is wrong; the fix" in err. */
EVP_PKEY *px_appliance_key_load(const char *state_dir, char *err, size_t errlen);

/* The placeholder key K (32 bytes) of appliance key `key`:
 *   K = HKDF-SHA256(IKM = the private scalar, 32 bytes big-endian,
 *                   salt = none, info = "egressd placeholder key")
 * (RFC 5869).  The scalar, not an encoding of the key, so that K does not
 * depend on how a library writes the file.  Returns 0, or -1 with the
 * reason in err. */
int px_appliance_placeholder_key(const EVP_PKEY *key, uint8_t k[32], char *err, size_t errlen);

#endif
