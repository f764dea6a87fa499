/*
 * fuzz_check.h - CHECK(): a property every fuzz harness asserts; on failure
 * it says which and why, then aborts so libFuzzer saves the input.
 */
#ifndef TESTS_FUZZ_CHECK_H
#define TESTS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

/* CHECK(cond, fmt, ...): a property; on failure say which and why, then abort. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "property failed: %s (%s:%d): ", #cond, __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
