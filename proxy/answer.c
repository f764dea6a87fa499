/*
 * answer.c - the deny and fail contract: what egressd answers when it
 * refuses a request or cannot carry it out, and then closes.
 *
 *   deny (policy, ClientHello checks, revoked)
 *       HTTP client: 403, X-Egress-Deny: REASON[; rule=FILE:LINE], a body
 *       naming the target
 *       TLS client:  a fatal access_denied alert
 *   refusal by egressd itself (bad request, limit, unknown credentials)
 *       4xx/5xx with X-Egress-Deny: REASON and what was wrong
 *   failure on the way (dns_fail, connect_fail, timeout)
 *       5xx with an RFC 9209 Proxy-Status error word; the policy's verdict
 *       (which allowed the request) stays in the log
 *
 * Every answer ends in px_conn_flush_close() (conn.c): the line is logged,
 * the connection stops counting as open, and the answer is read before
 * the socket closes.
 */
#include <assert.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "answer.h"
#include "conn.h"

/* A fatal TLS alert, access_denied (RFC 8446 section 6.2). */
static const uint8_t tls_alert_denied[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x31};

static const char *status_text(unsigned s)
{
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 407: return "Proxy Authentication Required";
    case 411: return "Length Required";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 426: return "Upgrade Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    }
    return "Error";
}

/* Whether the client still expects an HTTP answer (not a TLS stream). */
static bool speaks_http(const struct px_conn *c)
{
    if (c->mode == PX_MODE_INTERCEPT)
        return true; /* HTTP inside the TLS egressd terminated */
    if (c->l->kind == PX_L_TLS)
        return false;
    return c->mode != PX_MODE_CONNECT || c->state == PX_S_HEAD || c->state == PX_S_RESOLVE ||
           c->state == PX_S_CONNECT;
}

/* Queue the whole answer: status line, extra_header lines, body. */
static void answer(struct px_conn *c, unsigned status, const char *extra_header, const char *body)
{
    struct evbuffer *out = bufferevent_get_output(c->cli);

    c->rq.status = status;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %u %s\r\n%sContent-Type: text/plain; charset=utf-8\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                        status, status_text(status), extra_header ? extra_header : "", strlen(body),
                        body);
}

/* The decision is final: deny with reason r. */
static void set_denied(struct px_conn *c, enum px_reason r)
{
    c->rq.reason = r;
    c->rq.decision = POLICY_DENY;
    c->rq.decided = true;
    px_conn_ended(c, px_end_of_reason(r));
}

/* The 403 of a denial: the reason, the rule (if one decided) and the
 * target, in the header and the body alike. */
static void answer_denied(struct px_conn *c, enum px_reason r)
{
    char rule[512], hdr[700], body[1024];
    const char *rt = px_conn_rule_text(c, rule, sizeof(rule));
    const char *target = c->rq.host.len ? c->rq.host.text : c->raw_host;

    if (rt != NULL) {
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s; rule=%s\r\n", px_reason_str(r), rt);
        snprintf(body, sizeof(body), "egressd: denied (%s; rule=%s): %s:%u\n", px_reason_str(r), rt,
                 target, c->rq.port);
    } else {
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s\r\n", px_reason_str(r));
        snprintf(body, sizeof(body), "egressd: denied (%s): %s:%u\n", px_reason_str(r), target,
                 c->rq.port);
    }
    answer(c, 403, hdr, body);
}

void px_conn_deny(struct px_conn *c, enum px_reason r)
{
    set_denied(c, r);
    if (!speaks_http(c)) {
        /* A TLS client is a raw socket; at most the 200 went out before,
         * so the socket takes these 7 bytes.  MSG_MORE holds them for the
         * FIN that px_conn_flush_close sends next: one segment, not two. */
        assert(c->rc.ev != NULL);
        (void)send(c->rc.fd, tls_alert_denied, sizeof(tls_alert_denied),
                   MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
    } else {
        answer_denied(c, r);
    }
    px_conn_flush_close(c);
}

void px_conn_deny_unruled(struct px_conn *c, enum px_reason r)
{
    memset(&c->rq.v.rule, 0, sizeof(c->rq.v.rule));
    px_conn_deny(c, r);
}

void px_conn_end_denied(struct px_conn *c, enum px_reason r, const struct policy_rule_ref *rule,
                        const char *why)
{
    if (rule != NULL)
        c->rq.v.rule = *rule;
    else
        memset(&c->rq.v.rule, 0, sizeof(c->rq.v.rule));
    set_denied(c, r);
    px_conn_close(c, why);
}

/* Whether egressd itself refuses with r (a deny), rather than failing on
 * the way to an origin the policy allowed. */
static bool is_refusal(unsigned status, enum px_reason r)
{
    return r == PX_R_BAD_REQUEST || r == PX_R_LIMIT || r == PX_R_NOT_ALLOWED ||
           (r == PX_R_TIMEOUT && status == 408);
}

/* The RFC 9209 Proxy-Status error word of failure r. */
static const char *proxy_status_error(enum px_reason r)
{
    switch (r) {
    case PX_R_DNS_FAIL: return "dns_error";
    case PX_R_CONNECT_FAIL: return "connection_refused";
    case PX_R_TIMEOUT: return "connection_timeout";
    case PX_R_UPSTREAM_TLS: return "tls_certificate_error";
    default: return "proxy_internal_error";
    }
}

void px_conn_fail(struct px_conn *c, unsigned status, enum px_reason r, const char *detail)
{
    char hdr[256] = "", body[512];
    bool refusal = is_refusal(status, r);

    c->rq.reason = r;
    if (refusal)
        c->rq.decision = POLICY_DENY;
    c->rq.decided = true;
    px_conn_ended(c, px_end_of_reason(r));
    if (!speaks_http(c)) {
        px_conn_flush_close(c);
        return;
    }
    if (refusal) {
        /* Refused by egressd itself, not a network fault: the deny contract,
         * with what was wrong in place of the target. */
        snprintf(hdr, sizeof(hdr), "X-Egress-Deny: %s\r\n%s", px_reason_str(r),
                 status == 407   ? "Proxy-Authenticate: Basic realm=\"egressd\"\r\n"
                 : status == 426 ? "Upgrade: HTTP/1.1\r\n" /* (RFC 9110 15.5.22: stay on it) */
                                 : "");
        snprintf(body, sizeof(body), "egressd: denied (%s): %s\n", px_reason_str(r), detail);
    } else {
        snprintf(hdr, sizeof(hdr), "Proxy-Status: egressd; error=%s\r\n", proxy_status_error(r));
        snprintf(body, sizeof(body), "egressd: %s (%s)\n", detail, px_reason_str(r));
    }
    answer(c, status, hdr, body);
    px_conn_flush_close(c);
}

void px_conn_deny_reply(struct px_conn *c, enum px_reason r, unsigned status, const char *type,
                        const char *body, size_t len)
{
    char rule[512];
    const char *rt;

    set_denied(c, r);
    rt = px_conn_rule_text(c, rule, sizeof(rule));
    c->rq.status = status;
    evbuffer_add_printf(bufferevent_get_output(c->cli),
                        "HTTP/1.1 %u %s\r\nX-Egress-Deny: %s%s%s\r\nContent-Type: %s\r\n"
                        "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n"
                        "\r\n",
                        status, status_text(status), px_reason_str(r), rt ? "; rule=" : "",
                        rt ? rt : "", type, len);
    evbuffer_add(bufferevent_get_output(c->cli), body, len);
    c->bytes_down += len;
    px_conn_flush_close(c);
}

void px_conn_reply(struct px_conn *c, unsigned status, const char *type, const char *body,
                   size_t len)
{
    struct evbuffer *out = bufferevent_get_output(c->cli);

    c->rq.status = status;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                        status, status_text(status), type, len);
    evbuffer_add(out, body, len);
    c->bytes_down += len;
    px_conn_flush_close(c);
}
