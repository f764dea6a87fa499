/* git.c - running the host's git hardened (see git.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "git.h"

#define GIT_PATH  "/usr/local/bin:/usr/bin:/bin"
#define ERR_KEEP  1500
#define MAX_ARGS  64
#define HARDENING 16

static const char *const hardening[HARDENING] = {"-c", "core.hooksPath=/dev/null",
                                                 "-c", "core.fsmonitor=false",
                                                 "-c", "protocol.allow=never",
                                                 "-c", "transfer.fsckObjects=true",
                                                 "-c", "gc.auto=0",
                                                 "-c", "maintenance.auto=false",
                                                 "-c", "core.pager=cat",
                                                 "-c", "core.untrackedCache=false"};

/* The environment git gets: nothing of ours but HOME (for the user's
 * identity in a merge commit; the -c settings override the rest). */
static void build_env(char **env, char *home, size_t homelen)
{
    const char *h = getenv("HOME");
    int n = 0;

    snprintf(home, homelen, "HOME=%s", h && h[0] == '/' ? h : "/nonexistent");
    env[n++] = (char *)"PATH=" GIT_PATH;
    env[n++] = home;
    env[n++] = (char *)"LC_ALL=C";
    env[n++] = (char *)"GIT_CONFIG_NOSYSTEM=1";
    env[n++] = (char *)"GIT_NO_REPLACE_OBJECTS=1";
    env[n++] = (char *)"GIT_TERMINAL_PROMPT=0";
    env[n++] = (char *)"GIT_ATTR_NOSYSTEM=1";
    env[n] = NULL;
}

static int build_argv(const char **argv, const char *dir, const char *const *args)
{
    int n = 0;

    argv[n++] = "git";
    for (int i = 0; i < HARDENING; i++)
        argv[n++] = hardening[i];
    if (dir) {
        argv[n++] = "-C";
        argv[n++] = dir;
    }
    for (int i = 0; args[i]; i++) {
        if (n == MAX_ARGS + HARDENING + 3)
            return -1;
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return 0;
}

/* The subcommand: the first argument that is not a -c pair. */
static const char *subcommand(const char *const *args)
{
    int i = 0;

    while (args[i] && strcmp(args[i], "-c") == 0 && args[i + 1])
        i += 2;
    return args[i] ? args[i] : "?";
}

static void child(int out_fd, int err_fd, const char **argv, const struct sbx_git_io *io)
{
    char home[4200], *env[8];
    int null = open(io && io->stdin_path ? io->stdin_path : "/dev/null", O_RDONLY);

    build_env(env, home, sizeof home);
    if (io && io->mem_max > 0) {
        struct rlimit r = {(rlim_t)io->mem_max, (rlim_t)io->mem_max};
        setrlimit(RLIMIT_AS, &r);
    }
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(127);
    signal(SIGPIPE, SIG_DFL);
    execve("/usr/bin/git", (char *const *)argv, env);
    execve("/usr/local/bin/git", (char *const *)argv, env);
    execve("/bin/git", (char *const *)argv, env);
    _exit(127);
}

/* Append what fd has to buf (grows to cap+1 at most; *over set past cap). */
static int drain(int fd, char **buf, size_t *len, size_t *cap, size_t max, int *over)
{
    char tmp[65536];
    ssize_t got = read(fd, tmp, sizeof tmp);

    if (got <= 0)
        return got < 0 && errno == EINTR ? 1 : 0;
    if (*len + (size_t)got > max) {
        *over = 1;
        got = (ssize_t)(max - *len);
    }
    if (*len + (size_t)got + 1 > *cap) {
        while (*len + (size_t)got + 1 > *cap)
            *cap *= 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            abort();
    }
    memcpy(*buf + *len, tmp, (size_t)got);
    *len += (size_t)got;
    (*buf)[*len] = '\0';
    return 1;
}

struct streams {
    char *out, *err;
    size_t outlen, errlen, outcap, errcap;
    int over, err_over;
};

static void collect(int out_fd, int err_fd, struct streams *st, size_t out_max)
{
    struct pollfd p[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};

    while (p[0].fd >= 0 || p[1].fd >= 0) {
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents && !drain(p[0].fd, &st->out, &st->outlen, &st->outcap, out_max, &st->over))
            p[0].fd = -1;
        /* stderr: only its end matters; keep at most 64 KiB */
        if (p[1].revents &&
            !drain(p[1].fd, &st->err, &st->errlen, &st->errcap, 65536, &st->err_over))
            p[1].fd = -1;
        if (st->over)
            break;
    }
}

static void describe(const char *sub, const struct streams *st, int status, char *err,
                     size_t errlen)
{
    size_t n = st->errlen;
    const char *tail = st->err;

    while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == ' '))
        n--;
    if (n > ERR_KEEP) {
        tail += n - ERR_KEEP;
        n = ERR_KEEP;
    }
    if (st->over)
        snprintf(err, errlen, "git %s: its output is larger than expected", sub);
    else if (n)
        snprintf(err, errlen, "git %s: %.*s", sub, (int)n, tail);
    else
        snprintf(err, errlen, "git %s: exit status %d", sub, status);
}

int sbx_git_run(const char *dir, const char *const *args, const struct sbx_git_io *io, char **out,
                size_t *outlen, size_t out_max, char *err, size_t errlen)
{
    const char *argv[MAX_ARGS + HARDENING + 4];
    struct streams st = {0};
    int po[2], pe[2], wst, rc;
    pid_t pid;

    if (out)
        *out = NULL;
    if (build_argv(argv, dir, args)) {
        snprintf(err, errlen, "git %s: too many arguments", subcommand(args));
        return -1;
    }
    if (pipe2(po, O_CLOEXEC) || pipe2(pe, O_CLOEXEC)) {
        snprintf(err, errlen, "git: pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid == 0)
        child(po[1], pe[1], argv, io);
    close(po[1]);
    close(pe[1]);
    st.outcap = st.errcap = 4096;
    st.out = calloc(1, st.outcap);
    st.err = calloc(1, st.errcap);
    if (!st.out || !st.err)
        abort();
    if (pid > 0)
        collect(po[0], pe[0], &st, out_max);
    close(po[0]);
    close(pe[0]);
    if (pid < 0) {
        snprintf(err, errlen, "git: fork: %s", strerror(errno));
        rc = -1;
    } else {
        if (st.over)
            kill(pid, SIGKILL);
        while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
            ;
        rc = st.over || !WIFEXITED(wst) ? -1 : WEXITSTATUS(wst);
        if (rc == 127 && st.errlen == 0)
            snprintf(err, errlen, "git: not found in /usr/bin, /usr/local/bin or /bin");
        else if (rc != 0)
            describe(subcommand(args), &st, rc, err, errlen);
    }
    free(st.err);
    if (out && rc >= 0) {
        *out = st.out;
        if (outlen)
            *outlen = st.outlen;
    } else {
        free(st.out);
    }
    return rc;
}

int sbx_git(const char *dir, const char *const *args, char **out, size_t out_max, char *err,
            size_t errlen)
{
    int rc = sbx_git_run(dir, args, NULL, out, NULL, out_max, err, errlen);

    if (rc != 0 && out) {
        free(*out);
        *out = NULL;
    }
    return rc == 0 ? 0 : -1;
}
