/*
 * state.h - the bindings on disk: `state-dir/sandboxes.json`, written so
 * that a crash at any point leaves either the old file or the new one, and
 * read back at start (docs/design.md, "Sandbox bindings").  What is in the
 * array is the world's business (world.c); this file only keeps it.
 */
#ifndef PX_STATE_H
#define PX_STATE_H

#include <jansson.h>
#include <stddef.h>

/* The most bindings a state file (or a replace-all) may hold. */
#define PX_STATE_MAX_BINDINGS 65536

/* "DIR/sandboxes.json" into buf, as messages name the file. */
void px_state_path(const char *dir, char *buf, size_t size);

/* Write the JSON array `bindings` to DIR/sandboxes.json: a temporary file
 * in the same directory (mode 0600: it holds tokens, wiped from memory
 * after), fsync, rename, fsync of the directory.  0, or -1 with
 * "PATH: reason" in err. */
int px_state_save(const char *dir, const json_t *bindings, char *err, size_t errlen);

/* The saved bindings (a new reference: an array of at most
 * PX_STATE_MAX_BINDINGS; an empty one when there is no file yet), after
 * creating DIR (0700, and the directories above it) if missing; NULL
 * with "PATH:LINE:COL: ..." or "PATH: reason" in err. */
json_t *px_state_load(const char *dir, char *err, size_t errlen);

#endif
