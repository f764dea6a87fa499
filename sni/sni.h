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
 *   RFC 8446 §4.1.3, §4.1.4, §D.4: after a HelloRetryRequest, where a second
 *                    ClientHello starts (struct sni_watch, at the end)
 *
 * The module is pure: no I/O, no allocation, no logging, no globals.  All
 * state lives in a struct sni_parser (or sni_watch) owned by the caller.
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

/* True for the errors of the server_name extension itself (SNI_E_SNI_*):
 * the hello is TLS, but the name it carries is not a host name. */
bool sni_error_is_name(enum sni_error e);

/* Static English text for a result and for an error ("" never returned). */
const char *sni_result_str(enum sni_result r);
const char *sni_error_str(enum sni_error e);

/*
 * Watching a tunnel after its first ClientHello.
 *
 * After a HelloRetryRequest (RFC 8446 §4.1.4) the client sends a second
 * ClientHello, in plaintext like the first, and it may name another host.
 * A struct sni_watch follows both directions of a tunnel from the end of the
 * first ClientHello's last record (client) and from the server's first byte
 * (server) and says where a further ClientHello starts, so the caller can hold
 * it back and check it with a fresh sni_parser, and when nothing the client
 * sends can be a ClientHello the server would take any more.
 *
 * Client: records (RFC 8446 §5.1) are followed by their header alone, the
 * legacy version never checked.  change_cipher_spec (sent for middlebox
 * compatibility, §D.4), alert and application_data (0-RTT early data) are
 * skipped, each at most 2^14 + 2048 bytes (RFC 5246 §6.2.3); a handshake
 * record of 1..2^14 bytes whose first byte is client_hello(1) is a ClientHello
 * (SNI_WATCH_HELLO); any other record is SNI_WATCH_BAD.
 * Server: records and handshake messages are followed.  The first handshake
 * message must be a ServerHello; if its random is the HelloRetryRequest value
 * (§4.1.3) the watch goes on until the next handshake message starts, else it
 * is over.  change_cipher_spec records (§D.4) are skipped; anything else (an
 * alert, application data, not TLS) ends the watch too: such a server does not
 * go on to take a second ClientHello.
 */

/* Largest record the client may send in the meantime: TLSCiphertext (RFC 5246 §6.2.3). */
#define SNI_WATCH_SKIP_MAX (SNI_RECORD_MAX + 2048)

enum sni_watch_event {
    SNI_WATCH_MORE,  /* client: bytes [0,*used) may go on; keep [*used,n) (at most 5 bytes: a
                        record header not yet classified) and feed them again with what follows.
                        server: keep feeding */
    SNI_WATCH_HELLO, /* client: a ClientHello's first record starts at *used; bytes before it
                        may go on */
    SNI_WATCH_BAD,   /* client: the record at *used breaks the rules above */
    SNI_WATCH_DONE,  /* the watch is over: everything from *used on (client) passes unwatched */
};

/*
 * Watcher state: 12 bytes, no buffer (the client side has the caller keep an
 * unclassified record header; the server side keeps counters and a record
 * type).  The caller owns it; the fields are private.
 */
struct sni_watch {
    uint32_t hs_left; /* server: handshake message length, then body bytes left */
    uint16_t c_skip;  /* client: payload bytes left in the record being skipped */
    uint16_t s_left;  /* server: record length, then payload bytes left */
    uint8_t s_hdr;    /* server: bytes of the record header read (0..5) */
    uint8_t s_type;   /* server: content type of the current record */
    uint8_t hs_pos;   /* server: bytes of the ServerHello read, up to the end of random */
    uint8_t phase;    /* what the server side waits for; the watch is over or not */
};

/* Start watching a tunnel whose first ClientHello has been checked. */
void sni_watch_init(struct sni_watch *w);

/*
 * Feed n client bytes: the first call starts right after the first
 * ClientHello's last record (hello.record_bytes), each later one where the
 * previous left off, or at the bytes it said to keep.  Sets *used (<= n) and
 * returns:
 *   SNI_WATCH_MORE   [0,*used) may be forwarded; keep [*used,n) (a record
 *                    header not yet classified, at most 5 bytes) and feed it
 *                    again ahead of the next bytes read.
 *   SNI_WATCH_HELLO  [0,*used) may be forwarded; a ClientHello's first record
 *                    starts at *used.  Parse it with a fresh sni_parser from
 *                    there, then feed the watcher the bytes after its
 *                    hello.record_bytes (the watcher waits at that record
 *                    header and took nothing of it).
 *   SNI_WATCH_BAD    [0,*used) may be forwarded; the record at *used is not
 *                    one a client may send before the server's answer.  The
 *                    state is unchanged: feeding the same bytes says it again.
 *   SNI_WATCH_DONE   the watch is over (the server side ended it): *used is 0
 *                    and all the bytes pass unwatched, now and from now on.
 * The client side never ends the watch itself.
 */
enum sni_watch_event sni_watch_client(struct sni_watch *w, const uint8_t *p, size_t n,
                                      size_t *used);

/*
 * Feed the next n bytes the server sent (from its first byte), in any pieces;
 * the watcher keeps what it needs of a split header itself and takes all n.
 * Returns SNI_WATCH_DONE once the watch is over (then on every later call, of
 * either side), else SNI_WATCH_MORE.
 */
enum sni_watch_event sni_watch_server(struct sni_watch *w, const uint8_t *p, size_t n);

/* True once the watch is over: nothing the client sends needs watching. */
bool sni_watch_over(const struct sni_watch *w);

/* Static English text for an event. */
const char *sni_watch_event_str(enum sni_watch_event e);

#endif
