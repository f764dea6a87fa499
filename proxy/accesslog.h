/*
 * accesslog.h - the access log: one JSON object per line (docs/design.md,
 * "Access log"), one write(2) per line (or per batch of whole lines) on a file
 * opened O_APPEND, so lines from worker threads never interleave.
 * SIGUSR1 -> px_accesslog_reopen() (logrotate).
 */
#ifndef PX_ACCESSLOG_H
#define PX_ACCESSLOG_H

#include <stddef.h>
#include <stdint.h>

/* One line.  NULL strings and zero numbers marked "or 0" are written as
 * JSON null, so every line has every field. */
struct px_log_entry {
    int64_t ts_ms;        /* when the connection ended (ms since the epoch) */
    uint64_t id;          /* connection id, unique in this process */
    const char *sandbox;  /* binding id, or "default" */
    const char *owner;    /* binding owner, or NULL */
    const char *src;      /* client "ADDR:PORT" */
    const char *mode;     /* connect|http|tls|plain */
    const char *method;   /* HTTP method, or NULL */
    const char *host;     /* normalized host as asked for, or the raw text if bad_host */
    unsigned port;        /* or 0 */
    const char *sni;      /* the ClientHello's server_name, or NULL */
    const char *decision; /* allow|deny|would_deny */
    const char *reason;   /* px_reason_str() */
    const char *rule;     /* "FILE:LINE", or NULL */
    const char *upstream; /* "ADDR:PORT" connected to, or NULL */
    const char *country;  /* or NULL / "" */
    uint32_t asn;         /* or 0 */
    uint64_t bytes_up;    /* client -> origin */
    uint64_t bytes_down;  /* origin -> client */
    uint64_t duration_ms;
    unsigned status;         /* HTTP status sent or received, or 0 */
    const char *termination; /* "WHO/PHASE" that ended the connection, or NULL */
    /* The policy DNS server's lines (mode "dns"; NULL / 0 on the others) */
    const char *answer; /* NOERROR, NODATA, NXDOMAIN, REFUSED, SERVFAIL, FORMERR, ... */
    uint64_t count;     /* the queries the line stands for (dns-log summary: more than one) */
    /* Credential injection: the secrets added to this request (or bound to
     * the intercepted CONNECT's host; or, denied, the one misplaced), "a,b";
     * names only, never a value.  NULL elsewhere. */
    const char *inject;
    const char *path; /* an HTTP request's path, without its query; NULL elsewhere */
    /* A DNS question's name in wire form, when host is that name as it
     * came (not normalized): `host` is written from this, with its label
     * structure and whatever bytes its labels hold (a NUL too); or NULL. */
    const uint8_t *qname;
    size_t qname_len;
};

/* Open `path` ("stdout" for standard output) for appending, in place of
 * what was open.  Main thread, while no other thread writes (at start).
 * Returns 0, or -1 with "PATH: reason" in err (what was open stays). */
int px_accesslog_open(const char *path, char *err, size_t errlen);

/* Reopen the same path (after logrotate moved it), while workers write:
 * main thread.  Returns 0 or -1 (the old file stays in use and the reason
 * goes to the diagnostics log). */
int px_accesslog_reopen(void);

/* Write one line: without a lock to a regular file, under a lock held
 * for one write(2) to a pipe or socket.  In a
 * thread that batches (below), the line waits for px_accesslog_flush(). */
void px_accesslog_write(const struct px_log_entry *e);

/* Batching, per thread: from now on this thread's lines are gathered, and
 * wake(arg) is called when the first one arrives; the thread then calls
 * px_accesslog_flush() soon (a worker: once its event loop has run the
 * round's callbacks), which writes them in one write(2).  Lines stay in
 * this thread's order.  _stop flushes and ends batching. */
void px_accesslog_batch_start(void (*wake)(void *), void *arg);
void px_accesslog_flush(void);
void px_accesslog_batch_stop(void);

/* Close the log (main thread, once no other thread writes). */
void px_accesslog_close(void);

/* The line px_accesslog_write() would write, without the newline; the
 * caller frees it.  For tests. */
char *px_accesslog_format(const struct px_log_entry *e);

#endif
