/*
 * fuzz_receivepack.c - a git push's command list (http/receivepack.c),
 * against lists this file writes itself and a reference reader of its own
 * (a whole-buffer parser written from gitprotocol-pack(5) and http.h), fed
 * whole, in pieces and a byte at a time; and the report that refuses each
 * list it reads, read back by a report reader of this file's own.
 *
 * An input whose first byte is a lower-case hex digit is raw: it is the
 * body itself (so a capture of tests/data/git-push/ is a seed as it is);
 * the cut points and the reasons of the report are then read from its
 * bytes backwards.  Any other input is built: the rest describes a list
 * (shallow lines; commands with 40- or 64-digit ids, zero or not, now and
 * then one flawed; ref names from a small alphabet, valid or not, some
 * near HTTP_RP_REF_MAX; capability words, some near misses, and a filler
 * that may pass HTTP_RP_LINE_MAX; an LF or none; no caps on the first
 * line or caps on a later one; a stray delim, response-end, "0003",
 * "0004", push-cert, shallow or junk line; an upper-case length), which
 * an encoder of this file's own writes as pkt-lines, a flush and some
 * bytes of "pack"; then the cut points and the reasons.
 *
 * Properties:
 *   1. the reader and the reference agree on BAD, END or MORE, on every
 *      command (ids, ref, create / delete), where each command's pkt-line
 *      ends, and on the capabilities taken; a built list never leaves the
 *      reference wanting more, its END is at the flush written, and one
 *      built without a flaw is read back exactly as built, capabilities
 *      included;
 *   2. END comes exactly at the flush: the bytes read (and r.consumed)
 *      are the offset after "0000", and nothing past it is ever read (it is
 *      poisoned for ASan while the reader runs), not even when fed again;
 *      MORE reads every byte;
 *   3. fed whole, in the input's pieces and a byte at a time, the reader
 *      gives the same events at the same offsets and the same results;
 *   4. BAD stays BAD: fed again, nothing is read;
 *   5. for every list read to END, http_rp_report's answer, undone from
 *      side-band when the caps asked for it (band 1, at most 65515 or 995
 *      bytes a packet, then a flush), read as pkt-lines, is "unpack ok",
 *      one "ng REF REASON" per command in order (REASON printable, '?'
 *      for any other byte, at most 200 bytes), a flush and nothing after;
 *      it fits a buffer of its exact length and not one byte shorter
 *      (heap buffers of exactly that size, so ASan sees a write past).
 */
#include <sanitizer/asan_interface.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "http.h"

#define BODY_MAX   20480 /* bytes of a body */
#define CMDS_MAX   256   /* commands of a body (one takes 92 bytes at least) */
#define BUILT_MAX  16    /* commands the encoder writes */
#define PIECES_MAX 32
#define LINE_BUF   8192
#define REASON_MAX 255
#define REPORT_MAX (64 + CMDS_MAX * (8 + HTTP_RP_REF_MAX + 200))
#define OUT_MAX    (2 * REPORT_MAX)

/* ------------------------------------------------------------ the reference */

struct ref_out {
    enum http_rp_result res;
    size_t end;          /* END: the offset just after the flush */
    size_t n;            /* commands read (before BAD, too) */
    size_t at[CMDS_MAX]; /* where each command's pkt-line ends */
    struct http_rp_command cmds[CMDS_MAX];
    bool rs, sb, sb64; /* from the first command's caps */
};

/* The value of lower-case hex digit c, or -1. */
static int ref_hex(uint8_t c)
{
    static const char digits[] = "0123456789abcdef";
    const char *d = c != 0 ? memchr(digits, c, 16) : NULL;
    return d != NULL ? (int)(d - digits) : -1;
}

/* Whether s[0..n) is an object id of the push's hash: *len digits once
 * known (the first id tells: 40 for SHA-1, 64 for SHA-256), all of them
 * lower-case hex. */
static bool ref_oid(const uint8_t *s, size_t n, size_t *len)
{
    size_t want = *len != 0 ? *len : n == 64 ? 64 : 40;

    if (n != want)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ref_hex(s[i]) < 0)
            return false;
    *len = want;
    return true;
}

/* Whether s[0..n) is all '0'. */
static bool ref_zero(const uint8_t *s, size_t n)
{
    return n > 0 && s[0] == '0' && (n == 1 || memcmp(s, s + 1, n - 1) == 0);
}

/* Whether s[0..n) is a ref name a push may update, by http.h and
 * receivepack.c's rules, taken component by component: "refs" and at
 * least one more, none empty, none starting with '.' or ending in ".lock";
 * the name printable ASCII without SP ~ ^ : ? * [ \, without ".." or "@{",
 * not ending in '.', at most HTTP_RP_REF_MAX bytes. */
static bool ref_name(const uint8_t *s, size_t n)
{
    size_t start = 0, parts = 0;

    if (n > HTTP_RP_REF_MAX || n < 5 || memcmp(s, "refs/", 5) != 0 || s[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '!' || s[i] > '~' || memchr("~^:?*[\\", s[i], 7) != NULL)
            return false;
        if (i > 0 && ((s[i - 1] == '.' && s[i] == '.') || (s[i - 1] == '@' && s[i] == '{')))
            return false;
    }
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/')
            continue;
        size_t len = i - start;
        if (len == 0 || s[start] == '.' || (len >= 5 && memcmp(s + i - 5, ".lock", 5) == 0))
            return false;
        parts++;
        start = i + 1;
    }
    return parts >= 2;
}

/* Whether the word w is among the space-separated words of s[0..n). */
static bool ref_word(const uint8_t *s, size_t n, const char *w)
{
    size_t wl = strlen(w), i = 0;

    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != ' ')
            j++;
        if (j - i == wl && memcmp(s + i, w, wl) == 0)
            return true;
        i = j + 1;
    }
    return false;
}

/* One pkt-line's payload l[0..len) (its LF off), as a shallow line or a
 * command; false when it is neither. */
static bool ref_line(const uint8_t *l, size_t len, size_t *idlen, struct ref_out *o)
{
    if (o->n == 0 && len >= 8 && memcmp(l, "shallow ", 8) == 0)
        return ref_oid(l + 8, len - 8, idlen);
    /* anything else must be a command: push-cert, junk, ... are not */
    const uint8_t *nul = memchr(l, '\0', len);
    size_t cl = nul != NULL ? (size_t)(nul - l) : len;
    if ((nul != NULL) != (o->n == 0) || o->n >= HTTP_RP_COMMANDS_MAX || o->n >= CMDS_MAX)
        return false;
    const uint8_t *f[3];
    size_t fl[3], k = 0, from = 0;
    for (size_t i = 0; i < cl && k < 2; i++)
        if (l[i] == ' ') {
            f[k] = l + from;
            fl[k++] = i - from;
            from = i + 1;
        }
    if (k < 2)
        return false;
    f[2] = l + from;
    fl[2] = cl - from;
    if (!ref_oid(f[0], fl[0], idlen) || !ref_oid(f[1], fl[1], idlen) || !ref_name(f[2], fl[2]))
        return false;
    struct http_rp_command *c = &o->cmds[o->n];
    c->create = ref_zero(f[0], fl[0]);
    c->delete = ref_zero(f[1], fl[1]);
    if (c->create && c->delete)
        return false;
    memcpy(c->old_oid, f[0], fl[0]);
    c->old_oid[fl[0]] = '\0';
    memcpy(c->new_oid, f[1], fl[1]);
    c->new_oid[fl[1]] = '\0';
    memcpy(c->ref, f[2], fl[2]);
    c->ref[fl[2]] = '\0';
    c->ref_len = fl[2];
    if (o->n == 0) {
        const uint8_t *caps = nul + 1;
        size_t capl = len - cl - 1;
        o->rs = ref_word(caps, capl, "report-status") || ref_word(caps, capl, "report-status-v2");
        o->sb64 = ref_word(caps, capl, "side-band-64k");
        o->sb = o->sb64 || ref_word(caps, capl, "side-band");
    }
    o->n++;
    return true;
}

/* The whole body s[0..n) read at once: the commands, then END at the
 * flush, BAD, or MORE when it ends first. */
static void reference(const uint8_t *s, size_t n, struct ref_out *o)
{
    size_t pos = 0, idlen = 0;

    o->n = o->end = 0;
    o->rs = o->sb = o->sb64 = false;
    for (;;) {
        unsigned v = 0;
        o->res = HTTP_RP_MORE;
        if (n - pos < 4)
            return;
        o->res = HTTP_RP_BAD;
        for (int i = 0; i < 4; i++) {
            int d = ref_hex(s[pos + i]);
            if (d < 0)
                return;
            v = v << 4 | (unsigned)d;
        }
        if (v == 0) {
            o->res = HTTP_RP_END;
            o->end = pos + 4;
            return;
        }
        /* 0001-0004: delim, response-end, and nothing a command list has */
        if (v < 5 || v > 65520 || v - 4 > HTTP_RP_LINE_MAX)
            return;
        o->res = HTTP_RP_MORE;
        if (n - pos < v)
            return;
        const uint8_t *l = s + pos + 4;
        size_t len = v - 4, had = o->n;
        pos += v;
        if (l[len - 1] == '\n')
            len--;
        o->res = HTTP_RP_BAD;
        if (!ref_line(l, len, &idlen, o))
            return;
        if (o->n > had)
            o->at[had] = pos;
    }
}

/* ------------------------------------------------------------ the encoder */

struct list {
    size_t n; /* commands written */
    struct http_rp_command cmds[BUILT_MAX];
    bool clean;        /* no flaw: read back as built, or the reader is wrong */
    size_t flush_at;   /* the offset just after the flush */
    bool rs, sb, sb64; /* what the caps written ask for */
};

static const char *const safe_parts[] = {"main", "a", "agent", "x-1", "v1.0", "b_2", "a.b", "@"};
static const char *const wild_parts[] = {
    "refs/", "heads/", "/",  ".", "..", "@{", "@",  ".lock", "lock", "~",      "^",
    ":",     "?",      "*",  "[", "\\", " ",  "\t", "\x7f",  "\x80", "a",      "//",
    "HEAD",  "\n",     "x.", "{", "-",  "\0", "b",  "}",     "/.",   "a.lock/"};
static const char *const cap_words[] = {
    "report-status", "report-status-v2", "side-band",    "side-band-64k",
    "quiet",         "atomic",           "ofs-delta",    "object-format=sha1",
    "push-options",  "side-band-64",     "report-statu", "agent=git/2.39.5"};

/* Append s (n bytes) to line at *k. */
static void put(char *line, size_t *k, const void *s, size_t n)
{
    if (*k + n <= LINE_BUF) {
        memcpy(line + *k, s, n);
        *k += n;
    }
}

/* An object id of len digits as the input says: zero, or some digits;
 * now and then a flaw (a digit more or less, the other hash's length, an
 * upper-case or non-hex digit).  Written at line[*k]. */
static void put_oid(struct input *in, char *line, size_t *k, size_t len, bool *clean)
{
    uint8_t c = take(in), seed = take(in);
    char id[80];
    size_t n = len;

    for (size_t i = 0; i < sizeof(id); i++)
        id[i] = (c & 7) < 3 ? '0' : "0123456789abcdef"[(seed + i * 7) % 16];
    if ((c & 7) == 6) {
        static const int delta[] = {-1, 1, 24, -24};
        n = len + (size_t)delta[(c >> 3) & 3];
        if (n > sizeof(id))
            n = len - 1;
        *clean = false;
    } else if ((c & 7) == 7) {
        id[seed % len] = "AFg -x\0\n"[(c >> 3) & 7];
        *clean = false;
    }
    put(line, k, id, n);
}

/* A ref name as the input says: mostly refs/heads/... or refs/tags/...
 * of safe parts; now and then any sequence of the wild parts, or a long
 * name near HTTP_RP_REF_MAX. */
static void put_ref(struct input *in, char *line, size_t *k, bool *clean)
{
    uint8_t mode = take(in);

    if ((mode & 7) == 0) {
        static const char *const starts[] = {"refs/", "refs/heads/", "", "HEAD"};
        size_t parts = take(in) % 6;
        const char *st = starts[mode >> 3 & 3];
        put(line, k, st, strlen(st));
        for (size_t i = 0; i < parts; i++) {
            uint8_t p = take(in) % (sizeof(wild_parts) / sizeof(wild_parts[0]));
            put(line, k, wild_parts[p], wild_parts[p][0] == '\0' ? 1 : strlen(wild_parts[p]));
        }
        *clean = false;
    } else if ((mode & 7) == 1) {
        size_t len = HTTP_RP_REF_MAX - 8 + take(in) % 16;
        char name[HTTP_RP_REF_MAX + 16];
        memcpy(name, "refs/heads/", 11);
        memset(name + 11, 'z', len - 11);
        put(line, k, name, len);
        if (len > HTTP_RP_REF_MAX)
            *clean = false;
    } else {
        static const char *const prefixes[] = {"refs/heads/", "refs/tags/", "refs/", "refs/x/"};
        const char *pre = prefixes[mode >> 3 & 3];
        size_t parts = 1 + (mode >> 5) % 3;
        put(line, k, pre, strlen(pre));
        for (size_t i = 0; i < parts; i++) {
            const char *p = safe_parts[take(in) % (sizeof(safe_parts) / sizeof(safe_parts[0]))];
            if (i > 0)
                put(line, k, "/", 1);
            put(line, k, p, strlen(p));
        }
    }
}

/* The capability list as the input says (the words a mask picks, maybe a
 * leading space as git writes it, maybe a long filler word), and what it
 * asks for into l.  Written at line[*k]. */
static void put_caps(struct input *in, char *line, size_t *k, struct list *l)
{
    unsigned mask = (unsigned)take(in) << 8 | take(in);
    uint8_t form = take(in);

    if (form & 1)
        put(line, k, " ", 1);
    for (size_t i = 0; i < sizeof(cap_words) / sizeof(cap_words[0]); i++)
        if (mask & 1u << i) {
            put(line, k, cap_words[i], strlen(cap_words[i]));
            put(line, k, " ", 1);
        }
    if ((form & 0x0e) == 0x0e) {
        size_t len = (size_t)take(in) * 20;
        for (size_t i = 0; i < len; i++)
            put(line, k, "f", 1);
    } else {
        put(line, k, "quiet", 5);
    }
    l->rs = (mask & 3) != 0;
    l->sb64 = (mask & 8) != 0;
    l->sb = (mask & 12) != 0;
}

/* Append payload p[0..n) as a pkt-line to s at *o, its length in
 * upper-case hex when upper; false when it does not fit. */
static bool put_pkt(uint8_t *s, size_t *o, const char *p, size_t n, bool upper)
{
    static const char lower[] = "0123456789abcdef", upper_d[] = "0123456789ABCDEF";
    const char *d = upper ? upper_d : lower;
    size_t v = n + 4;

    if (*o + v > BODY_MAX || v > 0xffff)
        return false;
    for (int i = 0; i < 4; i++)
        s[*o + (size_t)i] = (uint8_t)d[v >> (12 - 4 * i) & 0xf];
    memcpy(s + *o + 4, p, n);
    *o += v;
    return true;
}

/* Whether a pkt-line of payload n has a letter in its length (so that
 * writing it in upper case is a flaw). */
static bool len_has_letter(size_t n)
{
    for (size_t v = n + 4, i = 0; i < 4; i++, v >>= 4)
        if ((v & 0xf) >= 10)
            return true;
    return false;
}

/* A stray packet before command i, as the input says; whether it was
 * written. */
static bool put_stray(struct input *in, uint8_t *s, size_t *o, size_t i, size_t idlen, bool *clean)
{
    static const char *const specials[] = {"0001", "0002", "0003", "0004"};
    uint8_t kind = take(in) % 8;
    char line[128];
    size_t k = 0;

    if (kind < 4) {
        if (*o + 4 > BODY_MAX)
            return false;
        memcpy(s + *o, specials[kind], 4);
        *o += 4;
        *clean = false;
        return true;
    }
    if (kind == 4) {
        put(line, &k, "push-cert\0report-status\n", 24);
        *clean = false;
    } else if (kind == 5 || kind == 6) {
        put(line, &k, "shallow ", 8);
        put_oid(in, line, &k, idlen, clean);
        if (kind == 6)
            put(line, &k, "\n", 1);
        if (i > 0)
            *clean = false;
    } else {
        put(line, &k, "hello\n", 6);
        *clean = false;
    }
    return put_pkt(s, o, line, k, false);
}

/* The list the input describes, written to s[0..*n): shallow lines,
 * commands, the flush, some "pack". */
static void build(struct input *in, uint8_t *s, size_t *n, struct list *l)
{
    static char line[LINE_BUF];
    size_t idlen = take(in) & 1 ? 64 : 40;
    size_t shallows = take(in) % 8, count = take(in) % (BUILT_MAX + 1);

    l->n = l->flush_at = 0;
    l->rs = l->sb = l->sb64 = false;
    l->clean = true;
    *n = 0;
    for (size_t i = 0; i < shallows && i < 3; i++) {
        size_t k = 0;
        put(line, &k, "shallow ", 8);
        put_oid(in, line, &k, idlen, &l->clean);
        if (take(in) & 1)
            put(line, &k, "\n", 1);
        if (!put_pkt(s, n, line, k, false))
            return;
    }
    for (size_t i = 0; i < count; i++) {
        uint8_t f = take(in);
        size_t k = 0, ref_at, ref_end;
        if ((f & 0xe0) == 0xe0 && !put_stray(in, s, n, i, idlen, &l->clean))
            break;
        put_oid(in, line, &k, idlen, &l->clean);
        put(line, &k, " ", 1);
        size_t new_at = k;
        put_oid(in, line, &k, idlen, &l->clean);
        put(line, &k, " ", 1);
        ref_at = k;
        put_ref(in, line, &k, &l->clean);
        ref_end = k;
        /* the caps: on the first command only, unless bits 0-2 say otherwise */
        if ((i == 0) != ((f & 7) == 7)) {
            put(line, &k, "\0", 1);
            if (i == 0)
                put_caps(in, line, &k, l);
            else
                put(line, &k, "report-status", 13);
        }
        if ((f & 7) == 7)
            l->clean = false;
        if (f & 8)
            put(line, &k, "\n", 1);
        bool upper = (f & 0x10) != 0;
        if (upper && len_has_letter(k))
            l->clean = false;
        if (k > HTTP_RP_LINE_MAX)
            l->clean = false;
        if (!put_pkt(s, n, line, k, upper))
            break;
        if (l->n < BUILT_MAX) {
            struct http_rp_command *c = &l->cmds[l->n++];
            size_t ol = new_at - 1, nl = ref_at - 1 - new_at, rl = ref_end - ref_at;
            if (ol > 64 || nl > 64 || rl > HTTP_RP_REF_MAX) {
                l->clean = false;
                continue;
            }
            memcpy(c->old_oid, line, ol);
            c->old_oid[ol] = '\0';
            memcpy(c->new_oid, line + new_at, nl);
            c->new_oid[nl] = '\0';
            memcpy(c->ref, line + ref_at, rl);
            c->ref[rl] = '\0';
            c->ref_len = rl;
            c->create = ref_zero((const uint8_t *)line, ol);
            c->delete = ref_zero((const uint8_t *)line + new_at, nl);
            if (c->create && c->delete)
                l->clean = false;
        }
    }
    if (*n + 4 > BODY_MAX) {
        l->clean = false; /* no room for the flush: MORE */
        return;
    }
    memcpy(s + *n, "0000", 4);
    *n += 4;
    l->flush_at = *n;
    /* the pack: "PACK", then bytes of the input, even pkt-line-like ones */
    size_t pack = take(in) % 32;
    if (*n + 4 + pack <= BODY_MAX) {
        memcpy(s + *n, "PACK", 4);
        *n += 4;
        for (size_t i = 0; i < pack; i++)
            s[(*n)++] = take(in);
    }
}

/* ------------------------------------------------------------ the reader */

struct run {
    enum http_rp_result res;
    size_t n;    /* commands */
    size_t used; /* bytes read, all feeds */
    size_t at[CMDS_MAX];
    struct http_rp r;
    struct http_rp_command cmds[CMDS_MAX];
};

/* Feed s[0..n) cut at cuts[0..k) (increasing), or a byte at a time when
 * bytewise, until END or BAD. */
static void run(const uint8_t *s, size_t n, const size_t *cuts, size_t k, bool bytewise,
                struct run *w)
{
    struct http_rp_command cmd;
    size_t from = 0;

    http_rp_init(&w->r);
    w->res = HTTP_RP_MORE;
    w->n = 0;
    for (size_t i = 0; from < n; i++) {
        size_t to = bytewise ? from + 1 : i < k ? cuts[i] : n, at = from;
        for (;;) {
            size_t used = (size_t)-1;
            w->res = http_rp_feed(&w->r, s + at, to - at, &used, &cmd);
            CHECK(used <= to - at, "%zu bytes read of %zu given", used, to - at);
            at += used;
            if (w->res != HTTP_RP_COMMAND)
                break;
            CHECK(used > 0, "a command with no byte read");
            CHECK(w->n < CMDS_MAX, "more commands than a body of %d bytes holds", BODY_MAX);
            w->cmds[w->n] = cmd;
            w->at[w->n++] = at;
        }
        CHECK(w->res != HTTP_RP_MORE || at == to, "MORE with %zu of %zu bytes read", at - from,
              to - from);
        from = at;
        if (w->res != HTTP_RP_MORE)
            break;
    }
    w->used = from;
    CHECK(w->r.consumed == w->used, "consumed %llu, read %zu", (unsigned long long)w->r.consumed,
          w->used);
}

/* Whether a and b are the same command. */
static bool same_cmd(const struct http_rp_command *a, const struct http_rp_command *b)
{
    return strcmp(a->old_oid, b->old_oid) == 0 && strcmp(a->new_oid, b->new_oid) == 0 &&
           a->ref_len == b->ref_len && strlen(a->ref) == a->ref_len &&
           memcmp(a->ref, b->ref, a->ref_len + 1) == 0 && a->create == b->create &&
           a->delete == b->delete;
}

/* Property 3: run b gives what run a gives. */
static void same_runs(const struct run *a, const struct run *b, const char *how)
{
    CHECK(a->res == b->res && a->n == b->n && a->used == b->used,
          "%s: %d, %zu commands, %zu bytes; whole: %d, %zu, %zu", how, b->res, b->n, b->used,
          a->res, a->n, a->used);
    for (size_t i = 0; i < a->n; i++)
        CHECK(same_cmd(&a->cmds[i], &b->cmds[i]) && a->at[i] == b->at[i], "%s: command %zu differs",
              how, i);
    CHECK(a->r.report_status == b->r.report_status && a->r.side_band == b->r.side_band &&
              a->r.side_band_64k == b->r.side_band_64k,
          "%s: other capabilities", how);
}

/* The cut points the input asks for, increasing, within n. */
static size_t cut_points(struct input *in, size_t n, size_t *cuts)
{
    size_t k = 0, at = 0;

    while (in->n > 0 && k < PIECES_MAX && n > 0) {
        at += (size_t)take(in) % 128 + 1;
        if (at >= n)
            break;
        cuts[k++] = at;
    }
    return k;
}

/* ------------------------------------------------------------ the report */

/* The pkt-line at s[*o..n) (lower-case length): its payload at *p, *len
 * bytes; a flush is *p NULL.  False when there is none. */
static bool get_pkt(const char *s, size_t n, size_t *o, const char **p, size_t *len)
{
    unsigned v = 0;

    if (n - *o < 4)
        return false;
    for (int i = 0; i < 4; i++) {
        int d = ref_hex((uint8_t)s[*o + (size_t)i]);
        if (d < 0)
            return false;
        v = v << 4 | (unsigned)d;
    }
    if (v == 0) {
        *p = NULL;
        *len = 0;
        *o += 4;
        return true;
    }
    if (v < 5 || n - *o < v)
        return false;
    *p = s + *o + 4;
    *len = v - 4;
    *o += v;
    return true;
}

/* Property 5: the report for w's commands with reasons from the input. */
static void check_report(const struct run *w, struct input *in)
{
    static char reasons[CMDS_MAX][REASON_MAX + 1], out[OUT_MAX], data[OUT_MAX], want[1400];
    static const char *why[CMDS_MAX];
    size_t len, dn = 0, o = 0, pl;
    const char *p;

    for (size_t i = 0; i < w->n; i++) {
        size_t rl = take(in);
        uint8_t kind = take(in);
        for (size_t j = 0; j < rl; j++) {
            uint8_t c = kind & 1 ? take(in) : (uint8_t)(kind + j * 31);
            reasons[i][j] = (char)(c != 0 || (kind & 1) ? c : 'z');
        }
        reasons[i][rl] = '\0';
        why[i] = reasons[i];
    }
    len = http_rp_report(&w->r, w->cmds, why, w->n, out, sizeof(out));
    CHECK(len > 0 && len <= sizeof(out), "no report for %zu commands", w->n);
    if (w->r.side_band) {
        size_t max = w->r.side_band_64k ? 65515 : 995;
        for (;;) {
            CHECK(get_pkt(out, len, &o, &p, &pl), "side-band: not a pkt-line at %zu", o);
            if (p == NULL)
                break;
            CHECK(pl >= 2 && pl - 1 <= max && p[0] == 1,
                  "side-band: a packet of %zu bytes on band %d (at most %zu on 1)", pl, p[0], max);
            memcpy(data + dn, p + 1, pl - 1);
            dn += pl - 1;
        }
        CHECK(o == len, "side-band: %zu bytes after the flush", len - o);
    } else {
        memcpy(data, out, len);
        dn = len;
    }
    o = 0;
    CHECK(get_pkt(data, dn, &o, &p, &pl) && p != NULL && pl == 10 &&
              memcmp(p, "unpack ok\n", 10) == 0,
          "the report does not start with unpack ok");
    for (size_t i = 0; i < w->n; i++) {
        size_t k = 0, rl = strlen(why[i]);
        memcpy(want, "ng ", 3);
        k = 3;
        memcpy(want + k, w->cmds[i].ref, w->cmds[i].ref_len);
        k += w->cmds[i].ref_len;
        want[k++] = ' ';
        for (size_t j = 0; j < rl && j < 200; j++) {
            char c = why[i][j];
            want[k++] = c >= 0x20 && c < 0x7f ? c : '?';
        }
        want[k++] = '\n';
        CHECK(get_pkt(data, dn, &o, &p, &pl) && p != NULL && pl == k && memcmp(p, want, k) == 0,
              "line %zu of the report is not ng %s REASON", i + 1, w->cmds[i].ref);
    }
    CHECK(get_pkt(data, dn, &o, &p, &pl) && p == NULL && o == dn,
          "the report does not end with one flush");
    /* the exact cap, and one byte less */
    char *exact = malloc(len), *short_by_one = malloc(len - 1);
    CHECK(http_rp_report(&w->r, w->cmds, why, w->n, exact, len) == len &&
              memcmp(exact, out, len) == 0,
          "the report does not fit its own length (%zu)", len);
    CHECK(http_rp_report(&w->r, w->cmds, why, w->n, short_by_one, len - 1) == 0,
          "the report fits one byte less than its length (%zu)", len);
    free(exact);
    free(short_by_one);
}

/* ------------------------------------------------------------ the properties */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t s[BODY_MAX], back[BODY_MAX + 4096];
    static uint8_t area[BODY_MAX + 16] __attribute__((aligned(16)));
    static struct list built;
    static struct ref_out want;
    static struct run whole, pieces, bytes;
    struct input in = {data, size}, choices;
    size_t n = 0, cuts[PIECES_MAX], k, used;
    struct http_rp_command cmd;
    bool raw = size > 0 && ref_hex(data[0]) >= 0;

    if (raw) {
        n = size < BODY_MAX ? size : BODY_MAX;
        memcpy(s, data, n);
        size_t b = size < sizeof(back) ? size : sizeof(back);
        for (size_t i = 0; i < b; i++)
            back[i] = data[size - 1 - i];
        choices = (struct input){back, b};
    } else {
        (void)take(&in);
        build(&in, s, &n, &built);
        choices = in;
    }
    k = cut_points(&choices, n, cuts);
    reference(s, n, &want);

    /* 1, the reference on built lists */
    if (!raw) {
        CHECK(want.res != HTTP_RP_MORE || !built.clean, "a whole built list left MORE");
        CHECK(want.res != HTTP_RP_END || want.end == built.flush_at,
              "END at %zu, the flush was written to end at %zu", want.end, built.flush_at);
        if (built.clean) {
            CHECK(want.res == HTTP_RP_END && want.n == built.n,
                  "a list built without a flaw: %d with %zu commands of %zu", want.res, want.n,
                  built.n);
            for (size_t i = 0; i < built.n; i++)
                CHECK(same_cmd(&want.cmds[i], &built.cmds[i]), "built command %zu read back as %s",
                      i, want.cmds[i].ref);
            CHECK(built.n == 0 ||
                      (want.rs == built.rs && want.sb == built.sb && want.sb64 == built.sb64),
                  "the caps written are not the caps read");
        }
    }

    /* The body where the flush ends on an 8-byte boundary, all after it
     * poisoned (2). */
    size_t pad = want.res == HTTP_RP_END ? (8 - want.end % 8) % 8 : 0;
    uint8_t *p = area + pad;
    memcpy(p, s, n);
    if (want.res == HTTP_RP_END)
        ASAN_POISON_MEMORY_REGION(p + want.end, sizeof(area) - pad - want.end);
    run(p, n, NULL, 0, false, &whole);
    run(p, n, cuts, k, false, &pieces);
    run(p, n, NULL, 0, true, &bytes);

    /* 1 */
    CHECK(whole.res == want.res && whole.n == want.n,
          "reader %d with %zu commands, reference %d with %zu (%s)", whole.res, whole.n, want.res,
          want.n, whole.r.error ? whole.r.error : "");
    for (size_t i = 0; i < want.n; i++)
        CHECK(same_cmd(&whole.cmds[i], &want.cmds[i]) && whole.at[i] == want.at[i],
              "command %zu: reader %s %s %s at %zu, reference %s %s %s at %zu", i,
              whole.cmds[i].old_oid, whole.cmds[i].new_oid, whole.cmds[i].ref, whole.at[i],
              want.cmds[i].old_oid, want.cmds[i].new_oid, want.cmds[i].ref, want.at[i]);
    if (want.n > 0)
        CHECK(whole.r.report_status == want.rs && whole.r.side_band == want.sb &&
                  whole.r.side_band_64k == want.sb64,
              "caps: reader rs %d sb %d sb64 %d, reference %d %d %d", whole.r.report_status,
              whole.r.side_band, whole.r.side_band_64k, want.rs, want.sb, want.sb64);
    CHECK(whole.res != HTTP_RP_BAD || whole.r.error != NULL, "BAD without an error");
    /* 2 */
    if (whole.res == HTTP_RP_END) {
        CHECK(whole.used == want.end, "END after %zu bytes, the flush ends at %zu", whole.used,
              want.end);
        CHECK(http_rp_feed(&whole.r, p + whole.used, n - whole.used, &used, &cmd) == HTTP_RP_END &&
                  used == 0,
              "fed again after END: %zu bytes read", used);
    }
    if (whole.res == HTTP_RP_MORE)
        CHECK(whole.used == n, "MORE after %zu of %zu bytes", whole.used, n);
    /* 3 */
    same_runs(&whole, &pieces, "in pieces");
    same_runs(&whole, &bytes, "a byte at a time");
    /* 4 */
    if (whole.res == HTTP_RP_BAD) {
        CHECK(http_rp_feed(&whole.r, p, n, &used, &cmd) == HTTP_RP_BAD && used == 0 &&
                  http_rp_feed(&bytes.r, p + bytes.used, n - bytes.used, &used, &cmd) ==
                      HTTP_RP_BAD &&
                  used == 0,
              "BAD did not stay BAD");
    }
    if (want.res == HTTP_RP_END)
        ASAN_UNPOISON_MEMORY_REGION(p + want.end, sizeof(area) - pad - want.end);

    /* 5 */
    if (whole.res == HTTP_RP_END)
        check_report(&whole, &choices);
    return 0;
}
