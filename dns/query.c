/*
 * query.c - a DNS query read strictly: its header, its one question and
 * its optional OPT record, and the question written back.
 *
 * The checks come in this order, each error returned as soon as it is
 * seen: header (DROP_SHORT, DROP_RESPONSE, OPCODE), counts (COUNT), the
 * question's name and fixed part (NAME, TRUNCATED), the additional
 * section (EDNS, TRUNCATED), bytes left over (TRAILING), and last the OPT
 * version (EDNS_VERSION): a malformed message is FORMERR whatever its
 * version says.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dns_int.h"

/* Forget the question and the OPT: an error answer that must not echo
 * them finds qname_len 0 and edns false. */
static void forget_question(struct dns_query *q)
{
    q->qname_len = 0;
    q->name[0] = '\0';
    q->name_len = 0;
    q->plain = true;
    q->qtype = 0;
    q->qclass = 0;
    q->edns = false;
    q->udp_size = DNS_UDP_PLAIN;
    q->edns_version = 0;
    q->do_bit = false;
}

/*
 * Read the question's name at msg[*pos..len) into q->qname (wire form, as
 * sent) and q->name (text); advance *pos past it.  No compression: a
 * pointer (0xC0) and the reserved kinds 0x40 and 0x80 (which is also what
 * a label over 63 would look like) are DNS_Q_NAME, as is a name over
 * DNS_NAME_WIRE_MAX bytes; running out of bytes is DNS_Q_TRUNCATED.
 */
static enum dns_query_error read_qname(const uint8_t *msg, size_t len, size_t *pos,
                                       struct dns_query *q)
{
    size_t p = *pos, w = 0;

    for (;;) {
        if (p >= len)
            return DNS_Q_TRUNCATED;
        size_t label = msg[p];
        if (label & DNS_LABEL_KIND)
            return DNS_Q_NAME;
        /* This label, and after it at least the root's byte. */
        if (label > 0 && w + 1 + label + DNS_ROOT_LEN > DNS_NAME_WIRE_MAX)
            return DNS_Q_NAME;
        if (label > len - p - 1)
            return DNS_Q_TRUNCATED;
        memcpy(q->qname + w, msg + p, 1 + label);
        w += 1 + label;
        p += 1 + label;
        if (label == 0)
            break;
    }
    q->qname_len = w;
    q->name_len = dns_name_text(q->qname, w, q->name, &q->plain);
    *pos = p;
    return DNS_Q_OK;
}

/* Read the one question at msg[*pos..len) into q; advance *pos. */
static enum dns_query_error read_question(const uint8_t *msg, size_t len, size_t *pos,
                                          struct dns_query *q)
{
    enum dns_query_error e = read_qname(msg, len, pos, q);

    if (e != DNS_Q_OK)
        return e;
    if (len - *pos < DNS_QUESTION_FIXED)
        return DNS_Q_TRUNCATED;
    q->qtype = dns_get16(msg + *pos);
    q->qclass = dns_get16(msg + *pos + 2);
    *pos += DNS_QUESTION_FIXED;
    return DNS_Q_OK;
}

/* True when opts[0..n) is a sequence of whole EDNS options: each one's
 * code and length fit, and its data ends within n (RFC 6891 §6.1.2). */
static bool options_whole(const uint8_t *opts, size_t n)
{
    size_t i = 0;

    while (i < n) {
        if (n - i < DNS_OPTION_HDR)
            return false;
        size_t olen = dns_get16(opts + i + DNS_OPTION_OFF_LEN);
        i += DNS_OPTION_HDR;
        if (olen > n - i)
            return false;
        i += olen;
    }
    return true;
}

/*
 * Read the additional section, arcount records at msg[*pos..len): nothing,
 * or one OPT record owned by the root (RFC 6891 §6.1.1) whose options are
 * whole.  Anything else there is DNS_Q_EDNS; running out of bytes before
 * the OPT's end is DNS_Q_TRUNCATED.  Sets q's EDNS fields; advances *pos.
 */
static enum dns_query_error read_opt(const uint8_t *msg, size_t len, size_t *pos, unsigned arcount,
                                     struct dns_query *q)
{
    size_t p = *pos;

    if (arcount == 0)
        return DNS_Q_OK;
    if (arcount > 1)
        return DNS_Q_EDNS; /* a second OPT, or a record that is not one */
    if (p >= len)
        return DNS_Q_TRUNCATED;
    if (msg[p] != 0)
        return DNS_Q_EDNS; /* owner not the root: not an OPT we take */
    if (len - p < DNS_OPT_LEN)
        return DNS_Q_TRUNCATED;
    const uint8_t *rr = msg + p + DNS_ROOT_LEN;
    if (dns_get16(rr + DNS_RR_OFF_TYPE) != DNS_T_OPT)
        return DNS_Q_EDNS;
    uint16_t udp = dns_get16(rr + DNS_RR_OFF_CLASS);
    uint32_t ttl = dns_get32(rr + DNS_RR_OFF_TTL);
    size_t rdlen = dns_get16(rr + DNS_RR_OFF_RDLEN);
    p += DNS_OPT_LEN;
    if (rdlen > len - p)
        return DNS_Q_TRUNCATED;
    if (!options_whole(msg + p, rdlen))
        return DNS_Q_EDNS;
    q->edns = true;
    q->udp_size = udp < DNS_UDP_PLAIN ? DNS_UDP_PLAIN : udp; /* RFC 6891 §6.2.3 */
    q->edns_version = (uint8_t)(ttl >> DNS_OPT_VERSION_SHIFT & DNS_OPT_BYTE_MASK);
    q->do_bit = (ttl & DNS_OPT_DO) != 0;
    *pos = p + rdlen;
    return DNS_Q_OK;
}

/* See dns.h.  Other header bits (AA, TC, RA, Z, AD, the query's rcode)
 * are ignored, as a server does: RFC 6840 §5.7 has clients set AD. */
enum dns_query_error dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *q)
{
    memset(q, 0, sizeof *q);
    forget_question(q);
    if (len < DNS_HEADER_LEN)
        return DNS_Q_DROP_SHORT;

    uint16_t flags = dns_get16(msg + DNS_OFF_FLAGS);
    q->id = dns_get16(msg + DNS_OFF_ID);
    q->opcode = (uint8_t)(flags >> DNS_F_OPCODE_SHIFT & DNS_F_OPCODE_MASK);
    q->rd = (flags & DNS_F_RD) != 0;
    q->cd = (flags & DNS_F_CD) != 0;
    if (flags & DNS_F_QR)
        return DNS_Q_DROP_RESPONSE;
    if (q->opcode != DNS_OPCODE_QUERY)
        return DNS_Q_OPCODE;
    if (dns_get16(msg + DNS_OFF_QDCOUNT) != 1 || dns_get16(msg + DNS_OFF_ANCOUNT) != 0 ||
        dns_get16(msg + DNS_OFF_NSCOUNT) != 0)
        return DNS_Q_COUNT;

    size_t pos = DNS_HEADER_LEN;
    enum dns_query_error e = read_question(msg, len, &pos, q);
    if (e == DNS_Q_OK)
        e = read_opt(msg, len, &pos, dns_get16(msg + DNS_OFF_ARCOUNT), q);
    if (e != DNS_Q_OK) {
        forget_question(q);
        return e;
    }
    if (pos != len)
        return DNS_Q_TRAILING;
    if (q->edns_version > 0)
        return DNS_Q_EDNS_VERSION;
    return DNS_Q_OK;
}

/* See dns.h.  Also 0 when q has no question (qname_len 0). */
size_t dns_question_encode(const struct dns_query *q, uint8_t *out, size_t cap)
{
    size_t n = q->qname_len + DNS_QUESTION_FIXED;

    if (q->qname_len == 0 || q->qname_len > DNS_NAME_WIRE_MAX || cap < n)
        return 0;
    memcpy(out, q->qname, q->qname_len);
    uint8_t *p = dns_put16(out + q->qname_len, q->qtype);
    dns_put16(p, q->qclass);
    return n;
}

/* See dns.h. */
int dns_error_rcode(enum dns_query_error e)
{
    switch (e) {
    case DNS_Q_OK: return DNS_RC_NOERROR;
    case DNS_Q_OPCODE: return DNS_RC_NOTIMP;
    case DNS_Q_COUNT:
    case DNS_Q_NAME:
    case DNS_Q_TRUNCATED:
    case DNS_Q_EDNS:
    case DNS_Q_TRAILING: return DNS_RC_FORMERR;
    case DNS_Q_EDNS_VERSION: return DNS_RC_BADVERS;
    case DNS_Q_DROP_SHORT:
    case DNS_Q_DROP_RESPONSE: break;
    }
    return -1; /* the drops, and anything not in the enum: send nothing */
}

/* See dns.h. */
const char *dns_error_str(enum dns_query_error e)
{
    switch (e) {
    case DNS_Q_OK: return "ok";
    case DNS_Q_DROP_SHORT: return "shorter than a header";
    case DNS_Q_DROP_RESPONSE: return "a response, not a query";
    case DNS_Q_OPCODE: return "opcode not QUERY";
    case DNS_Q_COUNT: return "not one question, or answer or authority records";
    case DNS_Q_NAME: return "bad question name";
    case DNS_Q_TRUNCATED: return "message ends inside a record";
    case DNS_Q_EDNS: return "additional record not one well-formed OPT";
    case DNS_Q_EDNS_VERSION: return "EDNS version not 0";
    case DNS_Q_TRAILING: return "bytes after the last record";
    }
    return "unknown error";
}
