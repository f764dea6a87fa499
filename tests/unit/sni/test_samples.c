/*
 * test_samples.c - the real ClientHellos in tests/data/clienthello parse to
 * the SNI that the folder's README.md names for each, however the bytes are
 * cut: whole, split in two at every offset, one byte at a time, and re-framed
 * as two or three TLS records split at every offset.
 *
 * The expected names are read from README.md (table rows "| `FILE.bin` |
 * CLIENT | `SNI` |", the SNI "(none)" for no server_name), so a sample added
 * there is tested too.
 */
#include "sni.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SAMPLES 32
#define MAX_BYTES   20000

struct sample {
    char file[64];
    char sni[SNI_HOST_MAX + 1]; /* "" when the README says (none) */
    uint8_t bytes[MAX_BYTES];   /* the capture: whole TLS records */
    size_t len;
    uint8_t hs[MAX_BYTES]; /* the handshake message: record payloads joined */
    size_t hs_len;
};

static struct sample samples[MAX_SAMPLES];
static size_t nsamples;
static struct sni_parser parser; /* 16 KiB: not on the stack */

static const char *data_dir(void)
{
    const char *d = getenv("CLIENTHELLO_DIR");
    return d ? d : "tests/data/clienthello"; /* run from the top of the tree */
}

static int read_file(const char *path, uint8_t *buf, size_t cap, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    *len = fread(buf, 1, cap, f);
    int too_big = fgetc(f) != EOF;
    fclose(f);
    return too_big ? -1 : 0;
}

/* The first `max` cells of a table row "| a | b | c |", trimmed of spaces
 * and backticks, in place; returns how many there are. */
static int row_cells(char *row, char **cell, int max)
{
    int n = 0;

    if (row[0] != '|')
        return 0;
    for (char *c = row + 1, *end; n < max && (end = strchr(c, '|')); c = end + 1) {
        char *e = end;
        while (c < e && (*c == ' ' || *c == '`'))
            c++;
        while (e > c && (e[-1] == ' ' || e[-1] == '`'))
            e--;
        *e = '\0';
        cell[n++] = c;
    }
    return n;
}

/* A README row "| `curl.bin` | curl 7.88.1 (OpenSSL 3.0) | `api.github.com` |". */
static void readme_line(char *line)
{
    char *cell[3];

    if (row_cells(line, cell, 3) < 3 || !*cell[2] || nsamples == MAX_SAMPLES)
        return;
    const char *file = cell[0], *sni = cell[2];
    if (strlen(file) < 5 || strcmp(file + strlen(file) - 4, ".bin") != 0)
        return;
    struct sample *s = &samples[nsamples++];
    snprintf(s->file, sizeof s->file, "%s", file);
    snprintf(s->sni, sizeof s->sni, "%s", strcmp(sni, "(none)") == 0 ? "" : sni);
}

/* Join the record payloads of s into s->hs. */
static void deframe(struct sample *s)
{
    s->hs_len = 0;
    for (size_t i = 0; i + 5 <= s->len;) {
        size_t rec = (size_t)s->bytes[i + 3] << 8 | s->bytes[i + 4];
        memcpy(s->hs + s->hs_len, s->bytes + i + 5, rec);
        s->hs_len += rec;
        i += 5 + rec;
    }
}

static int load_samples(void)
{
    char path[4096], line[512];

    snprintf(path, sizeof path, "%s/README.md", data_dir());
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        readme_line(line);
    fclose(f);
    for (size_t i = 0; i < nsamples; i++) {
        snprintf(path, sizeof path, "%s/%.63s", data_dir(), samples[i].file);
        if (read_file(path, samples[i].bytes, MAX_BYTES, &samples[i].len) == -1)
            return -1;
        deframe(&samples[i]);
    }
    return 0;
}

/* Feed buf in pieces cut at the given offsets (ascending, within len). */
static enum sni_result feed_cut(const uint8_t *buf, size_t len, const size_t *cuts, size_t ncuts)
{
    size_t from = 0;
    enum sni_result r = SNI_NEED_MORE;

    sni_parser_init(&parser);
    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : len;
        r = sni_parser_feed(&parser, buf + from, to - from);
        from = to;
    }
    return r;
}

/* Does the parser's verdict match what the README promised for s? */
static int verdict_is(const struct sample *s, enum sni_result r)
{
    if (s->sni[0] == '\0')
        return r == SNI_NO_SNI && parser.hello.host.len == 0;
    const struct sni_view *h = &parser.hello.host;
    return r == SNI_OK && h->len == strlen(s->sni) && memcmp(h->ptr, s->sni, h->len) == 0;
}

static void describe(const struct sample *s, enum sni_result r)
{
    diag("%s: %s (%s), host '%.*s'", s->file, sni_result_str(r), sni_error_str(parser.error),
         (int)parser.hello.host.len, (const char *)parser.hello.host.ptr);
}

static void test_whole(const struct sample *s)
{
    enum sni_result r = feed_cut(s->bytes, s->len, NULL, 0);
    const struct sni_hello *h = &parser.hello;
    int inside = h->host.len == 0 || (h->host.ptr >= parser.hs &&
                                      h->host.ptr + h->host.len <= parser.hs + sizeof parser.hs);

    if (!ok(verdict_is(s, r), "%s whole: SNI '%s'", s->file, s->sni))
        describe(s, r);
    ok(h->record_bytes == s->len, "%s whole: ClientHello ends at the end of the capture (%zu/%zu)",
       s->file, h->record_bytes, s->len);
    ok(inside, "%s whole: host is a view into the parser's handshake", s->file);
    diag("%s: legacy_version %04x max_version %04x alpn %zu bytes ech %d", s->file,
         h->legacy_version, h->max_version, h->alpn.len, h->ech);
}

static void test_split_two(const struct sample *s)
{
    size_t bad = 0;
    for (size_t cut = 1; cut < s->len && !bad; cut++)
        if (!verdict_is(s, feed_cut(s->bytes, s->len, &cut, 1)))
            bad = cut;
    ok(bad == 0, "%s split in two at every offset (first bad cut: %zu)", s->file, bad);
}

static void test_bytewise(const struct sample *s)
{
    enum sni_result r = SNI_NEED_MORE;
    size_t early = 0;

    sni_parser_init(&parser);
    for (size_t i = 0; i < s->len; i++) {
        r = sni_parser_feed(&parser, s->bytes + i, 1);
        if (r != SNI_NEED_MORE && i + 1 < s->len && !early)
            early = i + 1;
    }
    ok(verdict_is(s, r) && !early, "%s fed one byte at a time (early verdict at %zu)", s->file,
       early);
}

/*
 * Re-frame the sample's handshake message as records cut at the given
 * handshake offsets.  Returns the new length.
 */
static size_t reframe(const struct sample *s, const size_t *cuts, size_t ncuts, uint8_t *out)
{
    size_t n = 0, from = 0;

    for (size_t i = 0; i <= ncuts; i++) {
        size_t to = i < ncuts ? cuts[i] : s->hs_len;
        uint8_t hdr[5] = {22, 3, 1, (uint8_t)((to - from) >> 8), (uint8_t)(to - from)};
        memcpy(out + n, hdr, 5);
        memcpy(out + n + 5, s->hs + from, to - from);
        n += 5 + to - from;
        from = to;
    }
    return n;
}

static void test_reframed(const struct sample *s)
{
    static uint8_t buf[MAX_BYTES * 2];
    size_t hs_len = s->hs_len, bad2 = 0, bad3a = 0, bad3b = 0, checked3 = 0;

    for (size_t a = 1; a < hs_len && !bad2; a++) {
        size_t len = reframe(s, &a, 1, buf);
        if (!verdict_is(s, feed_cut(buf, len, NULL, 0)) || parser.hello.record_bytes != len)
            bad2 = a;
    }
    ok(bad2 == 0, "%s re-framed as two records, cut at every offset (first bad: %zu)", s->file,
       bad2);
    for (size_t a = 1; a < hs_len && !bad3a; a++) {
        for (size_t b = a + 1; b < hs_len && !bad3a; b++) {
            size_t cuts[2] = {a, b}, len = reframe(s, cuts, 2, buf);
            size_t feed_cuts[2] = {a + 2, b + 7}; /* also split the bytes across the headers */
            checked3++;
            if (!verdict_is(s, feed_cut(buf, len, feed_cuts, 2)))
                bad3a = a, bad3b = b;
        }
    }
    ok(bad3a == 0, "%s re-framed as three records, every pair of cuts (%zu framings; bad: %zu,%zu)",
       s->file, checked3, bad3a, bad3b);
}

int main(void)
{
    int loaded = load_samples() == 0; /* before nsamples is read for the message */
    if (!ok(loaded && nsamples >= 8, "read %zu samples and their SNI from %s", nsamples,
            data_dir()))
        return tap_done();
    for (size_t i = 0; i < nsamples; i++) {
        test_whole(&samples[i]);
        test_split_two(&samples[i]);
        test_bytewise(&samples[i]);
        test_reframed(&samples[i]);
    }
    return tap_done();
}
