/*
 * test_handover.c - the listening sockets passed to an upgrade's successor
 * (proxy/handover.c): the successor claims the very sockets the old
 * process noted (the same kernel sockets, by inode, not new ones), each
 * once, by role and address; what nobody claims is closed; the state
 * carried on arrives whole; a channel that sends garbage is an error naming it.
 * Both ends run in this one process: the messages wait in the socket
 * pair's buffers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "handover.h"
#include "tap.h"

/* A socket of `type` bound to 127.0.0.1:port (SO_REUSEPORT), listening
 * when it is a stream one; its port into *bound. */
static int inet_socket(int type, unsigned short port, unsigned short *bound)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    socklen_t len = sizeof(a);
    int one = 1, fd = socket(AF_INET, type, 0);

    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 ||
        (type == SOCK_STREAM && listen(fd, 8) == -1))
        return -1;
    getsockname(fd, (struct sockaddr *)&a, &len);
    *bound = ntohs(a.sin_port);
    return fd;
}

static struct sockaddr_in at(unsigned short port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    return a;
}

static ino_t inode(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

static int claim_at(enum px_sock_role role, unsigned short port)
{
    struct sockaddr_in a = at(port);
    return px_handover_claim(role, (struct sockaddr *)&a, sizeof(a));
}

int main(void)
{
    unsigned short p1, p2, p3;
    int w0 = inet_socket(SOCK_STREAM, 0, &p1);
    int w1 = inet_socket(SOCK_STREAM, p1, &p1); /* the second worker's, same address */
    int dns = inet_socket(SOCK_DGRAM, 0, &p2);
    int other = inet_socket(SOCK_STREAM, 0, &p3);
    char path[] = "/tmp/test_handover.XXXXXX";
    int tmp = mkstemp(path);
    close(tmp);
    unlink(path);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    int admin = socket(AF_UNIX, SOCK_STREAM, 0);
    ok(w0 >= 0 && w1 >= 0 && dns >= 0 && other >= 0 &&
           bind(admin, (struct sockaddr *)&sun, sizeof(sun)) == 0 && listen(admin, 4) == 0,
       "five listening sockets made (two share 127.0.0.1:%u)", p1);

    px_handover_note(PX_SOCK_PROXY, w0);
    px_handover_note(PX_SOCK_PROXY, w1);
    px_handover_note(PX_SOCK_DNS_UDP, dns);
    px_handover_note(PX_SOCK_TRANSPARENT_TLS, other);
    px_handover_note(PX_SOCK_ADMIN, admin);

    int pair[2];
    char err[512] = "";
    json_t *quota = json_pack("{s:{s:I,s:I},s:I}", "quota", "sbx-a", (json_int_t)12345, "sbx-b",
                              (json_int_t)1, "sandboxes_replaced_s", (json_int_t)42);
    json_t *got = NULL;
    socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair);
    ok(px_handover_send(pair[0], quota, err, sizeof(err)) == 0, "the old side sends (%s)", err);
    ok(px_handover_receive(pair[1], "test", &got, err, sizeof(err)) == 0,
       "the successor receives (%s)", err);
    ok(json_equal(got, quota), "the state (quota counts, when the set was replaced) arrives whole");
    json_decref(got);
    got = NULL;
    ok(px_handover_most() == 2, "the most sockets of one role and address: 2 (%zu)",
       px_handover_most());

    int c1 = claim_at(PX_SOCK_PROXY, p1), c2 = claim_at(PX_SOCK_PROXY, p1);
    ok(c1 >= 0 && c2 >= 0 && c1 != c2, "two proxy sockets on :%u claimed (%d, %d)", p1, c1, c2);
    ok((inode(c1) == inode(w0) && inode(c2) == inode(w1)) ||
           (inode(c1) == inode(w1) && inode(c2) == inode(w0)),
       "they are the old process's own sockets, not new ones");
    ok(claim_at(PX_SOCK_PROXY, p1) == -1, "a third claim of :%u finds none", p1);
    ok(claim_at(PX_SOCK_PROXY, p3) == -1, "the proxy role on another port finds none");
    ok(claim_at(PX_SOCK_DNS_TCP, p2) == -1, "DNS over TCP is not given the UDP socket");
    int u = claim_at(PX_SOCK_DNS_UDP, p2);
    ok(u >= 0 && inode(u) == inode(dns), "the DNS datagram socket is claimed, the same one");
    int a = px_handover_claim(PX_SOCK_ADMIN, (struct sockaddr *)&sun, sizeof(sun));
    ok(a >= 0 && inode(a) == inode(admin), "the admin unix socket is claimed by its path");
    ok(px_handover_close_unclaimed() == 1, "the one unclaimed (transparent TLS) is closed");
    ok(claim_at(PX_SOCK_TRANSPARENT_TLS, p3) == -1, "and cannot be claimed after");

    /* a message that is not JSON */
    int fds[4];
    size_t n_fds;
    send(pair[0], "not json", 8, 0);
    errno = EINVAL;
    ok(px_handover_recv_msg(pair[1], fds, 4, &n_fds) == NULL && errno == 0 && n_fds == 0,
       "a message that is not a JSON object: NULL, errno 0");
    /* a socket list that does not match the sockets sent */
    json_t *bad = json_pack("{s:s,s:[{s:s},{s:s}]}", "op", "sockets", "sockets", "role", "proxy",
                            "role", "proxy");
    px_handover_send_msg(pair[0], bad, &w0, 1);
    json_decref(bad);
    ok(px_handover_receive(pair[1], "test", &got, err, sizeof(err)) == -1 &&
           strstr(err, "1 sockets came with a list of 2") != NULL,
       "a list that does not match its sockets is refused, saying so (%s)", err);
    /* an unknown role */
    bad = json_pack("{s:s,s:[{s:s}]}", "op", "sockets", "sockets", "role", "gopher");
    px_handover_send_msg(pair[0], bad, &w0, 1);
    json_decref(bad);
    ok(px_handover_receive(pair[1], "test", &got, err, sizeof(err)) == -1 &&
           strstr(err, "gopher") != NULL,
       "an unknown role is refused by name (%s)", err);
    /* the old process gone before the end */
    close(pair[0]);
    ok(px_handover_receive(pair[1], "test", &got, err, sizeof(err)) == -1 &&
           strstr(err, "running egressd") != NULL,
       "a channel closed early is an error (%s)", err);
    unlink(path);
    json_decref(quota);
    return tap_done();
}
