/*
 * fuzz_sni.c - libFuzzer harness for the ClientHello parser.
 *
 * Beyond "no crash, no sanitizer report" it asserts the parser's promises:
 *  1. a verdict does not depend on how the bytes are cut: the input fed in
 *     two pieces (cut at a point taken from the input) and one byte at a time
 *     gives the same result, error and host as the input fed whole;
 *  2. a returned host is a view inside the parser's handshake buffer, and
 *     those bytes occur in the input exactly as returned;
 *  3. a returned host is a valid host_name: 1..253 bytes of LDH labels of
 *     1..63 bytes, no leading or trailing hyphen, last label not all digits;
 *  4. a prefix never yields a different host than the whole: a verdict
 *     reached on a prefix is the verdict on the whole.
 */
#include "sni.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sni_parser whole, part;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* An independent statement of what a valid host_name is (RFC 6066 §3, LDH). */
static int host_valid(const uint8_t *s, size_t n)
{
    size_t label = 0;
    int digits = 1;

    if (n == 0 || n > SNI_HOST_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            digits = 1;
            continue;
        }
        int alpha = (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
        int digit = c >= '0' && c <= '9';
        if (!(alpha || digit || c == '-') || (label == 0 && c == '-') || ++label > 63)
            return 0;
        digits &= digit;
    }
    return label > 0 && s[n - 1] != '-' && !digits;
}

static int same_verdict(const struct sni_parser *a, const struct sni_parser *b)
{
    if (a->result != b->result || a->error != b->error)
        return 0;
    if (a->result != SNI_OK)
        return 1;
    return a->hello.host.len == b->hello.host.len &&
           memcmp(a->hello.host.ptr, b->hello.host.ptr, a->hello.host.len) == 0 &&
           a->hello.record_bytes == b->hello.record_bytes;
}

static int occurs_in(const uint8_t *hay, size_t n, const uint8_t *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sni_parser_init(&whole);
    enum sni_result r = sni_parser_feed(&whole, data, size);

    if (r == SNI_OK) {
        const struct sni_view *h = &whole.hello.host;
        CHECK(h->ptr >= whole.hs && h->ptr + h->len <= whole.hs + sizeof whole.hs);
        CHECK(host_valid(h->ptr, h->len));
        CHECK(occurs_in(data, size, h->ptr, h->len));
    }
    if (r == SNI_OK || r == SNI_NO_SNI)
        CHECK(whole.hello.record_bytes <= size);

    /* Cut in two at a point the input chooses. */
    size_t cut = size ? (data[0] * 257u + (size > 1 ? data[size - 1] : 0)) % (size + 1) : 0;
    sni_parser_init(&part);
    sni_parser_feed(&part, data, cut);
    if (part.result != SNI_NEED_MORE)
        CHECK(same_verdict(&part, &whole)); /* a prefix decided: the whole agrees */
    sni_parser_feed(&part, data + cut, size - cut);
    CHECK(same_verdict(&part, &whole));

    /* One byte at a time (bounded, to keep executions fast). */
    if (size <= 4096) {
        sni_parser_init(&part);
        for (size_t i = 0; i < size; i++)
            sni_parser_feed(&part, data + i, 1);
        CHECK(same_verdict(&part, &whole));
    }
    return 0;
}
