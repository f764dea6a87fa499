/*
 * hello.c - the ClientHello phase: a transparent TLS connection (decided
 * on the hello's SNI) and a CONNECT tunnel after its 200 (checked: the
 * SNI must name the CONNECT's host).  The client's bytes are kept in
 * c->early as they come (client.c) and fed to sni/'s parser here; once
 * the hello passes, the relay starts with them as they are, and rehello.c
 * watches what follows.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "client.h"
#include "conn.h"
#include "hello.h"
#include "intercept.h"
#include "judge.h"
#include "relay.h"

bool px_conn_names_host(const struct px_conn *c, const char *name, size_t len)
{
    struct policy_host h;

    return policy_host_normalize(name, len, &h) == POLICY_HOST_OK &&
           strcmp(h.text, c->rq.host.text) == 0;
}

/* CONNECT without SNI: allowed when the policy allows the address it goes
 * to as an IP literal, by the one decision on that literal and its address
 * (or `require-sni off`). */
static bool literal_allowed(struct px_conn *c)
{
    struct policy_host h;
    struct policy_verdict v;
    char ip[PX_SOCKADDR_TEXT_MAX];

    if (c->rq.host.kind != POLICY_HOST_NAME || !px_d.cfg->require_sni)
        return true;
    px_sockaddr_host_text(&c->up_ss.sa, ip);
    if (policy_host_normalize(ip, strlen(ip), &h) != POLICY_HOST_OK)
        return false;
    return policy_decide(c->pb, &h, c->rq.port, (const uint8_t(*)[16])h.addr, 1,
                         (int64_t)time(NULL), &v) != POLICY_DENY;
}

void px_hello_on_timeout(struct px_conn *c)
{
    px_conn_end_denied(c, PX_R_TIMEOUT, NULL, "no ClientHello in time");
}

enum px_reason px_hello_refused(const struct sni_parser *p, enum sni_result r)
{
    if (r == SNI_NOT_TLS)
        return PX_R_NOT_TLS;
    if (r == SNI_MALFORMED)
        return sni_error_is_name(p->error) ? PX_R_BAD_HOST : PX_R_NOT_TLS;
    if (p->hello.ech && !px_d.cfg->ech_allow)
        return PX_R_ECH;
    return PX_R_ALLOWED;
}

/* CONNECT: the SNI must name the CONNECT's host; without one, the address
 * must be allowed as a literal.  PX_R_ALLOWED, or why not. */
static enum px_reason connect_hello_check(struct px_conn *c, enum sni_result r)
{
    if (r == SNI_OK && !px_conn_names_host(c, c->rq.sni, strlen(c->rq.sni)))
        return PX_R_SNI_MISMATCH;
    if (r == SNI_NO_SNI && !literal_allowed(c))
        return PX_R_NO_SNI;
    return PX_R_ALLOWED;
}

static void tls_ready(struct px_conn *c);

/* Transparent TLS: the SNI is the host, on the port the client aimed at
 * (or the listener's upstream port); judge it. */
static void judge_sni(struct px_conn *c)
{
    if (c->rq.sni == NULL) {
        px_conn_deny(c, PX_R_NO_SNI);
        return;
    }
    c->rq.port = c->redirected ? px_sockaddr_port(&c->orig_dst.sa) : c->l->upstream_port;
    if (policy_host_normalize(c->rq.sni, strlen(c->rq.sni), &c->rq.host) != POLICY_HOST_OK) {
        c->rq.host.len = 0;
        px_conn_keep_raw_host(c, c->rq.sni, strlen(c->rq.sni));
        px_conn_deny(c, PX_R_BAD_HOST);
        return;
    }
    px_request_share_sni(&c->rq);
    px_conn_judge(c, NULL, 0, tls_ready);
}

/* The hello is complete (result r): check it (CONNECT) or decide on it
 * (transparent).  May close. */
static void hello_done(struct px_conn *c, enum sni_result r)
{
    const struct sni_hello *h = &c->hello->hello;
    enum px_reason why = px_hello_refused(c->hello, r);

    if (r == SNI_OK) { /* also for a hello refused for ECH: the log names its outer name */
        px_request_set_sni(&c->rq, (const char *)h->host.ptr, h->host.len);
    }
    c->hello_len = h->record_bytes; /* the relay watches what follows (rehello.c) */
    if (why == PX_R_ALLOWED && c->mode == PX_MODE_CONNECT)
        why = connect_hello_check(c, r);
    free(c->hello);
    c->hello = NULL;
    if (why != PX_R_ALLOWED) {
        px_conn_deny_unruled(c, why);
        return;
    }
    if (c->mode == PX_MODE_CONNECT && c->rq.intercept)
        px_intercept_start(c);
    else if (c->mode == PX_MODE_CONNECT)
        px_relay_start(c);
    else
        judge_sni(c);
}

void px_hello_feed(struct px_conn *c)
{
    size_t seen = c->hello->consumed;
    enum sni_result r = c->hello->result;

    if (c->early_len > seen)
        r = sni_parser_feed(c->hello, c->early + seen, c->early_len - seen);
    if (r == SNI_NEED_MORE)
        return;
    hello_done(c, r);
}

static const char connect_ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

void px_hello_connect_ready(struct px_conn *c)
{
    /* From the 200 on nothing of the client is parsed but its hello. */
    if (!px_client_to_raw(c))
        return;
    c->rq.status = 200;
    if (send(c->rc.fd, connect_ok, sizeof(connect_ok) - 1, MSG_NOSIGNAL) !=
        (ssize_t)sizeof(connect_ok) - 1) {
        /* Nothing was sent before: only a client that is gone does not
         * take 39 bytes. */
        px_conn_ended(c, PX_END_CLIENT);
        px_conn_close(c, "client error");
        return;
    }
    if (c->rq.v.raw) {
        px_relay_start(c);
        return;
    }
    px_hello_start(c);
}

/* Transparent TLS: the origin is connected; the bytes go on as they are,
 * or through egressd's own TLS when credentials are added (intercept.c). */
static void tls_ready(struct px_conn *c)
{
    if (c->rq.intercept)
        px_intercept_start(c);
    else
        px_relay_start(c);
}

void px_hello_start(struct px_conn *c)
{
    c->hello = malloc(sizeof(*c->hello));
    if (c->hello == NULL)
        abort();
    sni_parser_init(c->hello);
    if (c->state != PX_S_HELLO)
        px_conn_set_state(c, PX_S_HELLO, px_hello_on_timeout);
    px_conn_timeout(c, px_d.cfg->timeout_header_ms);
    px_hello_feed(c); /* what came with the CONNECT head */
}
