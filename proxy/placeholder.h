/*
 * placeholder.h - what a sandbox holds instead of a secret:
 *
 *   egressd-ph-NAME-HEX32
 *
 * NAME the secret's name, HEX32 the first 32 hex digits (lowercase) of
 * HMAC-SHA256(K, "placeholder" 0x00 SANDBOX-ID 0x00 NAME), K the 32-byte
 * placeholder key derived from the appliance key (appliance.h).  So it is
 * the same after every restart without being stored, differs per sandbox
 * and per secret, and says nothing about the value.  Pure: no I/O.
 */
#ifndef PX_PLACEHOLDER_H
#define PX_PLACEHOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_PLACEHOLDER_PREFIX   "egressd-ph-"
#define PX_PLACEHOLDER_HEX      32
#define PX_PLACEHOLDER_KEY_SIZE 32
/* The longest placeholder, with its NUL: prefix, a 63-byte name, '-', hex. */
#define PX_PLACEHOLDER_MAX (sizeof(PX_PLACEHOLDER_PREFIX) - 1 + 63 + 1 + PX_PLACEHOLDER_HEX + 1)

/* The placeholder of secret `name` for sandbox `sandbox_id` into out
 * (NUL-terminated); returns its length, or 0 (out "" when cap > 0) when
 * name is not a secret's name (secrets.h), sandbox_id is not 1..63 bytes,
 * or cap is less than the length + 1 (PX_PLACEHOLDER_MAX always does). */
size_t px_placeholder(const uint8_t k[PX_PLACEHOLDER_KEY_SIZE], const char *sandbox_id,
                      const char *name, char *out, size_t cap);

/* The refresh-token placeholder of login `name` for sandbox `sandbox_id`
 * (logins.h): the same shape as px_placeholder's, from the label
 * "refresh-token" instead of "placeholder", so it is never the access
 * token's.  px_placeholder's contract. */
size_t px_placeholder_refresh(const uint8_t k[PX_PLACEHOLDER_KEY_SIZE], const char *sandbox_id,
                              const char *name, char *out, size_t cap);

/* Whether s[0..len) has the shape of a placeholder (of any key, sandbox
 * and secret): "egressd-ph-", a secret's name, '-', 32 lowercase hex
 * digits, nothing more.  When it has and name is not NULL, *name and
 * *name_len are the view of its NAME inside s. */
bool px_placeholder_shape(const char *s, size_t len, const char **name, size_t *name_len);

#endif
