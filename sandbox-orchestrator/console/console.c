/* console.c - `sandboxctl console [--listen ADDR:PORT] [--port-file FILE]`:
 * wires the pieces (sessions, audit log, denial streams, the HTTP server)
 * and serves until SIGINT or SIGTERM. */
#include "console.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "pve.h"
#include "sbx.h"

#define PEM_MAX (64 * 1024)

struct console_args {
    const char *listen, *port_file;
};

static int parse_args(int argc, char **argv, struct console_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char **slot = NULL;
        if (strcmp(argv[i], "--listen") == 0)
            slot = &a->listen;
        else if (strcmp(argv[i], "--port-file") == 0)
            slot = &a->port_file;
        if (!slot || i + 1 >= argc) {
            fprintf(stderr,
                    "sandboxctl console: %s '%s'\nusage: sandboxctl console "
                    "[--listen ADDR:PORT] [--port-file FILE]\n",
                    slot ? "a value is missing after" : "unknown option", argv[i]);
            return -1;
        }
        *slot = argv[++i];
    }
    return 0;
}

/* The PEM file at path, whole, as a new string.  NULL with err. */
static char *read_pem(const char *what, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *buf = calloc(1, PEM_MAX + 1);
    ssize_t n = fd == -1 ? -1 : read(fd, buf, PEM_MAX + 1);

    if (fd != -1)
        close(fd);
    if (n <= 0 || n > PEM_MAX) {
        snprintf(err, errlen, "%s %s: %s", what, path,
                 n < 0    ? strerror(errno)
                 : n == 0 ? "empty"
                          : "larger than 64 KiB");
        free(buf);
        return NULL;
    }
    return buf;
}

/* Write the port to path (for tests and scripts that asked for port 0). */
static int write_port(const char *path, unsigned port)
{
    FILE *f = fopen(path, "w");

    if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0) {
        fprintf(stderr, "sandboxctl console: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Start everything but the HTTP server.  0, or -1 with err. */
static int open_parts(struct sbx_console *con, struct sbx *s, char *err, size_t errlen)
{
    con->s = s;
    pthread_mutex_init(&con->op_lock, NULL);
    pthread_mutex_init(&con->signin_lock, NULL);
    con->signin = sbx_pve_new(&s->cfg, err, errlen);
    if (!con->signin)
        return -1;
    con->audit = sbx_audit_open(s->cfg.console_audit_log, err, errlen);
    if (!con->audit)
        return -1;
    con->sessions = sbx_sessions_new();
    con->streams = sbx_streams_new(NULL);
    con->denials = sbx_denials_start(&s->cfg, sbx_streams_wake, con->streams);
    sbx_streams_attach(con->streams, con->denials);
    con->traffic = sbx_traffic_start(&s->cfg);
    return 0;
}

static void close_parts(struct sbx_console *con)
{
    if (con->streams)
        sbx_streams_end_all(con->streams);
    sbx_traffic_stop(con->traffic);
    sbx_denials_stop(con->denials);
    sbx_streams_free(con->streams);
    sbx_sessions_free(con->sessions);
    sbx_audit_close(con->audit);
    sbx_pve_free(con->signin);
    pthread_mutex_destroy(&con->op_lock);
    pthread_mutex_destroy(&con->signin_lock);
}

int sbx_console_main(struct sbx *s, int argc, char **argv)
{
    struct console_args a = {0};
    struct sbx_console con = {0};
    char err[1024], *cert = NULL, *key = NULL;
    unsigned port = 0;
    int rc = 1;

    if (parse_args(argc, argv, &a))
        return 2;
    if (!a.listen)
        a.listen = s->cfg.console_listen ? s->cfg.console_listen : "127.0.0.1:8480";
    signal(SIGPIPE, SIG_IGN);
    /* SIGINT and SIGTERM wait for sigwait() in this thread: every thread
     * started from here on inherits the mask, so none of them takes one. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    json_object_seed(0); /* before any thread: jansson seeds its hash once */
    if (s->cfg.console_cert_file &&
        (!(cert = read_pem("console-cert-file", s->cfg.console_cert_file, err, sizeof err)) ||
         !(key = read_pem("console-key-file", s->cfg.console_key_file, err, sizeof err))))
        goto out;
    if (open_parts(&con, s, err, sizeof err))
        goto out;
    struct MHD_Daemon *d = sbx_web_start(&con, a.listen, cert, key, &port, err, sizeof err);
    if (!d)
        goto out;
    if (a.port_file && write_port(a.port_file, port)) {
        sbx_streams_end_all(con.streams);
        MHD_stop_daemon(d);
        goto out_quiet;
    }
    fprintf(stderr, "sandboxctl console: serving %s://%.*s:%u\n", con.tls ? "https" : "http",
            (int)(strrchr(a.listen, ':') - a.listen), a.listen, port);
    int sig;
    sigwait(&stop_signals, &sig);
    sbx_streams_end_all(con.streams);
    MHD_stop_daemon(d);
    rc = 0;
    goto out_quiet;
out:
    fprintf(stderr, "sandboxctl console: %s\n", err);
out_quiet:
    close_parts(&con);
    if (key)
        explicit_bzero(key, strlen(key));
    free(cert);
    free(key);
    return rc;
}
