/*
 * conn.h - one client connection and what it does.  Private to the daemon.
 * One noun per file:
 *   conn.c      accept, the state ladder, timers, the close path, the log line
 *   client.c    reading the client (bufferevent, or raw socket for tunnels)
 *   identity.c  which sandbox it is, its metrics and limits handles
 *   judge.c     the one decision path: expiry, name, quota, DNS, addresses
 *   answer.c    the deny and fail contract (403 + X-Egress-Deny, TLS alert, 5xx)
 *   upstream.c  connecting to the origin, address by address
 *   hello.c     the ClientHello phase (transparent TLS, CONNECT after 200)
 *   request.c   an HTTP request head: parsed, its target taken, judged
 *   exchange.c  the HTTP exchange: bodies, the response, keep-alive
 *   relay.c     the tunnel; rehello.c its later ClientHellos
 *   revoke.c    judging open connections again after a world swap
 *   intercept.c a CONNECT egressd terminates to add a sandbox's credentials
 *
 * A connection owns its bufferevents or raw sockets, its timer, its DNS
 * request, its world reference and its metrics and limits handles, and
 * gives them all back in one place: px_conn_close(), which also writes the
 * access-log line.  After calling px_conn_close() (or any function
 * documented as possibly closing), a caller returns at once and touches
 * nothing of the connection.
 */
#ifndef PX_CONN_H
#define PX_CONN_H

#include <event2/bufferevent.h>
#include <event2/event_struct.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bev.h"
#include "egressd.h"
#include "http.h"
#include "policy.h"
#include "resolver.h"
#include "sblimits.h"
#include "sni.h"
#include "sockaddr.h"
#include "verdict.h"
#include "world.h"

/* One direction of a tunnel: bytes read from `from`, written to `to`
 * (relay.c). */
struct px_relay_dir {
    int from, to;     /* sockets */
    int pipe[2];      /* splice: [0] read end, [1] write end; -1 when not used */
    size_t in_pipe;   /* bytes in the pipe, not yet written to `to` */
    size_t pipe_size; /* what the kernel gave the pipe */
    uint8_t *held;    /* read but not yet written (copy path) */
    size_t held_off, held_len;
    uint64_t total; /* bytes read from `from` */
    bool no_pipe;   /* pipe2 failed (out of descriptors): keep copying */
    bool eof;       /* `from` has ended */
    bool shut;      /* `to` has been shut for writing */
};

/* The watch over a TLS tunnel's handshake after its first ClientHello
 * (rehello.c): a later ClientHello (after a HelloRetryRequest) is held
 * back until it is parsed and names the same host.  `on` until nothing the
 * client sends can be a ClientHello the server takes; meanwhile the relay
 * copies the client's bytes (no splice) and shows it the server's. */
struct px_rehello {
    bool on;
    struct sni_watch w;
    uint8_t keep[5]; /* the start of a record header not yet classified */
    uint8_t keep_len;
    struct sni_parser *parser; /* a later ClientHello being read ... */
    uint8_t *hello;            /* ... and its bytes so far, held back */
    size_t hello_len;
};

/* A tunnel: it owns both sockets once started (relay.c). */
struct px_relay {
    int fd[2]; /* 0: client, 1: upstream */
    struct event ev[2];
    short watching[2];        /* EV_READ|EV_WRITE the socket's event waits for */
    struct px_relay_dir d[2]; /* 0: client -> upstream, 1: upstream -> client */
    struct px_rehello rh;
};

/* A socket of a tunnel before its relay starts, without a bufferevent:
 * the client of a transparent TLS listener or of a CONNECT after its 200
 * (only a ClientHello is read) and a tunnel's upstream (only connected).
 * In use when `ev` is set. */
struct px_raw {
    int fd;
    struct event *ev;
};

/* States; the comment says what the connection waits for.  Changed only by
 * px_conn_set_state(), which checks the transition. */
enum px_conn_state {
    PX_S_HEAD,     /* a request head from the client (proxy, transparent HTTP) */
    PX_S_HELLO,    /* the ClientHello (transparent TLS, or CONNECT after 200) */
    PX_S_RESOLVE,  /* the resolver's answer */
    PX_S_CONNECT,  /* the upstream TCP connection to come up */
    PX_S_REQUEST,  /* HTTP: sending the request (head sent, body streaming) */
    PX_S_RESPONSE, /* HTTP: the response head and body from upstream */
    PX_S_RELAY,    /* tunnel: bytes both ways until one side ends */
    PX_S_FLUSH,    /* a final answer (deny, error) is being written, then close */
};

/* The request (or tunnel) being judged: what it asks for and what was
 * decided.  Reset for each request of a kept-alive connection. */
struct px_request {
    char method[24];
    struct policy_host host;
    uint16_t port;
    /* The ClientHello's server name as it was sent, or NULL (none, or no
     * hello yet): host.text itself when the bytes are the same (most
     * hellos; an idle tunnel keeps no second copy of its name), else
     * sni_own.  Set with px_request_set_sni(). */
    const char *sni;
    char *sni_own;
    struct policy_verdict v; /* name phase, then the address that decided */
    enum policy_decision decision;
    enum px_reason reason;
    bool decided;    /* decision/reason are final for this request */
    unsigned status; /* HTTP status sent or received */
    bool logged;     /* this request's log line is written */
    bool intercept; /* a CONNECT egressd terminates: an inject rule binds a secret of its sandbox */
    char *inject; /* the secrets added to (or, denied, misplaced in) this request, "a,b"; or NULL */
};

/* An intercepted CONNECT (intercept.c): the host both legs are for, and
 * the upstream leg's handshake. */
struct px_intercept {
    struct policy_host host; /* the CONNECT's (and the SNI's) host */
    uint16_t port;
    bool up_ready;   /* the origin's TLS is up and verified */
    bool up_failed;  /* ... or failed (up_error says why) */
    bool cert_error; /* it failed on the origin's certificate */
    bool waiting;    /* a judged request waits for the handshake */
    /* The secrets sent, searched for in what comes back (gate.h); or NULL. */
    struct px_gate *gate;
    char up_error[160];
};

/* The longest path a log line keeps (a longer one is cut). */
#define PX_LOG_PATH_MAX 256

/* The HTTP exchange (exchange.c): the head to send upstream, keep-alive,
 * the body framing each side declared, and whom the upstream kept alive
 * is for.  Allocated for a connection that starts with a request head (a
 * proxy or transparent-HTTP listener's) and freed once it becomes a
 * tunnel: an idle tunnel does not carry it. */
struct px_exchange {
    char up_key[POLICY_HOST_MAX + 16]; /* "host:port" the upstream connection is for */
    struct evbuffer *pending;          /* bytes for upstream once it is connected */
    bool client_keep_alive, upstream_keep_alive;
    enum http_body req_body, resp_body;
    uint64_t req_left, resp_left;
    struct http_chunked req_chunks, resp_chunks;
    bool req_done, resp_head_done;
    bool head_started;          /* a byte of the next request head is in: header timeout runs */
    char path[PX_LOG_PATH_MAX]; /* the request's path, without its query, for the log line */
};

struct px_conn {
    struct px_conn *next, *prev; /* the worker's list */
    struct px_worker *w;
    const struct px_listener_spec *l;
    uint64_t id;
    enum px_conn_state state;
    enum px_mode mode;
    struct bufferevent *cli, *up; /* NULL where rc, ru are used, and once relaying */
    struct event timer;           /* the state's timeout (px_conn_timeout) */
    int64_t t_accept_ms;          /* the connection's start (max-conn-life) */
    int64_t t_start_ms;           /* the current request's or tunnel's start */
    int64_t t_active_ms;          /* the last byte moved (timeout-idle) */
    enum px_end end_by;           /* who ended it (PX_END_NONE: nobody yet) ... */
    enum px_conn_state end_phase; /* ... and in which state */

    /* Who: the client, its binding and the world it is judged in. */
    uint8_t src_addr[16];
    uint16_t src_port;
    union px_sockaddr orig_dst;  /* transparent: SO_ORIGINAL_DST */
    bool redirected;             /* orig_dst is not the listener itself */
    struct px_world *world;      /* the world of the last decision (px_conn_judge) */
    const struct px_sandbox *sb; /* NULL: default-policy */
    const struct policy_binding *pb;
    bool by_auth;         /* sb was named by Proxy-Authorization, not by the source address */
    struct px_msb *msb;   /* counted as active there until FLUSH or the close */
    struct px_limit *lim; /* the sandbox's limits; counted as one open connection */

    struct px_request rq;

    /* Where: the checked addresses and the one connected to. */
    struct px_dns_req *dns;
    bool connect_refused;    /* an address refused (or failed), not only timed out */
    union px_sockaddr up_ss; /* the address connected to (or being tried) */
    socklen_t up_len;        /* 0: none */
    int64_t t_connect_ms;

    /* The ClientHello being read (allocated only while reading it). */
    struct sni_parser *hello;

    struct px_exchange *ex;  /* NULL for a tunnel (see above) */
    struct px_intercept *ic; /* NULL unless intercepted */
    char *raw_host;          /* the host as asked for, for the log when it is bad; or NULL */

    /* Counters for the log line and the metrics. */
    uint64_t bytes_up, bytes_down;
    uint64_t quota_counted; /* of those, already counted by the relay */

    /* What a request needs until its tunnel starts, and the tunnel: the
     * two never live at once, so they share the memory (an idle tunnel is
     * mostly this struct).  In PX_S_RELAY, cli and up are NULL and the
     * relay arm is live; in every other state the first. */
    union {
        struct {
            struct px_dns_answer ans;
            size_t ans_next;
            struct px_raw rc, ru; /* client, upstream (tunnels; see above) */
            uint8_t *early;       /* what rc sent: the ClientHello and what follows */
            size_t early_len;
            size_t hello_len; /* of early: the first ClientHello's records (0: none parsed) */
        };
        struct px_relay relay;
    };
};

/* conn.c */
/* Note the n bytes at name (a server name, not NUL-terminated) as rq's
 * SNI; rq->host is compared as it is now. */
void px_request_set_sni(struct px_request *rq, const char *name, size_t n);
/* Forget rq's SNI (and free its copy). */
void px_request_clear_sni(struct px_request *rq);
/* Note text ("a,b": secrets' names; NULL or "": none) as rq's inject
 * field, a copy of its own (a connection without secrets carries none). */
void px_request_set_inject(struct px_request *rq, const char *text);
/* rq->host changed: when it now holds the SNI's bytes, the SNI uses them
 * instead of its copy. */
void px_request_share_sni(struct px_request *rq);
void px_conn_set_state(struct px_conn *c, enum px_conn_state s);
/* The state's word in the log's termination field ("head", "relay", ...). */
const char *px_state_str(enum px_conn_state s);
/* Note who ends c, in the state it is in now; the first call counts
 * (PX_END_NONE notes nothing).
 * Every close path calls it (px_conn_close with a guess from the reason,
 * when no caller knew better). */
void px_conn_ended(struct px_conn *c, enum px_end by);
/* Write the current request's log line (once) and count it. */
void px_conn_log(struct px_conn *c);
/* "FILE:LINE" of the rule that decided, FILE without its directory, into
 * buf (len >= 16); NULL when no rule decided.  What the log line, the
 * X-Egress-Deny header and the 403 body all say. */
const char *px_conn_rule_text(const struct px_conn *c, char *buf, size_t len);
/* Log (if not yet) and free everything.  `why` goes to the debug log. */
void px_conn_close(struct px_conn *c, const char *why);
/* Write nothing more; close once the output is read (lingering close). */
void px_conn_flush_close(struct px_conn *c);
/* "ADDR:PORT" of the client, and of the upstream (NULL when there is
 * none), into buf; made when a line is written, not kept. */
const char *px_conn_src_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX]);
const char *px_conn_upstream_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX]);
/* Set the state's timeout (ms from now; 0: none). */
void px_conn_timeout(struct px_conn *c, uint64_t ms);
/* Count n bytes moved (dir 0: client to upstream, 1: back) for the log
 * line and the sandbox's byte quota.  False when the quota is used up: the
 * connection was closed (reason limit). */
bool px_conn_count(struct px_conn *c, int dir, size_t n);
/* Keep the n bytes at p (cut to PX_RAW_HOST_MAX) as the host the request
 * asked for, for the log line when it is bad (the log escapes it). */
#define PX_RAW_HOST_MAX 255
void px_conn_keep_raw_host(struct px_conn *c, const char *p, size_t n);
/* Free c->ex (a connection that became a tunnel, or closes). */
void px_conn_drop_exchange(struct px_conn *c);
/* Close a raw socket (and its event), if in use. */
void px_raw_free(struct px_raw *r);
int64_t px_now_ms(void);

/* client.c */
/* Give the client bufferevent back to client.c's callbacks (between requests). */
void px_conn_watch_client(struct px_conn *c);
void px_conn_on_client_event(struct bufferevent *bev, short what, void *arg);
/* Read client socket fd as a raw socket (c->rc) into c->early. */
void px_client_watch_raw(struct px_conn *c, int fd);
/* Take the client's socket from its bufferevent (after its CONNECT head):
 * what the bufferevent read beyond the head moves to c->early.  False
 * when the connection was closed. */
bool px_client_to_raw(struct px_conn *c);

/* answer.c */
/* Deny the current request with `r` (and the verdict's rule): 403 + the
 * X-Egress-Deny header for HTTP and CONNECT-before-200, a TLS alert after
 * it and for transparent TLS; then close.  Closes. */
void px_conn_deny(struct px_conn *c, enum px_reason r);
/* The same, for a denial no rule made (a ClientHello check, the
 * transparent destination check). */
void px_conn_deny_unruled(struct px_conn *c, enum px_reason r);
/* End a connection whose stream has started (a tunnel relaying, an answer
 * under way): nothing more can be answered, so the line says deny `r`
 * (with `rule`, or none) and the stream just ends.  Closes. */
void px_conn_end_denied(struct px_conn *c, enum px_reason r, const struct policy_rule_ref *rule,
                        const char *why);
/* Answer an error status (400, 407, 414, 429, 431, 502, 503, 504, ...) and
 * close.  A refusal by egressd (bad_request, limit, not_allowed, a 408)
 * gets the deny contract; a failure on the way to the origin gets an RFC
 * 9209 Proxy-Status error.  Closes. */
void px_conn_fail(struct px_conn *c, unsigned status, enum px_reason r, const char *detail);

/* identity.c */
enum px_identity {
    PX_ID_OK,      /* c->sb, c->pb are the sandbox's (or default-policy's) */
    PX_ID_UNKNOWN, /* the credentials name no sandbox (407); c->sb is the source's */
    PX_ID_LIMIT,   /* the sandbox is at its connection limit or rate (429); nothing counted */
};
/* Find the sandbox in c->world: by the `Proxy-Authorization` value when
 * auth is not NULL, else by the source address (or none: default-policy).
 * Sets c->sb, c->pb and, when the sandbox is another than before, the
 * metrics and limits handles (counting the connection there). */
enum px_identity px_conn_identify(struct px_conn *c, const char *auth, size_t auth_len);
/* The same sandbox (or both none), whatever world each was found in. */
bool px_conn_same_sandbox(const struct px_sandbox *a, const struct px_sandbox *b);

/* judge.c */
/* The one judge of a request (c->rq.host, c->rq.port; c->rq.host.len 0
 * when it did not normalize), for the first request of a connection and
 * every later one, always in the current world: identify (auth as
 * px_conn_identify takes it), the binding's expiry, the name phase, the
 * byte quota, then the address phase on every address of the name, or on
 * the address of the upstream still open for this origin (c->up, kept
 * alive: exchange.c keeps it only for the same host and port).  A denial
 * or a refusal answers and closes; an allowed request goes on to
 * px_conn_upstream_ready() once an upstream is connected (at once when
 * one is kept).  May close. */
void px_conn_judge(struct px_conn *c, const char *auth, size_t auth_len);
/* Whether sb's binding has expired at `now` (seconds since the epoch). */
bool px_sandbox_expired(const struct px_sandbox *sb, int64_t now);

/* upstream.c */
/* Connect to the checked addresses (c->ans) from the first.  May close. */
void px_upstream_connect(struct px_conn *c);
/* Connect to the next one (the last failed or timed out).  When none is
 * left: 504 connection_timeout if every address timed out, else 502
 * connection_refused.  May close. */
void px_upstream_next(struct px_conn *c);
/* Let go of an upstream being connected (or kept), if any. */
void px_upstream_drop(struct px_conn *c);
/* The upstream connection is up: continue by mode (the 200 and the
 * ClientHello, the relay, or the HTTP request).  May close. */
void px_conn_upstream_ready(struct px_conn *c);

/* hello.c */
/* Read the ClientHello from c->early and what is still to come.  May close. */
void px_hello_start(struct px_conn *c);
/* Feed what c->early has that the parser has not seen.  May close. */
void px_hello_feed(struct px_conn *c);
/* Why a complete ClientHello (parser p, result r) is refused whatever
 * host it names: not TLS, malformed, a server_name that is no host name
 * (bad_host), ECH under `ech deny`; PX_R_ALLOWED when it is one to look
 * at.  For the first ClientHello and the later ones (rehello.c) alike. */
enum px_reason px_hello_refused(const struct sni_parser *p, enum sni_result r);
/* Whether host name `name` (len bytes, as a ClientHello sent it) is the
 * host c is for, once normalized. */
bool px_conn_names_host(const struct px_conn *c, const char *name, size_t len);

/* request.c: an HTTP request head (proxy and transparent-HTTP listeners). */
/* The client's bytes in PX_S_HEAD: once a whole head is in, judge it.
 * May close. */
void px_request_on_head(struct px_conn *c);
/* Forget the last request (c->rq, the byte counts) for the next one. */
void px_request_reset(struct px_conn *c);

/* Split a Host field's "host[:port]" into a normalized host (the port,
 * when there is one, must be `port`); false when it is not one. */
bool px_request_host_field(struct http_view v, struct policy_host *h, uint16_t port);
/* Prepare the head of req to go upstream (c->ex->pending) and take it
 * from the client's input.  False when it does not fit (431; closed). */
bool px_request_forward(struct px_conn *c, const struct http_request *req);

/* intercept.c: credential injection. */
/* Whether c (a CONNECT whose name phase allowed it) is to be terminated:
 * an inject rule for its host names a secret its sandbox's binding lists,
 * and the sandbox has a CA. */
bool px_intercept_wanted(const struct px_conn *c);
/* Whether an HTTP request being judged carries the placeholder of one of
 * its sandbox's secrets in its head (logged): it is then denied
 * credential_host_mismatch, as no plain-HTTP host is bound to a secret. */
bool px_placeholder_seen(const struct px_conn *c);
/* Terminate the CONNECT whose ClientHello passed: TLS both ways, then
 * HTTP requests.  May close. */
void px_intercept_start(struct px_conn *c);
/* An HTTP/2 preface at the start of the client's input: refused (400;
 * closed), true. */
bool px_intercept_refuses_h2(struct px_conn *c);
/* Check a request head inside the tunnel (origin form, Host = the
 * CONNECT host, no Upgrade) and take its target.  False when refused
 * (closed). */
bool px_intercept_target(struct px_conn *c, const struct http_request *req);
/* The request is judged: once the origin's TLS is up, add the
 * credentials to its head and send it on.  May close. */
void px_intercept_request(struct px_conn *c);
void px_intercept_free(struct px_conn *c);

/* exchange.c: the HTTP exchange once its request is judged. */
void px_exchange_start(struct px_conn *c); /* upstream is ready: send the request */
void px_exchange_reset(struct px_conn *c); /* back to PX_S_HEAD for the next request */

/* relay.c: the tunnel. */
/* Start it with the connection's two raw sockets (rc, ru); what the
 * client sent before (c->early) is sent first.  May close. */
void px_relay_start(struct px_conn *c);
void px_relay_free(struct px_conn *c); /* closes both sockets */
/* Append n bytes to what direction d has to write (relay.c sends them). */
void px_relay_hold(struct px_relay_dir *d, const uint8_t *p, size_t n);

/* rehello.c: a TLS tunnel's later ClientHellos. */
/* Start the watch (the tunnel's first ClientHello was checked). */
void px_rehello_start(struct px_conn *c);
/* The client's next n bytes: what may go on is appended to the client
 * direction's held bytes, the rest is kept back.  False when a later
 * ClientHello named another host or broke the rules: closed. */
bool px_rehello_client(struct px_conn *c, const uint8_t *p, size_t n);
/* The server's next n bytes (relayed as usual); may end the watch, which
 * lets bytes kept back go on. */
void px_rehello_server(struct px_conn *c, const uint8_t *p, size_t n);
void px_rehello_free(struct px_rehello *rh);

#endif
