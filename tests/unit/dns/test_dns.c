/*
 * test_dns.c - the DNS message module (dns/dns.h): a query as dig sends
 * it, every parse error and the rcode it answers with, the shapes of the
 * answers (FORMERR, NOTIMP, BADVERS, A, AAAA, TC), names at their limits
 * and with odd bytes, TCP framing cut anywhere, and the reply parser's
 * compression rules.
 *
 * Inputs are written by hand: the dig query as a commented literal, the
 * rest with a small builder (put*(), header(), name_text(), opt()) whose
 * output for the dig query is checked once against the literal.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dns.h"
#include "tap.h"

/* ---- wire constants, written apart from the module -------------------- */

enum {
    F_QR = 0x8000,
    F_OPCODE_SHIFT = 11,
    F_AA = 0x0400,
    F_TC = 0x0200,
    F_RD = 0x0100,
    F_RA = 0x0080,
    F_Z = 0x0040,
    F_AD = 0x0020,
    F_CD = 0x0010,
    F_RCODE = 0x000f,
    OPCODE_STATUS = 2, /* RFC 1035 §4.1.1 */
    OPCODE_UPDATE = 5, /* RFC 2136 */
    OPT_COOKIE = 10,   /* RFC 7873 */
    OPT_DO = 0x8000,   /* the DO bit in the OPT TTL */
    OPT_VERSION_1 = 1 << 16,
    CLASS_CH = 3, /* RFC 1035 §3.2.4 CHAOS */
    OFF_FLAGS = 2,
    OFF_QDCOUNT = 4,
    OFF_ANCOUNT = 6,
    OFF_NSCOUNT = 8,
    OFF_ARCOUNT = 10,
    OPT_LEN = 11,     /* root, TYPE, CLASS, TTL, RDLENGTH */
    AAAA_RR_LEN = 28, /* pointer 2 + fixed 10 + 16 */
    A_RR_LEN = 16,    /* pointer 2 + fixed 10 + 4 */
    QFIXED = 4,       /* QTYPE, QCLASS */
    MSG_MAX = 70000,
    TTL = 300,
};

/* ---- builder ------------------------------------------------------------ */

struct msg {
    uint8_t b[MSG_MAX];
    size_t len;
};

static struct msg m, m2;     /* the query under test, and a second */
static uint8_t out[MSG_MAX]; /* answers */
static struct dns_query q;
static struct dns_reply r;

static void put(struct msg *x, const void *src, size_t n)
{
    if (n > sizeof x->b - x->len) {
        fprintf(stderr, "test fixture overflows struct msg\n");
        abort();
    }
    if (n > 0)
        memcpy(x->b + x->len, src, n);
    x->len += n;
}

static void put8(struct msg *x, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(x, &b, 1);
}

static void put16(struct msg *x, unsigned v)
{
    put8(x, v >> 8);
    put8(x, v);
}

static void put32(struct msg *x, uint32_t v)
{
    put16(x, v >> 16);
    put16(x, v & 0xffff);
}

/* Start x with a header. */
static void header(struct msg *x, unsigned id, unsigned flags, unsigned qd, unsigned an,
                   unsigned ns, unsigned ar)
{
    x->len = 0;
    put16(x, id);
    put16(x, flags);
    put16(x, qd);
    put16(x, an);
    put16(x, ns);
    put16(x, ar);
}

/* One label of n bytes, as given. */
static void label(struct msg *x, const void *bytes, size_t n)
{
    put8(x, (unsigned)n);
    put(x, bytes, n);
}

/* A name from its text: labels split at '.', then the root ("" is the root). */
static void name_text(struct msg *x, const char *text)
{
    while (*text) {
        const char *dot = strchr(text, '.');
        size_t n = dot ? (size_t)(dot - text) : strlen(text);
        label(x, text, n);
        text += n + (dot != NULL);
    }
    put8(x, 0);
}

/* An OPT record owned by the root with options opts[0..n). */
static void opt(struct msg *x, unsigned udp, uint32_t ttl, const void *opts, size_t n)
{
    put8(x, 0);
    put16(x, DNS_T_OPT);
    put16(x, udp);
    put32(x, ttl);
    put16(x, (unsigned)n);
    put(x, opts, n);
}

/* A query: header (RD), the question, an OPT of 1232 bytes if edns. */
static void query(struct msg *x, unsigned id, const char *name, unsigned qtype, bool edns)
{
    header(x, id, F_RD, 1, 0, 0, edns);
    name_text(x, name);
    put16(x, qtype);
    put16(x, DNS_CLASS_IN);
    if (edns)
        opt(x, 1232, 0, NULL, 0);
}

static void set16(struct msg *x, size_t off, unsigned v)
{
    x->b[off] = (uint8_t)(v >> 8);
    x->b[off + 1] = (uint8_t)v;
}

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* Parse a heap copy of x (so ASan sees a read past its end). */
static enum dns_query_error parse(const struct msg *x, struct dns_query *into)
{
    uint8_t *copy = malloc(x->len ? x->len : 1);
    memcpy(copy, x->b, x->len);
    enum dns_query_error e = dns_query_parse(copy, x->len, into);
    free(copy);
    return e;
}

static bool reply(const uint8_t *bytes, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, bytes, n);
    bool okay = dns_reply_parse(copy, n, &r);
    free(copy);
    return okay;
}

static void v4(uint8_t a[16], unsigned b0, unsigned b1, unsigned b2, unsigned b3)
{
    memset(a, 0, 16);
    a[10] = a[11] = 0xff;
    a[12] = (uint8_t)b0;
    a[13] = (uint8_t)b1;
    a[14] = (uint8_t)b2;
    a[15] = (uint8_t)b3;
}

/* 2001:db8::N */
static void v6(uint8_t a[16], unsigned n)
{
    memset(a, 0, 16);
    a[0] = 0x20;
    a[1] = 0x01;
    a[2] = 0x0d;
    a[3] = 0xb8;
    a[14] = (uint8_t)(n >> 8);
    a[15] = (uint8_t)n;
}

/* A text name of n bytes: labels of 63 (and one shorter last) joined by '.' */
static void long_name(char *buf, size_t n)
{
    size_t i = 0, in_label = 0;
    while (i < n) {
        if (in_label == 63 && i + 1 < n) {
            buf[i++] = '.';
            in_label = 0;
        } else {
            buf[i++] = (char)('a' + in_label % 26);
            in_label++;
        }
    }
    buf[n] = '\0';
}

/* ---- a real query --------------------------------------------------- */

/*
 * What `dig example.com` (BIND 9.18) sends: RD and AD set (RFC 6840 §5.7),
 * EDNS0 with 1232 bytes and a client cookie (RFC 7873).
 */
/* clang-format off */
static const uint8_t dig_query[] = {
    0x5c, 0x3a, /* ID */
    0x01, 0x20, /* flags: RD, AD */
    0x00, 0x01, /* QDCOUNT 1 */
    0x00, 0x00, /* ANCOUNT 0 */
    0x00, 0x00, /* NSCOUNT 0 */
    0x00, 0x01, /* ARCOUNT 1 */
    /* question */
    0x07, 'e', 'x', 'a', 'm', 'p', 'l', 'e',
    0x03, 'c', 'o', 'm',
    0x00,       /* root */
    0x00, 0x01, /* QTYPE A */
    0x00, 0x01, /* QCLASS IN */
    /* OPT (RFC 6891 §6.1.2) */
    0x00,                   /* owner: root */
    0x00, 0x29,             /* TYPE OPT */
    0x04, 0xd0,             /* CLASS: UDP payload 1232 */
    0x00, 0x00, 0x00, 0x00, /* TTL: extended rcode 0, version 0, DO 0 */
    0x00, 0x0c,             /* RDLENGTH 12 */
    0x00, 0x0a,             /*   OPTION-CODE COOKIE */
    0x00, 0x08,             /*   OPTION-LENGTH 8: a client cookie */
    0x9a, 0x4e, 0x1f, 0x0c, 0x55, 0x21, 0x7d, 0xe3,
};
/* clang-format on */
static const uint8_t dig_cookie[] = {0x00, 0x0a, 0x00, 0x08, 0x9a, 0x4e,
                                     0x1f, 0x0c, 0x55, 0x21, 0x7d, 0xe3};

static void test_dig_query(void)
{
    header(&m, 0x5c3a, F_RD | F_AD, 1, 0, 0, 1);
    name_text(&m, "example.com");
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    opt(&m, 1232, 0, dig_cookie, sizeof dig_cookie);
    ok(m.len == sizeof dig_query && memcmp(m.b, dig_query, m.len) == 0,
       "the builder writes the dig query's bytes");

    enum dns_query_error e = parse(&m, &q);
    ok(e == DNS_Q_OK, "dig query: OK (got %s)", dns_error_str(e));
    ok(q.id == 0x5c3a && q.opcode == 0 && q.rd && !q.cd, "dig query: id, opcode, RD, CD");
    ok(strcmp(q.name, "example.com") == 0 && q.name_len == 11 && q.plain,
       "dig query: name \"%s\", plain", q.name);
    ok(q.qname_len == 13 && memcmp(q.qname, dig_query + 12, 13) == 0, "dig query: wire name");
    ok(q.qtype == DNS_T_A && q.qclass == DNS_CLASS_IN, "dig query: A IN");
    ok(q.edns && q.udp_size == 1232 && q.edns_version == 0 && !q.do_bit,
       "dig query: EDNS0, 1232 bytes, version 0, DO clear");

    uint8_t qs[300];
    size_t n = dns_question_encode(&q, qs, sizeof qs);
    ok(n == 17 && memcmp(qs, dig_query + 12, 17) == 0, "question written again: the same 17 bytes");

    uint8_t a[1][16];
    v4(a[0], 93, 184, 215, 14);
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 1, TTL, q.udp_size, out, sizeof out);
    ok(n == 12 + 17 + A_RR_LEN + OPT_LEN, "answer: header, question, one A, OPT (%zu bytes)", n);
    unsigned flags = get16(out + OFF_FLAGS);
    ok(flags == (F_QR | F_RD | F_RA), "answer flags: QR RD RA only, AD and AA clear (0x%04x)",
       flags);
    ok(get16(out) == 0x5c3a && get16(out + OFF_QDCOUNT) == 1 && get16(out + OFF_ANCOUNT) == 1 &&
           get16(out + OFF_NSCOUNT) == 0 && get16(out + OFF_ARCOUNT) == 1,
       "answer: id and counts 1/1/0/1");
    ok(memcmp(out + 12, dig_query + 12, 17) == 0, "answer: the question as it came");
    ok(get16(out + 29) == 0xc00c, "answer record: owner is the pointer 0xC00C");
    const uint8_t *o = out + n - OPT_LEN;
    ok(o[0] == 0 && get16(o + 1) == DNS_T_OPT && get16(o + 3) == DNS_UDP_OURS &&
           get16(o + 5) == 0 && get16(o + 7) == 0 && get16(o + 9) == 0,
       "answer OPT: root, 1232, rcode 0, version 0, DO clear, no options");
    ok(reply(out, n) && r.id == 0x5c3a && r.rcode == 0 && !r.tc && r.rd && r.ra && !r.aa &&
           r.n_addr == 1 && memcmp(r.addr[0], a[0], 16) == 0 && r.ttl[0] == TTL &&
           strcmp(r.name, "example.com") == 0 && r.qtype == DNS_T_A && r.edns &&
           r.udp_size == DNS_UDP_OURS,
       "answer read back: id, rcode, flags, the address, its TTL, the name");

    /* dig +dnssec: DO set; it is echoed. CD set (dig +cd): echoed. */
    m.b[OFF_FLAGS + 1] |= F_CD;
    m.b[12 + 17 + 7] = 0x80; /* the OPT TTL's third byte: DO */
    ok(parse(&m, &q) == DNS_Q_OK && q.do_bit && q.cd, "dig +dnssec +cd: DO and CD read");
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 1, TTL, q.udp_size, out, sizeof out);
    ok(n > OPT_LEN && get16(out + n - OPT_LEN + 7) == OPT_DO && (get16(out + OFF_FLAGS) & F_CD),
       "DO echoed in our OPT, CD in the header");
}

/* ---- names -------------------------------------------------------------- */

static void test_case_kept(void)
{
    query(&m, 7, "ExAmPlE.CoM", DNS_T_AAAA, false);
    ok(parse(&m, &q) == DNS_Q_OK && strcmp(q.name, "ExAmPlE.CoM") == 0,
       "0x20: the name's case kept (\"%s\")", q.name);
    uint8_t a[1][16];
    v6(a[0], 1);
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 1, TTL, 512, out, sizeof out);
    ok(n > 12 + 13 && memcmp(out + 12, m.b + 12, 13) == 0, "0x20: echoed byte for byte");
    ok(reply(out, n) && strcmp(r.name, "ExAmPlE.CoM") == 0, "0x20: read back as sent");
}

static void test_root(void)
{
    query(&m, 9, "", DNS_T_NS, false);
    ok(m.len == 12 + 1 + QFIXED, "root query: 17 bytes");
    ok(parse(&m, &q) == DNS_Q_OK && q.qname_len == 1 && q.qname[0] == 0 && q.name_len == 0 &&
           q.name[0] == '\0' && q.plain,
       "root: wire 1 byte, text \"\", name_len 0");
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, NULL, 0, TTL, 512, out, sizeof out);
    ok(n == 17 && reply(out, n) && r.name[0] == '\0' && r.qtype == DNS_T_NS && r.qdcount == 1,
       "root: NODATA answer read back with the root name");
}

static void test_long_names(void)
{
    char name[300];

    long_name(name, 253);
    query(&m, 1, name, DNS_T_A, false);
    ok(m.len == 12 + 255 + QFIXED, "253-character name: 255 bytes of wire");
    ok(parse(&m, &q) == DNS_Q_OK && q.qname_len == 255 && q.name_len == 253 &&
           strlen(q.name) == 253 && strcmp(q.name, name) == 0,
       "253 characters (wire 255): accepted, text exact");
    uint8_t a[1][16];
    v4(a[0], 192, 0, 2, 1);
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 1, TTL, 512, out, sizeof out);
    ok(n > 0 && reply(out, n) && strcmp(r.name, name) == 0 && r.n_addr == 1,
       "253 characters: the answer reads back with the name");

    long_name(name, 254);
    query(&m, 1, name, DNS_T_A, false);
    ok(parse(&m, &q) == DNS_Q_NAME && q.qname_len == 0, "254 characters (wire 256): DNS_Q_NAME");

    char l63[64], l64[65];
    memset(l63, 'x', 63);
    memset(l64, 'y', 64);
    header(&m, 1, 0, 1, 0, 0, 0);
    label(&m, l63, 63);
    name_text(&m, "com");
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(parse(&m, &q) == DNS_Q_OK && q.name_len == 67, "a label of 63: accepted");
    header(&m, 1, 0, 1, 0, 0, 0);
    label(&m, l64, 64);
    name_text(&m, "com");
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(parse(&m, &q) == DNS_Q_NAME, "a label of 64: DNS_Q_NAME");
}

static void test_odd_bytes(void)
{
    header(&m, 1, 0, 1, 0, 0, 0);
    label(&m, "a.b", 3);
    name_text(&m, "c");
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(parse(&m, &q) == DNS_Q_OK && q.name_len == 5 && strcmp(q.name, "a.b.c") == 0 && !q.plain,
       "'.' inside a label: text \"a.b.c\", not plain");

    header(&m, 1, 0, 1, 0, 0, 0);
    label(&m, "x\0y", 3);
    put8(&m, 0);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(parse(&m, &q) == DNS_Q_OK && q.name_len == 3 && memcmp(q.name, "x\0y", 4) == 0 && !q.plain,
       "NUL inside a label: copied, name_len 3, not plain");

    header(&m, 1, 0, 1, 0, 0, 0);
    label(&m, "h\xc3\xa9", 3);
    put8(&m, 0);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(parse(&m, &q) == DNS_Q_OK && strcmp(q.name, "h\xc3\xa9") == 0 && !q.plain,
       "bytes over 0x7f: copied, not plain");

    query(&m, 1, "_dmarc.my-host9.Example", DNS_T_TXT, false);
    ok(parse(&m, &q) == DNS_Q_OK && q.plain && strcmp(q.name, "_dmarc.my-host9.Example") == 0,
       "letters, digits, '-' and '_': plain");
    query(&m, 1, "a b.example", DNS_T_A, false);
    ok(parse(&m, &q) == DNS_Q_OK && !q.plain, "a space: not plain");
}

/* ---- errors ------------------------------------------------------------- */

/* Parse m; check the error, its rcode, and that the question is gone or
 * kept as the error says. */
static void check_error(const char *what, enum dns_query_error want, int rcode)
{
    enum dns_query_error e = parse(&m, &q);
    bool question = want == DNS_Q_OK || want == DNS_Q_TRAILING || want == DNS_Q_EDNS_VERSION;
    if (!ok(e == want && dns_error_rcode(e) == rcode, "%s: %s, rcode %d", what, dns_error_str(want),
            rcode))
        diag("got %s (rcode %d)", dns_error_str(e), dns_error_rcode(e));
    if (want > DNS_Q_DROP_RESPONSE)
        ok(question == (q.qname_len > 0), "%s: question %s", what, question ? "kept" : "forgotten");
}

/* The base query, then a tail: question name bytes given raw. */
static void raw_question(const void *namebytes, size_t n)
{
    header(&m, 0x1234, F_RD, 1, 0, 0, 0);
    put(&m, namebytes, n);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
}

static void test_errors(void)
{
    query(&m, 1, "example.com", DNS_T_A, true);
    check_error("the base query", DNS_Q_OK, DNS_RC_NOERROR);

    m.len = 11;
    check_error("11 bytes", DNS_Q_DROP_SHORT, -1);
    m.len = 0;
    check_error("0 bytes", DNS_Q_DROP_SHORT, -1);

    query(&m, 1, "example.com", DNS_T_A, false);
    m.b[OFF_FLAGS] |= F_QR >> 8;
    check_error("QR set", DNS_Q_DROP_RESPONSE, -1);

    query(&m, 1, "example.com", DNS_T_A, false);
    m.b[OFF_FLAGS] |= OPCODE_STATUS << (F_OPCODE_SHIFT - 8);
    check_error("opcode STATUS", DNS_Q_OPCODE, DNS_RC_NOTIMP);
    ok(q.opcode == OPCODE_STATUS && q.id == 1 && q.rd, "opcode error: id, RD, opcode kept");
    query(&m, 1, "example.com", DNS_T_A, false);
    m.b[OFF_FLAGS] |= 0x80 >> 1; /* opcode 8: bit 14 of the flags, bit 6 of byte 2 */
    check_error("opcode 8 (top bit)", DNS_Q_OPCODE, DNS_RC_NOTIMP);
    ok(q.opcode == 8, "opcode 8 read from bits 11..14 (got %u)", q.opcode);

    query(&m, 1, "example.com", DNS_T_A, false);
    m.b[OFF_FLAGS] |= (F_AA | F_TC) >> 8;
    m.b[OFF_FLAGS + 1] |= F_RA | F_Z | F_AD | 0x5;
    check_error("AA, TC, RA, Z, AD, an rcode in a query: ignored", DNS_Q_OK, DNS_RC_NOERROR);

    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_QDCOUNT, 0);
    check_error("QDCOUNT 0", DNS_Q_COUNT, DNS_RC_FORMERR);
    set16(&m, OFF_QDCOUNT, 2);
    check_error("QDCOUNT 2", DNS_Q_COUNT, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ANCOUNT, 1);
    check_error("ANCOUNT 1", DNS_Q_COUNT, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_NSCOUNT, 1);
    check_error("NSCOUNT 1", DNS_Q_COUNT, DNS_RC_FORMERR);

    raw_question("\x07"
                 "example"
                 "\xc0\x0c",
                 10);
    check_error("a compression pointer in the question", DNS_Q_NAME, DNS_RC_FORMERR);
    raw_question("\xc0\x0c", 2);
    check_error("a question that is only a pointer", DNS_Q_NAME, DNS_RC_FORMERR);
    raw_question("\x41"
                 "a",
                 2);
    check_error("label kind 0x40", DNS_Q_NAME, DNS_RC_FORMERR);
    raw_question("\x80", 1);
    check_error("label kind 0x80", DNS_Q_NAME, DNS_RC_FORMERR);

    raw_question("\x07"
                 "exam",
                 5);
    m.len = 12 + 5;
    check_error("ends inside a label", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    m.len = 12 + 12;
    check_error("ends before the root label", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    m.len -= 1;
    check_error("ends inside QCLASS", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    check_error("ARCOUNT 1, no OPT", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, true);
    m.len -= 3;
    check_error("ends inside the OPT's fixed part", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 1232, 0, dig_cookie, sizeof dig_cookie);
    m.len -= 1;
    check_error("ends inside the OPT's RDATA", DNS_Q_TRUNCATED, DNS_RC_FORMERR);
    ok(!q.edns && q.udp_size == 512, "truncated OPT: edns false, 512");

    query(&m, 1, "example.com", DNS_T_A, true);
    opt(&m, 1232, 0, NULL, 0);
    set16(&m, OFF_ARCOUNT, 2);
    check_error("a second OPT", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    name_text(&m, "example.com");
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 0);
    put16(&m, 4);
    put32(&m, 0x7f000001);
    check_error("an A record in the additional section", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    put8(&m, 0);
    put16(&m, DNS_T_TXT);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 0);
    put16(&m, 0);
    check_error("a root-owned TXT record as additional", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    name_text(&m, "x");
    put16(&m, DNS_T_OPT);
    put16(&m, 1232);
    put32(&m, 0);
    put16(&m, 0);
    check_error("an OPT not owned by the root", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 1232, 0,
        "\x00\x0a\x00\x09"
        "12345678",
        12);
    check_error("an option longer than the RDATA", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 1232, 0, "\x00\x0a\x00", 3);
    check_error("an option header cut short", DNS_Q_EDNS, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 1232, 0,
        "\x00\x0a\x00\x00"
        "\x00\x0c\x00\x02"
        "\0\0",
        10);
    check_error("two whole options (an empty one, padding)", DNS_Q_OK, DNS_RC_NOERROR);

    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 1232, OPT_VERSION_1, NULL, 0);
    check_error("OPT version 1", DNS_Q_EDNS_VERSION, DNS_RC_BADVERS);
    ok(q.edns && q.edns_version == 1, "version error: edns set, version 1");

    query(&m, 1, "example.com", DNS_T_A, false);
    put8(&m, 0);
    check_error("a byte after the question", DNS_Q_TRAILING, DNS_RC_FORMERR);
    query(&m, 1, "example.com", DNS_T_A, true);
    put8(&m, 0);
    check_error("a byte after the OPT", DNS_Q_TRAILING, DNS_RC_FORMERR);
    ok(q.edns, "trailing after an OPT: edns set (the answer carries one)");

    /* Every error has its own words. */
    bool distinct = true;
    for (int i = DNS_Q_OK; i <= DNS_Q_TRAILING; i++)
        for (int j = DNS_Q_OK; j < i; j++)
            distinct = distinct && strcmp(dns_error_str(i), dns_error_str(j)) != 0;
    ok(distinct && dns_error_str(DNS_Q_NAME)[0] != '\0', "dns_error_str: distinct words");
}

/* ---- answer shapes ------------------------------------------------------ */

static void test_formerr_shape(void)
{
    static const enum dns_query_error kinds[] = {DNS_Q_COUNT, DNS_Q_NAME, DNS_Q_TRUNCATED,
                                                 DNS_Q_EDNS};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        query(&m, 0xbeef, "example.com", DNS_T_A, true);
        m.b[OFF_FLAGS + 1] |= F_CD;
        switch (kinds[k]) {
        case DNS_Q_COUNT: set16(&m, OFF_QDCOUNT, 2); break;
        case DNS_Q_NAME: m.b[12] = 0xc0; break;
        case DNS_Q_TRUNCATED: m.len -= 2; break;
        default: set16(&m, OFF_ARCOUNT, 2); break;
        }
        enum dns_query_error e = parse(&m, &q);
        size_t n =
            dns_answer_encode(&q, dns_error_rcode(e), NULL, 0, TTL, q.udp_size, out, sizeof out);
        ok(e == kinds[k] && n == 12 && get16(out) == 0xbeef &&
               get16(out + OFF_FLAGS) == (F_QR | F_RD | F_RA | F_CD | DNS_RC_FORMERR) &&
               get16(out + OFF_QDCOUNT) == 0 && get16(out + OFF_ANCOUNT) == 0 &&
               get16(out + OFF_NSCOUNT) == 0 && get16(out + OFF_ARCOUNT) == 0,
           "FORMERR for %s: header only, QDCOUNT 0, RD CD echoed, RA", dns_error_str(kinds[k]));
        ok(reply(out, n) && r.rcode == DNS_RC_FORMERR && r.qdcount == 0 && r.name[0] == '\0' &&
               !r.edns,
           "FORMERR for %s: reads back", dns_error_str(kinds[k]));
    }

    query(&m, 0xbeef, "example.com", DNS_T_A, false);
    m.b[OFF_FLAGS] |= OPCODE_UPDATE << (F_OPCODE_SHIFT - 8);
    enum dns_query_error e = parse(&m, &q);
    size_t n = dns_answer_encode(&q, dns_error_rcode(e), NULL, 0, TTL, 512, out, sizeof out);
    ok(n == 12 &&
           get16(out + OFF_FLAGS) ==
               (F_QR | OPCODE_UPDATE << F_OPCODE_SHIFT | F_RD | F_RA | DNS_RC_NOTIMP) &&
           get16(out + OFF_QDCOUNT) == 0,
       "NOTIMP for UPDATE: opcode echoed, QDCOUNT 0");

    query(&m, 0xbeef, "example.com", DNS_T_A, true);
    put8(&m, 0);
    e = parse(&m, &q);
    n = dns_answer_encode(&q, dns_error_rcode(e), NULL, 0, TTL, 512, out, sizeof out);
    ok(e == DNS_Q_TRAILING && n == 12 + 17 + OPT_LEN && get16(out + OFF_QDCOUNT) == 1 &&
           get16(out + OFF_ARCOUNT) == 1 && (get16(out + OFF_FLAGS) & F_RCODE) == DNS_RC_FORMERR,
       "FORMERR for trailing bytes: the question and an OPT");
}

static void test_badvers(void)
{
    query(&m, 0x4242, "example.com", DNS_T_AAAA, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 4096, OPT_VERSION_1 | OPT_DO, NULL, 0);
    enum dns_query_error e = parse(&m, &q);
    ok(e == DNS_Q_EDNS_VERSION && q.udp_size == 4096 && q.do_bit, "BADVERS query read");
    size_t n = dns_answer_encode(&q, dns_error_rcode(e), NULL, 0, TTL, q.udp_size, out, sizeof out);
    ok(n == 12 + 17 + OPT_LEN, "BADVERS: header, question, OPT (%zu bytes)", n);
    ok((get16(out + OFF_FLAGS) & F_RCODE) == 0, "BADVERS: rcode field 0 in the header");
    ok(get16(out + OFF_QDCOUNT) == 1 && get16(out + OFF_ANCOUNT) == 0 &&
           get16(out + OFF_ARCOUNT) == 1,
       "BADVERS: QDCOUNT 1, ANCOUNT 0, ARCOUNT 1");
    const uint8_t *o = out + n - OPT_LEN;
    ok(o[5] == 1 && o[6] == 0 && get16(o + 7) == OPT_DO && get16(o + 3) == DNS_UDP_OURS,
       "BADVERS: OPT extended rcode 1, version 0, DO echoed, 1232");
    ok(reply(out, n) && r.rcode == DNS_RC_BADVERS && r.edns, "BADVERS read back as rcode 16");

    query(&m, 1, "example.com", DNS_T_A, false);
    parse(&m, &q);
    ok(dns_answer_encode(&q, DNS_RC_BADVERS, NULL, 0, TTL, 512, out, sizeof out) == 0,
       "BADVERS without an OPT to carry it: nothing");
}

static void test_a_answer(void)
{
    uint8_t a[3][16];
    v4(a[0], 192, 0, 2, 1);
    v4(a[1], 198, 51, 100, 7);
    v4(a[2], 203, 0, 113, 255);
    query(&m, 0x0a0a, "api.example.com", DNS_T_A, false);
    parse(&m, &q);
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 3, 3600, 512, out, sizeof out);
    ok(n == 12 + 21 + 3 * A_RR_LEN, "3 A records: %zu bytes", n);
    ok(reply(out, n) && r.n_addr == 3 && r.ancount == 3 && !r.tc && r.rcode == 0,
       "3 A records read back");
    bool same = true;
    for (int i = 0; i < 3; i++)
        same = same && memcmp(r.addr[i], a[i], 16) == 0 && r.ttl[i] == 3600;
    ok(same, "3 A records: the addresses in order, TTL 3600 each");
    ok(out[12 + 21 + 12] == 192 && out[12 + 21 + 13] == 0 && out[12 + 21 + 15] == 1 &&
           get16(out + 12 + 21 + 10) == 4,
       "A RDATA: RDLENGTH 4, the last four bytes of the mapped address");

    n = dns_answer_encode(&q, DNS_RC_NXDOMAIN, a, 3, 3600, 512, out, sizeof out);
    ok(n == 12 + 21 && reply(out, n) && r.rcode == DNS_RC_NXDOMAIN && r.n_addr == 0 &&
           r.qdcount == 1,
       "NXDOMAIN: the question, no records");

    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, m.len - 2, CLASS_CH);
    ok(parse(&m, &q) == DNS_Q_OK && q.qclass == CLASS_CH, "a CHAOS question parses");
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 3, 3600, 512, out, sizeof out);
    ok(n == 12 + 17 && get16(out + OFF_ANCOUNT) == 0, "a CHAOS question gets no IN records");
}

static void test_mixed(void)
{
    uint8_t a[5][16];
    v4(a[0], 10, 0, 0, 1);
    v6(a[1], 1);
    v4(a[2], 10, 0, 0, 2);
    v6(a[3], 2);
    v6(a[4], 3);
    memcpy(a[4], "\0\0\0\0\0\0\0\0\0\0\xff\xfe", 12); /* almost mapped: it is IPv6 */

    query(&m, 2, "mixed.example", DNS_T_A, false);
    parse(&m, &q);
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 5, TTL, 512, out, sizeof out);
    ok(reply(out, n) && r.n_addr == 2 && memcmp(r.addr[0], a[0], 16) == 0 &&
           memcmp(r.addr[1], a[2], 16) == 0,
       "mixed list to A: the two IPv4 addresses");

    query(&m, 3, "mixed.example", DNS_T_AAAA, false);
    parse(&m, &q);
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 5, TTL, 512, out, sizeof out);
    ok(reply(out, n) && r.n_addr == 3 && memcmp(r.addr[0], a[1], 16) == 0 &&
           memcmp(r.addr[1], a[3], 16) == 0 && memcmp(r.addr[2], a[4], 16) == 0 &&
           get16(out + 12 + 19 + 10) == 16,
       "mixed list to AAAA: the three others, RDLENGTH 16");

    static const uint16_t others[] = {DNS_T_TXT, DNS_T_HTTPS, DNS_T_ANY, DNS_T_MX};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        query(&m, 4, "mixed.example", others[i], false);
        parse(&m, &q);
        n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 5, TTL, 512, out, sizeof out);
        char tb[12];
        ok(n == 12 + 19 && reply(out, n) && r.ancount == 0 && !r.tc && r.qtype == others[i],
           "%s: NODATA, no records", dns_type_str(others[i], tb));
    }
}

static void test_tc(void)
{
    static uint8_t a[64][16];
    for (unsigned i = 0; i < 64; i++)
        v6(a[i], i + 1);

    query(&m, 5, "many.example", DNS_T_AAAA, false);
    parse(&m, &q);
    size_t n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 64, TTL, q.udp_size, out, sizeof out);
    ok(n == 12 + 18 && (get16(out + OFF_FLAGS) & F_TC) && get16(out + OFF_ANCOUNT) == 0 &&
           get16(out + OFF_QDCOUNT) == 1,
       "64 AAAA in 512: TC, no records, the question (%zu bytes)", n);
    ok(reply(out, n) && r.tc && r.n_addr == 0, "TC answer reads back");

    query(&m, 5, "many.example", DNS_T_AAAA, true);
    parse(&m, &q);
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 64, TTL, 512, out, sizeof out);
    ok(n == 12 + 18 + OPT_LEN && (get16(out + OFF_FLAGS) & F_TC) && get16(out + OFF_ARCOUNT) == 1,
       "64 AAAA in 512 with EDNS: TC, the OPT kept");
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 64, TTL, 4096, out, sizeof out);
    ok(n == 12 + 18 + 64 * AAAA_RR_LEN + OPT_LEN && !(get16(out + OFF_FLAGS) & F_TC) &&
           reply(out, n) && r.n_addr == 64 && memcmp(r.addr[63], a[63], 16) == 0,
       "64 AAAA in 4096: all of them, no TC");

    size_t exact = 12 + 18 + 10 * AAAA_RR_LEN + OPT_LEN;
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 10, TTL, exact, out, sizeof out);
    ok(n == exact && !(get16(out + OFF_FLAGS) & F_TC), "10 AAAA in exactly their size: sent");
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 10, TTL, exact - 1, out, sizeof out);
    ok(n == 12 + 18 + OPT_LEN && (get16(out + OFF_FLAGS) & F_TC), "one byte less: TC");
    n = dns_answer_encode(&q, DNS_RC_NOERROR, a, 10, TTL, 4096, out, exact - 1);
    ok(n == 12 + 18 + OPT_LEN && (get16(out + OFF_FLAGS) & F_TC), "cap one byte short: TC too");
    ok(dns_answer_encode(&q, DNS_RC_NOERROR, a, 10, TTL, 4096, out, 12 + 18 + OPT_LEN - 1) == 0,
       "cap short of header, question and OPT: 0");
    ok(dns_answer_encode(&q, -1, a, 10, TTL, 4096, out, sizeof out) == 0, "rcode -1: 0");
}

static void test_question_encode(void)
{
    uint8_t buf[64];

    query(&m, 1, "example.com", DNS_T_HTTPS, false);
    parse(&m, &q);
    ok(dns_question_encode(&q, buf, 17) == 17 && memcmp(buf, m.b + 12, 17) == 0,
       "question in exactly 17 bytes");
    ok(dns_question_encode(&q, buf, 16) == 0, "question in 16 bytes: 0");
    m.len = 5;
    parse(&m, &q);
    ok(dns_question_encode(&q, buf, sizeof buf) == 0, "no question: 0");
}

static void test_udp_size(void)
{
    query(&m, 1, "example.com", DNS_T_A, false);
    ok(parse(&m, &q) == DNS_Q_OK && !q.edns && q.udp_size == 512, "no OPT: 512");
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 100, 0, NULL, 0);
    ok(parse(&m, &q) == DNS_Q_OK && q.udp_size == 512, "OPT of 100 bytes: 512");
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 511, 0, NULL, 0);
    ok(parse(&m, &q) == DNS_Q_OK && q.udp_size == 512, "OPT of 511 bytes: 512");
    query(&m, 1, "example.com", DNS_T_A, false);
    set16(&m, OFF_ARCOUNT, 1);
    opt(&m, 65535, 0, NULL, 0);
    ok(parse(&m, &q) == DNS_Q_OK && q.udp_size == 65535, "OPT of 65535 bytes: 65535");
}

/* ---- TCP framing ---------------------------------------------------- */

static void test_tcp_frame(void)
{
    const uint8_t *msg;
    size_t len;

    query(&m, 0x7777, "example.com", DNS_T_A, true);
    m2.len = 0;
    put16(&m2, (unsigned)m.len);
    put(&m2, m.b, m.len);
    put16(&m2, 0); /* an empty message */
    put16(&m2, (unsigned)m.len);
    put(&m2, m.b, m.len);

    bool all = true;
    for (size_t k = 0; k <= m2.len; k++) {
        uint8_t *copy = malloc(k ? k : 1);
        memcpy(copy, m2.b, k);
        size_t used = dns_tcp_frame(copy, k, &msg, &len);
        if (k < 2 + m.len)
            all = all && used == 0 && msg == NULL && len == 0;
        else
            all = all && used == 2 + m.len && msg == copy + 2 && len == m.len &&
                  memcmp(msg, m.b, len) == 0;
        free(copy);
    }
    ok(all, "cut at every byte: nothing until the whole first message is in, then exactly it");

    /* Bytes one at a time into a stream buffer, frames taken as they complete. */
    uint8_t stream[200];
    size_t have = 0, frames = 0, sizes_ok = 0;
    for (size_t i = 0; i < m2.len; i++) {
        stream[have++] = m2.b[i];
        size_t used;
        while ((used = dns_tcp_frame(stream, have, &msg, &len)) > 0) {
            size_t want = frames == 1 ? 0 : m.len;
            sizes_ok += len == want && (want == 0 || memcmp(msg, m.b, len) == 0);
            if (frames == 1)
                sizes_ok += dns_query_parse(msg, len, &q) == DNS_Q_DROP_SHORT;
            frames++;
            memmove(stream, stream + used, have - used);
            have -= used;
        }
    }
    ok(frames == 3 && sizes_ok == 4 && have == 0,
       "byte by byte: three messages, the middle one empty (DROP_SHORT)");
    ok(dns_tcp_frame((const uint8_t *)"\xff", 1, &msg, &len) == 0, "one byte: not yet");
}

/* ---- the reply parser --------------------------------------------------- */

/*
 * A response in m whose second answer's owner goes through `links`
 * pointers of a chain, then one more to the root: a NULL record owned by
 * the root at 12 holds the chain in its RDATA (each pointer to the one
 * before it, the first to the root), and the A record's owner points at
 * the chain's last pointer: links + 1 hops in all.
 */
static void chain(unsigned links)
{
    header(&m, 1, F_QR, 0, 2, 0, 0);
    put8(&m, 0); /* the root, at 12 */
    put16(&m, DNS_T_NULL);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 1);
    put16(&m, 2 * links);
    size_t first = m.len;
    for (unsigned i = 0; i < links; i++)
        put16(&m, 0xc000 | (unsigned)(i == 0 ? 12 : first + 2 * (i - 1)));
    put16(&m, 0xc000 | (unsigned)(m.len - 2));
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 1);
    put16(&m, 4);
    put32(&m, 1);
}

static void test_reply_parser(void)
{
    /* www.example.com CNAME host.example.com (the RDATA compressed), A. */
    header(&m, 0x1111, F_QR | F_RD | F_RA, 1, 2, 0, 0);
    name_text(&m, "www.example.com"); /* at 12; "example" at 16 */
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    put16(&m, 0xc00c);
    put16(&m, DNS_T_CNAME);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 60);
    put16(&m, 7);
    size_t host = m.len;
    label(&m, "host", 4);
    put16(&m, 0xc010); /* -> example.com */
    put16(&m, 0xc000 | (unsigned)host);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 30);
    put16(&m, 4);
    put32(&m, 0xc0000201);
    uint8_t want[16];
    v4(want, 192, 0, 2, 1);
    ok(reply(m.b, m.len) && r.n_addr == 1 && memcmp(r.addr[0], want, 16) == 0 && r.ttl[0] == 30 &&
           strcmp(r.name, "www.example.com") == 0,
       "a CNAME chain, an owner pointing at a name that ends in a pointer: the A, TTL 30");
    bool refused = true;
    for (size_t k = 0; k < m.len; k++)
        refused = refused && !reply(m.b, k);
    ok(refused, "every strict prefix of that response: refused");

    /* Loops and bad pointers, each in the answer's owner name. */
    struct {
        const char *what;
        unsigned ptr_at_answer; /* the pointer written as the answer's owner */
        const char *label1;     /* a label of one byte before it, or none */
    } bad[] = {
        {"a pointer to itself", 0, NULL},
        {"a label and a pointer back to it", 1, "a"},
        {"a pointer forward", 2, NULL},
        {"a pointer into the header (a 0 byte there)", 3, NULL},
        {"a pointer past the end", 4, NULL},
        /* the label's byte 0 would read as a root, but it is in the same run */
        {"a pointer into its own label's bytes", 5, "\0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        header(&m, 1, F_QR, 1, 1, 0, 0);
        name_text(&m, "example.com");
        put16(&m, DNS_T_A);
        put16(&m, DNS_CLASS_IN);
        size_t at = m.len;
        if (bad[i].label1)
            label(&m, bad[i].label1, 1);
        unsigned target[] = {
            (unsigned)at,     /* itself */
            (unsigned)at,     /* the label before it */
            (unsigned)at + 2, /* its own TYPE field */
            OFF_QDCOUNT,      /* QDCOUNT's high byte: 0, a root */
            0x3fff,           /* past the end */
            (unsigned)at + 1, /* the label's byte */
        };
        put16(&m, 0xc000 | target[bad[i].ptr_at_answer]);
        put16(&m, DNS_T_A);
        put16(&m, DNS_CLASS_IN);
        put32(&m, 1);
        put16(&m, 4);
        put32(&m, 1);
        ok(!reply(m.b, m.len), "reply refused: %s", bad[i].what);
    }

    /* Two pointers at each other: 12 -> 14, 14 -> 12. */
    header(&m, 1, F_QR, 1, 0, 0, 0);
    put16(&m, 0xc000 | 14);
    put16(&m, 0xc000 | 12);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    ok(!reply(m.b, m.len), "reply refused: two pointers in a loop in the question");

    /* Pointer chains, every pointer backward: within the hop limit, read;
     * over it, refused. */
    chain(126);
    ok(reply(m.b, m.len) && r.n_addr == 1, "a chain of 127 backward pointers: read");
    chain(127);
    ok(!reply(m.b, m.len), "reply refused: a chain of 128 backward pointers");

    query(&m, 1, "example.com", DNS_T_A, false);
    ok(!reply(m.b, m.len), "reply refused: QR clear");
    m.b[OFF_FLAGS] |= F_QR >> 8;
    ok(reply(m.b, m.len) && !r.edns && r.n_addr == 0, "a response with the question only");
    put8(&m, 0);
    ok(!reply(m.b, m.len), "reply refused: a trailing byte");

    header(&m, 1, F_QR, 0, 1, 0, 0);
    put8(&m, 0);
    put16(&m, DNS_T_A);
    put16(&m, DNS_CLASS_IN);
    put32(&m, 1);
    put16(&m, 5);
    put(&m, "\1\2\3\4\5", 5);
    ok(!reply(m.b, m.len), "reply refused: an A record of 5 bytes");

    header(&m, 1, F_QR, 0, 65, 0, 0);
    for (unsigned i = 0; i < 65; i++) {
        put8(&m, 0);
        put16(&m, DNS_T_AAAA);
        put16(&m, DNS_CLASS_IN);
        put32(&m, i);
        put16(&m, 16);
        uint8_t a[16];
        v6(a, i);
        put(&m, a, 16);
    }
    ok(reply(m.b, m.len) && r.n_addr == DNS_REPLY_MAX_ADDRS && r.ttl[63] == 63,
       "65 AAAA records: the first 64 kept");

    header(&m, 1, F_QR | 0x1, 0, 0, 0, 1); /* header rcode 1 */
    opt(&m, 1232, 0x02000000, NULL, 0);    /* extended 2: (2 << 4) | 1 = 33 */
    ok(reply(m.b, m.len) && r.rcode == 33 && r.edns && r.udp_size == 1232,
       "extended rcode combined: 33");
    header(&m, 1, F_QR, 0, 0, 0, 2);
    opt(&m, 1232, 0, NULL, 0);
    opt(&m, 1232, 0, NULL, 0);
    ok(!reply(m.b, m.len), "reply refused: two OPT records");
    ok(!reply(m.b, 11), "reply refused: 11 bytes");
}

static void test_words(void)
{
    char buf[12];

    ok(strcmp(dns_type_str(DNS_T_A, buf), "A") == 0 &&
           strcmp(dns_type_str(DNS_T_AAAA, buf), "AAAA") == 0 &&
           strcmp(dns_type_str(DNS_T_HTTPS, buf), "HTTPS") == 0,
       "type words: A, AAAA, HTTPS");
    ok(strcmp(dns_type_str(123, buf), "TYPE123") == 0 &&
           strcmp(dns_type_str(65535, buf), "TYPE65535") == 0,
       "unknown types: TYPE123, TYPE65535");
    ok(strcmp(dns_rcode_str(DNS_RC_NXDOMAIN), "NXDOMAIN") == 0 &&
           strcmp(dns_rcode_str(DNS_RC_BADVERS), "BADVERS") == 0 &&
           strcmp(dns_rcode_str(DNS_RC_NOERROR), "NOERROR") == 0,
       "rcode words");
}

int main(void)
{
    test_dig_query();
    test_case_kept();
    test_root();
    test_long_names();
    test_odd_bytes();
    test_errors();
    test_formerr_shape();
    test_badvers();
    test_a_answer();
    test_mixed();
    test_tc();
    test_question_encode();
    test_udp_size();
    test_tcp_frame();
    test_reply_parser();
    test_words();
    return tap_done();
}
