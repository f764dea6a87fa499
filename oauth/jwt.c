/*
 * jwt.c - JSON Web Tokens (RFC 7519) read without verification: the `exp`
 * claim, and the placeholder that carries a real token's claims under a
 * header and signature that make it worthless as a credential.
 *
 * A JWT here is three base64url segments (RFC 4648 §5, no padding) joined
 * by '.', whose header and payload decode to JSON objects; the signature
 * may be empty (an unsecured JWT) and is never decoded.  Trailing bits of a
 * segment's last character are not checked.
 */
#include <string.h>

#include "oauth_int.h"

#define JWT_DECODED_MAX (OAUTH_TOKEN_MAX / 4 * 3) /* a segment of a token, decoded */
#define EXP_MAX         (OAUTH_MS_MAX / MS_PER_S)

static const char placeholder_header[] = "{\"alg\":\"none\",\"typ\":\"JWT\"}";
static const char placeholder_signature[] = "egressd-placeholder";
static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

enum {
    B64_BITS = 6,     /* bits per character */
    BYTE_BITS = 8,    /* bits per byte */
    B64_GROUP = 4,    /* characters per 3 bytes */
    B64_BAD_TAIL = 1, /* a group of one character holds no whole byte */
    B64_MASK = 0x3f,  /* one character's bits */
    BYTE_MASK = 0xff, /* one byte's bits */
};

/* The segments of a JWT. */
struct jwt {
    const char *header, *payload, *signature;
    size_t header_len, payload_len, signature_len;
};

/* The value of base64url character c, or -1. */
static int b64url_value(char c)
{
    const char *p = c != '\0' ? strchr(b64url_alphabet, c) : NULL;

    return p != NULL ? (int)(p - b64url_alphabet) : -1;
}

/* Decode s[0..len) into out[0..cap) and *out_len; -1 on a character outside
 * the alphabet, a dangling single character, or no room. */
static int b64url_decode(const char *s, size_t len, unsigned char *out, size_t cap, size_t *out_len)
{
    unsigned acc = 0, bits = 0;
    size_t n = 0;

    if (len % B64_GROUP == B64_BAD_TAIL)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value(s[i]);
        if (v < 0)
            return -1;
        acc = (acc << B64_BITS | (unsigned)v) & ((1u << (B64_BITS + BYTE_BITS)) - 1);
        bits += B64_BITS;
        if (bits >= BYTE_BITS) {
            bits -= BYTE_BITS;
            if (n == cap)
                return -1;
            out[n++] = (unsigned char)(acc >> bits & BYTE_MASK);
        }
    }
    *out_len = n;
    return 0;
}

/* Encode s[0..len) as base64url without padding into out[0..cap); its
 * length, or 0 when it does not fit. */
static size_t b64url_encode(const unsigned char *s, size_t len, char *out, size_t cap)
{
    unsigned acc = 0, bits = 0;
    size_t n = 0;

    for (size_t i = 0; i <= len; i++) {
        if (i < len) {
            acc = (acc << BYTE_BITS | s[i]) & ((1u << (B64_BITS + BYTE_BITS)) - 1);
            bits += BYTE_BITS;
        } else if (bits > 0) {
            acc <<= B64_BITS - bits; /* the last character, padded with zero bits */
            bits = B64_BITS;
        }
        while (bits >= B64_BITS) {
            bits -= B64_BITS;
            if (n == cap)
                return 0;
            out[n++] = b64url_alphabet[acc >> bits & B64_MASK];
        }
    }
    return n;
}

/* The JSON object segment seg[0..len) decodes to, or NULL.  The decoded
 * bytes are wiped. */
static json_t *segment_object(const char *seg, size_t len)
{
    unsigned char buf[JWT_DECODED_MAX];
    size_t n;
    json_t *obj = NULL;

    if (len > 0 && b64url_decode(seg, len, buf, sizeof buf, &n) == 0)
        obj = oauth_json_load((const char *)buf, n);
    explicit_bzero(buf, sizeof buf);
    return obj;
}

/* Whether s[0..len) is all base64url characters. */
static bool b64url_chars(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b64url_value(s[i]) < 0)
            return false;
    return true;
}

/* Split tok[0..len) into *j and return its payload object (the caller's to
 * json_decref), or NULL when tok is not a JWT. */
static json_t *jwt_read(const char *tok, size_t len, struct jwt *j)
{
    const char *dot1, *dot2, *end = tok + len;

    if (!oauth_is_token(tok, len) || (dot1 = memchr(tok, '.', len)) == NULL ||
        (dot2 = memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1))) == NULL ||
        memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)) != NULL)
        return NULL;
    *j = (struct jwt){tok,
                      dot1 + 1,
                      dot2 + 1,
                      (size_t)(dot1 - tok),
                      (size_t)(dot2 - dot1 - 1),
                      (size_t)(end - dot2 - 1)};
    if (!b64url_chars(j->signature, j->signature_len))
        return NULL;
    json_t *header = segment_object(j->header, j->header_len);
    if (header == NULL)
        return NULL;
    json_decref(header);
    return segment_object(j->payload, j->payload_len);
}

int64_t oauth_jwt_exp(const char *tok, size_t len)
{
    struct jwt j;
    json_t *payload = jwt_read(tok, len, &j);
    const json_t *exp = json_object_get(payload, "exp");
    int64_t secs = 0;

    if (json_is_integer(exp) && json_integer_value(exp) > 0 && json_integer_value(exp) <= EXP_MAX)
        secs = json_integer_value(exp);
    else if (json_is_real(exp) && json_real_value(exp) >= 1 &&
             json_real_value(exp) <= (double)EXP_MAX)
        secs = (int64_t)json_real_value(exp);
    json_decref(payload);
    return secs;
}

/* Append s[0..len) to out[0..cap) at *at; false when it (and a NUL after
 * it) does not fit. */
static bool put(char *out, size_t cap, size_t *at, const char *s, size_t len)
{
    if (cap - *at <= len)
        return false;
    memcpy(out + *at, s, len);
    *at += len;
    return true;
}

int oauth_jwt_placeholder(const char *real, size_t len, char *out, size_t cap, size_t *out_len)
{
    struct jwt j;
    json_t *payload = jwt_read(real, len, &j);
    char header[sizeof placeholder_header * 2];
    size_t header_len = b64url_encode((const unsigned char *)placeholder_header,
                                      sizeof placeholder_header - 1, header, sizeof header);
    size_t at = 0;

    if (payload == NULL || cap == 0)
        goto fail;
    json_decref(payload);
    if (!put(out, cap, &at, header, header_len) || !put(out, cap, &at, ".", 1) ||
        !put(out, cap, &at, j.payload, j.payload_len) || !put(out, cap, &at, ".", 1) ||
        !put(out, cap, &at, placeholder_signature, sizeof placeholder_signature - 1))
        goto fail;
    out[at] = '\0';
    *out_len = at;
    return 0;
fail:
    if (cap > 0)
        explicit_bzero(out, cap);
    return -1;
}

int oauth_id_placeholder(const struct oauth_login *l, char out[OAUTH_TOKEN_MAX + 1], size_t *len)
{
    *len = 0;
    out[0] = '\0';
    if (l->id_token_len == 0)
        return 0;
    return oauth_jwt_placeholder(l->id_token, l->id_token_len, out, OAUTH_TOKEN_MAX + 1, len);
}
