/*
 * upgrade.c - which protocol change a request asks for, and whether a
 * response grants it (RFC 9110 section 7.8, RFC 6455 section 4).
 *
 * Only one is ever served: WebSocket, asked for by a GET without a body
 * (none, or Content-Length: 0) whose Upgrade field lists "websocket" and
 * whose Connection field lists "upgrade".  Any other Upgrade field (h2c,
 * TLS/1.0, a WebSocket upgrade with a body) is HTTP_UPGRADE_OTHER: the
 * caller refuses it.
 */
#include "http.h"
#include "http_int.h"

/* Does a field named `name` in h[0..n) list `token` (case-insensitive)? */
static bool field_lists(const struct http_header *h, size_t n, const char *name, const char *token)
{
    for (size_t i = 0; i < n; i++) {
        const char *p = h[i].value.p, *end = p + h[i].value.len;
        struct http_view elem;

        if (!view_is(h[i].name, name))
            continue;
        while (list_next(&p, end, &elem))
            if (view_is(elem, token))
                return true;
    }
    return false;
}

enum http_upgrade http_request_upgrade(const struct http_request *req)
{
    if (!req->upgrade)
        return HTTP_UPGRADE_NONE;
    bool no_body =
        req->body == HTTP_BODY_NONE || (req->body == HTTP_BODY_LENGTH && req->content_length == 0);

    if (req->minor == 1 && view_is(req->method, "get") && no_body &&
        field_lists(req->headers, req->n_headers, "upgrade", "websocket") &&
        field_lists(req->headers, req->n_headers, "connection", "upgrade"))
        return HTTP_UPGRADE_WEBSOCKET;
    return HTTP_UPGRADE_OTHER;
}

bool http_response_upgrades_websocket(const struct http_response *resp)
{
    return resp->status == 101 &&
           field_lists(resp->headers, resp->n_headers, "upgrade", "websocket") &&
           field_lists(resp->headers, resp->n_headers, "connection", "upgrade");
}
