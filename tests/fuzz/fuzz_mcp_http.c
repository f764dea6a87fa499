/*
 * fuzz_mcp_http.c - the request reading of `sandboxctl mcp --http`
 * (sandbox-orchestrator/mcp/mcp_http.h): bytes from any local client,
 * before the token is checked.
 *
 * Properties:
 *   - sbx_mcp_http_head_end() finds exactly the first CRLF CRLF within the
 *     cap, says 400 for a NUL before it, 431 when the cap holds none, and
 *     otherwise asks for more; the head is then parsed in a buffer of its
 *     own size, so any read past it is caught (ASan);
 *   - every string of a parsed request points into the head, and the value
 *     of each header the server acts on is its line's, without the blanks
 *     around it;
 *   - an accepted request has at most one Content-Length line (a line is
 *     what ends in CRLF), and content_length is its value, or -1 without
 *     one; it has no Transfer-Encoding, at most one line of each header
 *     the server acts on (Host, Origin, Authorization, Content-Type,
 *     Accept, Mcp-Session-Id, MCP-Protocol-Version), each line ends in
 *     CRLF, and the body length is within the cap;
 *   - derived requests, as documented: the accepted head with a second
 *     Content-Length or Host line is 400, with Transfer-Encoding 501; padded
 *     with a header to exactly the cap it is read, one byte more is 431.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz_check.h"
#include "mcp_http.h"

static const char *const acted_on[] = {"Host",        "Origin",         "Authorization",
                                       "Accept",      "Mcp-Session-Id", "MCP-Protocol-Version",
                                       "Content-Type"};

/* The lines of head (CRLF-terminated, after the request line and any empty
 * lines before it), by name:
 * how many are called name, and the value of the last one, trimmed. */
static int count_lines(const char *head, size_t hl, const char *name, char *value, size_t cap)
{
    size_t nl = strlen(name);
    const char *p = head, *end = head + hl - 2;
    int n = 0;

    while (p + 2 <= end && memcmp(p, "\r\n", 2) == 0)
        p += 2; /* empty lines before the request line */
    p = memmem(p, (size_t)(end - p) + 2, "\r\n", 2);

    while (p && p + 2 < end) {
        const char *line = p + 2, *e = memmem(line, (size_t)(end - line) + 2, "\r\n", 2);
        size_t ll = (size_t)(e - line);

        if (ll > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1, *ve = line + ll;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            if (value) {
                size_t vl = (size_t)(ve - v) < cap - 1 ? (size_t)(ve - v) : cap - 1;
                memcpy(value, v, vl);
                value[vl] = '\0';
            }
            n++;
        }
        p = e;
    }
    return n;
}

static void check_within(const char *s, const char *head, size_t hl, const char *what)
{
    CHECK(s == NULL || (s >= head && s + strlen(s) <= head + hl), "%s points outside the head",
          what);
}

/* Parses a copy of buf[0..hl) in a buffer of exactly hl + 1 bytes. */
static int parse_copy(const char *buf, size_t hl, struct sbx_mcp_http_request *q, char **out)
{
    char *head = malloc(hl + 1);

    memcpy(head, buf, hl);
    head[hl] = '\0';
    *out = head;
    return sbx_mcp_http_parse_head(head, q);
}

/* head with line inserted before its blank line; parsed, the status. */
static int status_with(const char *head, size_t hl, const char *line, size_t ll)
{
    struct sbx_mcp_http_request q;
    char *buf = malloc(hl + ll), *copy;
    int status;

    memcpy(buf, head, hl - 2);
    memcpy(buf + hl - 2, line, ll);
    memcpy(buf + hl - 2 + ll, "\r\n", 2);
    ssize_t n = sbx_mcp_http_head_end(buf, hl + ll, &status);
    if (n > 0) {
        CHECK((size_t)n == hl + ll, "the inserted line moved the end of the head");
        status = parse_copy(buf, (size_t)n, &q, &copy);
        free(copy);
    } else {
        CHECK(n == -1, "a complete head needs more bytes");
    }
    free(buf);
    return status;
}

/* The accepted head padded with an X-Pad line to total bytes. */
static int status_padded(const char *head, size_t hl, size_t total)
{
    size_t ll = total - hl;
    char *line = malloc(ll);
    int status;

    memcpy(line, "X-Pad: ", 7);
    memset(line + 7, 'a', ll - 9);
    memcpy(line + ll - 2, "\r\n", 2);
    status = status_with(head, hl, line, ll);
    free(line);
    return status;
}

static void check_accepted(const char *head, size_t hl, const struct sbx_mcp_http_request *q)
{
    char cl[64];
    int ncl = count_lines(head, hl, "Content-Length", cl, sizeof cl);

    CHECK(ncl <= 1, "accepted with %d Content-Length lines", ncl);
    if (ncl == 1)
        CHECK(strspn(cl, "0123456789") == strlen(cl) && q->content_length == strtoll(cl, NULL, 10),
              "Content-Length '%s' read as %lld", cl, q->content_length);
    else
        CHECK(q->content_length == -1, "no Content-Length line, yet %lld", q->content_length);
    CHECK(q->content_length <= (long long)SBX_MCP_HTTP_BODY_MAX, "a body over the cap");
    CHECK(!q->chunked && count_lines(head, hl, "Transfer-Encoding", NULL, 0) == 0,
          "accepted with Transfer-Encoding");
    for (size_t i = 0; i < sizeof acted_on / sizeof acted_on[0]; i++)
        CHECK(count_lines(head, hl, acted_on[i], NULL, 0) <= 1, "two %s lines accepted",
              acted_on[i]);
    /* Every line ends in CRLF: no bare LF or CR anywhere in the head. */
    for (size_t i = 0; i < hl; i++) {
        CHECK(head[i] != '\n' || (i > 0 && head[i - 1] == '\r'), "a bare LF at %zu accepted", i);
        CHECK(head[i] != '\r' || (i + 1 < hl && head[i + 1] == '\n'), "a bare CR at %zu accepted",
              i);
    }
    CHECK(strchr(q->method, ' ') == NULL && strchr(q->target, ' ') == NULL,
          "a blank in the method or target");
}

static void check_derived(const char *head, size_t hl, const struct sbx_mcp_http_request *q)
{
    static const char te[] = "Transfer-Encoding: chunked\r\n";
    char line[80];
    int n, st;

    if (q->content_length >= 0) {
        n = snprintf(line, sizeof line, "Content-Length: %lld\r\n", q->content_length);
        st = status_with(head, hl, line, (size_t)n);
        CHECK(st == 400 || st == 431, "a second, equal Content-Length: %d", st);
    }
    if (q->host) {
        st = status_with(head, hl, "Host: localhost\r\n", 17);
        CHECK(st == 400 || st == 431, "a second Host: %d", st);
    }
    st = status_with(head, hl, te, sizeof te - 1);
    CHECK(st == 501 || st == 431, "Transfer-Encoding: %d", st);
    if (hl + 16 <= SBX_MCP_HTTP_HEAD_MAX) {
        st = status_padded(head, hl, SBX_MCP_HTTP_HEAD_MAX);
        CHECK(st == 0 || st == 431, "a head of exactly the cap: %d", st);
    }
    if (hl + 16 <= SBX_MCP_HTTP_HEAD_MAX + 1) {
        st = status_padded(head, hl, SBX_MCP_HTTP_HEAD_MAX + 1);
        CHECK(st == 431, "a head one byte over the cap: %d", st);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct sbx_mcp_http_request q;
    int status = 0;
    char *head;

    ssize_t hl = sbx_mcp_http_head_end(buf, size, &status);
    size_t n = strnlen(buf, size);
    const char *end =
        memmem(buf, n < SBX_MCP_HTTP_HEAD_MAX ? n : SBX_MCP_HTTP_HEAD_MAX, "\r\n\r\n", 4);
    if (end)
        CHECK(hl == end + 4 - buf, "head end %zd, first CRLF CRLF ends at %zd", hl, end + 4 - buf);
    else if (n < size)
        CHECK(hl == -1 && status == 400, "a NUL in the head: %zd/%d", hl, status);
    else if (size >= SBX_MCP_HTTP_HEAD_MAX)
        CHECK(hl == -1 && status == 431, "no end within the cap: %zd/%d", hl, status);
    else
        CHECK(hl == 0, "no end yet, but %zd/%d", hl, status);
    if (hl <= 0)
        return 0;

    status = parse_copy(buf, (size_t)hl, &q, &head);
    CHECK(status == 0 || status == 400 || status == 413 || status == 431 || status == 501,
          "status %d", status);
    if (status == 0) {
        const char *values[] = {q.host,       q.origin,           q.auth,        q.accept,
                                q.session_id, q.protocol_version, q.content_type};
        char *raw = malloc((size_t)hl + 1); /* the bytes as they came */

        memcpy(raw, buf, (size_t)hl);
        raw[hl] = '\0';
        check_within(q.method, head, (size_t)hl, "method");
        check_within(q.target, head, (size_t)hl, "target");
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
            check_within(values[i], head, (size_t)hl, acted_on[i]);
            char want[SBX_MCP_HTTP_HEAD_MAX];
            int lines = count_lines(raw, (size_t)hl, acted_on[i], want, sizeof want);
            CHECK(!values[i] == !lines, "%s: a value without its line, or a line without its value",
                  acted_on[i]);
            CHECK(!values[i] || strcmp(values[i], want) == 0, "%s: '%s' read as '%s'", acted_on[i],
                  want, values[i]);
        }
        check_accepted(raw, (size_t)hl, &q);
        check_derived(raw, (size_t)hl, &q);
        free(raw);
    }
    free(head);
    return 0;
}
