/* test_guard.c - size limits, the total, and reservations that cannot go
 * stale (a dead process's reservation is dropped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "guard.h"
#include "tap.h"

static void test_limits(void)
{
    struct sbx_config c;
    char err[256];

    memset(&c, 0, sizeof c);
    c.max_cores = 4;
    c.max_memory_mib = 8192;
    c.max_total_memory_mib = 20480;
    ok(sbx_guard_check_size(&c, 4, 8192, err, sizeof err) == 0, "4 cores 8 GiB fit");
    ok(sbx_guard_check_size(&c, 5, 4096, err, sizeof err) == -1 &&
           strcmp(err, "cores guard: 5 cores asked > max-cores 4") == 0,
       "5 cores refused, naming the limit: %s", err);
    ok(sbx_guard_check_size(&c, 2, 8193, err, sizeof err) == -1 &&
           strstr(err, "8193 MiB asked > max-memory-mib 8192"),
       "8193 MiB refused: %s", err);
    ok(sbx_guard_check_total(&c, 12288, 8192, err, sizeof err) == 0, "12 + 8 GiB = 20 GiB fits");
    ok(sbx_guard_check_total(&c, 16384, 8192, err, sizeof err) == -1 &&
           strstr(err, "16384 MiB in use") && strstr(err, "8192 MiB asked") &&
           strstr(err, "max-total-memory-mib 20480"),
       "16 + 8 GiB refused with the numbers: %s", err);
}

static void test_reservations(void)
{
    char dir[] = "/tmp/sbx-guard-XXXXXX", err[256];
    struct sbx_guard g;
    pid_t child;
    int status;

    ok(mkdtemp(dir) != NULL, "temp state dir");
    ok(sbx_guard_open(&g, dir, err, sizeof err) == 0 && json_array_size(g.reservations) == 0,
       "a new state has no reservations");
    json_array_append_new(g.reservations, sbx_guard_reservation("mine", 2, 4096, 101, "10.0.0.1"));
    ok(sbx_guard_save(&g, err, sizeof err) == 0, "save");
    sbx_guard_close(&g);

    /* A child reserves and dies without releasing. */
    child = fork();
    if (child == 0) {
        struct sbx_guard cg;
        if (sbx_guard_open(&cg, dir, err, sizeof err))
            _exit(1);
        json_array_append_new(cg.reservations,
                              sbx_guard_reservation("dead", 4, 8192, 102, "10.0.0.2"));
        _exit(sbx_guard_save(&cg, err, sizeof err) ? 1 : 0);
    }
    waitpid(child, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child process reserved and exited");
    ok(sbx_guard_open(&g, dir, err, sizeof err) == 0, "reopen");
    ok(json_array_size(g.reservations) == 1 &&
           strcmp(json_string_value(json_object_get(json_array_get(g.reservations, 0), "name")),
                  "mine") == 0,
       "the dead child's reservation no longer counts, ours does");
    ok(json_array_size(g.interrupted) == 1 &&
           json_integer_value(json_object_get(json_array_get(g.interrupted, 0), "vmid")) == 102,
       "the dead child's create record is kept aside as interrupted (VM 102)");
    /* A reservation without the create mark (an older sandboxctl's) of a
     * dead process is dropped; the interrupted record survives a save. */
    json_array_append_new(g.reservations,
                          json_pack("{s:i,s:i,s:s,s:i,s:i,s:i,s:s}", "pid", (int)child, "start", 0,
                                    "name", "old", "cores", 1, "memory_mib", 512, "vmid", 103,
                                    "address", "10.0.0.3"));
    ok(sbx_guard_save(&g, err, sizeof err) == 0, "save with the interrupted record");
    sbx_guard_close(&g);
    ok(sbx_guard_open(&g, dir, err, sizeof err) == 0 && json_array_size(g.reservations) == 1 &&
           json_array_size(g.interrupted) == 1,
       "reopened: ours counts, the interrupted create is still there, the unmarked one is gone");
    sbx_guard_close(&g);
    ok(!sbx_guard_pid_alive(child, 0), "the child's pid counts as gone");
    ok(sbx_guard_pid_alive(getpid(), sbx_guard_pid_start(getpid())), "our pid is alive");
    ok(!sbx_guard_pid_alive(getpid(), sbx_guard_pid_start(getpid()) + 1),
       "a reused pid (other start time) counts as gone");
    {
        /* The start time is field 22 of /proc/PID/stat, read here on its
         * own: what does not change while the process lives (field 23,
         * its size, does: a create that grows must not count as gone). */
        unsigned long long before = sbx_guard_pid_start(getpid()), want = 0;
        char buf[1024] = "";
        FILE *f = fopen("/proc/self/stat", "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = '\0';
        if (f)
            fclose(f);
        const char *q = strrchr(buf, ')');
        for (int field = 2; q != NULL && field < 22; field++)
            q = strchr(q + 1, ' ');
        if (q != NULL)
            want = strtoull(q, NULL, 10);
        size_t big = 64u << 20;
        char *grow = malloc(big);
        if (grow != NULL)
            memset(grow, 1, big);
        ok(before == want && want != 0, "the start time is field 22 of /proc/PID/stat (%llu, %llu)",
           before, want);
        ok(grow != NULL && grow[big - 1] == 1 && sbx_guard_pid_start(getpid()) == before,
           "and stays the same when the process grows by 64 MiB");
        free(grow);
    }
    ok(sbx_guard_release(dir, 101, err, sizeof err) == 0, "release");
    ok(sbx_guard_open(&g, dir, err, sizeof err) == 0 && json_array_size(g.reservations) == 0,
       "after release nothing is reserved");
    sbx_guard_close(&g);
    {
        char path[300];
        snprintf(path, sizeof path, "%s/reservations.json", dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/guard.lock", dir);
        unlink(path);
        rmdir(dir);
    }
}

int main(void)
{
    test_limits();
    test_reservations();
    return tap_done();
}
