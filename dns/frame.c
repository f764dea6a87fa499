/*
 * frame.c - DNS over TCP (RFC 1035 §4.2.2, RFC 7766 §8): each message
 * preceded by its length, two bytes, most significant first.
 */
#include <stddef.h>
#include <stdint.h>

#include "dns_int.h"

/* The length prefix of a message on a TCP stream. */
#define DNS_TCP_PREFIX 2

/* See dns.h.  While the frame is incomplete *msg is NULL, *msg_len 0. */
size_t dns_tcp_frame(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *msg_len)
{
    *msg = NULL;
    *msg_len = 0;
    if (len < DNS_TCP_PREFIX)
        return 0;
    size_t n = dns_get16(buf);
    if (n > len - DNS_TCP_PREFIX)
        return 0;
    *msg = buf + DNS_TCP_PREFIX;
    *msg_len = n;
    return DNS_TCP_PREFIX + n;
}
