/* session.c - see session.h. */
#include "session.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pve.h" /* sbx_now_ms */

struct sbx_sessions {
    pthread_mutex_t lock;
    struct sbx_session s[SBX_SESSIONS_MAX];
};

struct sbx_sessions *sbx_sessions_new(void)
{
    struct sbx_sessions *t = calloc(1, sizeof *t);

    if (!t)
        abort();
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void sbx_sessions_free(struct sbx_sessions *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    explicit_bzero(t->s, sizeof t->s);
    free(t);
}

bool sbx_session_token_eq(const char *a, const char *b)
{
    size_t n = strlen(a);
    unsigned char diff = 0;

    if (n != strlen(b))
        return false;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* 32 random bytes as base64url into out (SBX_SESSION_ID_LEN + 1 bytes).
 * 0, or -1 when the random source fails. */
static int random_token(char *out)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char raw[33] = {0};
    size_t o = 0;

    if (getrandom(raw, 32, 0) != 32)
        return -1;
    for (size_t i = 0; i < 33; i += 3) {
        unsigned v = (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | raw[i + 2];
        for (int k = 3; k >= 0 && o < SBX_SESSION_ID_LEN; k--)
            out[o++] = b64[(v >> (6 * k)) & 63];
    }
    out[o] = '\0';
    explicit_bzero(raw, sizeof raw);
    return 0;
}

/* Whether slot s is in use and alive at now. */
static bool alive(const struct sbx_session *s, long now)
{
    return s->id[0] && now < s->expires_ms && now - s->last_ms < SBX_SESSION_IDLE_MS;
}

/* The slot for a new session: a free or dead one, else the one idle
 * longest.  Called with the lock held. */
static struct sbx_session *free_slot(struct sbx_sessions *t, long now)
{
    struct sbx_session *oldest = &t->s[0];

    for (size_t i = 0; i < SBX_SESSIONS_MAX; i++) {
        if (!alive(&t->s[i], now))
            return &t->s[i];
        if (t->s[i].last_ms < oldest->last_ms)
            oldest = &t->s[i];
    }
    return oldest;
}

int sbx_sessions_open(struct sbx_sessions *t, const char *user, const char *owner, bool admin,
                      long lifetime_ms, struct sbx_session *out)
{
    struct sbx_session n = {.admin = admin};
    long now = sbx_now_ms();

    if (random_token(n.id) || random_token(n.csrf))
        return -1;
    snprintf(n.user, sizeof n.user, "%s", user);
    snprintf(n.owner, sizeof n.owner, "%s", owner);
    n.expires_ms = now + lifetime_ms;
    n.last_ms = now;
    pthread_mutex_lock(&t->lock);
    *free_slot(t, now) = n;
    pthread_mutex_unlock(&t->lock);
    *out = n;
    explicit_bzero(&n, sizeof n);
    return 0;
}

/* The slot of id, alive or not, or NULL.  Called with the lock held;
 * every slot is compared, so the time does not tell where it was. */
static struct sbx_session *slot_of(struct sbx_sessions *t, const char *id)
{
    struct sbx_session *hit = NULL;

    if (strlen(id) != SBX_SESSION_ID_LEN)
        return NULL;
    for (size_t i = 0; i < SBX_SESSIONS_MAX; i++)
        if (t->s[i].id[0] && sbx_session_token_eq(t->s[i].id, id))
            hit = &t->s[i];
    return hit;
}

bool sbx_sessions_find(struct sbx_sessions *t, const char *id, struct sbx_session *out)
{
    long now = sbx_now_ms();
    bool found = false;

    pthread_mutex_lock(&t->lock);
    struct sbx_session *s = slot_of(t, id);
    if (s && alive(s, now)) {
        s->last_ms = now;
        *out = *s;
        found = true;
    } else if (s) {
        explicit_bzero(s, sizeof *s);
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

void sbx_sessions_end(struct sbx_sessions *t, const char *id)
{
    pthread_mutex_lock(&t->lock);
    struct sbx_session *s = slot_of(t, id);
    if (s)
        explicit_bzero(s, sizeof *s);
    pthread_mutex_unlock(&t->lock);
}
