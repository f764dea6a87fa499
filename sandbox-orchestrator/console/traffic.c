/* traffic.c - see traffic.h. */
#include "traffic.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "pve.h" /* sbx_msleep */

#define SOURCES_MAX SBX_MAX_EGRESS

enum counter { ALLOWED, DENIED, BYTES_UP, BYTES_DOWN, COUNTERS };
static const char *const counter_name[COUNTERS] = {"allowed", "denied", "bytes_up", "bytes_down"};

/* One sandbox: its counters as each egressd last said them, and the
 * steps. */
struct sandbox {
    char id[32];
    char owner[129];
    uint64_t last[SOURCES_MAX][COUNTERS]; /* cumulative, per egressd */
    uint64_t now[SOURCES_MAX][COUNTERS];  /* the sample being taken */
    bool seen_now[SOURCES_MAX];
    bool known[SOURCES_MAX]; /* a sample of that egressd was taken before */
    long active, active_now;
    uint64_t steps[SBX_TRAFFIC_STEPS][COUNTERS];
    unsigned long last_seen; /* the sample it was last in */
};

struct sbx_traffic {
    pthread_mutex_t lock;
    const struct sbx_config *cfg;
    struct sandbox *sb[SBX_TRAFFIC_SANDBOXES];
    size_t n;
    unsigned long samples; /* taken so far; the step index is samples % STEPS */
    volatile bool stop;
    pthread_t thread;
};

/* The index of egressd source in the config, or -1. */
static int source_index(const struct sbx_traffic *t, const char *source)
{
    for (int i = 0; i < t->cfg->negress && i < SOURCES_MAX; i++)
        if (strcmp(t->cfg->egress[i], source) == 0)
            return i;
    return -1;
}

/* The sandbox called id, made when new (NULL when the table is full of
 * sandboxes seen within the hour).  Lock held. */
static struct sandbox *sandbox_of(struct sbx_traffic *t, const char *id)
{
    size_t oldest = 0;

    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->sb[i]->id, id) == 0)
            return t->sb[i];
        if (t->sb[i]->last_seen < t->sb[oldest]->last_seen)
            oldest = i;
    }
    struct sandbox *s;
    if (t->n < SBX_TRAFFIC_SANDBOXES) {
        s = t->sb[t->n++] = calloc(1, sizeof *s);
    } else if (t->samples - t->sb[oldest]->last_seen >= SBX_TRAFFIC_STEPS) {
        s = t->sb[oldest];
        memset(s, 0, sizeof *s);
    } else {
        return NULL;
    }
    if (!s)
        abort();
    snprintf(s->id, sizeof s->id, "%s", id);
    return s;
}

void sbx_traffic_add(struct sbx_traffic *t, const char *source, json_t *sandboxes)
{
    int src = source_index(t, source);
    size_t i;
    json_t *e;

    if (src < 0)
        return;
    pthread_mutex_lock(&t->lock);
    json_array_foreach(sandboxes, i, e)
    {
        const char *id = json_string_value(json_object_get(e, "sandbox"));
        const char *owner = json_string_value(json_object_get(e, "owner"));
        struct sandbox *s = id && strlen(id) < sizeof s->id ? sandbox_of(t, id) : NULL;
        if (!s)
            continue;
        snprintf(s->owner, sizeof s->owner, "%s", owner ? owner : "");
        for (int c = 0; c < COUNTERS; c++)
            s->now[src][c] = (uint64_t)json_integer_value(json_object_get(e, counter_name[c]));
        s->active_now += (long)json_integer_value(json_object_get(e, "active"));
        s->seen_now[src] = true;
    }
    pthread_mutex_unlock(&t->lock);
}

void sbx_traffic_commit(struct sbx_traffic *t)
{
    pthread_mutex_lock(&t->lock);
    size_t step = t->samples % SBX_TRAFFIC_STEPS;
    for (size_t i = 0; i < t->n; i++) {
        struct sandbox *s = t->sb[i];
        memset(s->steps[step], 0, sizeof s->steps[step]);
        for (int src = 0; src < SOURCES_MAX; src++) {
            if (!s->seen_now[src])
                continue;
            for (int c = 0; c < COUNTERS; c++) {
                uint64_t was = s->last[src][c], is = s->now[src][c];
                if (s->known[src])
                    s->steps[step][c] += is >= was ? is - was : is;
                s->last[src][c] = is;
            }
            s->seen_now[src] = false;
            s->known[src] = true;
            s->last_seen = t->samples;
        }
        s->active = s->active_now;
        s->active_now = 0;
    }
    t->samples++;
    pthread_mutex_unlock(&t->lock);
}

void sbx_traffic_sample(struct sbx_traffic *t)
{
    for (int i = 0; i < t->cfg->negress; i++) {
        json_t *reply = NULL;
        char err[512];
        if (sbx_egress_get(t->cfg, t->cfg->egress[i], "/v1/traffic", &reply, err, sizeof err) == 0)
            sbx_traffic_add(t, t->cfg->egress[i], json_object_get(reply, "sandboxes"));
        json_decref(reply);
    }
    sbx_traffic_commit(t);
}

json_t *sbx_traffic_json(struct sbx_traffic *t, const char *owner)
{
    json_t *all = json_array();

    pthread_mutex_lock(&t->lock);
    size_t have = t->samples < SBX_TRAFFIC_STEPS ? t->samples : SBX_TRAFFIC_STEPS;
    for (size_t i = 0; i < t->n; i++) {
        const struct sandbox *s = t->sb[i];
        if (owner && strcmp(s->owner, owner) != 0)
            continue;
        json_t *o = json_pack("{s:s, s:s, s:I}", "sandbox", s->id, "owner", s->owner, "active",
                              (json_int_t)s->active);
        for (int c = 0; c < COUNTERS; c++) {
            json_t *series = json_array();
            for (size_t k = have; k > 0; k--) /* the first sample has no step before it */
                json_array_append_new(
                    series,
                    json_integer((json_int_t)s->steps[(t->samples - k) % SBX_TRAFFIC_STEPS][c]));
            json_object_set_new(o, counter_name[c], series);
        }
        json_array_append_new(all, o);
    }
    pthread_mutex_unlock(&t->lock);
    return json_pack("{s:i, s:o}", "step", SBX_TRAFFIC_STEP_S, "sandboxes", all);
}

static void *run(void *arg)
{
    struct sbx_traffic *t = arg;

    while (!t->stop) {
        sbx_traffic_sample(t);
        for (int i = 0; i < SBX_TRAFFIC_STEP_S * 10 && !t->stop; i++)
            sbx_msleep(100);
    }
    return NULL;
}

struct sbx_traffic *sbx_traffic_start(const struct sbx_config *c)
{
    struct sbx_traffic *t = calloc(1, sizeof *t);

    if (!t)
        abort();
    pthread_mutex_init(&t->lock, NULL);
    t->cfg = c;
    if (pthread_create(&t->thread, NULL, run, t))
        abort();
    return t;
}

void sbx_traffic_stop(struct sbx_traffic *t)
{
    if (!t)
        return;
    t->stop = true;
    pthread_join(t->thread, NULL);
    for (size_t i = 0; i < t->n; i++)
        free(t->sb[i]);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
