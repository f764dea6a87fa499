/* probe.h - a test session of the MCP protocol layer for the unit tests:
 * it keeps what its transport was asked to send, and sends the requests.
 * Shared by test_mcp_features.c and test_mcp_extensions.c. */
#ifndef SBX_TEST_MCP_PROBE_H
#define SBX_TEST_MCP_PROBE_H

#include <jansson.h>

#include "mcp_server.h"

/* A test session: what its transport was asked to send, kept in order. */
struct probe {
    struct sbx_mcp_session s;
    json_t *notified;  /* notify: a request's notifications */
    json_t *delivered; /* deliver: the ones tied to no request */
};

/* A fresh probe whose session notifies and delivers into its arrays. */
void probe_init(struct probe *p);
/* Forgets what it was sent so far. */
void probe_clear(struct probe *p);
/* Ends its session on srv and frees the arrays. */
void probe_end(struct sbx_mcp_server *srv, struct probe *p);

/* Sends one message text through parse + handle; returns the reply (new). */
json_t *rpc(struct sbx_mcp_server *srv, struct probe *p, const char *text);
/* rpc() of a request (id 5) with method and params (JSON text). */
json_t *req(struct sbx_mcp_server *srv, struct probe *p, const char *method, const char *params);
/* req() with the reply dropped: for the steps between checks. */
void req_quiet(struct sbx_mcp_server *srv, struct probe *p, const char *method, const char *params);

/* A string's value, "" for anything else (a check fails, never crashes). */
const char *sv(const json_t *j);
/* A reply's error code (0 when it is none). */
json_int_t error_code(const json_t *reply);
/* A reply's result, or NULL. */
json_t *result_of(const json_t *reply);

#endif
