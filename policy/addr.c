/*
 * addr.c - address ranges: CIDR parsing, membership, the default deny list,
 * and the country codes a `deny country` rule may name.
 *
 * Every address is held in 16 bytes; IPv4 as the IPv4-mapped IPv6 address
 * ::ffff:a.b.c.d (RFC 4291 §2.5.5.2), so one range list covers both families
 * and a mapped address can never slip past an IPv4 range.
 */
#include <string.h>

#include "policy_int.h"

bool parse_decimal(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (len == 0 || len > 10 || (s[0] == '0' && len > 1))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

static bool is_v4_mapped(const uint8_t a[16])
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(a, prefix, 12) == 0;
}

/* "192.0.2.0/24", "2001:db8::/32", "[2001:db8::1]", "192.0.2.7" (a single
 * address).  Host bits must be zero: "10.1.2.3/8" is a typo, not a range. */
bool cidr_parse(const char *s, size_t len, struct cidr *out, char *why, size_t whylen)
{
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    uint64_t plen;

    if (!policy_addr_parse(s, alen, out->addr)) {
        snprintf(why, whylen, "an IPv4 or IPv6 address");
        return false;
    }
    bool v4 = is_v4_mapped(out->addr) && memchr(s, ':', alen) == NULL;
    if (slash == NULL) {
        out->plen = 128;
        return true;
    }
    if (!parse_decimal(slash + 1, len - alen - 1, v4 ? 32 : 128, &plen)) {
        snprintf(why, whylen, "a prefix length of 0..%u after '/'", v4 ? 32 : 128);
        return false;
    }
    out->plen = (uint8_t)(v4 ? plen + 96 : plen);
    for (unsigned bit = out->plen; bit < 128; bit++) {
        if (out->addr[bit / 8] & (0x80 >> (bit % 8))) {
            snprintf(why, whylen, "a network address (host bits zero) for /%u", (unsigned)plen);
            return false;
        }
    }
    return true;
}

bool cidr_contains(const struct cidr *c, const uint8_t addr[16])
{
    unsigned full = c->plen / 8, rest = c->plen % 8;
    if (memcmp(c->addr, addr, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (c->addr[full] & mask) == (addr[full] & mask);
}

#define V4(a, b, c, d, len)                                                                        \
    {                                                                                              \
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d}, 96 + (len)                         \
    }

/* docs/design.md's default deny-range: what a sandbox must never reach through
 * the proxy, whatever a name resolves to.  IPv4 entries cover their mapped
 * forms by construction; NAT64 and 6to4 forms are checked by unwrapping
 * (see embedded_v4()).  SIIT's IPv4-translated ::ffff:0:a.b.c.d and
 * Teredo are denied whole, not unwrapped: a translator or Teredo relay on
 * the path would carry them on to an IPv4 host, and a sandbox needs no
 * service reachable only that way. */
static const struct cidr default_deny[] = {
    V4(0, 0, 0, 0, 8),                 /* "this network" (RFC 791) */
    V4(10, 0, 0, 0, 8),                /* private (RFC 1918) */
    V4(100, 64, 0, 0, 10),             /* shared address space, CGNAT (RFC 6598) */
    V4(127, 0, 0, 0, 8),               /* loopback */
    V4(169, 254, 0, 0, 16),            /* link-local, incl. 169.254.169.254 metadata */
    V4(172, 16, 0, 0, 12),             /* private (RFC 1918) */
    V4(192, 0, 0, 0, 24),              /* IETF protocol assignments (RFC 6890) */
    V4(192, 0, 2, 0, 24),              /* TEST-NET-1 */
    V4(192, 88, 99, 0, 24),            /* 6to4 relay anycast (deprecated) */
    V4(192, 168, 0, 0, 16),            /* private (RFC 1918) */
    V4(198, 18, 0, 0, 15),             /* benchmarking (RFC 2544) */
    V4(198, 51, 100, 0, 24),           /* TEST-NET-2 */
    V4(203, 0, 113, 0, 24),            /* TEST-NET-3 */
    V4(224, 0, 0, 0, 4),               /* multicast */
    V4(240, 0, 0, 0, 4),               /* reserved, incl. broadcast */
    {{0}, 96},                         /* ::/96: unspecified, loopback, IPv4-compatible */
    {{[8] = 0xff, [9] = 0xff}, 96},    /* ::ffff:0:0:0/96, SIIT (RFC 2765 §2.1) */
    {{0, 0x64, 0xff, 0x9b, 0, 1}, 48}, /* local-use NAT64 (RFC 8215) */
    {{0x01, 0x00}, 64},                /* discard-only (RFC 6666) */
    {{0x20, 0x01, 0, 0}, 32},          /* Teredo (RFC 4380 §2.6) */
    {{0x20, 0x01, 0x0d, 0xb8}, 32},    /* documentation */
    {{0x3f, 0xff}, 20},                /* documentation (RFC 9637) */
    {{0xfc}, 7},                       /* unique local (ULA) */
    {{0xfe, 0x80}, 10},                /* link-local */
    {{0xfe, 0xc0}, 10},                /* site-local (deprecated) */
    {{0xff}, 8},                       /* multicast */
};

size_t cidr_default_deny(const struct cidr **out)
{
    *out = default_deny;
    return sizeof(default_deny) / sizeof(default_deny[0]);
}

/* ISO 3166-1 alpha-2, as MaxMind's databases use them, plus XK (Kosovo,
 * user-assigned but used by MaxMind) and EU/AP (MaxMind's continental
 * registrations). */
static const char country_codes[] =
    "ADAEAFAGAIALAMAOAQARASATAUAWAXAZBABBBDBEBFBGBHBIBJBLBMBNBOBQBRBSBTBVBWBYBZ"
    "CACCCDCFCGCHCICKCLCMCNCOCRCUCVCWCXCYCZDEDJDKDMDODZECEEEGEHERESETFIFJFKFMFO"
    "FRGAGBGDGEGFGGGHGIGLGMGNGPGQGRGSGTGUGWGYHKHMHNHRHTHUIDIEILIMINIOIQIRISITJE"
    "JMJOJPKEKGKHKIKMKNKPKRKWKYKZLALBLCLILKLRLSLTLULVLYMAMCMDMEMFMGMHMKMLMMMNMO"
    "MPMQMRMSMTMUMVMWMXMYMZNANCNENFNGNINLNONPNRNUNZOMPAPEPFPGPHPKPLPMPNPRPSPTPW"
    "PYQARERORSRURWSASBSCSDSESGSHSISJSKSLSMSNSOSRSSSTSVSXSYSZTCTDTFTGTHTJTKTLTM"
    "TNTOTRTTTVTWTZUAUGUMUSUYUZVAVCVEVGVIVNVUWFWSYEYTZAZMZWXKEUAP";

bool country_code_known(const char *cc)
{
    for (const char *p = country_codes; p[0] != '\0'; p += 2)
        if (p[0] == cc[0] && p[1] == cc[1])
            return true;
    return false;
}
