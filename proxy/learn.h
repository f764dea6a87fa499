/*
 * learn.h - `egressctl learn` (learn.c): an access log of presets in
 * `mode report`, turned into the allow lines that would have let its
 * would-be denials through, per owner.
 */
#ifndef PX_LEARN_H
#define PX_LEARN_H

#include <stdio.h>

/* Read the access log f (JSON lines) and print, per owner (only_owner
 * alone when not NULL), the allow lines to out: a host (":PORT" unless
 * 443 or 80) with, when every line for it was an HTTP request egressd
 * read, `methods` and `paths` (the path's first two segments then a "**" segment,
 * or the path itself when it is shorter); denials no allow line can lift
 * as comments.  Lines that are not JSON are counted and reported on err.
 * Returns 0. */
int px_learn(FILE *f, const char *only_owner, FILE *out, FILE *err);

#endif
