/*
 * words.c - the mnemonics of record types and response codes, for log
 * lines and metrics labels (IANA "Domain Name System (DNS) Parameters").
 */
#include <stdint.h>
#include <stdio.h>

#include "dns_int.h"

/* The room dns_type_str's buf has: "TYPE65535" and its NUL fit. */
#define DNS_TYPE_BUF 12

/* See dns.h: the enum's types by name; others as RFC 3597 §5 writes an
 * unknown type, "TYPE" and the number. */
const char *dns_type_str(uint16_t type, char buf[DNS_TYPE_BUF])
{
    switch (type) {
    case DNS_T_A: return "A";
    case DNS_T_NS: return "NS";
    case DNS_T_CNAME: return "CNAME";
    case DNS_T_SOA: return "SOA";
    case DNS_T_NULL: return "NULL";
    case DNS_T_PTR: return "PTR";
    case DNS_T_MX: return "MX";
    case DNS_T_TXT: return "TXT";
    case DNS_T_AAAA: return "AAAA";
    case DNS_T_SRV: return "SRV";
    case DNS_T_OPT: return "OPT";
    case DNS_T_SVCB: return "SVCB";
    case DNS_T_HTTPS: return "HTTPS";
    case DNS_T_AXFR: return "AXFR";
    case DNS_T_ANY: return "ANY";
    }
    snprintf(buf, DNS_TYPE_BUF, "TYPE%u", (unsigned)type);
    return buf;
}

/* See dns.h: the rcodes we send by name; "UNKNOWN" for any other. */
const char *dns_rcode_str(int rcode)
{
    switch (rcode) {
    case DNS_RC_NOERROR: return "NOERROR";
    case DNS_RC_FORMERR: return "FORMERR";
    case DNS_RC_SERVFAIL: return "SERVFAIL";
    case DNS_RC_NXDOMAIN: return "NXDOMAIN";
    case DNS_RC_NOTIMP: return "NOTIMP";
    case DNS_RC_REFUSED: return "REFUSED";
    case DNS_RC_BADVERS: return "BADVERS";
    }
    return "UNKNOWN";
}
