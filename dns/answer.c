/*
 * answer.c - the one answer to a query: header, the question echoed, the
 * A or AAAA records, our OPT; TC and no records when they do not fit.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dns_int.h"

/* Owner pointer, TYPE, CLASS, TTL, RDLENGTH: a record without its data. */
#define DNS_ANSWER_RR_FIXED (DNS_POINTER_LEN + DNS_RR_FIXED)

/* The RDATA length of the records q gets with rcode: 4 (A) or 16 (AAAA)
 * for a NOERROR answer to an IN question of that type, else 0 (none). */
static size_t rdata_len(const struct dns_query *q, int rcode)
{
    if (rcode != DNS_RC_NOERROR || q->qname_len == 0 || q->qclass != DNS_CLASS_IN)
        return 0;
    if (q->qtype == DNS_T_A)
        return DNS_A_LEN;
    if (q->qtype == DNS_T_AAAA)
        return DNS_AAAA_LEN;
    return 0;
}

/* True when a is an address of the family rdlen says: IPv4-mapped for A,
 * anything else for AAAA. */
static bool of_family(const uint8_t a[16], size_t rdlen)
{
    return dns_is_v4mapped(a) == (rdlen == DNS_A_LEN);
}

/* How many of addr[0..n) are of the family rdlen says. */
static size_t count_family(const uint8_t (*addr)[16], size_t n, size_t rdlen)
{
    size_t c = 0;

    for (size_t i = 0; i < n; i++)
        c += of_family(addr[i], rdlen);
    return c;
}

/* Write the header at out: q's id and opcode, QR, RA, RD and CD echoed,
 * rcode's lower 4 bits, and the four counts. */
static uint8_t *put_header(uint8_t *out, const struct dns_query *q, int rcode, bool tc,
                           unsigned qdcount, unsigned ancount, unsigned arcount)
{
    unsigned flags = DNS_F_QR | (unsigned)(q->opcode & DNS_F_OPCODE_MASK) << DNS_F_OPCODE_SHIFT |
                     DNS_F_RA | ((unsigned)rcode & DNS_F_RCODE_MASK);

    if (tc)
        flags |= DNS_F_TC;
    if (q->rd)
        flags |= DNS_F_RD;
    if (q->cd)
        flags |= DNS_F_CD;
    uint8_t *p = dns_put16(out, q->id);
    p = dns_put16(p, (uint16_t)flags);
    p = dns_put16(p, (uint16_t)qdcount);
    p = dns_put16(p, (uint16_t)ancount);
    p = dns_put16(p, 0); /* NSCOUNT: no SOA in negative answers */
    return dns_put16(p, (uint16_t)arcount);
}

/* Write the records for the addresses of addr[0..n) of rdlen's family. */
static uint8_t *put_records(uint8_t *p, const struct dns_query *q, const uint8_t (*addr)[16],
                            size_t n, size_t rdlen, uint32_t ttl)
{
    for (size_t i = 0; i < n; i++) {
        if (!of_family(addr[i], rdlen))
            continue;
        p = dns_put16(p, DNS_POINTER_QNAME);
        p = dns_put16(p, q->qtype);
        p = dns_put16(p, DNS_CLASS_IN);
        p = dns_put32(p, ttl);
        p = dns_put16(p, (uint16_t)rdlen);
        memcpy(p, addr[i] + (DNS_AAAA_LEN - rdlen), rdlen); /* A: bytes 12..15 */
        p += rdlen;
    }
    return p;
}

/* Write our OPT record (RFC 6891 §6.1.2): root owner, our UDP size,
 * rcode's upper 8 bits, version 0, q's DO bit, no options. */
static uint8_t *put_opt(uint8_t *p, const struct dns_query *q, int rcode)
{
    uint32_t ttl = (uint32_t)((unsigned)rcode >> DNS_RCODE_HDR_BITS) << DNS_OPT_EXT_SHIFT;

    if (q->do_bit)
        ttl |= DNS_OPT_DO;
    *p++ = 0; /* the root */
    p = dns_put16(p, DNS_T_OPT);
    p = dns_put16(p, DNS_UDP_OURS);
    p = dns_put32(p, ttl);
    return dns_put16(p, 0);
}

/*
 * See dns.h.  Precisely: the question is echoed when q has one (qname_len
 * > 0; dns_query_parse leaves it 0 for the errors whose question is not
 * known), records go only to a NOERROR answer to a class IN question, and
 * 0 also comes back for an rcode we cannot send (below 0, above 12 bits,
 * or above 4 bits without an OPT) and when the header, question and OPT
 * do not fit in min(max, cap, DNS_MSG_MAX).
 */
size_t dns_answer_encode(const struct dns_query *q, int rcode, const uint8_t (*addr)[16], size_t n,
                         uint32_t ttl, size_t max, uint8_t *out, size_t cap)
{
    if (rcode < 0 || rcode > DNS_RCODE_MAX || (rcode > DNS_RCODE_HDR_MAX && !q->edns) ||
        q->qname_len > DNS_NAME_WIRE_MAX)
        return 0;
    size_t room = max < cap ? max : cap;
    if (room > DNS_MSG_MAX)
        room = DNS_MSG_MAX;
    unsigned qdcount = q->qname_len > 0;
    size_t base = DNS_HEADER_LEN + (qdcount ? q->qname_len + DNS_QUESTION_FIXED : 0) +
                  (q->edns ? DNS_OPT_LEN : 0);
    if (base > room)
        return 0;

    size_t rdlen = rdata_len(q, rcode);
    size_t count = rdlen ? count_family(addr, n, rdlen) : 0;
    bool tc = count > (room - base) / (DNS_ANSWER_RR_FIXED + rdlen);
    if (tc)
        count = 0;

    uint8_t *p = put_header(out, q, rcode, tc, qdcount, (unsigned)count, q->edns);
    if (qdcount)
        p += dns_question_encode(q, p, room - DNS_HEADER_LEN);
    if (count)
        p = put_records(p, q, addr, n, rdlen, ttl);
    if (q->edns)
        p = put_opt(p, q, rcode);
    return (size_t)(p - out);
}
