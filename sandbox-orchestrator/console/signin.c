/* signin.c - POST /api/login and /api/logout.
 *
 * A person signs in with their Proxmox VE user: the console asks Proxmox
 * for a ticket with what they typed (pve.h, sbx_pve_ticket), the TOTP
 * step too when Proxmox asks for it, and keeps nothing of it but the user
 * name Proxmox answers with.  Whether they are an admin is asked with
 * sandboxctl's own token (GET /access/groups/{console-admin-group}).  A
 * refusal is Proxmox's own answer, the same whichever part was wrong.
 * Each address may fail FAILS_MAX times in FAIL_WINDOW_MS, then waits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pve.h"
#include "sbx.h"

#define FAILS_MAX      10
#define FAIL_WINDOW_MS (10L * 60 * 1000)
#define FAIL_TABLE     128
#define USER_MAX       128
#define PASSWORD_MAX   1024
#define OTP_MAX        16
#define COOKIE_MAX     256

/* Failed sign-ins per client address. */
static struct {
    pthread_mutex_t lock;
    struct {
        char from[64];
        long first_ms;
        int fails;
    } t[FAIL_TABLE];
} fails = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Whether `from` has failed too often lately. */
static bool throttled(const char *from)
{
    long now = sbx_now_ms();
    bool over = false;

    pthread_mutex_lock(&fails.lock);
    for (int i = 0; i < FAIL_TABLE; i++)
        if (strcmp(fails.t[i].from, from) == 0 && now - fails.t[i].first_ms < FAIL_WINDOW_MS)
            over = fails.t[i].fails >= FAILS_MAX;
    pthread_mutex_unlock(&fails.lock);
    return over;
}

/* Count a failed sign-in from `from`. */
static void count_failure(const char *from)
{
    long now = sbx_now_ms();
    int slot = 0;

    pthread_mutex_lock(&fails.lock);
    for (int i = 0; i < FAIL_TABLE; i++) {
        if (strcmp(fails.t[i].from, from) == 0) {
            slot = i;
            break;
        }
        if (fails.t[i].first_ms < fails.t[slot].first_ms)
            slot = i;
    }
    if (strcmp(fails.t[slot].from, from) != 0 || now - fails.t[slot].first_ms >= FAIL_WINDOW_MS) {
        snprintf(fails.t[slot].from, sizeof fails.t[slot].from, "%s", from);
        fails.t[slot].first_ms = now;
        fails.t[slot].fails = 0;
    }
    fails.t[slot].fails++;
    pthread_mutex_unlock(&fails.lock);
}

/* A string member of j of 1..max bytes without control characters, or NULL. */
static const char *field(json_t *j, const char *key, size_t max)
{
    const char *v = json_string_value(json_object_get(j, key));

    if (!v || !*v || strlen(v) > max)
        return NULL;
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return NULL;
    return v;
}

/* Ask Proxmox for a ticket: the password step, then the TOTP step when
 * it asks for one.  0 with the user name Proxmox gave into user; 1 when a
 * code is needed and none was given; -1 with Proxmox's refusal in err. */
static int ask_ticket(struct sbx_console *con, const char *username, const char *password,
                      const char *realm, const char *otp, char *user, size_t userlen, char *err,
                      size_t errlen)
{
    json_t *params = json_pack("{s:s, s:s}", "username", username, "password", password), *data;
    int rc;

    if (realm)
        json_object_set_new(params, "realm", json_string(realm));
    pthread_mutex_lock(&con->signin_lock);
    rc = sbx_pve_ticket(con->signin, params, &data, err, errlen);
    json_decref(params);
    if (rc == 0 && json_integer_value(json_object_get(data, "NeedTFA")) == 1) {
        const char *challenge = json_string_value(json_object_get(data, "ticket"));
        const char *who = json_string_value(json_object_get(data, "username"));
        char code[OTP_MAX + 8];
        if (!otp) {
            rc = 1;
        } else {
            snprintf(code, sizeof code, "totp:%s", otp);
            params = json_pack("{s:s, s:s, s:s}", "username", who ? who : username, "tfa-challenge",
                               challenge ? challenge : "", "password", code);
            json_decref(data);
            data = NULL;
            rc = sbx_pve_ticket(con->signin, params, &data, err, errlen);
            json_decref(params);
            explicit_bzero(code, sizeof code);
        }
    }
    pthread_mutex_unlock(&con->signin_lock);
    const char *who = json_string_value(json_object_get(data, "username"));
    if (rc == 0 && !who) {
        snprintf(err, errlen, "POST /access/ticket: the answer names no user");
        rc = -1;
    }
    if (rc == 0)
        snprintf(user, userlen, "%s", who);
    json_decref(data);
    return rc;
}

/* Whether user is in console-admin-group: 0 (no), 1 (yes), -1 with err
 * when Proxmox could not say. */
static int is_admin(struct sbx_console *con, const char *user, char *err, size_t errlen)
{
    const char *group = con->s->cfg.console_admin_group;
    char path[256], *eg;
    json_t *data = NULL, *m;
    size_t i;
    int admin = 0;

    if (!group)
        return 0;
    eg = sbx_pve_escape(group);
    snprintf(path, sizeof path, "/access/groups/%s", eg);
    free(eg);
    pthread_mutex_lock(&con->op_lock);
    int rc = sbx_pve_call(con->s->pve, "GET", path, NULL, &data, err, errlen);
    pthread_mutex_unlock(&con->op_lock);
    if (rc)
        return -1;
    json_array_foreach(json_object_get(data, "members"), i, m) admin |=
        json_is_string(m) && strcmp(json_string_value(m), user) == 0;
    json_decref(data);
    return admin;
}

/* The owner tag of user's sandboxes: the bare name for a user of
 * console-owner-realm (alice@pam owns "alice"), else the whole name. */
static void owner_of(const struct sbx_console *con, const char *user, char *owner, size_t len)
{
    const char *at = strrchr(user, '@');
    const char *realm = con->s->cfg.console_owner_realm;

    if (at && strcmp(at + 1, realm) == 0)
        snprintf(owner, len, "%.*s", (int)(at - user), user);
    else
        snprintf(owner, len, "%s", user);
}

/* The answer to a sign-in and to GET /api/session: who session s is,
 * its CSRF token, and the longest grant it may ask for (access-max). */
static json_t *session_json(const struct sbx_console *con, const struct sbx_session *s)
{
    char max[32];

    sbx_duration_format(con->s->cfg.access_max_ms, max, sizeof max);
    return json_pack("{s:s, s:s, s:b, s:s, s:s}", "user", s->user, "owner", s->owner, "admin",
                     s->admin, "csrf", s->csrf, "access_max", max);
}

/* Answer a signed-in r with a new session and its cookie. */
static enum MHD_Result open_session(struct sbx_request *r, const char *user, bool admin)
{
    struct sbx_session s;
    char owner[129], cookie[COOKIE_MAX];
    long ms = r->con->s->cfg.console_session_ms;

    owner_of(r->con, user, owner, sizeof owner);
    if (sbx_sessions_open(r->con->sessions, user, owner, admin, ms, &s))
        return sbx_web_error(r, 500, "no session id could be drawn (the random source failed)");
    snprintf(cookie, sizeof cookie,
             "egc_session=%s; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=%ld", s.id,
             ms / 1000);
    json_t *body = session_json(r->con, &s);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
    MHD_add_response_header(resp, "Set-Cookie", cookie);
    explicit_bzero(cookie, sizeof cookie);
    sbx_audit(r->con->audit, user, r->from, "signin", NULL, true, admin ? "admin" : "owner");
    explicit_bzero(&s, sizeof s);
    return sbx_web_queue(r, 200, resp);
}

enum MHD_Result sbx_signin_login(struct sbx_request *r)
{
    char err[512], user[USER_MAX + 1];
    json_t *j;

    if (!sbx_web_same_origin(r))
        return sbx_web_error(r, 403, "a sign-in must come from the console's own page");
    if (throttled(r->from))
        return sbx_web_error(r, 429, "too many failed sign-ins from this address: wait 10 minutes");
    j = json_loadb(r->body, r->body_len, 0, NULL);
    const char *username = field(j, "username", USER_MAX);
    const char *password = field(j, "password", PASSWORD_MAX);
    const char *realm = json_object_get(j, "realm") ? field(j, "realm", 32) : NULL;
    const char *otp = json_object_get(j, "otp") ? field(j, "otp", OTP_MAX) : NULL;
    if (!username || !password || (json_object_get(j, "realm") && !realm) ||
        (json_object_get(j, "otp") && !otp)) {
        json_decref(j);
        return sbx_web_error(r, 400,
                             "expected {\"username\", \"password\"} and optionally "
                             "\"realm\" and \"otp\", each a line of text");
    }
    int rc = ask_ticket(r->con, username, password, realm, otp, user, sizeof user, err, sizeof err);
    char typed[USER_MAX + 40];
    snprintf(typed, sizeof typed, "%s%s%s", username, realm ? "@" : "", realm ? realm : "");
    json_decref(j); /* the password's copy goes with it */
    if (rc == 1)
        return sbx_web_json(
            r, 401,
            json_pack("{s:s, s:b}", "error", "Proxmox VE asks for a TOTP code", "need_otp", 1));
    if (rc < 0) {
        if (sbx_pve_last_status(r->con->signin) == 401)
            count_failure(r->from);
        sbx_audit(r->con->audit, typed, r->from, "signin", NULL, false, err);
        return sbx_web_error(r, sbx_pve_last_status(r->con->signin) == 401 ? 401 : 502, err);
    }
    int admin = is_admin(r->con, user, err, sizeof err);
    if (admin < 0) {
        sbx_audit(r->con->audit, user, r->from, "signin", NULL, false, err);
        char msg[700];
        snprintf(msg, sizeof msg, "cannot tell whether %s is in console-admin-group: %s", user,
                 err);
        return sbx_web_error(r, 502, msg);
    }
    return open_session(r, user, admin == 1);
}

enum MHD_Result sbx_signin_logout(struct sbx_request *r)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(2, "{}", MHD_RESPMEM_PERSISTENT);

    sbx_sessions_end(r->con->sessions, r->session.id);
    sbx_audit(r->con->audit, r->session.user, r->from, "signout", NULL, true, NULL);
    MHD_add_response_header(resp, "Content-Type", "application/json; charset=utf-8");
    MHD_add_response_header(resp, "Set-Cookie",
                            "egc_session=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0");
    return sbx_web_queue(r, 200, resp);
}

enum MHD_Result sbx_signin_session(struct sbx_request *r)
{
    return sbx_web_json(r, 200, session_json(r->con, &r->session));
}
