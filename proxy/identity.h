/*
 * identity.h - which sandbox a connection is (identity.c), its metrics and
 * limits handles.
 */
#ifndef PX_IDENTITY_H
#define PX_IDENTITY_H

#include "conn.h"

enum px_identity {
    PX_ID_OK,      /* c->sb, c->pb are the sandbox's (or default-policy's) */
    PX_ID_UNKNOWN, /* the credentials name no sandbox (407); c->sb is the source's */
    PX_ID_LIMIT,   /* the sandbox is at its connection limit or rate (429); nothing counted */
};
/* Find the sandbox in c->world: by the `Proxy-Authorization` value when
 * auth is not NULL, else by the source address (or none: default-policy).
 * Sets c->sb, c->pb and, when the sandbox is another than before, the
 * metrics and limits handles (counting the connection there). */
enum px_identity px_conn_identify(struct px_conn *c, const char *auth, size_t auth_len);
/* The same sandbox (or both none), whatever world each was found in. */
bool px_conn_same_sandbox(const struct px_sandbox *a, const struct px_sandbox *b);

#endif
