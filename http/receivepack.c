/*
 * receivepack.c - a git push over smart HTTP as it streams by: the
 * command list at the start of a git-receive-pack request body
 * (gitprotocol-pack(5), "Reference Update Request"), read pkt-line by
 * pkt-line without changing it, and the report-status answer that refuses
 * a push in the client's own terms.
 *
 *   update-requests = *shallow ( command-list | push-cert )
 *   shallow         = PKT-LINE("shallow" SP obj-id LF)
 *   command-list    = PKT-LINE(command NUL capability-list) *PKT-LINE(command)
 *                     flush-pkt
 *   command         = old-id SP new-id SP name   (zero-id: create / delete)
 *
 * What follows the flush (push options, the pack) is not read.  Anything
 * else (a signed push's push-cert, a delim or response-end packet, a line
 * that is not a command, a bad object id or ref name, more than the caps)
 * is HTTP_RP_BAD: a push egressd cannot read is refused, never passed on
 * unread.
 */
#include <stdio.h>
#include <string.h>

#include "http.h"

#define PKT_HEAD       4     /* the four hex digits of a pkt-line's length */
#define PKT_FLUSH      0     /* "0000" */
#define PKT_MAX        65520 /* the longest pkt-line, its length included */
#define OID_SHA1       40    /* hex digits of a SHA-1 object id */
#define OID_SHA256     64    /* ... of a SHA-256 one */
#define BAND_DATA      1     /* side-band channel of the report */
#define BAND_MAX_64K   65515 /* payload of one side-band-64k packet, after the band byte */
#define BAND_MAX_SMALL 995   /* ... of one side-band packet */

enum { RP_LEN, RP_PAYLOAD, RP_END, RP_BAD };

void http_rp_init(struct http_rp *r)
{
    memset(r, 0, sizeof(*r));
    r->state = RP_LEN;
}

static enum http_rp_result bad(struct http_rp *r, const char *why)
{
    r->state = RP_BAD;
    r->error = why;
    return HTTP_RP_BAD;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* An object id of r's length (the first command sets it: 40 or 64 lower
 * hex digits) at s[0..len). */
static bool oid_ok(struct http_rp *r, const char *s, size_t len)
{
    if (len != OID_SHA1 && len != OID_SHA256)
        return false; /* (an empty one too, before the length is known) */
    if (r->oid_len == 0)
        r->oid_len = (uint8_t)len;
    if (len != r->oid_len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (hex_digit(s[i]) < 0)
            return false;
    return true;
}

static bool all_zero(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != '0')
            return false;
    return true;
}

/* A ref name as git's check_refname_format takes it for an update (a
 * full name, "refs/" and at least one more component), stricter where
 * it costs nothing: printable ASCII without SP ~ ^ : ? * [ \, no "..",
 * "@{", "//", no component starting with '.' or ending in ".lock", not
 * ending in '/' or '.'. */
bool http_rp_ref_ok(const char *s, size_t len)
{
    if (len <= 5 || len > HTTP_RP_REF_MAX || memcmp(s, "refs/", 5) != 0 || s[len - 1] == '/' ||
        s[len - 1] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || strchr("~^:?*[\\", c) != NULL)
            return false;
        if (i + 1 < len && ((c == '.' && s[i + 1] == '.') || (c == '@' && s[i + 1] == '{') ||
                            (c == '/' && s[i + 1] == '/')))
            return false;
        if (c == '/' && i + 1 < len && s[i + 1] == '.')
            return false;
        if ((c == '/' || i + 1 == len) && i >= 5 && memcmp(s + i - 5 + (c != '/'), ".lock", 5) == 0)
            return false;
    }
    return true;
}

/* Whether capability word w[0..n) is in the list caps[0..len). */
static bool has_cap(const char *caps, size_t len, const char *w)
{
    size_t n = strlen(w);
    for (size_t i = 0; i < len;) {
        const char *sp = memchr(caps + i, ' ', len - i);
        size_t end = sp != NULL ? (size_t)(sp - caps) : len;
        if (end - i == n && memcmp(caps + i, w, n) == 0)
            return true;
        i = end + 1;
    }
    return false;
}

/* The capability list of the first command. */
static void take_caps(struct http_rp *r, const char *caps, size_t len)
{
    r->report_status =
        has_cap(caps, len, "report-status") || has_cap(caps, len, "report-status-v2");
    r->side_band_64k = has_cap(caps, len, "side-band-64k");
    r->side_band = r->side_band_64k || has_cap(caps, len, "side-band");
}

/* The payload line of one pkt (r->line[0..len), LF stripped) as a
 * command into *cmd; HTTP_RP_COMMAND or BAD. */
static enum http_rp_result command(struct http_rp *r, size_t len, struct http_rp_command *cmd)
{
    char *line = r->line;
    const char *nul = memchr(line, '\0', len);
    size_t end = nul != NULL ? (size_t)(nul - line) : len;

    if (r->commands == 0 && nul == NULL)
        return bad(r, "the first command carries no capability list");
    if (r->commands > 0 && nul != NULL)
        return bad(r, "a capability list after the first command");
    if (r->commands == HTTP_RP_COMMANDS_MAX)
        return bad(r, "more commands than egressd reads in one push");
    const char *sp1 = memchr(line, ' ', end);
    const char *sp2 = sp1 != NULL ? memchr(sp1 + 1, ' ', end - (size_t)(sp1 + 1 - line)) : NULL;
    if (sp2 == NULL)
        return bad(r, "a command is not OLD NEW REF");
    size_t ol = (size_t)(sp1 - line), nl = (size_t)(sp2 - sp1 - 1);
    const char *ref = sp2 + 1;
    size_t rl = end - (size_t)(ref - line);
    if (!oid_ok(r, line, ol) || !oid_ok(r, sp1 + 1, nl))
        return bad(r, "a command's object id is not 40 or 64 lower-case hex digits");
    if (!http_rp_ref_ok(ref, rl))
        return bad(r, "a command's ref name is not a full, well-formed ref (refs/...)");
    bool create = all_zero(line, ol), del = all_zero(sp1 + 1, nl);
    if (create && del)
        return bad(r, "a command with two zero ids");
    if (r->commands == 0)
        take_caps(r, nul + 1, len - end - 1);
    memcpy(cmd->old_oid, line, ol);
    cmd->old_oid[ol] = '\0';
    memcpy(cmd->new_oid, sp1 + 1, nl);
    cmd->new_oid[nl] = '\0';
    memcpy(cmd->ref, ref, rl);
    cmd->ref[rl] = '\0';
    cmd->ref_len = rl;
    cmd->create = create;
    cmd->delete = del;
    r->commands++;
    return HTTP_RP_COMMAND;
}

/* A whole pkt's payload is in r->line[0..r->pkt_len). */
static enum http_rp_result line_done(struct http_rp *r, struct http_rp_command *cmd)
{
    size_t len = r->pkt_len;

    r->state = RP_LEN;
    if (len > 0 && r->line[len - 1] == '\n')
        len--;
    if (r->commands == 0 && len >= 8 && memcmp(r->line, "shallow ", 8) == 0) {
        if (!oid_ok(r, r->line + 8, len - 8))
            return bad(r, "a shallow line's object id is not 40 or 64 lower-case hex digits");
        return HTTP_RP_MORE;
    }
    if (r->commands == 0 && len >= 9 && memcmp(r->line, "push-cert", 9) == 0)
        return bad(r, "a signed push (push-cert): egressd does not read its commands");
    return command(r, len, cmd);
}

/* The four length digits are in r->len: the next state. */
static enum http_rp_result length_done(struct http_rp *r)
{
    unsigned v = 0;

    for (int i = 0; i < PKT_HEAD; i++) {
        int d = hex_digit(r->len[i]);
        if (d < 0)
            return bad(r, "a pkt-line length that is not four lower-case hex digits");
        v = v * 16 + (unsigned)d;
    }
    r->len_have = 0;
    if (v == PKT_FLUSH) {
        r->state = RP_END;
        return HTTP_RP_END;
    }
    if (v <= PKT_HEAD)
        return bad(r, "a delim, response-end or empty packet in a command list");
    if (v > PKT_MAX)
        return bad(r, "a pkt-line longer than 65520 bytes");
    if (v - PKT_HEAD > HTTP_RP_LINE_MAX)
        return bad(r, "a command line longer than egressd reads");
    r->pkt_len = (uint16_t)(v - PKT_HEAD);
    r->have = 0;
    r->state = RP_PAYLOAD;
    return HTTP_RP_MORE;
}

enum http_rp_result http_rp_feed(struct http_rp *r, const uint8_t *p, size_t n, size_t *used,
                                 struct http_rp_command *cmd)
{
    size_t i = 0;
    enum http_rp_result res = HTTP_RP_MORE;

    while (i < n && res == HTTP_RP_MORE && r->state != RP_END && r->state != RP_BAD) {
        if (r->state == RP_LEN) {
            r->len[r->len_have++] = (char)p[i++];
            if (r->len_have == PKT_HEAD)
                res = length_done(r);
            continue;
        }
        size_t take = r->pkt_len - r->have;
        if (take > n - i)
            take = n - i;
        memcpy(r->line + r->have, p + i, take);
        r->have = (uint16_t)(r->have + take);
        i += take;
        if (r->have == r->pkt_len)
            res = line_done(r, cmd);
    }
    *used = i;
    r->consumed += i;
    if (r->state == RP_BAD)
        return HTTP_RP_BAD;
    if (res == HTTP_RP_MORE && r->state == RP_END)
        return HTTP_RP_END; /* (fed again after the end: nothing more is read) */
    return res;
}

/* One pkt-line of payload s[0..n) at out[*o..cap); false when it does
 * not fit. */
static bool put_pkt(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    if (*o + PKT_HEAD + n > cap)
        return false;
    snprintf(out + *o, PKT_HEAD + 1, "%04zx", n + PKT_HEAD);
    memcpy(out + *o + PKT_HEAD, s, n);
    *o += PKT_HEAD + n;
    return true;
}

/* reason, printable ASCII only (anything else a '?'), at most 200 bytes. */
static size_t clean_reason(const char *reason, char *buf)
{
    size_t n = 0;
    for (; reason[n] != '\0' && n < 200; n++)
        buf[n] = (reason[n] >= 0x20 && reason[n] < 0x7f) ? reason[n] : '?';
    return n;
}

/* The report itself (report-status): "unpack ok", "ng REF REASON" per
 * command, a flush; into out[0..cap), its length or 0. */
static size_t report_lines(const struct http_rp_command *cmds, const char *const *reasons, size_t n,
                           char *out, size_t cap)
{
    char line[HTTP_RP_REF_MAX + 256], why[200];
    size_t o = 0;

    if (!put_pkt(out, cap, &o, "unpack ok\n", 10))
        return 0;
    for (size_t i = 0; i < n; i++) {
        size_t w = clean_reason(reasons[i], why);
        int k = snprintf(line, sizeof(line), "ng %s %.*s\n", cmds[i].ref, (int)w, why);
        if (k < 0 || (size_t)k >= sizeof(line) || !put_pkt(out, cap, &o, line, (size_t)k))
            return 0;
    }
    if (o + PKT_HEAD > cap)
        return 0;
    memcpy(out + o, "0000", PKT_HEAD);
    return o + PKT_HEAD;
}

size_t http_rp_report(const struct http_rp *r, const struct http_rp_command *cmds,
                      const char *const *reasons, size_t n, char *out, size_t cap)
{
    size_t len = report_lines(cmds, reasons, n, out, cap), o, max;

    if (len == 0 || !r->side_band)
        return len;
    /* Side-band: the report is band 1's data, in packets of at most max
     * bytes, then a flush.  Built from the end so it can stay in out. */
    max = r->side_band_64k ? BAND_MAX_64K : BAND_MAX_SMALL;
    size_t packets = (len + max - 1) / max, total = len + packets * (PKT_HEAD + 1) + PKT_HEAD;
    if (total > cap)
        return 0;
    memmove(out + total - PKT_HEAD - len, out, len);
    const char *src = out + total - PKT_HEAD - len;
    o = 0;
    for (size_t done = 0; done < len;) {
        size_t k = len - done < max ? len - done : max;
        char head[PKT_HEAD + 2];
        snprintf(head, sizeof(head), "%04zx", k + PKT_HEAD + 1);
        memcpy(out + o, head, PKT_HEAD);
        out[o + PKT_HEAD] = BAND_DATA;
        memmove(out + o + PKT_HEAD + 1, src + done, k);
        o += PKT_HEAD + 1 + k;
        done += k;
    }
    memcpy(out + o, "0000", PKT_HEAD);
    return o + PKT_HEAD;
}
