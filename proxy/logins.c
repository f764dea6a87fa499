/*
 * logins.c - see logins.h.
 *
 *   sync (a world swap) ─▶ a login file in the store ─▶ the table
 *   its timer (3/4 of the token's life), or a worker's kick after a 401
 *     ─▶ refresh.c-like steps on the main loop, one at a time per login:
 *        resolve (hosts-file, resolver) ─▶ every address checked as a
 *        sandbox's would be (policy_decide_addrs: deny-range, the
 *        appliance's own addresses) ─▶ connect, address by address
 *        ─▶ TLS, the endpoint verified (system store or upstream-ca-file)
 *        ─▶ POST the refresh ─▶ the response, at most RESPONSE_MAX
 *        ─▶ the tokens parsed (oauth/) ─▶ the file written back
 *        ─▶ the new tokens swapped in, the next refresh timed
 *     any failure: the tokens stay, the reason is logged and counted, the
 *     next try backs off
 *
 * The tokens of a login live in a mapping of their own (px_vault_map:
 * out of core dumps), guarded by the login's mutex; workers copy the
 * access token out under it.  The table is guarded by a read-write lock:
 * workers read, the main thread changes it.
 */
#include "logins.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "certs.h"
#include "egressd.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "oauth.h"
#include "policy.h"
#include "sockaddr.h"
#include "version.h"
#include "world.h"

#define REFRESH_TIMEOUT_MS (20 * 1000)      /* one refresh, resolve to response */
#define BACKOFF_FIRST_MS   (5 * 1000)       /* after the first failure ... */
#define BACKOFF_MAX_MS     (5 * 60 * 1000)  /* ... doubling up to this */
#define LIFE_UNKNOWN_MS    (30 * 60 * 1000) /* a token that does not say when it lapses */
#define REFRESH_AT_NUM     3                /* refresh at 3/4 of the token's life */
#define REFRESH_AT_DEN     4
#define RESPONSE_MAX       (64 * 1024) /* the token endpoint's whole answer */
#define REQUEST_MAX        (16 * 1024) /* the refresh request's body */
/* What a sandbox is told its placeholder token lives: far ahead, so the
 * CLI asks again only when an origin refuses it (egressd refreshes the
 * real one on its own). */
#define PLACEHOLDER_LIFE_S (24 * 3600)

/* ------------------------------------------------------------ profiles */

/* Where a provider's logins are refreshed (overridable: oauth-provider). */
struct profile {
    const char *host;
    uint16_t port;
    const char *path;
    const char *client_id, *client_secret;
};

/* The public client ids of the three CLIs' own logins. */
static const struct profile builtin[PX_OAUTH_PROVIDERS] = {
    [OAUTH_ANTHROPIC] = {"platform.claude.com", 443, "/v1/oauth/token",
                         "9d1c250a-e61b-44d9-88ed-5944d1962f5e", NULL},
    [OAUTH_OPENAI] = {"auth.openai.com", 443, "/oauth/token", "app_EMoamEEZ73f0CkXaXp7hrann", NULL},
    [OAUTH_GOOGLE] = {"oauth2.googleapis.com", 443, "/token",
                      "681255809395-oo8ft2oprdrnp9e3aqf6av3hmdib135j.apps.googleusercontent.com",
                      "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"},
};

/* ------------------------------------------------------------ results */

enum result {
    LR_OK,           /* new tokens, written back */
    LR_REFUSED,      /* the endpoint answered 4xx (e.g. invalid_grant) */
    LR_HTTP_ERROR,   /* the endpoint answered another non-200 status */
    LR_BAD_RESPONSE, /* a 200 that is not a token response */
    LR_NETWORK,      /* no address, a denied address, no connection, TLS failed */
    LR_TIMEOUT,      /* no whole answer within REFRESH_TIMEOUT_MS */
    LR_WRITE,        /* the file could not be written back: tokens not taken */
    LR_COUNT
};

static const char *const result_words[LR_COUNT] = {
    "ok", "refused", "http_error", "bad_response", "network", "timeout", "write_error"};

/* ------------------------------------------------------------ the table */

/* What lives in a login's own mapping. */
struct vault {
    struct oauth_login tok;
    char file[OAUTH_FILE_MAX + 1]; /* the file as last read or written */
    size_t file_len;
};

struct refresh;

struct login {
    char name[PX_SECRET_NAME_MAX + 1];
    pthread_mutex_t mu; /* guards v, gen, busy */
    struct vault *v;
    size_t mapped;
    uint64_t gen; /* bumps with every new access token */
    bool busy;    /* a refresh is in flight */
    /* main thread only */
    struct px_file_id fid; /* the file v->file was read from or written to */
    int64_t got_ms;        /* when the current token was had */
    struct event *timer;   /* the next refresh */
    struct event *kick;    /* a worker asks for one now */
    unsigned failures;     /* in a row: the backoff */
    struct refresh *rf;    /* the one in flight, or NULL */
    atomic_uint_fast64_t n[LR_COUNT];
    _Atomic int64_t expires_ms;
};

static struct {
    pthread_rwlock_t lock; /* workers read; the main thread adds and removes */
    struct login *l[PX_SECRETS_MAX];
    size_t n;
    struct event_base *base;
    struct px_resolver *resolver;
    const struct px_config *cfg;
} T = {.lock = PTHREAD_RWLOCK_INITIALIZER};

/* Login `name` (the table locked by the caller), or NULL. */
static struct login *find(const char *name)
{
    for (size_t i = 0; i < T.n; i++)
        if (strcmp(T.l[i]->name, name) == 0)
            return T.l[i];
    return NULL;
}

/* The profile of provider p: the config's, or the built-in one. */
static struct profile profile_of(enum oauth_provider p)
{
    struct profile pr = builtin[p];
    const struct px_oauth_cfg *o = T.cfg != NULL ? &T.cfg->oauth[p] : NULL;

    if (o != NULL && o->set) {
        pr.host = o->host;
        pr.port = o->port;
        pr.path = o->path;
        if (o->client_id[0] != '\0')
            pr.client_id = o->client_id;
        if (o->client_secret[0] != '\0')
            pr.client_secret = o->client_secret;
    }
    return pr;
}

/* ------------------------------------------------------------ tokens */

bool px_login_token(const char *name, char *out, size_t cap, size_t *len, uint64_t *gen)
{
    bool ok = false;

    pthread_rwlock_rdlock(&T.lock);
    struct login *l = find(name);
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        if (l->v->tok.access_len < cap) {
            memcpy(out, l->v->tok.access, l->v->tok.access_len + 1);
            *len = l->v->tok.access_len;
            *gen = l->gen;
            ok = true;
        }
        pthread_mutex_unlock(&l->mu);
    }
    pthread_rwlock_unlock(&T.lock);
    return ok;
}

void px_login_rejected(const char *name, uint64_t gen)
{
    pthread_rwlock_rdlock(&T.lock);
    struct login *l = find(name);
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        bool stale = l->gen != gen || l->busy;
        pthread_mutex_unlock(&l->mu);
        if (!stale)
            event_active(l->kick, EV_TIMEOUT, 1); /* the main loop refreshes it */
    }
    pthread_rwlock_unlock(&T.lock);
}

bool px_login_busy(const char *name)
{
    bool busy = false;

    pthread_rwlock_rdlock(&T.lock);
    struct login *l = find(name);
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        busy = l->busy;
        pthread_mutex_unlock(&l->mu);
    }
    pthread_rwlock_unlock(&T.lock);
    return busy;
}

bool px_login_token_path(const char *name, char *out, size_t cap)
{
    bool ok = false;

    pthread_rwlock_rdlock(&T.lock);
    struct login *l = find(name);
    if (l != NULL) {
        struct profile pr = profile_of(l->v->tok.provider);
        ok = (size_t)snprintf(out, cap, "%s", pr.path) < cap;
    }
    pthread_rwlock_unlock(&T.lock);
    return ok;
}

int px_login_answer(const char *name, const char *access_ph, const char *refresh_ph, char *out,
                    size_t cap, size_t *len)
{
    int rc = -1;

    pthread_rwlock_rdlock(&T.lock);
    struct login *l = find(name);
    if (l != NULL) {
        pthread_mutex_lock(&l->mu);
        rc = oauth_grant_answer(&l->v->tok, access_ph, refresh_ph, PLACEHOLDER_LIFE_S, out, cap,
                                len);
        pthread_mutex_unlock(&l->mu);
    }
    pthread_rwlock_unlock(&T.lock);
    return rc;
}

/* ------------------------------------------------------------ timing */

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Arm l's timer to fire in `ms` (0: at the next loop round). */
static void arm(struct login *l, int64_t ms)
{
    struct timeval tv = {.tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000};

    if (ms < 0)
        tv = (struct timeval){0};
    evtimer_add(l->timer, &tv);
}

/* Time l's next refresh from its current token: at 3/4 of the life it had
 * when egressd got it (now when it has lapsed). */
static void schedule(struct login *l)
{
    int64_t now = wall_ms(), exp = l->v->tok.expires_ms;
    int64_t life = exp > l->got_ms ? exp - l->got_ms : LIFE_UNKNOWN_MS;
    int64_t at =
        exp > 0 ? l->got_ms + life * REFRESH_AT_NUM / REFRESH_AT_DEN : l->got_ms + LIFE_UNKNOWN_MS;

    atomic_store(&l->expires_ms, exp);
    arm(l, at - now);
}

/* After a failure: try again after the backoff, doubling, capped. */
static void back_off(struct login *l)
{
    int64_t ms = BACKOFF_FIRST_MS;

    for (unsigned i = 1; i < l->failures && ms < BACKOFF_MAX_MS; i++)
        ms *= 2;
    arm(l, ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS);
}

/* ------------------------------------------------------------ the file */

/* Write text[0..len) as secret-dir/NAME, atomically: a new file (0600,
 * egressd's), fsync'ed, renamed over the old one, the directory fsync'ed.
 * 0 with *fid the new file's, or -1 with the reason in why. */
static int write_back(const char *name, const char *text, size_t len, struct px_file_id *fid,
                      char *why, size_t whylen)
{
    char tmp[PX_SECRET_NAME_MAX + 32];
    struct stat st;
    int dfd = open(T.cfg->secret_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, rc = -1;

    snprintf(tmp, sizeof(tmp), ".%s.egressd-new", name);
    if (dfd == -1)
        goto fail;
    (void)unlinkat(dfd, tmp, 0); /* a leftover of a crash */
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd == -1)
        goto fail;
    for (size_t off = 0; off < len;) {
        ssize_t k = write(fd, text + off, len - off);
        if (k == -1 && errno == EINTR)
            continue;
        if (k <= 0)
            goto fail;
        off += (size_t)k;
    }
    if (fsync(fd) == -1 || fstat(fd, &st) == -1 || close(fd) == -1) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (renameat(dfd, tmp, dfd, name) == -1 || fsync(dfd) == -1)
        goto fail;
    *fid = px_file_id_of(&st);
    rc = 0;
fail:
    if (rc == -1) {
        snprintf(why, whylen, "writing %.160s/%s back: %s", T.cfg->secret_dir, name,
                 strerror(errno));
        if (fd != -1)
            close(fd);
        if (dfd != -1)
            (void)unlinkat(dfd, tmp, 0);
    }
    if (dfd != -1)
        close(dfd);
    return rc;
}

/* ------------------------------------------------------------ a refresh */

struct refresh {
    struct login *l;
    struct profile pr;
    struct px_world *world; /* its hosts table and default binding */
    struct px_dns_req *dns;
    struct px_dns_answer ans;
    size_t next; /* the next address of ans to try */
    int fd;      /* connecting, before bev */
    struct event *connecting;
    struct bufferevent *bev;
    struct event *deadline;
    char host[sizeof(((struct policy_host *)0)->text)];
};

/* Let the refresh go (its login is no longer busy). */
static void refresh_free(struct refresh *rf)
{
    struct login *l = rf->l;

    px_resolve_cancel(rf->dns);
    if (rf->connecting != NULL)
        event_free(rf->connecting);
    if (rf->fd != -1)
        close(rf->fd);
    if (rf->bev != NULL)
        bufferevent_free(rf->bev);
    if (rf->deadline != NULL)
        event_free(rf->deadline);
    if (rf->world != NULL)
        px_world_put(rf->world);
    free(rf);
    l->rf = NULL;
    pthread_mutex_lock(&l->mu);
    l->busy = false;
    pthread_mutex_unlock(&l->mu);
}

/* The refresh ended with r (why: for the log, never a value): count it,
 * time the next one, let it go. */
static void finish(struct refresh *rf, enum result r, const char *why)
{
    struct login *l = rf->l;

    atomic_fetch_add(&l->n[r], 1);
    if (r == LR_OK) {
        l->failures = 0;
        px_log_info("login '%s': refreshed at %s:%u; the token now lapses in %lld s", l->name,
                    rf->pr.host, rf->pr.port,
                    (long long)((l->v->tok.expires_ms - wall_ms()) / 1000));
        refresh_free(rf);
        schedule(l);
        return;
    }
    l->failures++;
    px_log_warnx("login '%s': refresh at %s:%u failed (%s): %s; the current token is kept, "
                 "next try after backoff %u",
                 l->name, rf->pr.host, rf->pr.port, result_words[r], why, l->failures);
    refresh_free(rf);
    back_off(l);
}

/* The new tokens in tok (a copy of l's with the response applied): write
 * the file back, then take them.  Finishes. */
static void take(struct refresh *rf, struct oauth_login *tok)
{
    struct login *l = rf->l;
    static char text[OAUTH_FILE_MAX + 1];
    struct px_file_id fid;
    char why[320];
    size_t len;
    int64_t now = wall_ms();

    if (oauth_file_update(l->v->file, l->v->file_len, tok, now, text, sizeof(text), &len) == -1) {
        finish(rf, LR_WRITE, "the new tokens do not fit the login file");
        return;
    }
    int rc = write_back(l->name, text, len, &fid, why, sizeof(why));
    if (rc == 0) {
        pthread_mutex_lock(&l->mu);
        l->v->tok = *tok;
        memcpy(l->v->file, text, len + 1);
        l->v->file_len = len;
        l->gen++;
        pthread_mutex_unlock(&l->mu);
        l->fid = fid;
        l->got_ms = now;
    }
    explicit_bzero(text, sizeof(text));
    if (rc == -1)
        finish(rf, LR_WRITE, why);
    else
        finish(rf, LR_OK, NULL);
}

/* The whole response is in (head parsed as resp, body[0..n)): judge it. */
static void on_response(struct refresh *rf, const struct http_response *resp, const char *body,
                        size_t n)
{
    static struct oauth_login tok; /* main thread only; wiped below */
    char why[160], msg[200];

    if (resp->status != 200) {
        tok = rf->l->v->tok; /* to read the endpoint's error word, if it gave one */
        if (oauth_token_response(body, n, wall_ms(), &tok, why, sizeof(why)) == 0)
            snprintf(why, sizeof(why), "no error word");
        explicit_bzero(&tok, sizeof(tok));
        snprintf(msg, sizeof(msg), "the endpoint answered %u (%s)", resp->status, why);
        finish(rf, resp->status >= 400 && resp->status < 500 ? LR_REFUSED : LR_HTTP_ERROR, msg);
        return;
    }
    pthread_mutex_lock(&rf->l->mu);
    tok = rf->l->v->tok;
    pthread_mutex_unlock(&rf->l->mu);
    if (oauth_token_response(body, n, wall_ms(), &tok, why, sizeof(why)) == -1) {
        explicit_bzero(&tok, sizeof(tok));
        snprintf(msg, sizeof(msg), "not a token response: %s", why);
        finish(rf, LR_BAD_RESPONSE, msg);
        return;
    }
    take(rf, &tok);
    explicit_bzero(&tok, sizeof(tok));
}

/* Whether buf[0..n) (eof: nothing more comes) holds a whole response;
 * then *resp, and its body decoded into body (cap) with *blen.  Returns 1
 * (whole), 0 (more to come) or -1 (malformed: *why). */
static int whole_response(const char *buf, size_t n, bool eof, struct http_response *resp,
                          char *body, size_t cap, size_t *blen, const char **why)
{
    static const struct http_limits lim = {.max_head = 16384, .max_line = 8192, .max_headers = 100};
    enum http_result hr = http_parse_response(buf, n, &lim, "POST", resp);

    *why = "a malformed response head";
    if (hr == HTTP_R_NEED_MORE)
        return eof ? -1 : 0;
    if (hr != HTTP_R_OK)
        return -1;
    const char *p = buf + resp->head_len;
    size_t left = n - resp->head_len;
    *blen = 0;
    switch (resp->body) {
    case HTTP_BODY_NONE: return 1;
    case HTTP_BODY_LENGTH:
        if (left < resp->content_length)
            return eof ? -1 : 0;
        *blen = (size_t)resp->content_length < cap ? (size_t)resp->content_length : cap - 1;
        memcpy(body, p, *blen);
        return 1;
    case HTTP_BODY_TO_CLOSE:
        if (!eof)
            return 0;
        *blen = left < cap ? left : cap - 1;
        memcpy(body, p, *blen);
        return 1;
    case HTTP_BODY_CHUNKED: break;
    }
    struct http_chunked ch;
    http_chunked_init(&ch);
    *why = "a malformed chunked body";
    for (size_t used = 0, off = 0; off < left; off += used) {
        bool data = false;
        enum http_chunked_result cr = http_chunked_span(&ch, p + off, left - off, &used, &data);
        if (cr == HTTP_CHUNKED_BAD)
            return -1;
        if (data && *blen + used < cap) {
            memcpy(body + *blen, p + off, used);
            *blen += used;
        }
        if (cr == HTTP_CHUNKED_DONE)
            return 1;
    }
    return eof ? -1 : 0;
}

/* Look at what the endpoint sent so far (eof: it ended). */
static void look(struct refresh *rf, bool eof)
{
    static char body[RESPONSE_MAX];
    struct evbuffer *in = bufferevent_get_input(rf->bev);
    size_t n = evbuffer_get_length(in);
    struct http_response resp;
    const char *why;
    size_t blen = 0;

    if (n > RESPONSE_MAX) {
        finish(rf, LR_BAD_RESPONSE, "an answer longer than 64 KiB");
        return;
    }
    const char *buf = (const char *)evbuffer_pullup(in, -1);
    int w = whole_response(buf != NULL ? buf : "", n, eof, &resp, body, sizeof(body), &blen, &why);
    if (w == 0)
        return;
    if (w == -1)
        finish(rf, eof && n == 0 ? LR_NETWORK : LR_BAD_RESPONSE,
               eof && n == 0 ? "the endpoint closed without an answer" : why);
    else
        on_response(rf, &resp, body, blen);
    explicit_bzero(body, blen);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    look(arg, false);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct refresh *rf = arg;
    char why[200];

    if (what & BEV_EVENT_CONNECTED)
        return;
    if (what & BEV_EVENT_EOF) {
        look(rf, true);
        return;
    }
    SSL *ssl = bufferevent_openssl_get_ssl(bev);
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = bufferevent_get_openssl_error(bev);
    if (vr != X509_V_OK)
        snprintf(why, sizeof(why), "the endpoint's certificate: %s",
                 X509_verify_cert_error_string(vr));
    else if (e != 0)
        ERR_error_string_n(e, why, sizeof(why));
    else
        snprintf(why, sizeof(why), "the connection failed: %s", strerror(errno));
    ERR_clear_error();
    if (evbuffer_get_length(bufferevent_get_input(bev)) > 0 && vr == X509_V_OK) {
        look(rf, true); /* an answer, then an unclean end */
        return;
    }
    finish(rf, LR_NETWORK, why);
}

/* The request for rf's login, queued on its bufferevent; false when it
 * cannot be made. */
static bool send_request(struct refresh *rf)
{
    static char body[REQUEST_MAX];
    const char *ctype = NULL;
    size_t len = 0;

    pthread_mutex_lock(&rf->l->mu);
    int rc = oauth_refresh_body(&rf->l->v->tok, rf->pr.client_id, rf->pr.client_secret, body,
                                sizeof(body), &len, &ctype);
    pthread_mutex_unlock(&rf->l->mu);
    if (rc == -1)
        return false;
    struct evbuffer *out = bufferevent_get_output(rf->bev);
    if (rf->pr.port == 443)
        evbuffer_add_printf(out, "POST %s HTTP/1.1\r\nHost: %s\r\n", rf->pr.path, rf->host);
    else
        evbuffer_add_printf(out, "POST %s HTTP/1.1\r\nHost: %s:%u\r\n", rf->pr.path, rf->host,
                            rf->pr.port);
    evbuffer_add_printf(out,
                        "User-Agent: egressd/%s\r\nAccept: application/json\r\n"
                        "Content-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                        EGRESSD_VERSION, ctype, len);
    evbuffer_add(out, body, len);
    explicit_bzero(body, len);
    return true;
}

/* The TCP connection is up on rf->fd: start TLS and send the request. */
static void start_tls(struct refresh *rf)
{
    SSL *ssl = SSL_new(px_certs_upstream());

    if (ssl == NULL)
        abort();
    SSL_set_tlsext_host_name(ssl, rf->host);
    SSL_set1_host(ssl, rf->host);
    rf->bev = bufferevent_openssl_socket_new(T.base, rf->fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                             BEV_OPT_CLOSE_ON_FREE);
    if (rf->bev == NULL)
        abort();
    rf->fd = -1; /* the bufferevent's */
    bufferevent_openssl_set_allow_dirty_shutdown(rf->bev, 1);
    bufferevent_setcb(rf->bev, on_read, NULL, on_event, rf);
    bufferevent_enable(rf->bev, EV_READ | EV_WRITE);
    if (!send_request(rf))
        finish(rf, LR_WRITE, "the refresh request does not fit");
}

static void connect_next(struct refresh *rf);

static void on_connected(evutil_socket_t fd, short what, void *arg)
{
    struct refresh *rf = arg;
    int e = ETIMEDOUT;
    socklen_t el = sizeof(e);

    event_free(rf->connecting);
    rf->connecting = NULL;
    if ((what & EV_WRITE) && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) {
        start_tls(rf);
        return;
    }
    close(rf->fd);
    rf->fd = -1;
    connect_next(rf);
}

/* Connect to the next checked address of rf->ans (the last one failed). */
static void connect_next(struct refresh *rf)
{
    while (rf->next < rf->ans.n) {
        union px_sockaddr sa;
        socklen_t len;
        struct timeval tv = {.tv_sec = (time_t)(T.cfg->timeout_connect_ms / 1000),
                             .tv_usec = (suseconds_t)(T.cfg->timeout_connect_ms % 1000) * 1000};

        px_sockaddr_from16(rf->ans.addr[rf->next++], rf->pr.port, &sa, &len);
        rf->fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (rf->fd == -1)
            continue;
        if (connect(rf->fd, &sa.sa, len) == 0 || errno == EINPROGRESS) {
            rf->connecting = event_new(T.base, rf->fd, EV_WRITE, on_connected, rf);
            event_add(rf->connecting, &tv);
            return;
        }
        close(rf->fd);
        rf->fd = -1;
    }
    finish(rf, LR_NETWORK, "no address of the endpoint accepted a connection");
}

/* The endpoint's addresses are in: check every one as a sandbox's would
 * be, then connect. */
static void on_resolved(enum px_dns_result res, const struct px_dns_answer *a, void *arg)
{
    struct refresh *rf = arg;
    struct policy_verdict name = {.decision = POLICY_ALLOW, .reason = POLICY_R_ALLOWED}, v;
    char text[64], why[160];

    rf->dns = NULL;
    if (res != PX_DNS_OK) {
        finish(rf, LR_NETWORK, "the endpoint's name did not resolve");
        return;
    }
    if (rf->world->default_pb == NULL) {
        finish(rf, LR_NETWORK, "no default-policy to check the endpoint's addresses against");
        return;
    }
    struct policy_verdict each[PX_DNS_MAX_ADDRS];
    if (policy_decide_addrs(rf->world->default_pb, &name, rf->pr.port, a->addr, a->n,
                            (int64_t)time(NULL), &v, each) == POLICY_DENY) {
        for (size_t i = 0; i < a->n; i++)
            if (each[i].decision == POLICY_DENY) {
                snprintf(why, sizeof(why), "the endpoint's address %s is denied (%s)",
                         policy_addr_text(a->addr[i], text, sizeof(text)),
                         policy_reason_str(each[i].reason));
                break;
            }
        finish(rf, LR_NETWORK, why);
        return;
    }
    rf->ans = *a;
    connect_next(rf);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, LR_TIMEOUT, "no whole answer within 20 s");
}

/* Start a refresh of l (none in flight). */
static void refresh_start(struct login *l)
{
    struct refresh *rf = calloc(1, sizeof(*rf));
    struct timeval tv = {.tv_sec = REFRESH_TIMEOUT_MS / 1000};
    struct policy_host h;

    if (rf == NULL)
        abort();
    rf->l = l;
    rf->fd = -1;
    rf->pr = profile_of(l->v->tok.provider);
    l->rf = rf;
    pthread_mutex_lock(&l->mu);
    l->busy = true;
    pthread_mutex_unlock(&l->mu);
    rf->deadline = evtimer_new(T.base, on_deadline, rf);
    evtimer_add(rf->deadline, &tv);
    if (policy_host_normalize(rf->pr.host, strlen(rf->pr.host), &h) != POLICY_HOST_OK ||
        h.kind != POLICY_HOST_NAME) {
        finish(rf, LR_NETWORK, "the token endpoint's host is not a name");
        return;
    }
    snprintf(rf->host, sizeof(rf->host), "%s", h.text);
    rf->world = px_world_get();
    struct px_dns_req *q = px_resolve(T.resolver, rf->world->hosts, rf->host, on_resolved, rf);
    if (q != NULL)
        rf->dns = q; /* (NULL: answered at once, and rf may be gone) */
}

/* l's timer, or a worker's kick: refresh unless one is in flight. */
static void on_due(evutil_socket_t fd, short what, void *arg)
{
    struct login *l = arg;

    (void)fd;
    (void)what;
    if (l->rf == NULL)
        refresh_start(l);
}

/* ------------------------------------------------------------ the table */

/* A login named `name` from its file text, or NULL (logged). */
static struct login *login_new(const char *name, const char *text, size_t len,
                               const struct px_file_id *fid)
{
    struct login *l = calloc(1, sizeof(*l));
    char why[256];

    if (l == NULL)
        abort();
    l->v = (struct vault *)px_vault_map(sizeof(*l->v), &l->mapped);
    if (l->v == NULL || len > OAUTH_FILE_MAX ||
        oauth_file_parse(text, len, &l->v->tok, why, sizeof(why)) == -1) {
        px_log_warnx("login '%s': not taken: %s", name,
                     l->v == NULL ? "no memory kept out of core dumps" : why);
        px_vault_unmap((char *)l->v, l->mapped);
        free(l);
        return NULL;
    }
    memcpy(l->v->file, text, len);
    l->v->file[len] = '\0';
    l->v->file_len = len;
    snprintf(l->name, sizeof(l->name), "%s", name);
    pthread_mutex_init(&l->mu, NULL);
    l->fid = *fid;
    l->got_ms = wall_ms();
    l->gen = 1;
    l->timer = evtimer_new(T.base, on_due, l);
    l->kick = event_new(T.base, -1, 0, on_due, l);
    px_log_info("login '%s': %s login kept by egressd", name,
                oauth_provider_name(l->v->tok.provider));
    return l;
}

static void login_free(struct login *l)
{
    if (l->rf != NULL)
        refresh_free(l->rf);
    event_free(l->timer);
    event_free(l->kick);
    pthread_mutex_destroy(&l->mu);
    px_vault_unmap((char *)l->v, l->mapped);
    free(l);
}

/* Whether secret-dir/NAME on disk now is the file fid names. */
static bool on_disk(const char *name, const struct px_file_id *fid)
{
    char path[2048];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", T.cfg->secret_dir, name);
    if (lstat(path, &st) == -1)
        return false;
    struct px_file_id now = px_file_id_of(&st);
    return px_file_id_eq(&now, fid);
}

/* Take store s's version of login l (an admin replaced the file): the
 * refresh in flight, if any, is dropped. */
static void retake(struct login *l, const char *text, size_t len, const struct px_file_id *fid)
{
    static struct oauth_login tok;
    char why[256];

    if (len > OAUTH_FILE_MAX || oauth_file_parse(text, len, &tok, why, sizeof(why)) == -1) {
        px_log_warnx("login '%s': the new file is not taken: %s", l->name,
                     len > OAUTH_FILE_MAX ? "too long" : why);
        return;
    }
    if (l->rf != NULL)
        refresh_free(l->rf);
    pthread_mutex_lock(&l->mu);
    l->v->tok = tok;
    memcpy(l->v->file, text, len);
    l->v->file[len] = '\0';
    l->v->file_len = len;
    l->gen++;
    pthread_mutex_unlock(&l->mu);
    explicit_bzero(&tok, sizeof(tok));
    l->fid = *fid;
    l->got_ms = wall_ms();
    l->failures = 0;
    px_log_info("login '%s': taken again from its file (replaced)", l->name);
    schedule(l);
}

/* Keep login `name` of store s in the table. */
static void sync_one(const struct px_secrets *s, const char *name)
{
    struct px_file_id fid;
    const char *text;
    size_t len;

    if (!px_secrets_login(s, name, &fid) || !px_secrets_get(s, name, &text, &len))
        return;
    struct login *l = find(name);
    if (l == NULL) {
        if (T.n == PX_SECRETS_MAX || (l = login_new(name, text, len, &fid)) == NULL)
            return;
        pthread_rwlock_wrlock(&T.lock);
        T.l[T.n++] = l;
        pthread_rwlock_unlock(&T.lock);
        schedule(l);
        return;
    }
    if (px_file_id_eq(&fid, &l->fid) || on_disk(name, &l->fid))
        return; /* the same file, or one egressd wrote after s read it */
    if (on_disk(name, &fid))
        retake(l, text, len, &fid);
}

void px_logins_sync(const struct px_secrets *s)
{
    for (size_t i = 0; i < px_secrets_count(s); i++)
        sync_one(s, px_secrets_name(s, i));
    for (size_t i = 0; i < T.n;) {
        if (px_secrets_login(s, T.l[i]->name, NULL)) {
            i++;
            continue;
        }
        struct login *gone = T.l[i];
        pthread_rwlock_wrlock(&T.lock);
        T.l[i] = T.l[--T.n];
        pthread_rwlock_unlock(&T.lock);
        px_log_info("login '%s': no longer in secret-dir; forgotten", gone->name);
        login_free(gone);
    }
}

void px_logins_init(struct event_base *base, struct px_resolver *r, const struct px_config *cfg)
{
    T.base = base;
    T.resolver = r;
    T.cfg = cfg;
}

void px_logins_shutdown(void)
{
    pthread_rwlock_wrlock(&T.lock);
    while (T.n > 0)
        login_free(T.l[--T.n]);
    pthread_rwlock_unlock(&T.lock);
}

/* ------------------------------------------------------------ metrics */

void px_logins_render(FILE *f)
{
    int64_t now = wall_ms();

    pthread_rwlock_rdlock(&T.lock);
    px_metrics_family(f, "oauth_refresh_total", "counter",
                      "OAuth logins egressd keeps: its refreshes of each, by result.");
    for (size_t i = 0; i < T.n; i++)
        for (size_t r = 0; r < LR_COUNT; r++)
            fprintf(f, "egressd_oauth_refresh_total{secret=\"%s\",result=\"%s\"} %llu\n",
                    T.l[i]->name, result_words[r], (unsigned long long)atomic_load(&T.l[i]->n[r]));
    px_metrics_family(f, "oauth_token_expiry_seconds", "gauge",
                      "Seconds until the access token of each login lapses (negative: lapsed).");
    for (size_t i = 0; i < T.n; i++) {
        int64_t exp = atomic_load(&T.l[i]->expires_ms);
        fprintf(f, "egressd_oauth_token_expiry_seconds{secret=\"%s\"} %.3f\n", T.l[i]->name,
                exp > 0 ? (double)(exp - now) / 1000.0 : 0.0);
    }
    pthread_rwlock_unlock(&T.lock);
}
