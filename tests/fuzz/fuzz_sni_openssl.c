/*
 * fuzz_sni_openssl.c - differential fuzzing: our ClientHello parser against
 * OpenSSL's own server-side ClientHello processing.
 *
 * The input is handed to an OpenSSL server (TLS_server_method, memory BIOs).
 * When OpenSSL gets far enough to run its servername callback, it has taken
 * the bytes as a ClientHello and read the server_name it holds (or none).
 * OpenSSL is the referee for what a ClientHello says; we are stricter about
 * what a host name may be (OpenSSL only refuses NUL bytes and names over 255),
 * so the properties are:
 *   1. if both have a name, it is the same name, byte for byte;
 *   2. if OpenSSL reads a name that is a valid host_name (LDH), we read it too,
 *      unless we found a rule broken that OpenSSL does not check (listed in
 *      stricter_than_openssl());
 *   3. if we read a name, OpenSSL, when it gets to the callback, reads one too.
 * The SNI test is the oracle only: sni itself links nothing but libc.
 */
#include "fuzz_common.h"
#include "sni.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sni_parser parser;
static SSL_CTX *ctx;

struct seen {
    int called;       /* the servername callback ran */
    const char *name; /* what SSL_get_servername() said there (may be NULL) */
    char copy[256 + 1];
};

static int on_servername(SSL *ssl, int *alert, void *arg)
{
    struct seen *s = arg;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);

    (void)alert;
    s->called = 1;
    if (name) {
        snprintf(s->copy, sizeof s->copy, "%s", name);
        s->name = s->copy;
    }
    return SSL_TLSEXT_ERR_OK;
}

/*
 * Rules we enforce and OpenSSL 3.0 does not check before its servername
 * callback; a malformed verdict for one of these is no disagreement.  Each
 * was seen by this harness (or by a hand-made input) and is deliberate:
 *  - HELLO_VERSION: RFC 8446 §4.1.2 fixes legacy_version at 0x0303; OpenSSL
 *    ignores it when supported_versions is present.
 *  - EXT_DUPLICATE: OpenSSL catches duplicates only among the types it knows.
 *  - RECORD_EMPTY: RFC 8446 §5.1 forbids empty handshake records; OpenSSL
 *    skips a few empty records of any type.
 *  - RECORD_TYPE: likewise, e.g. an empty ChangeCipherSpec before the hello.
 *  - TRAILING: a ClientHello precedes a key change, so RFC 8446 §5.1 says it
 *    MUST end its record; OpenSSL finds out only after the callback.
 *  - ECH: OpenSSL 3.0 does not read encrypted_client_hello at all.
 */
static int stricter_than_openssl(enum sni_error e)
{
    return e == SNI_E_HELLO_VERSION || e == SNI_E_EXT_DUPLICATE || e == SNI_E_RECORD_EMPTY ||
           e == SNI_E_RECORD_TYPE || e == SNI_E_TRAILING || e == SNI_E_ECH;
}

static void openssl_parse(const uint8_t *data, size_t size, struct seen *s)
{
    SSL *ssl = SSL_new(ctx);
    BIO *in = BIO_new_mem_buf(data, (int)size), *out = BIO_new(BIO_s_mem());

    SSL_set_bio(ssl, in, out);
    SSL_CTX_set_tlsext_servername_arg(ctx, s);
    SSL_accept(ssl);
    SSL_free(ssl);
    ERR_clear_error();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_set_tlsext_servername_callback(ctx, on_servername);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen ossl = {0};

    if (size > 20000)
        return 0;
    openssl_parse(data, size, &ossl);
    sni_parser_init(&parser);
    enum sni_result r = sni_parser_feed(&parser, data, size);
    const struct sni_view *h = &parser.hello.host;

    if (!ossl.called)
        return 0; /* OpenSSL refused the bytes before the name: nothing to compare */
    if (r == SNI_OK) {
        CHECK(ossl.name && strlen(ossl.name) == h->len && memcmp(ossl.name, h->ptr, h->len) == 0,
              "we read '%.*s', OpenSSL read '%s'", (int)h->len, (const char *)h->ptr,
              ossl.name ? ossl.name : "(none)");
    } else if (ossl.name && host_valid((const uint8_t *)ossl.name, strlen(ossl.name))) {
        CHECK(r == SNI_MALFORMED && stricter_than_openssl(parser.error),
              "OpenSSL read '%s', we said %s (%s at %zu)", ossl.name, sni_result_str(r),
              sni_error_str(parser.error), parser.error_at);
    }
    return 0;
}
