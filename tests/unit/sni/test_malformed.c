/*
 * test_malformed.c - the ClientHello parser against hand-built inputs.
 *
 * base_hello[] is one small valid TLS 1.3-style ClientHello, written out
 * field by field.  A builder (put*(), ext_*(), body_*(), frame*()) produces
 * the same bytes from named parts, checked once against the literal; every
 * other case is the base rebuilt with one field broken, and its comment says
 * which field and how.  Each case checks the exact result and the exact
 * enum sni_error.
 */
#include "sni.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- protocol constants ------------------------------------------------ */

enum {
    CT_HANDSHAKE = 0x16,   /* ContentType handshake(22) */
    CT_APP_DATA = 0x17,    /* ContentType application_data(23) */
    HS_CLIENT_HELLO = 1,   /* HandshakeType client_hello */
    HS_SERVER_HELLO = 2,   /* HandshakeType server_hello */
    TLS10 = 0x0301,        /* ProtocolVersion TLS 1.0 */
    TLS12 = 0x0303,        /* ProtocolVersion TLS 1.2 */
    TLS13 = 0x0304,        /* ProtocolVersion TLS 1.3 */
    EXT_SERVER_NAME = 0,   /* RFC 6066 §3 */
    EXT_ALPN = 16,         /* RFC 7301 */
    EXT_PADDING = 21,      /* RFC 7685 */
    EXT_VERSIONS = 43,     /* RFC 8446 §4.2.1 supported_versions */
    EXT_ECH = 0xfe0d,      /* draft-ietf-tls-esni encrypted_client_hello */
    EXT_GREASE = 0xdada,   /* RFC 8701 GREASE extension type of the base */
    EXT_GREASE_2 = 0x0a0a, /* another RFC 8701 GREASE extension type */
    NAME_HOST = 0,         /* NameType host_name */
    ECH_OUTER = 0,         /* ECHClientHelloType outer */
    ECH_INNER = 1,         /* ECHClientHelloType inner */
    HPKE_HKDF_SHA256 = 1,  /* HPKE KDF id */
    HPKE_AES_128_GCM = 1,  /* HPKE AEAD id */
    ECH_CONFIG_ID = 0x42,  /* config_id of the outer ECH case */
    ECH_ENC_LEN = 32,      /* HPKE enc of the outer ECH case */
    ECH_PAYLOAD_LEN = 100, /* payload of the outer ECH case */
    LABEL_MAX = 63,        /* longest DNS label */
    EXT_NONE = -1,         /* exts_with(): replace no extension */
};

/* ---- layout of the base ClientHello ------------------------------------ */

enum {
    REC_HDR_LEN = 5,  /* type(1) legacy_record_version(2) length(2) */
    HS_HDR_LEN = 4,   /* msg_type(1) length(3) */
    EXT_HDR_LEN = 4,  /* extension_type(2) extension_data length(2) */
    RANDOM_LEN = 32,  /* ClientHello.random */
    SID_LEN = 32,     /* legacy_session_id length in the base */
    SID_FIRST = 0xe0, /* the base session_id is bytes 0xe0..0xff */
    SUITES_LEN = 6,   /* three cipher suites in the base */
    COMP_LEN = 1,     /* one compression method in the base */

    /* Offsets in the framed message (record header first). */
    OFF_REC_VERSION = 1,
    OFF_REC_LEN = 3,
    OFF_HS_TYPE = REC_HDR_LEN,
    OFF_HS_LEN = REC_HDR_LEN + 1,

    /* Offsets in the ClientHello body (after the handshake header). */
    BODY_VERSION_RANDOM = 2 + RANDOM_LEN,     /* legacy_version + random */
    BODY_SID = BODY_VERSION_RANDOM,           /* legacy_session_id length */
    BODY_SUITES = BODY_SID + 1 + SID_LEN,     /* cipher_suites length */
    BODY_COMP = BODY_SUITES + 2 + SUITES_LEN, /* compression_methods length */
    BODY_EXTS_LEN = BODY_COMP + 1 + COMP_LEN, /* extensions length */
    BODY_EXTS = BODY_EXTS_LEN + 2,            /* first extension */
    BASE_LAST_EXT = EXT_HDR_LEN,              /* the final GREASE extension: header only */
    SPLIT_AT = 50, /* a cut in the base handshake message, inside the session_id */
};

/* Room for a full-size handshake message in two records, plus a little. */
enum { MSG_MAX = SNI_HANDSHAKE_MAX + 2 * REC_HDR_LEN + 256 };

#define BASE_HOST "example.com"

/*
 * The base: a TLS 1.3-style ClientHello with a GREASE cipher suite, a
 * server_name, supported_versions {GREASE, TLS 1.3}, ALPN {"h2", "http/1.1"}
 * and a GREASE extension.  139 bytes, one record.
 */
/* clang-format off */
static const uint8_t base_hello[] = {
    /* TLSPlaintext header (RFC 8446 §5.1) */
    0x16,       /* type: handshake(22) */
    0x03, 0x01, /* legacy_record_version: TLS 1.0, as clients send */
    0x00, 0x86, /* length: 134 = handshake header 4 + body 130 */
    /* Handshake header (RFC 8446 §4) */
    0x01,             /* msg_type: client_hello(1) */
    0x00, 0x00, 0x82, /* length: 130 */
    /* ClientHello body (RFC 8446 §4.1.2) */
    0x03, 0x03, /* legacy_version: TLS 1.2 */
    /* random: 32 bytes 0x00..0x1f */
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x20, /* legacy_session_id length: 32 */
    /* legacy_session_id: 32 bytes 0xe0..0xff */
    0xe0, 0xe1, 0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xeb, 0xec, 0xed, 0xee, 0xef,
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
    0x00, 0x06, /* cipher_suites length: 6 (three suites) */
    0x1a, 0x1a, /*   GREASE cipher suite (RFC 8701) */
    0x13, 0x01, /*   TLS_AES_128_GCM_SHA256 */
    0x13, 0x02, /*   TLS_AES_256_GCM_SHA384 */
    0x01,       /* legacy_compression_methods length: 1 */
    0x00,       /*   null */
    0x00, 0x33, /* extensions length: 51 = 20 + 9 + 18 + 4 */
    /* extension server_name (RFC 6066 §3) */
    0x00, 0x00, /* type: server_name(0) */
    0x00, 0x10, /* length: 16 */
    0x00, 0x0e, /*   server_name_list length: 14 */
    0x00,       /*   name_type: host_name(0) */
    0x00, 0x0b, /*   host_name length: 11 */
    'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', /* host_name */
    /* extension supported_versions (RFC 8446 §4.2.1) */
    0x00, 0x2b, /* type: supported_versions(43) */
    0x00, 0x05, /* length: 5 */
    0x04,       /*   versions length: 4 (two versions) */
    0x7a, 0x7a, /*   GREASE version (RFC 8701) */
    0x03, 0x04, /*   TLS 1.3 */
    /* extension application_layer_protocol_negotiation (RFC 7301 §3.1) */
    0x00, 0x10, /* type: ALPN(16) */
    0x00, 0x0e, /* length: 14 */
    0x00, 0x0c, /*   protocol_name_list length: 12 */
    0x02,       /*   name length: 2 */
    'h', '2',   /*   "h2" */
    0x08,       /*   name length: 8 */
    'h', 't', 't', 'p', '/', '1', '.', '1', /* "http/1.1" */
    /* extension GREASE (RFC 8701) */
    0xda, 0xda, /* type: GREASE 0xdada */
    0x00, 0x00, /* length: 0 */
};
/* clang-format on */

/* The base's parts, as the builder writes them (same bytes). */
/* clang-format off */
static const uint8_t base_suites[SUITES_LEN] = {
    0x1a, 0x1a, /* GREASE */
    0x13, 0x01, /* TLS_AES_128_GCM_SHA256 */
    0x13, 0x02, /* TLS_AES_256_GCM_SHA384 */
};
static const uint8_t base_comp[COMP_LEN] = {
    0x00, /* null */
};
static const uint8_t base_sni_body[] = {
    0x00, 0x0e,                                            /* server_name_list length: 14 */
    0x00,                                                  /* name_type: host_name */
    0x00, 0x0b,                                            /* host_name length: 11 */
    'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm', /* host_name */
};
static const uint8_t base_versions_body[] = {
    0x04,       /* versions length: 4 */
    0x7a, 0x7a, /* GREASE */
    0x03, 0x04, /* TLS 1.3 */
};
static const uint8_t base_alpn_body[] = {
    0x00, 0x0c,                                   /* protocol_name_list length: 12 */
    0x02, 'h', '2',                               /* "h2" */
    0x08, 'h', 't', 't', 'p', '/', '1', '.', '1', /* "http/1.1" */
};
/* clang-format on */

/* The base extensions, in order. */
static const struct ext_def {
    unsigned type;
    const uint8_t *body;
    size_t len;
} base_exts[] = {
    {EXT_SERVER_NAME, base_sni_body, sizeof base_sni_body},
    {EXT_VERSIONS, base_versions_body, sizeof base_versions_body},
    {EXT_ALPN, base_alpn_body, sizeof base_alpn_body},
    {EXT_GREASE, NULL, 0},
};

/* ---- builder ------------------------------------------------------------ */

struct msg {
    uint8_t b[MSG_MAX];
    size_t len;
};

static void put(struct msg *m, const void *src, size_t n)
{
    if (n > sizeof m->b - m->len) {
        fprintf(stderr, "test fixture overflows struct msg\n");
        abort();
    }
    if (n > 0)
        memcpy(m->b + m->len, src, n);
    m->len += n;
}

static void put8(struct msg *m, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(m, &b, 1);
}

static void put16(struct msg *m, unsigned v)
{
    put8(m, v >> 8);
    put8(m, v);
}

static void put24(struct msg *m, unsigned v)
{
    put8(m, v >> 16);
    put16(m, v);
}

static void put_fill(struct msg *m, unsigned byte, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put8(m, byte);
}

static void set16(struct msg *m, size_t at, unsigned v)
{
    m->b[at] = (uint8_t)(v >> 8);
    m->b[at + 1] = (uint8_t)v;
}

static void set24(struct msg *m, size_t at, unsigned v)
{
    m->b[at] = (uint8_t)(v >> 16);
    set16(m, at + 1, v);
}

/* A vector: its length in 1 or 2 bytes, then the bytes. */
static void put_vec8(struct msg *m, const void *data, size_t n)
{
    put8(m, (unsigned)n);
    put(m, data, n);
}

static void put_vec16(struct msg *m, const void *data, size_t n)
{
    put16(m, (unsigned)n);
    put(m, data, n);
}

/* One extension: type, length, body. */
static void ext_raw(struct msg *m, unsigned type, const void *body, size_t n)
{
    put16(m, type);
    put_vec16(m, body, n);
}

/* server_name body with one entry: list length, name_type, host_name<>. */
static void sni_body(struct msg *m, const void *host, size_t n)
{
    put16(m, (unsigned)(1 + 2 + n)); /* server_name_list length: type + length + name */
    put8(m, NAME_HOST);
    put_vec16(m, host, n);
}

/*
 * The base extensions, except that the one of type `type` gets body[n]
 * instead, or is left out when body is NULL.  EXT_NONE changes none.
 */
static void exts_with(struct msg *e, long type, const void *body, size_t n)
{
    for (size_t i = 0; i < sizeof base_exts / sizeof base_exts[0]; i++) {
        const struct ext_def *d = &base_exts[i];
        if ((long)d->type != type)
            ext_raw(e, d->type, d->body, d->len);
        else if (body != NULL)
            ext_raw(e, d->type, body, n);
    }
}

static void exts_base(struct msg *e)
{
    exts_with(e, EXT_NONE, NULL, 0);
}

/* legacy_version, random, legacy_session_id of sid_len bytes. */
static void body_head(struct msg *m, unsigned version, size_t sid_len)
{
    put16(m, version);
    for (unsigned i = 0; i < RANDOM_LEN; i++)
        put8(m, i);
    put8(m, (unsigned)sid_len);
    for (size_t i = 0; i < sid_len; i++)
        put8(m, SID_FIRST + (unsigned)i);
}

/* The base body around the extensions block exts (NULL: no block at all). */
static void body_with(struct msg *m, const struct msg *exts)
{
    body_head(m, TLS12, SID_LEN);
    put_vec16(m, base_suites, sizeof base_suites);
    put_vec8(m, base_comp, sizeof base_comp);
    if (exts != NULL)
        put_vec16(m, exts->b, exts->len);
}

static void body_base(struct msg *m)
{
    struct msg e = {.len = 0};
    exts_base(&e);
    body_with(m, &e);
}

static void put_record(struct msg *m, unsigned type, unsigned version, const uint8_t *data,
                       size_t n)
{
    put8(m, type);
    put16(m, version);
    put_vec16(m, data, n);
}

/* A handshake message: msg_type, uint24 length, body. */
static void handshake(struct msg *hs, unsigned type, const struct msg *body)
{
    put8(hs, type);
    put24(hs, (unsigned)body->len);
    put(hs, body->b, body->len);
}

/* A ClientHello with this body, in one handshake record. */
static void frame(struct msg *out, const struct msg *body)
{
    struct msg hs = {.len = 0};
    handshake(&hs, HS_CLIENT_HELLO, body);
    put_record(out, CT_HANDSHAKE, TLS10, hs.b, hs.len);
}

/* The handshake message hs in two records, cut at `at`; the second as given. */
static void frame_split(struct msg *out, const struct msg *hs, size_t at, unsigned type2,
                        unsigned version2)
{
    put_record(out, CT_HANDSHAKE, TLS10, hs->b, at);
    put_record(out, type2, version2, hs->b + at, hs->len - at);
}

/* A ClientHello: the base with the extension of `type` replaced (see exts_with). */
static void hello_with(struct msg *out, long type, const void *body, size_t n)
{
    struct msg e = {.len = 0}, b = {.len = 0};
    exts_with(&e, type, body, n);
    body_with(&b, &e);
    frame(out, &b);
}

/* A ClientHello: the base extensions, then one more. */
static void hello_plus(struct msg *out, unsigned type, const void *body, size_t n)
{
    struct msg e = {.len = 0}, b = {.len = 0};
    exts_base(&e);
    ext_raw(&e, type, body, n);
    body_with(&b, &e);
    frame(out, &b);
}

static void copy_base(struct msg *m)
{
    m->len = 0;
    put(m, base_hello, sizeof base_hello);
}

/* The base's handshake message alone (no record header). */
static void base_handshake(struct msg *hs)
{
    hs->len = 0;
    put(hs, base_hello + REC_HDR_LEN, sizeof base_hello - REC_HDR_LEN);
}

/* ---- checks ------------------------------------------------------------- */

static struct sni_parser parser;

static enum sni_result feed_fresh(const void *data, size_t n)
{
    sni_parser_init(&parser);
    return sni_parser_feed(&parser, data, n);
}

static int view_is(struct sni_view v, const void *data, size_t n)
{
    return v.len == n && (n == 0 || memcmp(v.ptr, data, n) == 0);
}

static void show_got(enum sni_result got)
{
    diag("got %s / %s (returned %s), error_at %zu", sni_result_str(parser.result),
         sni_error_str(parser.error), sni_result_str(got), parser.error_at);
}

/* One case: data[n] fed whole to a fresh parser gives want / want_err. */
static void expect_bytes(const char *what, const void *data, size_t n, enum sni_result want,
                         enum sni_error want_err)
{
    enum sni_result got = feed_fresh(data, n);
    int pass = got == want && parser.result == want && parser.error == want_err;

    if (!ok(pass, "%s: %s / %s", what, sni_result_str(want), sni_error_str(want_err)))
        show_got(got);
}

static void expect(const char *what, const struct msg *m, enum sni_result want,
                   enum sni_error want_err)
{
    expect_bytes(what, m->b, m->len, want, want_err);
}

static void expect_malformed(const char *what, const struct msg *m, enum sni_error want_err)
{
    expect(what, m, SNI_MALFORMED, want_err);
}

/* SNI_OK and the host_name host[n], byte for byte. */
static void expect_host(const char *what, const struct msg *m, const void *host, size_t n)
{
    enum sni_result got = feed_fresh(m->b, m->len);
    int pass = got == SNI_OK && parser.error == SNI_E_NONE && view_is(parser.hello.host, host, n);

    if (!ok(pass, "%s: OK, host of %zu bytes as sent", what, n))
        show_got(got);
}

/* ALPN of the base, walked with sni_alpn_next(). */
static int alpn_is_base(const struct sni_hello *h)
{
    static const char *const want[] = {"h2", "http/1.1"};
    const size_t count = sizeof want / sizeof want[0];
    struct sni_view name;
    size_t pos = 0, i = 0;

    while (sni_alpn_next(h, &pos, &name)) {
        if (i >= count || !view_is(name, want[i], strlen(want[i])))
            return 0;
        i++;
    }
    return i == count;
}

/* ---- the base and positive controls ------------------------------------- */

static void test_base(void)
{
    static const uint8_t versions[] = {0x7a, 0x7a, 0x03, 0x04}; /* GREASE, TLS 1.3 */
    const struct sni_hello *h = &parser.hello;
    struct msg body = {.len = 0}, m = {.len = 0};

    body_base(&body);
    frame(&m, &body);
    ok(m.len == sizeof base_hello && memcmp(m.b, base_hello, m.len) == 0,
       "builder reproduces the annotated base ClientHello byte for byte");
    ok(body.b[BODY_SID] == SID_LEN && body.b[BODY_SUITES + 1] == SUITES_LEN &&
           body.b[BODY_COMP] == COMP_LEN && body.b[BODY_EXTS_LEN + 1] == body.len - BODY_EXTS,
       "base body offsets (session_id, cipher_suites, compression, extensions) are right");

    expect_host("base ClientHello", &m, BASE_HOST, strlen(BASE_HOST));
    ok(h->legacy_version == TLS12 && h->max_version == TLS13,
       "base: legacy_version 0x0303, max_version 0x0304 (GREASE 0x7a7a skipped)");
    ok(view_is(h->versions, versions, sizeof versions), "base: supported_versions list as sent");
    ok(alpn_is_base(h), "base: sni_alpn_next walks \"h2\", \"http/1.1\", then ends");
    ok(!h->ech, "base: no ECH");
    ok(h->record_bytes == sizeof base_hello, "base: record_bytes is the whole record (139)");
}

/* Every proper prefix, fed whole to a fresh parser, asks for more. */
static void test_prefixes(void)
{
    size_t n;

    for (n = 0; n < sizeof base_hello; n++)
        if (feed_fresh(base_hello, n) != SNI_NEED_MORE)
            break;
    if (!ok(n == sizeof base_hello, "every proper prefix of the base (0..138 bytes): NEED_MORE"))
        diag("prefix of %zu bytes: %s / %s", n, sni_result_str(parser.result),
             sni_error_str(parser.error));
}

static void test_byte_at_a_time(void)
{
    enum sni_result r = SNI_NEED_MORE;
    size_t i;

    sni_parser_init(&parser);
    for (i = 0; i < sizeof base_hello && r == SNI_NEED_MORE; i++)
        r = sni_parser_feed(&parser, base_hello + i, 1);
    ok(r == SNI_OK && i == sizeof base_hello &&
           view_is(parser.hello.host, BASE_HOST, strlen(BASE_HOST)),
       "base fed one byte at a time: OK exactly on the last byte");
}

/* The base's handshake message in two records, cut at every offset. */
static void test_split_records(void)
{
    struct msg hs, m;
    size_t at;

    base_handshake(&hs);
    for (at = 1; at < hs.len; at++) {
        m.len = 0;
        frame_split(&m, &hs, at, CT_HANDSHAKE, TLS12);
        if (feed_fresh(m.b, m.len) != SNI_OK ||
            !view_is(parser.hello.host, BASE_HOST, strlen(BASE_HOST)) ||
            parser.hello.record_bytes != m.len)
            break;
    }
    if (!ok(at == hs.len, "base split into two records at every offset: OK, record_bytes = both"))
        diag("cut at %zu: %s / %s", at, sni_result_str(parser.result), sni_error_str(parser.error));
}

/* ---- not TLS, SSLv2 ----------------------------------------------------- */

static void test_not_tls(void)
{
    static const char get[] = "GET / HTTP/1.1\r\n";
    static const char get_lower[] = "get / HTTP/1.1\r\n";
    static const uint8_t zero_one[] = {0x00, 0x01};
    struct msg m;

    expect_bytes("HTTP request line \"GET / HTTP/1.1\\r\\n\"", get, sizeof get - 1, SNI_NOT_TLS,
                 SNI_E_HTTP);
    /* Only 'G': an upper-case first byte decides alone. */
    expect_bytes("first byte 'G' alone", get, 1, SNI_NOT_TLS, SNI_E_HTTP);
    /* The two ends of 'A'..'Z'. */
    expect_bytes("first byte 'A' alone", "A", 1, SNI_NOT_TLS, SNI_E_HTTP);
    expect_bytes("first byte 'Z' alone", "Z", 1, SNI_NOT_TLS, SNI_E_HTTP);
    /* Lower case is not a request line by the rule ('A'..'Z' only). */
    expect_bytes("\"get / ...\" (lower case)", get_lower, sizeof get_lower - 1, SNI_NOT_TLS,
                 SNI_E_NOT_HANDSHAKE);
    expect_bytes("bytes 00 01", zero_one, sizeof zero_one, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
    expect_bytes("byte 00 alone", zero_one, 1, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
    /* 0x16 alone: the second byte (version major) is still to come. */
    expect_bytes("byte 16 alone", base_hello, 1, SNI_NEED_MORE, SNI_E_NONE);
    /* Base with record version major 0x03 -> 0x00: "16 00 01 00 86 ...". */
    copy_base(&m);
    m.b[OFF_REC_VERSION] = 0x00;
    expect("record \"16 00 ...\": version major 0", &m, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
    expect_bytes("bytes 16 00 alone", m.b, 2, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
}

/* TLS records of other types where the ClientHello should start. */
static void test_first_record_type(void)
{
    /* clang-format off */
    static const uint8_t ccs_first[] = {
        0x14,       /* type: change_cipher_spec(20) */
        0x03, 0x00, /* legacy_record_version: SSL 3.0 */
        0x00, 0x00, /* length: 0 */
    };
    static const uint8_t app_data[] = {
        0x17,       /* type: application_data(23) */
        0x03, 0x03, /* legacy_record_version: TLS 1.2 */
    };
    /* clang-format on */
    struct msg m = {.len = 0};

    /* An empty ChangeCipherSpec record, then the base ClientHello. */
    put(&m, ccs_first, sizeof ccs_first);
    put(&m, base_hello, sizeof base_hello);
    expect("empty ChangeCipherSpec record before the ClientHello", &m, SNI_MALFORMED,
           SNI_E_RECORD_TYPE);
    expect_bytes("bytes 17 03 (application_data)", app_data, sizeof app_data, SNI_MALFORMED,
                 SNI_E_RECORD_TYPE);
    /* 0x14 alone: TLS-shaped only if the version byte says so. */
    expect_bytes("byte 14 alone", ccs_first, 1, SNI_NEED_MORE, SNI_E_NONE);
    expect_bytes("bytes 14 00", "\x14\x00", 2, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
    /* 0x19 is past the last ContentType (heartbeat, 24): not TLS at once. */
    expect_bytes("byte 19 alone", "\x19", 1, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE);
}

/* An SSL 2.0-compatible CLIENT-HELLO (RFC 5246 Appendix E.2). */
/* clang-format off */
static const uint8_t sslv2_hello[] = {
    0x80, 0x2e,       /* 2-byte header: high bit set, length 46 */
    0x01,             /* msg_type: CLIENT-HELLO */
    0x03, 0x01,       /* version: TLS 1.0 */
    0x00, 0x15,       /* cipher_spec_length: 21 (seven 3-byte specs) */
    0x00, 0x00,       /* session_id_length: 0 */
    0x00, 0x10,       /* challenge_length: 16 */
    0x01, 0x00, 0x80, /* SSL_CK_RC4_128_WITH_MD5 */
    0x00, 0x00, 0x2f, /* TLS_RSA_WITH_AES_128_CBC_SHA */
    0x00, 0x00, 0x35, /* TLS_RSA_WITH_AES_256_CBC_SHA */
    0x00, 0x00, 0x0a, /* TLS_RSA_WITH_3DES_EDE_CBC_SHA */
    0x00, 0x00, 0x05, /* TLS_RSA_WITH_RC4_128_SHA */
    0x00, 0x00, 0x04, /* TLS_RSA_WITH_RC4_128_MD5 */
    0x00, 0x00, 0xff, /* TLS_EMPTY_RENEGOTIATION_INFO_SCSV */
    /* challenge: 16 bytes */
    0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf,
};
/* clang-format on */

static void test_sslv2(void)
{
    uint8_t other[sizeof sslv2_hello];

    expect_bytes("SSLv2 CLIENT-HELLO (80 2e 01 03 01 ...)", sslv2_hello, sizeof sslv2_hello,
                 SNI_MALFORMED, SNI_E_SSLV2);
    /* The third byte (msg_type 1) decides. */
    expect_bytes("SSLv2 header + msg_type alone (80 2e 01)", sslv2_hello, 3, SNI_MALFORMED,
                 SNI_E_SSLV2);
    expect_bytes("SSLv2 header alone (80 2e)", sslv2_hello, 2, SNI_NEED_MORE, SNI_E_NONE);
    /* msg_type 1 -> 4: high bit set but not a CLIENT-HELLO. */
    memcpy(other, sslv2_hello, sizeof other);
    other[2] = 0x04;
    expect_bytes("high bit set, third byte 04 (not CLIENT-HELLO)", other, sizeof other, SNI_NOT_TLS,
                 SNI_E_NOT_HANDSHAKE);
}

/* ---- record layer ------------------------------------------------------- */

/* A ClientHello whose handshake message is hs_len bytes: base + padding ext. */
static void padded_handshake(struct msg *hs, size_t hs_len)
{
    struct msg body = {.len = 0}, exts = {.len = 0}, pad = {.len = 0};

    body_base(&body);
    put_fill(&pad, 0x00, hs_len - HS_HDR_LEN - body.len - EXT_HDR_LEN);
    exts_base(&exts);
    ext_raw(&exts, EXT_PADDING, pad.b, pad.len);
    body.len = 0;
    body_with(&body, &exts);
    hs->len = 0;
    handshake(hs, HS_CLIENT_HELLO, &body);
}

static void test_record_lengths(void)
{
    /* clang-format off */
    static const uint8_t empty_record[] = {
        0x16,       /* type: handshake */
        0x03, 0x01, /* legacy_record_version: TLS 1.0 */
        0x00, 0x00, /* length: 0 */
    };
    /* clang-format on */
    struct msg hs, m;

    /* Base with record length 134 -> 16385 (2^14 + 1). */
    copy_base(&m);
    set16(&m, OFF_REC_LEN, SNI_RECORD_MAX + 1);
    expect_malformed("record length 16385 (2^14 + 1)", &m, SNI_E_RECORD_LENGTH);
    /* Base with record length 134 -> 65535. */
    set16(&m, OFF_REC_LEN, 0xffff);
    expect_malformed("record length 65535", &m, SNI_E_RECORD_LENGTH);
    expect_bytes("zero-length first record (16 03 01 00 00)", empty_record, sizeof empty_record,
                 SNI_MALFORMED, SNI_E_RECORD_EMPTY);

    /* Base hello cut in three records, the middle one of length 0. */
    base_handshake(&hs);
    m.len = 0;
    put_record(&m, CT_HANDSHAKE, TLS10, hs.b, SPLIT_AT);
    put_record(&m, CT_HANDSHAKE, TLS12, hs.b + SPLIT_AT, 0);
    put_record(&m, CT_HANDSHAKE, TLS12, hs.b + SPLIT_AT, hs.len - SPLIT_AT);
    expect_malformed("zero-length second record", &m, SNI_E_RECORD_EMPTY);

    /* Handshake message of exactly SNI_HANDSHAKE_MAX = one record of 2^14. */
    padded_handshake(&hs, SNI_HANDSHAKE_MAX);
    m.len = 0;
    put_record(&m, CT_HANDSHAKE, TLS10, hs.b, hs.len);
    expect_host("handshake of SNI_HANDSHAKE_MAX bytes in a record of exactly 2^14", &m, BASE_HOST,
                strlen(BASE_HOST));
}

static void test_records_later(void)
{
    static const uint8_t extra[4] = {0x01, 0x00, 0x00, 0x00}; /* a stray handshake header */
    struct msg hs, m = {.len = 0};

    base_handshake(&hs);
    /* Second record type 0x16 -> 0x17 (application_data). */
    frame_split(&m, &hs, SPLIT_AT, CT_APP_DATA, TLS12);
    expect_malformed("second record of type 0x17", &m, SNI_E_RECORD_TYPE);
    /* Second record version 0x0303 -> 0x0203. */
    m.len = 0;
    frame_split(&m, &hs, SPLIT_AT, CT_HANDSHAKE, 0x0203);
    expect_malformed("second record version 0x0203", &m, SNI_E_RECORD_VERSION);
    /* Base handshake message + 4 more bytes inside the same record. */
    put(&hs, extra, sizeof extra);
    m.len = 0;
    put_record(&m, CT_HANDSHAKE, TLS10, hs.b, hs.len);
    expect_malformed("4 bytes after the ClientHello in its record", &m, SNI_E_TRAILING);
    /* Base with handshake length 130 -> 129: its last byte is left in the record. */
    copy_base(&m);
    set24(&m, OFF_HS_LEN, sizeof base_hello - REC_HDR_LEN - HS_HDR_LEN - 1);
    expect_malformed("handshake length 1 less than the record holds", &m, SNI_E_TRAILING);
}

/* ---- handshake header --------------------------------------------------- */

static void test_handshake(void)
{
    struct msg hs, m;

    /* Base with msg_type client_hello(1) -> server_hello(2). */
    copy_base(&m);
    m.b[OFF_HS_TYPE] = HS_SERVER_HELLO;
    expect_malformed("handshake type 2 (ServerHello)", &m, SNI_E_HANDSHAKE_TYPE);
    /* Base with handshake length 130 -> 0xffffff. */
    copy_base(&m);
    set24(&m, OFF_HS_LEN, 0xffffff);
    expect_malformed("handshake length 0xffffff", &m, SNI_E_HANDSHAKE_LENGTH);
    /* A real message one byte over SNI_HANDSHAKE_MAX, in records of 2^14 and 1. */
    padded_handshake(&hs, SNI_HANDSHAKE_MAX + 1);
    m.len = 0;
    frame_split(&m, &hs, SNI_RECORD_MAX, CT_HANDSHAKE, TLS12);
    expect_malformed("handshake of SNI_HANDSHAKE_MAX + 1 bytes", &m, SNI_E_HANDSHAKE_LENGTH);
}

/* ---- ClientHello fixed fields ------------------------------------------- */

/*
 * A ClientHello with these fixed fields and the base extensions:
 * legacy_version, a session_id of sid_len bytes, suites[ns], comp[nc].
 */
static void hello_fields(struct msg *out, unsigned version, size_t sid_len, const uint8_t *suites,
                         size_t ns, const uint8_t *comp, size_t nc)
{
    struct msg e = {.len = 0}, b = {.len = 0};

    exts_base(&e);
    body_head(&b, version, sid_len);
    put_vec16(&b, suites, ns);
    put_vec8(&b, comp, nc);
    put_vec16(&b, e.b, e.len);
    out->len = 0;
    frame(out, &b);
}

/* The base body cut to n bytes, framed with lengths that match. */
static void hello_cut(struct msg *out, size_t n)
{
    struct msg b = {.len = 0};

    body_base(&b);
    b.len = n;
    out->len = 0;
    frame(out, &b);
}

static void test_hello_short(void)
{
    struct msg m;

    /* Body of 33 bytes: legacy_version + 31 of the 32 random bytes. */
    hello_cut(&m, BODY_VERSION_RANDOM - 1);
    expect_malformed("body ends inside random (33 bytes)", &m, SNI_E_HELLO_SHORT);
    /* Body of 0 bytes: handshake length 0. */
    hello_cut(&m, 0);
    expect_malformed("empty ClientHello body", &m, SNI_E_HELLO_SHORT);
}

static void test_hello_version(void)
{
    struct msg m;

    /* legacy_version 0x0303 -> 0x0200. */
    hello_fields(&m, 0x0200, SID_LEN, base_suites, SUITES_LEN, base_comp, COMP_LEN);
    expect_malformed("legacy_version 0x0200", &m, SNI_E_HELLO_VERSION);
}

static void test_session_id(void)
{
    struct msg m;

    /* legacy_session_id of 33 bytes (length byte 33, 33 bytes follow). */
    hello_fields(&m, TLS12, SID_LEN + 1, base_suites, SUITES_LEN, base_comp, COMP_LEN);
    expect_malformed("session_id length 33", &m, SNI_E_SESSION_ID);
    /* Body ends 10 bytes into the 32-byte session_id. */
    hello_cut(&m, BODY_SID + 1 + 10);
    expect_malformed("session_id runs past the body", &m, SNI_E_SESSION_ID);
}

static void test_cipher_suites(void)
{
    struct msg m;

    /* cipher_suites length 6 -> 0, no suites. */
    hello_fields(&m, TLS12, SID_LEN, NULL, 0, base_comp, COMP_LEN);
    expect_malformed("cipher_suites length 0", &m, SNI_E_CIPHER_SUITES);
    /* cipher_suites length 6 -> 3: 1a 1a 13. */
    hello_fields(&m, TLS12, SID_LEN, base_suites, 3, base_comp, COMP_LEN);
    expect_malformed("cipher_suites length 3 (odd)", &m, SNI_E_CIPHER_SUITES);
    /* Body ends 3 bytes into the 6 bytes of cipher_suites. */
    hello_cut(&m, BODY_SUITES + 2 + 3);
    expect_malformed("cipher_suites run past the body", &m, SNI_E_CIPHER_SUITES);
}

static void test_compression(void)
{
    struct msg m;

    /* compression_methods length 1 -> 0, no method. */
    hello_fields(&m, TLS12, SID_LEN, base_suites, SUITES_LEN, NULL, 0);
    expect_malformed("compression_methods length 0", &m, SNI_E_COMPRESSION);
    /* Body ends after the compression_methods length byte. */
    hello_cut(&m, BODY_COMP + 1);
    expect_malformed("compression_methods run past the body", &m, SNI_E_COMPRESSION);
}

/* ---- extensions block --------------------------------------------------- */

static void test_extensions_block(void)
{
    struct msg b = {.len = 0}, m = {.len = 0};
    unsigned exts_len;

    body_base(&b);
    exts_len = (unsigned)(b.len - BODY_EXTS);
    /* extensions length 51 -> 52: one byte more than the body holds. */
    set16(&b, BODY_EXTS_LEN, exts_len + 1);
    frame(&m, &b);
    expect_malformed("extensions length 1 more than remains", &m, SNI_E_EXTENSIONS);
    /* extensions length 51 -> 47: the last (GREASE) extension is left outside. */
    set16(&b, BODY_EXTS_LEN, exts_len - BASE_LAST_EXT);
    m.len = 0;
    frame(&m, &b);
    expect_malformed("extensions length 4 less than remains", &m, SNI_E_EXTENSIONS);
    /* Body ends after the first byte of the extensions length. */
    hello_cut(&m, BODY_EXTS_LEN + 1);
    expect_malformed("extensions length cut to 1 byte", &m, SNI_E_EXTENSIONS);
}

/* Base extensions, then an extension header that says 1 byte and has none. */
static void test_extension_overrun(void)
{
    struct msg e = {.len = 0}, b = {.len = 0}, m = {.len = 0};

    exts_base(&e);
    put16(&e, EXT_PADDING); /* type: padding */
    put16(&e, 1);           /* length: 1, but the block ends here */
    body_with(&b, &e);
    frame(&m, &b);
    expect_malformed("last extension's length runs past the block", &m, SNI_E_EXTENSION);
    /* Base extensions, then only the 2-byte type of another one. */
    e.len = b.len = m.len = 0;
    exts_base(&e);
    put16(&e, EXT_PADDING);
    body_with(&b, &e);
    frame(&m, &b);
    expect_malformed("extension header cut after its type", &m, SNI_E_EXTENSION);
}

static void test_duplicates(void)
{
    struct msg m = {.len = 0};

    /* Base + a second ALPN extension (same body). */
    hello_plus(&m, EXT_ALPN, base_alpn_body, sizeof base_alpn_body);
    expect_malformed("two ALPN extensions", &m, SNI_E_EXT_DUPLICATE);
    /* Base + a second empty GREASE extension of the same type 0xdada. */
    m.len = 0;
    hello_plus(&m, EXT_GREASE, "", 0);
    expect_malformed("GREASE extension 0xdada twice", &m, SNI_E_EXT_DUPLICATE);
    /* Base + a second server_name extension (same body). */
    m.len = 0;
    hello_plus(&m, EXT_SERVER_NAME, base_sni_body, sizeof base_sni_body);
    expect_malformed("two server_name extensions", &m, SNI_E_EXT_DUPLICATE);
    /* Base + an empty GREASE extension of another type 0x0a0a: no duplicate. */
    m.len = 0;
    hello_plus(&m, EXT_GREASE_2, "", 0);
    expect_host("GREASE extensions 0xdada and 0x0a0a", &m, BASE_HOST, strlen(BASE_HOST));
}

/*
 * The base extensions, then n empty extensions of distinct unknown types
 * 0x1000.. (above 63, so the parser keeps them for its sorted duplicate
 * check), the one at index dup_at repeating the type of index 0 (none when
 * dup_at is 0).
 */
static void hello_many(struct msg *out, size_t n, size_t dup_at)
{
    static struct msg e, b;

    e.len = b.len = 0;
    exts_base(&e);
    for (size_t i = 0; i < n; i++)
        ext_raw(&e, 0x1000 + (unsigned)(i == dup_at && dup_at ? 0 : i), "", 0);
    body_with(&b, &e);
    frame(out, &b);
}

static void test_many_extensions(void)
{
    static struct msg m;
    /* As many 4-byte empty extensions as fit in a 16 KiB handshake message. */
    size_t most = (SNI_HANDSHAKE_MAX - HS_HDR_LEN - sizeof base_hello) / EXT_HDR_LEN;

    m.len = 0;
    hello_many(&m, 40, 0);
    expect_host("40 more extensions of distinct types", &m, BASE_HOST, strlen(BASE_HOST));
    m.len = 0;
    hello_many(&m, 40, 39);
    expect_malformed("40 more extensions, the last repeating the first", &m, SNI_E_EXT_DUPLICATE);
    m.len = 0;
    hello_many(&m, most, 0);
    expect_host("as many distinct extensions as fit in 16 KiB", &m, BASE_HOST, strlen(BASE_HOST));
    m.len = 0;
    hello_many(&m, most, most / 2);
    expect_malformed("as many extensions as fit, one repeated half-way", &m, SNI_E_EXT_DUPLICATE);
}

/* ---- no SNI ------------------------------------------------------------- */

static void test_no_sni(void)
{
    const struct sni_hello *h = &parser.hello;
    struct msg e = {.len = 0}, b = {.len = 0}, m = {.len = 0};

    /* TLS 1.2 form: the body ends after compression_methods. */
    body_with(&b, NULL);
    frame(&m, &b);
    expect("no extensions block (TLS 1.2 form)", &m, SNI_NO_SNI, SNI_E_NONE);
    ok(h->host.len == 0 && h->legacy_version == TLS12 && h->max_version == h->legacy_version &&
           h->record_bytes == m.len,
       "no extensions block: no host, max_version == legacy_version (0x0303)");
    /* Extensions block present, length 0. */
    b.len = m.len = 0;
    body_with(&b, &e);
    frame(&m, &b);
    expect("empty extensions block", &m, SNI_NO_SNI, SNI_E_NONE);
    /* The base without its server_name extension. */
    m.len = 0;
    hello_with(&m, EXT_SERVER_NAME, NULL, 0);
    expect("base without server_name", &m, SNI_NO_SNI, SNI_E_NONE);
    ok(h->host.len == 0 && h->max_version == TLS13 && alpn_is_base(h),
       "base without server_name: no host, max_version 0x0304, ALPN kept");
}

/* ---- server_name structure ---------------------------------------------- */

#define EXAMPLE_COM 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'c', 'o', 'm'
#define EXAMPLE_ORG 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'o', 'r', 'g'

/* The base with server_name body b[] instead of its own. */
/*
 * The base with the body of extension `type` replaced by body[n] (appended
 * when the base has no such extension) must be malformed with err.
 */
static void expect_ext(const char *what, unsigned type, const void *body, size_t n,
                       enum sni_error err)
{
    struct msg m = {.len = 0};
    int in_base = 0;

    for (size_t i = 0; i < sizeof base_exts / sizeof base_exts[0]; i++)
        in_base |= base_exts[i].type == type;
    if (in_base)
        hello_with(&m, type, body, n);
    else
        hello_plus(&m, type, body, n);
    expect_malformed(what, &m, err);
}

#define SNI_CASE(what, body, err) expect_ext(what, EXT_SERVER_NAME, body, sizeof body, err)

static void test_sni_list(void)
{
    /* clang-format off */
    static const uint8_t list_long[] = {
        0x00, 0x0f,       /* server_name_list length: 15, but 14 bytes follow */
        0x00, 0x00, 0x0b, /* host_name, length 11 */
        EXAMPLE_COM,
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t list_short[] = {
        0x00, 0x0d,       /* server_name_list length: 13, but 14 bytes follow */
        0x00, 0x00, 0x0b, /* host_name, length 11 */
        EXAMPLE_COM,
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t list_empty[] = {
        0x00, 0x00, /* server_name_list length: 0 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t name_long[] = {
        0x00, 0x0e,       /* server_name_list length: 14 */
        0x00, 0x00, 0x0c, /* host_name, length 12, but 11 bytes left in the list */
        EXAMPLE_COM,
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t entry_cut[] = {
        0x00, 0x02, /* server_name_list length: 2 */
        0x00, 0x00, /* host_name, then 1 of the 2 length bytes */
    };
    /* clang-format on */
    struct msg m = {.len = 0};

    SNI_CASE("server_name_list length 1 more than the extension", list_long, SNI_E_SNI_LIST);
    SNI_CASE("server_name_list length 1 less than the extension", list_short, SNI_E_SNI_LIST);
    SNI_CASE("empty server_name_list", list_empty, SNI_E_SNI_LIST);
    SNI_CASE("host_name length runs past the list", name_long, SNI_E_SNI_LIST);
    SNI_CASE("server_name_list ends inside host_name length", entry_cut, SNI_E_SNI_LIST);
    /* server_name extension of length 0: no list length at all. */
    hello_with(&m, EXT_SERVER_NAME, "", 0);
    expect_malformed("empty server_name extension body", &m, SNI_E_SNI_LIST);
}

static void test_sni_entries(void)
{
    /* clang-format off */
    static const uint8_t type_one[] = {
        0x00, 0x0e,       /* server_name_list length: 14 */
        0x01, 0x00, 0x0b, /* name_type 1 (not host_name), length 11 */
        EXAMPLE_COM,
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t two_hosts[] = {
        0x00, 0x1c,       /* server_name_list length: 28 */
        0x00, 0x00, 0x0b, /* host_name, length 11 */
        EXAMPLE_COM,
        0x00, 0x00, 0x0b, /* host_name again, length 11 */
        EXAMPLE_ORG,
    };
    /* clang-format on */

    SNI_CASE("name_type 1 (not host_name)", type_one, SNI_E_SNI_TYPE);
    SNI_CASE("two host_names in one list", two_hosts, SNI_E_SNI_TWICE);
}

/* ---- host_name contents ------------------------------------------------- */

/* The base with host_name host[n]; checks want/err, and the bytes when OK. */
static void check_host(const char *what, const void *host, size_t n, enum sni_result want,
                       enum sni_error err)
{
    struct msg body = {.len = 0}, m = {.len = 0};

    sni_body(&body, host, n);
    hello_with(&m, EXT_SERVER_NAME, body.b, body.len);
    if (want == SNI_OK)
        expect_host(what, &m, host, n);
    else
        expect(what, &m, want, err);
}

struct host_case {
    const char *what;
    const char *host;
    size_t len;
    enum sni_result want;
    enum sni_error err;
};

#define HOST(s) s, sizeof(s) - 1

static const struct host_case host_cases[] = {
    {"zero-length host_name", HOST(""), SNI_MALFORMED, SNI_E_SNI_EMPTY},
    {"NUL inside host_name \"exa\\0mple.com\"", HOST("exa\0mple.com"), SNI_MALFORMED,
     SNI_E_SNI_NUL},
    {"empty label \"a..b\"", HOST("a..b"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"leading dot \".example.com\"", HOST(".example.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"trailing dot \"example.com.\"", HOST("example.com."), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"underscore \"exa_mple.com\"", HOST("exa_mple.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"space \"exa mple.com\"", HOST("exa mple.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"byte 0x80 \"exa\\x80mple.com\"", HOST("exa\x80mple.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"label starts with '-' \"-example.com\"", HOST("-example.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"label ends with '-' \"example-.com\"", HOST("example-.com"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"last label starts with '-' \"example.-com\"", HOST("example.-com"), SNI_MALFORMED,
     SNI_E_SNI_NAME},
    {"IPv4 literal \"127.0.0.1\"", HOST("127.0.0.1"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"all-digit last label \"example.123\"", HOST("example.123"), SNI_MALFORMED, SNI_E_SNI_NAME},
    {"all-digit first label \"123.example\"", HOST("123.example"), SNI_OK, SNI_E_NONE},
    {"punycode \"xn--bcher-kva.example\"", HOST("xn--bcher-kva.example"), SNI_OK, SNI_E_NONE},
    {"upper case \"Example.COM\" (case kept)", HOST("Example.COM"), SNI_OK, SNI_E_NONE},
};

static void test_host_table(void)
{
    for (size_t i = 0; i < sizeof host_cases / sizeof host_cases[0]; i++) {
        const struct host_case *c = &host_cases[i];
        check_host(c->what, c->host, c->len, c->want, c->err);
    }
}

/* Labels of 'a' of the given lengths, joined by dots. */
static void name_of(struct msg *name, const size_t *labels, size_t count)
{
    name->len = 0;
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            put8(name, '.');
        put_fill(name, 'a', labels[i]);
    }
}

static void test_host_lengths(void)
{
    static const size_t len253[] = {LABEL_MAX, LABEL_MAX, LABEL_MAX, 61}; /* 3*64 + 61 */
    static const size_t len254[] = {LABEL_MAX, LABEL_MAX, LABEL_MAX, 62}; /* 3*64 + 62 */
    static const size_t label63[] = {LABEL_MAX, 3};
    static const size_t label64[] = {LABEL_MAX + 1, 3};
    struct msg name;

    name_of(&name, len253, 4);
    check_host("host_name of 253 bytes (4 valid labels)", name.b, name.len, SNI_OK, SNI_E_NONE);
    name_of(&name, len254, 4);
    check_host("host_name of 254 bytes", name.b, name.len, SNI_MALFORMED, SNI_E_SNI_TOO_LONG);
    name_of(&name, label63, 2);
    check_host("label of 63 bytes", name.b, name.len, SNI_OK, SNI_E_NONE);
    name_of(&name, label64, 2);
    check_host("label of 64 bytes", name.b, name.len, SNI_MALFORMED, SNI_E_SNI_NAME);
}

/* ---- ALPN, supported_versions ------------------------------------------- */

#define ALPN_CASE(what, body) expect_ext(what, EXT_ALPN, body, sizeof body, SNI_E_ALPN)

static void test_alpn(void)
{
    /* clang-format off */
    static const uint8_t empty_name[] = {
        0x00, 0x04,     /* protocol_name_list length: 4 */
        0x02, 'h', '2', /* "h2" */
        0x00,           /* name length 0 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t list_long[] = {
        0x00, 0x0d, /* protocol_name_list length: 13, but 12 bytes follow */
        0x02, 'h', '2', 0x08, 'h', 't', 't', 'p', '/', '1', '.', '1',
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t list_short[] = {
        0x00, 0x0b, /* protocol_name_list length: 11, but 12 bytes follow */
        0x02, 'h', '2', 0x08, 'h', 't', 't', 'p', '/', '1', '.', '1',
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t list_empty[] = {
        0x00, 0x00, /* protocol_name_list length: 0 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t name_long[] = {
        0x00, 0x0c,                                   /* protocol_name_list length: 12 */
        0x02, 'h', '2',                               /* "h2" */
        0x09, 'h', 't', 't', 'p', '/', '1', '.', '1', /* length 9, 8 bytes left */
    };
    /* clang-format on */

    ALPN_CASE("ALPN with an empty protocol name", empty_name);
    ALPN_CASE("ALPN list length 1 more than the extension", list_long);
    ALPN_CASE("ALPN list length 1 less than the extension", list_short);
    ALPN_CASE("ALPN empty protocol_name_list", list_empty);
    ALPN_CASE("ALPN name length runs past the list", name_long);
}

#define VERSIONS_CASE(what, body) expect_ext(what, EXT_VERSIONS, body, sizeof body, SNI_E_VERSIONS)

static void test_versions(void)
{
    /* clang-format off */
    static const uint8_t odd[] = {
        0x03,             /* versions length: 3 (odd) */
        0x7a, 0x7a, 0x03, /* GREASE, then half a version */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t len_long[] = {
        0x06,                   /* versions length: 6, but 4 bytes follow */
        0x7a, 0x7a, 0x03, 0x04, /* GREASE, TLS 1.3 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t len_short[] = {
        0x02,                   /* versions length: 2, but 4 bytes follow */
        0x7a, 0x7a, 0x03, 0x04, /* GREASE, TLS 1.3 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t empty[] = {
        0x00, /* versions length: 0 */
    };
    /* clang-format on */
    /* clang-format off */
    static const uint8_t grease_only[] = {
        0x02,       /* versions length: 2 */
        0x7a, 0x7a, /* GREASE */
    };
    /* clang-format on */
    struct msg m = {.len = 0};

    VERSIONS_CASE("supported_versions of odd length", odd);
    VERSIONS_CASE("supported_versions length byte 6 for 4 bytes", len_long);
    VERSIONS_CASE("supported_versions length byte 2 for 4 bytes", len_short);
    VERSIONS_CASE("empty supported_versions list", empty);
    /* Only a GREASE version: max_version falls back to legacy_version. */
    hello_with(&m, EXT_VERSIONS, grease_only, sizeof grease_only);
    expect_host("supported_versions {GREASE} only", &m, BASE_HOST, strlen(BASE_HOST));
    ok(parser.hello.max_version == TLS12, "supported_versions {GREASE} only: max_version 0x0303");
}

/* ---- ECH ---------------------------------------------------------------- */

/* An outer ECHClientHello (draft-ietf-tls-esni §5). */
static void ech_outer(struct msg *m)
{
    struct msg enc = {.len = 0}, payload = {.len = 0};

    put_fill(&enc, 0x11, ECH_ENC_LEN);
    put_fill(&payload, 0x22, ECH_PAYLOAD_LEN);
    put8(m, ECH_OUTER);                   /* type: outer(0) */
    put16(m, HPKE_HKDF_SHA256);           /* cipher_suite.kdf_id: 0x0001 */
    put16(m, HPKE_AES_128_GCM);           /* cipher_suite.aead_id: 0x0001 */
    put8(m, ECH_CONFIG_ID);               /* config_id: 0x42 */
    put_vec16(m, enc.b, enc.len);         /* enc<0..2^16-1>: 32 bytes */
    put_vec16(m, payload.b, payload.len); /* payload<1..2^16-1>: 100 bytes */
}

static void test_ech_ok(void)
{
    static const uint8_t inner[] = {ECH_INNER /* type: inner(1), nothing else */};
    const struct sni_hello *h = &parser.hello;
    struct msg ech = {.len = 0}, m = {.len = 0};

    ech_outer(&ech);
    hello_plus(&m, EXT_ECH, ech.b, ech.len);
    expect_host("base + outer ECH", &m, BASE_HOST, strlen(BASE_HOST));
    ok(h->ech && h->ech_type == ECH_OUTER && h->ech_config_id == ECH_CONFIG_ID,
       "outer ECH: ech true, ech_type 0, ech_config_id 0x42");
    m.len = 0;
    hello_plus(&m, EXT_ECH, inner, sizeof inner);
    expect_host("base + inner ECH", &m, BASE_HOST, strlen(BASE_HOST));
    ok(h->ech && h->ech_type == ECH_INNER, "inner ECH: ech true, ech_type 1");
}

#define ECH_CASE(what, body, n) expect_ext(what, EXT_ECH, body, n, SNI_E_ECH)

static void test_ech_bad(void)
{
    /* clang-format off */
    static const uint8_t in_suite[] = {
        ECH_OUTER,  /* type: outer */
        0x00, 0x01, /* kdf_id */
        0x00,       /* aead_id: 1 of 2 bytes */
    };
    /* clang-format on */
    struct msg ech = {.len = 0};

    ECH_CASE("ECH extension of length 0", "", 0);
    ECH_CASE("outer ECH cut inside cipher_suite", in_suite, sizeof in_suite);
    ech_outer(&ech);
    /* Outer ECH cut after config_id: no enc length. */
    ECH_CASE("outer ECH cut after config_id", ech.b, 1 + 2 + 2 + 1);
    /* Outer ECH cut 10 bytes into its 100-byte payload. */
    ECH_CASE("outer ECH payload runs past the extension", ech.b, ech.len - ECH_PAYLOAD_LEN + 10);
    /* ECHClientHelloType 2: neither outer(0) nor inner(1). */
    ECH_CASE("ECH of unknown type 2", "\x02", 1);
    /* Inner ECH is empty after its type byte: one byte more is malformed. */
    ECH_CASE("inner ECH with a byte after its type", "\x01\x00", 2);
}

/* ---- stickiness and bytes not taken ------------------------------------- */

static void test_sticky_ok(void)
{
    /* clang-format off */
    static const uint8_t app_data[] = {
        0x17,             /* type: application_data */
        0x03, 0x03,       /* legacy_record_version: TLS 1.2 */
        0x00, 0x03,       /* length: 3 */
        0xaa, 0xbb, 0xcc, /* early data */
    };
    /* clang-format on */
    struct msg m;
    enum sni_result r;

    copy_base(&m);
    put(&m, app_data, sizeof app_data);
    expect_host("base followed by an application_data record", &m, BASE_HOST, strlen(BASE_HOST));
    ok(parser.hello.record_bytes == sizeof base_hello,
       "base + 0x17 record: record_bytes 139, the 0x17 record is not taken");
    r = sni_parser_feed(&parser, app_data, sizeof app_data);
    ok(r == SNI_OK && parser.result == SNI_OK && parser.hello.record_bytes == sizeof base_hello &&
           view_is(parser.hello.host, BASE_HOST, strlen(BASE_HOST)),
       "feeding more after OK: OK again, record_bytes and host unchanged");

    /* All but the last byte, then the last byte with the 0x17 record. */
    sni_parser_init(&parser);
    r = sni_parser_feed(&parser, m.b, sizeof base_hello - 1);
    r = r == SNI_NEED_MORE
            ? sni_parser_feed(&parser, m.b + sizeof base_hello - 1, m.len - (sizeof base_hello - 1))
            : r;
    ok(r == SNI_OK && parser.hello.record_bytes == sizeof base_hello,
       "base in two feeds, 0x17 record in the second: OK, record_bytes 139");
}

static void test_sticky_bad(void)
{
    struct msg m;
    enum sni_result r;

    /* Handshake type 2, then the valid base fed on top. */
    copy_base(&m);
    m.b[OFF_HS_TYPE] = HS_SERVER_HELLO;
    feed_fresh(m.b, m.len);
    r = sni_parser_feed(&parser, base_hello, sizeof base_hello);
    ok(r == SNI_MALFORMED && parser.error == SNI_E_HANDSHAKE_TYPE,
       "feeding more after MALFORMED: MALFORMED / handshake type again");
    /* 'G', then the valid base. */
    feed_fresh("G", 1);
    r = sni_parser_feed(&parser, base_hello, sizeof base_hello);
    ok(r == SNI_NOT_TLS && parser.error == SNI_E_HTTP,
       "feeding more after NOT_TLS: NOT_TLS / HTTP again");
}

int main(void)
{
    test_base();
    test_prefixes();
    test_byte_at_a_time();
    test_split_records();
    test_not_tls();
    test_first_record_type();
    test_sslv2();
    test_record_lengths();
    test_records_later();
    test_handshake();
    test_hello_short();
    test_hello_version();
    test_session_id();
    test_cipher_suites();
    test_compression();
    test_extensions_block();
    test_extension_overrun();
    test_duplicates();
    test_many_extensions();
    test_no_sni();
    test_sni_list();
    test_sni_entries();
    test_host_table();
    test_host_lengths();
    test_alpn();
    test_versions();
    test_ech_ok();
    test_ech_bad();
    test_sticky_ok();
    test_sticky_bad();
    return tap_done();
}
