/*
 * dns.h - DNS messages as egressd's policy DNS server reads and answers
 * them: one question in, one answer out.
 *
 * Implements:
 *   RFC 1035 §4.1    header, question, resource records; §4.1.4 name
 *                    compression (answers point at the question's name;
 *                    a question that uses a pointer is refused)
 *   RFC 1035 §4.2.2  TCP: the two-byte length prefix (dns_tcp_frame)
 *   RFC 3596         AAAA
 *   RFC 6891         EDNS0: the OPT record, the requester's UDP size,
 *                    version 0 only (BADVERS otherwise), DO echoed
 *   RFC 2308         negative answers (NXDOMAIN, NODATA) without SOA
 *
 * The module is pure: no I/O, no allocation, no logging, no globals.  It
 * never trusts a length it has not checked against the bytes it has.
 */
#ifndef DNS_DNS_H
#define DNS_DNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER_LEN    12
#define DNS_NAME_WIRE_MAX 255 /* RFC 1035 §2.3.4, the root label included */
#define DNS_NAME_TEXT_MAX 253 /* the text form, no trailing dot */
#define DNS_LABEL_MAX     63
#define DNS_UDP_PLAIN     512   /* a query without EDNS0 gets at most this */
#define DNS_UDP_OURS      1232  /* what we offer in our OPT (DNS flag day 2020) */
#define DNS_MSG_MAX       65535 /* TCP, and the largest buffer anyone needs */

enum dns_type {
    DNS_T_A = 1,
    DNS_T_NS = 2,
    DNS_T_CNAME = 5,
    DNS_T_SOA = 6,
    DNS_T_NULL = 10,
    DNS_T_PTR = 12,
    DNS_T_MX = 15,
    DNS_T_TXT = 16,
    DNS_T_AAAA = 28,
    DNS_T_SRV = 33,
    DNS_T_OPT = 41,
    DNS_T_SVCB = 64,
    DNS_T_HTTPS = 65,
    DNS_T_AXFR = 252,
    DNS_T_ANY = 255,
};

#define DNS_CLASS_IN 1

/* Response codes we send (RFC 1035 §4.1.1; BADVERS is RFC 6891's
 * extended code 16, sent as rcode 0 plus the OPT's extended bits). */
enum dns_rcode {
    DNS_RC_NOERROR = 0,
    DNS_RC_FORMERR = 1,
    DNS_RC_SERVFAIL = 2,
    DNS_RC_NXDOMAIN = 3,
    DNS_RC_NOTIMP = 4,
    DNS_RC_REFUSED = 5,
    DNS_RC_BADVERS = 16,
};

/* What dns_query_parse() made of a message.  DNS_Q_OK is a query to
 * answer; the others say how to answer it (dns_error_rcode) or, for
 * DNS_Q_DROP, that nothing may be sent back (no header to answer, or a
 * response: answering those reflects and loops). */
enum dns_query_error {
    DNS_Q_OK,
    DNS_Q_DROP_SHORT,    /* fewer than 12 bytes: no header */
    DNS_Q_DROP_RESPONSE, /* QR set: a response, not a query */
    DNS_Q_OPCODE,        /* opcode not QUERY: NOTIMP */
    /* QDCOUNT != 1, or answer/authority records in a query: FORMERR */
    DNS_Q_COUNT,
    /* label over 63, name over 255, a pointer or reserved label type: FORMERR */
    DNS_Q_NAME,
    /* the message ends inside the question or the OPT: FORMERR */
    DNS_Q_TRUNCATED,
    /* an additional record that is not one well-formed OPT for the root: FORMERR */
    DNS_Q_EDNS,
    DNS_Q_EDNS_VERSION, /* OPT version above 0: BADVERS */
    DNS_Q_TRAILING,     /* bytes after the last record: FORMERR */
};

/* A parsed query.  id, opcode, rd and cd are set whenever the header was
 * read, so an error answer can echo them.  The question (qname .. qclass)
 * and the OPT fields (edns .. do_bit) are valid for DNS_Q_OK and, the
 * message being well-formed up to its last record, for DNS_Q_EDNS_VERSION
 * and DNS_Q_TRAILING; for every other result they are cleared (qname_len
 * 0, name "", edns false, udp_size 512), so that an error answer echoes
 * neither. */
struct dns_query {
    uint16_t id;
    uint8_t opcode;
    bool rd, cd;
    /* The question's name exactly as it came (case kept: 0x20 randomisation
     * must be echoed), in wire form, root label included. */
    uint8_t qname[DNS_NAME_WIRE_MAX];
    size_t qname_len;
    /* The same name as text: labels joined by '.', no trailing dot, "" for
     * the root.  Bytes are copied as they are; `plain` says every label is
     * letters, digits, '-' and '_' only (so the text names exactly the
     * wire name: no '.' or other byte inside a label). */
    char name[DNS_NAME_TEXT_MAX + 1];
    size_t name_len;
    bool plain;
    uint16_t qtype, qclass;
    bool edns;         /* an OPT record came */
    uint16_t udp_size; /* its requestor's payload size, at least 512; 512 without OPT */
    uint8_t edns_version;
    bool do_bit;
};

/* Parse the query in msg[0..len) (one UDP datagram, or one TCP message
 * without its length prefix) into *q. */
enum dns_query_error dns_query_parse(const uint8_t *msg, size_t len, struct dns_query *q);

/* The rcode to answer a parse error with (DNS_RC_NOERROR for DNS_Q_OK,
 * -1 for the DNS_Q_DROP_* errors), and its words for a log line. */
int dns_error_rcode(enum dns_query_error e);
const char *dns_error_str(enum dns_query_error e);

/* The word for a type ("A", "AAAA", "HTTPS", ...; "TYPE123" written into
 * buf for others) and for an rcode ("NOERROR", "NXDOMAIN", ...). */
const char *dns_type_str(uint16_t type, char buf[12]);
const char *dns_rcode_str(int rcode);

/* The question section of q written again: name, type, class.  Returns the
 * bytes written, or 0 if cap is too small or q has no question
 * (qname_len 0). */
size_t dns_question_encode(const struct dns_query *q, uint8_t *out, size_t cap);

/* An answer to q: header (same id and opcode, QR, RA, RD and CD echoed, AA
 * and AD clear), q's question when it has one (qname_len > 0: not for the
 * DNS_Q_OPCODE/COUNT/NAME/TRUNCATED/EDNS errors, whose question is not
 * known or not taken; QDCOUNT 0), then for rcode NOERROR to a class IN
 * question one record per address of the question's type (A: 4 bytes,
 * from the IPv4-mapped addresses only; AAAA: 16 bytes, from the others;
 * addr[i] holds IPv4 as ::ffff:a.b.c.d, so a list may mix both) with
 * owner name a pointer to the question (0xC00C) and TTL `ttl`, and an OPT
 * record when q had one (our size DNS_UDP_OURS, version 0, DO echoed; the
 * rcode's upper 8 bits in its extended rcode: BADVERS is 0 in the header,
 * 1 there).
 *
 * The answer is at most `max` bytes (the client's limit: q->udp_size over
 * UDP, DNS_MSG_MAX over TCP) and at most `cap`.  If the records do not fit,
 * none are sent and TC is set (the client asks again over TCP); header,
 * question and OPT stay.  Returns the length, or 0 (send nothing) when not
 * even the header, question and OPT fit, or for an rcode that cannot be
 * sent: below 0 (the drops), above 4095, or above 15 without an OPT. */
size_t dns_answer_encode(const struct dns_query *q, int rcode, const uint8_t (*addr)[16], size_t n,
                         uint32_t ttl, size_t max, uint8_t *out, size_t cap);

/* ---- reading answers (tests, the fuzz harness, the bench's load
 * generator): the header, the question and the A/AAAA records. */

#define DNS_REPLY_MAX_ADDRS 64

struct dns_reply {
    uint16_t id;
    int rcode; /* with EDNS0's extended bits */
    bool tc, rd, ra, aa;
    uint16_t qdcount, ancount, nscount, arcount;
    char name[DNS_NAME_TEXT_MAX + 1]; /* the question's, as text ("" if none) */
    uint16_t qtype, qclass;
    size_t n_addr; /* A and AAAA records of the answer section */
    uint8_t addr[DNS_REPLY_MAX_ADDRS][16];
    uint32_t ttl[DNS_REPLY_MAX_ADDRS];
    bool edns;
    uint16_t udp_size;
};

/* Parse a response (compression pointers followed: each must point back,
 * past the header, before the labels it ends; at most 127 hops).  False
 * when it is not a well-formed response: QR clear, a record cut short, an
 * A or AAAA record of another length, a second OPT or one not owned by the
 * root, bytes after the last record. */
bool dns_reply_parse(const uint8_t *msg, size_t len, struct dns_reply *r);

/* ---- TCP framing: a message is preceded by its length, two bytes. */

/* How many bytes of buf[0..len) the first framed message takes (prefix
 * included), 0 if it is not all there yet; *msg and *msg_len are the
 * message (NULL and 0 until it is all there).  A zero-length message is
 * framed too (then the caller's parse says DNS_Q_DROP_SHORT). */
size_t dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len);

#endif
