/* test_b64.c - base64 (RFC 4648 section 10 test vectors) and strictness. */
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "tap.h"

int main(void)
{
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    unsigned char all[256], *back;
    size_t n;
    char *enc;

    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        enc = sbx_b64_encode((const unsigned char *)vec[i][0], strlen(vec[i][0]));
        ok(strcmp(enc, vec[i][1]) == 0, "encode '%s' = '%s'", vec[i][0], enc);
        free(enc);
        back = sbx_b64_decode(vec[i][1], strlen(vec[i][1]), &n);
        ok(back && n == strlen(vec[i][0]) && memcmp(back, vec[i][0], n) == 0, "decode '%s'",
           vec[i][1]);
        free(back);
    }
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    enc = sbx_b64_encode(all, sizeof all);
    back = sbx_b64_decode(enc, strlen(enc), &n);
    ok(back && n == 256 && memcmp(back, all, 256) == 0, "every byte value round-trips");
    free(enc);
    free(back);
    ok(sbx_b64_decode("Zm9", 3, &n) == NULL, "length not a multiple of 4 refused");
    ok(sbx_b64_decode("Zm9v\n", 5, &n) == NULL, "a newline refused");
    ok(sbx_b64_decode("Zm=v", 4, &n) == NULL, "padding in the middle refused");
    ok(sbx_b64_decode("Zg==Zg==", 8, &n) == NULL, "padding before the end refused");
    ok(sbx_b64_decode("Zm9*", 4, &n) == NULL, "a character outside the alphabet refused");
    return tap_done();
}
