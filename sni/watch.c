/*
 * watch.c - after the first ClientHello, where a further one starts and when
 * the watch is over (see sni.h for the contract and the rules).
 *
 * The client side keeps no header bytes: a header it cannot classify yet is
 * handed back to the caller (SNI_WATCH_MORE with *used at the header), who
 * feeds it again with what follows.  So its only state is how much of a
 * skipped record is left.  The server side takes every byte it is given and
 * keeps counters only: the record header and the handshake header are read a
 * byte at a time, and the ServerHello's random is compared with the
 * HelloRetryRequest value as it arrives, never buffered.
 */
#include "sni.h"

enum {
    REC_HEADER = 5,             /* type, legacy_record_version (2), length (2) */
    HS_HEADER = 4,              /* msg_type, length (3) */
    CT_CHANGE_CIPHER_SPEC = 20, /* ContentType (RFC 8446 §5.1) */
    CT_HANDSHAKE = 22,
    CT_APPLICATION_DATA = 23,
    HT_CLIENT_HELLO = 1, /* HandshakeType (RFC 8446 §4) */
    HT_SERVER_HELLO = 2,
    /* Offsets in the ServerHello message, its handshake header included:
     * legacy_version at 4, random at 6..37 (RFC 8446 §4.1.3). */
    HELLO_RANDOM = HS_HEADER + 2,
    HELLO_END = HELLO_RANDOM + 32,
};

/* What the server side waits for (struct sni_watch.phase). */
enum phase {
    PH_HELLO, /* the server's first handshake message, a ServerHello, up to its random */
    PH_RETRY, /* it was a HelloRetryRequest: the rest of it, then the next message */
    PH_OVER,  /* the watch is over, for both sides */
};

/* RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello with this random,
 * SHA-256("HelloRetryRequest"). */
static const uint8_t hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* What a client record header says, as far as the bytes in hand show. */
enum client_record {
    CR_SKIP,    /* change_cipher_spec, alert or application_data: skip its payload */
    CR_PARTIAL, /* cannot be classified yet: the caller keeps the header */
    CR_HELLO,   /* a handshake record that starts a ClientHello */
    CR_BAD,     /* a record a client may not send before the server's answer */
};

void sni_watch_init(struct sni_watch *w)
{
    *w = (struct sni_watch){.phase = PH_HELLO};
}

bool sni_watch_over(const struct sni_watch *w)
{
    return w->phase == PH_OVER;
}

static void over(struct sni_watch *w)
{
    w->phase = PH_OVER;
}

/*
 * Classify the client record whose header starts at h (avail > 0 bytes in
 * hand).  RFC 8446 §5.1: the legacy_record_version is ignored by receivers, so
 * it is not read.  A handshake record is 1..2^14 bytes ("MUST NOT send
 * zero-length fragments of Handshake types"); the others are skipped, bounded
 * by TLSCiphertext (RFC 5246 §6.2.3).  On CR_SKIP, *len is the payload length.
 */
static enum client_record client_record(const uint8_t *h, size_t avail, size_t *len)
{
    if (h[0] < CT_CHANGE_CIPHER_SPEC || h[0] > CT_APPLICATION_DATA)
        return CR_BAD;
    if (avail < REC_HEADER)
        return CR_PARTIAL;
    *len = (size_t)h[3] << 8 | h[4];
    if (h[0] != CT_HANDSHAKE)
        return *len <= SNI_WATCH_SKIP_MAX ? CR_SKIP : CR_BAD;
    if (*len == 0 || *len > SNI_RECORD_MAX)
        return CR_BAD;
    if (avail == REC_HEADER)
        return CR_PARTIAL;
    return h[REC_HEADER] == HT_CLIENT_HELLO ? CR_HELLO : CR_BAD;
}

/* Pass up to avail bytes of the record being skipped; returns how many. */
static size_t client_skip(struct sni_watch *w, size_t avail)
{
    size_t n = avail < w->c_skip ? avail : w->c_skip;

    w->c_skip -= (uint16_t)n;
    return n;
}

/* Stop at offset at of the client's bytes with event e. */
static enum sni_watch_event stop(size_t *used, size_t at, enum sni_watch_event e)
{
    *used = at;
    return e;
}

enum sni_watch_event sni_watch_client(struct sni_watch *w, const uint8_t *p, size_t n, size_t *used)
{
    size_t i, len = 0;

    if (sni_watch_over(w))
        return stop(used, 0, SNI_WATCH_DONE);
    for (i = client_skip(w, n); i < n; i += client_skip(w, n - i)) {
        switch (client_record(p + i, n - i, &len)) {
        case CR_SKIP: break;
        case CR_PARTIAL: return stop(used, i, SNI_WATCH_MORE);
        case CR_HELLO: return stop(used, i, SNI_WATCH_HELLO);
        case CR_BAD: return stop(used, i, SNI_WATCH_BAD);
        }
        w->c_skip = (uint16_t)len;
        i += REC_HEADER;
    }
    return stop(used, n, SNI_WATCH_MORE);
}

/*
 * One byte of a server record header (RFC 8446 §5.1; the version is not
 * read).  Only change_cipher_spec (middlebox compatibility, §D.4) and
 * handshake records keep the watch going: an alert, application data or a
 * byte that is no ContentType means no second ClientHello will be taken.
 */
static void server_record_byte(struct sni_watch *w, uint8_t b)
{
    size_t at = w->s_hdr++;

    if (at == 0) {
        w->s_type = b;
        if (b != CT_CHANGE_CIPHER_SPEC && b != CT_HANDSHAKE)
            over(w);
    } else if (at >= 3) {
        w->s_left = (uint16_t)(w->s_left << 8 | b);
        if (at == 4 && w->s_type == CT_HANDSHAKE && (w->s_left == 0 || w->s_left > SNI_RECORD_MAX))
            over(w);
    }
}

/* The handshake header of the server's first message: a ServerHello whose
 * body can hold legacy_version and random. */
static void hello_header_byte(struct sni_watch *w, size_t at, uint8_t b)
{
    if (at == 0) {
        if (b != HT_SERVER_HELLO)
            over(w);
        return;
    }
    w->hs_left = w->hs_left << 8 | b;
    if (at == HS_HEADER - 1 && w->hs_left < HELLO_END - HS_HEADER)
        over(w);
}

/*
 * One byte of the server's first handshake message, up to the end of its
 * random.  A random other than the HelloRetryRequest value (§4.1.3) ends the
 * watch at the first byte that differs: the server goes on with the first
 * ClientHello.  The whole value means an HRR (§4.1.4): a second ClientHello
 * may follow.
 */
static void hello_byte(struct sni_watch *w, uint8_t b)
{
    size_t at = w->hs_pos++;

    if (at < HS_HEADER) {
        hello_header_byte(w, at, b);
        return;
    }
    w->hs_left--;
    if (at < HELLO_RANDOM) /* legacy_version: not read */
        return;
    if (b != hrr_random[at - HELLO_RANDOM])
        over(w);
    else if (at + 1 == HELLO_END)
        w->phase = PH_RETRY;
}

/*
 * Up to n bytes of handshake messages from one record (a message and its
 * header may span records); returns how many were taken, 0 when the watch
 * ends here: at the first byte of the message after the HelloRetryRequest.
 */
static size_t server_handshake(struct sni_watch *w, const uint8_t *p, size_t n)
{
    if (w->phase == PH_HELLO) {
        hello_byte(w, p[0]);
        return 1;
    }
    if (w->hs_left == 0) {
        over(w);
        return 0;
    }
    size_t take = n < w->hs_left ? n : w->hs_left;
    w->hs_left -= (uint32_t)take;
    return take;
}

/* Up to n bytes of the current record's payload; returns how many were taken. */
static size_t server_payload(struct sni_watch *w, const uint8_t *p, size_t n)
{
    size_t take = n < w->s_left ? n : w->s_left;

    if (w->s_type == CT_HANDSHAKE)
        take = server_handshake(w, p, take);
    w->s_left -= (uint16_t)take;
    return take;
}

enum sni_watch_event sni_watch_server(struct sni_watch *w, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && !sni_watch_over(w);) {
        if (w->s_hdr < REC_HEADER)
            server_record_byte(w, p[i++]);
        else
            i += server_payload(w, p + i, n - i);
        if (w->s_hdr == REC_HEADER && w->s_left == 0)
            w->s_hdr = 0; /* the record is done (or was empty): a header is next */
    }
    return sni_watch_over(w) ? SNI_WATCH_DONE : SNI_WATCH_MORE;
}

const char *sni_watch_event_str(enum sni_watch_event e)
{
    switch (e) {
    case SNI_WATCH_MORE: return "nothing yet";
    case SNI_WATCH_HELLO: return "ClientHello";
    case SNI_WATCH_BAD: return "record not allowed before the server's answer";
    case SNI_WATCH_DONE: return "watch over";
    }
    return "unknown event";
}
