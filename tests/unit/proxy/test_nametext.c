/*
 * test_nametext.c - nametext.c: a name as DNS presentation text (RFC 1035
 * section 5.1).  The oracle is written apart from the code: which bytes
 * stay is isgraph() in the C locale minus the backslash, and an escape is
 * printf's "\%03u"; a decoder of presentation text (below) reads every
 * result back to the bytes it came from.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nametext.h"
#include "tap.h"

/* What byte c must become, by the oracle's method. */
static void expected(unsigned c, char *out, size_t len)
{
    if (isgraph((int)c) && c != '\\')
        snprintf(out, len, "%c", (char)c);
    else
        snprintf(out, len, "\\%03u", c);
}

static void test_every_byte(void)
{
    int bad = 0;
    char got[8], want[8], all[256], all_got[PX_NAMETEXT_MAX * 2], all_want[PX_NAMETEXT_MAX * 2];
    size_t k = 0;

    for (unsigned c = 0; c < 256; c++) {
        char one = (char)c;
        size_t n = px_nametext_from_text(&one, 1, got, sizeof(got));
        expected(c, want, sizeof(want));
        if (n != strlen(want) || strcmp(got, want) != 0) {
            if (bad++ < 5)
                diag("byte %u: got '%s', want '%s'", c, got, want);
        }
        all[c] = (char)c;
        k += (size_t)snprintf(all_want + k, sizeof(all_want) - k, "%s", want);
    }
    ok(bad == 0, "each of the 256 byte values alone: itself when printable, else \\DDD");
    size_t n = px_nametext_from_text(all, sizeof(all), all_got, sizeof(all_got));
    ok(n == k && strcmp(all_got, all_want) == 0, "all 256 in one name: %zu bytes of text", n);
    bool printable = true;
    for (size_t i = 0; i < n; i++)
        printable = printable && all_got[i] > ' ' && all_got[i] < 0x7f;
    ok(printable, "the text is printable ASCII only (no space, no control byte)");
}

static void test_examples(void)
{
    char got[PX_NAMETEXT_MAX + 1];
    const char *esc = "a\x1b[31mRED\x1b[0m.test";

    px_nametext_from_text(esc, strlen(esc), got, sizeof(got));
    ok(strcmp(got, "a\\027[31mRED\\027[0m.test") == 0, "ESC sequences: %s", got);
    px_nametext_from_text("\xff\xfe.test", 7, got, sizeof(got));
    ok(strcmp(got, "\\255\\254.test") == 0, "0xff 0xfe: %s", got);
    px_nametext_from_text("a\\b", 3, got, sizeof(got));
    ok(strcmp(got, "a\\092b") == 0, "a backslash is \\092: %s", got);
    px_nametext_from_text("a\0b", 3, got, sizeof(got));
    ok(strcmp(got, "a\\000b") == 0, "a NUL in the middle is \\000, not the end: %s", got);
    px_nametext_from_text("github.com", 10, got, sizeof(got));
    ok(strcmp(got, "github.com") == 0, "a plain name is itself");

    static const unsigned char wire[] = {3, 'a', '.', 'b', 2, 0x1b, 0xff, 4, 't', 'e', 's', 't', 0};
    px_nametext_from_wire(wire, sizeof(wire), got, sizeof(got));
    ok(strcmp(got, "a\\.b.\\027\\255.test") == 0, "wire: a '.' inside a label is \\.: %s", got);
    static const unsigned char root[] = {0};
    px_nametext_from_wire(root, sizeof(root), got, sizeof(got));
    ok(strcmp(got, ".") == 0, "wire: the root is '.'");
    static const unsigned char cut[] = {5, 'a', 'b'};
    px_nametext_from_wire(cut, sizeof(cut), got, sizeof(got));
    ok(strcmp(got, "ab") == 0, "wire: a label cut short ends with the bytes there are");
}

static void test_cut(void)
{
    char got[8];
    size_t n;

    n = px_nametext_from_text("ab\x01", 3, got, 5);
    ok(n == 2 && strcmp(got, "ab") == 0, "an escape that does not fit is left out whole (%s)", got);
    n = px_nametext_from_text("ab\x01", 3, got, 7);
    ok(n == 6 && strcmp(got, "ab\\001") == 0, "one that fits exactly stays (%s)", got);
    n = px_nametext_from_text("\x01z", 2, got, 4);
    ok(n == 0 && got[0] == '\0', "nothing after a left-out escape either");
    n = px_nametext_from_text("abc", 3, got, 1);
    ok(n == 0 && got[0] == '\0', "cap 1: the NUL only");
}

/* Presentation text back to wire form (the oracle's own reader): labels
 * split at unescaped dots, "\DDD" and "\X" decoded.  Returns the wire
 * length, or 0 when the text is not well-formed. */
static size_t decode(const char *t, unsigned char *wire, size_t cap)
{
    size_t w = 0, len_at = 0;

    if (strcmp(t, ".") == 0) {
        wire[0] = 0;
        return 1;
    }
    wire[w++] = 0;
    while (*t) {
        unsigned v;
        if (*t == '.') {
            len_at = w++;
            wire[len_at] = 0;
            t++;
            continue;
        }
        if (*t == '\\' && isdigit((unsigned char)t[1]) && sscanf(t + 1, "%3u", &v) == 1) {
            t += 4;
        } else if (*t == '\\' && t[1] != '\0') {
            v = (unsigned char)t[1];
            t += 2;
        } else {
            v = (unsigned char)*t++;
        }
        if (w >= cap - 1)
            return 0;
        wire[w++] = (unsigned char)v;
        wire[len_at]++;
    }
    wire[w++] = 0;
    return w;
}

/* Random wire names of random bytes: each reads back to itself. */
static void test_round_trip(void)
{
    unsigned seed = 1035;
    int same = 0, n = 20000;

    for (int i = 0; i < n; i++) {
        unsigned char wire[255], back[300];
        size_t w = 0, labels = 1 + (size_t)rand_r(&seed) % 6;
        for (size_t l = 0; l < labels; l++) {
            size_t len = 1 + (size_t)rand_r(&seed) % 20;
            wire[w++] = (unsigned char)len;
            for (size_t b = 0; b < len; b++) {
                unsigned r = (unsigned)rand_r(&seed);
                /* often a dot or a backslash, else any byte */
                wire[w++] = (unsigned char)(r % 5 == 0 ? '.' : r % 5 == 1 ? '\\' : r >> 8);
            }
        }
        wire[w++] = 0;
        char text[PX_NAMETEXT_MAX + 1];
        px_nametext_from_wire(wire, w, text, sizeof(text));
        size_t bn = decode(text, back, sizeof(back));
        if (bn == w && memcmp(back, wire, w) == 0)
            same++;
        else if (n - same == 1)
            diag("did not read back: %s", text);
    }
    ok(same == n, "%d random wire names: the text reads back to the same bytes (%d do)", n, same);
}

static void test_longest(void)
{
    unsigned char wire[255];
    char text[PX_NAMETEXT_MAX + 1];
    size_t w = 0;

    /* 4 labels of 63, 61 bytes of 0xff: 255 with the root; the longest text */
    for (int l = 0; l < 4; l++) {
        size_t len = l < 3 ? 63 : 61;
        wire[w++] = (unsigned char)len;
        memset(wire + w, 0xff, len);
        w += len;
    }
    wire[w++] = 0;
    size_t n = px_nametext_from_wire(wire, w, text, sizeof(text));
    ok(w == 255 && n == 250 * 4 + 3, "a 255-byte wire name of 0xff: %zu bytes of text, not cut", n);
    unsigned char raw[255];
    memset(raw, 0x01, sizeof(raw));
    n = px_nametext_from_text((const char *)raw, sizeof(raw), text, sizeof(text));
    ok(n == PX_NAMETEXT_MAX, "255 control bytes fill PX_NAMETEXT_MAX exactly (%zu)", n);
}

int main(void)
{
    test_every_byte();
    test_examples();
    test_cut();
    test_round_trip();
    test_longest();
    return tap_done();
}
