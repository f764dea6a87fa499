/*
 * relay.c - the tunnel: bytes both ways between client and upstream until
 * both have ended, a timeout fires or the tunnel's life is over.
 *
 * Back-pressure as libevent's le-proxy sample: when the output towards one
 * side passes RELAY_HIGH bytes, stop reading the other side; resume when
 * it has drained below half (the write watermark's callback).  A side's end
 * of stream is passed on as a half-close (shutdown SHUT_WR) once everything
 * it sent is written, so protocols that close one direction first work.
 */
#include <event2/buffer.h>
#include <sys/socket.h>

#include "conn.h"

#define RELAY_HIGH (256 * 1024)

static struct bufferevent *peer_of(struct px_conn *c, struct bufferevent *bev)
{
    return bev == c->cli ? c->up : c->cli;
}

static bool *eof_of(struct px_conn *c, struct bufferevent *bev)
{
    return bev == c->cli ? &c->eof_cli : &c->eof_up;
}

static void on_relay_read(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    struct bufferevent *to = peer_of(c, bev);
    struct evbuffer *in = bufferevent_get_input(bev), *out = bufferevent_get_output(to);
    size_t n = evbuffer_get_length(in);

    if (bev == c->cli)
        c->bytes_up += n;
    else
        c->bytes_down += n;
    evbuffer_add_buffer(out, in);
    c->t_active_ms = px_now_ms();
    c->quota_counted += n;
    if (!px_limit_bytes(c->lim, n, px_d.cfg->quota_bytes_per_sandbox)) {
        c->reason = PX_R_LIMIT;
        px_conn_close(c, "byte quota used up");
        return;
    }
    if (evbuffer_get_length(out) >= RELAY_HIGH) {
        bufferevent_disable(bev, EV_READ);
        bufferevent_setwatermark(to, EV_WRITE, RELAY_HIGH / 2, 0);
    }
}

/* `bev`'s output fell below its low watermark. */
static void on_relay_written(struct bufferevent *bev, void *arg)
{
    struct px_conn *c = arg;
    struct bufferevent *from = peer_of(c, bev);
    bool from_eof = *eof_of(c, from);

    if (!from_eof && !(bufferevent_get_enabled(from) & EV_READ)) {
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        bufferevent_enable(from, EV_READ);
    }
    if (from_eof && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        shutdown(bufferevent_getfd(bev), SHUT_WR);
        if (c->eof_cli && c->eof_up && evbuffer_get_length(bufferevent_get_output(from)) == 0)
            px_conn_close(c, "both sides ended");
    }
}

static void on_relay_event(struct bufferevent *bev, short what, void *arg)
{
    struct px_conn *c = arg;
    struct bufferevent *to = peer_of(c, bev);

    if (what & BEV_EVENT_ERROR) {
        px_conn_close(c, bev == c->cli ? "client error" : "upstream error");
        return;
    }
    if (!(what & BEV_EVENT_EOF))
        return;
    on_relay_read(bev, c); /* whatever came with the end */
    *eof_of(c, bev) = true;
    bufferevent_disable(bev, EV_READ);
    if (c->eof_cli && c->eof_up && evbuffer_get_length(bufferevent_get_output(c->cli)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(c->up)) == 0) {
        px_conn_close(c, "both sides ended");
        return;
    }
    bufferevent_setwatermark(to, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(to)) == 0)
        on_relay_written(to, c);
}

void px_relay_start(struct px_conn *c)
{
    px_conn_set_state(c, PX_S_RELAY);
    c->t_start_ms = c->t_start_ms ? c->t_start_ms : px_now_ms();
    c->t_active_ms = px_now_ms();
    bufferevent_setcb(c->cli, on_relay_read, on_relay_written, on_relay_event, c);
    bufferevent_setcb(c->up, on_relay_read, on_relay_written, on_relay_event, c);
    bufferevent_setwatermark(c->cli, EV_READ | EV_WRITE, 0, 0);
    bufferevent_setwatermark(c->up, EV_READ | EV_WRITE, 0, 0);
    bufferevent_enable(c->cli, EV_READ | EV_WRITE);
    bufferevent_enable(c->up, EV_READ | EV_WRITE);
    px_conn_timeout(c, 1); /* rearm_idle sets the real deadline */
    if (evbuffer_get_length(bufferevent_get_input(c->cli)) > 0)
        on_relay_read(c->cli, c);
}
