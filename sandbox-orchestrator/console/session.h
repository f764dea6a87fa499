/* session.h - the console's signed-in people: a bounded table of
 * sessions, each named by a random id (the cookie) and carrying its own
 * CSRF token, the Proxmox user, the owner name that user's sandboxes
 * carry, and whether the user is an admin.  A session ends at its
 * deadline (the sign-in's lifetime), after IDLE_MS without a request, or
 * at sign-out.  Thread-safe: every call takes the table's lock, and
 * lookups hand out copies, never pointers into the table.
 */
#ifndef SBX_CONSOLE_SESSION_H
#define SBX_CONSOLE_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#define SBX_SESSION_ID_LEN  43 /* 32 random bytes, base64url without padding */
#define SBX_SESSIONS_MAX    256
#define SBX_SESSION_IDLE_MS (30L * 60 * 1000)

struct sbx_session {
    char id[SBX_SESSION_ID_LEN + 1];
    char csrf[SBX_SESSION_ID_LEN + 1];
    char user[129];  /* the Proxmox user, USER@REALM */
    char owner[129]; /* the owner tag of this user's sandboxes */
    bool admin;      /* sees and acts on every sandbox */
    long expires_ms; /* monotonic clock (sbx_now_ms) */
    long last_ms;
};

struct sbx_sessions;

struct sbx_sessions *sbx_sessions_new(void);
void sbx_sessions_free(struct sbx_sessions *t);

/* Open a session for user (owner, admin) that ends lifetime_ms from now;
 * its id and CSRF token are fresh random values.  A full table makes room
 * by ending the session idle longest.  0 with the session copied into
 * *out, or -1 when the system's random source fails. */
int sbx_sessions_open(struct sbx_sessions *t, const char *user, const char *owner, bool admin,
                      long lifetime_ms, struct sbx_session *out);

/* The live session whose id is `id` (compared in constant time), copied
 * into *out, its idle clock restarted.  false for none, ended or expired. */
bool sbx_sessions_find(struct sbx_sessions *t, const char *id, struct sbx_session *out);

/* End the session `id` (nothing when there is none). */
void sbx_sessions_end(struct sbx_sessions *t, const char *id);

/* Whether a and b (NUL-terminated) are equal, in time that depends only
 * on their lengths. */
bool sbx_session_token_eq(const char *a, const char *b);

#endif
