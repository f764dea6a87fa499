/*
 * name.c - a DNS name's text form: the wire labels joined by '.'.
 *
 * Why DNS_NAME_TEXT_MAX + 1 bytes always hold it: a name of k >= 1 labels
 * of lengths L1..Lk takes W = (L1 + ... + Lk) + k length octets + 1 root
 * octet on the wire, and T = (L1 + ... + Lk) + (k - 1) dots as text, so
 * T = W - 2.  W <= DNS_NAME_WIRE_MAX (255) gives T <= 253 =
 * DNS_NAME_TEXT_MAX; the NUL makes 254.  The root (k = 0, W = 1) is "",
 * T = 0.  A '.' inside a label is copied as one byte, like any other, so
 * it does not change the count.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dns_int.h"

_Static_assert(DNS_NAME_WIRE_MAX - 2 == DNS_NAME_TEXT_MAX, "text = wire - 2, see above");

/* True for the bytes a plain label holds: letters, digits, '-' and '_'. */
static bool plain_byte(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* See dns_int.h.  Stops at the root label, or at the end of the labels
 * a valid name can have before it: each length octet read becomes at most
 * one dot, so the text stays within DNS_NAME_TEXT_MAX even if the caller's
 * checks were wrong. */
size_t dns_name_text(const uint8_t *wire, size_t wire_len, char *text, bool *plain)
{
    size_t t = 0, w = 0;
    bool all_plain = true;

    if (wire_len > DNS_NAME_WIRE_MAX - DNS_ROOT_LEN)
        wire_len = DNS_NAME_WIRE_MAX - DNS_ROOT_LEN;
    while (w < wire_len && wire[w] != 0) {
        size_t label = wire[w++];
        if (t > 0)
            text[t++] = '.';
        for (size_t i = 0; i < label && w < wire_len; i++, w++) {
            all_plain = all_plain && plain_byte(wire[w]);
            text[t++] = (char)wire[w];
        }
    }
    text[t] = '\0';
    if (plain)
        *plain = all_plain;
    return t;
}
