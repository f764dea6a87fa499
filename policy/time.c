/*
 * time.c - RFC 3339 times (§5.6), for `until`: "2026-12-01T00:00Z" with
 * seconds, a fraction and a "+HH:MM" offset optional.  Pure: no timegm(),
 * no TZ.
 */
#include <string.h>

#include "policy.h"

static bool digits(const char *s, size_t n, int *out)
{
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
 * days_from_civil). */
static int64_t days_from_civil(int y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int month_days(int y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : days[m - 1];
}

bool policy_time_parse(const char *s, size_t len, int64_t *out)
{
    int y, mo, d, h, mi, sec = 0, oh = 0, om = 0, sign = 0;
    size_t i = 16;

    if (len < 17 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        !digits(s, 4, &y) || !digits(s + 5, 2, &mo) || !digits(s + 8, 2, &d) ||
        !digits(s + 11, 2, &h) || !digits(s + 14, 2, &mi))
        return false;
    if (s[i] == ':') {
        if (len < i + 3 || !digits(s + i + 1, 2, &sec))
            return false;
        i += 3;
        if (i < len && s[i] == '.') {
            size_t f = ++i;
            while (i < len && s[i] >= '0' && s[i] <= '9')
                i++;
            if (i == f)
                return false;
        }
    }
    if (i < len && (s[i] == 'Z' || s[i] == 'z') && i + 1 == len) {
        sign = 0;
    } else if (i + 6 == len && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':' &&
               digits(s + i + 1, 2, &oh) && digits(s + i + 4, 2, &om)) {
        sign = s[i] == '+' ? 1 : -1;
    } else {
        return false;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 || sec > 60 ||
        oh > 23 || om > 59)
        return false;
    *out = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + sec -
           (int64_t)sign * (oh * 3600 + om * 60);
    return true;
}
