/*
 * test_secrets.c - the secrets store (proxy/secrets.c), placeholders
 * (proxy/placeholder.c) and the appliance key (proxy/appliance.c).
 *
 * The store: a directory of good files loaded (names sorted, one trailing
 * newline stripped, skipped names warned about); every refusal with its
 * exact message and never the value in it; references; where the values
 * live (a mapping that /proc/self/smaps marks dd: no core dump, wf: wiped
 * in a forked child, and not writable), that a child forked sees zeros,
 * that the last unref wipes the mapping before it is unmapped (munmap is
 * interposed below) and that it is gone after.  Placeholders: known-answer
 * vectors computed with `openssl dgst -sha256 -mac HMAC`, determinism,
 * each input changing the output, bounds, the shape check.  The appliance
 * key: made 0600 at the first load, the same one after, a looser / foreign
 * / linked / encrypted / wrong-curve one refused, and the placeholder key
 * of a fixed key against `openssl kdf ... HKDF`.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "appliance.h"
#include "log.h"
#include "placeholder.h"
#include "secrets.h"
#include "tap.h"

static char top[256];
static char err[16384];

/* ------------------------------------------------------------ munmap */

/* The store's munmap resolves to this one (the test links the store
 * statically): it notes whether the region holding `watch` was all zeros
 * when it was unmapped, then unmaps it. */
static const char *watch;
static int watch_zero = -1; /* -1: not unmapped yet */

int munmap(void *addr, size_t len)
{
    const char *a = addr;
    if (watch != NULL && watch >= a && watch < a + len) {
        watch_zero = 1;
        for (size_t i = 0; i < len; i++)
            if (a[i] != 0)
                watch_zero = 0;
    }
    return (int)syscall(SYS_munmap, addr, len);
}

/* ------------------------------------------------------------ helpers */

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* A new directory TOP/name of mode `mode`; its path. */
static const char *mkdir_at(const char *name, mode_t mode)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", top, name);
    if (mkdir(path, 0700) == -1 || chmod(path, mode) == -1)
        die(path);
    return path;
}

static void write_at(const char *dir, const char *name, const void *data, size_t len, mode_t mode)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd == -1 || write(fd, data, len) != (ssize_t)len || fchmod(fd, mode) == -1 ||
        close(fd) == -1)
        die(path);
}

static void write_str(const char *dir, const char *name, const char *text, mode_t mode)
{
    write_at(dir, name, text, strlen(text), mode);
}

static bool err_is(const char *want)
{
    if (strcmp(err, want) == 0)
        return true;
    diag("error was: %s", err);
    diag("wanted:    %s", want);
    return false;
}

static bool err_has(const char *want)
{
    if (strstr(err, want) != NULL)
        return true;
    diag("error was: %s", err);
    diag("wanted:    %s", want);
    return false;
}

/* Diagnostics (stderr) captured between capture_start() and capture_end(). */
static int saved_stderr = -1;
static char capture_path[512];

static void capture_start(void)
{
    snprintf(capture_path, sizeof(capture_path), "%s/stderr", top);
    int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    fflush(stderr);
    saved_stderr = dup(2);
    if (fd == -1 || saved_stderr == -1 || dup2(fd, 2) == -1)
        die("capture");
    close(fd);
}

static const char *capture_end(void)
{
    static char buf[8192];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    FILE *f = fopen(capture_path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* The VmFlags of the mapping that holds p ("" when none does). */
static const char *vm_flags(const void *p)
{
    static char flags[512];
    char line[512];
    bool in = false;
    FILE *f = fopen("/proc/self/smaps", "r");

    flags[0] = '\0';
    if (f == NULL)
        return flags;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, sizeof(flags), "%s", line + 8);
            break;
        }
    }
    fclose(f);
    return flags;
}

static bool has_flag(const char *flags, const char *flag)
{
    char want[8];
    snprintf(want, sizeof(want), " %s", flag);
    for (const char *s = flags; (s = strstr(s, want)) != NULL; s++)
        if (s[3] == ' ' || s[3] == '\n' || s[3] == '\0')
            return true;
    return false;
}

/* Load dir; err filled.  The store, or NULL. */
static struct px_secrets *load(const char *dir)
{
    struct px_secrets *s = (struct px_secrets *)1;
    err[0] = '\0';
    if (px_secrets_load(dir, &s, err, sizeof(err)) == -1) {
        if (s != NULL)
            diag("a failed load left *out set");
        return NULL;
    }
    return s;
}

/* ------------------------------------------------------------ the store */

static struct px_secrets *test_good(const char **anthropic)
{
    char dir[512], big[PX_SECRET_VALUE_MAX + 1];
    const char *p;
    size_t len;

    snprintf(dir, sizeof(dir), "%s", mkdir_at("good", 0700));
    write_str(dir, "anthropic", "sk-ant-VALUE1\n", 0600);
    write_str(dir, "gh-token_2", "ghp-VALUE2\r\n", 0400);
    write_str(dir, "plain", "VALUE3", 0600);
    memset(big, 'b', PX_SECRET_VALUE_MAX);
    big[PX_SECRET_VALUE_MAX] = '\n';
    write_at(dir, "big", big, sizeof(big), 0600);
    write_str(dir, "x~", "editor", 0600);
    write_str(dir, ".x.swp", "editor", 0600);
    write_str(dir, "Upper", "x", 0644); /* skipped before its mode counts */
    write_str(dir, "has.dot", "x", 0600);
    mkdir_at("good/sub", 0700);

    capture_start();
    struct px_secrets *s = load(dir);
    const char *log = capture_end();
    ok(s != NULL && err[0] == '\0', "a directory of good files loads");
    if (s == NULL) {
        diag("error: %s", err);
        exit(1);
    }
    ok(px_secrets_count(s) == 4, "four secrets (%zu)", px_secrets_count(s));
    ok(strcmp(px_secrets_name(s, 0), "anthropic") == 0 &&
           strcmp(px_secrets_name(s, 1), "big") == 0 &&
           strcmp(px_secrets_name(s, 2), "gh-token_2") == 0 &&
           strcmp(px_secrets_name(s, 3), "plain") == 0 && px_secrets_name(s, 4) == NULL,
       "named by their files, sorted; NULL past the end");
    ok(px_secrets_get(s, "anthropic", &p, &len) && len == 13 &&
           memcmp(p, "sk-ant-VALUE1", 13) == 0 && p[len] == '\0',
       "a value without its trailing \\n, NUL-terminated");
    *anthropic = p;
    ok(px_secrets_get(s, "gh-token_2", &p, &len) && len == 10 && strcmp(p, "ghp-VALUE2") == 0,
       "a trailing \\r\\n is stripped");
    ok(px_secrets_get(s, "plain", &p, &len) && len == 6 && strcmp(p, "VALUE3") == 0,
       "a value without a newline is whole");
    ok(px_secrets_get(s, "big", &p, &len) && len == PX_SECRET_VALUE_MAX && p[0] == 'b' &&
           p[len - 1] == 'b' && p[len] == '\0',
       "8192 bytes is the most a value may have");
    ok(!px_secrets_get(s, "nope", &p, &len) && !px_secrets_get(s, "x~", &p, &len) &&
           !px_secrets_get(s, "sub", &p, &len) && !px_secrets_get(s, "Upper", &p, &len),
       "no other name has a value");
    ok(strstr(log, "good/x~: skipped: a secret's file name is [a-z0-9][a-z0-9_-]{0,62}") &&
           strstr(log, "good/.x.swp: skipped") && strstr(log, "good/Upper: skipped") &&
           strstr(log, "good/has.dot: skipped"),
       "skipped names are warned about");
    ok(strstr(log, "good/sub: not a regular file; skipped") != NULL,
       "so is a subdirectory with a secret's name");
    ok(strstr(log, "VALUE") == NULL && strstr(log, "editor") == NULL, "no warning shows a value");
    if (strstr(log, "skipped") == NULL)
        diag("log was: %s", log);
    return s;
}

/* Where the values are: a mapping of their own, out of core dumps, wiped
 * in a child, read-only. */
static void test_memory(struct px_secrets *s, const char *p)
{
    const char *flags = vm_flags(p);
    ok(has_flag(flags, "dd"), "the values' mapping is MADV_DONTDUMP (VmFlags dd)");
    ok(has_flag(flags, "wf"), "and MADV_WIPEONFORK (wf)");
    ok(has_flag(flags, "rd") && !has_flag(flags, "wr"), "and read-only once loaded");
    if (!has_flag(flags, "dd") || !has_flag(flags, "wf"))
        diag("VmFlags:%s", flags);
    ok(!has_flag(vm_flags(s), "dd"), "the store's own struct is elsewhere (the heap)");
    diag("mlock'ed: %s", has_flag(flags, "lo") ? "yes" : "no (mlock refused: best-effort)");

    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (size_t i = 0; i < 13; i++)
            if (p[i] != 0)
                _exit(1);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a forked child sees zeros where the values are");
}

static void test_refs(struct px_secrets *s, const char *p)
{
    const char *q;
    size_t len;

    ok(px_secrets_ref(s) == s, "ref returns the store");
    px_secrets_unref(s);
    ok(has_flag(vm_flags(p), "dd"), "after ref + unref the values are still mapped");
    ok(px_secrets_get(s, "anthropic", &q, &len) && q == p && strcmp(q, "sk-ant-VALUE1") == 0,
       "after ref + unref the value is still there");
    watch = p;
    px_secrets_unref(s);
    ok(watch_zero == 1, "the last unref wipes the mapping before it unmaps it");
    ok(vm_flags(p)[0] == '\0' || !has_flag(vm_flags(p), "dd"), "and the mapping is gone");
    watch = NULL;
    px_secrets_unref(NULL);
    ok(1, "unref(NULL) is a no-op");
}

static void test_empty(void)
{
    const char *p;
    size_t len;
    struct px_secrets *s = load(NULL);

    ok(s != NULL && px_secrets_count(s) == 0 && !px_secrets_get(s, "a", &p, &len) &&
           px_secrets_name(s, 0) == NULL,
       "no secret-dir (NULL): an empty store");
    px_secrets_unref(s);
    s = load("");
    ok(s != NULL && px_secrets_count(s) == 0, "no secret-dir (\"\"): an empty store");
    px_secrets_unref(s);
    s = load(mkdir_at("none", 0700));
    ok(s != NULL && px_secrets_count(s) == 0, "an empty directory: an empty store");
    px_secrets_unref(s);
    ok(px_secrets_count(NULL) == 0 && !px_secrets_get(NULL, "a", &p, &len),
       "a NULL store has nothing");
}

struct refusal {
    const char *name;    /* the file */
    const char *content; /* its bytes (len, or strlen) */
    size_t len;
    mode_t mode;
    const char *want; /* the message after "DIR/" */
};

static void test_refusals(void)
{
    static const struct refusal r[] = {
        {"anthropic", "SECRET", 0, 0644, "anthropic: mode 0644 is looser than 0600; chmod 600 it"},
        {"g", "SECRET", 0, 0640, "g: mode 0640 is looser than 0600; chmod 600 it"},
        {"o", "SECRET", 0, 0604, "o: mode 0604 is looser than 0600; chmod 600 it"},
        {"w", "SECRET", 0, 0602, "w: mode 0602 is looser than 0600; chmod 600 it"},
        {"e", "", 0, 0600, "e: empty; a secret needs a value"},
        {"nl", "\n", 0, 0600, "nl: empty; a secret needs a value"},
        {"crlf", "\r\n", 0, 0600, "crlf: empty; a secret needs a value"},
        {"c1", "SE\001CRET", 0, 0600,
         "c1: a control character at byte 2 (only a trailing newline may be there: the value goes "
         "in one HTTP header line)"},
        {"c2", "SECRET\nSECRET\n", 0, 0600, "c2: a control character at byte 6"},
        {"c3", "SECRET\n\n", 0, 0600, "c3: a control character at byte 6"},
        {"c4", "SECRET\r", 0, 0600, "c4: a control character at byte 6"},
        {"c5", "SEC\177RET", 0, 0600, "c5: a control character at byte 3"},
        {"c6", "SECRET\0SECRET", 13, 0600, "c6: a control character at byte 6"},
        {"c7", "\tSECRET", 0, 0600, "c7: a control character at byte 0"},
    };
    char dir[600];

    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        char name[32], want[800];
        snprintf(name, sizeof(name), "bad%zu", i);
        snprintf(dir, sizeof(dir), "%s", mkdir_at(name, 0700));
        write_str(dir, "fine", "SECRET", 0600);
        write_at(dir, r[i].name, r[i].content, r[i].len ? r[i].len : strlen(r[i].content),
                 r[i].mode);
        snprintf(want, sizeof(want), "%s/%s", dir, r[i].want);
        /* The control-character lines of the table are cut short. */
        bool cut = strstr(r[i].want, "byte") != NULL && strstr(r[i].want, "header") == NULL;
        ok(load(dir) == NULL && (cut ? err_has(want) && strchr(err, '\n') == NULL : err_is(want)),
           "refused: %s", r[i].want);
        ok(strstr(err, "SECRET") == NULL && strstr(err, "CRET") == NULL,
           "  and the message shows no value");
    }

    /* Too long: a file that cannot be one (9000 bytes), and one just over
     * once its newline is stripped. */
    char big[9000];
    memset(big, 'S', sizeof(big));
    snprintf(dir, sizeof(dir), "%s", mkdir_at("long", 0700));
    write_at(dir, "huge", big, sizeof(big), 0600);
    ok(load(dir) == NULL &&
           err_has("/long/huge: 9000 bytes, more than the 8192 a secret may have (it goes in an "
                   "HTTP header)"),
       "a 9000-byte file is refused");
    write_at(dir, "huge", big, PX_SECRET_VALUE_MAX + 1, 0600);
    ok(load(dir) == NULL && err_has("/long/huge: 8193 bytes, more than the 8192"),
       "8193 bytes is one too many");
    big[PX_SECRET_VALUE_MAX + 1] = '\r', big[PX_SECRET_VALUE_MAX + 2] = '\n';
    write_at(dir, "huge", big, PX_SECRET_VALUE_MAX + 3, 0600);
    ok(load(dir) == NULL && err_has("/long/huge: 8195 bytes, more than the 8192"),
       "and so is 8193 bytes and \\r\\n");
    ok(strstr(err, "SSSS") == NULL, "  and no message shows the value");

    /* A symbolic link, even to a good file. */
    snprintf(dir, sizeof(dir), "%s", mkdir_at("link", 0700));
    write_str(dir, "target", "SECRET", 0600);
    char path[700];
    snprintf(path, sizeof(path), "%s/link", dir);
    if (symlink("target", path) == -1)
        die("symlink");
    char want[800];
    snprintf(want, sizeof(want),
             "%s/link: a symbolic link; put the secret in a regular file of its own", dir);
    ok(load(dir) == NULL && err_is(want), "a symbolic link is refused");
    snprintf(path, sizeof(path), "%s/dangling", dir);
    if (symlink("/nonexistent", path) == -1)
        die("symlink");
    ok(load(dir) == NULL && err_has("/link/dangling: a symbolic link"), "so is a dangling one");

    /* The directory itself. */
    snprintf(dir, sizeof(dir), "%s", mkdir_at("open", 0777));
    write_str(dir, "fine", "SECRET", 0600);
    snprintf(want, sizeof(want),
             "%s: secret-dir: mode 0777 lets group or others write in it; chmod go-w it", dir);
    ok(load(dir) == NULL && err_is(want), "a directory others may write in is refused");
    chmod(dir, 0720);
    ok(load(dir) == NULL && err_has("mode 0720 lets group or others write in it"),
       "so is one the group may write in");
    chmod(dir, 0755);
    struct px_secrets *s = load(dir);
    ok(s != NULL && px_secrets_count(s) == 1, "0755 is fine (others may list, not write)");
    px_secrets_unref(s);
    snprintf(path, sizeof(path), "%s/missing", top);
    snprintf(want, sizeof(want), "%s: secret-dir: cannot open: No such file or directory", path);
    ok(load(path) == NULL && err_is(want), "a directory that is not there");
    snprintf(path, sizeof(path), "%s/fine", dir);
    snprintf(want, sizeof(want), "%s: secret-dir: cannot open: Not a directory", path);
    ok(load(path) == NULL && err_is(want), "a file where the directory should be");

    /* The owner: only root can make a file of another uid. */
    snprintf(dir, sizeof(dir), "%s", mkdir_at("owner", 0700));
    write_str(dir, "theirs", "SECRET", 0600);
    snprintf(path, sizeof(path), "%s/theirs", dir);
    if (geteuid() == 0 && chown(path, 1, 1) == 0) {
        snprintf(want, sizeof(want), "%s: owned by uid 1, not by egressd's uid 0; chown it", path);
        ok(load(dir) == NULL && err_is(want), "a file of another uid is refused");
    } else {
        ok(1, "# SKIP not root: cannot make a file of another uid");
    }

    /* Every error in one load, one per line, in name order. */
    snprintf(dir, sizeof(dir), "%s", mkdir_at("many", 0700));
    write_str(dir, "a", "SECRET", 0644);
    write_str(dir, "b", "", 0600);
    write_str(dir, "c", "SECRET", 0600);
    write_str(dir, "d", "SE\001CRET", 0600);
    char want3[2400];
    snprintf(want3, sizeof(want3),
             "%s/a: mode 0644 is looser than 0600; chmod 600 it\n"
             "%s/b: empty; a secret needs a value\n"
             "%s/d: a control character at byte 2 (only a trailing newline may be there: the "
             "value goes in one HTTP header line)",
             dir, dir, dir);
    ok(load(dir) == NULL && err_is(want3), "every error at once, one per line");

    snprintf(dir, sizeof(dir), "%s", mkdir_at("crowd", 0700));
    for (int i = 0; i <= PX_SECRETS_MAX; i++) {
        char n[16];
        snprintf(n, sizeof(n), "s%03d", i);
        write_str(dir, n, "v", 0600);
    }
    snprintf(want, sizeof(want), "%s: secret-dir: more than 256 secrets", dir);
    ok(load(dir) == NULL && err_is(want), "257 secrets are too many");
    snprintf(path, sizeof(path), "%s/s000", dir);
    unlink(path);
    s = load(dir);
    ok(s != NULL && px_secrets_count(s) == PX_SECRETS_MAX, "256 are fine");
    px_secrets_unref(s);
}

static void test_names(void)
{
    char n63[64];
    memset(n63, 'a', 63);
    n63[63] = '\0';
    ok(px_secret_name_ok("a", 1) && px_secret_name_ok("0", 1) && px_secret_name_ok("a-b_c9", 6),
       "secret names: [a-z0-9][a-z0-9_-]*");
    ok(px_secret_name_ok(n63, 63) && !px_secret_name_ok("aaaa", 0), "1..63 bytes");
    char n64[65];
    memset(n64, 'a', 64);
    n64[64] = '\0';
    ok(!px_secret_name_ok(n64, 64), "64 bytes is too long");
    ok(!px_secret_name_ok("-a", 2) && !px_secret_name_ok("_a", 2) && !px_secret_name_ok("A", 1) &&
           !px_secret_name_ok("a.b", 3) && !px_secret_name_ok("a~", 2) &&
           !px_secret_name_ok("a b", 3) && !px_secret_name_ok("a\0b", 3),
       "not a leading '-' or '_', upper case, '.', '~', a space or a NUL");
    ok(px_secret_name_ok("ab~", 2), "only the n bytes given are looked at");
}

/* ------------------------------------------------------------ placeholders */

static const uint8_t K[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                              16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};

static void test_placeholder(void)
{
    char a[PX_PLACEHOLDER_MAX], b[PX_PLACEHOLDER_MAX];
    const char *name;
    size_t n, name_len;

    /* printf 'placeholder\x00101\x00anthropic' |
     *   openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f */
    n = px_placeholder(K, "101", "anthropic", a, sizeof(a));
    ok(n == strlen(a) && strcmp(a, "egressd-ph-anthropic-e11aa35f9fdf73f7fb2d609bbc1dd6ec") == 0,
       "known answer: sandbox 101, secret anthropic (%s)", a);
    n = px_placeholder(K, "sbx-7.a_b", "gh-token_2", a, sizeof(a));
    ok(n == 54 && strcmp(a, "egressd-ph-gh-token_2-2f3c730011bc4ee49367551a000d69c0") == 0,
       "known answer: sandbox sbx-7.a_b, secret gh-token_2 (%s)", a);
    px_placeholder(K, "101", "anthropic", a, sizeof(a));
    px_placeholder(K, "101", "anthropic", b, sizeof(b));
    ok(strcmp(a, b) == 0, "the same inputs, the same placeholder");
    px_placeholder(K, "102", "anthropic", b, sizeof(b));
    ok(strcmp(a + 21, b + 21) != 0, "another sandbox, other hex");
    px_placeholder(K, "101", "anthropid", b, sizeof(b));
    ok(strcmp(a + 21, b + 21) != 0, "another secret, other hex");
    uint8_t k2[32];
    memcpy(k2, K, 32);
    k2[31] ^= 1;
    px_placeholder(k2, "101", "anthropic", b, sizeof(b));
    ok(strcmp(a, b) != 0, "another key, another placeholder");
    /* The NUL between id and name keeps ("1", "01x") from ("10", "1x"). */
    px_placeholder(K, "1", "01x", a, sizeof(a));
    px_placeholder(K, "10", "1x", b, sizeof(b));
    ok(strcmp(a + strlen(a) - 32, b + strlen(b) - 32) != 0, "id and name do not run together");

    n = px_placeholder(K, "101", "anthropic", a, 53);
    ok(n == 0 && a[0] == '\0', "a buffer one byte short: 0 and \"\"");
    n = px_placeholder(K, "101", "anthropic", a, 54);
    ok(n == 53, "exactly enough room");
    ok(px_placeholder(K, "101", "Anthropic", a, sizeof(a)) == 0 && a[0] == '\0',
       "not a secret's name: 0");
    ok(px_placeholder(K, "", "anthropic", a, sizeof(a)) == 0, "an empty id: 0");
    char id64[65], n63[64];
    memset(id64, '1', 64);
    id64[64] = '\0';
    ok(px_placeholder(K, id64, "anthropic", a, sizeof(a)) == 0, "a 64-byte id: 0");
    id64[63] = '\0';
    memset(n63, 'z', 63);
    n63[63] = '\0';
    n = px_placeholder(K, id64, n63, a, sizeof(a));
    ok(n == PX_PLACEHOLDER_MAX - 1 && strlen(a) == n,
       "the longest id and name fit PX_PLACEHOLDER_MAX");
    ok(px_placeholder(K, "101", "anthropic", a, 0) == 0, "cap 0: 0, nothing written");

    /* The shape. */
    px_placeholder(K, "101", "gh-token_2", a, sizeof(a));
    ok(px_placeholder_shape(a, strlen(a), &name, &name_len) && name == a + 11 && name_len == 10,
       "a placeholder has the shape, and its name is a view into it");
    ok(px_placeholder_shape(a, strlen(a), NULL, NULL), "name may be NULL");
    const char *p = "egressd-ph-a-b-0123456789abcdef0123456789abcdef";
    ok(px_placeholder_shape(p, strlen(p), &name, &name_len) && name_len == 3 &&
           memcmp(name, "a-b", 3) == 0,
       "a name with '-': the hex is the last 32");
    static const char *const not [] = {
        "egressd-ph-a-0123456789abcdef0123456789abcde",         /* 31 hex */
        "egressd-ph-a-0123456789abcdef0123456789abcdef0",       /* 33 hex: no '-' 33 from the end */
        "egressd-ph-a-0123456789ABCDEF0123456789abcdef",        /* upper case hex */
        "egressd-ph-a-0123456789abcdeg0123456789abcdef",        /* not hex */
        "egressd-ph--0123456789abcdef0123456789abcdef",         /* no name */
        "egressd-ph-A-0123456789abcdef0123456789abcdef",        /* not a name */
        "egressd-ph-_a-0123456789abcdef0123456789abcdef",       /* not a name */
        "egressd-pH-a-0123456789abcdef0123456789abcdef",        /* not the prefix */
        "egressd-ph-a_0123456789abcdef0123456789abcdef",        /* no '-' before the hex */
        "Bearer egressd-ph-a-0123456789abcdef0123456789abcdef", /* more than one */
        "egressd-ph-a-0123456789abcdef0123456789abcdef ",       "egressd-ph-", "",
    };
    bool none = true;
    for (size_t i = 0; i < sizeof(not ) / sizeof(not [0]); i++)
        if (px_placeholder_shape(not [i], strlen(not [i]), NULL, NULL)) {
            diag("has the shape: '%s'", not [i]);
            none = false;
        }
    ok(none, "%zu strings that are not placeholders do not have the shape",
       sizeof(not ) / sizeof(not [0]));
}

/* ------------------------------------------------------------ the appliance key */

/* A fixed P-256 key, its private scalar
 * 2fc284af25be50c513e6cfacf2e054f235e760c5c8a8fad3232683b302433192 and
 *   openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt hexkey:2fc2...3192 \
 *     -kdfopt info:"egressd placeholder key" HKDF
 * = 8B:0E:F7:D6:C7:3E:69:1C:FB:EE:5C:0B:0B:5C:A2:01:1A:42:1F:10:B2:D9:34:89:44:15:05:85:38:EF:E6:A3
 */
static const char kat_pem[] = "-----BEGIN PRIVATE KEY-----\n"
                              "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgL8KEryW+UMUT5s+s\n"
                              "8uBU8jXnYMXIqPrTIyaDswJDMZKhRANCAATnakWl5T6n+4TxO6yBnEMXttKM4LH6\n"
                              "gtqgF/mQ9snticneOkcLdyKtxjyLXTL2WK2Amgq/G0TFMuKiZlZQ/Z+l\n"
                              "-----END PRIVATE KEY-----\n";
static const uint8_t kat_k[32] = {0x8b, 0x0e, 0xf7, 0xd6, 0xc7, 0x3e, 0x69, 0x1c, 0xfb, 0xee, 0x5c,
                                  0x0b, 0x0b, 0x5c, 0xa2, 0x01, 0x1a, 0x42, 0x1f, 0x10, 0xb2, 0xd9,
                                  0x34, 0x89, 0x44, 0x15, 0x05, 0x85, 0x38, 0xef, 0xe6, 0xa3};

static EVP_PKEY *key_load(const char *dir)
{
    err[0] = '\0';
    return px_appliance_key_load(dir, err, sizeof(err));
}

static int count_entries(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
    return system(cmd) == 0 ? 1 : 0;
}

/* Write key k to dir/appliance.key, PEM, encrypted with a passphrase when
 * `pass` is not NULL. */
static void key_write(const char *dir, EVP_PKEY *k, const char *pass)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/appliance.key", dir);
    BIO *bio = BIO_new_file(path, "w");
    if (bio == NULL ||
        PEM_write_bio_PrivateKey(bio, k, pass ? EVP_aes_256_cbc() : NULL, (unsigned char *)pass,
                                 pass ? (int)strlen(pass) : 0, NULL, NULL) != 1)
        die("PEM_write_bio_PrivateKey");
    BIO_free(bio);
    chmod(path, 0600);
}

/* A login file (a CLI's credentials JSON) is a secret of its own kind:
 * line breaks allowed, its shape read at load, a broken one refused with
 * the file and the field named and no value shown. */
static void test_logins(void)
{
    const char *d = mkdir_at("logins", 0700);
    struct px_secrets *s = NULL;
    struct px_file_id id;
    const char *p;
    size_t len;

    write_str(d, "claude",
              "{\n  \"claudeAiOauth\": {\n    \"accessToken\": \"sk-ant-oat01-REAL-a\",\n"
              "    \"refreshToken\": \"sk-ant-ort01-REAL-b\",\n    \"expiresAt\": 1900000000000\n"
              "  }\n}\n",
              0600);
    write_str(d, "plain", "sk-REAL-plain\n", 0600);
    ok(px_secrets_load(d, &s, err, sizeof(err)) == 0, "a login file with line breaks loads");
    ok(s != NULL && px_secrets_login(s, "claude", &id) && id.size > 0 &&
           strcmp(px_secrets_login_provider(s, "claude"), "anthropic") == 0,
       "it is a login, of Anthropic, with its file's identity");
    ok(s != NULL && !px_secrets_login(s, "plain", NULL) &&
           px_secrets_login_provider(s, "plain") == NULL && px_secrets_get(s, "plain", &p, &len) &&
           len == 13,
       "a plain secret is not a login");
    px_secrets_unref(s);
    write_str(d, "broken", "{\"claudeAiOauth\": {\"accessToken\": \"sk-ant-oat01-REAL-c\"}}\n",
              0600);
    s = NULL;
    ok(px_secrets_load(d, &s, err, sizeof(err)) == -1 && s == NULL &&
           err_has("/broken: a login file (JSON) egressd cannot keep: an Anthropic login "
                   "(claudeAiOauth) without refreshToken") &&
           strstr(err, "REAL") == NULL,
       "a login without its refresh token is refused: file and field named, no value");
    write_str(d, "broken", "{\"some\": \"json\"}\n", 0600);
    ok(px_secrets_load(d, &s, err, sizeof(err)) == -1 && err_has("/broken: a login file (JSON)"),
       "JSON of no CLI's shape is refused, not taken as a header value");
}

/* The refresh-token placeholder: the same shape, another HMAC label. */
static void test_placeholder_refresh(void)
{
    char a[PX_PLACEHOLDER_MAX], b[PX_PLACEHOLDER_MAX];

    /* printf 'refresh-token\x00101\x00anthropic' |
     *   openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f */
    size_t n = px_placeholder_refresh(K, "101", "anthropic", a, sizeof(a));
    ok(n == strlen(a) && strcmp(a, "egressd-ph-anthropic-863433b173c1c8d0fc9097dcdbecb4c8") == 0,
       "known answer: the refresh placeholder of sandbox 101, login anthropic (%s)", a);
    px_placeholder(K, "101", "anthropic", b, sizeof(b));
    ok(strcmp(a, b) != 0 && px_placeholder_shape(a, n, NULL, NULL),
       "it is not the access placeholder, and has the placeholder shape");
    ok(px_placeholder_refresh(K, "101", "Anthropic", a, sizeof(a)) == 0, "not a secret's name: 0");
}

static void test_appliance(void)
{
    char dir[512], path[700], want[800];
    uint8_t k1[32], k2[32];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s", mkdir_at("state", 0700));
    snprintf(path, sizeof(path), "%s/appliance.key", dir);
    EVP_PKEY *a = key_load(dir);
    ok(a != NULL && EVP_PKEY_is_a(a, "EC"), "no key yet: one is made");
    if (a == NULL)
        diag("error: %s", err);
    ok(stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600,
       "appliance.key is mode 0600");
    FILE *f = fopen(path, "r");
    char line[64] = "";
    if (f != NULL && fgets(line, sizeof(line), f) == NULL)
        line[0] = '\0';
    if (f != NULL)
        fclose(f);
    ok(strcmp(line, "-----BEGIN PRIVATE KEY-----\n") == 0, "in PKCS#8 PEM");
    ok(count_entries(dir), "no temporary file is left behind");
    EVP_PKEY *b = key_load(dir);
    ok(b != NULL && EVP_PKEY_eq(a, b) == 1, "the next load reads the same key");
    ok(px_appliance_placeholder_key(a, k1, err, sizeof(err)) == 0 &&
           px_appliance_placeholder_key(b, k2, err, sizeof(err)) == 0 && memcmp(k1, k2, 32) == 0,
       "and derives the same placeholder key");
    EVP_PKEY_free(b);

    chmod(path, 0644);
    snprintf(want, sizeof(want), "%s: mode 0644 is looser than 0600; chmod 600 it", path);
    ok(key_load(dir) == NULL && err_is(want), "a 0644 key is refused");
    chmod(path, 0640);
    ok(key_load(dir) == NULL && err_has("mode 0640 is looser"), "so is 0640");
    chmod(path, 0400);
    b = key_load(dir);
    ok(b != NULL && EVP_PKEY_eq(a, b) == 1, "0400 is fine");
    EVP_PKEY_free(b);
    chmod(path, 0600);
    if (geteuid() == 0 && chown(path, 1, 1) == 0) {
        snprintf(want, sizeof(want), "%s: owned by uid 1, not by egressd's uid 0; chown it", path);
        ok(key_load(dir) == NULL && err_is(want), "a key of another uid is refused");
        if (chown(path, 0, 0) == -1)
            die("chown");
    } else {
        ok(1, "# SKIP not root: cannot make a file of another uid");
    }

    /* A symbolic link, even to the key itself. */
    char moved[720];
    snprintf(moved, sizeof(moved), "%s/real.key", dir);
    if (rename(path, moved) == -1 || symlink("real.key", path) == -1)
        die("symlink");
    snprintf(want, sizeof(want), "%s: a symbolic link; put the key in a regular file", path);
    ok(key_load(dir) == NULL && err_is(want), "a symbolic link is refused");
    unlink(path);
    if (rename(moved, path) == -1)
        die("rename");

    /* What is not a P-256 private key. */
    write_str(dir, "appliance.key", "not a key\n", 0600);
    ok(key_load(dir) == NULL && err_has("appliance.key: not an unencrypted PEM private key ("),
       "garbage is refused (not replaced)");
    ok(stat(path, &st) == 0 && st.st_size == 10, "  and left as it was");
    EVP_PKEY *p384 = EVP_EC_gen("P-384");
    key_write(dir, p384, NULL);
    ok(key_load(dir) == NULL && err_has("appliance.key: not an EC P-256 key"),
       "a P-384 key is refused");
    key_write(dir, a, "pass phrase");
    ok(key_load(dir) == NULL && err_has("appliance.key: not an unencrypted PEM private key"),
       "an encrypted key is refused, without asking for a pass phrase");
    EVP_PKEY_free(p384);

    /* The known answer. */
    write_str(dir, "appliance.key", kat_pem, 0600);
    b = key_load(dir);
    ok(b != NULL && px_appliance_placeholder_key(b, k1, err, sizeof(err)) == 0 &&
           memcmp(k1, kat_k, 32) == 0,
       "known answer: the placeholder key of a fixed key (openssl kdf HKDF)");
    ok(b != NULL && !EVP_PKEY_eq(a, b), "which is not the one made before");
    EVP_PKEY_free(b);
    EVP_PKEY_free(a);

    ok(key_load("") == NULL && err_has("no state-dir"), "no state-dir: refused");
    snprintf(path, sizeof(path), "%s/missing", top);
    ok(key_load(path) == NULL && err_has("/missing/.appliance.key.") &&
           err_has("cannot create a temporary file: No such file or directory"),
       "a state-dir that is not there: refused, naming it");
}

int main(void)
{
    const char *anthropic = NULL;
    char cmd[400];

    px_log_init("test_secrets", false);
    umask(077);
    snprintf(top, sizeof(top), "%s/test_secrets.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(top) == NULL)
        die("mkdtemp");

    test_names();
    struct px_secrets *s = test_good(&anthropic);
    test_memory(s, anthropic);
    test_refs(s, anthropic);
    test_empty();
    test_refusals();
    test_placeholder();
    test_placeholder_refresh();
    test_logins();
    test_appliance();

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
    if (system(cmd) != 0)
        diag("could not remove %s", top);
    return tap_done();
}
