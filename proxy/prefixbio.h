/*
 * prefixbio.h - a BIO over socket fd that first gives back bytes already
 * read from it (prefixbio.c).
 */
#ifndef PX_PREFIXBIO_H
#define PX_PREFIXBIO_H

#include <openssl/bio.h>
#include <stddef.h>
#include <stdint.h>

/* Make the BIO method (once, at start).  0, or -1 when OpenSSL cannot. */
int px_prefix_bio_init(void);

/* A BIO chain reading bytes[0..len) (taken: freed with the BIO; may be
 * NULL with len 0), then socket fd, and writing to fd; fd is not closed
 * by it.  Aborts on allocation failure. */
BIO *px_prefix_bio(int fd, uint8_t *bytes, size_t len);

#endif
