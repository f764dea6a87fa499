/*
 * test_utf8.c - px_utf8_seq() and px_utf8_valid() (proxy/utf8.h): each
 * edge of RFC 3629 section 3 by hand, then every 1-, 2- and 3-byte input and
 * every 4-byte input of continuation bytes against an independent encoder:
 * exactly the shortest encodings of the code points outside the surrogates
 * are accepted.
 */
#include <stdio.h>
#include <string.h>

#include "tap.h"
#include "utf8.h"

/* A byte string literal and its length. */
#define S(lit) (const unsigned char *)(lit), sizeof(lit) - 1

/* The shortest UTF-8 form of cp (RFC 3629 section 3): its length. */
static size_t encode(unsigned cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

static void test_edges(void)
{
    static const struct {
        const char *what;
        const unsigned char *s;
        size_t n, want;
    } cases[] = {
        {"U+0000", S("\x00"), 1},
        {"U+007F, the last 1-byte form", S("\x7f"), 1},
        {"U+0080, the first 2-byte form", S("\xc2\x80"), 2},
        {"U+07FF, the last 2-byte form", S("\xdf\xbf"), 2},
        {"U+0800, the first 3-byte form", S("\xe0\xa0\x80"), 3},
        {"U+D7FF, just below the surrogates", S("\xed\x9f\xbf"), 3},
        {"U+E000, just above the surrogates", S("\xee\x80\x80"), 3},
        {"U+FFFF, the last 3-byte form", S("\xef\xbf\xbf"), 3},
        {"U+10000, the first 4-byte form", S("\xf0\x90\x80\x80"), 4},
        {"U+1F600", S("\xf0\x9f\x98\x80"), 4},
        {"U+10FFFF, the last code point", S("\xf4\x8f\xbf\xbf"), 4},
        {"a 2-byte form followed by more bytes", S("\xc3\xa9xyz"), 2},
        {"overlong '/' in 2 bytes (C0 AF)", S("\xc0\xaf"), 0},
        {"overlong U+007F in 2 bytes (C1 BF)", S("\xc1\xbf"), 0},
        {"overlong U+0000 in 3 bytes", S("\xe0\x80\x80"), 0},
        {"overlong U+07FF in 3 bytes", S("\xe0\x9f\xbf"), 0},
        {"overlong U+0000 in 4 bytes", S("\xf0\x80\x80\x80"), 0},
        {"overlong U+FFFF in 4 bytes", S("\xf0\x8f\xbf\xbf"), 0},
        {"U+D800, the first surrogate", S("\xed\xa0\x80"), 0},
        {"U+DBFF/U+DC00, a surrogate pair in CESU-8", S("\xed\xaf\xbf\xed\xb0\x80"), 0},
        {"U+DFFF, the last surrogate", S("\xed\xbf\xbf"), 0},
        {"U+110000, past the last code point", S("\xf4\x90\x80\x80"), 0},
        {"F5, a lead only past U+10FFFF", S("\xf5\x80\x80\x80"), 0},
        {"F8, a 5-byte lead", S("\xf8\x88\x80\x80\x80"), 0},
        {"FF", S("\xff"), 0},
        {"a lone continuation byte 80", S("\x80"), 0},
        {"a lone continuation byte BF", S("\xbf"), 0},
        {"a 2-byte lead at the end", S("\xc3"), 0},
        {"a 3-byte form cut after 2 bytes", S("\xe2\x82"), 0},
        {"a 4-byte form cut after 3 bytes", S("\xf0\x9f\x98"), 0},
        {"a 2-byte lead before ASCII", S("\xc3("), 0},
        {"a 3-byte form with ASCII second", S("\xe2(\xa1"), 0},
        {"a 3-byte form with ASCII third", S("\xe2\x82("), 0},
        {"a 4-byte form with ASCII third", S("\xf0\x9f(\x80"), 0},
        {"a 4-byte form with a lead as fourth", S("\xf0\x9f\x98\xc3"), 0},
        {"nothing (n 0)", (const unsigned char *)"\xc3\xa9", 0, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ok(px_utf8_seq(cases[i].s, cases[i].n) == cases[i].want, "seq: %s: %zu", cases[i].what,
           cases[i].want);
    /* n bounds the read: a valid form is not taken when n cuts it. */
    ok(px_utf8_seq((const unsigned char *)"\xf0\x9f\x98\x80", 3) == 0 &&
           px_utf8_seq((const unsigned char *)"\xe2\x82\xac", 2) == 0,
       "seq: a valid form cut by n is 0");
}

static void test_valid(void)
{
    /* Octal escapes where a letter follows: a hex escape would take it. */
    ok(px_utf8_valid(S("")), "valid: the empty string");
    ok(px_utf8_valid(S("example.com")), "valid: ASCII");
    ok(px_utf8_valid(S("b\303\274cher.example \xe2\x82\xac \xf0\x9f\x98\x80")),
       "valid: 2-, 3- and 4-byte forms among ASCII");
    ok(!px_utf8_valid(S("b\303\274cher\xc3")), "valid: not with a lead at the end");
    ok(!px_utf8_valid(S("ab\200cd")), "valid: not with a lone continuation byte");
    ok(!px_utf8_valid(S("x\xed\xa0\x80y")), "valid: not with a surrogate");
    ok(!px_utf8_valid(S("x\xc0\xafy")), "valid: not with an overlong form");
    ok(px_utf8_valid(S("a\000b")), "valid: NUL is U+0000 (n says where the text ends)");
}

/* Every code point encodes to a form of its length that is taken. */
static void test_every_code_point(void)
{
    unsigned char b[4];
    unsigned bad = 0;

    for (unsigned cp = 0; cp <= 0x10ffff; cp++) {
        size_t len = encode(cp, b);
        size_t got = px_utf8_seq(b, len);
        bool surrogate = cp >= 0xd800 && cp <= 0xdfff;

        if (got != (surrogate ? 0 : len) && bad++ < 3)
            diag("U+%04X: %zu, expected %zu", cp, got, surrogate ? 0 : len);
    }
    ok(bad == 0, "every code point's shortest form is taken, every surrogate refused");
}

/* Counting: the encoder gives 0x80 one-byte, 0x780 two-byte, 0xF000 - 0x800
 * three-byte (less the 0x800 surrogates) and 0x100000 four-byte forms,
 * all different; if exactly as many inputs are taken as there are forms,
 * nothing but those forms is. */
static void test_counts(void)
{
    unsigned char b[4];
    unsigned long n1 = 0, n2 = 0, n3 = 0, n4 = 0;

    for (unsigned x = 0; x < 0x100; x++) {
        b[0] = (unsigned char)x;
        n1 += px_utf8_seq(b, 1) == 1;
    }
    for (unsigned x = 0; x < 0x10000; x++) {
        b[0] = (unsigned char)(x >> 8), b[1] = (unsigned char)x;
        n2 += px_utf8_seq(b, 2) == 2;
    }
    for (unsigned x = 0; x < 0x1000000; x++) {
        b[0] = (unsigned char)(x >> 16), b[1] = (unsigned char)(x >> 8), b[2] = (unsigned char)x;
        n3 += px_utf8_seq(b, 3) == 3;
    }
    /* Four bytes: every lead byte, then continuation bytes only (that a
     * non-continuation byte ends a form is shown above and by n3). */
    for (unsigned lead = 0; lead < 0x100; lead++)
        for (unsigned x = 0; x < 0x40000; x++) {
            b[0] = (unsigned char)lead;
            b[1] = (unsigned char)(0x80 | (x >> 12 & 0x3f));
            b[2] = (unsigned char)(0x80 | (x >> 6 & 0x3f));
            b[3] = (unsigned char)(0x80 | (x & 0x3f));
            n4 += px_utf8_seq(b, 4) == 4;
        }
    ok(n1 == 0x80, "1 byte: exactly the 128 ASCII bytes are taken (%lu)", n1);
    ok(n2 == 0x800 - 0x80, "2 bytes: exactly the 1920 forms of U+0080..U+07FF (%lu)", n2);
    ok(n3 == 0x10000 - 0x800 - 0x800,
       "3 bytes: exactly the 61440 forms of U+0800..U+FFFF but the surrogates (%lu)", n3);
    ok(n4 == 0x100000, "4 bytes: exactly the 2^20 forms of U+10000..U+10FFFF (%lu)", n4);
}

int main(void)
{
    test_edges();
    test_valid();
    test_every_code_point();
    test_counts();
    return tap_done();
}
