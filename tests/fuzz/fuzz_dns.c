/*
 * fuzz_dns.c - properties of the DNS message module (dns/dns.h) on any
 * bytes, read as a query, as a response and as a TCP stream.
 *
 * Properties:
 *   1. a query that parses OK writes its question again (dns_question_encode)
 *      as exactly the bytes it had at offset 12, qname_len + 4 of them; it
 *      is, checked here apart from the module, a header with QR clear,
 *      opcode 0 and counts 1/0/0/edns, the question, and an OPT owned by
 *      the root whose options are whole, and nothing else;
 *   2. the name's text, whatever the parse said: NUL-terminated at
 *      name_len <= 253, and equal to the wire labels joined by '.' (worked
 *      out here, apart from the module); plain exactly when every byte is
 *      [A-Za-z0-9_-], and then strlen(name) == name_len and splitting the
 *      name on '.' gives back the wire labels;
 *   3. the verdict on an OK query is a verdict on all of it: a strict prefix
 *      (in a buffer of its own size) is DROP_SHORT below 12 bytes, else
 *      TRUNCATED; one byte more is TRAILING;
 *   4. an OK query with QR set reads as a response (dns_reply_parse) with
 *      the same question, and the same OPT: the UDP size (512 at least)
 *      and the EDNS flag;
 *   5. the answer to an OK query, for an rcode, addresses (IPv4-mapped or
 *      not), a TTL, a max and a cap all taken from the input, is at most
 *      min(max, cap) bytes (written into a buffer of exactly cap bytes),
 *      or 0 only when the header, question and OPT do not fit; its flags
 *      are exactly QR, the opcode, TC if set, RD and CD echoed, RA and the
 *      rcode's low bits; it reads back with the same id, question (name
 *      byte for byte, type, class), rcode, the OPT when the query had one
 *      (its DO bit and extended rcode as they must be); and either TC with
 *      no records when the records of the question's family would not fit,
 *      or exactly those records, in order, each with the TTL; a strict
 *      prefix of it (in a buffer of its own size) does not read;
 *   6. the answer to a parse error is header-only but for an OPT when the
 *      query had one and the question for TRAILING and EDNS_VERSION; the
 *      drops get nothing;
 *   7. dns_reply_parse on the raw input stays in bounds and, when it reads a
 *      response, leaves a NUL-terminated name and at most 64 addresses;
 *   8. dns_tcp_frame on the input: consumed <= size, the message is the
 *      bytes after the two-byte length, and nothing is consumed before the
 *      whole frame is in.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dns.h"
#include "fuzz_check.h"

enum {
    QFIXED = 4,    /* QTYPE, QCLASS */
    OPT_LEN = 11,  /* our OPT: root, TYPE, CLASS, TTL, RDLENGTH */
    RR_FIXED = 12, /* pointer, TYPE, CLASS, TTL, RDLENGTH */
    F_QR = 0x80,   /* in the flags' first byte */
    F_TC = 0x02,   /* in the first byte */
    F_RD = 0x01,   /* in the first byte */
    F_RA = 0x80,   /* in the second byte */
    F_CD = 0x10,   /* in the second byte */
    OPT_DO = 0x80, /* in the OPT TTL's third byte */
};

static struct dns_query q, q2;
static struct dns_reply r;
static uint8_t addr[DNS_REPLY_MAX_ADDRS][16];

/* ---- written apart from the module ---- */

/* A 64-bit mix of the input: where the knobs of properties 3 and 5 come from. */
static uint64_t mix(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h ^ (h >> 29);
}

static bool plain_byte(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static bool mapped(const uint8_t a[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, prefix, sizeof prefix) == 0;
}

static unsigned get16(const uint8_t *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/* Property 2 on q. */
static void check_name(void)
{
    char text[DNS_NAME_TEXT_MAX + 1];
    size_t t = 0, w = 0;
    bool all_plain = true;

    CHECK(q.qname_len <= DNS_NAME_WIRE_MAX, "qname_len %zu", q.qname_len);
    CHECK(q.name_len <= DNS_NAME_TEXT_MAX && q.name[q.name_len] == '\0', "name_len %zu",
          q.name_len);
    if (q.qname_len == 0) {
        CHECK(q.name_len == 0, "no question, yet a name of %zu", q.name_len);
        return;
    }
    while (q.qname[w] != 0) {
        size_t n = q.qname[w++];
        CHECK(n <= DNS_LABEL_MAX && w + n < q.qname_len, "label of %zu at %zu", n, w - 1);
        if (t > 0)
            text[t++] = '.';
        for (size_t i = 0; i < n; i++, w++) {
            all_plain = all_plain && plain_byte(q.qname[w]);
            text[t++] = (char)q.qname[w];
        }
    }
    CHECK(w + 1 == q.qname_len, "root at %zu of %zu", w, q.qname_len);
    CHECK(t == q.name_len && memcmp(text, q.name, t) == 0, "text differs (%zu vs %zu)", t,
          q.name_len);
    CHECK(all_plain == q.plain, "plain %d, should be %d", q.plain, all_plain);
    if (!q.plain || q.name_len == 0)
        return;
    CHECK(strlen(q.name) == q.name_len, "plain name with a NUL");
    const char *s = q.name;
    w = 0;
    for (;;) { /* each piece between dots is the next wire label */
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        CHECK(q.qname[w] == n && memcmp(q.qname + w + 1, s, n) == 0, "piece at %zu", w);
        w += 1 + n;
        if (!dot)
            break;
        s = dot + 1;
    }
    CHECK(q.qname[w] == 0, "more labels than pieces");
}

/* Property 1's shape of an OK query in data[0..size). */
static void check_shape(const uint8_t *data, size_t size)
{
    size_t p = DNS_HEADER_LEN + q.qname_len + QFIXED;

    CHECK(!(data[2] & F_QR) && (data[2] >> 3 & 0xf) == 0 && get16(data + 4) == 1 &&
              get16(data + 6) == 0 && get16(data + 8) == 0 && get16(data + 10) == q.edns,
          "an OK query's header");
    if (!q.edns) {
        CHECK(p == size, "%zu bytes after the question", size - p);
        return;
    }
    CHECK(p + OPT_LEN <= size && data[p] == 0 && get16(data + p + 1) == DNS_T_OPT,
          "no OPT of the root");
    size_t rdlen = get16(data + p + 9), i = 0;
    const uint8_t *o = data + p + OPT_LEN;
    CHECK(p + OPT_LEN + rdlen == size, "the OPT does not end the message");
    while (i < rdlen) { /* options: code, length, data */
        CHECK(rdlen - i >= 4 && get16(o + i + 2) <= rdlen - i - 4, "option at %zu of %zu", i,
              rdlen);
        i += 4 + get16(o + i + 2);
    }
    CHECK(q.udp_size == (get16(data + p + 3) < 512 ? 512 : get16(data + p + 3)) &&
              q.edns_version == data[p + 6] && q.do_bit == ((data[p + 7] & OPT_DO) != 0),
          "the OPT's fields");
}

/* Parse a copy of data[0..n) in a buffer of exactly n bytes into q2. */
static enum dns_query_error parse_copy(const uint8_t *data, size_t n, int extra)
{
    uint8_t *copy = malloc(n + (extra >= 0) + 1);
    memcpy(copy, data, n);
    if (extra >= 0)
        copy[n++] = (uint8_t)extra;
    enum dns_query_error e = dns_query_parse(copy, n, &q2);
    free(copy);
    return e;
}

/* Property 3. */
static void check_prefixes(const uint8_t *data, size_t size, uint64_t h)
{
    size_t cut = (size_t)(h % size);
    enum dns_query_error e = parse_copy(data, cut, -1);
    CHECK(e == (cut < DNS_HEADER_LEN ? DNS_Q_DROP_SHORT : DNS_Q_TRUNCATED),
          "prefix of %zu of %zu bytes: %s", cut, size, dns_error_str(e));
    e = parse_copy(data, size, (int)(h >> 56));
    CHECK(e == DNS_Q_TRAILING, "one byte more: %s", dns_error_str(e));
}

/* Property 4. */
static void check_as_response(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size);
    memcpy(copy, data, size);
    copy[2] |= F_QR;
    bool read = dns_reply_parse(copy, size, &r);
    free(copy);
    CHECK(read, "an OK query with QR set is not a response");
    CHECK(r.id == q.id && r.qdcount == 1 && r.qtype == q.qtype && r.qclass == q.qclass &&
              memcmp(r.name, q.name, q.name_len + 1) == 0,
          "the question read as a response differs");
    CHECK(r.edns == q.edns && (!q.edns || (r.udp_size < 512 ? 512 : r.udp_size) == q.udp_size),
          "the OPT read as a response differs");
}

/* Property 5: the answer to q (parsed OK) with knobs from h. */
static void check_answer(const uint8_t *data, size_t size, uint64_t h)
{
    static const int rcodes[] = {DNS_RC_NOERROR,  DNS_RC_NOERROR, DNS_RC_NOERROR, DNS_RC_NXDOMAIN,
                                 DNS_RC_SERVFAIL, DNS_RC_REFUSED, DNS_RC_BADVERS, DNS_RC_NOERROR};
    int rcode = rcodes[h & 7];
    if (rcode == DNS_RC_BADVERS && !q.edns)
        rcode = DNS_RC_NOERROR;
    size_t n = (size_t)(h >> 3) % (DNS_REPLY_MAX_ADDRS + 1);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < 16; j++)
            addr[i][j] = data[(i * 16 + j) % size];
        if ((h >> (i % 64)) & 1) { /* IPv4-mapped */
            memset(addr[i], 0, 10);
            addr[i][10] = addr[i][11] = 0xff;
        }
    }
    uint32_t ttl = (uint32_t)(h >> 17);
    size_t maxes[] = {q.udp_size, DNS_UDP_PLAIN, DNS_MSG_MAX, DNS_HEADER_LEN + (h >> 40) % 700};
    size_t max = maxes[(h >> 10) & 3];
    size_t cap = (h >> 12) & 1 ? DNS_MSG_MAX : DNS_HEADER_LEN + (h >> 48) % 2000;
    size_t room = max < cap ? max : cap;

    uint8_t *out = malloc(cap);
    size_t len = dns_answer_encode(&q, rcode, (const uint8_t(*)[16])addr, n, ttl, max, out, cap);
    size_t base = DNS_HEADER_LEN + q.qname_len + QFIXED + (q.edns ? OPT_LEN : 0);
    CHECK(len <= room, "answer of %zu bytes in %zu", len, room);
    if (len == 0) {
        CHECK(base > room, "no answer, though %zu bytes fit in %zu", base, room);
        free(out);
        return;
    }

    size_t rdlen = 0, want = 0;
    if (rcode == DNS_RC_NOERROR && q.qclass == DNS_CLASS_IN)
        rdlen = q.qtype == DNS_T_A ? 4 : q.qtype == DNS_T_AAAA ? 16 : 0;
    for (size_t i = 0; i < n && rdlen; i++)
        want += mapped(addr[i]) == (rdlen == 4);
    bool fits = base + want * (RR_FIXED + rdlen) <= room;

    unsigned flags1 = F_QR | (unsigned)q.opcode << 3 | (q.rd ? F_RD : 0);
    unsigned flags2 = F_RA | (q.cd ? F_CD : 0) | ((unsigned)rcode & 0xf);
    CHECK((out[2] & ~F_TC) == flags1 && out[3] == flags2, "flags %02x %02x, not %02x %02x", out[2],
          out[3], flags1, flags2);
    CHECK(dns_reply_parse(out, len, &r), "our answer is not a response");
    CHECK(r.id == q.id && r.rcode == rcode && r.rd == q.rd && r.ra && !r.aa,
          "header: id %u/%u rcode %d/%d", r.id, q.id, r.rcode, rcode);
    CHECK(r.qdcount == 1 && memcmp(out + DNS_HEADER_LEN, q.qname, q.qname_len) == 0 &&
              memcmp(r.name, q.name, q.name_len + 1) == 0 && r.qtype == q.qtype &&
              r.qclass == q.qclass,
          "the question differs");
    CHECK(r.edns == q.edns && r.arcount == q.edns && r.nscount == 0, "the OPT: %d, query %d",
          r.edns, q.edns);
    if (q.edns) {
        const uint8_t *o = out + len - OPT_LEN;
        CHECK(o[0] == 0 && get16(o + 1) == DNS_T_OPT && get16(o + 3) == DNS_UDP_OURS &&
                  o[5] == rcode >> 4 && o[6] == 0 && ((o[7] & OPT_DO) != 0) == q.do_bit,
              "our OPT");
    }
    if (!fits) {
        CHECK(r.tc && r.ancount == 0 && r.n_addr == 0, "%zu records do not fit, yet TC %d", want,
              r.tc);
    } else {
        CHECK(!r.tc && r.ancount == want && r.n_addr == want, "%zu records of %zu, TC %d", r.n_addr,
              want, r.tc);
        for (size_t i = 0, k = 0; i < n && rdlen; i++) {
            if (mapped(addr[i]) != (rdlen == 4))
                continue;
            CHECK(memcmp(r.addr[k], addr[i], 16) == 0 && r.ttl[k] == ttl, "record %zu", k);
            k++;
        }
    }
    size_t cut = (size_t)(h >> 20) % len;
    uint8_t *prefix = malloc(cut ? cut : 1);
    memcpy(prefix, out, cut);
    CHECK(!dns_reply_parse(prefix, cut, &r), "our answer cut to %zu of %zu bytes reads", cut, len);
    free(prefix);
    free(out);
}

/* Property 6: the answer to a parse error e. */
static void check_error_answer(enum dns_query_error e)
{
    static uint8_t out[DNS_MSG_MAX];
    int rcode = dns_error_rcode(e);
    size_t len = dns_answer_encode(&q, rcode, NULL, 0, 0, q.udp_size, out, sizeof out);

    if (rcode < 0) {
        CHECK(len == 0, "a drop (%s) answered", dns_error_str(e));
        return;
    }
    bool question = e == DNS_Q_TRAILING || e == DNS_Q_EDNS_VERSION;
    size_t want = DNS_HEADER_LEN + (question ? q.qname_len + QFIXED : 0) + (q.edns ? OPT_LEN : 0);
    CHECK(len == want, "%s: answer of %zu bytes, not %zu", dns_error_str(e), len, want);
    CHECK(dns_reply_parse(out, len, &r) && r.id == q.id && r.rcode == rcode &&
              r.qdcount == question && r.ancount == 0 && r.edns == q.edns,
          "%s: the answer reads back wrong", dns_error_str(e));
    CHECK(q.edns == (e >= DNS_Q_EDNS_VERSION && q.edns), "edns before the OPT was read");
}

/* Properties 7 and 8. */
static void check_reply_and_frame(const uint8_t *data, size_t size)
{
    if (dns_reply_parse(data, size, &r))
        CHECK(r.n_addr <= DNS_REPLY_MAX_ADDRS && memchr(r.name, 0, sizeof r.name) != NULL,
              "reply: %zu addresses", r.n_addr);

    const uint8_t *msg;
    size_t msg_len, used = dns_tcp_frame(data, size, &msg, &msg_len);
    CHECK(used <= size, "frame of %zu in %zu", used, size);
    if (size >= 2 && get16(data) + 2 <= size) {
        CHECK(used == get16(data) + 2u && msg == data + 2 && msg_len == get16(data),
              "the whole frame is in but not taken");
        CHECK(dns_tcp_frame(data, used - 1, &msg, &msg_len) == 0, "a frame taken short");
    } else {
        CHECK(used == 0 && msg == NULL && msg_len == 0, "a frame taken before it is in");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum dns_query_error e = dns_query_parse(data, size, &q);
    check_name();
    if (e == DNS_Q_OK) {
        uint8_t qs[DNS_NAME_WIRE_MAX + QFIXED];
        size_t n = dns_question_encode(&q, qs, sizeof qs);
        CHECK(n == q.qname_len + QFIXED && n <= size - DNS_HEADER_LEN &&
                  memcmp(qs, data + DNS_HEADER_LEN, n) == 0,
              "the question written again differs (%zu bytes)", n);
        check_shape(data, size);
        uint64_t h = mix(data, size);
        check_prefixes(data, size, h);
        check_as_response(data, size);
        check_answer(data, size, h);
    } else {
        check_error_answer(e);
    }
    check_reply_and_frame(data, size);
    return 0;
}
