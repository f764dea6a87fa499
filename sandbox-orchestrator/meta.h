/* meta.h - the sandbox metadata block kept in a VM's Proxmox description.
 *
 * The description is the source of truth for owner, created, expires,
 * policy, address and extra allows: `list`, `reap` and `sync` read it back.
 * The block is readable in the Proxmox web interface:
 *
 *     Sandbox managed by sandboxctl: edit with `sandboxctl extend`, not by hand.
 *
 *     sandboxctl-sandbox v1
 *     owner: alice
 *     created: 2026-11-30T07:00:00Z
 *     expires: 2026-11-30T11:00:00Z
 *     policy: balanced
 *     address: 10.99.0.11
 *     allow: pypi.org files.pythonhosted.org
 *     secrets: anthropic github
 *     grants: crates.io:443@2026-11-30T09:00:00Z
 * api.github.com:443|methods=GET|paths=/repos/acme,/user@2026-11-30T10:00:00Z
 *
 * The secrets line (credential injection, docs/credentials.md) is written
 * only for a sandbox that has secrets; its names go into the binding, so
 * whoever may edit the description may also give the sandbox a secret, as
 * they may widen its allow list: the description is the binding's source.
 * The grants line holds the approved access requests (ops_access.c): each
 * an allow entry, the requests it admits when it says (grant.h), and the
 * time it lapses, HOST[:PORTS][|methods=M,M][|paths=G,G]@TIME (split at
 * the last '@': a path glob may hold one); the binding carries it as the
 * policy line "HOST[:PORTS] [methods M,M] [paths G,G] until TIME", so
 * egressd stops allowing it at that time by itself.  Written only when
 * there are some.
 * The decoder treats the description as hostile (anyone with
 * VM.Config.Options may edit it): every value is checked as strictly as the
 * encoder writes it, a repeated key is an error, unknown keys are ignored.
 */
#ifndef SBX_META_H
#define SBX_META_H

#include <stddef.h>
#include <time.h>

#define SBX_META_MAX_ALLOW   32
#define SBX_ALLOW_MAX        300  /* host (253) plus a port list */
#define SBX_DESC_MAX         8192 /* Proxmox's limit on description */
#define SBX_META_MAX_SECRETS 16   /* egressd's limit per binding */
#define SBX_SECRET_NAME_MAX  64   /* a secret's name (63) and its NUL */
#define SBX_META_MAX_GRANTS  16

#define SBX_GRANT_METHODS_MAX 64  /* "GET,HEAD,...,TRACE" (45) and its NUL */
#define SBX_GRANT_PATHS_MAX   520 /* path globs, comma-separated (grant.h) */

/* One approved access request: an allow entry, the requests it admits
 * (grant.h; "" for any) and the time it lapses. */
struct sbx_grant {
    char allow[SBX_ALLOW_MAX];
    char methods[SBX_GRANT_METHODS_MAX];
    char paths[SBX_GRANT_PATHS_MAX];
    time_t until;
};

struct sbx_meta {
    char owner[65];
    char policy[65];
    char address[16];
    time_t created, expires;
    int nallow;
    char allow[SBX_META_MAX_ALLOW][SBX_ALLOW_MAX];
    int nsecrets; /* the names of the secrets egressd injects for it */
    char secrets[SBX_META_MAX_SECRETS][SBX_SECRET_NAME_MAX];
    int ngrants; /* approved access requests, lapsed ones included */
    struct sbx_grant grants[SBX_META_MAX_GRANTS];
};

enum sbx_meta_result {
    SBX_META_OK,        /* the block was found and every value is valid */
    SBX_META_ABSENT,    /* no sandboxctl block: not a sandbox of ours */
    SBX_META_MALFORMED, /* a block, but broken or tampered with; err says where */
};

/* Write m as a description into buf (len bytes).  Returns the length, or
 * -1 with a reason in err when a value is invalid or it would not fit. */
int sbx_meta_encode(const struct sbx_meta *m, char *buf, size_t len, char *err, size_t errlen);

/* Read the block from text (len bytes, not necessarily NUL-terminated) into
 * m.  On SBX_META_MALFORMED err names the line and the problem. */
enum sbx_meta_result sbx_meta_decode(const char *text, size_t len, struct sbx_meta *m, char *err,
                                     size_t errlen);

/* Validators shared with the operations (1 = valid). */
int sbx_meta_valid_owner(const char *s);
int sbx_meta_valid_policy(const char *s);
int sbx_meta_valid_allow(const char *s);
int sbx_meta_valid_address(const char *s);
/* A secret's name as egressd's secret-dir holds it: [a-z0-9][a-z0-9_-]{0,62}. */
int sbx_meta_valid_secret(const char *s);

/* RFC 3339 UTC "YYYY-MM-DDTHH:MM:SSZ" (buf of at least 21 bytes). */
void sbx_time_format(time_t t, char *buf, size_t len);

/* Parse exactly that form; returns 0 or -1. */
int sbx_time_parse(const char *s, time_t *t);

#endif
