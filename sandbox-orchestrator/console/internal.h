/* internal.h - what the console's files share: the running console and
 * the request handlers' signatures.  Not for use outside console/. */
#ifndef SBX_CONSOLE_INTERNAL_H
#define SBX_CONSOLE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>
#include <microhttpd.h>

#include "audit.h"
#include "denials.h"
#include "ops.h"
#include "session.h"
#include "traffic.h"

struct sbx;
struct sbx_pve;
struct sbx_streams;

struct sbx_console {
    struct sbx *s;
    pthread_mutex_t op_lock; /* one operation at a time on s (sbx.h) */
    struct sbx_pve *signin;  /* the Proxmox client for sign-ins, under signin_lock */
    pthread_mutex_t signin_lock;
    struct sbx_sessions *sessions;
    struct sbx_audit *audit;
    struct sbx_denials *denials;
    struct sbx_streams *streams;
    struct sbx_traffic *traffic;
    bool tls; /* served over HTTPS */
};

/* One request as the handlers see it. */
struct sbx_request {
    struct sbx_console *con;
    struct MHD_Connection *conn;
    const char *method, *url;
    const char *body;
    size_t body_len;
    char from[64]; /* the client's address */
    bool have_session;
    struct sbx_session session;
};

/* Replies (web.c): each queues one response with the console's security
 * headers and returns what the access handler returns. */
enum MHD_Result sbx_web_json(struct sbx_request *r, unsigned status, json_t *body);
enum MHD_Result sbx_web_error(struct sbx_request *r, unsigned status, const char *msg);
enum MHD_Result sbx_web_asset(struct sbx_request *r, const char *path);
/* Queue resp (released here) with status and the security headers. */
enum MHD_Result sbx_web_queue(struct sbx_request *r, unsigned status, struct MHD_Response *resp);

/* Whether r comes from a page of this console: its Origin, when sent, is
 * this scheme and Host, its Sec-Fetch-Site, when sent, is same-origin, and
 * a body is JSON.  (A form or a script elsewhere can send neither without
 * the browser asking this server first, which it never allows.) */
bool sbx_web_same_origin(struct sbx_request *r);

/* Start serving con at addr ("ADDR:PORT", port 0 picks one; the port
 * chosen into *port), over HTTPS when cert and key (PEM text) are given.
 * NULL with the cause in err. */
struct MHD_Daemon *sbx_web_start(struct sbx_console *con, const char *addr, const char *cert,
                                 const char *key, unsigned *port, char *err, size_t errlen);

/* Routing (api.c): answer r. */
enum MHD_Result sbx_api_route(struct sbx_request *r);

/* Run op with the request's scope (an owner: their own sandboxes). */
int sbx_api_op(struct sbx_request *r, sbx_op_fn op, json_t *args, json_t **out, char *err,
               size_t errlen);

/* The live denial stream to one browser (streams.c). */
struct sbx_streams *sbx_streams_new(struct sbx_denials *d);
/* The hub the streams read (made after them: it wakes them). */
void sbx_streams_attach(struct sbx_streams *st, struct sbx_denials *d);
void sbx_streams_free(struct sbx_streams *st);
/* New denials were kept: wake every stream that waits. */
void sbx_streams_wake(void *streams);
/* Answer r with a text/event-stream of the denials it may see, from the
 * sequence number after. */
enum MHD_Result sbx_streams_open(struct sbx_request *r, uint64_t after);
/* Resume every waiting stream so that it ends (before the daemon stops). */
void sbx_streams_end_all(struct sbx_streams *st);

/* Sign-in (signin.c): POST /api/login and POST /api/logout. */
enum MHD_Result sbx_signin_login(struct sbx_request *r);
enum MHD_Result sbx_signin_logout(struct sbx_request *r);
/* GET /api/session: who r's session is, and its CSRF token. */
enum MHD_Result sbx_signin_session(struct sbx_request *r);

#endif
