/*
 * oauth_int.h - what the files of oauth/ share; not part of the interface.
 */
#ifndef OAUTH_OAUTH_INT_H
#define OAUTH_OAUTH_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "oauth.h"

#define MS_PER_S 1000 /* milliseconds in a second */

/* ---- err.c: the caller's error buffer ------------------------------------ */

/* Write the formatted message into err (if err and errlen), truncating.
 * Never pass it a token: the texts name fields, not values. */
__attribute__((format(printf, 3, 4))) void oauth_err(char *err, size_t errlen, const char *fmt,
                                                     ...);

/* ---- json.c: JSON members read and written within the caps -------------- */

/* What a member read found. */
enum oauth_member {
    OAUTH_MEMBER_ABSENT, /* missing or null (a string member: also "") */
    OAUTH_MEMBER_OK,     /* read */
    OAUTH_MEMBER_BAD,    /* there, but of the wrong type, size or bytes */
};

/* Whether s[0..len) is a token: 1..OAUTH_TOKEN_MAX bytes of 0x21-0x7e. */
bool oauth_is_token(const char *s, size_t len);

/* Whether s[0..len) fits cap with its NUL and is all 0x20-0x7e. */
bool oauth_is_text(const char *s, size_t len, size_t cap);

/* Parse text[0..len) as one JSON object, duplicate keys refused.  NULL when
 * it is not one.  jansson's error text (which may quote the input) is
 * wiped. */
json_t *oauth_json_load(const char *text, size_t len);

/* Dump j into out[0..cap): pretty (2-space indent and a final newline) or
 * compact; NUL-terminated.  0 with *out_len, or -1 with out wiped. */
int oauth_json_write(const json_t *j, bool pretty, char *out, size_t cap, size_t *out_len);

/* Member key of obj as a token into buf (OAUTH_TOKEN_MAX + 1 bytes, NUL-
 * terminated) and *len. */
enum oauth_member oauth_json_token(const json_t *obj, const char *key, char *buf, size_t *len);

/* Member key of obj as text (oauth_is_text) into buf[0..cap), NUL-terminated
 * ("" when absent). */
enum oauth_member oauth_json_text(const json_t *obj, const char *key, char *buf, size_t cap);

/* Member key of obj as a number of milliseconds in 0..OAUTH_MS_MAX (a
 * fraction is cut off) into *ms (0 when absent). */
enum oauth_member oauth_json_ms(const json_t *obj, const char *key, int64_t *ms);

/* Set obj's member key to the string s[0..len) (its place kept if it was
 * there, else last).  0, or -1 (no memory, not UTF-8, obj not an object). */
int oauth_json_put(json_t *obj, const char *key, const char *s, size_t len);

/* Set obj's member key to the integer v, like oauth_json_put. */
int oauth_json_put_int(json_t *obj, const char *key, int64_t v);

/* Set obj's member key to null, like oauth_json_put. */
int oauth_json_put_null(json_t *obj, const char *key);

/* ---- form.c: application/x-www-form-urlencoded (WHATWG URL §5) ---------- */

/* One name=value pair of a form body, still encoded. */
struct oauth_form_pair {
    const char *name, *value;
    size_t name_len, value_len; /* no '=': value_len 0 */
};

/* The next nonempty pair of the body at *at (advanced) up to end; false at
 * the end. */
bool oauth_form_next(const char **at, const char *end, struct oauth_form_pair *pair);

/* Whether s[0..len) decodes ('+' as space, %XX) without a bad escape. */
bool oauth_form_valid(const char *s, size_t len);

/* Whether the encoded a and b decode to the same bytes (both valid). */
bool oauth_form_equal(const char *a, size_t alen, const char *b, size_t blen);

/* Decode s[0..len) into out[0..cap), NUL-terminated, *out_len.  -1 on a
 * bad escape or when it does not fit (out wiped). */
int oauth_form_decode(const char *s, size_t len, char *out, size_t cap, size_t *out_len);

/* Append "name=value" (each encoded: alphanumerics and *-._ as they are,
 * space as '+', every other byte %XX), after a '&' unless *at is 0, to
 * out[0..cap) at *at (advanced), keeping out NUL-terminated.  -1 when it
 * does not fit. */
int oauth_form_put(char *out, size_t cap, size_t *at, const char *name, const char *value,
                   size_t value_len);

/* ---- stamp.c: instants as text ------------------------------------------- */

#define OAUTH_STAMP_LEN 27 /* "2026-11-30T10:00:00.123000Z" */

/* ms (0..OAUTH_MS_MAX) as RFC 3339 UTC with microseconds and 'Z' into out
 * (OAUTH_STAMP_LEN + 1 bytes).  0, or -1 when ms is out of range. */
int oauth_stamp(int64_t ms, char out[OAUTH_STAMP_LEN + 1]);

/* ---- scope.c: a scope string and Claude Code's list of scopes ------------ */

/* The scopes array of a claudeAiOauth object joined by ' ' into
 * out[OAUTH_SCOPE_MAX] ("" when absent).  BAD when it is not an array of
 * tokens or the joined text does not fit. */
enum oauth_member oauth_scopes_join(const json_t *obj, const char *key, char out[OAUTH_SCOPE_MAX]);

/* scope split at spaces into a new JSON array of strings; NULL on no
 * memory. */
json_t *oauth_scopes_split(const char *scope);

/* ---- login.c: what a struct oauth_login may hold ------------------------ */

/* Whether l's scope and account_id are NUL-terminated texts
 * (oauth_is_text). */
bool oauth_login_texts_ok(const struct oauth_login *l);

/* Whether l is what oauth_file_parse could have read: a provider, tokens
 * where tokens go, an expiry in range, texts. */
bool oauth_login_sane(const struct oauth_login *l);

/* ---- jwt.c -------------------------------------------------------------- */

/* An id_token placeholder for l into out (OAUTH_TOKEN_MAX + 1 bytes): 0
 * with *len (0: l has no id_token), -1 when l's is not a JWT or the
 * placeholder is not a token. */
int oauth_id_placeholder(const struct oauth_login *l, char out[OAUTH_TOKEN_MAX + 1], size_t *len);

#endif
