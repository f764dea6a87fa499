/*
 * sockaddr.c - socket addresses in the three forms the connection code
 * uses (see sockaddr.h).
 */
#include "sockaddr.h"

#include <arpa/inet.h>
#include <string.h>

char *px_put_dec(char *p, unsigned v)
{
    char tmp[10];
    size_t n = 0;

    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

void px_sockaddr_from16(const uint8_t a[16], uint16_t port, union px_sockaddr *ss, socklen_t *len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(ss, 0, sizeof(*ss));
    if (memcmp(a, mapped, 12) == 0) {
        struct sockaddr_in *s4 = &ss->in;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        memcpy(&s4->sin_addr, a + 12, 4);
        *len = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = &ss->in6;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        memcpy(&s6->sin6_addr, a, 16);
        *len = sizeof(*s6);
    }
}

void px_sockaddr_to16(const struct sockaddr *sa, uint8_t a16[16])
{
    memset(a16, 0, 16);
    if (sa->sa_family == AF_INET) {
        a16[10] = a16[11] = 0xff;
        memcpy(a16 + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(a16, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
}

void px_sockaddr_text(const struct sockaddr *sa, char out[PX_SOCKADDR_TEXT_MAX], uint8_t a16[16])
{
    char *p = out;

    px_sockaddr_to16(sa, a16);
    if (sa->sa_family == AF_INET) {
        for (int i = 12; i < 16; i++) {
            p = px_put_dec(p, a16[i]);
            *p++ = i < 15 ? '.' : ':';
        }
        p = px_put_dec(p, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        *p++ = '[';
        inet_ntop(AF_INET6, a16, p, INET6_ADDRSTRLEN);
        p += strlen(p);
        *p++ = ']';
        *p++ = ':';
        p = px_put_dec(p, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    } else {
        *p++ = '?';
    }
    *p = '\0';
}

void px_sockaddr_host_text(const struct sockaddr *sa, char out[PX_SOCKADDR_TEXT_MAX])
{
    uint8_t a[16];

    px_sockaddr_to16(sa, a);
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, a + 12, out, PX_SOCKADDR_TEXT_MAX);
        return;
    }
    out[0] = '[';
    inet_ntop(AF_INET6, a, out + 1, PX_SOCKADDR_TEXT_MAX - 2);
    strcat(out, "]");
}

uint16_t px_sockaddr_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
}

bool px_sockaddr_is(const struct sockaddr *sa, const uint8_t a[16])
{
    uint8_t b[16];

    px_sockaddr_to16(sa, b);
    return memcmp(a, b, 16) == 0;
}
