/*
 * test_host.c - policy_host_normalize(): every edge of docs/design.md's host
 * rules, idempotence, and the address / time parsers beside it.
 */
#include <string.h>

#include "policy.h"
#include "tap.h"

struct good {
    const char *in, *out;
    enum policy_host_kind kind;
};

static const struct good goods[] = {
    {"example.com", "example.com", POLICY_HOST_NAME},
    {"Example.COM", "example.com", POLICY_HOST_NAME},
    {"example.com.", "example.com", POLICY_HOST_NAME},
    {"a", "a", POLICY_HOST_NAME},
    {"localhost", "localhost", POLICY_HOST_NAME},
    {"xn--bcher-kva.example", "xn--bcher-kva.example", POLICY_HOST_NAME},
    {"XN--BCHER-KVA.Example", "xn--bcher-kva.example", POLICY_HOST_NAME},
    {"a-b.c-d.e", "a-b.c-d.e", POLICY_HOST_NAME},
    {"1password.com", "1password.com", POLICY_HOST_NAME},
    {"123.example", "123.example", POLICY_HOST_NAME},
    {"0x7f.example", "0x7f.example", POLICY_HOST_NAME},
    {"example.0xg", "example.0xg", POLICY_HOST_NAME}, /* not hex: a name */
    {"192.0.2.1", "192.0.2.1", POLICY_HOST_IPV4},
    {"0.0.0.0", "0.0.0.0", POLICY_HOST_IPV4},
    {"255.255.255.255", "255.255.255.255", POLICY_HOST_IPV4},
    {"[::1]", "[::1]", POLICY_HOST_IPV6},
    {"[2001:DB8::1]", "[2001:db8::1]", POLICY_HOST_IPV6},
    {"[2001:0db8:0000:0000:0000:0000:0000:0001]", "[2001:db8::1]", POLICY_HOST_IPV6},
    {"[::ffff:7f00:1]", "[::ffff:127.0.0.1]", POLICY_HOST_IPV6},
    {"[::FFFF:127.0.0.1]", "[::ffff:127.0.0.1]", POLICY_HOST_IPV6},
};

struct bad {
    const char *in;
    enum policy_host_error err;
};

static const struct bad bads[] = {
    {"", POLICY_HOST_EMPTY},
    {".", POLICY_HOST_EMPTY},
    {"example..com", POLICY_HOST_EMPTY_LABEL},
    {".example.com", POLICY_HOST_EMPTY_LABEL},
    {"example.com..", POLICY_HOST_EMPTY_LABEL},
    {"-example.com", POLICY_HOST_HYPHEN},
    {"example-.com", POLICY_HOST_HYPHEN},
    {"example.com-", POLICY_HOST_HYPHEN},
    {"exa_mple.com", POLICY_HOST_BAD_BYTE},
    {"exa mple.com", POLICY_HOST_BAD_BYTE},
    {"example.com:443", POLICY_HOST_BAD_BYTE},
    {"b\xc3\xbc"
     "cher.example",
     POLICY_HOST_BAD_BYTE},
    {"*.example.com", POLICY_HOST_BAD_BYTE},
    {"2130706433", POLICY_HOST_NUMERIC},
    {"0x7f.1", POLICY_HOST_NUMERIC},
    {"0x7f000001", POLICY_HOST_NUMERIC},
    {"0177.0.0.1", POLICY_HOST_NUMERIC},
    {"127.1", POLICY_HOST_NUMERIC},
    {"127.0.1", POLICY_HOST_NUMERIC},
    {"127.0.0.01", POLICY_HOST_NUMERIC},
    {"256.0.0.1", POLICY_HOST_NUMERIC},
    {"1.2.3.4.5", POLICY_HOST_NUMERIC},
    {"1.2.3.4.", POLICY_HOST_NUMERIC},
    {"example.123", POLICY_HOST_NUMERIC},
    {"example.0x1f", POLICY_HOST_NUMERIC},
    {"::1", POLICY_HOST_BAD_BYTE},
    {"[::1", POLICY_HOST_BAD_IPV6},
    {"[]", POLICY_HOST_BAD_IPV6},
    {"[1.2.3.4]", POLICY_HOST_BAD_IPV6},
    {"[fe80::1%eth0]", POLICY_HOST_BAD_IPV6},
    {"[fe80::1%25eth0]", POLICY_HOST_BAD_IPV6},
    {"[::1]x", POLICY_HOST_BAD_IPV6},
    {"[gggg::1]", POLICY_HOST_BAD_IPV6},
};

static void test_lengths(void)
{
    char name[300];
    struct policy_host h;

    memset(name, 'a', 63);
    memcpy(name + 63, ".com", 5);
    ok(policy_host_normalize(name, 67, &h) == POLICY_HOST_OK && h.len == 67,
       "a 63-byte label is accepted");
    memset(name, 'a', 64);
    memcpy(name + 64, ".com", 5);
    ok(policy_host_normalize(name, 68, &h) == POLICY_HOST_TOO_LONG, "a 64-byte label is refused");

    /* 253 bytes: 63.63.63.61 */
    memset(name, 'b', 253);
    name[63] = name[127] = name[191] = '.';
    ok(policy_host_normalize(name, 253, &h) == POLICY_HOST_OK && h.len == 253,
       "a 253-byte name is accepted");
    name[253] = '.';
    ok(policy_host_normalize(name, 254, &h) == POLICY_HOST_OK && h.len == 253,
       "a 253-byte name with its root dot is accepted, without the dot");
    name[253] = 'b';
    ok(policy_host_normalize(name, 254, &h) == POLICY_HOST_TOO_LONG, "a 254-byte name is refused");
    ok(policy_host_normalize("a\0b.com", 7, &h) == POLICY_HOST_BAD_BYTE,
       "a NUL inside the name is refused");
}

static void test_addr_and_time(void)
{
    uint8_t a[16];
    int64_t t;
    static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};

    ok(policy_addr_parse("192.0.2.1", 9, a) && memcmp(a, v4, 16) == 0,
       "addr: IPv4 is held IPv4-mapped");
    ok(policy_addr_parse("[2001:db8::1]", 13, a) && a[0] == 0x20 && a[15] == 1,
       "addr: IPv6 in brackets");
    ok(policy_addr_parse("2001:db8::1", 11, a), "addr: IPv6 without brackets");
    ok(!policy_addr_parse("0177.0.0.1", 10, a), "addr: octal IPv4 refused");
    ok(!policy_addr_parse("fe80::1%eth0", 12, a), "addr: zone refused");
    ok(!policy_addr_parse("example.com", 11, a), "addr: a name is not an address");

    ok(policy_time_parse("1970-01-01T00:00Z", 17, &t) && t == 0, "time: the epoch");
    ok(policy_time_parse("2026-12-01T00:00Z", 17, &t) && t == 1796083200,
       "time: 2026-12-01T00:00Z is 1796083200");
    ok(policy_time_parse("2026-12-01T01:00:00+01:00", 25, &t) && t == 1796083200,
       "time: a +01:00 offset");
    ok(policy_time_parse("2026-11-30T23:00:00.250-01:00", 29, &t) && t == 1796083200,
       "time: a fraction and a -01:00 offset");
    ok(policy_time_parse("2024-02-29T12:00:00Z", 20, &t), "time: leap day 2024");
    ok(!policy_time_parse("2026-02-29T12:00:00Z", 20, &t), "time: no 29 Feb 2026");
    ok(!policy_time_parse("2026-12-01", 10, &t), "time: a date alone is refused");
    ok(!policy_time_parse("2026-12-01T24:00Z", 17, &t), "time: hour 24 refused");
    ok(!policy_time_parse("2026-12-01T00:00", 16, &t), "time: no zone is refused");
    ok(!policy_time_parse("2026-12-01T00:00Zjunk", 21, &t), "time: trailing bytes refused");
}

int main(void)
{
    struct policy_host h, again;

    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
        const struct good *g = &goods[i];
        enum policy_host_error e = policy_host_normalize(g->in, strlen(g->in), &h);
        ok(e == POLICY_HOST_OK && h.kind == g->kind && strcmp(h.text, g->out) == 0 &&
               h.len == strlen(g->out),
           "'%s' normalizes to '%s' (got %s '%s')", g->in, g->out, policy_host_error_str(e),
           h.text);
        e = policy_host_normalize(h.text, h.len, &again);
        ok(e == POLICY_HOST_OK && strcmp(again.text, h.text) == 0 &&
               memcmp(again.addr, h.addr, 16) == 0,
           "'%s' normalizes to itself", h.text);
    }
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        const struct bad *b = &bads[i];
        enum policy_host_error e = policy_host_normalize(b->in, strlen(b->in), &h);
        ok(e == b->err, "'%s' is refused: %s (got: %s)", b->in, policy_host_error_str(b->err),
           policy_host_error_str(e));
    }
    test_lengths();
    test_addr_and_time();
    return tap_done();
}
