/* probe.c - see probe.h. */
#include <stdio.h>
#include <string.h>

#include "probe.h"

static void probe_notify(void *arg, json_t *msg)
{
    json_array_append_new(((struct probe *)arg)->notified, msg);
}

static void probe_deliver(void *arg, json_t *msg)
{
    json_array_append_new(((struct probe *)arg)->delivered, msg);
}

void probe_init(struct probe *p)
{
    memset(p, 0, sizeof *p);
    p->notified = json_array();
    p->delivered = json_array();
    p->s.notify = probe_notify;
    p->s.notify_arg = p;
    p->s.deliver = probe_deliver;
    p->s.deliver_arg = p;
}

void probe_clear(struct probe *p)
{
    json_array_clear(p->notified);
    json_array_clear(p->delivered);
}

void probe_end(struct sbx_mcp_server *srv, struct probe *p)
{
    sbx_mcp_session_end(srv, &p->s);
    json_decref(p->notified);
    json_decref(p->delivered);
}

json_t *rpc(struct sbx_mcp_server *srv, struct probe *p, const char *text)
{
    json_t *msg, *reply;

    if (sbx_mcp_parse(text, strlen(text), &msg, &reply) == -1)
        return reply;
    reply = sbx_mcp_handle(srv, &p->s, msg);
    json_decref(msg);
    return reply;
}

json_t *req(struct sbx_mcp_server *srv, struct probe *p, const char *method, const char *params)
{
    char buf[2048];

    snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"%s\",\"params\":%s}",
             method, params);
    return rpc(srv, p, buf);
}

void req_quiet(struct sbx_mcp_server *srv, struct probe *p, const char *method, const char *params)
{
    json_decref(req(srv, p, method, params));
}

const char *sv(const json_t *j)
{
    const char *s = json_string_value(j);

    return s ? s : "";
}

json_int_t error_code(const json_t *reply)
{
    return json_integer_value(json_object_get(json_object_get(reply, "error"), "code"));
}

json_t *result_of(const json_t *reply)
{
    return json_object_get(reply, "result");
}
