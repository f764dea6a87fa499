/*
 * prefixbio.c - an OpenSSL BIO that gives back bytes already read from a
 * socket before reading the socket itself.  The ClientHello phase
 * (hello.c) reads and checks the hello before egressd decides to
 * terminate the TLS connection; the TLS server then reads that same hello
 * through this BIO.  Everything else (writes, the fd, flags) goes to the
 * socket BIO below it, so libevent's SSL bufferevent sees a socket.
 */
#include "prefixbio.h"

#include <openssl/bio.h>
#include <stdlib.h>
#include <string.h>

struct prefix {
    uint8_t *p; /* owned */
    size_t len, off;
};

static BIO_METHOD *method; /* made once, at start (px_prefix_bio_init) */

static int prefix_read(BIO *b, char *out, size_t n, size_t *got)
{
    struct prefix *pf = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (pf != NULL && pf->off < pf->len) {
        size_t k = pf->len - pf->off < n ? pf->len - pf->off : n;
        memcpy(out, pf->p + pf->off, k);
        pf->off += k;
        *got = k;
        return 1;
    }
    int r = BIO_read_ex(BIO_next(b), out, n, got);
    BIO_copy_next_retry(b);
    return r;
}

static int prefix_write(BIO *b, const char *in, size_t n, size_t *put)
{
    BIO_clear_retry_flags(b);
    int r = BIO_write_ex(BIO_next(b), in, n, put);
    BIO_copy_next_retry(b);
    return r;
}

static long prefix_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct prefix *pf = BIO_get_data(b);
    long r = BIO_ctrl(BIO_next(b), cmd, num, ptr);

    if (cmd == BIO_CTRL_PENDING && pf != NULL)
        r += (long)(pf->len - pf->off);
    return r;
}

static int prefix_destroy(BIO *b)
{
    struct prefix *pf = BIO_get_data(b);

    if (pf != NULL) {
        free(pf->p);
        free(pf);
    }
    BIO_set_data(b, NULL);
    return 1;
}

int px_prefix_bio_init(void)
{
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "egressd prefix");
    if (method == NULL || !BIO_meth_set_read_ex(method, prefix_read) ||
        !BIO_meth_set_write_ex(method, prefix_write) || !BIO_meth_set_ctrl(method, prefix_ctrl) ||
        !BIO_meth_set_destroy(method, prefix_destroy))
        return -1;
    return 0;
}

BIO *px_prefix_bio(int fd, uint8_t *bytes, size_t len)
{
    BIO *sock = BIO_new_socket(fd, BIO_NOCLOSE);
    BIO *b = BIO_new(method);
    struct prefix *pf = calloc(1, sizeof(*pf));

    if (sock == NULL || b == NULL || pf == NULL)
        abort();
    pf->p = bytes;
    pf->len = len;
    BIO_set_data(b, pf);
    BIO_set_init(b, 1);
    return BIO_push(b, sock);
}
