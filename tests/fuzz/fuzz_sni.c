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
#include "fuzz_common.h"
#include "sni.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sni_parser whole, part;

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
        CHECK(h->ptr >= whole.hs && h->ptr + h->len <= whole.hs + sizeof whole.hs,
              "host view outside the parser");
        CHECK(host_valid(h->ptr, h->len), "invalid host '%.*s'", (int)h->len, (const char *)h->ptr);
        CHECK(occurs_in(data, size, h->ptr, h->len), "host not in the input");
    }
    if (r == SNI_OK || r == SNI_NO_SNI)
        CHECK(whole.hello.record_bytes <= size, "record_bytes %zu > %zu", whole.hello.record_bytes,
              size);

    /* Cut in two at a point the input chooses. */
    size_t cut = size ? (data[0] * 257u + (size > 1 ? data[size - 1] : 0)) % (size + 1) : 0;
    sni_parser_init(&part);
    sni_parser_feed(&part, data, cut);
    if (part.result != SNI_NEED_MORE) /* a prefix decided: the whole must agree */
        CHECK(same_verdict(&part, &whole), "prefix of %zu bytes: %s, whole: %s", cut,
              sni_result_str(part.result), sni_result_str(whole.result));
    sni_parser_feed(&part, data + cut, size - cut);
    CHECK(same_verdict(&part, &whole), "cut at %zu: %s, whole: %s", cut,
          sni_result_str(part.result), sni_result_str(whole.result));

    /* One byte at a time (bounded, to keep executions fast). */
    if (size <= 4096) {
        sni_parser_init(&part);
        for (size_t i = 0; i < size; i++)
            sni_parser_feed(&part, data + i, 1);
        CHECK(same_verdict(&part, &whole), "bytewise: %s, whole: %s", sni_result_str(part.result),
              sni_result_str(whole.result));
    }
    return 0;
}
