/*
 * test_watch.c - the tunnel watcher (struct sni_watch in sni.h): where a
 * further ClientHello starts in what the client sends after its first one, and
 * when the server's answer ends the watch.
 *
 * The HelloRetryRequest flow below is a real capture; the real ClientHellos in
 * $CLIENTHELLO_DIR serve as second hellos and go through a real sni_parser, to
 * show that its hello.record_bytes lands where the watcher expects the next
 * record.  The other inputs are built here, record by record.  Client streams
 * are fed the way the proxy will feed them (pieces, the bytes MORE keeps fed
 * again), and must give the same events at the same offsets however they are
 * cut.
 */
#include "sni.h"
#include "tap.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

enum {
    CCS = 20, /* ContentType */
    ALERT = 21,
    HANDSHAKE = 22,
    APP_DATA = 23,
    HEARTBEAT = 24,
    CLIENT_HELLO = 1, /* HandshakeType */
    SERVER_HELLO = 2,
    CLIENT_KEY_EXCHANGE = 16,
    BUF_MAX = 1 << 17,
    MAX_SAMPLES = 32,
    SAMPLE_MAX = 20000,
    MAX_EV = 64,
};

/*
 * A real HelloRetryRequest exchange, captured on loopback (OpenSSL 3.0.19):
 * openssl s_client -groups X25519:P-256 -servername example.com against
 * openssl s_server -groups P-256.  The client's first key share is X25519, the
 * server wants P-256 and answers with an HRR; the client sends a
 * change_cipher_spec (RFC 8446 §D.4) and a second ClientHello.
 */
/* clang-format off */
static const uint8_t cap_client[] = {
    /* 0: the first ClientHello, one handshake record of 224 bytes (SNI example.com) */
    0x16, 0x03, 0x01, 0x00, 0xe0, 0x01, 0x00, 0x00, 0xdc, 0x03, 0x03, 0x90, 0x07, 0x79, 0xcd, 0x66,
    0xa9, 0x63, 0xd9, 0x62, 0x3b, 0xd4, 0x9c, 0xf4, 0x99, 0x28, 0x5c, 0x95, 0x2c, 0xb0, 0x10, 0x4a,
    0x50, 0x0b, 0x6a, 0xc3, 0x51, 0x43, 0xbb, 0x9c, 0x1c, 0xfd, 0xdf, 0x20, 0x38, 0x30, 0x7c, 0x80,
    0x67, 0x9c, 0x9c, 0x0f, 0x2a, 0xb3, 0xcc, 0x04, 0x62, 0x1d, 0x91, 0xd8, 0x35, 0x52, 0xc2, 0xfd,
    0x8c, 0x44, 0x8c, 0x46, 0x6b, 0xd8, 0x9a, 0x43, 0xb4, 0x16, 0xdf, 0x8a, 0x00, 0x08, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0x00, 0xff, 0x01, 0x00, 0x00, 0x8b, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e,
    0x00, 0x00, 0x0b, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00, 0x0b,
    0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17,
    0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x1e,
    0x00, 0x1c, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
    0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x00, 0x2b,
    0x00, 0x03, 0x02, 0x03, 0x04, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00,
    0x24, 0x00, 0x1d, 0x00, 0x20, 0x44, 0x98, 0x2d, 0x47, 0xf6, 0x36, 0xae, 0x9d, 0x1c, 0x6a, 0xf5,
    0xe6, 0xd1, 0x96, 0xc9, 0x4a, 0xf8, 0x8b, 0xcd, 0x10, 0xe4, 0xdd, 0xb6, 0x9c, 0xc9, 0x4c, 0x4f,
    0x76, 0x4a, 0x9d, 0x96, 0x41,
    /* 229: change_cipher_spec, 1 byte (RFC 8446 §D.4) */
    0x14, 0x03, 0x03, 0x00, 0x01, 0x01,
    /* 235: the second ClientHello, one handshake record of 257 bytes, key share P-256 */
    0x16, 0x03, 0x03, 0x01, 0x01, 0x01, 0x00, 0x00, 0xfd, 0x03, 0x03, 0x90, 0x07, 0x79, 0xcd, 0x66,
    0xa9, 0x63, 0xd9, 0x62, 0x3b, 0xd4, 0x9c, 0xf4, 0x99, 0x28, 0x5c, 0x95, 0x2c, 0xb0, 0x10, 0x4a,
    0x50, 0x0b, 0x6a, 0xc3, 0x51, 0x43, 0xbb, 0x9c, 0x1c, 0xfd, 0xdf, 0x20, 0x38, 0x30, 0x7c, 0x80,
    0x67, 0x9c, 0x9c, 0x0f, 0x2a, 0xb3, 0xcc, 0x04, 0x62, 0x1d, 0x91, 0xd8, 0x35, 0x52, 0xc2, 0xfd,
    0x8c, 0x44, 0x8c, 0x46, 0x6b, 0xd8, 0x9a, 0x43, 0xb4, 0x16, 0xdf, 0x8a, 0x00, 0x08, 0x13, 0x02,
    0x13, 0x03, 0x13, 0x01, 0x00, 0xff, 0x01, 0x00, 0x00, 0xac, 0x00, 0x00, 0x00, 0x10, 0x00, 0x0e,
    0x00, 0x00, 0x0b, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x2e, 0x63, 0x6f, 0x6d, 0x00, 0x0b,
    0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17,
    0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17, 0x00, 0x00, 0x00, 0x0d, 0x00, 0x1e,
    0x00, 0x1c, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08, 0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a,
    0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06, 0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x00, 0x2b,
    0x00, 0x03, 0x02, 0x03, 0x04, 0x00, 0x2d, 0x00, 0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x47, 0x00,
    0x45, 0x00, 0x17, 0x00, 0x41, 0x04, 0x2d, 0xe4, 0x9c, 0xdd, 0xc9, 0x6e, 0x26, 0xc7, 0xf7, 0x9f,
    0x39, 0x20, 0xfa, 0x12, 0x35, 0xcd, 0xf9, 0xf9, 0x3a, 0x7b, 0xb5, 0x06, 0x79, 0xc2, 0xf3, 0x38,
    0x60, 0x45, 0x39, 0x9e, 0xdc, 0x21, 0x4c, 0xac, 0x10, 0x4b, 0xd7, 0x96, 0x25, 0xae, 0xb5, 0x7a,
    0xf4, 0x1b, 0x49, 0x1d, 0x3a, 0xcd, 0x1f, 0x8c, 0x6a, 0x2c, 0xb8, 0x1c, 0x81, 0x78, 0xa9, 0x2a,
    0xe2, 0xb8, 0xf7, 0x15, 0x4f, 0x55,
};
enum { CAP_FIRST_END = 229, CAP_SECOND = 235, CAP_CLIENT_END = 497 };

static const uint8_t cap_server[] = {
    /* 0: the HelloRetryRequest */
    0x16, 0x03, 0x03, 0x00, 0x58, /* handshake record, TLS 1.2, 88 bytes */
    0x02, 0x00, 0x00, 0x54,       /* server_hello(2), 84 bytes */
    0x03, 0x03,                   /* legacy_version: TLS 1.2 */
    /* random: the HelloRetryRequest value (RFC 8446 §4.1.3) */
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
    /* legacy_session_id_echo: 32 bytes */
    0x20,
    0x38, 0x30, 0x7c, 0x80, 0x67, 0x9c, 0x9c, 0x0f, 0x2a, 0xb3, 0xcc, 0x04, 0x62, 0x1d, 0x91, 0xd8,
    0x35, 0x52, 0xc2, 0xfd, 0x8c, 0x44, 0x8c, 0x46, 0x6b, 0xd8, 0x9a, 0x43, 0xb4, 0x16, 0xdf, 0x8a,
    0x13, 0x02,                   /* cipher_suite: TLS_AES_256_GCM_SHA384 */
    0x00,                         /* legacy_compression_method */
    0x00, 0x0c,                   /* extensions: 12 bytes */
    0x00, 0x2b, 0x00, 0x02, 0x03, 0x04, /* supported_versions: TLS 1.3 */
    0x00, 0x33, 0x00, 0x02, 0x00, 0x17, /* key_share: selected_group secp256r1 */
    /* 93: change_cipher_spec, 1 byte (RFC 8446 §D.4) */
    0x14, 0x03, 0x03, 0x00, 0x01, 0x01,
    /* 99: the ServerHello */
    0x16, 0x03, 0x03, 0x00, 0x9b, /* handshake record, TLS 1.2, 155 bytes */
    0x02, 0x00, 0x00, 0x97,       /* server_hello(2), 151 bytes */
    0x03, 0x03,                   /* legacy_version: TLS 1.2 */
    /* 110: random (a real one) */
    0xd9, 0xca, 0x07, 0x36, 0xbd, 0x7a, 0x1f, 0xba, 0x78, 0x9e, 0x3a, 0x70, 0x17, 0x48, 0x3f, 0x3d,
    0x22, 0x8a, 0x25, 0xef, 0xd1, 0x93, 0x4f, 0x77, 0xf0, 0x9a, 0xb6, 0xd2, 0xe5, 0x01, 0x2d, 0x3c,
    /* legacy_session_id_echo: 32 bytes */
    0x20,
    0x38, 0x30, 0x7c, 0x80, 0x67, 0x9c, 0x9c, 0x0f, 0x2a, 0xb3, 0xcc, 0x04, 0x62, 0x1d, 0x91, 0xd8,
    0x35, 0x52, 0xc2, 0xfd, 0x8c, 0x44, 0x8c, 0x46, 0x6b, 0xd8, 0x9a, 0x43, 0xb4, 0x16, 0xdf, 0x8a,
    0x13, 0x02,                   /* cipher_suite: TLS_AES_256_GCM_SHA384 */
    0x00,                         /* legacy_compression_method */
    0x00, 0x4f,                   /* extensions: 79 bytes */
    0x00, 0x2b, 0x00, 0x02, 0x03, 0x04, /* supported_versions: TLS 1.3 */
    /* key_share: secp256r1, a 65-byte point */
    0x00, 0x33, 0x00, 0x45, 0x00, 0x17, 0x00, 0x41, 0x04, 0xd3, 0xcc, 0x04, 0xbf, 0xe3, 0x43, 0x96,
    0x77, 0xc1, 0xe2, 0xcf, 0x87, 0x49, 0x29, 0x4f, 0x39, 0x08, 0x18, 0xe0, 0x9a, 0x59, 0x94, 0x58,
    0x4b, 0x7e, 0x3c, 0x1f, 0xf4, 0x6f, 0x35, 0x52, 0x04, 0xed, 0x78, 0xfd, 0x15, 0xb1, 0x51, 0x4c,
    0x57, 0x59, 0xa6, 0x3b, 0x64, 0xfc, 0x82, 0xde, 0x23, 0x4f, 0x30, 0x76, 0x15, 0xfa, 0xd1, 0x37,
    0xd3, 0x87, 0x8c, 0x00, 0xa4, 0xcf, 0xaf, 0x46, 0xb7,
};
enum { CAP_HRR_END = 93, CAP_SH = 99, CAP_SERVER_END = 259 };
/* clang-format on */

static const uint8_t hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

static struct sni_parser parser; /* 16 KiB: not on the stack */

/* ---- building inputs ---- */

struct buf {
    uint8_t b[BUF_MAX];
    size_t n;
};

static void put(struct buf *o, const void *p, size_t n)
{
    if (o->n + n > sizeof o->b)
        abort(); /* a test input too big for its buffer: fix the test */
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

/* A record header; the version is garbage on purpose: nobody may read it. */
static void put_header(struct buf *o, uint8_t type, size_t len)
{
    uint8_t h[5] = {type, 0x7f, 0xee, (uint8_t)(len >> 8), (uint8_t)len};
    put(o, h, sizeof h);
}

/* A record of len bytes: first, then filler. */
static void put_record(struct buf *o, uint8_t type, size_t len, uint8_t first)
{
    put_header(o, type, len);
    if (len == 0)
        return;
    put(o, &first, 1);
    if (o->n + len - 1 > sizeof o->b)
        abort();
    memset(o->b + o->n, 0xa5, len - 1);
    o->n += len - 1;
}

/* A handshake message header: type and uint24 length. */
static void put_hs_header(struct buf *o, uint8_t type, size_t len)
{
    uint8_t h[4] = {type, (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    put(o, h, sizeof h);
}

/* A handshake record holding one ServerHello with random and a body of body_len bytes. */
static void put_server_hello(struct buf *o, const uint8_t *random, size_t body_len)
{
    static const uint8_t version[2] = {3, 3};
    size_t n = body_len < 34 ? body_len : 34;

    put_header(o, HANDSHAKE, 4 + body_len);
    put_hs_header(o, SERVER_HELLO, body_len);
    uint8_t body[34];
    memcpy(body, version, 2);
    memcpy(body + 2, random, 32);
    put(o, body, n);
    for (size_t i = n; i < body_len; i++)
        put(o, "", 1);
}

/* ---- the real ClientHellos ---- */

struct sample {
    char file[64];
    uint8_t bytes[SAMPLE_MAX];
    size_t len;
};

static struct sample samples[MAX_SAMPLES];
static size_t nsamples;

static const char *data_dir(void)
{
    const char *d = getenv("CLIENTHELLO_DIR");
    return d ? d : "tests/data/clienthello"; /* run from the top of the tree */
}

static int load_sample(const char *dir, const char *name)
{
    char path[4096];
    struct sample *s = &samples[nsamples];

    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    s->len = fread(s->bytes, 1, sizeof s->bytes, f);
    fclose(f);
    snprintf(s->file, sizeof s->file, "%s", name);
    nsamples++;
    return 0;
}

static int load_samples(void)
{
    DIR *d = opendir(data_dir());
    struct dirent *e;

    if (!d)
        return -1;
    while ((e = readdir(d)) && nsamples < MAX_SAMPLES) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".bin") == 0 && load_sample(data_dir(), e->d_name))
            break;
    }
    closedir(d);
    return 0;
}

/* ---- feeding the client side as the proxy will ---- */

struct event {
    enum sni_watch_event e;
    size_t at; /* absolute offset in the client's stream */
};

struct run {
    struct event ev[MAX_EV];
    size_t nev;
    size_t max_kept;   /* most bytes a MORE kept */
    bool overrun;      /* *used > n once */
    bool hello_failed; /* the parser refused a hello the watcher pointed at */
};

/* Piece sizes: everything at once, one byte, or pseudo-random (seeded). */
static uint32_t rng;

static size_t piece_whole(void)
{
    return BUF_MAX;
}

static size_t piece_byte(void)
{
    return 1;
}

static uint32_t rand_next(void)
{
    rng = rng * 1103515245u + 12345u;
    return rng >> 16;
}

/* Mostly small pieces (header splits), now and then a big one. */
static size_t piece_random(void)
{
    return rand_next() % 4 ? 1 + rand_next() % 8 : 1 + rand_next() % 700;
}

static size_t read_more(size_t end, size_t len, size_t (*piece)(void))
{
    size_t k = piece();
    return len - end < k ? len : end + k;
}

/* Parse the ClientHello at *pos with a fresh parser, reading on as needed;
 * on success move *pos past its records. */
static bool parse_hello(const uint8_t *s, size_t len, size_t *pos, size_t *end,
                        size_t (*piece)(void))
{
    size_t fed = *pos;
    enum sni_result res;

    sni_parser_init(&parser);
    while ((res = sni_parser_feed(&parser, s + fed, *end - fed)) == SNI_NEED_MORE && *end < len) {
        fed = *end;
        *end = read_more(*end, len, piece);
    }
    if (res != SNI_OK && res != SNI_NO_SNI)
        return false;
    *pos += parser.hello.record_bytes;
    return true;
}

/*
 * Feed the client stream s[0,len) to w in pieces: the bytes a MORE keeps are
 * fed again ahead of the next piece; at a HELLO the hello is parsed and the
 * watcher goes on after it.  Stops at BAD, DONE, a refused hello or the end.
 */
static void drive(struct sni_watch *w, const uint8_t *s, size_t len, size_t (*piece)(void),
                  struct run *r)
{
    size_t pos = 0, end = 0, used;

    *r = (struct run){.nev = 0};
    for (;;) {
        enum sni_watch_event e = sni_watch_client(w, s + pos, end - pos, &used);
        if (used > end - pos) {
            r->overrun = true;
            return;
        }
        if (e == SNI_WATCH_MORE) {
            pos += used;
            if (end - pos > r->max_kept)
                r->max_kept = end - pos;
            if (end == len)
                return;
            end = read_more(end, len, piece);
            continue;
        }
        if (r->nev == MAX_EV)
            return;
        r->ev[r->nev++] = (struct event){e, pos + used};
        if (e != SNI_WATCH_HELLO)
            return;
        pos += used;
        if (!parse_hello(s, len, &pos, &end, piece)) {
            r->hello_failed = true;
            return;
        }
    }
}

static void drive_fresh(const uint8_t *s, size_t len, size_t (*piece)(void), struct run *r)
{
    struct sni_watch w;
    sni_watch_init(&w);
    drive(&w, s, len, piece, r);
}

static bool same_run(const struct run *a, const struct run *b)
{
    if (a->nev != b->nev || a->overrun != b->overrun || a->hello_failed != b->hello_failed)
        return false;
    for (size_t i = 0; i < a->nev; i++)
        if (a->ev[i].e != b->ev[i].e || a->ev[i].at != b->ev[i].at)
            return false;
    return true;
}

/* Events as text, for diagnostics. */
static const char *run_str(const struct run *r)
{
    static char out[2048];
    size_t n = 0;

    out[0] = 0;
    for (size_t i = 0; i < r->nev && n < sizeof out - 64; i++)
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s@%zu", i ? " " : "",
                              sni_watch_event_str(r->ev[i].e), r->ev[i].at);
    if (r->hello_failed)
        snprintf(out + n, sizeof out - n, " (hello refused)");
    return out;
}

/* One client call on s[0,n) of a fresh watcher; *used through used. */
static enum sni_watch_event client_once(const uint8_t *s, size_t n, size_t *used)
{
    struct sni_watch w;
    sni_watch_init(&w);
    return sni_watch_client(&w, s, n, used);
}

/* Feed server bytes one at a time: the index of the byte that ended the
 * watch, or n if none did. */
static size_t server_done_at(const uint8_t *s, size_t n)
{
    struct sni_watch w;

    sni_watch_init(&w);
    for (size_t i = 0; i < n; i++)
        if (sni_watch_server(&w, s + i, 1) == SNI_WATCH_DONE)
            return i;
    return n;
}

/* The same bytes at once: DONE or not. */
static bool server_done_whole(const uint8_t *s, size_t n)
{
    struct sni_watch w;

    sni_watch_init(&w);
    return sni_watch_server(&w, s, n) == SNI_WATCH_DONE;
}

/* ---- the tests ---- */

static void test_size(void)
{
    ok(sizeof(struct sni_watch) <= 32, "struct sni_watch is %zu bytes (at most 32)",
       sizeof(struct sni_watch));
}

/* The captured exchange, step by step as the proxy will see it. */
static void test_captured_flow(void)
{
    const uint8_t *rest = cap_client + CAP_FIRST_END;
    size_t n = CAP_CLIENT_END - CAP_FIRST_END, used, after;
    struct sni_watch w;

    sni_parser_init(&parser);
    enum sni_result r = sni_parser_feed(&parser, cap_client, sizeof cap_client);
    ok(r == SNI_OK && parser.hello.record_bytes == CAP_FIRST_END,
       "captured: the first ClientHello ends at %zu", parser.hello.record_bytes);
    sni_watch_init(&w);
    ok(sni_watch_server(&w, cap_server, CAP_HRR_END) == SNI_WATCH_MORE && !sni_watch_over(&w),
       "captured: the HelloRetryRequest keeps the watch going");
    ok(sni_watch_server(&w, cap_server + CAP_HRR_END, CAP_SH - CAP_HRR_END) == SNI_WATCH_MORE,
       "captured: the server's change_cipher_spec is skipped");
    enum sni_watch_event e = sni_watch_client(&w, rest, n, &used);
    ok(e == SNI_WATCH_HELLO && CAP_FIRST_END + used == CAP_SECOND,
       "captured: the client's change_cipher_spec passes, the second ClientHello at %zu (%s)",
       CAP_FIRST_END + used, sni_watch_event_str(e));
    sni_parser_init(&parser);
    r = sni_parser_feed(&parser, rest + used, n - used);
    after = used + parser.hello.record_bytes;
    ok(r == SNI_OK && parser.hello.host.len == 11 &&
           memcmp(parser.hello.host.ptr, "example.com", 11) == 0 &&
           CAP_FIRST_END + after == CAP_CLIENT_END,
       "captured: a fresh parser reads the second ClientHello (example.com), ending at %zu",
       CAP_FIRST_END + after);
    e = sni_watch_client(&w, rest + after, n - after, &used);
    ok(e == SNI_WATCH_MORE && used == 0, "captured: the watcher goes on after it (%s)",
       sni_watch_event_str(e));
    ok(sni_watch_server(&w, cap_server + CAP_SH, CAP_SERVER_END - CAP_SH) == SNI_WATCH_DONE &&
           sni_watch_over(&w),
       "captured: the ServerHello after the HRR ends the watch");
    e = sni_watch_client(&w, cap_client + CAP_SECOND, 20, &used);
    ok(e == SNI_WATCH_DONE && used == 0, "captured: then the client's bytes pass (%s, used %zu)",
       sni_watch_event_str(e), used);
    ok(server_done_at(cap_server, sizeof cap_server) == CAP_SH + 5,
       "captured: a byte at a time, the watch ends at the ServerHello's first byte (%zu)",
       server_done_at(cap_server, sizeof cap_server));
}

/* No HRR: the server's first ServerHello ends the watch, at its random. */
static void test_plain_flow(void)
{
    const uint8_t *sh = cap_server + CAP_SH;
    size_t n = CAP_SERVER_END - CAP_SH, used, bad = 0;
    static struct buf o;
    struct sni_watch w;

    sni_watch_init(&w);
    ok(sni_watch_server(&w, sh, n) == SNI_WATCH_DONE && server_done_at(sh, n) == 5 + 6,
       "plain: a real ServerHello ends the watch at the first byte of its random (%zu)",
       server_done_at(sh, n));
    o.n = 0;
    put_record(&o, APP_DATA, 50, 0x17);
    put_record(&o, HANDSHAKE, 40, CLIENT_KEY_EXCHANGE);
    enum sni_watch_event e = sni_watch_client(&w, o.b, o.n, &used);
    ok(e == SNI_WATCH_DONE && used == 0, "plain: the client's bytes after it pass (%s, used %zu)",
       sni_watch_event_str(e), used);
    for (size_t k = 0; k < 32 && !bad; k++) {
        uint8_t random[32];
        memcpy(random, hrr_random, 32);
        random[k] ^= 0x01;
        o.n = 0;
        put_server_hello(&o, random, 40);
        if (server_done_at(o.b, o.n) != 11 + k)
            bad = k + 1;
    }
    ok(bad == 0, "plain: a random one bit off the HRR value ends the watch at that byte (bad: %zu)",
       bad);
}

/* Each real ClientHello as a second hello, after early data and a CCS. */
static void test_second_hellos(void)
{
    static struct buf o;
    size_t bad = 0, used, used2;

    for (size_t i = 0; i < nsamples && !bad; i++) {
        const struct sample *s = &samples[i];
        struct sni_watch w;
        o.n = 0;
        put_record(&o, CCS, 1, 1);
        put_record(&o, APP_DATA, 500, 0x42);
        put_record(&o, ALERT, 2, 1);
        size_t at = o.n;
        put(&o, s->bytes, s->len);
        put_record(&o, APP_DATA, 30, 0x42);
        sni_watch_init(&w);
        enum sni_watch_event e = sni_watch_client(&w, o.b, o.n, &used);
        enum sni_watch_event e2 = sni_watch_client(&w, o.b + used, o.n - used, &used2);
        sni_parser_init(&parser);
        enum sni_result r = sni_parser_feed(&parser, o.b + at, o.n - at);
        size_t next = at + parser.hello.record_bytes;
        enum sni_watch_event e3 = sni_watch_client(&w, o.b + next, o.n - next, &used2);
        if (!ok(e == SNI_WATCH_HELLO && used == at && e2 == SNI_WATCH_HELLO &&
                    (r == SNI_OK || r == SNI_NO_SNI) && next == at + s->len &&
                    e3 == SNI_WATCH_MORE && used2 == o.n - next,
                "%s as a second hello: HELLO at %zu (twice: not consumed), the parser stops at "
                "%zu, the watcher goes on there",
                s->file, used, next))
            bad = i + 1;
    }
}

/* Records a client may send before the answer, and those it may not. */
struct client_case {
    const char *what;
    uint8_t type;
    size_t len;
    uint8_t first;
    enum sni_watch_event e; /* MORE: skipped */
};

static const struct client_case client_cases[] = {
    {"change_cipher_spec", CCS, 1, 1, SNI_WATCH_MORE},
    {"alert", ALERT, 2, 1, SNI_WATCH_MORE},
    {"early data", APP_DATA, 1000, 0x42, SNI_WATCH_MORE},
    {"empty application_data", APP_DATA, 0, 0, SNI_WATCH_MORE},
    {"application_data of 2^14+2048", APP_DATA, 18432, 0x42, SNI_WATCH_MORE},
    {"a ClientHello record of 2^14", HANDSHAKE, 16384, CLIENT_HELLO, SNI_WATCH_HELLO},
    {"a ClientHello record of 1 byte", HANDSHAKE, 1, CLIENT_HELLO, SNI_WATCH_HELLO},
    {"client_key_exchange (16)", HANDSHAKE, 40, CLIENT_KEY_EXCHANGE, SNI_WATCH_BAD},
    {"a handshake record of type 2", HANDSHAKE, 40, SERVER_HELLO, SNI_WATCH_BAD},
    {"record type 24", HEARTBEAT, 3, 1, SNI_WATCH_BAD},
    {"record type 19", 19, 3, 1, SNI_WATCH_BAD},
    {"record type 0", 0, 3, 1, SNI_WATCH_BAD},
    {"an HTTP request", 'G', 3, 1, SNI_WATCH_BAD},
    {"application_data of 2^14+2049", APP_DATA, 18433, 0x42, SNI_WATCH_BAD},
    {"alert of 2^14+2049", ALERT, 18433, 1, SNI_WATCH_BAD},
    {"change_cipher_spec of 65535", CCS, 65535, 1, SNI_WATCH_BAD},
    {"zero-length handshake record", HANDSHAKE, 0, 0, SNI_WATCH_BAD},
    {"handshake record of 2^14+1", HANDSHAKE, 16385, CLIENT_HELLO, SNI_WATCH_BAD},
};

static void test_client_cases(void)
{
    static struct buf o;
    size_t used, used2;

    for (size_t i = 0; i < sizeof client_cases / sizeof *client_cases; i++) {
        const struct client_case *c = &client_cases[i];
        struct sni_watch w;
        o.n = 0;
        put_record(&o, CCS, 1, 1);
        put_record(&o, APP_DATA, 20, 0x42);
        size_t at = o.n;
        put_record(&o, c->type, c->len, c->first);
        sni_watch_init(&w);
        enum sni_watch_event e = sni_watch_client(&w, o.b, o.n, &used);
        enum sni_watch_event e2 = sni_watch_client(&w, o.b + at, o.n - at, &used2);
        bool again = c->e == SNI_WATCH_MORE || (e2 == e && used2 == 0); /* state unchanged */
        ok(e == c->e && used == (c->e == SNI_WATCH_MORE ? o.n : at) && again && !sni_watch_over(&w),
           "client: %s: %s at %zu (expected %s)", c->what, sni_watch_event_str(e), used,
           sni_watch_event_str(c->e));
    }
}

/* A skipped record's payload passes as it comes, across calls. */
static void test_skip_across_calls(void)
{
    static struct buf o;
    struct sni_watch w;
    size_t u1, u2, u3;

    o.n = 0;
    put_record(&o, APP_DATA, 1000, 0x42);
    size_t at = o.n;
    put(&o, samples[0].bytes, samples[0].len);
    sni_watch_init(&w);
    enum sni_watch_event e1 = sni_watch_client(&w, o.b, 15, &u1);
    enum sni_watch_event e2 = sni_watch_client(&w, o.b + 15, at - 15 - 1, &u2);
    enum sni_watch_event e3 = sni_watch_client(&w, o.b + at - 1, o.n - at + 1, &u3);
    ok(e1 == SNI_WATCH_MORE && u1 == 15 && e2 == SNI_WATCH_MORE && u2 == at - 16 &&
           e3 == SNI_WATCH_HELLO && u3 == 1,
       "client: early data passes in pieces, the hello after its last byte (%zu %zu %zu)", u1, u2,
       u3);
}

/*
 * Header splits.  Each case is a prefix record (early data, 3 bytes), the
 * record under test and a change_cipher_spec, with what a reader needs of the
 * record under test before it can tell (need) and what it then says.
 */
struct split_case {
    const char *what;
    uint8_t type;
    size_t len;
    uint8_t first;
    size_t need;            /* bytes of it a classification needs */
    enum sni_watch_event e; /* MORE: skipped */
};

static const struct split_case split_cases[] = {
    {"change_cipher_spec", CCS, 1, 1, 5, SNI_WATCH_MORE},
    {"alert", ALERT, 2, 1, 5, SNI_WATCH_MORE},
    {"early data", APP_DATA, 300, 0x42, 5, SNI_WATCH_MORE},
    {"empty application_data", APP_DATA, 0, 0, 5, SNI_WATCH_MORE},
    {"a ClientHello record", HANDSHAKE, 200, CLIENT_HELLO, 6, SNI_WATCH_HELLO},
    {"client_key_exchange", HANDSHAKE, 40, CLIENT_KEY_EXCHANGE, 6, SNI_WATCH_BAD},
    {"zero-length handshake", HANDSHAKE, 0, 0, 5, SNI_WATCH_BAD},
    {"handshake of 2^14+1", HANDSHAKE, 16385, CLIENT_HELLO, 5, SNI_WATCH_BAD},
    {"application_data of 2^14+2049", APP_DATA, 18433, 0, 5, SNI_WATCH_BAD},
    {"record type 24", HEARTBEAT, 10, 0, 1, SNI_WATCH_BAD},
    {"an HTTP request", 'G', 10, 0, 1, SNI_WATCH_BAD},
};

struct rec_info {
    size_t at, len, need;
    enum sni_watch_event e;
};

/* What the first call on s[0,c) must say, from the records' layout alone. */
static struct event expect_cut(const struct rec_info *recs, size_t nrecs, size_t c)
{
    for (size_t i = 0; i < nrecs; i++) {
        const struct rec_info *r = &recs[i];
        if (c <= r->at)
            break;
        if (c < r->at + r->need)
            return (struct event){SNI_WATCH_MORE, r->at};
        if (r->e != SNI_WATCH_MORE)
            return (struct event){r->e, r->at};
        if (c <= r->at + 5 + r->len)
            break;
    }
    return (struct event){SNI_WATCH_MORE, c};
}

static void test_split_case(const struct split_case *sc)
{
    static struct buf o;
    size_t u1, u2, uw, bad = 0, kept_max = 0;

    o.n = 0;
    put_record(&o, APP_DATA, 3, 0x42);
    put_record(&o, sc->type, sc->len, sc->first);
    size_t tail = o.n;
    put_record(&o, CCS, 1, 1);
    struct rec_info recs[3] = {
        {0, 3, 5, SNI_WATCH_MORE}, {8, sc->len, sc->need, sc->e}, {tail, 1, 5, SNI_WATCH_MORE}};
    enum sni_watch_event ew = client_once(o.b, o.n, &uw);
    for (size_t c = 0; c <= o.n && !bad; c++) {
        struct sni_watch w;
        struct event x = expect_cut(recs, 3, c);
        sni_watch_init(&w);
        enum sni_watch_event e1 = sni_watch_client(&w, o.b, c, &u1);
        if (e1 != x.e || u1 != x.at) {
            bad = c + 1;
            break;
        }
        if (e1 == SNI_WATCH_MORE && c - u1 > kept_max)
            kept_max = c - u1;
        if (e1 != SNI_WATCH_MORE)
            continue;
        enum sni_watch_event e2 = sni_watch_client(&w, o.b + u1, o.n - u1, &u2);
        if (e2 != ew || u1 + u2 != uw)
            bad = c + 1;
    }
    ok(bad == 0 && kept_max <= 5,
       "split: %s cut at every byte: MORE keeps its header (at most %zu bytes), the same "
       "%s at %zu when fed again (first bad cut: %zu)",
       sc->what, kept_max, sni_watch_event_str(ew), uw, bad ? bad - 1 : 0);
}

/* A long client stream; returns it in o and its expected events in x. */
static size_t long_stream(struct buf *o, struct event *x)
{
    size_t nx = 0;

    o->n = 0;
    put_record(o, CCS, 1, 1);
    put_record(o, APP_DATA, 700, 0x42);
    put_record(o, ALERT, 2, 1);
    for (size_t i = 0; i < nsamples; i++) {
        x[nx++] = (struct event){SNI_WATCH_HELLO, o->n};
        put(o, samples[i].bytes, samples[i].len);
        put_record(o, APP_DATA, i == 0 ? 18432 : 5 + 37 * i, 0x42);
        put_record(o, APP_DATA, 0, 0);
    }
    x[nx++] = (struct event){SNI_WATCH_HELLO, o->n};
    put(o, cap_client + CAP_SECOND, CAP_CLIENT_END - CAP_SECOND);
    put_record(o, CCS, 1, 1);
    x[nx++] = (struct event){SNI_WATCH_BAD, o->n};
    put_record(o, HANDSHAKE, 70, CLIENT_KEY_EXCHANGE);
    return nx;
}

static void test_stream_cuts(void)
{
    static struct buf o;
    static struct run whole, part;
    struct event x[MAX_EV];
    size_t nx = long_stream(&o, x), bad_seed = 0, kept = 0;
    bool same = true;

    drive_fresh(o.b, o.n, piece_whole, &whole);
    for (size_t i = 0; i < nx && same; i++)
        same = whole.nev == nx && whole.ev[i].e == x[i].e && whole.ev[i].at == x[i].at;
    ok(same && !whole.hello_failed, "stream of %zu bytes fed whole: %zu events as built (%s)", o.n,
       nx, run_str(&whole));
    drive_fresh(o.b, o.n, piece_byte, &part);
    ok(same_run(&part, &whole) && part.max_kept <= 5,
       "stream fed one byte at a time: the same events (%s), at most %zu bytes kept",
       run_str(&part), part.max_kept);
    for (uint32_t seed = 1; seed <= 300 && !bad_seed; seed++) {
        rng = seed;
        drive_fresh(o.b, o.n, piece_random, &part);
        if (!same_run(&part, &whole) || part.max_kept > 5 || part.overrun)
            bad_seed = seed;
        kept = part.max_kept > kept ? part.max_kept : kept;
    }
    ok(bad_seed == 0,
       "stream in random pieces (300 seeds): the same events, at most %zu kept "
       "(bad seed: %zu)",
       kept, bad_seed);
}

/* Server inputs and the byte at which the watch must end (or never: SIZE_MAX). */
static void server_case(const char *what, const uint8_t *s, size_t n, size_t done_at)
{
    size_t at = server_done_at(s, n), bad_seed = 0;
    bool expect_done = done_at != SIZE_MAX;

    for (uint32_t seed = 1; seed <= 50 && !bad_seed; seed++) {
        struct sni_watch w;
        enum sni_watch_event e = SNI_WATCH_MORE;
        rng = seed;
        sni_watch_init(&w);
        for (size_t i = 0, k; i < n; i += k) {
            k = piece_random();
            k = k < n - i ? k : n - i;
            e = sni_watch_server(&w, s + i, k);
            if (e == SNI_WATCH_DONE && i + k <= done_at) /* DONE before its byte came */
                bad_seed = seed;
        }
        if ((e == SNI_WATCH_DONE) != expect_done)
            bad_seed = seed;
    }
    ok(at == (expect_done ? done_at : n) && server_done_whole(s, n) == expect_done && bad_seed == 0,
       "server: %s: %s at byte %zu (expected %s at %zu; random pieces bad seed: %zu)", what,
       at < n ? "DONE" : "MORE", at, expect_done ? "DONE" : "MORE", expect_done ? done_at : n,
       bad_seed);
}

static void test_server_cases(void)
{
    static const uint8_t alert[] = {ALERT, 3, 3, 0, 2, 2, 40};
    static const uint8_t app[] = {APP_DATA, 3, 3, 0, 2, 1, 2};
    static const uint8_t heartbeat[] = {HEARTBEAT, 3, 3, 0, 2, 1, 2};
    static const uint8_t type19[] = {19, 3, 3, 0, 2, 1, 2};
    static const uint8_t empty[] = {HANDSHAKE, 3, 3, 0, 0, 2, 0};
    static const uint8_t big[] = {HANDSHAKE, 3, 3, 0x40, 0x01, 2, 0};
    static const uint8_t cert[] = {HANDSHAKE, 3, 3, 0, 8, 11, 0, 0, 4, 0, 0, 0, 0};
    static const char http[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
    static const char ssh[] = "SSH-2.0-OpenSSH_9.2p1\r\n";
    static struct buf o;
    uint8_t real[32];

    memcpy(real, cap_server + CAP_SH + 11, 32);
    server_case("an alert first", alert, sizeof alert, 0);
    server_case("application_data first", app, sizeof app, 0);
    server_case("record type 24 first", heartbeat, sizeof heartbeat, 0);
    server_case("record type 19 first", type19, sizeof type19, 0);
    server_case("an HTTP answer", (const uint8_t *)http, sizeof http - 1, 0);
    server_case("an SSH banner", (const uint8_t *)ssh, sizeof ssh - 1, 0);
    server_case("a zero-length handshake record", empty, sizeof empty, 4);
    server_case("a handshake record of 2^14+1", big, sizeof big, 4);
    server_case("a Certificate first", cert, sizeof cert, 5);

    o.n = 0;
    put_server_hello(&o, hrr_random, 33);
    server_case("a ServerHello of 33 bytes", o.b, o.n, 8);
    o.n = 0;
    put_server_hello(&o, hrr_random, 34);
    server_case("an HRR of 34 bytes (nothing after)", o.b, o.n, SIZE_MAX);
    o.n = 0;
    put_header(&o, HANDSHAKE, 16384);
    put_hs_header(&o, SERVER_HELLO, 16380);
    put(&o, "\3\3", 2);
    put(&o, hrr_random, 32);
    for (size_t i = 38; i < 16384; i++)
        put(&o, "", 1);
    server_case("an HRR filling a record of 2^14", o.b, o.n, SIZE_MAX);
    o.n = 0;
    put_record(&o, CCS, 1, 1);
    put_record(&o, ALERT, 2, 2);
    server_case("change_cipher_spec, then an alert", o.b, o.n, 6);
    o.n = 0;
    put_record(&o, CCS, 0, 0);
    put_server_hello(&o, real, 60);
    server_case("an empty change_cipher_spec, then a ServerHello", o.b, o.n, 5 + 11);
    o.n = 0;
    put_server_hello(&o, hrr_random, 40);
    put_record(&o, ALERT, 2, 2);
    server_case("an HRR, then an alert", o.b, o.n, 49);
    o.n = 0;
    put_server_hello(&o, hrr_random, 40);
    put_record(&o, CCS, 1, 1);
    put_record(&o, APP_DATA, 30, 0x42);
    server_case("an HRR, a change_cipher_spec, then application_data", o.b, o.n, 55);
    o.n = 0;
    put_header(&o, HANDSHAKE, 44 + 10);
    put_hs_header(&o, SERVER_HELLO, 40);
    put(&o, "\3\3", 2);
    put(&o, hrr_random, 32);
    put(&o, "\0\0\0\0\0\0", 6);
    put_hs_header(&o, 8, 6); /* the next message in the same record */
    put(&o, "\0\0\0\0\0\0", 6);
    server_case("an HRR and the next message in one record", o.b, o.n, 49);
}

/* The captured HRR re-framed: its 88 bytes in two records cut at every
 * offset, and one record per byte; the watch ends at the next message. */
static void test_hrr_reframed(void)
{
    const uint8_t *hrr = cap_server + 5;
    const size_t len = CAP_HRR_END - 5;
    static struct buf o;
    size_t bad = 0;

    for (size_t cut = 0; cut <= len && !bad; cut++) {
        o.n = 0;
        if (cut == 0) { /* one byte a record */
            for (size_t i = 0; i < len; i++) {
                put_header(&o, HANDSHAKE, 1);
                put(&o, hrr + i, 1);
            }
        } else {
            put_header(&o, HANDSHAKE, cut);
            put(&o, hrr, cut);
            if (cut < len) {
                put_header(&o, HANDSHAKE, len - cut);
                put(&o, hrr + cut, len - cut);
            }
        }
        put_record(&o, CCS, 1, 1);
        size_t next = o.n + 5;
        put(&o, cap_server + CAP_SH, CAP_SERVER_END - CAP_SH);
        if (server_done_at(o.b, o.n) != next)
            bad = cut + 1;
    }
    ok(bad == 0,
       "server: the HRR across two records cut at every offset, and a byte a record: the watch "
       "ends at the next message (bad: %zu)",
       bad ? bad - 1 : 0);
}

static void test_sticky(void)
{
    static const uint8_t alert[] = {ALERT, 3, 3, 0, 2, 2, 40};
    static struct buf o;
    struct sni_watch w;
    size_t used = 99, used2 = 99, used3 = 99;

    o.n = 0;
    put_record(&o, APP_DATA, 100, 0x42);
    sni_watch_init(&w);
    enum sni_watch_event e0 = sni_watch_client(&w, o.b, 20, &used); /* inside a skip */
    bool before = e0 == SNI_WATCH_MORE && !sni_watch_over(&w);
    sni_watch_server(&w, alert, sizeof alert);
    o.n = 0;
    put_record(&o, HEARTBEAT, 3, 1);
    enum sni_watch_event e1 = sni_watch_client(&w, o.b, o.n, &used);
    enum sni_watch_event e2 = sni_watch_client(&w, cap_client + CAP_SECOND, 100, &used2);
    enum sni_watch_event e3 = sni_watch_client(&w, o.b, 0, &used3);
    ok(before && e1 == SNI_WATCH_DONE && e2 == SNI_WATCH_DONE && e3 == SNI_WATCH_DONE &&
           used == 0 && used2 == 0 && used3 == 0 && sni_watch_over(&w),
       "done: after the server's DONE every client call is DONE, *used 0");
    ok(sni_watch_server(&w, cap_server, CAP_HRR_END) == SNI_WATCH_DONE &&
           sni_watch_server(&w, cap_server, 0) == SNI_WATCH_DONE,
       "done: and every server call");
    sni_watch_init(&w);
    ok(sni_watch_server(&w, cap_server, 0) == SNI_WATCH_MORE &&
           sni_watch_client(&w, o.b, o.n, &used) == SNI_WATCH_BAD && !sni_watch_over(&w),
       "done: a BAD from the client does not end the watch");
}

static void test_strings(void)
{
    const char *s[4] = {sni_watch_event_str(SNI_WATCH_MORE), sni_watch_event_str(SNI_WATCH_HELLO),
                        sni_watch_event_str(SNI_WATCH_BAD), sni_watch_event_str(SNI_WATCH_DONE)};
    bool distinct = true;

    for (int i = 0; i < 4; i++)
        for (int j = 0; j < i; j++)
            distinct &= s[i][0] && strcmp(s[i], s[j]) != 0;
    ok(distinct && s[0][0] && sni_watch_event_str((enum sni_watch_event)99)[0],
       "sni_watch_event_str: four distinct texts, and one for an unknown value");
}

int main(void)
{
    int loaded = load_samples();
    if (!ok(loaded == 0 && nsamples >= 8, "read %zu ClientHellos from %s", nsamples, data_dir()))
        return tap_done();
    test_size();
    test_captured_flow();
    test_plain_flow();
    test_second_hellos();
    test_client_cases();
    test_skip_across_calls();
    for (size_t i = 0; i < sizeof split_cases / sizeof *split_cases; i++)
        test_split_case(&split_cases[i]);
    test_stream_cuts();
    test_server_cases();
    test_hrr_reframed();
    test_sticky();
    test_strings();
    return tap_done();
}
