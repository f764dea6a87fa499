/*
 * handout.h - the addresses the policy DNS server handed out for each
 * name, kept a while, for the transparent listeners' destination check.
 *
 * Every worker has a resolver cache of its own, and a name's servers may
 * answer each worker differently (round robin, a CDN's rotation, a TTL
 * that ran out in between).  A sandbox that got address D for name N from
 * the DNS server (on one worker) and then opens a redirected connection
 * to D with SNI N (landing on another, or on the same one after its cache
 * moved on) must not be refused as sni_mismatch: D is accepted while its
 * handout holds (its TTL plus PX_HANDOUT_GRACE_S, as clients keep answers
 * longer than their TTL), and it passes the address phase again then.
 *
 * Thread-safe: a table of fixed size in shards, each under its own mutex,
 * written when the DNS server answers (and only when the entry changes
 * or would expire soon) and read only when a redirected connection's
 * destination is not among its name's addresses.  A name whose slot is
 * taken by another evicts it: the check then falls back to the
 * resolver's answer alone, as without a DNS server.
 */
#ifndef PX_HANDOUT_H
#define PX_HANDOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PX_HANDOUT_GRACE_S 120
#define PX_HANDOUT_SLOTS   4096

/* The DNS server answered normalized `name` with addr[0..n) (16-byte
 * form), good for ttl_s seconds. */
void px_handout_note(const char *name, const uint8_t (*addr)[16], size_t n, uint32_t ttl_s);
/* Whether addr was handed out for normalized `name` and still holds. */
bool px_handout_has(const char *name, const uint8_t addr[16]);
/* Forget everything (for tests). */
void px_handout_clear(void);

#endif
