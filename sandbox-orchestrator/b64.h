/* b64.h - base64 (RFC 4648 section 4) for guest file contents. */
#ifndef SBX_B64_H
#define SBX_B64_H

#include <stddef.h>

/* Encode len bytes into a new NUL-terminated string (caller frees). */
char *sbx_b64_encode(const unsigned char *data, size_t len);

/* Decode n characters of text (padding required, no blanks) into a new
 * buffer of *outlen bytes (caller frees); NULL when text is not base64. */
unsigned char *sbx_b64_decode(const char *text, size_t n, size_t *outlen);

#endif
