/*
 * rehello.c - a TLS tunnel's ClientHellos after the first.
 *
 * A server that answers a ClientHello with a HelloRetryRequest (RFC 8446
 * §4.1.4) takes a second, plaintext ClientHello on the same connection, and
 * nothing makes a client name the same host in it.  Checking only the first
 * would let the second reach another host behind the same address (a CDN).
 * So from the relay's start until nothing the client sends can be a
 * ClientHello the server takes (sni_watch, in sni/), every ClientHello the
 * client sends is held back, parsed whole, and must name the host the
 * tunnel was allowed for (no name if the first had none) and carry no ECH
 * unless `ech allow`; else the tunnel closes (`sni_mismatch`, `ech`,
 * `not_tls`, `bad_host`).  Bytes of a record whose kind is not known yet
 * are kept back too.
 *
 * The watch ends at the server's first answer in all but a retry (its
 * ServerHello, an alert, bytes that are not TLS), so it costs a tunnel a
 * few header checks; meanwhile the client's bytes go through the relay's
 * held buffer (copied, not spliced).
 */
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "conn.h"
#include "hello.h"
#include "log.h"
#include "rehello.h"
#include "relay.h"

void px_rehello_start(struct px_conn *c)
{
    struct px_rehello *rh = &c->relay.rh;

    memset(rh, 0, sizeof(*rh));
    rh->on = true;
    sni_watch_init(&rh->w);
}

void px_rehello_free(struct px_rehello *rh)
{
    free(rh->parser);
    free(rh->hello);
    rh->parser = NULL;
    rh->hello = NULL;
    rh->hello_len = 0;
    rh->on = false;
}

/* The watch is over and no ClientHello is being read: stop watching (what
 * was kept back goes on first). */
static void settle_watch(struct px_conn *c)
{
    struct px_rehello *rh = &c->relay.rh;

    if (!sni_watch_over(&rh->w) || rh->parser != NULL)
        return;
    px_relay_hold(&c->relay.d[0], rh->keep, rh->keep_len);
    rh->keep_len = 0;
    px_rehello_free(rh);
}

/* Why a later ClientHello (parser result r) must not go on, or
 * PX_R_ALLOWED: it names the host the tunnel is for (c->rq.host: the CONNECT
 * host, which the first hello named, or the first hello's own name), or
 * none when the first named none; and no ECH unless allowed. */
static enum px_reason judge_hello(const struct px_conn *c, enum sni_result r,
                                  const struct sni_parser *p)
{
    enum px_reason why = px_hello_refused(p, r);

    if (why != PX_R_ALLOWED)
        return why;
    if (r == SNI_NO_SNI)
        return c->rq.sni != NULL ? PX_R_SNI_MISMATCH : PX_R_ALLOWED;
    if (c->rq.sni == NULL ||
        !px_conn_names_host(c, (const char *)p->hello.host.ptr, p->hello.host.len))
        return PX_R_SNI_MISMATCH;
    return PX_R_ALLOWED;
}

/* Close the tunnel for reason r (a later ClientHello's).  Closes. */
static void refuse(struct px_conn *c, enum px_reason r)
{
    char src[PX_SOCKADDR_TEXT_MAX];
    px_log_debug("conn %llu %s: a later ClientHello: %s", (unsigned long long)c->id,
                 px_conn_src_text(c, src), px_reason_str(r));
    px_conn_end_denied(c, r, NULL, "a later ClientHello was refused");
}

enum hello_state {
    HELLO_PASSED,  /* it is whole and may go on (released) */
    HELLO_MORE,    /* more is to come (all held) */
    HELLO_REFUSED, /* refused: closed */
};

/* Feed a ClientHello being read; *took: how many of the n bytes are its. */
static enum hello_state hello_bytes(struct px_conn *c, const uint8_t *p, size_t n, size_t *took)
{
    struct px_rehello *rh = &c->relay.rh;
    size_t before = rh->parser->consumed;
    enum sni_result r = sni_parser_feed(rh->parser, p, n);

    *took = r == SNI_OK || r == SNI_NO_SNI ? rh->parser->hello.record_bytes - before : n;
    rh->hello = realloc(rh->hello, rh->hello_len + *took);
    if (rh->hello == NULL && rh->hello_len + *took > 0)
        abort();
    memcpy(rh->hello + rh->hello_len, p, *took);
    rh->hello_len += *took;
    if (r == SNI_NEED_MORE)
        return HELLO_MORE;
    enum px_reason why = judge_hello(c, r, rh->parser);
    if (why != PX_R_ALLOWED) {
        refuse(c, why);
        return HELLO_REFUSED;
    }
    px_relay_hold(&c->relay.d[0], rh->hello, rh->hello_len);
    free(rh->hello);
    free(rh->parser);
    rh->hello = NULL;
    rh->parser = NULL;
    rh->hello_len = 0;
    return HELLO_PASSED;
}

/* A ClientHello starts: read it with a parser of its own. */
static void hello_start(struct px_rehello *rh)
{
    rh->parser = malloc(sizeof(*rh->parser));
    if (rh->parser == NULL)
        abort();
    sni_parser_init(rh->parser);
}

/* p[0..n) continue the client's stream right after what the watch has
 * seen (nothing kept back in front of them). */
static bool client_stream(struct px_conn *c, const uint8_t *p, size_t n)
{
    struct px_rehello *rh = &c->relay.rh;

    while (n > 0) {
        size_t used;
        if (rh->parser != NULL) {
            if (hello_bytes(c, p, n, &used) == HELLO_REFUSED)
                return false;
            p += used, n -= used;
            continue;
        }
        switch (sni_watch_client(&rh->w, p, n, &used)) {
        case SNI_WATCH_MORE:
            px_relay_hold(&c->relay.d[0], p, used);
            memcpy(rh->keep, p + used, n - used);
            rh->keep_len = (uint8_t)(n - used);
            return true;
        case SNI_WATCH_DONE: px_relay_hold(&c->relay.d[0], p, n); return true;
        case SNI_WATCH_BAD: refuse(c, PX_R_NOT_TLS); return false;
        case SNI_WATCH_HELLO:
            px_relay_hold(&c->relay.d[0], p, used);
            hello_start(rh);
            p += used, n -= used;
            break;
        }
    }
    return true;
}

bool px_rehello_client(struct px_conn *c, const uint8_t *p, size_t n)
{
    struct px_rehello *rh = &c->relay.rh;
    bool ok;

    if (rh->keep_len == 0) {
        ok = client_stream(c, p, n);
    } else {
        /* A header split over two reads: once more with its start in
         * front (rare; a few bytes more). */
        uint8_t *joined = malloc(rh->keep_len + n);
        if (joined == NULL)
            abort();
        memcpy(joined, rh->keep, rh->keep_len);
        memcpy(joined + rh->keep_len, p, n);
        size_t len = rh->keep_len + n;
        rh->keep_len = 0;
        ok = client_stream(c, joined, len);
        free(joined);
    }
    if (ok)
        settle_watch(c);
    return ok;
}

void px_rehello_server(struct px_conn *c, const uint8_t *p, size_t n)
{
    if (sni_watch_server(&c->relay.rh.w, p, n) == SNI_WATCH_DONE)
        settle_watch(c);
}
