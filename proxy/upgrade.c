/*
 * upgrade.c - an intercepted exchange whose origin switched to WebSocket.
 *
 *   request with Upgrade: websocket (intercept.c: judged, credentials
 *   added, sent with Connection: Upgrade and no extension offered)
 *     ─▶ the origin's 101 (exchange.c: checked, passed on)
 *     ─▶ here: frames both ways over the two TLS legs, as they come
 *
 * Nothing of a frame is changed: the credential went in the upgrade
 * request's head, and frames carry none.  Each direction moves what its
 * source's input holds into the other leg's output, counted toward the
 * sandbox's byte quota, and stops reading while that output is over
 * HIGH_MARK (back-pressure both ways).  The tunnel ends when either side
 * ends (what the other side still has to write goes first), on the idle
 * timeout, at the end of the tunnel's or the connection's life, or when a
 * reload revokes it (revoke.c); its one log line (status 101, bytes,
 * duration, who ended it) is written at the close.
 *
 * The origin's frames pass the gate (gate.h) when a request of the
 * connection received a secret: they are searched before they move.  The
 * gate holds back bytes that could begin a secret until what follows
 * clears them; here also until their frame ends (http_ws_frames: a
 * client takes a frame whole, and the next may be long in coming).
 */
#include <event2/buffer.h>
#include <stdlib.h>

#include "bev.h"
#include "conn.h"
#include "gate.h"
#include "log.h"
#include "metrics.h"
#include "upgrade.h"

#define HIGH_MARK (256 * 1024) /* a leg's output that stops its source's reading */
#define PEEK_VECS 16           /* input chains looked at per evbuffer_peek */

/* What the tunnel keeps beside the connection: where the origin's frames
 * end, for the gate. */
struct px_upgrade {
    struct http_ws_frames frames;
    uint64_t fed;      /* origin bytes walked by `frames` */
    uint64_t moved;    /* origin bytes moved to the client */
    uint64_t last_end; /* stream offset just past the last whole frame */
};

/* The gate of c, or NULL: the connection sent no secret. */
static struct px_gate *gate_of(const struct px_conn *c)
{
    return c->ic != NULL ? c->ic->gate : NULL;
}

static void free_upgrade(struct px_conn *c)
{
    free(c->ws);
    c->ws = NULL;
}

/* The origin sent back the value of secret `who`: cut.  Closes. */
static void reflected(struct px_conn *c, int who)
{
    const char *name =
        c->sb != NULL && who >= 0 && (size_t)who < c->sb->n_secrets ? c->sb->secrets[who] : "?";

    px_log_warnx("conn %llu: %s sent back the value of secret '%s' in a WebSocket frame "
                 "(sandbox %s): the tunnel is cut",
                 (unsigned long long)c->id, c->rq.host.text, name, c->sb ? c->sb->id : "-");
    px_metrics_injection(name, PX_INJ_REFLECTED);
    c->rq.reason = PX_R_CREDENTIAL_REFLECTED;
    px_conn_ended(c, PX_END_PROXY);
    px_conn_close(c, "an origin sent back a secret");
}

/* Walk the origin's input past what was walked; false when its framing
 * is broken (closed). */
static bool walk_frames(struct px_conn *c, struct evbuffer *in)
{
    struct px_upgrade *u = c->ws;
    struct evbuffer_iovec v[PEEK_VECS];
    struct evbuffer_ptr at;
    size_t len = evbuffer_get_length(in), off = (size_t)(u->fed - u->moved);

    while (off < len) {
        if (evbuffer_ptr_set(in, &at, off, EVBUFFER_PTR_SET) == -1)
            break;
        int k = evbuffer_peek(in, (ev_ssize_t)(len - off), &at, v, PEEK_VECS);
        for (int i = 0; i < k && i < PEEK_VECS; i++) {
            size_t ends;
            if (http_ws_frames_feed(&u->frames, v[i].iov_base, v[i].iov_len, &ends) ==
                HTTP_WS_BAD) {
                px_log_info("conn %llu: %s: a WebSocket frame header that breaks the framing: "
                            "the tunnel is cut",
                            (unsigned long long)c->id, c->rq.host.text);
                c->rq.reason = PX_R_CONNECT_FAIL;
                px_conn_ended(c, PX_END_UPSTREAM);
                px_conn_close(c, "broken WebSocket framing from the origin");
                return false;
            }
            if (ends > 0)
                u->last_end = u->fed + ends;
            u->fed += v[i].iov_len;
        }
        off = (size_t)(u->fed - u->moved);
    }
    return true;
}

/* How many of the origin's bytes may go to the client now (*allow), after
 * the gate's search (eof: the origin ended).  False when closed. */
static bool origin_allowed(struct px_conn *c, struct evbuffer *in, bool eof, uint64_t *allow)
{
    struct px_gate *g = gate_of(c);

    *allow = UINT64_MAX;
    if (g == NULL)
        return true;
    if (!walk_frames(c, in))
        return false;
    px_gate_release(g, c->ws->last_end);
    int who = px_gate_body(g, in, eof, allow);
    if (who != PX_GATE_NONE) {
        reflected(c, who);
        return false;
    }
    return true;
}

/* Move what `from`'s input holds (at most `most`) into `to`'s output, in
 * direction dir (0: to the origin, 1: to the client), counted toward the
 * byte quota (over it, the tunnel closes, as relay.c's does).  False when
 * closed. */
static bool move(struct px_conn *c, struct bufferevent *from, struct bufferevent *to, int dir,
                 uint64_t most)
{
    struct evbuffer *in = bufferevent_get_input(from);
    size_t n = evbuffer_get_length(in);

    if (n > most)
        n = (size_t)most;
    if (n == 0)
        return true;
    px_bev_move_records(in, bufferevent_get_output(to), n); /* full TLS records */
    if (dir == 1 && gate_of(c) != NULL) {
        px_gate_moved(gate_of(c), n);
        c->ws->moved += n;
    }
    c->t_active_ms = px_now_ms();
    if (!px_conn_count(c, dir, n))
        return false;
    if (evbuffer_get_length(bufferevent_get_output(to)) >= HIGH_MARK) {
        bufferevent_disable(from, EV_READ);
        bufferevent_setwatermark(to, EV_WRITE, HIGH_MARK / 2, 0);
    }
    return true;
}

/* The origin's bytes that came (eof: and then its end) go on as far as
 * the gate lets them.  False when closed. */
static bool from_origin(struct px_conn *c, bool eof)
{
    uint64_t allow;

    if (!origin_allowed(c, bufferevent_get_input(c->up), eof, &allow))
        return false;
    return move(c, c->up, c->cli, 1, allow);
}

static void on_origin_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    (void)from_origin(arg, false);
}

static void on_client_read(struct bufferevent *bev, void *arg)
{
    (void)bev;
    (void)move(arg, ((struct px_conn *)arg)->cli, ((struct px_conn *)arg)->up, 0, UINT64_MAX);
}

/* A leg's output drained below the mark: its source reads again; or, once
 * the client has ended, the origin has all it sent: close. */
static void on_written(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;

    if (c->end_by == PX_END_CLIENT && bev == c->up) {
        px_conn_close(c, "client closed");
        return;
    }
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    bufferevent_enable(bev == c->up ? c->cli : c->up, EV_READ);
}

/* The origin ended (or failed): the client gets what is left, then our
 * end of its stream. */
static void on_origin_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    if ((what & BEV_EVENT_EOF) && !from_origin(c, true))
        return;
    px_conn_ended(c, PX_END_UPSTREAM);
    px_conn_flush_close(c);
}

/* The client ended (or failed): the origin gets what the client sent
 * before (its close frame, mostly), then the tunnel closes. */
static void on_client_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    (void)bev;

    px_conn_ended(c, PX_END_CLIENT);
    if ((what & BEV_EVENT_ERROR) || evbuffer_get_length(bufferevent_get_output(c->up)) == 0) {
        px_conn_close(c, what & BEV_EVENT_ERROR ? "client error" : "client closed");
        return;
    }
    bufferevent_disable(c->cli, EV_READ);
    bufferevent_setwatermark(c->up, EV_WRITE, 0, 0); /* on_written closes once it is out */
}

/* The state's timer: idle, or the tunnel's or the connection's life is
 * over. */
static void on_timeout(struct px_conn *c)
{
    const struct px_config *cfg = px_d.cfg;
    int64_t now = px_now_ms();
    int64_t idle_end = c->t_active_ms + (int64_t)cfg->timeout_idle_ms;
    int64_t life_end = c->t_start_ms + (int64_t)cfg->max_tunnel_life_ms;
    int64_t conn_end = c->t_accept_ms + (int64_t)cfg->max_conn_life_ms;
    int64_t end = idle_end;

    if (life_end < end)
        end = life_end;
    if (conn_end < end)
        end = conn_end;
    if (end > now) {
        px_conn_timeout(c, (uint64_t)(end - now));
        return;
    }
    c->rq.reason = PX_R_TIMEOUT;
    px_conn_ended(c, PX_END_TIMEOUT);
    px_conn_close(c, end == idle_end ? "idle" : "tunnel life over");
}

void px_upgrade_start(struct px_conn *c)
{
    c->ws = calloc(1, sizeof(*c->ws));
    if (c->ws == NULL)
        abort();
    http_ws_frames_init(&c->ws->frames);
    px_conn_on_release(c, free_upgrade);
    px_conn_set_state(c, PX_S_UPGRADED, on_timeout);
    if (gate_of(c) != NULL)
        px_gate_body_start(gate_of(c), HTTP_BODY_TO_CLOSE, 0);
    c->t_active_ms = px_now_ms();
    bufferevent_setcb(c->up, on_origin_read, on_written, on_origin_event, c);
    bufferevent_setcb(c->cli, on_client_read, on_written, on_client_event, c);
    bufferevent_setwatermark(c->up, EV_READ | EV_WRITE, 0, 0);
    bufferevent_setwatermark(c->cli, EV_READ | EV_WRITE, 0, 0);
    bufferevent_enable(c->up, EV_READ);
    bufferevent_enable(c->cli, EV_READ);
    on_timeout(c); /* arms the timer */
    /* What came with the 101, and what the client sent after its request. */
    if (!from_origin(c, false))
        return;
    (void)move(c, c->cli, c->up, 0, UINT64_MAX);
}
