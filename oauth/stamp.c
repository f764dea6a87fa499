/*
 * stamp.c - an instant as RFC 3339 text, the way Codex writes last_refresh
 * ("2026-11-30T10:00:00.123456Z"), computed here rather than with gmtime
 * so that nothing depends on the C library's time zone state.
 */
#include <stdio.h>

#include "oauth_int.h"

enum {
    S_PER_DAY = 86400,
    S_PER_HOUR = 3600,
    S_PER_MIN = 60,
    US_PER_MS = 1000,
    /* The civil calendar of days since 1970-01-01 (H. Hinnant, "chrono-
     * compatible low-level date algorithms"): 400-year eras from 0000-03-01. */
    DAYS_TO_EPOCH = 719468, /* 0000-03-01 to 1970-01-01 */
    DAYS_PER_ERA = 146097,
    YEARS_PER_ERA = 400,
    DAYS_PER_4Y = 1460,
    DAYS_PER_100Y = 36524,
    DAYS_PER_YEAR = 365,
    MONTH_SPAN = 153, /* days of five months from March */
    MONTH_SPLIT = 5,
    MARCH = 3,              /* months are counted from March */
    MARCH_TO_DECEMBER = 10, /* the months of a year before its January */
    DECEMBER = 12,
    FEBRUARY = 2,
    LEAP_EVERY = 4,  /* years */
    LEAP_SKIP = 100, /* years (every 400th is leap again: DAYS_PER_ERA) */
};

/* The civil date of days since 1970-01-01 (days >= 0). */
static void civil_from_days(int64_t days, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t z = days + DAYS_TO_EPOCH;
    int64_t era = z / DAYS_PER_ERA;
    unsigned doe = (unsigned)(z - era * DAYS_PER_ERA);
    unsigned yoe =
        (doe - doe / DAYS_PER_4Y + doe / DAYS_PER_100Y - doe / (DAYS_PER_ERA - 1)) / DAYS_PER_YEAR;
    unsigned doy = doe - (DAYS_PER_YEAR * yoe + yoe / LEAP_EVERY - yoe / LEAP_SKIP);
    unsigned mp = (MONTH_SPLIT * doy + 2) / MONTH_SPAN;

    *d = doy - (MONTH_SPAN * mp + 2) / MONTH_SPLIT + 1;
    *m = mp < MARCH_TO_DECEMBER ? mp + MARCH : mp + MARCH - DECEMBER;
    *y = (int64_t)yoe + era * YEARS_PER_ERA + (*m <= FEBRUARY);
}

int oauth_stamp(int64_t ms, char out[OAUTH_STAMP_LEN + 1])
{
    int64_t y;
    unsigned mo, d;

    if (ms < 0 || ms > OAUTH_MS_MAX)
        return -1;
    int64_t s = ms / MS_PER_S;
    int64_t sod = s % S_PER_DAY;
    civil_from_days(s / S_PER_DAY, &y, &mo, &d);
    int n = snprintf(out, OAUTH_STAMP_LEN + 1, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%06lldZ",
                     (long long)y, mo, d, (long long)(sod / S_PER_HOUR),
                     (long long)(sod % S_PER_HOUR / S_PER_MIN), (long long)(sod % S_PER_MIN),
                     (long long)(ms % MS_PER_S * US_PER_MS));
    return n == OAUTH_STAMP_LEN ? 0 : -1;
}
