/*
 * certs.h - the TLS contexts of interception (docs/credentials.md): one
 * client context toward origins, which verifies them against the system
 * trust store (or `upstream-ca-file`) and never goes below TLS 1.2; and,
 * per worker, a cache of server contexts, each holding a leaf for one
 * (sandbox, host) minted by that sandbox's CA (ca/).  A leaf is minted
 * on the first request for its name and then served from the cache
 * until it is near its end or the sandbox's CA changes (each lookup is
 * counted in leaf_certificates_total).  A client resumes with tickets any
 * worker takes (one set of ticket keys), in its own sandbox only; toward
 * each origin the worker keeps its last session and resumes with it.
 */
#ifndef PX_CERTS_H
#define PX_CERTS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ca_authority;
struct px_leaf_cache;

/* Make the upstream context and the leaves' key (main thread, at start).
 * `ca_file` ("" or NULL: the system store).  Returns 0, or -1 with the
 * cause in err. */
int px_certs_init(const char *ca_file, char *err, size_t errlen);
void px_certs_shutdown(void);

/* The client context toward origins (shared; SSL_new is thread-safe). */
SSL_CTX *px_certs_upstream(void);

/* A worker's leaf cache (NULL on allocation failure: aborts instead). */
struct px_leaf_cache *px_leaf_cache_new(void);
void px_leaf_cache_free(struct px_leaf_cache *lc);

/* The server context for `host` of sandbox `id` under CA `ca` (whose
 * `ca_serial` tells one CA from the next), from cache lc or minted now;
 * borrowed (valid until the next call on lc).  NULL with the cause in
 * err. */
SSL_CTX *px_leaf_ctx(struct px_leaf_cache *lc, const struct ca_authority *ca, uint64_t ca_serial,
                     const char *id, const char *host, char *err, size_t errlen);

/* Resume toward host with the session an origin of that name last gave
 * this worker (lc), if it is still good, and keep the one it gives now:
 * call before ssl's handshake (its SNI set to host). */
void px_upstream_session(struct px_leaf_cache *lc, SSL *ssl, const char *host);

#endif
