/* guard.h - the resource guard: size limits and reservations across processes.
 *
 * A create first checks its size against max-cores / max-memory-mib, then,
 * holding an exclusive flock on STATE_DIR/guard.lock, adds what Proxmox
 * holds in the pool to what other creates have reserved, refuses when the
 * sum would pass max-total-memory-mib, and records its own reservation
 * (with its VMID and address) in STATE_DIR/reservations.json.  Each
 * reservation names its process (pid and start time): one whose process
 * has gone no longer counts, so a crash never holds memory or an address.
 *
 * A create's reservation is also its record ("creating": true) until the
 * create ends: it is made before the clone and released only once the
 * sandbox is whole or undone.  One left by a process that has gone is a
 * create killed half-way: it is kept aside (interrupted) holding its VMID
 * alone, until `sandboxctl doctor` has removed what that create made.  A
 * reservation without the mark is dropped by the next reader.
 */
#ifndef SBX_GUARD_H
#define SBX_GUARD_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "config.h"

/* An open, locked guard state. */
struct sbx_guard {
    int fd;               /* the locked guard.lock */
    char *path;           /* reservations.json */
    json_t *reservations; /* array of {pid, start, name, cores, memory_mib, vmid, address,
                             creating}: of live processes */
    json_t *interrupted;  /* the same, of creates whose process has gone */
};

/* Refuse a size past the per-sandbox limits.  Returns 0, or -1 with
 * "LIMIT: ASKED > LIMIT VALUE" in err. */
int sbx_guard_check_size(const struct sbx_config *c, int cores, int memory_mib, char *err,
                         size_t errlen);

/* Refuse when used_mib (in the pool and reserved) plus asked_mib passes
 * max-total-memory-mib.  Returns 0 or -1 with the numbers in err. */
int sbx_guard_check_total(const struct sbx_config *c, long used_mib, int asked_mib, char *err,
                          size_t errlen);

/* Create state_dir if needed, take the lock (waiting for it), read the
 * reservations: those of live processes into g->reservations, the
 * records of creates whose process has gone into g->interrupted, and the
 * rest dropped.  Returns 0 or -1 with the reason in err; on 0 call
 * sbx_guard_close(). */
int sbx_guard_open(struct sbx_guard *g, const char *state_dir, char *err, size_t errlen);

/* Write the reservations and the interrupted creates back (whole:
 * sbx_state_write).  0 / -1. */
int sbx_guard_save(struct sbx_guard *g, char *err, size_t errlen);

/* Release the lock and free g's contents. */
void sbx_guard_close(struct sbx_guard *g);

/* A new reservation object for this process: a create's record. */
json_t *sbx_guard_reservation(const char *name, int cores, int memory_mib, int vmid,
                              const char *address);

/* Drop this process's reservation of vmid (all of them when vmid is 0)
 * from the state in state_dir.  Returns 0 or -1 with the reason. */
int sbx_guard_release(const char *state_dir, int vmid, char *err, size_t errlen);

/* Whether the process pid that started at start (clock ticks since boot,
 * 0 = unknown) still runs. */
int sbx_guard_pid_alive(pid_t pid, unsigned long long start);

/* The start time of process pid (field 22 of /proc/PID/stat), 0 if unknown. */
unsigned long long sbx_guard_pid_start(pid_t pid);

/* Write j to path whole, as flags format it: a temporary file beside it
 * (PATH.tmp: the caller holds the lock that guards path), flushed to
 * disk, then renamed over path, and the directory flushed.  A process
 * killed at any moment leaves the old file or the new one, never part of
 * one; at most the temporary file stays, which the next write replaces.
 * 0, or -1 with "state-dir: cannot write PATH: why" in err. */
int sbx_state_write(const char *path, json_t *j, size_t flags, char *err, size_t errlen);

/* Take an exclusive flock on STATE_DIR/NAME (waiting for it).  Returns the
 * descriptor (close it to unlock), or -1 with the reason in err. */
int sbx_state_lock(const char *state_dir, const char *name, char *err, size_t errlen);

#endif
