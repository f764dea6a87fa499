/*
 * sni.h - incremental TLS ClientHello parser.
 *
 * Feed the first bytes a client sends on a TCP connection, in whatever pieces
 * they arrive; the parser reassembles the handshake across TLS records and,
 * once the whole ClientHello is in, reports its server_name and a few other
 * fields a proxy decides on.
 *
 * Implements:
 *   RFC 8446 §5.1    TLS record layer (a handshake message may span records)
 *   RFC 8446 §4      Handshake header (msg_type, uint24 length)
 *   RFC 8446 §4.1.2  ClientHello (also the TLS 1.2 form of RFC 5246 §7.4.1.2,
 *                    whose extensions block may be absent)
 *   RFC 8446 §4.2    Extensions (no type twice), §4.2.1 supported_versions
 *   RFC 6066 §3      server_name: one host_name, no other name type
 *   RFC 7301 §3.1    application_layer_protocol_negotiation
 *   RFC 8701         GREASE values are tolerated wherever they may appear
 *   draft-ietf-tls-esni (extension 0xfe0d): presence and config_id only
 *
 * The module is pure: no I/O, no allocation, no logging, no globals.  All
 * state lives in a struct sni_parser owned by the caller.
 */
#ifndef SNI_SNI_H
#define SNI_SNI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest handshake message accepted, its 4-byte header included. */
#define SNI_HANDSHAKE_MAX 16384
/* Largest TLSPlaintext.length (RFC 8446 §5.1). */
#define SNI_RECORD_MAX 16384
/* Longest host_name accepted (a DNS name without its trailing dot). */
#define SNI_HOST_MAX 253

enum sni_result {
    SNI_NEED_MORE, /* no verdict yet: feed more bytes */
    SNI_OK,        /* a valid ClientHello with a host_name */
    SNI_NO_SNI,    /* a valid ClientHello without server_name */
    SNI_NOT_TLS,   /* the first bytes are not a TLS handshake record */
    SNI_MALFORMED, /* TLS, but breaks the rules: see sni_parser.error */
};

/* Why a result is SNI_NOT_TLS or SNI_MALFORMED.  sni_error_str() words it. */
enum sni_error {
    SNI_E_NONE,
    /* SNI_NOT_TLS */
    SNI_E_HTTP,          /* starts with an upper-case letter, like a request line */
    SNI_E_NOT_HANDSHAKE, /* anything else that is not a TLS handshake record */
    /* SNI_MALFORMED: record layer */
    SNI_E_SSLV2,          /* an SSL 2.0-style (2-byte header) CLIENT-HELLO */
    SNI_E_RECORD_TYPE,    /* a TLS record that is not a handshake record */
    SNI_E_RECORD_VERSION, /* record version major is not 3 */
    SNI_E_RECORD_EMPTY,   /* zero-length handshake record */
    SNI_E_RECORD_LENGTH,  /* record longer than 2^14 */
    SNI_E_TRAILING,       /* bytes after the ClientHello in its last record */
    /* SNI_MALFORMED: handshake and ClientHello fields */
    SNI_E_HANDSHAKE_TYPE,   /* first handshake message is not a ClientHello */
    SNI_E_HANDSHAKE_LENGTH, /* handshake message longer than SNI_HANDSHAKE_MAX */
    SNI_E_HELLO_SHORT,      /* body ends inside legacy_version or random */
    SNI_E_HELLO_VERSION,    /* legacy_version major is not 3 */
    SNI_E_SESSION_ID,       /* legacy_session_id over 32 bytes or truncated */
    SNI_E_CIPHER_SUITES,    /* cipher_suites empty, odd or truncated */
    SNI_E_COMPRESSION,      /* compression_methods empty or truncated */
    SNI_E_EXTENSIONS,       /* extensions length disagrees with the body */
    SNI_E_EXTENSION,        /* one extension runs past the extensions block */
    SNI_E_EXT_DUPLICATE,    /* an extension type appears twice */
    /* SNI_MALFORMED: server_name (RFC 6066 §3) */
    SNI_E_SNI_LIST,     /* server_name_list length wrong, empty or truncated */
    SNI_E_SNI_TYPE,     /* a name_type other than host_name(0) */
    SNI_E_SNI_TWICE,    /* more than one host_name */
    SNI_E_SNI_EMPTY,    /* zero-length host_name */
    SNI_E_SNI_TOO_LONG, /* host_name over SNI_HOST_MAX bytes */
    SNI_E_SNI_NUL,      /* NUL byte inside host_name */
    SNI_E_SNI_NAME,     /* not LDH labels (empty label, bad byte, IP literal) */
    /* SNI_MALFORMED: other extensions we read */
    SNI_E_ALPN,     /* ALPN list malformed (RFC 7301 §3.1) */
    SNI_E_VERSIONS, /* supported_versions malformed (RFC 8446 §4.2.1) */
    SNI_E_ECH,      /* encrypted_client_hello body malformed */
};

/* A view into memory the parser owns (see struct sni_parser). */
struct sni_view {
    const uint8_t *ptr;
    size_t len;
};

/* What a complete ClientHello said.  Filled for SNI_OK and SNI_NO_SNI. */
struct sni_hello {
    struct sni_view host;     /* host_name as sent (case kept); empty for NO_SNI */
    struct sni_view alpn;     /* ProtocolNameList body; walk it with sni_alpn_next() */
    struct sni_view versions; /* supported_versions list body, 2 bytes each */
    uint16_t legacy_version;  /* ClientHello.legacy_version */
    uint16_t max_version;     /* highest non-GREASE supported_version, else legacy_version */
    bool ech;                 /* encrypted_client_hello (0xfe0d) present */
    uint8_t ech_type;         /* ECHClientHelloType: 0 outer, 1 inner */
    uint8_t ech_config_id;    /* config_id of an outer ECH (GREASE ECH has one too) */
    size_t record_bytes;      /* input bytes up to the end of the ClientHello's last record */
};

/*
 * Parser state.  The caller owns it (stack, struct member or heap); it holds
 * the reassembled handshake message, so it is a little over 16 KiB.  Views in
 * .hello point into .hs and stay valid until the parser is reset or freed.
 * Read .result, .error, .error_at and .hello; the other fields are private.
 */
struct sni_parser {
    enum sni_result result;
    enum sni_error error;
    /* Where the problem was seen: an offset into the input for SNI_NOT_TLS and
     * the record-layer errors (SNI_E_SSLV2 .. SNI_E_TRAILING), an offset into
     * the handshake message (p->hs) for the others. */
    size_t error_at;
    struct sni_hello hello;

    size_t consumed;    /* input bytes taken so far */
    size_t nrecords;    /* records started so far */
    size_t rec_left;    /* payload bytes left in the current record */
    size_t hs_len;      /* bytes of handshake message in hs[] */
    size_t hs_need;     /* full message length once its header is in, else 0 */
    uint8_t rec_hdr[5]; /* the record header being read */
    uint8_t rec_hdr_len;
    uint8_t hs[SNI_HANDSHAKE_MAX];
};

/* Make p ready for a new connection.  Cheap: does not clear p->hs. */
void sni_parser_init(struct sni_parser *p);

/*
 * Feed the next len bytes the client sent.  Returns SNI_NEED_MORE until a
 * verdict is reached, then that verdict; once it is final, further calls
 * take no bytes and return it again.  Bytes after the ClientHello's last
 * record (e.g. early data) are not taken: p->hello.record_bytes (on OK and
 * NO_SNI) or p->consumed says how far the parser read.
 */
enum sni_result sni_parser_feed(struct sni_parser *p, const uint8_t *data, size_t len);

/*
 * Step through an ALPN list: set *name to the next protocol name and return
 * true, or return false at the end.  *pos starts at 0.
 */
bool sni_alpn_next(const struct sni_hello *h, size_t *pos, struct sni_view *name);

/* True for RFC 8701 GREASE values (0x0A0A, 0x1A1A, ..., 0xFAFA). */
bool sni_is_grease(uint16_t v);

/* Static English text for a result and for an error ("" never returned). */
const char *sni_result_str(enum sni_result r);
const char *sni_error_str(enum sni_error e);

#endif
