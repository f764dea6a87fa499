/*
 * certs.c - the TLS contexts of interception (certs.h).
 */
#include "certs.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ca.h"
#include "metrics.h"
#include "policy.h"

#define LEAF_VALIDITY_S  (7 * 24 * 3600) /* a leaf's life ... */
#define LEAF_RENEW_S     (24 * 3600)     /* ... renewed when less than this is left */
#define LEAF_CACHE_SLOTS 256             /* per worker; the oldest slot goes first */
#define SESSION_SLOTS    256             /* origins' sessions kept per worker */

static SSL_CTX *upstream_ctx;
static EVP_PKEY *leaf_key; /* one key for every leaf: minting is one signature */
/* One set of session-ticket keys for every leaf context, so a client
 * resumes whichever worker it reaches (name 16, HMAC 32, AES 32 bytes). */
static unsigned char ticket_keys[80];
static int session_cache_index = -1; /* SSL ex_data: the worker's cache, for on_new_session */

struct leaf_slot {
    char key[64 + 1 + POLICY_HOST_MAX + 3]; /* "ID HOST" */
    uint64_t ca_serial;
    int64_t renew_at;
    SSL_CTX *ctx;
};

/* The last session an origin gave, for resuming toward it. */
struct session_slot {
    char host[POLICY_HOST_MAX + 3]; /* the name (SNI) it is for, whatever the port */
    SSL_SESSION *sess;
};

struct px_leaf_cache {
    struct leaf_slot slot[LEAF_CACHE_SLOTS];
    size_t next; /* the slot a new leaf takes when none is free */
    struct session_slot sessions[SESSION_SLOTS];
    size_t next_session;
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

/* The slot of host in lc: its own, or the next in turn (emptied). */
static struct session_slot *session_slot(struct px_leaf_cache *lc, const char *host)
{
    for (size_t i = 0; i < SESSION_SLOTS; i++)
        if (lc->sessions[i].sess != NULL && strcmp(lc->sessions[i].host, host) == 0)
            return &lc->sessions[i];
    struct session_slot *s = &lc->sessions[lc->next_session];
    lc->next_session = (lc->next_session + 1) % SESSION_SLOTS;
    SSL_SESSION_free(s->sess);
    s->sess = NULL;
    snprintf(s->host, sizeof(s->host), "%s", host);
    return s;
}

/* An origin sent a session (a TLS 1.3 ticket, or a TLS 1.2 session): keep
 * it in its worker's cache (the SSL's ex_data) under the name it was sent
 * for. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct px_leaf_cache *lc = SSL_get_ex_data(ssl, session_cache_index);
    const char *host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

    if (lc == NULL || host == NULL)
        return 0;
    /* A copy: the connection's own session is marked not resumable when
     * libevent frees it without a close_notify. */
    SSL_SESSION *copy = SSL_SESSION_dup(sess);
    if (copy == NULL)
        return 0;
    struct session_slot *s = session_slot(lc, host);
    SSL_SESSION_free(s->sess);
    s->sess = copy;
    return 0; /* (OpenSSL keeps its reference to sess) */
}

void px_upstream_session(struct px_leaf_cache *lc, SSL *ssl, const char *host)
{
    struct session_slot *s = session_slot(lc, host);
    const char *for_host = s->sess != NULL ? SSL_SESSION_get0_hostname(s->sess) : NULL;

    if (for_host != NULL && strcmp(for_host, host) == 0 && SSL_SESSION_is_resumable(s->sess))
        SSL_set_session(ssl, s->sess);
    SSL_set_ex_data(ssl, session_cache_index, lc);
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
    SSL_CTX_set_mode(upstream_ctx, SSL_MODE_RELEASE_BUFFERS);
    /* Resumption toward origins: the cache is the worker's (on_new_session). */
    SSL_CTX_set_session_cache_mode(upstream_ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(upstream_ctx, on_new_session);
    session_cache_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (RAND_bytes(ticket_keys, sizeof(ticket_keys)) != 1 || session_cache_index < 0) {
        ssl_error("making the session-ticket keys", err, errlen);
        return -1;
    }
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
    OPENSSL_cleanse(ticket_keys, sizeof(ticket_keys));
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
    for (size_t i = 0; i < SESSION_SLOTS; i++)
        SSL_SESSION_free(lc->sessions[i].sess);
    free(lc);
}

/* A server context serving leaf x (taken) with the shared key. */
static SSL_CTX *leaf_server_ctx(X509 *x, const char *id, char *err, size_t errlen)
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
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* Resumption toward the client: tickets under the process's keys, any
     * worker; a session resumes only in its own sandbox (its context id). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_set_tlsext_ticket_keys(ctx, ticket_keys, sizeof(ticket_keys));
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)id, (unsigned)strlen(id));
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
        px_metrics_leaf(true);
        return s->ctx;
    }
    X509 *x = ca_leaf_mint(ca, host, leaf_key, now, LEAF_VALIDITY_S, err, errlen);
    if (x == NULL)
        return NULL;
    SSL_CTX *ctx = leaf_server_ctx(x, id, err, errlen);
    if (ctx == NULL)
        return NULL;
    px_metrics_leaf(false);
    s = take_slot(lc, key);
    memcpy(s->key, key, sizeof(key));
    s->ca_serial = ca_serial;
    s->renew_at = now + LEAF_VALIDITY_S - LEAF_RENEW_S;
    s->ctx = ctx;
    return ctx;
}
