/*
 * reflect.h - a streaming search for secrets an origin sends back
 * (docs/credentials.md, "Threat model").
 *
 * An intercepted connection that sent a secret to its origin holds one
 * px_reflect: the forms of each secret it sent, as an origin may echo
 * them (the value itself; percent-encoded; inside base64 at any of its
 * three alignments, standard and URL-safe alphabets).  The response bytes
 * are fed in as they arrive, in pieces cut anywhere; a form split across
 * pieces is found because each stream keeps the last (longest form - 1)
 * bytes it was fed.  Pure: no I/O, no logging, no globals.
 *
 * What may go on: after a feed that found nothing, the stream's last
 * px_reflect_held() bytes could still begin a form; everything before them
 * cannot be part of one, whatever comes next.  A caller that passes on
 * only the bytes before the held ones never passes on a byte of a form
 * that a later feed finds (tests/fuzz/fuzz_reflect.c holds it to that).
 */
#ifndef PX_REFLECT_H
#define PX_REFLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_REFLECT_FORM_MAX     256 /* bytes of a form searched: its first ones */
#define PX_REFLECT_PATTERNS_MAX 64  /* forms one connection searches for */
#define PX_REFLECT_NONE         (-1)

struct px_reflect_form {
    uint8_t *p; /* malloc'd; wiped when freed */
    size_t len; /* 1..PX_REFLECT_FORM_MAX */
    int who;    /* the caller's number for the secret */
};

/* The forms searched for.  Zeroed is empty. */
struct px_reflect {
    struct px_reflect_form *f; /* malloc'd, room for cap */
    size_t n, cap;
    size_t longest; /* of f[].len */
    /* The index of the forms' first 4-byte grams (reflect.c); step 0: none,
     * memmem for each form instead.  Gram k is form k / step's bytes at
     * offset k % step: value[k], and next[k] the next gram in its chain. */
    size_t step;
    uint16_t *slot; /* 1 << bits heads of chains (k + 1; 0: none) */
    unsigned bits;
    uint32_t *value;
    uint16_t *next;
    size_t n_grams;
};

/* One stream of response bytes: what it keeps between feeds. */
struct px_reflect_stream {
    uint8_t tail[PX_REFLECT_FORM_MAX - 1]; /* its last bytes (at most longest - 1) */
    size_t n;
};

/* Add the forms of value v[0..n) (n > 0), found later as secret `who`.  A
 * value already added (the same bytes) adds nothing.  Returns false when
 * the forms do not all fit (PX_REFLECT_PATTERNS_MAX): those that fit are
 * searched for. */
bool px_reflect_add(struct px_reflect *r, const char *v, size_t n, int who);

/* Wipe and free r's forms; r is empty again. */
void px_reflect_clear(struct px_reflect *r);

/* Feed the next n bytes of stream s.  Returns the `who` of a form found in
 * what s kept followed by p[0..n), or PX_REFLECT_NONE.  Either way s then
 * keeps its last bytes. */
int px_reflect_feed(const struct px_reflect *r, struct px_reflect_stream *s, const char *p,
                    size_t n);

/* How many of the last bytes fed to s could be the start of a form (the
 * longest end of s that is a proper prefix of one); 0 when none. */
size_t px_reflect_held(const struct px_reflect *r, const struct px_reflect_stream *s);

/* Forget what s kept (wiped). */
void px_reflect_stream_reset(struct px_reflect_stream *s);

#endif
