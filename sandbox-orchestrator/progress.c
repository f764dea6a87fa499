/* progress.c - steps and bytes of a running operation, for its front end. */
#include <stdio.h>
#include <time.h>

#include "progress.h"

#define MIB (1024.0 * 1024.0)

static long long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Tell the listener, if any, about the current step in phase. */
static void emit(struct sbx_progress *p, enum sbx_progress_phase phase, long long done,
                 long long total)
{
    long long now = now_ms();
    struct sbx_progress_event ev = {
        .step = p->step,
        .phase = phase,
        .seconds = (double)(now - p->step_start_ms) / 1000.0,
        .total_seconds = (double)(now - p->op_start_ms) / 1000.0,
        .index = p->index,
        .steps = p->steps,
        .done = done,
        .total = total,
    };

    p->fn(p->arg, &ev);
}

void sbx_progress_listen(struct sbx_progress *p, sbx_progress_fn fn, void *arg)
{
    *p = (struct sbx_progress){.fn = fn, .arg = arg, .index = -1};
}

void sbx_progress_reset(struct sbx_progress *p, int steps)
{
    p->step = NULL;
    p->index = -1;
    p->steps = steps;
    p->op_start_ms = now_ms();
}

void sbx_progress_begin(struct sbx_progress *p, const char *step)
{
    if (!p->fn)
        return;
    if (!p->op_start_ms)
        sbx_progress_reset(p, 0);
    p->step = step;
    p->index++;
    p->step_start_ms = p->tick_last_ms = now_ms();
    emit(p, SBX_PROGRESS_START, 0, 0);
}

void sbx_progress_tick(struct sbx_progress *p)
{
    long long now = now_ms();

    if (!p->fn || !p->step || p->tick_ms <= 0 || now - p->tick_last_ms < p->tick_ms)
        return;
    p->tick_last_ms = now;
    emit(p, SBX_PROGRESS_TICK, 0, 0);
}

void sbx_progress_ticks(struct sbx_progress *p, int every_ms)
{
    p->tick_ms = every_ms;
}

void sbx_progress_bytes(struct sbx_progress *p, long long done, long long total)
{
    if (p->fn && p->step)
        emit(p, SBX_PROGRESS_BYTES, done, total);
}

int sbx_progress_end(struct sbx_progress *p, int failed)
{
    if (p->fn && p->step)
        emit(p, failed ? SBX_PROGRESS_FAIL : SBX_PROGRESS_END, 0, 0);
    p->step = NULL;
    return failed;
}

void sbx_progress_print(void *arg, const struct sbx_progress_event *ev)
{
    FILE *f = arg;

    switch (ev->phase) {
    case SBX_PROGRESS_START: fprintf(f, "  %-12s ...", ev->step); break;
    case SBX_PROGRESS_BYTES:
        fprintf(f, "\r  %-12s ... %.1f/%.1f MiB", ev->step, (double)ev->done / MIB,
                (double)ev->total / MIB);
        break;
    case SBX_PROGRESS_END: fprintf(f, " %.1f s\n", ev->seconds); break;
    case SBX_PROGRESS_FAIL: fprintf(f, " failed after %.1f s\n", ev->seconds); break;
    case SBX_PROGRESS_TICK: return;
    }
    fflush(f);
}
