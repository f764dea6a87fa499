/*
 * fuzz_common.h - what the sni fuzz harnesses share: CHECK (fuzz_check.h)
 * and an independent statement of what a valid host_name is.
 */
#ifndef TESTS_FUZZ_COMMON_H
#define TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_check.h"
#include "sni.h"

/*
 * RFC 6066 §3 host_name as sni.h promises it, written apart from the parser:
 * 1..253 bytes of LDH labels of 1..63 bytes, no leading or trailing hyphen in
 * a label, and a last label that is not all digits.
 */
static inline int host_valid(const uint8_t *s, size_t n)
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

#endif
