/*
 * dns_int.h - private to dns/: the wire layout the files share (header
 * offsets and flags, fixed record parts, the OPT TTL's bits) and the
 * big-endian readers and writers.  Nothing outside dns/ includes it.
 */
#ifndef DNS_DNS_INT_H
#define DNS_DNS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns.h"

/* Header field offsets (RFC 1035 §4.1.1). */
#define DNS_OFF_ID      0
#define DNS_OFF_FLAGS   2
#define DNS_OFF_QDCOUNT 4
#define DNS_OFF_ANCOUNT 6
#define DNS_OFF_NSCOUNT 8
#define DNS_OFF_ARCOUNT 10

/* Header flag bits (RFC 1035 §4.1.1; Z is RFC 1035's reserved bit; AD and
 * CD are RFC 4035 §3.2.3 and §3.2.2, RFC 6840 §5.7-5.9). */
#define DNS_F_QR           0x8000
#define DNS_F_OPCODE_SHIFT 11 /* opcode: bits 11..14 */
#define DNS_F_OPCODE_MASK  0xF
#define DNS_F_AA           0x0400
#define DNS_F_TC           0x0200
#define DNS_F_RD           0x0100
#define DNS_F_RA           0x0080
#define DNS_F_Z            0x0040
#define DNS_F_AD           0x0020
#define DNS_F_CD           0x0010
#define DNS_F_RCODE_MASK   0x000F

#define DNS_OPCODE_QUERY 0

/* The top two bits of a label's length octet say its kind (RFC 1035
 * §4.1.4; 0x40 and 0x80 are reserved, RFC 6891 §5 retired 0x40). */
#define DNS_LABEL_KIND    0xC0
#define DNS_LABEL_POINTER 0xC0
#define DNS_POINTER_MASK  0x3FFF /* the 14-bit offset of a pointer */
#define DNS_POINTER_LEN   2
/* The pointer an answer's owner name is: to the question's name, which
 * starts right after the header. */
#define DNS_POINTER_QNAME (0xC000 | DNS_HEADER_LEN)

/* After a question's name: QTYPE, QCLASS. */
#define DNS_QUESTION_FIXED 4
/* After a record's name: TYPE, CLASS, TTL, RDLENGTH (offsets within). */
#define DNS_RR_FIXED     10
#define DNS_RR_OFF_TYPE  0
#define DNS_RR_OFF_CLASS 2
#define DNS_RR_OFF_TTL   4
#define DNS_RR_OFF_RDLEN 8
/* An OPT record: the root name (one zero byte), then the fixed part. */
#define DNS_ROOT_LEN 1
#define DNS_OPT_LEN  (DNS_ROOT_LEN + DNS_RR_FIXED)
/* An EDNS option: OPTION-CODE, OPTION-LENGTH (RFC 6891 §6.1.2). */
#define DNS_OPTION_HDR     4
#define DNS_OPTION_OFF_LEN 2

/* The OPT record's TTL field (RFC 6891 §6.1.3): EXTENDED-RCODE (8 bits),
 * VERSION (8), DO (1), Z (15).  The extended rcode is the upper 8 bits of
 * a 12-bit rcode whose lower 4 are the header's. */
#define DNS_OPT_EXT_SHIFT     24
#define DNS_OPT_VERSION_SHIFT 16
#define DNS_OPT_BYTE_MASK     0xFF
#define DNS_OPT_DO            0x8000
#define DNS_RCODE_HDR_BITS    4
#define DNS_RCODE_HDR_MAX     DNS_F_RCODE_MASK
#define DNS_RCODE_MAX         0xFFF

/* RDATA lengths of the two address types, and the IPv4-mapped prefix
 * (::ffff:0:0/96, RFC 4291 §2.5.5.2) an IPv4 address is stored under. */
#define DNS_A_LEN          4
#define DNS_AAAA_LEN       16
#define DNS_V4MAPPED_ZEROS 10 /* bytes 0..9 are zero */
#define DNS_V4MAPPED_LEN   12 /* then 0xff 0xff; the address is 12..15 */
#define DNS_V4MAPPED_FF    0xFF

/* Read and write big-endian fields; the caller has checked the room. */
static inline uint16_t dns_get16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t dns_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint8_t *dns_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *dns_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
    return p + 4;
}

/* True when a holds an IPv4 address as ::ffff:a.b.c.d. */
static inline bool dns_is_v4mapped(const uint8_t a[16])
{
    for (size_t i = 0; i < DNS_V4MAPPED_ZEROS; i++)
        if (a[i] != 0)
            return false;
    return a[DNS_V4MAPPED_ZEROS] == DNS_V4MAPPED_FF && a[DNS_V4MAPPED_ZEROS + 1] == DNS_V4MAPPED_FF;
}

/*
 * The text form of an uncompressed wire name wire[0..wire_len), which the
 * caller has checked: labels of 1..63 bytes, the root label last, at most
 * DNS_NAME_WIRE_MAX bytes.  Writes labels joined by '.', bytes verbatim,
 * and a NUL into text (room: DNS_NAME_TEXT_MAX + 1); returns the text's
 * length.  *plain (if not NULL) says every byte is [A-Za-z0-9_-].
 */
size_t dns_name_text(const uint8_t *wire, size_t wire_len, char *text, bool *plain);

#endif
