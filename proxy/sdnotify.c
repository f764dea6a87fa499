/*
 * sdnotify.c - see sdnotify.h.
 */
#include "sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* The address of $NOTIFY_SOCKET (a path, or "@name" for the abstract
 * namespace) into sun; its length, or 0 when there is none. */
static socklen_t notify_address(struct sockaddr_un *sun)
{
    const char *path = getenv("NOTIFY_SOCKET");
    size_t n = path ? strlen(path) : 0;

    if (n < 2 || n >= sizeof(sun->sun_path) || (path[0] != '/' && path[0] != '@'))
        return 0;
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    memcpy(sun->sun_path, path, n);
    if (path[0] == '@')
        sun->sun_path[0] = '\0';
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
}

/* Send text, with descriptor fd attached when fd >= 0.  0 or -1. */
static int send_state(int sock, const struct sockaddr_un *sun, socklen_t len, const char *text,
                      int fd)
{
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {(void *)text, strlen(text)};
    struct msghdr m = {
        .msg_name = (void *)sun, .msg_namelen = len, .msg_iov = &iov, .msg_iovlen = 1};

    if (fd >= 0) {
        memset(&ctl, 0, sizeof(ctl));
        m.msg_control = ctl.room;
        m.msg_controllen = sizeof(ctl.room);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -1;
}

/* sd_notify_barrier: send BARRIER=1 with a pipe's write end; systemd
 * closes it once it has processed every message before. */
static int barrier(int sock, const struct sockaddr_un *sun, socklen_t len)
{
    int p[2];

    if (pipe2(p, O_CLOEXEC) == -1)
        return -1;
    int rc = send_state(sock, sun, len, "BARRIER=1", p[1]);
    close(p[1]);
    if (rc == 0) {
        struct pollfd pfd = {.fd = p[0], .events = 0};
        rc = poll(&pfd, 1, PX_SDNOTIFY_BARRIER_MS) == 1 ? 0 : -1;
    }
    close(p[0]);
    return rc;
}

int px_sdnotify(const char *state, bool want_barrier)
{
    struct sockaddr_un sun;
    socklen_t len = notify_address(&sun);

    if (len == 0) {
        errno = ENOENT;
        return -1;
    }
    int sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock == -1)
        return -1;
    int rc = send_state(sock, &sun, len, state, -1);
    if (rc == 0 && want_barrier)
        rc = barrier(sock, &sun, len);
    close(sock);
    return rc;
}
