/*
 * sockaddr.h - socket addresses as the connection code needs them: the
 * 16-byte form the policy judges (IPv4 as ::ffff:a.b.c.d), the
 * "ADDR:PORT" text the log writes, and back.  Pure: no I/O.
 */
#ifndef PX_SOCKADDR_H
#define PX_SOCKADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 socket address in the room of the larger, 28 bytes (a
 * sockaddr_storage takes 128: a connection holds two). */
union px_sockaddr {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

/* The longest "ADDR:PORT" or "[v6]:PORT" text, with its '\0'. */
#define PX_SOCKADDR_TEXT_MAX (INET6_ADDRSTRLEN + 8)

/* The socket address of 16-byte address a and port; *len its length. */
void px_sockaddr_from16(const uint8_t a[16], uint16_t port, union px_sockaddr *ss, socklen_t *len);
/* The 16-byte form of sa; zeros for a family other than IPv4 and IPv6. */
void px_sockaddr_to16(const struct sockaddr *sa, uint8_t a16[16]);
/* "ADDR:PORT" ("[v6]:PORT", "?" for another family) into out, and the
 * 16-byte form into a16.  Written by hand: it runs twice per connection,
 * and printf was a visible part of a short tunnel's user time. */
void px_sockaddr_text(const struct sockaddr *sa, char out[PX_SOCKADDR_TEXT_MAX], uint8_t a16[16]);
/* The address's bare text as a policy host: "a.b.c.d" or "[v6]". */
void px_sockaddr_host_text(const struct sockaddr *sa, char out[PX_SOCKADDR_TEXT_MAX]);
/* The port of an IPv4 or IPv6 address, in host order. */
uint16_t px_sockaddr_port(const struct sockaddr *sa);
/* Whether ss is the 16-byte address a (the port not compared). */
bool px_sockaddr_is(const struct sockaddr *sa, const uint8_t a[16]);
/* `v` in decimal at p (no '\0'); returns the end.  For text written on
 * every connection, where printf showed in the profile. */
char *px_put_dec(char *p, unsigned v);

#endif
