/*
 * errbuf.h - the error text setup code hands back (STYLE: "file:line: what
 * was expected"): lines in the caller's buffer, joined by '\n'.
 */
#ifndef PX_ERRBUF_H
#define PX_ERRBUF_H

#include <stddef.h>

/* Append one printf-style line to err[0..errlen) (after a '\n' when err
 * holds a line already); a full buffer ends in "..." rather than a cut
 * line. */
__attribute__((format(printf, 3, 4))) void px_err_add(char *err, size_t errlen, const char *fmt,
                                                      ...);

#endif
