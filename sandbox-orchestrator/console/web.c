/* web.c - the console's HTTP side on libmicrohttpd: the daemon, each
 * request's body (bounded), the session its cookie names, and replies,
 * every one with the same security headers:
 *   Content-Security-Policy: nothing but this origin's own script, style
 *   and connections, no frames, no forms to elsewhere;
 *   X-Content-Type-Options, Referrer-Policy, X-Frame-Options, and
 *   Cache-Control: no-store on everything but the assets.
 * Threads: a pool of WORKERS polling threads; the denial streams wait
 * suspended (streams.c), so they hold no thread.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "assets.h"
#include "internal.h"

#define WORKERS         4
#define CONNECTIONS_MAX 256
#define PER_IP_MAX      64
#define IDLE_TIMEOUT_S  60
#define BODY_MAX        (64 * 1024)
#define CONN_MEMORY     (128 * 1024) /* a request's head and its body's buffer */

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self'; connect-src 'self'; form-action 'self'; "
                          "frame-ancestors 'none'; base-uri 'none'";

/* A request being received. */
struct pending {
    char *body;
    size_t len;
    bool over; /* longer than BODY_MAX: refused once whole */
};

/* libmicrohttpd's own messages, on stderr with our prefix; a browser that
 * closed its stream or page is no news and is not said. */
static void on_mhd_log(void *arg, const char *fmt, va_list ap)
{
    char msg[512];

    (void)arg;
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (strstr(msg, "no longer available") || strstr(msg, "onnection reset") ||
        strstr(msg, "closed by remote"))
        return;
    msg[strcspn(msg, "\n")] = '\0';
    fprintf(stderr, "sandboxctl console: libmicrohttpd: %s\n", msg);
}

static void add_security_headers(struct MHD_Response *resp, bool cacheable)
{
    MHD_add_response_header(resp, "Content-Security-Policy", csp);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Cache-Control", cacheable ? "private, max-age=300" : "no-store");
}

/* Queue resp (then released) with status. */
static enum MHD_Result queue(struct sbx_request *r, unsigned status, struct MHD_Response *resp,
                             bool cacheable)
{
    add_security_headers(resp, cacheable);
    enum MHD_Result rc = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

enum MHD_Result sbx_web_queue(struct sbx_request *r, unsigned status, struct MHD_Response *resp)
{
    return queue(r, status, resp, false);
}

bool sbx_web_same_origin(struct sbx_request *r)
{
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    const char *site = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-Fetch-Site");
    const char *type = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Type");
    const char *scheme = r->con->tls ? "https://" : "http://";

    if (site && strcmp(site, "same-origin") != 0)
        return false;
    if (origin && (!host || strncmp(origin, scheme, strlen(scheme)) != 0 ||
                   strcmp(origin + strlen(scheme), host) != 0))
        return false;
    if (r->body_len > 0 &&
        (!type || strncasecmp(type, "application/json", strlen("application/json")) != 0))
        return false;
    return true;
}

enum MHD_Result sbx_web_json(struct sbx_request *r, unsigned status, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text)
        abort();
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
    return queue(r, status, resp, false);
}

enum MHD_Result sbx_web_error(struct sbx_request *r, unsigned status, const char *msg)
{
    return sbx_web_json(r, status, json_pack("{s:s}", "error", msg));
}

enum MHD_Result sbx_web_asset(struct sbx_request *r, const char *path)
{
    const struct sbx_asset *a = sbx_asset_find(strcmp(path, "/") == 0 ? "/index.html" : path);

    if (!a)
        return sbx_web_error(r, 404, "no such page");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(a->len, (void *)(uintptr_t)a->data, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Content-Type", a->type);
    return queue(r, 200, resp, strcmp(a->type, "text/html; charset=utf-8") != 0);
}

/* The client's address, as text, into r->from. */
static void client_address(struct sbx_request *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    snprintf(r->from, sizeof r->from, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, r->from,
                  sizeof r->from);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, r->from,
                  sizeof r->from);
}

/* Take in a piece of the body; false once it is whole. */
static bool receive(struct pending *p, const char *data, size_t *size)
{
    if (*size == 0)
        return false;
    if (p->len + *size > BODY_MAX)
        p->over = true;
    if (!p->over) {
        char *b = realloc(p->body, p->len + *size + 1);
        if (!b)
            abort();
        memcpy(b + p->len, data, *size);
        p->body = b;
        p->len += *size;
        p->body[p->len] = '\0';
    }
    *size = 0;
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    struct pending *p = *state;

    (void)version;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p)
            return MHD_NO;
        *state = p;
        return MHD_YES;
    }
    if (receive(p, upload, upload_size))
        return MHD_YES;
    struct sbx_request r = {.con = cls,
                            .conn = conn,
                            .method = method,
                            .url = url,
                            .body = p->body ? p->body : "",
                            .body_len = p->len};
    client_address(&r);
    if (p->over)
        return sbx_web_error(&r, 413, "the request body is larger than 64 KiB");
    const char *cookie = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, "egc_session");
    if (cookie)
        r.have_session = sbx_sessions_find(r.con->sessions, cookie, &r.session);
    enum MHD_Result rc = sbx_api_route(&r);
    explicit_bzero(&r.session, sizeof r.session);
    return rc;
}

static void on_done(void *cls, struct MHD_Connection *conn, void **state,
                    enum MHD_RequestTerminationCode why)
{
    struct pending *p = *state;

    (void)cls, (void)conn, (void)why;
    if (!p)
        return;
    if (p->body)
        explicit_bzero(p->body, p->len); /* a sign-in's password */
    free(p->body);
    free(p);
    *state = NULL;
}

/* Parse "ADDR:PORT" ([v6]:PORT too) into ss.  0 or -1. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    char *end;

    if (!colon || (size_t)(colon - s) >= sizeof host)
        return -1;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    size_t hl = strlen(host);
    if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &v6->sin6_addr) != 1)
            return -1;
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        return 0;
    }
    if (inet_pton(AF_INET, host, &v4->sin_addr) != 1)
        return -1;
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    *len = sizeof *v4;
    return 0;
}

/* Whether ss is a loopback address. */
static bool loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

struct MHD_Daemon *sbx_web_start(struct sbx_console *con, const char *addr, const char *cert,
                                 const char *key, unsigned *port, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    unsigned flags;

    if (parse_listen(addr, &ss, &sslen)) {
        snprintf(err, errlen,
                 "console-listen: expected ADDR:PORT (127.0.0.1:8480, [::1]:8480), "
                 "got '%.80s'",
                 addr);
        return NULL;
    }
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    if (!cert && !loopback(&ss)) {
        snprintf(err, errlen,
                 "console-listen %.80s is not a loopback address: set "
                 "console-cert-file and console-key-file (a session cookie must not "
                 "cross the network in clear)",
                 addr);
        return NULL;
    }
    if (cert && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        snprintf(err, errlen, "console-cert-file: this libmicrohttpd was built without TLS");
        return NULL;
    }
    con->tls = cert != NULL;
    struct MHD_OptionItem tls[] = {
        {cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)(uintptr_t)cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)(uintptr_t)key},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_Daemon *d = MHD_start_daemon(
        flags | (cert ? MHD_USE_TLS : 0), 0, NULL, NULL, on_request, con,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)WORKERS, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)CONNECTIONS_MAX, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)PER_IP_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONN_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_done, con, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen,
                 "console-listen %.80s: cannot serve there (in use, or not an "
                 "address of this host)",
                 addr);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : 0;
    return d;
}
