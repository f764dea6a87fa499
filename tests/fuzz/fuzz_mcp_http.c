/*
 * fuzz_mcp_http.c - the request reading of `sandboxctl mcp --http`
 * (sandbox-orchestrator/mcp/mcp_http.h, on http/'s parser): bytes from any
 * local client, before the token is checked.
 *
 * Properties:
 *   - the head ends where an independent reader says: past the empty lines
 *     a request may start with, at the first CRLF CRLF; an accepted head is
 *     exactly that long, within the cap, and holds no NUL; a NUL before that
 *     end is refused; more bytes are asked for only below the cap and only
 *     while no end is there;
 *   - the verdict does not depend on where the buffer ends: a prefix (in a
 *     buffer of its own size, so ASan sees any read past it) needs more or
 *     gives the whole's verdict, status, error and head length;
 *   - a refusal is 400, 413, 414, 431 or 501, with a reason;
 *   - every string of a parsed request lies in its copy of the head, and
 *     the value of each header the server acts on is its line's, without
 *     the blanks around it;
 *   - an accepted request has at most one Content-Length line (a line is
 *     what ends in CRLF), and content_length is its value, or -1 without
 *     one; it has no Transfer-Encoding, at most one line of each header
 *     the server acts on (Host, Origin, Authorization, Content-Type,
 *     Accept, Mcp-Session-Id, MCP-Protocol-Version), each line ends in
 *     CRLF, and the body length is within the cap;
 *   - derived requests, as documented: the accepted head with a second
 *     Content-Length or Host line is 400; with Transfer-Encoding: chunked
 *     501, or 400 where it had Content-Length or is HTTP/1.0 (two framings,
 *     or one 1.0 does not have); padded with a header to exactly the cap it
 *     is read, one byte more is 431 (each unless the header count is at its
 *     cap: 431).
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

/* Where the request line starts: past any empty lines (RFC 9112 2.2). */
static size_t skip_empty_lines(const char *buf, size_t len)
{
    size_t s = 0;

    while (s + 2 <= len && buf[s] == '\r' && buf[s + 1] == '\n')
        s += 2;
    return s;
}

/* The independent reader: the length of the head in buf[0..len), or 0 if
 * it has not ended there. */
static size_t oracle_end(const char *buf, size_t len)
{
    size_t s = skip_empty_lines(buf, len);
    const char *e = s < len ? memmem(buf + s, len - s, "\r\n\r\n", 4) : NULL;

    return e ? (size_t)(e + 4 - buf) : 0;
}

/* The lines of head (CRLF-terminated, after the request line and any empty
 * lines before it), by name:
 * how many are called name, and the value of the last one, trimmed. */
static int count_lines(const char *head, size_t hl, const char *name, char *value, size_t cap)
{
    size_t nl = strlen(name);
    const char *p = head + skip_empty_lines(head, hl), *end = head + hl - 2;
    int n = 0;

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

static void check_within(const char *s, const struct sbx_mcp_http_request *q, const char *what)
{
    CHECK(s == NULL || (s >= q->head && s + strlen(s) <= q->head + q->head_len),
          "%s points outside the head", what);
}

/* Parses a copy of buf[0..len) in a buffer of exactly len bytes. */
static enum sbx_mcp_http_head parse_copy(const char *buf, size_t len,
                                         struct sbx_mcp_http_request *q)
{
    char *copy = malloc(len ? len : 1);
    enum sbx_mcp_http_head r;

    memcpy(copy, buf, len);
    r = sbx_mcp_http_parse_head(copy, len, q);
    free(copy);
    return r;
}

/* head with line inserted before its blank line; parsed, the status (0 when
 * accepted). */
static int status_with(const char *head, size_t hl, const char *line, size_t ll)
{
    static struct sbx_mcp_http_request q;
    char *buf = malloc(hl + ll);
    enum sbx_mcp_http_head r;

    memcpy(buf, head, hl - 2);
    memcpy(buf + hl - 2, line, ll);
    memcpy(buf + hl - 2 + ll, "\r\n", 2);
    r = parse_copy(buf, hl + ll, &q);
    free(buf);
    CHECK(r != SBX_MCP_HEAD_MORE, "a complete head with a line inserted needs more bytes");
    CHECK(r != SBX_MCP_HEAD_OK || q.head_len == hl + ll,
          "the inserted line moved the end of the head");
    return r == SBX_MCP_HEAD_OK ? 0 : q.status;
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
    CHECK(count_lines(head, hl, "Transfer-Encoding", NULL, 0) == 0,
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
    /* The version follows the target and its blank. */
    int http10 = strncmp(q->target + strlen(q->target) + 1, "HTTP/1.0", 8) == 0;
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
    if (q->content_length >= 0 || http10)
        CHECK(st == 400 || st == 431, "Transfer-Encoding with Content-Length or in 1.0: %d", st);
    else
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

/* Where the head ends, by the independent reader, against the verdict. */
static void check_end(const char *buf, size_t size, enum sbx_mcp_http_head r,
                      const struct sbx_mcp_http_request *q)
{
    size_t window = size < SBX_MCP_HTTP_HEAD_MAX ? size : SBX_MCP_HTTP_HEAD_MAX;
    size_t end = oracle_end(buf, window);
    const char *nul = memchr(buf, '\0', end ? end : window);

    if (r == SBX_MCP_HEAD_OK)
        CHECK(end && q->head_len == end && !nul, "head of %zu bytes, the reader's ends at %zu%s",
              q->head_len, end, nul ? ", after a NUL" : "");
    if (r == SBX_MCP_HEAD_MORE)
        CHECK(size < SBX_MCP_HTTP_HEAD_MAX && !oracle_end(buf, size),
              "more asked of %zu bytes, the reader's head ends at %zu", size, end);
    if (nul && end)
        CHECK(r == SBX_MCP_HEAD_REFUSED, "a NUL at %zu, before the end at %zu, not refused",
              (size_t)(nul - buf), end);
    if (r == SBX_MCP_HEAD_REFUSED)
        CHECK((q->status == 400 || q->status == 413 || q->status == 414 || q->status == 431 ||
               q->status == 501) &&
                  q->error && *q->error,
              "refused with status %d", q->status);
}

/* A prefix needs more or says what the whole says. */
static void check_prefix(const char *buf, size_t cut, enum sbx_mcp_http_head whole,
                         const struct sbx_mcp_http_request *w)
{
    static struct sbx_mcp_http_request p;
    enum sbx_mcp_http_head r = parse_copy(buf, cut, &p);

    if (r == SBX_MCP_HEAD_MORE)
        return;
    CHECK(r == whole && p.status == w->status && p.head_len == w->head_len &&
              (p.error == w->error || (p.error && w->error && strcmp(p.error, w->error) == 0)),
          "the first %zu bytes say %d/%d (%s), the whole %d/%d (%s)", cut, r, p.status,
          p.error ? p.error : "-", whole, w->status, w->error ? w->error : "-");
}

static void check_request(const char *buf, const struct sbx_mcp_http_request *q)
{
    const char *values[] = {q->host,       q->origin,           q->auth,        q->accept,
                            q->session_id, q->protocol_version, q->content_type};
    static char want[SBX_MCP_HTTP_HEAD_MAX];

    check_within(q->method, q, "method");
    check_within(q->target, q, "target");
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        int lines = count_lines(buf, q->head_len, acted_on[i], want, sizeof want);

        check_within(values[i], q, acted_on[i]);
        CHECK(!values[i] == !lines, "%s: a value without its line, or a line without its value",
              acted_on[i]);
        CHECK(!values[i] || strcmp(values[i], want) == 0, "%s: '%s' read as '%s'", acted_on[i],
              want, values[i]);
    }
    check_accepted(buf, q->head_len, q);
    check_derived(buf, q->head_len, q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct sbx_mcp_http_request q;
    const char *buf = (const char *)data;
    enum sbx_mcp_http_head r = sbx_mcp_http_parse_head(buf, size, &q);

    check_end(buf, size, r, &q);
    if (size > 0) {
        check_prefix(buf, size - 1, r, &q);
        check_prefix(buf, (size_t)data[0] * size / 256, r, &q);
    }
    if (r == SBX_MCP_HEAD_OK)
        check_request(buf, &q);
    return 0;
}
