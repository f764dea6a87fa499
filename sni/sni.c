/*
 * sni.c - incremental TLS ClientHello parser (see sni.h for the contract).
 *
 * Two layers.  The record layer (RFC 8446 §5.1) is a byte-level state machine
 * that strips 5-byte record headers from whatever pieces the caller feeds and
 * appends the fragments to p->hs, so a ClientHello spread over several records
 * and split at any byte is reassembled with O(1) work per byte.  Once the
 * handshake message is complete, the ClientHello body is parsed in one pass
 * over p->hs with a bounds-checked reader.
 */
#include "sni.h"

#include <string.h>

enum {
    REC_HEADER = 5,             /* type, version (2), length (2) */
    HS_HEADER = 4,              /* msg_type, length (3) */
    CT_CHANGE_CIPHER_SPEC = 20, /* the lowest ContentType (RFC 8446 §5.1) */
    CT_HANDSHAKE = 22,          /* ContentType.handshake */
    CT_HEARTBEAT = 24,          /* the highest ContentType (RFC 6520) */
    HT_CLIENT_HELLO = 1,        /* HandshakeType.client_hello */
    SSL2_CLIENT_HELLO = 1,      /* SSL 2.0 MSG-CLIENT-HELLO */
    RANDOM_LEN = 32,
    SESSION_ID_MAX = 32,
    EXT_SERVER_NAME = 0,         /* RFC 6066 §3 */
    EXT_ALPN = 16,               /* RFC 7301 §3.1 */
    EXT_SUPPORTED_VERSIONS = 43, /* RFC 8446 §4.2.1 */
    EXT_ECH = 0xfe0d,            /* draft-ietf-tls-esni */
    NAME_TYPE_HOST = 0,
    LABEL_MAX = 63,
    /* Every extension takes at least 4 bytes of the 16 KiB message. */
    EXT_MAX = SNI_HANDSHAKE_MAX / 4,
};

/* A bounds-checked cursor over part of p->hs. */
struct reader {
    const uint8_t *buf;
    size_t pos, end;
};

static size_t rd_left(const struct reader *r)
{
    return r->end - r->pos;
}

static bool rd_u8(struct reader *r, uint8_t *v)
{
    if (rd_left(r) < 1)
        return false;
    *v = r->buf[r->pos++];
    return true;
}

static bool rd_u16(struct reader *r, uint16_t *v)
{
    if (rd_left(r) < 2)
        return false;
    *v = (uint16_t)(r->buf[r->pos] << 8 | r->buf[r->pos + 1]);
    r->pos += 2;
    return true;
}

/* Take n bytes as a sub-reader (and skip them in r). */
static bool rd_sub(struct reader *r, size_t n, struct reader *sub)
{
    if (rd_left(r) < n)
        return false;
    *sub = (struct reader){r->buf, r->pos, r->pos + n};
    r->pos += n;
    return true;
}

/* An opaque vector with a 1- or 2-byte length prefix (RFC 8446 §3.4). */
static bool rd_vec8(struct reader *r, struct reader *sub)
{
    uint8_t n;
    return rd_u8(r, &n) && rd_sub(r, n, sub);
}

static bool rd_vec16(struct reader *r, struct reader *sub)
{
    uint16_t n;
    return rd_u16(r, &n) && rd_sub(r, n, sub);
}

static struct sni_view rd_view(const struct reader *r)
{
    return (struct sni_view){r->buf + r->pos, rd_left(r)};
}

/* Parsing the body: the handshake offset of a problem and its error. */
struct hello_ctx {
    struct sni_hello *h;
    size_t fail_at;
    enum sni_error error;
};

/* Record error e at handshake offset at; returns false for the caller to pass up. */
static bool fail_at(struct hello_ctx *c, size_t at, enum sni_error e)
{
    c->fail_at = at;
    c->error = e;
    return false;
}

/* The same, where the reader r stopped. */
static bool fail(struct hello_ctx *c, const struct reader *r, enum sni_error e)
{
    return fail_at(c, r->pos, e);
}

bool sni_error_is_name(enum sni_error e)
{
    return e >= SNI_E_SNI_LIST && e <= SNI_E_SNI_NAME;
}

bool sni_is_grease(uint16_t v)
{
    /* RFC 8701 §2: 0x0A0A, 0x1A1A, ... 0xFAFA. */
    return (v & 0x0f0f) == 0x0a0a && (v >> 8) == (v & 0xff);
}

static bool is_ldh(uint8_t ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-';
}

/*
 * RFC 6066 §3: a fully qualified DNS host name, ASCII, no trailing dot, no
 * IP literal.  We require LDH labels (RFC 1123 §2.1, RFC 5890 §2.3.1 for
 * A-labels, which are LDH too) of 1..63 bytes that neither start nor end with
 * a hyphen.  A name whose last label is all digits is an IPv4 literal or one
 * of its integer forms, never a host name (RFC 3696 §2).  Returns the offset
 * within the name of the first offending byte, or len when the name is good.
 */
static size_t host_check(const uint8_t *s, size_t len, enum sni_error *e)
{
    size_t label = 0, i;
    bool digits_only = true;

    if (len > SNI_HOST_MAX)
        return *e = SNI_E_SNI_TOO_LONG, SNI_HOST_MAX;
    const uint8_t *nul = memchr(s, 0, len);
    if (nul)
        return *e = SNI_E_SNI_NUL, (size_t)(nul - s);
    *e = SNI_E_SNI_NAME;
    for (i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (label == 0 || s[i - 1] == '-')
                return i;
            label = 0;
            digits_only = true;
            continue;
        }
        if (!is_ldh(s[i]) || (label == 0 && s[i] == '-') || ++label > LABEL_MAX)
            return i;
        if (s[i] < '0' || s[i] > '9')
            digits_only = false;
    }
    if (label == 0 || s[len - 1] == '-' || digits_only)
        return len ? len - 1 : 0;
    *e = SNI_E_NONE;
    return len;
}

/* server_name (RFC 6066 §3): ServerNameList server_name_list<1..2^16-1>. */
static bool ext_server_name(struct hello_ctx *c, struct reader *ext)
{
    struct reader list, name;
    uint8_t type;

    if (!rd_vec16(ext, &list) || rd_left(ext) != 0 || rd_left(&list) == 0)
        return fail(c, ext, SNI_E_SNI_LIST);
    while (rd_left(&list) > 0) {
        size_t at = list.pos;
        if (!rd_u8(&list, &type))
            return fail(c, &list, SNI_E_SNI_LIST);
        if (type != NAME_TYPE_HOST)
            return fail_at(c, at, SNI_E_SNI_TYPE);
        if (!rd_vec16(&list, &name))
            return fail(c, &list, SNI_E_SNI_LIST);
        if (c->h->host.ptr)
            return fail_at(c, at, SNI_E_SNI_TWICE);
        if (rd_left(&name) == 0)
            return fail_at(c, at, SNI_E_SNI_EMPTY);
        enum sni_error e;
        size_t bad = host_check(name.buf + name.pos, rd_left(&name), &e);
        if (e != SNI_E_NONE)
            return fail_at(c, name.pos + bad, e);
        c->h->host = rd_view(&name);
    }
    return true;
}

/* ALPN (RFC 7301 §3.1): ProtocolName protocol_name_list<2..2^16-1>, each <1..2^8-1>. */
static bool ext_alpn(struct hello_ctx *c, struct reader *ext)
{
    struct reader list, name;

    if (!rd_vec16(ext, &list) || rd_left(ext) != 0 || rd_left(&list) < 2)
        return fail(c, ext, SNI_E_ALPN);
    c->h->alpn = rd_view(&list);
    while (rd_left(&list) > 0) {
        if (!rd_vec8(&list, &name) || rd_left(&name) == 0)
            return fail(c, &list, SNI_E_ALPN);
    }
    return true;
}

/* supported_versions (RFC 8446 §4.2.1): ProtocolVersion versions<2..254>. */
static bool ext_versions(struct hello_ctx *c, struct reader *ext)
{
    struct reader list;
    uint16_t v, max = 0;

    if (!rd_vec8(ext, &list) || rd_left(ext) != 0 || rd_left(&list) < 2 || rd_left(&list) % 2)
        return fail(c, ext, SNI_E_VERSIONS);
    c->h->versions = rd_view(&list);
    while (rd_u16(&list, &v)) {
        if (!sni_is_grease(v) && v > max)
            max = v;
    }
    if (max)
        c->h->max_version = max;
    return true;
}

/*
 * encrypted_client_hello (draft-ietf-tls-esni §5): outer(0) carries
 * cipher_suite (kdf_id, aead_id), config_id, enc<0..2^16-1> and
 * payload<1..2^16-1>; inner(1) is empty.  GREASE ECH is built the same way,
 * so presence alone does not prove real ECH: we only report what is there.
 */
static bool ext_ech(struct hello_ctx *c, struct reader *ext)
{
    struct reader enc, payload;
    uint16_t kdf, aead;
    uint8_t type, config_id;

    if (!rd_u8(ext, &type))
        return fail(c, ext, SNI_E_ECH);
    if (type == 0) {
        if (!rd_u16(ext, &kdf) || !rd_u16(ext, &aead) || !rd_u8(ext, &config_id) ||
            !rd_vec16(ext, &enc) || !rd_vec16(ext, &payload) || rd_left(&payload) == 0)
            return fail(c, ext, SNI_E_ECH);
        c->h->ech_config_id = config_id;
    } else if (type != 1) {
        return fail(c, ext, SNI_E_ECH);
    }
    if (rd_left(ext) != 0)
        return fail(c, ext, SNI_E_ECH);
    c->h->ech = true;
    c->h->ech_type = type;
    return true;
}

static void sift_down(uint16_t *a, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && a[child + 1] > a[child])
            child++;
        if (a[root] >= a[child])
            return;
        uint16_t t = a[root];
        a[root] = a[child];
        a[child] = t;
    }
}

/* Heapsort: in place, no allocation (qsort may allocate). */
static void sort_u16(uint16_t *a, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        uint16_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}

/* RFC 8446 §4.2: "There MUST NOT be more than one extension of the same type." */
static bool has_duplicate(uint16_t *types, size_t n)
{
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (types[i] == types[j])
                    return true;
        return false;
    }
    sort_u16(types, n); /* O(n log n): a hostile hello may carry 4096 */
    for (size_t i = 1; i < n; i++)
        if (types[i] == types[i - 1])
            return true;
    return false;
}

static bool ext_one(struct hello_ctx *c, uint16_t type, struct reader *body)
{
    switch (type) {
    case EXT_SERVER_NAME: return ext_server_name(c, body);
    case EXT_ALPN: return ext_alpn(c, body);
    case EXT_SUPPORTED_VERSIONS: return ext_versions(c, body);
    case EXT_ECH: return ext_ech(c, body);
    default: return true; /* unknown and GREASE extensions are skipped */
    }
}

/*
 * Extension extensions<8..2^16-1> (RFC 8446 §4.1.2, §4.2).  Duplicates: the
 * common types (all below 64, server_name included) are caught at once with a
 * bitmap, before a second copy could overwrite what the first one said; the
 * rest (GREASE, renegotiation_info, ECH, ...) are few and checked at the end.
 */
static bool parse_extensions(struct hello_ctx *c, struct reader *r)
{
    uint16_t high[EXT_MAX];
    size_t nhigh = 0;
    uint64_t low = 0;
    struct reader block, body;
    uint16_t type;

    if (!rd_vec16(r, &block) || rd_left(r) != 0)
        return fail(c, r, SNI_E_EXTENSIONS);
    size_t block_at = block.pos;
    while (rd_left(&block) > 0) {
        size_t at = block.pos;
        if (!rd_u16(&block, &type) || !rd_vec16(&block, &body))
            return fail(c, &block, SNI_E_EXTENSION);
        if (type < 64 && (low & (UINT64_C(1) << type)))
            return fail_at(c, at, SNI_E_EXT_DUPLICATE);
        if (type < 64)
            low |= UINT64_C(1) << type;
        else
            high[nhigh++] = type;
        if (!ext_one(c, type, &body))
            return false;
    }
    if (has_duplicate(high, nhigh))
        return fail_at(c, block_at, SNI_E_EXT_DUPLICATE);
    return true;
}

/*
 * ClientHello (RFC 8446 §4.1.2; RFC 5246 §7.4.1.2 for the TLS 1.2 form):
 *   ProtocolVersion legacy_version; Random random;
 *   opaque legacy_session_id<0..32>; CipherSuite cipher_suites<2..2^16-2>;
 *   opaque legacy_compression_methods<1..2^8-1>; Extension extensions<..>;
 * The extensions block may be absent in TLS 1.2 and earlier.
 */
static bool parse_hello(struct hello_ctx *c, struct reader *r)
{
    struct reader sid, suites, comp;
    uint16_t version;

    if (!rd_u16(r, &version) || rd_left(r) < RANDOM_LEN)
        return fail(c, r, SNI_E_HELLO_SHORT);
    if (version >> 8 != 3)
        return fail_at(c, r->pos - 2, SNI_E_HELLO_VERSION);
    c->h->legacy_version = c->h->max_version = version;
    r->pos += RANDOM_LEN;
    if (!rd_vec8(r, &sid) || rd_left(&sid) > SESSION_ID_MAX)
        return fail(c, r, SNI_E_SESSION_ID);
    if (!rd_vec16(r, &suites) || rd_left(&suites) < 2 || rd_left(&suites) % 2)
        return fail(c, r, SNI_E_CIPHER_SUITES);
    if (!rd_vec8(r, &comp) || rd_left(&comp) < 1)
        return fail(c, r, SNI_E_COMPRESSION);
    if (rd_left(r) == 0)
        return true;
    return parse_extensions(c, r);
}

/* Settle p's result; from now on sni_parser_feed() takes no bytes. */
static void verdict(struct sni_parser *p, enum sni_result res, enum sni_error e, size_t at)
{
    p->result = res;
    p->error = e;
    p->error_at = at;
}

/* The whole handshake message is in p->hs: parse it. */
static void finish(struct sni_parser *p)
{
    struct hello_ctx c = {.h = &p->hello};
    struct reader r = {p->hs, HS_HEADER, p->hs_need};

    p->hello = (struct sni_hello){.record_bytes = p->consumed};
    if (!parse_hello(&c, &r)) {
        p->hello = (struct sni_hello){0};
        verdict(p, SNI_MALFORMED, c.error, c.fail_at);
        return;
    }
    verdict(p, p->hello.host.ptr ? SNI_OK : SNI_NO_SNI, SNI_E_NONE, 0);
}

/*
 * The first bytes of a connection: a TLS record (its type byte 20..24 and
 * version major 3), an SSL 2.0 hello, or not TLS.  A TLS record of another
 * type than handshake is TLS but no way to start a connection.
 */
static void first_bytes(struct sni_parser *p)
{
    const uint8_t *h = p->rec_hdr;

    if (h[0] & 0x80) {
        /* SSL 2.0 record: 2-byte length with the high bit set, then msg_type. */
        if (p->rec_hdr_len < 3)
            return;
        if (h[2] == SSL2_CLIENT_HELLO)
            verdict(p, SNI_MALFORMED, SNI_E_SSLV2, 0);
        else
            verdict(p, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE, 0);
        return;
    }
    if (h[0] < CT_CHANGE_CIPHER_SPEC || h[0] > CT_HEARTBEAT) {
        verdict(p, SNI_NOT_TLS, h[0] >= 'A' && h[0] <= 'Z' ? SNI_E_HTTP : SNI_E_NOT_HANDSHAKE, 0);
        return;
    }
    if (p->rec_hdr_len < 2)
        return;
    if (h[1] != 3)
        verdict(p, SNI_NOT_TLS, SNI_E_NOT_HANDSHAKE, 1);
    else if (h[0] != CT_HANDSHAKE) /* TLS, but a client starts with its ClientHello */
        verdict(p, SNI_MALFORMED, SNI_E_RECORD_TYPE, 0);
}

/* A complete record header (RFC 8446 §5.1): type, legacy_record_version, length. */
static void record_header(struct sni_parser *p)
{
    const uint8_t *h = p->rec_hdr;
    size_t at = p->consumed - REC_HEADER;
    size_t len = (size_t)h[3] << 8 | h[4];

    if (h[0] != CT_HANDSHAKE) {
        verdict(p, SNI_MALFORMED, SNI_E_RECORD_TYPE, at);
    } else if (h[1] != 3) {
        verdict(p, SNI_MALFORMED, SNI_E_RECORD_VERSION, at + 1);
    } else if (len == 0) { /* "MUST NOT send zero-length fragments of Handshake types" */
        verdict(p, SNI_MALFORMED, SNI_E_RECORD_EMPTY, at + 3);
    } else if (len > SNI_RECORD_MAX) {
        verdict(p, SNI_MALFORMED, SNI_E_RECORD_LENGTH, at + 3);
    } else {
        p->nrecords++;
        p->rec_left = len;
        p->rec_hdr_len = 0;
    }
}

/* Read record header bytes; returns how many of data were taken. */
static size_t take_header(struct sni_parser *p, const uint8_t *data, size_t len)
{
    size_t n = 0;

    while (n < len && p->rec_hdr_len < REC_HEADER && p->result == SNI_NEED_MORE) {
        p->rec_hdr[p->rec_hdr_len++] = data[n++];
        p->consumed++;
        if (p->nrecords == 0)
            first_bytes(p);
    }
    if (p->rec_hdr_len == REC_HEADER && p->result == SNI_NEED_MORE)
        record_header(p);
    return n;
}

/* The handshake header (RFC 8446 §4): msg_type and uint24 length. */
static void handshake_header(struct sni_parser *p)
{
    size_t len = (size_t)p->hs[1] << 16 | (size_t)p->hs[2] << 8 | p->hs[3];

    if (p->hs[0] != HT_CLIENT_HELLO)
        verdict(p, SNI_MALFORMED, SNI_E_HANDSHAKE_TYPE, 0);
    else if (len > SNI_HANDSHAKE_MAX - HS_HEADER)
        verdict(p, SNI_MALFORMED, SNI_E_HANDSHAKE_LENGTH, 1);
    else
        p->hs_need = HS_HEADER + len;
}

/* Append record payload to the handshake; returns how many bytes were taken. */
static size_t take_payload(struct sni_parser *p, const uint8_t *data, size_t len)
{
    size_t want = p->hs_need ? p->hs_need - p->hs_len : HS_HEADER - p->hs_len;
    size_t n = len < p->rec_left ? len : p->rec_left;

    if (n > want)
        n = want;
    memcpy(p->hs + p->hs_len, data, n);
    p->hs_len += n;
    p->rec_left -= n;
    p->consumed += n;
    if (!p->hs_need && p->hs_len == HS_HEADER)
        handshake_header(p);
    if (p->result != SNI_NEED_MORE || !p->hs_need || p->hs_len < p->hs_need)
        return n;
    /* The ClientHello is complete; it must also end its record. */
    if (p->rec_left > 0)
        verdict(p, SNI_MALFORMED, SNI_E_TRAILING, p->consumed);
    else
        finish(p);
    return n;
}

void sni_parser_init(struct sni_parser *p)
{
    /* Everything but the reassembly buffer, which is written before it is read. */
    memset(p, 0, offsetof(struct sni_parser, hs));
}

enum sni_result sni_parser_feed(struct sni_parser *p, const uint8_t *data, size_t len)
{
    size_t i = 0;

    while (i < len && p->result == SNI_NEED_MORE) {
        if (p->rec_left == 0)
            i += take_header(p, data + i, len - i);
        else
            i += take_payload(p, data + i, len - i);
    }
    return p->result;
}

bool sni_alpn_next(const struct sni_hello *h, size_t *pos, struct sni_view *name)
{
    /* The list was validated when parsed: every entry is <len><len bytes>, len > 0. */
    if (*pos >= h->alpn.len)
        return false;
    name->len = h->alpn.ptr[*pos];
    name->ptr = h->alpn.ptr + *pos + 1;
    *pos += 1 + name->len;
    return true;
}

const char *sni_result_str(enum sni_result r)
{
    switch (r) {
    case SNI_NEED_MORE: return "need more bytes";
    case SNI_OK: return "ClientHello with server name";
    case SNI_NO_SNI: return "ClientHello without server name";
    case SNI_NOT_TLS: return "not TLS";
    case SNI_MALFORMED: return "malformed ClientHello";
    }
    return "unknown result";
}

const char *sni_error_str(enum sni_error e)
{
    switch (e) {
    case SNI_E_NONE: return "no error";
    case SNI_E_HTTP: return "starts like an HTTP request, not a TLS record";
    case SNI_E_NOT_HANDSHAKE: return "does not start with a TLS handshake record";
    case SNI_E_SSLV2: return "SSL 2.0-style ClientHello";
    case SNI_E_RECORD_TYPE:
        return "a TLS record other than handshake where the ClientHello belongs";
    case SNI_E_RECORD_VERSION: return "record version major is not 3";
    case SNI_E_RECORD_EMPTY: return "zero-length handshake record";
    case SNI_E_RECORD_LENGTH: return "record longer than 2^14 bytes";
    case SNI_E_TRAILING: return "bytes after the ClientHello in its record";
    case SNI_E_HANDSHAKE_TYPE: return "first handshake message is not a ClientHello";
    case SNI_E_HANDSHAKE_LENGTH: return "ClientHello longer than 16 KiB";
    case SNI_E_HELLO_SHORT: return "ClientHello ends inside legacy_version or random";
    case SNI_E_HELLO_VERSION: return "ClientHello legacy_version major is not 3";
    case SNI_E_SESSION_ID: return "legacy_session_id longer than 32 bytes or truncated";
    case SNI_E_CIPHER_SUITES: return "cipher_suites empty, odd-length or truncated";
    case SNI_E_COMPRESSION: return "compression_methods empty or truncated";
    case SNI_E_EXTENSIONS: return "extensions length disagrees with the ClientHello length";
    case SNI_E_EXTENSION: return "an extension runs past the extensions block";
    case SNI_E_EXT_DUPLICATE: return "an extension type appears twice";
    case SNI_E_SNI_LIST: return "server_name list length wrong, empty or truncated";
    case SNI_E_SNI_TYPE: return "server_name of a type other than host_name";
    case SNI_E_SNI_TWICE: return "more than one host_name";
    case SNI_E_SNI_EMPTY: return "zero-length host_name";
    case SNI_E_SNI_TOO_LONG: return "host_name longer than 253 bytes";
    case SNI_E_SNI_NUL: return "NUL byte inside host_name";
    case SNI_E_SNI_NAME: return "host_name is not LDH labels (or is an IP literal)";
    case SNI_E_ALPN: return "ALPN protocol list malformed";
    case SNI_E_VERSIONS: return "supported_versions malformed";
    case SNI_E_ECH: return "encrypted_client_hello malformed";
    }
    return "unknown error";
}
