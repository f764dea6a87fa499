/*
 * fuzz_input.h - a fuzz input read as a stream of choices: each take() is
 * the next byte, 0 once the input is used up (so every input, however
 * short, describes a whole case).
 */
#ifndef TESTS_FUZZ_INPUT_H
#define TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct input {
    const uint8_t *p;
    size_t n;
};

/* The next byte of in, or 0 at its end. */
static inline uint8_t take(struct input *in)
{
    if (in->n == 0)
        return 0;
    in->n--;
    return *in->p++;
}

#endif
