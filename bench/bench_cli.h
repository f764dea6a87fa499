/*
 * bench_cli.h - what the bench programs share: sizes with k/m/g, as many
 * descriptors as the hard limit allows, and the list of ClientHello
 * captures in a directory.  Header-only: the bench programs link nothing
 * of each other.
 */
#ifndef BENCH_CLI_H
#define BENCH_CLI_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* A size: digits with an optional k, m or g (powers of 1024).  0 or -1. */
static inline int bench_parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -1;
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10, end++;
    else if (*end == 'm' || *end == 'M')
        shift = 20, end++;
    else if (*end == 'g' || *end == 'G')
        shift = 30, end++;
    if (*end || v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* A decimal number within lo..hi, or a usage error: "PROG: WHAT must be
 * LO..HI, not 'S'" and exit status 2. */
static inline long bench_parse_long(const char *prog, const char *s, const char *what, long lo,
                                    long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "%s: %s must be %ld..%ld, not '%s'\n", prog, what, lo, hi, s);
        exit(2);
    }
    return v;
}

/* Raise the soft open-files limit to the hard one (thousands of tunnels);
 * returns the limit now in force. */
static inline rlim_t bench_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur;
}

/* The names of the ClientHello captures (*.bin) in dir, at most max, each
 * strdup'ed, in directory order; -1 if dir cannot be opened (errno). */
static inline long bench_list_hellos(const char *dir, char **names, size_t max)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".bin") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    return (long)n;
}

#endif
