/*
 * fileio.c - writing whole buffers and syncing directories (fileio.h).
 */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int px_write_all(int fd, const void *p, size_t n)
{
    const char *b = p;

    while (n > 0) {
        ssize_t k = write(fd, b, n);
        if (k == -1 && errno == EINTR)
            continue;
        if (k == -1)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

int px_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd == -1)
        return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}
