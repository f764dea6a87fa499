/* progress.h - struct sbx_progress: how an operation tells its front end
 * what it is doing while it does it.
 *
 * An operation that takes long (create, push, pull) marks each of its steps
 * with sbx_progress_begin() and sbx_progress_end(), a step that moves
 * bytes reports them with sbx_progress_bytes(), and a step that waits
 * says it still does with sbx_progress_tick().  Every mark becomes one call
 * of the front end's function with a struct sbx_progress_event; no function
 * set (the default) means no calls at all.  The command line prints the
 * events on a terminal (sbx_progress_print); the MCP server turns them into
 * notifications/progress.  The hook is called in the operation's thread,
 * between its steps: it must not call back into the operation.
 */
#ifndef SBX_PROGRESS_H
#define SBX_PROGRESS_H

#include <stdio.h>

enum sbx_progress_phase {
    SBX_PROGRESS_START, /* the step begins */
    SBX_PROGRESS_BYTES, /* the step moved bytes: done of total */
    SBX_PROGRESS_END,   /* the step succeeded */
    SBX_PROGRESS_FAIL,  /* the step failed (the operation's err says why) */
    SBX_PROGRESS_TICK,  /* the step still runs, `seconds` so far */
};

struct sbx_progress_event {
    const char *step; /* "clone", "copy in", ... */
    enum sbx_progress_phase phase;
    double seconds;        /* since the step began */
    double total_seconds;  /* since the operation's first step began */
    int index, steps;      /* the step's number from 0, of steps (0: not known) */
    long long done, total; /* bytes: only for SBX_PROGRESS_BYTES, else 0 */
};

typedef void (*sbx_progress_fn)(void *arg, const struct sbx_progress_event *ev);

/* Lives in struct sbx; zero-initialised means "no front end listens". */
struct sbx_progress {
    sbx_progress_fn fn;
    void *arg;
    /* the current operation's state, kept by the functions below */
    const char *step;
    int index, steps;
    long long op_start_ms, step_start_ms;
    /* Guest commands run outside a step (sbx_guest_exec: run_command) are
     * a step "run" of their own, with a tick every tick_ms, when this is
     * not 0; 0 (the default, the command line's) keeps them silent. */
    int tick_ms;
    long long tick_last_ms;
};

/* Set (fn NULL: clear) the function that hears p's events, and forget any
 * operation under way. */
void sbx_progress_listen(struct sbx_progress *p, sbx_progress_fn fn, void *arg);

/* A new operation of `steps` steps (0: not known) starts: its seconds and
 * step numbers count from here. */
void sbx_progress_reset(struct sbx_progress *p, int steps);

/* Step `step` (a string that outlives the step) begins. */
void sbx_progress_begin(struct sbx_progress *p, const char *step);

/* The current step has moved done of total bytes. */
void sbx_progress_bytes(struct sbx_progress *p, long long done, long long total);

/* The current step still runs: one SBX_PROGRESS_TICK when tick_ms have
 * passed since the step began or since the last tick, else nothing. */
void sbx_progress_tick(struct sbx_progress *p);

/* Sets p->tick_ms (after sbx_progress_listen, which clears it). */
void sbx_progress_ticks(struct sbx_progress *p, int every_ms);

/* The current step ends: failed 0 for success.  Returns failed, so a step
 * can be ended in its return statement. */
int sbx_progress_end(struct sbx_progress *p, int failed);

/* An sbx_progress_fn for a terminal: arg is the FILE (stderr).  A step is
 * one line, "  clone ... 3.2 s"; bytes rewrite it with \r while it runs
 * ("  copy in ... 16.0/40.0 MiB"), and a failed step ends in "failed".
 * Ticks print nothing. */
void sbx_progress_print(void *arg, const struct sbx_progress_event *ev);

#endif
