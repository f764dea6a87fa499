/*
 * fuzz_wsframe.c - where WebSocket frames end (http/wsframe.c), against
 * frames this file builds itself and against itself fed in pieces.
 *
 * The input's first byte picks a mode.  Built (even): the rest describes
 * frames (opcode, FIN, mask, payload length and which length encoding),
 * which are written out here with an encoder of this file's own; then
 * the points where the stream is cut into pieces.  Raw (odd): the rest is
 * the stream itself, cut the same way.
 *
 * Properties:
 *   1. built frames: the walk (fed a byte at a time) ends a frame exactly
 *      where each built frame ends, counts them all, and never reports BAD;
 *   2. any stream: fed in pieces or a byte at a time, the walk gives the
 *      same result (BAD or not), the same last frame end and the same count
 *      as fed whole; an end is never past the bytes fed;
 *   3. a BAD walk stays BAD: more bytes change nothing.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "http.h"

#define STREAM_MAX 16384
#define FRAMES_MAX 64
#define PIECES_MAX 32

/* ------------------------------------------------------------ the encoder */

static const uint8_t opcodes[] = {0x0, 0x1, 0x2, 0x8, 0x9, 0xa};

/* Append one frame described by the input to s (at *n); its end offset.
 * False when it does not fit. */
static bool build_frame(struct input *in, uint8_t *s, size_t *n)
{
    uint8_t op = opcodes[take(in) % sizeof(opcodes)];
    uint8_t bits = take(in);
    bool ctrl = op >= 0x8, fin = ctrl || (bits & 1), mask = bits & 2;
    uint64_t len = ctrl ? take(in) % 126 : (uint64_t)take(in) << 4 | (take(in) & 0xf);
    unsigned enc = bits >> 2 & 3; /* 0: shortest, 1: 16-bit, 2: 64-bit */
    uint8_t h[14];
    size_t k = 0;

    if (ctrl || (enc == 1 && len > 0xffff))
        enc = 0;
    h[k++] = (uint8_t)((fin ? 0x80 : 0) | op);
    if (enc == 0 && len < 126) {
        h[k++] = (uint8_t)((mask ? 0x80 : 0) | len);
    } else if (enc != 2 && len <= 0xffff) {
        h[k++] = (uint8_t)((mask ? 0x80 : 0) | 126);
        h[k++] = (uint8_t)(len >> 8);
        h[k++] = (uint8_t)len;
    } else {
        h[k++] = (uint8_t)((mask ? 0x80 : 0) | 127);
        for (int i = 7; i >= 0; i--)
            h[k++] = (uint8_t)(len >> (8 * i));
    }
    if (mask)
        for (int i = 0; i < 4; i++)
            h[k++] = take(in);
    if (*n + k + len > STREAM_MAX)
        return false;
    memcpy(s + *n, h, k);
    *n += k;
    for (uint64_t i = 0; i < len; i++)
        s[(*n)++] = (uint8_t)(i * 7 + op); /* payload: anything, even header-like */
    return true;
}

/* ------------------------------------------------------------ the walks */

struct walk {
    enum http_ws_result r;
    uint64_t ends[STREAM_MAX + 1]; /* stream offsets where frames ended */
    size_t n_ends;
    uint64_t frames;
};

/* Walk s[0..n) cut at the points cuts[0..k) (increasing). */
static void walk(const uint8_t *s, size_t n, const size_t *cuts, size_t k, struct walk *w)
{
    struct http_ws_frames f;
    size_t from = 0;

    http_ws_frames_init(&f);
    w->n_ends = 0;
    w->r = HTTP_WS_OK;
    for (size_t i = 0; i <= k; i++) {
        size_t to = i < k ? cuts[i] : n, ends;
        enum http_ws_result r = http_ws_frames_feed(&f, s + from, to - from, &ends);
        CHECK(ends <= to - from, "an end past the piece: %zu of %zu", ends, to - from);
        CHECK(!(w->r == HTTP_WS_BAD && r != HTTP_WS_BAD), "BAD did not stay BAD");
        w->r = r;
        if (ends > 0 && r == HTTP_WS_OK)
            w->ends[w->n_ends++] = from + ends;
        from = to;
    }
    w->frames = f.frames;
}

/* Walk s[0..n) a byte at a time: every frame end is seen. */
static void walk_bytes(const uint8_t *s, size_t n, struct walk *w)
{
    struct http_ws_frames f;
    size_t ends;

    http_ws_frames_init(&f);
    w->n_ends = 0;
    w->r = HTTP_WS_OK;
    for (size_t i = 0; i < n && w->r == HTTP_WS_OK; i++) {
        w->r = http_ws_frames_feed(&f, s + i, 1, &ends);
        if (ends > 0 && w->r == HTTP_WS_OK)
            w->ends[w->n_ends++] = i + ends;
    }
    w->frames = f.frames;
}

/* The cut points the input asks for, increasing, within n. */
static size_t cut_points(struct input *in, size_t n, size_t *cuts)
{
    size_t k = 0, at = 0;

    while (in->n > 0 && k < PIECES_MAX && n > 0) {
        at += (size_t)take(in) % 64 + 1;
        if (at >= n)
            break;
        cuts[k++] = at;
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t s[STREAM_MAX];
    static struct walk whole, pieces, bytes;
    static uint64_t built[FRAMES_MAX];
    struct input in = {data, size};
    size_t n = 0, n_built = 0, cuts[PIECES_MAX], k;
    bool raw = take(&in) & 1;

    if (raw) {
        n = in.n < STREAM_MAX ? in.n / 2 : STREAM_MAX / 2;
        memcpy(s, in.p, n);
        in.p += n;
        in.n -= n;
    } else {
        size_t count = take(&in) % FRAMES_MAX;
        for (size_t i = 0; i < count && build_frame(&in, s, &n); i++)
            built[n_built++] = n;
    }
    k = cut_points(&in, n, cuts);
    walk(s, n, NULL, 0, &whole);
    walk(s, n, cuts, k, &pieces);
    walk_bytes(s, n, &bytes);

    /* 2 */
    CHECK(whole.r == pieces.r, "whole %d, in %zu pieces %d", whole.r, k + 1, pieces.r);
    CHECK(whole.frames == pieces.frames, "frames: whole %llu, pieces %llu",
          (unsigned long long)whole.frames, (unsigned long long)pieces.frames);
    /* (a piece reports only its last end: pieces' ends are among whole's
     * frame ends, and the last one is the same) */
    if (!raw) {
        /* 1 */
        CHECK(whole.r == HTTP_WS_OK, "built frames walked as BAD");
        CHECK(whole.frames == n_built, "built %zu frames, walked %llu", n_built,
              (unsigned long long)whole.frames);
        CHECK((n_built == 0) == (whole.n_ends == 0) &&
                  (n_built == 0 || whole.ends[0] == built[n_built - 1]),
              "the last end is not the last built frame's");
        CHECK(bytes.n_ends == n_built, "byte by byte: %zu ends for %zu frames", bytes.n_ends,
              n_built);
        for (size_t i = 0; i < n_built; i++)
            CHECK(bytes.ends[i] == built[i], "frame %zu ends at %llu, built to end at %llu", i,
                  (unsigned long long)bytes.ends[i], (unsigned long long)built[i]);
        for (size_t i = 0; i < pieces.n_ends; i++) {
            bool found = false;
            for (size_t j = 0; j < n_built && !found; j++)
                found = pieces.ends[i] == built[j];
            CHECK(found, "an end at %llu where no built frame ends",
                  (unsigned long long)pieces.ends[i]);
        }
    }
    if (whole.r == HTTP_WS_OK && pieces.n_ends > 0)
        CHECK(
            pieces.ends[pieces.n_ends - 1] == whole.ends[0], "last end in pieces %llu, whole %llu",
            (unsigned long long)pieces.ends[pieces.n_ends - 1], (unsigned long long)whole.ends[0]);
    CHECK(bytes.r == whole.r && bytes.frames == whole.frames, "byte by byte differs from whole");
    /* 3 */
    if (whole.r == HTTP_WS_BAD) {
        struct http_ws_frames f;
        size_t ends;
        http_ws_frames_init(&f);
        (void)http_ws_frames_feed(&f, s, n, &ends);
        CHECK(http_ws_frames_feed(&f, s, n, &ends) == HTTP_WS_BAD && ends == 0,
              "more bytes after BAD changed it");
    }
    return 0;
}
