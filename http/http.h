/*
 * http.h - HTTP/1.1 message heads and body framing, strict (RFC 9110,
 * RFC 9112).  Pure: no I/O, no allocation; results are views into the
 * caller's buffer.  Every byte comes from a sandbox or an origin, so
 * anything ambiguous is an error, never guessed at (RFC 9112 section 11,
 * request smuggling):
 *   two Content-Length (even equal), Content-Length with Transfer-Encoding,
 *   a Transfer-Encoding other than exactly "chunked", obs-fold (a line
 *   starting with SP/HT), a bare LF or CR, NUL or other control bytes, white
 *   space between a field name and its colon, a field name that is not a
 *   token, a request line that is not METHOD SP TARGET SP HTTP/1.x.
 */
#ifndef HTTP_HTTP_H
#define HTTP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEADERS_CAP 256 /* the hard cap of the header array */

enum http_result {
    HTTP_R_OK,        /* a whole head was parsed; see head_len */
    HTTP_R_NEED_MORE, /* no error so far, but the head has not ended */
    HTTP_R_BAD,       /* malformed or ambiguous: answer 400 (see `error`) */
    HTTP_R_TOO_BIG,   /* a cap was hit: 414 for the line, 431 for headers */
};

struct http_limits {
    size_t max_line;    /* request/status line bytes (e.g. 8192) */
    size_t max_head;    /* whole head bytes incl. the final CRLF (max-header-bytes) */
    size_t max_headers; /* header fields (<= HTTP_MAX_HEADERS_CAP) */
};

struct http_view {
    const char *p;
    size_t len;
};

struct http_header {
    struct http_view name, value; /* value without leading/trailing SP/HT */
};

enum http_target_form {
    HTTP_FORM_ORIGIN,    /* "/path?query" */
    HTTP_FORM_ABSOLUTE,  /* "http://host[:port]/path?query" */
    HTTP_FORM_AUTHORITY, /* "host:port" (CONNECT only) */
    HTTP_FORM_ASTERISK,  /* "*" (OPTIONS only) */
};

/* Body framing of a message (RFC 9112 section 6.3). */
enum http_body {
    HTTP_BODY_NONE,     /* no body */
    HTTP_BODY_LENGTH,   /* content_length bytes */
    HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
    HTTP_BODY_TO_CLOSE, /* responses only: until the origin closes */
};

struct http_request {
    struct http_view method, target;
    unsigned minor; /* HTTP/1.<minor>: 0 or 1 */
    enum http_target_form form;
    /* From the target: absolute form gives scheme, host, port, path;
     * authority form gives host and port; origin form gives path. */
    struct http_view scheme;      /* "http" (lower-cased comparison) */
    struct http_view host;        /* without brackets' removal: "[::1]" stays */
    uint16_t port;                /* 0 when the target has none */
    struct http_view path;        /* origin-form path + query ("/" if empty) */
    struct http_view host_header; /* the Host field, if present (host[:port]) */
    bool has_host_header;
    struct http_view proxy_authorization; /* the field value, if any */
    enum http_body body;
    uint64_t content_length;
    bool keep_alive;      /* HTTP/1.1 without "close", or 1.0 with "keep-alive" */
    bool expect_continue; /* Expect: 100-continue */
    bool upgrade;         /* an Upgrade field is present */
    size_t n_headers;
    struct http_header headers[HTTP_MAX_HEADERS_CAP];
    size_t head_len;   /* bytes of the head, incl. the empty line */
    const char *error; /* for BAD / TOO_BIG: what was wrong, for the 400 body */
};

struct http_response {
    unsigned status;
    unsigned minor;
    enum http_body body;
    uint64_t content_length;
    bool keep_alive;
    size_t n_headers;
    struct http_header headers[HTTP_MAX_HEADERS_CAP];
    size_t head_len;
    const char *error;
};

/* Parse the request head at buf[0..len).  Needs the whole head in one
 * buffer; call again with more bytes after NEED_MORE.  A NEED_MORE with
 * len already at max_head (or a line already over max_line) is TOO_BIG. */
enum http_result http_parse_request(const char *buf, size_t len, const struct http_limits *lim,
                                    struct http_request *req);

/* Parse a response head.  `request_method` (e.g. "HEAD") and it decide the
 * body framing: HEAD, 1xx, 204 and 304 have none; no length and no chunked
 * means HTTP_BODY_TO_CLOSE. */
enum http_result http_parse_response(const char *buf, size_t len, const struct http_limits *lim,
                                     const char *request_method, struct http_response *resp);

/* The Connection field a formatted head ends with. */
enum http_connection {
    HTTP_CONN_CLOSE,      /* "Connection: close" */
    HTTP_CONN_KEEP_ALIVE, /* "Connection: keep-alive" */
    /* "Connection: Upgrade" and "Upgrade: websocket", and no
     * Sec-WebSocket-Extensions field: no extension (compression) is
     * offered or accepted, so what the frames carry stays as sent. */
    HTTP_CONN_UPGRADE_WEBSOCKET,
};

/* Write the head to send upstream for `req` into out[0..cap): the request
 * line in origin form, the fields minus the hop-by-hop ones (Connection, and
 * every field it names, Keep-Alive, TE, Trailer, Transfer-Encoding is kept
 * (framing), Upgrade, Proxy-*), a Host field equal to `authority` (the
 * normalized host, with ":port" when not the scheme's default), and the
 * Connection field `conn` says.  Returns the length, or 0 if cap is too
 * small. */
size_t http_format_request(const struct http_request *req, const char *authority,
                           enum http_connection conn, char *out, size_t cap);

/* Write a response head to send to the client for `resp`: the status line
 * as received, the fields minus the hop-by-hop ones, and the Connection
 * field `conn` says.  Returns the length, or 0 if cap is too small. */
size_t http_format_response(const struct http_response *resp, const char *buf,
                            enum http_connection conn, char *out, size_t cap);

/* The protocol change a request asks for (its Upgrade field). */
enum http_upgrade {
    HTTP_UPGRADE_NONE,      /* no Upgrade field */
    HTTP_UPGRADE_WEBSOCKET, /* RFC 6455 section 4.1: a GET of HTTP/1.1 without a
                               body, Upgrade listing "websocket", Connection
                               listing "upgrade" */
    HTTP_UPGRADE_OTHER,     /* any other (h2c, TLS, a malformed WebSocket one) */
};
enum http_upgrade http_request_upgrade(const struct http_request *req);

/* Whether `resp` switches to WebSocket: a 101 whose Upgrade field lists
 * "websocket" and whose Connection field lists "upgrade". */
bool http_response_upgrades_websocket(const struct http_response *resp);

/* A request's path in the one form rules are matched on (policy/'s
 * `paths`), from a target's path view ("/a/b?q": origin form, or the path
 * of an absolute one): the query cut; an escaped unreserved character
 * (RFC 3986 section 2.3) decoded, any other escape with upper-case hex,
 * a printable byte a segment cannot hold as itself ('[', '"', '{', '|',
 * ...) escaped likewise;
 * empty segments ("//") dropped; dot segments (".", "..", escaped or not)
 * removed as RFC 3986 section 5.2.4 does (a ".." at the root stays
 * there); a path that ended in "/", "/." or "/.." keeps one trailing "/";
 * the case of everything else as sent.  Refused rather than guessed at:
 * what servers read differently (an escaped '/' or '\', a '\', %00, a
 * dot segment with parameters such as "..;x") is AMBIGUOUS; a target not
 * starting with '/', a byte outside printable ASCII, '#' or a bad escape
 * is BAD.  The result goes into out[0..cap), NUL-terminated, its length
 * in *out_len; it is at most three times the input (each escaped byte),
 * and no longer than the input when the input holds only bytes a segment
 * may hold.  The work is done in out, so a cap of 3 * len + 1 always
 * suffices, and a smaller one is TOO_LONG as soon as the segments written
 * so far do not fit (even if later ".." segments would have shortened
 * them).
 * Idempotent: a normalized path normalizes to itself.  Pure. */
enum http_path_result {
    HTTP_PATH_OK,
    HTTP_PATH_BAD,
    HTTP_PATH_AMBIGUOUS,
    HTTP_PATH_TOO_LONG, /* it does not fit in cap */
};
enum http_path_result http_path_normalize(const char *in, size_t len, char *out, size_t cap,
                                          size_t *out_len);
/* The words of a result, for a log line or a 400. */
const char *http_path_result_str(enum http_path_result r);

/* Chunked body framing: walks a chunked body as it streams by, without
 * changing it, to find where the message ends (RFC 9112 section 7.1).
 * Chunk extensions are skipped; trailers are read and dropped from the
 * framing's point of view (they pass through); a chunk size over 2^60, a
 * bad hex digit, a missing CRLF or a bare LF is an error. */
struct http_chunked {
    int state;
    uint64_t left; /* bytes left in the current chunk's data */
    size_t line;   /* bytes in the current size or trailer line */
};

enum http_chunked_result {
    HTTP_CHUNKED_MORE, /* all of buf belongs to the body; more to come */
    HTTP_CHUNKED_DONE, /* the body ended after *used bytes */
    HTTP_CHUNKED_BAD,
};

void http_chunked_init(struct http_chunked *c);
enum http_chunked_result http_chunked_feed(struct http_chunked *c, const char *buf, size_t len,
                                           size_t *used);
/* As http_chunked_feed, but takes only chunk-data or only framing (size
 * lines, extensions, CRLFs, trailers): *data says which the *used bytes
 * were.  Fed one after the other, the spans are the body as
 * http_chunked_feed walks it (a scan of what a client decodes uses it). */
enum http_chunked_result http_chunked_span(struct http_chunked *c, const char *buf, size_t len,
                                           size_t *used, bool *data);

/* Find a field by name (case-insensitive); NULL if absent. */
const struct http_header *http_find(const struct http_header *h, size_t n, const char *name);

/* ---- base64 (RFC 4648 section 4: the standard alphabet, padded) ---- */

#define HTTP_BASE64_BAD SIZE_MAX /* not strict base64, or no room */

/* Write the base64 of in[0..n) to out[0..cap), no NUL: 4 * ceil(n / 3)
 * characters.  Returns that length, or 0 if cap is too small (or n is 0). */
size_t http_base64_encode(const uint8_t *in, size_t n, char *out, size_t cap);

/* The decoded length of in[0..n) if it is strict base64, else
 * HTTP_BASE64_BAD.  Strict: a multiple of 4 characters of the standard
 * alphabet, "=" only as the last one or two, the bits padding leaves over
 * zero (so each byte string has exactly one encoding), no white space. */
size_t http_base64_decoded_len(const char *in, size_t n);

/* Decode strict base64 in[0..n) into out[0..cap).  Returns the length, or
 * HTTP_BASE64_BAD if in is not strict base64 or cap is too small (then
 * out[0..cap) may have been written). */
size_t http_base64_decode(const char *in, size_t n, uint8_t *out, size_t cap);

/* The same two with the memory made here, for whole files (sandboxctl's
 * guest file transfers).  Encode: the base64 of in[0..n) as a new
 * NUL-terminated string.  Decode: strict base64 in[0..n) (as above) into
 * a new buffer of *out_len bytes plus a NUL after them, or NULL when in
 * is not strict base64.  The caller frees; allocation failure aborts. */
char *http_base64_encode_new(const uint8_t *in, size_t n);
uint8_t *http_base64_decode_new(const char *in, size_t n, size_t *out_len);

/* ---- credential injection: placeholders in a request head swapped for secrets ---- */

/*
 * The sandbox holds a placeholder for each secret ("egressd-ph-NAME-<hex>":
 * HTTP_CRED_PLACEHOLDER_MIN..MAX bytes of [A-Za-z0-9_-]) and sends it where
 * the secret would go.  For one request head egressd hands http_cred_apply
 * the sandbox's credentials, each marked bound or not to the host the
 * request goes to.  A placeholder is replaced only where a field's whole
 * value is it in the shape of its kind, in the field the credential names
 * (name compared ignoring case):
 *   HTTP_CRED_X_API_KEY, HTTP_CRED_HEADER   value == placeholder
 *                                           -> secret
 *   HTTP_CRED_BEARER     "Bearer" 1*SP placeholder (scheme in any case)
 *                                           -> "Bearer " secret
 *   HTTP_CRED_BASIC      "Basic" 1*SP base64(user ":" placeholder), strict
 *                        base64 (see http_base64_decoded_len); the user
 *                        ends at the first ":" (RFC 7617 section 2)
 *                                           -> "Basic " base64(user ":" secret)
 * A field with any other value (the client's own token) is left as it is.
 */
#define HTTP_CRED_MAX             32 /* credentials per call (bits of `used`) */
#define HTTP_CRED_PLACEHOLDER_MIN 16
#define HTTP_CRED_PLACEHOLDER_MAX 128

enum http_cred_kind {
    HTTP_CRED_X_API_KEY, /* the whole value, in "x-api-key" */
    HTTP_CRED_BEARER,    /* RFC 6750 section 2.1, in "authorization" */
    HTTP_CRED_BASIC,     /* RFC 7617, the password, in "authorization" */
    HTTP_CRED_HEADER,    /* the whole value, in a field of the operator's */
};

struct http_cred {
    enum http_cred_kind kind;
    const char *field;            /* lower-case field name: "x-api-key", "authorization", ... */
    struct http_view placeholder; /* what the sandbox holds */
    struct http_view secret;      /* the real value; never read when !bound */
    bool bound;                   /* bound to this request's host: substitute here */
};

enum http_cred_result {
    HTTP_CRED_NONE,      /* no placeholder anywhere: the head is unchanged */
    HTTP_CRED_DONE,      /* every placeholder was substituted (*used says whose) */
    HTTP_CRED_FOREIGN,   /* an unbound credential's placeholder is in the head:
                            deny (credential_host_mismatch); creds[*which] */
    HTTP_CRED_MISPLACED, /* a bound credential's placeholder is somewhere it is
                            not substituted: deny; creds[*which] */
    HTTP_CRED_NO_ROOM,   /* scratch is too small: the head is unchanged */
    HTTP_CRED_BAD_CRED,  /* creds[*which] cannot be used (a caller's bug): a
                            field that is not a lower-case token or is one the
                            parser or formatter gives a meaning to (host,
                            content-length, transfer-encoding, connection,
                            keep-alive, te, trailer, upgrade, expect, proxy-*),
                            a placeholder not of the shape above, an empty
                            secret or (not Basic) one with a control byte or
                            a blank end; or *which == HTTP_CRED_MAX: n is over */
};

/*
 * Substitute the placeholders of creds[0..n) in the head `req` (parsed by
 * http_parse_request) for their secrets.  The new values are written to
 * scratch[0..cap) and req->headers[i].value is pointed there; nothing else
 * of req changes, so http_format_request then writes the new head.  On any
 * result but DONE neither req nor scratch is touched.
 *
 * Before anything is replaced the whole head is searched for every
 * credential's placeholder: the method, the target (its query too: the
 * origin may log it), every field name and value, and inside a value of the
 * shape "Basic" 1*SP base64 in any field, the decoded bytes.  Each match
 * must be exactly the placeholder being replaced, or the result is FOREIGN
 * (the credential is not bound here) or else MISPLACED (a bound one sent in
 * another field, under another scheme, as a Basic user name, in the
 * target...).  *which is then the lowest such index; FOREIGN wins over
 * MISPLACED.  This is a tripwire for a sandbox that sends a credential
 * where egressd would not put it, not a barrier: a placeholder written in
 * another encoding (percent-encoded, in a body, ...) is not seen; bodies
 * are never read.  Placeholders are not secrets, so nothing leaks then but
 * the placeholder.
 *
 * Bound credentials that share a placeholder and a secret are alternatives: one secret
 * a host takes in more than one shape (an SDK's `x-api-key`, another's
 * `Authorization: Bearer`).  Each site is substituted by the first of them
 * whose shape it has, and the placeholder standing there is in place for
 * all of them.
 *
 * *which is n when no credential is at fault; *used has bit i set when
 * creds[i] was substituted somewhere (0 unless DONE).  Secrets are read only
 * from bound credentials and written only to scratch.  No allocation; the
 * stack holds a window of a Basic value's decoded bytes (the client's).
 */
enum http_cred_result http_cred_apply(struct http_request *req, const struct http_cred *creds,
                                      size_t n, char *scratch, size_t cap, size_t *which,
                                      uint32_t *used);

/* A git push over smart HTTP (receivepack.c): the command list at the
 * start of a git-receive-pack request body, read pkt-line by pkt-line as
 * it streams by (gitprotocol-pack(5)), and the report that refuses it. */
#define HTTP_RP_LINE_MAX     4096  /* the longest command line read (caps included) */
#define HTTP_RP_REF_MAX      1024  /* the longest ref name */
#define HTTP_RP_COMMANDS_MAX 10000 /* the most commands in one push */

struct http_rp_command {
    char old_oid[65], new_oid[65]; /* lower hex, 40 or 64 digits */
    char ref[HTTP_RP_REF_MAX + 1];
    size_t ref_len;
    bool create; /* old is the zero id */
    bool delete; /* new is the zero id */
};

struct http_rp {
    uint8_t state;
    uint8_t oid_len; /* 40 or 64, from the first id read; 0 before */
    uint8_t len_have;
    char len[4];
    uint16_t pkt_len, have;
    uint32_t commands;
    uint64_t consumed; /* body bytes read so far (to the flush at most) */
    /* From the first command's capabilities: how to report. */
    bool report_status, side_band, side_band_64k;
    const char *error; /* for BAD: what was wrong */
    char line[HTTP_RP_LINE_MAX];
};

enum http_rp_result {
    HTTP_RP_MORE,    /* all of the bytes are read; more are needed */
    HTTP_RP_COMMAND, /* a command is in *cmd; feed the rest again */
    HTTP_RP_END,     /* the flush that ends the list was read (with no command
                        at all: an empty push, git's probe) */
    HTTP_RP_BAD,     /* not a command list egressd reads (see error); stays BAD */
};

void http_rp_init(struct http_rp *r);
/* Read p[0..n) of the request body (its framing already taken off), up
 * to the next event: a command (in *cmd), the end of the list or BAD.
 * *used says how many bytes were read (the rest is to be fed again;
 * nothing past the flush is read).  Shallow lines before the commands
 * are skipped; a signed push is BAD.  No allocation. */
enum http_rp_result http_rp_feed(struct http_rp *r, const uint8_t *p, size_t n, size_t *used,
                                 struct http_rp_command *cmd);
/* Whether s[0..len) is a full ref name a push may update (refs/...). */
bool http_rp_ref_ok(const char *s, size_t len);
/* The answer to a push that is refused: report-status ("unpack ok", then
 * "ng REF REASON" for each of cmds[0..n) with reasons[i], printable ASCII
 * of at most 200 bytes kept), in side-band channel 1 when the client
 * asked for side-band(-64k); what git prints as "! [remote rejected] REF
 * (REASON)".  The body of a 200 with Content-Type
 * application/x-git-receive-pack-result, into out[0..cap); its length,
 * or 0 when it does not fit. */
size_t http_rp_report(const struct http_rp *r, const struct http_rp_command *cmds,
                      const char *const *reasons, size_t n, char *out, size_t cap);

/* WebSocket framing (RFC 6455 section 5.2): walks a stream of frames as
 * it streams by, without changing it, to find where each frame ends. */
struct http_ws_frames {
    int state;
    uint8_t head[14]; /* the header so far (2 + 8 length + 4 mask key at most) */
    uint8_t have, need;
    uint64_t left;   /* payload bytes left of the current frame */
    uint64_t frames; /* frames that ended so far */
};

enum http_ws_result {
    HTTP_WS_OK,  /* no error so far */
    HTTP_WS_BAD, /* a header broke the framing (a reserved bit or opcode, a
                    fragmented or long control frame, a 64-bit length with
                    its top bit set); stays BAD */
};

void http_ws_frames_init(struct http_ws_frames *f);

/* Walk the n next bytes p of the stream.  *ends: the offset in p just past
 * the last frame that ended within these bytes, 0 when none did. */
enum http_ws_result http_ws_frames_feed(struct http_ws_frames *f, const uint8_t *p, size_t n,
                                        size_t *ends);

#endif
