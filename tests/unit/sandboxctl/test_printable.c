/* test_printable.c - printable.c: what sandboxctl prints of text someone
 * else chose.  The oracle is written apart from the code: the code points
 * are encoded to UTF-8 here by hand, and which ones stay is the Unicode
 * general category Cc (U+0000..U+001F, U+007F..U+009F) turned around. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "printable.h"
#include "tap.h"

/* Each byte value alone: only 0x20..0x7e stay. */
static void test_every_byte(void)
{
    int bad = 0;

    for (unsigned c = 1; c < 256; c++) {
        char s[2] = {(char)c, '\0'};
        sbx_printable(s);
        char want = c >= 0x20 && c <= 0x7e ? (char)c : '?';
        if (s[0] != want && bad++ < 5)
            diag("byte 0x%02x came out as 0x%02x", c, (unsigned char)s[0]);
    }
    ok(bad == 0, "each byte value alone: 0x20..0x7e stay, every other is '?'");
}

/* Every code point U+0001..U+FFFF (surrogates aside) in UTF-8, written by
 * hand here: controls become '?' per byte, the rest stay. */
static void test_every_code_point(void)
{
    int bad = 0;

    for (unsigned cp = 1; cp <= 0xffff; cp++) {
        unsigned char s[4] = {0};
        size_t n;
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        if (cp < 0x80) {
            s[0] = (unsigned char)cp, n = 1;
        } else if (cp < 0x800) {
            s[0] = (unsigned char)(0xc0 | cp >> 6), s[1] = (unsigned char)(0x80 | (cp & 0x3f)),
            n = 2;
        } else {
            s[0] = (unsigned char)(0xe0 | cp >> 12);
            s[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
            s[2] = (unsigned char)(0x80 | (cp & 0x3f));
            n = 3;
        }
        unsigned char orig[4];
        memcpy(orig, s, sizeof s);
        sbx_printable((char *)s);
        bool control = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
        bool kept = memcmp(s, orig, n) == 0;
        bool all_q = true;
        for (size_t i = 0; i < n; i++)
            all_q = all_q && s[i] == '?';
        if ((control ? !all_q : !kept) && bad++ < 5)
            diag("U+%04X: %02x %02x %02x", cp, s[0], s[1], s[2]);
    }
    ok(bad == 0, "U+0001..U+FFFF: the C0 and C1 controls and DEL are '?', every other one stays");
}

static void test_examples(void)
{
    char a[] = "a\x1b[31mRED\x1b[0m.test";
    sbx_printable(a);
    ok(strcmp(a, "a?[31mRED?[0m.test") == 0, "an escape sequence: %s", a);
    char b[] = "x\xc2\x9b"
               "2Jy"; /* U+009B, the 8-bit CSI */
    sbx_printable(b);
    ok(strcmp(b, "x??2Jy") == 0, "the 8-bit CSI (U+009B) too: %s", b);
    char c[] = "\xff\xfe caf\xc3\xa9 \xe2\x82";
    sbx_printable(c);
    ok(strcmp(c, "?? caf\xc3\xa9 ??") == 0, "bytes that are not UTF-8 are '?', UTF-8 stays: %s", c);
    char d[] = "one\ntwo\r\tthree\n";
    sbx_printable(d);
    ok(strcmp(d, "one?two??three?") == 0, "one line: line breaks and tabs are '?' too");
    char e[] = "one\ntwo\r\x1b\n";
    sbx_printable_lines(e);
    ok(strcmp(e, "one\ntwo??\n") == 0, "several lines: the line feed stays, nothing else");
}

static void test_json(void)
{
    json_t *o = json_object();
    json_object_set_new(o, "host", json_string("a\x1b]0;t\x07.test"));
    json_object_set_new(o, "nul",
                        json_stringn("a\0\x1b"
                                     "b",
                                     4));
    json_object_set_new(o, "n", json_integer(1));

    const char *h = sbx_printable_get(o, "host");
    ok(h && strcmp(h, "a?]0;t?.test") == 0, "a JSON member: %s", h ? h : "(null)");
    ok(strcmp(json_string_value(json_object_get(o, "host")), "a?]0;t?.test") == 0,
       "changed in the object itself");
    const char *z = sbx_printable_get(o, "nul");
    ok(z && json_string_length(json_object_get(o, "nul")) == 4 && memcmp(z, "a??b", 4) == 0,
       "a NUL inside a JSON string is '?': nothing after it is hidden");
    ok(sbx_printable_get(o, "n") == NULL && sbx_printable_get(o, "none") == NULL,
       "not a string, or absent: NULL");
    json_decref(o);
}

int main(void)
{
    test_every_byte();
    test_every_code_point();
    test_examples();
    test_json();
    return tap_done();
}
