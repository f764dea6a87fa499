/*
 * fileio.h - the two steps of writing a file durably that the state
 * files share (world.c's sandboxes.json, appliance.c's appliance.key):
 * write all of a buffer, and sync the directory a rename happened in.
 */
#ifndef PX_FILEIO_H
#define PX_FILEIO_H

#include <stddef.h>

/* Write p[0..n) to fd, again after EINTR and short writes.  0, or -1
 * with errno. */
int px_write_all(int fd, const void *p, size_t n);

/* fsync the directory dir (a rename into it is durable only then).  0, or
 * -1 with errno. */
int px_sync_dir(const char *dir);

#endif
