/*
 * test_receivepack.c - a git push's command list (http/receivepack.c): the
 * bodies real git 2.39.5 sent (tests/data/git-push/, GIT_PUSH_DIR) read
 * whole and a byte at a time, with the flush as the exact end; shallow
 * lines, LF or none, SHA-256 ids; every BAD the reader has and that BAD
 * stays BAD; the ref names it takes; and the report that refuses a push,
 * byte for byte, in side-band or not.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "tap.h"
#include "testdata.h"

/* A byte string literal that may hold NUL: its bytes and its length. */
#define S(lit) lit, sizeof(lit) - 1

/* The object ids of the captures. */
#define Z40 "0000000000000000000000000000000000000000"
#define A40 "626660ccaf27ecf916e88ad429dc38ddce72e455"
#define B40 "6a2af1ded7d486886ec994be2dfc5c1f05133988"
#define Z64 Z40 "000000000000000000000000"
#define A64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define B64 "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
/* git 2.39.5's capability list, as in the captures. */
#define CAPS " report-status-v2 side-band-64k quiet object-format=sha1 agent=git/2.39.5"

#define KEEP 8 /* commands a run keeps (it counts them all) */

/* What feeding a body gave: the commands, the last result, bytes read. */
struct run {
    struct http_rp r;
    enum http_rp_result res;
    struct http_rp_command cmds[KEEP];
    size_t n;    /* commands seen */
    size_t used; /* bytes read, all feeds */
};

/* The bytes of file name in GIT_PUSH_DIR (heap), or NULL. */
static uint8_t *load(const char *name, size_t *n)
{
    return td_load("GIT_PUSH_DIR", name, 65536, n);
}

/* Feed body[0..n) in pieces of step bytes (0: whole), each piece a heap
 * copy of its own, until END or BAD; every command is counted. */
static void feed(const uint8_t *body, size_t n, size_t step, struct run *o)
{
    struct http_rp_command cmd;
    size_t off = 0;

    http_rp_init(&o->r);
    o->res = HTTP_RP_MORE;
    o->n = 0;
    while (off < n) {
        size_t k = step != 0 && n - off > step ? step : n - off, at = 0, used;
        uint8_t *piece = td_copy(body + off, k);
        for (;;) {
            o->res = http_rp_feed(&o->r, piece + at, k - at, &used, &cmd);
            at += used;
            if (o->res != HTTP_RP_COMMAND)
                break;
            if (o->n < KEEP)
                o->cmds[o->n] = cmd;
            o->n++;
        }
        free(piece);
        off += at;
        if (o->res != HTTP_RP_MORE)
            break;
    }
    o->used = off;
}

/* Whether two runs gave the same events and results. */
static bool same_run(const struct run *a, const struct run *b)
{
    if (a->res != b->res || a->n != b->n || a->used != b->used || a->r.consumed != b->r.consumed ||
        a->r.side_band != b->r.side_band || a->r.side_band_64k != b->r.side_band_64k ||
        a->r.report_status != b->r.report_status)
        return false;
    for (size_t i = 0; i < a->n && i < KEEP; i++) {
        const struct http_rp_command *x = &a->cmds[i], *y = &b->cmds[i];
        if (strcmp(x->old_oid, y->old_oid) != 0 || strcmp(x->new_oid, y->new_oid) != 0 ||
            strcmp(x->ref, y->ref) != 0 || x->ref_len != y->ref_len || x->create != y->create ||
            x->delete != y->delete)
            return false;
    }
    return true;
}

/* Whether c is OLD NEW REF with these create / delete flags. */
static bool cmd_is(const struct http_rp_command *c, const char *old, const char *new,
                   const char *ref, bool create, bool del)
{
    return strcmp(c->old_oid, old) == 0 && strcmp(c->new_oid, new) == 0 &&
           strcmp(c->ref, ref) == 0 && c->ref_len == strlen(ref) && c->create == create &&
           c->delete == del;
}

/* Append p[0..n) as one pkt-line to b at *len. */
static void pkt(uint8_t *b, size_t *len, const char *p, size_t n)
{
    char head[5];
    snprintf(head, sizeof(head), "%04zx", n + 4);
    memcpy(b + *len, head, 4);
    memcpy(b + *len + 4, p, n);
    *len += 4 + n;
}

/* Append the command "OLD NEW REF" as a pkt-line: NUL and caps after it
 * when caps is not NULL, then an LF when lf. */
static void command(uint8_t *b, size_t *len, const char *old, const char *new, const char *ref,
                    const char *caps, bool lf)
{
    char line[8192];
    int k = snprintf(line, sizeof(line), "%s %s %s", old, new, ref);
    if (caps != NULL) {
        line[k++] = '\0';
        k += snprintf(line + k, sizeof(line) - (size_t)k, "%s", caps);
    }
    if (lf)
        line[k++] = '\n';
    pkt(b, len, line, (size_t)k);
}

/* Append raw bytes to b at *len. */
static void raw(uint8_t *b, size_t *len, const char *s, size_t n)
{
    memcpy(b + *len, s, n);
    *len += n;
}

/* ---- the captures ---- */

struct capture {
    const char *file;
    size_t end; /* the offset just after the flush */
    size_t n;
    struct {
        const char *old, *new, *ref;
        bool create, del;
    } cmds[3];
};

static const struct capture captures[] = {
    {"create-main.bin", 179, 1, {{Z40, A40, "refs/heads/main", true, false}}},
    {"update-three.bin",
     381,
     3,
     {{A40, B40, "refs/heads/main", false, false},
      {Z40, B40, "refs/heads/agent/x", true, false},
      {Z40, B40, "refs/tags/v1", true, false}}},
    {"delete.bin", 182, 1, {{B40, Z40, "refs/heads/agent/x", false, true}}},
    {"force.bin", 179, 1, {{B40, A40, "refs/heads/main", false, false}}},
};

static void test_captures(void)
{
    static struct run whole, bytes;

    for (size_t i = 0; i < sizeof(captures) / sizeof(captures[0]); i++) {
        const struct capture *c = &captures[i];
        size_t n, used;
        uint8_t *body = load(c->file, &n);
        if (body == NULL) {
            ok(0, "%s is in GIT_PUSH_DIR", c->file);
            continue;
        }
        feed(body, n, 0, &whole);
        for (size_t j = 0; j < c->n; j++)
            ok(whole.n == c->n && cmd_is(&whole.cmds[j], c->cmds[j].old, c->cmds[j].new,
                                         c->cmds[j].ref, c->cmds[j].create, c->cmds[j].del),
               "%s: command %zu is %.7s %.7s %s", c->file, j + 1, c->cmds[j].old, c->cmds[j].new,
               c->cmds[j].ref);
        /* fed again after the end: nothing more is read */
        enum http_rp_result again =
            http_rp_feed(&whole.r, body + whole.used, n - whole.used, &used, &whole.cmds[0]);
        ok(whole.res == HTTP_RP_END && whole.used == c->end && whole.r.consumed == c->end &&
               again == HTTP_RP_END && used == 0,
           "%s: END at the flush, %zu of %zu bytes read, none after", c->file, c->end, n);
        ok(whole.r.side_band_64k && whole.r.side_band && whole.r.report_status,
           "%s: side-band-64k and report-status(-v2) taken from the caps", c->file);
        feed(body, n, 1, &bytes);
        ok(same_run(&whole, &bytes), "%s: a byte at a time gives the same", c->file);
        free(body);
    }
}

/* ---- hand-written lists ---- */

static void test_lists(void)
{
    static uint8_t b[16384];
    static struct run w, one;
    size_t n = 0;

    raw(b, &n, S("0000PACK"));
    feed(b, n, 0, &w);
    ok(w.res == HTTP_RP_END && w.n == 0 && w.used == 4, "an empty push \"0000\": END, 0 commands");

    n = 0;
    pkt(b, &n, S("shallow " A40 "\n"));
    pkt(b, &n, S("shallow " B40));
    command(b, &n, A40, B40, "refs/heads/main", "report-status", true);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    feed(b, n, 1, &one);
    ok(w.res == HTTP_RP_END && w.n == 1 && cmd_is(&w.cmds[0], A40, B40, "refs/heads/main", 0, 0) &&
           w.used == n && same_run(&w, &one),
       "two shallow lines (LF, none) before the commands are skipped");

    n = 0;
    command(b, &n, A40, B40, "refs/heads/main", "report-status\n", false);
    command(b, &n, Z40, B40, "refs/heads/x", NULL, true);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    ok(w.res == HTTP_RP_END && w.n == 2 && w.r.report_status && !w.r.side_band &&
           cmd_is(&w.cmds[1], Z40, B40, "refs/heads/x", true, false),
       "a trailing LF after the caps and after a ref is not part of them");

    n = 0;
    command(b, &n, A40, B40, "refs/heads/main", "side-band", false);
    command(b, &n, B40, Z40, "refs/heads/x", NULL, false);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    ok(w.res == HTTP_RP_END && w.n == 2 && w.r.side_band && !w.r.side_band_64k &&
           !w.r.report_status && cmd_is(&w.cmds[1], B40, Z40, "refs/heads/x", false, true),
       "no trailing LF: the ref ends at the pkt's end; plain side-band");

    n = 0;
    pkt(b, &n, S("shallow " B64));
    command(b, &n, Z64, A64, "refs/heads/main", "object-format=sha256", false);
    command(b, &n, A64, Z64, "refs/heads/old", NULL, true);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    ok(w.res == HTTP_RP_END && w.n == 2 && w.r.oid_len == 64 &&
           cmd_is(&w.cmds[0], Z64, A64, "refs/heads/main", true, false) &&
           cmd_is(&w.cmds[1], A64, Z64, "refs/heads/old", false, true),
       "SHA-256 ids (64 digits): create and delete");

    /* a line of exactly HTTP_RP_LINE_MAX bytes is read */
    char caps[HTTP_RP_LINE_MAX];
    size_t k = HTTP_RP_LINE_MAX - strlen(A40 " " B40 " refs/heads/main") - 1;
    memset(caps, 'c', k);
    caps[k] = '\0';
    n = 0;
    command(b, &n, A40, B40, "refs/heads/main", caps, false);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    ok(w.res == HTTP_RP_END && w.n == 1 && memcmp(b, "1004", 4) == 0,
       "a command line of exactly %d bytes is read", HTTP_RP_LINE_MAX);
}

/* ---- BAD ---- */

struct bad_case {
    const char *what;
    const char *first, *second; /* payloads of pkt-lines ('|' for NUL), or NULL */
    const char *then;           /* raw bytes after them */
    size_t cmds;                /* commands read before BAD */
    const char *error;
};

#define GOOD    A40 " " B40 " refs/heads/main|report-status"
#define BAD_LEN "a pkt-line length that is not four lower-case hex digits"
#define BAD_PKT "a delim, response-end or empty packet in a command list"
#define BAD_OID "a command's object id is not 40 or 64 lower-case hex digits"
#define BAD_CMD "a command is not OLD NEW REF"

static const struct bad_case bad_cases[] = {
    {"no caps on the first command", A40 " " B40 " refs/heads/main", NULL, "0000", 0,
     "the first command carries no capability list"},
    {"caps on the second command", GOOD, Z40 " " B40 " refs/heads/x|report-status", "0000", 1,
     "a capability list after the first command"},
    {"a signed push (push-cert)", "push-cert|report-status", NULL, "0000", 0,
     "a signed push (push-cert): egressd does not read its commands"},
    {"delim 0001", GOOD, NULL, "0001", 1, BAD_PKT},
    {"response-end 0002", GOOD, NULL, "0002", 1, BAD_PKT},
    {"0003", GOOD, NULL, "0003", 1, BAD_PKT},
    {"an empty pkt 0004", NULL, NULL, "0004", 0, BAD_PKT},
    {"an upper-case hex length", NULL, NULL, "00A0", 0, BAD_LEN},
    {"a length that is not hex", NULL, NULL, "00g0", 0, BAD_LEN},
    {"a line one byte over HTTP_RP_LINE_MAX", NULL, NULL, "1005", 0,
     "a command line longer than egressd reads"},
    {"a pkt-line over 65520 bytes", NULL, NULL, "fff1", 0, "a pkt-line longer than 65520 bytes"},
    {"a 39-digit id", "000000000000000000000000000000000000000 " B40 " refs/heads/a|x", NULL,
     "0000", 0, BAD_OID},
    {"an upper-case id", Z40 " 626660CCAF27ECF916E88AD429DC38DDCE72E455 refs/heads/a|x", NULL,
     "0000", 0, BAD_OID},
    {"a non-hex id", Z40 " 626660ccaf27ecf916e88ad429dc38ddce72e45g refs/heads/a|x", NULL, "0000",
     0, BAD_OID},
    {"a 40-digit id then a 64-digit one", A40 " " A64 " refs/heads/a|x", NULL, "0000", 0, BAD_OID},
    {"a SHA-1 shallow line then SHA-256 ids", "shallow " A40, A64 " " B64 " refs/heads/a|x", "0000",
     0, BAD_OID},
    {"a shallow line with a bad id", "shallow 123", NULL, "0000", 0,
     "a shallow line's object id is not 40 or 64 lower-case hex digits"},
    {"a shallow line after a command", GOOD, "shallow " A40, "0000", 1, BAD_CMD},
    {"two zero ids", Z40 " " Z40 " refs/heads/a|x", NULL, "0000", 0, "a command with two zero ids"},
    {"two fields only", A40 " " B40 "|x", NULL, "0000", 0, BAD_CMD},
    {"an empty old id (a line starting with SP)", " " B40 " refs/heads/a|x", NULL, "0000", 0,
     BAD_OID},
};

/* Append payload s as a pkt-line to b, '|' written as NUL. */
static void pkt_bars(uint8_t *b, size_t *n, const char *s)
{
    char line[512];
    size_t k = 0;

    for (; s[k] != '\0'; k++)
        line[k] = s[k] == '|' ? '\0' : s[k];
    pkt(b, n, line, k);
}

/* Feed case c; the run in *w. */
static void feed_case(const struct bad_case *c, struct run *w)
{
    static uint8_t b[1024];
    size_t n = 0;

    if (c->first != NULL)
        pkt_bars(b, &n, c->first);
    if (c->second != NULL)
        pkt_bars(b, &n, c->second);
    raw(b, &n, c->then, strlen(c->then));
    feed(b, n, 0, w);
}

/* A command with ref name ref (as caps-carrying first line): its run. */
static void feed_ref(const char *ref, size_t len, struct run *w)
{
    static uint8_t b[4096];
    char line[2048];
    size_t n = 0;
    int k = snprintf(line, sizeof(line), A40 " " B40 " %.*s", (int)len, ref);
    memcpy(line + k, "\0report-status", 14);
    pkt(b, &n, line, (size_t)k + 14);
    raw(b, &n, S("0000"));
    feed(b, n, 0, w);
}

static const char *const bad_refs[] = {
    "HEAD",          "refs/",          "refs/heads/a..b", "refs/heads/a.lock",
    "refs/heads/.x", "refs/heads/a b", "refs/heads/a~1",  "refs/heads/a@{x",
    "refs/heads//x", "refs/heads/x/",  "refs/heads/x.",
};

static void test_bad(void)
{
    static struct run w;
    static uint8_t b[1200000];
    size_t n, used;

    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        feed_case(c, &w);
        ok(w.res == HTTP_RP_BAD && w.n == c->cmds && w.r.error != NULL &&
               strcmp(w.r.error, c->error) == 0,
           "BAD: %s (%s)", c->what, w.r.error ? w.r.error : "no error");
    }

    for (size_t i = 0; i < sizeof(bad_refs) / sizeof(bad_refs[0]); i++) {
        feed_ref(bad_refs[i], strlen(bad_refs[i]), &w);
        ok(w.res == HTTP_RP_BAD && !http_rp_ref_ok(bad_refs[i], strlen(bad_refs[i])) &&
               strcmp(w.r.error,
                      "a command's ref name is not a full, well-formed ref (refs/...)") == 0,
           "BAD ref name \"%s\"", bad_refs[i]);
    }
    char longref[HTTP_RP_REF_MAX + 2];
    memcpy(longref, "refs/heads/", 11);
    memset(longref + 11, 'a', sizeof(longref) - 11);
    feed_ref(longref, HTTP_RP_REF_MAX, &w);
    bool max_ok = w.res == HTTP_RP_END && w.n == 1 && w.cmds[0].ref_len == HTTP_RP_REF_MAX;
    feed_ref(longref, HTTP_RP_REF_MAX + 1, &w);
    ok(max_ok && w.res == HTTP_RP_BAD, "a ref of %d bytes is read, one of %d is BAD",
       HTTP_RP_REF_MAX, HTTP_RP_REF_MAX + 1);

    /* HTTP_RP_COMMANDS_MAX commands are read, one more is BAD */
    n = 0;
    command(b, &n, A40, B40, "refs/heads/a", "report-status", false);
    for (int i = 1; i < HTTP_RP_COMMANDS_MAX; i++)
        command(b, &n, Z40, B40, "refs/heads/b", NULL, false);
    size_t at_max = n;
    command(b, &n, Z40, B40, "refs/heads/b", NULL, false);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &w);
    bool bad_over = w.res == HTTP_RP_BAD && w.n == HTTP_RP_COMMANDS_MAX;
    memcpy(b + at_max, "0000", 4);
    feed(b, at_max + 4, 0, &w);
    ok(bad_over && w.res == HTTP_RP_END && w.n == HTTP_RP_COMMANDS_MAX,
       "%d commands are read, one more is BAD", HTTP_RP_COMMANDS_MAX);

    /* BAD stays BAD: a good list fed after it reads nothing */
    n = 0;
    raw(b, &n, S("0003"));
    feed(b, n, 0, &w);
    n = 0;
    command(b, &n, A40, B40, "refs/heads/main", "report-status", false);
    raw(b, &n, S("0000"));
    struct http_rp_command cmd;
    enum http_rp_result again = http_rp_feed(&w.r, b, n, &used, &cmd);
    ok(w.res == HTTP_RP_BAD && again == HTTP_RP_BAD && used == 0 && w.r.consumed == 4,
       "BAD stays BAD: more bytes are not read");
}

/* ---- ref names ---- */

static void test_refs(void)
{
    static const char *const good[] = {"refs/heads/main", "refs/heads/agent/x-1", "refs/tags/v1.0",
                                       "refs/heads/a.b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        ok(http_rp_ref_ok(good[i], strlen(good[i])), "ref name \"%s\" is taken", good[i]);
}

/* ---- the report ---- */

/* Undo side-band: out[0..n) as band-1 packets of at most max bytes of
 * data each, then a flush and nothing after; the data into d, the number
 * of packets in *packets.  False when it is not that. */
static bool unband(const char *out, size_t n, size_t max, char *d, size_t *dn, size_t *packets)
{
    size_t o = 0;

    *dn = 0;
    *packets = 0;
    for (;;) {
        unsigned v;
        char head[5] = {0};
        if (n - o < 4)
            return false;
        memcpy(head, out + o, 4);
        if (sscanf(head, "%4x", &v) != 1)
            return false;
        if (v == 0)
            return o + 4 == n;
        if (v < 6 || v - 5 > max || n - o < v || out[o + 4] != 1)
            return false;
        memcpy(d + *dn, out + o + 5, v - 5);
        *dn += v - 5;
        o += v;
        (*packets)++;
    }
}

/* http_rp_report into a heap buffer of exactly cap bytes (ASan sees a
 * write past it); its result, the bytes copied to out. */
static size_t report(const struct http_rp *r, const struct http_rp_command *cmds,
                     const char *const *reasons, size_t n, char *out, size_t cap)
{
    char *buf = malloc(cap ? cap : 1);
    size_t len = http_rp_report(r, cmds, reasons, n, buf, cap);
    memcpy(out, buf, len);
    free(buf);
    return len;
}

static void test_report(void)
{
    static struct run plain, sb64, sb;
    static uint8_t b[4096];
    static char out[65536], d[65536], want[65536];
    size_t n = 0, len, dn, packets;
    const char *why[8] = {"policy: no"};

    command(b, &n, A40, B40, "refs/heads/main", "report-status", false);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &plain);
    const char one[] = "000eunpack ok\n"
                       "0022ng refs/heads/main policy: no\n"
                       "0000";
    len = report(&plain.r, plain.cmds, why, 1, out, sizeof(out));
    ok(len == sizeof(one) - 1 && memcmp(out, one, len) == 0,
       "report, no side-band: unpack ok, one ng, flush (exact bytes)");
    ok(report(&plain.r, plain.cmds, why, 1, out, sizeof(one) - 2) == 0 &&
           report(&plain.r, plain.cmds, why, 1, out, sizeof(one) - 1) == sizeof(one) - 1,
       "report, no side-band: 0 with a cap one byte short, all of it with the exact cap");

    size_t cn;
    uint8_t *cap_body = load("force.bin", &cn);
    if (cap_body != NULL) {
        feed(cap_body, cn, 0, &sb64);
        free(cap_body);
    }
    len = report(&sb64.r, sb64.cmds, why, 1, out, sizeof(out));
    ok(unband(out, len, 65515, d, &dn, &packets) && packets == 1 && dn == sizeof(one) - 1 &&
           memcmp(d, one, dn) == 0 && len == sizeof(one) - 1 + 5 + 4 &&
           memcmp(out, "0039\001", 5) == 0,
       "report, side-band-64k: one band-1 packet \"0039\\1\" holding it, then a flush");
    ok(report(&sb64.r, sb64.cmds, why, 1, out, len - 1) == 0 &&
           report(&sb64.r, sb64.cmds, why, 1, out, len) == len,
       "report, side-band-64k: 0 with a cap one byte short, all of it with the exact cap");

    why[0] = "a\tb\001c\177d\xc3\xa9";
    len = report(&plain.r, plain.cmds, why, 1, out, sizeof(out));
    ok(len > 18 && memcmp(out + 14, "0021ng refs/heads/main a?b?c?d??\n0000", 37) == 0 &&
           len == 14 + 33 + 4,
       "report: control and non-ASCII bytes of a reason become '?'");

    char longwhy[251];
    memset(longwhy, 'r', 250);
    longwhy[250] = '\0';
    why[0] = longwhy;
    len = report(&plain.r, plain.cmds, why, 1, out, sizeof(out));
    ok(len == 14 + 4 + 3 + 15 + 1 + 200 + 1 + 4 && memcmp(out + 14, "00e0", 4) == 0 &&
           out[14 + 4 + 19 + 200] == '\n',
       "report: a reason of 250 bytes is cut to 200");

    /* plain side-band: more than 995 bytes of report in several packets */
    n = 0;
    command(b, &n, A40, B40, "refs/heads/main", "report-status side-band", false);
    for (int i = 1; i < 8; i++)
        command(b, &n, Z40, B40, "refs/heads/main", NULL, false);
    raw(b, &n, S("0000"));
    feed(b, n, 0, &sb);
    for (int i = 0; i < 8; i++)
        why[i] = longwhy;
    size_t wl = report(&plain.r, sb.cmds, why, 8, want, sizeof(want));
    len = report(&sb.r, sb.cmds, why, 8, out, sizeof(out));
    ok(sb.n == 8 && wl > 995 && unband(out, len, 995, d, &dn, &packets) && packets == 2 &&
           dn == wl && memcmp(d, want, wl) == 0,
       "report, side-band: a report over 995 bytes in 2 band packets of at most 995");
    ok(report(&sb.r, sb.cmds, why, 8, out, len - 1) == 0 &&
           report(&sb.r, sb.cmds, why, 0, out, sizeof(out)) == 9 + 14 + 4 &&
           memcmp(out, "0017\001000eunpack ok\n00000000", 27) == 0,
       "report, side-band: 0 one byte short; no commands: unpack ok and the flush alone");
}

int main(void)
{
    test_captures();
    test_lists();
    test_bad();
    test_refs();
    test_report();
    return tap_done();
}
