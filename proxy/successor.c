/*
 * successor.c - see successor.h.
 */
#include "successor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handover.h"
#include "log.h"

#define REAP_GRACE_MS 1000

/* The successor being started: at most one. */
struct attempt {
    bool busy, greeted;
    pid_t pid;
    int chan;
    struct event *ev, *timer;
    json_t *state;
    px_successor_done done;
    void *arg;
};
static struct attempt S = {.chan = -1};

bool px_successor_busy(void)
{
    return S.busy;
}

/* In the child, before exec: the channel on PX_SUCCESSOR_FD (without
 * close-on-exec) and no other descriptor above it, so the successor holds
 * no tunnel of this process open.  Only async-signal-safe calls. */
static void child_descriptors(int chan)
{
    if (chan == PX_SUCCESSOR_FD)
        fcntl(chan, F_SETFD, 0);
    else if (dup2(chan, PX_SUCCESSOR_FD) == -1)
        _exit(126);
    if (syscall(SYS_close_range, PX_SUCCESSOR_FD + 1, ~0U, 0) == -1) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = PX_SUCCESSOR_FD + 1; fd < max; fd++)
            close((int)fd);
    }
}

/* The successor's end: what became of its process, as text into buf.
 * One that said it failed, or closed the channel, is on its way out: it
 * gets REAP_GRACE_MS to exit before it is killed. */
static void reap(char *buf, size_t size)
{
    int st;
    pid_t r = waitpid(S.pid, &st, WNOHANG);

    for (int ms = 0; r == 0 && ms < REAP_GRACE_MS; ms += 10) {
        usleep(10000);
        r = waitpid(S.pid, &st, WNOHANG);
    }
    if (r == 0) {
        kill(S.pid, SIGKILL);
        r = waitpid(S.pid, &st, 0);
        snprintf(buf, size, "killed");
        return;
    }
    if (r == -1)
        snprintf(buf, size, "gone (%s)", strerror(errno));
    else if (WIFEXITED(st))
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(st));
    else
        snprintf(buf, size, "ended by signal %d", WTERMSIG(st));
}

/* The attempt is over: tell the caller, forget it. */
static void finish(const char *version, const char *error)
{
    px_successor_done done = S.done;
    void *arg = S.arg;
    long pid = S.pid;
    char why[600], fate[64];

    if (error != NULL) {
        reap(fate, sizeof(fate));
        snprintf(why, sizeof(why), "the new egressd (pid %ld) %s: %s", pid, fate, error);
    }
    event_free(S.ev);
    event_free(S.timer);
    close(S.chan);
    json_decref(S.state);
    S = (struct attempt){.chan = -1};
    done(arg, pid, version, error ? why : NULL);
}

/* A message from the successor: its hello (answered with the sockets),
 * its ready, or its failure. */
static void on_message(evutil_socket_t fd, short what, void *arg)
{
    char err[512];
    int fds[1];
    size_t n_fds;
    (void)what, (void)arg;

    json_t *msg = px_handover_recv_msg(fd, fds, 0, &n_fds);
    const char *op = json_string_value(json_object_get(msg, "op"));
    if (msg == NULL) {
        finish(NULL, errno ? strerror(errno) : "it ended before it served");
    } else if (op != NULL && strcmp(op, "hello") == 0 && !S.greeted) {
        S.greeted = true;
        if (px_handover_send(fd, S.state, err, sizeof(err)) == -1)
            finish(NULL, err);
    } else if (op != NULL && strcmp(op, "ready") == 0 && S.greeted) {
        finish(json_string_value(json_object_get(msg, "version")), NULL);
    } else if (op != NULL && strcmp(op, "failed") == 0) {
        const char *e = json_string_value(json_object_get(msg, "error"));
        finish(NULL, e ? e : "it failed and did not say why");
    } else {
        finish(NULL, "it sent a message out of turn");
    }
    json_decref(msg);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    char why[80];
    (void)fd, (void)what, (void)arg;

    snprintf(why, sizeof(why), "it did not serve within %d s", PX_SUCCESSOR_START_S);
    finish(NULL, why);
}

int px_successor_start(struct event_base *base, char *const argv[], json_t *state,
                       px_successor_done done, void *arg, char *err, size_t errlen)
{
    int pair[2];
    struct timeval tv = {PX_SUCCESSOR_START_S, 0};

    if (S.busy) {
        snprintf(err, errlen, "an upgrade is already under way (pid %ld)", (long)S.pid);
        return -1;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == -1) {
        snprintf(err, errlen, "socketpair: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == -1) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(pair[0]);
        close(pair[1]);
        return -1;
    }
    if (pid == 0) {
        child_descriptors(pair[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pair[1]);
    /* (blocking: a message is read only when one is there, and the
     * successor reads what is sent to it at once) */
    S = (struct attempt){.busy = true,
                         .pid = pid,
                         .chan = pair[0],
                         .state = json_incref(state),
                         .done = done,
                         .arg = arg};
    S.ev = event_new(base, pair[0], EV_READ | EV_PERSIST, on_message, NULL);
    S.timer = evtimer_new(base, on_timeout, NULL);
    event_add(S.ev, NULL);
    evtimer_add(S.timer, &tv);
    px_log_info("upgrade: started %s as pid %ld", argv[0], (long)pid);
    return 0;
}
