/*
 * nametext.c - see nametext.h.  One byte at a time through put_byte(),
 * which both callers share: the text form and the wire form differ only
 * in what a '.' means.
 */
#include "nametext.h"

#include <stdbool.h>

#define ESCAPE_LEN 4 /* "\DDD" */

/* Where the text goes: out[0..cap), len written so far; full once an
 * escape did not fit (nothing more is written then). */
struct sink {
    char *out;
    size_t cap, len;
    bool full;
};

static void put(struct sink *k, const char *s, size_t n)
{
    if (k->full || n > k->cap - 1 - k->len) {
        k->full = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        k->out[k->len++] = s[i];
}

/* Byte c of a label: itself, or \DDD (RFC 1035 section 5.1). */
static void put_byte(struct sink *k, unsigned char c)
{
    if (c > ' ' && c < 0x7f && c != '\\') {
        char one = (char)c;
        put(k, &one, 1);
        return;
    }
    char esc[ESCAPE_LEN] = {'\\', (char)('0' + c / 100), (char)('0' + c / 10 % 10),
                            (char)('0' + c % 10)};
    put(k, esc, sizeof(esc));
}

size_t px_nametext_from_text(const char *s, size_t n, char *out, size_t cap)
{
    struct sink k = {out, cap, 0, false};

    for (size_t i = 0; i < n; i++)
        put_byte(&k, (unsigned char)s[i]);
    out[k.len] = '\0';
    return k.len;
}

size_t px_nametext_from_wire(const uint8_t *wire, size_t len, char *out, size_t cap)
{
    struct sink k = {out, cap, 0, false};
    size_t w = 0;
    bool first = true;

    while (w < len && wire[w] != 0) {
        size_t label = wire[w++];
        if (!first)
            put(&k, ".", 1);
        first = false;
        for (size_t i = 0; i < label && w < len; i++, w++) {
            if (wire[w] == '.')
                put(&k, "\\.", 2);
            else
                put_byte(&k, wire[w]);
        }
    }
    if (first)
        put(&k, ".", 1); /* the root */
    out[k.len] = '\0';
    return k.len;
}
