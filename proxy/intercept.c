/*
 * intercept.c - credential injection (docs/credentials.md): a CONNECT to
 * a host whose `inject` rule binds one of the sandbox's secrets is
 * terminated here instead of relayed.
 *
 *   CONNECT checked, 200, ClientHello checked (hello.c: SNI = CONNECT host)
 *     ─▶ TLS toward the client with a leaf for exactly that host (certs.c),
 *        TLS toward the origin, verified, SNI and name = that host
 *     ─▶ each HTTP/1.1 request: its Host must name the CONNECT host, the
 *        judge decides it (judge.c, the current world), then its head gets
 *        the sandbox's credentials (http_cred_apply) and goes on through
 *        the exchange code (exchange.c), the response streaming back
 *
 * One upstream TLS connection serves the whole client connection; when
 * the origin ends it, the client's connection ends after that response.
 * Every other host stays an opaque, SNI-checked tunnel (relay.c).
 */
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"
#include "ca.h"
#include "certs.h"
#include "client.h"
#include "conn.h"
#include "exchange.h"
#include "gate.h"
#include "intercept.h"
#include "judge.h"
#include "log.h"
#include "logins.h"
#include "metrics.h"
#include "oauth.h"
#include "placeholder.h"
#include "prefixbio.h"
#include "request.h"
#include "secrets.h"
#include "tokenep.h"

#define INJECTS_MAX              8           /* inject rules of one host looked at */
#define SCRATCH_BYTES            (64 * 1024) /* the substituted values of one head */
#define HTTP_STATUS_UNAUTHORIZED 401

/* The HTTP/2 connection preface (RFC 9113 section 3.4). */
static const char h2_preface[] = "PRI * HTTP/2.0\r\n";

/* ------------------------------------------------------------ the plan */

/* The inject rule of c's binding that binds secret `name` to host:port
 * now, or NULL. */
static const struct policy_inject *rule_for(const struct px_conn *c, const struct policy_host *host,
                                            uint16_t port, const char *name)
{
    const struct policy_inject *inj[INJECTS_MAX];
    size_t n = policy_injects_for(c->pb, host, port, (int64_t)time(NULL), inj, INJECTS_MAX);

    for (size_t i = 0; i < n && i < INJECTS_MAX; i++)
        if (strcmp(inj[i]->secret, name) == 0)
            return inj[i];
    return NULL;
}

bool px_intercept_wanted(const struct px_conn *c)
{
    const struct policy_inject *inj[INJECTS_MAX];

    if ((c->mode != PX_MODE_CONNECT && c->mode != PX_MODE_TLS) || c->sb == NULL ||
        c->sb->ca == NULL || c->rq.v.raw)
        return false;
    if (c->rq.v.requests || c->rq.v.push) /* request rules: each request judged inside */
        return ca_authority_permits(c->sb->ca, c->rq.host.text);
    if (!c->rq.v.inject)
        return false;
    size_t n =
        policy_injects_for(c->pb, &c->rq.host, c->rq.port, (int64_t)time(NULL), inj, INJECTS_MAX);
    for (size_t i = 0; i < n && i < INJECTS_MAX; i++)
        if (px_sandbox_has_secret(c->sb, inj[i]->secret))
            return true;
    return false;
}

/* ------------------------------------------------------------ credentials */

static enum http_cred_kind cred_kind(enum policy_inject_kind k)
{
    switch (k) {
    case POLICY_INJECT_X_API_KEY: return HTTP_CRED_X_API_KEY;
    case POLICY_INJECT_BEARER: return HTTP_CRED_BEARER;
    case POLICY_INJECT_BASIC: return HTTP_CRED_BASIC;
    case POLICY_INJECT_HEADER:
    case POLICY_INJECT_TOKEN_ENDPOINT: break; /* (never asked: creds_of skips it) */
    }
    return HTTP_CRED_HEADER;
}

/* The credentials of a request: each secret of the sandbox's binding with
 * its placeholder, once per inject rule binding it to the request's host
 * (bound, in that rule's shape: alternatives, http.h), or once unbound. */
struct cred_table {
    struct http_cred cr[HTTP_CRED_MAX];
    uint8_t secret[HTTP_CRED_MAX]; /* cr[k] is of c->sb->secrets[secret[k]] */
    char ph[PX_SANDBOX_MAX_SECRETS][PX_PLACEHOLDER_MAX];
    char rph[PX_SANDBOX_MAX_SECRETS][PX_PLACEHOLDER_MAX]; /* a login's refresh placeholder */
    size_t n;
    /* A login's current access token (logins.h), copied for this request
     * (wiped after it), and its generation; tok_len[i] 0: not copied. */
    char tok[PX_SANDBOX_MAX_SECRETS][OAUTH_TOKEN_MAX + 1];
    size_t tok_len[PX_SANDBOX_MAX_SECRETS];
    uint64_t tok_gen[PX_SANDBOX_MAX_SECRETS];
};

/* The value of secret i (`name`) for this request: a login's current
 * access token, or the store's value.  False when there is none. */
static bool value_of(struct cred_table *t, size_t i, const struct px_secrets *store,
                     const char *name, struct http_view *v)
{
    if (!px_secrets_login(store, name, NULL))
        return px_secrets_get(store, name, &v->p, &v->len);
    if (t->tok_len[i] == 0 &&
        !px_login_token(name, t->tok[i], sizeof(t->tok[i]), &t->tok_len[i], &t->tok_gen[i]))
        return false;
    v->p = t->tok[i];
    v->len = t->tok_len[i];
    return true;
}

/* Wipe the login tokens t copied. */
static void wipe_tokens(struct cred_table *t)
{
    for (size_t i = 0; i < PX_SANDBOX_MAX_SECRETS; i++)
        if (t->tok_len[i] != 0) {
            explicit_bzero(t->tok[i], t->tok_len[i]);
            t->tok_len[i] = 0;
        }
}

/* Add secret i's credential, placeholder ph, in rule r's shape (NULL:
 * unbound). */
static void add_cred(struct cred_table *t, size_t i, struct http_view ph,
                     const struct policy_inject *r, const struct px_secrets *store,
                     const char *name)
{
    struct http_cred *cr = &t->cr[t->n];

    /* (unbound: any sight of the placeholder is FOREIGN, whatever field) */
    *cr = (struct http_cred){.kind = HTTP_CRED_X_API_KEY, .field = "x-api-key", .placeholder = ph};
    if (r != NULL && value_of(t, i, store, name, &cr->secret)) {
        cr->kind = cred_kind(r->kind);
        cr->field = r->field;
        cr->bound = true;
    }
    t->secret[t->n++] = (uint8_t)i;
}

/* The table of c's sandbox for its request (px_conn_asked) to host:port
 * (NULL: none is bound), with the current world's secrets: an inject rule
 * with `methods`/`paths` binds its secret only in a request it admits. */
static void creds_of(const struct px_conn *c, const struct policy_host *host, uint16_t port,
                     struct cred_table *t)
{
    const struct policy_inject *inj[INJECTS_MAX];
    size_t n_inj = host != NULL ? policy_injects_for_request(c->pb, host, port, px_conn_asked(c),
                                                             (int64_t)time(NULL), inj, INJECTS_MAX)
                                : 0;

    t->n = 0;
    for (size_t i = 0; c->sb != NULL && i < c->sb->n_secrets; i++) {
        const char *name = c->sb->secrets[i];
        size_t len =
            px_placeholder(px_d.placeholder_key, c->sb->id, name, t->ph[i], sizeof(t->ph[i]));
        struct http_view ph = {t->ph[i], len};
        size_t before = t->n;
        for (size_t k = 0; k < n_inj && k < INJECTS_MAX && t->n < HTTP_CRED_MAX; k++)
            if (strcmp(inj[k]->secret, name) == 0 && inj[k]->kind != POLICY_INJECT_TOKEN_ENDPOINT)
                add_cred(t, i, ph, inj[k], c->world->secrets, name);
        if (t->n == before && t->n < HTTP_CRED_MAX)
            add_cred(t, i, ph, NULL, NULL, name);
        /* A login's refresh placeholder goes only into a token request's
         * body (tokenep.c): in any header it is out of place. */
        if (px_secrets_login(c->world->secrets, name, NULL) && t->n < HTTP_CRED_MAX) {
            size_t rlen = px_placeholder_refresh(px_d.placeholder_key, c->sb->id, name, t->rph[i],
                                                 sizeof(t->rph[i]));
            add_cred(t, i, (struct http_view){t->rph[i], rlen}, NULL, NULL, name);
        }
    }
}

bool px_placeholder_seen(const struct px_conn *c)
{
    static _Thread_local struct cred_table t;

    if (c->sb == NULL || c->sb->n_secrets == 0 || c->ex == NULL || c->ex->pending == NULL)
        return false;
    creds_of(c, NULL, 0, &t);
    for (size_t k = 0; k < t.n; k++) {
        struct evbuffer_ptr at =
            evbuffer_search(c->ex->pending, t.cr[k].placeholder.p, t.cr[k].placeholder.len, NULL);
        if (at.pos != -1) {
            const char *name = c->sb->secrets[t.secret[k]];
            px_log_info("conn %llu: sandbox %s sent the placeholder of secret '%s' to %s: denied",
                        (unsigned long long)c->id, c->sb->id, name, c->rq.host.text);
            px_metrics_injection(name, PX_INJ_MISMATCH);
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------ the two TLS legs */

/* The upstream leg's handshake ended (what: the bufferevent's event). */
static void on_up_tls(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    struct px_intercept *ic = c->ic;

    if (what & BEV_EVENT_CONNECTED) {
        ic->up_ready = true;
        bufferevent_setcb(bev, NULL, NULL, NULL, NULL);
        if (ic->waiting)
            px_intercept_request(c);
        return;
    }
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(bev);
    ic->up_failed = true;
    ic->cert_error = vr != X509_V_OK;
    if (vr != X509_V_OK)
        snprintf(ic->up_error, sizeof(ic->up_error), "the origin's certificate: %s",
                 X509_verify_cert_error_string(vr));
    else if (e != 0)
        ERR_error_string_n(e, ic->up_error, sizeof(ic->up_error));
    else
        snprintf(ic->up_error, sizeof(ic->up_error), "the origin closed during the handshake");
    ERR_clear_error();
    px_log_info("conn %llu: TLS to %s:%u failed: %s", (unsigned long long)c->id, ic->host.text,
                ic->port, ic->up_error);
    if (ic->waiting)
        px_intercept_request(c);
}

/* Start the upstream leg on the connected socket c->ru. */
static void start_upstream_tls(struct px_conn *c)
{
    SSL *ssl = SSL_new(px_certs_upstream());
    int fd = c->ru.fd;

    if (ssl == NULL)
        abort();
    SSL_set_tlsext_host_name(ssl, c->ic->host.text);
    SSL_set1_host(ssl, c->ic->host.text);
    px_upstream_session(c->w->leaves, ssl, c->ic->host.text);
    event_free(c->ru.ev);
    c->ru.ev = NULL;
    c->up = bufferevent_openssl_socket_new(c->w->base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                           BEV_OPT_CLOSE_ON_FREE);
    if (c->up == NULL)
        abort();
    bufferevent_openssl_set_allow_dirty_shutdown(c->up, 1);
    bufferevent_setcb(c->up, NULL, NULL, on_up_tls, c);
    bufferevent_enable(c->up, EV_READ);
}

/* Start the client leg on c->rc, with the ClientHello already read
 * (c->early); false when no leaf could be made (closed). */
static bool start_client_tls(struct px_conn *c)
{
    char err[256];
    SSL_CTX *ctx = px_leaf_ctx(c->w->leaves, c->sb->ca, c->sb->ca_serial, c->sb->id,
                               c->ic->host.text, err, sizeof(err));
    if (ctx == NULL) {
        px_log_warnx("conn %llu: no leaf for %s: %s", (unsigned long long)c->id, c->ic->host.text,
                     err);
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "no certificate for the host");
        return false;
    }
    SSL *ssl = SSL_new(ctx);
    if (ssl == NULL)
        abort();
    int fd = c->rc.fd;
    BIO *bio = px_prefix_bio(fd, c->early, c->early_len);
    SSL_set_bio(ssl, bio, bio);
    c->early = NULL; /* the BIO has it */
    c->early_len = 0;
    event_free(c->rc.ev);
    c->rc.ev = NULL;
    c->cli = bufferevent_openssl_socket_new(c->w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                            BEV_OPT_CLOSE_ON_FREE);
    if (c->cli == NULL)
        abort();
    bufferevent_openssl_set_allow_dirty_shutdown(c->cli, 1);
    return true;
}

/* Note in c->rq.inject the names of the sandbox's secrets in mask (bit i:
 * its i-th), "a,b". */
static void note_secrets(struct px_conn *c, uint32_t mask)
{
    char names[96] = "";
    size_t off = 0;

    for (size_t i = 0; i < c->sb->n_secrets && i < 32; i++) {
        if (!(mask & (1u << i)))
            continue;
        int k =
            snprintf(names + off, sizeof(names) - off, "%s%s", off ? "," : "", c->sb->secrets[i]);
        if (k < 0 || (size_t)k >= sizeof(names) - off)
            break;
        off += (size_t)k;
    }
    px_request_set_inject(&c->rq, names);
}

/* Note in c->rq.inject the names of the secrets bound to the CONNECT's
 * host (for its line). */
static void note_bound(struct px_conn *c)
{
    uint32_t mask = 0;

    for (size_t i = 0; i < c->sb->n_secrets && i < 32; i++)
        if (rule_for(c, &c->rq.host, c->rq.port, c->sb->secrets[i]) != NULL)
            mask |= 1u << i;
    note_secrets(c, mask);
}

void px_intercept_start(struct px_conn *c)
{
    c->ic = calloc(1, sizeof(*c->ic));
    if (c->ic == NULL)
        abort();
    px_conn_on_release(c, px_intercept_free);
    px_exchange_new(c);
    c->ic->host = c->rq.host;
    c->ic->port = c->rq.port;
    note_bound(c);
    px_conn_log(c); /* the CONNECT's own line: the tunnel is intercepted */
    if (!start_client_tls(c))
        return;
    start_upstream_tls(c);
    c->mode = PX_MODE_INTERCEPT;
    c->ex->upstream_keep_alive = true;
    px_request_reset(c);
    px_conn_set_state(c, PX_S_HEAD, px_request_on_head_timeout);
    px_conn_watch_client(c);
    px_conn_timeout(c, px_d.cfg->timeout_header_ms);
}

void px_intercept_client_error(struct px_conn *c)
{
    unsigned long e = c->cli != NULL ? bufferevent_get_openssl_error(c->cli) : 0;
    int r = ERR_GET_REASON(e);

    if (r != SSL_R_TLSV1_ALERT_UNKNOWN_CA && r != SSL_R_SSLV3_ALERT_BAD_CERTIFICATE &&
        r != SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN)
        return;
    px_log_warnx("conn %llu: sandbox %s refused egressd's certificate for %s (%s): its guest may "
                 "not hold its current sandbox CA; sandboxctl sync installs it",
                 (unsigned long long)c->id, c->sb != NULL ? c->sb->id : "default",
                 c->ic != NULL ? c->ic->host.text : "?", ERR_reason_error_string(e));
}

void px_intercept_free(struct px_conn *c)
{
    if (c->ic != NULL)
        px_gate_free(c->ic->gate);
    px_tokenep_free(c);
    free(c->ic);
    c->ic = NULL;
}

/* ------------------------------------------------------------ requests */

/* Every request inside the tunnel is for its host, port and SNI (so are
 * the log lines of those refused before their Host is read). */
static void take_tunnel_target(struct px_conn *c)
{
    c->rq.host = c->ic->host;
    c->rq.port = c->ic->port;
    /* (a name: hello.c checked the SNI names it) */
    px_request_set_sni(&c->rq, c->ic->host.text, c->ic->host.len);
}

/* The request's Upgrade, if it has one: WebSocket is served (upgrade.c
 * relays it once the origin agrees); any other is refused with a 426, on
 * which clients go on without it at once.  False when refused (closed). */
static bool upgrade_served(struct px_conn *c, const struct http_request *req)
{
    switch (http_request_upgrade(req)) {
    case HTTP_UPGRADE_NONE: return true;
    case HTTP_UPGRADE_WEBSOCKET: c->ex->upgrade = true; return true;
    case HTTP_UPGRADE_OTHER: break;
    }
    px_log_info("conn %llu: %s: refused an Upgrade other than WebSocket", (unsigned long long)c->id,
                c->ic->host.text);
    px_conn_fail(c, 426, PX_R_BAD_REQUEST,
                 "only a WebSocket upgrade is served inside an intercepted tunnel");
    return false;
}

bool px_intercept_target(struct px_conn *c, const struct http_request *req)
{
    struct policy_host h;

    take_tunnel_target(c);
    if (!upgrade_served(c, req))
        return false;
    if (req->form != HTTP_FORM_ORIGIN || !req->has_host_header) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST,
                     "an intercepted request needs an origin-form target and a Host field");
        return false;
    }
    if (!px_request_host_field(req->host_header, &h, c->ic->port) ||
        strcmp(h.text, c->ic->host.text) != 0) {
        px_conn_keep_raw_host(c, req->host_header.p, req->host_header.len);
        px_conn_deny_unruled(c, PX_R_SNI_MISMATCH);
        return false;
    }
    return true;
}

bool px_intercept_refuses_h2(struct px_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t n = evbuffer_get_length(in), k = sizeof(h2_preface) - 1;

    if (n > k)
        n = k;
    if (n < 4 || memcmp(evbuffer_pullup(in, (ev_ssize_t)n), h2_preface, n) != 0)
        return false;
    take_tunnel_target(c);
    memcpy(c->rq.method, "PRI", 4);
    px_log_info("conn %llu: %s: refused the HTTP/2 preface (only HTTP/1.1 is intercepted)",
                (unsigned long long)c->id, c->ic->host.text);
    px_conn_fail(c, 400, PX_R_BAD_REQUEST,
                 "HTTP/2 is not served inside an intercepted tunnel (ALPN http/1.1)");
    return true;
}

/* http_cred_apply refused the head (r, about t's credential `which`):
 * deny or fail it.  Closes. */
static void refuse(struct px_conn *c, const struct cred_table *t, enum http_cred_result r,
                   size_t which)
{
    const char *name = c->sb->secrets[which < t->n ? t->secret[which] : 0];

    switch (r) {
    case HTTP_CRED_NO_ROOM:
        px_conn_fail(c, 431, PX_R_BAD_REQUEST, "the credentials do not fit the request head");
        return;
    case HTTP_CRED_BAD_CRED:
        px_log_warnx("conn %llu: secret '%s' cannot go in an HTTP header",
                     (unsigned long long)c->id, name);
        px_metrics_injection(name, PX_INJ_UNAVAILABLE);
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "a secret bound to this host cannot be sent");
        return;
    default:
        px_log_info("conn %llu: sandbox %s sent the placeholder of secret '%s' where it does not "
                    "go (%s): denied",
                    (unsigned long long)c->id, c->sb->id, name, c->ic->host.text);
        px_request_set_inject(&c->rq, name);
        px_metrics_injection(name, PX_INJ_MISMATCH);
        px_conn_deny_unruled(c, PX_R_CREDENTIAL_HOST_MISMATCH);
        return;
    }
}

/* The secrets (bit i: c->sb->secrets[i]) of t's credentials in `used`. */
static uint32_t secrets_of(const struct cred_table *t, uint32_t used)
{
    uint32_t mask = 0;

    for (size_t k = 0; k < t->n; k++)
        if (used & (1u << k))
            mask |= 1u << t->secret[k];
    return mask;
}

/* The secrets (bit i: c->sb->secrets[i]) of t's credentials in `used`,
 * each counted as added. */
static uint32_t added(const struct px_conn *c, const struct cred_table *t, uint32_t used)
{
    uint32_t mask = secrets_of(t, used);

    for (size_t i = 0; i < c->sb->n_secrets; i++)
        if (mask & (1u << i))
            px_metrics_injection(c->sb->secrets[i], PX_INJ_ADDED);
    return mask;
}

/* The methods a request that gets a credential may have (RFC 9110 section
 * 9 and PATCH, RFC 5789).  TRACE (and IIS's TRACK) echo the request with
 * its credentials; an unknown method may do anything. */
static bool method_ok(struct http_view m)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (m.len == strlen(known[i]) && memcmp(m.p, known[i], m.len) == 0)
            return true;
    return false;
}

/* The request gets secrets (bit i: c->sb->secrets[i] in mask) with a
 * method not in method_ok's list: deny it.  Closes. */
static void refuse_method(struct px_conn *c, uint32_t mask)
{
    note_secrets(c, mask);
    for (size_t i = 0; i < c->sb->n_secrets; i++)
        if (mask & (1u << i))
            px_metrics_injection(c->sb->secrets[i], PX_INJ_METHOD);
    px_log_info("conn %llu: sandbox %s: %s to %s would carry a secret and may echo it: denied",
                (unsigned long long)c->id, c->sb->id, c->rq.method, c->ic->host.text);
    px_conn_deny_unruled(c, PX_R_CREDENTIAL_METHOD);
}

/* The secrets of t's credentials in `used` go upstream on c: search for
 * them in what comes back (gate.h). */
static void guard(struct px_conn *c, const struct cred_table *t, uint32_t used)
{
    if (used == 0)
        return;
    if (c->ic->gate == NULL)
        c->ic->gate = px_gate_new();
    for (size_t k = 0; k < t->n; k++)
        if (used & (1u << k))
            px_gate_add(c->ic->gate, t->cr[k].secret.p, t->cr[k].secret.len, t->secret[k]);
}

/* Note which logins' tokens (and their generations) the request carries,
 * for px_intercept_on_status. */
static void note_logins(struct px_conn *c, const struct cred_table *t, uint32_t used)
{
    c->ic->login_mask = 0;
    for (size_t k = 0; k < t->n; k++) {
        size_t i = t->secret[k];
        if ((used & (1u << k)) && t->tok_len[i] != 0 && i < 32) {
            c->ic->login_mask |= 1u << i;
            c->ic->login_gen[i] = t->tok_gen[i];
        }
    }
}

/* The judged request's head, still in the client's input: substitute the
 * credentials and send it on.  May close. */
static void forward(struct px_conn *c)
{
    static _Thread_local struct http_request req;
    static _Thread_local char scratch[SCRATCH_BYTES];
    static _Thread_local struct cred_table t;
    struct evbuffer *in = bufferevent_get_input(c->cli);
    size_t len = evbuffer_get_length(in), cap = px_d.http_limits.max_head + 1, which = 0;
    uint32_t used = 0;

    if (len > cap)
        len = cap;
    const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)len);
    if (http_parse_request(p, len, &px_d.http_limits, &req) != HTTP_R_OK) {
        px_conn_fail(c, 400, PX_R_BAD_REQUEST, "malformed request"); /* parsed before: a bug */
        return;
    }
    if (px_tokenep_take(c, &req))
        return; /* a sandbox's own refresh: egressd answers it */
    creds_of(c, &c->ic->host, c->ic->port, &t);
    enum http_cred_result r =
        http_cred_apply(&req, t.cr, t.n, scratch, sizeof(scratch), &which, &used);
    if (r != HTTP_CRED_NONE && r != HTTP_CRED_DONE) {
        wipe_tokens(&t);
        refuse(c, &t, r, which);
        return;
    }
    if (used != 0 && !method_ok(req.method)) {
        wipe_tokens(&t);
        refuse_method(c, secrets_of(&t, used));
        return;
    }
    guard(c, &t, used);
    note_logins(c, &t, used);
    wipe_tokens(&t);
    note_secrets(c, added(c, &t, used));
    bool sent = px_request_forward(c, &req);
    if (used != 0)
        explicit_bzero(scratch, sizeof(scratch)); /* (untouched when nothing was added) */
    if (sent)
        px_request_send(c);
}

void px_intercept_on_status(struct px_conn *c, unsigned status)
{
    if (status != HTTP_STATUS_UNAUTHORIZED || c->ic == NULL)
        return;
    for (size_t i = 0; i < c->sb->n_secrets && i < 32; i++)
        if (c->ic->login_mask & (1u << i))
            px_login_rejected(c->sb->secrets[i], c->ic->login_gen[i]);
}

void px_intercept_request(struct px_conn *c)
{
    struct px_intercept *ic = c->ic;

    ic->waiting = false;
    if (c->state == PX_S_HEAD)
        px_conn_set_state(c, PX_S_REQUEST, px_conn_on_idle); /* judged: not read again */
    if (c->up == NULL || bufferevent_openssl_get_ssl(c->up) == NULL) {
        /* never in clear: the credentials go only over the verified leg */
        px_conn_fail(c, 502, PX_R_CONNECT_FAIL, "the origin's TLS connection is gone");
        return;
    }
    if (ic->up_failed) {
        px_conn_fail(c, 502, ic->cert_error ? PX_R_UPSTREAM_TLS : PX_R_CONNECT_FAIL, ic->up_error);
        return;
    }
    if (!ic->up_ready) {
        ic->waiting = true; /* on_up_tls goes on */
        return;
    }
    forward(c);
}
