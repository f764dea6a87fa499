/*
 * host.c - the one host normalization every rule and every decision uses.
 *
 * A host is a DNS name (RFC 1123 §2.1 LDH labels; IDN only in its ASCII
 * "xn--" form, RFC 5891), an IPv4 address in dotted-quad decimal, or an IPv6
 * address in brackets (RFC 3986 §3.2.2).  Everything else is rejected rather
 * than guessed at: inet_aton()-style forms such as 2130706433, 0x7f.1 or
 * 0177.0.0.1 name 127.0.0.1 to some parsers and a DNS name to others, and a
 * proxy that guesses differently from the origin's resolver is a bypass.
 */
#include <arpa/inet.h>
#include <string.h>

#include "policy.h"
#include "policy_int.h"

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_ldh(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || c == '-';
}

static unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* A strict dotted quad: four decimal parts 0..255, no leading zeros (a
 * leading zero means octal to inet_aton). */
static bool parse_ipv4(const char *s, size_t len, uint8_t out[4])
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        if (part > 0) {
            if (i >= len || s[i] != '.')
                return false;
            i++;
        }
        size_t start = i;
        unsigned v = 0;
        while (i < len && is_digit((unsigned char)s[i]) && i - start < 3)
            v = v * 10 + (unsigned)(s[i++] - '0');
        if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
            return false;
        out[part] = (uint8_t)v;
    }
    return i == len;
}

static void v4_mapped(const uint8_t v4[4], uint8_t out[16])
{
    memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    memcpy(out + 12, v4, 4);
}

bool policy_addr_parse(const char *s, size_t len, uint8_t out[16])
{
    uint8_t v4[4];
    char buf[INET6_ADDRSTRLEN + 1];

    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    } else if (parse_ipv4(s, len, v4)) {
        v4_mapped(v4, out);
        return true;
    }
    if (len == 0 || len >= sizeof(buf) || memchr(s, '%', len) != NULL)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, out) == 1;
}

const char *policy_addr_text(const uint8_t addr[16], char *buf, size_t size)
{
    static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (memcmp(addr, v4mapped, 12) == 0)
        inet_ntop(AF_INET, addr + 12, buf, (socklen_t)size);
    else
        inet_ntop(AF_INET6, addr, buf, (socklen_t)size);
    return buf;
}

/* "[" RFC 5952 text "]" into h->text.  An IPv4-mapped address written as
 * IPv6 stays IPv6 (it is what the client asked for). */
static enum policy_host_error normalize_ipv6(const char *in, size_t len, struct policy_host *h)
{
    char buf[INET6_ADDRSTRLEN + 1];

    /* Any RFC 4291 text form is read, and written back in RFC 5952's one
     * canonical form (mixed notation for IPv4-mapped addresses).  Zone IDs
     * (RFC 6874) name an interface of the client, not a destination. */
    if (len < 3 || in[len - 1] != ']' || len - 2 >= sizeof(buf) || memchr(in, '%', len))
        return POLICY_HOST_BAD_IPV6;
    memcpy(buf, in + 1, len - 2);
    buf[len - 2] = '\0';
    if (inet_pton(AF_INET6, buf, h->addr) != 1)
        return POLICY_HOST_BAD_IPV6;
    if (inet_ntop(AF_INET6, h->addr, buf, sizeof(buf)) == NULL)
        return POLICY_HOST_BAD_IPV6;
    h->kind = POLICY_HOST_IPV6;
    h->len = (size_t)snprintf(h->text, sizeof(h->text), "[%s]", buf);
    return POLICY_HOST_OK;
}

/* True when the last label reads as a number to some parser: all digits,
 * or 0x followed by hex digits.  RFC 3696 §2: a TLD is never all-numeric. */
static bool numeric_label(const char *label, size_t len)
{
    size_t i = 0;
    if (len >= 2 && label[0] == '0' && label[1] == 'x') {
        for (i = 2; i < len; i++) {
            unsigned char c = (unsigned char)label[i];
            if (!is_digit(c) && !(c >= 'a' && c <= 'f'))
                return false;
        }
        return true;
    }
    for (; i < len; i++)
        if (!is_digit((unsigned char)label[i]))
            return false;
    return true;
}

static enum policy_host_error normalize_name(const char *in, size_t len, struct policy_host *h)
{
    size_t label = 0; /* start of the current label in h->text */

    for (size_t i = 0; i < len; i++) {
        unsigned char c = lower((unsigned char)in[i]);
        if (c == '.') {
            if (i == label)
                return POLICY_HOST_EMPTY_LABEL;
            if (h->text[i - 1] == '-')
                return POLICY_HOST_HYPHEN;
            label = i + 1;
        } else if (!is_ldh(c)) {
            return POLICY_HOST_BAD_BYTE;
        } else if (i - label >= 63) {
            return POLICY_HOST_TOO_LONG;
        } else if (c == '-' && i == label) {
            return POLICY_HOST_HYPHEN;
        }
        h->text[i] = (char)c;
    }
    if (label == len)
        return POLICY_HOST_EMPTY_LABEL; /* "example.com.." */
    if (h->text[len - 1] == '-')
        return POLICY_HOST_HYPHEN;
    if (numeric_label(h->text + label, len - label))
        return POLICY_HOST_NUMERIC;
    h->text[len] = '\0';
    h->len = len;
    h->kind = POLICY_HOST_NAME;
    return POLICY_HOST_OK;
}

enum policy_host_error policy_host_normalize(const char *in, size_t len, struct policy_host *h)
{
    uint8_t v4[4];
    bool root_dot = false;

    memset(h, 0, sizeof(*h));
    if (len > 0 && in[0] == '[')
        return normalize_ipv6(in, len, h);
    if (len > 0 && in[len - 1] == '.') {
        len--; /* the root label: "example.com." is "example.com" */
        root_dot = true;
    }
    if (len == 0)
        return POLICY_HOST_EMPTY;
    if (len > POLICY_HOST_MAX)
        return POLICY_HOST_TOO_LONG;
    if (parse_ipv4(in, len, v4)) {
        if (root_dot) /* "1.2.3.4." is a name to a resolver, an address to us */
            return POLICY_HOST_NUMERIC;
        v4_mapped(v4, h->addr);
        memcpy(h->text, in, len);
        h->text[len] = '\0';
        h->len = len;
        h->kind = POLICY_HOST_IPV4;
        return POLICY_HOST_OK;
    }
    return normalize_name(in, len, h);
}

const char *policy_host_error_str(enum policy_host_error e)
{
    switch (e) {
    case POLICY_HOST_OK: return "valid host";
    case POLICY_HOST_EMPTY: return "empty host";
    case POLICY_HOST_TOO_LONG: return "host over 253 bytes or a label over 63";
    case POLICY_HOST_BAD_BYTE:
        return "byte not allowed in a host name (letters, digits, '-', '.'; IDN as xn--)";
    case POLICY_HOST_EMPTY_LABEL: return "empty label in host name";
    case POLICY_HOST_HYPHEN: return "label starts or ends with '-'";
    case POLICY_HOST_NUMERIC: return "numeric host that is not a dotted-quad IPv4 address";
    case POLICY_HOST_BAD_IPV6: return "not one IPv6 address in brackets";
    }
    return "unknown host error";
}
