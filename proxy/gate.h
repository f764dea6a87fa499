/*
 * gate.h - what of an intercepted origin's response may go on to the
 * client (docs/credentials.md, "Threat model"): the response is searched
 * for the secrets its connection sent (reflect.h) ahead of the exchange
 * moving it (exchange.c), and bytes that could still begin one are held
 * back until what follows them clears them.
 *
 *   head bytes, complete ──▶ px_gate_head ──▶ sent on, or cut
 *   body bytes in up's input ──▶ px_gate_body: scanned as the client
 *     decodes them (chunk-data apart from the chunked framing), how many
 *     may move now ──▶ move_body ──▶ px_gate_moved
 *
 * A connection has a gate once a request on it received a credential,
 * and keeps it to its end: the origin may echo a secret in any later
 * response.  Owned by the connection's px_intercept.
 */
#ifndef PX_GATE_H
#define PX_GATE_H

#include <event2/buffer.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"

#define PX_GATE_NONE (-1) /* nothing found */

struct px_gate;

/* A new, empty gate.  Aborts when out of memory. */
struct px_gate *px_gate_new(void);
/* Wipe and free g; NULL is a no-op. */
void px_gate_free(struct px_gate *g);

/* Secret `who` (the caller's number) with value v[0..n) was sent: search
 * for it from now on. */
void px_gate_add(struct px_gate *g, const char *v, size_t n, int who);

/* The head p[0..n) (a 1xx or the final one, complete) is about to go on:
 * the `who` of a secret in it, or PX_GATE_NONE. */
int px_gate_head(struct px_gate *g, const char *p, size_t n);

/* The final head went on; its body (not HTTP_BODY_NONE) is framed by
 * `kind`, with `length` bytes for HTTP_BODY_LENGTH. */
void px_gate_body_start(struct px_gate *g, enum http_body kind, uint64_t length);

/* Search what `in` (the origin's input, the body at its front) holds past
 * what was searched; eof: the origin ended (a body read to the close is
 * then complete).  Returns the `who` of a secret found, or PX_GATE_NONE
 * with *allow: how many bytes at the front of `in` may go on now. */
int px_gate_body(struct px_gate *g, struct evbuffer *in, bool eof, uint64_t *allow);

/* n bytes of the body were taken from the front of the input. */
void px_gate_moved(struct px_gate *g, size_t n);

/* The body's bytes before offset `upto` (from its start; all in the input
 * now) may move once px_gate_body has searched them, even those the search
 * holds back: a WebSocket frame ended there (upgrade.c),
 * and its bytes cannot wait for the next frame, which may be long in
 * coming.  A secret that straddles two frames is still found when its end
 * comes, and cuts the stream then; the part of it in the first frame has
 * moved on. */
void px_gate_release(struct px_gate *g, uint64_t upto);

#endif
