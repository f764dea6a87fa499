/*
 * tap.h - the smallest Test Anything Protocol producer.
 *
 * Each check prints "ok N - what" or "not ok N - what" (with the place and,
 * for failures, a detail line).  tests/run.sh counts these lines across all
 * test programs; a program that crashes counts as a failure of its own, and
 * so does one whose plan (tap_done()) is missing or does not match them.
 * Header-only so that a test links nothing but the module it tests.
 */
#ifndef TESTS_TAP_H
#define TESTS_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_count, tap_failed;

/* Report one check; returns cond so callers can stop early on failure. */
__attribute__((format(printf, 4, 5))) static int tap_ok(int cond, const char *file, int line,
                                                        const char *fmt, ...)
{
    va_list ap;

    tap_count++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (!cond) {
        tap_failed++;
        printf("\n#   at %s:%d", file, line);
    }
    printf("\n");
    fflush(stdout);
    return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* Print a diagnostic line that TAP consumers show but do not count. */
#define diag(...) (printf("# "), printf(__VA_ARGS__), printf("\n"))

/* Print the plan; the exit status says whether everything passed. */
static int tap_done(void)
{
    printf("1..%d\n", tap_count);
    return tap_failed ? 1 : 0;
}

#endif
