/*
 * addrwatch.c - this host's own addresses, watched (addrwatch.h has the
 * picture).  rtnetlink(7): the kernel multicasts an RTM_NEWADDR or
 * RTM_DELADDR for every address added, removed or changed to the members
 * of RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR; a member that does not
 * read fast enough loses messages and gets ENOBUFS once (netlink(7)).
 */
#include "addrwatch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "policy_load.h"

/* One read of the socket: netlink(7) asks for at least 8 KiB; an address
 * message is about 100 bytes, so a datagram holds a whole burst. */
#define NL_BUF_BYTES (32 * 1024)
/* Added or removed addresses named one by one in the text of a change;
 * past these, "and N more". */
#define DESCRIBE_MAX 8

struct own_addr {
    uint8_t a[16]; /* as px_ifaddr_to16() gives it */
    char ifname[IF_NAMESIZE];
};

/* The host's addresses, sorted by address, each once. */
struct addr_list {
    struct own_addr *v;
    size_t n;
};

struct px_addrwatch {
    int fd; /* NETLINK_ROUTE, non-blocking */
    struct event *readable, *settle;
    struct addr_list last; /* as of the last refresh on_change took */
    px_addrwatch_fn on_change;
    void *arg;
    uint8_t buf[NL_BUF_BYTES] __attribute__((aligned(NLMSG_ALIGNTO)));
};

/* What one datagram of the socket said. */
enum nl_news {
    NL_NOTHING, /* no address message (or none of IPv4 or IPv6) */
    NL_CHANGED, /* an RTM_NEWADDR or RTM_DELADDR of IPv4 or IPv6 */
    NL_LOST,    /* messages were lost or cannot be read: list anyway */
};

static int cmp_addr(const void *x, const void *y)
{
    return memcmp(((const struct own_addr *)x)->a, ((const struct own_addr *)y)->a, 16);
}

static void list_free(struct addr_list *l)
{
    free(l->v);
    *l = (struct addr_list){NULL, 0};
}

/* List the host's addresses into *out (sorted, each address once, with
 * the first interface getifaddrs names for it).  Returns 0, or -1 with
 * errno set (*out then empty). */
static int list_own(struct addr_list *out)
{
    struct ifaddrs *all;
    size_t cap = 0, n = 0;

    *out = (struct addr_list){NULL, 0};
    if (getifaddrs(&all) == -1)
        return -1;
    for (const struct ifaddrs *i = all; i != NULL; i = i->ifa_next)
        cap++;
    struct own_addr *v = calloc(cap ? cap : 1, sizeof(*v));
    if (v == NULL) {
        freeifaddrs(all);
        errno = ENOMEM;
        return -1;
    }
    for (const struct ifaddrs *i = all; i != NULL; i = i->ifa_next)
        if (i->ifa_addr != NULL && px_ifaddr_to16(i->ifa_addr, v[n].a))
            snprintf(v[n++].ifname, sizeof(v->ifname), "%s", i->ifa_name);
    freeifaddrs(all);
    qsort(v, n, sizeof(*v), cmp_addr);
    size_t kept = 0;
    for (size_t j = 0; j < n; j++)
        if (kept == 0 || memcmp(v[kept - 1].a, v[j].a, 16) != 0)
            v[kept++] = v[j];
    *out = (struct addr_list){v, kept};
    return 0;
}

/* The text form of a 16-byte address (IPv4-mapped as a.b.c.d). */
static void addr_text(const uint8_t a[16], char *out, size_t len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (memcmp(a, mapped, sizeof(mapped)) == 0)
        inet_ntop(AF_INET, a + 12, out, (socklen_t)len);
    else
        inet_ntop(AF_INET6, a, out, (socklen_t)len);
}

/* The text of a change, made one address at a time. */
struct change_text {
    char *out;
    size_t len, used; /* out[len]; out[used] is its '\0' */
    size_t named, more;
};

/* Add "ADDR added on IF" or "ADDR removed from IF" to t, or count it in
 * t->more once DESCRIBE_MAX are named. */
static void describe_one(struct change_text *t, const struct own_addr *x, bool added)
{
    char text[INET6_ADDRSTRLEN];

    if (t->named == DESCRIBE_MAX) {
        t->more++;
        return;
    }
    addr_text(x->a, text, sizeof(text));
    int k = snprintf(t->out + t->used, t->len - t->used, "%s%s %s %s", t->named ? ", " : "", text,
                     added ? "added on" : "removed from", x->ifname);
    if (k > 0)
        t->used += (size_t)k < t->len - t->used ? (size_t)k : t->len - t->used - 1;
    t->named++;
}

/* Name what `now` added to `before` and removed from it, in out (len > 0).
 * Returns how many addresses differ (0: the lists are the same). */
static size_t describe_change(const struct addr_list *before, const struct addr_list *now,
                              char *out, size_t len)
{
    struct change_text t = {out, len, 0, 0, 0};
    size_t i = 0, j = 0;

    out[0] = '\0';
    while (i < before->n || j < now->n) {
        int c = i == before->n ? 1 : j == now->n ? -1 : cmp_addr(&before->v[i], &now->v[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        if (c < 0)
            describe_one(&t, &before->v[i++], false);
        else
            describe_one(&t, &now->v[j++], true);
    }
    if (t.more > 0)
        snprintf(out + t.used, len - t.used, ", and %zu more", t.more);
    return t.named + t.more;
}

/* Arm the refresh `ms` from now, unless it is armed already: the first
 * message of a burst sets when it comes, so a steady stream of changes
 * cannot put it off. */
static void arm(struct px_addrwatch *w, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    if (!evtimer_pending(w->settle, NULL))
        evtimer_add(w->settle, &tv);
}

/* List the addresses again; when they differ from the last list, tell
 * on_change, and take the new list as the last one if it applied it. */
static void on_settle(evutil_socket_t fd, short what, void *arg)
{
    struct px_addrwatch *w = arg;
    struct addr_list now;
    char text[1024];
    (void)fd, (void)what;

    if (list_own(&now) == -1) {
        px_log_warn("cannot list this host's addresses after a change; again in %d ms",
                    PX_ADDRWATCH_RETRY_MS);
        arm(w, PX_ADDRWATCH_RETRY_MS);
        return;
    }
    if (describe_change(&w->last, &now, text, sizeof(text)) == 0 ||
        w->on_change(text, w->arg) == 0) {
        list_free(&w->last);
        w->last = now;
        return;
    }
    list_free(&now);
}

/* NLMSG_OK compares the header's unsigned length with the int it is given
 * (netlink(3)'s own example takes an int): clang says so under -Wextra. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"

/* What the messages of one datagram (n bytes in buf) say.  Every header
 * is checked against the bytes that are there (NLMSG_OK) and every
 * address message against the size of its fixed part; what does not fit
 * is NL_LOST, never read past. */
static enum nl_news read_messages(const uint8_t *buf, size_t n)
{
    enum nl_news news = NL_NOTHING;
    const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
    int left = (int)n;

    for (; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type == NLMSG_OVERRUN)
            return NL_LOST;
        if (h->nlmsg_type != RTM_NEWADDR && h->nlmsg_type != RTM_DELADDR)
            continue; /* NLMSG_NOOP, NLMSG_DONE, an error: nothing of ours */
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct ifaddrmsg)))
            return NL_LOST;
        const struct ifaddrmsg *ifa = NLMSG_DATA(h);
        if (ifa->ifa_family == AF_INET || ifa->ifa_family == AF_INET6)
            news = NL_CHANGED;
    }
    return left <= 0 ? news : NL_LOST; /* below 0: the last one's padding */
}

#pragma GCC diagnostic pop

/* Read every datagram waiting; one that says an address changed, or that
 * messages were lost (ENOBUFS: the socket's buffer overflowed; a datagram
 * cut short; one that does not parse), arms the refresh.  Datagrams not
 * from the kernel are ignored. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct px_addrwatch *w = arg;
    (void)what;

    for (;;) {
        struct sockaddr_nl from;
        struct iovec iov = {w->buf, sizeof(w->buf)};
        struct msghdr msg = {
            .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1};
        ssize_t n = recvmsg(fd, &msg, 0);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == ENOBUFS) {
            px_log_info("netlink: address messages lost (ENOBUFS); listing the addresses again");
            arm(w, PX_ADDRWATCH_SETTLE_MS);
            continue;
        }
        if (n == -1) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                px_log_warn("netlink: reading address changes");
            return;
        }
        if (msg.msg_namelen != sizeof(from) || from.nl_pid != 0)
            continue;
        bool cut = (msg.msg_flags & MSG_TRUNC) != 0;
        enum nl_news news = cut ? NL_LOST : read_messages(w->buf, (size_t)n);
        if (news == NL_LOST)
            px_log_warnx("netlink: a datagram of address messages %s (%zd bytes); listing "
                         "the addresses again",
                         cut ? "cut short" : "that does not parse", n);
        if (news != NL_NOTHING)
            arm(w, PX_ADDRWATCH_SETTLE_MS);
    }
}

/* The socket, bound to the address groups of both families. */
static int open_socket(char *err, size_t errlen)
{
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                             .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);

    if (fd == -1) {
        snprintf(err, errlen, "netlink: socket(NETLINK_ROUTE): %s", strerror(errno));
        return -1;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        snprintf(err, errlen, "netlink: bind to the address groups: %s", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

struct px_addrwatch *px_addrwatch_new(struct event_base *base, px_addrwatch_fn on_change, void *arg,
                                      char *err, size_t errlen)
{
    struct px_addrwatch *w = calloc(1, sizeof(*w));

    if (w == NULL) {
        snprintf(err, errlen, "addrwatch: out of memory");
        return NULL;
    }
    w->on_change = on_change;
    w->arg = arg;
    w->fd = open_socket(err, errlen);
    if (w->fd == -1) {
        free(w);
        return NULL;
    }
    /* Subscribed first, listed second: a change after the listing is a
     * message to come. */
    if (list_own(&w->last) == -1) {
        snprintf(err, errlen, "getifaddrs: cannot list this host's own addresses: %s",
                 strerror(errno));
        close(w->fd);
        free(w);
        return NULL;
    }
    w->readable = event_new(base, w->fd, EV_READ | EV_PERSIST, on_readable, w);
    w->settle = evtimer_new(base, on_settle, w);
    event_add(w->readable, NULL);
    return w;
}

void px_addrwatch_free(struct px_addrwatch *w)
{
    if (w == NULL)
        return;
    event_free(w->readable);
    event_free(w->settle);
    close(w->fd);
    list_free(&w->last);
    free(w);
}
