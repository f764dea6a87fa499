/*
 * reply.c - a DNS response read back: header, question, the A and AAAA
 * records of the answer section, the OPT of the additional section; every
 * other record checked for shape and skipped by its RDLENGTH.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dns_int.h"

/* Most compression pointers one name may go through.  Each pointer must
 * land before the run of labels it ends (see read_name), which already
 * rules loops out; this bounds pointer-to-pointer chains the same way a
 * name's labels are bounded: a wire name has at most 127 labels. */
#define DNS_POINTER_HOPS_MAX 127

/* A record's name and fixed part, and where its RDATA is. */
struct rr {
    uint8_t owner[DNS_NAME_WIRE_MAX];
    size_t owner_len;
    uint16_t type, class;
    uint32_t ttl;
    size_t rdata, rdlen; /* msg[rdata..rdata + rdlen) */
};

/*
 * Read the name at msg[*pos..len), following compression pointers (RFC
 * 1035 §4.1.4), into wire[] uncompressed; advance *pos past the name as it
 * stands in place.  A pointer must land after the header and before the
 * start of the run of labels that contains it, so the runs start ever
 * earlier and a loop is impossible; hops are counted too.  False for a
 * loop, a pointer forward, into the header or out of range, a reserved
 * label kind, a name over DNS_NAME_WIRE_MAX bytes, or one cut short.
 */
static bool read_name(const uint8_t *msg, size_t len, size_t *pos, uint8_t *wire, size_t *wire_len)
{
    size_t p = *pos, run = *pos, w = 0, after = 0;
    unsigned hops = 0;

    for (;;) {
        if (p >= len)
            return false;
        size_t label = msg[p];
        if ((label & DNS_LABEL_KIND) == DNS_LABEL_POINTER) {
            if (len - p < DNS_POINTER_LEN)
                return false;
            size_t target = dns_get16(msg + p) & DNS_POINTER_MASK;
            if (target < DNS_HEADER_LEN || target >= run || ++hops > DNS_POINTER_HOPS_MAX)
                return false;
            if (hops == 1)
                after = p + DNS_POINTER_LEN;
            p = run = target;
            continue;
        }
        if (label & DNS_LABEL_KIND)
            return false; /* 0x40, 0x80: reserved */
        if (label > 0 && w + 1 + label + DNS_ROOT_LEN > DNS_NAME_WIRE_MAX)
            return false;
        if (label > len - p - 1)
            return false;
        memcpy(wire + w, msg + p, 1 + label);
        w += 1 + label;
        p += 1 + label;
        if (label == 0)
            break;
    }
    *pos = hops ? after : p;
    *wire_len = w;
    return true;
}

/* Read the record at msg[*pos..len) into *rr; advance *pos past it. */
static bool read_rr(const uint8_t *msg, size_t len, size_t *pos, struct rr *rr)
{
    if (!read_name(msg, len, pos, rr->owner, &rr->owner_len) || len - *pos < DNS_RR_FIXED)
        return false;
    const uint8_t *f = msg + *pos;
    rr->type = dns_get16(f + DNS_RR_OFF_TYPE);
    rr->class = dns_get16(f + DNS_RR_OFF_CLASS);
    rr->ttl = dns_get32(f + DNS_RR_OFF_TTL);
    rr->rdlen = dns_get16(f + DNS_RR_OFF_RDLEN);
    rr->rdata = *pos + DNS_RR_FIXED;
    if (rr->rdlen > len - rr->rdata)
        return false;
    *pos = rr->rdata + rr->rdlen;
    return true;
}

/* Read qdcount questions; the first one's name, type and class go to r. */
static bool read_questions(const uint8_t *msg, size_t len, size_t *pos, struct dns_reply *r)
{
    uint8_t wire[DNS_NAME_WIRE_MAX];
    size_t wire_len;

    for (unsigned i = 0; i < r->qdcount; i++) {
        if (!read_name(msg, len, pos, wire, &wire_len) || len - *pos < DNS_QUESTION_FIXED)
            return false;
        if (i == 0) {
            dns_name_text(wire, wire_len, r->name, NULL);
            r->qtype = dns_get16(msg + *pos);
            r->qclass = dns_get16(msg + *pos + 2);
        }
        *pos += DNS_QUESTION_FIXED;
    }
    return true;
}

/* Take an answer record: an IN A or AAAA one (of the right RDATA length,
 * else false) is kept, IPv4 as ::ffff:a.b.c.d, while there is room. */
static bool take_answer(const uint8_t *msg, const struct rr *rr, struct dns_reply *r)
{
    size_t want = rr->type == DNS_T_A ? DNS_A_LEN : rr->type == DNS_T_AAAA ? DNS_AAAA_LEN : 0;

    if (want == 0 || rr->class != DNS_CLASS_IN)
        return true;
    if (rr->rdlen != want)
        return false;
    if (r->n_addr == DNS_REPLY_MAX_ADDRS)
        return true;
    uint8_t *a = r->addr[r->n_addr];
    memset(a, 0, DNS_AAAA_LEN);
    if (want == DNS_A_LEN)
        a[DNS_V4MAPPED_ZEROS] = a[DNS_V4MAPPED_ZEROS + 1] = DNS_V4MAPPED_FF;
    memcpy(a + (DNS_AAAA_LEN - want), msg + rr->rdata, want);
    r->ttl[r->n_addr++] = rr->ttl;
    return true;
}

/* Take an additional record: an OPT (one at most, owned by the root)
 * gives the UDP size and the rcode's upper bits; others are skipped. */
static bool take_additional(const struct rr *rr, struct dns_reply *r)
{
    if (rr->type != DNS_T_OPT)
        return true;
    if (r->edns || rr->owner_len != DNS_ROOT_LEN)
        return false;
    r->edns = true;
    r->udp_size = rr->class;
    r->rcode |= (int)(rr->ttl >> DNS_OPT_EXT_SHIFT) << DNS_RCODE_HDR_BITS;
    return true;
}

/* See dns.h.  Also false for bytes after the last record. */
bool dns_reply_parse(const uint8_t *msg, size_t len, struct dns_reply *r)
{
    struct rr rr;

    memset(r, 0, sizeof *r);
    if (len < DNS_HEADER_LEN)
        return false;
    uint16_t flags = dns_get16(msg + DNS_OFF_FLAGS);
    if (!(flags & DNS_F_QR))
        return false;
    r->id = dns_get16(msg + DNS_OFF_ID);
    r->rcode = flags & DNS_F_RCODE_MASK;
    r->tc = (flags & DNS_F_TC) != 0;
    r->rd = (flags & DNS_F_RD) != 0;
    r->ra = (flags & DNS_F_RA) != 0;
    r->aa = (flags & DNS_F_AA) != 0;
    r->qdcount = dns_get16(msg + DNS_OFF_QDCOUNT);
    r->ancount = dns_get16(msg + DNS_OFF_ANCOUNT);
    r->nscount = dns_get16(msg + DNS_OFF_NSCOUNT);
    r->arcount = dns_get16(msg + DNS_OFF_ARCOUNT);

    size_t pos = DNS_HEADER_LEN;
    if (!read_questions(msg, len, &pos, r))
        return false;
    for (unsigned i = 0; i < r->ancount; i++)
        if (!read_rr(msg, len, &pos, &rr) || !take_answer(msg, &rr, r))
            return false;
    for (unsigned i = 0; i < r->nscount; i++)
        if (!read_rr(msg, len, &pos, &rr))
            return false;
    for (unsigned i = 0; i < r->arcount; i++)
        if (!read_rr(msg, len, &pos, &rr) || !take_additional(&rr, r))
            return false;
    return pos == len;
}
