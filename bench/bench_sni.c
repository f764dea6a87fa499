/*
 * bench_sni.c - nanoseconds per ClientHello parse, for each real sample.
 *
 *   bench_sni [-n ITERATIONS] [-r ROUNDS] [DIR]
 *
 * DIR defaults to $CLIENTHELLO_DIR, else tests/data/clienthello (run from the
 * top of the tree).  Each round times ITERATIONS parses (init + feed of the
 * whole capture) and the median round is reported, with the fastest and
 * slowest, so one noisy round on a busy machine does not move the figure.  A second column times
 * the same bytes fed in two pieces (the cut in the middle), the shape of a
 * ClientHello that arrives in two reads.
 */
#include "sni.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_cli.h"

#define MAX_BYTES  20000
#define MAX_ROUNDS 99

static struct sni_parser parser;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ns per parse over rounds; cut == 0 feeds the whole in one call. */
static double time_parse(const uint8_t *buf, size_t len, size_t cut, long iters, int rounds,
                         double *min, double *max, enum sni_result *res)
{
    double per[MAX_ROUNDS];

    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            sni_parser_init(&parser);
            if (cut)
                sni_parser_feed(&parser, buf, cut);
            *res = sni_parser_feed(&parser, buf + cut, len - cut);
            __asm__ volatile("" : : "r"(&parser) : "memory"); /* keep the work */
        }
        per[r] = (now_ns() - t0) / iters;
    }
    qsort(per, rounds, sizeof per[0], cmp_double);
    *min = per[0];
    *max = per[rounds - 1];
    return per[rounds / 2];
}

static int bench_file(const char *dir, const char *name, long iters, int rounds)
{
    static uint8_t buf[MAX_BYTES];
    char path[4096];
    double lo, hi, lo2, hi2;
    enum sni_result res;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    double med = time_parse(buf, len, 0, iters, rounds, &lo, &hi, &res);
    double med2 = time_parse(buf, len, len / 2, iters, rounds, &lo2, &hi2, &res);
    printf("%-20s %6zu %10.1f %8.1f %8.1f %10.1f   %s\n", name, len, med, lo, hi, med2,
           sni_result_str(res));
    return res == SNI_OK || res == SNI_NO_SNI ? 0 : -1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    long iters = 200000;
    int rounds = 9, opt, failed = 0;
    char *names[64];
    size_t n = 0;

    while ((opt = getopt(argc, argv, "n:r:")) != -1) {
        if (opt == 'n')
            iters = atol(optarg);
        else if (opt == 'r')
            rounds = atoi(optarg);
        else
            return fprintf(stderr, "usage: bench_sni [-n ITERATIONS] [-r ROUNDS] [DIR]\n"), 2;
    }
    if (iters < 1 || rounds < 1 || rounds > MAX_ROUNDS)
        return fprintf(stderr, "bench_sni: -n must be >= 1, -r 1..%d\n", MAX_ROUNDS), 2;
    const char *dir = optind < argc ? argv[optind] : getenv("CLIENTHELLO_DIR");
    if (!dir)
        dir = "tests/data/clienthello";
    long got = bench_list_hellos(dir, names, 64);
    if (got < 0)
        return perror(dir), 1;
    n = (size_t)got;
    qsort(names, n, sizeof names[0], by_name);
    printf("# %ld parses per round, median of %d rounds; ns per parse\n", iters, rounds);
    printf("%-20s %6s %10s %8s %8s %10s   %s\n", "sample", "bytes", "median", "min", "max",
           "two-piece", "result");
    for (size_t i = 0; i < n; i++) {
        failed |= bench_file(dir, names[i], iters, rounds) != 0;
        free(names[i]);
    }
    return n == 0 || failed;
}
