/*
 * handover.c - see handover.h.
 */
#include "handover.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* Descriptors per message: SCM_MAX_FD is 253 in Linux. */
#define FDS_PER_MSG 200

struct sock {
    enum px_sock_role role;
    int fd;
    struct sockaddr_storage ss; /* where it listens (received ones) */
    socklen_t len;
    bool claimed;
};

/* The sockets this process listens on (noted), and the ones its
 * predecessor handed over (received).  Main thread only. */
static struct sock *noted, *received;
static size_t n_noted, n_received;

static const char *const role_names[PX_SOCK_ROLES] = {
    [PX_SOCK_PROXY] = "proxy",
    [PX_SOCK_TRANSPARENT_TLS] = "transparent-tls",
    [PX_SOCK_TRANSPARENT_HTTP] = "transparent-http",
    [PX_SOCK_DNS_UDP] = "dns-udp",
    [PX_SOCK_DNS_TCP] = "dns-tcp",
    [PX_SOCK_METRICS] = "metrics",
    [PX_SOCK_ADMIN] = "admin",
};

const char *px_handover_role_name(enum px_sock_role role)
{
    return role < PX_SOCK_ROLES ? role_names[role] : "?";
}

/* The role named `name`, or PX_SOCK_ROLES. */
static enum px_sock_role role_of(const char *name)
{
    for (int r = 0; r < PX_SOCK_ROLES; r++)
        if (strcmp(role_names[r], name) == 0)
            return (enum px_sock_role)r;
    return PX_SOCK_ROLES;
}

/* s appended to the array *arr of *n; aborts when memory is out. */
static void push(struct sock **arr, size_t *n, const struct sock *s)
{
    struct sock *grown = realloc(*arr, (*n + 1) * sizeof(**arr));
    if (grown == NULL)
        abort();
    *arr = grown;
    (*arr)[(*n)++] = *s;
}

void px_handover_note(enum px_sock_role role, int fd)
{
    push(&noted, &n_noted, &(struct sock){.role = role, .fd = fd});
}

/* Whether two socket addresses name the same place: family, port and
 * address for IP; the path for unix sockets. */
static bool same_place(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    switch (a->sa_family) {
    case AF_INET: {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    case AF_INET6: {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
    }
    case AF_UNIX: {
        const struct sockaddr_un *x = (const void *)a, *y = (const void *)b;
        return strncmp(x->sun_path, y->sun_path, sizeof(x->sun_path)) == 0;
    }
    default: return false;
    }
}

int px_handover_claim(enum px_sock_role role, const struct sockaddr *sa, socklen_t len)
{
    (void)len;
    for (size_t i = 0; i < n_received; i++) {
        struct sock *s = &received[i];
        if (!s->claimed && s->role == role && same_place((struct sockaddr *)&s->ss, sa)) {
            s->claimed = true;
            return s->fd;
        }
    }
    return -1;
}

size_t px_handover_most(void)
{
    size_t most = 0;

    for (size_t i = 0; i < n_received; i++) {
        size_t n = 0;
        for (size_t j = 0; j < n_received; j++)
            n += received[j].role == received[i].role &&
                 same_place((struct sockaddr *)&received[j].ss, (struct sockaddr *)&received[i].ss);
        most = n > most ? n : most;
    }
    return most;
}

size_t px_handover_close_unclaimed(void)
{
    size_t n = 0;

    for (size_t i = 0; i < n_received; i++) {
        struct sock *s = &received[i];
        if (s->claimed)
            continue;
        px_log_info("handover: %s socket %d is not in the config any more: closed",
                    px_handover_role_name(s->role), s->fd);
        close(s->fd);
        s->claimed = true;
        n++;
    }
    free(received);
    received = NULL;
    n_received = 0;
    return n;
}

/* ------------------------------------------------------------ messages */

int px_handover_send_msg(int chan, const json_t *obj, const int *fds, size_t n_fds)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
    } ctl;
    struct iovec iov = {text, text ? strlen(text) : 0};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

    if (text == NULL || iov.iov_len > PX_HANDOVER_MSG_MAX || n_fds > FDS_PER_MSG) {
        free(text);
        errno = EMSGSIZE;
        return -1;
    }
    if (n_fds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        m.msg_control = ctl.room;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
    }
    ssize_t w;
    do
        w = sendmsg(chan, &m, MSG_NOSIGNAL);
    while (w == -1 && errno == EINTR);
    free(text);
    return w == (ssize_t)iov.iov_len ? 0 : -1;
}

/* The descriptors of message m into fds (at most max; any beyond are
 * closed); their count. */
static size_t take_fds(struct msghdr *m, int *fds, size_t max)
{
    size_t n = 0;

    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int got[FDS_PER_MSG];
        memcpy(got, CMSG_DATA(c), (k < FDS_PER_MSG ? k : FDS_PER_MSG) * sizeof(int));
        for (size_t i = 0; i < k && i < FDS_PER_MSG; i++) {
            if (n < max)
                fds[n++] = got[i];
            else
                close(got[i]);
        }
    }
    return n;
}

json_t *px_handover_recv_msg(int chan, int *fds, size_t max_fds, size_t *n_fds)
{
    static char buf[PX_HANDOVER_MSG_MAX + 1];
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int) * FDS_PER_MSG)];
    } ctl;
    struct iovec iov = {buf, PX_HANDOVER_MSG_MAX};
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.room, .msg_controllen = sizeof(ctl)};
    ssize_t r;

    *n_fds = 0;
    do
        r = recvmsg(chan, &m, MSG_CMSG_CLOEXEC);
    while (r == -1 && errno == EINTR);
    if (r <= 0) {
        if (r == 0)
            errno = 0;
        return NULL;
    }
    *n_fds = take_fds(&m, fds, max_fds);
    buf[r] = '\0';
    json_t *obj = (m.msg_flags & MSG_TRUNC) ? NULL : json_loads(buf, 0, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        for (size_t i = 0; i < *n_fds; i++)
            close(fds[i]);
        *n_fds = 0;
        errno = 0;
        return NULL;
    }
    return obj;
}

/* ------------------------------------------------------------ old side */

/* Send noted[from..from+n) in one message. */
static int send_batch(int chan, size_t from, size_t n)
{
    json_t *list = json_array();
    int fds[FDS_PER_MSG];

    for (size_t i = 0; i < n; i++) {
        json_array_append_new(list, json_pack("{s:s}", "role", role_names[noted[from + i].role]));
        fds[i] = noted[from + i].fd;
    }
    json_t *msg = json_pack("{s:s,s:o}", "op", "sockets", "sockets", list);
    int rc = px_handover_send_msg(chan, msg, fds, n);
    json_decref(msg);
    return rc;
}

int px_handover_send(int chan, const json_t *state, char *err, size_t errlen)
{
    for (size_t i = 0; i < n_noted; i += FDS_PER_MSG) {
        size_t n = n_noted - i < FDS_PER_MSG ? n_noted - i : FDS_PER_MSG;
        if (send_batch(chan, i, n) == -1) {
            snprintf(err, errlen, "handing over sockets: %s", strerror(errno));
            return -1;
        }
    }
    json_t *end = json_pack("{s:s,s:O}", "op", "end", "state", state);
    int rc = px_handover_send_msg(chan, end, NULL, 0);
    json_decref(end);
    if (rc == -1)
        snprintf(err, errlen, "handing over the state: %s", strerror(errno));
    return rc;
}

/* ------------------------------------------------------------ new side */

/* Keep received socket fd of the role named `name`; false (fd closed)
 * when the name is unknown or the socket has no local address. */
static bool keep_received(const char *name, int fd)
{
    struct sock s = {.role = role_of(name), .fd = fd};

    s.len = sizeof(s.ss);
    if (s.role == PX_SOCK_ROLES || getsockname(fd, (struct sockaddr *)&s.ss, &s.len) == -1) {
        close(fd);
        return false;
    }
    push(&received, &n_received, &s);
    return true;
}

/* One "sockets" message: keep each socket with its role.  0, or -1 with
 * err. */
static int take_sockets(const json_t *msg, const int *fds, size_t n_fds, char *err, size_t errlen)
{
    const json_t *list = json_object_get(msg, "sockets");
    int rc = 0;

    if (!json_is_array(list) || json_array_size(list) != n_fds) {
        snprintf(err, errlen, "handover: %zu sockets came with a list of %zu", n_fds,
                 json_array_size(list));
        rc = -1;
    }
    for (size_t i = 0; i < n_fds; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(list, i), "role"));
        if (rc == -1 || name == NULL) {
            close(fds[i]);
            continue;
        }
        if (!keep_received(name, fds[i])) {
            snprintf(err, errlen, "handover: socket %zu (%s): unknown role or no address", i, name);
            rc = -1;
        }
    }
    return rc;
}

int px_handover_receive(int chan, const char *version, json_t **state, char *err, size_t errlen)
{
    json_t *hello =
        json_pack("{s:s,s:I,s:s}", "op", "hello", "pid", (json_int_t)getpid(), "version", version);
    int rc = px_handover_send_msg(chan, hello, NULL, 0);
    json_decref(hello);
    if (rc == -1) {
        snprintf(err, errlen, "handover: cannot greet the running egressd: %s", strerror(errno));
        return -1;
    }
    for (;;) {
        int fds[FDS_PER_MSG];
        size_t n_fds;
        json_t *msg = px_handover_recv_msg(chan, fds, FDS_PER_MSG, &n_fds);
        if (msg == NULL) {
            snprintf(err, errlen, "handover: the running egressd %s",
                     errno ? strerror(errno) : "ended the handover early or sent no JSON object");
            return -1;
        }
        const char *op = json_string_value(json_object_get(msg, "op"));
        if (op != NULL && strcmp(op, "end") == 0 && n_fds == 0) {
            json_t *q = json_object_get(msg, "state");
            *state = json_is_object(q) ? json_incref(q) : json_object();
            json_decref(msg);
            return 0;
        }
        rc = op != NULL && strcmp(op, "sockets") == 0 ? take_sockets(msg, fds, n_fds, err, errlen)
                                                      : -1;
        if (op == NULL || strcmp(op, "sockets") != 0) {
            for (size_t i = 0; i < n_fds; i++)
                close(fds[i]);
            snprintf(err, errlen, "handover: unexpected message \"%s\"", op ? op : "(no op)");
        }
        json_decref(msg);
        if (rc == -1)
            return -1;
    }
}
