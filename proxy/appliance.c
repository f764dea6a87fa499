/*
 * appliance.c - see appliance.h.
 */
#include "appliance.h"

#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_FILE_MAX 4096 /* a P-256 PKCS#8 PEM is about 240 bytes */

/* Why the last OpenSSL call failed, as one phrase. */
static const char *ssl_reason(void)
{
    static __thread char buf[256];
    unsigned long e = ERR_get_error();

    if (e == 0)
        return "unknown OpenSSL error";
    ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return buf;
}

/* The PEM passphrase callback: the key is never encrypted (egressd has
 * nobody to ask), so an encrypted one fails rather than prompts. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/* Whether pkey is an EC key on P-256. */
static bool is_p256(const EVP_PKEY *pkey)
{
    char group[64];
    size_t len = 0;

    return EVP_PKEY_is_a(pkey, "EC") &&
           EVP_PKEY_get_group_name(pkey, group, sizeof(group), &len) == 1 &&
           strcmp(group, "prime256v1") == 0;
}

/* Read and check the open key file fd (closed here): the key, or NULL
 * with the reason in err. */
static EVP_PKEY *key_read(int fd, const char *path, char *err, size_t errlen)
{
    char buf[KEY_FILE_MAX];
    struct stat st;
    EVP_PKEY *pkey = NULL;
    ssize_t n = -1;

    if (fstat(fd, &st) == -1)
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        snprintf(err, errlen, "%s: not a regular file", path);
    else if (st.st_uid != geteuid())
        snprintf(err, errlen, "%s: owned by uid %u, not by egressd's uid %u; chown it", path,
                 (unsigned)st.st_uid, (unsigned)geteuid());
    else if ((st.st_mode & 077) != 0)
        snprintf(err, errlen, "%s: mode %04o is looser than 0600; chmod 600 it", path,
                 (unsigned)(st.st_mode & 07777));
    else if ((n = read(fd, buf, sizeof(buf))) == -1)
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    else if (n == (ssize_t)sizeof(buf))
        snprintf(err, errlen, "%s: longer than %d bytes: not an appliance key", path,
                 KEY_FILE_MAX - 1);
    else {
        BIO *bio = BIO_new_mem_buf(buf, (int)n);
        pkey = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
        BIO_free(bio);
        if (pkey == NULL)
            snprintf(err, errlen,
                     "%s: not an unencrypted PEM private key (%s); move it away and egressd "
                     "makes a new one (every placeholder changes)",
                     path, ssl_reason());
        else if (!is_p256(pkey)) {
            snprintf(err, errlen, "%s: not an EC P-256 key", path);
            EVP_PKEY_free(pkey);
            pkey = NULL;
        }
    }
    explicit_bzero(buf, sizeof(buf));
    close(fd);
    return pkey;
}

/* What key_make() did. */
enum key_made {
    KEY_MADE,   /* a new key is at path */
    KEY_EXISTS, /* another one appeared at path meanwhile: it stays */
    KEY_FAILED, /* nothing is at path; the reason in err */
};

/* Write PEM text pem[0..len) to a new temporary file in state_dir (0600,
 * fsync) and rename it to path, never over a file that is there; the
 * directory is synced after. */
static enum key_made key_write(const char *state_dir, const char *path, const char *pem, size_t len,
                               char *err, size_t errlen)
{
    char tmp[1200];
    int e;

    snprintf(tmp, sizeof(tmp), "%s/." PX_APPLIANCE_KEY_FILE ".XXXXXX", state_dir);
    int fd = mkstemp(tmp); /* O_EXCL, mode 0600 */
    if (fd == -1) {
        snprintf(err, errlen, "%s: cannot create a temporary file: %s", tmp, strerror(errno));
        return KEY_FAILED;
    }
    bool ok = fchmod(fd, 0600) == 0 && px_write_all(fd, pem, len) == 0 && fsync(fd) == 0;
    e = errno;
    if (close(fd) == -1 && ok)
        ok = false, e = errno;
    if (!ok) {
        unlink(tmp);
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(e));
        return KEY_FAILED;
    }
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == -1) {
        e = errno;
        unlink(tmp);
        if (e == EEXIST)
            return KEY_EXISTS;
        snprintf(err, errlen, "%s: cannot rename %s to it: %s", path, tmp, strerror(e));
        return KEY_FAILED;
    }
    /* The rename is durable only once the directory itself is synced. */
    if (px_sync_dir(state_dir) == -1) {
        snprintf(err, errlen, "%s: cannot sync the directory: %s", state_dir, strerror(errno));
        return KEY_FAILED;
    }
    return KEY_MADE;
}

/* Make a new P-256 key and write it to path (see key_write). */
static enum key_made key_make(const char *state_dir, const char *path, char *err, size_t errlen)
{
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    BIO *bio = BIO_new(BIO_s_secmem()); /* wiped when freed */
    enum key_made r = KEY_FAILED;
    char *pem;

    if (pkey == NULL || bio == NULL ||
        PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) != 1)
        snprintf(err, errlen, "%s: cannot make a P-256 key: %s", path, ssl_reason());
    else {
        long len = BIO_get_mem_data(bio, &pem);
        r = key_write(state_dir, path, pem, (size_t)len, err, errlen);
    }
    BIO_free(bio);
    EVP_PKEY_free(pkey);
    return r;
}

EVP_PKEY *px_appliance_key_load(const char *state_dir, char *err, size_t errlen)
{
    char path[1100];

    if (state_dir == NULL || state_dir[0] == '\0') {
        snprintf(err, errlen, "no state-dir: the appliance key (placeholders) is kept there");
        return NULL;
    }
    int n = snprintf(path, sizeof(path), "%s/%s", state_dir, PX_APPLIANCE_KEY_FILE);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        snprintf(err, errlen, "%s: state-dir: path too long", state_dir);
        return NULL;
    }
    /* Twice at most: once to find none and make it, once to read it back
     * (ours, or one that appeared meanwhile) through the same checks. */
    for (int round = 0; round < 2; round++) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (fd != -1)
            return key_read(fd, path, err, errlen);
        if (errno == ELOOP) {
            snprintf(err, errlen, "%s: a symbolic link; put the key in a regular file", path);
            return NULL;
        }
        if (errno != ENOENT || round == 1) {
            snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
            return NULL;
        }
        if (key_make(state_dir, path, err, errlen) == KEY_FAILED)
            return NULL;
    }
    return NULL; /* not reached */
}

int px_appliance_placeholder_key(const EVP_PKEY *key, uint8_t k[32], char *err, size_t errlen)
{
    static char info[] = "egressd placeholder key";
    uint8_t ikm[32];
    BIGNUM *d = NULL;
    int rc = -1;

    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1 ||
        BN_bn2binpad(d, ikm, sizeof(ikm)) != (int)sizeof(ikm)) {
        snprintf(err, errlen, "appliance key: no P-256 private scalar: %s", ssl_reason());
        BN_clear_free(d);
        return -1;
    }
    BN_clear_free(d);
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, "SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, ikm, sizeof(ikm)),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof(info) - 1),
        OSSL_PARAM_construct_end(),
    };
    if (kctx != NULL && EVP_KDF_derive(kctx, k, 32, params) == 1)
        rc = 0;
    else
        snprintf(err, errlen, "appliance key: HKDF-SHA256: %s", ssl_reason());
    EVP_KDF_CTX_free(kctx);
    EVP_KDF_free(kdf);
    explicit_bzero(ikm, sizeof(ikm));
    return rc;
}
