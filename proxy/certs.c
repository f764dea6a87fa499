/*
 * certs.c - the TLS contexts of interception (certs.h).
 */
#include "certs.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ca.h"
#include "policy.h"

#define LEAF_VALIDITY_S  (7 * 24 * 3600) /* a leaf's life ... */
#define LEAF_RENEW_S     (24 * 3600)     /* ... renewed when less than this is left */
#define LEAF_CACHE_SLOTS 256             /* per worker; the oldest slot goes first */

static SSL_CTX *upstream_ctx;
static EVP_PKEY *leaf_key; /* one key for every leaf: minting is one signature */
static atomic_uint_fast64_t n_hits, n_mints;

struct leaf_slot {
    char key[64 + 1 + POLICY_HOST_MAX + 3]; /* "ID HOST" */
    uint64_t ca_serial;
    int64_t renew_at;
    SSL_CTX *ctx;
};

struct px_leaf_cache {
    struct leaf_slot slot[LEAF_CACHE_SLOTS];
    size_t next; /* the slot a new leaf takes when none is free */
};

/* The last OpenSSL error as text, in err. */
static void ssl_error(const char *what, char *err, size_t errlen)
{
    char buf[256] = "no detail";
    unsigned long e = ERR_get_error();

    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    snprintf(err, errlen, "%s: %s", what, buf);
}

/* Only HTTP/1.1 is served inside an intercepted tunnel: a client that
 * offers ALPN without it gets no ALPN at all (and speaks HTTP/1.1, or is
 * refused when it opens with the HTTP/2 preface). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;
    (void)ssl, (void)arg;

    if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

int px_certs_init(const char *ca_file, char *err, size_t errlen)
{
    upstream_ctx = SSL_CTX_new(TLS_client_method());
    leaf_key = EVP_EC_gen("P-256");
    if (upstream_ctx == NULL || leaf_key == NULL) {
        ssl_error("making the TLS contexts", err, errlen);
        return -1;
    }
    SSL_CTX_set_min_proto_version(upstream_ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(upstream_ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_alpn_protos(upstream_ctx, (const unsigned char *)"\x08http/1.1", 9);
    int ok = ca_file != NULL && ca_file[0] != '\0'
                 ? SSL_CTX_load_verify_locations(upstream_ctx, ca_file, NULL)
                 : SSL_CTX_set_default_verify_paths(upstream_ctx);
    if (!ok) {
        ssl_error(ca_file != NULL && ca_file[0] ? ca_file : "the system trust store", err, errlen);
        return -1;
    }
    return 0;
}

void px_certs_shutdown(void)
{
    SSL_CTX_free(upstream_ctx);
    EVP_PKEY_free(leaf_key);
    upstream_ctx = NULL;
    leaf_key = NULL;
}

SSL_CTX *px_certs_upstream(void)
{
    return upstream_ctx;
}

struct px_leaf_cache *px_leaf_cache_new(void)
{
    struct px_leaf_cache *lc = calloc(1, sizeof(*lc));
    if (lc == NULL)
        abort();
    return lc;
}

void px_leaf_cache_free(struct px_leaf_cache *lc)
{
    if (lc == NULL)
        return;
    for (size_t i = 0; i < LEAF_CACHE_SLOTS; i++)
        SSL_CTX_free(lc->slot[i].ctx);
    free(lc);
}

/* A server context serving leaf x (taken) with the shared key. */
static SSL_CTX *leaf_server_ctx(X509 *x, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL || !SSL_CTX_use_certificate(ctx, x) || !SSL_CTX_use_PrivateKey(ctx, leaf_key)) {
        ssl_error("making a leaf's context", err, errlen);
        SSL_CTX_free(ctx);
        X509_free(x);
        return NULL;
    }
    X509_free(x);
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    /* Resumption toward the client: tickets (the default) and a session
     * cache per context. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    return ctx;
}

/* The slot of key under ca_serial still fresh at now, or NULL. */
static struct leaf_slot *find_slot(struct px_leaf_cache *lc, const char *key, uint64_t ca_serial,
                                   int64_t now)
{
    for (size_t i = 0; i < LEAF_CACHE_SLOTS; i++) {
        struct leaf_slot *s = &lc->slot[i];
        if (s->ctx != NULL && s->ca_serial == ca_serial && now < s->renew_at &&
            strcmp(s->key, key) == 0)
            return s;
    }
    return NULL;
}

/* The slot a new leaf for key takes: the stale one of the same key, a free
 * one, or the next in turn. */
static struct leaf_slot *take_slot(struct px_leaf_cache *lc, const char *key)
{
    struct leaf_slot *s = NULL;

    for (size_t i = 0; i < LEAF_CACHE_SLOTS && s == NULL; i++)
        if (lc->slot[i].ctx != NULL && strcmp(lc->slot[i].key, key) == 0)
            s = &lc->slot[i];
    for (size_t i = 0; i < LEAF_CACHE_SLOTS && s == NULL; i++)
        if (lc->slot[i].ctx == NULL)
            s = &lc->slot[i];
    if (s == NULL) {
        s = &lc->slot[lc->next];
        lc->next = (lc->next + 1) % LEAF_CACHE_SLOTS;
    }
    SSL_CTX_free(s->ctx);
    s->ctx = NULL;
    return s;
}

SSL_CTX *px_leaf_ctx(struct px_leaf_cache *lc, const struct ca_authority *ca, uint64_t ca_serial,
                     const char *id, const char *host, char *err, size_t errlen)
{
    char key[sizeof(lc->slot[0].key)];
    int64_t now = (int64_t)time(NULL);

    snprintf(key, sizeof(key), "%s %s", id, host);
    struct leaf_slot *s = find_slot(lc, key, ca_serial, now);
    if (s != NULL) {
        atomic_fetch_add_explicit(&n_hits, 1, memory_order_relaxed);
        return s->ctx;
    }
    X509 *x = ca_leaf_mint(ca, host, leaf_key, now, LEAF_VALIDITY_S, err, errlen);
    if (x == NULL)
        return NULL;
    SSL_CTX *ctx = leaf_server_ctx(x, err, errlen);
    if (ctx == NULL)
        return NULL;
    atomic_fetch_add_explicit(&n_mints, 1, memory_order_relaxed);
    s = take_slot(lc, key);
    memcpy(s->key, key, sizeof(key));
    s->ca_serial = ca_serial;
    s->renew_at = now + LEAF_VALIDITY_S - LEAF_RENEW_S;
    s->ctx = ctx;
    return ctx;
}

void px_leaf_counts(uint64_t *hits, uint64_t *mints)
{
    *hits = atomic_load_explicit(&n_hits, memory_order_relaxed);
    *mints = atomic_load_explicit(&n_mints, memory_order_relaxed);
}
