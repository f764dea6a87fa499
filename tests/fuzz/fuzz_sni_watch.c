/*
 * fuzz_sni_watch.c - libFuzzer harness for the tunnel watcher (struct
 * sni_watch in sni.h).
 *
 * The input: byte 0 says how the server's bytes are made (raw, or a built
 * ServerHello or HelloRetryRequest in front of them), byte 1 seeds the piece
 * sizes, bytes 2-3 say how many of the remaining bytes are the server's; the
 * rest are the client's, as they follow its first ClientHello.  An input that
 * starts with a handshake record (22), as the seeds do (the ClientHello
 * captures), is all the client's instead: a second hello; its last two bytes
 * then say how the server's bytes are built and seed the pieces.
 *
 * After a HELLO the caller parses the hello with a fresh sni_parser and goes
 * on after its hello.record_bytes; when the parser refuses it (random bytes
 * mostly), the harness goes on after that one record, which is a record
 * boundary too, so the rest of the input still exercises the watcher.
 *
 * Beyond "no crash, no sanitizer report" it asserts:
 *  1. the client's bytes fed in random pieces, the bytes MORE keeps fed again,
 *     give the same events at the same absolute offsets as one call per event
 *     on the whole buffer, and these are what an independent record walker
 *     written here predicts from the rules;
 *  2. *used never exceeds n, and MORE never keeps more than 5 bytes;
 *  3. a HELLO (and a BAD) is at a position where a record header begins, by a
 *     simple walk of the record lengths from the start;
 *  4. once either side said DONE, every call of either side says DONE (the
 *     client's with *used 0), and until then the client's events are those of
 *     the client alone; the server's DONE comes at the same byte however its
 *     bytes are cut;
 *  5. a server whose first handshake message is a ServerHello with a random
 *     other than the HRR value ends the watch at the first byte that differs;
 *     one that sends an HRR does not, and ends it at the first byte of its
 *     next handshake message (both built here from the fuzz bytes, with
 *     change_cipher_spec records and a record split inside the message); a
 *     first message too short for its random or of another type ends it at
 *     its header, and so does what no server sends while the watch is on.
 *
 * A client record header whose version low byte (never read) is 0xb8..0xbf
 * gets a length at the edge of a rule (see edges[]), so the fuzzer finds them.
 */
#include "fuzz_check.h"
#include "sni.h"

#include <string.h>

enum {
    MAX_EV = 4096,
    BUF_MAX = 3 * 20000,
    STOP = -1, /* resume(): the hello is not all in */
};

static const uint8_t hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

struct event {
    enum sni_watch_event e;
    size_t at;
};

struct run {
    struct event ev[MAX_EV];
    size_t nev;
};

static struct sni_parser parser;
static struct run oracle, whole, pieces, mixed;
static uint8_t starts[BUF_MAX]; /* 1 where a record header begins (property 3) */
static uint8_t built[BUF_MAX];
static uint8_t client[BUF_MAX]; /* the client's bytes, edges put in */

static uint32_t rng;

/* A piece size: mostly small (header splits), sometimes large. */
static size_t piece(void)
{
    rng = rng * 1103515245u + 12345u;
    uint32_t r = rng >> 8;
    return r & 3 ? 1 + (r >> 2) % 7 : 1 + (r >> 2) % 900;
}

static size_t rec_len(const uint8_t *h)
{
    return (size_t)h[3] << 8 | h[4];
}

static void add(struct run *r, enum sni_watch_event e, size_t at)
{
    if (r->nev < MAX_EV)
        r->ev[r->nev++] = (struct event){e, at};
}

static int same_run(const struct run *a, const struct run *b, size_t n)
{
    if (a->nev < n || b->nev < n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (a->ev[i].e != b->ev[i].e || a->ev[i].at != b->ev[i].at)
            return 0;
    return 1;
}

/* Where the caller goes on after a HELLO at `at`: past the hello's records,
 * or (the parser refusing it) past the one record; STOP when not all in. */
static long resume(const uint8_t *c, size_t n, size_t at)
{
    sni_parser_init(&parser);
    enum sni_result r = sni_parser_feed(&parser, c + at, n - at);
    if (r == SNI_OK || r == SNI_NO_SNI)
        return (long)(at + parser.hello.record_bytes);
    size_t next = at + 5 + rec_len(c + at);
    return next <= n ? (long)next : STOP;
}

/*
 * The rules of sni.h, written as a walk over whole records: the event at
 * each record from `from` on, or MORE at the offset to keep from.
 */
static struct event predict(const uint8_t *c, size_t n, size_t i)
{
    for (;;) {
        if (i == n)
            return (struct event){SNI_WATCH_MORE, n};
        uint8_t type = c[i];
        if (type != 20 && type != 21 && type != 22 && type != 23)
            return (struct event){SNI_WATCH_BAD, i};
        if (n - i < 5)
            return (struct event){SNI_WATCH_MORE, i};
        size_t len = rec_len(c + i);
        if (type == 22) {
            if (len == 0 || len > 16384)
                return (struct event){SNI_WATCH_BAD, i};
            if (n - i == 5)
                return (struct event){SNI_WATCH_MORE, i};
            return (struct event){c[i + 5] == 1 ? SNI_WATCH_HELLO : SNI_WATCH_BAD, i};
        }
        if (len > 16384 + 2048)
            return (struct event){SNI_WATCH_BAD, i};
        if (n - i - 5 <= len)
            return (struct event){SNI_WATCH_MORE, n};
        i += 5 + len;
    }
}

static void predict_all(const uint8_t *c, size_t n, struct run *r)
{
    size_t i = 0;

    r->nev = 0;
    for (;;) {
        struct event x = predict(c, n, i);
        add(r, x.e, x.at);
        long next = x.e == SNI_WATCH_HELLO ? resume(c, n, x.at) : STOP;
        if (next == STOP || r->nev == MAX_EV)
            return;
        i = (size_t)next;
    }
}

/* Property 3's walk: every record start, by the lengths alone. */
static void mark_starts(const uint8_t *c, size_t n)
{
    memset(starts, 0, n + 1);
    for (size_t i = 0; i <= n; i += 5 + (i + 5 <= n ? rec_len(c + i) : 0)) {
        starts[i] = 1;
        if (i + 5 > n)
            break;
    }
}

/* One call per event on the whole buffer. */
static void client_whole(const uint8_t *c, size_t n, struct run *r)
{
    struct sni_watch w;
    size_t pos = 0, used;

    sni_watch_init(&w);
    r->nev = 0;
    for (;;) {
        enum sni_watch_event e = sni_watch_client(&w, c + pos, n - pos, &used);
        CHECK(used <= n - pos, "used %zu > n %zu", used, n - pos);
        CHECK(e != SNI_WATCH_DONE, "the client side ended the watch by itself at %zu", pos);
        add(r, e, pos + used);
        if (e == SNI_WATCH_MORE)
            CHECK(n - pos - used <= 5, "MORE keeps %zu bytes", n - pos - used);
        if (e != SNI_WATCH_HELLO)
            return;
        CHECK(starts[pos + used], "HELLO at %zu: no record header begins there", pos + used);
        long next = resume(c, n, pos + used);
        if (next == STOP || r->nev == MAX_EV)
            return;
        pos = (size_t)next;
    }
}

/*
 * The client's bytes in pieces, the kept bytes fed again; with srv, the
 * server's bytes in pieces between them.  Returns the index of the first
 * event after which the watch was over (r->nev if it never was).
 */
static size_t client_pieces(const uint8_t *c, size_t n, const uint8_t *srv, size_t sn,
                            struct run *r)
{
    struct sni_watch w;
    size_t pos = 0, end = 0, sdone = 0, used, over_at = SIZE_MAX;

    sni_watch_init(&w);
    r->nev = 0;
    for (;;) {
        if (sdone < sn) {
            size_t k = piece();
            k = k < sn - sdone ? k : sn - sdone;
            enum sni_watch_event se = sni_watch_server(&w, srv + sdone, k);
            CHECK(se == SNI_WATCH_MORE || se == SNI_WATCH_DONE, "server said %d", se);
            CHECK((se == SNI_WATCH_DONE) == sni_watch_over(&w), "server DONE and over disagree");
            CHECK(over_at == SIZE_MAX || se == SNI_WATCH_DONE, "server after DONE: %d", se);
            if (se == SNI_WATCH_DONE && over_at == SIZE_MAX)
                over_at = r->nev;
            sdone += k;
        }
        enum sni_watch_event e = sni_watch_client(&w, c + pos, end - pos, &used);
        CHECK(used <= end - pos, "used %zu > n %zu", used, end - pos);
        if (over_at != SIZE_MAX) {
            CHECK(e == SNI_WATCH_DONE && used == 0, "after DONE the client said %s, used %zu",
                  sni_watch_event_str(e), used);
            return over_at;
        }
        CHECK(e != SNI_WATCH_DONE, "client DONE without the server");
        if (e == SNI_WATCH_MORE) {
            CHECK(end - pos - used <= 5, "MORE keeps %zu bytes", end - pos - used);
            pos += used;
            if (end == n && sdone == sn) {
                add(r, e, pos);
                return r->nev;
            }
            size_t k = piece();
            end = n - end < k ? n : end + k;
            continue;
        }
        add(r, e, pos + used);
        if (e == SNI_WATCH_BAD)
            return r->nev;
        long next = resume(c, n, pos + used);
        if (next == STOP || r->nev == MAX_EV)
            return r->nev;
        pos = (size_t)next;
        end = end > pos ? end : pos;
    }
}

static void check_client(const uint8_t *c, size_t n, const uint8_t *srv, size_t sn)
{
    mark_starts(c, n);
    predict_all(c, n, &oracle);
    client_whole(c, n, &whole);
    CHECK(whole.nev == oracle.nev && same_run(&whole, &oracle, whole.nev),
          "%zu events, the rules predict %zu (first: %s at %zu vs %s at %zu)", whole.nev,
          oracle.nev, sni_watch_event_str(whole.ev[0].e), whole.ev[0].at,
          sni_watch_event_str(oracle.ev[0].e), oracle.ev[0].at);
    for (size_t i = 0; i < whole.nev; i++)
        if (whole.ev[i].e == SNI_WATCH_BAD)
            CHECK(starts[whole.ev[i].at], "BAD at %zu: no record header begins there",
                  whole.ev[i].at);
    client_pieces(c, n, NULL, 0, &pieces);
    CHECK(pieces.nev == whole.nev && same_run(&pieces, &whole, whole.nev),
          "in pieces: %zu events, whole: %zu", pieces.nev, whole.nev);
    size_t over_at = client_pieces(c, n, srv, sn, &mixed);
    CHECK(over_at <= whole.nev && same_run(&mixed, &whole, over_at),
          "with the server's bytes between: events differ before DONE (%zu)", over_at);
}

/* Server bytes one at a time: where the watch ended, n if not. */
static size_t server_done_at(const uint8_t *s, size_t n)
{
    struct sni_watch w;

    sni_watch_init(&w);
    for (size_t i = 0; i < n; i++)
        if (sni_watch_server(&w, s + i, 1) == SNI_WATCH_DONE)
            return i;
    return n;
}

/* The same in pieces: DONE in the piece that holds byte d, never before. */
static void check_server_cuts(const uint8_t *s, size_t n, size_t d)
{
    struct sni_watch w;
    enum sni_watch_event e = SNI_WATCH_MORE;

    sni_watch_init(&w);
    for (size_t i = 0, k; i < n; i += k) {
        k = piece();
        k = k < n - i ? k : n - i;
        e = sni_watch_server(&w, s + i, k);
        CHECK(e == SNI_WATCH_MORE || i + k > d, "DONE in [%zu,%zu), before byte %zu", i, i + k, d);
        CHECK(e == SNI_WATCH_DONE || i + k <= d, "no DONE in [%zu,%zu), byte %zu ends it", i, i + k,
              d);
    }
    size_t used = 1;
    CHECK(d >= n || (sni_watch_server(&w, s, n) == SNI_WATCH_DONE &&
                     sni_watch_client(&w, s, n, &used) == SNI_WATCH_DONE && used == 0),
          "DONE is not sticky");
}

/* A reader of fuzz bytes for the builders; zeros when they run out. */
struct src {
    const uint8_t *p;
    size_t n;
};

static uint8_t take(struct src *s)
{
    if (s->n == 0)
        return 0;
    s->n--;
    return *s->p++;
}

static size_t put_record_header(uint8_t *o, size_t at, uint8_t type, size_t len)
{
    o[at] = type;
    o[at + 1] = 3;
    o[at + 2] = 3;
    o[at + 3] = (uint8_t)(len >> 8);
    o[at + 4] = (uint8_t)len;
    return at + 5;
}

/* 0..2 change_cipher_spec records of 0 or 1 byte. */
static size_t put_ccs(uint8_t *o, size_t at, struct src *s)
{
    for (uint8_t k = take(s) % 3; k > 0; k--) {
        size_t len = take(s) & 1;
        at = put_record_header(o, at, 20, len);
        if (len)
            o[at++] = 1;
    }
    return at;
}

/*
 * The server's first handshake message from the fuzz bytes, into msg: a
 * ServerHello (an HRR when hrr), or now and then (not hrr) one whose body is
 * too short for legacy_version and random, or a message of another type.
 * Returns its length; *end_at is the message offset where the watch must
 * end, SIZE_MAX for an HRR (not inside it).
 */
static size_t build_first(uint8_t *msg, struct src *s, int hrr, size_t *end_at)
{
    uint8_t kind = hrr ? 0 : take(s) % 8, type = take(s);
    size_t body = kind == 1 ? take(s) % 34 : 34 + take(s), len = 4 + body;

    msg[0] = kind != 2 ? 2 : type == 2 ? 0 : type;
    msg[1] = 0;
    msg[2] = (uint8_t)(body >> 8);
    msg[3] = (uint8_t)body;
    for (size_t i = 4; i < len; i++)
        msg[i] = take(s);
    *end_at = kind == 1 ? 3 : 0;
    if (kind == 1 || kind == 2)
        return len;
    *end_at = SIZE_MAX;
    if (hrr) {
        memcpy(msg + 6, hrr_random, 32);
        return len;
    }
    if (memcmp(msg + 6, hrr_random, 32) == 0)
        msg[6 + take(s) % 32] ^= 0x80;
    size_t k = 0;
    while (msg[6 + k] == hrr_random[k])
        k++;
    *end_at = 6 + k;
    return len;
}

/* Where put_message() put a message: offset m is at base + m, past cut 5 more. */
struct placed {
    size_t base, cut;
};

/* The message in one handshake record, or two cut inside it (its header
 * too); returns the end. */
static size_t put_message(uint8_t *o, size_t at, const uint8_t *msg, size_t len, struct src *s,
                          struct placed *pl)
{
    pl->cut = take(s) % len; /* 0: one record */
    size_t first = pl->cut ? pl->cut : len;
    at = put_record_header(o, at, 22, first);
    pl->base = at;
    memcpy(o + at, msg, first);
    at += first;
    if (pl->cut) {
        at = put_record_header(o, at, 22, len - pl->cut);
        memcpy(o + at, msg + pl->cut, len - pl->cut);
        at += len - pl->cut;
    }
    return at;
}

static size_t msg_pos(const struct placed *pl, size_t m)
{
    return pl->base + m + (pl->cut && m >= pl->cut ? 5 : 0);
}

/*
 * What follows an HRR (and its change_cipher_spec): a record no server sends
 * while the watch is on (the watch ends at its first byte), a handshake
 * record of length 0 or 2^14+1 (at its length), or the next handshake
 * message in a record of 1..64 bytes or 2^14 (at its first byte).
 */
static size_t put_after_hrr(uint8_t *o, size_t at, struct src *s, size_t *expect)
{
    static const uint8_t others[] = {21, 23, 24, 19, 0, 'H', 255};
    size_t len;

    switch (take(s) % 4) {
    case 0: *expect = at; return put_record_header(o, at, others[take(s) % sizeof others], take(s));
    case 1: *expect = at + 4; return put_record_header(o, at, 22, take(s) & 1 ? 16385 : 0);
    default:
        len = take(s) & 1 ? 16384 : 1 + take(s) % 64;
        at = put_record_header(o, at, 22, len);
        *expect = at;
        for (size_t i = 0; i < len; i++)
            o[at++] = take(s);
        return at;
    }
}

/* Property 5: a first message built from the fuzz bytes, then the raw rest:
 * the watch ends exactly where the rules say. */
static void check_built(struct src *s, int hrr, const uint8_t *rest, size_t rest_n)
{
    uint8_t msg[4 + 34 + 255];
    struct placed pl;
    size_t end_at, expect, at = put_ccs(built, 0, s);
    size_t len = build_first(msg, s, hrr, &end_at);

    at = put_message(built, at, msg, len, s, &pl);
    if (hrr) {
        at = put_ccs(built, at, s);
        at = put_after_hrr(built, at, s, &expect);
    } else {
        expect = msg_pos(&pl, end_at);
    }
    memcpy(built + at, rest, rest_n);
    at += rest_n;
    size_t d = server_done_at(built, at);
    CHECK(d == expect, "built %s (type %u, %zu bytes, cut %zu): DONE at %zu, expected %zu",
          hrr ? "HRR" : "first message", msg[0], len, pl.cut, d, expect);
    check_server_cuts(built, at, d);
}

/*
 * Record lengths at the edges of the rules, which random bytes would hardly
 * hit: a client record header whose version low byte (never read) is
 * 0xb8..0xbf gets one of these lengths.
 */
static const uint16_t edges[8] = {0, 1, 16383, 16384, 16385, 18431, 18432, 18433};

static void put_edges(uint8_t *c, size_t n)
{
    for (size_t i = 0; i + 5 <= n; i += 5 + rec_len(c + i)) {
        if ((c[i + 2] & 0xf8) != 0xb8)
            continue;
        uint16_t len = edges[c[i + 2] & 7];
        c[i + 3] = (uint8_t)(len >> 8);
        c[i + 4] = (uint8_t)len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || size > 20000)
        return 0;
    const uint8_t *rest = data + 4, *ctl = data;
    size_t n = size - 4, sn = ((size_t)data[2] << 8 | data[3]) % (n + 1);
    if (data[0] == 22) { /* a ClientHello: all the client's */
        rest = data;
        n = size;
        sn = 0;
        ctl = data + size - 2;
    }
    const uint8_t *srv = rest, *cli = client;
    size_t cn = n - sn;

    memcpy(client, rest + sn, cn);
    put_edges(client, cn);

    rng = ctl[1] + 1u;
    check_client(cli, cn, srv, sn);
    rng = ctl[1] + 7u;
    check_server_cuts(srv, sn, server_done_at(srv, sn));
    if (ctl[0] % 3) {
        struct src s = {cli, cn}; /* the builders draw on the client's bytes */
        rng = ctl[1] + 13u;
        check_built(&s, ctl[0] % 3 == 2, srv, sn);
    }
    return 0;
}
