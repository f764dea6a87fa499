/* xfer.h - moving one file of any size into or out of a sandbox through
 * the guest agent: in parts of at most SBX_GUEST_FILE_MAX bytes, checked
 * end to end by SHA-256 (sha256sum in the guest, OpenSSL here).
 *
 * The check is against damage on the way, not against the guest: what a
 * guest sends is as hostile after the check as before.
 */
#ifndef SBX_XFER_H
#define SBX_XFER_H

#include <stddef.h>

#include "sbx.h"

/* Lowercase hex SHA-256 of len bytes into hex (65 bytes). */
void sbx_sha256_hex(const unsigned char *data, size_t len, char hex[65]);

/* Write data to path in the guest (mode 0644, root's); parts are joined and
 * removed in the guest, then the guest's sha256sum of path must be ours.
 * 0 / -1 with err. */
int sbx_xfer_put(struct sbx *s, const char *node, int vmid, const char *path,
                 const unsigned char *data, size_t len, char *err, size_t errlen);

/* Read path (whose size and SHA-256 the guest reported: size bytes, hex)
 * from the guest into a new buffer; parts are cut and removed in the guest.
 * -1 with err when the bytes read are not size bytes of that digest. */
int sbx_xfer_get(struct sbx *s, const char *node, int vmid, const char *path, long size,
                 const char *sha_hex, unsigned char **data, size_t *len, char *err, size_t errlen);

#endif
