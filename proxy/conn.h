/*
 * conn.h - one client connection: the object, its state ladder, its timer
 * and its one close path (conn.c).  Private to the daemon.
 *
 * A connection goes through phases, each a file with a header of its own,
 * in the order the file list reads (docs/design.md, "The connection
 * pipeline"):
 *
 *   accept.c    the one place that picks the first phase
 *   client.c    reading the client (bufferevent, or raw socket for tunnels)
 *   request.c   an HTTP request head: parsed, its target taken
 *   hello.c     the ClientHello phase (transparent TLS, CONNECT after 200)
 *   judge.c     the one judge: identity.c, then policy_decide, quota, DNS
 *   upstream.c  connecting to the origin, address by address
 *   exchange.c  the HTTP exchange: bodies, the response, keep-alive
 *   intercept.c a CONNECT egressd terminates to add a sandbox's credentials
 *   tokenep.c   inside it, a sandbox's own OAuth refresh, answered by egressd
 *   relay.c     the tunnel; rehello.c its later ClientHellos
 *   answer.c    the deny and fail contract (any phase may end with it)
 *   revoke.c    judging open connections again after a world swap
 *
 * This file names none of them: a phase that moves the connection into a
 * state says what that state's timer does (px_conn_set_state), one that
 * holds something says how to let it go (px_conn_on_release), and the
 * judge is told where to go on once the origin is connected.
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

#include "asked.h"
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

struct px_conn;

/* What a phase does with its connection at a moment it names: when the
 * timer of a state it set fires (px_conn_set_state), or at the close
 * (px_conn_on_release).  The connection's own code calls these without
 * knowing which phase they belong to. */
typedef void px_conn_hook(struct px_conn *c);

/* The most release hooks one connection holds at once (its HTTP exchange,
 * an interception, a tunnel's relay). */
#define PX_CONN_RELEASE_MAX 3

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
    PX_S_UPGRADED, /* intercepted WebSocket: frames both ways until one side ends */
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
    /* The logins whose tokens the current request carries (bit i: the
     * sandbox's i-th secret) and each token's generation: a 401 asks
     * for a refresh of exactly those (logins.h). */
    uint32_t login_mask;
    uint64_t login_gen[PX_SANDBOX_MAX_SECRETS];
    struct px_tokenep *tk; /* a sandbox's refresh being answered (tokenep.c), or NULL */
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
    bool between;               /* a request was answered: the connection waits for the next */
    bool upgrade;               /* the request asks for WebSocket, which is served (upgrade.c) */
    bool receive_pack;          /* the request is a git push (pushcheck.h) */
    char path[PX_LOG_PATH_MAX]; /* the request's path, without its query, for the log line */
    struct px_asked asked;      /* the request as the policy judges it */
};

struct px_conn {
    struct px_conn *next, *prev; /* the worker's list */
    struct px_worker *w;
    const struct px_listener_spec *l;
    uint64_t id;
    enum px_conn_state state;
    px_conn_hook *on_timeout;   /* the state's timer fired (set with the state) */
    px_conn_hook *on_connected; /* the judged request's upstream is ready (px_conn_judge) */
    px_conn_hook *release[PX_CONN_RELEASE_MAX]; /* at the close, last first */
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

    struct px_exchange *ex;    /* NULL for a tunnel (see above) */
    struct px_intercept *ic;   /* NULL unless intercepted */
    struct px_upgrade *ws;     /* NULL unless upgraded to WebSocket (upgrade.c) */
    struct px_pushcheck *push; /* NULL unless a git push is being read (pushcheck.c) */
    char *raw_host;            /* the host as asked for, for the log when it is bad; or NULL */

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
/* Move c to state s (the transition is checked: a wrong one aborts); when
 * c's timer fires in s, on_timeout(c) is called (it may close).  The
 * phase that moves a connection into a state says what its timer means
 * there. */
void px_conn_set_state(struct px_conn *c, enum px_conn_state s, px_conn_hook *on_timeout);
/* Call fn(c) when c closes, before its sockets and handles are freed, in
 * the reverse order of the calls; a hook given twice is kept once. */
void px_conn_on_release(struct px_conn *c, px_conn_hook *fn);
/* The timer of the states that move bytes (REQUEST, RESPONSE, RELAY):
 * close c when it has been idle for timeout-idle or its tunnel's life is
 * over, else arm the timer for the nearer of the two.  May close. */
void px_conn_on_idle(struct px_conn *c);
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
/* A new connection on worker w from listener l (client address sa), in
 * the worker's list, in state `first` with its timer's on_timeout, and
 * mode `mode`; nothing else set up (accept.c does that). */
struct px_conn *px_conn_new(struct px_worker *w, const struct px_listener_spec *l,
                            const struct sockaddr *sa, enum px_mode mode, enum px_conn_state first,
                            px_conn_hook *on_timeout);
/* Close every connection of w that is between requests (drain: one that
 * has answered a request and holds no byte of the next; a new one, whose
 * first request may be on its way, is served), or all. */
void px_conn_close_all(struct px_worker *w, bool idle_only);
/* Log (if not yet) and free everything.  `why` goes to the debug log. */
void px_conn_close(struct px_conn *c, const char *why);
/* Write nothing more; close once the output is read (lingering close). */
void px_conn_flush_close(struct px_conn *c);
/* "ADDR:PORT" of the client, and of the upstream (NULL when there is
 * none), into buf; made when a line is written, not kept. */
const char *px_conn_src_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX]);
const char *px_conn_upstream_text(const struct px_conn *c, char buf[PX_SOCKADDR_TEXT_MAX]);
/* Arm c's timer (ms from now; 0: none); when it fires, the on_timeout of
 * the state c is in then is called. */
void px_conn_timeout(struct px_conn *c, uint64_t ms);
/* Count n bytes moved (dir 0: client to upstream, 1: back) for the log
 * line and the sandbox's byte quota.  False when the quota is used up: the
 * connection was closed (reason limit). */
bool px_conn_count(struct px_conn *c, int dir, size_t n);
/* Keep the n bytes at p (cut to PX_RAW_HOST_MAX) as the host the request
 * asked for, for the log line when it is bad (the log escapes it). */
#define PX_RAW_HOST_MAX 255
void px_conn_keep_raw_host(struct px_conn *c, const char *p, size_t n);
/* Let go of the upstream being connected or kept (c->up, or the raw c->ru). */
void px_conn_drop_upstream(struct px_conn *c);
/* Close a raw socket (and its event), if in use. */
void px_raw_free(struct px_raw *r);
int64_t px_now_ms(void);

#endif
