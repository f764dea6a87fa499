/* guest.h - the QEMU guest agent of a sandbox, through the Proxmox API.
 *
 * Proxmox passes guest bytes as JSON strings whose code points are the
 * bytes (Latin-1); these helpers convert both ways so that commands,
 * their output and files stay binary-safe.
 */
#ifndef SBX_GUEST_H
#define SBX_GUEST_H

#include <stddef.h>

#include <jansson.h>

#include "sbx.h"

#define SBX_GUEST_FILE_MAX (16L * 1024 * 1024) /* file-read's cap, and ours for write */
/* The most of each stream (stdout, stderr) an exec-status answer may give:
 * the real agent's own cap (qemu-ga's GUEST_EXEC_MAX_OUTPUT).  More is cut
 * and marked truncated; exec-output-max then cuts what a caller keeps. */
#define SBX_GUEST_OUTPUT_MAX (16L * 1024 * 1024)

/* Every answer comes from inside the sandbox: the guest agent chose each of
 * its bytes.  Errors name the call ("agent/exec-status: ...") and the field
 * that broke its schema; a call whose answer is not whole within
 * http-timeout fails with "agent/CALL: no answer within N s". */

/* What an exec-status answer says. */
enum sbx_guest_state {
    SBX_GUEST_RUNNING, /* exited false */
    SBX_GUEST_EXITED,  /* exited true; the streams decoded */
    SBX_GUEST_BAD,     /* not what the schema allows; err says which field */
};

/* Ping the agent until it answers or timeout_ms passes ("QEMU guest agent
 * is not running" is waited out; other errors end the wait).  0 / -1. */
int sbx_guest_wait(struct sbx *s, const char *node, int vmid, long timeout_ms, char *err,
                   size_t errlen);

/* Run argv (borrowed JSON array of strings) with input (len bytes, may be
 * NULL) as its stdin, and poll exec-status until it has exited or
 * timeout_ms passes.  On 0, *status is the final exec-status object (new
 * reference) with out-data/err-data converted to raw bytes in
 * "out-bytes"/"err-bytes" (strings that may hold any byte: use
 * json_string_length()).  -1 with err otherwise. */
int sbx_guest_exec(struct sbx *s, const char *node, int vmid, json_t *argv, const char *input,
                   size_t len, long timeout_ms, json_t **status, char *err, size_t errlen);

/* The exit of a final exec-status answer: its exitcode, or 128+N when the
 * process was killed by signal N (*signal = N, else 0); -1 when the answer
 * holds neither.  Never 0 unless the process exited 0. */
int sbx_guest_exit_code(json_t *st, int *signal);

/* Read an exec-status answer st (borrowed; Proxmox's "data").  Each field
 * the schema names must have its type: exited, out-truncated and
 * err-truncated a boolean (or 0/1), exitcode and signal integers, out-data
 * and err-data strings; exited must be there.  On EXITED, st holds the
 * streams as bytes under "out-bytes"/"err-bytes" (strings that may hold
 * any byte; at most max bytes each, a longer one cut and its
 * "out-truncated"/"err-truncated" set to true) in place of out-data and
 * err-data.  BAD with err naming the field. */
enum sbx_guest_state sbx_guest_status_decode(json_t *st, size_t max, char *err, size_t errlen);

/* Read a file-read answer ans (borrowed): content as base64 (b64: PVE 9's
 * decode=0) or as a string of Latin-1 code points, into a new buffer
 * (*data, *len; caller frees) of at most max bytes.  -1 with err naming the
 * field: content missing or not a string, not base64, more than max bytes;
 * truncated set or not a boolean; bytes-read (when there) not the number
 * of bytes in content. */
int sbx_guest_read_decode(json_t *ans, int b64, size_t max, unsigned char **data, size_t *len,
                          char *err, size_t errlen);

/* Write len bytes to path in the guest (truncating it); files larger than
 * one file-write are written in parts and joined by a command in the
 * guest.  0 / -1. */
int sbx_guest_write(struct sbx *s, const char *node, int vmid, const char *path,
                    const unsigned char *data, size_t len, char *err, size_t errlen);

/* Read path from the guest into a new buffer (*data, *len; caller frees).
 * Files over SBX_GUEST_FILE_MAX are refused.  0 / -1. */
int sbx_guest_read(struct sbx *s, const char *node, int vmid, const char *path,
                   unsigned char **data, size_t *len, char *err, size_t errlen);

/* Run `/bin/sh -c script sh args...` (args NULL-terminated) as root in the
 * guest and wait up to timeout_ms.  0 when it exited 0, with its stdout in
 * *out (new NUL-terminated buffer; out may be NULL).  -1 otherwise, err
 * "what: exit N: " and the end of its stderr. */
int sbx_guest_script(struct sbx *s, const char *node, int vmid, const char *what,
                     const char *script, const char *const *args, long timeout_ms, char **out,
                     char *err, size_t errlen);

/* Bytes as a JSON string: valid UTF-8 is kept, every invalid byte becomes
 * U+FFFD.  New reference. */
json_t *sbx_guest_text(const unsigned char *data, size_t len);

#endif
