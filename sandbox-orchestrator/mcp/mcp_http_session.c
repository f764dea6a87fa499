/* mcp_http_session.c - the Streamable HTTP transport's sessions: a table
 * of reference-counted heap objects (contract in mcp_http_session.h).
 *
 * A session has one reference from the table while it is in it and one
 * per request using it; DELETE, eviction and expiry take it out of the
 * table, and the last reference ends it in the protocol layer
 * (sbx_mcp_session_end: out of the registry, subscriptions freed) and
 * frees it.  Notifications tied to no request are queued for the
 * session's GET stream while one is open (at most QUEUE_MAX waiting) and
 * dropped otherwise: nothing else could carry them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "mcp_http_session.h"

#include <pthread.h>

#define QUEUE_MAX 256

struct sbx_mcp_http_session {
    struct sbx_mcp_session s; /* first: the protocol layer's part */
    struct sbx_mcp_http_sessions *t;
    char id[SBX_MCP_HTTP_SESSION_ID_LEN + 1]; /* "" outside the table */
    time_t last_used;
    int refs;
    int streaming; /* a GET stream is open */
    json_t *queue; /* for the GET stream */
    pthread_cond_t wake;
};

struct sbx_mcp_http_sessions {
    struct sbx_mcp_server *srv;
    int max, idle_s;
    pthread_mutex_t lock; /* everything in the table and its sessions */
    struct sbx_mcp_http_session **slots;
};

/* The session's deliver: queue msg (stolen) for the GET stream.  Called
 * under the server's session lock; takes only the table's. */
static void deliver(void *arg, json_t *msg)
{
    struct sbx_mcp_http_session *se = arg;

    pthread_mutex_lock(&se->t->lock);
    if (se->streaming && se->id[0] && json_array_size(se->queue) < QUEUE_MAX) {
        json_array_append(se->queue, msg);
        pthread_cond_signal(&se->wake);
    }
    pthread_mutex_unlock(&se->t->lock);
    json_decref(msg);
}

struct sbx_mcp_http_sessions *sbx_mcp_http_sessions_new(struct sbx_mcp_server *srv, int max,
                                                        int idle_s)
{
    struct sbx_mcp_http_sessions *t = calloc(1, sizeof *t);

    if (!t || !(t->slots = calloc((size_t)max, sizeof *t->slots)))
        abort();
    t->srv = srv;
    t->max = max;
    t->idle_s = idle_s;
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

struct sbx_mcp_http_session *sbx_mcp_http_session_new(struct sbx_mcp_http_sessions *t)
{
    struct sbx_mcp_http_session *se = calloc(1, sizeof *se);

    if (!se)
        abort();
    se->t = t;
    se->refs = 1;
    se->queue = json_array();
    se->s.deliver = deliver;
    se->s.deliver_arg = se;
    pthread_cond_init(&se->wake, NULL);
    return se;
}

struct sbx_mcp_session *sbx_mcp_http_session_mcp(struct sbx_mcp_http_session *se)
{
    return &se->s;
}

/* Frees se, whose last reference went (not under the table's lock). */
static void session_free(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se)
{
    sbx_mcp_session_end(t->srv, &se->s);
    json_decref(se->queue);
    pthread_cond_destroy(&se->wake);
    free(se);
}

void sbx_mcp_http_session_release(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se)
{
    int last;

    pthread_mutex_lock(&t->lock);
    last = --se->refs == 0;
    pthread_mutex_unlock(&t->lock);
    if (last)
        session_free(t, se);
}

/* Takes slot i out of the table (under the lock); returns its session when
 * that was its last reference (to be freed after the lock), else NULL. */
static struct sbx_mcp_http_session *take_out(struct sbx_mcp_http_sessions *t, int i)
{
    struct sbx_mcp_http_session *se = t->slots[i];

    t->slots[i] = NULL;
    se->id[0] = '\0';
    pthread_cond_broadcast(&se->wake); /* a GET stream ends */
    return --se->refs == 0 ? se : NULL;
}

int sbx_mcp_http_session_add(struct sbx_mcp_http_sessions *t, struct sbx_mcp_http_session *se,
                             char id[SBX_MCP_HTTP_SESSION_ID_LEN + 1])
{
    unsigned char rnd[SBX_MCP_HTTP_SESSION_ID_LEN / 2];
    struct sbx_mcp_http_session **gone = calloc((size_t)t->max, sizeof *gone);
    time_t now = time(NULL);
    int slot = -1, ngone = 0;

    if (!gone)
        abort();
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        free(gone);
        return -1;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->max; i++) {
        if (t->slots[i] && now - t->slots[i]->last_used > t->idle_s) {
            struct sbx_mcp_http_session *last = take_out(t, i);

            if (last)
                gone[ngone++] = last;
        }
        /* A free slot, else the one unused for longest. */
        if (!t->slots[i] ? slot < 0 || t->slots[slot]
                         : slot < 0 || (t->slots[slot] &&
                                        t->slots[i]->last_used < t->slots[slot]->last_used))
            slot = i;
    }
    if (t->slots[slot]) {
        struct sbx_mcp_http_session *last;

        fprintf(stderr, "sandboxctl mcp: %d sessions open: ending the least recent\n", t->max);
        last = take_out(t, slot);
        if (last)
            gone[ngone++] = last;
    }
    memcpy(se->id, id, sizeof se->id);
    se->last_used = now;
    se->refs++;
    t->slots[slot] = se;
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < ngone; i++)
        session_free(t, gone[i]);
    free(gone);
    return 0;
}

struct sbx_mcp_http_session *sbx_mcp_http_session_find(struct sbx_mcp_http_sessions *t,
                                                       const char *id)
{
    struct sbx_mcp_http_session *found = NULL;

    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->max && !found; i++) {
        if (t->slots[i] && strcmp(t->slots[i]->id, id) == 0) {
            found = t->slots[i];
            found->refs++;
            found->last_used = time(NULL);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

int sbx_mcp_http_session_delete(struct sbx_mcp_http_sessions *t, const char *id)
{
    struct sbx_mcp_http_session *found = NULL;

    pthread_mutex_lock(&t->lock);
    for (int i = 0; i < t->max && !found; i++) {
        if (t->slots[i] && strcmp(t->slots[i]->id, id) == 0) {
            found = t->slots[i];
            found->refs++; /* ours, so take_out frees nothing */
            take_out(t, i);
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (!found)
        return -1;
    /* A tool call of the session waiting for an elicitation's answer
     * stops waiting: nobody will send it now. */
    sbx_mcp_session_close(t->srv, &found->s);
    sbx_mcp_http_session_release(t, found);
    return 0;
}

void sbx_mcp_http_sessions_free(struct sbx_mcp_http_sessions *t)
{
    for (int i = 0; i < t->max; i++) {
        struct sbx_mcp_http_session *gone = NULL;

        pthread_mutex_lock(&t->lock);
        if (t->slots[i])
            gone = take_out(t, i);
        pthread_mutex_unlock(&t->lock);
        if (gone)
            session_free(t, gone);
    }
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t);
}

int sbx_mcp_http_session_stream_open(struct sbx_mcp_http_sessions *t,
                                     struct sbx_mcp_http_session *se)
{
    int rc = -1;

    pthread_mutex_lock(&t->lock);
    if (!se->streaming) {
        se->streaming = 1;
        json_array_clear(se->queue);
        rc = 0;
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

json_t *sbx_mcp_http_session_stream_wait(struct sbx_mcp_http_sessions *t,
                                         struct sbx_mcp_http_session *se, int ms, int *ended)
{
    struct timespec until;
    json_t *got;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&t->lock);
    while (se->id[0] && json_array_size(se->queue) == 0 &&
           pthread_cond_timedwait(&se->wake, &t->lock, &until) == 0)
        ;
    got = se->queue;
    se->queue = json_array();
    *ended = !se->id[0];
    pthread_mutex_unlock(&t->lock);
    return got;
}

void sbx_mcp_http_session_stream_close(struct sbx_mcp_http_sessions *t,
                                       struct sbx_mcp_http_session *se)
{
    pthread_mutex_lock(&t->lock);
    se->streaming = 0;
    json_array_clear(se->queue);
    pthread_mutex_unlock(&t->lock);
}
